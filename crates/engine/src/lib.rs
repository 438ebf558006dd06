//! The command engine: one command table, and handlers that run a command against the store,
//! write its reply and emit its canonical mutations.
//!
//! Nothing here touches a socket or reads a clock: the caller passes the time in and owns the
//! connection. This is the write path's middle:
//!
//! ```text
//! args -> lookup + arity check (command.rs) -> handler (commands/*.rs) against the Keyspace
//!      -> reply bytes into the caller's buffer
//!      -> canonical mutations into the MutationLog (mutation.rs), one logical offset each
//! ```
//!
//! Layout:
//! - [`command`]: [`CommandSpec`] (name, arity, flags, keys, handler) and the table lookup.
//! - [`ctx`]: [`Ctx`], what a handler sees: the keyspace, the time, the mutation sink.
//! - [`mutation`]: the mutation log, replication offsets and Kafka compaction keys.
//! - [`errors`]: Redis's error texts, in one place.
//! - [`commands`]: one module per data type (plus `keyspace` for generic key commands and
//!   `server` for the ones that need the server, which the table marks as such).
//! - [`Engine`]: owns the keyspace and replication state; `execute` is the single entry point.

pub mod command;
pub mod commands;
pub mod ctx;
mod engine;
pub mod errors;
pub mod mutation;
pub mod syntax;
#[cfg(test)]
mod testing;
pub mod util;

pub use command::{lookup, CommandSpec, Flags, Handler};
pub use ctx::Ctx;
pub use engine::{Engine, Outcome, Stats};
pub use mutation::{compaction_key, MutationLog, Replication};
pub use store::Millis;
