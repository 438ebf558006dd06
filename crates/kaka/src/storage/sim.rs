//! A simulated file system for power-loss tests (test builds only).
//!
//! What it keeps apart, as a disk with a volatile cache does:
//! - per file, the contents as of the last fdatasync/fsync (`durable`) and the writes and
//!   length changes made since (`pending`, in order); reads see both;
//! - per folder, its entries as of the last fsync of that folder (`durable`) beside the
//!   current ones: a created, renamed or removed name is durable only once its folder is synced.
//!
//! Power loss: `crash_at(n)` makes the n-th mutating operation from now the last one. That
//! operation fails (a write leaves a random prefix of itself pending first, as a torn write),
//! and so does every operation after it, reads included: the process is dead, nothing more
//! can be acknowledged. `crash_image` then builds what a disk could hold after the power comes
//! back: folders as of their last sync, and per file its durable contents plus, at random,
//! none, some or all of its pending operations in order, the first one left out possibly kept
//! as a torn prefix. Reopening the broker on that image is a restart after the power failure.
//!
//! Folders and files are inodes, so a folder renamed with its files keeps them, and a file
//! removed from a folder that was not synced comes back with its last synced contents.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::Mode;

const ROOT: u64 = 0;

enum Inode {
    Dir { entries: BTreeMap<String, u64>, durable: BTreeMap<String, u64> },
    File { data: Vec<u8>, durable: Vec<u8>, pending: Vec<Pending> },
}

#[derive(Clone)]
enum Pending {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

fn apply(data: &mut Vec<u8>, p: &Pending) {
    match p {
        Pending::Write(pos, b) => {
            let end = *pos as usize + b.len();
            if data.len() < end {
                data.resize(end, 0);
            }
            data[*pos as usize..end].copy_from_slice(b);
        }
        Pending::SetLen(n) => data.resize(*n as usize, 0),
    }
}

/// A small deterministic generator (splitmix64): the crash image depends only on the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in 0..=n.
    fn upto(&mut self, n: u64) -> u64 {
        self.next() % (n + 1)
    }
}

struct State {
    inodes: HashMap<u64, Inode>,
    next_ino: u64,
    /// Mutating operations so far.
    ops: u64,
    /// The mutating operation (by `ops` count) at which the power goes.
    crash_at: Option<u64>,
    crashed: bool,
    rng: Rng,
}

pub struct SimFs {
    root: PathBuf,
    st: Mutex<State>,
    /// How long each file sync takes (µs), outside the lock: the window in which other
    /// threads (a compaction pass, fetches) see bytes written but not yet durable.
    sync_us: std::sync::atomic::AtomicU64,
}

fn power_lost() -> io::Error {
    io::Error::other("simulated power loss")
}

fn not_found(p: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{}: not found (sim)", p.display()))
}

impl State {
    /// Counts one mutating operation; Err once the power is gone (this one included).
    fn tick(&mut self) -> io::Result<()> {
        if self.crashed {
            return Err(power_lost());
        }
        self.ops += 1;
        if self.crash_at.is_some_and(|c| self.ops >= c) {
            self.crashed = true;
            return Err(power_lost());
        }
        Ok(())
    }

    fn alive(&self) -> io::Result<()> {
        if self.crashed {
            Err(power_lost())
        } else {
            Ok(())
        }
    }

    fn new_inode(&mut self, i: Inode) -> u64 {
        self.next_ino += 1;
        self.inodes.insert(self.next_ino, i);
        self.next_ino
    }

    fn entries(&self, dir: u64) -> Option<&BTreeMap<String, u64>> {
        match self.inodes.get(&dir)? {
            Inode::Dir { entries, .. } => Some(entries),
            Inode::File { .. } => None,
        }
    }

    fn entries_mut(&mut self, dir: u64) -> Option<&mut BTreeMap<String, u64>> {
        match self.inodes.get_mut(&dir)? {
            Inode::Dir { entries, .. } => Some(entries),
            Inode::File { .. } => None,
        }
    }

    fn file_mut(&mut self, ino: u64) -> io::Result<(&mut Vec<u8>, &mut Vec<u8>, &mut Vec<Pending>)> {
        match self.inodes.get_mut(&ino) {
            Some(Inode::File { data, durable, pending }) => Ok((data, durable, pending)),
            _ => Err(io::Error::other("not a file (sim)")),
        }
    }
}

impl SimFs {
    /// An empty file system to mount at `root` (the root folder itself exists and is durable).
    pub fn new(root: &Path, seed: u64) -> Arc<SimFs> {
        let mut inodes = HashMap::new();
        inodes.insert(ROOT, Inode::Dir { entries: BTreeMap::new(), durable: BTreeMap::new() });
        Arc::new(SimFs {
            root: root.to_path_buf(),
            st: Mutex::new(State {
                inodes,
                next_ino: ROOT,
                ops: 0,
                crash_at: None,
                crashed: false,
                rng: Rng(seed),
            }),
            sync_us: Default::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes every file sync take this long (see `sync_us`).
    pub fn slow_syncs(&self, d: std::time::Duration) {
        self.sync_us.store(d.as_micros() as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// The power goes at the `n`-th mutating operation from now (n >= 1).
    pub fn crash_after(&self, n: u64) {
        let mut st = self.lock();
        st.crash_at = Some(st.ops + n.max(1));
    }

    /// Cuts the power now, if it has not gone yet.
    pub fn crash_now(&self) {
        self.lock().crashed = true;
    }

    pub fn crashed(&self) -> bool {
        self.lock().crashed
    }

    /// Path components below the root, or None for a path outside it.
    fn parts(&self, path: &Path) -> Option<Vec<String>> {
        let rel = path.strip_prefix(&self.root).ok()?;
        let mut out = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(s) => out.push(s.to_string_lossy().into_owned()),
                Component::CurDir => {}
                _ => return None,
            }
        }
        Some(out)
    }

    /// The inode at `path` (current entries).
    fn lookup(st: &State, parts: &[String]) -> Option<u64> {
        let mut cur = ROOT;
        for p in parts {
            cur = *st.entries(cur)?.get(p)?;
        }
        Some(cur)
    }

    /// (parent folder inode, last name) of `path`; the parent must exist.
    fn parent(&self, st: &State, path: &Path) -> io::Result<(u64, String)> {
        let mut parts = self.parts(path).ok_or_else(|| not_found(path))?;
        let name = parts.pop().ok_or_else(|| io::Error::other("the root has no parent (sim)"))?;
        let dir = Self::lookup(st, &parts).ok_or_else(|| not_found(path))?;
        st.entries(dir)
            .ok_or_else(|| io::Error::other(format!("{}: parent not a folder", path.display())))?;
        Ok((dir, name))
    }

    pub fn open(self: &Arc<Self>, path: &Path, mode: Mode) -> io::Result<SimFile> {
        let mut st = self.lock();
        st.alive()?;
        let (dir, name) = self.parent(&st, path)?;
        let existing = st.entries(dir).and_then(|e| e.get(&name).copied());
        let ino = match (existing, mode) {
            (Some(_), Mode::CreateNew) => {
                return Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{}", path.display())))
            }
            (Some(ino), Mode::Truncate) => {
                st.tick()?;
                let (data, _, pending) = st.file_mut(ino)?;
                data.clear();
                pending.push(Pending::SetLen(0));
                ino
            }
            (Some(ino), _) => {
                st.file_mut(ino)?;
                ino
            }
            (None, Mode::Existing | Mode::ReadRandom) => return Err(not_found(path)),
            (None, _) => {
                st.tick()?;
                let ino =
                    st.new_inode(Inode::File { data: Vec::new(), durable: Vec::new(), pending: Vec::new() });
                st.entries_mut(dir).expect("checked folder").insert(name, ino);
                ino
            }
        };
        Ok(SimFile { fs: self.clone(), ino })
    }

    pub fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut st = self.lock();
        st.alive()?;
        let parts = self.parts(path).ok_or_else(|| not_found(path))?;
        let ino = Self::lookup(&st, &parts).ok_or_else(|| not_found(path))?;
        Ok(st.file_mut(ino)?.0.clone())
    }

    pub fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let st = self.lock();
        st.alive()?;
        let parts = self.parts(dir).ok_or_else(|| not_found(dir))?;
        let ino = Self::lookup(&st, &parts).ok_or_else(|| not_found(dir))?;
        Ok(st.entries(ino).ok_or_else(|| io::Error::other("not a folder (sim)"))?.keys().cloned().collect())
    }

    pub fn is_dir(&self, path: &Path) -> bool {
        let st = self.lock();
        let Some(parts) = self.parts(path) else { return false };
        Self::lookup(&st, &parts).is_some_and(|i| st.entries(i).is_some())
    }

    pub fn exists(&self, path: &Path) -> bool {
        let st = self.lock();
        self.parts(path).is_some_and(|parts| Self::lookup(&st, &parts).is_some())
    }

    pub fn create_dir(&self, path: &Path) -> io::Result<()> {
        let mut st = self.lock();
        st.alive()?;
        let (dir, name) = self.parent(&st, path)?;
        if st.entries(dir).is_some_and(|e| e.contains_key(&name)) {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{}", path.display())));
        }
        st.tick()?;
        let ino = st.new_inode(Inode::Dir { entries: BTreeMap::new(), durable: BTreeMap::new() });
        st.entries_mut(dir).expect("checked folder").insert(name, ino);
        Ok(())
    }

    pub fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut st = self.lock();
        st.alive()?;
        let parts = self.parts(path).ok_or_else(|| not_found(path))?;
        let ino = Self::lookup(&st, &parts).ok_or_else(|| not_found(path))?;
        st.tick()?;
        match st.inodes.get_mut(&ino) {
            Some(Inode::Dir { entries, durable }) => {
                *durable = entries.clone();
                Ok(())
            }
            _ => Err(io::Error::other("not a folder (sim)")),
        }
    }

    pub fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.lock();
        st.alive()?;
        let (fd, fname) = self.parent(&st, from)?;
        let (td, tname) = self.parent(&st, to)?;
        let ino = st.entries(fd).and_then(|e| e.get(&fname).copied()).ok_or_else(|| not_found(from))?;
        st.tick()?;
        st.entries_mut(fd).expect("checked folder").remove(&fname);
        st.entries_mut(td).expect("checked folder").insert(tname, ino);
        Ok(())
    }

    pub fn remove(&self, path: &Path, recursive: bool) -> io::Result<()> {
        let mut st = self.lock();
        st.alive()?;
        let (dir, name) = self.parent(&st, path)?;
        let ino = st.entries(dir).and_then(|e| e.get(&name).copied()).ok_or_else(|| not_found(path))?;
        if st.entries(ino).is_some() != recursive {
            return Err(io::Error::other(format!("{}: wrong kind for this removal (sim)", path.display())));
        }
        st.tick()?;
        st.entries_mut(dir).expect("checked folder").remove(&name);
        Ok(())
    }

    /// What a disk could hold after the power failed: a new file system with the same root,
    /// built from the durable folder entries and, per file, its durable bytes plus a random
    /// in-order part of its pending operations (the first one left out possibly torn).
    pub fn crash_image(&self, seed: u64) -> Arc<SimFs> {
        let st = self.lock();
        let mut rng = Rng(seed);
        let mut inodes = HashMap::new();
        let mut todo = vec![ROOT];
        let mut seen = HashSet::new();
        while let Some(ino) = todo.pop() {
            if !seen.insert(ino) {
                continue;
            }
            let node = match st.inodes.get(&ino) {
                Some(Inode::Dir { durable, .. }) => {
                    todo.extend(durable.values().copied());
                    Inode::Dir { entries: durable.clone(), durable: durable.clone() }
                }
                Some(Inode::File { durable, pending, .. }) => {
                    let mut data = durable.clone();
                    let keep = rng.upto(pending.len() as u64) as usize;
                    for p in &pending[..keep] {
                        apply(&mut data, p);
                    }
                    if let Some(Pending::Write(pos, b)) = pending.get(keep) {
                        if rng.upto(1) == 1 {
                            let n = rng.upto(b.len() as u64) as usize;
                            apply(&mut data, &Pending::Write(*pos, b[..n].to_vec()));
                        }
                    }
                    Inode::File { data: data.clone(), durable: data, pending: Vec::new() }
                }
                None => continue,
            };
            inodes.insert(ino, node);
        }
        Arc::new(SimFs {
            root: self.root.clone(),
            st: Mutex::new(State {
                inodes,
                next_ino: st.next_ino,
                ops: 0,
                crash_at: None,
                crashed: false,
                rng: Rng(seed ^ 0x5EED),
            }),
            sync_us: Default::default(),
        })
    }
}

/// An open file of a simulated file system.
pub struct SimFile {
    fs: Arc<SimFs>,
    ino: u64,
}

impl SimFile {
    pub fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        let mut st = self.fs.lock();
        let was_alive = !st.crashed;
        if let Err(e) = st.tick() {
            if was_alive {
                // The write the power cut: some prefix of it may have reached the cache.
                let n = st.rng.upto(buf.len() as u64) as usize;
                let (data, _, pending) = st.file_mut(self.ino)?;
                let p = Pending::Write(pos, buf[..n].to_vec());
                apply(data, &p);
                pending.push(p);
            }
            return Err(e);
        }
        let (data, _, pending) = st.file_mut(self.ino)?;
        let p = Pending::Write(pos, buf.to_vec());
        apply(data, &p);
        pending.push(p);
        Ok(())
    }

    pub fn read_exact_at(&self, buf: &mut [u8], pos: u64) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.alive()?;
        let (data, _, _) = st.file_mut(self.ino)?;
        let end = pos as usize + buf.len();
        if end > data.len() {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end (sim)"));
        }
        buf.copy_from_slice(&data[pos as usize..end]);
        Ok(())
    }

    pub fn sync(&self) -> io::Result<()> {
        let us = self.fs.sync_us.load(std::sync::atomic::Ordering::Relaxed);
        if us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(us));
        }
        let mut st = self.fs.lock();
        st.tick()?;
        let (data, durable, pending) = st.file_mut(self.ino)?;
        *durable = data.clone();
        pending.clear();
        Ok(())
    }

    pub fn len(&self) -> io::Result<u64> {
        let mut st = self.fs.lock();
        st.alive()?;
        Ok(st.file_mut(self.ino)?.0.len() as u64)
    }

    pub fn set_len(&self, len: u64) -> io::Result<()> {
        let mut st = self.fs.lock();
        st.tick()?;
        let (data, _, pending) = st.file_mut(self.ino)?;
        let p = Pending::SetLen(len);
        apply(data, &p);
        pending.push(p);
        Ok(())
    }

    pub fn preallocate(&self, to: u64) -> io::Result<()> {
        let len = self.len()?;
        if to > len {
            self.set_len(to)?;
        }
        Ok(())
    }
}

/// Simulated file systems by mount root.
static MOUNTS: Mutex<Vec<Arc<SimFs>>> = Mutex::new(Vec::new());

/// Serves every path under the file system's root from it (replacing what was mounted there).
pub fn mount(fs: Arc<SimFs>) {
    let mut m = MOUNTS.lock().unwrap_or_else(|e| e.into_inner());
    m.retain(|f| f.root != fs.root);
    m.push(fs);
}

pub fn unmount(root: &Path) {
    MOUNTS.lock().unwrap_or_else(|e| e.into_inner()).retain(|f| f.root != root);
}

pub fn mounted(path: &Path) -> Option<Arc<SimFs>> {
    let m = MOUNTS.lock().unwrap_or_else(|e| e.into_inner());
    m.iter().find(|f| path.starts_with(&f.root)).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage;

    #[test]
    fn unsynced_bytes_and_names_are_lost_synced_ones_kept() {
        let root = PathBuf::from("/sim/storage-unit");
        let fs = SimFs::new(&root, 1);
        mount(fs.clone());
        let d = root.join("d");
        storage::create_dir(&d).unwrap();
        storage::sync_dir(&root).unwrap();
        let f = storage::open(&d.join("a"), Mode::CreateNew).unwrap();
        f.write_all_at(b"hello", 0).unwrap();
        f.sync_data().unwrap();
        // The name of `a` was never synced in `d`: it is gone, whatever its bytes.
        let img = fs.crash_image(7);
        assert!(img.is_dir(&d) && !img.exists(&d.join("a")));
        storage::sync_dir(&d).unwrap();
        f.write_all_at(b" world", 5).unwrap();
        for seed in 0..32 {
            let img = fs.crash_image(seed);
            let got = img.read(&d.join("a")).unwrap();
            assert!(b"hello world".starts_with(&got) && got.len() >= 5, "{got:?}");
        }
        // The power goes at the next write: it fails, and so does everything after it.
        fs.crash_after(1);
        assert!(f.write_all_at(b"!", 11).is_err());
        assert!(f.sync_data().is_err() && storage::read(&d.join("a")).is_err());
        unmount(&root);
    }
}
