//! Bytes per element of the six-type dataset's sparse arrays, measured under jemalloc.
//!
//! Builds `N` arrays of 1,000 elements `v{k:06}` at indexes `k * 1000` and compares
//! jemalloc's allocated bytes with the sum of `SparseArray::mem_usage()`. Run:
//! `cargo run --release -p store --example mem_array [N]` (goal: <= 16 bytes per element).
//! It then fills one array with a million elements at random indexes over the whole u64
//! space and reports the slowest single ARSET-equivalent.

mod common;

use rand::{Rng, SeedableRng};
use store::types::SparseArray;

fn main() {
    let n = common::arg(1, 1000);
    let build = || {
        let mut a = SparseArray::new();
        for k in 0..1000u64 {
            a.set(k * 1000, format!("v{k:06}").as_bytes());
        }
        a
    };
    let m = common::measure(n, 1000, build, SparseArray::mem_usage);
    println!(
        "arrays: {n} x 1000 elements ({}, {} chunks each): jemalloc {:.2} B/element, mem_usage {:.2} B/element (goal <= 16)",
        m.values[0].encoding(),
        m.values[0].chunk_count(),
        m.jemalloc,
        m.reported
    );
    drop(m);

    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let mut big = SparseArray::new();
    let mut set = common::Slowest::default();
    let start = std::time::Instant::now();
    for k in 0..1_000_000u32 {
        let idx = rng.gen_range(0..u64::MAX - 1);
        let v = format!("v{k:07}");
        let (_, d) = set.time(|| big.set(idx, v.as_bytes()));
        if d.as_micros() >= 1000 && std::env::var("SHOW").is_ok() {
            eprintln!("slow set #{k}: {d:?}");
        }
    }
    let (worst, slow) = (set.worst, set.over_1ms);
    println!(
        "one array filled with 1,000,000 random u64 indexes in {:?}: slowest set {worst:?}, {slow} sets took >= 1 ms, {:.2} B/element, {} chunks",
        start.elapsed(),
        big.mem_usage() as f64 / 1e6,
        big.chunk_count()
    );
}
