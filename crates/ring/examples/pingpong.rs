//! The ring's own floor: a thread echoing 32-byte messages back over one ring pair (no server,
//! no RESP), timed per round trip. `cargo run --release -p goblin-ring --example pingpong`

#[cfg(loom)]
fn main() {}

#[cfg(not(loom))]
fn main() {
    use goblin_ring::Endpoint;
    use std::io;
    use std::os::unix::net::UnixStream;
    use std::time::{Duration, Instant};

    let (a, b) = UnixStream::pair().unwrap();
    let server = std::thread::spawn(move || {
        let mut ep = Endpoint::accept(a, 1 << 16).unwrap();
        let mut buf = [0u8; 64];
        loop {
            match ep.try_read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    let mut at = 0;
                    while at < n {
                        match ep.try_write(&buf[at..n]) {
                            Ok(m) => at += m,
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                                ep.wait(false, Duration::from_micros(100)).unwrap()
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ep.wait(true, Duration::from_micros(100)).unwrap()
                }
                Err(e) => panic!("{e}"),
            }
        }
    });
    let mut ep = Endpoint::connect(b).unwrap();
    let msg = [7u8; 32];
    let mut times = Vec::new();
    for i in 0..200_000 {
        let t = Instant::now();
        assert_eq!(ep.try_write(&msg).unwrap(), 32);
        let mut got = 0;
        let mut buf = [0u8; 64];
        while got < 32 {
            if !ep.has_input() {
                ep.wait(true, Duration::from_micros(100)).unwrap();
            }
            match ep.try_read(&mut buf) {
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        if i >= 20_000 {
            times.push(t.elapsed().as_nanos() as u64);
        }
    }
    drop(ep);
    server.join().unwrap();
    times.sort_unstable();
    let p = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)] as f64 / 1000.0;
    println!("ring echo round trip: p50 {:.2} us, p99 {:.2} us, p99.9 {:.2} us", p(0.5), p(0.99), p(0.999));
}
