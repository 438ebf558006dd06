//! Client-side caching (CLIENT TRACKING, CACHING, TRACKINGINFO, GETREDIR) and CLIENT
//! PAUSE/UNPAUSE against the real binary over raw sockets, with RESP3 pushes and RESP2
//! redirection; the error texts are redis-server 7.0.15's.

mod common;

use common::{read_reply, send, Server};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn req(args: &[&str]) -> Vec<u8> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let mut out = Vec::new();
    resp::reply::bulk_array(&mut out, &args);
    out
}

fn call(s: &mut TcpStream, line: &str) -> String {
    send(s, &req(&line.split(' ').collect::<Vec<_>>()));
    String::from_utf8(read_reply(s)).unwrap()
}

fn resp3(s: &mut TcpStream) {
    let hello = call(s, "HELLO 3");
    assert!(hello.starts_with('%'), "{hello}");
}

const INVALIDATE_K: &str = ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n";

#[test]
fn default_mode_invalidates_once_per_read() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    resp3(&mut c);
    assert_eq!(call(&mut c, "CLIENT TRACKING on"), "+OK\r\n");
    let mut w = s.raw();
    call(&mut w, "SET k 1");
    assert_eq!(call(&mut c, "GET k"), "$1\r\n1\r\n");
    // Another client changes k: one push, then nothing for the next change (not read again).
    call(&mut w, "SET k 2");
    assert_eq!(String::from_utf8(read_reply(&mut c)).unwrap(), INVALIDATE_K);
    call(&mut w, "SET k 3");
    assert_eq!(call(&mut c, "PING"), "+PONG\r\n", "no second push before the PING's reply");
    let info = call(&mut c, "CLIENT TRACKINGINFO");
    assert!(info.contains("on") && info.contains("redirect"), "{info}");
    assert_eq!(call(&mut c, "CLIENT GETREDIR"), ":0\r\n");
    // Its own write invalidates too (no NOLOOP), after the write's reply.
    call(&mut c, "GET k");
    assert_eq!(call(&mut c, "SET k 4"), "+OK\r\n");
    assert_eq!(String::from_utf8(read_reply(&mut c)).unwrap(), INVALIDATE_K);
    // FLUSHALL: a null invalidation.
    call(&mut c, "GET k");
    call(&mut w, "FLUSHALL");
    assert_eq!(String::from_utf8(read_reply(&mut c)).unwrap(), ">2\r\n$10\r\ninvalidate\r\n_\r\n");
    // Expiry is a change as well.
    call(&mut w, "SET e v PX 30");
    call(&mut c, "GET e");
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(
        String::from_utf8(read_reply(&mut c)).unwrap(),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\ne\r\n"
    );
    assert_eq!(call(&mut c, "CLIENT TRACKING off"), "+OK\r\n");
    assert_eq!(call(&mut c, "CLIENT GETREDIR"), ":-1\r\n");
    let stats = call(&mut w, "INFO clients");
    assert!(stats.contains("tracking_clients:0"), "{stats}");
}

#[test]
fn bcast_noloop_optin_and_redirect() {
    let s = Server::start(&[]);
    // BCAST with a prefix: changes under it, read or not.
    let mut b = s.raw();
    resp3(&mut b);
    assert_eq!(call(&mut b, "CLIENT TRACKING on BCAST PREFIX user: NOLOOP"), "+OK\r\n");
    let mut w = s.raw();
    call(&mut w, "SET other 1");
    call(&mut w, "HSET user:1 name x");
    assert_eq!(
        String::from_utf8(read_reply(&mut b)).unwrap(),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$6\r\nuser:1\r\n"
    );
    // NOLOOP: its own change is not sent back.
    call(&mut b, "SET user:2 y");
    assert_eq!(call(&mut b, "PING"), "+PONG\r\n");
    let flags = call(&mut w, "CLIENT LIST");
    assert!(flags.contains("flags=tB"), "{flags}");

    // OPTIN: only the command after CLIENT CACHING yes is tracked.
    let mut o = s.raw();
    resp3(&mut o);
    call(&mut o, "CLIENT TRACKING on OPTIN");
    call(&mut o, "GET a");
    call(&mut o, "CLIENT CACHING yes");
    call(&mut o, "GET k");
    call(&mut w, "SET a 1");
    call(&mut w, "SET k 1");
    assert_eq!(String::from_utf8(read_reply(&mut o)).unwrap(), INVALIDATE_K);

    // REDIRECT to a RESP2 client subscribed to __redis__:invalidate.
    let mut r = s.raw();
    let rid = call(&mut r, "CLIENT ID");
    let rid = rid.trim_start_matches(':').trim_end();
    let sub = call(&mut r, "SUBSCRIBE __redis__:invalidate");
    assert!(sub.contains("subscribe"), "{sub}");
    let mut t = s.raw(); // a RESP2 client: its invalidations go to r
    assert_eq!(call(&mut t, &format!("CLIENT TRACKING on REDIRECT {rid}")), "+OK\r\n");
    assert_eq!(call(&mut t, "CLIENT GETREDIR"), format!(":{rid}\r\n"));
    call(&mut t, "GET k");
    call(&mut w, "SET k 2");
    assert_eq!(
        String::from_utf8(read_reply(&mut r)).unwrap(),
        "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n"
    );
}

#[test]
fn tracking_errors_match_redis() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let cases = [
        ("CLIENT TRACKING on REDIRECT 9999", "-ERR The client ID you want redirect to does not exist\r\n"),
        ("CLIENT TRACKING on PREFIX a", "-ERR PREFIX option requires BCAST mode to be enabled\r\n"),
        ("CLIENT TRACKING on OPTIN OPTOUT", "-ERR You can't specify both OPTIN mode and OPTOUT mode\r\n"),
        ("CLIENT TRACKING on BCAST OPTIN", "-ERR OPTIN and OPTOUT are not compatible with BCAST\r\n"),
        ("CLIENT TRACKING on bogus", "-ERR syntax error\r\n"),
        ("CLIENT TRACKING maybe", "-ERR syntax error\r\n"),
        (
            "CLIENT TRACKING on BCAST PREFIX a PREFIX ab",
            "-ERR Prefix 'a' overlaps with another provided prefix 'ab'. Prefixes for a single client must not overlap.\r\n",
        ),
        (
            "CLIENT CACHING yes",
            "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n",
        ),
        // The mode is checked before the argument.
        (
            "CLIENT CACHING maybe",
            "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n",
        ),
        ("CLIENT GETREDIR", ":-1\r\n"),
        ("CLIENT TRACKING on OPTIN", "+OK\r\n"),
        ("CLIENT CACHING no", "-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n"),
        (
            "CLIENT TRACKING on BCAST",
            "-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n",
        ),
        (
            "CLIENT TRACKING on OPTOUT",
            "-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.\r\n",
        ),
        ("CLIENT CACHING on", "-ERR syntax error\r\n"),
        // Tracking in its default mode: each argument's own mode is named.
        ("CLIENT TRACKING off", "+OK\r\n"),
        ("CLIENT TRACKING on", "+OK\r\n"),
        ("CLIENT CACHING yes", "-ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.\r\n"),
        ("CLIENT CACHING no", "-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n"),
        ("CLIENT CACHING maybe", "-ERR syntax error\r\n"),
        ("CLIENT PAUSE abc", "-ERR timeout is not an integer or out of range\r\n"),
        ("CLIENT PAUSE -1", "-ERR timeout is negative\r\n"),
        ("CLIENT KILL MAXAGE 0", "-ERR maxage should be greater than 0\r\n"),
        ("CLIENT KILL MAXAGE x", "-ERR maxage is not an integer or out of range\r\n"),
        ("CLIENT PAUSE 10 bogus", "-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n"),
    ];
    for (cmd, want) in cases {
        assert_eq!(call(&mut c, cmd), want, "{cmd}");
    }
}

#[test]
fn pause_write_holds_writes_not_reads() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    let mut c = s.raw();
    call(&mut c, "SET k 1");
    call(&mut c, "SET e v PX 50");
    assert_eq!(call(&mut a, "CLIENT PAUSE 2000 WRITE"), "+OK\r\n");
    assert_eq!(call(&mut c, "GET k"), "$1\r\n1\r\n", "reads run during a write pause");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(call(&mut c, "GET e"), "$-1\r\n", "past its deadline reads as missing");
    let keys = call(&mut a, "DBSIZE");
    assert_eq!(keys, ":2\r\n", "but nothing expires while paused");
    send(&mut c, &req(&["SET", "k", "2"]));
    assert_eq!(call(&mut a, "GET k"), "$1\r\n1\r\n", "the write is held while the pause lasts");
    // The pause ends by its timeout: the held write runs and is answered.
    assert_eq!(String::from_utf8(read_reply(&mut c)).unwrap(), "+OK\r\n");
    assert_eq!(call(&mut c, "GET k"), "$1\r\n2\r\n");
    // UNPAUSE ends it at once: a held write runs then.
    call(&mut a, "CLIENT PAUSE 100000 WRITE");
    send(&mut c, &req(&["INCR", "n"]));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(call(&mut a, "GET n"), "$-1\r\n", "the INCR is held");
    assert_eq!(call(&mut a, "CLIENT UNPAUSE"), "+OK\r\n");
    assert_eq!(String::from_utf8(read_reply(&mut c)).unwrap(), ":1\r\n");
}

/// The keys one command changes arrive one invalidation each, in order (as Redis 7.0 sends
/// them); a paused client counts as blocked; a `no-writes` script runs through a write pause.
#[test]
fn multi_key_invalidation_and_pause_details() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    resp3(&mut c);
    call(&mut c, "CLIENT TRACKING on");
    call(&mut c, "MGET a b c");
    let mut w = s.raw();
    call(&mut w, "MSET a 1 b 2 c 3");
    for key in ["a", "b", "c"] {
        assert_eq!(
            String::from_utf8(read_reply(&mut c)).unwrap(),
            format!(">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\n{key}\r\n")
        );
    }

    let mut admin = s.raw();
    assert_eq!(call(&mut admin, "CLIENT PAUSE 100000 WRITE"), "+OK\r\n");
    send(&mut w, &req(&["EVAL", "#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1])", "1", "a"]));
    assert_eq!(
        String::from_utf8(read_reply(&mut w)).unwrap(),
        "$1\r\n1\r\n",
        "a no-writes script is not held"
    );
    send(&mut w, &req(&["SET", "a", "2"]));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = call(&mut admin, "INFO clients");
        if info.contains("blocked_clients:1") {
            break;
        }
        assert!(Instant::now() < deadline, "the held client never counted as blocked: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
    call(&mut admin, "CLIENT UNPAUSE");
    assert_eq!(String::from_utf8(read_reply(&mut w)).unwrap(), "+OK\r\n");
}

/// Scripts track the keys their read commands read (Redis 7.2+), not the keys they declare:
/// a script that only writes, or an EVAL_RO that reads nothing, tracks nothing; a read after
/// the script's own write stays tracked, a read before it is invalidated by it; scripts in a
/// transaction and functions alike. Every byte the tracking client receives (replies and
/// pushes, in order) is compared with redis-server 8.2's.
#[test]
fn scripts_track_the_keys_they_read_as_redis8() {
    let goblin = Server::start(&[]);
    let redis = common::RedisServer::start8();
    let lib = "#!lua name=trk\nredis.register_function{function_name='rd', callback=function(k) \
               return redis.call('get', k[1]) end, flags={'no-writes'}}";
    // (who, command): 'c' is the tracking client, 'w' another one.
    let steps: &[(char, &[&str])] = &[
        ('c', &["EVAL", "redis.call('set', 'k3', 'bar')", "1", "k"]),
        ('w', &["SET", "k", "1"]),
        ('c', &["EVAL", "return redis.call('get', 'k3')", "1", "k"]),
        ('w', &["SET", "k", "2"]),
        ('w', &["SET", "k3", "x"]),
        ('c', &["EVAL_RO", "return redis.call('ping')", "2", "k", "k3"]),
        ('w', &["MSET", "k", "3", "k3", "y"]),
        ('c', &["EVAL", "redis.call('get', 'r'); redis.call('set', 'r', '1'); return 1", "0"]),
        ('w', &["SET", "r", "2"]),
        ('c', &["EVAL", "redis.call('set', 'q', '1'); return redis.call('get', 'q')", "0"]),
        ('w', &["SET", "q", "2"]),
        ('c', &["MULTI"]),
        ('c', &["EVAL", "return redis.call('mget', 'm1', 'm2')", "0"]),
        ('c', &["EXEC"]),
        ('w', &["SET", "m2", "1"]),
        ('w', &["FUNCTION", "LOAD", lib]),
        ('c', &["FCALL_RO", "rd", "1", "f"]),
        ('w', &["SET", "f", "1"]),
        ('c', &["CLIENT", "TRACKING", "on", "OPTIN"]),
        ('c', &["EVAL", "return redis.call('get', 'o1')", "0"]),
        ('c', &["CLIENT", "CACHING", "yes"]),
        ('c', &["EVAL", "return redis.call('get', 'o2')", "0"]),
        ('w', &["MSET", "o1", "1", "o2", "2"]),
    ];
    let mut seen = Vec::new();
    for port in [goblin.port, redis.port] {
        let open = || {
            let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s
        };
        let (mut c, mut w) = (open(), open());
        resp3(&mut c);
        call(&mut c, "CLIENT TRACKING on");
        let mut got = String::new();
        let mut queued = false;
        for (who, args) in steps {
            if *who == 'c' {
                send(&mut c, &req(args));
                got.push_str(&String::from_utf8_lossy(&read_reply(&mut c)));
                queued = args[0] == "MULTI" || (queued && args[0] != "EXEC");
                if queued {
                    continue; // a PING would be queued too
                }
            } else {
                send(&mut w, &req(args));
                read_reply(&mut w);
            }
            // Whatever else reached the client (pushes), up to a PING's reply.
            send(&mut c, &req(&["PING"]));
            loop {
                let r = String::from_utf8_lossy(&read_reply(&mut c)).into_owned();
                got.push_str(&r);
                if r == "+PONG\r\n" {
                    break;
                }
            }
            got.push('\n');
        }
        seen.push(got);
    }
    assert_eq!(seen[0], seen[1], "goblin-core, then redis-server 8.2");
    assert!(seen[0].contains("invalidate\r\n*1\r\n$2\r\nk3"), "{}", seen[0]);
}

/// A key read before switching to BCAST no longer sends its own invalidation.
#[test]
fn bcast_drops_default_entries() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    resp3(&mut c);
    call(&mut c, "CLIENT TRACKING on");
    let mut w = s.raw();
    call(&mut c, "GET k");
    call(&mut c, "CLIENT TRACKING off");
    call(&mut c, "CLIENT TRACKING on BCAST PREFIX z");
    call(&mut w, "SET k 3");
    call(&mut w, "SET zz 1");
    assert_eq!(
        String::from_utf8(read_reply(&mut c)).unwrap(),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$2\r\nzz\r\n",
        "k's old default-mode entry sends nothing now"
    );
}
