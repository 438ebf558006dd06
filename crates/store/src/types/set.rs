//! Set of byte strings.
//!
//! Two representations, switching one way only, at Redis's thresholds:
//! - `intset`: while every member is a canonical decimal i64 and there are at most 512 of
//!   them (`set-max-intset-entries`), a sorted `Vec<i64>`: 8 bytes a member, binary search,
//!   and members come back in ascending numeric order as Redis's intset returns them.
//! - otherwise a [`PackedTable`] of member records: one packed chunk scanned linearly up to 128
//!   members of at most 64 bytes ("listpack", like Redis 7.2's `set-max-listpack-*`), then an
//!   open-addressing index over packed chunks ("hashtable").

use super::packed::PackedTable;

/// Members gathered for [`Set::from_records`] (records without values).
pub type SetRecords = super::packed::Records<false>;
use crate::alloc::size_class;
use crate::types::string::parse_canonical_i64;
use crate::Plain;
use rand::Rng;

/// Largest intset a set grows into: `set-max-intset-entries` (see [`crate::limits`]).
#[inline]
fn intset_max_entries() -> usize {
    crate::limits::get(&crate::limits::SET_MAX_INTSET_ENTRIES)
}

#[derive(Clone, Debug)]
enum Repr {
    /// Sorted, no duplicates.
    Ints(Vec<i64>),
    Table(PackedTable<false>),
}

#[derive(Clone, Debug)]
pub struct Set {
    repr: Repr,
}

impl Default for Set {
    fn default() -> Self {
        Set { repr: Repr::Ints(Vec::new()) }
    }
}

impl Set {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Ints(v) => v.len(),
            Repr::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        match &self.repr {
            Repr::Ints(v) => parse_canonical_i64(member).is_some_and(|i| v.binary_search(&i).is_ok()),
            Repr::Table(t) => t.contains(member),
        }
    }

    /// Adds `member`; returns true if it was not there.
    pub fn add(&mut self, member: &[u8]) -> bool {
        if let Repr::Ints(v) = &mut self.repr {
            if let Some(i) = parse_canonical_i64(member) {
                match v.binary_search(&i) {
                    Ok(_) => return false,
                    Err(at) if v.len() < intset_max_entries() => {
                        if v.len() == v.capacity() {
                            // Grow by a quarter, to the allocator's size class.
                            let want = size_class(((v.len() + v.len() / 4).max(v.len() + 1)) * 8) / 8;
                            v.reserve_exact(want - v.len());
                        }
                        v.insert(at, i);
                        return true;
                    }
                    Err(_) => {}
                }
            }
            self.convert_to_table();
        }
        match &mut self.repr {
            Repr::Table(t) => t.insert(member, b""),
            Repr::Ints(_) => unreachable!("converted above"),
        }
    }

    /// Removes `member`; returns true if it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Ints(v) => match parse_canonical_i64(member).map(|i| v.binary_search(&i)) {
                Some(Ok(at)) => {
                    v.remove(at);
                    true
                }
                _ => false,
            },
            Repr::Table(t) => t.remove(member),
        }
    }

    fn convert_to_table(&mut self) {
        let Repr::Ints(v) = &self.repr else { return };
        let mut t = PackedTable::new();
        let mut buf = itoa::Buffer::new();
        for &i in v {
            t.insert(buf.format(i).as_bytes(), b"");
        }
        self.repr = Repr::Table(t);
    }

    /// Calls `f` for every member (ascending numeric order for an intset).
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) {
        match &self.repr {
            Repr::Ints(v) => {
                let mut buf = itoa::Buffer::new();
                for &i in v {
                    f(buf.format(i).as_bytes());
                }
            }
            Repr::Table(t) => t.iter().for_each(|(m, _)| f(m)),
        }
    }

    /// Every member, copied.
    pub fn members(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len());
        self.for_each(|m| out.push(m.to_vec()));
        out
    }

    /// A uniformly random member, or None if empty.
    pub fn random(&self, rng: &mut impl Rng) -> Option<Vec<u8>> {
        match &self.repr {
            Repr::Ints(v) if v.is_empty() => None,
            Repr::Ints(v) => {
                Some(itoa::Buffer::new().format(v[rng.gen_range(0..v.len())]).as_bytes().to_vec())
            }
            Repr::Table(t) => t.random(rng).map(|(m, _)| m.to_vec()),
        }
    }

    /// One SSCAN step; returns the next cursor (0 when done). Every member present for the
    /// whole iteration is returned at least once. Intsets and small sets answer in one step.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8])) -> u64 {
        match &self.repr {
            Repr::Ints(_) => {
                self.for_each(f);
                0
            }
            Repr::Table(t) => t.scan(cursor, count, |m, _| f(m)),
        }
    }

    pub fn to_plain(&self) -> Plain {
        Plain::Set(self.members().into_iter().collect())
    }

    /// Heap bytes this value occupies (the boxed struct included), by allocator size class.
    pub fn mem_usage(&self) -> usize {
        size_class(std::mem::size_of::<Self>())
            + match &self.repr {
                Repr::Ints(v) => size_class(v.capacity() * 8),
                Repr::Table(t) => t.mem_usage(),
            }
    }

    /// The members of an intset (ascending), or None when the set is in a table form.
    pub fn ints(&self) -> Option<&[i64]> {
        match &self.repr {
            Repr::Ints(v) => Some(v),
            Repr::Table(_) => None,
        }
    }

    /// Length in bytes of a table-form set's raw form (one segment, `varint(len)` then `len`
    /// bytes, per chunk, holding its live members, each `varint(len << 1) member`); 0 for an
    /// intset.
    pub fn raw_len(&self) -> usize {
        match &self.repr {
            Repr::Ints(_) => 0,
            Repr::Table(t) => t.raw_len(),
        }
    }

    /// Calls `f` with consecutive pieces of a table-form set's raw form; nothing for an intset.
    pub fn for_each_raw_run(&self, f: impl FnMut(&[u8])) {
        if let Repr::Table(t) = &self.repr {
            t.for_each_raw_run(f)
        }
    }

    /// An intset from its members, which must be strictly ascending, at least one and at most
    /// [`crate::limits::INTSET_HARD_MAX`] (a snapshot may hold one built under a larger
    /// `set-max-intset-entries` than now).
    pub fn from_ints(mut v: Vec<i64>) -> Result<Set, super::RawError> {
        if v.is_empty() || v.len() > crate::limits::INTSET_HARD_MAX {
            return Err(super::RawError("intset size out of range"));
        }
        if !v.windows(2).all(|w| w[0] < w[1]) {
            return Err(super::RawError("intset not strictly ascending"));
        }
        v.shrink_to_fit();
        Ok(Set { repr: Repr::Ints(v) })
    }

    /// A table-form set of `count` members from its raw form, validated fully (bounds, count,
    /// no member twice). Small content gets the "listpack" form, as a fresh table would;
    /// never more memory than the set that was saved.
    pub fn from_raw(raw: &[u8], count: usize) -> Result<Set, super::RawError> {
        Ok(Set { repr: Repr::Table(PackedTable::from_raw(raw, count)?) })
    }

    /// A set of `count` members is in the table form ("hashtable") whatever they are: more
    /// than an intset or the packed "listpack" form holds.
    pub fn takes_table_form(count: usize) -> bool {
        count > intset_max_entries().max(super::packed::small_max_entries(false))
    }

    /// A set of the members gathered in `members` (each once, else an error), for more
    /// members than an intset or the packed "listpack" form holds: for a big set read from an
    /// RDB payload, much cheaper than adding the members one by one.
    pub fn from_records(members: &SetRecords) -> Result<Set, super::RawError> {
        if !Self::takes_table_form(members.len()) {
            return Err(super::RawError("too few members for the table form"));
        }
        Ok(Set { repr: Repr::Table(PackedTable::from_records(members)?) })
    }

    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Ints(_) => "intset",
            Repr::Table(t) if t.is_indexed() => "hashtable",
            Repr::Table(_) => "listpack",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn tiny_set_memory_is_bounded() {
        assert!(std::mem::size_of::<Set>() <= 32, "header grew to {}", std::mem::size_of::<Set>());
        // Packed (non-integer) members: header plus one record buffer.
        let mut s = Set::new();
        s.add(b"v1234");
        assert!(s.contains(b"v1234"));
        assert_eq!(s.encoding(), "listpack");
        assert!(s.mem_usage() <= 40, "one member: {} bytes", s.mem_usage());
        for j in 1..8 {
            s.add(format!("v1234-{j}").as_bytes());
        }
        assert_eq!(s.len(), 8);
        assert!(s.mem_usage() <= 96, "eight members: {} bytes", s.mem_usage());
        // Integer members (intset): header plus 8 bytes a member.
        let mut i = Set::new();
        i.add(b"5");
        assert!(i.mem_usage() <= 40, "one integer: {} bytes", i.mem_usage());
    }

    fn member() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => (-700i64..700).prop_map(|i| i.to_string().into_bytes()),
            1 => (0u16..300).prop_map(|i| format!("m{i}").into_bytes()),
            1 => Just(b"007".to_vec()),
            1 => Just(b"-0".to_vec()),
        ]
    }

    proptest! {
        #[test]
        fn behaves_like_a_btreeset(ops in proptest::collection::vec((any::<bool>(), member()), 1..2000)) {
            let mut s = Set::new();
            let mut m = BTreeSet::new();
            for (add, x) in ops {
                if add {
                    prop_assert_eq!(s.add(&x), m.insert(x.clone()));
                } else {
                    prop_assert_eq!(s.remove(&x), m.remove(&x));
                }
                prop_assert_eq!(s.contains(&x), m.contains(&x));
            }
            prop_assert_eq!(s.len(), m.len());
            prop_assert_eq!(s.to_plain(), Plain::Set(m));
        }
    }

    #[test]
    fn encodings_follow_redis_thresholds() {
        let mut s = Set::new();
        for i in 0..512 {
            s.add(i.to_string().as_bytes());
        }
        assert_eq!(s.encoding(), "intset");
        assert!(!s.add(b"7"));
        s.add(b"512");
        assert_eq!(s.encoding(), "hashtable");
        let mut s = Set::new();
        s.add(b"1");
        s.add(b"01"); // not canonical: a string member
        assert_eq!(s.encoding(), "listpack");
        assert!(s.contains(b"1") && s.contains(b"01") && !s.contains(b"001"));
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn dataset_set_is_compact() {
        // The six-type dataset's set: 1,000 members m{k:06}; goal <= 28 bytes/member.
        let mut s = Set::new();
        for k in 0..1000 {
            s.add(format!("m{k:06}").as_bytes());
        }
        let per = s.mem_usage() as f64 / 1000.0;
        assert!(per <= 28.0, "{per} bytes per member");
    }
}
