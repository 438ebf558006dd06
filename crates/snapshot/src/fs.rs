//! File-system helpers for snapshots: an atomic replace, and a file's birth time.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

/// Buffer of the writer [`save_atomic`] hands out: big writes, few syscalls.
const WRITE_BUFFER: usize = 1 << 20;

/// The file-system operations [`save_atomic`] makes, each one a point where a power loss can
/// cut it short: the server's saves run on [`RealFs`]; the power-loss test (tests/power_loss.rs)
/// runs the same sequence on a simulated file system that loses what was not synced.
pub trait SaveFs {
    type File: io::Write;
    /// Creates `path`, which must not exist.
    fn create_new(&self, path: &Path) -> io::Result<Self::File>;
    /// Makes the file's data durable (fsync).
    fn sync_file(&self, file: &mut Self::File) -> io::Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the folder's entries durable (fsync of the folder).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    fn remove(&self, path: &Path) -> io::Result<()>;
}

/// The real file system.
pub struct RealFs;

impl SaveFs for RealFs {
    type File = File;

    fn create_new(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new().write(true).create_new(true).open(path)
    }

    fn sync_file(&self, file: &mut File) -> io::Result<()> {
        file.sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        // Opening a directory for reading and fsyncing it is how POSIX systems persist an
        // entry.
        File::open(dir)?.sync_all()
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }
}

/// Removes the temporary file unless disarmed: covers an error return and a panic in the
/// caller's closure alike.
struct TempGuard<'a, S: SaveFs> {
    fs: &'a S,
    path: Option<PathBuf>,
}

impl<S: SaveFs> Drop for TempGuard<'_, S> {
    fn drop(&mut self) {
        if let Some(p) = self.path.take() {
            let _ = self.fs.remove(&p);
        }
    }
}

/// Writes `path` atomically: `f` writes a temporary file in the same folder, which is then
/// flushed, synced to disk, renamed over `path`, and the folder synced so that the rename
/// itself is durable. Readers of `path` see the old file or the complete new one, never a
/// mix, even across a crash. If `f` (or any step before the rename) fails, the temporary file
/// is removed and `path` is left as it was.
///
/// The temporary file is `.<name>.tmp-<pid>-<n>` beside the target (same file system, so the
/// rename is atomic), created exclusively so that two savers never share one. An error from
/// the final folder sync means the new file is in place but its rename may not survive a
/// crash.
pub fn save_atomic<T>(path: &Path, f: impl FnOnce(&mut BufWriter<File>) -> io::Result<T>) -> io::Result<T> {
    save_atomic_on(&RealFs, path, f)
}

/// [`save_atomic`] on the file system `fs`.
///
/// Invariant (what a power loss at any step leaves at `path`: the old file or the complete
/// new one): the new file's data is synced before the rename names it, and the rename is
/// synced before the call returns Ok.
pub fn save_atomic_on<S: SaveFs, T>(
    fs: &S,
    path: &Path,
    f: impl FnOnce(&mut BufWriter<S::File>) -> io::Result<T>,
) -> io::Result<T> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "snapshot path has no file name"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
    let tmp = dir.join(tmp_name);
    let file = fs.create_new(&tmp)?;
    let mut guard = TempGuard { fs, path: Some(tmp.clone()) };
    let mut w = BufWriter::with_capacity(WRITE_BUFFER, file);
    let value = f(&mut w)?;
    let mut file = w.into_inner().map_err(|e| e.into_error())?;
    fs.sync_file(&mut file)?;
    drop(file);
    fs.rename(&tmp, path)?;
    guard.path = None;
    // The rename is in the folder's metadata: sync it too.
    fs.sync_dir(&dir)?;
    Ok(value)
}

/// True when `candidate` (a file name) is a temporary file [`save_atomic`] makes for a target
/// named `target` (`.<target>.tmp-<pid>-<n>`): what an interrupted save leaves behind.
pub fn is_temp_file_of(candidate: &std::ffi::OsStr, target: &std::ffi::OsStr) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let (c, t) = (candidate.as_bytes(), target.as_bytes());
    let prefix_len = 1 + t.len() + ".tmp-".len();
    c.len() > prefix_len && c[0] == b'.' && &c[1..1 + t.len()] == t && &c[1 + t.len()..prefix_len] == b".tmp-"
}

/// When `path` was created: its birth time from `statx` (`STATX_BTIME`) when the file system
/// records one, `true`; otherwise its last modification time, `false` (the caller should
/// say that the age is approximate).
pub fn birth_time(path: &Path) -> io::Result<(SystemTime, bool)> {
    if let Some(t) = statx_btime(path)? {
        return Ok((t, true));
    }
    Ok((fs::metadata(path)?.modified()?, false))
}

/// The birth time by `statx`, or None when the kernel or file system does not report one.
#[cfg(target_os = "linux")]
fn statx_btime(path: &Path) -> io::Result<Option<SystemTime>> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    // SAFETY: `c` is a valid NUL-terminated path; `buf` is a writable statx struct that the
    // kernel fills (zeroed first, so unset fields read as 0).
    let mut buf: libc::statx = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statx(libc::AT_FDCWD, c.as_ptr(), 0, libc::STATX_BTIME, &mut buf) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        // Old kernels (ENOSYS) or sandboxes (EPERM) without statx: fall back to mtime.
        return match e.raw_os_error() {
            Some(libc::ENOSYS) | Some(libc::EPERM) | Some(libc::EINVAL) => Ok(None),
            _ => Err(e),
        };
    }
    if buf.stx_mask & libc::STATX_BTIME == 0 {
        return Ok(None);
    }
    let t = buf.stx_btime;
    let since = std::time::Duration::new(t.tv_sec.unsigned_abs(), t.tv_nsec);
    Ok(Some(if t.tv_sec >= 0 { SystemTime::UNIX_EPOCH + since } else { SystemTime::UNIX_EPOCH - since }))
}

/// Elsewhere: the standard library's creation time where the platform has one.
#[cfg(not(target_os = "linux"))]
fn statx_btime(path: &Path) -> io::Result<Option<SystemTime>> {
    Ok(fs::metadata(path)?.created().ok())
}
