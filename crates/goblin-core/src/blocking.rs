//! Clients parked by blocking commands (BLPOP, BZPOPMIN ...), indexed by key and by deadline.
//!
//! Invariants: a parked connection (`conn.parked` is `Some`) appears once in the queue of each
//! key it waits on, in arrival order, and once in the deadline index, at its wake time, if it
//! has a deadline or a recheck (`Parked::wake_at`); an unparked or closed connection appears
//! nowhere. Entries carry the client id as well as the
//! slot, so a stale entry can never be mistaken for a later connection in the same slot.

use crate::conn::{Conn, Parked};
use crate::server::{now_ms, Server};
use engine::{BlockOn, Outcome};
use std::collections::{BTreeSet, HashMap, VecDeque};
use store::Millis;

#[derive(Default)]
pub struct BlockedIndex {
    /// Per database (index), key -> waiting clients (slot, client id), oldest first. Grown
    /// to a database's number when a client first waits there.
    by_db: Vec<HashMap<Vec<u8>, VecDeque<(usize, u64)>>>,
    /// (wake time, arrival seq, slot, client id), earliest first. The wake time is the
    /// deadline, or an earlier recheck (`Parked::wake_at`).
    by_deadline: BTreeSet<(Millis, u64, usize, u64)>,
    next_seq: u64,
}

impl BlockedIndex {
    pub fn next_deadline(&self) -> Option<Millis> {
        self.by_deadline.first().map(|e| e.0)
    }

    /// True when some client waits on `key` of database `db`.
    pub fn waits_on(&self, db: u32, key: &[u8]) -> bool {
        self.by_db.get(db as usize).is_some_and(|m| m.contains_key(key))
    }

    /// The clients waiting on `key` of database `db`, oldest first.
    fn waiters(&self, db: u32, key: &[u8]) -> Option<&VecDeque<(usize, u64)>> {
        self.by_db.get(db as usize)?.get(key)
    }

    pub fn is_empty(&self) -> bool {
        self.by_db.iter().all(HashMap::is_empty)
    }

    /// Every (database, key) some client waits on.
    pub fn keys(&self) -> impl Iterator<Item = (u32, &Vec<u8>)> {
        self.by_db.iter().enumerate().flat_map(|(db, m)| m.keys().map(move |k| (db as u32, k)))
    }

    /// The clients (slot, id) waiting on `key` of database `db`, oldest first.
    pub fn waiting(&self, db: u32, key: &[u8]) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.waiters(db, key).into_iter().flatten().copied()
    }

    /// Every key some client waits on in database `db`.
    pub fn keys_in(&self, db: u32) -> impl Iterator<Item = &Vec<u8>> {
        self.by_db.get(db as usize).into_iter().flat_map(|m| m.keys())
    }

    /// Parked clients with a deadline (INFO `clients_in_timeout_table`).
    pub fn timeouts_len(&self) -> usize {
        self.by_deadline.len()
    }

    fn park(&mut self, conn: &mut Conn, slot: usize, args: &[&[u8]], on: BlockOn) {
        let seq = self.next_seq;
        self.next_seq += 1;
        // A command naming the same key twice waits once on it.
        let mut keys = on.keys;
        keys.sort();
        keys.dedup();
        let db = conn.db as usize;
        if self.by_db.len() <= db {
            self.by_db.resize_with(db + 1, HashMap::new);
        }
        for k in &keys {
            self.by_db[db].entry(k.clone()).or_default().push_back((slot, conn.id));
        }
        let p = Parked {
            args: args.iter().map(|a| a.to_vec()).collect(),
            db: conn.db,
            keys,
            deadline: on.deadline,
            recheck_at: on.recheck_at,
            keeps_turn: on.keeps_turn,
            seq,
        };
        if let Some(t) = p.wake_at() {
            self.by_deadline.insert((t, seq, slot, conn.id));
        }
        conn.parked = Some(p);
    }

    /// Drops every index entry of `conn` (its `parked` is left to the caller).
    pub fn remove(&mut self, conn: &Conn, slot: usize) {
        let Some(p) = &conn.parked else { return };
        if let Some(m) = self.by_db.get_mut(p.db as usize) {
            for k in &p.keys {
                if let Some(q) = m.get_mut(k) {
                    q.retain(|e| e.1 != conn.id);
                    if q.is_empty() {
                        m.remove(k);
                    }
                }
            }
        }
        if let Some(t) = p.wake_at() {
            self.by_deadline.remove(&(t, p.seq, slot, conn.id));
        }
    }
}

impl Server {
    /// Parks `conn`: its remaining pipelined input waits until the command is served or times
    /// out; with a `recheck_at`, it is also retried then (XREADGROUP CLAIM).
    /// `on.args` is not looked at: the caller passes the command to park as `args`.
    pub(crate) fn park(&mut self, conn: &mut Conn, slot: usize, args: &[&[u8]], on: BlockOn) {
        self.blocked.park(conn, slot, args, on);
    }

    /// Unparks `conn` after its command got its reply; its buffered input runs this turn. The
    /// caller queues the write once `conn` is back in its slot.
    pub(crate) fn unpark(&mut self, conn: &mut Conn, slot: usize) {
        self.blocked.remove(conn, slot);
        conn.parked = None;
        if !conn.pending.is_empty() {
            self.resume.push(slot);
        }
    }

    /// Retries, in arrival order, the clients parked on keys the last command signalled ready.
    /// A retry that is served unparks its client; one that blocks again keeps its place (and
    /// ends that key's round, unless it keeps its turn: `Parked::keeps_turn`). Retries can
    /// signal further keys (BLMOVE pushes), so this runs until no key is left.
    ///
    /// As Redis 7.4+, a ready key is first checked without side effects, at the time the
    /// waking command ran at (`clock_ms`, Redis's per-command time snapshot): one that is gone,
    /// or was past its deadline then, retries only the waiters that a missing key answers
    /// (XREADGROUP: NOGROUP); the others stay parked and the key stays in place until
    /// something touches it (a SWAPDB that brings back a key already past its deadline deletes
    /// nothing; a transaction whose key expired while it ran retries the waiters, whose retry,
    /// at the current time, deletes the key and parks them again).
    pub(crate) fn serve_ready_keys(&mut self) {
        while !self.engine.ready_keys.is_empty() {
            let keys = std::mem::take(&mut self.engine.ready_keys);
            for (db, key) in keys {
                let Some(q) = self.blocked.waiters(db, &key) else { continue };
                let waiters: Vec<(usize, u64)> = q.iter().copied().collect();
                let ks = self.engine.keyspace(db);
                let live = ks.contains(&key) && !ks.is_expired(&key, self.clock_ms);
                for (slot, id) in waiters {
                    let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else { continue };
                    let wakes_on_missing =
                        conn.parked.as_ref().is_some_and(|p| p.args[0].eq_ignore_ascii_case(b"XREADGROUP"));
                    if conn.id != id || conn.parked.is_none() || !(live || wakes_on_missing) {
                        self.conns[slot] = Some(conn);
                        continue;
                    }
                    let keeps_turn = conn.parked.as_ref().is_some_and(|p| p.keeps_turn);
                    let served = self.retry_parked(&mut conn, slot);
                    if served {
                        self.unpark(&mut conn, slot);
                    }
                    self.conns[slot] = Some(conn);
                    if !served && keeps_turn {
                        continue;
                    }
                    if !served {
                        // This key has nothing left to give (served waiters got an element or
                        // a WRONGTYPE error), so the later waiters would block too: stop here
                        // rather than retry all of them.
                        break;
                    }
                    self.queue_write(slot);
                }
            }
        }
    }

    /// Runs a parked command again; true if it was served (its reply is in `conn.out`).
    fn retry_parked(&mut self, conn: &mut Conn, slot: usize) -> bool {
        let Some(p) = conn.parked.take() else { return false };
        let args: Vec<&[u8]> = p.args.iter().map(|a| a.as_slice()).collect();
        let Some(spec) = engine::lookup(args[0]) else {
            conn.parked = Some(p);
            return false;
        };
        // Its user's rules may have changed while it waited (ACL SETUSER): checked again, as
        // Redis checks a command it reprocesses. Refused, it is answered NOPERM and unparked,
        // and the key's next waiter is tried.
        if conn.restricted {
            if let Some(denied) = self.users.check(&conn.user, spec, &args) {
                crate::commands::log_refusal(self, conn, spec, &args, denied, crate::auth::Context::Toplevel);
                let msg = crate::commands::noperm(denied, &conn.user, spec, &args);
                resp::reply::error(&mut conn.out, msg.as_bytes());
                self.stats.cmds.rejected_reply(spec, msg.as_bytes());
                conn.parked = Some(p);
                return true;
            }
        }
        let mark = conn.out.len();
        let started = std::time::Instant::now();
        self.engine.select(p.db);
        let outcome = self.run_engine(spec, &args, now_ms(), &mut conn.out, conn.proto, true);
        if matches!(outcome, Outcome::Done) {
            let name = crate::commands::data_call_name(spec, &args);
            let track = self.introspection.latency_tracking;
            self.stats.cmds.record(spec, name, &conn.out[mark..], started.elapsed(), track);
            // A served blocked command enters the slow log as the client sent it (BLPOP, not
            // the LPOP it amounts to), as Redis logs it when it unblocks.
            let micros = started.elapsed().as_micros() as u64;
            let ins = &mut self.introspection;
            if ins.slowlog_slower_than >= 0 && micros >= ins.slowlog_slower_than as u64 {
                ins.slowlog_push(spec, &args, micros, conn);
            }
        }
        self.deliver_notifications(Some((conn, slot)));
        self.flush_self_pushes(conn, slot);
        // A served retry is an atomic unit of its own.
        if let Some(last) = self.commit_batch(engine::Origin::BlockedRetry) {
            self.hold_reply(conn, slot, mark, last);
        }
        self.deliver_invalidations(Some((conn, slot)));
        let mut p = p;
        if let Outcome::Blocked(on) = &outcome {
            // Still waiting: the deadline stays the first park's, the recheck is the retry's
            // (the index entry moves with it). One that has come already would spin: dropped.
            let recheck = on.recheck_at.filter(|&r| r > now_ms());
            if recheck != p.recheck_at {
                if let Some(t) = p.wake_at() {
                    self.blocked.by_deadline.remove(&(t, p.seq, slot, conn.id));
                }
                p.recheck_at = recheck;
                if let Some(t) = p.wake_at() {
                    self.blocked.by_deadline.insert((t, p.seq, slot, conn.id));
                }
            }
        }
        conn.parked = Some(p);
        matches!(outcome, Outcome::Done)
    }

    /// A parked command answered without being run again (its deadline passed, CLIENT
    /// UNBLOCK, WAIT's replicas acknowledged): one call of it, its reply from `mark` on, as Redis counts a blocked command
    /// when it unblocks.
    pub(crate) fn count_unblocked(&mut self, conn: &Conn, mark: usize) {
        let Some(p) = conn.parked.as_ref() else { return };
        let args: Vec<&[u8]> = p.args.iter().map(Vec::as_slice).collect();
        let Some(spec) = args.first().and_then(|a| engine::lookup(a)) else { return };
        let name = crate::commands::data_call_name(spec, &args);
        let track = self.introspection.latency_tracking;
        self.stats.cmds.record(spec, name, &conn.out[mark..], std::time::Duration::ZERO, track);
    }

    /// CLIENT UNBLOCK: answers the parked client with client `id` as a timeout would (`*-1`)
    /// or with the UNBLOCKED error, and unparks it. False if no such client is parked.
    pub(crate) fn force_unblock(&mut self, id: u64, error: bool) -> bool {
        let Some(slot) =
            self.conns.iter().position(|c| matches!(c, Some(c) if c.id == id && c.parked.is_some()))
        else {
            return false;
        };
        let Some(mut conn) = self.conns[slot].take() else { return false };
        let mark = conn.out.len();
        if error {
            // A failed call of the blocked command, as Redis counts it.
            conn.out.extend_from_slice(b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
        } else if conn.parked.as_ref().is_some_and(crate::replication::upstream::is_wait) {
            self.wait_reply(conn.parked.as_ref().expect("parked"), &mut conn.out);
        } else {
            resp::reply::null_array(&mut conn.out, conn.proto);
        }
        self.count_unblocked(&conn, mark);
        self.unpark(&mut conn, slot);
        self.conns[slot] = Some(conn);
        self.queue_write(slot);
        true
    }

    /// The server starts following a primary (REPLICAOF, FAILOVER): every parked client gets
    /// Redis's UNBLOCKED error and is disconnected after it. Left parked, a BLPOP would be
    /// served by the primary's pushes, popping on a replica what the primary keeps. Commands
    /// held by a pause are not parked: they run later and meet the new role.
    pub(crate) fn disconnect_blocked_clients(&mut self) {
        for slot in 0..self.conns.len() {
            let Some(mut conn) = self.conns[slot].take_if(|c| c.parked.is_some()) else { continue };
            let mark = conn.out.len();
            conn.out.extend_from_slice(
                b"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n",
            );
            self.count_unblocked(&conn, mark);
            self.unpark(&mut conn, slot);
            conn.close_after_reply = true;
            self.conns[slot] = Some(conn);
            self.queue_write(slot);
        }
    }

    /// Answers a null array (`*-1`, `_` in RESP3, as Redis does for every blocking type) to
    /// clients whose deadline has passed, and retries those whose recheck came first.
    pub(crate) fn expire_blocked(&mut self, now: Millis) {
        while let Some(&(d, seq, slot, id)) = self.blocked.by_deadline.first() {
            if d > now {
                break;
            }
            let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else {
                self.blocked.by_deadline.pop_first();
                continue;
            };
            if conn.id != id || conn.parked.is_none() {
                self.blocked.by_deadline.pop_first();
                self.conns[slot] = Some(conn);
                continue;
            }
            // A recheck before the deadline (XREADGROUP CLAIM): run the command again; if it
            // still finds nothing it stays parked, indexed at its next recheck or deadline.
            let recheck = conn.parked.as_ref().is_some_and(|p| {
                p.recheck_at.is_some_and(|r| r <= now) && p.deadline.is_none_or(|d| d > now)
            });
            if recheck {
                if self.retry_parked(&mut conn, slot) {
                    self.unpark(&mut conn, slot);
                    self.conns[slot] = Some(conn);
                    self.queue_write(slot);
                } else {
                    // Not served: the retry moved the index entry past `now` (or dropped a
                    // recheck that would spin); make sure this one is gone either way.
                    self.blocked.by_deadline.remove(&(d, seq, slot, id));
                    if let Some(p) = conn.parked.as_mut() {
                        if p.recheck_at.is_some_and(|r| r <= now) {
                            p.recheck_at = None;
                            if let Some(t) = p.wake_at() {
                                self.blocked.by_deadline.insert((t, p.seq, slot, id));
                            }
                        }
                    }
                    self.conns[slot] = Some(conn);
                }
                continue;
            }
            let mark = conn.out.len();
            match conn.parked.as_ref() {
                Some(p) if crate::replication::upstream::is_wait(p) => self.wait_reply(p, &mut conn.out),
                _ => resp::reply::null_array(&mut conn.out, conn.proto),
            }
            self.count_unblocked(&conn, mark);
            self.unpark(&mut conn, slot);
            self.conns[slot] = Some(conn);
            self.queue_write(slot);
        }
    }
}
