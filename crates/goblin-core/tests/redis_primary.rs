//! goblin-core as a replica of a redis-server (`REPLICAOF host port`): Redis's replication
//! protocol from the replica's side. goblin-core must hold exactly what the Redis primary
//! holds, in every database, after the full synchronization (diskless, and from a file on
//! disk) and after writes of every kind; refuse client writes while it follows; continue the
//! stream after a lost link without a second full synchronization; feed its own replicas; log
//! in with `masterauth`; become a primary with every write on `REPLICAOF NO ONE`, or when
//! Sentinel promotes it.

mod common;

use common::brokers::Broker;
use common::redis_repl::{
    contents, info_field, info_int, q, sentinel_fields, start_sentinel, wait_info, wait_same,
};
use common::{RedisServer, Server};
use redis::Value;
use std::time::{Duration, Instant};

/// A goblin-core server (`--save ""` and `args`, then CONFIG SET of each of `config`) made a
/// replica of the redis-server on `primary` by REPLICAOF, once its link is up.
fn follower(primary: u16, args: &[&str], config: &[(&str, &str)]) -> (Server, redis::Connection) {
    let g = Server::start(&[&["--save", ""][..], args].concat());
    let mut gc = g.conn();
    for (name, value) in config {
        q(&mut gc, &["CONFIG", "SET", name, value]);
    }
    q(&mut gc, &["REPLICAOF", "127.0.0.1", &primary.to_string()]);
    wait_info(&mut gc, "master_link_status", "up", "the first sync");
    (g, gc)
}

/// A reply as text to compare two servers' answers by: the value, or an error's code and
/// detail (a script error's position and sha, a function's name, are the same on both).
fn show(r: redis::RedisResult<Value>) -> String {
    match r {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("{:?} {:?}", e.code(), e.detail()),
    }
}

/// Writes of every kind a Redis primary propagates: transactions, scripts (as their
/// effects), database moves and swaps, deadlines set and reached (the primary's DEL), random
/// pops (as what they removed), blocking pops served, stream groups, function libraries.
/// `waiter` is a second connection to the primary, for the blocking pop.
fn write_everything(mut waiter: redis::Connection, p: &mut redis::Connection, round: &str) {
    q(p, &["MULTI"]);
    q(p, &["INCR", "counter"]);
    q(p, &["LPUSH", "list", round]);
    q(p, &["APPEND", "appended", round]);
    q(p, &["EXEC"]);
    q(
        p,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], ARGV[1]); return redis.call('hincrby', KEYS[2], 'n', 5)",
            "2",
            "sk",
            "hk",
            round,
        ],
    );
    q(p, &["SELECT", "5"]);
    q(p, &["SET", &format!("in-five-{round}"), "5"]);
    q(p, &["MOVE", &format!("in-five-{round}"), "6"]);
    q(p, &["SELECT", "0"]);
    q(p, &["SWAPDB", "3", "4"]);
    q(p, &["DEL", "s:1", "s:2"]);
    q(p, &["EXPIRE", "s:3", "1000"]);
    q(p, &["SET", "short", "v", "PX", "50"]);
    q(p, &["INCRBYFLOAT", "float", "1.5"]);
    q(p, &["ZINCRBY", "zset", "2.5", "m7"]);
    q(p, &["XADD", "stream", "*", "round", round]);
    q(p, &["SPOP", "set"]);
    q(p, &["SETRANGE", "s:4", "1", "xyz"]);
    q(p, &["GETEX", "s:5", "PX", "900000"]);
    q(p, &["SORT", "list", "ALPHA", "STORE", "sorted"]);
    q(p, &["FUNCTION", "LOAD", "REPLACE", "#!lua name=lib\nredis.register_function('bump', function(k) return redis.call('incr', k[1]) end)"]);
    q(p, &["FCALL", "bump", "1", "bumped"]);
    let queue = format!("queue-{round}");
    let popper = std::thread::spawn({
        let queue = queue.clone();
        move || {
            let v: Vec<String> = redis::cmd("BLPOP").arg(&queue).arg(10).query(&mut waiter).unwrap();
            v
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    q(p, &["RPUSH", &queue, "job1", "job2"]);
    assert_eq!(popper.join().unwrap(), [queue.as_str(), "job1"]);
    // "short" expires on the primary, which sends its DEL.
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(q(p, &["EXISTS", "short"]), Value::Int(0));
    q(p, &["SELECT", "6"]);
    q(p, &["SET", "doomed", "1"]);
    q(p, &["FLUSHDB"]);
    q(p, &["SELECT", "0"]);
}

fn fill(p: &mut redis::Connection) {
    for i in 0..300 {
        let i = i.to_string();
        q(p, &["SET", &format!("s:{i}"), &i]);
        q(p, &["HSET", &format!("h:{}", i.len()), &format!("f{i}"), &i]);
        q(p, &["RPUSH", "list", &i]);
        q(p, &["SADD", "set", &i]);
        q(p, &["ZADD", "zset", &i, &format!("m{i}")]);
    }
    // Large values too (a hash and a list past the small encodings, a long string).
    q(p, &["SET", "big", &"x".repeat(100_000)]);
    q(p, &["XADD", "stream", "1-1", "f", "v"]);
    q(p, &["XGROUP", "CREATE", "stream", "g", "0"]);
    q(p, &["SET", "ttl", "v", "EX", "1000"]);
    q(p, &["SELECT", "3"]);
    q(p, &["SET", "in-three", "3"]);
    q(p, &["SELECT", "0"]);
}

/// The stream group's state: XINFO GROUPS's name, consumers, pending and last ID.
fn groups(c: &mut redis::Connection) -> Vec<String> {
    let v = q(c, &["XINFO", "GROUPS", "stream"]);
    let Value::Array(gs) = v else { panic!("{v:?}") };
    gs.iter()
        .map(|g| {
            let Value::Array(kv) = g else { panic!("{g:?}") };
            let text = |v: &Value| match v {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                Value::Int(n) => n.to_string(),
                other => format!("{other:?}"),
            };
            let mut m = Vec::new();
            for pair in kv.chunks(2) {
                let name = text(&pair[0]);
                if ["name", "consumers", "pending", "last-delivered-id"].contains(&name.as_str()) {
                    m.push(format!("{name}={}", text(&pair[1])));
                }
            }
            m.join(" ")
        })
        .collect()
}

#[test]
fn goblin_core_follows_a_redis_primary_through_every_kind_of_write() {
    // Diskless (Redis 7's default), without its 5 s wait for more replicas.
    let r = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let mut p = r.conn();
    fill(&mut p);
    let g = Server::start(&["--save", ""]);
    let mut gc = g.conn();
    q(&mut gc, &["SET", "gone-after-sync", "1"]);
    assert_eq!(q(&mut gc, &["REPLICAOF", "127.0.0.1", &r.port.to_string()]), Value::Okay);
    wait_info(&mut gc, "master_link_status", "up", "the first sync");
    wait_same(&mut p, &mut gc, "after the first sync");
    assert_eq!(q(&mut gc, &["EXISTS", "gone-after-sync"]), Value::Int(0), "the file replaced the dataset");
    assert_eq!(info_field(&mut gc, "replication", "role").as_deref(), Some("slave"));
    assert_eq!(info_field(&mut gc, "replication", "master_port"), Some(r.port.to_string()));
    assert_eq!(
        q(&mut gc, &["REPLICAOF", "127.0.0.1", &r.port.to_string()]),
        Value::SimpleString("OK Already connected to specified master".into())
    );
    assert_eq!(
        q(&mut gc, &["CONFIG", "GET", "replicaof"]),
        Value::Array(vec![
            Value::BulkString(b"replicaof".to_vec()),
            Value::BulkString(format!("127.0.0.1 {}", r.port).into_bytes())
        ])
    );
    // A new lineage started from the file, at offset 1: an empty goblin-core firehose replica
    // of this server cannot take it for the empty dataset (offset 0) and stays not ready,
    // rather than serve nothing as current.
    let fresh = Server::start(&["--save", "", "--replica-tcp", "127.0.0.1", &g.port.to_string()]);
    let mut fc = fresh.conn();
    wait_info(&mut fc, "replica_state", "degraded", "an empty firehose replica");
    assert_eq!(info_field(&mut fc, "replication", "goblin_ready").as_deref(), Some("0"));
    assert_eq!(q(&mut fc, &["DBSIZE"]), Value::Int(0));
    drop(fresh);
    // The primary sees a replica online at the port this server listens on (a diskless
    // primary moves it from wait_bgsave once its cron has reaped the child that sent the
    // file, up to 1/hz s after the transfer).
    assert_eq!(info_int(&mut p, "replication", "connected_slaves"), 1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let slave0 = info_field(&mut p, "replication", "slave0").unwrap();
        if slave0.contains(&format!("port={},state=online", g.port)) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{slave0}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    // A subscriber on the replica gets what is published on the primary.
    let mut sub = g.conn();
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe("news").unwrap();
    pubsub.set_read_timeout(Some(Duration::from_secs(10))).unwrap();

    write_everything(r.conn(), &mut p, "one");
    q(&mut p, &["XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "stream", ">"]);
    q(&mut p, &["PUBLISH", "news", "hello"]);
    wait_same(&mut p, &mut gc, "after the writes");
    assert_eq!(groups(&mut gc), groups(&mut p));
    assert_eq!(q(&mut gc, &["FUNCTION", "LIST"]), q(&mut p, &["FUNCTION", "LIST"]));
    let msg = pubsub.get_message().unwrap();
    assert_eq!((msg.get_channel_name(), msg.get_payload::<String>().unwrap()), ("news", "hello".into()));
    drop(pubsub);
    assert_eq!(info_int(&mut gc, "replication", "redis_primary_rejected_commands"), 0);

    // Client writes are refused; reads are served.
    let refused = redis::cmd("SET").arg("k").arg("v").query::<Value>(&mut gc).unwrap_err();
    assert_eq!(refused.code(), Some("READONLY"), "{refused}");
    let refused = redis::cmd("FCALL").arg("bump").arg(1).arg("x").query::<Value>(&mut gc).unwrap_err();
    assert_eq!(refused.code(), Some("READONLY"), "{refused}");
    // WAIT on the primary counts this replica once it acknowledged the write.
    q(&mut p, &["SET", "waited-for", "1"]);
    assert_eq!(q(&mut p, &["WAIT", "1", "30000"]), Value::Int(1));
    assert_eq!(q(&mut gc, &["GET", "waited-for"]), Value::BulkString(b"1".to_vec()));
    let role = q(&mut gc, &["ROLE"]);
    let Value::Array(role) = role else { panic!("{role:?}") };
    assert_eq!(role[0], Value::BulkString(b"slave".to_vec()));
    assert_eq!(role[3], Value::BulkString(b"connected".to_vec()));

    // A redis-server replica of this replica (a chain) gets the same, through this server's
    // own stream of canonical mutations.
    let chained = RedisServer::start_with(&["--replicaof", "127.0.0.1", &g.port.to_string()]);
    let mut cc = chained.conn();
    wait_info(&mut cc, "master_link_status", "up", "the chained replica");
    q(&mut p, &["INCR", "counter"]);
    wait_same(&mut p, &mut gc, "before the chained replica");
    wait_same(&mut p, &mut cc, "the chained replica");

    // The link is cut: the replica continues the stream where it stopped, with what was
    // written meanwhile, and no second full synchronization.
    assert_eq!(info_int(&mut p, "stats", "sync_full"), 1);
    assert_eq!(q(&mut p, &["CLIENT", "KILL", "TYPE", "replica"]), Value::Int(1));
    write_everything(r.conn(), &mut p, "two");
    wait_info(&mut gc, "master_link_status", "up", "after CLIENT KILL");
    wait_same(&mut p, &mut gc, "after the link was cut");
    wait_same(&mut p, &mut cc, "the chained replica after the cut");
    assert_eq!(info_int(&mut p, "stats", "sync_full"), 1, "the replica synchronized in full again");
    assert_eq!(info_int(&mut p, "stats", "sync_partial_ok"), 1);
    assert_eq!(info_int(&mut gc, "replication", "redis_primary_partial_syncs"), 1);

    // REPLICAOF NO ONE: a primary with every write, serving writes of its own.
    assert_eq!(q(&mut gc, &["REPLICAOF", "NO", "ONE"]), Value::Okay);
    assert_eq!(info_field(&mut gc, "replication", "role").as_deref(), Some("master"));
    let before = contents(&mut p);
    assert_eq!(contents(&mut gc), before);
    q(&mut gc, &["SET", "own-write", "1"]);
    q(&mut p, &["SET", "after-promotion", "1"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(q(&mut gc, &["EXISTS", "after-promotion"]), Value::Int(0), "still following");
    wait_same(&mut gc, &mut cc, "the chained replica follows the promoted server");
}

/// From a file on disk (`repl-diskless-sync no`), to a primary that wants a password: without
/// `masterauth` the link stays down and says why; with it the replica synchronizes. A
/// primary restarted empty is followed again by a full synchronization.
#[test]
fn a_replica_logs_in_with_masterauth_and_loads_a_file_from_disk() {
    let r = RedisServer::start_with(&["--repl-diskless-sync", "no", "--requirepass", "secret"]);
    let mut p = r.conn();
    q(&mut p, &["AUTH", "secret"]);
    fill(&mut p);
    let g = Server::start(&["--save", ""]);
    let mut gc = g.conn();
    q(&mut gc, &["REPLICAOF", "localhost", &r.port.to_string()]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let error = info_field(&mut gc, "replication", "redis_primary_last_error").unwrap_or_default();
        if error.contains("NOAUTH") {
            break;
        }
        assert!(Instant::now() < deadline, "no authentication error: {error:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info_field(&mut gc, "replication", "master_link_status").as_deref(), Some("down"));
    q(&mut gc, &["CONFIG", "SET", "masterauth", "secret"]);
    wait_info(&mut gc, "master_link_status", "up", "with masterauth");
    wait_same(&mut p, &mut gc, "after a sync from disk");
    let mut waiter = r.conn();
    q(&mut waiter, &["AUTH", "secret"]);
    write_everything(waiter, &mut p, "one");
    wait_same(&mut p, &mut gc, "after the writes");
    assert_eq!(info_int(&mut gc, "replication", "redis_primary_full_syncs"), 1);
}

/// Sentinel monitors a redis-server primary with a goblin-core replica (found from the
/// primary's INFO, its link up), and when the primary dies promotes goblin-core, which then
/// holds every acknowledged write and serves writes.
#[test]
fn sentinel_promotes_a_goblin_core_replica_of_a_redis_primary() {
    let r = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let mut p = r.conn();
    for i in 0..100 {
        q(&mut p, &["SET", &format!("k{i}"), &i.to_string()]);
    }
    let (g, _) = follower(r.port, &[], &[]);
    let s = start_sentinel(r.port);
    let mut sc =
        redis::Client::open(format!("redis://127.0.0.1:{}", s.port)).unwrap().get_connection().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let replicas = q(&mut sc, &["SENTINEL", "REPLICAS", "mymaster"]);
        let Value::Array(list) = &replicas else { panic!("{replicas:?}") };
        let replica = list.first().map(sentinel_fields);
        if replica.as_ref().is_some_and(|r| r["flags"] == "slave" && r["master-link-status"] == "ok") {
            assert_eq!(replica.unwrap()["port"], g.port.to_string());
            break;
        }
        assert!(Instant::now() < deadline, "the sentinel never saw the replica: {replica:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    q(&mut p, &["SET", "last", "1"]);
    assert_eq!(q(&mut p, &["WAIT", "1", "30000"]), Value::Int(1));
    drop(r);
    let deadline = Instant::now() + Duration::from_secs(60);
    let want = Value::Array(vec![
        Value::BulkString(b"127.0.0.1".to_vec()),
        Value::BulkString(g.port.to_string().into_bytes()),
    ]);
    loop {
        let addr = q(&mut sc, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]);
        if addr == want {
            break;
        }
        assert!(Instant::now() < deadline, "no failover: {addr:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Sentinel closed the promoted server's clients (CLIENT KILL TYPE normal): a new one.
    let mut gc = g.conn();
    wait_info(&mut gc, "role", "master", "the promotion");
    assert_eq!(q(&mut gc, &["DBSIZE"]), Value::Int(101));
    assert_eq!(q(&mut gc, &["GET", "last"]), Value::BulkString(b"1".to_vec()));
    q(&mut gc, &["SET", "after-failover", "1"]);
}

/// `--replicaof HOST PORT` at startup (redis-server's own flag), with `--masteruser` and the
/// password from `--masterauth-file`: the server starts as a replica, refuses writes at once,
/// and holds the primary's data once linked.
#[test]
fn replicaof_at_startup_with_a_password_file() {
    let r = RedisServer::start_with(&[
        "--repl-diskless-sync-delay",
        "0",
        "--user",
        "repl",
        "on",
        ">pw",
        "~*",
        "&*",
        "+@all",
    ]);
    let mut p = r.conn();
    fill(&mut p);
    let secret = common::temp_path("masterauth");
    std::fs::write(&secret, "pw\n").unwrap();
    let port = r.port.to_string();
    let g = Server::start(&[
        "--save",
        "",
        "--replicaof",
        "127.0.0.1",
        &port,
        "--masteruser",
        "repl",
        "--masterauth-file",
        secret.to_str().unwrap(),
    ]);
    let mut gc = g.conn();
    let refused = redis::cmd("SET").arg("k").arg("v").query::<Value>(&mut gc).unwrap_err();
    assert_eq!(refused.code(), Some("READONLY"), "{refused}");
    wait_info(&mut gc, "master_link_status", "up", "--replicaof");
    wait_same(&mut p, &mut gc, "after the first sync");
    assert_eq!(
        q(&mut gc, &["CONFIG", "GET", "masteruser"]),
        Value::Array(vec![Value::BulkString(b"masteruser".to_vec()), Value::BulkString(b"repl".to_vec())])
    );
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut p).unwrap();
    assert!(clients.lines().any(|l| l.contains(" flags=S ") && l.contains(" user=repl ")), "{clients}");
}

/// Keyspace notifications on the replica for the primary's writes, as a Redis replica raises
/// them; and a SELECT of a database this server lacks (`--databases 4`): the commands for it
/// are refused and counted, never run in another database, and the stream goes on.
#[test]
fn notifications_and_a_database_this_server_lacks() {
    let r = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let mut p = r.conn();
    q(&mut p, &["SET", "before", "1"]);
    let (g, mut gc) = follower(r.port, &["--databases", "4", "--notify-keyspace-events", "KEA"], &[]);
    assert_eq!(q(&mut gc, &["GET", "before"]), Value::BulkString(b"1".to_vec()));
    let mut sub = g.conn();
    let mut events = sub.as_pubsub();
    events.psubscribe("__keyspace@0__:*").unwrap();
    events.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    q(&mut p, &["SELECT", "9"]);
    q(&mut p, &["SET", "in-nine", "9"]);
    q(&mut p, &["SET", "before", "2"]);
    q(&mut p, &["SELECT", "0"]);
    q(&mut p, &["SET", "after", "1"]);
    let msg = events.get_message().unwrap();
    assert_eq!(
        (msg.get_channel_name(), msg.get_payload::<String>().unwrap()),
        ("__keyspace@0__:after", "set".into())
    );
    assert_eq!(
        q(&mut gc, &["GET", "before"]),
        Value::BulkString(b"1".to_vec()),
        "database 9's write ran in 0"
    );
    for db in 0..4 {
        q(&mut gc, &["SELECT", &db.to_string()]);
        assert_eq!(q(&mut gc, &["EXISTS", "in-nine"]), Value::Int(0));
    }
    assert_eq!(info_int(&mut gc, "replication", "redis_primary_rejected_commands"), 3);
    // Redis counts the errors its primary's commands meet in INFO stats as well.
    assert_eq!(info_int(&mut gc, "stats", "unexpected_error_replies"), 3);
    assert_eq!(info_field(&mut gc, "replication", "master_link_status").as_deref(), Some("up"));
}

/// REPLICAOF on a server whose history is a Kafka journal is refused (the file would replace
/// the dataset in the middle of the journal's history), and so is `--replicaof` with `--kafka`
/// at startup; a `--replica-*` server keeps its upstream. Nothing changes on the refused server.
#[test]
fn replicaof_is_refused_where_it_would_break_a_history() {
    let r = RedisServer::start();
    let port = r.port.to_string();
    let k = common::brokers::Kaka::start();
    let uri = k.uri("replicaof-refused");
    let g = Server::start(&["--save", "", "--kafka", &uri]);
    let mut gc = g.conn();
    q(&mut gc, &["SET", "mine", "1"]);
    let e = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(&port).query::<Value>(&mut gc).unwrap_err();
    assert!(e.to_string().contains("Kafka journal"), "{e}");
    assert_eq!(info_field(&mut gc, "replication", "role").as_deref(), Some("master"));
    assert_eq!(q(&mut gc, &["SET", "mine", "2"]), Value::Okay);
    let (code, log) =
        common::run_to_exit(&["--save", "", "--kafka", &uri, "--replicaof", "127.0.0.1", &port]);
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("--replicaof with --kafka"), "{log}");

    let fh = Server::start(&["--save", "", "--replica-tcp", "127.0.0.1", &g.port.to_string()]);
    let mut fc = fh.conn();
    let e = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(&port).query::<Value>(&mut fc).unwrap_err();
    assert!(e.to_string().contains("--replica-*"), "{e}");
    let e = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query::<Value>(&mut fc).unwrap_err();
    assert!(e.to_string().contains("--replica-*"), "{e}");
}

/// The primary's file is decoded off the server thread: while INFO says `async_loading:1` the
/// replica answers reads from the data it held before; then the file's data replaces it.
#[test]
fn the_old_data_is_served_while_the_file_loads() {
    let r = RedisServer::start_with(&["--repl-diskless-sync-delay", "0", "--enable-debug-command", "local"]);
    let mut p = r.conn();
    q(&mut p, &["DEBUG", "POPULATE", "1000000", "key", "100"]);
    let g = Server::start(&["--save", ""]);
    let mut gc = g.conn();
    q(&mut gc, &["SET", "held-before", "1"]);
    q(&mut gc, &["REPLICAOF", "127.0.0.1", &r.port.to_string()]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_field(&mut gc, "persistence", "async_loading").as_deref() != Some("1") {
        assert!(Instant::now() < deadline, "the file's decoding was never seen");
        assert_ne!(
            info_field(&mut gc, "replication", "master_link_status").as_deref(),
            Some("up"),
            "synchronized already"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(q(&mut gc, &["GET", "held-before"]), Value::BulkString(b"1".to_vec()));
    wait_info(&mut gc, "master_link_status", "up", "after the load");
    assert_eq!(q(&mut gc, &["DBSIZE"]), Value::Int(1_000_000));
    assert_eq!(info_field(&mut gc, "persistence", "async_loading").as_deref(), Some("0"));
}

/// A primary that hangs (SIGSTOP: its kernel still takes the replica's acknowledgements) is
/// dropped after `repl-timeout` seconds without a byte from it; when it resumes, the replica
/// continues the stream (PSYNC +CONTINUE) with what was written before the hang.
#[test]
fn a_silent_primary_times_out_and_its_stream_is_continued() {
    let r = RedisServer::start_with(&["--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1"]);
    let mut p = r.conn();
    q(&mut p, &["SET", "k", "1"]);
    let (_g, mut gc) = follower(r.port, &[], &[("repl-timeout", "3")]);
    q(&mut p, &["SET", "k", "2"]);
    assert_eq!(q(&mut p, &["WAIT", "1", "10000"]), Value::Int(1));
    let pid = r.pid() as i32;
    // SAFETY: signals to the redis-server this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut gc, "replication", "master_link_status").as_deref() != Some("down") {
        if Instant::now() > deadline {
            unsafe { libc::kill(pid, libc::SIGCONT) };
            panic!("the link to a silent primary never timed out");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let error = info_field(&mut gc, "replication", "redis_primary_last_error").unwrap_or_default();
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert!(error.contains("repl-timeout"), "{error}");
    wait_info(&mut gc, "master_link_status", "up", "after the primary resumed");
    q(&mut p, &["SET", "k", "3"]);
    assert_eq!(q(&mut p, &["WAIT", "1", "10000"]), Value::Int(1));
    assert_eq!(q(&mut gc, &["GET", "k"]), Value::BulkString(b"3".to_vec()));
    assert_eq!(info_int(&mut p, "stats", "sync_full"), 1);
    assert_eq!(info_int(&mut gc, "replication", "redis_primary_partial_syncs"), 1);
}

/// `replica-serve-stale-data no`: while the link to the primary is down, the replica refuses
/// reads with Redis's MASTERDOWN (commands flagged stale, INFO among them, still run); with
/// `yes`, the default, it serves what it holds.
#[test]
fn replica_serve_stale_data_no_refuses_reads_while_the_link_is_down() {
    let r = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let mut p = r.conn();
    q(&mut p, &["SET", "k", "1"]);
    let (_g, mut gc) = follower(r.port, &[], &[("replica-serve-stale-data", "no")]);
    assert_eq!(q(&mut gc, &["GET", "k"]), Value::BulkString(b"1".to_vec()));
    drop(r);
    wait_info(&mut gc, "master_link_status", "down", "the primary gone");
    let e = redis::cmd("GET").arg("k").query::<Value>(&mut gc).unwrap_err();
    assert_eq!(e.code(), Some("MASTERDOWN"), "{e}");
    assert_eq!(e.detail(), Some("Link with MASTER is down and replica-serve-stale-data is set to 'no'."));
    // By Redis's flags: PING is not stale (refused), ECHO and INFO are.
    let e = redis::cmd("PING").query::<Value>(&mut gc).unwrap_err();
    assert_eq!(e.code(), Some("MASTERDOWN"), "{e}");
    assert_eq!(q(&mut gc, &["ECHO", "x"]), Value::BulkString(b"x".to_vec()));
    assert!(matches!(q(&mut gc, &["INFO", "server"]), Value::BulkString(_) | Value::VerbatimString { .. }));
    q(&mut gc, &["CONFIG", "SET", "slave-serve-stale-data", "yes"]);
    assert_eq!(q(&mut gc, &["GET", "k"]), Value::BulkString(b"1".to_vec()));
    assert_eq!(
        q(&mut gc, &["CONFIG", "GET", "replica-serve-stale-data"]),
        Value::Array(vec![
            Value::BulkString(b"replica-serve-stale-data".to_vec()),
            Value::BulkString(b"yes".to_vec())
        ])
    );
}

/// Scripts on a stale replica (`replica-serve-stale-data no`, the primary unreachable), the same
/// session on goblin-core and redis-server 8.2: a script or function runs only if it declared
/// `allow-stale` (one without a shebang never), and then only the commands flagged stale; one
/// that declares writes gets READONLY first, as plain writes do.
#[test]
fn scripts_on_a_stale_replica_answer_as_redis8() {
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let library = "#!lua name=stale\n\
        redis.register_function{function_name='plain', callback=function() return 'hello' end, flags={'no-writes'}}\n\
        redis.register_function{function_name='stale', callback=function() return 'hello' end, flags={'allow-stale', 'no-writes'}}\n\
        redis.register_function{function_name='get', callback=function() return redis.call('get', 'x') end, flags={'allow-stale', 'no-writes'}}\n\
        redis.register_function{function_name='info', callback=function() return type(redis.call('info', 'server')) end, flags={'allow-stale', 'no-writes'}}\n\
        redis.register_function{function_name='writer', callback=function() return redis.call('get', 'x') end}";
    let session: &[&[&str]] = &[
        &["FCALL", "plain", "0"],
        &["FCALL", "stale", "0"],
        &["FCALL", "get", "1", "x"],
        &["FCALL", "info", "0"],
        &["FCALL", "writer", "1", "x"],
        &["FCALL_RO", "writer", "1", "x"],
        &["FCALL", "missing", "0"],
        &["EVAL", "return 1", "0"],
        &["EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"],
        &["EVALSHA", "1111111111111111111111111111111111111111", "0"],
        &["EVAL", "#!lua flags=no-writes,allow-stale\nreturn redis.call('ping')", "0"],
        &["EVAL", "#!lua flags=no-writes,allow-stale\nreturn redis.call('echo', 'e')", "0"],
        &["EVAL", "#!lua flags=allow-stale\nreturn redis.call('set', 'a', 'b')", "0"],
        &["EVAL_RO", "#!lua\nreturn 1", "0"],
        &["SET", "a", "b"],
        &["GET", "a"],
        &["FUNCTION", "FLUSH"],
    ];
    let g = Server::start(&["--save", ""]);
    let r = RedisServer::start8();
    let mut answers = Vec::new();
    for c in [&mut g.conn(), &mut r.conn()] {
        q(c, &["FUNCTION", "LOAD", library]);
        q(c, &["SCRIPT", "LOAD", "return 1"]);
        q(c, &["CONFIG", "SET", "replica-serve-stale-data", "no"]);
        q(c, &["REPLICAOF", "127.0.0.1", &nobody.to_string()]);
        let mut got = Vec::new();
        for args in session {
            let mut cmd = redis::cmd(args[0]);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            got.push(format!("{args:?} -> {}", show(cmd.query::<Value>(c))));
        }
        q(c, &["REPLICAOF", "NO", "ONE"]);
        answers.push(got);
    }
    for (g, r) in answers[0].iter().zip(&answers[1]) {
        assert_eq!(g, r, "goblin-core against redis-server 8.2");
    }
    assert!(answers[0][1].contains("hello"), "{answers:?}");
    assert!(answers[0][0].contains("MASTERDOWN"), "{answers:?}");
}

/// How a replica presents itself, as redis-server 8.2 does: `replica-announce-ip` and
/// `replica-announce-port` are the address its primary lists (INFO `slave0`, what Sentinel
/// connects to), `replica-priority` and `replica-announced` are INFO's `slave_priority` and
/// `replica_announced` (Sentinel never promotes a replica of priority 0). A goblin-core replica
/// and a redis-server 8.2 replica of the same primary, configured alike, are listed alike.
#[test]
fn a_replica_announces_its_address_and_priority_as_redis8() {
    let r = RedisServer::start8();
    let mut rc = r.conn();
    let config = [
        ("replica-announce-ip", "10.1.2.3"),
        ("replica-announce-port", "4321"),
        ("replica-priority", "0"),
        ("replica-announced", "no"),
    ];
    let (_g, mut gc) = follower(r.port, &[], &config);
    let peer = RedisServer::start8();
    let mut pc = peer.conn();
    for (name, value) in config {
        q(&mut pc, &["CONFIG", "SET", name, value]);
    }
    q(&mut pc, &["REPLICAOF", "127.0.0.1", &r.port.to_string()]);
    wait_info(&mut pc, "master_link_status", "up", "the redis-server replica's sync");
    let listed = |rc: &mut redis::Connection| -> Vec<String> {
        let mut l: Vec<String> = (0..2)
            .filter_map(|i| info_field(rc, "replication", &format!("slave{i}")))
            .map(|v| v.split(',').take(2).collect::<Vec<_>>().join(","))
            .collect();
        l.sort();
        l
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while listed(&mut rc).len() < 2 {
        assert!(Instant::now() < deadline, "the primary never listed both replicas: {:?}", listed(&mut rc));
        std::thread::sleep(Duration::from_millis(50));
    }
    // Both announce the same address.
    assert_eq!(listed(&mut rc), ["ip=10.1.2.3,port=4321", "ip=10.1.2.3,port=4321"]);
    for field in ["slave_priority", "replica_announced"] {
        assert_eq!(
            info_field(&mut gc, "replication", field),
            info_field(&mut pc, "replication", field),
            "{field}"
        );
    }
    assert_eq!(info_field(&mut gc, "replication", "slave_priority").as_deref(), Some("0"));
    for name in [
        "replica-priority",
        "slave-priority",
        "replica-announce-ip",
        "slave-announce-port",
        "replica-announced",
    ] {
        assert_eq!(q(&mut gc, &["CONFIG", "GET", name]), q(&mut pc, &["CONFIG", "GET", name]), "{name}");
    }
}

/// `bind-source-addr`: a replica's connections to its primary come from that address, for
/// goblin-core as for redis-server 8.2 (the primary lists both replicas at 127.0.0.2); one
/// that is not an address leaves the link down, with the reason, on goblin-core.
#[test]
fn a_replica_connects_from_bind_source_addr_as_redis8() {
    let r = RedisServer::start8();
    let mut rc = r.conn();
    let config = [("bind-source-addr", "127.0.0.2")];
    let (_g, mut gc) = follower(r.port, &[], &config);
    let peer = RedisServer::start8();
    let mut pc = peer.conn();
    q(&mut pc, &["CONFIG", "SET", "bind-source-addr", "127.0.0.2"]);
    q(&mut pc, &["REPLICAOF", "127.0.0.1", &r.port.to_string()]);
    wait_info(&mut pc, "master_link_status", "up", "the redis-server replica's sync");
    let ips = |rc: &mut redis::Connection| -> Vec<String> {
        (0..2)
            .filter_map(|i| info_field(rc, "replication", &format!("slave{i}")))
            .map(|v| v.split(',').next().unwrap().to_string())
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while ips(&mut rc).len() < 2 {
        assert!(Instant::now() < deadline, "the primary never listed both replicas: {:?}", ips(&mut rc));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(ips(&mut rc), ["ip=127.0.0.2", "ip=127.0.0.2"]);
    assert_eq!(
        q(&mut gc, &["CONFIG", "GET", "bind-source-addr"]),
        q(&mut pc, &["CONFIG", "GET", "bind-source-addr"])
    );
    // Not an address: accepted (as Redis accepts it), and every attempt fails with the reason.
    q(&mut gc, &["CONFIG", "SET", "bind-source-addr", "nowhere"]);
    q(&mut gc, &["REPLICAOF", "NO", "ONE"]);
    q(&mut gc, &["REPLICAOF", "127.0.0.1", &r.port.to_string()]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let error = info_field(&mut gc, "replication", "redis_primary_last_error").unwrap_or_default();
        if error.contains("bind-source-addr 'nowhere' is not an IP address") {
            break;
        }
        assert!(Instant::now() < deadline, "no error for the bad bind-source-addr: {error:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info_field(&mut gc, "replication", "master_link_status").as_deref(), Some("down"));
    // Back to the kernel's choice: the link comes up from 127.0.0.1.
    q(&mut gc, &["CONFIG", "SET", "bind-source-addr", ""]);
    wait_info(&mut gc, "master_link_status", "up", "after clearing bind-source-addr");
}

/// A transaction queued on a primary and executed after the server became a replica: EXEC
/// is refused whole (EXECABORT ... READONLY) when the queue holds a write, a script whose
/// shebang leaves out `no-writes` or a function without it among them, as in Redis, which ORs
/// the queued commands' flags, a script's declared ones included; a script without a shebang
/// is not known to write until it does (READONLY inside the transaction's reply). Compared
/// with redis-server 8.2 answer by answer.
#[test]
fn exec_on_a_server_that_became_a_replica_answers_as_redis8() {
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let library = "#!lua name=txlib\n\
        redis.register_function{function_name='reader', callback=function() return 'r' end, flags={'no-writes'}}\n\
        redis.register_function{function_name='writer', callback=function() return 'w' end}";
    let queues: &[&[&[&str]]] = &[
        &[&["EVAL", "#!lua\nreturn 1", "0"]],
        &[&["EVAL", "#!lua flags=no-writes\nreturn 2", "0"]],
        &[&["EVAL", "redis.call('set', 'x', 1) return 1", "1", "x"]],
        &[&["EVAL", "return 3", "0"]],
        &[&["GET", "x"], &["SET", "x", "1"]],
        &[&["FCALL", "writer", "0"]],
        &[&["FCALL", "reader", "0"]],
        &[&["EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"]],
    ];
    let g = Server::start(&["--save", ""]);
    let r = RedisServer::start8();
    let mut answers = Vec::new();
    let (gconn, rconn) = (|| g.conn(), || r.conn());
    for server in [&gconn as &dyn Fn() -> redis::Connection, &rconn] {
        let mut admin = server();
        q(&mut admin, &["FUNCTION", "LOAD", library]);
        q(&mut admin, &["SCRIPT", "LOAD", "#!lua\nreturn 1"]);
        let mut clients: Vec<redis::Connection> = queues.iter().map(|_| server()).collect();
        for (c, queue) in clients.iter_mut().zip(queues) {
            q(c, &["MULTI"]);
            for args in *queue {
                q(c, args);
            }
        }
        q(&mut admin, &["REPLICAOF", "127.0.0.1", &nobody.to_string()]);
        let mut got = Vec::new();
        for (c, queue) in clients.iter_mut().zip(queues) {
            got.push(format!("{queue:?} -> {}", show(redis::cmd("EXEC").query::<Value>(c))));
        }
        q(&mut admin, &["REPLICAOF", "NO", "ONE"]);
        answers.push(got);
    }
    for (g, r) in answers[0].iter().zip(&answers[1]) {
        assert_eq!(g, r, "goblin-core against redis-server 8.2");
    }
    assert!(answers[0][0].contains("EXECABORT"), "{answers:?}");
    assert!(answers[0][1].contains("int(2)") || answers[0][1].contains("Int(2)"), "{answers:?}");
}

/// A failover between redis-servers, as Sentinel runs it: the primary's redis-server replica
/// is promoted (REPLICAOF NO ONE) and goblin-core is pointed at it (REPLICAOF). goblin-core
/// continues the same replication from the promoted server's backlog (PSYNC2: `+CONTINUE`),
/// without a second full synchronization, and follows its writes.
#[test]
fn after_a_failover_the_promoted_server_continues_the_stream() {
    // No PING into the stream during the test: both replicas must stop at the same offset.
    let a =
        RedisServer::start_with(&["--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "3600"]);
    let mut ac = a.conn();
    fill(&mut ac);
    let b = RedisServer::start_with(&["--replicaof", "127.0.0.1", &a.port.to_string()]);
    let mut bc = b.conn();
    wait_info(&mut bc, "master_link_status", "up", "the redis-server replica");
    let (_g, mut gc) = follower(a.port, &[], &[]);
    write_everything(a.conn(), &mut ac, "before");
    assert_eq!(q(&mut ac, &["WAIT", "2", "30000"]), Value::Int(2));
    wait_same(&mut ac, &mut gc, "before the failover");
    // The failover: b promoted, goblin-core pointed at it, a gone.
    q(&mut bc, &["REPLICAOF", "NO", "ONE"]);
    drop(a);
    q(&mut gc, &["REPLICAOF", "127.0.0.1", &b.port.to_string()]);
    wait_info(&mut gc, "master_link_status", "up", "following the promoted server");
    write_everything(b.conn(), &mut bc, "after");
    wait_same(&mut bc, &mut gc, "after the failover");
    assert_eq!(info_int(&mut bc, "stats", "sync_full"), 0, "the promoted server sent a file");
    assert_eq!(info_int(&mut bc, "stats", "sync_partial_ok"), 1);
    // Counted since REPLICAOF named this primary.
    assert_eq!(info_int(&mut gc, "replication", "redis_primary_full_syncs"), 0);
    assert_eq!(info_int(&mut gc, "replication", "redis_primary_partial_syncs"), 1);
}

/// The commands a replica applies from its primary count in its INFO commandstats, as on a
/// redis-server replica of the same primary (calls per command, side by side).
#[test]
fn a_replica_counts_its_primarys_commands_in_commandstats() {
    let a = RedisServer::start();
    let mut ac = a.conn();
    let b = RedisServer::start_with(&["--replicaof", "127.0.0.1", &a.port.to_string()]);
    let mut bc = b.conn();
    wait_info(&mut bc, "master_link_status", "up", "the redis-server replica");
    let (_g, mut gc) = follower(a.port, &[], &[]);
    for c in [&mut bc, &mut gc] {
        q(c, &["CONFIG", "RESETSTAT"]);
    }
    for i in 0..3 {
        q(&mut ac, &["SET", "k", &i.to_string()]);
    }
    q(&mut ac, &["RPUSH", "src", "a", "b"]);
    q(&mut ac, &["BRPOPLPUSH", "src", "dst", "0"]);
    q(&mut ac, &["INCRBYFLOAT", "f", "1.5"]);
    wait_same(&mut ac, &mut bc, "the redis-server replica");
    wait_same(&mut ac, &mut gc, "the goblin-core replica");
    let calls = |c: &mut redis::Connection, cmd: &str| {
        info_field(c, "commandstats", &format!("cmdstat_{cmd}"))
            .and_then(|l| l.split(',').next().map(str::to_string))
    };
    for cmd in ["set", "rpush", "rpoplpush", "incrbyfloat"] {
        assert_eq!(calls(&mut gc, cmd), calls(&mut bc, cmd), "{cmd}");
    }
    // Three SETs, and INCRBYFLOAT's, which the primary sends as a SET.
    assert_eq!(calls(&mut gc, "set").as_deref(), Some("calls=4"));
}

/// A goblin-core replica of a redis-server, restarted from the dump.rdb its shutdown saved
/// (`--replicaof` at startup), asks its primary to continue from where the file stands
/// (`repl-id`, `repl-offset`, `repl-stream-db`), as a redis-server replica does with its cached
/// master: a partial resynchronization, then the writes made while it was down, in the
/// database the stream was in (a key written while it was down and past its deadline since
/// ends up deleted on both).
#[test]
fn a_replica_restarted_from_its_rdb_file_continues_from_its_primary() {
    let r = RedisServer::start_with(&["--repl-diskless-sync", "no"]);
    let mut p = r.conn();
    q(&mut p, &["SELECT", "2"]);
    for i in 0..50 {
        q(&mut p, &["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    let dir = common::temp_path("replica-rdb-restart");
    std::fs::create_dir_all(&dir).unwrap();
    let primary = r.port.to_string();
    let args = ["--save", "3600 1", "--replicaof", "127.0.0.1", &primary];
    let mut g = Server::start_in(Some(&dir), &args);
    let port = g.port.to_string();
    let mut gc = g.conn();
    wait_info(&mut gc, "master_link_status", "up", "the first sync");
    // The stream is in database 2 now: what follows the restart must land there too.
    q(&mut p, &["RPUSH", "list", "a"]);
    q(&mut p, &["SET", "short", "x", "PX", "800"]);
    wait_same(&mut p, &mut gc, "before the restart");
    q(&mut p, &["SELECT", "2"]); // wait_same left the connection in database 0
    let _ = redis::cmd("SHUTDOWN").query::<()>(&mut gc);
    assert!(g.wait_exit(Duration::from_secs(20)).expect("SHUTDOWN must exit").success());
    q(&mut p, &["RPUSH", "list", "b"]);
    q(&mut p, &["SET", "while-down", "1"]);
    q(&mut p, &["APPEND", "short", "y"]);
    std::thread::sleep(Duration::from_millis(900)); // "short" is past its deadline now

    let g2 = Server::start_in(Some(&dir), &[&args[..], &["--port", &port, "--bind", "127.0.0.1"]].concat());
    let mut gc = g2.conn();
    wait_info(&mut gc, "master_link_status", "up", "the continuation");
    assert_eq!(info_int(&mut gc, "replication", "redis_primary_partial_syncs"), 1, "{}", g2.log());
    assert_eq!(info_int(&mut gc, "replication", "redis_primary_full_syncs"), 0, "{}", g2.log());
    assert_eq!(info_int(&mut p, "stats", "sync_partial_ok"), 1);
    q(&mut p, &["RPUSH", "list", "c"]);
    wait_same(&mut p, &mut gc, "after the restart");
    let held = contents(&mut gc);
    assert!(held.iter().all(|l| l.starts_with("db2 ")), "{held:?}");
    assert!(held.contains(&"db2 list list array([bulk-string('\"a\"'), bulk-string('\"b\"'), bulk-string('\"c\"')]) ttl=false".to_string()), "{held:?}");
    assert!(held.iter().any(|l| l.starts_with("db2 while-down ")), "{held:?}");
}

/// A full synchronization's RDB file goes to a file beside dump.rdb as it arrives and is
/// mapped from there (`repl-diskless-load disabled`, Redis's default: the file's bytes are
/// page cache, not heap beside the two datasets), and is gone once loaded; `swapdb` and
/// `on-empty-db` read it into memory. Both transfer forms: `$<len>` from a primary that saves
/// to disk first, and the EOF-marked stream of a diskless one.
#[test]
fn a_full_sync_spools_the_rdb_file_to_disk_unless_told_otherwise() {
    for (diskless, load) in
        [("no", "disabled"), ("yes", "disabled"), ("yes", "swapdb"), ("no", "on-empty-db")]
    {
        let r =
            RedisServer::start_with(&["--repl-diskless-sync", diskless, "--repl-diskless-sync-delay", "0"]);
        let mut p = r.conn();
        fill(&mut p);
        let dir = common::temp_path("spool");
        std::fs::create_dir_all(&dir).unwrap();
        let g = Server::start_in(Some(&dir), &["--save", ""]);
        let mut gc = g.conn();
        q(&mut gc, &["CONFIG", "SET", "repl-diskless-load", load]);
        q(&mut gc, &["REPLICAOF", "127.0.0.1", &r.port.to_string()]);
        wait_info(&mut gc, "master_link_status", "up", "the first sync");
        wait_same(&mut p, &mut gc, &format!("diskless {diskless}, load {load}"));
        let log = g.log();
        if load == "disabled" {
            assert!(log.contains("receiving the RDB file into ./.dump.rdb.tmp-"), "{log}");
        } else {
            assert!(log.contains("receiving the RDB file into memory"), "{log}");
        }
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp-"))
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}

/// A replica whose folder takes no file (here: removed under it) receives the RDB file into
/// memory instead; one whose disk fails on the way (here: the spool file is /dev/full, every
/// write ENOSPC) fails that attempt and receives it into memory from the next one on. Either
/// way the synchronization completes.
#[test]
fn a_spool_the_disk_refuses_gives_way_to_memory() {
    let r = RedisServer::start_with(&["--repl-diskless-sync", "no", "--repl-diskless-sync-delay", "0"]);
    let mut p = r.conn();
    fill(&mut p);

    let gone = common::temp_path("spool-gone");
    std::fs::create_dir_all(&gone).unwrap();
    let g = Server::start_in(Some(&gone), &["--save", ""]);
    let mut gc = g.conn();
    std::fs::remove_dir_all(&gone).unwrap();
    q(&mut gc, &["REPLICAOF", "127.0.0.1", &r.port.to_string()]);
    wait_info(&mut gc, "master_link_status", "up", "a sync without a folder");
    wait_same(&mut p, &mut gc, "received into memory");
    assert!(g.log().contains("receiving the RDB file into memory"), "{}", g.log());

    let full = common::temp_path("spool-full");
    std::fs::create_dir_all(&full).unwrap();
    let g = Server::start_in(Some(&full), &["--save", ""]);
    let mut gc = g.conn();
    std::os::unix::fs::symlink("/dev/full", full.join(format!(".dump.rdb.tmp-{}-sync", g.pid()))).unwrap();
    q(&mut gc, &["REPLICAOF", "127.0.0.1", &r.port.to_string()]);
    wait_info(&mut gc, "master_link_status", "up", "a sync after a full disk");
    wait_same(&mut p, &mut gc, "received into memory after the disk failed");
    let log = g.log();
    assert!(log.contains("No space left on device"), "{log}");
    assert!(log.contains("the next synchronizations receive it into memory"), "{log}");
}

/// The link's state as ROLE names it, as a Redis replica does: `handshake` while the PSYNC
/// waits for its answer (a primary holding it for `repl-diskless-sync-delay` answers only when
/// the file's child starts), then `connected`; the primary lists it as `wait_bgsave` meanwhile.
#[test]
fn role_shows_the_handshake_while_the_primary_holds_the_sync() {
    let p = Server::start(&["--save", ""]);
    let mut pc = p.conn();
    q(&mut pc, &["SET", "k", "v"]);
    q(&mut pc, &["CONFIG", "SET", "repl-diskless-sync-delay", "2"]);
    let g = Server::start(&["--save", ""]);
    let mut gc = g.conn();
    q(&mut gc, &["REPLICAOF", "127.0.0.1", &p.port.to_string()]);
    let state = |gc: &mut redis::Connection| match q(gc, &["ROLE"]) {
        Value::Array(a) => match &a[3] {
            Value::BulkString(s) => String::from_utf8_lossy(s).into_owned(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while state(&mut gc) != "handshake" {
        assert!(Instant::now() < deadline, "never in handshake: {}", state(&mut gc));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info_field(&mut gc, "replication", "master_link_status").as_deref(), Some("down"));
    // Connected, the replica is in its handshake before its PSYNC reaches the primary.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text: String = redis::cmd("INFO").arg("replication").query(&mut pc).unwrap();
        if text.contains("state=wait_bgsave") {
            break;
        }
        assert!(Instant::now() < deadline, "{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(state(&mut gc), "handshake");
    wait_info(&mut gc, "master_link_status", "up", "the sync after the delay");
    assert_eq!(state(&mut gc), "connected");
    assert_eq!(q(&mut gc, &["GET", "k"]), Value::BulkString(b"v".to_vec()));
}

/// `repl-timeout` lowered while the PSYNC waits for its answer applies to that attempt, as in
/// Redis: a primary that stops sending its newline keepalives (DEBUG SLEEP) is given up with
/// Redis's log line, and the next attempt goes on once it is back.
#[test]
fn a_lowered_repl_timeout_ends_a_silent_handshake() {
    let p = Server::start(&["--save", "", "--enable-debug-command", "yes"]);
    let mut pc = p.conn();
    q(&mut pc, &["SET", "k", "v"]);
    q(&mut pc, &["CONFIG", "SET", "repl-diskless-sync-delay", "1000"]);
    let g = Server::start(&["--save", ""]);
    let mut gc = g.conn();
    q(&mut gc, &["REPLICAOF", "127.0.0.1", &p.port.to_string()]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !redis::cmd("INFO")
        .arg("replication")
        .query::<String>(&mut pc)
        .unwrap()
        .contains("state=wait_bgsave")
    {
        assert!(Instant::now() < deadline, "the replica never waited for its sync");
        std::thread::sleep(Duration::from_millis(20));
    }
    q(&mut gc, &["CONFIG", "SET", "repl-timeout", "1"]);
    // The newlines keep the link alive past the timeout ...
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!g.log().contains("Timeout connecting to the MASTER"), "{}", g.log());
    // ... and without them, it ends.
    let port = p.port;
    let sleeper = std::thread::spawn(move || {
        let mut c =
            redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
        let _: () = redis::cmd("DEBUG").arg("SLEEP").arg(4).query(&mut c).unwrap();
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while !g.log().contains("Timeout connecting to the MASTER...") {
        assert!(Instant::now() < deadline, "the handshake never timed out:\n{}", g.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    sleeper.join().unwrap();
    q(&mut pc, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    wait_info(&mut gc, "master_link_status", "up", "the next attempt");
    assert_eq!(q(&mut gc, &["GET", "k"]), Value::BulkString(b"v".to_vec()));
}
