//! A replica whose recovery inputs fail: Kafka unreachable, its topic not created yet, a record
//! that cannot be applied, Kafka hanging during a handoff or stalling in the middle of one. The
//! replica opens read-only and not ready and retries, never exits; it recovers exactly as a
//! normal start once Kafka (or its upstream) is back. Also: what INFO reports about the
//! upstream's offset while the link is down, the startup check of --replication-buffer-bytes,
//! `dumpworld` against a server that requires a password, and flag and documentation texts
//! naming every transport.

mod common;

use common::repl::{offset, sock, wait_for};

use common::brokers::{info, other_producer, produce_commands, Broker, Kaka};
use common::unwaited::Unwaited;
use common::{free_port, temp_path, Server};
use std::time::{Duration, Instant};

fn digest_of(con: &mut redis::Connection) -> String {
    redis::cmd("DEBUG").arg("DIGEST").query(con).unwrap()
}

/// Writes one record that is not a RESP2 command to partition 0 of `topic` (another producer's
/// mistake) and waits until the broker has it.
fn produce_garbage(addr: &str, topic: &str) {
    use rdkafka::producer::{BaseRecord, Producer};
    let p = other_producer(addr);
    p.send(BaseRecord::<(), [u8]>::to(topic).partition(0).payload(b"garbage".as_slice()))
        .map_err(|(e, _)| e)
        .unwrap();
    p.flush(Duration::from_secs(30)).expect("the broker took the record");
}

/// Runs the binary with `args` to its exit (killed, and the test failed, after 20 s: a server
/// that should have refused to start would otherwise run on).
fn run(args: &[&str]) -> std::process::Output {
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_goblin-core"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("goblin-core {args:?} did not exit:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Some writes of several kinds on `s`.
fn write_some(s: &Server, n: usize) {
    let mut c = s.conn();
    for i in 0..n {
        let _: () = redis::cmd("SET").arg(format!("k{}", i % 40)).arg(i).query(&mut c).unwrap();
        let _: i64 = redis::cmd("INCR").arg("counter").query(&mut c).unwrap();
        let _: i64 = redis::cmd("RPUSH").arg("list").arg(i).query(&mut c).unwrap();
    }
}

/// Kafka unreachable at startup, the upstream too: the replica used to exit after 15 s. Now it
/// listens, read-only and not ready, saying why; once Kafka is back it replays the topic in the
/// background (the startup replay it could not do), and once its upstream is back it goes live.
#[test]
fn kafka_unreachable_at_startup_opens_not_ready_and_replays_when_it_returns() {
    let kdir = temp_path("kaka-unreachable");
    let kport = free_port();
    let k = Kaka::start_in(&kdir, kport);
    let uri = k.uri("rr-unreachable");
    let snap = sock("primary.gcsn");
    let pport = free_port().to_string();
    let pargs = ["--port", pport.as_str(), "--kafka", &uri, "--load", &snap, "--enable-debug-command", "yes"];
    let mut primary = Server::start(&pargs);
    write_some(&primary, 100);
    let want = (offset(&primary), digest_of(&mut primary.conn()));
    assert!(primary.stop().success());
    drop(k);
    let started = Instant::now();
    let replica = Unwaited::start(&["--kafka", &uri, "--replica-tcp", "127.0.0.1", &pport]);
    let m = replica.wait_for("listening, not ready", 30, |m| m["goblin_ready"] == "0");
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "the listeners opened late: {:?}",
        started.elapsed()
    );
    assert_eq!((m["replica_state"].as_str(), m["master_link_status"].as_str()), ("reconnecting", "down"));
    let err = &m["replica_last_error"];
    assert!(
        err.contains("the Kafka replay waits") && err.contains("watermarks of topic rr-unreachable"),
        "{m:?}"
    );
    assert_eq!(replica.dbsize(), 0);
    let e = redis::cmd("SET").arg("x").arg("1").query::<()>(&mut replica.conn()).unwrap_err();
    assert_eq!(e.code(), Some("READONLY"));
    // Kafka comes back (same data, same port): the replay runs in the background, exactly as a
    // startup with Kafka would have; the upstream still being down keeps it not ready.
    let _k = Kaka::start_in(&kdir, kport);
    let m = replica.wait_for("the replay", 40, |m| m["slave_repl_offset"] == want.0.to_string());
    assert_eq!(m["goblin_ready"], "0");
    assert!(!m["replica_last_error"].contains("Kafka"), "{m:?}");
    assert_eq!(replica.digest(), want.1);
    assert!(replica.log().contains("replayed Kafka through its high watermark"));
    // The primary returns at that lineage and offset: live without another catch-up.
    let primary = Server::start(&pargs);
    let m = replica.wait_for("live", 30, |m| m["replica_state"] == "live");
    assert_eq!((m["goblin_ready"].as_str(), m["replica_lag"].as_str()), ("1", "0"));
    write_some(&primary, 10);
    let want = (offset(&primary), digest_of(&mut primary.conn()));
    replica.wait_for("the new writes", 30, |m| m["slave_repl_offset"] == want.0.to_string());
    assert_eq!(replica.digest(), want.1);
}

/// The topic does not exist yet (no primary has journaled): the replica used to exit at once
/// (UnknownPartition). Now it waits not ready; once a primary has created the topic, the
/// replica's pending replay runs in the background (through whatever the topic holds by then),
/// and when its upstream appears it follows it, catching up through Kafka.
#[test]
fn a_missing_topic_leaves_the_replica_not_ready_until_the_topic_appears() {
    let k = Kaka::start();
    let uri = k.uri("rr-missing");
    let pport = free_port().to_string();
    let replica = Unwaited::start(&["--kafka", &uri, "--replica-tcp", "127.0.0.1", &pport]);
    let m = replica.wait_for("not ready", 30, |m| m["goblin_ready"] == "0");
    assert!(m["replica_last_error"].contains("watermarks of topic rr-missing"), "{m:?}");
    // Still waiting a few retries later, and still running.
    std::thread::sleep(Duration::from_secs(2));
    let m = replica.wait_for("still not ready", 5, |m| m["goblin_ready"] == "0");
    assert!(m["replica_last_error"].contains("UnknownPartition"), "{m:?}");
    // A primary elsewhere creates the topic and journals to it, then stops.
    let snap = sock("primary.gcsn");
    let mut first = Server::start(&["--kafka", &uri, "--load", &snap, "--enable-debug-command", "yes"]);
    write_some(&first, 50);
    let want = (offset(&first), digest_of(&mut first.conn()));
    assert!(first.stop().success());
    // The replay ran (the records written before it were applied), not ready all along.
    let m = replica.wait_for("the replay", 40, |m| !m["replica_last_error"].contains("Kafka"));
    assert_eq!((m["goblin_ready"].as_str(), m["replica_state"].as_str()), ("0", "reconnecting"));
    assert!(replica.log().contains("replayed Kafka through its high watermark"));
    // The same history comes back on the replica's upstream address: followed, from wherever
    // the replay stopped, through Kafka and the firehose.
    let primary =
        Server::start(&["--port", &pport, "--kafka", &uri, "--load", &snap, "--enable-debug-command", "yes"]);
    assert_eq!(offset(&primary), want.0);
    replica.wait_for("live", 30, |m| m["replica_state"] == "live");
    assert_eq!(replica.digest(), want.1);
    write_some(&primary, 5);
    let want = (offset(&primary), digest_of(&mut primary.conn()));
    replica.wait_for("the new writes", 30, |m| m["slave_repl_offset"] == want.0.to_string());
    assert_eq!(replica.digest(), want.1);
}

/// A record that cannot be applied, before anything else: the replica used to exit. Now it is
/// degraded and not ready, and keeps retrying; once an operator removes the record, the retry
/// succeeds and the replica follows a new primary.
#[test]
fn a_bad_record_leaves_the_replica_degraded_and_retrying() {
    let k = Kaka::start();
    k.create_topic("rr-bad", 1, &["cleanup.policy=delete"]);
    produce_garbage(&k.addr, "rr-bad");
    let uri = k.uri("rr-bad");
    let pport = free_port().to_string();
    let replica = Unwaited::start(&["--kafka", &uri, "--replica-tcp", "127.0.0.1", &pport]);
    let m = replica.wait_for("degraded", 30, |m| m["replica_state"] == "degraded");
    assert_eq!(m["goblin_ready"], "0");
    assert!(m["replica_last_error"].contains("malformed record: not a RESP2 array"), "{m:?}");
    let attempts: u64 = m["replica_reconnect_attempts"].parse().unwrap();
    let m = replica.wait_for("two more attempts", 40, |m| {
        m["replica_reconnect_attempts"].parse::<u64>().unwrap() >= attempts + 2
    });
    assert_eq!(m["replica_state"], "degraded", "{m:?}");
    assert!(m["replica_last_error"].contains("malformed record"), "{m:?}");
    assert_eq!(replica.dbsize(), 0, "nothing was applied");
    // The operator removes the record: the next retry replays the (now empty) topic.
    k.delete_records("rr-bad", 1);
    let m = replica.wait_for("the bad record gone", 40, |m| m["replica_state"] == "reconnecting");
    assert!(!m["replica_last_error"].contains("malformed"), "{m:?}");
    // A new primary on that topic: the empty replica adopts its lineage and follows it.
    let primary = Server::start(&["--port", &pport, "--kafka", &uri, "--enable-debug-command", "yes"]);
    write_some(&primary, 20);
    replica.wait_for("live", 30, |m| m["replica_state"] == "live");
    let want = (offset(&primary), digest_of(&mut primary.conn()));
    replica.wait_for("the writes", 30, |m| m["slave_repl_offset"] == want.0.to_string());
    assert_eq!(replica.digest(), want.1);
}

/// A bad record after records the replica applied: the verified prefix is kept and served
/// (not ready), and every later attempt goes on from where the first stopped (the cursor past
/// the applied records), meets the same record and applies nothing twice; an upstream at
/// exactly that offset is still followed. A primary on the same topic keeps its own rule: it
/// exits non-zero before listening.
#[test]
fn a_bad_record_after_a_replayed_prefix_keeps_the_prefix_and_retries_from_it() {
    let k = Kaka::start();
    let uri = k.uri("rr-tail");
    let snap = sock("primary.gcsn");
    let pport = free_port().to_string();
    let mut primary =
        Server::start(&["--port", &pport, "--kafka", &uri, "--load", &snap, "--enable-debug-command", "yes"]);
    write_some(&primary, 30);
    // Another producer's write the primary applies before its last own write: a replay that
    // went on from too early a consumer position would apply the APPEND twice.
    produce_commands(&k.addr, "rr-tail", &[&["APPEND", "ext", "a"]]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while info(&mut primary.conn(), "kafka")["kafka_external_records_applied"] != "1" {
        assert!(Instant::now() < deadline, "the other producer's write was not applied");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _: () = redis::cmd("SET").arg("last").arg("1").query(&mut primary.conn()).unwrap();
    let want = (offset(&primary), digest_of(&mut primary.conn()));
    assert!(primary.stop().success());
    produce_garbage(&k.addr, "rr-tail");
    let replica = Unwaited::start(&["--kafka", &uri, "--replica-tcp", "127.0.0.1", &pport]);
    let m = replica.wait_for("degraded", 30, |m| m["replica_state"] == "degraded");
    assert_eq!(m["goblin_ready"], "0");
    let err = &m["replica_last_error"];
    assert!(
        err.contains("malformed record") && err.contains("the next attempt goes on from broker offset"),
        "{m:?}"
    );
    assert_eq!(m["slave_repl_offset"], want.0.to_string(), "the verified prefix is kept");
    assert_eq!(replica.digest(), want.1);
    // The next attempt seeks past the applied records (to the last one, inclusively) and
    // stops at the same record, with the prefix as it was.
    let deadline = Instant::now() + Duration::from_secs(30);
    let from_first = |log: &str| log.matches("replaying topic rr-tail from broker offset 0 ").count();
    while replica.log().matches("replaying topic rr-tail from broker offset").count() < 2 {
        assert!(Instant::now() < deadline, "no second replay: {}", replica.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = replica.log();
    assert_eq!(from_first(&log), 1, "{log}");
    let m = replica.wait_for("still degraded", 30, |m| m["replica_state"] == "degraded");
    assert!(m["replica_last_error"].contains("malformed record"), "{m:?}");
    assert_eq!(m["slave_repl_offset"], want.0.to_string(), "nothing applied twice");
    assert_eq!(replica.digest(), want.1);
    // The primary's rule differs: the same topic stops it before it listens.
    let out = run(&["--port", "0", "--kafka", &uri, "--load", &snap]);
    assert!(!out.status.success(), "a primary must not start on a bad record");
    assert!(String::from_utf8_lossy(&out.stderr).contains("malformed record"));
    // The same history served without Kafka, at exactly the replica's offset: followed.
    let primary =
        Server::start(&["--port", &pport, "--load", &snap, "--save", "", "--enable-debug-command", "yes"]);
    replica.wait_for("live", 30, |m| m["replica_state"] == "live");
    write_some(&primary, 5);
    let want = (offset(&primary), digest_of(&mut primary.conn()));
    replica.wait_for("the new writes", 30, |m| m["slave_repl_offset"] == want.0.to_string());
    assert_eq!(replica.digest(), want.1);
}

/// Kafka stops serving reads in the middle of a replica's catch-up (kaka's test hook: fetches
/// end at broker offset 300 while a file exists), as a hung or partitioned broker would. The
/// catch-up gives up after its stall bound, keeping the prefix it applied, and the attempt after
/// Kafka serves again goes on from where the last one stopped, not from the topic's start:
/// the replica ends with the primary's offset and digest, so nothing was applied twice or
/// skipped.
#[test]
fn a_kafka_stall_in_the_middle_of_a_catch_up_keeps_the_prefix_and_goes_on_from_it() {
    let hold = temp_path("kaka-hold");
    let k = Kaka::start_with(
        &temp_path("kaka-stall"),
        free_port(),
        &["--debug-hold-fetches-at", "300", "--debug-hold-file", hold.to_str().unwrap()],
    );
    let uri = k.uri("rr-stall");
    let snap = sock("primary.gcsn");
    let pport = free_port().to_string();
    let mut primary =
        Server::start(&["--port", &pport, "--kafka", &uri, "--load", &snap, "--enable-debug-command", "yes"]);
    // In ten steps, each acknowledged by Kafka before the next: the topic's record batches
    // then hold at most one step (60 records), so the hold at 300 falls inside the topic and
    // not inside one batch that a busy machine's producer made of everything.
    let mut c = primary.conn();
    for step in 0..10 {
        for i in step * 20..(step + 1) * 20 {
            let _: () = redis::cmd("SET").arg(format!("k{}", i % 40)).arg(i).query(&mut c).unwrap();
            let _: i64 = redis::cmd("INCR").arg("counter").query(&mut c).unwrap();
            let _: i64 = redis::cmd("RPUSH").arg("list").arg(i).query(&mut c).unwrap();
        }
        let acked: Vec<i64> = redis::cmd("WAITAOF").arg(1).arg(0).arg(0).query(&mut c).unwrap();
        assert_eq!(acked[0], 1, "Kafka acknowledged the step");
    }
    let want = (offset(&primary), digest_of(&mut primary.conn()));
    assert!(primary.stop().success());
    std::fs::write(&hold, b"").unwrap();
    let replica = Unwaited::start(&["--kafka", &uri, "--replica-tcp", "127.0.0.1", &pport]);
    let m =
        replica.wait_for("the stall", 60, |m| m["replica_last_error"].contains("stalled at broker offset"));
    assert_eq!(m["goblin_ready"], "0", "{m:?}");
    assert!(m["replica_last_error"].contains("the next attempt goes on from broker offset"), "{m:?}");
    let prefix: u64 = m["slave_repl_offset"].parse().unwrap();
    // Kafka served every batch that starts below the held offset (so every record below it,
    // and perhaps a few past it): a prefix, kept.
    assert!(prefix >= 300 && prefix < want.0, "the records Kafka served were applied and kept: {m:?}");
    std::fs::remove_file(&hold).unwrap();
    // The next attempt starts from the last record applied (inclusively), not from 0.
    let replays = |log: &str| -> Vec<i64> {
        log.match_indices("replaying topic rr-stall from broker offset ")
            .map(|(i, pat)| {
                let rest = &log[i + pat.len()..];
                rest[..rest.find(|c: char| !c.is_ascii_digit()).unwrap()].parse().unwrap()
            })
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while replays(&replica.log()).len() < 2 {
        assert!(Instant::now() < deadline, "no second replay: {}", replica.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let from = replays(&replica.log());
    assert_eq!(from[0], 0, "{from:?}");
    // No other producer wrote: logical offset n is broker offset n - 1.
    assert!(from[1..].iter().all(|&f| f == prefix as i64 - 1), "prefix {prefix}, attempts from {from:?}");
    replica.wait_for("the whole topic", 30, |m| m["slave_repl_offset"] == want.0.to_string());
    assert_eq!(replica.digest(), want.1);
    // The primary back on the same history: followed live.
    let primary =
        Server::start(&["--port", &pport, "--kafka", &uri, "--load", &snap, "--enable-debug-command", "yes"]);
    replica.wait_for("live", 30, |m| m["replica_state"] == "live");
    write_some(&primary, 5);
    let want = (offset(&primary), digest_of(&mut primary.conn()));
    replica.wait_for("the new writes", 30, |m| m["slave_repl_offset"] == want.0.to_string());
    assert_eq!(replica.digest(), want.1);
}

/// Other producers' records after the primary's last own record, one of them a write that
/// fails (INCR of a string): the replay applies the one before it and stops there, and every
/// later attempt stops at the same record, with nothing applied twice and nothing after it
/// applied.
#[test]
fn a_failing_record_of_another_producer_stops_every_attempt_at_it() {
    let k = Kaka::start();
    let uri = k.uri("rr-ext");
    let mut primary = Server::start(&["--kafka", &uri, "--save", ""]);
    write_some(&primary, 10);
    let _: () = redis::cmd("SET").arg("s").arg("abc").query(&mut primary.conn()).unwrap();
    let own = offset(&primary);
    assert!(primary.stop().success());
    produce_commands(&k.addr, "rr-ext", &[&["APPEND", "ext", "a"], &["INCR", "s"], &["APPEND", "ext", "b"]]);
    let replica = Unwaited::start(&["--kafka", &uri, "--replica-tcp", "127.0.0.1", &free_port().to_string()]);
    let m = replica.wait_for("degraded", 30, |m| m["replica_state"] == "degraded");
    assert!(m["replica_last_error"].contains("not an integer"), "{m:?}");
    assert_eq!(m["slave_repl_offset"], (own + 1).to_string(), "the first APPEND applied: {m:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while replica.log().matches("replaying topic rr-ext from broker offset").count() < 2 {
        assert!(Instant::now() < deadline, "no second replay: {}", replica.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let m = replica.wait_for("still degraded", 30, |m| m["replica_state"] == "degraded");
    assert!(m["replica_last_error"].contains("not an integer"), "{m:?}");
    assert_eq!(m["slave_repl_offset"], (own + 1).to_string(), "{m:?}");
    let ext: String = redis::cmd("GET").arg("ext").query(&mut replica.conn()).unwrap();
    assert_eq!(ext, "a", "the APPEND before the failing record once, none after it");
}

/// The upstream is ahead and Kafka hangs (SIGSTOP): the catch-up cannot start. The replica opens
/// not ready, and its retries ask Kafka on the connector thread, so its clients are served
/// promptly meanwhile; once Kafka answers, it hands off and goes live.
#[test]
fn a_hanging_kafka_delays_the_handoff_without_blocking_clients() {
    let k = Kaka::start();
    let uri = k.uri("rr-hang");
    let snap = sock("primary.gcsn");
    let primary = Server::start(&["--kafka", &uri, "--load", &snap, "--enable-debug-command", "yes"]);
    write_some(&primary, 60);
    let _: () = redis::cmd("SAVE").query(&mut primary.conn()).unwrap();
    let old = sock("replica.gcsn");
    std::fs::copy(&snap, &old).unwrap();
    write_some(&primary, 100);
    let kaka = k.child.id() as i32;
    // SAFETY: signalling the broker process this test started.
    unsafe { libc::kill(kaka, libc::SIGSTOP) };
    struct Cont(i32);
    impl Drop for Cont {
        fn drop(&mut self) {
            // SAFETY: as above.
            unsafe { libc::kill(self.0, libc::SIGCONT) };
        }
    }
    let cont = Cont(kaka);
    let replica = Unwaited::start(&[
        "--load",
        &old,
        "--kafka",
        &uri,
        "--replica-tcp",
        "127.0.0.1",
        &primary.port.to_string(),
    ]);
    let m =
        replica.wait_for("not ready", 30, |m| m["goblin_ready"] == "0" && m["replica_state"] != "connecting");
    assert!(m["replica_last_error"].contains("a Kafka catch-up is needed"), "{m:?}");
    assert_eq!(m["replica_lag"], "-1", "{m:?}");
    // Several retries happen meanwhile; none holds the server thread.
    let mut c = replica.conn();
    let mut slowest = Duration::ZERO;
    let until = Instant::now() + Duration::from_secs(12);
    while Instant::now() < until {
        let t = Instant::now();
        let _: String = redis::cmd("PING").query(&mut c).unwrap();
        slowest = slowest.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(slowest < Duration::from_secs(2), "a client waited {slowest:?}");
    let m = info(&mut c, "replication");
    assert!(m["replica_reconnect_attempts"].parse::<u64>().unwrap() >= 2, "{m:?}");
    assert_eq!(m["goblin_ready"], "0");
    drop(cont);
    replica.wait_for("live", 40, |m| m["replica_state"] == "live");
    let want = (offset(&primary), digest_of(&mut primary.conn()));
    replica.wait_for("the primary's offset", 30, |m| m["slave_repl_offset"] == want.0.to_string());
    assert_eq!(replica.digest(), want.1);
}

/// replica_lag is -1 whenever the upstream's offset is unknown: the link down, or an upstream
/// of another lineage. upstream_repl_offset keeps the last value known in this lineage, and is
/// -1 for another lineage.
#[test]
fn replica_lag_is_unknown_while_the_link_is_down_or_of_another_lineage() {
    let pport = free_port().to_string();
    let primary = Server::start(&["--port", &pport]);
    let replica = Server::start(&["--replica-tcp", "127.0.0.1", &pport]);
    wait_for(&replica, "live", |m| m["replica_state"] == "live");
    let mut pc = primary.conn();
    for i in 0..5 {
        let _: () = redis::cmd("SET").arg(format!("k{i}")).arg(i).query(&mut pc).unwrap();
    }
    let m = wait_for(&replica, "the writes", |m| m["slave_repl_offset"] == "5");
    assert_eq!((m["upstream_repl_offset"].as_str(), m["replica_lag"].as_str()), ("5", "0"));
    let mut primary = primary;
    primary.signal(libc::SIGKILL);
    primary.wait_exit(Duration::from_secs(10)).unwrap();
    let m = wait_for(&replica, "the link down", |m| m["master_link_status"] == "down");
    assert_eq!((m["upstream_repl_offset"].as_str(), m["replica_lag"].as_str()), ("5", "-1"), "{m:?}");
    // A fresh primary on that address: another lineage, whose offsets mean nothing here.
    let fresh = Server::start(&["--port", &pport]);
    let _: () = redis::cmd("SET").arg("other").arg("1").query(&mut fresh.conn()).unwrap();
    let m = wait_for(&replica, "another lineage", |m| m["replica_last_error"].contains("different history"));
    assert_eq!((m["upstream_repl_offset"].as_str(), m["replica_lag"].as_str()), ("-1", "-1"), "{m:?}");
    assert_eq!(m["goblin_ready"], "0");
}

/// A --replication-buffer-bytes the kernel cannot map used to start, then fail every
/// GOBLIN.FIREHOSE; startup now refuses it, naming the flag, with a usage error's status.
#[test]
fn an_unmappable_replication_buffer_stops_startup() {
    if std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|m| m.trim() == "1") {
        eprintln!("skipped: vm.overcommit_memory=1 maps any size");
        return;
    }
    let out = run(&["--port", "0", "--replication-buffer-bytes", "1000000gb"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--replication-buffer-bytes") && err.contains("cannot map"), "{err}");
    // A size that maps still starts, and serves a subscriber.
    let primary = Server::start(&["--replication-buffer-bytes", "64kb"]);
    let replica = Server::start(&["--replica-tcp", "127.0.0.1", &primary.port.to_string()]);
    wait_for(&replica, "live", |m| m["replica_state"] == "live");
}

/// `dumpworld` against a server with --auth-file: AUTH from --user and --password-file first;
/// a wrong password or none is a clear error and installs nothing.
#[test]
fn dumpworld_authenticates_from_a_password_file() {
    let acl = temp_path("users.acl");
    std::fs::write(&acl, "user default on >defaultpw ~* &* +@all\nuser alice on >alicepw ~* &* +@all\n")
        .unwrap();
    let server =
        Server::start(&["--auth-file", acl.to_str().unwrap(), "--save", "", "--enable-debug-command", "yes"]);
    let url = format!("redis://alice:alicepw@127.0.0.1:{}/", server.port);
    let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
    for i in 0..200 {
        let _: () = redis::cmd("HSET").arg(format!("h{}", i % 7)).arg(i).arg(i).query(&mut con).unwrap();
    }
    let want = digest_of(&mut con);
    let port = server.port.to_string();
    let write = |tag: &str, text: &str| {
        let p = temp_path(tag);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let good = write("alice.password", "alicepw\n");
    let bad = write("bad.password", "guess\n");
    let default = write("default.password", "defaultpw\n");
    let dump = |out: &str, extra: &[&str]| {
        run(&[&["dumpworld", "--host", "127.0.0.1", "--port", &port, "-o", out], extra].concat())
    };
    let out = sock("alice.gcsn");
    let r = dump(&out, &["--user", "alice", "--password-file", &good]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let copy = Server::start(&["--load", &out, "--save", "", "--enable-debug-command", "yes"]);
    assert_eq!(digest_of(&mut copy.conn()), want);
    // --password-file alone authenticates as `default`.
    let out2 = sock("default.gcsn");
    let r = dump(&out2, &["--password-file", &default]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    // A wrong password: refused, named, nothing installed.
    let out3 = sock("wrong.gcsn");
    let r = dump(&out3, &["--user", "alice", "--password-file", &bad]);
    assert_eq!(r.status.code(), Some(1));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("refused AUTH as user 'alice'") && err.contains("WRONGPASS"), "{err}");
    assert!(!std::path::Path::new(&out3).exists());
    // No credentials: NOAUTH, with the flags to give.
    let r = dump(&out3, &[]);
    assert_eq!(r.status.code(), Some(1));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("NOAUTH") && err.contains("--password-file"), "{err}");
    assert!(!std::path::Path::new(&out3).exists());
    // A user without a password file is a usage error; so are the flags without the tool.
    let r = dump(&out3, &["--user", "alice"]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("--password-file <PATH>"), "{r:?}");
    let r = run(&["--port", "0", "--password-file", &good]);
    assert_eq!(r.status.code(), Some(2));
}

/// The texts that list the upstream transports name all four.
#[test]
fn replica_texts_name_every_transport() {
    let pw = temp_path("replica.password");
    std::fs::write(&pw, "pw\n").unwrap();
    let out = run(&[
        "--port",
        "0",
        "--replica-auth-user",
        "r",
        "--replica-auth-password-file",
        pw.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for t in ["--replica-tcp", "--replica-uds", "--replica-ring", "--replica-rdma"] {
        assert!(err.contains(t), "{t}: {err}");
    }
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ARCHITECTURE.md")).unwrap();
    let role = doc.lines().find(|l| l.contains("`slave host port")).expect("the ROLE line");
    assert!(role.contains("tcp|uds|ring|rdma"), "{role}");
}

/// A primary journaling to `k`'s topic `topic`, with some history, and a client writing
/// `value_len`-byte values to it steadily until told to stop (its count of writes).
struct BusyPrimary {
    primary: Server,
    uri: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    writer: std::thread::JoinHandle<u64>,
}

impl BusyPrimary {
    fn start(k: &Kaka, topic: &str, value_len: usize) -> BusyPrimary {
        let uri = k.uri(topic);
        // The primary's queue for its subscriber is large: what is under test is the replica's
        // buffer, not how long a primary waits for a slow subscriber.
        let primary = Server::start(&[
            "--kafka",
            &uri,
            "--enable-debug-command",
            "yes",
            "--replication-buffer-bytes",
            "32mb",
        ]);
        write_some(&primary, 300);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let port = primary.port;
        let writer = std::thread::spawn({
            let stop = stop.clone();
            move || {
                use std::sync::atomic::Ordering;
                let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                    .unwrap()
                    .get_connection()
                    .unwrap();
                let value = vec![b'v'; value_len];
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let _: () =
                        redis::cmd("SET").arg(format!("big:{}", n % 16)).arg(&value).query(&mut c).unwrap();
                    n += 1;
                    if n.is_multiple_of(16) {
                        // A steady load, not a flood that no replica on this machine could follow.
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                n
            }
        });
        // The writes are going on before any replica starts.
        std::thread::sleep(Duration::from_millis(300));
        BusyPrimary { primary, uri, stop, writer }
    }

    /// A replica of it with a 64 KiB --replication-buffer-bytes, and `extra` flags.
    fn replica(&self, extra: &[&str]) -> Unwaited {
        let port = self.primary.port.to_string();
        let args = [
            extra,
            &[
                "--kafka",
                &self.uri,
                "--replication-buffer-bytes",
                "64kb",
                "--replica-tcp",
                "127.0.0.1",
                &port,
            ],
        ]
        .concat();
        Unwaited::start(&args)
    }

    /// Stops the writes (their count), then checks that `replica` is live at the primary's
    /// offset with its data.
    fn stop_and_compare(self, replica: &Unwaited) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let written = self.writer.join().unwrap();
        replica.wait_for("live once the writes stop", 60, |m| m["replica_state"] == "live");
        let want = (offset(&self.primary), digest_of(&mut self.primary.conn()));
        replica.wait_for("the primary's offset", 30, |m| m["slave_repl_offset"] == want.0.to_string());
        assert_eq!(replica.digest(), want.1);
        written
    }
}

/// A replica that starts behind a primary writing steadily buffers the firehose in memory while
/// it catches up through Kafka. The buffer was a fixed --replication-buffer-bytes mapping: any
/// catch-up that outlasted a few writes abandoned the attempt, and so did every retry, so a
/// replica could not start beside a busy primary (nor meet one batch larger than the buffer).
/// Now it goes live while the writes go on, and holds exactly what the primary holds.
#[test]
fn a_steady_write_load_during_the_kafka_catch_up_does_not_stop_the_handoff() {
    let k = Kaka::start();
    let busy = BusyPrimary::start(&k, "rr-load", 8 * 1024);
    let replica = busy.replica(&[]);
    let m = replica.wait_for("live under load", 60, |m| m["replica_state"] == "live");
    assert_eq!(m["goblin_ready"], "1", "{m:?}");
    // Still writing after the replica went live: the live link's frames follow the buffered ones.
    std::thread::sleep(Duration::from_millis(300));
    let log = replica.log();
    assert!(log.contains("catching up through Kafka"), "no Kafka catch-up happened:\n{log}");
    assert!(!log.contains("retrying"), "an attempt was abandoned:\n{log}");
    let written = busy.stop_and_compare(&replica);
    assert!(written * 8 * 1024 > 4 * 64 * 1024, "the load was too light to test anything: {written} writes");
}

/// The handoff's buffer is bounded by `client-output-buffer-limit replica`'s hard limit: past it
/// the attempt is abandoned, saying so, and retried; once the writes stop, the replica goes live.
#[test]
fn the_handoff_buffer_stops_at_the_replica_output_limit() {
    let k = Kaka::start();
    let busy = BusyPrimary::start(&k, "rr-limit", 256 * 1024);
    let replica = busy.replica(&["--client-output-buffer-limit", "replica 128kb 0 0"]);
    replica.wait_log("hard limit during the Kafka catch-up", Instant::now() + Duration::from_secs(60));
    busy.stop_and_compare(&replica);
}
