//! Bytes per element of the six-type dataset's lists, measured under jemalloc.
//!
//! Builds `N` lists of 1,000 elements `e{k:06}` (RPUSH order) and compares jemalloc's
//! allocated bytes with the sum of `List::mem_usage()`. Run:
//! `cargo run --release -p store --example mem_list [N]` (goal: <= 9.3 bytes per element).
//! It then grows one list to a million elements from both ends and reports the slowest single
//! push and pop (chunks are fixed-size, so no push or pop should pause).

use store::types::List;
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
    let mut lists = Vec::with_capacity(n);
    for _ in 0..n {
        let mut l = List::new();
        for k in 0..1000 {
            l.push_back(format!("e{k:06}").as_bytes());
        }
        lists.push(Box::new(l));
    }
    let used = allocated() - before - n * std::mem::size_of::<Box<List>>();
    let reported: usize = lists.iter().map(|l| l.mem_usage()).sum();
    let elems = (n * 1000) as f64;
    println!(
        "lists: {n} x 1000 elements ({}): jemalloc {:.2} B/element, mem_usage {:.2} B/element (goal <= 9.3, Redis 9.3)",
        lists[0].encoding(),
        used as f64 / elems,
        reported as f64 / elems
    );
    drop(lists);

    let mut big = List::new();
    let mut worst_push = std::time::Duration::ZERO;
    let start = std::time::Instant::now();
    for k in 0..1_000_000u32 {
        let v = format!("e{k:07}");
        let t = std::time::Instant::now();
        if k % 2 == 0 {
            big.push_back(v.as_bytes());
        } else {
            big.push_front(v.as_bytes());
        }
        worst_push = worst_push.max(t.elapsed());
    }
    let grown = start.elapsed();
    let mem = big.mem_usage();
    let mut worst_pop = std::time::Duration::ZERO;
    let start = std::time::Instant::now();
    for k in 0..1_000_000u32 {
        let t = std::time::Instant::now();
        let v = if k % 2 == 0 { big.pop_back() } else { big.pop_front() };
        worst_pop = worst_pop.max(t.elapsed());
        assert!(v.is_some());
    }
    println!(
        "one list grown to 1,000,000 elements in {grown:?} ({:.2} B/element): slowest push {worst_push:?}; drained in {:?}, slowest pop {worst_pop:?}",
        mem as f64 / 1e6,
        start.elapsed()
    );
}
