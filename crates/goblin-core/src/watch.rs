//! WATCH / UNWATCH: optimistic locking for MULTI/EXEC.
//!
//! A key counts as modified when a canonical mutation names it. Mutations are the complete
//! record of every state change (writes, lazy and active expiry, FLUSHALL), so reading the
//! keys out of them with the table's key positions catches every change, whoever made it,
//! including the watching client itself, as in Redis.
//!
//! Invariants: `by_key[k]` holds the id of each client that watches `k` (once); a client's
//! `conn.watching` lists the same keys; `dirty` holds ids of watching clients whose EXEC must
//! fail. Everything is keyed by client id, never by slot, so the client being served (out of
//! its slot) is covered like any other. The cost when nobody watches is one emptiness check.

use crate::conn::Conn;
use crate::server::Server;
use resp::reply;
use std::collections::{HashMap, HashSet};

#[derive(Default)]
pub struct Watches {
    by_key: HashMap<Vec<u8>, Vec<u64>>,
    dirty: HashSet<u64>,
    /// (client, key) pairs whose key did not exist when it was watched. FLUSHALL changes only
    /// keys that exist, and a watched key that came to exist later was already touched by the
    /// write that created it, so a flush spares exactly these watches (as Redis does).
    absent: HashSet<(u64, Vec<u8>)>,
}

impl Watches {
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    fn watch(&mut self, conn: &mut Conn, key: &[u8], exists: bool) {
        if conn.watching.iter().any(|k| k == key) {
            return;
        }
        if !exists {
            self.absent.insert((conn.id, key.to_vec()));
        }
        conn.watching.push(key.to_vec());
        self.by_key.entry(key.to_vec()).or_default().push(conn.id);
    }

    /// Forgets every watch of `conn` (UNWATCH, EXEC, DISCARD, RESET, disconnect).
    pub fn unwatch_all(&mut self, conn: &mut Conn) {
        for key in conn.watching.drain(..) {
            self.absent.remove(&(conn.id, key.clone()));
            if let Some(ids) = self.by_key.get_mut(&key) {
                ids.retain(|&id| id != conn.id);
                if ids.is_empty() {
                    self.by_key.remove(&key);
                }
            }
        }
        self.dirty.remove(&conn.id);
    }

    pub fn is_dirty(&self, conn: &Conn) -> bool {
        self.dirty.contains(&conn.id)
    }

    fn touch(&mut self, key: &[u8]) {
        if let Some(ids) = self.by_key.get(key) {
            self.dirty.extend(ids.iter().copied());
        }
    }

    /// A `DEL` of `key`: a watcher that saw the key absent (or already past its deadline) at
    /// WATCH time still sees it absent, so only the others are marked (Redis: deleting a stale
    /// watched key does not fail EXEC).
    fn touch_deleted(&mut self, key: &[u8]) {
        if let Some(ids) = self.by_key.get(key) {
            for &id in ids {
                if !self.absent.contains(&(id, key.to_vec())) {
                    self.dirty.insert(id);
                }
            }
        }
    }

    /// Whether `conn`'s watched key `key` was absent when watched.
    pub fn was_absent(&self, conn: &Conn, key: &[u8]) -> bool {
        self.absent.contains(&(conn.id, key.to_vec()))
    }

    /// Every watcher's EXEC fails (an unknown or keyless mutation; GOBLIN.LOAD replacing the
    /// dataset).
    pub(crate) fn touch_all(&mut self) {
        self.dirty.extend(self.by_key.values().flatten().copied());
    }

    /// FLUSHALL / FLUSHDB: every watched key that existed is changed.
    fn touch_flushed(&mut self) {
        for (key, ids) in &self.by_key {
            for &id in ids {
                if !self.absent.contains(&(id, key.clone())) {
                    self.dirty.insert(id);
                }
            }
        }
    }
}

impl crate::batches::BatchSink for Watches {
    /// Marks the watchers of every key the batch's mutations name.
    fn on_batch(&mut self, batch: &engine::Batch) {
        for m in batch.iter() {
            let Some(spec) = m.spec() else {
                // Unknown to the table: be safe and fail every watcher.
                self.touch_all();
                continue;
            };
            if spec.name == "flushall" || spec.name == "flushdb" {
                self.touch_flushed();
                continue;
            }
            if spec.first_key <= 0 {
                // Any other keyless write: be safe and fail every watcher.
                self.touch_all();
                continue;
            }
            if spec.name == "del" {
                for key in m.keys() {
                    self.touch_deleted(key);
                }
                continue;
            }
            for key in m.keys() {
                self.touch(key);
            }
        }
    }
}

impl Server {
    /// WATCH key [key ...]
    pub(crate) fn watch_command(&mut self, conn: &mut Conn, args: &[&[u8]]) {
        if conn.multi.is_some() {
            return reply::error(&mut conn.out, b"ERR WATCH inside MULTI is not allowed");
        }
        for key in &args[1..] {
            let exists = self.engine.ks.contains(key) && !self.engine.ks.is_expired(key, self.clock_ms);
            self.watches.watch(conn, key, exists);
        }
        reply::ok(&mut conn.out);
    }

    /// UNWATCH
    /// EXEC's test: a watched key changed, or one that existed at WATCH time has passed its
    /// deadline since (it expired, even if nothing removed it yet).
    pub(crate) fn watch_failed(&self, conn: &Conn) -> bool {
        self.watches.is_dirty(conn)
            || conn.watching.iter().any(|k| {
                !self.watches.was_absent(conn, k)
                    && self.engine.ks.contains(k)
                    && self.engine.ks.is_expired(k, self.clock_ms)
            })
    }

    pub(crate) fn unwatch_command(&mut self, conn: &mut Conn) {
        self.watches.unwatch_all(conn);
        reply::ok(&mut conn.out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batches::BatchSink;

    fn watching(keys: &[(&[u8], u64)]) -> Watches {
        let mut w = Watches::default();
        for (k, id) in keys {
            w.by_key.entry(k.to_vec()).or_default().push(*id);
        }
        w
    }

    fn muts(cmds: &[&[&[u8]]]) -> engine::Batch {
        let mut batch = engine::Batch::new(engine::ReplId::random());
        for c in cmds {
            batch.push(c);
        }
        batch
    }

    #[test]
    fn mutations_mark_watchers_of_the_keys_they_name() {
        let mut w = watching(&[(b"a", 1), (b"b", 2), (b"c", 3)]);
        w.on_batch(&muts(&[&[b"SET", b"a", b"1"], &[b"PEXPIREAT", b"x", b"5"]]));
        assert!(w.dirty.contains(&1) && !w.dirty.contains(&2) && !w.dirty.contains(&3));
        // Every key position of a multi-key mutation counts (DEL k1 k2, MSET k1 v1 k2 v2).
        w.on_batch(&muts(&[&[b"DEL", b"zz", b"b"]]));
        assert!(w.dirty.contains(&2));
        w.on_batch(&muts(&[&[b"MSET", b"q", b"c", b"c", b"v"]]));
        assert!(w.dirty.contains(&3), "only keys, not values, are matched: c is a key here");
        let mut w = watching(&[(b"v", 4)]);
        w.on_batch(&muts(&[&[b"MSET", b"k", b"v"]]));
        assert!(!w.dirty.contains(&4), "a value equal to a watched key is not a touch");
    }

    #[test]
    fn flush_marks_watchers_of_existing_keys_only() {
        let mut w = watching(&[(b"a", 1), (b"b", 2)]);
        w.absent.insert((2, b"b".to_vec()));
        w.on_batch(&muts(&[&[b"FLUSHALL"]]));
        assert!(w.dirty.contains(&1), "a watched key that existed was flushed");
        assert!(!w.dirty.contains(&2), "a watched key that never existed is untouched");
    }
}
