//! Set of byte strings. (Placeholder representation; the compact one replaces it.)

use crate::Plain;
use std::collections::HashSet;

#[derive(Clone, Debug, Default)]
pub struct Set {
    members: HashSet<Vec<u8>>,
}

impl Set {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn len(&self) -> usize {
        self.members.len()
    }
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
    pub fn to_plain(&self) -> Plain {
        Plain::Set(self.members.iter().cloned().collect())
    }
    pub fn mem_usage(&self) -> usize {
        self.members.iter().map(|m| m.len() + 40).sum()
    }
    pub fn encoding(&self) -> &'static str {
        "hashtable"
    }
}
