//! The shared segment: one sealed memfd holding a connection's two rings, and passing its
//! descriptor over the rendezvous socket (SCM_RIGHTS).
//!
//! Layout (offsets in bytes; native endianness, both ends run on one host):
//!
//! ```text
//! 0      header: magic "GOBRING\0", u32 version (1), u32 zero, u64 ring size (a power of two)
//! 4096   control block of the client->server ring (256 bytes used of 512, see ring.rs)
//! 4608   control block of the server->client ring
//! 8192   data of the client->server ring (ring size bytes)
//! 8192+S data of the server->client ring
//! ```
//!
//! The server creates the memfd, writes the header, and seals it against shrinking and growing
//! before passing it: a client cannot truncate the file under the server's mapping (which
//! would make the server's next access fault with SIGBUS).

use crate::ring::Ctl;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub const MAGIC: [u8; 8] = *b"GOBRING\0";
pub const VERSION: u32 = 1;
pub const HEADER: usize = 4096;
pub const C2S_CTL: usize = 4096;
pub const S2C_CTL: usize = 4096 + 512;
pub const DATA: usize = 8192;
/// Ring sizes accepted: a power of two in this range.
pub const MIN_RING: u64 = 4096;
pub const MAX_RING: u64 = 1 << 30;

/// The byte the server sends with the descriptor; anything else starts an error line.
pub const HELLO: u8 = b'R';

fn total_len(ring: u64) -> usize {
    DATA + 2 * ring as usize
}

pub fn valid_ring_size(n: u64) -> bool {
    n.is_power_of_two() && (MIN_RING..=MAX_RING).contains(&n)
}

/// A mapped segment. Unmapped on drop; everything borrowing from it must be gone by then.
pub struct Segment {
    base: *mut u8,
    len: usize,
    ring: usize,
}

unsafe impl Send for Segment {}

impl Drop for Segment {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

fn last_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

unsafe fn map(fd: RawFd, len: usize) -> io::Result<*mut u8> {
    let p =
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0);
    if p == libc::MAP_FAILED {
        return Err(last_err("mmap"));
    }
    Ok(p.cast())
}

/// Creates a sealed memfd of `len` bytes (named `name` in /proc): it cannot shrink or grow,
/// so a peer that maps it can never fault on a truncated file. Shared with goblin-rdma's
/// shared-memory fabric.
pub fn sealed_memfd(name: &std::ffi::CStr, len: usize) -> io::Result<OwnedFd> {
    unsafe {
        let fd = libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING);
        if fd < 0 {
            return Err(last_err("memfd_create"));
        }
        let fd = OwnedFd::from_raw_fd(fd);
        if libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) != 0 {
            return Err(last_err("ftruncate"));
        }
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        if libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) != 0 {
            return Err(last_err("F_ADD_SEALS"));
        }
        Ok(fd)
    }
}

/// Reads and discards whatever the socket holds without blocking (doorbell bytes). True at
/// the peer's EOF or a socket error (the connection is over), false once it would block.
pub fn drain_socket(sock: RawFd) -> bool {
    let mut buf = [0u8; 256];
    loop {
        let r = unsafe { libc::recv(sock, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        if r > 0 {
            continue;
        }
        if r == 0 {
            return true;
        }
        match io::Error::last_os_error().kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return false,
            _ => return true,
        }
    }
}

impl Segment {
    /// Creates, sizes, seals and maps a new segment with two rings of `ring` bytes each.
    pub fn create(ring: u64) -> io::Result<(Segment, OwnedFd)> {
        if !valid_ring_size(ring) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "ring size must be a power of two"));
        }
        let len = total_len(ring);
        let fd = sealed_memfd(c"goblin-ring", len)?;
        unsafe {
            let base = map(fd.as_raw_fd(), len)?;
            let seg = Segment { base, len, ring: ring as usize };
            // The file is zero-filled: the control blocks start in their initial state.
            std::ptr::copy_nonoverlapping(MAGIC.as_ptr(), base, 8);
            std::ptr::write_unaligned(base.add(8).cast::<u32>(), VERSION);
            std::ptr::write_unaligned(base.add(16).cast::<u64>(), ring);
            Ok((seg, fd))
        }
    }

    /// Maps a segment received from the server, checking its header and size.
    pub fn open(fd: &OwnedFd) -> io::Result<Segment> {
        let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, format!("ring segment: {m}"));
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd.as_raw_fd(), &mut st) != 0 {
                return Err(last_err("fstat"));
            }
            let size = st.st_size as u64;
            if size < DATA as u64 {
                return Err(bad("too small"));
            }
            let head = map(fd.as_raw_fd(), HEADER)?;
            let mut magic = [0u8; 8];
            std::ptr::copy_nonoverlapping(head, magic.as_mut_ptr(), 8);
            let version = std::ptr::read_unaligned(head.add(8).cast::<u32>());
            let ring = std::ptr::read_unaligned(head.add(16).cast::<u64>());
            libc::munmap(head.cast(), HEADER);
            if magic != MAGIC || version != VERSION {
                return Err(bad("bad magic or version"));
            }
            if !valid_ring_size(ring) || total_len(ring) as u64 != size {
                return Err(bad("bad ring size"));
            }
            let len = total_len(ring);
            Ok(Segment { base: map(fd.as_raw_fd(), len)?, len, ring: ring as usize })
        }
    }

    pub fn ring_size(&self) -> usize {
        self.ring
    }

    /// The client->server control block.
    pub fn c2s_ctl(&self) -> &Ctl {
        // Mapped, page-aligned (so 128-byte aligned) and large enough; zero bytes are a valid Ctl.
        unsafe { &*self.base.add(C2S_CTL).cast::<Ctl>() }
    }
    pub fn s2c_ctl(&self) -> &Ctl {
        unsafe { &*self.base.add(S2C_CTL).cast::<Ctl>() }
    }
    pub fn c2s_data(&self) -> crate::ring::RawBytes {
        unsafe { crate::ring::RawBytes::new(self.base.add(DATA), self.ring) }
    }
    pub fn s2c_data(&self) -> crate::ring::RawBytes {
        unsafe { crate::ring::RawBytes::new(self.base.add(DATA + self.ring), self.ring) }
    }
}

const _: () = assert!(std::mem::size_of::<Ctl>() <= 512);

/// Sends `fd` with the one-byte [`HELLO`] payload.
pub fn send_fd(sock: RawFd, fd: RawFd) -> io::Result<()> {
    unsafe {
        let mut byte = HELLO;
        let mut iov = libc::iovec { iov_base: (&mut byte as *mut u8).cast(), iov_len: 1 };
        let space = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as usize;
        let mut cbuf = vec![0u64; space.div_ceil(8)];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
        loop {
            let r = libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL);
            if r == 1 {
                return Ok(());
            }
            if r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(last_err("sendmsg"));
        }
    }
}

/// Receives the segment's descriptor (blocking socket). The server sends an error line
/// instead (`-ERR ...`) when it refuses the connection: that is returned as the error.
pub fn recv_fd(sock: RawFd) -> io::Result<OwnedFd> {
    unsafe {
        let mut buf = [0u8; 256];
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: 1 };
        let space = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as usize;
        let mut cbuf = vec![0u64; space.div_ceil(8)];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let r = loop {
            let r = libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC);
            if r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break r;
        };
        if r < 0 {
            return Err(last_err("recvmsg"));
        }
        let mut fd = None;
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                fd = Some(OwnedFd::from_raw_fd(std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<RawFd>())));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        if r == 1 && buf[0] == HELLO {
            if let Some(fd) = fd {
                return Ok(fd);
            }
        }
        if r == 0 {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "server closed the ring rendezvous",
            ));
        }
        // An error line: read the rest of it (short, sent at once).
        let n = libc::recv(sock, buf.as_mut_ptr().add(1).cast(), buf.len() - 1, libc::MSG_DONTWAIT);
        let end = 1 + n.max(0) as usize;
        let line = String::from_utf8_lossy(&buf[..end]).trim_end().to_string();
        Err(io::Error::new(io::ErrorKind::ConnectionRefused, line))
    }
}
