//! Input larger than one read per loop turn: the server reads a bounded amount per connection
//! per turn and continues on later turns. These tests check that nothing is lost or reordered
//! on the way, including when the client has already closed its sending side.

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
    // Another client is served meanwhile, and its commands see a consistent counter.
    send(&mut other, b"PING\r\n");
    assert_eq!(read_reply(&mut other), b"+PONG\r\n");
    let want = incr_replies(n);
    let mut got = vec![0u8; want.len()];
    big.read_exact(&mut got).expect("every reply");
    assert!(got == want, "replies differ at byte {}", first_difference(&got, &want));
    writer.join().unwrap();
    send(&mut other, b"*2\r\n$3\r\nGET\r\n$3\r\nctr\r\n");
    assert_eq!(read_reply(&mut other), format!("${}\r\n{n}\r\n", n.to_string().len()).into_bytes());
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
