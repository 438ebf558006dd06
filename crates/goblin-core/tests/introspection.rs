//! SLOWLOG, LATENCY and MONITOR against the real binary, with the `redis` crate and raw
//! sockets; the slow log's entries compared with redis-server 7.0.15's for the same session.

mod common;

use common::{read_reply, send, RedisServer, Server};
use redis::Value;
use std::net::TcpStream;
use std::time::Duration;

fn q(c: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

fn bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b.clone(),
        Value::SimpleString(s) => s.clone().into_bytes(),
        Value::VerbatimString { text, .. } => text.clone().into_bytes(),
        other => panic!("not a string: {other:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn arr(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) => a,
        other => panic!("not an array: {other:?}"),
    }
}

/// The argument lists of SLOWLOG GET -1, oldest first.
fn slowlog_args(c: &mut redis::Connection) -> Vec<Vec<String>> {
    let log = q(c, &["SLOWLOG", "GET", "-1"]).unwrap();
    let mut rows: Vec<Vec<String>> = arr(&log)
        .iter()
        .map(|e| {
            let e = arr(e);
            assert_eq!(e.len(), 6, "{e:?}");
            arr(&e[3]).iter().map(|a| String::from_utf8_lossy(&bytes(a)).into_owned()).collect()
        })
        .collect();
    rows.reverse();
    rows
}

/// The same session on goblin-core and redis-server: every command logged, long arguments and
/// argument lists cut the same way, passwords redacted, EXEC's commands logged and EXEC not.
#[test]
fn slowlog_entries_match_redis() {
    let g = Server::start(&[]);
    let r = RedisServer::start();
    let long = "x".repeat(200);
    let many: Vec<String> = (0..40).map(|i| format!("m{i}")).collect();
    let mut logs = Vec::new();
    for c in [&mut g.conn(), &mut r.conn()] {
        q(c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]).unwrap();
        q(c, &["SLOWLOG", "RESET"]).unwrap();
        q(c, &["SET", "k", &long]).unwrap();
        let mut sadd = vec!["SADD", "s"];
        sadd.extend(many.iter().map(String::as_str));
        q(c, &sadd).unwrap();
        let _ = q(c, &["AUTH", "secret"]);
        redis::pipe().atomic().cmd("INCR").arg("n").cmd("GET").arg("n").query::<Value>(c).unwrap();
        logs.push(slowlog_args(c));
    }
    assert_eq!(logs[0], logs[1], "goblin-core's slow log differs from redis-server's");
    let g_log = &logs[0];
    assert!(g_log.iter().any(|e| e[0] == "SET" && e[2].ends_with("... (72 more bytes)")), "{g_log:?}");
    assert!(g_log.iter().any(|e| e.len() == 32 && e[31] == "... (11 more arguments)"), "{g_log:?}");
    assert!(g_log.iter().any(|e| e == &["AUTH", "(redacted)"]), "{g_log:?}");
    assert!(!g_log.iter().any(|e| e[0].eq_ignore_ascii_case("exec")), "{g_log:?}");
}

/// A log of length 0 is off: commands run meanwhile use up no entry ids, so the ids that follow
/// are redis-server 8's (7.0 still numbered them).
#[test]
fn slowlog_ids_skip_nothing_while_the_log_has_no_room() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let mut ids = Vec::new();
    for c in [&mut g.conn(), &mut r.conn()] {
        q(c, &["CONFIG", "SET", "slowlog-max-len", "0"]).unwrap();
        q(c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]).unwrap();
        for _ in 0..20 {
            q(c, &["PING"]).unwrap();
        }
        assert_eq!(int(&q(c, &["SLOWLOG", "LEN"]).unwrap()), 0);
        q(c, &["CONFIG", "SET", "slowlog-max-len", "10"]).unwrap();
        for _ in 0..5 {
            q(c, &["PING"]).unwrap();
        }
        let newest = q(c, &["SLOWLOG", "GET", "1"]).unwrap();
        ids.push(int(&arr(&arr(&newest)[0])[0]));
    }
    assert_eq!(ids[0], ids[1], "goblin-core's newest slow log id against redis-server's");
    assert_eq!(ids[0], 5);
}

#[test]
fn slowlog_len_reset_max_len_threshold_and_errors() {
    let s = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    // The default threshold (10 ms) keeps fast commands out; a 30 ms sleep gets in.
    q(&mut c, &["SLOWLOG", "RESET"]).unwrap();
    q(&mut c, &["SET", "a", "1"]).unwrap();
    q(&mut c, &["DEBUG", "SLEEP", "0.03"]).unwrap();
    let log = q(&mut c, &["SLOWLOG", "GET"]).unwrap();
    let entries = arr(&log);
    assert_eq!(entries.len(), 1, "{log:?}");
    let e = arr(&entries[0]);
    assert!(int(&e[2]) >= 30_000, "the entry holds the command's duration in microseconds: {e:?}");
    assert!(String::from_utf8(bytes(&e[4])).unwrap().starts_with("127.0.0.1:"));
    q(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0", "slowlog-max-len", "3"]).unwrap();
    for i in 0..10 {
        q(&mut c, &["SET", "a", &i.to_string()]).unwrap();
    }
    assert_eq!(int(&q(&mut c, &["SLOWLOG", "LEN"]).unwrap()), 3);
    let ids: Vec<i64> =
        arr(&q(&mut c, &["SLOWLOG", "GET", "2"]).unwrap()).iter().map(|e| int(&arr(e)[0])).collect();
    assert_eq!(ids.len(), 2);
    assert!(ids[0] > ids[1], "newest first: {ids:?}");
    assert_eq!(q(&mut c, &["SLOWLOG", "RESET"]).unwrap(), Value::Okay);
    // RESET itself is logged after it ran.
    assert!(int(&q(&mut c, &["SLOWLOG", "LEN"]).unwrap()) <= 1);
    q(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "-1"]).unwrap();
    q(&mut c, &["SLOWLOG", "RESET"]).unwrap();
    q(&mut c, &["SET", "a", "1"]).unwrap();
    assert_eq!(int(&q(&mut c, &["SLOWLOG", "LEN"]).unwrap()), 0, "-1 turns the log off");
    let err = q(&mut c, &["SLOWLOG", "GET", "-2"]).unwrap_err();
    assert!(err.to_string().contains("count should be greater than or equal to -1"), "{err}");
    let err = q(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "-5"]).unwrap_err();
    assert!(err.to_string().contains("argument must be between -1"), "{err}");
    let err = q(&mut c, &["SLOWLOG", "NOPE"]).unwrap_err();
    assert!(err.to_string().contains("unknown subcommand"), "{err}");
    let got = q(&mut c, &["CONFIG", "GET", "slowlog-max-len"]).unwrap();
    assert_eq!(bytes(&arr(&got)[1]), b"3");
}

/// An active expiry cycle that runs its whole time budget (many keys due at once) is an
/// `expire-cycle` latency event, as in Redis: with a 1 ms threshold, every cycle that stops
/// at its 1 ms budget is one.
#[test]
fn an_expiry_cycle_at_its_budget_is_a_latency_event() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    q(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "1"]).unwrap();
    let fill = "for i = 1, tonumber(ARGV[1]) do redis.call('set', 'k:' .. i, 'v', 'px', 200) end";
    q(&mut c, &["EVAL", fill, "0", "200000"]).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while int(&q(&mut c, &["DBSIZE"]).unwrap()) != 0 {
        assert!(std::time::Instant::now() < deadline, "the keys never expired");
        std::thread::sleep(Duration::from_millis(20));
    }
    let latest = q(&mut c, &["LATENCY", "LATEST"]).unwrap();
    let events: Vec<Vec<u8>> = arr(&latest).iter().map(|r| bytes(&arr(r)[0])).collect();
    assert!(events.contains(&b"expire-cycle".to_vec()), "{latest:?}");
    let graph = String::from_utf8(bytes(&q(&mut c, &["LATENCY", "GRAPH", "expire-cycle"]).unwrap())).unwrap();
    assert!(graph.starts_with("expire-cycle - high "), "{graph}");
}

/// An eviction round long enough to pass the threshold is an `eviction-cycle` latency event,
/// as in Redis: here the round CONFIG SET maxmemory starts, evicting 200,000 keys at once
/// (each a DEL into the round's batch), with a 1 ms threshold.
#[test]
fn a_long_eviction_round_is_a_latency_event() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    q(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "1"]).unwrap();
    q(&mut c, &["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]).unwrap();
    let fill = "for i = 1, tonumber(ARGV[1]) do redis.call('set', 'k:' .. i, string.rep('v', 100)) end";
    q(&mut c, &["EVAL", fill, "0", "200000"]).unwrap();
    q(&mut c, &["CONFIG", "SET", "maxmemory", "1mb"]).unwrap();
    assert!(int(&q(&mut c, &["DBSIZE"]).unwrap()) < 100_000, "the round evicted");
    let latest = q(&mut c, &["LATENCY", "LATEST"]).unwrap();
    let events: Vec<Vec<u8>> = arr(&latest).iter().map(|r| bytes(&arr(r)[0])).collect();
    assert!(events.contains(&b"eviction-cycle".to_vec()), "{latest:?}");
}

#[test]
fn latency_monitor_records_spikes_and_histograms() {
    let s = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    // Off by default: nothing recorded.
    q(&mut c, &["DEBUG", "SLEEP", "0.06"]).unwrap();
    assert_eq!(arr(&q(&mut c, &["LATENCY", "LATEST"]).unwrap()).len(), 0);
    q(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "50"]).unwrap();
    q(&mut c, &["SET", "k", "v"]).unwrap();
    q(&mut c, &["DEBUG", "SLEEP", "0.06"]).unwrap();
    let latest = q(&mut c, &["LATENCY", "LATEST"]).unwrap();
    let rows = arr(&latest);
    assert_eq!(rows.len(), 1, "{latest:?}");
    let row = arr(&rows[0]);
    assert_eq!(bytes(&row[0]), b"command");
    assert!(int(&row[2]) >= 60 && int(&row[3]) >= int(&row[2]), "{row:?}");
    let hist = q(&mut c, &["LATENCY", "HISTORY", "command"]).unwrap();
    assert_eq!(arr(&hist).len(), 1);
    let graph = String::from_utf8(bytes(&q(&mut c, &["LATENCY", "GRAPH", "command"]).unwrap())).unwrap();
    assert!(graph.starts_with("command - high ") && graph.contains("low"), "{graph}");
    let err = q(&mut c, &["LATENCY", "GRAPH", "nothing"]).unwrap_err();
    assert!(err.to_string().contains("No samples available for event 'nothing'"), "{err}");
    assert!(!bytes(&q(&mut c, &["LATENCY", "DOCTOR"]).unwrap()).is_empty());
    assert_eq!(int(&q(&mut c, &["LATENCY", "RESET"]).unwrap()), 1);
    assert_eq!(arr(&q(&mut c, &["LATENCY", "LATEST"]).unwrap()).len(), 0);

    // Histograms: every call of SET counted, the last cumulative bucket holds them all.
    for i in 0..25 {
        q(&mut c, &["SET", "k", &i.to_string()]).unwrap();
    }
    let h = q(&mut c, &["LATENCY", "HISTOGRAM", "set", "get"]).unwrap();
    let h = arr(&h);
    assert_eq!(h.len(), 2, "only SET has calls among the names given: {h:?}");
    assert_eq!(bytes(&h[0]), b"set");
    let body = arr(&h[1]);
    assert_eq!(bytes(&body[0]), b"calls");
    assert_eq!(int(&body[1]), 26);
    let buckets = arr(&body[3]);
    assert!(buckets.len() >= 2 && buckets.len().is_multiple_of(2));
    assert_eq!(int(&buckets[buckets.len() - 1]), 26, "cumulative counts end at the call count");
    // Rows at powers of two of nanoseconds from 1024, in whole microseconds, as Redis prints
    // them (1, 2, 4 ... 32, 65, 131 ...), each where the count grew.
    let rows: Vec<(i64, i64)> = buckets.chunks(2).map(|p| (int(&p[0]), int(&p[1]))).collect();
    for w in rows.windows(2) {
        assert!(w[0].0 < w[1].0 && w[0].1 < w[1].1, "{rows:?}");
    }
    assert!(rows.iter().all(|(us, _)| (0..31).any(|k| (1024i64 << k) / 1000 == *us)), "{rows:?}");
}

/// Reads one `+...` MONITOR line, skipping the CLIENT SETINFO the `redis` crate sends when it
/// connects.
fn monitor_line(m: &mut TcpStream) -> String {
    loop {
        let line = String::from_utf8(read_reply(m)).unwrap();
        if !line.contains("\"CLIENT\" \"SETINFO\"") {
            return line;
        }
    }
}

#[test]
fn monitor_streams_executed_commands() {
    let s = Server::start(&[]);
    let mut m = s.raw();
    send(&mut m, b"MONITOR\r\n");
    assert_eq!(read_reply(&mut m), b"+OK\r\n");
    let mut c = s.conn();
    q(&mut c, &["SET", "k", "a \"quoted\"\nvalue"]).unwrap();
    q(&mut c, &["CONFIG", "GET", "port"]).unwrap(); // admin: not shown
    let _ = q(&mut c, &["AUTH", "pw"]);
    redis::pipe().atomic().cmd("INCR").arg("n").query::<Value>(&mut c).unwrap();
    let _ = q(&mut c, &["NOSUCHCOMMAND"]); // refused before running: not shown

    let first = monitor_line(&mut m);
    let re_ok = first.starts_with('+')
        && first.contains(" [0 127.0.0.1:")
        && first.ends_with("] \"SET\" \"k\" \"a \\\"quoted\\\"\\nvalue\"\r\n");
    assert!(re_ok, "{first:?}");
    let stamp: f64 = first[1..first.find(' ').unwrap()].parse().unwrap();
    assert!(stamp > 1.7e9, "a unix timestamp with microseconds: {first}");
    assert!(monitor_line(&mut m).ends_with("\"AUTH\" \"(redacted)\"\r\n"));
    assert!(monitor_line(&mut m).ends_with("\"MULTI\"\r\n"));
    assert!(monitor_line(&mut m).ends_with("\"INCR\" \"n\"\r\n"));
    assert!(monitor_line(&mut m).ends_with("\"EXEC\"\r\n"));
    // The monitor is flagged O in CLIENT LIST.
    let list = String::from_utf8(bytes(&q(&mut c, &["CLIENT", "LIST"]).unwrap())).unwrap();
    assert!(list.lines().any(|l| l.contains("flags=O") && l.contains("cmd=monitor")), "{list}");
    // Another client's PING reaches it after the CLIENT LIST line.
    q(&mut c, &["PING"]).unwrap();
    assert!(monitor_line(&mut m).ends_with("\"CLIENT\" \"LIST\"\r\n"));
    assert!(monitor_line(&mut m).ends_with("\"PING\"\r\n"));
    // A script's commands follow its EVAL line, as the script's.
    q(&mut c, &["EVAL", "return redis.call('SET', KEYS[1], ARGV[1])", "1", "sk", "sv"]).unwrap();
    assert!(monitor_line(&mut m).contains("\"EVAL\""));
    let inner = monitor_line(&mut m);
    assert!(inner.contains(" [0 lua] \"SET\" \"sk\" \"sv\""), "{inner}");
    // Inside a transaction too (ioredis's tests watch for the EVALSHA line to tell whether it
    // fell back to EVAL).
    redis::pipe()
        .atomic()
        .cmd("EVAL")
        .arg("return redis.call('GET', KEYS[1])")
        .arg(1)
        .arg("sk")
        .query::<Value>(&mut c)
        .unwrap();
    assert!(monitor_line(&mut m).ends_with("\"MULTI\"\r\n"));
    let eval = monitor_line(&mut m);
    assert!(eval.contains("\"EVAL\" \"return redis.call('GET', KEYS[1])\" \"1\" \"sk\""), "{eval}");
    assert!(monitor_line(&mut m).contains(" [0 lua] \"GET\" \"sk\""));
    assert!(monitor_line(&mut m).ends_with("\"EXEC\"\r\n"));
    // A closed monitor is dropped; the server goes on.
    drop(m);
    std::thread::sleep(Duration::from_millis(50));
    q(&mut c, &["SET", "after", "1"]).unwrap();
    assert_eq!(bytes(&q(&mut c, &["GET", "after"]).unwrap()), b"1");
    // MONITOR inside a transaction is refused at EXEC, as in Redis.
    let mut t = s.raw();
    send(&mut t, b"MULTI\r\nMONITOR\r\nEXEC\r\n");
    assert_eq!(read_reply(&mut t), b"+OK\r\n");
    assert_eq!(read_reply(&mut t), b"+QUEUED\r\n");
    let exec = String::from_utf8(read_reply(&mut t)).unwrap();
    assert!(exec.contains("MONITOR isn't allowed for DENY BLOCKING client"), "{exec}");
}

/// Field names by section of `INFO everything`.
fn info_fields(c: &mut redis::Connection) -> Vec<(String, Vec<String>)> {
    let text = String::from_utf8(bytes(&q(c, &["INFO", "everything"]).unwrap())).unwrap();
    let mut secs: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("# ") {
            secs.push((name.to_ascii_lowercase(), Vec::new()));
        } else if let (Some((field, _)), Some(sec)) = (line.split_once(':'), secs.last_mut()) {
            sec.1.push(field.to_string());
        }
    }
    secs
}

/// Clients and monitoring tools read INFO fields by name (a popular client's test setup stops
/// without `cluster_enabled`): every section and field redis-server 7.0.15 prints for an idle
/// server is printed by goblin-core too (the per-command and per-error rows aside, which
/// depend on what ran).
#[test]
fn info_has_every_field_redis_prints() {
    let g = Server::start(&[]);
    let r = RedisServer::start();
    let ours = info_fields(&mut g.conn());
    let theirs = info_fields(&mut r.conn());
    let mut missing = Vec::new();
    for (sec, fields) in &theirs {
        let Some((_, have)) = ours.iter().find(|(s, _)| s == sec) else {
            missing.push(format!("section {sec}"));
            continue;
        };
        if matches!(sec.as_str(), "commandstats" | "errorstats" | "latencystats" | "keyspace") {
            continue;
        }
        for f in fields {
            if !have.contains(f) {
                missing.push(format!("{sec}:{f}"));
            }
        }
    }
    assert!(missing.is_empty(), "INFO lacks what redis-server prints: {missing:?}");
    let cluster = &ours.iter().find(|(s, _)| s == "cluster").expect("cluster section").1;
    assert_eq!(cluster, &["cluster_enabled".to_string()]);
}

#[test]
fn config_set_duplicates_and_getkeysandflags() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let err = q(&mut c, &["CONFIG", "SET", "maxclients", "100", "MAXCLIENTS", "200"]).unwrap_err();
    assert!(err.to_string().contains("'MAXCLIENTS') - duplicate parameter"), "{err}");
    // Nothing was applied: all or nothing.
    let got = q(&mut c, &["CONFIG", "GET", "maxclients"]).unwrap();
    assert_ne!(bytes(&arr(&got)[1]), b"100");
    // An alias and its name are two names.
    q(&mut c, &["CONFIG", "SET", "lua-time-limit", "10", "busy-reply-threshold", "20"]).unwrap();
    let got = q(&mut c, &["COMMAND", "GETKEYSANDFLAGS", "MSET", "a", "1", "b", "2"]).unwrap();
    let rows = arr(&got);
    assert_eq!(rows.len(), 2);
    assert_eq!(bytes(&arr(&rows[1])[0]), b"b");
    assert!(!arr(&arr(&rows[0])[1]).is_empty(), "each key carries its flags");
    let err = q(&mut c, &["COMMAND", "GETKEYSANDFLAGS", "PING"]).unwrap_err();
    assert!(err.to_string().contains("no key arguments"), "{err}");
}

/// `timeout`: an idle client is closed; a subscriber, which waits by design, is not.
#[test]
fn idle_clients_are_closed_after_timeout() {
    use std::io::{Read, Write};
    let s = Server::start(&[]);
    let mut c = s.conn();
    q(&mut c, &["CONFIG", "SET", "timeout", "1", "hz", "1000"]).unwrap();
    let got = q(&mut c, &["CONFIG", "GET", "hz"]).unwrap();
    assert_eq!(bytes(&arr(&got)[1]), b"500", "hz is clamped to 500 as in Redis");
    let mut idle = s.raw();
    let mut sub = s.raw();
    sub.write_all(b"SUBSCRIBE ch\r\n").unwrap();
    read_reply(&mut sub);
    std::thread::sleep(Duration::from_millis(2600));
    let mut buf = [0u8; 16];
    assert_eq!(idle.read(&mut buf).unwrap(), 0, "the idle client was closed");
    sub.write_all(b"PING\r\n").unwrap();
    assert!(!read_reply(&mut sub).is_empty(), "the subscriber is still served");
}

/// The encoding thresholds are settings: CONFIG SET changes when a collection leaves its
/// compact form, as in redis-server (OBJECT ENCODING compared after each step).
#[test]
fn encoding_thresholds_follow_config_set_like_redis() {
    let g = Server::start(&[]);
    let r = RedisServer::start();
    let steps: &[&[&str]] = &[
        &["CONFIG", "SET", "hash-max-listpack-entries", "4", "hash-max-ziplist-value", "8"],
        &["HSET", "h", "a", "1", "b", "2", "c", "3", "d", "4"],
        &["OBJECT", "ENCODING", "h"],
        &["HSET", "h", "e", "5"],
        &["OBJECT", "ENCODING", "h"],
        &["HSET", "h2", "a", "123456789"],
        &["OBJECT", "ENCODING", "h2"],
        &["CONFIG", "SET", "set-max-intset-entries", "3"],
        &["SADD", "s", "1", "2", "3"],
        &["OBJECT", "ENCODING", "s"],
        &["SADD", "s", "4"],
        &["OBJECT", "ENCODING", "s"],
        &["CONFIG", "SET", "zset-max-ziplist-entries", "2"],
        &["ZADD", "z", "1", "a", "2", "b"],
        &["OBJECT", "ENCODING", "z"],
        &["ZADD", "z", "3", "c"],
        &["OBJECT", "ENCODING", "z"],
        &["CONFIG", "GET", "zset-max-listpack-entries"],
        &["CONFIG", "SET", "list-max-ziplist-size", "16"],
        &["CONFIG", "GET", "list-max-listpack-size"],
        &["CONFIG", "SET", "hash-max-listpack-entries", "-1"],
    ];
    let mut outs = Vec::new();
    for c in [&mut g.conn(), &mut r.conn()] {
        let mut got = Vec::new();
        for s in steps {
            got.push(format!("{:?}", q(c, s).map_err(|e| e.kind())));
        }
        q(c, &["CONFIG", "SET", "hash-max-listpack-entries", "512", "hash-max-listpack-value", "64"])
            .unwrap();
        q(c, &["CONFIG", "SET", "set-max-intset-entries", "512"]).unwrap();
        q(c, &["CONFIG", "SET", "zset-max-listpack-entries", "128"]).unwrap();
        outs.push(got);
    }
    for (i, (ours, theirs)) in outs[0].iter().zip(&outs[1]).enumerate() {
        if i == 11 {
            // An intset past its limit: Redis 7.0 goes to a hashtable, 7.2 (which goblin-core
            // follows) to a listpack while within set-max-listpack-entries.
            assert!(ours.contains("listpack") && theirs.contains("hashtable"), "{ours} {theirs}");
            continue;
        }
        assert_eq!(ours, theirs, "step {i}: {:?}", steps[i]);
    }
}

/// The DEBUG subcommands test suites lean on: RELOAD keeps every value (and the functions),
/// SET-ACTIVE-EXPIRE 0 leaves an expired key in place until it is read, PROTOCOL answers each
/// RESP3 type.
#[test]
fn debug_reload_active_expire_and_protocol() {
    let s = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    q(&mut c, &["HSET", "h", "a", "1"]).unwrap();
    q(&mut c, &["RPUSH", "l", "x", "y"]).unwrap();
    q(&mut c, &["SET", "t", "v", "EX", "100"]).unwrap();
    let before = q(&mut c, &["DEBUG", "DIGEST"]).unwrap();
    assert_eq!(q(&mut c, &["DEBUG", "RELOAD"]).unwrap(), Value::Okay);
    assert_eq!(q(&mut c, &["DEBUG", "DIGEST"]).unwrap(), before, "the same dataset after a reload");
    assert!(int(&q(&mut c, &["TTL", "t"]).unwrap()) > 90);

    q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).unwrap();
    q(&mut c, &["SET", "e", "v", "PX", "1"]).unwrap();
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(int(&q(&mut c, &["DBSIZE"]).unwrap()), 4, "nothing expired it actively");
    assert_eq!(q(&mut c, &["GET", "e"]).unwrap(), Value::Nil);
    assert_eq!(int(&q(&mut c, &["DBSIZE"]).unwrap()), 3);
    q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]).unwrap();

    let mut raw = s.raw();
    send(&mut raw, b"HELLO 3\r\n");
    read_reply(&mut raw);
    for (kind, want) in [
        ("bignum", "(1234567999999999999999999999999999999\r\n"),
        ("true", "#t\r\n"),
        ("double", ",3.141\r\n"),
        ("null", "_\r\n"),
    ] {
        send(&mut raw, format!("DEBUG PROTOCOL {kind}\r\n").as_bytes());
        assert_eq!(String::from_utf8(read_reply(&mut raw)).unwrap(), want, "{kind}");
    }
    let obj = bytes(&q(&mut c, &["DEBUG", "OBJECT", "h"]).unwrap());
    assert!(String::from_utf8(obj).unwrap().contains("encoding:listpack"));
}

/// DEBUG OBJECT of a list past one listpack node reports the quicklist Redis 8.2 builds for
/// it (nodes, average entries, the node bound, compression, the listpacks' bytes), under the
/// default and changed `list-max-listpack-size` and `list-compress-depth`.
#[test]
fn debug_object_of_a_quicklist_matches_redis8() {
    let g = Server::start(&["--enable-debug-command", "yes"]);
    let r = RedisServer::start8_with(&["--enable-debug-command", "yes"]);
    let numbers: Vec<String> = (1..=20_000).map(|i| i.to_string()).collect();
    let words: Vec<String> = (0..3_000).map(|i| format!("word-{i}-{}", "x".repeat(i % 40))).collect();
    let ql = |c: &mut redis::Connection, key: &str| -> String {
        let line = String::from_utf8(bytes(&q(c, &["DEBUG", "OBJECT", key]).unwrap())).unwrap();
        let encoding = line.split(' ').find(|f| f.starts_with("encoding:")).unwrap_or("?").to_string();
        line.find(" ql_nodes").map_or(encoding, |i| line[i..].to_string())
    };
    let mut outs = Vec::new();
    for c in [&mut g.conn(), &mut r.conn()] {
        let mut got = Vec::new();
        let push = |c: &mut redis::Connection, key: &str, items: &[String]| {
            let _: i64 = redis::cmd("RPUSH").arg(key).arg(items).query(c).unwrap();
        };
        push(c, "nums", &numbers);
        push(c, "words", &words);
        push(c, "small", &numbers[..10]);
        got.push(ql(c, "nums"));
        got.push(ql(c, "words"));
        got.push(ql(c, "small"));
        q(c, &["CONFIG", "SET", "list-max-listpack-size", "-1", "list-compress-depth", "12"]).unwrap();
        push(c, "nums2", &numbers[..6000]);
        got.push(ql(c, "nums2"));
        q(c, &["CONFIG", "SET", "list-max-listpack-size", "100", "list-compress-depth", "0"]).unwrap();
        push(c, "words2", &words);
        got.push(ql(c, "words2"));
        q(c, &["CONFIG", "SET", "list-max-listpack-size", "-2"]).unwrap();
        outs.push(got);
    }
    assert_eq!(outs[0], outs[1], "goblin-core, then redis-server 8.2");
    assert!(outs[0][0].contains("ql_listpack_max:-2 ql_compressed:0"), "{:?}", outs[0]);
    assert!(outs[0][3].contains("ql_listpack_max:-1 ql_compressed:1"), "{:?}", outs[0]);
}

/// OBJECT ENCODING of strings follows Redis: `raw` once APPEND, SETRANGE or SETBIT modified a
/// value in place, `int`/`embstr` again after a plain SET or INCR.
#[test]
fn string_encodings_after_in_place_writes_match_redis() {
    let g = Server::start(&[]);
    let r = RedisServer::start();
    let steps: &[&[&str]] = &[
        &["SET", "s", "abc"],
        &["OBJECT", "ENCODING", "s"],
        &["APPEND", "s", "def"],
        &["OBJECT", "ENCODING", "s"],
        &["SET", "n", "12"],
        &["APPEND", "n", "3"],
        &["OBJECT", "ENCODING", "n"],
        &["GET", "n"],
        &["INCR", "n"],
        &["OBJECT", "ENCODING", "n"],
        &["SETRANGE", "n", "0", "9"],
        &["OBJECT", "ENCODING", "n"],
        &["SET", "n", "7"],
        &["OBJECT", "ENCODING", "n"],
        &["SETBIT", "b", "3", "1"],
        &["OBJECT", "ENCODING", "b"],
        &["SET", "b", "x"],
        &["OBJECT", "ENCODING", "b"],
        // APPEND to a missing key stores its argument as SET would: int, embstr or raw.
        &["APPEND", "new-int", "5"],
        &["OBJECT", "ENCODING", "new-int"],
        &["APPEND", "new-short", "hello"],
        &["OBJECT", "ENCODING", "new-short"],
        &["APPEND", "new-empty", ""],
        &["OBJECT", "ENCODING", "new-empty"],
        &["STRLEN", "new-empty"],
        &["APPEND", "new-long", "x".repeat(100).leak()],
        &["OBJECT", "ENCODING", "new-long"],
        &["SETRANGE", "new-range", "0", "hi"],
        &["OBJECT", "ENCODING", "new-range"],
        &["SET", "n2", "40"],
        &["SETRANGE", "n2", "1", "2"],
        &["OBJECT", "ENCODING", "n2"],
        &["GET", "n2"],
        &["BITFIELD", "new-bf", "SET", "u8", "0", "65"],
        &["OBJECT", "ENCODING", "new-bf"],
    ];
    let mut outs = Vec::new();
    for c in [&mut g.conn(), &mut r.conn()] {
        outs.push(steps.iter().map(|s| format!("{:?}", q(c, s).map_err(|e| e.kind()))).collect::<Vec<_>>());
    }
    for (i, (ours, theirs)) in outs[0].iter().zip(&outs[1]).enumerate() {
        assert_eq!(ours, theirs, "step {i}: {:?}", steps[i]);
    }
}

/// WATCH and expiry as Redis 7: a watched key that expires before EXEC fails it; deleting a key
/// that was already past its deadline when watched does not. A RESP2 subscriber with CLIENT
/// REPLY OFF still gets its confirmation and its messages.
#[test]
fn watch_expiry_rules_and_subscribe_under_reply_off() {
    let s = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).unwrap();
    q(&mut c, &["SET", "key", "1", "PX", "100"]).unwrap();
    q(&mut c, &["WATCH", "key"]).unwrap();
    std::thread::sleep(Duration::from_millis(150));
    let res: Value = redis::pipe().atomic().cmd("INCR").arg("key").query(&mut c).unwrap();
    assert_eq!(res, Value::Nil, "EXEC fails: the watched key expired");

    q(&mut c, &["SET", "x", "foo", "PX", "1"]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    q(&mut c, &["WATCH", "x"]).unwrap();
    q(&mut c, &["DEL", "x"]).unwrap();
    let res: Value = redis::pipe().atomic().cmd("PING").query(&mut c).unwrap();
    assert_eq!(res, Value::Array(vec![Value::SimpleString("PONG".into())]), "{res:?}");
    q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]).unwrap();

    let mut sub = s.raw();
    send(&mut sub, b"CLIENT REPLY OFF\r\nPSUBSCRIBE *\r\n");
    assert_eq!(read_reply(&mut sub), b"*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n");
    q(&mut c, &["PUBLISH", "ch", "hi"]).unwrap();
    assert_eq!(read_reply(&mut sub), b"*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$2\r\nch\r\n$2\r\nhi\r\n");
}

/// The deprecated GEORADIUS family answers as redis-server does (clients still test it).
#[test]
fn georadius_family_matches_redis() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let steps: &[&[&str]] = &[
        &["GEOADD", "Sicily", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"],
        &["GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHDIST", "ASC"],
        &["GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHCOORD", "WITHHASH", "COUNT", "1"],
        &["GEORADIUS_RO", "Sicily", "15", "37", "100", "km"],
        &["GEORADIUSBYMEMBER", "Sicily", "Palermo", "200", "km", "DESC"],
        &["GEORADIUSBYMEMBER_RO", "Sicily", "Palermo", "10", "km"],
        &["GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "dst"],
        &["ZRANGE", "dst", "0", "-1", "WITHSCORES"],
        &["GEORADIUSBYMEMBER", "Sicily", "Palermo", "200", "km", "STOREDIST", "dd"],
        &["ZRANGE", "dd", "0", "-1"],
        &["GEORADIUS_RO", "Sicily", "15", "37", "200", "km", "STORE", "x"],
        &["GEORADIUSBYMEMBER", "Sicily", "Nowhere", "200", "km"],
        &["GEORADIUS", "Sicily", "15", "37", "-1", "km"],
    ];
    let mut outs = Vec::new();
    for c in [&mut g.conn(), &mut r.conn()] {
        outs.push(steps.iter().map(|s| format!("{:?}", q(c, s))).collect::<Vec<_>>());
    }
    for (i, (ours, theirs)) in outs[0].iter().zip(&outs[1]).enumerate() {
        assert_eq!(ours, theirs, "step {i}: {:?}", steps[i]);
    }
}

/// DEBUG ERROR answers the given error; MODULE LIST is empty and LOAD refused; LOLWUT names the
/// version.
#[test]
fn debug_error_module_and_lolwut() {
    let s = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    let err = q(&mut c, &["DEBUG", "ERROR", "LOADING Redis is loading the dataset in memory"]).unwrap_err();
    assert_eq!(err.code(), Some("LOADING"), "{err}");
    assert_eq!(arr(&q(&mut c, &["MODULE", "LIST"]).unwrap()).len(), 0);
    assert!(q(&mut c, &["MODULE", "LOAD", "/nowhere.so"]).is_err());
    let art = String::from_utf8(bytes(&q(&mut c, &["LOLWUT"]).unwrap())).unwrap();
    assert!(art.contains("Redis ver. "), "{art}");
}

/// CLIENT INFO has Redis 8.2's fields in its order (`watch`, `io-thread`, `tot-net-in`,
/// `tot-net-out`, `tot-cmds` included), and after the same requests on a fresh connection
/// the same values for those that do not depend on the process (ids, ports, memory, times).
#[test]
fn client_info_fields_match_redis8() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let mut infos = Vec::new();
    for port in [g.port, r.port] {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        for req in ["PING", "WATCH a b c", "SET x 1", "GET x", "CLIENT SETNAME me", "SELECT 3"] {
            send(&mut s, format!("{req}\r\n").as_bytes());
            read_reply(&mut s);
        }
        send(&mut s, b"CLIENT INFO\r\n");
        let reply = String::from_utf8(read_reply(&mut s)).unwrap();
        let line = reply.lines().nth(1).unwrap_or_default().to_string();
        infos.push(line);
    }
    let fields = |line: &str| -> Vec<(String, String)> {
        line.split(' ')
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (k.to_string(), v.to_string())
            })
            .collect()
    };
    let (ours, theirs) = (fields(&infos[0]), fields(&infos[1]));
    let names = |f: &[(String, String)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(names(&ours), names(&theirs), "{} / {}", infos[0], infos[1]);
    const COMPARED: &[&str] = &[
        "name",
        "flags",
        "db",
        "sub",
        "psub",
        "ssub",
        "multi",
        "watch",
        "qbuf",
        "obl",
        "oll",
        "events",
        "cmd",
        "user",
        "redir",
        "resp",
        "lib-name",
        "lib-ver",
        "tot-net-in",
        "tot-net-out",
        "tot-cmds",
    ];
    for (k, v) in &ours {
        if COMPARED.contains(&k.as_str()) {
            let want = &theirs.iter().find(|(t, _)| t == k).unwrap().1;
            assert_eq!(v, want, "{k}: {} / {}", infos[0], infos[1]);
        }
    }
    let watch = ours.iter().find(|(k, _)| k == "watch").unwrap();
    assert_eq!(watch.1, "3");
}

/// `hll-sparse-max-bytes` decides when a sparse HyperLogLog turns dense, as in redis-server
/// 8.2 (the same bytes after the same PFADDs under each bound, PFDEBUG ENCODING alike); a
/// memory value is taken; PFSELFTEST passes.
#[test]
fn hll_sparse_bound_and_selftest_like_redis8() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let mut outs = Vec::new();
    for c in [&mut g.conn(), &mut r.conn()] {
        let mut got = Vec::new();
        for (i, bound) in ["0", "40", "200", "1kb", "3000"].iter().enumerate() {
            got.push(format!("{:?}", q(c, &["CONFIG", "SET", "hll-sparse-max-bytes", bound])));
            got.push(format!("{:?}", q(c, &["CONFIG", "GET", "hll-sparse-max-bytes"])));
            let key = format!("h{i}");
            for batch in 0..8 {
                let elems: Vec<String> = (0..batch * 7 + 1).map(|e| format!("e{batch}-{e}")).collect();
                let _: i64 = redis::cmd("PFADD").arg(&key).arg(&elems).query(c).unwrap();
                got.push(format!("{:?}", q(c, &["PFDEBUG", "ENCODING", &key])));
            }
            got.push(format!("{:?}", q(c, &["GET", &key])));
        }
        got.push(format!(
            "{:?}",
            q(c, &["CONFIG", "SET", "hll-sparse-max-bytes", "x"]).map_err(|e| e.kind())
        ));
        outs.push(got);
    }
    for (i, (ours, theirs)) in outs[0].iter().zip(&outs[1]).enumerate() {
        assert_eq!(ours, theirs, "step {i}");
    }
    assert!(outs[0].iter().any(|s| s.contains("sparse")) && outs[0].iter().any(|s| s.contains("dense")));
    assert_eq!(q(&mut g.conn(), &["PFSELFTEST"]).unwrap(), Value::Okay);
}

/// INFO's clients section has Redis 8.2's fields with its values for the same clients: one
/// watching two keys, one subscribed, one blocked on two lists, one blocked in XREADGROUP (a
/// key a missing stream also answers), one tracking.
#[test]
fn info_clients_counts_match_redis8() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let mut sections = Vec::new();
    for port in [g.port, r.port] {
        let open = || {
            let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s
        };
        let mut admin = open();
        let call = |s: &mut TcpStream, line: &str| {
            send(s, format!("{line}\r\n").as_bytes());
            read_reply(s)
        };
        call(&mut admin, "XGROUP CREATE s g $ MKSTREAM");
        let (mut w, mut sub, mut bl, mut xr, mut tr) = (open(), open(), open(), open(), open());
        call(&mut w, "WATCH a b");
        call(&mut sub, "SUBSCRIBE x");
        call(&mut tr, "CLIENT TRACKING on");
        send(&mut bl, b"BLPOP l1 l2 0\r\n");
        send(&mut xr, b"XREADGROUP GROUP g c BLOCK 0 STREAMS s >\r\n");
        let fields = |text: &str| -> Vec<String> {
            // Buffer sizes are each server's own.
            let own = |l: &str| l.starts_with("maxclients") || l.starts_with("client_recent");
            text.lines().filter(|l| l.contains(':') && !own(l)).map(str::to_string).collect()
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let info = loop {
            let info = String::from_utf8(call(&mut admin, "INFO clients")).unwrap();
            if info.contains("blocked_clients:2") || std::time::Instant::now() > deadline {
                break info;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        sections.push(fields(&info));
        drop((w, sub, bl, xr, tr));
    }
    assert_eq!(sections[0], sections[1], "goblin-core, then redis-server 8.2");
    assert!(sections[0].contains(&"total_blocking_keys:3".to_string()), "{:?}", sections[0]);
    assert!(sections[0].contains(&"total_blocking_keys_on_nokey:1".to_string()), "{:?}", sections[0]);
}

/// CLIENT NO-TOUCH: the client's reads and writes leave a key's access time alone (DEBUG
/// OBJECT's `lru`, OBJECT IDLETIME), TOUCH still records one, and so does any command once
/// the mode is off (Redis 7.2's semantics; the clock has one-second steps, hence the waits).
#[test]
fn no_touch_mode_leaves_access_times_alone() {
    let g = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = g.conn();
    let lru = |c: &mut redis::Connection| -> u64 {
        let line = String::from_utf8(bytes(&q(c, &["DEBUG", "OBJECT", "foo"]).unwrap())).unwrap();
        let field = line.split(' ').find_map(|f| f.strip_prefix("lru:")).expect("an lru field");
        field.parse().unwrap()
    };
    q(&mut c, &["SET", "foo", "bar"]).unwrap();
    q(&mut c, &["CLIENT", "NO-TOUCH", "on"]).unwrap();
    let old = lru(&mut c);
    std::thread::sleep(Duration::from_millis(1100));
    q(&mut c, &["GET", "foo"]).unwrap();
    q(&mut c, &["APPEND", "foo", "x"]).unwrap();
    q(&mut c, &["EVAL", "return redis.call('get', KEYS[1])", "1", "foo"]).unwrap();
    assert_eq!(lru(&mut c), old, "no access recorded in no-touch mode");
    assert!(int(&q(&mut c, &["OBJECT", "IDLETIME", "foo"]).unwrap()) >= 1);
    q(&mut c, &["TOUCH", "foo"]).unwrap();
    let touched = lru(&mut c);
    assert!(touched > old, "TOUCH records its access: {touched} > {old}");
    std::thread::sleep(Duration::from_millis(1100));
    q(&mut c, &["CLIENT", "NO-TOUCH", "off"]).unwrap();
    q(&mut c, &["GET", "foo"]).unwrap();
    assert!(lru(&mut c) > touched, "a read records its access again");
}

/// With `enable-debug-command no` (the default) DEBUG refuses even its help, as redis-server
/// does; with it on, the help answers.
#[test]
fn debug_help_needs_the_command_enabled() {
    let g = Server::start(&[]);
    let r = RedisServer::start();
    let refusal = |c: &mut redis::Connection| q(c, &["DEBUG", "HELP"]).unwrap_err().to_string();
    let ours = refusal(&mut g.conn());
    assert_eq!(ours, refusal(&mut r.conn()));
    assert!(ours.contains("DEBUG command not allowed"), "{ours}");
    let on = Server::start(&["--enable-debug-command", "yes"]);
    assert!(!arr(&q(&mut on.conn(), &["DEBUG", "HELP"]).unwrap()).is_empty());
}
