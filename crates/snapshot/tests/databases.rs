//! Multiple databases (format version 3): keys of databases above 0 follow a database selector
//! record. Random datasets spread over random databases round-trip; a snapshot with keys in
//! database 0 only is byte for byte what `write` writes; every rule on selectors refuses a
//! crafted file; `read` (database 0 only) refuses a file holding another database.

mod common;

use common::{dump, meta, run, sealed_block};
use engine::Engine;
use proptest::prelude::*;
use snapshot::{Compression, LoadError, Options};
use std::collections::BTreeMap;
use store::{Keyspace, Value};

const NOW: i64 = 1_700_000_000_000;

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn version(file: &[u8]) -> u32 {
    u32::from_le_bytes(file[8..12].try_into().unwrap())
}

fn write_dbs(dbs: &[(u32, &Keyspace)], m: &snapshot::Meta, opts: &Options) -> (Vec<u8>, snapshot::Summary) {
    let mut file = Vec::new();
    let s = snapshot::write_dbs_with(&mut file, dbs, m, opts, &mut |_| {}).unwrap();
    (file, s)
}

fn read_dbs(file: &[u8]) -> Result<Vec<(u32, Keyspace)>, LoadError> {
    snapshot::read_dbs(file, &mut |_| {}).map(|(dbs, _, _)| dbs)
}

fn one_key(k: &[u8], v: &[u8]) -> Keyspace {
    let mut ks = Keyspace::new();
    ks.insert(k, Value::Str(v.to_vec()), None);
    ks
}

// ---- Round trip -------------------------------------------------------------------------

/// Database numbers: the usual 0..16 mostly, and the extremes.
fn db() -> impl Strategy<Value = u32> {
    prop_oneof![8 => 0u32..16, 1 => Just(1000u32), 1 => Just(snapshot::MAX_DATABASE)]
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![4 => (0u8..8).prop_map(|i| format!("key{i}").into_bytes()), 1 => Just(Vec::new())]
}

fn val() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        2 => (-5000i64..5000).prop_map(|i| i.to_string().into_bytes()),
        3 => proptest::collection::vec(any::<u8>(), 0..40),
        1 => (60usize..300).prop_map(|n| vec![b'x'; n]),
    ]
}

/// One command of every value type, field deadlines and key deadlines included.
fn op() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop_oneof![
        3 => (key(), val()).prop_map(|(k, v)| vec![b("SET"), k, v]),
        2 => (key(), 1usize..300).prop_map(|(k, n)| {
            let mut c = vec![b("HSET"), k];
            for i in 0..n {
                c.push(format!("f{i}").into_bytes());
                c.push(format!("v{i}").into_bytes());
            }
            c
        }),
        1 => (key(), 0usize..5).prop_map(|(k, f)| {
            vec![b("HPEXPIREAT"), k, (NOW + 5000).to_string().into_bytes(), b("FIELDS"), b("1"), format!("f{f}").into_bytes()]
        }),
        2 => (key(), 1i64..600).prop_map(|(k, n)| {
            let mut c = vec![b("SADD"), k];
            c.extend((0..n).map(|i| (i * 3).to_string().into_bytes()));
            c
        }),
        1 => (key(), proptest::collection::vec(val(), 1..4)).prop_map(|(k, ms)| {
            let mut c = vec![b("SADD"), k];
            c.extend(ms);
            c
        }),
        2 => (key(), 1usize..200).prop_map(|(k, n)| {
            let mut c = vec![b("ZADD"), k];
            for i in 0..n {
                c.push(((i as i64 * 37) % 101).to_string().into_bytes());
                c.push(format!("m{i}").into_bytes());
            }
            c
        }),
        2 => (key(), proptest::collection::vec(val(), 1..20)).prop_map(|(k, vs)| {
            let mut c = vec![b("RPUSH"), k];
            c.extend(vs);
            c
        }),
        2 => (key(), 0u64..100_000, val()).prop_map(|(k, i, v)| vec![b("ARSET"), k, i.to_string().into_bytes(), v]),
        2 => (key(), proptest::collection::vec((0usize..3, val()), 1..3)).prop_map(|(k, fv)| {
            let mut c = vec![b("XADD"), k, b("*")];
            for (f, v) in fv {
                c.push(format!("f{f}").into_bytes());
                c.push(v);
            }
            c
        }),
        3 => (key(), -10_000i64..10_000_000).prop_map(|(k, d)| vec![b("PEXPIREAT"), k, (NOW + d).to_string().into_bytes()]),
        1 => key().prop_map(|k| vec![b("DEL"), k]),
    ]
}

fn options() -> impl Strategy<Value = Options> {
    (prop_oneof![Just(7usize), Just(64), Just(1000), Just(snapshot::DEFAULT_BLOCK_SIZE)], any::<bool>())
        .prop_map(|(block_size, lz4)| Options {
            block_size,
            compression: if lz4 { Compression::Lz4 } else { Compression::None },
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn databases_round_trip(
        ops in proptest::collection::vec((db(), op()), 0..60),
        empty_dbs in proptest::collection::btree_set(db(), 0..4),
        functions in any::<bool>(),
        opts in options(),
    ) {
        // One engine per database; databases named in `empty_dbs` are passed even if empty.
        let mut engines: BTreeMap<u32, Engine> = BTreeMap::new();
        for n in empty_dbs {
            engines.entry(n).or_default();
        }
        for (n, c) in &ops {
            run(engines.entry(*n).or_default(), c, NOW);
        }
        let mut m = meta();
        if functions {
            m.functions = vec![b"#!lua name=a\nx".to_vec()];
        }
        let dbs: Vec<(u32, &Keyspace)> = engines.iter().map(|(n, e)| (*n, &e.ks)).collect();
        let mut seen = Vec::new();
        let mut file = Vec::new();
        let written = snapshot::write_dbs_with(&mut file, &dbs, &m, &opts, &mut |p| seen.push(*p)).unwrap();

        // What a reader must return: database 0, then every other database with a key.
        let mut want: Vec<(u32, _)> = vec![(0, engines.get(&0).map(|e| dump(&e.ks)).unwrap_or_default())];
        want.extend(engines.iter().filter(|(n, e)| **n > 0 && !e.ks.is_empty()).map(|(n, e)| (*n, dump(&e.ks))));
        let total: usize = engines.values().map(|e| e.ks.len()).sum();
        let others = want.len() > 1;
        let expect_version = if others { 3 } else if functions { 2 } else { 1 };
        prop_assert_eq!(version(&file), expect_version);
        prop_assert_eq!(written.keys as usize, total);
        prop_assert_eq!(written.bytes as usize, file.len());
        prop_assert_eq!(seen.last().unwrap().keys as usize, total);

        let mut seen = Vec::new();
        let (got, m2, read) = snapshot::read_dbs(&file[..], &mut |p| seen.push(*p)).unwrap();
        // The header's key count (progress's total) is a total over all databases.
        prop_assert_eq!(seen.last().unwrap().total_keys as usize, total);
        prop_assert_eq!(seen.last().unwrap().keys as usize, total);
        prop_assert_eq!(&m2, &m);
        prop_assert_eq!(read, written);
        let got: Vec<(u32, _)> = got.iter().map(|(n, ks)| (*n, dump(ks))).collect();
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(snapshot::read_meta(&file[..]).unwrap(), m.clone());
        prop_assert_eq!(snapshot::blocks(&file[..]).unwrap().len() as u64, written.blocks);

        // `read`: database 0 alone, or a clear refusal when the file holds another database.
        match snapshot::read(&file[..], &mut |_| {}) {
            Ok((ks, _, s)) => {
                prop_assert!(!others);
                prop_assert_eq!(s, written);
                prop_assert_eq!(dump(&ks), want[0].1.clone());
            }
            Err(LoadError::OtherDatabases { db, .. }) => {
                prop_assert!(others);
                prop_assert_eq!(db, want[1].0);
            }
            Err(e) => prop_assert!(false, "{}", e),
        }

        // Database 0 alone through `write_with`: the same bytes as through `write_dbs_with`.
        if !others {
            let empty = Keyspace::new();
            let ks0 = engines.get(&0).map(|e| &e.ks).unwrap_or(&empty);
            let mut alone = Vec::new();
            snapshot::write_with(&mut alone, ks0, &m, &opts, &mut |_| {}).unwrap();
            prop_assert_eq!(alone, file);
        }
    }
}

// ---- Database 0 alone: byte for byte what `write` writes ----------------------------------

#[test]
fn database_0_alone_is_byte_identical_to_write() {
    let mut e = Engine::default();
    for i in 0..300 {
        run(&mut e, &[b("SET"), format!("s{i}").into_bytes(), format!("v{i}").into_bytes()], NOW);
        run(&mut e, &[b("RPUSH"), format!("l{}", i % 7).into_bytes(), format!("e{i}").into_bytes()], NOW);
    }
    run(&mut e, &[b("PEXPIREAT"), b("s1"), (NOW + 1).to_string().into_bytes()], NOW);
    let empty = Keyspace::new();
    // Database 4 holds only an empty collection, which is never written: no selector either.
    let mut hollow = Keyspace::new();
    hollow.insert(b"h", Value::Hash(Box::default()), None);
    for functions in [false, true] {
        let mut m = meta();
        if functions {
            m.functions = vec![b"#!lua name=f\ny".to_vec()];
        }
        for opts in [Options::default(), Options { block_size: 100, compression: Compression::Lz4 }] {
            let mut old = Vec::new();
            let s_old = snapshot::write_with(&mut old, &e.ks, &m, &opts, &mut |_| {}).unwrap();
            assert_eq!(version(&old), if functions { 2 } else { 1 });
            for dbs in [vec![(0, &e.ks)], vec![(0, &e.ks), (1, &empty), (15, &empty)]] {
                let (new, s_new) = write_dbs(&dbs, &m, &opts);
                assert!(new == old, "{:?}", dbs.iter().map(|d| d.0).collect::<Vec<_>>());
                assert_eq!(s_new, s_old);
            }
            // The header's key count (a hint) counts the empty hash; all else is the same.
            let (new, s_new) = write_dbs(&[(0, &e.ks), (4, &hollow), (9, &empty)], &m, &opts);
            let d = snapshot::blocks(&old[..]).unwrap()[1].offset as usize;
            assert_eq!(new.len(), old.len());
            assert!(new[..12] == old[..12] && new[d..] == old[d..]);
            assert_eq!(s_new, s_old);
        }
        let mut plain = Vec::new();
        snapshot::write(&mut plain, &e.ks, &m, &mut |_| {}).unwrap();
        let mut plain_dbs = Vec::new();
        snapshot::write_dbs(&mut plain_dbs, &[(0, &e.ks), (2, &empty)], &m, &mut |_| {}).unwrap();
        assert_eq!(plain_dbs, plain);
    }
    // Nothing at all: the empty snapshot `write` makes of an empty keyspace.
    let mut none = Vec::new();
    snapshot::write(&mut none, &empty, &meta(), &mut |_| {}).unwrap();
    assert_eq!(write_dbs(&[], &meta(), &Options::default()).0, none);
    assert_eq!(write_dbs(&[(3, &empty)], &meta(), &Options::default()).0, none);
}

#[test]
fn selectors_make_version_3_with_or_without_libraries() {
    let a = one_key(b"k", b"zero");
    let c = one_key(b"k", b"seven");
    let empty = Keyspace::new();
    let mut hollow = Keyspace::new();
    hollow.insert(b"h", Value::Hash(Box::default()), None);
    hollow.insert(b"x", Value::Str(b"y".to_vec()), None);
    for functions in [false, true] {
        let mut m = meta();
        if functions {
            m.functions = vec![b"#!lua name=f\ny".to_vec()];
        }
        let (file, s) = write_dbs(&[(0, &empty), (7, &c), (8, &hollow)], &m, &Options::default());
        assert_eq!(version(&file), 3);
        assert_eq!((s.keys, s.types.strings), (2, 2), "the empty hash is not written");
        let (dbs, m2, _) = snapshot::read_dbs(&file[..], &mut |_| {}).unwrap();
        assert_eq!(m2, m);
        let got: Vec<_> = dbs.iter().map(|(n, ks)| (*n, dump(ks).into_keys().collect::<Vec<_>>())).collect();
        assert_eq!(got, vec![(0, vec![]), (7, vec![b("k")]), (8, vec![b("x")])]);
        // Database 0's records come first, unmarked; the others' after their selectors.
        let (file, _) = write_dbs(&[(0, &a), (300, &c)], &m, &Options::default());
        let d = snapshot::blocks(&file[..]).unwrap()[1];
        let payload = &file[d.offset as usize + 24..][..d.stored_len as usize];
        assert_eq!(payload, b"\x00\x01k\x04zero\x20\xac\x02\x00\x01k\x05seven");
        let dbs = read_dbs(&file).unwrap();
        assert_eq!(dbs.iter().map(|d| d.0).collect::<Vec<_>>(), vec![0, 300]);
        assert_eq!(dump(&dbs[0].1), dump(&a));
        assert_eq!(dump(&dbs[1].1), dump(&c));
    }
}

#[test]
fn databases_out_of_order_or_range_are_not_written() {
    let a = one_key(b"k", b"v");
    for dbs in [
        vec![(1, &a), (1, &a)],
        vec![(2, &a), (1, &a)],
        vec![(0, &a), (snapshot::MAX_DATABASE + 1, &a)],
        vec![(u32::MAX, &a)],
    ] {
        let mut out = Vec::new();
        let e = snapshot::write_dbs(&mut out, &dbs, &meta(), &mut |_| {}).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        assert!(out.is_empty());
    }
}

// ---- `read` and version-3 files ------------------------------------------------------------

#[test]
fn read_refuses_a_file_with_other_databases() {
    let a = one_key(b"a", b"1");
    let c = one_key(b"c", b"2");
    let (file, _) = write_dbs(&[(0, &a), (5, &c)], &meta(), &Options::default());
    let d = snapshot::blocks(&file[..]).unwrap()[1];
    let e = snapshot::read(&file[..], &mut |_| {}).map(|_| ()).unwrap_err();
    match &e {
        LoadError::OtherDatabases { block: 1, offset, db: 5 } => assert_eq!(*offset, d.offset),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        e.to_string(),
        format!(
            "block 1 at byte {}: the snapshot holds databases other than 0 (database 5), which this \
             reader does not load",
            d.offset
        )
    );
    // Its metadata and blocks read as any other's.
    assert_eq!(snapshot::read_meta(&file[..]).unwrap(), meta());
    let kinds: Vec<u8> = snapshot::blocks(&file[..]).unwrap().iter().map(|b| b.kind).collect();
    assert_eq!(kinds, b"HDT");
    // A reader that knows only versions 1 and 2 refuses the file: its prelude says 3.
    assert_eq!(version(&file), 3);
}

// ---- Crafted files --------------------------------------------------------------------------

fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

/// A string record (no deadline).
fn rec(key: &str) -> Vec<u8> {
    let mut r = vec![0x00];
    r.extend(varint(key.len() as u64));
    r.extend_from_slice(key.as_bytes());
    r.extend([1, b'v']);
    r
}

fn sel(n: u64) -> Vec<u8> {
    let mut r = vec![0x20];
    r.extend(varint(n));
    r
}

/// A whole file of the given version whose data stream is `stream` (all its records strings),
/// cut into data blocks at `cuts` (offsets in the stream), with `keys` counted in the trailer.
fn craft(version: u32, stream: &[u8], cuts: &[usize], keys: u64) -> Vec<u8> {
    let mut f = snapshot::MAGIC.to_vec();
    f.extend_from_slice(&version.to_le_bytes());
    let mut h = vec![1, b't'];
    h.extend_from_slice(&0i64.to_le_bytes());
    h.push(0);
    for x in [0u64, u64::MAX, u64::MAX, keys] {
        h.extend_from_slice(&x.to_le_bytes());
    }
    for k in store::keyspace::hash::KeyHasher::global().secrets() {
        h.extend_from_slice(&k.to_le_bytes());
    }
    if version >= 2 {
        h.push(0); // no function libraries
    }
    f.extend(sealed_block(b'H', 0, &h));
    let mut index = 1;
    let mut at = 0;
    for &end in cuts.iter().chain([stream.len()].iter()) {
        if end > at {
            f.extend(sealed_block(b'D', index, &stream[at..end]));
            index += 1;
            at = end;
        }
    }
    let mut t = Vec::new();
    for x in [keys, 0, keys, 0, 0, 0, 0, 0, index as u64 - 1, stream.len() as u64] {
        t.extend(varint(x));
    }
    f.extend(sealed_block(b'T', index, &t));
    f
}

fn stream(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

/// The keys of each database a crafted file loads as.
fn keys_of(file: &[u8]) -> Result<Vec<(u32, Vec<Vec<u8>>)>, LoadError> {
    Ok(read_dbs(file)?.iter().map(|(n, ks)| (*n, dump(ks).into_keys().collect())).collect())
}

/// The message of the `Malformed` error a crafted file yields, checked to be in `block`.
fn malformed(file: &[u8], block: u64) -> String {
    match read_dbs(file) {
        Err(LoadError::Malformed { block: b, what, .. }) => {
            assert_eq!(b, block, "{what}");
            what
        }
        Err(e) => panic!("{e}"),
        Ok(dbs) => panic!("loaded {:?}", dbs.iter().map(|d| d.0).collect::<Vec<_>>()),
    }
}

#[test]
fn crafted_valid_files_load() {
    // The crafting itself is right: a file with selectors loads, a repeated key across
    // databases included, selectors straddling blocks (after the tag, inside the varint).
    let s = stream(&[rec("k"), sel(2), rec("k"), rec("j"), sel(300), rec("k")]);
    let want = vec![(0, vec![b("k")]), (2, vec![b("j"), b("k")]), (300, vec![b("k")])];
    // Records of 5 bytes, selectors of 2 and 3: sel(2) at 5..7, sel(300) at 17..20.
    for cuts in [vec![], vec![5], vec![6], vec![6, 18], vec![17], vec![19], (1..25).collect()] {
        assert_eq!(keys_of(&craft(3, &s, &cuts, 4)).unwrap(), want, "cuts {cuts:?}");
    }
    // Database 0 may be empty; the largest database number is accepted.
    let s = stream(&[sel(snapshot::MAX_DATABASE as u64), rec("k")]);
    assert_eq!(
        keys_of(&craft(3, &s, &[], 1)).unwrap(),
        vec![(0, vec![]), (snapshot::MAX_DATABASE, vec![b("k")])]
    );
    // A version-3 file without selectors is database 0 alone, for `read` too.
    let f = craft(3, &rec("k"), &[], 1);
    assert_eq!(keys_of(&f).unwrap(), vec![(0, vec![b("k")])]);
    assert_eq!(snapshot::read(&f[..], &mut |_| {}).unwrap().0.len(), 1);
}

#[test]
fn selector_rules_refuse_crafted_files() {
    // A selector of database 0, or of one not above the previous selector's.
    let m = malformed(&craft(3, &stream(&[sel(0), rec("k")]), &[], 1), 1);
    assert!(m.contains("database 0"), "{m}");
    let m = malformed(&craft(3, &stream(&[rec("k"), sel(0), rec("j")]), &[], 2), 1);
    assert!(m.contains("database 0"), "{m}");
    let m = malformed(&craft(3, &stream(&[sel(2), rec("k"), sel(2), rec("j")]), &[], 2), 1);
    assert!(m.contains("database 2 selected after database 2"), "{m}");
    let m = malformed(&craft(3, &stream(&[sel(5), rec("k"), sel(3), rec("j")]), &[], 2), 1);
    assert!(m.contains("database 3 selected after database 5"), "{m}");
    // Above the sanity bound.
    for n in [snapshot::MAX_DATABASE as u64 + 1, u32::MAX as u64 + 2, u64::MAX] {
        let m = malformed(&craft(3, &stream(&[sel(n), rec("k")]), &[], 1), 1);
        assert!(m.contains("above 1000000"), "{n}: {m}");
    }
    // No record after a selector: before the next selector, or before the trailer (located
    // where the record should have started: after the selector, here in block 1 at byte 2).
    let m = malformed(&craft(3, &stream(&[sel(2), sel(3), rec("k")]), &[], 1), 1);
    assert!(m.contains("no key after the selector of database 2"), "{m}");
    let f = craft(3, &stream(&[rec("k"), sel(2)]), &[5], 1);
    match read_dbs(&f) {
        Err(LoadError::Malformed { block: 2, pos: 2, what, .. }) => {
            assert!(what.contains("no key after the selector of database 2"), "{what}")
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    // A selector cut short by the trailer.
    let f = craft(3, &[rec("k"), vec![0x20, 0x80]].concat(), &[], 1);
    assert!(malformed(&f, 2).contains("cut short"));
    // A selector in a version-1 or version-2 file (whose readers refuse tag 0x20).
    for v in [1, 2] {
        let m = malformed(&craft(v, &stream(&[rec("k"), sel(2), rec("j")]), &[], 2), 1);
        assert_eq!(m, format!("a database selector in a version-{v} file"));
    }
    // Tag bit 5 with any other bit is no selector but an unknown record tag.
    for tag in [0x21u8, 0x30, 0x60, 0xA0] {
        let m = malformed(&craft(3, &[vec![tag, 2], rec("k")].concat(), &[], 1), 1);
        assert!(m.contains("unknown record tag"), "{tag:02x}: {m}");
    }
    // A key twice in one database, before or after a selector.
    for s in
        [stream(&[rec("k"), rec("k"), sel(1), rec("j")]), stream(&[rec("k"), sel(1), rec("k"), rec("k")])]
    {
        assert!(malformed(&craft(3, &s, &[], 3), 1).contains("duplicate key"));
    }
}

#[test]
fn a_selector_in_a_written_file_patched_to_version_2_is_refused() {
    // The version-2 and version-3 headers are alike: only the selector tells them apart.
    let a = one_key(b"a", b"1");
    let c = one_key(b"c", b"2");
    let (mut file, _) = write_dbs(&[(0, &a), (5, &c)], &meta(), &Options::default());
    read_dbs(&file).unwrap();
    file[8..12].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(snapshot::read_meta(&file[..]).unwrap(), meta());
    assert_eq!(malformed(&file, 1), "a database selector in a version-2 file");
    assert!(matches!(snapshot::read(&file[..], &mut |_| {}), Err(LoadError::Malformed { block: 1, .. })));
}
