//! ACL against the real binary: SETUSER / DELUSER / GETUSER / LIST / CAT / GENPASS / DRYRUN /
//! LOG, and the permissions they set (commands, key and channel patterns, selectors) enforced
//! on commands, transactions, scripts, blocked commands and subscribers, replies compared
//! with redis-server 8.2's.

mod common;

use common::{RedisServer, Server};
use redis::Value;

fn q(c: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

#[test]
fn users_managed_at_runtime_match_redis() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let mut replies = Vec::new();
    for c in [&mut g.conn(), &mut r.conn()] {
        let mut got = Vec::new();
        for cmd in [
            vec!["ACL", "SETUSER", "alice", "on", ">pw", "~*", "&*", "+@all"],
            vec!["ACL", "SETUSER", "alice", ">pw2", "<pw"],
            vec!["ACL", "LIST"],
            vec!["ACL", "GETUSER", "alice"],
            vec!["ACL", "GETUSER", "default"],
            vec!["ACL", "GETUSER", "nobody"],
            vec!["ACL", "SETUSER", "alice", "bogus"],
            vec!["ACL", "DELUSER", "default"],
            vec!["ACL", "USERS"],
            vec!["ACL", "DELUSER", "alice", "nobody"],
            vec!["ACL", "USERS"],
            vec!["ACL", "CAT", "nope"],
            vec!["ACL", "GENPASS", "0"],
        ] {
            got.push(format!("{:?}", q(c, &cmd).map_err(|e| e.to_string())));
        }
        replies.push(got);
    }
    for (i, (ours, theirs)) in replies[0].iter().zip(&replies[1]).enumerate() {
        assert_eq!(ours, theirs, "reply {i}");
    }
}

#[test]
fn new_users_authenticate_and_deleted_users_are_disconnected() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    q(&mut admin, &["ACL", "SETUSER", "bob", "on", ">secret", "allkeys", "allcommands"]).unwrap();
    let mut bob = s.conn();
    assert!(q(&mut bob, &["AUTH", "bob", "wrong"]).is_err());
    assert_eq!(q(&mut bob, &["AUTH", "bob", "secret"]).unwrap(), Value::Okay);
    assert_eq!(q(&mut bob, &["ACL", "WHOAMI"]).unwrap(), Value::BulkString(b"bob".to_vec()));
    // A malformed rule is refused, and changes nothing.
    let err = q(&mut admin, &["ACL", "SETUSER", "bob", "off", "(%X~cache:*)"]).unwrap_err();
    assert!(err.to_string().contains("Error in ACL SETUSER modifier '(%X~cache:*)': Syntax error"), "{err}");
    assert_eq!(q(&mut bob, &["PING"]).unwrap(), Value::SimpleString("PONG".into()));
    assert_eq!(q(&mut admin, &["ACL", "DELUSER", "bob"]).unwrap(), Value::Int(1));
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(q(&mut bob, &["PING"]).is_err(), "bob's connection was closed");
    let cats = q(&mut admin, &["ACL", "CAT"]).unwrap();
    let Value::Array(cats) = cats else { panic!("{cats:?}") };
    assert!(cats.contains(&Value::BulkString(b"keyspace".to_vec())));
    let keyspace = q(&mut admin, &["ACL", "CAT", "keyspace"]).unwrap();
    let Value::Array(cmds) = keyspace else { panic!() };
    assert!(cmds.contains(&Value::BulkString(b"del".to_vec())));
    let Value::BulkString(pw) = q(&mut admin, &["ACL", "GENPASS", "32"]).unwrap() else { panic!() };
    assert_eq!(pw.len(), 8);
}

/// Command, key and channel permissions, every reply compared with redis-server 8.2's: a
/// user limited to some commands, one without keys, one without channels, one without a
/// category and a command; MULTI with a refused command, a script calling one, ACL DRYRUN,
/// GETUSER and LIST; and a user's rules changed while it is connected.
#[test]
fn permissions_are_enforced_as_redis_enforces_them() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let setup: &[&[&str]] = &[
        &["ACL", "SETUSER", "lim", "on", ">pw", "+get", "+acl|whoami", "+multi", "+exec", "+eval", "~*"],
        &["ACL", "SETUSER", "nokeys", "on", ">pw", "+@all"],
        &["ACL", "SETUSER", "cat", "on", ">pw", "~*", "&*", "+@all", "-@dangerous", "-set"],
        &["ACL", "SETUSER", "fresh"],
        &["ACL", "SETUSER", "shard", "on", ">pw", "+@all", "~*", "resetchannels", "&channel"],
        &["ACL", "SETUSER", "rw", "on", ">pw", "+@all", "%R~read*", "%W~write*", "%RW~rw*"],
    ];
    let session: &[(&str, &[&str])] = &[
        ("lim", &["GET", "k"]),
        ("lim", &["SET", "k", "v"]),
        ("lim", &["ACL", "WHOAMI"]),
        ("lim", &["ACL", "LIST"]),
        ("lim", &["PUBLISH", "ch", "m"]),
        ("lim", &["MULTI"]),
        ("lim", &["SET", "k", "v"]),
        ("lim", &["EXEC"]),
        ("lim", &["EVAL", "return redis.pcall('set', 'k', 'v')", "0"]),
        ("lim", &["EVAL", "return redis.acl_check_cmd('get', 'k')", "0"]),
        ("lim", &["EVAL", "return redis.acl_check_cmd('set', 'k', 'v')", "0"]),
        ("lim", &["EVAL", "return redis.acl_check_cmd('nosuch')", "0"]),
        ("nokeys", &["GET", "k"]),
        ("nokeys", &["MSET", "a", "1", "b", "2"]),
        ("nokeys", &["PING"]),
        ("nokeys", &["PUBLISH", "ch", "m"]),
        ("nokeys", &["SUBSCRIBE", "ch"]),
        ("cat", &["SET", "k", "v"]),
        ("cat", &["GET", "k"]),
        ("cat", &["KEYS", "*"]),
        ("cat", &["CONFIG", "GET", "maxmemory"]),
        ("cat", &["PUBLISH", "ch", "m"]),
        ("default", &["ACL", "DRYRUN", "lim", "set", "k", "v"]),
        ("default", &["ACL", "DRYRUN", "lim", "get", "k"]),
        ("default", &["ACL", "DRYRUN", "nokeys", "get", "k"]),
        ("default", &["ACL", "DRYRUN", "nokeys", "publish", "ch", "m"]),
        ("default", &["ACL", "DRYRUN", "cat", "flushall"]),
        ("default", &["ACL", "DRYRUN", "fresh", "ping"]),
        // The sharded pub/sub commands' channels are channels, not keys.
        ("default", &["ACL", "DRYRUN", "shard", "spublish", "channel", "m"]),
        ("default", &["ACL", "DRYRUN", "shard", "ssubscribe", "channel"]),
        ("default", &["ACL", "DRYRUN", "shard", "sunsubscribe", "other"]),
        ("default", &["ACL", "DRYRUN", "shard", "spublish", "other", "m"]),
        ("default", &["ACL", "DRYRUN", "shard", "ssubscribe", "channel", "other"]),
        ("default", &["COMMAND", "GETKEYS", "spublish", "channel", "m"]),
        // MIGRATE's keys are read, written and deleted, wherever they stand.
        ("default", &["ACL", "DRYRUN", "rw", "MIGRATE", "h", "1", "rw", "0", "500"]),
        ("default", &["ACL", "DRYRUN", "rw", "MIGRATE", "h", "1", "write", "0", "500"]),
        ("default", &["ACL", "DRYRUN", "rw", "MIGRATE", "h", "1", "", "0", "500", "KEYS", "rw", "write"]),
        (
            "default",
            &["ACL", "DRYRUN", "rw", "MIGRATE", "h", "1", "", "0", "500", "AUTH", "KEYS", "KEYS", "read"],
        ),
        ("default", &["COMMAND", "GETKEYSANDFLAGS", "MIGRATE", "h", "1", "", "0", "500", "KEYS", "a", "b"]),
        ("default", &["ACL", "GETUSER", "cat"]),
        ("default", &["ACL", "GETUSER", "fresh"]),
        ("default", &["ACL", "LIST"]),
        ("default", &["ACL", "SETUSER", "x", "+nosuch"]),
        ("default", &["ACL", "SETUSER", "x", "+config|nosuch"]),
        ("default", &["ACL", "SETUSER", "x", "-@nosuch"]),
        // Rules changed under a connected user apply from its next command.
        ("default", &["ACL", "SETUSER", "lim", "+set"]),
        ("lim", &["SET", "k", "v2"]),
        ("default", &["ACL", "SETUSER", "lim", "-@all"]),
        ("lim", &["GET", "k"]),
    ];
    let run = |port: u16| run_session(port, setup, &["lim", "nokeys", "cat"], session);
    assert_same(&run(g.port), &run(r.port), session);
}

/// A raw connection, authenticated as `user` (password `pw`) unless it is `default`.
fn raw(port: u16, user: &str) -> std::net::TcpStream {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    if user != "default" {
        common::send(&mut s, format!("AUTH {user} pw\r\n").as_bytes());
        assert_eq!(common::read_reply(&mut s), b"+OK\r\n");
    }
    s
}

/// One command on a raw connection; the reply as RESP text.
fn raw_cmd(s: &mut std::net::TcpStream, args: &[&str]) -> String {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let mut req = Vec::new();
    resp::reply::bulk_array(&mut req, &args);
    common::send(s, &req);
    String::from_utf8_lossy(&common::read_reply(s)).into_owned()
}

/// Runs `setup` as the default user (none may fail), then `session`, each step on a
/// connection of its user (authenticated once, before the session); the raw replies.
fn run_session(port: u16, setup: &[&[&str]], users: &[&str], session: &[(&str, &[&str])]) -> Vec<String> {
    let mut admin = raw(port, "default");
    for c in setup {
        let reply = raw_cmd(&mut admin, c);
        assert!(!reply.starts_with('-'), "{c:?}: {reply}");
    }
    let mut conns: std::collections::HashMap<&str, std::net::TcpStream> = std::collections::HashMap::new();
    for &u in users {
        conns.insert(u, raw(port, u));
    }
    conns.insert("default", admin);
    session.iter().map(|(u, c)| raw_cmd(conns.get_mut(u).unwrap(), c)).collect()
}

/// Replies compared line by line. Redis lists a user's allowed commands in its command
/// table's order, goblin-core in the order given: each line's words are compared as a set.
fn assert_same(ours: &[String], theirs: &[String], session: &[(&str, &[&str])]) {
    let words = |reply: &str| -> Vec<Vec<String>> {
        reply
            .split("\r\n")
            .map(|l| {
                let mut w: Vec<String> = l.split(' ').map(str::to_string).collect();
                w.sort();
                w
            })
            .collect()
    };
    assert_eq!(ours.len(), theirs.len());
    for (i, (o, t)) in ours.iter().zip(theirs).enumerate() {
        assert_eq!(words(o), words(t), "{:?}: {o} / {t}", session[i]);
    }
}

/// Key patterns with read and write access (`~`, `%R~`, `%W~`) decided by each key's access
/// flags, channel patterns (a PSUBSCRIBE pattern matched literally), selectors (allowed when
/// one selector allows it all; otherwise Redis's choice of error), SORT's BY and GET, a
/// transaction whose user lost its permission before EXEC, GETUSER / LIST / DRYRUN and every
/// rule error: each reply compared with redis-server 7.0.15's.
#[test]
fn key_and_channel_patterns_and_selectors_as_redis_enforces_them() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let setup: &[&[&str]] = &[
        &["ACL", "SETUSER", "kp", "on", ">pw", "+@all", "~app:*", "%R~ro:*", "%W~wo:*", "&news.*"],
        &["ACL", "SETUSER", "sel", "on", ">pw", "+get", "~a:*", "(+set ~b:*)", "(%R~c:*", "+@read", "-keys)"],
        &["ACL", "SETUSER", "srt", "on", ">pw", "+@all", "~s:*"],
        &["ACL", "SETUSER", "rd", "on", ">pw", "+@all", "%R~*"],
        &["ACL", "SETUSER", "sub", "on", ">pw", "~*", "+xgroup|create", "+object|encoding", "+xlen"],
        &["RPUSH", "s:list", "3", "1", "2"],
        &["SET", "ro:1", "v"],
    ];
    let session: &[(&str, &[&str])] = &[
        ("kp", &["SET", "app:1", "v"]),
        ("kp", &["GET", "app:1"]),
        ("kp", &["SET", "ro:1", "v"]),
        ("kp", &["GET", "ro:1"]),
        ("kp", &["SET", "wo:1", "v"]),
        ("kp", &["GET", "wo:1"]),
        ("kp", &["APPEND", "wo:1", "x"]),
        ("kp", &["INCR", "wo:2"]),
        ("kp", &["EXISTS", "ro:1"]),
        ("kp", &["DEL", "ro:1"]),
        ("kp", &["COPY", "ro:1", "wo:3"]),
        ("kp", &["LMOVE", "ro:1", "wo:1", "LEFT", "RIGHT"]),
        ("kp", &["MSET", "app:2", "1", "ro:2", "2"]),
        ("kp", &["STRLEN", "ro:1"]),
        ("kp", &["HSET", "wo:h", "f", "v"]),
        ("kp", &["HGET", "wo:h", "f"]),
        ("kp", &["PUBLISH", "news.eu", "m"]),
        ("kp", &["PUBLISH", "sports", "m"]),
        ("kp", &["EVAL", "return redis.acl_check_cmd('set', 'ro:1', 'v')", "0"]),
        ("kp", &["EVAL", "return redis.acl_check_cmd('get', 'ro:1')", "0"]),
        ("sel", &["GET", "a:1"]),
        ("sel", &["SET", "a:1", "v"]),
        ("sel", &["SET", "b:1", "v"]),
        ("sel", &["GET", "b:1"]),
        ("sel", &["GET", "c:1"]),
        ("sel", &["KEYS", "*"]),
        ("sel", &["MGET", "c:1", "c:2"]),
        ("sel", &["DEL", "b:1"]),
        ("srt", &["SORT", "s:list", "BY", "w_*"]),
        ("srt", &["SORT", "s:list", "GET", "#"]),
        ("srt", &["SORT", "s:list", "BY", "nosort"]),
        ("srt", &["SORT", "s:list", "LIMIT", "0", "2"]),
        ("srt", &["SORT", "s:list", "LIMIT", "x", "2", "GET", "#"]),
        ("srt", &["SORT_RO", "s:list", "GET", "#"]),
        ("srt", &["EVAL", "return redis.call('sort', KEYS[1], 'BY', 'w_*')", "1", "s:list"]),
        ("srt", &["EVAL", "return redis.pcall('sort_ro', KEYS[1], 'GET', 'x_*')", "1", "s:list"]),
        ("srt", &["EVAL", "return redis.call('sort', KEYS[1], 'BY', 'nosort')", "1", "s:list"]),
        ("rd", &["SORT", "s:list", "BY", "w_*", "GET", "#"]),
        ("rd", &["SET", "s:list", "x"]),
        ("sub", &["XGROUP", "CREATE", "st", "g", "$", "MKSTREAM"]),
        ("sub", &["XGROUP", "DESTROY", "st", "g"]),
        ("sub", &["OBJECT", "ENCODING", "st"]),
        ("sub", &["OBJECT", "FREQ", "st"]),
        ("sub", &["XLEN", "st"]),
        ("default", &["ACL", "DRYRUN", "kp", "psubscribe", "news.*"]),
        ("default", &["ACL", "DRYRUN", "kp", "psubscribe", "news.e*"]),
        ("default", &["ACL", "DRYRUN", "kp", "subscribe", "news.x", "other"]),
        ("default", &["ACL", "DRYRUN", "kp", "get", "wo:1"]),
        ("default", &["ACL", "DRYRUN", "sel", "set", "a:1", "v"]),
        ("default", &["ACL", "DRYRUN", "sel", "keys", "*"]),
        ("default", &["ACL", "GETUSER", "kp"]),
        ("default", &["ACL", "GETUSER", "sel"]),
        ("default", &["ACL", "LIST"]),
        ("default", &["ACL", "SETUSER", "x", "~*", "~a"]),
        ("default", &["ACL", "SETUSER", "x", "&*", "&a"]),
        ("default", &["ACL", "SETUSER", "x", "%RX~a"]),
        ("default", &["ACL", "SETUSER", "x", "%~a"]),
        ("default", &["ACL", "SETUSER", "x", "(+get", "~a"]),
        ("default", &["ACL", "SETUSER", "x", "(on)"]),
        ("default", &["ACL", "SETUSER", "x", "(+nosuch)"]),
        ("default", &["ACL", "SETUSER", "x", "~a b"]),
        ("default", &["ACL", "SETUSER", "y", "reset", "%R~a", "%W~a", "~b", "%R~b", "&c", "&c"]),
        ("default", &["ACL", "SETUSER", "z", "ON", "AllKeys", "skip-sanitize-payload", "%RW~*"]),
        ("default", &["ACL", "SETUSER", "w", "%RW~*", "%R~x", "(~q clearselectors)"]),
        ("default", &["ACL", "GETUSER", "y"]),
        ("default", &["ACL", "GETUSER", "z"]),
        ("default", &["ACL", "LIST"]),
        ("default", &["ACL", "SETUSER", "sel", "clearselectors"]),
        ("sel", &["SET", "b:1", "v"]),
        // Rules changed between MULTI and EXEC: the command is refused at EXEC.
        ("kp", &["MULTI"]),
        ("kp", &["SET", "app:9", "v"]),
        ("kp", &["GET", "app:9"]),
        ("default", &["ACL", "SETUSER", "kp", "resetkeys", "%R~app:*"]),
        ("kp", &["EXEC"]),
    ];
    let run = |port: u16| run_session(port, setup, &["kp", "sel", "srt", "rd", "sub"], session);
    assert_same(&run(g.port), &run(r.port), session);
}

/// Redis's allowed first arguments (`+select|0`: a command blocked except with one first
/// argument, compared without case; only allowed, never denied; reset by a later rule for the
/// whole command; not for a subcommand's argument) and `acl-pubsub-default` (the channels a new
/// user and a new selector start with): each reply compared with redis-server 7.0.15's.
#[test]
fn first_argument_rules_and_the_pubsub_default_as_redis_has_them() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let setup: &[&[&str]] = &[
        &[
            "ACL",
            "SETUSER",
            "fa",
            "on",
            ">pw",
            "~*",
            "&*",
            "-@all",
            "+get",
            "+select|0",
            "+SELECT|1",
            "+select|0",
        ],
        &[
            "ACL",
            "SETUSER",
            "fb",
            "on",
            ">pw",
            "~*",
            "&*",
            "-@all",
            "+client|getname",
            "+config|get",
            "+select|2",
            "+select",
        ],
        &["ACL", "SETUSER", "fc", "on", ">pw", "~*", "-@all", "+select|0", "-select"],
    ];
    let session: &[(&str, &[&str])] = &[
        ("fa", &["SELECT", "0"]),
        ("fa", &["SELECT", "1"]),
        ("fa", &["SELECT", "2"]),
        ("fa", &["GET", "k"]),
        ("fa", &["SET", "k", "v"]),
        ("fb", &["SELECT", "5"]),
        ("fb", &["CLIENT", "GETNAME"]),
        ("fb", &["CLIENT", "INFO"]),
        ("fc", &["SELECT", "0"]),
        ("default", &["ACL", "DRYRUN", "fa", "select", "1"]),
        ("default", &["ACL", "DRYRUN", "fa", "select", "3"]),
        ("default", &["ACL", "GETUSER", "fa"]),
        ("default", &["ACL", "SETUSER", "x", "+config|get|maxmemory"]),
        ("default", &["ACL", "SETUSER", "x", "+select|"]),
        ("default", &["ACL", "SETUSER", "x", "+config|"]),
        ("default", &["ACL", "SETUSER", "x", "-select|0"]),
        ("default", &["ACL", "SETUSER", "x", "+nosuch|0"]),
        ("default", &["ACL", "SETUSER", "x", "+select|0|1"]),
        ("default", &["ACL", "SETUSER", "x", "+config|nosuch|1"]),
        // New users and selectors: no channels, then every channel, by the default.
        ("default", &["CONFIG", "GET", "acl-pubsub-default"]),
        ("default", &["ACL", "SETUSER", "p1", "on", "(+get)"]),
        ("default", &["CONFIG", "SET", "acl-pubsub-default", "allchannels"]),
        ("default", &["ACL", "SETUSER", "p2", "on", "(+get)"]),
        ("default", &["ACL", "SETUSER", "p3", "reset"]),
        ("default", &["ACL", "GETUSER", "p1"]),
        ("default", &["ACL", "GETUSER", "p2"]),
        ("default", &["ACL", "GETUSER", "p3"]),
        ("default", &["CONFIG", "SET", "acl-pubsub-default", "nope"]),
        ("default", &["CONFIG", "SET", "acl-pubsub-default", "RESETCHANNELS"]),
        ("default", &["CONFIG", "GET", "acl-pubsub-default"]),
        ("default", &["ACL", "SETUSER", "p4", "on"]),
        ("default", &["ACL", "GETUSER", "p4"]),
        // A container's subcommand Redis keeps out of scripts.
        ("default", &["EVAL", "return redis.call('cluster', 'reset')", "0"]),
    ];
    let run = |port: u16| run_session(port, setup, &["fa", "fb", "fc"], session);
    assert_same(&run(g.port), &run(r.port), session);
}

/// ACL LOG: refusals of commands, keys and channels at top level, in a transaction and in a
/// script, and failed AUTH and HELLO, with Redis's grouping of alike entries, COUNT and
/// RESET; each entry's fields compared with redis-server 7.0.15's (but its age and client).
#[test]
fn acl_log_records_what_redis_records() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let setup: &[&[&str]] = &[
        &["ACL", "SETUSER", "u", "on", ">pw", "~k*", "&c*", "+get", "+publish", "+multi", "+exec", "+eval"],
        &["ACL", "LOG", "RESET"],
    ];
    let session: &[(&str, &[&str])] = &[
        ("u", &["GET", "x"]),
        ("u", &["SET", "k", "v"]),
        ("u", &["PUBLISH", "d", "m"]),
        ("u", &["GET", "x"]),
        ("u", &["MULTI"]),
        ("u", &["GET", "y"]),
        ("u", &["EXEC"]),
        ("u", &["EVAL", "return redis.call('get', 'z')", "0"]),
        // An unknown subcommand is not a refusal: it is not logged.
        ("u", &["CLIENT", "NOSUCH"]),
        ("u", &["CLIENT", "ID"]),
        ("default", &["AUTH", "u", "wrong"]),
        ("default", &["auth", "nobody", "wrong"]),
        ("default", &["HELLO", "3", "AUTH", "u", "wrong"]),
    ];
    let mut replies = Vec::new();
    let logs: Vec<(Vec<Vec<String>>, usize, usize)> = [g.port, r.port]
        .into_iter()
        .map(|port| {
            replies.push(run_session(port, setup, &["u"], session));
            let mut c =
                redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
            let fields = |e: &Value| -> Vec<String> {
                let Value::Array(kv) = e else { panic!("{e:?}") };
                let mut out = Vec::new();
                for pair in kv.chunks(2) {
                    let key = match &pair[0] {
                        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                        other => panic!("{other:?}"),
                    };
                    if matches!(
                        key.as_str(),
                        "age-seconds"
                            | "client-info"
                            | "entry-id"
                            | "timestamp-created"
                            | "timestamp-last-updated"
                    ) {
                        continue;
                    }
                    out.push(format!("{key}={:?}", pair[1]));
                }
                out
            };
            let Value::Array(all) = q(&mut c, &["ACL", "LOG"]).unwrap() else { panic!() };
            let Value::Array(two) = q(&mut c, &["ACL", "LOG", "2"]).unwrap() else { panic!() };
            assert_eq!(q(&mut c, &["ACL", "LOG", "RESET"]).unwrap(), Value::Okay);
            let Value::Array(after) = q(&mut c, &["ACL", "LOG"]).unwrap() else { panic!() };
            (all.iter().map(fields).collect(), two.len(), after.len())
        })
        .collect();
    assert_same(&replies[0], &replies[1], session);
    assert_eq!(logs[0], logs[1]);
    assert_eq!(logs[0].0.len(), 9, "{:?}", logs[0].0);
    // The two GETs of x are one entry counted twice.
    assert!(logs[0].0.iter().any(|e| e.contains(&"count=int(2)".to_string())), "{:?}", logs[0].0);
    // The client of the newest entry is the one that failed HELLO.
    let mut c = g.conn();
    let _ = q(&mut c, &["AUTH", "u", "bad"]);
    let Value::Array(entries) = q(&mut c, &["ACL", "LOG", "1"]).unwrap() else { panic!() };
    let text = format!("{:?}", entries[0]);
    assert!(text.contains("cmd=auth") && text.contains("entry-id"), "{text}");
    let info: redis::InfoDict = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    assert_eq!(info.get::<i64>("acl_access_denied_auth"), Some(4));
    assert_eq!(info.get::<i64>("acl_access_denied_key"), Some(4));
}

/// A subscriber whose user loses the permission for one of its channels or patterns is
/// disconnected by ACL SETUSER, as in Redis; one whose channels stay allowed is not.
#[test]
fn subscribers_that_lose_their_channels_are_disconnected() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    for port in [g.port, r.port] {
        let mut admin = raw(port, "default");
        for u in ["a", "b", "c"] {
            let rules = ["ACL", "SETUSER", u, "on", ">pw", "+@all", "~*", "&chan:*", "&pat.*"];
            assert_eq!(raw_cmd(&mut admin, &rules), "+OK\r\n");
        }
        let mut sa = raw(port, "a");
        raw_cmd(&mut sa, &["SUBSCRIBE", "chan:1"]);
        let mut sb = raw(port, "b");
        raw_cmd(&mut sb, &["PSUBSCRIBE", "pat.*"]);
        let mut sc = raw(port, "c");
        raw_cmd(&mut sc, &["SUBSCRIBE", "chan:2"]);
        // a keeps chan:* under a selector; b's pattern is no longer allowed literally; c gains.
        for rules in [
            &["ACL", "SETUSER", "a", "resetchannels", "(&chan:* +get)"][..],
            &["ACL", "SETUSER", "b", "resetchannels", "&pat.x*"],
            &["ACL", "SETUSER", "c", "&more"],
        ] {
            assert_eq!(raw_cmd(&mut admin, rules), "+OK\r\n", "{port} {rules:?}");
        }
        let alive = |s: &mut std::net::TcpStream| {
            let mut req = Vec::new();
            resp::reply::bulk_array(&mut req, &[b"PING".as_slice()]);
            use std::io::{Read, Write};
            if s.write_all(&req).is_err() {
                return false;
            }
            let mut buf = [0u8; 64];
            matches!(s.read(&mut buf), Ok(n) if n > 0)
        };
        assert!(alive(&mut sa), "{port}: a keeps chan:1 through its selector");
        assert!(!alive(&mut sb), "{port}: b lost pat.*");
        assert!(alive(&mut sc), "{port}: c lost nothing");
    }
}

/// A blocked command is checked again when it is served: a BLPOP whose user lost its keys
/// while it waited is answered NOPERM (a rejected call, not a call) and the element stays for
/// others. Also: the ACL LOG entry's client-info names the refused command, DEBUG's first
/// arguments are first-arg rules (DEBUG has no subcommands), ACL CAT/GENPASS/LOG with too
/// many arguments and `acllog-max-len 0` (existing entries stay) answer as redis-server 8.2.
#[test]
fn blocked_commands_and_acl_details_as_redis8() {
    use std::io::Write;
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let mut runs = Vec::new();
    for (port, c) in [(g.port, &mut g.conn()), (r.port, &mut r.conn())] {
        let mut got = Vec::new();
        let show = |v: redis::RedisResult<Value>| match v {
            Ok(v) => format!("{v:?}"),
            Err(e) => format!("{:?} {:?}", e.code(), e.detail()),
        };
        q(c, &["ACL", "SETUSER", "psuser", "reset", "on", "nopass", "+@all", "allkeys"]).unwrap();
        q(c, &["CONFIG", "RESETSTAT"]).unwrap();
        let mut rd = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        rd.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        rd.write_all(b"AUTH psuser x\r\n").unwrap();
        assert_eq!(common::read_reply(&mut rd), b"+OK\r\n");
        rd.write_all(b"BLPOP list1 0\r\n").unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let info: String = redis::cmd("INFO").arg("clients").query(c).unwrap();
            if info.contains("blocked_clients:1") {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "BLPOP never blocked");
        }
        q(c, &["ACL", "SETUSER", "psuser", "resetkeys"]).unwrap();
        got.push(show(q(c, &["LPUSH", "list1", "foo"])));
        got.push(String::from_utf8_lossy(&common::read_reply(&mut rd)).into_owned());
        got.push(show(q(c, &["LLEN", "list1"])));
        let stats: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
        let blpop = stats.lines().find(|l| l.starts_with("cmdstat_blpop:")).unwrap_or("none").to_string();
        got.push(blpop.split(",usec=").next().unwrap().to_string());
        got.push(blpop.split(',').filter(|f| f.contains("_calls=")).collect::<Vec<_>>().join(","));
        // The refused GET's entry names it in client-info.
        rd.write_all(b"GET somekey\r\n").unwrap();
        got.push(String::from_utf8_lossy(&common::read_reply(&mut rd)).into_owned());
        let Value::Array(log) = q(c, &["ACL", "LOG", "1"]).unwrap() else { panic!() };
        let entry = format!("{:?}", log[0]);
        got.push(format!("log names cmd=get: {}", entry.contains("cmd=get ")));
        got.push(show(q(c, &["ACL", "SETUSER", "dbg", "+debug|object", "+debug|segfault"])));
        got.push(show(q(c, &["ACL", "SETUSER", "dbg2", "-debug|digest"])));
        got.push(show(q(c, &["ACL", "CAT", "a", "b"])));
        got.push(show(q(c, &["ACL", "GENPASS", "1", "2"])));
        got.push(show(q(c, &["ACL", "LOG", "1", "2"])));
        q(c, &["CONFIG", "SET", "acllog-max-len", "0"]).unwrap();
        let Value::Array(log) = q(c, &["ACL", "LOG"]).unwrap() else { panic!() };
        got.push(format!("entries kept: {}", log.len()));
        q(c, &["CONFIG", "SET", "acllog-max-len", "128"]).unwrap();
        // A served BLPOP is one call, counted when it is served, not when it blocked.
        let mut rd = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        rd.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        rd.write_all(b"BLPOP list2 0\r\n").unwrap();
        loop {
            let info: String = redis::cmd("INFO").arg("clients").query(c).unwrap();
            if info.contains("blocked_clients:1") {
                break;
            }
        }
        let stats: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
        let row = |stats: &str| {
            let l = stats.lines().find(|l| l.starts_with("cmdstat_blpop:")).unwrap_or("none").to_string();
            l.split(",usec=").next().unwrap().to_string()
        };
        got.push(format!("while blocked: {}", row(&stats)));
        q(c, &["RPUSH", "list2", "x"]).unwrap();
        got.push(String::from_utf8_lossy(&common::read_reply(&mut rd)).into_owned());
        let stats: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
        got.push(format!("served: {}", row(&stats)));
        runs.push(got);
    }
    for (g, r) in runs[0].iter().zip(&runs[1]) {
        assert_eq!(g, r, "goblin-core against redis-server 8.2");
    }
    assert!(runs[0][1].contains("NOPERM"), "{:?}", runs[0]);
}
