//! Bytes per element of the six-type dataset's sparse arrays, measured under jemalloc.
//!
//! Builds `N` arrays of 1,000 elements `v{k:06}` at indexes `k * 1000` and compares
//! jemalloc's allocated bytes with the sum of `SparseArray::mem_usage()`. Run:
//! `cargo run --release -p store --example mem_array [N]` (goal: <= 16 bytes per element).
//! It then fills one array with a million elements at random indexes over the whole u64
//! space and reports the slowest single ARSET-equivalent.

use rand::{Rng, SeedableRng};
use store::types::SparseArray;
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
    let mut arrays = Vec::with_capacity(n);
    for _ in 0..n {
        let mut a = SparseArray::new();
        for k in 0..1000u64 {
            a.set(k * 1000, format!("v{k:06}").as_bytes());
        }
        arrays.push(Box::new(a));
    }
    let used = allocated() - before - n * std::mem::size_of::<Box<SparseArray>>();
    let reported: usize = arrays.iter().map(|a| a.mem_usage()).sum();
    let elems = (n * 1000) as f64;
    println!(
        "arrays: {n} x 1000 elements ({}, {} chunks each): jemalloc {:.2} B/element, mem_usage {:.2} B/element (goal <= 16)",
        arrays[0].encoding(),
        arrays[0].chunk_count(),
        used as f64 / elems,
        reported as f64 / elems
    );
    drop(arrays);

    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let mut big = SparseArray::new();
    let mut worst = std::time::Duration::ZERO;
    let mut slow = 0;
    let start = std::time::Instant::now();
    for k in 0..1_000_000u32 {
        let idx = rng.gen_range(0..u64::MAX - 1);
        let v = format!("v{k:07}");
        let t = std::time::Instant::now();
        big.set(idx, v.as_bytes());
        let d = t.elapsed();
        worst = worst.max(d);
        slow += (d.as_micros() >= 1000) as u32;
        if d.as_micros() >= 1000 && std::env::var("SHOW").is_ok() {
            eprintln!("slow set #{k}: {d:?}");
        }
    }
    println!(
        "one array filled with 1,000,000 random u64 indexes in {:?}: slowest set {worst:?}, {slow} sets took >= 1 ms, {:.2} B/element, {} chunks",
        start.elapsed(),
        big.mem_usage() as f64 / 1e6,
        big.chunk_count()
    );
}
