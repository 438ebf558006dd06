//! A fixed byte queue in an anonymous, prefaulted mapping: the output queue of one downstream
//! firehose subscriber (`--replication-buffer-bytes`).
//!
//! Fixed on purpose: a downstream that stops reading must cost the primary a bounded, already
//! paid-for amount of memory (no allocation, no page fault on the write path) and then be
//! disconnected, never grow it. `push` is all-or-nothing: a frame either fits whole or the
//! caller learns that the queue is exhausted.
//!
//! Layout: a ring. `head` is the first unread byte, `len` the bytes stored; the readable bytes
//! are `[head, head+len)` modulo the capacity, so at most two contiguous pieces.

use std::io;

pub struct MmapQueue {
    ptr: *mut u8,
    cap: usize,
    head: usize,
    len: usize,
    /// Bytes ever pushed and ever consumed: positions in the stream of bytes through the queue,
    /// for a caller that must put something else at an exact point of it.
    pushed: u64,
    consumed: u64,
}

// SAFETY: the queue owns its mapping exclusively; moving it to another thread moves that
// ownership along.
unsafe impl Send for MmapQueue {}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

impl MmapQueue {
    /// Maps `bytes` rounded up to a whole page (at least one), prefaulted (MAP_POPULATE).
    pub fn new(bytes: u64) -> io::Result<MmapQueue> {
        Self::map(bytes, libc::MAP_POPULATE)
    }

    /// Whether queues of `bytes` can be mapped at all (`--replication-buffer-bytes`, checked
    /// at startup): maps one as `new` does, except that it is not prefaulted (the check must
    /// not touch that much memory), and unmaps it. Without it, a size the kernel refuses would
    /// start fine and then fail every GOBLIN.FIREHOSE.
    pub fn check_size(bytes: u64) -> io::Result<()> {
        Self::map(bytes, 0).map(drop)
    }

    /// A private anonymous read-write mapping of `bytes` rounded up to a whole page, with
    /// `extra` mmap flags.
    fn map(bytes: u64, extra: libc::c_int) -> io::Result<MmapQueue> {
        let page = page_size();
        let cap = usize::try_from(bytes.max(1))
            .ok()
            .and_then(|b| b.checked_next_multiple_of(page))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "larger than the address space"))?;
        // SAFETY: a fresh private anonymous mapping; checked for MAP_FAILED below, and owned
        // (unmapped on drop) by the queue returned.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                cap,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(MmapQueue { ptr: ptr.cast(), cap, head: 0, len: 0, pushed: 0, consumed: 0 })
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `bytes` whole, or returns false (nothing appended) when they do not fit.
    pub fn push(&mut self, bytes: &[u8]) -> bool {
        if bytes.len() > self.cap - self.len {
            return false;
        }
        let tail = (self.head + self.len) % self.cap;
        let first = bytes.len().min(self.cap - tail);
        // SAFETY: tail < cap and first <= cap - tail; the rest wraps to the start, and fits
        // because bytes.len() <= cap - len (free space); source and mapping never overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(tail), first);
            std::ptr::copy_nonoverlapping(bytes.as_ptr().add(first), self.ptr, bytes.len() - first);
        }
        self.len += bytes.len();
        self.pushed += bytes.len() as u64;
        true
    }

    /// Bytes pushed since the queue was made.
    pub fn pushed_total(&self) -> u64 {
        self.pushed
    }

    /// Bytes consumed since the queue was made.
    pub fn consumed_total(&self) -> u64 {
        self.consumed
    }

    /// The first contiguous piece of unread bytes (empty when the queue is).
    pub fn readable(&self) -> &[u8] {
        let n = self.len.min(self.cap - self.head);
        // SAFETY: [head, head+n) lies inside the mapping and holds written bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.add(self.head), n) }
    }

    /// Marks `n` bytes (at most `readable().len()`) as read.
    pub fn consume(&mut self, n: usize) {
        assert!(n <= self.len.min(self.cap - self.head), "consume past the readable piece");
        self.len -= n;
        self.consumed += n as u64;
        self.head = if self.len == 0 { 0 } else { (self.head + n) % self.cap };
    }

    /// Copies every unread byte out, in order, and empties the queue.
    #[cfg(test)]
    pub fn drain_to_vec(&mut self, out: &mut Vec<u8>) {
        while !self.is_empty() {
            let n = {
                let r = self.readable();
                out.extend_from_slice(r);
                r.len()
            };
            self.consume(n);
        }
    }
}

impl Drop for MmapQueue {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `map`, once.
        unsafe { libc::munmap(self.ptr.cast(), self.cap) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rounds_up_to_a_page_and_refuses_what_does_not_fit() {
        let mut q = MmapQueue::new(1).unwrap();
        assert_eq!(q.capacity(), page_size());
        assert!(q.push(&vec![7u8; page_size()]));
        assert!(!q.push(b"x"));
        q.consume(10);
        assert!(!q.push(&[0u8; 11]), "all or nothing");
        assert!(q.push(&[1u8; 10]));
        assert_eq!(q.len(), page_size());
    }

    #[test]
    fn check_size_refuses_what_cannot_be_mapped() {
        assert!(MmapQueue::check_size(1 << 20).is_ok());
        assert!(MmapQueue::check_size(u64::MAX).is_err());
        // Far beyond any machine's memory and swap (the heuristic overcommit refuses it; a host
        // with overcommit_memory=1 maps anything, which the check cannot help).
        if std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|m| m.trim() != "1") {
            assert!(MmapQueue::check_size(1 << 50).is_err());
        }
    }

    proptest! {
        /// Against a VecDeque model: any interleaving of pushes and partial reads returns the
        /// pushed bytes in order, across wrap-arounds.
        #[test]
        fn behaves_like_a_fifo(ops in prop::collection::vec((any::<bool>(), 0usize..3000), 1..200)) {
            let mut q = MmapQueue::new(4096).unwrap();
            let mut model = std::collections::VecDeque::new();
            let mut counter = 0u8;
            for (push, n) in ops {
                if push {
                    let bytes: Vec<u8> = (0..n).map(|_| { counter = counter.wrapping_add(1); counter }).collect();
                    let fits = bytes.len() <= q.capacity() - q.len();
                    prop_assert_eq!(q.push(&bytes), fits);
                    if fits {
                        model.extend(bytes);
                    }
                } else {
                    let r = q.readable();
                    let take = n.min(r.len());
                    let got: Vec<u8> = r[..take].to_vec();
                    let want: Vec<u8> = model.drain(..take).collect();
                    prop_assert_eq!(got, want);
                    q.consume(take);
                }
                prop_assert_eq!(q.len(), model.len());
            }
            let mut rest = Vec::new();
            q.drain_to_vec(&mut rest);
            prop_assert_eq!(rest, model.into_iter().collect::<Vec<u8>>());
        }
    }
}
