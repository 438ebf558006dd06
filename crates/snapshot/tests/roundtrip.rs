//! Random datasets built through the engine's commands survive write -> read unchanged:
//! every value (as `store::Plain`), every deadline, the array cursors, and the metadata. The
//! loaded keyspace also never reports more memory than the saved one, and keeps the compact
//! encodings.

mod common;

use common::{dump, meta, run};
use engine::Engine;
use proptest::prelude::*;
use snapshot::{Compression, Options};
use store::Keyspace;

const NOW: i64 = 1_700_000_000_000;

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => (0u8..10).prop_map(|i| format!("key{i}").into_bytes()),
        1 => Just(Vec::new()),
        1 => Just(b"k\r\nx".to_vec()),
        1 => Just(vec![0u8, 255, b'\n']),
        1 => proptest::collection::vec(any::<u8>(), 0..24),
    ]
}

fn val() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        2 => (-5000i64..5000).prop_map(|i| i.to_string().into_bytes()),
        1 => any::<i64>().prop_map(|i| i.to_string().into_bytes()),
        1 => Just(Vec::new()),
        1 => Just(b"\r\n".to_vec()),
        1 => Just(b"007".to_vec()),
        1 => Just(b"-0".to_vec()),
        3 => proptest::collection::vec(any::<u8>(), 0..40),
        1 => (60usize..300).prop_map(|n| vec![b'x'; n]),
    ]
}

fn member() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => (0u16..60).prop_map(|i| format!("m{i}").into_bytes()),
        2 => (-300i64..300).prop_map(|i| i.to_string().into_bytes()),
        1 => val(),
    ]
}

fn score() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (-1000i64..1000).prop_map(|i| i.to_string()),
        1 => Just("-0".to_string()),
        1 => Just("0.5".to_string()),
        1 => Just("inf".to_string()),
        1 => Just("-inf".to_string()),
        1 => any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| format!("{f:e}")),
        1 => (1i64 << 53..1 << 60).prop_map(|i| i.to_string()),
    ]
}

fn index() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..50, 0u64..100_000, Just(u64::MAX - 1), any::<u64>().prop_map(|i| i % (u64::MAX - 1))]
}

fn cmd(parts: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    parts
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// One command, small or one that builds a big collection (past the packed limits).
fn op() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop_oneof![
        3 => (key(), val()).prop_map(|(k, v)| cmd(vec![b("SET"), k, v])),
        1 => (key(), -100i64..100).prop_map(|(k, n)| cmd(vec![b("INCRBY"), k, n.to_string().into_bytes()])),
        3 => (key(), proptest::collection::vec((member(), val()), 1..4)).prop_map(|(k, fv)| {
            let mut c = vec![b("HSET"), k];
            for (f, v) in fv { c.push(f); c.push(v); }
            c
        }),
        1 => (key(), 1usize..700, any::<bool>()).prop_map(|(k, n, long)| {
            let mut c = vec![b("HSET"), k];
            for i in 0..n {
                c.push(format!("f{i}").into_bytes());
                c.push(if long && i == n / 2 { vec![b'v'; 70] } else { format!("v{i:06}").into_bytes() });
            }
            c
        }),
        3 => (key(), proptest::collection::vec(member(), 1..4)).prop_map(|(k, ms)| {
            let mut c = vec![b("SADD"), k];
            c.extend(ms);
            c
        }),
        1 => (key(), 1i64..700, 1i64..5).prop_map(|(k, n, step)| {
            let mut c = vec![b("SADD"), k];
            c.extend((0..n).map(|i| (i * step - 100).to_string().into_bytes()));
            c
        }),
        1 => (key(), 1usize..300).prop_map(|(k, n)| {
            let mut c = vec![b("SADD"), k];
            c.extend((0..n).map(|i| format!("m{i:06}").into_bytes()));
            c
        }),
        3 => (key(), proptest::collection::vec((score(), member()), 1..4)).prop_map(|(k, sm)| {
            let mut c = vec![b("ZADD"), k];
            for (s, m) in sm { c.push(s.into_bytes()); c.push(m); }
            c
        }),
        1 => (key(), 1usize..400, any::<bool>()).prop_map(|(k, n, long)| {
            let mut c = vec![b("ZADD"), k];
            for i in 0..n {
                c.push(((i as i64 * 37) % 101).to_string().into_bytes());
                c.push(if long && i == 0 { vec![b'z'; 80] } else { format!("m{i:06}").into_bytes() });
            }
            c
        }),
        2 => (key(), proptest::collection::vec(val(), 1..4), any::<bool>()).prop_map(|(k, vs, left)| {
            let mut c = vec![b(if left { "LPUSH" } else { "RPUSH" }), k];
            c.extend(vs);
            c
        }),
        1 => (key(), 1usize..3000).prop_map(|(k, n)| {
            let mut c = vec![b("RPUSH"), k];
            c.extend((0..n).map(|i| if i % 7 == 0 { i.to_string().into_bytes() } else { format!("e{i}").into_bytes() }));
            c
        }),
        3 => (key(), index(), val()).prop_map(|(k, i, v)| cmd(vec![b("ARSET"), k, i.to_string().into_bytes(), v])),
        1 => (key(), 1u64..1500, 1u64..2000).prop_map(|(k, n, gap)| {
            let mut c = vec![b("ARMSET"), k];
            for i in 0..n {
                c.push((i * gap).to_string().into_bytes());
                c.push(if i % 3 == 0 { i.to_string().into_bytes() } else { format!("v{i:06}").into_bytes() });
            }
            c
        }),
        2 => (key(), proptest::collection::vec(val(), 1..3)).prop_map(|(k, vs)| {
            let mut c = vec![b("ARINSERT"), k];
            c.extend(vs);
            c
        }),
        1 => (key(), index()).prop_map(|(k, i)| cmd(vec![b("ARSEEK"), k, i.to_string().into_bytes()])),
        4 => (key(), -10_000i64..10_000_000).prop_map(|(k, d)| cmd(vec![b("PEXPIREAT"), k, (NOW + d).to_string().into_bytes()])),
        1 => key().prop_map(|k| cmd(vec![b("PERSIST"), k])),
        1 => key().prop_map(|k| cmd(vec![b("DEL"), k])),
        1 => (key(), member()).prop_map(|(k, m)| cmd(vec![b("HDEL"), k, m])),
        1 => (key(), 0usize..400).prop_map(|(k, n)| {
            let mut c = vec![b("HDEL"), k];
            c.extend((0..n).map(|i| format!("f{}", i * 2).into_bytes()));
            c
        }),
        1 => (key(), member()).prop_map(|(k, m)| cmd(vec![b("SREM"), k, m])),
        1 => (key(), member()).prop_map(|(k, m)| cmd(vec![b("ZREM"), k, m])),
        1 => (key(), -50i64..50, -50i64..50).prop_map(|(k, a, z)| cmd(vec![b("LTRIM"), k, a.to_string().into_bytes(), z.to_string().into_bytes()])),
        1 => (key(), index()).prop_map(|(k, i)| cmd(vec![b("ARDEL"), k, i.to_string().into_bytes()])),
        // Streams: entries (same and differing fields), deletions, trims to empty, XSETID.
        3 => (key(), 0u64..5, proptest::collection::vec((member(), val()), 1..3)).prop_map(|(k, ms, fv)| {
            let mut c = vec![b("XADD"), k, if ms == 0 { b("*") } else { format!("{}-*", NOW as u64 + ms).into_bytes() }];
            for (f, v) in fv { c.push(f); c.push(v); }
            c
        }),
        1 => (key(), 1usize..6, 0usize..100).prop_map(|(k, nf, x)| {
            let mut c = vec![b("XADD"), k, b("*")];
            for i in 0..nf { c.push(format!("f{i}").into_bytes()); c.push(format!("v{}", i * x).into_bytes()); }
            c
        }),
        1 => key().prop_map(|k| cmd(vec![b("XADD"), k, b("MAXLEN"), b("0"), b("*"), b("f"), b("v")])),
        1 => (key(), 0u64..4).prop_map(|(k, s)| cmd(vec![b("XDEL"), k, format!("{NOW}-{s}").into_bytes()])),
        1 => (key(), 0u64..3).prop_map(|(k, n)| cmd(vec![b("XTRIM"), k, b("MAXLEN"), n.to_string().into_bytes()])),
        1 => (key(), 5u64..9, 0u64..20).prop_map(|(k, s, n)| cmd(vec![b("XSETID"), k, format!("{}-{s}", NOW + 10).into_bytes(), b("ENTRIESADDED"), n.to_string().into_bytes(), b("MAXDELETEDID"), format!("{NOW}-1").into_bytes()])),
    ]
}

fn options() -> impl Strategy<Value = Options> {
    (prop_oneof![Just(64usize), Just(1000), Just(snapshot::DEFAULT_BLOCK_SIZE)], any::<bool>()).prop_map(
        |(block_size, lz4)| Options {
            block_size,
            compression: if lz4 { Compression::Lz4 } else { Compression::None },
        },
    )
}

/// Bytes of every key's entry and value, as MEMORY USAGE counts them.
fn mem_total(ks: &Keyspace) -> usize {
    let mut keys = Vec::new();
    ks.for_each(|k, _, _| keys.push(k.to_vec()));
    keys.iter().map(|k| ks.mem_usage(k).unwrap()).sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn write_then_read_is_identity(ops in proptest::collection::vec(op(), 1..50), opts in options()) {
        let mut e = Engine::default();
        for c in &ops {
            run(&mut e, c, NOW);
        }
        let m = meta();
        if std::env::var("SNAP_DEBUG").is_ok() {
            let mut encs = std::collections::BTreeMap::new();
            e.ks.for_each(|_, v, at| *encs.entry((v.encoding(), at.is_some())).or_insert(0) += 1);
            eprintln!("{encs:?}");
        }
        let mut file = Vec::new();
        let written = snapshot::write_with(&mut file, &e.ks, &m, &opts, &mut |_| {}).unwrap();
        prop_assert_eq!(written.keys as usize, e.ks.len());
        prop_assert_eq!(written.bytes as usize, file.len());
        let (ks, m2, read) = snapshot::read(&file[..], &mut |_| {}).unwrap();
        prop_assert_eq!(&m2, &m);
        prop_assert_eq!(read, written);
        prop_assert_eq!(dump(&ks), dump(&e.ks));
        prop_assert!(mem_total(&ks) <= mem_total(&e.ks), "loaded {} > saved {}", mem_total(&ks), mem_total(&e.ks));
        // Small values keep their compact encodings.
        e.ks.for_each(|k, v, _| {
            let enc = v.encoding();
            if matches!(enc, "listpack" | "intset" | "int" | "embstr" | "raw") {
                assert_eq!(ks.get(k).unwrap().encoding(), enc, "key {:?}", k);
            }
        });
        // And a reloaded snapshot is byte-identical when written again with the same options
        // (modulo iteration order, which the table decides): same length at least.
        let mut again = Vec::new();
        snapshot::write_with(&mut again, &ks, &m, &opts, &mut |_| {}).unwrap();
        if opts.compression == Compression::None {
            prop_assert_eq!(again.len(), file.len());
        }
    }
}

#[test]
fn empty_keyspace_round_trips() {
    let ks = Keyspace::new();
    let mut file = Vec::new();
    let s = snapshot::write(&mut file, &ks, &meta(), &mut |_| {}).unwrap();
    assert_eq!((s.keys, s.blocks), (0, 2));
    let (ks2, m, s2) = snapshot::read(&file[..], &mut |_| {}).unwrap();
    assert_eq!(ks2.len(), 0);
    assert_eq!(m, meta());
    assert_eq!(s2, s);
    assert_eq!(snapshot::read_meta(&file[..]).unwrap(), meta());
}

#[test]
fn progress_is_reported_per_block() {
    let mut e = Engine::default();
    for i in 0..2000 {
        run(&mut e, &[b("SET"), format!("k{i}").into_bytes(), vec![b'v'; 50]], NOW);
    }
    let opts = Options { block_size: 4096, compression: Compression::None };
    let mut file = Vec::new();
    let mut seen = Vec::new();
    let s = snapshot::write_with(&mut file, &e.ks, &meta(), &opts, &mut |p| seen.push(*p)).unwrap();
    assert!(s.blocks > 20);
    assert!(seen.windows(2).all(|w| w[0].bytes <= w[1].bytes && w[0].keys <= w[1].keys));
    assert_eq!(seen.last().unwrap().keys, 2000);
    assert_eq!(seen.last().unwrap().bytes, file.len() as u64);
    let mut seen = Vec::new();
    snapshot::read(&file[..], &mut |p| seen.push(*p)).unwrap();
    assert!(seen.len() as u64 >= s.blocks - 2);
    assert_eq!(seen.last().unwrap().keys, 2000);
    assert_eq!(seen.last().unwrap().total_keys, 2000);
}

/// The value encodings of `docs/FORMAT.md`'s examples, byte for byte.
#[test]
fn value_encodings_match_the_doc() {
    use store::types::{Hash, List, Set, SparseArray, ZSet};
    use store::Value;
    let record = |v: Value| -> String {
        let mut ks = Keyspace::new();
        ks.insert(b"k", v, None);
        let mut file = Vec::new();
        snapshot::write(&mut file, &ks, &meta(), &mut |_| {}).unwrap();
        let d = snapshot::blocks(&file[..]).unwrap()[1];
        let payload = &file[d.offset as usize + 24..][..d.stored_len as usize];
        // Tag and key ("k"), then the value.
        assert_eq!(&payload[1..3], b"\x01k");
        let hex: Vec<String> = payload.iter().map(|b| format!("{b:02x}")).collect();
        format!("{} | {}", hex[0], hex[3..].join(" "))
    };
    let mut h = Hash::new();
    h.set(b"f1", b"v1");
    assert_eq!(record(Value::Hash(Box::new(h))), "02 | 01 07 06 04 66 31 02 76 31");
    let mut s = Set::new();
    for m in ["300", "1", "5"] {
        s.add(m.as_bytes());
    }
    assert_eq!(record(Value::Set(Box::new(s))), "03 | 03 02 04 a7 02");
    let mut s = Set::new();
    s.add(b"a");
    assert_eq!(record(Value::Set(Box::new(s))), "04 | 01 03 02 02 61");
    let mut z = ZSet::new();
    z.insert(b"b", 2.5);
    z.insert(b"a", 1.0);
    assert_eq!(record(Value::ZSet(Box::new(z))), "05 | 02 0e 0d 21 02 61 29 00 00 00 00 00 00 04 40 62");
    let mut l = List::new();
    for e in ["7", "x", "-5"] {
        l.push_back(e.as_bytes());
    }
    assert_eq!(record(Value::List(Box::new(l))), "06 | 03 06 05 07 81 78 df fb");
    let mut a = SparseArray::new();
    a.set(0, b"a");
    a.set(1000, b"9");
    assert_eq!(record(Value::Array(Box::new(a))), "07 | 02 00 07 06 00 81 61 e8 07 09");
    assert_eq!(record(Value::Int(-3)), "01 | 05");
    assert_eq!(record(Value::Str(b"hi".to_vec())), "00 | 02 68 69");
}
