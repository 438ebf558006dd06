//! A stream's idempotent-production state (Redis 8.6's `XADD ... IDMP pid iid` and
//! `IDMPAUTO pid`, configured by `XCFGSET`): per producer ID, the idempotent IDs it used
//! recently and the entry each one added, so that a retried XADD answers the original entry's
//! ID instead of adding a second entry.
//!
//! Two clocks, on purpose:
//! - *Whether an iid still counts* is judged against the wall clock, as Redis does: an iid
//!   recorded under entry ID `ms-seq` is forgotten once `ms <= now - duration`.
//! - *When an iid is physically dropped* depends only on the stream: recording an iid under a
//!   new entry first drops that producer's iids whose entry `ms` is at or below the new
//!   entry's `ms - duration`, and then the oldest beyond `maxsize`. So a replica applying the
//!   same records (`XIDMPRECORD`) drops exactly what the primary dropped, and the state is a
//!   function of the record sequence alone (the digest and snapshots rely on it). An iid the
//!   wall clock forgot but no record has dropped yet is ignored by [`Idmp::lookup`].
//!
//! Invariants: each producer's `order` holds its iids in the order they were recorded, which is
//! ascending entry-ID order; `index` maps exactly the iids in `order`; no producer is empty;
//! `tracked` is the sum of the producers' lengths; every producer holds at most `maxsize`.

use crate::alloc::size_class;
use crate::types::stream::StreamId;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

/// Redis's defaults and bounds for `IDMP-DURATION` (seconds) and `IDMP-MAXSIZE` (iids per
/// producer).
pub const DEFAULT_DURATION: u64 = 100;
pub const DEFAULT_MAXSIZE: u64 = 100;
pub const MAX_DURATION: u64 = 86_400;
pub const MAX_MAXSIZE: u64 = 10_000;

#[derive(Clone, Debug, Default)]
struct Producer {
    /// The iids, oldest first; each shared with `index` (one allocation per iid).
    order: VecDeque<(Arc<[u8]>, StreamId)>,
    index: HashMap<Arc<[u8]>, StreamId>,
}

impl Producer {
    fn pop_front(&mut self) {
        if let Some((iid, _)) = self.order.pop_front() {
            self.index.remove(&iid);
        }
    }
}

/// Why [`Idmp::record`] refused an iid.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The pair maps to this other entry, which has not expired as of the new one.
    Conflict(StreamId),
    /// The entry is not above the producer's newest recorded one (a producer's pairs are kept
    /// in entry order, which XADD's rising IDs always give).
    OutOfOrder,
}

#[derive(Clone, Debug)]
pub struct Idmp {
    duration: u64,
    maxsize: u64,
    producers: BTreeMap<Box<[u8]>, Producer>,
    tracked: u64,
    /// Lifetime counts (XINFO's `iids-added`, `iids-duplicates`): statistics, not data, so
    /// neither the digest nor [`Idmp::plain`] includes them.
    pub added: u64,
    pub duplicates: u64,
}

/// A canonical view of the state (for the digest and equality): the settings and, per
/// producer in pid order, its (iid, entry ID) pairs oldest first.
pub type PlainIdmp = (u64, u64, Vec<(Vec<u8>, Vec<(Vec<u8>, StreamId)>)>);

impl Idmp {
    pub fn new(duration: u64, maxsize: u64) -> Idmp {
        Idmp { duration, maxsize, producers: BTreeMap::new(), tracked: 0, added: 0, duplicates: 0 }
    }

    pub fn duration(&self) -> u64 {
        self.duration
    }

    pub fn maxsize(&self) -> u64 {
        self.maxsize
    }

    pub fn pids_tracked(&self) -> usize {
        self.producers.len()
    }

    pub fn iids_tracked(&self) -> u64 {
        self.tracked
    }

    /// XCFGSET: new settings; a change forgets every iid (the lifetime counts stay). True if
    /// anything changed.
    pub fn configure(&mut self, duration: u64, maxsize: u64) -> bool {
        if (duration, maxsize) == (self.duration, self.maxsize) {
            return false;
        }
        self.duration = duration;
        self.maxsize = maxsize;
        self.producers.clear();
        self.tracked = 0;
        true
    }

    /// The entry `iid` of `pid` added, if that iid still counts at wall-clock time `now_ms`.
    pub fn lookup(&self, pid: &[u8], iid: &[u8], now_ms: u64) -> Option<StreamId> {
        let id = *self.producers.get(pid)?.index.get(iid)?;
        let window = self.duration.saturating_mul(1000);
        (id.ms > now_ms.saturating_sub(window) || now_ms < window).then_some(id)
    }

    /// Records that `iid` of `pid` added entry `id`: drops the producer's iids expired as of
    /// `id.ms`, then appends and evicts the oldest beyond `maxsize`. Changes nothing unless it
    /// returns `Ok(true)`: `Ok(false)` when the pair already maps to `id`; `Err` when it maps to
    /// another entry that has not expired as of `id.ms`, or when `id` is not above the newest
    /// entry the producer keeps. (A refused or repeated record must not drop anything either:
    /// the primary records nothing for it, so a replica would not drop the same.)
    pub fn record(&mut self, pid: &[u8], iid: &[u8], id: StreamId) -> Result<bool, Refused> {
        let cutoff = id.ms.checked_sub(self.duration.saturating_mul(1000));
        let expired = |e: &StreamId| cutoff.is_some_and(|cut| e.ms <= cut);
        if let Some(p) = self.producers.get(pid) {
            match p.index.get(iid) {
                Some(&have) if have == id => return Ok(false),
                Some(&have) if !expired(&have) => return Err(Refused::Conflict(have)),
                _ => {}
            }
            if p.order.back().is_some_and(|(_, last)| !expired(last) && *last >= id) {
                return Err(Refused::OutOfOrder);
            }
        }
        // The producer's key is allocated only when it is new.
        if !self.producers.contains_key(pid) {
            self.producers.insert(pid.into(), Producer::default());
        }
        let p = self.producers.get_mut(pid).expect("just ensured");
        let before = p.order.len();
        while p.order.front().is_some_and(|(_, first)| expired(first)) {
            p.pop_front();
        }
        let iid: Arc<[u8]> = iid.into();
        p.index.insert(iid.clone(), id);
        p.order.push_back((iid, id));
        while p.order.len() as u64 > self.maxsize {
            p.pop_front();
        }
        self.tracked = self.tracked + p.order.len() as u64 - before as u64;
        self.added += 1;
        Ok(true)
    }

    /// Every producer's iids, pid order, oldest first (snapshots).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &[(Arc<[u8]>, StreamId)], &[(Arc<[u8]>, StreamId)])) {
        for (pid, p) in &self.producers {
            let (a, b) = p.order.as_slices();
            f(pid, a, b);
        }
    }

    /// Rebuilds the state as a snapshot holds it: settings, counts, then each producer's iids
    /// oldest first. Refuses what [`Idmp::record`] could never have built: settings out of
    /// range, an empty producer, a producer over `maxsize`, IDs not ascending within a
    /// producer, or an iid twice.
    pub fn from_parts(
        duration: u64,
        maxsize: u64,
        added: u64,
        duplicates: u64,
        producers: Vec<(&[u8], Vec<(&[u8], StreamId)>)>,
    ) -> Result<Idmp, &'static str> {
        if !(1..=MAX_DURATION).contains(&duration) || !(1..=MAX_MAXSIZE).contains(&maxsize) {
            return Err("IDMP settings out of range");
        }
        let mut s = Idmp::new(duration, maxsize);
        s.added = added;
        s.duplicates = duplicates;
        for (pid, iids) in producers {
            if iids.is_empty() || iids.len() as u64 > maxsize {
                return Err("IDMP producer empty or over its size");
            }
            let mut p = Producer::default();
            for (iid, id) in iids {
                if p.order.back().is_some_and(|(_, last)| *last >= id) {
                    return Err("IDMP entry IDs out of order");
                }
                let iid: Arc<[u8]> = iid.into();
                if p.index.insert(iid.clone(), id).is_some() {
                    return Err("IDMP iid repeated");
                }
                p.order.push_back((iid, id));
            }
            s.tracked += p.order.len() as u64;
            if s.producers.insert(pid.into(), p).is_some() {
                return Err("IDMP producer repeated");
            }
        }
        Ok(s)
    }

    pub fn plain(&self) -> PlainIdmp {
        let producers = self
            .producers
            .iter()
            .map(|(pid, p)| (pid.to_vec(), p.order.iter().map(|(i, id)| (i.to_vec(), *id)).collect()))
            .collect();
        (self.duration, self.maxsize, producers)
    }

    /// Heap bytes: each iid once (shared by order and index, with its reference counts), and
    /// the two tables' slots.
    pub fn mem_usage(&self) -> usize {
        size_class(std::mem::size_of::<Idmp>())
            + self
                .producers
                .iter()
                .map(|(pid, p)| {
                    size_class(pid.len())
                        + 96
                        + p.order.capacity() * 32
                        + p.index.capacity() * 40
                        + p.order.iter().map(|(i, _)| size_class(16 + i.len())).sum::<usize>()
                })
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    #[test]
    fn a_recorded_iid_counts_until_its_window_passes() {
        let mut s = Idmp::new(100, 100);
        assert_eq!(s.record(b"p", b"a", id(1_000_000, 0)), Ok(true));
        assert_eq!(s.record(b"p", b"a", id(1_000_000, 0)), Ok(false));
        assert_eq!(s.record(b"p", b"a", id(1_000_001, 0)), Err(Refused::Conflict(id(1_000_000, 0))));
        assert_eq!(s.record(b"p", b"b", id(999_999, 0)), Err(Refused::OutOfOrder));
        // Refused and repeated records change nothing, not even the expired pairs they pass.
        s.record(b"p", b"c", id(1_000_001, 0)).unwrap();
        let kept = s.plain();
        assert_eq!(s.record(b"p", b"c", id(1_000_001, 0)), Ok(false));
        // c still counts as of 1_100_000 (a does not, and would go if c's record went ahead).
        assert_eq!(s.record(b"p", b"c", id(1_100_000, 0)), Err(Refused::Conflict(id(1_000_001, 0))));
        assert_eq!(s.plain(), kept);
        assert_eq!(s.iids_tracked(), 2);
        assert_eq!(s.lookup(b"p", b"a", 1_000_000 + 99_999), Some(id(1_000_000, 0)));
        assert_eq!(s.lookup(b"p", b"a", 1_000_000 + 100_000), None);
        assert_eq!(s.lookup(b"q", b"a", 1_000_000), None);
        // Recording under an entry past a's window drops a first, and records it anew.
        assert_eq!(s.record(b"p", b"a", id(1_100_000, 0)), Ok(true));
        assert_eq!((s.iids_tracked(), s.added), (2, 3));
        assert_eq!(
            s.plain().2[0].1,
            vec![(b"c".to_vec(), id(1_000_001, 0)), (b"a".to_vec(), id(1_100_000, 0))]
        );
    }

    #[test]
    fn each_producer_keeps_its_newest_maxsize_iids() {
        let mut s = Idmp::new(100, 3);
        for i in 0..10u64 {
            s.record(b"p", format!("r{i}").as_bytes(), id(5000 + i, 0)).unwrap();
            s.record(b"q", format!("r{i}").as_bytes(), id(5000 + i, 1)).unwrap();
        }
        assert_eq!((s.pids_tracked(), s.iids_tracked(), s.added), (2, 6, 20));
        assert_eq!(s.lookup(b"p", b"r6", 5010), None);
        assert_eq!(s.lookup(b"p", b"r7", 5010), Some(id(5007, 0)));
        assert!(!s.configure(100, 3) && s.iids_tracked() == 6);
        assert!(s.configure(50, 3));
        assert_eq!((s.pids_tracked(), s.iids_tracked(), s.added), (0, 0, 20));
    }

    #[test]
    fn from_parts_round_trips_and_refuses_what_record_cannot_build() {
        let mut s = Idmp::new(7, 2);
        s.record(b"p", b"x", id(1, 0)).unwrap();
        s.record(b"p", b"y", id(2, 0)).unwrap();
        let mut parts = Vec::new();
        s.for_each(|pid, a, b| {
            parts.push((pid.to_vec(), a.iter().chain(b).map(|(i, id)| (i.to_vec(), *id)).collect::<Vec<_>>()))
        });
        type Owned = Vec<(Vec<u8>, Vec<(Vec<u8>, StreamId)>)>;
        fn borrowed(parts: &Owned) -> Vec<(&[u8], Vec<(&[u8], StreamId)>)> {
            parts.iter().map(|(p, v)| (&p[..], v.iter().map(|(i, id)| (&i[..], *id)).collect())).collect()
        }
        let back = Idmp::from_parts(7, 2, 2, 0, borrowed(&parts)).unwrap();
        assert_eq!(back.plain(), s.plain());
        assert!(Idmp::from_parts(0, 2, 0, 0, vec![]).is_err());
        assert!(Idmp::from_parts(7, 1, 0, 0, borrowed(&parts)).is_err());
        let swapped = vec![(b"p".to_vec(), vec![(b"y".to_vec(), id(2, 0)), (b"x".to_vec(), id(1, 0))])];
        assert!(Idmp::from_parts(7, 2, 0, 0, borrowed(&swapped)).is_err());
    }
}
