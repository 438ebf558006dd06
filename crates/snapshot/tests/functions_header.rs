//! Format version 2: function libraries in the header block. A snapshot without libraries is
//! still written as version 1; one with libraries is version 2 and reads back whole.

mod common;

use store::Keyspace;

#[test]
fn libraries_round_trip_in_version_2_and_version_1_stays_without() {
    let mut ks = Keyspace::new();
    ks.insert(b"k", store::Value::Str(b"v".to_vec()), None);
    let mut meta = common::meta();
    let mut v1 = Vec::new();
    snapshot::write(&mut v1, &ks, &meta, &mut |_| {}).unwrap();
    assert_eq!(&v1[8..12], &1u32.to_le_bytes(), "no libraries: version 1");

    meta.functions = vec![b"#!lua name=a\nx".to_vec(), vec![b'y'; 70_000]];
    let mut v2 = Vec::new();
    snapshot::write(&mut v2, &ks, &meta, &mut |_| {}).unwrap();
    assert_eq!(&v2[8..12], &2u32.to_le_bytes(), "libraries: version 2");
    let (loaded, read_meta, summary) = snapshot::read(v2.as_slice(), &mut |_| {}).unwrap();
    assert_eq!(read_meta, meta);
    assert_eq!(summary.keys, 1);
    assert_eq!(common::dump(&loaded), common::dump(&ks));
    let (_, m1, _) = snapshot::read(v1.as_slice(), &mut |_| {}).unwrap();
    assert!(m1.functions.is_empty());

    // Cut inside the header block's library bytes: refused, not loaded without them.
    let cut = v2.len().min(12 + 24 + 200);
    assert!(snapshot::read(&v2[..cut], &mut |_| {}).is_err());
}
