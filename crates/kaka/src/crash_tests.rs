//! Power-loss property test: the broker's real storage code (partition logs with their
//! rolls, retention and compaction, the offsets log, the transaction log and its recovery)
//! runs on the simulated file system (`storage::sim`); the power is cut at a random mutating
//! operation, the broker is reopened on what a disk could have kept, and:
//! - the broker opens, and transaction recovery finishes (every partition's LSO reaches its
//!   high watermark);
//! - every acknowledged produce is present at its acknowledged offset, exactly once and in
//!   order (unless retention deleted its segment: below the log start), and on the compacted
//!   topic the newest acknowledged value of each key (or a newer record of that key) is;
//! - nothing else appears: every record read back was produced, once, and a batch is there
//!   whole or not at all (no torn batch);
//! - every acknowledged offset commit is what OffsetFetch answers (or the one commit in flight
//!   at the crash);
//! - an acknowledged EndTxn's decision holds (its records committed or aborted, a commit's
//!   offsets applied); an unacknowledged one is all-or-nothing.
//!
//! Cases: 48 by default (a few seconds); `KAKA_CRASH_CASES=N` for a longer run. Each case is
//! one crash point; the run prints how many there were and how many fell mid-operation
//! (shrinking a failure adds cases, all counted).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use tokio::sync::oneshot;

use crate::broker::Broker;
use crate::config::BrokerConfig;
use crate::errors;
use crate::groups::Committed;
use crate::partition::{now_ms, Msg};
use crate::storage::sim::{self, SimFs};
use crate::txn::{TxnState, Txns};

#[derive(Debug, Clone)]
enum Op {
    /// One batch of `records` records, all with key `k<key>`, to topic `d` (delete policy,
    /// size retention) or `c` (compacted). `pipelined`: the answer is collected later, so
    /// several produces share a group commit and write while a sync or compaction runs.
    Produce { compacted: bool, key: u8, records: u8, pipelined: bool },
    /// OffsetCommit of group `g` for `d`/`part`.
    Commit { part: u8, offset: u16 },
    /// A whole transaction on `d`/0: InitProducerId, AddPartitions, one batch, AddOffsets,
    /// TxnOffsetCommit of group `tg`, EndTxn.
    Txn { records: u8, commit: bool, offset: u16 },
    /// Lets the retention and compaction timer (10 ms) fire.
    Wait,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (any::<bool>(), 0..4u8, 1..4u8, any::<bool>())
            .prop_map(|(compacted, key, records, pipelined)| Op::Produce { compacted, key, records, pipelined }),
        2 => (0..2u8, 0..1000u16).prop_map(|(part, offset)| Op::Commit { part, offset }),
        2 => (1..3u8, any::<bool>(), 0..1000u16)
            .prop_map(|(records, commit, offset)| Op::Txn { records, commit, offset }),
        1 => Just(Op::Wait),
    ]
}

struct Produced {
    compacted: bool,
    key: String,
    values: Vec<String>,
    /// Base offset, when acknowledged.
    acked: Option<i64>,
}

struct TxnRun {
    values: Vec<String>,
    commit: bool,
    offset: i64,
    /// Base offset of its batch, when the produce was acknowledged.
    produce_acked: Option<i64>,
    end_acked: bool,
}

#[derive(Default)]
struct Model {
    produced: Vec<Produced>,
    /// (partition, offset, acknowledged)
    commits: Vec<(i32, i64, bool)>,
    txns: Vec<TxnRun>,
    next_value: u64,
    /// Topics whose creation was acknowledged.
    topics: Vec<&'static str>,
}

static CASE: AtomicU64 = AtomicU64::new(0);
static MID_OP: AtomicU64 = AtomicU64::new(0);
static CASES_RUN: AtomicU64 = AtomicU64::new(0);

fn config(dir: PathBuf) -> BrokerConfig {
    let mut cfg = BrokerConfig::for_tests(dir);
    cfg.segment_bytes = 1024; // rolls every few batches
    cfg.retention_check_ms = 10;
    cfg.max_memory = 8 << 20;
    cfg
}

fn batch(values: &[String], key: &str, txn: Option<(i64, i16)>) -> Bytes {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let recs: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: txn.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: txn.map_or(-1, |t| t.0),
            producer_epoch: txn.map_or(-1, |t| t.1),
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32, // offset - sequence constant: one batch (pid -1 ignores it)
            timestamp: now_ms(),
            key: Some(Bytes::from(key.to_string())),
            value: Some(Bytes::from(v.clone())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    let opts = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, &recs, &opts).expect("encode");
    buf.freeze()
}

type Reply = oneshot::Receiver<crate::partition::AppendResult>;

/// Sends one batch to the partition owner; its answer comes on the receiver.
fn send(b: &Broker, topic: &str, bytes: Bytes) -> Option<Reply> {
    let header = crate::batch::validate_produce(&bytes).expect("valid batch");
    if !b.memory.try_reserve(bytes.len()) {
        return None;
    }
    let (tx, rx) = oneshot::channel();
    let part = b.topic(topic)?.partitions[0].clone();
    let reserved = bytes.len();
    part.tx.send(Msg::Append { batch: bytes, header, reply: Some(tx), reserved }).ok()?;
    Some(rx)
}

/// The base offset when the answer acknowledges the batch.
async fn answer(rx: Option<Reply>) -> Option<i64> {
    let r = rx?.await.ok()?;
    (r.error == errors::NONE).then_some(r.base_offset)
}

/// Produces one batch and waits for its answer: the base offset when acknowledged.
async fn produce(b: &Broker, topic: &str, bytes: Bytes) -> Option<i64> {
    answer(send(b, topic, bytes)).await
}

/// Collects the answers of pipelined produces.
async fn collect(pending: &mut Vec<(usize, Option<Reply>)>, m: &mut Model) -> Result<(), TestCaseError> {
    for (i, rx) in pending.drain(..) {
        m.produced[i].acked = guard("pipelined produce", answer(rx)).await?;
    }
    Ok(())
}

/// Hang guard: every broker call of the test finishes within this, crash or not.
async fn guard<T>(what: &str, f: impl std::future::Future<Output = T>) -> Result<T, TestCaseError> {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .map_err(|_| TestCaseError::fail(format!("{what}: no answer within 20 s (hang)")))
}

async fn run_ops(b: &Arc<Broker>, fs: &SimFs, ops: &[Op], m: &mut Model) -> Result<(), TestCaseError> {
    let mut pending = Vec::new();
    for op in ops {
        if fs.crashed() {
            break;
        }
        if !matches!(op, Op::Produce { pipelined: true, .. } | Op::Wait) {
            collect(&mut pending, m).await?;
        }
        match *op {
            Op::Produce { compacted, key, records, pipelined: true } => {
                let values: Vec<String> = (0..records)
                    .map(|_| {
                        m.next_value += 1;
                        format!("p{}", m.next_value)
                    })
                    .collect();
                let key = format!("k{key}");
                let rx = send(b, if compacted { "c" } else { "d" }, batch(&values, &key, None));
                pending.push((m.produced.len(), rx));
                m.produced.push(Produced { compacted, key, values, acked: None });
            }
            Op::Produce { compacted, key, records, pipelined: false } => {
                let values: Vec<String> = (0..records)
                    .map(|_| {
                        m.next_value += 1;
                        format!("p{}", m.next_value)
                    })
                    .collect();
                let key = format!("k{key}");
                let topic = if compacted { "c" } else { "d" };
                let acked = guard("produce", produce(b, topic, batch(&values, &key, None))).await?;
                m.produced.push(Produced { compacted, key, values, acked });
            }
            Op::Commit { part, offset } => {
                let c = Committed { offset: offset as i64, leader_epoch: 0, metadata: None };
                let code = guard(
                    "commit",
                    b.groups.commit("g".into(), -1, String::new(), vec![("d".into(), part as i32, c)]),
                )
                .await?;
                m.commits.push((part as i32, offset as i64, code == errors::NONE));
            }
            Op::Txn { records, commit, offset } => {
                let values: Vec<String> = (0..records)
                    .map(|_| {
                        m.next_value += 1;
                        format!("t{}", m.next_value)
                    })
                    .collect();
                let mut run =
                    TxnRun { values, commit, offset: offset as i64, produce_acked: None, end_acked: false };
                let res = guard("transaction", async {
                    let (pid, epoch) = b.txns.init_producer_id(b, "tx", 60_000, None).await.ok()?;
                    b.txns.add_partitions(b, "tx", pid, epoch, vec![("d".into(), 0)]).await.ok()?;
                    let bytes = batch(&run.values, "tk", Some((pid, epoch)));
                    // From here on the records may be on disk: the run is part of the model.
                    Some((pid, epoch, bytes))
                })
                .await?;
                let Some((pid, epoch, bytes)) = res else {
                    m.txns.push(TxnRun { values: Vec::new(), ..run });
                    continue;
                };
                run.produce_acked = guard("txn produce", produce(b, "d", bytes)).await?;
                if run.produce_acked.is_some() {
                    let c = Committed { offset: run.offset, leader_epoch: 0, metadata: None };
                    run.end_acked = guard("end txn", async {
                        b.txns.add_offsets(b, "tx", pid, epoch, "tg").await.ok()?;
                        b.txns
                            .txn_offset_commit("tx", "tg", pid, epoch, vec![("d".into(), 0, c)])
                            .await
                            .ok()?;
                        b.txns.end_txn(b, "tx", pid, epoch, commit).await.ok()
                    })
                    .await?
                    .is_some();
                }
                m.txns.push(run);
            }
            Op::Wait => tokio::time::sleep(Duration::from_millis(15)).await,
        }
    }
    collect(&mut pending, m).await
}

/// One record read back from a partition.
#[derive(Debug)]
struct Read {
    offset: i64,
    key: Option<Bytes>,
    value: Option<Bytes>,
    producer_id: i64,
    control: bool,
}

fn read_partition(b: &Broker, topic: &str) -> Result<(Vec<Read>, i64), TestCaseError> {
    use kafka_protocol::records::RecordBatchDecoder;
    let t = b.topic(topic).ok_or_else(|| TestCaseError::fail(format!("topic {topic} lost")))?;
    let shared = &t.partitions[0].shared;
    let segs = shared.segments.read().unwrap_or_else(|e| e.into_inner()).clone();
    let mut out = Vec::new();
    for seg in segs {
        let mut batches = Vec::new();
        seg.scan_headers(0, |pos, h| {
            batches.push(seg.read_batch(pos, h));
            true
        })
        .map_err(|e| TestCaseError::fail(format!("{topic}: scan: {e}")))?;
        for bytes in batches {
            let mut bytes = bytes.map_err(|e| TestCaseError::fail(format!("{topic}: read: {e}")))?;
            let set = RecordBatchDecoder::decode(&mut bytes)
                .map_err(|e| TestCaseError::fail(format!("{topic}: undecodable batch: {e}")))?;
            for r in set.records {
                out.push(Read {
                    offset: r.offset,
                    key: r.key,
                    value: r.value,
                    producer_id: r.producer_id,
                    control: r.control,
                });
            }
        }
    }
    Ok((out, shared.log_start()))
}

fn check(b: &Broker, m: &Model, offsets: &HashMap<(String, i32), i64>) -> Result<(), TestCaseError> {
    let fail = |s: String| TestCaseError::fail(s);
    for (topic, compacted) in [("d", false), ("c", true)] {
        if b.topic(topic).is_none() {
            prop_assert!(!m.topics.contains(&topic), "topic {topic} was created, then lost");
            continue;
        }
        let (reads, log_start) = read_partition(b, topic)?;
        // Offsets strictly increase; every value was produced, and appears once.
        let mut seen = HashMap::new();
        let mut last = -1;
        for r in &reads {
            prop_assert!(r.offset > last, "{topic}: offsets out of order at {}", r.offset);
            last = r.offset;
            if r.control {
                continue;
            }
            let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
            prop_assert!(seen.insert(v.clone(), r).is_none(), "{topic}: {v} appears twice");
        }
        let all: HashSet<&str> = m
            .produced
            .iter()
            .filter(|p| p.compacted == compacted)
            .flat_map(|p| p.values.iter().map(|s| s.as_str()))
            .chain(m.txns.iter().filter(|_| !compacted).flat_map(|t| t.values.iter().map(|s| s.as_str())))
            .collect();
        for v in seen.keys() {
            prop_assert!(all.contains(v.as_str()), "{topic}: {v} was never produced");
        }
        // Plain produces: acknowledged ones at their offsets; any batch whole or absent.
        let mut newest_acked: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, p) in m.produced.iter().enumerate().filter(|(_, p)| p.compacted == compacted) {
            let present: Vec<_> = p.values.iter().filter_map(|v| seen.get(v)).collect();
            if !compacted {
                prop_assert!(
                    present.is_empty() || present.len() == p.values.len(),
                    "{topic}: torn batch {:?}: {} of {} records",
                    p.values,
                    present.len(),
                    p.values.len()
                );
            }
            if let Some(base) = p.acked {
                newest_acked.insert(p.key.as_str(), i);
                if !compacted && base >= log_start {
                    prop_assert_eq!(
                        present.len(),
                        p.values.len(),
                        "{}: acknowledged {:?} lost",
                        topic,
                        p.values
                    );
                    for (j, r) in present.iter().enumerate() {
                        prop_assert_eq!(r.offset, base + j as i64, "{}: {} moved", topic, p.values[j]);
                    }
                }
            }
        }
        if compacted {
            // The newest acknowledged value of each key, or a newer record of that key, is there.
            for (key, &i) in &newest_acked {
                let p = &m.produced[i];
                let newest = p.values.last().expect("non-empty batch");
                let newer_present = m.produced[i..]
                    .iter()
                    .filter(|q| q.compacted && q.key == *key)
                    .flat_map(|q| q.values.iter())
                    .any(|v| seen.contains_key(v));
                prop_assert!(newer_present, "c: acknowledged {newest} (key {key}) lost with nothing newer");
                if let Some(r) = seen.get(newest) {
                    let want = p.acked.expect("acked") + p.values.len() as i64 - 1;
                    prop_assert_eq!(r.offset, want, "c: {} moved", newest);
                    prop_assert_eq!(r.key.as_deref(), Some(key.as_bytes()));
                }
            }
        } else {
            check_txns(m, &reads, &seen, log_start)?;
        }
    }
    // Offset commits of group g: the last acknowledged one, or the one in flight after it.
    for part in 0..2 {
        let mine: Vec<&(i32, i64, bool)> = m.commits.iter().filter(|c| c.0 == part).collect();
        let last_acked = mine.iter().rposition(|c| c.2);
        let mut allowed: Vec<i64> = vec![last_acked.map_or(-1, |i| mine[i].1)];
        allowed.extend(mine[last_acked.map_or(0, |i| i + 1)..].iter().map(|c| c.1));
        let got = offsets.get(&("g".to_string(), part)).copied().unwrap_or(-1);
        prop_assert!(
            allowed.contains(&got),
            "g d/{part}: committed offset {got}, expected one of {allowed:?}"
        );
    }
    // Transactional offsets of group tg: the last acknowledged commit's, or a later commit's
    // whose EndTxn was in flight (its decision may have been durable).
    let last_acked = m.txns.iter().rposition(|t| t.end_acked && t.commit);
    let mut allowed = vec![last_acked.map_or(-1, |i| m.txns[i].offset)];
    allowed.extend(m.txns[last_acked.map_or(0, |i| i + 1)..].iter().filter(|t| t.commit).map(|t| t.offset));
    let got = offsets.get(&("tg".to_string(), 0)).copied().unwrap_or(-1);
    if !allowed.contains(&got) {
        return Err(fail(format!("tg d/0: offset {got}, expected one of {allowed:?}")));
    }
    Ok(())
}

/// Transactions on `d`/0: each record's fate is the marker of its producer that follows it.
fn check_txns(
    m: &Model,
    reads: &[Read],
    seen: &HashMap<String, &Read>,
    log_start: i64,
) -> Result<(), TestCaseError> {
    let mut fate: HashMap<i64, bool> = HashMap::new(); // offset -> committed
    let mut open: HashMap<i64, Vec<i64>> = HashMap::new();
    for r in reads {
        if r.producer_id < 0 {
            continue;
        }
        if r.control {
            let kind = r.key.as_deref().and_then(|k| k.get(2..4)).map(|t| i16::from_be_bytes([t[0], t[1]]));
            for o in open.remove(&r.producer_id).unwrap_or_default() {
                fate.insert(o, kind == Some(1));
            }
        } else {
            open.entry(r.producer_id).or_default().push(r.offset);
        }
    }
    prop_assert!(open.values().all(|v| v.is_empty()), "transactional records without a marker: {open:?}");
    for t in &m.txns {
        let present: Vec<&&Read> = t.values.iter().filter_map(|v| seen.get(v)).collect();
        prop_assert!(
            present.is_empty() || present.len() == t.values.len(),
            "d: torn transactional batch {:?}",
            t.values
        );
        if let Some(base) = t.produce_acked {
            // Only retention may remove an acknowledged batch (whole segments below the log start).
            prop_assert!(
                !present.is_empty() || base < log_start,
                "d: acknowledged transactional records {:?} (offset {base}) lost",
                t.values
            );
        }
        let fates: HashSet<bool> = present.iter().map(|r| fate[&r.offset]).collect();
        prop_assert!(fates.len() <= 1, "d: transaction {:?} half committed", t.values);
        if t.end_acked {
            if let Some(&f) = fates.iter().next() {
                prop_assert_eq!(
                    f,
                    t.commit,
                    "d: acknowledged EndTxn(commit={}) of {:?} undone",
                    t.commit,
                    t.values
                );
            }
        }
    }
    Ok(())
}

/// `early`: the power cut is armed before the topics are created, so it may fall in their
/// creation (or in opening the broker's logs) rather than in the operations.
fn case(ops: &[Op], crash_after: u64, seed: u64, early: bool) -> Result<(), TestCaseError> {
    let root = PathBuf::from(format!(
        "/sim/kaka-crash-{}-{}",
        std::process::id(),
        CASE.fetch_add(1, Ordering::Relaxed)
    ));
    let fs = SimFs::new(&root, seed);
    sim::mount(fs.clone());
    let res = case_on(&root, &fs, ops, crash_after, seed, early);
    sim::unmount(&root);
    res
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

fn case_on(
    root: &std::path::Path,
    fs: &Arc<SimFs>,
    ops: &[Op],
    crash_after: u64,
    seed: u64,
    early: bool,
) -> Result<(), TestCaseError> {
    let cfg = config(root.to_path_buf());
    let mut m = Model::default();
    // First life: set up (durably), arm the power cut, run the operations.
    let rt = runtime();
    rt.block_on(async {
        if early {
            fs.crash_after(crash_after);
        }
        let b = match Broker::open(cfg.clone()) {
            Ok(b) => b,
            Err(_) if fs.crashed() => {
                MID_OP.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            Err(e) => return Err(TestCaseError::fail(format!("first open: {e}"))),
        };
        Txns::start(&b);
        let raw =
            |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let topics = [
            ("d", raw(&[("retention.bytes", "3000")])),
            ("c", raw(&[("cleanup.policy", "compact"), ("min.cleanable.dirty.ratio", "0.01")])),
        ];
        for (name, config) in topics {
            match b.create_topic(name, 1, config, false) {
                Ok(_) => m.topics.push(name),
                Err(_) if fs.crashed() => {}
                Err(e) => return Err(TestCaseError::fail(format!("creating {name}: {}", e.1))),
            }
        }
        if !early {
            fs.crash_after(crash_after);
        }
        // Syncs take a while, as on a disk: pipelined produces and compaction passes then
        // overlap writes that are not yet durable.
        fs.slow_syncs(Duration::from_micros(300));
        run_ops(&b, fs, ops, &mut m).await?;
        if fs.crashed() {
            MID_OP.fetch_add(1, Ordering::Relaxed);
        }
        fs.crash_now();
        Ok::<(), TestCaseError>(())
    })?;
    rt.shutdown_timeout(Duration::from_secs(10));
    // The power comes back: what the disk kept.
    sim::mount(fs.crash_image(seed));
    let rt = runtime();
    let res = rt.block_on(async {
        let b = Broker::open(cfg.clone())
            .map_err(|e| TestCaseError::fail(format!("the broker does not open after the crash: {e}")))?;
        Txns::start(&b);
        // Recovery completes decided transactions and aborts the rest.
        guard("transaction recovery", async {
            loop {
                let txn_done = b.txns.get("tx").is_none_or(|t| {
                    !matches!(t.state, TxnState::Ongoing | TxnState::PrepareCommit | TxnState::PrepareAbort)
                });
                let stable = ["d", "c"].iter().all(|t| {
                    b.topic(t).is_none_or(|t| t.partitions.iter().all(|p| p.shared.lso() == p.shared.hw()))
                });
                if txn_done && stable {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await?;
        let mut offsets = HashMap::new();
        for (g, parts) in [("g", vec![0, 1]), ("tg", vec![0])] {
            for (_, p, c) in b.groups.fetch(g.into(), Some(vec![("d".into(), parts)])).await {
                offsets.insert((g.to_string(), p), c.offset);
            }
        }
        let res = check(&b, &m, &offsets);
        b.shutdown().await;
        res
    });
    rt.shutdown_timeout(Duration::from_secs(10));
    CASES_RUN.fetch_add(1, Ordering::Relaxed);
    res
}

/// The property run. A hand-driven `TestRunner` rather than the `proptest!` macro, so the
/// figure (crash points explored) can be printed once the run is over.
#[test]
fn power_loss_keeps_every_acknowledged_record_and_commit() {
    use proptest::test_runner::{Config, TestRunner};
    let cases = std::env::var("KAKA_CRASH_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(48);
    let mut runner = TestRunner::new(Config {
        cases,
        max_shrink_iters: 200,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy =
        (proptest::collection::vec(op(), 1..40), 1u64..200, any::<u64>(), proptest::bool::weighted(0.15));
    let res = runner.run(&strategy, |(ops, crash_after, seed, early)| case(&ops, crash_after, seed, early));
    eprintln!(
        "power-loss run: {} crash points explored ({} mid-operation, the rest after the last operation)",
        CASES_RUN.load(Ordering::Relaxed),
        MID_OP.load(Ordering::Relaxed)
    );
    if let Err(e) = res {
        panic!("{e}");
    }
}
