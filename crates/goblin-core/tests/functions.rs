//! Redis 7 functions through the real binary: FUNCTION LOAD / LIST / DELETE / FLUSH / DUMP /
//! RESTORE / STATS / KILL, FCALL and FCALL_RO, compared reply for reply with redis-server
//! (both protocols); a DUMP from redis-server restored here; libraries surviving SAVE and a
//! restart with --load, reaching a replica and a journal replay; commandstats of the
//! commands a function calls; BUSY and FUNCTION KILL.

mod common;

use common::brokers::{info, Broker, Kaka};
use common::{read_reply, send, temp_path, RedisServer, Server};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn cmd(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn call(s: &mut TcpStream, args: &[&[u8]]) -> Vec<u8> {
    send(s, &cmd(args));
    read_reply(s)
}

const LIB1: &str = "#!lua name=lib1\n\
redis.register_function('f1', function(keys, args) return redis.call('set', keys[1], args[1]) end)\n\
redis.register_function{function_name='f2', callback=function(keys, args) return redis.call('get', keys[1]) end, \
flags={'no-writes', 'allow-oom'}, description='reads'}";

const LONE: &str = "#!lua name=lone\n\
redis.register_function{function_name='f3', callback=function(keys, args) return redis.call('get', keys[1]) end, \
flags={'no-writes', 'allow-oom'}, description='reads'}";

/// Each code is loaded as library `lib2` (most fail: Redis's errors).
const LOADS: &[&str] = &[
    "redis.register_function(function() end)",
    "redis.register_function('g', function() end, 3)",
    "local a = (",
    "redis.register_function{function_name='g', callback=function() end, description={}}",
    "redis.register_function{function_name='g', callback=5}",
    "redis.register_function{function_name='g', callback=function() end, flags='no-writes'}",
    "redis.register_function{function_name='g', callback=function() end, flags={'bad'}}",
    "redis.register_function{function_name='g', callback=function() end, foo=1}",
    "redis.register_function{callback=function() end}",
    "redis.register_function{function_name='g'}",
    "redis.register_function('a-b', function() end)",
    "redis.register_function('', function() end)",
    "redis.register_function('g', 5)",
    "redis.call('set', 'x', '1')",
    "redis.pcall('ping')",
    "redis.setresp(3)",
    "local s = string.format('a')",
    "x = 5",
    "error('boom')",
    "local q = 1",
    "redis.register_function('g', function() end)\nredis.register_function('g', function() end)",
    "redis.register_function('f1', function() end)",
    "while true do end",
    "redis.log(redis.LOG_WARNING, 'loading')\n\
redis.register_function('e', function() return redis.call('incr', 'k') end)\n\
redis.register_function('e2', function() return KEYS end)\n\
redis.register_function('e3', function(k, a) return {k[1], a[1], a[2], redis.REDIS_VERSION ~= nil} end)\n\
redis.register_function('e4', function() error('boom') end)\n\
redis.register_function('e5', function() return redis.call('function', 'list') end)\n\
redis.register_function('e6', function() return redis.call('fcall', 'e', '0') end)\n\
redis.register_function{function_name='e7', callback=function() return redis.call('set', 'a', 'b') end, flags={'no-writes'}}\n\
redis.register_function{function_name='e8', callback=function() return redis.pcall('incr', 'k') end}",
];

/// The scripted session: every command's reply must equal redis-server's byte for byte.
fn session() -> Vec<Vec<Vec<u8>>> {
    let mut s: Vec<Vec<Vec<u8>>> = Vec::new();
    let c = |parts: &[&str]| parts.iter().map(|p| p.as_bytes().to_vec()).collect::<Vec<_>>();
    s.push(c(&["FUNCTION", "LOAD", LIB1]));
    s.push(c(&["FUNCTION", "LOAD", LIB1]));
    for bad in [
        "redis.register_function('f1', function() return 1 end)",
        "#!lua name=lib1",
        "#!foo name=lib2\nx",
        "#!lua name=a-b\nx",
        "#!lua name=lib2 foo=bar\nx",
        "#!lua name=lib2 name=x\nx",
        "#!lua\nx",
        "#!lua name=lib2\nlocal x = 1",
    ] {
        s.push(c(&["FUNCTION", "LOAD", bad]));
    }
    s.push(c(&["FUNCTION", "LOAD", "REPLACE"]));
    s.push(c(&["FUNCTION", "LOAD", "x", "y"]));
    s.push(c(&["FCALL", "f1", "1", "k", "v"]));
    s.push(c(&["FCALL", "f2", "1", "k"]));
    s.push(c(&["FCALL_RO", "f1", "1", "k", "v"]));
    s.push(c(&["FCALL_RO", "f2", "1", "k"]));
    s.push(c(&["FCALL", "nope", "0"]));
    s.push(c(&["FCALL", "f2", "x"]));
    s.push(c(&["FCALL", "f2", "5"]));
    s.push(c(&["FCALL", "f2", "-1"]));
    for code in LOADS {
        s.push(c(&["FUNCTION", "LOAD", &format!("#!lua name=lib2\n{code}")]));
    }
    for f in ["e", "e2", "e4", "e5", "e6", "e7", "e8"] {
        s.push(c(&["FCALL", f, "0"]));
    }
    s.push(c(&["FCALL", "e3", "1", "a", "b", "c"]));
    // Redis lists a library's functions in its hash table's order: one function per library
    // listed here.
    s.push(c(&["FUNCTION", "LOAD", LONE]));
    s.push(c(&["FUNCTION", "LIST", "LIBRARYNAME", "lone"]));
    s.push(c(&["FUNCTION", "LIST", "LIBRARYNAME", "lon?", "WITHCODE"]));
    s.push(c(&["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "nomatch*"]));
    s.push(c(&["FUNCTION", "LIST", "foo"]));
    s.push(c(&["FUNCTION", "LIST", "LIBRARYNAME"]));
    s.push(c(&["FUNCTION", "LIST", "WITHCODE", "WITHCODE"]));
    s.push(c(&["FUNCTION", "STATS"]));
    s.push(c(&["FUNCTION", "KILL"]));
    s.push(c(&["FUNCTION", "DELETE", "lib2"]));
    s.push(c(&["FUNCTION", "DELETE", "lib2"]));
    s.push(c(&["FUNCTION", "DELETE"]));
    s.push(c(&["FUNCTION", "FLUSH", "x"]));
    s.push(c(&["FUNCTION", "RESTORE", "xx"]));
    s.push(c(&["FUNCTION", "FOO"]));
    s.push(c(&["FUNCTION", "FLUSH", "a", "b"]));
    s.push(c(&["FUNCTION", "Restore", "x", "y", "z"]));
    s.push(c(&["FUNCTION", "DUMP", "x"]));
    s.push(c(&["FUNCTION", "STATS", "x"]));
    s.push(c(&["FUNCTION", "LIST", "LIBRARYNAME", "a", "LIBRARYNAME", "b"]));
    s.push(c(&["FUNCTION", "DELETE", "a", "b"]));
    s.push(c(&["FUNCTION", "LOAD"]));
    s.push(c(&["FCALL"]));
    s.push(c(&["FUNCTION"]));
    s.push(c(&["FUNCTION", "RESTORE", ""]));
    s.push(c(&["FUNCTION", "STATS"]));
    s.push(c(&["FUNCTION", "FLUSH", "SYNC"]));
    s.push(c(&["FUNCTION", "LIST"]));
    s.push(c(&["FUNCTION", "STATS"]));
    s.push(c(&["FCALL", "f1", "1", "k", "v"]));
    s
}

fn run_session(con: &mut TcpStream, resp3: bool) -> Vec<Vec<u8>> {
    if resp3 {
        call(con, &[b"HELLO", b"3"]);
    }
    call(con, &[b"FUNCTION", b"FLUSH"]);
    call(con, &[b"FLUSHALL"]);
    session()
        .iter()
        .map(|c| {
            let args: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
            call(con, &args)
        })
        .collect()
}

#[test]
fn replies_match_redis_server_in_both_protocols() {
    let redis = RedisServer::start();
    let ours = Server::start(&[]);
    for resp3 in [false, true] {
        let theirs = run_session(&mut redis.raw(), resp3);
        let mine = run_session(&mut ours.raw(), resp3);
        let cmds = session();
        for ((c, t), m) in cmds.iter().zip(&theirs).zip(&mine) {
            let c: Vec<String> = c.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
            assert_eq!(String::from_utf8_lossy(m), String::from_utf8_lossy(t), "resp3={resp3}: {c:?}");
        }
        assert_eq!(theirs.len(), mine.len());
    }
}

#[test]
fn dump_from_redis_server_restores_here_with_each_policy() {
    let redis = RedisServer::start();
    let ours = Server::start(&[]);
    let mut r = redis.raw();
    call(&mut r, &[b"FUNCTION", b"FLUSH"]);
    // Long enough that redis-server LZF-compresses the code in its payload.
    let big = format!(
        "#!lua name=big\n-- {}\nredis.register_function('b', function() return 'big' end)",
        "padding ".repeat(40)
    );
    let small = "#!lua name=s\nredis.register_function('sm', function(k, a) return #k + #a end)";
    call(&mut r, &[b"FUNCTION", b"LOAD", big.as_bytes()]);
    call(&mut r, &[b"FUNCTION", b"LOAD", small.as_bytes()]);
    let dump = call(&mut r, &[b"FUNCTION", b"DUMP"]);
    let payload = bulk_body(&dump);

    let mut o = ours.raw();
    assert_eq!(call(&mut o, &[b"FUNCTION", b"RESTORE", &payload]), b"+OK\r\n");
    assert_eq!(call(&mut o, &[b"FCALL", b"b", b"0"]), b"$3\r\nbig\r\n");
    assert_eq!(call(&mut o, &[b"FCALL", b"sm", b"1", b"k", b"a", b"b"]), b":3\r\n");
    // APPEND (the default) refuses a library that exists; REPLACE and FLUSH take it.
    // (the first library of the payload is named: redis-server's order is its hash table's)
    let refused = call(&mut o, &[b"FUNCTION", b"RESTORE", &payload]);
    assert!(
        refused == b"-ERR Library big already exists\r\n" || refused == b"-ERR Library s already exists\r\n",
        "{}",
        String::from_utf8_lossy(&refused)
    );
    assert_eq!(call(&mut o, &[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"]), b"+OK\r\n");
    call(
        &mut o,
        &[b"FUNCTION", b"LOAD", b"#!lua name=other\nredis.register_function('o', function() return 1 end)"],
    );
    assert_eq!(call(&mut o, &[b"FUNCTION", b"RESTORE", &payload, b"FLUSH"]), b"+OK\r\n");
    assert_eq!(call(&mut o, &[b"FCALL", b"o", b"0"]), b"-ERR Function not found\r\n");
    assert_eq!(
        call(&mut o, &[b"FUNCTION", b"RESTORE", &payload, b"MERGE"]),
        b"-ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.\r\n"
    );
    let mut bad = payload.clone();
    bad[4] ^= 0x20;
    assert_eq!(
        call(&mut o, &[b"FUNCTION", b"RESTORE", &bad]),
        b"-ERR DUMP payload version or checksum are wrong\r\n"
    );
    // Our dump restores on redis-server too.
    let ours_dump = bulk_body(&call(&mut o, &[b"FUNCTION", b"DUMP"]));
    call(&mut r, &[b"FUNCTION", b"FLUSH"]);
    assert_eq!(call(&mut r, &[b"FUNCTION", b"RESTORE", &ours_dump]), b"+OK\r\n");
    assert_eq!(call(&mut r, &[b"FCALL", b"b", b"0"]), b"$3\r\nbig\r\n");
    // A key's DUMP is not a function payload.
    call(&mut r, &[b"SET", b"k", b"v"]);
    let key_dump = bulk_body(&call(&mut r, &[b"DUMP", b"k"]));
    assert_eq!(
        call(&mut o, &[b"FUNCTION", b"RESTORE", &key_dump]),
        call(&mut r, &[b"FUNCTION", b"RESTORE", &key_dump])
    );
}

fn bulk_body(reply: &[u8]) -> Vec<u8> {
    assert_eq!(reply[0], b'$', "{}", String::from_utf8_lossy(reply));
    let nl = reply.iter().position(|&b| b == b'\n').unwrap();
    let n: usize = std::str::from_utf8(&reply[1..nl - 1]).unwrap().parse().unwrap();
    reply[nl + 1..nl + 1 + n].to_vec()
}

fn load(s: &Server, code: &str) {
    let name: String =
        redis::cmd("FUNCTION").arg("LOAD").arg("REPLACE").arg(code).query(&mut s.conn()).unwrap();
    assert!(code.contains(&format!("name={name}")));
}

fn fcall(s: &Server, f: &str, keys: &[&str]) -> redis::RedisResult<redis::Value> {
    redis::cmd("FCALL").arg(f).arg(keys.len()).arg(keys).query(&mut s.conn())
}

const COUNTER: &str = "#!lua name=counter\n\
redis.register_function('bump', function(keys) redis.call('incr', keys[1]); return redis.call('incr', keys[1]) end)\n\
redis.register_function{function_name='peek', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}";

#[test]
fn libraries_survive_save_and_restart_and_their_writes_are_one_batch() {
    let dir = temp_path("functions-save");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dump.gcsn");
    let p = path.to_str().unwrap();
    let mut a = Server::start(&["--load", p, "--enable-debug-command", "yes"]);
    load(&a, COUNTER);
    assert_eq!(fcall(&a, "bump", &["c"]).unwrap(), redis::Value::Int(2));
    // The function's two INCRs are one batch of origin script (two mutations, consecutive).
    let m = info(&mut a.conn(), "replication");
    assert_eq!(m["master_repl_offset"], "3", "LOAD REPLACE, then two canonical writes");
    let _: () = redis::cmd("SAVE").query(&mut a.conn()).unwrap();
    a.stop();
    let b = Server::start(&["--load", p]);
    assert_eq!(fcall(&b, "peek", &["c"]).unwrap(), redis::Value::BulkString(b"2".to_vec()));
    assert_eq!(fcall(&b, "bump", &["c"]).unwrap(), redis::Value::Int(4));
    let listed: Vec<redis::Value> = redis::cmd("FUNCTION").arg("LIST").query(&mut b.conn()).unwrap();
    assert_eq!(listed.len(), 1);
    // Commandstats count a function's commands as Redis does.
    let stats = info(&mut b.conn(), "commandstats");
    assert!(stats["cmdstat_incr"].starts_with("calls=2,"), "{stats:?}");
    assert!(stats["cmdstat_fcall"].starts_with("calls=2,"), "{stats:?}");
    assert!(stats["cmdstat_get"].starts_with("calls=1,"), "{stats:?}");
    // FUNCTION FLUSH is state too: after a save and a restart there is nothing.
    let _: () = redis::cmd("FUNCTION").arg("FLUSH").query(&mut b.conn()).unwrap();
    let _: () = redis::cmd("SAVE").query(&mut b.conn()).unwrap();
    drop(b);
    let c = Server::start(&["--load", p]);
    assert!(fcall(&c, "peek", &["c"]).unwrap_err().to_string().contains("Function not found"));
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_replica_gets_the_libraries_and_refuses_to_change_them() {
    let primary = Server::start(&[]);
    let pport = primary.port.to_string();
    // Without Kafka a replica can only follow from the primary's first write: attach first.
    let replica = Server::start(&["--replica-tcp", "127.0.0.1", &pport]);
    wait_until("live", || info(&mut replica.conn(), "replication")["replica_state"] == "live");
    load(&primary, COUNTER);
    load(&primary, "#!lua name=later\nredis.register_function{function_name='hi', callback=function() return 'hi' end, flags={'no-writes'}}");
    assert_eq!(fcall(&primary, "bump", &["c"]).unwrap(), redis::Value::Int(2));
    wait_until(
        "the function and its writes",
        || matches!(fcall(&replica, "peek", &["c"]), Ok(redis::Value::BulkString(v)) if v == b"2"),
    );
    assert_eq!(fcall(&replica, "hi", &[]).unwrap(), redis::Value::BulkString(b"hi".to_vec()));
    let err = fcall(&replica, "bump", &["c"]).unwrap_err().to_string();
    assert!(err.contains("read only replica"), "{err}");
    let err: redis::RedisResult<()> = redis::cmd("FUNCTION").arg("FLUSH").query(&mut replica.conn());
    assert!(err.unwrap_err().to_string().contains("read only replica"));
    let _: () = redis::cmd("FUNCTION").arg("DELETE").arg("later").query(&mut primary.conn()).unwrap();
    wait_until("the delete", || fcall(&replica, "hi", &[]).is_err());
}

#[test]
fn a_journal_replay_restores_the_libraries() {
    let k = Kaka::start();
    let uri = k.uri("functions-journal");
    let mut a = Server::start(&["--kafka", &uri, "--save", "", "--kafka-ack-mode", "broker"]);
    load(&a, COUNTER);
    load(&a, "#!lua name=gone\nredis.register_function('g', function() return 1 end)");
    let _: () = redis::cmd("FUNCTION").arg("DELETE").arg("gone").query(&mut a.conn()).unwrap();
    assert_eq!(fcall(&a, "bump", &["c"]).unwrap(), redis::Value::Int(2));
    let dump: Vec<u8> = redis::cmd("FUNCTION").arg("DUMP").query(&mut a.conn()).unwrap();
    a.signal(9);
    a.wait_exit(Duration::from_secs(10)).unwrap();
    let b = Server::start(&["--kafka", &uri, "--save", ""]);
    assert_eq!(fcall(&b, "peek", &["c"]).unwrap(), redis::Value::BulkString(b"2".to_vec()));
    assert!(fcall(&b, "g", &[]).is_err(), "the deleted library stays deleted");
    let again: Vec<u8> = redis::cmd("FUNCTION").arg("DUMP").query(&mut b.conn()).unwrap();
    assert_eq!(again, dump);
}

#[test]
fn a_busy_function_answers_busy_and_function_kill_stops_it() {
    let s = Server::start(&["--busy-reply-threshold", "100"]);
    load(&s, "#!lua name=spin\nredis.register_function{function_name='spin', callback=function() while true do end end, flags={'no-writes'}}");
    let url = s.url();
    let runner = std::thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let r: redis::RedisResult<redis::Value> = redis::cmd("FCALL").arg("spin").arg(0).query(&mut c);
        r
    });
    let mut o = s.raw();
    wait_until("busy", || call(&mut o, &[b"PING"]).starts_with(b"-BUSY"));
    assert_eq!(
        call(&mut o, &[b"GET", b"x"]),
        b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n"
    );
    let stats = call(&mut o, &[b"FUNCTION", b"STATS"]);
    let text = String::from_utf8_lossy(&stats).into_owned();
    assert!(
        text.starts_with("*4\r\n$14\r\nrunning_script\r\n*6\r\n$4\r\nname\r\n$4\r\nspin\r\n$7\r\ncommand\r\n*3\r\n$5\r\nFCALL\r\n$4\r\nspin\r\n$1\r\n0\r\n$11\r\nduration_ms\r\n:"),
        "{text}"
    );
    assert!(text.ends_with("$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:1\r\n"), "{text}");
    assert_eq!(
        call(&mut o, &[b"SCRIPT", b"KILL"]),
        b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n"
    );
    assert_eq!(call(&mut o, &[b"FUNCTION", b"KILL"]), b"+OK\r\n");
    let err = runner.join().unwrap().unwrap_err().to_string();
    assert!(err.contains("Script killed by user"), "{err}");
    assert_eq!(call(&mut o, &[b"PING"]), b"+PONG\r\n");

    // A busy EVAL: FUNCTION STATS and FUNCTION KILL get BUSY naming SCRIPT KILL (Redis's
    // behaviour), SCRIPT KILL stops it.
    let url = s.url();
    let runner = std::thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let r: redis::RedisResult<redis::Value> =
            redis::cmd("EVAL").arg("local i = 0 while true do i = i + 1 end").arg(0).query(&mut c);
        r
    });
    wait_until("busy", || call(&mut o, &[b"PING"]).starts_with(b"-BUSY"));
    let busy_eval =
        b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
    assert_eq!(call(&mut o, &[b"FUNCTION", b"STATS"]), busy_eval);
    assert_eq!(call(&mut o, &[b"FUNCTION", b"KILL"]), busy_eval);
    assert_eq!(call(&mut o, &[b"SCRIPT", b"KILL"]), b"+OK\r\n");
    let err = runner.join().unwrap().unwrap_err().to_string();
    assert!(err.contains("Script killed by user"), "{err}");
}

/// INFO commandstats (without timings) and errorstats, as comparable lines.
fn stats_lines(con: &mut redis::Connection) -> Vec<String> {
    let mut lines = Vec::new();
    for section in ["commandstats", "errorstats"] {
        let text: String = redis::cmd("INFO").arg(section).query(con).unwrap();
        for l in text.lines().filter(|l| l.starts_with("cmdstat_") || l.starts_with("errorstat_")) {
            if l.starts_with("cmdstat_info:") || l.starts_with("cmdstat_config|resetstat:") {
                continue;
            }
            let kept: Vec<&str> = l.split(',').filter(|f| !f.starts_with("usec")).collect();
            lines.push(kept.join(",").replace(":usec=", ":"));
        }
    }
    lines.sort();
    lines
}

#[test]
fn commands_inside_scripts_and_functions_count_in_commandstats_as_in_redis() {
    let redis = RedisServer::start();
    let ours = Server::start(&[]);
    let mut results = Vec::new();
    for con in [&mut redis.conn(), &mut ours.conn()] {
        let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(con).unwrap();
        let scripts = [
            "redis.call('set','a','1'); redis.call('incr','a'); return redis.call('get','a')",
            "return redis.pcall('incr','nokey'), redis.pcall('hset','a','f','v')",
            "return redis.pcall('hset','a','f','v')",
            "return redis.call('hset','a','f','v')",
            "return redis.call('client','list')",
            "return redis.call('nosuch')",
            "return redis.call('get')",
            "return redis.call('config', 'get', 'maxmemory')",
            "return redis.call('publish', 'ch', 'm')",
            "error('plain')",
        ];
        for s in scripts {
            let _: redis::RedisResult<redis::Value> = redis::cmd("EVAL").arg(s).arg(0).query(con);
        }
        let _: redis::RedisResult<redis::Value> =
            redis::cmd("EVAL_RO").arg("return redis.call('del','a')").arg(0).query(con);
        let lib = "#!lua name=l\nredis.register_function('f', function(k) return redis.call('incrby', k[1], '2') end)";
        let _: String = redis::cmd("FUNCTION").arg("LOAD").arg("REPLACE").arg(lib).query(con).unwrap();
        for f in ["FCALL", "FCALL", "FCALL_RO"] {
            let _: redis::RedisResult<redis::Value> = redis::cmd(f).arg("f").arg(1).arg("x").query(con);
        }
        results.push(stats_lines(con));
    }
    assert_eq!(results[1], results[0], "goblin-core (left) vs redis-server (right)");
    assert!(results[0].iter().any(|l| l.starts_with("cmdstat_incrby:calls=2,")), "{:?}", results[0]);
}

/// The libraries' code size is kept as they change: INFO's `used_memory_functions` is the sum
/// of the loaded codes through LOAD, LOAD REPLACE, DELETE and FLUSH, and the 15 MiB bound on all
/// code counts a library being replaced once (its new code, not old and new). A FLUSH gives the
/// functions' Lua VM back at once (`used_memory_vm_functions` drops to a fresh VM's size, as
/// Redis's does), and many small loads leave no garbage piling up in it.
#[test]
fn library_sizes_follow_loads_and_a_flush_empties_the_vm() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let code_bytes = |con: &mut redis::Connection| -> usize {
        info(con, "memory")["used_memory_functions"].parse().unwrap()
    };
    let vm_bytes = |con: &mut redis::Connection| -> usize {
        info(con, "memory")["used_memory_vm_functions"].parse().unwrap()
    };
    let lib = |name: &str, filler: usize| {
        format!(
            "#!lua name={name}\n--{}\nredis.register_function('{name}_f', function(keys, args) return 1 end)",
            "x".repeat(filler)
        )
    };
    let load = |con: &mut redis::Connection, code: &str, replace: bool| -> redis::RedisResult<String> {
        let mut c = redis::cmd("FUNCTION");
        c.arg("LOAD");
        if replace {
            c.arg("REPLACE");
        }
        c.arg(code).query(con)
    };
    let (a, b, a2) = (lib("a", 100), lib("b", 300), lib("a", 50));
    load(&mut con, &a, false).unwrap();
    load(&mut con, &b, false).unwrap();
    assert_eq!(code_bytes(&mut con), a.len() + b.len());
    load(&mut con, &a2, true).unwrap();
    assert_eq!(code_bytes(&mut con), a2.len() + b.len());
    let _: String = redis::cmd("FUNCTION").arg("DELETE").arg("b").query(&mut con).unwrap();
    assert_eq!(code_bytes(&mut con), a2.len());

    // 9 MiB of `big`, replaced by another 9 MiB: within the bound; a second library of 7 MiB
    // beside it is not.
    let big = lib("big", 9 << 20);
    load(&mut con, &big, false).unwrap();
    load(&mut con, &lib("big", (9 << 20) + 10), true).unwrap();
    let err = load(&mut con, &lib("other", 7 << 20), false).unwrap_err();
    assert!(err.to_string().contains("limited to 15 MiB"), "{err}");
    assert_eq!(code_bytes(&mut con), a2.len() + lib("big", (9 << 20) + 10).len());

    let _: String = redis::cmd("FUNCTION").arg("FLUSH").query(&mut con).unwrap();
    assert_eq!(code_bytes(&mut con), 0);
    let fresh = vm_bytes(&mut con);
    let mut pipe = redis::pipe();
    for i in 0..3000 {
        pipe.cmd("FUNCTION").arg("LOAD").arg(lib(&format!("l{i}"), 10)).ignore();
    }
    let () = pipe.query(&mut con).unwrap();
    let loaded = vm_bytes(&mut con);
    // About 260 bytes a function as loads go (redis-server 8.2: 270); without a collection
    // step after each load their garbage waits for Lua's own pace (480).
    let per_function = (loaded - fresh) / 3000;
    assert!(
        (100..330).contains(&per_function),
        "{per_function} bytes a function ({loaded} against {fresh} fresh)"
    );
    let _: String = redis::cmd("FUNCTION").arg("FLUSH").arg("ASYNC").query(&mut con).unwrap();
    let flushed = vm_bytes(&mut con);
    assert!(flushed < fresh + 16 * 1024, "after FLUSH the VM holds {flushed} bytes (fresh: {fresh})");
}
