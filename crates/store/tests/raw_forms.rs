//! The raw forms snapshots use: every collection round-trips through `for_each_raw_run` and
//! `from_raw`, keeps (or improves) its encoding and memory, and `from_raw` refuses malformed
//! input without panicking.

use proptest::prelude::*;
use store::types::{Hash, List, Set, SparseArray, ZSet};

fn raw(len: usize, runs: impl FnOnce(&mut dyn FnMut(&[u8]))) -> Vec<u8> {
    let mut out = Vec::new();
    runs(&mut |p: &[u8]| out.extend_from_slice(p));
    assert_eq!(out.len(), len, "raw_len agrees with the runs");
    out
}

#[test]
fn hashes_round_trip_small_and_indexed() {
    for n in [1usize, 7, 512, 513, 5000] {
        let mut h = Hash::new();
        for i in 0..n {
            h.set(format!("f{i}").as_bytes(), format!("v{i}").as_bytes());
        }
        // Deletions leave dead records in an indexed table: the raw form skips them.
        for i in (0..n).step_by(3).skip(1) {
            h.remove(format!("f{i}").as_bytes());
        }
        let r = raw(h.raw_len(), |f| h.for_each_raw_run(f));
        let back = Hash::from_raw(&r, h.len()).unwrap();
        assert_eq!(back.to_plain(), h.to_plain());
        assert!(back.mem_usage() <= h.mem_usage(), "{n}: {} > {}", back.mem_usage(), h.mem_usage());
        // A hash that shrank back under the limits loads in the packed form.
        let want = if h.len() <= 512 { "listpack" } else { "hashtable" };
        assert_eq!(back.encoding(), want, "{n}");
        // And behaves: lookups, updates, deletes.
        let mut back = back;
        assert_eq!(back.get(b"f0"), Some(&b"v0"[..]));
        assert!(!back.set(b"f0", b"changed"));
        assert!(back.remove(b"f0"));
        assert!(back.set(b"new", b"x"));
    }
    let mut h = Hash::new();
    h.set(b"f", &[b'x'; 65]);
    let r = raw(h.raw_len(), |f| h.for_each_raw_run(f));
    assert_eq!(Hash::from_raw(&r, 1).unwrap().encoding(), "hashtable");
}

#[test]
fn sets_round_trip_in_every_form() {
    let mut ints = Set::new();
    for i in [-5i64, 0, 7, i64::MAX, i64::MIN] {
        ints.add(i.to_string().as_bytes());
    }
    let v = ints.ints().unwrap().to_vec();
    assert_eq!(Set::from_ints(v).unwrap().to_plain(), ints.to_plain());
    assert!(Set::from_ints(vec![1, 1]).is_err());
    assert!(Set::from_ints(vec![2, 1]).is_err());
    assert!(Set::from_ints(vec![]).is_err());
    // Larger than the default set-max-intset-entries: a snapshot made under a larger setting
    // still loads as the intset it was.
    assert_eq!(Set::from_ints((0..513).collect()).unwrap().encoding(), "intset");
    for n in [1usize, 128, 129, 3000] {
        let mut s = Set::new();
        for i in 0..n {
            s.add(format!("m{i}").as_bytes());
        }
        let r = raw(s.raw_len(), |f| s.for_each_raw_run(f));
        let back = Set::from_raw(&r, n).unwrap();
        assert_eq!(back.to_plain(), s.to_plain());
        assert_eq!(back.encoding(), s.encoding());
        assert!(back.mem_usage() <= s.mem_usage());
    }
}

#[test]
fn zsets_round_trip_and_tolerate_equal_scores() {
    for (n, score_of) in [(1usize, 1i64), (128, 1), (129, 7), (5000, 1), (5000, 0), (3000, 13)] {
        let mut z = ZSet::new();
        for i in 0..n {
            // score_of 0: every member has the same score (long equal-score runs); else spread.
            let s = if score_of == 0 { 0.0 } else { ((i as i64 * score_of) % 997) as f64 + 0.25 };
            z.insert(format!("m{i}").as_bytes(), s);
        }
        let r = raw(z.raw_len(), |f| z.for_each_raw_run(f));
        let back = ZSet::from_raw(&r, n).unwrap();
        assert_eq!(back.to_plain(), z.to_plain());
        assert_eq!(back.encoding(), z.encoding());
        assert!(back.mem_usage() <= z.mem_usage(), "{n}: {} > {}", back.mem_usage(), z.mem_usage());
        for i in (0..n).step_by(97) {
            let m = format!("m{i}");
            assert_eq!(back.score(m.as_bytes()), z.score(m.as_bytes()));
            assert_eq!(back.rank(m.as_bytes()), z.rank(m.as_bytes()));
        }
    }
}

#[test]
fn lists_and_arrays_round_trip() {
    for n in [1usize, 100, 5000] {
        let mut l = List::new();
        for i in 0..n {
            if i % 2 == 0 {
                l.push_back(i.to_string().as_bytes());
            } else {
                l.push_front(format!("e{i}").repeat(i % 7).as_bytes());
            }
        }
        let r = raw(l.raw_len(), |f| l.for_each_raw_run(f));
        let back = List::from_raw(&r, n).unwrap();
        assert_eq!(back.to_plain(), l.to_plain());
        assert!(back.mem_usage() <= l.mem_usage());

        let mut a = SparseArray::new();
        for i in 0..n as u64 {
            a.set(i * i * 31 % 100_003, format!("v{i}").as_bytes());
        }
        a.set(u64::MAX - 1, b"top");
        a.set_cursor(42);
        let r = raw(a.raw_len(), |f| a.for_each_raw_run(f));
        let back = SparseArray::from_raw(&r, a.count() as u64, a.cursor()).unwrap();
        assert_eq!(back.to_plain(), a.to_plain());
        assert_eq!(back.len(), a.len());
        assert!(back.mem_usage() <= a.mem_usage(), "{} > {}", back.mem_usage(), a.mem_usage());
    }
}

/// One segment (`varint(len)` then the bytes) holding `body`.
fn seg(body: &[u8]) -> Vec<u8> {
    assert!(body.len() < 128);
    let mut v = vec![body.len() as u8];
    v.extend_from_slice(body);
    v
}

#[test]
fn malformed_raw_forms_are_refused() {
    // Hash: a dead flag, a duplicate field, a count that does not match, a record overrun.
    assert!(Hash::from_raw(&seg(&[3, b'f', 1, b'v']), 1).is_err());
    assert!(Hash::from_raw(&seg(&[2, b'f', 1, b'v', 2, b'f', 1, b'w']), 2).is_err());
    assert!(Hash::from_raw(&seg(&[2, b'f', 1, b'v']), 2).is_err());
    assert!(Hash::from_raw(&seg(&[2, b'f', 5, b'v']), 1).is_err());
    assert!(Hash::from_raw(&[], 0).is_err());
    // Bad framing: an empty segment, a segment longer than the value.
    assert_eq!(Hash::from_raw(&[0], 0).unwrap_err().0, "empty segment");
    assert!(Hash::from_raw(&[9, 2, b'f', 1, b'v'], 1).is_err());
    // The same field in two segments.
    let mut two = seg(&[2, b'f', 1, b'v']);
    two.extend_from_slice(&seg(&[2, b'f', 1, b'w']));
    assert_eq!(Hash::from_raw(&two, 2).unwrap_err().0, "duplicate element");
    // Duplicate fields in an indexed hash (many small segments).
    let mut recs = Vec::new();
    for i in 0..600 {
        let f = format!("f{}", i % 599);
        let mut r = vec![(f.len() << 1) as u8];
        r.extend_from_slice(f.as_bytes());
        r.push(0);
        recs.extend_from_slice(&seg(&r));
    }
    assert_eq!(Hash::from_raw(&recs, 600).unwrap_err().0, "duplicate element");
    // Set: duplicate member.
    assert!(Set::from_raw(&seg(&[2, b'a', 2, b'a']), 2).is_err());
    // Sorted set: out of order (also across segments), NaN score, member twice.
    let entry = |score: u8, m: u8| [0x21, score, m]; // tag: 1 score byte, 1-byte member
    let mut two = entry(4, b'b').to_vec();
    two.extend_from_slice(&entry(2, b'a'));
    assert!(ZSet::from_raw(&seg(&two), 2).is_err());
    let mut split = seg(&entry(4, b'b'));
    split.extend_from_slice(&seg(&entry(2, b'a')));
    assert_eq!(ZSet::from_raw(&split, 2).unwrap_err().0, "sorted set entries out of order");
    let mut nan = vec![0x19];
    nan.extend_from_slice(&f64::NAN.to_bits().to_le_bytes());
    nan.push(b'a');
    assert!(ZSet::from_raw(&seg(&nan), 1).is_err());
    let mut dup = entry(2, b'a').to_vec();
    dup.extend_from_slice(&entry(4, b'a'));
    assert_eq!(ZSet::from_raw(&seg(&dup), 2).unwrap_err().0, "duplicate member");
    // ... and in an indexed set.
    let mut z = ZSet::new();
    for i in 0..300 {
        z.insert(format!("m{i:03}").as_bytes(), i as f64);
    }
    let mut r = raw(z.raw_len(), |f| z.for_each_raw_run(f));
    // A last segment with "m000" again at a higher score (300: zigzag 600 = 0x258, 2 bytes).
    r.extend_from_slice(&seg(&[0x52, 0x58, 0x02, b'm', b'0', b'0', b'0']));
    assert_eq!(ZSet::from_raw(&r, 301).unwrap_err().0, "duplicate member");
    // List: an integer stored as a string, an unknown tag, an overrun.
    assert_eq!(List::from_raw(&seg(&[0x82, b'1', b'2']), 1).unwrap_err().0, "bad list entry");
    assert!(List::from_raw(&seg(&[0xF7]), 1).is_err());
    assert!(List::from_raw(&seg(&[0x85, b'a']), 1).is_err());
    assert!(List::from_raw(&seg(&[0x81, b'a', 5]), 1).is_err());
    // Array: indexes not ascending (also across segments), past 2^64-2, count mismatch.
    assert!(SparseArray::from_raw(&seg(&[5, 0x81, b'a', 0, 0x81, b'b']), 2, 0).is_err());
    let mut split = seg(&[5, 0x81, b'a']);
    split.extend_from_slice(&seg(&[0, 0x81, b'b']));
    assert_eq!(SparseArray::from_raw(&split, 2, 0).unwrap_err().0, "array indexes not ascending");
    let mut top = vec![0xFF; 9];
    top.push(0x01);
    top.extend_from_slice(&[0x81, b'a']);
    assert!(SparseArray::from_raw(&seg(&top), 1, 0).is_err());
    assert!(SparseArray::from_raw(&seg(&[5, 0x81, b'a']), 2, 0).is_err());
}

/// A list grown at the front and at the back keeps its chunking through a reload, so no
/// chunk ends up in a bigger size class (a single re-packing could, by rounding).
#[test]
fn chunk_boundaries_survive_a_reload() {
    let mut l = List::new();
    for i in 0..1823 {
        l.push_back(format!("e{i}").as_bytes());
    }
    l.push_front(&[0; 24]);
    l.push_front(b"2147483648");
    let r = raw(l.raw_len(), |f| l.for_each_raw_run(f));
    let back = List::from_raw(&r, l.len()).unwrap();
    assert_eq!(back.chunk_count(), l.chunk_count());
    assert!(back.mem_usage() <= l.mem_usage(), "{} > {}", back.mem_usage(), l.mem_usage());
}

proptest! {
    /// Arbitrary bytes never make a constructor panic; what it accepts is a working value.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), count in 0usize..8) {
        if let Ok(h) = Hash::from_raw(&bytes, count) {
            prop_assert_eq!(h.len(), count);
            let _ = h.to_plain();
        }
        if let Ok(s) = Set::from_raw(&bytes, count) {
            prop_assert_eq!(s.len(), count);
        }
        if let Ok(z) = ZSet::from_raw(&bytes, count) {
            prop_assert_eq!(z.iter().count(), count);
            let _ = z.to_plain();
        }
        if let Ok(l) = List::from_raw(&bytes, count) {
            prop_assert_eq!(l.iter().count(), count);
        }
        if let Ok(a) = SparseArray::from_raw(&bytes, count as u64, 0) {
            prop_assert_eq!(a.count(), count);
            let _ = a.to_plain();
        }
    }
}
