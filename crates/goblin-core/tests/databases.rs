//! Redis's numbered databases (SELECT 0 .. 15) against the real binary: the same command
//! session on goblin-core and redis-server 7.0.15 answers alike; each database's keys, waiters,
//! watches and notifications are its own; a script's SELECT stays in the script; and every
//! database survives a snapshot and a restart from it.

mod common;

use common::{read_reply, send, RedisServer, Server};
use std::net::TcpStream;
use std::time::Duration;

fn req(args: &[&str]) -> Vec<u8> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let mut out = Vec::new();
    resp::reply::bulk_array(&mut out, &args);
    out
}

fn call(s: &mut TcpStream, args: &[&str]) -> String {
    send(s, &req(args));
    String::from_utf8_lossy(&read_reply(s)).into_owned()
}

fn q<T: redis::FromRedisValue>(con: &mut redis::Connection, args: &[&str]) -> T {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// One session of database commands, every reply compared with redis-server's: SELECT,
/// MOVE, COPY ... DB, SWAPDB, FLUSHDB, FLUSHALL, DBSIZE, KEYS, and their errors.
#[test]
fn database_commands_answer_as_redis_does() {
    let session: &[&[&str]] = &[
        &["SET", "k", "zero"],
        &["SELECT", "1"],
        &["GET", "k"],
        &["SET", "k", "one"],
        &["RPUSH", "l", "a", "b"],
        &["SET", "t", "x", "EX", "100"],
        &["DBSIZE"],
        &["SELECT", "0"],
        &["DBSIZE"],
        &["MOVE", "k", "1"],
        &["MOVE", "k", "2"],
        &["MOVE", "k", "0"],
        &["MOVE", "k", "16"],
        &["MOVE", "k", "x"],
        &["MOVE", "nokey", "3"],
        &["GET", "k"],
        &["SELECT", "2"],
        &["GET", "k"],
        &["COPY", "k", "k", "DB", "1"],
        &["COPY", "k", "k", "DB", "1", "REPLACE"],
        &["COPY", "k", "k2", "DB", "2"],
        &["COPY", "k", "k", "DB", "2"],
        &["COPY", "k", "k", "DB", "16"],
        &["KEYS", "*"],
        &["SWAPDB", "1", "2"],
        &["SORT", "l", "ALPHA"],
        &["TTL", "t"],
        &["KEYS", "*"],
        &["SWAPDB", "x", "1"],
        &["SWAPDB", "1", "x"],
        &["SWAPDB", "0", "16"],
        &["SWAPDB", "2", "2"],
        &["FLUSHDB"],
        &["DBSIZE"],
        &["SELECT", "1"],
        &["DBSIZE"],
        &["SELECT", "16"],
        &["SELECT", "-1"],
        &["SELECT", "1.5"],
        &["FLUSHALL"],
        &["DBSIZE"],
        &["SELECT", "0"],
        &["DBSIZE"],
    ];
    let g = Server::start(&[]);
    let r = RedisServer::start();
    let (mut gc, mut rc) = (g.raw(), r.raw());
    for cmd in session {
        let (ours, theirs) = (call(&mut gc, cmd), call(&mut rc, cmd));
        // KEYS lists in no particular order.
        let sorted = |s: &str| {
            let mut l: Vec<&str> = s.split("\r\n").collect();
            l.sort();
            l.join("\n")
        };
        if cmd[0] == "KEYS" {
            assert_eq!(sorted(&ours), sorted(&theirs), "{cmd:?}");
        } else {
            assert_eq!(ours, theirs, "{cmd:?}");
        }
    }
    // INFO keyspace lists each database that holds keys.
    let mut g2 = g.conn();
    let mut r2 = r.conn();
    for (db, key) in [(0, "a"), (3, "b"), (3, "c"), (12, "d")] {
        for c in [&mut g2, &mut r2] {
            let _: () = q(c, &["SELECT", &db.to_string()]);
            let _: () = q(c, &["SET", key, "v"]);
        }
    }
    let keyspace = |c: &mut redis::Connection| -> Vec<String> {
        let text: String = q(c, &["INFO", "keyspace"]);
        text.lines()
            .filter(|l| l.starts_with("db"))
            .map(|l| l.split(",avg_ttl").next().unwrap().to_string())
            .collect()
    };
    assert_eq!(keyspace(&mut g2), keyspace(&mut r2));
    assert_eq!(keyspace(&mut g2), ["db0:keys=1,expires=0", "db3:keys=2,expires=0", "db12:keys=1,expires=0"]);
    let dbs: Vec<String> = q(&mut g2, &["CONFIG", "GET", "databases"]);
    assert_eq!(dbs, ["databases", "16"]);
    // MEMORY STATS: one `db.N` entry per database that holds keys, and the keys of all.
    let stats = |c: &mut redis::Connection| -> (Vec<String>, i64) {
        let v: Vec<redis::Value> = q(c, &["MEMORY", "STATS"]);
        let mut names = Vec::new();
        let mut count = -1;
        for pair in v.chunks(2) {
            let name: String = redis::from_redis_value_ref(&pair[0]).unwrap();
            if name == "keys.count" {
                count = redis::from_redis_value_ref(&pair[1]).unwrap();
            }
            // The per-database entries (`db.N`), not `db.dict.rehashing.count` (Redis 7.4).
            if name.strip_prefix("db.").is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())) {
                names.push(name);
            }
        }
        (names, count)
    };
    assert_eq!(stats(&mut g2), stats(&mut r2));
    assert_eq!(stats(&mut g2), (vec!["db.0".to_string(), "db.3".into(), "db.12".into()], 4));
}

/// A client blocked in one database is woken by writes to its key there, not by the same key
/// in another database; a MOVE or a SWAPDB that brings it elements wakes it too.
#[test]
fn waiters_wait_in_their_own_database() {
    let s = Server::start(&[]);
    let url = s.url();
    let pop = |db: u32| {
        let url = url.clone();
        std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let _: () = redis::cmd("SELECT").arg(db).query(&mut c).unwrap();
            let v: Option<(String, String)> = redis::cmd("BLPOP").arg("q").arg(10).query(&mut c).unwrap();
            v
        })
    };
    let mut con = s.conn();
    let parked = |con: &mut redis::Connection, n: usize| {
        for _ in 0..200 {
            let text: String = q(con, &["INFO", "clients"]);
            if text.contains(&format!("blocked_clients:{n}\r")) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("{n} clients never blocked");
    };
    // A push in database 0 leaves the waiter of database 1 parked; a push in 1 serves it.
    let w = pop(1);
    parked(&mut con, 1);
    let _: i64 = q(&mut con, &["RPUSH", "q", "zero"]);
    std::thread::sleep(Duration::from_millis(100));
    parked(&mut con, 1);
    let _: () = q(&mut con, &["SELECT", "1"]);
    let _: i64 = q(&mut con, &["RPUSH", "q", "one"]);
    assert_eq!(w.join().unwrap(), Some(("q".into(), "one".into())));
    // MOVE brings database 0's list to a waiter in database 2.
    let w = pop(2);
    parked(&mut con, 1);
    let _: () = q(&mut con, &["SELECT", "0"]);
    let moved: i64 = q(&mut con, &["MOVE", "q", "2"]);
    assert_eq!(moved, 1);
    assert_eq!(w.join().unwrap(), Some(("q".into(), "zero".into())));
    // SWAPDB brings database 5's list into database 3, where a client waits.
    let w = pop(3);
    parked(&mut con, 1);
    let _: () = q(&mut con, &["SELECT", "5"]);
    let _: i64 = q(&mut con, &["RPUSH", "q", "five"]);
    let _: () = q(&mut con, &["SWAPDB", "5", "3"]);
    assert_eq!(w.join().unwrap(), Some(("q".into(), "five".into())));
}

/// WATCH names a key of the watcher's database: the same key written in another database
/// leaves the transaction alone; written in the same database, or swapped away, it fails it.
#[test]
fn watches_belong_to_a_database() {
    let s = Server::start(&[]);
    let mut w = s.conn();
    let mut other = s.conn();
    let exec = |w: &mut redis::Connection| -> Option<Vec<String>> {
        let _: () = q(w, &["MULTI"]);
        let _: String = q(w, &["SET", "done", "1"]);
        q(w, &["EXEC"])
    };
    let _: () = q(&mut w, &["SELECT", "1"]);
    let _: () = q(&mut w, &["WATCH", "k"]);
    let _: () = q(&mut other, &["SET", "k", "in zero"]);
    assert!(exec(&mut w).is_some(), "a write to database 0's k does not touch database 1's");
    let _: () = q(&mut w, &["WATCH", "k"]);
    let _: () = q(&mut other, &["SELECT", "1"]);
    let _: () = q(&mut other, &["SET", "k", "in one"]);
    assert!(exec(&mut w).is_none(), "database 1's k changed");
    let _: () = q(&mut w, &["WATCH", "k"]);
    let _: () = q(&mut other, &["SWAPDB", "1", "4"]);
    assert!(exec(&mut w).is_none(), "database 1's contents were swapped away");
    let _: () = q(&mut w, &["WATCH", "k"]);
    let _: () = q(&mut other, &["SELECT", "0"]);
    let _: () = q(&mut other, &["FLUSHDB"]);
    assert!(exec(&mut w).is_some(), "flushing database 0 leaves database 1's watches");
    let _: () = q(&mut w, &["WATCH", "fresh"]);
    let _: () = q(&mut other, &["SET", "fresh", "x"]);
    let moved: i64 = q(&mut other, &["MOVE", "fresh", "1"]);
    assert_eq!(moved, 1);
    assert!(exec(&mut w).is_none(), "a key moved into database 1 changes it");
}

/// Keyspace notifications name the database (`__keyspace@3__`), MOVE raises `move_from` in
/// the source and `move_to` in the destination, COPY ... DB `copy_to` in the destination:
/// message for message as redis-server.
#[test]
fn notifications_name_the_database() {
    let session: &[&[&str]] = &[
        &["SELECT", "3"],
        &["SET", "k", "v"],
        &["MOVE", "k", "5"],
        &["MOVE", "k", "5"],
        &["SELECT", "5"],
        &["COPY", "k", "c", "DB", "7"],
        &["EXPIRE", "k", "100"],
        &["SWAPDB", "5", "6"],
        &["FLUSHDB"],
        &["SELECT", "6"],
        &["DEL", "k"],
    ];
    let run = |raw: &dyn Fn() -> TcpStream| -> Vec<(String, String)> {
        let mut admin = raw();
        assert_eq!(call(&mut admin, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]), "+OK\r\n");
        let mut sub = raw();
        call(&mut sub, &["PSUBSCRIBE", "__key*"]);
        call(&mut sub, &["SUBSCRIBE", "marker"]);
        let mut c = raw();
        for cmd in session {
            call(&mut c, cmd);
        }
        call(&mut c, &["PUBLISH", "marker", "end"]);
        let mut got = Vec::new();
        loop {
            let text = String::from_utf8_lossy(&read_reply(&mut sub)).into_owned();
            let parts: Vec<&str> = text.split("\r\n").filter(|l| !l.starts_with(['$', '*'])).collect();
            match parts[0] {
                "pmessage" => got.push((parts[2].to_string(), parts[3].to_string())),
                "message" => break,
                other => panic!("unexpected {other}"),
            }
        }
        got
    };
    let g = Server::start(&[]);
    let r = RedisServer::start();
    let ours = run(&|| g.raw());
    let theirs = run(&|| r.raw());
    assert!(theirs.iter().any(|(ch, _)| ch == "__keyspace@5__:k"), "{theirs:?}");
    assert_eq!(ours, theirs);
}

/// A script's SELECT holds inside the script only (Redis 7); MULTI's SELECT holds after EXEC;
/// CLIENT LIST shows each client's database and RESET goes back to 0; MONITOR names it.
#[test]
fn connection_state_follows_select() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let got: String = q(
        &mut c,
        &[
            "EVAL",
            "redis.call('select', 9); redis.call('set', 'lua', 'x'); return redis.call('get', 'lua')",
            "0",
        ],
    );
    assert_eq!(got, "x");
    let here: Option<String> = q(&mut c, &["GET", "lua"]);
    assert_eq!(here, None, "the caller is still in database 0");
    let _: () = q(&mut c, &["SELECT", "9"]);
    let there: String = q(&mut c, &["GET", "lua"]);
    assert_eq!(there, "x");
    let id: i64 = q(&mut c, &["CLIENT", "ID"]);
    let list: String = q(&mut c, &["CLIENT", "LIST", "ID", &id.to_string()]);
    assert!(list.contains(" db=9 "), "{list}");
    let mut raw = s.raw();
    assert_eq!(call(&mut raw, &["MULTI"]), "+OK\r\n");
    call(&mut raw, &["SELECT", "4"]);
    call(&mut raw, &["SET", "m", "1"]);
    assert_eq!(call(&mut raw, &["EXEC"]), "*2\r\n+OK\r\n+OK\r\n");
    assert_eq!(call(&mut raw, &["GET", "m"]), "$1\r\n1\r\n", "SELECT inside MULTI holds after EXEC");
    assert_eq!(call(&mut raw, &["RESET"]), "+RESET\r\n");
    assert_eq!(call(&mut raw, &["GET", "m"]), "$-1\r\n", "RESET selects database 0");
    // MONITOR prints the database of each command.
    let mut mon = s.raw();
    assert_eq!(call(&mut mon, &["MONITOR"]), "+OK\r\n");
    call(&mut raw, &["SELECT", "7"]);
    call(&mut raw, &["GET", "m"]);
    let mut lines = String::new();
    while !lines.contains("\"GET\"") {
        lines.push_str(&String::from_utf8_lossy(&read_reply(&mut mon)));
    }
    assert!(lines.contains(" [7 127.0.0.1:") && lines.contains("\"GET\" \"m\""), "{lines}");
}

/// Every database survives SAVE, a SIGKILL and `--load` (same DEBUG DIGEST, which covers every
/// database, and the same keys where they were); a server started with fewer databases than
/// the snapshot holds refuses to start, naming the database.
#[test]
fn databases_survive_a_snapshot() {
    let snap = common::temp_path("databases.gcsn");
    let sp = snap.to_str().unwrap();
    let mut a = Server::start(&["--load", sp, "--save", ""]);
    let mut c = a.conn();
    for db in [0, 1, 7, 15] {
        let _: () = q(&mut c, &["SELECT", &db.to_string()]);
        let _: () = q(&mut c, &["SET", "k", &format!("in {db}")]);
        let _: i64 = q(&mut c, &["RPUSH", "l", &db.to_string()]);
        let _: () = q(&mut c, &["SET", "t", "x", "EX", "1000"]);
    }
    let digest: String = q(&mut c, &["DEBUG", "DIGEST"]);
    let _: () = q(&mut c, &["SAVE"]);
    a.signal(9);
    a.wait_exit(Duration::from_secs(10)).unwrap();
    let b = Server::start(&["--load", sp, "--save", ""]);
    let mut c = b.conn();
    let again: String = q(&mut c, &["DEBUG", "DIGEST"]);
    assert_eq!(again, digest);
    for db in [0, 1, 7, 15] {
        let _: () = q(&mut c, &["SELECT", &db.to_string()]);
        let v: String = q(&mut c, &["GET", "k"]);
        assert_eq!(v, format!("in {db}"));
        let ttl: i64 = q(&mut c, &["TTL", "t"]);
        assert!((990..=1000).contains(&ttl), "{ttl}");
    }
    drop(b);
    let (code, log) = common::run_to_exit(&["--load", sp, "--databases", "8", "--port", "0"]);
    assert_ne!(code, Some(0));
    assert!(log.contains("database 15") && log.contains("0 to 7"), "{log}");
}

/// SWAPDB and WATCH of keys past their deadline, as redis-server decides them: a stale key
/// swapped for nothing, nothing swapped for a stale key, a stale key for another stale key
/// leave the transaction alone; a live key swapped in fails it. Each scenario runs on both
/// servers (active expiry off, so the stale keys stay stored) and EXEC must agree.
#[test]
fn swapdb_judges_stale_watched_keys_as_redis_does() {
    // (setup per database, the database the watcher uses)
    let scenarios: &[(&[(u32, &str)], u32)] = &[
        (&[(1, "stale")], 1),
        (&[(0, "stale")], 1),
        (&[(1, "stale"), (0, "stale")], 1),
        (&[(0, "live")], 1),
        (&[(1, "live")], 1),
        (&[(1, "stale"), (0, "live")], 1),
    ];
    let g = Server::start(&["--enable-debug-command", "yes"]);
    let r = RedisServer::start_with(&["--enable-debug-command", "yes"]);
    for (setup, watcher_db) in scenarios {
        let mut results = Vec::new();
        for raw in [g.raw(), r.raw()] {
            let mut c = raw;
            call(&mut c, &["FLUSHALL"]);
            call(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
            for (db, kind) in setup.iter() {
                call(&mut c, &["SELECT", &db.to_string()]);
                match *kind {
                    "stale" => call(&mut c, &["SET", "x", "v", "PX", "1"]),
                    _ => call(&mut c, &["SET", "x", "v"]),
                };
            }
            std::thread::sleep(Duration::from_millis(5));
            call(&mut c, &["SELECT", &watcher_db.to_string()]);
            call(&mut c, &["WATCH", "x"]);
            call(&mut c, &["SWAPDB", "0", "1"]);
            call(&mut c, &["MULTI"]);
            call(&mut c, &["PING"]);
            results.push(call(&mut c, &["EXEC"]));
            call(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
        }
        assert_eq!(results[0], results[1], "setup {setup:?}, watcher in {watcher_db}");
    }
}
