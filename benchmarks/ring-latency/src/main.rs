//! One client, one request in flight: times `n` SET and `n` GET round trips (alternating, after
//! a warm-up) over a ring (`ring:PATH`), a Unix socket (`unix:PATH`) or TCP (`tcp:HOST:PORT`),
//! and prints one JSON line per command with the percentiles in microseconds.
//!
//! `ring-latency TARGET [N] [WARMUP]`

use goblin_ring::reply::{encode_command, reply_len};
use std::io::{Read, Write};
use std::time::Instant;

enum Conn {
    Ring(goblin_ring::Client),
    Sock(Box<dyn ReadWrite>, Vec<u8>),
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

impl Conn {
    fn open(target: &str) -> Conn {
        if let Some(p) = target.strip_prefix("ring:") {
            Conn::Ring(goblin_ring::Client::connect(p).expect("ring connect"))
        } else if let Some(p) = target.strip_prefix("unix:") {
            Conn::Sock(
                Box::new(std::os::unix::net::UnixStream::connect(p).expect("unix connect")),
                Vec::new(),
            )
        } else if let Some(a) = target.strip_prefix("tcp:") {
            let s = std::net::TcpStream::connect(a).expect("tcp connect");
            s.set_nodelay(true).unwrap();
            Conn::Sock(Box::new(s), Vec::new())
        } else {
            panic!("target must be ring:PATH, unix:PATH or tcp:HOST:PORT");
        }
    }

    /// One round trip; the reply must start with `want`.
    fn query(&mut self, req: &[u8], args: &[&[u8]], want: &[u8]) {
        let reply = match self {
            Conn::Ring(c) => c.query(args).expect("ring query"),
            Conn::Sock(s, buf) => {
                s.write_all(req).expect("write");
                let mut chunk = [0u8; 4096];
                loop {
                    if let Some(n) = reply_len(buf).expect("RESP reply") {
                        break buf.drain(..n).collect();
                    }
                    let n = s.read(&mut chunk).expect("read");
                    assert!(n > 0, "server closed");
                    buf.extend_from_slice(&chunk[..n]);
                }
            }
        };
        assert!(reply.starts_with(want), "unexpected reply {:?}", String::from_utf8_lossy(&reply));
    }
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let target = args.get(1).expect("usage: ring-latency TARGET [N] [WARMUP]");
    let n: usize = args.get(2).map_or(100_000, |s| s.parse().unwrap());
    let warm: usize = args.get(3).map_or(10_000, |s| s.parse().unwrap());
    let mut c = Conn::open(target);
    let value = b"0123456789abcdef";
    let set_args: [&[u8]; 3] = [b"SET", b"bench:key", value];
    let get_args: [&[u8]; 2] = [b"GET", b"bench:key"];
    let (mut set_req, mut get_req) = (Vec::new(), Vec::new());
    encode_command(&set_args, &mut set_req);
    encode_command(&get_args, &mut get_req);
    let (mut set_ns, mut get_ns) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..warm + n {
        let t = Instant::now();
        c.query(&set_req, &set_args, b"+OK");
        let t1 = Instant::now();
        c.query(&get_req, &get_args, b"$16");
        let t2 = Instant::now();
        if i >= warm {
            set_ns.push((t1 - t).as_nanos() as u64);
            get_ns.push((t2 - t1).as_nanos() as u64);
        }
    }
    for (op, mut v) in [("SET", set_ns), ("GET", get_ns)] {
        v.sort_unstable();
        let mean = v.iter().sum::<u64>() as f64 / v.len() as f64 / 1000.0;
        println!(
            "{{\"target\":\"{target}\",\"op\":\"{op}\",\"n\":{},\"p50\":{:.2},\"p99\":{:.2},\"p999\":{:.2},\"mean\":{mean:.2}}}",
            v.len(),
            pct(&v, 0.50),
            pct(&v, 0.99),
            pct(&v, 0.999)
        );
    }
}
