//! Server commands (INFO, CLIENT, HELLO, SELECT, COMMAND, CONFIG, MEMORY, TIME, ROLE, AUTH,
//! MULTI/EXEC, RESET), checked against the shapes and texts of redis-server 7.

mod common;

use common::{read_reply, send, RedisServer, Server};
use redis::Value;
use std::collections::HashMap;

/// Sends each request, in order on one connection to each server, and requires byte-equal
/// replies.
fn same_replies(g: &Server, r: &RedisServer, requests: &[&[u8]]) {
    let (mut a, mut b) = (g.raw(), r.raw());
    for req in requests {
        send(&mut a, req);
        send(&mut b, req);
        let (ours, theirs) = (read_reply(&mut a), read_reply(&mut b));
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs),
            "request {:?}",
            String::from_utf8_lossy(req)
        );
    }
}

/// INFO text -> field map (section headers and blank lines skipped).
fn info_map(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn info(con: &mut redis::Connection, section: &str) -> HashMap<String, String> {
    let text: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    info_map(&text)
}

fn num(m: &HashMap<String, String>, k: &str) -> u64 {
    m.get(k)
        .unwrap_or_else(|| panic!("INFO lacks {k}"))
        .parse()
        .unwrap_or_else(|_| panic!("{k} not a number"))
}

#[test]
fn info_sections_fields_and_format() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let text: String = redis::cmd("INFO").query(&mut con).unwrap();
    for section in [
        "# Server\r\n",
        "# Clients\r\n",
        "# Memory\r\n",
        "# Persistence\r\n",
        "# Stats\r\n",
        "# Replication\r\n",
        "# CPU\r\n",
        "# Keyspace\r\n",
    ] {
        assert!(text.contains(section), "missing {section:?}");
    }
    // Sections are separated by one blank line, and every other line is field:value.
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        assert!(line.starts_with("# ") || line.contains(':'), "bad line {line:?}");
    }
    let m = info_map(&text);
    assert_eq!(m["redis_version"], "7.4.0");
    assert_eq!(num(&m, "process_id"), s.pid() as u64);
    assert_eq!(num(&m, "tcp_port"), s.port as u64);
    assert_eq!(m["role"], "master");
    assert_eq!(m["connected_slaves"], "0");
    assert_eq!(m["master_replid"].len(), 40);
    assert_eq!(m["master_replid2"], "0".repeat(40));
    assert_eq!(m["second_repl_offset"], "-1");
    assert_eq!(m["loading"], "0");
    assert!(m["mem_allocator"].starts_with("jemalloc"));
    assert!(num(&m, "used_memory_rss") > 0);
    assert!(num(&m, "connected_clients") >= 1);
    assert!(!text.contains("db0:"), "empty keyspace lists no db");
    // One section only.
    let only: String = redis::cmd("INFO").arg("replication").query(&mut con).unwrap();
    assert!(only.starts_with("# Replication\r\n") && !only.contains("# Server"));
    // Several sections, case-insensitive; unknown ones are ignored.
    let two: String = redis::cmd("INFO").arg("SERVER").arg("keyspace").arg("nosuch").query(&mut con).unwrap();
    assert!(two.contains("# Server") && two.contains("# Keyspace") && !two.contains("# Memory"));
    let none: String = redis::cmd("INFO").arg("nosuch").query(&mut con).unwrap();
    assert_eq!(none, "");
}

#[test]
fn info_counters_follow_activity() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let before = info(&mut con, "all");
    let used_before = num(&before, "used_memory");
    let offset_before = num(&before, "master_repl_offset");
    let value = "x".repeat(1000);
    let mut p = redis::pipe();
    for i in 0..5000 {
        p.cmd("SET").arg(format!("key:{i}")).arg(&value).ignore();
    }
    let _: () = p.query(&mut con).unwrap();
    let _: () = redis::cmd("SET").arg("ttl").arg("v").arg("EX").arg(100).query(&mut con).unwrap();
    let _: Option<String> = redis::cmd("GET").arg("key:1").query(&mut con).unwrap();
    let _: Option<String> = redis::cmd("GET").arg("nokey").query(&mut con).unwrap();
    let after = info(&mut con, "everything");
    let used_after = num(&after, "used_memory");
    assert!(used_after > used_before + 5000 * 1000, "used_memory {used_before} -> {used_after}");
    assert!(num(&after, "used_memory_peak") >= used_after);
    assert_eq!(after["db0"], "keys=5001,expires=1,avg_ttl=0,subexpiry=0");
    assert_eq!(num(&after, "master_repl_offset"), offset_before + 5001);
    assert!(num(&after, "total_commands_processed") >= num(&before, "total_commands_processed") + 5003);
    assert!(num(&after, "keyspace_hits") >= 1);
    assert!(num(&after, "keyspace_misses") >= 1);
    assert!(num(&after, "total_connections_received") >= 1);
    // RESETSTAT clears the counters.
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut con).unwrap();
    let reset = info(&mut con, "stats");
    assert_eq!(num(&reset, "keyspace_hits"), 0);
}

#[test]
fn hello_select_auth_time_role() {
    let s = Server::start(&[]);
    let mut raw = s.raw();
    // HELLO 3 is served (tests/resp3.rs); versions other than 2 and 3 are not.
    send(&mut raw, b"HELLO 4\r\nHELLO 1\r\nHELLO x\r\nSELECT 0\r\nSELECT 16\r\nSELECT x\r\nAUTH pw\r\nAUTH nobody pw\r\nAUTH default pw\r\n");
    assert_eq!(read_reply(&mut raw), b"-NOPROTO unsupported protocol version\r\n");
    assert_eq!(read_reply(&mut raw), b"-NOPROTO unsupported protocol version\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR Protocol version is not an integer or out of range\r\n");
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR DB index is out of range\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR value is not an integer or out of range\r\n");
    assert_eq!(
        read_reply(&mut raw),
        &b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"[..]
    );
    assert_eq!(read_reply(&mut raw), b"-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");

    let mut con = s.conn();
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut con).unwrap();
    let hello: Vec<Value> = redis::cmd("HELLO").arg(2).arg("SETNAME").arg("hi").query(&mut con).unwrap();
    assert_eq!(hello.len(), 14);
    let kv: HashMap<String, Value> = hello
        .chunks(2)
        .map(|p| (redis::from_redis_value_ref::<String>(&p[0]).unwrap(), p[1].clone()))
        .collect();
    assert_eq!(kv["server"], Value::BulkString(b"redis".to_vec()));
    assert_eq!(kv["version"], Value::BulkString(b"7.4.0".to_vec()));
    assert_eq!(kv["proto"], Value::Int(2));
    assert_eq!(kv["id"], Value::Int(id));
    assert_eq!(kv["mode"], Value::BulkString(b"standalone".to_vec()));
    assert_eq!(kv["role"], Value::BulkString(b"master".to_vec()));
    assert_eq!(kv["modules"], Value::Array(vec![]));
    let name: String = redis::cmd("CLIENT").arg("GETNAME").query(&mut con).unwrap();
    assert_eq!(name, "hi");
    let time: Vec<String> = redis::cmd("TIME").query(&mut con).unwrap();
    let secs: u64 = time[0].parse().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert!(secs.abs_diff(now) <= 2);
    assert!(time[1].parse::<u32>().unwrap() < 1_000_000);
    let role: Vec<Value> = redis::cmd("ROLE").query(&mut con).unwrap();
    assert_eq!(role[0], Value::BulkString(b"master".to_vec()));
    // REPLICAOF NO ONE on a primary is the no-op it is in Redis; a port that is none is
    // Redis's error (following a redis-server: tests/redis_primary.rs).
    send(
        &mut raw,
        b"REPLICAOF NO ONE\r\nSLAVEOF no one\r\nREPLICAOF localhost 65536\r\nREPLICAOF localhost x\r\n",
    );
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR Invalid master port\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR Invalid master port\r\n");
    send(&mut raw, b"BGREWRITEAOF\r\n");
    let aof = String::from_utf8(read_reply(&mut raw)).unwrap();
    assert!(aof.starts_with("-ERR goblin-core keeps no append-only file"), "{aof}");
    // ACL DRYRUN: every user may run every command; unknown users, commands and arities are
    // Redis's errors.
    send(&mut raw, b"ACL DRYRUN default set k v\r\nACL DRYRUN nobody get k\r\nACL DRYRUN default nosuch\r\nACL DRYRUN default get\r\n");
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR User 'nobody' not found\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR Command 'nosuch' not found\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR wrong number of arguments for 'get' command\r\n");
}

#[test]
fn client_subcommands() {
    let s = Server::start(&[]);
    let mut a = s.conn();
    let mut b = s.conn();
    let id_a: i64 = redis::cmd("CLIENT").arg("ID").query(&mut a).unwrap();
    let id_b: i64 = redis::cmd("CLIENT").arg("ID").query(&mut b).unwrap();
    assert_ne!(id_a, id_b);
    let none: Option<String> = redis::cmd("CLIENT").arg("GETNAME").query(&mut a).unwrap();
    assert_eq!(none, None);
    let bad = redis::cmd("CLIENT").arg("SETNAME").arg("a b").query::<()>(&mut a).unwrap_err();
    assert!(
        bad.to_string().contains("Client names cannot contain spaces, newlines or special characters."),
        "{bad}"
    );
    let _: () = redis::cmd("CLIENT").arg("SETNAME").arg("alpha").query(&mut a).unwrap();
    let _: () = redis::cmd("CLIENT").arg("SETINFO").arg("LIB-NAME").arg("mylib").query(&mut a).unwrap();
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut b).unwrap();
    assert_eq!(list.lines().count(), 2, "{list}");
    let line_a = list.lines().find(|l| l.starts_with(&format!("id={id_a} "))).expect("a listed");
    assert!(
        line_a.contains(" name=alpha ")
            && line_a.contains(" lib-name=mylib")
            && line_a.contains("addr=127.0.0.1:")
    );
    let mine: String = redis::cmd("CLIENT").arg("INFO").query(&mut a).unwrap();
    assert!(mine.starts_with(&format!("id={id_a} ")) && mine.ends_with('\n') && mine.lines().count() == 1);
    let by_id: String = redis::cmd("CLIENT").arg("LIST").arg("ID").arg(id_b).query(&mut a).unwrap();
    assert!(by_id.starts_with(&format!("id={id_b} ")) && by_id.lines().count() == 1);
    // KILL by ID closes the other connection and counts it.
    let killed: i64 = redis::cmd("CLIENT").arg("KILL").arg("ID").arg(id_b).query(&mut a).unwrap();
    assert_eq!(killed, 1);
    assert!(redis::cmd("PING").query::<String>(&mut b).is_err(), "killed client must be disconnected");
    let none: i64 = redis::cmd("CLIENT").arg("KILL").arg("ID").arg(999999).query(&mut a).unwrap();
    assert_eq!(none, 0);
    let err = redis::cmd("CLIENT").arg("KILL").arg("1.2.3.4:5").query::<()>(&mut a).unwrap_err();
    assert!(err.to_string().contains("No such client"), "{err}");
    // Old form by address.
    let mut c = s.conn();
    let info_c: String = redis::cmd("CLIENT").arg("INFO").query(&mut c).unwrap();
    let addr = info_c.split(' ').find_map(|f| f.strip_prefix("addr=")).unwrap().to_string();
    let _: () = redis::cmd("CLIENT").arg("KILL").arg(&addr).query(&mut a).unwrap();
    assert!(redis::cmd("PING").query::<String>(&mut c).is_err());
    let err = redis::cmd("CLIENT").arg("FOO").query::<()>(&mut a).unwrap_err();
    assert!(err.to_string().contains("unknown subcommand 'FOO'. Try CLIENT HELP."), "{err}");
    let err = redis::cmd("CLIENT").arg("GETNAME").arg("x").query::<()>(&mut a).unwrap_err();
    assert!(err.to_string().contains("wrong number of arguments for 'client|getname' command"), "{err}");
}

#[test]
fn client_reply_off_and_skip() {
    let s = Server::start(&[]);
    let mut raw = s.raw();
    send(
        &mut raw,
        b"CLIENT REPLY OFF\r\nPING\r\nCLIENT REPLY ON\r\nECHO a\r\nCLIENT REPLY SKIP\r\nECHO b\r\nECHO c\r\n",
    );
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    assert_eq!(read_reply(&mut raw), b"$1\r\na\r\n");
    assert_eq!(read_reply(&mut raw), b"$1\r\nc\r\n");
}

#[test]
fn command_count_info_docs_getkeys() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let count: i64 = redis::cmd("COMMAND").arg("COUNT").query(&mut con).unwrap();
    let list: Vec<String> = redis::cmd("COMMAND").arg("LIST").query(&mut con).unwrap();
    // COMMAND LIST names the subcommands too; COMMAND COUNT counts commands (as Redis 7).
    assert_eq!(count as usize, list.iter().filter(|n| !n.contains('|')).count());
    assert!(list.contains(&"get".to_string()) && list.contains(&"client".to_string()));
    assert!(list.contains(&"client|list".to_string()));
    let all: Vec<Value> = redis::cmd("COMMAND").query(&mut con).unwrap();
    assert_eq!(all.len(), count as usize);
    let info: Vec<Value> =
        redis::cmd("COMMAND").arg("INFO").arg("get").arg("nosuch").query(&mut con).unwrap();
    let Value::Array(get) = &info[0] else { panic!("{info:?}") };
    assert_eq!(get.len(), 10);
    assert_eq!(get[0], Value::BulkString(b"get".to_vec()));
    assert_eq!(get[1], Value::Int(2));
    assert_eq!((&get[3], &get[4], &get[5]), (&Value::Int(1), &Value::Int(1), &Value::Int(1)));
    assert_eq!(info[1], Value::Nil);
    let docs: Vec<Value> = redis::cmd("COMMAND").arg("DOCS").arg("get").query(&mut con).unwrap();
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0], Value::BulkString(b"get".to_vec()));
    let Value::Array(fields) = &docs[1] else { panic!("{docs:?}") };
    assert!(fields.contains(&Value::BulkString(b"summary".to_vec())));
    assert!(fields.contains(&Value::BulkString(b"group".to_vec())));
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("MSET")
        .arg("a")
        .arg("1")
        .arg("b")
        .arg("2")
        .query(&mut con)
        .unwrap();
    assert_eq!(keys, vec!["a", "b"]);
    let err = redis::cmd("COMMAND").arg("GETKEYS").arg("PING").arg("x").query::<()>(&mut con).unwrap_err();
    assert!(err.to_string().contains("The command has no key arguments"), "{err}");
    let err = redis::cmd("COMMAND").arg("GETKEYS").arg("NOSUCH").arg("x").query::<()>(&mut con).unwrap_err();
    assert!(err.to_string().contains("Invalid command specified"), "{err}");
    // The same count through redis-cli (which prints bare integers when not on a terminal).
    assert_eq!(s.cli(&["command", "count"]).trim(), count.to_string());
}

#[test]
fn config_get_set() {
    let s = Server::start(&["--maxclients", "123"]);
    let mut con = s.conn();
    let got: HashMap<String, String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxclients")
        .arg("port")
        .arg("databases")
        .query(&mut con)
        .unwrap();
    assert_eq!(got["maxclients"], "123");
    assert_eq!(got["port"], s.port.to_string());
    assert_eq!(got["databases"], "16");
    let pat: HashMap<String, String> = redis::cmd("CONFIG").arg("GET").arg("max*").query(&mut con).unwrap();
    assert!(pat.contains_key("maxmemory") && pat.contains_key("maxclients"));
    assert!(pat.keys().all(|k| k.starts_with("max")));
    let save: HashMap<String, String> =
        redis::cmd("CONFIG").arg("GET").arg("save").arg("appendonly").query(&mut con).unwrap();
    assert_eq!(save["save"], "3600 1 300 100 60 10000", "the --save rules, as Redis prints them");
    assert_eq!(save["appendonly"], "no");
    // client-output-buffer-limit: Redis's errors for malformed values; every class and soft
    // limits are taken, and the classes not named keep theirs.
    for (val, why) in [
        ("normal 1mb 0", "Wrong number of arguments in buffer limit configuration."),
        ("master 0 0 0", "Invalid client class specified in buffer limit configuration."),
        ("normal x 0 0", "Error in hard, soft or soft_seconds setting in buffer limit configuration."),
        ("normal 0 0 -1", "Error in hard, soft or soft_seconds setting in buffer limit configuration."),
    ] {
        let err = redis::cmd("CONFIG")
            .arg("SET")
            .arg("client-output-buffer-limit")
            .arg(val)
            .query::<()>(&mut con)
            .unwrap_err()
            .to_string();
        assert!(err.contains("argument 'client-output-buffer-limit'") && err.contains(why), "{val}: {err}");
    }
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("pubsub 32mb 8mb 60 replica 1gb 0 0")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("normal 0 0 0")
        .query(&mut con)
        .unwrap();
    let got: HashMap<String, String> =
        redis::cmd("CONFIG").arg("GET").arg("client-output-buffer-limit").query(&mut con).unwrap();
    assert_eq!(
        got["client-output-buffer-limit"],
        "normal 0 0 0 slave 1073741824 0 0 pubsub 33554432 8388608 60"
    );
    let _: () = redis::cmd("CONFIG").arg("SET").arg("maxclients").arg("50").query(&mut con).unwrap();
    let got: HashMap<String, String> =
        redis::cmd("CONFIG").arg("GET").arg("maxclients").query(&mut con).unwrap();
    assert_eq!(got["maxclients"], "50");
    let _: () = redis::cmd("CONFIG").arg("SET").arg("save").arg("").query(&mut con).unwrap();
    let err = redis::cmd("CONFIG").arg("SET").arg("foo").arg("bar").query::<()>(&mut con).unwrap_err();
    assert!(
        err.to_string().contains("Unknown option or number of arguments for CONFIG SET - 'foo'"),
        "{err}"
    );
    let err = redis::cmd("CONFIG").arg("SET").arg("maxclients").arg("x").query::<()>(&mut con).unwrap_err();
    assert!(
        err.to_string().contains("CONFIG SET failed (possibly related to argument 'maxclients')"),
        "{err}"
    );
    let err = redis::cmd("CONFIG").arg("GET").query::<()>(&mut con).unwrap_err();
    assert!(err.to_string().contains("wrong number of arguments for 'config|get' command"), "{err}");
}

/// `--jemalloc-bg-thread` (Redis's `jemalloc-bg-thread`, on by default): jemalloc's own report
/// shows its background purging thread running or not, and CONFIG SET switches it.
/// CONFIG SET port and bind move the listener at run time, as in Redis: the new port answers
/// and the old one is closed; a port another socket holds, or an address that is not one,
/// fails with Redis's text and leaves the server listening where it was; connections already
/// open stay. The same steps against redis-server 8.2 give the same replies.
#[test]
fn config_set_port_and_bind_move_the_listener_as_redis8() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let mut sessions = Vec::new();
    for start_port in [g.port, r.port] {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{start_port}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        let mut got = Vec::new();
        let mut step = |c: &mut redis::Connection, args: &[&str], label: &str| {
            let mut cmd = redis::cmd(args[0]);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            got.push(match cmd.query::<Value>(c) {
                Ok(v) => format!("{label} -> {v:?}"),
                Err(e) => format!("{label} -> {:?} {:?}", e.code(), e.detail()),
            });
        };
        let reaches = |port: u16| {
            redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .unwrap()
                .get_connection()
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
                .is_ok()
        };
        let moved = common::free_port();
        step(&mut c, &["CONFIG", "SET", "port", &moved.to_string()], "move");
        assert!(reaches(moved), "the new port {moved} answers");
        assert!(!reaches(start_port), "the old port {start_port} is closed");
        // A port another socket holds: refused, and the server stays where it was.
        let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let held = holder.local_addr().unwrap().port();
        step(&mut c, &["CONFIG", "SET", "port", &held.to_string()], "held port");
        step(&mut c, &["CONFIG", "SET", "bind", "999.999.999.999"], "bad address");
        assert!(reaches(moved), "still on {moved} after the refusals");
        step(&mut c, &["CONFIG", "SET", "bind", "127.0.0.1 -::1"], "two addresses");
        step(&mut c, &["CONFIG", "GET", "bind"], "bind now");
        assert!(reaches(moved));
        // No address at all: no new connection, the open one still served.
        step(&mut c, &["CONFIG", "SET", "bind", ""], "no address");
        assert!(!reaches(moved), "nothing listens with an empty bind");
        step(&mut c, &["PING"], "open connection");
        step(&mut c, &["CONFIG", "SET", "bind", "127.0.0.1"], "back");
        assert!(reaches(moved));
        sessions.push(got);
    }
    for (ours, theirs) in sessions[0].iter().zip(&sessions[1]) {
        assert_eq!(ours, theirs, "goblin-core against redis-server 8.2");
    }
    assert!(sessions[0][1].contains("Unable to listen on this port"), "{:?}", sessions[0]);
}

/// The server side of the client connection whose local port is `client_port`, as `ss`
/// shows it with its timers (`timer:(keepalive,...)` when keepalive is on).
fn server_socket_timers(server_port: u16, client_port: u16) -> String {
    let out = std::process::Command::new("ss")
        .args([
            "-tnoH",
            "state",
            "established",
            &format!("( sport = :{server_port} and dport = :{client_port} )"),
        ])
        .output()
        .expect("ss (iproute2)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!text.trim().is_empty(), "ss found no connection {server_port} -> {client_port}");
    text
}

/// `tcp-keepalive` (Redis's default 300 s): client connections get TCP keepalive, so that a
/// client that vanished without closing (a crashed host, a cut network) is found and closed;
/// 0 turns it off; CONFIG SET applies to the connections accepted afterwards, as in Redis.
#[test]
fn client_connections_get_tcp_keepalive() {
    let s = Server::start(&["--tcp-keepalive", "7"]);
    let open = |port: u16| {
        let c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut probe = c.try_clone().unwrap();
        send(&mut probe, b"PING\r\n");
        assert_eq!(read_reply(&mut probe), b"+PONG\r\n");
        c
    };
    let first = open(s.port);
    let timers = server_socket_timers(s.port, first.local_addr().unwrap().port());
    assert!(timers.contains("keepalive"), "{timers}");
    let mut con = s.conn();
    let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("tcp-keepalive").query(&mut con).unwrap();
    assert_eq!(got, ["tcp-keepalive", "7"]);
    let _: () = redis::cmd("CONFIG").arg("SET").arg("tcp-keepalive").arg("0").query(&mut con).unwrap();
    let second = open(s.port);
    let timers = server_socket_timers(s.port, second.local_addr().unwrap().port());
    assert!(!timers.contains("keepalive"), "{timers}");
    // The default is Redis's.
    let d = Server::start(&[]);
    let mut con = d.conn();
    let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("tcp-keepalive").query(&mut con).unwrap();
    assert_eq!(got, ["tcp-keepalive", "300"]);
    let third = open(d.port);
    assert!(server_socket_timers(d.port, third.local_addr().unwrap().port()).contains("keepalive"));
}

#[test]
fn jemalloc_background_thread_follows_the_setting() {
    fn running(con: &mut redis::Connection) -> bool {
        let stats: String = redis::cmd("MEMORY").arg("MALLOC-STATS").query(con).unwrap();
        match (stats.contains("(background_thread: true)"), stats.contains("(background_thread: false)")) {
            (true, false) => true,
            (false, true) => false,
            _ => panic!("no background_thread state in MALLOC-STATS"),
        }
    }
    let get = |con: &mut redis::Connection| -> Vec<String> {
        redis::cmd("CONFIG").arg("GET").arg("jemalloc-bg-thread").query(con).unwrap()
    };
    let on = Server::start(&[]);
    let mut con = on.conn();
    assert_eq!(get(&mut con), ["jemalloc-bg-thread", "yes"]);
    assert!(running(&mut con));
    let off = Server::start(&["--jemalloc-bg-thread", "no"]);
    let mut con = off.conn();
    assert_eq!(get(&mut con), ["jemalloc-bg-thread", "no"]);
    assert!(!running(&mut con));
    let _: () = redis::cmd("CONFIG").arg("SET").arg("jemalloc-bg-thread").arg("yes").query(&mut con).unwrap();
    assert_eq!(get(&mut con), ["jemalloc-bg-thread", "yes"]);
    assert!(running(&mut con));
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("jemalloc-bg-thread")
        .arg("maybe")
        .query::<()>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("argument must be 'yes' or 'no'"), "{err}");
}

#[test]
fn memory_usage_and_friends() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    // MALLOC-STATS is jemalloc's own report, as Redis's is.
    let stats: String = redis::cmd("MEMORY").arg("MALLOC-STATS").query(&mut con).unwrap();
    assert!(stats.starts_with("___ Begin jemalloc statistics ___"), "{}", &stats[..stats.len().min(200)]);
    assert!(
        stats.trim_end().ends_with("--- End jemalloc statistics ---"),
        "{}",
        &stats[stats.len().saturating_sub(200)..]
    );
    let none: Option<i64> = redis::cmd("MEMORY").arg("USAGE").arg("nokey").query(&mut con).unwrap();
    assert_eq!(none, None);
    let _: () = redis::cmd("SET").arg("small").arg("x").query(&mut con).unwrap();
    let _: () = redis::cmd("SET").arg("large").arg("x".repeat(10_000)).query(&mut con).unwrap();
    let small: i64 = redis::cmd("MEMORY").arg("USAGE").arg("small").query(&mut con).unwrap();
    let large: i64 =
        redis::cmd("MEMORY").arg("USAGE").arg("large").arg("SAMPLES").arg(5).query(&mut con).unwrap();
    assert!(small > 0 && large >= 10_000 && large > small);
    let err =
        redis::cmd("MEMORY").arg("USAGE").arg("k").arg("SAMPLES").arg("x").query::<()>(&mut con).unwrap_err();
    assert!(err.to_string().contains("value is not an integer or out of range"));
    // MEMORY STATS names what redis-server 7.0.15 names, in its order (node-redis's test reads
    // every field), with the figures INFO memory reports.
    let names = |c: &mut redis::Connection| -> Vec<String> {
        let v: Vec<Value> = redis::cmd("MEMORY").arg("STATS").query(c).unwrap();
        v.iter().step_by(2).map(|n| redis::from_redis_value_ref::<String>(n).unwrap()).collect()
    };
    let r = common::RedisServer::start();
    let mut rc = r.conn();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut rc).unwrap();
    // Less the three that Redis 7.4 added, in the places it gave them.
    let ours: Vec<String> = names(&mut con)
        .into_iter()
        .filter(|n| {
            !matches!(
                n.as_str(),
                "overhead.db.hashtable.lut" | "overhead.db.hashtable.rehashing" | "db.dict.rehashing.count"
            )
        })
        .collect();
    assert_eq!(ours, names(&mut rc));
    let all = names(&mut con);
    let at = |n: &str| all.iter().position(|x| x == n).unwrap_or_else(|| panic!("no {n}: {all:?}"));
    assert!(at("db.0") < at("overhead.db.hashtable.lut"));
    assert!(at("overhead.db.hashtable.rehashing") < at("overhead.total"));
    assert_eq!(at("db.dict.rehashing.count"), at("overhead.total") + 1);
    let stats: Vec<Value> = redis::cmd("MEMORY").arg("STATS").query(&mut con).unwrap();
    let field = |name: &str| -> Value {
        let at = stats.iter().position(|v| *v == Value::BulkString(name.as_bytes().to_vec())).unwrap();
        stats[at + 1].clone()
    };
    assert_eq!(field("keys.count"), Value::Int(2));
    let (Value::Int(total), Value::Int(dataset)) = (field("total.allocated"), field("dataset.bytes")) else {
        panic!("integers")
    };
    assert!(total > 0 && dataset > 0 && dataset <= total, "{total} {dataset}");
    let frag: f64 = redis::from_redis_value_ref::<String>(&field("fragmentation")).unwrap().parse().unwrap();
    assert!(frag > 0.0);
    let _: String = redis::cmd("MEMORY").arg("DOCTOR").query(&mut con).unwrap();
    let _: () = redis::cmd("MEMORY").arg("PURGE").query(&mut con).unwrap();
}

/// MEMORY PURGE hands what jemalloc keeps of freed memory back to the kernel at once: after
/// 64 MiB of values are flushed, the allocator's resident figure falls by most of it with the
/// purge, where jemalloc would otherwise keep the dirty pages for seconds.
#[test]
fn memory_purge_returns_freed_pages() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let value = vec![b'v'; 32 * 1024];
    for batch in 0..8 {
        let mut pipe = redis::pipe();
        for i in 0..256 {
            pipe.cmd("SET").arg(format!("k{batch}:{i}")).arg(&value).ignore();
        }
        let _: () = pipe.query(&mut con).unwrap();
    }
    let resident = |con: &mut redis::Connection| -> i64 {
        let text: String = redis::cmd("INFO").arg("memory").query(con).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("allocator_resident:"))
            .expect("allocator_resident in INFO memory")
            .trim()
            .parse()
            .unwrap()
    };
    let full = resident(&mut con);
    let _: () = redis::cmd("FLUSHALL").arg("SYNC").query(&mut con).unwrap();
    let flushed = resident(&mut con);
    let _: () = redis::cmd("MEMORY").arg("PURGE").query(&mut con).unwrap();
    let purged = resident(&mut con);
    assert!(full > 64 << 20, "the values are resident: {full}");
    assert!(flushed - purged > 48 << 20, "resident: {full} full, {flushed} flushed, {purged} purged");
    let err = redis::cmd("MEMORY").arg("PURGE").arg("now").query::<()>(&mut con).unwrap_err();
    assert!(err.to_string().contains("wrong number of arguments for 'memory|purge'"), "{err}");
}

#[test]
fn multi_exec_discard() {
    let s = Server::start(&[]);
    let mut raw = s.raw();
    send(&mut raw, b"MULTI\r\nSET t 1\r\nINCR t\r\nGET t\r\nEXEC\r\n");
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    for _ in 0..3 {
        assert_eq!(read_reply(&mut raw), b"+QUEUED\r\n");
    }
    assert_eq!(read_reply(&mut raw), b"*3\r\n+OK\r\n:2\r\n$1\r\n2\r\n");
    send(&mut raw, b"MULTI\r\nMULTI\r\nNOSUCH\r\nSET t 5\r\nEXEC\r\nGET t\r\n");
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR MULTI calls can not be nested\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR unknown command 'NOSUCH', with args beginning with: \r\n");
    assert_eq!(read_reply(&mut raw), b"+QUEUED\r\n");
    assert_eq!(read_reply(&mut raw), b"-EXECABORT Transaction discarded because of previous errors.\r\n");
    assert_eq!(read_reply(&mut raw), b"$1\r\n2\r\n");
    send(&mut raw, b"MULTI\r\nSET t 9\r\nDISCARD\r\nGET t\r\nEXEC\r\nDISCARD\r\n");
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    assert_eq!(read_reply(&mut raw), b"+QUEUED\r\n");
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    assert_eq!(read_reply(&mut raw), b"$1\r\n2\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR EXEC without MULTI\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR DISCARD without MULTI\r\n");
    // The redis crate's atomic pipeline.
    let mut con = s.conn();
    let (a, b): (i64, i64) =
        redis::pipe().atomic().cmd("INCR").arg("t").cmd("INCR").arg("t").query(&mut con).unwrap();
    assert_eq!((a, b), (3, 4));
}

#[test]
fn reset_leaves_multi_and_reply_modes() {
    let s = Server::start(&[]);
    let mut raw = s.raw();
    send(&mut raw, b"CLIENT SETNAME n\r\nMULTI\r\nRESET\r\nCLIENT GETNAME\r\nEXEC\r\n");
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    assert_eq!(read_reply(&mut raw), b"+RESET\r\n");
    assert_eq!(read_reply(&mut raw), b"$-1\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR EXEC without MULTI\r\n");
}

/// The same requests to goblin-core and redis-server give the same bytes (for replies that do
/// not depend on ids, times or versions).
#[test]
fn server_command_errors_match_redis() {
    let g = Server::start(&[]);
    let r = RedisServer::start();
    let requests: &[&[u8]] = &[
        b"SELECT abc\r\n",
        b"SELECT -1\r\n",
        b"HELLO abc\r\n",
        b"HELLO 2 AUTH foo bar\r\n",
        b"AUTH a b c\r\n",
        b"CLIENT SETNAME \"a b\"\r\n",
        b"CLIENT KILL 1.2.3.4:5\r\n",
        b"CLIENT KILL ID abc\r\n",
        b"CLIENT KILL foo bar\r\n",
        b"CLIENT KILL ID 999999\r\n",
        b"CLIENT REPLY foo\r\n",
        b"CLIENT NO-EVICT maybe\r\n",
        b"CLIENT foo\r\n",
        b"CLIENT LIST TYPE foo\r\n",
        b"CONFIG SET foo bar\r\n",
        b"CONFIG SET maxmemory\r\n",
        b"CONFIG GET\r\n",
        b"CONFIG foo\r\n",
        b"MEMORY foo\r\n",
        b"MEMORY USAGE nokey\r\n",
        b"MEMORY USAGE a SAMPLES x\r\n",
        b"COMMAND foo\r\n",
        b"COMMAND GETKEYS get a\r\n",
        b"COMMAND GETKEYS foo a\r\n",
        b"COMMAND GETKEYS ping a\r\n",
        b"COMMAND GETKEYS get a b\r\n",
        b"COMMAND GETKEYS mset a b c d\r\n",
        b"COMMAND INFO nosuch\r\n",
        b"EXEC\r\n",
        b"DISCARD\r\n",
        b"SHUTDOWN foo\r\n",
        b"RESET\r\n",
        b"CLIENT GETNAME\r\n",
        b"TIME x\r\n",
        b"ROLE x\r\n",
        b"CLIENT UNBLOCK 5 maybe\r\n",
        b"CLIENT UNBLOCK abc\r\n",
        b"CLIENT UNBLOCK 5 timeout x\r\n",
        b"CLIENT UNBLOCK -1\r\n",
        b"WATCH\r\n",
        b"UNWATCH\r\n",
        b"MULTI\r\n",
        b"WATCH k\r\n",
        b"UNWATCH\r\n",
        b"EXEC\r\n",
        b"HELLO 2 AUTH\r\n",
        b"HELLO 2 FOO\r\n",
        b"HELLO 2 SETNAME \"a b\"\r\n",
        // No cluster mode: a cluster-aware client's probes get Redis's own refusal.
        b"CLUSTER INFO\r\n",
        b"CLUSTER SLOTS\r\n",
        b"CLUSTER\r\n",
        b"READONLY\r\n",
        b"READWRITE\r\n",
        b"ASKING\r\n",
        b"READONLY x\r\n",
        // DEBUG disabled (both servers' default): refused whatever the subcommand.
        b"DEBUG JMAP\r\n",
        b"DEBUG HELP\r\n",
    ];
    same_replies(&g, &r, requests);
}

/// DEBUG enabled: a subcommand the server does not know gets Redis 8.2's own refusal (DEBUG
/// is no container command: `unknown subcommand or wrong number of arguments for 'jmap'`).
#[test]
fn debug_refusals_match_redis8() {
    let g = Server::start(&["--enable-debug-command", "yes"]);
    let r = RedisServer::start8_with(&["--enable-debug-command", "yes"]);
    same_replies(&g, &r, &[b"DEBUG jmap\r\n", b"DEBUG NO-SUCH-THING a b\r\n", b"DEBUG ERROR\r\n"]);
}

#[test]
fn active_expiry_removes_keys_nobody_reads() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let mut p = redis::pipe();
    for i in 0..3000 {
        p.cmd("SET").arg(format!("vol:{i}")).arg("v").arg("PX").arg(100).ignore();
    }
    p.cmd("SET").arg("stays").arg("v").ignore();
    let _: () = p.query(&mut con).unwrap();
    let offset_before = num(&info(&mut con, "replication"), "master_repl_offset");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        // DBSIZE counts stored keys without touching them: only active expiry can lower it.
        let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
        if n == 1 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{n} keys left");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let m = info(&mut con, "all");
    assert_eq!(num(&m, "expired_keys"), 3000);
    assert_eq!(m["db0"], "keys=1,expires=0,avg_ttl=0,subexpiry=0");
    // Each removal is a canonical DEL mutation and advances the offset.
    assert_eq!(num(&m, "master_repl_offset"), offset_before + 3000);
}

/// instantaneous_ops_per_sec follows the load: it counts bursts of commands once cron ticks
/// (every 100 ms) have sampled them, and falls back to 0 once the sample ring (the last 1.5 s
/// or more) holds no load. Nothing here depends on the machine's speed: a burst is 20,000
/// commands, so once sampled it gives at least 20,000 per sample span, far above the 100 that
/// the test's own INFO polls could reach; when idle, the polls are 2 s apart, so the ring holds
/// at most one per 1.5 s of span and the integer rate is 0. The deadlines only guard a hang.
#[test]
fn instantaneous_ops_per_sec_reflects_load() {
    use std::time::{Duration, Instant};
    let s = Server::start(&[]);
    let mut con = s.conn();
    let mut p = redis::pipe();
    for _ in 0..20_000 {
        p.cmd("PING").ignore();
    }
    // The deadlines below are hang guards for a broken sampler, far beyond any machine's pace.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        // Repeated: a burst that falls before the server's first sample is never counted.
        let _: () = p.query(&mut con).unwrap();
        let ops = num(&info(&mut con, "stats"), "instantaneous_ops_per_sec");
        if ops >= 100 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "hang guard: bursts never showed: instantaneous_ops_per_sec:{ops}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        std::thread::sleep(Duration::from_secs(2));
        let ops = num(&info(&mut con, "stats"), "instantaneous_ops_per_sec");
        if ops == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "hang guard: an idle server kept reporting instantaneous_ops_per_sec:{ops}"
        );
    }
}

#[test]
fn watch_aborts_exec_when_a_watched_key_changes() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    let mut other = s.conn();
    // Untouched watch: EXEC runs.
    send(&mut a, b"WATCH w1 w2\r\nMULTI\r\nINCR w1\r\nEXEC\r\n");
    assert_eq!(read_reply(&mut a), b"+OK\r\n");
    assert_eq!(read_reply(&mut a), b"+OK\r\n");
    assert_eq!(read_reply(&mut a), b"+QUEUED\r\n");
    assert_eq!(read_reply(&mut a), b"*1\r\n:1\r\n");
    // Another client writes a watched key: EXEC answers a null array and runs nothing.
    send(&mut a, b"WATCH w2\r\n");
    assert_eq!(read_reply(&mut a), b"+OK\r\n");
    let _: () = redis::cmd("SET").arg("w2").arg("x").query(&mut other).unwrap();
    send(&mut a, b"MULTI\r\nINCR w1\r\nEXEC\r\nGET w1\r\n");
    assert_eq!(read_reply(&mut a), b"+OK\r\n");
    assert_eq!(read_reply(&mut a), b"+QUEUED\r\n");
    assert_eq!(read_reply(&mut a), b"*-1\r\n");
    assert_eq!(read_reply(&mut a), b"$1\r\n1\r\n");
    // EXEC cleared the watch: the next transaction runs despite the earlier write.
    send(&mut a, b"MULTI\r\nINCR w1\r\nEXEC\r\n");
    assert_eq!(read_reply(&mut a), b"+OK\r\n");
    assert_eq!(read_reply(&mut a), b"+QUEUED\r\n");
    assert_eq!(read_reply(&mut a), b"*1\r\n:2\r\n");
    // UNWATCH forgets; expiry and FLUSHALL count as changes; WATCH inside MULTI is refused.
    send(&mut a, b"WATCH w1\r\nUNWATCH\r\nMULTI\r\nWATCH w1\r\nEXEC\r\n");
    assert_eq!(read_reply(&mut a), b"+OK\r\n");
    assert_eq!(read_reply(&mut a), b"+OK\r\n");
    assert_eq!(read_reply(&mut a), b"+OK\r\n");
    assert_eq!(read_reply(&mut a), b"-ERR WATCH inside MULTI is not allowed\r\n");
    assert_eq!(read_reply(&mut a), b"*0\r\n");
    send(&mut a, b"SET gone v PX 30\r\nWATCH gone\r\n");
    assert_eq!(read_reply(&mut a), b"+OK\r\n");
    assert_eq!(read_reply(&mut a), b"+OK\r\n");
    std::thread::sleep(std::time::Duration::from_millis(300));
    send(&mut a, b"MULTI\r\nPING\r\nEXEC\r\n");
    assert_eq!(read_reply(&mut a), b"+OK\r\n");
    assert_eq!(read_reply(&mut a), b"+QUEUED\r\n");
    assert_eq!(read_reply(&mut a), b"*-1\r\n");
    // FLUSHALL changes a watched key that exists (a missing one is untouched: see
    // flush_and_shutdown_inside_transactions).
    send(&mut a, b"SET any 1\r\nWATCH any\r\n");
    assert_eq!(read_reply(&mut a), b"+OK\r\n");
    assert_eq!(read_reply(&mut a), b"+OK\r\n");
    let _: () = redis::cmd("FLUSHALL").query(&mut other).unwrap();
    send(&mut a, b"MULTI\r\nPING\r\nEXEC\r\n");
    assert_eq!(read_reply(&mut a), b"+OK\r\n");
    assert_eq!(read_reply(&mut a), b"+QUEUED\r\n");
    assert_eq!(read_reply(&mut a), b"*-1\r\n");
    // The redis crate's check-and-set helper.
    let mut con = s.conn();
    let _: () = redis::cmd("SET").arg("cas").arg(10).query(&mut con).unwrap();
    let (v,): (i64,) = redis::transaction(&mut con, &["cas"], |c, pipe| {
        let cur: i64 = redis::cmd("GET").arg("cas").query(c)?;
        pipe.cmd("SET").arg("cas").arg(cur * 2).ignore().cmd("GET").arg("cas").query(c)
    })
    .unwrap();
    assert_eq!(v, 20);
}

/// Sends each command as a RESP array and reads its one reply.
fn run_each(raw: &mut std::net::TcpStream, cmds: &[&[&str]]) {
    for args in cmds {
        let mut req = format!("*{}\r\n", args.len());
        for a in *args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        send(raw, req.as_bytes());
        read_reply(raw);
    }
}

/// INFO <section> over a raw connection, as text.
fn raw_info(raw: &mut std::net::TcpStream, section: &str) -> String {
    send(raw, format!("INFO {section}\r\n").as_bytes());
    let reply = read_reply(raw);
    let text = String::from_utf8(reply).unwrap();
    // `$<len>\r\n<text>\r\n`
    let body = text.split_once("\r\n").unwrap().1;
    body[..body.len() - 2].to_string()
}

/// `cmdstat_<name>` -> (calls, rejected_calls, failed_calls), checking each row's format.
fn cmdstats(text: &str) -> HashMap<String, (u64, u64, u64)> {
    let mut rows = HashMap::new();
    for line in text.lines().filter(|l| l.starts_with("cmdstat_")) {
        let (name, fields) = line.split_once(':').unwrap();
        let f: Vec<(&str, &str)> = fields.split(',').map(|kv| kv.split_once('=').unwrap()).collect();
        let keys: Vec<&str> = f.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["calls", "usec", "usec_per_call", "rejected_calls", "failed_calls"], "{line}");
        let per_call = f[2].1;
        assert!(per_call.split_once('.').is_some_and(|(_, d)| d.len() == 2), "{line}");
        let n = |i: usize| f[i].1.parse::<u64>().unwrap();
        rows.insert(name["cmdstat_".len()..].to_string(), (n(0), n(3), n(4)));
    }
    rows
}

/// `errorstat_<PREFIX>` -> count.
fn errorstats(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("errorstat_"))
        .map(|l| {
            let (k, v) = l.split_once(":count=").unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn info_commandstats_and_errorstats() {
    // A sequence with plain calls, failures (error replies from running commands), rejections
    // (arity, before running; also while queuing in MULTI), unknown commands and subcommands,
    // subcommand rows, and commands run by EXEC.
    let seq: &[&[&str]] = &[
        &["CONFIG", "RESETSTAT"],
        &["SET", "a", "1"],
        &["GET", "a"],
        &["GET"],
        &["GET", "a", "b"],
        &["LPUSH", "a", "x"],
        &["NOSUCH", "x"],
        &["CLIENT", "SETNAME"],
        &["CLIENT", "FOO"],
        &["CLIENT", "LIST"],
        &["INCR", "a"],
        &["SET", "a", "x"],
        &["INCR", "a"],
        &["MULTI"],
        &["SET", "a", "1"],
        &["GET"],
        &["EXEC"],
        &["MULTI"],
        &["LPUSH", "a", "x"],
        &["INCR", "a"],
        &["EXEC"],
        &["EXEC"],
    ];
    let s = Server::start(&[]);
    let mut raw = s.raw();
    run_each(&mut raw, seq);
    let text = raw_info(&mut raw, "commandstats");
    assert!(text.starts_with("# Commandstats\r\n"), "{text}");
    let rows = cmdstats(&text);
    let want: HashMap<String, (u64, u64, u64)> = [
        ("config|resetstat", (1, 0, 0)),
        ("set", (2, 0, 0)),
        ("get", (1, 3, 0)),
        ("lpush", (2, 0, 2)),
        ("client|setname", (0, 1, 0)),
        ("client|list", (1, 0, 0)),
        ("incr", (3, 0, 2)),
        ("multi", (2, 0, 0)),
        ("exec", (3, 0, 2)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(rows, want, "{text}");
    let errs = errorstats(&raw_info(&mut raw, "errorstats"));
    let want_errs: HashMap<String, u64> = [("ERR", 9), ("WRONGTYPE", 2), ("EXECABORT", 1)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    assert_eq!(errs, want_errs);
    assert_eq!(num(&info_map(&raw_info(&mut raw, "stats")), "total_error_replies"), 12);

    // redis-server 7 counts the same sequence the same way (times aside).
    let r = RedisServer::start();
    let mut rraw = r.raw();
    run_each(&mut rraw, seq);
    assert_eq!(cmdstats(&raw_info(&mut rraw, "commandstats")), want);
    assert_eq!(errorstats(&raw_info(&mut rraw, "errorstats")), want_errs);

    // Plain INFO has errorstats but not commandstats (as Redis 7.0); all/everything have both.
    let plain = raw_info(&mut raw, "");
    assert!(plain.contains("# Errorstats\r\n") && !plain.contains("# Commandstats"));
    for all in ["all", "everything"] {
        let text = raw_info(&mut raw, all);
        let (cpu, cmd, err, ks) = (
            text.find("# CPU").unwrap(),
            text.find("# Commandstats").unwrap(),
            text.find("# Errorstats").unwrap(),
            text.find("# Keyspace").unwrap(),
        );
        assert!(cpu < cmd && cmd < err && err < ks, "Redis's section order");
        assert!(text.contains("cmdstat_set:calls=2,"));
    }

    // CONFIG RESETSTAT clears both; it is then the only command counted.
    run_each(&mut raw, &[&["CONFIG", "RESETSTAT"]]);
    let rows = cmdstats(&raw_info(&mut raw, "commandstats"));
    assert_eq!(rows.into_iter().collect::<Vec<_>>(), vec![("config|resetstat".to_string(), (1, 0, 0))]);
    assert!(errorstats(&raw_info(&mut raw, "errorstats")).is_empty());
    assert_eq!(num(&info_map(&raw_info(&mut raw, "stats")), "total_error_replies"), 0);
}

/// FLUSHALL fails the transactions watching keys that existed, not those watching missing keys;
/// SHUTDOWN is refused inside MULTI and fails the transaction instead of stopping the server.
#[test]
fn flush_and_shutdown_inside_transactions() {
    let s = Server::start(&[]);
    let mut raw = s.raw();
    send(&mut raw, b"DEL x\r\nWATCH x\r\nFLUSHALL\r\nMULTI\r\nPING\r\nEXEC\r\n");
    for want in [&b":0\r\n"[..], b"+OK\r\n", b"+OK\r\n", b"+OK\r\n", b"+QUEUED\r\n", b"*1\r\n+PONG\r\n"] {
        assert_eq!(read_reply(&mut raw), want);
    }
    send(&mut raw, b"SET x 1\r\nWATCH x\r\nFLUSHALL\r\nMULTI\r\nPING\r\nEXEC\r\n");
    for want in [&b"+OK\r\n"[..], b"+OK\r\n", b"+OK\r\n", b"+OK\r\n", b"+QUEUED\r\n", b"*-1\r\n"] {
        assert_eq!(read_reply(&mut raw), want);
    }
    // Tools read the replication settings; a primary has them set to empty.
    send(&mut raw, b"CONFIG GET replicaof\r\n");
    assert_eq!(read_reply(&mut raw), b"*2\r\n$9\r\nreplicaof\r\n$0\r\n\r\n");
    send(&mut raw, b"MULTI\r\nSHUTDOWN\r\nEXEC\r\nPING\r\n");
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR Command not allowed inside a transaction\r\n");
    assert_eq!(read_reply(&mut raw), b"-EXECABORT Transaction discarded because of previous errors.\r\n");
    assert_eq!(read_reply(&mut raw), b"+PONG\r\n");
}

/// WAITAOF without a journal: there is no durable log to wait for, so asking for a local
/// acknowledgement is refused with Redis's text for a server whose AOF is off, and the
/// replica count is 0 (nothing is recoverable on a replica either). Bad arguments get
/// Redis's errors; inside MULTI it answers at once.
#[test]
fn waitaof_without_a_journal() {
    let s = Server::start(&[]);
    let mut raw = s.raw();
    send(
        &mut raw,
        b"SET k v\r\nWAITAOF 0 0 0\r\nWAITAOF 1 0 0\r\nWAITAOF 2 0 0\r\nWAITAOF -1 0 0\r\nWAITAOF x 0 0\r\n\
          WAITAOF 0 -1 0\r\nWAITAOF 0 x 0\r\nWAITAOF 0 0 -1\r\nWAITAOF 0 0 x\r\nWAITAOF 0 0\r\n",
    );
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    assert_eq!(read_reply(&mut raw), b"*2\r\n:0\r\n:0\r\n");
    assert_eq!(
        read_reply(&mut raw),
        &b"-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n"[..]
    );
    assert_eq!(read_reply(&mut raw), b"-ERR value is out of range, value must between 0 and 1\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR value is out of range, value must between 0 and 1\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR value is not an integer or out of range\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR value is out of range, must be positive\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR value is not an integer or out of range\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR timeout is negative\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR timeout is not an integer or out of range\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR wrong number of arguments for 'waitaof' command\r\n");
    // Asking for a replica that is not there parks the client (another connection sees it
    // blocked) until CLIENT UNBLOCK, or its timeout, answers what it has.
    send(&mut raw, b"CLIENT ID\r\n");
    let id = String::from_utf8(read_reply(&mut raw)).unwrap();
    let id = id.trim_start_matches(':').trim_end();
    send(&mut raw, b"WAITAOF 0 1 0\r\n");
    let mut other = s.conn();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while num(&info(&mut other, "clients"), "blocked_clients") != 1 {
        assert!(std::time::Instant::now() < deadline, "WAITAOF did not park");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let n: i64 = redis::cmd("CLIENT").arg("UNBLOCK").arg(id).query(&mut other).unwrap();
    assert_eq!(n, 1);
    assert_eq!(read_reply(&mut raw), b"*2\r\n:0\r\n:0\r\n");
    send(&mut raw, b"WAITAOF 0 1 50\r\n");
    assert_eq!(read_reply(&mut raw), b"*2\r\n:0\r\n:0\r\n");
    // Inside a transaction it never blocks.
    send(&mut raw, b"MULTI\r\nWAITAOF 0 1 0\r\nEXEC\r\n");
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    assert_eq!(read_reply(&mut raw), b"+QUEUED\r\n");
    assert_eq!(read_reply(&mut raw), b"*1\r\n*2\r\n:0\r\n:0\r\n");
}

/// Timeouts whose deadline the clock cannot hold are refused as redis-server 8.2 refuses them
/// ("timeout is out of range"), never a crash or a wrapped deadline: WAIT, WAITAOF, CLIENT
/// PAUSE, XREAD BLOCK and the blocking pops; the server answers the next request.
#[test]
fn timeouts_past_the_clock_are_out_of_range_as_redis8() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let requests: &[&[u8]] = &[
        b"WAIT 0 9223372036854775807\r\n",
        b"WAIT 5 9223372036854775000\r\n",
        b"WAITAOF 0 0 9223372036854775807\r\n",
        b"CLIENT PAUSE 9223372036854775807\r\n",
        b"CLIENT PAUSE 9223372036854775807 WRITE\r\n",
        b"XREAD BLOCK 9223372036854775807 STREAMS s 0\r\n",
        b"BLPOP l 0x7FFFFFFFFFFFFF\r\n",
        b"BLPOP l 9223372036854775\r\n",
        b"BZPOPMIN z inf\r\n",
        b"BLMOVE a b LEFT RIGHT 1e300\r\n",
        b"BLPOP l -0x1p9999\r\n",
        b"PING\r\n",
    ];
    same_replies(&g, &r, requests);
}

/// Protected mode, side by side with Redis 8.2, each listening on loopback and on a veth
/// address: while the default user has no password, a client from another host gets DENIED
/// and is disconnected (counted as a rejected connection) while loopback clients are served;
/// CONFIG SET protected-mode no, or a password, lets it in.
#[test]
fn protected_mode_turns_away_other_hosts_until_a_password_or_no() {
    let ns = common::netns::Netns::create();
    let goblin_port = common::free_port();
    let goblin = Server::start(&["--port", &goblin_port.to_string(), "--bind", "127.0.0.1", &ns.host]);
    let redis = RedisServer::start8_with(&["--bind", "127.0.0.1", &ns.host]);
    let rejected = |con: &mut redis::Connection| -> i64 {
        let info: String = redis::cmd("INFO").arg("stats").query(con).unwrap();
        info.lines().find_map(|l| l.strip_prefix("rejected_connections:")).unwrap().trim().parse().unwrap()
    };
    let mut seen = Vec::new();
    for (name, port, mut con) in
        [("goblin-core", goblin.port, goblin.conn()), ("redis", redis.port, redis.conn())]
    {
        let before = rejected(&mut con);
        let denied = ns.exchange(&ns.host, port, "");
        assert!(denied.starts_with("-DENIED "), "{name}: {denied}");
        assert!(denied.ends_with("\r\n<EOF>"), "{name}: the connection stays open: {denied}");
        let first_sentence = denied.split(". ").next().unwrap().to_string();
        let after = rejected(&mut con);
        // Loopback is served all along.
        let pong: String = redis::cmd("PING").query(&mut con).unwrap();
        assert_eq!(pong, "PONG", "{name}");
        let on: HashMap<String, String> =
            redis::cmd("CONFIG").arg("GET").arg("protected-mode").query(&mut con).unwrap();
        assert_eq!(on["protected-mode"], "yes", "{name}");
        let _: () = redis::cmd("CONFIG").arg("SET").arg("protected-mode").arg("no").query(&mut con).unwrap();
        let served = ns.exchange(&ns.host, port, "PING\r\n");
        assert_eq!(served, "+PONG\r\n", "{name} with protected-mode no");
        // On again, with a password: the client is let in, and then asked to authenticate.
        let _: () = redis::cmd("CONFIG").arg("SET").arg("protected-mode").arg("yes").query(&mut con).unwrap();
        assert!(ns.exchange(&ns.host, port, "").starts_with("-DENIED "), "{name}");
        let _: () = redis::cmd("CONFIG").arg("SET").arg("requirepass").arg("pw").query(&mut con).unwrap();
        let noauth = ns.exchange(&ns.host, port, "PING\r\n");
        assert!(noauth.starts_with("-NOAUTH "), "{name} with a password: {noauth}");
        let authed = ns.exchange(&ns.host, port, "AUTH pw\r\nPING\r\n");
        assert_eq!(authed, "+OK\r\n+PONG\r\n", "{name}");
        seen.push((first_sentence, after - before));
    }
    assert_eq!(
        seen[0], seen[1],
        "goblin-core, then redis-server 8.2: DENIED's first sentence and rejected_connections"
    );
    assert_eq!(seen[0].1, 1);
}

/// CONFIG SET loglevel at run time, as Redis: a level it does not know is refused with Redis
/// 8.2's text; `verbose` turns debug lines on (a connection's accept is one), `warning` off
/// again, and CONFIG GET reads back what was set.
#[test]
fn config_set_loglevel_changes_what_is_logged() {
    let s = Server::start(&["--loglevel", "warning"]);
    let r = RedisServer::start8();
    let mut con = s.conn();
    let mut rc = r.conn();
    let set = |c: &mut redis::Connection, v: &str| -> Result<(), String> {
        redis::cmd("CONFIG").arg("SET").arg("loglevel").arg(v).query::<()>(c).map_err(|e| e.to_string())
    };
    for bad in ["bla", "--bla", ""] {
        assert_eq!(set(&mut con, bad), set(&mut rc, bad), "{bad:?}");
        assert!(set(&mut con, bad).unwrap_err().contains("argument(s) must be one of the following"));
    }
    let accepted =
        |log: &str| log.lines().filter(|l| l.contains("DEBUG") && l.contains("accepted client")).count();
    drop(s.conn());
    assert_eq!(accepted(&s.log()), 0, "{}", s.log());
    set(&mut con, "verbose").unwrap();
    drop(s.conn());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while accepted(&s.log()) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no debug line after CONFIG SET loglevel verbose: {}",
            s.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("loglevel").query(&mut con).unwrap();
    assert_eq!(got, ["loglevel", "verbose"]);
    set(&mut con, "warning").unwrap();
    let before = accepted(&s.log());
    drop(s.conn());
    let _: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(accepted(&s.log()), before, "debug lines after CONFIG SET loglevel warning");
}

/// Redis's hidden test settings for slow loads (`key-load-delay`,
/// `loading-process-events-interval-bytes`): accepted and read back as Redis 8.2 does, by their
/// own name only (CONFIG GET * leaves them out), with its range checks.
#[test]
fn hidden_loading_settings_answer_by_name_as_redis8() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let mut replies = Vec::new();
    for c in [&mut g.conn(), &mut r.conn()] {
        let mut got = Vec::new();
        let mut show = |c: &mut redis::Connection, args: &[&str]| {
            let v: redis::RedisResult<redis::Value> = redis::cmd(args[0]).arg(&args[1..]).query(c);
            got.push(format!("{args:?} {v:?}"));
        };
        for name in ["key-load-delay", "loading-process-events-interval-bytes"] {
            show(c, &["CONFIG", "GET", name]);
        }
        show(c, &["CONFIG", "SET", "key-load-delay", "-5"]);
        show(c, &["CONFIG", "GET", "key-load-delay"]);
        show(c, &["CONFIG", "SET", "loading-process-events-interval-bytes", "100"]);
        show(c, &["CONFIG", "SET", "loading-process-events-interval-bytes", "4096"]);
        show(c, &["CONFIG", "GET", "loading-process-events-interval-bytes"]);
        show(c, &["CONFIG", "SET", "key-load-delay", "0"]);
        let all: HashMap<String, String> = redis::cmd("CONFIG").arg("GET").arg("*").query(c).unwrap();
        got.push(format!(
            "{:?}",
            ["key-load-delay", "loading-process-events-interval-bytes"].map(|n| all.contains_key(n))
        ));
        replies.push(got);
    }
    assert_eq!(replies[0], replies[1]);
    assert!(replies[0].last().unwrap().contains("false, false"), "{:?}", replies[0]);
}

/// INFO memory's `used_memory_peak_time` (Redis 8): when the peak was reached, in unix
/// seconds; a new peak moves it, CONFIG RESETSTAT keeps it with the peak.
#[test]
fn used_memory_peak_time_follows_the_peak() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let field = |c: &mut redis::Connection, name: &str| -> u64 {
        let info: String = redis::cmd("INFO").arg("memory").query(c).unwrap();
        let prefix = format!("{name}:");
        info.lines().find_map(|l| l.strip_prefix(prefix.as_str())).unwrap().trim().parse().unwrap()
    };
    let (t0, p0) = (field(&mut c, "used_memory_peak_time"), field(&mut c, "used_memory_peak"));
    assert!(t0 > 0 && t0 <= now() + 1, "{t0}");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    // 16 MB more than the peak so far: a new peak, reached after t0.
    let _: () = redis::cmd("SET").arg("big").arg(vec![b'x'; 16 << 20]).query(&mut c).unwrap();
    let (t1, p1) = (field(&mut c, "used_memory_peak_time"), field(&mut c, "used_memory_peak"));
    assert!(p1 >= p0 + (16 << 20), "{p0} -> {p1}");
    assert!(t1 > t0, "{t0} -> {t1}");
    // Below the peak from here on: RESETSTAT keeps both figures as they are.
    let _: () = redis::cmd("DEL").arg("big").query(&mut c).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (tb, pb) = (field(&mut c, "used_memory_peak_time"), field(&mut c, "used_memory_peak"));
    assert!(tb >= t1 && pb >= p1, "{t1} {p1} -> {tb} {pb}");
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    assert_eq!(field(&mut c, "used_memory_peak_time"), tb);
    assert_eq!(field(&mut c, "used_memory_peak"), pb);
}
