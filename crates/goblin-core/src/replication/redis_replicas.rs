//! Redis's own replication protocol, for redis-server replicas (`replicaof` this server), and
//! for any tool that attaches to a Redis replication stream with SYNC or PSYNC.
//!
//! goblin-core's replicas follow GOBLIN.FIREHOSE (see [`super::upstream`]); a redis-server
//! replica speaks Redis's protocol instead: PING, REPLCONF, then PSYNC (or SYNC). It gets a
//! full resynchronization every time: `+FULLRESYNC <replid> <offset>` (PSYNC only), the dataset
//! as an RDB file written by a forked child (`Server::rdb_sync`), then every committed batch as
//! the commands Redis's replicas apply. Those are the canonical mutations themselves (RESP2, as
//! the journal holds them), with `SELECT` where the database changes and `MULTI` / `EXEC`
//! around a batch of more than one, so a batch lands whole; a `PING` every
//! `repl-ping-replica-period` seconds keeps an idle link alive. Replies to the replica's own
//! commands (`REPLCONF ACK`) are dropped, as a Redis master drops them.
//!
//! Invariants:
//! - The stream starts exactly at the fork: batches committed before `rdb_sync` forks are in
//!   the file, the ones after it wait in the connection's output (which the parent does not
//!   send while the child owns the socket) and follow the file.
//! - In `broker` ack mode a batch reaches replicas only once Kafka acknowledged it, in commit
//!   order, as firehose frames do: a replica never holds a write the journal could lose. The
//!   image is taken after the journal settled, for the same reason.
//! - A partial resynchronization is never offered: the offsets in `+FULLRESYNC` are this
//!   server's logical offsets, not Redis's byte offsets.

use crate::server::Server;
use engine::{Batch, Origin};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A committed batch held for Kafka's acknowledgement: its last offset, whether Kafka must
/// acknowledge it (another producer's records are in the topic already), and each mutation's
/// database and RESP2 bytes.
type Retained = (u64, bool, Vec<(u32, Vec<u8>)>);

/// The attached redis-server replicas and what waits for them.
#[derive(Default)]
pub struct RedisReplicas {
    /// (slot, connection id) of every replica, in the order they attached.
    pub slots: Vec<(usize, u64)>,
    /// Broker ack mode: committed batches waiting for Kafka (or behind ones that are).
    retained: VecDeque<Retained>,
    /// When the last PING went out (or the first replica attached: the first PING comes a
    /// period later, as a Redis master's cron sends it).
    pub last_ping: Option<Instant>,
    /// `repl-ping-replica-period`, seconds.
    pub ping_period_secs: u64,
    /// Full resynchronizations served (INFO `sync_full`; every attach is one).
    pub full_syncs: u64,
}

impl RedisReplicas {
    pub fn new() -> RedisReplicas {
        RedisReplicas { ping_period_secs: 10, ..Default::default() }
    }
}

/// What a replica is sent for a batch of mutations (database, RESP2 bytes): `SELECT` where the
/// database differs from the one the replica is in (`db`, None before the first), and
/// `MULTI`/`EXEC` around more than one mutation, after the first mutation's `SELECT`, as a
/// Redis master orders them.
pub fn encode_for_replica(out: &mut Vec<u8>, mutations: &[(u32, &[u8])], db: &mut Option<u32>) {
    let select = |out: &mut Vec<u8>, db: &mut Option<u32>, m_db: u32| {
        if *db != Some(m_db) {
            let n = m_db.to_string();
            resp::reply::bulk_array(out, &[b"SELECT".as_slice(), n.as_bytes()]);
            *db = Some(m_db);
        }
    };
    let wrap = mutations.len() > 1;
    if wrap {
        select(out, db, mutations[0].0);
        out.extend_from_slice(b"*1\r\n$5\r\nMULTI\r\n");
    }
    for &(m_db, bytes) in mutations {
        select(out, db, m_db);
        out.extend_from_slice(bytes);
    }
    if wrap {
        out.extend_from_slice(b"*1\r\n$4\r\nEXEC\r\n");
    }
}

impl Server {
    /// A committed batch: to every replica now, or, behind Kafka, when it is acknowledged.
    pub(crate) fn redis_replicas_on_batch(&mut self, batch: &Batch) {
        if self.redis_replicas.slots.is_empty() {
            return;
        }
        let held = self.acks_held() && !matches!(batch.origin, Origin::Replay | Origin::External);
        let mutations: Vec<(u32, &[u8])> = batch.iter().map(|m| (m.db, m.bytes)).collect();
        if held || !self.redis_replicas.retained.is_empty() {
            let owned = mutations.iter().map(|&(db, b)| (db, b.to_vec())).collect();
            self.redis_replicas.retained.push_back((batch.last_offset(), held, owned));
        } else {
            self.redis_replicas_send(&mutations);
        }
    }

    /// Broker mode: sends, in order, the retained batches Kafka has acknowledged.
    pub(crate) fn redis_replicas_release(&mut self, acked: i64) {
        while let Some(&(last, needs_ack, _)) = self.redis_replicas.retained.front() {
            if needs_ack && (last as i64) > acked {
                break;
            }
            let (_, _, owned) = self.redis_replicas.retained.pop_front().expect("front exists");
            let mutations: Vec<(u32, &[u8])> = owned.iter().map(|(db, b)| (*db, b.as_slice())).collect();
            self.redis_replicas_send(&mutations);
        }
    }

    /// Appends one batch to every replica's output (each in its own database state).
    fn redis_replicas_send(&mut self, mutations: &[(u32, &[u8])]) {
        let mut i = 0;
        while i < self.redis_replicas.slots.len() {
            let (slot, id) = self.redis_replicas.slots[i];
            let Some(Some(c)) = self.conns.get_mut(slot) else {
                // Being served right now: a replica is only served for its REPLCONF ACKs,
                // which commit nothing.
                i += 1;
                continue;
            };
            if c.id != id || c.redis_replica.is_none() {
                self.redis_replicas.slots.swap_remove(i);
                continue;
            }
            let mut db = c.redis_replica.expect("checked");
            encode_for_replica(&mut c.out, mutations, &mut db);
            c.redis_replica = Some(db);
            let dumping = c.dumping;
            // A replica that does not keep up is cut off, as any client over the limit.
            if let Some(mut conn) = self.conns[slot].take() {
                self.check_output_limit(&mut conn);
                self.conns[slot] = Some(conn);
            }
            if !dumping {
                self.queue_write(slot);
            }
            i += 1;
        }
    }

    /// From the cron: a PING to every replica each `repl-ping-replica-period` seconds, as a
    /// Redis master sends it, so that an idle link is not taken for a dead one.
    pub(crate) fn redis_replicas_ping(&mut self) {
        let period = Duration::from_secs(self.redis_replicas.ping_period_secs.max(1));
        if self.redis_replicas.slots.is_empty()
            || self.redis_replicas.last_ping.is_some_and(|t| t.elapsed() < period)
        {
            return;
        }
        self.redis_replicas.last_ping = Some(Instant::now());
        // A PING is a command the replica applies in its stream: it waits behind retained
        // batches like any other.
        let ping: &[u8] = b"*1\r\n$4\r\nPING\r\n";
        if self.redis_replicas.retained.is_empty() {
            for i in 0..self.redis_replicas.slots.len() {
                let (slot, id) = self.redis_replicas.slots[i];
                let Some(Some(c)) = self.conns.get_mut(slot) else { continue };
                if c.id != id || c.redis_replica.is_none() {
                    continue;
                }
                c.out.extend_from_slice(ping);
                if !c.dumping {
                    self.queue_write(slot);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::encode_for_replica;

    #[test]
    fn batches_select_their_database_and_are_wrapped_in_a_transaction() {
        let set = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n".as_slice();
        let del = b"*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n".as_slice();
        let mut out = Vec::new();
        let mut db = None;
        encode_for_replica(&mut out, &[(0, set)], &mut db);
        assert_eq!(out, [b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n".as_slice(), set].concat());
        out.clear();
        encode_for_replica(&mut out, &[(0, set), (3, del)], &mut db);
        let want = [
            b"*1\r\n$5\r\nMULTI\r\n".as_slice(),
            set,
            b"*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n",
            del,
            b"*1\r\n$4\r\nEXEC\r\n",
        ]
        .concat();
        assert_eq!(out, want);
        assert_eq!(db, Some(3));
        // A transaction in another database: its SELECT comes before MULTI.
        out.clear();
        encode_for_replica(&mut out, &[(5, set), (5, del)], &mut db);
        let want = [
            b"*2\r\n$6\r\nSELECT\r\n$1\r\n5\r\n".as_slice(),
            b"*1\r\n$5\r\nMULTI\r\n",
            set,
            del,
            b"*1\r\n$4\r\nEXEC\r\n",
        ]
        .concat();
        assert_eq!(out, want);
    }
}
