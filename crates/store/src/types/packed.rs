//! `PackedTable`: the compact record table under hashes (`PAIRS = true`: field -> value) and
//! sets (`PAIRS = false`: members only).
//!
//! Layout:
//! - Records live back to back in byte chunks. A record is `varint(klen << 1 | dead) key`,
//!   followed for pairs by `varint(vlen) value`. Bit 0 of a record's first byte is therefore
//!   its "dead" flag, so deleting a record in place is a one-bit write.
//! - Small mode (no index, `OBJECT ENCODING` "listpack"): at most [`small_max_entries`] records
//!   of at most [`small_max_bytes(PAIRS)`] per part, all in chunk 0, no dead records, in insertion order
//!   (a field keeps its place when its value changes, as in a Redis listpack). Lookups scan.
//! - Indexed mode ("hashtable"): an open-addressing (linear probing) table of u32 record
//!   addresses, `(chunk << 16 | offset) + 2` (0 and 1 mark empty and deleted slots). Chunks
//!   stop taking records once they pass [`CHUNK_TARGET`] bytes, so every record starts below
//!   offset 65536 and no append ever copies more than one chunk. (Limit: 65,535 chunks, about
//!   2 GiB of records per collection.) Deleted records stay in place, flagged dead; a chunk that becomes
//!   more than half dead is compacted on its own (bounded work) and its moved records repointed.
//!
//! Invariants of the index:
//! 1. Every live record has exactly one slot, in `cur` or (while a resize runs) in `old`.
//! 2. A slot's home is the top `bits` bits of the key's 64-bit hash, and a record sits in the
//!    run of non-empty slots that starts at its home (deletes leave tombstones, never empties).
//! 3. Resizes are incremental: each write moves a few `old` slots into `cur`, so growth never
//!    pauses for a whole-table rehash.
//!
//! Scan cursors are positions in hash space (the top 32 bits of the hash), not slot numbers:
//! one step returns every record whose hash falls in `[cursor, next)`, reading both tables.
//! Because an element's hash never changes, an element present for the whole iteration is
//! returned exactly once, whatever resizes and compactions happen in between.

use crate::alloc::size_class;
use rand::Rng;
use std::sync::OnceLock;

/// Small mode holds at most this many records: `hash-max-listpack-entries` for hashes (pairs)
/// and `set-max-listpack-entries` for sets (see [`crate::limits`]).
#[inline]
pub(crate) fn small_max_entries(pairs: bool) -> usize {
    crate::limits::get(if pairs {
        &crate::limits::HASH_MAX_LISTPACK_ENTRIES
    } else {
        &crate::limits::SET_MAX_LISTPACK_ENTRIES
    })
}
/// ... and no key or value longer than this (`hash-max-listpack-value`,
/// `set-max-listpack-value`).
#[inline]
pub(crate) fn small_max_bytes(pairs: bool) -> usize {
    crate::limits::get(if pairs {
        &crate::limits::HASH_MAX_LISTPACK_VALUE
    } else {
        &crate::limits::SET_MAX_LISTPACK_VALUE
    })
}
/// Indexed mode starts a new chunk once the last one holds this many bytes.
const CHUNK_TARGET: usize = 32 * 1024;
/// Record offsets inside a chunk must fit in 16 bits.
const MAX_OFFSET: usize = 0xFFFF;
/// Chunk numbers must fit in 16 bits (the +2 address offset stays below u32::MAX).
const MAX_CHUNKS: usize = 0xFFFF;
/// Slot sentinels. Zero means empty so that a new table comes from zeroed (lazily faulted)
/// memory instead of a multi-megabyte fill; real addresses are stored offset by 2.
const EMPTY: u32 = 0;
const TOMB: u32 = 1;
const MIN_BITS: u32 = 4;

fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    // A per-process random seed keeps crafted keys from piling onto one probe run.
    *SEED.get_or_init(|| rand::random::<u64>() | 1)
}

#[inline]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = (a as u128) * (b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// A fast 64-bit hash of a short byte string (multiply-fold over 8-byte words).
#[inline]
pub(crate) fn hash_bytes(key: &[u8]) -> u64 {
    const K1: u64 = 0x9E37_79B9_7F4A_7C15;
    const K2: u64 = 0xC2B2_AE3D_27D4_EB4F;
    const K3: u64 = 0x1656_67B1_9E37_79F9;
    let mut h = seed() ^ (key.len() as u64).wrapping_mul(K1);
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        let v = u64::from_le_bytes(w.try_into().expect("8-byte chunk"));
        h = fold_mul(h ^ v, K2);
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut tail = [0u8; 8];
        tail[..rest.len()].copy_from_slice(rest);
        h = fold_mul(h ^ u64::from_le_bytes(tail), K3);
    }
    fold_mul(h ^ (h >> 29), K1)
}

#[inline]
fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

#[inline]
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
pub(crate) fn get_varint(buf: &[u8], mut at: usize) -> (u64, usize) {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = buf[at];
        at += 1;
        v |= ((b & 0x7F) as u64) << shift;
        if b < 0x80 {
            return (v, at);
        }
        shift += 7;
    }
}

/// One decoded record: byte ranges inside its chunk.
struct Rec {
    key: std::ops::Range<usize>,
    val: std::ops::Range<usize>,
    dead: bool,
    end: usize,
}

#[inline]
fn decode<const PAIRS: bool>(buf: &[u8], at: usize) -> Rec {
    let (head, p) = get_varint(buf, at);
    let key = p..p + (head >> 1) as usize;
    let val = if PAIRS {
        let (vlen, q) = get_varint(buf, key.end);
        q..q + vlen as usize
    } else {
        key.end..key.end
    };
    Rec { end: val.end, key, val, dead: head & 1 == 1 }
}

fn record_size<const PAIRS: bool>(key: &[u8], val: &[u8]) -> usize {
    let k = varint_len((key.len() as u64) << 1) + key.len();
    if PAIRS {
        k + varint_len(val.len() as u64) + val.len()
    } else {
        k
    }
}

fn encode<const PAIRS: bool>(out: &mut Vec<u8>, key: &[u8], val: &[u8]) {
    put_varint(out, (key.len() as u64) << 1);
    out.extend_from_slice(key);
    if PAIRS {
        put_varint(out, val.len() as u64);
        out.extend_from_slice(val);
    }
}

/// Makes room for `extra` more bytes, growing by about a quarter (not doubling) so that a
/// chunk's slack stays small; rounded to the allocator's size class, which is free.
fn reserve(buf: &mut Vec<u8>, extra: usize) {
    let need = buf.len() + extra;
    if need > buf.capacity() {
        let target = size_class(need.max(buf.capacity() + buf.capacity() / 4));
        buf.reserve_exact(target - buf.len());
    }
}

#[inline]
fn addr(chunk: usize, off: usize) -> u32 {
    debug_assert!(chunk < MAX_CHUNKS && off <= MAX_OFFSET);
    (((chunk as u32) << 16) | off as u32) + 2
}

#[inline]
fn split(a: u32) -> (usize, usize) {
    let a = a - 2;
    ((a >> 16) as usize, (a & 0xFFFF) as usize)
}

/// A vector that keeps a single element inline. Small collections have exactly one chunk; a
/// `Vec` would add a heap allocation (32 bytes or more) just to point at it, and an inline
/// `Vec` would widen the collection's header. Derefs to a slice, so readers see `&[T]`.
/// Layout: `Many` is boxed so that the enum is no larger than `T` when `T` has a niche (a
/// `Vec<u8>` chunk: 24 bytes), which keeps small headers in the 32-byte size class.
#[derive(Clone, Debug, Default)]
pub(crate) enum OneOrVec<T> {
    #[default]
    Empty,
    One(T),
    /// Any number of elements (once two were held; it never converts back).
    // The box is the point: it keeps this variant one word wide (see above).
    #[allow(clippy::box_collection)]
    Many(Box<Vec<T>>),
}

impl<T> std::ops::Deref for OneOrVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            OneOrVec::Empty => &[],
            OneOrVec::One(x) => std::slice::from_ref(x),
            OneOrVec::Many(v) => v,
        }
    }
}

impl<T> std::ops::DerefMut for OneOrVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            OneOrVec::Empty => &mut [],
            OneOrVec::One(x) => std::slice::from_mut(x),
            OneOrVec::Many(v) => v,
        }
    }
}

impl<T> OneOrVec<T> {
    pub(crate) fn insert(&mut self, at: usize, x: T) {
        match std::mem::take(self) {
            OneOrVec::Empty => {
                assert!(at == 0, "insert index out of bounds");
                *self = OneOrVec::One(x);
            }
            OneOrVec::One(y) => {
                let mut v = Vec::with_capacity(2);
                v.push(y);
                v.insert(at, x);
                *self = OneOrVec::Many(Box::new(v));
            }
            OneOrVec::Many(mut v) => {
                v.insert(at, x);
                *self = OneOrVec::Many(v);
            }
        }
    }
    pub(crate) fn push(&mut self, x: T) {
        let n = self.len();
        self.insert(n, x);
    }
    pub(crate) fn remove(&mut self, at: usize) -> T {
        match std::mem::take(self) {
            OneOrVec::Empty => panic!("remove from an empty vector"),
            OneOrVec::One(x) => {
                assert!(at == 0, "remove index out of bounds");
                x
            }
            OneOrVec::Many(mut v) => {
                let x = v.remove(at);
                *self = OneOrVec::Many(v);
                x
            }
        }
    }
    pub(crate) fn into_vec(self) -> Vec<T> {
        match self {
            OneOrVec::Empty => Vec::new(),
            OneOrVec::One(x) => vec![x],
            OneOrVec::Many(v) => *v,
        }
    }
    /// Wraps `v` without spare capacity: one element stays inline, several keep an exactly
    /// sized vector (loaders build collections at their final size).
    pub(crate) fn from_vec(mut v: Vec<T>) -> Self {
        match v.len() {
            0 => OneOrVec::Empty,
            1 => OneOrVec::One(v.pop().expect("one element")),
            _ => {
                v.shrink_to_fit();
                OneOrVec::Many(Box::new(v))
            }
        }
    }
    /// Bytes of the heap parts (0 while inline), rounded to size classes.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            OneOrVec::Empty | OneOrVec::One(_) => 0,
            OneOrVec::Many(v) => {
                size_class(std::mem::size_of::<Vec<T>>())
                    + size_class(v.capacity() * std::mem::size_of::<T>())
            }
        }
    }
}

/// One run of records. Just the buffer (24 bytes, so that an inline chunk keeps the table
/// header at 32 bytes); indexed mode keeps each chunk's dead-byte count in [`Index::dead`].
#[derive(Clone, Debug, Default)]
struct Chunk {
    buf: Vec<u8>,
}

#[inline]
fn key_at(chunks: &[Chunk], a: u32) -> &[u8] {
    let (c, off) = split(a);
    let buf = &chunks[c].buf;
    let (head, p) = get_varint(buf, off);
    &buf[p..p + (head >> 1) as usize]
}

/// Records gathered one by one for a table built in one go ([`PackedTable::from_records`]):
/// a big hash or set read from an RDB payload. Inserting them one at a time would grow and
/// rehash the index step by step, probing ever longer runs; built whole, the index is sized
/// once.
#[derive(Debug, Default)]
pub struct Records<const PAIRS: bool> {
    buf: Vec<u8>,
    count: usize,
}

impl<const PAIRS: bool> Records<PAIRS> {
    /// Room for about `bytes` of keys and values.
    pub fn with_capacity(bytes: usize) -> Self {
        Records { buf: Vec::with_capacity(bytes), count: 0 }
    }

    /// Adds a record (`val` is ignored for a set's).
    pub fn push(&mut self, key: &[u8], val: &[u8]) {
        encode::<PAIRS>(&mut self.buf, key, val);
        self.count += 1;
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// One open-addressing table of record addresses.
#[derive(Clone, Debug)]
struct Table {
    slots: Box<[u32]>,
    bits: u32,
    /// Non-empty slots (live + tombstones): bounds probe lengths.
    used: usize,
    live: usize,
}

impl Table {
    fn new(bits: u32) -> Self {
        Table { slots: vec![EMPTY; 1 << bits].into_boxed_slice(), bits, used: 0, live: 0 }
    }
    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }
    #[inline]
    fn home(&self, h: u64) -> usize {
        (h >> (64 - self.bits)) as usize
    }
    /// The slot holding `key`, if any.
    fn find(&self, chunks: &[Chunk], key: &[u8], h: u64) -> Option<usize> {
        let mut pos = self.home(h);
        loop {
            let s = self.slots[pos];
            if s == EMPTY {
                return None;
            }
            if s != TOMB && key_at(chunks, s) == key {
                return Some(pos);
            }
            pos = (pos + 1) & self.mask();
        }
    }
    /// Places a record known to be absent from this table.
    fn insert(&mut self, h: u64, a: u32) {
        let mut pos = self.home(h);
        loop {
            let s = self.slots[pos];
            if s == EMPTY || s == TOMB {
                if s == EMPTY {
                    self.used += 1;
                }
                self.slots[pos] = a;
                self.live += 1;
                return;
            }
            pos = (pos + 1) & self.mask();
        }
    }
    /// Replaces address `from` (a record with hash `h`) by `to`; false if `from` is not here.
    fn repoint(&mut self, h: u64, from: u32, to: u32) -> bool {
        let mut pos = self.home(h);
        loop {
            let s = self.slots[pos];
            if s == EMPTY {
                return false;
            }
            if s == from {
                self.slots[pos] = to;
                return true;
            }
            pos = (pos + 1) & self.mask();
        }
    }
    /// Calls `f` for every live record whose 32-bit hash position is in `[lo, hi)`.
    fn scan_range(&self, chunks: &[Chunk], lo: u64, hi: u64, f: &mut dyn FnMut(u32)) {
        let shift = 32 - self.bits;
        let start = (lo >> shift) as usize;
        let span = ((hi - 1) >> shift) as usize - start + 1;
        // Records homed in [start, start + span) lie in the runs that begin there, so read the
        // span and then on to the first empty slot (wrapping at the end).
        for step in 0..self.slots.len() {
            let s = self.slots[(start + step) & self.mask()];
            if step >= span && s == EMPTY {
                break;
            }
            if s > TOMB {
                let h32 = hash_bytes(key_at(chunks, s)) >> 32;
                if lo <= h32 && h32 < hi {
                    f(s);
                }
            }
        }
    }
}

#[derive(Clone, Debug)]
struct Index {
    cur: Table,
    /// The table being drained into `cur` by an incremental resize.
    old: Option<Table>,
    /// Slots of `old` below this position have been moved.
    moved: usize,
    /// Live records (indexed mode only; a small table counts its records by scanning).
    len: usize,
    /// Bytes of dead records per chunk; may be shorter than the chunk list (missing = 0).
    dead: Vec<u32>,
}

/// Table size (log2) for `live` records: load at most one half after a resize.
fn bits_for(live: usize) -> u32 {
    let want = (live * 2).max(1 << MIN_BITS);
    want.next_power_of_two().trailing_zeros()
}

#[derive(Clone, Debug, Default)]
pub(crate) struct PackedTable<const PAIRS: bool> {
    /// One inline chunk while small (no allocation besides its buffer). The header is two
    /// words: small tables are most tables, and a 32-byte header fits jemalloc's 32 class.
    chunks: OneOrVec<Chunk>,
    /// Out of line, and absent while there is nothing to keep there: the index once large,
    /// and (hashes only) the fields' deadlines ([`Aux`]).
    aux: Option<Box<Aux>>,
}

/// The index in `aux`, borrowing only that field (the chunks stay borrowable beside it).
fn idx_mut(aux: &mut Option<Box<Aux>>) -> Option<&mut Index> {
    aux.as_mut()?.index.as_mut()
}

/// What a table keeps out of line (one box, so that the header stays two words).
#[derive(Clone, Debug, Default)]
pub(crate) struct Aux {
    index: Option<Index>,
    /// A hash's field deadlines (unix ms); see `types::hash`. Never empty when Some.
    pub(crate) deadlines: Option<std::collections::HashMap<Box<[u8]>, i64>>,
}

/// Iterator over live records in storage order.
pub(crate) struct Iter<'a, const PAIRS: bool> {
    chunks: &'a [Chunk],
    chunk: usize,
    off: usize,
}

impl<'a, const PAIRS: bool> Iterator for Iter<'a, PAIRS> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let c = self.chunks.get(self.chunk)?;
            if self.off >= c.buf.len() {
                self.chunk += 1;
                self.off = 0;
                continue;
            }
            let r = decode::<PAIRS>(&c.buf, self.off);
            self.off = r.end;
            if !r.dead {
                return Some((&c.buf[r.key], &c.buf[r.val]));
            }
        }
    }
}

impl<const PAIRS: bool> PackedTable<PAIRS> {
    fn index_ref(&self) -> Option<&Index> {
        self.aux.as_ref()?.index.as_ref()
    }

    /// The out-of-line part, if there is one (a hash's deadlines live there).
    pub(crate) fn aux(&self) -> Option<&Aux> {
        self.aux.as_deref()
    }

    /// The out-of-line part, created empty if needed; `trim_aux` drops it again when empty.
    pub(crate) fn aux_mut(&mut self) -> &mut Aux {
        self.aux.get_or_insert_with(Default::default)
    }

    /// Drops the out-of-line part when it holds nothing (no index, no deadlines).
    pub(crate) fn trim_aux(&mut self) {
        if self.aux.as_ref().is_some_and(|a| a.index.is_none() && a.deadlines.is_none()) {
            self.aux = None;
        }
    }

    pub(crate) fn new() -> Self {
        PackedTable { chunks: OneOrVec::default(), aux: None }
    }

    pub(crate) fn len(&self) -> usize {
        match self.index_ref() {
            Some(idx) => idx.len,
            None => self.small_count(),
        }
    }

    /// Small mode: the number of records in chunk 0, counted (at most 512 short records, the
    /// same walk as a lookup; Redis's listpack also counts by walking past 65,535).
    fn small_count(&self) -> usize {
        let Some(c) = self.chunks.first() else { return 0 };
        let mut at = 0;
        let mut n = 0;
        while at < c.buf.len() {
            at = decode::<PAIRS>(&c.buf, at).end;
            n += 1;
        }
        n
    }

    pub(crate) fn is_indexed(&self) -> bool {
        self.index_ref().is_some()
    }

    pub(crate) fn iter(&self) -> Iter<'_, PAIRS> {
        Iter { chunks: &self.chunks, chunk: 0, off: 0 }
    }

    /// Small mode: `key`'s record in chunk 0. The returned `key` range starts at the record's
    /// first byte (so `key.start..end` is the whole record, `key.end..end` its value part).
    fn small_find(&self, key: &[u8]) -> Option<Rec> {
        let buf = &self.chunks.first()?.buf;
        let mut at = 0;
        while at < buf.len() {
            let r = decode::<PAIRS>(buf, at);
            if &buf[r.key.clone()] == key {
                return Some(Rec { key: at..r.key.end, ..r });
            }
            at = r.end;
        }
        None
    }

    /// Indexed mode: (in old table?, slot position) of `key`.
    fn slot_of(&self, key: &[u8], h: u64) -> Option<(bool, usize)> {
        let idx = self.index_ref()?;
        if let Some(pos) = idx.cur.find(&self.chunks, key, h) {
            return Some((false, pos));
        }
        let old = idx.old.as_ref()?;
        old.find(&self.chunks, key, h).map(|pos| (true, pos))
    }

    fn slot_value(&self, in_old: bool, pos: usize) -> u32 {
        let idx = self.index_ref().expect("indexed");
        if in_old {
            idx.old.as_ref().expect("old table").slots[pos]
        } else {
            idx.cur.slots[pos]
        }
    }

    fn value_at(&self, a: u32) -> &[u8] {
        let (c, off) = split(a);
        let buf = &self.chunks[c].buf;
        let r = decode::<PAIRS>(buf, off);
        &buf[r.val]
    }

    /// The value stored under `key` (an empty slice for sets).
    pub(crate) fn get(&self, key: &[u8]) -> Option<&[u8]> {
        if self.index_ref().is_none() {
            let r = self.small_find(key)?;
            return Some(&self.chunks[0].buf[r.val]);
        }
        let (in_old, pos) = self.slot_of(key, hash_bytes(key))?;
        Some(self.value_at(self.slot_value(in_old, pos)))
    }

    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` to `val`; returns true if `key` is new.
    pub(crate) fn insert(&mut self, key: &[u8], val: &[u8]) -> bool {
        if self.index_ref().is_none()
            && (key.len() > small_max_bytes(PAIRS) || val.len() > small_max_bytes(PAIRS))
        {
            self.build_index();
        }
        if self.index_ref().is_none() {
            if let Some(r) = self.small_find(key) {
                let buf = &mut self.chunks[0].buf;
                if r.val.len() == val.len() {
                    buf[r.val].copy_from_slice(val);
                } else {
                    // Keep the field's position: rewrite the value part in place.
                    let mut tail = Vec::with_capacity(val.len() + 10);
                    put_varint(&mut tail, val.len() as u64);
                    tail.extend_from_slice(val);
                    reserve(buf, tail.len());
                    buf.splice(r.key.end..r.end, tail);
                }
                return false;
            }
            if self.small_count() < small_max_entries(PAIRS) {
                self.append(key, val);
                return true;
            }
            self.build_index();
        }
        let h = hash_bytes(key);
        if let Some((in_old, pos)) = self.slot_of(key, h) {
            let a = self.slot_value(in_old, pos);
            let (c, off) = split(a);
            let r = decode::<PAIRS>(&self.chunks[c].buf, off);
            if r.val.len() == val.len() {
                self.chunks[c].buf[r.val].copy_from_slice(val);
            } else {
                let b = self.append(key, val);
                let idx = idx_mut(&mut self.aux).expect("indexed");
                if in_old {
                    idx.old.as_mut().expect("old table").slots[pos] = b;
                } else {
                    idx.cur.slots[pos] = b;
                }
                self.kill(a);
            }
            self.maintain();
            return false;
        }
        let a = self.append(key, val);
        let idx = idx_mut(&mut self.aux).expect("indexed");
        idx.cur.insert(h, a);
        idx.len += 1;
        self.maintain();
        true
    }

    /// Removes `key`; returns true if it was present.
    pub(crate) fn remove(&mut self, key: &[u8]) -> bool {
        if self.index_ref().is_none() {
            let Some(r) = self.small_find(key) else { return false };
            self.chunks[0].buf.drain(r.key.start..r.end);
            if self.chunks[0].buf.is_empty() {
                self.chunks = OneOrVec::default();
            }
            return true;
        }
        let h = hash_bytes(key);
        let Some((in_old, pos)) = self.slot_of(key, h) else { return false };
        let idx = idx_mut(&mut self.aux).expect("indexed");
        let t = if in_old { idx.old.as_mut().expect("old table") } else { &mut idx.cur };
        let a = t.slots[pos];
        t.slots[pos] = TOMB;
        t.live -= 1;
        idx.len -= 1;
        self.kill(a);
        self.maintain();
        true
    }

    /// Appends a record to the chunk that takes new records; returns its address.
    fn append(&mut self, key: &[u8], val: &[u8]) -> u32 {
        let need = record_size::<PAIRS>(key, val);
        let indexed = self.index_ref().is_some();
        let full = |c: &Chunk| indexed && c.buf.len() >= CHUNK_TARGET;
        if self.chunks.last().is_none_or(full) {
            assert!(self.chunks.len() < MAX_CHUNKS, "collection exceeds the packed table's 4 GiB limit");
            self.chunks.push(Chunk::default());
        }
        let ci = self.chunks.len() - 1;
        let buf = &mut self.chunks[ci].buf;
        let off = buf.len();
        reserve(buf, need);
        encode::<PAIRS>(buf, key, val);
        // Small mode addresses nothing (its one chunk may pass what 16 bits address; see
        // `build_index`); indexed chunks start a new one before 32 KiB, so `off` fits.
        if indexed {
            addr(ci, off)
        } else {
            EMPTY
        }
    }

    /// Flags the record at `a` dead and compacts its chunk once it is mostly dead.
    fn kill(&mut self, a: u32) {
        let (ci, off) = split(a);
        let c = &mut self.chunks[ci];
        let r = decode::<PAIRS>(&c.buf, off);
        c.buf[off] |= 1;
        let dead = &mut idx_mut(&mut self.aux).expect("indexed").dead;
        if dead.len() <= ci {
            dead.resize(ci + 1, 0);
        }
        // A chunk holds under 64 KiB of records plus one last record of at most 4 GiB.
        dead[ci] += (r.end - off) as u32;
        if dead[ci] as usize * 2 > c.buf.len() {
            self.compact(ci);
        }
    }

    /// Moves chunk `ci`'s live records to its front and repoints their slots. Work is bounded
    /// by the chunk size, and happens only after at least half the chunk died.
    fn compact(&mut self, ci: usize) {
        let is_last = ci + 1 == self.chunks.len();
        let idx = idx_mut(&mut self.aux).expect("indexed");
        let c = &mut self.chunks[ci];
        let (mut r, mut w) = (0, 0);
        while r < c.buf.len() {
            let rec = decode::<PAIRS>(&c.buf, r);
            if !rec.dead {
                if w != r {
                    let h = hash_bytes(&c.buf[rec.key.clone()]);
                    c.buf.copy_within(r..rec.end, w);
                    let (from, to) = (addr(ci, r), addr(ci, w));
                    let found = idx.cur.repoint(h, from, to)
                        || idx.old.as_mut().is_some_and(|o| o.repoint(h, from, to));
                    debug_assert!(found, "every live record has a slot");
                }
                w += rec.end - r;
            }
            r = rec.end;
        }
        c.buf.truncate(w);
        if let Some(d) = idx.dead.get_mut(ci) {
            *d = 0;
        }
        if w == 0 && !is_last {
            c.buf = Vec::new();
        } else {
            c.buf.shrink_to(size_class(w + w / 4));
        }
    }

    /// Switches from small mode to indexed mode (never back, as Redis never converts back).
    fn build_index(&mut self) {
        let len = self.small_count();
        let mut t = Table::new(bits_for(len.max(small_max_entries(PAIRS))));
        // The small chunk can outgrow what a 16-bit record offset addresses (512 pairs of
        // 64-byte fields and values make about 66 KiB): cut it into indexed-size chunks first.
        // Small mode holds no dead records, so every record moves.
        if self.chunks.first().is_some_and(|c| c.buf.len() > MAX_OFFSET) {
            let small = std::mem::take(&mut self.chunks).remove(0).buf;
            let mut at = 0;
            let mut cur = Vec::new();
            while at < small.len() {
                let end = decode::<PAIRS>(&small, at).end;
                if cur.len() >= CHUNK_TARGET {
                    self.chunks.push(Chunk { buf: std::mem::take(&mut cur) });
                }
                cur.extend_from_slice(&small[at..end]);
                at = end;
            }
            cur.shrink_to_fit();
            self.chunks.push(Chunk { buf: cur });
        }
        for (ci, c) in self.chunks.iter().enumerate() {
            let mut at = 0;
            while at < c.buf.len() {
                let r = decode::<PAIRS>(&c.buf, at);
                t.insert(hash_bytes(&c.buf[r.key]), addr(ci, at));
                at = r.end;
            }
        }
        self.aux.get_or_insert_with(Default::default).index =
            Some(Index { cur: t, old: None, moved: 0, len, dead: Vec::new() });
    }

    /// After each indexed write: advance a running resize, or start one when the table is
    /// too full (tombstones count) or too sparse.
    fn maintain(&mut self) {
        let chunks = &self.chunks;
        let idx = idx_mut(&mut self.aux).expect("indexed");
        if idx.old.is_some() {
            // The ratios below keep `cur` under 90% while `old` drains; should writes outpace
            // the drain anyway, rebuild at once rather than let probe runs close up.
            if idx.cur.used * 10 >= idx.cur.slots.len() * 9 {
                let live = idx.len;
                Self::rebuild(chunks, idx, live);
                return;
            }
            let old = idx.old.as_mut().expect("old table");
            // A shrink drains a table several times larger than `cur`: move proportionally more.
            let n = 16 * (old.slots.len() / idx.cur.slots.len()).max(1);
            let end = (idx.moved + n).min(old.slots.len());
            for pos in idx.moved..end {
                let a = old.slots[pos];
                if a > TOMB {
                    idx.cur.insert(hash_bytes(key_at(chunks, a)), a);
                    old.slots[pos] = TOMB;
                    old.live -= 1;
                }
            }
            idx.moved = end;
            if end == old.slots.len() {
                idx.old = None;
                idx.moved = 0;
            }
            return;
        }
        let size = idx.cur.slots.len();
        let too_full = idx.cur.used * 5 > size * 4;
        let too_sparse = size > 1 << MIN_BITS && idx.cur.live * 10 < size;
        if too_full || too_sparse {
            let fresh = Table::new(bits_for(idx.cur.live));
            idx.old = Some(std::mem::replace(&mut idx.cur, fresh));
            idx.moved = 0;
        }
    }

    /// Rebuilds the index in one go (a safety net; see `maintain`).
    fn rebuild(chunks: &[Chunk], idx: &mut Index, live: usize) {
        let mut t = Table::new(bits_for(live));
        for table in std::iter::once(&idx.cur).chain(idx.old.as_ref()) {
            for &a in table.slots.iter().filter(|&&a| a > TOMB) {
                t.insert(hash_bytes(key_at(chunks, a)), a);
            }
        }
        idx.cur = t;
        idx.old = None;
        idx.moved = 0;
    }

    /// A uniformly random record, or None if empty.
    pub(crate) fn random(&self, rng: &mut impl Rng) -> Option<(&[u8], &[u8])> {
        let len = self.len();
        if len == 0 {
            return None;
        }
        let Some(idx) = self.index_ref() else {
            return self.iter().nth(rng.gen_range(0..len));
        };
        // Tables stay at least a tenth full (and a resize's two tables together about an
        // eighth), so rejection sampling over all slots ends quickly and is uniform.
        let cur = idx.cur.slots.len();
        let total = cur + idx.old.as_ref().map_or(0, |o| o.slots.len());
        loop {
            let i = rng.gen_range(0..total);
            let a =
                if i < cur { idx.cur.slots[i] } else { idx.old.as_ref().expect("old table").slots[i - cur] };
            if a > TOMB {
                let (c, off) = split(a);
                let buf = &self.chunks[c].buf;
                let r = decode::<PAIRS>(buf, off);
                return Some((&buf[r.key], &buf[r.val]));
            }
        }
    }

    /// One SCAN step: calls `f` for records at `cursor` onwards (about `count` home slots'
    /// worth) and returns the next cursor, 0 when done. Small mode returns everything at once.
    pub(crate) fn scan<'a>(
        &'a self,
        cursor: u64,
        count: usize,
        mut f: impl FnMut(&'a [u8], &'a [u8]),
    ) -> u64 {
        let Some(idx) = self.index_ref() else {
            for (k, v) in self.iter() {
                f(k, v);
            }
            return 0;
        };
        if cursor >= 1 << 32 {
            return 0;
        }
        let shift = 32 - idx.cur.bits;
        let first = cursor >> shift;
        let end_slot = (first + count.max(1) as u64).min(idx.cur.slots.len() as u64);
        let hi = end_slot << shift;
        let chunks = &self.chunks;
        let mut emit = |a: u32| {
            let (c, off) = split(a);
            let buf = &chunks[c].buf;
            let r = decode::<PAIRS>(buf, off);
            f(&buf[r.key], &buf[r.val]);
        };
        if let Some(old) = idx.old.as_ref() {
            old.scan_range(chunks, cursor, hi, &mut emit);
        }
        idx.cur.scan_range(chunks, cursor, hi, &mut emit);
        if hi >= 1 << 32 {
            0
        } else {
            hi
        }
    }

    // -----------------------------------------------------------------------------------------
    // Raw form (snapshots): one segment (`varint(len)`, then `len` bytes) per non-empty chunk,
    // holding the chunk's live records in the record format above (dead bit clear), in
    // storage order. Keeping the chunk boundaries lets a loader rebuild chunks no bigger than
    // the saved ones.

    /// Live bytes of chunk `ci`: its bytes less the dead bytes the index counts (small tables
    /// hold no dead records).
    fn live_len(&self, ci: usize) -> usize {
        let dead = self.index_ref().and_then(|i| i.dead.get(ci)).map_or(0, |&d| d as usize);
        self.chunks[ci].buf.len() - dead
    }

    /// Length of the raw form.
    pub(crate) fn raw_len(&self) -> usize {
        (0..self.chunks.len())
            .map(|ci| self.live_len(ci))
            .filter(|&n| n > 0)
            .map(|n| super::varint_len(n as u64) + n)
            .sum()
    }

    /// Calls `f` with consecutive pieces of the raw form (`raw_len()` bytes in all): each
    /// segment's length, then its records straight from the chunk, cut around dead records.
    pub(crate) fn for_each_raw_run(&self, mut f: impl FnMut(&[u8])) {
        for (ci, c) in self.chunks.iter().enumerate() {
            let live = self.live_len(ci);
            if live == 0 {
                continue;
            }
            super::with_varint(live as u64, &mut f);
            if self.index_ref().is_none() {
                f(&c.buf);
                continue;
            }
            let (mut start, mut at) = (0, 0);
            while at < c.buf.len() {
                let r = decode::<PAIRS>(&c.buf, at);
                if r.dead {
                    if start < at {
                        f(&c.buf[start..at]);
                    }
                    start = r.end;
                }
                at = r.end;
            }
            if start < c.buf.len() {
                f(&c.buf[start..]);
            }
        }
    }

    /// Builds a table from its raw form, `count` records, checking everything a later
    /// operation relies on: each record lies within its segment, no dead flag, exactly
    /// `count` records, no key twice. The encoding is the one the store gives a fresh table
    /// with this content: small when it fits the small-mode limits (all segments joined into
    /// the one chunk), else indexed, each segment becoming a chunk (cut further only where
    /// `append` would have cut it, so every record starts below offset 65536) and the index
    /// at the smallest size `maintain` lets stand. Every buffer is sized exactly, so the
    /// result never holds more memory than the table that was saved.
    pub(crate) fn from_raw(raw: &[u8], count: usize) -> Result<Self, super::RawError> {
        let mut segments: Vec<&[u8]> = Vec::new();
        super::for_each_segment(raw, |seg| {
            segments.push(seg);
            Ok(())
        })?;
        Self::from_segments(&segments, count)
    }

    /// A table of the records gathered in `records` (RDB import and RESTORE of a big hash or
    /// set), built as [`Self::from_raw`] builds one; an error if a key repeats.
    pub(crate) fn from_records(records: &Records<PAIRS>) -> Result<Self, super::RawError> {
        Self::from_segments(&[&records.buf], records.count)
    }

    /// [`Self::from_raw`] from its segments: each a run of whole records.
    fn from_segments(segments: &[&[u8]], count: usize) -> Result<Self, super::RawError> {
        use super::RawError;
        let (mut n, mut longest, mut total) = (0usize, 0usize, 0usize);
        for &seg in segments {
            let mut at = 0usize;
            while at < seg.len() {
                let (head, p) = super::read_varint_checked(seg, at).ok_or(RawError("bad record header"))?;
                if head & 1 == 1 {
                    return Err(RawError("dead record"));
                }
                let klen = usize::try_from(head >> 1).map_err(|_| RawError("record too long"))?;
                let kend =
                    p.checked_add(klen).filter(|&e| e <= seg.len()).ok_or(RawError("record overruns"))?;
                let mut end = kend;
                let mut vlen = 0;
                if PAIRS {
                    let (v, q) = super::read_varint_checked(seg, kend).ok_or(RawError("bad value length"))?;
                    vlen = usize::try_from(v).map_err(|_| RawError("value too long"))?;
                    end =
                        q.checked_add(vlen).filter(|&e| e <= seg.len()).ok_or(RawError("value overruns"))?;
                }
                longest = longest.max(klen).max(vlen);
                n += 1;
                at = end;
            }
            total += seg.len();
        }
        if n != count {
            return Err(RawError("record count differs from the stated count"));
        }
        if n == 0 {
            return Err(RawError("empty collection"));
        }
        if n <= small_max_entries(PAIRS) && longest <= small_max_bytes(PAIRS) {
            let mut buf = Vec::with_capacity(total);
            for seg in segments {
                buf.extend_from_slice(seg);
            }
            let mut keys: Vec<&[u8]> = Vec::with_capacity(n);
            let mut at = 0;
            while at < buf.len() {
                let r = decode::<PAIRS>(&buf, at);
                keys.push(&buf[r.key]);
                at = r.end;
            }
            if !super::all_distinct(&mut keys) {
                return Err(RawError("duplicate element"));
            }
            drop(keys);
            return Ok(PackedTable { chunks: OneOrVec::One(Chunk { buf }), aux: None });
        }
        let mut chunks = Vec::with_capacity(segments.len());
        for &seg in segments {
            let mut at = 0;
            while at < seg.len() {
                let start = at;
                while at < seg.len() && at - start < CHUNK_TARGET {
                    at = decode::<PAIRS>(seg, at).end;
                }
                if chunks.len() >= MAX_CHUNKS {
                    return Err(RawError("collection exceeds the packed table's 4 GiB limit"));
                }
                let mut buf = Vec::with_capacity(at - start);
                buf.extend_from_slice(&seg[start..at]);
                chunks.push(Chunk { buf });
            }
        }
        // The smallest table `maintain` lets stand (at most 4/5 full): a table that grew by
        // inserts is at least this big, so the loaded one never takes more memory.
        let mut bits = MIN_BITS;
        while (1usize << bits) * 4 < n * 5 {
            bits += 1;
        }
        let mut t = Table::new(bits);
        // Each slot's hash (low 32 bits) beside it while the index is built: a record's key is
        // read only when its slot's hash matches, not for every slot its probe passes (a
        // cache miss apiece into the chunks, most of the build's time otherwise).
        let mut tags = vec![0u32; t.slots.len()];
        // The records' hashes first (one pass along the chunks), so that each record's home
        // slot can be prefetched a few records ahead: the slots are read at random, and one
        // cache miss after another would be most of the build.
        let mut records: Vec<(u64, u32)> = Vec::with_capacity(n);
        for (ci, c) in chunks.iter().enumerate() {
            let mut off = 0;
            while off < c.buf.len() {
                let r = decode::<PAIRS>(&c.buf, off);
                records.push((hash_bytes(&c.buf[r.key]), addr(ci, off)));
                off = r.end;
            }
        }
        const AHEAD: usize = 8;
        for i in 0..records.len() {
            if let Some(&(h, _)) = records.get(i + AHEAD) {
                let home = t.home(h);
                crate::alloc::prefetch_read(t.slots[home..].as_ptr().cast());
                crate::alloc::prefetch_read(tags[home..].as_ptr().cast());
            }
            let (h, a) = records[i];
            let mut pos = t.home(h);
            // A fresh table has no tombstones: the probe ends at the first empty slot.
            while t.slots[pos] != EMPTY {
                if tags[pos] == h as u32 && key_at(&chunks, t.slots[pos]) == key_at(&chunks, a) {
                    return Err(RawError("duplicate element"));
                }
                pos = (pos + 1) & t.mask();
            }
            t.slots[pos] = a;
            tags[pos] = h as u32;
            t.used += 1;
            t.live += 1;
        }
        let index = Index { cur: t, old: None, moved: 0, len: n, dead: Vec::new() };
        Ok(PackedTable {
            chunks: OneOrVec::from_vec(chunks),
            aux: Some(Box::new(Aux { index: Some(index), deadlines: None })),
        })
    }

    /// Heap bytes owned by this table (not counting the struct itself), by size class.
    pub(crate) fn mem_usage(&self) -> usize {
        let mut n = self.chunks.heap_bytes();
        n += self.chunks.iter().map(|c| size_class(c.buf.capacity())).sum::<usize>();
        if self.aux.is_some() {
            n += size_class(std::mem::size_of::<Aux>());
        }
        if let Some(idx) = self.index_ref() {
            n += size_class(idx.dead.capacity() * 4);
            for t in std::iter::once(&idx.cur).chain(idx.old.as_ref()) {
                n += size_class(t.slots.len() * 4);
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use std::collections::{BTreeMap, BTreeSet};

    fn check(t: &PackedTable<true>, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
        assert_eq!(t.len(), model.len());
        let got: BTreeMap<Vec<u8>, Vec<u8>> = t.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        assert_eq!(&got, model);
        for (k, v) in model {
            assert_eq!(t.get(k), Some(v.as_slice()));
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Set(u16, u8),
        Del(u16),
    }

    fn op(keys: u16) -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..keys, any::<u8>()).prop_map(|(k, v)| Op::Set(k, v)),
            2 => (0..keys).prop_map(Op::Del),
        ]
    }

    fn key(k: u16) -> Vec<u8> {
        format!("k{k}").into_bytes()
    }
    fn val(k: u16, v: u8) -> Vec<u8> {
        // Value lengths vary so updates take both the in-place and the append path.
        vec![b'a' + (v % 26); (v as usize * k as usize) % 80]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_a_btreemap(ops in proptest::collection::vec(op(3000), 1..4000)) {
            let mut t = PackedTable::<true>::new();
            let mut m = BTreeMap::new();
            for o in ops {
                match o {
                    Op::Set(k, v) => {
                        let new = t.insert(&key(k), &val(k, v));
                        prop_assert_eq!(new, m.insert(key(k), val(k, v)).is_none());
                    }
                    Op::Del(k) => prop_assert_eq!(t.remove(&key(k)), m.remove(&key(k)).is_some()),
                }
            }
            check(&t, &m);
        }

        #[test]
        fn small_tables_keep_insertion_order(ops in proptest::collection::vec(op(40), 1..200)) {
            let mut t = PackedTable::<true>::new();
            let mut order: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            for o in ops {
                let (k, v) = match o { Op::Set(k, v) => (k, Some(v)), Op::Del(k) => (k, None) };
                let (k, v) = (key(k), v.map(|v| vec![b'x'; v as usize % 60]));
                match v {
                    Some(v) => {
                        t.insert(&k, &v);
                        match order.iter_mut().find(|e| e.0 == k) { Some(e) => e.1 = v, None => order.push((k, v)) }
                    }
                    None => { t.remove(&k); order.retain(|e| e.0 != k); }
                }
            }
            prop_assert!(!t.is_indexed());
            let got: Vec<(Vec<u8>, Vec<u8>)> = t.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
            prop_assert_eq!(got, order);
        }

        /// A table built whole from records holds what inserting them one by one holds, in the
        /// same form (small and in insertion order, or indexed), and then behaves the same
        /// under more writes; a key given twice is refused.
        #[test]
        fn a_table_built_from_records_is_the_one_inserts_build(
            keys in proptest::collection::vec(0u16..3000, 1..1500),
            long in proptest::bool::weighted(0.1),
            more in proptest::collection::vec(op(3000), 0..300),
        ) {
            let mut records = Records::<true>::default();
            let mut inserted = PackedTable::<true>::new();
            let mut m = BTreeMap::new();
            let mut twice = false;
            for (i, &k) in keys.iter().enumerate() {
                // Now and then a value past the small form's limit.
                let v = if long && i == keys.len() / 2 { vec![b'L'; 100] } else { val(k, i as u8) };
                records.push(&key(k), &v);
                twice |= !inserted.insert(&key(k), &v);
                m.insert(key(k), v);
            }
            let built = PackedTable::from_records(&records);
            if twice {
                prop_assert!(built.is_err());
                return Ok(());
            }
            let mut built = built.expect("distinct keys");
            prop_assert_eq!(built.is_indexed(), inserted.is_indexed());
            if !built.is_indexed() {
                let order = |t: &PackedTable<true>| t.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect::<Vec<_>>();
                prop_assert_eq!(order(&built), order(&inserted));
            }
            check(&built, &m);
            for o in more {
                match o {
                    Op::Set(k, v) => {
                        let new = built.insert(&key(k), &val(k, v));
                        prop_assert_eq!(new, m.insert(key(k), val(k, v)).is_none());
                    }
                    Op::Del(k) => prop_assert_eq!(built.remove(&key(k)), m.remove(&key(k)).is_some()),
                }
            }
            check(&built, &m);
        }
    }

    #[test]
    fn grows_and_shrinks_incrementally() {
        let mut t = PackedTable::<false>::new();
        let mut m = BTreeSet::new();
        for i in 0..100_000u32 {
            let k = i.to_be_bytes();
            assert!(t.insert(&k, b""));
            m.insert(k.to_vec());
        }
        for i in (0..100_000u32).filter(|i| i % 7 != 0) {
            assert!(t.remove(&i.to_be_bytes()));
            m.remove(&i.to_be_bytes()[..]);
        }
        assert_eq!(t.len(), m.len());
        let got: BTreeSet<Vec<u8>> = t.iter().map(|(k, _)| k.to_vec()).collect();
        assert_eq!(got, m);
        for i in 0..100_000u32 {
            assert_eq!(t.contains(&i.to_be_bytes()), i % 7 == 0);
        }
        // Dead space was reclaimed: the arena is near the live size (5 bytes per record).
        let arena: usize = t.chunks.iter().map(|c| c.buf.len()).sum();
        assert!(arena < m.len() * 5 * 2 + CHUNK_TARGET, "arena {arena} for {} records", m.len());
        let idx = t.index_ref().unwrap();
        assert!(idx.cur.slots.len() <= m.len() * 10, "index shrank");
    }

    /// Elements present for a whole scan are returned, while other elements come and go and
    /// the table resizes underneath the cursor.
    #[test]
    fn scan_survives_resizes() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for round in 0..4u32 {
            let mut t = PackedTable::<false>::new();
            let stable: Vec<Vec<u8>> = (0..2000u32).map(|i| format!("s{i}").into_bytes()).collect();
            for k in &stable {
                t.insert(k, b"");
            }
            let mut seen = BTreeSet::new();
            let mut cursor = 0;
            let mut churn = 0u32;
            loop {
                cursor = t.scan(cursor, 5 + round as usize * 20, |k, _| {
                    seen.insert(k.to_vec());
                });
                // Grow a lot, then shrink, between steps.
                for _ in 0..200 {
                    let k = format!("c{}", rng.gen_range(0..30_000u32)).into_bytes();
                    if churn < 40_000 {
                        t.insert(&k, b"");
                    } else {
                        t.remove(&k);
                    }
                    churn += 1;
                }
                if cursor == 0 {
                    break;
                }
            }
            for k in &stable {
                assert!(seen.contains(k), "missed {}", String::from_utf8_lossy(k));
            }
        }
    }

    #[test]
    fn random_is_roughly_uniform() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let mut t = PackedTable::<false>::new();
        for i in 0..1000u32 {
            t.insert(&i.to_le_bytes(), b"");
        }
        let mut hits = vec![0u32; 1000];
        for _ in 0..200_000 {
            let (k, _) = t.random(&mut rng).unwrap();
            hits[u32::from_le_bytes(k.try_into().unwrap()) as usize] += 1;
        }
        assert!(hits.iter().all(|&h| (100..320).contains(&h)), "{:?}", hits.iter().min());
    }

    /// Sequential keys (the dataset's shape) spread well: short probe runs at the highest load.
    #[test]
    fn probe_runs_stay_short() {
        let mut t = PackedTable::<false>::new();
        let mut n = 0u32;
        // Fill to just below the grow threshold of a settled table.
        loop {
            t.insert(format!("m{n:07}").as_bytes(), b"");
            n += 1;
            let idx = t.index_ref().map(|i| (i.old.is_none(), i.cur.used * 5 >= i.cur.slots.len() * 4 - 5));
            if n > 100_000 && idx == Some((true, true)) {
                break;
            }
        }
        let idx = t.index_ref().unwrap();
        let mut total = 0usize;
        for (pos, &a) in idx.cur.slots.iter().enumerate() {
            if a > TOMB {
                let home = idx.cur.home(hash_bytes(key_at(&t.chunks, a)));
                total += pos.wrapping_sub(home) & idx.cur.mask();
            }
        }
        let mean = total as f64 / idx.cur.live as f64;
        // Linear probing at load 0.8 with a uniform hash averages (1 + 1/(1-a)) / 2 - 1 = 2.
        assert!(
            mean < 3.0,
            "mean displacement {mean} at load {}",
            idx.cur.live as f64 / idx.cur.slots.len() as f64
        );
    }
}
