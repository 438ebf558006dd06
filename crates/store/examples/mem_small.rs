//! Bytes per value of tiny collections (1..8 elements), measured under jemalloc, next to the
//! types' own `mem_usage()` and their inline struct sizes. Run:
//! `cargo run --release -p store --example mem_small [N]`.
//! The server adds its per-key entry (about 40 bytes) to these figures.

mod common;

use store::types::{Hash, List, Set, SparseArray, ZSet};

fn row<T>(name: &str, n: usize, e: usize, build: impl Fn(usize) -> T, mem: impl Fn(&T) -> usize) {
    let mut i = 0;
    let m = common::measure(
        n,
        1,
        || {
            i += 1;
            build(i)
        },
        mem,
    );
    println!(
        "{name:5} x{e}: size_of {:3}, jemalloc {:6.1} B/value, mem_usage {:6.1} B/value",
        std::mem::size_of::<T>(),
        m.jemalloc,
        m.reported
    );
}

fn main() {
    let n = common::arg(1, 10_000);
    for e in [1usize, 2, 4, 8] {
        row(
            "set",
            n,
            e,
            |i| {
                let mut s = Set::new();
                for j in 0..e {
                    s.add(format!("v{i}-{j}").as_bytes());
                }
                s
            },
            Set::mem_usage,
        );
        row(
            "hash",
            n,
            e,
            |i| {
                let mut h = Hash::new();
                for j in 0..e {
                    h.set(format!("f{j}").as_bytes(), format!("v{i}").as_bytes());
                }
                h
            },
            Hash::mem_usage,
        );
        row(
            "list",
            n,
            e,
            |i| {
                let mut l = List::new();
                for _ in 0..e {
                    l.push_back(format!("v{i}").as_bytes());
                }
                l
            },
            List::mem_usage,
        );
        row(
            "zset",
            n,
            e,
            |i| {
                let mut z = ZSet::new();
                for j in 0..e {
                    z.insert(format!("m{i}-{j}").as_bytes(), (i + j) as f64);
                }
                z
            },
            ZSet::mem_usage,
        );
        row(
            "array",
            n,
            e,
            |i| {
                let mut a = SparseArray::new();
                for j in 0..e {
                    a.set(5 + j as u64, format!("v{i}").as_bytes());
                }
                a
            },
            SparseArray::mem_usage,
        );
    }
}
