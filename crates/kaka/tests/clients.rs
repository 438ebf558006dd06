//! librdkafka (through the `rdkafka` crate, librdkafka 2.12) against the real `kaka` binary.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

/// (opaque id, Ok((partition, offset)) or the error)
type Delivery = (usize, Result<(i32, i64), KafkaError>);

#[derive(Default)]
struct Acks {
    got: Mutex<Vec<Delivery>>,
}
impl ClientContext for Acks {}
impl ProducerContext for Acks {
    type DeliveryOpaque = usize;
    fn delivery(&self, r: &DeliveryResult<'_>, id: usize) {
        let res = match r {
            Ok(m) => Ok((m.partition(), m.offset())),
            Err((e, _)) => Err(e.clone()),
        };
        self.got.lock().unwrap().push((id, res));
    }
}

fn producer(k: &Kaka, extra: &[(&str, &str)]) -> BaseProducer<Acks> {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", k.addr())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "2")
        .set("message.timeout.ms", "20000");
    for (a, b) in extra {
        c.set(*a, *b);
    }
    c.create_with_context(Acks::default()).expect("producer")
}

fn consumer(k: &Kaka, group: &str, extra: &[(&str, &str)]) -> BaseConsumer {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", k.addr())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "100");
    for (a, b) in extra {
        c.set(*a, *b);
    }
    c.create().expect("consumer")
}

/// Flushes and returns every delivery result, sorted by opaque id.
fn flush_all(p: &BaseProducer<Acks>, n: usize) -> Vec<Delivery> {
    p.flush(Duration::from_secs(30)).expect("flush");
    let got = std::mem::take(&mut *p.context().got.lock().unwrap());
    assert_eq!(got.len(), n, "every record reported");
    let mut got = got;
    got.sort_by_key(|g| g.0);
    got
}

/// Reads partition `p` of `topic` from `from` to its end: (offset, key, payload, headers).
type Msg = (i64, Option<Vec<u8>>, Option<Vec<u8>>, Vec<(String, Option<Vec<u8>>)>);
fn read_partition(c: &BaseConsumer, topic: &str, p: i32, from: Offset) -> Vec<Msg> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, p, from).unwrap();
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "timed out reading {topic}");
        match c.poll(Duration::from_millis(100)) {
            None => continue,
            Some(Err(KafkaError::PartitionEOF(_))) => break,
            Some(Err(e)) => panic!("consume error: {e}"),
            Some(Ok(m)) => {
                let hs = m
                    .headers()
                    .map(|h| h.iter().map(|x| (x.key.to_string(), x.value.map(|v| v.to_vec()))).collect())
                    .unwrap_or_default();
                out.push((m.offset(), m.key().map(|x| x.to_vec()), m.payload().map(|x| x.to_vec()), hs));
            }
        }
    }
    out
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

fn admin(k: &Kaka) -> AdminClient<DefaultClientContext> {
    ClientConfig::new().set("bootstrap.servers", k.addr()).create().expect("admin")
}

fn topic_names(k: &Kaka) -> Vec<String> {
    let c = consumer(k, "meta", &[]);
    let md = c.fetch_metadata(None, Duration::from_secs(10)).unwrap();
    md.topics().iter().map(|t| t.name().to_string()).collect()
}

#[test]
fn idempotent_producer_headers_binary_keys_and_assign_at_offset() {
    let k = Kaka::start("rd-idem", &[]);
    let p = producer(&k, &[]);
    let n = 200usize;
    for i in 0..n {
        let key = vec![i as u8, 0, 255, (i >> 8) as u8];
        let payload = format!("value-{i}");
        let headers = OwnedHeaders::new()
            .insert(Header { key: "idx", value: Some(i.to_string().as_bytes()) })
            .insert(Header { key: "bin", value: Some(&[0u8, 1, 2, 255][..]) })
            .insert(Header { key: "dup", value: Some(b"a".as_slice()) })
            .insert(Header { key: "dup", value: Some(b"b".as_slice()) })
            .insert(Header::<&[u8]> { key: "null", value: None });
        p.send(
            BaseRecord::with_opaque_to("idem", i).partition(0).key(&key).payload(&payload).headers(headers),
        )
        .map_err(|(e, _)| e)
        .unwrap();
        p.poll(Duration::ZERO);
    }
    let got = flush_all(&p, n);
    for (i, (_, r)) in got.iter().enumerate() {
        assert_eq!(r.as_ref().expect("acked"), &(0, i as i64));
    }
    let c = consumer(&k, "reader", &[]);
    let msgs = read_partition(&c, "idem", 0, Offset::Offset(0));
    assert_eq!(msgs.len(), n);
    for (i, (off, key, payload, hs)) in msgs.iter().enumerate() {
        assert_eq!(*off, i as i64);
        assert_eq!(key.as_deref(), Some(&[i as u8, 0, 255, (i >> 8) as u8][..]));
        assert_eq!(payload.as_deref(), Some(format!("value-{i}").as_bytes()));
        assert_eq!(hs.len(), 5, "duplicate header keys and null values kept");
        assert_eq!(hs[0], ("idx".to_string(), Some(i.to_string().into_bytes())));
        assert_eq!(hs[1].1.as_deref(), Some(&[0u8, 1, 2, 255][..]));
        assert_eq!((hs[2].1.as_deref(), hs[3].1.as_deref()), (Some(&b"a"[..]), Some(&b"b"[..])));
        assert_eq!(hs[4], ("null".to_string(), None));
    }
    // A consumer that assigns partition 0 at an explicit offset starts exactly there.
    let c2 = consumer(&k, "reader2", &[]);
    let tail = read_partition(&c2, "idem", 0, Offset::Offset(150));
    assert_eq!(tail.len(), 50);
    assert_eq!(tail[0].0, 150);
    let (lo, hi) = c2.fetch_watermarks("idem", 0, Duration::from_secs(10)).unwrap();
    assert_eq!((lo, hi), (0, n as i64));
}

#[test]
fn offsets_for_times_including_past_the_end() {
    let k = Kaka::start("rd-time", &[]);
    let p = producer(&k, &[]);
    let t0 = ts_base();
    for i in 0..10i64 {
        let v = format!("v{i}");
        p.send(
            BaseRecord::with_opaque_to("times", i as usize)
                .partition(0)
                .payload(&v)
                .key("k")
                .timestamp(t0 + i * 1000),
        )
        .map_err(|(e, _)| e)
        .unwrap();
    }
    flush_all(&p, 10);
    let c = consumer(&k, "times-reader", &[]);
    let ask = |ts: i64| {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("times", 0, Offset::Offset(ts)).unwrap();
        let r = c.offsets_for_times(tpl, Duration::from_secs(10)).unwrap();
        r.find_partition("times", 0).unwrap().offset()
    };
    assert_eq!(ask(t0), Offset::Offset(0));
    assert_eq!(ask(t0 + 3500), Offset::Offset(4));
    assert_eq!(ask(t0 + 9000), Offset::Offset(9));
    assert_eq!(ask(t0 + 100_000), Offset::End, "later than every record: the end (-1), not 0");
}

/// A consumer positioned on deleted records (here DeleteRecords; retention moves the log start
/// the same way) reads from the oldest record kept, even with `auto.offset.reset=error`: kaka
/// serves the offset rather than answering OFFSET_OUT_OF_RANGE (the seed's rule).
#[test]
fn a_deleted_offset_reads_from_the_oldest_record_kept() {
    let k = Kaka::start("rd-oldest", &[]);
    let p = producer(&k, &[]);
    // One batch per record: the deletion below leaves whole batches, as retention does.
    for i in 0..10usize {
        let v = format!("v{i}");
        p.send(BaseRecord::with_opaque_to("oldest", i).partition(0).payload(&v).key("k"))
            .map_err(|(e, _)| e)
            .unwrap();
        flush_all(&p, 1);
    }
    let mut upto = TopicPartitionList::new();
    upto.add_partition_offset("oldest", 0, Offset::Offset(6)).unwrap();
    let res = block_on(admin(&k).delete_records(&upto, &AdminOptions::new())).expect("DeleteRecords");
    assert_eq!(res.find_partition("oldest", 0).unwrap().error(), Ok(()), "{res:?}");
    for from in [Offset::Offset(2), Offset::Beginning] {
        let c = consumer(&k, "oldest-reader", &[("auto.offset.reset", "error")]);
        let got: Vec<(i64, Option<Vec<u8>>)> =
            read_partition(&c, "oldest", 0, from).into_iter().map(|m| (m.0, m.2)).collect();
        let want: Vec<(i64, Option<Vec<u8>>)> =
            (6..10).map(|i| (i, Some(format!("v{i}").into_bytes()))).collect();
        assert_eq!(got, want, "from {from:?}");
        let (low, high) = c.fetch_watermarks("oldest", 0, Duration::from_secs(10)).unwrap();
        assert_eq!((low, high), (6, 10));
    }
}

#[test]
fn compressed_produce_reads_back() {
    let k = Kaka::start("rd-codec", &[]);
    for codec in ["snappy", "gzip", "lz4", "zstd"] {
        let topic = format!("codec-{codec}");
        let p = producer(&k, &[("compression.codec", codec), ("linger.ms", "20")]);
        let n = 500;
        let payloads: Vec<String> =
            (0..n).map(|i| format!("{codec} record {i} {}", "x".repeat(i % 50))).collect();
        for (i, v) in payloads.iter().enumerate() {
            p.send(BaseRecord::with_opaque_to(&topic, i).partition(0).payload(v).key(&format!("k{i}")))
                .map_err(|(e, _)| e)
                .unwrap();
        }
        let got = flush_all(&p, n);
        assert!(got.iter().all(|g| g.1.is_ok()), "{codec}: acked");
        let c = consumer(&k, &format!("r-{codec}"), &[]);
        let msgs = read_partition(&c, &topic, 0, Offset::Beginning);
        assert_eq!(msgs.len(), n, "{codec}: every record read back");
        for (i, m) in msgs.iter().enumerate() {
            assert_eq!(m.2.as_deref(), Some(payloads[i].as_bytes()), "{codec} record {i}");
        }
        // The batches really were stored compressed: the segment is smaller than the data.
        let seg = std::fs::read_dir(k.dir.join("topics").join(&topic).join("0"))
            .unwrap()
            .filter_map(|e| e.ok())
            .find(|e| e.path().extension().is_some_and(|x| x == "log"))
            .unwrap();
        let raw: usize = payloads.iter().map(|p| p.len()).sum();
        let stored = log_end(&std::fs::read(seg.path()).unwrap());
        assert!(stored > 0 && stored < raw, "{codec}: stored compressed");
    }
}

#[test]
fn delete_topics_deletes_only_named_and_auto_create() {
    let k = Kaka::start("rd-del", &[]);
    let a = admin(&k);
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let topics: Vec<NewTopic> = ["keep-a", "drop-b", "keep-c"]
        .iter()
        .map(|n| NewTopic::new(n, 2, TopicReplication::Fixed(1)))
        .collect();
    let res = block_on(a.create_topics(&topics, &opts)).unwrap();
    assert!(res.iter().all(|r| r.is_ok()), "{res:?}");
    let res = block_on(a.delete_topics(&["drop-b"], &opts)).unwrap();
    assert!(res.iter().all(|r| r.is_ok()), "{res:?}");
    let names = topic_names(&k);
    assert!(names.contains(&"keep-a".into()) && names.contains(&"keep-c".into()), "{names:?}");
    assert!(!names.contains(&"drop-b".into()), "{names:?}");
    assert!(!k.dir.join("topics/drop-b").exists());
    // Deleting a missing topic is an error for that topic only.
    let res = block_on(a.delete_topics(&["nope"], &opts)).unwrap();
    assert!(res[0].is_err());
    // Produce to a missing topic with auto-creation on (the default): created, delivered.
    let p = producer(&k, &[]);
    p.send(BaseRecord::with_opaque_to("auto-made", 0).payload("x").key("k")).map_err(|(e, _)| e).unwrap();
    let got = flush_all(&p, 1);
    assert!(got[0].1.is_ok(), "{got:?}");
    assert!(topic_names(&k).contains(&"auto-made".into()));
}

#[test]
fn missing_topic_with_auto_create_off_fails_delivery() {
    let k = Kaka::start("rd-noauto", &["--no-auto-create-topics"]);
    let p = producer(&k, &[("message.timeout.ms", "3000")]);
    p.send(BaseRecord::with_opaque_to("absent", 0).payload("x").key("k")).map_err(|(e, _)| e).unwrap();
    p.flush(Duration::from_secs(10)).ok();
    p.poll(Duration::ZERO);
    let got = std::mem::take(&mut *p.context().got.lock().unwrap());
    assert_eq!(got.len(), 1);
    assert!(got[0].1.is_err(), "{got:?}");
    assert!(!topic_names(&k).contains(&"absent".into()));
}

#[test]
fn consumer_group_subscribe_commit_and_resume() {
    let k = Kaka::start("rd-group", &["--group-initial-rebalance-delay-ms", "200"]);
    let a = admin(&k);
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    block_on(a.create_topics(&[NewTopic::new("grp", 3, TopicReplication::Fixed(1))], &opts)).unwrap();
    let p = producer(&k, &[]);
    for i in 0..30 {
        let v = format!("m{i}");
        p.send(BaseRecord::with_opaque_to("grp", i).partition((i % 3) as i32).payload(&v).key("k"))
            .map_err(|(e, _)| e)
            .unwrap();
    }
    flush_all(&p, 30);
    let extra = [
        ("heartbeat.interval.ms", "300"),
        ("session.timeout.ms", "6000"),
        ("max.poll.interval.ms", "10000"),
        ("enable.partition.eof", "false"),
    ];
    // Two members share the partitions; every record is seen exactly once between them.
    // Each member polls on its own thread until both have committed, so a rebalance caused
    // by one member (joining or leaving) is always served by the other.
    let seen: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let committed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let members: Vec<_> = (0..2)
        .map(|_| {
            let (addr, seen, committed) = (k.addr(), seen.clone(), committed.clone());
            std::thread::spawn(move || {
                let mut cfg = ClientConfig::new();
                cfg.set("bootstrap.servers", &addr)
                    .set("group.id", "g1")
                    .set("enable.auto.commit", "false")
                    .set("auto.offset.reset", "earliest")
                    .set("fetch.wait.max.ms", "100");
                for (a, b) in extra {
                    cfg.set(a, b);
                }
                let c: BaseConsumer = cfg.create().unwrap();
                c.subscribe(&["grp"]).unwrap();
                let deadline = Instant::now() + Duration::from_secs(60);
                let mut all_seen_at: Option<Instant> = None;
                let mut my_commit = false;
                let mut parts = 0;
                loop {
                    assert!(Instant::now() < deadline, "group member timed out");
                    if let Some(Ok(m)) = c.poll(Duration::from_millis(50)) {
                        let v = String::from_utf8_lossy(m.payload().unwrap()).to_string();
                        *seen.lock().unwrap().entry(v).or_default() += 1;
                    }
                    if seen.lock().unwrap().len() >= 30 && all_seen_at.is_none() {
                        all_seen_at = Some(Instant::now());
                    }
                    // Settle into one generation, then commit what this member owns.
                    if !my_commit && all_seen_at.is_some_and(|t| t.elapsed() > Duration::from_secs(2)) {
                        parts = c.assignment().unwrap().count();
                        if parts > 0 {
                            c.commit_consumer_state(CommitMode::Sync).unwrap();
                        }
                        my_commit = true;
                        committed.fetch_add(1, Ordering::SeqCst);
                    }
                    if my_commit && committed.load(Ordering::SeqCst) == 2 {
                        break;
                    }
                }
                let offsets = c.committed(Duration::from_secs(10)).unwrap();
                let offs: Vec<Offset> = offsets.elements().iter().map(|e| e.offset()).collect();
                c.unsubscribe();
                (parts, offs)
            })
        })
        .collect();
    let results: Vec<(usize, Vec<Offset>)> = members.into_iter().map(|h| h.join().unwrap()).collect();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 30);
    assert!(seen.values().all(|&n| n == 1), "each record once: {seen:?}");
    assert_eq!(results[0].0 + results[1].0, 3, "partitions split between members: {results:?}");
    for (_, offs) in &results {
        assert!(offs.iter().all(|o| *o == Offset::Offset(10)), "committed {offs:?}");
    }
    // New records after the commit; a new member of the group resumes after the commit.
    for i in 30..33 {
        let v = format!("m{i}");
        p.send(BaseRecord::with_opaque_to("grp", i).partition((i % 3) as i32).payload(&v).key("k"))
            .map_err(|(e, _)| e)
            .unwrap();
    }
    flush_all(&p, 3);
    let c3 = consumer(&k, "g1", &extra);
    c3.subscribe(&["grp"]).unwrap();
    let mut got = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < 3 && Instant::now() < deadline {
        if let Some(Ok(m)) = c3.poll(Duration::from_millis(100)) {
            got.insert(String::from_utf8_lossy(m.payload().unwrap()).to_string());
        }
    }
    let want: HashSet<String> = (30..33).map(|i| format!("m{i}")).collect();
    assert_eq!(got, want, "resumed after the committed offsets");
}

/// The seed's crash test: 20 SIGKILLs mid-flood, every acked record checked after each
/// restart. `KAKA_CRASH_ROUNDS=N` runs N rounds instead (a longer run).
#[test]
fn crash_during_produce_flood_loses_no_acked_record() {
    let rounds = std::env::var("KAKA_CRASH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let mut k = Kaka::start("rd-crash", &[]);
    crash_rounds(&mut k, rounds);
}

/// Floods an idempotent acks=all producer, SIGKILLs the broker mid-flood, restarts it on the
/// same port, and checks that every acknowledged record is present exactly once, in order.
///
/// Each check reads the whole partition from offset 0 (every round's records, not just the
/// last one's) with plain Fetch requests, decoding every batch (CRC checked) and record: a
/// librdkafka consumer reads about four times slower, which over 20 rounds of millions of
/// records would take minutes.
pub fn crash_rounds(k: &mut Kaka, rounds: usize) {
    let new_producer =
        |k: &Kaka| Arc::new(producer(k, &[("message.timeout.ms", "5000"), ("linger.ms", "1")]));
    let mut acked: Vec<u64> = Vec::new();
    let mut next: u64 = 0;
    // Made before the broker's restart is checked, so that librdkafka's producer id request
    // (it retries every 500 ms when the bootstrap connection is gone first) overlaps the check.
    let mut p = new_producer(k);
    for round in 0..rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let sender = {
            let (p, stop) = (p.clone(), stop.clone());
            let start = next;
            std::thread::spawn(move || {
                let mut i = start;
                while !stop.load(Ordering::Relaxed) {
                    let v = i.to_be_bytes();
                    match p.send(
                        BaseRecord::with_opaque_to("crash", i as usize).partition(0).payload(&v[..]).key("k"),
                    ) {
                        Ok(()) => i += 1,
                        Err(_) => std::thread::sleep(Duration::from_millis(1)),
                    }
                    p.poll(Duration::ZERO);
                }
                i
            })
        };
        // Kill mid-flood: once acks are flowing, 50 to 450 ms later (varying by round).
        let first = Instant::now() + Duration::from_secs(30);
        while p.context().got.lock().unwrap().iter().all(|g| g.1.is_err()) {
            assert!(Instant::now() < first, "round {round}: no ack within 30 s");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(50 + 100 * (round % 5) as u64));
        k.sigkill();
        stop.store(true, Ordering::Relaxed);
        next = sender.join().unwrap();
        // Collect reports for a moment; what is not acked by now does not count.
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            p.poll(Duration::from_millis(10));
        }
        let got = std::mem::take(&mut *p.context().got.lock().unwrap());
        let mut round_acked: Vec<u64> = got.iter().filter(|g| g.1.is_ok()).map(|g| g.0 as u64).collect();
        assert!(
            !round_acked.is_empty(),
            "round {round}: some records acked before the kill: {:?}",
            got.first()
        );
        // Each round sends numbers above the previous round's, so `acked` stays sorted.
        round_acked.sort_unstable();
        acked.extend(round_acked);
        drop(p);
        k.spawn(); // same port, right away
        p = new_producer(k);
        let seqs = read_all_u64(&k.addr(), "crash");
        // Strictly increasing: stored in order, and no record stored twice.
        if let Some(w) = seqs.windows(2).find(|w| w[0] >= w[1]) {
            panic!("round {round}: records out of order or stored twice: {} then {}", w[0], w[1]);
        }
        let mut stored = seqs.iter().peekable();
        let missing: Vec<u64> = acked
            .iter()
            .copied()
            .filter(|a| {
                while stored.next_if(|s| **s < *a).is_some() {}
                stored.peek() != Some(&a)
            })
            .collect();
        assert!(
            missing.is_empty(),
            "round {round}: acked records lost: {} of {} (first {:?})",
            missing.len(),
            acked.len(),
            missing.first()
        );
    }
    // Once more through librdkafka, as an application reads it: the same records, in order.
    // (Its local queue sized so that it fetches without pausing a second at 100,000 records.)
    let c =
        consumer(k, "crash-check", &[("queued.min.messages", "1000000"), ("fetch.queue.backoff.ms", "1")]);
    let msgs = read_partition(&c, "crash", 0, Offset::Beginning);
    let seqs: Vec<u64> =
        msgs.iter().map(|m| u64::from_be_bytes(m.2.as_deref().unwrap().try_into().unwrap())).collect();
    assert_eq!(seqs, read_all_u64(&k.addr(), "crash"), "librdkafka reads what Fetch returned");
}

/// Reads partition 0 of `topic` from offset 0 to the high watermark with Fetch v12 and returns
/// each record's value as a big-endian u64. Every batch is decoded whole (its CRC checked) and
/// the offsets must run 0, 1, 2, ... with no gap.
fn read_all_u64(addr: &str, topic: &str) -> Vec<u64> {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::RecordBatchDecoder;
    let mut c = Raw::connect(addr);
    let mut out = Vec::new();
    let mut next = 0i64;
    loop {
        let mut fp = FetchPartition::default();
        fp.fetch_offset = next;
        fp.partition_max_bytes = 32 << 20;
        let mut ft = FetchTopic::default();
        ft.topic = TopicName(StrBytes::from_string(topic.to_string()));
        ft.partitions = vec![fp];
        let mut r = FetchRequest::default();
        r.max_bytes = 32 << 20;
        r.session_epoch = -1;
        r.topics = vec![ft];
        let resp: FetchResponse = c.call(ApiKey::Fetch, 12, &r);
        let part = &resp.responses[0].partitions[0];
        assert_eq!(part.error_code, 0, "fetch {topic} at {next}");
        let hw = part.high_watermark;
        if next >= hw {
            return out;
        }
        let mut data = part.records.clone().unwrap_or_default();
        let before = next;
        // Whole batches only (a reply may end with part of one; it is fetched again).
        while data.len() >= 12 {
            let len = i32::from_be_bytes(data[8..12].try_into().unwrap()) as usize + 12;
            if data.len() < len {
                break;
            }
            let set = RecordBatchDecoder::decode(&mut data.split_to(len))
                .unwrap_or_else(|e| panic!("{topic}: bad batch at offset {next}: {e}"));
            for rec in set.records {
                assert_eq!(rec.offset, next, "{topic}: offsets run without gaps");
                let v = rec.value.as_deref().expect("a value");
                out.push(u64::from_be_bytes(v.try_into().expect("an 8-byte value")));
                next += 1;
            }
        }
        assert!(next > before, "{topic}: fetch at {next} below the high watermark {hw} returned nothing");
    }
}

/// ListGroups and DescribeGroups (librdkafka's group list) show a live group with its member,
/// assignor and assignment; DescribeConfigs shows topic settings and where they come from.
#[test]
fn group_list_and_describe_configs() {
    use rdkafka::admin::{ConfigSource, OwnedResourceSpecifier, ResourceSpecifier};
    let k = Kaka::start(
        "rd-describe",
        &["--group-initial-rebalance-delay-ms", "100", "--retention-ms", "3600000"],
    );
    let a = admin(&k);
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let compacted =
        NewTopic::new("described", 2, TopicReplication::Fixed(1)).set("cleanup.policy", "compact");
    block_on(a.create_topics(&[compacted], &opts)).unwrap();

    // Topic configs: the one set at creation is a topic config, the rest come from the broker.
    let res = block_on(a.describe_configs(
        &[
            ResourceSpecifier::Topic("described"),
            ResourceSpecifier::Topic("no-such-topic"),
            ResourceSpecifier::Broker(0),
        ],
        &opts,
    ))
    .unwrap();
    let topic = res[0].as_ref().expect("topic configs");
    assert_eq!(topic.specifier, OwnedResourceSpecifier::Topic("described".into()));
    let policy = topic.get("cleanup.policy").expect("cleanup.policy");
    assert_eq!(policy.value.as_deref(), Some("compact"));
    assert_eq!(policy.source, ConfigSource::DynamicTopic);
    let retention = topic.get("retention.ms").expect("retention.ms");
    assert_eq!(retention.value.as_deref(), Some("3600000"), "inherited from --retention-ms");
    assert_eq!(retention.source, ConfigSource::StaticBroker);
    // (rust-rdkafka drops the per-resource error code; wire.rs checks it.)
    assert!(res[1].as_ref().map_or(true, |r| r.entries.is_empty()), "a missing topic has no configs");
    let broker = res[2].as_ref().expect("broker configs");
    assert_eq!(broker.get("log.retention.ms").and_then(|e| e.value.as_deref()), Some("3600000"));

    // AlterConfigs (librdkafka's non-incremental call) replaces the topic's own settings:
    // retention.ms becomes a topic config, cleanup.policy (not named) returns to "delete".
    let alter =
        rdkafka::admin::AlterConfig::new(ResourceSpecifier::Topic("described")).set("retention.ms", "120000");
    let altered = block_on(a.alter_configs(&[alter], &opts)).unwrap();
    assert!(altered[0].is_ok(), "{altered:?}");
    let res = block_on(a.describe_configs(&[ResourceSpecifier::Topic("described")], &opts)).unwrap();
    let topic = res[0].as_ref().expect("topic configs");
    let retention = topic.get("retention.ms").expect("retention.ms");
    assert_eq!(retention.value.as_deref(), Some("120000"));
    assert_eq!(retention.source, ConfigSource::DynamicTopic);
    assert_eq!(topic.get("cleanup.policy").and_then(|e| e.value.as_deref()), Some("delete"));
    let bad =
        rdkafka::admin::AlterConfig::new(ResourceSpecifier::Topic("described")).set("retention.ms", "soon");
    // (rust-rdkafka drops the per-resource error code here too; wire.rs checks it.)
    block_on(a.alter_configs(&[bad], &opts)).unwrap();
    let res = block_on(a.describe_configs(&[ResourceSpecifier::Topic("described")], &opts)).unwrap();
    let retention = res[0].as_ref().unwrap().get("retention.ms").and_then(|e| e.value.clone());
    assert_eq!(retention.as_deref(), Some("120000"), "a bad value is refused, nothing changes");

    // A subscribed consumer: the group is listed and described while it is Stable.
    let c = consumer(&k, "described-group", &[("client.id", "describer"), ("enable.partition.eof", "false")]);
    c.subscribe(&["described"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.assignment().unwrap().count() < 2 {
        assert!(Instant::now() < deadline, "no assignment");
        let _ = c.poll(Duration::from_millis(100));
    }
    let list = c.fetch_group_list(None, Duration::from_secs(10)).unwrap();
    let g = list.groups().iter().find(|g| g.name() == "described-group").expect("group listed");
    assert_eq!(g.state(), "Stable");
    assert_eq!(g.protocol_type(), "consumer");
    assert!(!g.protocol().is_empty(), "the chosen assignor is named");
    assert_eq!(g.members().len(), 1);
    let m = &g.members()[0];
    assert_eq!(m.client_id(), "describer");
    assert_eq!(m.client_host(), "/127.0.0.1");
    assert!(m.assignment().is_some_and(|a| !a.is_empty()), "the member's assignment is shown");
    // A group nobody knows is not listed (wire.rs checks that DescribeGroups calls it Dead).
    let none = c.fetch_group_list(Some("never-seen"), Duration::from_secs(10)).unwrap();
    assert!(none.groups().is_empty());
}
