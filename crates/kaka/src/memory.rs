//! `--max-memory`: one budget for the record bytes the broker holds in RAM.
//!
//! A produce reserves its batch size before it is queued to the partition; once written, the
//! batch moves (with its reservation) into that partition's tail cache, which serves recent
//! fetches without touching the file. The cache is only a copy of what is in the log, so when
//! a reservation does not fit, cached batches are evicted (oldest first, across partitions)
//! before the produce is refused. A produce that still does not fit is refused whole.
//!
//! Invariant: `used` == bytes reserved by queued produces + bytes of every batch present in a
//! partition cache. Each cached batch is released exactly once: by whoever pops it from its
//! partition's deque (eviction, retention, topic deletion).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;

/// One cached batch of a partition's tail.
pub struct Cached {
    pub base_offset: i64,
    pub last_offset: i64,
    pub bytes: Bytes,
}

/// A partition's tail cache: contiguous batches ending at the log end.
#[derive(Default)]
pub struct TailCache {
    pub batches: Mutex<VecDeque<Cached>>,
}

pub struct Memory {
    limit: usize,
    used: AtomicUsize,
    /// Eviction order over all partitions: (cache, base offset of the batch, size).
    fifo: Mutex<VecDeque<(Weak<TailCache>, i64)>>,
}

impl Memory {
    pub fn new(limit: usize) -> Arc<Memory> {
        Arc::new(Memory { limit, used: AtomicUsize::new(0), fifo: Mutex::new(VecDeque::new()) })
    }

    #[cfg(test)]
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Reserves `n` bytes, evicting cached batches if needed. False: refuse the produce.
    pub fn try_reserve(&self, n: usize) -> bool {
        if n > self.limit {
            return false;
        }
        loop {
            let cur = self.used.load(Ordering::Acquire);
            if cur + n <= self.limit {
                if self.used.compare_exchange(cur, cur + n, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                    return true;
                }
                continue;
            }
            if !self.evict_one() {
                return false;
            }
        }
    }

    /// Counts `n` bytes even past the limit: for the few bytes of a transaction marker,
    /// which cannot be refused (the transaction is already decided).
    pub fn reserve_anyway(&self, n: usize) {
        self.used.fetch_add(n, Ordering::AcqRel);
    }

    pub fn release(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }

    /// Puts a written batch (already reserved) at the end of its partition's cache.
    pub fn insert(&self, cache: &Arc<TailCache>, c: Cached) {
        let base = c.base_offset;
        cache.batches.lock().unwrap_or_else(|e| e.into_inner()).push_back(c);
        self.fifo.lock().unwrap_or_else(|e| e.into_inner()).push_back((Arc::downgrade(cache), base));
    }

    /// Evicts the globally oldest cached batch. False when nothing is left to evict.
    fn evict_one(&self) -> bool {
        loop {
            let Some((weak, base)) = self.fifo.lock().unwrap_or_else(|e| e.into_inner()).pop_front() else {
                return false;
            };
            let Some(cache) = weak.upgrade() else { continue };
            let mut q = cache.batches.lock().unwrap_or_else(|e| e.into_inner());
            // Entries already dropped by retention or deletion leave stale fifo slots.
            if q.front().map(|c| c.base_offset) == Some(base) {
                let c = q.pop_front().expect("front checked");
                drop(q);
                self.release(c.bytes.len());
                return true;
            }
        }
    }

    /// Drops every cached batch below `offset` (retention) or all of them (`i64::MAX`).
    pub fn drop_below(&self, cache: &TailCache, offset: i64) {
        let mut q = cache.batches.lock().unwrap_or_else(|e| e.into_inner());
        while q.front().is_some_and(|c| c.last_offset < offset) {
            let c = q.pop_front().expect("front checked");
            self.release(c.bytes.len());
        }
    }

    /// Drops the whole cache (compaction rewrote the log; cached copies are stale).
    pub fn clear(&self, cache: &TailCache) {
        self.drop_below(cache, i64::MAX);
    }
}

impl TailCache {
    /// Batches starting with the one holding `offset`, below `limit`, up to `max_bytes`
    /// (at least one). None when `offset` is older than the cache.
    /// Whole batches from `offset`, up to `max_bytes`; the first batch may exceed it unless
    /// `strict` (Kafka's rule: only the first batch of a whole Fetch answer may).
    pub fn read(&self, offset: i64, max_bytes: usize, limit: i64, strict: bool) -> Option<Vec<Bytes>> {
        let q = self.batches.lock().unwrap_or_else(|e| e.into_inner());
        let first = q.front()?;
        if offset < first.base_offset {
            return None;
        }
        let start = q.partition_point(|c| c.last_offset < offset);
        let mut out = Vec::new();
        let mut total = 0;
        for c in q.iter().skip(start) {
            if c.base_offset >= limit || ((total > 0 || strict) && total + c.bytes.len() > max_bytes) {
                break;
            }
            total += c.bytes.len();
            out.push(c.bytes.clone());
            if total >= max_bytes {
                break;
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_before_refusing() {
        let m = Memory::new(100);
        let a = Arc::new(TailCache::default());
        let b = Arc::new(TailCache::default());
        assert!(m.try_reserve(60));
        m.insert(&a, Cached { base_offset: 0, last_offset: 0, bytes: Bytes::from(vec![0; 60]) });
        // 60 cached + 60 new > 100: the cached batch of another partition is evicted.
        assert!(m.try_reserve(60));
        assert_eq!(a.batches.lock().unwrap().len(), 0);
        m.insert(&b, Cached { base_offset: 0, last_offset: 0, bytes: Bytes::from(vec![0; 60]) });
        assert!(!m.try_reserve(101), "larger than the whole budget");
        assert!(m.try_reserve(40));
        assert_eq!(m.used(), 100);
        // Nothing evictable left beyond b's batch; reserved bytes of queued produces stay.
        m.release(40);
        assert!(m.try_reserve(100));
        assert_eq!(b.batches.lock().unwrap().len(), 0);
    }
}
