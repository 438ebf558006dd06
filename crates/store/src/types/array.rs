//! Sparse array: u64 index (0..=2^64-2) -> byte string, plus the hidden insert cursor that
//! ARINSERT/ARRING/ARSEEK move.
//!
//! Layout: a `BTreeMap` from the index of a chunk's first element to the [`Chunk`]. A chunk is
//! one buffer of back-to-back `(delta, value)` records, ordered by index:
//! - `delta` is a LEB128 varint: the distance from the previous record's index, 0 for the
//!   chunk's first record (whose index is the map key);
//! - `value` uses the packed entry format of lists ([`super::list::entry`]): canonical integers
//!   as integers, other strings length-prefixed.
//!
//! Memory and work are proportional to the elements that exist, never to the index span: an
//! element at index 10^18 costs the same as one at index 1. A point operation is a map lookup
//! (O(log chunks)) plus a scan of one chunk of at most [`CHUNK_MAX`] bytes.
//!
//! Invariants: no chunk is empty; chunks do not overlap and are ordered by their keys; a chunk
//! holds more than [`CHUNK_MAX`] bytes only when it has a single record; `count` is the number
//! of records; `last` is the highest index when `count > 0`.

use super::list::entry::{self, Elem};
use super::packed::OneOrVec;
use crate::alloc::size_class;
use crate::Plain;
use std::collections::BTreeMap;

/// Target upper bound of a chunk's bytes: small enough that a point lookup scans little.
pub const CHUNK_MAX: usize = 1024;

/// The cursor value meaning "unset" (the next ARINSERT writes at 0).
pub const CURSOR_UNSET: u64 = u64::MAX;

fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn put_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(buf: &[u8]) -> (u64, usize) {
    let (mut v, mut shift, mut i) = (0u64, 0u32, 0usize);
    loop {
        let b = buf[i];
        v |= ((b & 0x7F) as u64) << shift;
        i += 1;
        if b & 0x80 == 0 {
            return (v, i);
        }
        shift += 7;
    }
}

/// One record's position inside a chunk.
#[derive(Clone, Copy, Debug)]
struct Rec {
    idx: u64,
    /// Start of the delta varint.
    off: usize,
    /// Start of the value entry.
    voff: usize,
    /// One past the value entry.
    end: usize,
}

#[derive(Clone, Debug, Default)]
struct Chunk {
    /// Capacity kept at a jemalloc size class (see [`reserve`]).
    buf: Vec<u8>,
    count: u32,
}

/// Grows `buf` to hold `need` bytes, to exactly a size class.
fn reserve(buf: &mut Vec<u8>, need: usize) {
    if buf.capacity() < need {
        buf.reserve_exact(size_class(need) - buf.len());
    }
}

/// Gives memory back when the buffer is less than half used.
fn shrink(buf: &mut Vec<u8>) {
    let want = size_class(buf.len());
    if buf.capacity() > 2 * want.max(16) {
        buf.shrink_to(want);
    }
}

struct Recs<'a> {
    buf: &'a [u8],
    pos: usize,
    idx: u64,
}

impl Iterator for Recs<'_> {
    type Item = Rec;
    fn next(&mut self) -> Option<Rec> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let off = self.pos;
        let (d, n) = get_varint(&self.buf[off..]);
        let voff = off + n;
        let end = voff + entry::size(&self.buf[voff..]);
        self.idx += d;
        self.pos = end;
        Some(Rec { idx: self.idx, off, voff, end })
    }
}

impl Chunk {
    fn recs(&self, base: u64) -> Recs<'_> {
        Recs { buf: &self.buf, pos: 0, idx: base }
    }
    fn value(&self, r: &Rec) -> Elem<'_> {
        entry::decode(&self.buf[r.voff..]).0
    }
    /// Builds a chunk from `(index, encoded value)` records; returns its key too.
    fn build(recs: &[(u64, &[u8])]) -> (u64, Chunk) {
        let base = recs[0].0;
        let mut need = 0;
        let mut prev = base;
        for (i, v) in recs {
            need += varint_len(i - prev) + v.len();
            prev = *i;
        }
        let mut buf = Vec::new();
        reserve(&mut buf, need);
        let mut prev = base;
        for (i, v) in recs {
            put_varint(i - prev, &mut buf);
            buf.extend_from_slice(v);
            prev = *i;
        }
        (base, Chunk { buf, count: recs.len() as u32 })
    }
    /// Decoded records as `(index, encoded value bytes)`.
    fn records(&self, base: u64) -> Vec<(u64, &[u8])> {
        self.recs(base).map(|r| (r.idx, &self.buf[r.voff..r.end])).collect()
    }
}

/// The chunk map: index of a chunk's first element -> chunk. Most arrays have a handful of
/// chunks, for which a `BTreeMap` leaf (~512 bytes) would dwarf the data, so up to
/// [`SMALL_CHUNKS`] chunks live in a sorted vector (the first one inline, in the array's own
/// header, as most arrays have a single chunk); past that the map moves
/// (once, for good) to a boxed `BTreeMap` so that big arrays keep O(log n) chunk updates.
/// The API mirrors the `BTreeMap` methods the array uses.
#[derive(Clone, Debug)]
enum ChunkMap {
    /// Sorted by key, keys distinct.
    Small(OneOrVec<(u64, Chunk)>),
    // Boxed so that the rarely used tree variant does not widen every array's header.
    #[allow(clippy::box_collection)]
    Big(Box<BTreeMap<u64, Chunk>>),
}

/// Chunks a [`ChunkMap::Small`] holds before turning into a tree.
const SMALL_CHUNKS: usize = 8;

enum ChunkIter<'a> {
    Small(std::slice::Iter<'a, (u64, Chunk)>),
    Big(std::collections::btree_map::Range<'a, u64, Chunk>),
}

impl<'a> Iterator for ChunkIter<'a> {
    type Item = (&'a u64, &'a Chunk);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            ChunkIter::Small(it) => it.next().map(|(k, c)| (k, c)),
            ChunkIter::Big(it) => it.next(),
        }
    }
}

impl DoubleEndedIterator for ChunkIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            ChunkIter::Small(it) => it.next_back().map(|(k, c)| (k, c)),
            ChunkIter::Big(it) => it.next_back(),
        }
    }
}

impl ChunkMap {
    fn new() -> Self {
        ChunkMap::Small(OneOrVec::default())
    }
    fn len(&self) -> usize {
        match self {
            ChunkMap::Small(v) => v.len(),
            ChunkMap::Big(m) => m.len(),
        }
    }
    fn range(&self, r: impl std::ops::RangeBounds<u64>) -> ChunkIter<'_> {
        use std::ops::Bound::*;
        match self {
            ChunkMap::Small(v) => {
                let start = match r.start_bound() {
                    Included(&lo) => v.partition_point(|e| e.0 < lo),
                    Excluded(&lo) => v.partition_point(|e| e.0 <= lo),
                    Unbounded => 0,
                };
                let end = match r.end_bound() {
                    Included(&hi) => v.partition_point(|e| e.0 <= hi),
                    Excluded(&hi) => v.partition_point(|e| e.0 < hi),
                    Unbounded => v.len(),
                };
                ChunkIter::Small(v[start..end.max(start)].iter())
            }
            ChunkMap::Big(m) => ChunkIter::Big(m.range(r)),
        }
    }
    fn iter(&self) -> ChunkIter<'_> {
        self.range(..)
    }
    fn values(&self) -> impl Iterator<Item = &Chunk> + '_ {
        self.iter().map(|(_, c)| c)
    }
    fn get(&self, k: &u64) -> Option<&Chunk> {
        match self {
            ChunkMap::Small(v) => v.binary_search_by_key(k, |e| e.0).ok().map(|i| &v[i].1),
            ChunkMap::Big(m) => m.get(k),
        }
    }
    fn get_mut(&mut self, k: &u64) -> Option<&mut Chunk> {
        match self {
            ChunkMap::Small(v) => v.binary_search_by_key(k, |e| e.0).ok().map(|i| &mut v[i].1),
            ChunkMap::Big(m) => m.get_mut(k),
        }
    }
    fn remove(&mut self, k: &u64) -> Option<Chunk> {
        match self {
            ChunkMap::Small(v) => {
                let i = v.binary_search_by_key(k, |e| e.0).ok()?;
                Some(v.remove(i).1)
            }
            ChunkMap::Big(m) => m.remove(k),
        }
    }
    fn insert(&mut self, k: u64, c: Chunk) {
        match self {
            ChunkMap::Small(v) => match v.binary_search_by_key(&k, |e| e.0) {
                Ok(i) => v[i].1 = c,
                Err(_) if v.len() >= SMALL_CHUNKS => {
                    let mut m: BTreeMap<u64, Chunk> = std::mem::take(v).into_vec().into_iter().collect();
                    m.insert(k, c);
                    *self = ChunkMap::Big(Box::new(m));
                }
                Err(i) => v.insert(i, (k, c)),
            },
            ChunkMap::Big(m) => {
                m.insert(k, c);
            }
        }
    }
    /// Heap bytes of the map itself (not of the chunk buffers). Rust's BTreeMap nodes hold
    /// up to 11 entries (u64 key + 32-byte chunk: a 512-byte leaf, 640 with child pointers)
    /// and run about 3/4 full; the node count is estimated from that.
    fn mem_usage(&self) -> usize {
        match self {
            ChunkMap::Small(v) => v.heap_bytes(),
            ChunkMap::Big(m) => {
                size_class(std::mem::size_of::<BTreeMap<u64, Chunk>>()) + m.len().div_ceil(8) * 512
            }
        }
    }
}

/// A sparse array of byte strings indexed by u64.
#[derive(Clone, Debug)]
pub struct SparseArray {
    chunks: ChunkMap,
    count: u64,
    /// Highest index present (meaningless when `count == 0`).
    last: u64,
    /// Index of the last ARINSERT/ARRING write, or [`CURSOR_UNSET`].
    cursor: u64,
}

impl Default for SparseArray {
    fn default() -> Self {
        SparseArray { chunks: ChunkMap::new(), count: 0, last: 0, cursor: CURSOR_UNSET }
    }
}

impl SparseArray {
    pub fn new() -> Self {
        Self::default()
    }
    /// Number of elements that exist (ARCOUNT).
    pub fn count(&self) -> usize {
        self.count as usize
    }
    /// Highest index + 1, 0 when empty (ARLEN). Fits: the highest index is at most 2^64-2.
    pub fn len(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.last + 1
        }
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// The insert cursor: the index of the last ARINSERT/ARRING write, or [`CURSOR_UNSET`].
    pub fn cursor(&self) -> u64 {
        self.cursor
    }
    pub fn set_cursor(&mut self, c: u64) {
        self.cursor = c;
    }

    /// The chunk that holds `idx` if it exists: the last chunk whose key is <= idx.
    fn chunk_for(&self, idx: u64) -> Option<(u64, &Chunk)> {
        self.chunks.range(..=idx).next_back().map(|(k, c)| (*k, c))
    }

    pub fn get(&self, idx: u64) -> Option<Elem<'_>> {
        let (base, c) = self.chunk_for(idx)?;
        for r in c.recs(base) {
            if r.idx == idx {
                return Some(c.value(&r));
            }
            if r.idx > idx {
                break;
            }
        }
        None
    }

    /// Sets `idx` (<= 2^64-2) to `v`. Returns true if the slot was empty.
    pub fn set(&mut self, idx: u64, v: &[u8]) -> bool {
        debug_assert!(idx != u64::MAX);
        let mut enc = Vec::with_capacity(v.len() + 5);
        entry::encode(v, &mut enc);
        // The chunk that owns idx, or the first chunk when idx precedes everything.
        let base = match self.chunks.range(..=idx).next_back() {
            Some((k, _)) => *k,
            None => match self.chunks.iter().next().map(|(k, _)| *k) {
                Some(k) => k,
                None => {
                    let (k, c) = Chunk::build(&[(idx, &enc)]);
                    self.chunks.insert(k, c);
                    self.count = 1;
                    self.last = idx;
                    return true;
                }
            },
        };
        let c = self.chunks.get_mut(&base).expect("chunk exists");
        let mut is_new = true;
        let mut new_base = base;
        if idx < base {
            // New first record; the old first one (delta 0, one byte) gets base - idx.
            let mut b = Vec::new();
            reserve(&mut b, c.buf.len() + enc.len() + 1 + varint_len(base - idx));
            b.push(0);
            b.extend_from_slice(&enc);
            put_varint(base - idx, &mut b);
            b.extend_from_slice(&c.buf[1..]);
            c.buf = b;
            c.count += 1;
            new_base = idx;
        } else {
            // The first record at or past idx, and the index of the record before it.
            let mut prev = base;
            let mut hit: Option<Rec> = None;
            for r in c.recs(base) {
                if r.idx >= idx {
                    hit = Some(r);
                    break;
                }
                prev = r.idx;
            }
            match hit {
                Some(r) if r.idx == idx => {
                    let need = c.buf.len() - (r.end - r.voff) + enc.len();
                    reserve(&mut c.buf, need);
                    c.buf.splice(r.voff..r.end, enc.iter().copied());
                    is_new = false;
                }
                Some(r) => {
                    // Insert before r, whose delta now counts from idx.
                    let mut ins = Vec::with_capacity(enc.len() + 20);
                    put_varint(idx - prev, &mut ins);
                    ins.extend_from_slice(&enc);
                    put_varint(r.idx - idx, &mut ins);
                    let need = c.buf.len() - (r.voff - r.off) + ins.len();
                    reserve(&mut c.buf, need);
                    c.buf.splice(r.off..r.voff, ins);
                    c.count += 1;
                }
                None => {
                    let need = c.buf.len() + varint_len(idx - prev) + enc.len();
                    reserve(&mut c.buf, need);
                    put_varint(idx - prev, &mut c.buf);
                    c.buf.extend_from_slice(&enc);
                    c.count += 1;
                }
            }
        }
        if is_new {
            self.count += 1;
            if self.count == 1 || idx > self.last {
                self.last = idx;
            }
        }
        let c = self.chunks.get(&base).expect("chunk exists");
        if new_base != base || (c.buf.len() > CHUNK_MAX && c.count > 1) {
            let c = self.chunks.remove(&base).expect("chunk exists");
            self.reinsert(new_base, c);
        }
        is_new
    }

    /// Puts a (re-keyed or oversized) chunk back, splitting it in halves of at most
    /// `CHUNK_MAX / 2` bytes when it is too big.
    fn reinsert(&mut self, base: u64, c: Chunk) {
        if c.buf.len() <= CHUNK_MAX || c.count == 1 {
            self.chunks.insert(base, c);
            return;
        }
        let recs = c.records(base);
        let mut start = 0;
        let mut bytes = 0;
        for (i, (_, v)) in recs.iter().enumerate() {
            if i > start && bytes + v.len() + 2 > CHUNK_MAX / 2 {
                let (k, piece) = Chunk::build(&recs[start..i]);
                self.chunks.insert(k, piece);
                start = i;
                bytes = 0;
            }
            bytes += v.len() + 2;
        }
        let (k, piece) = Chunk::build(&recs[start..]);
        self.chunks.insert(k, piece);
    }

    /// Recomputes `last` from the last chunk.
    fn fix_last(&mut self) {
        if let Some((k, c)) = self.chunks.iter().next_back() {
            self.last = c.recs(*k).last().map(|r| r.idx).unwrap_or(*k);
        }
    }

    /// Removes `idx`. Returns true if it existed.
    pub fn remove(&mut self, idx: u64) -> bool {
        let Some((base, _)) = self.chunk_for(idx) else {
            return false;
        };
        let c = self.chunks.get_mut(&base).expect("chunk exists");
        let Some(r) = c.recs(base).take_while(|r| r.idx <= idx).find(|r| r.idx == idx) else {
            return false;
        };
        let prev_delta = get_varint(&c.buf[r.off..]).0;
        c.count -= 1;
        self.count -= 1;
        if c.count == 0 {
            self.chunks.remove(&base);
        } else if r.end < c.buf.len() {
            // The next record absorbs the removed one's delta; if the removed record was the
            // first, the next one becomes first (delta 0) and the chunk is re-keyed.
            let (d, n) = get_varint(&c.buf[r.end..]);
            let mut rep = Vec::with_capacity(10);
            let new_base = if r.off == 0 { base + d } else { base };
            put_varint(if r.off == 0 { 0 } else { prev_delta + d }, &mut rep);
            c.buf.splice(r.off..r.end + n, rep);
            shrink(&mut c.buf);
            if new_base != base {
                let c = self.chunks.remove(&base).expect("chunk exists");
                self.chunks.insert(new_base, c);
            }
        } else {
            c.buf.truncate(r.off);
            shrink(&mut c.buf);
        }
        if self.count > 0 && idx == self.last {
            self.fix_last();
        }
        true
    }

    /// Removes every element in `lo..=hi`; returns how many there were. Work is proportional
    /// to the chunks that overlap the range, not to its width.
    pub fn remove_range(&mut self, lo: u64, hi: u64) -> u64 {
        let mut keys: Vec<u64> = Vec::new();
        if let Some((k, _)) = self.chunks.range(..lo).next_back() {
            keys.push(*k);
        }
        keys.extend(self.chunks.range(lo..=hi).map(|(k, _)| *k));
        let mut removed = 0u64;
        for k in keys {
            let c = self.chunks.remove(&k).expect("chunk exists");
            let recs = c.records(k);
            let kept: Vec<(u64, &[u8])> = recs.iter().copied().filter(|(i, _)| *i < lo || *i > hi).collect();
            removed += (recs.len() - kept.len()) as u64;
            if kept.len() == recs.len() {
                self.chunks.insert(k, c);
                continue;
            }
            // Records below lo and above hi stay in separate chunks only if both exist; one
            // rebuilt chunk is fine (it is no larger than the original).
            if !kept.is_empty() {
                let (nk, nc) = Chunk::build(&kept);
                self.chunks.insert(nk, nc);
            }
        }
        self.count -= removed;
        if removed > 0 && self.count > 0 && self.last >= lo && self.last <= hi {
            self.fix_last();
        }
        removed
    }

    /// Calls `f(index, value)` for the existing elements in `lo..=hi`, ascending, or
    /// descending when `rev`, until `f` returns false.
    pub fn for_each_in(&self, lo: u64, hi: u64, rev: bool, mut f: impl FnMut(u64, Elem<'_>) -> bool) {
        if lo > hi || self.count == 0 {
            return;
        }
        let first = self.chunks.range(..=lo).next_back().map(|(k, _)| *k).unwrap_or(lo);
        let range = self.chunks.range(first..=hi);
        if !rev {
            for (k, c) in range {
                for r in c.recs(*k) {
                    if r.idx > hi {
                        return;
                    }
                    if r.idx >= lo && !f(r.idx, c.value(&r)) {
                        return;
                    }
                }
            }
        } else {
            let mut recs: Vec<Rec> = Vec::new();
            for (k, c) in range.rev() {
                recs.clear();
                recs.extend(c.recs(*k));
                for r in recs.iter().rev() {
                    if r.idx < lo {
                        return;
                    }
                    if r.idx <= hi && !f(r.idx, c.value(r)) {
                        return;
                    }
                }
            }
        }
    }

    /// Removes every element and resets the cursor.
    pub fn clear(&mut self) {
        *self = SparseArray::new();
    }

    pub fn to_plain(&self) -> Plain {
        let mut v = Vec::with_capacity(self.count as usize);
        self.for_each_in(0, u64::MAX, false, |i, e| {
            v.push((i, e.to_vec()));
            true
        });
        Plain::Array(v, self.cursor)
    }

    /// Heap bytes: the boxed struct, the chunk map and the chunk buffers.
    pub fn mem_usage(&self) -> usize {
        size_class(std::mem::size_of::<SparseArray>())
            + self.chunks.mem_usage()
            + self.chunks.values().map(|c| size_class(c.buf.capacity())).sum::<usize>()
    }

    /// `OBJECT ENCODING` as Redis 8.8 names its array representation.
    pub fn encoding(&self) -> &'static str {
        "sliced-array"
    }

    /// The raw form's pieces, per chunk: the varint distance from the previous chunk's last
    /// index (the first chunk: its absolute first index), and the chunk's bytes after its
    /// first record's delta (a one-byte 0).
    fn raw_pieces(&self, mut f: impl FnMut(u64, &[u8])) {
        let mut prev: Option<u64> = None;
        for (base, c) in self.chunks.iter() {
            let d = match prev {
                None => *base,
                Some(p) => base - p,
            };
            let first = get_varint(&c.buf).1;
            f(d, &c.buf[first..]);
            prev = Some(c.recs(*base).last().map_or(*base, |r| r.idx));
        }
    }

    /// Length in bytes of the raw form (see [`SparseArray::for_each_raw_run`]).
    pub fn raw_len(&self) -> usize {
        let mut n = 0;
        self.raw_pieces(|d, rest| {
            let seg = varint_len(d) + rest.len();
            n += varint_len(seg as u64) + seg;
        });
        n
    }

    /// Calls `f` with consecutive pieces of the raw form: one segment (`varint(len)`, then
    /// `len` bytes) per chunk, holding its elements as `varint(delta) entry` in ascending index
    /// order, delta being the distance from the previous element's index (for the very first
    /// element, its index) and entry in the list entry format.
    pub fn for_each_raw_run(&self, mut f: impl FnMut(&[u8])) {
        let mut v = Vec::with_capacity(20);
        self.raw_pieces(|d, rest| {
            v.clear();
            let mut dv = Vec::with_capacity(10);
            put_varint(d, &mut dv);
            put_varint((dv.len() + rest.len()) as u64, &mut v);
            v.extend_from_slice(&dv);
            f(&v);
            f(rest);
        });
    }

    /// Builds an array of `count` elements and insert cursor `cursor` from its raw form,
    /// validating it fully: deltas positive after the first element, indexes at most 2^64-2,
    /// entries well formed (see [`entry::checked_size`]), exactly `count` elements. Each
    /// segment becomes a chunk (cut further only past [`CHUNK_MAX`], which a saved chunk never
    /// is unless it holds one record), each buffer sized to its size class: never more memory
    /// than the array that was saved.
    pub fn from_raw(raw: &[u8], count: u64, cursor: u64) -> Result<SparseArray, super::RawError> {
        use super::RawError;
        let mut map: Vec<(u64, Chunk)> = Vec::new();
        let mut cur: Vec<(u64, &[u8])> = Vec::new();
        let mut n = 0u64;
        let mut last: Option<u64> = None;
        super::for_each_segment(raw, |seg| {
            let (mut bytes, mut off) = (0usize, 0usize);
            while off < seg.len() {
                let (d, p) = super::read_varint_checked(seg, off).ok_or(RawError("bad array delta"))?;
                let idx = match last {
                    None => d,
                    Some(_) if d == 0 => return Err(RawError("array indexes not ascending")),
                    Some(l) => l.checked_add(d).ok_or(RawError("array index overflows"))?,
                };
                if idx == u64::MAX {
                    return Err(RawError("array index out of range"));
                }
                let size = entry::checked_size(&seg[p..]).ok_or(RawError("bad array entry"))?;
                let rec = varint_len(idx - last.unwrap_or(idx)) + size;
                if !cur.is_empty() && bytes + rec > CHUNK_MAX {
                    map.push(Chunk::build(&cur));
                    cur.clear();
                    bytes = 0;
                }
                // A chunk's first record has delta 0: one byte.
                bytes += if cur.is_empty() { 1 + size } else { rec };
                cur.push((idx, &seg[p..p + size]));
                last = Some(idx);
                n += 1;
                off = p + size;
            }
            map.push(Chunk::build(&cur));
            cur.clear();
            Ok(())
        })?;
        if n != count {
            return Err(RawError("element count differs from the stated count"));
        }
        let Some(last) = last else { return Err(RawError("empty collection")) };
        let chunks = if map.len() <= SMALL_CHUNKS {
            ChunkMap::Small(OneOrVec::from_vec(map))
        } else {
            ChunkMap::Big(Box::new(map.into_iter().collect()))
        };
        Ok(SparseArray { chunks, count: n, last, cursor })
    }

    /// Number of chunks (ARINFO's `slices`).
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One chunk lives inline in the array's header: no `BTreeMap` leaf (~512 bytes) and no
    /// vector allocation for the few-chunk case.
    #[test]
    fn tiny_array_memory_is_bounded() {
        let mut a = SparseArray::new();
        a.set(5, b"v1234");
        assert!(a.mem_usage() <= 72, "one element: {} bytes", a.mem_usage());
        for j in 1..8 {
            a.set(5 + j, b"v1234");
        }
        assert_eq!(a.count(), 8);
        assert!(a.mem_usage() <= 128, "eight elements: {} bytes", a.mem_usage());
    }

    /// The small chunk map turns into a tree past `SMALL_CHUNKS` chunks and stays correct.
    #[test]
    fn many_chunks_switch_to_the_tree() {
        let mut a = SparseArray::new();
        let mut m = BTreeMap::new();
        let v = vec![b'x'; 500];
        for k in 0..200u64 {
            let idx = (k * 7919) % 1000 * 1000;
            a.set(idx, &v);
            m.insert(idx, v.clone());
        }
        assert!(a.chunk_count() > SMALL_CHUNKS);
        assert!(matches!(a.chunks, ChunkMap::Big(_)));
        check(&a, &m);
        assert_eq!(a.remove_range(100_000, 500_000), m.range(100_000..=500_000).count() as u64);
        m.retain(|k, _| !(100_000..=500_000).contains(k));
        check(&a, &m);
    }

    fn check(a: &SparseArray, m: &BTreeMap<u64, Vec<u8>>) {
        let want: Vec<(u64, Vec<u8>)> = m.iter().map(|(k, v)| (*k, v.clone())).collect();
        assert_eq!(a.to_plain(), Plain::Array(want, a.cursor()));
        assert_eq!(a.count(), m.len());
        assert_eq!(a.len(), m.keys().next_back().map(|k| k + 1).unwrap_or(0));
        let mut prev_end: Option<u64> = None;
        for (k, c) in a.chunks.iter() {
            assert!(c.count > 0);
            assert_eq!(c.recs(*k).count(), c.count as usize);
            assert_eq!(get_varint(&c.buf).0, 0, "first record has delta 0");
            assert!(c.buf.len() <= CHUNK_MAX || c.count == 1);
            let last = c.recs(*k).last().unwrap().idx;
            if let Some(p) = prev_end {
                assert!(*k > p, "chunks are ordered and disjoint");
            }
            prev_end = Some(last);
        }
    }

    #[test]
    fn extreme_indexes() {
        let mut a = SparseArray::new();
        let top = u64::MAX - 1;
        assert!(a.set(top, b"t"));
        assert!(a.set(0, b"z"));
        assert!(a.set(1 << 63, b"m"));
        assert!(!a.set(top, b"T"));
        assert_eq!(a.len(), u64::MAX);
        assert_eq!(a.get(top).map(|e| e.to_vec()), Some(b"T".to_vec()));
        assert_eq!(a.get(top - 1), None);
        let mut seen = Vec::new();
        a.for_each_in(1, top, true, |i, _| {
            seen.push(i);
            true
        });
        assert_eq!(seen, vec![top, 1 << 63]);
        assert_eq!(a.remove_range(1, top), 2);
        assert_eq!(a.len(), 1);
        assert!(a.remove(0));
        assert!(a.is_empty());
    }

    #[test]
    fn dataset_shape_is_compact() {
        let mut a = SparseArray::new();
        for k in 0..1000u64 {
            a.set(k * 1000, format!("v{k:06}").as_bytes());
        }
        let per = a.mem_usage() as f64 / 1000.0;
        assert!(per < 13.0, "{per} bytes per element");
        assert_eq!(a.get(999_000).map(|e| e.to_vec()), Some(b"v000999".to_vec()));
        assert_eq!(a.len(), 999_001);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Set(u64, Vec<u8>),
        Del(u64),
        DelRange(u64, u64),
    }

    fn index() -> impl Strategy<Value = u64> {
        prop_oneof![
            0u64..64,
            0u64..5000,
            Just(u64::MAX - 1),
            (u64::MAX - 100)..(u64::MAX - 1),
            any::<u64>().prop_map(|i| i % (u64::MAX - 1))
        ]
    }

    fn val() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            (0i64..100000).prop_map(|i| i.to_string().into_bytes()),
            "[a-c]{0,4}".prop_map(|s| s.into_bytes()),
            (0usize..700).prop_map(|n| vec![b'q'; n]),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn matches_btreemap(ops in proptest::collection::vec(prop_oneof![
            6 => (index(), val()).prop_map(|(i, v)| Op::Set(i, v)),
            2 => index().prop_map(Op::Del),
            1 => (index(), index()).prop_map(|(a, b)| Op::DelRange(a.min(b), a.max(b))),
        ], 1..300)) {
            let mut a = SparseArray::new();
            let mut m: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
            for o in ops {
                match o {
                    Op::Set(i, v) => prop_assert_eq!(a.set(i, &v), m.insert(i, v).is_none()),
                    Op::Del(i) => prop_assert_eq!(a.remove(i), m.remove(&i).is_some()),
                    Op::DelRange(lo, hi) => {
                        let gone: Vec<u64> = m.range(lo..=hi).map(|(k, _)| *k).collect();
                        for k in &gone { m.remove(k); }
                        prop_assert_eq!(a.remove_range(lo, hi), gone.len() as u64);
                    }
                }
                check(&a, &m);
            }
            for (k, v) in &m {
                prop_assert_eq!(a.get(*k).map(|e| e.to_vec()), Some(v.clone()));
            }
            let (lo, hi) = (10u64, 3000u64);
            let mut got = Vec::new();
            a.for_each_in(lo, hi, true, |i, _| { got.push(i); true });
            let want: Vec<u64> = m.range(lo..=hi).rev().map(|(k, _)| *k).collect();
            prop_assert_eq!(got, want);
        }
    }
}
