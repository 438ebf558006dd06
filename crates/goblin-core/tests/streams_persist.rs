//! Streams through the real binary's persistence: SAVE then `--load` in a new process, and
//! DEBUG RELOAD, keep every stream's entries, its last ID, max deleted ID and entries-added
//! counter, empty streams, deadlines and IDMP pairs (`DEBUG DIGEST` covers all of them).
//! Consumer groups have no client commands in this build; the snapshot crate's tests cover
//! them.

mod common;

use common::{temp_path, Server};
use std::time::Duration;

fn digest(con: &mut redis::Connection) -> String {
    redis::cmd("DEBUG").arg("DIGEST").query(con).unwrap()
}

fn q<T: redis::FromRedisValue>(con: &mut redis::Connection, args: &[&str]) -> T {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Streams of every shape: many entries across blocks with deletions, differing fields, an
/// empty stream left by trimming, one with moved counters (XSETID), one with a deadline.
fn fill(con: &mut redis::Connection) {
    let mut p = redis::pipe();
    for i in 0..2500u64 {
        let id = format!("{}-{}", 1_000 + i / 4, i % 4);
        if i % 11 == 0 {
            p.cmd("XADD").arg("s:big").arg(&id).arg("other").arg(i).arg("x").arg("").ignore();
        } else {
            p.cmd("XADD").arg("s:big").arg(&id).arg("n").arg(i).arg("text").arg(format!("v{i}")).ignore();
        }
    }
    for i in (0..2500u64).step_by(13) {
        p.cmd("XDEL").arg("s:big").arg(format!("{}-{}", 1_000 + i / 4, i % 4)).ignore();
    }
    p.cmd("XADD").arg("s:empty").arg("MAXLEN").arg(0).arg("5-5").arg("f").arg("v").ignore();
    p.cmd("XADD").arg("s:ids").arg("1-1").arg("f").arg("v").ignore();
    p.cmd("XADD").arg("s:ids").arg("2-1").arg("f").arg("w").ignore();
    p.cmd("XDEL").arg("s:ids").arg("2-1").ignore();
    p.cmd("XSETID")
        .arg("s:ids")
        .arg("900-9")
        .arg("ENTRIESADDED")
        .arg(77)
        .arg("MAXDELETEDID")
        .arg("800-0")
        .ignore();
    p.cmd("XADD").arg("s:ttl").arg("*").arg("k").arg("v").ignore();
    p.cmd("PEXPIRE").arg("s:ttl").arg(3_600_000).ignore();
    p.cmd("XADD")
        .arg(b"s:bin\r\n\x00".as_slice())
        .arg("1-0")
        .arg(b"\x00\xff".as_slice())
        .arg(b"".as_slice())
        .ignore();
    let _: () = p.query(con).unwrap();
}

/// What a client can see of the streams: entries, lengths, and the effects of the hidden
/// counters (the next `*` ID must follow the saved last ID; XADD below it is refused).
fn view(con: &mut redis::Connection) -> Vec<String> {
    let mut out = Vec::new();
    for k in ["s:big", "s:empty", "s:ids", "s:ttl"] {
        let ty: String = q(con, &["TYPE", k]);
        let len: i64 = q(con, &["XLEN", k]);
        let all: redis::Value = q(con, &["XRANGE", k, "-", "+"]);
        out.push(format!("{k} {ty} {len} {all:?}"));
    }
    let err =
        redis::cmd("XADD").arg("s:ids").arg("900-9").arg("f").arg("v").query::<String>(con).unwrap_err();
    out.push(err.to_string());
    out
}

#[test]
fn streams_survive_save_and_load_in_a_new_process() {
    let dir = temp_path("streams-persist");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dump.gcsn");
    let p = path.to_str().unwrap();
    let mut a = Server::start(&["--load", p, "--save", ""]);
    let mut con = a.conn();
    fill(&mut con);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let (want_digest, want_view) = (digest(&mut con), view(&mut con));
    assert_ne!(want_digest, "0".repeat(40));
    a.signal(9);
    a.wait_exit(Duration::from_secs(10)).unwrap();

    let b = Server::start(&["--load", p, "--save", ""]);
    let mut con = b.conn();
    assert_eq!(digest(&mut con), want_digest);
    assert_eq!(view(&mut con), want_view);
    let keys: i64 = q(&mut con, &["DBSIZE"]);
    assert_eq!(keys, 5);
    let ttl: i64 = q(&mut con, &["PTTL", "s:ttl"]);
    assert!(ttl > 3_000_000 && ttl <= 3_600_000, "the deadline is kept: {ttl}");
    // The empty stream is still a stream whose last ID is 5-5.
    let err =
        redis::cmd("XADD").arg("s:empty").arg("5-5").arg("f").arg("v").query::<String>(&mut con).unwrap_err();
    assert!(err.to_string().contains("equal or smaller"), "{err}");
    let id: String = q(&mut con, &["XADD", "s:empty", "5-*", "f", "v"]);
    assert_eq!(id, "5-6");
    let id: String = q(&mut con, &["XADD", "s:ids", "900-*", "f", "v"]);
    assert_eq!(id, "900-10");
}

#[test]
fn debug_reload_keeps_streams_and_copies_of_them() {
    let s = Server::start(&["--save", "", "--enable-debug-command", "yes"]);
    let mut con = s.conn();
    fill(&mut con);
    // COPY and RENAME move a stream whole.
    let _: i64 = q(&mut con, &["COPY", "s:ids", "s:copy"]);
    let _: () = q(&mut con, &["RENAME", "s:copy", "s:renamed"]);
    let want = (digest(&mut con), view(&mut con));
    let copied: redis::Value = q(&mut con, &["XRANGE", "s:renamed", "-", "+"]);
    let _: () = q(&mut con, &["DEBUG", "RELOAD"]);
    assert_eq!((digest(&mut con), view(&mut con)), want);
    let again: redis::Value = q(&mut con, &["XRANGE", "s:renamed", "-", "+"]);
    assert_eq!(again, copied);
    let id: String = q(&mut con, &["XADD", "s:renamed", "900-*", "f", "v"]);
    assert_eq!(id, "900-10", "the copy carries the last ID");
}

/// Redis 8.6's idempotent production outlives a restart: a retry after `--load` in a new
/// process still answers the entry its pair first added, and the settings and counts come back.
#[test]
fn idempotent_pairs_survive_save_and_load() {
    let dir = temp_path("streams-idmp");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dump.gcsn");
    let p = path.to_str().unwrap();
    let mut a = Server::start(&["--load", p, "--save", ""]);
    let mut con = a.conn();
    let first: String = q(&mut con, &["XADD", "pay", "IDMP", "gw", "tx-1", "*", "amount", "5"]);
    let auto: String = q(&mut con, &["XADD", "pay", "IDMPAUTO", "gw2", "*", "a", "1", "b", "2"]);
    let _: () = q(&mut con, &["XCFGSET", "pay", "IDMP-DURATION", "600"]);
    // The change forgot both pairs: record them again, and one duplicate.
    let first2: String = q(&mut con, &["XADD", "pay", "IDMP", "gw", "tx-1", "*", "amount", "5"]);
    assert_ne!(first2, first);
    let auto2: String = q(&mut con, &["XADD", "pay", "IDMPAUTO", "gw2", "*", "b", "2", "a", "1"]);
    assert_ne!(auto2, auto);
    let dup: String = q(&mut con, &["XADD", "pay", "IDMP", "gw", "tx-1", "*", "amount", "6"]);
    assert_eq!(dup, first2);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let want_digest = digest(&mut con);
    let info = |con: &mut redis::Connection| -> Vec<i64> {
        let v: std::collections::HashMap<String, redis::Value> = q(con, &["XINFO", "STREAM", "pay"]);
        ["idmp-duration", "idmp-maxsize", "pids-tracked", "iids-tracked", "iids-added", "iids-duplicates"]
            .iter()
            .map(|f| match v.get(*f) {
                Some(redis::Value::Int(n)) => *n,
                other => panic!("{f}: {other:?}"),
            })
            .collect()
    };
    let want_info = info(&mut con);
    assert_eq!(want_info, vec![600, 100, 2, 2, 4, 1]);
    a.signal(9);
    a.wait_exit(Duration::from_secs(10)).unwrap();

    let b = Server::start(&["--load", p, "--save", ""]);
    let mut con = b.conn();
    assert_eq!(digest(&mut con), want_digest);
    assert_eq!(info(&mut con), want_info);
    let again: String = q(&mut con, &["XADD", "pay", "IDMP", "gw", "tx-1", "*", "amount", "7"]);
    assert_eq!(again, first2);
    let again: String = q(&mut con, &["XADD", "pay", "IDMPAUTO", "gw2", "*", "a", "1", "b", "2"]);
    assert_eq!(again, auto2);
    let len: i64 = q(&mut con, &["XLEN", "pay"]);
    assert_eq!(len, 4);
}
