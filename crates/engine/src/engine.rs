//! The engine: owns the keyspace and the replication lineage; executes one command at a time.

use crate::batch::{Batch, Origin};
use crate::command::Flags;
use crate::command::{CommandSpec, Handler};
use crate::ctx::Ctx;
use crate::errors;
use crate::mutation::Replication;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use resp::Proto;
use store::{Keyspace, Millis};

/// Counters INFO reports.
#[derive(Default, Debug, Clone)]
pub struct Stats {
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub expired_keys: u64,
    /// Hash fields removed because their deadline passed (INFO `expired_subkeys`).
    pub expired_fields: u64,
    /// Keys removed to get under maxmemory (INFO `evicted_keys`).
    pub evicted_keys: u64,
    pub commands_processed: u64,
}

/// Where a blocking command waits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BlockOn {
    pub keys: Vec<Vec<u8>>,
    /// Absolute deadline; None waits forever.
    pub deadline: Option<Millis>,
    /// The command to park instead of the one given, when retrying the original would mean
    /// something else later (XREAD's `$` is resolved to the IDs it meant when it blocked).
    pub args: Option<Vec<Vec<u8>>>,
    /// A time before the deadline when a retry may find something though no key was
    /// signalled (XREADGROUP CLAIM: a pending entry turns idle enough then).
    pub recheck_at: Option<Millis>,
    /// A retry that blocks again says nothing of the clients waiting behind it on the same
    /// key, which are retried too (stream readers, who do not consume what they read or
    /// consume it per group; BLMOVEM ... EXACTLY n, which leaves fewer than n to others).
    /// Otherwise such a retry ends that key's round: the later waiters would block too.
    pub keeps_turn: bool,
}

/// What happened to a command.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// The reply is in the output buffer.
    Done,
    /// A blocking command found nothing: no reply was written; park the client and retry the
    /// same command (with `retrying_blocked`) when one of the keys is signalled ready.
    Blocked(BlockOn),
    /// A write command's handler panicked. The store may hold part of its effect, and the
    /// pending batch may not describe it: the caller must stop without committing (fail-stop;
    /// with a durable journal, serving a state the log does not describe would be silent
    /// corruption). A read that panics is answered with an error instead, and returns `Done`.
    WritePanicked,
}

/// How many databases (`SELECT 0` .. `SELECT n-1`) an engine has unless told otherwise:
/// Redis's default.
pub const DEFAULT_DATABASES: u32 = 16;

pub struct Engine {
    /// The selected database's keyspace (see [`Engine::select`]). Every command, replayed
    /// record and expiry round runs against this one; the others wait in `dbs`.
    pub ks: Keyspace,
    /// The selected database's number.
    db: u32,
    /// Every database's keyspace, except that `dbs[db]` is an empty stand-in while database
    /// `db` is selected (its keyspace is `ks`): selecting swaps two keyspaces, so the code
    /// that works on "the keyspace" never learns about databases, and a server that uses only
    /// database 0 never pays for them.
    dbs: Vec<Keyspace>,
    pub repl: Replication,
    /// Mutations emitted since the last commit: the batch in progress.
    pending: Batch,
    /// A committed batch handed back by the caller, reused for the next one.
    spare: Option<Batch>,
    pub stats: Stats,
    pub rng: SmallRng,
    /// Keys signalled ready by the last commands (see [`Ctx::ready_keys`]); the server drains it.
    pub ready_keys: Vec<(u32, Vec<u8>)>,
    /// Applying a replication stream: see [`Ctx::replaying`].
    pub replaying: bool,
    /// A read-only replica: its data changes only through the upstream's stream, so reads
    /// treat keys past their deadline as missing without deleting them (the upstream's `DEL`
    /// arrives in the stream) and emit nothing; see [`Ctx::replica`].
    pub replica: bool,
    /// A Lua script is calling: see [`Ctx::script`]. Set by the server around each
    /// `redis.call` of a script.
    pub script: bool,
    /// The running command's client is in CLIENT NO-TOUCH mode: its reads and writes record no
    /// access on the keys (TOUCH still does). Set by the server around each command.
    pub no_touch: bool,
    /// The reply buffer `apply_record` reuses (replies to replayed records are only checked
    /// for an error).
    pub(crate) replay_reply: Vec<u8>,
    /// When set, keys removed by expiry (lazy or active) are appended to `expired_log` for
    /// the server's keyspace notifications, which drains it after each command.
    pub log_expired: bool,
    pub expired_log: Vec<Vec<u8>>,
    /// As `log_expired`, for hash fields (keyspace notifications' `hexpired`, class `h`):
    /// the keys that lost fields to expiry, once per removal run, in `field_expiry_log`.
    pub log_field_expiry: bool,
    pub field_expiry_log: Vec<(Vec<u8>, bool)>,
    /// The function libraries (functions.rs): state like the keyspace, changed only through
    /// [`Engine::function_command`], which emits their canonical mutations.
    pub functions: crate::functions::Functions,
    /// maxmemory settings (see [`crate::evict`]); the server sets them from its flags and
    /// CONFIG SET through [`Engine::set_evict_config`].
    pub evict: crate::evict::EvictConfig,
}

impl Default for Engine {
    fn default() -> Self {
        Self::new(Replication::new_lineage())
    }
}

impl Engine {
    pub fn new(repl: Replication) -> Self {
        Engine {
            ks: Keyspace::new(),
            db: 0,
            dbs: (0..DEFAULT_DATABASES).map(|_| Keyspace::new()).collect(),
            repl,
            pending: Batch::new(repl.replid),
            spare: None,
            stats: Stats::default(),
            rng: SmallRng::from_entropy(),
            ready_keys: Vec::new(),
            replaying: false,
            replica: false,
            script: false,
            no_touch: false,
            replay_reply: Vec::new(),
            log_expired: false,
            expired_log: Vec::new(),
            log_field_expiry: false,
            field_expiry_log: Vec::new(),
            functions: Default::default(),
            evict: Default::default(),
        }
    }

    /// The selected database.
    pub fn db(&self) -> u32 {
        self.db
    }

    /// How many databases there are.
    pub fn databases(&self) -> u32 {
        self.dbs.len() as u32
    }

    /// Sets the number of databases (startup: `--databases`, after a snapshot loaded). Refused
    /// when a database that would go holds keys.
    pub fn resize_databases(&mut self, n: u32) -> Result<(), String> {
        if n == 0 {
            return Err("there must be at least one database".into());
        }
        if let Some((db, ks)) = self.nonempty_dbs().find(|(db, _)| *db >= n) {
            return Err(format!(
                "database {db} holds {} keys, and only databases 0 to {} would exist",
                ks.len(),
                n - 1
            ));
        }
        self.select(0);
        let mode = self.ks.access_mode();
        self.dbs.resize_with(n as usize, Keyspace::new);
        for ks in &mut self.dbs {
            ks.set_access_mode(mode);
        }
        Ok(())
    }

    /// Makes database `db` the selected one: commands, replayed records and the mutations
    /// they emit belong to it from now on. `db` must be below [`Engine::databases`].
    #[inline]
    pub fn select(&mut self, db: u32) {
        if db != self.db {
            self.switch_to(db);
        }
    }

    #[cold]
    fn switch_to(&mut self, db: u32) {
        let now_ms = self.ks.now();
        std::mem::swap(&mut self.ks, &mut self.dbs[self.db as usize]);
        std::mem::swap(&mut self.ks, &mut self.dbs[db as usize]);
        self.db = db;
        self.ks.set_now(now_ms);
        self.pending.set_db(db);
    }

    /// Database `db`'s keyspace, selected or not.
    pub fn keyspace(&self, db: u32) -> &Keyspace {
        if db == self.db {
            &self.ks
        } else {
            &self.dbs[db as usize]
        }
    }

    /// Database `db`'s keyspace, mutably, selected or not.
    pub fn keyspace_mut(&mut self, db: u32) -> &mut Keyspace {
        if db == self.db {
            &mut self.ks
        } else {
            &mut self.dbs[db as usize]
        }
    }

    /// Replaces every database's contents: database `n` gets the keyspace paired with `n` in
    /// `dbs`, the others become empty (a snapshot loaded in place of the dataset). Refused,
    /// changing nothing, when a number is not below [`Engine::databases`]. Database 0 is
    /// selected afterwards. Returns the old keyspaces, for the caller to drop when it suits.
    pub fn replace_databases(&mut self, dbs: Vec<(u32, Keyspace)>) -> Result<Vec<Keyspace>, String> {
        if let Some((db, _)) = dbs.iter().find(|(db, _)| *db >= self.databases()) {
            return Err(format!(
                "it holds database {db}, and this server has databases 0 to {} (--databases)",
                self.databases() - 1
            ));
        }
        self.select(0);
        let mode = self.evict.access_mode();
        let mut fresh: Vec<Keyspace> = (0..self.databases()).map(|_| Keyspace::new()).collect();
        for (db, ks) in dbs {
            fresh[db as usize] = ks;
        }
        for ks in &mut fresh {
            ks.set_access_mode(mode);
        }
        let mut fresh = fresh.into_iter();
        let zero = fresh.next().expect("at least one database");
        let mut old = vec![std::mem::replace(&mut self.ks, zero)];
        for (i, ks) in fresh.enumerate() {
            old.push(std::mem::replace(&mut self.dbs[i + 1], ks));
        }
        // dbs[0] is the stand-in while database 0 is selected.
        old.push(std::mem::take(&mut self.dbs[0]));
        Ok(old)
    }

    /// Takes every database that holds keys out of this engine (number, keyspace), leaving
    /// them empty: a loaded engine's data, to install in another with
    /// [`Engine::replace_databases`].
    pub fn take_databases(&mut self) -> Vec<(u32, Keyspace)> {
        self.select(0);
        let mut out = Vec::new();
        if !self.ks.is_empty() {
            out.push((0, std::mem::take(&mut self.ks)));
        }
        for db in 1..self.databases() {
            if !self.dbs[db as usize].is_empty() {
                out.push((db, std::mem::take(&mut self.dbs[db as usize])));
            }
        }
        out
    }

    /// Every database that holds keys, in number order, with its keyspace: what a snapshot
    /// or an RDB file is written from.
    pub fn database_refs(&self) -> Vec<(u32, &Keyspace)> {
        self.nonempty_dbs().collect()
    }

    /// [`Keyspace::set_avoid_resize`] for every database (while a forked child reads them).
    pub fn set_avoid_resize(&mut self, avoid: bool) {
        for db in 0..self.databases() {
            self.keyspace_mut(db).set_avoid_resize(avoid);
        }
    }

    /// [`Keyspace::set_bulk_load`] for every database (a startup replay, whose records may be
    /// in any of them).
    pub fn set_bulk_load(&mut self, on: bool) {
        for db in 0..self.databases() {
            self.keyspace_mut(db).set_bulk_load(on);
        }
    }

    /// [`Keyspace::stamp_access`] for every database (keys loaded count as accessed now).
    pub fn stamp_access(&mut self, now: Millis) {
        for db in 0..self.databases() {
            self.keyspace_mut(db).stamp_access(now);
        }
    }

    /// Every database that holds keys, in number order, with its keyspace.
    pub fn nonempty_dbs(&self) -> impl Iterator<Item = (u32, &Keyspace)> + '_ {
        (0..self.databases()).map(|i| (i, self.keyspace(i))).filter(|(_, ks)| !ks.is_empty())
    }

    /// Keys in every database.
    pub fn total_keys(&self) -> usize {
        (0..self.databases()).map(|i| self.keyspace(i).len()).sum()
    }

    /// The mutations emitted since the last commit.
    pub fn pending(&self) -> &Batch {
        &self.pending
    }

    /// Starts serving lineage `repl` (after recovery, or a new one). Nothing may be pending.
    pub fn set_replication(&mut self, repl: Replication) {
        assert!(self.pending.is_empty(), "the lineage changes between batches only");
        self.repl = repl;
        self.pending.replid = repl.replid;
    }

    /// Goes on under a new lineage `replid` from the current offset, with no predecessor,
    /// taking the pending mutations along: they commit under it. For a server that finds,
    /// while applying another server's writes, that it can no longer number them as that
    /// server did (a replica leaving its primary's lineage).
    pub fn leave_lineage(&mut self, replid: crate::ReplId) {
        self.repl = Replication::at(replid, self.repl.offset);
        self.pending.replid = replid;
    }

    /// Commits the pending mutations as one batch from `origin`: numbers them with the next
    /// consecutive logical offsets and advances the lineage's offset past them. This is the one
    /// place the offset advances. Returns None when nothing is pending (a read, a no-op write).
    /// Hand the batch back with [`Engine::recycle`] once every sink has seen it.
    pub fn commit(&mut self, origin: Origin) -> Option<Batch> {
        if self.pending.is_empty() {
            return None;
        }
        let mut next = self.spare.take().unwrap_or_else(|| Batch::new(self.repl.replid));
        next.replid = self.repl.replid;
        next.set_db(self.db);
        let mut batch = std::mem::replace(&mut self.pending, next);
        batch.replid = self.repl.replid;
        batch.origin = origin;
        batch.first_offset = self.repl.offset + 1;
        self.repl.offset += batch.len() as u64;
        Some(batch)
    }

    /// Takes a committed batch back so its buffers serve the next one (no allocation per
    /// command). A batch grown large by one big command is dropped instead.
    pub fn recycle(&mut self, mut batch: Batch) {
        const KEEP: usize = 64 * 1024;
        if batch.byte_len() <= KEEP {
            batch.clear();
            self.spare = Some(batch);
        }
    }

    /// Runs a data command whose spec and arity the caller has already checked. Its mutations
    /// join the pending batch; the caller commits it when the atomic unit ends. The reply is
    /// written in `proto`, the protocol of the connection it goes to; the mutations are RESP2
    /// whatever `proto` is.
    ///
    /// A panicking handler is a bug; it must not take every other client down, nor leave the
    /// store and the mutation stream disagreeing. A read's only changes are lazy expiries, each
    /// emitted as it happens, so a panicking read keeps what it emitted and gets an error
    /// reply. A panicking write returns [`Outcome::WritePanicked`]: see there.
    pub fn execute(
        &mut self,
        spec: &'static CommandSpec,
        args: &[&[u8]],
        now: Millis,
        out: &mut Vec<u8>,
        proto: Proto,
        retrying_blocked: bool,
    ) -> Outcome {
        let Handler::Data(handler) = spec.handler else {
            panic!("{} is a server command; the server dispatches it", spec.name);
        };
        let mark = out.len();
        let mut ctx = self.ctx(now, proto, retrying_blocked);
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(&mut ctx, out, args)));
        let block = ctx.block.take();
        self.stats.commands_processed += 1;
        if ran.is_err() {
            if spec.flags.has(Flags::WRITE) {
                return Outcome::WritePanicked;
            }
            out.truncate(mark);
            let mut msg = b"ERR internal error while executing '".to_vec();
            msg.extend_from_slice(spec.name.as_bytes());
            msg.extend_from_slice(b"'");
            resp::reply::error(out, &msg);
            return Outcome::Done;
        }
        match block {
            Some(b) => Outcome::Blocked(b),
            None => Outcome::Done,
        }
    }
    /// Looks up, checks arity and runs a data command, replying in RESP2. Server commands and
    /// unknown commands get an error reply. Used by tests, replay and anything without a
    /// connection.
    pub fn run(&mut self, args: &[&[u8]], now: Millis, out: &mut Vec<u8>) -> Outcome {
        self.run_proto(args, now, out, Proto::Resp2)
    }

    /// [`Engine::run`], replying in protocol `proto` (tests of the RESP3 reply shapes).
    pub fn run_proto(&mut self, args: &[&[u8]], now: Millis, out: &mut Vec<u8>, proto: Proto) -> Outcome {
        let Some(spec) = crate::command::lookup(args[0]) else {
            errors::unknown_command(out, args);
            return Outcome::Done;
        };
        if !spec.arity_ok(args.len()) {
            errors::wrong_arity_of(out, spec, args[0]);
            return Outcome::Done;
        }
        if spec.name == "function" {
            // The state-changing forms, with the code taken as given (no connection, no Lua:
            // tests and tools; the server validates a library by compiling it first).
            self.function_command(args, out);
            return Outcome::Done;
        }
        if matches!(spec.handler, Handler::Server) {
            resp::reply::error(out, b"ERR this command needs a connection");
            return Outcome::Done;
        }
        self.execute(spec, args, now, out, proto, false)
    }

    /// Active expiry in the selected database: removes up to `max_keys` keys past their
    /// deadline, examining at most `budget` entries, and emits `DEL` for each (one round: the caller commits it as one
    /// batch). Returns how many keys it removed.
    pub fn active_expire(&mut self, now: Millis, max_keys: usize, budget: usize) -> usize {
        if self.replaying || self.replica {
            return 0;
        }
        if self.ks.volatile_len() == 0 {
            return 0;
        }
        let mut expired = Vec::new();
        self.ks.collect_expired(now, max_keys, budget, &mut expired);
        for key in &expired {
            self.ks.delete(key);
            self.pending.push(&[b"DEL", key]);
            self.stats.expired_keys += 1;
        }
        if self.log_expired {
            self.expired_log.extend(expired.iter().cloned());
        }
        expired.len()
    }

    /// A command context over this engine at `now` (which the keyspace's clock takes too).
    fn ctx(&mut self, now: Millis, proto: Proto, retrying_blocked: bool) -> Ctx<'_> {
        self.ks.set_now(now);
        Ctx {
            ks: &mut self.ks,
            db: self.db,
            dbs: &mut self.dbs,
            now,
            muts: &mut self.pending,
            stats: &mut self.stats,
            rng: &mut self.rng,
            replaying: self.replaying,
            replica: self.replica,
            script: self.script,
            no_touch: self.no_touch,
            ready_keys: &mut self.ready_keys,
            block: None,
            retrying_blocked,
            proto,
            expired_log: if self.log_expired { Some(&mut self.expired_log) } else { None },
            field_expiry_log: if self.log_field_expiry { Some(&mut self.field_expiry_log) } else { None },
            replica_view: None,
        }
    }

    /// The active expiry of hash fields: up to `max_keys` hashes with a field due lose their
    /// expired fields, each an `HDEL` in the pending batch. Returns the fields removed. See
    /// `commands::hash_ttl::active_expire_fields`.
    pub fn active_expire_fields(&mut self, now: Millis, max_keys: usize) -> usize {
        if self.replaying || self.replica {
            return 0;
        }
        if !self.ks.has_field_deadline_keys() {
            return 0;
        }
        // The server's own work, not a client's command: no script, no key-expiry log
        // (replaying and replica were ruled out above).
        let mut ctx = self.ctx(now, Proto::Resp2, false);
        ctx.script = false;
        ctx.expired_log = None;
        crate::commands::hash_ttl::active_expire_fields(&mut ctx, max_keys)
    }
}

impl Engine {
    /// The state-changing FUNCTION forms, on the library code as opaque text: `LOAD [REPLACE]
    /// code`, `DELETE library`, `FLUSH [ASYNC|SYNC]`. Changes [`Engine::functions`], emits the
    /// canonical mutation (`FUNCTION LOAD REPLACE code`, `FUNCTION DELETE lib`, `FUNCTION
    /// FLUSH`; a FLUSH with nothing loaded changes nothing and emits nothing) and writes the
    /// reply (Redis's: the library name, `+OK`, or the error). Returns whether it changed
    /// anything. The server calls it only after compiling a LOAD's code; replay calls it on
    /// records, whose code was compiled where they were written.
    pub fn function_command(&mut self, args: &[&[u8]], out: &mut Vec<u8>) -> bool {
        use resp::reply;
        let sub = args.get(1).map(|s| s.to_ascii_lowercase()).unwrap_or_default();
        match (sub.as_slice(), args.len()) {
            (b"load", 3 | 4) => {
                let replace = args.len() == 4;
                if replace && !args[2].eq_ignore_ascii_case(b"replace") {
                    let mut e = b"ERR Unknown option given: ".to_vec();
                    e.extend_from_slice(args[2]);
                    reply::error(out, &e);
                    return false;
                }
                let code = args[args.len() - 1];
                let md = match crate::functions::metadata(code) {
                    Ok(md) => md,
                    Err(e) => {
                        reply::error(out, &e);
                        return false;
                    }
                };
                if !md.engine.eq_ignore_ascii_case(b"lua") {
                    let mut e = b"ERR Engine '".to_vec();
                    e.extend_from_slice(&md.engine);
                    e.extend_from_slice(b"' not found");
                    reply::error(out, &e);
                    return false;
                }
                if !replace && self.functions.get(&md.name).is_some() {
                    let mut e = b"ERR Library '".to_vec();
                    e.extend_from_slice(&md.name);
                    e.extend_from_slice(b"' already exists");
                    reply::error(out, &e);
                    return false;
                }
                self.pending.push(&[b"FUNCTION", b"LOAD", b"REPLACE", code]);
                reply::bulk(out, &md.name);
                self.functions.insert(md.name, code.to_vec());
                true
            }
            (b"delete", 3) => {
                if !self.functions.remove(args[2]) {
                    reply::error(out, b"ERR Library not found");
                    return false;
                }
                self.pending.push(&[b"FUNCTION", b"DELETE", args[2]]);
                reply::ok(out);
                true
            }
            (b"flush", 2 | 3) => {
                if args.len() == 3
                    && !args[2].eq_ignore_ascii_case(b"sync")
                    && !args[2].eq_ignore_ascii_case(b"async")
                {
                    reply::error(out, b"ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
                    return false;
                }
                reply::ok(out);
                if self.functions.is_empty() {
                    return false;
                }
                self.functions.clear();
                self.pending.push(&[b"FUNCTION", b"FLUSH"]);
                true
            }
            _ => {
                reply::error(out, b"ERR this FUNCTION form needs a connection");
                false
            }
        }
    }

    /// Drops pending mutations from index `n` on (replay: a record's re-emission, or a rejected
    /// record's partial output).
    pub(crate) fn truncate_pending(&mut self, n: usize) {
        self.pending.truncate(n);
    }

    /// Appends a mutation to the pending batch as given (replay: the record itself).
    pub(crate) fn push_pending(&mut self, args: &[&[u8]]) {
        self.pending.push(args);
    }

    /// Starts or ends dropping what commands emit (replay: a record that is its own mutation).
    pub(crate) fn discard_emissions(&mut self, discard: bool) {
        self.pending.set_discarding(discard);
    }

    /// Appends a mutation parsed from `encoded` (see [`Batch::push_parsed`]).
    pub(crate) fn push_pending_parsed(&mut self, encoded: &[u8], args: &[&[u8]]) {
        self.pending.push_parsed(encoded, args);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mutations made while one lineage was served commit under the lineage the engine left it
    /// for, at the next offsets, and the new lineage names no predecessor.
    #[test]
    fn the_pending_mutations_commit_under_the_lineage_left_for() {
        let (old, new) = (crate::ReplId([1; 20]), crate::ReplId([2; 20]));
        let mut e =
            Engine::new(Replication { replid: old, offset: 7, previous: Some((crate::ReplId([3; 20]), 5)) });
        let mut out = Vec::new();
        e.run(&[b"SET", b"k", b"v"], 0, &mut out);
        e.run(&[b"SET", b"j", b"w"], 0, &mut out);
        e.leave_lineage(new);
        let batch = e.commit(Origin::Replay).expect("two mutations");
        assert_eq!((batch.replid, batch.last_offset(), batch.len()), (new, 9, 2));
        assert_eq!(e.repl, Replication { replid: new, offset: 9, previous: None });
    }
}
