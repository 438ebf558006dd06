//! Hash: field -> value. (Placeholder representation; the compact one replaces it.)

use crate::Plain;
use std::collections::HashMap;

#[derive(Clone, Debug, Default)]
pub struct Hash {
    map: HashMap<Vec<u8>, Vec<u8>>,
}

impl Hash {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    /// Canonical dump for equality checks.
    pub fn to_plain(&self) -> Plain {
        Plain::Hash(self.map.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
    }
    /// Bytes this value occupies on the heap, as the allocator would count them (approximate
    /// until the compact encoding lands).
    pub fn mem_usage(&self) -> usize {
        self.map.iter().map(|(k, v)| k.len() + v.len() + 48).sum()
    }
    pub fn encoding(&self) -> &'static str {
        "hashtable"
    }
}
