//! Bytes per field of the six-type dataset's hashes, measured under jemalloc.
//!
//! Builds `N` hashes of 1,000 fields `f{k}` -> `v{k:06}` and compares jemalloc's allocated
//! bytes with the sum of `Hash::mem_usage()`. Run:
//! `cargo run --release -p store --example mem_hash [N]` (goal: <= 32 bytes per field).

use store::types::Hash;
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
    let mut hashes = Vec::with_capacity(n);
    for _ in 0..n {
        let mut h = Hash::new();
        for k in 0..1000 {
            h.set(format!("f{k}").as_bytes(), format!("v{k:06}").as_bytes());
        }
        hashes.push(Box::new(h));
    }
    let used = allocated() - before - n * std::mem::size_of::<Box<Hash>>();
    let reported: usize = hashes.iter().map(|h| h.mem_usage()).sum();
    let elems = (n * 1000) as f64;
    println!(
        "hashes: {n} x 1000 fields ({}): jemalloc {:.2} B/field, mem_usage {:.2} B/field (goal <= 32, Redis 64)",
        hashes[0].encoding(),
        used as f64 / elems,
        reported as f64 / elems
    );
}
