//! List of byte strings. (Placeholder representation; the compact one replaces it.)

use crate::Plain;
use std::collections::VecDeque;

#[derive(Clone, Debug, Default)]
pub struct List {
    items: VecDeque<Vec<u8>>,
}

impl List {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    pub fn to_plain(&self) -> Plain {
        Plain::List(self.items.iter().cloned().collect())
    }
    pub fn mem_usage(&self) -> usize {
        self.items.iter().map(|m| m.len() + 24).sum()
    }
    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }
}
