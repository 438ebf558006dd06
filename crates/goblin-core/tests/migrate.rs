//! MIGRATE against real servers: goblin-core moves keys into redis-server 7.0.15 (every type,
//! deadlines, another database, COPY, REPLACE, KEYS, AUTH) and redis-server moves keys into
//! goblin-core; every reply, the errors included, is the one redis-server gives for the same
//! command.

mod common;

use common::{RedisServer, Server};

fn q<T: redis::FromRedisValue>(con: &mut redis::Connection, args: &[&str]) -> T {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// The reply of `args` as text: the value, or the error's text.
fn reply(con: &mut redis::Connection, args: &[&str]) -> String {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    match c.query::<redis::Value>(con) {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or_default()),
    }
}

/// Fills `con` with one key of each type MIGRATE carries, some with deadlines.
fn fill(con: &mut redis::Connection) {
    let _: () = q(con, &["FLUSHALL"]);
    let _: () = q(con, &["SET", "s", "text", "PX", "100000"]);
    let _: () = q(con, &["SET", "n", "12345"]);
    let _: i64 = q(con, &["HSET", "h", "f1", "v1", "f2", "v2"]);
    let _: i64 = q(con, &["ZADD", "z", "1.5", "a", "2", "b"]);
    let _: i64 = q(con, &["RPUSH", "l", "x", "y", "z"]);
    let _: i64 = q(con, &["SADD", "t", "m1", "m2"]);
    let _: String = q(con, &["XADD", "x", "1-1", "f", "v"]);
    let _: i64 = q(con, &["PEXPIRE", "h", "200000"]);
}

/// Every key's type, value (read back by its type's commands) and whether it has a deadline,
/// in database `db` of `con`.
fn contents(con: &mut redis::Connection, db: u32, keys: &[&str]) -> Vec<(String, String, bool)> {
    let _: () = q(con, &["SELECT", &db.to_string()]);
    let out = keys
        .iter()
        .map(|k| {
            let kind: String = q(con, &["TYPE", k]);
            let value = match kind.as_str() {
                "string" => reply(con, &["GET", k]),
                "hash" => {
                    let mut v: Vec<String> = q(con, &["HGETALL", k]);
                    v.sort();
                    format!("{v:?}")
                }
                "zset" => reply(con, &["ZRANGE", k, "0", "-1", "WITHSCORES"]),
                "list" => reply(con, &["LRANGE", k, "0", "-1"]),
                "set" => {
                    let mut v: Vec<String> = q(con, &["SMEMBERS", k]);
                    v.sort();
                    format!("{v:?}")
                }
                "stream" => reply(con, &["XRANGE", k, "-", "+"]),
                _ => String::new(),
            };
            let ttl: i64 = q(con, &["PTTL", k]);
            (format!("{k} {kind}"), value, ttl > 0)
        })
        .collect();
    let _: () = q(con, &["SELECT", "0"]);
    out
}

const KEYS: &[&str] = &["s", "n", "h", "z", "l", "t", "x"];

#[test]
fn goblin_core_migrates_into_redis_server_as_redis_server_does() {
    let target = RedisServer::start();
    let port = target.port.to_string();
    let g = Server::start(&[]);
    let r = RedisServer::start();
    let mut tc = target.conn();
    // The same commands from each source into the same target: the same replies, and the
    // target holds the same values after each.
    let mut replies = Vec::new();
    let mut held = Vec::new();
    for mut src in [g.conn(), r.conn()] {
        let _: () = q(&mut tc, &["FLUSHALL"]);
        fill(&mut src);
        let want = contents(&mut src, 0, KEYS);
        let mut got = Vec::new();
        for cmd in [
            vec!["MIGRATE", "127.0.0.1", &port, "s", "3", "5000"],
            vec!["MIGRATE", "127.0.0.1", &port, "", "3", "5000", "COPY", "KEYS", "n", "h", "missing", "z"],
            vec!["MIGRATE", "127.0.0.1", &port, "", "3", "5000", "KEYS", "n", "h"],
            vec!["MIGRATE", "127.0.0.1", &port, "", "3", "5000", "REPLACE", "KEYS", "n", "l", "t", "x"],
            vec!["MIGRATE", "127.0.0.1", &port, "missing", "3", "5000"],
            vec!["MIGRATE", "127.0.0.1", &port, "z", "16", "5000"],
            vec!["MIGRATE", "127.0.0.1", &port, "z", "3", "5000", "AUTH", "secret"],
            vec!["MIGRATE", "127.0.0.1", &port, "z", "3", "5000", "KEYS", "z"],
            vec!["MIGRATE", "127.0.0.1", &port, "z", "3", "5000", "BOGUS"],
            vec!["MIGRATE", "127.0.0.1", &port, "z", "x", "5000"],
            vec!["MIGRATE", "127.0.0.1", "1", "z", "3", "5000"],
        ] {
            got.push(reply(&mut src, &cmd));
        }
        // What moved left the source; what was copied stayed.
        let left: Vec<i64> = KEYS.iter().map(|k| q(&mut src, &["EXISTS", k])).collect();
        got.push(format!("{left:?}"));
        replies.push(got);
        let there = contents(&mut tc, 3, KEYS);
        // Every key moved or copied arrives as it was (same DUMP body, deadline kept).
        for (have, orig) in there.iter().zip(&want) {
            if !have.0.ends_with(" none") {
                assert_eq!(have, orig, "{} arrived changed", have.0);
            }
        }
        held.push(there);
    }
    assert_eq!(replies[0], replies[1], "goblin-core's replies, then redis-server's");
    assert_eq!(held[0], held[1], "what each source left in the target");
    assert!(held[0].iter().all(|k| !k.0.ends_with(" none")), "every key reached the target: {:?}", held[0]);
    // COMMAND GETKEYS knows where MIGRATE's keys are.
    let mut gc = g.conn();
    let keys: Vec<String> = q(
        &mut gc,
        &["COMMAND", "GETKEYS", "MIGRATE", "h", "1", "", "0", "5", "AUTH2", "u", "p", "KEYS", "a", "b"],
    );
    assert_eq!(keys, ["a", "b"]);
    let keys: Vec<String> = q(&mut gc, &["COMMAND", "GETKEYS", "MIGRATE", "h", "1", "k", "0", "5", "COPY"]);
    assert_eq!(keys, ["k"]);
}

#[test]
fn redis_server_migrates_into_goblin_core_with_auth() {
    let g = Server::start(&["--requirepass", "pw"]);
    let r = RedisServer::start();
    let mut rc = r.conn();
    fill(&mut rc);
    let want = contents(&mut rc, 0, KEYS);
    let port = g.port.to_string();
    let mut cmd = vec!["MIGRATE", "127.0.0.1", &port, "", "2", "5000", "AUTH", "pw", "KEYS"];
    cmd.extend(KEYS);
    let ok: String = q(&mut rc, &cmd);
    assert_eq!(ok, "OK");
    let left: i64 = q(&mut rc, &["DBSIZE"]);
    assert_eq!(left, 0);
    let client = redis::Client::open(format!("redis://:pw@127.0.0.1:{}/", g.port)).unwrap();
    let mut gc = client.get_connection().unwrap();
    assert_eq!(contents(&mut gc, 2, KEYS), want);
}
