//! Bytes per field of the six-type dataset's hashes, measured under jemalloc.
//!
//! Builds `N` hashes of 1,000 fields `f{k}` -> `v{k:06}` and compares jemalloc's allocated
//! bytes with the sum of `Hash::mem_usage()`. Run:
//! `cargo run --release -p store --example mem_hash [N]` (goal: <= 32 bytes per field).

mod common;

use store::types::Hash;

fn main() {
    let n = common::arg(1, 1000);
    let build = || {
        let mut h = Hash::new();
        for k in 0..1000 {
            h.set(format!("f{k}").as_bytes(), format!("v{k:06}").as_bytes());
        }
        h
    };
    let m = common::measure(n, 1000, build, Hash::mem_usage);
    println!(
        "hashes: {n} x 1000 fields ({}): jemalloc {:.2} B/field, mem_usage {:.2} B/field (goal <= 32, Redis 64)",
        m.values[0].encoding(),
        m.jemalloc,
        m.reported
    );
}
