//! Input larger than one read per loop turn: the server reads a bounded amount per connection
//! per turn and continues on later turns. These tests check that the other clients are served
//! while one client streams (no starvation), and that nothing is lost or reordered on the way,
//! including when the client has already closed its sending side.

mod common;

use common::{read_reply, read_to_close, send, Server};
use std::io::Read;
use std::net::Shutdown;

/// `n` pipelined `INCR ctr` requests (26 bytes each).
fn incr_pipeline(n: usize) -> Vec<u8> {
    b"*2\r\n$4\r\nINCR\r\n$3\r\nctr\r\n".repeat(n)
}

/// The replies to [`incr_pipeline`] on a fresh counter: `:1`, `:2`, ... `:n`.
fn incr_replies(n: usize) -> Vec<u8> {
    (1..=n).flat_map(|i| format!(":{i}\r\n").into_bytes()).collect()
}

/// Index of the first differing byte, for a readable failure message.
fn first_difference(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()))
}

#[test]
fn pipeline_of_many_reads_replies_to_every_request_in_order() {
    let s = Server::start(&[]);
    let mut big = s.raw();
    let mut other = s.raw();
    // About 1.3 MB: many reads' worth, so the connection is continued over many turns.
    let n = 50_000;
    let writer = {
        let mut w = big.try_clone().unwrap();
        std::thread::spawn(move || send(&mut w, &incr_pipeline(n)))
    };
    let want = incr_replies(n);
    let mut got = vec![0u8; want.len()];
    big.read_exact(&mut got).expect("every reply");
    assert!(got == want, "replies differ at byte {}", first_difference(&got, &want));
    writer.join().unwrap();
    send(&mut other, b"*2\r\n$3\r\nGET\r\n$3\r\nctr\r\n");
    assert_eq!(read_reply(&mut other), format!("${}\r\n{n}\r\n", n.to_string().len()).into_bytes());
}

/// The counter's value in a reply to `GET ctr` (a missing key counts as 0).
fn counter(reply: &[u8]) -> usize {
    if reply == b"$-1\r\n" {
        return 0;
    }
    let text = std::str::from_utf8(reply).unwrap();
    text.rsplit("\r\n").nth(1).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("GET ctr: {text:?}"))
}

/// Bytes the kernel holds unread in the receive queue of the IPv4 TCP socket `local` -> `remote`
/// (the `rx_queue` column of /proc/net/tcp).
fn unread_bytes(local: std::net::SocketAddr, remote: std::net::SocketAddr) -> usize {
    let hex = |a: std::net::SocketAddr| match a {
        std::net::SocketAddr::V4(v4) => {
            format!("{:08X}:{:04X}", u32::from_le_bytes(v4.ip().octets()), v4.port())
        }
        _ => panic!("IPv4 only"),
    };
    let (l, r) = (hex(local), hex(remote));
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f[1] == l && f[2] == r {
            return usize::from_str_radix(f[4].split_once(':').unwrap().1, 16).unwrap();
        }
    }
    panic!("no socket {l} -> {r} in /proc/net/tcp");
}

/// No starvation: a client's request waiting behind a huge pipeline from another client is
/// answered after a bounded part of that pipeline, not after all that was already there.
///
/// The server is stopped (SIGSTOP) while the streaming client fills the kernel's socket buffers
/// with INCRs (hundreds of KB, many reads' worth, in the server's own receive queue alone) and
/// the small client then sends `GET ctr`; resumed, the server finds both connections ready,
/// the streaming one first. The GET's reply is exactly the number of INCRs the server had
/// executed when it served the GET, so this measures the order of service, not time: a fair
/// server answers after one read's worth of the stream (some 700 INCRs), while a server that
/// kept reading the streaming connection until its receive queue ran dry would first execute
/// every INCR in that queue (checked by setting READS_PER_TURN to usize::MAX: the GET then
/// waits for all of them).
#[test]
fn a_streaming_client_does_not_starve_the_others() {
    use std::io::{ErrorKind, Write};
    let s = Server::start(&[]);
    let mut big = s.raw();
    let mut small = s.raw();
    // About 5 MB of requests: some 300 reads of 16 KiB.
    let n = 200_000;
    let pipeline = incr_pipeline(n);
    s.signal(libc::SIGSTOP);
    let stat = format!("/proc/{}/stat", s.pid());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read_to_string(&stat).unwrap().rsplit_once(')').unwrap().1.trim_start().starts_with('T') {
        assert!(std::time::Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // Everything the kernel buffers accept now waits for the stopped server, in front of the GET.
    big.set_nonblocking(true).unwrap();
    let mut buffered = 0;
    loop {
        match big.write(&pipeline[buffered..]) {
            Ok(k) => buffered += k,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) => panic!("write: {e}"),
        }
    }
    big.set_nonblocking(false).unwrap();
    assert!(buffered > 0, "nothing buffered");
    // What the server will find in its receive queue, in front of the GET (the rest of
    // `buffered` is still in the client's send queue).
    let server_addr = std::net::SocketAddr::from(([127, 0, 0, 1], s.port));
    let queued = unread_bytes(server_addr, big.local_addr().unwrap());
    let waiting = queued / 26;
    assert!(waiting >= 2_000, "only {queued} bytes in the server's receive queue in front of the GET");
    send(&mut small, b"*2\r\n$3\r\nGET\r\n$3\r\nctr\r\n");
    s.signal(libc::SIGCONT);
    let writer = {
        let mut w = big.try_clone().unwrap();
        std::thread::spawn(move || send(&mut w, &pipeline[buffered..]))
    };
    let reader = std::thread::spawn(move || {
        let want = incr_replies(n);
        let mut got = vec![0u8; want.len()];
        big.read_exact(&mut got).expect("every reply");
        assert!(got == want, "replies differ at byte {}", first_difference(&got, &want));
    });
    let first = counter(&read_reply(&mut small));
    println!("GET answered after {first} of the {waiting} INCRs waiting in front of it");
    assert!(
        first < waiting / 2,
        "the GET was answered only after {first} INCRs of a streaming client that had {waiting} waiting \
         in front of it: the server served that client far beyond one read before the other"
    );
    // Later GETs keep being answered while the stream goes on, and see a consistent counter.
    let mut last = first;
    while last < n {
        send(&mut small, b"*2\r\n$3\r\nGET\r\n$3\r\nctr\r\n");
        let v = counter(&read_reply(&mut small));
        assert!(v >= last && v <= n, "counter went from {last} to {v}");
        last = v;
    }
    writer.join().unwrap();
    reader.join().unwrap();
}

#[test]
fn half_closed_client_still_gets_all_replies_then_eof() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let n = 40_000;
    let mut w = c.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        send(&mut w, &incr_pipeline(n));
        // The close arrives behind data the server has not read yet.
        w.shutdown(Shutdown::Write).unwrap();
    });
    // Every reply, then the server closes the connection (EOF, not the read timeout).
    let (got, closed) = read_to_close(&mut c);
    writer.join().unwrap();
    assert!(closed, "the server should close the connection after the last reply");
    let want = incr_replies(n);
    assert!(
        got == want,
        "replies differ at byte {} ({} of {} bytes)",
        first_difference(&got, &want),
        got.len(),
        want.len()
    );
}
