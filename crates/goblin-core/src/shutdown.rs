//! A shutdown that waits for its redis-server replicas (Redis 7's `shutdown-timeout`, default
//! 10 s; skipped by SHUTDOWN NOW, and by a signal whose `shutdown-on-sigterm` or
//! `shutdown-on-sigint` flags say `now`).
//!
//! A replica promoted after this server stops (Sentinel) must hold every write: it keeps no
//! journal of its own. So the replicas get the rest of the stream and `REPLCONF GETACK *`,
//! the final save (if any) is written (recording the stream's end, so that the replicas
//! continue after a restart), and the server waits until every one has acknowledged that
//! end, or the timeout passes; no PING goes out meanwhile. Meanwhile the loop goes on as usual:
//! reads, INFO (`shutdown_in_milliseconds`), the replicas' acknowledgements are served; writes
//! are held on their connections (the pause machinery), and nothing changes the data by itself
//! (`Server::data_frozen`), so the saved file stays exactly what the server holds. SHUTDOWN
//! ABORT cancels the wait: the held writes run, and each waiting SHUTDOWN client is answered
//! an error, as in Redis. A second SHUTDOWN joins the wait, or ends it with NOW.

use crate::server::Server;
use resp::reply;
use std::time::{Duration, Instant};
use tracing::{info, warn};

pub(crate) struct ShutdownWait {
    /// The stream offset every replica must acknowledge.
    target: u64,
    deadline: Instant,
    /// The SHUTDOWN clients waiting (ids; a signal has none): an abort answers them an error.
    requesters: Vec<u64>,
}

impl Server {
    /// Before the final save: asks the redis-server replicas to acknowledge the stream's end
    /// (`REPLCONF GETACK *`), and returns the offset to wait for (None: no replica to wait
    /// for). The GETACK goes first so that the saved file records the stream's very end,
    /// which is where the replicas stand once they caught up: after a restart from that file
    /// they continue with PSYNC (`Server::redis_replicas_resume`).
    pub(crate) fn shutdown_final_acks(&mut self) -> Option<u64> {
        // A replica whose file has just gone out whole is one to wait for.
        if self.snapshots.child_running() {
            self.reap_children();
        }
        self.redis_replicas_ask_final_acks()
    }

    /// After the final save: starts waiting for the replicas to reach `target`.
    pub(crate) fn shutdown_wait_begin(&mut self, target: u64) {
        let bound = Duration::from_secs(self.redis_replicas.shutdown_timeout_secs);
        info!("Waiting for replicas before shutting down.");
        self.shutdown_wait =
            Some(ShutdownWait { target, deadline: Instant::now() + bound, requesters: Vec::new() });
        // Nothing expires meanwhile: the saved file stays what the server holds.
        self.engine.replica = self.data_frozen();
    }

    /// A SHUTDOWN client now waits for the shutdown to finish (no reply: the connection
    /// closes with the server, or gets an error if the shutdown is aborted).
    pub(crate) fn shutdown_wait_join(&mut self, client: u64) {
        if let Some(w) = &mut self.shutdown_wait {
            w.requesters.push(client);
        }
    }

    /// Whether client `id` waits in SHUTDOWN (INFO counts it blocked).
    pub(crate) fn shutdown_waits_for(&self, id: u64) -> bool {
        self.shutdown_wait.as_ref().is_some_and(|w| w.requesters.contains(&id))
    }

    /// INFO `shutdown_in_milliseconds`: what is left of the wait (0 when none).
    pub(crate) fn shutdown_in_ms(&self) -> u64 {
        self.shutdown_wait
            .as_ref()
            .map_or(0, |w| w.deadline.saturating_duration_since(Instant::now()).as_millis() as u64)
    }

    /// Cron: ends the wait once every replica acknowledged the stream or the time is up.
    pub(crate) fn shutdown_wait_cron(&mut self) {
        let Some(w) = &self.shutdown_wait else { return };
        let behind = self.redis_replicas_behind(w.target);
        if behind > 0 && Instant::now() < w.deadline {
            return;
        }
        self.shutdown_wait_finish();
    }

    /// Ends the wait and lets the loop exit: the log says which replicas lag, in Redis's
    /// words, which log watchers look for.
    pub(crate) fn shutdown_wait_finish(&mut self) {
        let Some(w) = self.shutdown_wait.take() else { return };
        let links = self.redis_replica_acks();
        let mut in_sync = 0;
        for (addr, ack) in &links {
            if *ack >= w.target {
                in_sync += 1;
            } else {
                warn!(
                    "Lagging replica {addr} reported offset {ack} behind master ({}), lag={}.",
                    w.target,
                    w.target - ack
                );
            }
        }
        info!("{in_sync} of {} replicas are in sync when shutting down.", links.len());
        // The exit waits again only for what the journal's last flush releases to replicas
        // that kept up (Server::close_all); a lagging one has had its time.
        if in_sync < links.len() {
            self.redis_replicas.shutdown_timeout_secs = 0;
        }
        self.shutdown = true;
    }

    /// SHUTDOWN ABORT: false when no shutdown is waiting. Otherwise the server goes on: the
    /// held writes run, and the waiting SHUTDOWN clients get Redis's error.
    pub(crate) fn shutdown_wait_abort(&mut self) -> bool {
        let Some(w) = self.shutdown_wait.take() else { return false };
        warn!("Shutdown manually aborted.");
        for id in w.requesters {
            let slot = self.conns.iter().position(|c| c.as_ref().is_some_and(|c| c.id == id));
            if let Some(slot) = slot {
                if let Some(Some(c)) = self.conns.get_mut(slot) {
                    reply::error(&mut c.out, b"ERR Errors trying to SHUTDOWN. Check logs.");
                }
                self.queue_write(slot);
            }
        }
        self.engine.replica = self.data_frozen();
        if !self.data_frozen() {
            self.run_all_held();
        }
        true
    }
}
