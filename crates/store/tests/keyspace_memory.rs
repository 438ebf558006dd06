//! Memory of one million string keys, measured by jemalloc itself: `str:{i}` -> `v{i:010}`
//! (an 11-byte value), the benchmark of issue 2. The goal is at most 44 bytes per key (half of
//! Redis's 88). The only test in this binary, so nothing else allocates while it measures.
//!
//! Run (prints the figure): `cargo test -p store --release --test keyspace_memory -- --nocapture`.

use std::time::{Duration, Instant};
use store::{Keyspace, Value};
use tikv_jemalloc_ctl::{epoch, stats};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn allocated() -> usize {
    epoch::advance().expect("jemalloc epoch");
    stats::allocated::read().expect("jemalloc stats.allocated")
}

#[test]
fn one_million_string_keys_cost_at_most_44_bytes_each() {
    const N: usize = 1_000_000;
    let before = allocated();
    let mut ks = Keyspace::new();
    let mut slowest = Duration::ZERO;
    let mut key = Vec::with_capacity(16);
    for i in 0..N {
        key.clear();
        key.extend_from_slice(format!("str:{i}").as_bytes());
        let value = Value::Str(format!("v{i:010}").into_bytes());
        let t = Instant::now();
        ks.insert(&key, value, None);
        slowest = slowest.max(t.elapsed());
    }
    // Finish any resize in progress so both bucket arrays are not counted at once.
    while ks.rehash_step(1000) {}
    drop(key);
    let after = allocated();
    let per_key = (after - before) as f64 / N as f64;
    println!(
        "keyspace: {N} keys, {} bytes allocated, {per_key:.2} bytes/key (bucket array {} bytes); \
         slowest single insert {slowest:?}",
        after - before,
        ks.table_overhead()
    );
    assert_eq!(ks.len(), N);
    assert_eq!(ks.get(b"str:999999").map(|v| v.to_plain()), Some(store::Plain::Str(b"v0000999999".to_vec())));
    assert!(per_key <= 44.0, "{per_key:.2} bytes per key");
    // Everything goes back to the allocator on drop.
    drop(ks);
    let end = allocated();
    assert!(end <= before + 64 * 1024, "leaked {} bytes", end.saturating_sub(before));
}
