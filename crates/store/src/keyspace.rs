//! The keyspace: key -> (value, optional absolute expiry).
//!
//! (Placeholder table on std's HashMap; the compact incremental-rehash table replaces it behind
//! this same API.)
//!
//! Expiry is passive here: the keyspace never removes a key by itself. The engine asks
//! [`Keyspace::is_expired`] on access and [`Keyspace::collect_expired`] in the active cycle,
//! removes the key and emits its `DEL` mutation, so that every removal is journaled.

use crate::types::string::parse_canonical_i64;
use crate::value::{StrRef, Value, ValueMut, ValueRef};
use crate::Millis;
use std::collections::HashMap;

struct Entry {
    value: Value,
    expire_at: Option<Millis>,
}

#[derive(Default)]
pub struct Keyspace {
    map: HashMap<Box<[u8]>, Entry>,
    volatile: usize,
}

/// Stores canonical decimal strings as integers.
fn normalize(v: Value) -> Value {
    match v {
        Value::Str(b) => match parse_canonical_i64(&b) {
            Some(i) => Value::Int(i),
            None => Value::Str(b),
        },
        other => other,
    }
}

impl Keyspace {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of keys, including expired keys not yet removed.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Number of keys with an expiry.
    pub fn volatile_len(&self) -> usize {
        self.volatile
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.map.contains_key(key)
    }

    /// The value at `key`, whether or not its deadline has passed.
    pub fn get(&self, key: &[u8]) -> Option<ValueRef<'_>> {
        self.map.get(key).map(|e| e.value.as_ref())
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<ValueMut<'_>> {
        self.map.get_mut(key).map(|e| match &mut e.value {
            Value::Str(b) => ValueMut::Str(StrRef::Bytes(b)),
            Value::Int(i) => ValueMut::Str(StrRef::Int(*i)),
            Value::Hash(h) => ValueMut::Hash(h),
            Value::Set(s) => ValueMut::Set(s),
            Value::ZSet(z) => ValueMut::ZSet(z),
            Value::List(l) => ValueMut::List(l),
            Value::Array(a) => ValueMut::Array(a),
        })
    }

    /// Sets `key` to `value` with deadline `expire_at` (None: persistent), replacing any old
    /// value and deadline. Returns the old value.
    pub fn insert(&mut self, key: &[u8], value: Value, expire_at: Option<Millis>) -> Option<Value> {
        let entry = Entry { value: normalize(value), expire_at };
        if expire_at.is_some() {
            self.volatile += 1;
        }
        let old = self.map.insert(key.into(), entry)?;
        if old.expire_at.is_some() {
            self.volatile -= 1;
        }
        Some(old.value)
    }

    /// Replaces the value of an existing key and keeps its deadline; inserts a persistent key
    /// if it is missing.
    pub fn replace_value(&mut self, key: &[u8], value: Value) {
        match self.map.get_mut(key) {
            Some(e) => e.value = normalize(value),
            None => {
                self.insert(key, value, None);
            }
        }
    }

    /// Removes `key` and returns its value.
    pub fn remove(&mut self, key: &[u8]) -> Option<Value> {
        let e = self.map.remove(key)?;
        if e.expire_at.is_some() {
            self.volatile -= 1;
        }
        Some(e.value)
    }

    /// Removes `key` and returns its value and deadline.
    pub fn take(&mut self, key: &[u8]) -> Option<(Value, Option<Millis>)> {
        let e = self.map.remove(key)?;
        if e.expire_at.is_some() {
            self.volatile -= 1;
        }
        Some((e.value, e.expire_at))
    }

    /// The deadline of `key`, if it exists and has one.
    pub fn expire_at(&self, key: &[u8]) -> Option<Millis> {
        self.map.get(key).and_then(|e| e.expire_at)
    }

    /// Sets or clears the deadline of an existing key. Returns false if the key is missing.
    pub fn set_expire(&mut self, key: &[u8], at: Option<Millis>) -> bool {
        match self.map.get_mut(key) {
            None => false,
            Some(e) => {
                match (e.expire_at.is_some(), at.is_some()) {
                    (false, true) => self.volatile += 1,
                    (true, false) => self.volatile -= 1,
                    _ => {}
                }
                e.expire_at = at;
                true
            }
        }
    }

    /// True if `key` exists and its deadline is at or before `now`.
    pub fn is_expired(&self, key: &[u8], now: Millis) -> bool {
        matches!(self.map.get(key), Some(Entry { expire_at: Some(t), .. }) if *t <= now)
    }

    /// Active expiry: appends up to `max` keys whose deadline has passed to `out`, examining at
    /// most `budget` keys, starting where the previous call stopped. Returns how many keys it examined.
    pub fn collect_expired(&mut self, now: Millis, max: usize, _budget: usize, out: &mut Vec<Vec<u8>>) -> usize {
        let mut seen = 0;
        for (k, e) in self.map.iter() {
            seen += 1;
            if matches!(e.expire_at, Some(t) if t <= now) {
                out.push(k.to_vec());
                if out.len() >= max {
                    break;
                }
            }
        }
        seen
    }

    /// One step of a SCAN: calls `f` for keys after `cursor`, at least `count` of them unless the
    /// table ends, and returns the next cursor (0 when the iteration is complete). Every key
    /// present for the whole iteration is visited at least once, even across resizes.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], ValueRef<'_>)) -> u64 {
        let mut keys: Vec<&Box<[u8]>> = self.map.keys().collect();
        keys.sort();
        let start = cursor as usize;
        let end = (start + count.max(1)).min(keys.len());
        for k in &keys[start.min(keys.len())..end] {
            f(k, self.map[&***k].value.as_ref());
        }
        if end >= keys.len() {
            0
        } else {
            end as u64
        }
    }

    /// Calls `f` for every key (in no particular order).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], ValueRef<'_>, Option<Millis>)) {
        for (k, e) in &self.map {
            f(k, e.value.as_ref(), e.expire_at);
        }
    }

    /// A uniformly random key, or None if the keyspace is empty.
    pub fn random_key(&self, rng: &mut impl rand::Rng) -> Option<Vec<u8>> {
        if self.map.is_empty() {
            return None;
        }
        let n = rng.gen_range(0..self.map.len());
        self.map.keys().nth(n).map(|k| k.to_vec())
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        self.map.clear();
        self.volatile = 0;
    }

    /// Approximate heap bytes used by `key`'s entry (MEMORY USAGE).
    pub fn mem_usage(&self, key: &[u8]) -> Option<usize> {
        let e = self.map.get(key)?;
        let v = match &e.value {
            Value::Str(b) => b.len(),
            Value::Int(_) => 0,
            Value::Hash(h) => h.mem_usage(),
            Value::Set(s) => s.mem_usage(),
            Value::ZSet(z) => z.mem_usage(),
            Value::List(l) => l.mem_usage(),
            Value::Array(a) => a.mem_usage(),
        };
        Some(key.len() + v + 32)
    }
}
