//! Transports beyond plain TCP and Unix sockets. [`tls`]: rustls configurations, the TLS
//! stream that [`crate::conn::Stream::Tls`] wraps, and the blocking client handshake. [`ring`]:
//! the `--ring` shared-memory listener, and the polling every *polled* stream shares. [`rdma`]:
//! the `--rdma-port` listener (RDMA-write rings, crates/rdma-ring). [`sbe`]: the `--sbe-port` /
//! `--sbe-unixsocket` binary write listener (SBE messages in, Acks out, through the same
//! dispatcher).

pub mod rdma;
pub mod ring;
pub mod sbe;
pub mod tls;

use std::io;
use std::os::fd::RawFd;

/// A stream whose bytes arrive in memory without raising an event (goblin-ring's rings, the
/// RDMA rings): the loop polls it every turn, and before sleeping arms it so that the peer's
/// next publish wakes the socket (or [`Polled::wake_fd`]).
pub(crate) trait Polled {
    /// Input is waiting (or, for RDMA, room came back after a full ring: the owner retries
    /// its output).
    fn has_input(&mut self) -> bool;
    /// Drops doorbell bytes; true once the peer's EOF is seen.
    fn drain_doorbell(&mut self) -> bool;
    /// Asks for a wake-up on the next publish; true: still nothing, sleep.
    fn arm_read(&mut self) -> io::Result<bool>;
    fn disarm_read(&mut self);
    /// After a wait for room.
    fn disarm_write(&mut self);
    /// The liveness and doorbell socket.
    fn sock_fd(&self) -> RawFd;
    /// A second descriptor that wakes a sleeper (RDMA verbs: the completion channel).
    fn wake_fd(&self) -> Option<RawFd> {
        None
    }
}

impl Polled for goblin_ring::Endpoint {
    fn has_input(&mut self) -> bool {
        goblin_ring::Endpoint::has_input(self)
    }
    fn drain_doorbell(&mut self) -> bool {
        goblin_ring::Endpoint::drain_doorbell(self)
    }
    fn arm_read(&mut self) -> io::Result<bool> {
        goblin_ring::Endpoint::arm_read(self)
    }
    fn disarm_read(&mut self) {
        goblin_ring::Endpoint::disarm_read(self)
    }
    fn disarm_write(&mut self) {
        goblin_ring::Endpoint::disarm_write(self)
    }
    fn sock_fd(&self) -> RawFd {
        goblin_ring::Endpoint::sock_fd(self)
    }
}

/// One wake-up request serves reads and writes alike on RDMA (credits arrive as immediates
/// on the same queue as data), so both disarms are the same.
impl Polled for goblin_rdma::Endpoint {
    fn has_input(&mut self) -> bool {
        goblin_rdma::Endpoint::has_input(self)
    }
    fn drain_doorbell(&mut self) -> bool {
        goblin_rdma::Endpoint::drain_doorbell(self)
    }
    fn arm_read(&mut self) -> io::Result<bool> {
        goblin_rdma::Endpoint::arm_read(self)
    }
    fn disarm_read(&mut self) {
        self.disarm()
    }
    fn disarm_write(&mut self) {
        self.disarm()
    }
    fn sock_fd(&self) -> RawFd {
        goblin_rdma::Endpoint::sock_fd(self)
    }
    fn wake_fd(&self) -> Option<RawFd> {
        goblin_rdma::Endpoint::wake_fd(self)
    }
}
