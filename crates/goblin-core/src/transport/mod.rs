//! Transports beyond plain TCP and Unix sockets. [`tls`]: rustls configurations, the TLS
//! stream that [`crate::conn::Stream::Tls`] wraps, and the blocking client handshake. [`ring`]:
//! the `--ring` shared-memory listener, and the polling every *polled* stream shares. [`rdma`]:
//! the `--rdma-port` listener (RDMA-write rings, crates/rdma-ring). [`sbe`]: the `--sbe-port` /
//! `--sbe-unixsocket` binary write listener (SBE messages in, Acks out, through the same
//! dispatcher). [`set_keepalive`]: TCP keepalive, for client connections (`tcp-keepalive`)
//! and a replica's upstream link.

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

/// Opens a TCP connection to `addr` within `timeout`, from the local address `source` when it
/// is not empty (Redis's `bind-source-addr`: on a host with several addresses, the one a
/// replica's connections to its primary come from, which the primary's firewall or ACLs may
/// expect). The source's port is left to the kernel. A `source` that is not an IP address, or
/// not of `addr`'s family, or not this host's, fails the connection with the reason.
pub fn connect_tcp(
    addr: &std::net::SocketAddr,
    source: &str,
    timeout: std::time::Duration,
) -> io::Result<std::net::TcpStream> {
    if source.is_empty() {
        return std::net::TcpStream::connect_timeout(addr, timeout);
    }
    let ip: std::net::IpAddr = source.parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bind-source-addr '{source}' is not an IP address"),
        )
    })?;
    if ip.is_ipv4() != addr.is_ipv4() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bind-source-addr {ip} is not of the same family as {addr}"),
        ));
    }
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(*addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket
        .bind(&std::net::SocketAddr::new(ip, 0).into())
        .map_err(|e| io::Error::new(e.kind(), format!("cannot bind bind-source-addr {ip}: {e}")))?;
    socket.connect_timeout(&(*addr).into(), timeout)?;
    Ok(socket.into())
}

/// Turns on TCP keepalive for the socket `fd`: after `idle_secs` of silence the kernel probes
/// the peer every `interval_secs`, and after `count` unanswered probes the connection fails,
/// so that a peer that vanished without a FIN (a crashed host, a partition) is noticed.
pub fn set_keepalive(
    fd: std::os::fd::RawFd,
    idle_secs: u32,
    interval_secs: u32,
    count: u32,
) -> std::io::Result<()> {
    let clamp = |v: u32| v.clamp(1, i32::MAX as u32) as libc::c_int;
    for (level, name, value) in [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, clamp(idle_secs)),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, clamp(interval_secs)),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, clamp(count)),
    ] {
        // SAFETY: setting an integer socket option on a socket the caller owns.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as u32,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A client connection's keepalive as Redis sets it from `tcp-keepalive` N (0: off): probes
/// after N seconds of silence, every N/3 seconds (at least 1), three of them.
pub fn client_keepalive(fd: std::os::fd::RawFd, secs: u32) {
    if secs > 0 {
        // A socket that refuses the options is served without them.
        let _ = set_keepalive(fd, secs, (secs / 3).max(1), 3);
    }
}
