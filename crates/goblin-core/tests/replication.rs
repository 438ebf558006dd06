//! Firehose replication through the real binaries: a primary with replicas over a Unix socket,
//! TCP and TLS, and a chain; the replica's states when its upstream dies and comes back; the
//! snapshot -> Kafka -> firehose handoff; a stopped subscriber cut off when its queue fills;
//! authentication; and a fake upstream that sends another version, a bad frame or a gap.

mod common;

use common::repl::{offset, repl, sock, wait_for};

use common::brokers::{info, produce_commands, random_command, Broker, Kaka};
use common::netns::Netns;
use common::unwaited::Unwaited;
use common::{run_to_exit, temp_path, Server};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

fn digest(s: &Server) -> String {
    redis::cmd("DEBUG").arg("DIGEST").query(&mut s.conn()).unwrap()
}

/// Waits until every replica has applied the primary's offset, then compares digests.
fn converge(primary: &Server, replicas: &[&Server]) {
    let want = offset(primary);
    for r in replicas {
        wait_for(r, "the primary's offset", |m| m["slave_repl_offset"] == want.to_string());
        assert_eq!(digest(r), digest(primary), "replica log:\n{}", r.log());
    }
}

/// Random writes of every type, TTLs, transactions and a blocked pop served later.
fn random_workload(s: &Server, rng: &mut impl rand::Rng, rounds: usize) {
    let mut con = s.conn();
    for _ in 0..rounds {
        let mut p = redis::pipe();
        for _ in 0..50 {
            let c = random_command(rng, 600_000..900_000);
            p.cmd(&c[0]).arg(&c[1..]).ignore();
        }
        let _: redis::RedisResult<()> = p.query(&mut con);
        let _: () = redis::pipe()
            .atomic()
            .cmd("INCR")
            .arg("tx")
            .cmd("LPUSH")
            .arg("tl")
            .arg("x")
            .query(&mut con)
            .unwrap();
    }
    // A blocked pop served by a later push: its own batch (a blocked retry). An earlier
    // round's leftover would serve it at once.
    let _: () = redis::cmd("SELECT").arg(0).query(&mut con).unwrap();
    let _: i64 = redis::cmd("DEL").arg("bq").query(&mut con).unwrap();
    let url = s.url();
    let waiter = std::thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let v: Option<(String, String)> = redis::cmd("BLPOP").arg("bq").arg(10).query(&mut c).unwrap();
        v
    });
    std::thread::sleep(Duration::from_millis(100));
    // The workload's SELECTs left the connection in some database: the waiter's is 0.
    let _: () = redis::cmd("SELECT").arg(0).query(&mut con).unwrap();
    let _: i64 = redis::cmd("RPUSH").arg("bq").arg("a").arg("b").query(&mut con).unwrap();
    assert_eq!(waiter.join().unwrap(), Some(("bq".into(), "a".into())));
}

/// A replica started with `args` (and DEBUG enabled), once it is live.
fn live_replica(args: &[&str]) -> Server {
    let mut all = args.to_vec();
    all.extend(["--enable-debug-command", "yes"]);
    let r = Server::start(&all);
    wait_for(&r, "live", |m| m["replica_state"] == "live");
    r
}

/// kaka, a topic URI, and a primary journaling to it with a snapshot path (DEBUG enabled).
fn journaling_primary(topic: &str) -> (Kaka, String, String, Server) {
    let k = Kaka::start();
    let uri = k.uri(topic);
    let snap = sock("primary.gcsn");
    let primary = Server::start(&["--kafka", &uri, "--load", &snap, "--enable-debug-command", "yes"]);
    (k, uri, snap, primary)
}

#[test]
fn replicas_over_uds_tcp_and_a_chain_reach_the_primarys_digest() {
    use rand::SeedableRng;
    let seed: u64 = rand::random();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let psock = sock("primary.sock");
    let asock = sock("replica-a.sock");
    let primary = Server::start(&["--unixsocket", &psock, "--enable-debug-command", "yes"]);
    let pport = primary.port.to_string();
    let a =
        Server::start(&["--replica-uds", &psock, "--unixsocket", &asock, "--enable-debug-command", "yes"]);
    let b = Server::start(&["--replica-tcp", "127.0.0.1", &pport, "--enable-debug-command", "yes"]);
    // A chain: primary -> a -> c.
    let c = Server::start(&["--replica-uds", &asock, "--enable-debug-command", "yes"]);
    for (r, transport) in [(&a, "uds"), (&b, "tcp"), (&c, "uds")] {
        let m = wait_for(r, "live", |m| m["replica_state"] == "live");
        assert_eq!((m["goblin_ready"].as_str(), m["master_link_status"].as_str()), ("1", "up"));
        assert_eq!(m["master_transport"], transport);
        assert_eq!(m["role"], "slave");
    }
    random_workload(&primary, &mut rng, 20);
    converge(&primary, &[&a, &b, &c]);
    // Every server holds the one lineage.
    let id = repl(&primary)["master_replid"].clone();
    for r in [&a, &b, &c] {
        assert_eq!(repl(r)["master_replid"], id, "seed {seed}");
    }
    // Replicas serve reads and refuse writes, inside MULTI too.
    let mut rc = a.conn();
    let n: i64 = redis::cmd("DBSIZE").query(&mut rc).unwrap();
    assert!(n > 0);
    let e = redis::cmd("SET").arg("k").arg("v").query::<()>(&mut rc).unwrap_err();
    assert_eq!(e.code(), Some("READONLY"), "{e}");
    let e = redis::pipe().atomic().cmd("INCR").arg("x").query::<()>(&mut rc).unwrap_err();
    assert!(e.to_string().contains("read only replica"), "{e}");
    // ROLE on both sides; the primary lists its two direct subscribers with their offsets.
    let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut rc).unwrap();
    assert_eq!(role.len(), 6);
    assert_eq!(role[0], redis::Value::BulkString(b"slave".to_vec()));
    assert_eq!(role[3], redis::Value::BulkString(b"connected".to_vec()));
    assert_eq!(role[5], redis::Value::BulkString(b"uds".to_vec()));
    let (kind, off, subs): (String, u64, Vec<(String, String, String)>) =
        redis::cmd("ROLE").query(&mut primary.conn()).unwrap();
    assert_eq!((kind.as_str(), subs.len()), ("master", 2));
    assert!(subs.iter().all(|s| s.2 == off.to_string()), "{subs:?}");
    assert_eq!(repl(&primary)["connected_slaves"], "2");
    // Their two fixed 1 MiB queues are reported (outside used_memory: they are mappings).
    let mem = info(&mut primary.conn(), "memory");
    assert_eq!(mem["mem_clients_slaves"], (2 << 20).to_string());
    // WAIT: the writer's last write reached both direct subscribers.
    let mut pc = primary.conn();
    let _: () = redis::cmd("SET").arg("w").arg("1").query(&mut pc).unwrap();
    let n: i64 = redis::cmd("WAIT").arg(2).arg(5000).query(&mut pc).unwrap();
    assert_eq!(n, 2);
    // Asking for more than exist times out with the count reached.
    let n: i64 = redis::cmd("WAIT").arg(3).arg(200).query(&mut pc).unwrap();
    assert_eq!(n, 2);
    // WAITAOF: without a journal no replica can recover the write after a crash, so none counts.
    let n: Vec<i64> = redis::cmd("WAITAOF").arg(0).arg(2).arg(100).query(&mut pc).unwrap();
    assert_eq!(n, [0, 0]);
    let e = redis::cmd("WAITAOF").arg(0).arg(1).arg(10).query::<Vec<i64>>(&mut rc).unwrap_err();
    assert!(e.to_string().contains("WAITAOF cannot be used with replica instances"), "{e}");
    // A script's writes on a replica are refused as a client's are.
    let e =
        redis::cmd("EVAL").arg("return redis.call('SET', 'k', 'v')").arg(0).query::<()>(&mut rc).unwrap_err();
    assert!(e.to_string().contains("read only replica"), "{e}");
    let e = redis::cmd("WAIT").arg(1).arg(10).query::<i64>(&mut rc).unwrap_err();
    assert!(e.to_string().contains("WAIT cannot be used with replica instances"), "{e}");
    // Keys past their deadline read as missing on a replica but stay until the primary's DEL.
    let _: () = redis::cmd("SET").arg("ttl").arg("v").arg("PX").arg(150).query(&mut pc).unwrap();
    converge(&primary, &[&a]);
    std::thread::sleep(Duration::from_millis(300));
    let v: Option<String> = redis::cmd("GET").arg("ttl").query(&mut rc).unwrap();
    assert_eq!(v, None);
    converge(&primary, &[&a, &b, &c]);
}

#[test]
fn the_replica_waits_out_a_dead_primary_and_returns_to_live_at_its_offset() {
    let k = Kaka::start();
    let uri = k.uri("repl-restart");
    let snap = sock("primary.gcsn");
    let pport = common::free_port().to_string();
    let pargs = [
        "--port",
        pport.as_str(),
        "--kafka",
        &uri,
        "--kafka-ack-mode",
        "broker",
        "--load",
        &snap,
        "--enable-debug-command",
        "yes",
    ];
    let mut primary = Server::start(&pargs);
    let replica = live_replica(&["--replica-tcp", "127.0.0.1", &pport, "--kafka", &uri]);
    let mut pc = primary.conn();
    for i in 0..200 {
        let _: () = redis::cmd("SET").arg(format!("k{i}")).arg(i).query(&mut pc).unwrap();
    }
    let _: () = redis::cmd("SAVE").query(&mut pc).unwrap();
    for i in 0..100 {
        let _: i64 = redis::cmd("INCR").arg("counter").query(&mut pc).unwrap();
        let _: i64 = redis::cmd("RPUSH").arg("list").arg(i).query(&mut pc).unwrap();
    }
    converge(&primary, &[&replica]);
    let want = (offset(&primary), digest(&primary));
    primary.signal(9);
    primary.wait_exit(Duration::from_secs(10)).unwrap();
    let m = wait_for(&replica, "the link lost", |m| m["goblin_ready"] == "0");
    assert!(matches!(m["replica_state"].as_str(), "reconnecting"), "{m:?}");
    assert_eq!(m["master_link_status"], "down");
    // Reads served, writes refused.
    let mut rc = replica.conn();
    let v: String = redis::cmd("GET").arg("k7").query(&mut rc).unwrap();
    assert_eq!(v, "7");
    let n: i64 = redis::cmd("LLEN").arg("list").query(&mut rc).unwrap();
    assert_eq!(n, 100);
    assert_eq!(redis::cmd("DEL").arg("k7").query::<i64>(&mut rc).unwrap_err().code(), Some("READONLY"));
    // The primary comes back from its snapshot and the topic, at the same lineage and offset:
    // the replica goes back to live at that exact offset without a Kafka catch-up.
    let primary = Server::start(&pargs);
    assert_eq!((offset(&primary), digest(&primary)), want);
    let m = wait_for(&replica, "live again", |m| m["replica_state"] == "live");
    assert_eq!(m["slave_repl_offset"], want.0.to_string());
    assert!(m["replica_reconnect_successes"].parse::<u64>().unwrap() >= 2, "{m:?}");
    assert!(m["replica_reconnect_attempts"].parse::<u64>().unwrap() >= 2, "{m:?}");
    let _: i64 = redis::cmd("INCR").arg("counter").query(&mut primary.conn()).unwrap();
    converge(&primary, &[&replica]);
}

#[test]
fn a_replica_from_an_older_snapshot_hands_off_through_kafka_and_the_buffered_firehose() {
    let (_k, uri, snap, primary) = journaling_primary("repl-handoff");
    let pport = primary.port.to_string();
    let mut pc = primary.conn();
    for i in 0..500 {
        let _: () = redis::cmd("HSET").arg(format!("h{}", i % 20)).arg(i).arg(i).query(&mut pc).unwrap();
    }
    let _: () = redis::cmd("SAVE").query(&mut pc).unwrap();
    let old = sock("replica.gcsn");
    std::fs::copy(&snap, &old).unwrap();
    // The primary moves on past the snapshot, and keeps writing while the replica starts.
    for i in 0..3000 {
        let _: i64 = redis::cmd("INCR").arg(format!("n{}", i % 50)).query(&mut pc).unwrap();
    }
    let url = primary.url();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _: i64 = redis::cmd("RPUSH").arg("during").arg(i).query(&mut c).unwrap();
                i += 1;
            }
            i
        })
    };
    let replica = Server::start(&[
        "--load",
        &old,
        "--kafka",
        &uri,
        "--replica-tcp",
        "127.0.0.1",
        &pport,
        "--enable-debug-command",
        "yes",
    ]);
    wait_for(&replica, "live", |m| m["replica_state"] == "live" && m["goblin_ready"] == "1");
    // Listeners open only once the replica is live, unless the first attempt was abandoned (on
    // a loaded machine, a catch-up stalled: then they open not ready, and a retry hands off in
    // the background).
    let log = replica.log();
    let (live, listening) = (log.find("replica: live from"), log.find("listening on"));
    assert!(live < listening || log.contains("retrying"), "{log}");
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let pushed = writer.join().unwrap();
    assert!(pushed > 0);
    converge(&primary, &[&replica]);
    assert!(log.contains("catching up through Kafka"), "{log}");
    let n: u64 = redis::cmd("LLEN").arg("during").query(&mut replica.conn()).unwrap();
    assert_eq!(n, pushed);
}

/// min-replicas-to-write counts a firehose subscriber while it acknowledges: an idle one too
/// (it repeats its offset on the upstream's ticks, as a Redis replica acknowledges each
/// second), not one that stopped.
#[test]
fn min_replicas_to_write_counts_live_subscribers_even_idle_ones() {
    let p = Server::start(&["--save", ""]);
    let pport = p.port.to_string();
    let r = live_replica(&["--replica-tcp", "127.0.0.1", &pport]);
    let mut c = p.conn();
    let set = |c: &mut redis::Connection, v: &str| redis::cmd("SET").arg("k").arg(v).query::<()>(c);
    let _: () = redis::cmd("CONFIG").arg("SET").arg("min-replicas-to-write").arg("1").query(&mut c).unwrap();
    let _: () = redis::cmd("CONFIG").arg("SET").arg("min-replicas-max-lag").arg("2").query(&mut c).unwrap();
    set(&mut c, "1").unwrap();
    // Idle for twice the lag: still counted.
    std::thread::sleep(Duration::from_secs(4));
    set(&mut c, "2").unwrap();
    assert_eq!(info(&mut c, "replication").get("min_slaves_good_slaves").map(String::as_str), Some("1"));
    // Stopped: no longer counted once the lag has passed, and counted again when it goes on.
    let pid = r.pid() as i32;
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_secs(4));
    let e = set(&mut c, "3").unwrap_err();
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert_eq!(e.code(), Some("NOREPLICAS"), "{e}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while set(&mut c, "4").is_err() {
        assert!(Instant::now() < deadline, "the subscriber was never counted again");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_stopped_subscriber_is_cut_off_when_its_queue_fills_and_others_go_on() {
    let primary = Server::start(&["--replication-buffer-bytes", "64kb", "--enable-debug-command", "yes"]);
    let pport = primary.port.to_string();
    let args = ["--replica-tcp", "127.0.0.1", pport.as_str(), "--enable-debug-command", "yes"];
    let stopped = Server::start(&args);
    let healthy = Server::start(&args);
    for r in [&stopped, &healthy] {
        wait_for(r, "live", |m| m["replica_state"] == "live");
    }
    stopped.signal(libc::SIGSTOP);
    let mut pc = primary.conn();
    let value = "x".repeat(4096);
    // Far more than the stopped replica's 64 KiB queue and its socket buffers hold. Written in
    // steps of 40 KiB, each waited out by the healthy replica: on a loaded machine (the suite
    // runs its tests in parallel on two cores) a burst could leave even a healthy replica
    // 64 KiB behind, and this test is about the stopped one.
    let mut pc2 = primary.conn();
    for step in 0..400 {
        for i in 0..10 {
            let k = format!("k{}", (step * 10 + i) % 100);
            let _: () = redis::cmd("SET").arg(k).arg(&value).query(&mut pc).unwrap();
        }
        let want: u64 = info(&mut pc2, "replication")["master_repl_offset"].parse().unwrap();
        wait_for(&healthy, "the healthy replica keeping up", |m| m["slave_repl_offset"] == want.to_string());
    }
    let m = wait_for(&primary, "the stopped subscriber cut off", |m| m["connected_slaves"] == "1");
    assert_eq!(m["firehose_full_disconnections"], "1");
    converge(&primary, &[&healthy]);
    stopped.signal(libc::SIGCONT);
    // It finds its link gone; without Kafka, the primary being ahead is a gap it cannot fill.
    let m = wait_for(&stopped, "degraded", |m| m["replica_state"] == "degraded");
    assert_eq!(m["goblin_ready"], "0");
    assert!(m["replica_last_error"].contains("without --kafka the gap cannot be filled"), "{m:?}");
}

#[test]
fn replicas_authenticate_from_a_password_file() {
    let primary = Server::start(&["--requirepass", "s3cret"]);
    let pport = primary.port.to_string();
    let good = temp_path("good.password");
    std::fs::write(&good, "s3cret\n").unwrap();
    let bad = temp_path("bad.password");
    std::fs::write(&bad, "guess\n").unwrap();
    let with = |file: &std::path::Path| {
        Server::start(&[
            "--replica-tcp",
            "127.0.0.1",
            &pport,
            "--replica-auth-user",
            "default",
            "--replica-auth-password-file",
            file.to_str().unwrap(),
        ])
    };
    let r = with(&good);
    wait_for(&r, "live", |m| m["replica_state"] == "live");
    let mut pc = primary.conn();
    let _: () = redis::cmd("AUTH").arg("s3cret").query(&mut pc).unwrap();
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut pc).unwrap();
    wait_for(&r, "the write", |m| m["slave_repl_offset"] == "1");
    let wrong = with(&bad);
    let m = wait_for(&wrong, "refused", |m| m["replica_last_error"].contains("WRONGPASS"));
    assert_eq!(m["goblin_ready"], "0");
    // No password at all: GOBLIN.FIREHOSE is refused with NOAUTH.
    let none = Server::start(&["--replica-tcp", "127.0.0.1", &pport]);
    wait_for(&none, "refused", |m| m["replica_last_error"].contains("NOAUTH"));
    // A missing password file stops startup, naming the file.
    let missing = temp_path("missing.password");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goblin-core"))
        .args(["--port", "0", "--replica-tcp", "127.0.0.1", &pport, "--replica-auth-password-file"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--replica-auth-password-file") && err.contains(missing.to_str().unwrap()), "{err}");
}

#[test]
fn tls_replication_verifies_the_upstream() {
    let dir = common::certs::make("IP:127.0.0.1,DNS:localhost");
    let p = |n: &str| dir.join(n).to_str().unwrap().to_string();
    let tport = common::free_port().to_string();
    let primary = Server::start(&[
        "--tls-port",
        &tport,
        "--tls-cert-file",
        &p("server.crt"),
        "--tls-key-file",
        &p("server.key"),
        "--enable-debug-command",
        "yes",
    ]);
    let replica = |ca: &str, extra: &[&str]| {
        let mut args =
            vec!["--replica-tcp", "127.0.0.1", &tport, "--replica-tls", "--replica-tls-ca-file", ca];
        args.extend(extra);
        args.extend(["--enable-debug-command", "yes"]);
        Server::start(&args)
    };
    let r = replica(&p("ca.crt"), &[]);
    wait_for(&r, "live", |m| m["replica_state"] == "live");
    // A DNS identity the certificate also proves.
    let dns = replica(&p("ca.crt"), &["--replica-tls-server-name", "localhost"]);
    wait_for(&dns, "live", |m| m["replica_state"] == "live");
    random_workload(&primary, &mut rand::thread_rng(), 5);
    converge(&primary, &[&r, &dns]);
    // A certificate from another CA, or for another name, is refused.
    let wrong_ca = replica(&p("other-ca.crt"), &[]);
    let m = wait_for(&wrong_ca, "refused", |m| !m["replica_last_error"].is_empty());
    assert!(m["replica_last_error"].to_lowercase().contains("certificate"), "{m:?}");
    let wrong_name = replica(&p("ca.crt"), &["--replica-tls-server-name", "primary.example.net"]);
    let m = wait_for(&wrong_name, "refused", |m| !m["replica_last_error"].is_empty());
    assert!(m["replica_last_error"].to_lowercase().contains("certificate"), "{m:?}");
    assert_eq!(m["goblin_ready"], "0");
}

/// A fake upstream: answers one GOBLIN.FIREHOSE with `reply`, then holds the connection open.
fn fake_upstream(reply: Vec<u8>) -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 256];
        let mut got = Vec::new();
        while !got.ends_with(b"GOBLIN.FIREHOSE\r\n") {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "the replica closed before subscribing");
            got.extend_from_slice(&buf[..n]);
        }
        s.write_all(&reply).unwrap();
        std::thread::sleep(Duration::from_secs(3));
    });
    (port, h)
}

/// The firehose protocol version these hand-written frames speak (`frame::PROTOCOL_VERSION`).
const PROTO: u32 = 6;

/// A hello of a lineage with no predecessor (40 zeros, -1).
fn hello(version: &str, replid: &str, offset: u64) -> Vec<u8> {
    format!(
        "*7\r\n$5\r\nHELLO\r\n:{PROTO}\r\n${}\r\n{version}\r\n$40\r\n{replid}\r\n:{offset}\r\n$40\r\n{}\r\n:-1\r\n",
        version.len(),
        "0".repeat(40)
    )
    .into_bytes()
}

fn batch(replid: &str, first: u64, cmd: &[&str]) -> Vec<u8> {
    let mut m = format!("*{}\r\n", cmd.len());
    for a in cmd {
        m.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    format!(
        "*8\r\n$5\r\nBATCH\r\n:{PROTO}\r\n$40\r\n{replid}\r\n:{first}\r\n:-1\r\n:-1\r\n:-1\r\n${}\r\n{m}\r\n",
        m.len()
    )
    .into_bytes()
}

#[test]
fn another_version_a_bad_frame_or_a_gap_from_the_upstream_is_refused() {
    let id = "0123456789abcdef0123456789abcdef01234567";
    let ours = concat!("goblin-core ", env!("CARGO_PKG_VERSION"));
    let start = |port: u16| Server::start(&["--replica-tcp", "127.0.0.1", &port.to_string()]);
    // Another version: refused at the hello.
    let (port, h) = fake_upstream(hello("goblin-core 0.0.1-other", id, 0));
    let r = start(port);
    let m = wait_for(&r, "refused", |m| m["replica_last_error"].contains("version mismatch"));
    assert_eq!((m["replica_state"].as_str(), m["goblin_ready"].as_str()), ("degraded", "0"), "{m:?}");
    h.join().unwrap();
    // A valid write, then a frame that is not one: the write stays, the link is dropped.
    let mut reply = hello(ours, id, 0);
    reply.extend(batch(id, 1, &["SET", "a", "1"]));
    reply.extend(format!("*3\r\n$5\r\nBATCH\r\n:{PROTO}\r\n").as_bytes());
    let (port, h) = fake_upstream(reply);
    let r = start(port);
    let m = wait_for(&r, "the bad frame", |m| m["replica_last_error"].contains("bad frame"));
    assert_eq!(m["slave_repl_offset"], "1");
    assert_eq!(m["master_replid"], id);
    let v: String = redis::cmd("GET").arg("a").query(&mut r.conn()).unwrap();
    assert_eq!(v, "1");
    h.join().unwrap();
    // A gap (offset 3 after 1): nothing of it is applied.
    let mut reply = hello(ours, id, 0);
    reply.extend(batch(id, 1, &["SET", "a", "1"]));
    reply.extend(batch(id, 3, &["SET", "b", "2"]));
    let (port, h) = fake_upstream(reply);
    let r = start(port);
    let m = wait_for(&r, "the gap", |m| m["replica_last_error"].contains("missing"));
    assert_eq!(m["slave_repl_offset"], "1");
    let n: i64 = redis::cmd("EXISTS").arg("b").query(&mut r.conn()).unwrap();
    assert_eq!(n, 0);
    h.join().unwrap();
    // A write the data refuses (an INCR of a non-number): the link is abandoned.
    let mut reply = hello(ours, id, 0);
    reply.extend(batch(id, 1, &["SET", "a", "x"]));
    reply.extend(batch(id, 2, &["INCR", "a"]));
    let (port, h) = fake_upstream(reply);
    let r = start(port);
    let m = wait_for(&r, "the refused write", |m| m["replica_last_error"].contains("logical offset 2"));
    assert_eq!(m["slave_repl_offset"], "1");
    h.join().unwrap();
}

/// Across a real network boundary (a replica in its own network namespace, joined by a veth
/// pair), a replica uses TLS without being asked: the upstream's TLS port only speaks TLS, so
/// being live on it proves it; the certificate must name the source IP, and a wrong CA or a
/// wrong server name is refused.
#[test]
fn a_non_loopback_upstream_is_followed_over_verified_tls() {
    let ns = Netns::create();
    let dir = common::certs::make(&format!("IP:{}", ns.host));
    let p = |n: &str| dir.join(n).to_str().unwrap().to_string();
    let (port, tport) = (common::free_port().to_string(), common::free_port().to_string());
    let primary = Server::start(&[
        "--port",
        &port,
        "--bind",
        "127.0.0.1",
        &ns.host,
        "--tls-port",
        &tport,
        "--tls-cert-file",
        &p("server.crt"),
        "--tls-key-file",
        &p("server.key"),
        "--enable-debug-command",
        "yes",
        // The replica connects from another host's address, without a password.
        "--protected-mode",
        "no",
    ]);
    let follow = |extra: &[&str]| {
        let mut args =
            vec!["--replica-tcp", ns.host.as_str(), tport.as_str(), "--enable-debug-command", "yes"];
        args.extend(extra);
        ns.goblin(&args)
    };
    let r = follow(&["--replica-tls-ca-file", &p("ca.crt")]);
    r.wait_for("live", 30, |m| m["replica_state"] == "live");
    random_workload(&primary, &mut rand::thread_rng(), 5);
    let want = offset(&primary).to_string();
    r.wait_for("the primary's offset", 30, |m| m["slave_repl_offset"] == want);
    let mut rc = r.conn_by(Instant::now() + Duration::from_secs(10));
    let d: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut rc).unwrap();
    assert_eq!(d, digest(&primary));
    let wrong_ca = follow(&["--replica-tls-ca-file", &p("other-ca.crt")]);
    let m = wrong_ca.wait_for("refused", 30, |m| !m["replica_last_error"].is_empty());
    assert!(m["replica_last_error"].to_lowercase().contains("certificate"), "{m:?}");
    let wrong_name =
        follow(&["--replica-tls-ca-file", &p("ca.crt"), "--replica-tls-server-name", "primary.example.net"]);
    let m = wrong_name.wait_for("refused", 30, |m| !m["replica_last_error"].is_empty());
    assert!(m["replica_last_error"].to_lowercase().contains("certificate"), "{m:?}");
    assert_eq!(m["goblin_ready"], "0");
}

/// `--bind-source-addr` (a Redis directive on the command line): a replica's firehose
/// connection to its upstream comes from that address, as the primary's CLIENT LIST shows;
/// CONFIG SET changes it for the next connection.
#[test]
fn a_replica_connects_to_its_upstream_from_bind_source_addr() {
    let primary = Server::start(&["--enable-debug-command", "yes"]);
    let port = primary.port.to_string();
    let replica = live_replica(&["--replica-tcp", "127.0.0.1", &port, "--bind-source-addr", "127.0.0.2"]);
    let subscriber_addrs = || -> Vec<String> {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut primary.conn()).unwrap();
        list.lines()
            .filter(|l| l.split(' ').any(|f| f.starts_with("flags=") && f.contains('S')))
            .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("addr=")).map(str::to_string))
            .collect()
    };
    let addrs = subscriber_addrs();
    assert_eq!(addrs.len(), 1, "{addrs:?}");
    assert!(addrs[0].starts_with("127.0.0.2:"), "{addrs:?}");
    let mut rc = replica.conn();
    let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("bind-source-addr").query(&mut rc).unwrap();
    assert_eq!(got, ["bind-source-addr", "127.0.0.2"]);
    // Another address, then the link cut: the replica comes back from the new one.
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("bind-source-addr").arg("127.0.0.3").query(&mut rc).unwrap();
    let _: i64 =
        redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica").query(&mut primary.conn()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let addrs = subscriber_addrs();
        if addrs.len() == 1 && addrs[0].starts_with("127.0.0.3:") {
            break;
        }
        assert!(Instant::now() < deadline, "the replica never came back from 127.0.0.3: {addrs:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The id of the primary's connection to a firehose subscriber (CLIENT LIST flag `S`).
fn subscriber_ids(primary: &Server) -> Vec<String> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut primary.conn()).unwrap();
    list.lines()
        .filter(|l| l.split(' ').any(|f| f.starts_with("flags=") && f.contains('S')))
        .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")).map(str::to_string))
        .collect()
}

/// Reconnect rules at run time: a link lost while the primary moves on is recovered through
/// Kafka with the new suffix buffered; an upstream behind the replica, or of another lineage,
/// leaves it degraded.
#[test]
fn reconnect_rules_kafka_catch_up_behind_and_another_lineage() {
    let k = Kaka::start();
    let uri = k.uri("repl-rules");
    let snap = sock("primary.gcsn");
    let pport = common::free_port().to_string();
    let with_snapshot =
        ["--port", pport.as_str(), "--kafka", &uri, "--load", &snap, "--enable-debug-command", "yes"];
    let primary = Server::start(&with_snapshot);
    let replica = live_replica(&["--replica-tcp", "127.0.0.1", &pport, "--kafka", &uri]);
    let mut pc = primary.conn();
    for i in 0..100 {
        let _: () = redis::cmd("SET").arg(format!("a{i}")).arg(i).query(&mut pc).unwrap();
    }
    let _: () = redis::cmd("SAVE").query(&mut pc).unwrap();
    let older = sock("older.gcsn");
    std::fs::copy(&snap, &older).unwrap();
    converge(&primary, &[&replica]);
    // Cut the link while the replica is stopped, write on, let it notice: upstream ahead.
    replica.signal(libc::SIGSTOP);
    for id in subscriber_ids(&primary) {
        let _: () =
            redis::cmd("CLIENT").arg("KILL").arg("ID").arg(id).query(&mut pc).map(|_: i64| ()).unwrap();
    }
    for i in 0..500 {
        let _: i64 = redis::cmd("RPUSH").arg("after").arg(i).query(&mut pc).unwrap();
    }
    replica.signal(libc::SIGCONT);
    converge(&primary, &[&replica]);
    assert!(replica.log().contains("catching up through Kafka"), "{}", replica.log());
    let m = repl(&replica);
    assert_eq!((m["replica_state"].as_str(), m["replica_lag"].as_str()), ("live", "0"), "{m:?}");
    // The primary comes back from an older snapshot without its journal: restarted at an
    // offset of the replica's lineage that the replica has passed.
    let mut primary = primary;
    primary.signal(9);
    primary.wait_exit(Duration::from_secs(10)).unwrap();
    let behind = Server::start(&["--port", &pport, "--load", &older, "--save", ""]);
    let m = wait_for(&replica, "degraded", |m| m["replica_state"] == "degraded");
    assert!(
        m["replica_last_error"].contains("restarted at offset 100")
            && m["replica_last_error"].contains("past it"),
        "{m:?}"
    );
    assert_eq!(m["goblin_ready"], "0");
    // Reads still served from the last good state.
    let n: i64 = redis::cmd("LLEN").arg("after").query(&mut replica.conn()).unwrap();
    assert_eq!(n, 500);
    let mut behind = behind;
    behind.signal(9);
    behind.wait_exit(Duration::from_secs(10)).unwrap();
    // A fresh primary (no snapshot, no journal): another lineage.
    let _fresh = Server::start(&["--port", &pport, "--save", ""]);
    let m = wait_for(&replica, "another lineage", |m| m["replica_last_error"].contains("different history"));
    assert_eq!(m["replica_state"], "degraded");
}

/// A handoff whose live suffix outgrows the bound on its buffer (`client-output-buffer-limit
/// replica`'s hard limit) is abandoned, not applied, and retried; once the flood stops the
/// replica goes live with the primary's digest.
#[test]
fn an_exhausted_handoff_buffer_abandons_the_attempt_and_retries() {
    let (_k, uri, snap, primary) = journaling_primary("repl-exhaust");
    let pport = primary.port.to_string();
    let mut pc = primary.conn();
    let _: () = redis::cmd("SAVE").query(&mut pc).unwrap();
    let old = sock("replica.gcsn");
    std::fs::copy(&snap, &old).unwrap();
    // A long suffix to replay from Kafka...
    let mut p = redis::pipe();
    for i in 0..100_000 {
        p.cmd("SET").arg(format!("k{}", i % 1000)).arg(i).ignore();
    }
    let _: () = p.query(&mut pc).unwrap();
    // ... while a flood of large values keeps arriving over the firehose.
    let url = primary.url();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let v = "v".repeat(2048);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _: () = redis::cmd("SET").arg("big").arg(&v).query(&mut c).unwrap();
            }
        })
    };
    let replica = Unwaited::start(&[
        "--replica-tcp",
        "127.0.0.1",
        &pport,
        "--kafka",
        &uri,
        "--load",
        &old,
        "--replication-buffer-bytes",
        "4kb",
        "--client-output-buffer-limit",
        "replica 4kb 0 0",
        "--enable-debug-command",
        "yes",
    ]);
    replica.wait_log("hard limit during the Kafka catch-up", Instant::now() + Duration::from_secs(60));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flood.join().unwrap();
    let want = (offset(&primary).to_string(), digest(&primary));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut rc = replica.conn_by(deadline);
    loop {
        let m = info(&mut rc, "replication");
        if m["replica_state"] == "live" && m["slave_repl_offset"] == want.0 {
            break;
        }
        assert!(Instant::now() < deadline, "not live: {m:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let d: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut rc).unwrap();
    assert_eq!(d, want.1);
}

/// A Kafka catch-up that cannot reach the upstream's offset (its topic lacks the records: here
/// the primary does not journal at all) stalls, is abandoned without applying a gap, and the
/// replica stays not ready.
#[test]
fn a_stalled_kafka_catch_up_is_abandoned() {
    let k = Kaka::start();
    k.create_topic("repl-stall", 1, &["cleanup.policy=delete"]);
    let primary = Server::start(&["--enable-debug-command", "yes"]);
    let mut pc = primary.conn();
    for i in 0..10 {
        let _: () = redis::cmd("SET").arg(format!("k{i}")).arg(i).query(&mut pc).unwrap();
    }
    let replica = Unwaited::start(&[
        "--kafka",
        &k.uri("repl-stall"),
        "--replica-tcp",
        "127.0.0.1",
        &primary.port.to_string(),
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    replica.wait_log("Kafka catch-up stalled", deadline);
    // The listeners open right after the abandoned startup attempt.
    let mut rc = replica.conn_by(deadline);
    let m = info(&mut rc, "replication");
    assert_eq!(m["goblin_ready"], "0", "{m:?}");
    assert_ne!(m["replica_state"], "live");
    let n: i64 = redis::cmd("DBSIZE").query(&mut rc).unwrap();
    assert_eq!(n, 0, "nothing unverified was applied");
}

/// `--kafka-ack-mode broker`: a frame leaves only once Kafka acknowledged its records, and a
/// subscriber that connects meanwhile gets a hello at the last released offset, then the held
/// frame once it is acknowledged.
#[test]
fn in_broker_mode_frames_wait_for_kafkas_acknowledgement() {
    let k = Kaka::start();
    let snap = sock("primary.gcsn");
    let primary = Server::start(&[
        "--kafka",
        &k.uri("repl-broker-mode"),
        "--kafka-ack-mode",
        "broker",
        "--load",
        &snap,
        "--enable-debug-command",
        "yes",
    ]);
    let pport = primary.port.to_string();
    let args = ["--replica-tcp", "127.0.0.1", pport.as_str(), "--enable-debug-command", "yes"];
    let first = Server::start(&args);
    wait_for(&first, "live", |m| m["replica_state"] == "live");
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut primary.conn()).unwrap();
    converge(&primary, &[&first]);
    // The second replica will start from this state (offset 1), so that it can follow at once.
    let _: () = redis::cmd("SAVE").query(&mut primary.conn()).unwrap();
    let copy = sock("second.gcsn");
    std::fs::copy(&snap, &copy).unwrap();
    // The broker stalls: the next write is applied on the primary, its reply and frame held.
    let kaka = k.child.id() as i32;
    // SAFETY: signalling the broker process this test started.
    unsafe { libc::kill(kaka, libc::SIGSTOP) };
    let url = primary.url();
    let writer = std::thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let _: () = redis::cmd("SET").arg("b").arg("2").query(&mut c).unwrap();
        Instant::now()
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while offset(&primary) < 2 {
        assert!(Instant::now() < deadline, "the write was not applied on the primary");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(!writer.is_finished(), "the reply must wait for Kafka");
    assert_eq!(repl(&first)["slave_repl_offset"], "1", "the frame must wait for Kafka");
    let mut second_args = args.to_vec();
    second_args.extend(["--load", copy.as_str()]);
    let second = Server::start(&second_args);
    let m = wait_for(&second, "live", |m| m["replica_state"] == "live");
    assert_eq!(m["slave_repl_offset"], "1", "the hello names the last released offset: {m:?}");
    let released = Instant::now();
    // SAFETY: as above.
    unsafe { libc::kill(kaka, libc::SIGCONT) };
    let replied = writer.join().unwrap();
    assert!(replied > released);
    converge(&primary, &[&first, &second]);
    let v: String = redis::cmd("GET").arg("b").query(&mut second.conn()).unwrap();
    assert_eq!(v, "2");
    // WAITAOF counts the replicas that applied a write Kafka holds (both recover it from the
    // topic); a third is not there, so asking for it times out with the two.
    let mut pc = primary.conn();
    let _: () = redis::cmd("SET").arg("c").arg("3").query(&mut pc).unwrap();
    let n: Vec<i64> = redis::cmd("WAITAOF").arg(1).arg(2).arg(0).query(&mut pc).unwrap();
    assert_eq!(n, [1, 2]);
    let n: Vec<i64> = redis::cmd("WAITAOF").arg(1).arg(3).arg(100).query(&mut pc).unwrap();
    assert_eq!(n, [1, 2]);
}

/// Another producer's records reach a replica twice over: as the primary's frames, and in the
/// topic a later Kafka catch-up rereads. Each frame carries the primary's consumer position, so
/// the catch-up treats the records the replica already has as duplicates.
#[test]
fn a_replica_catching_up_through_kafka_applies_other_producers_records_once() {
    let (k, uri, _snap, primary) = journaling_primary("repl-external");
    let topic = "repl-external";
    let pport = primary.port.to_string();
    let replica = live_replica(&["--replica-tcp", "127.0.0.1", &pport, "--kafka", &uri]);
    let mut pc = primary.conn();
    let external_applied = |n: u64| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let m = info(&mut primary.conn(), "kafka");
            if m["kafka_external_records_applied"] == n.to_string() {
                return;
            }
            assert!(Instant::now() < deadline, "external records not applied: {m:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let _: () = redis::cmd("SET").arg("y").arg("0").query(&mut pc).unwrap();
    produce_commands(&k.addr, topic, &[&["APPEND", "x", "a"], &["APPEND", "x", "a"], &["LPUSH", "l", "a"]]);
    external_applied(3);
    converge(&primary, &[&replica]);
    // The link is cut while the primary takes its own writes and another producer's.
    replica.signal(libc::SIGSTOP);
    for id in subscriber_ids(&primary) {
        let _: i64 = redis::cmd("CLIENT").arg("KILL").arg("ID").arg(id).query(&mut pc).unwrap();
    }
    let _: () = redis::cmd("SET").arg("y").arg("1").query(&mut pc).unwrap();
    produce_commands(&k.addr, topic, &[&["APPEND", "x", "b"]]);
    external_applied(4);
    let _: () = redis::cmd("SET").arg("y").arg("2").query(&mut pc).unwrap();
    replica.signal(libc::SIGCONT);
    converge(&primary, &[&replica]);
    assert!(replica.log().contains("catching up through Kafka"), "{}", replica.log());
    let x: String = redis::cmd("GET").arg("x").query(&mut replica.conn()).unwrap();
    assert_eq!(x, "aab");
}

/// kaka in a folder of its own on a fixed port (so that a test can stop it and start it again
/// with its data), the URI of `topic` on it, and a free port for the primary (which a replica
/// reconnects to after the primary's restart).
fn restartable_kaka(topic: &str) -> (std::path::PathBuf, u16, Kaka, String, String) {
    let kdir = temp_path(&format!("kaka-{topic}"));
    let kport = common::free_port();
    let k = Kaka::start_in(&kdir, kport);
    let uri = k.uri(topic);
    (kdir, kport, k, uri, common::free_port().to_string())
}

/// Kafka goes away (`k` is dropped) while the `queued` primary answers 20 SETs (`b0`..`b19` =
/// "lost") and sends their frames: the replica applies them, and Kafka has confirmed none.
fn writes_kafka_never_gets(k: Kaka, pc: &mut redis::Connection, primary: &Server, replica: &Server) {
    drop(k);
    for i in 0..20 {
        let _: () = redis::cmd("SET").arg(format!("b{i}")).arg("lost").query(pc).unwrap();
    }
    converge(primary, &[replica]);
    let unconfirmed: u64 = repl(replica)["replica_unconfirmed_mutations"].parse().unwrap();
    assert!(unconfirmed >= 20, "{unconfirmed}");
}

/// The restarted primary writes 40 SETs over `b0`..`b19` ("new"), past the replica's offset.
fn overwrite_the_lost_writes(primary: &Server, applied: u64) {
    let mut pc = primary.conn();
    for i in 0..40 {
        let _: () = redis::cmd("SET").arg(format!("b{i}")).arg("new").query(&mut pc).unwrap();
    }
    assert!(offset(primary) > applied);
}

/// The replica found that it diverged: degraded, not ready, and nothing of the new history
/// applied over the old one. The restarted primary went on under a successor lineage from the
/// offset Kafka held, which the replica has passed.
fn found_diverged(replica: &Server, applied: u64) {
    let m = wait_for(replica, "the divergence to be found", |m| {
        m["replica_last_error"].contains("restarted at offset") && m["replica_last_error"].contains("past it")
    });
    assert_eq!(m["replica_state"], "degraded", "{m:?}");
    assert_eq!(m["goblin_ready"], "0", "{m:?}");
    let b0: String = redis::cmd("GET").arg("b0").query(&mut replica.conn()).unwrap();
    assert_eq!(b0, "lost");
    assert_eq!(offset(replica), applied);
}

/// A `queued` upstream sends each frame before Kafka holds its records. A replica keeps what
/// it applied above the cursor the frames carry and, on reconnecting, checks it against Kafka:
/// after a mere link loss it matches and the replica goes live again; after the upstream died
/// with records unsent, restarted from Kafka without them and wrote other mutations at those
/// offsets, it does not, and the replica stops following instead of skipping the new records
/// as duplicates of its own (which would leave it silently different from then on).
#[test]
fn a_replica_that_applied_writes_its_queued_upstream_lost_stops_following() {
    let (kdir, kport, k, uri, pport) = restartable_kaka("repl-lost");
    let pargs = [
        "--port",
        pport.as_str(),
        "--kafka",
        &uri,
        "--kafka-ack-mode",
        "queued",
        "--enable-debug-command",
        "yes",
    ];
    let mut primary = Server::start(&pargs);
    let replica = live_replica(&["--replica-tcp", "127.0.0.1", &pport, "--kafka", &uri]);
    let mut pc = primary.conn();
    // Writes of every type: each frame's mutations are the bytes of its records in Kafka.
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(0x6c6f7374);
    random_workload(&primary, &mut rng, 20);
    // The link is lost at once, before an idle second's tick could confirm the last frames:
    // what the replica holds above the last cursor is checked, and is in Kafka as it applied it.
    let relinked = |what: &str| {
        let before: u64 = repl(&replica)["replica_reconnect_successes"].parse().unwrap();
        for id in subscriber_ids(&primary) {
            let _: i64 =
                redis::cmd("CLIENT").arg("KILL").arg("ID").arg(id).query(&mut primary.conn()).unwrap();
        }
        wait_for(&replica, what, |m| {
            m["replica_state"] == "live" && m["replica_reconnect_successes"].parse::<u64>().unwrap() > before
        });
    };
    relinked("live again");
    let checks = |log: &str| {
        log.matches("that Kafka had not confirmed").count() + log.matches("catching up through Kafka").count()
    };
    let log = replica.log();
    assert_eq!(checks(&log), 1, "{log}");
    assert!(!log.contains("diverged") && !log.contains("cannot be checked"), "{log}");
    converge(&primary, &[&replica]);
    // An idle link: the ticks carry the cursor, and a reconnect has nothing left to check.
    wait_for(&replica, "the ticks to confirm everything", |m| m["replica_unconfirmed_mutations"] == "0");
    relinked("live after an idle link");
    assert_eq!(checks(&replica.log()), 1, "{}", replica.log());
    converge(&primary, &[&replica]);
    // The last write another producer's: no record of the lineage in Kafka ever names its
    // offset. If the link is lost before a cursor covers it, the replica cannot check it (it
    // logs that) and goes live all the same.
    let _: () = redis::cmd("SET").arg("z").arg("1").query(&mut pc).unwrap();
    produce_commands(&k.addr, "repl-lost", &[&["APPEND", "x", "e"]]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while info(&mut pc, "kafka")["kafka_external_records_applied"] != "1" {
        assert!(Instant::now() < deadline, "the other producer's record was not applied");
        std::thread::sleep(Duration::from_millis(20));
    }
    relinked("live after the other producer's write");
    converge(&primary, &[&replica]);

    writes_kafka_never_gets(k, &mut pc, &primary, &replica);
    let applied = offset(&replica);
    primary.signal(libc::SIGKILL);
    let _ = primary.wait_exit(Duration::from_secs(10));
    drop(pc);
    // Kafka returns; the primary recovers the lineage without those 20 writes, then writes
    // others at their offsets, past the replica's.
    let _k = Kaka::start_in(&kdir, kport);
    let primary = Server::start(&pargs);
    let recovered = offset(&primary);
    assert!(recovered < applied, "recovered {recovered}, the replica applied {applied}");
    overwrite_the_lost_writes(&primary, applied);
    found_diverged(&replica, applied);
}

/// The same check across a restart of the replica: its snapshot saves the mutations Kafka had
/// not confirmed, and the replica restarted from it checks them against the topic before it
/// follows, so the lost writes it holds are found even though it never saw the crash.
#[test]
fn a_replica_restarted_from_its_snapshot_still_checks_what_kafka_had_not_confirmed() {
    let (kdir, kport, k, uri, pport) = restartable_kaka("repl-lost-snap");
    let pargs = ["--port", pport.as_str(), "--kafka", &uri, "--kafka-ack-mode", "queued", "--save", ""];
    let mut primary = Server::start(&pargs);
    let rsnap = sock("replica-lost.gcsn");
    let rargs = ["--replica-tcp", "127.0.0.1", &pport, "--kafka", &uri, "--load", &rsnap, "--save", ""];
    let mut replica = live_replica(&rargs);
    let mut pc = primary.conn();
    for i in 0..50 {
        let _: () = redis::cmd("SET").arg(format!("a{i}")).arg(i).query(&mut pc).unwrap();
    }
    converge(&primary, &[&replica]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while info(&mut pc, "kafka")["kafka_acknowledged_offset"] != offset(&primary).to_string() {
        assert!(Instant::now() < deadline, "Kafka did not acknowledge the first writes");
        std::thread::sleep(Duration::from_millis(20));
    }
    writes_kafka_never_gets(k, &mut pc, &primary, &replica);
    let _: () = redis::cmd("SAVE").query(&mut replica.conn()).unwrap();
    let applied = offset(&replica);
    // Both die; the primary recovers the lineage without the 20 writes and writes others at
    // their offsets, past the replica's.
    replica.signal(libc::SIGKILL);
    let _ = replica.wait_exit(Duration::from_secs(10));
    primary.signal(libc::SIGKILL);
    let _ = primary.wait_exit(Duration::from_secs(10));
    drop(pc);
    let _k = Kaka::start_in(&kdir, kport);
    let primary = Server::start(&pargs);
    assert!(offset(&primary) < applied, "the primary recovered the lost writes");
    overwrite_the_lost_writes(&primary, applied);
    let replica = Server::start(&rargs);
    found_diverged(&replica, applied);
    // A primary rebuilt from the replica's snapshot checks the same window in its startup
    // replay, and stops before it listens instead of continuing a history the topic lacks.
    drop(replica);
    drop(primary);
    let (code, log) = run_to_exit(&["--port", "0", "--kafka", &uri, "--load", &rsnap, "--save", ""]);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("a replica's snapshot holds writes its primary lost"), "{log}");
}

/// Two more attempts of a refused replica (degraded retries every 5 s), with its primary at
/// the replica's offset `y` by now: still degraded and not ready, its data (`held`, a
/// digest) as it was.
fn still_refused(replica: &Server, y: u64, held: &str) {
    let tried = repl(replica)["replica_reconnect_attempts"].parse::<u64>().unwrap();
    let m = wait_for(replica, "two more attempts", |m| {
        m["replica_reconnect_attempts"].parse::<u64>().unwrap() >= tried + 2
    });
    assert_eq!((m["replica_state"].as_str(), m["goblin_ready"].as_str()), ("degraded", "0"), "{m:?}");
    assert_eq!((offset(replica), digest(replica)), (y, held.to_string()));
}

/// Waits until Kafka has acknowledged everything the primary has written.
fn wait_journaled(primary: &Server) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while info(&mut primary.conn(), "kafka")["kafka_acknowledged_offset"] != offset(primary).to_string() {
        assert!(Instant::now() < deadline, "Kafka did not acknowledge the writes");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Closes every firehose subscriber's connection on the primary, then waits until the
/// replicas in `relinking` (not stopped) are live again.
fn cut_links(primary: &Server, relinking: &[&Server]) {
    let before: Vec<u64> =
        relinking.iter().map(|r| repl(r)["replica_reconnect_successes"].parse().unwrap()).collect();
    for id in subscriber_ids(primary) {
        let _: i64 = redis::cmd("CLIENT").arg("KILL").arg("ID").arg(id).query(&mut primary.conn()).unwrap();
    }
    for (r, before) in relinking.iter().zip(before) {
        wait_for(r, "live again", |m| {
            m["replica_state"] == "live" && m["replica_reconnect_successes"].parse::<u64>().unwrap() > before
        });
    }
}

/// A `queued` primary answers and sends its frames before Kafka holds their records. Killed
/// while Kafka is away, it comes back with what the topic holds and goes on from there under
/// a successor lineage. A replica without Kafka that applied the lost writes is refused, also
/// once the primary's new writes reach its offset: under one id across the restart it went
/// live there, holding the lost writes where the primary holds others, and both reported
/// ready. A replica that stood at the topic's offset follows the successor.
#[test]
fn a_queued_primary_restarted_from_kafka_is_followed_only_from_what_kafka_held() {
    let (kdir, kport, k, uri, pport) = restartable_kaka("repl-queued-restart");
    let pargs = [
        "--port",
        pport.as_str(),
        "--kafka",
        &uri,
        "--kafka-ack-mode",
        "queued",
        "--save",
        "",
        "--enable-debug-command",
        "yes",
    ];
    let mut primary = Server::start(&pargs);
    let ahead = live_replica(&["--replica-tcp", "127.0.0.1", &pport, "--save", ""]);
    let at = live_replica(&["--replica-tcp", "127.0.0.1", &pport, "--save", ""]);
    let mut pc = primary.conn();
    for i in 0..50 {
        let _: () = redis::cmd("SET").arg(format!("a{i}")).arg(i).query(&mut pc).unwrap();
    }
    wait_journaled(&primary);
    converge(&primary, &[&ahead, &at]);
    let (old, x) = (repl(&primary)["master_replid"].clone(), offset(&primary));
    // `at` stops reading where Kafka stands; `ahead` reconnects and reads on.
    at.signal(libc::SIGSTOP);
    cut_links(&primary, &[&ahead]);
    drop(k);
    for i in 0..20 {
        let _: () = redis::cmd("SET").arg(format!("b{i}")).arg("lost").query(&mut pc).unwrap();
    }
    converge(&primary, &[&ahead]);
    let (y, held) = (offset(&ahead), digest(&ahead));
    assert_eq!(y, x + 20);
    primary.signal(libc::SIGKILL);
    primary.wait_exit(Duration::from_secs(10)).unwrap();
    drop(pc);

    let _k = Kaka::start_in(&kdir, kport);
    let primary = Server::start(&pargs);
    let m = repl(&primary);
    let new = m["master_replid"].clone();
    assert_ne!(new, old);
    assert_eq!((offset(&primary), m["master_replid2"].as_str()), (x, old.as_str()));
    assert_eq!(m["second_repl_offset"], (x + 1).to_string());
    assert!(
        primary.log().contains(&format!("continues lineage {old} from its offset {x}")),
        "{}",
        primary.log()
    );
    let m = wait_for(&ahead, "refused", |m| m["replica_state"] == "degraded");
    assert!(
        m["replica_last_error"].contains(&format!("restarted at offset {x} of this server's lineage {old}"))
            && m["replica_last_error"].contains("past it"),
        "{m:?}"
    );
    // `at` resumes at exactly the offset the successor continues from, and follows it.
    at.signal(libc::SIGCONT);
    let m =
        wait_for(&at, "live on the successor", |m| m["replica_state"] == "live" && m["master_replid"] == new);
    assert_eq!(m["master_replid2"], old);
    let mut pc = primary.conn();
    for i in 0..20 {
        let _: () = redis::cmd("SET").arg(format!("b{i}")).arg("new").query(&mut pc).unwrap();
    }
    assert_eq!(offset(&primary), y);
    converge(&primary, &[&at]);
    still_refused(&ahead, y, &held);
    let b0: String = redis::cmd("GET").arg("b0").query(&mut ahead.conn()).unwrap();
    assert_eq!(b0, "lost");
}

/// A replica with Kafka at exactly the offset its restarted primary recovered, holding
/// mutations from frames that Kafka had not confirmed when the primary died (no idle tick
/// came between the last writes and the kill), checks them against the old lineage's records
/// before it takes the successor's id, instead of passing over them as another lineage's and
/// going on unchecked.
#[test]
fn unconfirmed_mutations_are_checked_before_a_replica_follows_a_successor() {
    let k = Kaka::start();
    let uri = k.uri("repl-successor-unconfirmed");
    let pport = common::free_port().to_string();
    let pargs = ["--port", pport.as_str(), "--kafka", &uri, "--save", "", "--enable-debug-command", "yes"];
    let mut primary = Server::start(&pargs);
    let replica = live_replica(&["--replica-tcp", "127.0.0.1", &pport, "--kafka", &uri, "--save", ""]);
    let mut pc = primary.conn();
    for i in 0..200 {
        let _: () = redis::cmd("SET").arg(format!("a{i}")).arg(i).query(&mut pc).unwrap();
    }
    wait_journaled(&primary);
    converge(&primary, &[&replica]);
    let (old, x) = (repl(&primary)["master_replid"].clone(), offset(&primary));
    let unconfirmed: u64 = repl(&replica)["replica_unconfirmed_mutations"].parse().unwrap();
    primary.signal(libc::SIGKILL);
    primary.wait_exit(Duration::from_secs(10)).unwrap();
    assert!(unconfirmed > 0, "a tick confirmed everything before the kill: the case is not set up");
    let primary = Server::start(&pargs);
    let new = repl(&primary)["master_replid"].clone();
    let m = wait_for(&replica, "live on the successor", |m| {
        m["replica_state"] == "live" && m["master_replid"] == new
    });
    assert_eq!((m["master_replid2"].as_str(), offset(&replica)), (old.as_str(), x));
    assert_eq!(m["replica_unconfirmed_mutations"], "0", "{m:?}");
    let log = replica.log();
    assert!(log.contains("checking the"), "{log}");
    assert!(!log.contains("cannot be checked"), "{log}");
    converge(&primary, &[&replica]);
}

/// A replica with Kafka that fell behind while its primary was restarted catches up through
/// Kafka into the successor lineage: the rest of the old lineage, then the new one from its
/// first record, which names the old one; or, when the primary has written nothing since,
/// up to the offset the successor continues from, where the replica takes the new id; or,
/// away across two restarts, through both. A server that replays the topic from the start
/// follows every change of id.
#[test]
fn a_replica_behind_a_restarted_primary_catches_up_through_kafka_into_its_successor() {
    use rand::SeedableRng;
    let k = Kaka::start();
    let uri = k.uri("repl-successor-catch-up");
    let pport = common::free_port().to_string();
    let pargs = ["--port", pport.as_str(), "--kafka", &uri, "--save", "", "--enable-debug-command", "yes"];
    let mut primary = Server::start(&pargs);
    let replica = live_replica(&["--replica-tcp", "127.0.0.1", &pport, "--kafka", &uri, "--save", ""]);
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5ecc);
    random_workload(&primary, &mut rng, 3);
    converge(&primary, &[&replica]);
    for round in 0..2 {
        replica.signal(libc::SIGSTOP);
        cut_links(&primary, &[]);
        random_workload(&primary, &mut rng, 2);
        wait_journaled(&primary);
        let (old, x) = (repl(&primary)["master_replid"].clone(), offset(&primary));
        primary.signal(libc::SIGKILL);
        primary.wait_exit(Duration::from_secs(10)).unwrap();
        primary = Server::start(&pargs);
        let m = repl(&primary);
        assert_eq!((offset(&primary), m["master_replid2"].as_str()), (x, old.as_str()));
        if round == 0 {
            // The successor's records are in Kafka before the replica returns.
            random_workload(&primary, &mut rng, 2);
            wait_journaled(&primary);
        }
        let new = m["master_replid"].clone();
        replica.signal(libc::SIGCONT);
        wait_for(&replica, "live on the successor", |m| {
            m["replica_state"] == "live" && m["master_replid"] == new
        });
        converge(&primary, &[&replica]);
        let log = replica.log();
        assert_eq!(log.matches("catching up through Kafka").count(), round + 1, "{log}");
        let crossing =
            format!("the upstream serves lineage {new}, which continues lineage {old} from offset {x}");
        assert!(log.contains(&crossing), "{log}");
    }
    // Away across two restarts, each with writes: the replica's lineage is the predecessor of
    // the predecessor of the primary's.
    replica.signal(libc::SIGSTOP);
    cut_links(&primary, &[]);
    let first = repl(&primary)["master_replid"].clone();
    for _ in 0..2 {
        random_workload(&primary, &mut rng, 2);
        wait_journaled(&primary);
        primary.signal(libc::SIGKILL);
        primary.wait_exit(Duration::from_secs(10)).unwrap();
        primary = Server::start(&pargs);
    }
    random_workload(&primary, &mut rng, 2);
    wait_journaled(&primary);
    let new = repl(&primary)["master_replid"].clone();
    replica.signal(libc::SIGCONT);
    wait_for(&replica, "live two lineages on", |m| m["replica_state"] == "live" && m["master_replid"] == new);
    converge(&primary, &[&replica]);
    assert!(replica.log().contains(&format!("this server holds lineage {first}")), "{}", replica.log());
    random_workload(&primary, &mut rng, 2);
    converge(&primary, &[&replica]);
    wait_journaled(&primary);
    let (id, at, want) = (repl(&primary)["master_replid"].clone(), offset(&primary), digest(&primary));
    drop(primary);
    let fresh = Server::start(&["--kafka", &uri, "--save", "", "--enable-debug-command", "yes"]);
    let m = repl(&fresh);
    assert_eq!((offset(&fresh), m["master_replid2"].as_str(), digest(&fresh)), (at, id.as_str(), want));
    assert_eq!(info(&mut fresh.conn(), "kafka")["kafka_replay_successor_lineages"], "4");
}

/// An idle upstream ticks once a second, so its replica stays live however long nothing is
/// written; an upstream that stops answering (here SIGSTOP: the connection stays open, nothing
/// arrives) is taken for dead after the link timeout.
#[test]
fn an_idle_upstream_keeps_its_replica_live_and_a_hung_one_is_dropped() {
    let primary = Server::start(&[]);
    let pport = primary.port.to_string();
    let replica = live_replica(&["--replica-tcp", "127.0.0.1", &pport]);
    std::thread::sleep(Duration::from_secs(12));
    let m = repl(&replica);
    assert_eq!(m["replica_state"], "live", "{m:?}");
    assert!(m["master_last_io_seconds_ago"].parse::<i64>().unwrap() <= 2, "{m:?}");
    primary.signal(libc::SIGSTOP);
    let m = wait_for(&replica, "the link timeout", |m| {
        m["replica_last_error"].contains("nothing from the upstream")
    });
    assert_eq!(m["goblin_ready"], "0");
    primary.signal(libc::SIGCONT);
    wait_for(&replica, "live again", |m| m["replica_state"] == "live");
}

/// SORT .. STORE, the HyperLogLog writes (PFCOUNT's cache refresh from a read command
/// included, also inside a script) and the GEO writes reach a replica as their
/// canonical forms: the same bytes and digest on both sides. A replica answers PFCOUNT of a
/// value with a stale cache without writing (its upstream's SET follows).
#[test]
fn sort_hll_and_geo_writes_replicate_exactly() {
    let primary = Server::start(&["--enable-debug-command", "yes"]);
    let pport = primary.port.to_string();
    let r = live_replica(&["--replica-tcp", "127.0.0.1", &pport]);
    let mut pc = primary.conn();
    let mut rc = r.conn();
    let q = |con: &mut redis::Connection, args: &[&str]| -> redis::Value {
        redis::cmd(args[0]).arg(&args[1..]).query(con).unwrap()
    };
    q(&mut pc, &["RPUSH", "l", "3", "1", "2", "10"]);
    q(&mut pc, &["MSET", "w_1", "9", "w_2", "8", "w_3", "7", "w_10", "6"]);
    q(&mut pc, &["SORT", "l", "BY", "w_*", "STORE", "sorted"]);
    q(&mut pc, &["PFADD", "h", "a", "b", "c"]);
    let elems: Vec<String> = (0..4000).map(|i| format!("e{i}")).collect();
    let _: i64 = redis::cmd("PFADD").arg("big").arg(&elems).query(&mut pc).unwrap();
    converge(&primary, &[&r]);
    // The replica counts the stale cache without storing it...
    let n: i64 = redis::cmd("PFCOUNT").arg("h").query(&mut rc).unwrap();
    assert_eq!(n, 3);
    let off = offset(&primary);
    // ...the primary stores it and replicates that write.
    let n: i64 = redis::cmd("PFCOUNT").arg("h").query(&mut pc).unwrap();
    assert_eq!(n, 3);
    assert_eq!(offset(&primary), off + 1, "PFCOUNT's cache refresh is one SET");
    let n: i64 = redis::cmd("EVAL")
        .arg("return redis.call('PFCOUNT', KEYS[1])")
        .arg(1)
        .arg("big")
        .query(&mut pc)
        .unwrap();
    assert!((3900..=4100).contains(&n), "{n}");
    q(&mut pc, &["PFMERGE", "m", "h", "big"]);
    q(&mut pc, &["GEOADD", "g", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"]);
    q(
        &mut pc,
        &["GEOSEARCHSTORE", "near", "g", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "STOREDIST"],
    );
    converge(&primary, &[&r]);
    for k in ["h", "big", "m"] {
        let (a, b): (Vec<u8>, Vec<u8>) = (
            redis::cmd("GET").arg(k).query(&mut pc).unwrap(),
            redis::cmd("GET").arg(k).query(&mut rc).unwrap(),
        );
        assert_eq!(a, b, "{k}");
    }
    let sorted: Vec<String> = redis::cmd("LRANGE").arg("sorted").arg(0).arg(-1).query(&mut rc).unwrap();
    assert_eq!(sorted, ["10", "3", "2", "1"]);
    let near: Vec<(String, f64)> =
        redis::cmd("ZRANGE").arg("near").arg(0).arg(-1).arg("WITHSCORES").query(&mut rc).unwrap();
    assert_eq!(near.len(), 2);
    assert!(r.log().lines().all(|l| !l.contains("produced a mutation of its own")));
}

#[test]
fn a_blocked_xread_on_a_replica_is_woken_by_the_upstreams_xadd() {
    let primary = Server::start(&[]);
    let pport = primary.port.to_string();
    let r = live_replica(&["--replica-tcp", "127.0.0.1", &pport]);
    let mut pc = primary.conn();
    let _: String = redis::cmd("XADD").arg("s").arg("1-0").arg("f").arg("old").query(&mut pc).unwrap();
    converge(&primary, &[&r]);
    let rport = r.port;
    let reader = std::thread::spawn(move || {
        let client = redis::Client::open(format!("redis://127.0.0.1:{rport}/")).unwrap();
        let mut c = client.get_connection().unwrap();
        let v: redis::Value =
            redis::cmd("XREAD").arg("BLOCK").arg(0).arg("STREAMS").arg("s").arg("$").query(&mut c).unwrap();
        v
    });
    let mut rc = r.conn();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info: String = redis::cmd("INFO").arg("clients").query(&mut rc).unwrap();
        if info.contains("blocked_clients:1") {
            break;
        }
        assert!(Instant::now() < deadline, "the reader never blocked on the replica");
        std::thread::sleep(Duration::from_millis(10));
    }
    let _: String = redis::cmd("XADD").arg("s").arg("2-0").arg("f").arg("new").query(&mut pc).unwrap();
    let got = format!("{:?}", reader.join().unwrap());
    assert!(got.contains("2-0") && !got.contains("1-0"), "{got}");
}

/// A batch larger than a subscriber's whole queue (one big value, a big MSET) can never be
/// queued: it goes out from a copy the subscribers share, at its place among the frames
/// before and after it, so a replica that keeps up is not cut off by one big write (without
/// Kafka it could never come back). Several in one pipeline, between small writes, in one
/// transaction, and with the queue holding frames before them.
#[test]
fn a_batch_larger_than_the_queue_reaches_the_replicas_in_order() {
    let primary = Server::start(&["--replication-buffer-bytes", "64kb", "--enable-debug-command", "yes"]);
    let pport = primary.port.to_string();
    let args = ["--replica-tcp", "127.0.0.1", pport.as_str(), "--enable-debug-command", "yes"];
    let r1 = live_replica(&args);
    let r2 = live_replica(&args);
    let mut c = primary.conn();
    let big = |n: usize, fill: u8| String::from_utf8(vec![fill; n]).unwrap();
    let mut p = redis::pipe();
    for round in 0..4u8 {
        p.cmd("SET").arg("small").arg(round.to_string()).ignore();
        p.cmd("RPUSH").arg("order").arg(format!("before-{round}")).ignore();
        p.cmd("SET").arg(format!("big{round}")).arg(big(300_000 + round as usize, b'a' + round)).ignore();
        p.cmd("RPUSH").arg("order").arg(format!("after-{round}")).ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    let pairs: Vec<(String, String)> =
        (0..40).map(|i| (format!("m{i}"), big(10_000, b'0' + (i % 10) as u8))).collect();
    let _: () = redis::cmd("MSET").arg(&pairs).query(&mut c).unwrap();
    let _: () = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("tx-big")
        .arg(big(200_000, b'z'))
        .cmd("INCR")
        .arg("tx")
        .query(&mut c)
        .unwrap();
    converge(&primary, &[&r1, &r2]);
    let m = info(&mut c, "replication");
    assert_eq!(m["connected_slaves"], "2", "{m:?}\n{}", primary.log());
    assert_eq!(m["firehose_full_disconnections"], "0");
    for r in [&r1, &r2] {
        let order: Vec<String> =
            redis::cmd("LRANGE").arg("order").arg(0).arg(-1).query(&mut r.conn()).unwrap();
        assert_eq!(order.len(), 8);
        assert_eq!(m_state(r), "live");
    }
}

/// Spilled frames waiting for one subscriber are bounded by `client-output-buffer-limit
/// replica`'s hard limit: a frame that alone exceeds it cuts the subscriber off, as a full
/// queue does.
#[test]
fn a_spilled_batch_past_the_replica_output_limit_cuts_the_subscriber_off() {
    let primary = Server::start(&["--replication-buffer-bytes", "64kb", "--enable-debug-command", "yes"]);
    let pport = primary.port.to_string();
    let r = live_replica(&["--replica-tcp", "127.0.0.1", pport.as_str()]);
    let mut c = primary.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("replica 1mb 0 0")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET").arg("fits").arg("x".repeat(500_000)).query(&mut c).unwrap();
    converge(&primary, &[&r]);
    let _: () = redis::cmd("SET").arg("too-big").arg("x".repeat(2_000_000)).query(&mut c).unwrap();
    let m = wait_for(&primary, "the subscriber cut off", |m| m["connected_slaves"] == "0");
    assert_eq!(m["firehose_full_disconnections"], "1");
    assert!(primary.log().contains("larger than its 65536-byte queue"), "{}", primary.log());
}

fn m_state(r: &Server) -> String {
    info(&mut r.conn(), "replication")["replica_state"].clone()
}

/// A primary without a journal restarts from its snapshot under a new lineage that names the
/// old one through the snapshot's offset (INFO master_replid2, second_repl_offset). A replica
/// at exactly that offset, and the replica chained behind it, follow the new lineage; a
/// replica past it (it applied writes the crash took from the primary) is refused, also once
/// the primary's new writes reach its offset: with one lineage id across the restart it went
/// live there, holding the lost writes where the primary holds others.
#[test]
fn a_primary_restarted_from_its_snapshot_without_kafka_is_followed_only_from_that_offset() {
    use rand::SeedableRng;
    let snap = sock("primary-nokafka.gcsn");
    let pport = common::free_port().to_string();
    let pargs = ["--port", pport.as_str(), "--load", &snap, "--enable-debug-command", "yes"];
    let mut primary = Server::start(&pargs);
    let a = live_replica(&["--replica-tcp", "127.0.0.1", &pport]);
    let aport = a.port.to_string();
    let chained = live_replica(&["--replica-tcp", "127.0.0.1", &aport]);
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    random_workload(&primary, &mut rng, 4);
    let _: () = redis::cmd("SAVE").query(&mut primary.conn()).unwrap();
    converge(&primary, &[&a, &chained]);
    let (old, x) = (repl(&primary)["master_replid"].clone(), offset(&primary));

    // Killed right after its save: the replicas stand at the snapshot's offset and follow.
    primary.signal(9);
    primary.wait_exit(Duration::from_secs(10)).unwrap();
    wait_for(&a, "the link lost", |m| m["goblin_ready"] == "0");
    let mut primary = Server::start(&pargs);
    let m = repl(&primary);
    let new = m["master_replid"].clone();
    assert_ne!(new, old);
    assert_eq!((m["master_replid2"].as_str(), offset(&primary)), (old.as_str(), x));
    assert_eq!(m["second_repl_offset"], (x + 1).to_string());
    assert!(
        primary.log().contains(&format!("continues lineage {old} from its offset {x}")),
        "{}",
        primary.log()
    );
    for r in [&a, &chained] {
        let m = wait_for(r, "live on the new lineage", |m| m["replica_state"] == "live");
        assert_eq!((m["master_replid"].as_str(), m["master_replid2"].as_str()), (new.as_str(), old.as_str()));
        assert_eq!(m["slave_repl_offset"], x.to_string());
    }
    let mut pc = primary.conn();
    for i in 0..20 {
        let _: i64 = redis::cmd("INCR").arg("after").query(&mut pc).unwrap();
        let _: i64 = redis::cmd("RPUSH").arg("after-list").arg(i).query(&mut pc).unwrap();
    }
    converge(&primary, &[&a, &chained]);

    // Saved at z, written past it to y, killed: the replicas hold y - z writes the restarted
    // primary lost. They are refused, before and after its new writes reach offset y.
    let _: () = redis::cmd("SAVE").query(&mut primary.conn()).unwrap();
    let z = offset(&primary);
    let mut pc = primary.conn();
    for i in 0..5 {
        let _: () = redis::cmd("SET").arg(format!("lost{i}")).arg(i).query(&mut pc).unwrap();
    }
    converge(&primary, &[&a, &chained]);
    let (y, held) = (offset(&primary), digest(&a));
    primary.signal(9);
    primary.wait_exit(Duration::from_secs(10)).unwrap();
    let primary = Server::start(&pargs);
    assert_eq!(offset(&primary), z);
    let m = wait_for(&a, "refused", |m| m["replica_state"] == "degraded");
    assert!(
        m["replica_last_error"].contains(&format!("restarted at offset {z} of this server's lineage {new}"))
            && m["replica_last_error"].contains("past it"),
        "{m:?}"
    );
    let mut pc = primary.conn();
    for i in 0..(y - z) {
        let _: () = redis::cmd("SET").arg(format!("other{i}")).arg(i).query(&mut pc).unwrap();
    }
    assert_eq!(offset(&primary), y);
    still_refused(&a, y, &held);
    let n: i64 = redis::cmd("EXISTS").arg("lost0").arg("other0").query(&mut a.conn()).unwrap();
    assert_eq!(n, 1, "the replica keeps what it had, and takes none of the new writes");
    // The chained replica lost its upstream's link and stays down with it.
    assert_eq!(repl(&chained)["goblin_ready"], "0");
}

/// The same through dump.rdb, a primary's restart point without --load: the file carries the
/// lineage and offset (`goblin-replid`, `goblin-offset`), and the restart goes on from them as
/// a successor lineage that the replica standing at that offset follows. A file whose load
/// left keys out as expired is no longer the lineage's state at its offset: a new lineage.
#[test]
fn a_primary_restarted_from_dump_rdb_is_followed_from_its_offset() {
    let dir = temp_path("rdb-restart");
    std::fs::create_dir_all(&dir).unwrap();
    let pport = common::free_port().to_string();
    let pargs = ["--port", pport.as_str(), "--save", "", "--enable-debug-command", "yes"];
    let mut primary = Server::start_in(Some(&dir), &pargs);
    let replica = live_replica(&["--replica-tcp", "127.0.0.1", &pport]);
    let mut pc = primary.conn();
    for i in 0..50 {
        let _: i64 = redis::cmd("RPUSH").arg("list").arg(i).query(&mut pc).unwrap();
    }
    let _: () = redis::cmd("SAVE").query(&mut pc).unwrap();
    converge(&primary, &[&replica]);
    let (old, x) = (repl(&primary)["master_replid"].clone(), offset(&primary));
    primary.signal(9);
    primary.wait_exit(Duration::from_secs(10)).unwrap();
    wait_for(&replica, "the link lost", |m| m["goblin_ready"] == "0");
    let mut primary = Server::start_in(Some(&dir), &pargs);
    let m = repl(&primary);
    assert_eq!((m["master_replid2"].as_str(), offset(&primary)), (old.as_str(), x), "{}", primary.log());
    assert_ne!(m["master_replid"], old);
    let m = wait_for(&replica, "live on the new lineage", |m| m["replica_state"] == "live");
    assert_eq!(m["master_replid2"], old);
    let mut pc = primary.conn();
    let _: i64 = redis::cmd("RPUSH").arg("list").arg("after").query(&mut pc).unwrap();
    converge(&primary, &[&replica]);

    // A key that expires while the primary is down: left out of the load, a new lineage.
    let _: () = redis::cmd("SET").arg("short").arg("1").arg("PX").arg(300).query(&mut pc).unwrap();
    let _: () = redis::cmd("SAVE").query(&mut pc).unwrap();
    converge(&primary, &[&replica]);
    primary.signal(9);
    primary.wait_exit(Duration::from_secs(10)).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let primary = Server::start_in(Some(&dir), &pargs);
    assert!(primary.log().contains("1 keys past their deadline were left out"), "{}", primary.log());
    assert_eq!(repl(&primary)["master_replid2"], "0".repeat(40));
    let m = wait_for(&replica, "another lineage", |m| m["replica_last_error"].contains("different history"));
    assert_eq!(m["replica_state"], "degraded");
}
