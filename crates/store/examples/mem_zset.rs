//! Bytes per member of the six-type dataset's sorted sets, measured under jemalloc.
//!
//! Builds `N` sorted sets of 1,000 members `m{k:06}` scored `k` (inserted in ascending order,
//! as the loader writes them) and compares jemalloc's allocated bytes with the sum of
//! `ZSet::mem_usage()`; then does the same with the members inserted in a shuffled order.
//! Also times the slowest single insert while one set grows to `BIG` members, then rank
//! lookups on that set. Run:
//! `cargo run --release -p store --example mem_zset [N] [BIG]` (goal: <= 38 bytes per member).

mod common;

use std::time::Instant;
use store::types::ZSet;

fn measure(n: usize, order: &[usize], label: &str) {
    let build = || {
        let mut z = ZSet::new();
        for &k in order {
            z.insert(format!("m{k:06}").as_bytes(), k as f64);
        }
        z
    };
    let m = common::measure(n, 1000, build, ZSet::mem_usage);
    println!(
        "zsets ({label}): {n} x 1000 members ({}): jemalloc {:.2} B/member, mem_usage {:.2} B/member (goal <= 38, Redis 110)",
        m.values[0].encoding(),
        m.jemalloc,
        m.reported
    );
}

fn main() {
    let n = common::arg(1, 1000);
    let big = common::arg(2, 1_000_000);
    let ascending: Vec<usize> = (0..1000).collect();
    measure(n, &ascending, "ascending");
    // A fixed permutation (multiplicative step coprime with 1000).
    let shuffled: Vec<usize> = (0..1000).map(|k| (k * 617 + 13) % 1000).collect();
    measure(n, &shuffled, "shuffled");

    let mut z = ZSet::new();
    let mut worst = std::time::Duration::ZERO;
    let mut over_1ms = 0usize;
    let start = Instant::now();
    for k in 0..big {
        // Scattered scores so that inserts land all over the order.
        let score = ((k as u64).wrapping_mul(2_654_435_761) % 1_000_003) as f64;
        let t = Instant::now();
        z.insert(format!("m{k:09}").as_bytes(), score);
        let e = t.elapsed();
        if e > std::time::Duration::from_millis(1) {
            over_1ms += 1;
            if std::env::var("ZDEBUG").is_ok() && e > std::time::Duration::from_millis(5) {
                println!("slow insert {k}: {e:.2?}");
            }
        }
        worst = worst.max(e);
    }
    println!(
        "growth: {big} inserts in {:.2?}, slowest single insert {:.2?} ({over_1ms} over 1 ms), {:.2} B/member",
        start.elapsed(),
        worst,
        z.mem_usage() as f64 / big as f64
    );

    // Rank lookups (ZRANK, ZRANGE by rank) on the big set: O(log n) with the rank tree.
    let lookups = 100_000usize;
    let t = Instant::now();
    let mut sum = 0usize;
    for i in 0..lookups {
        let k = (i as u64).wrapping_mul(2_654_435_761) as usize % big;
        sum += z.rank(format!("m{k:09}").as_bytes()).map_or(0, |r| r.0);
    }
    let by_member = t.elapsed();
    let t = Instant::now();
    for i in 0..lookups {
        let r = (i as u64).wrapping_mul(40_503) as usize % big;
        sum += z.get_by_rank(r).map_or(0, |e| e.0.len());
    }
    println!(
        "ranks: {lookups} ZRANK in {by_member:.2?} ({:.2?} each), {lookups} by-rank reads in {:.2?} ({:.2?} each) [{}]",
        by_member / lookups as u32,
        t.elapsed(),
        t.elapsed() / lookups as u32,
        sum % 10
    );
}
