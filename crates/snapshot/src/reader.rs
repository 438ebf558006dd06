//! The reading side: blocks verified one by one, records decoded straight into the store's
//! compact encodings.
//!
//! Trust: every block's header and payload are checked against their CRC-32C before anything
//! in them is used, which catches damage; a crafted file can carry valid checksums, so every
//! length and value is also validated (the store's `from_raw` constructors check their
//! encodings fully). Nothing here panics or allocates more than the file's own bytes justify
//! (lengths are never trusted for an allocation up front, except the bounded key-count hint).

use crate::format::*;
use crate::{LoadError, Meta, Progress, Summary, TypeCounts};
use std::io::{self, Read};
use store::types::{Hash, List, Set, SparseArray, ZSet};
use store::{Keyspace, Value};

/// The key-count hint of the header presizes the table at most this far (a crafted header
/// must not make the loader allocate gigabytes of buckets up front; past it, the table grows).
const MAX_PRESIZE_KEYS: u64 = 1 << 26;
/// A straddling value's scratch buffer above this size is freed after use.
const SCRATCH_KEEP: usize = 1 << 20;

/// One block as [`blocks`] lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    pub index: u64,
    /// `b'H'`, `b'D'` or `b'T'`.
    pub kind: u8,
    /// File offset of the block's header.
    pub offset: u64,
    /// Payload bytes in the file.
    pub stored_len: u32,
    /// Payload bytes once decompressed.
    pub raw_len: u32,
    pub lz4: bool,
}

/// Reads a whole snapshot of database 0 into a fresh keyspace, block by block (see
/// [`read_dbs`]). A snapshot that holds another database is refused with
/// [`LoadError::OtherDatabases`] at the selector of its first other database (after loading
/// database 0, then dropped): read such a file with [`read_dbs`].
pub fn read<R: Read>(
    r: R,
    progress: &mut dyn FnMut(&Progress),
) -> Result<(Keyspace, Meta, Summary), LoadError> {
    let (mut dbs, meta, summary) = read_impl(r, progress, false)?;
    debug_assert_eq!(dbs.len(), 1);
    let (_, ks) = dbs.swap_remove(0);
    Ok((ks, meta, summary))
}

/// Reads a whole snapshot into fresh keyspaces, block by block: every database that holds a
/// key, as (database number, keyspace) in increasing number order, database 0 always first
/// (empty when it holds no key). On any error nothing is returned but the error: partly loaded
/// keyspaces are dropped. `r` needs no buffering (the reader asks for whole block headers and
/// payloads). Keys past their deadline are loaded like any other; the server's expiry removes
/// them. `progress` is called after the header and after each block; its key counts are
/// totals over all databases, as are the [`Summary`]'s.
pub fn read_dbs<R: Read>(
    r: R,
    progress: &mut dyn FnMut(&Progress),
) -> Result<(Vec<(u32, Keyspace)>, Meta, Summary), LoadError> {
    read_impl(r, progress, true)
}

/// Where a database selector ended: (block, block offset, payload position).
type Place = (u64, u64, u64);

fn read_impl<R: Read>(
    r: R,
    progress: &mut dyn FnMut(&Progress),
    all_databases: bool,
) -> Result<(Vec<(u32, Keyspace)>, Meta, Summary), LoadError> {
    let mut br = BlockReader::new(r);
    br.prelude()?;
    let (meta, total_keys) = br.header()?;
    // The header's key count (a total over all databases) presizes database 0's table; the
    // other databases' tables grow as their keys arrive.
    let mut dbs = vec![(0u32, Keyspace::with_capacity(total_keys.min(MAX_PRESIZE_KEYS) as usize))];
    let mut p = Progress { keys: 0, total_keys, bytes: br.pos, blocks: 1 };
    progress(&p);
    let mut key = Vec::new();
    let mut keys = 0u64;
    let mut volatile = 0u64;
    let mut types = TypeCounts::default();
    let mut last_block = br.index;
    // The last selector, while no record has followed it yet: (its database, where it ended).
    let mut pending: Option<(u32, Place)> = None;
    while br.more_records()? {
        // `more_records` left at least one byte of the current block to read.
        if br.buf[br.at] == TAG_SELECT_DB {
            if let Some((n, place)) = pending {
                return Err(malformed_at(place, format!("no key after the selector of database {n}")));
            }
            let n = br.selector(dbs.last().expect("database 0").0)?;
            if !all_databases {
                return Err(LoadError::OtherDatabases { block: br.index, offset: br.block_off, db: n });
            }
            dbs.push((n, Keyspace::new()));
            pending = Some((n, (br.index, br.block_off, br.at as u64)));
        } else {
            let ks = &mut dbs.last_mut().expect("database 0").1;
            let (kind, deadline) = br.record(&mut key, ks)?;
            pending = None;
            keys += 1;
            volatile += deadline as u64;
            types.bump(kind);
        }
        if br.index != last_block {
            last_block = br.index;
            p.keys = keys;
            p.bytes = br.pos;
            p.blocks = br.index + 1;
            progress(&p);
        }
    }
    if let Some((n, place)) = pending {
        return Err(malformed_at(place, format!("no key after the selector of database {n}")));
    }
    // `more_records` stopped at the trailer block, now in `br.buf`.
    let t = br.trailer()?;
    let found = [
        ("keys", t.keys, keys),
        ("keys with a deadline", t.volatile, volatile),
        ("string keys", t.types[0], types.strings),
        ("hash keys", t.types[1], types.hashes),
        ("set keys", t.types[2], types.sets),
        ("sorted set keys", t.types[3], types.zsets),
        ("list keys", t.types[4], types.lists),
        ("array keys", t.types[5], types.arrays),
        ("stream keys", t.streams, types.streams),
        ("vector set keys", t.vsets, types.vsets),
        ("data blocks", t.data_blocks, br.data_blocks),
        ("data bytes", t.data_bytes, br.raw_data_bytes),
    ];
    for (what, trailer, found) in found {
        if trailer != found {
            return Err(LoadError::CountMismatch { what, trailer, found });
        }
    }
    br.expect_eof()?;
    p.keys = keys;
    p.bytes = br.pos;
    p.blocks = br.index + 1;
    progress(&p);
    let summary = Summary {
        keys,
        volatile,
        types,
        bytes: br.pos,
        blocks: br.index + 1,
        raw_data_bytes: br.raw_data_bytes,
    };
    Ok((dbs, meta, summary))
}

fn malformed_at((block, offset, pos): Place, what: String) -> LoadError {
    LoadError::Malformed { block, offset, pos, what }
}

/// Reads only the prelude and the header block (checksums verified): for tooling, and to
/// check a downloaded snapshot's lineage before installing it.
pub fn read_meta<R: Read>(r: R) -> Result<Meta, LoadError> {
    let mut br = BlockReader::new(r);
    br.prelude()?;
    Ok(br.header()?.0)
}

/// Lists every block with its offset, verifying the prelude, the block numbering, every
/// checksum and the end of file (not the records): for tooling and tests.
pub fn blocks<R: Read>(r: R) -> Result<Vec<BlockInfo>, LoadError> {
    let mut br = BlockReader::new(r);
    br.prelude()?;
    let mut out = Vec::new();
    loop {
        let info = br.next_block()?;
        out.push(info);
        if info.kind == KIND_TRAILER {
            break;
        }
    }
    br.expect_eof()?;
    Ok(out)
}

struct Trailer {
    keys: u64,
    volatile: u64,
    types: [u64; 6],
    /// 0 when the trailer has no stream count (a file without streams).
    streams: u64,
    /// 0 when the trailer has no vector set count.
    vsets: u64,
    data_blocks: u64,
    data_bytes: u64,
}

struct BlockReader<R: Read> {
    r: R,
    /// File offset of the next byte to read from `r`.
    pos: u64,
    /// Index of the block in `buf` (0: the header; the prelude counts as part of block 0).
    index: u64,
    /// File offset of that block.
    block_off: u64,
    /// Kind of that block.
    kind: u8,
    /// Its (decompressed) payload, and the read position in it.
    buf: Vec<u8>,
    at: usize,
    /// Compressed payload, before decompression.
    stored: Vec<u8>,
    /// A read that spans blocks is gathered here.
    scratch: Vec<u8>,
    /// Whether any block was read yet (the first is block 0).
    started: bool,
    data_blocks: u64,
    raw_data_bytes: u64,
    /// The file's format version (from the prelude).
    version: u32,
}

impl<R: Read> BlockReader<R> {
    fn new(r: R) -> Self {
        BlockReader {
            r,
            pos: 0,
            index: 0,
            block_off: 0,
            kind: 0,
            buf: Vec::new(),
            at: 0,
            stored: Vec::new(),
            scratch: Vec::new(),
            started: false,
            data_blocks: 0,
            raw_data_bytes: 0,
            version: 0,
        }
    }

    /// The index and offset of the block being read or, between blocks, the next one.
    fn next_index(&self) -> u64 {
        if self.started {
            self.index + 1
        } else {
            0
        }
    }

    /// Fills `dst` from the file; an end of file inside it is `Truncated` for block `block`
    /// starting at `block_off`.
    fn fill_exact(&mut self, dst: &mut [u8], block: u64, block_off: u64) -> Result<(), LoadError> {
        let mut got = 0;
        while got < dst.len() {
            match self.r.read(&mut dst[got..]) {
                Ok(0) => return Err(LoadError::Truncated { block, offset: block_off, at: self.pos }),
                Ok(n) => {
                    got += n;
                    self.pos += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(LoadError::Io(e)),
            }
        }
        Ok(())
    }

    fn malformed(&self, what: impl Into<String>) -> LoadError {
        LoadError::Malformed {
            block: self.index,
            offset: self.block_off,
            pos: self.at as u64,
            what: what.into(),
        }
    }

    fn prelude(&mut self) -> Result<(), LoadError> {
        let mut p = [0u8; PRELUDE_LEN];
        // A file shorter than the magic is judged by the bytes it has: not ours, or cut short.
        let mut got = 0;
        while got < PRELUDE_LEN {
            match self.r.read(&mut p[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(LoadError::Io(e)),
            }
        }
        self.pos = got as u64;
        let m = got.min(MAGIC.len());
        if p[..m] != MAGIC[..m] {
            return Err(LoadError::BadMagic { found: p[..m].to_vec() });
        }
        if got < PRELUDE_LEN {
            return Err(LoadError::Truncated { block: 0, offset: 0, at: got as u64 });
        }
        let version = u32::from_le_bytes(p[8..12].try_into().expect("4 bytes"));
        if version > FORMAT_VERSION {
            return Err(LoadError::NewerVersion { found: version, supported: FORMAT_VERSION });
        }
        if version == 0 {
            return Err(LoadError::BadVersion { found: version });
        }
        self.version = version;
        Ok(())
    }

    /// Reads, verifies and decompresses the next block into `buf`.
    fn next_block(&mut self) -> Result<BlockInfo, LoadError> {
        let index = self.next_index();
        let off = self.pos;
        let mut h = [0u8; BLOCK_HEADER_LEN];
        self.fill_exact(&mut h, index, off)?;
        let (kind, flags) = (h[0], h[1]);
        let u32_at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().expect("4 bytes"));
        if u32_at(20) != header_crc(&h) {
            return Err(LoadError::ChecksumMismatch { block: index, offset: off, part: "header" });
        }
        self.started = true;
        self.index = index;
        self.block_off = off;
        self.kind = kind;
        self.buf.clear();
        self.at = 0;
        let (stored_len, raw_len) = (u32_at(8) as usize, u32_at(12) as usize);
        let lz4 = flags & FLAG_LZ4 != 0;
        // The header checksum held: from here on a bad field is a writer's error or a crafted
        // file, reported as malformed.
        if u32_at(4) as u64 != index {
            return Err(self.malformed(format!("block numbered {} where {index} belongs", u32_at(4))));
        }
        if flags & !KNOWN_FLAGS != 0 || h[2] != 0 || h[3] != 0 {
            return Err(self.malformed("unknown block flags"));
        }
        if ![KIND_HEADER, KIND_DATA, KIND_TRAILER].contains(&kind) {
            return Err(self.malformed(format!("unknown block kind 0x{kind:02x}")));
        }
        if raw_len > MAX_BLOCK || (lz4 && stored_len >= raw_len) || (!lz4 && stored_len != raw_len) {
            return Err(self.malformed("block lengths out of range"));
        }
        let mut stored = std::mem::take(&mut self.stored);
        stored.resize(stored_len, 0);
        let r = self.fill_exact(&mut stored, index, off);
        if let Err(e) = r {
            self.stored = stored;
            return Err(e);
        }
        if crc32c::crc32c(&stored) != u32_at(16) {
            self.stored = stored;
            return Err(LoadError::ChecksumMismatch { block: index, offset: off, part: "payload" });
        }
        if lz4 {
            self.buf.resize(raw_len, 0);
            let ok =
                matches!(lz4_flex::block::decompress_into(&stored, &mut self.buf), Ok(n) if n == raw_len);
            self.stored = stored;
            if !ok {
                self.buf.clear();
                return Err(self.malformed("LZ4 data does not decompress to the stated length"));
            }
        } else {
            // Keep the payload itself as `buf`; the old `buf` becomes the next scratch.
            std::mem::swap(&mut self.buf, &mut stored);
            self.stored = stored;
        }
        Ok(BlockInfo {
            index,
            kind,
            offset: off,
            stored_len: stored_len as u32,
            raw_len: raw_len as u32,
            lz4,
        })
    }

    /// Reads the header block: the metadata and the key-count hint.
    fn header(&mut self) -> Result<(Meta, u64), LoadError> {
        let info = self.next_block()?;
        if info.kind != KIND_HEADER {
            return Err(self.malformed("the first block is not a header block"));
        }
        let server_version = self.local_string("server version")?;
        let created_unix_ms = self.local_u64("creation time")? as i64;
        let replid = self.local_string("replication id")?;
        let logical_offset = self.local_u64("logical offset")?;
        let kafka_acked_offset = self.local_u64("Kafka acknowledged offset")? as i64;
        let kafka_consumer_position = self.local_u64("Kafka consumer position")? as i64;
        let keys = self.local_u64("key count")?;
        // The table's hash secrets, when the writer recorded them: adopting them before any
        // key is hashed in this process makes the load fill the table's buckets in order
        // (sequential memory access instead of one cache miss per key). A process that has
        // hashed already keeps its own secrets; the load is then merely slower.
        let has_secrets = self.buf.len() - self.at >= 24;
        if has_secrets {
            let mut k = [0u64; 3];
            for (i, w) in k.iter_mut().enumerate() {
                let at = self.at + 8 * i;
                *w = u64::from_le_bytes(self.buf[at..at + 8].try_into().expect("8 bytes"));
            }
            store::keyspace::hash::KeyHasher::adopt_global(k);
        }
        // Version 2: the hash secrets are required, and the function libraries follow them.
        let mut functions = Vec::new();
        if self.version >= 2 {
            if self.buf.len() - self.at < 24 {
                return Err(self.malformed("missing table hash secrets"));
            }
            self.at += 24;
            let n = self.local_varint("function library count")?;
            for _ in 0..n {
                let len = self.local_varint("function library length")?;
                let end = usize::try_from(len)
                    .ok()
                    .and_then(|n| self.at.checked_add(n))
                    .filter(|&e| e <= self.buf.len())
                    .ok_or_else(|| self.malformed("function library overruns the block"))?;
                functions.push(self.buf[self.at..end].to_vec());
                self.at = end;
            }
        }
        // Then the additions (FORMAT.md, "Header additions"): only a writer that recorded the
        // secrets writes any, after them (version 1) or after the libraries (version 2).
        let mut unconfirmed = Vec::new();
        let mut previous = None;
        if has_secrets {
            if self.version < 2 {
                self.at += 24;
            }
            while self.at < self.buf.len() {
                let tag = self.buf[self.at];
                self.at += 1;
                let len = self.local_varint("header addition length")?;
                let end = usize::try_from(len)
                    .ok()
                    .and_then(|n| self.at.checked_add(n))
                    .filter(|&e| e <= self.buf.len())
                    .ok_or_else(|| self.malformed("header addition overruns the block"))?;
                if tag == ADDITION_UNCONFIRMED {
                    unconfirmed = self.unconfirmed(end)?;
                } else if tag == ADDITION_PREVIOUS {
                    let id = self.local_string("predecessor lineage")?;
                    let at = self.local_u64("predecessor offset")?;
                    if self.at != end {
                        return Err(
                            self.malformed("the predecessor addition's length does not match its fields")
                        );
                    }
                    previous = Some((id, at));
                }
                // Unknown tags: a later writer's additions, skipped.
                self.at = end;
            }
        }
        self.at = self.buf.len();
        let meta = Meta {
            server_version,
            created_unix_ms,
            replid,
            logical_offset,
            kafka_acked_offset,
            kafka_consumer_position,
            functions,
            unconfirmed,
            previous,
        };
        Ok((meta, keys))
    }

    /// The unconfirmed-mutations addition, whose payload ends at `end`: a count, then per
    /// entry the offset's gap from the previous one (the first: from 0) and an 8-byte hash.
    fn unconfirmed(&mut self, end: usize) -> Result<Vec<(u64, u64)>, LoadError> {
        let n = self.local_varint("unconfirmed mutation count")?;
        // Each entry takes at least 9 bytes: a count beyond what the payload holds is damage.
        if n > (end.saturating_sub(self.at) / 9) as u64 {
            return Err(self.malformed(format!("{n} unconfirmed mutations do not fit their addition")));
        }
        let mut out = Vec::with_capacity(n as usize);
        let mut prev: Option<u64> = None;
        for _ in 0..n {
            let gap = self.local_varint("unconfirmed mutation offset")?;
            let offset = match prev {
                None => gap,
                Some(p) if gap > 0 => p
                    .checked_add(gap)
                    .ok_or_else(|| self.malformed("unconfirmed mutation offset overflows"))?,
                Some(_) => return Err(self.malformed("unconfirmed mutations out of order")),
            };
            if self.at + 8 > end {
                return Err(self.malformed("unconfirmed mutation hash overruns its addition"));
            }
            let hash = self.local_u64("unconfirmed mutation hash")?;
            out.push((offset, hash));
            prev = Some(offset);
        }
        if self.at != end {
            return Err(self.malformed("bytes left in the unconfirmed mutations addition"));
        }
        Ok(out)
    }

    /// A varint within the current block (header and trailer fields never straddle).
    fn local_varint(&mut self, what: &str) -> Result<u64, LoadError> {
        let (v, next) =
            get_varint(&self.buf, self.at).ok_or_else(|| self.malformed(format!("bad {what}")))?;
        self.at = next;
        Ok(v)
    }

    fn local_u64(&mut self, what: &str) -> Result<u64, LoadError> {
        let b =
            self.buf.get(self.at..self.at + 8).ok_or_else(|| self.malformed(format!("missing {what}")))?;
        let v = u64::from_le_bytes(b.try_into().expect("8 bytes"));
        self.at += 8;
        Ok(v)
    }

    fn local_string(&mut self, what: &str) -> Result<String, LoadError> {
        let n = self.local_varint(what)?;
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.at.checked_add(n))
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| self.malformed(format!("{what} overruns the block")))?;
        let s = String::from_utf8(self.buf[self.at..end].to_vec())
            .map_err(|_| self.malformed(format!("{what} is not UTF-8")))?;
        self.at = end;
        Ok(s)
    }

    /// Moves to the next data block once the current payload is used up. Returns false when
    /// the next block is the trailer (left in `buf`).
    fn advance(&mut self) -> Result<bool, LoadError> {
        let info = self.next_block()?;
        match info.kind {
            KIND_DATA => {
                if info.raw_len == 0 {
                    return Err(self.malformed("empty data block"));
                }
                self.data_blocks += 1;
                self.raw_data_bytes += info.raw_len as u64;
                Ok(true)
            }
            KIND_TRAILER => Ok(false),
            _ => Err(self.malformed("a second header block")),
        }
    }

    /// True when another record follows; false at the trailer (which `buf` then holds).
    fn more_records(&mut self) -> Result<bool, LoadError> {
        if self.kind == KIND_TRAILER {
            return Ok(false);
        }
        if self.at < self.buf.len() {
            return Ok(true);
        }
        self.advance()
    }

    /// The next `n` bytes of the data stream as one slice: in place when the current block
    /// holds them, else gathered across blocks into `scratch`.
    #[inline]
    fn take(&mut self, n: usize) -> Result<&[u8], LoadError> {
        if n <= self.buf.len() - self.at {
            let s = &self.buf[self.at..self.at + n];
            self.at += n;
            return Ok(s);
        }
        self.take_slow(n)
    }

    fn take_slow(&mut self, n: usize) -> Result<&[u8], LoadError> {
        if self.scratch.capacity() > SCRATCH_KEEP {
            self.scratch = Vec::new();
        }
        self.scratch.clear();
        let mut scratch = std::mem::take(&mut self.scratch);
        while scratch.len() < n {
            if self.at == self.buf.len() && !self.advance()? {
                self.scratch = scratch;
                return Err(self.malformed("record cut short by the trailer"));
            }
            // Grow with the data actually read, never by the untrusted `n` up front.
            let k = (n - scratch.len()).min(self.buf.len() - self.at);
            scratch.extend_from_slice(&self.buf[self.at..self.at + k]);
            self.at += k;
        }
        self.scratch = scratch;
        Ok(&self.scratch[..n])
    }

    #[inline]
    fn byte(&mut self) -> Result<u8, LoadError> {
        Ok(self.take(1)?[0])
    }

    #[inline]
    fn varint(&mut self) -> Result<u64, LoadError> {
        if let Some((v, next)) = get_varint(&self.buf, self.at) {
            self.at = next;
            return Ok(v);
        }
        // Straddles a block boundary (or is bad): byte by byte.
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            if i == 9 && b > 1 {
                break;
            }
            v |= ((b & 0x7F) as u64) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(self.malformed("bad varint"))
    }

    /// A length that must fit in memory.
    fn len(&mut self, what: &str) -> Result<usize, LoadError> {
        let v = self.varint()?;
        usize::try_from(v).map_err(|_| self.malformed(format!("{what} too large")))
    }

    /// Decodes a database selector (its tag is next) and checks it: a version-3 file, a
    /// database above `prev` (so never 0) and at most [`MAX_DATABASE`]. Returns its database.
    fn selector(&mut self, prev: u32) -> Result<u32, LoadError> {
        self.byte()?;
        if self.version < VERSION_SELECTORS {
            return Err(self.malformed(format!("a database selector in a version-{} file", self.version)));
        }
        let n = self.varint()?;
        if n > MAX_DATABASE as u64 {
            return Err(self.malformed(format!("database {n} is above {MAX_DATABASE}")));
        }
        if n <= prev as u64 {
            return Err(self.malformed(if n == 0 {
                "a selector of database 0 (its keys come first, unmarked)".to_string()
            } else {
                format!("database {n} selected after database {prev}")
            }));
        }
        Ok(n as u32)
    }

    /// Decodes one record into `ks`; returns its type and whether it has a deadline.
    fn record(&mut self, key: &mut Vec<u8>, ks: &mut Keyspace) -> Result<(store::Kind, bool), LoadError> {
        let tag = self.byte()?;
        let code = tag & 0x0F;
        if tag & !(0x0F | TAG_EXPIRY) != 0 || code > MAX_CODE {
            return Err(self.malformed(format!("unknown record tag 0x{tag:02x}")));
        }
        let deadline = if tag & TAG_EXPIRY != 0 {
            Some(i64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
        } else {
            None
        };
        let klen = self.len("key length")?;
        key.clear();
        key.extend_from_slice(self.take(klen)?);
        let value = self.value(code)?;
        let kind = value.kind();
        if ks.put(key, value, deadline) {
            return Err(self.malformed("duplicate key"));
        }
        Ok((kind, deadline.is_some()))
    }

    fn value(&mut self, code: u8) -> Result<Value, LoadError> {
        let bad = |s: &Self, e: store::types::RawError| s.malformed(e.0);
        Ok(match code {
            CODE_STR => {
                let n = self.len("string length")?;
                Value::Str(self.take(n)?.to_vec())
            }
            CODE_INT => Value::Int(unzigzag(self.varint()?)),
            CODE_SET_INTS => {
                let count = self.varint()?;
                if count == 0 || count > store::limits::INTSET_HARD_MAX as u64 {
                    return Err(self.malformed("intset size out of range"));
                }
                let mut v = Vec::with_capacity(count as usize);
                let mut prev: Option<i64> = None;
                for _ in 0..count {
                    let x = self.varint()?;
                    let i = match prev {
                        None => unzigzag(x),
                        Some(p) => {
                            p.checked_add_unsigned(x).ok_or_else(|| self.malformed("intset overflows"))?
                        }
                    };
                    v.push(i);
                    prev = Some(i);
                }
                Value::Set(Box::new(Set::from_ints(v).map_err(|e| bad(self, e))?))
            }
            CODE_HASH | CODE_SET | CODE_ZSET | CODE_LIST => {
                let count = self.len("element count")?;
                let n = self.len("value length")?;
                let raw = self.take(n)?;
                let v = match code {
                    CODE_HASH => Hash::from_raw(raw, count).map(|h| Value::Hash(Box::new(h))),
                    CODE_SET => Set::from_raw(raw, count).map(|s| Value::Set(Box::new(s))),
                    CODE_ZSET => ZSet::from_raw(raw, count).map(|z| Value::ZSet(Box::new(z))),
                    _ => List::from_raw(raw, count).map(|l| Value::List(Box::new(l))),
                };
                v.map_err(|e| bad(self, e))?
            }
            CODE_HASH_DEADLINES => {
                let count = self.len("element count")?;
                let n = self.len("value length")?;
                let raw = self.take(n)?;
                let mut h = Hash::from_raw(raw, count).map_err(|e| bad(self, e))?;
                let k = self.len("field deadline count")?;
                if k == 0 || k > h.len() {
                    return Err(self.malformed("field deadline count out of range"));
                }
                for _ in 0..k {
                    let flen = self.len("field length")?;
                    let field = self.take(flen)?.to_vec();
                    let at = i64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes"));
                    if h.field_deadline(&field).is_some() || !h.set_field_deadline(&field, Some(at)) {
                        return Err(self.malformed("a field deadline for a missing or repeated field"));
                    }
                }
                Value::Hash(Box::new(h))
            }
            CODE_VSET => {
                let n = self.len("value length")?;
                let raw = self.take(n)?;
                let v = store::types::vset::VectorSet::decode(raw).map_err(|e| bad(self, e))?;
                Value::VectorSet(Box::new(v))
            }
            CODE_STREAM => {
                let n = self.len("value length")?;
                let raw = self.take(n)?;
                let st = crate::stream::decode(raw).map_err(|e| self.malformed(e))?;
                Value::Stream(Box::new(st))
            }
            _ => {
                let count = self.varint()?;
                let cursor = self.varint()?.wrapping_sub(1);
                let n = self.len("value length")?;
                let raw = self.take(n)?;
                let a = SparseArray::from_raw(raw, count, cursor).map_err(|e| bad(self, e))?;
                Value::Array(Box::new(a))
            }
        })
    }

    /// Decodes the trailer block `more_records` stopped at.
    fn trailer(&mut self) -> Result<Trailer, LoadError> {
        let keys = self.local_varint("key count")?;
        let volatile = self.local_varint("deadline count")?;
        let mut types = [0u64; 6];
        for t in &mut types {
            *t = self.local_varint("type count")?;
        }
        let data_blocks = self.local_varint("block count")?;
        let data_bytes = self.local_varint("data byte count")?;
        // The stream count follows only when the file holds streams (and is then not 0).
        // The vector set count after it, only when the file holds vector sets (the stream
        // count is then present even when 0).
        let (mut streams, mut vsets) = (0, 0);
        if self.at != self.buf.len() {
            streams = self.local_varint("stream count")?;
            if self.at != self.buf.len() {
                vsets = self.local_varint("vector set count")?;
                if vsets == 0 {
                    return Err(self.malformed("a vector set count of 0 in the trailer"));
                }
            } else if streams == 0 {
                return Err(self.malformed("a stream count of 0 in the trailer"));
            }
        }
        if self.at != self.buf.len() {
            return Err(self.malformed("unexpected bytes in the trailer"));
        }
        Ok(Trailer { keys, volatile, types, streams, vsets, data_blocks, data_bytes })
    }

    /// Checks that the file ends here.
    fn expect_eof(&mut self) -> Result<(), LoadError> {
        let mut b = [0u8; 1];
        loop {
            match self.r.read(&mut b) {
                Ok(0) => return Ok(()),
                Ok(_) => return Err(LoadError::TrailingGarbage { offset: self.pos }),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(LoadError::Io(e)),
            }
        }
    }
}
