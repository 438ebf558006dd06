//! The shared-memory fabric: one-sided writes into the peer's memfd, same host only.
//!
//! It exists for hosts without an RDMA NIC (goblin-core `--rdma-fabric shm`) and for the tests,
//! which can run here where no verbs device exists. It keeps the verbs contract exactly (see
//! [`crate::fabric::Fabric`]), so the protocol above it cannot tell the difference.
//!
//! Each side's region is a sealed memfd (`F_SEAL_SHRINK | F_SEAL_GROW`: the peer maps it and
//! must not be able to make our accesses fault by truncating it):
//!
//! ```text
//! 0      head: u64, immediates pushed by the peer (bit 63: we want a doorbell on the next push)
//! 128    tail: u64, immediates we have consumed
//! 256    the immediate queue: QUEUE u32 slots (the "completion queue")
//! 16384  the receive ring (its size is in the hello)
//! ```
//!
//! The peer learns the region from our hello as (process id, descriptor number) and opens
//! `/proc/<pid>/fd/<fd>`: possible for the same user on the same host, and for nobody else,
//! which is the trust the transport claims. It checks the seals and the size before mapping.
//!
//! A write is: copy the bytes into the peer's ring, store the immediate in the peer's slot
//! `head % QUEUE`, then publish with `head.swap(head + 1, Release)`. The consumer's `Acquire`
//! load of `head` therefore sees the slot and the bytes (release/acquire on `head`), which is
//! the verbs promise "a polled immediate's data is visible". Sleep and wake are goblin-ring's
//! eventcount (crates/ring/src/ring.rs, "Sleep and wake"), unchanged: the consumer sets the
//! SLEEPING bit with `fetch_or` and re-checks; the publishing `swap` returns the bit to the
//! producer, which then writes one byte to the TCP socket. A full queue (the peer is not
//! polling) does not block the producer: the immediate waits in a local backlog, delivered in
//! order on later calls, as an HCA retries on "receiver not ready"; meanwhile [`Fabric::arm`]
//! refuses to sleep, so the backlog is never stranded.
//!
//! Adversarial mode ([`ShmFabric::set_adversarial`], for tests): a write first fills its
//! destination with garbage, copies a random part of its bytes in random order, and completes
//! (rest of the bytes, then the immediate) only on a later call, at random. That is the weakest
//! visibility RDMA allows, and a consumer that read past the immediates would see it.

use crate::fabric::{corrupt, Fabric, FabricKind};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub const CTL: usize = 16384;
const HEAD: usize = 0;
const TAIL: usize = 128;
const SLOTS: usize = 256;
/// Immediates the queue holds.
pub const QUEUE: u64 = ((CTL - SLOTS) / 4) as u64;
/// Bit 63 of `head`: the owner asked for a doorbell.
const SLEEPING: u64 = 1 << 63;

fn last_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// A shared mapping, unmapped on drop.
struct Mapping {
    base: *mut u8,
    len: usize,
}

unsafe impl Send for Mapping {}

impl Mapping {
    fn new(fd: RawFd, len: usize) -> io::Result<Mapping> {
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if p == libc::MAP_FAILED {
            return Err(last_err("mmap"));
        }
        Ok(Mapping { base: p.cast(), len })
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        // In the control block, 8-aligned (the mapping is page-aligned).
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    fn slot(&self, i: u64) -> &AtomicU32 {
        unsafe { &*(self.base.add(SLOTS + 4 * (i % QUEUE) as usize) as *const AtomicU32) }
    }

    fn ring_write(&self, pos: usize, src: &[u8]) {
        assert!(CTL + pos + src.len() <= self.len);
        // In bounds by the assert; the private source cannot overlap the shared mapping.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.base.add(CTL + pos), src.len()) }
    }

    fn ring_read(&self, pos: usize, dst: &mut [u8]) {
        assert!(CTL + pos + dst.len() <= self.len);
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(CTL + pos), dst.as_mut_ptr(), dst.len()) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// A write whose immediate (and, adversarially, part of whose bytes) is not delivered yet.
struct Pending {
    pos: usize,
    /// The bytes still to copy (adversarial mode only; else already in place).
    bytes: Vec<u8>,
    imm: u32,
}

struct Peer {
    map: Mapping,
    rx: usize,
    /// Immediates pushed into the peer's queue (our private copy of its `head`).
    head: u64,
    sock: RawFd,
    backlog: VecDeque<Pending>,
}

/// A small xorshift generator: adversarial mode needs no quality, only reproducibility.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

pub struct ShmFabric {
    own: Mapping,
    fd: OwnedFd,
    rx: usize,
    /// Immediates consumed from our queue (private copy of our `tail`).
    tail: u64,
    peer: Option<Peer>,
    adversary: Option<Rng>,
}

impl ShmFabric {
    /// A region with a receive ring of `rx` bytes (a valid ring size).
    pub fn new(rx: usize) -> io::Result<ShmFabric> {
        if !crate::valid_ring_size(rx as u64) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "invalid RDMA ring size"));
        }
        let len = CTL + rx;
        let fd = goblin_ring::shm::sealed_memfd(c"goblin-rdma", len)?;
        let own = Mapping::new(fd.as_raw_fd(), len)?;
        Ok(ShmFabric { own, fd, rx, tail: 0, peer: None, adversary: None })
    }

    /// Tests only: makes this side's writes land as weakly as RDMA allows (module docs).
    pub fn set_adversarial(&mut self, seed: u64) {
        self.adversary = Some(Rng(seed | 1));
    }

    /// Delivers backlogged writes, in order, while the peer's queue has room (adversarially:
    /// stopping at random).
    fn progress(&mut self) -> io::Result<()> {
        let Some(p) = &mut self.peer else { return Ok(()) };
        while let Some(w) = p.backlog.front() {
            if let Some(r) = &mut self.adversary {
                if r.next() % 2 == 0 {
                    break;
                }
            }
            let ptail = p.map.word(TAIL).load(Ordering::Acquire);
            if ptail > p.head || p.head - ptail > QUEUE {
                return Err(corrupt());
            }
            if p.head - ptail == QUEUE {
                break;
            }
            p.map.ring_write(w.pos, &w.bytes);
            p.map.slot(p.head).store(w.imm, Ordering::Relaxed);
            p.head += 1;
            let old = p.map.word(HEAD).swap(p.head, Ordering::Release);
            if old & SLEEPING != 0 {
                doorbell(p.sock);
            }
            p.backlog.pop_front();
        }
        Ok(())
    }

    fn head(&self) -> &AtomicU64 {
        self.own.word(HEAD)
    }
}

/// One byte on the TCP socket wakes the peer's poll. A full socket buffer already holds
/// unread doorbells and a closed peer needs none, so errors are ignored.
fn doorbell(sock: RawFd) {
    let b = 1u8;
    unsafe { libc::send(sock, (&b as *const u8).cast(), 1, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
}

/// Parses the shm info: process id and descriptor number.
fn parse_info(info: &[u8]) -> io::Result<(u32, i32)> {
    if info.len() != 8 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "bad shm fabric info"));
    }
    Ok((u32::from_le_bytes(info[..4].try_into().unwrap()), i32::from_le_bytes(info[4..].try_into().unwrap())))
}

impl Fabric for ShmFabric {
    fn kind(&self) -> FabricKind {
        FabricKind::Shm
    }

    fn rx_size(&self) -> usize {
        self.rx
    }

    fn local_info(&self) -> Vec<u8> {
        let mut v = std::process::id().to_le_bytes().to_vec();
        v.extend_from_slice(&self.fd.as_raw_fd().to_le_bytes());
        v
    }

    fn connect(&mut self, peer_info: &[u8], peer_rx: usize, sock: RawFd) -> io::Result<()> {
        let (pid, fd) = parse_info(peer_info)?;
        let path = format!("/proc/{pid}/fd/{fd}\0");
        let f = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDWR | libc::O_CLOEXEC) };
        if f < 0 {
            return Err(last_err(&format!("opening the peer's region {}", path.trim_end_matches('\0'))));
        }
        let f = unsafe { OwnedFd::from_raw_fd(f) };
        let len = CTL + peer_rx;
        // Only a memfd sealed against shrinking: a regular file, or one the peer could
        // truncate under our mapping, is refused.
        let seals = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GET_SEALS) };
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if seals < 0
            || seals & libc::F_SEAL_SHRINK == 0
            || unsafe { libc::fstat(f.as_raw_fd(), &mut st) } != 0
            || st.st_size as u64 != len as u64
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the peer's region is not a sealed memfd of the announced size",
            ));
        }
        let map = Mapping::new(f.as_raw_fd(), len)?;
        self.peer = Some(Peer { map, rx: peer_rx, head: 0, sock, backlog: VecDeque::new() });
        Ok(())
    }

    fn write_imm(&mut self, pos: usize, src: &[u8], imm: u32) -> io::Result<()> {
        let Some(p) = &mut self.peer else { return Err(io::ErrorKind::NotConnected.into()) };
        if pos + src.len() > p.rx {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "write past the peer's ring"));
        }
        match &mut self.adversary {
            Some(r) => {
                // Garbage first, then a random part of the bytes in random order; the rest,
                // and the immediate, later.
                let junk: Vec<u8> = (0..src.len()).map(|_| r.next() as u8).collect();
                p.map.ring_write(pos, &junk);
                if !src.is_empty() {
                    for _ in 0..r.next() % (src.len() as u64 + 1) {
                        let i = (r.next() % src.len() as u64) as usize;
                        p.map.ring_write(pos + i, &src[i..i + 1]);
                    }
                }
                p.backlog.push_back(Pending { pos, bytes: src.to_vec(), imm });
            }
            None => {
                p.map.ring_write(pos, src);
                p.backlog.push_back(Pending { pos, bytes: Vec::new(), imm });
            }
        }
        self.progress()
    }

    fn poll_imm(&mut self) -> io::Result<Option<u32>> {
        self.progress()?;
        let h = self.head().load(Ordering::Acquire) & !SLEEPING;
        if h < self.tail || h - self.tail > QUEUE {
            return Err(corrupt());
        }
        if h == self.tail {
            return Ok(None);
        }
        let imm = self.own.slot(self.tail).load(Ordering::Relaxed);
        self.tail += 1;
        // The slot is read: the producer may reuse it.
        self.own.word(TAIL).store(self.tail, Ordering::Release);
        Ok(Some(imm))
    }

    fn rx_read(&self, pos: usize, dst: &mut [u8]) {
        self.own.ring_read(pos, dst)
    }

    fn arm(&mut self) -> io::Result<bool> {
        self.progress()?;
        if self.peer.as_ref().is_some_and(|p| !p.backlog.is_empty()) {
            return Ok(false);
        }
        let cur = self.head().fetch_or(SLEEPING, Ordering::Acquire) & !SLEEPING;
        if cur != self.tail {
            self.disarm();
            return Ok(false);
        }
        Ok(true)
    }

    fn disarm(&mut self) {
        self.head().fetch_and(!SLEEPING, Ordering::Relaxed);
    }

    fn wake_fd(&self) -> Option<RawFd> {
        None
    }

    fn drain_wake(&mut self) {}
}
