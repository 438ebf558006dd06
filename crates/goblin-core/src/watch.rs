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
    /// Per database (index), key -> watching clients. Grown to a database's number when a
    /// client first watches a key there.
    by_db: Vec<HashMap<Vec<u8>, Vec<u64>>>,
    dirty: HashSet<u64>,
    /// (client, database, key) whose key did not exist when it was watched. FLUSHALL changes
    /// only keys that exist, and a watched key that came to exist later was already touched by
    /// the write that created it, so a flush spares exactly these watches (as Redis does).
    absent: HashSet<(u64, u32, Vec<u8>)>,
    /// The subset of `absent` whose key was stored but past its deadline when watched (Redis's
    /// `watchedKey.expired`): SWAPDB tells "an expired key stays expired" from "a key appears".
    expired: HashSet<(u64, u32, Vec<u8>)>,
}

impl Watches {
    pub fn is_empty(&self) -> bool {
        self.by_db.iter().all(HashMap::is_empty)
    }

    /// Distinct (database, key) pairs some client watches (INFO `total_watched_keys`).
    pub fn keys_len(&self) -> usize {
        self.by_db.iter().map(HashMap::len).sum()
    }

    /// `stored`: the key is in the keyspace; `live`: and not past its deadline.
    fn watch(&mut self, conn: &mut Conn, key: &[u8], stored: bool, live: bool) {
        let db = conn.db;
        if conn.watching.iter().any(|(d, k)| *d == db && k == key) {
            return;
        }
        if !live {
            self.absent.insert((conn.id, db, key.to_vec()));
            if stored {
                self.expired.insert((conn.id, db, key.to_vec()));
            }
        }
        conn.watching.push((db, key.to_vec()));
        if self.by_db.len() <= db as usize {
            self.by_db.resize_with(db as usize + 1, HashMap::new);
        }
        self.by_db[db as usize].entry(key.to_vec()).or_default().push(conn.id);
    }

    /// Forgets every watch of `conn` (UNWATCH, EXEC, DISCARD, RESET, disconnect).
    pub fn unwatch_all(&mut self, conn: &mut Conn) {
        for (db, key) in conn.watching.drain(..) {
            let Some(m) = self.by_db.get_mut(db as usize) else { continue };
            if let Some(ids) = m.get_mut(&key) {
                ids.retain(|&id| id != conn.id);
                if ids.is_empty() {
                    m.remove(&key);
                }
            }
            self.absent.remove(&(conn.id, db, key.clone()));
            self.expired.remove(&(conn.id, db, key));
        }
        self.dirty.remove(&conn.id);
    }

    pub fn is_dirty(&self, conn: &Conn) -> bool {
        self.dirty.contains(&conn.id)
    }

    fn touch(&mut self, db: u32, key: &[u8]) {
        if let Some(ids) = self.by_db.get(db as usize).and_then(|m| m.get(key)) {
            self.dirty.extend(ids.iter().copied());
        }
    }

    /// A `DEL`: only watchers that saw the key exist are affected (deleting a key that was
    /// absent when watched, and is absent again, changes nothing they observed).
    fn touch_deleted(&mut self, db: u32, key: &[u8]) {
        if let Some(ids) = self.by_db.get(db as usize).and_then(|m| m.get(key)) {
            for &id in ids {
                if !self.absent.contains(&(id, db, key.to_vec())) {
                    self.dirty.insert(id);
                }
            }
        }
    }

    /// Whether `conn` watched `key` of database `db` while it did not exist.
    pub fn was_absent(&self, conn: &Conn, db: u32, key: &[u8]) -> bool {
        self.absent.contains(&(conn.id, db, key.to_vec()))
    }

    /// Every watcher's EXEC fails (an unknown or keyless mutation; GOBLIN.LOAD replacing the
    /// dataset).
    pub(crate) fn touch_all(&mut self) {
        self.dirty.extend(self.by_db.iter().flat_map(|m| m.values().flatten().copied()));
    }

    /// SWAPDB `a` `b`, after the swap (`engine` holds the new contents, `now` judges
    /// deadlines): a watcher of a key in either database is touched as Redis's
    /// `touchAllWatchedKeysInDb` decides, from the contents before (now the other database's)
    /// and after. Nothing changes for a watcher whose key was not there and still is not, or
    /// was past its deadline and still is, or is gone; one whose missing key is replaced by an
    /// expired one counts as having watched an expired key from now on.
    pub(crate) fn swapped(&mut self, a: u32, b: u32, engine: &engine::Engine, now: store::Millis) {
        for (db, other) in [(a, b), (b, a)] {
            let Some(m) = self.by_db.get(db as usize) else { continue };
            let (before, after) = (engine.keyspace(other), engine.keyspace(db));
            for (key, ids) in m {
                let in_before = before.contains(key);
                let in_after = after.contains(key);
                if !in_before && !in_after {
                    continue;
                }
                let after_expired = in_after && after.is_expired(key, now);
                for &id in ids {
                    let at = (id, db, key.clone());
                    if self.expired.contains(&at) {
                        if !in_after {
                            // The expired key is gone: no logical change, and no longer expired.
                            self.expired.remove(&at);
                            continue;
                        }
                        if after_expired {
                            continue;
                        }
                    } else if !in_before && after_expired {
                        // A missing key replaced by an expired one: still missing to a reader.
                        self.absent.insert(at.clone());
                        self.expired.insert(at);
                        continue;
                    }
                    self.dirty.insert(id);
                }
            }
        }
    }

    /// FLUSHALL (`db` None) / FLUSHDB: every watched key that existed is changed.
    fn touch_flushed(&mut self, only: Option<u32>) {
        for (db, m) in self.by_db.iter().enumerate() {
            let db = db as u32;
            if only.is_some_and(|o| o != db) {
                continue;
            }
            for (key, ids) in m {
                for &id in ids {
                    if !self.absent.contains(&(id, db, key.clone())) {
                        self.dirty.insert(id);
                    }
                }
            }
        }
    }
}

impl crate::batches::BatchSink for Watches {
    /// Marks the watchers of every key the batch's mutations name, in each mutation's database.
    fn on_batch(&mut self, batch: &engine::Batch) {
        for m in batch.iter() {
            let Some(spec) = m.spec() else {
                // Not in the table: cannot know its keys, so assume the worst.
                self.touch_all();
                continue;
            };
            match spec.name {
                "flushall" => {
                    self.touch_flushed(None);
                    continue;
                }
                "flushdb" => {
                    self.touch_flushed(Some(m.db));
                    continue;
                }
                // Judged against the databases' contents: `Watches::swapped`, from the server.
                "swapdb" => continue,
                "move" if m.argc() == 3 => {
                    // The key leaves this database and appears in the other.
                    match engine::util::parse_i64(m.arg(2)) {
                        Some(db) => self.touch(db as u32, m.arg(1)),
                        None => self.touch_all(),
                    }
                }
                "copy" => {
                    // COPY src dst DB n REPLACE: dst is in database n.
                    let target = engine::util::copy_destination_db(m.args());
                    if let Some(db) = target {
                        self.touch(db as u32, m.arg(2));
                        continue;
                    }
                }
                _ => {}
            }
            if spec.first_key <= 0 {
                // A keyless mutation other than a flush: assume the worst.
                self.touch_all();
                continue;
            }
            if spec.name == "del" {
                for key in m.keys() {
                    self.touch_deleted(m.db, key);
                }
                continue;
            }
            for key in m.keys() {
                self.touch(m.db, key);
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
            let stored = self.engine.ks.contains(key);
            let live = stored && !self.engine.ks.is_expired(key, self.clock_ms);
            self.watches.watch(conn, key, stored, live);
        }
        // (The engine has the client's database selected: `call` selects it.)
        reply::ok(&mut conn.out);
    }

    /// UNWATCH
    /// EXEC's test: a watched key changed, or one that existed at WATCH time has passed its
    /// deadline since (it expired, even if nothing removed it yet).
    pub(crate) fn watch_failed(&self, conn: &Conn) -> bool {
        self.watches.is_dirty(conn)
            || conn.watching.iter().any(|(db, k)| {
                let ks = self.engine.keyspace(*db);
                !self.watches.was_absent(conn, *db, k) && ks.contains(k) && ks.is_expired(k, self.clock_ms)
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
            if w.by_db.is_empty() {
                w.by_db.push(HashMap::new());
            }
            w.by_db[0].entry(k.to_vec()).or_default().push(*id);
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
        w.absent.insert((2, 0, b"b".to_vec()));
        w.on_batch(&muts(&[&[b"FLUSHALL"]]));
        assert!(w.dirty.contains(&1), "a watched key that existed was flushed");
        assert!(!w.dirty.contains(&2), "a watched key that never existed is untouched");
    }
}
