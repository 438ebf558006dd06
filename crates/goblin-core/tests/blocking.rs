//! Blocking commands through the real server: parking, FIFO service, timeouts, pipelined input
//! waiting behind a parked command, disconnects while parked, chains (BLMOVE), MULTI.

mod common;

use common::{read_reply, send, Server};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Waits until INFO reports `n` blocked clients (so the order of parking is known).
fn wait_blocked(s: &Server, n: usize) {
    let mut con = s.conn();
    let want = format!("blocked_clients:{n}\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO").arg("clients").query(&mut con).unwrap();
        if info.contains(&want) {
            return;
        }
        assert!(Instant::now() < deadline, "expected {want:?} in {info}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn bulk_pair(k: &str, v: &str) -> Vec<u8> {
    format!("*2\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n", k.len(), v.len()).into_bytes()
}

#[test]
fn blpop_times_out_with_null_array() {
    let s = Server::start(&[]);
    let mut raw = s.raw();
    let t0 = Instant::now();
    send(&mut raw, b"BLPOP empty 0.2\r\nPING\r\n");
    assert_eq!(read_reply(&mut raw), b"*-1\r\n");
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_millis(190) && waited < Duration::from_secs(3), "{waited:?}");
    // The pipelined PING waited behind the parked command and runs after it.
    assert_eq!(read_reply(&mut raw), b"+PONG\r\n");
}

#[test]
fn waiters_are_served_in_arrival_order() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    send(&mut a, b"BLPOP q 0\r\nECHO a-after\r\n");
    wait_blocked(&s, 1);
    let mut b = s.raw();
    send(&mut b, b"BLPOP q other 0\r\nECHO b-after\r\n");
    wait_blocked(&s, 2);
    let mut con = s.conn();
    let n: i64 = redis::cmd("RPUSH").arg("q").arg("one").query(&mut con).unwrap();
    assert_eq!(n, 1);
    assert_eq!(read_reply(&mut a), bulk_pair("q", "one"));
    assert_eq!(read_reply(&mut a), b"$7\r\na-after\r\n");
    wait_blocked(&s, 1);
    let _: i64 = redis::cmd("RPUSH").arg("other").arg("two").query(&mut con).unwrap();
    assert_eq!(read_reply(&mut b), bulk_pair("other", "two"));
    assert_eq!(read_reply(&mut b), b"$7\r\nb-after\r\n");
    let len: i64 = redis::cmd("LLEN").arg("q").query(&mut con).unwrap();
    assert_eq!(len, 0);
}

#[test]
fn one_push_of_many_elements_serves_several_waiters() {
    let s = Server::start(&[]);
    let mut waiters: Vec<TcpStream> = Vec::new();
    for i in 0..3 {
        let mut w = s.raw();
        send(&mut w, b"BRPOP many 5\r\n");
        wait_blocked(&s, i + 1);
        waiters.push(w);
    }
    let mut con = s.conn();
    let _: i64 = redis::cmd("LPUSH").arg("many").arg("x").arg("y").arg("z").arg("w").query(&mut con).unwrap();
    // BRPOP takes from the right: the list is w z y x, so the waiters get x, y, z in order.
    for (w, v) in waiters.iter_mut().zip(["x", "y", "z"]) {
        assert_eq!(read_reply(w), bulk_pair("many", v));
    }
    let rest: Vec<String> = redis::cmd("LRANGE").arg("many").arg(0).arg(-1).query(&mut con).unwrap();
    assert_eq!(rest, vec!["w"]);
}

#[test]
fn disconnected_waiter_is_forgotten() {
    let s = Server::start(&[]);
    let mut gone = s.raw();
    send(&mut gone, b"BLPOP d 0\r\n");
    wait_blocked(&s, 1);
    drop(gone);
    wait_blocked(&s, 0);
    let mut b = s.raw();
    send(&mut b, b"BLPOP d 0\r\n");
    wait_blocked(&s, 1);
    let mut con = s.conn();
    let _: i64 = redis::cmd("RPUSH").arg("d").arg("v").query(&mut con).unwrap();
    assert_eq!(read_reply(&mut b), bulk_pair("d", "v"));
    let len: i64 = redis::cmd("LLEN").arg("d").query(&mut con).unwrap();
    assert_eq!(len, 0);
}

#[test]
fn blmove_chain_wakes_the_next_waiter() {
    let s = Server::start(&[]);
    let mut mover = s.raw();
    send(&mut mover, b"BLMOVE src dst LEFT RIGHT 0\r\n");
    wait_blocked(&s, 1);
    let mut popper = s.raw();
    send(&mut popper, b"BLPOP dst 0\r\n");
    wait_blocked(&s, 2);
    let mut con = s.conn();
    let _: i64 = redis::cmd("RPUSH").arg("src").arg("item").query(&mut con).unwrap();
    assert_eq!(read_reply(&mut mover), b"$4\r\nitem\r\n");
    assert_eq!(read_reply(&mut popper), bulk_pair("dst", "item"));
    let (a, b): (i64, i64) =
        redis::pipe().cmd("LLEN").arg("src").cmd("LLEN").arg("dst").query(&mut con).unwrap();
    assert_eq!((a, b), (0, 0));
}

#[test]
fn blocking_command_inside_multi_does_not_block() {
    let s = Server::start(&[]);
    let mut raw = s.raw();
    send(&mut raw, b"MULTI\r\nBLPOP nothing 0\r\nEXEC\r\n");
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    assert_eq!(read_reply(&mut raw), b"+QUEUED\r\n");
    assert_eq!(read_reply(&mut raw), b"*1\r\n*-1\r\n");
}

#[test]
fn push_inside_exec_serves_waiter_after_the_transaction() {
    let s = Server::start(&[]);
    let mut w = s.raw();
    send(&mut w, b"BLPOP tx 0\r\n");
    wait_blocked(&s, 1);
    let mut raw = s.raw();
    // The waiter must not see the element the same transaction removes again.
    send(&mut raw, b"MULTI\r\nRPUSH tx a\r\nRPUSH tx b\r\nLPOP tx\r\nEXEC\r\n");
    assert_eq!(read_reply(&mut raw), b"+OK\r\n");
    for _ in 0..3 {
        assert_eq!(read_reply(&mut raw), b"+QUEUED\r\n");
    }
    assert_eq!(read_reply(&mut raw), b"*3\r\n:1\r\n:2\r\n$1\r\na\r\n");
    assert_eq!(read_reply(&mut w), bulk_pair("tx", "b"));
}

#[test]
fn killed_waiter_and_client_list_flags() {
    let s = Server::start(&[]);
    let mut w = s.raw();
    send(&mut w, b"CLIENT ID\r\n");
    let id_reply = read_reply(&mut w);
    let id: i64 = std::str::from_utf8(&id_reply[1..id_reply.len() - 2]).unwrap().parse().unwrap();
    send(&mut w, b"BLPOP k 0\r\n");
    wait_blocked(&s, 1);
    let mut con = s.conn();
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
    let line = list.lines().find(|l| l.starts_with(&format!("id={id} "))).unwrap();
    assert!(line.contains(" flags=b ") && line.contains(" cmd=blpop "), "{line}");
    let n: i64 = redis::cmd("CLIENT").arg("KILL").arg("ID").arg(id).query(&mut con).unwrap();
    assert_eq!(n, 1);
    wait_blocked(&s, 0);
}

#[test]
fn client_unblock_timeout_and_error() {
    let s = Server::start(&[]);
    let mut w = s.raw();
    send(&mut w, b"CLIENT ID\r\n");
    let r = read_reply(&mut w);
    let id: i64 = std::str::from_utf8(&r[1..r.len() - 2]).unwrap().parse().unwrap();
    let mut con = s.conn();
    let n: i64 = redis::cmd("CLIENT").arg("UNBLOCK").arg(id).query(&mut con).unwrap();
    assert_eq!(n, 0, "not blocked yet");
    send(&mut w, b"BLPOP u 0\r\nPING\r\n");
    wait_blocked(&s, 1);
    let n: i64 = redis::cmd("CLIENT").arg("UNBLOCK").arg(id).query(&mut con).unwrap();
    assert_eq!(n, 1);
    assert_eq!(read_reply(&mut w), b"*-1\r\n");
    assert_eq!(read_reply(&mut w), b"+PONG\r\n");
    send(&mut w, b"BRPOP u 0\r\n");
    wait_blocked(&s, 1);
    let n: i64 = redis::cmd("CLIENT").arg("UNBLOCK").arg(id).arg("ERROR").query(&mut con).unwrap();
    assert_eq!(n, 1);
    assert_eq!(read_reply(&mut w), b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
    let err = redis::cmd("CLIENT").arg("UNBLOCK").arg(id).arg("MAYBE").query::<()>(&mut con).unwrap_err();
    assert!(err.to_string().contains("CLIENT UNBLOCK reason should be TIMEOUT or ERROR"), "{err}");
}

/// A key that gains elements and then turns into another type before the waiter is retried
/// leaves the waiter parked (no WRONGTYPE), and it is served by a later push.
#[test]
fn waiter_stays_parked_when_its_key_changes_type() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    send(&mut a, b"BLPOP list 0\r\n");
    wait_blocked(&s, 1);
    let mut b = s.raw();
    send(&mut b, b"MULTI\r\nLPUSH list a\r\nDEL list\r\nSET list foo\r\nEXEC\r\n");
    for _ in 0..4 {
        read_reply(&mut b);
    }
    assert_eq!(read_reply(&mut b), b"*3\r\n:1\r\n:1\r\n+OK\r\n");
    wait_blocked(&s, 1);
    send(&mut b, b"DEL list\r\nLPUSH list b\r\n");
    assert_eq!(read_reply(&mut b), b":1\r\n");
    assert_eq!(read_reply(&mut b), b":1\r\n");
    assert_eq!(read_reply(&mut a), bulk_pair("list", "b"));
}

/// BLMOVEM ... EXACTLY n waits until the source holds n elements and then takes them in one
/// move; while it waits at the head of the key's queue, a later BLPOP takes what it cannot
/// use, and it keeps its turn for the push that makes n.
#[test]
fn blmovem_exactly_waits_for_enough_and_keeps_its_turn() {
    let s = Server::start(&[]);
    let mut mover = s.raw();
    send(&mut mover, b"BLMOVEM src dst LEFT RIGHT 0 EXACTLY 2 BULK\r\nECHO after\r\n");
    wait_blocked(&s, 1);
    let mut popper = s.raw();
    send(&mut popper, b"BLPOP src 0\r\n");
    wait_blocked(&s, 2);
    let mut con = s.conn();
    // One element: not enough for the mover, enough for the BLPOP behind it.
    let _: i64 = redis::cmd("RPUSH").arg("src").arg("a").query(&mut con).unwrap();
    assert_eq!(read_reply(&mut popper), bulk_pair("src", "a"));
    wait_blocked(&s, 1);
    send(&mut popper, b"BLPOP src 0\r\n");
    wait_blocked(&s, 2);
    // Two at once: the mover, first in line, takes both; the BLPOP keeps waiting.
    let _: i64 = redis::cmd("RPUSH").arg("src").arg("b").arg("c").query(&mut con).unwrap();
    assert_eq!(read_reply(&mut mover), b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n");
    assert_eq!(read_reply(&mut mover), b"$5\r\nafter\r\n");
    wait_blocked(&s, 1);
    let dst: Vec<String> = redis::cmd("LRANGE").arg("dst").arg(0).arg(-1).query(&mut con).unwrap();
    assert_eq!(dst, ["b", "c"]);
    let _: i64 = redis::cmd("RPUSH").arg("src").arg("d").query(&mut con).unwrap();
    assert_eq!(read_reply(&mut popper), bulk_pair("src", "d"));
    // COUNT waits only while the source is empty, then moves what there is.
    send(&mut mover, b"BLMOVEM src dst RIGHT LEFT 0 COUNT 5 OBO\r\n");
    wait_blocked(&s, 1);
    let _: i64 = redis::cmd("RPUSH").arg("src").arg("e").query(&mut con).unwrap();
    assert_eq!(read_reply(&mut mover), b"*1\r\n$1\r\ne\r\n");
    // A timeout answers a null array; inside MULTI it never waits.
    send(&mut mover, b"BLMOVEM src dst LEFT LEFT 0.05 EXACTLY 3 OBO\r\n");
    assert_eq!(read_reply(&mut mover), b"*-1\r\n");
    send(&mut mover, b"MULTI\r\nBLMOVEM src dst LEFT LEFT 0 EXACTLY 3 OBO\r\nEXEC\r\n");
    assert_eq!(read_reply(&mut mover), b"+OK\r\n");
    assert_eq!(read_reply(&mut mover), b"+QUEUED\r\n");
    assert_eq!(read_reply(&mut mover), b"*1\r\n*-1\r\n");
}

/// XREADGROUP ... BLOCK ... CLAIM: a reader parked with nothing to read is served when a
/// pending entry of its group has been idle long enough, though no write signalled the key
/// (the reply is the claimed entry, not the timeout's nil).
#[test]
fn blocked_claim_read_takes_an_entry_that_turns_idle() {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let _: String = redis::cmd("XADD").arg("q").arg("1-0").arg("job").arg("a").query(&mut con).unwrap();
    let _: () = redis::cmd("XGROUP").arg("CREATE").arg("q").arg("g").arg("0").query(&mut con).unwrap();
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("g")
        .arg("dead")
        .arg("STREAMS")
        .arg("q")
        .arg(">")
        .query(&mut con)
        .unwrap();
    // Parked: 1-0 has been pending for far less than 300 ms, and nothing new is coming.
    let mut reader = s.raw();
    send(&mut reader, b"XREADGROUP GROUP g alive BLOCK 60000 CLAIM 300 STREAMS q >\r\n");
    let reply = read_reply(&mut reader);
    let text = String::from_utf8_lossy(&reply);
    assert!(text.starts_with("*1\r\n*2\r\n$1\r\nq\r\n*1\r\n*4\r\n$3\r\n1-0\r\n"), "{text}");
    let pending: Vec<(String, String, i64, i64)> =
        redis::cmd("XPENDING").arg("q").arg("g").arg("-").arg("+").arg(10).query(&mut con).unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!((pending[0].1.as_str(), pending[0].3), ("alive", 2));
    // Nothing pending for long enough and nothing new: it waits out its own deadline.
    send(&mut reader, b"XREADGROUP GROUP g other BLOCK 200 CLAIM 60000 STREAMS q >\r\n");
    assert_eq!(read_reply(&mut reader), b"*-1\r\n");
}
