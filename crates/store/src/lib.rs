//! The keyspace and the value types goblin-core stores.
//!
//! Pure data structures: no sockets, no threads, and no clock. Every time-dependent call takes
//! the current time (`now`, unix milliseconds) as an argument, so that the engine decides what
//! "now" is once per command and replays are deterministic.
//!
//! Layout:
//! - [`keyspace`]: the key -> (value, expiry) table.
//! - [`value`]: [`Value`] (owned), [`ValueRef`] / [`ValueMut`] (borrowed views), [`Plain`] (a
//!   canonical, comparable dump used by tests and replay checks).
//! - [`types`]: one module per value type (string encoding, hash, set, zset, list, sparse array).

pub mod alloc;
pub mod keyspace;
pub mod limits;
pub mod types;
pub mod value;

pub use keyspace::Keyspace;
pub use types::{Stream, StreamId};
pub use value::{Kind, Plain, StrRef, Value, ValueMut, ValueRef};

/// Unix time in milliseconds. Expiry deadlines are absolute values of this type.
pub type Millis = i64;
