//! kaka-bench: drives a Kafka-protocol broker with librdkafka (rdkafka crate) and a raw
//! protocol client, and prints Markdown result lines.
//!
//! Build and run (see run.sh):
//!   cargo build --release -p kaka --bins --examples
//!   target/release/examples/kaka-bench --kaka target/release/kaka [--scenario all]
//!
//! Scenarios (each starts its own kaka on a free port with a temp dir unless --bootstrap is
//! given, in which case the broker at that address is used, its topics are created up front,
//! and the restart-based scenarios are skipped; --name labels it in the table):
//!   produce  throughput and per-record ack latency, idempotent acks=all, 64 B and 1 KiB
//!   sync     one record at a time (each acked before the next): librdkafka and raw wire
//!   consume  read everything from offset 0
//!   cold     150,000 x 1 KB records, broker restarted, page cache dropped for the segment,
//!            one 64 MiB Fetch; latency of a produce to another topic issued during it
//!   crash    SIGKILL during an acks=all flood, restart, verify every acked record (N rounds)

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

// ------------------------------------------------------------------------------ broker
struct Broker {
    bin: Option<PathBuf>,
    dir: PathBuf,
    addr: String,
    extra: Vec<String>,
    child: Option<Child>,
}

impl Broker {
    fn start(bin: &std::path::Path, tag: &str, extra: &[&str]) -> Broker {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = std::env::temp_dir().join(format!("kaka-bench-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut b = Broker {
            bin: Some(bin.to_path_buf()),
            dir,
            addr: format!("127.0.0.1:{port}"),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            child: None,
        };
        b.spawn();
        b
    }

    fn external(addr: &str) -> Broker {
        Broker { bin: None, dir: PathBuf::new(), addr: addr.to_string(), extra: vec![], child: None }
    }

    fn spawn(&mut self) {
        let Some(bin) = &self.bin else { return };
        let log = std::fs::File::create(self.dir.with_extension("log")).unwrap();
        self.child = Some(
            Command::new(bin)
                .arg("--dir")
                .arg(&self.dir)
                .arg("--listen")
                .arg(&self.addr)
                .args(&self.extra)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start kaka"),
        );
        let t = Instant::now();
        while TcpStream::connect(&self.addr).is_err() {
            assert!(t.elapsed() < Duration::from_secs(60), "kaka did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
        if self.bin.is_some() {
            let _ = std::fs::remove_dir_all(&self.dir);
            let _ = std::fs::remove_file(self.dir.with_extension("log"));
        }
    }
}

// ------------------------------------------------------------------------------ clients
#[derive(Default)]
struct Acks {
    got: Mutex<Vec<(usize, Instant, bool)>>,
}
impl ClientContext for Acks {}
impl ProducerContext for Acks {
    type DeliveryOpaque = usize;
    fn delivery(&self, r: &DeliveryResult<'_>, id: usize) {
        self.got.lock().unwrap().push((id, Instant::now(), r.is_ok()));
    }
}

fn producer(addr: &str, extra: &[(&str, &str)]) -> BaseProducer<Acks> {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", addr).set("enable.idempotence", "true").set("acks", "all");
    for (k, v) in extra {
        c.set(*k, *v);
    }
    c.create_with_context(Acks::default()).expect("producer")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn pct(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0 // recorded in microseconds
}

/// Produces `n` records of `size` bytes as fast as librdkafka accepts them (default batching),
/// returns (records/s, p50 ms, p99 ms) of send-to-ack latency.
/// Produces `n` records of `size` bytes, as fast as librdkafka accepts them (`pace` None) or
/// at `pace` records/s; returns (records/s, p50 ms, p99 ms) of send-to-ack latency.
fn produce_run(addr: &str, topic: &str, n: usize, size: usize, pace: Option<f64>) -> (f64, f64, f64) {
    let p = producer(addr, &[("queue.buffering.max.messages", "1000000")]);
    // Warm up outside the measurement: metadata, topic creation, producer id.
    p.send(BaseRecord::<(), _, _>::with_opaque_to(topic, 0).partition(0).payload("warm-up"))
        .map_err(|(e, _)| e)
        .unwrap();
    p.flush(Duration::from_secs(30)).unwrap();
    p.context().got.lock().unwrap().clear();
    let payload = vec![b'x'; size];
    let mut sent = Vec::with_capacity(n);
    let start = Instant::now();
    for i in 0..n {
        if let Some(rate) = pace {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            while Instant::now() < due {
                p.poll(Duration::ZERO);
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        loop {
            match p.send(BaseRecord::<(), _, _>::with_opaque_to(topic, i).partition(0).payload(&payload[..]))
            {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(_), _)) => {
                    p.poll(Duration::from_millis(1));
                }
                Err((e, _)) => panic!("send: {e}"),
            }
        }
        sent.push(Instant::now());
        if i % 1024 == 0 {
            p.poll(Duration::ZERO);
        }
    }
    p.flush(Duration::from_secs(120)).expect("flush");
    let elapsed = start.elapsed();
    let got = std::mem::take(&mut *p.context().got.lock().unwrap());
    assert_eq!(got.len(), n);
    let mut h = Histogram::<u64>::new(3).unwrap();
    for (id, at, ok) in &got {
        assert!(ok, "delivery failed");
        h.record(at.duration_since(sent[*id]).as_micros() as u64).unwrap();
    }
    (n as f64 / elapsed.as_secs_f64(), pct(&h, 0.5), pct(&h, 0.99))
}

fn sync_librdkafka(addr: &str, n: usize) -> (f64, f64) {
    let p = producer(addr, &[("linger.ms", "0")]);
    let mut h = Histogram::<u64>::new(3).unwrap();
    for i in 0..n + 50 {
        let t = Instant::now();
        p.send(
            BaseRecord::<(), _, _>::with_opaque_to("sync-rd", i)
                .partition(0)
                .payload("0123456789abcdef0123456789abcdef"),
        )
        .map_err(|(e, _)| e)
        .unwrap();
        // Spin on poll(0) until the delivery report is in: rust-rdkafka's flush() and
        // poll(d > 0) sleep in coarse steps, which would measure the client, not the broker.
        while p.context().got.lock().unwrap().len() <= i {
            p.poll(Duration::ZERO);
            std::thread::yield_now();
        }
        if i >= 50 {
            h.record(t.elapsed().as_micros() as u64).unwrap();
        }
    }
    (pct(&h, 0.5), pct(&h, 0.99))
}

// ------------------------------------------------------------------------------ raw wire
struct Raw {
    s: TcpStream,
    cid: i32,
}

impl Raw {
    fn connect(addr: &str) -> Raw {
        let s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        Raw { s, cid: 0 }
    }
    fn call<R: Encodable + HeaderVersion, Resp: Decodable>(&mut self, key: ApiKey, v: i16, r: &R) -> Resp {
        self.try_call(key, v, r).unwrap()
    }
    /// Like `call`, but a response that does not decode is an error, not a panic (another
    /// broker may answer in a shape the protocol crate rejects).
    fn try_call<R: Encodable + HeaderVersion, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        v: i16,
        r: &R,
    ) -> Result<Resp, String> {
        self.cid += 1;
        let mut h = RequestHeader::default();
        h.request_api_key = key as i16;
        h.request_api_version = v;
        h.correlation_id = self.cid;
        h.client_id = Some(StrBytes::from_static_str("kaka-bench"));
        let mut b = BytesMut::new();
        b.extend_from_slice(&[0u8; 4]);
        h.encode(&mut b, key.request_header_version(v)).unwrap();
        r.encode(&mut b, v).unwrap();
        let len = (b.len() - 4) as i32;
        b[..4].copy_from_slice(&len.to_be_bytes());
        self.s.write_all(&b).unwrap();
        let mut n = [0u8; 4];
        self.s.read_exact(&mut n).unwrap();
        let mut body = vec![0u8; i32::from_be_bytes(n) as usize];
        self.s.read_exact(&mut body).unwrap();
        let mut body = Bytes::from(body);
        ResponseHeader::decode(&mut body, key.response_header_version(v)).map_err(|e| e.to_string())?;
        Resp::decode(&mut body, v).map_err(|e| e.to_string())
    }
}

fn one_batch(value: &[u8]) -> Bytes {
    let r = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            as i64,
        key: None,
        value: Some(Bytes::copy_from_slice(value)),
        headers: Default::default(),
    };
    let mut b = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut b,
        [&r],
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .unwrap();
    b.freeze()
}

fn raw_produce(c: &mut Raw, topic: &str, batch: Bytes) -> i16 {
    let mut pd = PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(batch);
    let mut td = TopicProduceData::default();
    td.name = TopicName(StrBytes::from_string(topic.to_string()));
    td.partition_data = vec![pd];
    let mut r = ProduceRequest::default();
    r.acks = -1;
    r.timeout_ms = 30_000;
    r.topic_data = vec![td];
    let resp: ProduceResponse = c.call(ApiKey::Produce, 9, &r);
    resp.responses[0].partition_responses[0].error_code
}

/// Creates single-partition topics (an existing one is fine): for brokers that do not create
/// topics on first use.
fn ensure_topics(addr: &str, names: &[&str]) {
    let mut c = Raw::connect(addr);
    let mut r = CreateTopicsRequest::default();
    r.timeout_ms = 10_000;
    r.topics = names
        .iter()
        .map(|n| {
            let mut t = create_topics_request::CreatableTopic::default();
            t.name = TopicName(StrBytes::from_string(n.to_string()));
            t.num_partitions = 1;
            t.replication_factor = 1;
            t
        })
        .collect();
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 4, &r);
    for t in resp.topics {
        assert!(matches!(t.error_code, 0 | 36), "create topic {:?}: error {}", t.name, t.error_code);
    }
}

fn sync_raw(addr: &str, n: usize) -> (f64, f64) {
    let mut c = Raw::connect(addr);
    let batch = one_batch(b"0123456789abcdef0123456789abcdef");
    let mut h = Histogram::<u64>::new(3).unwrap();
    for i in 0..n + 50 {
        let t = Instant::now();
        assert_eq!(raw_produce(&mut c, "sync-raw", batch.clone()), 0);
        if i >= 50 {
            h.record(t.elapsed().as_micros() as u64).unwrap();
        }
    }
    (pct(&h, 0.5), pct(&h, 0.99))
}

fn raw_fetch(c: &mut Raw, topic: &str, offset: i64, max: i32) -> (i16, usize) {
    let mut fp = FetchPartition::default();
    fp.partition = 0;
    fp.fetch_offset = offset;
    fp.partition_max_bytes = max;
    let mut ft = FetchTopic::default();
    ft.topic = TopicName(StrBytes::from_string(topic.to_string()));
    ft.partitions = vec![fp];
    let mut r = FetchRequest::default();
    r.max_wait_ms = 500;
    r.min_bytes = 1;
    r.max_bytes = max;
    r.session_epoch = -1;
    r.topics = vec![ft];
    let resp: FetchResponse = c.call(ApiKey::Fetch, 12, &r);
    let p = &resp.responses[0].partitions[0];
    (p.error_code, p.records.as_ref().map(|b| b.len()).unwrap_or(0))
}

/// Reads the topic with librdkafka's default fetch sizes (1 MiB per partition): larger
/// partition fetches made librdkafka's per-record delivery about half as fast here, against
/// kaka and against other brokers alike (the client parses a whole response before handing
/// out its records).
fn consume_all(addr: &str, topic: &str, n: usize) -> f64 {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "bench")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning).unwrap();
    c.assign(&tpl).unwrap();
    // The clock starts at the first record, after assignment and the offset lookup.
    let mut start = Instant::now();
    let mut got = 0;
    while got < n {
        if let Some(Ok(_)) = c.poll(Duration::from_millis(100)) {
            if got == 0 {
                start = Instant::now();
            }
            got += 1;
        }
        assert!(start.elapsed() < Duration::from_secs(300), "consume stalled at {got}");
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Reads the topic from offset 0 with raw 8 MiB fetches; counts records from batch headers.
fn consume_raw(addr: &str, topic: &str, n: usize) -> Result<(f64, f64), String> {
    let mut c = Raw::connect(addr);
    let (mut off, mut recs, mut bytes) = (0i64, 0usize, 0usize);
    let start = Instant::now();
    while recs < n {
        let mut fp = FetchPartition::default();
        fp.partition = 0;
        fp.fetch_offset = off;
        fp.partition_max_bytes = 8 << 20;
        let mut ft = FetchTopic::default();
        ft.topic = TopicName(StrBytes::from_string(topic.to_string()));
        ft.partitions = vec![fp];
        let mut r = FetchRequest::default();
        r.max_wait_ms = 500;
        r.min_bytes = 1;
        r.max_bytes = 8 << 20;
        r.session_epoch = -1;
        r.topics = vec![ft];
        let resp: FetchResponse =
            c.try_call(ApiKey::Fetch, 12, &r).map_err(|e| format!("Fetch v12 answer: {e}"))?;
        let data = resp.responses[0].partitions[0].records.clone().unwrap_or_default();
        assert!(!data.is_empty(), "no data at offset {off}");
        bytes += data.len();
        let mut b = &data[..];
        while b.len() >= 61 {
            let len = i32::from_be_bytes(b[8..12].try_into().unwrap()) as usize + 12;
            if len > b.len() {
                break; // a partial batch at the end of the answer (Kafka sends them; kaka does not)
            }
            let base = i64::from_be_bytes(b[0..8].try_into().unwrap());
            let last = base + i32::from_be_bytes(b[23..27].try_into().unwrap()) as i64;
            if last >= off {
                recs += i32::from_be_bytes(b[57..61].try_into().unwrap()) as usize;
                off = last + 1;
            }
            b = &b[len..];
        }
    }
    let s = start.elapsed().as_secs_f64();
    Ok((recs as f64 / s, bytes as f64 / s / 1e6))
}

/// Times `kcat -C -e` reading the topic from the beginning (None if kcat is missing).
fn consume_kcat(addr: &str, topic: &str, n: usize) -> Option<f64> {
    let start = Instant::now();
    let mut child = Command::new("kcat")
        .args(["-b", addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-c"])
        .arg(n.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut out = child.stdout.take()?;
    let mut buf = vec![0u8; 1 << 20];
    let mut lines = 0usize;
    loop {
        let k = out.read(&mut buf).ok()?;
        if k == 0 {
            break;
        }
        lines += buf[..k].iter().filter(|&&c| c == b'\n').count();
    }
    child.wait().ok()?;
    (lines >= n).then(|| n as f64 / start.elapsed().as_secs_f64())
}

/// Drops the page cache for every file under `dir` (posix_fadvise DONTNEED), so the next
/// read really goes to the disk.
fn drop_cache(dir: &std::path::Path) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            drop_cache(&p);
        } else if let Ok(f) = std::fs::File::open(&p) {
            use std::os::fd::AsRawFd;
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    }
}

// ------------------------------------------------------------------------------ scenarios
fn crash_rounds(b: &mut Broker, rounds: usize) -> (usize, usize) {
    let mut acked: Vec<u64> = Vec::new();
    let mut next = 0u64;
    let mut passed = 0;
    for round in 0..rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let p = Arc::new(producer(&b.addr, &[("message.timeout.ms", "5000"), ("linger.ms", "1")]));
        let sender = {
            let (p, stop, start) = (p.clone(), stop.clone(), next);
            std::thread::spawn(move || {
                let mut i = start;
                while !stop.load(Ordering::Relaxed) {
                    let v = i.to_be_bytes();
                    if p.send(
                        BaseRecord::<(), _, _>::with_opaque_to("crash", i as usize)
                            .partition(0)
                            .payload(&v[..]),
                    )
                    .is_ok()
                    {
                        i += 1;
                    } else {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    p.poll(Duration::ZERO);
                }
                i
            })
        };
        let t = Instant::now();
        while p.context().got.lock().unwrap().iter().all(|g| !g.2) && t.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(20 + (round as u64 * 37) % 300));
        b.kill();
        stop.store(true, Ordering::Relaxed);
        next = sender.join().unwrap();
        let until = Instant::now() + Duration::from_millis(200);
        while Instant::now() < until {
            p.poll(Duration::from_millis(10));
        }
        let round_acked: Vec<u64> =
            p.context().got.lock().unwrap().iter().filter(|g| g.2).map(|g| g.0 as u64).collect();
        acked.extend(round_acked);
        drop(p);
        b.spawn();
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &b.addr)
            .set("group.id", "crash-check")
            .set("enable.partition.eof", "true")
            .set("enable.auto.commit", "false")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("crash", 0, Offset::Beginning).unwrap();
        c.assign(&tpl).unwrap();
        let mut seqs = Vec::new();
        loop {
            match c.poll(Duration::from_millis(200)) {
                Some(Ok(m)) => seqs.push(u64::from_be_bytes(m.payload().unwrap().try_into().unwrap())),
                Some(Err(KafkaError::PartitionEOF(_))) => break,
                _ => {}
            }
        }
        let set: HashSet<u64> = seqs.iter().copied().collect();
        let ok = set.len() == seqs.len()
            && seqs.windows(2).all(|w| w[0] < w[1])
            && acked.iter().all(|s| set.contains(s));
        if ok {
            passed += 1;
        } else {
            eprintln!("crash round {round}: FAILED (stored {}, acked {})", seqs.len(), acked.len());
        }
    }
    (passed, acked.len())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let get = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let scenario = get("--scenario").unwrap_or_else(|| "all".into());
    let records: usize = get("--records").map(|s| s.parse().unwrap()).unwrap_or(1_000_000);
    let rounds: usize = get("--crash-rounds").map(|s| s.parse().unwrap()).unwrap_or(20);
    let bootstrap = get("--bootstrap");
    let bin = PathBuf::from(get("--kaka").unwrap_or_else(|| "target/release/kaka".into()));
    // --broker-arg X (repeatable): extra flag for every kaka the driver starts.
    let broker_args: Vec<String> =
        args.windows(2).filter(|w| w[0] == "--broker-arg").map(|w| w[1].clone()).collect();
    let want = |s: &str| scenario == "all" || scenario.split(',').any(|x| x == s);
    let start = |tag: &str| match &bootstrap {
        Some(a) => Broker::external(a),
        None => Broker::start(&bin, tag, &broker_args.iter().map(|s| s.as_str()).collect::<Vec<_>>()),
    };
    // --name LABEL: how the broker is called in the table (default: kaka, or the address).
    let name = get("--name").unwrap_or_else(|| bootstrap.clone().unwrap_or_else(|| "kaka".into()));
    let name = name.as_str();
    if let Some(addr) = &bootstrap {
        ensure_topics(addr, &["p64", "p1024", "paced64", "paced1024", "sync-raw", "sync-rd"]);
    }
    println!("| broker | scenario | result |");
    println!("| --- | --- | --- |");
    if want("produce") {
        let b = start("produce");
        for size in [64usize, 1024] {
            let n = if size == 64 { records } else { records / 4 };
            let (rate, p50, p99) = produce_run(&b.addr, &format!("p{size}"), n, size, None);
            println!("| {name} | produce {n} x {size} B, idempotent acks=all, default batching, flood | {rate:.0} records/s ({:.1} MB/s), ack latency p50 {p50:.2} ms, p99 {p99:.2} ms (mostly queueing in the client) |", rate * size as f64 / 1e6);
        }
        for (size, pace) in [(64usize, 100_000.0), (1024, 20_000.0)] {
            let n = (pace * 3.0) as usize;
            let (_, p50, p99) = produce_run(&b.addr, &format!("paced{size}"), n, size, Some(pace));
            println!("| {name} | produce {size} B at a steady {pace:.0} records/s for 3 s, idempotent acks=all, default batching (linger.ms 5) | ack latency p50 {p50:.2} ms, p99 {p99:.2} ms |");
        }
        if want("consume") {
            match consume_raw(&b.addr, "p64", records) {
                Ok((rate, mbs)) => println!("| {name} | consume {records} x 64 B from offset 0, raw Fetch v12 (8 MiB per fetch) | {rate:.0} records/s ({mbs:.0} MB/s) |"),
                Err(e) => println!("| {name} | consume {records} x 64 B from offset 0, raw Fetch v12 (8 MiB per fetch) | failed: {e} |"),
            }
            match consume_kcat(&b.addr, "p64", records) {
                Some(rate) => println!("| {name} | consume {records} x 64 B from offset 0, kcat -C -e (librdkafka 2.0.2), incl. startup | {rate:.0} records/s |"),
                None => println!("| {name} | consume {records} x 64 B from offset 0, kcat -C -e (librdkafka 2.0.2), incl. startup | failed: kcat did not read the records |"),
            }
            let rate = consume_all(&b.addr, "p64", records);
            println!("| {name} | consume {records} x 64 B from offset 0, rust-rdkafka BaseConsumer::poll per record, default fetch sizes | {rate:.0} records/s |");
        }
    }
    if want("disk") || want("sync") {
        // Baselines: what one 64 B write + fdatasync costs on this disk right now, appending
        // (the file grows, so ext4 commits its journal on every sync) and into space allocated
        // beforehand (as kaka's active segment is: the sync flushes data only).
        for prealloc in [false, true] {
            let path = std::env::temp_dir().join(format!("kaka-bench-fsync-{}", std::process::id()));
            let f = std::fs::File::create(&path).unwrap();
            if prealloc {
                use std::os::fd::AsRawFd;
                // SAFETY: the descriptor is open for the duration of the call.
                assert_eq!(unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, 1 << 20) }, 0);
            }
            let mut h = Histogram::<u64>::new(3).unwrap();
            for i in 0..2000u64 {
                std::os::unix::fs::FileExt::write_all_at(&f, &[7u8; 64], i * 64).unwrap();
                let t = Instant::now();
                f.sync_data().unwrap();
                h.record(t.elapsed().as_micros() as u64).unwrap();
            }
            let _ = std::fs::remove_file(&path);
            let how = if prealloc { "write 64 B into preallocated space" } else { "append 64 B" };
            println!("| (disk) | baseline: {how} + fdatasync, 2000 in a row, same file system | p50 {:.3} ms, p99 {:.3} ms |", pct(&h, 0.5), pct(&h, 0.99));
        }
    }
    if want("sync") {
        let b = start("sync");
        let n = 2000;
        let (p50, p99) = sync_raw(&b.addr, n);
        println!("| {name} | synchronous produce, raw Produce v9 acks=-1, one 32 B record, {n} in a row | p50 {p50:.3} ms, p99 {p99:.3} ms |");
        let (p50, p99) = sync_librdkafka(&b.addr, n);
        println!("| {name} | synchronous produce, librdkafka send+flush, linger.ms=0, {n} in a row | p50 {p50:.3} ms, p99 {p99:.3} ms |");
    }
    if want("cold") && bootstrap.is_none() {
        let mut extra = vec!["--segment-bytes", "67108864"];
        extra.extend(broker_args.iter().map(|s| s.as_str()));
        let mut b = Broker::start(&bin, "cold", &extra);
        let n = 150_000;
        let (rate, _, _) = produce_run(&b.addr, "cold", n, 1000, None);
        b.stop();
        b.spawn();
        let mut warm = Raw::connect(&b.addr);
        assert_eq!(raw_produce(&mut warm, "other", one_batch(b"warm-up")), 0);
        drop_cache(&b.dir.join("topics/cold"));
        // Produces to another topic, one after another (2 ms apart), for as long as the
        // fetch runs: every one of them is an acks=all produce waiting on its fdatasync while
        // the cold read keeps the disk busy.
        let addr = b.addr.clone();
        let fetching = Arc::new(AtomicBool::new(true));
        let flag = fetching.clone();
        let during = std::thread::spawn(move || {
            let mut c = Raw::connect(&addr);
            let mut lat = Vec::new();
            let t0 = Instant::now();
            while flag.load(Ordering::Acquire) {
                let t = Instant::now();
                assert_eq!(raw_produce(&mut c, "other", one_batch(b"during the cold fetch")), 0);
                lat.push(t.elapsed());
                if std::env::var_os("KAKA_BENCH_TRACE").is_some() {
                    eprintln!("produce at {:.1} ms: {:.2} ms", ms(t - t0), ms(t.elapsed()));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            lat
        });
        std::thread::sleep(Duration::from_millis(3));
        let mut c = Raw::connect(&b.addr);
        let t = Instant::now();
        let (err, bytes) = raw_fetch(&mut c, "cold", 0, 64 << 20);
        let fetch_time = t.elapsed();
        if std::env::var_os("KAKA_BENCH_TRACE").is_some() {
            eprintln!("fetch answered after {:.1} ms", ms(fetch_time));
        }
        fetching.store(false, Ordering::Release);
        let mut lat = during.join().unwrap();
        if std::env::var_os("KAKA_BENCH_TRACE").is_some() {
            eprintln!(
                "produce latencies in order (ms): {:?}",
                lat.iter().map(|d| (ms(*d) * 100.0).round() / 100.0).collect::<Vec<_>>()
            );
        }
        lat.sort();
        assert_eq!(err, 0);
        let (p50, max) = (lat[lat.len() / 2], lat[lat.len() - 1]);
        let within = lat.iter().filter(|d| **d <= Duration::from_millis(1)).count();
        println!("| {name} | cold read: {n} x 1 KB ({rate:.0} rec/s to load), restart, page cache dropped, one 64 MiB Fetch | {:.1} MiB in {:.3} s; {} produces to another topic during it: p50 {:.2} ms, max {:.2} ms, {within} within 1 ms |", bytes as f64 / (1 << 20) as f64, fetch_time.as_secs_f64(), lat.len(), ms(p50), ms(max));
    }
    if want("crash") && bootstrap.is_none() {
        let mut b = Broker::start(&bin, "crash", &[]);
        let (passed, acked) = crash_rounds(&mut b, rounds);
        println!("| {name} | crash test: SIGKILL during an acks=all idempotent flood, restart, verify | {passed}/{rounds} rounds passed, {acked} acked records all present once, in order |");
    }
}
