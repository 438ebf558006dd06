//! Transports beyond plain TCP and Unix sockets. [`tls`]: rustls configurations, the TLS
//! stream that [`crate::conn::Stream::Tls`] wraps, and the blocking client handshake.

pub mod tls;
