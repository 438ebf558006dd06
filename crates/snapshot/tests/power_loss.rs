//! `save_atomic` against a power loss at each of its steps.
//!
//! A SIGKILL cannot show a missing fsync (the page cache survives it), and this machine has
//! no device-mapper to drop a disk's unsynced writes, so the save's own sequence runs on a
//! simulated file system ([`SimFs`]) that keeps apart what was synced and what was not, and
//! at a power loss keeps only some of the latter: of the folder's operations since its last
//! sync, a prefix (metadata journals keep their order); of each file's data since its last
//! sync, a prefix of any length (a file renamed before its data reached the disk can come
//! back empty or cut short). Every such outcome of a power loss at every step must leave at
//! the snapshot's path the old file or the complete new one, and the new one whenever the
//! save had returned Ok.
//!
//! Two broken sequences, a save without the file's fsync and one without the folder's, run
//! through the same checker and must be caught: the model is strict enough to see what the
//! two syncs are for.

use proptest::prelude::*;
use snapshot::{save_atomic_on, SaveFs};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

type Ino = usize;

#[derive(Clone)]
struct FileData {
    /// What the disk holds for sure (as of the file's last sync).
    synced: Vec<u8>,
    /// What the running system sees (synced, then the writes after).
    current: Vec<u8>,
}

#[derive(Clone, Debug)]
enum DirOp {
    Link(PathBuf, Ino),
    Rename(PathBuf, PathBuf),
    Remove(PathBuf),
}

#[derive(Clone)]
struct Sim {
    files: Vec<FileData>,
    /// The folder as the running system sees it, and as of its last sync.
    entries: BTreeMap<PathBuf, Ino>,
    synced_entries: BTreeMap<PathBuf, Ino>,
    /// Folder operations since its last sync, in order.
    pending: Vec<DirOp>,
    /// Operations left before the power goes.
    ops_left: usize,
    lost: bool,
    /// The broken sequences: syncs that do nothing.
    skip_file_sync: bool,
    skip_dir_sync: bool,
}

impl Sim {
    fn new() -> Sim {
        Sim {
            files: Vec::new(),
            entries: BTreeMap::new(),
            synced_entries: BTreeMap::new(),
            pending: Vec::new(),
            ops_left: usize::MAX,
            lost: false,
            skip_file_sync: false,
            skip_dir_sync: false,
        }
    }

    /// One operation: it happens unless the power went before it.
    fn step(&mut self) -> io::Result<()> {
        if self.lost || self.ops_left == 0 {
            self.lost = true;
            return Err(io::Error::other("power lost"));
        }
        self.ops_left -= 1;
        Ok(())
    }

    fn apply(entries: &mut BTreeMap<PathBuf, Ino>, op: &DirOp) {
        match op {
            DirOp::Link(p, ino) => {
                entries.insert(p.clone(), *ino);
            }
            DirOp::Rename(from, to) => {
                if let Some(ino) = entries.remove(from) {
                    entries.insert(to.clone(), ino);
                }
            }
            DirOp::Remove(p) => {
                entries.remove(p);
            }
        }
    }

    /// What a reboot finds: the synced folder plus the first `keep_ops` pending operations;
    /// each file its synced data plus `extra(ino, unsynced)` bytes of what followed.
    fn after_power_loss(
        &self,
        keep_ops: usize,
        extra: impl Fn(Ino, usize) -> usize,
    ) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut entries = self.synced_entries.clone();
        for op in &self.pending[..keep_ops] {
            Self::apply(&mut entries, op);
        }
        entries
            .into_iter()
            .map(|(p, ino)| {
                let f = &self.files[ino];
                let unsynced = f.current.len() - f.synced.len();
                let kept = extra(ino, unsynced).min(unsynced);
                (p, f.current[..f.synced.len() + kept].to_vec())
            })
            .collect()
    }
}

struct SimFs(Rc<RefCell<Sim>>);

struct SimFile {
    sim: Rc<RefCell<Sim>>,
    ino: Ino,
}

impl Write for SimFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut s = self.sim.borrow_mut();
        s.step()?;
        s.files[self.ino].current.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl SaveFs for SimFs {
    type File = SimFile;

    fn create_new(&self, path: &Path) -> io::Result<SimFile> {
        let mut s = self.0.borrow_mut();
        s.step()?;
        if s.entries.contains_key(path) {
            return Err(io::Error::from(io::ErrorKind::AlreadyExists));
        }
        let ino = s.files.len();
        s.files.push(FileData { synced: Vec::new(), current: Vec::new() });
        s.entries.insert(path.to_path_buf(), ino);
        s.pending.push(DirOp::Link(path.to_path_buf(), ino));
        Ok(SimFile { sim: self.0.clone(), ino })
    }

    fn sync_file(&self, file: &mut SimFile) -> io::Result<()> {
        let mut s = self.0.borrow_mut();
        s.step()?;
        if !s.skip_file_sync {
            let f = &mut s.files[file.ino];
            f.synced = f.current.clone();
        }
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.0.borrow_mut();
        s.step()?;
        let ino = s.entries.remove(from).ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        s.entries.insert(to.to_path_buf(), ino);
        s.pending.push(DirOp::Rename(from.to_path_buf(), to.to_path_buf()));
        Ok(())
    }

    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        let mut s = self.0.borrow_mut();
        s.step()?;
        if !s.skip_dir_sync {
            s.synced_entries = s.entries.clone();
            s.pending.clear();
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut s = self.0.borrow_mut();
        s.step()?;
        s.entries.remove(path);
        s.pending.push(DirOp::Remove(path.to_path_buf()));
        Ok(())
    }
}

/// Saves `old` (no power loss), then `new` with the power lost after `k` more operations,
/// and checks every outcome a reboot could find. Err: the first outcome that breaks the
/// rule, described.
fn check(old: &[u8], new: &[u8], k: usize, skip_file_sync: bool, skip_dir_sync: bool) -> Result<(), String> {
    let path = Path::new("snap/dump.gcsn");
    let sim = Rc::new(RefCell::new(Sim::new()));
    {
        let mut s = sim.borrow_mut();
        s.skip_file_sync = skip_file_sync;
        s.skip_dir_sync = skip_dir_sync;
    }
    let fs = SimFs(sim.clone());
    // The old file was written by a save the machine survived (a reboot since: all synced).
    save_atomic_on(&fs, path, |w| w.write_all(old)).map_err(|e| format!("the first save: {e}"))?;
    {
        let mut s = sim.borrow_mut();
        s.synced_entries = s.entries.clone();
        s.pending.clear();
        for f in &mut s.files {
            f.synced = f.current.clone();
        }
        s.ops_left = k;
    }
    // Written in pieces, as a snapshot writer does (each piece past the writer's buffer is a
    // write of its own).
    let returned = save_atomic_on(&fs, path, |w| {
        for piece in new.chunks(700_000) {
            w.write_all(piece)?;
        }
        Ok(())
    });
    let s = sim.borrow();
    let inodes = s.files.len();
    // Each file keeps none, half or all of its unsynced data; the folder any prefix of its
    // pending operations.
    for keep_ops in 0..=s.pending.len() {
        for choice in 0..3usize.pow(inodes as u32) {
            let kept = |ino: Ino, unsynced: usize| match choice / 3usize.pow(ino as u32) % 3 {
                0 => 0,
                1 => unsynced / 2,
                _ => unsynced,
            };
            let found = s.after_power_loss(keep_ops, kept);
            let at = found.get(path);
            let ok = match (&returned, at) {
                (Ok(()), Some(b)) => b.as_slice() == new,
                (Err(_), Some(b)) => b.as_slice() == old || b.as_slice() == new,
                (_, None) => false,
            };
            if !ok {
                return Err(format!(
                    "power lost after {k} operations (the save {}), {keep_ops} of {} folder operations kept: \
                     the path holds {}",
                    if returned.is_ok() { "had returned Ok" } else { "had not finished" },
                    s.pending.len(),
                    match at {
                        None => "nothing".to_string(),
                        Some(b) => format!("{} bytes, neither the old {} nor the new {}", b.len(), old.len(), new.len()),
                    }
                ));
            }
        }
    }
    Ok(())
}

/// The most operations a save of `len` bytes makes, plus a few: every power-loss point.
fn points(len: usize) -> usize {
    len / 700_000 + 12
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_power_loss_at_any_step_leaves_the_old_file_or_the_whole_new_one(
        old in prop::collection::vec(any::<u8>(), 0..3000),
        new_len in prop_oneof![0usize..3000, 1_000_000usize..2_500_000],
        fill in any::<u8>(),
    ) {
        let new = vec![fill; new_len];
        for k in 0..points(new_len) {
            if let Err(why) = check(&old, &new, k, false, false) {
                return Err(TestCaseError::fail(why));
            }
        }
    }
}

/// Without the new file's fsync before the rename, a power loss can leave the path naming a
/// file whose data never reached the disk: the checker must find it.
#[test]
fn the_checker_catches_a_save_without_the_files_sync() {
    let (old, new) = (vec![1u8; 100], vec![2u8; 200]);
    let caught = (0..points(new.len())).find_map(|k| check(&old, &new, k, true, false).err());
    let why = caught.expect("a save without its file sync must lose data in some outcome");
    assert!(why.contains("neither the old"), "{why}");
}

/// Without the folder's fsync after the rename, a save can return Ok and a power loss bring
/// back the old file: the checker must find it.
#[test]
fn the_checker_catches_a_save_without_the_folders_sync() {
    let (old, new) = (vec![1u8; 100], vec![2u8; 200]);
    let caught = (0..points(new.len())).find_map(|k| check(&old, &new, k, false, true).err());
    let why = caught.expect("a save without its folder sync must lose an acknowledged save in some outcome");
    assert!(why.contains("had returned Ok"), "{why}");
}
