//! The `--rdma-port` listener: RESP over RDMA-write rings (crates/rdma-ring, `goblin-rdma`).
//!
//! The port is TCP. Each accepted connection gets a local region (a receive ring of
//! `--rdma-ring-size` bytes on the `--rdma-fabric`) and the server's hello at once; the
//! client's hello is read later by the connection's ordinary reads, without blocking the loop
//! (until it arrived the stream reads and writes nothing). The socket then stays open as the
//! liveness channel: its EOF closes the client, whatever killed it. The connection is an
//! ordinary [`crate::conn::Conn`] with [`Stream::Rdma`], and it is *polled* like a ring
//! connection (transport/ring.rs: `ring_turn`, the spin window, arming before a sleep); the
//! wake-up is a doorbell byte on the socket (shm fabric) or the completion channel's
//! descriptor, registered with the connection's token (verbs).
//!
//! Which fabric: `verbs` needs cargo feature `rdma` (`Config::validate` refuses the flag
//! otherwise) and a verbs device, checked before listening ([`check_fabric`] fails naming the
//! missing device); `shm` is explicit, for hosts without an RDMA NIC and for the tests.

use crate::config::Config;
use crate::conn::Stream;
use crate::server::Server;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, IntoRawFd};

/// Checks that the `--rdma-fabric` can serve (before any listener opens): the error names
/// the missing feature or device.
pub(crate) fn check_fabric(cfg: &Config) -> io::Result<()> {
    goblin_rdma::fabric::check(cfg.rdma_fabric.kind())
        .map_err(|e| io::Error::new(e.kind(), format!("--rdma-port: {e}")))?;
    tracing::info!(
        "RDMA ring clients: fabric {}, ring {} bytes",
        cfg.rdma_fabric.kind().name(),
        cfg.rdma_ring_size
    );
    Ok(())
}

impl Server {
    /// The stream, addresses and descriptor of a freshly accepted `--rdma-port` connection.
    pub(crate) fn rdma_accept(
        &self,
        s: mio::net::TcpStream,
        peer: SocketAddr,
    ) -> io::Result<(Stream, String, String, i32, bool)> {
        let laddr = s.local_addr().map(|a| a.to_string()).unwrap_or_default();
        // SAFETY: the descriptor is moved out of the mio stream, which no longer owns it.
        let mut s = unsafe { std::net::TcpStream::from_raw_fd(s.into_raw_fd()) };
        if self.nclients >= self.cfg.maxclients as usize {
            // Before any region exists, in place of the hello: the client's handshake returns
            // this line as its error. The socket is fresh, so the short write fits.
            use std::io::Write;
            let _ = s.write(b"-ERR max number of clients reached\r\n");
            return Err(io::Error::new(io::ErrorKind::ConnectionRefused, "max number of clients reached"));
        }
        let ep = goblin_rdma::Endpoint::accept(s, self.cfg.rdma_fabric.kind(), self.cfg.rdma_ring_size)?;
        let fd = ep.sock_fd();
        Ok((Stream::Rdma(Box::new(ep)), format!("rdma:{peer}"), format!("rdma:{laddr}"), fd, false))
    }
}
