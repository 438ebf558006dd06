//! Transports beyond plain TCP and Unix sockets. [`tls`]: rustls configurations, the TLS
//! stream that [`crate::conn::Stream::Tls`] wraps, and the blocking client handshake. [`ring`]:
//! the `--ring` shared-memory listener. [`sbe`]: the `--sbe-port` / `--sbe-unixsocket` binary
//! write listener (SBE messages in, Acks out, through the same dispatcher).

pub mod ring;
pub mod sbe;
pub mod tls;
