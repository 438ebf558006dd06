//! Parser throughput: one million pipelined `SET key:000123 <32 bytes>` requests parsed from a
//! single buffer, as the server does with a full read.
//!
//! `cargo run --release -p micro --bin resp-parse`

use resp::RequestParser;

fn main() {
    let mut one = Vec::new();
    resp::reply::bulk_array(&mut one, &[b"SET".to_vec(), b"key:000123".to_vec(), vec![b'v'; 32]]);
    let n = 1_000_000;
    let stream: Vec<u8> = one.iter().copied().cycle().take(one.len() * n).collect();
    let mut p = RequestParser::default();
    let started = std::time::Instant::now();
    let (mut at, mut requests, mut total) = (0, 0usize, 0usize);
    while let Some(used) = p.next(&stream[at..]).expect("valid stream") {
        total += p.arg_slices(&stream[at..]).map(|a| a.len()).sum::<usize>();
        at += used;
        requests += 1;
    }
    let el = started.elapsed();
    assert_eq!(requests, n, "every request parsed");
    println!(
        "{n} SET requests in {el:?} ({:.1} ns/request, {total} arg bytes)",
        el.as_nanos() as f64 / n as f64
    );
}
