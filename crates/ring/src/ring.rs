//! A single-producer/single-consumer byte ring in shared memory, and its sleep/wake protocol.
//!
//! # Layout and ownership
//!
//! A ring is a control block ([`Ctl`]) and a data area of `cap` bytes, `cap` a power of two.
//! `head` counts every byte the producer has published, `tail` every byte the consumer has
//! consumed; both only grow (u64: they never wrap in practice), and byte `i` of the stream
//! lives at `data[i % cap]`. The producer is the only writer of `head`, the consumer the only
//! writer of `tail`, and each keeps its own index in private memory ([`Producer::head`],
//! [`Consumer::tail`]): the shared copy of its own index is only ever written, never trusted.
//! The peer's index is read and validated (`0 <= head - tail <= cap`); a peer that breaks that
//! (a buggy or hostile client) gets [`Corrupt`], never an out-of-bounds access. `head` and
//! `tail` sit on separate 128-byte lines (two cache lines: adjacent-line prefetch) so that the
//! two sides do not false-share.
//!
//! # Memory ordering of the data
//!
//! * Publish: the producer copies bytes into `data[head..head+n]`, then stores
//!   `head + n` with **Release**. The consumer loads `head` with **Acquire**; a load that sees
//!   the new value therefore also sees every byte written before it (release/acquire pair on
//!   `head`).
//! * Consume: the consumer copies bytes out of `data[tail..tail+n]`, then stores `tail + n` with
//!   **Release**. The producer loads `tail` with **Acquire** before reusing that space, so the
//!   consumer's reads happen-before the producer's overwrites (release/acquire pair on `tail`).
//!
//! No other ordering is needed for the data: each byte is written by one side only while the
//! indices say it owns it.
//!
//! # Sleep and wake (an eventcount folded into the indices)
//!
//! A side that finds nothing to do (consumer: ring empty; producer: ring full) may sleep on its
//! *doorbell* (a Unix socket: one byte written wakes `poll`/`epoll` on the other end). The
//! "wake me" flag is bit 63 of the *peer's* index word ([`SLEEPING`]; the counters never get
//! near 2^63): the consumer sets it in `head`, the producer in `tail`.
//!
//! ```text
//! waiter (consumer):  cur = head.fetch_or(SLEEPING, Acquire)
//!                     if cur (without the bit) != tail: data after all, clear the bit, go on
//!                     else sleep on the doorbell
//! waker (producer):   old = head.swap(new_head, Release)     (the publish itself)
//!                     if old has SLEEPING: ring the doorbell
//! ```
//!
//! (and the same with the roles swapped on `tail` when the producer waits for space).
//!
//! Why no wake-up is lost: the waiter's `fetch_or` and the waker's publishing `swap` are
//! read-modify-writes of one location, so they are totally ordered in its modification order
//! and each reads the value the other left. If the publish comes first, the waiter's `fetch_or`
//! returns the new index and it does not sleep; if the `fetch_or` comes first, the publish's
//! `swap` returns the bit and the waker rings. No fences are needed. The doorbell is a byte in
//! a socket buffer, so a ring that happens before the waiter reaches `poll` is not lost either:
//! `poll` returns at once. The publishing `swap` also clears the bit, so exactly one waker rings
//! per arming. A spurious ring (the waiter found data, and a publish swapped the bit away
//! before the waiter cleared it) costs one extra wake-up and nothing else: waiters always
//! re-check after waking. A first design used separate flag words with SeqCst fences on both
//! sides (Dekker's pattern, correct by the C++ fence rules as far as we can tell). loom
//! reported a lost wake-up for it, while its plain store-buffering litmus with fences passes
//! (`dekker_with_seqcst_fences` in tests/loom.rs); we did not settle whether that is a limit
//! of loom's model or a flaw we missed, and chose the design loom confirms: one location with
//! read-modify-writes is also simpler to argue and costs the same (an `xchg` instead of a
//! store plus an `mfence` on x86). Replacing the publishing `swap` by a load and a store makes
//! the loom tests fail (checked by hand), so they do detect a lost wake-up.
//!
//! `crates/ring/tests/loom.rs` model-checks both the data hand-off and the sleep/wake protocol
//! under the interleavings loom explores (`RUSTFLAGS="--cfg loom"`), with the doorbell modelled
//! as a counting semaphore: a lost wake-up would leave a side asleep forever, which loom reports
//! as a deadlock.
//!
//! The data area is shared with another process, which may (if hostile) scribble on bytes while
//! they are being copied. They are copied as plain bytes into private buffers and only parsed
//! there, so the worst such a peer achieves is garbage input on its own connection.

use crate::sync::{AtomicU64, Ordering};

/// Bit 63 of an index word: the *other* side asked for a doorbell (see the module docs).
pub const SLEEPING: u64 = 1 << 63;

/// Aligns (and pads) its content to 128 bytes: one index per pair of cache lines.
#[repr(C, align(128))]
pub struct Padded<T>(pub T);

/// The control block of one ring (256 bytes in shared memory; all zero is the initial state).
#[repr(C)]
pub struct Ctl {
    /// Bytes published by the producer; bit 63: the consumer wants a doorbell on publish.
    pub head: Padded<AtomicU64>,
    /// Bytes consumed by the consumer; bit 63: the producer wants a doorbell when space frees.
    pub tail: Padded<AtomicU64>,
}

impl Ctl {
    /// A zeroed control block (loom models and tests; shared memory starts zeroed).
    pub fn new() -> Self {
        Ctl { head: Padded(AtomicU64::new(0)), tail: Padded(AtomicU64::new(0)) }
    }
}

impl Default for Ctl {
    fn default() -> Self {
        Self::new()
    }
}

/// The peer broke the ring's invariant (`0 <= head - tail <= cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

impl std::fmt::Display for Corrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ring indices out of range (corrupted by the peer)")
    }
}
impl std::error::Error for Corrupt {}

/// The data area of a ring: `size()` bytes, a power of two.
pub trait Bytes {
    fn size(&self) -> usize;
    /// Copies `src` to `[pos, pos + src.len())`, which lies within the area.
    fn write_at(&self, pos: usize, src: &[u8]);
    /// Copies `[pos, pos + dst.len())`, which lies within the area, to `dst`.
    fn read_at(&self, pos: usize, dst: &mut [u8]);
}

/// A data area in memory this process mapped (shared memory).
#[derive(Clone, Copy)]
pub struct RawBytes {
    ptr: *mut u8,
    len: usize,
}

// The pointer refers to a shared mapping that outlives every Producer/Consumer built on it
// (the owning struct drops them first); access is by copies only.
unsafe impl Send for RawBytes {}

impl RawBytes {
    /// # Safety
    /// `ptr..ptr+len` must stay mapped, readable and writable while this value is used, and
    /// `len` must be a power of two.
    pub unsafe fn new(ptr: *mut u8, len: usize) -> Self {
        debug_assert!(len.is_power_of_two());
        RawBytes { ptr, len }
    }
}

impl Bytes for RawBytes {
    fn size(&self) -> usize {
        self.len
    }
    fn write_at(&self, pos: usize, src: &[u8]) {
        assert!(pos + src.len() <= self.len);
        // In bounds by the assert; the private source cannot overlap the shared mapping.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(pos), src.len()) }
    }
    fn read_at(&self, pos: usize, dst: &mut [u8]) {
        assert!(pos + dst.len() <= self.len);
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(pos), dst.as_mut_ptr(), dst.len()) }
    }
}

/// Copies `src` into the ring starting at stream position `at`, wrapping at the end.
fn copy_in<B: Bytes>(data: &B, at: u64, src: &[u8]) {
    let cap = data.size();
    let pos = (at as usize) & (cap - 1);
    let first = src.len().min(cap - pos);
    data.write_at(pos, &src[..first]);
    if first < src.len() {
        data.write_at(0, &src[first..]);
    }
}

fn copy_out<B: Bytes>(data: &B, at: u64, dst: &mut [u8]) {
    let cap = data.size();
    let pos = (at as usize) & (cap - 1);
    let first = dst.len().min(cap - pos);
    data.read_at(pos, &mut dst[..first]);
    if first < dst.len() {
        data.read_at(0, &mut dst[first..]);
    }
}

/// The producing end of a ring.
pub struct Producer<'a, B: Bytes> {
    ctl: &'a Ctl,
    data: B,
    head: u64,
    /// The last publish found the consumer's SLEEPING bit: ring its doorbell.
    wake: bool,
}

impl<'a, B: Bytes> Producer<'a, B> {
    /// For a fresh (zeroed) ring.
    pub fn new(ctl: &'a Ctl, data: B) -> Self {
        Producer { ctl, data, head: 0, wake: false }
    }

    pub fn capacity(&self) -> usize {
        self.data.size()
    }

    fn free_from(&self, tail: u64) -> Result<usize, Corrupt> {
        let used = self.head.wrapping_sub(tail & !SLEEPING);
        if used > self.data.size() as u64 {
            return Err(Corrupt);
        }
        Ok(self.data.size() - used as usize)
    }

    /// Bytes that can be pushed now.
    pub fn free(&self) -> Result<usize, Corrupt> {
        self.free_from(self.ctl.tail.0.load(Ordering::Acquire))
    }

    /// Publishes as much of `src` as fits; returns how much (0 when full). The caller then
    /// calls [`Producer::wake_needed`] and rings the doorbell if it says so.
    pub fn push(&mut self, src: &[u8]) -> Result<usize, Corrupt> {
        let n = self.free()?.min(src.len());
        if n > 0 {
            copy_in(&self.data, self.head, &src[..n]);
            self.head += n as u64;
            let old = self.ctl.head.0.swap(self.head, Ordering::Release);
            self.wake |= old & SLEEPING != 0;
        }
        Ok(n)
    }

    /// After a push: the consumer was asleep (or about to be) and must get a doorbell.
    pub fn wake_needed(&mut self) -> bool {
        std::mem::take(&mut self.wake)
    }

    /// The ring is full: asks the consumer for a doorbell when it frees space. True if the
    /// ring is still full after arming (sleep now); false if space appeared (bit cleared).
    pub fn prepare_wait(&self) -> Result<bool, Corrupt> {
        let tail = self.ctl.tail.0.fetch_or(SLEEPING, Ordering::Acquire);
        let full = self.free_from(tail).map(|f| f == 0);
        if !matches!(full, Ok(true)) {
            self.cancel_wait();
        }
        full
    }

    /// Clears a request armed by [`Producer::prepare_wait`] (woke, or space appeared).
    pub fn cancel_wait(&self) {
        self.ctl.tail.0.fetch_and(!SLEEPING, Ordering::Relaxed);
    }
}

/// The consuming end of a ring.
pub struct Consumer<'a, B: Bytes> {
    ctl: &'a Ctl,
    data: B,
    tail: u64,
    wake: bool,
}

impl<'a, B: Bytes> Consumer<'a, B> {
    pub fn new(ctl: &'a Ctl, data: B) -> Self {
        Consumer { ctl, data, tail: 0, wake: false }
    }

    fn available_from(&self, head: u64) -> Result<usize, Corrupt> {
        let avail = (head & !SLEEPING).wrapping_sub(self.tail);
        if avail > self.data.size() as u64 {
            return Err(Corrupt);
        }
        Ok(avail as usize)
    }

    /// Bytes ready to be popped.
    pub fn available(&self) -> Result<usize, Corrupt> {
        self.available_from(self.ctl.head.0.load(Ordering::Acquire))
    }

    /// Cheap emptiness check (one Acquire load), for polling many rings.
    pub fn is_empty(&self) -> bool {
        self.ctl.head.0.load(Ordering::Acquire) & !SLEEPING == self.tail
    }

    /// Copies up to `dst.len()` bytes out; returns how many (0 when empty). The caller then
    /// calls [`Consumer::wake_needed`] and rings the doorbell if it says so.
    pub fn pop(&mut self, dst: &mut [u8]) -> Result<usize, Corrupt> {
        let n = self.available()?.min(dst.len());
        if n > 0 {
            copy_out(&self.data, self.tail, &mut dst[..n]);
            self.tail += n as u64;
            let old = self.ctl.tail.0.swap(self.tail, Ordering::Release);
            self.wake |= old & SLEEPING != 0;
        }
        Ok(n)
    }

    /// After a pop: the producer was waiting for space and must get a doorbell.
    pub fn wake_needed(&mut self) -> bool {
        std::mem::take(&mut self.wake)
    }

    /// The ring is empty: asks the producer for a doorbell on its next publish. True if the
    /// ring is still empty after arming (sleep now); false if data appeared (bit cleared).
    pub fn prepare_wait(&self) -> Result<bool, Corrupt> {
        let head = self.ctl.head.0.fetch_or(SLEEPING, Ordering::Acquire);
        let empty = self.available_from(head).map(|a| a == 0);
        if !matches!(empty, Ok(true)) {
            self.cancel_wait();
        }
        empty
    }

    pub fn cancel_wait(&self) {
        self.ctl.head.0.fetch_and(!SLEEPING, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    struct VecBytes(std::cell::RefCell<Vec<u8>>);
    impl Bytes for VecBytes {
        fn size(&self) -> usize {
            self.0.borrow().len()
        }
        fn write_at(&self, pos: usize, src: &[u8]) {
            self.0.borrow_mut()[pos..pos + src.len()].copy_from_slice(src);
        }
        fn read_at(&self, pos: usize, dst: &mut [u8]) {
            dst.copy_from_slice(&self.0.borrow()[pos..pos + dst.len()]);
        }
    }

    #[test]
    fn wraps_and_preserves_order() {
        let ctl = Ctl::new();
        let bytes = std::rc::Rc::new(VecBytes(std::cell::RefCell::new(vec![0; 8])));
        struct Shared(std::rc::Rc<VecBytes>);
        impl Bytes for Shared {
            fn size(&self) -> usize {
                self.0.size()
            }
            fn write_at(&self, pos: usize, src: &[u8]) {
                self.0.write_at(pos, src)
            }
            fn read_at(&self, pos: usize, dst: &mut [u8]) {
                self.0.read_at(pos, dst)
            }
        }
        let mut p = Producer::new(&ctl, Shared(bytes.clone()));
        let mut c = Consumer::new(&ctl, Shared(bytes));
        let mut sent = Vec::new();
        let mut got = Vec::new();
        let mut next = 0u8;
        for round in 0..200 {
            let chunk: Vec<u8> = (0..(round % 11))
                .map(|_| {
                    next = next.wrapping_add(1);
                    next
                })
                .collect();
            let n = p.push(&chunk).unwrap();
            sent.extend_from_slice(&chunk[..n]);
            next = next.wrapping_sub((chunk.len() - n) as u8);
            let mut buf = vec![0; round % 7];
            let m = c.pop(&mut buf).unwrap();
            got.extend_from_slice(&buf[..m]);
        }
        let mut buf = [0; 8];
        let m = c.pop(&mut buf).unwrap();
        got.extend_from_slice(&buf[..m]);
        assert_eq!(sent, got);
        assert!(c.is_empty());
    }

    #[test]
    fn corrupt_peer_index_is_refused() {
        let ctl = Ctl::new();
        let data = vec![0u8; 16];
        let mut data2 = data.clone();
        let raw = unsafe { RawBytes::new(data2.as_mut_ptr(), 16) };
        let mut c = Consumer::new(&ctl, raw);
        ctl.head.0.store(17, Ordering::Relaxed);
        assert_eq!(c.pop(&mut [0; 4]), Err(Corrupt));
        let mut p = Producer::new(&ctl, raw);
        ctl.tail.0.store(5, Ordering::Relaxed); // tail ahead of head
        assert_eq!(p.push(b"x"), Err(Corrupt));
        drop(data);
    }

    #[test]
    fn arming_sees_pending_data() {
        let ctl = Ctl::new();
        let mut data = vec![0u8; 16];
        let raw = unsafe { RawBytes::new(data.as_mut_ptr(), 16) };
        let mut p = Producer::new(&ctl, raw);
        let c = Consumer::new(&ctl, raw);
        assert_eq!(c.prepare_wait(), Ok(true));
        assert_eq!(ctl.head.0.load(Ordering::Relaxed), SLEEPING);
        p.push(b"abc").unwrap();
        assert!(p.wake_needed());
        assert!(!p.wake_needed(), "one doorbell per arming");
        p.push(b"d").unwrap();
        assert!(!p.wake_needed());
        assert_eq!(c.prepare_wait(), Ok(false));
        assert_eq!(ctl.head.0.load(Ordering::Relaxed), 4, "the bit is cleared");
    }
}
