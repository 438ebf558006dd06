//! Wire-level behaviour of the real binary: pipelining, inline commands, protocol errors,
//! oversized declared lengths, binary-safe values, the output limit.

mod common;

use common::{read_reply, read_to_close, send, RedisServer, Server};
use std::io::Write;
use std::time::Duration;

#[test]
fn thousand_pipelined_commands_in_one_write_reply_in_order() {
    let s = Server::start(&[]);
    let mut raw = s.raw();
    let mut req = Vec::new();
    for i in 0..1000 {
        let v = format!("v{i}");
        req.extend_from_slice(format!("*2\r\n$4\r\nECHO\r\n${}\r\n{v}\r\n", v.len()).as_bytes());
    }
    send(&mut raw, &req);
    for i in 0..1000 {
        let v = format!("v{i}");
        assert_eq!(read_reply(&mut raw), format!("${}\r\n{v}\r\n", v.len()).into_bytes(), "reply {i}");
    }
}

#[test]
fn pipeline_through_the_redis_crate_with_writes() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let mut p = redis::pipe();
    for i in 0..500 {
        p.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
    }
    for i in 0..500 {
        p.cmd("GET").arg(format!("k{i}"));
    }
    let got: Vec<i64> = p.query(&mut con).unwrap();
    assert_eq!(got, (0..500).collect::<Vec<i64>>());
}

#[test]
fn requests_split_at_every_byte_are_served() {
    let s = Server::start(&[]);
    let mut raw = s.raw();
    raw.set_nodelay(true).unwrap();
    let req = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
    for b in req.iter() {
        raw.write_all(&[*b]).unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    assert_eq!(read_reply(&mut raw), b"$5\r\nvalue\r\n");
}

#[test]
fn inline_commands_over_raw_tcp() {
    let s = Server::start(&[]);
    let mut raw = s.raw();
    send(&mut raw, b"PING\r\nECHO \"a b\"\nSET ik 'x y'\r\n\r\nGET ik\r\n");
    assert_eq!(read_reply(&mut raw), b"+PONG\r\n");
    assert_eq!(read_reply(&mut raw), b"$3\r\na b\r\n");
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    assert_eq!(read_reply(&mut raw), b"$3\r\nx y\r\n");
}

#[test]
fn protocol_error_closes_only_that_connection() {
    let s = Server::start(&[]);
    let mut good = s.conn();
    let _: () = redis::cmd("SET").arg("keep").arg("me").query(&mut good).unwrap();
    for (bad, msg) in [
        (&b"*1\r\n$4\r\nPING\r\n*x\r\n"[..], &b"-ERR Protocol error: invalid multibulk length\r\n"[..]),
        (b"*1\r\n$4\r\nPING\r\n*1\r\n$x\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
        (b"*1\r\n$4\r\nPING\r\n*1\r\nfoo\r\n", b"-ERR Protocol error: expected '$', got 'f'\r\n"),
        (
            b"*1\r\n$4\r\nPING\r\nECHO \"unbalanced\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
    ] {
        let mut raw = s.raw();
        send(&mut raw, bad);
        let (got, closed) = read_to_close(&mut raw);
        let mut want = b"+PONG\r\n".to_vec();
        want.extend_from_slice(msg);
        assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want));
        assert!(closed, "connection must be closed after a protocol error");
    }
    let v: String = redis::cmd("GET").arg("keep").query(&mut good).unwrap();
    assert_eq!(v, "me");
}

#[test]
fn huge_declared_lengths_are_rejected_before_allocating() {
    let s = Server::start(&[]);
    let rss_before = s.rss();
    // A multibulk count and a bulk length far beyond the limits: refused on sight.
    let mut raw = s.raw();
    send(&mut raw, b"*1\r\n$999999999999\r\n");
    let (got, closed) = read_to_close(&mut raw);
    assert_eq!(got, b"-ERR Protocol error: invalid bulk length\r\n");
    assert!(closed);
    let mut raw = s.raw();
    send(&mut raw, b"*99999999999\r\n");
    let (got, closed) = read_to_close(&mut raw);
    assert_eq!(got, b"-ERR Protocol error: invalid multibulk length\r\n");
    assert!(closed);
    // Within the limits but never sent: the server must not reserve the declared size.
    let mut held = Vec::new();
    for _ in 0..8 {
        let mut raw = s.raw();
        send(&mut raw, b"*1048576\r\n$536870912\r\nabc");
        held.push(raw);
    }
    let mut con = s.conn();
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    let grown = s.rss().saturating_sub(rss_before);
    assert!(grown < 64 << 20, "RSS grew by {grown} bytes for declared-but-unsent requests");
}

#[test]
fn proto_max_bulk_len_flag_is_enforced() {
    let s = Server::start(&["--proto-max-bulk-len", "2048"]);
    let mut raw = s.raw();
    send(&mut raw, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2049\r\n");
    let (got, _) = read_to_close(&mut raw);
    assert_eq!(got, b"-ERR Protocol error: invalid bulk length\r\n");
    let mut con = s.conn();
    let v = "x".repeat(2048);
    let _: () = redis::cmd("SET").arg("k").arg(&v).query(&mut con).unwrap();
    let got: String = redis::cmd("GET").arg("k").query(&mut con).unwrap();
    assert_eq!(got, v);
}

#[test]
fn binary_keys_and_values_with_nul_and_crlf() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let key: &[u8] = b"k\0\r\n\xff";
    let val: &[u8] = b"\r\n\0*1\r\n$3\r\nbad\r\n\xfe";
    let _: () = redis::cmd("SET").arg(key).arg(val).query(&mut con).unwrap();
    let got: Vec<u8> = redis::cmd("GET").arg(key).query(&mut con).unwrap();
    assert_eq!(got, val);
    // The stream stays in sync afterwards.
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    let missing: Option<Vec<u8>> = redis::cmd("GET").arg(&b"k\0"[..]).query(&mut con).unwrap();
    assert_eq!(missing, None);
}

#[test]
fn large_values_round_trip() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let val: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let _: () = redis::cmd("SET").arg("big").arg(&val).query(&mut con).unwrap();
    let got: Vec<u8> = redis::cmd("GET").arg("big").query(&mut con).unwrap();
    assert_eq!(got, val);
}

/// With the default limits a client that pipelines more replies than it reads (ioredis's
/// auto-pipelining of 600 GETs of 1 MiB) is slowed down, not disconnected: once about 64 MiB
/// of its replies wait unread, its input waits in the socket, and it resumes as it reads. Its
/// buffer stays bounded meanwhile, and every reply arrives, in order.
#[test]
fn a_client_pipelining_more_than_it_reads_waits_instead_of_being_cut_off() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let val = "v".repeat(1024 * 1024);
    let _: () = redis::cmd("SET").arg("big").arg(&val).query(&mut con).unwrap();
    const N: usize = 400; // 400 MiB of replies, over the default 256 MiB hard limit
    let reader = s.raw();
    let mut writer = reader.try_clone().unwrap();
    let sent = std::thread::spawn(move || {
        let one = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n";
        let batch: Vec<u8> = one.iter().copied().cycle().take(one.len() * N).collect();
        writer.write_all(&batch).is_ok()
    });
    // While the client reads nothing, its unsent replies stop near the threshold.
    std::thread::sleep(Duration::from_millis(1500));
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
    let omem: u64 = clients
        .lines()
        .filter(|l| !l.contains("cmd=client|list"))
        .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("omem=")))
        .map(|v| v.parse().unwrap())
        .max()
        .expect("the pipelining client is listed");
    assert!(omem <= 70 * 1024 * 1024, "{omem} bytes of replies wait: {clients}");
    // Reading everything: N complete replies, then the connection is still usable.
    reader.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut r = std::io::BufReader::with_capacity(1 << 20, reader.try_clone().unwrap());
    for i in 0..N {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut r, &mut line).unwrap();
        assert_eq!(line, format!("${}\r\n", val.len()), "reply {i}");
        let mut body = vec![0u8; val.len() + 2];
        std::io::Read::read_exact(&mut r, &mut body).unwrap();
        assert!(body[..val.len()].iter().all(|&b| b == b'v'));
    }
    assert!(sent.join().unwrap(), "the whole pipeline was written");
    let info: String = redis::cmd("INFO").arg("stats").query(&mut con).unwrap();
    assert!(info.contains("client_output_buffer_limit_disconnections:0\r\n"), "{info}");
    let mut w = reader;
    w.write_all(b"PING\r\n").unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut r, &mut line).unwrap();
    assert_eq!(line, "+PONG\r\n");
}

#[test]
fn client_that_never_reads_is_disconnected_at_the_output_limit() {
    // The limit set at runtime, in Redis's form (`--client-output-limit` sets it at startup:
    // tests/pubsub.rs).
    let s = Server::start(&[]);
    let mut con = s.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("normal 1mb 0 0 pubsub 1mb 0 0")
        .query(&mut con)
        .unwrap();
    let got: Vec<String> =
        redis::cmd("CONFIG").arg("GET").arg("client-output-buffer-limit").query(&mut con).unwrap();
    assert_eq!(got[1], "normal 1048576 0 0 slave 268435456 67108864 60 pubsub 1048576 0 0");
    let val = "v".repeat(64 * 1024);
    let _: () = redis::cmd("SET").arg("big").arg(&val).query(&mut con).unwrap();
    // Ask for ~64 MiB of replies and never read them.
    let mut hog = s.raw();
    let one = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n";
    let batch: Vec<u8> = one.iter().copied().cycle().take(one.len() * 1000).collect();
    hog.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    // The server may close us mid-write: that is the point, so a write error is fine.
    let _ = hog.write_all(&batch);
    // The server closes the hog; a well-behaved client is unaffected meanwhile.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO").arg("stats").query(&mut con).unwrap();
        if info.contains("client_output_buffer_limit_disconnections:1") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "hog was not disconnected:\n{info}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let got: String = redis::cmd("GET").arg("big").query(&mut con).unwrap();
    assert_eq!(got.len(), val.len());
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
    assert_eq!(clients.lines().count(), 1, "{clients}");
    // The hog's socket is closed: reading drains whatever was sent, then EOF or reset.
    hog.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let (_, closed) = read_to_close(&mut hog);
    assert!(closed);
}

#[test]
fn unknown_command_and_wrong_arity_errors() {
    let s = Server::start(&[]);
    let mut raw = s.raw();
    send(&mut raw, b"FOO a b\r\nGET\r\nGET a b\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR wrong number of arguments for 'get' command\r\n");
    assert_eq!(read_reply(&mut raw), b"-ERR wrong number of arguments for 'get' command\r\n");
}

#[test]
fn protocol_errors_match_redis_server_byte_for_byte() {
    let g = Server::start(&[]);
    let r = RedisServer::start();
    for bad in [
        &b"*x\r\n"[..],
        b"*1\r\n$x\r\n",
        b"*1\r\n$-1\r\n",
        b"*2\r\n$4\r\nECHO\r\n:1\r\n",
        b"*-5\r\nPING\r\n*3000000000\r\n",
        b"ECHO \"a\"b\r\n",
        b"ECHO 'x\r\n",
        b"*1\r\n$600000000\r\n",
    ] {
        let mut a = g.raw();
        send(&mut a, bad);
        let mut b = r.raw();
        send(&mut b, bad);
        let (ga, _) = read_to_close(&mut a);
        let (rb, _) = read_to_close(&mut b);
        assert_eq!(
            String::from_utf8_lossy(&ga),
            String::from_utf8_lossy(&rb),
            "input {:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

/// Random garbage (and random mutations of valid requests) from many connections: the server
/// answers or closes each of them, never crashes, and a well-behaved client's data survives.
#[test]
fn garbage_input_never_hurts_the_server() {
    use rand::{Rng, SeedableRng};
    let s = Server::start(&["--loglevel", "warn"]);
    let mut good = s.conn();
    let _: () = redis::cmd("SET").arg("precious").arg("data").query(&mut good).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let valid: &[&[u8]] = &[
        b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"*2\r\n$3\r\nGET\r\n$8\r\nprecious\r\n",
        b"PING\r\n",
        b"*1\r\n$4\r\nINFO\r\n",
        b"CLIENT LIST\r\n",
        b"*2\r\n$5\r\nBLPOP\r\n$1\r\n0\r\n",
    ];
    for round in 0..100 {
        let mut raw = s.raw();
        raw.set_read_timeout(Some(Duration::from_millis(40))).unwrap();
        let mut bytes: Vec<u8> = if round % 2 == 0 {
            (0..rng.gen_range(1..300)).map(|_| rng.gen()).collect()
        } else {
            let mut v = valid[rng.gen_range(0..valid.len())].to_vec();
            for _ in 0..rng.gen_range(1..4) {
                let i = rng.gen_range(0..v.len());
                v[i] = rng.gen();
            }
            v
        };
        // Never start with a destructive command the fuzzer might assemble by chance.
        if bytes.windows(5).any(|w| w.eq_ignore_ascii_case(b"FLUSH") || w.eq_ignore_ascii_case(b"SHUTD")) {
            bytes.clear();
            bytes.extend_from_slice(b"PING\r\n");
        }
        let _ = raw.write_all(&bytes);
        let _ = read_to_close(&mut raw);
    }
    let v: String = redis::cmd("GET").arg("precious").query(&mut good).unwrap();
    assert_eq!(v, "data");
    let pong: String = redis::cmd("PING").query(&mut good).unwrap();
    assert_eq!(pong, "PONG");
    assert!(!s.log().contains("panicked"), "{}", s.log());
}

/// Arguments of 32 KiB and more are read straight into the connection's buffer, sized once
/// for them: over TCP and a Unix socket, sent in uneven pieces with pauses, several in one
/// request, one followed by more arguments and by a pipelined request in the same write, and
/// one cut off by the client closing. Every byte must arrive where it belongs.
#[test]
fn big_arguments_arrive_intact_in_pieces() {
    use std::io::Read;
    use std::os::unix::net::UnixStream;
    let sock = common::temp_path("big-args.sock");
    let sock_s = sock.to_str().unwrap().to_string();
    let s = Server::start(&["--unixsocket", &sock_s]);
    let value = |n: usize, seed: u32| -> Vec<u8> {
        (0..n as u32).map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8).collect()
    };
    let (a, b, c) = (value(3 << 20, 1), value(40_000, 2), value(1 << 16, 3));
    let bulk = |out: &mut Vec<u8>, v: &[u8]| {
        out.extend_from_slice(format!("${}\r\n", v.len()).as_bytes());
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    };
    let mut req = b"*5\r\n$4\r\nMSET\r\n$2\r\nka\r\n".to_vec();
    bulk(&mut req, &a);
    req.extend_from_slice(b"$2\r\nkb\r\n");
    bulk(&mut req, &b);
    req.extend_from_slice(b"*5\r\n$3\r\nSET\r\n$2\r\nkc\r\n");
    bulk(&mut req, &c);
    req.extend_from_slice(b"$2\r\nEX\r\n$4\r\n1000\r\n*2\r\n$3\r\nTTL\r\n$2\r\nkc\r\n");
    let mut expect_get = Vec::new();
    bulk(&mut expect_get, &a);
    fn exchange(stream: &mut (impl Read + Write), req: &[u8], get_reply: &[u8]) {
        // Uneven pieces, a pause now and then: reads stop short inside every argument.
        let mut at = 0;
        let mut step = 1usize;
        while at < req.len() {
            let end = (at + step).min(req.len());
            stream.write_all(&req[at..end]).unwrap();
            at = end;
            step = (step * 7 + 13) % 300_000 + 1;
            if step.is_multiple_of(5) {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        assert_eq!(read_reply(stream), b"+OK\r\n");
        assert_eq!(read_reply(stream), b"+OK\r\n");
        assert_eq!(read_reply(stream), b":1000\r\n");
        stream.write_all(b"*2\r\n$3\r\nGET\r\n$2\r\nka\r\n").unwrap();
        assert!(read_reply(stream) == get_reply, "GET ka after MSET differs");
    }
    let mut tcp = s.raw();
    exchange(&mut tcp, &req, &expect_get);
    let mut unix = UnixStream::connect(&sock).unwrap();
    unix.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.cli(&["FLUSHALL"]);
    exchange(&mut unix, &req, &expect_get);
    let mut con = s.conn();
    let got: Vec<Vec<u8>> = redis::cmd("MGET").arg("kb").arg("kc").query(&mut con).unwrap();
    assert!(got[0] == b && got[1] == c, "MGET kb kc differ");
    // A big argument the client gives up on halfway: the connection closes, nothing stored.
    let mut cut = s.raw();
    let mut part = b"*3\r\n$3\r\nSET\r\n$3\r\ncut\r\n$1000000\r\n".to_vec();
    part.extend_from_slice(&a[..500_000]);
    send(&mut cut, &part);
    drop(cut);
    let exists: i64 = redis::cmd("EXISTS").arg("cut").query(&mut con).unwrap();
    assert_eq!(exists, 0);
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
}

/// Before it logs in, a client may send at most 10 arguments of at most 16 KiB: a longer
/// header is answered at once with Redis's error and the connection closed (nothing waits for
/// the body); after AUTH the same requests are fine. Compared with redis-server 7.0.15.
#[test]
fn unauthenticated_requests_are_bounded_as_redis_bounds_them() {
    let g = Server::start(&["--requirepass", "pw"]);
    let r = RedisServer::start_with(&["--requirepass", "pw"]);
    let session = |mut raw: std::net::TcpStream, header: &[u8]| {
        raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        send(&mut raw, header);
        let reply = String::from_utf8_lossy(&read_reply(&mut raw)).into_owned();
        let (_, closed) = read_to_close(&mut raw);
        (reply, closed)
    };
    for header in [&b"*100\r\n"[..], b"*1\r\n$100000000\r\n"] {
        let ours = session(g.raw(), header);
        assert_eq!(ours, session(r.raw(), header), "{header:?}");
        assert!(ours.0.starts_with("-ERR Protocol error: unauthenticated") && ours.1, "{ours:?}");
    }
    // Logged in (in the same pipeline): eleven arguments and a 20 KB value are fine.
    let big = "v".repeat(20_000);
    let mut req = b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n".to_vec();
    req.extend_from_slice(format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n{big}\r\n", big.len()).as_bytes());
    req.extend_from_slice(b"*11\r\n$3\r\nDEL\r\n");
    for i in 0..10 {
        req.extend_from_slice(format!("$2\r\nk{i}\r\n").as_bytes());
    }
    for s in [g.raw(), r.raw()] {
        let mut s = s;
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        send(&mut s, &req);
        assert_eq!(read_reply(&mut s), b"+OK\r\n");
        assert_eq!(read_reply(&mut s), b"+OK\r\n");
        assert_eq!(read_reply(&mut s), b":0\r\n");
    }
}
