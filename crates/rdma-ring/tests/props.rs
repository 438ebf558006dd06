//! The ring protocol against a FIFO model, over the shared-memory fabric in its adversarial
//! mode: every write lands over garbage, part of its bytes in random order, and completes (with
//! its immediate) at a random later call. A consumer that read a single byte past what the
//! immediates announced would hand garbage to the model and fail.

use goblin_rdma::hello;
use goblin_rdma::shm::ShmFabric;
use goblin_rdma::Endpoint;
use proptest::prelude::*;
use std::io;
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// Two endpoints in this process over a loopback TCP connection (a: server, b: client).
fn pair(ring_a: usize, ring_b: usize, seed: Option<u64>) -> (Endpoint, Endpoint) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    let mut fa = ShmFabric::new(ring_a).unwrap();
    let mut fb = ShmFabric::new(ring_b).unwrap();
    if let Some(seed) = seed {
        fa.set_adversarial(seed);
        fb.set_adversarial(seed.wrapping_mul(31).wrapping_add(7));
    }
    let mut a = Endpoint::accept_with(s, Box::new(fa)).unwrap();
    let mut c2 = c.try_clone().unwrap();
    c2.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let h = read_server_hello(&mut c2);
    let b = Endpoint::connect_with(c, Box::new(fb), h).unwrap();
    // The server completes its side on its next read.
    let mut buf = [0u8; 1];
    for _ in 0..1000 {
        match a.try_read(&mut buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if a.peer_ring_size() != 0 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            r => panic!("unexpected {r:?}"),
        }
    }
    assert_eq!(a.peer_ring_size(), ring_b);
    (a, b)
}

fn read_server_hello(s: &mut TcpStream) -> hello::Hello {
    use std::io::Read;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 256];
    loop {
        let n = s.read(&mut chunk).unwrap();
        buf.extend_from_slice(&chunk[..n]);
        if let Some((h, _)) = hello::parse(&buf).unwrap() {
            return h;
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// a writes this many bytes (of its next stream bytes) to b, or b to a.
    Write(bool, usize),
    /// b reads at most this many, or a does.
    Read(bool, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (any::<bool>(), 1usize..10_000).prop_map(|(d, n)| Op::Write(d, n)),
        (any::<bool>(), 1usize..10_000).prop_map(|(d, n)| Op::Read(d, n)),
    ]
}

/// The byte at stream position i of a direction: a pattern no garbage reproduces for long.
fn byte(dir: bool, i: u64) -> u8 {
    (i.wrapping_mul(2654435761) >> 7) as u8 ^ if dir { 0x5a } else { 0xa5 }
}

struct Side {
    sent: u64,
    received: u64,
}

fn run(ops: &[Op], seed: Option<u64>) {
    let (mut a, mut b) = pair(4096, 8192, seed);
    let mut s = [Side { sent: 0, received: 0 }, Side { sent: 0, received: 0 }];
    let step = |w: &mut Endpoint, side: &mut Side, dir: bool, n: usize| {
        let buf: Vec<u8> = (side.sent..side.sent + n as u64).map(|i| byte(dir, i)).collect();
        match w.try_write(&buf) {
            Ok(k) => {
                assert!(k > 0 && k <= n);
                side.sent += k as u64;
            }
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::WouldBlock),
        }
    };
    let read = |r: &mut Endpoint, side: &mut Side, dir: bool, n: usize| {
        let mut buf = vec![0u8; n];
        match r.try_read(&mut buf) {
            Ok(k) => {
                assert!(k > 0, "EOF on a live connection");
                for (j, &x) in buf[..k].iter().enumerate() {
                    assert_eq!(x, byte(dir, side.received + j as u64), "byte {}", side.received + j as u64);
                }
                side.received += k as u64;
            }
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::WouldBlock),
        }
    };
    for o in ops {
        match *o {
            Op::Write(true, n) => step(&mut a, &mut s[0], true, n),
            Op::Write(false, n) => step(&mut b, &mut s[1], false, n),
            Op::Read(true, n) => {
                let (s0, _) = s.split_at_mut(1);
                read(&mut b, &mut s0[0], true, n)
            }
            Op::Read(false, n) => {
                let (_, s1) = s.split_at_mut(1);
                read(&mut a, &mut s1[0], false, n)
            }
        }
    }
    // Drain both directions: everything written arrives, in order, and nothing more.
    for _ in 0..100_000 {
        if s[0].received == s[0].sent && s[1].received == s[1].sent {
            break;
        }
        let (s0, s1) = s.split_at_mut(1);
        read(&mut b, &mut s0[0], true, 65536);
        read(&mut a, &mut s1[0], false, 65536);
    }
    assert_eq!(s[0].received, s[0].sent);
    assert_eq!(s[1].received, s[1].sent);
    // Quiet now: both may sleep.
    for _ in 0..1000 {
        let (x, y) = (a.arm_read().unwrap(), b.arm_read().unwrap());
        if x && y {
            return;
        }
        a.disarm();
        b.disarm();
        let mut buf = [0u8; 1];
        assert!(a.try_read(&mut buf).is_err() && b.try_read(&mut buf).is_err());
    }
    panic!("the endpoints never became idle");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn fifo_over_adversarial_fabric(ops in proptest::collection::vec(op(), 1..200), seed in any::<u64>()) {
        run(&ops, Some(seed));
    }

    #[test]
    fn fifo_over_plain_fabric(ops in proptest::collection::vec(op(), 1..200)) {
        run(&ops, None);
    }
}

/// A write into a full ring waits; the peer's reads free space by credits and the writer
/// goes on; the producer never overruns (the model would see overwritten bytes).
#[test]
fn full_ring_and_credits() {
    let (mut a, mut b) = pair(4096, 4096, None);
    let data: Vec<u8> = (0..4096u64).map(|i| byte(true, i)).collect();
    assert_eq!(a.try_write(&data).unwrap(), 4096);
    assert_eq!(a.try_write(b"x").unwrap_err().kind(), io::ErrorKind::WouldBlock);
    let mut got = vec![0u8; 1000];
    // 1000 bytes consumed is less than a quarter of 4096: no credit yet.
    assert_eq!(b.try_read(&mut got).unwrap(), 1000);
    assert_eq!(a.try_write(b"x").unwrap_err().kind(), io::ErrorKind::WouldBlock);
    assert!(!a.has_input());
    // One more read crosses it: 1100 bytes are credited.
    assert_eq!(b.try_read(&mut got[..100]).unwrap(), 100);
    assert!(a.has_input(), "room again is reported to a blocked writer");
    assert!(!a.has_input(), "once");
    assert_eq!(a.try_write(&data).unwrap(), 1100);
}

/// A peer that announces more than the ring can hold is refused, not trusted.
#[test]
fn peer_eof_is_seen_after_its_data() {
    let (mut a, mut b) = pair(4096, 4096, None);
    assert_eq!(b.try_write(b"hello").unwrap(), 5);
    drop(b);
    let mut buf = [0u8; 16];
    let mut got = Vec::new();
    for _ in 0..1000 {
        match a.try_read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(got, b"hello");
    assert!(a.peer_closed());
}

/// Blocking waits across threads: a sleeping reader is woken by the doorbell.
#[test]
fn sleeping_reader_is_woken() {
    let (mut a, mut b) = pair(4096, 4096, None);
    let t = std::thread::spawn(move || {
        let mut total = Vec::new();
        let mut buf = [0u8; 4096];
        while total.len() < 100_000 {
            b.wait(true, Duration::ZERO).unwrap();
            match b.try_read(&mut buf) {
                Ok(n) => total.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        total
    });
    let data: Vec<u8> = (0..100_000u64).map(|i| byte(true, i)).collect();
    let mut off = 0;
    while off < data.len() {
        std::thread::sleep(Duration::from_micros(200));
        match a.try_write(&data[off..(off + 3000).min(data.len())]) {
            Ok(n) => off += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => a.wait(false, Duration::ZERO).unwrap(),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(t.join().unwrap(), data);
}
