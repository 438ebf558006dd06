//! Header additions: the replica's unconfirmed mutations and the lineage's predecessor ride
//! after the version's own header fields, in both format versions, and a reader skips an
//! addition it does not know.

mod common;

use proptest::prelude::*;
use store::Keyspace;

fn keyspace() -> Keyspace {
    let mut ks = Keyspace::new();
    ks.insert(b"k", store::Value::Str(b"v".to_vec()), None);
    ks
}

fn write(meta: &snapshot::Meta) -> Vec<u8> {
    let mut out = Vec::new();
    snapshot::write(&mut out, &keyspace(), meta, &mut |_| {}).unwrap();
    out
}

/// Increasing offsets (gaps of 1 mostly, as a run of frames gives, and some far larger).
fn entries() -> impl Strategy<Value = Vec<(u64, u64)>> {
    (
        any::<u64>(),
        prop::collection::vec((prop_oneof![4 => Just(1u64), 1 => 1u64..1 << 40], any::<u64>()), 0..300),
    )
        .prop_map(|(first, steps)| {
            let mut at = first >> 20;
            steps
                .into_iter()
                .map(|(gap, hash)| {
                    at += gap;
                    (at, hash)
                })
                .collect()
        })
}

proptest! {
    #[test]
    fn unconfirmed_mutations_round_trip(
        unconfirmed in entries(),
        libraries in any::<bool>(),
        previous in prop::option::of(("[0-9a-f]{40}", any::<u64>())),
    ) {
        let mut meta = common::meta();
        meta.unconfirmed = unconfirmed;
        meta.previous = previous;
        if libraries {
            meta.functions = vec![b"#!lua name=a\nx".to_vec()];
        }
        let file = write(&meta);
        let version = if libraries { 2u32 } else { 1 };
        prop_assert_eq!(&file[8..12], &version.to_le_bytes());
        let (_, read, summary) = snapshot::read(file.as_slice(), &mut |_| {}).unwrap();
        prop_assert_eq!(summary.keys, 1);
        prop_assert_eq!(&read, &meta);
        prop_assert_eq!(snapshot::read_meta(file.as_slice()).unwrap(), meta);
    }
}

#[test]
fn entries_out_of_order_are_not_written() {
    let mut meta = common::meta();
    meta.unconfirmed = vec![(7, 1), (7, 2)];
    let e = snapshot::write(&mut Vec::new(), &keyspace(), &meta, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("out of order"), "{e}");
}

#[test]
fn an_unknown_addition_is_skipped_and_a_damaged_one_refused() {
    let mut meta = common::meta();
    meta.unconfirmed = vec![(5, 0xfeed)];
    let file = write(&meta);
    let blk = snapshot::blocks(file.as_slice()).unwrap()[0];
    // The addition ends the header payload: tag, length 10, count 1, gap 5, 8 hash bytes.
    let end = (blk.offset + 24) as usize + blk.stored_len as usize;
    let tag_at = end - 12;
    assert_eq!(&file[tag_at..tag_at + 4], &[1, 10, 1, 5]);

    // A later writer's addition this reader does not know: skipped, the rest loads.
    let mut unknown = file.clone();
    unknown[tag_at] = 0x7f;
    common::reseal(&mut unknown, &blk);
    let (_, read, _) = snapshot::read(unknown.as_slice(), &mut |_| {}).unwrap();
    assert!(read.unconfirmed.is_empty());
    assert_eq!(read.replid, meta.replid);

    // A count the payload cannot hold, a length past the block, a hash cut short: refused.
    for (at, byte, what) in [
        (tag_at + 2, 2, "do not fit"),
        (tag_at + 1, 11, "overruns the block"),
        // The gap's varint runs on into the hash's bytes, leaving fewer than 8 for it.
        (tag_at + 3, 0x85, "hash overruns"),
    ] {
        let mut bad = file.clone();
        bad[at] = byte;
        common::reseal(&mut bad, &blk);
        let e = snapshot::read(bad.as_slice(), &mut |_| {}).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains(what), "{what}: {e}");
    }
}

#[test]
fn a_predecessor_whose_length_does_not_match_is_refused() {
    let mut meta = common::meta();
    meta.previous = Some(("ab".repeat(20), 42));
    let file = write(&meta);
    let blk = snapshot::blocks(file.as_slice()).unwrap()[0];
    // The addition ends the header payload: tag 2, length 49, id length 40, the id, 8 bytes.
    let end = (blk.offset + 24) as usize + blk.stored_len as usize;
    let tag_at = end - 51;
    assert_eq!(&file[tag_at..tag_at + 3], &[2, 49, 40]);
    let (_, read, _) = snapshot::read(file.as_slice(), &mut |_| {}).unwrap();
    assert_eq!(read.previous, Some(("ab".repeat(20), 42)));
    // An id one byte shorter leaves a byte over in the addition.
    let mut bad = file.clone();
    bad[tag_at + 2] = 39;
    common::reseal(&mut bad, &blk);
    let e = snapshot::read(bad.as_slice(), &mut |_| {}).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("does not match its fields"), "{e}");
}
