//! Keyspace notifications against the real binary, compared message for message with
//! redis-server 7.0.15: the same command session on both, every `__keyspace@0__` /
//! `__keyevent@0__` message a pattern subscriber receives, in order.

mod common;

use common::{read_reply, send, RedisServer, Server};
use std::net::TcpStream;

fn req(args: &[&str]) -> Vec<u8> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let mut out = Vec::new();
    resp::reply::bulk_array(&mut out, &args);
    out
}

fn call(s: &mut TcpStream, args: &[&str]) -> Vec<u8> {
    send(s, &req(args));
    read_reply(s)
}

/// Parses a RESP2 pmessage/message array into its bulk strings.
fn bulks(reply: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(reply);
    let mut lines = text.split("\r\n");
    let mut out = Vec::new();
    while let Some(l) = lines.next() {
        if l.starts_with('$') {
            out.push(lines.next().unwrap_or_default().to_string());
        }
    }
    out
}

/// Runs `session` on a server at `raw` with `flags`, and returns (channel, message) of every
/// notification a `__key*` pattern subscriber got, up to a marker published at the end.
fn notifications(raw: impl Fn() -> TcpStream, flags: &str, session: &[Vec<&str>]) -> Vec<(String, String)> {
    let mut admin = raw();
    assert_eq!(call(&mut admin, &["CONFIG", "SET", "notify-keyspace-events", flags]), b"+OK\r\n");
    let mut sub = raw();
    call(&mut sub, &["PSUBSCRIBE", "__key*"]);
    call(&mut sub, &["SUBSCRIBE", "marker"]);
    let mut c = raw();
    for cmd in session {
        if cmd[0] == "SLEEP" {
            std::thread::sleep(std::time::Duration::from_millis(cmd[1].parse().unwrap()));
            continue;
        }
        call(&mut c, cmd);
    }
    call(&mut c, &["PUBLISH", "marker", "end"]);
    let mut got = Vec::new();
    loop {
        let m = bulks(&read_reply(&mut sub));
        match m.first().map(String::as_str) {
            Some("pmessage") => got.push((m[2].clone(), m[3].clone())),
            Some("message") => break,
            other => panic!("unexpected {other:?} {m:?}"),
        }
    }
    got
}

fn session(lines: &[&'static str]) -> Vec<Vec<&'static str>> {
    lines.iter().map(|l| l.split(' ').collect()).collect()
}

fn compare(flags: &str, lines: &[&'static str]) {
    let g = Server::start(&[]);
    let r = RedisServer::start();
    let s = session(lines);
    let ours = notifications(|| g.raw(), flags, &s);
    let theirs = notifications(|| r.raw(), flags, &s);
    assert!(!theirs.is_empty(), "the session raises notifications on redis-server");
    if ours != theirs {
        let n = ours.iter().zip(&theirs).take_while(|(a, b)| a == b).count();
        panic!(
            "notifications differ (flags {flags}) at message {n}:\n goblin-core: {:?}\n redis-server: {:?}",
            &ours[n..ours.len().min(n + 6)],
            &theirs[n..theirs.len().min(n + 6)]
        );
    }
}

#[test]
fn every_class_matches_redis() {
    compare(
        "KEA",
        &[
            "SET k v",
            "SET k v2 EX 100",
            "SETEX s 100 v",
            "SETNX k x",
            "GETSET k z",
            "MSET a 1 b 2",
            "MSETNX a 1 c 3",
            "SETRANGE k 1 xx",
            "INCR n",
            "INCRBY n 5",
            "DECR n",
            "DECRBY n 2",
            "INCRBYFLOAT f 1.5",
            "APPEND k tail",
            "GETDEL a",
            "GETEX b EX 100",
            "GETEX b PERSIST",
            "DEL b nokey",
            "EXPIRE k 100",
            "PERSIST k",
            "PEXPIRE k -1",
            "RENAME n n2",
            "COPY n2 n3",
            "RPUSH l a b c",
            "LPUSH l z",
            "RPUSHX nolist a",
            "LINSERT l BEFORE a q",
            "LSET l 0 y",
            "LREM l 1 q",
            "LTRIM l 0 10",
            "LPOP l",
            "RPOP l",
            "RPOPLPUSH l l2",
            "LMOVE l2 l LEFT RIGHT",
            "LMPOP 1 l LEFT COUNT 10",
            "HSET h f v g w",
            "HSETNX h f x",
            "HINCRBY h c 1",
            "HINCRBYFLOAT h d 1.5",
            "HDEL h f g c d",
            "SADD s1 a b",
            "SADD s2 b",
            "SREM s1 a",
            "SPOP s2",
            "SMOVE s1 s3 b",
            "SINTERSTORE d s3 nokey",
            "SUNIONSTORE d s3",
            "SDIFFSTORE d2 s3",
            "SINTERSTORE d s3 nokey",
            "ZADD z 1 a 2 b",
            "ZADD z INCR 5 a",
            "ZINCRBY z 1 b",
            "ZREM z a",
            "ZPOPMIN z",
            "ZADD z 1 a 2 b 3 c 4 d",
            "ZREMRANGEBYSCORE z 0 1",
            "ZREMRANGEBYRANK z 0 0",
            "ZPOPMAX z",
            "ZADD z 0 a 0 b",
            "ZREMRANGEBYLEX z - +",
            "ZADD z2 1 a",
            "ZUNIONSTORE z3 1 z2",
            "ZINTERSTORE z3 2 z2 nokey",
            "ZRANGESTORE z4 z2 0 -1",
            "ZDIFFSTORE z5 1 z2",
            "ZMPOP 1 z2 MAX",
            "SETBIT bits 3 1",
            "BITOP OR dst bits",
            "BITFIELD bf SET u8 0 5",
            "UNLINK z4 z5 dst",
            // streams: XADD's trim, no-ops, every XGROUP event, and the consumers that
            // XREADGROUP, XCLAIM and XAUTOCLAIM create (their own SETID/XCLAIM records are silent)
            "XADD x 1-0 f v",
            "XADD x MAXLEN 1 2-0 f v",
            "XADD nox NOMKSTREAM 3-0 f v",
            "XTRIM x MAXLEN 5",
            "XADD x 3-0 f v",
            "XTRIM x MAXLEN 1",
            "XADD x 4-0 f v",
            "XDEL x 4-0 9-0",
            "XDEL x 9-0",
            "XSETID x 10-0",
            "XGROUP CREATE x g 0",
            "XGROUP CREATE x g 0",
            "XGROUP CREATE xs g $ MKSTREAM",
            "XGROUP SETID x g 0",
            "XGROUP SETID x g 0",
            "XGROUP CREATECONSUMER x g alice",
            "XGROUP CREATECONSUMER x g alice",
            "XREADGROUP GROUP g bob STREAMS x >",
            "XREADGROUP GROUP g bob STREAMS x 0",
            "XREADGROUP GROUP g zed STREAMS x 0",
            "XADD x 11-0 f v",
            "XADD xs 1-0 f v",
            "XREADGROUP GROUP g carol STREAMS x xs > >",
            "XCLAIM x g dave 0 11-0",
            "XCLAIM x g dave 0 11-0",
            "XAUTOCLAIM x g erin 0 0",
            "XCLAIM x g frank 0 3-0 LASTID 50-0",
            "XACK x g 11-0",
            "XGROUP DELCONSUMER x g alice",
            "XGROUP DELCONSUMER x g nobody",
            "XGROUP DESTROY x g",
            "XGROUP DESTROY x g",
            "XINFO STREAM x",
            "FLUSHALL",
            "SET e v PX 1",
            "SLEEP 20",
            "GET e",
        ],
    );
}

#[test]
fn subsets_new_and_keymiss_match_redis() {
    let lines = [
        "SET k v",
        "SET k v2",
        "GET nokey",
        "MGET k nokey other",
        "RPUSH l a",
        "LPOP l",
        "HSET h f v",
        "EXISTS nokey",
        "SET e v PX 1",
        "SLEEP 20",
        "GET e",
    ];
    compare("KEn", &lines);
    compare("Kl", &lines);
    compare("E$", &lines);
    compare("Exg", &lines);
    compare("KEm", &lines);
}

/// Active expiry raises `expired` without any client touching the key; off means silent.
#[test]
fn active_expiry_and_config_values() {
    let g = Server::start(&[]);
    let mut c = g.raw();
    assert_eq!(call(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]), b"+OK\r\n");
    let got = call(&mut c, &["CONFIG", "GET", "notify-keyspace-events"]);
    assert_eq!(bulks(&got), ["notify-keyspace-events", "AKE"]);
    let err = call(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Eq"]);
    assert!(
        String::from_utf8_lossy(&err).contains("Invalid event class character. Use 'Ag$lshzxeKEtmdn'."),
        "{}",
        String::from_utf8_lossy(&err)
    );
    let mut sub = g.raw();
    call(&mut sub, &["SUBSCRIBE", "__keyevent@0__:expired"]);
    call(&mut c, &["SET", "gone", "v", "PX", "30"]);
    // Nobody reads the key: active expiry removes it and says so.
    let m = bulks(&read_reply(&mut sub));
    assert_eq!(m, ["message", "__keyevent@0__:expired", "gone"]);
    // Notifications off: nothing more arrives before the marker.
    call(&mut c, &["CONFIG", "SET", "notify-keyspace-events", ""]);
    call(&mut sub, &["SUBSCRIBE", "marker"]);
    call(&mut c, &["SET", "gone2", "v", "PX", "1"]);
    std::thread::sleep(std::time::Duration::from_millis(50));
    call(&mut c, &["PUBLISH", "marker", "end"]);
    let m = bulks(&read_reply(&mut sub));
    assert_eq!(m, ["message", "marker", "end"]);
}

/// The server refuses a bad flag value at startup, naming it.
#[test]
fn bad_startup_flags_are_refused() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goblin-core"))
        .args(["--port", "0", "--notify-keyspace-events", "KEq"])
        .output()
        .expect("run goblin-core");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--notify-keyspace-events") && err.contains("invalid event class"), "{err}");
}

/// Lowering maxmemory below what is used evicts at once, and each eviction is an `evicted`
/// event (as in Redis's pub/sub unit).
#[test]
fn config_set_maxmemory_evicts_at_once_with_events() {
    let g = Server::start(&[]);
    let mut c = g.raw();
    call(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
    call(&mut c, &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    call(&mut c, &["SET", "foo", "bar"]);
    let mut sub = g.raw();
    call(&mut sub, &["PSUBSCRIBE", "*"]);
    assert_eq!(call(&mut c, &["CONFIG", "SET", "maxmemory", "1"]), b"+OK\r\n");
    let m = bulks(&read_reply(&mut sub));
    assert_eq!(m, ["pmessage", "*", "__keyevent@0__:evicted", "foo"]);
    call(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
}

/// Stream commands under class subsets: `t` alone, `new` for keys XADD and XGROUP CREATE
/// MKSTREAM bring into being, and key misses of the group reads.
#[test]
fn stream_subsets_match_redis() {
    let lines = [
        "XADD x 1-0 f v",
        "XGROUP CREATE y g $ MKSTREAM",
        "XGROUP CREATE x g 0",
        "XINFO STREAM nokey",
        "XPENDING nokey g",
        "XACK nokey g 1-0",
        "XCLAIM nokey g c 0 1-0",
        "XREADGROUP GROUP g c STREAMS x >",
        "XGROUP SETID x g 0",
        "XREADGROUP GROUP g c STREAMS x >",
        "SET s v",
        "XADD y MAXLEN 0 2-0 f v",
    ];
    compare("Kt", &lines);
    compare("KEn", &lines);
    compare("KEm", &lines);
    compare("Et", &lines);
}

/// Hash-field expiration's events, as redis-server 8.2 raises them: `hexpire`, `hpersist`,
/// `hexpired` when the active cycle removes an expired field, then `del` when that was the
/// hash's last; a time already past deletes the fields and raises `hdel` (and `del` with the
/// last field).
#[test]
fn hash_field_expiration_events() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let s = session(&[
        "HSET h a 1 b 2",
        "HEXPIRE h 100 FIELDS 1 a",
        "HPERSIST h FIELDS 1 a",
        "HPEXPIRE h 50 FIELDS 1 b",
        "SLEEP 400",
        "HGETEX h PX 20 FIELDS 1 a",
        "SLEEP 400",
        "HSET h2 x 1 y 2 z 3",
        "HPEXPIRE h2 0 FIELDS 1 x",
        "HEXPIRE h2 100 FIELDS 2 y nosuch",
        "HEXPIREAT h2 1 FIELDS 1 y",
        "HPEXPIREAT h2 1 FIELDS 1 z",
    ]);
    let got = notifications(|| g.raw(), "Kgh", &s);
    let ch = "__keyspace@0__:h".to_string();
    let want: Vec<(String, String)> =
        ["hset", "hexpire", "hpersist", "hexpire", "hexpired", "hexpire", "hexpired", "del"]
            .iter()
            .map(|e| (ch.clone(), e.to_string()))
            .collect();
    assert_eq!(got[..want.len()], want[..]);
    assert_eq!(got, notifications(|| r.raw(), "Kgh", &s), "goblin-core, then redis-server 8.2");
    let h2: Vec<&str> = got[want.len()..].iter().map(|(_, e)| e.as_str()).collect();
    assert_eq!(h2, ["hset", "hdel", "hexpire", "hdel", "hdel", "del"]);
}

/// Events of the Redis 8.2-8.10 commands (the reference redis-server predates them, so they
/// are checked against the events their Redis test suites expect).
#[test]
fn newer_command_events() {
    let g = Server::start(&[]);
    let s = session(&[
        "INCREX n BYINT 2 EX 100",
        "INCREX n PX 5 ENX",
        "INCREX n BYFLOAT 0.5 PERSIST",
        "INCREX n BYFLOAT 1 PERSIST",
        "SET old 1",
        "INCREX old EXAT 1",
        "INCREX n BYINT 100 UBOUND 10",
        "RPUSH src a b c",
        "LMOVEM src dst LEFT RIGHT COUNT 5 BULK",
        "XADD x 1-0 f v",
        "XADD x 2-0 f v",
        "XGROUP CREATE x g 0",
        "XREADGROUP GROUP g c STREAMS x >",
        "XACKDEL x g ACKED IDS 1 1-0",
        "XACKDEL x g KEEPREF IDS 1 2-0",
        "XDELEX x IDS 1 9-0",
    ]);
    let got = notifications(|| g.raw(), "KA", &s);
    let want: Vec<(String, String)> = [
        ("n", "incrby"),
        ("n", "expire"),
        // ENX, and the key had a TTL: the deadline stays, and no `expire` is raised.
        ("n", "incrby"),
        ("n", "incrbyfloat"),
        ("n", "persist"),
        // PERSIST on a key without a TTL removed nothing: no `persist`.
        ("n", "incrbyfloat"),
        ("old", "set"),
        // A deadline already past: the key goes, and only `del` is raised.
        ("old", "del"),
        ("src", "rpush"),
        ("dst", "rpush"),
        ("src", "lpop"),
        ("src", "del"),
        ("x", "xadd"),
        ("x", "xadd"),
        ("x", "xgroup-create"),
        ("x", "xgroup-createconsumer"),
        // Each XACKDEL acknowledged and deleted its entry (one `xdel`); the XDELEX of an
        // entry that is not there changed nothing and raises nothing.
        ("x", "xdel"),
        ("x", "xdel"),
    ]
    .iter()
    .map(|(k, e)| (format!("__keyspace@0__:{k}"), e.to_string()))
    .collect();
    assert_eq!(got, want);
}

/// A read that finds every field of a hash past its deadline removes them and the key:
/// `hexpired`, then `del` (active expiry off, so the read does it).
#[test]
fn lazy_field_expiry_that_empties_a_hash_raises_del() {
    let g = Server::start(&["--enable-debug-command", "yes"]);
    let s = session(&[
        "DEBUG SET-ACTIVE-EXPIRE 0",
        "HSET q x 1 y 2",
        "HPEXPIRE q 50 FIELDS 2 x y",
        "SLEEP 150",
        "HGET q x",
    ]);
    let got = notifications(|| g.raw(), "Kgh", &s);
    let want: Vec<(String, String)> = ["hset", "hexpire", "hexpired", "del"]
        .iter()
        .map(|e| ("__keyspace@0__:q".to_string(), e.to_string()))
        .collect();
    assert_eq!(got, want);
}
