//! Bytes per member of the six-type dataset's sets, measured under jemalloc.
//!
//! Builds `N` sets of 1,000 members `m{k:06}` and compares jemalloc's allocated
//! bytes with the sum of `Set::mem_usage()`. Run:
//! `cargo run --release -p store --example mem_set [N]` (goal: <= 28 bytes per member).
//! It then grows one set to a million members and reports the slowest single SADD (resizes
//! are incremental, so no insert should pause for long).

use store::types::Set;
use tikv_jemalloc_ctl::{epoch, stats};

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn allocated() -> usize {
    epoch::advance().expect("jemalloc epoch");
    stats::allocated::read().expect("jemalloc stats")
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let before = allocated();
    let mut sets = Vec::with_capacity(n);
    for _ in 0..n {
        let mut s = Set::new();
        for k in 0..1000 {
            s.add(format!("m{k:06}").as_bytes());
        }
        sets.push(Box::new(s));
    }
    let used = allocated() - before - n * std::mem::size_of::<Box<Set>>();
    let reported: usize = sets.iter().map(|s| s.mem_usage()).sum();
    let elems = (n * 1000) as f64;
    println!(
        "sets: {n} x 1000 members ({}): jemalloc {:.2} B/member, mem_usage {:.2} B/member (goal <= 28, Redis 56)",
        sets[0].encoding(),
        used as f64 / elems,
        reported as f64 / elems
    );

    drop(sets);

    let mut big = Set::new();
    let mut worst = std::time::Duration::ZERO;
    let mut slow = 0;
    let start = std::time::Instant::now();
    for k in 0..1_000_000u32 {
        let m = format!("m{k:07}");
        let t = std::time::Instant::now();
        big.add(m.as_bytes());
        let d = t.elapsed();
        worst = worst.max(d);
        slow += (d.as_micros() >= 1000) as u32;
        if d.as_micros() >= 1000 && std::env::var("SHOW").is_ok() {
            eprintln!("slow add #{k}: {d:?}");
        }
    }
    println!(
        "one set grown to 1,000,000 members in {:?}: slowest SADD {:?}, {slow} adds took >= 1 ms, {:.2} B/member",
        start.elapsed(),
        worst,
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
