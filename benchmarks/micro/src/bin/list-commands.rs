//! Per-command cost of the benchmarked list commands through `Engine::run`, with no server:
//! LPUSH (one million), LRANGE 0 99 (100,000) and RPOP (one million) on one list.
//!
//! `cargo run --release -p micro --bin list-commands`

fn main() {
    let mut e = engine::Engine::default();
    let mut out = Vec::new();
    let mut time = |e: &mut engine::Engine, name: &str, n: usize, args: &[&[u8]]| {
        let t = std::time::Instant::now();
        for _ in 0..n {
            out.clear();
            e.run(args, 0, &mut out);
            e.commit(engine::Origin::Command);
        }
        println!("{name}: {:?} per command", t.elapsed() / n as u32);
    };
    time(&mut e, "LPUSH", 1_000_000, &[b"LPUSH", b"mylist", b"xxx"]);
    time(&mut e, "LRANGE_100", 100_000, &[b"LRANGE", b"mylist", b"0", b"99"]);
    time(&mut e, "RPOP", 1_000_000, &[b"RPOP", b"mylist"]);
}
