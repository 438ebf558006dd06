//! The Lua debugger (`SCRIPT DEBUG YES|SYNC`, what `redis-cli --ldb` drives) against the real
//! binary: a whole session compared line for line with redis-server 7.0's, the forked mode
//! (the server goes on serving, the session's writes vanish), the sync mode (the writes stay),
//! aborts, a client that leaves mid-session, the timeout stop, bad debugger input, and the
//! refusals around SCRIPT DEBUG.

mod common;

use common::{RedisServer, RespConn, Server};
use resp::Frame;
use std::io::Read;
use std::time::{Duration, Instant};

/// The lines of one debugger output (an array of simple strings).
fn lines(f: Frame) -> Vec<String> {
    match f {
        Frame::Array(Some(items)) => items
            .into_iter()
            .map(|i| match i {
                Frame::Simple(s) => String::from_utf8(s).unwrap(),
                other => panic!("a debugger line that is not a simple string: {other:?}"),
            })
            .collect(),
        other => panic!("expected the debugger's output, got {other:?}"),
    }
}

fn words(cmd: &str) -> Vec<&str> {
    cmd.split(' ').collect()
}

/// Sends a debugger command and returns its output lines.
fn debug(c: &mut RespConn, cmd: &str) -> Vec<String> {
    lines(c.call(&words(cmd)))
}

/// Reads until the server closes the connection; panics on anything more than `extra` bytes.
fn expect_closed(c: RespConn) {
    let mut s = c.into_stream();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut rest = Vec::new();
    let n = s.read_to_end(&mut rest).expect("the connection closes after the session");
    assert_eq!(n, 0, "nothing after the session's reply: {:?}", String::from_utf8_lossy(&rest));
}

const SCRIPT: &str = "local t = {1, 'two', {x = 3}}
local n = tonumber(ARGV[1]) * 2
redis.call('set', KEYS[1], n)
local got = redis.call('get', KEYS[1])
redis.debug('got', got, t)
if got == '84' then
  redis.breakpoint()
end
return {got, redis.call('incr', KEYS[2])}
";

/// The debugger commands of the compared session (the help's prose is the project's own, so
/// `help` is not among them).
const CONVERSATION: &[&str] = &[
    "s",
    "p",
    "p t",
    "p ARGV",
    "p KEYS",
    "p nope",
    "s",
    "s",
    "e n + 1",
    "e local z = 1",
    "e error('boom')",
    "e {1, {a = 'b'}}",
    "r set other 1",
    "r nosuchcmd",
    "r get",
    "r hset h f",
    "r hgetall nohash",
    "l",
    "l 3 1",
    "w",
    "t",
    "m 70",
    "m 0",
    "m -5",
    "m 0",
    "b 9",
    "b 99",
    "b x",
    "b -99",
    "b -9",
    "b 0",
    "b 9",
    "b",
    "c",
    "p",
    "bogus",
    "c",
];

/// Runs the compared session on a server at `port`: every output, then the EVAL's reply.
fn session(port: u16) -> (Vec<Vec<String>>, Frame) {
    let mut c = RespConn::open(port, 2);
    assert_eq!(c.call(&["SCRIPT", "DEBUG", "SYNC"]), Frame::Simple(b"OK".to_vec()));
    let mut outputs = vec![lines(c.call(&["EVAL", SCRIPT, "2", "k", "ctr", "42"]))];
    for cmd in CONVERSATION {
        outputs.push(debug(&mut c, cmd));
    }
    let reply = c.read();
    expect_closed(c);
    (outputs, reply)
}

#[test]
fn a_whole_session_reads_as_redis_servers() {
    let redis = RedisServer::start();
    let goblin = Server::start(&[]);
    let (want, want_reply) = session(redis.port);
    let (got, got_reply) = session(goblin.port);
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        let cmd = if i == 0 { "EVAL" } else { CONVERSATION[i - 1] };
        assert_eq!(g, w, "output of {cmd:?}");
    }
    assert_eq!(got.len(), want.len());
    assert_eq!(got_reply, want_reply);
    assert_eq!(got.last().unwrap(), &["<endsession>"]);
    // Sync mode keeps the script's writes, and those of the debugger's own `redis` command.
    let mut con = goblin.conn();
    let (k, ctr, other): (String, i64, String) =
        redis::pipe().get("k").get("ctr").get("other").query(&mut con).unwrap();
    assert_eq!((k.as_str(), ctr, other.as_str()), ("84", 1, "1"));
}

#[test]
fn a_forked_session_leaves_the_server_serving_and_its_writes_vanish() {
    let server = Server::start(&[]);
    let mut other = server.conn();
    let _: () = redis::cmd("SET").arg("k").arg("before").query(&mut other).unwrap();
    let mut c = RespConn::open(server.port, 2);
    assert_eq!(c.call(&["SCRIPT", "DEBUG", "YES"]), Frame::Simple(b"OK".to_vec()));
    let first = lines(c.call(&[
        "EVAL",
        "redis.call('set', KEYS[1], 'inside')\nreturn redis.call('get', KEYS[1])",
        "1",
        "k",
    ]));
    assert_eq!(
        first,
        ["* Stopped at 1, stop reason = step over", "-> 1   redis.call('set', KEYS[1], 'inside')"]
    );
    // Stopped in the child: the server itself answers, and has not seen the write.
    let v: String = redis::cmd("GET").arg("k").query(&mut other).unwrap();
    assert_eq!(v, "before");
    let out = debug(&mut c, "s");
    assert_eq!(&out[..2], ["<redis> set k inside", "<reply> \"+OK\""]);
    // The child sees its own write.
    assert_eq!(debug(&mut c, "r get k"), ["<redis> get k", "<reply> \"inside\""]);
    let _: () = redis::cmd("SET").arg("k").arg("meanwhile").query(&mut other).unwrap();
    assert_eq!(debug(&mut c, "c"), ["<endsession>"]);
    assert_eq!(c.read(), Frame::Bulk(Some(b"inside".to_vec())));
    expect_closed(c);
    let v: String = redis::cmd("GET").arg("k").query(&mut other).unwrap();
    assert_eq!(v, "meanwhile", "the session's write stays in the child");
    // The parent reaps the child.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !server
        .log()
        .lines()
        .any(|l| l.contains("Lua debugging session with client id=") && l.ends_with("ended"))
    {
        assert!(Instant::now() < deadline, "the child's end is not logged:\n{}", server.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn abort_stops_the_script_with_an_error_and_sync_keeps_what_it_wrote() {
    let server = Server::start(&[]);
    let mut c = RespConn::open(server.port, 2);
    c.call(&["SCRIPT", "DEBUG", "SYNC"]);
    c.call(&["EVAL", "redis.call('set', 'a', '1')\nredis.call('set', 'b', '2')\nreturn 1", "0"]);
    debug(&mut c, "s");
    assert_eq!(debug(&mut c, "a"), ["<endsession>"]);
    match c.read() {
        Frame::Error(e) => {
            let e = String::from_utf8(e).unwrap();
            assert!(e.starts_with("ERR script aborted for user request script: "), "{e}");
            assert!(e.ends_with("on @user_script:2."), "{e}");
        }
        other => panic!("expected the abort's error, got {other:?}"),
    }
    expect_closed(c);
    let mut con = server.conn();
    let (a, b): (Option<String>, Option<String>) = redis::pipe().get("a").get("b").query(&mut con).unwrap();
    assert_eq!((a.as_deref(), b), (Some("1"), None));
}

#[test]
fn a_client_that_leaves_lets_the_script_run_to_its_end() {
    let server = Server::start(&[]);
    let mut c = RespConn::open(server.port, 2);
    c.call(&["SCRIPT", "DEBUG", "SYNC"]);
    let out = lines(c.call(&["EVAL", "local x = 1\nredis.call('set', 'after', 'yes')\nreturn x", "0"]));
    assert_eq!(out[0], "* Stopped at 1, stop reason = step over");
    drop(c);
    let mut con = server.conn();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v: Option<String> = redis::cmd("GET").arg("after").query(&mut con).unwrap();
        if v.as_deref() == Some("yes") {
            break;
        }
        assert!(Instant::now() < deadline, "the script did not finish after its client left");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_script_that_runs_too_long_without_stopping_is_stopped() {
    let server = Server::start(&[]);
    let mut con = server.conn();
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("busy-reply-threshold").arg("200").query(&mut con).unwrap();
    let mut c = RespConn::open(server.port, 2);
    c.call(&["SCRIPT", "DEBUG", "SYNC"]);
    c.call(&["EVAL", "local i = 0\nwhile true do\n  i = i + 1\nend", "0"]);
    let out = debug(&mut c, "c");
    assert!(
        out[0].starts_with("* Stopped at ")
            && out[0].ends_with("stop reason = timeout reached, infinite loop?"),
        "{out:?}"
    );
    let i = debug(&mut c, "p i");
    assert!(i[0].starts_with("<value> ") && i[0] != "<value> 0", "{i:?}");
    assert_eq!(debug(&mut c, "a"), ["<endsession>"]);
    assert!(matches!(c.read(), Frame::Error(_)));
    expect_closed(c);
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn debugger_input_that_is_not_a_command_is_answered_or_refused() {
    let server = Server::start(&[]);
    let mut c = RespConn::open(server.port, 2);
    c.call(&["SCRIPT", "DEBUG", "SYNC"]);
    c.call(&["EVAL", "return 'hello'", "0"]);
    for bad in ["hello\0world", "hello\0", "\0hello", "\0hello\0"] {
        let out = debug(&mut c, bad);
        assert_eq!(
            out,
            ["<error> Unknown Redis Lua debugger command or wrong number of arguments."],
            "{bad:?}"
        );
    }
    // An unknown command with 100 arguments, through the debugger's `redis`.
    let mut args = vec!["redis"];
    args.extend(std::iter::repeat_n("test", 100));
    let out = lines(c.call(&args));
    assert!(out.iter().any(|l| l.contains("Unknown Redis command called from script")), "{out:?}");
    // A request that is not an array ends the session with a protocol error.
    let mut s = c.into_stream();
    std::io::Write::write_all(&mut s, b"step\r\n").unwrap();
    let mut c = RespConn::over(s, 2);
    assert_eq!(lines(c.read()), ["<endsession>"]);
    match c.read() {
        Frame::Error(e) => assert!(String::from_utf8_lossy(&e).starts_with("ERR protocol error"), "{e:?}"),
        other => panic!("expected the protocol error, got {other:?}"),
    }
    expect_closed(c);
    let mut con = server.conn();
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn script_debug_refusals() {
    let server = Server::start(&[]);
    let mut c = RespConn::open(server.port, 2);
    assert_eq!(
        c.call(&["SCRIPT", "DEBUG", "maybe"]),
        Frame::Error(b"ERR Use SCRIPT DEBUG YES/SYNC/NO".to_vec())
    );
    // Behind another reply in the same pipeline.
    let mut req = Vec::new();
    resp::reply::bulk_array(&mut req, &["PING"]);
    resp::reply::bulk_array(&mut req, &["SCRIPT", "DEBUG", "YES"]);
    let mut s = c.into_stream();
    std::io::Write::write_all(&mut s, &req).unwrap();
    let mut c = RespConn::over(s, 2);
    assert_eq!(c.read(), Frame::Simple(b"PONG".to_vec()));
    assert_eq!(c.read(), Frame::Error(b"ERR SCRIPT DEBUG must be called outside a pipeline".to_vec()));
    // EVALSHA does not debug; NO turns debugging off again.
    let Frame::Bulk(Some(sha)) = c.call(&["SCRIPT", "LOAD", "return 7"]) else { panic!("SCRIPT LOAD") };
    assert_eq!(c.call(&["SCRIPT", "DEBUG", "YES"]), Frame::Simple(b"OK".to_vec()));
    assert_eq!(
        c.call(&[b"EVALSHA".as_slice(), &sha, b"0"]),
        Frame::Error(b"ERR Please use EVAL instead of EVALSHA for debugging".to_vec())
    );
    assert_eq!(c.call(&["SCRIPT", "DEBUG", "NO"]), Frame::Simple(b"OK".to_vec()));
    assert_eq!(c.call(&["EVAL", "return 7", "0"]), Frame::Integer(7));
    // Inside MULTI a script runs without the debugger.
    assert_eq!(c.call(&["SCRIPT", "DEBUG", "SYNC"]), Frame::Simple(b"OK".to_vec()));
    c.call(&["MULTI"]);
    c.call(&["EVAL", "return 8", "0"]);
    assert_eq!(c.call(&["EXEC"]), Frame::Array(Some(vec![Frame::Integer(8)])));
    // ... and the mode holds for the next EVAL outside it.
    assert_eq!(lines(c.call(&["EVAL", "return 9", "0"]))[0], "* Stopped at 1, stop reason = step over");
    assert_eq!(debug(&mut c, "c"), ["<endsession>"]);
    assert_eq!(c.read(), Frame::Integer(9));
    expect_closed(c);
    // Scripts cannot turn it on.
    let mut c = RespConn::open(server.port, 2);
    match c.call(&["EVAL", "return redis.call('script', 'debug', 'yes')", "0"]) {
        Frame::Error(e) => assert!(String::from_utf8_lossy(&e).contains("not allowed from script"), "{e:?}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn redis_cli_ldb_drives_a_session() {
    let server = Server::start(&[]);
    let dir = common::temp_path("ldb");
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("s.lua");
    std::fs::write(&script, "local a = 1\nredis.call('set', KEYS[1], ARGV[1])\nreturn a + 1\n").unwrap();
    for (mode, kept) in [("--ldb", false), ("--ldb-sync-mode", true)] {
        let mut child = std::process::Command::new("redis-cli")
            .args([
                "-p",
                &server.port.to_string(),
                mode,
                "--eval",
                script.to_str().unwrap(),
                "key",
                ",",
                "val",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("redis-cli (apt-get install redis-tools)");
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"s\np a\nc\n").unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        for want in [
            "* Stopped at 1, stop reason = step over",
            "<value> 1",
            "(integer) 2",
            "Lua debugging session ended",
        ] {
            assert!(text.contains(want), "{mode}: {want:?} missing from:\n{text}");
        }
        let v: Option<String> = redis::cmd("GET").arg("key").query(&mut server.conn()).unwrap();
        assert_eq!(v.is_some(), kept, "{mode}");
    }
}
