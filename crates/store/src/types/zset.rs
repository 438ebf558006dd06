//! Sorted set: member -> score, ordered by (score, member bytes).
//!
//! # Layout
//!
//! The elements live in *chunks*: each chunk is one contiguous byte buffer of packed entries in
//! ascending (score, member) order, and the chunks themselves are kept in order in a `Vec`. An
//! entry is
//!
//! ```text
//! [tag: u8][score: 0..=8 bytes][member length: LEB128, only if tag >> 4 == 0][member bytes]
//! ```
//!
//! where the tag's low nibble 0..=8 means "the score is an integer, zigzag-encoded little
//! endian in that many bytes" and 9 means "the score is a raw f64 (8 bytes LE)"; a non-zero high
//! nibble is the member length + 1 (members of at most 14 bytes), and then no length follows.
//! Integral scores of magnitude below 2^53 (except -0, which must keep its sign) take the
//! integer form, so `ZADD z 500 m000500` costs 10 bytes. A chunk grows until it holds `CHUNK_BYTES`; then it splits in the middle,
//! or, when the new entry goes after the last entry of the set (ascending loads), a fresh chunk
//! is started so that the old one stays full.
//!
//! Small sets (at most [`listpack_entries`] members, none longer than [`listpack_value`] bytes,
//! Redis's `zset-max-listpack-*` defaults) have no member index: lookups scan the entries, and
//! `OBJECT ENCODING` says `listpack`. Past either threshold the set gets a member index (one
//! way, like Redis) and reports `skiplist`.
//!
//! The member index is an open-addressing table (linear probing with backward-shift deletion,
//! capacities 11 * 1.5^k, load at most 4/5) whose slot holds the member's 32-bit hash and its
//! *score* (12 bytes), not a pointer: chunk splits and merges never move anything the index
//! refers to. A lookup hashes the member, and for each slot with the same hash binary-searches
//! the chunks for (score, member). Each chunk keeps its first score beside it, rounded down to
//! an f32 (exact for most scores; a chunk stays 32 bytes): the search compares against that
//! bound and reads a chunk's bytes only when a score lies within one f32 step of it. The table grows incrementally: a 1.5x table is allocated
//! and each later write moves `MIGRATE_STEP` slots of the old one (deletions there leave
//! tombstones), so no single command pays for a whole rehash. The hash is the keyspace's keyed
//! hash (per-process random secrets), so crafted members cannot flood one probe run.
//!
//! SCAN of an indexed set walks the member index in hash order (see [`ZSet::scan`]): the cursor
//! is a member-hash position, which neither score changes nor index growth can move, so every
//! member present for the whole iteration is returned.
//!
//! Indexed sets also keep a Fenwick tree over the chunks' entry counts (`RankTree`, 4 bytes
//! per chunk), so ranks (ZRANK, ZRANGE by rank, ...) cost O(log n) plus one chunk scan instead
//! of a walk over every chunk.
//!
//! Measured under jemalloc (examples/mem_zset.rs) for 1,000 members `m{k:06}` scored k: about
//! 30.2 bytes per member loaded in ascending order, 31.6 shuffled (Redis 7: 110).
//!
//! Negative zero: Redis's listpack stores an integral -0 as 0 while its skiplist keeps -0.
//! [`ZSet::insert`] does the same in the small form; [`ZSet::insert_exact`] keeps the bits, for
//! replicas applying the scores the origin actually stored.
//!
//! Invariants: every chunk is non-empty; entries are strictly ascending across the whole chunk
//! sequence; no score is NaN; when the index exists it holds exactly one live slot per member,
//! carrying that member's current score, and its rank tree has one node per chunk and sums
//! their entry counts.

use super::packed::OneOrVec;
use crate::alloc::size_class;
use crate::Plain;
use std::cmp::Ordering;

/// A chunk splits once its bytes exceed this.
const CHUNK_BYTES: usize = 1024;
/// `zset-max-listpack-entries` and `zset-max-listpack-value` (see [`crate::limits`]).
#[inline]
pub fn listpack_entries() -> usize {
    crate::limits::get(&crate::limits::ZSET_MAX_LISTPACK_ENTRIES)
}
#[inline]
pub fn listpack_value() -> usize {
    crate::limits::get(&crate::limits::ZSET_MAX_LISTPACK_VALUE)
}
/// Old-table slots migrated per write while the index grows.
const MIGRATE_STEP: usize = 64;

const TAG_F64: u8 = 9;
/// Members up to this long store their length in the tag byte (see the module docs).
const SHORT_MEMBER: usize = 14;

/// Total order of entries: score numerically (-0 == 0), then member bytes.
#[inline]
fn cmp_entry(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> Ordering {
    match s1.partial_cmp(&s2) {
        Some(Ordering::Equal) | None => m1.cmp(m2),
        Some(o) => o,
    }
}

/// The 32-bit hash of a member in the index (never 0 or 1: those mark empty and deleted slots).
///
/// It is the keyspace's keyed hash, whose secrets are drawn once per process: a client that
/// cannot predict hashes cannot pile crafted members onto one probe run (hash flooding). The
/// hash is stable for the life of the process, which the scan cursor relies on.
#[inline]
fn hash_member(m: &[u8]) -> u32 {
    let v = (crate::keyspace::hash::KeyHasher::global().hash(m) >> 32) as u32;
    if v < 2 {
        v + 2
    } else {
        v
    }
}

// ---------------------------------------------------------------------------------------------
// Entry encoding

/// Writes an entry's header (score tag, score bytes, member length) into `h`; returns its
/// length. At most 1 + 8 + 10 bytes.
fn encode_header(h: &mut [u8; 19], score: f64, member_len: usize) -> usize {
    let mut n;
    if score.fract() == 0.0
        && score.abs() < 9_007_199_254_740_992.0
        && !(score == 0.0 && score.is_sign_negative())
    {
        let i = score as i64;
        let z = ((i << 1) ^ (i >> 63)) as u64;
        let nbytes = (8 - z.leading_zeros() / 8) as usize;
        h[0] = nbytes as u8;
        h[1..1 + nbytes].copy_from_slice(&z.to_le_bytes()[..nbytes]);
        n = 1 + nbytes;
    } else {
        h[0] = TAG_F64;
        h[1..9].copy_from_slice(&score.to_bits().to_le_bytes());
        n = 9;
    }
    if member_len <= SHORT_MEMBER {
        // Short members keep their length in the tag's high nibble: one byte less per entry,
        // which for one-member sets is often the difference between jemalloc's 8 and 16 classes.
        h[0] |= ((member_len + 1) as u8) << 4;
        return n;
    }
    let mut l = member_len;
    loop {
        let b = (l & 0x7f) as u8;
        l >>= 7;
        if l == 0 {
            h[n] = b;
            n += 1;
            break;
        }
        h[n] = b | 0x80;
        n += 1;
    }
    n
}

/// Appends one entry (header, then the member) to `buf`.
fn encode_entry(buf: &mut Vec<u8>, score: f64, member: &[u8]) {
    let mut h = [0u8; 19];
    let n = encode_header(&mut h, score, member.len());
    buf.extend_from_slice(&h[..n]);
    buf.extend_from_slice(member);
}

fn encoded_len(score: f64, member: &[u8]) -> usize {
    let mut h = [0u8; 19];
    encode_header(&mut h, score, member.len()) + member.len()
}

/// Decodes the entry at `off`: (score, member, offset of the next entry).
#[inline]
fn decode_entry(buf: &[u8], off: usize) -> (f64, &[u8], usize) {
    let (score, member_at, len) = decode_head(buf, off);
    (score, &buf[member_at..member_at + len], member_at + len)
}

/// The entry at `off`'s score and the offset just past it: the member is skipped, not sliced
/// (scans that judge entries by score alone).
#[inline]
fn decode_score(buf: &[u8], off: usize) -> (f64, usize) {
    let (score, member_at, len) = decode_head(buf, off);
    (score, member_at + len)
}

/// The entry at `off`'s score, its member's offset and its member's length.
#[inline(always)]
fn decode_head(buf: &[u8], off: usize) -> (f64, usize, usize) {
    let short = (buf[off] >> 4) as usize;
    let tag = buf[off] & 0x0F;
    let mut p = off + 1;
    let score = if tag == TAG_F64 {
        let b: [u8; 8] = buf[p..p + 8].try_into().expect("8 bytes");
        p += 8;
        f64::from_bits(u64::from_le_bytes(b))
    } else {
        let n = tag as usize;
        // One 8-byte load and a mask where 8 bytes remain (nearly always: a member follows),
        // not a copy of `n` bytes.
        let z = match buf.get(p..p + 8) {
            Some(b) => {
                let v = u64::from_le_bytes(b.try_into().expect("8 bytes"));
                if n >= 8 {
                    v
                } else {
                    v & ((1u64 << (8 * n)) - 1)
                }
            }
            None => {
                let mut b = [0u8; 8];
                b[..n].copy_from_slice(&buf[p..p + n]);
                u64::from_le_bytes(b)
            }
        };
        p += n;
        let i = ((z >> 1) as i64) ^ -((z & 1) as i64);
        i as f64
    };
    if short != 0 {
        return (score, p, short - 1);
    }
    let mut len = 0usize;
    let mut shift = 0;
    loop {
        let b = buf[p];
        p += 1;
        len |= ((b & 0x7f) as usize) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (score, p, len)
}

/// [`decode_entry`] for untrusted bytes: None unless the entry lies within `buf`, its tag is
/// one the encoder writes, an integer score is within the integer form's range (|i| < 2^53)
/// and a raw score is not NaN.
fn decode_entry_checked(buf: &[u8], off: usize) -> Option<(f64, &[u8], usize)> {
    let first = *buf.get(off)?;
    let short = (first >> 4) as usize;
    let tag = first & 0x0F;
    let mut p = off + 1;
    let score = if tag == TAG_F64 {
        let b: [u8; 8] = buf.get(p..p + 8)?.try_into().ok()?;
        p += 8;
        let s = f64::from_bits(u64::from_le_bytes(b));
        if s.is_nan() {
            return None;
        }
        s
    } else if tag <= 8 {
        let n = tag as usize;
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(buf.get(p..p + n)?);
        p += n;
        let z = u64::from_le_bytes(b);
        let i = ((z >> 1) as i64) ^ -((z & 1) as i64);
        if i.unsigned_abs() >= 1 << 53 {
            return None;
        }
        i as f64
    } else {
        return None;
    };
    let len = if short != 0 {
        short - 1
    } else {
        let (l, q) = super::read_varint_checked(buf, p)?;
        p = q;
        usize::try_from(l).ok()?
    };
    let end = p.checked_add(len).filter(|&e| e <= buf.len())?;
    Some((score, &buf[p..end], end))
}

/// One run of packed entries.
#[derive(Clone, Debug, Default)]
struct Chunk {
    buf: Vec<u8>,
    /// Number of entries in `buf`.
    n: u32,
    /// The score of the entry at offset 0 rounded down to an f32 (exact for most scores;
    /// meaningless while the chunk is empty), kept here so that a binary search over the
    /// chunks reads the chunk array, not each probed chunk's bytes (a cache miss apiece). An
    /// f32, not the f64, so that a chunk stays 32 bytes. Whatever changes the first entry
    /// calls [`Chunk::set_first`].
    first_floor: f32,
}

/// Whether score `s` lies below `t` (at or below it when `inclusive`).
#[inline]
fn score_below(s: f64, t: f64, inclusive: bool) -> bool {
    s < t || (inclusive && s == t)
}

/// The largest f32 at or below `x` (an f64 that is not NaN).
fn f32_floor(x: f64) -> f32 {
    let r = x as f32;
    if r as f64 > x {
        r.next_down()
    } else {
        r
    }
}

impl Chunk {
    /// A chunk of the packed entries `buf` (at least one), `n` of them.
    fn of(buf: Vec<u8>, n: u32) -> Chunk {
        let mut c = Chunk { buf, n, first_floor: 0.0 };
        c.set_first();
        c
    }

    fn set_first(&mut self) {
        if !self.buf.is_empty() {
            self.first_floor = f32_floor(decode_score(&self.buf, 0).0);
        }
    }

    /// How the first entry's score compares with `x`, when the cached bound decides it:
    /// `first_floor <= first < next_up(first_floor)`. None: read the entry.
    #[inline]
    fn first_vs(&self, x: f64) -> Option<Ordering> {
        let floor = self.first_floor as f64;
        if x < floor {
            return Some(Ordering::Greater);
        }
        let up = self.first_floor.next_up() as f64;
        if x >= up && up > floor {
            return Some(Ordering::Less);
        }
        None
    }

    /// Whether the chunk's first entry orders at or before (score, member).
    #[inline]
    fn starts_at_or_before(&self, score: f64, member: &[u8]) -> bool {
        match self.first_vs(score) {
            Some(o) => o == Ordering::Less,
            None => {
                let (s, m, _) = decode_entry(&self.buf, 0);
                cmp_entry(s, m, score, member) != Ordering::Greater
            }
        }
    }

    /// Whether the chunk's first score is below `t` (at or below it when `inclusive`).
    #[inline]
    fn starts_below(&self, t: f64, inclusive: bool) -> bool {
        match self.first_vs(t) {
            Some(o) => o == Ordering::Less,
            None => score_below(decode_score(&self.buf, 0).0, t, inclusive),
        }
    }

    /// Offsets of every entry, in order.
    fn offsets(&self) -> Vec<usize> {
        let mut v = Vec::with_capacity(self.n as usize);
        let mut off = 0;
        while off < self.buf.len() {
            v.push(off);
            off = decode_entry(&self.buf, off).2;
        }
        v
    }

    /// Reserves room for `extra` more bytes, growing to a jemalloc size class so that the
    /// reported capacity is what is really allocated and growth stays geometric (~1.25x).
    fn reserve(&mut self, extra: usize) {
        let need = self.buf.len() + extra;
        if self.buf.capacity() < need {
            let target = size_class(need);
            self.buf.reserve_exact(target - self.buf.len());
        }
    }

    fn insert_at(&mut self, off: usize, score: f64, member: &[u8]) {
        let mut h = [0u8; 19];
        let hn = encode_header(&mut h, score, member.len());
        let total = hn + member.len();
        self.reserve(total);
        // Open a gap of `total` bytes at `off`, then fill it.
        let old_len = self.buf.len();
        self.buf.resize(old_len + total, 0);
        self.buf.copy_within(off..old_len, off + total);
        self.buf[off..off + hn].copy_from_slice(&h[..hn]);
        self.buf[off + hn..off + total].copy_from_slice(member);
        self.n += 1;
        if off == 0 {
            self.set_first();
        }
    }

    fn remove_at(&mut self, off: usize) {
        let (_, _, next) = decode_entry(&self.buf, off);
        self.buf.drain(off..next);
        self.n -= 1;
        if off == 0 {
            self.set_first();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Member index

/// Linear-probing table of (hash, score). `hashes[i] == 0`: empty; `== TOMB`: deleted (only in
/// a table being migrated away from).
#[derive(Clone, Debug, Default)]
struct Table {
    hashes: Vec<u32>,
    scores: Vec<f64>,
    live: usize,
}

/// Capacities follow 11 * 1.5^k (any capacity works; 1.5x steps waste less than doubling, and
/// this sequence puts a 1,000-member set at 1,369 slots, 73% full). The load stays <= 4/5.
const FIRST_CAP: usize = 11;
const LOAD_NUM: usize = 4;
const LOAD_DEN: usize = 5;

fn grown(cap: usize) -> usize {
    cap + cap / 2
}

const EMPTY: u32 = 0;
const TOMB: u32 = 1;

impl Table {
    fn with_capacity(cap: usize) -> Self {
        Table { hashes: vec![EMPTY; cap], scores: vec![0.0; cap], live: 0 }
    }
    fn cap(&self) -> usize {
        self.hashes.len()
    }
    /// The slot a hash starts probing at: `h * cap / 2^32` spreads any capacity evenly.
    fn home(&self, h: u32) -> usize {
        ((h as u64 * self.cap() as u64) >> 32) as usize
    }
    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.cap() {
            0
        } else {
            i + 1
        }
    }
    /// Inserts a slot for a member known to be absent.
    fn put(&mut self, h: u32, score: f64) {
        let mut i = self.home(h);
        while self.hashes[i] != EMPTY {
            i = self.next(i);
        }
        self.hashes[i] = h;
        self.scores[i] = score;
        self.live += 1;
    }
    /// Removes slot `i` by shifting later members of its probe run back (no tombstones).
    fn remove_shift(&mut self, mut i: usize) {
        self.live -= 1;
        let mut j = i;
        loop {
            j = self.next(j);
            let hj = self.hashes[j];
            if hj == EMPTY {
                break;
            }
            let home = self.home(hj);
            // Move j back to i unless its home lies cyclically in (i, j].
            let stays = if i <= j { i < home && home <= j } else { i < home || home <= j };
            if !stays {
                self.hashes[i] = hj;
                self.scores[i] = self.scores[j];
                i = j;
            }
        }
        self.hashes[i] = EMPTY;
    }
    /// Calls `f(score)` for every live slot at or above `from` whose hash is in `[lo, hi)`
    /// (`lo < hi <= 2^32`). Homes are monotonic in the hash, so those slots lie in the runs
    /// that start in the home span `home(lo)..=home(hi - 1)`: read the span, then on to the
    /// next empty slot (wrapping round the end).
    fn scan_range(&self, lo: u64, hi: u64, from: usize, f: &mut dyn FnMut(f64)) {
        let cap = self.cap();
        if cap == 0 {
            return;
        }
        let start = self.home(lo as u32);
        let span = self.home((hi - 1) as u32) - start + 1;
        let mut i = start;
        for step in 0..cap {
            let h = self.hashes[i];
            if step >= span && h == EMPTY {
                break;
            }
            if h > TOMB && i >= from && lo <= h as u64 && (h as u64) < hi {
                f(self.scores[i]);
            }
            i = self.next(i);
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Index {
    /// Entry counts of the chunks (see [`RankTree`]); kept in step by every chunk change.
    ranks: RankTree,
    cur: Table,
    /// Table being migrated into `cur`, and how many of its slots have been moved. Slots below
    /// the mark are stale copies and are ignored; deletions above it leave tombstones.
    old: Option<(Table, usize)>,
}

/// Where a member's index slot is.
#[derive(Clone, Copy)]
enum Slot {
    Cur(usize),
    Old(usize),
}

impl Index {
    /// An empty index sized for `members` members.
    fn new(members: usize) -> Self {
        let cap = members;
        let mut c = FIRST_CAP;
        while c * LOAD_NUM < cap * LOAD_DEN {
            c = grown(c);
        }
        Index { ranks: RankTree::default(), cur: Table::with_capacity(c), old: None }
    }

    #[cfg(test)]
    fn live(&self) -> usize {
        self.cur.live + self.old.as_ref().map_or(0, |(t, _)| t.live)
    }

    /// Calls `f(slot, score)` for each slot whose hash is `h`, until `f` returns true.
    fn probe(&self, h: u32, mut f: impl FnMut(Slot, f64) -> bool) -> bool {
        let t = &self.cur;
        let mut i = t.home(h);
        while t.hashes[i] != EMPTY {
            if t.hashes[i] == h && f(Slot::Cur(i), t.scores[i]) {
                return true;
            }
            i = t.next(i);
        }
        if let Some((t, mark)) = &self.old {
            let mut i = t.home(h);
            while t.hashes[i] != EMPTY {
                if i >= *mark && t.hashes[i] == h && f(Slot::Old(i), t.scores[i]) {
                    return true;
                }
                i = t.next(i);
            }
        }
        false
    }

    fn set_score(&mut self, slot: Slot, score: f64) {
        match slot {
            Slot::Cur(i) => self.cur.scores[i] = score,
            Slot::Old(i) => self.old.as_mut().expect("old table").0.scores[i] = score,
        }
    }

    fn remove(&mut self, slot: Slot) {
        match slot {
            Slot::Cur(i) => self.cur.remove_shift(i),
            Slot::Old(i) => {
                let t = &mut self.old.as_mut().expect("old table").0;
                t.hashes[i] = TOMB;
                t.live -= 1;
            }
        }
        self.step();
    }

    fn insert(&mut self, h: u32, score: f64) {
        // Keep the load of the current table at most LOAD_NUM/LOAD_DEN.
        if (self.cur.live + 1) * LOAD_DEN > self.cur.cap() * LOAD_NUM {
            self.finish_migration();
            let bigger = Table::with_capacity(grown(self.cur.cap()));
            let old = std::mem::replace(&mut self.cur, bigger);
            self.old = Some((old, 0));
        }
        self.cur.put(h, score);
        self.step();
    }

    /// Moves the next few slots of the old table, if a migration is under way.
    fn step(&mut self) {
        let Some((old, mark)) = &mut self.old else { return };
        let end = (*mark + MIGRATE_STEP).min(old.cap());
        for i in *mark..end {
            let h = old.hashes[i];
            if h != EMPTY && h != TOMB {
                self.cur.put(h, old.scores[i]);
                old.live -= 1;
            }
        }
        *mark = end;
        if end == old.cap() {
            self.old = None;
        }
    }

    /// The end of a scan step that starts at hash `lo` and covers about `slots` home slots of
    /// the current table: the smallest hash whose home is `slots` past `lo`'s (2^32 when
    /// that passes the end). Always above `lo`.
    fn scan_end(&self, lo: u64, slots: usize) -> u64 {
        let cap = self.cur.cap() as u64;
        let end_slot = (self.cur.home(lo as u32) as u64).saturating_add(slots.max(1) as u64);
        if end_slot >= cap {
            return 1 << 32;
        }
        // ceil(end_slot * 2^32 / cap): every hash below it has a home below `end_slot`.
        (end_slot << 32).div_ceil(cap)
    }

    /// Calls `f(score)` for every member whose hash is in `[lo, hi)`, in either table.
    fn scan_range(&self, lo: u64, hi: u64, f: &mut dyn FnMut(f64)) {
        self.cur.scan_range(lo, hi, 0, f);
        if let Some((old, mark)) = &self.old {
            // Slots below the mark were copied into `cur`; skipping them reports each once.
            old.scan_range(lo, hi, *mark, f);
        }
    }

    fn finish_migration(&mut self) {
        while self.old.is_some() {
            self.step();
        }
    }

    fn mem_usage(&self) -> usize {
        let t = |t: &Table| size_class(t.hashes.capacity() * 4) + size_class(t.scores.capacity() * 8);
        t(&self.cur) + self.old.as_ref().map_or(0, |(o, _)| t(o)) + self.ranks.mem_usage()
    }
}

// ---------------------------------------------------------------------------------------------
// Rank tree

/// A Fenwick (binary indexed) tree over the entry counts of the chunks, so that the rank of a
/// chunk's first entry and the chunk holding a given rank cost O(log chunks) instead of a walk
/// over every chunk. Kept only with the member index (big sets): 4 bytes per chunk of about a
/// kilobyte. Node `k` holds the sum of the counts of chunks `(k & (k + 1))..=k`.
#[derive(Clone, Debug, Default)]
struct RankTree {
    t: Vec<u32>,
}

impl RankTree {
    /// Number of entries in chunks `0..ci`.
    fn prefix(&self, ci: usize) -> usize {
        let mut sum = 0usize;
        let mut j = ci;
        while j > 0 {
            sum += self.t[j - 1] as usize;
            j &= j - 1;
        }
        sum
    }

    fn add(&mut self, ci: usize, delta: i32) {
        let mut k = ci;
        while k < self.t.len() {
            self.t[k] = self.t[k].wrapping_add_signed(delta);
            k |= k + 1;
        }
    }

    /// Appends a chunk of `n` entries: the new node adds the counts it covers, which are the
    /// sums of nodes already in the tree.
    fn push(&mut self, n: u32) {
        let k = self.t.len();
        let lo = k & (k + 1);
        let mut sum = n;
        let mut j = k;
        while j > lo {
            sum += self.t[j - 1];
            j &= j - 1;
        }
        self.t.push(sum);
    }

    /// Makes the tree match `chunks` again after chunks `from..` changed (inserted, removed,
    /// merged or split). Nodes below `from` cover only earlier chunks and stay valid; near the
    /// end the later nodes are re-appended one by one, otherwise everything is rebuilt in
    /// one linear pass.
    fn resync(&mut self, chunks: &[Chunk], from: usize) {
        let n = chunks.len();
        if from + 64 >= n && from <= self.t.len() {
            self.t.truncate(from);
            for c in &chunks[from..] {
                self.push(c.n);
            }
        } else {
            self.t.clear();
            self.t.extend(chunks.iter().map(|c| c.n));
            for k in 0..n {
                let parent = k | (k + 1);
                if parent < n {
                    self.t[parent] += self.t[k];
                }
            }
        }
        // Give back memory after a large shrink.
        if self.t.capacity() > 2 * self.t.len() + 16 {
            self.t.shrink_to(self.t.len() + self.t.len() / 4);
        }
    }

    /// The chunk holding entry `r` (below the total) and `r`'s place in that chunk: descends
    /// from the largest power-of-two block, skipping whole blocks that end at or before `r`.
    fn find(&self, mut r: usize) -> (usize, usize) {
        let n = self.t.len();
        let mut pos = 0;
        let mut step = if n == 0 { 0 } else { 1 << (usize::BITS - 1 - n.leading_zeros()) };
        while step > 0 {
            let next = pos + step;
            if next <= n && (self.t[next - 1] as usize) <= r {
                pos = next;
                r -= self.t[next - 1] as usize;
            }
            step >>= 1;
        }
        (pos, r)
    }

    fn mem_usage(&self) -> usize {
        if self.t.capacity() == 0 {
            0
        } else {
            size_class(self.t.capacity() * 4)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The sorted set

/// What an insertion or removal did to the chunk sequence, for the rank tree.
#[derive(Clone, Copy, Debug)]
enum ChunkChange {
    /// Chunk `.0` gained or lost entries, nothing else moved.
    Count(usize, i32),
    /// Chunks from `.0` on were inserted, removed, split or merged.
    From(usize),
}

/// A position: chunk number and byte offset of an entry in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pos {
    ci: usize,
    off: usize,
}

#[derive(Clone, Debug, Default)]
pub struct ZSet {
    /// One inline chunk while small: no allocation besides its buffer.
    chunks: OneOrVec<Chunk>,
    len: usize,
    /// None while the set is in its small ("listpack") form.
    index: Option<Box<Index>>,
}

impl ZSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `OBJECT ENCODING`'s answer, with Redis's names for the equivalent forms.
    pub fn encoding(&self) -> &'static str {
        if self.index.is_some() {
            "skiplist"
        } else {
            "listpack"
        }
    }

    /// Bytes really allocated for this set (jemalloc size classes), the set header included.
    pub fn mem_usage(&self) -> usize {
        let chunks: usize = self.chunks.iter().map(|c| size_class(c.buf.capacity())).sum();
        let vec = self.chunks.heap_bytes();
        let index =
            self.index.as_ref().map_or(0, |i| size_class(std::mem::size_of::<Index>()) + i.mem_usage());
        size_class(std::mem::size_of::<ZSet>()) + chunks + vec + index
    }

    /// Length in bytes of the raw form: one segment (`varint(len)`, then `len` bytes) per
    /// chunk, holding its entries in the entry format of the module documentation; together,
    /// every entry in ascending order.
    pub fn raw_len(&self) -> usize {
        self.chunks.iter().map(|c| super::varint_len(c.buf.len() as u64) + c.buf.len()).sum()
    }

    /// Calls `f` with consecutive pieces of the raw form: each chunk's length, then its bytes.
    pub fn for_each_raw_run(&self, mut f: impl FnMut(&[u8])) {
        for c in self.chunks.iter() {
            super::with_varint(c.buf.len() as u64, &mut f);
            f(&c.buf);
        }
    }

    /// Builds a sorted set of `count` members from its raw form, validating it fully: entries
    /// well formed (see `decode_entry_checked`), strictly ascending by (score, member), no
    /// member twice, exactly `count` of them. Each segment becomes one chunk, exactly sized
    /// (not cut: a saved chunk may exceed `CHUNK_BYTES` after a split around a big entry, and
    /// cutting it could cost memory; the insert path splits any oversized chunk it meets), and
    /// the member index is built, presized, only when the content exceeds the listpack
    /// limits, as a fresh set would decide: never more memory than the set that was saved.
    pub fn from_raw(raw: &[u8], count: usize) -> Result<ZSet, super::RawError> {
        use super::RawError;
        let mut chunks: Vec<Chunk> = Vec::new();
        let mut n = 0usize;
        let mut prev: Option<(f64, &[u8])> = None;
        let mut longest = 0usize;
        super::for_each_segment(raw, |seg| {
            let (mut n_in, mut off) = (0u32, 0usize);
            while off < seg.len() {
                let (s, m, next) = decode_entry_checked(seg, off).ok_or(RawError("bad sorted set entry"))?;
                if let Some((ps, pm)) = prev {
                    if cmp_entry(ps, pm, s, m) != Ordering::Less {
                        return Err(RawError("sorted set entries out of order"));
                    }
                }
                prev = Some((s, m));
                longest = longest.max(m.len());
                n_in = n_in.checked_add(1).ok_or(RawError("chunk too large"))?;
                n += 1;
                off = next;
            }
            let mut buf = Vec::with_capacity(seg.len());
            buf.extend_from_slice(seg);
            chunks.push(Chunk::of(buf, n_in));
            Ok(())
        })?;
        if n != count {
            return Err(RawError("entry count differs from the stated count"));
        }
        if n == 0 {
            return Err(RawError("empty collection"));
        }
        let mut z = ZSet { chunks: OneOrVec::from_vec(chunks), len: n, index: None };
        if n <= listpack_entries() && longest <= listpack_value() {
            let mut members: Vec<&[u8]> = z.iter().map(|(m, _)| m).collect();
            if !super::all_distinct(&mut members) {
                return Err(RawError("duplicate member"));
            }
            return Ok(z);
        }
        let mut ix = Index::new(n);
        for (m, s) in z.iter() {
            let h = hash_member(m);
            // The index holds the members seen so far. A slot with this hash and a score s2
            // other than s, where the entry (s2, m) exists, is an earlier entry of m: m twice.
            // (A slot with score s itself is another member with the same hash and score,
            // since the order check makes (s, m) unique.)
            if ix.probe(h, |_, score| score != s && z.locate(score, m).is_ok()) {
                return Err(RawError("duplicate member"));
            }
            ix.insert(h, s);
        }
        ix.finish_migration();
        ix.ranks.resync(&z.chunks, 0);
        z.index = Some(Box::new(ix));
        Ok(z)
    }

    /// Builds a set from `entries` already in ascending (score, member) order with distinct
    /// members (a store command's result), and returns it with the score each entry got. It
    /// is what inserting them one by one into [`ZSet::new_indexed`] (`indexed`) or
    /// [`ZSet::new`] would build, the small form's -0 stored as 0 until the content passes the
    /// listpack limits, but without a search per entry: chunks are filled in order and the
    /// member index is built once. None, building nothing, when the entries are not strictly
    /// ascending (or hold a NaN score): the caller inserts them one by one instead.
    pub fn from_sorted(entries: &[(Vec<u8>, f64)], indexed: bool) -> Option<(ZSet, Vec<f64>)> {
        let ordered = entries.iter().all(|(_, s)| !s.is_nan())
            && entries.windows(2).all(|w| cmp_entry(w[0].1, &w[0].0, w[1].1, &w[1].0) == Ordering::Less);
        if !ordered {
            return None;
        }
        let mut chunks: Vec<Chunk> = Vec::new();
        let mut stored = Vec::with_capacity(entries.len());
        let mut big = indexed;
        let mut cur = Chunk::default();
        for (i, (m, s)) in entries.iter().enumerate() {
            // One by one, the set converts when it already holds the listpack limit or a
            // member is too long for it; the small form stores -0 as 0 until then.
            big |= i >= listpack_entries() || m.len() > listpack_value();
            let s = if !big && *s == 0.0 { 0.0 } else { *s };
            let elen = encoded_len(s, m);
            if cur.n > 0 && cur.buf.len() + elen > CHUNK_BYTES {
                cur.set_first();
                chunks.push(std::mem::take(&mut cur));
            }
            cur.reserve(elen);
            encode_entry(&mut cur.buf, s, m);
            cur.n += 1;
            stored.push(s);
        }
        if cur.n > 0 {
            cur.set_first();
            chunks.push(cur);
        }
        let mut z = ZSet { chunks: OneOrVec::from_vec(chunks), len: entries.len(), index: None };
        if big {
            let mut ix = Index::new(entries.len());
            for ((m, _), s) in entries.iter().zip(&stored) {
                ix.insert(hash_member(m), *s);
            }
            ix.finish_migration();
            ix.ranks.resync(&z.chunks, 0);
            z.index = Some(Box::new(ix));
        }
        Some((z, stored))
    }

    /// The canonical dump: (member, score bits) sorted by member.
    pub fn to_plain(&self) -> Plain {
        let mut v: Vec<(Vec<u8>, u64)> = self.iter().map(|(m, s)| (m.to_vec(), s.to_bits())).collect();
        v.sort();
        Plain::ZSet(v)
    }

    /// Every (member, score) in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        Iter { z: self, ci: 0, off: 0, left: self.len }
    }

    /// The chunk that holds, or would hold, (score, member): the last chunk whose first entry
    /// is <= it (the first chunk if none is).
    fn chunk_for(&self, score: f64, member: &[u8]) -> usize {
        let pp = self.chunks.partition_point(|c| c.starts_at_or_before(score, member));
        pp.saturating_sub(1)
    }

    /// Finds (score, member): Ok(position) if present, Err(insertion position) if not.
    fn locate(&self, score: f64, member: &[u8]) -> Result<Pos, Pos> {
        if self.chunks.is_empty() {
            return Err(Pos { ci: 0, off: 0 });
        }
        let ci = self.chunk_for(score, member);
        let buf = &self.chunks[ci].buf;
        let mut off = 0;
        while off < buf.len() {
            let (s, m, next) = decode_entry(buf, off);
            match cmp_entry(s, m, score, member) {
                Ordering::Less => off = next,
                Ordering::Equal => return Ok(Pos { ci, off }),
                Ordering::Greater => break,
            }
        }
        Err(Pos { ci, off })
    }

    /// Finds a member: its position, score and index slot.
    fn find(&self, member: &[u8]) -> Option<(Pos, f64, Option<Slot>)> {
        match &self.index {
            Some(ix) => {
                let mut found = None;
                ix.probe(hash_member(member), |slot, score| match self.locate(score, member) {
                    Ok(p) => {
                        found = Some((p, score, Some(slot)));
                        true
                    }
                    Err(_) => false,
                });
                found
            }
            None => {
                for (ci, c) in self.chunks.iter().enumerate() {
                    let mut off = 0;
                    while off < c.buf.len() {
                        let (s, m, next) = decode_entry(&c.buf, off);
                        if m == member {
                            return Some((Pos { ci, off }, s, None));
                        }
                        off = next;
                    }
                }
                None
            }
        }
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.find(member).is_some()
    }

    /// The member's score.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.find(member).map(|(_, s, _)| s)
    }

    /// Adds `member` with `score`, or moves it to `score`. Returns the previous score. A score
    /// numerically equal to the current one (0 vs -0 included) changes nothing, as in Redis.
    /// In the small form a -0 score is stored as 0, as Redis's listpack does. `score` must not
    /// be NaN.
    pub fn insert(&mut self, member: &[u8], score: f64) -> Option<f64> {
        self.insert_impl(member, score, true)
    }

    /// [`ZSet::insert`] storing the score's exact bits (-0 stays -0 in any form): replicas
    /// use it so that they hold exactly what the origin stored.
    pub fn insert_exact(&mut self, member: &[u8], score: f64) -> Option<f64> {
        self.insert_impl(member, score, false)
    }

    /// An empty set already in its indexed ("skiplist") form, as Redis creates one for a
    /// result known to be big.
    pub fn new_indexed() -> Self {
        ZSet { index: Some(Box::new(Index::new(0))), ..Self::default() }
    }

    fn insert_impl(&mut self, member: &[u8], score: f64, normalize: bool) -> Option<f64> {
        debug_assert!(!score.is_nan());
        if let Some((pos, old, slot)) = self.find(member) {
            if old == score {
                return Some(old);
            }
            let score = if normalize { self.normalize(score) } else { score };
            self.remove_pos(pos);
            self.len -= 1;
            self.insert_new(member, score);
            if let (Some(ix), Some(slot)) = (self.index.as_mut(), slot) {
                ix.set_score(slot, score);
            }
            return Some(old);
        }
        if self.index.is_none() && (self.len >= listpack_entries() || member.len() > listpack_value()) {
            self.convert_to_indexed();
        }
        let score = if normalize { self.normalize(score) } else { score };
        self.insert_new(member, score);
        if let Some(ix) = self.index.as_mut() {
            ix.insert(hash_member(member), score);
        }
        None
    }

    /// The small form stores scores as Redis's listpack does, where an integral -0 prints as 0.
    fn normalize(&self, score: f64) -> f64 {
        if self.index.is_none() && score == 0.0 {
            0.0
        } else {
            score
        }
    }

    fn convert_to_indexed(&mut self) {
        let mut ix = Index::new(self.len + 1);
        let mut entries = Vec::with_capacity(self.len);
        for (m, s) in self.iter() {
            entries.push((hash_member(m), s));
        }
        for (h, s) in entries {
            ix.insert(h, s);
        }
        ix.finish_migration();
        ix.ranks.resync(&self.chunks, 0);
        self.index = Some(Box::new(ix));
    }

    /// Puts an absent (score, member) in order; does not touch the member index, but keeps
    /// the rank tree in step.
    fn insert_new(&mut self, member: &[u8], score: f64) {
        let change = self.insert_entry(member, score);
        self.sync_ranks(change);
    }

    /// Brings the rank tree (if any) in step with a chunk change.
    fn sync_ranks(&mut self, change: ChunkChange) {
        let Some(ix) = self.index.as_mut() else { return };
        match change {
            ChunkChange::Count(ci, d) => ix.ranks.add(ci, d),
            ChunkChange::From(ci) => ix.ranks.resync(&self.chunks, ci),
        }
    }

    fn insert_entry(&mut self, member: &[u8], score: f64) -> ChunkChange {
        self.len += 1;
        let pos = match self.locate(score, member) {
            Err(p) => p,
            Ok(_) => unreachable!("member is absent"),
        };
        if self.chunks.is_empty() {
            let mut c = Chunk::default();
            c.insert_at(0, score, member);
            self.chunks.push(c);
            return ChunkChange::From(0);
        }
        let elen = encoded_len(score, member);
        let Pos { ci, off } = pos;
        let clen = self.chunks[ci].buf.len();
        if clen + elen <= CHUNK_BYTES || self.chunks[ci].n == 0 {
            self.chunks[ci].insert_at(off, score, member);
            return ChunkChange::Count(ci, 1);
        }
        if off == clen && ci + 1 == self.chunks.len() {
            // Appending past the last entry: start a fresh chunk, keep this one full.
            let mut c = Chunk::default();
            c.insert_at(0, score, member);
            self.chunks.push(c);
            return ChunkChange::From(ci + 1);
        }
        if off == 0 && ci == 0 {
            let mut c = Chunk::default();
            c.insert_at(0, score, member);
            self.chunks.insert(0, c);
            return ChunkChange::From(0);
        }
        if self.chunks[ci].n == 1 {
            // A lone entry bigger than a chunk: the new entry gets its own chunk beside it.
            let mut c = Chunk::default();
            c.insert_at(0, score, member);
            self.chunks.insert(if off == 0 { ci } else { ci + 1 }, c);
            return ChunkChange::From(ci);
        }
        // Split in the middle (by entries; both halves keep at least one), then insert into
        // the proper half.
        let offs = self.chunks[ci].offsets();
        let mid_i = offs.len() / 2;
        let mid = offs[mid_i];
        let right_buf = self.chunks[ci].buf[mid..].to_vec();
        let mut right = Chunk { n: (offs.len() - mid_i) as u32, ..Chunk::default() };
        right.reserve(right_buf.len() + elen);
        right.buf.extend_from_slice(&right_buf);
        right.set_first();
        {
            let left = &mut self.chunks[ci];
            left.buf.truncate(mid);
            left.n = mid_i as u32;
            let want = size_class((mid + elen).max(16));
            if left.buf.capacity() > want {
                left.buf.shrink_to(want);
            }
        }
        if off <= mid {
            self.chunks[ci].insert_at(off, score, member);
        } else {
            right.insert_at(off - mid, score, member);
        }
        self.chunks.insert(ci + 1, right);
        ChunkChange::From(ci)
    }

    /// Removes the entry at `pos` (len and index untouched); drops an emptied chunk and merges
    /// a small chunk into its neighbour.
    fn remove_pos(&mut self, pos: Pos) {
        let change = self.remove_entry(pos);
        self.sync_ranks(change);
    }

    fn remove_entry(&mut self, pos: Pos) -> ChunkChange {
        let ci = pos.ci;
        self.chunks[ci].remove_at(pos.off);
        if self.chunks[ci].n == 0 {
            self.chunks.remove(ci);
            return ChunkChange::From(ci);
        }
        let len = self.chunks[ci].buf.len();
        let merge = len < CHUNK_BYTES / 4
            && ci + 1 < self.chunks.len()
            && len + self.chunks[ci + 1].buf.len() <= CHUNK_BYTES / 2;
        if merge {
            let next = self.chunks.remove(ci + 1);
            let c = &mut self.chunks[ci];
            c.reserve(next.buf.len());
            c.buf.extend_from_slice(&next.buf);
            c.n += next.n;
            ChunkChange::From(ci)
        } else {
            // Give back memory once a chunk has shrunk to under half its allocation.
            let c = &mut self.chunks[ci];
            let want = size_class(len.max(16));
            if c.buf.capacity() > 2 * want {
                c.buf.shrink_to(want);
            }
            ChunkChange::Count(ci, -1)
        }
    }

    /// Removes `member`; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let (pos, score, slot) = self.find(member)?;
        self.remove_pos(pos);
        self.len -= 1;
        if let (Some(ix), Some(slot)) = (self.index.as_mut(), slot) {
            ix.remove(slot);
        }
        if self.len == 0 {
            self.chunks = OneOrVec::default();
        }
        Some(score)
    }

    /// Number of entries in chunks `0..ci`: O(log chunks) with the rank tree (big sets), a
    /// walk over the few chunks of a small set otherwise.
    fn entries_before(&self, ci: usize) -> usize {
        match &self.index {
            Some(ix) => ix.ranks.prefix(ci),
            None => self.chunks[..ci].iter().map(|c| c.n as usize).sum(),
        }
    }

    /// The chunk holding rank `r` (r < len) and `r`'s place in it.
    fn chunk_of_rank(&self, mut r: usize) -> (usize, usize) {
        if let Some(ix) = &self.index {
            return ix.ranks.find(r);
        }
        for (ci, c) in self.chunks.iter().enumerate() {
            if r < c.n as usize {
                return (ci, r);
            }
            r -= c.n as usize;
        }
        panic!("rank out of range")
    }

    fn rank_of_pos(&self, pos: Pos) -> usize {
        let before = self.entries_before(pos.ci);
        let buf = &self.chunks[pos.ci].buf;
        let mut off = 0;
        let mut r = 0;
        while off < pos.off {
            off = decode_entry(buf, off).2;
            r += 1;
        }
        before + r
    }

    /// The 0-based ascending rank of `member` and its score.
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        let (pos, score, _) = self.find(member)?;
        Some((self.rank_of_pos(pos), score))
    }

    /// The position of the entry with ascending rank `r` (r < len).
    fn pos_of_rank(&self, r: usize) -> Pos {
        let (ci, within) = self.chunk_of_rank(r);
        let buf = &self.chunks[ci].buf;
        let mut off = 0;
        for _ in 0..within {
            off = decode_entry(buf, off).2;
        }
        Pos { ci, off }
    }

    /// The entry with ascending rank `r`.
    pub fn get_by_rank(&self, r: usize) -> Option<(&[u8], f64)> {
        if r >= self.len {
            return None;
        }
        let p = self.pos_of_rank(r);
        let (s, m, _) = decode_entry(&self.chunks[p.ci].buf, p.off);
        Some((m, s))
    }

    /// How many entries satisfy `below`, which must hold for a prefix of the order (true for
    /// every entry before the first entry where it is false). Binary search over chunks, then
    /// a scan inside one chunk.
    pub fn partition_point(&self, mut below: impl FnMut(f64, &[u8]) -> bool) -> usize {
        let ci = self.chunks.partition_point(|c| {
            let (s, m, _) = decode_entry(&c.buf, 0);
            below(s, m)
        });
        if ci == 0 {
            return 0;
        }
        let ci = ci - 1;
        let before = self.entries_before(ci);
        let buf = &self.chunks[ci].buf;
        let mut off = 0;
        let mut r = 0;
        while off < buf.len() {
            let (s, m, next) = decode_entry(buf, off);
            if !below(s, m) {
                break;
            }
            r += 1;
            off = next;
        }
        before + r
    }

    /// How many entries score below `t` (at or below it when `inclusive`): the rank where a
    /// score range starts or ends. [`ZSet::partition_point`]'s answer for that predicate, with
    /// the chunks' cached first scores searched and members skipped rather than decoded.
    pub fn count_below(&self, t: f64, inclusive: bool) -> usize {
        let below = |s: f64| score_below(s, t, inclusive);
        let ci = self.chunks.partition_point(|c| c.starts_below(t, inclusive));
        if ci == 0 {
            return 0;
        }
        let ci = ci - 1;
        let buf = &self.chunks[ci].buf;
        // The chunk's first entry is below (the search above says so).
        let mut off = decode_score(buf, 0).1;
        let mut r = 1;
        while off < buf.len() {
            let (s, next) = decode_score(buf, off);
            if !below(s) {
                break;
            }
            r += 1;
            off = next;
        }
        self.entries_before(ci) + r
    }

    /// Calls `f(member, score)` for ranks `from..to` (ascending ranks, `to` exclusive), in
    /// ascending order, or descending when `rev`.
    pub fn for_range(&self, from: usize, to: usize, rev: bool, mut f: impl FnMut(&[u8], f64)) {
        let to = to.min(self.len);
        if from >= to {
            return;
        }
        if !rev {
            for (m, s) in self.iter_from(from).take(to - from) {
                f(m, s);
            }
            return;
        }
        // Walk backwards from rank to-1, a chunk at a time.
        let last = self.pos_of_rank(to - 1);
        let mut left = to - from;
        let mut ci = last.ci;
        let mut limit = Some(last.off);
        loop {
            let c = &self.chunks[ci];
            let offs = c.offsets();
            for &off in offs.iter().rev() {
                if limit.is_some_and(|l| off > l) {
                    continue;
                }
                let (s, m, _) = decode_entry(&c.buf, off);
                f(m, s);
                left -= 1;
                if left == 0 {
                    return;
                }
            }
            limit = None;
            ci -= 1;
        }
    }

    /// Calls `f(member, score)` for each rank of `ranks` (ascending, repeats allowed, each
    /// below `len`), in one pass over the chunks.
    pub fn for_ranks(&self, ranks: &[usize], mut f: impl FnMut(&[u8], f64)) {
        let mut ci = 0;
        let mut base = 0usize; // rank of the first entry of chunk `ci`
        let mut off = 0usize; // offset of entry `at` in chunk `ci`
        let mut at = 0usize;
        for &r in ranks {
            if r >= self.len {
                return;
            }
            if r >= base + self.chunks[ci].n as usize {
                // A later chunk: jump straight to it.
                let (c, within) = self.chunk_of_rank(r);
                ci = c;
                base = r - within;
                off = 0;
                at = base;
            }
            let Some(c) = self.chunks.get(ci) else { return };
            while at < r {
                off = decode_entry(&c.buf, off).2;
                at += 1;
            }
            let (s, m, _) = decode_entry(&c.buf, off);
            f(m, s);
        }
    }

    /// Visits ranks `from`, `from - 1`, ..., 0 (descending order) while `f` returns true.
    pub fn walk_back(&self, from: usize, mut f: impl FnMut(&[u8], f64) -> bool) {
        if from >= self.len {
            return;
        }
        let last = self.pos_of_rank(from);
        let mut limit = Some(last.off);
        for ci in (0..=last.ci).rev() {
            let c = &self.chunks[ci];
            for &off in c.offsets().iter().rev() {
                if limit.is_some_and(|l| off > l) {
                    continue;
                }
                let (s, m, _) = decode_entry(&c.buf, off);
                if !f(m, s) {
                    return;
                }
            }
            limit = None;
        }
    }

    /// Ascending iteration starting at rank `r`.
    pub fn iter_from(&self, r: usize) -> Iter<'_> {
        if r >= self.len {
            return Iter { z: self, ci: self.chunks.len(), off: 0, left: 0 };
        }
        let p = self.pos_of_rank(r);
        Iter { z: self, ci: p.ci, off: p.off, left: self.len - r }
    }

    /// (member, score) pairs of ranks `from..to`, ascending (or descending when `rev`).
    pub fn range_vec(&self, from: usize, to: usize, rev: bool) -> Vec<(Vec<u8>, f64)> {
        let mut v = Vec::new();
        self.for_range(from, to, rev, |m, s| v.push((m.to_vec(), s)));
        v
    }

    /// The position of the first entry whose score is >= `score` (numerically), if any.
    fn first_at_or_above(&self, score: f64) -> Option<Pos> {
        let after = self.chunks.partition_point(|c| c.starts_below(score, false));
        let mut ci = after.saturating_sub(1);
        while let Some(c) = self.chunks.get(ci) {
            let mut off = 0;
            while off < c.buf.len() {
                let (s, _, next) = decode_entry(&c.buf, off);
                if s >= score {
                    return Some(Pos { ci, off });
                }
                off = next;
            }
            ci += 1;
        }
        None
    }

    /// Calls `f(member)` for every entry whose score equals `score` (0 and -0 alike); returns
    /// how many there were.
    fn for_score_run<'a>(&'a self, score: f64, mut f: impl FnMut(&'a [u8], f64)) -> usize {
        let Some(Pos { mut ci, mut off }) = self.first_at_or_above(score) else { return 0 };
        let mut n = 0;
        while let Some(c) = self.chunks.get(ci) {
            while off < c.buf.len() {
                let (s, m, next) = decode_entry(&c.buf, off);
                if s != score {
                    return n;
                }
                f(m, s);
                n += 1;
                off = next;
            }
            ci += 1;
            off = 0;
        }
        n
    }

    /// One SCAN step: calls `f(member, score)` for some members and returns the cursor to pass
    /// next, 0 once the iteration is over. The small form returns everything at once.
    ///
    /// In the indexed form the cursor is a position in the 32-bit space of member hashes, and a
    /// step returns exactly the members whose hash lies in `[cursor, next)`. A member's hash
    /// never changes (not with its score, not when the index grows, shrinks or migrates), so
    /// every member present for the whole iteration is returned exactly once, and one added or
    /// removed meanwhile at most once.
    ///
    /// The index slots name scores, not members, so a step collects the scores of the slots in
    /// its hash range and walks each one's run of equal scores, keeping the members whose hash
    /// is in range. `count` sizes the range in home slots of the index. When runs of equal
    /// scores are long (many members share a score) that walk costs more than the members it
    /// yields; the step then widens its range while the extra slots need no new walk, until it
    /// returns at least half as many members as it decoded, so the total work of an iteration
    /// stays proportional to the set's size times the length of its longest equal-score runs
    /// met per step.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], f64)) -> u64 {
        const END: u64 = 1 << 32;
        let Some(ix) = self.index.as_ref() else {
            for (m, s) in self.iter() {
                f(m, s);
            }
            return 0;
        };
        if cursor >= END {
            return 0;
        }
        let lo = cursor;
        let mut hi = lo;
        // Scores whose runs were walked (0 and -0 share a run), and the members met there.
        let mut walked: std::collections::HashSet<u64> = std::collections::HashSet::new();
        let mut pool: Vec<(u32, &[u8], f64)> = Vec::new();
        let (mut decoded, mut in_range) = (0usize, 0usize);
        let run_key = |s: f64| if s == 0.0 { 0 } else { s.to_bits() };
        loop {
            let next_hi = ix.scan_end(hi, count);
            let mut scores = Vec::new();
            ix.scan_range(hi, next_hi, &mut |s| scores.push(s));
            let mut fresh: Vec<f64> =
                scores.iter().copied().filter(|&s| !walked.contains(&run_key(s))).collect();
            fresh.sort_by(|a, b| a.total_cmp(b));
            fresh.dedup_by(|a, b| run_key(*a) == run_key(*b));
            if hi > lo && !fresh.is_empty() {
                // Widening further would mean walking new runs: stop here.
                break;
            }
            for s in fresh {
                walked.insert(run_key(s));
                decoded += self.for_score_run(s, |m, s| pool.push((hash_member(m), m, s)));
            }
            in_range += scores.len();
            hi = next_hi;
            if hi >= END || in_range * 2 >= decoded {
                break;
            }
        }
        for &(h, m, s) in &pool {
            if lo <= h as u64 && (h as u64) < hi {
                f(m, s);
            }
        }
        if hi >= END {
            0
        } else {
            hi
        }
    }
}

/// Ascending iterator over (member, score).
pub struct Iter<'a> {
    z: &'a ZSet,
    ci: usize,
    off: usize,
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], f64);
    fn next(&mut self) -> Option<Self::Item> {
        while self.ci < self.z.chunks.len() {
            let c = &self.z.chunks[self.ci];
            if self.off < c.buf.len() {
                let (s, m, next) = decode_entry(&c.buf, self.off);
                self.off = next;
                self.left = self.left.saturating_sub(1);
                return Some((m, s));
            }
            self.ci += 1;
            self.off = 0;
        }
        None
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// A chunk's cached first-score bound decides a comparison only when it is sure, at the
    /// edges too (infinities, -0, beyond f32's range, scores between two f32s).
    #[test]
    fn first_score_bound_decides_only_when_sure() {
        let big = f32::MAX as f64 * 4.0;
        let scores = [
            0.0,
            -0.0,
            1.0,
            0.1,
            -0.1,
            1e300,
            -1e300,
            big,
            -big,
            f64::INFINITY,
            f64::NEG_INFINITY,
            16_777_217.0,
            1_700_000_000_123.0,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
        ];
        for &first in &scores {
            let mut buf = Vec::new();
            encode_entry(&mut buf, first, b"m");
            let c = Chunk::of(buf, 1);
            assert!((c.first_floor as f64) <= first, "{first}");
            for &x in scores.iter().chain(&[first, first + 1e-9, first - 1e-9]) {
                if let Some(o) = c.first_vs(x) {
                    assert_eq!(Some(o), first.partial_cmp(&x), "first {first} against {x}");
                    assert_ne!(o, Ordering::Equal);
                }
                for inclusive in [false, true] {
                    assert_eq!(
                        c.starts_below(x, inclusive),
                        first < x || (inclusive && first == x),
                        "{first} {x}"
                    );
                }
            }
        }
    }

    /// A one-member set is its header (one chunk inline) plus one small buffer; it was
    /// ~200 bytes with a four-slot chunk vector and a 16-byte minimum buffer. (A chunk keeps
    /// its first score as an f32 bound, not an f64, to stay within these bounds.)
    #[test]
    fn tiny_zset_memory_is_bounded() {
        assert!(std::mem::size_of::<ZSet>() <= 48, "header grew to {}", std::mem::size_of::<ZSet>());
        let mut z = ZSet::new();
        z.insert(b"m1234", 1234.0);
        assert_eq!(z.score(b"m1234"), Some(1234.0));
        // Tag + 2 score bytes + 5 member bytes: exactly the 8-byte class.
        assert!(z.mem_usage() <= 56, "one member: {} bytes", z.mem_usage());
        for j in 1..8 {
            z.insert(format!("m1234-{j}").as_bytes(), 1234.0 + j as f64);
        }
        assert_eq!(z.len(), 8);
        assert!(z.mem_usage() <= 128, "eight members: {} bytes", z.mem_usage());
    }

    #[test]
    fn short_and_long_members_round_trip_through_the_tag() {
        for len in [0usize, 1, 13, 14, 15, 16, 200] {
            for score in [0.0, -0.0, 7.0, -3.5, 1e300, f64::INFINITY] {
                let m = vec![b'q'; len];
                let mut b = Vec::new();
                encode_entry(&mut b, score, &m);
                assert_eq!(b.len(), encoded_len(score, &m));
                let (s, got, next) = decode_entry(&b, 0);
                assert_eq!((s.to_bits(), got, next), (score.to_bits(), &m[..], b.len()));
            }
        }
    }

    fn model_order(m: &HashMap<Vec<u8>, f64>) -> Vec<(Vec<u8>, f64)> {
        let mut v: Vec<(Vec<u8>, f64)> = m.iter().map(|(k, s)| (k.clone(), *s)).collect();
        v.sort_by(|a, b| cmp_entry(a.1, &a.0, b.1, &b.0));
        v
    }

    fn check(z: &ZSet, model: &HashMap<Vec<u8>, f64>) {
        assert_eq!(z.len(), model.len());
        let want = model_order(model);
        let got: Vec<(Vec<u8>, f64)> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.0, w.0);
            assert!(g.1 == w.1);
        }
        for (r, (m, s)) in want.iter().enumerate() {
            assert_eq!(z.rank(m).map(|x| x.0), Some(r));
            assert!(z.score(m) == Some(*s));
        }
        // Score-only partitions: at every score present, just above and below it, and at the
        // infinities, as the model counts them.
        let mut cuts: Vec<f64> = want.iter().flat_map(|(_, s)| [*s, s - 0.25, s + 0.25]).collect();
        cuts.extend([f64::NEG_INFINITY, f64::INFINITY]);
        for t in cuts {
            let below = want.iter().filter(|(_, s)| *s < t).count();
            assert_eq!(z.count_below(t, false), below, "score < {t}");
            assert_eq!(z.partition_point(|s, _| s < t), below, "score < {t}");
            let at_most = want.iter().filter(|(_, s)| *s <= t).count();
            assert_eq!(z.count_below(t, true), at_most, "score <= {t}");
        }
        for (ci, c) in z.chunks.iter().enumerate() {
            assert_eq!(c.first_floor, f32_floor(decode_entry(&c.buf, 0).0), "chunk {ci}'s first score");
        }
        if let Some(ix) = &z.index {
            assert_eq!(ix.live(), z.len());
            // The rank tree matches the chunk counts.
            assert_eq!(ix.ranks.t.len(), z.chunks.len());
            let mut before = 0;
            for (ci, c) in z.chunks.iter().enumerate() {
                assert_eq!(ix.ranks.prefix(ci), before, "chunk {ci}");
                for within in [0, c.n as usize - 1] {
                    assert_eq!(ix.ranks.find(before + within), (ci, within));
                }
                before += c.n as usize;
            }
            assert_eq!(ix.ranks.prefix(z.chunks.len()), z.len());
        }
        let mut by_rank = Vec::new();
        let every: Vec<usize> = (0..z.len()).flat_map(|r| [r, r]).collect();
        z.for_ranks(&every, |m, _| by_rank.push(m.to_vec()));
        let twice: Vec<Vec<u8>> = want.iter().flat_map(|(m, _)| [m.clone(), m.clone()]).collect();
        assert_eq!(by_rank, twice);
        let rev = z.range_vec(0, z.len(), true);
        let mut fwd = z.range_vec(0, z.len(), false);
        fwd.reverse();
        assert_eq!(rev.len(), fwd.len());
        for c in z.chunks.iter() {
            assert!(c.n > 0);
            assert_eq!(c.offsets().len(), c.n as usize);
        }
    }

    #[test]
    fn entry_encoding_round_trips() {
        for s in [
            0.0,
            -0.0,
            1.0,
            -1.0,
            500.0,
            1e20,
            0.1,
            f64::INFINITY,
            f64::NEG_INFINITY,
            9007199254740991.0,
            -9007199254740991.0,
            1.5e-7,
        ] {
            let mut b = Vec::new();
            encode_entry(&mut b, s, b"member");
            assert_eq!(b.len(), encoded_len(s, b"member"));
            let (d, m, next) = decode_entry(&b, 0);
            assert_eq!(d.to_bits(), s.to_bits(), "{s}");
            assert_eq!(m, b"member");
            assert_eq!(next, b.len());
        }
        let long = vec![b'x'; 300];
        let mut b = Vec::new();
        encode_entry(&mut b, 2.5, &long);
        assert_eq!(b.len(), encoded_len(2.5, &long));
        assert_eq!(decode_entry(&b, 0).1, &long[..]);
    }

    #[test]
    fn small_form_turns_negative_zero_into_zero() {
        let mut z = ZSet::new();
        z.insert(b"a", -0.0);
        assert_eq!(z.score(b"a").map(f64::to_bits), Some(0.0f64.to_bits()));
        assert_eq!(z.encoding(), "listpack");
        let mut big = ZSet::new();
        big.insert(&[b'x'; 65], 1.0);
        assert_eq!(big.encoding(), "skiplist");
        big.insert(b"a", -0.0);
        assert_eq!(big.score(b"a").map(f64::to_bits), Some((-0.0f64).to_bits()));
        // Replicas keep exact bits in the small form too; a pre-indexed set keeps them always.
        let mut exact = ZSet::new();
        exact.insert_exact(b"a", -0.0);
        assert_eq!(exact.score(b"a").map(f64::to_bits), Some((-0.0f64).to_bits()));
        let mut pre = ZSet::new_indexed();
        assert_eq!(pre.encoding(), "skiplist");
        pre.insert(b"a", -0.0);
        assert_eq!(pre.score(b"a").map(f64::to_bits), Some((-0.0f64).to_bits()));
        // 0 == -0: no change.
        assert_eq!(big.insert(b"a", 0.0).map(f64::to_bits), Some((-0.0f64).to_bits()));
        assert_eq!(big.score(b"a").map(f64::to_bits), Some((-0.0f64).to_bits()));
    }

    #[test]
    fn grows_to_indexed_form_and_stays_ordered() {
        let mut z = ZSet::new();
        let mut model = HashMap::new();
        for k in 0..5000u32 {
            let m = format!("m{:06}", (k * 7919) % 5000).into_bytes();
            let s = ((k * 31) % 97) as f64;
            z.insert(&m, s);
            model.insert(m, s);
            if k == 127 {
                assert_eq!(z.encoding(), "listpack");
            }
        }
        assert_eq!(z.encoding(), "skiplist");
        check(&z, &model);
        for k in (0..5000u32).step_by(3) {
            let m = format!("m{k:06}").into_bytes();
            assert_eq!(z.remove(&m), model.remove(&m));
        }
        check(&z, &model);
    }

    #[test]
    fn partition_point_and_ranges() {
        let mut z = ZSet::new();
        for k in 0..1000 {
            z.insert(format!("m{k:06}").as_bytes(), k as f64);
        }
        assert_eq!(z.partition_point(|s, _| s < 500.0), 500);
        assert_eq!(z.partition_point(|s, _| s <= 500.0), 501);
        assert_eq!(z.partition_point(|_, _| false), 0);
        assert_eq!(z.partition_point(|_, _| true), 1000);
        let mut picked = Vec::new();
        z.for_ranks(&[0, 0, 5, 500, 999], |_, s| picked.push(s));
        assert_eq!(picked, vec![0.0, 0.0, 5.0, 500.0, 999.0]);
        let mut back = Vec::new();
        z.walk_back(12, |_, s| {
            back.push(s);
            back.len() < 3
        });
        assert_eq!(back, vec![12.0, 11.0, 10.0]);
        let mut all = 0;
        z.walk_back(999, |_, _| {
            all += 1;
            true
        });
        assert_eq!(all, 1000);
        let r = z.range_vec(10, 13, true);
        assert_eq!(r.iter().map(|x| x.1).collect::<Vec<_>>(), vec![12.0, 11.0, 10.0]);
        assert_eq!(z.get_by_rank(999).map(|x| x.1), Some(999.0));
        // Ascending loads keep chunks full.
        let per = z.mem_usage() as f64 / 1000.0;
        assert!(per < 38.0, "{per} bytes per element");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(u8, i8),
        AddF(u8, f64),
        Rem(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (any::<u8>(), any::<i8>()).prop_map(|(m, s)| Op::Add(m, s)),
            1 => (any::<u8>(), prop_oneof![Just(f64::INFINITY), Just(f64::NEG_INFINITY), Just(-0.0), -1e3f64..1e3,
                // Integral scores of every width the integer form takes (1 to 7 bytes).
                (0u32..53, any::<bool>()).prop_map(|(b, neg)| { let i = (1i64 << b) + b as i64; (if neg { -i } else { i }) as f64 })])
                .prop_map(|(m, s)| Op::AddF(m, s)),
            3 => any::<u8>().prop_map(Op::Rem),
        ]
    }

    fn member(m: u8) -> Vec<u8> {
        // Some long members push the set into the indexed form early.
        if m % 50 == 7 {
            vec![b'L'; 70 + m as usize]
        } else {
            format!("m{m}").into_bytes()
        }
    }

    proptest! {
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec(op(), 0..600)) {
            let mut z = ZSet::new();
            let mut model: HashMap<Vec<u8>, f64> = HashMap::new();
            for o in ops {
                match o {
                    Op::Add(m, s) => {
                        let m = member(m);
                        let old = z.insert(&m, s as f64);
                        let mo = model.get(&m).copied();
                        prop_assert_eq!(old.is_some(), mo.is_some());
                        if mo.is_none_or(|o| o != s as f64) { model.insert(m, s as f64); }
                    }
                    Op::AddF(m, s) => {
                        let m = member(m);
                        let mo = model.get(&m).copied();
                        z.insert(&m, s);
                        // Scores compare numerically in check(), so -0 vs 0 normalization is moot.
                        if mo.is_none_or(|o| o != s) { model.insert(m, s); }
                    }
                    Op::Rem(m) => {
                        let m = member(m);
                        prop_assert_eq!(z.remove(&m), model.remove(&m));
                    }
                }
            }
            check(&z, &model);
        }
    }

    proptest! {
        /// A set built in one pass from ordered entries is the one inserting them one by one
        /// builds: the same entries and scores to the bit (-0 kept or stored as 0 alike), the
        /// same form, and it behaves as well under later changes; entries out of order are
        /// refused.
        #[test]
        fn from_sorted_equals_inserting_one_by_one(
            raw in proptest::collection::vec((any::<u8>(), -20i32..20, any::<bool>()), 0..400),
            indexed in any::<bool>(),
            later in proptest::collection::vec(op(), 0..200),
        ) {
            let mut by_member: HashMap<Vec<u8>, f64> = HashMap::new();
            for (m, s, neg_zero) in raw {
                let s = if s == 0 && neg_zero { -0.0 } else { s as f64 / 2.0 };
                by_member.insert(member(m), s);
            }
            let items = model_order(&by_member);
            let (mut built, stored) = ZSet::from_sorted(&items, indexed).expect("ordered");
            let mut one = if indexed { ZSet::new_indexed() } else { ZSet::new() };
            for (m, s) in &items {
                one.insert(m, *s);
            }
            let bits = |z: &ZSet| z.iter().map(|(m, s)| (m.to_vec(), s.to_bits())).collect::<Vec<_>>();
            prop_assert_eq!(bits(&built), bits(&one));
            prop_assert_eq!(stored.iter().map(|s| s.to_bits()).collect::<Vec<_>>(),
                items.iter().map(|(m, _)| one.score(m).unwrap().to_bits()).collect::<Vec<_>>());
            prop_assert_eq!(built.encoding(), one.encoding());
            check(&built, &by_member);
            // It goes on like any other set: later adds, moves and removals.
            let mut model = by_member;
            for o in later {
                match o {
                    Op::Add(m, s) => {
                        let m = member(m);
                        built.insert(&m, s as f64);
                        if model.get(&m).is_none_or(|o| *o != s as f64) { model.insert(m, s as f64); }
                    }
                    Op::AddF(m, s) => {
                        let m = member(m);
                        built.insert(&m, s);
                        if model.get(&m).is_none_or(|o| *o != s) { model.insert(m, s); }
                    }
                    Op::Rem(m) => {
                        let m = member(m);
                        prop_assert_eq!(built.remove(&m), model.remove(&m));
                    }
                }
            }
            check(&built, &model);
            // Out of order: refused.
            if items.len() >= 2 {
                let mut swapped = items.clone();
                swapped.swap(0, 1);
                prop_assert!(ZSet::from_sorted(&swapped, indexed).is_none());
            }
        }
    }

    /// Many inserts, moves and removals over a few thousand members: drives the index through
    /// several incremental migrations (with tombstones in the old table) and chunk splits and
    /// merges, checking against a model along the way.
    #[test]
    fn random_churn_matches_model() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(42);
        let mut z = ZSet::new();
        let mut model: HashMap<Vec<u8>, f64> = HashMap::new();
        for step in 0..60_000 {
            let m = format!("k{}", rng.gen_range(0..4000)).into_bytes();
            // Bias towards growth first, then towards shrinking.
            let grow = if step < 30_000 { 0.7 } else { 0.3 };
            if rng.gen_bool(grow) {
                let s = rng.gen_range(-50..50) as f64 / 4.0;
                z.insert(&m, s);
                if model.get(&m).is_none_or(|o| *o != s) {
                    model.insert(m, s);
                }
            } else {
                assert_eq!(z.remove(&m), model.remove(&m));
            }
            if step % 5000 == 4999 {
                check(&z, &model);
            }
        }
        check(&z, &model);
    }

    #[derive(Debug, Clone)]
    enum TreeOp {
        /// Chunk (picked by the number) gains or loses an entry.
        Count(u16, bool),
        /// A chunk of this many entries is inserted at the picked place.
        Insert(u16, u8),
        /// The picked chunk is removed.
        Remove(u16),
    }

    proptest! {
        /// The rank tree against plain prefix sums, through in-place count changes and
        /// structural changes anywhere (both resync strategies: re-appending the tail and the
        /// linear rebuild).
        #[test]
        fn rank_tree_matches_prefix_sums(
            start in proptest::collection::vec(1u32..200, 0..300),
            ops in proptest::collection::vec(prop_oneof![
                3 => (any::<u16>(), any::<bool>()).prop_map(|(c, up)| TreeOp::Count(c, up)),
                1 => (any::<u16>(), 1u8..200).prop_map(|(c, n)| TreeOp::Insert(c, n)),
                1 => any::<u16>().prop_map(TreeOp::Remove),
            ], 0..200),
        ) {
            let mut chunks: Vec<Chunk> = start.iter().map(|&n| Chunk { buf: Vec::new(), n, first_floor: 0.0 }).collect();
            let mut tree = RankTree::default();
            tree.resync(&chunks, 0);
            for op in ops {
                match op {
                    TreeOp::Count(c, up) if !chunks.is_empty() => {
                        let ci = c as usize % chunks.len();
                        if up {
                            chunks[ci].n += 1;
                            tree.add(ci, 1);
                        } else if chunks[ci].n > 1 {
                            chunks[ci].n -= 1;
                            tree.add(ci, -1);
                        }
                    }
                    TreeOp::Insert(c, n) => {
                        let ci = c as usize % (chunks.len() + 1);
                        chunks.insert(ci, Chunk { buf: Vec::new(), n: n as u32, first_floor: 0.0 });
                        tree.resync(&chunks, ci);
                    }
                    TreeOp::Remove(c) if !chunks.is_empty() => {
                        let ci = c as usize % chunks.len();
                        chunks.remove(ci);
                        tree.resync(&chunks, ci);
                    }
                    _ => {}
                }
                let mut before = 0usize;
                for (ci, c) in chunks.iter().enumerate() {
                    prop_assert_eq!(tree.prefix(ci), before);
                    prop_assert_eq!(tree.find(before), (ci, 0));
                    prop_assert_eq!(tree.find(before + c.n as usize - 1), (ci, c.n as usize - 1));
                    before += c.n as usize;
                }
                prop_assert_eq!(tree.prefix(chunks.len()), before);
            }
        }
    }

    /// Rank lookups on a set of many chunks, filled and emptied in scattered order.
    #[test]
    fn ranks_of_a_big_set() {
        let mut z = ZSet::new();
        let mut model = HashMap::new();
        let n = 40_000u64;
        for k in 0..n {
            let j = (k * 7919) % n;
            let m = format!("m{j:06}").into_bytes();
            let s = (j.wrapping_mul(2_654_435_761) % 1009) as f64;
            z.insert(&m, s);
            model.insert(m, s);
        }
        assert!(z.chunks.len() > 300, "{} chunks", z.chunks.len());
        check(&z, &model);
        for k in (0..n).filter(|k| k % 5 != 0) {
            let m = format!("m{k:06}").into_bytes();
            assert_eq!(z.remove(&m), model.remove(&m));
        }
        check(&z, &model);
    }

    #[derive(Debug, Clone)]
    enum ScanOp {
        /// One SCAN step with this COUNT.
        Step(u8),
        /// Gives an existing member (picked by this number) a new score.
        Move(u16, i8),
        /// Adds a new member.
        Add(i8),
        /// Removes an existing member (picked by this number).
        Rem(u16),
    }

    fn scan_op() -> impl Strategy<Value = ScanOp> {
        prop_oneof![
            3 => (1u8..20).prop_map(ScanOp::Step),
            3 => (any::<u16>(), any::<i8>()).prop_map(|(m, s)| ScanOp::Move(m, s)),
            2 => any::<i8>().prop_map(ScanOp::Add),
            1 => any::<u16>().prop_map(ScanOp::Rem),
        ]
    }

    proptest! {
        /// SCAN steps interleaved with score changes (up and down across the order), inserts
        /// (which grow and migrate the index) and removals: every member present for the whole
        /// iteration is returned, and no member twice.
        #[test]
        fn scan_returns_every_member_present_throughout(
            initial in 129usize..700,
            score_span in prop_oneof![Just(1i32), Just(4), Just(1000)],
            ops in proptest::collection::vec(scan_op(), 0..400),
        ) {
            let mut z = ZSet::new();
            let mut members: Vec<Vec<u8>> = Vec::new();
            for k in 0..initial {
                let m = format!("m{k}").into_bytes();
                z.insert(&m, (k as i32 % score_span) as f64);
                members.push(m);
            }
            prop_assert_eq!(z.encoding(), "skiplist");
            let mut throughout: std::collections::HashSet<Vec<u8>> = members.iter().cloned().collect();
            let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
            let mut cursor = 0u64;
            let mut started = false;
            let mut next_new = initial;
            let step = |z: &ZSet, cursor: &mut u64, count: usize, seen: &mut HashMap<Vec<u8>, usize>| {
                *cursor = z.scan(*cursor, count, |m, s| {
                    assert!(z.score(m) == Some(s), "scan reports the current score");
                    *seen.entry(m.to_vec()).or_default() += 1;
                });
            };
            for op in ops {
                match op {
                    ScanOp::Step(n) => {
                        if started && cursor == 0 {
                            continue; // the iteration is over; the changes below don't matter
                        }
                        started = true;
                        step(&z, &mut cursor, n as usize, &mut seen);
                    }
                    ScanOp::Move(i, s) => {
                        if members.is_empty() { continue; }
                        let m = members[i as usize % members.len()].clone();
                        z.insert(&m, (s as i32 % score_span) as f64);
                    }
                    ScanOp::Add(s) => {
                        let m = format!("m{next_new}").into_bytes();
                        next_new += 1;
                        z.insert(&m, (s as i32 % score_span) as f64);
                        members.push(m);
                    }
                    ScanOp::Rem(i) => {
                        if members.is_empty() { continue; }
                        let m = members.swap_remove(i as usize % members.len());
                        prop_assert!(z.remove(&m).is_some());
                        throughout.remove(&m);
                    }
                }
            }
            // Finish the iteration without further changes.
            let mut calls = 0;
            while !(started && cursor == 0) {
                started = true;
                step(&z, &mut cursor, 7, &mut seen);
                calls += 1;
                prop_assert!(calls < 100_000, "scan does not terminate");
            }
            for m in &throughout {
                prop_assert!(seen.contains_key(m), "{} missed", String::from_utf8_lossy(m));
            }
            for (m, n) in &seen {
                prop_assert_eq!(*n, 1, "{} returned {} times", String::from_utf8_lossy(m), n);
            }
        }
    }

    /// The old score cursor missed a member moved below it; the hash cursor cannot.
    #[test]
    fn scan_finds_members_moved_behind_the_cursor() {
        let mut z = ZSet::new();
        for k in 0..1000 {
            z.insert(format!("m{k:04}").as_bytes(), k as f64);
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut steps = 0;
        loop {
            cursor = z.scan(cursor, 10, |m, _| {
                seen.insert(m.to_vec());
            });
            steps += 1;
            // Move every member not yet seen to the lowest score, and the rest to the top.
            for k in 0..1000 {
                let m = format!("m{k:04}").into_bytes();
                let s = if seen.contains(&m) { 5000.0 + k as f64 } else { -(k as f64) };
                z.insert(&m, s);
            }
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 1000);
        assert!(steps > 20, "COUNT 10 took {steps} steps");
    }

    /// A set whose members all share one score still scans in few steps with bounded work.
    #[test]
    fn scan_of_one_long_equal_score_run() {
        let mut z = ZSet::new();
        for k in 0..5000 {
            z.insert(format!("m{k}").as_bytes(), 0.0);
        }
        let (mut cursor, mut steps, mut total) = (0, 0, 0);
        loop {
            cursor = z.scan(cursor, 10, |_, _| total += 1);
            steps += 1;
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(total, 5000);
        // Each step decodes the whole run, so it must return a good share of it.
        assert!(steps <= 4, "{steps} steps");
    }

    #[test]
    fn members_bigger_than_a_chunk() {
        let mut z = ZSet::new();
        let mut model = HashMap::new();
        for k in 0..40u32 {
            let m = vec![b'a' + (k % 26) as u8; 900 + (k as usize * 37) % 1500];
            let m = [format!("{k:02}").into_bytes(), m].concat();
            let s = ((k * 7) % 5) as f64;
            z.insert(&m, s);
            model.insert(m, s);
        }
        check(&z, &model);
        let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
        for m in keys.iter().step_by(2) {
            assert_eq!(z.remove(m), model.remove(m));
        }
        check(&z, &model);
    }
}
