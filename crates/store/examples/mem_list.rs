//! Bytes per element of the six-type dataset's lists, measured under jemalloc.
//!
//! Builds `N` lists of 1,000 elements `e{k:06}` (RPUSH order) and compares jemalloc's
//! allocated bytes with the sum of `List::mem_usage()`. Run:
//! `cargo run --release -p store --example mem_list [N]` (goal: <= 9.3 bytes per element).
//! It then grows one list to a million elements from both ends and reports the slowest single
//! push and pop (chunks are fixed-size, so no push or pop should pause).

mod common;

use store::types::List;

fn main() {
    let n = common::arg(1, 1000);
    let build = || {
        let mut l = List::new();
        for k in 0..1000 {
            l.push_back(format!("e{k:06}").as_bytes());
        }
        l
    };
    let m = common::measure(n, 1000, build, List::mem_usage);
    println!(
        "lists: {n} x 1000 elements ({}): jemalloc {:.2} B/element, mem_usage {:.2} B/element (goal <= 9.3, Redis 9.3)",
        m.values[0].encoding(),
        m.jemalloc,
        m.reported
    );
    drop(m);

    let mut big = List::new();
    let mut push = common::Slowest::default();
    let start = std::time::Instant::now();
    for k in 0..1_000_000u32 {
        let v = format!("e{k:07}");
        push.time(|| {
            if k % 2 == 0 {
                big.push_back(v.as_bytes());
            } else {
                big.push_front(v.as_bytes());
            }
        });
    }
    let grown = start.elapsed();
    let mem = big.mem_usage();
    let mut pop = common::Slowest::default();
    let start = std::time::Instant::now();
    for k in 0..1_000_000u32 {
        let (v, _) = pop.time(|| if k % 2 == 0 { big.pop_back() } else { big.pop_front() });
        assert!(v.is_some());
    }
    let (worst_push, worst_pop) = (push.worst, pop.worst);
    println!(
        "one list grown to 1,000,000 elements in {grown:?} ({:.2} B/element): slowest push {worst_push:?}; drained in {:?}, slowest pop {worst_pop:?}",
        mem as f64 / 1e6,
        start.elapsed()
    );
}
