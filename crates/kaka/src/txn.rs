//! The transaction coordinator: transactional ids, their producer id and epoch, and the
//! state of each one's current transaction (Kafka's `TransactionCoordinator`, for one node).
//!
//! Every state change is one frame appended to `DIR/transactions/txn.log` and fdatasync'ed
//! before it is applied or answered (the frame holds the transactional id's whole state, so a
//! replay keeps the last frame per id). The log is fail-stop like the offsets log: a failed
//! append is cut off before the next; on open a torn tail is dropped, while a bad frame with
//! valid ones after it refuses to start. When most frames are superseded the log is rewritten
//! (temporary file, fsync, durable rename).
//!
//! Ending a transaction: PrepareCommit/PrepareAbort is made durable first (the decision),
//! then a marker is written to every partition of the transaction and each partition answers
//! once its marker is on disk; a commit then applies the transaction's offsets
//! (TxnOffsetCommit) to the group coordinator; last, CompleteCommit/CompleteAbort is made
//! durable. EndTxn is answered after all of it. On restart a Prepare* state is completed (its
//! markers are written again where the partition still has the transaction open) and an
//! Ongoing transaction is aborted, so a restart never loses a commit nor resurrects an abort.
//!
//! All changes are serialised by one async lock (held across the log's fsync and the markers'
//! waits, so no runtime thread blocks); produce verification reads the state map directly.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::applog::AppendLog;
use crate::broker::Broker;
use crate::errors;
use crate::groups::{Committed, OffsetEntry};
use crate::partition::{now_ms, Msg};
use crate::segment;

/// Kafka's default `transaction.max.timeout.ms`: longer client timeouts are refused.
pub const MAX_TIMEOUT_MS: i32 = 900_000;

/// How often expired transactions are looked for.
const SWEEP: Duration = Duration::from_millis(200);
/// How long after a failed completion (a partition that cannot take its marker) it is retried.
const RETRY_MS: i64 = 5_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
}

impl TxnState {
    fn code(self) -> u8 {
        self as u8
    }

    fn from_code(c: u8) -> Option<TxnState> {
        Some(match c {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            _ => return None,
        })
    }

    /// Kafka's names (ListTransactions, DescribeTransactions).
    pub fn kafka_name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }

    pub const ALL: [TxnState; 6] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
    ];

    fn preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// One transactional id's state.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnMeta {
    pub producer_id: i64,
    pub epoch: i16,
    /// The epoch before the coordinator bumped it on its own (a timeout abort), or -1: the
    /// producer that held it may still ask InitProducerId for a new epoch (KIP-360).
    pub last_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// When the current transaction began (its first AddPartitions/AddOffsets), ms.
    pub started_ms: i64,
    pub partitions: BTreeSet<(String, i32)>,
    /// Groups of the transaction (AddOffsetsToTxn) and their pending offsets (TxnOffsetCommit).
    pub offsets: BTreeMap<String, BTreeMap<(String, i32), Committed>>,
}

impl TxnMeta {
    fn new(producer_id: i64, timeout_ms: i32) -> TxnMeta {
        TxnMeta {
            producer_id,
            epoch: 0,
            last_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            started_ms: 0,
            partitions: BTreeSet::new(),
            offsets: BTreeMap::new(),
        }
    }

    /// The producer id and epoch a request names must be the current ones.
    fn check(&self, producer_id: i64, epoch: i16) -> Result<(), i16> {
        if producer_id != self.producer_id {
            Err(errors::INVALID_PRODUCER_ID_MAPPING)
        } else if epoch != self.epoch {
            Err(errors::PRODUCER_FENCED)
        } else {
            Ok(())
        }
    }

    /// Starts a new transaction unless one is going on.
    fn begin(&mut self) {
        if self.state != TxnState::Ongoing {
            self.state = TxnState::Ongoing;
            self.started_ms = now_ms();
            self.partitions.clear();
            self.offsets.clear();
        }
    }
}

// ------------------------------------------------------------------------- log encoding

fn put_str(o: &mut Vec<u8>, s: &str) {
    o.extend_from_slice(&(s.len() as u32).to_be_bytes());
    o.extend_from_slice(s.as_bytes());
}

fn encode(tid: &str, m: &TxnMeta) -> Vec<u8> {
    let mut o = Vec::with_capacity(64);
    put_str(&mut o, tid);
    o.extend_from_slice(&m.producer_id.to_be_bytes());
    o.extend_from_slice(&m.epoch.to_be_bytes());
    o.extend_from_slice(&m.last_epoch.to_be_bytes());
    o.extend_from_slice(&m.timeout_ms.to_be_bytes());
    o.push(m.state.code());
    o.extend_from_slice(&m.started_ms.to_be_bytes());
    o.extend_from_slice(&(m.partitions.len() as u32).to_be_bytes());
    for (t, p) in &m.partitions {
        put_str(&mut o, t);
        o.extend_from_slice(&p.to_be_bytes());
    }
    o.extend_from_slice(&(m.offsets.len() as u32).to_be_bytes());
    for (g, offs) in &m.offsets {
        put_str(&mut o, g);
        o.extend_from_slice(&(offs.len() as u32).to_be_bytes());
        for ((t, p), c) in offs {
            put_str(&mut o, t);
            o.extend_from_slice(&p.to_be_bytes());
            o.extend_from_slice(&c.offset.to_be_bytes());
            o.extend_from_slice(&c.leader_epoch.to_be_bytes());
            match &c.metadata {
                None => o.push(0),
                Some(s) => {
                    o.push(1);
                    put_str(&mut o, s);
                }
            }
        }
    }
    let mut frame = Vec::with_capacity(8 + o.len());
    frame.extend_from_slice(&(o.len() as u32).to_be_bytes());
    frame.extend_from_slice(&crc32c::crc32c(&o).to_be_bytes());
    frame.extend_from_slice(&o);
    frame
}

struct Reader<'a> {
    b: &'a [u8],
    p: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.b.get(self.p..self.p.checked_add(n)?)?;
        self.p += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    fn str(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

fn decode(payload: &[u8]) -> Option<(String, TxnMeta)> {
    let mut r = Reader { b: payload, p: 0 };
    let tid = r.str()?;
    let mut m = TxnMeta::new(r.i64()?, 0);
    m.epoch = r.i16()?;
    m.last_epoch = r.i16()?;
    m.timeout_ms = r.i32()?;
    m.state = TxnState::from_code(r.u8()?)?;
    m.started_ms = r.i64()?;
    for _ in 0..r.u32()? {
        let t = r.str()?;
        m.partitions.insert((t, r.i32()?));
    }
    for _ in 0..r.u32()? {
        let g = r.str()?;
        let mut offs = BTreeMap::new();
        for _ in 0..r.u32()? {
            let t = r.str()?;
            let p = r.i32()?;
            let offset = r.i64()?;
            let leader_epoch = r.i32()?;
            let metadata = if r.u8()? == 1 { Some(r.str()?) } else { None };
            offs.insert((t, p), Committed { offset, leader_epoch, metadata });
        }
        m.offsets.insert(g, offs);
    }
    (r.p == payload.len()).then_some((tid, m))
}

/// The frame at `p`: (tid, state, frame length), or None when there is no whole valid one.
fn frame_at(data: &[u8], p: usize) -> Option<(String, TxnMeta, usize)> {
    let len = u32::from_be_bytes(data.get(p..p + 4)?.try_into().ok()?) as usize;
    let crc = u32::from_be_bytes(data.get(p + 4..p + 8)?.try_into().ok()?);
    let payload = data.get(p + 8..(p + 8).checked_add(len)?)?;
    if crc32c::crc32c(payload) != crc {
        return None;
    }
    let (tid, m) = decode(payload)?;
    Some((tid, m, 8 + len))
}

/// The transaction log: the shared fail-stop append log (`applog.rs`); only the holder of
/// `Txns::op` touches it.
pub struct TxnLog(AppendLog);

impl TxnLog {
    /// Opens (creating) the log and replays it: the last state of every transactional id (each
    /// frame holds an id's whole state). A torn tail is dropped; a bad frame with valid ones
    /// after it is damage and refuses to open. Mostly superseded, it is rewritten with one
    /// frame per id.
    fn open(path: &Path) -> Result<(TxnLog, HashMap<String, TxnMeta>), String> {
        let opened = AppendLog::open(path, "transaction state", |d, p| frame_at(d, p).map(|f| f.2))?;
        let mut log = opened.log;
        let mut metas = HashMap::new();
        for f in &opened.frames {
            if let Some((tid, m, _)) = frame_at(f, 0) {
                metas.insert(tid, m);
            }
        }
        if log.frames > 2 * metas.len() + 64 {
            let all: Vec<Vec<u8>> = metas.iter().map(|(t, m)| encode(t, m)).collect();
            log.rewrite_now(&all).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok((TxnLog(log), metas))
    }

    /// Appends one frame; Ok only once it is durable. Any refusal is
    /// COORDINATOR_NOT_AVAILABLE (retriable: a failed append's bytes are cut off first).
    async fn append(&mut self, frame: Vec<u8>) -> Result<(), i16> {
        self.0.append(frame).await.map_err(|_| errors::COORDINATOR_NOT_AVAILABLE)
    }
}

pub struct Txns {
    metas: Mutex<HashMap<String, TxnMeta>>,
    /// Serialises every change (and owns the log).
    op: Arc<tokio::sync::Mutex<TxnLog>>,
    /// Transactional ids whose completion failed, and when to try again (ms).
    retry_at: Mutex<HashMap<String, i64>>,
}

impl Txns {
    /// Replays (and if mostly superseded, rewrites) `DIR/transactions/txn.log`.
    pub fn open(dir: &Path) -> Result<Txns, String> {
        let dir = dir.join("transactions");
        segment::create_dir_synced(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let (log, metas) = TxnLog::open(&dir.join("txn.log"))?;
        if !metas.is_empty() {
            tracing::info!(ids = metas.len(), "transaction state loaded");
        }
        Ok(Txns {
            metas: Mutex::new(metas),
            op: Arc::new(tokio::sync::Mutex::new(log)),
            retry_at: Mutex::new(HashMap::new()),
        })
    }

    /// Finishes what a crash interrupted (Prepare* completed, Ongoing aborted), before any
    /// request is served a transaction change, then looks for expired transactions.
    pub fn start(broker: &Arc<Broker>) {
        let guard = broker.txns.op.clone().try_lock_owned().expect("nobody holds the transaction lock yet");
        let b = broker.clone();
        tokio::spawn(async move {
            let mut log = guard;
            let pending: Vec<(String, TxnMeta)> = b
                .txns
                .snapshot()
                .into_iter()
                .filter(|(_, m)| m.state == TxnState::Ongoing || m.state.preparing())
                .collect();
            for (tid, m) in pending {
                let res = if m.state.preparing() {
                    b.txns.complete(&b, &mut log, &tid, m).await
                } else {
                    b.txns.end(&b, &mut log, &tid, m, false, true).await
                };
                match res {
                    Ok(m) => {
                        tracing::info!(transactional_id = %tid, state = ?m.state, "transaction recovered")
                    }
                    Err(code) => {
                        tracing::error!(transactional_id = %tid, code, "transaction recovery failed; retrying")
                    }
                }
            }
            drop(log);
            let mut tick = tokio::time::interval(SWEEP);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                b.txns.sweep(&b).await;
            }
        });
    }

    /// Every transactional id and its state (ListTransactions, DescribeTransactions).
    pub fn snapshot(&self) -> Vec<(String, TxnMeta)> {
        self.metas
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    pub fn get(&self, tid: &str) -> Option<TxnMeta> {
        self.metas.lock().unwrap_or_else(|e| e.into_inner()).get(tid).cloned()
    }

    /// Aborts expired transactions (bumping the epoch, as Kafka does, so the producer is
    /// fenced) and retries completions that failed earlier.
    async fn sweep(&self, b: &Broker) {
        let now = now_ms();
        let retry_at = self.retry_at.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let due: Vec<String> = self
            .snapshot()
            .into_iter()
            .filter(|(t, m)| {
                (m.state.preparing() && retry_at.get(t).is_none_or(|&at| now >= at))
                    || (m.state == TxnState::Ongoing
                        && now >= m.started_ms.saturating_add(m.timeout_ms as i64))
            })
            .map(|(t, _)| t)
            .collect();
        for tid in due {
            let mut log = self.op.lock().await;
            let Some(m) = self.get(&tid) else { continue };
            let res = if m.state.preparing() {
                self.complete(b, &mut log, &tid, m).await
            } else if m.state == TxnState::Ongoing
                && now_ms() >= m.started_ms.saturating_add(m.timeout_ms as i64)
            {
                tracing::info!(transactional_id = %tid, timeout_ms = m.timeout_ms, "transaction timed out; aborting");
                self.end(b, &mut log, &tid, m, false, true).await
            } else {
                continue;
            };
            let mut retry = self.retry_at.lock().unwrap_or_else(|e| e.into_inner());
            match res {
                Ok(_) => {
                    retry.remove(&tid);
                }
                Err(code) => {
                    tracing::warn!(transactional_id = %tid, code, "finishing a transaction failed; will retry");
                    retry.insert(tid, now_ms() + RETRY_MS);
                }
            }
        }
    }

    /// Makes `m` the durable state of `tid`.
    async fn persist(&self, log: &mut TxnLog, tid: &str, m: TxnMeta) -> Result<(), i16> {
        log.append(encode(tid, &m)).await?;
        let n = {
            let mut metas = self.metas.lock().unwrap_or_else(|e| e.into_inner());
            metas.insert(tid.to_string(), m);
            metas.len()
        };
        if log.0.frames > 2 * n + 10_000 {
            let all: Vec<Vec<u8>> = self.snapshot().iter().map(|(t, m)| encode(t, m)).collect();
            if let Err(e) = log.0.rewrite(all) {
                tracing::warn!("rewriting the transaction log: {e}");
            }
        }
        Ok(())
    }

    /// Decides the transaction (Prepare*, durable), then completes it. `bump`: the
    /// coordinator fences the producer (timeout, or a new producer with the same id).
    async fn end(
        &self,
        b: &Broker,
        log: &mut TxnLog,
        tid: &str,
        mut m: TxnMeta,
        commit: bool,
        bump: bool,
    ) -> Result<TxnMeta, i16> {
        if bump && m.epoch < i16::MAX - 1 {
            m.last_epoch = m.epoch;
            m.epoch += 1;
        }
        m.state = if commit { TxnState::PrepareCommit } else { TxnState::PrepareAbort };
        self.persist(log, tid, m.clone()).await?;
        self.complete(b, log, tid, m).await
    }

    /// Writes the markers of a decided transaction (each durable in its partition), applies
    /// a commit's offsets, then records the transaction complete.
    async fn complete(&self, b: &Broker, log: &mut TxnLog, tid: &str, m: TxnMeta) -> Result<TxnMeta, i16> {
        let commit = m.state == TxnState::PrepareCommit;
        let mut waits = Vec::new();
        for (t, p) in &m.partitions {
            // A deleted topic or partition has nothing left to mark.
            let Some(part) = b.topic(t).and_then(|tp| tp.partitions.get(*p as usize).cloned()) else {
                continue;
            };
            let (tx, rx) = oneshot::channel();
            let msg = Msg::Marker { producer_id: m.producer_id, producer_epoch: m.epoch, commit, reply: tx };
            if part.tx.send(msg).is_err() {
                return Err(errors::COORDINATOR_NOT_AVAILABLE);
            }
            waits.push((t, p, rx));
        }
        let mut failed = false;
        for (t, p, rx) in waits {
            match rx.await {
                Ok(r) if r.error == errors::NONE => {}
                other => {
                    tracing::error!(transactional_id = %tid, topic = %t, partition = p,
                        "writing a transaction marker failed: {:?}", other.map(|r| r.error));
                    failed = true;
                }
            }
        }
        if failed {
            return Err(errors::COORDINATOR_NOT_AVAILABLE);
        }
        if commit {
            for (g, offs) in &m.offsets {
                if offs.is_empty() {
                    continue;
                }
                let entries: Vec<OffsetEntry> =
                    offs.iter().map(|((t, p), c)| (t.clone(), *p, c.clone())).collect();
                let code = b.groups.commit_txn(g.clone(), entries).await;
                if code != errors::NONE {
                    tracing::error!(transactional_id = %tid, group = %g, code, "applying transaction offsets failed");
                    return Err(errors::COORDINATOR_NOT_AVAILABLE);
                }
            }
        }
        let mut done = m;
        done.state = if commit { TxnState::CompleteCommit } else { TxnState::CompleteAbort };
        done.partitions.clear();
        done.offsets.clear();
        self.persist(log, tid, done.clone()).await?;
        Ok(done)
    }

    /// Finishes a transaction left in Prepare* (an earlier failure) before another change.
    async fn settle(&self, b: &Broker, log: &mut TxnLog, tid: &str, m: TxnMeta) -> Result<TxnMeta, i16> {
        if m.state.preparing() {
            return self.complete(b, log, tid, m).await.map_err(|_| errors::CONCURRENT_TRANSACTIONS);
        }
        Ok(m)
    }

    /// InitProducerId with a transactional id: a new id at epoch 0, or the next epoch of the
    /// existing one (aborting its unfinished transaction first, which fences the previous
    /// producer). `expected`: the producer id and epoch a client asks to bump (KIP-360).
    /// Err: PRODUCER_FENCED when `expected` is not current.
    pub async fn init_producer_id(
        &self,
        b: &Broker,
        tid: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), i16> {
        if timeout_ms <= 0 || timeout_ms > MAX_TIMEOUT_MS {
            return Err(errors::INVALID_TRANSACTION_TIMEOUT);
        }
        let mut log = self.op.lock().await;
        let Some(m) = self.get(tid) else {
            if expected.is_some() {
                return Err(errors::INVALID_PRODUCER_ID_MAPPING);
            }
            let pid = b.next_producer_id().await?;
            let m = TxnMeta::new(pid, timeout_ms);
            self.persist(&mut log, tid, m).await?;
            tracing::info!(transactional_id = %tid, producer_id = pid, "new transactional id");
            return Ok((pid, 0));
        };
        if let Some((pid, epoch)) = expected {
            let current =
                pid == m.producer_id && (epoch == m.epoch || (m.last_epoch >= 0 && epoch == m.last_epoch));
            if !current {
                return Err(errors::PRODUCER_FENCED);
            }
        }
        let mut m = self.settle(b, &mut log, tid, m).await?;
        if m.state == TxnState::Ongoing {
            tracing::info!(transactional_id = %tid, epoch = m.epoch, "fencing the previous producer; aborting its transaction");
            m = self.end(b, &mut log, tid, m, false, true).await?;
        }
        if m.epoch >= i16::MAX - 1 {
            m.producer_id = b.next_producer_id().await?;
            m.epoch = 0;
        } else {
            m.epoch += 1;
        }
        m.last_epoch = -1;
        m.timeout_ms = timeout_ms;
        m.state = TxnState::Empty;
        m.partitions.clear();
        m.offsets.clear();
        let (pid, epoch) = (m.producer_id, m.epoch);
        self.persist(&mut log, tid, m).await?;
        Ok((pid, epoch))
    }

    /// AddPartitionsToTxn (the caller has checked the partitions exist).
    pub async fn add_partitions(
        &self,
        b: &Broker,
        tid: &str,
        pid: i64,
        epoch: i16,
        parts: Vec<(String, i32)>,
    ) -> Result<(), i16> {
        let mut log = self.op.lock().await;
        let m = self.get(tid).ok_or(errors::INVALID_PRODUCER_ID_MAPPING)?;
        m.check(pid, epoch)?;
        let mut m = self.settle(b, &mut log, tid, m).await?;
        if m.state == TxnState::Ongoing && parts.iter().all(|p| m.partitions.contains(p)) {
            return Ok(());
        }
        m.begin();
        m.partitions.extend(parts);
        self.persist(&mut log, tid, m).await
    }

    /// AddOffsetsToTxn: the group's offsets will commit with the transaction.
    pub async fn add_offsets(
        &self,
        b: &Broker,
        tid: &str,
        pid: i64,
        epoch: i16,
        group: &str,
    ) -> Result<(), i16> {
        let mut log = self.op.lock().await;
        let m = self.get(tid).ok_or(errors::INVALID_PRODUCER_ID_MAPPING)?;
        m.check(pid, epoch)?;
        let mut m = self.settle(b, &mut log, tid, m).await?;
        if m.state == TxnState::Ongoing && m.offsets.contains_key(group) {
            return Ok(());
        }
        m.begin();
        m.offsets.entry(group.to_string()).or_default();
        self.persist(&mut log, tid, m).await
    }

    /// TxnOffsetCommit: offsets held with the transaction (durable in its log) until EndTxn
    /// applies (commit) or drops (abort) them.
    pub async fn txn_offset_commit(
        &self,
        tid: &str,
        group: &str,
        pid: i64,
        epoch: i16,
        offsets: Vec<OffsetEntry>,
    ) -> Result<(), i16> {
        let mut log = self.op.lock().await;
        let mut m = self.get(tid).ok_or(errors::INVALID_PRODUCER_ID_MAPPING)?;
        m.check(pid, epoch).map_err(|e| {
            if e == errors::PRODUCER_FENCED {
                errors::INVALID_PRODUCER_EPOCH
            } else {
                e
            }
        })?;
        if m.state != TxnState::Ongoing || !m.offsets.contains_key(group) {
            return Err(errors::INVALID_TXN_STATE);
        }
        let g = m.offsets.entry(group.to_string()).or_default();
        for (t, p, c) in offsets {
            g.insert((t, p), c);
        }
        self.persist(&mut log, tid, m).await
    }

    /// EndTxn: commit or abort the ongoing transaction; a retry of a finished one succeeds.
    pub async fn end_txn(
        &self,
        b: &Broker,
        tid: &str,
        pid: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), i16> {
        let mut log = self.op.lock().await;
        let m = self.get(tid).ok_or(errors::INVALID_PRODUCER_ID_MAPPING)?;
        m.check(pid, epoch)?;
        match (m.state, commit) {
            (TxnState::Ongoing, _) => self.end(b, &mut log, tid, m, commit, false).await.map(|_| ()),
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                self.complete(b, &mut log, tid, m).await.map(|_| ())
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(()),
            (TxnState::PrepareCommit | TxnState::PrepareAbort, _) => Err(errors::CONCURRENT_TRANSACTIONS),
            _ => Err(errors::INVALID_TXN_STATE),
        }
    }

    /// Produce-time verification of a transactional batch (as Kafka's KIP-890 does): the
    /// producer is the id's current one and the partition is in its ongoing transaction.
    pub fn verify(&self, tid: &str, pid: i64, epoch: i16, topic: &str, partition: i32) -> Result<(), i16> {
        let metas = self.metas.lock().unwrap_or_else(|e| e.into_inner());
        let m = metas.get(tid).ok_or(errors::INVALID_PRODUCER_ID_MAPPING)?;
        if m.producer_id != pid {
            return Err(errors::INVALID_PRODUCER_ID_MAPPING);
        }
        if m.epoch != epoch {
            return Err(errors::INVALID_PRODUCER_EPOCH);
        }
        if m.state != TxnState::Ongoing || !m.partitions.contains(&(topic.to_string(), partition)) {
            return Err(errors::INVALID_TXN_STATE);
        }
        Ok(())
    }

    /// Partitions of `group` with offsets held by an undecided transaction (OffsetFetch with
    /// require_stable answers them UNSTABLE_OFFSET_COMMIT).
    pub fn pending_offsets(&self, group: &str) -> BTreeSet<(String, i32)> {
        let metas = self.metas.lock().unwrap_or_else(|e| e.into_inner());
        metas
            .values()
            .filter(|m| matches!(m.state, TxnState::Ongoing | TxnState::PrepareCommit))
            .filter_map(|m| m.offsets.get(group))
            .flat_map(|o| o.keys().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BrokerConfig;

    fn config(dir: std::path::PathBuf) -> BrokerConfig {
        BrokerConfig::for_tests(dir)
    }

    /// Appends a one-record transactional batch of (pid, epoch) to `t`/`p` and waits for its ack.
    async fn append_txn(b: &Broker, p: usize, pid: i64, epoch: i16) {
        use kafka_protocol::records::{
            Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
        };
        let rec = Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: 0,
            timestamp: now_ms(),
            key: Some(bytes::Bytes::from_static(b"k")),
            value: Some(bytes::Bytes::from_static(b"v")),
            headers: Default::default(),
        };
        let mut buf = bytes::BytesMut::new();
        let opts = RecordEncodeOptions { version: 2, compression: Compression::None };
        RecordBatchEncoder::encode(&mut buf, &[rec], &opts).unwrap();
        let batch = buf.freeze();
        let header = crate::batch::validate_produce(&batch).unwrap();
        assert!(b.memory.try_reserve(batch.len()));
        let (tx, rx) = oneshot::channel();
        let part = b.topic("t").unwrap().partitions[p].clone();
        let reserved = batch.len();
        part.tx.send(Msg::Append { batch, header, reply: Some(tx), reserved }).ok().unwrap();
        assert_eq!(rx.await.unwrap().error, errors::NONE);
    }

    /// A crash after the decision (PrepareCommit durable) but before any marker: the restart
    /// writes the commit markers and applies the offsets; a transaction that was still going
    /// on is aborted (its producer fenced). Until then the partitions' LSO holds back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn restart_completes_decided_and_aborts_ongoing_transactions() {
        let root = std::env::temp_dir().join(format!("kaka-txn-recovery-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let cfg = config(root.join("data"));
        let (x, y) = {
            let b = Broker::open(cfg.clone()).unwrap();
            b.create_topic("t", 2, Default::default(), false).unwrap();
            let (x, ex) = b.txns.init_producer_id(&b, "x", 60_000, None).await.unwrap();
            let parts = vec![("t".to_string(), 0), ("t".to_string(), 1)];
            b.txns.add_partitions(&b, "x", x, ex, parts).await.unwrap();
            b.txns.add_offsets(&b, "x", x, ex, "g").await.unwrap();
            let c = Committed { offset: 42, leader_epoch: 0, metadata: None };
            b.txns.txn_offset_commit("x", "g", x, ex, vec![("t".into(), 0, c)]).await.unwrap();
            append_txn(&b, 0, x, ex).await;
            append_txn(&b, 1, x, ex).await;
            let (y, ey) = b.txns.init_producer_id(&b, "y", 60_000, None).await.unwrap();
            b.txns.add_partitions(&b, "y", y, ey, vec![("t".to_string(), 0)]).await.unwrap();
            append_txn(&b, 0, y, ey).await;
            // Decided, then the process dies before writing a marker.
            let mut log = b.txns.op.lock().await;
            let mut m = b.txns.get("x").unwrap();
            m.state = TxnState::PrepareCommit;
            b.txns.persist(&mut log, "x", m).await.unwrap();
            drop(log);
            b.shutdown().await;
            (x, y)
        };
        let b = Broker::open(cfg).unwrap();
        let t = b.topic("t").unwrap();
        assert_eq!((t.partitions[0].shared.lso(), t.partitions[0].shared.hw()), (0, 2));
        assert_eq!((t.partitions[1].shared.lso(), t.partitions[1].shared.hw()), (0, 1));
        Txns::start(&b);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let done = b.txns.get("x").unwrap().state == TxnState::CompleteCommit
                && b.txns.get("y").unwrap().state == TxnState::CompleteAbort
                && t.partitions.iter().all(|p| p.shared.lso() == p.shared.hw());
            if done {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "recovery did not finish");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Partition 0: x's record, y's record, x's commit marker, y's abort marker.
        assert_eq!(t.partitions[0].shared.hw(), 4);
        assert_eq!(t.partitions[0].shared.aborted_between(0, 4), vec![(y, 1)]);
        assert_eq!(t.partitions[1].shared.hw(), 2);
        assert!(t.partitions[1].shared.aborted_between(0, 2).is_empty());
        let got = b.groups.fetch("g".into(), Some(vec![("t".into(), vec![0])])).await;
        assert_eq!(got[0].2.offset, 42, "the committed transaction's offsets were applied");
        assert_eq!(b.txns.get("y").unwrap().epoch, 1, "the ongoing transaction's producer is fenced");
        assert_eq!(b.txns.get("x").unwrap().producer_id, x);
        b.shutdown().await;
        let _ = std::fs::remove_dir_all(&root);
    }

    fn meta() -> TxnMeta {
        let mut m = TxnMeta::new(7, 60_000);
        m.epoch = 3;
        m.last_epoch = 2;
        m.state = TxnState::PrepareCommit;
        m.started_ms = 1234;
        m.partitions.insert(("t".into(), 0));
        m.partitions.insert(("u".into(), 5));
        let mut o = BTreeMap::new();
        o.insert(("t".into(), 1), Committed { offset: 42, leader_epoch: 0, metadata: Some("m".into()) });
        o.insert(("t".into(), 2), Committed { offset: 9, leader_epoch: -1, metadata: None });
        m.offsets.insert("g".into(), o);
        m.offsets.insert("empty".into(), BTreeMap::new());
        m
    }

    /// Opens a log holding `data`: (state per id, whole frames, valid length).
    fn replay(data: &[u8], name: &str) -> Result<(HashMap<String, TxnMeta>, usize, u64), String> {
        let dir = std::env::temp_dir().join(format!("kaka-txn-replay-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("txn.log");
        std::fs::write(&path, data).unwrap();
        let res = TxnLog::open(&path).map(|(log, metas)| (metas, log.0.frames, log.0.len()));
        let _ = std::fs::remove_dir_all(&dir);
        res
    }

    #[test]
    fn frames_roundtrip_and_replay_keeps_the_last_state() {
        let m = meta();
        let mut data = encode("a", &TxnMeta::new(1, 10));
        data.extend(encode("b", &m));
        let mut a2 = TxnMeta::new(1, 10);
        a2.epoch = 4;
        data.extend(encode("a", &a2));
        let (metas, frames, good) = replay(&data, "roundtrip").unwrap();
        assert_eq!((frames, good), (3, data.len() as u64));
        assert_eq!(metas["b"], m);
        assert_eq!(metas["a"], a2);
    }

    #[test]
    fn replay_drops_a_torn_tail_and_refuses_damage_before_good_frames() {
        let first = encode("a", &meta());
        let second = encode("b", &meta());
        let mut data = first.clone();
        data.extend(&second[..second.len() - 3]); // torn
        let (metas, frames, good) = replay(&data, "torn").unwrap();
        assert_eq!((metas.len(), frames, good), (1, 1, first.len() as u64));
        let mut damaged = first.clone();
        damaged[10] ^= 0xff;
        damaged.extend(&second);
        let err = replay(&damaged, "damaged").unwrap_err();
        assert!(err.contains("damaged: ") && err.contains("at byte 0"), "{err}");
    }
}
