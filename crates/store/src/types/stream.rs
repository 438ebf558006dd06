//! Streams: entries keyed by a 128-bit ID (`ms-seq`), kept in ID order, and consumer groups.
//!
//! Entries live in *blocks*: byte buffers of consecutive entries, delta-encoded against the
//! entry before, in a `BTreeMap` keyed by the first ID each block encodes. A block starts with
//! its *master fields* (the field names of its first entry); an entry whose field names are
//! exactly those stores only its values, so the usual stream (every entry with the same fields)
//! pays for the names once per block.
//!
//! Block layout:
//!
//! ```text
//! varint(nfields) { varint(len) bytes }*nfields          master fields
//! entry*
//! entry := header byte
//!          [varint(ms delta) varint(seq or seq delta)]   absent with CONSEC
//!          SAME_FIELDS: { varint(len) value }*nfields      (values of the master fields)
//!          else:        varint(n) { varint(len) field varint(len) value }*n
//! ```
//! header bits: `DELETED` (XDEL'd: skipped by every read, kept so later deltas still decode),
//! `SAME_FIELDS`, `CONSEC` (the ID is the previous one's `ms` with `seq + 1`: no ID bytes,
//! the common case for a burst of `*` IDs within one millisecond). Otherwise the ms delta
//! follows, then the sequence: as a delta from the previous sequence when the ms delta is 0,
//! else absolute. The first entry's "previous ID" is the block's key, which is its own ID.
//!
//! Invariants: IDs strictly increase across the whole stream (block keys too); a block holds
//! at least one live entry (one emptied by deletes or trims is dropped); `len` counts live
//! entries; `last_id` is at least every ID ever encoded; `Block::last` is the last ID the
//! block encodes (live or deleted); `Block::lp_fixed` is the size Redis's listpack node for the
//! block's encoded entries would have, but for its live and deleted counters.
//!
//! Consumer groups keep what is pending, not the stream: a group's PEL maps each delivered,
//! unacknowledged ID to its consumer, delivery time and count, and each consumer keeps the
//! set of its own pending IDs. Both sides are changed only through [`ConsumerGroup`]'s methods,
//! which keep them in agreement.

use super::packed::put_varint;
pub use super::stream_idmp::{Idmp, PlainIdmp};
use crate::alloc::size_class;
use crate::limits;
use crate::value::Plain;
use crate::Millis;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

/// A stream entry ID.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId { ms: u64::MAX, seq: u64::MAX };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID in order, or None after [`StreamId::MAX`].
    pub fn next(self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId::new(self.ms, self.seq + 1))
        } else if self.ms < u64::MAX {
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            None
        }
    }

    /// The previous ID in order, or None before [`StreamId::MIN`].
    pub fn prev(self) -> Option<StreamId> {
        if self.seq > 0 {
            Some(StreamId::new(self.ms, self.seq - 1))
        } else if self.ms > 0 {
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            None
        }
    }

    /// Appends `ms-seq`.
    pub fn write_to(self, out: &mut Vec<u8>) {
        let mut b = itoa::Buffer::new();
        out.extend_from_slice(b.format(self.ms).as_bytes());
        out.push(b'-');
        out.extend_from_slice(b.format(self.seq).as_bytes());
    }

    pub fn to_bytes(self) -> Vec<u8> {
        let mut v = Vec::with_capacity(24);
        self.write_to(&mut v);
        v
    }

    /// Parses `ms-seq`, or `ms` alone with `missing_seq` as its sequence. Both parts are
    /// unsigned decimal numbers that fit 64 bits. (`-`, `+`, `*` and `$` mean something only
    /// to particular commands: the engine handles them.)
    pub fn parse(s: &[u8], missing_seq: u64) -> Option<StreamId> {
        match s.iter().position(|&b| b == b'-') {
            None => Some(StreamId::new(parse_u64(s)?, missing_seq)),
            Some(i) => Some(StreamId::new(parse_u64(&s[..i])?, parse_u64(&s[i + 1..])?)),
        }
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// An unsigned 64-bit number as Redis's `string2ull` reads it (stream IDs' two parts, SCAN
/// cursors): an argument that is a plain 64-bit integer (no sign but `-`, no leading zero, no
/// white space) must not be negative; anything else goes through C's `strtoull` over the
/// whole argument: leading white space, an optional sign, decimal digits (leading zeros
/// allowed), nothing after them, a magnitude below 2^64; a `-` there negates modulo 2^64.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if let Some(n) = plain_i64(s) {
        return u64::try_from(n).ok();
    }
    // C's isspace: Rust's ASCII white space and the vertical tab.
    let blank = s.iter().take_while(|&&b| b.is_ascii_whitespace() || b == 0x0b).count();
    let rest = &s[blank..];
    let (neg, digits) = match rest.first() {
        Some(b'-') => (true, &rest[1..]),
        Some(b'+') => (false, &rest[1..]),
        _ => (false, rest),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Redis's `string2ll`: an optional `-`, then `0` alone or a digit 1-9 and more digits, within
/// i64.
fn plain_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    match digits {
        [b'0'] if !neg => return Some(0),
        [b'1'..=b'9', ..] => {}
        _ => return None,
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = i64::from(d - b'0');
        v = v.checked_mul(10)?;
        v = if neg { v.checked_sub(d)? } else { v.checked_add(d)? };
    }
    Some(v)
}

const DELETED: u8 = 0x01;
const SAME_FIELDS: u8 = 0x02;
const CONSEC: u8 = 0x04;

/// Reads a varint the block encoder wrote, advancing `at` (trusted bytes: blocks are built
/// only here, and loaders validate untrusted input before it becomes blocks).
#[inline]
fn get_varint(b: &[u8], at: &mut usize) -> u64 {
    let (v, next) = super::packed::get_varint(b, *at);
    *at = next;
    v
}

#[inline]
fn get_bytes<'a>(b: &'a [u8], at: &mut usize) -> &'a [u8] {
    let n = get_varint(b, at) as usize;
    let s = &b[*at..*at + n];
    *at += n;
    s
}

fn put_bytes(out: &mut Vec<u8>, s: &[u8]) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// A field-value pair of an entry, borrowed from its block.
pub type Field<'a> = (&'a [u8], &'a [u8]);

#[derive(Clone, Debug)]
struct Block {
    data: Vec<u8>,
    /// Where the first entry starts (after the master fields).
    entries_at: u32,
    /// Entries encoded, live or deleted.
    count: u32,
    /// Entries not deleted (never 0 in a stored block).
    live: u32,
    /// The last ID encoded.
    last: StreamId,
    /// The bytes Redis's listpack for these entries would take, but for its two counters
    /// (live and deleted entries, whose sizes change as they count): see [`lp`]. Redis starts a
    /// new node by this size, so blocks split where its nodes do and `~` trims match its.
    lp_fixed: u64,
}

/// The byte size of Redis's listpacks (`listpack.c`), which decides where Redis closes a
/// stream node (and what OBJECT ENCODING names a list): an element is its encoding plus a
/// back-length.
pub(crate) mod lp {
    /// The back-length's size for an element of `l` bytes.
    fn backlen(l: u64) -> u64 {
        match l {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2_097_150 => 3,
            2_097_151..=268_435_454 => 4,
            _ => 5,
        }
    }

    /// An integer element.
    pub fn int(v: i64) -> u64 {
        let enc = match v {
            0..=127 => 1,
            -4096..=4095 => 2,
            -32_768..=32_767 => 3,
            -8_388_608..=8_388_607 => 4,
            -2_147_483_648..=2_147_483_647 => 5,
            _ => 9,
        };
        enc + backlen(enc)
    }

    /// A string element: one that reads as an integer is stored as one
    /// (`lpStringToInt64`: at most 20 bytes, no leading zero or plus, not "-0").
    pub fn string(s: &[u8]) -> u64 {
        if let Some(v) = as_int(s) {
            return int(v);
        }
        let n = s.len() as u64;
        let enc = match n {
            0..=63 => 1 + n,
            64..=4095 => 2 + n,
            _ => 5 + n,
        };
        enc + backlen(enc)
    }

    fn as_int(s: &[u8]) -> Option<i64> {
        if s.is_empty() || s.len() > 20 {
            return None;
        }
        if s == b"0" {
            return Some(0);
        }
        let (neg, digits) = match s.split_first() {
            Some((b'-', rest)) => (true, rest),
            _ => (false, s),
        };
        if !matches!(digits.first(), Some(b'1'..=b'9')) || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let mut v: i128 = 0;
        for d in digits {
            v = v * 10 + (d - b'0') as i128;
            if v > i64::MAX as i128 + 1 {
                return None;
            }
        }
        let v = if neg { -v } else { v };
        i64::try_from(v).ok()
    }

    /// An empty listpack: its header and end byte.
    pub const EMPTY: u64 = 7;
}

/// One decoded entry: its ID, header byte and where it starts.
struct Decoded {
    id: StreamId,
    header: u8,
    at: usize,
}

impl Block {
    fn new(id: StreamId, fields: &[Field<'_>]) -> Block {
        let mut data = Vec::with_capacity(64);
        put_varint(&mut data, fields.len() as u64);
        for (f, _) in fields {
            put_bytes(&mut data, f);
        }
        let entries_at = data.len() as u32;
        // Redis's master entry: count, deleted (both counted apart), the field count, the
        // field names, a zero terminator.
        let lp_fixed = lp::EMPTY
            + lp::int(fields.len() as i64)
            + fields.iter().map(|(f, _)| lp::string(f)).sum::<u64>()
            + lp::int(0);
        let mut b = Block { data, entries_at, count: 0, live: 0, last: id, lp_fixed };
        b.push(id, id, id, fields);
        b
    }

    /// The size of Redis's listpack for this block, counters included.
    fn lp_bytes(&self) -> u64 {
        self.lp_fixed + lp::int(self.live as i64) + lp::int((self.count - self.live) as i64)
    }

    fn master(&self) -> impl Iterator<Item = &[u8]> {
        let mut at = 0;
        let n = get_varint(&self.data, &mut at);
        (0..n).map(move |_| get_bytes(&self.data, &mut at))
    }

    /// Appends an entry; `prev` is the ID it is delta-encoded against, `key` the block's first
    /// (Redis's master) ID.
    fn push(&mut self, key: StreamId, prev: StreamId, id: StreamId, fields: &[Field<'_>]) {
        let same = {
            let mut m = self.master();
            fields.iter().all(|(f, _)| m.next() == Some(*f)) && m.next().is_none()
        };
        let consec = self.count > 0 && id.ms == prev.ms && Some(id.seq) == prev.seq.checked_add(1);
        let header = if same { SAME_FIELDS } else { 0 } | if consec { CONSEC } else { 0 };
        self.data.push(header);
        if !consec {
            let d = id.ms - prev.ms;
            put_varint(&mut self.data, d);
            put_varint(&mut self.data, if d == 0 { id.seq - prev.seq } else { id.seq });
        }
        if !same {
            put_varint(&mut self.data, fields.len() as u64);
        }
        for (f, v) in fields {
            if !same {
                put_bytes(&mut self.data, f);
            }
            put_bytes(&mut self.data, v);
        }
        self.count += 1;
        self.live += 1;
        self.last = id;
        // Redis's entry: flags, ms and seq differences from the master ID, [field count], the
        // fields (names too unless the master's), and the count of its elements.
        let n = fields.len() as i64;
        self.lp_fixed += lp::int(if same { 2 } else { 0 })
            + lp::int(id.ms.wrapping_sub(key.ms) as i64)
            + lp::int(id.seq.wrapping_sub(key.seq) as i64)
            + if same { 0 } else { lp::int(n) }
            + fields.iter().map(|(f, v)| if same { 0 } else { lp::string(f) } + lp::string(v)).sum::<u64>()
            + lp::int(n + 3 + if same { 0 } else { n + 1 });
    }

    /// Walks the block's entries in order (deleted ones included), giving each one's decoded
    /// header and, when `fields` is Some, its field-value pairs in that buffer. `f` returns
    /// false to stop.
    fn walk<'a>(
        &'a self,
        key: StreamId,
        mut fields: Option<&mut Vec<Field<'a>>>,
        mut f: impl FnMut(&Decoded, &[Field<'a>]) -> bool,
    ) {
        let d = &self.data;
        let master: Vec<&'a [u8]> = self.master().collect();
        let mut at = self.entries_at as usize;
        let mut prev = key;
        let mut empty: Vec<Field<'a>> = Vec::new();
        let want = fields.is_some();
        while at < d.len() {
            let start = at;
            let header = d[at];
            at += 1;
            let id = if header & CONSEC != 0 {
                StreamId::new(prev.ms, prev.seq + 1)
            } else {
                let dms = get_varint(d, &mut at);
                let s = get_varint(d, &mut at);
                if dms == 0 {
                    StreamId::new(prev.ms, prev.seq + s)
                } else {
                    StreamId::new(prev.ms + dms, s)
                }
            };
            prev = id;
            let buf = match fields.as_mut() {
                Some(b) => {
                    b.clear();
                    &mut **b
                }
                None => &mut empty,
            };
            if header & SAME_FIELDS != 0 {
                for m in &master {
                    let v = get_bytes(d, &mut at);
                    if want {
                        buf.push((m, v));
                    }
                }
            } else {
                let n = get_varint(d, &mut at);
                for _ in 0..n {
                    let k = get_bytes(d, &mut at);
                    let v = get_bytes(d, &mut at);
                    if want {
                        buf.push((k, v));
                    }
                }
            }
            if !f(&Decoded { id, header, at: start }, buf) {
                return;
            }
        }
    }

    fn heap_bytes(&self) -> usize {
        size_class(self.data.capacity())
    }
}

/// How XTRIM (and XADD's trimming) bounds a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Drop entries with IDs below this one.
    MinId(StreamId),
}

/// A stream value.
#[derive(Clone, Debug, Default)]
pub struct Stream {
    blocks: BTreeMap<StreamId, Block>,
    len: u64,
    last_id: StreamId,
    max_deleted_id: StreamId,
    entries_added: u64,
    /// Boxed so that a stream without groups (the common case) pays 8 bytes for them, not 24.
    #[allow(clippy::box_collection)]
    groups: Option<Box<BTreeMap<Vec<u8>, ConsumerGroup>>>,
    /// Idempotent production (XADD IDMP/IDMPAUTO, XCFGSET): none until first used.
    idmp: Option<Box<Idmp>>,
}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    /// Live entries.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The last ID generated or set (XADD, XSETID): the next XADD must go above it.
    pub fn last_id(&self) -> StreamId {
        self.last_id
    }

    pub fn set_last_id(&mut self, id: StreamId) {
        self.last_id = id;
    }

    /// The highest ID XDEL ever removed (Redis 7's `max-deleted-entry-id`).
    pub fn max_deleted_id(&self) -> StreamId {
        self.max_deleted_id
    }

    pub fn set_max_deleted_id(&mut self, id: StreamId) {
        self.max_deleted_id = id;
    }

    /// Entries ever added (Redis 7's `entries-added`).
    pub fn entries_added(&self) -> u64 {
        self.entries_added
    }

    pub fn set_entries_added(&mut self, n: u64) {
        self.entries_added = n;
    }

    /// Blocks holding the entries (XINFO's `radix-tree-keys`).
    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// The ID of the first live entry.
    pub fn first_id(&self) -> Option<StreamId> {
        // Blocks hold at least one live entry: the first block has it. Headers only.
        let (k, b) = self.blocks.iter().next()?;
        let mut first = None;
        b.walk(*k, None, |d, _| {
            if d.header & DELETED == 0 {
                first = Some(d.id);
                return false;
            }
            true
        });
        first
    }

    /// The ID of the last live entry.
    pub fn last_entry_id(&self) -> Option<StreamId> {
        let (k, b) = self.blocks.iter().next_back()?;
        // The usual case: the block's last entry is live (its header is the last one walked).
        let mut last = None;
        b.walk(*k, None, |d, _| {
            if d.header & DELETED == 0 {
                last = Some(d.id);
            }
            true
        });
        last
    }

    /// Appends an entry. The caller has checked `id > last_id()` (a stream's IDs strictly
    /// increase); `last_id` becomes `id` and `entries_added` grows by one.
    pub fn append(&mut self, id: StreamId, fields: &[Field<'_>]) {
        let max_entries = limits::get(&limits::STREAM_NODE_MAX_ENTRIES);
        let max_bytes = limits::get(&limits::STREAM_NODE_MAX_BYTES);
        self.append_capped(id, fields, max_entries, max_bytes)
    }

    /// [`Stream::append`] with explicit block bounds (`stream-node-max-entries` and
    /// `stream-node-max-bytes`; 0 is unbounded): a new block starts when the last one holds
    /// `max_entries` entries or the entry would take it past `max_bytes`.
    pub fn append_capped(
        &mut self,
        id: StreamId,
        fields: &[Field<'_>],
        max_entries: usize,
        max_bytes: usize,
    ) {
        debug_assert!(id > self.last_id || (self.entries_added == 0 && self.blocks.is_empty()));
        // Redis's rule (`streamAppendItem`): a new node once the last holds `max_entries`
        // entries (deleted ones included), or once its listpack's bytes plus the new entry's
        // raw field and value bytes reach `max_bytes`.
        let raw: usize = fields.iter().map(|(f, v)| f.len() + v.len()).sum();
        match self.blocks.last_entry() {
            // A block encodes its entries as increasing deltas, and its last entry may be a
            // deleted one above `id` (XSETID moved the last ID back below it): then `id`
            // opens a block of its own.
            Some(mut e)
                if (max_entries == 0 || (e.get().count as usize) < max_entries)
                    && (max_bytes == 0 || (e.get().lp_bytes() as usize) + raw < max_bytes)
                    && e.get().last < id =>
            {
                let key = *e.key();
                let b = e.get_mut();
                let prev = b.last;
                b.push(key, prev, id, fields);
            }
            last => {
                if let Some(mut e) = last {
                    // A full block takes no more entries: give back its growth slack.
                    e.get_mut().data.shrink_to_fit();
                }
                self.blocks.insert(id, Block::new(id, fields));
            }
        }
        self.len += 1;
        self.last_id = id;
        self.entries_added += 1;
    }

    /// Calls `f` with each live entry whose ID lies in `[start, end]`, ascending (or
    /// descending with `rev`), until `f` returns false.
    pub fn range<'a>(
        &'a self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        mut f: impl FnMut(StreamId, &[Field<'a>]) -> bool,
    ) {
        if start > end {
            return;
        }
        let mut buf: Vec<Field<'a>> = Vec::new();
        // The block that may hold `start` is the last one keyed at or below it.
        let lo = self.blocks.range(..=start).next_back().map_or(start, |(k, _)| *k);
        if !rev {
            for (k, b) in self.blocks.range(lo..=end) {
                if b.last < start {
                    continue;
                }
                let mut go = true;
                b.walk(*k, Some(&mut buf), |d, fields| {
                    if d.id > end {
                        go = false;
                        return false;
                    }
                    if d.id >= start && d.header & DELETED == 0 && !f(d.id, fields) {
                        go = false;
                        return false;
                    }
                    true
                });
                if !go {
                    return;
                }
            }
        } else {
            let mut owned: Vec<(StreamId, Vec<Field<'a>>)> = Vec::new();
            for (k, b) in self.blocks.range(lo..=end).rev() {
                if b.last < start {
                    return;
                }
                owned.clear();
                b.walk(*k, Some(&mut buf), |d, fields| {
                    if d.id > end {
                        return false;
                    }
                    if d.id >= start && d.header & DELETED == 0 {
                        owned.push((d.id, fields.to_vec()));
                    }
                    true
                });
                for (id, fields) in owned.iter().rev() {
                    if !f(*id, fields) {
                        return;
                    }
                }
            }
        }
    }

    /// The fields of the live entry `id`, if there is one.
    pub fn get(&self, id: StreamId) -> Option<Vec<Field<'_>>> {
        let mut out = None;
        self.range(id, id, false, |_, fields| {
            out = Some(fields.to_vec());
            false
        });
        out
    }

    pub fn contains(&self, id: StreamId) -> bool {
        let mut found = false;
        self.range(id, id, false, |_, _| {
            found = true;
            false
        });
        found
    }

    /// Deletes the live entry `id` (XDEL); false if there is none. Leaves
    /// `max_deleted_id` to the caller (XDEL moves it; trimming does not).
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&key, b)) = self.blocks.range_mut(..=id).next_back() else { return false };
        if b.last < id {
            return false;
        }
        let mut hit = None;
        b.walk(key, None, |d, _| {
            if d.id >= id {
                if d.id == id && d.header & DELETED == 0 {
                    hit = Some(d.at);
                }
                return false;
            }
            true
        });
        let Some(at) = hit else { return false };
        b.data[at] |= DELETED;
        b.live -= 1;
        if b.live == 0 {
            self.blocks.remove(&key);
        }
        self.len -= 1;
        true
    }

    /// Removes entries from the front as XTRIM does; returns how many. With `approx` only
    /// whole blocks go (so fewer may be removed than the bound allows), and at most `limit`
    /// entries (0: no limit); exact trimming ignores `limit`. Whole blocks are judged first
    /// (as Redis judges whole nodes), and blocks split where Redis's nodes do (`lp`), so an
    /// approximate trim removes the same entries here as on Redis.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let mut removed = 0u64;
        while let Some(mut e) = self.blocks.first_entry() {
            let b = e.get();
            let live = b.live as u64;
            if approx && limit > 0 && removed + live > limit {
                break;
            }
            let whole = match how {
                Trim::MaxLen(m) => self.len - live >= m,
                Trim::MinId(min) => b.last < min,
            };
            if whole {
                e.remove();
                self.len -= live;
                removed += live;
                continue;
            }
            if approx {
                break;
            }
            // Part of this block goes: its first entries become tombstones, as Redis marks
            // them deleted inside the node (which keeps its size for later appends).
            let key = *e.key();
            let mut len = self.len;
            let mut marks: Vec<usize> = Vec::new();
            b.walk(key, None, |d, _| {
                if d.header & DELETED != 0 {
                    return true;
                }
                let go = match how {
                    Trim::MaxLen(m) => len > m,
                    Trim::MinId(min) => d.id < min,
                };
                if go {
                    len -= 1;
                    marks.push(d.at);
                }
                go
            });
            let dropped = marks.len() as u64;
            let b = e.get_mut();
            for at in marks {
                b.data[at] |= DELETED;
            }
            b.live -= dropped as u32;
            if b.live == 0 {
                // A MINID bound inside the block's deleted tail: nothing live stays.
                e.remove();
            }
            self.len -= dropped;
            removed += dropped;
            break;
        }
        removed
    }

    /// Whether an XDEL tombstone may lie at or after `start` (Redis's
    /// `streamRangeHasTombstones(s, start, NULL)`: the largest deleted ID is all it knows, even
    /// when that entry was before the first live one): then a group's read counter cannot
    /// simply be incremented past it.
    pub fn has_tombstones_from(&self, start: StreamId) -> bool {
        if self.len == 0 || self.max_deleted_id == StreamId::MIN {
            return false;
        }
        start <= self.max_deleted_id
    }

    /// The logical read counter of `id` (entries added up to it), or
    /// [`ENTRIES_READ_UNKNOWN`] when deletions make it unknowable (Redis's
    /// `streamEstimateDistanceFromFirstEverEntry`).
    pub fn estimate_entries_read(&self, id: StreamId) -> i64 {
        if self.entries_added == 0 {
            return 0;
        }
        if self.len == 0 && id <= self.last_id {
            return self.entries_added as i64;
        }
        // Deleted entries lie between `id` and the last ID: how many were added there is lost.
        if id != StreamId::MIN && id < self.max_deleted_id {
            return ENTRIES_READ_UNKNOWN;
        }
        if id == self.last_id {
            return self.entries_added as i64;
        } else if id > self.last_id {
            return ENTRIES_READ_UNKNOWN;
        }
        let first = self.first_id().unwrap_or(StreamId::MIN);
        if self.max_deleted_id == StreamId::MIN || self.max_deleted_id < first {
            if id < first {
                return (self.entries_added - self.len) as i64;
            } else if id == first {
                return (self.entries_added - self.len + 1) as i64;
            }
        }
        ENTRIES_READ_UNKNOWN
    }

    /// The consumer groups, by name.
    pub fn groups(&self) -> Option<&BTreeMap<Vec<u8>, ConsumerGroup>> {
        self.groups.as_deref()
    }

    pub fn group(&self, name: &[u8]) -> Option<&ConsumerGroup> {
        self.groups.as_ref()?.get(name)
    }

    pub fn group_mut(&mut self, name: &[u8]) -> Option<&mut ConsumerGroup> {
        self.groups.as_mut()?.get_mut(name)
    }

    pub fn group_count(&self) -> usize {
        self.groups.as_ref().map_or(0, |g| g.len())
    }

    /// Adds a group; false (and no change) if one of that name exists.
    pub fn create_group(&mut self, name: &[u8], last_id: StreamId, entries_read: i64) -> bool {
        let g = self.groups.get_or_insert_with(Default::default);
        if g.contains_key(name) {
            return false;
        }
        g.insert(name.to_vec(), ConsumerGroup::new(last_id, entries_read));
        true
    }

    pub fn destroy_group(&mut self, name: &[u8]) -> bool {
        let Some(g) = self.groups.as_mut() else { return false };
        let hit = g.remove(name).is_some();
        if g.is_empty() {
            self.groups = None;
        }
        hit
    }

    /// The idempotent-production state, once IDMP, IDMPAUTO or XCFGSET has used it.
    pub fn idmp(&self) -> Option<&Idmp> {
        self.idmp.as_deref()
    }

    pub fn idmp_mut(&mut self) -> Option<&mut Idmp> {
        self.idmp.as_deref_mut()
    }

    /// The idempotent-production state, created with these settings if missing; true when
    /// it was created.
    pub fn idmp_or_init(&mut self, duration: u64, maxsize: u64) -> (&mut Idmp, bool) {
        let created = self.idmp.is_none();
        (self.idmp.get_or_insert_with(|| Box::new(Idmp::new(duration, maxsize))), created)
    }

    /// Installs state as loaded (snapshot).
    pub fn set_idmp(&mut self, idmp: Option<Idmp>) {
        self.idmp = idmp.map(Box::new);
    }

    /// Heap bytes: the boxed struct, the block map and buffers, the groups, the IDMP state.
    pub fn mem_usage(&self) -> usize {
        let blocks = self.blocks.len();
        // BTreeMap leaves hold up to 11 (key, block) pairs of 16 + 48 bytes and run about
        // 3/4 full: estimate the nodes from that.
        let map = blocks.div_ceil(8) * size_class(11 * (16 + std::mem::size_of::<Block>()) + 16);
        size_class(std::mem::size_of::<Stream>())
            + map
            + self.blocks.values().map(Block::heap_bytes).sum::<usize>()
            + self.groups.as_ref().map_or(0, |g| {
                size_class(std::mem::size_of::<BTreeMap<Vec<u8>, ConsumerGroup>>())
                    + g.iter().map(|(n, g)| size_class(n.len()) + 64 + g.mem_usage()).sum::<usize>()
            })
            + self.idmp.as_ref().map_or(0, |i| i.mem_usage())
    }

    pub fn encoding(&self) -> &'static str {
        "stream"
    }

    pub fn to_plain(&self) -> Plain {
        let mut entries = Vec::with_capacity(self.len as usize);
        self.range(StreamId::MIN, StreamId::MAX, false, |id, fields| {
            entries.push((id, fields.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect()));
            true
        });
        let groups = self
            .groups
            .iter()
            .flat_map(|g| g.iter())
            .map(|(name, g)| PlainGroup {
                name: name.clone(),
                last_id: g.last_id,
                entries_read: g.entries_read,
                pending: g
                    .pel
                    .iter()
                    .map(|(id, p)| (*id, p.consumer.to_vec(), p.delivery_time, p.delivery_count))
                    .collect(),
                consumers: g.consumers.keys().map(|k| k.to_vec()).collect(),
            })
            .collect();
        Plain::Stream(Box::new(PlainStream {
            entries,
            last_id: self.last_id,
            max_deleted_id: self.max_deleted_id,
            entries_added: self.entries_added,
            groups,
            idmp: self.idmp.as_ref().map(|i| i.plain()),
        }))
    }

    /// Builds a stream from live entries in ascending ID order and its metadata (a snapshot
    /// or a RESTORE being loaded). Refuses IDs out of order, IDs above `last_id`, and an entry
    /// without fields.
    pub fn from_entries<'a>(
        entries: impl IntoIterator<Item = (StreamId, Vec<Field<'a>>)>,
        last_id: StreamId,
        max_deleted_id: StreamId,
        entries_added: u64,
    ) -> Result<Stream, super::RawError> {
        use super::RawError;
        let mut s = Stream::new();
        let mut prev: Option<StreamId> = None;
        for (id, fields) in entries {
            if prev.is_some_and(|p| id <= p) {
                return Err(RawError("stream IDs out of order"));
            }
            if fields.is_empty() {
                return Err(RawError("stream entry without fields"));
            }
            s.append(id, &fields);
            prev = Some(id);
        }
        if prev.is_some_and(|p| p > last_id) {
            return Err(RawError("stream entry above the last ID"));
        }
        if let Some(b) = s.blocks.values_mut().next_back() {
            b.data.shrink_to_fit();
        }
        s.last_id = last_id;
        s.max_deleted_id = max_deleted_id;
        s.entries_added = entries_added;
        Ok(s)
    }

    /// Installs a group as loaded (snapshot, RESTORE); false if the name is taken.
    pub fn insert_group(&mut self, name: &[u8], group: ConsumerGroup) -> bool {
        let g = self.groups.get_or_insert_with(Default::default);
        if g.contains_key(name) {
            return false;
        }
        g.insert(name.to_vec(), group);
        true
    }
}

/// An entry of a [`PlainStream`]: its ID and field-value pairs.
pub type PlainEntry = (StreamId, Vec<(Vec<u8>, Vec<u8>)>);

/// A canonical dump of a stream (see [`Plain`]). Consumer seen/active times are left out:
/// they record when a command last ran, as a key's access time does, not data.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PlainStream {
    pub entries: Vec<PlainEntry>,
    pub last_id: StreamId,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
    pub groups: Vec<PlainGroup>,
    /// IDMP settings and iids (see [`Idmp::plain`]), when the stream has the state.
    pub idmp: Option<PlainIdmp>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PlainGroup {
    pub name: Vec<u8>,
    pub last_id: StreamId,
    pub entries_read: i64,
    /// (id, consumer, delivery time, delivery count), by id.
    pub pending: Vec<(StreamId, Vec<u8>, Millis, u64)>,
    /// Consumer names, sorted.
    pub consumers: Vec<Vec<u8>>,
}

/// `entries_read` when it is not known (Redis's `SCG_INVALID_ENTRIES_READ`).
pub const ENTRIES_READ_UNKNOWN: i64 = -1;

/// A pending (delivered, unacknowledged) entry of a group.
#[derive(Clone, Debug)]
pub struct Pending {
    pub delivery_time: Millis,
    pub delivery_count: u64,
    consumer: Arc<[u8]>,
}

impl Pending {
    /// The consumer that owns the entry.
    pub fn consumer(&self) -> &[u8] {
        &self.consumer
    }
}

/// A consumer of a group.
#[derive(Clone, Debug)]
pub struct Consumer {
    name: Arc<[u8]>,
    /// When the consumer last ran a command on the group (XINFO's `seen-time`, idle).
    pub seen_time: Millis,
    /// When it last got entries or claimed some (Redis 7.2's `active-time`); -1 never.
    pub active_time: Millis,
    pending: BTreeSet<StreamId>,
}

impl Consumer {
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// The IDs this consumer has pending, ascending.
    pub fn pending(&self) -> &BTreeSet<StreamId> {
        &self.pending
    }
}

/// A consumer group.
#[derive(Clone, Debug)]
pub struct ConsumerGroup {
    /// The last ID delivered to a consumer of the group (`>` reads after it).
    pub last_id: StreamId,
    /// Entries the group has read, or [`ENTRIES_READ_UNKNOWN`].
    pub entries_read: i64,
    pel: BTreeMap<StreamId, Pending>,
    consumers: BTreeMap<Arc<[u8]>, Consumer>,
}

impl ConsumerGroup {
    pub fn new(last_id: StreamId, entries_read: i64) -> ConsumerGroup {
        ConsumerGroup { last_id, entries_read, pel: BTreeMap::new(), consumers: BTreeMap::new() }
    }

    /// The group's pending entries, by ID.
    pub fn pel(&self) -> &BTreeMap<StreamId, Pending> {
        &self.pel
    }

    pub fn consumers(&self) -> &BTreeMap<Arc<[u8]>, Consumer> {
        &self.consumers
    }

    pub fn consumer(&self, name: &[u8]) -> Option<&Consumer> {
        self.consumers.get(name)
    }

    pub fn consumer_mut(&mut self, name: &[u8]) -> Option<&mut Consumer> {
        self.consumers.get_mut(name)
    }

    /// Creates the consumer if it is missing; true if it was created. Its times start at `now`
    /// (seen) and -1 (active).
    pub fn create_consumer(&mut self, name: &[u8], now: Millis) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        let name: Arc<[u8]> = Arc::from(name);
        self.consumers.insert(
            name.clone(),
            Consumer { name, seen_time: now, active_time: -1, pending: BTreeSet::new() },
        );
        true
    }

    /// Deletes a consumer and its pending entries; returns how many were pending, or None if
    /// there is no such consumer.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pending {
            self.pel.remove(id);
        }
        Some(c.pending.len())
    }

    /// Makes `id` pending for `consumer` (created if missing) with this delivery time and
    /// count, taking it from whichever consumer had it.
    pub fn set_pending(&mut self, id: StreamId, consumer: &[u8], delivery_time: Millis, delivery_count: u64) {
        self.create_consumer(consumer, delivery_time);
        let owner = self.consumers.get_key_value(consumer).expect("just created").0.clone();
        if let Some(p) = self.pel.get_mut(&id) {
            if *p.consumer != *consumer {
                let old = p.consumer.clone();
                if let Some(c) = self.consumers.get_mut(&*old) {
                    c.pending.remove(&id);
                }
                p.consumer = owner.clone();
            }
            p.delivery_time = delivery_time;
            p.delivery_count = delivery_count;
        } else {
            self.pel.insert(id, Pending { delivery_time, delivery_count, consumer: owner.clone() });
        }
        self.consumers.get_mut(&*owner).expect("exists").pending.insert(id);
    }

    /// Acknowledges `id`: drops it from the PEL and its consumer; false if it was not pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        let Some(p) = self.pel.remove(&id) else { return false };
        if let Some(c) = self.consumers.get_mut(&*p.consumer) {
            c.pending.remove(&id);
        }
        true
    }

    pub fn pending_mut(&mut self, id: StreamId) -> Option<&mut Pending> {
        self.pel.get_mut(&id)
    }

    fn mem_usage(&self) -> usize {
        // A BTreeMap entry costs about its key and value over a 3/4-full node.
        let pel = self.pel.len() * (16 + std::mem::size_of::<Pending>()) * 4 / 3;
        let cons: usize = self
            .consumers
            .values()
            .map(|c| size_class(c.name.len() + 16) + 96 + c.pending.len() * 16 * 4 / 3)
            .sum();
        pel + cons
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    type OwnedFields = Vec<(Vec<u8>, Vec<u8>)>;

    fn all(s: &Stream) -> Vec<PlainEntry> {
        match s.to_plain() {
            Plain::Stream(p) => p.entries,
            _ => unreachable!(),
        }
    }

    #[test]
    fn ids_parse_and_print() {
        assert_eq!(StreamId::parse(b"5-3", 0), Some(id(5, 3)));
        assert_eq!(StreamId::parse(b"5", 7), Some(id(5, 7)));
        assert_eq!(StreamId::parse(b"18446744073709551615-18446744073709551615", 0), Some(StreamId::MAX));
        for bad in [&b""[..], b"-", b"5-", b"-5", b"a-1", b"1-1-1", b"18446744073709551616", b"5--1", b"1 "] {
            assert_eq!(StreamId::parse(bad, 0), None, "{}", String::from_utf8_lossy(bad));
        }
        // Each part as Redis's string2ull reads it (checked against redis-server 8.2.3).
        assert_eq!(StreamId::parse(b"+5-+1", 0), Some(id(5, 1)));
        assert_eq!(StreamId::parse(b" 5- 1", 0), Some(id(5, 1)));
        assert_eq!(StreamId::parse(b"0000000000000000000000005", 2), Some(id(5, 2)));
        assert_eq!(parse_u64(b" -1"), Some(u64::MAX));
        assert_eq!(parse_u64(b"-9223372036854775808"), None);
        assert_eq!(parse_u64(b"-9223372036854775809"), Some(9223372036854775807));
        assert_eq!(id(1, 2).to_bytes(), b"1-2");
        assert_eq!(id(1, u64::MAX).next(), Some(id(2, 0)));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(id(2, 0).prev(), Some(id(1, u64::MAX)));
        assert_eq!(StreamId::MIN.prev(), None);
    }

    #[test]
    fn same_fields_entries_cost_their_values_only() {
        let mut s = Stream::new();
        for i in 0..100u64 {
            s.append_capped(
                id(1000 + i / 10, i % 10),
                &[(b"a", b"1"), (b"b", b"2"), (b"c", b"3")],
                100,
                4096,
            );
        }
        let b = s.blocks.values().next().unwrap();
        // 7 bytes of master fields; the first entry 1+2+6; consecutive ones 1+6; one per ms
        // change 1+2+6.
        assert_eq!(b.data.len(), 7 + 9 + 90 * 7 + 9 * 9);
        assert_eq!(s.len(), 100);
        assert_eq!(s.first_id(), Some(id(1000, 0)));
        assert_eq!(s.last_entry_id(), Some(id(1009, 9)));
    }

    #[test]
    fn trims_whole_blocks_when_approximate() {
        let mut s = Stream::new();
        for i in 1..=1000u64 {
            s.append_capped(id(i, 0), &[(b"f", b"v")], 100, 4096);
        }
        assert_eq!(s.trim(Trim::MaxLen(555), true, 0), 400);
        assert_eq!(s.len(), 600);
        assert_eq!(s.trim(Trim::MaxLen(555), false, 0), 45);
        assert_eq!(s.first_id(), Some(id(446, 0)));
        assert_eq!(s.trim(Trim::MinId(id(500, 1)), false, 0), 55);
        assert_eq!(s.first_id(), Some(id(501, 0)));
        assert_eq!(s.len(), 500);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Add(u64, u8, Vec<(u8, u8)>),
        Del(u64),
        Trim(bool, u64, bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u64..3, 1u8..4, prop::collection::vec((0u8..4, any::<u8>()), 1..4))
                .prop_map(|(d, s, f)| Op::Add(d, s, f)),
            2 => (0u64..200).prop_map(Op::Del),
            1 => (any::<bool>(), 0u64..60, any::<bool>()).prop_map(|(m, n, a)| Op::Trim(m, n, a)),
        ]
    }

    proptest! {
        /// Against a model (a BTreeMap of live entries): every read agrees after any sequence
        /// of appends, deletes and trims, at small block sizes so blocks split and empty.
        #[test]
        fn agrees_with_a_model(ops in prop::collection::vec(op(), 1..120), cap in 1usize..6) {
            let mut s = Stream::new();
            let mut model: BTreeMap<StreamId, OwnedFields> = BTreeMap::new();
            let mut ids = Vec::new();
            for op in ops {
                match op {
                    Op::Add(dms, dseq, f) => {
                        let last = s.last_id();
                        let nid = if dms == 0 { id(last.ms, last.seq + dseq as u64) } else { id(last.ms + dms, dseq as u64) };
                        let fields: Vec<(Vec<u8>, Vec<u8>)> = f.iter().map(|(k, v)| (vec![b'f', *k], vec![*v; (*v % 5) as usize])).collect();
                        let refs: Vec<Field<'_>> = fields.iter().map(|(k, v)| (&k[..], &v[..])).collect();
                        s.append_capped(nid, &refs, cap, 64);
                        model.insert(nid, fields);
                        ids.push(nid);
                    }
                    Op::Del(i) => {
                        if ids.is_empty() { continue; }
                        let victim = ids[(i as usize) % ids.len()];
                        prop_assert_eq!(s.delete(victim), model.remove(&victim).is_some());
                    }
                    Op::Trim(maxlen, n, approx) => {
                        let how = if maxlen { Trim::MaxLen(n) } else {
                            Trim::MinId(ids.get(n as usize % ids.len().max(1)).copied().unwrap_or_default())
                        };
                        let before = s.len();
                        let removed = s.trim(how, approx, 0);
                        prop_assert_eq!(before - removed, s.len());
                        // Trimming removes a prefix of the live entries.
                        let keys: Vec<StreamId> = model.keys().copied().collect();
                        for k in keys.iter().take(removed as usize) {
                            model.remove(k);
                        }
                        if !approx {
                            match how {
                                Trim::MaxLen(m) => prop_assert!(s.len() <= m),
                                Trim::MinId(min) => prop_assert!(model.keys().all(|k| *k >= min)),
                            }
                        }
                    }
                }
                prop_assert_eq!(s.len(), model.len() as u64);
                let got = all(&s);
                let want: Vec<_> = model.iter().map(|(k, v)| (*k, v.clone())).collect();
                prop_assert_eq!(&got, &want);
                let mut rev = Vec::new();
                s.range(StreamId::MIN, StreamId::MAX, true, |i, _| { rev.push(i); true });
                let mut fwd: Vec<StreamId> = model.keys().copied().collect();
                fwd.reverse();
                prop_assert_eq!(rev, fwd);
                if let (Some(a), Some(b)) = (ids.first(), ids.last()) {
                    let mid = id((a.ms + b.ms) / 2, 1);
                    let mut sub = Vec::new();
                    s.range(mid, *b, false, |i, _| { sub.push(i); true });
                    let want: Vec<StreamId> = model.range(mid..=*b).map(|(k, _)| *k).collect();
                    prop_assert_eq!(sub, want);
                }
            }
        }
    }

    #[test]
    fn groups_keep_pel_and_consumers_in_agreement() {
        let mut g = ConsumerGroup::new(StreamId::MIN, 0);
        g.set_pending(id(1, 0), b"alice", 10, 1);
        g.set_pending(id(2, 0), b"alice", 10, 1);
        g.set_pending(id(2, 0), b"bob", 20, 2);
        assert_eq!(g.consumer(b"alice").unwrap().pending().len(), 1);
        assert_eq!(g.consumer(b"bob").unwrap().pending().iter().copied().collect::<Vec<_>>(), vec![id(2, 0)]);
        assert_eq!(g.pel()[&id(2, 0)].consumer(), b"bob");
        assert!(g.ack(id(1, 0)));
        assert!(!g.ack(id(1, 0)));
        assert!(g.consumer(b"alice").unwrap().pending().is_empty());
        assert_eq!(g.delete_consumer(b"bob"), Some(1));
        assert!(g.pel().is_empty());
        assert_eq!(g.delete_consumer(b"bob"), None);
    }
}
