//! The SBE listener against the real binary: every request family gives the reply and the
//! state the same command gives over RESP (a second server, DEBUG DIGEST), the Acks' logical
//! offsets are INFO's, refused messages change nothing, a frame cut at any byte never
//! crashes, a replica receives SBE writes, the Unix socket variant, CLIENT PAUSE, and broker
//! ack mode holding the Ack until Kafka acknowledged the write (kaka).

mod common;
mod sbe_client;

use common::{brokers::info, free_port, temp_path, RespConn, Server};
use rand::{Rng, SeedableRng};
use sbe_client::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn sbe_server(extra: &[&str]) -> (Server, u16) {
    let port = free_port();
    let p = port.to_string();
    let mut args = vec!["--sbe-port", p.as_str(), "--enable-debug-command", "yes", "--save", ""];
    args.extend_from_slice(extra);
    (Server::start(&args), port)
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

fn digest(s: &Server) -> String {
    redis::cmd("DEBUG").arg("DIGEST").query(&mut s.conn()).unwrap()
}

fn offset(s: &Server) -> u64 {
    info(&mut s.conn(), "replication")["master_repl_offset"].parse().unwrap()
}

fn v(x: &str) -> Vec<u8> {
    x.as_bytes().to_vec()
}

/// A random request over a small keyspace shared by every type (so WRONGTYPE and friends
/// occur), with absolute deadlines only, so two servers fed the same sequence agree exactly.
fn random_cmd(rng: &mut impl Rng, far: i64) -> Cmd {
    let key = v(&format!("k{}", rng.gen_range(0..6)));
    let small = |rng: &mut dyn rand::RngCore| v(["a", "b", "c", "10", "", "x y"][rng.gen_range(0..6)]);
    let n = rng.gen_range(0..4);
    match rng.gen_range(0..13) {
        0 => {
            let cond = [
                StringCondition::NONE,
                StringCondition::NX,
                StringCondition::XX,
                StringCondition::IFEQ,
                StringCondition::IFNE,
                StringCondition::IFDEQ,
                StringCondition::IFDNE,
            ][rng.gen_range(0..7)];
            let comparand = match cond {
                StringCondition::IFEQ | StringCondition::IFNE => small(rng),
                StringCondition::IFDEQ | StringCondition::IFDNE => {
                    v(["0123456789abcdef", "zz", "e3b0c44298fc1c14"][rng.gen_range(0..3)])
                }
                _ => Vec::new(),
            };
            let (expiry, ev) = match rng.gen_range(0..5) {
                0 => (Expiry::EXAT, far / 1000 + rng.gen_range(0..5)),
                1 => (Expiry::PXAT, far + rng.gen_range(0..5)),
                2 => (Expiry::KEEPTTL, 0),
                3 => (Expiry::PXAT, [1, -5, 0][rng.gen_range(0..3)]),
                _ => (Expiry::NONE, 0),
            };
            Cmd::Set { key, value: small(rng), cond, comparand, expiry, ev, get: rng.gen_bool(0.3) }
        }
        1 => {
            let op = [CounterOp::INCRBY, CounterOp::DECRBY, CounterOp::INCRBYFLOAT][rng.gen_range(0..3)];
            let fdelta = [1.5, -0.25, 1e10, f64::NAN, f64::INFINITY, 3.0][rng.gen_range(0..6)];
            let delta = [1, -7, i64::MAX, 100][rng.gen_range(0..4)];
            Cmd::Counter { key, op, delta, fdelta }
        }
        2 => {
            let op = [
                KeyOp::DEL,
                KeyOp::UNLINK,
                KeyOp::EXPIRE,
                KeyOp::PEXPIRE,
                KeyOp::EXPIREAT,
                KeyOp::PEXPIREAT,
                KeyOp::PERSIST,
            ][rng.gen_range(0..7)];
            let timed = matches!(op, KeyOp::EXPIRE | KeyOp::PEXPIRE | KeyOp::EXPIREAT | KeyOp::PEXPIREAT);
            let cond = if timed {
                [
                    ExpireCondition::NONE,
                    ExpireCondition::NX,
                    ExpireCondition::XX,
                    ExpireCondition::GT,
                    ExpireCondition::LT,
                ][rng.gen_range(0..5)]
            } else {
                ExpireCondition::NONE
            };
            // Relative EXPIRE/PEXPIRE only with values that delete at once (<= 0), so that
            // both servers agree whatever their clocks.
            let value = match op {
                KeyOp::EXPIREAT => far / 1000 + rng.gen_range(-1..2),
                KeyOp::PEXPIREAT => [far, far + 7, 5][rng.gen_range(0..3)],
                _ => [0, -1][rng.gen_range(0..2)],
            };
            Cmd::Key { key, op, cond, value }
        }
        3 => Cmd::HSet {
            key,
            nx: rng.gen_bool(0.2),
            fields: (0..n).map(|_| (small(rng), small(rng))).collect(),
        },
        4 => Cmd::HDel { key, fields: (0..n).map(|_| small(rng)).collect() },
        5 => Cmd::SetW { key, rem: rng.gen_bool(0.3), members: (0..n).map(|_| small(rng)).collect() },
        6 => Cmd::ZAdd {
            key,
            cond: [SortedSetCondition::NONE, SortedSetCondition::NX, SortedSetCondition::XX]
                [rng.gen_range(0..3)],
            cmp: [SortedSetComparison::NONE, SortedSetComparison::GT, SortedSetComparison::LT]
                [rng.gen_range(0..3)],
            ch: rng.gen_bool(0.5),
            entries: (0..n)
                .map(|_| {
                    ([1.0, -2.5, 0.1, 1e300, f64::NEG_INFINITY, f64::NAN][rng.gen_range(0..6)], small(rng))
                })
                .collect(),
        },
        7 => Cmd::ZRem { key, members: (0..n).map(|_| small(rng)).collect() },
        8 => Cmd::Push {
            key,
            right: rng.gen(),
            x: rng.gen_bool(0.2),
            values: (0..n).map(|_| small(rng)).collect(),
        },
        9 => {
            Cmd::Pop { key, right: rng.gen(), count: [None, Some(0), Some(1), Some(3)][rng.gen_range(0..4)] }
        }
        10 => Cmd::ArSet { key, index: rng.gen_range(0..20), values: (0..n).map(|_| small(rng)).collect() },
        11 => Cmd::ArMSet { key, entries: (0..n).map(|_| (rng.gen_range(0..20), small(rng))).collect() },
        _ => {
            let cond = [
                DeleteCondition::NONE,
                DeleteCondition::IFEQ,
                DeleteCondition::IFNE,
                DeleteCondition::IFDEQ,
                DeleteCondition::IFDNE,
            ][rng.gen_range(0..5)];
            let comparand = match cond {
                DeleteCondition::NONE => Vec::new(),
                DeleteCondition::IFEQ | DeleteCondition::IFNE => small(rng),
                _ => v("0123456789abcdef"),
            };
            Cmd::DelEx { key, cond, comparand }
        }
    }
}

/// Every family, random sequences: each SBE request to A and the same command over RESP to B
/// answer the same (Ack/Error against the RESP reply), the Acks' offsets never decrease and
/// end at A's master_repl_offset, and A and B end with the same DEBUG DIGEST.
#[test]
fn every_family_matches_resp() {
    let (a, port) = sbe_server(&[]);
    let b = Server::start(&["--enable-debug-command", "yes", "--save", ""]);
    let seed: u64 = rand::random();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let far = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
        as i64)
        + 1_000_000_000;
    let mut s = connect(port);
    let mut rb = RespConn::open(b.port, 2);
    let mut last = 0;
    let mut kinds = std::collections::HashSet::new();
    for i in 0..3000u64 {
        let cmd = random_cmd(&mut rng, far);
        let got = call(&mut s, i + 1, &cmd);
        let want = res_of(&rb.call(&cmd.resp()));
        assert_eq!(got.res(), want, "seed {seed}, request {i}: {cmd:?} -> {got:?}");
        if let Reply::Ack { offset, kind, dbl, bytes, .. } = &got {
            assert!(*offset >= last, "seed {seed}: offsets went back");
            last = *offset;
            kinds.insert(format!("{kind:?}"));
            if *kind == ResultKind::DOUBLE {
                let text: f64 = std::str::from_utf8(bytes).unwrap().parse().unwrap();
                assert!(*dbl == text || (dbl.is_nan() && text.is_nan()), "seed {seed}: {dbl} vs {text}");
            }
        }
    }
    assert_eq!(last, offset(&a), "seed {seed}: the last Ack's offset is INFO's");
    assert!(last > 0);
    for k in ["OK", "INT", "DOUBLE", "BYTES", "NIL", "ARRAY"] {
        assert!(kinds.contains(k), "seed {seed}: no {k} result in the run: {kinds:?}");
    }
    assert_eq!(digest(&a), digest(&b), "seed {seed}");
    assert_ne!(digest(&a), "0".repeat(40));
}

/// Ack details one command at a time: the offset is the last mutation of the command's batch
/// (a no-op write answers the current offset), relative TTLs land, results carry their types.
#[test]
fn acks_carry_offsets_and_results() {
    let (a, port) = sbe_server(&[]);
    let mut s = connect(port);
    let set = |k: &str, val: &str| Cmd::Set {
        key: v(k),
        value: v(val),
        cond: StringCondition::NONE,
        comparand: vec![],
        expiry: Expiry::EX,
        ev: 100,
        get: false,
    };
    let r = call(&mut s, 1, &set("s", "1"));
    assert!(matches!(r, Reply::Ack { kind: ResultKind::OK, offset: 1, .. }), "{r:?}");
    let ttl: i64 = redis::cmd("TTL").arg("s").query(&mut a.conn()).unwrap();
    assert!((98..=100).contains(&ttl), "{ttl}");
    // Three members: three mutations, the Ack names the last.
    let sadd = Cmd::SetW { key: v("set"), rem: false, members: vec![v("a"), v("b"), v("c")] };
    let r = call(&mut s, 2, &sadd);
    assert!(matches!(r, Reply::Ack { kind: ResultKind::INT, int: 3, offset: 4, .. }), "{r:?}");
    // Nothing new: no write, the current offset.
    let r = call(&mut s, 3, &sadd);
    assert!(matches!(r, Reply::Ack { kind: ResultKind::INT, int: 0, offset: 4, .. }), "{r:?}");
    let r = call(&mut s, 4, &Cmd::Counter { key: v("f"), op: CounterOp::INCRBYFLOAT, delta: 0, fdelta: 2.5 });
    match r {
        Reply::Ack { kind: ResultKind::DOUBLE, dbl, bytes, offset: 5, .. } => {
            assert_eq!((dbl, bytes.as_slice()), (2.5, &b"2.5"[..]))
        }
        other => panic!("{other:?}"),
    }
    let r = call(&mut s, 5, &Cmd::Counter { key: v("set"), op: CounterOp::INCRBY, delta: 1, fdelta: 0.0 });
    match r {
        Reply::Error { code: ErrorCode::COMMAND_ERROR, msg, corr: 5 } => {
            assert!(msg.starts_with("WRONGTYPE"), "{msg}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(offset(&a), 5);
}

/// Builds a valid framed StringSet and lets `f` spoil its message bytes.
fn spoiled(f: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let cmd = Cmd::Set {
        key: v("x"),
        value: v("y"),
        cond: StringCondition::NONE,
        comparand: vec![],
        expiry: Expiry::NONE,
        ev: 0,
        get: false,
    };
    let mut m = cmd.sbe(77);
    f(&mut m);
    framed(&m)
}

/// Malformed, truncated, unknown-template, wrong-schema and wrong-encoding messages each get
/// an Error (with the request's correlationId when it can be read) and change nothing; the
/// connection stays usable. Untrustworthy frame lengths get an Error and a close.
#[test]
fn refused_messages_change_nothing() {
    let (a, port) = sbe_server(&["--proto-max-bulk-len", "4096"]);
    let mut s = connect(port);
    call(&mut s, 1, &Cmd::SetW { key: v("keep"), rem: false, members: vec![v("m")] });
    let (d0, o0) = (digest(&a), offset(&a));
    let cases: Vec<(&str, Vec<u8>, ErrorCode, u64)> = vec![
        ("schema id", spoiled(|m| m[4] ^= 1), ErrorCode::SCHEMA_MISMATCH, 77),
        ("schema version", spoiled(|m| m[6] = 2), ErrorCode::SCHEMA_MISMATCH, 77),
        ("unknown template", spoiled(|m| m[2] = 99), ErrorCode::UNKNOWN_TEMPLATE, 77),
        ("reply template sent as a request", spoiled(|m| m[2] = 100), ErrorCode::UNKNOWN_TEMPLATE, 77),
        ("block length", spoiled(|m| m[0] += 1), ErrorCode::MALFORMED, 77),
        ("bad enum", spoiled(|m| m[8 + 8] = 42), ErrorCode::MALFORMED, 77),
        ("bad boolean", spoiled(|m| m[8 + 10] = 2), ErrorCode::MALFORMED, 77),
        ("trailing bytes", spoiled(|m| m.push(0)), ErrorCode::MALFORMED, 77),
        ("truncated var data", spoiled(|m| m.truncate(m.len() - 1)), ErrorCode::TRUNCATED, 77),
        (
            "var length past the end",
            spoiled(|m| {
                let at = 8 + 19;
                m[at..at + 4].copy_from_slice(&1000u32.to_le_bytes())
            }),
            ErrorCode::TRUNCATED,
            77,
        ),
        (
            "var length over the schema's maximum",
            spoiled(|m| {
                let at = 8 + 19;
                m[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes())
            }),
            ErrorCode::MALFORMED,
            77,
        ),
        ("header only", framed(&spoiled(|_| {})[6..14]), ErrorCode::TRUNCATED, 0),
        ("shorter than a header", framed(&[1, 2, 3]), ErrorCode::TRUNCATED, 0),
        (
            "comparand without IF*",
            spoiled(|m| {
                let n = m.len();
                m[n - 4..].copy_from_slice(&1u32.to_le_bytes());
                m.push(b'z');
            }),
            ErrorCode::MALFORMED,
            77,
        ),
        (
            "encoding type",
            {
                let mut f = spoiled(|_| {});
                f[5] = 0xE1;
                f
            },
            ErrorCode::BAD_ENCODING_TYPE,
            77,
        ),
    ];
    for (name, bytes, code, corr) in cases {
        s.write_all(&bytes).unwrap();
        match read_reply(&mut s) {
            Reply::Error { code: c, corr: got, msg } => {
                assert_eq!((c, got), (code, corr), "{name}: {msg}");
                assert!(!msg.is_empty());
            }
            other => panic!("{name}: {other:?}"),
        }
        // Still in sync: a valid request right after is answered.
        let r = call(&mut s, 9, &Cmd::Pop { key: v("none"), right: false, count: None });
        assert!(matches!(r, Reply::Ack { kind: ResultKind::NIL, .. }), "{name}: {r:?}");
    }
    // The ListPop count bound (an Ack carries at most 65535 items).
    let r = call(&mut s, 10, &Cmd::Pop { key: v("keep"), right: false, count: Some(70000) });
    assert!(matches!(r, Reply::Error { code: ErrorCode::MALFORMED, .. }), "{r:?}");
    assert_eq!((digest(&a), offset(&a)), (d0.clone(), o0), "refused messages changed nothing");
    // A frame over the limit, and one shorter than its own header: Error, then close.
    for (name, head, code) in [
        ("too large", (5000u32).to_be_bytes(), ErrorCode::FRAME_TOO_LARGE),
        ("length below the header", (3u32).to_be_bytes(), ErrorCode::MALFORMED),
    ] {
        let mut s = connect(port);
        s.write_all(&head).unwrap();
        s.write_all(&[0x5B, 0xE0, 0, 0, 0, 0]).unwrap();
        match read_reply(&mut s) {
            Reply::Error { code: c, corr: 0, .. } => assert_eq!(c, code, "{name}"),
            other => panic!("{name}: {other:?}"),
        }
        let mut rest = Vec::new();
        assert_eq!(s.read_to_end(&mut rest).unwrap(), 0, "{name}: closed after the Error");
    }
    assert_eq!((digest(&a), offset(&a)), (d0, o0));
    let pong: String = redis::cmd("PING").query(&mut a.conn()).unwrap();
    assert_eq!(pong, "PONG");
}

/// A frame cut at every byte (then EOF) runs nothing and never crashes the server; the same
/// frame sent one byte at a time is answered once.
#[test]
fn a_frame_cut_at_any_byte() {
    let (a, port) = sbe_server(&[]);
    let cmd = Cmd::ZAdd {
        key: v("z"),
        cond: SortedSetCondition::NONE,
        cmp: SortedSetComparison::NONE,
        ch: false,
        entries: vec![(1.5, v("m1")), (2.0, v("m2"))],
    };
    let f = framed(&cmd.sbe(5));
    for cut in 0..f.len() {
        let mut s = connect(port);
        s.write_all(&f[..cut]).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "cut at {cut}: {rest:?}");
    }
    assert_eq!(offset(&a), 0, "no partial frame ran");
    let mut s = connect(port);
    for byte in &f {
        s.write_all(&[*byte]).unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
    let r = read_reply(&mut s);
    assert!(matches!(r, Reply::Ack { corr: 5, kind: ResultKind::INT, int: 2, offset: 2, .. }), "{r:?}");
    // Random garbage never crashes it either.
    let mut rng = rand::rngs::StdRng::seed_from_u64(rand::random());
    for _ in 0..200 {
        let mut s = connect(port);
        let mut g: Vec<u8> = (0..rng.gen_range(0..80)).map(|_| rng.gen()).collect();
        if rng.gen_bool(0.5) && g.len() >= 6 {
            let n = g.len() as u32;
            g[..4].copy_from_slice(&n.to_be_bytes());
            g[4..6].copy_from_slice(&[0x5B, 0xE0]);
        }
        s.write_all(&g).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    }
    let pong: String = redis::cmd("PING").query(&mut a.conn()).unwrap();
    assert_eq!(pong, "PONG");
}

/// A replica sees SBE writes like any others: same offsets, same digest.
#[test]
fn a_replica_receives_sbe_writes() {
    let (p, port) = sbe_server(&[]);
    let pport = p.port.to_string();
    let r = Server::start(&["--replica-tcp", "127.0.0.1", &pport, "--enable-debug-command", "yes"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while info(&mut r.conn(), "replication")["replica_state"] != "live" {
        assert!(Instant::now() < deadline, "replica not live");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut s = connect(port);
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let far = 4_000_000_000_000;
    let mut last = 0;
    for i in 0..300 {
        if let Some(o) = call(&mut s, i, &random_cmd(&mut rng, far)).offset() {
            last = o;
        }
    }
    assert!(last > 0);
    while offset(&r) < last {
        assert!(Instant::now() < deadline, "replica did not catch up");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(digest(&p), digest(&r));
    // The replica's own SBE listener refuses writes with READONLY, changing nothing.
    let rport = free_port();
    let rp = rport.to_string();
    let r2 = Server::start(&["--replica-tcp", "127.0.0.1", &pport, "--sbe-port", &rp]);
    let mut s2 = connect(rport);
    let r = call(&mut s2, 1, &Cmd::Pop { key: v("k1"), right: true, count: None });
    assert!(
        matches!(&r, Reply::Error { code: ErrorCode::COMMAND_ERROR, msg, .. } if msg.starts_with("READONLY")),
        "{r:?}"
    );
    drop(r2);
}

/// `--sbe-unixsocket` with its file mode; usage errors for bad flag values.
#[test]
fn unix_socket_and_flags() {
    use std::os::unix::fs::PermissionsExt;
    let path = temp_path("sbe.sock");
    let p = path.to_str().unwrap();
    let a = Server::start(&["--sbe-unixsocket", p, "--sbe-unixsocket-perm", "770"]);
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o770);
    let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let r = call(&mut s, 3, &Cmd::Push { key: v("l"), right: true, x: false, values: vec![v("a"), v("b")] });
    // A list push is one mutation, whatever the number of values.
    assert!(matches!(r, Reply::Ack { kind: ResultKind::INT, int: 2, offset: 1, .. }), "{r:?}");
    let r = call(&mut s, 4, &Cmd::Pop { key: v("l"), right: false, count: Some(5) });
    match r {
        Reply::Ack { kind: ResultKind::ARRAY, items, offset, .. } => {
            assert_eq!(items, vec![v("a"), v("b")]);
            assert_eq!(
                offset,
                common::brokers::info(&mut a.conn(), "replication")["master_repl_offset"]
                    .parse::<u64>()
                    .unwrap()
            );
            assert!(offset > 1);
        }
        other => panic!("{other:?}"),
    }
    let list: Vec<String> = redis::cmd("CLIENT")
        .arg("LIST")
        .query::<String>(&mut a.conn())
        .map(|l| l.lines().map(str::to_string).collect())
        .unwrap();
    assert!(list.iter().any(|l| l.contains(&format!("addr={p}:0"))), "{list:?}");
    drop(s);
    drop(a);
    for bad in [&["--sbe-port", "x"][..], &["--sbe-port", "70000"], &["--sbe-unixsocket-perm", "9"]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_goblin-core")).args(bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
}

/// CLIENT PAUSE WRITE holds an SBE write like a RESP one; its Ack comes when the pause ends.
#[test]
fn client_pause_holds_the_ack() {
    let (a, port) = sbe_server(&[]);
    let mut s = connect(port);
    let mut resp = a.conn();
    // A pause far longer than the test: only CLIENT UNPAUSE can end it.
    let _: () = redis::cmd("CLIENT").arg("PAUSE").arg(600_000).arg("WRITE").query(&mut resp).unwrap();
    s.write_all(&framed(&Cmd::SetW { key: v("p"), rem: false, members: vec![v("1")] }.sbe(8))).unwrap();
    // Held: over 100 ms of reads the write never runs, and no Ack waits on the socket.
    for _ in 0..5 {
        let n: i64 = redis::cmd("SCARD").arg("p").query(&mut resp).unwrap();
        assert_eq!(n, 0, "the write ran during the pause");
        std::thread::sleep(Duration::from_millis(20));
    }
    s.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let early = s.read(&mut byte);
    assert!(
        matches!(&early, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "answered during the pause: {early:?}"
    );
    s.set_nonblocking(false).unwrap();
    let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut resp).unwrap();
    let r = read_reply(&mut s);
    assert!(matches!(r, Reply::Ack { corr: 8, kind: ResultKind::INT, int: 1, offset: 1, .. }), "{r:?}");
    let n: i64 = redis::cmd("SCARD").arg("p").query(&mut resp).unwrap();
    assert_eq!(n, 1);
}

/// Broker ack mode: the Ack waits for Kafka like a RESP reply. With the broker down no Ack
/// comes; once it is back the Ack arrives, and its offset is acknowledged by then.
#[test]
fn broker_ack_mode_holds_the_ack_until_kafka_has_it() {
    use common::brokers::{Broker, Kaka};
    let (dir, kport) = (temp_path("kaka-sbe"), free_port());
    let mut k = Kaka::start_in(&dir, kport);
    let uri = k.uri("journal-sbe");
    let (a, port) = sbe_server(&["--kafka", uri.as_str(), "--kafka-ack-mode", "broker"]);
    let mut s = connect(port);
    let set = |val: &str| Cmd::Set {
        key: v("j"),
        value: v(val),
        cond: StringCondition::NONE,
        comparand: vec![],
        expiry: Expiry::NONE,
        ev: 0,
        get: false,
    };
    let r = call(&mut s, 1, &set("1"));
    let o = r.offset().unwrap();
    let acked: u64 = info(&mut a.conn(), "kafka")["kafka_acknowledged_offset"].parse().unwrap();
    assert!(acked >= o, "the Ack came before Kafka acknowledged offset {o} ({acked})");
    let _ = k.child.kill();
    let _ = k.child.wait();
    std::thread::sleep(Duration::from_millis(300));
    s.write_all(&framed(&set("2").sbe(2))).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(800))).unwrap();
    let mut b = [0u8; 1];
    assert!(s.read(&mut b).is_err(), "an Ack arrived while the broker was away");
    k = Kaka::start_in(&dir, kport);
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let r = read_reply(&mut s);
    let o2 = r.offset().unwrap();
    assert_eq!((r.corr(), o2), (2, o + 1));
    let acked: u64 = info(&mut a.conn(), "kafka")["kafka_acknowledged_offset"].parse().unwrap();
    assert!(acked >= o2);
    drop(k);
}

/// Interoperability: sbe-tool generates a Java codec from the same schema
/// (scripts/gen-sbe.sh java), tests/sbe-java/Driver.java sends every family with it and checks
/// every Ack and Error, then the state is checked here over RESP. Needs java, javac and mvn
/// (scripts/install-deps.sh installs them); missing tools fail the test, naming them.
#[test]
fn java_codec_interoperates() {
    use std::process::Command;
    let missing: Vec<&str> = ["java", "javac", "mvn"]
        .into_iter()
        .filter(|t| {
            !Command::new("sh").args(["-c", &format!("command -v {t}")]).output().unwrap().status.success()
        })
        .collect();
    assert!(missing.is_empty(), "missing {missing:?}: scripts/install-deps.sh installs a JDK 17 and Maven");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let gen = root.join("scripts/gen-sbe.sh");
    let dir = temp_path("sbe-java");
    let src = dir.join("src");
    let out = Command::new(&gen).arg("java").arg(&src).output().unwrap();
    assert!(out.status.success(), "gen-sbe.sh java: {}", String::from_utf8_lossy(&out.stderr));
    let jar = Command::new(&gen).arg("jar").output().unwrap();
    let jar = String::from_utf8(jar.stdout).unwrap().trim().to_string();
    let classes = dir.join("classes");
    let mut javac = Command::new("javac");
    javac.args(["-nowarn", "-cp", &jar, "-d"]).arg(&classes);
    for f in std::fs::read_dir(src.join("goblin_sbe")).unwrap() {
        javac.arg(f.unwrap().path());
    }
    javac.arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sbe-java/Driver.java"));
    let out = javac.output().unwrap();
    assert!(out.status.success(), "javac: {}", String::from_utf8_lossy(&out.stderr));

    let (a, port) = sbe_server(&[]);
    let cp = format!("{}:{jar}", classes.display());
    // Agrona (inside sbe-all) reaches jdk.internal.misc.Unsafe, which Java 17 must export.
    let out = Command::new("java")
        .args([
            "--add-exports",
            "java.base/jdk.internal.misc=ALL-UNNAMED",
            "-cp",
            &cp,
            "Driver",
            &port.to_string(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "Driver: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    let last: u64 = stdout.lines().find_map(|l| l.strip_prefix("last-offset ")).unwrap().parse().unwrap();
    assert_eq!(last, offset(&a), "the Driver's last Ack offset is INFO's");
    let mut c = a.conn();
    let get =
        |c: &mut redis::Connection, k: &str| -> Option<String> { redis::cmd("GET").arg(k).query(c).unwrap() };
    assert_eq!(get(&mut c, "s"), None);
    assert_eq!(get(&mut c, "n").as_deref(), Some("3"));
    assert_eq!(get(&mut c, "f").as_deref(), Some("1.25"));
    let ttl: i64 = redis::cmd("TTL").arg("n").query(&mut c).unwrap();
    assert_eq!(ttl, -1);
    let h: Vec<String> = redis::cmd("HGETALL").arg("h").query(&mut c).unwrap();
    assert_eq!(h, ["f2", "v2"]);
    let mut set: Vec<String> = redis::cmd("SMEMBERS").arg("set").query(&mut c).unwrap();
    set.sort();
    assert_eq!(set, ["b", "c"]);
    let z: Vec<String> =
        redis::cmd("ZRANGE").arg("z").arg(0).arg(-1).arg("WITHSCORES").query(&mut c).unwrap();
    assert_eq!(z, ["m2", "2.5"]);
    let n: i64 = redis::cmd("EXISTS").arg("l").query(&mut c).unwrap();
    assert_eq!(n, 0);
    let arr: Vec<Option<String>> =
        redis::cmd("ARMGET").arg("a").arg(0).arg(3).arg(4).arg(10).query(&mut c).unwrap();
    assert_eq!(arr, [Some("r".into()), Some("p".into()), Some("q".into()), Some("s".into())]);
    let n: i64 = redis::cmd("SCARD").arg("burst").query(&mut c).unwrap();
    assert_eq!(n, 200);
    let _ = std::fs::remove_dir_all(&dir);
}
