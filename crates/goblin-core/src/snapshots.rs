//! Native snapshots on the server: the startup load, SAVE, BGSAVE by fork, periodic saves,
//! LASTSAVE, GOBLIN.DUMPWORLD and GOBLIN.LOAD. The file format is the `snapshot` crate's.
//!
//! Where: `--load PATH` is both where startup loads from and where every save goes, so a server
//! restarted from an unchanged command line comes back from its newest snapshot. Without it,
//! saves are refused with a message that says so.
//!
//! Background work runs in forked children: the child sees the dataset frozen at fork time,
//! writes it, reports on a status pipe (one line: `ok|err <cow bytes> <detail>`) and exits with
//! `_exit` (no destructors, no atexit handlers: the parent owns every shared resource). The
//! parent reaps children from its cron with `waitpid(WNOHANG)`, so a child never blocks the loop.
//! While a child runs, the keyspace avoids resizing its table (each rehash step would copy pages
//! the child still shares).
//!
//! Atomicity of a save: `snapshot::save_atomic` writes a temporary file in the target's folder,
//! fsyncs it, renames it over the target and fsyncs the folder: a crash at any point leaves the
//! old snapshot or the new one, whole.

use crate::conn::Conn;
use crate::server::{now_ms, Server};
use engine::{Engine, ReplId, Replication};
use resp::reply;
use std::io::{self, Read, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tracing::{error, info, warn};

/// After a failed background save, periodic saves wait this long before trying again (Redis's
/// CONFIG_BGSAVE_RETRY_DELAY).
const BGSAVE_RETRY_DELAY: Duration = Duration::from_secs(5);
/// How long a save (and GOBLIN.DUMPWORLD) waits, on the server thread, for Kafka to
/// acknowledge the journal's pending records before freezing the dataset
/// (`Server::settle_journal`). Normally one round trip; the bound matters only while Kafka
/// is slow or away, and then the save fails instead.
const SETTLE_BOUND: Duration = Duration::from_secs(1);
/// The same wait before the final snapshot at shutdown: the journal's own flush bound.
const SHUTDOWN_SETTLE_BOUND: Duration = Duration::from_secs(10);
/// A DUMPWORLD child gives up when the client has not accepted a byte for this long.
const DUMPWORLD_STALL: Duration = Duration::from_secs(60);
/// Progress is logged at most this often during a long load or save.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// What a forked child is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChildKind {
    /// BGSAVE (or a periodic save) of the dataset at `offset`.
    Bgsave { offset: u64 },
    /// GOBLIN.DUMPWORLD's reply, written to client `id` in `slot` by the child.
    DumpWorld { slot: usize, id: u64 },
    /// A full synchronization's RDB file, written once to every reader of group `group`
    /// (`Snapshots::sync_groups`: replicas and tools whose SYNC or PSYNC came together).
    Sync { group: u64 },
    /// A Lua debugging session (`SCRIPT DEBUG YES`) with client `id`, on the child's own
    /// copy of the dataset, which nothing reads: it does not keep tables from resizing.
    LuaDebug { id: u64 },
}

impl ChildKind {
    /// The parent should not resize its tables while the child runs: the child reads the
    /// fork-time image, and every page a resize touches would be copied.
    fn reads_image(&self) -> bool {
        !matches!(self, ChildKind::LuaDebug { .. })
    }
}

struct Child {
    pid: libc::pid_t,
    kind: ChildKind,
    started: Instant,
    /// Read end of the status pipe (non-blocking): progress lines while the child runs
    /// (`report_progress`), then its verdict.
    status: std::fs::File,
    /// What has been read from `status` and not yet taken as a whole line.
    unread: Vec<u8>,
    /// Keys in the dataset at the fork (INFO `current_save_keys_total`).
    total_keys: u64,
    /// The child's latest report: keys written, its copy-on-write bytes, when it came.
    progress: Option<(u64, u64, Instant)>,
    /// The largest copy-on-write size it reported.
    cow_peak: u64,
    /// Bytes it reported sent to a socket, and how many of them the parent has counted.
    sent: u64,
    sent_counted: u64,
    /// Readers of a `Sync` child's file that it gave up on (client IDs): they stopped
    /// reading or left, and the others went on.
    dropped: Vec<u64>,
}

impl Child {
    /// Takes what the child has written so far: every whole progress line updates
    /// `progress`; the rest (a partial line, the verdict) stays in `unread`.
    fn read_progress(&mut self) {
        let mut buf = [0u8; 512];
        loop {
            match self.status.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => self.unread.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        while let Some(end) = self.unread.iter().position(|&b| b == b'\n') {
            let line = String::from_utf8_lossy(&self.unread[..end]).into_owned();
            let mut words = line.split(' ');
            match words.next() {
                Some("progress") => {}
                Some("drop") => {
                    if let Some(id) = words.next().and_then(|w| w.parse().ok()) {
                        self.dropped.push(id);
                    }
                    self.unread.drain(..=end);
                    continue;
                }
                _ => break,
            }
            let mut num = || words.next().and_then(|w| w.parse::<u64>().ok()).unwrap_or(0);
            let (keys, cow, sent) = (num(), num(), num());
            self.sent = self.sent.max(sent);
            self.progress = Some((keys, cow, Instant::now()));
            self.cow_peak = self.cow_peak.max(cow);
            self.unread.drain(..=end);
        }
    }
}

/// In a forked child: its status pipe's write end, for [`report_progress`].
static CHILD_STATUS_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
/// In a forked child: when it last reported its progress (unix ms).
static CHILD_LAST_REPORT_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
/// In a forked child: bytes it has written to a replica's or a tool's socket (`ReplSocket`),
/// reported with its progress and its verdict: the parent counts them as replication output
/// (INFO `total_net_repl_output_bytes`), as Redis counts a full synchronization's file.
static CHILD_SENT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A forked child's progress, called by the writers every 1024 keys
/// (`store::limits::set_save_progress_hook`): at most once a second, `progress <keys written>
/// <copy-on-write bytes> <bytes sent>` on the status pipe, which the parent reads into INFO's
/// `current_save_keys_processed`, `current_cow_size` and `current_fork_perc` (and
/// `total_net_repl_output_bytes`), as Redis's child reports its progress to its parent.
fn report_progress(keys: u64) {
    use std::sync::atomic::Ordering::Relaxed;
    let now = now_ms();
    if now - CHILD_LAST_REPORT_MS.load(Relaxed) < 1000 {
        return;
    }
    CHILD_LAST_REPORT_MS.store(now, Relaxed);
    let sent = CHILD_SENT.load(Relaxed);
    let line = format!("progress {keys} {} {sent}\n", private_dirty_bytes());
    // SAFETY: the descriptor is this child's status pipe, open until it exits; a line this
    // short is written whole (PIPE_BUF).
    unsafe { libc::write(CHILD_STATUS_FD.load(Relaxed), line.as_ptr().cast(), line.len()) };
}

/// What an RDB file holds besides the keys (`Server::rdb_parts`), owned so that a forked child
/// can take it along.
struct RdbParts {
    functions: Vec<Vec<u8>>,
    created_unix_secs: i64,
    used_memory: u64,
    /// Where the stream redis-server replicas follow stands (ID, byte offset), for a file a
    /// restart loads: its replicas then continue from there; on a replica of a Redis primary,
    /// where that primary's stream stands as applied here, and its database, so that the
    /// restarted replica continues from its primary.
    repl_position: Option<(String, u64)>,
    repl_stream_db: Option<u32>,
    /// This server's lineage and logical offset (`goblin-replid`, `goblin-offset`); None
    /// inside a batch, whose mutations the dataset holds before the offset counts them.
    lineage: Option<(String, u64)>,
    /// This server follows a goblin-core primary in step (`goblin-in-step`).
    lineage_in_step: bool,
}

impl RdbParts {
    /// `goblin_types`: the file goes to a goblin-core replica (vector sets in goblin's exact
    /// form); otherwise to Redis's tools and servers (Redis's module form).
    fn file(&self, functions_only: bool, goblin_types: bool) -> engine::rdb::RdbFile<'_> {
        engine::rdb::RdbFile {
            redis_version: crate::commands::info::REDIS_VERSION,
            created_unix_secs: self.created_unix_secs,
            used_memory: self.used_memory,
            functions: &self.functions,
            functions_only,
            goblin_types,
            repl_stream_db: self.repl_stream_db,
            repl_position: self.repl_position.clone(),
            lineage: self.lineage.clone(),
            lineage_in_step: self.lineage_in_step,
        }
    }
}

/// DEBUG RELOAD's options (see `Server::debug_reload_rdb`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ReloadOptions {
    pub nosave: bool,
    pub noflush: bool,
    pub merge: bool,
}

/// Where a save goes (see `Server::save_target`).
enum SaveTarget {
    Snapshot(PathBuf),
    Rdb(PathBuf),
}

/// The save rules, state and counters INFO persistence reports.
pub struct Snapshots {
    pub path: Option<PathBuf>,
    /// `dbfilename`: where SAVE and BGSAVE write a Redis RDB file, in the working directory,
    /// on a server without `--load` (see [`SaveTarget`]).
    pub rdb_filename: String,
    /// `--save` rules: save after `secs` seconds if at least `changes` mutations happened
    /// (CONFIG SET save replaces them).
    pub rules: Vec<(u64, u64)>,
    children: Vec<Child>,
    /// BGSAVE SCHEDULE asked for a save while a child ran.
    scheduled: bool,
    /// Unix seconds of the last successful save (startup time until one happens, as Redis).
    pub last_save_unix: i64,
    /// Logical offset the last successful save (or the load) holds: changes since = offset now
    /// minus this.
    pub(crate) last_save_offset: u64,
    last_bgsave_ok: bool,
    /// The last save failed only because the journal could not settle (Kafka away): INFO
    /// reports the failure, but it is no disk error, so writes are not stopped for it (they
    /// wait for Kafka through its own backpressure instead).
    held_by_journal: bool,
    last_bgsave_try: Option<Instant>,
    last_bgsave_secs: i64,
    last_cow_bytes: u64,
    saves: u64,
    pub loaded_keys: u64,
    /// Keys the startup load left out, past their deadline (INFO `rdb_last_load_keys_expired`).
    pub loaded_expired: u64,
    /// Without `--load`: the RDB file at `rdb_filename` is the restart point (no Kafka journal,
    /// no firehose upstream; `Config::rdb_restart_point`), so the save rules, the save at
    /// shutdown and FLUSHALL's save write it, as redis-server writes dump.rdb.
    pub rdb_restart_point: bool,
    /// Connections whose SYNC or PSYNC waits for `repl-diskless-sync-delay` (slot, client ID),
    /// oldest first, and when the cron last sent them a newline to keep their link alive.
    sync_waiting: Vec<(usize, u64)>,
    sync_keepalive: Option<Instant>,
    /// The readers of each running `ChildKind::Sync` (slot, client ID, whether the
    /// connection ends with the file), and the next group's number.
    sync_groups: std::collections::HashMap<u64, Vec<(usize, u64, bool)>>,
    next_sync_group: u64,
}

/// A full synchronization that will not happen: the waiting connection gets `why` instead.
fn fail_sync(c: &mut Conn, why: String) {
    c.sync_wait = None;
    reply::error(&mut c.out, why.as_bytes());
}

/// A SYNC or PSYNC waiting for its full synchronization (`Conn::sync_wait`).
#[derive(Debug, Clone, Copy)]
pub struct SyncWait {
    /// PSYNC: the file follows a `+FULLRESYNC` line.
    pub psync: bool,
    pub since: Instant,
}

impl Snapshots {
    pub fn new(
        path: Option<PathBuf>,
        rules: Vec<(u64, u64)>,
        loaded_offset: u64,
        loaded_keys: u64,
    ) -> Snapshots {
        Snapshots {
            path,
            rdb_filename: "dump.rdb".to_string(),
            rules,
            children: Vec::new(),
            scheduled: false,
            last_save_unix: now_ms() / 1000,
            last_save_offset: loaded_offset,
            last_bgsave_ok: true,
            held_by_journal: false,
            last_bgsave_try: None,
            last_bgsave_secs: -1,
            last_cow_bytes: 0,
            saves: 0,
            loaded_keys,
            loaded_expired: 0,
            rdb_restart_point: false,
            sync_waiting: Vec::new(),
            sync_keepalive: None,
            sync_groups: Default::default(),
            next_sync_group: 0,
        }
    }

    /// Whether saves keep what a restart loads: the `--load` snapshot, or the RDB file of a
    /// server whose restart point it is. Only then do the save rules, the save at shutdown and
    /// FLUSHALL's save run, and a failed save stop writes.
    pub fn restart_point(&self) -> bool {
        self.path.is_some() || self.rdb_restart_point
    }

    fn bgsave_child(&self) -> Option<&Child> {
        self.children.iter().find(|c| matches!(c.kind, ChildKind::Bgsave { .. }))
    }

    /// True while any forked child runs.
    pub fn child_running(&self) -> bool {
        !self.children.is_empty()
    }

    /// True while a forked child reads the dataset's fork-time image.
    fn image_read(&self) -> bool {
        self.children.iter().any(|c| c.kind.reads_image())
    }
}

/// Parses `--save` rules: `"3600 1 300 100"` (pairs of seconds and changes); `""` for none.
pub fn parse_save_rules(s: &str) -> Result<Vec<(u64, u64)>, String> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    if !parts.len().is_multiple_of(2) {
        return Err(format!("invalid --save rules '{s}': expected pairs of <seconds> <changes>"));
    }
    parts
        .chunks(2)
        .map(|p| match (p[0].parse::<u64>(), p[1].parse::<u64>()) {
            (Ok(secs), Ok(changes)) => Ok((secs, changes)),
            _ => Err(format!(
                "invalid --save rules '{s}': '{} {}' is not two non-negative integers",
                p[0], p[1]
            )),
        })
        .collect()
}

/// Startup step 2 with `--load`: the engine from the snapshot at `path`, with its lineage and
/// offset. A missing file starts empty with a warning (as Redis with a missing dump); a damaged
/// or unreadable one is an error naming the file and, for damage, the block and byte offset.
/// Returns the engine, the number of keys loaded, and the snapshot's metadata (None when
/// there was no file).
pub fn load_at_startup(path: &Path, databases: u32) -> Result<(Engine, u64, Option<snapshot::Meta>), String> {
    remove_stale_temp_files(path);
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            warn!("snapshot {} does not exist: starting with an empty dataset", path.display());
            let mut engine = Engine::new(Replication::new_lineage());
            engine.resize_databases(databases)?;
            return Ok((engine, 0, None));
        }
        Err(e) => return Err(format!("cannot open snapshot {}: {e}", path.display())),
    };
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let started = Instant::now();
    info!("loading snapshot {} ({size} bytes)", path.display());
    let (engine, keys, meta) = load_file(file, path, size, databases)?;
    let secs = started.elapsed().as_secs_f64();
    info!(
        "loaded {keys} keys from {} in {secs:.3} s ({:.0} keys/s); lineage {} at offset {}",
        path.display(),
        keys as f64 / secs.max(1e-9),
        engine.repl.replid,
        engine.repl.offset
    );
    Ok((engine, keys, Some(meta)))
}

/// Reads a whole snapshot into a new engine, logging progress (keys and bytes per second) at
/// most once a second.
fn load_file(
    file: std::fs::File,
    path: &Path,
    size: u64,
    databases: u32,
) -> Result<(Engine, u64, snapshot::Meta), String> {
    let started = Instant::now();
    let mut last_log = Instant::now();
    let mut progress = |p: &snapshot::Progress| {
        if last_log.elapsed() >= PROGRESS_EVERY {
            last_log = Instant::now();
            let secs = started.elapsed().as_secs_f64().max(1e-9);
            info!(
                "loading {}: {} keys, {} of {size} bytes ({:.0} keys/s, {:.1} MB/s)",
                path.display(),
                p.keys,
                p.bytes,
                p.keys as f64 / secs,
                p.bytes as f64 / secs / 1e6
            );
        }
    };
    let reader = io::BufReader::with_capacity(1 << 20, file);
    let (dbs, meta, summary) = snapshot::read_dbs(reader, &mut progress)
        .map_err(|e| format!("snapshot {} is unusable: {e}", path.display()))?;
    let replid = ReplId::parse(&meta.replid).ok_or_else(|| {
        format!("snapshot {} names lineage '{}', which is not 40 hex digits", path.display(), meta.replid)
    })?;
    // The lineage this one continues, if the file names one (a header addition).
    let previous = match &meta.previous {
        None => None,
        Some((id, at)) => match ReplId::parse(id) {
            Some(id) if *at <= meta.logical_offset => Some((id, *at)),
            _ => {
                return Err(format!(
                    "snapshot {} names predecessor lineage '{id}' at offset {at}: not 40 hex digits, or past the \
                     snapshot's own offset {}",
                    path.display(),
                    meta.logical_offset
                ))
            }
        },
    };
    let mut engine = Engine::new(Replication { replid, offset: meta.logical_offset, previous });
    engine.resize_databases(databases)?;
    engine.replace_databases(dbs).map_err(|e| format!("snapshot {} is not loadable: {e}", path.display()))?;
    engine.functions.replace_all(meta.functions.clone()).map_err(|e| {
        format!("snapshot {} holds a function library without valid metadata: {e}", path.display())
    })?;
    // Loaded keys count as accessed now (Redis's rule for keys an RDB gives no idle time).
    engine.stamp_access(now_ms());
    Ok((engine, summary.keys, meta))
}

/// A crashed save leaves its temporary file behind (never the target): remove such leftovers
/// next to `path` at startup.
/// Where a replica of a Redis primary writes the RDB file of a full synchronization as it
/// arrives (`repl-diskless-load disabled`), beside `target` (the RDB file's path) and named as
/// a save's temporary file, so that one an interrupted sync leaves behind is removed at the
/// next startup as those are.
pub(crate) fn sync_spool_path(target: &Path) -> PathBuf {
    let name = target.file_name().map_or_else(|| "dump.rdb".into(), |n| n.to_string_lossy().into_owned());
    let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    dir.join(format!(".{name}.tmp-{}-sync", std::process::id()))
}

fn remove_stale_temp_files(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        if snapshot::is_temp_file_of(&e.file_name(), name) {
            match std::fs::remove_file(e.path()) {
                Ok(()) => info!("removed {}, left by an interrupted save", e.path().display()),
                Err(err) => warn!("could not remove {}: {err}", e.path().display()),
            }
        }
    }
}

/// Bytes of this process's memory that are no longer shared with its parent: in a forked
/// child, the copy-on-write cost (Private_Dirty, as Redis measures it).
fn private_dirty_bytes() -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/self/smaps_rollup") else { return 0 };
    text.lines()
        .filter(|l| l.starts_with("Private_Dirty:"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum::<u64>()
        * 1024
}

/// Counts bytes written (the size pass of DUMPWORLD).
struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0 += b.len() as u64;
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Reads a whole RDB file (Redis's format, any version this server knows) into one keyspace
/// per database that holds keys, in number order, logging progress every second as `what`:
/// `import-rdb`, and a replica's full synchronization from a redis-server
/// (`replication::redis_primary`). Keys whose deadline is before `expired_before` (unix ms; now,
/// except for DEBUG RELOAD, which keeps them all) are left out.
pub(crate) fn rdb_keyspaces(
    bytes: &[u8],
    databases: u32,
    what: &str,
    expired_before: i64,
) -> Result<(Vec<(u32, store::Keyspace)>, engine::rdb::LoadedRdb), String> {
    let len = bytes.len();
    let started = Instant::now();
    let mut last = Instant::now();
    let mut dbs: Vec<(u32, store::Keyspace)> = Vec::new();
    let loaded = std::cell::Cell::new(0u64);
    // The file's key count for the database about to load (RESIZEDB), bounded by what the
    // file could hold (a key takes at least 3 bytes): its table is presized, not regrown.
    let hint = std::cell::Cell::new(None::<(u32, usize)>);
    let found = engine::rdb::load_rdb_file(
        bytes,
        expired_before,
        databases,
        &mut |db, key, value, deadline| {
            if dbs.last().is_none_or(|(d, _)| *d != db) {
                let mut ks = store::Keyspace::new();
                if let Some((_, n)) = hint.get().filter(|(d, _)| *d == db) {
                    ks.reserve_empty(n);
                }
                ks.set_bulk_load(true);
                dbs.push((db, ks));
            }
            let ks = &mut dbs.last_mut().expect("just pushed").1;
            loaded.set(loaded.get() + 1);
            ks.put(key, value, deadline)
        },
        &mut |db, n| hint.set(Some((db, (n as usize).min(len / 3)))),
        &mut |pos| {
            if last.elapsed() >= Duration::from_secs(1) {
                last = Instant::now();
                let (secs, loaded) = (started.elapsed().as_secs_f64(), loaded.get());
                info!(
                    "{what}: {loaded} keys, {:.1}% of {} bytes, {:.0} keys/s",
                    pos as f64 * 100.0 / len as f64,
                    len,
                    loaded as f64 / secs
                );
            }
        },
    )?;
    if found.empty_skipped > 0 {
        for name in &found.empty_skipped_names {
            warn!("{what}: skipping empty key: {}", engine::rdb::shown_key(name));
        }
        warn!(
            "{what}: empty keys skipped: {} (collections with no element, which old Redis versions saved)",
            found.empty_skipped
        );
    }
    // Redis writes each database once, in number order; a file that repeats one is refused.
    dbs.sort_by_key(|(db, _)| *db);
    if let Some(w) = dbs.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(format!("database {} appears twice", w[0].0));
    }
    for (_, ks) in &mut dbs {
        ks.set_bulk_load(false);
    }
    Ok((dbs, found))
}

/// The offset a new lineage starts at when its first state is a file (an imported RDB file, a
/// Redis primary's full synchronization): 1 when the file holds anything. Offset 0 of a lineage
/// is the empty dataset, which an empty firehose replica adopts without a transfer; a
/// dataset at offset 0 would let one join holding nothing, and diverge silently.
pub(crate) fn lineage_start(dbs: &[(u32, store::Keyspace)], functions: &engine::functions::Functions) -> u64 {
    let empty = dbs.iter().all(|(_, ks)| ks.is_empty()) && functions.iter().next().is_none();
    u64::from(!empty)
}

/// A whole file mapped read-only (private), unmapped on drop: an RDB file is read from its
/// mapping rather than copied into memory next to the dataset built from it.
pub(crate) struct MappedFile {
    ptr: *mut libc::c_void,
    len: usize,
}

impl MappedFile {
    pub(crate) fn open(path: &Path) -> Result<MappedFile, String> {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let len = file.metadata().map_err(|e| format!("{}: {e}", path.display()))?.len() as usize;
        if len == 0 {
            return Ok(MappedFile { ptr: std::ptr::null_mut(), len: 0 });
        }
        // SAFETY: a private read-only mapping of a file we opened, unmapped on drop. The file
        // must not be truncated meanwhile (as for any reader).
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0)
        };
        if ptr == libc::MAP_FAILED {
            return Err(format!("cannot map {}: {}", path.display(), io::Error::last_os_error()));
        }
        Ok(MappedFile { ptr, len })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the mapping covers `len` bytes and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: unmapping what `open` mapped; no slice of it outlives `self`.
            unsafe { libc::munmap(self.ptr, self.len) };
        }
    }
}

/// What startup read from the RDB file at `dbfilename` (see [`load_rdb_at_startup`]).
pub struct LoadedRdbFile {
    pub engine: Engine,
    pub keys: u64,
    pub expired: u64,
    /// The file's `repl-id` / `repl-offset` and the keys left out as expired: what
    /// `Server::redis_replicas_resume` needs for the replicas to continue.
    pub stream: Option<StreamResume>,
}

/// Where the stream redis-server replicas follow stood when the loaded file was written, and
/// the (database, key) of each key the load left out as expired (those replicas hold them).
pub struct StreamResume {
    pub replid: String,
    pub offset: u64,
    pub expired: Vec<(u32, Vec<u8>)>,
    /// `repl-stream-db`: the database the stream was in (a replica continuing its primary's
    /// stream needs it; the stream selects again only when it changes database).
    pub db: u32,
    /// A replica's file written while it numbered its goblin-core primary's writes as the
    /// primary does (`goblin-in-step`): the load resumed the file's lineage (the primary's),
    /// and continuing the stream keeps numbering them so.
    pub in_step: bool,
}

/// Startup without `--load`, a Kafka journal or a firehose upstream: the RDB file at
/// `dbfilename` in the working directory is the server's restart point, as redis-server's
/// dump.rdb. None when there is no such file (the server starts empty); Err when it cannot be
/// read or is not a whole RDB file (empty, truncated, a bad checksum, an unknown type): the
/// server must not start without the data it was asked to keep, nor overwrite the file with
/// less at its next save. The dataset goes on from the file's goblin lineage as a successor, or
/// starts a new lineage ([`lineage_start`]) when it has none or keys were left out; a replica's
/// file written in step with its goblin-core primary resumes that lineage itself. Keys past their
/// deadline are left out and counted, except on a replica (`keep_expired`), which keeps them
/// until its primary deletes them, as a redis-server replica does: the primary's stream may
/// still write to a key it has not expired yet.
pub fn load_rdb_at_startup(
    path: &Path,
    databases: u32,
    keep_expired: bool,
) -> Result<Option<LoadedRdbFile>, String> {
    remove_stale_temp_files(path);
    if !path.exists() {
        return Ok(None);
    }
    let map = MappedFile::open(path)?;
    let len = map.bytes().len();
    if len == 0 {
        return Err(format!(
            "{} is empty, not an RDB file: move it away to start with an empty dataset",
            path.display()
        ));
    }
    let started = Instant::now();
    info!("loading RDB file {} ({len} bytes)", path.display());
    let expired_before = if keep_expired { i64::MIN } else { now_ms() };
    let (dbs, found) =
        rdb_keyspaces(map.bytes(), databases, &format!("loading {}", path.display()), expired_before)
            .map_err(|e| format!("RDB file {} is unusable: {e}", path.display()))?;
    drop(map);
    let mut functions = engine::functions::Functions::default();
    functions
        .replace_all(found.functions)
        .map_err(|e| format!("RDB file {}: a function library: {e}", path.display()))?;
    // The file's goblin lineage goes on as a successor (main.rs `recover` says why), so that
    // firehose replicas at exactly its offset follow; not when keys were left out as expired
    // (the dataset is no longer the lineage's state at that offset), nor on a replica (its
    // history comes with its primary's stream). A replica's own file written in step with its
    // goblin-core primary resumes that primary's lineage itself: continuing the primary's
    // stream from the file's position replays the same commands, numbered as before and as on
    // the primary (a full synchronization or a new stream ID replaces or succeeds it:
    // `redis_primary.rs`).
    let resumes_in_step = keep_expired && found.lineage_in_step && found.repl_position.is_some();
    let continued = match &found.lineage {
        Some((id, offset)) if resumes_in_step => ReplId::parse(id).map(|id| Replication::at(id, *offset)),
        Some((id, offset)) if !keep_expired && found.expired == 0 => {
            ReplId::parse(id).map(|id| Replication::at(id, *offset).successor())
        }
        Some((id, offset)) if !keep_expired => {
            info!(
                "{} keys past their deadline were left out: the dataset is not lineage {id} at offset {offset} \
                 any more, so a new lineage starts (firehose replicas need a new snapshot)",
                found.expired
            );
            None
        }
        _ => None,
    };
    let in_step = resumes_in_step && continued.is_some();
    let repl =
        continued.unwrap_or_else(|| Replication::at(ReplId::random(), lineage_start(&dbs, &functions)));
    if let Some((id, at)) = repl.previous {
        info!("lineage {} continues the file's lineage {id} from its offset {at}", repl.replid);
    }
    let mut engine = Engine::new(repl);
    engine.resize_databases(databases)?;
    engine.replace_databases(dbs).map_err(|e| format!("RDB file {} is not loadable: {e}", path.display()))?;
    engine.functions = functions;
    // Loaded keys count as accessed now (Redis's rule for keys an RDB gives no idle time).
    engine.stamp_access(now_ms());
    let secs = started.elapsed().as_secs_f64();
    info!(
        "DB loaded from disk: {} keys from {} (RDB version {}, written by Redis {}) in {secs:.3} s ({:.0} keys/s), \
         {} past their deadline left out; lineage {} at offset {}",
        found.keys,
        path.display(),
        found.version,
        found.redis_version.as_deref().unwrap_or("?"),
        found.keys as f64 / secs.max(1e-9),
        found.expired,
        engine.repl.replid,
        engine.repl.offset
    );
    let db = found.repl_stream_db.unwrap_or(0);
    let stream = found.repl_position.map(|(replid, offset)| StreamResume {
        replid,
        offset,
        expired: found.expired_keys,
        db,
        in_step,
    });
    Ok(Some(LoadedRdbFile { engine, keys: found.keys, expired: found.expired, stream }))
}

/// `goblin-core import-rdb RDB -o OUTPUT`: reads a Redis RDB file (mapped, not copied) into a
/// keyspace, logging progress every second, and installs it as a native snapshot of a new
/// lineage at offset 1 (0 when the file is empty: see [`lineage_start`]). A server started with `--load OUTPUT` then holds what redis-server
/// held; with `--kafka` its recovery replays the topic from the snapshot's creation time (the
/// file has no cursors), so a fresh topic is the place to start journaling it.
pub fn import_rdb(input: &Path, output: &Path, databases: u32) -> Result<(), String> {
    let started = Instant::now();
    let map = MappedFile::open(input)?;
    if map.bytes().is_empty() {
        return Err(format!("{} is empty", input.display()));
    }
    let result = rdb_keyspaces(map.bytes(), databases, "import-rdb", now_ms());
    drop(map);
    let (dbs, found) = result?;
    let refs: Vec<(u32, &store::Keyspace)> = dbs.iter().map(|(db, ks)| (*db, ks)).collect();
    let mut functions = engine::functions::Functions::default();
    functions.replace_all(found.functions).map_err(|e| format!("a function library in the file: {e}"))?;
    let meta = snapshot::Meta {
        server_version: env!("CARGO_PKG_VERSION").to_string(),
        created_unix_ms: now_ms(),
        replid: ReplId::random().to_string(),
        logical_offset: lineage_start(&dbs, &functions),
        kafka_acked_offset: -1,
        kafka_consumer_position: -1,
        functions: functions.iter().map(|(_, code)| code.to_vec()).collect(),
        unconfirmed: Vec::new(),
        previous: None,
    };
    let summary = snapshot::save_atomic(output, |w| snapshot::write_dbs(w, &refs, &meta, &mut |_| {}))
        .map_err(|e| format!("cannot write {}: {e}", output.display()))?;
    info!(
        "import-rdb: {} (RDB version {}, written by Redis {}) -> {}: {} keys ({} past their deadline left out), {} function libraries, in {:.1} s",
        input.display(),
        found.version,
        found.redis_version.as_deref().unwrap_or("?"),
        output.display(),
        summary.keys,
        found.expired,
        meta.functions.len(),
        started.elapsed().as_secs_f64()
    );
    // The process ends here: freeing every key one by one first would only delay it.
    drop(refs);
    std::mem::forget(dbs);
    Ok(())
}

/// Writes to a non-blocking socket as if it blocked (a forked child's reply, the Lua
/// debugger's output), waiting in poll(2) while it is full and giving up after `.1` without
/// progress.
pub(crate) struct SocketWriter(pub RawFd, pub Duration);

impl Write for SocketWriter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        loop {
            // SAFETY: writes from our buffer to a descriptor this process holds.
            let n = unsafe { libc::write(self.0, b.as_ptr().cast(), b.len()) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => {
                    let mut p = libc::pollfd { fd: self.0, events: libc::POLLOUT, revents: 0 };
                    // SAFETY: one valid pollfd.
                    let r = unsafe { libc::poll(&mut p, 1, self.1.as_millis() as i32) };
                    if r == 0 {
                        return Err(io::Error::new(io::ErrorKind::TimedOut, "the client stopped reading"));
                    }
                }
                _ => return Err(e),
            }
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A forked child's writer to a replica or a tool fetching a file: a [`SocketWriter`] that
/// counts what it sent in `CHILD_SENT`.
struct ReplSocket(SocketWriter);

impl Write for ReplSocket {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let n = self.0.write(b)?;
        CHILD_SENT.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A forked child's writer to every reader of one file (`ChildKind::Sync`): each write goes
/// whole to each reader still served, in turn. A reader that fails (it stopped reading for
/// DUMPWORLD_STALL, or left) is reported on the status pipe (`drop <client id> <why>`) and
/// skipped from then on; the write fails only when no reader is left.
struct FanOut {
    /// (socket, client ID, still served)
    readers: Vec<(RawFd, u64, bool)>,
}

impl FanOut {
    fn send_to(&mut self, i: usize, b: &[u8]) {
        let (fd, id, alive) = &mut self.readers[i];
        if !*alive {
            return;
        }
        if let Err(e) = ReplSocket(SocketWriter(*fd, DUMPWORLD_STALL)).write_all(b) {
            *alive = false;
            let line = format!("drop {id} {e}\n");
            // SAFETY: the descriptor is this child's status pipe, open until it exits; a line
            // this short is written whole (PIPE_BUF).
            unsafe {
                libc::write(
                    CHILD_STATUS_FD.load(std::sync::atomic::Ordering::Relaxed),
                    line.as_ptr().cast(),
                    line.len(),
                )
            };
        }
    }
}

impl Write for FanOut {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        for i in 0..self.readers.len() {
            self.send_to(i, b);
        }
        if self.readers.iter().any(|r| r.2) {
            Ok(b.len())
        } else {
            Err(io::Error::other("every reader stopped reading or left"))
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Server {
    /// The replication metadata a snapshot of the current dataset carries.
    fn snapshot_meta(&self) -> snapshot::Meta {
        snapshot::Meta {
            server_version: env!("CARGO_PKG_VERSION").to_string(),
            created_unix_ms: now_ms(),
            replid: self.engine.repl.replid.to_string(),
            logical_offset: self.engine.repl.offset,
            kafka_acked_offset: self.journal_acked_broker_offset(),
            // Recovery seeks to the lower of this and the acknowledged offset; other producers'
            // records below it are in this snapshot (DESIGN.md decision 3).
            kafka_consumer_position: self.journal_consumer_position(),
            // Function libraries are state: a restart from this file has them.
            functions: self.engine.functions.iter().map(|(_, code)| code.to_vec()).collect(),
            unconfirmed: self.unconfirmed_for_snapshot(),
            previous: self.engine.repl.previous.map(|(id, at)| (id.to_string(), at)),
        }
    }

    /// A replica's mutations that Kafka had not confirmed: the replica restarted from this
    /// snapshot checks them against the topic (`replication::unconfirmed`), so that a crash of
    /// its `queued` upstream that lost them is found after the restart too. They share the
    /// header block with the function libraries; in the unlikely case that both do not fit,
    /// the newest are kept (the oldest are the likeliest confirmed by the next frame).
    fn unconfirmed_for_snapshot(&self) -> Vec<(u64, u64)> {
        let Some(r) = self.replica.as_ref().filter(|_| self.kafka_configured()) else { return Vec::new() };
        let libraries: usize = self.engine.functions.iter().map(|(_, code)| code.len() + 10).sum();
        // 18 bytes per entry at most (a 10-byte gap and the hash); 64 KiB for the rest.
        let room = snapshot::MAX_BLOCK.saturating_sub(libraries + (64 << 10)) / 18;
        let n = r.unconfirmed.len();
        if n > room {
            warn!(
                "the snapshot keeps the newest {room} of {n} mutations Kafka has not confirmed (the header \
                 block is full): a restart from it cannot check the others"
            );
        }
        r.unconfirmed.entries().skip(n.saturating_sub(room)).collect()
    }

    /// Whether writes are refused for a failed save (Redis's `stop-writes-on-bgsave-error`):
    /// the setting is on, save rules are in force (they act on a restart point only: `Snapshots::restart_point`) and
    /// the last save failed writing (not for waiting on Kafka: see `held_by_journal`).
    pub(crate) fn writes_stopped_by_failed_save(&self) -> bool {
        self.cfg.stop_writes_on_bgsave_error
            && self.snapshots.restart_point()
            && !self.snapshots.rules.is_empty()
            && !self.snapshots.last_bgsave_ok
            && !self.snapshots.held_by_journal
    }

    /// Mutations since the last successful save.
    pub(crate) fn changes_since_save(&self) -> u64 {
        self.engine.repl.offset.saturating_sub(self.snapshots.last_save_offset)
    }

    /// Where SAVE, BGSAVE and SHUTDOWN SAVE write: the native snapshot at `--load PATH`, or,
    /// on a server started without one, a Redis RDB file at `dbfilename` in the working
    /// directory, as redis-server writes it. It is the restart point only where
    /// `Snapshots::restart_point` says so (no `--kafka`, no firehose upstream); beside a
    /// journal it is an export and never bounds a replay.
    fn save_target(&self) -> SaveTarget {
        match &self.snapshots.path {
            Some(p) => SaveTarget::Snapshot(p.clone()),
            None => SaveTarget::Rdb(PathBuf::from(&self.snapshots.rdb_filename)),
        }
    }

    /// Why the dataset cannot be an RDB file (array keys), if it cannot.
    fn rdb_blocker(&self) -> Option<String> {
        self.engine.database_refs().iter().find_map(|(_, ks)| engine::rdb::rdb_file_blocker(ks))
    }

    /// What an RDB file of the dataset needs besides the keys, taken now (before a fork).
    fn rdb_parts(&self) -> RdbParts {
        let position = self.rdb_repl_position();
        RdbParts {
            functions: self.engine.functions.iter().map(|(_, code)| code.to_vec()).collect(),
            created_unix_secs: now_ms() / 1000,
            used_memory: crate::commands::info::allocated_bytes(),
            repl_stream_db: position.as_ref().and_then(|(_, _, db)| *db),
            repl_position: position.map(|(id, offset, _)| (id, offset)),
            lineage: self
                .engine
                .pending()
                .is_empty()
                .then(|| (self.engine.repl.replid.to_string(), self.engine.repl.offset)),
            lineage_in_step: self.redis_primary.is_some() && self.redis_primary_in_step(),
        }
    }

    /// What a saved file records of the replication stream (`repl-id`, `repl-offset`,
    /// `repl-stream-db`): following a Redis primary, that primary's stream as applied here
    /// (none inside one of its transactions: the data holds part of it); otherwise the stream
    /// this server's own redis-server replicas follow, if there is one.
    fn rdb_repl_position(&self) -> Option<(String, u64, Option<u32>)> {
        match &self.redis_primary {
            Some(p) if p.in_transaction() => None,
            Some(_) => {
                let (id, offset) = self.redis_primary_identity()?;
                Some((id.to_string(), offset, self.redis_primary_stream_db()))
            }
            None => self.redis_replicas.position().map(|(id, offset)| (id, offset, None)),
        }
    }

    /// SAVE and BGSAVE of a dataset that cannot be an RDB file Redis loads (array keys). Where
    /// the file is this server's restart point it is written anyway, the arrays in goblin-core's
    /// own type (which redis-server refuses to load), and the log says so: a restart must not
    /// lose them. Where it is an export only (a Kafka journal or an upstream is the restart
    /// point), the save is refused, saying why.
    fn rdb_save_blocker(&self) -> Result<(), String> {
        match self.rdb_blocker() {
            Some(_) if self.snapshots.rdb_restart_point => {
                warn!(
                    "{}: the dataset holds array keys, written in goblin-core's own type: this server \
                     loads the file at restart, redis-server cannot",
                    self.snapshots.rdb_filename
                );
                Ok(())
            }
            Some(why) => Err(format!(
                "ERR {why} (a server started with --load PATH saves native snapshots, which carry every type)"
            )),
            None => Ok(()),
        }
    }

    /// SAVE without `--load`: the RDB file, written in the foreground.
    fn save_rdb_foreground(&mut self, path: &std::path::Path) -> Result<(), String> {
        self.rdb_save_blocker()?;
        let parts = self.rdb_parts();
        let started = Instant::now();
        let dbs = self.engine.database_refs();
        match snapshot::save_atomic(path, |w| engine::rdb::write_rdb_file(w, &dbs, &parts.file(false, false)))
        {
            Ok(bytes) => {
                let keys = self.engine.total_keys();
                info!(
                    "DB saved on disk: {keys} keys, {bytes} bytes (RDB, {}) in {:.3} s",
                    path.display(),
                    started.elapsed().as_secs_f64()
                );
                self.snapshots.last_save_unix = now_ms() / 1000;
                self.snapshots.last_save_offset = self.engine.repl.offset;
                self.snapshots.saves += 1;
                // A save that worked clears a failed one's MISCONF, as Redis's SAVE does.
                self.snapshots.last_bgsave_ok = true;
                self.snapshots.held_by_journal = false;
                Ok(())
            }
            Err(e) => {
                error!("SAVE to {} failed: {e}", path.display());
                self.snapshots.last_bgsave_ok = false;
                self.snapshots.held_by_journal = false;
                Err(format!("ERR RDB save to {} failed: {e}", path.display()))
            }
        }
    }

    /// SAVE: writes the snapshot on the server thread (every client waits, as in Redis).
    pub(crate) fn save_foreground(&mut self) -> Result<(), String> {
        let path = match self.save_target() {
            SaveTarget::Snapshot(p) => p,
            SaveTarget::Rdb(p) => return self.save_rdb_foreground(&p),
        };
        self.settle_journal(SETTLE_BOUND).map_err(|e| {
            error!("SAVE to {} refused: {e}", path.display());
            self.snapshots.last_bgsave_ok = false;
            self.snapshots.held_by_journal = true;
            format!("ERR {e}")
        })?;
        let meta = self.snapshot_meta();
        let started = Instant::now();
        let dbs = self.engine.database_refs();
        let delay = self.cfg.snapshot_block_delay_us;
        let result = snapshot::save_atomic(&path, |w| {
            snapshot::write_dbs(w, &dbs, &meta, &mut |_| block_delay(delay))
        });
        match result {
            Ok(summary) => {
                info!(
                    "DB saved on disk: {} keys, {} bytes in {:.3} s",
                    summary.keys,
                    summary.bytes,
                    started.elapsed().as_secs_f64()
                );
                self.snapshots.last_save_unix = now_ms() / 1000;
                self.snapshots.last_save_offset = meta.logical_offset;
                self.snapshots.saves += 1;
                self.snapshots.last_bgsave_ok = true;
                self.snapshots.held_by_journal = false;
                Ok(())
            }
            Err(e) => {
                error!("SAVE to {} failed: {e}", path.display());
                self.snapshots.last_bgsave_ok = false;
                self.snapshots.held_by_journal = false;
                Err(format!("ERR snapshot save to {} failed: {e}", path.display()))
            }
        }
    }

    /// Forks a child that runs `job` on the frozen dataset and reports on a status pipe.
    /// `job` returns a short detail for the log, or an error message.
    fn fork_child(
        &mut self,
        kind: ChildKind,
        job: impl FnOnce() -> Result<String, String>,
    ) -> io::Result<libc::pid_t> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 fills the two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let listeners = self.listener_fds();
        let child_oom_score = self.oom.child_score();
        // SAFETY: the child has only this thread; it writes files and sockets, then _exits.
        // The other threads (the journal's, librdkafka's, crash.rs's stack reporter, a
        // replication helper) leave nothing it needs behind a lock they held at the fork:
        // jemalloc, the only shared state the child uses, takes its locks around fork().
        let forked_at = Instant::now();
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = io::Error::last_os_error();
            // SAFETY: closing the pipe we just made.
            unsafe {
                libc::close(fds[0]);
                libc::close(fds[1]);
            }
            return Err(e);
        }
        if pid == 0 {
            // The child: run the job, report, exit without unwinding into the parent's code.
            // SAFETY: closing our copies of the read end and of the listeners (an orphaned
            // child must not keep the port from a restarted server).
            unsafe {
                libc::close(fds[0]);
                for fd in listeners {
                    libc::close(fd);
                }
            }
            // oom-score-adj: the child is the first the kernel should kill (best effort, as
            // Redis: a refusal leaves the inherited score).
            if let Some(score) = child_oom_score {
                let _ = crate::oom_score::write(score);
            }
            CHILD_STATUS_FD.store(fds[1], std::sync::atomic::Ordering::Relaxed);
            store::limits::set_save_progress_hook(report_progress);
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))
                .unwrap_or_else(|_| Err("the child panicked".to_string()));
            let cow = private_dirty_bytes();
            let sent = CHILD_SENT.load(std::sync::atomic::Ordering::Relaxed);
            let (code, line) = match result {
                Ok(detail) => (0, format!("ok {cow} {sent} {detail}\n")),
                Err(e) => (1, format!("err {cow} {sent} {e}\n")),
            };
            // SAFETY: fds[1] is our status pipe; _exit skips every destructor and handler.
            unsafe {
                libc::write(fds[1], line.as_ptr().cast(), line.len());
                libc::_exit(code);
            }
        }
        // The parent: the fork's own cost to the server thread (copying the page tables).
        let fork_usec = forked_at.elapsed().as_micros() as u64;
        self.stats.total_forks += 1;
        self.stats.latest_fork_usec = fork_usec;
        self.introspection.latency_sample("fork", fork_usec / 1000);
        // SAFETY: the parent keeps the read end only.
        unsafe { libc::close(fds[1]) };
        // SAFETY: fds[0] is a valid descriptor we own from here on.
        let status = unsafe { std::fs::File::from_raw_fd(fds[0]) };
        // The parent reads progress lines as they come, from the cron, without waiting.
        // SAFETY: fcntl on the descriptor just wrapped.
        unsafe {
            let flags = libc::fcntl(fds[0], libc::F_GETFL);
            libc::fcntl(fds[0], libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        let reads_image = kind.reads_image();
        self.snapshots.children.push(Child {
            pid,
            kind,
            started: Instant::now(),
            status,
            unread: Vec::new(),
            total_keys: self.engine.total_keys() as u64,
            progress: None,
            cow_peak: 0,
            sent: 0,
            sent_counted: 0,
            dropped: Vec::new(),
        });
        if reads_image {
            self.engine.set_avoid_resize(true);
        }
        Ok(pid)
    }

    /// Forks the child of a Lua debugging session with client `id` (`scripting::debugger`),
    /// which runs `job` on its own copy of everything and exits.
    pub(crate) fn fork_lua_debugger(
        &mut self,
        id: u64,
        job: impl FnOnce() -> Result<String, String>,
    ) -> io::Result<libc::pid_t> {
        self.fork_child(ChildKind::LuaDebug { id }, job)
    }

    /// BGSAVE: forks a child that writes the fork-time image. Err is the reply's error text.
    pub(crate) fn start_bgsave(&mut self) -> Result<(), String> {
        if self.snapshots.bgsave_child().is_some() {
            return Err("ERR Background save already in progress".to_string());
        }
        let path = match self.save_target() {
            SaveTarget::Snapshot(p) => p,
            SaveTarget::Rdb(p) => return self.start_rdb_bgsave(p),
        };
        self.snapshots.last_bgsave_try = Some(Instant::now());
        if let Err(e) = self.settle_journal(SETTLE_BOUND) {
            self.snapshots.last_bgsave_ok = false;
            self.snapshots.held_by_journal = true;
            error!("Can't save in background: {e}");
            return Err(format!("ERR Can't save in background: {e}"));
        }
        let meta = self.snapshot_meta();
        let offset = meta.logical_offset;
        let engine: *const Engine = &self.engine;
        let delay = self.cfg.snapshot_block_delay_us;
        let job = move || {
            // SAFETY: runs only in the child, where the engine is the parent's frozen image
            // and nothing else touches it.
            let dbs = unsafe { &*engine }.database_refs();
            snapshot::save_atomic(&path, |w| snapshot::write_dbs(w, &dbs, &meta, &mut |_| block_delay(delay)))
                .map(|s| format!("{} keys, {} bytes", s.keys, s.bytes))
                .map_err(|e| format!("writing {}: {e}", path.display()))
        };
        self.fork_bgsave(offset, job)
    }

    /// Forks BGSAVE's child (the dataset at `offset`) to run `job`; Err is the reply's error.
    fn fork_bgsave(
        &mut self,
        offset: u64,
        job: impl FnOnce() -> Result<String, String>,
    ) -> Result<(), String> {
        match self.fork_child(ChildKind::Bgsave { offset }, job) {
            Ok(pid) => {
                info!("Background saving started by pid {pid}");
                Ok(())
            }
            Err(e) => {
                self.snapshots.last_bgsave_ok = false;
                self.snapshots.held_by_journal = false;
                error!("Can't save in background: fork: {e}");
                Err(format!("ERR Can't save in background: fork: {e}"))
            }
        }
    }

    /// BGSAVE without `--load`: a forked child writes the fork-time image as an RDB file.
    fn start_rdb_bgsave(&mut self, path: PathBuf) -> Result<(), String> {
        self.snapshots.last_bgsave_try = Some(Instant::now());
        if let Err(e) = self.rdb_save_blocker() {
            self.snapshots.last_bgsave_ok = false;
            self.snapshots.held_by_journal = false;
            return Err(e);
        }
        let parts = self.rdb_parts();
        let offset = self.engine.repl.offset;
        let engine: *const Engine = &self.engine;
        let job = move || {
            // SAFETY: runs only in the child, where the engine is the parent's frozen image
            // and nothing else touches it.
            let dbs = unsafe { &*engine }.database_refs();
            let keys: usize = dbs.iter().map(|(_, ks)| ks.len()).sum();
            snapshot::save_atomic(&path, |w| engine::rdb::write_rdb_file(w, &dbs, &parts.file(false, false)))
                .map(|bytes| format!("{keys} keys, {bytes} bytes, RDB"))
                .map_err(|e| format!("writing {}: {e}", path.display()))
        };
        self.fork_bgsave(offset, job)
    }

    /// Cron: reaps finished children, then starts a scheduled or periodic save when due.
    pub(crate) fn snapshot_cron(&mut self) {
        if self.snapshots.child_running() {
            self.reap_children();
        }
        if self.snapshots.bgsave_child().is_some() {
            return;
        }
        if self.snapshots.scheduled {
            self.snapshots.scheduled = false;
            let _ = self.start_bgsave();
            return;
        }
        if !self.snapshots.restart_point() {
            // Save rules keep a restart point: without one only explicit saves write files.
            return;
        }
        let changes = self.changes_since_save();
        let since = now_ms() / 1000 - self.snapshots.last_save_unix;
        let retry_ok = self.snapshots.last_bgsave_ok
            || self.snapshots.last_bgsave_try.is_none_or(|t| t.elapsed() >= BGSAVE_RETRY_DELAY);
        let due =
            self.snapshots.rules.iter().any(|&(secs, n)| changes >= n && since >= secs as i64 && changes > 0);
        if due && retry_ok {
            info!("{changes} changes in {since} seconds: saving");
            let _ = self.start_bgsave();
        }
    }

    /// Collects every child that has exited and applies its outcome.
    pub(crate) fn reap_children(&mut self) {
        let mut i = 0;
        while i < self.snapshots.children.len() {
            let pid = self.snapshots.children[i].pid;
            let mut status = 0;
            // SAFETY: waitpid on our own child, without blocking.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == 0 {
                let child = &mut self.snapshots.children[i];
                child.read_progress();
                self.stats.net_repl_output_bytes += child.sent - child.sent_counted;
                child.sent_counted = child.sent;
                i += 1;
                continue;
            }
            let mut child = self.snapshots.children.swap_remove(i);
            // The child has exited: everything it wrote is in the pipe; the verdict is what
            // follows its progress lines.
            child.read_progress();
            let line = String::from_utf8_lossy(&child.unread).into_owned();
            let exited_ok = r == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
            let mut words = line.trim_end().splitn(4, ' ');
            let (verdict, cow, sent, detail) =
                (words.next().unwrap_or(""), words.next(), words.next(), words.next().unwrap_or(""));
            let cow: u64 = cow.and_then(|c| c.parse().ok()).unwrap_or(0);
            let sent = sent.and_then(|c| c.parse().ok()).unwrap_or(0).max(child.sent);
            self.stats.net_repl_output_bytes += sent - child.sent_counted;
            let ok = exited_ok && verdict == "ok";
            let why = if line.is_empty() { describe_status(status) } else { detail.to_string() };
            self.child_finished(child.kind, ok, cow, child.started.elapsed(), &why, &child.dropped);
        }
        if !self.snapshots.image_read() {
            self.engine.set_avoid_resize(false);
        }
    }

    fn child_finished(
        &mut self,
        kind: ChildKind,
        ok: bool,
        cow: u64,
        took: Duration,
        detail: &str,
        dropped: &[u64],
    ) {
        match kind {
            ChildKind::Bgsave { offset } => {
                self.snapshots.last_bgsave_ok = ok;
                self.snapshots.held_by_journal = false;
                self.snapshots.last_bgsave_secs = took.as_secs() as i64;
                self.snapshots.last_cow_bytes = cow;
                if ok {
                    self.snapshots.last_save_unix = now_ms() / 1000;
                    self.snapshots.last_save_offset = offset;
                    self.snapshots.saves += 1;
                    info!(
                        "Background saving terminated with success ({detail}; {} MB copied on write)",
                        cow / 1_000_000
                    );
                } else {
                    error!("Background saving failed: {detail}");
                }
            }
            ChildKind::LuaDebug { id } => {
                if ok {
                    info!("Lua debugging session with client id={id} ended");
                } else {
                    warn!("Lua debugging session with client id={id} failed: {detail}");
                }
            }
            ChildKind::DumpWorld { slot, id } => self.transfer_finished(slot, id, false, ok, detail),
            ChildKind::Sync { group } => {
                for (slot, id, close) in self.snapshots.sync_groups.remove(&group).unwrap_or_default() {
                    if dropped.contains(&id) {
                        self.transfer_finished(slot, id, close, false, "it stopped reading or left");
                    } else {
                        self.transfer_finished(slot, id, close, ok, detail);
                    }
                }
            }
        }
    }

    /// A child has finished sending client `id` in `slot` its file (`close`: the connection
    /// ends with it), whole (`ok`) or not.
    fn transfer_finished(&mut self, slot: usize, id: u64, close: bool, ok: bool, detail: &str) {
        let replica = self.redis_replicas.slots.contains(&(slot, id));
        let what = match (close, replica) {
            (true, _) => "SYNC",
            (false, true) => "replica SYNC (the RDB file)",
            (false, false) => "GOBLIN.DUMPWORLD",
        };
        if ok {
            info!("{what} to client id={id} done ({detail})");
        } else {
            warn!("{what} to client id={id} failed: {detail}");
        }
        let Some(Some(conn)) = self.conns.get_mut(slot) else { return };
        if conn.id != id {
            return;
        }
        conn.dumping = false;
        if !ok || close {
            // The reply was cut short: the stream can no longer be framed.
            conn.close_now = true;
            self.queue_write(slot);
        } else {
            // Input that arrived meanwhile is still in the socket; a replica's stream
            // collected meanwhile goes out now.
            self.read_later(slot);
            self.queue_write(slot);
        }
    }

    /// Stops every child (shutdown); their temporary files are removed at the next startup.
    /// Children that already finished are reaped first, their outcomes applied: a replica
    /// whose RDB file went out whole is no longer `dumping`, so the exit waits for it to
    /// acknowledge the stream (`drain_redis_replicas`).
    pub(crate) fn kill_children(&mut self) {
        if self.snapshots.child_running() {
            self.reap_children();
        }
        for c in self.snapshots.children.drain(..) {
            // SAFETY: signalling and reaping our own child.
            unsafe {
                libc::kill(c.pid, libc::SIGKILL);
                libc::waitpid(c.pid, std::ptr::null_mut(), 0);
            }
            warn!("stopped child {} ({:?}) at shutdown", c.pid, c.kind);
        }
    }

    /// After FLUSHALL: a BGSAVE child, writing an image from before the flush, is stopped (not
    /// counted as a failed save; its temporary file removed), as Redis stops its RDB child.
    /// Then, with save rules in force on a restart point, the (empty) dataset is written at
    /// once, as Redis writes its RDB file, so that a restart does not bring back what was
    /// flushed. A failure is logged, as the rules' own saves fail: FLUSHALL has done its work
    /// either way.
    pub(crate) fn save_after_flushall(&mut self) {
        if let Some(at) =
            self.snapshots.children.iter().position(|c| matches!(c.kind, ChildKind::Bgsave { .. }))
        {
            let c = self.snapshots.children.remove(at);
            // SAFETY: signalling and reaping our own child.
            unsafe {
                libc::kill(c.pid, libc::SIGKILL);
                libc::waitpid(c.pid, std::ptr::null_mut(), 0);
            }
            info!("stopped the background save {} (FLUSHALL)", c.pid);
            let target = match self.save_target() {
                SaveTarget::Snapshot(p) | SaveTarget::Rdb(p) => p,
            };
            remove_stale_temp_files(&target);
            if !self.snapshots.image_read() {
                self.engine.set_avoid_resize(false);
            }
        }
        if !self.snapshots.restart_point() || self.snapshots.rules.is_empty() {
            return;
        }
        let _ = self.save_foreground();
    }

    /// At shutdown: saves when save rules are configured (or SHUTDOWN SAVE), unless NOSAVE.
    /// Err: the save failed, and the server must not exit (as Redis).
    pub(crate) fn save_on_shutdown(&mut self, force_save: bool, nosave: bool) -> Result<(), String> {
        if nosave || (!self.snapshots.restart_point() || self.snapshots.rules.is_empty()) && !force_save {
            return Ok(());
        }
        if self.snapshots.path.is_none() {
            // SHUTDOWN SAVE without --load: the RDB file, as redis-server writes dump.rdb.
            self.kill_children();
            return self.save_foreground();
        }
        self.kill_children();
        // Only what Kafka holds goes into the snapshot (`settle_journal`). Without it, an
        // explicit SHUTDOWN SAVE fails as a failed save does; the save rules' final snapshot
        // is skipped instead: exiting loses nothing Kafka acknowledged (a restart replays the
        // topic from the last snapshot), while a snapshot ahead of the topic would leave a
        // hole in its history.
        if let Err(e) = self.settle_journal(SHUTDOWN_SETTLE_BOUND) {
            if force_save {
                // The shutdown is cancelled: the server goes on, and a later one waits again.
                error!("not saving the final snapshot: {e}");
                return Err(e);
            }
            self.journal_given_up = true;
            warn!("not saving the final snapshot: {e}");
            return Ok(());
        }
        info!("saving the final snapshot before exiting");
        self.save_foreground()
    }

    /// SAVE | BGSAVE [SCHEDULE] | LASTSAVE
    pub(crate) fn save_command(&mut self, c: &mut Conn, name: &str, args: &[&[u8]]) {
        let out = &mut c.out;
        match name {
            "save" => match self.save_foreground() {
                Ok(()) => reply::ok(out),
                Err(e) => reply::error(out, e.as_bytes()),
            },
            "lastsave" => reply::integer(out, self.snapshots.last_save_unix),
            _ => {
                let schedule = match args.get(1) {
                    None => false,
                    Some(a) if a.eq_ignore_ascii_case(b"SCHEDULE") && args.len() == 2 => true,
                    Some(_) => return reply::error(out, engine::errors::SYNTAX),
                };
                if schedule && self.snapshots.bgsave_child().is_some() {
                    self.snapshots.scheduled = true;
                    return reply::simple(out, b"Background saving scheduled");
                }
                // Inside EXEC after a write: the dataset holds mutations the batch has not
                // committed yet, so an image forked now would name an offset before them (a
                // restart would replay them a second time). It starts at the next cron
                // tick, after the batch is committed.
                if !self.engine.pending().is_empty() {
                    self.snapshots.scheduled = true;
                    return reply::simple(out, b"Background saving scheduled");
                }
                match self.start_bgsave() {
                    Ok(()) => reply::simple(out, b"Background saving started"),
                    Err(e) => reply::error(out, e.as_bytes()),
                }
            }
        }
    }

    /// GOBLIN.DUMPWORLD: a fork-time snapshot as one bulk reply. The child first sends what the
    /// parent still owed this client (earlier pipelined replies, in its copy of the output
    /// buffer), then the reply; the parent neither reads nor writes this connection until the
    /// child exits. The reply's length is found by a first, counting pass over the frozen image,
    /// so nothing is buffered whole, in memory or on disk; with `eof` (GOBLIN.DUMPWORLD EOF,
    /// what `goblin-core dumpworld` asks for) the snapshot goes out in one pass instead, as
    /// `$EOF:<40 characters>`, the snapshot, and the same 40 characters, the form of Redis's
    /// diskless synchronization (the snapshot's own trailer says where it ends).
    pub(crate) fn dumpworld(&mut self, c: &mut Conn, slot: usize, eof: bool) {
        if c.held_from.is_some() {
            // The child would send replies Kafka has not acknowledged yet (broker ack mode).
            return reply::error(
                &mut c.out,
                b"ERR GOBLIN.DUMPWORLD behind unacknowledged writes on this connection; retry",
            );
        }
        // A replica installing this image must not hold writes the topic may never get.
        if let Err(e) = self.settle_journal(SETTLE_BOUND) {
            return reply::error(&mut c.out, format!("ERR GOBLIN.DUMPWORLD: {e}").as_bytes());
        }
        let meta = self.snapshot_meta();
        let engine: *const Engine = &self.engine;
        let fd = c.fd;
        let owed: *const [u8] = &c.out[c.out_pos..];
        let mark = eof.then(|| ReplId::random().to_string());
        let job = move || {
            // SAFETY: in the child, the parent's frozen image: nothing else touches it.
            let (engine, owed) = unsafe { (&*engine, &*owed) };
            let dbs = engine.database_refs();
            let header = match &mark {
                Some(mark) => format!("$EOF:{mark}\r\n"),
                None => {
                    let mut counter = Counter(0);
                    snapshot::write_dbs(&mut counter, &dbs, &meta, &mut |_| {}).map_err(|e| e.to_string())?;
                    format!("${}\r\n", counter.0)
                }
            };
            let mut w = io::BufWriter::with_capacity(1 << 20, ReplSocket(SocketWriter(fd, DUMPWORLD_STALL)));
            let send = |w: &mut io::BufWriter<ReplSocket>| -> io::Result<snapshot::Summary> {
                w.write_all(owed)?;
                w.write_all(header.as_bytes())?;
                let summary = snapshot::write_dbs(&mut *w, &dbs, &meta, &mut |_| {})?;
                match &mark {
                    Some(mark) => w.write_all(mark.as_bytes())?,
                    None => w.write_all(b"\r\n")?,
                }
                w.flush()?;
                Ok(summary)
            };
            let summary = send(&mut w).map_err(|e| format!("sending: {e}"))?;
            let form = if mark.is_some() { "EOF-marked" } else { "length first" };
            Ok(format!("{} keys, {} bytes, {form}", summary.keys, summary.bytes))
        };
        match self.fork_child(ChildKind::DumpWorld { slot, id: c.id }, job) {
            Ok(pid) => {
                info!("GOBLIN.DUMPWORLD to client id={} by pid {pid}", c.id);
                // The child sends what was owed: the parent's copy is spent.
                c.out.clear();
                c.out_pos = 0;
                c.dumping = true;
            }
            Err(e) => {
                reply::error(&mut c.out, format!("ERR Can't fork for GOBLIN.DUMPWORLD: {e}").as_bytes())
            }
        }
    }

    /// REPLCONF: what a redis-server replica and a tool fetching an RDB file (`redis-cli
    /// --rdb` and `--functions-rdb`) send. `rdb-only` and `rdb-filter-only` shape this
    /// connection's SYNC or PSYNC; `listening-port` and `ip-address` are where INFO and ROLE
    /// say a replica serves; `capa goblin` (a goblin-core replica) lets SYNC send arrays and
    /// vector sets in goblin's own RDB types, other capabilities are accepted and ignored.
    /// `ACK <offset>` is a replica's position in the stream (`replication::redis_replicas`),
    /// answered with nothing, as Redis answers it.
    pub(crate) fn replconf(&mut self, c: &mut Conn, args: &[&[u8]]) {
        if args.len() >= 2 && args[1].eq_ignore_ascii_case(b"ack") {
            if args.len() >= 3 {
                self.redis_replicas_ack(c, args[2]);
            }
            return;
        }
        // Only a master sends GETACK; a replica of nobody has nothing to say.
        if args.len() >= 2 && args[1].eq_ignore_ascii_case(b"getack") {
            return;
        }
        if args.len().is_multiple_of(2) {
            return reply::error(&mut c.out, engine::errors::SYNTAX);
        }
        let (mut rdb_only, mut functions_only) = (c.rdb_only, c.rdb_functions_only);
        for pair in args[1..].chunks(2) {
            let (option, value) = (pair[0].to_ascii_lowercase(), pair[1]);
            match option.as_slice() {
                b"listening-port" => match engine::util::parse_i64(value) {
                    Some(port) => c.replconf_port = port.clamp(0, u16::MAX as i64) as u16,
                    None => return reply::error(&mut c.out, engine::errors::NOT_INTEGER),
                },
                b"ip-address" => c.replconf_ip = Some(String::from_utf8_lossy(value).into()),
                b"capa" => {
                    c.replconf_goblin |= value.eq_ignore_ascii_case(b"goblin");
                    c.replconf_eof |= value.eq_ignore_ascii_case(b"eof");
                }
                b"rdb-only" => match value {
                    b"0" | b"1" => rdb_only = value == b"1",
                    _ if engine::util::parse_i64(value).is_none() => {
                        return reply::error(&mut c.out, engine::errors::NOT_INTEGER)
                    }
                    _ => {
                        return reply::error(
                            &mut c.out,
                            b"ERR value is out of range, value must between 0 and 1",
                        )
                    }
                },
                b"rdb-filter-only" => match value.to_ascii_lowercase().as_slice() {
                    b"" => functions_only = false,
                    b"functions" => functions_only = true,
                    _ => {
                        return reply::error(
                            &mut c.out,
                            format!(
                                "ERR Unsupported rdb-filter-only option: {}",
                                String::from_utf8_lossy(value)
                            )
                            .as_bytes(),
                        )
                    }
                },
                _ => {
                    return reply::error(
                        &mut c.out,
                        format!("ERR Unrecognized REPLCONF option: {}", String::from_utf8_lossy(pair[0]))
                            .as_bytes(),
                    )
                }
            }
        }
        (c.rdb_only, c.rdb_functions_only) = (rdb_only, functions_only);
        reply::ok(&mut c.out);
    }

    /// SYNC and PSYNC: a forked child sends the dataset as it is now, as an RDB file (one bulk
    /// string without a trailing CRLF, or `$EOF:<mark>`, the file and the mark, as Redis sends
    /// them; PSYNC first answers `+FULLRESYNC <replid> <offset>`). After `REPLCONF rdb-only 1` (what `redis-cli --rdb` and
    /// `--functions-rdb` send) the connection ends with the file; otherwise the client is a
    /// replica, and every batch committed after the fork follows the file as Redis's
    /// replication stream (`replication::redis_replicas`). A dataset with array keys is
    /// refused: an RDB file cannot carry them.
    pub(crate) fn rdb_sync(&mut self, c: &mut Conn, slot: usize, psync: Option<(&[u8], &[u8])>) {
        if self.in_exec {
            return reply::error(&mut c.out, b"ERR Command not allowed inside a transaction");
        }
        if c.redis_replica.is_some() {
            // Already a replica: a second SYNC would restart a stream in the middle of one.
            return;
        }
        let stream = !c.rdb_only;
        if stream && self.replica.is_some() {
            return reply::error(
                &mut c.out,
                b"ERR a goblin-core replica serves no Redis replication stream: attach redis-server replicas to its primary",
            );
        }
        if c.held_from.is_some() {
            // The child would send replies Kafka has not acknowledged yet (broker ack mode).
            return reply::error(
                &mut c.out,
                b"ERR SYNC behind unacknowledged writes on this connection; retry",
            );
        }
        // A replica that lost its link continues from the backlog where it can.
        if let Some((replid, offset)) = psync.filter(|_| stream) {
            if self.redis_replicas_try_continue(c, slot, replid, offset) {
                return;
            }
        }
        if let Some(why) = self.sync_refusal(c) {
            return reply::error(&mut c.out, format!("ERR SYNC: {why}").as_bytes());
        }
        c.sync_wait = Some(SyncWait { psync: psync.is_some(), since: Instant::now() });
        let delay = self.sync_setting("repl-diskless-sync-delay");
        if delay > 0 && self.diskless_sync() {
            // Redis's wait for more replicas to share one child: the cron starts the
            // synchronization when the delay has passed or enough replicas wait.
            info!(
                "client id={} addr={}: full synchronization in up to {delay} s (repl-diskless-sync-delay), \
                 shared with the replicas that arrive meanwhile",
                c.id, c.addr
            );
            self.snapshots.sync_waiting.push((slot, c.id));
            return;
        }
        self.start_full_syncs(&mut [(slot, c)]);
    }

    /// Why this connection's full synchronization cannot happen now (an RDB file cannot carry
    /// array keys, unless a goblin-core replica reads it or it holds only the functions).
    fn sync_refusal(&self, c: &Conn) -> Option<String> {
        if c.rdb_functions_only || c.replconf_goblin {
            return None;
        }
        self.rdb_blocker()
    }

    /// An integer `repl-diskless-sync-*` setting (CONFIG SET keeps them with the inert ones).
    fn sync_setting(&self, name: &str) -> u64 {
        self.inert_config.get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// `repl-diskless-sync`: yes (the default) sends the file EOF-marked to readers that take
    /// that form, and lets SYNCs wait `repl-diskless-sync-delay` to share a child.
    fn diskless_sync(&self) -> bool {
        self.inert_config.get("repl-diskless-sync").is_none_or(|v| v == "yes")
    }

    /// From the cron: the waiting SYNCs start together once the oldest has waited
    /// `repl-diskless-sync-delay` seconds, or once `repl-diskless-sync-max-replicas` (when
    /// not 0) wait; until then each gets a newline a second, as Redis sends them, so that
    /// its `repl-timeout` does not end the link.
    pub(crate) fn sync_waiting_cron(&mut self) {
        if self.snapshots.sync_waiting.is_empty() {
            return;
        }
        let conns = &self.conns;
        self.snapshots.sync_waiting.retain(|&(slot, id)| {
            matches!(conns.get(slot), Some(Some(c)) if c.id == id && c.sync_wait.is_some() && !c.close_now)
        });
        let oldest = self.snapshots.sync_waiting.iter().find_map(|&(slot, _)| match self.conns.get(slot) {
            Some(Some(c)) => c.sync_wait.map(|w| w.since),
            _ => None,
        });
        let Some(oldest) = oldest else { return };
        let delay = Duration::from_secs(self.sync_setting("repl-diskless-sync-delay"));
        let enough = self.sync_setting("repl-diskless-sync-max-replicas");
        let waiting = self.snapshots.sync_waiting.len() as u64;
        if oldest.elapsed() < delay && !(enough > 0 && waiting >= enough) && self.diskless_sync() {
            if self.snapshots.sync_keepalive.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                self.snapshots.sync_keepalive = Some(Instant::now());
                for (slot, _) in self.snapshots.sync_waiting.clone() {
                    if let Some(Some(c)) = self.conns.get_mut(slot) {
                        c.out.push(b'\n');
                    }
                    self.queue_write(slot);
                }
            }
            return;
        }
        let due = std::mem::take(&mut self.snapshots.sync_waiting);
        let mut taken: Vec<(usize, Box<Conn>)> =
            due.iter().filter_map(|&(slot, _)| Some((slot, self.conns.get_mut(slot)?.take()?))).collect();
        let mut members: Vec<(usize, &mut Conn)> =
            taken.iter_mut().map(|(slot, c)| (*slot, &mut **c)).collect();
        self.start_full_syncs(&mut members);
        for (slot, c) in taken {
            self.conns[slot] = Some(c);
            self.queue_write(slot);
        }
    }

    /// The addresses of the connections whose SYNC or PSYNC waits (INFO's `slaveN` lines,
    /// `state=wait_bgsave`, as Redis shows a replica waiting for its child).
    pub(crate) fn sync_waiting_addrs(&self) -> Vec<String> {
        self.snapshots
            .sync_waiting
            .iter()
            .filter_map(|&(slot, id)| match self.conns.get(slot) {
                Some(Some(c)) if c.id == id && c.sync_wait.is_some() => {
                    Some(format!("{}:{}", crate::replication::redis_replicas::replica_ip(c), c.replconf_port))
                }
                _ => None,
            })
            .collect()
    }

    /// Starts the full synchronizations of `members` (connections with `sync_wait` set): one
    /// forked child per kind of file (goblin's own types or Redis's, the whole dataset or
    /// only its functions) writes it to all of its readers. A member that cannot be served
    /// gets its error instead.
    fn start_full_syncs(&mut self, members: &mut [(usize, &mut Conn)]) {
        // A replica's image must not hold writes the topic may never get (as GOBLIN.DUMPWORLD).
        if members.iter().any(|(_, c)| !c.rdb_only) {
            if let Err(e) = self.settle_journal(SETTLE_BOUND) {
                for (_, c) in members.iter_mut() {
                    fail_sync(c, format!("ERR SYNC: {e}"));
                }
                return;
            }
        }
        let mut groups: Vec<((bool, bool), Vec<usize>)> = Vec::new();
        for (i, (_, c)) in members.iter_mut().enumerate() {
            // Arrays may have been written while it waited.
            if let Some(why) = self.sync_refusal(c) {
                fail_sync(c, format!("ERR SYNC: {why}"));
                continue;
            }
            let key = (c.replconf_goblin, c.rdb_functions_only);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, idx)) => idx.push(i),
                None => groups.push((key, vec![i])),
            }
        }
        for ((goblin_types, functions_only), idx) in groups {
            self.fork_sync_group(goblin_types, functions_only, members, &idx);
        }
    }

    /// One child for the members at `idx`: each reader gets what it was still owed (earlier
    /// pipelined replies), its `+FULLRESYNC` line (PSYNC), then the one file, written once
    /// to them all: EOF-marked when every reader takes that form (and `repl-diskless-sync`
    /// is yes), else its length first, found by a counting pass. A reader that stops
    /// reading for DUMPWORLD_STALL, or leaves, is dropped and the others go on.
    fn fork_sync_group(
        &mut self,
        goblin_types: bool,
        functions_only: bool,
        members: &mut [(usize, &mut Conn)],
        idx: &[usize],
    ) {
        let parts = self.rdb_parts();
        let stream = idx.iter().any(|&i| !members[i].1.rdb_only);
        // A replica's stream starts at this fork; a file alone names this server's lineage.
        let stream_at = stream.then(|| self.redis_replicas_stream_start());
        let lineage = (self.engine.repl.replid.to_string(), self.engine.repl.offset);
        // A reader that takes the EOF-marked form (`REPLCONF capa eof`: every redis-server
        // replica since 2.8.18, redis-cli, a goblin-core replica) gets the file in one pass,
        // unless `repl-diskless-sync no` asks for Redis's disk-based form (its length first).
        let eof_mark = (self.diskless_sync() && idx.iter().all(|&i| members[i].1.replconf_eof))
            .then(|| ReplId::random().to_string());
        let readers: Vec<(RawFd, u64, Vec<u8>)> = idx
            .iter()
            .map(|&i| {
                let c = &*members[i].1;
                let mut prologue = c.out[c.out_pos..].to_vec();
                if c.sync_wait.is_some_and(|w| w.psync) {
                    let (replid, at) = match (&stream_at, c.rdb_only) {
                        (Some((replid, at)), false) => (replid.as_str(), *at),
                        _ => (lineage.0.as_str(), lineage.1),
                    };
                    prologue.extend_from_slice(format!("+FULLRESYNC {replid} {at}\r\n").as_bytes());
                }
                (c.fd, c.id, prologue)
            })
            .collect();
        let engine: *const Engine = &self.engine;
        // Following a primary, the stream after the file is that primary's, passed on.
        let stream_db = if stream { self.redis_primary_stream_db() } else { None };
        let numbered_stream = self.redis_primary_in_step();
        let form = if eof_mark.is_some() { "EOF-marked" } else { "length first" };
        let n = readers.len();
        let job = move || {
            // SAFETY: in the child, the parent's frozen image: nothing else touches it.
            let engine = unsafe { &*engine };
            let dbs = engine.database_refs();
            let mut file = parts.file(functions_only, goblin_types);
            file.repl_stream_db = stream_db;
            // A goblin-core replica takes the lineage the file names as its own, numbering
            // each command of the stream after it as one mutation: named only where this
            // server's offsets count the stream so (not while it passes on the stream of a
            // primary it is not in step with, a redis-server's among them).
            if !numbered_stream {
                file.lineage = None;
            }
            // A replica takes the stream's position from +FULLRESYNC, not from the file.
            file.repl_position = None;
            // The length first needs a counting pass over the whole image (as long as the
            // sending one); the EOF mark does not.
            let header = match &eof_mark {
                Some(mark) => format!("$EOF:{mark}\r\n"),
                None => {
                    let len = engine::rdb::write_rdb_file(&mut Counter(0), &dbs, &file)
                        .map_err(|e| e.to_string())?;
                    format!("${len}\r\n")
                }
            };
            let mut out = FanOut { readers: Vec::with_capacity(readers.len()) };
            for (fd, id, mut prologue) in readers {
                prologue.extend_from_slice(header.as_bytes());
                out.readers.push((fd, id, true));
                out.send_to(out.readers.len() - 1, &prologue);
            }
            let mut w = io::BufWriter::with_capacity(1 << 20, out);
            let send = |w: &mut io::BufWriter<FanOut>| -> io::Result<u64> {
                let written = engine::rdb::write_rdb_file(&mut *w, &dbs, &file)?;
                if let Some(mark) = &eof_mark {
                    w.write_all(mark.as_bytes())?;
                }
                w.flush()?;
                Ok(written)
            };
            let written = send(&mut w).map_err(|e| format!("sending: {e}"))?;
            let keys: usize = dbs.iter().map(|(_, ks)| ks.len()).sum();
            Ok(format!("{} keys, {written} bytes, {form}", if functions_only { 0 } else { keys }))
        };
        let group = self.snapshots.next_sync_group;
        self.snapshots.next_sync_group += 1;
        match self.fork_child(ChildKind::Sync { group }, job) {
            Ok(pid) => {
                let mut list = Vec::with_capacity(idx.len());
                for &i in idx {
                    let (slot, c) = &mut members[i];
                    c.out.clear();
                    c.out_pos = 0;
                    c.dumping = true;
                    c.sync_wait = None;
                    list.push((*slot, c.id, c.rdb_only));
                    if c.rdb_only {
                        info!(
                            "SYNC (an RDB file) to client id={} by pid {pid} ({form}, {n} reader(s))",
                            c.id
                        );
                    } else {
                        let at = stream_at.as_ref().map_or(0, |(_, at)| *at);
                        info!(
                            "replica id={} addr={}: full resynchronization, RDB file by pid {pid} ({form}, {n} reader(s))",
                            c.id, c.addr
                        );
                        // From here the batches committed after the fork collect in its output
                        // (sent once the child is done), and its own commands get no replies.
                        self.redis_replicas.full_syncs += 1;
                        self.redis_replicas_attach(c, *slot, at, 0);
                    }
                }
                self.snapshots.sync_groups.insert(group, list);
            }
            Err(e) => {
                for &i in idx {
                    fail_sync(members[i].1, format!("ERR Can't fork for SYNC: {e}"));
                }
            }
        }
    }

    /// GOBLIN.LOAD path: replaces the dataset with a snapshot, at once (clients see the old
    /// state or the new one), going on from its offset as a successor of its lineage (below).
    ///
    /// Refused on a replicated server: with a journal or an upstream (the durable boundary is
    /// validated only by a restart with --load), and while firehose subscribers are attached
    /// (their replicas hold the history the load replaces, and would go on applying frames
    /// numbered past it as if nothing had changed).
    pub(crate) fn goblin_load(&mut self, c: &mut Conn, path: &[u8]) {
        if self.cfg.kafka.is_some() || self.cfg.is_replica() {
            return reply::error(
                &mut c.out,
                b"ERR GOBLIN.LOAD is refused on a server with a Kafka journal or an upstream: restart it with --load so the durable boundary is validated",
            );
        }
        if !self.firehose.subs.is_empty() {
            return reply::error(
                &mut c.out,
                format!(
                    "ERR GOBLIN.LOAD is refused while {} firehose subscriber(s) are attached: their replicas would diverge; detach them or restart with --load",
                    self.firehose.subs.len()
                )
                .as_bytes(),
            );
        }
        use std::os::unix::ffi::OsStrExt;
        let path = Path::new(std::ffi::OsStr::from_bytes(path));
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) => {
                return reply::error(
                    &mut c.out,
                    format!("ERR cannot open {}: {e}", path.display()).as_bytes(),
                )
            }
        };
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        match load_file(file, path, size, self.engine.databases()) {
            Ok((mut loaded, keys, _)) => {
                let dbs = loaded.take_databases();
                let old = match self.engine.replace_databases(dbs) {
                    Ok(old) => old,
                    Err(e) => return reply::error(&mut c.out, format!("ERR {e}").as_bytes()),
                };
                // Replaced in place: the generation moves on, so the Lua registry rebuilds.
                let libs = loaded.functions.iter().map(|(_, code)| code.to_vec()).collect();
                if let Err(e) = self.engine.functions.replace_all(libs) {
                    tracing::error!("GOBLIN.LOAD: {e}");
                }
                // The new keyspace tracks accesses for the policy in force.
                let cfg = self.engine.evict;
                self.engine.set_evict_config(cfg);
                self.engine.stamp_access(now_ms());
                // The history goes on from the snapshot as a successor of its lineage (new id,
                // the file's lineage through its offset as predecessor), as at a restart from
                // one without a journal (main.rs `recover`): this server, or the one that
                // wrote the file, may have numbered other mutations past that offset, which a
                // replica detached now may hold; under the same id such a replica would
                // reattach as if in step once this server's new writes reached its offset.
                // A replica at exactly the file's offset holds the same history and follows.
                let repl = loaded.repl.successor();
                info!(
                    "GOBLIN.LOAD {}: lineage {} continues the snapshot's lineage {} from its offset {}",
                    path.display(),
                    repl.replid,
                    loaded.repl.replid,
                    loaded.repl.offset
                );
                self.engine.set_replication(repl);
                self.watches.touch_all();
                self.snapshots.last_save_offset = repl.offset;
                info!(
                    "GOBLIN.LOAD {}: {keys} keys; lineage {} at offset {}",
                    path.display(),
                    repl.replid,
                    repl.offset
                );
                drop(old);
                reply::ok(&mut c.out);
            }
            Err(e) => reply::error(&mut c.out, format!("ERR {e}").as_bytes()),
        }
    }

    /// DEBUG RELOAD [NOSAVE] [NOFLUSH] [MERGE] on a server whose restart point is its RDB
    /// file, as Redis's: the dataset saved to the file (not with NOSAVE), then the file loaded
    /// in place of the live dataset, or, with NOFLUSH, into it (a key or function library
    /// already there is an error, and nothing changes, unless MERGE, where the file's wins);
    /// every key kept whatever its deadline (they expire as usual after); INFO's load counters
    /// updated. A plain save-and-load leaves the content as it was, and the lineage goes on;
    /// the other forms may change it without a mutation, so the dataset starts a new lineage,
    /// and they are refused while replicas are attached (they would hold what the load
    /// replaced).
    fn debug_reload_rdb(&mut self, o: ReloadOptions) -> Result<(), String> {
        const LOAD_ERROR: &str = "ERR Error trying to load the RDB dump, check server logs.";
        let path = PathBuf::from(&self.snapshots.rdb_filename);
        let changes = o.nosave || o.noflush;
        if changes {
            let replicas = self.firehose.subs.len() + self.redis_replica_conns().count();
            if replicas > 0 {
                return Err(format!(
                    "ERR DEBUG RELOAD NOSAVE or NOFLUSH is refused while {replicas} replica(s) are attached: they would diverge"
                ));
            }
        }
        if !o.nosave {
            self.save_rdb_foreground(&path)?;
        }
        let map = MappedFile::open(&path).map_err(|e| format!("ERR DEBUG RELOAD: {e}"))?;
        let (mut dbs, found) = rdb_keyspaces(map.bytes(), self.engine.databases(), "DEBUG RELOAD", i64::MIN)
            .map_err(|e| format!("ERR DEBUG RELOAD: {}: {e}", path.display()))?;
        drop(map);
        let mut file_functions = engine::functions::Functions::default();
        file_functions.replace_all(found.functions).map_err(|e| format!("ERR DEBUG RELOAD: {e}"))?;
        let functions = if o.noflush {
            // The live libraries, then the file's: a name on both sides is an error unless MERGE.
            let mut codes: Vec<(Vec<u8>, Vec<u8>)> =
                self.engine.functions.iter().map(|(n, c)| (n.to_vec(), c.to_vec())).collect();
            for (name, code) in file_functions.iter() {
                match codes.iter_mut().find(|(n, _)| n == name) {
                    Some(_) if !o.merge => {
                        error!("DEBUG RELOAD: library '{}' already exists", String::from_utf8_lossy(name));
                        return Err(LOAD_ERROR.to_string());
                    }
                    Some(slot) => slot.1 = code.to_vec(),
                    None => codes.push((name.to_vec(), code.to_vec())),
                }
            }
            let mut f = engine::functions::Functions::default();
            f.replace_all(codes.into_iter().map(|(_, c)| c).collect())
                .map_err(|e| format!("ERR DEBUG RELOAD: {e}"))?;
            f
        } else {
            file_functions
        };
        if o.noflush {
            // Into the live dataset: every clash is found before anything changes.
            let live = self.engine.database_refs();
            for (db, ks) in &dbs {
                let Some((_, current)) = live.iter().find(|(d, _)| d == db) else { continue };
                let mut clash = None;
                ks.for_each(|key, _, _| {
                    if clash.is_none() && current.contains(key) {
                        clash = Some(key.to_vec());
                    }
                });
                if let (Some(key), false) = (clash, o.merge) {
                    error!(
                        "DEBUG RELOAD: key '{}' (database {db}) already exists",
                        engine::rdb::shown_key(&key)
                    );
                    return Err(LOAD_ERROR.to_string());
                }
            }
            let mut current = self.engine.take_databases();
            for (db, mut ks) in std::mem::take(&mut dbs) {
                let mut keys = Vec::with_capacity(ks.len());
                ks.for_each(|key, _, _| keys.push(key.to_vec()));
                let at = match current.iter().position(|(d, _)| *d == db) {
                    Some(at) => at,
                    None => {
                        current.push((db, store::Keyspace::new()));
                        current.len() - 1
                    }
                };
                let into = &mut current[at].1;
                for key in keys {
                    if let Some((value, deadline)) = ks.take(&key) {
                        into.put(&key, value, deadline);
                    }
                }
            }
            dbs = current;
        }
        let fresh = lineage_start(&dbs, &functions);
        let old = self.engine.replace_databases(dbs).map_err(|e| format!("ERR DEBUG RELOAD: {e}"))?;
        self.engine.functions = functions;
        let cfg = self.engine.evict;
        self.engine.set_evict_config(cfg);
        self.engine.stamp_access(now_ms());
        if changes {
            let repl = Replication::at(ReplId::random(), fresh);
            self.engine.set_replication(repl);
            self.snapshots.last_save_offset = repl.offset;
            // Nor may a redis-server replica that left continue the stream it followed: the
            // data under it changed without a write.
            self.redis_replicas.drop_stream();
        }
        self.watches.touch_all();
        self.snapshots.loaded_keys = found.keys;
        self.snapshots.loaded_expired = found.expired;
        info!("DEBUG RELOAD: {} keys loaded from {}", found.keys, path.display());
        drop(old);
        Ok(())
    }

    /// DEBUG RELOAD: where the RDB file is the restart point, Redis's save and load of it
    /// (`debug_reload_rdb`). Otherwise the dataset goes to a snapshot in the temp folder and
    /// back in place of the live one: a check that everything survives the snapshot format.
    /// The lineage and offset stay (the content is the same); the options mean nothing here.
    pub(crate) fn debug_reload(&mut self, o: ReloadOptions) -> Result<(), String> {
        // Inside EXEC after a write the dataset holds mutations not committed yet: a file
        // written now would name an offset before them, and a reload would swap the dataset
        // under the transaction's own batch.
        if !self.engine.pending().is_empty() {
            return Err("ERR DEBUG RELOAD is not allowed after a write in the same transaction".into());
        }
        if self.snapshots.rdb_restart_point {
            return self.debug_reload_rdb(o);
        }
        let path = std::env::temp_dir().join(format!("goblin-debug-reload-{}.gcsn", std::process::id()));
        let meta = self.snapshot_meta();
        let dbs = self.engine.database_refs();
        snapshot::save_atomic(&path, |w| snapshot::write_dbs(w, &dbs, &meta, &mut |_| {}))
            .map_err(|e| format!("ERR DEBUG RELOAD: save to {} failed: {e}", path.display()))?;
        let file = std::fs::File::open(&path).map_err(|e| format!("ERR DEBUG RELOAD: {e}"))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let loaded = load_file(file, &path, size, self.engine.databases());
        let _ = std::fs::remove_file(&path);
        let (mut loaded, keys, _) = loaded.map_err(|e| format!("ERR DEBUG RELOAD: {e}"))?;
        let old = self
            .engine
            .replace_databases(loaded.take_databases())
            .map_err(|e| format!("ERR DEBUG RELOAD: {e}"))?;
        let libs = loaded.functions.iter().map(|(_, code)| code.to_vec()).collect();
        self.engine.functions.replace_all(libs).map_err(|e| format!("ERR DEBUG RELOAD: {e}"))?;
        let cfg = self.engine.evict;
        self.engine.set_evict_config(cfg);
        self.engine.stamp_access(now_ms());
        self.watches.touch_all();
        info!("DEBUG RELOAD: {keys} keys saved and loaded back");
        drop(old);
        Ok(())
    }

    /// DEBUG LOADAOF. goblin-core keeps no AOF; its equivalent of a rewritten AOF is the set of
    /// canonical commands that rebuild the dataset from nothing. Every key goes through DUMP
    /// and RESTORE on a scratch engine (whose RESTORE emits those canonical commands), the
    /// commands are replayed by record into a second empty engine, exactly as a journal replay
    /// would apply them, and the result replaces the keyspace. So the Redis tests that check a
    /// write "propagates correctly" by reloading the AOF check here that the canonical forms
    /// and the DUMP format rebuild every value exactly.
    pub(crate) fn debug_loadaof(&mut self) -> Result<(), String> {
        let now = now_ms();
        let mut scratch = engine::Engine::default();
        let mut failed = None;
        self.engine.ks.for_each(|key, v, deadline| {
            if failed.is_some() {
                return;
            }
            let payload = engine::rdb::dump_exact(v);
            let ttl = deadline.map_or(0, |t| t.max(1)).to_string();
            let args: [&[u8]; 5] = [b"RESTORE", key, ttl.as_bytes(), &payload, b"ABSTTL"];
            let mut out = Vec::new();
            scratch.run(&args, now, &mut out);
            if !out.starts_with(b"+OK") {
                failed = Some(format!(
                    "ERR DEBUG LOADAOF: rebuilding '{}' failed: {}",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(&out).trim_end()
                ));
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        let Some(batch) = scratch.commit(engine::Origin::Command) else {
            // Nothing to rebuild: the dataset is empty.
            return Ok(());
        };
        let mut rebuilt = engine::Engine::default();
        rebuilt.replaying = true;
        for m in batch.iter() {
            rebuilt.apply_record(m.bytes, None, now).map_err(|e| format!("ERR DEBUG LOADAOF: {e}"))?;
        }
        let old = std::mem::replace(&mut self.engine.ks, std::mem::take(&mut rebuilt.ks));
        let cfg = self.engine.evict;
        self.engine.set_evict_config(cfg);
        self.engine.ks.stamp_access(now);
        self.watches.touch_all();
        info!("DEBUG LOADAOF: {} keys rebuilt from {} canonical commands", self.engine.ks.len(), batch.len());
        drop(old);
        Ok(())
    }

    /// INFO persistence.
    pub(crate) fn persistence_info(&self, t: &mut String) {
        use std::fmt::Write as _;
        let s = &self.snapshots;
        let bg = s.bgsave_child();
        let mut f = |name: &str, v: String| {
            let _ = write!(t, "{name}:{v}\r\n");
        };
        f("loading", "0".into());
        // A replica of a Redis primary decoding its file while it serves the old data.
        f("async_loading", u8::from(self.redis_primary_decoding()).to_string());
        // The running child's latest progress report (a save, or a replica's or DUMPWORLD's
        // file), as Redis's child info; zeros while none runs.
        let child = bg.or_else(|| s.children.iter().find(|c| c.kind.reads_image()));
        let (keys, cow, age) = match child.and_then(|c| c.progress) {
            Some((keys, cow, at)) => (keys, cow, at.elapsed().as_secs()),
            None => (0, 0, 0),
        };
        let total = child.map_or(0, |c| c.total_keys);
        f("current_cow_peak", child.map_or(0, |c| c.cow_peak).to_string());
        f("current_cow_size", cow.to_string());
        f("current_cow_size_age", age.to_string());
        let perc = if total == 0 { 0.0 } else { keys as f64 * 100.0 / total as f64 };
        f("current_fork_perc", format!("{perc:.2}"));
        f("current_save_keys_processed", keys.to_string());
        f("current_save_keys_total", total.to_string());
        f("rdb_changes_since_last_save", self.changes_since_save().to_string());
        f("rdb_bgsave_in_progress", (bg.is_some() as u8).to_string());
        f("rdb_last_save_time", s.last_save_unix.to_string());
        f("rdb_last_bgsave_status", if s.last_bgsave_ok { "ok" } else { "err" }.into());
        f("rdb_last_bgsave_time_sec", s.last_bgsave_secs.to_string());
        f("rdb_current_bgsave_time_sec", bg.map_or(-1, |c| c.started.elapsed().as_secs() as i64).to_string());
        f("rdb_saves", s.saves.to_string());
        f("rdb_last_cow_size", s.last_cow_bytes.to_string());
        f("rdb_last_load_keys_expired", s.loaded_expired.to_string());
        f("rdb_last_load_keys_loaded", s.loaded_keys.to_string());
        f("aof_enabled", "0".into());
        f("aof_rewrite_in_progress", "0".into());
        f("aof_rewrite_scheduled", "0".into());
        f("aof_last_rewrite_time_sec", "-1".into());
        f("aof_current_rewrite_time_sec", "-1".into());
        f("aof_last_bgrewrite_status", "ok".into());
        f("aof_rewrites", "0".into());
        f("aof_rewrites_consecutive_failures", "0".into());
        f("aof_last_write_status", "ok".into());
        f("aof_last_cow_size", "0".into());
        f("module_fork_in_progress", "0".into());
        f("module_fork_last_cow_size", "0".into());
    }
}

/// `--snapshot-block-delay-us`: the testing pause after each block written.
fn block_delay(us: u64) {
    if us > 0 {
        std::thread::sleep(Duration::from_micros(us));
    }
}

fn describe_status(status: i32) -> String {
    if libc::WIFSIGNALED(status) {
        format!("the child was killed by signal {}", libc::WTERMSIG(status))
    } else if libc::WIFEXITED(status) {
        format!("the child exited with status {}", libc::WEXITSTATUS(status))
    } else {
        "the child ended abnormally".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_rules() {
        assert_eq!(parse_save_rules(""), Ok(vec![]));
        assert_eq!(parse_save_rules("3600 1 300 100"), Ok(vec![(3600, 1), (300, 100)]));
        assert!(parse_save_rules("3600").unwrap_err().contains("pairs"));
        assert!(parse_save_rules("3600 x").is_err());
        assert!(parse_save_rules("-1 1").is_err());
    }
}
