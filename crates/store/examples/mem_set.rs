//! Bytes per member of the six-type dataset's sets, measured under jemalloc.
//!
//! Builds `N` sets of 1,000 members `m{k:06}` and compares jemalloc's allocated
//! bytes with the sum of `Set::mem_usage()`. Run:
//! `cargo run --release -p store --example mem_set [N]` (goal: <= 28 bytes per member).
//! It then grows one set to a million members and reports the slowest single SADD (resizes
//! are incremental, so no insert should pause for long).

mod common;

use store::types::Set;

fn main() {
    let n = common::arg(1, 1000);
    let build = || {
        let mut s = Set::new();
        for k in 0..1000 {
            s.add(format!("m{k:06}").as_bytes());
        }
        s
    };
    let m = common::measure(n, 1000, build, Set::mem_usage);
    println!(
        "sets: {n} x 1000 members ({}): jemalloc {:.2} B/member, mem_usage {:.2} B/member (goal <= 28, Redis 56)",
        m.values[0].encoding(),
        m.jemalloc,
        m.reported
    );

    drop(m);

    let mut big = Set::new();
    let mut add = common::Slowest::default();
    let start = std::time::Instant::now();
    for k in 0..1_000_000u32 {
        let m = format!("m{k:07}");
        let (_, d) = add.time(|| big.add(m.as_bytes()));
        if d.as_micros() >= 1000 && std::env::var("SHOW").is_ok() {
            eprintln!("slow add #{k}: {d:?}");
        }
    }
    println!(
        "one set grown to 1,000,000 members in {:?}: slowest SADD {:?}, {} adds took >= 1 ms, {:.2} B/member",
        start.elapsed(),
        add.worst,
        add.over_1ms,
        big.mem_usage() as f64 / 1e6
    );

    // And empty it again in random order: shrinking and chunk compaction are incremental too.
    let mut order: Vec<u32> = (0..1_000_000).collect();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let mut worst = std::time::Duration::ZERO;
    let start = std::time::Instant::now();
    for (n, k) in order.into_iter().enumerate() {
        let m = format!("m{k:07}");
        let t = std::time::Instant::now();
        big.remove(m.as_bytes());
        worst = worst.max(t.elapsed());
        if n == 900_000 {
            println!("after removing 90%: {:.2} B/remaining member", big.mem_usage() as f64 / 1e5);
        }
    }
    println!("emptied in {:?}: slowest SREM {:?}", start.elapsed(), worst);
}
