//! Consumer groups and XINFO against the real binary, reply for reply with redis-server
//! 7.0.15: one session of every XGROUP subcommand, XREADGROUP, XACK, XPENDING, XCLAIM,
//! XAUTOCLAIM and XINFO form (errors included, inside MULTI too), in RESP2 and RESP3; and
//! blocked XREADGROUP readers woken by XADD, by XGROUP DESTROY, and by their timeout.
//!
//! Only clock readings differ between the two servers (idle times, delivery and seen times)
//! and the radix-tree sizes Redis reports for its own layout: those are masked, and the fields
//! Redis 7.2 added to XINFO (`inactive`, `active-time`) are dropped; everything else compares
//! exactly.

mod common;

use common::{RedisServer, RespConn as Conn, Server};
use resp::Frame;
use std::net::TcpStream;
use std::time::Duration;

/// Zeroes the integer after each field named in `names`, in RESP3 maps and RESP2 flat arrays.
fn zero_fields(f: Frame, names: &[&str]) -> Frame {
    let named =
        |k: &Frame| matches!(k, Frame::Bulk(Some(n)) if names.iter().any(|x| x.as_bytes() == n.as_slice()));
    match f {
        Frame::Map(pairs) => Frame::Map(
            pairs
                .into_iter()
                .map(|(k, v)| {
                    let v = if named(&k) && matches!(v, Frame::Integer(_)) {
                        Frame::Integer(0)
                    } else {
                        zero_fields(v, names)
                    };
                    (k, v)
                })
                .collect(),
        ),
        Frame::Array(Some(items)) => {
            let mut out = Vec::with_capacity(items.len());
            let mut zero_next = false;
            for it in items {
                let it = if zero_next && matches!(it, Frame::Integer(_)) {
                    Frame::Integer(0)
                } else {
                    zero_fields(it, names)
                };
                zero_next = named(&it);
                out.push(it);
            }
            Frame::Array(Some(out))
        }
        other => other,
    }
}

/// Drops each field named in `names` with its value, in RESP3 maps and RESP2 flat arrays: the
/// fields Redis 7.2 added (`inactive`, `active-time`), which goblin-core (announcing 7.4)
/// reports and redis-server 7.0 does not.
fn drop_fields(f: Frame, names: &[&str]) -> Frame {
    let named =
        |k: &Frame| matches!(k, Frame::Bulk(Some(n)) if names.iter().any(|x| x.as_bytes() == n.as_slice()));
    match f {
        Frame::Map(pairs) => Frame::Map(
            pairs.into_iter().filter(|(k, _)| !named(k)).map(|(k, v)| (k, drop_fields(v, names))).collect(),
        ),
        Frame::Array(Some(items)) => {
            let mut out = Vec::with_capacity(items.len());
            let mut skip_next = false;
            for it in items {
                if skip_next {
                    skip_next = false;
                    continue;
                }
                if named(&it) {
                    skip_next = true;
                    continue;
                }
                out.push(drop_fields(it, names));
            }
            Frame::Array(Some(out))
        }
        other => other,
    }
}

/// XINFO STREAM FULL's PEL rows, `[id, consumer, time, count]` and `[id, time, count]`: the
/// time (second to last) is a clock reading.
fn pel_times(f: Frame) -> Frame {
    match f {
        Frame::Array(Some(v)) => {
            let row = v.len() >= 3
                && matches!(&v[0], Frame::Bulk(Some(b)) if b.first().is_some_and(u8::is_ascii_digit) && b.contains(&b'-'))
                && matches!(v[v.len() - 2], Frame::Integer(_));
            let mut v: Vec<Frame> = v.into_iter().map(pel_times).collect();
            if row {
                let n = v.len();
                v[n - 2] = Frame::Integer(0);
            }
            Frame::Array(Some(v))
        }
        Frame::Map(p) => Frame::Map(p.into_iter().map(|(k, v)| (k, pel_times(v))).collect()),
        other => other,
    }
}

fn mask(args: &[&str], f: Frame) -> Frame {
    let a0 = args[0].to_ascii_uppercase();
    let sub = args.get(1).map(|s| s.to_ascii_uppercase()).unwrap_or_default();
    match (a0.as_str(), sub.as_str()) {
        // Extended form: [id, consumer, idle, deliveries].
        ("XPENDING", _) if args.len() > 3 => match f {
            Frame::Array(Some(rows)) => Frame::Array(Some(
                rows.into_iter()
                    .map(|r| match r {
                        Frame::Array(Some(mut v)) if v.len() == 4 => {
                            v[2] = Frame::Integer(0);
                            Frame::Array(Some(v))
                        }
                        other => other,
                    })
                    .collect(),
            )),
            other => other,
        },
        ("XINFO", "CONSUMERS") => drop_fields(zero_fields(f, &["idle"]), &["inactive"]),
        ("XINFO", "STREAM") => pel_times(drop_fields(
            zero_fields(f, &["seen-time", "radix-tree-nodes", "radix-tree-keys"]),
            &["active-time"],
        )),
        _ => f,
    }
}

const SESSION: &str = "
    XGROUP
    XINFO
    XGROUP HELP
    XINFO HELP
    XGROUP NOPE k g
    XINFO NOPE k
    XGROUP CREATE k g
    XGROUP DESTROY k
    XGROUP CREATE k g $
    XGROUP CREATE k g $ MKSTREAM
    XGROUP CREATE k g $ MKSTREAM
    XGROUP CREATE k g2 0 MKSTREAM ENTRIESREAD -3
    XGROUP CREATE k g2 0 BOGUS
    XINFO STREAM k
    XINFO GROUPS k
    XADD k 1-0 a 1
    XADD k 2-0 b 2 c 3
    XADD k 3-0 a 3
    XADD k 4-0 a 4
    XGROUP CREATE k g2 0 ENTRIESREAD 0
    XGROUP SETID k g2 0 ENTRIESREAD 0
    XGROUP SETID k nog 0
    XGROUP CREATECONSUMER k g2 alice
    XGROUP CREATECONSUMER k g2 alice
    XREADGROUP GROUP g2 bob COUNT 2 STREAMS k >
    XREADGROUP GROUP g2 carol STREAMS k >
    XREADGROUP GROUP g2 bob STREAMS k 0
    XINFO GROUPS k
    XINFO CONSUMERS k g2
    XINFO STREAM k
    XINFO STREAM k FULL
    XINFO STREAM k FULL COUNT 1
    XINFO STREAM k FULL COUNT
    XPENDING k g2
    XPENDING k g2 - + 10
    XPENDING k g2 IDLE 0 (1-0 + 10 carol
    XPENDING k g2 - + 10 nobody
    XPENDING k g2 - +
    XPENDING k nog
    XACK k g2 1-0 1-0 7-0
    XACK k g2 bad
    XCLAIM k g2 dave 0 2-0
    XCLAIM k g2 dave 0 2-0 3-0 JUSTID RETRYCOUNT 5
    XCLAIM k g2 dave 0 9-0 FORCE
    XCLAIM k g2 dave 100000000 2-0
    XCLAIM k g2 dave 0 2-0 LASTID 8-0 IDLE 10
    XCLAIM k g2 dave 0 2-0 TIME
    XCLAIM k g2 dave 0 2-0 WHAT
    XPENDING k g2 - + 10
    XDEL k 2-0
    XAUTOCLAIM k g2 erin 0 - COUNT 1
    XAUTOCLAIM k g2 erin 0 - COUNT 1 JUSTID
    XAUTOCLAIM k g2 erin 0 0
    XAUTOCLAIM k g2 erin 0 0 COUNT 0
    XAUTOCLAIM k nog erin 0 0
    XINFO GROUPS k
    MULTI
    XADD k 5-0 a 5
    XREADGROUP GROUP g2 frank STREAMS k >
    XACK k g2 5-0
    XPENDING k g2
    EXEC
    XGROUP DELCONSUMER k g2 erin
    XGROUP DELCONSUMER k g2 erin
    XGROUP DESTROY k g2
    XGROUP DESTROY k g2
    SET str v
    XINFO STREAM str
    XGROUP CREATE str g 0
    XINFO GROUPS nokey
";

fn run_session(resp3: bool) {
    let r = RedisServer::start8();
    let g = Server::start(&[]);
    let mut rc = Conn::over(r.raw(), if resp3 { 3 } else { 2 });
    let mut gc = Conn::over(g.raw(), if resp3 { 3 } else { 2 });
    let mut compared = 0;
    for line in SESSION.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let args: Vec<&str> = line.split(' ').collect();
        let theirs = mask(&args, rc.call(&args));
        let ours = mask(&args, gc.call(&args));
        assert_eq!(ours, theirs, "RESP{} `{line}`", if resp3 { 3 } else { 2 });
        compared += 1;
    }
    assert!(compared > 60);
}

#[test]
fn session_matches_redis_resp2() {
    run_session(false);
}

#[test]
fn session_matches_redis_resp3() {
    run_session(true);
}

/// A parked XREADGROUP is served by an XADD, told NOGROUP when its group is destroyed, and
/// answers null at its timeout, as on redis-server.
#[test]
fn blocked_readers_wake_as_on_redis() {
    let r = RedisServer::start8();
    let g = Server::start(&[]);
    let run = |raw: &dyn Fn() -> TcpStream| -> Vec<Frame> {
        let mut admin = Conn::over(raw(), 2);
        let mut reader = Conn::over(raw(), 2);
        let mut got = Vec::new();
        got.push(admin.call(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]));
        reader.send(&["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"]);
        std::thread::sleep(Duration::from_millis(100));
        got.push(admin.call(&["XADD", "s", "1-0", "f", "v"]));
        got.push(reader.read());
        reader.send(&["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"]);
        std::thread::sleep(Duration::from_millis(100));
        got.push(admin.call(&["XGROUP", "DESTROY", "s", "g"]));
        got.push(reader.read());
        got.push(admin.call(&["XGROUP", "CREATE", "s", "g", "$"]));
        got.push(reader.call(&["XREADGROUP", "GROUP", "g", "c", "BLOCK", "50", "STREAMS", "s", ">"]));
        got.push(admin.call(&["XPENDING", "s", "g"]));
        got
    };
    let theirs = run(&|| r.raw());
    let ours = run(&|| g.raw());
    assert_eq!(ours, theirs);
    assert!(matches!(&theirs[4], Frame::Error(e) if e.starts_with(b"NOGROUP")), "{:?}", theirs[4]);
}
