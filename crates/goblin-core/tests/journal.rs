//! The Kafka journal through the real binaries: goblin-core journaling to a real broker, then
//! recovering from the topic alone and from a snapshot plus the topic's suffix; broker ack
//! mode across SIGKILL; the startup checks of the topic; other producers writing the same topic
//! (applied at runtime, reproduced exactly by a replay) and the record contract's failure
//! rules, at startup and at runtime. Each scenario runs against kaka (this
//! workspace's broker) and against Apache Kafka 4 (a single KRaft node that
//! `scripts/kafka4.sh` assembles from Maven Central; it needs Java 17 and Maven, which
//! `scripts/install-deps.sh` installs).

mod common;

use common::brokers::{info, other_producer, random_command, Broker, Kafka4, Kaka};
use common::flood::{assert_flood_lists, flood, flood_fenced, flood_list, state, wait_acked, Until};
use common::{run_to_exit, temp_path, Server};
use std::net::TcpStream;

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A workload over every type, TTLs, a transaction and a blocked command served later.
fn workload(s: &Server, round: usize) {
    let mut con = s.conn();
    let mut p = redis::pipe();
    for i in 0..200 {
        p.cmd("SET").arg(format!("s{round}:{i}")).arg(i).ignore();
        p.cmd("INCRBY").arg("counter").arg(i).ignore();
        p.cmd("HSET").arg("h").arg(format!("f{}", i % 37)).arg(i).ignore();
        p.cmd("SADD").arg("set").arg(i % 53).ignore();
        p.cmd("ZADD").arg("z").arg(i as f64 * 0.5).arg(format!("m{}", i % 41)).ignore();
        p.cmd("RPUSH").arg("l").arg(i).ignore();
        p.cmd("ARSET").arg("a").arg(i * 3).arg(i).ignore();
    }
    p.cmd("INCRBYFLOAT").arg("f").arg("1.25").ignore();
    p.cmd("EXPIRE").arg(format!("s{round}:1")).arg(100_000).ignore();
    p.cmd("SPOP").arg("set").ignore();
    p.cmd("LPOP").arg("l").arg(3).ignore();
    p.cmd("DEL").arg(format!("s{round}:2")).ignore();
    let _: () = p.query(&mut con).unwrap();
    let _: () = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("tx")
        .arg(round)
        .cmd("LPUSH")
        .arg("l")
        .arg("front")
        .query(&mut con)
        .unwrap();
    let mut waiter = s.conn();
    let port = s.port;
    let t = std::thread::spawn(move || -> Option<String> {
        redis::cmd("BLMOVE")
            .arg(format!("src{round}"))
            .arg("dst")
            .arg("LEFT")
            .arg("RIGHT")
            .arg(5)
            .query(&mut waiter)
            .unwrap()
    });
    std::thread::sleep(Duration::from_millis(100));
    let _ = port;
    let _: i64 = redis::cmd("RPUSH").arg(format!("src{round}")).arg("moved").query(&mut con).unwrap();
    assert_eq!(t.join().unwrap().as_deref(), Some("moved"));
}

#[test]
fn a_primary_recovers_from_its_topic_alone() {
    recovers_from_the_topic_alone(&Kaka::start());
}

#[test]
fn kafka4_a_primary_recovers_from_its_topic_alone() {
    recovers_from_the_topic_alone(&Kafka4::start());
}

fn recovers_from_the_topic_alone(k: &dyn Broker) {
    let uri = k.uri("journal-a");
    let mut a = Server::start(&["--kafka", &uri, "--save", ""]);
    assert!(a.log().contains("created Kafka topic journal-a"), "{}", a.log());
    workload(&a, 0);
    let mut con = a.conn();
    wait_acked(&mut con);
    let want = state(&mut con);
    assert!(want.1 > 1000);
    a.signal(9);
    a.wait_exit(Duration::from_secs(10)).unwrap();

    // A fresh server with no snapshot replays the topic from the start: same data, same
    // lineage, same offset.
    let mut b = Server::start(&["--kafka", &uri, "--save", ""]);
    let mut con = b.conn();
    assert_eq!(state(&mut con), want);
    let m = info(&mut con, "kafka");
    assert_eq!(m["kafka_replay_records_applied"], want.1.to_string());
    // It continues the lineage: new writes take the next offsets, and a third server sees
    // both histories.
    workload(&b, 1);
    wait_acked(&mut con);
    let want = state(&mut con);
    b.signal(9);
    b.wait_exit(Duration::from_secs(10)).unwrap();
    let c = Server::start(&["--kafka", &uri, "--save", ""]);
    assert_eq!(state(&mut c.conn()), want);
}

/// librdkafka's local queue holds only 8 records here (`queue.buffering.max.messages`), so
/// most records find it full: in both ack modes the records wait for room (on the sender
/// thread for large groups, on the server thread for small ones) and none is lost, doubled
/// or reordered. The counters' final values and the list's order show it after a replay.
#[test]
fn a_full_local_queue_delays_records_and_loses_none() {
    let k = Kaka::start();
    for mode in ["queued", "broker"] {
        let uri = format!("{}?queue.buffering.max.messages=8", k.uri(&format!("journal-full-{mode}")));
        let args = ["--kafka", uri.as_str(), "--kafka-ack-mode", mode, "--save", ""];
        let s = Server::start(&args);
        let mut con = s.conn();
        // Large pipelines (groups through the sender) and single commands (small groups).
        for round in 0..4 {
            let mut p = redis::pipe();
            for i in 0..500 {
                p.cmd("INCR").arg(format!("c{}", i % 7)).ignore();
                p.cmd("RPUSH").arg("order").arg(round * 500 + i).ignore();
            }
            let _: () = p.query(&mut con).unwrap();
            for _ in 0..20 {
                let _: i64 = redis::cmd("INCR").arg("single").query(&mut con).unwrap();
            }
        }
        wait_acked(&mut con);
        let want = state(&mut con);
        drop(s);
        let r = Server::start(&["--kafka", uri.as_str(), "--save", ""]);
        let mut con = r.conn();
        assert_eq!(state(&mut con), want, "{mode}");
        let total: i64 =
            (0..7).map(|i| redis::cmd("GET").arg(format!("c{i}")).query::<i64>(&mut con).unwrap()).sum();
        assert_eq!(total, 2000, "{mode}");
        let single: i64 = redis::cmd("GET").arg("single").query(&mut con).unwrap();
        assert_eq!(single, 80, "{mode}");
        let order: Vec<i64> = redis::cmd("LRANGE").arg("order").arg(0).arg(-1).query(&mut con).unwrap();
        assert_eq!(order, (0..2000).collect::<Vec<i64>>(), "{mode}");
    }
}

#[test]
fn a_snapshot_plus_the_topic_suffix_recovers_everything() {
    snapshot_plus_suffix(&Kaka::start());
}

#[test]
fn kafka4_a_snapshot_plus_the_topic_suffix_recovers_everything() {
    snapshot_plus_suffix(&Kafka4::start());
}

fn snapshot_plus_suffix(k: &dyn Broker) {
    let uri = k.uri("journal-b");
    let path = temp_path("journal.gcsn");
    let p = path.to_str().unwrap().to_string();
    let mut a = Server::start(&["--kafka", &uri, "--load", &p, "--save", ""]);
    workload(&a, 0);
    let mut con = a.conn();
    wait_acked(&mut con);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let at_save = state(&mut con).1;
    workload(&a, 1);
    wait_acked(&mut con);
    let want = state(&mut con);
    a.signal(9);
    a.wait_exit(Duration::from_secs(10)).unwrap();

    let b = Server::start(&["--kafka", &uri, "--load", &p, "--save", ""]);
    let mut con = b.conn();
    assert_eq!(state(&mut con), want);
    let m = info(&mut con, "kafka");
    // The replay started at the snapshot's acknowledged broker offset (inclusive): it read
    // the suffix and at most a short overlap, not the whole topic.
    let applied: i64 = m["kafka_replay_records_applied"].parse().unwrap();
    let consumed: i64 = m["kafka_replay_records_consumed"].parse().unwrap();
    assert_eq!(applied, want.1 - at_save, "{m:?}");
    assert!(consumed <= applied + 1, "the seek reread at most the boundary record: {m:?}");
}

#[test]
fn the_topic_is_checked_at_startup() {
    topic_checks(&Kaka::start());
}

#[test]
fn kafka4_the_topic_is_checked_at_startup() {
    topic_checks(&Kafka4::start());
}

fn topic_checks(k: &dyn Broker) {
    k.create_topic("two", 2, &[]);
    k.create_topic("compacted", 1, &["cleanup.policy=compact"]);
    k.create_topic("compacted-and-deleted", 1, &["cleanup.policy=compact,delete"]);
    for (topic, expect) in [
        ("two", "has 2 partitions"),
        ("compacted", "cleanup.policy=compact"),
        ("compacted-and-deleted", "cleanup.policy=compact,delete"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_goblin-core"))
            .args(["--port", "0", "--kafka", &k.uri(topic)])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{topic}: {err}");
        assert!(!err.contains("listening on"), "{err}");
    }
    // A bad --kafka value is refused before anything connects.
    let out = Command::new(env!("CARGO_BIN_EXE_goblin-core"))
        .args(["--port", "0", "--kafka", &format!("{}?acks=1", k.uri("t"))])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("'acks' cannot be set"));
}

/// The codec of every batch in kaka's first segment of partition 0 of `topic` under `dir`
/// (attribute bits 0-2: 0 none, 3 LZ4), walking the batches by their length fields up to the
/// segment's preallocated zeros.
fn segment_codecs(dir: &std::path::Path, topic: &str) -> Vec<u16> {
    let log =
        std::fs::read(dir.join("topics").join(topic).join("0").join("00000000000000000000.log")).unwrap();
    let mut codecs = Vec::new();
    let mut at = 0;
    while at + 23 <= log.len() {
        let len = u32::from_be_bytes(log[at + 8..at + 12].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        assert!(at + 12 + len <= log.len(), "the segment ends inside a batch");
        codecs.push(u16::from_be_bytes(log[at + 21..at + 23].try_into().unwrap()) & 7);
        at += 12 + len;
    }
    codecs
}

#[test]
fn batches_are_lz4_compressed_unless_the_user_names_a_codec() {
    let dir = temp_path("kaka-codec");
    let k = Kaka::start_in(&dir, common::free_port());
    for (topic, query, codec) in [("codec-default", "", 3), ("codec-none", "?compression.type=none", 0)] {
        let mut s = Server::start(&["--kafka", &format!("{}{query}", k.uri(topic))]);
        let mut con = s.conn();
        let mut p = redis::pipe();
        for i in 0..500 {
            p.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
        }
        let _: () = p.query(&mut con).unwrap();
        wait_acked(&mut con);
        let codecs = segment_codecs(&dir, topic);
        assert!(!codecs.is_empty(), "{topic}: no batch written");
        assert!(codecs.iter().all(|&c| c == codec), "{topic}: codecs {codecs:?}, expected {codec}");
        // What was written compressed reads back whole: a fresh server replays it.
        drop(con);
        let digest: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut s.conn()).unwrap();
        s.stop();
        let r = Server::start(&["--kafka", &format!("{}{query}", k.uri(topic))]);
        let replayed: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut r.conn()).unwrap();
        assert_eq!(replayed, digest, "{topic}");
    }
}

/// The seed's durability promise in broker ack mode: SIGKILL during a pipelined write flood,
/// restart from the same command line, and every acknowledged write is there exactly once
/// (each client's list is exactly 1..n, with n at least what it saw acknowledged).
#[test]
fn broker_mode_keeps_every_acknowledged_write_across_sigkill() {
    acknowledged_writes_survive_sigkill(&Kaka::start());
}

#[test]
fn kafka4_broker_mode_keeps_every_acknowledged_write_across_sigkill() {
    acknowledged_writes_survive_sigkill(&Kafka4::start());
}

/// In queued ack mode a write's OK comes before Kafka has it, and SIGKILL may lose what
/// librdkafka still held; a client that fences its pipelines with `WAITAOF 1 0 0` keeps every
/// write the fence confirmed, exactly once.
#[test]
fn queued_mode_keeps_every_write_waitaof_confirmed_across_sigkill() {
    writes_survive_sigkill(&Kaka::start(), "queued");
}

fn acknowledged_writes_survive_sigkill(k: &dyn Broker) {
    writes_survive_sigkill(k, "broker")
}

/// `mode` broker: a write counts once its reply came; queued: once a WAITAOF after it
/// answered.
fn writes_survive_sigkill(k: &dyn Broker, mode: &str) {
    let uri = k.uri(&format!("journal-flood-{mode}"));
    let args = ["--kafka", uri.as_str(), "--kafka-ack-mode", mode, "--save", ""];
    let clients = 4;
    let mut start = vec![0u64; clients];
    for round in 0..3 {
        let mut s = Server::start(&args);
        {
            let mut con = s.conn();
            // What the recovered server holds: each list exactly 1..n, n >= acknowledged.
            start = assert_flood_lists(&mut con, &start, &format!("round {round}"));
            assert_eq!(info(&mut con, "kafka")["kafka_ack_mode"], mode);
        }
        let port = s.port;
        let progress = Arc::new(AtomicU64::new(0));
        let writers = std::thread::spawn({
            let start = start.clone();
            let progress = progress.clone();
            let fence = mode == "queued";
            move || flood_fenced(port, &start, progress, Until::Never, fence)
        });
        // Kill in the middle of the flood: once a few hundred appends were acknowledged (a
        // fresh topic takes a moment to produce to), a little later each round.
        let deadline = Instant::now() + Duration::from_secs(60);
        while progress.load(Ordering::Relaxed) < 300 {
            assert!(Instant::now() < deadline, "round {round}: the flood made no progress");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(50 + 100 * round as u64));
        s.signal(9);
        s.wait_exit(Duration::from_secs(10)).unwrap();
        let results = writers.join().unwrap();
        for (c, f) in results.iter().enumerate() {
            assert!(f.sent >= f.acked, "client {c}");
            start[c] = f.acked;
        }
        assert!(results.iter().any(|f| f.acked > 0), "round {round}: nothing was acknowledged");
    }
    // A last restart checks the third round.
    let s = Server::start(&args);
    assert_flood_lists(&mut s.conn(), &start, "after the last round");
}

/// SIGTERM during a pipelined write flood, in each ack mode: the server flushes what it holds
/// (in queued mode, records lingering in librdkafka; in broker mode, the group in flight and
/// the records staged behind it) before it exits 0, so after a restart every acknowledged
/// write is there exactly once. In queued mode this is what tells a graceful stop from a crash.
#[test]
fn sigterm_flushes_every_acknowledged_write_in_both_ack_modes() {
    sigterm_flushes(&Kaka::start());
}

#[test]
fn kafka4_sigterm_flushes_every_acknowledged_write_in_both_ack_modes() {
    sigterm_flushes(&Kafka4::start());
}

fn sigterm_flushes(k: &dyn Broker) {
    for mode in ["queued", "broker"] {
        let uri = k.uri(&format!("journal-sigterm-{mode}"));
        let args = ["--kafka", uri.as_str(), "--kafka-ack-mode", mode, "--save", ""];
        let mut s = Server::start(&args);
        let port = s.port;
        let progress = Arc::new(AtomicU64::new(0));
        let writers = std::thread::spawn({
            let progress = progress.clone();
            move || flood(port, &[0, 0, 0, 0], progress, Until::Never)
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while progress.load(Ordering::Relaxed) < 2000 {
            assert!(Instant::now() < deadline, "{mode}: the flood made no progress");
            std::thread::sleep(Duration::from_millis(5));
        }
        let st = s.stop();
        assert!(st.success(), "{mode}: exit status {st:?}\n{}", s.log());
        let results = writers.join().unwrap();
        assert!(s.log().contains("Kafka journal flushed"), "{mode}: {}", s.log());
        let r = Server::start(&args);
        let acked: Vec<u64> = results.iter().map(|f| f.acked).collect();
        assert_flood_lists(&mut r.conn(), &acked, mode);
    }
}

/// A record Kafka never acknowledges (the broker gone for longer than the user's
/// `message.timeout.ms`) is a permanent delivery failure: the server stops with exit 70 and a
/// message naming topic, partition and error, rather than serve writes the log lacks.
#[test]
fn a_permanent_delivery_failure_stops_the_server() {
    let mut k = Kaka::start();
    let uri = format!("{}?message.timeout.ms=1500", k.uri("journal-timeout"));
    let mut s = Server::start(&["--kafka", uri.as_str(), "--save", ""]);
    let mut con = s.conn();
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut con).unwrap();
    wait_acked(&mut con);
    let _ = k.child.kill();
    let _ = k.child.wait();
    // queued ack mode answers at once; the record then waits for a broker that never comes.
    let _: () = redis::cmd("SET").arg("b").arg("2").query(&mut con).unwrap();
    let st = s.wait_exit(Duration::from_secs(60)).expect("the server stops");
    let log = s.log();
    assert_eq!(st.code(), Some(70), "{log}");
    assert!(log.contains("topic journal-timeout, partition 0") && log.contains("timed out"), "{log}");
}

/// A write too large for one record of the topic is refused before it runs, with an error that
/// names the limit: the server goes on, nothing is stored, and inside MULTI the transaction
/// fails at EXEC. A large write that fits is journaled and recovered as usual, and so are
/// in-place edits (APPEND, SETRANGE, SETBIT, BITFIELD) that grow a string past the limit: their
/// records are the edits, not the strings.
#[test]
fn writes_larger_than_a_record_are_refused_before_they_run() {
    let k = Kaka::start();
    let uri = k.uri("journal-big");
    let args = ["--kafka", uri.as_str(), "--save", ""];
    let s = Server::start(&args);
    let mut con = s.conn();
    let big = vec![b'x'; 1_500_000];
    let err = redis::cmd("SET").arg("big").arg(&big).query::<()>(&mut con).unwrap_err();
    assert!(err.to_string().contains("record size limit"), "{err}");
    let err = redis::cmd("HSET").arg("h").arg("f").arg(&big).query::<i64>(&mut con).unwrap_err();
    assert!(err.to_string().contains("record size limit"), "{err}");
    let _: () = redis::cmd("MULTI").query(&mut con).unwrap();
    assert!(redis::cmd("SET").arg("big").arg(&big).query::<()>(&mut con).is_err());
    let err = redis::cmd("EXEC").query::<redis::Value>(&mut con).unwrap_err();
    assert!(err.to_string().contains("Transaction discarded"), "{err}");
    let fits = vec![b'y'; 200_000];
    let _: () = redis::cmd("SET").arg("fits").arg(&fits).query(&mut con).unwrap();
    // An in-place edit journals itself, not the string it leaves: growing a string past the
    // record limit with APPEND, SETRANGE, SETBIT or BITFIELD is a small record, and recovers.
    let _: () = redis::cmd("SET").arg("s").arg(vec![b's'; 900_000]).query(&mut con).unwrap();
    let len: i64 = redis::cmd("APPEND").arg("s").arg(&fits).query(&mut con).unwrap();
    assert_eq!(len, 1_100_000);
    let edits = [
        (vec!["SETRANGE", "g1", "1200000", "x"], 1_200_001),
        (vec!["SETBIT", "g2", "9600000", "1"], 1_200_001),
        (vec!["BITFIELD", "g3", "SET", "u8", "#1200000", "1"], 1_200_001),
    ];
    for (cmd, _) in &edits {
        let _: redis::Value = redis::cmd(cmd[0]).arg(&cmd[1..]).query(&mut con).unwrap();
    }
    // Out of Redis's range, the command's own error comes first.
    let err = redis::cmd("SETBIT").arg("g").arg("4294967296").arg("1").query::<i64>(&mut con).unwrap_err();
    assert!(err.to_string().contains("bit offset is not an integer or out of range"), "{err}");
    // A script's write is held to the same limit: redis.call raises the error.
    let err = redis::cmd("EVAL")
        .arg("return redis.call('SET', KEYS[1], string.rep('x', 1500000))")
        .arg(1)
        .arg("g")
        .query::<redis::Value>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("record size limit"), "{err}");
    let n: i64 = redis::cmd("EXISTS").arg("g").query(&mut con).unwrap();
    assert_eq!(n, 0);
    let n: i64 = redis::cmd("EXISTS").arg("big").arg("h").query(&mut con).unwrap();
    assert_eq!(n, 0);
    // A write whose request is small can store much more: SORT .. STORE with a GET pattern
    // fetches whole strings. Its list is journaled over several records, each within the limit.
    let _: i64 = redis::cmd("RPUSH").arg("l").arg(&["a", "b", "c", "d"]).query(&mut con).unwrap();
    for c in ["a", "b", "c", "d"] {
        let _: () = redis::cmd("SET").arg(format!("w_{c}")).arg(c.repeat(400_000)).query(&mut con).unwrap();
    }
    let n: i64 =
        redis::cmd("SORT").arg(&["l", "ALPHA", "GET", "w_*", "STORE", "sorted"]).query(&mut con).unwrap();
    assert_eq!(n, 4);
    wait_acked(&mut con);
    drop(s);
    let r = Server::start(&args);
    let mut con = r.conn();
    let got: Vec<u8> = redis::cmd("GET").arg("fits").query(&mut con).unwrap();
    assert_eq!(got, fits);
    let n: i64 = redis::cmd("EXISTS").arg("big").arg("h").query(&mut con).unwrap();
    assert_eq!(n, 0);
    let sorted: Vec<Vec<u8>> = redis::cmd("LRANGE").arg("sorted").arg(0).arg(-1).query(&mut con).unwrap();
    let want: Vec<Vec<u8>> = ["a", "b", "c", "d"].iter().map(|c| c.repeat(400_000).into_bytes()).collect();
    assert!(sorted == want, "the stored list came back whole and in order");
    let mut grown = vec![b's'; 900_000];
    grown.extend_from_slice(&fits);
    let got: Vec<u8> = redis::cmd("GET").arg("s").query(&mut con).unwrap();
    assert!(got == grown, "the appended string came back whole");
    for (cmd, len) in &edits {
        let n: i64 = redis::cmd("STRLEN").arg(cmd[1]).query(&mut con).unwrap();
        assert_eq!(n, *len, "{cmd:?}");
    }
    let bit: i64 = redis::cmd("GETBIT").arg("g2").arg(9_600_000).query(&mut con).unwrap();
    assert_eq!(bit, 1);
    let field: Vec<i64> =
        redis::cmd("BITFIELD").arg(&["g3", "GET", "u8", "#1200000"]).query(&mut con).unwrap();
    assert_eq!(field, vec![1]);
}

/// The broker goes away at runtime and comes back: in broker ack mode the writers' replies
/// wait, unacknowledged bytes pass the watermark and writes are held (another client's write
/// waits, with the read behind it on its connection, while INFO shows the backpressure and
/// PING is answered), and when the broker returns everything is acknowledged, in order,
/// exactly once.
#[test]
fn broker_down_at_runtime_holds_writes_and_loses_nothing() {
    let (dir, port) = (temp_path("kaka-restart"), common::free_port());
    let kaka = Some(Kaka::start_in(&dir, port));
    let uri = kaka.as_ref().unwrap().uri("journal-down");
    broker_down(&uri, &mut KakaOutage { dir, port, kaka });
}

#[test]
fn kafka4_broker_down_at_runtime_holds_writes_and_loses_nothing() {
    let mut k = Kafka4::start();
    let uri = k.uri("journal-down");
    broker_down(&uri, &mut k);
}

/// A broker a test takes away (killed: no shutdown) and brings back with its data, on the
/// same address.
trait Outage {
    fn down(&mut self);
    fn up(&mut self);
}

struct KakaOutage {
    dir: std::path::PathBuf,
    port: u16,
    kaka: Option<Kaka>,
}

impl Outage for KakaOutage {
    fn down(&mut self) {
        let mut k = self.kaka.take().expect("kaka is up");
        let _ = k.child.kill();
        let _ = k.child.wait();
    }
    fn up(&mut self) {
        self.kaka = Some(Kaka::start_in(&self.dir, self.port));
    }
}

impl Outage for Kafka4 {
    fn down(&mut self) {
        self.kill();
    }
    fn up(&mut self) {
        self.restart();
    }
}

fn broker_down(uri: &str, broker: &mut dyn Outage) {
    let args = ["--kafka", uri, "--kafka-ack-mode", "broker", "--kafka-pending-bytes", "256", "--save", ""];
    let s = Server::start(&args);
    let progress = Arc::new(AtomicU64::new(0));
    let writers = std::thread::spawn({
        let progress = progress.clone();
        let port = s.port;
        move || flood(port, &[0, 0], progress, Until::At(Instant::now() + Duration::from_secs(6)))
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while progress.load(Ordering::Relaxed) < 200 {
        assert!(Instant::now() < deadline, "no progress before the outage");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The outage.
    broker.down();
    std::thread::sleep(Duration::from_millis(500));
    let during = progress.load(Ordering::Relaxed);
    // Writes are held; reads, INFO among them, are answered and show the backpressure.
    let mut other = s.conn();
    let m = info(&mut other, "kafka");
    assert_eq!(m["kafka_input_paused"], "1", "{m:?}");
    let pong: String = redis::cmd("PING").query(&mut other).unwrap();
    assert_eq!(pong, "PONG");
    let mut set = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    set.set_read_timeout(Some(Duration::from_millis(700))).unwrap();
    {
        use std::io::{Read, Write};
        // A write, then a read behind it on the same connection: both wait for the write.
        set.write_all(b"SET held-write 1\r\nGET held-write\r\n").unwrap();
        let mut b = [0u8; 5];
        assert!(set.read_exact(&mut b).is_err(), "a write must wait while the broker is away");
        assert_eq!(
            progress.load(Ordering::Relaxed),
            during,
            "no write is acknowledged while the broker is away"
        );
        broker.up();
        set.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut b = [0u8; 5 + 7];
        set.read_exact(&mut b).expect("the held write answered once the broker is back");
        assert_eq!(&b, b"+OK\r\n$1\r\n1\r\n");
    }
    let results = writers.join().unwrap();
    assert!(progress.load(Ordering::Relaxed) > during, "writes resumed after the outage");
    let mut con = s.conn();
    wait_acked(&mut con);
    for (c, f) in results.iter().enumerate() {
        assert!(!f.cut, "client {c}: the connection broke");
        let acked = &f.acked;
        let items = flood_list(&mut con, c);
        assert_eq!(items, (1..=items.len() as u64).collect::<Vec<_>>(), "client {c}: order or duplicates");
        assert_eq!(items.len() as u64, *acked, "client {c}: every write was acknowledged once");
    }
    let want = state(&mut con);
    drop(s);
    // And the topic holds exactly that history.
    let r = Server::start(&args);
    assert_eq!(state(&mut r.conn()), want);
}

/// A client that writes faster than Kafka acknowledges crosses `--kafka-pending-bytes` back and
/// forth: INFO counts every pause, and the log says it once per quiet period (with the resume
/// that ended it), not once per crossing. Nothing is lost on the way.
#[test]
fn input_pauses_are_counted_and_logged_once_per_quiet_period() {
    let k = Kaka::start();
    let uri = k.uri("journal-pauses");
    let s = Server::start(&["--kafka", &uri, "--kafka-pending-bytes", "256", "--save", ""]);
    let progress = Arc::new(AtomicU64::new(0));
    let results = flood(s.port, &[0, 0], progress, Until::At(Instant::now() + Duration::from_secs(2)));
    let mut con = s.conn();
    wait_acked(&mut con);
    let pauses: u64 = info(&mut con, "kafka")["kafka_input_pauses"].parse().unwrap();
    assert!(pauses >= 3, "the flood paused only {pauses} times");
    let log = s.log();
    let logged = log.matches("over --kafka-pending-bytes unacknowledged; holding writes").count();
    let resumed = log.matches("Kafka journal: caught up after").count();
    assert_eq!((logged, resumed), (1, 1), "{pauses} pauses within 10 s:\n{log}");
    for (c, f) in results.iter().enumerate() {
        assert_eq!(flood_list(&mut con, c), (1..=f.acked).collect::<Vec<_>>(), "client {c}");
    }
}

/// WAITAOF on the journal. In `queued` ack mode a write is answered before Kafka has it;
/// WAITAOF 1 is how the client learns it is durable: with the broker away it waits (and
/// answers [0, 0] at its timeout), and a WAITAOF parked meanwhile is answered [1, 0] once the
/// broker is back and has acknowledged the write. In `broker` mode the write's reply already
/// waited, so WAITAOF 1 answers at once.
#[test]
fn waitaof_waits_for_kafka_to_hold_the_clients_writes() {
    let (dir, port) = (temp_path("kaka-waitaof"), common::free_port());
    let mut broker = KakaOutage { port, kaka: Some(Kaka::start_in(&dir, port)), dir };
    let uri = broker.kaka.as_ref().unwrap().uri("journal-waitaof");
    let s = Server::start(&["--kafka", uri.as_str(), "--kafka-ack-mode", "queued", "--save", ""]);
    let mut con = s.conn();
    let fresh = s.conn();
    let aof: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("appendonly").query(&mut con).unwrap();
    assert_eq!(aof, ["appendonly", "yes"], "the journal is the append-only log");
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut con).unwrap();
    let r: Vec<i64> = redis::cmd("WAITAOF").arg(1).arg(0).arg(0).query(&mut con).unwrap();
    assert_eq!(r, [1, 0]);
    broker.down();
    let _: () = redis::cmd("SET").arg("b").arg("2").query(&mut con).unwrap();
    // At its timeout it answers what it has (parking itself is checked below).
    let r: Vec<i64> = redis::cmd("WAITAOF").arg(1).arg(0).arg(300).query(&mut con).unwrap();
    assert_eq!(r, [0, 0], "the write cannot be in Kafka while the broker is away");
    // A connection that has written nothing has nothing to wait for.
    let mut fresh = fresh;
    let r: Vec<i64> = redis::cmd("WAITAOF").arg(1).arg(0).arg(0).query(&mut fresh).unwrap();
    assert_eq!(r, [1, 0]);
    // Parked with no timeout, answered by the acknowledgement.
    let waiter = std::thread::spawn(move || {
        let r: Vec<i64> = redis::cmd("WAITAOF").arg(1).arg(0).arg(0).query(&mut con).unwrap();
        (r, con)
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(!waiter.is_finished(), "WAITAOF answered while the broker was away");
    let m = info(&mut s.conn(), "clients");
    assert_eq!(m["blocked_clients"], "1", "{m:?}");
    broker.up();
    let (r, mut con) = waiter.join().unwrap();
    assert_eq!(r, [1, 0]);
    let k = info(&mut con, "kafka");
    let r = info(&mut con, "replication");
    assert_eq!(k["kafka_acknowledged_offset"], r["master_repl_offset"], "{k:?}");
    drop(s);
    let s = Server::start(&["--kafka", uri.as_str(), "--kafka-ack-mode", "broker", "--save", ""]);
    let mut con = s.conn();
    let b: String = redis::cmd("GET").arg("b").query(&mut con).unwrap();
    assert_eq!(b, "2");
    let _: () = redis::cmd("SET").arg("c").arg("3").query(&mut con).unwrap();
    let r: Vec<i64> = redis::cmd("WAITAOF").arg(1).arg(0).arg(0).query(&mut con).unwrap();
    assert_eq!(r, [1, 0]);
}

/// A snapshot holds only what Kafka holds. Saved with records unacknowledged, it would carry
/// writes that a crash then takes from the topic; the primary restarted from it would continue
/// the lineage after them, and every later replay of the topic would stop at the missing
/// offsets. So SAVE (and BGSAVE, and the final save at shutdown) first waits for Kafka's
/// acknowledgements, and fails, or at shutdown is skipped, while Kafka is away.
#[test]
fn snapshots_never_hold_writes_the_topic_lacks() {
    let (dir, port) = (temp_path("kaka-settle"), common::free_port());
    let mut k = Kaka::start_in(&dir, port);
    let uri = k.uri("journal-settle");
    let path = temp_path("settle.gcsn");
    let p = path.to_str().unwrap().to_string();
    // Save rules that never fire during the test, but ask for a final snapshot at SIGTERM.
    let args = ["--kafka", uri.as_str(), "--kafka-ack-mode", "queued", "--load", &p, "--save", "3600 1"];
    let mut a = Server::start(&args);
    let mut con = a.conn();
    // Writes still unacknowledged when SAVE runs: it waits for them, so right after it
    // nothing is pending and the snapshot ends where Kafka does.
    let mut pipe = redis::pipe();
    for i in 0..2000 {
        pipe.cmd("INCR").arg("counter").ignore();
        pipe.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
    }
    pipe.cmd("SAVE");
    let saved: Vec<String> = pipe.query(&mut con).unwrap();
    assert_eq!(saved, vec!["OK".to_string()]);
    let m = info(&mut con, "kafka");
    assert_eq!(m["kafka_pending_records"], "0", "{m:?}");

    // Kafka away: writes are still answered (queued mode), snapshots are refused.
    let _ = k.child.kill();
    let _ = k.child.wait();
    for i in 0..20 {
        let _: () = redis::cmd("SET").arg(format!("lost{i}")).arg(i).query(&mut con).unwrap();
    }
    let e = redis::cmd("SAVE").query::<()>(&mut con).unwrap_err().to_string();
    assert!(e.contains("Kafka has not acknowledged 20 journal records"), "{e}");
    let e = redis::cmd("BGSAVE").query::<()>(&mut con).unwrap_err().to_string();
    assert!(e.contains("Can't save in background: Kafka has not acknowledged"), "{e}");
    let m = info(&mut con, "persistence");
    assert_eq!(m["rdb_last_bgsave_status"], "err", "{m:?}");
    // The crash takes the 20 unacknowledged writes.
    a.signal(9);
    a.wait_exit(Duration::from_secs(10)).unwrap();
    k = Kaka::start_in(&dir, port);
    let b = Server::start(&args);
    let mut con = b.conn();
    let (counter, lost): (i64, i64) =
        redis::pipe().cmd("GET").arg("counter").cmd("EXISTS").arg("lost0").query(&mut con).unwrap();
    assert_eq!((counter, lost), (2000, 0));
    for i in 0..40 {
        let _: () = redis::cmd("SET").arg(format!("after{i}")).arg(i).query(&mut con).unwrap();
    }
    wait_acked(&mut con);
    let want = state(&mut con);
    // The topic has no hole: a server recovering from it alone reaches the same state.
    let fresh = Server::start(&["--kafka", uri.as_str(), "--save", ""]);
    assert_eq!(state(&mut fresh.conn()), want);
    drop(fresh);

    // Kafka away at shutdown: the save rules' final snapshot is skipped and SIGTERM exits.
    let _ = k.child.kill();
    let _ = k.child.wait();
    for i in 0..5 {
        let _: () = redis::cmd("SET").arg(format!("unsaved{i}")).arg(i).query(&mut con).unwrap();
    }
    // An explicit SHUTDOWN SAVE fails as a failed save does, and the server goes on.
    let e = redis::cmd("SHUTDOWN").arg("SAVE").query::<()>(&mut con).unwrap_err().to_string();
    assert!(e.contains("Errors trying to SHUTDOWN"), "{e}");
    assert!(b.log().contains("not saving the final snapshot: Kafka has not acknowledged 5"), "{}", b.log());
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    let mut b = b;
    b.signal(15);
    b.wait_exit(Duration::from_secs(40)).expect("SIGTERM exits while Kafka is away");
    assert!(b.log().contains("not saving the final snapshot"), "{}", b.log());
    k = Kaka::start_in(&dir, port);
    let c = Server::start(&args);
    assert_eq!(state(&mut c.conn()), want);
    drop(c);
    drop(k);
}

/// INFO kafka while a write waits for the broker (broker ack mode, the broker away): the
/// pending record, its age, and the replication payload held back for it are reported, and
/// all three return to zero once the broker is back and acknowledges it.
#[test]
fn info_reports_the_age_and_retained_bytes_of_unacknowledged_writes() {
    use std::io::{Read, Write};
    let (dir, port) = (temp_path("kaka-info"), common::free_port());
    let mut k = Kaka::start_in(&dir, port);
    let uri = k.uri("journal-info");
    let s = Server::start(&["--kafka", uri.as_str(), "--kafka-ack-mode", "broker", "--save", ""]);
    let mut con = s.conn();
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut con).unwrap();
    wait_acked(&mut con);
    // Nothing pending: no pending record, no age, nothing retained.
    let assert_idle = |con: &mut redis::Connection| {
        let m = info(con, "kafka");
        let fields = ["kafka_pending_records", "kafka_oldest_pending_age_ms", "kafka_retained_batch_bytes"];
        assert!(fields.iter().all(|f| m[*f] == "0"), "{m:?}");
    };
    assert_idle(&mut con);
    let _ = k.child.kill();
    let _ = k.child.wait();
    let mut writer = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    writer.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n").unwrap();
    // The write waits, and the age of the oldest pending record grows with it.
    let pending_age = |con: &mut redis::Connection| {
        let m = info(con, "kafka");
        assert_eq!(m["kafka_pending_records"], "1", "{m:?}");
        m["kafka_oldest_pending_age_ms"].parse::<u64>().unwrap()
    };
    std::thread::sleep(Duration::from_millis(200));
    let first = pending_age(&mut con);
    std::thread::sleep(Duration::from_millis(200));
    let later = pending_age(&mut con);
    assert!(first > 0 && later > first, "the age went {first} ms -> {later} ms");
    let down = info(&mut con, "kafka");
    let retained: u64 = down["kafka_retained_batch_bytes"].parse().unwrap();
    assert!(retained > 0, "the write's replication frame waits for the broker: {down:?}");
    k = Kaka::start_in(&dir, port);
    writer.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut b = [0u8; 5];
    writer.read_exact(&mut b).expect("the write is acknowledged once the broker is back");
    assert_eq!(&b, b"+OK\r\n");
    wait_acked(&mut con);
    assert_idle(&mut con);
    drop(s);
    drop(k);
}

/// Broker ack mode forms its produce groups itself and waits briefly for the writes of the
/// clients the last group released: clients that go quiet after their write must not hold the
/// others' writes back for good. Ten clients write once together, nine go quiet, and the tenth
/// goes on writing one INCR at a time, each acknowledged in turn.
#[test]
fn broker_mode_groups_do_not_wait_for_clients_that_went_quiet() {
    use std::io::{Read, Write};
    let k = Kaka::start();
    let uri = k.uri("journal-groups");
    let s = Server::start(&["--kafka", uri.as_str(), "--kafka-ack-mode", "broker", "--save", ""]);
    let mut clients: Vec<TcpStream> =
        (0..10).map(|_| TcpStream::connect(("127.0.0.1", s.port)).unwrap()).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let key = format!("q{i}");
        c.write_all(format!("*2\r\n$4\r\nINCR\r\n${}\r\n{key}\r\n", key.len()).as_bytes()).unwrap();
    }
    for c in &mut clients {
        let mut b = [0u8; 4];
        c.read_exact(&mut b).unwrap();
        assert_eq!(&b, b":1\r\n");
    }
    let active = &mut clients[0];
    for n in 2..=200u32 {
        active.write_all(b"*2\r\n$4\r\nINCR\r\n$2\r\nq0\r\n").unwrap();
        let want = format!(":{n}\r\n");
        let mut b = vec![0u8; want.len()];
        active.read_exact(&mut b).expect("each write is acknowledged while the others stay quiet");
        assert_eq!(b, want.as_bytes());
    }
    let mut con = s.conn();
    wait_acked(&mut con);
    let m = info(&mut con, "kafka");
    assert_eq!(m["kafka_records_produced"], "209", "{m:?}");
}

/// A snapshot without Kafka cursors (saved by a server running without --kafka) falls back to
/// the first record at or after the file's creation time minus --kafka-time-buffer.
#[test]
fn a_snapshot_without_cursors_replays_from_its_creation_time() {
    replays_from_creation_time(&Kaka::start());
}

/// The same against Apache Kafka, whose ListOffsets by timestamp the fallback relies on.
#[test]
fn kafka4_a_snapshot_without_cursors_replays_from_its_creation_time() {
    replays_from_creation_time(&Kafka4::start());
}

fn replays_from_creation_time(k: &dyn Broker) {
    let uri = k.uri("journal-time");
    let first = temp_path("with-cursor.gcsn");
    let legacy = temp_path("no-cursor.gcsn");
    // The journaled history, and a snapshot of it.
    let mut a = Server::start(&["--kafka", &uri, "--load", first.to_str().unwrap(), "--save", ""]);
    workload(&a, 0);
    let mut con = a.conn();
    wait_acked(&mut con);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let journaled = state(&mut con).1;
    a.signal(9);
    a.wait_exit(Duration::from_secs(10)).unwrap();
    // The history continued without --kafka (a successor lineage from the snapshot's
    // offset): its snapshot has no cursor.
    std::fs::copy(&first, &legacy).unwrap();
    let b = Server::start(&["--load", legacy.to_str().unwrap(), "--save", ""]);
    let mut con = b.conn();
    let _: () = redis::cmd("SET").arg("unjournaled").arg("1").query(&mut con).unwrap();
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let want = state(&mut con);
    drop(b);
    // No buffer: the topic holds nothing newer than the file: nothing is replayed.
    let c = Server::start(&["--kafka", &uri, "--load", legacy.to_str().unwrap(), "--save", ""]);
    assert!(c.log().contains("no Kafka cursor"), "{}", c.log());
    let mut con = c.conn();
    assert_eq!(state(&mut con), want);
    assert_eq!(info(&mut con, "kafka")["kafka_replay_records_consumed"], "0");
    drop(c);
    // A buffer reaching back before the journaled writes rereads them: all of the lineage the
    // snapshot's continues, so all passed over.
    let d = Server::start(&[
        "--kafka",
        &uri,
        "--load",
        legacy.to_str().unwrap(),
        "--kafka-time-buffer",
        "3600",
        "--save",
        "",
    ]);
    let mut con = d.conn();
    assert_eq!(state(&mut con), want);
    let m = info(&mut con, "kafka");
    assert_eq!(m["kafka_replay_records_consumed"], journaled.to_string(), "{m:?}");
    assert_eq!(m["kafka_replay_records_older_lineage"], journaled.to_string(), "{m:?}");
    assert_eq!(m["kafka_replay_records_applied"], "0", "{m:?}");
}

/// The replay property end to end: a random workload through a journaling primary (every
/// type, TTLs, EXEC, blocking pops: in the workload itself, and from a second client parked
/// in them while the first one writes, so that pushes serve parked pops); a fresh server
/// replaying the topic from scratch, and one from a snapshot taken midway plus the suffix,
/// both reach the primary's digest at the primary's offset.
#[test]
fn random_workloads_replay_to_the_same_digest() {
    random_workloads_replay(&Kaka::start());
}

#[test]
fn kafka4_random_workloads_replay_to_the_same_digest() {
    random_workloads_replay(&Kafka4::start());
}

fn random_workloads_replay(k: &dyn Broker) {
    use rand::SeedableRng;
    let seed: u64 = rand::random();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let uri = k.uri("journal-random");
    let snap = temp_path("random.gcsn");
    let sp = snap.to_str().unwrap().to_string();
    let mut a = Server::start(&["--kafka", &uri, "--load", &sp, "--save", ""]);
    let mut con = a.conn();
    // The parked client: blocking pops over the workload's lists and sorted sets, each
    // waiting up to 50 ms, until the workload ends.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let served = Arc::new(AtomicU64::new(0));
    let popper = {
        let (stop, served) = (stop.clone(), served.clone());
        let mut con = a.conn();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5eed);
        std::thread::spawn(move || {
            use rand::Rng;
            while !stop.load(Ordering::Relaxed) {
                let (i, j) = (rng.gen_range(0..4), rng.gen_range(0..4));
                let mut c = match rng.gen_range(0..3) {
                    0 => redis::cmd("BLMOVE"),
                    1 => redis::cmd("BRPOP"),
                    _ => redis::cmd("BZPOPMAX"),
                };
                match rng.gen_range(0..3) {
                    0 => c.arg(format!("l{i}")).arg(format!("l{j}")).arg("LEFT").arg("LEFT").arg("0.05"),
                    1 => c.arg(format!("l{i}")).arg(format!("l{j}")).arg("0.05"),
                    _ => c.arg(format!("z{i}")).arg(format!("z{j}")).arg("0.05"),
                };
                // WRONGTYPE and timeouts are part of the workload.
                if let Ok(v) = c.query::<redis::Value>(&mut con) {
                    if v != redis::Value::Nil {
                        served.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        })
    };
    for half in 0..2 {
        // Short TTLs first, so keys expire (lazily and actively) during the workload; long
        // ones after, so that nothing expires while the servers are compared.
        let ttl = if half == 0 { 1..1500 } else { 600_000..900_000 };
        for _ in 0..20 {
            let mut p = redis::pipe();
            for _ in 0..50 {
                let c = random_command(&mut rng, ttl.clone());
                p.cmd(&c[0]).arg(&c[1..]).ignore();
            }
            // Errors (WRONGTYPE ...) are part of the workload; the pipeline's other commands run.
            let _: redis::RedisResult<()> = p.query(&mut con);
        }
        let _: () = redis::pipe()
            .atomic()
            .cmd("INCR")
            .arg("tx")
            .cmd("RPUSH")
            .arg("l0")
            .arg("x")
            .query(&mut con)
            .unwrap();
        if half == 0 {
            // Let every short TTL pass, then touch every key: what active expiry has not
            // removed yet goes now (each removal is a journaled DEL).
            std::thread::sleep(Duration::from_millis(1600));
            for db in 0..3 {
                let _: () = redis::cmd("SELECT").arg(db).query(&mut con).unwrap();
                let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
                for key in keys {
                    let _: i64 = redis::cmd("EXISTS").arg(key).query(&mut con).unwrap();
                }
            }
            wait_acked(&mut con);
            let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    popper.join().unwrap();
    assert!(served.load(Ordering::Relaxed) > 0, "no blocking pop was served");
    wait_acked(&mut con);
    let want = state(&mut con);
    a.signal(9);
    a.wait_exit(Duration::from_secs(10)).unwrap();
    // From the snapshot plus the suffix.
    let b = Server::start(&["--kafka", &uri, "--load", &sp, "--save", ""]);
    assert_eq!(state(&mut b.conn()), want, "snapshot + suffix, seed {seed}");
    drop(b);
    // From the topic alone.
    let c = Server::start(&["--kafka", &uri, "--save", ""]);
    assert_eq!(state(&mut c.conn()), want, "topic alone, seed {seed}");
}

/// One record as another producer (or a forged goblin-core) writes it: a value (None: a
/// tombstone) and headers.
struct Rec {
    value: Option<Vec<u8>>,
    headers: Vec<(&'static str, String)>,
}

/// A record without goblin headers holding `bytes` as they are.
fn raw(bytes: &[u8]) -> Rec {
    Rec { value: Some(bytes.to_vec()), headers: Vec::new() }
}

/// A record without goblin headers holding one RESP2 command.
fn cmd(args: &[&str]) -> Rec {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    raw(&v)
}

/// A lineage no server in these tests writes.
const FORGED_LINEAGE: &str = "0123456789abcdef0123456789abcdef01234567";

/// A record that claims to come from goblin-core lineage FORGED_LINEAGE at `offset`.
fn forged(args: &[&str], offset: u64) -> Rec {
    let mut r = cmd(args);
    r.headers = vec![
        ("goblin-replication-version", "1".into()),
        ("goblin-replication-id", FORGED_LINEAGE.into()),
        ("goblin-replication-offset", offset.to_string()),
        ("goblin-applied-through", "-1".into()),
    ];
    r
}

/// A producer that is not goblin-core, writing to partition 0.
fn send(p: &rdkafka::producer::BaseProducer, topic: &str, r: &Rec) {
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::BaseRecord;
    let mut headers = OwnedHeaders::new();
    for (k, v) in &r.headers {
        headers = headers.insert(Header { key: k, value: Some(v.as_str()) });
    }
    let mut rec = BaseRecord::<(), [u8]>::to(topic).partition(0).headers(headers);
    if let Some(v) = &r.value {
        rec = rec.payload(v.as_slice());
    }
    loop {
        match p.send(rec) {
            Ok(()) => return,
            Err((_, back)) => {
                rec = back;
                p.poll(Duration::from_millis(10));
            }
        }
    }
}

/// Writes `records` in order and waits until the broker has them all.
fn produce(addr: &str, topic: &str, records: &[Rec]) {
    use rdkafka::producer::Producer;
    let p = other_producer(addr);
    for r in records {
        send(&p, topic, r);
    }
    p.flush(Duration::from_secs(30)).expect("the broker acknowledged the records");
}

/// The record contract's refusals: (name, records, what the error says, the broker offset of
/// the bad record). Each case's topic holds only its records.
fn bad_records() -> Vec<(&'static str, Vec<Rec>, &'static str, i64)> {
    vec![
        ("inline", vec![raw(b"SET a 1\r\n")], "not a RESP2 array", 0),
        ("resp3-map", vec![raw(b"%1\r\n$1\r\na\r\n$1\r\nb\r\n")], "not a RESP2 array", 0),
        ("resp3-argument", vec![raw(b"*2\r\n$3\r\nDEL\r\n:1\r\n")], "not a bulk string", 0),
        ("empty", vec![raw(b"")], "empty record", 0),
        ("tombstone", vec![Rec { value: None, headers: Vec::new() }], "tombstone", 0),
        ("partial", vec![raw(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n")], "partial", 0),
        (
            "two-commands",
            vec![raw(b"*2\r\n$3\r\nDEL\r\n$1\r\na\r\n*2\r\n$3\r\nDEL\r\n$1\r\nb\r\n")],
            "one record holds exactly one command",
            0,
        ),
        ("unknown", vec![cmd(&["SET", "ok", "1"]), cmd(&["NOPE", "a"])], "unknown command 'NOPE'", 1),
        ("wrong-arity", vec![cmd(&["SET", "a"])], "wrong number of arguments", 0),
        ("not-a-write", vec![cmd(&["CONFIG", "SET", "maxclients", "1"])], "not a keyspace write", 0),
        ("write-error", vec![cmd(&["SET", "a", "x"]), cmd(&["INCR", "a"])], "not an integer", 1),
        ("db-malformed", vec![in_db(&["SET", "a", "1"], "two")], "malformed goblin-db header", 0),
        (
            "db-out-of-range",
            vec![in_db(&["SET", "a", "1"], "16")],
            "goblin-db 16: this server has databases 0 to 15",
            0,
        ),
    ]
}

/// Another producer's command for database `db` (the `goblin-db` header, as given).
fn in_db(args: &[&str], db: &str) -> Rec {
    let mut r = cmd(args);
    r.headers.push(("goblin-db", db.to_string()));
    r
}

/// Another producer's records name their database with `goblin-db` (none: database 0): the
/// startup replay and a running primary apply each in its own, and a restart from the topic
/// holds every database as the primary did.
#[test]
fn other_producers_records_land_in_their_database() {
    let k = Kaka::start();
    let topic = "external-databases";
    k.create_topic(topic, 1, &[]);
    produce(k.addr(), topic, &[in_db(&["SET", "x", "three"], "3"), cmd(&["SET", "x", "zero"])]);
    let s = Server::start(&["--kafka", &k.uri(topic), "--save", ""]);
    let mut con = s.conn();
    let get = |con: &mut redis::Connection, db: u32, key: &str| -> Option<String> {
        let _: () = redis::cmd("SELECT").arg(db).query(con).unwrap();
        redis::cmd("GET").arg(key).query(con).unwrap()
    };
    assert_eq!(get(&mut con, 3, "x").as_deref(), Some("three"));
    assert_eq!(get(&mut con, 0, "x").as_deref(), Some("zero"));
    let _: () = redis::cmd("SELECT").arg(5).query(&mut con).unwrap();
    let _: () = redis::cmd("SET").arg("mine").arg("five").query(&mut con).unwrap();
    produce(k.addr(), topic, &[in_db(&["SET", "y", "seven"], "7")]);
    // (The runtime count: the first two were the startup replay's.)
    wait_consumed_external(&mut con, 1);
    assert_eq!(get(&mut con, 7, "y").as_deref(), Some("seven"));
    assert_eq!(get(&mut con, 0, "y"), None);
    wait_acked(&mut con);
    let want = state(&mut con);
    drop(s);
    let again = Server::start(&["--kafka", &k.uri(topic), "--save", ""]);
    let mut con = again.conn();
    assert_eq!(state(&mut con), want);
    assert_eq!(get(&mut con, 5, "mine").as_deref(), Some("five"));
}

/// At startup every refusal exits non-zero before listening, naming topic, partition, offset.
#[test]
fn bad_records_stop_the_startup_replay() {
    bad_records_at_startup(&Kaka::start());
}

#[test]
fn kafka4_bad_records_stop_the_startup_replay() {
    bad_records_at_startup(&Kafka4::start());
}

fn bad_records_at_startup(k: &dyn Broker) {
    let mut cases = bad_records();
    // goblin-core never writes a read: a goblin-authored one is fatal, not ignored.
    cases.push(("goblin-read", vec![forged(&["GET", "a"], 1)], "holds the read-only command 'get'", 0));
    // A record contract this build does not read is not applied as if it were its own.
    let versioned = |v: Option<&str>| {
        let mut r = forged(&["SET", "a", "1"], 1);
        r.headers.retain(|(k, _)| *k != "goblin-replication-version");
        if let Some(v) = v {
            r.headers.push(("goblin-replication-version", v.to_string()));
        }
        vec![r]
    };
    cases.push((
        "version-99",
        versioned(Some("99")),
        "goblin-replication-version 99: this goblin-core reads version 1",
        0,
    ));
    cases.push((
        "version-banana",
        versioned(Some("banana")),
        "malformed goblin-replication-version header",
        0,
    ));
    cases.push(("version-missing", versioned(None), "without a goblin-replication-version header", 0));
    for (name, records, expect, offset) in cases {
        let topic = format!("startup-{name}");
        k.create_topic(&topic, 1, &[]);
        produce(k.addr(), &topic, &records);
        let (code, err) = run_to_exit(&["--port", "0", "--kafka", &k.uri(&topic), "--save", ""]);
        assert_eq!(code, Some(1), "{name}: {err}");
        assert!(err.contains(expect), "{name}: {err}");
        assert!(err.contains(&format!("topic {topic}, partition 0, offset {offset}:")), "{name}: {err}");
        assert!(!err.contains("listening on"), "{name}: {err}");
    }
}

/// At runtime every refusal, and a record of another goblin lineage (a second primary),
/// stops the running primary with the fail-stop status, naming topic, partition, offset.
#[test]
fn bad_records_stop_a_running_primary() {
    bad_records_at_runtime(&Kaka::start());
}

#[test]
fn kafka4_bad_records_stop_a_running_primary() {
    bad_records_at_runtime(&Kafka4::start());
}

fn bad_records_at_runtime(k: &dyn Broker) {
    let mut cases = bad_records();
    cases.push(("other-lineage", vec![forged(&["SET", "a", "1"], 1)], "two primaries share the topic", 0));
    for (name, records, expect, offset) in cases {
        let topic = format!("runtime-{name}");
        let mut s = Server::start(&["--kafka", &k.uri(&topic), "--save", ""]);
        produce(k.addr(), &topic, &records);
        let status = s.wait_exit(Duration::from_secs(60)).unwrap_or_else(|| {
            panic!("{name}: the primary kept running: {}", s.log());
        });
        let log = s.log();
        assert_eq!(status.code(), Some(70), "{name}: {log}");
        assert!(log.contains(expect), "{name}: {log}");
        assert!(log.contains(&format!("topic {topic}, partition 0, offset {offset}:")), "{name}: {log}");
    }
}

/// Waits until the primary has consumed `n` records of other producers (applied or ignored).
fn wait_consumed_external(con: &mut redis::Connection, n: u64) -> std::collections::HashMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let m = info(con, "kafka");
        let done: u64 = m["kafka_external_records_applied"].parse::<u64>().unwrap()
            + m["kafka_external_records_ignored_reads"].parse::<u64>().unwrap();
        if done >= n {
            return m;
        }
        assert!(Instant::now() < deadline, "the primary consumed {done} of {n} records: {m:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The primary does not read its own records back: its consumer's position passes over them
/// by their delivery reports, and librdkafka fetches only what may be someone else's (a gap
/// between reported own records, or anything after them once the primary is idle). Another
/// producer's records written in the middle of a write flood, and one written while the
/// primary is idle, are applied all the same; a consumer that was paused and resumed shuts
/// down cleanly.
#[test]
fn the_primary_passes_over_its_own_records_unread() {
    passes_over_own_records(&Kaka::start());
}

#[test]
fn kafka4_the_primary_passes_over_its_own_records_unread() {
    passes_over_own_records(&Kafka4::start());
}

fn passes_over_own_records(k: &dyn Broker) {
    let topic = "unread";
    // The primary creates the topic before it listens: the other producer starts after it.
    let mut s = Server::start(&["--kafka", &k.uri(topic), "--save", ""]);
    let mut con = s.conn();
    // A flood of pipelined writes on one connection, and meanwhile another producer's INCRs
    // of a key of its own, in small bursts.
    const ROUNDS: u64 = 20;
    const PER_ROUND: u64 = 2000;
    const EXTERNAL: u64 = 40;
    let addr = k.addr().to_string();
    let writer = std::thread::spawn(move || {
        use rdkafka::producer::Producer;
        let p = other_producer(&addr);
        for i in 0..EXTERNAL {
            send(&p, topic, &cmd(&["INCR", "x"]));
            if i % 4 == 3 {
                p.flush(Duration::from_secs(30)).unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        p.flush(Duration::from_secs(30)).unwrap();
    });
    for r in 0..ROUNDS {
        let mut p = redis::pipe();
        for i in 0..PER_ROUND {
            p.cmd("INCR").arg(format!("k{}", (r * PER_ROUND + i) % 100)).ignore();
        }
        let _: () = p.query(&mut con).unwrap();
    }
    writer.join().unwrap();
    let m = wait_consumed_external(&mut con, EXTERNAL);
    assert_eq!(m["kafka_external_records_applied"], EXTERNAL.to_string(), "{m:?}");
    wait_acked(&mut con);
    let x: u64 = redis::cmd("GET").arg("x").query(&mut con).unwrap();
    assert_eq!(x, EXTERNAL);
    let mut total = 0;
    for i in 0..100 {
        let v: u64 = redis::cmd("GET").arg(format!("k{i}")).query(&mut con).unwrap();
        total += v;
    }
    assert_eq!(total, ROUNDS * PER_ROUND);
    let m = info(&mut con, "kafka");
    let own = ROUNDS * PER_ROUND;
    // Every own record is passed exactly once, read back or not.
    assert_eq!(m["kafka_own_records_skipped"], own.to_string(), "{m:?}");
    assert_eq!(m["kafka_consumer_position"], (own + EXTERNAL).to_string(), "{m:?}");
    // A flood of own writes alone: few of them are read back (filling each gap above read
    // the own records fetched with it, so this is measured apart).
    let before: u64 = m["kafka_records_consumed"].parse().unwrap();
    for _ in 0..ROUNDS {
        let mut p = redis::pipe();
        for i in 0..PER_ROUND {
            p.cmd("INCR").arg(format!("k{}", i % 100)).ignore();
        }
        let _: () = p.query(&mut con).unwrap();
    }
    wait_acked(&mut con);
    let m = info(&mut con, "kafka");
    let consumed = m["kafka_records_consumed"].parse::<u64>().unwrap() - before;
    assert_eq!(m["kafka_own_records_skipped"], (2 * own).to_string(), "{m:?}");
    assert!(consumed < own / 2, "the primary read back {consumed} of its {own} own records: {m:?}");
    // Idle, the consumer fetches again: a record written now is applied.
    let deadline = Instant::now() + Duration::from_secs(30);
    while info(&mut con, "kafka")["kafka_consumer_fetching"] != "1" {
        assert!(Instant::now() < deadline, "the idle primary's consumer never fetched again");
        std::thread::sleep(Duration::from_millis(10));
    }
    produce(k.addr(), topic, &[cmd(&["INCR", "x"])]);
    wait_consumed_external(&mut con, EXTERNAL + 1);
    let x: u64 = redis::cmd("GET").arg("x").query(&mut con).unwrap();
    assert_eq!(x, EXTERNAL + 1);
    let status = s.stop();
    assert!(status.success(), "{status:?}: {}", s.log());
}

/// Read-only records from other writers are counted and ignored, at startup and at runtime;
/// their writes are applied and not journaled again.
#[test]
fn other_writers_reads_are_counted_and_ignored() {
    let k = Kaka::start();
    let topic = "reads";
    let uri = k.uri(topic);
    k.create_topic(topic, 1, &[]);
    produce(&k.addr, topic, &[cmd(&["GET", "a"]), cmd(&["SET", "a", "1"]), cmd(&["EXISTS", "a"])]);
    let s = Server::start(&["--kafka", &uri, "--save", ""]);
    let mut con = s.conn();
    let m = info(&mut con, "kafka");
    assert_eq!(m["kafka_replay_records_ignored_reads"], "2", "{m:?}");
    assert_eq!(m["kafka_replay_external_records_applied"], "1", "{m:?}");
    let a: String = redis::cmd("GET").arg("a").query(&mut con).unwrap();
    assert_eq!(a, "1");
    // At runtime.
    produce(&k.addr, topic, &[cmd(&["GET", "a"]), cmd(&["APPEND", "a", "2"]), cmd(&["HGETALL", "h"])]);
    let m = wait_consumed_external(&mut con, 3);
    assert_eq!(m["kafka_external_records_ignored_reads"], "2", "{m:?}");
    assert_eq!(m["kafka_external_records_applied"], "1", "{m:?}");
    assert_eq!(m["kafka_records_produced"], "0", "other producers' writes are never journaled again: {m:?}");
    let a: String = redis::cmd("GET").arg("a").query(&mut con).unwrap();
    assert_eq!(a, "12");
    // A client parked on a key is served by another producer's push.
    let mut waiter = s.conn();
    let parked = std::thread::spawn(move || -> Option<(String, String)> {
        redis::cmd("BLPOP").arg("q").arg(60).query(&mut waiter).unwrap()
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while !info(&mut con, "clients")["blocked_clients"].starts_with('1') {
        assert!(Instant::now() < deadline, "the BLPOP client never parked");
        std::thread::sleep(Duration::from_millis(10));
    }
    produce(&k.addr, topic, &[cmd(&["RPUSH", "q", "x"])]);
    assert_eq!(parked.join().unwrap(), Some(("q".to_string(), "x".to_string())));
}

/// DESIGN.md decision 3, end to end: another producer writes non-commutative commands
/// (APPEND, LPUSH, INCRBYFLOAT, and reads) to the same keys while clients write them through
/// goblin-core; the primary applies both in the order it sees them, and a server recovered
/// from the topic alone, or from a snapshot taken midway plus the suffix, reaches the
/// primary's digest at the primary's offset.
#[test]
fn external_writers_replay_to_the_primarys_digest() {
    external_writers(&Kaka::start());
}

#[test]
fn kafka4_external_writers_replay_to_the_primarys_digest() {
    external_writers(&Kafka4::start());
}

fn external_writers(k: &dyn Broker) {
    let topic = "journal-external";
    let uri = k.uri(topic);
    let snap = temp_path("external.gcsn");
    let sp = snap.to_str().unwrap().to_string();
    let args =
        ["--kafka", uri.as_str(), "--load", sp.as_str(), "--save", "", "--enable-debug-command", "yes"];
    let mut a = Server::start(&args);
    let mut con = a.conn();
    // The other producer: 3 kinds of writes and a read, on 3 keys of each kind, in bursts.
    const EXTERNAL: usize = 1200;
    let addr = k.addr().to_string();
    let writer = std::thread::spawn(move || {
        use rdkafka::producer::Producer;
        let p = other_producer(&addr);
        let mut reads = 0u64;
        for i in 0..EXTERNAL {
            let (key, val) = (format!("{}", i % 3), format!("e{i}"));
            let r = match i % 4 {
                0 => cmd(&["APPEND", &format!("s{key}"), &val]),
                1 => cmd(&["LPUSH", &format!("l{key}"), &val]),
                2 => cmd(&["INCRBYFLOAT", &format!("f{key}"), "1.5"]),
                _ => {
                    reads += 1;
                    cmd(&["GET", &format!("s{key}")])
                }
            };
            send(&p, topic, &r);
            p.poll(Duration::ZERO);
            if i % 25 == 24 {
                p.flush(Duration::from_secs(30)).unwrap();
                std::thread::sleep(Duration::from_millis(3));
            }
        }
        p.flush(Duration::from_secs(30)).unwrap();
        reads
    });
    // Meanwhile the clients write the same keys through goblin-core; midway, a snapshot.
    let mut client_floats = 0u64;
    for r in 0..60 {
        let mut p = redis::pipe();
        for j in 0..3 {
            p.cmd("APPEND").arg(format!("s{j}")).arg(format!("c{r}")).ignore();
            p.cmd("LPUSH").arg(format!("l{j}")).arg(format!("c{r}")).ignore();
            p.cmd("INCRBYFLOAT").arg(format!("f{j}")).arg("0.25").ignore();
            client_floats += 1;
        }
        if r % 10 == 5 {
            p.cmd("SET").arg(format!("s{}", r % 3)).arg(format!("reset{r}")).ignore();
        }
        let _: () = p.query(&mut con).unwrap();
        if r == 30 {
            // Once the snapshot holds some of the other producer's writes.
            wait_consumed_external(&mut con, 1);
            let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let reads = writer.join().unwrap();
    let m = wait_consumed_external(&mut con, EXTERNAL as u64);
    assert_eq!(m["kafka_external_records_ignored_reads"], reads.to_string(), "{m:?}");
    assert_eq!(m["kafka_external_records_applied"], (EXTERNAL as u64 - reads).to_string(), "{m:?}");
    wait_acked(&mut con);
    // Every write of both writers is there exactly once.
    let mut total = 0.0;
    for j in 0..3 {
        let f: f64 = redis::cmd("GET").arg(format!("f{j}")).query(&mut con).unwrap();
        total += f;
        let l: u64 = redis::cmd("LLEN").arg(format!("l{j}")).query(&mut con).unwrap();
        assert_eq!(l, (EXTERNAL / 4) as u64 / 3 + 60, "l{j}");
    }
    assert_eq!(total, 1.5 * (EXTERNAL / 4) as f64 + 0.25 * client_floats as f64);
    let want = state(&mut con);
    a.signal(9);
    a.wait_exit(Duration::from_secs(10)).unwrap();
    // From the topic alone: the other producer's records take the offsets the primary gave
    // them, in the primary's order.
    let b = Server::start(&["--kafka", &uri, "--save", ""]);
    let mut bcon = b.conn();
    assert_eq!(state(&mut bcon), want, "topic alone");
    let m = info(&mut bcon, "kafka");
    assert_eq!(m["kafka_replay_external_records_applied"], (EXTERNAL as u64 - reads).to_string(), "{m:?}");
    drop(b);
    // From the snapshot taken midway plus the suffix: the other producer's records below the
    // snapshot's consumer position are duplicates, not applied twice.
    let c = Server::start(&args);
    let mut ccon = c.conn();
    assert_eq!(state(&mut ccon), want, "snapshot + suffix");
    let m = info(&mut ccon, "kafka");
    let applied: u64 = m["kafka_replay_external_records_applied"].parse().unwrap();
    assert!(applied < EXTERNAL as u64 - reads, "the snapshot held some of them: {m:?}");
}

/// History lost under the running primary's consumer (records it had not read yet were
/// removed, as retention would) is fatal: the primary stops with the fail-stop status, naming
/// topic, partition and offset, instead of jumping over the hole. Apache Kafka answers the
/// consumer's next fetch with OFFSET_OUT_OF_RANGE; kaka serves it from the oldest record kept
/// (its seed), and the primary sees the jump past the log start. The primary is stopped
/// (SIGSTOP) while another producer writes more than one fetch can carry (about 1 MiB) and the
/// records beyond that are deleted; after SIGCONT its consumer reads the first fetch's records
/// and then finds its position gone.
#[test]
fn history_removed_under_the_runtime_consumer_stops_the_primary() {
    // kaka served the deleted offset from the oldest record kept: the primary saw the jump.
    history_removed_under_the_runtime_consumer(&Kaka::start(), "the earliest retained at 29001");
}

#[test]
fn kafka4_history_removed_under_the_runtime_consumer_stops_the_primary() {
    // librdkafka reports the out-of-range answer as its reset error (`auto.offset.reset=error`).
    history_removed_under_the_runtime_consumer(&Kafka4::start(), "AutoOffsetReset");
}

fn history_removed_under_the_runtime_consumer(k: &dyn Broker, reason: &str) {
    let topic = "lost-history";
    let mut s = Server::start(&["--kafka", &k.uri(topic), "--save", ""]);
    let mut con = s.conn();
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut con).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while info(&mut con, "kafka")["kafka_consumer_position"] != "1" {
        assert!(Instant::now() < deadline, "the consumer never passed the primary's own record");
        std::thread::sleep(Duration::from_millis(20));
    }
    s.signal(libc::SIGSTOP);
    // 30,000 records of about 150 bytes: three fetches' worth.
    let value = "v".repeat(100);
    let keys: Vec<String> = (0..30_000).map(|i| format!("k{i}")).collect();
    let cmds: Vec<[&str; 3]> = keys.iter().map(|k| ["SET", k.as_str(), value.as_str()]).collect();
    let cmds: Vec<&[&str]> = cmds.iter().map(|c| &c[..]).collect();
    // Broker offsets 1-30,000. Two producers: a batch starts at 29,001, so the deletion below
    // it leaves whole batches (as retention, which deletes whole segments, always does; see
    // kaka's fetch).
    common::brokers::produce_commands(k.addr(), topic, &cmds[..29_000]);
    common::brokers::produce_commands(k.addr(), topic, &cmds[29_000..]);
    k.delete_records(topic, 29_001);
    s.signal(libc::SIGCONT);
    let status = s
        .wait_exit(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("the primary kept running: {}", s.log()));
    let log = s.log();
    assert_eq!(status.code(), Some(70), "{log}");
    assert!(log.contains("cannot consume"), "{log}");
    assert!(log.contains(&format!("topic {topic}, partition 0, offset ")), "{log}");
    assert!(log.contains(reason), "{log}");
}

/// Another application writes the topic in Kafka transactions: every transaction leaves a
/// control record (a marker) that no consumer receives, and an aborted one leaves records a
/// read-committed consumer skips. The replay ends at the partition's end even when the
/// last offsets below the watermark are markers (it used to wait for a record at the
/// watermark's offset and stall); the runtime consumer applies committed transactions and
/// skips aborted ones; and a restart from the topic alone finds the same data.
#[test]
fn transactions_of_other_writers_replay_and_apply() {
    transactions_of_other_writers(&Kaka::start());
}

#[test]
fn kafka4_transactions_of_other_writers_replay_and_apply() {
    transactions_of_other_writers(&Kafka4::start());
}

fn transactions_of_other_writers(k: &dyn Broker) {
    use rdkafka::producer::Producer;
    let topic = "journal-txn";
    let t = Duration::from_secs(30);
    let p: rdkafka::producer::BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", k.addr())
        .set("transactional.id", "journal-txn-writer")
        .create()
        .expect("create a transactional producer");
    p.init_transactions(t).expect("init transactions");
    let txn = |records: &[Rec], commit: bool| {
        p.begin_transaction().unwrap();
        for r in records {
            send(&p, topic, r);
        }
        if commit {
            p.commit_transaction(t).unwrap();
        } else {
            p.flush(t).unwrap();
            p.abort_transaction(t).unwrap();
        }
    };
    // Before any goblin-core: a committed transaction, then an aborted one. The topic ends in
    // the abort's marker.
    txn(&[cmd(&["SET", "t1", "a"]), cmd(&["RPUSH", "l", "1"])], true);
    txn(&[cmd(&["SET", "aborted", "x"]), cmd(&["RPUSH", "l", "no"])], false);
    let uri = k.uri(topic);
    let args = ["--kafka", uri.as_str(), "--save", ""];
    let mut a = Server::start(&args);
    let mut con = a.conn();
    let get = |con: &mut redis::Connection, key: &str| -> Option<String> {
        redis::cmd("GET").arg(key).query(con).unwrap()
    };
    let list = |con: &mut redis::Connection| -> Vec<String> {
        redis::cmd("LRANGE").arg("l").arg(0).arg(-1).query(con).unwrap()
    };
    assert_eq!(get(&mut con, "t1").as_deref(), Some("a"));
    assert_eq!(get(&mut con, "aborted"), None);
    assert_eq!(list(&mut con), ["1"]);
    // At runtime: own writes, then a committed and an aborted transaction of the other writer.
    let _: () = redis::cmd("RPUSH").arg("l").arg("own").query(&mut con).unwrap();
    txn(&[cmd(&["SET", "t2", "b"]), cmd(&["RPUSH", "l", "2"])], true);
    txn(&[cmd(&["SET", "aborted", "y"])], false);
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(&mut con, "t2").is_none() {
        assert!(Instant::now() < deadline, "the committed transaction was not applied: {}", a.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let _: () = redis::cmd("SET").arg("after").arg("1").query(&mut con).unwrap();
    wait_acked(&mut con);
    assert_eq!(list(&mut con), ["1", "own", "2"]);
    assert_eq!(get(&mut con, "aborted"), None);
    let want = state(&mut con);
    a.signal(9);
    a.wait_exit(Duration::from_secs(10)).unwrap();
    // A restart from the topic alone: the same data, past every marker.
    let b = Server::start(&args);
    let mut con = b.conn();
    assert_eq!(state(&mut con), want);
    assert_eq!(list(&mut con), ["1", "own", "2"]);
    assert_eq!(get(&mut con, "aborted"), None);
}

/// Two servers started from copies of one snapshot continue its history on one topic, each
/// under a successor lineage of its own. The first to journal a write goes on; the other's
/// consumer meets that record, of a lineage it does not write, and stops before it writes
/// (long ago both kept running and skipped the other's writes as their own, and a replay then
/// dropped one side's acknowledged writes as duplicates). A topic that holds two
/// continuations of one offset anyway (two such servers that both wrote before either read
/// the other's record; forged here) is refused by a replay: it follows the first and stops at
/// the second, naming both.
#[test]
fn two_servers_continuing_one_lineage_are_stopped() {
    let k = Kaka::start();
    let topic = "journal-one-lineage";
    let uri = k.uri(topic);
    let snap = temp_path("one-lineage.gcsn");
    let sp = snap.to_str().unwrap().to_string();
    let mut a = Server::start(&["--kafka", &uri, "--load", &sp, "--save", ""]);
    let mut con = a.conn();
    for i in 0..20 {
        let _: () = redis::cmd("RPUSH").arg("l").arg(format!("x{i}")).query(&mut con).unwrap();
    }
    wait_acked(&mut con);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let lineage = info(&mut con, "replication")["master_replid"].clone();
    a.signal(15);
    a.wait_exit(Duration::from_secs(30)).unwrap();
    let copy = temp_path("one-lineage-copy.gcsn");
    std::fs::copy(&snap, &copy).unwrap();
    let cp = copy.to_str().unwrap().to_string();
    let a = Server::start(&["--kafka", &uri, "--load", &sp, "--save", ""]);
    let mut b = Server::start(&["--kafka", &uri, "--load", &cp, "--save", ""]);
    let mut con = a.conn();
    let _: () = redis::cmd("RPUSH").arg("l").arg("from-a").query(&mut con).unwrap();
    let status = b.wait_exit(Duration::from_secs(60)).unwrap_or_else(|| {
        panic!("a second server continuing the lineage kept running: {}", b.log());
    });
    let log = b.log();
    assert_eq!(status.code(), Some(70), "{log}");
    assert!(log.contains("two primaries share the topic"), "{log}");
    assert!(log.contains(&format!("topic {topic}, partition 0, offset 20")), "{log}");
    // The first goes on, alone on the topic.
    wait_acked(&mut con);
    let _: () = redis::cmd("RPUSH").arg("l").arg("more").query(&mut con).unwrap();
    wait_acked(&mut con);
    let n: i64 = redis::cmd("LLEN").arg("l").query(&mut con).unwrap();
    assert_eq!(n, 22);
    drop(a);
    // Another continuation of offset 20 after the first one's records.
    let mut rogue = forged(&["RPUSH", "l", "rogue"], 21);
    rogue.headers.push(("goblin-previous-replication-id", lineage.clone()));
    rogue.headers.push(("goblin-previous-replication-offset", "20".into()));
    produce(&k.addr, topic, &[rogue]);
    let (code, err) = run_to_exit(&["--port", "0", "--kafka", &uri, "--load", &cp, "--save", ""]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "lineage {FORGED_LINEAGE} continues lineage {lineage} from logical offset 20, but the replay holds"
        )),
        "{err}"
    );
    assert!(err.contains("through offset 22"), "{err}");
    assert!(err.contains("two servers continued the history from there"), "{err}");
    assert!(!err.contains("listening on"), "{err}");
}

/// What goblin-core puts on the topic, read back by a plain Kafka consumer: one record per
/// mutation, its value the canonical RESP2 command, the seed's three headers (version 1, the
/// primary's replication id, consecutive logical offsets) and `goblin-applied-through` (-1:
/// no other producer's record applied before it), and the seed's Kafka keys: (kind, key,
/// member or field) as 4-byte big-endian lengths and bytes, binary-safe, and no key for an
/// ordered operation.
#[test]
fn own_records_carry_the_record_contract() {
    own_records_contract(&Kaka::start());
}

#[test]
fn kafka4_own_records_carry_the_record_contract() {
    own_records_contract(&Kafka4::start());
}

fn own_records_contract(k: &dyn Broker) {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::{Headers, Message};
    let topic = "journal-contract";
    let s = Server::start(&["--kafka", &k.uri(topic), "--save", ""]);
    let mut con = s.conn();
    let binary: &[u8] = b"b\0\r\n\xff";
    let writes: Vec<Vec<&[u8]>> = vec![
        vec![b"SET", b"s", b"v"],
        vec![b"HSET", b"h", b"f", b"1"],
        vec![b"SADD", b"set", b"m"],
        vec![b"ZADD", b"z", b"1.5", b"m"],
        vec![b"RPUSH", b"l", b"a"],
        vec![b"SET", binary, b"x"],
    ];
    for w in &writes {
        let mut c = redis::cmd(std::str::from_utf8(w[0]).unwrap());
        for a in &w[1..] {
            c.arg(*a);
        }
        let _: redis::Value = c.query(&mut con).unwrap();
    }
    wait_acked(&mut con);
    let replid = info(&mut con, "replication")["master_replid"].clone();
    let frame = |parts: &[&[u8]]| -> Vec<u8> {
        let mut out = Vec::new();
        for p in parts {
            out.extend_from_slice(&(p.len() as u32).to_be_bytes());
            out.extend_from_slice(p);
        }
        out
    };
    let want_keys: Vec<Option<Vec<u8>>> = vec![
        Some(frame(&[b"SET", b"s"])),
        Some(frame(&[b"HSET", b"h", b"f"])),
        Some(frame(&[b"SADD", b"set", b"m"])),
        Some(frame(&[b"ZADD", b"z", b"m"])),
        None,
        Some(frame(&[b"SET", binary])),
    ];

    let c: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", k.addr())
        .set("group.id", "contract-reader")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, rdkafka::Offset::Beginning).unwrap();
    c.assign(&tpl).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut records = Vec::new();
    while records.len() < writes.len() {
        assert!(Instant::now() < deadline, "read {} of {} records", records.len(), writes.len());
        let Some(m) = c.poll(Duration::from_millis(200)) else { continue };
        let m = m.expect("a record");
        let headers: Vec<(String, Vec<u8>)> = m
            .headers()
            .map(|h| h.iter().map(|h| (h.key.to_string(), h.value.unwrap_or_default().to_vec())).collect())
            .unwrap_or_default();
        records.push((
            m.offset(),
            m.key().map(<[u8]>::to_vec),
            m.payload().unwrap_or_default().to_vec(),
            headers,
        ));
    }
    for (i, (offset, key, value, headers)) in records.iter().enumerate() {
        assert_eq!(*offset, i as i64, "one record per mutation, in order");
        let mut want = format!("*{}\r\n", writes[i].len()).into_bytes();
        for a in &writes[i] {
            want.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            want.extend_from_slice(a);
            want.extend_from_slice(b"\r\n");
        }
        assert_eq!(String::from_utf8_lossy(value), String::from_utf8_lossy(&want), "record {i}'s value");
        assert_eq!(key, &want_keys[i], "record {i}'s key");
        let names: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "goblin-replication-version",
                "goblin-replication-id",
                "goblin-replication-offset",
                "goblin-applied-through"
            ],
            "record {i}'s headers"
        );
        let text: Vec<String> = headers.iter().map(|(_, v)| String::from_utf8(v.clone()).unwrap()).collect();
        assert_eq!(
            text,
            ["1".to_string(), replid.clone(), (i + 1).to_string(), "-1".to_string()],
            "record {i}"
        );
    }
}

/// A primary whose brokers do not answer within the startup bound (15 s) exits 1 before it
/// listens, naming the brokers.
#[test]
fn unreachable_brokers_stop_the_startup() {
    let port = common::free_port();
    let uri = format!("kafka://127.0.0.1:{port}/journal-nobody");
    let (code, err) = run_to_exit(&["--port", "0", "--kafka", &uri, "--save", ""]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("no answer from the brokers 127.0.0.1:{port} within 15 s")), "{err}");
    assert!(!err.contains("listening on"), "{err}");
}

/// SIGTERM while Kafka holds back acknowledgements (kaka stopped with SIGSTOP: its
/// connections stay open, nothing answers) and no save rule ran first: the server waits for
/// the pending records up to its shutdown bound, says how many it could not flush, and exits;
/// those records reach Kafka only if librdkafka sent them before the exit, so the restart
/// finds every write acknowledged before the stop, and no write twice.
#[test]
fn sigterm_with_kafka_stalled_waits_its_bound_and_exits() {
    let k = Kaka::start();
    let uri = k.uri("journal-sigterm-stalled");
    let args = ["--kafka", uri.as_str(), "--save", ""];
    let mut s = Server::start(&args);
    let mut con = s.conn();
    for i in 0..20 {
        let _: () = redis::cmd("RPUSH").arg("l").arg(i).query(&mut con).unwrap();
    }
    wait_acked(&mut con);
    unsafe { libc::kill(k.child.id() as i32, libc::SIGSTOP) };
    for i in 20..25 {
        let _: () = redis::cmd("RPUSH").arg("l").arg(i).query(&mut con).unwrap();
    }
    s.signal(libc::SIGTERM);
    let st = s.wait_exit(Duration::from_secs(60));
    unsafe { libc::kill(k.child.id() as i32, libc::SIGCONT) };
    let st = st.unwrap_or_else(|| panic!("SIGTERM did not end the server: {}", s.log()));
    let log = s.log();
    assert!(log.contains("records still unacknowledged after 10s"), "{log}");
    assert!(st.success(), "{st:?}: {log}");
    let r = Server::start(&args);
    let l: Vec<i64> = redis::cmd("LRANGE").arg("l").arg(0).arg(-1).query(&mut r.conn()).unwrap();
    assert!(l.len() >= 20 && l.iter().enumerate().all(|(i, v)| *v == i as i64), "{l:?}");
}

/// In broker ack mode a transaction's one reply waits for the acknowledgement of every record
/// of its batch, not the first: with one record per produce request
/// (`batch.num.messages=1`) and kaka holding the acknowledgement of every request from broker
/// offset 1 on (its test hook), the first of EXEC's three records is acknowledged and the
/// reply still waits, and so does the PING pipelined behind it; both come, in order, once kaka
/// answers.
#[test]
fn broker_mode_releases_a_transaction_only_when_its_last_record_is_acknowledged() {
    use std::io::{Read, Write};
    let hold = temp_path("kaka-hold-acks");
    std::fs::write(&hold, b"").unwrap();
    let k = Kaka::start_with(
        &temp_path("kaka-hold-acks-dir"),
        common::free_port(),
        &["--debug-hold-acks-at", "1", "--debug-hold-file", hold.to_str().unwrap()],
    );
    let uri = format!("{}?batch.num.messages=1", k.uri("journal-exec-acks"));
    let s = Server::start(&["--kafka", &uri, "--kafka-ack-mode", "broker", "--save", ""]);
    let mut watcher = s.conn();
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let set = |k: &str| format!("*3\r\n$3\r\nSET\r\n$1\r\n{k}\r\n$1\r\n1\r\n");
    let pipeline = format!(
        "*1\r\n$5\r\nMULTI\r\n{}{}{}*1\r\n$4\r\nEXEC\r\n*1\r\n$4\r\nPING\r\n",
        set("a"),
        set("b"),
        set("c")
    );
    c.write_all(pipeline.as_bytes()).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut got = Vec::new();
    let read_some = |c: &mut TcpStream, got: &mut Vec<u8>| {
        let mut buf = [0u8; 256];
        match c.read(&mut buf) {
            Ok(0) => panic!("the server closed the connection"),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => panic!("{e}"),
        }
    };
    // The first record is acknowledged, the second is held.
    let deadline = Instant::now() + Duration::from_secs(30);
    while info(&mut watcher, "kafka")["kafka_acknowledged_offset"] != "1" {
        assert!(Instant::now() < deadline, "{:?}", info(&mut watcher, "kafka"));
        std::thread::sleep(Duration::from_millis(20));
    }
    // A second in which kaka holds the rest: the replies up to EXEC's are all there is.
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        read_some(&mut c, &mut got);
    }
    assert_eq!(String::from_utf8_lossy(&got), "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n");
    assert_eq!(info(&mut watcher, "kafka")["kafka_acknowledged_offset"], "1");
    std::fs::remove_file(&hold).unwrap();
    let want = "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n+OK\r\n+OK\r\n+OK\r\n+PONG\r\n";
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < want.len() {
        assert!(Instant::now() < deadline, "{}", String::from_utf8_lossy(&got));
        read_some(&mut c, &mut got);
    }
    assert_eq!(String::from_utf8_lossy(&got), want);
    assert_eq!(info(&mut watcher, "kafka")["kafka_acknowledged_offset"], "3");
}
