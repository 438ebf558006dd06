//! A fail-stop append-only log of checksummed frames, over the storage seam: the one type
//! behind the consumer-offsets log (`groups.rs`) and the transaction log (`txn.rs`).
//!
//! What a frame holds is the caller's business; this type only needs a `parse` function that
//! says whether a whole, valid frame starts at a position (and how long it is). Both callers
//! frame as u32 length word, u32 CRC-32C, payload.
//!
//! Invariants:
//! 1. `good_len` is the length of the file's valid prefix: every byte below it belongs to a
//!    whole frame that was written and fdatasync'ed. An append writes at `good_len` (not at
//!    whatever the file's end is), and only while the file is clean.
//! 2. Fail-stop: a failed or partial append leaves the log `dirty`; the bytes past
//!    `good_len` are cut off (set_len + fsync) before anything else is appended, and while
//!    that cut fails every append is refused. So, with one append in flight at a time (each
//!    caller owns its log behind one task or lock), the only bytes that can be bad on restart
//!    are a torn last frame, which was never acknowledged.
//! 3. Replay therefore drops a bad tail, but a bad frame with a valid frame after it is
//!    damage, not a torn append: opening refuses rather than drop acknowledged frames.
//! 4. The file's name is durable before the first append: opening syncs the parent folder (a
//!    new file's name lives there; an fdatasync of the file does not write it).
//! 5. A rewrite (compaction to the live state) is a durable replace: a temporary file, synced,
//!    renamed over the log, folder synced. A crash leaves the old log or the new one, whole.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::segment;
use crate::storage::{self, File, Mode};

/// Why an append was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The write or its fdatasync failed (the bytes were cut back off, or will be).
    Failed,
    /// An earlier failure's bytes could not be cut off yet: nothing is appended until they are.
    Dirty,
}

pub struct AppendLog {
    file: Arc<File>,
    path: PathBuf,
    good_len: u64,
    dirty: bool,
    /// A rewrite failed at its rename: no append is safe any more (see `rewrite_now`).
    broken: bool,
    /// Whole frames in the file (for the callers' rewrite decisions).
    pub frames: usize,
    /// Test hook: the next append writes only this many bytes, then fails.
    #[cfg(test)]
    pub fail_next_after: Option<usize>,
}

/// What `open` read: the log, and the bytes of each valid frame in order.
pub struct Opened {
    pub log: AppendLog,
    pub frames: Vec<Vec<u8>>,
}

impl AppendLog {
    /// Opens (creating) the log at `path` and reads its frames. `parse(data, p)` returns the
    /// length of the whole valid frame starting at `p`, or None. A torn tail is cut off and the
    /// cut synced; damage before valid frames is an error naming the byte (invariant 3).
    /// `what` names the log in messages. An interrupted rewrite's temporary file is removed.
    pub fn open(
        path: &Path,
        what: &str,
        parse: impl Fn(&[u8], usize) -> Option<usize>,
    ) -> Result<Opened, String> {
        let err = |e: io::Error| format!("{}: {e}", path.display());
        let _ = storage::remove_file(&segment::temp_path(path));
        let file = storage::open(path, Mode::CreateOrOpen).map_err(err)?;
        // Invariant 4: the name must outlive a power failure before a frame is acknowledged.
        segment::sync_dir(parent(path)).map_err(err)?;
        let len = file.len().map_err(err)?;
        let mut data = vec![0u8; len as usize];
        file.read_exact_at(&mut data, 0).map_err(err)?;
        let mut frames = Vec::new();
        let mut p = 0usize;
        while let Some(n) = parse(&data, p).filter(|&n| n > 0) {
            frames.push(data[p..p + n].to_vec());
            p += n;
        }
        if p < data.len() {
            if let Some(q) = (p + 1..data.len()).find(|&q| parse(&data, q).is_some_and(|n| n > 0)) {
                return Err(format!(
                    "{}: damaged: {} unreadable bytes at byte {p} with valid frames after them (from byte {q}); \
                     not dropping acknowledged {what}. Move the file aside to start without them, or cut it at \
                     byte {p} to keep only those before the damage",
                    path.display(),
                    q - p
                ));
            }
            tracing::warn!(path = %path.display(), dropped = data.len() - p, "{what}: dropping a torn tail");
            file.set_len(p as u64).map_err(err)?;
            file.sync_all().map_err(err)?;
        }
        let log = AppendLog {
            file: Arc::new(file),
            path: path.to_path_buf(),
            good_len: p as u64,
            dirty: false,
            broken: false,
            frames: frames.len(),
            #[cfg(test)]
            fail_next_after: None,
        };
        Ok(Opened { log, frames })
    }

    /// Appends one frame and fdatasyncs it on a blocking thread. Ok only once the whole frame
    /// is durable; on failure the log is cut back to `good_len` before any later append.
    pub async fn append(&mut self, frame: Vec<u8>) -> Result<(), Refused> {
        if self.broken || (self.dirty && !self.repair().await) {
            return Err(Refused::Dirty);
        }
        let file = self.file.clone();
        let (pos, n) = (self.good_len, frame.len() as u64);
        #[cfg(test)]
        let fail_after = self.fail_next_after.take();
        #[cfg(not(test))]
        let fail_after: Option<usize> = None;
        let res = tokio::task::spawn_blocking(move || -> io::Result<()> {
            if let Some(k) = fail_after {
                file.write_all_at(&frame[..k.min(frame.len())], pos)?;
                return Err(io::Error::other("injected write failure"));
            }
            file.write_all_at(&frame, pos)?;
            file.sync_data()
        })
        .await;
        if matches!(res, Ok(Ok(()))) {
            self.good_len += n;
            self.frames += 1;
            return Ok(());
        }
        tracing::error!(path = %self.path.display(), "log append failed: {res:?}");
        self.dirty = true;
        self.repair().await;
        Err(Refused::Failed)
    }

    /// Cuts the file back to its valid prefix and syncs the new length. True when clean again.
    async fn repair(&mut self) -> bool {
        let file = self.file.clone();
        let len = self.good_len;
        let res = tokio::task::spawn_blocking(move || -> io::Result<()> {
            file.set_len(len)?;
            file.sync_all()
        })
        .await;
        self.dirty = !matches!(res, Ok(Ok(())));
        if self.dirty {
            tracing::error!(path = %self.path.display(), "log cannot be cut back: {res:?}; refusing appends");
        } else {
            tracing::warn!(path = %self.path.display(), len, "log cut back to its last good frame");
        }
        !self.dirty
    }

    /// Replaces the whole log by `frames` (invariant 5); appends then go to the new file.
    /// On failure before the rename the old file is still the log and appends go on there;
    /// once the rename was attempted it is unknown which file a restart finds, so the log
    /// refuses every later append (fail-stop) rather than append to a file that may be gone.
    pub fn rewrite_now(&mut self, frames: &[Vec<u8>]) -> io::Result<()> {
        if self.broken {
            return Err(io::Error::other("log unusable after a failed rewrite"));
        }
        let data: Vec<u8> = frames.concat();
        let tmp = segment::temp_path(&self.path);
        let staged = (|| {
            let f = storage::open(&tmp, Mode::Truncate)?;
            f.write_all_at(&data, 0)?;
            f.sync_data()
        })();
        if let Err(e) = staged {
            let _ = storage::remove_file(&tmp);
            return Err(e);
        }
        let swapped =
            segment::rename_synced(&tmp, &self.path).and_then(|()| storage::open(&self.path, Mode::Existing));
        match swapped {
            Ok(f) => {
                self.file = Arc::new(f);
                self.good_len = data.len() as u64;
                self.frames = frames.len();
                self.dirty = false;
                Ok(())
            }
            Err(e) => {
                self.broken = true;
                tracing::error!(path = %self.path.display(), "log rewrite failed at its rename: {e}; refusing appends");
                Err(e)
            }
        }
    }

    /// `rewrite_now` off the async workers (see `segment::blocking`).
    pub fn rewrite(&mut self, frames: Vec<Vec<u8>>) -> io::Result<()> {
        segment::blocking(|| self.rewrite_now(&frames))
    }

    /// Flushes on shutdown (every append is already synced; this is belt and braces).
    pub async fn close(&self) {
        let file = self.file.clone();
        let _ = tokio::task::spawn_blocking(move || file.sync_data()).await;
    }

    #[cfg(test)]
    pub fn len(&self) -> u64 {
        self.good_len
    }
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}
