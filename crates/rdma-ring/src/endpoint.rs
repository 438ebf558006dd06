//! One side of an RDMA ring connection: the protocol of the crate docs over a [`Fabric`].

use crate::fabric::{self, corrupt, Fabric, FabricKind};
use crate::hello::{self, Hello};
use crate::CREDIT;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// Immediates processed per [`Endpoint::pump`]: a peer that keeps writing cannot keep one
/// call spinning.
const PUMP_MAX: usize = 4096;

/// The server side has sent its hello and waits for the client's (read without blocking).
struct Awaiting {
    buf: Vec<u8>,
}

/// A connection end. Every call is non-blocking except [`Endpoint::connect`] and
/// [`Endpoint::wait`].
pub struct Endpoint {
    fabric: Box<dyn Fabric>,
    sock: TcpStream,
    handshake: Option<Awaiting>,
    /// The peer's EOF on the socket has been seen.
    eof: bool,
    /// The peer's receive ring size (0 until the handshake completes).
    tx_cap: u64,
    /// Bytes written to the peer, and bytes it reported consumed (`head - credit <= tx_cap`).
    head: u64,
    credit: u64,
    /// Bytes announced by data immediates, consumed, and reported in credits
    /// (`reported <= tail <= avail`, `avail - tail <= rx ring`).
    avail: u64,
    tail: u64,
    reported: u64,
    /// The last write found the peer's ring full.
    write_blocked: bool,
}

impl Endpoint {
    fn new(fabric: Box<dyn Fabric>, sock: TcpStream) -> Endpoint {
        Endpoint {
            fabric,
            sock,
            handshake: None,
            eof: false,
            tx_cap: 0,
            head: 0,
            credit: 0,
            avail: 0,
            tail: 0,
            reported: 0,
            write_blocked: false,
        }
    }

    /// The server side of a freshly accepted TCP connection: creates the local region (a
    /// receive ring of `ring` bytes on `kind`) and sends the hello. The client's hello is read
    /// later, without blocking, by [`Endpoint::try_read`]; until then the endpoint reads and
    /// writes nothing. The hello is short and the socket fresh: the write does not block.
    pub fn accept(sock: TcpStream, kind: FabricKind, ring: u64) -> io::Result<Endpoint> {
        Self::accept_with(sock, fabric::open(kind, ring as usize)?)
    }

    /// [`Endpoint::accept`] over a fabric the caller made (tests: an adversarial one).
    pub fn accept_with(mut sock: TcpStream, fabric: Box<dyn Fabric>) -> io::Result<Endpoint> {
        let h = Hello { fabric: fabric.kind(), ring: fabric.rx_size() as u64, info: fabric.local_info() };
        sock.set_nodelay(true)?;
        sock.write_all(&h.encode())?;
        sock.set_nonblocking(true)?;
        let mut ep = Endpoint::new(fabric, sock);
        ep.handshake = Some(Awaiting { buf: Vec::new() });
        Ok(ep)
    }

    /// The client side: reads the server's hello (blocking, at most `timeout`), creates a region
    /// of the fabric the server named with a receive ring of `ring` bytes, connects to the
    /// server's, and sends its hello. The server's refusal line is returned as the error.
    pub fn connect(sock: TcpStream, ring: u64, timeout: Duration) -> io::Result<Endpoint> {
        let h = read_hello(&sock, timeout)?;
        let fabric = fabric::open(h.fabric, ring as usize)?;
        Self::connect_with(sock, fabric, h)
    }

    /// The client side over a fabric the caller made, after reading the server's hello.
    pub fn connect_with(
        mut sock: TcpStream,
        mut fabric: Box<dyn Fabric>,
        server: Hello,
    ) -> io::Result<Endpoint> {
        if server.fabric != fabric.kind() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "the server's RDMA listener uses the {} fabric, not {}",
                    server.fabric.name(),
                    fabric.kind().name()
                ),
            ));
        }
        sock.set_nodelay(true)?;
        fabric.connect(&server.info, server.ring as usize, sock.as_raw_fd())?;
        let mine = Hello { fabric: fabric.kind(), ring: fabric.rx_size() as u64, info: fabric.local_info() };
        sock.write_all(&mine.encode())?;
        sock.set_nonblocking(true)?;
        let mut ep = Endpoint::new(fabric, sock);
        ep.tx_cap = server.ring;
        Ok(ep)
    }

    pub fn sock_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// The fabric's extra wake-up descriptor (verbs: the completion channel), to poll beside
    /// the socket.
    pub fn wake_fd(&self) -> Option<RawFd> {
        self.fabric.wake_fd()
    }

    pub fn fabric(&self) -> FabricKind {
        self.fabric.kind()
    }

    /// The local receive ring's size.
    pub fn ring_size(&self) -> usize {
        self.fabric.rx_size()
    }

    /// The peer's receive ring size (0 before the handshake completed).
    pub fn peer_ring_size(&self) -> usize {
        self.tx_cap as usize
    }

    pub fn peer_closed(&self) -> bool {
        self.eof
    }

    /// Processes the delivered immediates: data extends `avail`, credits extend `credit`.
    fn pump(&mut self) -> io::Result<()> {
        if self.handshake.is_some() {
            return Ok(());
        }
        for _ in 0..PUMP_MAX {
            let Some(imm) = self.fabric.poll_imm()? else { break };
            let n = (imm & !CREDIT) as u64;
            if imm & CREDIT != 0 {
                if n > self.head - self.credit {
                    return Err(corrupt());
                }
                self.credit += n;
            } else {
                if n > self.fabric.rx_size() as u64 - (self.avail - self.tail) {
                    return Err(corrupt());
                }
                self.avail += n;
            }
        }
        Ok(())
    }

    /// Reads from the socket what it holds of the client's hello; connects once it is whole.
    fn handshake_step(&mut self) -> io::Result<usize> {
        let Some(aw) = &mut self.handshake else { return Ok(1) };
        let mut chunk = [0u8; 512];
        loop {
            match self.sock.read(&mut chunk) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(0);
                }
                Ok(n) => aw.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
            if aw.buf.len() > 2048 {
                break;
            }
        }
        let (h, used) = match hello::parse(&aw.buf) {
            Ok(Some(x)) => x,
            Ok(None) => return Err(io::ErrorKind::WouldBlock.into()),
            Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
        };
        if used != aw.buf.len() {
            // Nothing may follow the hello on the socket but doorbells, which only come after
            // the client saw us connected... and a client never writes before its hello.
            return Err(io::Error::new(io::ErrorKind::InvalidData, "bytes after the RDMA handshake"));
        }
        if h.fabric != self.fabric.kind() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "the client chose another RDMA fabric"));
        }
        let fd = self.sock.as_raw_fd();
        self.fabric.connect(&h.info, h.ring as usize, fd)?;
        self.tx_cap = h.ring;
        self.handshake = None;
        // Input the client wrote while we were connecting is found by the caller's next poll.
        Ok(1)
    }

    /// Whether the connection has something for its owner: unread input, or room again after
    /// a write found the peer's ring full. Processes delivered immediates (cheap enough to
    /// call every loop turn: an empty queue is one load). Errors (a corrupt peer) are left for
    /// the next read to report, so they answer true.
    pub fn has_input(&mut self) -> bool {
        if self.handshake.is_some() {
            return false;
        }
        if self.pump().is_err() {
            return true;
        }
        if self.avail > self.tail {
            return true;
        }
        // Room after a full ring is reported once: the owner retries its write then.
        if self.write_blocked && self.head - self.credit < self.tx_cap {
            self.write_blocked = false;
            return true;
        }
        false
    }

    /// Room in the peer's ring.
    pub fn can_write(&mut self) -> bool {
        self.handshake.is_none() && self.pump().is_ok() && self.head - self.credit < self.tx_cap
    }

    /// Reads what the receive ring holds. Empty: drains doorbell bytes from the socket and
    /// returns `WouldBlock`, or `Ok(0)` once the peer has closed it (after all its data).
    pub fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.handshake.is_some() {
            match self.handshake_step()? {
                0 => return Ok(0),
                _ if self.handshake.is_some() => return Err(io::ErrorKind::WouldBlock.into()),
                _ => {}
            }
        }
        if buf.is_empty() {
            return Ok(0);
        }
        for _ in 0..3 {
            self.pump()?;
            if self.avail > self.tail {
                let n = buf.len().min((self.avail - self.tail) as usize);
                self.copy_out(&mut buf[..n]);
                self.tail += n as u64;
                self.send_credit(false)?;
                return Ok(n);
            }
            if self.eof {
                return Ok(0);
            }
            if !self.drain_doorbell() {
                break;
            }
            // The peer closed: what it wrote before is still read first (loop once more).
        }
        Err(io::ErrorKind::WouldBlock.into())
    }

    fn copy_out(&self, dst: &mut [u8]) {
        let cap = self.fabric.rx_size();
        let pos = (self.tail as usize) & (cap - 1);
        let first = dst.len().min(cap - pos);
        self.fabric.rx_read(pos, &mut dst[..first]);
        if first < dst.len() {
            self.fabric.rx_read(0, &mut dst[first..]);
        }
    }

    /// Reports consumed bytes once a quarter of the ring is unreported (or `force`d with any).
    /// A producer blocked on a full ring is thereby always answered (crate docs).
    fn send_credit(&mut self, force: bool) -> io::Result<()> {
        let unreported = self.tail - self.reported;
        if unreported == 0 || (!force && unreported < (self.fabric.rx_size() / 4) as u64) {
            return Ok(());
        }
        self.fabric.write_imm(0, &[], CREDIT | unreported as u32)?;
        self.reported = self.tail;
        Ok(())
    }

    /// Writes as much of `buf` as the peer's ring has room for. Full: arms the fabric (the
    /// peer's next credit wakes us) and returns `WouldBlock`.
    pub fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.handshake.is_some() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.pump()?;
        let mut free = self.tx_cap - (self.head - self.credit);
        if free == 0 {
            self.write_blocked = true;
            // Armed, a credit arriving now rings the doorbell; one that came meanwhile is
            // taken at once.
            if !self.fabric.arm()? {
                self.pump()?;
            }
            free = self.tx_cap - (self.head - self.credit);
            if free == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
        }
        self.write_blocked = false;
        let n = buf.len().min(free as usize);
        let cap = self.tx_cap as usize;
        let pos = (self.head as usize) & (cap - 1);
        let first = n.min(cap - pos);
        self.fabric.write_imm(pos, &buf[..first], first as u32)?;
        if first < n {
            self.fabric.write_imm(0, &buf[first..n], (n - first) as u32)?;
        }
        self.head += n as u64;
        Ok(n)
    }

    /// Reads and discards doorbell bytes (and wake-up events); true (remembered) at the
    /// peer's EOF.
    pub fn drain_doorbell(&mut self) -> bool {
        if self.handshake.is_some() {
            // The socket holds the client's hello, not doorbells: left for try_read (which
            // also sees an EOF).
            return false;
        }
        self.fabric.drain_wake();
        let eof = goblin_ring::shm::drain_socket(self.sock.as_raw_fd());
        self.eof |= eof;
        eof
    }

    /// Before sleeping on the socket (and [`Endpoint::wake_fd`]): asks for a wake-up on the
    /// next delivery. True: nothing to do, sleep; false: input or room arrived meanwhile, or
    /// the fabric holds writes it must still deliver (nothing armed).
    pub fn arm_read(&mut self) -> io::Result<bool> {
        if self.handshake.is_some() {
            // The client's hello arrives on the socket, which the sleep watches.
            return Ok(true);
        }
        if self.has_input() {
            return Ok(false);
        }
        if !self.fabric.arm()? {
            return Ok(false);
        }
        if self.has_input() {
            self.fabric.disarm();
            return Ok(false);
        }
        Ok(true)
    }

    pub fn disarm(&mut self) {
        if self.handshake.is_none() {
            self.fabric.disarm();
        }
    }

    /// Blocks until there is input (`read`) or room in the peer's ring, or the peer is gone:
    /// polls for `spin`, then sleeps in `poll` on the socket and the fabric's descriptor.
    /// A write wait returns `BrokenPipe` once the peer has closed.
    pub fn wait(&mut self, read: bool, spin: Duration) -> io::Result<()> {
        let deadline = Instant::now() + spin;
        let mut i = 0u32;
        loop {
            let ready = if read { self.has_input() || self.eof } else { self.can_write() };
            if ready {
                return Ok(());
            }
            if !read && self.eof {
                return Err(io::Error::new(io::ErrorKind::BrokenPipe, "peer closed the connection"));
            }
            i += 1;
            if i & 63 == 0 && Instant::now() >= deadline {
                break;
            }
            std::hint::spin_loop();
        }
        loop {
            if !self.arm_read()? {
                self.disarm();
            } else {
                let mut pfds = [
                    libc::pollfd { fd: self.sock_fd(), events: libc::POLLIN, revents: 0 },
                    libc::pollfd { fd: self.wake_fd().unwrap_or(-1), events: libc::POLLIN, revents: 0 },
                ];
                let r = unsafe { libc::poll(pfds.as_mut_ptr(), 2, -1) };
                if r < 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
                self.disarm();
                self.drain_doorbell();
            }
            let ready = if read { self.has_input() || self.eof } else { self.can_write() };
            if ready {
                return Ok(());
            }
            if self.eof {
                return if read {
                    Ok(())
                } else {
                    Err(io::Error::new(io::ErrorKind::BrokenPipe, "peer closed the connection"))
                };
            }
        }
    }
}

/// Reads one hello (or the server's refusal) from a blocking socket within `timeout`.
pub(crate) fn read_hello(mut sock: &TcpStream, timeout: Duration) -> io::Result<Hello> {
    sock.set_read_timeout(Some(timeout))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        // The server sends nothing after its hello until our hello reached it: no over-read.
        let n = sock.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::ConnectionAborted, "server closed the RDMA handshake"));
        }
        buf.extend_from_slice(&chunk[..n]);
        match hello::parse(&buf) {
            Ok(Some((h, used))) if used == buf.len() => {
                sock.set_read_timeout(None)?;
                return Ok(h);
            }
            Ok(Some(_)) => {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "bytes after the RDMA handshake"))
            }
            Ok(None) => {}
            Err(e) if buf.first() == Some(&b'-') => {
                return Err(io::Error::new(io::ErrorKind::ConnectionRefused, e))
            }
            Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
        }
    }
}

/// Connects to `addr`, an RDMA ring listener, with a receive ring of `ring` bytes.
pub fn dial(addr: impl std::net::ToSocketAddrs, ring: u64, timeout: Duration) -> io::Result<Endpoint> {
    let sock = TcpStream::connect(addr)?;
    Endpoint::connect(sock, ring, timeout)
}
