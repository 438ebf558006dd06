//! A partition: one owner task (actor) that alone appends to the log, plus a shared read view.
//!
//! Write path (the owner): drain every queued `Append` from the mailbox, check idempotence,
//! write each batch (rewriting only its baseOffset), then ONE fdatasync for the whole group,
//! then answer each produce (group commit). While that sync runs on a blocking thread the
//! owner keeps accepting and writing the next group, so syncs pipeline with writes. Order
//! needs no lock: only the owner assigns offsets.
//!
//! Offsets named here: `leo` (log end offset: next offset to assign, written but maybe not
//! durable) and `hw` (high watermark: everything below is acknowledged-durable and visible to
//! consumers). With `--fsync-interval-ms N` the hw follows the leo right after the write.
//!
//! Read path (anyone): fetches read the tail cache or, below it, the segment files through
//! the sparse index on a blocking thread, never waiting for the owner.
//!
//! Fail-stop: a failed write or fdatasync answers the whole group with KAFKA_STORAGE_ERROR
//! and the partition refuses every later write (after a failed fsync the kernel may have
//! dropped the dirty pages, so a retry could ack data that is gone).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch};

use crate::batch::{self, BatchHeader};
use crate::compaction::PassSummary;
use crate::config::{BrokerConfig, TopicConfig};
use crate::errors;
use crate::memory::{Cached, Memory, TailCache};
use crate::segment::{self, Segment};
use crate::wire::{FileRange, Piece};

/// fdatasync calls made by every partition (shown at shutdown; tests read it).
pub static SYNCS: AtomicU64 = AtomicU64::new(0);

/// fdatasyncs running on blocking threads right now, broker-wide (see `Owner::start_sync`).
static SYNCS_IN_FLIGHT: AtomicU64 = AtomicU64::new(0);

/// Partition answers from disk at least this large (one read slice) are streamed from the
/// segment as they are sent instead of read into memory first (see `Shared::read`). A
/// consumer catching up on many partitions at librdkafka's default 1 MiB each would otherwise
/// make the broker hold every partition's MiB until the whole answer is out, outside the
/// `--max-memory` budget; streamed, it holds one slice.
pub const STREAM_MIN_BYTES: usize = segment::READ_SLICE;
/// Batches appended by every partition.
pub static APPENDS: AtomicU64 = AtomicU64::new(0);

/// Kafka keeps the metadata of a producer's last five batches to answer retries.
const BATCHES_TO_RETAIN: usize = 5;

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Outcome of one produce to this partition.
#[derive(Debug, Clone)]
pub struct AppendResult {
    pub error: i16,
    pub base_offset: i64,
    pub log_start: i64,
    pub message: Option<String>,
}

pub enum Msg {
    Append {
        batch: Bytes,
        header: BatchHeader,
        /// None for acks=0.
        reply: Option<oneshot::Sender<AppendResult>>,
        /// Bytes reserved from the memory budget for this batch.
        reserved: usize,
    },
    /// Stop after syncing; answers when done.
    Shutdown(oneshot::Sender<()>),
    /// Use these topic settings from now on.
    Reconfigure(Arc<TopicConfig>),
    /// DeleteRecords: move the log start up to this offset (-1: the high watermark); answers
    /// the new log start or a Kafka error code.
    DeleteRecords(i64, oneshot::Sender<Result<i64, i16>>),
    /// EndTxn: write a commit or abort marker for this producer's open transaction here (if
    /// it has one) and answer once it is durable. The epoch is the coordinator's: a batch
    /// with an older epoch is refused from then on (zombie fencing).
    Marker { producer_id: i64, producer_epoch: i16, commit: bool, reply: oneshot::Sender<AppendResult> },
}

/// What a partition knows of transactions (Kafka's producer state and `.txnindex`): the open
/// transaction of each producer (its first offset here) and the aborted ones, so the last
/// stable offset and a read_committed fetch's aborted list need no disk reads. Rebuilt on
/// restart from the segment snapshot and the newest segment's batches, like producer state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TxnIndex {
    /// Producer id -> first offset of its unfinished transaction in this partition.
    pub open: HashMap<i64, i64>,
    /// Aborted transactions as (producer id, first offset, offset of the abort marker), in
    /// marker order.
    pub aborted: Vec<(i64, i64, i64)>,
}

impl TxnIndex {
    /// The first offset of the oldest open transaction (i64::MAX when none is open).
    pub fn first_unstable(&self) -> i64 {
        self.open.values().copied().min().unwrap_or(i64::MAX)
    }

    /// Notes one written batch: a transactional data batch opens its producer's transaction
    /// (if not open yet), a marker closes it (an abort is remembered).
    fn note(&mut self, h: &BatchHeader, marker: Option<bool>) {
        if h.producer_id < 0 || !h.is_transactional() {
            return;
        }
        match marker {
            Some(commit) => {
                if let Some(first) = self.open.remove(&h.producer_id) {
                    if !commit {
                        self.aborted.push((h.producer_id, first, h.base_offset));
                    }
                }
            }
            None if h.is_control() => {}
            None => {
                self.open.entry(h.producer_id).or_insert(h.base_offset);
            }
        }
    }

    /// Aborted transactions that overlap `[from, to)`: (producer id, first offset), as a
    /// read_committed Fetch reports them.
    pub fn aborted_between(&self, from: i64, to: i64) -> Vec<(i64, i64)> {
        self.aborted.iter().filter(|a| a.2 >= from && a.1 < to).map(|a| (a.0, a.1)).collect()
    }
}

/// Where DeleteRecords last moved the log start (`DIR/log-start`, decimal), or 0.
fn read_log_start(dir: &Path) -> i64 {
    crate::storage::read_to_string(&dir.join("log-start"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// State readers share with the owner.
pub struct Shared {
    pub topic: String,
    pub partition: i32,
    pub dir: PathBuf,
    pub segments: RwLock<Vec<Arc<Segment>>>,
    pub hw: watch::Sender<i64>,
    pub log_start: AtomicI64,
    pub failed: AtomicBool,
    pub cache: Arc<TailCache>,
    /// Set when the partition could not be opened (damaged older segment).
    pub open_error: Option<String>,
    /// Open and aborted transactions (written by the owner only).
    pub txns: RwLock<TxnIndex>,
    /// `txns.first_unstable()`, for the last stable offset without taking the lock.
    pub first_unstable: AtomicI64,
}

impl Shared {
    pub fn hw(&self) -> i64 {
        *self.hw.borrow()
    }

    pub fn log_start(&self) -> i64 {
        self.log_start.load(Ordering::Acquire)
    }

    /// The last stable offset: below it every transaction is decided (committed or aborted)
    /// and durable; the high watermark when no transaction is open.
    pub fn lso(&self) -> i64 {
        self.hw().min(self.first_unstable.load(Ordering::Acquire))
    }

    /// Aborted transactions overlapping `[from, to)` (see `TxnIndex::aborted_between`).
    pub fn aborted_between(&self, from: i64, to: i64) -> Vec<(i64, i64)> {
        self.txns.read().unwrap_or_else(|e| e.into_inner()).aborted_between(from, to)
    }

    /// Bytes of log on disk (whole batches; preallocated space not counted).
    pub fn size_bytes(&self) -> u64 {
        self.segments.read().unwrap_or_else(|e| e.into_inner()).iter().map(|s| s.size()).sum()
    }

    fn segs(&self) -> Vec<Arc<Segment>> {
        self.segments.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Reads record batches at `offset` (or the log start, if `offset` was deleted) for a
    /// Fetch, below `limit` (the high watermark, or the last stable offset for
    /// read_committed). Err is a Kafka error code. At most `max_bytes`,
    /// except that the first batch is returned whole when it alone is larger, unless `strict`
    /// (the answer already holds records: only its first batch may exceed the limits).
    ///
    /// Below the RAM window, an answer of `STREAM_MIN_BYTES` or more is not read here: it is
    /// handed back as a file range that the connection's writer reads slice by slice while it
    /// sends (see server::write_bulk). So a cold 64 MiB fetch holds one slice in memory, not
    /// 64 MiB, and its socket copying is spread over the disk reads instead of following them
    /// in one burst (a loopback burst of that size made concurrent fdatasyncs wait for the
    /// CPU's network work, measured in benchmarks/kaka/RESULTS.md).
    pub async fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        limit: i64,
        strict: bool,
    ) -> Result<Vec<Piece>, i16> {
        if self.open_error.is_some() {
            return Err(errors::KAFKA_STORAGE_ERROR);
        }
        // An offset that was deleted (retention, DeleteRecords) reads from the oldest record
        // kept, as the seed asks, where Kafka answers OFFSET_OUT_OF_RANGE: a consumer that
        // fell behind the retention goes on rather than resetting. A consumer that must know
        // sees the jump (its next record's offset is past the one it asked for, and the
        // answer's log start is past it too). Offsets that never existed are still refused,
        // and so is a deleted one when nothing is kept (no oldest record to read from).
        let (hw, log_start) = (self.hw(), self.log_start());
        if offset < 0 || offset > hw || (offset < log_start && log_start >= hw) {
            return Err(errors::OFFSET_OUT_OF_RANGE);
        }
        let moved = offset < log_start;
        let offset = offset.max(log_start);
        // A batch is served whole, and a client drops only the records below the offset it
        // asked for: a batch that starts below the log start (a DeleteRecords inside it;
        // retention deletes whole segments, so never after it) would hand a consumer moved up
        // to it the deleted records. Kafka's answer there.
        let straddles = |base: i64| moved && base < log_start;
        let hw = limit.min(hw);
        if offset >= hw {
            return Ok(Vec::new());
        }
        // Cached batches are handed out as they are (shared, not copied): the response is sent
        // in pieces (see wire::Outgoing).
        if let Some(parts) = self.cache.read(offset, max_bytes, hw, strict) {
            if let Some(first) = parts.first() {
                if first.len() >= 8 && straddles(i64::from_be_bytes(first[..8].try_into().unwrap())) {
                    return Err(errors::OFFSET_OUT_OF_RANGE);
                }
                return Ok(parts.into_iter().map(Piece::Mem).collect());
            }
        }
        // Below the RAM window: read the segment through its index on a blocking thread.
        let segs = self.segs();
        let start = segs.partition_point(|s| s.base_offset <= offset).saturating_sub(1);
        for seg in segs.into_iter().skip(start) {
            if seg.next_offset() <= offset {
                continue; // offset lies past this segment (or in a hole at its end)
            }
            let s = seg.clone();
            let data = tokio::task::spawn_blocking(move || {
                // None: nothing here, try the next segment; Some(None): the batch at `offset`
                // does not fit a strict read, answer without records. With the piece, the
                // base offset of its first batch.
                let Some((pos, h)) = s.locate(offset)? else { return Ok(None) };
                if h.base_offset >= hw {
                    return Ok(None);
                }
                if let Some(len) = s.stream_range(pos, max_bytes, hw, STREAM_MIN_BYTES) {
                    return Ok(Some(Some((h.base_offset, Piece::File(FileRange { seg: s, pos, len })))));
                }
                let data = s.read_from(pos, max_bytes, hw, strict)?;
                if data.is_empty() && strict {
                    return Ok(Some(None));
                }
                Ok::<_, io::Error>(
                    (!data.is_empty()).then(|| Some((h.base_offset, Piece::Mem(Bytes::from(data))))),
                )
            })
            .await
            .map_err(|_| errors::KAFKA_STORAGE_ERROR)?
            .map_err(|e| {
                tracing::error!(topic = %self.topic, partition = self.partition, "read failed: {e}");
                errors::KAFKA_STORAGE_ERROR
            })?;
            match data {
                Some(Some((base, _))) if straddles(base) => return Err(errors::OFFSET_OUT_OF_RANGE),
                Some(piece) => return Ok(piece.map(|(_, p)| p).into_iter().collect()),
                None => {}
            }
        }
        Ok(Vec::new())
    }

    /// ListOffsets: first offset with timestamp >= ts -> (offset, timestamp), or (-1, -1).
    pub async fn offset_for_time(self: &Arc<Self>, ts: i64) -> Result<(i64, i64), i16> {
        let hw = self.hw();
        let segs = self.segs();
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            for seg in segs {
                match seg.find_by_time(ts, hw) {
                    // Records below the log start (DeleteRecords) are gone for readers: the
                    // answer is the log start itself, as Kafka gives it.
                    Ok(Some((off, t))) => return Ok((off.max(me.log_start()), t)),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::error!(topic = %me.topic, partition = me.partition, "time lookup: {e}");
                        return Err(errors::KAFKA_STORAGE_ERROR);
                    }
                }
            }
            Ok((-1, -1))
        })
        .await
        .map_err(|_| errors::KAFKA_STORAGE_ERROR)?
    }

    /// ListOffsets -3: offset of the record with the largest timestamp (first if tied).
    pub async fn max_timestamp_offset(&self) -> Result<(i64, i64), i16> {
        let hw = self.hw();
        let segs = self.segs();
        let Some(best) = segs
            .iter()
            .filter(|s| s.size() > 0)
            .max_by_key(|s| (s.max_ts.load(Ordering::Acquire), -s.base_offset))
            .cloned()
        else {
            return Ok((-1, -1));
        };
        let ts = best.max_ts.load(Ordering::Acquire);
        match self.offset_for_time_in(best, ts, hw).await? {
            Some(found) => Ok(found),
            None => Ok((-1, -1)),
        }
    }

    async fn offset_for_time_in(
        &self,
        seg: Arc<Segment>,
        ts: i64,
        hw: i64,
    ) -> Result<Option<(i64, i64)>, i16> {
        tokio::task::spawn_blocking(move || seg.find_by_time(ts, hw))
            .await
            .map_err(|_| errors::KAFKA_STORAGE_ERROR)?
            .map_err(|_| errors::KAFKA_STORAGE_ERROR)
    }
}

/// The handle the broker keeps for a partition.
#[derive(Clone)]
pub struct Partition {
    pub shared: Arc<Shared>,
    pub tx: mpsc::UnboundedSender<Msg>,
}

impl Partition {
    /// Hands the owner new topic settings (AlterConfigs). A stopped owner needs none.
    pub fn reconfigure(&self, cfg: Arc<TopicConfig>) {
        let _ = self.tx.send(Msg::Reconfigure(cfg));
    }

    /// DeleteRecords for this partition: the new log start, or a Kafka error code.
    pub async fn delete_records(&self, offset: i64) -> Result<i64, i16> {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Msg::DeleteRecords(offset, tx)).is_err() {
            return Err(errors::KAFKA_STORAGE_ERROR);
        }
        rx.await.unwrap_or(Err(errors::KAFKA_STORAGE_ERROR))
    }
}

#[derive(Debug, Clone, Copy)]
struct BatchMeta {
    first_seq: i32,
    last_seq: i32,
    base_offset: i64,
}

#[derive(Debug, Clone, Default)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchMeta>,
}

/// What the idempotence check decided for one batch.
enum Verdict {
    Append,
    /// An exact retry of a batch already in the log: answer with its original offset.
    Duplicate(i64),
    Reject(i16, &'static str),
}

/// A running fdatasync: its task, the replies it will release, and the high watermark it
/// makes durable.
type InFlightSync = (tokio::task::JoinHandle<io::Result<()>>, Vec<Waiting>, i64);

/// Replies waiting for the sync that will make their batches durable.
struct Waiting {
    reply: oneshot::Sender<AppendResult>,
    result: AppendResult,
}

struct Owner {
    shared: Arc<Shared>,
    cfg: TopicConfig,
    broker: BrokerConfig,
    memory: Arc<Memory>,
    producers: HashMap<i64, ProducerEntry>,
    leo: i64,
    /// Replies for batches written since the last sync was started.
    unsynced: Vec<Waiting>,
    dirty: bool,
    syncs_done: u64,
    /// The compaction pass in progress, if any. It runs as its own task so that produces to
    /// this partition keep flowing while closed segments are rewritten; retention waits for
    /// it, because a segment it deletes must not be renamed back into place by the cleaner.
    compaction: Option<tokio::task::JoinHandle<Option<PassSummary>>>,
    /// What the last finished compaction pass left (None: none yet, or settings changed since),
    /// from which `compaction_due` decides whether another pass is worth its reads.
    last_pass: Option<PassSummary>,
}

/// Opens (recovering if needed) or creates a partition directory and starts its owner.
pub fn open(
    dir: &Path,
    topic: &str,
    partition: i32,
    cfg: TopicConfig,
    broker: &BrokerConfig,
    memory: Arc<Memory>,
) -> Partition {
    let (tx, rx) = mpsc::unbounded_channel();
    let (hw_tx, _) = watch::channel(0i64);
    let (segments, producers, txns, open_error) = match load(dir) {
        Ok((s, p, t)) => (s, p, t, None),
        Err(e) => {
            tracing::error!(topic, partition, "refusing to open partition: {e}");
            (Vec::new(), HashMap::new(), TxnIndex::default(), Some(e))
        }
    };
    let leo = segments.last().map(|s| s.next_offset()).unwrap_or(0);
    // The log start is the first segment's base, or further on where DeleteRecords moved it.
    let log_start = segments.first().map(|s| s.base_offset).unwrap_or(0).max(read_log_start(dir).min(leo));
    hw_tx.send_replace(leo);
    let shared = Arc::new(Shared {
        topic: topic.to_string(),
        partition,
        dir: dir.to_path_buf(),
        segments: RwLock::new(segments),
        hw: hw_tx,
        log_start: AtomicI64::new(log_start),
        failed: AtomicBool::new(open_error.is_some()),
        cache: Arc::new(TailCache::default()),
        open_error,
        first_unstable: AtomicI64::new(txns.first_unstable()),
        txns: RwLock::new(txns),
    });
    let owner = Owner {
        shared: shared.clone(),
        cfg,
        broker: broker.clone(),
        memory,
        producers,
        leo,
        unsynced: Vec::new(),
        dirty: false,
        syncs_done: 0,
        compaction: None,
        last_pass: None,
    };
    tokio::spawn(owner.run(rx));
    Partition { shared, tx }
}

/// Loads the segments of a partition directory. Older segments are checked by their header
/// chain (or trusted index files), the newest is CRC-checked and its torn tail truncated.
type Loaded = (Vec<Arc<Segment>>, HashMap<i64, ProducerEntry>, TxnIndex);

fn load(dir: &Path) -> Result<Loaded, String> {
    segment::create_dir_synced(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut bases = Vec::new();
    for name in crate::storage::list(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        if let Some(stem) = name.strip_suffix(".log") {
            if stem.len() == 20 {
                if let Ok(b) = stem.parse::<i64>() {
                    bases.push(b);
                }
            }
        } else if name.ends_with(".cleaned") || name.ends_with(".tmp") {
            // Leftovers of an interrupted compaction or index write: the originals are intact.
            let _ = crate::storage::remove_file(&dir.join(&name));
        }
    }
    bases.sort_unstable();
    let mut segs: Vec<Arc<Segment>> = Vec::with_capacity(bases.len());
    for (i, &b) in bases.iter().enumerate() {
        let newest = i + 1 == bases.len();
        let seg = Segment::open(&dir.join(segment::file_name(b, "log")), b, newest)?;
        if let Some(prev) = segs.last() {
            if prev.next_offset() > b {
                return Err(format!(
                    "{}: segment {b} starts below the end of the previous one ({})",
                    dir.display(),
                    prev.next_offset()
                ));
            }
        }
        segs.push(Arc::new(seg));
    }
    // Producer state: the snapshot taken when the newest segment was created, then the
    // newest segment's own batch headers replayed on top.
    // Transaction state the same way: open and aborted transactions as of the snapshot, then
    // the newest segment's transactional batches and markers.
    let mut producers = HashMap::new();
    let mut txns = TxnIndex::default();
    if let Some(newest) = segs.last() {
        let snap = dir.join(segment::file_name(newest.base_offset, "snapshot"));
        if let Ok(b) = crate::storage::read(&snap) {
            (producers, txns) = decode_snapshot(&b);
        }
        let mut err = None;
        newest
            .scan_headers(0, |pos, h| {
                note_producer(&mut producers, h);
                let marker = if h.is_control() {
                    match newest.read_batch(pos, h) {
                        Ok(b) => batch::control_kind(&b, h),
                        Err(e) => {
                            err = Some(e.to_string());
                            return false;
                        }
                    }
                } else {
                    None
                };
                txns.note(h, marker);
                true
            })
            .map_err(|e| e.to_string())?;
        if let Some(e) = err {
            return Err(format!("{}: reading a transaction marker: {e}", dir.display()));
        }
    }
    Ok((segs, producers, txns))
}

fn note_producer(producers: &mut HashMap<i64, ProducerEntry>, h: &BatchHeader) {
    if h.producer_id < 0 {
        return;
    }
    let e = producers.entry(h.producer_id).or_default();
    if h.producer_epoch != e.epoch {
        e.batches.clear();
        e.epoch = h.producer_epoch;
    }
    if h.is_control() {
        return; // a marker carries the coordinator's epoch but no sequence
    }
    e.batches.push_back(BatchMeta {
        first_seq: h.base_sequence,
        last_seq: h.last_sequence(),
        base_offset: h.base_offset,
    });
    while e.batches.len() > BATCHES_TO_RETAIN {
        e.batches.pop_front();
    }
}

/// Producer state, then (appended later, so older snapshots still read) the transaction index:
/// open transactions and aborted ones. One CRC over all of it.
fn encode_snapshot(p: &HashMap<i64, ProducerEntry>, t: &TxnIndex) -> Vec<u8> {
    let mut o = Vec::new();
    o.extend_from_slice(&(p.len() as u32).to_be_bytes());
    for (pid, e) in p {
        o.extend_from_slice(&pid.to_be_bytes());
        o.extend_from_slice(&e.epoch.to_be_bytes());
        o.push(e.batches.len() as u8);
        for b in &e.batches {
            o.extend_from_slice(&b.first_seq.to_be_bytes());
            o.extend_from_slice(&b.last_seq.to_be_bytes());
            o.extend_from_slice(&b.base_offset.to_be_bytes());
        }
    }
    o.extend_from_slice(&(t.open.len() as u32).to_be_bytes());
    for (pid, first) in &t.open {
        o.extend_from_slice(&pid.to_be_bytes());
        o.extend_from_slice(&first.to_be_bytes());
    }
    o.extend_from_slice(&(t.aborted.len() as u32).to_be_bytes());
    for (pid, first, last) in &t.aborted {
        o.extend_from_slice(&pid.to_be_bytes());
        o.extend_from_slice(&first.to_be_bytes());
        o.extend_from_slice(&last.to_be_bytes());
    }
    let crc = crc32c::crc32c(&o);
    o.extend_from_slice(&crc.to_be_bytes());
    o
}

/// Decodes a producer snapshot; a damaged one yields empty state (any sequence is then
/// accepted for those producers, as Kafka does for producers it has no state for).
fn decode_snapshot(b: &[u8]) -> (HashMap<i64, ProducerEntry>, TxnIndex) {
    let out = HashMap::new();
    if b.len() < 8 {
        return (out, TxnIndex::default());
    }
    let (body, crc) = b.split_at(b.len() - 4);
    if crc32c::crc32c(body).to_be_bytes() != crc {
        tracing::warn!("producer snapshot checksum mismatch; ignoring it");
        return (out, TxnIndex::default());
    }
    let mut p = 0;
    let producers = decode_producers(body, &mut p);
    let txns = decode_txn_index(body, &mut p).unwrap_or_default();
    (producers, txns)
}

fn decode_txn_index(body: &[u8], p: &mut usize) -> Option<TxnIndex> {
    let mut t = TxnIndex::default();
    let i64_at = |q: usize| body.get(q..q + 8).map(|s| i64::from_be_bytes(s.try_into().unwrap()));
    let u32_at = |q: usize| body.get(q..q + 4).map(|s| u32::from_be_bytes(s.try_into().unwrap()));
    let n = u32_at(*p)?;
    *p += 4;
    for _ in 0..n {
        t.open.insert(i64_at(*p)?, i64_at(*p + 8)?);
        *p += 16;
    }
    let n = u32_at(*p)?;
    *p += 4;
    for _ in 0..n {
        t.aborted.push((i64_at(*p)?, i64_at(*p + 8)?, i64_at(*p + 16)?));
        *p += 24;
    }
    Some(t)
}

fn decode_producers(body: &[u8], pos: &mut usize) -> HashMap<i64, ProducerEntry> {
    let mut out = HashMap::new();
    let mut p = 4;
    *pos = body.len(); // on damage: nothing after the producers is read either
    let n = u32::from_be_bytes(body[0..4].try_into().unwrap());
    for _ in 0..n {
        if p + 11 > body.len() {
            return HashMap::new();
        }
        let pid = i64::from_be_bytes(body[p..p + 8].try_into().unwrap());
        let epoch = i16::from_be_bytes(body[p + 8..p + 10].try_into().unwrap());
        let k = body[p + 10] as usize;
        p += 11;
        let mut e = ProducerEntry { epoch, batches: VecDeque::new() };
        for _ in 0..k {
            if p + 16 > body.len() {
                return HashMap::new();
            }
            e.batches.push_back(BatchMeta {
                first_seq: i32::from_be_bytes(body[p..p + 4].try_into().unwrap()),
                last_seq: i32::from_be_bytes(body[p + 4..p + 8].try_into().unwrap()),
                base_offset: i64::from_be_bytes(body[p + 8..p + 16].try_into().unwrap()),
            });
            p += 16;
        }
        out.insert(pid, e);
    }
    *pos = p;
    out
}

impl Owner {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Msg>) {
        let mut in_flight: Option<InFlightSync> = None;
        let interval_ms = self.broker.fsync_interval_ms;
        let mut sync_tick = tokio::time::interval(Duration::from_millis(interval_ms.max(1)));
        sync_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut retention_tick =
            tokio::time::interval(Duration::from_millis(self.broker.retention_check_ms.max(10)));
        retention_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut shutdown: Option<oneshot::Sender<()>> = None;
        loop {
            tokio::select! {
                msg = rx.recv(), if shutdown.is_none() => {
                    let Some(msg) = msg else { break };
                    let mut group = vec![msg];
                    while let Ok(m) = rx.try_recv() {
                        group.push(m);
                    }
                    for m in group {
                        match m {
                            Msg::Append { batch, header, reply, reserved } => {
                                self.append(batch, header, reply, reserved).await
                            }
                            Msg::Shutdown(done) => shutdown = Some(done),
                            Msg::Marker { producer_id, producer_epoch, commit, reply } => {
                                self.marker(producer_id, producer_epoch, commit, reply).await
                            }
                            Msg::DeleteRecords(offset, reply) => {
                                let _ = reply.send(segment::blocking(|| self.delete_records(offset)));
                            }
                            Msg::Reconfigure(cfg) => {
                                self.cfg = (*cfg).clone();
                                self.last_pass = None; // new settings: the next tick compacts
                            }
                        }
                    }
                }
                res = async { (&mut in_flight.as_mut().expect("guarded").0).await },
                    if in_flight.is_some() => {
                    let (_, waiting, hw) = in_flight.take().expect("guarded");
                    let ok = matches!(res, Ok(Ok(())));
                    self.finish_sync(ok, waiting, hw, &res);
                }
                _ = sync_tick.tick(), if interval_ms > 0 && self.dirty && in_flight.is_none() => {
                    self.start_sync(&mut in_flight);
                }
                _ = retention_tick.tick(), if in_flight.is_none() && shutdown.is_none() => {
                    self.housekeeping().await;
                }
            }
            if interval_ms == 0 && in_flight.is_none() && self.dirty {
                self.start_sync(&mut in_flight);
            }
            if shutdown.is_some() && in_flight.is_none() && !self.dirty {
                break;
            }
        }
        // Clean stop: everything written is synced; leave index files for a fast restart
        // (the newest segment is still CRC-checked on open).
        if let Some(seg) = self.active() {
            if let Err(e) = segment::blocking(|| seg.seal().and_then(|()| seg.write_index_files())) {
                tracing::warn!(topic = %self.shared.topic, "writing index files: {e}");
            }
        }
        if let Some(done) = shutdown {
            let _ = done.send(());
        }
    }

    fn active(&self) -> Option<Arc<Segment>> {
        self.shared.segments.read().unwrap_or_else(|e| e.into_inner()).last().cloned()
    }

    /// Starts the fdatasync that will acknowledge everything written since the last one.
    ///
    /// Normally on a blocking thread, so that the owner keeps writing the next group while the
    /// disk works (group commit). But when the broker is otherwise quiet (no other sync running
    /// anywhere) and the group is one produce, the owner syncs inline and answers at once:
    /// handing the sync to another thread and back costs two wake-ups, and on an idle VM each
    /// wake-up from idle costs about as much as the fdatasync itself.
    ///
    /// That inline sync runs on the async worker itself when the runtime has another worker
    /// to steal this one's queued tasks meanwhile: `block_in_place` would first hand the
    /// worker's core to another thread and take it back after, about three thread wake-ups
    /// per produce. Measured under goblin-core's broker ack mode (one produce in flight,
    /// redis-benchmark -P 1 -c 50, three alternating rounds): request to response p50 299-352
    /// -> 261-317 us, 4.2 -> 1.1 wake-ups between kaka's threads per produce
    /// (docs/BENCHMARKS.md). With a single worker, blocking it would stall every connection,
    /// so there the sync still goes through `block_in_place` (`segment::blocking_short`).
    fn start_sync(&mut self, in_flight: &mut Option<InFlightSync>) {
        let Some(seg) = self.active() else {
            self.dirty = false;
            return;
        };
        self.dirty = false;
        self.syncs_done += 1;
        let fail = self.broker.fail_fsync_after.is_some_and(|n| self.syncs_done > n);
        let sync = move || -> io::Result<()> {
            SYNCS.fetch_add(1, Ordering::Relaxed);
            if fail {
                return Err(io::Error::other("injected fdatasync failure (--debug-fail-fsync-after)"));
            }
            seg.sync()
        };
        // Claiming the broker-wide count (0 -> 1) makes this sync the only one running: two
        // partitions' owners that both found the broker quiet would otherwise each block a
        // worker on the disk at once, and on two cores that is every worker.
        let quiet = self.broker.fsync_interval_ms == 0
            && self.unsynced.len() == 1
            && SYNCS_IN_FLIGHT.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire).is_ok();
        if quiet {
            let res = segment::blocking_short(sync);
            SYNCS_IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
            let waiting = std::mem::take(&mut self.unsynced);
            self.finish_sync(res.is_ok(), waiting, self.leo, &Ok(res));
            return;
        }
        SYNCS_IN_FLIGHT.fetch_add(1, Ordering::AcqRel);
        let handle = tokio::task::spawn_blocking(move || {
            let res = sync();
            SYNCS_IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
            res
        });
        *in_flight = Some((handle, std::mem::take(&mut self.unsynced), self.leo));
    }

    fn finish_sync(
        &mut self,
        ok: bool,
        waiting: Vec<Waiting>,
        hw: i64,
        res: &Result<io::Result<()>, tokio::task::JoinError>,
    ) {
        if ok {
            if self.broker.fsync_interval_ms == 0 {
                self.shared.hw.send_if_modified(|v| {
                    let changed = *v < hw;
                    *v = (*v).max(hw);
                    changed
                });
            }
            for w in waiting {
                let _ = w.reply.send(w.result);
            }
            return;
        }
        tracing::error!(
            topic = %self.shared.topic,
            partition = self.shared.partition,
            "fdatasync failed ({res:?}); partition stops accepting writes"
        );
        self.fail();
        for w in waiting.into_iter().chain(std::mem::take(&mut self.unsynced)) {
            let _ = w.reply.send(self.storage_error());
        }
    }

    fn fail(&mut self) {
        self.shared.failed.store(true, Ordering::Release);
    }

    fn storage_error(&self) -> AppendResult {
        AppendResult {
            error: errors::KAFKA_STORAGE_ERROR,
            base_offset: -1,
            log_start: self.shared.log_start(),
            message: Some("partition storage failed; writes refused".into()),
        }
    }

    fn check_idempotence(&self, h: &BatchHeader) -> Verdict {
        if h.producer_id < 0 {
            return Verdict::Append;
        }
        if h.base_sequence < 0 {
            return Verdict::Reject(errors::INVALID_RECORD, "idempotent batch without a sequence");
        }
        let Some(e) = self.producers.get(&h.producer_id) else {
            return Verdict::Append; // no state (new, expired or deleted): any sequence
        };
        if h.producer_epoch < e.epoch {
            return Verdict::Reject(errors::INVALID_PRODUCER_EPOCH, "producer epoch is stale");
        }
        if h.producer_epoch > e.epoch {
            return if h.base_sequence == 0 {
                Verdict::Append
            } else {
                Verdict::Reject(
                    errors::OUT_OF_ORDER_SEQUENCE_NUMBER,
                    "a new producer epoch must start at sequence 0",
                )
            };
        }
        let last_seq = h.last_sequence();
        if let Some(b) = e.batches.iter().find(|b| b.first_seq == h.base_sequence && b.last_seq == last_seq) {
            return Verdict::Duplicate(b.base_offset);
        }
        let Some(last) = e.batches.back() else { return Verdict::Append };
        let expected = if last.last_seq == i32::MAX { 0 } else { last.last_seq + 1 };
        if h.base_sequence == expected {
            Verdict::Append
        } else if h.base_sequence < expected
            && e.batches.front().is_some_and(|f| h.base_sequence >= f.first_seq)
        {
            // Inside the retained window but not an exact batch match.
            Verdict::Reject(errors::DUPLICATE_SEQUENCE_NUMBER, "sequence already written")
        } else if h.base_sequence < expected && expected - h.base_sequence < (1 << 30) {
            Verdict::Reject(errors::DUPLICATE_SEQUENCE_NUMBER, "sequence already written")
        } else {
            Verdict::Reject(errors::OUT_OF_ORDER_SEQUENCE_NUMBER, "sequence gap")
        }
    }

    async fn append(
        &mut self,
        batch: Bytes,
        h: BatchHeader,
        reply: Option<oneshot::Sender<AppendResult>>,
        reserved: usize,
    ) {
        let log_start = self.shared.log_start();
        let answer = |reply: Option<oneshot::Sender<AppendResult>>, r: AppendResult| {
            if let Some(reply) = reply {
                let _ = reply.send(r);
            }
        };
        if self.shared.failed.load(Ordering::Acquire) {
            self.memory.release(reserved);
            answer(reply, self.storage_error());
            return;
        }
        match self.check_idempotence(&h) {
            Verdict::Append => {}
            Verdict::Duplicate(base) => {
                self.memory.release(reserved);
                let r = AppendResult { error: errors::NONE, base_offset: base, log_start, message: None };
                if self.broker.fsync_interval_ms == 0 {
                    // The original may still await its sync: answer the retry only after the
                    // next sync (an extra fdatasync of a clean file is cheap).
                    if let Some(reply) = reply {
                        self.unsynced.push(Waiting { reply, result: r });
                        self.dirty = true;
                    }
                } else {
                    answer(reply, r);
                }
                return;
            }
            Verdict::Reject(code, why) => {
                self.memory.release(reserved);
                let r =
                    AppendResult { error: code, base_offset: -1, log_start, message: Some(why.to_string()) };
                answer(reply, r);
                return;
            }
        }
        // Assign the offset: rewrite baseOffset (outside the CRC) and leave the rest as sent.
        let base = self.leo;
        let mut bytes = batch.to_vec();
        bytes[0..8].copy_from_slice(&base.to_be_bytes());
        let mut h = h;
        h.base_offset = base;
        if let Err(e) = self.write(&bytes, &h).await {
            tracing::error!(topic = %self.shared.topic, partition = self.shared.partition,
                "write failed: {e}; partition stops accepting writes");
            self.memory.release(reserved);
            self.fail();
            let e = self.storage_error();
            for w in std::mem::take(&mut self.unsynced) {
                let _ = w.reply.send(e.clone());
            }
            answer(reply, e);
            return;
        }
        APPENDS.fetch_add(1, Ordering::Relaxed);
        note_producer(&mut self.producers, &h);
        if h.is_transactional() {
            self.note_txn(&h, None);
        }
        self.leo = h.last_offset() + 1;
        let bytes = Bytes::from(bytes);
        self.memory
            .insert(&self.shared.cache, Cached { base_offset: base, last_offset: h.last_offset(), bytes });
        let _ = reserved; // the reservation now belongs to the cached copy
        let r = AppendResult { error: errors::NONE, base_offset: base, log_start, message: None };
        self.dirty = true;
        if self.broker.fsync_interval_ms > 0 {
            // Acked after write(2); visible at once. A power failure may lose the last N ms.
            let leo = self.leo;
            self.shared.hw.send_replace(leo);
            if let Some(reply) = reply {
                let _ = reply.send(r);
            }
        } else if let Some(reply) = reply {
            self.unsynced.push(Waiting { reply, result: r });
        }
    }

    /// Updates the transaction index (and so the last stable offset) for one written batch.
    fn note_txn(&self, h: &BatchHeader, marker: Option<bool>) {
        let mut t = self.shared.txns.write().unwrap_or_else(|e| e.into_inner());
        t.note(h, marker);
        self.shared.first_unstable.store(t.first_unstable(), Ordering::Release);
    }

    /// Forgets aborted transactions wholly below the log start (their records are gone).
    fn prune_aborted(&self, log_start: i64) {
        let mut t = self.shared.txns.write().unwrap_or_else(|e| e.into_inner());
        t.aborted.retain(|a| a.2 >= log_start);
    }

    /// Writes the commit or abort marker of `producer_id`'s open transaction in this
    /// partition, and answers once it is durable (even with `--fsync-interval-ms`: the
    /// coordinator records the transaction complete only after every marker is on disk, so a
    /// power failure cannot leave a transaction open here that it believes finished). A
    /// producer with no open transaction here gets no marker (nothing to close). Either way
    /// the coordinator's epoch becomes the producer's here, so a fenced producer's late batch
    /// is refused (INVALID_PRODUCER_EPOCH).
    async fn marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        reply: oneshot::Sender<AppendResult>,
    ) {
        let log_start = self.shared.log_start();
        if self.shared.failed.load(Ordering::Acquire) {
            let _ = reply.send(self.storage_error());
            return;
        }
        let e = self.producers.entry(producer_id).or_default();
        if producer_epoch > e.epoch {
            e.epoch = producer_epoch;
            e.batches.clear();
        }
        let open = self.shared.txns.read().unwrap_or_else(|e| e.into_inner()).open.contains_key(&producer_id);
        if !open {
            let _ =
                reply.send(AppendResult { error: errors::NONE, base_offset: -1, log_start, message: None });
            return;
        }
        let mut bytes = batch::control_batch(producer_id, producer_epoch, commit, now_ms());
        let base = self.leo;
        bytes[0..8].copy_from_slice(&base.to_be_bytes());
        let Some(h) = BatchHeader::parse(&bytes) else {
            let _ = reply.send(self.storage_error());
            return;
        };
        if let Err(e) = self.write(&bytes, &h).await {
            tracing::error!(topic = %self.shared.topic, partition = self.shared.partition,
                "writing a transaction marker failed: {e}; partition stops accepting writes");
            self.fail();
            let e = self.storage_error();
            for w in std::mem::take(&mut self.unsynced) {
                let _ = w.reply.send(e.clone());
            }
            let _ = reply.send(e);
            return;
        }
        note_producer(&mut self.producers, &h);
        self.note_txn(&h, Some(commit));
        self.leo = base + 1;
        // The marker must be in the tail cache like any batch: a cached read skips offsets
        // that are not cached, and a read_committed client needs to see the marker.
        self.memory.reserve_anyway(bytes.len());
        self.memory.insert(
            &self.shared.cache,
            Cached { base_offset: base, last_offset: base, bytes: Bytes::from(bytes) },
        );
        self.dirty = true;
        if self.broker.fsync_interval_ms > 0 {
            let leo = self.leo;
            self.shared.hw.send_replace(leo);
        }
        let result = AppendResult { error: errors::NONE, base_offset: base, log_start, message: None };
        self.unsynced.push(Waiting { reply, result });
    }

    /// Writes one batch to the active segment, rolling first when it is full. A segment is
    /// synced (and its indexes and the producer snapshot written) before the next is created,
    /// so recovery only ever needs to CRC-check the newest segment.
    async fn write(&mut self, bytes: &[u8], h: &BatchHeader) -> io::Result<()> {
        let active = self.active();
        let need_roll = match &active {
            None => true,
            Some(s) => s.size() > 0 && s.size() + bytes.len() as u64 > self.cfg.segment_bytes,
        };
        if need_roll {
            // Several fsyncs: off the async worker, still in order on the owner.
            let seg = segment::blocking(|| -> io::Result<Segment> {
                if let Some(old) = active {
                    old.seal()?;
                    SYNCS.fetch_add(1, Ordering::Relaxed);
                    old.write_index_files()?;
                }
                let snap = self.shared.dir.join(segment::file_name(self.leo, "snapshot"));
                let txns = self.shared.txns.read().unwrap_or_else(|e| e.into_inner()).clone();
                segment::write_file_synced(&snap, &encode_snapshot(&self.producers, &txns))?;
                let seg = Segment::create(&self.shared.dir, self.leo)?;
                segment::sync_dir(&self.shared.dir)?;
                Ok(seg)
            })?;
            self.shared.segments.write().unwrap_or_else(|e| e.into_inner()).push(Arc::new(seg));
        }
        let seg = self.active().ok_or_else(|| io::Error::other("no active segment"))?;
        seg.append(bytes, h, self.cfg.segment_bytes)
    }

    /// Retention (time and size) and compaction; runs between groups on the owner. Neither
    /// runs while a compaction pass is still going (see `compaction`).
    async fn housekeeping(&mut self) {
        if self.shared.failed.load(Ordering::Acquire) {
            return;
        }
        if self.compaction.as_ref().is_some_and(|h| !h.is_finished()) {
            return;
        }
        if let Some(done) = self.compaction.take() {
            // Finished, so this does not wait. A failed pass leaves `last_pass` as it was,
            // and the next tick tries again.
            if let Ok(Some(summary)) = done.await {
                self.last_pass = Some(summary);
            }
        }
        if self.cfg.delete {
            // Stats, unlinks and a folder fsync: off the async worker.
            segment::blocking(|| self.apply_retention());
        }
        if self.cfg.compact && self.compaction_due() {
            let (shared, cfg, memory) = (self.shared.clone(), self.cfg.clone(), self.memory.clone());
            self.compaction = Some(tokio::spawn(async move {
                match crate::compaction::compact(&shared, &cfg, &memory).await {
                    Ok(summary) => Some(summary),
                    Err(e) => {
                        tracing::error!(topic = %shared.topic, partition = shared.partition,
                            "compaction failed: {e}");
                        None
                    }
                }
            }));
        }
    }

    /// Moves the log start to `offset` (DeleteRecords). The new start is synced to
    /// `log-start` before it is published or answered, so a restart never shows records the
    /// client was told are deleted. Whole segments below it go at the next retention pass.
    fn delete_records(&mut self, offset: i64) -> Result<i64, i16> {
        if self.shared.failed.load(Ordering::Acquire) {
            return Err(errors::KAFKA_STORAGE_ERROR);
        }
        let hw = self.shared.hw();
        let target = if offset == -1 { hw } else { offset };
        if !(0..=hw).contains(&target) {
            return Err(errors::OFFSET_OUT_OF_RANGE);
        }
        let current = self.shared.log_start();
        if target <= current {
            return Ok(current);
        }
        let path = self.shared.dir.join("log-start");
        if let Err(e) = segment::write_file_synced(&path, target.to_string().as_bytes()) {
            tracing::error!(path = %path.display(), "writing the log start failed: {e}");
            return Err(errors::KAFKA_STORAGE_ERROR);
        }
        self.shared.log_start.store(target, Ordering::Release);
        self.memory.drop_below(&self.shared.cache, target);
        self.prune_aborted(target);
        tracing::info!(topic = %self.shared.topic, partition = self.shared.partition, log_start = target,
            "records deleted below the new log start");
        Ok(target)
    }

    /// Whether a compaction pass would find enough to do (see the compaction module).
    fn compaction_due(&self) -> bool {
        let segs = self.shared.segs();
        if segs.len() < 2 {
            return false;
        }
        let Some(last) = self.last_pass else { return true };
        if now_ms() >= last.next_tombstone_expiry {
            return true;
        }
        let closed = &segs[..segs.len() - 1];
        let dirty: u64 = closed.iter().filter(|s| s.base_offset >= last.clean_upto).map(|s| s.size()).sum();
        let total: u64 = closed.iter().map(|s| s.size()).sum();
        dirty > 0 && dirty as f64 >= self.cfg.min_cleanable_dirty_ratio * total as f64
    }

    fn apply_retention(&mut self) {
        let segs = self.shared.segs();
        if segs.len() < 2 {
            return;
        }
        let mut total: i64 = segs.iter().map(|s| s.size() as i64).sum();
        let now = now_ms();
        let mut drop_n = 0;
        let log_start = self.shared.log_start();
        // Never the active (last) segment.
        for s in &segs[..segs.len() - 1] {
            let deleted = s.next_offset() <= log_start; // every record below DeleteRecords' mark
            let by_size =
                self.cfg.retention_bytes >= 0 && total - s.size() as i64 >= self.cfg.retention_bytes;
            let ts = s.max_ts.load(Ordering::Acquire);
            let ts = if ts >= 0 { ts } else { file_mtime_ms(&s.path).unwrap_or(now) };
            let by_time = self.cfg.retention_ms >= 0 && ts < now - self.cfg.retention_ms;
            if !(by_size || by_time || deleted) {
                break;
            }
            total -= s.size() as i64;
            drop_n += 1;
        }
        if drop_n == 0 {
            return;
        }
        let removed: Vec<Arc<Segment>> = {
            let mut w = self.shared.segments.write().unwrap_or_else(|e| e.into_inner());
            w.drain(..drop_n).collect()
        };
        let new_start = self.shared.segs().first().map(|s| s.base_offset).unwrap_or(self.leo).max(log_start);
        self.shared.log_start.store(new_start, Ordering::Release);
        self.memory.drop_below(&self.shared.cache, new_start);
        self.prune_aborted(new_start);
        for s in removed {
            tracing::info!(topic = %self.shared.topic, partition = self.shared.partition,
                segment = s.base_offset, "retention: deleting segment");
            for ext in ["log", "index", "timeindex", "snapshot"] {
                let _ = crate::storage::remove_file(
                    &self.shared.dir.join(segment::file_name(s.base_offset, ext)),
                );
            }
        }
        let _ = segment::sync_dir(&self.shared.dir);
    }
}

fn file_mtime_ms(p: &Path) -> Option<i64> {
    crate::storage::mtime_ms(p)
}

/// Sends Shutdown and waits until the owner has synced and stopped.
pub async fn shutdown(p: &Partition) {
    let (tx, rx) = oneshot::channel();
    if p.tx.send(Msg::Shutdown(tx)).is_ok() {
        let _ = rx.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_roundtrip() {
        let mut p = HashMap::new();
        let mut e = ProducerEntry { epoch: 3, batches: VecDeque::new() };
        e.batches.push_back(BatchMeta { first_seq: 0, last_seq: 9, base_offset: 100 });
        p.insert(42, e);
        let mut t = TxnIndex::default();
        t.open.insert(42, 90);
        t.aborted.push((7, 10, 20));
        let (d, dt) = decode_snapshot(&encode_snapshot(&p, &t));
        assert_eq!(d[&42].epoch, 3);
        assert_eq!(d[&42].batches[0].base_offset, 100);
        assert_eq!(dt, t);
        let mut bad = encode_snapshot(&p, &t);
        bad[5] ^= 1;
        assert!(decode_snapshot(&bad).0.is_empty());
        // A snapshot written before transactions existed (producers only) still reads.
        let mut old = encode_snapshot(&p, &TxnIndex::default());
        old.truncate(old.len() - 12);
        let crc = crc32c::crc32c(&old);
        old.extend_from_slice(&crc.to_be_bytes());
        let (d, dt) = decode_snapshot(&old);
        assert_eq!(d[&42].epoch, 3);
        assert_eq!(dt, TxnIndex::default());
    }
}
