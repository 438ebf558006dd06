//! goblin-ring: RESP over a pair of shared-memory rings, for clients on the server's host.
//!
//! A connection is made through a Unix socket, the *rendezvous* (goblin-core's `--ring PATH`).
//! The server answers each connection with a sealed memfd holding two single-producer/
//! single-consumer byte rings (client->server and server->client; see [`shm`] for the layout and
//! [`ring`] for the algorithm and its memory-ordering argument), passed with SCM_RIGHTS. The
//! Unix socket then stays open for two jobs:
//!
//! * liveness: either side closing it (a client killed with SIGKILL included) is seen by the
//!   other as EOF, and the server frees the connection and its memory;
//! * the doorbell: a side that found its ring empty (or full) and went to sleep in `poll` is
//!   woken by one byte written to the socket ([`ring`] explains when a byte is sent).
//!
//! Bytes on the rings are exactly what a socket would carry (RESP2 requests in, replies out).
//! [`Client`] is a blocking Rust client; [`ffi`] exposes it to C (`include/goblin_ring.h`).
//! [`Endpoint`] is the non-blocking end both sides build on (goblin-core wraps its server side).

pub mod reply;
pub mod ring;
pub mod shm;
mod sync;

#[cfg(not(loom))]
mod client;
#[cfg(not(loom))]
pub mod ffi;
#[cfg(not(loom))]
pub use client::Client;

#[cfg(not(loom))]
pub use endpoint::Endpoint;

#[cfg(not(loom))]
mod endpoint {
    use crate::ring::{Consumer, Corrupt, Producer, RawBytes};
    use crate::shm::Segment;
    use std::io;
    use std::os::fd::{AsRawFd, RawFd};
    use std::os::unix::net::UnixStream;

    fn corrupt(_: Corrupt) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, "ring indices corrupted by the peer")
    }

    /// One side of a ring connection: the ring it produces into, the ring it consumes from,
    /// and the doorbell/liveness socket. Every call is non-blocking.
    pub struct Endpoint {
        // Declared before `seg`: they borrow from its mapping and are dropped first.
        tx: Producer<'static, RawBytes>,
        rx: Consumer<'static, RawBytes>,
        sock: UnixStream,
        /// The peer closed the socket (seen while draining doorbells).
        eof: bool,
        seg: Segment,
    }

    impl Endpoint {
        fn new(seg: Segment, sock: UnixStream, server: bool) -> Endpoint {
            // SAFETY: the control blocks live in `seg`'s mapping, which this struct owns and
            // unmaps only after `tx` and `rx` are dropped (field order); the references never
            // leave the struct.
            let (c2s, s2c): (&'static _, &'static _) =
                unsafe { (&*(seg.c2s_ctl() as *const _), &*(seg.s2c_ctl() as *const _)) };
            let (tx, rx) = if server {
                (Producer::new(s2c, seg.s2c_data()), Consumer::new(c2s, seg.c2s_data()))
            } else {
                (Producer::new(c2s, seg.c2s_data()), Consumer::new(s2c, seg.s2c_data()))
            };
            Endpoint { tx, rx, sock, eof: false, seg }
        }

        /// The server side of a freshly accepted rendezvous connection: creates the segment
        /// (two rings of `ring_size` bytes), passes it to the client, and makes the socket
        /// non-blocking. The send is one byte and a descriptor on a fresh socket: it does not block.
        pub fn accept(sock: UnixStream, ring_size: u64) -> io::Result<Endpoint> {
            let (seg, fd) = Segment::create(ring_size)?;
            crate::shm::send_fd(sock.as_raw_fd(), fd.as_raw_fd())?;
            sock.set_nonblocking(true)?;
            Ok(Endpoint::new(seg, sock, true))
        }

        /// The client side: receives and maps the segment (blocking), then goes non-blocking.
        pub fn connect(sock: UnixStream) -> io::Result<Endpoint> {
            let fd = crate::shm::recv_fd(sock.as_raw_fd())?;
            let seg = Segment::open(&fd)?;
            sock.set_nonblocking(true)?;
            Ok(Endpoint::new(seg, sock, false))
        }

        pub fn sock_fd(&self) -> RawFd {
            self.sock.as_raw_fd()
        }

        pub fn ring_size(&self) -> usize {
            self.seg.ring_size()
        }

        /// Input is waiting in the ring (one Acquire load: cheap enough to poll every turn).
        pub fn has_input(&self) -> bool {
            !self.rx.is_empty()
        }

        /// Room in the outgoing ring.
        pub fn can_write(&self) -> bool {
            self.tx.free().is_ok_and(|n| n > 0)
        }

        /// Whether the peer's EOF has been seen.
        pub fn peer_closed(&self) -> bool {
            self.eof
        }

        /// Reads what the incoming ring holds. Empty ring: drains doorbell bytes from the socket
        /// and returns `WouldBlock`, or `Ok(0)` once the peer has closed it (after all its data).
        pub fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if buf.is_empty() {
                return Ok(0);
            }
            // Bounded: a peer that keeps moving its index cannot keep this call spinning.
            for _ in 0..3 {
                let n = self.rx.pop(buf).map_err(corrupt)?;
                if n > 0 {
                    if self.rx.wake_needed() {
                        self.doorbell();
                    }
                    return Ok(n);
                }
                if self.eof {
                    return Ok(0);
                }
                if self.drain_doorbell() {
                    // Data published before the close is still read first.
                    continue;
                }
                if self.rx.is_empty() {
                    break;
                }
            }
            Err(io::ErrorKind::WouldBlock.into())
        }

        /// Publishes as much of `buf` as fits. Full ring: asks the peer for a doorbell when it
        /// frees space, and returns `WouldBlock`.
        pub fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if buf.is_empty() {
                return Ok(0);
            }
            // Bounded, as in try_read. On WouldBlock the wake-me bit may be set or not (the
            // peer freed space meanwhile): either way the caller's next attempt makes progress
            // or arms again, and a wait on the doorbell re-checks first.
            for _ in 0..3 {
                let n = self.tx.push(buf).map_err(corrupt)?;
                if n > 0 {
                    if self.tx.wake_needed() {
                        self.doorbell();
                    }
                    return Ok(n);
                }
                if self.tx.prepare_wait().map_err(corrupt)? {
                    break;
                }
            }
            Err(io::ErrorKind::WouldBlock.into())
        }

        /// Wakes the peer. A full socket buffer already holds unread doorbells (the peer will
        /// wake), and a closed peer needs none, so errors are ignored.
        pub fn doorbell(&self) {
            let b = 1u8;
            unsafe {
                libc::send(
                    self.sock.as_raw_fd(),
                    (&b as *const u8).cast(),
                    1,
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
        }

        /// Reads and discards doorbell bytes; returns true (and remembers it) at the peer's EOF.
        pub fn drain_doorbell(&mut self) -> bool {
            let eof = crate::shm::drain_socket(self.sock.as_raw_fd());
            self.eof |= eof;
            eof
        }

        /// Before sleeping on the socket: asks for a doorbell on the next publish. True: still
        /// empty, sleep; false: input arrived meanwhile (nothing armed).
        pub fn arm_read(&self) -> io::Result<bool> {
            self.rx.prepare_wait().map_err(corrupt)
        }

        pub fn disarm_read(&self) {
            self.rx.cancel_wait();
        }

        /// Producer side of a wait for space (see [`Endpoint::try_write`], which arms it).
        pub fn disarm_write(&self) {
            self.tx.cancel_wait();
        }

        /// Blocks until the incoming ring has data (`read`) or the outgoing one has room, or
        /// the peer is gone: polls the ring for `spin`, then sleeps in `poll` on the doorbell
        /// (the eventcount in ring.rs). Returns `BrokenPipe` when waiting for room
        /// and the peer has closed; a read wait returns and the next read reports the EOF.
        pub fn wait(&mut self, read: bool, spin: std::time::Duration) -> io::Result<()> {
            let ready = |ep: &Endpoint| if read { ep.has_input() } else { ep.can_write() };
            let deadline = std::time::Instant::now() + spin;
            let mut i = 0u32;
            loop {
                if ready(self) {
                    if !read {
                        self.disarm_write();
                    }
                    return Ok(());
                }
                i += 1;
                // The clock only every few rounds: a ring check is a few nanoseconds.
                if i & 63 == 0 && std::time::Instant::now() >= deadline {
                    break;
                }
                std::hint::spin_loop();
            }
            // Arm the request (again, for a write: try_write may have left it armed or not),
            // re-checking: the eventcount in ring.rs.
            let sleep = if read { self.arm_read()? } else { self.tx.prepare_wait().map_err(corrupt)? };
            if !sleep {
                return Ok(());
            }
            if self.eof {
                return if read { Ok(()) } else { Err(io::ErrorKind::BrokenPipe.into()) };
            }
            let mut pfd = libc::pollfd { fd: self.sock_fd(), events: libc::POLLIN, revents: 0 };
            loop {
                if unsafe { libc::poll(&mut pfd, 1, -1) } >= 0 {
                    break;
                }
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            let eof = self.drain_doorbell();
            if read {
                self.disarm_read();
            } else {
                self.disarm_write();
                if eof && !self.can_write() {
                    return Err(io::Error::new(io::ErrorKind::BrokenPipe, "peer closed the connection"));
                }
            }
            Ok(())
        }
    }
}
