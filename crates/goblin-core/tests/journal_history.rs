//! The startup replay against histories that are not simply whole. It refuses what it cannot
//! read whole (DESIGN.md decision 4: no silent holes): records removed under the replay, a
//! snapshot older than the topic's retained history, and a snapshot whose Kafka cursor lies
//! past the end of the topic it is started on; each once ended in a server that listened with
//! part of its history missing, and now stops it before it listens, with an error that says
//! why. It discards an older lineage's records ahead of its
//! own, follows a restarted primary's successor lineage from the record that names its
//! predecessor, and it reports its progress while it runs.

mod common;

use common::brokers::{info, produce_commands, Broker, Kaka};
use common::unwaited::Unwaited;
use common::{free_port, run_to_exit, temp_path, Server};
use std::time::{Duration, Instant};

/// Waits (30 s at most) until `INFO kafka` shows `field` at `want` with nothing pending.
fn wait_kafka(con: &mut redis::Connection, field: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = info(con, "kafka");
        if m[field] == want && m["kafka_pending_records"] == "0" {
            return;
        }
        assert!(Instant::now() < deadline, "{field} never {want}: {m:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A kaka whose fetches return nothing at or past broker offset 300 while the returned file
/// exists (its test hook), and `topic` on it holding 30,000 SETs of about 150 bytes each:
/// several fetches' worth, so that the batches served below the hold end far below the topic's
/// end.
fn held_topic(topic: &str) -> (Kaka, std::path::PathBuf) {
    let hold = temp_path("kaka-hold");
    std::fs::write(&hold, b"").unwrap();
    let k = Kaka::start_with(
        &temp_path("kaka-held"),
        free_port(),
        &["--debug-hold-fetches-at", "300", "--debug-hold-file", hold.to_str().unwrap()],
    );
    let value = "v".repeat(100);
    let keys: Vec<String> = (0..30_000).map(|i| format!("k{i}")).collect();
    let cmds: Vec<[&str; 3]> = keys.iter().map(|k| ["SET", k.as_str(), value.as_str()]).collect();
    let cmds: Vec<&[&str]> = cmds.iter().map(|c| &c[..]).collect();
    // The last 1,000 in one batch, 29,000-29,999: a deletion up to 29,000 leaves whole
    // batches (as retention, which deletes whole segments, always does; see kaka's fetch), one
    // up to 29,001 cuts a batch.
    produce_commands(&k.addr, topic, &cmds[..29_000]);
    common::brokers::produce_commands_in_one_batch(&k.addr, topic, &cmds[29_000..]);
    (k, hold)
}

/// Retention removes records the startup replay has not read yet (kaka's test hook holds the
/// replay at broker offset 300 while a file exists; then everything below 29,000 is
/// deleted). The replay's next fetch is below the log start, which kaka serves from the oldest
/// record kept: the replay sees its next record past the log start, and the startup stops with
/// an error naming the hole. Before, librdkafka's default reset jumped to the topic's end, whose
/// end-of-partition event the replay took for a finished replay, and the server listened
/// without 28,700 of the writes.
#[test]
fn records_removed_under_the_startup_replay_stop_it() {
    let log = removed_under_the_startup_replay("history-removed-under-replay", 29_000);
    // kaka served the deleted offset from the oldest record kept: the replay saw the jump.
    assert!(log.contains("the earliest retained at 29000"), "{log}");
}

/// The same with the log start inside a batch (a deletion, never retention): kaka answers the
/// replay's fetch below it with OFFSET_OUT_OF_RANGE, as Apache Kafka does, and the startup
/// stops on that.
#[test]
fn records_removed_inside_a_batch_under_the_startup_replay_stop_it() {
    let log = removed_under_the_startup_replay("history-removed-inside-a-batch", 29_001);
    assert!(!log.contains("the earliest retained at"), "{log}");
}

/// Starts a primary on a held topic, deletes the records below `before` while its replay is
/// held at 300, and returns its log once it has exited 1 on the hole.
fn removed_under_the_startup_replay(topic: &str, before: i64) -> String {
    let (k, hold) = held_topic(topic);
    let s = Unwaited::start(&["--kafka", &k.uri(topic), "--save", ""]);
    let deadline = Instant::now() + Duration::from_secs(60);
    s.wait_log("replaying topic", deadline);
    s.wait_log("from broker offset 0 through 30000", deadline);
    // The replay reads what is served below the hold, then waits (its stall bound is 15 s).
    std::thread::sleep(Duration::from_millis(1500));
    k.delete_records(topic, before);
    std::fs::remove_file(&hold).unwrap();
    let code = s.wait_exit(Instant::now() + Duration::from_secs(60));
    let log = s.log();
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("were removed (retention, or a deletion) before they were read"), "{log}");
    assert!(log.contains("the history has a hole"), "{log}");
    log
}

/// A primary's snapshot names the broker offset of its last acknowledged record. Started on a
/// topic that does not hold that record (deleted and created again, or the wrong cluster), the
/// replay used to find nothing to read and the primary went on writing the lineage over the
/// missing records. Now it refuses to start, on an empty topic and on a shorter one.
#[test]
fn a_snapshot_whose_cursor_is_past_the_topic_end_is_refused() {
    let k = Kaka::start();
    let snap = temp_path("past-end.gcsn");
    let sp = snap.to_str().unwrap().to_string();
    let mut a = Server::start(&["--kafka", &k.uri("history-long"), "--load", &sp, "--save", ""]);
    let mut con = a.conn();
    for i in 0..10 {
        let _: () = redis::cmd("SET").arg(format!("k{i}")).arg(i).query(&mut con).unwrap();
    }
    wait_kafka(&mut con, "kafka_acknowledged_broker_offset", "9");
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    a.signal(libc::SIGTERM);
    a.wait_exit(Duration::from_secs(30)).unwrap();

    // An empty topic (created by goblin-core's own check of the topic).
    let (code, err) =
        run_to_exit(&["--port", "0", "--kafka", &k.uri("history-empty"), "--load", &sp, "--save", ""]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("the Kafka cursor (broker offset 9) is past the end of topic history-empty"),
        "{err}"
    );
    assert!(err.contains("it is empty"), "{err}");
    assert!(!err.contains("listening on"), "{err}");

    // A topic with two records (another producer's).
    produce_commands(&k.addr, "history-short", &[&["SET", "x", "1"], &["SET", "y", "2"]]);
    let (code, err) =
        run_to_exit(&["--port", "0", "--kafka", &k.uri("history-short"), "--load", &sp, "--save", ""]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("past the end of topic history-short: its last record is at offset 1"), "{err}");
    assert!(!err.contains("listening on"), "{err}");

    // The topic it was journaled to still starts it, with every write.
    let b = Server::start(&["--kafka", &k.uri("history-long"), "--load", &sp, "--save", ""]);
    let mut con = b.conn();
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, 10);
}

/// Records of an older lineage ahead of the snapshot's own are history the snapshot replaced:
/// the replay discards them, counted, and applies only its own lineage's. Here the snapshot
/// was saved by a server without --kafka (no cursor, a lineage of its own), and the buffer of
/// --kafka-time-buffer reaches back over the topic's older records.
#[test]
fn records_of_an_older_lineage_are_discarded() {
    let k = Kaka::start();
    let uri = k.uri("history-lineages");
    // Lineage A: five writes journaled.
    let a = Server::start(&["--kafka", &uri, "--save", ""]);
    let mut con = a.conn();
    for i in 0..5 {
        let _: () = redis::cmd("SET").arg(format!("a{i}")).arg(i).query(&mut con).unwrap();
    }
    wait_kafka(&mut con, "kafka_acknowledged_offset", "5");
    drop(a);
    // Lineage B: a server without Kafka, its snapshot without cursors.
    let snap = temp_path("lineage-b.gcsn");
    let sp = snap.to_str().unwrap().to_string();
    let b = Server::start(&["--load", &sp, "--save", ""]);
    let mut con = b.conn();
    let _: () = redis::cmd("SET").arg("b").arg("1").query(&mut con).unwrap();
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let lineage_b = info(&mut con, "replication")["master_replid"].clone();
    drop(b);
    let args = ["--kafka", uri.as_str(), "--load", sp.as_str(), "--kafka-time-buffer", "3600", "--save", ""];
    let keys = |con: &mut redis::Connection| {
        let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(con).unwrap();
        keys.sort();
        keys
    };
    // B journals to the topic after A's records; its replay passed over A's.
    let b = Server::start(&args);
    let mut con = b.conn();
    let m = info(&mut con, "kafka");
    assert_eq!(m["kafka_replay_records_older_lineage"], "5", "{m:?}");
    assert_eq!(keys(&mut con), ["b"]);
    // It goes on under a successor of B from B's offset.
    let m = info(&mut con, "replication");
    assert_eq!((m["master_replid2"].as_str(), m["second_repl_offset"].as_str()), (lineage_b.as_str(), "2"));
    let _: () = redis::cmd("SET").arg("c").arg("1").query(&mut con).unwrap();
    wait_kafka(&mut con, "kafka_acknowledged_offset", "2");
    drop(b);
    // Restarted from the same snapshot: A's records discarded again, B's own applied.
    let b = Server::start(&args);
    let mut con = b.conn();
    let m = info(&mut con, "kafka");
    assert_eq!(m["kafka_replay_records_older_lineage"], "5", "{m:?}");
    assert_eq!(keys(&mut con), ["b", "c"]);
}

/// The state's replication position: (id, offset, master_replid2, second_repl_offset).
fn position(con: &mut redis::Connection) -> (String, u64, String, i64) {
    let m = info(con, "replication");
    (
        m["master_replid"].clone(),
        m["master_repl_offset"].parse().unwrap(),
        m["master_replid2"].clone(),
        m["second_repl_offset"].parse().unwrap(),
    )
}

fn list(con: &mut redis::Connection) -> Vec<String> {
    redis::cmd("LRANGE").arg("l").arg(0).arg(-1).query(con).unwrap()
}

/// A primary restarted from its topic goes on under a successor lineage from the offset it
/// recovered (the process before it may have sent replicas writes the topic never got), and
/// its first record names that predecessor. A replay from the first record crosses there,
/// other producers' records included, each where the primaries applied it: one written while
/// no primary ran (the restarted primary applied it while it recovered, under the
/// predecessor), one written before the restarted primary's first own write (applied under
/// its own id). Without the crossing, the replay would take the second lineage for a second
/// primary writing the topic and stop.
#[test]
fn a_replay_follows_restarted_primaries_through_their_successor_lineages() {
    let k = Kaka::start();
    let topic = "history-successors";
    let uri = k.uri(topic);
    let args = ["--kafka", uri.as_str(), "--save", "", "--enable-debug-command", "yes"];
    let mut a = Server::start(&args);
    let mut con = a.conn();
    for i in 0..20 {
        let _: i64 = redis::cmd("RPUSH").arg("l").arg(format!("a{i}")).query(&mut con).unwrap();
    }
    wait_kafka(&mut con, "kafka_acknowledged_offset", "20");
    let (first, x, _, none) = position(&mut con);
    assert_eq!((x, none), (20, -1));
    a.signal(9);
    a.wait_exit(Duration::from_secs(10)).unwrap();
    produce_commands(&k.addr, topic, &[&["RPUSH", "l", "ext-down"]]);

    let mut b = Server::start(&args);
    let mut con = b.conn();
    let (second, at, previous, second_offset) = position(&mut con);
    assert_ne!(second, first);
    assert_eq!((at, previous.as_str(), second_offset), (21, first.as_str(), 22));
    assert!(b.log().contains(&format!("continues lineage {first} from its offset 21")), "{}", b.log());
    produce_commands(&k.addr, topic, &[&["RPUSH", "l", "ext-up"]]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while info(&mut con, "kafka")["kafka_external_records_applied"] != "1" {
        assert!(Instant::now() < deadline, "the other producer's record was not applied");
        std::thread::sleep(Duration::from_millis(20));
    }
    for i in 0..10 {
        let _: i64 = redis::cmd("RPUSH").arg("l").arg(format!("b{i}")).query(&mut con).unwrap();
    }
    wait_kafka(&mut con, "kafka_acknowledged_offset", "32");
    let digest: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut con).unwrap();
    b.signal(9);
    b.wait_exit(Duration::from_secs(10)).unwrap();

    // The replay from the first record: lineage `first` through 21 (its 20 records, then the
    // held ext-down), `second` from there (ext-up, then its own 10).
    let c = Server::start(&args);
    let mut con = c.conn();
    let (third, at, previous, _) = position(&mut con);
    assert_eq!((at, previous.as_str()), (32, second.as_str()));
    assert!(third != first && third != second);
    let got: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut con).unwrap();
    assert_eq!(got, digest);
    let mut want: Vec<String> = (0..20).map(|i| format!("a{i}")).collect();
    want.extend(["ext-down".to_string(), "ext-up".to_string()]);
    want.extend((0..10).map(|i| format!("b{i}")));
    assert_eq!(list(&mut con), want);
    let m = info(&mut con, "kafka");
    assert_eq!(m["kafka_replay_successor_lineages"], "1", "{m:?}");
    assert_eq!(m["kafka_replay_external_records_applied"], "2", "{m:?}");
    assert_eq!(m["kafka_replay_records_older_lineage"], "0", "{m:?}");
}

/// A restarted primary that saved a snapshot and stopped before it journaled anything leaves
/// no record of its lineage in the topic. The primary restarted from that snapshot names, on
/// its first record, the lineage the topic knows (the one the snapshot's lineage continues,
/// from the same offset), so a replay from the first record still crosses to it, and a replay
/// from that snapshot takes it as a continuation of its own predecessor at its offset.
#[test]
fn a_restart_that_journaled_nothing_is_passed_over_by_the_next() {
    let k = Kaka::start();
    let topic = "history-silent-restart";
    let uri = k.uri(topic);
    let snap = temp_path("silent.gcsn");
    let sp = snap.to_str().unwrap().to_string();
    let args =
        ["--kafka", uri.as_str(), "--load", sp.as_str(), "--save", "", "--enable-debug-command", "yes"];
    let mut a = Server::start(&args);
    let mut con = a.conn();
    for i in 0..10 {
        let _: i64 = redis::cmd("RPUSH").arg("l").arg(format!("a{i}")).query(&mut con).unwrap();
    }
    wait_kafka(&mut con, "kafka_acknowledged_offset", "10");
    let (first, ..) = position(&mut con);
    a.signal(9);
    a.wait_exit(Duration::from_secs(10)).unwrap();
    // B: recovered, saved, gone, without a write.
    let mut b = Server::start(&args);
    let mut con = b.conn();
    let (second, at, previous, _) = position(&mut con);
    assert_eq!((at, previous.as_str()), (10, first.as_str()));
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let silent = temp_path("silent-copy.gcsn");
    std::fs::copy(&snap, &silent).unwrap();
    b.signal(9);
    b.wait_exit(Duration::from_secs(10)).unwrap();
    // C: from B's snapshot, and it writes.
    let mut c = Server::start(&args);
    let mut con = c.conn();
    let (third, _, previous, _) = position(&mut con);
    assert_eq!(previous, second);
    for i in 0..5 {
        let _: i64 = redis::cmd("RPUSH").arg("l").arg(format!("c{i}")).query(&mut con).unwrap();
    }
    wait_kafka(&mut con, "kafka_acknowledged_offset", "15");
    let digest: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut con).unwrap();
    c.signal(9);
    c.wait_exit(Duration::from_secs(10)).unwrap();
    let mut want: Vec<String> = (0..10).map(|i| format!("a{i}")).collect();
    want.extend((0..5).map(|i| format!("c{i}")));
    // From the first record (A's ten, then C's five), and from B's snapshot (C's five).
    let silent = silent.to_str().unwrap();
    for load in [None, Some(silent)] {
        let mut args = vec!["--kafka", uri.as_str(), "--save", "", "--enable-debug-command", "yes"];
        if let Some(p) = load {
            args.extend(["--load", p]);
        }
        let d = Server::start(&args);
        let mut con = d.conn();
        let (_, at, previous, _) = position(&mut con);
        assert_eq!((at, previous.as_str()), (15, third.as_str()), "{load:?}");
        let got: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut con).unwrap();
        assert_eq!(got, digest, "{load:?}");
        assert_eq!(list(&mut con), want, "{load:?}");
        assert_eq!(info(&mut con, "kafka")["kafka_replay_successor_lineages"], "1", "{load:?}");
    }
}

/// A long replay reports its progress (broker offset, target, records/s, logical offset) at
/// least once a second. kaka's hook holds the replay at broker offset 300 for two seconds, so
/// that the replay of a small topic lasts long enough to report.
#[test]
fn a_long_replay_logs_its_progress() {
    let topic = "history-progress";
    let (k, hold) = held_topic(topic);
    let s = Unwaited::start(&["--kafka", &k.uri(topic), "--save", ""]);
    let deadline = Instant::now() + Duration::from_secs(60);
    s.wait_log(
        "replaying topic history-progress from broker offset 0 through 30000 (30000 records)",
        deadline,
    );
    std::thread::sleep(Duration::from_secs(2));
    std::fs::remove_file(&hold).unwrap();
    s.wait_log("listening on", deadline);
    let log = s.log();
    let progress =
        log.lines().find(|l| l.contains("replay: broker offset ")).unwrap_or_else(|| panic!("{log}"));
    assert!(
        progress.contains("of 29999 (") && progress.contains("records/s), logical offset "),
        "{progress}"
    );
}

/// A snapshot older than the topic's retained history: records after its cursor that
/// retention (here a deletion) removed are writes it does not hold, so the startup refuses.
/// Here they are another producer's writes, which the primary applied after the snapshot and
/// which no later record of its own follows: the check of logical offsets cannot see them
/// missing, and the startup used to warn and go on without them. Records removed up to the
/// snapshot's cursor are harmless.
#[test]
fn a_snapshot_older_than_the_retained_history_is_refused() {
    let k = Kaka::start();
    let topic = "history-retained";
    let snap = temp_path("retained.gcsn");
    let sp = snap.to_str().unwrap().to_string();
    let uri = k.uri(topic);
    let args = ["--kafka", uri.as_str(), "--load", sp.as_str(), "--save", ""];
    let mut a = Server::start(&args);
    let mut con = a.conn();
    for i in 0..10 {
        let _: () = redis::cmd("SET").arg(format!("k{i}")).arg(i).query(&mut con).unwrap();
    }
    wait_kafka(&mut con, "kafka_consumer_position", "10");
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    // Another producer's five writes, broker offsets 10-14, applied by the primary.
    let keys: Vec<String> = (0..5).map(|i| format!("x{i}")).collect();
    let cmds: Vec<[&str; 3]> = keys.iter().map(|k| ["SET", k.as_str(), "1"]).collect();
    let cmds: Vec<&[&str]> = cmds.iter().map(|c| &c[..]).collect();
    produce_commands(&k.addr, topic, &cmds);
    wait_kafka(&mut con, "kafka_external_records_applied", "5");
    a.signal(libc::SIGKILL);
    a.wait_exit(Duration::from_secs(10)).unwrap();

    // Records below the snapshot's cursor removed: it starts, with all 15 writes.
    k.delete_records(topic, 9);
    let b = Server::start(&args);
    let n: i64 = redis::cmd("DBSIZE").query(&mut b.conn()).unwrap();
    assert_eq!(n, 15);
    drop(b);

    // Three of the other producer's writes removed: refused.
    k.delete_records(topic, 13);
    let (code, err) = run_to_exit(&[&["--port", "0"][..], &args[..]].concat());
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("topic {topic} no longer holds the records this state needs")), "{err}");
    assert!(
        err.contains("they start at broker offset 10, and the earliest retained record is at 13"),
        "{err}"
    );
    assert!(!err.contains("listening on"), "{err}");
}
