//! The writing side: a keyspace streamed into checksummed blocks.

use crate::format::*;
use crate::{Compression, Meta, Options, Progress, Summary, TypeCounts};
use std::io::{self, Write};
use store::{Keyspace, StrRef, ValueRef};

/// Streams `ks` to `w` as a `.gcsn` snapshot of database 0, with the default [`Options`]
/// (see [`write_dbs_with`]).
pub fn write<W: Write>(
    w: W,
    ks: &Keyspace,
    meta: &Meta,
    progress: &mut dyn FnMut(&Progress),
) -> io::Result<Summary> {
    write_dbs_with(w, &[(0, ks)], meta, &Options::default(), progress)
}

/// Streams `ks` to `w` as a `.gcsn` snapshot of database 0 (see [`write_dbs_with`]).
pub fn write_with<W: Write>(
    w: W,
    ks: &Keyspace,
    meta: &Meta,
    opts: &Options,
    progress: &mut dyn FnMut(&Progress),
) -> io::Result<Summary> {
    write_dbs_with(w, &[(0, ks)], meta, opts, progress)
}

/// Streams the databases `dbs` to `w` as a `.gcsn` snapshot with the default [`Options`]
/// (see [`write_dbs_with`]).
pub fn write_dbs<W: Write>(
    w: W,
    dbs: &[(u32, &Keyspace)],
    meta: &Meta,
    progress: &mut dyn FnMut(&Progress),
) -> io::Result<Summary> {
    write_dbs_with(w, dbs, meta, &Options::default(), progress)
}

/// Streams the databases `dbs` to `w` as a `.gcsn` snapshot: prelude, header block, data
/// blocks, trailer.
///
/// `dbs` are (database number, keyspace), numbers strictly increasing and at most
/// [`crate::MAX_DATABASE`] (`InvalidInput` otherwise, before anything is written). An empty
/// keyspace writes nothing. Database 0's records come first, unmarked; each later database
/// with a record is introduced by a database selector, which makes the file format version 3.
/// A snapshot whose records are all in database 0 is byte for byte what [`write_with`]
/// writes (version 1, or 2 with function libraries). The header's key count and the
/// trailer's counts are totals over all databases.
///
/// Memory: one block buffer of `opts.block_size` bytes (plus its compressed copy with LZ4),
/// whatever the dataset's size; values are read in place from the keyspaces. `w` needs no
/// buffering (blocks go out in two writes each). `progress` is called after every block. The
/// writer flushes `w` at the end but does not sync it (see [`crate::save_atomic`]). Keys
/// whose deadline has passed are written like any other: the loading server's expiry removes
/// them.
pub fn write_dbs_with<W: Write>(
    w: W,
    dbs: &[(u32, &Keyspace)],
    meta: &Meta,
    opts: &Options,
    progress: &mut dyn FnMut(&Progress),
) -> io::Result<Summary> {
    let mut prev: Option<u32> = None;
    for &(n, _) in dbs {
        if prev.is_some_and(|p| n <= p) || n > MAX_DATABASE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "database {n} out of order or out of range (numbers strictly increasing, at most \
                     {MAX_DATABASE})"
                ),
            ));
        }
        prev = Some(n);
    }
    let total_keys: u64 = dbs.iter().map(|(_, ks)| ks.len() as u64).sum();
    let mut bw = BlockWriter::new(w, opts, total_keys);
    bw.w.write_all(&MAGIC)?;
    // The lowest version that holds the file (see FORMAT_VERSION): 3 when a database selector
    // will be written (a database above 0 with a record), else 2 with function libraries,
    // else 1.
    let selectors = dbs.iter().any(|&(n, ks)| n > 0 && has_records(ks));
    let version: u32 = if selectors {
        VERSION_SELECTORS
    } else if !meta.functions.is_empty() {
        2
    } else {
        1
    };
    bw.w.write_all(&version.to_le_bytes())?;
    bw.offset = PRELUDE_LEN as u64;

    let mut h = Vec::with_capacity(128);
    put_varint(&mut h, meta.server_version.len() as u64);
    h.extend_from_slice(meta.server_version.as_bytes());
    h.extend_from_slice(&meta.created_unix_ms.to_le_bytes());
    put_varint(&mut h, meta.replid.len() as u64);
    h.extend_from_slice(meta.replid.as_bytes());
    h.extend_from_slice(&meta.logical_offset.to_le_bytes());
    h.extend_from_slice(&meta.kafka_acked_offset.to_le_bytes());
    h.extend_from_slice(&meta.kafka_consumer_position.to_le_bytes());
    h.extend_from_slice(&total_keys.to_le_bytes());
    // An addition version-1 readers may skip: the keyspace table's hash secrets, so that a
    // loader can rebuild the table in the order it is written here (see FORMAT.md).
    for k in store::keyspace::hash::KeyHasher::global().secrets() {
        h.extend_from_slice(&k.to_le_bytes());
    }
    // Version 2 and later: the function libraries (perhaps none), after the hash secrets.
    if version >= 2 {
        put_varint(&mut h, meta.functions.len() as u64);
        for code in &meta.functions {
            put_varint(&mut h, code.len() as u64);
            h.extend_from_slice(code);
        }
    }
    // Additions any reader may skip (FORMAT.md, "Header additions").
    if !meta.unconfirmed.is_empty() {
        let mut a = Vec::with_capacity(10 + meta.unconfirmed.len() * 10);
        put_varint(&mut a, meta.unconfirmed.len() as u64);
        // Offsets as gaps: the first from 0, each later one from its predecessor (> 0).
        let mut prev: Option<u64> = None;
        for &(offset, hash) in &meta.unconfirmed {
            let gap = match prev {
                None => offset,
                Some(p) if offset > p => offset - p,
                Some(p) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("unconfirmed mutations out of order: offset {offset} after {p}"),
                    ))
                }
            };
            put_varint(&mut a, gap);
            a.extend_from_slice(&hash.to_le_bytes());
            prev = Some(offset);
        }
        h.push(ADDITION_UNCONFIRMED);
        put_varint(&mut h, a.len() as u64);
        h.extend_from_slice(&a);
    }
    if let Some((id, at)) = &meta.previous {
        let mut a = Vec::with_capacity(id.len() + 10);
        put_varint(&mut a, id.len() as u64);
        a.extend_from_slice(id.as_bytes());
        a.extend_from_slice(&at.to_le_bytes());
        h.push(ADDITION_PREVIOUS);
        put_varint(&mut h, a.len() as u64);
        h.extend_from_slice(&a);
    }
    // The header is one block: the function libraries must fit in it with the rest (the
    // server keeps their total below this; see FUNCTION LOAD).
    if h.len() > MAX_BLOCK {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the header block ({} bytes, function libraries included) exceeds {MAX_BLOCK} bytes",
                h.len()
            ),
        ));
    }
    bw.emit_block(KIND_HEADER, &h, false)?;
    progress(&bw.progress(0));

    let mut keys = 0u64;
    let mut volatile = 0u64;
    let mut types = TypeCounts::default();
    for &(n, ks) in dbs {
        // Database 0 is unmarked; a later one's selector goes out before its first record,
        // so a database without a record writes nothing.
        bw.pending_selector = (n > 0).then_some(n);
        let mut result = Ok(());
        ks.for_each(|key, v, deadline| {
            if result.is_err() {
                return;
            }
            match bw.record(key, v, deadline, &mut *progress, keys) {
                Ok(true) => {
                    keys += 1;
                    store::limits::key_saved(keys);
                    volatile += deadline.is_some() as u64;
                    types.bump(v.kind());
                }
                Ok(false) => {}
                Err(e) => result = Err(e),
            }
        });
        result?;
    }
    if bw.selectors > 0 && !selectors {
        // The prelude's version was decided by `has_records`, which the walk agrees with (the
        // keyspaces are borrowed, so they cannot change in between): never happens.
        return Err(io::Error::new(io::ErrorKind::InvalidData, "a database selector in a version-1/2 file"));
    }
    bw.flush_data(&mut *progress, keys)?;

    let mut t = Vec::with_capacity(64);
    put_varint(&mut t, keys);
    put_varint(&mut t, volatile);
    for n in types.as_array() {
        put_varint(&mut t, n);
    }
    put_varint(&mut t, bw.data_blocks);
    put_varint(&mut t, bw.raw_data_bytes);
    // The stream count last and only when there are streams: a file without them keeps the
    // trailer older writers produced, byte for byte.
    if types.streams > 0 || types.vsets > 0 {
        put_varint(&mut t, types.streams);
    }
    // The vector set count after it, likewise only when there are vector sets.
    if types.vsets > 0 {
        put_varint(&mut t, types.vsets);
    }
    bw.emit_block(KIND_TRAILER, &t, false)?;
    bw.w.flush()?;
    let p = bw.progress(keys);
    progress(&p);
    Ok(Summary {
        keys,
        volatile,
        types,
        bytes: bw.offset,
        blocks: bw.index as u64,
        raw_data_bytes: bw.raw_data_bytes,
    })
}

/// The value code and element count of a value (count 0: an empty collection, not written).
fn code_and_count(v: ValueRef<'_>) -> (u8, u64) {
    match v {
        ValueRef::Str(StrRef::Bytes(_)) => (CODE_STR, 1),
        ValueRef::Str(StrRef::Int(_)) => (CODE_INT, 1),
        ValueRef::Hash(h) if h.has_field_deadlines() => (CODE_HASH_DEADLINES, h.len() as u64),
        ValueRef::Hash(h) => (CODE_HASH, h.len() as u64),
        ValueRef::Set(s) if s.ints().is_some() => (CODE_SET_INTS, s.len() as u64),
        ValueRef::Set(s) => (CODE_SET, s.len() as u64),
        ValueRef::ZSet(z) => (CODE_ZSET, z.len() as u64),
        ValueRef::List(l) => (CODE_LIST, l.len() as u64),
        ValueRef::Array(a) => (CODE_ARRAY, a.count() as u64),
        // An empty stream is a key like any other (XADD .. MAXLEN 0, XDEL of the last entry
        // and XGROUP CREATE .. MKSTREAM leave one): saved whatever its length.
        ValueRef::Stream(_) => (CODE_STREAM, 1),
        ValueRef::VectorSet(v) => (CODE_VSET, v.len() as u64),
    }
}

/// Whether writing `ks` writes a record: a key that is not an empty collection. Stops at the
/// first such key (SCAN steps), so it costs a bucket or two, not a walk of the table.
fn has_records(ks: &Keyspace) -> bool {
    let mut found = false;
    let mut cursor = 0;
    loop {
        cursor = ks.scan(cursor, 1, |_, v| found |= code_and_count(v).1 > 0);
        if found || cursor == 0 {
            return found;
        }
    }
}

struct BlockWriter<W: Write> {
    w: W,
    /// The data block being filled; never longer than `target`.
    buf: Vec<u8>,
    target: usize,
    lz4: bool,
    /// Compressed copy of a block (LZ4 only).
    cbuf: Vec<u8>,
    /// Index of the next block.
    index: u32,
    /// File bytes written so far.
    offset: u64,
    data_blocks: u64,
    raw_data_bytes: u64,
    total_keys: u64,
    /// A database selector to write before the next record.
    pending_selector: Option<u32>,
    /// Database selectors written.
    selectors: u64,
}

impl<W: Write> BlockWriter<W> {
    fn new(w: W, opts: &Options, total_keys: u64) -> Self {
        let target = opts.block_size.clamp(1, MAX_BLOCK);
        BlockWriter {
            w,
            buf: Vec::with_capacity(target),
            target,
            lz4: opts.compression == Compression::Lz4,
            cbuf: Vec::new(),
            index: 0,
            offset: 0,
            data_blocks: 0,
            raw_data_bytes: 0,
            total_keys,
            pending_selector: None,
            selectors: 0,
        }
    }

    fn progress(&self, keys: u64) -> Progress {
        Progress { keys, total_keys: self.total_keys, bytes: self.offset, blocks: self.index as u64 }
    }

    /// Writes one block: header (with both checksums), then the payload, compressed when
    /// `compress` and LZ4 makes it smaller.
    fn emit_block(&mut self, kind: u8, raw: &[u8], compress: bool) -> io::Result<()> {
        let (flags, stored): (u8, &[u8]) = if compress && self.lz4 {
            let max = lz4_flex::block::get_maximum_output_size(raw.len());
            if self.cbuf.len() < max {
                self.cbuf.resize(max, 0);
            }
            match lz4_flex::block::compress_into(raw, &mut self.cbuf) {
                Ok(n) if n < raw.len() => (FLAG_LZ4, &self.cbuf[..n]),
                _ => (0, raw),
            }
        } else {
            (0, raw)
        };
        let mut h = [0u8; BLOCK_HEADER_LEN];
        h[0] = kind;
        h[1] = flags;
        h[4..8].copy_from_slice(&self.index.to_le_bytes());
        h[8..12].copy_from_slice(&(stored.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(raw.len() as u32).to_le_bytes());
        h[16..20].copy_from_slice(&crc32c::crc32c(stored).to_le_bytes());
        let hc = header_crc(&h);
        h[20..24].copy_from_slice(&hc.to_le_bytes());
        self.w.write_all(&h)?;
        self.w.write_all(stored)?;
        self.index = self
            .index
            .checked_add(1)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "too many blocks"))?;
        self.offset += (BLOCK_HEADER_LEN + stored.len()) as u64;
        Ok(())
    }

    /// Writes the data block being filled, if it holds anything.
    fn flush_data(&mut self, progress: &mut dyn FnMut(&Progress), keys: u64) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        let r = self.emit_block(KIND_DATA, &buf, true);
        self.buf = buf;
        r?;
        self.data_blocks += 1;
        self.raw_data_bytes += self.buf.len() as u64;
        self.buf.clear();
        progress(&self.progress(keys));
        Ok(())
    }

    /// Appends record bytes, emitting every block that fills up: blocks are exactly
    /// `target` bytes (the last one shorter), and a record may continue in the next block.
    #[inline]
    fn put(&mut self, mut data: &[u8], progress: &mut dyn FnMut(&Progress), keys: u64) -> io::Result<()> {
        loop {
            let room = self.target - self.buf.len();
            if data.len() < room {
                self.buf.extend_from_slice(data);
                return Ok(());
            }
            self.buf.extend_from_slice(&data[..room]);
            data = &data[room..];
            self.flush_data(progress, keys)?;
            if data.is_empty() {
                return Ok(());
            }
        }
    }

    #[inline]
    fn put_varint(&mut self, v: u64, progress: &mut dyn FnMut(&Progress), keys: u64) -> io::Result<()> {
        let mut b = [0u8; 10];
        let n = varint_bytes(v, &mut b);
        self.put(&b[..n], progress, keys)
    }

    /// Writes a value's raw form: its length, then the pieces `runs` hands out, and checks
    /// that they add up to that length (a mismatch would make an unreadable file).
    fn put_raw(
        &mut self,
        len: usize,
        runs: impl FnOnce(&mut dyn FnMut(&[u8])),
        progress: &mut dyn FnMut(&Progress),
        keys: u64,
    ) -> io::Result<()> {
        self.put_varint(len as u64, progress, keys)?;
        let mut written = 0usize;
        let mut err = None;
        runs(&mut |piece: &[u8]| {
            if err.is_none() {
                written += piece.len();
                if let Err(e) = self.put(piece, progress, keys) {
                    err = Some(e);
                }
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        if written != len {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "a value's raw form changed length"));
        }
        Ok(())
    }

    /// Encodes one key, preceded by the pending database selector if any. Returns false
    /// (writing nothing, selector included) for an empty collection, which the engine never
    /// leaves in the keyspace and a reader would refuse.
    fn record(
        &mut self,
        key: &[u8],
        v: ValueRef<'_>,
        deadline: Option<i64>,
        progress: &mut dyn FnMut(&Progress),
        keys: u64,
    ) -> io::Result<bool> {
        let (code, count) = code_and_count(v);
        if count == 0 {
            return Ok(false);
        }
        if let Some(n) = self.pending_selector.take() {
            self.put(&[TAG_SELECT_DB], progress, keys)?;
            self.put_varint(n as u64, progress, keys)?;
            self.selectors += 1;
        }
        let mut head = [0u8; 1 + 8 + 10];
        head[0] = code | if deadline.is_some() { TAG_EXPIRY } else { 0 };
        let mut n = 1;
        if let Some(t) = deadline {
            head[1..9].copy_from_slice(&t.to_le_bytes());
            n = 9;
        }
        let mut vb = [0u8; 10];
        let kn = varint_bytes(key.len() as u64, &mut vb);
        head[n..n + kn].copy_from_slice(&vb[..kn]);
        n += kn;
        self.put(&head[..n], progress, keys)?;
        self.put(key, progress, keys)?;
        match v {
            ValueRef::Str(StrRef::Bytes(b)) => {
                self.put_varint(b.len() as u64, progress, keys)?;
                self.put(b, progress, keys)?;
            }
            ValueRef::Str(StrRef::Int(i)) => self.put_varint(zigzag(i), progress, keys)?,
            ValueRef::Hash(h) => {
                self.put_varint(count, progress, keys)?;
                self.put_raw(h.raw_len(), |f| h.for_each_raw_run(f), progress, keys)?;
                if code == CODE_HASH_DEADLINES {
                    self.put_varint(h.field_deadlines().count() as u64, progress, keys)?;
                    for (f, t) in h.field_deadlines() {
                        self.put_varint(f.len() as u64, progress, keys)?;
                        self.put(f, progress, keys)?;
                        self.put(&t.to_le_bytes(), progress, keys)?;
                    }
                }
            }
            ValueRef::Set(s) => match s.ints() {
                Some(ints) => {
                    // Ascending: the first value zigzagged, then the (positive) gaps.
                    self.put_varint(count, progress, keys)?;
                    let mut prev = None;
                    for &i in ints {
                        let v = match prev {
                            None => zigzag(i),
                            Some(p) => (i as u64).wrapping_sub(p as u64),
                        };
                        self.put_varint(v, progress, keys)?;
                        prev = Some(i);
                    }
                }
                None => {
                    self.put_varint(count, progress, keys)?;
                    self.put_raw(s.raw_len(), |f| s.for_each_raw_run(f), progress, keys)?;
                }
            },
            ValueRef::ZSet(z) => {
                self.put_varint(count, progress, keys)?;
                self.put_raw(z.raw_len(), |f| z.for_each_raw_run(f), progress, keys)?;
            }
            ValueRef::List(l) => {
                self.put_varint(count, progress, keys)?;
                self.put_raw(l.raw_len(), |f| l.for_each_raw_run(f), progress, keys)?;
            }
            ValueRef::Array(a) => {
                self.put_varint(count, progress, keys)?;
                // The cursor plus one, so that "unset" (u64::MAX) takes one byte (0).
                self.put_varint(a.cursor().wrapping_add(1), progress, keys)?;
                self.put_raw(a.raw_len(), |f| a.for_each_raw_run(f), progress, keys)?;
            }
            ValueRef::VectorSet(v) => {
                // One encoded copy: the graph's links have no chunked raw form to stream.
                let mut raw = Vec::new();
                v.encode(&mut raw);
                self.put_varint(raw.len() as u64, progress, keys)?;
                self.put(&raw, progress, keys)?;
            }
            ValueRef::Stream(st) => {
                // Measured first, then streamed out: no copy of the value is held.
                let len = crate::stream::encoded_len(st);
                self.put_raw(len, |f| crate::stream::encode(st, f), progress, keys)?;
            }
        }
        Ok(true)
    }
}
