//! What a handler sees while it runs one command.

use crate::batch::Batch;
use crate::engine::Stats;
use rand::rngs::SmallRng;
use store::{Keyspace, Millis, ValueMut, ValueRef};

/// The execution context of one command. Fields are public so that handlers can borrow the
/// keyspace and the reply buffer at the same time; the methods enforce the write path's rules.
pub struct Ctx<'a> {
    /// The selected database's keyspace.
    pub ks: &'a mut Keyspace,
    /// The selected database's number.
    pub db: u32,
    /// Every database's keyspace but the selected one's: `dbs[db]` is an empty stand-in (see
    /// `Engine::ks`). Only the commands that reach across databases (MOVE, COPY ... DB,
    /// SWAPDB, FLUSHALL) touch it, through [`Ctx::db_mut`].
    pub dbs: &'a mut [Keyspace],
    /// The command's time: fixed for the whole command (and a whole MULTI/EXEC).
    pub now: Millis,
    /// The pending batch this command's mutations join.
    pub muts: &'a mut Batch,
    pub stats: &'a mut Stats,
    pub rng: &'a mut SmallRng,
    /// True while applying a replication stream or journal: deadlines are not judged here (the
    /// stream carries the DEL the origin emitted for each expiry); see `expire_if_needed`.
    pub replaying: bool,
    /// A read-only replica serving a client read: a key past its deadline reads as missing but
    /// stays in place and no `DEL` is emitted (a replica's only writes are the upstream's
    /// mutations, at the upstream's offsets; the upstream's own expiry `DEL` follows).
    pub replica: bool,
    /// The command is a Lua script's `redis.call`: Redis makes a few commands deterministic
    /// there (SORT of a set with a constant BY sorts it instead of keeping the set's order).
    pub script: bool,
    /// CLIENT NO-TOUCH: lookups record no access (see [`crate::Engine::no_touch`]).
    pub no_touch: bool,
    /// Keys that gained list or sorted-set elements in this command: blocked clients waiting on
    /// them are retried after the command.
    pub ready_keys: &'a mut Vec<(u32, Vec<u8>)>,
    /// Set by a blocking command that found nothing to pop: the server parks the client.
    pub block: Option<crate::engine::BlockOn>,
    /// True when a parked blocking command is being retried (it must not park twice).
    pub retrying_blocked: bool,
    /// The protocol of the connection the reply goes to: handlers pass it to the typed reply
    /// writers (`reply::map_len`, `reply::null_bulk`, ...). It shapes the reply only; mutations
    /// emitted through [`Ctx::emit`] are RESP2 whatever the client speaks.
    pub proto: resp::Proto,
    /// Keys removed by lazy expiry in this command, when the server asked for them (keyspace
    /// notifications' `expired` event); None otherwise, at no cost.
    pub expired_log: Option<&'a mut Vec<Vec<u8>>>,
    /// Keys that lost hash fields to expiry in this command (`hexpired`), when asked for, and
    /// whether the key went with its last field (`del`).
    pub field_expiry_log: Option<&'a mut Vec<(Vec<u8>, bool)>>,
    /// A replica's read of a hash with fields past their deadlines: the hash as a client sees
    /// it, without them (the stored one keeps them until the upstream's `HDEL`s arrive).
    pub replica_view: Option<store::types::Hash>,
}

impl<'a> Ctx<'a> {
    /// Appends one canonical mutation (a complete command, e.g. `["SET", key, value]`).
    pub fn emit(&mut self, args: &[&[u8]]) {
        self.muts.push(args);
    }

    /// Appends the request itself as the mutation, under its canonical `name` (`args[0]` is
    /// the client's spelling): for a deterministic write whose post-state replaying it gives
    /// (a list push, a dense PFADD, BITFIELD).
    pub fn emit_request(&mut self, name: &[u8], args: &[&[u8]]) {
        let mut m: Vec<&[u8]> = Vec::with_capacity(args.len());
        m.push(name);
        m.extend_from_slice(&args[1..]);
        self.muts.push(&m);
    }

    /// Appends mutations a handler collected as owned argument lists (while it held a borrow
    /// of the keyspace that [`Ctx::emit`] would have needed).
    pub fn emit_all(&mut self, muts: &[Vec<Vec<u8>>]) {
        for m in muts {
            let refs: Vec<&[u8]> = m.iter().map(|a| a.as_slice()).collect();
            self.muts.push(&refs);
        }
    }

    /// Lazy expiry: if `key` is past its deadline, removes it, emits `DEL key` and returns true.
    ///
    /// Invariant: a key is live through its deadline's millisecond and expired only once `now`
    /// is past it (Redis's rule). Every liveness check (here, [`Ctx::read`], `Keyspace::
    /// is_expired`, active expiry) uses that same comparison: were one of them to drop the key at
    /// `now == deadline` while another keeps it, a script (whose `now` is frozen) would see
    /// EXISTS 1 and then PTTL -2 for the same key, which is how Redisson's lock waiters came to
    /// sleep out their whole wait instead of retrying at the lease's end.
    ///
    /// While replaying, every key the stream touches is live: the origin applied this mutation
    /// when the key was live by its clock, and it records each expiry as its own `DEL`. Judging
    /// deadlines by the replayer's clock instead would make replay depend on when it runs.
    pub fn expire_if_needed(&mut self, key: &[u8]) -> bool {
        if self.replaying || !self.ks.is_expired(key, self.now) {
            return false;
        }
        if self.replica {
            return true;
        }
        self.ks.delete(key);
        self.stats.expired_keys += 1;
        self.emit(&[b"DEL", key]);
        if let Some(log) = self.expired_log.as_mut() {
            log.push(key.to_vec());
        }
        true
    }

    /// Looks `key` up for reading: expired keys read as missing; counts keyspace hits/misses.
    /// One table lookup on the hot path (GET and friends).
    pub fn read(&mut self, key: &[u8]) -> Option<ValueRef<'_>> {
        let now = self.now;
        let replaying = self.replaying;
        // SAFETY: the borrow checker cannot yet see that the early return below is the only
        // use of the borrowed value (the NLL "conditional return" limitation). The keyspace is
        // not touched between this lookup and that return, so the reference stays valid.
        let ks: *mut Keyspace = &mut *self.ks;
        // The lookup records the access (LRU clock / LFU counter) on the key.
        let found = if self.no_touch {
            unsafe { &*ks }.get_with_expire(key)
        } else {
            unsafe { &mut *ks }.get_with_expire_touch(key)
        };
        match found {
            Some((v, deadline)) if replaying || deadline.is_none_or(|t| t >= now) => {
                self.stats.keyspace_hits += 1;
                return Some(v);
            }
            Some(_) if self.replica => {}
            Some(_) => {
                self.ks.delete(key);
                self.stats.expired_keys += 1;
                self.emit(&[b"DEL", key]);
                if let Some(log) = self.expired_log.as_mut() {
                    log.push(key.to_vec());
                }
            }
            None => {}
        }
        self.stats.keyspace_misses += 1;
        None
    }

    /// [`Ctx::read`] without recording an access on the key (Redis's LOOKUP_NOTOUCH, for
    /// EXISTS, TYPE and TTL: asking about a key is not using it, so OBJECT IDLETIME and the
    /// eviction policy are not fooled). Hits and misses count as for any read.
    pub fn read_notouch(&mut self, key: &[u8]) -> Option<ValueRef<'_>> {
        if self.expire_if_needed(key) || !self.ks.contains(key) {
            self.stats.keyspace_misses += 1;
            return None;
        }
        self.stats.keyspace_hits += 1;
        self.ks.get(key)
    }

    /// Looks `key` up for writing: expired keys read as missing. No hit/miss accounting.
    pub fn write(&mut self, key: &[u8]) -> Option<ValueMut<'_>> {
        if self.expire_if_needed(key) {
            return None;
        }
        self.ks.get_mut_touching(key, !self.no_touch)
    }

    /// True if `key` exists and is live (expiring it first if needed). No hit/miss accounting.
    pub fn exists(&mut self, key: &[u8]) -> bool {
        !self.expire_if_needed(key) && self.ks.contains(key)
    }

    /// Records that `key` gained elements a blocked client may be waiting for.
    pub fn signal_ready(&mut self, key: &[u8]) {
        self.signal_ready_in(self.db, key);
    }

    /// [`Ctx::signal_ready`] for a key of database `db` (MOVE, COPY ... DB).
    pub fn signal_ready_in(&mut self, db: u32, key: &[u8]) {
        if !self.ready_keys.iter().any(|(d, k)| *d == db && k == key) {
            self.ready_keys.push((db, key.to_vec()));
        }
    }

    /// How many databases there are.
    pub fn databases(&self) -> u32 {
        self.dbs.len() as u32
    }

    /// Database `db`'s keyspace (the selected one's is `ks`).
    pub fn db_mut(&mut self, db: u32) -> &mut Keyspace {
        if db == self.db {
            self.ks
        } else {
            &mut self.dbs[db as usize]
        }
    }

    /// A database number argument, as Redis checks it: an integer (else `NOT_INTEGER`) naming
    /// an existing database (else "DB index is out of range").
    pub fn parse_db(&self, arg: &[u8]) -> Result<u32, &'static [u8]> {
        match crate::util::parse_i64(arg) {
            None => Err(crate::errors::NOT_INTEGER),
            Some(n) if i32::try_from(n).is_err() => Err(crate::errors::NOT_AN_INT),
            Some(n) if n < 0 || n >= self.databases() as i64 => Err(crate::errors::DB_INDEX_OUT_OF_RANGE),
            Some(n) => Ok(n as u32),
        }
    }

    /// Lazy expiry of `key` in another database `db` (MOVE's and COPY's destination): like
    /// [`Ctx::expire_if_needed`], its `DEL` emitted as a mutation of database `db`.
    pub fn expire_in(&mut self, db: u32, key: &[u8]) -> bool {
        if db == self.db {
            return self.expire_if_needed(key);
        }
        let now = self.now;
        let ks = &mut self.dbs[db as usize];
        if self.replaying || !ks.is_expired(key, now) {
            return false;
        }
        if self.replica {
            return true;
        }
        ks.delete(key);
        self.stats.expired_keys += 1;
        self.muts.set_db(db);
        self.muts.push(&[b"DEL", key]);
        self.muts.set_db(self.db);
        true
    }

    /// A blocking command with nothing to serve asks to be parked on `keys` until `deadline`
    /// (None: forever). It must write no reply and emit nothing when it does this.
    pub fn block_on(&mut self, keys: Vec<Vec<u8>>, deadline: Option<Millis>) {
        self.block = Some(crate::engine::BlockOn { keys, deadline, ..Default::default() });
    }

    /// [`Ctx::block_on`] with the rest of [`crate::engine::BlockOn`] said: the command to
    /// park instead, a recheck time, whether a retry keeps its turn.
    pub fn block_with(&mut self, on: crate::engine::BlockOn) {
        self.block = Some(on);
    }
}
