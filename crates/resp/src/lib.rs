//! RESP, the Redis serialization protocol: requests (the same in every version), and replies
//! in RESP2 or RESP3, whichever the connection chose with HELLO. This crate performs no I/O.
//!
//! - [`RequestParser`]: incremental parser for client requests (multibulk and inline), safe on
//!   any byte split, with Redis's limits enforced before anything is allocated.
//! - [`reply`]: writers that append one reply to an output buffer (the hot path); the typed
//!   ones take a [`Proto`] and write the RESP3 type or its RESP2 fallback.
//! - [`Frame`]: an owned RESP2/RESP3 value with an encoder and a decoder, used where replies or
//!   mutations are read back (tests, replication streams; mutations are RESP2 only).

mod frame;
mod parser;
pub mod reply;

pub use frame::{decode_frame, encode_frame, Frame};
pub use parser::{fast_header, hex_value, unescape, Limits, ProtocolError, RequestParser};
pub use reply::Proto;
