//! Hash: field -> value, both byte strings.
//!
//! Stored in a [`PackedTable`] of (field, value) records: up to 512 fields of at most 64 bytes
//! each scan a single packed chunk in insertion order (`OBJECT ENCODING` "listpack", as Redis's
//! `hash-max-listpack-*` defaults, 512 entries and 64 bytes); larger hashes add an open-addressing index of u32 record
//! addresses ("hashtable"). Either way no field or value is a separate allocation.

use super::packed::PackedTable;

/// (field, value) pairs gathered for [`Hash::from_records`].
pub type HashRecords = super::packed::Records<true>;
use crate::alloc::size_class;
use crate::Plain;
use rand::Rng;
use std::collections::{BTreeMap, HashMap};

type Deadlines = HashMap<Box<[u8]>, i64>;

/// Fields with a deadline (Redis 7.4's hash-field expiration) are kept in the table's
/// out-of-line part ([`PackedTable::aux_mut`]), so a hash without any pays nothing, and the
/// header stays 32 bytes. Invariant: every field named there exists in the table, and the map
/// is never empty (it goes back to None).
#[derive(Clone, Debug, Default)]
pub struct Hash {
    table: PackedTable<true>,
}

impl Hash {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.len() == 0
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.table.get(field)
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.table.contains(field)
    }

    /// Sets `field` to `value`, dropping any deadline it had (a field written anew, as HSET
    /// writes it, lives until told otherwise); returns true if the field is new.
    pub fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        self.set_field_deadline(field, None);
        self.table.insert(field, value)
    }

    /// Sets `field` to `value` and keeps its deadline (HINCRBY and HINCRBYFLOAT change a
    /// field's value, not its lifetime); returns true if the field is new.
    pub fn set_keep_deadline(&mut self, field: &[u8], value: &[u8]) -> bool {
        self.table.insert(field, value)
    }

    /// Removes `field` (and its deadline); returns true if it existed.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        self.set_field_deadline(field, None);
        self.table.remove(field)
    }

    fn deadlines(&self) -> Option<&Deadlines> {
        self.table.aux()?.deadlines.as_ref()
    }

    /// The deadline of `field` (unix ms), if it has one.
    pub fn field_deadline(&self, field: &[u8]) -> Option<i64> {
        self.deadlines()?.get(field).copied()
    }

    /// Gives an existing `field` the deadline `at`, or none (None). Returns false, changing
    /// nothing, when the field does not exist.
    pub fn set_field_deadline(&mut self, field: &[u8], at: Option<i64>) -> bool {
        match at {
            Some(t) => {
                if !self.table.contains(field) {
                    return false;
                }
                self.table.aux_mut().deadlines.get_or_insert_with(Default::default).insert(field.into(), t);
            }
            None => {
                if self.deadlines().is_none() {
                    return true;
                }
                let aux = self.table.aux_mut();
                if let Some(d) = aux.deadlines.as_mut() {
                    d.remove(field);
                    if d.is_empty() {
                        aux.deadlines = None;
                    }
                }
                self.table.trim_aux();
            }
        }
        true
    }

    /// Whether any field has a deadline.
    pub fn has_field_deadlines(&self) -> bool {
        self.deadlines().is_some()
    }

    /// (field, deadline) of every field that has one, in no particular order.
    pub fn field_deadlines(&self) -> impl Iterator<Item = (&[u8], i64)> + '_ {
        self.deadlines().into_iter().flat_map(|d| d.iter().map(|(f, &t)| (&f[..], t)))
    }

    /// The fields whose deadline is before `now` (a field lives through its deadline's
    /// millisecond, as a key does), at most `max`.
    pub fn expired_fields(&self, now: i64, max: usize) -> Vec<Vec<u8>> {
        self.field_deadlines().filter(|&(_, t)| t < now).take(max).map(|(f, _)| f.to_vec()).collect()
    }

    /// [`Hash::expired_fields`] (all of them) and the earliest deadline of the fields that
    /// stay, in one pass.
    pub fn expired_fields_and_next(&self, now: i64) -> (Vec<Vec<u8>>, Option<i64>) {
        let (mut due, mut next) = (Vec::new(), None::<i64>);
        for (f, t) in self.field_deadlines() {
            if t < now {
                due.push(f.to_vec());
            } else {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        (due, next)
    }

    /// (field, value) pairs: insertion order while small, storage order once indexed.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.table.iter()
    }

    /// A uniformly random (field, value), or None if empty.
    pub fn random(&self, rng: &mut impl Rng) -> Option<(&[u8], &[u8])> {
        self.table.random(rng)
    }

    /// One HSCAN step from `cursor` (about `count` slots of work); returns the next cursor, 0
    /// when done. Every field present for the whole iteration is returned at least once.
    pub fn scan<'a>(&'a self, cursor: u64, count: usize, f: impl FnMut(&'a [u8], &'a [u8])) -> u64 {
        self.table.scan(cursor, count, f)
    }

    /// Canonical dump for equality checks (a hash with field deadlines dumps them too).
    pub fn to_plain(&self) -> Plain {
        let fields = self.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        match self.deadlines() {
            None => Plain::Hash(fields),
            Some(d) => Plain::HashWithDeadlines(
                fields,
                d.iter().map(|(f, &t)| (f.to_vec(), t)).collect::<BTreeMap<_, _>>(),
            ),
        }
    }

    /// Heap bytes this value occupies (the boxed struct included), by allocator size class.
    pub fn mem_usage(&self) -> usize {
        let deadlines = self.deadlines().map_or(0, |d| {
            // The map's table (a control byte and a slot per bucket) and each field's copy.
            d.capacity() * (1 + std::mem::size_of::<(Box<[u8]>, i64)>())
                + d.keys().map(|f| size_class(f.len().max(1))).sum::<usize>()
        });
        size_class(std::mem::size_of::<Self>()) + self.table.mem_usage() + deadlines
    }

    /// Length in bytes of the raw form: one segment (`varint(len)` then `len` bytes) per
    /// chunk, holding its live records, each `varint(len(field) << 1) field varint(len(value))
    /// value` (see `docs/FORMAT.md`).
    pub fn raw_len(&self) -> usize {
        self.table.raw_len()
    }

    /// Calls `f` with consecutive pieces of the raw form (`raw_len()` bytes in all), straight
    /// from the packed chunks.
    pub fn for_each_raw_run(&self, f: impl FnMut(&[u8])) {
        self.table.for_each_raw_run(f)
    }

    /// Builds a hash of `count` fields from its raw form, validating it fully (bounds, count,
    /// no field twice). Small content gets the packed "listpack" form, as a fresh hash would;
    /// never more memory than the hash that was saved.
    pub fn from_raw(raw: &[u8], count: usize) -> Result<Hash, super::RawError> {
        Ok(Hash { table: PackedTable::from_raw(raw, count)? })
    }

    /// A hash of the fields gathered in `fields` (each field once, else an error), in the
    /// form a fresh hash would take: for a big hash read from an RDB payload, much cheaper
    /// than setting the fields one by one.
    pub fn from_records(fields: &HashRecords) -> Result<Hash, super::RawError> {
        Ok(Hash { table: PackedTable::from_records(fields)? })
    }

    /// OBJECT ENCODING's answer: Redis's names, `listpackex` for a small hash with field
    /// deadlines.
    pub fn encoding(&self) -> &'static str {
        match (self.table.is_indexed(), self.has_field_deadlines()) {
            (true, _) => "hashtable",
            (false, false) => "listpack",
            (false, true) => "listpackex",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Tiny hashes are most hashes: the header stays in jemalloc's 32-byte class and a
    /// one-field hash is that header plus one buffer of its record (was ~190 bytes with a
    /// four-slot chunk vector). Redis 7 spends about 60 bytes on the same value.
    #[test]
    fn tiny_hash_memory_is_bounded() {
        assert!(std::mem::size_of::<Hash>() <= 32, "header grew to {}", std::mem::size_of::<Hash>());
        let mut h = Hash::new();
        h.set(b"f", b"v1234");
        assert_eq!(h.get(b"f"), Some(&b"v1234"[..]));
        assert!(h.mem_usage() <= 40, "one field: {} bytes", h.mem_usage());
        for j in 1..8 {
            h.set(format!("f{j}").as_bytes(), b"v1234");
        }
        assert_eq!(h.len(), 8);
        assert!(h.mem_usage() <= 112, "eight fields: {} bytes", h.mem_usage());
        // Emptying and refilling does not leave a bigger allocation behind.
        for j in 1..8 {
            h.remove(format!("f{j}").as_bytes());
        }
        h.remove(b"f");
        h.set(b"f", b"v1234");
        assert!(h.mem_usage() <= 40, "refilled: {} bytes", h.mem_usage());
    }

    proptest! {
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec((0u8..3, 0u16..400, proptest::collection::vec(any::<u8>(), 0..90)), 1..1500)) {
            let mut h = Hash::new();
            let mut m: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            for (kind, f, v) in ops {
                let f = format!("f{f}").into_bytes();
                match kind {
                    0 | 1 => prop_assert_eq!(h.set(&f, &v), m.insert(f.clone(), v).is_none()),
                    _ => prop_assert_eq!(h.remove(&f), m.remove(&f).is_some()),
                }
                prop_assert_eq!(h.get(&f), m.get(&f).map(|v| v.as_slice()));
            }
            prop_assert_eq!(h.len(), m.len());
            prop_assert_eq!(h.to_plain(), Plain::Hash(m));
        }
    }

    /// 512 fields and values of 64 bytes each fill the small form past 64 KiB: converting it to
    /// the indexed form must still address every record (16-bit record offsets).
    #[test]
    fn a_full_small_hash_of_long_fields_converts_whole() {
        let mut h = Hash::new();
        let field = |i: usize| format!("{i:064}").into_bytes();
        let value = |i: usize| format!("{:064}", i * 7).into_bytes();
        for i in 0..512 {
            h.set(&field(i), &value(i));
        }
        assert_eq!(h.encoding(), "listpack");
        h.set(b"x", b"y");
        assert_eq!(h.encoding(), "hashtable");
        for i in 0..512 {
            assert_eq!(h.get(&field(i)), Some(&value(i)[..]), "field {i}");
        }
        assert_eq!(h.get(b"x"), Some(&b"y"[..]));
        assert!(h.remove(&field(300)));
        assert_eq!(h.get(&field(300)), None);
        assert_eq!(h.len(), 512);
    }

    #[test]
    fn field_deadlines_follow_their_fields() {
        let mut h = Hash::new();
        assert!(std::mem::size_of::<Hash>() <= 32);
        h.set(b"a", b"1");
        h.set(b"b", b"2");
        assert!(!h.set_field_deadline(b"zz", Some(5)), "no deadline for a missing field");
        assert!(h.set_field_deadline(b"a", Some(10)));
        assert!(h.set_field_deadline(b"b", Some(20)));
        assert_eq!(h.encoding(), "listpackex");
        assert_eq!(h.field_deadline(b"a"), Some(10));
        // HINCRBY keeps it; HSET drops it; HDEL takes it with the field.
        h.set_keep_deadline(b"a", b"5");
        assert_eq!(h.field_deadline(b"a"), Some(10));
        assert_eq!(h.expired_fields(11, 10), vec![b"a".to_vec()]);
        assert_eq!(h.expired_fields(10, 10), Vec::<Vec<u8>>::new(), "alive through its millisecond");
        h.set(b"a", b"6");
        assert_eq!(h.field_deadline(b"a"), None);
        h.remove(b"b");
        assert!(!h.has_field_deadlines());
        assert_eq!(h.to_plain(), Plain::Hash([(b"a".to_vec(), b"6".to_vec())].into()));
        assert_eq!(h.encoding(), "listpack");
    }

    #[test]
    fn encoding_follows_redis_thresholds() {
        let mut h = Hash::new();
        for i in 0..512 {
            h.set(format!("f{i}").as_bytes(), b"v");
        }
        assert_eq!(h.encoding(), "listpack");
        h.set(b"f0", b"v2");
        assert_eq!(h.encoding(), "listpack");
        h.set(b"f512", b"v");
        assert_eq!(h.encoding(), "hashtable");
        let mut h = Hash::new();
        h.set(b"f", &[b'x'; 64]);
        assert_eq!(h.encoding(), "listpack");
        h.set(b"f", &[b'x'; 65]);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"f"), Some(&[b'x'; 65][..]));
    }

    #[test]
    fn dataset_hash_is_compact() {
        // The six-type dataset's hash: 1,000 fields f{k} -> v{k:06}; goal <= 32 bytes/field.
        let mut h = Hash::new();
        for k in 0..1000 {
            h.set(format!("f{k}").as_bytes(), format!("v{k:06}").as_bytes());
        }
        let per = h.mem_usage() as f64 / 1000.0;
        assert!(per <= 32.0, "{per} bytes per field");
    }
}
