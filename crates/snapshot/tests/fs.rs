//! `save_atomic` and `birth_time`.

mod common;

use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

fn scratch_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("gcsn-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn save_atomic_replaces_the_file() {
    let dir = scratch_dir("replace");
    let path = dir.join("dump.gcsn");
    std::fs::write(&path, b"old").unwrap();
    let n = snapshot::save_atomic(&path, |w| {
        w.write_all(b"new contents")?;
        Ok(12)
    })
    .unwrap();
    assert_eq!(n, 12);
    assert_eq!(std::fs::read(&path).unwrap(), b"new contents");
    assert_eq!(entries(&dir), ["dump.gcsn"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failing_writer_leaves_the_old_file_and_no_temp_file() {
    let dir = scratch_dir("fail");
    let path = dir.join("dump.gcsn");
    std::fs::write(&path, b"old snapshot").unwrap();
    // Fails after writing more than the writer's buffer, so bytes did reach the temp file.
    let r: io::Result<()> = snapshot::save_atomic(&path, |w| {
        w.write_all(&vec![7u8; 3 << 20])?;
        Err(io::Error::other("disk on fire"))
    });
    assert_eq!(r.unwrap_err().to_string(), "disk on fire");
    assert_eq!(std::fs::read(&path).unwrap(), b"old snapshot");
    assert_eq!(entries(&dir), ["dump.gcsn"]);

    // A panicking writer cleans up too.
    let p2 = path.clone();
    let caught = std::panic::catch_unwind(move || {
        let _ = snapshot::save_atomic(&p2, |w| -> io::Result<()> {
            w.write_all(b"partial")?;
            panic!("writer bug")
        });
    });
    assert!(caught.is_err());
    assert_eq!(std::fs::read(&path).unwrap(), b"old snapshot");
    assert_eq!(entries(&dir), ["dump.gcsn"]);

    // A target in a missing folder fails before writing anything.
    assert!(snapshot::save_atomic(&dir.join("nope/dump.gcsn"), |_| Ok(())).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_real_snapshot_through_save_atomic() {
    let dir = scratch_dir("snap");
    let path = dir.join("dump.gcsn");
    let mut e = engine::Engine::default();
    common::run(&mut e, &[b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()], 0);
    let s =
        snapshot::save_atomic(&path, |w| snapshot::write(w, &e.ks, &common::meta(), &mut |_| {})).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), s.bytes);
    let f = std::fs::File::open(&path).unwrap();
    let (ks, m, _) = snapshot::read(io::BufReader::new(f), &mut |_| {}).unwrap();
    assert_eq!((ks.len(), m), (1, common::meta()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn birth_time_of_a_fresh_file_is_now() {
    let dir = scratch_dir("btime");
    let path = dir.join("f");
    let before = SystemTime::now() - Duration::from_secs(2);
    std::fs::write(&path, b"x").unwrap();
    let after = SystemTime::now() + Duration::from_secs(2);
    let (t, exact) = snapshot::birth_time(&path).unwrap();
    assert!(t >= before && t <= after, "{t:?} not within [{before:?}, {after:?}] (exact: {exact})");
    // Rewriting the file in place keeps its birth time (when exact) and moves mtime.
    if exact {
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&path, b"yy").unwrap();
        assert_eq!(snapshot::birth_time(&path).unwrap(), (t, true));
    }
    assert!(snapshot::birth_time(&dir.join("missing")).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn temp_files_are_recognised_by_name() {
    use std::ffi::OsStr;
    let t = OsStr::new("dump.gcsn");
    assert!(snapshot::is_temp_file_of(OsStr::new(".dump.gcsn.tmp-12-0"), t));
    assert!(!snapshot::is_temp_file_of(OsStr::new("dump.gcsn"), t));
    assert!(!snapshot::is_temp_file_of(OsStr::new(".dump.gcsn.tmp-"), t));
    assert!(!snapshot::is_temp_file_of(OsStr::new(".other.gcsn.tmp-1-0"), t));
}
