//! The write path's atomic units, seen from outside through the real binary: what each origin
//! commits (DEBUG BATCHES, the history sink at the same call site as every other sink), the
//! panic policy, DEBUG DIGEST, and the startup refusal of flags whose feature is not built.

mod common;

use common::Server;
use redis::Value;
use std::time::{Duration, Instant};

/// One committed batch as DEBUG BATCHES reports it.
#[derive(Debug)]
struct Batch {
    origin: String,
    first: i64,
    mutations: Vec<Vec<String>>,
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => panic!("not a string: {other:?}"),
    }
}

fn batches(con: &mut redis::Connection, count: usize) -> Vec<Batch> {
    let v: Value = redis::cmd("DEBUG").arg("BATCHES").arg(count).query(con).unwrap();
    let Value::Array(items) = v else { panic!("{v:?}") };
    items
        .iter()
        .map(|b| {
            let Value::Array(parts) = b else { panic!("{b:?}") };
            let Value::Int(first) = parts[1] else { panic!("{parts:?}") };
            let Value::Array(muts) = &parts[2] else { panic!("{parts:?}") };
            let mutations = muts
                .iter()
                .map(|m| match m {
                    Value::Array(args) => args.iter().map(text).collect(),
                    other => panic!("{other:?}"),
                })
                .collect();
            Batch { origin: text(&parts[0]), first, mutations }
        })
        .collect()
}

fn offset(con: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("replication").query(con).unwrap();
    let line = info.lines().find(|l| l.starts_with("master_repl_offset:")).expect("offset field");
    line["master_repl_offset:".len()..].trim().parse().unwrap()
}

#[test]
fn exec_commits_one_batch_of_consecutive_offsets() {
    let s = Server::start(&["--enable-debug-command", "yes", "--debug-batch-history", "yes"]);
    let mut con = s.conn();
    let _: () = redis::cmd("SET").arg("before").arg("1").query(&mut con).unwrap();
    let start = offset(&mut con);
    let (_, _, _, _): (String, i64, i64, i64) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("x")
        .arg("1")
        .cmd("INCR")
        .arg("x")
        .cmd("SADD")
        .arg("s")
        .arg("a")
        .arg("b")
        .cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("v")
        .query(&mut con)
        .unwrap();
    let end = offset(&mut con);
    let last = batches(&mut con, 1).pop().unwrap();
    assert_eq!(last.origin, "exec");
    assert_eq!(last.first, start + 1, "the batch starts right after the previous offset");
    assert_eq!(last.mutations.len() as i64, end - start, "one offset per mutation, all in one batch");
    assert!(last.mutations.len() >= 4, "{last:?}");
    assert_eq!(last.mutations[0], ["SET", "x", "1"]);
    // The command before it was a batch of its own.
    let both = batches(&mut con, 2);
    assert_eq!((both[0].origin.as_str(), both[0].first), ("command", start));
}

#[test]
fn a_blocked_command_served_later_commits_its_own_batch() {
    let s = Server::start(&["--enable-debug-command", "yes", "--debug-batch-history", "yes"]);
    let mut waiter = s.conn();
    let port = s.port;
    let parked = std::thread::spawn(move || -> String {
        redis::cmd("BLMOVE").arg("src").arg("dst").arg("LEFT").arg("RIGHT").arg(0).query(&mut waiter).unwrap()
    });
    let mut con = s.conn();
    // Wait until the client is parked (CLIENT LIST shows it blocked).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO").arg("clients").query(&mut con).unwrap();
        if info.contains("blocked_clients:1") {
            break;
        }
        assert!(Instant::now() < deadline, "the BLMOVE client never parked");
        std::thread::sleep(Duration::from_millis(10));
    }
    let _: i64 = redis::cmd("RPUSH").arg("src").arg("x").query(&mut con).unwrap();
    assert_eq!(parked.join().unwrap(), "x");
    let _ = port;
    let last = batches(&mut con, 2);
    assert_eq!(last.len(), 2);
    assert_eq!(last[0].origin, "command");
    assert_eq!(last[0].mutations, [["RPUSH", "src", "x"]]);
    assert_eq!(last[1].origin, "blocked-retry");
    assert_eq!(last[1].first, last[0].first + 1, "committed right after the write that served it");
    assert!(!last[1].mutations.is_empty(), "{:?}", last[1]);
    assert_eq!(offset(&mut con), last[1].first + last[1].mutations.len() as i64 - 1);
}

#[test]
fn active_expiry_commits_del_batches() {
    let s = Server::start(&["--enable-debug-command", "yes", "--debug-batch-history", "yes"]);
    let mut con = s.conn();
    let mut p = redis::pipe();
    for i in 0..40 {
        p.cmd("SET").arg(format!("k{i}")).arg("v").arg("PX").arg(30).ignore();
    }
    let _: () = p.query(&mut con).unwrap();
    let start = offset(&mut con);
    // DBSIZE does not touch keys: only active expiry can remove them.
    let deadline = Instant::now() + Duration::from_secs(10);
    while redis::cmd("DBSIZE").query::<i64>(&mut con).unwrap() > 0 {
        assert!(Instant::now() < deadline, "keys were not expired actively");
        std::thread::sleep(Duration::from_millis(20));
    }
    let expiry: Vec<Batch> = batches(&mut con, 256).into_iter().filter(|b| b.first > start).collect();
    assert!(!expiry.is_empty());
    let mut next = start + 1;
    let mut deleted = Vec::new();
    for b in &expiry {
        assert_eq!(b.origin, "active-expiry", "{b:?}");
        assert_eq!(b.first, next, "expiry batches take consecutive offsets");
        next += b.mutations.len() as i64;
        for m in &b.mutations {
            assert_eq!((m.len(), m[0].as_str()), (2, "DEL"), "{m:?}");
            deleted.push(m[1].clone());
        }
    }
    deleted.sort();
    deleted.dedup();
    assert_eq!(deleted.len(), 40);
    assert_eq!(offset(&mut con), next - 1);
}

#[test]
fn a_crashing_read_answers_an_error_and_keeps_its_expiry() {
    let s = Server::start(&["--enable-debug-command", "yes", "--debug-batch-history", "yes"]);
    let mut con = s.conn();
    let _: () = redis::cmd("SET").arg("k").arg("v").arg("PX").arg(1).query(&mut con).unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let err = redis::cmd("DEBUG").arg("CRASH-READ").arg("k").query::<()>(&mut con).unwrap_err();
    assert!(err.to_string().contains("internal error while executing 'debug'"), "{err}");
    // Still serving. The key's expiry (made lazily by the crashing read, or by active expiry
    // just before it: the engine's unit test pins the lazy case) was committed, and the
    // offset agrees with the committed batches.
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    assert_eq!(redis::cmd("EXISTS").arg("k").query::<i64>(&mut con).unwrap(), 0);
    let last = batches(&mut con, 1).pop().unwrap();
    assert_eq!(last.mutations, [["DEL", "k"]]);
    assert_eq!(offset(&mut con), last.first);
}

#[test]
fn a_crashing_write_stops_the_server() {
    let mut s = Server::start(&["--enable-debug-command", "yes", "--debug-batch-history", "yes"]);
    let mut con = s.conn();
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut con).unwrap();
    let _ = redis::cmd("DEBUG").arg("CRASH-WRITE").arg("k").query::<()>(&mut con);
    let status = s.wait_exit(Duration::from_secs(10)).expect("the server must exit after a crashing write");
    assert_eq!(status.code(), Some(70), "fail-stop exit status");
    assert!(s.log().contains("fail-stop"), "{}", s.log());
}

#[test]
fn debug_digest_compares_contents() {
    let a = Server::start(&[]);
    let b = Server::start(&[]);
    let (mut ca, mut cb) = (a.conn(), b.conn());
    let digest =
        |c: &mut redis::Connection| -> String { redis::cmd("DEBUG").arg("DIGEST").query(c).unwrap() };
    assert_eq!(digest(&mut ca), "0".repeat(40));
    for (c, order) in [(&mut ca, [0, 1, 2]), (&mut cb, [2, 0, 1])] {
        for i in order {
            let _: () = redis::cmd("SET").arg(format!("k{i}")).arg(i).query(c).unwrap();
            let _: i64 = redis::cmd("ZADD").arg("z").arg(i).arg(format!("m{i}")).query(c).unwrap();
        }
    }
    let d = digest(&mut ca);
    assert_eq!(d.len(), 40);
    assert_ne!(d, "0".repeat(40));
    assert_eq!(d, digest(&mut cb), "same contents, different insertion order");
    let _: i64 = redis::cmd("PEXPIREAT").arg("k1").arg(99_999_999_999_999i64).query(&mut cb).unwrap();
    assert_ne!(d, digest(&mut cb), "a TTL is part of the contents");
    let values: Vec<String> =
        redis::cmd("DEBUG").arg("DIGEST-VALUE").arg("k1").arg("nope").query(&mut ca).unwrap();
    assert_eq!(values.len(), 2);
    assert_eq!(values[1], "0".repeat(40));
    let other: Vec<String> = redis::cmd("DEBUG").arg("DIGEST-VALUE").arg("k1").query(&mut cb).unwrap();
    assert_eq!(values[0], other[0], "a value's digest leaves the TTL out");
    // The intrusive subcommands need the flag; DIGEST does not.
    let err = redis::cmd("DEBUG").arg("BATCHES").query::<()>(&mut ca).unwrap_err();
    assert!(err.to_string().contains("DEBUG command not allowed"), "{err}");
    // Any other subcommand too, known or not, as Redis refuses a disabled DEBUG; enabled, an
    // unknown one gets DEBUG's own syntax error.
    let err = redis::cmd("DEBUG").arg("NOPE").query::<()>(&mut ca).unwrap_err();
    assert!(err.to_string().contains("DEBUG command not allowed"), "{err}");
    let enabled = Server::start(&["--enable-debug-command", "yes"]);
    let err = redis::cmd("DEBUG").arg("NOPE").query::<()>(&mut enabled.conn()).unwrap_err();
    assert!(err.to_string().contains("unknown subcommand or wrong number of arguments for 'NOPE'"), "{err}");
}

#[test]
fn bad_replica_flags_are_refused_at_startup() {
    for (args, want) in [
        (vec!["--replica-tcp", "127.0.0.1", "0"], "--replica-tcp: invalid port '0'"),
        (vec!["--replica-tcp", "127.0.0.1", "1", "--replica-uds", "/tmp/x"], "exactly one upstream"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_goblin-core"))
            .args(["--port", "0"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{err}");
        assert!(!err.contains("listening on"), "no listener may open: {err}");
    }
}

/// Every key and value of database 0 (SCAN, then GET: DEBUG POPULATE makes strings only).
fn strings(con: &mut redis::Connection) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(con).unwrap();
    keys.into_iter()
        .map(|k| {
            let v: Vec<u8> = redis::cmd("GET").arg(&k).query(con).unwrap();
            (k, v)
        })
        .collect()
}

#[test]
fn debug_populate_makes_redis_servers_keys_as_one_batch_of_sets() {
    let redis = common::RedisServer::start_with(&["--enable-debug-command", "yes"]);
    let goblin = Server::start(&["--enable-debug-command", "yes", "--debug-batch-history", "yes"]);
    let calls: &[&[&[u8]]] = &[
        &[b"200"],
        &[b"10", b"p", b"3"],
        &[b"10", b"q", b"20"],
        &[b"5", b"a\0b", b"4"],
        &[b"3", &[b'x'; 130]],
        &[b"0"],
        &[b"-1"],
        &[b"x"],
        &[b"1", b"k", b"-2"],
        &[b"1", b"k", b"0"],
        &[b"1", b"k", b"1", b"extra"],
    ];
    let mut results = Vec::new();
    for port in [redis.port, goblin.port] {
        let mut con =
            redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
        let _: () = redis::cmd("SET").arg("key:3").arg("existing").query(&mut con).unwrap();
        let replies: Vec<String> = calls
            .iter()
            .map(|args| {
                let r: redis::RedisResult<String> =
                    redis::cmd("DEBUG").arg("POPULATE").arg(*args).query(&mut con);
                match r {
                    Ok(ok) => ok,
                    Err(e) => format!("{:?} {:?}", e.code(), e.detail()),
                }
            })
            .collect();
        results.push((replies, strings(&mut con)));
    }
    assert_eq!(results[1].0, results[0].0, "replies");
    assert_eq!(results[1].1.len(), results[0].1.len());
    assert!(results[1].1 == results[0].1, "the keys and values differ from redis-server's");
    assert_eq!(results[1].1[&b"key:3"[..]], b"existing", "an existing key is left alone");
    // The keys are written: one batch of SETs, each key that did not exist once.
    let mut con = goblin.conn();
    let _: () = redis::cmd("DEBUG").arg("POPULATE").arg(4).arg("fresh").arg(2).query(&mut con).unwrap();
    let last = batches(&mut con, 1).pop().unwrap();
    assert_eq!(
        last.mutations,
        (0..4).map(|i| vec!["SET".to_string(), format!("fresh:{i}"), "va".to_string()]).collect::<Vec<_>>()
    );
}
