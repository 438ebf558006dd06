//! COMMAND DOCS: the argument trees redis-cli builds its hints from, checked by structure
//! against what redis-server 7 reports.

mod common;

use common::{RedisServer, Server};
use redis::Value;

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => n.to_string(),
        other => panic!("expected a string, got {other:?}"),
    }
}

fn items(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) => a,
        other => panic!("expected an array, got {other:?}"),
    }
}

/// A RESP2 flat map (`[k1, v1, k2, v2, ...]`) as ordered pairs.
fn pairs(v: &Value) -> Vec<(String, &Value)> {
    let a = items(v);
    assert!(a.len().is_multiple_of(2), "odd-length map {a:?}");
    a.chunks(2).map(|kv| (text(&kv[0]), &kv[1])).collect()
}

fn field<'a>(m: &'a [(String, &'a Value)], k: &str) -> Option<&'a Value> {
    m.iter().find(|(key, _)| key == k).map(|(_, v)| *v)
}

/// One argument, reduced to what the hints depend on.
#[derive(Debug, PartialEq)]
struct Arg {
    name: String,
    kind: String,
    token: Option<String>,
    /// Redis 7.2+'s `display_text` (the third field when present).
    display: Option<String>,
    flags: Vec<String>,
    args: Vec<Arg>,
}

fn args(v: &Value) -> Vec<Arg> {
    items(v)
        .iter()
        .map(|a| {
            let m = pairs(a);
            // Every argument map starts with name and type, as Redis 7 writes them.
            assert_eq!(m[0].0, "name");
            assert_eq!(m[1].0, "type");
            let kind = text(m[1].1);
            // Keys name their key spec; so do SORT's BY and GET patterns (type pattern).
            let spec = field(&m, "key_spec_index").is_some();
            assert!(spec == (kind == "key") || (spec && kind == "pattern"), "{m:?}");
            Arg {
                name: text(m[0].1),
                kind,
                token: field(&m, "token").map(text),
                display: field(&m, "display_text").map(|d| {
                    assert_eq!(m[2].0, "display_text", "{m:?}");
                    text(d)
                }),
                flags: field(&m, "flags").map(|f| items(f).iter().map(text).collect()).unwrap_or_default(),
                args: field(&m, "arguments").map(args).unwrap_or_default(),
            }
        })
        .collect()
}

/// COMMAND DOCS for `names` as (name, doc map) pairs.
fn docs(con: &mut redis::Connection, names: &[&str]) -> Vec<(String, Value)> {
    let v: Value = redis::cmd("COMMAND").arg("DOCS").arg(names).query(con).expect("COMMAND DOCS");
    items(&v).chunks(2).map(|kv| (text(&kv[0]), kv[1].clone())).collect()
}

fn arg_tree(con: &mut redis::Connection, name: &str) -> Vec<Arg> {
    let d = docs(con, &[name]);
    assert_eq!(d.len(), 1, "{name}");
    let m = pairs(&d[0].1);
    args(field(&m, "arguments").unwrap_or_else(|| panic!("{name} has no arguments: {m:?}")))
}

fn find<'a>(a: &'a [Arg], name: &str) -> &'a Arg {
    a.iter().find(|x| x.name == name).unwrap_or_else(|| panic!("no {name} in {a:#?}"))
}

#[test]
fn hset_has_a_repeated_field_value_block() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let d = docs(&mut con, &["hset"]);
    let m = pairs(&d[0].1);
    let keys: Vec<&str> = m.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["summary", "since", "group", "arguments"]);
    assert_eq!(text(field(&m, "group").unwrap()), "hash");
    let a = arg_tree(&mut con, "hset");
    assert_eq!(a.len(), 2);
    assert_eq!((a[0].name.as_str(), a[0].kind.as_str()), ("key", "key"));
    let fv = &a[1];
    assert_eq!((fv.kind.as_str(), fv.flags.clone()), ("block", vec!["multiple".to_string()]));
    let inner: Vec<(&str, &str)> = fv.args.iter().map(|x| (x.name.as_str(), x.kind.as_str())).collect();
    assert_eq!(inner, [("field", "string"), ("value", "string")]);
}

#[test]
fn set_has_optional_oneofs_of_tokens() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let a = arg_tree(&mut con, "set");
    let kinds: Vec<&str> = a.iter().map(|x| x.kind.as_str()).collect();
    assert_eq!(kinds, ["key", "string", "oneof", "pure-token", "oneof"]);
    let cond = &a[2];
    assert_eq!(cond.flags, ["optional"]);
    let nx = find(&cond.args, "nx");
    assert_eq!((nx.kind.as_str(), nx.token.as_deref()), ("pure-token", Some("NX")));
    let ifeq = cond.args.iter().find(|x| x.token.as_deref() == Some("IFEQ")).expect("IFEQ alternative");
    assert_eq!(ifeq.kind, "string");
    assert_eq!((a[3].token.as_deref(), a[3].flags.clone()), (Some("GET"), vec!["optional".to_string()]));
    let exp = &a[4];
    assert_eq!(exp.flags, ["optional"]);
    let tokens: Vec<(&str, &str)> =
        exp.args.iter().map(|x| (x.token.as_deref().unwrap_or(""), x.kind.as_str())).collect();
    assert_eq!(
        tokens,
        [
            ("EX", "integer"),
            ("PX", "integer"),
            ("EXAT", "unix-time"),
            ("PXAT", "unix-time"),
            ("KEEPTTL", "pure-token")
        ]
    );
    // Alternatives are required within their optional group.
    assert!(exp.args.iter().all(|x| x.flags.is_empty()));
}

#[test]
fn zadd_and_blpop_trees() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let z = arg_tree(&mut con, "zadd");
    let shape: Vec<(&str, Option<&str>, Vec<String>)> =
        z.iter().map(|x| (x.kind.as_str(), x.token.as_deref(), x.flags.clone())).collect();
    let opt = || vec!["optional".to_string()];
    assert_eq!(
        shape,
        [
            ("key", None, vec![]),
            ("oneof", None, opt()),
            ("oneof", None, opt()),
            ("pure-token", Some("CH"), opt()),
            ("pure-token", Some("INCR"), opt()),
            ("block", None, vec!["multiple".to_string()]),
        ]
    );
    let sm: Vec<(&str, &str)> = z[5].args.iter().map(|x| (x.name.as_str(), x.kind.as_str())).collect();
    assert_eq!(sm, [("score", "double"), ("member", "string")]);
    let gt_lt: Vec<Option<&str>> = z[2].args.iter().map(|x| x.token.as_deref()).collect();
    assert_eq!(gt_lt, [Some("GT"), Some("LT")]);

    let b = arg_tree(&mut con, "blpop");
    assert_eq!(b.len(), 2);
    assert_eq!((b[0].kind.as_str(), b[0].flags.clone()), ("key", vec!["multiple".to_string()]));
    assert_eq!((b[1].name.as_str(), b[1].kind.as_str()), ("timeout", "double"));
}

#[test]
fn unknown_names_are_skipped_and_containers_list_subcommands() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let d = docs(&mut con, &["nosuchcommand", "GET", "object|encoding"]);
    let names: Vec<&str> = d.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["get", "object|encoding"]);
    let t = docs(&mut con, &["time"]);
    assert!(field(&pairs(&t[0].1), "arguments").is_none(), "TIME takes no arguments");
    let o = docs(&mut con, &["object"]);
    let m = pairs(&o[0].1);
    assert!(field(&m, "arguments").is_none());
    let subs = pairs(field(&m, "subcommands").expect("OBJECT lists its subcommands"));
    assert!(subs.iter().any(|(n, _)| n == "object|encoding"), "{subs:?}");
    for (n, sub) in &subs {
        let sm = pairs(sub);
        assert!(field(&sm, "summary").is_some() && field(&sm, "since").is_some(), "{n}");
    }
}

/// Every command both servers have reports the same argument structure (types, tokens, flags,
/// nesting), except where goblin-core deliberately differs.
#[test]
fn argument_structure_matches_redis_server() {
    // set: the Redis 8.4 IFEQ/IFNE/IFDEQ/IFDNE conditions; zrank/zrevrank: the 7.2 WITHSCORE;
    // zincrby: the increment is a float (Redis 7.0 labels it integer); client: CLIENT KILL's
    // filters are modelled as one block; psubscribe: Redis 7.0 wraps each pattern in a
    // one-member block (7.2 lists a plain repeated pattern, as goblin-core does); cluster:
    // without a cluster mode CLUSTER is one command that refuses every call, not a container
    // of subcommands; xadd, xtrim: Redis 8.2's KEEPREF/DELREF/ACKED (and XADD's 8.6 IDMP);
    // xreadgroup: 8.4's CLAIM; xread, xreadgroup: 8.10's MAXCOUNT and MAXSIZE.
    const DIFFERS: &[&str] = &[
        "set",
        "zrank",
        "zrevrank",
        "zincrby",
        "client",
        "psubscribe",
        "cluster",
        "xadd",
        "xtrim",
        "xreadgroup",
        "xread",
    ];
    let s = Server::start(&[]);
    let r = RedisServer::start();
    let mut ours = s.conn();
    let mut theirs = r.conn();
    let names: Vec<String> = redis::cmd("COMMAND").arg("LIST").query(&mut ours).expect("COMMAND LIST");
    let mut compared = 0;
    // COMMAND LIST names subcommands too (`client|list`); this compares the commands (Redis
    // 7.0 wraps many subcommand arguments in one-member blocks that 7.2 drops).
    for name in names.iter().filter(|n| !n.contains('|') && !DIFFERS.contains(&n.as_str())) {
        let t = docs(&mut theirs, &[name]);
        if t.is_empty() {
            continue; // not a Redis 7.0 command
        }
        let o = docs(&mut ours, &[name]);
        let (om, tm) = (pairs(&o[0].1), pairs(&t[0].1));
        for f in ["summary", "since", "group", "arguments", "subcommands"] {
            assert_eq!(field(&om, f).is_some(), field(&tm, f).is_some(), "{name}: field {f}");
        }
        let strip = |a: Vec<Arg>| -> Vec<Arg> {
            fn go(a: Vec<Arg>) -> Vec<Arg> {
                a.into_iter()
                    .map(|x| Arg { name: String::new(), display: None, args: go(x.args), ..x })
                    .collect()
            }
            go(a)
        };
        let oa = field(&om, "arguments").map(args).map(strip).unwrap_or_default();
        let ta = field(&tm, "arguments").map(args).map(strip).unwrap_or_default();
        assert_eq!(oa, ta, "{name}");
        compared += 1;
    }
    assert!(compared > 100, "only {compared} commands compared");
}

/// Redis 7.2+ gives every argument but a oneof or block a `display_text` (redis-cli's hints
/// show it): for every command whose argument tree is the same as redis-server 8.2's, the
/// display texts are the same too.
#[test]
fn display_texts_match_redis8() {
    let s = Server::start(&[]);
    let r = RedisServer::start8();
    let mut ours = s.conn();
    let mut theirs = r.conn();
    let names: Vec<String> = redis::cmd("COMMAND").arg("LIST").query(&mut ours).expect("COMMAND LIST");
    fn shape(
        a: &[Arg],
    ) -> Vec<(String, Option<String>, Vec<String>, Vec<(String, Option<String>, Vec<String>)>)> {
        a.iter()
            .map(|x| {
                let inner =
                    x.args.iter().map(|y| (y.kind.clone(), y.token.clone(), y.flags.clone())).collect();
                (x.kind.clone(), x.token.clone(), x.flags.clone(), inner)
            })
            .collect()
    }
    fn displays(a: &[Arg], out: &mut Vec<(String, Option<String>)>) {
        for x in a {
            out.push((x.name.clone(), x.display.clone()));
            displays(&x.args, out);
        }
    }
    let (mut compared, mut shown) = (0, 0);
    for name in names.iter().filter(|n| !n.contains('|')) {
        let t = docs(&mut theirs, &[name]);
        if t.is_empty() {
            continue;
        }
        let o = docs(&mut ours, &[name]);
        let (om, tm) = (pairs(&o[0].1), pairs(&t[0].1));
        let oa = field(&om, "arguments").map(args).unwrap_or_default();
        let ta = field(&tm, "arguments").map(args).unwrap_or_default();
        if shape(&oa) != shape(&ta) {
            continue;
        }
        let (mut od, mut td) = (Vec::new(), Vec::new());
        displays(&oa, &mut od);
        displays(&ta, &mut td);
        // Block names changed between Redis versions; the texts shown must not.
        let texts = |d: &[(String, Option<String>)]| d.iter().map(|(_, t)| t.clone()).collect::<Vec<_>>();
        assert_eq!(texts(&od), texts(&td), "{name}: {od:?}");
        shown += od.iter().filter(|(_, d)| d.is_some()).count();
        compared += 1;
    }
    assert!(compared > 150, "only {compared} commands compared");
    assert!(shown > 500, "only {shown} display texts compared");
}

/// COMMAND's arity, flags and legacy key range are redis-server 8.2's for every command and
/// subcommand both servers have (Redis 8 dropped `noscript` from the blocking commands and
/// made WAIT and WAITAOF `blocking`; containers have no flags and no key range of their own).
#[test]
fn arity_flags_and_key_ranges_match_redis8() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    type Row = (i64, Vec<String>, i64, i64, i64);
    let table = |con: &mut redis::Connection| -> std::collections::HashMap<String, Row> {
        let all: Vec<Value> = redis::cmd("COMMAND").query(con).unwrap();
        let mut rows = std::collections::HashMap::new();
        let int = |v: &Value| match v {
            Value::Int(n) => *n,
            other => panic!("{other:?}"),
        };
        let mut add = |e: &[Value]| {
            let flags = items(&e[2]).iter().map(text).collect();
            rows.insert(text(&e[0]), (int(&e[1]), flags, int(&e[3]), int(&e[4]), int(&e[5])));
        };
        for c in &all {
            let c = items(c);
            add(c);
            for sub in items(&c[9]) {
                add(items(sub));
            }
        }
        rows
    };
    let (ours, theirs) = (table(&mut g.conn()), table(&mut r.conn()));
    let mut shared = 0;
    for (name, want) in &theirs {
        let Some(got) = ours.get(name) else { continue };
        assert_eq!(got, want, "{name}: (arity, flags, first, last, step)");
        shared += 1;
    }
    assert!(shared > 300, "only {shared} commands and subcommands in common");
    assert_eq!(ours["blpop"].1, ["write", "blocking"]);
}

/// COMMAND's ACL categories and command tips (`request_policy:all_shards`,
/// `nondeterministic_output` ...: what cluster clients route by) are redis-server 8.2's for
/// every command both servers have.
#[test]
fn categories_and_tips_match_redis_server() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let table =
        |con: &mut redis::Connection| -> std::collections::HashMap<String, (Vec<String>, Vec<String>)> {
            let all: Vec<Value> = redis::cmd("COMMAND").query(con).unwrap();
            all.iter()
                .map(|c| {
                    let c = items(c);
                    let list = |v: &Value| items(v).iter().map(text).collect::<Vec<_>>();
                    (text(&c[0]), (list(&c[6]), list(&c[7])))
                })
                .collect()
        };
    let (ours, theirs) = (table(&mut g.conn()), table(&mut r.conn()));
    let mut shared = 0;
    for (name, want) in &theirs {
        let Some(got) = ours.get(name) else { continue };
        assert_eq!(got, want, "{name}: (categories, tips)");
        shared += 1;
    }
    assert!(shared > 200, "only {shared} commands in common");
    assert_eq!(ours["dbsize"].1, ["request_policy:all_shards", "response_policy:agg_sum"]);
}

/// COMMAND INFO's key specifications (flags, begin_search, find_keys, notes) are
/// redis-server 8.2's for every command both servers have, in RESP2 and RESP3: cluster clients
/// find keys by them, and the ACL key patterns decide by their flags. A container lists its
/// subcommands, each entry redis-server's. No command lists a flag twice.
#[test]
fn key_specs_match_redis_server() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    for suffix in ["", "?protocol=resp3"] {
        type Row = (String, Vec<String>, Vec<(String, String)>);
        let table = |port: u16| -> std::collections::HashMap<String, Row> {
            let client = redis::Client::open(format!("redis://127.0.0.1:{port}/{suffix}")).unwrap();
            let mut con = client.get_connection().unwrap();
            let all: Vec<Value> = redis::cmd("COMMAND").query(&mut con).unwrap();
            let list = |v: &Value| -> Vec<String> {
                match v {
                    Value::Array(a) | Value::Set(a) => a.iter().map(text).collect(),
                    other => panic!("{other:?}"),
                }
            };
            let subs = |v: &Value| -> Vec<(String, String)> {
                match v {
                    Value::Array(a) | Value::Set(a) => {
                        a.iter().map(|e| (text(&items(e)[0]), format!("{e:?}"))).collect()
                    }
                    other => panic!("{other:?}"),
                }
            };
            all.iter()
                .map(|c| {
                    let c = items(c);
                    (text(&c[0]), (format!("{:?}", c[8]), list(&c[2]), subs(&c[9])))
                })
                .collect()
        };
        let (ours, theirs) = (table(g.port), table(r.port));
        let mut shared = 0;
        let mut containers = 0;
        for (name, (want, _, want_subs)) in &theirs {
            let Some((got, flags, got_subs)) = ours.get(name) else { continue };
            assert_eq!(got, want, "{name}: key specs ({suffix})");
            // A container lists its subcommands, each entry exactly Redis's.
            assert_eq!(got_subs.is_empty(), want_subs.is_empty(), "{name}: subcommands ({suffix})");
            for (sub, entry) in got_subs {
                let theirs = want_subs.iter().find(|(n, _)| n == sub);
                assert_eq!(Some(entry), theirs.map(|(_, e)| e), "{sub} ({suffix})");
            }
            containers += !got_subs.is_empty() as usize;
            let mut dedup = flags.clone();
            dedup.sort();
            dedup.dedup();
            assert_eq!(dedup.len(), flags.len(), "{name}: {flags:?}");
            shared += 1;
        }
        assert!(shared > 200, "only {shared} commands in common");
        assert!(containers >= 10, "only {containers} containers list subcommands");
    }
}

/// ACL CAT names the same categories as redis-server 8.2, and each category the same commands
/// and subcommands (`client|getname` is @connection, the CLIENT container only @slow), among
/// those both servers have.
#[test]
fn acl_categories_list_what_redis8_lists() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let (mut ours, mut theirs) = (g.conn(), r.conn());
    let list = |con: &mut redis::Connection, args: &[&str]| -> std::collections::BTreeSet<String> {
        let v: Vec<String> = redis::cmd(args[0]).arg(&args[1..]).query(con).unwrap();
        v.into_iter().collect()
    };
    let (our_cmds, their_cmds) =
        (list(&mut ours, &["COMMAND", "LIST"]), list(&mut theirs, &["COMMAND", "LIST"]));
    let cats = list(&mut theirs, &["ACL", "CAT"]);
    assert_eq!(list(&mut ours, &["ACL", "CAT"]), cats);
    for cat in &cats {
        let mine: Vec<String> =
            list(&mut ours, &["ACL", "CAT", cat]).into_iter().filter(|c| their_cmds.contains(c)).collect();
        let want: Vec<String> =
            list(&mut theirs, &["ACL", "CAT", cat]).into_iter().filter(|c| our_cmds.contains(c)).collect();
        assert_eq!(mine, want, "ACL CAT {cat}");
    }
    assert!(list(&mut ours, &["ACL", "CAT", "connection"]).contains("client|getname"));
}
