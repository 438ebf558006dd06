//! Two processes, one ring pair: this test process holds the server side, a child (this same
//! test binary re-run with GOBLIN_RING_STRESS_FD set) the client side. Tiny rings (4 KiB) and
//! random chunk sizes make both sides fill, drain, wrap and sleep on the doorbell constantly.
//!
//! Phase 1: the child sends a pseudo-random stream of STREAM bytes; the parent checks every
//! byte. Phase 2: the parent sends another stream; the child checks it and exits 0 only if all
//! of it matched. A lost wake-up would hang: every wait is bounded by the hang guard below.
#![cfg(not(loom))]

use goblin_ring::Endpoint;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

const STREAM: usize = 16 << 20;
const ENV: &str = "GOBLIN_RING_STRESS_FD";

/// xorshift64*: the same sequence on both sides from the same seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn stream_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut r = Rng(seed);
    (0..n).map(|_| r.next() as u8).collect()
}

/// Alternates spinning and sleeping so that both the fast path and the doorbell are used.
fn spin_for(i: usize) -> Duration {
    if i.rem_euclid(3) == 0 {
        Duration::ZERO
    } else {
        Duration::from_micros(20)
    }
}

fn send_all(ep: &mut Endpoint, data: &[u8], seed: u64) -> io::Result<()> {
    let mut r = Rng(seed);
    let mut at = 0;
    let mut i = 0;
    while at < data.len() {
        let chunk = 1 + (r.next() % 9000) as usize;
        let end = (at + chunk).min(data.len());
        match ep.try_write(&data[at..end]) {
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                i += 1;
                ep.wait(false, spin_for(i))?
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn recv_check(ep: &mut Endpoint, want: &[u8], seed: u64) -> io::Result<()> {
    let mut r = Rng(seed);
    let mut at = 0;
    let mut buf = vec![0u8; 10_000];
    let mut i = 0;
    while at < want.len() {
        let cap = 1 + (r.next() % buf.len() as u64) as usize;
        match ep.try_read(&mut buf[..cap]) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("EOF at byte {at}"))),
            Ok(n) => {
                if buf[..n] != want[at..at + n] {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("mismatch near byte {at}"),
                    ));
                }
                at += n;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                i += 1;
                ep.wait(true, spin_for(i))?
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The child's side (a no-op when run as an ordinary test).
#[test]
fn stress_child() {
    let Ok(fd) = std::env::var(ENV) else { return };
    let sock = unsafe { UnixStream::from_raw_fd(fd.parse().unwrap()) };
    let mut ep = Endpoint::connect(sock).expect("child: connect");
    send_all(&mut ep, &stream_bytes(1, STREAM), 11).expect("child: send");
    recv_check(&mut ep, &stream_bytes(2, STREAM), 22).expect("child: phase 2 stream differs");
}

#[test]
fn two_processes_stream_through_small_rings() {
    let (parent, child) = UnixStream::pair().unwrap();
    // The child inherits its end (no close-on-exec on that descriptor only).
    unsafe { libc::fcntl(child.as_raw_fd(), libc::F_SETFD, 0) };
    let mut proc = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "stress_child", "--nocapture", "--test-threads=1"])
        .env(ENV, child.as_raw_fd().to_string())
        .spawn()
        .unwrap();
    drop(child);
    // Hang guard: a lost wake-up shows as a test killed here, not a stuck CI job.
    let pid = proc.id();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(120));
        eprintln!("hang guard: killing child {pid} and failing");
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        std::process::exit(1);
    });
    let started = Instant::now();
    let mut ep = Endpoint::accept(parent, 4096).unwrap();
    recv_check(&mut ep, &stream_bytes(1, STREAM), 33).expect("parent: phase 1 stream differs");
    send_all(&mut ep, &stream_bytes(2, STREAM), 44).expect("parent: send");
    let status = proc.wait().unwrap();
    assert!(status.success(), "child failed: {status}");
    // The child is gone: the next read sees EOF once the ring is empty.
    let mut b = [0u8; 8];
    loop {
        match ep.try_read(&mut b) {
            Ok(0) => break,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => ep.wait(true, Duration::ZERO).unwrap(),
            other => panic!("expected EOF, got {other:?}"),
        }
    }
    eprintln!("2 x {STREAM} bytes through 4 KiB rings in {:?}", started.elapsed());
}
