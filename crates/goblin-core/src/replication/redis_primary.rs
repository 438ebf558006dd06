//! This server as a replica of a redis-server (`REPLICAOF host port`): Redis's own replication
//! protocol from the replica's side, so that a Redis deployment can move onto goblin-core live
//! (follow the Redis primary, switch the clients over, `REPLICAOF NO ONE`), and so that Sentinel
//! can promote a goblin-core replica of a Redis primary.
//!
//! ```text
//! REPLICAOF host port -> a helper thread connects: PING, [AUTH], REPLCONF listening-port,
//!     REPLCONF capa eof capa psync2, PSYNC <replid> <offset+1> (or PSYNC ? -1 the first time)
//!   +FULLRESYNC id off: the RDB file ($len or $EOF:<mark>) is written to a file beside
//!     dump.rdb as it arrives and mapped (`repl-diskless-load disabled`, the default: the
//!     file's bytes are page cache the kernel can drop, not heap next to the two datasets),
//!     or read into memory (`on-empty-db`, `swapdb`)
//!   +CONTINUE [id]:     nothing to read
//!   -> the socket, the file and the bytes read past it go to the server thread (waker)
//!   [full] the helper thread decodes the file into keyspaces (the server thread serves what
//!     it holds meanwhile)
//! server thread: [full] the keyspaces replace every database; a fresh lineage; this server's
//!     own replicas are disconnected (they held the history the file replaces)
//!   -> token REDIS_PRIMARY: commands read and applied between client commands, in bounded
//!      amounts; MULTI ... EXEC applied whole at EXEC; REPLCONF GETACK answered; an ACK sent
//!      every second (the primary's WAIT, min-replicas and INFO lag count on it)
//! a lost link (closed, an error, nothing for `repl-timeout`) -> reconnect every second with
//!   PSYNC <id> <offset+1>: +CONTINUE goes on from the same stream
//! ```
//!
//! Invariants:
//! - `offset` is the primary's stream offset of the last byte applied: a command counts once
//!   it ran (or was queued in an open transaction), so a PSYNC continuation never replays or
//!   skips one;
//! - a transaction is applied only at its EXEC: a link lost inside MULTI applies none of it,
//!   and the continuation resends it from its MULTI (the offset stays before it);
//! - the helper thread never touches the engine; it owns only its socket until it hands it over.
//!
//! Commands from the stream run as the primary's own client runs on a Redis replica
//! ([`engine::Engine::apply_primary_command`]: no deadline judged locally, the primary sends
//! each expiry as `DEL`), and their canonical mutations commit as this server's batches, so a
//! goblin-core server following a Redis primary feeds its own firehose subscribers and
//! redis-server replicas like any primary. Writes from clients are refused (`READONLY`), as on
//! a Redis replica with `replica-read-only yes`.

use crate::server::Server;
use engine::{Applied, ReplId, Replication};
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// How long connecting may take before the attempt fails (and is retried).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts after a failure or a lost link: once a second, as a Redis replica's cron retries.
const RETRY_EVERY: Duration = Duration::from_secs(1);
/// How often the applied offset is reported (`REPLCONF ACK`), as a Redis replica does.
const ACK_EVERY: Duration = Duration::from_secs(1);
/// Bytes read per call, and calls per loop turn (the clients get their turn between).
const READ_CHUNK: usize = 64 * 1024;
const READS_PER_TURN: usize = 4;

/// The stream's database after a SELECT this server cannot follow: every command is refused
/// (and counted) until the next SELECT, rather than run in the wrong database.
const NO_DB: u32 = u32::MAX;

/// `masteruser`, `masterauth` and `repl-timeout`, as CONFIG sets them.
#[derive(Clone, Debug)]
pub struct PrimarySettings {
    pub masteruser: Option<String>,
    pub masterauth: Option<String>,
    pub repl_timeout_secs: u64,
    /// `replica-serve-stale-data`: while the link is down, serve what is held (yes), or
    /// refuse all but the commands flagged stale with MASTERDOWN (no).
    pub serve_stale: bool,
    /// How this server presents itself as a replica, for Sentinel and the primary's INFO:
    /// `replica-priority` (INFO `slave_priority`; 0: never to be promoted), `replica-announced`
    /// (whether Sentinel lists it), and `replica-announce-ip` / `replica-announce-port` (the
    /// address given to the primary at the handshake, in place of the connection's and
    /// `--port`: a replica behind NAT or in a container).
    pub priority: u32,
    pub announced: bool,
    pub announce_ip: Option<String>,
    pub announce_port: u16,
    /// `bind-source-addr`: the local address connections to the primary (or, for a goblin-core
    /// replica, to its upstream) come from; empty for the kernel's choice.
    pub bind_source_addr: String,
}

impl Default for PrimarySettings {
    fn default() -> Self {
        PrimarySettings {
            masteruser: None,
            masterauth: None,
            repl_timeout_secs: 60,
            serve_stale: true,
            priority: 100,
            announced: true,
            announce_ip: None,
            announce_port: 0,
            bind_source_addr: String::new(),
        }
    }
}

/// What a successful handshake brought (one per connection: the size of `Full` costs nothing).
#[allow(clippy::large_enum_variant)]
enum Synced {
    /// `+FULLRESYNC id offset` and the RDB file, decoded (by the helper thread) into one
    /// keyspace per database that holds keys; `bytes` is the file's size.
    Full {
        replid: String,
        offset: i64,
        bytes: usize,
        dbs: Vec<(u32, store::Keyspace)>,
        found: engine::rdb::LoadedRdb,
    },
    /// `+CONTINUE [id]`: the stream goes on from the offset asked for (under a new ID when the
    /// primary names one: it was promoted, and its history continues ours).
    Continue { replid: Option<String> },
}

struct Handshake {
    stream: TcpStream,
    synced: Synced,
    /// Bytes of the command stream read together with the reply or the file.
    leftover: Vec<u8>,
}

/// An attempt in flight on its helper thread.
struct Attempt {
    rx: mpsc::Receiver<Result<Handshake, String>>,
    cancel: Arc<AtomicBool>,
    /// RDB bytes announced (0 before `$len`, or with an EOF mark: unknown) and read so far.
    total: Arc<AtomicU64>,
    read: Arc<AtomicU64>,
    /// The file is whole and being decoded (INFO persistence `async_loading`).
    decoding: Arc<AtomicBool>,
    /// Writing the file to disk failed (a full disk): later attempts receive it in memory.
    spool_failed: Arc<AtomicBool>,
    /// Where the helper thread is, for ROLE and for the cron's `repl-timeout` check.
    live: Arc<Liveness>,
}

/// What the server thread sees of an attempt in flight.
#[derive(Default)]
struct Liveness {
    /// How far the helper thread got: 0 (connecting, the default), [`STAGE_HANDSHAKE`] (connected,
    /// asking PSYNC and waiting for its answer, which a primary holding SYNCs back for
    /// `repl-diskless-sync-delay` sends late) or [`STAGE_TRANSFER`] (`+FULLRESYNC` came).
    stage: AtomicU8,
    /// When the helper thread last read a byte from the primary (unix ms, 0 before it
    /// connected), and a clone of its socket: the cron ends an attempt silent for longer than
    /// `repl-timeout` as it stands now, by shutting the socket down under the blocked read, so
    /// that a lower value set meanwhile applies to the attempt in flight, as in Redis (the
    /// socket's own read timeout, the value at the attempt's start, stays a bound too).
    last_read_ms: AtomicI64,
    socket: std::sync::Mutex<Option<TcpStream>>,
}

impl Attempt {
    /// Stops the helper thread: at its next read, or at once when it is blocked in one.
    fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
        if let Some(s) = &*self.live.socket.lock().unwrap_or_else(|e| e.into_inner()) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

const STAGE_HANDSHAKE: u8 = 1;
const STAGE_TRANSFER: u8 = 2;

struct Link {
    stream: mio::net::TcpStream,
    /// Bytes read and not applied yet (the start of an incomplete command).
    buf: Vec<u8>,
    /// Bytes for the primary not written yet (acknowledgements).
    out: Vec<u8>,
}

/// A transaction of the stream between its MULTI and its EXEC.
struct OpenMulti {
    /// The MULTI's own bytes, and each queued command's (passed on with the EXEC).
    head: Vec<u8>,
    queued: Vec<Vec<u8>>,
    /// The stream offset before the MULTI (where a lost link continues from).
    before: i64,
}

/// The Redis primary this server follows, and the state of the link to it.
pub struct RedisPrimary {
    pub host: String,
    pub port: u16,
    link: Option<Link>,
    attempt: Option<Attempt>,
    /// The primary's replication ID and the stream offset applied through: what the next
    /// PSYNC continues (None before the first full synchronization).
    pub(crate) replid: Option<String>,
    offset: i64,
    /// The database the stream's commands run in (its last SELECT); [`NO_DB`] after a
    /// SELECT of a database this server lacks (`--databases`).
    db: u32,
    /// An open transaction, applied at its EXEC.
    multi: Option<OpenMulti>,
    next_attempt: Instant,
    last_io: Instant,
    last_ack: Instant,
    /// Since when the link is down (INFO `master_link_down_since_seconds`).
    down_since: Instant,
    last_error: String,
    /// Synchronizations since REPLICAOF named this primary (INFO `redis_primary_*_syncs`).
    full_syncs: u64,
    partial_syncs: u64,
    /// Commands of the stream this server could not apply (each logged).
    rejected: u64,
    /// An attempt could not write the primary's RDB file to disk: the next ones receive it
    /// into memory, whatever `repl-diskless-load` says.
    spool_in_memory: bool,
    /// This server was the primary and hands over to this one (FAILOVER): the PSYNC says so.
    pub(crate) failover: bool,
    /// This server's lineage is the primary's: its full synchronization's file named the
    /// primary's goblin-core lineage and logical offset (`goblin-replid`, `goblin-offset`),
    /// this server took both, and every command of the stream since committed exactly one
    /// mutation here, as it did there (a goblin-core primary's stream is its canonical
    /// mutations, one command each). Its INFO offsets are then the primary's, as a Redis
    /// replica's are its primary's. False for a redis-server primary, and from the first
    /// command that did not commit one mutation (see `redis_primary_apply`).
    in_step: bool,
}

impl RedisPrimary {
    /// Inside one of the primary's transactions (MULTI applied, its EXEC not yet).
    pub(crate) fn in_transaction(&self) -> bool {
        self.multi.is_some()
    }

    fn new(host: String, port: u16) -> RedisPrimary {
        let now = Instant::now();
        RedisPrimary {
            host,
            port,
            link: None,
            attempt: None,
            replid: None,
            offset: -1,
            db: 0,
            multi: None,
            next_attempt: now,
            last_io: now,
            last_ack: now,
            down_since: now,
            last_error: String::new(),
            full_syncs: 0,
            partial_syncs: 0,
            rejected: 0,
            spool_in_memory: false,
            failover: false,
            in_step: false,
        }
    }

    /// Redis's link states, as ROLE names them.
    fn state(&self) -> &'static str {
        match (&self.link, &self.attempt) {
            (Some(_), _) => "connected",
            (None, Some(a)) => match a.live.stage.load(Ordering::Relaxed) {
                STAGE_TRANSFER => "sync",
                STAGE_HANDSHAKE => "handshake",
                _ => "connecting",
            },
            (None, None) => "connect",
        }
    }
}

/// Reads replies and the RDB file from the primary on the helper thread: a buffer over a
/// blocking socket, so that whatever arrives past a reply or the file is kept.
struct Reader {
    s: TcpStream,
    buf: Vec<u8>,
    pos: usize,
    cancel: Arc<AtomicBool>,
    live: Arc<Liveness>,
}

impl Reader {
    fn fill(&mut self) -> Result<usize, String> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err("cancelled".into());
        }
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        let len = self.buf.len();
        self.buf.resize(len + READ_CHUNK, 0);
        loop {
            match self.s.read(&mut self.buf[len..]) {
                Ok(0) => {
                    self.buf.truncate(len);
                    return Err("the primary closed the connection".into());
                }
                Ok(n) => {
                    self.buf.truncate(len + n);
                    self.live.last_read_ms.store(crate::server::now_ms(), Ordering::Relaxed);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.buf.truncate(len);
                    return Err(match e.kind() {
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                            "timeout reading from the primary".into()
                        }
                        _ => format!("reading from the primary: {e}"),
                    });
                }
            }
        }
    }

    /// The next line (without its CR LF), skipping the empty lines a primary sends to keep the
    /// connection alive while it prepares the file.
    fn line(&mut self) -> Result<String, String> {
        loop {
            if let Some(i) = self.buf[self.pos..].iter().position(|&b| b == b'\n') {
                let raw = &self.buf[self.pos..self.pos + i];
                let line = String::from_utf8_lossy(raw.strip_suffix(b"\r").unwrap_or(raw)).into_owned();
                self.pos += i + 1;
                if line.is_empty() {
                    continue;
                }
                return Ok(line);
            }
            if self.buf.len() - self.pos > 64 * 1024 {
                return Err("a reply line longer than 64 KiB from the primary".into());
            }
            self.fill()?;
        }
    }

    fn command(&mut self, args: &[&str]) -> Result<String, String> {
        let mut req = Vec::new();
        resp::reply::bulk_array(&mut req, &args.iter().map(|a| a.as_bytes()).collect::<Vec<_>>());
        self.s.write_all(&req).map_err(|e| format!("writing to the primary: {e}"))?;
        self.line()
    }

    /// The RDB file after `+FULLRESYNC`: `$<len>` and that many bytes, or `$EOF:<40-byte
    /// mark>`, the file, and the mark again (a diskless transfer), handed to `sink` as it
    /// arrives (only a read's worth is held here). Returns what followed it.
    fn rdb(
        &mut self,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), String>,
        total: &AtomicU64,
        read: &AtomicU64,
        from: &str,
    ) -> Result<Vec<u8>, String> {
        let head = self.line()?;
        let Some(spec) = head.strip_prefix('$') else {
            return Err(format!(
                "bad protocol from the primary, the first bytes of the RDB transfer: '{head}'"
            ));
        };
        let mut last_log = Instant::now();
        let mut progress = |got: usize, want: Option<usize>| {
            read.store(got as u64, Ordering::Relaxed);
            if last_log.elapsed() >= Duration::from_secs(1) {
                last_log = Instant::now();
                match want {
                    Some(w) => info!("replica of {from}: {got} of {w} bytes of the RDB file received"),
                    None => info!("replica of {from}: {got} bytes of the RDB file received"),
                }
            }
        };
        let mut written = 0usize;
        if let Some(mark) = spec.strip_prefix("EOF:") {
            let mark = mark.as_bytes().to_vec();
            if mark.len() != 40 {
                return Err(format!("bad protocol from the primary: an EOF mark of {} bytes", mark.len()));
            }
            loop {
                let held = &self.buf[self.pos..];
                if let Some(i) = held.windows(mark.len()).position(|w| w == mark.as_slice()) {
                    sink(&held[..i])?;
                    written += i;
                    let leftover = self.buf.split_off(self.pos + i + mark.len());
                    progress(written, None);
                    return Ok(leftover);
                }
                // All but the last bytes, which may be the start of the mark.
                let safe = held.len().saturating_sub(mark.len() - 1);
                sink(&held[..safe])?;
                written += safe;
                self.buf.drain(..self.pos + safe);
                self.pos = 0;
                progress(written, None);
                self.fill()?;
            }
        }
        let len: usize = spec
            .parse()
            .map_err(|_| format!("bad protocol from the primary, the RDB transfer's length: '{spec}'"))?;
        total.store(len as u64, Ordering::Relaxed);
        loop {
            let n = (len - written).min(self.buf.len() - self.pos);
            sink(&self.buf[self.pos..self.pos + n])?;
            self.pos += n;
            written += n;
            if written == len {
                break;
            }
            progress(written, Some(len));
            self.fill()?;
        }
        progress(written, Some(len));
        Ok(self.buf.split_off(self.pos))
    }
}

/// Everything one attempt needs, copied for its thread.
struct Plan {
    host: String,
    port: u16,
    settings: PrimarySettings,
    listening_port: u16,
    psync: (String, i64),
    /// `--databases`: a file with keys in a database past it is refused.
    databases: u32,
    /// FAILOVER: the PSYNC asks the primary-to-be to take over.
    failover: bool,
    /// Where a full synchronization's RDB file is written as it arrives (then mapped and
    /// decoded); None: into memory (`repl-diskless-load on-empty-db` or `swapdb`).
    spool: Option<std::path::PathBuf>,
}

/// A full synchronization's RDB file, as received: in memory, or written to a file and mapped.
enum Received {
    Memory(Vec<u8>),
    Mapped(crate::snapshots::MappedFile),
}

impl Received {
    fn bytes(&self) -> &[u8] {
        match self {
            Received::Memory(v) => v,
            Received::Mapped(m) => m.bytes(),
        }
    }
}

/// Removes the spool file when dropped, whatever happened to the attempt.
struct SpoolGuard<'a>(&'a std::path::Path);

impl Drop for SpoolGuard<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

/// Receives the RDB file into `spool` (a file, mapped once whole, removed at once: the
/// mapping keeps its pages) or into memory. A spool that cannot be created (a read-only or
/// missing folder) gives way to memory at once; one that fails on the way (a full disk) fails
/// the attempt and sets `spool_failed`, so that the next attempt uses memory.
fn receive_rdb(
    r: &mut Reader,
    spool: Option<&std::path::Path>,
    total: &AtomicU64,
    read: &AtomicU64,
    from: &str,
    spool_failed: &AtomicBool,
) -> Result<(Received, Vec<u8>), String> {
    let file = spool.and_then(|path| match std::fs::File::create(path) {
        Ok(f) => Some((path, f)),
        Err(e) => {
            warn!(
                "replica of {from}: cannot create {} ({e}): receiving the RDB file into memory",
                path.display()
            );
            None
        }
    });
    let Some((path, file)) = file else {
        info!("replica of {from}: receiving the RDB file into memory (repl-diskless-load)");
        let mut bytes = Vec::new();
        let leftover = r.rdb(
            &mut |b| {
                if bytes.is_empty() {
                    bytes.reserve(total.load(Ordering::Relaxed) as usize);
                }
                bytes.extend_from_slice(b);
                Ok(())
            },
            total,
            read,
            from,
        )?;
        return Ok((Received::Memory(bytes), leftover));
    };
    info!("replica of {from}: receiving the RDB file into {}", path.display());
    let _guard = SpoolGuard(path);
    let what = |e: io::Error| {
        spool_failed.store(true, Ordering::Relaxed);
        format!("writing the primary's RDB file to {}: {e}", path.display())
    };
    let mut w = io::BufWriter::with_capacity(1 << 20, file);
    let leftover = r.rdb(&mut |b| w.write_all(b).map_err(what), total, read, from)?;
    w.flush().map_err(what)?;
    drop(w);
    let mapped = crate::snapshots::MappedFile::open(path)?;
    Ok((Received::Mapped(mapped), leftover))
}

/// The helper thread's handshake (see the module documentation).
fn handshake(
    plan: Plan,
    cancel: Arc<AtomicBool>,
    total: &AtomicU64,
    read: &AtomicU64,
    decoding: &AtomicBool,
    spool_failed: &AtomicBool,
    live: Arc<Liveness>,
) -> Result<Handshake, String> {
    let from = format!("{}:{}", plan.host, plan.port);
    let addrs: Vec<_> = (plan.host.as_str(), plan.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", plan.host))?
        .collect();
    let mut last = format!("cannot resolve {}", plan.host);
    let mut stream = None;
    for a in &addrs {
        match crate::transport::connect_tcp(a, &plan.settings.bind_source_addr, CONNECT_TIMEOUT) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = format!("connecting to {from}: {e}"),
        }
    }
    let s = stream.ok_or(last)?;
    *live.socket.lock().unwrap_or_else(|e| e.into_inner()) = s.try_clone().ok();
    live.last_read_ms.store(crate::server::now_ms(), Ordering::Relaxed);
    live.stage.store(STAGE_HANDSHAKE, Ordering::Relaxed);
    let timeout = Duration::from_secs(plan.settings.repl_timeout_secs.max(1));
    s.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    let _ = s.set_nodelay(true);
    let mut r = Reader { s, buf: Vec::new(), pos: 0, cancel, live: live.clone() };
    // A primary that wants a password answers PING with NOAUTH (or NOPERM): that still shows
    // it is there, as Redis's replica takes it.
    let pong = r.command(&["PING"])?;
    if pong.starts_with('-')
        && !(pong.starts_with("-NOAUTH")
            || pong.starts_with("-NOPERM")
            || pong.starts_with("-ERR operation not permitted"))
    {
        return Err(format!("error reply to PING from the primary: '{pong}'"));
    }
    if let Some(pass) = &plan.settings.masterauth {
        let reply = match &plan.settings.masteruser {
            Some(user) => r.command(&["AUTH", user, pass])?,
            None => r.command(&["AUTH", pass])?,
        };
        if let Some(error) = reply.strip_prefix('-') {
            // Redis's words (log watchers look for them).
            return Err(format!("Unable to AUTH to MASTER: {error}"));
        }
    }
    // Older primaries may not know these; the replication goes on without (as in Redis).
    let announced_port = match plan.settings.announce_port {
        0 => plan.listening_port,
        p => p,
    };
    let reply = r.command(&["REPLCONF", "listening-port", &announced_port.to_string()])?;
    if reply.starts_with('-') {
        warn!("replica of {from}: the primary refused REPLCONF listening-port: {reply}");
    }
    if let Some(ip) = &plan.settings.announce_ip {
        let reply = r.command(&["REPLCONF", "ip-address", ip])?;
        if reply.starts_with('-') {
            warn!("replica of {from}: the primary refused REPLCONF ip-address: {reply}");
        }
    }
    // `capa goblin`: this replica loads goblin's own RDB types (arrays, vector sets), so a
    // goblin-core primary may send a dataset holding them. redis-server ignores a capability
    // it does not know.
    let reply = r.command(&["REPLCONF", "capa", "eof", "capa", "psync2", "capa", "goblin"])?;
    if reply.starts_with('-') {
        warn!("replica of {from}: the primary refused REPLCONF capa: {reply}");
    }
    let offset = plan.psync.1.to_string();
    let reply = if plan.failover {
        let reply = r.command(&["PSYNC", &plan.psync.0, &offset, "FAILOVER"])?;
        if reply.starts_with('-') {
            return Err(format!("{}: '{reply}'", super::failover::REJECTED));
        }
        reply
    } else {
        r.command(&["PSYNC", &plan.psync.0, &offset])?
    };
    let synced = if let Some(rest) = reply.strip_prefix("+FULLRESYNC ") {
        let mut it = rest.split(' ');
        let (Some(replid), Some(off)) = (it.next(), it.next().and_then(|o| o.parse::<i64>().ok())) else {
            return Err(format!("bad +FULLRESYNC reply from the primary: '{reply}'"));
        };
        let replid = replid.to_string();
        live.stage.store(STAGE_TRANSFER, Ordering::Relaxed);
        info!("replica of {from}: full synchronization from {replid} at offset {off}");
        let (rdb, leftover) = receive_rdb(&mut r, plan.spool.as_deref(), total, read, &from, spool_failed)?;
        // Decoded here, off the server thread, which goes on serving what it holds meanwhile
        // (as `replica-serve-stale-data yes`); it only installs the result.
        // Keys past their deadline are kept, as a Redis replica keeps them: the primary
        // removes each with a DEL in its stream, and a replica without the key would apply
        // that DEL as nothing (reads judge deadlines meanwhile).
        let what = format!("replica of {from}: loading the RDB file");
        decoding.store(true, Ordering::Relaxed);
        let (dbs, found) = crate::snapshots::rdb_keyspaces(rdb.bytes(), plan.databases, &what, i64::MIN)
            .map_err(|e| format!("the primary's RDB file: {e}"))?;
        let bytes = rdb.bytes().len();
        drop(rdb);
        let synced = Synced::Full { replid, offset: off, bytes, dbs, found };
        return Ok(Handshake { stream: r.s, synced, leftover });
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        let id = rest.trim();
        Synced::Continue { replid: (!id.is_empty()).then(|| id.to_string()) }
    } else {
        // -NOMASTERLINK, -LOADING, or a primary that speaks no PSYNC: tried again later.
        return Err(format!("unexpected reply to PSYNC from the primary: '{reply}'"));
    };
    let leftover = r.buf.split_off(r.pos);
    Ok(Handshake { stream: r.s, synced, leftover })
}

/// The length of the first complete command in `buf` (a RESP2 array of bulk strings), None
/// when it is incomplete, Err when the bytes are not such a command.
fn command_len(buf: &[u8]) -> Result<Option<usize>, String> {
    fn int_line(buf: &[u8], at: usize) -> Result<Option<(i64, usize)>, String> {
        let Some(end) = buf[at..].iter().position(|&b| b == b'\n') else {
            return if buf.len() - at > 32 { Err("a header line without its end".into()) } else { Ok(None) };
        };
        let n = buf[at + 1..at + end]
            .strip_suffix(b"\r")
            .and_then(|line| std::str::from_utf8(line).ok())
            .and_then(|t| t.parse::<i64>().ok());
        match n {
            Some(n) => Ok(Some((n, at + end + 1))),
            None => Err(format!("a malformed header '{}'", String::from_utf8_lossy(&buf[at..at + end]))),
        }
    }
    if buf.is_empty() {
        return Ok(None);
    }
    if buf[0] != b'*' {
        return Err(format!("bytes that are no command (starting {:?})", buf[0] as char));
    }
    let Some((n, mut at)) = int_line(buf, 0)? else { return Ok(None) };
    if n < 1 {
        return Err(format!("an array of {n} elements"));
    }
    for _ in 0..n {
        if at >= buf.len() {
            return Ok(None);
        }
        if buf[at] != b'$' {
            return Err("an argument that is not a bulk string".into());
        }
        let Some((len, start)) = int_line(buf, at)? else { return Ok(None) };
        if len < 0 {
            return Err("a null argument".into());
        }
        at = start + len as usize + 2;
        if at > buf.len() {
            return Ok(None);
        }
        if &buf[at - 2..at] != b"\r\n" {
            return Err("a bulk string that does not end with CR LF".into());
        }
    }
    Ok(Some(at))
}

/// The arguments of a complete command (checked by [`command_len`]).
fn command_args(cmd: &[u8]) -> Vec<&[u8]> {
    let mut args = Vec::new();
    let mut at = cmd.iter().position(|&b| b == b'\n').map_or(cmd.len(), |i| i + 1);
    while at < cmd.len() {
        let end = at + cmd[at..].iter().position(|&b| b == b'\n').unwrap_or(0);
        let len: usize =
            std::str::from_utf8(&cmd[at + 1..end - 1]).ok().and_then(|t| t.parse().ok()).unwrap_or(0);
        args.push(&cmd[end + 1..end + 1 + len]);
        at = end + 1 + len + 2;
    }
    args
}

impl Server {
    /// Whether this server's data changes only through an upstream (a goblin-core one over
    /// the firehose, or a Redis primary): client writes are refused, nothing expires or is
    /// evicted locally.
    pub(crate) fn follows_upstream(&self) -> bool {
        self.replica.is_some() || self.redis_primary.is_some()
    }

    /// REPLICAOF host port | NO ONE (and SLAVEOF), on a server started without `--replica-*`
    /// (that role is fixed at startup) and without `--kafka` (a journaling primary's history
    /// cannot take a Redis primary's file in the middle of it).
    pub(crate) fn replicaof_command(&mut self, out: &mut Vec<u8>, args: &[&[u8]]) {
        use resp::reply;
        if self.failover.is_some() {
            return reply::error(out, b"ERR REPLICAOF not allowed while failing over.");
        }
        let no_one = args[1].eq_ignore_ascii_case(b"no") && args[2].eq_ignore_ascii_case(b"one");
        if self.replica.is_some() {
            let msg: &[u8] = if no_one {
                b"ERR this replica follows the upstream of its --replica-* flag; restart it without one to serve writes"
            } else {
                b"ERR this replica follows the upstream of its --replica-* flag; restart it with another to change it"
            };
            return reply::error(out, msg);
        }
        if no_one {
            self.stop_following_redis_primary();
            return reply::ok(out);
        }
        // Redis's one error for a port that is not a number and for one out of range.
        let port = std::str::from_utf8(args[2]).ok().and_then(|p| p.parse::<i64>().ok());
        let Some(port) = port.filter(|p| (0..=65535).contains(p)) else {
            return reply::error(out, b"ERR Invalid master port");
        };
        if self.cfg.kafka.is_some() {
            return reply::error(
                out,
                b"ERR REPLICAOF is refused on a server with a Kafka journal: its history cannot take a Redis primary's file; import one with goblin-core import-rdb, or follow the primary without --kafka",
            );
        }
        let host = String::from_utf8_lossy(args[1]).into_owned();
        let port = port as u16;
        if self.redis_primary.as_ref().is_some_and(|p| p.host.eq_ignore_ascii_case(&host) && p.port == port) {
            return reply::simple(out, b"OK Already connected to specified master");
        }
        // Another primary of the same replication (a Sentinel failover): the stream it serves
        // continues the one followed so far (PSYNC2: the promoted replica still answers to
        // the old ID), so the next PSYNC asks to continue it, as Redis's cached master does.
        // A primary that becomes a replica offers its own stream instead (Redis's cached master
        // made of itself): a replica of it that was promoted meanwhile (a Sentinel failover,
        // this server cut off) continues it from its backlog if this server wrote nothing
        // more, rather than sending a whole file. The stream holds every write committed since
        // it began, so the dataset is exactly its bytes so far.
        let cached = match self.redis_primary.take() {
            Some(p) => {
                let offset = p.multi.as_ref().map_or(p.offset, |m| m.before);
                let cached = p.replid.clone().map(|id| (id, offset, p.db));
                self.redis_primary_drop(p);
                cached
            }
            None => self.redis_replicas.stream_id_offset().map(|(id, offset)| (id, offset as i64, 0)),
        };
        self.follow_redis_primary(host, port, cached, false);
        reply::ok(out);
    }

    /// REPLICAOF NO ONE (and a FAILOVER's end on either side): this server is a primary from
    /// now on, with what it holds, under a successor of the lineage it had (Redis's new
    /// replication ID with the old one kept as the second).
    pub(crate) fn stop_following_redis_primary(&mut self) {
        let followed = self.redis_primary_identity();
        if let Some(p) = self.redis_primary.take() {
            self.redis_primary_drop(p);
            self.redis_replicas_promoted(followed);
            // A primary numbers its own writes under a lineage of its own: the one followed
            // (the old primary's, when this server was in step with it) may go on there.
            self.redis_primary_lineage_successor("it is a primary now");
            self.engine.replica = self.data_frozen();
            info!("REPLICAOF NO ONE: this server is a primary now, at offset {}", self.engine.repl.offset);
        }
    }

    /// Starts following the Redis primary at `host`:`port` (REPLICAOF, or `--replicaof` at
    /// startup): client writes are refused from now on, and the first attempt starts.
    /// `cached`: the replication ID, offset and database followed until now, from another
    /// primary of the same replication. `failover`: this primary hands over to that one (its
    /// PSYNC says FAILOVER).
    pub(crate) fn follow_redis_primary(
        &mut self,
        host: String,
        port: u16,
        cached: Option<(String, i64, u32)>,
        failover: bool,
    ) {
        info!("REPLICAOF {host} {port}: following a Redis primary; client writes are refused");
        let mut p = RedisPrimary::new(host, port);
        if let Some((replid, offset, db)) = cached {
            (p.replid, p.offset, p.db) = (Some(replid), offset, db);
        }
        p.failover = failover;
        self.redis_primary = Some(p);
        self.engine.replica = true;
        // Clients blocked as on a primary would be served by the primary's writes, here, as
        // writes of their own: they are answered with an error and disconnected, as Redis does.
        self.disconnect_blocked_clients();
        self.redis_primary_attempt();
    }

    /// Forgets a primary: its link closed, its attempt cancelled (the thread ends on its own).
    fn redis_primary_drop(&mut self, mut p: RedisPrimary) {
        if let Some(mut link) = p.link.take() {
            let _ = self.poll.registry().deregister(&mut link.stream);
        }
        if let Some(a) = p.attempt.take() {
            a.cancel();
        }
    }

    /// Starts a handshake on a helper thread.
    fn redis_primary_attempt(&mut self) {
        let listening_port = self.cfg.port;
        let databases = self.engine.databases();
        let settings = self.redis_primary_settings.clone();
        let waker = self.waker();
        // Redis's default (`disabled`) goes through a file; the two others load from memory.
        let mut spool = match self.inert_config.get("repl-diskless-load").map(String::as_str) {
            Some("on-empty-db" | "swapdb") => None,
            _ => Some(crate::snapshots::sync_spool_path(std::path::Path::new(&self.snapshots.rdb_filename))),
        };
        let Some(p) = self.redis_primary.as_mut() else { return };
        if p.spool_in_memory {
            spool = None;
        }
        let psync = match &p.replid {
            Some(id) => (id.clone(), p.offset + 1),
            None => ("?".to_string(), -1),
        };
        let failover = p.failover;
        let plan = Plan {
            host: p.host.clone(),
            port: p.port,
            settings,
            listening_port,
            psync,
            databases,
            failover,
            spool,
        };
        let (tx, rx) = mpsc::channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let (total, read) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let decoding = Arc::new(AtomicBool::new(false));
        let spool_failed = Arc::new(AtomicBool::new(false));
        let live = Arc::new(Liveness::default());
        let attempt = Attempt {
            rx,
            cancel: cancel.clone(),
            total: total.clone(),
            read: read.clone(),
            decoding: decoding.clone(),
            spool_failed: spool_failed.clone(),
            live: live.clone(),
        };
        let spawned = std::thread::Builder::new().name("redis-primary".into()).spawn(move || {
            let result = handshake(plan, cancel, &total, &read, &decoding, &spool_failed, live);
            if tx.send(result).is_ok() {
                let _ = waker.wake();
            }
        });
        match spawned {
            Ok(_) => p.attempt = Some(attempt),
            Err(e) => {
                p.last_error = format!("cannot start a thread: {e}");
                p.next_attempt = Instant::now() + RETRY_EVERY;
            }
        }
    }

    /// After a wake-up: an attempt may have finished.
    pub(crate) fn redis_primary_on_wake(&mut self) {
        let Some(p) = self.redis_primary.as_mut() else { return };
        let Some(a) = &p.attempt else { return };
        let result = match a.rx.try_recv() {
            Ok(r) => r,
            Err(mpsc::TryRecvError::Empty) => return,
            Err(mpsc::TryRecvError::Disconnected) => Err("the connecting thread ended".into()),
        };
        if a.spool_failed.load(Ordering::Relaxed) && !p.spool_in_memory {
            warn!(
                "replica of {}:{}: the RDB file could not be written to disk; the next synchronizations receive it into memory",
                p.host, p.port
            );
            p.spool_in_memory = true;
        }
        p.attempt = None;
        let from = format!("{}:{}", p.host, p.port);
        let hs = match result {
            Ok(hs) => hs,
            Err(e) if p.failover && e.starts_with(super::failover::REJECTED) => {
                warn!("replica of {from}: {e}");
                return self.failover_abort("Failover target rejected psync request");
            }
            Err(e) => {
                warn!("replica of {from}: {e}; retrying");
                p.last_error = e;
                p.next_attempt = Instant::now() + RETRY_EVERY;
                return;
            }
        };
        // The target took over (+CONTINUE or +FULLRESYNC: either is a success, as in Redis).
        if p.failover {
            self.failover_done();
        }
        match hs.synced {
            Synced::Full { replid, offset, bytes, dbs, found } => {
                let (found_db, databases) = (found.repl_stream_db, self.engine.databases());
                let adopted = match self.redis_primary_load(&from, bytes, dbs, found) {
                    Ok(adopted) => adopted,
                    Err(e) => {
                        let p = self.redis_primary.as_mut().expect("following");
                        warn!("replica of {from}: the primary's RDB file: {e}; retrying");
                        p.last_error = e;
                        p.next_attempt = Instant::now() + RETRY_EVERY;
                        return;
                    }
                };
                let p = self.redis_primary.as_mut().expect("following");
                p.in_step = adopted;
                p.replid = Some(replid);
                p.offset = offset;
                // The database the primary's stream is in (a replica's file names it; a
                // primary SELECTs before its next command anyway).
                p.db =
                    found_db.filter(|&d| d < databases).unwrap_or(if found_db.is_some() { NO_DB } else { 0 });
                p.full_syncs += 1;
            }
            Synced::Continue { replid } => {
                let p = self.redis_primary.as_mut().expect("following");
                info!("replica of {from}: partial synchronization accepted at offset {}", p.offset + 1);
                p.partial_syncs += 1;
                if let Some(id) = replid {
                    let changed = p.replid.as_deref() != Some(id.as_str());
                    p.replid = Some(id.clone());
                    // A promoted primary continues under its new ID: so does this server's
                    // stream, the old one still good up to here.
                    self.redis_replicas_new_id(&id);
                    if changed {
                        // ... and this server's lineage goes on as a successor: the promoted
                        // server numbers its writes under a lineage of its own, and the old
                        // primary may go on numbering other writes under the old one.
                        self.redis_primary_lineage_successor(
                            "its primary continues under a new replication ID",
                        );
                    }
                }
            }
        }
        let p = self.redis_primary.as_mut().expect("following");
        if let Err(e) = hs.stream.set_nonblocking(true) {
            p.last_error = format!("the connection to the primary: {e}");
            p.next_attempt = Instant::now() + RETRY_EVERY;
            return;
        }
        let mut stream = mio::net::TcpStream::from_std(hs.stream);
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            crate::server::REDIS_PRIMARY,
            mio::Interest::READABLE | mio::Interest::WRITABLE,
        ) {
            p.last_error = format!("the connection to the primary: {e}");
            p.next_attempt = Instant::now() + RETRY_EVERY;
            return;
        }
        p.link = Some(Link { stream, buf: hs.leftover, out: Vec::new() });
        p.last_io = Instant::now();
        p.last_error.clear();
        p.multi = None;
        // A diskless primary starts the stream once the replica acknowledged the file.
        self.redis_primary_ack();
        self.redis_primary_apply();
    }

    /// A full synchronization: the primary's RDB file replaces every database and the
    /// function libraries. This server's lineage becomes the primary's when the file names
    /// one (a goblin-core primary), else a new one of its own; either way the file is not a
    /// continuation of what it numbered before, so its own replicas are disconnected: they
    /// must start over. True when the primary's lineage was taken.
    fn redis_primary_load(
        &mut self,
        from: &str,
        bytes: usize,
        dbs: Vec<(u32, store::Keyspace)>,
        found: engine::rdb::LoadedRdb,
    ) -> Result<bool, String> {
        let started = Instant::now();
        let mut functions = engine::functions::Functions::default();
        functions.replace_all(found.functions.clone()).map_err(|e| format!("a function library: {e}"))?;
        let start = crate::snapshots::lineage_start(&dbs, &functions);
        // A goblin-core primary's file names its lineage and the logical offset the file
        // holds: this server takes both, so that each of the stream's mutations gets the
        // number it has there. Any other file starts a lineage of this server's own.
        let adopted = found.lineage.as_ref().and_then(|(id, offset)| Some((ReplId::parse(id)?, *offset)));
        let old = self.engine.replace_databases(dbs)?;
        self.engine.functions.replace_all(found.functions).map_err(|e| format!("a function library: {e}"))?;
        let cfg = self.engine.evict;
        self.engine.set_evict_config(cfg);
        self.engine.stamp_access(crate::server::now_ms());
        self.watches.touch_all();
        self.firehose_disconnect_all();
        self.redis_replicas_reset();
        let repl = match adopted {
            Some((id, offset)) => Replication::at(id, offset),
            None => Replication::at(ReplId::random(), start),
        };
        self.engine.set_replication(repl);
        self.snapshots.last_save_offset = repl.offset;
        drop(old);
        info!(
            "replica of {from}: {} keys from a {}-byte RDB file (version {}, Redis {}) installed in {:.2} s; lineage {} at offset {}{}",
            found.keys,
            bytes,
            found.version,
            found.redis_version.as_deref().unwrap_or("?"),
            started.elapsed().as_secs_f64(),
            repl.replid,
            repl.offset,
            if adopted.is_some() { " (the primary's)" } else { "" }
        );
        Ok(adopted.is_some())
    }

    /// Token REDIS_PRIMARY: writes what waits for the primary, reads and applies commands.
    pub(crate) fn redis_primary_io(&mut self) {
        self.redis_primary_flush();
        let Some(link) = self.redis_primary.as_mut().and_then(|p| p.link.as_mut()) else { return };
        let mut closed = None;
        let mut again = false;
        let mut got = false;
        let mut read = 0u64;
        for i in 0..READS_PER_TURN {
            let len = link.buf.len();
            link.buf.resize(len + READ_CHUNK, 0);
            match link.stream.read(&mut link.buf[len..]) {
                Ok(0) => {
                    link.buf.truncate(len);
                    closed = Some("the primary closed the connection".to_string());
                    break;
                }
                Ok(n) => {
                    got = true;
                    read += n as u64;
                    link.buf.truncate(len + n);
                    if n < READ_CHUNK {
                        break;
                    }
                    again = i + 1 == READS_PER_TURN;
                }
                Err(e) => {
                    link.buf.truncate(len);
                    match e.kind() {
                        io::ErrorKind::WouldBlock => break,
                        io::ErrorKind::Interrupted => continue,
                        _ => {
                            closed = Some(format!("reading from the primary: {e}"));
                            break;
                        }
                    }
                }
            }
        }
        // Only bytes from the primary count as its sign of life: an event that brought none
        // (the socket turning writable) says nothing about a primary that may be hung.
        self.stats.net_repl_input_bytes += read;
        if got {
            self.redis_primary.as_mut().expect("following").last_io = Instant::now();
        }
        self.redis_primary_apply();
        if let Some(why) = closed {
            return self.redis_primary_link_lost(why);
        }
        if again {
            // Edge-triggered: more may be waiting; read it next turn, after the clients.
            self.redis_primary_again = true;
        }
    }

    /// Applies every complete command read. Commits once at the end (a transaction's
    /// commands were applied together at its EXEC, inside this run).
    fn redis_primary_apply(&mut self) {
        let Some(p) = self.redis_primary.as_mut() else { return };
        let Some(link) = p.link.as_mut() else { return };
        let buf = std::mem::take(&mut link.buf);
        let mut db = p.db;
        if db != NO_DB {
            self.engine.select(db);
        }
        let mut at = 0;
        let mut failed = None;
        let now = crate::server::now_ms();
        // In step with the primary's lineage: the commands that are mutations there (every
        // one but the stream's own PING, SELECT, MULTI/EXEC and GETACK, and PUBLISH), each of
        // which must commit exactly one mutation here.
        let (pending_before, mut numbered) = (self.engine.pending().len(), 0usize);
        // What this server's own replicas get: the stream's bytes as applied (a transaction
        // with its EXEC), so they hold the primary's stream at its offsets (PSYNC2).
        let mut passed_on = Vec::new();
        while at < buf.len() {
            let len = match command_len(&buf[at..]) {
                Ok(Some(n)) => n,
                Ok(None) => break,
                Err(e) => {
                    failed = Some(format!(
                        "the primary's stream at offset {}: {e}",
                        self.redis_primary_offset() + 1
                    ));
                    break;
                }
            };
            let cmd = &buf[at..at + len];
            at += len;
            let args = command_args(cmd);
            let is = |name: &[u8]| args[0].eq_ignore_ascii_case(name);
            let getack = is(b"replconf") && args.get(1).is_some_and(|a| a.eq_ignore_ascii_case(b"getack"));
            if getack {
                // Answered with the offset before this command, as a Redis replica answers.
                self.redis_primary_ack();
            }
            let p = self.redis_primary.as_mut().expect("following");
            let before = p.offset;
            p.offset += len as i64;
            if getack {
                passed_on.extend_from_slice(cmd);
                continue;
            }
            if is(b"multi") && p.multi.is_none() {
                p.multi = Some(OpenMulti { head: cmd.to_vec(), queued: Vec::new(), before });
            } else if is(b"exec") || is(b"discard") {
                let m = p.multi.take();
                if let Some(m) = &m {
                    passed_on.extend_from_slice(&m.head);
                    m.queued.iter().for_each(|q| passed_on.extend_from_slice(q));
                }
                passed_on.extend_from_slice(cmd);
                if is(b"exec") {
                    for queued in m.map(|m| m.queued).unwrap_or_default() {
                        numbered +=
                            self.redis_primary_run(&queued, &command_args(&queued), &mut db, now) as usize;
                    }
                }
            } else if let Some(m) = &mut p.multi {
                m.queued.push(cmd.to_vec());
            } else {
                passed_on.extend_from_slice(cmd);
                numbered += self.redis_primary_run(cmd, &args, &mut db, now) as usize;
            }
        }
        self.deliver_notifications(None);
        let Some(p) = self.redis_primary.as_mut() else { return };
        p.db = db;
        if let Some(link) = p.link.as_mut() {
            let mut buf = buf;
            buf.drain(..at);
            link.buf = buf;
        }
        let made = self.engine.pending().len() - pending_before;
        if self.redis_primary.as_ref().is_some_and(|p| p.in_step) && made != numbered {
            // A command made no mutation here, or more than one (one the engine refused, a
            // database this server lacks): from here on this server's numbers are not the
            // primary's. Before these mutations are numbered, the server leaves the primary's
            // lineage for one of its own from the same offset, without predecessor (its later
            // offsets are not the primary's), so that no replica of either takes one history
            // for the other; its firehose subscribers reconnect to learn it.
            let (from, at) = (self.engine.repl.replid, self.engine.repl.offset);
            let p = self.redis_primary.as_mut().expect("following");
            p.in_step = false;
            warn!(
                "replica of {}:{}: {numbered} mutation(s) of the primary's stream made {made} here: this server \
                 does not number writes as its primary any more; it leaves lineage {from} at offset {at} for a new one",
                p.host, p.port
            );
            self.engine.leave_lineage(ReplId::random());
            self.firehose_disconnect_all();
        }
        self.commit_batch(engine::Origin::Replay);
        self.redis_replicas_proxy(&passed_on, self.engine.repl.offset);
        if let Some(why) = failed {
            self.redis_primary_link_lost(why);
        }
    }

    /// Runs one command of the stream (`args`: its arguments) in database `db`, which a
    /// SELECT changes.
    ///
    /// True when the command is one the primary numbered (a mutation there): every command
    /// but PING, SELECT and PUBLISH.
    fn redis_primary_run(&mut self, cmd: &[u8], args: &[&[u8]], db: &mut u32, now: i64) -> bool {
        let name = args[0];
        let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
        if is(b"ping") {
            return false;
        }
        if is(b"select") {
            match args.get(1).and_then(|a| std::str::from_utf8(a).ok()?.parse::<u32>().ok()) {
                Some(n) if n < self.engine.databases() => {
                    *db = n;
                    self.engine.select(n);
                }
                _ => {
                    *db = NO_DB;
                    self.redis_primary_rejected(cmd, "ERR DB index is out of range (--databases)".into());
                }
            }
            return false;
        }
        if *db == NO_DB {
            self.redis_primary_rejected(cmd, "a command for a database this server lacks".into());
            return true;
        }
        if (is(b"publish") || is(b"spublish")) && args.len() == 3 {
            if is(b"publish") {
                self.publish_detached(args[1], args[2]);
            } else {
                self.spublish_detached(args[1], args[2]);
            }
            return false;
        }
        // Keyspace notifications, as a Redis replica raises them for its primary's commands
        // (the command is looked up for them only when they are on).
        let notify = self.notify.enabled().then(|| engine::lookup(name)).flatten();
        let before = notify.and_then(|spec| self.notify_before(spec, args));
        let started = Instant::now();
        let result = self.engine.apply_primary_command(cmd, now);
        if let (Some(spec), Some(before)) = (notify, before) {
            self.notify_after(spec, args, before, result.is_err());
        }
        match result {
            Ok(Applied::Applied | Applied::Duplicate | Applied::IgnoredRead) => {
                // Counted in INFO commandstats (and the totals), as a Redis replica counts
                // what its primary's client runs.
                if let Some(spec) = engine::lookup(name) {
                    let call = crate::commands::data_call_name(spec, args);
                    let track = self.introspection.latency_tracking;
                    self.stats.cmds.record(spec, call, b"+", started.elapsed(), track);
                }
            }
            Err(engine::RecordError::Panicked { command }) => self.fail_stop(&command),
            Err(e) => self.redis_primary_rejected(cmd, e.to_string()),
        }
        self.engine.select(*db);
        true
    }

    /// This server's lineage goes on as a successor from where it stands (a new ID, the old
    /// one and this offset as its predecessor): it stops numbering writes as the server it
    /// followed does. Its firehose replicas reconnect and follow the successor from there.
    fn redis_primary_lineage_successor(&mut self, why: &str) {
        if let Some(p) = self.redis_primary.as_mut() {
            p.in_step = false;
        }
        let repl = self.engine.repl.successor();
        self.engine.set_replication(repl);
        let from = repl.previous.map_or(String::new(), |(id, _)| id.to_string());
        info!("lineage {} continues lineage {from} from its offset {} ({why})", repl.replid, repl.offset);
        self.firehose_disconnect_all();
    }

    /// A command of the stream that could not run: logged and counted (INFO
    /// `redis_primary_rejected_commands`, and `unexpected_error_replies` as Redis counts the
    /// errors its primary's commands meet), as a Redis replica logs an error it would have
    /// answered its primary; the stream goes on.
    fn redis_primary_rejected(&mut self, cmd: &[u8], why: String) {
        self.stats.unexpected_error_replies += 1;
        let p = self.redis_primary.as_mut().expect("following");
        p.rejected += 1;
        let shown: String = String::from_utf8_lossy(&cmd[..cmd.len().min(120)]).escape_debug().collect();
        warn!("replica of {}:{}: a command from the primary failed: {why} ({shown})", p.host, p.port);
    }

    /// `replica-serve-stale-data no` while the link to the Redis primary is down: the
    /// refusal for a command that is not flagged stale (Redis's MASTERDOWN).
    pub(crate) fn stale_refusal(
        &mut self,
        spec: &'static engine::CommandSpec,
        args: &[&[u8]],
    ) -> Option<&'static [u8]> {
        if !self.running_stale() {
            return None;
        }
        const MASTERDOWN: &[u8] =
            b"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";
        // A script command is stale-safe by what its script declared (scripting/mod.rs).
        if let Some(allowed) = self.script_allowed_stale(spec, args) {
            return (!allowed).then_some(MASTERDOWN);
        }
        // By Redis's own records (PING is not stale; CONFIG SET is, a container's subcommand by
        // its own flags).
        let stale = crate::commands::command::redis_flagged(spec, args, engine::Flags::STALE, "stale");
        (!stale).then_some(MASTERDOWN)
    }

    /// A replica of a Redis primary whose link is down, with `replica-serve-stale-data no`:
    /// only the commands flagged stale run, from clients and from scripts.
    pub(crate) fn running_stale(&self) -> bool {
        let down = self.redis_primary.as_ref().is_some_and(|p| p.link.is_none());
        down && !self.redis_primary_settings.serve_stale
    }

    /// A full synchronization's file is being decoded (the old data is served meanwhile).
    pub(crate) fn redis_primary_decoding(&self) -> bool {
        let attempt = self.redis_primary.as_ref().and_then(|p| p.attempt.as_ref());
        attempt.is_some_and(|a| a.decoding.load(Ordering::Relaxed))
    }

    /// The primary's stream as applied here: its ID and the offset of the last byte of a whole
    /// command (an open transaction's bytes not counted). None before the first sync.
    pub(crate) fn redis_primary_identity(&self) -> Option<(ReplId, u64)> {
        let p = self.redis_primary.as_ref()?;
        let id = ReplId::parse(p.replid.as_deref()?)?;
        let offset = p.multi.as_ref().map_or(p.offset, |m| m.before);
        Some((id, offset.max(0) as u64))
    }

    /// The stream database a file for this server's own replica must name (the primary's
    /// stream is passed on unchanged, and selects again only when it changes database).
    pub(crate) fn redis_primary_stream_db(&self) -> Option<u32> {
        self.redis_primary.as_ref().filter(|p| p.replid.is_some()).map(|p| p.db)
    }

    /// Whether this server's logical offsets count its Redis stream one mutation per command:
    /// always as a primary; following a primary, only in step with its lineage.
    pub(crate) fn redis_primary_in_step(&self) -> bool {
        self.redis_primary.as_ref().is_none_or(|p| p.in_step)
    }

    /// Startup from this server's own file, written in step with its primary: the file's
    /// lineage was resumed, and continuing the primary's stream from the file's position keeps
    /// it in step (a full synchronization or a new stream ID decides anew).
    pub(crate) fn redis_primary_resume_in_step(&mut self) {
        if let Some(p) = self.redis_primary.as_mut() {
            p.in_step = true;
        }
    }

    fn redis_primary_offset(&self) -> i64 {
        self.redis_primary.as_ref().map_or(-1, |p| p.offset)
    }

    /// Queues `REPLCONF ACK <offset>` and writes it.
    fn redis_primary_ack(&mut self) {
        let Some(p) = self.redis_primary.as_mut() else { return };
        let offset = p.offset.to_string();
        let Some(link) = p.link.as_mut() else { return };
        resp::reply::bulk_array(&mut link.out, &[b"REPLCONF".as_slice(), b"ACK", offset.as_bytes()]);
        p.last_ack = Instant::now();
        self.redis_primary_flush();
    }

    fn redis_primary_flush(&mut self) {
        let Some(link) = self.redis_primary.as_mut().and_then(|p| p.link.as_mut()) else { return };
        while !link.out.is_empty() {
            match link.stream.write(&link.out) {
                Ok(n) => {
                    link.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // The rest goes when the socket is writable again (its event).
                Err(_) => break,
            }
        }
    }

    /// Once per cron: retries, acknowledgements, and the link's timeout.
    pub(crate) fn redis_primary_cron(&mut self) {
        let Some(p) = self.redis_primary.as_mut() else { return };
        let timeout = Duration::from_secs(self.redis_primary_settings.repl_timeout_secs.max(1));
        if p.link.is_none() {
            if let Some(a) = &p.attempt {
                // Connected, and nothing read for repl-timeout while a reply or the file was
                // expected (not while the file is decoded): Redis's words for the two cases.
                let last = a.live.last_read_ms.load(Ordering::Relaxed);
                let silent = crate::server::now_ms() - last > timeout.as_millis() as i64;
                if last > 0 && silent && !a.decoding.load(Ordering::Relaxed) {
                    let why = if a.live.stage.load(Ordering::Relaxed) == STAGE_TRANSFER {
                        "Timeout receiving bulk data from MASTER... If the problem persists try to set the \
                         'repl-timeout' parameter in redis.conf to a larger value."
                    } else {
                        "Timeout connecting to the MASTER..."
                    };
                    a.cancel();
                    warn!("replica of {}:{}: {why}", p.host, p.port);
                    p.attempt = None;
                    p.last_error = why.to_string();
                    p.next_attempt = Instant::now() + RETRY_EVERY;
                }
            } else if p.next_attempt <= Instant::now() {
                self.redis_primary_attempt();
            }
            return;
        }
        if p.last_io.elapsed() > timeout {
            return self.redis_primary_link_lost(format!(
                "nothing from the primary for {} s (repl-timeout)",
                timeout.as_secs()
            ));
        }
        if p.last_ack.elapsed() >= ACK_EVERY {
            self.redis_primary_ack();
        }
    }

    /// CLIENT KILL of the link to the primary (Redis's master client: TYPE master, or its
    /// address, `addr`): the link is dropped and continued a second later (PSYNC). True if
    /// there was such a link.
    pub(crate) fn redis_primary_kill(&mut self, addr: Option<&[u8]>) -> bool {
        let Some(link) = self.redis_primary.as_ref().and_then(|p| p.link.as_ref()) else { return false };
        let peer = link.stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        if addr.is_some_and(|a| a != peer.as_bytes()) {
            return false;
        }
        self.redis_primary_link_lost("the link was closed by CLIENT KILL".into());
        true
    }

    /// The link is gone: reads go on from the data held (as `replica-serve-stale-data yes`),
    /// an open transaction is dropped (the continuation resends it), and a new attempt
    /// continues the stream.
    fn redis_primary_link_lost(&mut self, why: String) {
        let Some(p) = self.redis_primary.as_mut() else { return };
        if let Some(mut link) = p.link.take() {
            let _ = self.poll.registry().deregister(&mut link.stream);
        }
        if let Some(m) = p.multi.take() {
            p.offset = m.before;
        }
        warn!("replica of {}:{}: {why}; reconnecting", p.host, p.port);
        p.last_error = why;
        p.down_since = Instant::now();
        p.next_attempt = Instant::now() + RETRY_EVERY;
    }

    /// INFO replication on a replica of a Redis primary (the fields Sentinel and Redis's tools
    /// read), then the fields every role has.
    pub(crate) fn redis_primary_info(&self, f: &mut dyn FnMut(&str, &dyn std::fmt::Display)) -> bool {
        let Some(p) = &self.redis_primary else { return false };
        let up = p.link.is_some();
        f("role", &"slave");
        f("goblin_ready", &(up as u8));
        f("master_host", &p.host);
        f("master_port", &p.port);
        f("master_transport", &"redis");
        f("master_link_status", &if up { "up" } else { "down" });
        f("master_last_io_seconds_ago", &if up { p.last_io.elapsed().as_secs() as i64 } else { -1 });
        let syncing = p
            .attempt
            .as_ref()
            .filter(|a| a.read.load(Ordering::Relaxed) > 0 || a.total.load(Ordering::Relaxed) > 0);
        f("master_sync_in_progress", &(syncing.is_some() as u8));
        if let Some(a) = syncing {
            // -1 while the size is unknown (a diskless transfer), as Redis reports it.
            let total = a.total.load(Ordering::Relaxed);
            f("master_sync_total_bytes", &if total == 0 { -1 } else { total as i64 });
            f("master_sync_read_bytes", &a.read.load(Ordering::Relaxed));
        }
        f("slave_read_repl_offset", &p.offset.max(0));
        f("slave_repl_offset", &p.offset.max(0));
        if !up {
            f("master_link_down_since_seconds", &p.down_since.elapsed().as_secs());
        }
        f("slave_priority", &self.redis_primary_settings.priority);
        f("slave_read_only", &1);
        f("replica_announced", &(self.redis_primary_settings.announced as u8));
        f("redis_primary_replid", &p.replid.as_deref().unwrap_or("?"));
        f("redis_primary_full_syncs", &p.full_syncs);
        f("redis_primary_partial_syncs", &p.partial_syncs);
        f("redis_primary_rejected_commands", &p.rejected);
        f("redis_primary_last_error", &p.last_error.replace(['\r', '\n'], " "));
        true
    }

    /// ROLE on a replica of a Redis primary: `slave host port state offset`.
    pub(crate) fn redis_primary_role(&self, out: &mut Vec<u8>) -> bool {
        use resp::reply;
        let Some(p) = &self.redis_primary else { return false };
        reply::array_len(out, 5);
        reply::bulk(out, b"slave");
        reply::bulk(out, p.host.as_bytes());
        reply::integer(out, p.port as i64);
        reply::bulk(out, p.state().as_bytes());
        reply::integer(out, p.offset.max(0));
        true
    }

    /// CONFIG GET's `replicaof`: "host port" while following a Redis primary.
    pub(crate) fn redis_primary_config(&self) -> String {
        self.redis_primary.as_ref().map(|p| format!("{} {}", p.host, p.port)).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encode(args: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        resp::reply::bulk_array(&mut out, &args.iter().map(|a| a.as_slice()).collect::<Vec<_>>());
        out
    }

    proptest! {
        /// Any run of commands, cut anywhere: the complete ones are found whole, in order,
        /// with their arguments; the cut one is reported incomplete, never as a command.
        #[test]
        fn commands_split_at_any_cut(
            cmds in proptest::collection::vec(
                proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 1..5), 1..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut stream = Vec::new();
            let mut ends = Vec::new();
            for c in &cmds {
                stream.extend_from_slice(&encode(c));
                ends.push(stream.len());
            }
            let cut = cut.index(stream.len() + 1);
            let buf = &stream[..cut];
            let mut at = 0;
            let mut found = 0;
            while let Some(n) = command_len(&buf[at..]).unwrap() {
                let args: Vec<Vec<u8>> = command_args(&buf[at..at + n]).iter().map(|a| a.to_vec()).collect();
                prop_assert_eq!(&args, &cmds[found]);
                at += n;
                prop_assert_eq!(at, ends[found]);
                found += 1;
            }
            prop_assert_eq!(found, ends.iter().filter(|&&e| e <= cut).count());
        }
    }

    /// A primary on a loopback socket that writes `parts` with a pause between them (so that
    /// each arrives in a read of its own), and a reader of it.
    fn reader_of(parts: Vec<Vec<u8>>) -> (Reader, std::thread::JoinHandle<()>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            for part in parts {
                s.write_all(&part).unwrap();
                s.flush().unwrap();
                std::thread::sleep(Duration::from_millis(30));
            }
        });
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        (
            Reader {
                s,
                buf: Vec::new(),
                pos: 0,
                cancel: Arc::new(AtomicBool::new(false)),
                live: Arc::new(Liveness::default()),
            },
            writer,
        )
    }

    /// Both transfer forms hand the sink the file exactly and return what followed it: a
    /// `$<len>` file, and an EOF-marked one whose mark arrives split across two reads at
    /// every point (the part before a split must not be taken for file bytes and written).
    #[test]
    fn the_rdb_transfer_reaches_the_sink_exactly_in_both_forms() {
        let payload: Vec<u8> = (0..200_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let mark = b"0123456789abcdefghij0123456789ABCDEFGHIJ".to_vec();
        let after = b"*1\r\n$4\r\nPING\r\n".to_vec();
        let mut cases = Vec::new();
        let mut head = format!("${}\r\n", payload.len()).into_bytes();
        head.extend_from_slice(&payload[..70_000]);
        let mut tail = payload[70_000..].to_vec();
        tail.extend_from_slice(&after);
        cases.push(vec![head, tail]);
        for split in [0, 1, 20, 39, 40] {
            let mut first = b"$EOF:".to_vec();
            first.extend_from_slice(&mark);
            first.extend_from_slice(b"\r\n");
            first.extend_from_slice(&payload);
            first.extend_from_slice(&mark[..split]);
            let mut second = mark[split..].to_vec();
            second.extend_from_slice(&after);
            cases.push(vec![first, second]);
        }
        for parts in cases {
            let (mut r, writer) = reader_of(parts);
            let mut got = Vec::new();
            let leftover = r
                .rdb(
                    &mut |b| {
                        got.extend_from_slice(b);
                        Ok(())
                    },
                    &AtomicU64::new(0),
                    &AtomicU64::new(0),
                    "test",
                )
                .unwrap();
            writer.join().unwrap();
            assert_eq!(got.len(), payload.len());
            assert!(got == payload, "the file bytes differ");
            // What followed the file: all of it, here or still in the socket.
            let mut rest = leftover;
            while rest.len() < after.len() {
                let mut chunk = [0u8; 64];
                let n = r.s.read(&mut chunk).unwrap();
                assert!(n > 0, "the primary's bytes after the file are missing");
                rest.extend_from_slice(&chunk[..n]);
            }
            assert_eq!(rest, after);
        }
    }

    #[test]
    fn bytes_that_are_no_command_are_refused() {
        assert!(command_len(b"+OK\r\n").is_err());
        assert!(command_len(b"*1\r\n:1\r\n").is_err());
        assert!(command_len(b"*x\r\n").is_err());
        assert!(command_len(b"*0\r\n").is_err());
        assert!(command_len(b"*1\r\n$-1\r\n").is_err());
        assert_eq!(command_len(b"*1\r\n$4\r\nPI").unwrap(), None);
        assert_eq!(command_len(b"*1\r\n$4\r\nPING\r\n").unwrap(), Some(14));
    }
}
