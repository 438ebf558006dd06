//! The format pinned byte for byte: the worked example of `docs/FORMAT.md`. In a test binary of
//! its own, so that it can fix the process's table hash secrets before anything hashes.

use store::Keyspace;

/// The format pinned byte for byte on a one-key snapshot (the worked example of
/// `docs/FORMAT.md`): any change to the encoding shows up here.
#[test]
fn one_key_snapshot_bytes() {
    // Fixed table secrets (this file's only test, so nothing hashed before it), recorded in
    // the header as every writer does.
    assert!(store::keyspace::hash::KeyHasher::adopt_global([1, 3, 5]));
    let mut ks = Keyspace::new();
    ks.insert(b"k", store::Value::Str(b"v".to_vec()), Some(1_700_000_000_000));
    let m = snapshot::Meta {
        server_version: "gc 1".into(),
        created_unix_ms: 1_700_000_000_000,
        replid: "ab".into(),
        logical_offset: 7,
        kafka_acked_offset: -1,
        kafka_consumer_position: 5,
        functions: Vec::new(),
        unconfirmed: Vec::new(),
        previous: None,
    };
    let mut file = Vec::new();
    snapshot::write(&mut file, &ks, &m, &mut |_| {}).unwrap();
    let hex: Vec<String> =
        file.chunks(16).map(|c| c.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")).collect();
    if std::env::var("SNAP_HEX").is_ok() {
        println!("{}", hex.join("\n"));
    }
    let want = [
        "89 47 43 53 4e 0d 0a 1a 01 00 00 00 48 00 00 00",
        "00 00 00 00 48 00 00 00 48 00 00 00 e4 b2 38 56",
        "7f ec 7a f6 04 67 63 20 31 00 68 e5 cf 8b 01 00",
        "00 02 61 62 07 00 00 00 00 00 00 00 ff ff ff ff",
        "ff ff ff ff 05 00 00 00 00 00 00 00 01 00 00 00",
        "00 00 00 00 01 00 00 00 00 00 00 00 03 00 00 00",
        "00 00 00 00 05 00 00 00 00 00 00 00 44 00 00 00",
        "01 00 00 00 0d 00 00 00 0d 00 00 00 14 13 15 ca",
        "39 e3 83 ec 10 00 68 e5 cf 8b 01 00 00 01 6b 01",
        "76 54 00 00 00 02 00 00 00 0a 00 00 00 0a 00 00",
        "00 05 f4 03 39 cd 05 9f b2 01 01 01 00 00 00 00",
        "00 01 0d",
    ];
    assert_eq!(hex, want);
    assert_eq!(snapshot::read(&file[..], &mut |_| {}).unwrap().1, m);
}
