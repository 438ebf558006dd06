//! What the `mem_*` examples share: jemalloc as the global allocator, its allocated-bytes
//! counter, the "build N values and divide the bytes they hold by their elements" measurement,
//! and a tracker for the slowest of many single operations.

// Each example uses only part of this module.
#![allow(dead_code)]

use std::time::{Duration, Instant};
use tikv_jemalloc_ctl::{epoch, stats};

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Bytes jemalloc currently has handed out (its statistics are refreshed first).
pub fn allocated() -> usize {
    epoch::advance().expect("jemalloc epoch");
    stats::allocated::read().expect("jemalloc stats")
}

/// The `i`th command-line argument (1 = first) as a number, or `default`.
pub fn arg(i: usize, default: usize) -> usize {
    std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

/// Values built by [`measure`] (kept alive by the caller for its own checks), and what they
/// cost per element.
pub struct Measured<T> {
    pub values: Vec<Box<T>>,
    /// jemalloc's bytes per element, without the `Box` pointers of the vector.
    pub jemalloc: f64,
    /// The values' own `mem_usage()` per element.
    pub reported: f64,
}

/// Builds `n` values of `elements` elements each with `build` and measures them, the jemalloc
/// figure being what the allocator really holds and `mem_usage` what the type reports.
pub fn measure<T>(
    n: usize,
    elements: usize,
    mut build: impl FnMut() -> T,
    mem_usage: impl Fn(&T) -> usize,
) -> Measured<T> {
    let before = allocated();
    let mut values = Vec::with_capacity(n);
    for _ in 0..n {
        values.push(Box::new(build()));
    }
    let used = allocated() - before - n * std::mem::size_of::<Box<T>>();
    let reported: usize = values.iter().map(|v| mem_usage(v)).sum();
    let elems = (n * elements) as f64;
    Measured { values, jemalloc: used as f64 / elems, reported: reported as f64 / elems }
}

/// The slowest of many timed operations and how many took 1 ms or more.
#[derive(Default)]
pub struct Slowest {
    pub worst: Duration,
    pub over_1ms: u32,
}

impl Slowest {
    /// Runs `op`, records its duration and returns its result with that duration.
    pub fn time<R>(&mut self, op: impl FnOnce() -> R) -> (R, Duration) {
        let t = Instant::now();
        let r = op();
        let d = t.elapsed();
        self.worst = self.worst.max(d);
        self.over_1ms += (d >= Duration::from_millis(1)) as u32;
        (r, d)
    }
}
