//! Sparse array: u64 index (0..=2^64-2) -> byte string. (Placeholder representation.)

use crate::Plain;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default)]
pub struct SparseArray {
    items: BTreeMap<u64, Vec<u8>>,
}

impl SparseArray {
    pub fn new() -> Self {
        Self::default()
    }
    /// Number of elements that exist.
    pub fn count(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    pub fn to_plain(&self) -> Plain {
        Plain::Array(self.items.iter().map(|(i, v)| (*i, v.clone())).collect())
    }
    pub fn mem_usage(&self) -> usize {
        self.items.values().map(|v| v.len() + 40).sum()
    }
    pub fn encoding(&self) -> &'static str {
        "sparsearray"
    }
}
