//! Where committed batches go: the one call site that hands every batch to the sinks.
//!
//! ```text
//! handler emits mutations -> Engine's pending batch
//!   -> Server::commit_batch(origin)          (the end of one atomic unit)
//!        Engine::commit: consecutive logical offsets, the lineage's offset advances
//!        sinks, in this order, each borrowing the batch:
//!          1. WATCH: marks the watchers of every key a mutation names
//!          2. the Kafka journal (--kafka): one record per mutation (journal/kafka.rs),
//!             except for batches of origin External (other producers' records, already in
//!             the topic), which it only counts as durable
//!          3. DEBUG BATCHES: a short history, only with --debug-batch-history and
//!             --enable-debug-command
//!          (next: the firehose downstreams, a snapshot in progress)
//!        Engine::recycle: the batch's buffers serve the next one
//! ```
//!
//! Atomic units and their origins: one client command ([`Origin::Command`]), one EXEC
//! ([`Origin::Exec`]), one script: EVAL/EVALSHA and their _RO forms, everything the script
//! wrote ([`Origin::Script`]; inside MULTI its writes are part of the EXEC's batch), one
//! parked blocking command served later ([`Origin::BlockedRetry`]), one round of active expiry
//! ([`Origin::ActiveExpiry`]), the evictions made before a command to get under maxmemory
//! ([`Origin::Eviction`], committed before the command runs), one bounded run of other
//! producers' records consumed from the journal topic ([`Origin::External`]). Each is committed exactly once, right after it ran,
//! before anything else runs: so sinks see batches in commit order and a batch never
//! interleaves with another.
//!
//! A sink gets `&Batch` and must not keep it: a sink that needs the bytes later (the journal
//! in broker ack mode, a slow downstream) copies them into its own bounded buffer.

use crate::server::Server;
use engine::{Batch, Origin};
use std::collections::VecDeque;

/// What every consumer of committed batches implements.
pub trait BatchSink {
    fn on_batch(&mut self, batch: &Batch);
}

/// The last few committed batches, for `DEBUG BATCHES` (tests and operators inspecting the
/// write path). Bounded in batches and in bytes.
#[derive(Default)]
pub struct BatchHistory {
    /// Each kept batch with what keeping it cost on the heap.
    batches: VecDeque<(Batch, usize)>,
    bytes: usize,
    /// What the kept batches cost on the heap (their copies' allocations, measured).
    allocated: usize,
}

impl BatchHistory {
    const MAX_BATCHES: usize = 256;
    const MAX_BYTES: usize = 1 << 20;

    /// Memory the kept batches hold. A debugging aid's, not the dataset's: eviction leaves it
    /// out (INFO `mem_not_counted_for_evict`), or a small `maxmemory` would evict every key to
    /// make room for the history of the evictions.
    pub fn allocated_bytes(&self) -> usize {
        self.allocated
    }

    /// The kept batches, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Batch> + ExactSizeIterator {
        self.batches.iter().map(|(b, _)| b)
    }
}

impl BatchSink for BatchHistory {
    fn on_batch(&mut self, batch: &Batch) {
        // The copy's cost, as jemalloc counts this thread's allocations (size classes and
        // all), and its place in the queue.
        let thread_allocated = || tikv_jemalloc_ctl::thread::allocatedp::read().map_or(0, |p| p.get());
        let before = thread_allocated();
        let kept = batch.clone();
        let cost = thread_allocated().wrapping_sub(before) as usize + std::mem::size_of::<(Batch, usize)>();
        self.bytes += kept.byte_len();
        self.allocated += cost;
        self.batches.push_back((kept, cost));
        while self.batches.len() > Self::MAX_BATCHES
            || (self.bytes > Self::MAX_BYTES && self.batches.len() > 1)
        {
            if let Some((old, cost)) = self.batches.pop_front() {
                self.bytes -= old.byte_len();
                self.allocated -= cost;
            }
        }
    }
}

impl Server {
    /// Ends the current atomic unit: commits the engine's pending mutations as one batch from
    /// `origin` and hands it to every sink, in order. Does nothing when nothing is pending.
    /// This is the only place batches are committed.
    /// Returns the batch's last logical offset, or None when nothing was committed.
    pub(crate) fn commit_batch(&mut self, origin: Origin) -> Option<u64> {
        if self.follows_upstream() && origin != Origin::Replay && !self.engine.pending().is_empty() {
            // A replica's only writes are its upstream's, at the upstream's offsets: a local
            // mutation would fork the lineage. Writes are refused before they run and reads
            // emit nothing there, so this is a bug; stop rather than diverge.
            tracing::error!(
                "a replica produced a mutation of its own ({:?}): the lineage would fork; exiting",
                origin
            );
            std::process::exit(crate::server::FAIL_STOP_EXIT_CODE);
        }
        let batch = self.engine.commit(origin)?;
        let last = batch.last_offset();
        if !self.watches.is_empty() {
            self.watches.on_batch(&batch);
            for m in batch.iter().filter(|m| m.name().eq_ignore_ascii_case(b"SWAPDB") && m.argc() == 3) {
                if let (Some(a), Some(b)) =
                    (engine::util::parse_i64(m.arg(1)), engine::util::parse_i64(m.arg(2)))
                {
                    self.watches.swapped(a as u32, b as u32, &self.engine, self.clock_ms);
                }
            }
        }
        self.tracking_on_batch(&batch);
        #[cfg(feature = "kafka")]
        if let Some(j) = &mut self.journal {
            // Other producers' records are in the topic already: never journaled again.
            if batch.origin == Origin::External {
                j.journal.external_committed(last);
            } else if let Err(e) = j.journal.on_batch(&batch, self.turn_start, self.clock_ms) {
                self.journal_failed(&e);
            }
        }
        self.firehose_on_batch(&batch);
        self.redis_replicas_on_batch(&batch);
        if !self.blocked.is_empty() {
            self.signal_waiters(&batch);
        }
        if let Some(history) = &mut self.batch_history {
            history.on_batch(&batch);
        }
        self.engine.recycle(batch);
        Some(last)
    }

    /// Signals every key a committed batch names on which some client waits, whatever the
    /// mutation (a DEL, a type change, a RENAME onto it, XGROUP DESTROY), and every waited-on
    /// key after FLUSHALL: a waiter retries and decides. A list or sorted-set pop with nothing to
    /// take parks again; a stream group reader whose key is gone, or whose group is, gets its
    /// error (as Redis unblocks them).
    fn signal_waiters(&mut self, batch: &engine::Batch) {
        let mut hit: Vec<(u32, Vec<u8>)> = Vec::new();
        for m in batch.iter() {
            let name = m.name();
            if name.eq_ignore_ascii_case(b"FLUSHALL") {
                hit.extend(self.blocked.keys().map(|(db, k)| (db, k.clone())));
                continue;
            }
            if name.eq_ignore_ascii_case(b"FLUSHDB") {
                hit.extend(self.blocked.keys_in(m.db).map(|k| (m.db, k.clone())));
                continue;
            }
            // Both databases' contents changed places: every waiter in either looks again.
            if name.eq_ignore_ascii_case(b"SWAPDB") && m.argc() == 3 {
                for arg in [m.arg(1), m.arg(2)] {
                    if let Some(db) = engine::util::parse_i64(arg) {
                        hit.extend(self.blocked.keys_in(db as u32).map(|k| (db as u32, k.clone())));
                    }
                }
                continue;
            }
            // MOVE key db: the key arrives in the other database.
            if name.eq_ignore_ascii_case(b"MOVE") && m.argc() == 3 {
                if let Some(db) = engine::util::parse_i64(m.arg(2)) {
                    if self.blocked.waits_on(db as u32, m.arg(1)) {
                        hit.push((db as u32, m.arg(1).to_vec()));
                    }
                }
            }
            for k in m.keys() {
                if self.blocked.waits_on(m.db, k) && !hit.iter().any(|(d, h)| *d == m.db && h == k) {
                    hit.push((m.db, k.to_vec()));
                }
            }
        }
        for k in hit {
            if !self.engine.ready_keys.contains(&k) {
                self.engine.ready_keys.push(k);
            }
        }
    }

    /// `--kafka-ack-mode broker`: the reply that starts at `conn.out[from..]` (and everything
    /// after it: pipelined replies stay in order) waits until Kafka acknowledged logical
    /// offset `until`. Other clients go on meanwhile.
    pub(crate) fn hold_reply(&mut self, conn: &mut crate::conn::Conn, slot: usize, from: usize, until: u64) {
        if !self.acks_held() {
            return;
        }
        if conn.held_from.is_none() {
            conn.held_from = Some(from);
            self.held.push((slot, conn.id));
        }
        conn.held_until = conn.held_until.max(until);
    }

    /// Whether replies wait for Kafka's acknowledgement.
    pub(crate) fn acks_held(&self) -> bool {
        self.journal.is_some() && self.cfg.kafka_ack_mode == crate::config::KafkaAckMode::Broker
    }

    /// Releases the held replies whose records Kafka has acknowledged. Returns how many
    /// connections got their replies (not counting the ones gone meanwhile).
    pub(crate) fn release_held(&mut self, acked: i64) -> usize {
        let mut released = 0;
        let mut i = 0;
        while i < self.held.len() {
            let (slot, id) = self.held[i];
            let release = match self.conns.get_mut(slot) {
                Some(Some(c)) if c.id == id => {
                    if (c.held_until as i64) <= acked {
                        c.held_from = None;
                        released += 1;
                        true
                    } else {
                        false
                    }
                }
                // Gone, or being served right now (it stays listed; checked next time).
                Some(None) => false,
                _ => true,
            };
            if release {
                self.held.swap_remove(i);
                self.queue_write(slot);
            } else {
                i += 1;
            }
        }
        released
    }
}
