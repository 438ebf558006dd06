//! RESP2, the Redis serialization protocol, version 2: the only wire format goblin-core speaks
//! to clients. This crate performs no I/O.
//!
//! - [`RequestParser`]: incremental parser for client requests (multibulk and inline), safe on
//!   any byte split, with Redis's limits enforced before anything is allocated.
//! - [`reply`]: writers that append one RESP2 reply to an output buffer (the hot path).
//! - [`Frame`]: an owned RESP2 value with an encoder and a decoder, used where replies or
//!   mutations are read back (tests, replication streams).

mod frame;
mod parser;
pub mod reply;

pub use frame::{decode_frame, encode_frame, Frame};
pub use parser::{Limits, ProtocolError, RequestParser};
