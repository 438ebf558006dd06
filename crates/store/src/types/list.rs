//! List of byte strings: a deque of packed chunks (quicklist-like).
//!
//! Layout:
//! - A [`List`] is a `VecDeque` of [`Chunk`]s. Each chunk is one heap buffer holding up to
//!   [`CHUNK_MAX`] bytes of back-to-back entries (a single entry larger than that gets a chunk
//!   of its own). The live entries occupy `data[head..tail]`; the free space on both sides lets
//!   LPUSH/LPOP and RPUSH/RPOP work at either end without moving the other entries.
//! - An entry is a header followed by its payload (see [`entry`]). There is no back-length
//!   (a 7-byte element costs 8 bytes, not listpack's 9), so a chunk is walked forward only.
//!   RPOP stays O(1) amortized through the list's tail cache: the u16 offsets of the last
//!   chunk's entries, built by one scan and then popped one by one.
//! - Canonical decimal integers are stored as integers (1 to 9 bytes), everything else as
//!   length-prefixed bytes (1, 2 or 5 bytes of header).
//!
//! Invariants: no chunk is empty; `len` is the sum of the chunks' counts; a chunk with more than
//! one entry has a buffer of at most [`CHUNK_MAX`] bytes; every buffer's size is a jemalloc size
//! class, so [`List::mem_usage`] is what the allocator really hands out.

use crate::alloc::size_class;
use crate::Plain;
use std::collections::VecDeque;

/// Target upper bound of a chunk's live bytes (Redis's quicklist node default is 8 KiB too).
pub const CHUNK_MAX: usize = 8192;

/// The packed entry format shared by lists and sparse arrays.
///
/// First header byte:
/// - `0xxxxxxx`: the integer 0..=127, no more bytes.
/// - `10llllll`: a string of 0..=63 bytes follows.
/// - `110xxxxx` + 1 byte: a 13-bit two's complement integer (-4096..=4095).
/// - `1110llll` + 1 byte: a string of up to 4095 bytes (12-bit length) follows.
/// - `0xF0` + u32 LE length: a longer string follows.
/// - `0xF1`/`0xF2`/`0xF3`/`0xF4` + 2/3/4/8 bytes LE: an i16/i24/i32/i64.
///
/// Only canonical decimal integers (as `string2ll` accepts them) take an integer form, so every
/// entry reads back byte for byte as written.
pub(crate) mod entry {
    use crate::types::string::parse_canonical_i64;

    /// A decoded entry, borrowing the chunk.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Elem<'a> {
        Int(i64),
        Bytes(&'a [u8]),
    }

    impl Elem<'_> {
        /// The entry's bytes (integers in decimal).
        pub fn to_vec(&self) -> Vec<u8> {
            match self {
                Elem::Int(i) => itoa::Buffer::new().format(*i).as_bytes().to_vec(),
                Elem::Bytes(b) => b.to_vec(),
            }
        }
        /// Calls `f` with the entry's bytes without allocating.
        pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
            match self {
                Elem::Int(i) => f(itoa::Buffer::new().format(*i).as_bytes()),
                Elem::Bytes(b) => f(b),
            }
        }
        /// Byte equality with `v`. A stored integer came from a canonical string, and a stored
        /// string is never canonical, so comparing like with like is exact.
        pub fn eq_bytes(&self, v: &[u8]) -> bool {
            match self {
                Elem::Bytes(b) => *b == v,
                Elem::Int(i) => parse_canonical_i64(v) == Some(*i),
            }
        }
    }

    /// The header of a value about to be written: up to 9 bytes, then `payload`.
    pub struct Header {
        pub bytes: [u8; 9],
        pub n: usize,
    }

    impl Header {
        pub fn as_slice(&self) -> &[u8] {
            &self.bytes[..self.n]
        }
    }

    /// Header and payload for `v`. For integers the header holds the whole entry.
    pub fn header(v: &[u8]) -> (Header, &[u8]) {
        let mut h = Header { bytes: [0; 9], n: 0 };
        if let Some(i) = parse_canonical_i64(v) {
            if (0..=127).contains(&i) {
                h.bytes[0] = i as u8;
                h.n = 1;
            } else if (-4096..=4095).contains(&i) {
                let u = (i as u16) & 0x1FFF;
                h.bytes[0] = 0xC0 | (u >> 8) as u8;
                h.bytes[1] = u as u8;
                h.n = 2;
            } else {
                let le = i.to_le_bytes();
                let (tag, w) = if i16::try_from(i).is_ok() {
                    (0xF1, 2)
                } else if (-(1 << 23)..(1 << 23)).contains(&i) {
                    (0xF2, 3)
                } else if i32::try_from(i).is_ok() {
                    (0xF3, 4)
                } else {
                    (0xF4, 8)
                };
                h.bytes[0] = tag;
                h.bytes[1..1 + w].copy_from_slice(&le[..w]);
                h.n = 1 + w;
            }
            return (h, &[]);
        }
        let len = v.len();
        if len <= 63 {
            h.bytes[0] = 0x80 | len as u8;
            h.n = 1;
        } else if len <= 4095 {
            h.bytes[0] = 0xE0 | (len >> 8) as u8;
            h.bytes[1] = len as u8;
            h.n = 2;
        } else {
            h.bytes[0] = 0xF0;
            h.bytes[1..5].copy_from_slice(&(len as u32).to_le_bytes());
            h.n = 5;
        }
        (h, v)
    }

    /// Encoded size of `v`.
    pub fn encoded_len(v: &[u8]) -> usize {
        let (h, p) = header(v);
        h.n + p.len()
    }

    /// Appends the encoding of `v` to `out`.
    pub fn encode(v: &[u8], out: &mut Vec<u8>) {
        let (h, p) = header(v);
        out.extend_from_slice(h.as_slice());
        out.extend_from_slice(p);
    }

    /// Writes the encoding of `v` at the start of `dst` (which must be exactly long enough).
    pub fn write(v: &[u8], dst: &mut [u8]) {
        let (h, p) = header(v);
        dst[..h.n].copy_from_slice(h.as_slice());
        dst[h.n..h.n + p.len()].copy_from_slice(p);
    }

    fn sign_extend(le: &[u8]) -> i64 {
        let mut b = [0u8; 8];
        b[..le.len()].copy_from_slice(le);
        let shift = 64 - 8 * le.len() as u32;
        (i64::from_le_bytes(b) << shift) >> shift
    }

    /// Total size (header + payload) of the entry starting at `buf[0]`.
    #[inline]
    pub fn size(buf: &[u8]) -> usize {
        let b = buf[0];
        match b {
            0x00..=0x7F => 1,
            0x80..=0xBF => 1 + (b & 0x3F) as usize,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 2 + (((b & 0x0F) as usize) << 8 | buf[1] as usize),
            0xF0 => 5 + u32::from_le_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize,
            0xF1 => 3,
            0xF2 => 4,
            0xF3 => 5,
            _ => 9,
        }
    }

    /// The total size of the entry at `buf[0]` if it is one the encoder writes and lies within
    /// `buf`: a known tag, and a string form never holding a canonical integer (which the
    /// encoder would have stored as an integer; comparisons rely on that). For untrusted
    /// bytes; [`size`] and [`decode`] assume a checked entry.
    pub fn checked_size(buf: &[u8]) -> Option<usize> {
        let b = *buf.first()?;
        if b > 0xF4 {
            return None;
        }
        let n = match b {
            0xE0..=0xEF => 2 + (((b & 0x0F) as usize) << 8 | *buf.get(1)? as usize),
            0xF0 => 5usize.checked_add(u32::from_le_bytes(buf.get(1..5)?.try_into().ok()?) as usize)?,
            0xC0..=0xDF => 2,
            _ => size(&[b, 0, 0, 0, 0]),
        };
        if n > buf.len() {
            return None;
        }
        if let (Elem::Bytes(v), _) = decode(&buf[..n]) {
            if parse_canonical_i64(v).is_some() {
                return None;
            }
        }
        Some(n)
    }

    /// Decodes the entry at `buf[0]`; returns it and its total size.
    #[inline]
    pub fn decode(buf: &[u8]) -> (Elem<'_>, usize) {
        let b = buf[0];
        match b {
            0x00..=0x7F => (Elem::Int(b as i64), 1),
            0x80..=0xBF => {
                let n = (b & 0x3F) as usize;
                (Elem::Bytes(&buf[1..1 + n]), 1 + n)
            }
            0xC0..=0xDF => {
                let u = ((b as u16 & 0x1F) << 8 | buf[1] as u16) << 3;
                (Elem::Int((u as i16 >> 3) as i64), 2)
            }
            0xE0..=0xEF => {
                let n = ((b & 0x0F) as usize) << 8 | buf[1] as usize;
                (Elem::Bytes(&buf[2..2 + n]), 2 + n)
            }
            0xF0 => {
                let n = u32::from_le_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
                (Elem::Bytes(&buf[5..5 + n]), 5 + n)
            }
            0xF1 => (Elem::Int(sign_extend(&buf[1..3])), 3),
            0xF2 => (Elem::Int(sign_extend(&buf[1..4])), 4),
            0xF3 => (Elem::Int(sign_extend(&buf[1..5])), 5),
            _ => (Elem::Int(sign_extend(&buf[1..9])), 9),
        }
    }
}

pub use entry::Elem;

/// One packed run of entries: live bytes are `data[head..tail]`.
#[derive(Clone, Debug)]
struct Chunk {
    /// Fully initialized buffer whose length is a jemalloc size class.
    data: Box<[u8]>,
    head: u32,
    tail: u32,
    count: u32,
}

impl Chunk {
    fn live(&self) -> &[u8] {
        &self.data[self.head as usize..self.tail as usize]
    }
    fn live_len(&self) -> usize {
        (self.tail - self.head) as usize
    }
    /// A chunk holding `bytes` (`count` entries), placed at the start (`at_end == false`) or
    /// the end of a buffer with at least `room` bytes to spare on that side.
    fn from_bytes(bytes: &[u8], count: u32, room: usize, at_end: bool) -> Chunk {
        let cap = size_class(bytes.len() + room).max(bytes.len());
        let mut data = vec![0u8; cap].into_boxed_slice();
        let start = if at_end { cap - bytes.len() } else { 0 };
        data[start..start + bytes.len()].copy_from_slice(bytes);
        Chunk { data, head: start as u32, tail: (start + bytes.len()) as u32, count }
    }
    /// Offsets (absolute in `data`) of every entry, in order.
    fn offsets(&self, out: &mut Vec<u32>) {
        out.clear();
        let mut off = self.head as usize;
        while off < self.tail as usize {
            out.push(off as u32);
            off += entry::size(&self.data[off..]);
        }
    }
    /// Absolute offset of entry `k` (k < count).
    fn offset_of(&self, k: usize) -> usize {
        let mut off = self.head as usize;
        for _ in 0..k {
            off += entry::size(&self.data[off..]);
        }
        off
    }
    /// Appends an entry; returns true if the live bytes moved (offsets changed).
    fn push_back(&mut self, v: &[u8]) -> bool {
        let n = entry::encoded_len(v);
        let mut moved = false;
        if self.tail as usize + n > self.data.len() {
            moved = true;
            if self.live_len() + n <= self.data.len() {
                let (h, t) = (self.head as usize, self.tail as usize);
                self.data.copy_within(h..t, 0);
                self.tail -= self.head;
                self.head = 0;
            } else {
                *self = Chunk::from_bytes(self.live(), self.count, n, false);
            }
        }
        let t = self.tail as usize;
        entry::write(v, &mut self.data[t..t + n]);
        self.tail += n as u32;
        self.count += 1;
        moved
    }
    /// Prepends an entry; returns true if the live bytes moved.
    fn push_front(&mut self, v: &[u8]) -> bool {
        let n = entry::encoded_len(v);
        let mut moved = false;
        if (self.head as usize) < n {
            moved = true;
            let live = self.live_len();
            if live + n <= self.data.len() {
                let (h, t) = (self.head as usize, self.tail as usize);
                let dst = self.data.len() - live;
                self.data.copy_within(h..t, dst);
                self.head = dst as u32;
                self.tail = self.data.len() as u32;
            } else {
                *self = Chunk::from_bytes(self.live(), self.count, n, true);
            }
        }
        self.head -= n as u32;
        let h = self.head as usize;
        entry::write(v, &mut self.data[h..h + n]);
        self.count += 1;
        moved
    }
    /// Gives memory back once the live bytes use under a quarter of the buffer.
    fn maybe_shrink(&mut self) -> bool {
        if self.data.len() > 64 && self.live_len() * 4 < self.data.len() {
            *self = Chunk::from_bytes(self.live(), self.count, 0, false);
            return true;
        }
        false
    }
}

/// A list of byte strings in packed chunks.
#[derive(Clone, Debug, Default)]
pub struct List {
    chunks: VecDeque<Chunk>,
    len: usize,
    /// If non-empty: the offsets of the last `tail_offs.len()` entries of the last chunk, in
    /// order. Any change that moves the last chunk's bytes or removes one of its entries other
    /// than by `pop_back` clears it.
    /// Offsets fit u16: only a chunk holding a single entry can exceed CHUNK_MAX bytes, and
    /// such a chunk is popped without the cache.
    tail_offs: TailCache,
}

/// The tail-offset cache, allocated on first use: most lists are never popped from the back,
/// and an inline `Vec` would add 16 bytes to every list's header (64 instead of 48 bytes).
#[derive(Clone, Debug, Default)]
struct TailCache(
    // The box keeps the unused cache one word wide.
    #[allow(clippy::box_collection)] Option<Box<Vec<u16>>>,
);

impl TailCache {
    fn clear(&mut self) {
        if let Some(v) = &mut self.0 {
            v.clear();
        }
    }
    fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|v| v.is_empty())
    }
    fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |v| v.len())
    }
    fn push(&mut self, off: u16) {
        self.0.get_or_insert_with(Default::default).push(off);
    }
    fn pop(&mut self) -> Option<u16> {
        self.0.as_mut()?.pop()
    }
    /// Heap bytes (size classes).
    fn heap_bytes(&self) -> usize {
        self.0
            .as_ref()
            .map_or(0, |v| size_class(std::mem::size_of::<Vec<u16>>()) + size_class(v.capacity() * 2))
    }
}

/// A listpack's fixed bytes: total length and count (6) and the end mark (1).
const LP_OVERHEAD: usize = 7;

impl List {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push_back(&mut self, v: &[u8]) {
        let n = entry::encoded_len(v);
        match self.chunks.back_mut() {
            Some(c) if c.live_len() + n <= CHUNK_MAX => {
                let off = c.tail;
                if c.push_back(v) {
                    self.tail_offs.clear();
                } else if !self.tail_offs.is_empty() {
                    self.tail_offs.push(off as u16);
                }
            }
            _ => {
                let mut c = Chunk::from_bytes(&[], 0, n, false);
                c.push_back(v);
                if self.chunks.is_empty() {
                    // Most lists are one chunk: one exact slot, not VecDeque's default four.
                    self.chunks.reserve_exact(1);
                }
                self.chunks.push_back(c);
                self.tail_offs.clear();
            }
        }
        self.len += 1;
    }

    pub fn push_front(&mut self, v: &[u8]) {
        let n = entry::encoded_len(v);
        let single = self.chunks.len() == 1;
        match self.chunks.front_mut() {
            Some(c) if c.live_len() + n <= CHUNK_MAX => {
                // Entries keep their offsets unless the chunk moved; the cache then still
                // describes a suffix of the (single) chunk.
                if c.push_front(v) && single {
                    self.tail_offs.clear();
                }
            }
            _ => {
                let mut c = Chunk::from_bytes(&[], 0, n, true);
                c.push_front(v);
                if self.chunks.is_empty() {
                    self.chunks.reserve_exact(1);
                }
                self.chunks.push_front(c);
            }
        }
        self.len += 1;
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        let single = self.chunks.len() == 1;
        let c = self.chunks.front_mut()?;
        let h = c.head as usize;
        let (e, n) = entry::decode(&c.data[h..]);
        let v = e.to_vec();
        c.head += n as u32;
        c.count -= 1;
        self.len -= 1;
        if c.count == 0 {
            self.chunks.pop_front();
            if single {
                self.tail_offs.clear();
            }
        } else {
            let moved = c.maybe_shrink();
            // The cache may hold the popped entry's offset: drop it rather than track it.
            if single && (moved || self.tail_offs.len() > c.count as usize) {
                self.tail_offs.clear();
            }
        }
        Some(v)
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let c = self.chunks.back_mut()?;
        let off = if c.count == 1 {
            self.tail_offs.clear();
            c.head as usize
        } else {
            if self.tail_offs.is_empty() {
                debug_assert!(c.data.len() <= u16::MAX as usize, "multi-entry chunks are small");
                let mut off = c.head as usize;
                while off < c.tail as usize {
                    self.tail_offs.push(off as u16);
                    off += entry::size(&c.data[off..]);
                }
            }
            self.tail_offs.pop().expect("chunk is not empty") as usize
        };
        let (e, _) = entry::decode(&c.data[off..]);
        let v = e.to_vec();
        c.tail = off as u32;
        c.count -= 1;
        self.len -= 1;
        if c.count == 0 {
            self.chunks.pop_back();
            self.tail_offs.clear();
        } else if c.maybe_shrink() {
            self.tail_offs.clear();
        }
        Some(v)
    }

    /// Chunk number and entry number within it of list position `i` (< len), walking from
    /// the nearer end.
    fn locate(&self, i: usize) -> (usize, usize) {
        if i < self.len / 2 {
            let mut rem = i;
            for (ci, c) in self.chunks.iter().enumerate() {
                if rem < c.count as usize {
                    return (ci, rem);
                }
                rem -= c.count as usize;
            }
        } else {
            let mut rem = self.len - 1 - i;
            for (ci, c) in self.chunks.iter().enumerate().rev() {
                if rem < c.count as usize {
                    return (ci, c.count as usize - 1 - rem);
                }
                rem -= c.count as usize;
            }
        }
        unreachable!("index {i} out of a list of {}", self.len)
    }

    /// The element at position `i` (0-based from the head).
    pub fn get(&self, i: usize) -> Option<Vec<u8>> {
        if i >= self.len {
            return None;
        }
        let (ci, k) = self.locate(i);
        let c = &self.chunks[ci];
        Some(entry::decode(&c.data[c.offset_of(k)..]).0.to_vec())
    }

    /// Rewrites chunk `ci` through `edit`, which receives the chunk's live bytes and count and
    /// returns the new ones. Removes the chunk if it ends up empty and splits it if it grew
    /// past [`CHUNK_MAX`]. Returns the number of chunks now standing where `ci` was.
    fn rewrite_chunk(&mut self, ci: usize, edit: impl FnOnce(&Chunk) -> (Vec<u8>, u32)) -> usize {
        if ci + 1 == self.chunks.len() {
            self.tail_offs.clear();
        }
        let (bytes, count) = edit(&self.chunks[ci]);
        let old = self.chunks[ci].count as usize;
        self.len = self.len - old + count as usize;
        if count == 0 {
            self.chunks.remove(ci);
            return 0;
        }
        if bytes.len() <= CHUNK_MAX || count == 1 {
            self.chunks[ci] = Chunk::from_bytes(&bytes, count, 0, false);
            return 1;
        }
        // Split at entry boundaries into pieces of at most half a chunk, so that the pieces
        // have room to grow before the next split.
        let mut pieces = Vec::new();
        let (mut start, mut off, mut n) = (0usize, 0usize, 0u32);
        while off < bytes.len() {
            let s = entry::size(&bytes[off..]);
            if off > start && off + s - start > CHUNK_MAX / 2 {
                pieces.push(Chunk::from_bytes(&bytes[start..off], n, 0, false));
                start = off;
                n = 0;
            }
            off += s;
            n += 1;
        }
        pieces.push(Chunk::from_bytes(&bytes[start..], n, 0, false));
        let k = pieces.len();
        self.chunks.remove(ci);
        for (j, p) in pieces.into_iter().enumerate() {
            self.chunks.insert(ci + j, p);
        }
        k
    }

    /// Replaces the element at position `i`. Returns false if `i` is out of range.
    pub fn set(&mut self, i: usize, v: &[u8]) -> bool {
        if i >= self.len {
            return false;
        }
        let (ci, k) = self.locate(i);
        self.rewrite_chunk(ci, |c| {
            let off = c.offset_of(k) - c.head as usize;
            let live = c.live();
            let old = entry::size(&live[off..]);
            let mut b = Vec::with_capacity(live.len() + entry::encoded_len(v));
            b.extend_from_slice(&live[..off]);
            entry::encode(v, &mut b);
            b.extend_from_slice(&live[off + old..]);
            (b, c.count)
        });
        true
    }

    /// Inserts `v` so that it becomes position `i` (`i == len` appends).
    pub fn insert(&mut self, i: usize, v: &[u8]) {
        assert!(i <= self.len);
        if i == 0 {
            return self.push_front(v);
        }
        if i == self.len {
            return self.push_back(v);
        }
        let (ci, k) = self.locate(i);
        self.rewrite_chunk(ci, |c| {
            let off = c.offset_of(k) - c.head as usize;
            let live = c.live();
            let mut b = Vec::with_capacity(live.len() + entry::encoded_len(v));
            b.extend_from_slice(&live[..off]);
            entry::encode(v, &mut b);
            b.extend_from_slice(&live[off..]);
            (b, c.count + 1)
        });
    }

    /// Keeps only positions `start..=end` (both < len, start <= end); with `None` empties the
    /// list.
    pub fn retain_range(&mut self, keep: Option<(usize, usize)>) {
        let Some((start, end)) = keep else {
            self.clear();
            return;
        };
        // Drop whole chunks first, then cut the partial ones at both ends.
        let mut drop_front = start;
        while let Some(c) = self.chunks.front() {
            if (c.count as usize) <= drop_front {
                drop_front -= c.count as usize;
                self.len -= c.count as usize;
                self.chunks.pop_front();
            } else {
                break;
            }
        }
        let mut drop_back = self.len - (end - start + 1) - drop_front;
        self.tail_offs.clear();
        while let Some(c) = self.chunks.back() {
            if (c.count as usize) <= drop_back {
                drop_back -= c.count as usize;
                self.len -= c.count as usize;
                self.chunks.pop_back();
            } else {
                break;
            }
        }
        if drop_front > 0 {
            self.rewrite_chunk(0, |c| {
                let off = c.offset_of(drop_front) - c.head as usize;
                (c.live()[off..].to_vec(), c.count - drop_front as u32)
            });
        }
        if drop_back > 0 {
            let last = self.chunks.len() - 1;
            self.rewrite_chunk(last, |c| {
                let keep = c.count as usize - drop_back;
                let off = c.offset_of(keep) - c.head as usize;
                (c.live()[..off].to_vec(), keep as u32)
            });
        }
    }

    pub fn clear(&mut self) {
        self.chunks.clear();
        self.chunks.shrink_to_fit();
        self.tail_offs = TailCache::default();
        self.len = 0;
    }

    /// LREM: removes up to `count` elements equal to `v` (all if 0), from the head if
    /// `count >= 0`, from the tail if negative. Returns how many were removed.
    pub fn remove_matching(&mut self, v: &[u8], count: i64) -> usize {
        let limit =
            if count == 0 { usize::MAX } else { count.unsigned_abs().min(usize::MAX as u64) as usize };
        let mut removed = 0;
        let n = self.chunks.len();
        let order: Box<dyn Iterator<Item = usize>> =
            if count >= 0 { Box::new(0..n) } else { Box::new((0..n).rev()) };
        let mut touched = Vec::new();
        for ci in order {
            if removed >= limit {
                break;
            }
            let c = &self.chunks[ci];
            let mut offs = Vec::new();
            c.offsets(&mut offs);
            let mut hits: Vec<usize> = Vec::new();
            let idx: Box<dyn Iterator<Item = usize>> =
                if count >= 0 { Box::new(0..offs.len()) } else { Box::new((0..offs.len()).rev()) };
            for k in idx {
                if removed >= limit {
                    break;
                }
                if entry::decode(&c.data[offs[k] as usize..]).0.eq_bytes(v) {
                    hits.push(k);
                    removed += 1;
                }
            }
            if !hits.is_empty() {
                touched.push((ci, hits));
            }
        }
        // Rewrite from the highest chunk number down so earlier numbers stay valid when a
        // chunk disappears.
        touched.sort_by_key(|t| std::cmp::Reverse(t.0));
        for (ci, hits) in touched {
            self.rewrite_chunk(ci, |c| {
                let mut offs = Vec::new();
                c.offsets(&mut offs);
                let mut b = Vec::with_capacity(c.live_len());
                for (k, &o) in offs.iter().enumerate() {
                    if !hits.contains(&k) {
                        let s = entry::size(&c.data[o as usize..]);
                        b.extend_from_slice(&c.data[o as usize..o as usize + s]);
                    }
                }
                (b, c.count - hits.len() as u32)
            });
            self.merge_small(ci);
        }
        removed
    }

    /// Merges chunk `ci` with a neighbour when both together fill at most half a chunk, so
    /// that deletions in the middle do not leave a trail of tiny chunks.
    fn merge_small(&mut self, ci: usize) {
        for (a, b) in [(ci, ci + 1), (ci.wrapping_sub(1), ci)] {
            if b >= self.chunks.len() || a >= self.chunks.len() {
                continue;
            }
            let (ca, cb) = (&self.chunks[a], &self.chunks[b]);
            if ca.live_len() + cb.live_len() <= CHUNK_MAX / 2 {
                let mut bytes = ca.live().to_vec();
                bytes.extend_from_slice(cb.live());
                let merged = Chunk::from_bytes(&bytes, ca.count + cb.count, 0, false);
                self.chunks[a] = merged;
                self.chunks.remove(b);
                self.tail_offs.clear();
                return;
            }
        }
    }

    /// Iterates the elements from position `start` (clamped) towards the tail.
    pub fn iter_from(&self, start: usize) -> Iter<'_> {
        if start >= self.len {
            return Iter { list: self, ci: self.chunks.len(), rest: &[] };
        }
        let (ci, k) = self.locate(start);
        let c = &self.chunks[ci];
        Iter { list: self, ci, rest: &c.data[c.offset_of(k)..c.tail as usize] }
    }

    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0)
    }

    /// Calls `f(position, element)` from the tail towards the head, until `f` returns false.
    pub fn for_each_rev(&self, mut f: impl FnMut(usize, Elem<'_>) -> bool) {
        let mut pos = self.len;
        let mut offs = Vec::new();
        for c in self.chunks.iter().rev() {
            c.offsets(&mut offs);
            for &o in offs.iter().rev() {
                pos -= 1;
                if !f(pos, entry::decode(&c.data[o as usize..]).0) {
                    return;
                }
            }
        }
    }

    pub fn to_plain(&self) -> Plain {
        Plain::List(self.iter().map(|e| e.to_vec()).collect())
    }

    /// Heap bytes held by this list, including the `Box` the keyspace keeps it in.
    pub fn mem_usage(&self) -> usize {
        size_class(std::mem::size_of::<List>())
            + size_class(self.chunks.capacity() * std::mem::size_of::<Chunk>())
            + self.tail_offs.heap_bytes()
            + self.chunks.iter().map(|c| size_class(c.data.len())).sum::<usize>()
    }

    /// Length in bytes of the raw form: one segment (`varint(len)`, then `len` bytes) per
    /// chunk, holding its live entries in the format of [`entry`]; together, every element in
    /// order.
    pub fn raw_len(&self) -> usize {
        self.chunks.iter().map(|c| super::varint_len(c.live_len() as u64) + c.live_len()).sum()
    }

    /// Calls `f` with consecutive pieces of the raw form: each chunk's length, then its live
    /// bytes.
    pub fn for_each_raw_run(&self, mut f: impl FnMut(&[u8])) {
        for c in &self.chunks {
            super::with_varint(c.live_len() as u64, &mut f);
            f(c.live());
        }
    }

    /// Builds a list of `count` elements from its raw form, validating every entry (see
    /// [`entry::checked_size`]) and the count. Each segment becomes a chunk (cut further only
    /// past [`CHUNK_MAX`], which a saved chunk never is unless it holds one entry) whose
    /// buffer is its bytes' size class: never more memory than the list that was saved.
    pub fn from_raw(raw: &[u8], count: usize) -> Result<List, super::RawError> {
        let mut chunks = VecDeque::new();
        let mut n = 0usize;
        super::for_each_segment(raw, |seg| {
            let (mut start, mut n_in, mut off) = (0usize, 0u32, 0usize);
            while off < seg.len() {
                let size = entry::checked_size(&seg[off..]).ok_or(super::RawError("bad list entry"))?;
                // Chunk offsets are u32: refuse an entry no chunk could hold (the protocol
                // caps values at 512 MB, far below).
                if size > u32::MAX as usize / 2 {
                    return Err(super::RawError("list entry too large"));
                }
                let next = off + size;
                if n_in > 0 && next - start > CHUNK_MAX {
                    chunks.push_back(Chunk::from_bytes(&seg[start..off], n_in, 0, false));
                    start = off;
                    n_in = 0;
                }
                n_in += 1;
                n += 1;
                off = next;
            }
            chunks.push_back(Chunk::from_bytes(&seg[start..off], n_in, 0, false));
            Ok(())
        })?;
        if n != count {
            return Err(super::RawError("element count differs from the stated count"));
        }
        if n == 0 {
            return Err(super::RawError("empty collection"));
        }
        chunks.shrink_to_fit();
        Ok(List { chunks, len: n, tail_offs: TailCache::default() })
    }

    /// Redis 7.2+'s name for the list's form: `listpack` while the whole list would fit one
    /// listpack node under `list-max-listpack-size` (by default 8 KiB of listpack), else
    /// `quicklist`. Judged from the elements as they are now (Redis converts back to a
    /// listpack only below half the limit, so between half and the limit a list that grew past
    /// it and shrank reads `quicklist` there and `listpack` here).
    pub fn encoding(&self) -> &'static str {
        if self.fits_one_listpack() {
            "listpack"
        } else {
            "quicklist"
        }
    }

    /// One listpack node's bounds under `list-max-listpack-size`: (bytes, entries). A negative
    /// fill (-1 to -5) bounds the bytes (4 to 64 KiB), a positive one the entries (and the
    /// bytes at 8 KiB).
    fn node_bounds() -> (usize, usize) {
        let fill = crate::limits::list_max_listpack_size();
        if fill >= 0 {
            (8192, (fill as usize).max(1))
        } else {
            const LEVELS: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
            (LEVELS[((-(fill as i128)) as usize - 1).min(4)], usize::MAX)
        }
    }

    /// An element's size in a listpack.
    fn lp_size(e: Elem<'_>) -> usize {
        (match e {
            Elem::Int(i) => super::stream::lp::int(i),
            Elem::Bytes(b) => super::stream::lp::string(b),
        }) as usize
    }

    /// Whether the list's listpack encoding stays within one node's bounds. Stops counting at
    /// the bound.
    fn fits_one_listpack(&self) -> bool {
        let (size_limit, count_limit) = Self::node_bounds();
        if self.len > count_limit {
            return false;
        }
        // Header (total bytes and count) and end mark.
        let mut bytes = LP_OVERHEAD;
        for e in self.iter() {
            bytes += Self::lp_size(e);
            if bytes > size_limit {
                return false;
            }
        }
        true
    }

    /// The quicklist Redis would build for this list, filled front to back under
    /// `list-max-listpack-size`: (nodes, their listpacks' bytes). DEBUG OBJECT reports it.
    pub fn quicklist_shape(&self) -> (usize, usize) {
        let (size_limit, count_limit) = Self::node_bounds();
        let (mut nodes, mut total) = (0usize, 0usize);
        let (mut node_bytes, mut node_count) = (0usize, 0usize);
        for e in self.iter() {
            let sz = Self::lp_size(e);
            // A node takes the element while it stays within both bounds; an element too big
            // for any node gets one of its own.
            if node_count == 0 || node_bytes + sz > size_limit || node_count + 1 > count_limit {
                if node_count > 0 {
                    total += node_bytes;
                }
                nodes += 1;
                node_bytes = LP_OVERHEAD;
                node_count = 0;
            }
            node_bytes += sz;
            node_count += 1;
        }
        if node_count > 0 {
            total += node_bytes;
        }
        (nodes, total)
    }

    /// Number of chunks (tests and MEMORY introspection).
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }
}

/// Forward iterator over a list's elements.
pub struct Iter<'a> {
    list: &'a List,
    /// The chunk `rest` lies in.
    ci: usize,
    /// The entries of chunk `ci` not yet returned: the next one is at its start. Empty only
    /// at the end (chunks are never empty), so an element costs a decode, not a lookup of its
    /// chunk in the deque.
    rest: &'a [u8],
}

impl<'a> Iterator for Iter<'a> {
    type Item = Elem<'a>;
    #[inline]
    fn next(&mut self) -> Option<Elem<'a>> {
        if self.rest.is_empty() {
            return None;
        }
        let (e, n) = entry::decode(self.rest);
        self.rest = &self.rest[n..];
        if self.rest.is_empty() {
            self.ci += 1;
            if let Some(nc) = self.list.chunks.get(self.ci) {
                self.rest = &nc.data[nc.head as usize..nc.tail as usize];
            }
        }
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tiny_list_memory_is_bounded() {
        assert!(std::mem::size_of::<List>() <= 48, "header grew to {}", std::mem::size_of::<List>());
        let mut l = List::new();
        l.push_back(b"v1234");
        // Header (48) + one chunk slot (32, not VecDeque's default four) + an 8-byte buffer;
        // no tail cache until something pops from the back.
        assert!(l.mem_usage() <= 88, "one element: {} bytes", l.mem_usage());
        let mut f = List::new();
        f.push_front(b"v1234");
        assert!(f.mem_usage() <= 88, "one element pushed in front: {} bytes", f.mem_usage());
        for _ in 1..8 {
            l.push_back(b"v1234");
        }
        assert_eq!(l.len(), 8);
        assert!(l.mem_usage() <= 128, "eight elements: {} bytes", l.mem_usage());
    }

    fn check(l: &List, model: &VecDeque<Vec<u8>>) {
        assert_eq!(l.len(), model.len());
        let got: Vec<Vec<u8>> = l.iter().map(|e| e.to_vec()).collect();
        let want: Vec<Vec<u8>> = model.iter().cloned().collect();
        assert_eq!(got, want);
        assert_eq!(l.chunks.iter().map(|c| c.count as usize).sum::<usize>(), l.len);
        assert!(l.chunks.iter().all(|c| c.count > 0));
        let mut rev = Vec::new();
        l.for_each_rev(|i, e| {
            rev.push((i, e.to_vec()));
            true
        });
        rev.reverse();
        assert_eq!(rev, want.iter().cloned().enumerate().collect::<Vec<_>>());
    }

    #[test]
    fn entries_round_trip() {
        let samples: Vec<Vec<u8>> = vec![
            b"0".to_vec(),
            b"127".to_vec(),
            b"128".to_vec(),
            b"-1".to_vec(),
            b"-4096".to_vec(),
            b"4095".to_vec(),
            b"4096".to_vec(),
            b"-4097".to_vec(),
            b"32767".to_vec(),
            b"-32768".to_vec(),
            b"8388607".to_vec(),
            b"-8388608".to_vec(),
            b"2147483647".to_vec(),
            b"-2147483649".to_vec(),
            b"9223372036854775807".to_vec(),
            b"-9223372036854775808".to_vec(),
            b"007".to_vec(),
            b"-0".to_vec(),
            b"+1".to_vec(),
            b"1.5".to_vec(),
            b"".to_vec(),
            vec![b'x'; 63],
            vec![b'x'; 64],
            vec![b'x'; 4095],
            vec![b'x'; 4096],
            vec![b'x'; 70000],
        ];
        for s in samples {
            let mut buf = Vec::new();
            entry::encode(&s, &mut buf);
            assert_eq!(buf.len(), entry::encoded_len(&s));
            assert_eq!(entry::size(&buf), buf.len());
            let (e, n) = entry::decode(&buf);
            assert_eq!(n, buf.len());
            assert_eq!(e.to_vec(), s, "{:?}", String::from_utf8_lossy(&s));
            assert!(e.eq_bytes(&s));
        }
        let mut buf = Vec::new();
        entry::encode(b"e000123", &mut buf);
        assert_eq!(buf.len(), 8, "a 7-byte string costs one header byte");
        assert!(!entry::decode(b"\x05").0.eq_bytes(b"05"));
    }

    #[test]
    fn packs_near_payload_size() {
        let mut l = List::new();
        for k in 0..1000 {
            l.push_back(format!("e{k:06}").as_bytes());
        }
        let per = l.mem_usage() as f64 / 1000.0;
        assert!(per < 8.5, "{per} bytes per element");
        assert_eq!(l.chunk_count(), 1, "1000 x 8 bytes fit one 8 KiB chunk");
        for k in 1000..3000 {
            l.push_front(format!("e{k:06}").as_bytes());
        }
        assert!(l.mem_usage() < 3000 * 9, "{} bytes", l.mem_usage());
        assert_eq!(l.get(0), Some(b"e002999".to_vec()));
        assert_eq!(l.get(2999), Some(b"e000999".to_vec()));
        assert_eq!(l.get(2000), Some(b"e000000".to_vec()));
    }

    #[derive(Debug, Clone)]
    enum Op {
        PushBack(Vec<u8>),
        PushFront(Vec<u8>),
        PopBack,
        PopFront,
        Set(usize, Vec<u8>),
        Insert(usize, Vec<u8>),
        Trim(usize, usize),
        Rem(Vec<u8>, i64),
    }

    fn val() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            (0i64..300).prop_map(|i| i.to_string().into_bytes()),
            "[a-c]{0,3}".prop_map(|s| s.into_bytes()),
            (0usize..5000).prop_map(|n| vec![b'z'; n]),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => val().prop_map(Op::PushBack),
            4 => val().prop_map(Op::PushFront),
            2 => Just(Op::PopBack),
            2 => Just(Op::PopFront),
            1 => (0usize..2000, val()).prop_map(|(i, v)| Op::Set(i, v)),
            1 => (0usize..2000, val()).prop_map(|(i, v)| Op::Insert(i, v)),
            1 => (0usize..2000, 0usize..2000).prop_map(|(a, b)| Op::Trim(a, b)),
            1 => (val(), -3i64..3).prop_map(|(v, c)| Op::Rem(v, c)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn matches_vecdeque(ops in proptest::collection::vec(op(), 1..300)) {
            let mut l = List::new();
            let mut m: VecDeque<Vec<u8>> = VecDeque::new();
            for o in ops {
                match o {
                    Op::PushBack(v) => { l.push_back(&v); m.push_back(v); }
                    Op::PushFront(v) => { l.push_front(&v); m.push_front(v); }
                    Op::PopBack => prop_assert_eq!(l.pop_back(), m.pop_back()),
                    Op::PopFront => prop_assert_eq!(l.pop_front(), m.pop_front()),
                    Op::Set(i, v) => {
                        let ok = i < m.len();
                        prop_assert_eq!(l.set(i, &v), ok);
                        if ok { m[i] = v; }
                    }
                    Op::Insert(i, v) => {
                        let i = i.min(m.len());
                        l.insert(i, &v);
                        m.insert(i, v);
                    }
                    Op::Trim(a, b) => {
                        if m.is_empty() { continue; }
                        let (a, b) = (a % m.len(), b % m.len());
                        let (a, b) = (a.min(b), a.max(b));
                        l.retain_range(Some((a, b)));
                        m = m.iter().skip(a).take(b - a + 1).cloned().collect();
                    }
                    Op::Rem(v, c) => {
                        let limit = if c == 0 { usize::MAX } else { c.unsigned_abs() as usize };
                        let mut idx: Vec<usize> = (0..m.len()).filter(|&i| m[i] == v).collect();
                        if c < 0 { idx.reverse(); }
                        idx.truncate(limit);
                        let removed = idx.len();
                        let mut k = 0;
                        m.retain(|_| { let keep = !idx.contains(&k); k += 1; keep });
                        prop_assert_eq!(l.remove_matching(&v, c), removed);
                    }
                }
                check(&l, &m);
                if !m.is_empty() {
                    let i = m.len() / 3;
                    prop_assert_eq!(l.get(i), Some(m[i].clone()));
                    prop_assert_eq!(l.iter_from(i).map(|e| e.to_vec()).collect::<Vec<_>>(), m.iter().skip(i).cloned().collect::<Vec<_>>());
                }
            }
        }
    }
}
