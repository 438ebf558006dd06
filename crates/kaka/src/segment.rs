//! One segment of a partition log: `<20-digit base offset>.log` plus its sparse indexes.
//!
//! Invariants:
//! 1. A segment's base offset is <= every offset in it and > every offset in earlier segments.
//! 2. The `.log` file is a plain concatenation of RecordBatch v2 batches exactly as clients
//!    sent them, except `baseOffset` (bytes 0-7), which the broker assigned. Compaction may
//!    rewrite a closed segment into fewer (uncompressed) batches with the same offsets.
//! 3. The offset index holds one (batch base offset, file position) entry per ~4 KiB of log and
//!    the time index one (largest timestamp so far, file position) entry at the same points.
//!    Both are derived data: they are written when a segment is closed and rebuilt from the log
//!    if missing or stale, so they carry no checksum.
//! 4. Only the newest segment can have a torn tail (older segments were fdatasync'ed before the
//!    next one was created), so recovery CRC-checks the newest segment only and truncates it to
//!    its last whole valid batch; an older segment whose batch chain is broken refuses to open.
//!
//! The file is shared between the partition owner (the only writer, with `pwrite`) and fetch
//! readers (`pread` from blocking threads); `size` is published after each write so readers
//! never see a half-written batch. Fetches read through a second, read-only descriptor with
//! kernel readahead turned off (`POSIX_FADV_RANDOM`): the default readahead window on a virtual
//! disk can be several MiB, and every queued readahead byte sits in front of the next
//! produce's fdatasync. Reading explicit `READ_SLICE` pieces bounds the disk queue a cold fetch
//! builds to one slice.
//!
//! The active segment's file is preallocated ahead of its data in `PREALLOC_CHUNK` steps
//! (`fallocate`, which also moves the file length). An append then changes neither the file
//! length nor, mostly, the block map, so its fdatasync flushes data without a file-system
//! journal commit: on this ext4 disk that took a 100-byte append's fdatasync from p50 0.20 /
//! p99 0.46-1.0 ms to p50 0.13 / p99 0.21-0.28 ms (benchmarks/kaka/RESULTS.md). The file is
//! therefore longer than the log while the segment is active: `size` is the log's end, the
//! bytes after it are zeros.
//!
//! fallocate's space is allocated but marked unwritten, and the first write into each part of
//! it converts that part to written: a block-map change that the next fdatasync still commits
//! to the file-system journal. So the owner also writes real zeros a little ahead of the log
//! (`ZERO_AHEAD`, inside the preallocated length): an append then lands in blocks already
//! written, and its fdatasync flushes data alone. The conversion and the zeros' own flush are
//! paid once per half `ZERO_AHEAD` of log, by whichever sync comes next. On this disk a 2 KiB
//! write's fdatasync took p50 136 us (mean 236) into fallocated space and 107 us (mean 162)
//! into written zeros; a 64 B write's hardly differs, as 64 of them share one block
//! (docs/BENCHMARKS.md, "kaka's fdatasync into written blocks"). Closing a segment (`seal`) cuts the file back to `size` before
//! the next segment exists, and opening the newest segment after a crash trims the zeros like
//! any torn tail, so invariant 4 still holds and closed segments are exactly their batches.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::RwLock;

use crate::batch::{self, BatchHeader, HEADER_LEN};
use crate::storage::{self, File, Mode};

/// Bytes of log between two index entries.
pub const INDEX_INTERVAL: u64 = 4096;
/// Reads from disk are issued in slices of this size, one at a time. 256 KiB keeps a cold
/// 64 MiB fetch near the disk's sequential rate while a concurrent fdatasync waits behind at
/// most one slice (measured in benchmarks/kaka/RESULTS.md).
pub const READ_SLICE: usize = 256 << 10;
/// The active segment's file is extended this far ahead of its data (never past the segment's
/// roll size). One fallocate per chunk is one journal commit per 4 MiB of log, instead of one
/// per fdatasync.
pub const PREALLOC_CHUNK: u64 = 4 << 20;
/// How far past the log's end the active segment holds written zeros (see the module
/// comment). Refilled when less than half of it is left.
pub const ZERO_AHEAD: u64 = 1 << 20;

#[derive(Debug, Clone, Copy)]
pub struct IndexEntry {
    pub offset: i64,
    pub pos: u64,
}

#[derive(Debug, Clone, Copy)]
pub struct TimeEntry {
    pub max_ts: i64,
    pub pos: u64,
}

/// Opens the fetch descriptor of a segment, readahead off.
fn open_reader(path: &Path) -> io::Result<File> {
    storage::open(path, Mode::ReadRandom)
}

pub fn file_name(base: i64, ext: &str) -> String {
    format!("{base:020}.{ext}")
}

/// A segment as seen by everyone: the writer appends, readers read below `size`.
pub struct Segment {
    pub base_offset: i64,
    pub path: PathBuf,
    pub file: File,
    /// Read-only descriptor for fetches, readahead off (see the module comment).
    reader: File,
    /// Bytes of whole batches in the file.
    pub size: AtomicU64,
    /// Last offset + 1 of the batches in this segment (== base_offset when empty).
    pub next_offset: AtomicI64,
    /// Largest batch maxTimestamp in the segment (-1 when empty).
    pub max_ts: AtomicI64,
    pub index: RwLock<Vec<IndexEntry>>,
    pub tindex: RwLock<Vec<TimeEntry>>,
    /// Position of the last index entry (owner bookkeeping, read under the index lock).
    last_indexed_pos: AtomicU64,
    /// File length the owner has preallocated (>= `size`); 0 when nothing is, and u64::MAX
    /// once the file system refused (then appends simply extend the file). Owner only.
    allocated: AtomicU64,
    /// The file holds written zeros from `size` up to here (inside `allocated`); u64::MAX once
    /// a zero write failed (then appends land in unwritten space, as before). Owner only.
    zeroed: AtomicU64,
}

impl Segment {
    pub fn create(dir: &Path, base: i64) -> io::Result<Segment> {
        let path = dir.join(file_name(base, "log"));
        let file = storage::open(&path, Mode::CreateNew)?;
        let reader = open_reader(&path)?;
        Ok(Segment::from_parts(base, path, file, reader))
    }

    fn from_parts(base: i64, path: PathBuf, file: File, reader: File) -> Segment {
        Segment {
            base_offset: base,
            path,
            file,
            reader,
            size: AtomicU64::new(0),
            next_offset: AtomicI64::new(base),
            max_ts: AtomicI64::new(-1),
            index: RwLock::new(Vec::new()),
            tindex: RwLock::new(Vec::new()),
            last_indexed_pos: AtomicU64::new(0),
            allocated: AtomicU64::new(0),
            zeroed: AtomicU64::new(0),
        }
    }

    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    pub fn next_offset(&self) -> i64 {
        self.next_offset.load(Ordering::Acquire)
    }

    /// Appends one batch (its baseOffset already assigned). Owner only. `roll_bytes` is the
    /// size at which this segment will be closed: preallocation never goes past it.
    pub fn append(&self, bytes: &[u8], h: &BatchHeader, roll_bytes: u64) -> io::Result<()> {
        let pos = self.size.load(Ordering::Relaxed);
        let end = pos + bytes.len() as u64;
        let allocated = self.allocated.load(Ordering::Relaxed);
        if end > allocated && allocated != u64::MAX {
            let target = end.next_multiple_of(PREALLOC_CHUNK).min(roll_bytes.max(end));
            self.preallocate(allocated.max(pos), target);
        }
        self.zero_ahead(end);
        self.file.write_all_at(bytes, pos)?;
        self.note_batch(pos, h);
        self.size.store(pos + bytes.len() as u64, Ordering::Release);
        Ok(())
    }

    /// Records a batch that starts at `pos` in the in-memory indexes and counters.
    fn note_batch(&self, pos: u64, h: &BatchHeader) {
        let max_ts = self.max_ts.load(Ordering::Relaxed).max(h.max_timestamp);
        self.max_ts.store(max_ts, Ordering::Release);
        let mut idx = self.index.write().unwrap_or_else(|e| e.into_inner());
        if idx.is_empty() || pos >= self.last_indexed_pos.load(Ordering::Relaxed) + INDEX_INTERVAL {
            idx.push(IndexEntry { offset: h.base_offset, pos });
            self.tindex.write().unwrap_or_else(|e| e.into_inner()).push(TimeEntry { max_ts, pos });
            self.last_indexed_pos.store(pos, Ordering::Relaxed);
        }
        drop(idx);
        self.next_offset.store(h.last_offset() + 1, Ordering::Release);
    }

    /// Extends the file to `to` bytes with allocated (reading as zeros) space from `from`.
    /// Preallocation is an optimisation only: if the file system refuses it, appends extend
    /// the file as they go, and a full disk is reported by the write itself.
    fn preallocate(&self, from: u64, to: u64) {
        match self.file.preallocate(from, to) {
            Ok(()) => self.allocated.store(to, Ordering::Relaxed),
            Err(e) => {
                tracing::debug!(segment = %self.path.display(), "preallocation refused ({e}); appending plainly");
                self.allocated.store(u64::MAX, Ordering::Relaxed);
            }
        }
    }

    /// Keeps written zeros up to `ZERO_AHEAD` past `end` (the log's end after the append in
    /// hand), within the preallocated length, so that the file's length never moves here.
    /// Zeros go only past `end`: never over a batch. An optimisation only: a failed write
    /// stops it for this segment (the bytes past the log's end are zeros or nothing either way).
    fn zero_ahead(&self, end: u64) {
        let allocated = self.allocated.load(Ordering::Relaxed);
        let zeroed = self.zeroed.load(Ordering::Relaxed);
        if allocated == u64::MAX || zeroed == u64::MAX || end + ZERO_AHEAD / 2 <= zeroed {
            return;
        }
        let from = zeroed.max(end);
        let to = (end + ZERO_AHEAD).min(allocated);
        if to <= from {
            return;
        }
        static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
        let mut at = from;
        while at < to {
            let n = (to - at).min(ZEROS.len() as u64) as usize;
            if let Err(e) = self.file.write_all_at(&ZEROS[..n], at) {
                tracing::debug!(segment = %self.path.display(), "writing zeros ahead failed ({e}); appending into unwritten space");
                self.zeroed.store(u64::MAX, Ordering::Relaxed);
                return;
            }
            at += n as u64;
        }
        self.zeroed.store(to, Ordering::Relaxed);
    }

    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Closes the segment for appends: the file is cut back to its batches (dropping any
    /// preallocated space) and synced. Called before the next segment is created and on a
    /// clean stop, so a closed segment's file length is exactly its log.
    pub fn seal(&self) -> io::Result<()> {
        let size = self.size();
        if self.file.len()? != size {
            self.file.set_len(size)?;
        }
        self.allocated.store(0, Ordering::Relaxed);
        self.zeroed.store(0, Ordering::Relaxed);
        self.file.sync_data()
    }

    /// Opens an existing segment. `newest`: CRC-check every batch and truncate a torn tail;
    /// otherwise walk the batch headers (or trust a matching index file) and refuse damage.
    /// `expect_base`: the next offset the previous segment ended at (None for the first).
    pub fn open(path: &Path, base: i64, newest: bool) -> Result<Segment, String> {
        let file = storage::open(path, Mode::Existing).map_err(|e| format!("{}: {e}", path.display()))?;
        let len = file.len().map_err(|e| format!("{}: {e}", path.display()))?;
        let reader = open_reader(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let seg = Segment::from_parts(base, path.to_path_buf(), file, reader);
        if !newest && seg.load_index_files(len) {
            return Ok(seg);
        }
        let mut pos = 0u64;
        let mut buf = Vec::new();
        let mut hdr = [0u8; HEADER_LEN];
        let mut expect = base;
        while pos < len {
            let bad = |why: &str| format!("{} damaged at byte {pos}: {why}", path.display());
            if len - pos < HEADER_LEN as u64 {
                if newest {
                    break;
                }
                return Err(bad("trailing bytes shorter than a batch header"));
            }
            seg.file.read_exact_at(&mut hdr, pos).map_err(|e| bad(&e.to_string()))?;
            let h = match BatchHeader::parse(&hdr) {
                Some(h) if h.magic == 2 && pos + h.size as u64 <= len && h.base_offset >= expect => h,
                _ if newest => break,
                _ => return Err(bad("broken batch header chain")),
            };
            if newest {
                buf.resize(h.size, 0);
                seg.file.read_exact_at(&mut buf, pos).map_err(|e| bad(&e.to_string()))?;
                if !batch::crc_ok(&buf, &h) {
                    break;
                }
            }
            seg.note_batch(pos, &h);
            expect = h.last_offset() + 1;
            pos += h.size as u64;
        }
        if pos < len {
            if zeros_from(&seg.file, pos, len).map_err(|e| format!("{}: {e}", path.display()))? {
                tracing::debug!(segment = %path.display(), kept = pos, "trimming preallocated space");
            } else {
                tracing::warn!(
                    segment = %path.display(),
                    kept = pos,
                    dropped = len - pos,
                    "truncating torn tail of the newest segment to the last whole CRC-valid batch"
                );
            }
            seg.file.set_len(pos).map_err(|e| format!("{}: truncate: {e}", path.display()))?;
            seg.file.sync_all().map_err(|e| format!("{}: sync: {e}", path.display()))?;
        }
        seg.size.store(pos, Ordering::Release);
        Ok(seg)
    }

    /// Writes `.index` and `.timeindex` beside the log (called when the segment is closed
    /// and on clean shutdown). The offset index header records the log size it describes, so
    /// a stale index (log changed since) is detected and rebuilt instead of trusted.
    pub fn write_index_files(&self) -> io::Result<()> {
        let idx = self.index.read().unwrap_or_else(|e| e.into_inner()).clone();
        let tidx = self.tindex.read().unwrap_or_else(|e| e.into_inner()).clone();
        let mut o = Vec::with_capacity(40 + idx.len() * 8);
        o.extend_from_slice(b"KAKAIDX1");
        o.extend_from_slice(&self.size().to_be_bytes());
        o.extend_from_slice(&self.next_offset().to_be_bytes());
        o.extend_from_slice(&self.max_ts.load(Ordering::Acquire).to_be_bytes());
        o.extend_from_slice(&(idx.len() as u32).to_be_bytes());
        for e in &idx {
            o.extend_from_slice(&((e.offset - self.base_offset) as u32).to_be_bytes());
            o.extend_from_slice(&(e.pos as u32).to_be_bytes());
        }
        let mut t = Vec::with_capacity(tidx.len() * 12);
        for e in &tidx {
            t.extend_from_slice(&e.max_ts.to_be_bytes());
            t.extend_from_slice(&(e.pos as u32).to_be_bytes());
        }
        write_file_synced(&self.path.with_extension("index"), &o)?;
        write_file_synced(&self.path.with_extension("timeindex"), &t)
    }

    fn load_index_files(&self, len: u64) -> bool {
        let (Ok(o), Ok(t)) = (
            storage::read(&self.path.with_extension("index")),
            storage::read(&self.path.with_extension("timeindex")),
        ) else {
            return false;
        };
        if o.len() < 36 || &o[0..8] != b"KAKAIDX1" {
            return false;
        }
        let u64_at = |b: &[u8], p: usize| u64::from_be_bytes(b[p..p + 8].try_into().unwrap());
        let size = u64_at(&o, 8);
        let next = u64_at(&o, 16) as i64;
        let max_ts = u64_at(&o, 24) as i64;
        let n = u32::from_be_bytes(o[32..36].try_into().unwrap()) as usize;
        if size != len || o.len() != 36 + n * 8 || t.len() != n * 12 {
            return false;
        }
        let mut idx = Vec::with_capacity(n);
        let mut tidx = Vec::with_capacity(n);
        for i in 0..n {
            let p = 36 + i * 8;
            let rel = u32::from_be_bytes(o[p..p + 4].try_into().unwrap());
            let pos = u32::from_be_bytes(o[p + 4..p + 8].try_into().unwrap()) as u64;
            idx.push(IndexEntry { offset: self.base_offset + rel as i64, pos });
            let q = i * 12;
            tidx.push(TimeEntry {
                max_ts: u64_at(&t, q) as i64,
                pos: u32::from_be_bytes(t[q + 8..q + 12].try_into().unwrap()) as u64,
            });
        }
        // Cheap sanity check: the last indexed batch header must parse and lie inside.
        if let Some(last) = idx.last() {
            let mut hdr = [0u8; HEADER_LEN];
            match self.file.read_exact_at(&mut hdr, last.pos) {
                Ok(()) => match BatchHeader::parse(&hdr) {
                    Some(h) if h.magic == 2 && h.base_offset == last.offset => {}
                    _ => return false,
                },
                Err(_) => return false,
            }
        }
        self.last_indexed_pos.store(idx.last().map(|e| e.pos).unwrap_or(0), Ordering::Relaxed);
        *self.index.write().unwrap_or_else(|e| e.into_inner()) = idx;
        *self.tindex.write().unwrap_or_else(|e| e.into_inner()) = tidx;
        self.max_ts.store(max_ts, Ordering::Release);
        self.next_offset.store(next, Ordering::Release);
        self.size.store(len, Ordering::Release);
        true
    }

    /// Largest indexed position whose batch starts at or before `offset`.
    fn index_lookup(&self, offset: i64) -> u64 {
        let idx = self.index.read().unwrap_or_else(|e| e.into_inner());
        let i = idx.partition_point(|e| e.offset <= offset);
        if i == 0 {
            0
        } else {
            idx[i - 1].pos
        }
    }

    /// Position from which a scan for the first batch with maxTimestamp >= ts must start.
    fn time_lookup(&self, ts: i64) -> u64 {
        let t = self.tindex.read().unwrap_or_else(|e| e.into_inner());
        let i = t.partition_point(|e| e.max_ts < ts);
        if i == 0 {
            0
        } else {
            t[i - 1].pos
        }
    }

    /// The file position of the batch that holds (or, across a compaction hole, first follows)
    /// `offset`, with its header; None past the end. Reads at most ~4 KiB of headers past the
    /// offset index's entry. Runs on a blocking thread.
    pub fn locate(&self, offset: i64) -> io::Result<Option<(u64, BatchHeader)>> {
        let end = self.size();
        let mut pos = self.index_lookup(offset);
        let mut hdr = [0u8; HEADER_LEN];
        loop {
            if pos + HEADER_LEN as u64 > end {
                return Ok(None);
            }
            self.reader.read_exact_at(&mut hdr, pos)?;
            let h = BatchHeader::parse(&hdr).ok_or_else(|| corrupt(&self.path, pos))?;
            if h.last_offset() >= offset {
                return Ok(Some((pos, h)));
            }
            pos += h.size as u64;
        }
    }

    /// Reads whole batches from `pos` (a batch boundary, from `locate`), stopping before any
    /// batch whose base is >= `limit` (the high watermark) and once `max_bytes` is reached (at
    /// least one batch is returned so a consumer can make progress, as KIP-74 asks, unless
    /// `strict`: then that batch too must fit, as for every partition after the first non-empty
    /// one of a Fetch answer). Runs on a blocking thread.
    pub fn read_from(&self, pos: u64, max_bytes: usize, limit: i64, strict: bool) -> io::Result<Vec<u8>> {
        let end = self.size();
        let mut out: Vec<u8> = Vec::new();
        let mut read_to = pos; // file position of the next unread byte
        let mut parsed = 0usize; // bytes of `out` that are whole batches
        loop {
            let fill = |out: &mut Vec<u8>, read_to: &mut u64, need: usize| -> io::Result<()> {
                while out.len() < need && *read_to < end {
                    let n = ((end - *read_to) as usize).min(READ_SLICE);
                    let at = out.len();
                    out.resize(at + n, 0);
                    self.reader.read_exact_at(&mut out[at..], *read_to)?;
                    *read_to += n as u64;
                }
                Ok(())
            };
            fill(&mut out, &mut read_to, parsed + HEADER_LEN)?;
            if out.len() < parsed + HEADER_LEN {
                break;
            }
            let h =
                BatchHeader::parse(&out[parsed..]).ok_or_else(|| corrupt(&self.path, pos + parsed as u64))?;
            if h.base_offset >= limit || ((parsed > 0 || strict) && parsed + h.size > max_bytes) {
                break;
            }
            fill(&mut out, &mut read_to, parsed + h.size)?;
            if out.len() < parsed + h.size {
                break;
            }
            parsed += h.size;
            if parsed >= max_bytes {
                break;
            }
        }
        out.truncate(parsed);
        Ok(out)
    }

    /// The length of the range a large Fetch can stream straight from this segment, starting
    /// at `start` (the batch `locate` found), or None when a buffered `read_from` should serve
    /// it (the range is small, or its end cannot be found without reading the batches).
    ///
    /// The range ends at a batch boundary known
    /// without I/O: the segment's end when the whole segment is below `limit` (the high
    /// watermark) and fits in `max_bytes`, else the furthest offset-index entry that does
    /// both. The answer may so hold up to one index interval less than `max_bytes`, which
    /// Kafka allows (a consumer simply fetches again from where the answer ended).
    pub fn stream_range(&self, start: u64, max_bytes: usize, limit: i64, min_len: usize) -> Option<usize> {
        let end = self.size();
        let furthest = start.saturating_add(max_bytes as u64);
        let stop = if self.next_offset() <= limit && end <= furthest {
            end
        } else {
            let idx = self.index.read().unwrap_or_else(|e| e.into_inner());
            idx.iter().rev().find(|e| e.pos <= furthest && e.offset <= limit).map_or(start, |e| e.pos)
        };
        let len = stop.saturating_sub(start) as usize;
        (len >= min_len.max(1)).then_some(len)
    }

    /// Reads `buf.len()` bytes at `pos` through the fetch descriptor (no readahead).
    pub fn read_range(&self, buf: &mut [u8], pos: u64) -> io::Result<()> {
        self.reader.read_exact_at(buf, pos)
    }

    /// Visits each batch header from `start` (a batch boundary) to the end. Returns early when
    /// `f` returns false.
    pub fn scan_headers(&self, start: u64, mut f: impl FnMut(u64, &BatchHeader) -> bool) -> io::Result<()> {
        let end = self.size();
        let mut pos = start;
        let mut hdr = [0u8; HEADER_LEN];
        while pos + HEADER_LEN as u64 <= end {
            self.file.read_exact_at(&mut hdr, pos)?;
            let h = BatchHeader::parse(&hdr).ok_or_else(|| corrupt(&self.path, pos))?;
            if !f(pos, &h) {
                break;
            }
            pos += h.size as u64;
        }
        Ok(())
    }

    /// Reads one whole batch at `pos`.
    pub fn read_batch(&self, pos: u64, h: &BatchHeader) -> io::Result<bytes::Bytes> {
        let mut b = vec![0u8; h.size];
        self.file.read_exact_at(&mut b, pos)?;
        Ok(bytes::Bytes::from(b))
    }

    /// First offset whose record timestamp is >= ts, with that timestamp, or None.
    pub fn find_by_time(&self, ts: i64, limit: i64) -> io::Result<Option<(i64, i64)>> {
        if self.max_ts.load(Ordering::Acquire) < ts {
            return Ok(None);
        }
        let mut found = None;
        let mut err = None;
        self.scan_headers(self.time_lookup(ts), |pos, h| {
            if h.base_offset >= limit {
                return false;
            }
            if h.max_timestamp < ts {
                return true;
            }
            let recs =
                self.read_batch(pos, h).map_err(|e| e.to_string()).and_then(|b| batch::decode_records(&b, h));
            match recs {
                Ok(recs) => {
                    // LogAppendTime batches carry the append time in maxTimestamp only.
                    let log_append = h.attributes & 0x08 != 0;
                    for r in recs {
                        let t = if log_append { h.max_timestamp } else { r.timestamp };
                        if t >= ts {
                            found = Some((h.base_offset + r.offset_delta as i64, t));
                            return false;
                        }
                    }
                    true
                }
                Err(e) => {
                    err = Some(e);
                    false
                }
            }
        })?;
        if let Some(e) = err {
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
        Ok(found)
    }
}

/// Whether bytes `from..to` of `file` are all zero (preallocated space nobody wrote).
fn zeros_from(file: &File, from: u64, to: u64) -> io::Result<bool> {
    let mut buf = vec![0u8; 64 << 10];
    let mut pos = from;
    while pos < to {
        let n = ((to - pos) as usize).min(buf.len());
        file.read_exact_at(&mut buf[..n], pos)?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        pos += n as u64;
    }
    Ok(true)
}

fn corrupt(path: &Path, pos: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: invalid batch header at byte {pos}", path.display()),
    )
}

/// The temporary name `write_file_synced` writes `path`'s new content under: the final file
/// name plus `.tmp`, so every final file has its own (`X.index.tmp`, `X.timeindex.tmp`,
/// `X.snapshot.tmp` for one segment), and two files being replaced at once never share one.
/// Partition load deletes `*.tmp` leftovers.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Writes `data` to `path` via a temporary file, fdatasync, then rename (atomic replace) and
/// an fsync of the folder so the new name is durable.
pub fn write_file_synced(path: &Path, data: &[u8]) -> io::Result<()> {
    let tmp = temp_path(path);
    {
        let f = storage::open(&tmp, Mode::Truncate)?;
        f.write_all_at(data, 0)?;
        f.sync_data()?;
    }
    rename_synced(&tmp, path)
}

/// Runs disk work (fsyncs, file and folder creation, deletions) that must finish before the
/// caller goes on, without stalling the async runtime. On a multi-thread runtime worker it is
/// `block_in_place`: the worker first hands its queued tasks to another thread, then runs `f`
/// itself, so `f` still runs in order on the calling task (a connection's requests, a
/// partition owner's messages keep their order, and no thread hop is added to the wait) while
/// no other task queues behind the disk. Anywhere else (a blocking-pool thread, the offline
/// CLI, a current-thread test runtime, where `block_in_place` would panic) it is a plain call.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// As [`blocking`], for one short piece of disk work (a lone fdatasync): on a multi-thread
/// runtime with more than one worker it runs on the worker itself, whose queued tasks the
/// others steal meanwhile, sparing `block_in_place`'s hand-off of the core and back (about
/// three thread wake-ups). With a single worker that would stall every task, so there it is
/// [`blocking`].
pub fn blocking_short<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            if h.metrics().num_workers() > 1 {
                f()
            } else {
                tokio::task::block_in_place(f)
            }
        }
        _ => f(),
    }
}

/// The folder a path's entry lives in ("." for a bare relative name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Creates the folder `dir` (and any missing ancestors) durably. A new folder's name lives in
/// its parent folder, and only an fsync of that parent makes the name survive a power failure
/// (fsyncing files inside the new folder does not): without it, a topic, partition or group
/// folder whose data was acknowledged as synced could vanish whole. So every folder this
/// creates is followed by an fsync of its parent, ancestors first. Every folder kaka creates
/// goes through here. A folder that already exists is left alone (it was either made durable
/// by the run that created it, or survived that run's crash and is written back by the
/// kernel like any other dirty metadata).
pub fn create_dir_synced(dir: &Path) -> io::Result<()> {
    match storage::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && storage::is_dir(dir) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).ok_or(e)?;
            create_dir_synced(parent)?;
            match storage::create_dir(dir) {
                Ok(()) => {}
                // Created meanwhile by someone else, who syncs it.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && storage::is_dir(dir) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Err(e) => return Err(e),
    }
    #[cfg(test)]
    dir_events::record(dir_events::Event::Created(dir.to_path_buf()));
    sync_dir(parent_dir(dir))
}

/// Renames `from` to `to` and fsyncs the folder(s) holding both names, so after a power failure
/// the rename is either wholly there or wholly absent (one fsync when both are in one folder).
pub fn rename_synced(from: &Path, to: &Path) -> io::Result<()> {
    storage::rename(from, to)?;
    let (a, b) = (parent_dir(from), parent_dir(to));
    sync_dir(b)?;
    if a != b {
        sync_dir(a)?;
    }
    Ok(())
}

/// fsync a directory so a create, rename or unlink in it survives a power failure.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    storage::sync_dir(dir)?;
    #[cfg(test)]
    dir_events::record(dir_events::Event::Synced(dir.to_path_buf()));
    Ok(())
}

/// Test record of folder creations and folder fsyncs, in order, for every thread (tests
/// filter by their own temp folder).
#[cfg(test)]
pub mod dir_events {
    use std::path::PathBuf;
    use std::sync::Mutex;

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Event {
        Created(PathBuf),
        Synced(PathBuf),
    }

    static EVENTS: Mutex<Vec<Event>> = Mutex::new(Vec::new());

    pub fn record(e: Event) {
        EVENTS.lock().unwrap_or_else(|e| e.into_inner()).push(e);
    }

    pub fn all() -> Vec<Event> {
        EVENTS.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::dir_events::{all, Event};
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kaka-segment-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// Events about paths under `root`, in order.
    fn events_under(root: &Path) -> Vec<Event> {
        all()
            .into_iter()
            .filter(|e| match e {
                Event::Created(p) | Event::Synced(p) => p.starts_with(root),
            })
            .collect()
    }

    #[test]
    fn create_dir_synced_syncs_each_new_folders_parent() {
        let root = temp_dir("mkdir");
        std::fs::create_dir_all(&root).unwrap();
        let deep = root.join("a").join("b");
        create_dir_synced(&deep).unwrap();
        assert!(deep.is_dir());
        assert_eq!(
            events_under(&root),
            vec![
                Event::Created(root.join("a")),
                Event::Synced(root.clone()),
                Event::Created(deep.clone()),
                Event::Synced(root.join("a")),
            ]
        );
        // Existing folders are left as they are.
        create_dir_synced(&deep).unwrap();
        assert_eq!(events_under(&root).len(), 4);
        // A rename across folders syncs both.
        std::fs::write(deep.join("f"), b"x").unwrap();
        rename_synced(&deep.join("f"), &root.join("g")).unwrap();
        let ev = events_under(&root);
        assert_eq!(ev[4..], [Event::Synced(root.clone()), Event::Synced(deep.clone())]);
        let _ = std::fs::remove_dir_all(&root);
    }

    /// The owner keeps written zeros up to `ZERO_AHEAD` past the log's end, inside the
    /// preallocated length: they never cover a batch, the file's length stays the preallocated
    /// one while the segment is active, and sealing cuts the file back to its batches.
    #[test]
    fn zeros_are_kept_ahead_of_the_log_and_never_over_it() {
        let root = temp_dir("zeroahead");
        std::fs::create_dir_all(&root).unwrap();
        let seg = Segment::create(&root, 0).unwrap();
        let roll = 64 << 20;
        let mut log = Vec::new();
        // 700 appends of 3,000 bytes: about 2 MiB of log, so the zeros are refilled several
        // times inside the first preallocated chunk.
        for i in 0..700i64 {
            let bytes = vec![(i % 251) as u8 + 1; 3000];
            let h = BatchHeader {
                base_offset: i,
                size: bytes.len(),
                magic: 2,
                crc: 0,
                attributes: 0,
                last_offset_delta: 0,
                base_timestamp: i,
                max_timestamp: i,
                producer_id: -1,
                producer_epoch: -1,
                base_sequence: -1,
                records_count: 1,
            };
            seg.append(&bytes, &h, roll).unwrap();
            log.extend_from_slice(&bytes);
            let size = seg.size();
            let zeroed = seg.zeroed.load(Ordering::Relaxed);
            let allocated = seg.allocated.load(Ordering::Relaxed);
            assert_eq!(size, log.len() as u64);
            assert!(
                zeroed > size + ZERO_AHEAD / 2 - 3000 && zeroed <= allocated,
                "{i}: {size} {zeroed} {allocated}"
            );
            assert_eq!(std::fs::metadata(&seg.path).unwrap().len(), allocated, "{i}: the length moved");
        }
        let file = std::fs::read(&seg.path).unwrap();
        assert!(file[..log.len()] == log[..], "a batch was overwritten");
        let zeroed = seg.zeroed.load(Ordering::Relaxed) as usize;
        assert!(file[log.len()..zeroed].iter().all(|&b| b == 0));
        seg.seal().unwrap();
        assert_eq!(std::fs::read(&seg.path).unwrap(), log);
        assert_eq!(seg.zeroed.load(Ordering::Relaxed), 0);
        let _ = std::fs::remove_dir_all(&root);
    }

    /// Each file of a segment is replaced through its own temporary name: written at once from
    /// three threads, every final file holds exactly what its writer wrote.
    #[test]
    fn index_timeindex_and_snapshot_do_not_share_a_temporary_file() {
        let root = temp_dir("tmpnames");
        std::fs::create_dir_all(&root).unwrap();
        let base = root.join(file_name(0, "log"));
        let exts = ["index", "timeindex", "snapshot"];
        let tmps: Vec<PathBuf> = exts.iter().map(|e| temp_path(&base.with_extension(e))).collect();
        assert!(tmps[0] != tmps[1] && tmps[1] != tmps[2] && tmps[0] != tmps[2], "{tmps:?}");
        for round in 0..100u32 {
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(exts.len()));
            let writers: Vec<_> = exts
                .iter()
                .enumerate()
                .map(|(i, ext)| {
                    let path = base.with_extension(ext);
                    let barrier = barrier.clone();
                    // Distinct content per file and round, large enough to overlap in time.
                    let data = vec![(i as u8) * 50 + (round % 50) as u8; 64 * 1024];
                    std::thread::spawn(move || {
                        barrier.wait();
                        write_file_synced(&path, &data).map(|_| data)
                    })
                })
                .collect();
            for (ext, w) in exts.iter().zip(writers) {
                let data = w.join().unwrap().unwrap_or_else(|e| panic!("round {round}: writing .{ext}: {e}"));
                let got = std::fs::read(base.with_extension(ext)).unwrap();
                assert!(got == data, "round {round}: .{ext} holds another file's content");
            }
        }
        let _ = std::fs::remove_dir_all(&root);
    }

    /// Disk work run through `blocking` on the only runtime worker does not hold up another
    /// task: the other task finishes while the slow one is still inside its "fsync".
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn blocking_work_does_not_stall_other_tasks() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let started = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let (s, d) = (started.clone(), done.clone());
        let slow = tokio::spawn(async move {
            blocking(|| {
                s.store(true, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_secs(2)); // a very slow fsync
                d.store(true, Ordering::SeqCst);
            })
        });
        while !started.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let d = done.clone();
        let other = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            d.load(Ordering::SeqCst)
        });
        let slow_finished_first = tokio::time::timeout(std::time::Duration::from_secs(30), other)
            .await
            .expect("hang guard")
            .unwrap();
        assert!(!slow_finished_first, "the other task waited for the slow disk work");
        slow.await.unwrap();
    }
}
