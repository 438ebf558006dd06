//! The engine: owns the keyspace and the replication lineage; executes one command at a time.

use crate::command::{CommandSpec, Handler};
use crate::ctx::Ctx;
use crate::errors;
use crate::mutation::{MutationLog, Replication};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use store::{Keyspace, Millis};

/// Counters INFO reports.
#[derive(Default, Debug, Clone)]
pub struct Stats {
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub expired_keys: u64,
    pub commands_processed: u64,
}

/// Where a blocking command waits.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockOn {
    pub keys: Vec<Vec<u8>>,
    /// Absolute deadline; None waits forever.
    pub deadline: Option<Millis>,
}

/// What happened to a command.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// The reply is in the output buffer.
    Done,
    /// A blocking command found nothing: no reply was written; park the client and retry the
    /// same command (with `retrying_blocked`) when one of the keys is signalled ready.
    Blocked(BlockOn),
}

pub struct Engine {
    pub ks: Keyspace,
    pub repl: Replication,
    /// Mutations emitted since the caller last drained them.
    pub muts: MutationLog,
    pub stats: Stats,
    pub rng: SmallRng,
    /// Keys signalled ready by the last commands (see [`Ctx::ready_keys`]); the server drains it.
    pub ready_keys: Vec<Vec<u8>>,
    /// Applying a replication stream: see [`Ctx::replaying`].
    pub replaying: bool,
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
            repl,
            muts: MutationLog::default(),
            stats: Stats::default(),
            rng: SmallRng::from_entropy(),
            ready_keys: Vec::new(),
            replaying: false,
        }
    }

    /// Runs a data command whose spec and arity the caller has already checked. The logical
    /// offset advances by the number of mutations the command emitted.
    pub fn execute(
        &mut self,
        spec: &'static CommandSpec,
        args: &[&[u8]],
        now: Millis,
        out: &mut Vec<u8>,
        retrying_blocked: bool,
    ) -> Outcome {
        let Handler::Data(handler) = spec.handler else {
            panic!("{} is a server command; the server dispatches it", spec.name);
        };
        let before = self.muts.count;
        let mut ctx = Ctx {
            ks: &mut self.ks,
            now,
            muts: &mut self.muts,
            stats: &mut self.stats,
            rng: &mut self.rng,
            replaying: self.replaying,
            ready_keys: &mut self.ready_keys,
            block: None,
            retrying_blocked,
        };
        handler(&mut ctx, out, args);
        let block = ctx.block.take();
        self.stats.commands_processed += 1;
        self.repl.offset += self.muts.count - before;
        match block {
            Some(b) => Outcome::Blocked(b),
            None => Outcome::Done,
        }
    }

    /// Looks up, checks arity and runs a data command. Server commands and unknown commands get
    /// an error reply. Used by tests, replay and anything without a connection.
    pub fn run(&mut self, args: &[&[u8]], now: Millis, out: &mut Vec<u8>) -> Outcome {
        let Some(spec) = crate::command::lookup(args[0]) else {
            errors::unknown_command(out, args);
            return Outcome::Done;
        };
        if !spec.arity_ok(args.len()) {
            errors::wrong_arity(out, args[0]);
            return Outcome::Done;
        }
        if matches!(spec.handler, Handler::Server) {
            resp::reply::error(out, b"ERR this command needs a connection");
            return Outcome::Done;
        }
        self.execute(spec, args, now, out, false)
    }

    /// Active expiry: removes up to `max_keys` keys past their deadline, examining at most
    /// `budget` entries, and emits `DEL` for each. Returns how many keys it removed.
    pub fn active_expire(&mut self, now: Millis, max_keys: usize, budget: usize) -> usize {
        if self.replaying || self.ks.volatile_len() == 0 {
            return 0;
        }
        let mut expired = Vec::new();
        self.ks.collect_expired(now, max_keys, budget, &mut expired);
        for key in &expired {
            self.ks.delete(key);
            self.muts.push(&[b"DEL", key]);
            self.repl.offset += 1;
            self.stats.expired_keys += 1;
        }
        expired.len()
    }
}
