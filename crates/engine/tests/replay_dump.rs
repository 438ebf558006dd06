//! DUMP and RESTORE: random values of every type survive DUMP -> RESTORE exactly, RESTORE's
//! canonical mutations replay to the same state (the replay property of tests/common), and no
//! damaged payload is ever accepted or makes the decoder panic.

mod common;

use common::{check_replay, cmd, dump, engine, Cmd};
use engine::rdb;
use engine::Engine;
use proptest::prelude::*;

const START: i64 = 1_700_000_000_000;

/// Elements that exercise each encoding: small and large integers (int-encoded strings,
/// intsets), text, the empty string, and a long repetitive string.
fn elem() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (-300i64..300).prop_map(|i| i.to_string()),
        1 => prop::sample::select(vec![
            "", "x", "hello world", "9223372036854775807", "-9223372036854775808", "2147483648",
            "007", "1.5", "-0",
        ]).prop_map(str::to_string),
        2 => "[a-e]{1,12}",
        1 => "[ab]{40,120}",
    ]
}

fn score() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (-100i64..100).prop_map(|i| i.to_string()),
        2 => (-1e6f64..1e6).prop_map(|f| format!("{f}")),
        1 => prop::sample::select(vec!["inf", "-inf", "0", "-0", "1e300", "0.1"]).prop_map(str::to_string),
    ]
}

/// The commands that build one value of a random type at `key`.
fn value_cmds(key: &'static str) -> impl Strategy<Value = Vec<Cmd>> {
    let elems = || prop::collection::vec(elem(), 1..40);
    prop_oneof![
        elem().prop_map(move |v| vec![cmd(&["SET", key, &v])]),
        elems().prop_map(move |es| es.iter().map(|e| cmd(&["RPUSH", key, e])).collect()),
        elems().prop_map(move |es| es.iter().map(|e| cmd(&["SADD", key, e])).collect()),
        // Many small integers: an intset that may grow past its threshold.
        (0usize..700).prop_map(move |n| (0..n.max(1)).map(|i| cmd(&["SADD", key, &i.to_string()])).collect()),
        prop::collection::vec((elem(), elem()), 1..40)
            .prop_map(move |fs| fs.iter().map(|(f, v)| cmd(&["HSET", key, f, v])).collect()),
        prop::collection::vec((score(), elem()), 1..200)
            .prop_map(move |ms| ms.iter().map(|(s, m)| cmd(&["ZADD", key, s, m])).collect()),
        (prop::collection::vec((0u64..5000, elem()), 1..40), prop::option::of(0u64..100)).prop_map(
            move |(es, seek)| {
                let mut v: Vec<Cmd> =
                    es.iter().map(|(i, e)| cmd(&["ARSET", key, &i.to_string(), e])).collect();
                if let Some(s) = seek {
                    v.push(cmd(&["ARSEEK", key, &s.to_string()]));
                }
                v
            }
        ),
        // Streams: entries (IDs ascending, same and differing fields), some deleted, maybe all
        // trimmed away (an empty stream is a key too), and XSETID's counters.
        (
            prop::collection::vec((0u64..3, prop::collection::vec((elem(), elem()), 1..4)), 1..30),
            prop::collection::vec(0usize..30, 0..5),
            any::<bool>(),
            prop::option::of(0u64..50),
        )
            .prop_map(move |(es, dels, empty, added)| {
                let mut ms = 1u64;
                let mut ids = Vec::new();
                let mut v: Vec<Cmd> = Vec::new();
                for (i, (d, fields)) in es.iter().enumerate() {
                    ms += d;
                    let id = format!("{ms}-{i}");
                    let mut c = vec!["XADD".to_string(), key.to_string(), id.clone()];
                    for (f, val) in fields {
                        c.push(f.clone());
                        c.push(val.clone());
                    }
                    v.push(cmd(&c));
                    ids.push(id);
                }
                for d in dels {
                    v.push(cmd(&["XDEL", key, &ids[d % ids.len()]]));
                }
                if empty {
                    v.push(cmd(&["XTRIM", key, "MAXLEN", "0"]));
                }
                if let Some(n) = added {
                    let last = format!("{}-0", ms + 1);
                    v.push(cmd(&["XSETID", key, &last, "ENTRIESADDED", &(n + 40).to_string()]));
                }
                v
            }),
    ]
}

fn run(e: &mut Engine, args: &[&[u8]], now: i64) -> Vec<u8> {
    let mut out = Vec::new();
    e.run(args, now, &mut out);
    out
}

/// Builds the value in a scratch engine and returns its DUMP payload.
fn payload_of(cmds: &[Cmd]) -> Vec<u8> {
    let mut e = engine();
    for c in cmds {
        let args: Vec<&[u8]> = c.iter().map(|a| a.as_slice()).collect();
        run(&mut e, &args, START);
    }
    let out = run(&mut e, &[b"DUMP", b"src"], START);
    let start = out.iter().position(|&b| b == b'\n').unwrap() + 1;
    out[start..out.len() - 2].to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// DUMP -> RESTORE gives back the same value (and RESTORE's mutations replay to it).
    #[test]
    fn dump_restore_round_trips_and_replays(
        build in value_cmds("src"),
        before in prop::option::of(value_cmds("dst")),
        ttl in prop_oneof![Just(0i64), 1i64..10_000],
        absttl in any::<bool>(),
    ) {
        let payload = payload_of(&build);
        let mut cmds: Vec<Cmd> = before.map(|b| b.into_iter().map(|mut c| { c[1] = b"dst".to_vec(); c }).collect())
            .unwrap_or_default();
        cmds.extend(build.iter().cloned());
        let ttl_arg = if absttl && ttl > 0 { START + ttl } else { ttl };
        let mut restore = vec![b"RESTORE".to_vec(), b"dst".to_vec(), ttl_arg.to_string().into_bytes(), payload.clone(), b"REPLACE".to_vec()];
        if absttl {
            restore.push(b"ABSTTL".to_vec());
        }
        cmds.push(restore);
        let replies = check_replay(&cmds, START, 0);
        prop_assert_eq!(replies.last().unwrap().as_slice(), b"+OK\r\n");
        // Same value at src and dst.
        let mut e = engine();
        for c in &cmds {
            let args: Vec<&[u8]> = c.iter().map(|a| a.as_slice()).collect();
            run(&mut e, &args, START);
        }
        let state = dump(&e);
        prop_assert_eq!(&state[&(0, b"src".to_vec())].0, &state[&(0, b"dst".to_vec())].0);
        let want_deadline = (ttl > 0).then_some(START + ttl);
        prop_assert_eq!(state[&(0, b"dst".to_vec())].1, want_deadline);
    }

    /// Every truncation and every single-bit flip of a payload is refused by the checksum (or
    /// the length check), never accepted and never a panic.
    #[test]
    fn damaged_payloads_are_refused(build in value_cmds("src")) {
        let payload = payload_of(&build);
        prop_assert!(rdb::restore(&payload).is_ok());
        for cut in 0..payload.len() {
            prop_assert!(rdb::restore(&payload[..cut]).is_err(), "cut at {}", cut);
        }
        let mut p = payload.clone();
        for i in 0..p.len() {
            for bit in 0..8 {
                p[i] ^= 1 << bit;
                let r = rdb::restore(&p);
                p[i] ^= 1 << bit;
                // A flip in the version field to a lower version is still covered by the CRC.
                prop_assert_eq!(r.err(), Some(rdb::DecodeError::VersionOrChecksum), "flip {}:{}", i, bit);
            }
        }
    }

    /// A forged payload with a valid checksum (random edits to a real one, then re-signed) is
    /// either a value or "Bad data format": the decoder never panics or loops.
    #[test]
    fn forged_payloads_never_panic(
        build in value_cmds("src"),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let payload = payload_of(&build);
        let mut body = payload[..payload.len() - 10].to_vec();
        for (at, b) in edits {
            let i = at.index(body.len());
            body[i] = b;
        }
        let keep = cut.index(body.len() + 1);
        for body in [&body[..], &body[..keep]] {
            let mut p = body.to_vec();
            p.extend_from_slice(&rdb::RDB_VERSION.to_le_bytes());
            let crc = rdb::crc64(0, &p);
            p.extend_from_slice(&crc.to_le_bytes());
            match rdb::restore(&p) {
                Ok(v) => {
                    // Whatever loads is a well-formed value: it dumps and loads again.
                    let again = rdb::restore(&rdb::dump(v.as_ref())).unwrap();
                    prop_assert_eq!(again.as_ref().to_plain(), v.as_ref().to_plain());
                }
                Err(e) => prop_assert_eq!(e, rdb::DecodeError::BadFormat),
            }
        }
    }
}

/// Payloads redis-server 7.0.15 wrote (quicklist 2 of listpacks, intset, listpack hash and
/// zset, LZF string), for forging compact encodings goblin never writes itself.
const REDIS_PAYLOADS: &[&str] = &[
    "1201020f0f00000003008161028162020101ff0a00e01bab4a47ce5922",
    "1201023a3a0000000b00dfff02df3802f270110104f290eefe04f4000000000001000009f400000000000000c0097f01c08002cfff02d00002f1ff1f03ff0a009c23e404f49f870b",
    "0b0e02000000030000000100020003000a00a5025ce26d6e4d1b",
    "1012120000000400816602817602816e020501ff0a008490939f57b4f3c2",
    "111414000000040081610283312e35048162020201ff0a00fa02b425af188763",
    "00c30b405a0361626361e04b020162630a00238036f9e2d0c780",
];

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Forged compact encodings (random edits to Redis's own payloads, re-signed): a value or
    /// "Bad data format", never a panic.
    #[test]
    fn forged_compact_payloads_never_panic(
        which in 0..REDIS_PAYLOADS.len(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let payload = hex(REDIS_PAYLOADS[which]);
        prop_assert!(rdb::restore(&payload).is_ok());
        let mut body = payload[..payload.len() - 10].to_vec();
        for (at, b) in edits {
            let i = at.index(body.len());
            body[i] = b;
        }
        body.extend_from_slice(&rdb::RDB_VERSION.to_le_bytes());
        let crc = rdb::crc64(0, &body);
        body.extend_from_slice(&crc.to_le_bytes());
        if let Err(e) = rdb::restore(&body) {
            prop_assert_eq!(e, rdb::DecodeError::BadFormat);
        }
    }
}

/// Hand-built compact encodings Redis writes (and goblin never does) load: an LZF string, a
/// quicklist 2 with a plain node, an old ziplist list, an intset of 64-bit values.
#[test]
fn compact_encodings_load() {
    fn sign(mut body: Vec<u8>) -> Vec<u8> {
        body.extend_from_slice(&10u16.to_le_bytes());
        let crc = rdb::crc64(0, &body);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    }
    // LZF string.
    let text = b"abcabcabcabcabcabcabcabcabcabcxyz".repeat(5);
    let c = rdb::lzf_compress(&text);
    let mut body = vec![0u8, 0xC3, c.len() as u8, 0x40 | (text.len() >> 8) as u8, text.len() as u8];
    assert!(c.len() < 64);
    body.extend_from_slice(&c);
    let v = rdb::restore(&sign(body)).unwrap();
    assert_eq!(v.as_ref().to_plain(), store::Plain::Str(text.clone()));
    // LZF with a wrong decompressed length: Bad data format.
    let mut body = vec![0u8, 0xC3, c.len() as u8, 0x40 | (text.len() >> 8) as u8, text.len() as u8 + 1];
    body.extend_from_slice(&c);
    assert_eq!(rdb::restore(&sign(body)).unwrap_err(), rdb::DecodeError::BadFormat);
    // A plain quicklist node is one element too big to pack, never an empty one.
    assert_eq!(rdb::restore(&sign(vec![18u8, 1, 1, 0])).unwrap_err().message(), b"ERR Bad data format");
    // An empty collection: RESTORE refuses it; an RDB file's load skips the key, as Redis's
    // does for files of old versions that saved such keys.
    assert_eq!(rdb::restore(&sign(vec![2u8, 0])).unwrap_err().message(), b"ERR Bad data format");
    let mut file = b"REDIS0009".to_vec();
    file.extend_from_slice(&[0xFE, 0, 2, 1, b'e', 0, 0, 1, b'k', 1, b'v', 0xFF]);
    file.extend_from_slice(&[0; 8]);
    let mut keys = Vec::new();
    let found = rdb::load_rdb_file(
        &file,
        0,
        16,
        &mut |_, k, _, _| {
            keys.push(k.to_vec());
            false
        },
        &mut |_, _| {},
        &mut |_| {},
    )
    .unwrap();
    assert_eq!((keys, found.keys, found.empty_skipped), (vec![b"k".to_vec()], 1, 1));
    // Quicklist 2: one plain node "big", one empty listpack node (skipped).
    let body = vec![18u8, 2, 1, 3, b'b', b'i', b'g', 2, 7, 7, 0, 0, 0, 0, 0, 0xff];
    let v = rdb::restore(&sign(body)).unwrap();
    assert_eq!(v.as_ref().to_plain(), store::Plain::List(vec![b"big".to_vec()]));
    // Old ziplist list [ "ab", 5, -2 ]: zlbytes, zltail, zllen, entries, end.
    let entries: Vec<u8> = vec![0, 2, b'a', b'b', 4, 0xF6, 2, 0xFE, 0xFE];
    let total = 10 + entries.len() + 1;
    // The tail offset is where the last entry starts (10 + 4 + 2).
    let ziplist = |tail: u32, entries: &[u8]| {
        let mut zl = (total as u32).to_le_bytes().to_vec();
        zl.extend_from_slice(&tail.to_le_bytes());
        zl.extend_from_slice(&3u16.to_le_bytes());
        zl.extend_from_slice(entries);
        zl.push(0xff);
        let mut body = vec![10u8, zl.len() as u8];
        body.extend_from_slice(&zl);
        rdb::restore(&sign(body))
    };
    let v = ziplist(16, &entries).unwrap();
    assert_eq!(
        v.as_ref().to_plain(),
        store::Plain::List(vec![b"ab".to_vec(), b"5".to_vec(), b"-2".to_vec()])
    );
    // A wrong tail offset, or an entry's previous length that is not the previous entry's
    // size, is refused as Redis's integrity check refuses it.
    assert_eq!(ziplist(0, &entries).unwrap_err(), rdb::DecodeError::BadFormat);
    let mut wrong_prev = entries.clone();
    wrong_prev[4] = 3;
    assert_eq!(ziplist(16, &wrong_prev).unwrap_err(), rdb::DecodeError::BadFormat);
    // Intset of 8-byte values, and an unsorted one (refused).
    let mut is = 8u32.to_le_bytes().to_vec();
    is.extend_from_slice(&2u32.to_le_bytes());
    is.extend_from_slice(&(-5i64).to_le_bytes());
    is.extend_from_slice(&(1i64 << 40).to_le_bytes());
    let mut body = vec![11u8, is.len() as u8];
    body.extend_from_slice(&is);
    let v = rdb::restore(&sign(body.clone())).unwrap();
    assert_eq!(
        v.as_ref().to_plain(),
        store::Plain::Set([b"-5".to_vec(), (1i64 << 40).to_string().into_bytes()].into_iter().collect())
    );
    let (v1, v2) = (body[10..18].to_vec(), body[18..26].to_vec());
    body[10..18].copy_from_slice(&v2);
    body[18..26].copy_from_slice(&v1);
    assert_eq!(rdb::restore(&sign(body)).unwrap_err(), rdb::DecodeError::BadFormat);
    // An empty plain set and an unknown type: Bad data format, as Redis.
    assert_eq!(rdb::restore(&sign(vec![2, 0])).unwrap_err(), rdb::DecodeError::BadFormat);
    assert_eq!(rdb::restore(&sign(vec![15, 0])).unwrap_err(), rdb::DecodeError::BadFormat);
    // A newer RDB version than goblin reads: the version error.
    let mut p = vec![0u8, 1, b'a'];
    p.extend_from_slice(&13u16.to_le_bytes());
    let crc = rdb::crc64(0, &p);
    p.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(rdb::restore(&p).unwrap_err(), rdb::DecodeError::VersionOrChecksum);
}

/// (key, plain value, deadline) of every key, sorted: two keyspaces hold the same data
/// exactly when these are equal.
fn contents(ks: &store::Keyspace) -> Vec<(Vec<u8>, store::Plain, Option<i64>)> {
    let mut v = Vec::new();
    ks.for_each(|k, val, d| v.push((k.to_vec(), val.to_plain(), d)));
    v.sort();
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// A whole RDB file (what SYNC sends) reads back as the keyspace it was written from:
    /// every value and deadline, the function libraries; keys past their deadline are left
    /// out; a file cut anywhere is refused, never half-loaded or a panic.
    #[test]
    fn rdb_files_round_trip(
        a in value_cmds("a"),
        b in value_cmds("b"),
        c in value_cmds("c"),
        deadlines in prop::collection::vec(prop::option::of(-5_000i64..100_000), 3),
        cuts in prop::collection::vec(0.0f64..1.0, 8),
    ) {
        let mut e = engine();
        for (key, build) in [("a", &a), ("b", &b), ("c", &c)] {
            for cmd in build {
                let mut cmd = cmd.clone();
                cmd[1] = key.as_bytes().to_vec();
                let args: Vec<&[u8]> = cmd.iter().map(|x| x.as_slice()).collect();
                run(&mut e, &args, START);
            }
        }
        for (key, d) in ["a", "b", "c"].iter().zip(&deadlines) {
            if let Some(d) = d {
                e.ks.set_expire(key.as_bytes(), Some(START + d));
            }
        }
        let code = b"#!lua name=lib\nredis.register_function('f', function() return 1 end)".to_vec();
        let file = rdb::RdbFile {
            redis_version: "7.2.0",
            created_unix_secs: START / 1000,
            used_memory: 1,
            functions: std::slice::from_ref(&code),
            functions_only: false,
            goblin_types: false,
            repl_stream_db: Some(3),
            repl_position: Some(("8e738c08193d878d06f34a69733bb095bb5433d5".to_string(), 1615)),
            lineage: Some(("0c6f1e2a9b8d7c6e5f4a3b2c1d0e9f8a7b6c5d4e".to_string(), 77)),
            lineage_in_step: true,
        };
        let mut buf = Vec::new();
        let len = rdb::write_rdb_file(&mut buf, &[(0, &e.ks)], &file).unwrap();
        prop_assert_eq!(len as usize, buf.len());
        let mut back = store::Keyspace::new();
        let loaded = rdb::load_rdb_file(&buf, START, 16, &mut |db, k, v, d| { assert_eq!(db, 0); back.put(k, v, d) }, &mut |_, _| {}, &mut |_| {}).unwrap();
        prop_assert_eq!(&loaded.functions, &vec![code.clone()]);
        prop_assert_eq!(loaded.repl_stream_db, Some(3));
        prop_assert_eq!(
            loaded.repl_position.clone(),
            Some(("8e738c08193d878d06f34a69733bb095bb5433d5".to_string(), 1615))
        );
        prop_assert_eq!(
            loaded.lineage.clone(),
            Some(("0c6f1e2a9b8d7c6e5f4a3b2c1d0e9f8a7b6c5d4e".to_string(), 77))
        );
        prop_assert!(loaded.lineage_in_step);
        let mut want = contents(&e.ks);
        want.retain(|(_, _, d)| d.is_none_or(|d| d > START));
        prop_assert_eq!(contents(&back), want);
        prop_assert_eq!(loaded.expired as usize, contents(&e.ks).len() - loaded.keys as usize);
        // The keys left out are named, for the replicas of a primary that loads the file.
        let mut gone: Vec<Vec<u8>> = contents(&e.ks)
            .into_iter()
            .filter(|(_, _, d)| d.is_some_and(|d| d <= START))
            .map(|(k, _, _)| k)
            .collect();
        gone.sort();
        let mut named: Vec<Vec<u8>> = loaded.expired_keys.iter().map(|(db, k)| { assert_eq!(*db, 0); k.clone() }).collect();
        named.sort();
        prop_assert_eq!(named, gone);
        for cut in cuts {
            let at = (cut * buf.len() as f64) as usize;
            prop_assert!(rdb::load_rdb_file(&buf[..at], START, 16, &mut |_, _, _, _| false, &mut |_, _| {}, &mut |_| {}).is_err(), "cut at {}", at);
        }
    }
}
