//! The keyspace against a std HashMap model under random operation sequences, and the SCAN
//! guarantee under resizes.
//!
//! Run: `cargo test -p store --test keyspace_model`.

use proptest::prelude::*;
use std::collections::{HashMap, HashSet};
use store::types::{Hash, List, Set};
use store::{Keyspace, Millis, Plain, Value};

/// Key `i`: short ones like the benchmark's, and every seventh one long enough for a two-byte
/// length varint.
fn key(i: u32) -> Vec<u8> {
    if i % 7 == 3 {
        let mut k = format!("long:{i}:").into_bytes();
        k.resize(150, b'x');
        k
    } else {
        format!("k:{i}").into_bytes()
    }
}

#[derive(Debug, Clone)]
enum Val {
    Bytes(Vec<u8>),
    IntText(i64),
    Int(i64),
    Hash,
    Set,
    List,
}

impl Val {
    fn value(&self) -> Value {
        match self {
            Val::Bytes(b) => Value::Str(b.clone()),
            Val::IntText(i) => Value::Str(i.to_string().into_bytes()),
            Val::Int(i) => Value::Int(*i),
            Val::Hash => Value::Hash(Box::new(Hash::new())),
            Val::Set => Value::Set(Box::new(Set::new())),
            Val::List => Value::List(Box::new(List::new())),
        }
    }
    fn plain(&self) -> Plain {
        self.value().as_ref().to_plain()
    }
}

fn val() -> impl Strategy<Value = Val> {
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..40).prop_map(Val::Bytes),
        1 => proptest::collection::vec(any::<u8>(), 120..300).prop_map(Val::Bytes),
        2 => any::<i64>().prop_map(Val::IntText),
        1 => any::<i64>().prop_map(Val::Int),
        1 => Just(Val::Hash),
        1 => Just(Val::Set),
        1 => Just(Val::List),
    ]
}

fn expiry() -> impl Strategy<Value = Option<Millis>> {
    prop_oneof![2 => Just(None), 1 => (0i64..1000).prop_map(Some)]
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u32, Val, Option<Millis>),
    Put(u32, Val, Option<Millis>),
    Replace(u32, Val),
    Remove(u32),
    Delete(u32),
    Take(u32),
    SetExpire(u32, Option<Millis>),
    /// Inserts keys start..start+n (grows the table).
    InsertMany(u32, u32),
    /// Removes keys start..start+n (shrinks the table).
    RemoveMany(u32, u32),
    Collect(Millis, usize, usize),
    Rehash(usize),
    Clear,
    /// `edit_string`: grow to at least `len` bytes, then write `patch` at `at` (within the
    /// grown length); the lengths cross the length prefix's 128 and 16 KiB steps.
    Edit(u32, usize, usize, Vec<u8>),
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u32..300;
    prop_oneof![
        6 => (k.clone(), val(), expiry()).prop_map(|(k, v, e)| Op::Insert(k, v, e)),
        3 => (k.clone(), val(), expiry()).prop_map(|(k, v, e)| Op::Put(k, v, e)),
        4 => (k.clone(), val()).prop_map(|(k, v)| Op::Replace(k, v)),
        3 => k.clone().prop_map(Op::Remove),
        2 => k.clone().prop_map(Op::Delete),
        2 => k.clone().prop_map(Op::Take),
        4 => (k.clone(), expiry()).prop_map(|(k, e)| Op::SetExpire(k, e)),
        1 => (0u32..3000, 0u32..1500).prop_map(|(s, n)| Op::InsertMany(s, n)),
        1 => (0u32..3000, 0u32..3000).prop_map(|(s, n)| Op::RemoveMany(s, n)),
        1 => (0i64..1000, 1usize..50, 1usize..200).prop_map(|(t, m, b)| Op::Collect(t, m, b)),
        1 => (1usize..100).prop_map(Op::Rehash),
        1 => Just(Op::Clear),
        4 => (k.clone(), prop_oneof![0usize..300, 16_300usize..16_500], 0usize..400, proptest::collection::vec(any::<u8>(), 0..8))
            .prop_map(|(k, len, at, patch)| Op::Edit(k, len, at, patch)),
    ]
}

type Model = HashMap<Vec<u8>, (Plain, Option<Millis>)>;

fn check_key(ks: &Keyspace, model: &Model, k: &[u8]) {
    match model.get(k) {
        None => {
            assert!(ks.get(k).is_none());
            assert!(!ks.contains(k));
            assert_eq!(ks.expire_at(k), None);
            assert_eq!(ks.mem_usage(k), None);
        }
        Some((p, e)) => {
            assert_eq!(&ks.get(k).expect("present").to_plain(), p);
            assert_eq!(ks.expire_at(k), *e);
            let (v, e2) = ks.get_with_expire(k).expect("present");
            assert_eq!(&v.to_plain(), p);
            assert_eq!(e2, *e);
            assert!(ks.mem_usage(k).expect("present") >= k.len() + 9);
        }
    }
}

fn check_all(ks: &Keyspace, model: &Model) {
    assert_eq!(ks.len(), model.len());
    assert_eq!(ks.volatile_len(), model.values().filter(|(_, e)| e.is_some()).count());
    let mut dump = HashMap::new();
    ks.for_each(|k, v, e| {
        assert!(dump.insert(k.to_vec(), (v.to_plain(), e)).is_none(), "key visited twice");
    });
    assert_eq!(&dump, model);
    // A complete SCAN with no changes in between returns each key at least once.
    let mut seen = HashSet::new();
    let mut cursor = 0;
    loop {
        cursor = ks.scan(cursor, 7, |k, _| {
            seen.insert(k.to_vec());
        });
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(seen.len(), model.len());
}

fn apply(ks: &mut Keyspace, model: &mut Model, op: &Op) {
    match op {
        Op::Insert(i, v, e) => {
            let k = key(*i);
            let old = ks.insert(&k, v.value(), *e);
            let mold = model.insert(k.clone(), (v.plain(), *e));
            assert_eq!(old.map(|o| o.as_ref().to_plain()), mold.map(|m| m.0));
            check_key(ks, model, &k);
        }
        Op::Put(i, v, e) => {
            let k = key(*i);
            let existed = ks.put(&k, v.value(), *e);
            assert_eq!(existed, model.insert(k.clone(), (v.plain(), *e)).is_some());
            check_key(ks, model, &k);
        }
        Op::Replace(i, v) => {
            let k = key(*i);
            ks.replace_value(&k, v.value());
            let e = model.get(&k).and_then(|m| m.1);
            model.insert(k.clone(), (v.plain(), e));
            check_key(ks, model, &k);
        }
        Op::Remove(i) => {
            let k = key(*i);
            let got = ks.remove(&k).map(|v| v.as_ref().to_plain());
            assert_eq!(got, model.remove(&k).map(|m| m.0));
            check_key(ks, model, &k);
        }
        Op::Delete(i) => {
            let k = key(*i);
            assert_eq!(ks.delete(&k), model.remove(&k).is_some());
            check_key(ks, model, &k);
        }
        Op::Take(i) => {
            let k = key(*i);
            let got = ks.take(&k).map(|(v, e)| (v.as_ref().to_plain(), e));
            assert_eq!(got, model.remove(&k));
            check_key(ks, model, &k);
        }
        Op::SetExpire(i, e) => {
            let k = key(*i);
            let present = match model.get_mut(&k) {
                Some(m) => {
                    m.1 = *e;
                    true
                }
                None => false,
            };
            assert_eq!(ks.set_expire(&k, *e), present);
            check_key(ks, model, &k);
        }
        Op::InsertMany(s, n) => {
            for i in *s..s + n {
                let k = key(i);
                ks.insert(&k, Value::Str(k.clone()), None);
                model.insert(k.clone(), (Plain::Str(k), None));
            }
        }
        Op::RemoveMany(s, n) => {
            for i in *s..s + n {
                let k = key(i);
                assert_eq!(ks.delete(&k), model.remove(&k).is_some());
            }
        }
        Op::Collect(now, max, budget) => {
            let mut out = Vec::new();
            let examined = ks.collect_expired(*now, *max, *budget, &mut out);
            assert!(out.len() <= *max);
            assert!(examined <= budget + ks.len().min(64), "examined {examined} of budget {budget}");
            let distinct: HashSet<_> = out.iter().collect();
            assert_eq!(distinct.len(), out.len());
            for k in &out {
                assert!(matches!(model.get(k), Some((_, Some(t))) if t < now), "{k:?} not expired");
            }
            if model.values().all(|(_, e)| e.is_none()) {
                assert_eq!(examined, 0);
            }
        }
        Op::Rehash(n) => {
            ks.rehash_step(*n);
        }
        Op::Clear => {
            ks.clear();
            model.clear();
        }
        Op::Edit(i, len, at, patch) => {
            let k = key(*i);
            let bytes = match model.get(&k) {
                Some((Plain::Str(b), _)) if ks.is_raw_string(&k) || !is_canonical_int(b) => Some(b.clone()),
                _ => None,
            };
            let edit = |b: &mut [u8]| {
                let at = (*at).min(b.len());
                let n = patch.len().min(b.len() - at);
                b[at..at + n].copy_from_slice(&patch[..n]);
            };
            let done = ks.edit_string(&k, *len, edit);
            assert_eq!(done, bytes.is_some(), "edited only a byte string");
            if let Some(mut b) = bytes {
                if b.len() < *len {
                    b.resize(*len, 0);
                }
                edit(&mut b);
                model.get_mut(&k).unwrap().0 = Plain::Str(b);
                assert!(ks.is_raw_string(&k));
            }
            check_key(ks, model, &k);
        }
    }
}

/// Whether the keyspace stores these bytes as an integer (canonical decimal, no sign on 0).
fn is_canonical_int(b: &[u8]) -> bool {
    std::str::from_utf8(b)
        .ok()
        .and_then(|t| t.parse::<i64>().ok())
        .is_some_and(|i| i.to_string().as_bytes() == b)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn keyspace_matches_a_hashmap_model(ops in proptest::collection::vec(op(), 1..120)) {
        let mut ks = Keyspace::new();
        let mut model = Model::new();
        for op in &ops {
            apply(&mut ks, &mut model, op);
            assert_eq!(ks.len(), model.len());
        }
        check_all(&ks, &model);
        // Drop with everything still inside (collections included) must free it all; Miri or
        // a leak checker sees it, the test sees that it does not crash.
        drop(ks);
    }
}

#[derive(Debug, Clone)]
enum ScanOp {
    Step(usize),
    Grow(u32),
    Shrink(u32),
    DropInitial(u32),
    Rehash(usize),
}

fn scan_op() -> impl Strategy<Value = ScanOp> {
    prop_oneof![
        5 => (1usize..30).prop_map(ScanOp::Step),
        2 => (1u32..2000).prop_map(ScanOp::Grow),
        2 => (1u32..2000).prop_map(ScanOp::Shrink),
        1 => (0u32..5000).prop_map(ScanOp::DropInitial),
        1 => (1usize..50).prop_map(ScanOp::Rehash),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    /// SCAN interleaved with inserts and removes that grow and shrink the table (through
    /// incremental resizes): every key present from the first step to the last is returned.
    #[test]
    fn scan_returns_every_key_present_throughout(
        initial in 0u32..3000,
        ops in proptest::collection::vec(scan_op(), 1..200),
    ) {
        let mut ks = Keyspace::new();
        for i in 0..initial {
            ks.insert(&key(i), Value::Int(i as i64), None);
        }
        // Extra keys come and go from 1_000_000 up; the initial keys stay unless dropped.
        let mut extra_hi = 1_000_000u32;
        let mut dropped = HashSet::new();
        let mut seen = HashSet::new();
        let mut cursor = 0u64;
        // The random operations once, then plain steps until the iteration ends: a SCAN must
        // finish once the table stops growing.
        let tail = std::iter::repeat(ScanOp::Step(10));
        let mut ops = ops.into_iter().chain(tail);
        let mut steps = 0;
        loop {
            match ops.next().expect("endless") {
                ScanOp::Step(count) => {
                    cursor = ks.scan(cursor, count, |k, _| {
                        seen.insert(k.to_vec());
                    });
                    steps += 1;
                    if cursor == 0 {
                        break;
                    }
                }
                ScanOp::Grow(n) => {
                    for i in extra_hi..extra_hi + n {
                        ks.put(&key(i), Value::Int(1), None);
                    }
                    extra_hi += n;
                }
                ScanOp::Shrink(n) => {
                    let lo = extra_hi.saturating_sub(n).max(1_000_000);
                    for i in lo..extra_hi {
                        ks.delete(&key(i));
                    }
                    extra_hi = lo;
                    // Also drop a slice of initial keys to push the load under 1/8.
                    for i in (0..initial).step_by(3) {
                        if dropped.insert(i) {
                            ks.delete(&key(i));
                        }
                        if dropped.len() * 2 > initial as usize {
                            break;
                        }
                    }
                }
                ScanOp::DropInitial(i) => {
                    if i < initial && dropped.insert(i) {
                        ks.delete(&key(i));
                    }
                }
                ScanOp::Rehash(n) => {
                    ks.rehash_step(n);
                }
            }
            prop_assert!(steps < 1_000_000, "scan does not terminate");
        }
        for i in 0..initial {
            if !dropped.contains(&i) {
                prop_assert!(seen.contains(&key(i)), "key {} missed", i);
            }
        }
    }
}

#[test]
fn collect_expired_finds_every_expired_key_in_bounded_calls() {
    let mut ks = Keyspace::new();
    for i in 0..10_000u32 {
        let e = if i % 10 == 0 { Some(i as i64) } else { None };
        ks.insert(&key(i), Value::Int(1), e);
    }
    assert_eq!(ks.volatile_len(), 1000);
    // At now = 5000, keys 0, 10, ..., 4990 have expired: 500 of them. Key 5000 lives through
    // its deadline's millisecond, as in Redis.
    assert!(!ks.is_expired(&key(5000), 5000));
    assert!(ks.is_expired(&key(5000), 5001));
    assert!(ks.is_expired(&key(4990), 5000));
    let mut found = HashSet::new();
    let mut calls = 0;
    loop {
        let mut out = Vec::new();
        let examined = ks.collect_expired(5000, 20, 100, &mut out);
        assert!(examined <= 100 + 64, "examined {examined}");
        assert!(out.len() <= 20);
        for k in out {
            ks.delete(&k);
            found.insert(k);
        }
        calls += 1;
        if found.len() == 500 || calls > 10_000 {
            break;
        }
    }
    assert_eq!(found.len(), 500);
    assert!(!found.contains(&key(5000)));
    assert_eq!(ks.volatile_len(), 500);
    // Nothing else has expired.
    let mut out = Vec::new();
    for _ in 0..1000 {
        ks.collect_expired(5000, 20, 100, &mut out);
    }
    assert!(out.is_empty());
    // No volatile keys: no work at all.
    let mut ks = Keyspace::new();
    ks.insert(b"a", Value::Int(1), None);
    assert_eq!(ks.collect_expired(i64::MAX, 10, 10, &mut out), 0);
}

#[test]
fn random_key_is_roughly_uniform() {
    let mut ks = Keyspace::new();
    for i in 0..100u32 {
        ks.insert(&key(i), Value::Int(1), None);
    }
    let mut rng = rand::thread_rng();
    let mut counts: HashMap<Vec<u8>, u32> = HashMap::new();
    for _ in 0..100_000 {
        *counts.entry(ks.random_key(&mut rng).expect("non-empty")).or_default() += 1;
    }
    assert_eq!(counts.len(), 100);
    // Mean 1000 per key. Picking a bucket first favours keys alone in their bucket over keys
    // sharing one (as Redis does), but never starves any.
    let max = *counts.values().max().unwrap();
    let min = *counts.values().min().unwrap();
    assert!(max < 4000 && min > 100, "min {min} max {max}");
    assert!(Keyspace::new().random_key(&mut rng).is_none());
}

#[test]
fn strings_that_are_integers_are_stored_as_integers() {
    let mut ks = Keyspace::new();
    ks.insert(b"n", Value::Str(b"12345".to_vec()), None);
    assert_eq!(ks.get(b"n").unwrap().encoding(), "int");
    ks.insert(b"s", Value::Str(b"012".to_vec()), None);
    assert_eq!(ks.get(b"s").unwrap().encoding(), "embstr");
    // A 21-byte key with an 11-byte value lands in one 48-byte class... while a 10-byte key
    // with an 11-byte value fits 32.
    ks.insert(b"str:123456", Value::Str(b"v0000123456".to_vec()), None);
    assert_eq!(ks.mem_usage(b"str:123456"), Some(32));
    ks.set_expire(b"str:123456", Some(5));
    assert_eq!(ks.mem_usage(b"str:123456"), Some(48));
}

/// A long random run over a table big enough to go through the incremental zeroing phase
/// (arrays over 2^15 buckets) in both directions, checked against the model throughout.
#[test]
fn big_random_run_matches_the_model() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let mut ks = Keyspace::new();
    let mut model = Model::new();
    for round in 0..3u32 {
        // Grow to ~120k keys with random overwrites and expiries...
        for _ in 0..150_000 {
            let k = key(rng.gen_range(0..120_000));
            match rng.gen_range(0..10) {
                0 => {
                    let e = Some(rng.gen_range(0..1000));
                    let present = model.get_mut(&k).map(|m| m.1 = e).is_some();
                    assert_eq!(ks.set_expire(&k, e), present);
                }
                1 => {
                    assert_eq!(ks.delete(&k), model.remove(&k).is_some());
                }
                _ => {
                    let v = rng.gen::<u32>().to_string().into_bytes();
                    ks.put(&k, Value::Str(v.clone()), None);
                    model.insert(k, (Plain::Str(v), None));
                }
            }
        }
        check_all(&ks, &model);
        // ...then remove almost everything, shrinking through the same phases.
        let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
        for k in keys.iter().skip(500 * (round as usize + 1)) {
            let (v, e) = ks.take(k).expect("present");
            assert_eq!((v.as_ref().to_plain(), e), model.remove(k).expect("present"));
            if rng.gen_range(0..1000) == 0 {
                check_key(&ks, &model, &keys[rng.gen_range(0..keys.len())]);
            }
        }
        while ks.rehash_step(100) {}
        check_all(&ks, &model);
        assert!(ks.table_overhead() <= 8 * 4 * model.len().next_power_of_two().max(4));
    }
}

#[test]
fn empty_keys_and_values_are_fine() {
    let mut ks = Keyspace::new();
    ks.insert(b"", Value::Str(Vec::new()), Some(3));
    assert_eq!(ks.get(b"").unwrap().to_plain(), Plain::Str(Vec::new()));
    assert_eq!(ks.expire_at(b""), Some(3));
    ks.replace_value(b"", Value::Str(b"x".to_vec()));
    assert_eq!(ks.get(b"").unwrap().to_plain(), Plain::Str(b"x".to_vec()));
    let (v, e) = ks.take(b"").expect("present");
    assert_eq!((v.as_ref().to_plain(), e), (Plain::Str(b"x".to_vec()), Some(3)));
    assert!(ks.is_empty() && ks.volatile_len() == 0);
}
