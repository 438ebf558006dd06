//! The command engine: one command table, and handlers that run a command against the store,
//! write its reply and emit its canonical mutations.
//!
//! Nothing here touches a socket or reads a clock: the caller passes the time in and owns the
//! connection. This is the write path's middle:
//!
//! ```text
//! args -> lookup + arity check (command.rs) -> handler (commands/*.rs) against the Keyspace
//!      -> reply bytes into the caller's buffer
//!      -> canonical mutations into the pending Batch (batch.rs)
//!      -> Engine::commit(origin) at the end of the atomic unit: one Batch, consecutive
//!         logical offsets, handed to the server's sinks
//! ```
//!
//! Records from outside (Kafka, firehose) enter through [`Engine::apply_record`] (replay.rs).
//!
//! Layout:
//! - [`command`]: [`CommandSpec`] (name, arity, flags, keys, handler) and the table lookup.
//! - [`ctx`]: [`Ctx`], what a handler sees: the keyspace, the time, the mutation sink.
//! - [`batch`]: [`Batch`], one atomic unit of canonical mutations, and its [`Origin`].
//! - [`mutation`]: the lineage ([`ReplId`], [`Replication`]) and Kafka compaction keys.
//! - [`replay`]: applying records from outside, with the ordering rule and typed errors.
//! - [`functions`]: the Redis 7 function libraries, held as opaque replicated state.
//! - [`digest`]: DEBUG DIGEST, a content fingerprint of the dataset.
//! - [`errors`]: Redis's error texts, in one place.
//! - [`commands`]: one module per data type (plus `keyspace` for generic key commands and
//!   `server` for the ones that need the server, which the table marks as such).
//! - [`Engine`]: owns the keyspace and replication state; `execute` is the single entry point.

pub mod batch;
pub mod command;
pub mod commands;
pub mod ctx;
pub mod digest;
pub mod dtoa;
mod engine;
pub mod errors;
pub mod evict;
pub mod functions;
pub mod mutation;
pub mod rdb;
pub mod replay;
pub mod syntax;
#[cfg(test)]
pub(crate) mod testing;
pub mod util;

pub use batch::{Batch, Mutation, Origin};
pub use command::{lookup, CommandSpec, Flags, Handler};
pub use ctx::Ctx;
pub use engine::{BlockOn, Engine, Outcome, Stats, DEFAULT_DATABASES};
pub use functions::Functions;
pub use mutation::{compaction_key, compaction_key_into, ReplId, Replication};
pub use replay::{Applied, RecordError};
pub use store::Millis;
