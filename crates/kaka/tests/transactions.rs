//! Transactions with librdkafka (the `rdkafka` crate) against the real `kaka` binary:
//! transactional producers, read_committed and read_uncommitted consumers, offsets sent to a
//! transaction, fencing, a SIGKILL mid-way, and the transaction timeout.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::*;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

const T: Duration = Duration::from_secs(30);

fn create_topic(k: &Kaka, name: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", k.addr()).create().expect("admin");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let res = rt
        .block_on(admin.create_topics(
            &[NewTopic::new(name, partitions, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(T)),
        ))
        .expect("create topics");
    assert!(res.iter().all(|r| r.is_ok()), "{res:?}");
}

fn txn_producer(k: &Kaka, tid: &str, extra: &[(&str, &str)]) -> BaseProducer {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", k.addr()).set("transactional.id", tid).set("linger.ms", "1");
    for (a, b) in extra {
        c.set(*a, *b);
    }
    let p: BaseProducer = c.create().expect("producer");
    p.init_transactions(T).expect("init_transactions");
    p
}

/// Sends `values` to `topic` partition `partition` and waits for their acks.
fn send(p: &BaseProducer, topic: &str, partition: i32, values: &[&str]) {
    for v in values {
        p.send(BaseRecord::to(topic).partition(partition).key(*v).payload(*v)).expect("enqueue");
    }
    p.flush(T).expect("flush");
}

/// Every record of `topic` partitions `0..partitions` from the start to the end the
/// consumer sees (the last stable offset for read_committed): (partition, offset, value).
fn read_all(k: &Kaka, topic: &str, partitions: i32, committed: bool) -> Vec<(i32, i64, String)> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", k.addr())
        .set("group.id", "txn-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", if committed { "read_committed" } else { "read_uncommitted" })
        .set("fetch.wait.max.ms", "100")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning).unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut eof = HashSet::new();
    let mut out = Vec::new();
    let deadline = Instant::now() + T;
    while eof.len() < partitions as usize {
        assert!(Instant::now() < deadline, "timed out reading {topic} (eof at {eof:?}, got {out:?})");
        match c.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(m)) => out.push((
                m.partition(),
                m.offset(),
                String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string(),
            )),
            Some(Err(KafkaError::PartitionEOF(p))) => {
                eof.insert(p);
            }
            Some(Err(e)) => panic!("consume error: {e}"),
        }
    }
    out
}

fn values(recs: &[(i32, i64, String)]) -> Vec<String> {
    let mut v: Vec<String> = recs.iter().map(|r| r.2.clone()).collect();
    v.sort();
    v
}

fn strs(v: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

#[test]
fn commit_is_visible_to_read_committed_and_abort_only_to_read_uncommitted() {
    let k = Kaka::start("txn-basic", &[]);
    create_topic(&k, "tx", 2);
    let p = txn_producer(&k, "basic", &[]);

    p.begin_transaction().unwrap();
    send(&p, "tx", 0, &["c1", "c2"]);
    send(&p, "tx", 1, &["c3"]);
    p.commit_transaction(T).expect("commit");

    p.begin_transaction().unwrap();
    send(&p, "tx", 0, &["a1"]);
    send(&p, "tx", 1, &["a2", "a3"]);
    p.abort_transaction(T).expect("abort");

    // An open transaction is invisible to read_committed (and holds back its end).
    p.begin_transaction().unwrap();
    send(&p, "tx", 0, &["o1"]);
    send(&p, "tx", 1, &["o2"]);
    assert_eq!(values(&read_all(&k, "tx", 2, true)), strs(&["c1", "c2", "c3"]));
    assert_eq!(
        values(&read_all(&k, "tx", 2, false)),
        strs(&["c1", "c2", "c3", "a1", "a2", "a3", "o1", "o2"])
    );
    p.commit_transaction(T).expect("commit");

    // Non-transactional records beside transactional ones stay visible.
    let plain: BaseProducer = ClientConfig::new().set("bootstrap.servers", k.addr()).create().unwrap();
    send(&plain, "tx", 0, &["plain"]);

    let committed = read_all(&k, "tx", 2, true);
    assert_eq!(values(&committed), strs(&["c1", "c2", "c3", "o1", "o2", "plain"]));
    let all = read_all(&k, "tx", 2, false);
    assert_eq!(values(&all), strs(&["c1", "c2", "c3", "a1", "a2", "a3", "o1", "o2", "plain"]));
    // Markers take offsets: partition 0 holds c1 c2 M a1 M o1 M plain.
    let p0: Vec<i64> = all.iter().filter(|r| r.0 == 0).map(|r| r.1).collect();
    assert_eq!(p0, vec![0, 1, 3, 5, 7]);
}

#[test]
fn consume_transform_produce_commits_offsets_with_the_transaction() {
    let k = Kaka::start("txn-ctp", &["--group-initial-rebalance-delay-ms", "0"]);
    create_topic(&k, "in", 1);
    create_topic(&k, "out", 1);
    let plain: BaseProducer = ClientConfig::new().set("bootstrap.servers", k.addr()).create().unwrap();
    let inputs: Vec<String> = (0..10).map(|i| format!("in{i}")).collect();
    send(&plain, "in", 0, &inputs.iter().map(|s| s.as_str()).collect::<Vec<_>>());

    let consumer = |group: &str| -> BaseConsumer {
        ClientConfig::new()
            .set("bootstrap.servers", k.addr())
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("isolation.level", "read_committed")
            .set("fetch.wait.max.ms", "100")
            .create()
            .expect("consumer")
    };
    let p = txn_producer(&k, "ctp", &[]);
    // One round: consume `n` records, produce their transforms, send the offsets, then commit
    // or abort.
    let round = |c: &BaseConsumer, n: usize, commit: bool| {
        let mut got = Vec::new();
        let deadline = Instant::now() + T;
        while got.len() < n {
            assert!(Instant::now() < deadline, "timed out consuming (got {got:?})");
            if let Some(m) = c.poll(Duration::from_millis(100)) {
                let m = m.expect("consume");
                got.push((m.offset(), String::from_utf8_lossy(m.payload().unwrap()).to_string()));
            }
        }
        p.begin_transaction().unwrap();
        for (_, v) in &got {
            p.send(BaseRecord::to("out").partition(0).key(v).payload(&v.to_uppercase())).unwrap();
        }
        p.flush(T).unwrap();
        let mut offs = TopicPartitionList::new();
        offs.add_partition_offset("in", 0, Offset::Offset(got.last().unwrap().0 + 1)).unwrap();
        p.send_offsets_to_transaction(&offs, &c.group_metadata().unwrap(), T).expect("send offsets");
        if commit {
            p.commit_transaction(T).expect("commit");
        } else {
            p.abort_transaction(T).expect("abort");
        }
    };
    let committed_offset = |group: &str| -> Offset {
        let c = consumer(group);
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition("in", 0);
        let got = c.committed_offsets(tpl, T).expect("committed offsets");
        got.find_partition("in", 0).unwrap().offset()
    };

    let c = consumer("ctp");
    c.subscribe(&["in"]).unwrap();
    round(&c, 6, true);
    assert_eq!(committed_offset("ctp"), Offset::Offset(6));
    round(&c, 4, false);
    // The aborted round's offsets were not applied, and its output is not visible.
    assert_eq!(committed_offset("ctp"), Offset::Offset(6));
    drop(c);
    let want: Vec<String> = inputs[..6].iter().map(|s| s.to_uppercase()).collect();
    assert_eq!(
        values(&read_all(&k, "out", 1, true)),
        strs(&want.iter().map(|s| s.as_str()).collect::<Vec<_>>())
    );
    assert_eq!(read_all(&k, "out", 1, false).len(), 10);

    // A new member of the group resumes at the committed offset and finishes the work.
    let c = consumer("ctp");
    c.subscribe(&["in"]).unwrap();
    round(&c, 4, true);
    assert_eq!(committed_offset("ctp"), Offset::Offset(10));
    let out: Vec<String> = read_all(&k, "out", 1, true).into_iter().map(|r| r.2).collect();
    let want: Vec<String> = inputs.iter().map(|s| s.to_uppercase()).collect();
    assert_eq!(out, want, "each input transformed exactly once, in order");
}

#[test]
fn a_second_producer_with_the_same_transactional_id_fences_the_first() {
    let k = Kaka::start("txn-fence", &[]);
    create_topic(&k, "fence", 1);
    let first = txn_producer(&k, "shared-id", &[]);
    first.begin_transaction().unwrap();
    send(&first, "fence", 0, &["zombie"]);

    // The new producer's InitProducerId aborts the open transaction and bumps the epoch.
    let second = txn_producer(&k, "shared-id", &[]);
    let err = first.commit_transaction(T).expect_err("the fenced producer cannot commit");
    let fenced = format!("{err:?}");
    assert!(fenced.contains("Fenced") || fenced.contains("fenced") || fenced.contains("Epoch"), "{fenced}");
    // Nor can it write any more.
    let late = first.send(BaseRecord::to("fence").partition(0).key("late").payload("late"));
    if late.is_ok() {
        let _ = first.flush(Duration::from_secs(5));
    }

    second.begin_transaction().unwrap();
    send(&second, "fence", 0, &["live"]);
    second.commit_transaction(T).expect("commit");

    assert_eq!(values(&read_all(&k, "fence", 1, true)), strs(&["live"]));
    let all = values(&read_all(&k, "fence", 1, false));
    assert!(!all.contains(&"late".to_string()), "{all:?}");
    assert_eq!(all, strs(&["zombie", "live"]));
}

#[test]
fn sigkill_keeps_commits_and_aborts_and_aborts_the_open_transaction() {
    let mut k = Kaka::start("txn-kill", &[]);
    create_topic(&k, "crash", 2);
    {
        let p = txn_producer(&k, "crasher", &[]);
        p.begin_transaction().unwrap();
        send(&p, "crash", 0, &["kept1"]);
        send(&p, "crash", 1, &["kept2"]);
        p.commit_transaction(T).expect("commit");
        p.begin_transaction().unwrap();
        send(&p, "crash", 0, &["gone1"]);
        send(&p, "crash", 1, &["gone2"]);
        p.abort_transaction(T).expect("abort");
        // Left open when the broker dies.
        p.begin_transaction().unwrap();
        send(&p, "crash", 0, &["open1"]);
        send(&p, "crash", 1, &["open2"]);
        k.sigkill();
    }
    k.spawn();
    // Recovery aborts the open transaction: read_committed gets past it.
    assert_eq!(values(&read_all(&k, "crash", 2, true)), strs(&["kept1", "kept2"]));
    assert_eq!(
        values(&read_all(&k, "crash", 2, false)),
        strs(&["kept1", "kept2", "gone1", "gone2", "open1", "open2"])
    );

    // The same transactional id works again.
    let p = txn_producer(&k, "crasher", &[]);
    p.begin_transaction().unwrap();
    send(&p, "crash", 0, &["after1"]);
    send(&p, "crash", 1, &["after2"]);
    p.commit_transaction(T).expect("commit after restart");
    drop(p);

    // And a second SIGKILL right after a commit loses nothing.
    k.restart();
    assert_eq!(values(&read_all(&k, "crash", 2, true)), strs(&["kept1", "kept2", "after1", "after2"]));
    let p = txn_producer(&k, "crasher", &[]);
    p.begin_transaction().unwrap();
    send(&p, "crash", 1, &["last"]);
    p.commit_transaction(T).expect("commit");
    assert_eq!(
        values(&read_all(&k, "crash", 2, true)),
        strs(&["kept1", "kept2", "after1", "after2", "last"])
    );
}

#[test]
fn an_expired_transaction_is_aborted() {
    let k = Kaka::start("txn-timeout", &[]);
    create_topic(&k, "slow", 1);
    let p =
        txn_producer(&k, "slowpoke", &[("transaction.timeout.ms", "2000"), ("message.timeout.ms", "2000")]);
    p.begin_transaction().unwrap();
    send(&p, "slow", 0, &["late1", "late2"]);
    // The coordinator aborts it once 2 s have passed: read_committed then reads past it.
    let deadline = Instant::now() + T;
    loop {
        let c = read_all(&k, "slow", 1, false);
        if c.len() == 2 && read_all(&k, "slow", 1, true).is_empty() {
            // The abort marker is at offset 2; the LSO moved past it once it is written.
            let lso_passed = {
                let c: BaseConsumer = ClientConfig::new()
                    .set("bootstrap.servers", k.addr())
                    .set("group.id", "lso")
                    .set("isolation.level", "read_committed")
                    .create()
                    .unwrap();
                let (_, hi) = c.fetch_watermarks("slow", 0, T).unwrap();
                hi >= 3
            };
            if lso_passed {
                break;
            }
        }
        assert!(Instant::now() < deadline, "the transaction was not aborted");
        std::thread::sleep(Duration::from_millis(200));
    }
    // The producer was fenced by the abort: its commit fails.
    assert!(p.commit_transaction(T).is_err(), "commit of an expired transaction must fail");
    drop(p);
    // A new producer with the same id works.
    let p = txn_producer(&k, "slowpoke", &[]);
    p.begin_transaction().unwrap();
    send(&p, "slow", 0, &["ok"]);
    p.commit_transaction(T).expect("commit");
    assert_eq!(values(&read_all(&k, "slow", 1, true)), strs(&["ok"]));
    assert_eq!(values(&read_all(&k, "slow", 1, false)), strs(&["late1", "late2", "ok"]));
}

/// SIGKILL at arbitrary points of a stream of transactions, each writing one record to each of
/// two partitions (every third one aborted). After each restart: the transactions a
/// read_committed consumer sees are the same on both partitions (all or nothing), each once;
/// every commit the client saw succeed is there; no abort the client saw succeed is.
#[test]
fn sigkill_at_random_points_keeps_transactions_atomic() {
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    let mut k = Kaka::start("txn-chaos", &[]);
    create_topic(&k, "chaos", 2);
    let mut seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    eprintln!("seed {seed}");
    let mut next = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        seed >> 33
    };
    let committed = Arc::new(Mutex::new(BTreeSet::new()));
    let aborted = Arc::new(Mutex::new(BTreeSet::new()));
    for round in 0..6 {
        let stop = Arc::new(AtomicBool::new(false));
        let worker = {
            let (addr, stop, committed, aborted) =
                (k.addr(), stop.clone(), committed.clone(), aborted.clone());
            std::thread::spawn(move || {
                let p: BaseProducer = ClientConfig::new()
                    .set("bootstrap.servers", addr)
                    .set("transactional.id", "chaos")
                    .set("linger.ms", "0")
                    .create()
                    .unwrap();
                p.init_transactions(T).expect("init_transactions");
                let short = Duration::from_secs(3);
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) || p.begin_transaction().is_err() {
                        return;
                    }
                    let id = format!("r{round}-t{i}");
                    for part in 0..2 {
                        let _ = p.send(BaseRecord::to("chaos").partition(part).key(&id).payload(&id));
                    }
                    if p.flush(short).is_err() {
                        return;
                    }
                    if i % 3 == 2 {
                        if p.abort_transaction(short).is_err() {
                            return;
                        }
                        aborted.lock().unwrap().insert(id);
                    } else {
                        if p.commit_transaction(short).is_err() {
                            return;
                        }
                        committed.lock().unwrap().insert(id);
                    }
                }
            })
        };
        // Let this round commit something, then kill at a random point of what follows.
        let before = committed.lock().unwrap().len();
        wait_until(60, "a commit in this round", || committed.lock().unwrap().len() > before);
        std::thread::sleep(Duration::from_millis(next() % 700));
        k.sigkill();
        stop.store(true, Ordering::Relaxed);
        worker.join().unwrap();
        k.spawn();
        let seen = read_all(&k, "chaos", 2, true);
        let on =
            |part: i32| -> Vec<String> { seen.iter().filter(|r| r.0 == part).map(|r| r.2.clone()).collect() };
        let (p0, p1) = (on(0), on(1));
        let s0: BTreeSet<String> = p0.iter().cloned().collect();
        let s1: BTreeSet<String> = p1.iter().cloned().collect();
        assert_eq!(s0.len(), p0.len(), "a transaction's record twice on partition 0");
        assert_eq!(s0, s1, "round {round}: a transaction is on one partition only");
        let committed = committed.lock().unwrap();
        assert!(
            committed.is_subset(&s0),
            "round {round}: acknowledged commits missing: {:?}",
            committed.difference(&s0).collect::<Vec<_>>()
        );
        let aborted = aborted.lock().unwrap();
        assert!(aborted.is_disjoint(&s0), "round {round}: aborted transactions visible");
        eprintln!(
            "round {round}: {} committed, {} aborted, {} visible",
            committed.len(),
            aborted.len(),
            s0.len()
        );
    }
    assert!(committed.lock().unwrap().len() >= 6, "each round committed at least once");
}
