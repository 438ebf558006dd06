//! Streams against the real binary: a differential run against redis-server (every reply of a
//! random session of stream commands compared, in RESP2 and RESP3), and blocking reads served by
//! writes from other clients.

mod common;

use common::{RedisServer, RespConn as Conn, Server};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use resp::Frame;
use std::time::{Duration, Instant};

/// A random stream command over a few keys and small IDs, so that commands collide, trim,
/// delete what exists and hit every error path.
fn random_command(rng: &mut StdRng, next_ms: &mut u64) -> Vec<String> {
    let key = ["s1", "s2", "s1", "str"][rng.gen_range(0..4)].to_string();
    let hi = *next_ms + 3;
    let id = |rng: &mut StdRng| -> String {
        match rng.gen_range(0..10) {
            0 => "-".into(),
            1 => "+".into(),
            2 => format!("({}-{}", rng.gen_range(0..hi), rng.gen_range(0..3)),
            3 => format!("{}", rng.gen_range(0..hi)),
            4 => "bad-id".into(),
            _ => format!("{}-{}", rng.gen_range(0..hi), rng.gen_range(0..3)),
        }
    };
    let mut v: Vec<String> = match rng.gen_range(0..20) {
        0..=6 => {
            let mut c = vec!["XADD".to_string(), key.clone()];
            if rng.gen_bool(0.1) {
                c.push("NOMKSTREAM".into());
            }
            match rng.gen_range(0..8) {
                0 => c.extend(["MAXLEN".into(), "~".into(), rng.gen_range(0..30).to_string()]),
                1 => c.extend(["MAXLEN".into(), rng.gen_range(3..30).to_string()]),
                2 => c.extend(["MINID".into(), "=".into(), format!("{}", rng.gen_range(0..40))]),
                3 => c.extend(["MAXLEN".into(), "~".into(), "3".into(), "LIMIT".into(), "2".into()]),
                _ => {}
            }
            // Explicit IDs only: `*` picks the server's clock, which two servers don't share.
            match rng.gen_range(0..6) {
                0 => c.push(format!("{}-*", *next_ms)),
                1 => c.push(format!("{}-{}", rng.gen_range(0..40), rng.gen_range(0..3))),
                _ => {
                    *next_ms += 1;
                    c.push(format!("{}-{}", *next_ms, rng.gen_range(1..3)));
                }
            }
            for i in 0..rng.gen_range(1..4) {
                let f = if rng.gen_bool(0.7) { ["a", "b", "c"][i % 3].to_string() } else { format!("f{i}") };
                c.extend([f, rng.gen_range(0..100).to_string()]);
            }
            if rng.gen_bool(0.05) {
                c.push("dangling".into());
            }
            c
        }
        7 | 8 => {
            let mut c = vec!["XRANGE".to_string(), key.clone(), id(rng), id(rng)];
            if rng.gen_bool(0.5) {
                (c[2], c[3]) = ("-".into(), "+".into());
            }
            if rng.gen_bool(0.5) {
                c.extend(["COUNT".into(), rng.gen_range(-1..5).to_string()]);
            }
            c
        }
        9 => {
            let mut c = vec!["XREVRANGE".to_string(), key.clone(), id(rng), id(rng)];
            if rng.gen_bool(0.5) {
                (c[2], c[3]) = ("+".into(), "-".into());
            }
            if rng.gen_bool(0.5) {
                c.extend(["COUNT".into(), rng.gen_range(0..5).to_string()]);
            }
            c
        }
        10 => vec!["XLEN".into(), key.clone()],
        11 => {
            let mut c = vec!["XDEL".to_string(), key.clone()];
            for _ in 0..rng.gen_range(1..3) {
                c.push(format!("{}-{}", rng.gen_range(0..*next_ms + 2), rng.gen_range(0..3)));
            }
            c
        }
        12 => match rng.gen_range(0..4) {
            0 => vec!["XTRIM".into(), key.clone(), "MAXLEN".into(), rng.gen_range(0..6).to_string()],
            1 => vec![
                "XTRIM".into(),
                key.clone(),
                "MINID".into(),
                "~".into(),
                format!("{}", rng.gen_range(0..40)),
            ],
            2 => vec![
                "XTRIM".into(),
                key.clone(),
                "MAXLEN".into(),
                "~".into(),
                "2".into(),
                "LIMIT".into(),
                "1".into(),
            ],
            _ => vec!["XTRIM".into(), key.clone(), "MAXLEN".into(), "-1".into()],
        },
        13 => {
            let mut c =
                vec!["XSETID".to_string(), key.clone(), format!("{}-{}", *next_ms + rng.gen_range(0..3), 5)];
            if rng.gen_bool(0.3) {
                c.extend(["ENTRIESADDED".into(), rng.gen_range(0..60).to_string()]);
            }
            if rng.gen_bool(0.3) {
                c.extend(["MAXDELETEDID".into(), format!("{}-0", rng.gen_range(0..40))]);
            }
            c
        }
        14 | 15 => {
            let mut c = vec!["XREAD".to_string()];
            if rng.gen_bool(0.5) {
                c.extend(["COUNT".into(), rng.gen_range(1..4).to_string()]);
            }
            c.extend(["STREAMS".into(), "s1".into(), "s2".into()]);
            for _ in 0..2 {
                c.push(match rng.gen_range(0..4) {
                    0 => "$".into(),
                    1 => "0".into(),
                    _ => format!("{}-0", rng.gen_range(0..40)),
                });
            }
            c
        }
        16 => vec!["TYPE".into(), key.clone()],
        17 => vec!["OBJECT".into(), "ENCODING".into(), key.clone()],
        18 => vec!["SET".into(), "str".into(), "x".into()],
        _ => vec!["DEL".into(), key.clone()],
    };
    if v[0] == "XRANGE" && rng.gen_bool(0.05) {
        v.push("COUNTX".into());
    }
    v
}

#[test]
fn stream_commands_reply_as_redis_does() {
    let g = Server::start(&[]);
    let r = RedisServer::start();
    for proto in [2u8, 3] {
        let mut gc = Conn::open(g.port, proto);
        let mut rc = Conn::open(r.port, proto);
        for seed in 0..6u64 {
            gc.call(&["FLUSHALL"]);
            rc.call(&["FLUSHALL"]);
            let mut rng = StdRng::seed_from_u64(seed * 31 + proto as u64);
            let mut next_ms = 1;
            let (mut added, mut ranged, mut errors) = (0, 0, 0);
            for step in 0..400 {
                let cmd = random_command(&mut rng, &mut next_ms);
                let args: Vec<&str> = cmd.iter().map(|s| s.as_str()).collect();
                let (a, b) = (gc.call(&args), rc.call(&args));
                match (&a, cmd[0].as_str()) {
                    (Frame::Bulk(Some(_)), "XADD") => added += 1,
                    (Frame::Array(Some(v)), "XRANGE" | "XREVRANGE") if !v.is_empty() => ranged += 1,
                    (Frame::Error(_), _) => errors += 1,
                    _ => {}
                }
                if std::env::var("STREAMS_TRACE").is_ok() {
                    eprintln!("{cmd:?} -> {a:?}");
                }
                assert_eq!(a, b, "RESP{proto} seed {seed} step {step}: {cmd:?}");
            }
            // The session exercised what it is meant to: entries added, ranges read, errors.
            assert!(added > 40 && ranged > 10 && errors > 10, "{added} {ranged} {errors}");
            // The state matches too, not just the replies.
            for k in ["s1", "s2"] {
                for q in [&["XRANGE", k, "-", "+"][..], &["XLEN", k]] {
                    assert_eq!(gc.call(q), rc.call(q), "RESP{proto} seed {seed}: {q:?}");
                }
            }
        }
    }
}

#[test]
fn xread_block_is_served_by_a_later_xadd() {
    let g = Server::start(&[]);
    let mut w = Conn::open(g.port, 2);
    w.call(&["XADD", "s", "1-0", "old", "1"]);
    // Two readers on `$`: the entry added before they block is not news to them.
    let mut a = Conn::open(g.port, 2);
    let mut b = Conn::open(g.port, 3);
    a.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    b.send(&["XREAD", "BLOCK", "20000", "STREAMS", "other", "s", "$", "$"]);
    wait_blocked(&mut w, 2);
    assert_eq!(w.call(&["XADD", "s", "2-0", "new", "2"]), bulk(b"2-0"));
    let entry = Frame::Array(Some(vec![bulk(b"2-0"), Frame::Array(Some(vec![bulk(b"new"), bulk(b"2")]))]));
    assert_eq!(
        a.read(),
        Frame::Array(Some(vec![Frame::Array(Some(vec![
            bulk(b"s"),
            Frame::Array(Some(vec![entry.clone()]))
        ]))]))
    );
    // Both readers are served by the one XADD, the RESP3 one with a map.
    match b.read() {
        Frame::Map(m) => assert_eq!(m, vec![(bulk(b"s"), Frame::Array(Some(vec![entry])))]),
        other => panic!("{other:?}"),
    }
    // A timeout answers a null array; inside MULTI a blocking read does not block.
    // (It is parked first: the null comes from the deadline, not from an immediate answer.)
    a.send(&["XREAD", "BLOCK", "1000", "STREAMS", "s", "$"]);
    wait_blocked(&mut w, 1);
    assert_eq!(a.read(), Frame::Array(None));
    a.call(&["MULTI"]);
    a.call(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    assert_eq!(a.call(&["EXEC"]), Frame::Array(Some(vec![Frame::Array(None)])));
    // A reader blocked on an ID above what arrives keeps waiting; the next reader is served.
    let mut hi = Conn::open(g.port, 2);
    hi.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "99-0"]);
    a.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    wait_blocked(&mut w, 2);
    w.call(&["XADD", "s", "3-0", "f", "v"]);
    assert!(matches!(a.read(), Frame::Array(Some(_))));
    w.call(&["XADD", "s", "100-0", "f", "v"]);
    assert!(matches!(hi.read(), Frame::Array(Some(_))));
    // A key that stops being a stream does not wake its reader with an error: it waits for an
    // entry.
    a.send(&["XREAD", "BLOCK", "0", "STREAMS", "s1", "$"]);
    wait_blocked(&mut w, 1);
    w.call(&["MULTI"]);
    w.call(&["XADD", "s1", "1-0", "old", "x"]);
    w.call(&["DEL", "s1"]);
    w.call(&["LPUSH", "s1", "foo"]);
    assert!(matches!(w.call(&["EXEC"]), Frame::Array(Some(_))));
    w.call(&["DEL", "s1"]);
    w.call(&["XADD", "s1", "2-0", "new", "y"]);
    match a.read() {
        Frame::Array(Some(v)) => assert!(format!("{v:?}").contains("110, 101, 119"), "{v:?}"),
        other => panic!("{other:?}"),
    }
}

fn bulk(b: &[u8]) -> Frame {
    Frame::Bulk(Some(b.to_vec()))
}

/// Waits until `n` clients are blocked (INFO clients' blocked_clients).
fn wait_blocked(c: &mut Conn, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Frame::Bulk(Some(b)) | Frame::Verbatim(_, b) = c.call(&["INFO", "clients"]) {
            let text = String::from_utf8_lossy(&b).into_owned();
            if text.lines().any(|l| l.trim() == format!("blocked_clients:{n}")) {
                return;
            }
        }
        assert!(Instant::now() < deadline, "clients never blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn streams_are_a_type_with_memory_and_digest() {
    let g = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = Conn::open(g.port, 2);
    for i in 1..=300 {
        c.call(&["XADD", "s", &format!("{i}-0"), "a", "1", "b", "2"]);
    }
    assert_eq!(c.call(&["TYPE", "s"]), Frame::Simple(b"stream".to_vec()));
    assert_eq!(c.call(&["OBJECT", "ENCODING", "s"]), bulk(b"stream"));
    let Frame::Integer(usage) = c.call(&["MEMORY", "USAGE", "s"]) else { panic!() };
    assert!(usage > 300 * 5 && usage < 300 * 40, "{usage}");
    assert_eq!(c.call(&["SCAN", "0", "TYPE", "stream"]), c.call(&["SCAN", "0"]));
    let d1 = c.call(&["DEBUG", "DIGEST"]);
    c.call(&["XDEL", "s", "5-0"]);
    let d2 = c.call(&["DEBUG", "DIGEST"]);
    assert_ne!(d1, d2);
    c.call(&["XADD", "t", "1-0", "a", "1"]);
    assert_eq!(c.call(&["XLEN", "t"]), Frame::Integer(1));
    assert_eq!(
        c.call(&["LPUSH", "s", "x"]),
        Frame::Error(b"WRONGTYPE Operation against a key holding the wrong kind of value".to_vec())
    );
}

#[test]
fn blocked_group_readers_are_served_and_unblocked_as_in_redis() {
    let g = Server::start(&[]);
    let mut w = Conn::open(g.port, 2);
    w.call(&["XGROUP", "CREATE", "s", "g1", "$", "MKSTREAM"]);
    w.call(&["XGROUP", "CREATE", "s", "g2", "$"]);
    // Two readers of g1 and one of g2: one entry goes to the first g1 reader and to g2's.
    let mut a = Conn::open(g.port, 2);
    let mut b = Conn::open(g.port, 2);
    let mut c = Conn::open(g.port, 2);
    a.send(&["XREADGROUP", "GROUP", "g1", "alice", "BLOCK", "0", "STREAMS", "s", ">"]);
    b.send(&["XREADGROUP", "GROUP", "g1", "bob", "BLOCK", "0", "STREAMS", "s", ">"]);
    c.send(&["XREADGROUP", "GROUP", "g2", "carol", "BLOCK", "0", "STREAMS", "s", ">"]);
    wait_blocked(&mut w, 3);
    w.call(&["XADD", "s", "1-0", "f", "v"]);
    for r in [&mut a, &mut c] {
        assert!(format!("{:?}", r.read()).contains("[49, 45, 48]"), "1-0 delivered");
    }
    wait_blocked(&mut w, 1);
    // The entry is pending for alice in g1 and for carol in g2, once each.
    for grp in ["g1", "g2"] {
        match w.call(&["XPENDING", "s", grp, "-", "+", "10"]) {
            Frame::Array(Some(v)) => assert_eq!(v.len(), 1, "{grp}"),
            other => panic!("{other:?}"),
        }
    }
    // Destroying the group answers bob's read with NOGROUP.
    w.call(&["XGROUP", "DESTROY", "s", "g1"]);
    match b.read() {
        Frame::Error(e) => assert!(e.starts_with(b"NOGROUP"), "{}", String::from_utf8_lossy(&e)),
        other => panic!("{other:?}"),
    }
    // Deleting the key answers a group reader as the command would be answered now (Redis
    // 7.2+): NOGROUP; and a key that became another type, WRONGTYPE, even in one transaction.
    c.send(&["XREADGROUP", "GROUP", "g2", "carol", "BLOCK", "0", "STREAMS", "s", ">"]);
    wait_blocked(&mut w, 1);
    w.call(&["DEL", "s"]);
    assert_eq!(
        c.read(),
        Frame::Error(
            b"NOGROUP No such key 's' or consumer group 'g2' in XREADGROUP with GROUP option".to_vec()
        )
    );
    w.call(&["XGROUP", "CREATE", "s", "g2", "$", "MKSTREAM"]);
    c.send(&["XREADGROUP", "GROUP", "g2", "carol", "BLOCK", "0", "STREAMS", "s", ">"]);
    wait_blocked(&mut w, 1);
    w.call(&["MULTI"]);
    w.call(&["DEL", "s"]);
    w.call(&["LPUSH", "s", "x"]);
    w.call(&["EXEC"]);
    assert_eq!(
        c.read(),
        Frame::Error(b"WRONGTYPE Operation against a key holding the wrong kind of value".to_vec())
    );
    w.call(&["DEL", "s"]);
    // RENAME onto a waited key serves the reader from the renamed stream's group.
    w.call(&["XGROUP", "CREATE", "t", "g", "$", "MKSTREAM"]);
    a.send(&["XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "t", ">"]);
    wait_blocked(&mut w, 1);
    w.call(&["XGROUP", "CREATE", "t2", "g", "$", "MKSTREAM"]);
    w.call(&["XADD", "t2", "100-0", "f1", "v1"]);
    w.call(&["RENAME", "t2", "t"]);
    assert!(format!("{:?}", a.read()).contains("[49, 48, 48, 45, 48]"), "100-0 delivered");
}

#[test]
fn debug_loadaof_rebuilds_every_type_from_its_canonical_commands() {
    let g = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = Conn::open(g.port, 2);
    for cmd in [
        &["SET", "str", "v"][..],
        &["HSET", "h", "f", "1", "g", "2"],
        &["PEXPIRE", "h", "600000"],
        &["RPUSH", "l", "a", "b"],
        &["ZADD", "z", "1.5", "m"],
        &["SADD", "s", "x", "y"],
        &["XADD", "st", "1-1", "a", "1"],
        &["XADD", "st", "2-0", "b", "2"],
        &["XADD", "st", "3-0", "a", "3"],
        &["XDEL", "st", "2-0"],
        &["XGROUP", "CREATE", "st", "g", "0"],
        &["XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "st", ">"],
        &["XGROUP", "CREATECONSUMER", "st", "g", "bob"],
        &["XADD", "empty", "MAXLEN", "0", "5-0", "f", "v"],
    ] {
        assert!(!matches!(c.call(cmd), Frame::Error(_)), "{cmd:?}");
    }
    let before = c.call(&["DEBUG", "DIGEST"]);
    assert_eq!(c.call(&["DEBUG", "LOADAOF"]), Frame::Simple(b"OK".to_vec()));
    assert_eq!(c.call(&["DEBUG", "DIGEST"]), before);
    assert_eq!(c.call(&["XLEN", "empty"]), Frame::Integer(0));
    match c.call(&["XPENDING", "st", "g"]) {
        Frame::Array(Some(v)) => assert_eq!(v[0], Frame::Integer(1)),
        other => panic!("{other:?}"),
    }
}

/// Scripts read streams, and a blocking read (XREAD or XREADGROUP with BLOCK, BLPOP and the
/// other blocking pops) answers at once, with data or nil, as in Redis 7.2+ (7.0 refused
/// them): the same replies as redis-server 8.2.
#[test]
fn scripts_read_streams_and_never_block() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let mut replies = Vec::new();
    for port in [g.port, r.port] {
        let mut c = Conn::open(port, 2);
        let mut got = Vec::new();
        c.call(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
        c.call(&["XADD", "s", "1-0", "f", "v"]);
        c.call(&["RPUSH", "full", "a"]);
        for script in [
            "return redis.pcall('xread','COUNT','1','STREAMS','s','0')",
            "return redis.pcall('xread','BLOCK',0,'STREAMS','s','$')",
            "return redis.pcall('xread','BLOCK',0,'STREAMS','s','0')",
            "return redis.pcall('xreadgroup','group','g','c','BLOCK',0,'STREAMS','s','>')",
            "return redis.pcall('xreadgroup','group','g','c','BLOCK',0,'STREAMS','s','>')",
            "return redis.pcall('blpop','empty',0)",
            "return redis.pcall('blpop','full',0)",
            "return redis.pcall('bzpopmin','nozset',0)",
            "return redis.pcall('blmove','empty','other','LEFT','RIGHT',0)",
        ] {
            got.push(format!("{script}: {:?}", c.call(&["EVAL", script, "0"])));
        }
        replies.push(got);
    }
    assert_eq!(replies[0], replies[1], "goblin-core, then redis-server 8.2");
}

#[test]
fn command_introspection_of_stream_commands_matches_redis() {
    let g = Server::start(&[]);
    let r = RedisServer::start();
    let (mut gc, mut rc) = (Conn::open(g.port, 2), Conn::open(r.port, 2));
    for cmd in [
        &["COMMAND", "GETKEYSANDFLAGS", "XREAD", "COUNT", "2", "STREAMS", "a", "b", "0", "0"][..],
        &["COMMAND", "GETKEYSANDFLAGS", "XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", "0"],
        &["COMMAND", "GETKEYS", "XREAD", "STREAMS", "a"],
        &["COMMAND", "GETKEYS", "XADD", "s", "*", "f", "v"],
    ] {
        assert_eq!(gc.call(cmd), rc.call(cmd), "{cmd:?}");
    }
    // The @stream category exists (Redis lists XGROUP and XINFO by subcommand; we list the
    // containers, as for every container command).
    let cat = format!("{:?}", gc.call(&["ACL", "CAT", "stream"]));
    for name in ["xadd", "xreadgroup", "xautoclaim"] {
        assert!(cat.contains(&format!("{:?}", name.as_bytes())), "{name}: {cat}");
    }
}
