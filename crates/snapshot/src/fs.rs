//! File-system helpers for snapshots: an atomic replace, and a file's birth time.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

/// Buffer of the writer [`save_atomic`] hands out: big writes, few syscalls.
const WRITE_BUFFER: usize = 1 << 20;

/// Removes the temporary file unless disarmed: covers an error return and a panic in the
/// caller's closure alike.
struct TempGuard {
    path: Option<PathBuf>,
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(p) = self.path.take() {
            let _ = fs::remove_file(p);
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
    let file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    let mut guard = TempGuard { path: Some(tmp.clone()) };
    let mut w = BufWriter::with_capacity(WRITE_BUFFER, file);
    let value = f(&mut w)?;
    let file = w.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, path)?;
    guard.path = None;
    // The rename is in the folder's metadata: sync it too. (Opening a directory for reading
    // and fsyncing it is how POSIX systems persist an entry.)
    File::open(&dir)?.sync_all()?;
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
