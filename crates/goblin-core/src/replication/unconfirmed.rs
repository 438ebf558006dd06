//! What a replica applied from its upstream's frames before Kafka held it: one hash per
//! mutation, checked against the topic on the next Kafka catch-up.
//!
//! In `queued` mode an upstream sends each frame when the batch commits, before Kafka
//! acknowledges its records. If the upstream then dies, those records may never reach Kafka;
//! the restarted upstream recovers from Kafka and continues the same lineage, writing other
//! mutations at the same logical offsets. A replica that applied the lost frames would, at its
//! next catch-up, meet the new records at offsets it already holds and skip them as
//! duplicates: the two would differ from then on, silently.
//!
//! So the replica remembers, for every mutation it applied from a frame above the Kafka cursor
//! the frames carry (the upstream's acknowledged logical offset when it sent them), the hash
//! of that mutation's bytes, which are exactly the record value in Kafka. A frame or an idle
//! link's tick with a newer cursor confirms, and forgets, everything at or below it. A Kafka catch-up compares each
//! own-lineage record it skips as a duplicate with the hash kept for its offset: equal
//! confirms it; different means this replica holds a history the lineage no longer has, and
//! it stops following (degraded) rather than diverge. On reconnecting, a replica with
//! unconfirmed mutations catches up through Kafka until they are all confirmed, even when the
//! upstream's hello names its own offset.
//!
//! Kafka holds no own record for the mutations of a batch the upstream applied from another
//! producer's record: a later own record confirms them, or a frame's cursor. When a catch-up
//! has read the whole topic and what is left lies above the lineage's last record there
//! (another producer's writes, or the upstream's own not acknowledged within a second),
//! nothing in Kafka can check it: the replica goes on and says so (`kafka_catch_up`).
//!
//! A replica's snapshot saves the window (`entries`, a header addition of the `.gcsn`
//! format) and a replica restarted from it starts with it (`restore`): the check does not
//! depend on the replica having run since it applied those mutations.
//!
//! Invariant: entries are in increasing offset order, each above every cursor seen since it
//! was pushed. Memory is bounded by `MAX_ENTRIES` (16 bytes each); the upstream's own bound
//! on unacknowledged records (`--kafka-pending-bytes`) keeps the window far smaller in
//! practice. Past the bound the oldest entries are dropped and counted as unverifiable.

use std::collections::VecDeque;
use xxhash_rust::xxh3::xxh3_64;

/// 1 Mi entries: 16 MiB at most.
const MAX_ENTRIES: usize = 1 << 20;

#[derive(Default, Debug)]
pub struct Unconfirmed {
    /// (logical offset, hash of the mutation's bytes), in offset order.
    entries: VecDeque<(u64, u64)>,
    /// Entries dropped at the bound: mutations no catch-up can check any more.
    dropped: u64,
}

impl Unconfirmed {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The lowest offset waiting for confirmation.
    pub fn first(&self) -> Option<u64> {
        self.entries.front().map(|e| e.0)
    }

    /// The highest offset waiting for confirmation.
    pub fn last(&self) -> Option<u64> {
        self.entries.back().map(|e| e.0)
    }

    /// The window as a snapshot saves it: (offset, hash), oldest first.
    pub fn entries(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.entries.iter().copied()
    }

    /// The window a snapshot saved (`entries`), for the replica restarted from it: what it
    /// applied before the snapshot and Kafka had not confirmed is still checked.
    pub fn restore(entries: Vec<(u64, u64)>) -> Unconfirmed {
        debug_assert!(entries.windows(2).all(|w| w[0].0 < w[1].0));
        Unconfirmed { entries: entries.into(), dropped: 0 }
    }

    /// A mutation applied from a frame at `offset` (above every earlier one).
    pub fn push(&mut self, offset: u64, mutation: &[u8]) {
        debug_assert!(self.last().is_none_or(|l| l < offset));
        if self.entries.len() == MAX_ENTRIES {
            if self.dropped == 0 {
                tracing::warn!(
                    "replica: more than {MAX_ENTRIES} mutations applied that Kafka has not confirmed; \
                     the oldest are no longer kept for checking (from logical offset {})",
                    self.entries[0].0
                );
            }
            self.entries.pop_front();
            self.dropped += 1;
        }
        self.entries.push_back((offset, xxh3_64(mutation)));
    }

    /// Kafka holds everything through `offset` (an upstream's cursor, or a replay).
    pub fn confirm_through(&mut self, offset: u64) {
        while self.entries.front().is_some_and(|e| e.0 <= offset) {
            self.entries.pop_front();
        }
    }

    /// An own-lineage record at `offset` that the local state already holds, read from Kafka
    /// with `value`: confirms it (and everything below it, which Kafka holds at lower broker
    /// offsets), or says how the histories differ.
    pub fn check(&mut self, offset: u64, value: &[u8]) -> Result<(), String> {
        let Some(&(first, _)) = self.entries.front() else { return Ok(()) };
        if offset < first {
            return Ok(());
        }
        // Offsets are contiguous within a run of frames; a binary search also copes with the
        // gaps a Kafka catch-up leaves between runs.
        let found = self.entries.binary_search_by_key(&offset, |e| e.0);
        if let Ok(i) = found {
            if self.entries[i].1 != xxh3_64(value) {
                return Err(format!(
                    "logical offset {offset} in Kafka is not the mutation a replica applied from its upstream's \
                     frame there: the upstream lost writes it had already sent (queued mode, then a crash) and \
                     wrote others at the same offsets. This server's history has diverged from the lineage; \
                     restart it from a snapshot of the upstream (--load)"
                ));
            }
        }
        self.confirm_through(offset);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_records_confirm_and_a_different_one_is_refused() {
        let mut u = Unconfirmed::default();
        for (o, m) in [(5, b"a".as_slice()), (6, b"b"), (7, b"c")] {
            u.push(o, m);
        }
        assert!(u.check(4, b"anything").is_ok());
        assert_eq!(u.len(), 3);
        assert!(u.check(5, b"a").is_ok());
        assert_eq!(u.len(), 2);
        let e = u.check(6, b"not b").unwrap_err();
        assert!(e.contains("logical offset 6"), "{e}");
        // Still there: the next catch-up finds the same difference.
        assert_eq!(u.len(), 2);
        assert!(u.check(7, b"c").is_ok());
        assert!(u.is_empty());
    }

    #[test]
    fn cursors_confirm_and_the_bound_drops_the_oldest() {
        let mut u = Unconfirmed::default();
        for o in 1..=10u64 {
            u.push(o, &o.to_le_bytes());
        }
        u.confirm_through(7);
        assert_eq!((u.len(), u.last()), (3, Some(10)));
        let mut big = Unconfirmed::default();
        for o in 0..(MAX_ENTRIES as u64 + 4) {
            big.push(o, &o.to_le_bytes());
        }
        assert_eq!((big.len(), big.dropped), (MAX_ENTRIES, 4));
        // The oldest kept is checked; the dropped ones pass unchecked.
        assert!(big.check(2, b"whatever").is_ok());
        assert!(big.check(4, b"not it").is_err());
        assert!(big.check(4, &4u64.to_le_bytes()).is_ok());
    }
}
