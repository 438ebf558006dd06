//! The atomics the ring uses: std's, or loom's when model checking (`--cfg loom`).

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicU64, Ordering};
