//! ACL SETUSER / DELUSER / GETUSER / LIST / CAT / GENPASS against the real binary, replies
//! compared with redis-server 7.0.15 for users within the supported subset (full access).

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
    let r = RedisServer::start();
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
        // The syntax-error text of an unknown rule: ours explains the supported subset.
        if i == 6 {
            assert!(ours.contains("Error in ACL SETUSER modifier 'bogus'"), "{ours}");
            continue;
        }
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
    // A permission rule outside the supported subset is refused, not ignored.
    let err = q(&mut admin, &["ACL", "SETUSER", "bob", "~cache:*"]).unwrap_err();
    assert!(err.to_string().contains("key and channel patterns"), "{err}");
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

/// Command, key and channel permissions, every reply compared with redis-server 7.0.15's: a
/// user limited to some commands, one without keys, one without channels, one without a
/// category and a command; MULTI with a refused command, a script calling one, ACL DRYRUN,
/// GETUSER and LIST; and a user's rules changed while it is connected.
#[test]
fn permissions_are_enforced_as_redis_enforces_them() {
    let g = Server::start(&[]);
    let r = RedisServer::start();
    let setup: &[&[&str]] = &[
        &["ACL", "SETUSER", "lim", "on", ">pw", "+get", "+acl|whoami", "+multi", "+exec", "+eval", "~*"],
        &["ACL", "SETUSER", "nokeys", "on", ">pw", "+@all"],
        &["ACL", "SETUSER", "cat", "on", ">pw", "~*", "&*", "+@all", "-@dangerous", "-set"],
        &["ACL", "SETUSER", "fresh"],
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
    let run = |port: u16| -> Vec<String> {
        let raw = |user: &str| {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
            if user != "default" {
                common::send(&mut s, format!("AUTH {user} pw\r\n").as_bytes());
                assert_eq!(common::read_reply(&mut s), b"+OK\r\n");
            }
            s
        };
        let mut admin = raw("default");
        let mut cmd = |s: &mut std::net::TcpStream, args: &[&str]| -> String {
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            let mut req = Vec::new();
            resp::reply::bulk_array(&mut req, &args);
            common::send(s, &req);
            String::from_utf8_lossy(&common::read_reply(s)).into_owned()
        };
        for c in setup {
            assert_eq!(cmd(&mut admin, c), "+OK\r\n");
        }
        let mut conns: std::collections::HashMap<&str, std::net::TcpStream> =
            std::collections::HashMap::new();
        for u in ["lim", "nokeys", "cat"] {
            conns.insert(u, raw(u));
        }
        conns.insert("default", admin);
        session.iter().map(|(u, c)| cmd(conns.get_mut(u).unwrap(), c)).collect()
    };
    let ours = run(g.port);
    let theirs = run(r.port);
    // Redis lists a user's allowed commands in its command table's order, goblin-core in the
    // order given: each line's words are compared as a set.
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
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(words(o), words(t), "{:?}: {o} / {t}", session[i]);
    }
}
