//! Hash-field expiration through the real binary: the active cycle removes expired fields (and
//! the key with its last one) that no client touches; deadlines survive a snapshot and a
//! restart; a replica follows the primary's HDELs; SYNC's RDB file, `import-rdb` and
//! DUMP/RESTORE carry them.

mod common;

use common::{temp_path, RedisServer, Server};
use std::collections::HashMap;
use std::time::{Duration, Instant};

fn info(con: &mut redis::Connection, section: &str) -> HashMap<String, String> {
    let text: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

fn pttl(con: &mut redis::Connection, key: &str, fields: &[&str]) -> Vec<i64> {
    redis::cmd("HPTTL").arg(key).arg("FIELDS").arg(fields.len()).arg(fields).query(con).unwrap()
}

fn expiretimes(con: &mut redis::Connection, key: &str, fields: &[&str]) -> Vec<i64> {
    redis::cmd("HPEXPIRETIME").arg(key).arg("FIELDS").arg(fields.len()).arg(fields).query(con).unwrap()
}

fn dbsize(con: &mut redis::Connection) -> i64 {
    redis::cmd("DBSIZE").query(con).unwrap()
}

/// Fields expire on their own: nothing reads the hashes, yet the active cycle removes the
/// expired fields, then the key whose every field expired, and counts them.
#[test]
fn the_active_cycle_removes_expired_fields_nobody_reads() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    for i in 0..50 {
        let key = format!("session:{i}");
        let _: () =
            redis::cmd("HSET").arg(&key).arg("token").arg("t").arg("user").arg(i).query(&mut con).unwrap();
        let _: Vec<i64> = redis::cmd("HPEXPIRE")
            .arg(&key)
            .arg(100)
            .arg("FIELDS")
            .arg(1)
            .arg("token")
            .query(&mut con)
            .unwrap();
    }
    let _: () = redis::cmd("HSET").arg("gone").arg("a").arg(1).query(&mut con).unwrap();
    let _: Vec<i64> =
        redis::cmd("HPEXPIRE").arg("gone").arg(100).arg("FIELDS").arg(1).arg("a").query(&mut con).unwrap();
    assert_eq!(dbsize(&mut con), 51);
    let deadline = Instant::now() + Duration::from_secs(20);
    while dbsize(&mut con) != 50 || info(&mut con, "stats")["expired_subkeys"] != "51" {
        assert!(Instant::now() < deadline, "{:?}", info(&mut con, "stats"));
        std::thread::sleep(Duration::from_millis(50));
    }
    // The rest of each hash is untouched, and has no deadline.
    let v: HashMap<String, String> = redis::cmd("HGETALL").arg("session:7").query(&mut con).unwrap();
    assert_eq!(v, HashMap::from([("user".to_string(), "7".to_string())]));
    let e: String = redis::cmd("OBJECT").arg("ENCODING").arg("session:7").query(&mut con).unwrap();
    assert_eq!(e, "listpack");
}

/// Deadlines are data: SAVE, restart with --load, and each field has its deadline (and a
/// field that expired while the server was down is gone once read).
#[test]
fn deadlines_survive_a_snapshot_and_a_restart() {
    let dir = temp_path("hfe-snap");
    std::fs::create_dir_all(&dir).unwrap();
    let snap = dir.join("s.gcsn");
    let snap = snap.to_str().unwrap();
    let s = Server::start(&["--load", snap]);
    let mut con = s.conn();
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("long")
        .arg(1)
        .arg("short")
        .arg(2)
        .arg("plain")
        .arg(3)
        .query(&mut con)
        .unwrap();
    // A big hash too (the indexed form keeps deadlines as the small one does).
    let mut p = redis::pipe();
    for i in 0..1000 {
        p.cmd("HSET").arg("big").arg(format!("f{i}")).arg(i).ignore();
    }
    let _: () = p.query(&mut con).unwrap();
    let _: Vec<i64> =
        redis::cmd("HEXPIRE").arg("h").arg(1000).arg("FIELDS").arg(1).arg("long").query(&mut con).unwrap();
    let _: Vec<i64> =
        redis::cmd("HPEXPIRE").arg("h").arg(300).arg("FIELDS").arg(1).arg("short").query(&mut con).unwrap();
    let _: Vec<i64> = redis::cmd("HEXPIRE")
        .arg("big")
        .arg(500)
        .arg("FIELDS")
        .arg(2)
        .arg("f1")
        .arg("f999")
        .query(&mut con)
        .unwrap();
    let at: Vec<i64> = expiretimes(&mut con, "h", &["long"]);
    let big_at: Vec<i64> = expiretimes(&mut con, "big", &["f1", "f999", "f2"]);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    drop(con);
    drop(s);
    std::thread::sleep(Duration::from_millis(400));
    let s = Server::start(&["--load", snap]);
    let mut con = s.conn();
    let again: Vec<i64> = expiretimes(&mut con, "h", &["long"]);
    assert_eq!(again, at);
    let again: Vec<i64> = expiretimes(&mut con, "big", &["f1", "f999", "f2"]);
    assert_eq!(again, big_at);
    assert_eq!(big_at[2], -1);
    assert_eq!(pttl(&mut con, "h", &["short", "plain"]), [-2, -1], "expired while the server was down");
    let v: Option<String> = redis::cmd("HGET").arg("h").arg("short").query(&mut con).unwrap();
    assert_eq!(v, None);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A replica of `primary` over TCP, once it is live, and a connection to it.
fn live_replica(primary: &Server) -> (Server, redis::Connection) {
    let port = primary.port.to_string();
    let replica = Server::start(&["--replica-tcp", "127.0.0.1", &port]);
    let mut rc = replica.conn();
    let deadline = Instant::now() + Duration::from_secs(20);
    while info(&mut rc, "replication")["replica_state"] != "live" {
        assert!(Instant::now() < deadline, "the replica did not go live");
        std::thread::sleep(Duration::from_millis(20));
    }
    (replica, rc)
}

/// A replica holds the deadlines the primary set, and loses a field when the primary's
/// expiry sends its HDEL.
#[test]
fn a_replica_follows_field_expiry() {
    let primary = Server::start(&[]);
    let (_replica, mut rc) = live_replica(&primary);
    let mut pc = primary.conn();
    let _: () = redis::cmd("HSET").arg("h").arg("a").arg(1).arg("b").arg(2).query(&mut pc).unwrap();
    let _: Vec<i64> =
        redis::cmd("HPEXPIRE").arg("h").arg(200).arg("FIELDS").arg(1).arg("a").query(&mut pc).unwrap();
    let _: Vec<i64> =
        redis::cmd("HEXPIRE").arg("h").arg(100).arg("FIELDS").arg(1).arg("b").query(&mut pc).unwrap();
    let want: Vec<i64> = expiretimes(&mut pc, "h", &["a", "b"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got: Vec<i64> = expiretimes(&mut rc, "h", &["a", "b"]);
        if got == want {
            break;
        }
        assert!(Instant::now() < deadline, "the replica has {got:?}, the primary {want:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    loop {
        let fields: Vec<String> = redis::cmd("HKEYS").arg("h").query(&mut rc).unwrap();
        if fields == ["b"] {
            break;
        }
        assert!(Instant::now() < deadline, "the replica still has {fields:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A replica hides fields past their deadlines before its upstream's HDELs arrive, as it
/// hides an expired key before the upstream's DEL (here the primary's active expiry is off, so
/// nothing arrives until the primary itself reads the hash).
#[test]
fn a_replica_hides_expired_fields_before_the_upstream_removes_them() {
    let primary = Server::start(&["--enable-debug-command", "yes"]);
    let (_replica, mut rc) = live_replica(&primary);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut pc = primary.conn();
    let _: () = redis::cmd("DEBUG").arg("SET-ACTIVE-EXPIRE").arg(0).query(&mut pc).unwrap();
    let _: () =
        redis::cmd("HSET").arg("h").arg("a").arg(1).arg("b").arg(2).arg("c").arg(3).query(&mut pc).unwrap();
    let _: () = redis::cmd("HSET").arg("gone").arg("x").arg(1).query(&mut pc).unwrap();
    let _: Vec<i64> = redis::cmd("HPEXPIRE")
        .arg("h")
        .arg(100)
        .arg("FIELDS")
        .arg(2)
        .arg("a")
        .arg("b")
        .query(&mut pc)
        .unwrap();
    let _: Vec<i64> =
        redis::cmd("HPEXPIRE").arg("gone").arg(100).arg("FIELDS").arg(1).arg("x").query(&mut pc).unwrap();
    let marker: i64 = redis::cmd("INCR").arg("marker").query(&mut pc).unwrap();
    loop {
        let got: Option<i64> = redis::cmd("GET").arg("marker").query(&mut rc).unwrap();
        if got == Some(marker) {
            break;
        }
        assert!(Instant::now() < deadline, "the replica did not catch up");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Past both deadlines; the primary has removed nothing yet (no reads, no active cycle).
    std::thread::sleep(Duration::from_millis(250));
    let fields: Vec<String> = redis::cmd("HKEYS").arg("h").query(&mut rc).unwrap();
    assert_eq!(fields, ["c"]);
    let len: i64 = redis::cmd("HLEN").arg("h").query(&mut rc).unwrap();
    assert_eq!(len, 1);
    let a: Option<String> = redis::cmd("HGET").arg("h").arg("a").query(&mut rc).unwrap();
    assert_eq!(a, None);
    let all: std::collections::HashMap<String, String> =
        redis::cmd("HGETALL").arg("gone").query(&mut rc).unwrap();
    assert!(all.is_empty(), "{all:?}");
    // The replica still stores them: the primary's own read expires them and the HDELs follow.
    let stats = info(&mut rc, "stats");
    assert_eq!(stats["expired_subkeys"], "0");
    let fields: Vec<String> = redis::cmd("HKEYS").arg("h").query(&mut pc).unwrap();
    assert_eq!(fields, ["c"]);
}

/// SYNC sends hashes with field deadlines as Redis 7.4's type 24 in an RDB 12 file, and
/// `import-rdb` reads them back with their deadlines.
#[test]
fn rdb_files_carry_field_deadlines() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let _: () = redis::cmd("HSET").arg("h").arg("a").arg(1).arg("b").arg(2).query(&mut con).unwrap();
    let _: () = redis::cmd("SET").arg("plain").arg("v").query(&mut con).unwrap();
    let _: Vec<i64> =
        redis::cmd("HEXPIRE").arg("h").arg(1000).arg("FIELDS").arg(1).arg("a").query(&mut con).unwrap();
    let want: Vec<i64> = expiretimes(&mut con, "h", &["a", "b"]);
    let dir = temp_path("hfe-rdb");
    std::fs::create_dir_all(&dir).unwrap();
    let rdb = dir.join("dump.rdb");
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &s.port.to_string(), "--rdb"])
        .arg(&rdb)
        .output()
        .expect("redis-cli is required for this test (apt-get install redis-tools)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&rdb).unwrap();
    assert_eq!(&bytes[..9], b"REDIS0012");
    let snap = dir.join("imported.gcsn");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goblin-core"))
        .arg("import-rdb")
        .arg(&rdb)
        .arg("-o")
        .arg(&snap)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = Server::start(&["--load", snap.to_str().unwrap()]);
    let mut rc = r.conn();
    let got: Vec<i64> = expiretimes(&mut rc, "h", &["a", "b"]);
    assert_eq!(got, want);
    assert_eq!(dbsize(&mut rc), 2);
    // DUMP / RESTORE between two servers too.
    let payload: Vec<u8> = redis::cmd("DUMP").arg("h").query(&mut con).unwrap();
    let _: () = redis::cmd("RESTORE").arg("h2").arg(0).arg(payload).query(&mut rc).unwrap();
    let got: Vec<i64> = expiretimes(&mut rc, "h2", &["a", "b"]);
    assert_eq!(got, want);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// INFO keyspace's `subexpiry` (Redis 8: the hashes with field deadlines), step by step on
/// goblin-core and redis-server 8.2: a field deadline files the hash, deleting the hash, SET
/// over it or RENAME move or drop it, deleting its last field with a deadline drops it (HDEL,
/// HGETDEL), persisting it does not yet, FLUSHALL empties it.
#[test]
fn info_keyspace_counts_hashes_with_field_deadlines_as_redis8() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let mut runs = Vec::new();
    for c in [&mut g.conn(), &mut r.conn()] {
        let mut got = Vec::new();
        let mut step = |c: &mut redis::Connection, args: &[&str]| {
            let mut cmd = redis::cmd(args[0]);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            let _: redis::Value = cmd.query(c).unwrap();
            let db0 = info(c, "keyspace").get("db0").cloned().unwrap_or_default();
            got.push(format!("{args:?} -> {db0}"));
        };
        step(c, &["HSET", "h1", "a", "1", "b", "2"]);
        step(c, &["HEXPIRE", "h1", "100", "FIELDS", "1", "a"]);
        step(c, &["HSET", "h2", "a", "1"]);
        step(c, &["HPEXPIRE", "h2", "100000", "FIELDS", "1", "a"]);
        step(c, &["RENAME", "h2", "h3"]);
        step(c, &["SET", "h3", "string now"]);
        step(c, &["HSET", "h4", "a", "1"]);
        step(c, &["HEXPIRE", "h4", "100", "FIELDS", "1", "a"]);
        step(c, &["DEL", "h4"]);
        step(c, &["HSETEX", "h5", "EX", "100", "FIELDS", "1", "a", "1"]);
        // The last field with a deadline deleted: the hash leaves the count at once.
        step(c, &["HSET", "h6", "a", "1", "b", "2", "c", "3"]);
        step(c, &["HEXPIRE", "h6", "100", "FIELDS", "2", "b", "c"]);
        step(c, &["HDEL", "h6", "b"]);
        step(c, &["HDEL", "h6", "c"]);
        step(c, &["HSET", "h7", "a", "1", "b", "2"]);
        step(c, &["HEXPIRE", "h7", "100", "FIELDS", "1", "b"]);
        step(c, &["HGETDEL", "h7", "FIELDS", "1", "b"]);
        // Persisted: still counted until the active cycle gets to it.
        step(c, &["HSET", "h8", "a", "1"]);
        step(c, &["HEXPIRE", "h8", "100", "FIELDS", "1", "a"]);
        step(c, &["HPERSIST", "h8", "FIELDS", "1", "a"]);
        step(c, &["FLUSHALL"]);
        step(c, &["SET", "plain", "v"]);
        runs.push(got);
    }
    for (g, r) in runs[0].iter().zip(&runs[1]) {
        assert_eq!(g, r, "goblin-core against redis-server 8.2");
    }
    assert!(runs[0][1].ends_with("subexpiry=1"), "{:?}", runs[0]);
}
