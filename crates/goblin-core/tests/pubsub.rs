//! Pub/sub against the real binary: SUBSCRIBE / PSUBSCRIBE / SSUBSCRIBE and their UNSUBSCRIBE
//! forms, PUBLISH receiver counts, PUBSUB introspection, the RESP2 subscribed context, RESP3
//! pushes, RESET and disconnects clearing subscriptions, the output limit on a subscriber that
//! does not read, and a scripted session compared byte for byte with redis-server.

mod common;

use common::{read_reply, send, RedisServer, Server};
use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Sends one command, its arguments split on spaces, as a RESP array (not inline: the large
/// payloads here are past the inline limit, and `\` must reach the server as it is).
fn cmd(s: &mut TcpStream, line: &str) {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    let mut req = Vec::new();
    resp::reply::bulk_array(&mut req, &args);
    send(s, &req);
}

/// Sends one command and returns its single reply.
fn call(s: &mut TcpStream, line: &str) -> Vec<u8> {
    cmd(s, line);
    read_reply(s)
}

/// Reads `n` replies and concatenates them.
fn replies(s: &mut TcpStream, n: usize) -> Vec<u8> {
    (0..n).flat_map(|_| read_reply(s)).collect()
}

/// CONFIG SET of one setting whose value holds spaces.
fn config_set(s: &mut TcpStream, name: &str, value: &str) -> Vec<u8> {
    let mut req = Vec::new();
    resp::reply::bulk_array(&mut req, &[b"CONFIG".as_slice(), b"SET", name.as_bytes(), value.as_bytes()]);
    send(s, &req);
    read_reply(s)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Switches a raw connection to RESP3 (HELLO's reply is dropped).
fn resp3(s: &mut TcpStream) {
    let hello = call(s, "HELLO 3");
    assert!(hello.starts_with(b"%7\r\n"), "{}", text(&hello));
}

/// Polls `f` until it returns true (a close is noticed within a loop turn); the 60 s bound
/// only keeps a broken server from hanging the suite.
fn eventually(mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "hang guard: condition never reached");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn redis_crate_subscriber_gets_channel_and_pattern_messages() {
    let s = Server::start(&[]);
    let mut sub = s.conn();
    let mut publisher = s.conn();
    let mut ps = sub.as_pubsub();
    ps.subscribe("news").unwrap();
    ps.psubscribe("n*").unwrap();
    ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let n: i64 = redis::cmd("PUBLISH").arg("news").arg("hello").query(&mut publisher).unwrap();
    assert_eq!(n, 2, "one channel subscriber and one pattern subscriber");
    let m = ps.get_message().unwrap();
    assert_eq!((m.get_channel_name(), m.get_payload::<String>().unwrap()), ("news", "hello".into()));
    assert!(m.get_pattern::<Option<String>>().unwrap().is_none());
    let m = ps.get_message().unwrap();
    assert_eq!(m.get_channel_name(), "news");
    assert_eq!(m.get_pattern::<String>().unwrap(), "n*");
    ps.unsubscribe("news").unwrap();
    ps.punsubscribe("n*").unwrap();
    let n: i64 = redis::cmd("PUBLISH").arg("news").arg("again").query(&mut publisher).unwrap();
    assert_eq!(n, 0);
}

#[test]
fn resp2_subscribe_counts_and_the_subscribed_context() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    // Unsubscribing with nothing subscribed answers one confirmation with a null name.
    assert_eq!(call(&mut a, "UNSUBSCRIBE"), b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n");
    cmd(&mut a, "SUBSCRIBE a b a");
    assert_eq!(
        text(&replies(&mut a, 3)),
        "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n\
         *3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:2\r\n"
    );
    // Patterns count with channels; shard channels count apart.
    assert_eq!(text(&call(&mut a, "PSUBSCRIBE h?llo")), "*3\r\n$10\r\npsubscribe\r\n$5\r\nh?llo\r\n:3\r\n");
    assert_eq!(text(&call(&mut a, "SSUBSCRIBE s")), "*3\r\n$10\r\nssubscribe\r\n$1\r\ns\r\n:1\r\n");
    // Only the pub/sub commands, PING, QUIT and RESET run; PING answers as an array.
    let refused = |c: &str| {
        format!(
            "-ERR Can't execute '{c}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
        )
    };
    assert_eq!(text(&call(&mut a, "GET x")), refused("get"));
    assert_eq!(text(&call(&mut a, "CLIENT LIST")), refused("client|list"));
    assert_eq!(text(&call(&mut a, "MULTI")), refused("multi"));
    assert_eq!(text(&call(&mut a, "PUBLISH a x")), refused("publish"));
    assert_eq!(text(&call(&mut a, "PING")), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    assert_eq!(text(&call(&mut a, "PING hi")), "*2\r\n$4\r\npong\r\n$2\r\nhi\r\n");
    assert!(text(&call(&mut a, "PING a b")).starts_with("-ERR wrong number of arguments for 'ping'"));
    // UNSUBSCRIBE of a channel not subscribed still confirms it, with the count.
    assert_eq!(text(&call(&mut a, "UNSUBSCRIBE zz")), "*3\r\n$11\r\nunsubscribe\r\n$2\r\nzz\r\n:3\r\n");
    cmd(&mut a, "UNSUBSCRIBE");
    let both = text(&replies(&mut a, 2));
    assert!(
        both.contains("$1\r\na\r\n") && both.contains("$1\r\nb\r\n") && both.ends_with(":1\r\n"),
        "{both}"
    );
    assert_eq!(text(&call(&mut a, "PUNSUBSCRIBE")), "*3\r\n$12\r\npunsubscribe\r\n$5\r\nh?llo\r\n:0\r\n");
    // A shard subscription alone keeps the context.
    assert_eq!(text(&call(&mut a, "GET x")), refused("get"));
    assert_eq!(text(&call(&mut a, "SUNSUBSCRIBE")), "*3\r\n$12\r\nsunsubscribe\r\n$1\r\ns\r\n:0\r\n");
    assert_eq!(call(&mut a, "GET x"), b"$-1\r\n");
    assert_eq!(call(&mut a, "PING"), b"+PONG\r\n");
}

#[test]
fn resp3_pushes_allow_every_command_and_self_delivery() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    resp3(&mut a);
    assert_eq!(text(&call(&mut a, "SUBSCRIBE ch")), ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n");
    assert_eq!(text(&call(&mut a, "PSUBSCRIBE *")), ">3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:2\r\n");
    assert_eq!(call(&mut a, "GET x"), b"_\r\n");
    assert_eq!(call(&mut a, "PING"), b"+PONG\r\n");
    // Publishing to itself: the messages follow PUBLISH's own reply (Redis 7.2+).
    cmd(&mut a, "PUBLISH ch self");
    assert_eq!(
        text(&replies(&mut a, 3)),
        ":2\r\n>3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$4\r\nself\r\n\
         >4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$2\r\nch\r\n$4\r\nself\r\n"
    );
    // Another RESP3 client's publication arrives as pushes.
    let mut b = s.raw();
    assert_eq!(call(&mut b, "PUBLISH other x"), b":1\r\n");
    assert_eq!(text(&read_reply(&mut a)), ">4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$5\r\nother\r\n$1\r\nx\r\n");
    cmd(&mut a, "UNSUBSCRIBE");
    cmd(&mut a, "PUNSUBSCRIBE");
    assert_eq!(
        text(&replies(&mut a, 2)),
        ">3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:1\r\n>3\r\n$12\r\npunsubscribe\r\n$1\r\n*\r\n:0\r\n"
    );
    assert_eq!(text(&call(&mut a, "UNSUBSCRIBE")), ">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n");
}

/// A RESP3 subscriber publishing to itself inside a transaction or a script gets its messages
/// after the whole reply (EXEC's array, the script's value), then its invalidations, byte for
/// byte as redis-server 8.2 sends them.
#[test]
fn messages_to_self_follow_the_whole_reply_as_redis8() {
    let ours = Server::start(&[]);
    let theirs = RedisServer::start8();
    let mut seen = Vec::new();
    for port in [ours.port, theirs.port] {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        resp3(&mut s);
        call(&mut s, "SUBSCRIBE foo");
        call(&mut s, "CLIENT TRACKING on");
        call(&mut s, "GET k");
        for line in [
            "MULTI",
            "PING abc",
            "PUBLISH foo bar",
            "SET k 2",
            "PUBLISH foo vaz",
            "PING def",
            "EXEC",
            "EVAL redis.call('publish','foo','in-script');return'bla' 0",
            "PUBLISH foo plain",
            "PING end",
        ] {
            cmd(&mut s, line);
        }
        let mut got = Vec::new();
        loop {
            let r = read_reply(&mut s);
            let done = r.windows(3).any(|w| w == b"end");
            got.extend_from_slice(&r);
            if done {
                break;
            }
        }
        seen.push(text(&got));
    }
    assert_eq!(seen[0], seen[1], "goblin-core, then redis-server 8.2");
    assert!(seen[0].contains("$3\r\ndef\r\n>3\r\n$7\r\nmessage"), "{}", seen[0]);
}

#[test]
fn publish_counts_and_pubsub_introspection() {
    let s = Server::start(&[]);
    let (mut a, mut b, mut p) = (s.raw(), s.raw(), s.raw());
    cmd(&mut a, "SUBSCRIBE news sport");
    replies(&mut a, 2);
    call(&mut b, "SUBSCRIBE news");
    call(&mut b, "PSUBSCRIBE n* [ns]ews");
    read_reply(&mut b);
    // news: two channel subscribers, then b's two matching patterns (one message per pattern).
    assert_eq!(call(&mut p, "PUBLISH news hi"), b":4\r\n");
    assert_eq!(text(&read_reply(&mut a)), "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
    let got = text(&replies(&mut b, 3));
    assert!(got.starts_with("*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n"), "{got}");
    assert!(got.contains("$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n"), "{got}");
    assert!(got.contains("$8\r\npmessage\r\n$7\r\n[ns]ews\r\n$4\r\nnews\r\n$2\r\nhi\r\n"), "{got}");
    assert_eq!(call(&mut p, "PUBLISH sport x"), b":1\r\n");
    assert_eq!(text(&read_reply(&mut a)), "*3\r\n$7\r\nmessage\r\n$5\r\nsport\r\n$1\r\nx\r\n");
    assert_eq!(call(&mut p, "PUBLISH nothing x"), b":1\r\n", "n* matches");
    assert_eq!(call(&mut p, "PUBLISH zzz x"), b":0\r\n");
    assert_eq!(
        text(&call(&mut p, "PUBSUB NUMSUB news sport zzz")),
        "*6\r\n$4\r\nnews\r\n:2\r\n$5\r\nsport\r\n:1\r\n$3\r\nzzz\r\n:0\r\n"
    );
    assert_eq!(call(&mut p, "PUBSUB NUMPAT"), b":2\r\n");
    assert_eq!(text(&call(&mut p, "PUBSUB CHANNELS s*")), "*1\r\n$5\r\nsport\r\n");
    let all = text(&call(&mut p, "PUBSUB CHANNELS"));
    assert!(all.starts_with("*2\r\n") && all.contains("news") && all.contains("sport"), "{all}");
    // Shard channels: their own namespace.
    call(&mut a, "SSUBSCRIBE news");
    assert_eq!(call(&mut p, "SPUBLISH news m"), b":1\r\n");
    assert_eq!(text(&read_reply(&mut a)), "*3\r\n$8\r\nsmessage\r\n$4\r\nnews\r\n$1\r\nm\r\n");
    assert_eq!(text(&call(&mut p, "PUBSUB SHARDCHANNELS")), "*1\r\n$4\r\nnews\r\n");
    assert_eq!(
        text(&call(&mut p, "PUBSUB SHARDNUMSUB news x")),
        "*4\r\n$4\r\nnews\r\n:1\r\n$1\r\nx\r\n:0\r\n"
    );
    // INFO and CLIENT LIST show the subscriptions.
    let info = text(&call(&mut p, "INFO stats"));
    for f in ["pubsub_channels:2\r\n", "pubsub_patterns:2\r\n", "pubsubshard_channels:1\r\n"] {
        assert!(info.contains(f), "{f} in {info}");
    }
    let list = text(&call(&mut p, "CLIENT LIST"));
    assert!(list.contains("flags=P db=0 sub=2 psub=0 ssub=1 "), "{list}");
    assert!(list.contains("flags=P db=0 sub=1 psub=2 ssub=0 "), "{list}");
    let pubsub_only = text(&call(&mut p, "CLIENT LIST TYPE pubsub"));
    assert_eq!(pubsub_only.matches("flags=P").count(), 2, "{pubsub_only}");
    assert!(!text(&call(&mut p, "CLIENT LIST TYPE normal")).contains("flags=P"));
    // Errors as Redis words them.
    assert_eq!(text(&call(&mut p, "PUBSUB NOPE")), "-ERR unknown subcommand 'NOPE'. Try PUBSUB HELP.\r\n");
    assert_eq!(
        text(&call(&mut p, "PUBSUB CHANNELS a b")),
        "-ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB HELP.\r\n"
    );
    assert_eq!(
        text(&call(&mut p, "PUBSUB NUMPAT x")),
        "-ERR wrong number of arguments for 'pubsub|numpat' command\r\n"
    );
}

#[test]
fn reset_and_disconnect_drop_subscriptions() {
    let s = Server::start(&[]);
    let (mut a, mut p) = (s.raw(), s.raw());
    call(&mut a, "SUBSCRIBE c1");
    call(&mut a, "PSUBSCRIBE p*");
    assert_eq!(call(&mut a, "RESET"), b"+RESET\r\n", "RESET is silent about the subscriptions");
    assert_eq!(call(&mut a, "GET x"), b"$-1\r\n", "RESET leaves the subscribed context");
    assert_eq!(text(&call(&mut p, "PUBSUB NUMSUB c1")), "*2\r\n$2\r\nc1\r\n:0\r\n");
    assert_eq!(call(&mut p, "PUBSUB NUMPAT"), b":0\r\n");
    assert_eq!(call(&mut p, "PUBLISH c1 x"), b":0\r\n");

    // A subscriber that disconnects is removed; its slot's next owner is not mistaken for it.
    let mut gone = s.raw();
    call(&mut gone, "SUBSCRIBE c2");
    call(&mut gone, "PSUBSCRIBE c*");
    assert_eq!(call(&mut p, "PUBLISH c2 x"), b":2\r\n");
    drop(gone);
    eventually(|| call(&mut p, "PUBSUB NUMSUB c2") == b"*2\r\n$2\r\nc2\r\n:0\r\n");
    assert_eq!(call(&mut p, "PUBSUB NUMPAT"), b":0\r\n");
    let mut next = s.raw();
    assert_eq!(call(&mut next, "PING"), b"+PONG\r\n");
    assert_eq!(call(&mut p, "PUBLISH c2 x"), b":0\r\n");
    assert_eq!(call(&mut next, "PING"), b"+PONG\r\n", "no stray message reached the new client");
}

/// A subscriber that never reads is closed once its unsent output passes the pub/sub class's
/// hard limit (`client-output-buffer-limit pubsub 1mb 0 0`): memory stays bounded, the
/// publisher goes on.
#[test]
fn a_subscriber_that_does_not_read_is_closed_at_the_output_limit() {
    let s = Server::start(&[]);
    let (mut slow, mut p) = (s.raw(), s.raw());
    assert_eq!(config_set(&mut p, "client-output-buffer-limit", "pubsub 1mb 0 0"), b"+OK\r\n");
    call(&mut slow, "SUBSCRIBE firehose");
    let payload = "x".repeat(64 * 1024);
    let mut sent = 0;
    // Kernel socket buffers take some megabytes first; then the output buffer passes 1 MiB.
    loop {
        let n = call(&mut p, &format!("PUBLISH firehose {payload}"));
        if n == b":0\r\n" {
            break;
        }
        assert_eq!(n, b":1\r\n");
        sent += 1;
        assert!(sent < 4000, "the slow subscriber was never disconnected");
    }
    let info = text(&call(&mut p, "INFO stats"));
    assert!(info.contains("client_output_buffer_limit_disconnections:1\r\n"), "{info}");
    assert!(info.contains("pubsub_channels:0\r\n"), "{info}");
    // The subscriber's socket ends (after whatever the kernel had buffered).
    slow.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match slow.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the slow subscriber was not closed: {e}"),
        }
    }
}

/// The soft limit, on goblin-core and redis-server 8.2 alike: a subscriber that stays past
/// `pubsub 0 256kb 1` (no hard limit) for more than a second is closed, while publishing goes
/// on; a normal client is not in that class and keeps its connection.
#[test]
fn a_subscriber_past_the_soft_limit_is_closed_after_its_seconds() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    for (name, port) in [("goblin-core", g.port), ("redis-server 8.2", r.port)] {
        let connect = || {
            let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s
        };
        let (mut slow, mut p, mut idle) = (connect(), connect(), connect());
        assert_eq!(config_set(&mut p, "client-output-buffer-limit", "pubsub 0 256kb 1"), b"+OK\r\n");
        call(&mut slow, "SUBSCRIBE prices");
        let payload = "x".repeat(16 * 1024);
        // Past the socket buffers and the soft limit, then over a second more (a bounded
        // number of 5 ms rounds, so that a subscriber never closed fails the test).
        let mut rounds = 0;
        loop {
            let n = call(&mut p, &format!("PUBLISH prices {payload}"));
            if n == b":0\r\n" {
                break;
            }
            assert_eq!(n, b":1\r\n", "{name}");
            rounds += 1;
            assert!(rounds < 6000, "{name}: the subscriber was never closed");
            std::thread::sleep(Duration::from_millis(5));
        }
        let info = text(&call(&mut p, "INFO stats"));
        assert!(info.contains("client_output_buffer_limit_disconnections:1\r\n"), "{name}: {info}");
        assert_eq!(call(&mut idle, "PING"), b"+PONG\r\n", "{name}");
        let limits = text(&call(&mut p, "CONFIG GET client-output-buffer-limit"));
        assert!(limits.contains("pubsub 0 262144 1"), "{name}: {limits}");
        // Past the soft limit and then no more traffic: closed all the same once the seconds
        // pass (checked by the server's timer, not only when output is added).
        let mut quiet = connect();
        assert_eq!(call(&mut quiet, "CLIENT SETNAME quiet"), b"+OK\r\n");
        call(&mut quiet, "SUBSCRIBE prices");
        let omem = |p: &mut TcpStream| -> Option<u64> {
            let list = text(&call(p, "CLIENT LIST"));
            let line = list.lines().find(|l| l.contains("name=quiet "))?.to_string();
            line.split(' ').find_map(|f| f.strip_prefix("omem=")).map(|v| v.parse().unwrap())
        };
        let mut published = 0;
        while omem(&mut p).is_some_and(|m| m < 300 * 1024) {
            assert_eq!(call(&mut p, &format!("PUBLISH prices {payload}")), b":1\r\n", "{name}");
            published += 1;
            assert!(published < 4000, "{name}: 64 MB published and the output never grew");
        }
        // No more traffic: the subscriber must go (at most 200 looks, 50 ms apart).
        let mut looks = 0;
        while omem(&mut p).is_some() {
            looks += 1;
            assert!(looks < 200, "{name}: the quiet subscriber stayed");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// MULTI/EXEC may SUBSCRIBE (the client is then subscribed), but not SSUBSCRIBE, as in 7.0.
#[test]
fn subscribe_inside_exec() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    cmd(&mut a, "MULTI");
    cmd(&mut a, "SUBSCRIBE m");
    cmd(&mut a, "SSUBSCRIBE n");
    cmd(&mut a, "EXEC");
    assert_eq!(
        text(&replies(&mut a, 4)),
        "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nm\r\n:1\r\n\
         -ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client\r\n"
    );
    assert_eq!(text(&call(&mut a, "PING")), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
}

/// The scripted session run against one server: per step, what each connection received.
fn session(port: u16, proto3: bool) -> Vec<String> {
    let connect = || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        if proto3 {
            resp3(&mut s);
        }
        s
    };
    let mut conns = [connect(), connect(), connect()];
    // (connection, command). Avoided on purpose: UNSUBSCRIBE-all with several channels and a
    // channel matched by several patterns of one client (both orders are hash-table order in
    // Redis), and replies naming the client id or version.
    let script: &[(usize, &str)] = &[
        (0, "UNSUBSCRIBE"),
        (0, "PUNSUBSCRIBE"),
        (0, "SUBSCRIBE news sport news"),
        (0, "PSUBSCRIBE n*"),
        (2, "PSUBSCRIBE s[pq]ort h\\?llo"),
        (1, "PUBLISH news hi"),
        (1, "PUBLISH sport go"),
        (1, "PUBLISH h?llo x"),
        (1, "PUBLISH hello x"),
        (1, "PUBSUB NUMSUB news sport none"),
        (1, "PUBSUB NUMPAT"),
        (1, "PUBSUB CHANNELS n*"),
        (0, "GET k"),
        (0, "PING"),
        (0, "PING hello"),
        (0, "UNSUBSCRIBE sport"),
        (0, "PUNSUBSCRIBE"),
        (0, "UNSUBSCRIBE"),
        (0, "UNSUBSCRIBE"),
        (0, "PING"),
        (2, "SSUBSCRIBE shard1"),
        (1, "SPUBLISH shard1 m"),
        (1, "PUBSUB SHARDNUMSUB shard1"),
        (1, "PUBSUB SHARDCHANNELS"),
        (2, "GET k"),
        (2, "SUNSUBSCRIBE shard1 other"),
        (2, "PUNSUBSCRIBE s[pq]ort"),
        (2, "RESET"),
        (1, "PUBSUB NUMPAT"),
        (1, "PUBLISH h?llo y"),
        (1, "PUBSUB HELP"),
        (1, "PUBSUB NOPE"),
        (1, "PUBSUB CHANNELS a b"),
        (1, "SUBSCRIBE"),
        (2, "SUBSCRIBE x"),
        (2, "MULTI"),
        (2, "CLIENT LIST"),
        (1, "PUBLISH x bye"),
    ];
    let mut log = Vec::new();
    for (i, &(c, line)) in script.iter().enumerate() {
        cmd(&mut conns[c], line);
        // Sync every connection with a PING that names the step: everything before its reply
        // (replies and messages alike) belongs to this step.
        let mark = format!("sync{i}");
        for (k, s) in conns.iter_mut().enumerate() {
            cmd(s, &format!("PING {mark}"));
            let mut got = Vec::new();
            loop {
                let r = read_reply(s);
                let done = r.windows(mark.len()).any(|w| w == mark.as_bytes());
                got.extend_from_slice(&r);
                if done {
                    break;
                }
            }
            log.push(format!("step {i} `{line}` conn {k}: {}", text(&got)));
        }
    }
    log
}

#[test]
fn scripted_session_matches_redis_server_byte_for_byte() {
    let ours = Server::start(&[]);
    let theirs = RedisServer::start8();
    for proto3 in [false, true] {
        let (o, t) = (session(ours.port, proto3), session(theirs.port, proto3));
        assert_eq!(o.len(), t.len());
        for (o, t) in o.iter().zip(&t) {
            assert_eq!(o, t, "RESP{}", if proto3 { 3 } else { 2 });
        }
    }
}
