//! Raw Kafka-protocol tests against the real binary: framing, versions, bad input,
//! idempotence, long polling, storage recovery and failure.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::records::Compression;

fn tname(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn produce(c: &mut Raw, version: i16, topic: &str, partition: i32, batch: Bytes) -> (i16, i64) {
    let mut pd = PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(batch);
    let mut td = TopicProduceData::default();
    td.name = tname(topic);
    td.partition_data = vec![pd];
    let mut r = ProduceRequest::default();
    r.acks = -1;
    r.timeout_ms = 10_000;
    r.topic_data = vec![td];
    let resp: ProduceResponse = c.call(ApiKey::Produce, version, &r);
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// One partition of a Fetch request.
fn fetch_partition(partition: i32, offset: i64, max_bytes: i32) -> FetchPartition {
    let mut fp = FetchPartition::default();
    fp.partition = partition;
    fp.fetch_offset = offset;
    fp.partition_max_bytes = max_bytes;
    fp
}

/// A Fetch request (no session) for `topic` by name, or by id when `topic` is None.
fn fetch_request(
    topic: Option<&str>,
    id: uuid::Uuid,
    partitions: Vec<FetchPartition>,
    max_wait: i32,
    max_bytes: i32,
) -> FetchRequest {
    let mut ft = FetchTopic::default();
    if let Some(name) = topic {
        ft.topic = tname(name);
    }
    ft.topic_id = id;
    ft.partitions = partitions;
    let mut r = FetchRequest::default();
    r.max_wait_ms = max_wait;
    r.min_bytes = 1;
    r.max_bytes = max_bytes;
    r.session_epoch = -1;
    r.topics = vec![ft];
    r
}

/// Fetch v12 of one partition: (partition error, high watermark, records).
fn fetch_at(
    c: &mut Raw,
    topic: &str,
    partition: i32,
    offset: i64,
    max_wait: i32,
    max_bytes: i32,
) -> (i16, i64, Bytes) {
    let parts = vec![fetch_partition(partition, offset, max_bytes)];
    let resp: FetchResponse =
        c.call(ApiKey::Fetch, 12, &fetch_request(Some(topic), uuid::Uuid::nil(), parts, max_wait, max_bytes));
    assert_eq!(resp.error_code, 0);
    let p = &resp.responses[0].partitions[0];
    (p.error_code, p.high_watermark, p.records.clone().unwrap_or_default())
}

fn fetch(c: &mut Raw, topic: &str, offset: i64, max_wait: i32, max_bytes: i32) -> (i16, i64, Bytes) {
    fetch_at(c, topic, 0, offset, max_wait, max_bytes)
}

fn list_offset(c: &mut Raw, topic: &str, ts: i64) -> (i16, i64, i64) {
    let mut p = ListOffsetsPartition::default();
    p.partition_index = 0;
    p.timestamp = ts;
    let mut t = ListOffsetsTopic::default();
    t.name = tname(topic);
    t.partitions = vec![p];
    let mut r = ListOffsetsRequest::default();
    r.topics = vec![t];
    let resp: ListOffsetsResponse = c.call(ApiKey::ListOffsets, 7, &r);
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.offset, p.timestamp)
}

fn create(c: &mut Raw, topic: &str, configs: &[(&str, &str)]) -> i16 {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    let mut t = CreatableTopic::default();
    t.name = tname(topic);
    t.num_partitions = 1;
    t.replication_factor = 1;
    for (k, v) in configs {
        let mut cc = CreatableTopicConfig::default();
        cc.name = StrBytes::from_string(k.to_string());
        cc.value = Some(StrBytes::from_string(v.to_string()));
        t.configs.push(cc);
    }
    let mut r = CreateTopicsRequest::default();
    r.topics = vec![t];
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 4, &r);
    resp.topics[0].error_code
}

fn batch(values: &[&[u8]]) -> Bytes {
    make_batch(values, None, Compression::None)
}

/// Offsets of the batches in a Fetch answer.
fn batch_offsets(mut b: &[u8]) -> Vec<(i64, i64)> {
    let mut v = Vec::new();
    while b.len() >= 61 {
        let base = i64::from_be_bytes(b[0..8].try_into().unwrap());
        let len = i32::from_be_bytes(b[8..12].try_into().unwrap()) as usize + 12;
        let last = base + i32::from_be_bytes(b[23..27].try_into().unwrap()) as i64;
        v.push((base, last));
        b = &b[len..];
    }
    v
}

#[test]
fn api_versions_all_versions_and_fallback() {
    let k = Kaka::start("apiv", &[]);
    let mut c = k.client();
    for v in 0..=3 {
        let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, v, &ApiVersionsRequest::default());
        assert_eq!(r.error_code, 0, "v{v}");
        let produce = r.api_keys.iter().find(|a| a.api_key == 0).expect("Produce listed");
        assert_eq!((produce.min_version, produce.max_version), (3, 10));
        let av = r.api_keys.iter().find(|a| a.api_key == 18).unwrap();
        assert_eq!(av.max_version, 3);
    }
    // v4 (what newer clients try first): UNSUPPORTED_VERSION with a v0 body, v0 header.
    let mut raw = ApiVersionsRequest::default();
    raw.client_software_name = StrBytes::from_static_str("t");
    raw.client_software_version = StrBytes::from_static_str("1");
    let body = c.encode_request(ApiKey::ApiVersions, 4, &raw);
    c.send_frame(&body);
    let mut f = c.read_frame().unwrap();
    let cid = i32::from_be_bytes(f[0..4].try_into().unwrap());
    let _ = bytes::Buf::get_i32(&mut f);
    assert!(cid > 0);
    let r = ApiVersionsResponse::decode(&mut f, 0).unwrap();
    assert_eq!(r.error_code, 35);
    assert!(r.api_keys.len() >= 10);
    // An absurd version number is handled the same way, and the connection lives on.
    let mut body = c.encode_request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
    body[2..4].copy_from_slice(&99i16.to_be_bytes());
    c.send_frame(&body);
    let mut f = c.read_frame().unwrap();
    let _ = bytes::Buf::get_i32(&mut f);
    assert_eq!(ApiVersionsResponse::decode(&mut f, 0).unwrap().error_code, 35);
    let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(r.error_code, 0);
}

#[test]
fn unknown_api_key_and_version_keep_connection() {
    let k = Kaka::start("unknown", &[]);
    let mut c = k.client();
    // Unknown key 999.
    let mut body = c.encode_request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
    body[0..2].copy_from_slice(&999i16.to_be_bytes());
    body[4..8].copy_from_slice(&4242i32.to_be_bytes());
    c.send_frame(&body);
    let f = c.read_frame().expect("answer, not a dropped connection");
    assert_eq!(i32::from_be_bytes(f[0..4].try_into().unwrap()), 4242);
    assert_eq!(i16::from_be_bytes(f[4..6].try_into().unwrap()), 35);
    // Metadata v13 is beyond the advertised 0-12.
    let body = c.encode_request(ApiKey::Metadata, 13, &MetadataRequest::default());
    c.send_frame(&body);
    let f = c.read_frame().expect("answer");
    assert_eq!(i16::from_be_bytes(f[4..6].try_into().unwrap()), 35);
    // A transaction API version we do not advertise (KIP-890's EndTxn v4).
    let body = c.encode_request(ApiKey::EndTxn, 4, &EndTxnRequest::default());
    c.send_frame(&body);
    let f = c.read_frame().expect("answer");
    assert_eq!(i16::from_be_bytes(f[4..6].try_into().unwrap()), 35);
    let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 2, &ApiVersionsRequest::default());
    assert_eq!(r.error_code, 0);
}

#[test]
fn bad_frames_close_only_that_connection() {
    let k = Kaka::start("frames", &[]);
    // Oversized frame: closed, as Kafka does.
    let mut c = k.client();
    c.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    use std::io::Write;
    c.s.write_all(&(200 * 1024 * 1024i32).to_be_bytes()).unwrap();
    assert!(c.read_frame().is_none(), "oversized frame closes the connection");
    // Negative size.
    let mut c = k.client();
    c.s.write_all(&(-5i32).to_be_bytes()).unwrap();
    assert!(c.read_frame().is_none());
    // Truncated frame then EOF.
    let mut c = k.client();
    c.s.write_all(&100i32.to_be_bytes()).unwrap();
    c.s.write_all(&[0, 18, 0, 0, 0, 0]).unwrap();
    c.s.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(c.read_frame().is_none());
    // Garbage body for a known API: Kafka closes; so do we. The broker keeps serving.
    let mut c = k.client();
    c.send_frame(&[0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 0xff]);
    assert!(c.read_frame().is_none());
    let mut c = k.client();
    let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(r.error_code, 0);
    assert!(k.log_text().contains("invalid request frame size"));
}

#[test]
fn produce_fetch_crc_and_out_of_range() {
    let k = Kaka::start("pf", &["--no-auto-create-topics"]);
    let mut c = k.client();
    // Auto-creation off: UNKNOWN_TOPIC_OR_PARTITION.
    assert_eq!(produce(&mut c, 9, "missing", 0, batch(&[b"x"])).0, 3);
    assert_eq!(create(&mut c, "t", &[]), 0);
    assert_eq!(create(&mut c, "t", &[]), 36, "TOPIC_ALREADY_EXISTS");
    assert_eq!(produce(&mut c, 9, "t", 0, batch(&[b"a", b"b"])), (0, 0));
    assert_eq!(produce(&mut c, 3, "t", 0, batch(&[b"c"])), (0, 2));
    assert_eq!(produce(&mut c, 9, "t", 7, batch(&[b"c"])).0, 3, "no such partition");
    // Bad CRC: CORRUPT_MESSAGE, nothing stored.
    let mut bad = batch(&[b"zzz"]).to_vec();
    let n = bad.len();
    bad[n - 3] ^= 0x55;
    assert_eq!(produce(&mut c, 9, "t", 0, Bytes::from(bad)).0, 2);
    // Two batches in one partition: INVALID_RECORD.
    let mut two = batch(&[b"q"]).to_vec();
    two.extend_from_slice(&batch(&[b"r"]));
    assert_eq!(produce(&mut c, 9, "t", 0, Bytes::from(two)).0, 87);
    let (err, hw, recs) = fetch(&mut c, "t", 0, 100, 1 << 20);
    assert_eq!((err, hw), (0, 3));
    assert_eq!(batch_offsets(&recs), vec![(0, 1), (2, 2)]);
    // Fetch inside a batch returns that whole batch (the client skips to its offset).
    let (_, _, recs) = fetch(&mut c, "t", 1, 100, 1 << 20);
    assert_eq!(batch_offsets(&recs)[0], (0, 1));
    // Beyond the end, and negative: OFFSET_OUT_OF_RANGE.
    assert_eq!(fetch(&mut c, "t", 4, 100, 1 << 20).0, 1);
    assert_eq!(fetch(&mut c, "t", -7, 100, 1 << 20).0, 1);
    // ListOffsets: latest, earliest, by timestamp (first and past the end), max timestamp.
    assert_eq!(list_offset(&mut c, "t", -1), (0, 3, -1));
    assert_eq!(list_offset(&mut c, "t", -2), (0, 0, -1));
    assert_eq!(list_offset(&mut c, "t", ts_base() + 1).1, 1);
    assert_eq!(list_offset(&mut c, "t", ts_base() + 1_000_000), (0, -1, -1));
    let (e, off, ts) = list_offset(&mut c, "t", -3);
    assert_eq!((e, off, ts), (0, 1, ts_base() + 1));
}

#[test]
fn fetch_answers_at_once_with_data_and_long_polls_without() {
    let k = Kaka::start("poll", &[]);
    let mut c = k.client();
    assert_eq!(produce(&mut c, 9, "lp", 0, batch(&[b"a"])).0, 0);
    // Data present: answered without the long poll. The max wait (120 s) is far beyond the
    // client's 20 s read timeout, so a broker that long-polled anyway fails the read itself.
    let (e, _, recs) = fetch(&mut c, "lp", 0, 120_000, 1 << 20);
    assert_eq!(e, 0);
    assert!(!recs.is_empty());
    // Nothing to return: waits for max_wait.
    let t = Instant::now();
    let (e, _, recs) = fetch(&mut c, "lp", 1, 600, 1 << 20);
    assert_eq!(e, 0);
    assert!(recs.is_empty());
    assert!(t.elapsed() >= Duration::from_millis(550), "long poll waited ({:?})", t.elapsed());
    // A produce during the wait wakes it early.
    let addr = k.addr();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let mut p = Raw::connect(&addr);
        produce(&mut p, 9, "lp", 0, batch(&[b"b"]))
    });
    let t = Instant::now();
    let (_, _, recs) = fetch(&mut c, "lp", 1, 10_000, 1 << 20);
    assert_eq!(batch_offsets(&recs), vec![(1, 1)]);
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(h.join().unwrap().0, 0);
}

#[test]
fn idempotent_sequences_survive_restart() {
    let mut k = Kaka::start("idem", &[]);
    let mut c = k.client();
    let r: InitProducerIdResponse = c.call(ApiKey::InitProducerId, 4, &{
        let mut r = InitProducerIdRequest::default();
        r.producer_id = ProducerId(-1);
        r.producer_epoch = -1;
        r
    });
    assert_eq!(r.error_code, 0);
    let pid = r.producer_id.0;
    let b0 = make_batch(&[b"a", b"b"], Some((pid, 0, 0)), Compression::None);
    let b1 = make_batch(&[b"c"], Some((pid, 0, 2)), Compression::None);
    assert_eq!(produce(&mut c, 9, "idem", 0, b0.clone()), (0, 0));
    assert_eq!(produce(&mut c, 9, "idem", 0, b1.clone()), (0, 2));
    // Exact retry: NO_ERROR with the original offset, nothing appended.
    assert_eq!(produce(&mut c, 9, "idem", 0, b0.clone()), (0, 0));
    // A gap: OUT_OF_ORDER_SEQUENCE_NUMBER.
    let gap = make_batch(&[b"x"], Some((pid, 0, 10)), Compression::None);
    assert_eq!(produce(&mut c, 9, "idem", 0, gap).0, 45);
    // Old sequence not matching a retained batch exactly: DUPLICATE_SEQUENCE_NUMBER.
    let overlap = make_batch(&[b"x"], Some((pid, 0, 1)), Compression::None);
    assert_eq!(produce(&mut c, 9, "idem", 0, overlap).0, 46);
    // Stale epoch after a bump.
    let e1 = make_batch(&[b"n"], Some((pid, 1, 0)), Compression::None);
    assert_eq!(produce(&mut c, 9, "idem", 0, e1), (0, 3));
    let stale = make_batch(&[b"s"], Some((pid, 0, 3)), Compression::None);
    assert_eq!(produce(&mut c, 9, "idem", 0, stale).0, 47);
    drop(c);
    k.restart();
    let mut c = k.client();
    let e1_retry = make_batch(&[b"n"], Some((pid, 1, 0)), Compression::None);
    assert_eq!(produce(&mut c, 9, "idem", 0, e1_retry), (0, 3), "state rebuilt from the log");
    let next = make_batch(&[b"m"], Some((pid, 1, 1)), Compression::None);
    assert_eq!(produce(&mut c, 9, "idem", 0, next), (0, 4));
    // A fresh producer id is never reused across restarts.
    let r2: InitProducerIdResponse = c.call(ApiKey::InitProducerId, 4, &{
        let mut r = InitProducerIdRequest::default();
        r.producer_id = ProducerId(-1);
        r.producer_epoch = -1;
        r
    });
    assert!(r2.producer_id.0 > pid);
}

#[test]
fn torn_tail_truncated_and_old_segment_damage_refused() {
    let mut k = Kaka::start("recover", &["--segment-bytes", "2048"]);
    let mut c = k.client();
    let big = vec![7u8; 600];
    for i in 0..8 {
        assert_eq!(produce(&mut c, 9, "r", 0, batch(&[&big])), (0, i));
    }
    drop(c);
    k.sigkill();
    let pdir = k.dir.join("topics/r/0");
    let mut logs: Vec<_> = std::fs::read_dir(&pdir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    assert!(logs.len() >= 3, "segments rolled: {logs:?}");
    // Closed segments were cut back to exactly their batches; the active one was
    // preallocated past its data (zeros), which a crash leaves behind.
    for old in &logs[..logs.len() - 1] {
        let d = std::fs::read(old).unwrap();
        assert_eq!(log_end(&d), d.len(), "{old:?} is exactly its batches");
    }
    let newest = logs.last().unwrap().clone();
    let mut data = std::fs::read(&newest).unwrap();
    let good_len = log_end(&data);
    assert!(data.len() > good_len && data[good_len..].iter().all(|&b| b == 0), "preallocated");
    // Torn tail: half a batch of garbage where the next batch would have gone.
    let torn = &batch(&[b"torn"])[..40];
    data[good_len..good_len + torn.len()].copy_from_slice(torn);
    std::fs::write(&newest, &data).unwrap();
    k.spawn();
    let mut c = k.client();
    assert_eq!(list_offset(&mut c, "r", -1).1, 8);
    assert_eq!(std::fs::metadata(&newest).unwrap().len() as usize, good_len);
    assert!(k.log_text().contains("truncating torn tail"), "the torn tail is reported");
    assert_eq!(produce(&mut c, 9, "r", 0, batch(&[b"after"])), (0, 8));
    let (_, _, recs) = fetch(&mut c, "r", 0, 100, 1 << 20);
    assert_eq!(batch_offsets(&recs)[0], (0, 0));
    drop(c);
    // Damage in an older segment: the partition refuses to open, nothing is renumbered.
    k.sigkill();
    let old = &logs[0];
    let _ = std::fs::remove_file(old.with_extension("index"));
    let mut d = std::fs::read(old).unwrap();
    d[8..12].copy_from_slice(&(-1i32).to_be_bytes());
    std::fs::write(old, &d).unwrap();
    k.spawn();
    let mut c = k.client();
    assert_eq!(produce(&mut c, 9, "r", 0, batch(&[b"x"])).0, 56, "KAFKA_STORAGE_ERROR");
    assert!(k.log_text().contains("refusing to open partition"), "clear error in the log");
    // The damaged file is untouched (not truncated).
    assert_eq!(std::fs::read(old).unwrap(), d);
}

#[test]
fn fsync_failure_is_fail_stop() {
    let k = Kaka::start("fsync", &["--debug-fail-fsync-after", "1"]);
    let mut c = k.client();
    assert_eq!(produce(&mut c, 9, "f", 0, batch(&[b"ok"])), (0, 0));
    assert_eq!(produce(&mut c, 9, "f", 0, batch(&[b"lost"])).0, 56);
    assert_eq!(produce(&mut c, 9, "f", 0, batch(&[b"later"])).0, 56, "writes refused after a failed sync");
    // The acknowledged record is still readable; the unacknowledged one is not visible.
    let (e, hw, _) = fetch(&mut c, "f", 0, 100, 1 << 20);
    assert_eq!((e, hw), (0, 1));
}

#[test]
fn retention_by_bytes_moves_log_start() {
    let k = Kaka::start(
        "retain",
        &["--segment-bytes", "1024", "--retention-bytes", "2048", "--retention-check-interval-ms", "100"],
    );
    let mut c = k.client();
    let v = vec![1u8; 500];
    for i in 0..20 {
        assert_eq!(produce(&mut c, 9, "ret", 0, batch(&[&v])), (0, i));
    }
    // One ~570-byte batch per 1 KiB segment: keeping >= 2048 bytes leaves 4 segments.
    wait_until(10, "retention", || list_offset(&mut Raw::connect(&k.addr()), "ret", -2).1 >= 16);
    std::thread::sleep(Duration::from_millis(300));
    let start = list_offset(&mut c, "ret", -2).1;
    assert_eq!(start, 16, "log start");
    // A deleted offset reads from the oldest record kept (seed: no OFFSET_OUT_OF_RANGE).
    for asked in [0, start - 1, start] {
        let (e, _, recs) = fetch(&mut c, "ret", asked, 10, 1 << 20);
        assert_eq!(e, 0, "fetch at {asked}");
        assert_eq!(batch_offsets(&recs)[0].0, start, "fetch at {asked}");
    }
    assert_eq!(fetch(&mut c, "ret", -1, 10, 1 << 20).0, 1, "a negative offset: OFFSET_OUT_OF_RANGE");
    assert_eq!(fetch(&mut c, "ret", 21, 10, 1 << 20).0, 1, "past the end: OFFSET_OUT_OF_RANGE");
}

#[test]
fn max_memory_refuses_whole_batch() {
    let k = Kaka::start("mem", &["--max-memory", "64K"]);
    let mut c = k.client();
    let big = vec![3u8; 100 * 1024];
    let (e, _) = produce(&mut c, 9, "m", 0, batch(&[&big]));
    assert_eq!(e, 18, "RECORD_LIST_TOO_LARGE");
    // Many small batches fit: the cache evicts older ones instead of refusing.
    let small = vec![4u8; 10 * 1024];
    for i in 0..30 {
        assert_eq!(produce(&mut c, 9, "m", 0, batch(&[&small])), (0, i));
    }
    assert_eq!(list_offset(&mut c, "m", -1).1, 30);
    let (_, _, recs) = fetch(&mut c, "m", 0, 10, 1 << 20);
    assert_eq!(batch_offsets(&recs)[0].0, 0, "evicted batches are read from the segment");
}

/// A `--max-memory` that holds nothing (0) or that overflows (2^54 K = 2^64 bytes, which
/// used to wrap to 0 and refuse every produce) stops the broker at startup, before it touches
/// its directory, with a message naming the flag and the value.
#[test]
fn bad_max_memory_is_refused_at_startup() {
    let dir = temp_dir("badmem").join("data");
    for (value, why) in
        [("0", "can hold no record"), ("18014398509481984K", "too large"), ("12x", "not a size")]
    {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kaka"))
            .arg("--dir")
            .arg(&dir)
            .args(["--listen", &format!("127.0.0.1:{}", free_port()), "--max-memory", value])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // A broker that accepted the value would run until killed.
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break Some(st);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert!(status.is_some_and(|st| !st.success()), "--max-memory {value} accepted: {err}");
        assert!(err.contains("--max-memory") && err.contains(value) && err.contains(why), "{value}: {err}");
        assert!(!dir.exists(), "--max-memory {value}: the data directory was created");
    }
}

/// Time retention is off unless asked for: with no --retention-ms and no retention.ms, closed
/// segments of records stamped in 1970 stay while the retention pass runs every 20 ms, and
/// DescribeConfigs says -1. A topic that sets retention.ms (opt-in) loses the same segments.
#[test]
fn time_retention_is_off_by_default_and_opt_in() {
    let k = Kaka::start("noage", &["--segment-bytes", "1024", "--retention-check-interval-ms", "20"]);
    let mut c = k.client();
    // One ~570-byte batch per 1 KiB segment, timestamped 1970-01-01T00:00:01Z.
    let old_batch = || one_record_batch(1_000, Some(b"k"), Bytes::from(vec![7u8; 500]));
    assert_eq!(create(&mut c, "opted", &[("retention.ms", "60000")]), 0);
    for i in 0..8 {
        assert_eq!(produce(&mut c, 9, "kept", 0, old_batch()), (0, i));
        assert_eq!(produce(&mut c, 9, "opted", 0, old_batch()), (0, i));
    }
    // The opted-in topic shows that passes run and would delete these segments by age.
    wait_until(10, "time retention on the opted-in topic", || list_offset(&mut c, "opted", -2).1 >= 7);
    std::thread::sleep(Duration::from_millis(300)); // a dozen more passes
    assert_eq!(list_offset(&mut c, "kept", -2).1, 0, "no segment deleted for its age by default");
    let (e, hw, recs) = fetch(&mut c, "kept", 0, 10, 1 << 20);
    assert_eq!((e, hw), (0, 8));
    assert_eq!(batch_offsets(&recs).len(), 8, "every record still readable");
    assert_eq!(topic_settings(&mut c, "kept")["retention.ms"], ("-1".into(), 4), "off, from the broker");
    assert_eq!(topic_settings(&mut c, "opted")["retention.ms"], ("60000".into(), 1), "the topic's own");
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    let mut res = DescribeConfigsResource::default();
    res.resource_type = 4;
    res.resource_name = StrBytes::from_static_str("0");
    res.configuration_keys = Some(vec![StrBytes::from_static_str("log.retention.ms")]);
    let mut r = DescribeConfigsRequest::default();
    r.resources = vec![res];
    let resp: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &r);
    let v: Vec<String> =
        resp.results[0].configs.iter().map(|e| e.value.as_ref().unwrap().to_string()).collect();
    assert_eq!(v, ["-1"], "the broker's log.retention.ms");
}

#[test]
fn compaction_keeps_latest_per_key_with_holes() {
    let k = Kaka::start("compact", &["--retention-check-interval-ms", "200"]);
    let mut c = k.client();
    assert_eq!(
        create(
            &mut c,
            "cmp",
            &[("cleanup.policy", "compact"), ("segment.bytes", "1024"), ("delete.retention.ms", "0")]
        ),
        0
    );
    // Keyless record refused on a compacted topic.
    let keyless = one_record_batch(1, None, Bytes::from_static(b"v"));
    assert_eq!(produce(&mut c, 9, "cmp", 0, keyless).0, 87);
    // make_batch keys records k0.., so every batch of one record has key "k0".
    let v = vec![9u8; 300];
    for i in 0..12 {
        assert_eq!(
            produce(
                &mut c,
                9,
                "cmp",
                0,
                make_batch(&[&v], None, if i % 2 == 0 { Compression::None } else { Compression::Lz4 })
            ),
            (0, i)
        );
    }
    wait_until(15, "compaction", || k.log_text().contains("compacted"));
    std::thread::sleep(Duration::from_millis(300));
    // Walk the log: offsets only increase, holes exist, the newest record is still there.
    let mut seen = Vec::new();
    let mut off = 0;
    loop {
        let (e, hw, recs) = fetch(&mut c, "cmp", off, 10, 1 << 20);
        assert_eq!(e, 0);
        if recs.is_empty() {
            assert_eq!(off, hw);
            break;
        }
        for (base, last) in batch_offsets(&recs) {
            if last >= off {
                seen.push(base);
                off = last + 1;
            }
        }
    }
    assert!(seen.len() < 12, "older records of the key were removed: {seen:?}");
    assert_eq!(*seen.last().unwrap(), 11);
}

#[test]
fn topics_create_cli_and_sigterm() {
    let mut k = Kaka::start("cli", &[]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kaka"))
        .args([
            "topics",
            "create",
            "clitopic",
            "--partitions",
            "3",
            "--config",
            "retention.ms=1000000",
            "--bootstrap",
        ])
        .arg(k.addr())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut c = k.client();
    let mut r = MetadataRequest::default();
    r.topics = None;
    let m: MetadataResponse = c.call(ApiKey::Metadata, 12, &r);
    let t = m.topics.iter().find(|t| t.name.as_ref().unwrap().0.as_str() == "clitopic").unwrap();
    assert_eq!(t.partitions.len(), 3);
    assert_eq!(produce(&mut c, 9, "clitopic", 2, batch(&[b"x"])), (0, 0));
    drop(c);
    assert_eq!(k.sigterm(), Some(0));
    assert!(k.log_text().contains("stopped cleanly"));
    // Offline creation in a stopped broker's directory.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kaka"))
        .args(["topics", "create", "offline", "--partitions", "2", "--dir"])
        .arg(&k.dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    k.spawn();
    let mut c = k.client();
    let m: MetadataResponse = c.call(ApiKey::Metadata, 12, &r);
    let names: Vec<String> = m.topics.iter().map(|t| t.name.as_ref().unwrap().0.to_string()).collect();
    assert!(names.contains(&"offline".to_string()) && names.contains(&"clitopic".to_string()), "{names:?}");
}

#[test]
fn credit_window_stops_reading_until_responses_return() {
    // Three pipelined long polls (nothing to return, 1 s each), then ApiVersions. Served one
    // after the other they take at least 3 s; side by side, about 1 s. The thresholds sit
    // between the two (lower bound 2.9 s; upper bound 2 s, a second of slack for a loaded
    // machine), so they tell the behaviours apart without measuring speed.
    let pipelined = |k: &Kaka| {
        let mut c = k.client();
        let r =
            fetch_request(Some("empty"), uuid::Uuid::nil(), vec![fetch_partition(0, 0, 1024)], 1000, 1024);
        assert_eq!(create(&mut c, "empty", &[]), 0);
        let t = Instant::now();
        for _ in 0..3 {
            let b = c.encode_request(ApiKey::Fetch, 12, &r);
            c.send_frame(&b);
        }
        let b = c.encode_request(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        c.send_frame(&b);
        let mut cids = Vec::new();
        for _ in 0..4 {
            let f = c.read_frame().unwrap();
            cids.push(i32::from_be_bytes(f[0..4].try_into().unwrap()));
        }
        assert!(cids.windows(2).all(|w| w[0] < w[1]), "responses in request order: {cids:?}");
        t.elapsed()
    };
    // Window 1: each request is read only after the previous answer went out.
    let k1 = Kaka::start("credit1", &["--max-in-flight", "1"]);
    let serial = pipelined(&k1);
    assert!(serial >= Duration::from_millis(2900), "window 1 serialises: {serial:?}");
    // Default window: the three polls wait side by side.
    let k32 = Kaka::start("credit32", &[]);
    let parallel = pipelined(&k32);
    assert!(parallel < Duration::from_millis(2000), "window 32 overlaps: {parallel:?}");
}

#[test]
fn fsync_interval_mode_acks_after_write_and_survives_process_kill() {
    let mut k = Kaka::start("interval", &["--fsync-interval-ms", "50"]);
    let mut c = k.client();
    for i in 0..50 {
        assert_eq!(produce(&mut c, 9, "iv", 0, batch(&[b"x"])), (0, i));
    }
    // Visible at once (the high watermark follows the write in this mode).
    assert_eq!(list_offset(&mut c, "iv", -1).1, 50);
    drop(c);
    // A process crash loses nothing: the page cache survives it.
    k.sigkill();
    k.spawn();
    let mut c = k.client();
    assert_eq!(list_offset(&mut c, "iv", -1).1, 50);
    // SIGTERM drains, syncs and exits 0.
    assert_eq!(k.sigterm(), Some(0));
    let log = k.log_text();
    assert!(log.contains("stopped cleanly"), "{log}");
}

/// Fetches served from disk after a restart (nothing in the RAM cache) come back whole and in
/// order when they span many read slices and more than one segment, from any start offset.
#[test]
fn fetch_from_disk_after_restart_spans_slices_and_segments() {
    let mut k = Kaka::start("disk", &["--segment-bytes", "4194304"]);
    let mut c = k.client();
    let value_of = |i: usize| -> Vec<u8> { (0..10_000).map(|j| ((i * 31 + j * 7) % 251) as u8).collect() };
    let n = 600; // ~6 MiB: two segments, each read in many slices
    for i in 0..n {
        assert_eq!(produce(&mut c, 9, "disk", 0, batch(&[&value_of(i)])), (0, i as i64));
    }
    drop(c);
    k.restart();
    let mut c = k.client();
    // 8 MiB answers hold a whole segment; 1.5 MiB answers end inside one, at a batch
    // boundary the offset index knows. Both are large enough to be streamed from the file.
    for (start, max) in [(0i64, 8 << 20), (1, 8 << 20), (377, 8 << 20), (0, 3 << 19), (5, 3 << 19)] {
        let mut next = start;
        while next < n as i64 {
            let (err, hw, data) = fetch(&mut c, "disk", next, 100, max);
            assert!(data.len() <= max as usize, "at most max bytes");
            assert_eq!((err, hw), (0, n as i64));
            let offsets = batch_offsets(&data);
            assert!(!offsets.is_empty(), "fetch at {next} returned nothing");
            let mut rest = &data[..];
            for (base, last) in offsets {
                assert_eq!((base, last), (next, next), "batches arrive in order, none skipped");
                let len = i32::from_be_bytes(rest[8..12].try_into().unwrap()) as usize + 12;
                let crc = u32::from_be_bytes(rest[17..21].try_into().unwrap());
                assert_eq!(crc32c::crc32c(&rest[21..len]), crc, "batch {base} read back intact");
                // The one record ends with its value and then a zero header count.
                let value = &rest[len - 10_001..len - 1];
                assert!(value == &value_of(base as usize)[..], "batch {base} holds its own value");
                rest = &rest[len..];
                next += 1;
            }
        }
    }
}

/// DescribeConfigs answers each resource on its own: a missing topic and a foreign broker id
/// get their error codes, a filtered key list returns only those keys.
#[test]
fn describe_configs_errors_and_key_filter() {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    let k = Kaka::start("describe", &["--retention-bytes", "12345"]);
    let mut c = k.client();
    assert_eq!(create(&mut c, "shown", &[("retention.ms", "60000")]), 0);
    let resource = |kind: i8, name: &str, keys: Option<&[&str]>| {
        let mut r = DescribeConfigsResource::default();
        r.resource_type = kind;
        r.resource_name = StrBytes::from_string(name.to_string());
        r.configuration_keys =
            keys.map(|ks| ks.iter().map(|k| StrBytes::from_string(k.to_string())).collect());
        r
    };
    let mut r = DescribeConfigsRequest::default();
    r.resources = vec![
        resource(2, "shown", Some(&["retention.ms", "retention.bytes"])),
        resource(2, "missing", None),
        resource(4, "7", None),
        resource(8, "0", None),
    ];
    let resp: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &r);
    let shown = &resp.results[0];
    assert_eq!(shown.error_code, 0);
    let got: Vec<(String, String, i8)> = shown
        .configs
        .iter()
        .map(|e| (e.name.to_string(), e.value.as_ref().unwrap().to_string(), e.config_source))
        .collect();
    assert_eq!(
        got,
        vec![("retention.bytes".into(), "12345".into(), 4), ("retention.ms".into(), "60000".into(), 1)],
        "only the keys asked for; a topic setting (1) and a broker flag (4)"
    );
    assert_eq!(resp.results[1].error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    assert!(resp.results[1].configs.is_empty());
    assert_eq!(resp.results[2].error_code, 42, "INVALID_REQUEST: another broker id");
    assert_eq!(resp.results[3].error_code, 42, "INVALID_REQUEST: broker loggers");
    // A group nobody knows is Dead with no error, as Kafka reports it; ListGroups has none.
    let mut d = DescribeGroupsRequest::default();
    d.groups = vec![GroupId(StrBytes::from_static_str("never-seen"))];
    let resp: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, 5, &d);
    assert_eq!(resp.groups[0].error_code, 0);
    assert_eq!(resp.groups[0].group_state.as_str(), "Dead");
    assert!(resp.groups[0].members.is_empty());
    let resp: ListGroupsResponse = c.call(ApiKey::ListGroups, 4, &ListGroupsRequest::default());
    assert_eq!((resp.error_code, resp.groups.len()), (0, 0));
    // The connection is still usable afterwards.
    assert_eq!(fetch(&mut c, "shown", 0, 0, 1024).0, 0);
}

/// Group commit: produces that arrive together share one fdatasync. 32 connections each send
/// an acks=all produce before any answer is read, for 25 rounds; a broker that synced each
/// batch on its own would need 800 fdatasyncs (the broker logs its counts at shutdown).
#[test]
fn group_commit_shares_fdatasync() {
    let mut k = Kaka::start("gc", &[]);
    let mut conns: Vec<Raw> = (0..32).map(|_| k.client()).collect();
    assert_eq!(produce(&mut conns[0], 9, "gc", 0, batch(&[b"create"])).0, 0);
    let request = |c: &mut Raw, i: usize| {
        let mut pd = PartitionProduceData::default();
        pd.index = 0;
        pd.records = Some(batch(&[format!("record {i}").as_bytes()]));
        let mut td = TopicProduceData::default();
        td.name = tname("gc");
        td.partition_data = vec![pd];
        let mut r = ProduceRequest::default();
        r.acks = -1;
        r.timeout_ms = 10_000;
        r.topic_data = vec![td];
        c.encode_request(ApiKey::Produce, 9, &r)
    };
    let rounds = 25;
    for round in 0..rounds {
        for (i, c) in conns.iter_mut().enumerate() {
            let body = request(c, round * 32 + i);
            c.send_frame(&body);
        }
        for c in conns.iter_mut() {
            let mut f = c.read_frame().expect("produce answer");
            ResponseHeader::decode(&mut f, 1).unwrap();
            let resp = ProduceResponse::decode(&mut f, 9).unwrap();
            assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
        }
    }
    drop(conns);
    assert_eq!(k.sigterm(), Some(0));
    let log = k.log_text();
    let field = |name: &str| -> u64 {
        let i = log.rfind(&format!("{name}=")).expect("stats line") + name.len() + 1;
        log[i..].chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().unwrap()
    };
    let (syncs, appends) = (field("syncs"), field("appends"));
    assert_eq!(appends, 1 + 32 * rounds as u64, "every produce appended once");
    eprintln!("group commit: {syncs} fdatasyncs for {appends} appended batches");
    assert!(syncs * 4 <= appends, "group commit: {syncs} fdatasyncs for {appends} appended batches");
}

/// Sends IncrementalAlterConfigs for one resource: (operation, key, value) triples.
fn incremental_alter(
    c: &mut Raw,
    kind: i8,
    name: &str,
    ops: &[(i8, &str, Option<&str>)],
    validate_only: bool,
) -> i16 {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    let mut res = AlterConfigsResource::default();
    res.resource_type = kind;
    res.resource_name = StrBytes::from_string(name.to_string());
    for (op, key, value) in ops {
        let mut a = AlterableConfig::default();
        a.config_operation = *op;
        a.name = StrBytes::from_string(key.to_string());
        a.value = value.map(|v| StrBytes::from_string(v.to_string()));
        res.configs.push(a);
    }
    let mut r = IncrementalAlterConfigsRequest::default();
    r.resources = vec![res];
    r.validate_only = validate_only;
    let resp: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &r);
    resp.responses[0].error_code
}

/// A topic's settings as DescribeConfigs reports them: key -> (value, source).
fn topic_settings(c: &mut Raw, topic: &str) -> std::collections::BTreeMap<String, (String, i8)> {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    let mut res = DescribeConfigsResource::default();
    res.resource_type = 2;
    res.resource_name = StrBytes::from_string(topic.to_string());
    res.configuration_keys = None; // every key (an empty list would ask for none)
    let mut r = DescribeConfigsRequest::default();
    r.resources = vec![res];
    let resp: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &r);
    assert_eq!(resp.results[0].error_code, 0);
    resp.results[0]
        .configs
        .iter()
        .map(|e| (e.name.to_string(), (e.value.as_ref().unwrap().to_string(), e.config_source)))
        .collect()
}

/// Altering topic settings: each operation, the errors Kafka gives, validate-only, the
/// non-incremental AlterConfigs, persistence across a restart, and a live effect (a retention
/// limit set on a running topic deletes its old segments).
#[test]
fn alter_configs_apply_live_persist_and_refuse_bad_input() {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let mut k = Kaka::start("alter", &["--segment-bytes", "1024", "--retention-check-interval-ms", "100"]);
    let mut c = k.client();
    assert_eq!(create(&mut c, "t", &[("retention.ms", "60000")]), 0);
    let (set, delete, append, subtract) = (0i8, 1i8, 2i8, 3i8);
    // SET, then DELETE back to the broker default; the source says which is which.
    assert_eq!(incremental_alter(&mut c, 2, "t", &[(set, "retention.ms", Some("123456"))], false), 0);
    assert_eq!(topic_settings(&mut c, "t")["retention.ms"], ("123456".into(), 1));
    assert_eq!(incremental_alter(&mut c, 2, "t", &[(delete, "retention.ms", None)], false), 0);
    let s = topic_settings(&mut c, "t");
    assert_eq!(s["retention.ms"].1, 4, "back to the broker's flag");
    // APPEND and SUBTRACT work on the one list key.
    assert_eq!(incremental_alter(&mut c, 2, "t", &[(append, "cleanup.policy", Some("compact"))], false), 0);
    assert_eq!(topic_settings(&mut c, "t")["cleanup.policy"].0, "compact,delete");
    assert_eq!(incremental_alter(&mut c, 2, "t", &[(subtract, "cleanup.policy", Some("compact"))], false), 0);
    assert_eq!(topic_settings(&mut c, "t")["cleanup.policy"].0, "delete");
    // Bad input: each answered with Kafka's code, nothing applied.
    let before = topic_settings(&mut c, "t");
    assert_eq!(incremental_alter(&mut c, 2, "t", &[(set, "retention.ms", Some("soon"))], false), 40);
    assert_eq!(incremental_alter(&mut c, 2, "t", &[(set, "no.such.key", Some("1"))], false), 40);
    assert_eq!(incremental_alter(&mut c, 2, "t", &[(append, "retention.ms", Some("1"))], false), 40);
    assert_eq!(incremental_alter(&mut c, 2, "t", &[(subtract, "cleanup.policy", Some("delete"))], false), 40);
    assert_eq!(incremental_alter(&mut c, 2, "t", &[(set, "retention.ms", None)], false), 42);
    assert_eq!(incremental_alter(&mut c, 2, "t", &[(9, "retention.ms", Some("1"))], false), 42);
    let dup = [(set, "retention.ms", Some("1")), (set, "retention.ms", Some("2"))];
    assert_eq!(incremental_alter(&mut c, 2, "t", &dup, false), 42);
    assert_eq!(incremental_alter(&mut c, 2, "missing", &[(set, "retention.ms", Some("1"))], false), 3);
    assert_eq!(incremental_alter(&mut c, 4, "0", &[(set, "log.retention.ms", Some("1"))], false), 40);
    assert_eq!(incremental_alter(&mut c, 2, "t", &[(set, "retention.ms", Some("777"))], true), 0);
    assert_eq!(topic_settings(&mut c, "t"), before, "failed and validate-only alterations change nothing");
    // AlterConfigs replaces the whole set: keys not named return to their defaults.
    assert_eq!(incremental_alter(&mut c, 2, "t", &[(set, "delete.retention.ms", Some("5000"))], false), 0);
    let mut res = AlterConfigsResource::default();
    res.resource_type = 2;
    res.resource_name = StrBytes::from_static_str("t");
    let mut a = AlterableConfig::default();
    a.name = StrBytes::from_static_str("retention.ms");
    a.value = Some(StrBytes::from_static_str("999000"));
    res.configs.push(a);
    let mut r = AlterConfigsRequest::default();
    r.resources = vec![res];
    let resp: AlterConfigsResponse = c.call(ApiKey::AlterConfigs, 2, &r);
    assert_eq!(resp.responses[0].error_code, 0);
    let s = topic_settings(&mut c, "t");
    assert_eq!(s["retention.ms"], ("999000".into(), 1));
    assert_eq!(s["delete.retention.ms"].1, 4, "not named, so back to the default");
    // Settings survive a restart (topic.meta is rewritten before the answer).
    drop(c);
    k.restart();
    let mut c = k.client();
    assert_eq!(topic_settings(&mut c, "t")["retention.ms"], ("999000".into(), 1));
    // Live effect: 20 batches, one per 1 KiB segment, then keep at most 2048 bytes.
    let v = vec![1u8; 500];
    for i in 0..20 {
        assert_eq!(produce(&mut c, 9, "t", 0, batch(&[&v])), (0, i));
    }
    assert_eq!(list_offset(&mut c, "t", -2).1, 0, "no retention by size yet");
    assert_eq!(incremental_alter(&mut c, 2, "t", &[(set, "retention.bytes", Some("2048"))], false), 0);
    wait_until(10, "retention after the alteration", || {
        list_offset(&mut Raw::connect(&k.addr()), "t", -2).1 >= 16
    });
}

/// Topic ids: Metadata v12 reports each topic's id (the same after a restart) and finds a
/// topic by id alone; Fetch v13+ names topics by id, and an unknown id is UNKNOWN_TOPIC_ID.
#[test]
fn topic_ids_in_metadata_and_fetch_by_id() {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    let mut k = Kaka::start("ids", &[]);
    let mut c = k.client();
    assert_eq!(produce(&mut c, 9, "by-id", 0, batch(&[b"first", b"second"])), (0, 0));
    let metadata_id = |c: &mut Raw, name: Option<&str>, id: uuid::Uuid| {
        let mut t = MetadataRequestTopic::default();
        t.name = name.map(tname);
        t.topic_id = id;
        let mut r = MetadataRequest::default();
        r.topics = Some(vec![t]);
        let resp: MetadataResponse = c.call(ApiKey::Metadata, 12, &r);
        let t = &resp.topics[0];
        (t.error_code, t.name.as_ref().map(|n| n.0.to_string()), t.topic_id)
    };
    let (err, _, id) = metadata_id(&mut c, Some("by-id"), uuid::Uuid::nil());
    assert_eq!(err, 0);
    assert!(!id.is_nil(), "a real topic id");
    assert_eq!(metadata_id(&mut c, None, id), (0, Some("by-id".into()), id), "found by id alone");
    let stranger = uuid::Uuid::from_bytes([9; 16]);
    assert_eq!(metadata_id(&mut c, None, stranger).0, 100, "UNKNOWN_TOPIC_ID");
    let fetch_v = |c: &mut Raw, version: i16, id: uuid::Uuid| {
        let r = fetch_request(None, id, vec![fetch_partition(0, 0, 1 << 20)], 10, 1 << 20);
        let resp: FetchResponse = c.call(ApiKey::Fetch, version, &r);
        let t = &resp.responses[0];
        (t.topic_id, t.partitions[0].error_code, t.partitions[0].records.clone().unwrap_or_default())
    };
    for version in 13..=16 {
        let (got_id, err, recs) = fetch_v(&mut c, version, id);
        assert_eq!((got_id, err), (id, 0), "v{version}");
        assert_eq!(batch_offsets(&recs), vec![(0, 1)], "v{version}: the batch, by id");
        let (got_id, err, _) = fetch_v(&mut c, version, stranger);
        assert_eq!((got_id, err), (stranger, 100), "v{version}: UNKNOWN_TOPIC_ID");
    }
    drop(c);
    k.restart();
    let mut c = k.client();
    assert_eq!(metadata_id(&mut c, Some("by-id"), uuid::Uuid::nil()).2, id, "the id survives a restart");
    assert_eq!(fetch_v(&mut c, 16, id).1, 0);
}

/// One Fetch answer streaming two partitions from disk (each longer than a read slice), with
/// a small in-memory part between them: every batch arrives whole, in its own partition.
#[test]
fn fetch_streams_several_partitions_from_disk() {
    let mut k = Kaka::start("multi", &["--num-partitions", "3"]);
    let mut c = k.client();
    let value = |p: i32, i: usize| -> Vec<u8> {
        (0..5_000).map(|j| ((i * 13 + j + p as usize * 7) % 251) as u8).collect()
    };
    for p in 0..2 {
        for i in 0..120 {
            assert_eq!(produce(&mut c, 9, "m", p, batch(&[&value(p, i)])), (0, i as i64));
        }
    }
    assert_eq!(produce(&mut c, 9, "m", 2, batch(&[b"tiny"])), (0, 0));
    drop(c);
    k.restart();
    let mut c = k.client();
    let parts = [0, 2, 1].into_iter().map(|p| fetch_partition(p, 0, 8 << 20)).collect();
    let resp: FetchResponse =
        c.call(ApiKey::Fetch, 12, &fetch_request(Some("m"), uuid::Uuid::nil(), parts, 10, 32 << 20));
    let parts = &resp.responses[0].partitions;
    assert_eq!(parts.iter().map(|p| p.partition_index).collect::<Vec<_>>(), vec![0, 2, 1]);
    for part in parts {
        assert_eq!(part.error_code, 0);
        let data = part.records.clone().unwrap_or_default();
        let offsets = batch_offsets(&data);
        if part.partition_index == 2 {
            assert_eq!(offsets, vec![(0, 0)]);
            continue;
        }
        assert!(data.len() > 256 << 10, "longer than one read slice: streamed");
        assert_eq!(offsets.len(), 120, "partition {}", part.partition_index);
        let mut rest = &data[..];
        for (i, (base, _)) in offsets.into_iter().enumerate() {
            assert_eq!(base, i as i64);
            let len = i32::from_be_bytes(rest[8..12].try_into().unwrap()) as usize + 12;
            let crc = u32::from_be_bytes(rest[17..21].try_into().unwrap());
            assert_eq!(crc32c::crc32c(&rest[21..len]), crc);
            assert!(rest[..len].windows(5_000).any(|w| w == &value(part.partition_index, i)[..]));
            rest = &rest[len..];
        }
    }
}

/// A compacted topic is not re-read on every housekeeping tick: after a pass, an idle topic
/// gets no more passes; the next one comes when the newly closed segments reach
/// min.cleanable.dirty.ratio of the closed log, or when the topic's settings change.
#[test]
fn compaction_passes_only_when_due() {
    let k = Kaka::start("due", &["--retention-check-interval-ms", "50"]);
    let mut c = k.client();
    let settings =
        [("cleanup.policy", "compact"), ("segment.bytes", "1024"), ("delete.retention.ms", "3600000")];
    assert_eq!(create(&mut c, "due", &settings), 0);
    let passes = || k.log_text().matches("compaction pass").count();
    let v = vec![5u8; 300];
    let mut next = 0;
    let mut produce_n = |c: &mut Raw, n: i64| {
        for _ in 0..n {
            assert_eq!(produce(c, 9, "due", 0, make_batch(&[&v], None, Compression::None)), (0, next));
            next += 1;
        }
    };
    produce_n(&mut c, 8);
    wait_until(10, "a first pass", || k.log_text().contains("compacted"));
    std::thread::sleep(Duration::from_millis(300));
    let settled = passes();
    std::thread::sleep(Duration::from_millis(600)); // a dozen ticks with nothing new
    assert_eq!(passes(), settled, "an idle compacted topic is not re-read");
    // New closed segments outweighing the (compacted, now small) clean part: a pass is due.
    produce_n(&mut c, 6);
    wait_until(10, "a pass for the new segments", || passes() > settled);
    std::thread::sleep(Duration::from_millis(300));
    let settled = passes();
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(passes(), settled, "idle again");
    // Changed settings are applied by a pass at the next tick.
    assert_eq!(incremental_alter(&mut c, 2, "due", &[(0, "delete.retention.ms", Some("0"))], false), 0);
    wait_until(10, "a pass after the settings changed", || passes() > settled);
}

/// CreatePartitions grows a topic: the new partitions take produces and fetches at once, the
/// count survives a restart, and bad requests get Kafka's codes with nothing changed.
#[test]
fn create_partitions_grows_topics_and_refuses_bad_counts() {
    use kafka_protocol::messages::create_partitions_request::{
        CreatePartitionsAssignment, CreatePartitionsTopic,
    };
    let mut k = Kaka::start("grow", &[]);
    let mut c = k.client();
    assert_eq!(create(&mut c, "g", &[]), 0);
    assert_eq!(produce(&mut c, 9, "g", 0, batch(&[b"p0"])), (0, 0));
    let grow = |c: &mut Raw, topic: &str, count: i32, assign: Option<Vec<Vec<i32>>>, validate_only: bool| {
        let mut t = CreatePartitionsTopic::default();
        t.name = tname(topic);
        t.count = count;
        t.assignments = assign.map(|a| {
            a.into_iter()
                .map(|ids| {
                    let mut x = CreatePartitionsAssignment::default();
                    x.broker_ids = ids.into_iter().map(BrokerId).collect();
                    x
                })
                .collect()
        });
        let mut r = CreatePartitionsRequest::default();
        r.topics = vec![t];
        r.timeout_ms = 5000;
        r.validate_only = validate_only;
        let resp: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, 3, &r);
        resp.results[0].error_code
    };
    let count = |c: &mut Raw| {
        let mut r = MetadataRequest::default();
        r.topics = Some(vec![{
            let mut t = kafka_protocol::messages::metadata_request::MetadataRequestTopic::default();
            t.name = Some(tname("g"));
            t
        }]);
        let resp: MetadataResponse = c.call(ApiKey::Metadata, 12, &r);
        resp.topics[0].partitions.len()
    };
    assert_eq!(grow(&mut c, "g", 1, None, false), 37, "INVALID_PARTITIONS: not larger");
    assert_eq!(grow(&mut c, "nope", 3, None, false), 3, "UNKNOWN_TOPIC_OR_PARTITION");
    assert_eq!(grow(&mut c, "g", 3, Some(vec![vec![0], vec![1]]), false), 39, "another broker");
    assert_eq!(grow(&mut c, "g", 3, Some(vec![vec![0]]), false), 39, "one assignment for two partitions");
    assert_eq!(grow(&mut c, "g", 3, None, true), 0, "validate only");
    assert_eq!(count(&mut c), 1, "nothing changed yet");
    assert_eq!(grow(&mut c, "g", 3, Some(vec![vec![0], vec![0]]), false), 0);
    assert_eq!(count(&mut c), 3);
    assert_eq!(produce(&mut c, 9, "g", 2, batch(&[b"p2"])), (0, 0));
    assert_eq!(batch_offsets(&fetch_at(&mut c, "g", 2, 0, 10, 1 << 20).2), vec![(0, 0)]);
    drop(c);
    k.restart();
    let mut c = k.client();
    assert_eq!(count(&mut c), 3, "the new count survives a restart");
    assert_eq!(batch_offsets(&fetch_at(&mut c, "g", 2, 0, 10, 1 << 20).2), vec![(0, 0)]);
    assert_eq!(batch_offsets(&fetch_at(&mut c, "g", 0, 0, 10, 1 << 20).2), vec![(0, 0)]);
}

fn commit_offsets(c: &mut Raw, group: &str, topic: &str, offsets: &[(i32, i64)]) {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    let mut t = OffsetCommitRequestTopic::default();
    t.name = tname(topic);
    for (p, o) in offsets {
        let mut x = OffsetCommitRequestPartition::default();
        x.partition_index = *p;
        x.committed_offset = *o;
        t.partitions.push(x);
    }
    let mut r = OffsetCommitRequest::default();
    r.group_id = GroupId(StrBytes::from_string(group.to_string()));
    r.generation_id_or_member_epoch = -1;
    r.topics = vec![t];
    let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &r);
    assert!(resp.topics[0].partitions.iter().all(|p| p.error_code == 0));
}

fn committed(c: &mut Raw, group: &str, topic: &str, partitions: &[i32]) -> Vec<i64> {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    let mut t = OffsetFetchRequestTopic::default();
    t.name = tname(topic);
    t.partition_indexes = partitions.to_vec();
    let mut r = OffsetFetchRequest::default();
    r.group_id = GroupId(StrBytes::from_string(group.to_string()));
    r.topics = Some(vec![t]);
    let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 7, &r);
    resp.topics[0].partitions.iter().map(|p| p.committed_offset).collect()
}

/// OffsetDelete and DeleteGroups remove committed offsets durably; unknown groups get
/// GROUP_ID_NOT_FOUND, and other groups keep theirs.
#[test]
fn delete_offsets_and_groups() {
    let mut k = Kaka::start("delgroups", &["--num-partitions", "2"]);
    let mut c = k.client();
    assert_eq!(produce(&mut c, 9, "t", 1, batch(&[b"x"])), (0, 0)); // creates t, 2 partitions
    commit_offsets(&mut c, "dg", "t", &[(0, 10), (1, 20)]);
    commit_offsets(&mut c, "keep", "t", &[(0, 7)]);
    assert_eq!(committed(&mut c, "dg", "t", &[0, 1]), vec![10, 20]);
    let offset_delete = |c: &mut Raw, group: &str, partitions: &[i32]| {
        use kafka_protocol::messages::offset_delete_request::{
            OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
        };
        let mut t = OffsetDeleteRequestTopic::default();
        t.name = tname("t");
        t.partitions = partitions
            .iter()
            .map(|p| {
                let mut x = OffsetDeleteRequestPartition::default();
                x.partition_index = *p;
                x
            })
            .collect();
        let mut r = OffsetDeleteRequest::default();
        r.group_id = GroupId(StrBytes::from_string(group.to_string()));
        r.topics = vec![t];
        let resp: OffsetDeleteResponse = c.call(ApiKey::OffsetDelete, 0, &r);
        let per: Vec<i16> =
            resp.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect();
        (resp.error_code, per)
    };
    assert_eq!(offset_delete(&mut c, "dg", &[0]), (0, vec![0]));
    assert_eq!(committed(&mut c, "dg", "t", &[0, 1]), vec![-1, 20], "partition 0's offset is gone");
    assert_eq!(offset_delete(&mut c, "nobody", &[0]).0, 69, "GROUP_ID_NOT_FOUND");
    let delete_groups = |c: &mut Raw, groups: &[&str]| {
        let mut r = DeleteGroupsRequest::default();
        r.groups_names = groups.iter().map(|g| GroupId(StrBytes::from_string(g.to_string()))).collect();
        let resp: DeleteGroupsResponse = c.call(ApiKey::DeleteGroups, 2, &r);
        resp.results.iter().map(|x| (x.group_id.0.to_string(), x.error_code)).collect::<Vec<_>>()
    };
    assert_eq!(delete_groups(&mut c, &["dg", "never"]), vec![("dg".into(), 0), ("never".into(), 69)]);
    assert_eq!(committed(&mut c, "dg", "t", &[0, 1]), vec![-1, -1]);
    assert_eq!(delete_groups(&mut c, &["dg"]), vec![("dg".into(), 69)], "already gone");
    // Deletions are durable: after a restart the deleted offsets stay deleted, others stay.
    drop(c);
    k.restart();
    let mut c = k.client();
    assert_eq!(committed(&mut c, "dg", "t", &[0, 1]), vec![-1, -1]);
    assert_eq!(committed(&mut c, "keep", "t", &[0]), vec![7]);
}

/// DeleteRecords moves the log start (durably), fetches below it read from it,
/// ListOffsets answers from it, and whole segments below it are deleted.
#[test]
fn delete_records_moves_the_log_start() {
    use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
    let mut k = Kaka::start("delrec", &["--segment-bytes", "1024", "--retention-check-interval-ms", "100"]);
    let mut c = k.client();
    let v = vec![4u8; 200]; // three batches per 1 KiB segment: 0-2, 3-5, 6-8, 9
    for i in 0..10 {
        assert_eq!(produce(&mut c, 9, "dr", 0, batch(&[&v])), (0, i));
    }
    let delete = |c: &mut Raw, topic: &str, offset: i64| {
        let mut p = DeleteRecordsPartition::default();
        p.partition_index = 0;
        p.offset = offset;
        let mut t = DeleteRecordsTopic::default();
        t.name = tname(topic);
        t.partitions = vec![p];
        let mut r = DeleteRecordsRequest::default();
        r.topics = vec![t];
        r.timeout_ms = 5000;
        let resp: DeleteRecordsResponse = c.call(ApiKey::DeleteRecords, 2, &r);
        let p = &resp.topics[0].partitions[0];
        (p.error_code, p.low_watermark)
    };
    assert_eq!(delete(&mut c, "dr", 11), (1, -1), "past the high watermark: OFFSET_OUT_OF_RANGE");
    assert_eq!(delete(&mut c, "nope", 1).0, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    assert_eq!(delete(&mut c, "dr", 4), (0, 4), "inside the second segment");
    assert_eq!(delete(&mut c, "dr", 2), (0, 4), "never moves back");
    assert_eq!(list_offset(&mut c, "dr", -2).1, 4, "earliest");
    assert_eq!(list_offset(&mut c, "dr", 0).1, 4, "by timestamp: not below the log start");
    for asked in [0, 3, 4] {
        let (e, _, recs) = fetch(&mut c, "dr", asked, 10, 1 << 20);
        assert_eq!((e, batch_offsets(&recs)[0].0), (0, 4), "below the log start: from the oldest kept");
    }
    // The segment wholly below offset 4 is deleted by the next retention pass.
    let pdir = k.dir.join("topics/dr/0");
    let first_base = || {
        let mut bases: Vec<i64> = std::fs::read_dir(&pdir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".log")?.parse().ok())
            .collect();
        bases.sort();
        bases[0]
    };
    assert_eq!(first_base(), 0);
    wait_until(10, "segments below the log start deleted", || first_base() > 0);
    assert_eq!(first_base(), 3, "the segment holding offset 4 stays");
    // Durable: the log start survives a restart.
    drop(c);
    k.restart();
    let mut c = k.client();
    assert_eq!(list_offset(&mut c, "dr", -2).1, 4, "not the first segment's base, 3");
    assert_eq!(delete(&mut c, "dr", -1), (0, 10), "-1: up to the high watermark");
    assert_eq!(list_offset(&mut c, "dr", -2).1, 10);
    assert_eq!(fetch(&mut c, "dr", 5, 10, 1 << 20).0, 1, "nothing kept to read from: OFFSET_OUT_OF_RANGE");
    assert_eq!(produce(&mut c, 9, "dr", 0, batch(&[b"after"])), (0, 10));
    for asked in [5, 10] {
        let (e, _, recs) = fetch(&mut c, "dr", asked, 10, 1 << 20);
        assert_eq!((e, batch_offsets(&recs)[0].0), (0, 10), "fetch at {asked}");
    }
    // A deletion inside a batch (offsets 11-13): served from the log start, the batch would
    // hand a consumer below it the deleted record 11, so that is Kafka's OFFSET_OUT_OF_RANGE.
    assert_eq!(produce(&mut c, 9, "dr", 0, batch(&[b"a", b"b", b"c"])), (0, 11));
    assert_eq!(delete(&mut c, "dr", 12), (0, 12));
    assert_eq!(fetch(&mut c, "dr", 5, 10, 1 << 20).0, 1, "the log start inside a batch: OFFSET_OUT_OF_RANGE");
    let (e, _, recs) = fetch(&mut c, "dr", 12, 10, 1 << 20);
    assert_eq!((e, batch_offsets(&recs)[0]), (0, (11, 13)), "at the log start: the whole batch, as Kafka");
}

/// DescribeLogDirs reports each partition's log size (what was written, not the preallocated
/// file length) and the file system's space; DescribeCluster describes the one broker.
#[test]
fn describe_log_dirs_and_cluster() {
    let k = Kaka::start("logdirs", &["--num-partitions", "2"]);
    let mut c = k.client();
    let b = batch(&[&[1u8; 1000][..]]);
    let batch_len = b.len() as i64;
    assert_eq!(produce(&mut c, 9, "sized", 1, b), (0, 0));
    for version in [1i16, 4] {
        let mut r = DescribeLogDirsRequest::default();
        r.topics = None; // every topic (an empty list would ask for none)
        let resp: DescribeLogDirsResponse = c.call(ApiKey::DescribeLogDirs, version, &r);
        assert_eq!(resp.results.len(), 1);
        let dir = &resp.results[0];
        assert!(dir.log_dir.contains("logdirs"), "{:?}", dir.log_dir);
        let t = dir.topics.iter().find(|t| t.name.0.as_str() == "sized").expect("topic listed");
        let sizes: Vec<(i32, i64)> =
            t.partitions.iter().map(|p| (p.partition_index, p.partition_size)).collect();
        assert_eq!(sizes, vec![(0, 0), (1, batch_len)], "v{version}");
        if version >= 4 {
            assert!(dir.total_bytes > 0 && dir.usable_bytes > 0 && dir.usable_bytes <= dir.total_bytes);
        }
    }
    let resp: DescribeClusterResponse = c.call(ApiKey::DescribeCluster, 2, &{
        let mut r = DescribeClusterRequest::default();
        r.endpoint_type = 1;
        r
    });
    assert_eq!((resp.error_code, resp.cluster_id.as_str(), resp.brokers.len()), (0, "kaka", 1));
    assert_eq!(resp.brokers[0].port, k.addr().rsplit(':').next().unwrap().parse::<i32>().unwrap());
    let resp: DescribeClusterResponse = c.call(ApiKey::DescribeCluster, 1, &{
        let mut r = DescribeClusterRequest::default();
        r.endpoint_type = 2;
        r
    });
    assert_eq!(resp.error_code, 120, "UNSUPPORTED_ENDPOINT_TYPE: no controller endpoints");
}

/// A client that sends a large Fetch and then stops reading: the bulk writer thread gives up
/// after --write-stall-timeout-ms without progress, the connection is closed (the client reads
/// what was buffered, then end of stream, not the whole answer), and the thread is gone.
#[test]
fn bulk_writer_gives_up_on_a_client_that_stopped_reading() {
    use std::io::Read;
    let k = Kaka::start("stall", &["--write-stall-timeout-ms", "1000"]);
    let mut c = k.client();
    let value = vec![7u8; 512 * 1024];
    let n = 48; // 24 MiB: far more than the socket buffers on both sides hold
    for i in 0..n {
        assert_eq!(produce(&mut c, 9, "stall", 0, batch(&[&value])), (0, i as i64));
    }
    let mut s = k.client();
    // A small receive buffer, so the broker's writes stall early.
    let small: libc::c_int = 64 * 1024;
    // SAFETY: setsockopt on an open socket with a valid int option.
    unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&s.s),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &small as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    let parts = vec![fetch_partition(0, 0, 64 << 20)];
    let body = s.encode_request(
        ApiKey::Fetch,
        12,
        &fetch_request(Some("stall"), uuid::Uuid::nil(), parts, 0, 64 << 20),
    );
    let sent = Instant::now();
    s.send_frame(&body);
    // Do not read: the broker's writer stalls; it must give up and end the connection.
    let bulk = || k.thread_names().iter().any(|t| t.starts_with("kaka-bulk"));
    wait_until(30, "the bulk writer thread to start", bulk);
    wait_until(60, "the bulk writer thread to end", || !bulk());
    // The writer's last progress came after the request was sent, so it cannot give up
    // sooner than the configured stall after that (a lower bound no slowness can break).
    assert!(sent.elapsed() >= Duration::from_millis(1000), "gave up before the configured stall");
    std::thread::sleep(Duration::from_millis(200));
    s.s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 20];
    let end = loop {
        match s.s.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(m) => got += m,
            Err(e) => break Err(e),
        }
    };
    match end {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("connection still open after the stall ({got} bytes read): {e}"),
    }
    assert!(got < n * value.len(), "the whole answer arrived ({got} bytes): the write never gave up");
    // The broker serves others as before.
    assert_eq!(produce(&mut c, 9, "stall", 0, batch(&[b"after"])), (0, n as i64));
}

/// A batch with three keyless records among keyed ones on a compacted topic: the batch is
/// refused with INVALID_RECORD, and record_errors name each of the three (and only those).
#[test]
fn keyless_records_are_each_named_in_record_errors() {
    use kafka_protocol::records::*;
    let k = Kaka::start("keyless", &[]);
    let mut c = k.client();
    assert_eq!(create(&mut c, "kl", &[("cleanup.policy", "compact")]), 0);
    let keyless = [1usize, 3, 4];
    let records: Vec<Record> = (0..6)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32 - 1, // offset - sequence constant: one batch
            timestamp: ts_base(),
            key: if keyless.contains(&i) { None } else { Some(Bytes::from(format!("k{i}"))) },
            value: Some(Bytes::from_static(b"v")),
            headers: Default::default(),
        })
        .collect();
    let mut b = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut b,
        &records,
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .unwrap();
    let mut pd = produce_request::PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(b.freeze());
    let mut td = produce_request::TopicProduceData::default();
    td.name = tname("kl");
    td.partition_data = vec![pd];
    let mut r = ProduceRequest::default();
    r.acks = -1;
    r.timeout_ms = 10_000;
    r.topic_data = vec![td];
    let resp: ProduceResponse = c.call(ApiKey::Produce, 9, &r);
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 87, "INVALID_RECORD");
    let mut named: Vec<i32> = p.record_errors.iter().map(|e| e.batch_index).collect();
    named.sort();
    assert_eq!(named, vec![1, 3, 4], "{:?}", p.record_errors);
    assert!(p.record_errors.iter().all(|e| e.batch_index_error_message.is_some()));
    // Nothing of the batch was written.
    let (err, hw, _) = fetch(&mut c, "kl", 0, 0, 1 << 20);
    assert_eq!((err, hw), (0, 0));
}

/// Kafka 4's standard topic configs are accepted by CreateTopics, AlterConfigs and
/// IncrementalAlterConfigs, stored (across a restart) and reported by DescribeConfigs;
/// max.message.bytes is applied; removed names are accepted and ignored; unknown names and bad
/// values still get INVALID_CONFIG.
#[test]
fn kafka_topic_configs_are_accepted_stored_and_reported() {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let mut k = Kaka::start("kcfg", &[]);
    let mut c = k.client();
    let standard = [
        ("compression.type", "zstd"),
        ("max.message.bytes", "2000"),
        ("message.format.version", "3.0-IV1"),
        ("min.insync.replicas", "1"),
        ("segment.ms", "3600000"),
        ("retention.ms", "86400000"),
        ("unclean.leader.election.enable", "false"),
        ("message.timestamp.type", "CreateTime"),
        ("flush.messages", "10000"),
        ("preallocate", "true"),
        ("max.compaction.lag.ms", "100000"),
        ("leader.replication.throttled.replicas", "*"),
    ];
    assert_eq!(create(&mut c, "kc", &standard), 0);
    let s = topic_settings(&mut c, "kc");
    for (key, value) in standard {
        if key == "message.format.version" {
            assert!(!s.contains_key(key), "removed in Kafka 4: accepted, not reported");
        } else {
            assert_eq!(s[key], (value.to_string(), 1), "{key}");
        }
    }
    assert_eq!(s["segment.jitter.ms"], ("0".into(), 5), "unset: Kafka's default");
    // Refused: unknown names and bad values, at creation and in both alter calls.
    assert_eq!(create(&mut c, "bad1", &[("no.such.config", "1")]), 40);
    assert_eq!(create(&mut c, "bad2", &[("compression.type", "brotli")]), 40);
    assert_eq!(create(&mut c, "bad3", &[("min.insync.replicas", "0")]), 40);
    assert_eq!(create(&mut c, "bad4", &[("preallocate", "maybe")]), 40);
    let (set, delete, append) = (0i8, 1i8, 2i8);
    assert_eq!(incremental_alter(&mut c, 2, "kc", &[(set, "segment.ms", Some("soon"))], false), 40);
    assert_eq!(incremental_alter(&mut c, 2, "kc", &[(set, "no.such.config", Some("1"))], false), 40);
    // IncrementalAlterConfigs: SET, DELETE, APPEND on a list.
    let ops = [
        (set, "segment.ms", Some("7200000")),
        (set, "compression.type", Some("lz4")),
        (delete, "preallocate", None),
        (append, "leader.replication.throttled.replicas", Some("0:0")),
    ];
    assert_eq!(incremental_alter(&mut c, 2, "kc", &ops, false), 0);
    let s = topic_settings(&mut c, "kc");
    assert_eq!(s["segment.ms"], ("7200000".into(), 1));
    assert_eq!(s["compression.type"], ("lz4".into(), 1));
    assert_eq!(s["preallocate"], ("false".into(), 5));
    assert_eq!(s["leader.replication.throttled.replicas"].0, "*,0:0");
    // max.message.bytes applies: 2000 bytes, so a 3000-byte value is MESSAGE_TOO_LARGE.
    assert_eq!(produce(&mut c, 9, "kc", 0, batch(&[&[1u8; 3000]])).0, 10);
    assert_eq!(produce(&mut c, 9, "kc", 0, batch(&[&[1u8; 100]])), (0, 0));
    // AlterConfigs (whole set) with standard names.
    let mut res = AlterConfigsResource::default();
    res.resource_type = 2;
    res.resource_name = StrBytes::from_static_str("kc");
    for (key, value) in [
        ("min.insync.replicas", "2"),
        ("message.timestamp.type", "LogAppendTime"),
        ("max.message.bytes", "5000"),
    ] {
        let mut a = AlterableConfig::default();
        a.name = StrBytes::from_string(key.to_string());
        a.value = Some(StrBytes::from_string(value.to_string()));
        res.configs.push(a);
    }
    let mut r = AlterConfigsRequest::default();
    r.resources = vec![res.clone()];
    let resp: AlterConfigsResponse = c.call(ApiKey::AlterConfigs, 2, &r);
    assert_eq!(resp.responses[0].error_code, 0, "{:?}", resp.responses[0].error_message);
    let mut bad = res;
    let mut a = AlterableConfig::default();
    a.name = StrBytes::from_static_str("no.such.config");
    a.value = Some(StrBytes::from_static_str("1"));
    bad.configs.push(a);
    r.resources = vec![bad];
    let resp: AlterConfigsResponse = c.call(ApiKey::AlterConfigs, 2, &r);
    assert_eq!(resp.responses[0].error_code, 40);
    assert_eq!(produce(&mut c, 9, "kc", 0, batch(&[&[1u8; 3000]])), (0, 1), "max.message.bytes now 5000");
    // Stored: the same after a restart.
    drop(c);
    k.restart();
    let mut c = k.client();
    let s = topic_settings(&mut c, "kc");
    assert_eq!(s["min.insync.replicas"], ("2".into(), 1));
    assert_eq!(s["message.timestamp.type"], ("LogAppendTime".into(), 1));
    assert_eq!(s["max.message.bytes"], ("5000".into(), 1));
    assert_eq!(s["segment.ms"].1, 5, "AlterConfigs replaced the whole set");
}

/// OffsetCommit's leader epoch is kept with the offset: OffsetFetch returns it, also after a
/// restart (the offsets log stores it).
#[test]
fn committed_offsets_keep_their_leader_epoch() {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    let mut k = Kaka::start("epoch", &[]);
    let mut c = k.client();
    assert_eq!(create(&mut c, "ep", &[]), 0);
    let mut t = OffsetCommitRequestTopic::default();
    t.name = tname("ep");
    let mut x = OffsetCommitRequestPartition::default();
    x.partition_index = 0;
    x.committed_offset = 42;
    x.committed_leader_epoch = 1;
    t.partitions.push(x);
    let mut r = OffsetCommitRequest::default();
    r.group_id = GroupId(StrBytes::from_static_str("g"));
    r.generation_id_or_member_epoch = -1;
    r.topics = vec![t];
    let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &r);
    assert_eq!(resp.topics[0].partitions[0].error_code, 0);
    let fetch_epoch = |c: &mut Raw| {
        let mut t = OffsetFetchRequestTopic::default();
        t.name = tname("ep");
        t.partition_indexes = vec![0];
        let mut r = OffsetFetchRequest::default();
        r.group_id = GroupId(StrBytes::from_static_str("g"));
        r.topics = Some(vec![t]);
        let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 7, &r);
        let p = &resp.topics[0].partitions[0];
        (p.committed_offset, p.committed_leader_epoch)
    };
    assert_eq!(fetch_epoch(&mut c), (42, 1));
    drop(c);
    k.restart();
    let mut c = k.client();
    assert_eq!(fetch_epoch(&mut c), (42, 1), "after a restart");
}

/// A transactional batch of `values` from producer (pid, epoch) at sequence `seq`.
fn txn_batch(values: &[&[u8]], pid: i64, epoch: i16, seq: i32) -> Bytes {
    use kafka_protocol::records::{Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: seq + i as i32,
            timestamp: ts_base() + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::copy_from_slice(v)),
            headers: Default::default(),
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    let opts = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, &records, &opts).unwrap();
    buf.freeze()
}

fn txn_produce(c: &mut Raw, tid: &str, topic: &str, batch: Bytes) -> i16 {
    let mut pd = PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(batch);
    let mut td = TopicProduceData::default();
    td.name = tname(topic);
    td.partition_data = vec![pd];
    let mut r = ProduceRequest::default();
    r.transactional_id = Some(TransactionalId(StrBytes::from_string(tid.to_string())));
    r.acks = -1;
    r.timeout_ms = 10_000;
    r.topic_data = vec![td];
    let resp: ProduceResponse = c.call(ApiKey::Produce, 9, &r);
    resp.responses[0].partition_responses[0].error_code
}

fn init_pid(c: &mut Raw, tid: &str, timeout_ms: i32) -> (i16, i64, i16) {
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = Some(TransactionalId(StrBytes::from_string(tid.to_string())));
    r.transaction_timeout_ms = timeout_ms;
    r.producer_id = ProducerId(-1);
    r.producer_epoch = -1;
    let resp: InitProducerIdResponse = c.call(ApiKey::InitProducerId, 4, &r);
    (resp.error_code, resp.producer_id.0, resp.producer_epoch)
}

fn add_partition(c: &mut Raw, tid: &str, pid: i64, epoch: i16, topic: &str, p: i32) -> i16 {
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    let mut t = AddPartitionsToTxnTopic::default();
    t.name = tname(topic);
    t.partitions = vec![p];
    let mut r = AddPartitionsToTxnRequest::default();
    r.v3_and_below_transactional_id = TransactionalId(StrBytes::from_string(tid.to_string()));
    r.v3_and_below_producer_id = ProducerId(pid);
    r.v3_and_below_producer_epoch = epoch;
    r.v3_and_below_topics = vec![t];
    let resp: AddPartitionsToTxnResponse = c.call(ApiKey::AddPartitionsToTxn, 3, &r);
    resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

fn end_txn(c: &mut Raw, version: i16, tid: &str, pid: i64, epoch: i16, commit: bool) -> i16 {
    let mut r = EndTxnRequest::default();
    r.transactional_id = TransactionalId(StrBytes::from_string(tid.to_string()));
    r.producer_id = ProducerId(pid);
    r.producer_epoch = epoch;
    r.committed = commit;
    let resp: EndTxnResponse = c.call(ApiKey::EndTxn, version, &r);
    resp.error_code
}

/// Fetch v12 with an isolation level: (error, hw, last stable offset, aborted list, records).
fn fetch_isolated(c: &mut Raw, topic: &str, committed: bool) -> (i16, i64, i64, Vec<(i64, i64)>, Bytes) {
    let mut r =
        fetch_request(Some(topic), uuid::Uuid::nil(), vec![fetch_partition(0, 0, 1 << 20)], 0, 1 << 20);
    r.isolation_level = committed as i8;
    let resp: FetchResponse = c.call(ApiKey::Fetch, 12, &r);
    let p = &resp.responses[0].partitions[0];
    let aborted = p
        .aborted_transactions
        .as_ref()
        .map(|a| a.iter().map(|x| (x.producer_id.0, x.first_offset)).collect())
        .unwrap_or_default();
    (p.error_code, p.high_watermark, p.last_stable_offset, aborted, p.records.clone().unwrap_or_default())
}

/// The transaction protocol as Kafka answers it: coordinator lookup, timeouts, produce
/// verification, the last stable offset, fencing codes per version, the aborted list.
#[test]
fn transaction_protocol_codes_lso_and_aborted_list() {
    let k = Kaka::start("txn-wire", &[]);
    let mut c = k.client();
    assert_eq!(create(&mut c, "t", &[]), 0);
    let mut fc = FindCoordinatorRequest::default();
    fc.key = StrBytes::from_static_str("w");
    fc.key_type = 1;
    let r: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 3, &fc);
    assert_eq!((r.error_code, r.node_id.0, r.port), (0, 0, k.port as i32));

    assert_eq!(init_pid(&mut c, "w", 1_000_000).0, 50, "INVALID_TRANSACTION_TIMEOUT");
    let (err, pid, epoch) = init_pid(&mut c, "w", 60_000);
    assert_eq!((err, epoch), (0, 0));
    // Not added to a transaction yet: INVALID_TXN_STATE, nothing stored.
    assert_eq!(txn_produce(&mut c, "w", "t", txn_batch(&[b"x"], pid, 0, 0)), 48);
    assert_eq!(add_partition(&mut c, "w", pid, 0, "nope", 0), 3, "unknown topic");
    assert_eq!(add_partition(&mut c, "w", pid + 1, 0, "t", 0), 49, "INVALID_PRODUCER_ID_MAPPING");
    assert_eq!(add_partition(&mut c, "w", pid, 0, "t", 0), 0);
    assert_eq!(txn_produce(&mut c, "w", "t", txn_batch(&[b"a", b"b"], pid, 0, 0)), 0);
    // Open: read_committed sees nothing, the LSO stays at the transaction's first offset.
    let (err, hw, lso, aborted, recs) = fetch_isolated(&mut c, "t", true);
    assert_eq!((err, hw, lso, aborted, recs.len()), (0, 2, 0, vec![], 0));
    assert!(!fetch_isolated(&mut c, "t", false).4.is_empty(), "read_uncommitted sees it");

    // A new producer for the same id aborts the open transaction and fences the old epoch.
    let (err, pid2, epoch2) = init_pid(&mut c, "w", 60_000);
    assert_eq!((err, pid2), (0, pid));
    assert!(epoch2 > 0);
    assert_eq!(end_txn(&mut c, 3, "w", pid, 0, true), 90, "PRODUCER_FENCED");
    assert_eq!(end_txn(&mut c, 1, "w", pid, 0, true), 47, "INVALID_PRODUCER_EPOCH before v2");
    assert_eq!(txn_produce(&mut c, "w", "t", txn_batch(&[b"z"], pid, 0, 2)), 47, "zombie write");
    assert_eq!(end_txn(&mut c, 3, "w", pid, epoch2, true), 48, "no transaction going on");
    // The abort: data at 0-1, its marker at 2; read_committed gets the records and the
    // aborted list (the client drops them), the LSO is past the marker.
    let (err, hw, lso, aborted, recs) = fetch_isolated(&mut c, "t", true);
    assert_eq!((err, hw, lso, aborted), (0, 3, 3, vec![(pid, 0)]));
    assert_eq!(batch_offsets(&recs), vec![(0, 1), (2, 2)]);
    // read_committed ListOffsets ends at the LSO too.
    assert_eq!(list_offset(&mut c, "t", -1).1, 3);

    // A committed transaction: no aborted entry for it.
    assert_eq!(add_partition(&mut c, "w", pid, epoch2, "t", 0), 0);
    assert_eq!(txn_produce(&mut c, "w", "t", txn_batch(&[b"c"], pid, epoch2, 0)), 0);
    assert_eq!(end_txn(&mut c, 3, "w", pid, epoch2, true), 0);
    assert_eq!(end_txn(&mut c, 3, "w", pid, epoch2, true), 0, "a retried EndTxn succeeds");
    let (_, hw, lso, aborted, _) = fetch_isolated(&mut c, "t", true);
    assert_eq!((hw, lso, aborted), (5, 5, vec![(pid, 0)]));

    // ListTransactions and DescribeTransactions (as kafka-transactions.sh uses them).
    assert_eq!(add_partition(&mut c, "w", pid, epoch2, "t", 0), 0);
    let (_, other, _) = init_pid(&mut c, "idle", 5_000);
    let mut lt = ListTransactionsRequest::default();
    lt.duration_filter = -1;
    let r: ListTransactionsResponse = c.call(ApiKey::ListTransactions, 1, &lt);
    let listed: Vec<(String, i64, String)> = r
        .transaction_states
        .iter()
        .map(|t| (t.transactional_id.0.to_string(), t.producer_id.0, t.transaction_state.to_string()))
        .collect();
    assert_eq!(listed, vec![("idle".into(), other, "Empty".into()), ("w".into(), pid, "Ongoing".into())]);
    lt.state_filters = vec![StrBytes::from_static_str("Ongoing"), StrBytes::from_static_str("Bogus")];
    let r: ListTransactionsResponse = c.call(ApiKey::ListTransactions, 1, &lt);
    assert_eq!(r.transaction_states.len(), 1);
    assert_eq!(r.unknown_state_filters, vec![StrBytes::from_static_str("Bogus")]);
    let mut dt = DescribeTransactionsRequest::default();
    dt.transactional_ids = vec![
        TransactionalId(StrBytes::from_static_str("w")),
        TransactionalId(StrBytes::from_static_str("missing")),
    ];
    let r: DescribeTransactionsResponse = c.call(ApiKey::DescribeTransactions, 0, &dt);
    let w = &r.transaction_states[0];
    assert_eq!(
        (w.error_code, w.transaction_state.as_str(), w.producer_id.0, w.producer_epoch),
        (0, "Ongoing", pid, epoch2)
    );
    assert_eq!(w.transaction_timeout_ms, 60_000);
    assert!(w.transaction_start_time_ms > 0);
    assert_eq!(w.topics.len(), 1);
    assert_eq!((w.topics[0].topic.0.as_str(), w.topics[0].partitions.clone()), ("t", vec![0]));
    assert_eq!(r.transaction_states[1].error_code, 105, "TRANSACTIONAL_ID_NOT_FOUND");
}

/// The harness waits for the broker's own listener, not for anything that answers on the
/// port: a socket of another process on a port is not taken for the broker's.
#[test]
fn harness_tells_its_broker_from_another_listener() {
    let k = Kaka::start("harness", &[]);
    let pid = k.pid().expect("running");
    assert!(listens_on(pid, k.port), "the broker's listener was not recognised");
    let stranger = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = stranger.local_addr().unwrap().port();
    assert!(listens_on(std::process::id(), port), "the test's own listener was not recognised");
    assert!(!listens_on(pid, port), "another process's listener was taken for the broker's");
}
