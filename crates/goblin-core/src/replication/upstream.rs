//! The upstream side of the firehose: `GOBLIN.FIREHOSE` subscribers (replicas, and the
//! replicas of replicas) and the batch sink that feeds them.
//!
//! ```text
//! Server::commit_batch -> Firehose::on_batch: encode the frame once
//!     queued mode (or no journal): copy it into every subscriber's fixed queue now
//!     broker mode: keep it in `retained` until Kafka acknowledged its last record
//!                  (Server::firehose_release, after each journal poll), then copy it
//! flush_conn -> a subscriber's socket is written from its queue (after any reply in `out`)
//! GOBLIN.ACK <offset> from a subscriber -> its applied offset (INFO, ROLE, WAIT)
//! ```
//!
//! Invariants:
//! - frames reach every subscriber in commit order, each whole, starting right after the
//!   offset its hello named: a subscriber's hello carries `released()`, and every batch after
//!   it is either already in its queue or still retained;
//! - a subscriber whose queue cannot take a frame is disconnected at once (never a partial
//!   frame, never a gap followed by later frames, never more memory);
//! - a frame larger than a whole queue (one big value, a big MSET, a script's many writes),
//!   which no queue could ever take, is a `Spill`: written from one copy the subscribers
//!   share, at its exact place in the subscriber's byte stream (after the queue bytes pushed
//!   before it), up to `client-output-buffer-limit replica`'s hard limit of such bytes waiting
//!   per subscriber; past it the subscriber is disconnected as for a full queue.
//! - in broker mode no frame leaves before Kafka acknowledged all of its records.

use super::frame::{self, Cursor};
use super::queue::MmapQueue;
use crate::conn::Conn;
use crate::server::Server;
use engine::{Batch, Origin};
use resp::reply;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;
use tracing::{info, warn};

/// How often an idle subscriber gets a tick.
const TICK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// One subscriber's state, kept in its connection.
pub struct Downstream {
    /// Frames not yet written to the socket (fixed size: `--replication-buffer-bytes`).
    pub queue: MmapQueue,
    /// The offset the subscriber last reported applied (GOBLIN.ACK); its hello offset before.
    pub acked: u64,
    /// When it last acknowledged something (INFO `lag`).
    pub acked_at: Instant,
    /// A frame was queued since the last heartbeat round: no tick needed.
    pub sent_since_tick: bool,
    /// Frames too large for the queue, in order, each after the queue bytes pushed before it.
    pub spills: VecDeque<Spill>,
}

/// A frame larger than the subscriber's whole queue, written from a copy shared by every
/// subscriber that got it.
pub struct Spill {
    pub frame: Arc<[u8]>,
    /// Bytes of it already written.
    pub written: usize,
    /// The queue's `pushed_total()` when it came: it goes out once exactly that many queue
    /// bytes have been written, and the queue's later bytes after it.
    pub at: u64,
}

impl Downstream {
    /// Bytes of spilled frames not yet written.
    fn spilled_pending(&self) -> usize {
        self.spills.iter().map(|s| s.frame.len() - s.written).sum()
    }

    /// Whether anything waits to be written (queue or spills).
    pub fn has_pending(&self) -> bool {
        !self.queue.is_empty() || !self.spills.is_empty()
    }

    /// The next bytes to write: the queue's up to the next spill's place, or that spill's
    /// rest; empty when nothing waits.
    pub fn next_piece(&self) -> &[u8] {
        match self.spills.front() {
            Some(s) if s.at == self.queue.consumed_total() => &s.frame[s.written..],
            Some(s) => {
                let r = self.queue.readable();
                let before = usize::try_from(s.at - self.queue.consumed_total()).unwrap_or(usize::MAX);
                &r[..r.len().min(before)]
            }
            None => self.queue.readable(),
        }
    }

    /// Records that the first `n` bytes of `next_piece()` were written.
    pub fn wrote(&mut self, n: usize) {
        match self.spills.front_mut() {
            Some(s) if s.at == self.queue.consumed_total() => {
                s.written += n;
                if s.written == s.frame.len() {
                    self.spills.pop_front();
                }
            }
            _ => self.queue.consume(n),
        }
    }
}

/// The subscribers and the frames held for Kafka.
#[derive(Default)]
pub struct Firehose {
    /// (slot, connection id) of every subscriber.
    pub subs: Vec<(usize, u64)>,
    /// Broker ack mode: committed frames waiting for Kafka (or behind frames that are), as
    /// (last offset, whether Kafka must acknowledge it, frame).
    retained: VecDeque<(u64, bool, Vec<u8>)>,
    /// The offset through which frames have been released (broker mode only; queued mode
    /// releases at commit, so the engine's offset is the released one).
    released: u64,
    /// Reused to encode one frame.
    scratch: Vec<u8>,
    /// Subscribers disconnected because their queue was full.
    pub full_disconnections: u64,
    /// When the last heartbeat round ran.
    last_tick: Option<Instant>,
}

impl Firehose {
    /// After recovery: everything up to `offset` is durable (broker mode releases from here).
    pub fn set_released(&mut self, offset: u64) {
        self.released = offset;
    }

    pub fn retained_bytes(&self) -> usize {
        self.retained.iter().map(|(_, _, f)| f.len()).sum()
    }
}

impl Server {
    /// The offset a new subscriber's hello names: the last offset whose frame has been released.
    pub(crate) fn firehose_released(&self) -> u64 {
        if self.acks_held() {
            self.firehose.released
        } else {
            self.engine.repl.offset
        }
    }

    /// The Kafka cursor this server stamps on the frames it sends (see `frame::Cursor`).
    pub(crate) fn kafka_cursor(&self) -> Cursor {
        #[cfg(feature = "kafka")]
        if let Some(j) = &self.journal {
            return Cursor { logical: j.journal.acks.logical.get(), broker: j.journal.acks.broker.get() };
        }
        match &self.replica {
            Some(r) => r.cursor,
            None => Cursor::UNKNOWN,
        }
    }

    /// GOBLIN.FIREHOSE: turns this connection into a subscriber. The hello goes out after any
    /// earlier reply; from then on the connection only carries frames (and, the other way,
    /// GOBLIN.ACKs).
    pub(crate) fn firehose_subscribe(&mut self, c: &mut Conn, slot: usize) {
        if c.firehose.is_some() {
            return reply::error(&mut c.out, b"ERR this connection is already a firehose subscriber");
        }
        if c.multi.is_some() {
            return reply::error(&mut c.out, b"ERR Command not allowed inside a transaction");
        }
        if let Some(r) = &self.replica {
            if !r.is_live() {
                return reply::error(
                    &mut c.out,
                    format!(
                        "MASTERDOWN this replica's upstream link is not live (replica_state:{}): it cannot feed a firehose until it is",
                        r.state.name()
                    )
                    .as_bytes(),
                );
            }
        }
        let mut queue = match MmapQueue::new(self.cfg.replication_buffer_bytes) {
            Ok(q) => q,
            Err(e) => {
                return reply::error(&mut c.out, format!("ERR cannot map the firehose queue: {e}").as_bytes())
            }
        };
        let offset = self.firehose_released();
        let mut hello = Vec::with_capacity(128);
        frame::encode_hello(&mut hello, self.engine.repl.replid, offset, self.engine.repl.previous);
        // A fresh queue of at least a page always holds a hello.
        assert!(queue.push(&hello), "a hello fits an empty queue");
        c.firehose = Some(Box::new(Downstream {
            queue,
            acked: offset,
            acked_at: Instant::now(),
            sent_since_tick: true,
            spills: VecDeque::new(),
        }));
        self.firehose.subs.push((slot, c.id));
        info!(
            "firehose subscriber id={} addr={} attached at logical offset {offset} of lineage {}",
            c.id, c.addr, self.engine.repl.replid
        );
    }

    /// The firehose sink (from `commit_batch`).
    pub(crate) fn firehose_on_batch(&mut self, batch: &Batch) {
        // Batches the journal does not write (other producers' records, already in Kafka;
        // replayed ones) need no acknowledgement, but still wait behind retained frames to
        // keep the order.
        let held = self.acks_held() && !matches!(batch.origin, Origin::Replay | Origin::External);
        if self.firehose.subs.is_empty() && !held {
            return;
        }
        let cursor = self.kafka_cursor();
        let mut f = std::mem::take(&mut self.firehose.scratch);
        f.clear();
        frame::encode_batch(&mut f, batch, cursor, self.journal_consumer_position());
        if held || !self.firehose.retained.is_empty() {
            // Behind Kafka (or behind frames that are): wait for the acknowledgement. The
            // frame itself is kept (the next one gets a fresh buffer).
            self.firehose.retained.push_back((batch.last_offset(), held, f));
        } else {
            self.firehose_send(&f);
            self.firehose.scratch = f;
        }
    }

    /// Broker mode: releases, in order, the retained frames Kafka has acknowledged.
    pub(crate) fn firehose_release(&mut self, acked: i64) {
        while let Some(&(last, needs_ack, _)) = self.firehose.retained.front() {
            if needs_ack && (last as i64) > acked {
                break;
            }
            let (last, _, f) = self.firehose.retained.pop_front().expect("front exists");
            self.firehose.released = last;
            self.firehose_send(&f);
        }
    }

    /// Copies one frame into every subscriber's queue; a full queue disconnects its subscriber.
    /// A frame larger than a whole queue spills (see the module's invariants).
    fn firehose_send(&mut self, f: &[u8]) {
        let spill_limit = usize::try_from(self.output_limits.replica.hard).unwrap_or(usize::MAX);
        let mut shared: Option<Arc<[u8]>> = None;
        let mut i = 0;
        while i < self.firehose.subs.len() {
            let (slot, id) = self.firehose.subs[i];
            let Some(Some(c)) = self.conns.get_mut(slot) else {
                // Being served right now: a subscriber is only served for its GOBLIN.ACKs,
                // which commit nothing, so this cannot happen while a batch is sent.
                i += 1;
                continue;
            };
            if c.id != id {
                self.firehose.subs.swap_remove(i);
                continue;
            }
            let d = c.firehose.as_mut().expect("listed subscribers have a queue");
            d.sent_since_tick = true;
            let refused = if c.close_now {
                None
            } else if f.len() <= d.queue.capacity() {
                (!d.queue.push(f)).then(|| format!("its {}-byte queue is full", d.queue.capacity()))
            } else if spill_limit == 0 || d.spilled_pending() + f.len() <= spill_limit {
                let frame = shared.get_or_insert_with(|| Arc::from(f)).clone();
                d.spills.push_back(Spill { frame, written: 0, at: d.queue.pushed_total() });
                None
            } else {
                Some(format!(
                    "a {}-byte frame, larger than its {}-byte queue, would leave more than client-output-buffer-limit replica's {spill_limit} bytes of such frames waiting",
                    f.len(),
                    d.queue.capacity()
                ))
            };
            if let Some(why) = refused {
                warn!("disconnecting firehose subscriber id={} addr={}: {why}", c.id, c.addr);
                c.close_now = true;
                self.firehose.full_disconnections += 1;
            }
            self.queue_write(slot);
            i += 1;
        }
    }

    /// From the cron, once a second: a tick to every subscriber that got no frame since the last
    /// round, so that its replica can tell an idle upstream from a dead one.
    pub(crate) fn firehose_ticks(&mut self) {
        if self.firehose.subs.is_empty() || self.firehose.last_tick.is_some_and(|t| t.elapsed() < TICK_EVERY)
        {
            return;
        }
        self.firehose.last_tick = Some(Instant::now());
        let mut tick = Vec::with_capacity(32);
        frame::encode_tick(&mut tick, self.firehose_released(), self.kafka_cursor());
        for i in 0..self.firehose.subs.len() {
            let (slot, id) = self.firehose.subs[i];
            let Some(Some(c)) = self.conns.get_mut(slot) else { continue };
            if c.id != id {
                continue;
            }
            let d = c.firehose.as_mut().expect("listed subscribers have a queue");
            // A full queue gets no tick: its subscriber is about to be cut off anyway.
            if !std::mem::replace(&mut d.sent_since_tick, false) && d.queue.push(&tick) {
                self.queue_write(slot);
            }
        }
    }

    /// Input from a subscriber: only `GOBLIN.ACK <offset>`; anything else ends the link.
    pub(crate) fn downstream_input(&mut self, c: &mut Conn, args: &[&[u8]]) {
        let offset = (args.len() == 2 && args[0].eq_ignore_ascii_case(b"GOBLIN.ACK"))
            .then(|| std::str::from_utf8(args[1]).ok()?.parse::<u64>().ok())
            .flatten();
        match offset {
            Some(o) => {
                let d = c.firehose.as_mut().expect("a subscriber");
                // The same offset again is an idle subscriber saying it is alive.
                d.acked_at = Instant::now();
                if o > d.acked {
                    d.acked = o;
                    self.waits_dirty = true;
                }
            }
            None => {
                warn!(
                    "closing firehose subscriber id={} addr={}: it sent '{}' (only GOBLIN.ACK is accepted)",
                    c.id,
                    c.addr,
                    String::from_utf8_lossy(args[0])
                );
                c.close_now = true;
            }
        }
    }

    /// Losing the upstream: a replica's own subscribers must not sit through what it replays
    /// next, so they are disconnected and reconnect once it is live again.
    pub(crate) fn firehose_disconnect_all(&mut self) {
        let subs = std::mem::take(&mut self.firehose.subs);
        self.close_links(subs);
        self.firehose.retained.clear();
    }

    /// Closes the connections (slot, id) that are still those connections: a replica link
    /// whose stream can no longer continue.
    pub(crate) fn close_links(&mut self, links: Vec<(usize, u64)>) {
        for (slot, id) in links {
            if let Some(Some(c)) = self.conns.get_mut(slot) {
                if c.id == id {
                    c.close_now = true;
                    self.queue_write(slot);
                }
            }
        }
    }

    /// The subscribers' connections (those in their slots: one being served is skipped).
    fn subscribers(&self) -> impl Iterator<Item = (&Conn, &Downstream)> {
        self.firehose.subs.iter().filter_map(|&(slot, id)| match self.conns.get(slot) {
            Some(Some(c)) if c.id == id => Some((&**c, c.firehose.as_deref()?)),
            _ => None,
        })
    }

    /// Every replica's applied offset, for INFO and ROLE: (addr, logical offset, seconds since
    /// its last acknowledgement, state as INFO's `slaveN` line names it). Firehose subscribers
    /// first, then redis-server replicas (`replication::redis_replicas`).
    pub(crate) fn downstreams(&self) -> Vec<(String, u64, u64, &'static str)> {
        let firehose = self
            .subscribers()
            .map(|(c, d)| (c.addr.clone(), d.acked, d.acked_at.elapsed().as_secs(), "online"));
        let redis = self.redis_replica_links().into_iter().map(|(addr, acked, lag, loading)| {
            (addr, acked, lag, if loading { "send_bulk" } else { "online" })
        });
        let waiting = self.sync_waiting_addrs().into_iter().map(|addr| (addr, 0, 0, "wait_bgsave"));
        firehose.chain(redis).chain(waiting).collect()
    }

    /// Bytes mapped for the subscribers' queues, and the spilled frames they still hold (each
    /// shared copy once): INFO `mem_clients_slaves`.
    pub(crate) fn firehose_queue_bytes(&self) -> usize {
        let mut spilled: Vec<(*const u8, usize)> = Vec::new();
        let mut mapped = 0;
        for (_, d) in self.subscribers() {
            mapped += d.queue.capacity();
            spilled.extend(d.spills.iter().map(|s| (s.frame.as_ptr(), s.frame.len())));
        }
        spilled.sort_unstable();
        spilled.dedup();
        mapped + spilled.iter().map(|&(_, len)| len).sum::<usize>()
    }

    /// How many replicas (firehose subscribers and redis-server replicas) have applied
    /// `offset` or more: WAIT's count.
    pub(crate) fn downstreams_at(&self, offset: u64) -> usize {
        let redis = self.redis_replica_conns().filter(|(_, link)| link.acked_logical >= offset).count();
        self.firehose_at(offset) + redis
    }

    /// Replicas that count for `min-replicas-to-write`: firehose subscribers and redis-server
    /// replicas done with their RDB file that acknowledged within `max_lag` seconds.
    pub(crate) fn good_replicas(&self, max_lag: u64) -> usize {
        let firehose = self.subscribers().filter(|(_, d)| d.acked_at.elapsed().as_secs() <= max_lag).count();
        let redis = self
            .redis_replica_conns()
            .filter(|(c, link)| !c.dumping && link.ack_at.elapsed().as_secs() <= max_lag)
            .count();
        firehose + redis
    }

    /// Whether a write is refused for want of replicas (NOREPLICAS): only on a primary, with
    /// both `min-replicas-to-write` and `min-replicas-max-lag` set, as Redis checks it.
    pub(crate) fn lacks_good_replicas(&self) -> bool {
        let (n, lag) = (self.cfg.min_replicas_to_write, self.cfg.min_replicas_max_lag);
        !self.follows_upstream() && n > 0 && lag > 0 && self.good_replicas(lag) < n as usize
    }

    /// How many firehose subscribers have applied `offset` or more.
    pub(crate) fn firehose_at(&self, offset: u64) -> usize {
        self.subscribers().filter(|(_, d)| d.acked >= offset).count()
    }
}

/// `WAIT numreplicas timeout` and `WAITAOF numlocal numreplicas timeout` park their client as
/// a blocking command with no key; its `Parked::args` are `["WAIT", target offset,
/// numreplicas]` or `["WAITAOF", target offset, numlocal, numreplicas]`.
pub(crate) fn is_wait(p: &crate::conn::Parked) -> bool {
    p.args.first().is_some_and(|a| a == b"WAIT" || a == b"WAITAOF")
}

fn parked_number(p: &crate::conn::Parked, i: usize) -> u64 {
    p.args.get(i).and_then(|a| std::str::from_utf8(a).ok()?.parse().ok()).unwrap_or(0)
}

impl Server {
    /// WAIT: how many subscribers have applied this client's last write, waiting up to
    /// `timeout` ms (0: for ever) for `numreplicas` of them.
    pub(crate) fn wait_command(&mut self, c: &mut Conn, slot: usize, args: &[&[u8]]) {
        if self.follows_upstream() {
            return reply::error(&mut c.out, b"ERR WAIT cannot be used with replica instances.");
        }
        let int = |a: &[u8]| std::str::from_utf8(a).ok().and_then(|s| s.parse::<i64>().ok());
        let Some(num) = int(args[1]) else {
            return reply::error(&mut c.out, b"ERR value is not an integer or out of range");
        };
        let Some(timeout) = int(args[2]) else {
            return reply::error(&mut c.out, b"ERR timeout is not an integer or out of range");
        };
        if timeout < 0 {
            return reply::error(&mut c.out, b"ERR timeout is negative");
        }
        // Parsed whole before anything else, as Redis: a deadline the clock cannot hold is
        // out of range even when no wait is needed.
        let deadline = match engine::util::deadline_after(timeout, self.clock_ms) {
            Ok(d) => d,
            Err(e) => return reply::error(&mut c.out, e),
        };
        let target = c.last_write_offset;
        let have = self.downstreams_at(target);
        // In a transaction or a script, the count it has, at once.
        if have as i64 >= num || c.multi.is_some() || self.in_exec || crate::scripting::running() {
            return reply::integer(&mut c.out, have as i64);
        }
        let t = target.to_string();
        let n = num.to_string();
        let argv: [&[u8]; 3] = [b"WAIT", t.as_bytes(), n.as_bytes()];
        self.park(c, slot, &argv, engine::BlockOn { deadline, ..Default::default() });
        self.waits.push((slot, c.id));
        // redis-server replicas report their offsets each second; asked, at once.
        self.redis_replicas.want_acks = true;
    }

    /// WAITAOF: Redis's wait for the append-only file, on goblin-core's durable log. "Local"
    /// is the Kafka journal: 1 once Kafka has acknowledged this client's last write (in
    /// `queued` ack mode this is how a client learns that what it was told OK is durable; in
    /// `broker` mode the write's own reply already waited for it). A replica keeps no log of
    /// its own: it recovers from a snapshot plus the same topic. So it counts once it has
    /// applied the write and Kafka has acknowledged it, and never without a journal (as Redis
    /// counts no replica whose AOF is off).
    pub(crate) fn waitaof_command(&mut self, c: &mut Conn, slot: usize, args: &[&[u8]]) {
        if self.follows_upstream() {
            return reply::error(
                &mut c.out,
                b"ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.",
            );
        }
        let int = |a: &[u8]| std::str::from_utf8(a).ok().and_then(|s| s.parse::<i64>().ok());
        let Some(numlocal) = int(args[1]) else {
            return reply::error(&mut c.out, b"ERR value is not an integer or out of range");
        };
        if !(0..=1).contains(&numlocal) {
            return reply::error(&mut c.out, b"ERR value is out of range, value must between 0 and 1");
        }
        let Some(numreplicas) = int(args[2]) else {
            return reply::error(&mut c.out, b"ERR value is not an integer or out of range");
        };
        if numreplicas < 0 {
            return reply::error(&mut c.out, b"ERR value is out of range, must be positive");
        }
        let Some(timeout) = int(args[3]) else {
            return reply::error(&mut c.out, b"ERR timeout is not an integer or out of range");
        };
        if timeout < 0 {
            return reply::error(&mut c.out, b"ERR timeout is negative");
        }
        // Parsed whole before anything else, as Redis: a deadline the clock cannot hold is
        // out of range even when no wait is needed.
        let deadline = match engine::util::deadline_after(timeout, self.clock_ms) {
            Ok(d) => d,
            Err(e) => return reply::error(&mut c.out, e),
        };
        if numlocal > 0 && self.journal_acknowledged().is_none() {
            return reply::error(
                &mut c.out,
                b"ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.",
            );
        }
        let target = c.last_write_offset;
        let (local, replicas) = self.durable_counts(target);
        let unblockable = c.multi.is_some() || self.in_exec || crate::scripting::running();
        if (local as i64 >= numlocal && replicas as i64 >= numreplicas) || unblockable {
            return waitaof_reply(&mut c.out, local, replicas);
        }
        let (t, l, n) = (target.to_string(), numlocal.to_string(), numreplicas.to_string());
        let argv: [&[u8]; 4] = [b"WAITAOF", t.as_bytes(), l.as_bytes(), n.as_bytes()];
        self.park(c, slot, &argv, engine::BlockOn { deadline, ..Default::default() });
        self.waits.push((slot, c.id));
        if local == 0 {
            self.journal_hurry = self.journal_hurry.max(target);
        }
    }

    /// The highest logical offset Kafka has acknowledged (-1 before the first), or None
    /// without a journal.
    pub(crate) fn journal_acknowledged(&self) -> Option<i64> {
        #[cfg(feature = "kafka")]
        if let Some(j) = &self.journal {
            return Some(j.journal.acks.logical.get());
        }
        None
    }

    /// For WAITAOF: (1 if the journal holds `target`, how many subscribers applied it and
    /// can recover it from the journal). Offset 0 is "no write yet": held by any journal.
    fn durable_counts(&self, target: u64) -> (usize, usize) {
        match self.journal_acknowledged() {
            // A redis-server replica keeps no journal of its own: not counted.
            Some(acked) if target == 0 || acked >= target as i64 => (1, self.firehose_at(target)),
            _ => (0, 0),
        }
    }

    /// Whether a parked WAIT or WAITAOF has what it asked for.
    fn wait_satisfied(&self, p: &crate::conn::Parked) -> bool {
        let target = parked_number(p, 1);
        if p.args[0] == b"WAITAOF" {
            let (local, replicas) = self.durable_counts(target);
            local as u64 >= parked_number(p, 2) && replicas as u64 >= parked_number(p, 3)
        } else {
            self.downstreams_at(target) as u64 >= parked_number(p, 2)
        }
    }

    /// Answers a parked WAIT or WAITAOF with what it has now (served, timed out or
    /// unblocked).
    pub(crate) fn wait_reply(&self, p: &crate::conn::Parked, out: &mut Vec<u8>) {
        let target = parked_number(p, 1);
        if p.args[0] == b"WAITAOF" {
            let (local, replicas) = self.durable_counts(target);
            waitaof_reply(out, local, replicas);
        } else {
            reply::integer(out, self.downstreams_at(target) as i64);
        }
    }

    /// After subscribers acknowledged more: answers the WAITs that have their count.
    pub(crate) fn serve_waits(&mut self) {
        self.waits_dirty = false;
        let mut i = 0;
        while i < self.waits.len() {
            let (slot, id) = self.waits[i];
            let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else {
                self.waits.swap_remove(i);
                continue;
            };
            let done = match &conn.parked {
                Some(p) if conn.id == id && is_wait(p) => {
                    let served = self.wait_satisfied(p);
                    if served {
                        let p = conn.parked.as_ref().expect("parked");
                        let mark = conn.out.len();
                        self.wait_reply(p, &mut conn.out);
                        self.count_unblocked(&conn, mark);
                        self.unpark(&mut conn, slot);
                    }
                    served
                }
                // Answered otherwise (timeout, CLIENT UNBLOCK) or gone.
                _ => true,
            };
            self.conns[slot] = Some(conn);
            if done {
                self.queue_write(slot);
                self.waits.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }
}

/// WAITAOF's reply: [local, replicas].
fn waitaof_reply(out: &mut Vec<u8>, local: usize, replicas: usize) {
    reply::array_len(out, 2);
    reply::integer(out, local as i64);
    reply::integer(out, replicas as i64);
}
