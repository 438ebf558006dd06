//! The journal on a replicated Apache Kafka 4 cluster: three nodes, each a broker and a voter
//! of the KRaft quorum (`scripts/kafka4.sh start-cluster`), the topic with a replica on each
//! and `min.insync.replicas=2`. The seed leaves broker and leader changes to librdkafka's
//! reconnect logic; these tests hold goblin-core to what that promises: the partition leader
//! SIGKILLed during a pipelined write flood (twice, the second time the new leader) loses no
//! acknowledged write and doubles none, the topic holds each record once, and a primary
//! SIGKILLed afterwards recovers exactly that history from the cluster; with fewer in-sync
//! replicas than the topic requires, writes wait (the server stays up, the broker's refusal is
//! transient) and go on, in order, once a replica is back; a primary that restarts while its
//! partition's leader is dead waits for the new one; a rolling restart of the cluster loses
//! nothing.
//!
//! The nodes detect a dead peer in 3 s instead of Kafka's 9 s default
//! (`broker.session.timeout.ms`) and drop a silent follower from the in-sync set after 5 s
//! instead of 30 s (`replica.lag.time.max.ms`): the same failover, sooner. Three JVMs are
//! heavy on two cores, so the tests of this file take turns.

mod common;

use common::brokers::{info, Broker, Kafka4Cluster, PartitionState};
use common::flood::{assert_flood_lists, flood, flood_list, state, wait_acked, Flood, Until};
use common::Server;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One cluster at a time.
static TURN: Mutex<()> = Mutex::new(());

const FAST_FAILOVER: &[&str] =
    &["broker.heartbeat.interval.ms=500", "broker.session.timeout.ms=3000", "replica.lag.time.max.ms=5000"];

/// `clients` flooding writers on `port` until the flag is raised: the count of acknowledged
/// writes, the flag, and what each client saw once they stopped.
fn start_flood(port: u16, clients: usize) -> (Arc<AtomicU64>, Arc<AtomicBool>, JoinHandle<Vec<Flood>>) {
    let progress = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writers = std::thread::spawn({
        let (progress, until) = (progress.clone(), Until::Flag(stop.clone()));
        move || flood(port, &vec![0; clients], progress, until)
    });
    (progress, stop, writers)
}

/// Waits until `progress` has grown by `more` past `from` (up to 90 s: a failover takes the
/// cluster a few seconds, a loaded machine longer); returns the new count.
fn wait_progress(progress: &AtomicU64, from: u64, more: u64, what: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let now = progress.load(Ordering::Relaxed);
        if now >= from + more {
            return now;
        }
        assert!(Instant::now() < deadline, "{what}: {} writes acknowledged in 90 s", now - from);
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Each flooding client's list is exactly 1..n and every write it sent was acknowledged (none
/// of the connections broke).
fn assert_every_write_once(con: &mut redis::Connection, results: &[Flood], what: &str) {
    for (c, f) in results.iter().enumerate() {
        assert!(!f.cut, "{what}, client {c}: the connection broke");
        let items = flood_list(con, c);
        assert_eq!(
            items,
            (1..=items.len() as u64).collect::<Vec<_>>(),
            "{what}, client {c}: lost or doubled"
        );
        assert_eq!(items.len() as u64, f.acked, "{what}, client {c}: every write acknowledged once");
    }
}

/// The partition leader dies during a flood in broker ack mode; the cluster elects another
/// from the in-sync replicas, librdkafka finds it, and the writes go on. Then the new leader
/// dies too (the first one back in sync by then). Every acknowledged write is there once, the
/// topic holds every record once (its high watermark is the number of records produced: the
/// idempotent producer's retries across leaders wrote nothing twice), and after a SIGKILL of
/// the primary the cluster's copy recovers the same state, also when the primary restarts
/// while the leader is dead and not yet replaced.
#[test]
fn a_dead_partition_leader_loses_no_acknowledged_write() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Kafka4Cluster::start(FAST_FAILOVER);
    let topic = "journal-failover";
    let uri = cluster.uri(topic);
    let args = ["--kafka", uri.as_str(), "--kafka-ack-mode", "broker", "--save", ""];
    let s = Server::start(&args);
    // goblin-core created the topic: one partition, the cluster's default of three replicas.
    let p = cluster.wait_partition(topic, "fully replicated", |p| p.isr.len() == 3);
    assert_eq!(p.replicas.len(), 3, "{p:?}");

    let (progress, stop, writers) = start_flood(s.port, 4);
    let mut seen = wait_progress(&progress, 0, 500, "before the first failover");
    let mut leader = p.leader;
    for failover in 1..=2 {
        cluster.kill(leader);
        let at_kill = progress.load(Ordering::Relaxed);
        let next = cluster.wait_partition(topic, "led by another node", |p: &PartitionState| {
            p.leader != leader && !p.isr.contains(&leader)
        });
        seen = wait_progress(&progress, at_kill.max(seen), 500, &format!("after failover {failover}"));
        // The dead node comes back and catches up, so that the next failover has an in-sync
        // replica to elect.
        cluster.restart(leader);
        cluster.wait_partition(topic, "back in sync", |p| p.isr.len() == 3);
        leader = next.leader;
    }
    seen = wait_progress(&progress, seen, 500, "after the restarts");
    stop.store(true, Ordering::Relaxed);
    let results = writers.join().unwrap();
    assert!(progress.load(Ordering::Relaxed) >= seen);

    let mut con = s.conn();
    wait_acked(&mut con);
    assert_every_write_once(&mut con, &results, "after two failovers");
    let produced: i64 = info(&mut con, "kafka")["kafka_records_produced"].parse().unwrap();
    assert_eq!(cluster.high_watermark(topic), produced, "the topic holds each record once");
    let want = state(&mut con);
    assert_eq!(want.1, produced, "one record per mutation");
    drop(con);

    // The primary dies; restarted from the same command line it recovers from the cluster.
    let mut s = s;
    s.signal(9);
    s.wait_exit(Duration::from_secs(10)).unwrap();
    let r = Server::start(&args);
    let mut con = r.conn();
    assert_eq!(state(&mut con), want, "recovered from the cluster");
    let acked: Vec<u64> = results.iter().map(|f| f.acked).collect();
    assert_flood_lists(&mut con, &acked, "recovered from the cluster");
    // It goes on under a successor lineage, but writes nothing under it before it dies: the
    // topic knows only the first lineage, which the next restart continues again.
    drop(con);

    // Once more the leader dies, and the primary with it, and the primary starts again before
    // the cluster has replaced the leader: its startup (the topic's check, the watermarks,
    // the replay) waits for the new leader instead of failing, and then writes go on.
    let leader = cluster.wait_partition(topic, "fully replicated", |p| p.isr.len() == 3).leader;
    let mut r = r;
    cluster.kill(leader);
    r.signal(9);
    r.wait_exit(Duration::from_secs(10)).unwrap();
    let started = Instant::now();
    // Its startup waits out the election (up to a minute: `STARTUP_STALL`), and its first
    // metadata and admin requests may go to the dead node before the cluster has noticed.
    let r = Server::start_within(None, &args, Duration::from_secs(90));
    eprintln!("restarted beside a dead leader in {:?}", started.elapsed());
    let mut con = r.conn();
    assert_eq!(state(&mut con), want, "recovered while the leader was dead");
    let n: i64 = redis::cmd("RPUSH").arg("after-the-leader").arg("x").query(&mut con).unwrap();
    assert_eq!(n, 1);
    let p = cluster.partition(topic).expect("a leader");
    assert_ne!(p.leader, leader, "{p:?}");
    wait_acked(&mut con);
}

/// A rolling restart, as an upgrade of the cluster does it: each node in turn stopped cleanly
/// (a controlled shutdown moves its leaderships to another node first), started again and
/// waited for until back in sync, while clients write in broker ack mode. The writes go on
/// after each step, every one is acknowledged once, and the topic holds each record once.
#[test]
fn a_rolling_restart_of_the_cluster_loses_nothing() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Kafka4Cluster::start(FAST_FAILOVER);
    let topic = "journal-rolling";
    let uri = cluster.uri(topic);
    let args = ["--kafka", uri.as_str(), "--kafka-ack-mode", "broker", "--save", ""];
    let s = Server::start(&args);
    cluster.wait_partition(topic, "fully replicated", |p| p.isr.len() == 3);
    let (progress, stop, writers) = start_flood(s.port, 3);
    let mut seen = wait_progress(&progress, 0, 300, "before the restarts");
    let mut leaders = Vec::new();
    for id in 1..=3 {
        leaders.push(cluster.partition(topic).map(|p| p.leader));
        cluster.stop(id);
        seen = wait_progress(&progress, seen, 300, &format!("with node {id} stopped"));
        cluster.restart(id);
        cluster.wait_partition(topic, "back in sync", |p| p.isr.len() == 3);
        seen = wait_progress(&progress, seen, 300, &format!("after node {id} restarted"));
    }
    stop.store(true, Ordering::Relaxed);
    let results = writers.join().unwrap();
    let mut con = s.conn();
    wait_acked(&mut con);
    assert_every_write_once(&mut con, &results, "after a rolling restart");
    let produced: i64 = info(&mut con, "kafka")["kafka_records_produced"].parse().unwrap();
    assert_eq!(cluster.high_watermark(topic), produced, "the topic holds each record once");
    // The scenario moved the leadership at least once (a node stopped while it led).
    assert!(
        leaders.iter().enumerate().any(|(i, l)| *l == Some(i as i32 + 1)),
        "no step stopped the partition's leader: {leaders:?}"
    );
}

/// A topic that requires all three replicas in sync (`min.insync.replicas=3`) loses a follower:
/// once the leader drops it from the in-sync set, it refuses writes (NOT_ENOUGH_REPLICAS), which
/// librdkafka retries. In broker ack mode the clients' replies wait, INFO shows the records
/// pending, the server stays up and answers reads; when the follower is back in sync every
/// write is acknowledged, in order, once.
#[test]
fn too_few_in_sync_replicas_hold_writes_until_a_replica_returns() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Kafka4Cluster::start(FAST_FAILOVER);
    let topic = "journal-isr";
    cluster.create_topic(topic, 1, &["min.insync.replicas=3"]);
    let p = cluster.wait_partition(topic, "fully replicated", |p| p.isr.len() == 3);
    let uri = cluster.uri(topic);
    let args = ["--kafka", uri.as_str(), "--kafka-ack-mode", "broker", "--save", ""];
    let s = Server::start(&args);

    let (progress, stop, writers) = start_flood(s.port, 2);
    wait_progress(&progress, 0, 300, "before the follower's death");
    let follower = *p.replicas.iter().find(|&&id| id != p.leader).unwrap();
    cluster.kill(follower);
    cluster.wait_partition(topic, "without the dead follower in sync", |p| !p.isr.contains(&follower));
    // The leader now refuses: nothing more is acknowledged while the follower is away (what
    // was in flight when the set shrank may still land: read the count after a pause).
    std::thread::sleep(Duration::from_secs(2));
    let held = progress.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(progress.load(Ordering::Relaxed), held, "a write acknowledged with two replicas in sync");
    let mut con = s.conn();
    let k = info(&mut con, "kafka");
    assert!(k["kafka_pending_records"].parse::<u64>().unwrap() > 0, "{k:?}");
    assert!(k["kafka_oldest_pending_age_ms"].parse::<u64>().unwrap() >= 2000, "{k:?}");
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");

    cluster.restart(follower);
    cluster.wait_partition(topic, "back in sync", |p| p.isr.len() == 3);
    wait_progress(&progress, held, 300, "once the follower is back");
    stop.store(true, Ordering::Relaxed);
    let results = writers.join().unwrap();
    wait_acked(&mut con);
    assert_every_write_once(&mut con, &results, "after the follower's return");
    let produced: i64 = info(&mut con, "kafka")["kafka_records_produced"].parse().unwrap();
    assert_eq!(cluster.high_watermark(topic), produced, "the topic holds each record once");
    let want = state(&mut con);
    drop(con);
    drop(s);
    let r = Server::start(&args);
    assert_eq!(state(&mut r.conn()), want, "recovered from the cluster");
}
