//! The storage seam: every file and folder operation of the broker's durable state (segments,
//! their indexes and snapshots, `log-start`, `topic.meta`, `producer_ids`, the offsets log and
//! the transaction log) goes through this module, and nothing else in kaka calls `std::fs`
//! for them.
//!
//! The interface is deliberately small: open/create a file, positional read and write,
//! fdatasync/fsync, length and truncate, preallocation; and for names: read a whole file,
//! list, create a folder, fsync a folder, rename, remove. Durability is the caller's job and
//! is stated in these terms only: a file's bytes survive a power failure once it has been
//! fdatasync'ed; a name (a created, renamed or removed entry) once its folder has been
//! fsync'ed. The durable-file helpers in `segment.rs` (`write_file_synced`,
//! `create_dir_synced`, `rename_synced`) are built on exactly those two rules.
//!
//! Two implementations:
//! - the disk (`std::fs`, positional I/O, `fallocate`, `posix_fadvise`), always present;
//! - a simulated file system (`sim`, test builds only) that keeps, per file, what was
//!   written but not yet synced apart from what is durable, and per folder the entries as of
//!   its last fsync, so a test can cut the power at any operation and reopen on what a real
//!   disk could have kept. A simulated file system is *mounted* at a root path; every path
//!   under it is served by it (`route`), every other path by the disk.
//!
//! Cost: dispatch is static. `File` is an enum whose only variant outside test builds is the
//! disk one, so a release build's `match` on it compiles to the plain system call, and the
//! mount-table lookup exists only in test builds. The append and sync path of a produce
//! therefore makes the same system calls as before the seam (the before/after produce runs are
//! in benchmarks/kaka/RESULTS.md).

use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

#[cfg(test)]
pub mod sim;

/// An open file of the broker's durable state.
pub enum File {
    Disk(std::fs::File),
    #[cfg(test)]
    Sim(sim::SimFile),
}

/// How to open a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Read and write an existing file.
    Existing,
    /// Read and write; create it (empty) if missing, keep its contents if present.
    CreateOrOpen,
    /// Create it; fail if it exists.
    CreateNew,
    /// Create it, or empty an existing one.
    Truncate,
    /// Read only, kernel readahead off (the fetch descriptor of a segment).
    ReadRandom,
}

impl File {
    pub fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        match self {
            File::Disk(f) => f.write_all_at(buf, pos),
            #[cfg(test)]
            File::Sim(f) => f.write_all_at(buf, pos),
        }
    }

    pub fn read_exact_at(&self, buf: &mut [u8], pos: u64) -> io::Result<()> {
        match self {
            File::Disk(f) => f.read_exact_at(buf, pos),
            #[cfg(test)]
            File::Sim(f) => f.read_exact_at(buf, pos),
        }
    }

    /// fdatasync: the bytes written so far (and the length) survive a power failure.
    pub fn sync_data(&self) -> io::Result<()> {
        match self {
            File::Disk(f) => f.sync_data(),
            #[cfg(test)]
            File::Sim(f) => f.sync(),
        }
    }

    /// fsync (data and all metadata).
    pub fn sync_all(&self) -> io::Result<()> {
        match self {
            File::Disk(f) => f.sync_all(),
            #[cfg(test)]
            File::Sim(f) => f.sync(),
        }
    }

    pub fn len(&self) -> io::Result<u64> {
        match self {
            File::Disk(f) => Ok(f.metadata()?.len()),
            #[cfg(test)]
            File::Sim(f) => f.len(),
        }
    }

    /// Cuts (or zero-extends) the file to `len` bytes; durable after the next sync.
    pub fn set_len(&self, len: u64) -> io::Result<()> {
        match self {
            File::Disk(f) => f.set_len(len),
            #[cfg(test)]
            File::Sim(f) => f.set_len(len),
        }
    }

    /// Allocates `from..to` (reading as zeros) and extends the file to `to` (fallocate mode 0).
    /// An optimisation only: callers treat an error as "append plainly".
    pub fn preallocate(&self, from: u64, to: u64) -> io::Result<()> {
        match self {
            File::Disk(f) => {
                use std::os::fd::AsRawFd;
                // SAFETY: the descriptor is open; fallocate with mode 0 only allocates and extends.
                let r = unsafe { libc::fallocate(f.as_raw_fd(), 0, from as i64, (to - from) as i64) };
                if r == 0 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            }
            #[cfg(test)]
            File::Sim(f) => f.preallocate(to),
        }
    }
}

/// The simulated file system mounted over `path`, if any (test builds only).
#[cfg(test)]
fn route(path: &Path) -> Option<std::sync::Arc<sim::SimFs>> {
    sim::mounted(path)
}

pub fn open(path: &Path, mode: Mode) -> io::Result<File> {
    #[cfg(test)]
    if let Some(fs) = route(path) {
        return fs.open(path, mode).map(File::Sim);
    }
    let mut o = std::fs::OpenOptions::new();
    match mode {
        Mode::Existing => o.read(true).write(true),
        Mode::CreateOrOpen => o.read(true).write(true).create(true),
        Mode::CreateNew => o.read(true).write(true).create_new(true),
        Mode::Truncate => o.read(true).write(true).create(true).truncate(true),
        Mode::ReadRandom => o.read(true),
    };
    let f = o.open(path)?;
    if mode == Mode::ReadRandom {
        use std::os::fd::AsRawFd;
        // Advice only: a kernel that ignores it still reads correctly, so the result is not fatal.
        // SAFETY: the descriptor is open for the duration of the call.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    }
    Ok(File::Disk(f))
}

/// The whole content of a file.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    #[cfg(test)]
    if let Some(fs) = route(path) {
        return fs.read(path);
    }
    std::fs::read(path)
}

pub fn read_to_string(path: &Path) -> io::Result<String> {
    String::from_utf8(read(path)?).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The names in a folder (any order).
pub fn list(dir: &Path) -> io::Result<Vec<String>> {
    #[cfg(test)]
    if let Some(fs) = route(dir) {
        return fs.list(dir);
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        out.push(e?.file_name().to_string_lossy().into_owned());
    }
    Ok(out)
}

pub fn is_dir(path: &Path) -> bool {
    #[cfg(test)]
    if let Some(fs) = route(path) {
        return fs.is_dir(path);
    }
    path.is_dir()
}

pub fn exists(path: &Path) -> bool {
    #[cfg(test)]
    if let Some(fs) = route(path) {
        return fs.exists(path);
    }
    path.exists()
}

/// Last modification time in ms since the epoch (None where unknown, as in the simulation).
pub fn mtime_ms(path: &Path) -> Option<i64> {
    #[cfg(test)]
    if route(path).is_some() {
        return None;
    }
    let m = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(m.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as i64)
}

/// Creates one folder (its parent must exist). Durable after `sync_dir` of the parent.
pub fn create_dir(path: &Path) -> io::Result<()> {
    #[cfg(test)]
    if let Some(fs) = route(path) {
        return fs.create_dir(path);
    }
    std::fs::create_dir(path)
}

/// fsync of a folder: the entries created, renamed or removed in it survive a power failure.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    #[cfg(test)]
    if let Some(fs) = route(path) {
        return fs.sync_dir(path);
    }
    std::fs::File::open(path)?.sync_all()
}

/// Renames a file or folder (replacing a file at `to`). Durable after `sync_dir` of both folders.
pub fn rename(from: &Path, to: &Path) -> io::Result<()> {
    #[cfg(test)]
    if let Some(fs) = route(from) {
        return fs.rename(from, to);
    }
    std::fs::rename(from, to)
}

pub fn remove_file(path: &Path) -> io::Result<()> {
    #[cfg(test)]
    if let Some(fs) = route(path) {
        return fs.remove(path, false);
    }
    std::fs::remove_file(path)
}

pub fn remove_dir_all(path: &Path) -> io::Result<()> {
    #[cfg(test)]
    if let Some(fs) = route(path) {
        return fs.remove(path, true);
    }
    std::fs::remove_dir_all(path)
}
