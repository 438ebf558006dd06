//! Arguments at their edges. Which error a client sees for a bad command depends on the order
//! in which the server judges its key and its arguments; these cases are compared with
//! redis-server 8.2 byte for byte. And commands assembled from the server's own COMMAND DOCS
//! with hostile values (integer extremes, non-numbers, huge counts, keys of every type) never
//! take the server down: each got an answer, and the server still answers afterwards.

mod common;

use common::{RedisServer, RespConn, Server};
use rand::{Rng, SeedableRng};
use resp::Frame;

fn setup(c: &mut RespConn) {
    let steps: &[&[&str]] = &[
        &["FLUSHALL"],
        &["SET", "s", "hello"],
        &["RPUSH", "l", "a", "b", "c", "d"],
        &["SADD", "set", "a", "b"],
        &["ZADD", "z", "1", "a", "2", "b"],
        &["HSET", "h", "f1", "1", "f2", "v"],
        &["XADD", "st", "1-1", "f", "v"],
        &["GEOADD", "g", "13.36", "38.11", "m1", "15.08", "37.50", "m2"],
    ];
    for step in steps {
        let reply = c.call(step);
        assert!(!matches!(reply, Frame::Error(_)), "{step:?}: {reply:?}");
    }
}

/// Each case runs on a freshly set-up database (above) on both servers.
const CASES: &[&[&str]] = &[
    // FCALL looks the function up before numkeys; EVALSHA refuses a digest of the wrong
    // length first.
    &["FCALL", "nosuch", "5", "a"],
    &["FCALL", "nosuch", "x"],
    &["FCALL_RO", "nosuch", "-1"],
    &["EVALSHA", "abc", "5", "a"],
    &["EVALSHA", "0123456789012345678901234567890123456789", "5", "a"],
    // VRANDMEMBER: the key's type before a count too large to answer.
    &["VRANDMEMBER", "s", "-9223372036854775807"],
    &["VRANDMEMBER", "nokey", "-9223372036854775807"],
    // XDEL: the key first (missing: 0, whatever the IDs; another type: WRONGTYPE).
    &["XDEL", "nokey", "abc"],
    &["XDEL", "s", "abc"],
    &["XDEL", "st", "abc"],
    // Stream IDs' parts are read as string2ull reads them: a sign, leading white space,
    // leading zeros.
    &["XADD", "st", "+5-+1", "f", "v"],
    &["XADD", "st", " 5- 1", "f", "v"],
    &["XADD", "st", "+5-*", "f", "v"],
    &["XADD", "st", "5--1", "f", "v"],
    &["XADD", "st", "-5-1", "f", "v"],
    &["XRANGE", "st", "+1", "+"],
    &["XRANGE", "st", "(+1", "+"],
    &["XRANGE", "st", "-1", "+"],
    &["XRANGE", "st", "0000000000000000000000001", "+"],
    &["XSETID", "st", "+3"],
    &["XDEL", "st", "+1-1"],
    &["XSETID", "nokey", "+1", "ENTRIESADDED", "-9223372036854775807"],
    // MEMORY USAGE: SAMPLES may repeat; a negative one is a syntax error.
    &["MEMORY", "USAGE", "nokey", "SAMPLES", "-100"],
    &["MEMORY", "USAGE", "nokey", "SAMPLES", "5", "SAMPLES", "0"],
    &["MEMORY", "USAGE", "nokey", "SAMPLES"],
    // SCAN cursors as Redis 8 reads them, before the key's type.
    &["SCAN", "-1"],
    &["SCAN", ""],
    &["SSCAN", "nokey", "-5"],
    &["ZSCAN", "h", "-1"],
    &["HSCAN", "h", " 1"],
    &["HSCAN", "h", " -1"],
    &["SSCAN", "set", "-9223372036854775809"],
    // BLMPOP reads its timeout after the keys and options, as BZMPOP.
    &["BLMPOP", "-1", "9999", "l", "LEFT"],
    &["BLMPOP", "-1", "1", "l", "LEFT", "COUNT", "0"],
    &["BZMPOP", "-1", "9999", "z", "MIN"],
    // The GEORADIUS family: a member's radius is not read for a missing key; STORE's
    // conflicts are judged after every option, in GEORADIUS's words.
    &["GEORADIUSBYMEMBER_RO", "nokey", "m1", "abc", "m"],
    &["GEORADIUSBYMEMBER", "nokey", "m1", "abc", "m", "STORE", "x"],
    &["GEORADIUSBYMEMBER", "nokey", "m1", "abc", "m", "COUNT", "0"],
    &["GEORADIUSBYMEMBER", "nokey", "m1", "abc", "m", "foo"],
    &["GEORADIUSBYMEMBER", "g", "m1", "1", "m", "WITHCOORD", "STORE", "x"],
    &["GEORADIUS", "g", "abc", "2", "3", "m", "WITHCOORD", "STORE", "x"],
    &["GEORADIUS", "g", "1", "2", "3", "m", "STORE", "x", "WITHDIST", "COUNT", "-1"],
    &["GEORADIUS", "nokey", "1", "2", "abc", "m"],
    // CLIENT TRACKING: options (a REDIRECT's client must exist) before ON or OFF.
    // CLIENT SETINFO's error names the attribute as the client spelled it.
    &["CLIENT", "SETINFO", "LIB-VER", " 1"],
    &["CLIENT", "SETINFO", "Lib-Name", "a b"],
    // EXPIRETIME rounds to the nearest second.
    &["SET", "et", "v", "PXAT", "1800000000999"],
    &["EXPIRETIME", "et"],
    &["SET", "et", "v", "PXAT", "1800000000499"],
    &["EXPIRETIME", "et"],
    &["CLIENT", "TRACKING", "off", "REDIRECT", "99999"],
    &["CLIENT", "TRACKING", "on", "REDIRECT", "-100"],
    &["CLIENT", "TRACKING", "on", "REDIRECT", "0"],
    &["CLIENT", "TRACKING", "maybe", "REDIRECT", "99999"],
    &["CLIENT", "TRACKING", "on", "REDIRECT", "x"],
    // CLIENT UNBLOCK judges the reason before the ID.
    &["CLIENT", "UNBLOCK", "01", "2"],
    &["CLIENT", "UNBLOCK", "x", "TIMEOUT"],
    // MODULE's protected subcommands.
    &["MODULE", "UNLOAD", "foo"],
    &["MODULE", "LOAD", "/nonexistent.so"],
    &["MODULE", "LOAD"],
    // OBJECT's subcommands have their arity.
    &["OBJECT", "ENCODING"],
    &["OBJECT", "IDLETIME", "a", "b"],
    &["OBJECT", "HELP", "x"],
    // Integers read strictly.
    &["LOLWUT", "VERSION", "01"],
    &["LOLWUT", "VERSION", "5", "abc"],
    &["ACL", "GENPASS", "-9223372036854775809"],
    &["ACL", "GENPASS", "0"],
    &["ACL", "LOG", "-5"],
    &["ACL", "LOG", "x"],
    &["CLIENT", "LIST", "ID", "999999", "0"],
    &["CLIENT", "LIST", "ID", "-5"],
    &["CLIENT", "LIST", "ID", "abc"],
    &["COPY", "s", "x", "DB", "4294967296"],
    &["MOVE", "s", "4294967296"],
    &["SELECT", "4294967296"],
    // Error texts quote at most 128 bytes of a name.
    &["ACL", "CAT", "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghij"],
    // Repeated picks of a missing key: nothing to build.
    &["SRANDMEMBER", "nokey", "-4611686018427387904"],
    &["HRANDFIELD", "nokey", "-4611686018427387904"],
    &["ZRANDMEMBER", "nokey", "-4611686018427387904"],
];

#[test]
fn argument_order_and_edge_values_answer_as_redis8() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let mut differ = Vec::new();
    for proto in [2u8, 3] {
        let (mut gc, mut rc) = (RespConn::open(g.port, proto), RespConn::open(r.port, proto));
        for case in CASES {
            setup(&mut gc);
            setup(&mut rc);
            let (mine, theirs) = (gc.call(case), rc.call(case));
            if mine != theirs {
                differ.push(format!(
                    "RESP{proto} {case:?}\n  goblin-core: {mine:?}\n  redis 8.2:   {theirs:?}"
                ));
            }
        }
    }
    assert!(differ.is_empty(), "{} differences:\n{}", differ.len(), differ.join("\n"));
}

/// A negative count asks SRANDMEMBER, ZRANDMEMBER and HRANDFIELD for that many picks with
/// repeats. Redis builds any such reply; -2^31 picks is over 15 GB of reply, and the server
/// dies of memory before the client reads a byte. goblin-core refuses past 2^24 picks.
#[test]
fn huge_repeated_pick_counts_are_refused_not_built() {
    let s = Server::start(&[]);
    let mut c = RespConn::open(s.port, 2);
    setup(&mut c);
    for (cmd, key) in [("SRANDMEMBER", "set"), ("ZRANDMEMBER", "z"), ("HRANDFIELD", "h")] {
        for count in ["-2147483648", "-16777217", "-4611686018427387904"] {
            assert_eq!(
                c.call(&[cmd, key, count]),
                Frame::Error(b"ERR value is out of range".to_vec()),
                "{cmd} {key} {count}"
            );
        }
        match c.call(&[cmd, key, "-1000"]) {
            Frame::Array(Some(picks)) => assert_eq!(picks.len(), 1000, "{cmd}"),
            other => panic!("{cmd} {key} -1000: {other:?}"),
        }
        // The wrong type is still the first thing said.
        assert!(matches!(c.call(&[cmd, "s", "-2147483648"]), Frame::Error(e) if e.starts_with(b"WRONGTYPE")));
    }
    assert_eq!(c.call(&["PING"]), Frame::Simple(b"PONG".to_vec()));
}

// ---------------------------------------------------------------------------------------------
// Commands from their docs, with hostile values

/// One argument of a command's COMMAND DOCS entry (the fields the generator needs).
#[derive(Debug, Default, Clone)]
struct Arg {
    kind: String,
    token: Option<String>,
    optional: bool,
    multiple: bool,
    multiple_token: bool,
    args: Vec<Arg>,
}

/// A command's name(s) (`["client", "list"]` for a subcommand), its group and its arguments.
#[derive(Debug, Clone)]
struct Doc {
    name: Vec<String>,
    group: String,
    args: Vec<Arg>,
}

fn text(f: &Frame) -> String {
    match f {
        Frame::Bulk(Some(b)) | Frame::Simple(b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    }
}

/// A RESP2 map (a flat array of keys and values) as pairs.
fn pairs(f: &Frame) -> Vec<(String, Frame)> {
    match f {
        Frame::Array(Some(items)) => items.chunks(2).map(|kv| (text(&kv[0]), kv[1].clone())).collect(),
        other => panic!("not a RESP2 map: {other:?}"),
    }
}

fn parse_arg(f: &Frame) -> Arg {
    let mut a = Arg::default();
    for (k, v) in pairs(f) {
        match k.as_str() {
            "type" => a.kind = text(&v),
            "token" => a.token = Some(text(&v)),
            "flags" => {
                let Frame::Array(Some(flags)) = v else { panic!("flags: {v:?}") };
                for fl in flags.iter().map(text) {
                    a.optional |= fl == "optional";
                    a.multiple |= fl == "multiple";
                    a.multiple_token |= fl == "multiple_token";
                }
            }
            "arguments" => {
                let Frame::Array(Some(subs)) = v else { panic!("arguments: {v:?}") };
                a.args = subs.iter().map(parse_arg).collect();
            }
            _ => {}
        }
    }
    a
}

fn parse_docs(reply: &Frame) -> Vec<Doc> {
    let mut docs = Vec::new();
    for (name, doc) in pairs(reply) {
        let fields = pairs(&doc);
        let group = fields.iter().find(|(k, _)| k == "group").map(|(_, v)| text(v)).unwrap_or_default();
        let args = |fields: &[(String, Frame)]| match fields.iter().find(|(k, _)| k == "arguments") {
            Some((_, Frame::Array(Some(a)))) => a.iter().map(parse_arg).collect(),
            _ => Vec::new(),
        };
        match fields.iter().find(|(k, _)| k == "subcommands") {
            Some((_, subs)) => {
                for (full, sub) in pairs(subs) {
                    let sub_fields = pairs(&sub);
                    let name: Vec<String> = full.split('|').map(str::to_string).collect();
                    docs.push(Doc { name, group: group.clone(), args: args(&sub_fields) });
                }
            }
            None => docs.push(Doc { name: vec![name], group, args: args(&fields) }),
        }
    }
    docs
}

/// Commands the generator leaves out: they end the connection or the server, change what
/// every later command sees (another database, a pause, a replica's role, the configuration,
/// an ACL user), hand the connection over (pub/sub, MONITOR, a replication stream, tracking's
/// out-of-band invalidations), or wait.
fn left_out(name: &[String]) -> bool {
    let full = name.join("|");
    const OUT: &[&str] = &[
        "shutdown",
        "monitor",
        "sync",
        "psync",
        "replicaof",
        "slaveof",
        "failover",
        "subscribe",
        "psubscribe",
        "ssubscribe",
        "unsubscribe",
        "punsubscribe",
        "sunsubscribe",
        "quit",
        "reset",
        "debug",
        "client|pause",
        "client|kill",
        "client|reply",
        "client|no-evict",
        "config|set",
        "save",
        "bgsave",
        // The next EVAL would become a debugging session, which ends the connection.
        "script|debug",
        "bgrewriteaof",
        "flushall",
        "flushdb",
        "swapdb",
        "select",
        "migrate",
        "hello",
        "auth",
        "acl|setuser",
        "acl|deluser",
        "acl|load",
        "acl|save",
        "wait",
        "waitaof",
        "multi",
        "exec",
        "watch",
        "readonly",
        "readwrite",
        "script|kill",
        "function|kill",
        "cluster|failover",
        "cluster|reset",
        "cluster|meet",
        "goblin.firehose",
        "goblin.dumpworld",
        "blpop",
        "brpop",
        "blmove",
        "brpoplpush",
        "blmpop",
        "bzpopmin",
        "bzpopmax",
        "bzmpop",
        "blmovem",
        "hotkeys|start",
        "goblin.load",
        "replconf",
        "config|rewrite",
        "client|tracking",
    ];
    OUT.contains(&full.as_str()) || OUT.contains(&name[0].as_str())
}

const INTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "7",
    "100",
    "-100",
    "65535",
    "2147483647",
    "-2147483648",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775806",
    "-9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "4611686018427387904",
    "-4611686018427387904",
    "1e3",
    "",
    "abc",
    " 1",
    "+1",
    "01",
    "0x10",
];
const DOUBLES: &[&str] = &[
    "0",
    "1.5",
    "-1.5",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "1e308",
    "-1e308",
    "1e-320",
    "1e309",
    "5e-324",
    "(1",
    "(-inf",
    "abc",
    "",
    "9223372036854775807",
];
const STRINGS: &[&str] = &[
    "",
    "a",
    "*",
    "[a",
    "(a",
    "-",
    "+",
    "$",
    ">",
    "<",
    "0-0",
    "0-1",
    "1-1",
    "*-*",
    "18446744073709551615-18446744073709551615",
    "9223372036854775807-0",
    "grp",
    "c1",
    "f1",
    "m1",
    "\\",
    "[",
    "]",
    "a*b?[c-d]",
    "[^",
    "[a-",
];
const KEYS: &[&str] = &["s", "l", "set", "z", "h", "st", "g", "nokey", "x"];

fn typed_keys(group: &str) -> &'static [&'static str] {
    match group {
        "string" | "bitmap" | "hyperloglog" => &["s", "nokey", "x"],
        "list" => &["l", "nokey"],
        "set" => &["set", "nokey"],
        "sorted-set" | "geo" => &["z", "g", "nokey"],
        "hash" => &["h", "nokey"],
        "stream" => &["st", "nokey"],
        _ => KEYS,
    }
}

fn generate(rng: &mut impl Rng, a: &Arg, group: &str, out: &mut Vec<String>) {
    if a.optional && rng.gen_bool(0.5) {
        return;
    }
    let reps = if a.multiple { rng.gen_range(1..=3) } else { 1 };
    for i in 0..reps {
        if a.kind != "pure-token" && (i == 0 || a.multiple_token) {
            if let Some(t) = &a.token {
                out.push(t.clone());
            }
        }
        let pick =
            |rng: &mut dyn rand::RngCore, from: &[&str]| from[rng.gen_range(0..from.len())].to_string();
        match a.kind.as_str() {
            "key" if rng.gen_bool(0.75) => out.push(pick(rng, typed_keys(group))),
            "key" => out.push(pick(rng, KEYS)),
            "integer" | "unix-time" => out.push(pick(rng, INTS)),
            "double" => out.push(pick(rng, DOUBLES)),
            "pure-token" => out.push(a.token.clone().unwrap_or_default()),
            "oneof" if !a.args.is_empty() => {
                let sub = &a.args[rng.gen_range(0..a.args.len())];
                generate(rng, sub, group, out)
            }
            "block" => a.args.iter().for_each(|sub| generate(rng, sub, group, out)),
            _ if rng.gen_bool(0.8) => out.push(pick(rng, STRINGS)),
            _ => out.push(pick(rng, INTS)),
        }
    }
}

#[test]
fn commands_built_from_their_docs_with_hostile_values_never_crash_the_server() {
    let s = Server::start(&["--loglevel", "warn"]);
    let mut c = RespConn::open(s.port, 2);
    let docs: Vec<Doc> =
        parse_docs(&c.call(&["COMMAND", "DOCS"])).into_iter().filter(|d| !left_out(&d.name)).collect();
    assert!(docs.len() > 200, "only {} commands documented", docs.len());
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x60b1);
    setup(&mut c);
    let mut errors = 0;
    for i in 0..6000 {
        // The second half speaks RESP3: maps, sets, doubles and nulls are other reply paths.
        if i == 3000 {
            c = RespConn::open(s.port, 3);
        }
        let doc = &docs[rng.gen_range(0..docs.len())];
        let mut argv: Vec<String> = doc.name.iter().map(|n| n.to_uppercase()).collect();
        for a in &doc.args {
            generate(&mut rng, a, &doc.group, &mut argv);
        }
        // Now and then one argument swapped for an extreme number, or one dropped.
        if argv.len() > doc.name.len() && rng.gen_bool(0.15) {
            let at = rng.gen_range(doc.name.len()..argv.len());
            argv[at] = INTS[rng.gen_range(0..INTS.len())].to_string();
        }
        if argv.len() > doc.name.len() && rng.gen_bool(0.05) {
            argv.remove(rng.gen_range(doc.name.len()..argv.len()));
        }
        // XREAD and XREADGROUP may block: for a millisecond at most.
        if let Some(at) = argv.iter().position(|a| a == "BLOCK") {
            if at + 1 < argv.len() {
                argv[at + 1] = "1".to_string();
            }
        }
        // Any reply will do (RespConn panics when the connection closes); errors are expected.
        if matches!(c.call(&argv), Frame::Error(_)) {
            errors += 1;
        }
        if i % 500 == 499 {
            setup(&mut c);
        }
    }
    assert!(errors > 100, "the generator should provoke errors: {errors}");
    assert_eq!(c.call(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    assert!(!s.log().contains("panicked"), "{}", s.log());
}
