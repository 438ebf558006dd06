//! Stream records (code 8): round trips of entries, metadata and consumer groups (built through
//! the store's API, as XGROUP would), empty streams, the trailer's stream count, the byte layout
//! of `docs/FORMAT.md`, and crafted values that the reader must refuse without panicking.

mod common;

use common::{dump, meta, sealed_block};
use proptest::prelude::*;
use snapshot::{BlockInfo, Compression, LoadError, Options};
use store::types::stream::{ConsumerGroup, Field};
use store::{Keyspace, Stream, StreamId, Value, ValueRef};

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

/// (key, group, consumer, seen time, active time).
type Times = Vec<(Vec<u8>, Vec<u8>, Vec<u8>, i64, i64)>;

/// Seen and active times of every consumer, which `Plain` leaves out.
fn times(ks: &Keyspace) -> Times {
    let mut out = Vec::new();
    ks.for_each(|k, v, _| {
        if let ValueRef::Stream(s) = v {
            for (g, grp) in s.groups().into_iter().flatten() {
                for c in grp.consumers().values() {
                    out.push((k.to_vec(), g.clone(), c.name().to_vec(), c.seen_time, c.active_time));
                }
            }
        }
    });
    out.sort();
    out
}

fn round_trip(ks: &Keyspace, opts: &Options) -> Keyspace {
    let mut file = Vec::new();
    let w = snapshot::write_with(&mut file, ks, &meta(), opts, &mut |_| {}).unwrap();
    let (ks2, _, r) = snapshot::read(&file[..], &mut |_| {}).unwrap();
    assert_eq!(r, w);
    assert_eq!(dump(&ks2), dump(ks));
    assert_eq!(times(&ks2), times(ks));
    ks2
}

fn sample_stream() -> Stream {
    let mut s = Stream::new();
    for i in 0..300u64 {
        let v = format!("v{i}");
        if i % 7 == 0 {
            s.append(id(1000 + i / 3, i % 3), &[(b"other", v.as_bytes())]);
        } else {
            s.append(id(1000 + i / 3, i % 3), &[(b"a", v.as_bytes()), (b"b", b"")]);
        }
    }
    for i in (0..300u64).step_by(5) {
        s.delete(id(1000 + i / 3, i % 3));
    }
    s.set_max_deleted_id(id(1095, 0));
    s.set_last_id(id(5000, 7));
    assert!(s.create_group(b"g1", id(1050, 1), 151));
    assert!(s.create_group(b"", StreamId::MIN, 0));
    assert!(s.create_group(b"unknown-read", id(1001, 0), -1));
    let g = s.group_mut(b"g1").unwrap();
    g.create_consumer(b"idle", 1_700_000_000_000);
    g.set_pending(id(1000, 1), b"alice", 1_700_000_000_001, 3);
    g.set_pending(id(1000, 2), b"bob", 1_700_000_000_002, 1);
    g.set_pending(id(4000, 0), b"alice", -5, u64::MAX); // an ID the stream never held
    g.consumer_mut(b"alice").unwrap().seen_time = 1_700_000_000_999;
    g.consumer_mut(b"alice").unwrap().active_time = 1_700_000_000_500;
    s
}

#[test]
fn streams_with_groups_round_trip() {
    let mut ks = Keyspace::new();
    ks.insert(b"s", Value::Stream(Box::new(sample_stream())), Some(1_800_000_000_000));
    // Empty streams are keys too: with groups, and without anything but metadata.
    let mut e = Stream::new();
    e.set_last_id(id(7, 7));
    e.set_entries_added(3);
    e.create_group(b"g", id(7, 7), 3);
    e.group_mut(b"g").unwrap().create_consumer(b"c", 42);
    ks.insert(b"empty-with-group", Value::Stream(Box::new(e)), None);
    ks.insert(b"empty", Value::Stream(Box::new(Stream::new())), None);
    ks.insert(b"str", Value::Str(b"x".to_vec()), None);
    for opts in [
        Options::default(),
        Options { block_size: 7, compression: Compression::None },
        Options { block_size: 100, compression: Compression::Lz4 },
    ] {
        let ks2 = round_trip(&ks, &opts);
        assert_eq!(ks2.len(), 4);
        let ValueRef::Stream(s) = ks2.get(b"empty").unwrap() else { panic!("not a stream") };
        assert!(s.is_empty());
    }
    let mut file = Vec::new();
    let w = snapshot::write(&mut file, &ks, &meta(), &mut |_| {}).unwrap();
    assert_eq!((w.types.streams, w.types.strings, w.keys), (3, 1, 4));
    // The trailer ends with the stream count.
    let blocks = snapshot::blocks(&file[..]).unwrap();
    let t = blocks.last().unwrap();
    let tp = &file[t.offset as usize + 24..][..t.stored_len as usize];
    assert_eq!(&tp[..8], &[4, 1, 1, 0, 0, 0, 0, 0]);
    assert_eq!(*tp.last().unwrap(), 3);
}

/// A stream's IDMP state (settings, iids per producer, lifetime counts) comes back whole, and
/// damaged sections are refused.
#[test]
fn idmp_state_round_trips() {
    let mut s = sample_stream();
    let (state, created) = s.idmp_or_init(30, 2);
    assert!(created);
    state.record(b"p1", b"a", id(1000, 1)).unwrap();
    state.record(b"p1", b"b", id(1002, 0)).unwrap();
    state.record(b"p1", b"c", id(1050, 2)).unwrap(); // evicts "a"
    state.record(b"", b"\x00\xff", id(1001, 2)).unwrap();
    state.duplicates = 9;
    let mut ks = Keyspace::new();
    ks.insert(b"s", Value::Stream(Box::new(s)), None);
    for opts in [Options::default(), Options { block_size: 7, compression: Compression::Lz4 }] {
        let ks2 = round_trip(&ks, &opts);
        let ValueRef::Stream(s2) = ks2.get(b"s").unwrap() else { panic!("not a stream") };
        let st = s2.idmp().expect("IDMP state kept");
        assert_eq!((st.duration(), st.maxsize(), st.pids_tracked(), st.iids_tracked()), (30, 2, 2, 3));
        assert_eq!((st.added, st.duplicates), (4, 9));
        assert_eq!(st.lookup(b"p1", b"c", 1050), Some(id(1050, 2)));
        assert_eq!(st.lookup(b"p1", b"a", 1050), None);
    }
}

/// The value bytes of `docs/FORMAT.md`'s stream example.
#[test]
fn stream_encoding_matches_the_doc() {
    let mut s = Stream::new();
    s.append(id(5, 0), &[(b"f", b"v")]);
    s.append(id(5, 1), &[(b"f", b"w")]);
    s.append(id(9, 0), &[(b"f", b"x")]);
    s.delete(id(9, 0));
    s.set_max_deleted_id(id(9, 0));
    s.create_group(b"g", id(5, 1), 2);
    let g = s.group_mut(b"g").unwrap();
    g.create_consumer(b"c", 100);
    g.set_pending(id(5, 1), b"c", 90, 2);
    let mut ks = Keyspace::new();
    ks.insert(b"k", Value::Stream(Box::new(s)), None);
    let mut file = Vec::new();
    snapshot::write(&mut file, &ks, &meta(), &mut |_| {}).unwrap();
    let d = snapshot::blocks(&file[..]).unwrap()[1];
    let payload = &file[d.offset as usize + 24..][..d.stored_len as usize];
    let hex: Vec<String> = payload.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        hex.join(" "),
        "08 01 6b 27 02 05 00 01 01 66 01 76 00 00 01 01 66 01 77 09 00 09 00 03 01 01 67 05 01 \
         04 01 01 63 c8 01 01 01 05 01 00 b4 01 02"
    );
}

/// A file whose only key `k` is a stream record with the given value bytes (checksums valid,
/// counts right), so that only the stream decoder can object.
fn file_with_stream_value(value: &[u8]) -> Vec<u8> {
    let ks = Keyspace::new();
    let mut file = Vec::new();
    snapshot::write(&mut file, &ks, &meta(), &mut |_| {}).unwrap();
    let blocks: Vec<BlockInfo> = snapshot::blocks(&file[..]).unwrap();
    file.truncate(blocks[1].offset as usize); // keep prelude + header
    let mut data = vec![8u8, 1, b'k'];
    let mut n = value.len() as u64;
    while n >= 0x80 {
        data.push(n as u8 | 0x80);
        n >>= 7;
    }
    data.push(n as u8);
    data.extend_from_slice(value);
    file.extend(sealed_block(b'D', 1, &data));
    let mut t = vec![1u8, 0, 0, 0, 0, 0, 0, 0];
    t.push(1); // data blocks
    let mut n = data.len() as u64;
    while n >= 0x80 {
        t.push(n as u8 | 0x80);
        n >>= 7;
    }
    t.push(n as u8);
    t.push(1); // streams
    file.extend(sealed_block(b'T', 2, &t));
    file
}

fn load(file: &[u8]) -> Result<Keyspace, LoadError> {
    snapshot::read(file, &mut |_| {}).map(|(ks, _, _)| ks)
}

fn malformed(value: &[u8]) -> String {
    match load(&file_with_stream_value(value)) {
        Err(LoadError::Malformed { what, .. }) => what,
        Err(e) => panic!("not malformed: {e}"),
        Ok(_) => panic!("loaded {value:02x?}"),
    }
}

#[test]
fn crafted_stream_values_are_refused() {
    // The doc's minimal valid value: no entries, IDs 0-0, nothing added, no groups.
    let ok = [0u8, 0, 0, 0, 0, 0, 0];
    assert!(load(&file_with_stream_value(&ok)).is_ok());
    // One entry 1-0 {f: v}, last ID 1-0.
    let one = [1u8, 1, 0, 1, 1, b'f', 1, b'v', 1, 0, 0, 0, 1, 0];
    assert!(load(&file_with_stream_value(&one)).is_ok());
    // The entry above the last ID.
    assert!(malformed(&[1, 1, 0, 1, 1, b'f', 1, b'v', 0, 9, 0, 0, 1, 0]).contains("above the last ID"));
    // An entry without fields.
    assert!(malformed(&[1, 1, 0, 0, 1, 0, 0, 0, 1, 0]).contains("without fields"));
    // Counts that overrun: entries, fields, a field's length.
    assert!(malformed(&[200, 1, 0, 1, 1, b'f', 1, b'v', 1, 0, 0, 0, 1, 0]).contains("overruns"));
    assert!(malformed(&[1, 1, 0, 90, 1, b'f', 1, b'v', 1, 0, 0, 0, 1, 0]).contains("overruns"));
    assert!(malformed(&[1, 1, 0, 1, 70, b'f', 1, b'v', 1, 0, 0, 0, 1, 0]).contains("overruns"));
    // Entries added below the length.
    assert!(malformed(&[1, 1, 0, 1, 1, b'f', 1, b'v', 1, 0, 0, 0, 0, 0]).contains("fewer entries added"));
    // A second ID whose sequence overflows.
    let mut v = vec![2u8, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 1, 1, b'f', 1, b'v'];
    v.extend([0, 0, 1, 1, b'f', 1, b'v', 2, 0, 0, 0, 2, 0]);
    assert!(malformed(&v).contains("out of range"));
    // A group whose PEL names consumer 1 of 1.
    let grp = |pel_owner: u8| {
        let mut v = vec![0u8, 0, 0, 0, 0, 0, 1];
        v.extend([1, b'g', 0, 0, 0]); // name, last ID 0-0, entries read 0
        v.extend([1, 1, b'c', 0, 1]); // one consumer "c", seen 0, active -1
        v.extend([1, 5, 0, pel_owner, 0, 1]); // PEL: 5-0 owned by `pel_owner`, time 0, count 1
        v
    };
    assert!(load(&file_with_stream_value(&grp(0))).is_ok());
    assert!(malformed(&grp(1)).contains("missing consumer"));
    // Groups repeated or out of order; consumers likewise.
    let two = |a: u8, b: u8| vec![0u8, 0, 0, 0, 0, 0, 2, 1, a, 0, 0, 0, 0, 0, 1, b, 0, 0, 0, 0, 0];
    assert!(load(&file_with_stream_value(&two(b'a', b'b'))).is_ok());
    assert!(malformed(&two(b'a', b'a')).contains("out of order"));
    assert!(malformed(&two(b'b', b'a')).contains("out of order"));
    let cons = vec![0u8, 0, 0, 0, 0, 0, 1, 1, b'g', 0, 0, 0, 2, 1, b'c', 0, 1, 1, b'c', 0, 1, 0];
    assert!(malformed(&cons).contains("out of order"));
    // Entries read below -1 (zigzag 3 = -2).
    assert!(malformed(&[0u8, 0, 0, 0, 0, 0, 1, 1, b'g', 0, 0, 3, 0, 0]).contains("negative"));
    // Bytes after the groups are the IDMP section: settings 30 s and 2, 1 added, 0 duplicates,
    // producer "p" with iid "a" of entry 5-0.
    let idmp = |d: u8, n: u8, tail: &[u8]| {
        let mut v = vec![0u8, 0, 0, 0, 0, 0, 0, d, 2, 1, 0, 1, 1, b'p', n];
        v.extend([1, b'a', 5, 0]);
        v.extend(tail);
        v
    };
    assert!(load(&file_with_stream_value(&idmp(30, 1, &[]))).is_ok());
    assert!(malformed(&idmp(0, 1, &[])).contains("out of range"));
    assert!(malformed(&idmp(30, 0, &[])).contains("empty"));
    assert!(malformed(&idmp(30, 1, &[0])).contains("unexpected bytes"));
    assert!(malformed(&[0u8, 0, 0, 0, 0, 0, 0, 0]).contains("IDMP"));
}

/// A stream built from a recipe: entries (ms step, seq, fields), deletions, and groups with
/// consumers and pending entries.
#[allow(clippy::type_complexity)]
fn build(
    entries: &[(u8, u8, Vec<(Vec<u8>, Vec<u8>)>)],
    dels: &[usize],
    groups: &[(Vec<u8>, u8, i8, Vec<(Vec<u8>, i64)>, Vec<(u8, usize, i64, u64)>)],
) -> Stream {
    let mut s = Stream::new();
    let mut ids = Vec::new();
    let mut last = StreamId::MIN;
    for (dms, seq, fields) in entries {
        let nid = if *dms == 0 {
            id(last.ms, last.seq + 1 + *seq as u64)
        } else {
            id(last.ms + *dms as u64, *seq as u64)
        };
        let refs: Vec<Field<'_>> = fields.iter().map(|(f, v)| (&f[..], &v[..])).collect();
        s.append_capped(nid, &refs, 3, 64);
        ids.push(nid);
        last = nid;
    }
    for d in dels {
        if !ids.is_empty() {
            let victim = ids[d % ids.len()];
            if s.delete(victim) {
                s.set_max_deleted_id(s.max_deleted_id().max(victim));
            }
        }
    }
    for (name, lid, er, consumers, pel) in groups {
        let mut g = ConsumerGroup::new(id(*lid as u64, 0), *er as i64);
        for (c, seen) in consumers {
            g.create_consumer(c, *seen);
        }
        for (ms, owner, t, n) in pel {
            if let Some((c, _)) = consumers.get(owner % consumers.len().max(1)) {
                g.set_pending(id(*ms as u64, 0), c, *t, *n);
            }
        }
        s.insert_group(name, g);
    }
    s
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![Just(b"f".to_vec()), Just(Vec::new()), proptest::collection::vec(any::<u8>(), 0..12)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    /// Random streams (entries of same and differing fields across small blocks, deletions,
    /// groups with consumers and PELs) survive write -> read unchanged, times included.
    #[test]
    fn random_streams_round_trip(
        entries in proptest::collection::vec(
            (0u8..3, 0u8..3, proptest::collection::vec((bytes(), bytes()), 1..4)),
            0..40,
        ),
        dels in proptest::collection::vec(any::<usize>(), 0..20),
        groups in proptest::collection::vec(
            (bytes(), any::<u8>(), -1i8..100,
             proptest::collection::vec((bytes(), any::<i64>()), 0..4),
             proptest::collection::vec((any::<u8>(), any::<usize>(), any::<i64>(), any::<u64>()), 0..6)),
            0..3),
        block_size in prop_oneof![Just(5usize), Just(64), Just(snapshot::DEFAULT_BLOCK_SIZE)],
    ) {
        let s = build(&entries, &dels, &groups);
        let mut ks = Keyspace::new();
        ks.insert(b"s", Value::Stream(Box::new(s)), None);
        ks.insert(b"t", Value::Str(b"after".to_vec()), None);
        round_trip(&ks, &Options { block_size, compression: Compression::None });
    }

    /// Any edit of a valid stream value (checksums recomputed, so the decoder sees it) loads
    /// or is refused as malformed: never a panic.
    #[test]
    fn damaged_stream_values_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        use std::sync::OnceLock;
        static VALUE: OnceLock<Vec<u8>> = OnceLock::new();
        let value = VALUE.get_or_init(|| {
            let mut ks = Keyspace::new();
            ks.insert(b"k", Value::Stream(Box::new(sample_stream())), None);
            let mut file = Vec::new();
            snapshot::write(&mut file, &ks, &meta(), &mut |_| {}).unwrap();
            let d = snapshot::blocks(&file[..]).unwrap()[1];
            let payload = &file[d.offset as usize + 24..][..d.stored_len as usize];
            // Tag, key "k", then the value's length varint and the value.
            let mut at = 3;
            while payload[at] & 0x80 != 0 { at += 1; }
            payload[at + 1..].to_vec()
        });
        prop_assert!(load(&file_with_stream_value(value)).is_ok());
        let mut bad = value.clone();
        for (i, v) in &edits {
            let at = i.index(bad.len());
            bad[at] = *v;
        }
        if let Some(c) = cut {
            bad.truncate(c.index(bad.len() + 1));
        }
        match load(&file_with_stream_value(&bad)) {
            Ok(_) | Err(LoadError::Malformed { .. }) => {}
            Err(e) => prop_assert!(false, "unexpected error {}", e),
        }
    }
}
