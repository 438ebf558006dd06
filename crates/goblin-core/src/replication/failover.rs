//! FAILOVER: the primary role handed to one of this server's replicas on Redis's protocol (a
//! redis-server, or a goblin-core that follows this one by REPLICAOF), without losing a write,
//! as Redis 6.2+ runs it; and the other side of it, `PSYNC <replid> <offset> FAILOVER`, by
//! which a primary tells its replica to take over.
//!
//! ```text
//! FAILOVER [TO host port [FORCE]] [TIMEOUT ms]
//!   -> waiting-for-sync: client writes wait on their connections (and nothing expires), so
//!      the stream's offset stands still; no PING goes into the stream either
//!   cron: a replica (the one named, else any) acknowledged the stream's whole offset
//!      (or TIMEOUT passed with FORCE)
//!   -> failover-in-progress: this server follows that replica, its handshake's PSYNC
//!      continuing this server's own stream and carrying FAILOVER
//!   target: the replication ID is the one it follows -> it becomes a primary, then answers
//!      the PSYNC: +CONTINUE (its stream is the one it followed, under a new ID: PSYNC2)
//!   +CONTINUE / +FULLRESYNC -> no-failover: the held writes run, and are refused (READONLY)
//! TIMEOUT without FORCE, a refused PSYNC, or FAILOVER ABORT -> no-failover, still (or again)
//!   a primary: the held writes run
//! ```
//!
//! Invariants:
//! - while a failover waits or is in progress no client write runs, so the replica that takes
//!   over holds every write this server acknowledged (FORCE gives that up after its timeout,
//!   as Redis's does);
//! - REPLICAOF and SYNC/PSYNC are refused until it ends: one change of role at a time.

use super::redis_replicas::replica_ip;
use crate::conn::Conn;
use crate::server::Server;
use resp::reply;
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// Where a failover is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Writes are held until a replica acknowledges the whole stream.
    WaitForSync,
    /// This server follows the target; its PSYNC asks the target to take over.
    InProgress,
}

/// A failover under way (FAILOVER ... until it succeeds or is aborted).
#[derive(Debug)]
pub struct Failover {
    pub phase: Phase,
    /// The replica named by TO, or the first one found caught up.
    pub target: Option<(String, u16)>,
    /// TIMEOUT: when waiting ends (aborted, or forced with FORCE).
    pub deadline: Option<Instant>,
    pub force: bool,
}

/// The marker a handshake's error carries when the target refused `PSYNC ... FAILOVER`: the
/// failover is aborted (any other failure is retried, as Redis retries its link).
pub const REJECTED: &str = "the failover target refused PSYNC FAILOVER";

impl Failover {
    /// INFO replication's `master_failover_state`.
    pub fn state_name(f: Option<&Failover>) -> &'static str {
        match f.map(|f| f.phase) {
            None => "no-failover",
            Some(Phase::WaitForSync) => "waiting-for-sync",
            Some(Phase::InProgress) => "failover-in-progress",
        }
    }
}

impl Server {
    /// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]: Redis's argument rules, checks
    /// and error texts, in its order.
    pub(crate) fn failover_command(&mut self, out: &mut Vec<u8>, args: &[&[u8]]) {
        if args.len() == 2 && args[1].eq_ignore_ascii_case(b"abort") {
            if self.failover.is_none() {
                return reply::error(out, b"ERR No failover in progress.");
            }
            self.failover_abort("Failover manually aborted");
            return reply::ok(out);
        }
        let (mut timeout_ms, mut force, mut to) = (0i64, false, None::<(String, i64)>);
        let mut j = 1;
        while j < args.len() {
            let a = args[j];
            if a.eq_ignore_ascii_case(b"timeout") && j + 1 < args.len() && timeout_ms == 0 {
                let Some(ms) = engine::util::parse_i64(args[j + 1]) else {
                    return reply::error(out, engine::errors::NOT_INTEGER);
                };
                if ms <= 0 {
                    return reply::error(out, b"ERR FAILOVER timeout must be greater than 0");
                }
                timeout_ms = ms;
                j += 2;
            } else if a.eq_ignore_ascii_case(b"to") && j + 2 < args.len() && to.is_none() {
                let Some(port) = engine::util::parse_i64(args[j + 2]) else {
                    return reply::error(out, engine::errors::NOT_INTEGER);
                };
                to = Some((String::from_utf8_lossy(args[j + 1]).into_owned(), port));
                j += 3;
            } else if a.eq_ignore_ascii_case(b"force") && !force {
                force = true;
                j += 1;
            } else {
                return reply::error(out, engine::errors::SYNTAX);
            }
        }
        if self.failover.is_some() {
            return reply::error(out, b"ERR FAILOVER already in progress.");
        }
        if self.follows_upstream() {
            return reply::error(out, b"ERR FAILOVER is not valid when server is a replica.");
        }
        if self.cfg.kafka.is_some() {
            // It would end as a replica of the target, which a journaling server cannot be.
            return reply::error(
                out,
                b"ERR FAILOVER is refused on a server with a Kafka journal: it would follow the target as REPLICAOF does, which a journaling server cannot",
            );
        }
        if self.redis_replica_conns().next().is_none() {
            return reply::error(out, b"ERR FAILOVER requires connected replicas.");
        }
        if force && (timeout_ms == 0 || to.is_none()) {
            return reply::error(
                out,
                b"ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
            );
        }
        let target = match to {
            Some((host, port)) => {
                let Some((_, online)) = self.failover_find_replica(&host, port) else {
                    return reply::error(out, b"ERR FAILOVER target HOST and PORT is not a replica.");
                };
                if !online {
                    return reply::error(out, b"ERR FAILOVER target replica is not online.");
                }
                info!("FAILOVER requested to {host}:{port}.");
                Some((host, port as u16))
            }
            None => {
                info!("FAILOVER requested to any replica.");
                None
            }
        };
        let deadline = (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64));
        self.failover = Some(Failover { phase: Phase::WaitForSync, target, deadline, force });
        // Nothing changes by itself while the replica catches up (as under CLIENT PAUSE WRITE).
        self.engine.replica = true;
        reply::ok(out);
    }

    /// The replica on Redis's protocol at `host`:`port` (its announced or connected address
    /// and its listening port, as Redis matches them): its stream offset acknowledged, and
    /// whether it is online (its RDB file delivered).
    fn failover_find_replica(&self, host: &str, port: i64) -> Option<(u64, bool)> {
        self.redis_replica_conns().find_map(|(c, link)| {
            let matches = replica_ip(c).eq_ignore_ascii_case(host) && i64::from(c.replconf_port) == port;
            matches.then_some((link.ack, !c.dumping))
        })
    }

    /// From the cron: a waiting failover times out, or starts once its replica caught up.
    pub(crate) fn failover_cron(&mut self) {
        let Some(f) = &self.failover else { return };
        if f.phase != Phase::WaitForSync {
            return;
        }
        if f.deadline.is_some_and(|d| Instant::now() >= d) {
            match (&f.target, f.force) {
                (Some((host, port)), true) => {
                    let (host, port) = (host.clone(), *port);
                    info!("FAILOVER to {host}:{port} time out exceeded, failing over.");
                    return self.failover_start(host, port);
                }
                _ => return self.failover_abort("Replica never caught up before timeout"),
            }
        }
        let Some(offset) = self.redis_replicas.stream_offset() else { return };
        let caught_up = match &f.target {
            Some((host, port)) => self
                .failover_find_replica(host, i64::from(*port))
                .filter(|&(ack, online)| online && ack == offset)
                .map(|_| (host.clone(), *port)),
            None => self.redis_replica_conns().find_map(|(c, link)| {
                if c.dumping || link.ack != offset {
                    return None;
                }
                Some((replica_ip(c).to_string(), c.replconf_port))
            }),
        };
        if let Some((host, port)) = caught_up {
            info!("Failover target {host}:{port} is synced, failing over.");
            self.failover_start(host, port);
        }
    }

    /// Becomes a replica of the target, asking it (PSYNC ... FAILOVER) to take over and to
    /// continue this server's stream from where its replicas stand.
    fn failover_start(&mut self, host: String, port: u16) {
        let Some(f) = self.failover.as_mut() else { return };
        f.phase = Phase::InProgress;
        f.target = Some((host.clone(), port));
        let cached = self.redis_replicas.stream_id_offset().map(|(id, offset)| (id, offset as i64, 0));
        self.follow_redis_primary(host, port, cached, true);
        self.refresh_oom_score();
    }

    /// The target answered the PSYNC: it is the primary now, and this server its replica.
    pub(crate) fn failover_done(&mut self) {
        if let Some(Failover { target: Some((host, port)), .. }) = &self.failover {
            info!("FAILOVER to {host}:{port} done: this server is a replica of it");
        }
        if let Some(p) = self.redis_primary.as_mut() {
            p.failover = false;
        }
        self.failover_clear();
    }

    /// Ends a failover that did not happen: a server that started following the target
    /// becomes a primary again (its data and history as they were).
    pub(crate) fn failover_abort(&mut self, why: &str) {
        let Some(f) = &self.failover else { return };
        match &f.target {
            Some((host, port)) => info!("FAILOVER to {host}:{port} aborted: {why}"),
            None => info!("FAILOVER to any replica aborted: {why}"),
        }
        if f.phase == Phase::InProgress {
            self.stop_following_redis_primary();
            self.refresh_oom_score();
        }
        self.failover_clear();
    }

    /// No failover any more: the writes it held run (and now meet the server's new role).
    fn failover_clear(&mut self) {
        self.failover = None;
        self.engine.replica = self.data_frozen();
        if self.pause.until.is_none() {
            self.run_all_held();
        }
    }

    /// `PSYNC <replid> <offset> FAILOVER` from this server's primary: if `replid` is the
    /// stream this server follows, it becomes a primary (as REPLICAOF NO ONE), and the PSYNC
    /// goes on as any replica's. False when it was refused (the error is in `c.out`).
    pub(crate) fn psync_failover(&mut self, c: &mut Conn, replid: &[u8]) -> bool {
        info!("Failover request received for replid {}.", String::from_utf8_lossy(replid));
        if self.replica.is_some() {
            reply::error(
                &mut c.out,
                b"ERR PSYNC FAILOVER can't be sent to a replica of the --replica-* kind: restart it without one to serve writes",
            );
            return false;
        }
        let Some(p) = &self.redis_primary else {
            reply::error(&mut c.out, b"ERR PSYNC FAILOVER can't be sent to a master.");
            return false;
        };
        if !p.replid.as_deref().is_some_and(|id| id.as_bytes().eq_ignore_ascii_case(replid)) {
            reply::error(&mut c.out, b"ERR PSYNC FAILOVER replid must match my replid.");
            return false;
        }
        self.stop_following_redis_primary();
        self.refresh_oom_score();
        warn!("MASTER MODE enabled (failover request from 'id={} addr={}')", c.id, c.addr);
        true
    }
}
