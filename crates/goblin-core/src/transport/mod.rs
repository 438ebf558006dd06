//! Transports beyond plain TCP and Unix sockets. [`tls`]: rustls configurations, the TLS
//! stream that [`crate::conn::Stream::Tls`] wraps, and the blocking client handshake. [`ring`]:
//! the `--ring` shared-memory listener.

pub mod ring;
pub mod tls;
