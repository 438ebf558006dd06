//! INFO's statistics against redis-server 8.2 doing the same: latency tracking and its
//! percentiles (INFO latencystats, LATENCY HISTOGRAM), errorstats and commandstats of refused,
//! failed and unblocked calls, the event loop figures, and `client-query-buffer-limit`.
//! Each scenario runs on both servers and what a client can observe is compared, so a test
//! fails where goblin-core and Redis part.

mod common;

use common::{RedisServer, Server};
use redis::Value;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::Duration;

fn q(c: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

/// The reply as text: an error as `ERR: <its text>`, anything else as redis-rs prints it.
fn show(r: redis::RedisResult<Value>) -> String {
    match r {
        Ok(Value::Okay) => "OK".into(),
        Ok(Value::BulkString(b)) => String::from_utf8_lossy(&b).into_owned(),
        Ok(Value::Array(a)) => a.into_iter().map(|v| show(Ok(v))).collect::<Vec<_>>().join(" "),
        Ok(Value::Int(n)) => n.to_string(),
        Ok(other) => format!("{other:?}"),
        Err(e) => format!("ERR: {}", e.detail().map(str::to_string).unwrap_or_else(|| e.to_string())),
    }
}

/// The fields of INFO `section` (their names and values).
fn info(c: &mut redis::Connection, section: &str) -> BTreeMap<String, String> {
    let text: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    text.lines().filter_map(|l| l.split_once(':')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A commandstats row without its times: `calls=..,rejected_calls=..,failed_calls=..`.
fn cmdstat(c: &mut redis::Connection, name: &str) -> String {
    let Some(row) = info(c, "commandstats").remove(&format!("cmdstat_{name}")) else {
        return "none".into();
    };
    row.split(',').filter(|f| !f.starts_with("usec")).collect::<Vec<_>>().join(",")
}

/// The percentile names of a latencystats row (`p50,p99,p99.9`), or `none`.
fn percentiles(c: &mut redis::Connection, name: &str) -> String {
    match info(c, "latencystats").remove(&format!("latency_percentiles_usec_{name}")) {
        None => "none".into(),
        Some(row) => row
            .split(',')
            .filter(|f| !f.is_empty())
            .map(|f| f.split_once('=').map_or(f, |(p, _)| p))
            .collect::<Vec<_>>()
            .join(","),
    }
}

fn errorstats(c: &mut redis::Connection) -> String {
    info(c, "errorstats").into_iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

/// Latency tracking on and off, the percentiles shown and their checks, LATENCY HISTOGRAM's
/// calls, CONFIG RESETSTAT: the same on both servers.
fn latency_tracking_session(c: &mut redis::Connection) -> Vec<String> {
    let mut seen = Vec::new();
    let mut note = |what: &str, v: String| seen.push(format!("{what}: {v}"));
    q(c, &["CONFIG", "RESETSTAT"]).unwrap();
    // One name each: a glob's matches come in the order of Redis's dict.
    note("default", show(q(c, &["CONFIG", "GET", "latency-tracking"])));
    note("default percentiles", show(q(c, &["CONFIG", "GET", "latency-tracking-info-percentiles"])));
    q(c, &["CONFIG", "SET", "latency-tracking", "no"]).unwrap();
    q(c, &["SET", "a", "b"]).unwrap();
    note("off", percentiles(c, "set"));
    note("off histogram", show(q(c, &["LATENCY", "HISTOGRAM", "set"])));
    q(c, &["CONFIG", "SET", "latency-tracking", "yes"]).unwrap();
    for _ in 0..3 {
        q(c, &["SET", "a", "b"]).unwrap();
    }
    q(c, &["GET", "a"]).unwrap();
    note("on set", percentiles(c, "set"));
    note("on get", percentiles(c, "get"));
    note("on config|set", percentiles(c, "config|set"));
    let h = q(c, &["LATENCY", "HISTOGRAM", "set"]).unwrap();
    let Value::Array(rows) = &h else { panic!("{h:?}") };
    let Value::Array(body) = &rows[1] else { panic!("{h:?}") };
    note("histogram calls", show(Ok(body[1].clone())));
    q(c, &["CONFIG", "SET", "latency-tracking-info-percentiles", "0.0 50.0 100.0"]).unwrap();
    note("three", show(q(c, &["CONFIG", "GET", "latency-tracking-info-percentiles"])));
    note("three set", percentiles(c, "set"));
    for bad in ["10.0 50.0 a", "10.0 50.0 101.0", "-1", "50  60", "nan"] {
        note(bad, show(q(c, &["CONFIG", "SET", "latency-tracking-info-percentiles", bad])));
        note("kept", show(q(c, &["CONFIG", "GET", "latency-tracking-info-percentiles"])));
    }
    q(c, &["CONFIG", "SET", "latency-tracking-info-percentiles", "99.99 12.5"]).unwrap();
    note("fractions", show(q(c, &["CONFIG", "GET", "latency-tracking-info-percentiles"])));
    note("fractions set", percentiles(c, "set"));
    q(c, &["CONFIG", "SET", "latency-tracking-info-percentiles", ""]).unwrap();
    note("none", show(q(c, &["CONFIG", "GET", "latency-tracking-info-percentiles"])));
    note("none set", percentiles(c, "set"));
    q(c, &["CONFIG", "SET", "latency-tracking-info-percentiles", "50 99 99.9"]).unwrap();
    q(c, &["CONFIG", "RESETSTAT"]).unwrap();
    note("after reset", percentiles(c, "set"));
    note("bad switch", show(q(c, &["CONFIG", "SET", "latency-tracking", "maybe"])));
    seen
}

#[test]
fn latency_tracking_matches_redis8() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let ours = latency_tracking_session(&mut g.conn());
    let theirs = latency_tracking_session(&mut r.conn());
    assert_eq!(ours, theirs);
}

/// A call's percentile is never under its time: 50 ms of DEBUG SLEEP shows as at least
/// 50,000 us at every percentile, and a SET below it.
#[test]
fn latency_percentiles_cover_the_calls() {
    let g = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = g.conn();
    q(&mut c, &["CONFIG", "SET", "latency-tracking-info-percentiles", "1 50 100"]).unwrap();
    q(&mut c, &["DEBUG", "SLEEP", "0.05"]).unwrap();
    q(&mut c, &["SET", "k", "v"]).unwrap();
    let stats = info(&mut c, "latencystats");
    let values = |name: &str| -> Vec<f64> {
        stats[&format!("latency_percentiles_usec_{name}")]
            .split(',')
            .map(|f| f.split_once('=').unwrap().1.parse().unwrap())
            .collect()
    };
    let debug = values("debug");
    assert!(debug.iter().all(|&us| us >= 50_000.0), "{debug:?}");
    // One bucket is at most 1/32 of its values wide, and DEBUG SLEEP oversleeps little.
    assert!(debug.iter().all(|&us| us < 50_000.0 * 1.5), "{debug:?}");
    assert!(values("set")[2] < debug[0], "{stats:?}");
    // LATENCY HISTOGRAM: rows at powers of two of nanoseconds (in whole microseconds), their
    // counts cumulative, the DEBUG call in the row of 2^16 us (65536 ns * 1024 = 67 ms).
    let h = q(&mut c, &["LATENCY", "HISTOGRAM", "debug"]).unwrap();
    assert_eq!(show(Ok(h)), "debug calls 1 histogram_usec 67108 1");
}

/// Errors and refusals counted as Redis counts them: OOM, NOPERM and EXECABORT rejections
/// under their own codes, a subcommand of a data command (XGROUP CREATECONSUMER) with its own
/// row, called directly and from a script, a blocked command failed by CLIENT UNBLOCK, and the
/// cap on error kinds that turns errorstats off until CONFIG RESETSTAT.
fn errorstats_session(c: &mut redis::Connection, port: u16) -> Vec<String> {
    let mut seen = Vec::new();
    macro_rules! note {
        ($what:expr, $v:expr) => {{
            let v = $v;
            seen.push(format!("{}: {}", $what, v));
        }};
    }
    let reset = |c: &mut redis::Connection| q(c, &["CONFIG", "RESETSTAT"]).unwrap();
    reset(c);
    q(c, &["CONFIG", "SET", "maxmemory", "1"]).unwrap();
    note!("oom", show(q(c, &["SET", "a", "b"])));
    q(c, &["CONFIG", "SET", "maxmemory", "0"]).unwrap();
    note!("oom stats", errorstats(c));
    note!("oom set", cmdstat(c, "set"));

    reset(c);
    q(c, &["ACL", "SETUSER", "alice", "on", ">p1pp0", "~cached:*", "+get", "+info", "+multi", "+exec"])
        .unwrap();
    let mut alice = redis::Client::open(format!("redis://alice:p1pp0@127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    note!("noperm", show(q(&mut alice, &["SET", "a", "b"])));
    note!("noperm stats", errorstats(c));
    note!("noperm set", cmdstat(c, "set"));
    q(&mut alice, &["MULTI"]).unwrap();
    note!("noperm in multi", show(q(&mut alice, &["SET", "a", "b"])));
    note!("execabort", show(q(&mut alice, &["EXEC"])));
    note!("execabort stats", errorstats(c));
    note!("execabort exec", cmdstat(c, "exec"));

    reset(c);
    q(c, &["DEL", "mystream"]).unwrap();
    q(c, &["XADD", "mystream", "*", "f", "v"]).unwrap();
    note!("nogroup", show(q(c, &["XGROUP", "CREATECONSUMER", "mystream", "mygroup", "consumer"])));
    note!("nogroup stats", errorstats(c));
    note!("nogroup row", cmdstat(c, "xgroup|createconsumer"));
    note!("xgroup row", cmdstat(c, "xgroup"));
    note!("xinfo", show(q(c, &["XINFO", "STREAM", "nosuchstream"])));
    note!("xinfo row", cmdstat(c, "xinfo|stream"));
    q(c, &["OBJECT", "ENCODING", "mystream"]).unwrap();
    note!("object row", cmdstat(c, "object|encoding"));
    note!("unknown sub", show(q(c, &["OBJECT", "NOPE", "mystream"])));
    note!("unknown sub row", cmdstat(c, "object"));
    reset(c);
    let script = "redis.pcall('XGROUP', 'CREATECONSUMER', 's1', 'mygroup', 'consumer') return 1";
    note!("pcall", show(q(c, &["EVAL", script, "0"])));
    note!("pcall stats", errorstats(c));
    note!("pcall row", cmdstat(c, "xgroup|createconsumer"));
    note!("pcall eval", cmdstat(c, "eval"));

    reset(c);
    let mut blocked =
        redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
    let id = show(q(&mut blocked, &["CLIENT", "ID"]));
    let waiter = std::thread::spawn(move || show(q(&mut blocked, &["BLPOP", "list1", "0"])));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while info(c, "clients")["blocked_clients"] != "1" {
        assert!(std::time::Instant::now() < deadline, "BLPOP never blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
    note!("unblock", show(q(c, &["CLIENT", "UNBLOCK", &id, "ERROR"])));
    note!("unblocked reply", waiter.join().unwrap());
    note!("unblock stats", errorstats(c));
    note!("unblock blpop", cmdstat(c, "blpop"));

    reset(c);
    for i in 0..130 {
        let script = format!("return redis.error_reply('E{i} made up')");
        q(c, &["EVAL", &script, "0"]).unwrap_err();
    }
    note!("capped", errorstats(c));
    note!("capped total", info(c, "stats")["total_error_replies"].clone());
    reset(c);
    note!("reset", errorstats(c));
    note!("after reset", show(q(c, &["EVAL", "return redis.error_reply('E1 again')", "0"])));
    note!("re-enabled", errorstats(c));
    seen
}

#[test]
fn errorstats_match_redis8() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let ours = errorstats_session(&mut g.conn(), g.port);
    let theirs = errorstats_session(&mut r.conn(), r.port);
    assert_eq!(ours, theirs);
    assert!(g.log().contains("Errorstats stopped adding new errors"), "the cap is logged");
}

/// The event loop's figures: turns and their time grow, commands' share included; the
/// debug section's are shown only when asked for by name.
#[test]
fn eventloop_figures_grow_and_debug_is_hidden() {
    let g = Server::start(&[]);
    let mut c = g.conn();
    let first = info(&mut c, "stats");
    for _ in 0..20 {
        q(&mut c, &["SET", "k", "v"]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1700));
    let second = info(&mut c, "stats");
    let n = |m: &BTreeMap<String, String>, f: &str| -> u64 {
        m.get(f).unwrap_or_else(|| panic!("no {f}")).parse().unwrap()
    };
    for f in ["eventloop_cycles", "eventloop_duration_sum", "eventloop_duration_cmd_sum"] {
        assert!(n(&second, f) > n(&first, f), "{f}: {first:?} -> {second:?}");
    }
    assert!(n(&second, "eventloop_duration_cmd_sum") <= n(&second, "eventloop_duration_sum"));
    // The cron's turns alone make several a second.
    assert!(n(&second, "instantaneous_eventloop_cycles_per_sec") > 0, "{second:?}");
    let debug = info(&mut c, "debug");
    let names: Vec<&str> = debug.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "eventloop_cmd_per_cycle_max",
            "eventloop_duration_aof_sum",
            "eventloop_duration_cron_sum",
            "eventloop_duration_max"
        ]
    );
    assert!(n(&debug, "eventloop_cmd_per_cycle_max") >= 1 && n(&debug, "eventloop_duration_cron_sum") > 0);
    for section in ["all", "everything", "default"] {
        assert!(!info(&mut c, section).contains_key("eventloop_duration_max"), "INFO {section}");
    }
}

/// A request past `client-query-buffer-limit` closes its client, which reads the end of the
/// stream (not a reset, which could fail its writes first), and is counted; CONFIG SET checks
/// the value as Redis does.
fn query_buffer_session(c: &mut redis::Connection, port: u16) -> Vec<String> {
    let mut seen = Vec::new();
    q(c, &["CONFIG", "RESETSTAT"]).unwrap();
    seen.push(show(q(c, &["CONFIG", "SET", "client-query-buffer-limit", "1000"])));
    seen.push(show(q(c, &["CONFIG", "SET", "client-query-buffer-limit", "lots"])));
    q(c, &["CONFIG", "SET", "client-query-buffer-limit", "1mb"]).unwrap();
    seen.push(show(q(c, &["CONFIG", "GET", "client-query-buffer-limit"])));
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let value = vec![b'a'; 1 << 20];
    let mut req = format!("*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n${}\r\n", value.len()).into_bytes();
    req.extend_from_slice(&value);
    req.extend_from_slice(b"\r\n");
    let wrote = s.write_all(&req).map_or_else(|e| format!("{:?}", e.kind()), |_| "written".into());
    let mut buf = [0u8; 64];
    let read = match s.read(&mut buf) {
        Ok(0) => "end of stream".to_string(),
        Ok(n) => format!("reply {:?}", String::from_utf8_lossy(&buf[..n])),
        Err(e) => format!("{:?}", e.kind()),
    };
    seen.push(format!("{wrote}, {read}"));
    seen.push(info(c, "stats")["client_query_buffer_limit_disconnections"].clone());
    seen.push(show(q(c, &["EXISTS", "key"])));
    seen.push(show(q(c, &["SET", "small", "fits"])));
    q(c, &["CONFIG", "SET", "client-query-buffer-limit", "1gb"]).unwrap();
    // The output limit leaves a client's first 16 KiB of replies out (Redis's reply buffer):
    // with 10 bytes, INFO still answers, a 100 KB GET closes the client with none of it sent.
    let limits = show(q(c, &["CONFIG", "GET", "client-output-buffer-limit"]));
    q(c, &["CONFIG", "SET", "client-output-buffer-limit", "normal 10 0 0"]).unwrap();
    q(c, &["SET", "key", &"a".repeat(100_000)]).unwrap();
    seen.push(format!("info answers: {}", info(c, "everything").len() > 10));
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n").unwrap();
    let mut got = Vec::new();
    let end = s.read_to_end(&mut got).map_or_else(|e| format!("{:?}", e.kind()), |_| "end of stream".into());
    seen.push(format!("{} bytes, {end}", got.len()));
    seen.push(info(c, "stats")["client_output_buffer_limit_disconnections"].clone());
    let normal = limits.split(' ').skip(1).take(4).collect::<Vec<_>>().join(" ");
    q(c, &["CONFIG", "SET", "client-output-buffer-limit", &normal]).unwrap();
    seen
}

#[test]
fn query_buffer_limit_matches_redis8() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let ours = query_buffer_session(&mut g.conn(), g.port);
    let theirs = query_buffer_session(&mut r.conn(), r.port);
    assert_eq!(ours, theirs);
    assert_eq!(ours[3], "written, end of stream");
    assert!(g.log().contains("Closing client that reached max query buffer length"));
}

fn num(m: &BTreeMap<String, String>, f: &str) -> f64 {
    m.get(f).unwrap_or_else(|| panic!("no {f} in {m:?}")).parse().unwrap()
}

/// How much field `f` grew from INFO `a` to INFO `b`.
fn grew(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>, f: &str) -> f64 {
    num(b, f) - num(a, f)
}

/// The value this many bytes long that `write_big` writes.
const BIG: usize = 1 << 20;

/// Waits until INFO replication's `field` reads `want` on `c`.
fn wait_replication(c: &mut redis::Connection, field: &str, want: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while info(c, "replication").get(field).map(String::as_str) != Some(want) {
        assert!(std::time::Instant::now() < deadline, "{field} never became {want}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SETs a `BIG`-byte value on the primary `p` and waits until the replica `rc` holds it.
fn write_big(p: &mut redis::Connection, rc: &mut redis::Connection) {
    q(p, &["SET", "big", &"x".repeat(BIG)]).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while q(rc, &["STRLEN", "big"]).unwrap() != Value::Int(BIG as i64) {
        assert!(std::time::Instant::now() < deadline, "the write never reached the replica");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Bytes to and from clients and bytes of the replication link are counted apart, as Redis
/// counts them (`total_net_*_bytes` and `total_net_repl_*_bytes`), and their rates over the
/// cron's last samples (`instantaneous_*_kbps`) follow the traffic; the fork of the
/// replica's first sync is counted (`total_forks`, `latest_fork_usec`) until CONFIG RESETSTAT.
#[test]
fn network_and_fork_figures_keep_replication_apart() {
    let g = Server::start(&["--save", ""]);
    let mut p = g.conn();
    let before_fork = info(&mut p, "stats");
    assert_eq!(num(&before_fork, "total_forks"), 0.0);
    assert_eq!(num(&before_fork, "latest_fork_usec"), 0.0);
    // A goblin-core replica over Redis's protocol: what its primary sends it is replication.
    let r = Server::start(&["--save", "", "--replicaof", "127.0.0.1", &g.port.to_string()]);
    let mut rc = r.conn();
    wait_replication(&mut rc, "master_link_status", "up");
    let forked = info(&mut p, "stats");
    assert_eq!(num(&forked, "total_forks"), 1.0, "the replica's sync forks once");
    assert!(num(&forked, "latest_fork_usec") > 0.0, "{forked:?}");

    // The rates compare the cron's samples: let both servers take one before the write.
    std::thread::sleep(Duration::from_millis(250));
    let (p0, r0) = (info(&mut p, "stats"), info(&mut rc, "stats"));
    write_big(&mut p, &mut rc);
    // Two cron samples later the rates include the write.
    std::thread::sleep(Duration::from_millis(300));
    let (p1, r1) = (info(&mut p, "stats"), info(&mut rc, "stats"));
    let big = BIG as f64;
    // The primary: the value came in from a client and went out to the replica; what went
    // out to clients is replies (+OK, INFO), a few kilobytes.
    assert!(grew(&p0, &p1, "total_net_input_bytes") >= big, "{p0:?} -> {p1:?}");
    assert!(grew(&p0, &p1, "total_net_repl_output_bytes") >= big, "{p0:?} -> {p1:?}");
    assert!(grew(&p0, &p1, "total_net_output_bytes") < 64.0 * 1024.0, "{p0:?} -> {p1:?}");
    assert_eq!(grew(&p0, &p1, "total_net_repl_input_bytes"), 0.0);
    // The replica: the value came in over the replication link, not from a client.
    assert!(grew(&r0, &r1, "total_net_repl_input_bytes") >= big, "{r0:?} -> {r1:?}");
    assert!(grew(&r0, &r1, "total_net_input_bytes") < 64.0 * 1024.0, "{r0:?} -> {r1:?}");
    assert!(num(&p1, "instantaneous_input_kbps") > 0.0, "{p1:?}");
    assert!(num(&p1, "instantaneous_output_repl_kbps") > 0.0, "{p1:?}");
    assert!(num(&r1, "instantaneous_input_repl_kbps") > 0.0, "{r0:?} -> {r1:?}");
    assert_eq!(num(&r1, "instantaneous_output_repl_kbps"), 0.0, "{r1:?}");

    q(&mut p, &["CONFIG", "RESETSTAT"]).unwrap();
    let reset = info(&mut p, "stats");
    for f in ["total_forks", "latest_fork_usec", "total_net_repl_output_bytes"] {
        assert_eq!(num(&reset, f), 0.0, "{f} after RESETSTAT");
    }
}

/// The active expiry's cycles that stopped at their 1 ms budget with keys still due are
/// counted (`expired_time_cap_reached_count`): a burst of 200,000 keys due at once is more
/// than one cycle removes; CONFIG RESETSTAT clears the count. How long the cycles took
/// (`expire_cycle_cpu_milliseconds`) is a figure for benchmarks: here only that INFO gives
/// it as whole milliseconds.
#[test]
fn active_expiry_budget_stops_are_counted() {
    let g = Server::start(&["--save", ""]);
    let mut c = g.conn();
    let before = info(&mut c, "stats");
    assert_eq!(num(&before, "expired_time_cap_reached_count"), 0.0);
    let time: Vec<String> = redis::cmd("TIME").query(&mut c).unwrap();
    let now_ms: u64 = time[0].parse::<u64>().unwrap() * 1000 + time[1].parse::<u64>().unwrap() / 1000;
    let due = (now_ms + 4000).to_string();
    const KEYS: usize = 200_000;
    for chunk in 0..KEYS / 10_000 {
        let mut pipe = redis::pipe();
        for i in chunk * 10_000..(chunk + 1) * 10_000 {
            pipe.cmd("SET").arg(format!("k{i}")).arg("v").arg("PXAT").arg(&due).ignore();
        }
        pipe.query::<()>(&mut c).unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let stats = info(&mut c, "stats");
        if num(&stats, "expired_keys") as usize == KEYS {
            assert!(num(&stats, "expired_time_cap_reached_count") >= 1.0, "{stats:?}");
            let ms = &stats["expire_cycle_cpu_milliseconds"];
            assert!(ms.parse::<u64>().is_ok(), "not whole milliseconds: {ms:?}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the keys never expired: {stats:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    q(&mut c, &["CONFIG", "RESETSTAT"]).unwrap();
    assert_eq!(num(&info(&mut c, "stats"), "expired_time_cap_reached_count"), 0.0);
}

/// The firehose counts as replication too: a subscriber's frames are the primary's
/// `total_net_repl_output_bytes`, and the replica's `total_net_repl_input_bytes`.
#[test]
fn firehose_bytes_are_replication_bytes() {
    let g = Server::start(&["--save", ""]);
    let mut p = g.conn();
    let r = Server::start(&["--save", "", "--replica-tcp", "127.0.0.1", &g.port.to_string()]);
    let mut rc = r.conn();
    wait_replication(&mut rc, "replica_state", "live");
    let (p0, r0) = (info(&mut p, "stats"), info(&mut rc, "stats"));
    write_big(&mut p, &mut rc);
    let (p1, r1) = (info(&mut p, "stats"), info(&mut rc, "stats"));
    assert!(grew(&p0, &p1, "total_net_repl_output_bytes") >= BIG as f64, "{p0:?} -> {p1:?}");
    assert!(grew(&p0, &p1, "total_net_output_bytes") < 64.0 * 1024.0, "{p0:?} -> {p1:?}");
    assert!(grew(&r0, &r1, "total_net_repl_input_bytes") >= BIG as f64, "{r0:?} -> {r1:?}");
    assert!(grew(&r0, &r1, "total_net_input_bytes") < 64.0 * 1024.0, "{r0:?} -> {r1:?}");
}
