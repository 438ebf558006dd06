//! Damaged and crafted snapshots: each defect yields the precise `LoadError` (variant, block,
//! offset), and no input makes the reader panic.

mod common;

use common::{meta, reseal, run};
use engine::Engine;
use proptest::prelude::*;
use snapshot::{BlockInfo, Compression, LoadError, Options};

const NOW: i64 = 1_700_000_000_000;

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// A snapshot of every type, in blocks of 2 KiB: a header block, many data blocks, a trailer.
fn sample(compression: Compression) -> (Vec<u8>, Vec<BlockInfo>) {
    let mut e = Engine::default();
    for i in 0..200 {
        run(&mut e, &[b("SET"), format!("s{i}").into_bytes(), format!("value-{i}").into_bytes()], NOW);
        run(&mut e, &[b("SET"), format!("n{i}").into_bytes(), (i * 1000).to_string().into_bytes()], NOW);
    }
    for i in 0..10 {
        let k = format!("h{i}").into_bytes();
        for j in 0..(i * 80) + 1 {
            run(
                &mut e,
                &[b("HSET"), k.clone(), format!("f{j}").into_bytes(), format!("v{j}").into_bytes()],
                NOW,
            );
            run(&mut e, &[b("SADD"), format!("S{i}").into_bytes(), j.to_string().into_bytes()], NOW);
            run(
                &mut e,
                &[
                    b("ZADD"),
                    format!("z{i}").into_bytes(),
                    j.to_string().into_bytes(),
                    format!("m{j}").into_bytes(),
                ],
                NOW,
            );
            run(&mut e, &[b("RPUSH"), format!("l{i}").into_bytes(), format!("e{j}").into_bytes()], NOW);
            run(
                &mut e,
                &[
                    b("ARSET"),
                    format!("a{i}").into_bytes(),
                    (j * 3).to_string().into_bytes(),
                    format!("x{j}").into_bytes(),
                ],
                NOW,
            );
        }
        run(&mut e, &[b("PEXPIREAT"), k, (NOW + 60_000).to_string().into_bytes()], NOW);
    }
    let opts = Options { block_size: 2048, compression };
    let mut file = Vec::new();
    snapshot::write_with(&mut file, &e.ks, &meta(), &opts, &mut |_| {}).unwrap();
    let blocks = snapshot::blocks(&file[..]).unwrap();
    assert!(blocks.len() > 10, "{} blocks", blocks.len());
    (file, blocks)
}

fn load(file: &[u8]) -> Result<(), LoadError> {
    snapshot::read(file, &mut |_| {}).map(|_| ())
}

#[test]
fn intact_sample_loads() {
    for c in [Compression::None, Compression::Lz4] {
        let (file, blocks) = sample(c);
        load(&file).unwrap();
        assert_eq!(blocks[0].kind, b'H');
        assert_eq!(blocks.last().unwrap().kind, b'T');
        assert!(blocks[1..blocks.len() - 1].iter().all(|b| b.kind == b'D'));
        if c == Compression::Lz4 {
            assert!(blocks.iter().any(|b| b.lz4));
        }
    }
}

#[test]
fn truncation_at_every_block_boundary_and_inside_blocks() {
    let (file, blocks) = sample(Compression::None);
    for (i, blk) in blocks.iter().enumerate() {
        let o = blk.offset as usize;
        let expect = |at: usize| (i as u64, o as u64, at as u64);
        for cut in [
            o,
            o + 1,
            o + 23,
            o + 24,
            o + 24 + blk.stored_len as usize / 2,
            o + 24 + blk.stored_len as usize - 1,
        ] {
            match load(&file[..cut]) {
                Err(LoadError::Truncated { block, offset, at }) => {
                    assert_eq!((block, offset, at), expect(cut))
                }
                other => panic!("cut at {cut} in block {i}: {other:?}"),
            }
        }
    }
    // Inside the prelude, and an empty file.
    for cut in [0, 5, 8, 11] {
        match load(&file[..cut]) {
            Err(LoadError::Truncated { block: 0, offset: 0, at }) => assert_eq!(at, cut as u64),
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
    let e = load(&file[..blocks[3].offset as usize]).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("block 3 at byte {0}: truncated, the file ends at byte {0}", blocks[3].offset)
    );
}

#[test]
fn a_flipped_byte_is_located_in_every_block_kind() {
    for c in [Compression::None, Compression::Lz4] {
        let (file, blocks) = sample(c);
        for (i, blk) in blocks.iter().enumerate() {
            let o = blk.offset as usize;
            // In the payload (first, middle and last byte), then in each header field.
            let len = blk.stored_len as usize;
            for (at, part) in [
                (o + 24, "payload"),
                (o + 24 + len / 2, "payload"),
                (o + 24 + len - 1, "payload"),
                (o, "header"),
                (o + 1, "header"),
                (o + 5, "header"),
                (o + 9, "header"),
                (o + 13, "header"),
                (o + 17, "header"),
                (o + 22, "header"),
            ] {
                let mut bad = file.clone();
                bad[at] ^= 0x40;
                match load(&bad) {
                    Err(LoadError::ChecksumMismatch { block, offset, part: p }) => {
                        assert_eq!((block, offset, p), (i as u64, o as u64, part), "byte {at}")
                    }
                    other => panic!("flip at {at} in block {i}: {other:?}"),
                }
            }
        }
        let mut bad = file.clone();
        let d = &blocks[4];
        bad[d.offset as usize + 30] ^= 1;
        assert_eq!(
            load(&bad).unwrap_err().to_string(),
            format!("block 4 at byte {}: checksum mismatch (payload)", d.offset)
        );
    }
}

#[test]
fn prelude_errors() {
    let (file, _) = sample(Compression::None);
    let mut bad = file.clone();
    bad[0] = b'R';
    assert!(matches!(load(&bad), Err(LoadError::BadMagic { .. })));
    assert!(matches!(snapshot::read_meta(&bad[..]), Err(LoadError::BadMagic { .. })));
    assert!(matches!(load(b"REDIS0011"), Err(LoadError::BadMagic { .. })));
    let mut newer = file.clone();
    newer[8..12].copy_from_slice(&4u32.to_le_bytes());
    match load(&newer) {
        Err(LoadError::NewerVersion { found: 4, supported: 3 }) => {}
        other => panic!("{other:?}"),
    }
    let mut zero = file.clone();
    zero[8..12].copy_from_slice(&0u32.to_le_bytes());
    assert!(matches!(load(&zero), Err(LoadError::BadVersion { found: 0 })));
}

#[test]
fn trailing_garbage_is_refused() {
    let (file, blocks) = sample(Compression::None);
    for extra in [&b"\0"[..], b"garbage", &file[..100]] {
        let mut bad = file.clone();
        bad.extend_from_slice(extra);
        match load(&bad) {
            Err(LoadError::TrailingGarbage { offset }) => assert_eq!(offset, file.len() as u64),
            other => panic!("{other:?}"),
        }
        assert!(matches!(snapshot::blocks(&bad[..]), Err(LoadError::TrailingGarbage { .. })));
    }
    assert_eq!(
        blocks.last().unwrap().offset as usize + 24 + blocks.last().unwrap().stored_len as usize,
        file.len()
    );
}

#[test]
fn missing_or_repeated_blocks_are_located() {
    let (file, blocks) = sample(Compression::None);
    let (d3, d4) = (&blocks[3], &blocks[4]);
    // Block 3 dropped: block 4 sits where block 3 belongs.
    let mut bad = file[..d3.offset as usize].to_vec();
    bad.extend_from_slice(&file[d4.offset as usize..]);
    match load(&bad) {
        Err(LoadError::Malformed { block: 3, offset, what, .. }) => {
            assert_eq!(offset, d3.offset);
            assert!(what.contains("block numbered 4"), "{what}");
        }
        other => panic!("{other:?}"),
    }
    // Block 3 twice.
    let mut bad = file[..d4.offset as usize].to_vec();
    bad.extend_from_slice(&file[d3.offset as usize..]);
    assert!(matches!(load(&bad), Err(LoadError::Malformed { block: 4, .. })));
}

#[test]
fn crafted_blocks_with_valid_checksums_are_refused() {
    let (file, blocks) = sample(Compression::None);
    let d1 = blocks[1];
    let trailer = *blocks.last().unwrap();
    // An unknown record tag at the start of the first data block.
    let mut bad = file.clone();
    bad[d1.offset as usize + 24] = 0xEE;
    reseal(&mut bad, &d1);
    match load(&bad) {
        Err(LoadError::Malformed { block: 1, offset, pos: 1, what }) => {
            assert_eq!(offset, d1.offset);
            assert!(what.contains("record tag"), "{what}");
        }
        other => panic!("{other:?}"),
    }
    // A trailer that counts one key more.
    let mut bad = file.clone();
    let t = trailer.offset as usize + 24;
    bad[t] = bad[t].wrapping_add(1);
    reseal(&mut bad, &trailer);
    match load(&bad) {
        Err(LoadError::CountMismatch { what: "keys", trailer: tk, found }) => assert_eq!(tk, found + 1),
        other => panic!("{other:?}"),
    }
    // A header block whose replication id length overruns it.
    let h = blocks[0];
    let mut bad = file.clone();
    let p = h.offset as usize + 24;
    let vlen = bad[p] as usize;
    bad[p + 1 + vlen + 8] = 0x7F;
    reseal(&mut bad, &h);
    assert!(matches!(load(&bad), Err(LoadError::Malformed { block: 0, .. })));
    assert!(matches!(snapshot::read_meta(&bad[..]), Err(LoadError::Malformed { block: 0, .. })));
    // Unknown flags and oversized lengths in a header with a valid checksum.
    for (at, v) in [(1usize, 0x80u8), (15, 0x7F)] {
        let mut bad = file.clone();
        bad[d1.offset as usize + at] = v;
        reseal(&mut bad, &d1);
        assert!(matches!(load(&bad), Err(LoadError::Malformed { block: 1, .. })), "field {at}");
    }
}

#[test]
fn garbage_lz4_payload_is_malformed_not_a_panic() {
    let (file, blocks) = sample(Compression::Lz4);
    let d = blocks.iter().find(|b| b.lz4).copied().unwrap();
    let mut bad = file.clone();
    for x in &mut bad[d.offset as usize + 24..d.offset as usize + 24 + d.stored_len as usize] {
        *x = 0xF0;
    }
    reseal(&mut bad, &d);
    match load(&bad) {
        Err(LoadError::Malformed { block, what, .. }) => {
            assert_eq!(block, d.index);
            assert!(what.contains("LZ4"), "{what}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn meta_reads_without_the_data() {
    let (file, blocks) = sample(Compression::None);
    // Only the prelude and the header block are needed.
    let end = blocks[1].offset as usize;
    assert_eq!(snapshot::read_meta(&file[..end]).unwrap(), meta());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    /// Any edit of a valid file, resealed or not (so that the records themselves are
    /// attacked), loads or fails cleanly: never a panic, and never a partial success.
    #[test]
    fn random_damage_never_panics(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in proptest::option::of(any::<prop::sample::Index>()),
        reseal_all in any::<bool>(),
        lz4 in any::<bool>(),
    ) {
        use std::sync::OnceLock;
        static PLAIN: OnceLock<(Vec<u8>, Vec<BlockInfo>)> = OnceLock::new();
        static LZ4: OnceLock<(Vec<u8>, Vec<BlockInfo>)> = OnceLock::new();
        let (file, blocks) = if lz4 {
            LZ4.get_or_init(|| sample(Compression::Lz4))
        } else {
            PLAIN.get_or_init(|| sample(Compression::None))
        };
        let mut bad = file.clone();
        for (i, v) in &edits {
            // Edit payload bytes only when resealing, so that the edit reaches the decoder.
            let at = i.index(bad.len());
            bad[at] = *v;
        }
        if reseal_all {
            for blk in blocks {
                reseal(&mut bad, blk);
            }
        }
        if let Some(c) = cut {
            bad.truncate(c.index(bad.len() + 1));
        }
        let _ = load(&bad);
        let _ = snapshot::blocks(&bad[..]);
        let _ = snapshot::read_meta(&bad[..]);
    }
}
