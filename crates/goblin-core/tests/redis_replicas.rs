//! A redis-server replica of goblin-core (`--replicaof`): Redis's own replication protocol
//! (PSYNC, an RDB file, then the stream of writes). The replica must hold exactly what the
//! primary holds, in every database, after a first sync and after writes of every kind
//! (transactions, scripts, expiries, blocking pops, FLUSHDB, SWAPDB); an idle link stays up
//! on its PINGs; a second replica attaches later and gets the same.

mod common;

use common::redis_repl::{info_field, info_int, q, sentinel_fields, start_sentinel, wait_same};
use common::{temp_path, RedisServer, Server};
use redis::Value;
use std::time::{Duration, Instant};

fn start_replica(primary_port: u16) -> (RedisServer, redis::Connection) {
    start_replica_with(primary_port, &[])
}

fn start_replica_with(primary_port: u16, extra: &[&str]) -> (RedisServer, redis::Connection) {
    let dir = temp_path("redis-replica");
    std::fs::create_dir_all(&dir).unwrap();
    let port = primary_port.to_string();
    let mut args =
        vec!["--dir", dir.to_str().unwrap(), "--replicaof", "127.0.0.1", &port, "--repl-timeout", "5"];
    args.extend_from_slice(extra);
    let r = RedisServer::start_with(&args);
    let mut c = r.conn();
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut c, "replication", "master_link_status").as_deref() != Some("up") {
        assert!(Instant::now() < deadline, "the replica never linked up");
        std::thread::sleep(Duration::from_millis(50));
    }
    (r, c)
}

#[test]
fn a_redis_server_replica_follows_every_write() {
    let g = Server::start(&["--save", ""]);
    let mut p = g.conn();
    // Before the replica attaches: every type, in two databases, with deadlines.
    for i in 0..200 {
        let i = i.to_string();
        q(&mut p, &["SET", &format!("s:{i}"), &i]);
        q(&mut p, &["HSET", &format!("h:{}", i.len()), &format!("f{i}"), &i]);
        q(&mut p, &["RPUSH", "list", &i]);
        q(&mut p, &["SADD", "set", &i]);
        q(&mut p, &["ZADD", "zset", &i, &format!("m{i}")]);
    }
    q(&mut p, &["XADD", "stream", "1-1", "f", "v"]);
    q(&mut p, &["SET", "ttl", "v", "EX", "1000"]);
    q(&mut p, &["SELECT", "3"]);
    q(&mut p, &["SET", "in-three", "3"]);
    q(&mut p, &["SELECT", "0"]);
    let (_r1, mut r1) = start_replica(g.port);
    wait_same(&mut p, &mut r1, "after the first sync");
    // Each attach is one full resynchronization; the rest must come by the stream, on the
    // same link (a replica that timed out and attached again would also catch up).
    let full_syncs = |p: &mut redis::Connection| info_field(p, "stats", "sync_full").unwrap();
    assert_eq!(full_syncs(&mut p), "1");

    // Writes of every kind, after it.
    q(&mut p, &["MULTI"]);
    q(&mut p, &["INCR", "counter"]);
    q(&mut p, &["LPUSH", "list", "head"]);
    q(&mut p, &["EXEC"]);
    q(
        &mut p,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 'scripted'); return redis.call('hincrby', KEYS[2], 'n', 5)",
            "2",
            "sk",
            "hk",
        ],
    );
    q(&mut p, &["SELECT", "5"]);
    q(&mut p, &["SET", "in-five", "5"]);
    q(&mut p, &["MOVE", "in-five", "6"]);
    q(&mut p, &["SELECT", "0"]);
    q(&mut p, &["SWAPDB", "3", "4"]);
    q(&mut p, &["DEL", "s:1", "s:2"]);
    q(&mut p, &["EXPIRE", "s:3", "1000"]);
    q(&mut p, &["SET", "short", "v", "PX", "50"]);
    q(&mut p, &["ZINCRBY", "zset", "2.5", "m7"]);
    q(&mut p, &["XADD", "stream", "2-1", "g", "w"]);
    q(&mut p, &["SPOP", "set"]);
    // A blocking pop served by a later push.
    let mut waiter = g.conn();
    let popper = std::thread::spawn(move || {
        let v: Vec<String> = redis::cmd("BLPOP").arg("queue").arg(10).query(&mut waiter).unwrap();
        v
    });
    std::thread::sleep(Duration::from_millis(200));
    q(&mut p, &["RPUSH", "queue", "job1", "job2"]);
    assert_eq!(popper.join().unwrap(), ["queue", "job1"]);
    std::thread::sleep(Duration::from_millis(200)); // "short" expires: a DEL follows
    q(&mut p, &["SELECT", "6"]);
    q(&mut p, &["FLUSHDB"]);
    q(&mut p, &["SELECT", "0"]);
    wait_same(&mut p, &mut r1, "after the writes");
    assert_eq!(q(&mut r1, &["EXISTS", "short"]), Value::Int(0));
    assert_eq!(full_syncs(&mut p), "1", "the writes came by a new full sync, not the stream");

    // An idle link outlives the replica's timeout (5 s) on the primary's PINGs.
    q(&mut p, &["CONFIG", "SET", "repl-ping-replica-period", "1"]);
    std::thread::sleep(Duration::from_secs(7));
    assert_eq!(info_field(&mut r1, "replication", "master_link_status").as_deref(), Some("up"));
    q(&mut p, &["SET", "after-idle", "1"]);

    // A second replica, attached now, gets the same.
    let (_r2, mut r2) = start_replica(g.port);
    wait_same(&mut p, &mut r2, "the second replica");
    wait_same(&mut p, &mut r1, "the first replica after idling");
    assert_eq!(full_syncs(&mut p), "2", "the first replica attached again");
    assert_eq!(info_field(&mut p, "replication", "connected_redis_replicas").as_deref(), Some("2"));
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut p).unwrap();
    assert_eq!(clients.lines().filter(|l| l.contains(" flags=S ")).count(), 2, "{clients}");
    let replicas: String = redis::cmd("CLIENT").arg("LIST").arg("TYPE").arg("replica").query(&mut p).unwrap();
    assert_eq!(replicas.lines().count(), 2, "{replicas}");
    // WAIT counts them once they acknowledged this client's last write.
    q(&mut p, &["SET", "waited-for", "1"]);
    assert_eq!(q(&mut p, &["WAIT", "2", "30000"]), Value::Int(2));
    // CLIENT KILL TYPE replica cuts both off; they continue from the backlog where they
    // stopped, and the writes made meanwhile reach them with the rest.
    assert_eq!(q(&mut p, &["CLIENT", "KILL", "TYPE", "replica"]), Value::Int(2));
    q(&mut p, &["SET", "after-kill", "1"]);
    q(&mut p, &["SELECT", "9"]);
    q(&mut p, &["RPUSH", "after-kill-9", "a", "b"]);
    q(&mut p, &["SELECT", "0"]);
    wait_same(&mut p, &mut r1, "the first replica after CLIENT KILL");
    wait_same(&mut p, &mut r2, "the second replica after CLIENT KILL");
    assert_eq!(full_syncs(&mut p), "2", "a replica that lost its link loaded a whole file again");
    assert_eq!(info_field(&mut p, "stats", "sync_partial_ok").as_deref(), Some("2"));
    // The replicas are read-only, and the primary still serves its clients.
    let e = redis::cmd("SET").arg("x").arg("1").query::<()>(&mut r1).unwrap_err();
    assert!(e.to_string().contains("read only replica"), "{e}");
    assert_eq!(q(&mut p, &["PING"]), Value::SimpleString("PONG".into()));
}

/// In `broker` ack mode a write reaches a redis-server replica only once Kafka holds it: with
/// the broker down, a write the primary applied (and its client still waits on) is not on the
/// replica; when the broker returns, the client gets its OK and the replica the write.
#[test]
fn in_broker_mode_a_redis_replica_gets_only_what_kafka_acknowledged() {
    use common::brokers::{Broker, Kaka};
    let (dir, port) = (temp_path("kaka-redis-replica"), common::free_port());
    let mut kaka = Some(Kaka::start_in(&dir, port));
    let uri = kaka.as_ref().unwrap().uri("redis-replica");
    let g = Server::start(&["--kafka", &uri, "--kafka-ack-mode", "broker", "--save", ""]);
    let mut p = g.conn();
    q(&mut p, &["SET", "before", "1"]);
    let (_r, mut r) = start_replica(g.port);
    wait_same(&mut p, &mut r, "after the first sync");
    q(&mut p, &["SET", "streamed", "1"]);
    wait_same(&mut p, &mut r, "a write after the sync");

    let mut k = kaka.take().unwrap();
    let _ = k.child.kill();
    let _ = k.child.wait();
    let mut writer = g.conn();
    let pending = std::thread::spawn(move || q(&mut writer, &["SET", "during", "2"]));
    // The primary applied it (its readers see it) while Kafka does not hold it yet.
    let deadline = Instant::now() + Duration::from_secs(10);
    while q(&mut p, &["EXISTS", "during"]) != Value::Int(1) {
        assert!(Instant::now() < deadline, "the write never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(q(&mut r, &["EXISTS", "during"]), Value::Int(0), "the replica got an unacknowledged write");
    assert!(!pending.is_finished(), "the client got its reply while Kafka was down");

    kaka = Some(Kaka::start_in(&dir, port));
    assert_eq!(pending.join().unwrap(), Value::Okay);
    wait_same(&mut p, &mut r, "after the broker came back");
    assert_eq!(info_field(&mut p, "stats", "sync_full").as_deref(), Some("1"), "it came by a new full sync");
    drop(kaka);
}

/// The stream's byte offsets are Redis's: a replica that lost its link continues from the
/// backlog (its offset then equals the primary's stream offset exactly, else the bytes would
/// be misread), WAIT and INFO count it by its acknowledgements, and a replica that fell
/// further behind than the backlog holds is resynchronized in full.
#[test]
fn a_replica_continues_from_the_backlog_while_it_holds_the_replicas_offset() {
    let g = Server::start(&["--save", ""]);
    let mut p = g.conn();
    q(&mut p, &["SET", "before", "1"]);
    q(&mut p, &["CONFIG", "SET", "repl-backlog-size", "16384"]);
    assert_eq!(info_int(&mut p, "replication", "repl_backlog_active"), 0);
    let (r, mut rc) = start_replica(g.port);
    wait_same(&mut p, &mut rc, "after the first sync");
    assert_eq!(info_int(&mut p, "replication", "repl_backlog_active"), 1);
    for i in 0..50 {
        q(&mut p, &["INCR", &format!("n:{}", i % 7)]);
    }
    q(&mut p, &["SELECT", "2"]);
    q(&mut p, &["HSET", "h", "f", "v"]);
    q(&mut p, &["SELECT", "0"]);
    assert_eq!(q(&mut p, &["WAIT", "1", "30000"]), Value::Int(1));
    wait_same(&mut p, &mut rc, "after the writes");
    // The replica counts the same bytes as the primary's stream.
    let stream_offset = info_int(&mut p, "replication", "redis_stream_offset");
    assert!(stream_offset > 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_int(&mut rc, "replication", "master_repl_offset") != stream_offset {
        assert!(Instant::now() < deadline, "the replica's offset never matched the stream's");
        std::thread::sleep(Duration::from_millis(50));
    }
    let replid = info_field(&mut p, "replication", "redis_stream_replid").unwrap();
    assert_eq!(info_field(&mut rc, "replication", "master_replid"), Some(replid));
    // INFO and ROLE list it at its listening port, by its logical offset.
    let master_offset = info_int(&mut p, "replication", "master_repl_offset");
    let line = info_field(&mut p, "replication", "slave0").unwrap();
    let (fields, lag) = line.rsplit_once(",lag=").unwrap();
    assert_eq!(fields, format!("ip=127.0.0.1,port={},state=online,offset={master_offset}", r.port));
    assert!(lag.parse::<u64>().unwrap() <= 2, "{line}"); // seconds since its last ACK (one a second)
    let role = q(&mut p, &["ROLE"]);
    let expected_role = Value::Array(vec![
        Value::BulkString(b"master".to_vec()),
        Value::Int(master_offset),
        Value::Array(vec![Value::Array(vec![
            Value::BulkString(b"127.0.0.1".to_vec()),
            Value::BulkString(r.port.to_string().into_bytes()),
            Value::BulkString(master_offset.to_string().into_bytes()),
        ])]),
    ]);
    assert_eq!(role, expected_role);

    // Silent (stopped): WAIT does not count it, though its link is up.
    let pid = r.pid() as i32;
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    q(&mut p, &["SET", "unseen", "1"]);
    assert_eq!(q(&mut p, &["WAIT", "1", "300"]), Value::Int(0));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert_eq!(q(&mut p, &["WAIT", "1", "30000"]), Value::Int(1));

    // Cut off, with writes while it reconnects: it continues.
    assert_eq!(q(&mut p, &["CLIENT", "KILL", "TYPE", "replica"]), Value::Int(1));
    q(&mut p, &["APPEND", "before", "+more"]);
    wait_same(&mut p, &mut rc, "after a partial resynchronization");
    assert_eq!(info_int(&mut p, "stats", "sync_partial_ok"), 1);
    assert_eq!(info_int(&mut p, "stats", "sync_full"), 1);

    // Stopped, cut off, and more than the backlog written meanwhile: a full resync.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    assert_eq!(q(&mut p, &["CLIENT", "KILL", "TYPE", "replica"]), Value::Int(1));
    let big = "x".repeat(1000);
    for i in 0..40 {
        q(&mut p, &["SET", &format!("big:{i}"), &big]);
    }
    unsafe { libc::kill(pid, libc::SIGCONT) };
    wait_same(&mut p, &mut rc, "after the backlog was overrun");
    assert_eq!(info_int(&mut p, "stats", "sync_full"), 2);
    assert_eq!(info_int(&mut p, "stats", "sync_partial_err"), 1);
    assert_eq!(info_int(&mut p, "stats", "sync_partial_ok"), 1);
    let first = info_int(&mut p, "replication", "repl_backlog_first_byte_offset");
    let histlen = info_int(&mut p, "replication", "repl_backlog_histlen");
    let offset = info_int(&mut p, "replication", "redis_stream_offset");
    assert_eq!((histlen, first + histlen - 1), (16384, offset));
}

/// A raw Redis replication stream: SYNC, the RDB file skipped (either a sized bulk or
/// redis-server's diskless `$EOF:<mark>` form, after any newline keepalives), then the commands
/// that follow, as strings.
struct RawStream {
    r: std::io::BufReader<std::net::TcpStream>,
}

impl RawStream {
    fn attach(port: u16) -> RawStream {
        use std::io::{BufRead, Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"*1\r\n$4\r\nSYNC\r\n").unwrap();
        let mut r = std::io::BufReader::new(s);
        let mut line = String::new();
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            if line != "\n" {
                break;
            }
        }
        let head = line.trim_end().strip_prefix('$').unwrap_or_else(|| panic!("SYNC answered {line:?}"));
        if let Some(mark) = head.strip_prefix("EOF:") {
            let mark = mark.as_bytes().to_vec();
            let mut tail = Vec::new();
            let mut b = [0u8; 1];
            while !tail.ends_with(&mark) {
                r.read_exact(&mut b).unwrap();
                tail.push(b[0]);
            }
        } else {
            let mut file = vec![0u8; head.parse().unwrap()];
            r.read_exact(&mut file).unwrap();
        }
        RawStream { r }
    }

    /// The next command in the stream, PINGs passed over.
    fn next(&mut self) -> Vec<String> {
        use std::io::{BufRead, Read};
        loop {
            let mut line = String::new();
            self.r.read_line(&mut line).unwrap();
            let n: usize =
                line.trim_end().strip_prefix('*').unwrap_or_else(|| panic!("{line:?}")).parse().unwrap();
            let mut cmd = Vec::new();
            for _ in 0..n {
                line.clear();
                self.r.read_line(&mut line).unwrap();
                let len: usize = line.trim_end()[1..].parse().unwrap();
                let mut arg = vec![0u8; len + 2];
                self.r.read_exact(&mut arg).unwrap();
                cmd.push(String::from_utf8_lossy(&arg[..len]).to_lowercase());
            }
            if cmd != ["ping"] {
                return cmd;
            }
        }
    }
}

/// The lazy-expiry DELs of SCAN and RANDOMKEY (commands that touch arbitrary keys) reach a
/// replica one by one, as redis-server sends them, not as a transaction; a command's own
/// writes still come as one. Both servers, the same steps.
#[test]
fn lazy_expiry_dels_of_scan_and_randomkey_are_not_a_transaction() {
    let g = Server::start(&["--save", "", "--enable-debug-command", "yes"]);
    let redis = RedisServer::start_with(&["--enable-debug-command", "yes"]);
    for (name, port) in [("goblin-core", g.port), ("redis-server", redis.port)] {
        let mut c =
            redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap().get_connection().unwrap();
        q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        for command in ["SCAN", "RANDOMKEY"] {
            q(&mut c, &["FLUSHALL"]);
            q(&mut c, &["SET", "foo1", "bar", "PX", "1"]);
            q(&mut c, &["SET", "foo2", "bar", "PX", "1"]);
            std::thread::sleep(Duration::from_millis(5));
            let mut stream = RawStream::attach(port);
            if command == "SCAN" {
                q(&mut c, &["SCAN", "0"]);
            } else {
                q(&mut c, &["RANDOMKEY"]);
            }
            let got: Vec<Vec<String>> = (0..3).map(|_| stream.next()).collect();
            assert_eq!(got[0][0], "select", "{name} {command}: {got:?}");
            let mut dels: Vec<&Vec<String>> = got[1..].iter().collect();
            dels.sort();
            assert_eq!(
                dels,
                [&vec!["del".to_string(), "foo1".into()], &vec!["del".to_string(), "foo2".into()]],
                "{name} {command}: {got:?}"
            );
            // A transaction of the client's own still comes whole.
            q(&mut c, &["MULTI"]);
            q(&mut c, &["SET", "a", "1"]);
            q(&mut c, &["SET", "b", "2"]);
            q(&mut c, &["EXEC"]);
            let got: Vec<Vec<String>> = (0..4).map(|_| stream.next()).collect();
            assert_eq!(
                got,
                [vec!["multi"], vec!["set", "a", "1"], vec!["set", "b", "2"], vec!["exec"]],
                "{name}"
            );
        }
    }
}

/// A blocked client is not woken by a key that is past its deadline when a transaction tries
/// to wake it; the attempt deletes the key, and replicas get its DEL right after the
/// transaction, before any later command (as redis-server 8.2 sends it; both servers).
#[test]
fn a_key_past_its_deadline_wakes_no_blocked_client_and_its_del_follows_the_transaction() {
    let g = Server::start(&["--save", "", "--enable-debug-command", "yes"]);
    let redis = RedisServer::start8_with(&["--enable-debug-command", "yes"]);
    let mut streams = Vec::new();
    for port in [g.port, redis.port] {
        let open =
            || redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap().get_connection().unwrap();
        let (mut c, mut blocked) = (open(), open());
        q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        q(&mut c, &["FLUSHALL"]);
        let mut stream = RawStream::attach(port);
        let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut blocked).unwrap();
        let waiter = std::thread::spawn(move || -> Value {
            // Unblocked by CLIENT UNBLOCK: a nil.
            redis::cmd("BRPOP").arg("k").arg(0).query(&mut blocked).unwrap()
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while info_int(&mut c, "clients", "blocked_clients") != 1 {
            assert!(Instant::now() < deadline, "the BRPOP never blocked");
            std::thread::sleep(Duration::from_millis(5));
        }
        // The key is pushed and has expired by the time EXEC tries to wake the client.
        redis::pipe()
            .atomic()
            .cmd("RPUSH")
            .arg("k")
            .arg("hello")
            .cmd("PEXPIRE")
            .arg("k")
            .arg(100)
            .cmd("DEBUG")
            .arg("SLEEP")
            .arg("0.2")
            .query::<Value>(&mut c)
            .unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let list: String = redis::cmd("CLIENT").arg("LIST").arg("ID").arg(id).query(&mut c).unwrap();
        assert!(list.contains("flags=b"), "{port}: still blocked: {list}");
        q(&mut c, &["CLIENT", "UNBLOCK", &id.to_string()]);
        assert_eq!(waiter.join().unwrap(), Value::Nil, "{port}");
        // Another write, then the key is touched: it is gone already.
        q(&mut c, &["SET", "before", "1"]);
        let exists: i64 = redis::cmd("EXISTS").arg("k").query(&mut c).unwrap();
        assert_eq!(exists, 0, "{port}");
        q(&mut c, &["SET", "after", "1"]);
        // (Redis puts its SELECT inside the MULTI, goblin-core before it: both select 0.)
        let mut got: Vec<Vec<String>> =
            (0..8).map(|_| stream.next()).filter(|c| c.as_slice() != ["select", "0"]).collect();
        // The deadline's instant differs between the servers.
        got[2][2] = "<t>".into();
        streams.push(got);
    }
    assert_eq!(streams[0], streams[1], "goblin-core, then redis-server 8.2");
    assert_eq!(
        streams[0][3..],
        [vec!["exec"], vec!["del", "k"], vec!["set", "before", "1"], vec!["set", "after", "1"]]
    );
}

/// A SWAPDB that brings a blocked client's key back already past its deadline wakes nobody
/// and deletes nothing: the key goes (and its DEL to the replicas) when it is next touched,
/// after the blocked client's own later write (as redis-server 8.2 does; both servers).
#[test]
fn a_swapdb_bringing_back_an_expired_key_leaves_it_until_it_is_touched() {
    let g = Server::start(&["--save", "", "--enable-debug-command", "yes"]);
    let redis = RedisServer::start8_with(&["--enable-debug-command", "yes"]);
    let mut streams = Vec::new();
    for port in [g.port, redis.port] {
        let open = |db: u32| {
            redis::Client::open(format!("redis://127.0.0.1:{port}/{db}")).unwrap().get_connection().unwrap()
        };
        let (mut c, mut blocked) = (open(1), open(9));
        q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        q(&mut c, &["FLUSHALL"]);
        let mut stream = RawStream::attach(port);
        q(&mut c, &["RPUSH", "k", "hello"]);
        q(&mut c, &["PEXPIRE", "k", "100"]);
        let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut blocked).unwrap();
        let waiter = std::thread::spawn(move || {
            // Unblocked by CLIENT UNBLOCK: a nil.
            let v: Value = redis::cmd("BRPOP").arg("k").arg(0).query(&mut blocked).unwrap();
            (v, blocked)
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while info_int(&mut c, "clients", "blocked_clients") != 1 {
            assert!(Instant::now() < deadline, "the BRPOP never blocked");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(150));
        q(&mut c, &["SWAPDB", "1", "9"]);
        std::thread::sleep(Duration::from_millis(50));
        let list: String = redis::cmd("CLIENT").arg("LIST").arg("ID").arg(id).query(&mut c).unwrap();
        assert!(list.contains("flags=b"), "{port}: still blocked: {list}");
        q(&mut c, &["CLIENT", "UNBLOCK", &id.to_string()]);
        let (v, mut blocked) = waiter.join().unwrap();
        assert_eq!(v, Value::Nil, "{port}");
        q(&mut blocked, &["SET", "somekey1", "someval1"]);
        let exists: i64 = redis::cmd("EXISTS").arg("k").query(&mut blocked).unwrap();
        assert_eq!(exists, 0, "{port}");
        q(&mut c, &["SET", "somekey2", "someval2"]);
        let mut got: Vec<Vec<String>> = (0..9).map(|_| stream.next()).collect();
        // The deadline's instant differs between the servers.
        got[2][2] = "<t>".into();
        streams.push(got);
    }
    assert_eq!(streams[0], streams[1], "goblin-core, then redis-server 8.2");
    assert_eq!(
        streams[0][3..],
        [
            vec!["swapdb", "1", "9"],
            vec!["select", "9"],
            vec!["set", "somekey1", "someval1"],
            vec!["del", "k"],
            vec!["select", "1"],
            vec!["set", "somekey2", "someval2"],
        ]
    );
}

/// min-replicas-to-write counts a redis-server replica by its REPLCONF ACKs (one a second):
/// writes go through while it acknowledges, are refused (NOREPLICAS) once it has been silent
/// for longer than the lag, and go through again when it resumes. INFO lists it at the
/// address it announces.
#[test]
fn min_replicas_to_write_counts_a_redis_replica_while_it_acknowledges() {
    let g = Server::start(&["--save", "", "--min-replicas-to-write", "1", "--min-replicas-max-lag", "2"]);
    let mut p = g.conn();
    let set = |c: &mut redis::Connection, v: &str| redis::cmd("SET").arg("k").arg(v).query::<()>(c);
    let e = set(&mut p, "0").unwrap_err();
    assert_eq!(e.code(), Some("NOREPLICAS"), "{e}");
    // It announces another address and port: INFO shows those (REPLCONF ip-address).
    let (r, mut rc) =
        start_replica_with(g.port, &["--replica-announce-ip", "10.9.8.7", "--replica-announce-port", "7000"]);
    let line = info_field(&mut p, "replication", "slave0").unwrap();
    assert!(line.starts_with("ip=10.9.8.7,port=7000,"), "{line}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while set(&mut p, "1").is_err() {
        assert!(Instant::now() < deadline, "the replica was never counted");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(4));
    set(&mut p, "2").unwrap();
    let pid = r.pid() as i32;
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_secs(4));
    let e = set(&mut p, "3").unwrap_err();
    assert_eq!(info_int(&mut p, "replication", "min_slaves_good_slaves"), 0);
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert_eq!(e.code(), Some("NOREPLICAS"), "{e}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while set(&mut p, "4").is_err() {
        assert!(Instant::now() < deadline, "the replica was never counted again");
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_same(&mut p, &mut rc, "after the refused write");
    assert_eq!(q(&mut rc, &["GET", "k"]), Value::BulkString(b"4".to_vec()));
}

/// Redis Sentinel (redis-server 7.0.15 in sentinel mode) monitors a goblin-core primary: it
/// sees a master that answers, discovers its redis-server replica from INFO's `slaveN` lines,
/// finds the link up, and names goblin-core as the master. When goblin-core dies it promotes
/// the replica, which holds every write; when goblin-core comes back, Sentinel makes it a
/// replica of the promoted server (Sentinel promoting a goblin-core replica of a Redis
/// primary: tests/redis_primary.rs).
#[test]
fn sentinel_monitors_goblin_core_and_fails_over_to_its_redis_replica() {
    let g = Server::start(&["--save", ""]);
    let mut p = g.conn();
    for i in 0..100 {
        q(&mut p, &["SET", &format!("k{i}"), &i.to_string()]);
    }
    let (r, mut rc) = start_replica(g.port);
    wait_same(&mut p, &mut rc, "before the sentinel");
    let s = start_sentinel(g.port);
    let mut sc =
        redis::Client::open(format!("redis://127.0.0.1:{}", s.port)).unwrap().get_connection().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let master = sentinel_fields(&q(&mut sc, &["SENTINEL", "MASTER", "mymaster"]));
        let replicas = q(&mut sc, &["SENTINEL", "REPLICAS", "mymaster"]);
        let Value::Array(list) = &replicas else { panic!("{replicas:?}") };
        let replica = list.first().map(sentinel_fields);
        let seen = master["flags"] == "master"
            && master["role-reported"] == "master"
            && master["num-slaves"] == "1"
            && replica.as_ref().is_some_and(|r| r["flags"] == "slave" && r["master-link-status"] == "ok");
        if seen {
            assert_eq!(replica.unwrap()["port"], r.port.to_string());
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sentinel never saw the master and its replica: {master:?} {replica:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let addr = q(&mut sc, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]);
    assert_eq!(
        addr,
        Value::Array(vec![
            Value::BulkString(b"127.0.0.1".to_vec()),
            Value::BulkString(g.port.to_string().into_bytes())
        ])
    );
    assert_eq!(
        q(&mut sc, &["SENTINEL", "CKQUORUM", "mymaster"]),
        Value::SimpleString("OK 1 usable Sentinels. Quorum and failover authorization can be reached".into())
    );

    // The primary dies: the replica is promoted, with every write.
    q(&mut p, &["SET", "last", "1"]);
    assert_eq!(q(&mut p, &["WAIT", "1", "30000"]), Value::Int(1));
    g.signal(9);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let addr = q(&mut sc, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]);
        if addr
            == Value::Array(vec![
                Value::BulkString(b"127.0.0.1".to_vec()),
                Value::BulkString(r.port.to_string().into_bytes()),
            ])
        {
            break;
        }
        assert!(Instant::now() < deadline, "no failover: {addr:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Sentinel closed the promoted server's clients (CLIENT KILL TYPE normal): a new one.
    let mut rc = r.conn();
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut rc, "replication", "role").as_deref() != Some("master") {
        assert!(Instant::now() < deadline, "the replica was not promoted");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(q(&mut rc, &["DBSIZE"]), Value::Int(101));
    assert_eq!(q(&mut rc, &["GET", "last"]), Value::BulkString(b"1".to_vec()));

    // The old primary comes back on its port: Sentinel makes it a replica of the promoted one
    // (REPLICAOF, Redis's protocol: tests/redis_primary.rs), and it gets every write made
    // meanwhile. The failover went both ways.
    q(&mut rc, &["SET", "after-failover", "1"]);
    let back = Server::start(&["--save", "", "--port", &g.port.to_string()]);
    let deadline = Instant::now() + Duration::from_secs(90);
    // A new connection each time: Sentinel closes the clients when it reconfigures a server.
    let replica_of_promoted = || {
        let text: String = redis::cmd("INFO").arg("replication").query(&mut back.conn()).unwrap_or_default();
        text.contains("master_link_status:up") && text.contains(&format!("master_port:{}\r\n", r.port))
    };
    while !replica_of_promoted() {
        assert!(Instant::now() < deadline, "Sentinel never made the old primary a replica");
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut bc = back.conn();
    wait_same(&mut rc, &mut bc, "the old primary, now a replica of the promoted one");
    assert_eq!(q(&mut bc, &["GET", "after-failover"]), Value::BulkString(b"1".to_vec()));
}

/// An exit waits (up to `shutdown-timeout`) until the redis-server replicas acknowledged the
/// whole stream, as Redis 7 does: a replica that is stopped while 20 MB of writes wait for it
/// still gets every one when SIGTERM comes first, and the server exits once it has; a replica
/// promoted after the shutdown (Sentinel) then holds every write. SHUTDOWN NOW does not wait.
#[test]
fn an_exit_waits_for_the_replicas_to_acknowledge_the_stream() {
    for now in [false, true] {
        let mut g = Server::start(&["--save", ""]);
        let mut p = g.conn();
        q(&mut p, &["SET", "first", "1"]);
        let (r, mut rc) = start_replica(g.port);
        wait_same(&mut p, &mut rc, "before the stop");
        let pid = r.pid() as i32;
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        let value = "v".repeat(100_000);
        for i in 0..200 {
            q(&mut p, &["SET", &format!("big:{i}"), &value]);
        }
        if now {
            let _ = redis::cmd("SHUTDOWN").arg("NOW").query::<()>(&mut p);
            assert!(g.wait_exit(Duration::from_secs(5)).is_some(), "SHUTDOWN NOW waited for the replica");
            unsafe { libc::kill(pid, libc::SIGCONT) };
            std::thread::sleep(Duration::from_millis(500));
            let keys = q(&mut rc, &["DBSIZE"]);
            assert!(keys != Value::Int(201), "the stopped replica got everything without a wait: {keys:?}");
            continue;
        }
        g.signal(libc::SIGTERM);
        assert!(
            g.wait_exit(Duration::from_millis(1500)).is_none(),
            "it exited without waiting for the replica"
        );
        unsafe { libc::kill(pid, libc::SIGCONT) };
        let status = g.wait_exit(Duration::from_secs(20)).expect("it never exited");
        assert!(status.success(), "{status:?}");
        assert_eq!(q(&mut rc, &["DBSIZE"]), Value::Int(201));
    }
}

/// While the exit waits for a stopped replica, the server goes on serving, as Redis 7 does:
/// reads and INFO answer (`shutdown_in_milliseconds` counts down; the replica is no client in
/// `connected_clients`, and the client waiting in SHUTDOWN is a blocked one), writes are held;
/// SHUTDOWN ABORT cancels the wait: the held write runs, the waiting SHUTDOWN gets Redis's
/// error. A second SIGTERM then waits again, the replica is resumed, and the server exits
/// with the replica holding every write.
#[test]
fn a_shutdown_waiting_for_replicas_serves_reads_and_can_be_aborted() {
    let mut g = Server::start(&["--save", ""]);
    let mut p = g.conn();
    q(&mut p, &["SET", "k", "1"]);
    let (r, mut rc) = start_replica(g.port);
    wait_same(&mut p, &mut rc, "before the stop");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !info_field(&mut p, "replication", "slave0").is_some_and(|s| s.contains("state=online")) {
        assert!(Instant::now() < deadline, "the replica never came online");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = r.pid() as i32;
    // SAFETY: signalling the replica we started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    q(&mut p, &["INCR", "k"]);
    let mut waiting = g.raw();
    common::send(&mut waiting, b"SHUTDOWN\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    let ms = loop {
        if let Some(ms) = info_field(&mut p, "server", "shutdown_in_milliseconds") {
            break ms.parse::<u64>().unwrap();
        }
        assert!(Instant::now() < deadline, "no shutdown under way");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(ms > 0 && ms <= 10_000, "{ms}");
    assert_eq!(info_field(&mut p, "clients", "connected_clients").as_deref(), Some("2"));
    assert_eq!(info_field(&mut p, "clients", "blocked_clients").as_deref(), Some("1"));
    assert_eq!(q(&mut p, &["GET", "k"]), Value::BulkString(b"2".to_vec()));
    // A write waits.
    let mut writer = g.raw();
    writer.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    common::send(&mut writer, b"SET k 3\r\n");
    let mut buf = [0u8; 64];
    assert!(std::io::Read::read(&mut writer, &mut buf).is_err(), "the write was answered during the wait");
    assert_eq!(q(&mut p, &["SHUTDOWN", "ABORT"]), Value::Okay);
    writer.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(common::read_reply(&mut writer), b"+OK\r\n");
    assert_eq!(common::read_reply(&mut waiting), b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n");
    let e = redis::cmd("SHUTDOWN").arg("ABORT").query::<()>(&mut p).unwrap_err();
    assert!(e.to_string().contains("No shutdown in progress."), "{e}");
    // Again, and this time the replica comes back: every write reaches it before the exit.
    g.signal(libc::SIGTERM);
    assert!(g.wait_exit(Duration::from_millis(1000)).is_none(), "it exited without waiting");
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let status = g.wait_exit(Duration::from_secs(20)).expect("it never exited");
    assert!(status.success(), "{status:?}");
    assert_eq!(q(&mut rc, &["GET", "k"]), Value::BulkString(b"3".to_vec()));
    assert!(g.log().contains("1 of 1 replicas are in sync when shutting down."), "{}", g.log());
    assert!(g.log().contains("Shutdown manually aborted."), "{}", g.log());
}

/// Waits until the redis-server replica's link to its primary is up again.
fn wait_link_up(rc: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(rc, "replication", "master_link_status").as_deref() != Some("up") {
        assert!(Instant::now() < deadline, "the replica never linked up again");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A primary restarted from the dump.rdb its shutdown saved goes on with the replication
/// stream where the file says it stood (`repl-id`, `repl-offset`), under a new ID with the old
/// one kept as the second, as a restarted redis-server does: its redis-server replica
/// continues with a partial resynchronization instead of loading the whole dataset again.
/// A key whose deadline passed while the primary was down is left out of the load and goes
/// to the replica as a DEL, so both hold the same keys.
#[test]
fn a_primary_restarted_from_its_rdb_file_lets_its_replica_continue() {
    let dir = temp_path("rdb-restart-psync");
    std::fs::create_dir_all(&dir).unwrap();
    let mut g = Server::start_in(Some(&dir), &["--save", "3600 1"]);
    let port = g.port.to_string();
    let mut p = g.conn();
    let (_r, mut rc) = start_replica(g.port);
    for i in 0..100 {
        q(&mut p, &["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    q(&mut p, &["INCRBY", "counter", "7"]);
    q(&mut p, &["HSET", "h", "f", "1", "g", "2"]);
    q(&mut p, &["SET", "soon", "x", "PX", "400"]);
    q(&mut p, &["SELECT", "3"]);
    q(&mut p, &["RPUSH", "l", "a", "b"]);
    q(&mut p, &["SELECT", "0"]);
    wait_same(&mut p, &mut rc, "before the restart");
    let before = info_field(&mut p, "replication", "redis_stream_replid").unwrap();
    let _ = redis::cmd("SHUTDOWN").query::<()>(&mut p);
    assert!(g.wait_exit(Duration::from_secs(20)).expect("SHUTDOWN must exit").success());
    std::thread::sleep(Duration::from_millis(500)); // "soon" is past its deadline now

    let g2 = Server::start_in(Some(&dir), &["--save", "3600 1", "--port", &port, "--bind", "127.0.0.1"]);
    let mut p = g2.conn();
    wait_link_up(&mut rc);
    assert_eq!(info_int(&mut p, "stats", "sync_partial_ok"), 1, "{}", g2.log());
    assert_eq!(info_int(&mut p, "stats", "sync_full"), 0, "the replica loaded a file again: {}", g2.log());
    let after = info_field(&mut p, "replication", "redis_stream_replid").unwrap();
    assert_ne!(after, before, "a restarted primary's stream has a new ID");
    assert!(g2.log().contains("1 expired key(s) sent as DEL"), "{}", g2.log());
    q(&mut p, &["SET", "after", "1"]);
    q(&mut p, &["INCR", "counter"]);
    wait_same(&mut p, &mut rc, "after the restart");
    // The replica deleted the expired key (not only hides it): its key count is the primary's.
    assert_eq!(q(&mut rc, &["DBSIZE"]), q(&mut p, &["DBSIZE"]));
    assert_eq!(q(&mut rc, &["GET", "counter"]), Value::BulkString(b"8".to_vec()));
}

/// A file older than the stream's end (a SAVE, then writes, then an exit that saves nothing)
/// restarts the primary behind its replica: the replica must not continue from an offset the
/// primary's data does not reach. It gets a full resynchronization and holds what the primary
/// holds.
#[test]
fn a_replica_ahead_of_the_restarted_primarys_file_resynchronizes_in_full() {
    let dir = temp_path("rdb-restart-behind");
    std::fs::create_dir_all(&dir).unwrap();
    let mut g = Server::start_in(Some(&dir), &["--save", ""]);
    let port = g.port.to_string();
    let mut p = g.conn();
    let (_r, mut rc) = start_replica(g.port);
    q(&mut p, &["SET", "saved", "1"]);
    q(&mut p, &["SAVE"]);
    q(&mut p, &["SET", "lost", "1"]);
    wait_same(&mut p, &mut rc, "before the restart");
    let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut p);
    assert!(g.wait_exit(Duration::from_secs(20)).expect("SHUTDOWN must exit").success());

    let g2 = Server::start_in(Some(&dir), &["--save", "", "--port", &port, "--bind", "127.0.0.1"]);
    let mut p = g2.conn();
    wait_link_up(&mut rc);
    assert_eq!(info_int(&mut p, "stats", "sync_full"), 1, "{}", g2.log());
    assert_eq!(info_int(&mut p, "stats", "sync_partial_ok"), 0);
    wait_same(&mut p, &mut rc, "after the restart");
    assert_eq!(q(&mut rc, &["EXISTS", "lost"]), Value::Int(0));
    assert_eq!(q(&mut rc, &["GET", "saved"]), Value::BulkString(b"1".to_vec()));
}

/// DEBUG RELOAD NOSAVE replaces the data without a write: a redis-server replica that was
/// away meanwhile (restarted from its own file, which names the stream it followed) must not
/// continue that stream, and gets a full resynchronization holding what the primary holds.
#[test]
fn a_replica_away_during_a_reload_nosave_resynchronizes_in_full() {
    let dir = temp_path("reload-nosave-primary");
    std::fs::create_dir_all(&dir).unwrap();
    let g = Server::start_in(Some(&dir), &["--save", "", "--enable-debug-command", "yes"]);
    let mut p = g.conn();
    q(&mut p, &["SET", "in-file", "1"]);
    q(&mut p, &["SAVE"]);
    q(&mut p, &["SET", "after-file", "1"]);
    let rdir = temp_path("reload-nosave-replica");
    std::fs::create_dir_all(&rdir).unwrap();
    let port = g.port.to_string();
    let rargs = ["--dir", rdir.to_str().unwrap(), "--replicaof", "127.0.0.1", &port, "--repl-timeout", "5"];
    let r = RedisServer::start_with(&rargs);
    let mut rc = r.conn();
    wait_link_up(&mut rc);
    wait_same(&mut p, &mut rc, "before the reload");
    // The replica leaves with its file (which names the stream and its offset)...
    let _ = redis::cmd("SHUTDOWN").arg("SAVE").query::<()>(&mut rc);
    drop(r);
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_int(&mut p, "replication", "connected_redis_replicas") != 0 {
        assert!(Instant::now() < deadline, "the primary never saw its replica leave");
        std::thread::sleep(Duration::from_millis(20));
    }
    // ... the primary's data goes back to its file without a write ...
    q(&mut p, &["DEBUG", "RELOAD", "NOSAVE"]);
    assert_eq!(q(&mut p, &["EXISTS", "after-file"]), Value::Int(0));
    // ... and the replica, back, asks to continue: it is given the whole dataset instead.
    let r = RedisServer::start_with(&rargs);
    let mut rc = r.conn();
    wait_link_up(&mut rc);
    assert_eq!(info_int(&mut p, "stats", "sync_partial_ok"), 0, "{}", g.log());
    assert_eq!(info_int(&mut p, "stats", "sync_full"), 2, "{}", g.log());
    wait_same(&mut p, &mut rc, "after the reload");
    assert_eq!(q(&mut rc, &["EXISTS", "after-file"]), Value::Int(0));
}

/// INFO's `connected_clients` leaves the redis-server replicas out, as Redis's does. A replica
/// that leaves is gone from both counts at once: the list the replicas are counted from was
/// cleaned only by the next write or the cron, so for up to 100 ms `connected_clients` read one
/// too low (the closed replica subtracted from a count it had already left).
#[test]
fn a_replica_that_leaves_leaves_connected_clients_right() {
    let g = Server::start(&["--save", ""]);
    let mut p = g.conn();
    let (_r, mut rc) = start_replica(g.port);
    q(&mut p, &["SET", "k", "v"]);
    wait_same(&mut p, &mut rc, "attached");
    assert_eq!(info_int(&mut p, "clients", "connected_clients"), 1);
    assert_eq!(info_int(&mut p, "replication", "connected_slaves"), 1);
    q(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // One INFO, so that both fields describe the same moment.
        let info: String = redis::cmd("INFO").query(&mut p).unwrap();
        let field = |name: &str| -> i64 {
            let line = info.lines().find(|l| l.starts_with(&format!("{name}:"))).expect(name);
            line[name.len() + 1..].trim().parse().unwrap()
        };
        if field("connected_slaves") == 0 {
            assert_eq!(field("connected_clients"), 1, "the replica's leaving counted twice");
            break;
        }
        assert!(Instant::now() < deadline, "the replica never left");
    }
}

/// One SYNC on a raw connection after `REPLCONF rdb-only 1` (and `capa eof` when `eof`):
/// the line that announces the file, and every byte after it to the end of the connection.
fn fetch_raw_rdb(port: u16, eof: bool) -> (String, Vec<u8>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    let mut ask = |w: &mut std::net::TcpStream, r: &mut BufReader<std::net::TcpStream>, cmd: &str| {
        w.write_all(cmd.as_bytes()).unwrap();
        line.clear();
        r.read_line(&mut line).unwrap();
        line.clone()
    };
    if eof {
        assert_eq!(ask(&mut w, &mut r, "REPLCONF capa eof\r\n"), "+OK\r\n");
    }
    assert_eq!(ask(&mut w, &mut r, "REPLCONF rdb-only 1\r\n"), "+OK\r\n");
    let head = ask(&mut w, &mut r, "SYNC\r\n");
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).unwrap();
    (head.trim_end().to_string(), rest)
}

/// SYNC writes the file in one pass, EOF-marked (`$EOF:<40 characters>`, the file, the same
/// 40 characters), to a reader that announced `REPLCONF capa eof` (every redis-server replica,
/// redis-cli): its length first would need a counting pass over the whole dataset. A reader
/// without the capability, or `repl-diskless-sync no` (Redis's disk-based form), gets the
/// length first. Either way the bytes the forked child sent are the primary's replication
/// output (`total_net_repl_output_bytes`).
#[test]
fn sync_sends_the_file_eof_marked_to_readers_that_take_it() {
    let g = Server::start(&["--save", ""]);
    let mut c = g.conn();
    for i in 0..2000 {
        q(&mut c, &["SET", &format!("key:{i}"), &"v".repeat(100)]);
    }
    for (capa, diskless, eof_marked) in [(true, "yes", true), (false, "yes", false), (true, "no", false)] {
        q(&mut c, &["CONFIG", "SET", "repl-diskless-sync", diskless]);
        let sent_before = info_int(&mut c, "stats", "total_net_repl_output_bytes");
        let (head, body) = fetch_raw_rdb(g.port, capa);
        let file = if eof_marked {
            let mark =
                head.strip_prefix("$EOF:").unwrap_or_else(|| panic!("{head} (capa {capa}, {diskless})"));
            assert_eq!(mark.len(), 40, "{head}");
            assert!(
                body.len() > 40 && body.ends_with(mark.as_bytes()),
                "the file does not end with its mark"
            );
            body[..body.len() - 40].to_vec()
        } else {
            let len: usize = head.strip_prefix('$').and_then(|n| n.parse().ok()).unwrap_or_else(|| {
                panic!("{head} (capa {capa}, {diskless})");
            });
            assert_eq!(body.len(), len, "exactly the announced length, nothing after it");
            body.clone()
        };
        // An RDB file: magic and version, every key, the EOF opcode and an 8-byte checksum.
        assert!(file.starts_with(b"REDIS0"), "{:?}", &file[..16.min(file.len())]);
        assert_eq!(file[file.len() - 9], 0xFF);
        assert!(file.len() > 2000 * 8, "every key name is in it: {} bytes", file.len());
        // Everything the child sent (the line, the file and its mark) is counted, once it is
        // reaped (by the cron, within 100 ms).
        let want = (head.len() + 2 + body.len()) as i64;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let sent = info_int(&mut c, "stats", "total_net_repl_output_bytes") - sent_before;
            if sent >= want {
                assert_eq!(sent, want);
                break;
            }
            assert!(Instant::now() < deadline, "{sent} bytes counted of the {want} sent");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A raw connection that sent `REPLCONF capa eof`, `REPLCONF rdb-only 1` and SYNC, its `+OK`s
/// read: what follows is the file (or newlines while it waits).
fn raw_sync(port: u16) -> std::io::BufReader<std::net::TcpStream> {
    use std::io::{BufRead, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"REPLCONF capa eof\r\nREPLCONF rdb-only 1\r\nSYNC\r\n").unwrap();
    let mut r = std::io::BufReader::new(s);
    for _ in 0..2 {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert_eq!(line, "+OK\r\n");
    }
    r
}

/// `repl-diskless-sync-delay`: full synchronizations that start within the delay share one
/// forked child, as in Redis; meanwhile INFO lists the replicas as `state=wait_bgsave` and
/// each gets a newline a second (its link stays alive). `repl-diskless-sync-max-replicas`
/// starts it as soon as that many wait: the readers then get the very same bytes, mark
/// included, from the one child.
#[test]
fn synchronizations_within_the_delay_share_one_child() {
    use std::io::{BufRead, Read};
    let g = Server::start(&["--save", ""]);
    let mut c = g.conn();
    for i in 0..1000 {
        q(&mut c, &["SET", &format!("key:{i}"), &i.to_string()]);
    }
    q(&mut c, &["CONFIG", "SET", "repl-diskless-sync-delay", "3"]);
    let forks = info_int(&mut c, "stats", "total_forks");
    let port = g.port.to_string();
    let replicas: Vec<RedisServer> = (0..2)
        .map(|_| {
            let dir = temp_path("redis-replica");
            std::fs::create_dir_all(&dir).unwrap();
            RedisServer::start_with(&["--dir", dir.to_str().unwrap(), "--replicaof", "127.0.0.1", &port])
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text: String = redis::cmd("INFO").arg("replication").query(&mut c).unwrap();
        if text.matches("state=wait_bgsave").count() == 2 {
            assert!(text.contains("connected_slaves:2"), "{text}");
            break;
        }
        assert!(Instant::now() < deadline, "the replicas were never listed as waiting: {text}");
        std::thread::sleep(Duration::from_millis(50));
    }
    for r in &replicas {
        let mut rc = r.conn();
        let deadline = Instant::now() + Duration::from_secs(30);
        while info_field(&mut rc, "replication", "master_link_status").as_deref() != Some("up") {
            assert!(Instant::now() < deadline, "a replica never linked up");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(q(&mut rc, &["DBSIZE"]), Value::Int(1000));
    }
    assert_eq!(info_int(&mut c, "stats", "total_forks"), forks + 1, "one child for both replicas");
    q(&mut c, &["SET", "after", "sync"]);
    for r in &replicas {
        let mut rc = r.conn();
        let deadline = Instant::now() + Duration::from_secs(10);
        while q(&mut rc, &["GET", "after"]) != Value::BulkString(b"sync".to_vec()) {
            assert!(Instant::now() < deadline, "a replica did not follow the stream");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    drop(replicas);

    // A delay nobody waits out: two waiting readers start the synchronization.
    q(&mut c, &["CONFIG", "SET", "repl-diskless-sync-delay", "1000", "repl-diskless-sync-max-replicas", "2"]);
    let forks = info_int(&mut c, "stats", "total_forks");
    let mut first = raw_sync(g.port);
    let mut byte = [0u8; 1];
    first.read_exact(&mut byte).unwrap();
    assert_eq!(&byte, b"\n", "a waiting reader gets newlines");
    assert_eq!(info_int(&mut c, "stats", "total_forks"), forks, "one reader waits");
    let mut second = raw_sync(g.port);
    let files: Vec<(String, Vec<u8>)> = [&mut first, &mut second]
        .into_iter()
        .map(|r| {
            let mut head = String::new();
            while head.trim().is_empty() {
                head.clear();
                r.read_line(&mut head).unwrap();
            }
            let mut body = Vec::new();
            r.read_to_end(&mut body).unwrap();
            (head, body)
        })
        .collect();
    assert!(files[0].0.starts_with("$EOF:"), "{}", files[0].0);
    assert_eq!(files[0], files[1], "the same bytes from the same child");
    assert_eq!(info_int(&mut c, "stats", "total_forks"), forks + 1);
}

/// One reader of a shared full synchronization leaves in the middle of the file: the child
/// drops it and goes on, and the other reader gets the whole file.
#[test]
fn a_reader_that_leaves_a_shared_synchronization_does_not_stop_the_others() {
    use std::io::{BufRead, Read};
    let g = Server::start(&["--save", "", "--enable-debug-command", "yes"]);
    let mut c = g.conn();
    // Enough for the file to outlast the sockets' buffers: the child is still writing when
    // the first reader's connection goes.
    q(&mut c, &["CONFIG", "SET", "rdbcompression", "no"]);
    q(&mut c, &["DEBUG", "POPULATE", "200000", "key", "100"]);
    q(&mut c, &["CONFIG", "SET", "repl-diskless-sync-delay", "1000", "repl-diskless-sync-max-replicas", "2"]);
    let mut leaving = raw_sync(g.port);
    let mut staying = raw_sync(g.port);
    let mut head = String::new();
    while !head.starts_with('$') {
        head.clear();
        leaving.read_line(&mut head).unwrap();
    }
    let mut some = vec![0u8; 4096];
    leaving.read_exact(&mut some).unwrap();
    drop(leaving);
    let mut head = String::new();
    while !head.starts_with('$') {
        head.clear();
        staying.read_line(&mut head).unwrap();
    }
    let mark = head.trim_end().strip_prefix("$EOF:").expect("EOF-marked").to_string();
    let mut body = Vec::new();
    staying.read_to_end(&mut body).unwrap();
    assert!(body.ends_with(mark.as_bytes()), "the whole file and its mark");
    assert!(body.len() > 200_000 * 100, "{} bytes", body.len());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !g.log().contains("it stopped reading or left") {
        assert!(Instant::now() < deadline, "the dropped reader was not reported:\n{}", g.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}
