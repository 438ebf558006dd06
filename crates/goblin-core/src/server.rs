//! The event loop: one thread, `mio` (epoll, edge-triggered), owning the engine and every
//! connection.
//!
//! One loop turn:
//! 1. poll (timeout: 0 if work is queued, else the nearest blocked-client deadline or the next
//!    cron tick, at most 100 ms);
//! 2. continue the reads that the previous turn cut short for fairness (one bounded batch per
//!    connection per turn, so a client streaming a huge pipeline shares the loop with the
//!    others instead of holding their replies back);
//! 3. for each event: accept, read and execute every complete request (replies are appended to
//!    the connection's output buffer in request order), or note a connection as writable;
//! 4. [`Server::after_events`]: resume clients unparked by this turn's writes, time out blocked
//!    clients, run active expiry and the cron, then write each connection with pending output
//!    once.
//!
//! Other threads (the Kafka journal, replication) must not touch the engine: they queue work
//! and call [`Server::waker`]'s `wake()`; the loop then runs [`Server::on_wake`].

use crate::blocking::BlockedIndex;
use crate::config::Config;
use crate::conn::{Conn, Stream};
use engine::Engine;
use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token, Waker};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tracing::{debug, error, info, warn};

const SIGNAL: Token = Token(0);
const WAKER: Token = Token(1);
/// How long an idle server sleeps between active expiry cycles while expired keys or fields
/// are left over (see `Server::poll_timeout`).
const EXPIRE_BACKLOG_PAUSE: Duration = Duration::from_millis(3);

/// The journal's wake-up pipe: delivery reports are waiting.
const JOURNAL: Token = Token(2);
/// A replica's live link to its upstream (see replication/replica.rs).
pub(crate) const UPSTREAM: Token = Token(3);
/// The journal consumer's wake-up pipe: records of the topic are waiting.
const CONSUMER: Token = Token(4);
/// A replica's link to its Redis primary (see replication/redis_primary.rs).
pub(crate) const REDIS_PRIMARY: Token = Token(5);
/// Records taken from the journal consumer's queue per run (one run between client commands):
/// bounds how long other producers' writes hold up the clients.
const CONSUME_BATCH: usize = 256;
/// Listener `i` has token `LISTENER_BASE + i`.
const LISTENER_BASE: usize = 16;
/// Connection slot `s` has token `CONN_BASE + s`.
const CONN_BASE: usize = 1024;

/// What protected mode answers a client from off this host before closing it. Clients and
/// tools look for the DENIED code; the rest says why and what to change.
const PROTECTED_MODE_DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. \
Only clients on the loopback interface or a Unix socket are served until one of these is done: \
set a password for the default user (requirepass, or ACL SETUSER default), \
run CONFIG SET protected-mode no from a loopback connection (CONFIG REWRITE keeps it), \
or restart with --protected-mode no (protected-mode no in the configuration file). \
Turn protected mode off only where the server cannot be reached from the internet.\r\n";

/// Bytes read from a socket per `read` call, into the shared read buffer. This is also the
/// fairness quantum (see [`READS_PER_TURN`]); Redis reads the same amount per client per turn.
/// Measured with one client pipelining SETs next to 20 clients at `-P 1`: 16 KiB instead of
/// 64 KiB more than doubled the others' throughput and cut their p95 several times, for
/// about 5-10% less throughput of the lone pipelining client.
pub const READ_CHUNK: usize = 16 * 1024;
/// Reads per connection per loop turn before yielding to the others (fairness: a client that
/// streams requests without pause must not starve the rest). The remainder is read next turn,
/// after the others' requests of that turn, and only then are the replies written: so one
/// turn's work for a connection is bounded by this many `READ_CHUNK`s of requests.
const READS_PER_TURN: usize = 1;
/// The shortest `watchdog-period`: two cron periods (the cron runs every 100 ms).
const WATCHDOG_MIN_MS: u64 = 200;
/// Redis's `client-query-buffer-limit` default: unprocessed input a client may accumulate
/// (while parked, or inside one huge request) before it is disconnected.
pub const QUERY_BUFFER_LIMIT: usize = 1024 * 1024 * 1024;
/// How long a client the server closed may go on sending before its socket is closed
/// outright (see [`Conn::lingering`]).
const LINGER: Duration = Duration::from_secs(2);

/// A client's unsent replies past which its input waits (left in the socket, the next request
/// not run) until they drain to [`REPLY_RESUME_BYTES`]: a client pipelining big replies faster
/// than it reads them is slowed down, not disconnected, and its buffer stays bounded. Redis
/// leaves normal clients' buffers unlimited; `--client-output-limit` (a hard limit, default
/// above this) still applies to what a client is sent without asking (pub/sub, MONITOR) and to
/// a single reply that large.
pub const REPLY_BACKPRESSURE_BYTES: usize = 64 * 1024 * 1024;
const REPLY_RESUME_BYTES: usize = 16 * 1024 * 1024;
/// An output buffer larger than this is freed once drained instead of kept for reuse (idle
/// clients should cost little memory; reallocating after a big reply is cheap in jemalloc).
const OUT_KEEP_CAPACITY: usize = 64 * 1024;
/// Same for the unparsed-input buffer once it is empty.
const PENDING_KEEP_CAPACITY: usize = 16 * 1024;
const CRON_INTERVAL: Duration = Duration::from_millis(100);
/// Exit status of a fail-stop (EX_SOFTWARE: an internal error).
pub const FAIL_STOP_EXIT_CODE: i32 = 70;

/// Current wall-clock time in unix milliseconds (the engine's notion of "now"). The request
/// path reads it once per socket read (see [`Server::clock_ms`]), so it stays cheap:
/// clock_gettime through the vDSO plus integer math, not `SystemTime` and its 128-bit
/// `Duration::as_millis`.
pub fn now_ms() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we pass; CLOCK_REALTIME always exists.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) } == 0 {
        ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
    } else {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
    }
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
    /// `--tls-port`: accepted sockets are wrapped in a rustls server session.
    Tls(TcpListener),
    /// `--ring`: the shared-memory rings' rendezvous socket (see transport/ring.rs).
    Ring(UnixListener),
    /// `--sbe-port` and `--sbe-unixsocket`: SBE binary writes (see transport/sbe.rs).
    Sbe(TcpListener),
    SbeUnix(UnixListener),
    /// `--rdma-port`: the RDMA rings' handshake and liveness sockets (transport/rdma.rs).
    Rdma(TcpListener),
}

/// A listener kind built from a bound TCP socket.
type TcpKind = fn(TcpListener) -> Listener;

/// The TCP listeners of `ports` ((port, kind, what the log says it listens for); a port of 0
/// has none), each on every address of `bind` ("-addr", redis.conf's form, is skipped where
/// this host has no such address). Errors name the address.
fn bind_tcp(ports: &[(u16, TcpKind, &str)], bind: &[String]) -> io::Result<Vec<Listener>> {
    let mut listeners = Vec::new();
    for &(port, kind, what) in ports {
        if port == 0 {
            continue;
        }
        for b in bind.iter().flat_map(|b| b.split_whitespace()) {
            let (b, optional) = match b.strip_prefix('-') {
                Some(rest) => (rest, true),
                None => (b, false),
            };
            let ip: IpAddr = match b {
                "*" => IpAddr::from([0, 0, 0, 0]),
                "::*" => IpAddr::from([0u16; 8]),
                s => s.parse().map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidInput, format!("invalid bind address '{s}'"))
                })?,
            };
            let addr = SocketAddr::new(ip, port);
            let l = match TcpListener::bind(addr) {
                Ok(l) => l,
                Err(e)
                    if optional
                        && matches!(e.raw_os_error(), Some(libc::EADDRNOTAVAIL | libc::EAFNOSUPPORT)) =>
                {
                    warn!("skipping optional bind address {addr}: {e}");
                    continue;
                }
                Err(e) => {
                    return Err(io::Error::new(e.kind(), format!("could not listen{what} on {addr}: {e}")))
                }
            };
            info!("listening{what} on {addr}");
            listeners.push(kind(l));
        }
    }
    Ok(listeners)
}

/// Binds a Unix-socket listener at `path` (`what` names it in the error) and sets the file's
/// mode. A stale socket file from an earlier run would make bind fail: it is removed first, as
/// Redis does.
fn bind_unix(path: &std::path::Path, perm: Option<u32>, what: &str) -> io::Result<UnixListener> {
    if std::fs::symlink_metadata(path).is_ok() {
        let _ = std::fs::remove_file(path);
    }
    let l = UnixListener::bind(path).map_err(|e| {
        io::Error::new(e.kind(), format!("could not listen on {what} {}: {e}", path.display()))
    })?;
    if let Some(mode) = perm {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(l)
}

/// INFO's event loop figures (Redis 7.2's `eventloop_*`), in nanoseconds.
#[derive(Default, Clone, Copy)]
pub struct EventLoopStats {
    pub cycles: u64,
    pub nanos: u64,
    pub cmd_nanos: u64,
    pub cron_nanos: u64,
    pub max_nanos: u64,
    pub max_cmds: u64,
}

/// Counters INFO reports that the engine does not keep.
#[derive(Default)]
pub struct ServerStats {
    pub total_connections_received: u64,
    pub rejected_connections: u64,
    /// Commands the server ran itself (the engine counts data commands).
    pub server_commands: u64,
    /// Bytes read from clients and written to them (INFO `total_net_input_bytes` /
    /// `_output_`); a replica's link is counted apart, below, as Redis counts it.
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    /// Bytes read from this server's primary over its live link (the firehose, or Redis's
    /// protocol) and written to its replicas (redis-server replicas and firehose
    /// subscribers): INFO `total_net_repl_input_bytes` / `_output_`. The RDB file a forked
    /// child writes to a replica's socket is not in it (the child's writes are its own).
    pub net_repl_input_bytes: u64,
    pub net_repl_output_bytes: u64,
    /// The four byte totals above (input, output, replication input, replication output) at
    /// each cron tick, beside `ops_samples`, for INFO's `instantaneous_*_kbps`.
    pub net_samples: [[u64; 4]; 16],
    /// Forks for a snapshot, an RDB file or a replica's sync (INFO `total_forks`), and how
    /// long the last `fork()` held the server thread (`latest_fork_usec`: the page tables are
    /// copied in that call, so it grows with the dataset).
    pub total_forks: u64,
    pub latest_fork_usec: u64,
    /// Time spent in active expiry cycles, in microseconds (INFO
    /// `expire_cycle_cpu_milliseconds`), and the cycles that ended at their time budget with
    /// keys still due (`expired_time_cap_reached_count`).
    pub expire_cycle_usec: u64,
    pub expire_time_cap_reached: u64,
    /// Commands of a Redis primary's stream that failed here (INFO `unexpected_error_replies`).
    pub unexpected_error_replies: u64,
    /// Clients closed for passing the output limit.
    pub output_limit_disconnections: u64,
    /// Clients closed for passing `client-query-buffer-limit`.
    pub query_buffer_limit_disconnections: u64,
    /// Clients closed by client eviction (`maxmemory-clients`; INFO `evicted_clients`).
    pub evicted_clients: u64,
    /// Scripts EVAL cached and dropped as least recently run (INFO `evicted_scripts`).
    pub evicted_scripts: u64,
    /// Waits that polled without blocking first (the busy-poll window was open).
    pub busy_poll_spins: u64,
    /// Ring of (time, total commands) samples taken each cron tick, for
    /// instantaneous_ops_per_sec.
    pub ops_samples: [(u64, u64); 16],
    pub ops_sample_at: usize,
    /// The event loop (INFO `eventloop_*`): turns, and their time from the end of the wait
    /// to the end of the turn (nanoseconds), the share of it spent in commands and in the
    /// cron, the longest turn, and the most commands in one turn.
    pub eventloop: EventLoopStats,
    /// (turns, turn nanoseconds) at each cron tick, beside `ops_samples`, for
    /// `instantaneous_eventloop_*`.
    pub eventloop_samples: [(u64, u64); 16],
    /// The most allocated bytes seen (INFO `used_memory_peak`) and when (unix seconds,
    /// `used_memory_peak_time`). Cells, so that every reading of the figures (INFO, MEMORY
    /// STATS, through `&Server`) records a new peak it sees: a peak once reported never goes
    /// down afterwards, as in Redis, whose INFO records it too.
    pub peak_memory: std::cell::Cell<(u64, u64)>,
    /// Allocated bytes when the server was built, before any data (INFO
    /// `used_memory_startup`); kept across CONFIG RESETSTAT.
    pub startup_memory: u64,
    /// Successful socket reads and writes (INFO `total_reads_processed` / `_writes_`).
    pub reads_processed: u64,
    pub writes_processed: u64,
    /// INFO commandstats / errorstats (see stats.rs).
    pub cmds: crate::stats::CommandStats,
}

impl ServerStats {
    /// Records `used` allocated bytes: a new peak, with its time.
    pub fn note_memory(&self, used: u64) -> (u64, u64) {
        let (peak, at) = self.peak_memory.get();
        if used > peak {
            let now = (used, (now_ms() / 1000) as u64);
            self.peak_memory.set(now);
            return now;
        }
        (peak, at)
    }
}

/// The Kafka journal and what its startup replay did (see journal/).
#[cfg(feature = "kafka")]
pub struct JournalHandle {
    pub journal: crate::journal::kafka::Journal,
    pub replay: crate::journal::kafka::ReplayStats,
    /// The runtime consumer of the topic (DESIGN.md decision 3).
    pub consumer: crate::journal::kafka::Consumer,
}

/// Without the `kafka` feature there is never a journal.
#[cfg(not(feature = "kafka"))]
pub struct JournalHandle;

pub struct Server {
    pub cfg: Config,
    /// The Kafka journal, with --kafka (a batch sink; polled when its wake-up pipe fires).
    pub(crate) journal: Option<JournalHandle>,
    /// Connections (slot, id) with replies held for Kafka's acknowledgement.
    pub(crate) held: Vec<(usize, u64)>,
    /// Writes are held: unacknowledged journal bytes passed --kafka-pending-bytes (see
    /// `pause`). A connection with a held write is read no further until then.
    pub(crate) input_paused: bool,
    /// What the log has said of those pauses (rate-limited: a client that outruns Kafka
    /// crosses the watermark many times a second).
    pause_log: PauseLog,
    /// Connections whose reads were skipped while their write was held.
    paused_reads: Vec<usize>,
    /// The journal consumer's last run stopped at its bound with records left: run it again
    /// next turn without waiting (its wake-up pipe fires only on empty -> non-empty).
    consume_again: bool,
    /// The highest logical offset a WAITAOF parked for this turn (0: none): the journal is
    /// asked to send without lingering.
    pub(crate) journal_hurry: u64,
    /// When the journal consumer wants to be steered again (its idle wait; see
    /// `journal::kafka::Consumer::steer`).
    consumer_wake: Option<Instant>,
    pub(crate) poll: Poll,
    listeners: Vec<Listener>,
    /// With `--replica-tcp`/`--replica-uds`: the upstream link (see replication/replica.rs).
    pub(crate) replica: Option<crate::replication::replica::Replica>,
    /// Firehose subscribers and frames held for Kafka (see replication/upstream.rs).
    pub(crate) firehose: crate::replication::upstream::Firehose,
    /// redis-server replicas attached with SYNC / PSYNC.
    pub(crate) redis_replicas: crate::replication::redis_replicas::RedisReplicas,
    /// Clients parked in WAIT, and whether a subscriber acknowledged something since they
    /// were last checked.
    pub(crate) waits: Vec<(usize, u64)>,
    pub(crate) waits_dirty: bool,
    /// When client eviction last warned that it could not get under its limit (at most one
    /// warning a minute).
    client_eviction_warned: Option<Instant>,
    /// `client-output-buffer-limit`, per class (`--client-output-limit` is the normal hard).
    pub(crate) output_limits: crate::output_limits::OutputLimits,
    /// `oom-score-adj` / `oom-score-adj-values` and the score this process started with.
    pub(crate) oom: crate::oom_score::OomScore,
    /// What the clients held at the last client-eviction pass (after it evicted), for the
    /// check before a client's input runs ([`Server::over_client_limit`]).
    clients_mem: u64,
    /// The upstream link's read was cut short for fairness: read again next turn.
    pub(crate) upstream_again: bool,
    /// Cluster mode's node identity (`--cluster-enabled yes`; cluster.rs).
    pub(crate) cluster: crate::cluster::Cluster,
    /// The Redis primary this server follows (`REPLICAOF host port`), if any.
    pub(crate) redis_primary: Option<crate::replication::redis_primary::RedisPrimary>,
    /// `masteruser`, `masterauth`, `repl-timeout`.
    pub(crate) redis_primary_settings: crate::replication::redis_primary::PrimarySettings,
    /// A FAILOVER under way (replication/failover.rs).
    pub(crate) failover: Option<crate::replication::failover::Failover>,
    /// A shutdown waiting for its redis-server replicas (shutdown.rs).
    pub(crate) shutdown_wait: Option<crate::shutdown::ShutdownWait>,
    /// The link to the Redis primary had more to read than one turn's share.
    pub(crate) redis_primary_again: bool,
    /// EXEC is running its queued commands (WAIT answers at once there, as in Redis).
    pub(crate) in_exec: bool,
    /// The Unix socket path we created, removed at shutdown.
    unix_path: Option<PathBuf>,
    /// `--ring` connections and their polling state (see transport/ring.rs).
    pub(crate) rings: crate::transport::ring::Rings,
    /// The `--sbe-unixsocket` path we created, removed at shutdown.
    sbe_unix_path: Option<PathBuf>,
    /// The SBE decoder's reusable buffers (see transport/sbe.rs).
    pub(crate) sbe_scratch: crate::transport::sbe::Scratch,
    /// Connection slab: slot -> connection. A connection being served is taken out of its slot
    /// for the duration (so handlers can hold it and the server at once); the slot stays
    /// reserved meanwhile because slots are only reused after `close`.
    pub conns: Vec<Option<Box<Conn>>>,
    free_slots: Vec<usize>,
    pub nclients: usize,
    next_client_id: u64,
    pub engine: Engine,
    /// Users and passwords (--auth-file, --requirepass, CONFIG SET requirepass).
    pub(crate) users: crate::auth::Users,
    /// ACL refusals and failed authentications (ACL LOG, INFO `acl_access_denied_*`).
    pub(crate) acl_log: crate::auth::AclLog,
    /// The `--tls-port` server configuration (None without a TLS listener).
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
    /// Snapshot path, save rules, children and their outcomes (see snapshots.rs).
    pub(crate) snapshots: crate::snapshots::Snapshots,
    /// The DEBUG BATCHES sink: kept only when DEBUG is enabled (see batches.rs).
    pub(crate) batch_history: Option<crate::batches::BatchHistory>,
    /// Shared read buffer: complete requests are parsed straight out of it.
    scratch: Vec<u8>,
    /// Slots with output (or a close) to handle at the end of this turn.
    write_queue: Vec<usize>,
    /// Slots whose socket may still hold input (read cut short for fairness).
    read_again: Vec<usize>,
    /// Slots unparked this turn whose buffered input must now be processed.
    pub(crate) resume: Vec<usize>,
    pub(crate) blocked: BlockedIndex,
    pub(crate) watches: crate::watch::Watches,
    /// Pub/sub channels and patterns -> subscribers (see pubsub.rs).
    pub(crate) pubsub: crate::pubsub::PubSub,
    /// SLOWLOG, LATENCY and MONITOR state (see [`crate::introspection`]).
    pub(crate) introspection: crate::introspection::Introspection,
    /// HOTKEYS: the tracking session, if one ran (`hotkeys.rs`).
    pub(crate) hotkeys: crate::hotkeys::Hotkeys,
    /// Keyspace notifications (see [`crate::notify`]).
    pub(crate) notify: crate::notify::Notifier,
    /// Client-side caching (see [`crate::tracking`]).
    pub(crate) tracking: crate::tracking::Tracking,
    /// CLIENT PAUSE (see [`crate::pause`]).
    pub(crate) pause: crate::pause::Pause,
    /// CONFIG SET values of settings that change nothing here (see commands/config.rs).
    pub(crate) inert_config: std::collections::HashMap<&'static str, String>,
    /// `watchdog-period` in milliseconds (0: off): see `set_watchdog_period`.
    pub(crate) watchdog_period_ms: u64,
    /// The configuration file the server started with (absolute; CONFIG REWRITE writes it).
    pub(crate) config_file: Option<std::path::PathBuf>,
    /// Settings changed since startup (CONFIG SET) or given on the command line, by their
    /// CONFIG REWRITE names: what CONFIG REWRITE writes back.
    pub(crate) config_changed: Vec<String>,
    /// DEBUG SET-ACTIVE-EXPIRE: active expiry can be turned off for tests, as in Redis.
    pub(crate) active_expire_enabled: bool,
    /// The Lua VM and script cache, built on first use and rebuilt by SCRIPT FLUSH; taken out
    /// while a script runs (see scripting/).
    pub(crate) scripting: Option<Box<crate::scripting::Scripting>>,
    /// The functions' VM and registry (scripting/functions.rs), built on first use and
    /// rebuilt when the engine's libraries change; taken out while a function runs.
    pub(crate) functions: Option<Box<crate::scripting::functions::FunctionsVm>>,
    /// Events a busy script's loop turn (`busy_turn`) saw but left for the next real turn
    /// (signals, the waker, the journal's pipe).
    deferred_tokens: Vec<Token>,
    signal_rx: mio::unix::pipe::Receiver,
    _signal_tx: mio::unix::pipe::Sender,
    waker: Arc<Waker>,
    pub stats: ServerStats,
    pub started: Instant,
    /// Random id of this process run (INFO `run_id`), unlike `master_replid`, which names the
    /// data's lineage and will survive restarts once recovery exists.
    pub run_id: String,
    /// What `--numa` did (INFO server's `numa_*` fields).
    pub numa: Option<crate::numa::Placement>,
    last_cron: Instant,
    last_expire: Instant,
    /// The last active expiry cycle stopped at its time budget with more keys or fields due.
    expire_backlog: bool,
    /// Set by SIGTERM/SIGINT or SHUTDOWN: the loop exits after this turn.
    pub(crate) shutdown: bool,
    /// What SIGTERM and SIGINT do (Redis's `shutdown-on-sigterm` and `shutdown-on-sigint`).
    pub(crate) shutdown_on_sigterm: ShutdownFlags,
    pub(crate) shutdown_on_sigint: ShutdownFlags,
    /// The shutdown's wait for Kafka's acknowledgements (before the final snapshot) ran out:
    /// `close_all` does not wait a second time.
    pub(crate) journal_given_up: bool,
    /// An accept failed (e.g. out of file descriptors): retry the listeners at the next cron.
    accept_retry: bool,
    pub(crate) limits: resp::Limits,
    /// The time commands run at, in unix ms: read once per socket read (a batch of requests)
    /// and again every [`crate::dispatch::CLOCK_EVERY`] commands inside a long batch, instead
    /// of once per command. Staleness is bounded by one batch's work, well under the 1 ms
    /// resolution of PX expiries for the batches a client at `-P 1` sends.
    pub(crate) clock_ms: i64,
    /// While a transaction or a script runs: the time, in unix microseconds, it started at.
    /// TIME answers it throughout, as Redis 8 freezes time for an execution unit.
    pub(crate) time_snapshot_us: Option<i64>,
    /// used_memory for the maxmemory check (commands/info.rs).
    pub(crate) used_memory: crate::commands::info::UsedMemory,
    /// Monotonic time when this loop turn's poll returned (`last_active`, which only needs
    /// seconds, is stamped from it instead of reading the clock per read).
    pub(crate) turn_start: Instant,
    /// `client-query-buffer-limit`: a client's unprocessed input past this closes it.
    pub query_buffer_limit: usize,
    /// Clients closed with [`Server::close_lingering`], oldest first: (id, when).
    lingering: Vec<(u64, Instant)>,
    /// total_commands() at the end of the last loop turn (INFO `eventloop_cmd_per_cycle_max`).
    turn_commands: u64,
    /// Whether the next wait spins for up to `--busy-poll-us` first; see `wait_for_events`.
    busy_poll: bool,
    /// When the command now running started (the commandstats clock read): a script takes it
    /// as its own start for busy detection instead of reading the clock again. Set just
    /// before a command runs and cleared after it, so a stale value is never seen (a path
    /// that does not set it leaves None, and the script reads the clock).
    pub(crate) cmd_started: Option<Instant>,
}

/// Write end of the signal pipe, for the async-signal-safe handler.
static SIGNAL_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe work here: one write(2) to the pipe, preserving errno.
    unsafe {
        let saved = *libc::__errno_location();
        let fd = SIGNAL_FD.load(Ordering::Relaxed);
        if fd >= 0 {
            let b = sig as u8;
            libc::write(fd, &b as *const u8 as *const libc::c_void, 1);
        }
        *libc::__errno_location() = saved;
    }
}

/// Descriptors kept for listeners, the poller, the signal pipe, logs and future subsystems.
const RESERVED_FDS: u64 = 64;

/// Raises RLIMIT_NOFILE so `maxclients` clients can connect, as Redis does at startup; if the
/// hard limit is lower, logs how many clients will really fit.
fn raise_fd_limit(want: u64) {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 || lim.rlim_cur >= want {
            return;
        }
        let target = want.min(lim.rlim_max);
        let new = libc::rlimit { rlim_cur: target, rlim_max: lim.rlim_max };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &new) != 0 || target < want {
            warn!(
                "open files limit is {}: at most about {} clients can connect (maxclients asks for more)",
                target.max(lim.rlim_cur),
                target.max(lim.rlim_cur).saturating_sub(RESERVED_FDS)
            );
        }
    }
}

fn install_signal_handlers(fd: i32) -> io::Result<()> {
    SIGNAL_FD.store(fd, Ordering::Relaxed);
    // A write past the file-size limit (RLIMIT_FSIZE) must fail with EFBIG, as on a full disk,
    // and not kill the server: a save reports the error and the dataset keeps being served.
    // SAFETY: setting a signal's disposition to ignore.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: a zeroed sigaction with a plain handler and SA_RESTART is a valid argument.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Warns, as Redis does, when the kernel caps the listen backlog below `--tcp-backlog`.
fn check_somaxconn(backlog: i32) {
    let Ok(text) = std::fs::read_to_string("/proc/sys/net/core/somaxconn") else { return };
    if let Ok(max) = text.trim().parse::<i32>() {
        if max < backlog {
            warn!(
                "the TCP backlog setting of {backlog} cannot be enforced because \
                 /proc/sys/net/core/somaxconn is set to the lower value of {max}"
            );
        }
    }
}

impl Server {
    /// Builds the server around a recovered engine: the poller, the signal handlers, no
    /// listener yet. Startup calls [`Server::open_listeners`] last, once recovery is over, so no
    /// client can observe a half-recovered dataset.
    pub fn new(
        cfg: Config,
        mut engine: Engine,
        snapshots: crate::snapshots::Snapshots,
    ) -> io::Result<Server> {
        engine.set_evict_config(cfg.evict_config());
        raise_fd_limit(cfg.maxclients as u64 + RESERVED_FDS);
        let poll = Poll::new()?;
        let (tx, mut rx) = mio::unix::pipe::new()?;
        poll.registry().register(&mut rx, SIGNAL, Interest::READABLE)?;
        install_signal_handlers(tx.as_raw_fd())?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let limits = resp::Limits { max_bulk_len: cfg.proto_max_bulk_len, ..resp::Limits::default() };
        let now = Instant::now();
        let output_limits = crate::output_limits::OutputLimits::with_normal_hard(cfg.client_output_limit);
        let batch_history = (cfg.debug_batch_history && cfg.enable_debug_command.allowed_anywhere_or_local())
            .then(Default::default);
        Ok(Server {
            journal: None,
            held: Vec::new(),
            input_paused: false,
            pause_log: PauseLog::default(),
            paused_reads: Vec::new(),
            consume_again: false,
            journal_hurry: 0,
            consumer_wake: None,
            cfg,
            poll,
            listeners: Vec::new(),
            replica: None,
            firehose: Default::default(),
            redis_replicas: crate::replication::redis_replicas::RedisReplicas::new(),
            waits: Vec::new(),
            waits_dirty: false,
            client_eviction_warned: None,
            oom: Default::default(),
            output_limits,
            clients_mem: 0,
            upstream_again: false,
            cluster: crate::cluster::Cluster::new(),
            redis_primary: None,
            failover: None,
            shutdown_wait: None,
            redis_primary_settings: Default::default(),
            redis_primary_again: false,
            in_exec: false,
            unix_path: None,
            rings: Default::default(),
            sbe_unix_path: None,
            sbe_scratch: Default::default(),
            conns: Vec::new(),
            free_slots: Vec::new(),
            nclients: 0,
            next_client_id: 1,
            engine,
            users: crate::auth::Users::from_config(None, None).expect("no file, no password: cannot fail"),
            acl_log: crate::auth::AclLog::default(),
            tls: None,
            snapshots,
            batch_history,
            scratch: vec![0; READ_CHUNK],
            write_queue: Vec::new(),
            read_again: Vec::new(),
            resume: Vec::new(),
            blocked: BlockedIndex::default(),
            watches: Default::default(),
            pubsub: Default::default(),
            introspection: Default::default(),
            hotkeys: Default::default(),
            notify: Default::default(),
            tracking: Default::default(),
            pause: Default::default(),
            inert_config: Default::default(),
            watchdog_period_ms: 0,
            config_file: None,
            config_changed: Vec::new(),
            active_expire_enabled: true,
            scripting: None,
            functions: None,
            deferred_tokens: Vec::new(),
            signal_rx: rx,
            _signal_tx: tx,
            waker,
            stats: ServerStats::default(),
            started: now,
            run_id: engine::ReplId::random().to_string(),
            numa: None,
            last_cron: now,
            last_expire: now,
            expire_backlog: false,
            shutdown: false,
            shutdown_on_sigterm: ShutdownFlags::default(),
            shutdown_on_sigint: ShutdownFlags::default(),
            journal_given_up: false,
            accept_retry: false,
            limits,
            clock_ms: now_ms(),
            time_snapshot_us: None,
            used_memory: Default::default(),
            turn_start: now,
            turn_commands: 0,
            query_buffer_limit: QUERY_BUFFER_LIMIT,
            lingering: Vec::new(),
            busy_poll: false,
            cmd_started: None,
        })
    }

    /// Installs the journal (after recovery) and registers its wake-up pipe in the poll set.
    pub fn set_journal(&mut self, journal: Option<JournalHandle>) -> io::Result<()> {
        #[cfg(feature = "kafka")]
        if let Some(j) = &journal {
            let fd = j.journal.wakeup_fd();
            self.poll.registry().register(&mut mio::unix::SourceFd(&fd), JOURNAL, Interest::READABLE)?;
            let fd = j.journal.timer_fd();
            self.poll.registry().register(&mut mio::unix::SourceFd(&fd), JOURNAL, Interest::READABLE)?;
            let fd = j.consumer.wakeup_fd();
            self.poll.registry().register(&mut mio::unix::SourceFd(&fd), CONSUMER, Interest::READABLE)?;
            // Drain first, then wait: records may have arrived before the registration.
            self.consume_again = true;
        }
        self.journal = journal;
        Ok(())
    }

    /// The listeners' descriptors (a forked child closes its copies).
    pub(crate) fn listener_fds(&self) -> Vec<i32> {
        self.listeners
            .iter()
            .map(|l| match l {
                Listener::Tcp(l) | Listener::Tls(l) | Listener::Sbe(l) | Listener::Rdma(l) => l.as_raw_fd(),
                Listener::Unix(l) | Listener::Ring(l) | Listener::SbeUnix(l) => l.as_raw_fd(),
            })
            .collect()
    }

    /// Opens the TCP and Unix listeners: the last startup step. Errors (address in use, bad
    /// bind address, socket path not writable) are returned for `main` to report.
    pub fn open_listeners(&mut self) -> io::Result<()> {
        let cfg = &self.cfg;
        if cfg.rdma_port != 0 {
            crate::transport::rdma::check_fabric(cfg)?;
        }
        let mut listeners = bind_tcp(&self.tcp_ports(true), &cfg.bind)?;
        let mut unix_path = None;
        if let Some(path) = &cfg.unixsocket {
            listeners.push(Listener::Unix(bind_unix(path, cfg.unixsocketperm, "unix socket")?));
            info!("listening on unix socket {}", path.display());
            unix_path = Some(path.clone());
        }
        if let Some(path) = &cfg.ring {
            listeners.push(Listener::Ring(bind_unix(path, Some(cfg.ring_perm), "ring socket")?));
            info!("listening for ring clients on {}", path.display());
            self.rings.path = Some(path.clone());
        }
        if let Some(path) = &cfg.sbe_unixsocket {
            let perm = Some(cfg.sbe_unixsocket_perm);
            listeners.push(Listener::SbeUnix(bind_unix(path, perm, "SBE unix socket")?));
            info!("listening for SBE binary writes on unix socket {}", path.display());
            self.sbe_unix_path = Some(path.clone());
        }
        if listeners.is_empty() {
            warn!("no listener configured (--port 0 and no --unixsocket)");
        }
        // The kernel's default backlog (128, what the sockets were opened with) overflows
        // when hundreds of clients connect at once (a pool starting, a reconnect storm): the
        // overflowing ones wait a second for their SYN's retransmission. listen() again on a
        // listening socket sets the new backlog.
        if !listeners.is_empty() {
            check_somaxconn(self.cfg.tcp_backlog);
        }
        self.listeners = listeners;
        self.unix_path = unix_path;
        self.register_listeners()
    }

    /// The TCP ports this server listens on, as [`bind_tcp`] takes them: the plain port, and
    /// with `all` the TLS, SBE and RDMA ports too.
    fn tcp_ports(&self, all: bool) -> Vec<(u16, TcpKind, &'static str)> {
        let cfg = &self.cfg;
        let mut ports: Vec<(u16, TcpKind, &'static str)> = vec![(cfg.port, Listener::Tcp, "")];
        if all {
            ports.extend([
                (cfg.tls_port, Listener::Tls as TcpKind, " for TLS"),
                (cfg.sbe_port, Listener::Sbe, " for SBE binary writes"),
                (cfg.rdma_port, Listener::Rdma, " for RDMA ring clients"),
            ]);
        }
        ports
    }

    /// Registers every listener with the poller under its token (`LISTENER_BASE` + its index)
    /// and sets its backlog.
    fn register_listeners(&mut self) -> io::Result<()> {
        let backlog = self.cfg.tcp_backlog;
        for (i, l) in self.listeners.iter_mut().enumerate() {
            let t = Token(LISTENER_BASE + i);
            let fd = match l {
                Listener::Tcp(l) | Listener::Tls(l) | Listener::Sbe(l) | Listener::Rdma(l) => {
                    self.poll.registry().register(l, t, Interest::READABLE)?;
                    l.as_raw_fd()
                }
                Listener::Unix(l) | Listener::Ring(l) | Listener::SbeUnix(l) => {
                    self.poll.registry().register(l, t, Interest::READABLE)?;
                    l.as_raw_fd()
                }
            };
            // SAFETY: `fd` is a bound, listening socket this server owns.
            if unsafe { libc::listen(fd, backlog) } != 0 {
                let e = io::Error::last_os_error();
                return Err(io::Error::new(e.kind(), format!("could not set the listen backlog: {e}")));
            }
        }
        Ok(())
    }

    /// CONFIG SET port / bind, as Redis applies them: the plain TCP listener moves to `port`,
    /// and with a new `bind` every TCP listener (TLS, SBE and RDMA too) to its addresses. The
    /// old sockets of the kinds that change are closed first, since the new ones may take the
    /// same address; if the new ones cannot all be bound, the old settings are bound again and
    /// the error is returned (the setting is unchanged). Accepted connections stay. Listener
    /// tokens are given out again: they are indexes into `listeners`.
    pub(crate) fn relisten(&mut self, port: u16, bind: Vec<String>) -> Result<(), String> {
        let all = bind != self.cfg.bind;
        let moves = |l: &Listener| match l {
            Listener::Tcp(_) => true,
            Listener::Tls(_) | Listener::Sbe(_) | Listener::Rdma(_) => all,
            Listener::Unix(_) | Listener::Ring(_) | Listener::SbeUnix(_) => false,
        };
        let mut old = std::mem::take(&mut self.listeners);
        for l in old.iter_mut() {
            let _ = match l {
                Listener::Tcp(l) | Listener::Tls(l) | Listener::Sbe(l) | Listener::Rdma(l) => {
                    self.poll.registry().deregister(l)
                }
                Listener::Unix(l) | Listener::Ring(l) | Listener::SbeUnix(l) => {
                    self.poll.registry().deregister(l)
                }
            };
        }
        let (closed, kept): (Vec<Listener>, Vec<Listener>) = old.into_iter().partition(|l| moves(l));
        drop(closed);
        let (old_port, old_bind) = (self.cfg.port, std::mem::replace(&mut self.cfg.bind, bind));
        self.cfg.port = port;
        let outcome = match bind_tcp(&self.tcp_ports(all), &self.cfg.bind) {
            Ok(fresh) => Ok(fresh),
            Err(e) => {
                warn!("CONFIG SET: {e}; listening on the previous addresses again");
                self.cfg.port = old_port;
                self.cfg.bind = old_bind;
                Err(bind_tcp(&self.tcp_ports(all), &self.cfg.bind).unwrap_or_else(|e| {
                    error!("CONFIG SET: could not listen on the previous addresses again: {e}");
                    Vec::new()
                }))
            }
        };
        let failed = outcome.is_err();
        self.listeners = outcome.unwrap_or_else(|back| back).into_iter().chain(kept).collect();
        if let Err(e) = self.register_listeners() {
            error!("CONFIG SET: could not register the listeners: {e}");
        }
        if failed {
            return Err(if old_port != port {
                "Unable to listen on this port. Check server logs."
            } else {
                "Failed to bind to specified addresses."
            }
            .to_string());
        }
        Ok(())
    }

    /// A handle other threads use to wake the loop after queueing work for it (the replica's
    /// connector thread). The loop then calls [`Server::on_wake`].
    pub fn waker(&self) -> Arc<Waker> {
        self.waker.clone()
    }

    /// Runs on the server thread after another thread called `wake()`: the replica's
    /// connector thread finished an attempt.
    fn on_wake(&mut self) {
        self.replica_on_wake();
        self.redis_primary_on_wake();
    }

    /// Fail-stop: a write crashed its handler, so the store may hold part of its effect that
    /// no mutation describes. Serving on would let the dataset drift from its mutation stream
    /// (and, with a durable journal, from the log), so the process exits non-zero at once,
    /// before the next batch: the pending mutations are never committed.
    pub(crate) fn fail_stop(&mut self, command: &str) -> ! {
        tracing::error!(
            "command '{command}' panicked while writing: the dataset may no longer match its \
             mutation stream; exiting (fail-stop) at logical offset {}",
            self.engine.repl.offset
        );
        std::process::exit(FAIL_STOP_EXIT_CODE);
    }

    /// Serves the journal's delivery reports (when its wake-up pipe fires, and from the cron
    /// as a backstop), releases the replies they acknowledge, and re-evaluates backpressure.
    /// A record refused for good stops the server.
    fn poll_journal(&mut self) {
        #[cfg(feature = "kafka")]
        if let Some(j) = &mut self.journal {
            j.journal.drain_wakeup();
            if let Err(e) = j.journal.poll() {
                self.journal_failed(&e);
            }
            self.release_acknowledged();
            self.update_input_pause();
        }
    }

    /// Before a snapshot freezes the dataset: waits (at most `bound`, on this thread) until
    /// Kafka has acknowledged every journal record, so that the snapshot holds no write the
    /// topic may never get. A snapshot ahead of the topic is a hole in the lineage: the records
    /// lost with a crash (`queued` mode, or a `broker` group in flight) are in the snapshot,
    /// the restarted primary continues after them, and every later replay of the topic meets
    /// the missing offsets (DESIGN.md decision 4) and stops.
    ///
    /// Err (the caller's reply or log line): Kafka did not acknowledge in time, or has not
    /// acknowledged the oldest pending record for longer than `bound` already (an outage:
    /// failing at once spares every periodic save a stall). Replies that the acknowledgements
    /// release go out; writes held by the journal's backpressure run on the next loop turn
    /// (`after_events`), after the snapshot's fork, never inside it.
    pub(crate) fn settle_journal(&mut self, bound: Duration) -> Result<(), String> {
        #[cfg(feature = "kafka")]
        if let Some(j) = &mut self.journal {
            let pending = j.journal.pending();
            if pending == 0 {
                return Ok(());
            }
            let waited = j.journal.oldest_pending_age();
            let flushed = if waited > bound {
                Err(())
            } else {
                let r = j.journal.flush(bound).map_err(|_| ());
                let failed = j.journal.acks.failed.borrow().clone();
                if let Some(e) = failed {
                    self.journal_failed(&e);
                }
                r
            };
            self.release_acknowledged();
            let Some(j) = &self.journal else { return Ok(()) };
            let left = j.journal.pending();
            if flushed.is_err() || left > 0 {
                return Err(format!(
                    "Kafka has not acknowledged {left} journal records (the oldest waited {} ms): a snapshot \
                     now could hold writes the topic never gets; retry once Kafka answers",
                    j.journal.oldest_pending_age().as_millis().max(waited.as_millis())
                ));
            }
        }
        let _ = bound;
        Ok(())
    }

    /// Releases what the journal's acknowledged offset allows: held replies (broker ack mode)
    /// and retained firehose frames.
    #[cfg(feature = "kafka")]
    fn release_acknowledged(&mut self) {
        let Some(j) = &mut self.journal else { return };
        let acked = j.journal.acks.logical.get();
        // Parked WAITAOFs may have what they wait for.
        if !self.waits.is_empty() {
            self.waits_dirty = true;
        }
        if !self.held.is_empty() {
            let released = self.release_held(acked);
            if released > 0 {
                if let Some(j) = &mut self.journal {
                    j.journal.released(released);
                }
            }
        }
        self.firehose_release(acked);
        self.redis_replicas_release(acked);
    }

    /// The end of a loop turn, before the server may sleep: broker ack mode asks for the
    /// group of records handed to librdkafka this turn to be sent now.
    fn journal_end_turn(&mut self) {
        #[cfg(feature = "kafka")]
        if let Some(j) = &mut self.journal {
            if let Err(e) = j.journal.end_turn() {
                self.journal_failed(&e);
            }
            let through = std::mem::take(&mut self.journal_hurry);
            if through > 0 {
                if let Some(j) = &self.journal {
                    j.journal.hurry(through);
                }
            }
            if let Some(j) = &mut self.journal {
                match j.consumer.steer(&j.journal.acks) {
                    Ok(wake) => self.consumer_wake = wake,
                    Err(e) => self.consumer_failed(&e),
                }
            }
        }
    }

    /// Runs the journal consumer once (when its wake-up pipe fires, when the last run left
    /// records, and from the cron as a backstop): at most [`CONSUME_BATCH`] records, between
    /// client commands. Other producers' writes commit as one batch of origin External (every
    /// sink but the journal gets it) and may serve parked clients; the next own records are
    /// stamped with the new position. A record that cannot be applied, or one of another
    /// goblin lineage, stops the server (fail-stop), naming topic, partition and offset.
    fn consume_journal(&mut self) {
        #[cfg(feature = "kafka")]
        {
            let Some(j) = &mut self.journal else { return };
            let drained = match j.consumer.drain(&mut self.engine, CONSUME_BATCH, &j.journal.acks) {
                Ok(d) => d,
                Err(e) => self.consumer_failed(&e),
            };
            self.consume_again = drained.more;
            let position = j.consumer.position;
            if drained.applied {
                self.commit_batch(engine::Origin::External);
            }
            if let Some(j) = &mut self.journal {
                j.journal.applied_through = position - 1;
            }
            if drained.applied && !self.engine.ready_keys.is_empty() {
                self.serve_ready_keys();
            }
        }
    }

    /// Fail-stop for the journal consumer: a record of the topic that cannot be applied (or
    /// a second primary writing it) means the served data can no longer follow the log.
    #[cfg_attr(not(feature = "kafka"), allow(dead_code))]
    pub(crate) fn consumer_failed(&mut self, e: &str) -> ! {
        tracing::error!(
            "Kafka journal consumer stopped: {e}; exiting so that the served data does not diverge from the log"
        );
        std::process::exit(FAIL_STOP_EXIT_CODE);
    }

    /// The largest write request the Kafka journal can hold in one record (None: no journal).
    pub(crate) fn journal_record_limit(&self) -> Option<usize> {
        #[cfg(feature = "kafka")]
        if let Some(j) = &self.journal {
            return Some(j.journal.record_limit);
        }
        None
    }

    /// The first broker offset of the topic the server thread has not processed yet (-1: no
    /// journal). Snapshots save it (DESIGN.md decision 3).
    /// On a replica: how far its state reflects other producers' records (see
    /// `Replica::consumer_position`).
    pub(crate) fn journal_consumer_position(&self) -> i64 {
        #[cfg(feature = "kafka")]
        if let Some(j) = &self.journal {
            return j.consumer.position;
        }
        self.replica.as_ref().map_or(-1, |r| r.consumer_position)
    }

    /// `--kafka-pending-bytes`: pauses command input while unacknowledged journal bytes are
    /// over the watermark, resumes it below. Cheap: runs every loop turn (records are produced
    /// by the turn's commands), while the producer itself is polled only when woken.
    fn update_input_pause(&mut self) {
        #[cfg(feature = "kafka")]
        if let Some(j) = &self.journal {
            let over = j.journal.pending_bytes() > self.cfg.kafka_pending_bytes;
            if over != self.input_paused {
                self.input_paused = over;
                if over {
                    self.pause_log.paused();
                } else {
                    self.pause_log.resumed();
                    self.release_journal_held();
                    for slot in std::mem::take(&mut self.paused_reads) {
                        if let Some(Some(c)) = self.conns.get_mut(slot) {
                            if !c.in_read_again {
                                c.in_read_again = true;
                                self.read_again.push(slot);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The log lines of `--kafka-pending-bytes` pauses. Under a client that writes faster than
/// Kafka acknowledges, the pending bytes cross the watermark back and forth many times a
/// second: the first pause of a run is logged with the resume that ends it; later ones within
/// `PauseLog::QUIET` are counted, and the next logged pause says how many there were.
#[derive(Default)]
struct PauseLog {
    /// When the last logged pause began.
    logged_at: Option<Instant>,
    /// The pause now in progress is logged (its resume will be too).
    logging: bool,
    /// When the pause now in progress began.
    since: Option<Instant>,
    /// Pauses since the last logged one.
    unlogged: u64,
    /// Pauses since the server started (INFO `kafka_input_pauses`).
    total: u64,
}

impl PauseLog {
    const QUIET: Duration = Duration::from_secs(10);

    fn paused(&mut self) {
        let now = Instant::now();
        self.since = Some(now);
        self.total += 1;
        self.logging = self.logged_at.is_none_or(|t| now.duration_since(t) >= Self::QUIET);
        if !self.logging {
            self.unlogged += 1;
            return;
        }
        match std::mem::take(&mut self.unlogged) {
            0 => warn!("Kafka journal: over --kafka-pending-bytes unacknowledged; holding writes"),
            n => warn!(
                "Kafka journal: over --kafka-pending-bytes unacknowledged; holding writes ({n} more pauses since the \
                 last one logged)"
            ),
        }
        self.logged_at = Some(now);
    }

    fn resumed(&mut self) {
        let held = self.since.take().map_or(0, |t| t.elapsed().as_millis());
        if std::mem::take(&mut self.logging) {
            info!("Kafka journal: caught up after {held} ms; running the held writes");
        }
    }
}

impl Server {
    /// Fail-stop for the journal: a write that cannot reach the durable log must not go on
    /// being served as if it had.
    #[cfg_attr(not(feature = "kafka"), allow(dead_code))]
    pub(crate) fn journal_failed(&mut self, e: &str) -> ! {
        tracing::error!(
            "Kafka journal failed: {e}; exiting so that the served data does not run ahead of the log"
        );
        std::process::exit(FAIL_STOP_EXIT_CODE);
    }

    /// The broker offset of the last record Kafka acknowledged (-1: none, or no journal).
    /// On a replica: its safe Kafka cursor (see `replication::frame::Cursor`), so that its
    /// own snapshots restart from a broker offset that skips nothing they lack.
    pub(crate) fn journal_acked_broker_offset(&self) -> i64 {
        #[cfg(feature = "kafka")]
        if let Some(j) = &self.journal {
            return j.journal.acks.broker.get();
        }
        self.replica.as_ref().map_or(-1, |r| r.cursor.broker)
    }

    /// INFO kafka.
    pub(crate) fn kafka_info(&self, t: &mut String) {
        use std::fmt::Write as _;
        let mut f = |name: &str, v: String| {
            let _ = write!(t, "{name}:{v}\r\n");
        };
        #[cfg(feature = "kafka")]
        if let Some(j) = &self.journal {
            f("kafka_enabled", "1".into());
            f("kafka_topic", j.journal.target.topic.clone());
            f("kafka_ack_mode", if self.acks_held() { "broker" } else { "queued" }.into());
            f("kafka_acknowledged_offset", j.journal.acks.logical.get().to_string());
            f("kafka_acknowledged_broker_offset", j.journal.acks.broker.get().to_string());
            f("kafka_pending_records", j.journal.pending().to_string());
            f("kafka_pending_bytes", j.journal.pending_bytes().to_string());
            f("kafka_oldest_pending_age_ms", j.journal.oldest_pending_age().as_millis().to_string());
            // Replication payloads (firehose frames) held back until Kafka acknowledges them.
            f("kafka_retained_batch_bytes", self.firehose.retained_bytes().to_string());
            f("kafka_held_clients", self.held.len().to_string());
            f("kafka_input_paused", (self.input_paused as u8).to_string());
            f("kafka_input_pauses", self.pause_log.total.to_string());
            f("kafka_records_produced", j.journal.produced.to_string());
            f("kafka_replay_records_consumed", j.replay.consumed.to_string());
            f("kafka_replay_records_applied", j.replay.applied.to_string());
            f("kafka_replay_records_duplicate", j.replay.duplicates.to_string());
            f("kafka_replay_records_older_lineage", j.replay.older_lineage.to_string());
            f("kafka_replay_successor_lineages", j.replay.successors.to_string());
            f("kafka_replay_records_ignored_reads", j.replay.ignored_reads.to_string());
            f("kafka_replay_external_records_applied", j.replay.external_applied.to_string());
            f("kafka_replay_external_records_duplicate", j.replay.external_duplicates.to_string());
            let c = &j.consumer.stats;
            f("kafka_consumer_position", j.consumer.position.to_string());
            f("kafka_consumer_fetching", (j.consumer.fetching() as u8).to_string());
            f("kafka_records_consumed", c.consumed.to_string());
            f("kafka_own_records_skipped", c.own_skipped.to_string());
            f("kafka_external_records_applied", c.external_applied.to_string());
            f("kafka_external_records_ignored_reads", c.ignored_reads.to_string());
            return;
        }
        f("kafka_enabled", "0".into());
        f("kafka_acknowledged_offset", "-1".into());
    }

    /// Asks the loop to exit after this turn, first saving the final snapshot when save rules
    /// are configured (or `save`), unless `nosave`. A failed save cancels the shutdown, as in
    /// Redis (exiting would lose the writes since the last snapshot), unless `force`. `now`:
    /// no wait for redis-server replicas.
    pub(crate) fn shutdown_with(&mut self, f: ShutdownFlags) -> Result<(), String> {
        // Already saved and waiting for the replicas: this request joins the wait, or ends it.
        if self.shutdown_wait.is_some() {
            if f.now {
                self.shutdown_wait_finish();
            }
            return Ok(());
        }
        // The GETACK before the save, which then records the stream's end (shutdown.rs).
        let wait_for = if f.now { None } else { self.shutdown_final_acks() };
        match self.save_on_shutdown(f.save, f.nosave) {
            Ok(()) => {}
            Err(e) if f.force => tracing::warn!("Error trying to save the DB: {e}; exiting anyway (FORCE)"),
            // Redis's words, which log watchers look for.
            Err(e) => return Err(format!("Error trying to save the DB, can't exit: {e}")),
        }
        if f.now {
            self.redis_replicas.shutdown_timeout_secs = 0;
        }
        if let Some(target) = wait_for {
            self.shutdown_wait_begin(target);
            // The loop goes on until the replicas caught up (shutdown.rs).
            return Ok(());
        }
        self.shutdown = true;
        Ok(())
    }

    /// Runs the loop until SIGTERM/SIGINT or SHUTDOWN, then closes everything.
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        while !self.shutdown {
            let timeout = self.ring_timeout(self.poll_timeout());
            if let Err(e) = self.wait_for_events(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            self.turn_start = Instant::now();
            for token in std::mem::take(&mut self.deferred_tokens) {
                self.on_token(token);
            }
            // Reads cut short last turn go first: their requests are the oldest.
            let again = std::mem::take(&mut self.read_again);
            for &slot in &again {
                if let Some(Some(c)) = self.conns.get_mut(slot) {
                    c.in_read_again = false;
                    self.handle_read(slot, false);
                }
            }
            if std::mem::take(&mut self.upstream_again) {
                self.replica_io();
            }
            if std::mem::take(&mut self.redis_primary_again) {
                self.redis_primary_io();
            }
            // Keep the allocation (handle_read may have queued entries for the next turn).
            if self.read_again.is_empty() {
                self.read_again = again;
                self.read_again.clear();
            }
            for ev in events.iter() {
                match ev.token() {
                    t @ (SIGNAL | WAKER | JOURNAL | UPSTREAM | CONSUMER | REDIS_PRIMARY) => self.on_token(t),
                    Token(t) if t >= CONN_BASE => {
                        let slot = t - CONN_BASE;
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            let drain = ev.is_read_closed() || ev.is_error();
                            self.handle_read(slot, drain);
                        }
                        if ev.is_writable() {
                            self.queue_write(slot);
                        }
                    }
                    Token(t) if t >= LISTENER_BASE => self.accept(t - LISTENER_BASE),
                    _ => {}
                }
            }
            self.ring_turn();
            self.after_events();
            self.journal_end_turn();
            let turn = self.turn_start.elapsed().as_nanos() as u64;
            let commands = self.total_commands();
            let el = &mut self.stats.eventloop;
            el.cycles += 1;
            el.nanos += turn;
            el.max_nanos = el.max_nanos.max(turn);
            // (saturating: CONFIG RESETSTAT may have zeroed the count during the turn)
            el.max_cmds = el
                .max_cmds
                .max(commands.saturating_sub(std::mem::replace(&mut self.turn_commands, commands)));
        }
        self.close_all();
        Ok(())
    }

    fn on_token(&mut self, token: Token) {
        match token {
            SIGNAL => self.on_signal_pipe(),
            WAKER => self.on_wake(),
            JOURNAL => self.poll_journal(),
            UPSTREAM => self.replica_io(),
            REDIS_PRIMARY => self.redis_primary_io(),
            CONSUMER => self.consume_journal(),
            _ => {}
        }
    }

    /// One short loop turn from inside a busy script (the timeout hook calls it): accepts,
    /// reads and answers other clients (`call` answers them `-BUSY`, or acts on SCRIPT KILL
    /// and SHUTDOWN NOSAVE, and commits nothing), and writes the replies. Signals, the waker
    /// and the journal are left for the next real turn, and so are the events of the
    /// script's own connection (out of its slot now): it is read again next turn.
    ///
    /// With `sweep`, every connection is read and every listener accepted as well: the
    /// readiness edges the loop turn that started the script had already collected (and not
    /// yet acted on) will not come again, so the first busy turn, and one every so often,
    /// reads and accepts everyone.
    pub(crate) fn busy_turn(&mut self, sweep: bool) {
        let mut events = Events::with_capacity(64);
        if self.poll.poll(&mut events, Some(Duration::ZERO)).is_err() {
            return;
        }
        self.clock_ms = now_ms();
        if sweep {
            for slot in 0..self.conns.len() {
                if matches!(self.conns.get(slot), Some(Some(_))) {
                    self.handle_read(slot, false);
                }
            }
            // Likewise a listener's edge collected by that turn: a client that connected in
            // the same instant as the script's request would otherwise wait in the backlog
            // until the script ends (a ring client blocks in its handshake meanwhile). An
            // accept with nothing waiting is one EAGAIN.
            for li in 0..self.listeners.len() {
                self.accept(li);
            }
        }
        for ev in events.iter() {
            match ev.token() {
                Token(t) if t >= CONN_BASE => {
                    let slot = t - CONN_BASE;
                    match self.conns.get(slot) {
                        Some(Some(_)) => {
                            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                                let drain = ev.is_read_closed() || ev.is_error();
                                self.handle_read(slot, drain);
                            }
                            if ev.is_writable() {
                                self.queue_write(slot);
                            }
                        }
                        // The script's own connection: read it next turn.
                        Some(None) if !self.read_again.contains(&slot) => self.read_again.push(slot),
                        _ => {}
                    }
                }
                Token(t) if (LISTENER_BASE..CONN_BASE).contains(&t) => self.accept(t - LISTENER_BASE),
                other => self.deferred_tokens.push(other),
            }
        }
        // Ring clients raise no events: read them too (they get -BUSY like the others).
        self.ring_clients_turn();
        self.flush_writes();
    }

    /// SHUTDOWN NOSAVE while a script is busy: closes the clients and the journal (what it
    /// already holds is flushed) and exits; the script's pending writes are never committed.
    pub(crate) fn exit_now(&mut self) -> ! {
        self.close_all();
        std::process::exit(0);
    }

    /// epoll_wait, first polling without blocking for up to the current busy-poll window when
    /// the wait would block: a request that arrives within the window is read without the
    /// server going to sleep and being woken for it (on a VM a wake-up costs more than the
    /// request itself).
    ///
    /// The window adapts, so that only a server with many requests in flight spins: it stays
    /// open while spins catch events, and after a real sleep it opens only if that sleep ended
    /// with two or more connections ready (requests are arriving faster than one wake-up).
    /// A quiet server, or one client at a time, sleeps at once and never burns CPU.
    fn wait_for_events(&mut self, events: &mut Events, timeout: Duration) -> io::Result<()> {
        let max = Duration::from_micros(self.cfg.busy_poll_us as u64);
        if timeout.is_zero() || max.is_zero() {
            return self.poll.poll(events, Some(timeout));
        }
        if self.busy_poll {
            self.stats.busy_poll_spins += 1;
            let spin_until = Instant::now() + max.min(timeout);
            loop {
                self.poll.poll(events, Some(Duration::ZERO))?;
                if !events.is_empty() {
                    return Ok(());
                }
                if Instant::now() >= spin_until {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        self.poll.poll(events, Some(timeout))?;
        self.busy_poll = events.iter().nth(1).is_some();
        Ok(())
    }

    fn poll_timeout(&self) -> Duration {
        if !self.read_again.is_empty()
            || !self.resume.is_empty()
            || !self.write_queue.is_empty()
            || self.upstream_again
            || self.redis_primary_again
            || self.consume_again
        {
            return Duration::ZERO;
        }
        let mut t = CRON_INTERVAL.saturating_sub(self.last_cron.elapsed());
        if let Some(deadline) = self.blocked.next_deadline() {
            let ms = (deadline - now_ms()).max(0) as u64;
            t = t.min(Duration::from_millis(ms));
        }
        if let Some(deadline) = self.pause.deadline() {
            t = t.min(deadline.saturating_duration_since(Instant::now()) + Duration::from_millis(1));
        }
        if let Some(wake) = self.consumer_wake {
            t = t.min(wake.saturating_duration_since(Instant::now()));
        }
        // Expiry stopped at its budget with more due: come back in a few milliseconds rather
        // than at the next cron, so an idle server reclaims expired keys and fields at about a
        // quarter of one core (1 ms of work, 3 ms of sleep), as Redis's slow cycle does.
        if self.expire_backlog {
            t = t.min(EXPIRE_BACKLOG_PAUSE);
        }
        // Wake at least once a millisecond-granular deadline has surely passed.
        t
    }

    fn on_signal_pipe(&mut self) {
        let mut buf = [0u8; 64];
        loop {
            match self.signal_rx.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let mut flags = ShutdownFlags::default();
                    for &sig in &buf[..n] {
                        let name = if sig as i32 == libc::SIGINT { "SIGINT" } else { "SIGTERM" };
                        info!("received {name}, shutting down");
                        flags = if sig as i32 == libc::SIGINT {
                            self.shutdown_on_sigint
                        } else {
                            self.shutdown_on_sigterm
                        };
                    }
                    if let Err(e) = self.shutdown_with(flags) {
                        tracing::error!("{e}");
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
    }

    /// At startup: says so when the server listens on an address other hosts can reach while
    /// protected mode will turn them away (no password for the default user), since an
    /// operator who bound a public address most likely expects those clients.
    pub(crate) fn warn_of_protected_mode(&self) {
        if !self.protected_mode_active() {
            return;
        }
        let public: Vec<&str> = self
            .cfg
            .bind
            .iter()
            .flat_map(|b| b.split_whitespace())
            .map(|b| b.trim_start_matches('-'))
            .filter(|b| match *b {
                "*" | "::*" => true,
                b => b.parse::<IpAddr>().is_ok_and(|ip| !ip.is_loopback()),
            })
            .collect();
        if !public.is_empty() {
            warn!(
                "protected mode is on and the default user has no password: clients reaching {} \
                 from other hosts will be refused (set a password, or --protected-mode no)",
                public.join(" ")
            );
        }
    }

    /// Whether protected mode turns away a TCP or TLS client from `peer`:
    /// protected mode is on, the default user has no password, and the peer is not on the
    /// loopback interface (127.0.0.0/8 or ::1, an IPv4-mapped loopback included).
    fn protected_refuses(&self, peer: IpAddr) -> bool {
        let local = match peer {
            IpAddr::V4(ip) => ip.is_loopback(),
            IpAddr::V6(ip) => ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        };
        self.protected_mode_active() && !local
    }

    /// Protected mode is on and the default user has no password.
    fn protected_mode_active(&self) -> bool {
        self.cfg.protected_mode && self.users.default_has_no_password()
    }

    fn accept(&mut self, li: usize) {
        let ring = matches!(self.listeners[li], Listener::Ring(_));
        let sbe = matches!(self.listeners[li], Listener::Sbe(_) | Listener::SbeUnix(_));
        let rdma = matches!(self.listeners[li], Listener::Rdma(_));
        loop {
            // A TCP or TLS client's address, for protected mode (the other listeners are local
            // or have their own rules).
            let mut remote: Option<IpAddr> = None;
            let accepted = match &self.listeners[li] {
                Listener::Tcp(l) | Listener::Sbe(l) => l.accept().map(|(s, peer)| {
                    remote = Some(peer.ip());
                    let _ = s.set_nodelay(true);
                    let laddr = s.local_addr().map(|a| a.to_string()).unwrap_or_default();
                    let fd = s.as_raw_fd();
                    crate::transport::client_keepalive(fd, self.cfg.tcp_keepalive);
                    (Stream::Tcp(s), peer.to_string(), laddr, fd, false)
                }),
                Listener::Unix(l) | Listener::SbeUnix(l) => l.accept().map(|(s, _)| {
                    let path = if sbe { &self.sbe_unix_path } else { &self.unix_path };
                    let path = path.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
                    let fd = s.as_raw_fd();
                    (Stream::Unix(s), format!("{path}:0"), format!("{path}:0"), fd, true)
                }),
                Listener::Tls(l) => l.accept().and_then(|(s, peer)| {
                    remote = Some(peer.ip());
                    let _ = s.set_nodelay(true);
                    let laddr = s.local_addr().map(|a| a.to_string()).unwrap_or_default();
                    let fd = s.as_raw_fd();
                    crate::transport::client_keepalive(fd, self.cfg.tcp_keepalive);
                    let cfg = self.tls.clone().expect("a TLS listener has a TLS configuration");
                    // The handshake runs inside the connection's reads and writes, never
                    // blocking the loop.
                    let session = rustls::ServerConnection::new(cfg).map_err(io::Error::other)?;
                    let tls = crate::transport::tls::TlsStream::new(s, session.into());
                    Ok((Stream::Tls(Box::new(tls)), peer.to_string(), laddr, fd, false))
                }),
                // The segment is created and passed here; a failure drops this client only.
                Listener::Ring(l) => match l.accept() {
                    Ok((s, _)) => self.ring_accept(s).map_err(|e| {
                        warn!("ring client refused: {e}");
                        io::ErrorKind::Interrupted.into()
                    }),
                    Err(e) => Err(e),
                },
                // The region is created and the hello sent here; a failure drops this client.
                Listener::Rdma(l) => match l.accept() {
                    Ok((s, peer)) => self.rdma_accept(s, peer).map_err(|e| {
                        if e.kind() == io::ErrorKind::ConnectionRefused {
                            // At --maxclients (the client got the error line): counted below.
                            return e;
                        }
                        warn!("RDMA client refused: {e}");
                        io::ErrorKind::Interrupted.into()
                    }),
                    Err(e) => Err(e),
                },
            };
            let (mut stream, addr, laddr, fd, unix) = match accepted {
                Ok(a) => a,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if rdma && e.kind() == io::ErrorKind::ConnectionRefused => {
                    self.stats.total_connections_received += 1;
                    self.stats.rejected_connections += 1;
                    continue;
                }
                Err(e) => {
                    // EMFILE and friends: leave the rest in the backlog. The listener is
                    // edge-triggered, so no new event may come for them: the cron retries.
                    warn!("accept failed: {e}");
                    self.accept_retry = true;
                    return;
                }
            };
            self.stats.total_connections_received += 1;
            if self.nclients >= self.cfg.maxclients as usize {
                // Best effort: the socket is fresh, so this small write fits its buffer.
                if sbe {
                    let mut e = Vec::new();
                    let code = goblin_sbe::error_code::ErrorCode::COMMAND_ERROR;
                    crate::transport::sbe::write_error(&mut e, 0, code, b"ERR max number of clients reached");
                    let _ = stream.write(&e);
                } else {
                    let _ = stream.write(b"-ERR max number of clients reached\r\n");
                }
                self.stats.rejected_connections += 1;
                debug!("rejected {addr}: max number of clients reached");
                continue;
            }
            let slot = match self.free_slots.pop() {
                Some(s) => s,
                None => {
                    self.conns.push(None);
                    self.conns.len() - 1
                }
            };
            if let Err(e) =
                self.poll.registry().register(&mut stream, Token(CONN_BASE + slot), Interest::READABLE)
            {
                warn!("could not register connection from {addr}: {e}");
                self.free_slots.push(slot);
                continue;
            }
            let id = self.next_client_id;
            self.next_client_id += 1;
            let parser = resp::RequestParser::new(self.limits.clone());
            let mut conn = Box::new(Conn::new(id, stream, addr, laddr, fd, unix, parser));
            // Every connection starts as the default user (Redis's clientSetDefaultAuth).
            conn.user = self.users.get(self.users.default_index()).name.clone();
            conn.restricted = !self.users.get(self.users.default_index()).full_access();
            conn.authenticated = self.users.default_is_open()
                || (ring && self.cfg.no_auth_ring)
                || (rdma && self.cfg.no_auth_rdma);
            if sbe {
                // SBE has no AUTH message: the listener trusts its peers (docs/SBE.md).
                conn.authenticated = true;
                conn.sbe = Some(Box::default());
            }
            // Protected mode: a client from off this host, while the default user has no
            // password, gets the reason and is closed once it is written (through TLS too, so
            // the connection goes the whole way in and out as any other's reply does). Redis's
            // listeners only: the RDMA and SBE ports are opt-ins with their own rules.
            let denied = !sbe && remote.is_some_and(|ip| self.protected_refuses(ip));
            if denied {
                conn.out.extend_from_slice(PROTECTED_MODE_DENIED);
                conn.close_after_reply = true;
                self.stats.rejected_connections += 1;
                debug!("refused {}: protected mode", conn.addr);
            }
            self.conns[slot] = Some(conn);
            if ring || rdma {
                self.rings.slots.push(slot);
            }
            self.nclients += 1;
            if denied {
                self.queue_write(slot);
            }
            debug!("accepted client id={id}");
        }
    }

    /// Reads what the socket holds and executes every complete request.
    ///
    /// Edge-triggered readiness normally means reading until WouldBlock, which costs one extra
    /// failing read(2) per request at low pipeline depths. We stop after a short read instead:
    /// Linux raises a new edge for every arrival after that read, so nothing is lost. The one
    /// exception is a peer close queued behind the data (no further arrival will come), so when
    /// the event reports the read side closed (`drain`) we read on until EOF or WouldBlock.
    pub(crate) fn handle_read(&mut self, slot: usize, drain: bool) {
        let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else { return };
        conn.last_active = self.turn_start;
        // The close edge comes once: remember it for the reads continued on later turns.
        conn.peer_closed |= drain;
        if conn.dumping {
            // A child owns the socket for now; `read_later` resumes reading when it is done.
            self.conns[slot] = Some(conn);
            return;
        }
        if conn.lingering {
            self.drain_lingering(&mut conn);
            self.conns[slot] = Some(conn);
            self.queue_write(slot);
            return;
        }
        if conn.out_throttled {
            // Its replies wait to be read: the input stays in the socket (`flush_conn`
            // resumes it).
            self.conns[slot] = Some(conn);
            return;
        }
        if self.input_paused && conn.paused.is_some() {
            // Backpressure: behind a held write, the input stays in the socket until Kafka
            // catches up.
            if !self.paused_reads.contains(&slot) {
                self.paused_reads.push(slot);
            }
            self.conns[slot] = Some(conn);
            return;
        }
        let drain = conn.peer_closed;
        let mut reads = 0;
        let mut scratch = std::mem::take(&mut self.scratch);
        if scratch.len() < READ_CHUNK {
            // A read nested in a busy script's loop turn: the outer read holds the buffer.
            scratch = vec![0; READ_CHUNK];
        }
        loop {
            if conn.close_now || conn.close_after_reply || conn.out_throttled || conn.lingering {
                break;
            }
            if reads == READS_PER_TURN {
                // At most one entry per connection, whatever events arrive meanwhile.
                if !conn.in_read_again {
                    conn.in_read_again = true;
                    self.read_again.push(slot);
                }
                break;
            }
            reads += 1;
            // A big argument arriving: its bytes go straight to the connection's buffer.
            let big = conn.big_arg_missing();
            // client-query-buffer-limit, before anything runs (as Redis checks it after each
            // read): a big argument by what the request will hold once it has arrived.
            if let Some(missing) = big {
                if conn.pending.len() + missing > self.query_buffer_limit {
                    self.query_buffer_overflow(&mut conn);
                    break;
                }
            }
            let read = match big {
                Some(missing) => conn.read_into_pending(missing),
                None => conn.stream.read(&mut scratch).map(|n| (n, n < scratch.len())),
            };
            let (n, short) = match read {
                Ok((0, _)) => {
                    // Peer closed its side. Flush what it asked for, unless it was waiting parked.
                    if conn.parked.is_some() {
                        conn.close_now = true;
                    } else {
                        conn.close_after_reply = true;
                    }
                    break;
                }
                Ok(read) => read,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    debug!("read error on client id={}: {e}", conn.id);
                    conn.close_now = true;
                    break;
                }
            };
            self.stats.net_input_bytes += n as u64;
            conn.net_in += n as u64;
            self.stats.reads_processed += 1;
            self.clock_ms = now_ms();
            let buffered = conn.pending.len() + if big.is_some() { 0 } else { n };
            if buffered > self.query_buffer_limit {
                self.query_buffer_overflow(&mut conn);
                break;
            }
            // Client eviction before this input runs, as Redis evicts before each command: a
            // request that brought the clients over maxmemory-clients in one turn (one big
            // argument, a long pipeline) does not run first.
            let unbuffered = if big.is_some() { 0 } else { n };
            if self.over_client_limit(&conn, unbuffered) {
                conn = self.evict_clients_around(conn, slot);
                if conn.close_now {
                    break;
                }
            }
            if big.is_some() {
                self.process_pending(&mut conn, slot);
            } else if conn.pending.is_empty() && conn.parked.is_none() {
                // Fast path: parse straight from the shared buffer; keep only a partial tail.
                let used = self.process_input(&mut conn, slot, &scratch[..n]);
                if used < n {
                    conn.pending.extend_from_slice(&scratch[used..n]);
                }
            } else {
                conn.pending.extend_from_slice(&scratch[..n]);
                self.process_pending(&mut conn, slot);
            }
            // Input that waits (behind a parked command) counts as well.
            if conn.pending.len() > self.query_buffer_limit {
                self.query_buffer_overflow(&mut conn);
            }
            if short && !drain {
                break;
            }
        }
        self.scratch = scratch;
        self.conns[slot] = Some(conn);
        self.queue_write(slot);
    }

    /// Whether the clients would hold `maxmemory-clients` or more with `conn` as it is now
    /// plus `unbuffered` bytes of input it has read but not yet buffered: the others as the
    /// last pass counted them. Arithmetic only, as this runs before every read's input runs.
    fn over_client_limit(&self, conn: &Conn, unbuffered: usize) -> bool {
        if conn.no_evict || conn.firehose.is_some() || conn.redis_replica.is_some() {
            return false;
        }
        let Some(limit) = self.cfg.maxmemory_clients.limit(self.engine.evict.maxmemory) else {
            return false;
        };
        let now = (conn.memory() + unbuffered) as u64;
        self.clients_mem.saturating_sub(conn.mem_counted) + now >= limit
    }

    /// The OOM score class of this process: a replica's while it follows an upstream.
    pub(crate) fn oom_class(&self) -> crate::oom_score::Class {
        if self.follows_upstream() {
            crate::oom_score::Class::Replica
        } else {
            crate::oom_score::Class::Primary
        }
    }

    /// Sets the OOM score for the role the server has now (after REPLICAOF changed it); a
    /// refusal is logged, as Redis logs it.
    pub(crate) fn refresh_oom_score(&mut self) {
        let class = self.oom_class();
        if let Err(e) = self.oom.apply(class) {
            warn!("Unable to write oom_score_adj: {e}");
        }
    }

    /// A client-eviction pass while `conn`, taken out of its slot to read, is back in it (the
    /// pass ranks every client, this one too); returns it, cut off if it was evicted.
    fn evict_clients_around(&mut self, conn: Box<Conn>, slot: usize) -> Box<Conn> {
        self.conns[slot] = Some(conn);
        self.evict_clients();
        self.conns[slot].take().expect("the connection being read")
    }

    /// Closes a client whose unprocessed input passed `client-query-buffer-limit` (INFO
    /// `client_query_buffer_limit_disconnections`).
    fn query_buffer_overflow(&mut self, conn: &mut Conn) {
        warn!(
            "Closing client that reached max query buffer length (client id={} addr={}, limit {} bytes)",
            conn.id, conn.addr, self.query_buffer_limit
        );
        self.stats.query_buffer_limit_disconnections += 1;
        conn.pending = Vec::new();
        self.close_lingering(conn);
    }

    /// Closes a client the server gives up on while it may still be sending (as Redis,
    /// unsent replies are dropped): a FIN now, its input read and dropped until it closes
    /// too or [`LINGER`] passes (see [`Conn::lingering`]); at once where there is no
    /// half-close.
    fn close_lingering(&mut self, conn: &mut Conn) {
        conn.out_pos = conn.out.len();
        if conn.stream.shutdown_write() {
            conn.lingering = true;
            self.lingering.push((conn.id, Instant::now()));
            self.drain_lingering(conn);
        } else {
            conn.close_now = true;
        }
    }

    /// Reads and drops what a lingering client sent; at its end of stream, closes it.
    fn drain_lingering(&mut self, conn: &mut Conn) {
        let mut sink = [0u8; 16 * 1024];
        loop {
            match conn.stream.read(&mut sink) {
                Ok(0) => break conn.close_now = true,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break conn.close_now = true,
            }
        }
    }

    /// Closes the lingering clients whose time is up (the cron calls it).
    fn end_lingering(&mut self) {
        let now = Instant::now();
        while let Some(&(id, since)) = self.lingering.first() {
            if now.duration_since(since) < LINGER {
                break;
            }
            self.lingering.remove(0);
            if let Some(slot) =
                self.conns.iter().position(|c| matches!(c, Some(c) if c.id == id && c.lingering))
            {
                if let Some(c) = self.conns[slot].as_mut() {
                    c.close_now = true;
                }
                self.queue_write(slot);
            }
        }
    }

    /// Executes the complete requests buffered in `conn.pending` (unless parked).
    pub(crate) fn process_pending(&mut self, conn: &mut Conn, slot: usize) {
        if conn.parked.is_some() || conn.paused.is_some() || conn.out_throttled || conn.pending.is_empty() {
            return;
        }
        let mut buf = std::mem::take(&mut conn.pending);
        let used = self.process_input(conn, slot, &buf);
        buf.drain(..used);
        // Give back a large buffer once a big request has been consumed.
        if buf.is_empty() && buf.capacity() > PENDING_KEEP_CAPACITY {
            buf = Vec::new();
        }
        conn.pending = buf;
    }

    /// Resumes a connection whose reads were held: its buffered input runs, and its socket is
    /// read again next turn (edges that came meanwhile were not acted on).
    pub(crate) fn read_later(&mut self, slot: usize) {
        let Some(Some(c)) = self.conns.get_mut(slot) else { return };
        if !c.pending.is_empty() {
            self.resume.push(slot);
        }
        if !c.in_read_again {
            c.in_read_again = true;
            self.read_again.push(slot);
        }
        self.queue_write(slot);
    }

    /// Marks `slot` for a write (or close) at the end of this loop turn.
    pub(crate) fn queue_write(&mut self, slot: usize) {
        if let Some(Some(c)) = self.conns.get_mut(slot) {
            if !c.in_write_queue {
                c.in_write_queue = true;
                self.write_queue.push(slot);
            }
        }
    }

    fn after_events(&mut self) {
        // Input queued behind commands unparked this turn. Reads cut short for fairness wait
        // for the next turn (the poll then does not block), so this turn's replies go out
        // first.
        self.run_resumed();
        if self.consume_again {
            self.consume_journal();
        }
        if self.blocked.next_deadline().is_some() {
            self.expire_blocked(now_ms());
        }
        if self.waits_dirty {
            self.serve_waits();
        }
        if self.redis_replicas.want_acks {
            self.redis_replicas_getack();
        }
        if self.cfg.maxmemory_clients != crate::config::MaxmemoryClients::Off {
            self.evict_clients();
        }
        self.check_pause();
        // A replica's data changes only through its upstream: no expiry of its own; none
        // either while clients are paused.
        if !self.follows_upstream()
            && self.pause.until.is_none()
            && self.failover.is_none()
            && self.active_expire_enabled
        {
            // LATENCY's `expire-cycle` event: a cycle that took the threshold or longer (its
            // budget is 1 ms, but freeing one large key is not divided). Timed only when on.
            let started = (self.introspection.latency_threshold_ms > 0).then(Instant::now);
            self.active_expire_cycle();
            if let Some(t) = started {
                self.introspection.latency_sample("expire-cycle", t.elapsed().as_millis() as u64);
            }
        }
        self.update_input_pause();
        // Notifications and invalidations raised outside a client's command, not yet sent.
        self.deliver_notifications(None);
        self.deliver_invalidations(None);
        if self.last_cron.elapsed() >= CRON_INTERVAL {
            self.cron();
            self.stats.eventloop.cron_nanos += self.last_cron.elapsed().as_nanos() as u64;
        }
        self.flush_writes();
    }

    /// Processes the pending input of clients unparked this turn.
    pub(crate) fn run_resumed(&mut self) {
        if !self.resume.is_empty() {
            self.clock_ms = now_ms();
        }
        while !self.resume.is_empty() {
            for slot in std::mem::take(&mut self.resume) {
                let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else { continue };
                self.process_pending(&mut conn, slot);
                self.conns[slot] = Some(conn);
                self.queue_write(slot);
            }
        }
    }

    /// Active expiry, Redis-like: sample volatile keys in small rounds while rounds keep finding
    /// many expired keys, stopping after about a millisecond. Runs at most once a millisecond,
    /// so a busy loop spends a bounded share of its time here.
    fn active_expire_cycle(&mut self) {
        if self.last_expire.elapsed() < Duration::from_millis(1) {
            return;
        }
        let due = |ks: &store::Keyspace| ks.volatile_len() > 0 || ks.has_field_deadline_keys();
        if !due(&self.engine.ks) && !(0..self.engine.databases()).any(|db| due(self.engine.keyspace(db))) {
            return;
        }
        let start = Instant::now();
        self.last_expire = start;
        self.expire_databases(start);
        self.stats.expire_cycle_usec += start.elapsed().as_micros() as u64;
        if self.expire_backlog {
            // Only the time budget leaves keys due behind.
            self.stats.expire_time_cap_reached += 1;
        }
        // A cycle that ran long (many keys due at once) is a latency event of its own, as in
        // Redis.
        self.introspection.latency_sample("expire-cycle", start.elapsed().as_millis() as u64);
    }

    /// The cycle's work: each database with deadlines, within the cycle's budget.
    fn expire_databases(&mut self, start: Instant) {
        const KEYS_PER_ROUND: usize = 20;
        const EXAMINE_PER_ROUND: usize = 200;
        let due = |ks: &store::Keyspace| ks.volatile_len() > 0 || ks.has_field_deadline_keys();
        let now = now_ms();
        self.expire_backlog = false;
        // Each database with deadlines in turn, in one time budget (Redis walks its databases
        // the same way). The engine is left with whichever it selected last: every command
        // selects its client's database first.
        for db in 0..self.engine.databases() {
            if !due(self.engine.keyspace(db)) {
                continue;
            }
            if start.elapsed() >= Duration::from_millis(1) {
                self.expire_backlog = true;
                return;
            }
            self.engine.select(db);
            if self.engine.ks.has_field_deadline_keys() {
                // Hash fields first: the hashes with a field due.
                self.expire_rounds(start, KEYS_PER_ROUND, |s| {
                    s.engine.active_expire_fields(now, KEYS_PER_ROUND)
                });
            }
            if self.engine.ks.volatile_len() > 0 {
                self.expire_rounds(start, KEYS_PER_ROUND, |s| {
                    s.engine.active_expire(now, KEYS_PER_ROUND, EXAMINE_PER_ROUND)
                });
            }
        }
    }

    /// Runs rounds of `round` (each returns how many keys or fields it removed, of at most
    /// `per_round`), committing each round's batch and raising its notifications, until a
    /// round removes fewer than a quarter of `per_round` (the rest can wait for the next
    /// cycle) or the cycle that began at `start` used its budget (then `expire_backlog`).
    fn expire_rounds(&mut self, start: Instant, per_round: usize, mut round: impl FnMut(&mut Self) -> usize) {
        const TIME_BUDGET: Duration = Duration::from_millis(1);
        loop {
            let removed = round(self);
            self.commit_batch(engine::Origin::ActiveExpiry);
            if self.engine.log_expired || self.engine.log_field_expiry {
                self.notify_active_expiry();
                self.deliver_notifications(None);
            }
            if removed < per_round / 4 {
                return;
            }
            if start.elapsed() >= TIME_BUDGET {
                self.expire_backlog = true;
                return;
            }
        }
    }

    /// `watchdog-period` (Redis's hidden setting, for finding what blocks the server): while
    /// it is on, a server thread that has not run its cron for that long gets SIGALRM, whose
    /// report logs its stack and command (`crash::on_alarm`), and goes on. At least two cron
    /// periods, as Redis rounds it up, so that a cron on time never sets it off.
    pub(crate) fn set_watchdog_period(&mut self, ms: u64) {
        self.watchdog_period_ms = ms;
        crate::crash::watchdog_arm(self.watchdog_timer_ms());
    }

    /// The watchdog's timer: the period, at least `WATCHDOG_MIN_MS` (0: off).
    fn watchdog_timer_ms(&self) -> u64 {
        match self.watchdog_period_ms {
            0 => 0,
            ms => ms.max(WATCHDOG_MIN_MS),
        }
    }

    /// Every 100 ms: ops/sec sampling and the memory peak.
    fn cron(&mut self) {
        self.last_cron = Instant::now();
        if self.watchdog_period_ms > 0 {
            crate::crash::watchdog_arm(self.watchdog_timer_ms());
        }
        if std::mem::take(&mut self.accept_retry) {
            for li in 0..self.listeners.len() {
                self.accept(li);
            }
        }
        if !self.lingering.is_empty() {
            self.end_lingering();
        }
        self.snapshot_cron();
        self.sync_waiting_cron();
        self.firehose_ticks();
        self.redis_replicas_cron();
        self.replica_cron();
        self.redis_primary_cron();
        self.failover_cron();
        self.shutdown_wait_cron();
        // Backstop only: delivery reports and records wake the loop through their pipes.
        self.poll_journal();
        self.consume_journal();
        let total = self.total_commands();
        let t = self.started.elapsed().as_millis() as u64;
        let at = self.stats.ops_sample_at;
        self.stats.ops_samples[at % 16] = (t, total);
        self.stats.eventloop_samples[at % 16] = (self.stats.eventloop.cycles, self.stats.eventloop.nanos);
        let st = &self.stats;
        self.stats.net_samples[at % 16] =
            [st.net_input_bytes, st.net_output_bytes, st.net_repl_input_bytes, st.net_repl_output_bytes];
        self.stats.ops_sample_at = at + 1;
        let used = crate::commands::info::allocated_bytes();
        self.stats.note_memory(used);
        self.close_idle_clients();
        self.enforce_soft_output_limits();
    }

    /// Client eviction (`maxmemory-clients`, as Redis 7 has it): while the normal and pub/sub
    /// clients together hold the limit or more, the largest is closed, then the next, as
    /// Redis evicts from its largest bucket down. Never a client with CLIENT NO-EVICT on, a
    /// replica link, or one a forked child is writing to. Once per loop turn, only when a
    /// limit is set: one pass over the connections.
    fn evict_clients(&mut self) {
        let Some(limit) = self.cfg.maxmemory_clients.limit(self.engine.evict.maxmemory) else { return };
        let mut total = 0u64;
        let mut candidates = Vec::new();
        for (slot, c) in self.conns.iter_mut().enumerate() {
            let Some(c) = c else { continue };
            if c.firehose.is_some() || c.redis_replica.is_some() || c.dumping || c.close_now {
                c.mem_counted = 0;
                continue;
            }
            let mem = c.memory() as u64;
            c.mem_counted = mem;
            total += mem;
            if !c.no_evict {
                candidates.push((mem, slot));
            }
        }
        self.clients_mem = total;
        if total < limit {
            return;
        }
        candidates.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
        for (mem, slot) in candidates {
            if total < limit {
                break;
            }
            let Some(c) = self.conns[slot].as_mut() else { continue };
            info!("evicting client id={} addr={} tot-mem={mem}: clients hold more than maxmemory-clients ({limit} bytes)", c.id, c.addr);
            c.cut_off();
            c.mem_counted = 0;
            self.stats.evicted_clients += 1;
            total -= mem;
            self.queue_write(slot);
        }
        self.clients_mem = total;
        if total < limit {
            return;
        }
        if total >= limit
            && self.client_eviction_warned.is_none_or(|t| t.elapsed() >= Duration::from_secs(60))
        {
            self.client_eviction_warned = Some(Instant::now());
            warn!("clients hold {total} bytes after evicting every evictable client (maxmemory-clients {limit})");
        }
    }

    /// `timeout` (CONFIG SET timeout): closes clients idle for longer, as Redis does, except
    /// the ones waiting by design (blocked or held commands, subscribers, monitors, firehose
    /// links).
    /// A client past its class's soft output limit is closed once its seconds pass even if no
    /// more output comes its way (Redis's clientsCron checks every client's limits): only the
    /// clients past a soft limit are looked at.
    fn enforce_soft_output_limits(&mut self) {
        for slot in 0..self.conns.len() {
            if !self.conns[slot].as_ref().is_some_and(|c| c.obuf_soft_since.is_some() && !c.close_now) {
                continue;
            }
            let Some(mut conn) = self.conns[slot].take() else { continue };
            self.check_output_limit(&mut conn);
            let closing = conn.close_now;
            self.conns[slot] = Some(conn);
            if closing {
                self.queue_write(slot);
            }
        }
    }

    fn close_idle_clients(&mut self) {
        let limit = self.cfg.idle_timeout_secs;
        if limit == 0 {
            return;
        }
        let limit = Duration::from_secs(limit);
        for slot in 0..self.conns.len() {
            let Some(c) = self.conns[slot].as_mut() else { continue };
            let waiting = c.parked.is_some()
                || c.paused.is_some()
                || c.pubsub.is_some()
                || c.monitor
                || c.firehose.is_some()
                || c.redis_replica.is_some()
                || c.dumping;
            if !waiting && !c.close_now && c.last_active.elapsed() > limit {
                debug!("closing idle client id={} addr={}", c.id, c.addr);
                c.close_now = true;
                self.queue_write(slot);
            }
        }
    }

    pub fn total_commands(&self) -> u64 {
        self.engine.stats.commands_processed + self.stats.server_commands
    }

    /// Writes each queued connection's output once, closes those that asked for it.
    fn flush_writes(&mut self) {
        let queue = std::mem::take(&mut self.write_queue);
        let mut kept = Vec::new();
        for &slot in &queue {
            let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else {
                // Out of its slot (a busy script's loop turn runs while it is being served):
                // it stays queued for the next flush.
                if crate::scripting::running() && matches!(self.conns.get(slot), Some(None)) {
                    kept.push(slot);
                }
                continue;
            };
            conn.in_write_queue = false;
            self.flush_conn(slot, conn);
        }
        // Reuse the queue's allocation for the next turn (flush never queues new writes).
        let mut queue = queue;
        queue.clear();
        if self.write_queue.is_empty() {
            self.write_queue = queue;
        }
        self.write_queue.extend(kept);
    }

    /// Writes what `conn` has pending (or closes it if it asked for that), then puts it back
    /// in its slot. WRITABLE interest is registered only while output is left over.
    fn flush_conn(&mut self, slot: usize, conn: Box<Conn>) {
        self.flush_conn_output(slot, conn);
        // A client whose input waited for its replies to drain (`Conn::out_throttled`) reads
        // and runs again once they mostly have.
        if let Some(Some(c)) = self.conns.get_mut(slot) {
            if c.out_throttled && c.out_pending() <= REPLY_RESUME_BYTES {
                c.out_throttled = false;
                self.read_later(slot);
            }
        }
    }

    fn flush_conn_output(&mut self, slot: usize, mut conn: Box<Conn>) {
        if conn.dumping && !conn.close_now {
            // A child is writing this socket: our output waits until it is done.
            self.conns[slot] = Some(conn);
            return;
        }
        if conn.close_now {
            self.close(slot, conn);
            return;
        }
        let mut failed = false;
        // Held replies (broker ack mode) are not written yet: only what comes before them.
        let end = conn.held_from.unwrap_or(conn.out.len());
        while conn.out_pos < end {
            match conn.stream.write(&conn.out[conn.out_pos..end]) {
                Ok(0) => {
                    failed = true;
                    break;
                }
                Ok(n) => {
                    conn.out_pos += n;
                    conn.net_out += n as u64;
                    if conn.redis_replica.is_some() || conn.firehose.is_some() {
                        self.stats.net_repl_output_bytes += n as u64;
                    } else {
                        self.stats.net_output_bytes += n as u64;
                    }
                    self.stats.writes_processed += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    debug!("write error on client id={}: {e}", conn.id);
                    failed = true;
                    break;
                }
            }
        }
        // A firehose subscriber: its frames follow whatever replies came before them.
        if !failed && conn.out_pos == conn.out.len() {
            if let Some(d) = conn.firehose.as_mut() {
                while d.has_pending() {
                    match conn.stream.write(d.next_piece()) {
                        Ok(0) => {
                            failed = true;
                            break;
                        }
                        Ok(n) => {
                            d.wrote(n);
                            conn.net_out += n as u64;
                            self.stats.net_repl_output_bytes += n as u64;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            debug!("write error on firehose subscriber id={}: {e}", conn.id);
                            failed = true;
                            break;
                        }
                    }
                }
            }
        }
        // Bytes the stream itself still holds (TLS ciphertext, handshake messages): while there
        // are any, WRITABLE interest stays on and the connection is not closed yet.
        let buffered = match conn.stream.flush_buffered() {
            Ok(b) => b,
            Err(e) => {
                debug!("write error on client id={}: {e}", conn.id);
                failed = true;
                false
            }
        };
        if failed {
            self.close(slot, conn);
            return;
        }
        let token = Token(CONN_BASE + slot);
        let queued = conn.firehose.as_ref().is_some_and(|d| d.has_pending());
        if buffered {
            if !conn.want_write {
                conn.want_write = true;
                let interest = Interest::READABLE | Interest::WRITABLE;
                if let Err(e) = self.poll.registry().reregister(&mut conn.stream, token, interest) {
                    warn!("reregister failed for client id={}: {e}", conn.id);
                    self.close(slot, conn);
                    return;
                }
            }
            self.conns[slot] = Some(conn);
            return;
        }
        if conn.held_from.is_some() && conn.out_pos == end {
            // Everything writable is written; the rest waits for Kafka (`release_held` queues
            // the write). Move the held tail to the front; no WRITABLE interest is needed.
            let pos = conn.out_pos;
            conn.out.drain(..pos);
            conn.out_pos = 0;
            conn.held_from = Some(end - pos);
            if conn.want_write {
                conn.want_write = false;
                let _ = self.poll.registry().reregister(&mut conn.stream, token, Interest::READABLE);
            }
        } else if conn.out_pos == conn.out.len() && !queued {
            conn.out.clear();
            conn.out_pos = 0;
            if conn.out.capacity() > OUT_KEEP_CAPACITY {
                conn.out = Vec::new();
            }
            if conn.close_after_reply {
                self.close(slot, conn);
                return;
            }
            if conn.want_write {
                conn.want_write = false;
                let _ = self.poll.registry().reregister(&mut conn.stream, token, Interest::READABLE);
            }
        } else {
            // Keep the unsent tail at the front so the buffer does not creep forward forever.
            if conn.out_pos > OUT_KEEP_CAPACITY && conn.out_pos * 2 > conn.out.len() {
                let pos = conn.out_pos;
                conn.out.drain(..pos);
                conn.out_pos = 0;
                if let Some(h) = &mut conn.held_from {
                    *h -= pos;
                }
            }
            if !conn.want_write {
                conn.want_write = true;
                let interest = Interest::READABLE | Interest::WRITABLE;
                if let Err(e) = self.poll.registry().reregister(&mut conn.stream, token, interest) {
                    warn!("reregister failed for client id={}: {e}", conn.id);
                    self.close(slot, conn);
                    return;
                }
            }
        }
        self.conns[slot] = Some(conn);
    }

    /// Removes a connection: deregisters it, drops it from the blocked index, frees its slot.
    pub(crate) fn close(&mut self, slot: usize, mut conn: Box<Conn>) {
        if conn.held_from.is_some() {
            let id = conn.id;
            self.held.retain(|&(s, i)| !(s == slot && i == id));
        }
        if conn.parked.is_some() {
            self.blocked.remove(&conn, slot);
            conn.parked = None;
        }
        if !conn.watching.is_empty() {
            self.watches.unwatch_all(&mut conn);
        }
        // Before the slot is freed: no index entry may outlive its connection.
        self.pubsub.remove_all(&mut conn);
        if conn.monitor {
            let id = conn.id;
            self.introspection.monitors.retain(|&(s, i)| !(s == slot && i == id));
        }
        self.tracking_off(&mut conn, slot);
        if conn.redis_replica.is_some() {
            // INFO's connected_clients leaves the replicas out by this list's length.
            let id = conn.id;
            self.redis_replicas.slots.retain(|&(s, i)| !(s == slot && i == id));
        }
        if conn.firehose.is_some() {
            let id = conn.id;
            self.firehose.subs.retain(|&(s, i)| !(s == slot && i == id));
            info!("firehose subscriber id={} addr={} detached", conn.id, conn.addr);
        }
        conn.stream.close_notify();
        if conn.stream.is_polled() {
            self.ring_closed(slot);
        }
        let _ = self.poll.registry().deregister(&mut conn.stream);
        debug!("closed client id={}", conn.id);
        self.nclients -= 1;
        self.conns[slot] = None;
        self.free_slots.push(slot);
    }

    /// Before exiting, as Redis 7 does (`shutdown-timeout`, skipped by SHUTDOWN NOW): the
    /// redis-server replicas get everything in their stream and are asked to acknowledge it
    /// (`REPLCONF GETACK *`), for up to the timeout. A replica promoted after this shutdown
    /// (Sentinel) then holds every write, which it would not recover otherwise: it keeps no
    /// journal. The shutdown has already waited for them while serving clients (shutdown.rs);
    /// this last wait covers what the journal's final flush released, and serves only the
    /// replicas' connections.
    fn drain_redis_replicas(&mut self) {
        let bound = Duration::from_secs(self.redis_replicas.shutdown_timeout_secs);
        let Some(target) = self.redis_replicas_ask_final_acks() else { return };
        let deadline = Instant::now() + bound;
        let mut events = Events::with_capacity(64);
        loop {
            self.flush_writes();
            let behind = self.redis_replicas_behind(target);
            if behind == 0 {
                info!("redis-server replicas acknowledged the whole stream (offset {target})");
                return;
            }
            if Instant::now() >= deadline {
                warn!("{behind} redis-server replicas did not acknowledge the stream's end within {bound:?}: exiting anyway");
                return;
            }
            if self.poll.poll(&mut events, Some(Duration::from_millis(10))).is_err() {
                return;
            }
            for ev in events.iter() {
                let Token(t) = ev.token();
                if t < CONN_BASE {
                    continue;
                }
                let slot = t - CONN_BASE;
                let replica = matches!(self.conns.get(slot), Some(Some(c)) if c.redis_replica.is_some());
                if !replica {
                    continue;
                }
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    self.handle_read(slot, ev.is_read_closed() || ev.is_error());
                }
                if ev.is_writable() {
                    self.queue_write(slot);
                }
            }
        }
    }

    /// Shutdown: stop listening, remove the Unix socket file, drop every client.
    fn close_all(&mut self) {
        crate::supervise::stopping(self.cfg.supervised);
        self.kill_children();
        #[cfg(feature = "kafka")]
        if let Some(j) = &mut self.journal {
            let pending = j.journal.pending();
            // The final snapshot's wait has just run out: waiting again would double the bound.
            let bound = if self.journal_given_up { Duration::ZERO } else { Duration::from_secs(10) };
            match j.journal.flush(bound) {
                Ok(()) => info!("Kafka journal flushed ({pending} records were in flight)"),
                Err(e) => warn!("Kafka journal: {e}"),
            }
        }
        // Broker mode: what Kafka acknowledged in that flush goes out (replies, replica batches).
        #[cfg(feature = "kafka")]
        self.release_acknowledged();
        self.drain_redis_replicas();
        self.listeners.clear();
        if let Some(p) = self.unix_path.take() {
            if let Err(e) = std::fs::remove_file(&p) {
                warn!("could not remove unix socket {}: {e}", p.display());
            }
        }
        if let Some(p) = self.rings.path.take() {
            let _ = std::fs::remove_file(&p);
        }
        if let Some(p) = self.sbe_unix_path.take() {
            let _ = std::fs::remove_file(&p);
        }
        if let Some(p) = &self.cfg.pidfile {
            let _ = std::fs::remove_file(p);
        }
        for slot in 0..self.conns.len() {
            if let Some(conn) = self.conns[slot].take() {
                self.close(slot, conn);
            }
        }
        info!("goblin-core is now ready to exit, bye bye...");
    }
}

/// SHUTDOWN's flags, which `shutdown-on-sigterm` and `shutdown-on-sigint` give a signal (all
/// off: `default`, a save when save rules are configured).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct ShutdownFlags {
    pub save: bool,
    pub nosave: bool,
    pub now: bool,
    pub force: bool,
}

impl ShutdownFlags {
    /// `default`, or any of `save|nosave`, `now`, `force` separated by spaces.
    pub(crate) fn parse(value: &[u8]) -> Option<ShutdownFlags> {
        let text = String::from_utf8_lossy(value).to_ascii_lowercase();
        let words: Vec<&str> = text.split_whitespace().collect();
        if words == ["default"] {
            return Some(ShutdownFlags::default());
        }
        let mut f = ShutdownFlags::default();
        for w in &words {
            match *w {
                "save" => f.save = true,
                "nosave" => f.nosave = true,
                "now" => f.now = true,
                "force" => f.force = true,
                _ => return None,
            }
        }
        (!words.is_empty() && (!f.save || !f.nosave)).then_some(f)
    }

    /// As CONFIG GET shows it.
    pub(crate) fn text(self) -> String {
        let words: Vec<&str> =
            [(self.save, "save"), (self.nosave, "nosave"), (self.now, "now"), (self.force, "force")]
                .into_iter()
                .filter_map(|(on, w)| on.then_some(w))
                .collect();
        if words.is_empty() {
            "default".into()
        } else {
            words.join(" ")
        }
    }
}
