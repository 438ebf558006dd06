//! Sorted set: member -> score, ordered by (score, member). (Placeholder representation.)

use crate::Plain;
use std::collections::HashMap;

#[derive(Clone, Debug, Default)]
pub struct ZSet {
    scores: HashMap<Vec<u8>, f64>,
}

impl ZSet {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn len(&self) -> usize {
        self.scores.len()
    }
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }
    pub fn to_plain(&self) -> Plain {
        let mut v: Vec<(Vec<u8>, u64)> = self.scores.iter().map(|(m, s)| (m.clone(), s.to_bits())).collect();
        v.sort();
        Plain::ZSet(v)
    }
    pub fn mem_usage(&self) -> usize {
        self.scores.keys().map(|m| m.len() + 56).sum()
    }
    pub fn encoding(&self) -> &'static str {
        "skiplist"
    }
}
