//! Command-line configuration (clap). Flag names follow redis.conf where Redis has the setting
//! (`--port`, `--bind`, `--unixsocket`, `--maxclients` ...), so operators recognise them.

use clap::Parser;
use std::path::PathBuf;

/// Default hard limit on a normal client's pending output. Redis leaves normal clients
/// unlimited; we refuse to let one client that never reads grow the server without bound, but
/// keep the limit far above any reply a sane client waits for (a large KEYS or HGETALL).
pub const DEFAULT_CLIENT_OUTPUT_LIMIT: u64 = 256 * 1024 * 1024;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "goblin-core",
    version,
    about = "A compact, single-threaded, Redis-compatible in-memory server (RESP2 and RESP3).",
    long_about = "A compact, single-threaded, Redis-compatible in-memory server (RESP2 and RESP3).\n\n\
        Usage as redis-server's: goblin-core [/path/to/redis.conf] [--option value ...]. A configuration \
        file's directives and Redis options that are not flags below are read as redis-server reads them \
        (README, \"Operating it\").",
    // A flag given twice (in the configuration file, then on the command line): the last wins.
    args_override_self = true
)]
pub struct Config {
    /// TCP port to listen on; 0 disables TCP (as in Redis).
    #[arg(long, default_value_t = 6379)]
    pub port: u16,

    /// Addresses to bind the TCP listener to; repeat the flag or give several values. A
    /// leading '-' (`-::1`, as in redis.conf) makes an address optional: skipped when this
    /// host has no such address. One value may hold several addresses separated by spaces
    /// (`--bind "127.0.0.1 -::1"`: how a redis.conf `bind` line arrives).
    #[arg(long, num_args = 1.., default_values_t = vec![String::from("127.0.0.1")])]
    pub bind: Vec<String>,

    /// Path of a Unix domain socket to listen on as well.
    #[arg(long)]
    pub unixsocket: Option<PathBuf>,

    /// Permissions of the Unix socket file, in octal (e.g. 700).
    #[arg(long, value_parser = parse_octal)]
    pub unixsocketperm: Option<u32>,

    /// Path of a shared-memory ring rendezvous socket to listen on as well: each client that
    /// connects gets its own pair of rings in a memfd (see crates/ring and ARCHITECTURE.md).
    #[arg(long)]
    pub ring: Option<PathBuf>,

    /// Bytes in each of a ring client's two rings (a power of two, 4096 to 1 GiB).
    #[arg(long = "ring-size", default_value = "1048576", value_parser = parse_ring_size)]
    pub ring_size: u64,

    /// Permissions of the ring rendezvous socket file, in octal (default 600: the owner only).
    #[arg(long = "ring-perm", default_value = "600", value_parser = parse_octal)]
    pub ring_perm: u32,

    /// Trust every ring connection: it starts authenticated as the default user even when that
    /// user needs a password (the socket's file mode is then the only gate).
    #[arg(long = "no-auth-ring")]
    pub no_auth_ring: bool,

    /// After the last ring activity, keep polling the rings without sleeping for this many
    /// microseconds (0 = sleep at once), so a ping-pong client never waits for a wake-up.
    #[arg(long = "ring-spin-us", default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub ring_spin_us: u32,

    /// Port of the SBE binary-write listener on every --bind address (0: none). Its peers are
    /// trusted: connections start authenticated as the default user (see docs/SBE.md).
    #[arg(long = "sbe-port", default_value_t = 0)]
    pub sbe_port: u16,

    /// Path of a Unix socket for SBE binary writes (trusted like --sbe-port).
    #[arg(long = "sbe-unixsocket", value_name = "PATH")]
    pub sbe_unixsocket: Option<PathBuf>,

    /// Permissions of the SBE Unix socket file, in octal (default 700: the owner only).
    #[arg(long = "sbe-unixsocket-perm", default_value = "700", value_parser = parse_octal)]
    pub sbe_unixsocket_perm: u32,
    /// TCP port of the RDMA ring listener (0 = none): each connection's handshake runs on it,
    /// then RESP travels over one-sided RDMA writes into per-connection rings (crates/rdma-ring,
    /// ARCHITECTURE.md "RDMA ring"). Listens on every --bind address.
    #[arg(long = "rdma-port", default_value_t = 0)]
    pub rdma_port: u16,

    /// What carries the RDMA listener's writes: `verbs` (an RDMA NIC through libibverbs; needs
    /// cargo feature `rdma` and a device) or `shm` (the same protocol over shared memory, for
    /// hosts without an RDMA NIC and for tests: clients on this host only).
    #[arg(long = "rdma-fabric", value_enum, default_value_t = RdmaFabric::Verbs)]
    pub rdma_fabric: RdmaFabric,

    /// Bytes in the server's receive ring of each RDMA connection (a power of two, 4096 to
    /// 1 GiB). The client chooses its own.
    #[arg(long = "rdma-ring-size", default_value = "1048576", value_parser = parse_ring_size)]
    pub rdma_ring_size: u64,

    /// Trust every RDMA connection: it starts authenticated as the default user even when that
    /// user needs a password (otherwise AUTH as on sockets).
    #[arg(long = "no-auth-rdma")]
    pub no_auth_rdma: bool,

    /// Number of databases (SELECT 0 .. N-1), as Redis's `databases`.
    #[arg(long, default_value_t = engine::DEFAULT_DATABASES, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub databases: u32,

    /// The listen backlog of every listening socket (Redis's `tcp-backlog`): connections the
    /// kernel completes and queues before the server accepts them. Past it, a client's SYN is
    /// dropped and it retries a second later; the kernel caps it at net.core.somaxconn.
    #[arg(long = "tcp-backlog", default_value_t = 511, value_parser = clap::value_parser!(i32).range(1..=65535))]
    pub tcp_backlog: i32,

    /// TCP keepalive of client connections, in seconds (Redis's `tcp-keepalive`, default 300;
    /// 0: off): after that long without traffic the kernel probes the client every third of
    /// it, and a client that answers none of three probes (a crashed host, a cut network) is
    /// closed, freeing its connection, its blocked commands and its memory. Also CONFIG SET
    /// (for connections accepted afterwards, as in Redis).
    #[arg(long = "tcp-keepalive", default_value_t = 300, value_parser = clap::value_parser!(u32).range(0..=i32::MAX as i64))]
    pub tcp_keepalive: u32,

    /// Maximum number of connected clients; further connections get an error and are closed.
    #[arg(long, default_value_t = 10000, value_parser = clap::value_parser!(u32).range(1..))]
    pub maxclients: u32,

    /// Hard limit in bytes on one normal client's pending output; a client past it is
    /// disconnected (0 = unlimited). Default 256 MiB. The other classes (pub/sub clients,
    /// redis-server replicas) and the soft limits: `client-output-buffer-limit`.
    #[arg(long = "client-output-limit", default_value_t = DEFAULT_CLIENT_OUTPUT_LIMIT)]
    pub client_output_limit: u64,

    /// Largest bulk string a request may carry, in bytes (Redis `proto-max-bulk-len`).
    #[arg(long = "proto-max-bulk-len", default_value_t = 512 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1024..))]
    pub proto_max_bulk_len: u64,

    /// Before sleeping in epoll_wait, keep polling without blocking for up to this many
    /// microseconds (0 = never): requests that arrive within the window are served without a
    /// wake-up. Adaptive: it only spins while requests arrive closer together than this, so an
    /// idle or lightly loaded server does not spin.
    #[arg(long = "busy-poll-us", default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub busy_poll_us: u32,

    /// Milliseconds a script may run before other clients get BUSY and SCRIPT KILL may stop
    /// it (Redis's `busy-reply-threshold`, alias `lua-time-limit`).
    #[arg(long = "busy-reply-threshold", alias = "lua-time-limit", default_value_t = 5000)]
    pub busy_reply_threshold: u64,

    /// Close clients idle for more than this many seconds (0: never), as Redis's `timeout`.
    #[arg(long = "timeout", default_value_t = 0)]
    pub idle_timeout_secs: u64,

    /// Refuse writes (NOREPLICAS) unless at least this many replicas (firehose subscribers
    /// and redis-server replicas) acknowledged within `--min-replicas-max-lag` seconds; 0: off.
    /// Redis's `min-replicas-to-write` (alias `min-slaves-to-write`).
    #[arg(long = "min-replicas-to-write", alias = "min-slaves-to-write", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=i32::MAX as i64))]
    pub min_replicas_to_write: u32,

    /// Seconds since a replica's last acknowledgement within which it counts for
    /// `--min-replicas-to-write` (0: the check is off). Alias `min-slaves-max-lag`.
    #[arg(long = "min-replicas-max-lag", alias = "min-slaves-max-lag", default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=i32::MAX as u64))]
    pub min_replicas_max_lag: u64,

    /// jemalloc's background purging thread (Redis's `jemalloc-bg-thread`, on by default
    /// there too). Without it jemalloc returns the pages of a freed allocation of 8 MiB or more
    /// at once, in the server thread, and the next big value faults fresh pages in again: a
    /// 64 MiB SET took five times Redis's time and its DEL fifteen. With it, dirty pages are
    /// returned after jemalloc's decay time, off the server thread.
    #[arg(long = "jemalloc-bg-thread", value_name = "yes|no", default_value = "yes", value_parser = parse_yes_no, action = clap::ArgAction::Set)]
    pub jemalloc_bg_thread: bool,

    /// Redis's `rdbcompression` (default yes): strings longer than 20 bytes in the RDB files
    /// this server writes (SAVE and BGSAVE without `--load`, SYNC, `redis-cli --rdb`) and in DUMP
    /// payloads are LZF-compressed where that saves more than 4 bytes. Also CONFIG SET.
    #[arg(long = "rdbcompression", value_name = "yes|no", default_value = "yes", value_parser = parse_yes_no, action = clap::ArgAction::Set)]
    pub rdbcompression: bool,

    /// Redis's `rdbchecksum` (default yes): RDB files end with their CRC64; with no, eight zero
    /// bytes, which readers take as unchecked. Native snapshots check every block whatever
    /// this says. Also CONFIG SET.
    #[arg(long = "rdbchecksum", value_name = "yes|no", default_value = "yes", value_parser = parse_yes_no, action = clap::ArgAction::Set)]
    pub rdbchecksum: bool,

    /// Redis's `crash-log-enabled` (default yes): a fatal signal or a panic leaves a crash
    /// report in the log (stack trace, the command running). Also CONFIG SET.
    #[arg(long = "crash-log-enabled", value_name = "yes|no", default_value = "yes", value_parser = parse_yes_no, action = clap::ArgAction::Set)]
    pub crash_log_enabled: bool,

    /// Redis's `hide-user-data-from-log` (default no): a crash report names the command that
    /// was running but not its arguments, and log lines name keys as `*redacted*`. Also
    /// CONFIG SET.
    #[arg(long = "hide-user-data-from-log", value_name = "yes|no", default_value = "no", value_parser = parse_yes_no, action = clap::ArgAction::Set)]
    pub hide_user_data_from_log: bool,

    /// Redis's hidden `use-exit-on-panic` (default no): DEBUG ASSERT and DEBUG PANIC end the
    /// process with exit(1) after their report instead of abort(). Also CONFIG SET.
    #[arg(long = "use-exit-on-panic", value_name = "yes|no", default_value = "no", value_parser = parse_yes_no, action = clap::ArgAction::Set, hide = true)]
    pub use_exit_on_panic: bool,

    /// Working directory (Redis's `dir`). goblin-core changes into it before anything else, so
    /// every relative path (RDB files, `--load`, `--logfile`, `--pidfile`, `--unixsocket`) is
    /// inside it. CONFIG SET dir changes it at runtime.
    #[arg(long = "dir", value_name = "PATH")]
    pub dir: Option<PathBuf>,

    /// The RDB file SAVE and BGSAVE write without `--load` (Redis's `dbfilename`): a name in
    /// the working directory, not a path.
    #[arg(long = "dbfilename", value_name = "NAME", default_value = "dump.rdb")]
    pub dbfilename: String,

    /// Log to this file, appending (Redis's `logfile`); "" logs to standard error.
    #[arg(long = "logfile", value_name = "PATH", default_value = "")]
    pub logfile: String,

    /// Write the server's process id to this file once it runs, and remove the file when it
    /// shuts down (Redis's `pidfile`).
    #[arg(long = "pidfile", value_name = "PATH")]
    pub pidfile: Option<PathBuf>,

    /// Run in the background (Redis's `daemonize`): the command returns at once, the server
    /// goes on in a new session with its standard streams on /dev/null (so log with
    /// `--logfile`; `--pidfile` says which process it is).
    #[arg(long = "daemonize", value_name = "yes|no", default_value = "no", value_parser = parse_yes_no, action = clap::ArgAction::Set)]
    pub daemonize: bool,

    /// Tell a service manager when the server is ready (Redis's `supervised`): `systemd`
    /// sends READY=1 to `NOTIFY_SOCKET` once the listeners are open (a `Type=notify` unit,
    /// as Debian's redis-server.service), `upstart` stops the process for upstart to resume,
    /// `auto` picks by the environment, `no` (the default) does nothing.
    #[arg(long = "supervised", value_name = "no|upstart|systemd|auto", default_value = "no", value_parser = crate::supervise::Mode::parse)]
    pub supervised: crate::supervise::Mode,

    /// Refuse writes (and PING) with Redis's MISCONF while the last snapshot save failed and
    /// save rules are in force (`--load` and `--save`), as Redis's `stop-writes-on-bgsave-error`
    /// (default yes): a server that can no longer persist says so to its writers instead of
    /// taking writes a restart would lose. The next successful save lifts it. Also CONFIG SET.
    #[arg(long = "stop-writes-on-bgsave-error", value_name = "yes|no", default_value = "yes", value_parser = parse_yes_no, action = clap::ArgAction::Set)]
    pub stop_writes_on_bgsave_error: bool,

    /// Redis's `protected-mode` (default yes): while the default user has no password, TCP and
    /// TLS clients from anywhere but the loopback interface get a DENIED error and are
    /// disconnected; loopback, Unix sockets and the local transports are served. An operator who
    /// binds a public address without setting a password does not get an open server by
    /// accident, as with redis-server 7 and later. Also CONFIG SET.
    #[arg(long = "protected-mode", value_name = "yes|no", default_value = "yes", value_parser = parse_yes_no, action = clap::ArgAction::Set)]
    pub protected_mode: bool,

    /// Redis's `hz` (reported by INFO and CONFIG GET; goblin-core's timers do not depend on it).
    #[arg(long = "hz", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=500))]
    pub hz: u32,

    /// Keyspace notifications to publish, as Redis's `notify-keyspace-events` (classes
    /// `Ag$lshzxeKEtmdn` and `a` for arrays; empty: none). CONFIG SET changes it at run time.
    #[arg(long = "notify-keyspace-events", default_value = "")]
    pub notify_keyspace_events: String,
    /// Memory limit (Redis's units: `100mb`, `1gb`, `1048576`; 0 = none). Above it, before a
    /// command runs, keys are evicted by `--maxmemory-policy`, or the commands that may grow
    /// memory get OOM (see engine/src/evict.rs). Measured as INFO's `used_memory`.
    #[arg(long, default_value = "0", value_parser = parse_bytes)]
    pub maxmemory: u64,

    /// Redis's client eviction: when the normal and pub/sub clients' buffers together use
    /// this much (bytes, or `N%` of `--maxmemory`; 0 = off; at least 128 KiB when on), the
    /// largest are closed (not those with CLIENT NO-EVICT on) until they use less.
    #[arg(long = "maxmemory-clients", default_value = "0", value_parser = parse_maxmemory_clients)]
    pub maxmemory_clients: MaxmemoryClients,

    /// noeviction, allkeys-lru, allkeys-lfu, allkeys-random, volatile-lru, volatile-lfu,
    /// volatile-random or volatile-ttl (volatile-*: only keys with a deadline are evicted).
    #[arg(long = "maxmemory-policy", default_value = "noeviction", value_parser = parse_policy)]
    pub maxmemory_policy: engine::evict::Policy,

    /// Keys sampled per eviction (more: closer to true LRU/LFU, slower).
    #[arg(long = "maxmemory-samples", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=i32::MAX as i64))]
    pub maxmemory_samples: u32,

    /// How slowly the LFU counter grows: the increment probability is
    /// 1 / ((counter - 5) * factor + 1).
    #[arg(long = "lfu-log-factor", default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=i32::MAX as i64))]
    pub lfu_log_factor: u32,

    /// Minutes per decrement of an idle key's LFU counter (0: never decays).
    #[arg(long = "lfu-decay-time", default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=i32::MAX as i64))]
    pub lfu_decay_time: u32,

    /// Log level: Redis's (debug, verbose, notice, warning, nothing), tracing's (trace, debug,
    /// info, warn, error, off), or a directive list of them (`notice,goblin_core::journal=debug`).
    /// Also CONFIG SET.
    #[arg(long, default_value = "info", value_parser = crate::logging::parse_level)]
    pub loglevel: String,

    /// Whether DEBUG's intrusive subcommands (BATCHES, CRASH-WRITE, CRASH-READ) may run:
    /// no, yes, or local (Unix socket and loopback connections only), as Redis's
    /// enable-debug-command. DEBUG DIGEST and DIGEST-VALUE are always allowed.
    #[arg(long = "enable-debug-command", value_enum, default_value_t = DebugCommand::No)]
    pub enable_debug_command: DebugCommand,

    /// Keep the last committed batches for DEBUG BATCHES (tests of the write path); needs
    /// --enable-debug-command. Off by default: the history holds copies of up to 1 MiB of
    /// batches (one batch whatever its size), which a test harness that merely turns DEBUG on
    /// (Redis's does) should not pay for in used_memory.
    #[arg(long = "debug-batch-history", value_name = "yes|no", default_value = "no", value_parser = parse_yes_no, action = clap::ArgAction::Set, hide = true)]
    pub debug_batch_history: bool,

    /// Whether CONFIG SET may change the protected settings, `dir` and `dbfilename` (no, yes,
    /// local), as Redis 7's enable-protected-configs: refused by default, since a client that
    /// can write files where it likes can take over the machine.
    #[arg(long = "enable-protected-configs", value_enum, default_value_t = DebugCommand::No)]
    pub enable_protected_configs: DebugCommand,

    /// Whether MODULE LOAD, LOADEX and UNLOAD may run (no, yes, local), as Redis's
    /// enable-module-command. goblin-core loads no modules: where allowed, they answer as a
    /// failed load or an unknown module would.
    #[arg(long = "enable-module-command", value_enum, default_value_t = DebugCommand::No)]
    pub enable_module_command: DebugCommand,

    // ---- Authentication and TLS (auth.rs, transport/tls.rs). Redis's names where Redis has
    // ---- the setting. The replica-side flags are parsed and kept for the replication link.
    /// Users and passwords, in a subset of Redis's ACL file format (docs/ARCHITECTURE.md,
    /// "Authentication"): `user <name> on|off >password #<sha256> nopass ...`. Rules that
    /// would restrict commands, keys or channels are refused at startup.
    #[arg(long = "auth-file", alias = "aclfile", value_name = "PATH")]
    pub auth_file: Option<PathBuf>,

    /// Password of the `default` user (Redis's requirepass); clients then AUTH first.
    #[arg(long, value_name = "PASSWORD")]
    pub requirepass: Option<String>,

    /// Serve TLS clients on this port too, on every --bind address (0: no TLS listener).
    #[arg(long = "tls-port", default_value_t = 0)]
    pub tls_port: u16,

    /// The server's certificate chain (PEM), for --tls-port.
    #[arg(long = "tls-cert-file", value_name = "PATH")]
    pub tls_cert_file: Option<PathBuf>,

    /// The private key of --tls-cert-file (PEM).
    #[arg(long = "tls-key-file", value_name = "PATH")]
    pub tls_key_file: Option<PathBuf>,

    /// CA certificates (PEM) that client certificates must chain to (--tls-auth-clients).
    #[arg(long = "tls-ca-cert-file", value_name = "PATH")]
    pub tls_ca_cert_file: Option<PathBuf>,

    /// Whether TLS clients must present a certificate signed by --tls-ca-cert-file: no,
    /// yes or optional. Unlike Redis, the default is no.
    #[arg(long = "tls-auth-clients", value_enum, default_value_t = crate::transport::tls::AuthClients::No)]
    pub tls_auth_clients: crate::transport::tls::AuthClients,

    /// Use TLS to the upstream even on loopback (non-loopback sources always use TLS).
    #[arg(long = "replica-tls")]
    pub replica_tls: bool,

    /// CA certificates (PEM) to verify the upstream with, instead of the system trust store.
    #[arg(long = "replica-tls-ca-file", value_name = "PATH")]
    pub replica_tls_ca_file: Option<PathBuf>,

    /// DNS name to verify in the upstream's certificate instead of its address.
    #[arg(long = "replica-tls-server-name", value_name = "NAME")]
    pub replica_tls_server_name: Option<String>,
    // ---- end of authentication and TLS
    /// Native snapshot (.gcsn) to load at startup; SAVE, BGSAVE and periodic saves write it
    /// too, so a restart with the same command line comes back from the newest snapshot. A
    /// missing file starts an empty dataset (with a warning).
    #[arg(long, value_name = "PATH")]
    pub load: Option<PathBuf>,

    /// Periodic snapshot rules, as Redis's `save`: pairs of <seconds> <changes> ("3600 1 300
    /// 100": after an hour if anything changed, after 5 minutes if 100 writes did); "" turns
    /// them off. They apply only with --load (the snapshot's path). With rules, a shutdown
    /// saves first.
    #[arg(long, value_name = "RULES", default_value = "3600 1 300 100 60 10000", value_parser = parse_save)]
    pub save: SaveRules,

    /// Testing aid: sleep this many microseconds after each snapshot block written (SAVE,
    /// BGSAVE, DUMPWORLD), so tests can act in the middle of a save (as Redis's
    /// rdb-key-save-delay). 0 in production.
    #[arg(long = "snapshot-block-delay-us", default_value_t = 0, hide = true)]
    pub snapshot_block_delay_us: u64,

    /// Run the server thread on the NUMA node of this network interface: before the dataset
    /// is loaded, pin it to the node's CPUs and bind its memory to the node (read from
    /// /sys/class/net/IFACE/device). An interface without a node (lo, veth, numa_node -1)
    /// starts unpinned, with a warning; an unknown one is refused.
    #[arg(long, value_name = "IFACE")]
    pub numa: Option<String>,

    /// Testing aid: the sysfs tree --numa reads instead of /sys.
    #[arg(long = "numa-sysfs-root", value_name = "PATH", default_value = crate::numa::SYSFS, hide = true)]
    pub numa_sysfs_root: PathBuf,

    /// What to do instead of serving (`dumpworld`: fetch a snapshot from a running server).
    #[command(subcommand)]
    pub tool: Option<Tool>,

    // ---- Flags of the durable system that later work brings: accepted by the parser so that
    // ---- the server can refuse them with a clear message (see `validate`).
    /// Journal every write to this Kafka topic and recover from it at startup:
    /// `kafka://host:port[,host:port]/topic[?property=value&...]` or
    /// `bootstrap.servers=host:port;topic=NAME[;property=value...]`. The topic must have one
    /// partition; a missing one is created (cleanup.policy=delete, unlimited retention).
    #[arg(long, value_name = "URI")]
    pub kafka: Option<String>,

    /// What a write's reply means with --kafka: `queued` (the records are in the local
    /// producer queue; a crash can lose them) or `broker` (Kafka acknowledged them).
    #[arg(requires = "kafka", long = "kafka-ack-mode", value_enum, default_value_t = KafkaAckMode::Queued)]
    pub kafka_ack_mode: KafkaAckMode,

    /// For a --load snapshot without Kafka cursors (written by a server without --kafka):
    /// replay from the first record at or after the file's creation time minus this many
    /// seconds.
    #[arg(requires = "kafka", long = "kafka-time-buffer", value_name = "SECONDS", default_value_t = 0)]
    pub kafka_time_buffer: u64,

    /// Unacknowledged journal bytes at which command input pauses (Kafka polling and output
    /// go on) until Kafka catches up: a number with an optional kb/mb/gb suffix.
    #[arg(requires = "kafka", long = "kafka-pending-bytes", default_value = "16mb", value_parser = parse_bytes)]
    pub kafka_pending_bytes: u64,

    /// `yes`: present this server as a Redis Cluster of one node owning every hash slot, for
    /// cluster clients (cluster.rs): CLUSTER SLOTS/SHARDS/NODES, CROSSSLOT, database 0 only.
    #[arg(long = "cluster-enabled", value_name = "yes|no", default_value = "no", value_parser = parse_yes_no, action = clap::ArgAction::Set)]
    pub cluster_enabled: bool,

    // ---- following a redis-server (replication/redis_primary.rs) ----
    /// Be a read-only replica of the redis-server at HOST PORT, over Redis's replication
    /// protocol (as `REPLICAOF HOST PORT` at runtime; redis-server's own flag).
    #[arg(long = "replicaof", visible_alias = "slaveof", num_args = 2, value_names = ["HOST", "PORT"])]
    pub replicaof: Option<Vec<String>>,

    /// The user `--replicaof` logs in as (`masteruser`; CONFIG SET changes it).
    #[arg(long = "masteruser", value_name = "USER", requires = "masterauth_file")]
    pub masteruser: Option<String>,

    /// A file whose first line is the password `--replicaof` logs in with (`masterauth`; read
    /// at startup, never on the command line; CONFIG SET changes it).
    #[arg(long = "masterauth-file", value_name = "PATH")]
    pub masterauth_file: Option<PathBuf>,

    // ---- firehose replication (replication/) ----
    /// Be a read-only replica of the goblin-core upstream at HOST PORT (GOBLIN.FIREHOSE).
    #[arg(long = "replica-tcp", num_args = 2, value_names = ["HOST", "PORT"])]
    pub replica_tcp: Option<Vec<String>>,

    /// The user a replica authenticates as (AUTH before GOBLIN.FIREHOSE).
    #[arg(long = "replica-auth-user", value_name = "USER")]
    pub replica_auth_user: Option<String>,

    /// A file whose first line is the replica's password (read at startup, never on the
    /// command line).
    #[arg(long = "replica-auth-password-file", value_name = "PATH")]
    pub replica_auth_password_file: Option<PathBuf>,

    /// Size of each downstream's fixed output queue (an anonymous mapping, rounded up to a page
    /// and prefaulted; a frame larger than it goes out from a shared copy instead). Startup
    /// maps one to check that the size can be mapped at all.
    #[arg(long = "replication-buffer-bytes", default_value = "1mb", value_parser = parse_replication_buffer)]
    pub replication_buffer_bytes: u64,

    /// Be a read-only replica of the goblin-core upstream listening on this Unix socket.
    #[arg(long = "replica-uds", value_name = "PATH")]
    pub replica_uds: Option<PathBuf>,

    /// Be a read-only replica of the goblin-core upstream whose `--ring` socket is PATH: the
    /// firehose runs over a shared-memory ring pair (same host only).
    #[arg(long = "replica-ring", value_name = "PATH")]
    pub replica_ring: Option<PathBuf>,

    /// Be a read-only replica of the goblin-core upstream whose `--rdma-port` is at HOST PORT,
    /// with a receive ring of SIZE bytes (a power of two, 4096 to 1 GiB): the firehose runs
    /// over the RDMA ring, on the fabric the upstream names.
    #[arg(long = "replica-rdma", num_args = 3, value_names = ["HOST", "PORT", "SIZE"])]
    pub replica_rdma: Option<Vec<String>>,
}

/// `--rdma-fabric`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RdmaFabric {
    Verbs,
    Shm,
}

impl RdmaFabric {
    pub fn kind(self) -> goblin_rdma::FabricKind {
        match self {
            RdmaFabric::Verbs => goblin_rdma::FabricKind::Verbs,
            RdmaFabric::Shm => goblin_rdma::FabricKind::Shm,
        }
    }
}

/// Parsed `--save` rules: (seconds, changes) pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaveRules(pub Vec<(u64, u64)>);

fn parse_save(s: &str) -> Result<SaveRules, String> {
    crate::snapshots::parse_save_rules(s).map(SaveRules)
}

/// `--replication-buffer-bytes`: a size (as `parse_bytes`) that the kernel maps, checked by
/// mapping and unmapping one queue of it, so that a size it refuses stops startup (exit 2, as
/// any bad flag) rather than failing every later GOBLIN.FIREHOSE.
fn parse_replication_buffer(s: &str) -> Result<u64, String> {
    let n = parse_bytes(s)?;
    crate::replication::queue::MmapQueue::check_size(n)
        .map_err(|e| format!("cannot map a {n}-byte queue (each firehose subscriber needs one): {e}"))?;
    Ok(n)
}

/// Subcommands: tools that run instead of the server.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum Tool {
    /// Fetches a fork-time snapshot from a running server (GOBLIN.DUMPWORLD), verifies it and
    /// installs it atomically at OUTPUT, ready for `--load OUTPUT` (bootstrapping a replica).
    Dumpworld {
        /// Host of the server to copy.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// Its port.
        #[arg(long, default_value_t = 6379)]
        port: u16,
        /// Where to install the snapshot.
        #[arg(short = 'o', long = "output", value_name = "OUTPUT")]
        output: PathBuf,
        /// The user to authenticate as (AUTH before GOBLIN.DUMPWORLD), as a replica's
        /// --replica-auth-user; `default` when only --password-file is given.
        #[arg(long = "user", value_name = "USER", requires = "password_file")]
        user: Option<String>,
        /// A file whose first line is the password (never given on the command line), as a
        /// replica's --replica-auth-password-file.
        #[arg(long = "password-file", value_name = "PATH")]
        password_file: Option<PathBuf>,
    },
    /// Converts an RDB file (redis-server's dump.rdb, RDB versions 1 to 12) into a native
    /// snapshot at OUTPUT, ready for `--load OUTPUT`: every key of database 0 with its
    /// deadline (keys already past it are left out) and the function libraries.
    ImportRdb {
        /// The RDB file.
        #[arg(value_name = "RDB")]
        input: PathBuf,
        /// Where to install the snapshot (atomically).
        #[arg(short = 'o', long = "output", value_name = "OUTPUT")]
        output: PathBuf,
    },
    /// Test aid: connects with TLS (client_config, server_name, connect_client), sends PING
    /// and prints the reply; exits 1 with the reason if the handshake fails.
    #[command(hide = true)]
    TlsPing {
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        #[arg(long)]
        port: u16,
        /// CA file (default: the system trust store).
        #[arg(long)]
        ca: Option<PathBuf>,
        /// DNS name to verify instead of the host.
        #[arg(long = "server-name")]
        server_name: Option<String>,
    },
}

/// `--kafka-ack-mode`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum KafkaAckMode {
    Queued,
    Broker,
}

/// `--enable-debug-command`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DebugCommand {
    No,
    Yes,
    Local,
}

impl DebugCommand {
    /// As CONFIG GET shows it.
    pub fn name(self) -> &'static str {
        match self {
            DebugCommand::No => "no",
            DebugCommand::Yes => "yes",
            DebugCommand::Local => "local",
        }
    }

    /// True unless DEBUG's intrusive subcommands are off everywhere.
    pub fn allowed_anywhere_or_local(self) -> bool {
        self != DebugCommand::No
    }
}

impl Config {
    /// Checks what the parser cannot: combinations and features this build does not have
    /// yet. The message names the flag; `main` exits with status 2 (a usage error, as clap).
    /// One of `--replica-tcp`, `--replica-uds`, `--replica-ring` is given.
    /// Whether the RDB file at `dbfilename` is this server's restart point, as redis-server's
    /// dump.rdb: loaded at startup, kept by the save rules and the save at shutdown. Not with
    /// `--load` (the native snapshot is), `--kafka` (the topic's replay is) or a firehose
    /// upstream (the upstream's lineage is).
    pub fn rdb_restart_point(&self) -> bool {
        self.load.is_none() && self.kafka.is_none() && !self.is_replica()
    }

    pub fn is_replica(&self) -> bool {
        self.replica_tcp.is_some()
            || self.replica_uds.is_some()
            || self.replica_ring.is_some()
            || self.replica_rdma.is_some()
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.dbfilename.is_empty() || self.dbfilename.contains('/') {
            return Err(format!(
                "--dbfilename {:?}: dbfilename can't be a path, just a filename",
                self.dbfilename
            ));
        }
        if crate::notify::parse_flags(self.notify_keyspace_events.as_bytes()).is_none() {
            return Err(format!(
                "--notify-keyspace-events {:?}: invalid event class character. Use 'Ag$lshzxeKEtmdn'.",
                self.notify_keyspace_events
            ));
        }
        if let Some(k) = &self.kafka {
            let _target = crate::journal::target::parse(k)?;
            #[cfg(feature = "kafka")]
            _target.check_properties()?;
            if !cfg!(feature = "kafka") {
                return Err(
                    "--kafka: this goblin-core was built without Kafka support (cargo feature `kafka`)"
                        .into(),
                );
            }
        }
        if let Some(iface) = &self.numa {
            crate::numa::check_iface_name(iface)?;
        }
        if self.tls_port != 0 && (self.tls_cert_file.is_none() || self.tls_key_file.is_none()) {
            return Err("--tls-port needs --tls-cert-file and --tls-key-file".into());
        }
        let upstreams = [
            self.replica_tcp.is_some(),
            self.replica_uds.is_some(),
            self.replica_ring.is_some(),
            self.replica_rdma.is_some(),
        ];
        if upstreams.iter().filter(|&&u| u).count() > 1 {
            return Err("--replica-tcp, --replica-uds, --replica-ring and --replica-rdma: a replica has \
                 exactly one upstream"
                .into());
        }
        if self.rdma_port != 0 && self.rdma_fabric == RdmaFabric::Verbs && !cfg!(feature = "rdma") {
            return Err("--rdma-port: this goblin-core was built without RDMA verbs support (cargo \
                 feature `rdma`); `--rdma-fabric shm` runs the same ring over shared memory, for \
                 clients on this host"
                .into());
        }
        if let Some(v) = &self.replica_rdma {
            if v[1].parse::<u16>().ok().filter(|&p| p > 0).is_none() {
                return Err(format!("--replica-rdma: invalid port '{}'", v[1]));
            }
            if parse_bytes(&v[2]).ok().filter(|&n| goblin_rdma::valid_ring_size(n)).is_none() {
                return Err(format!(
                    "--replica-rdma: invalid ring size '{}' (a power of two between 4096 and 1073741824)",
                    v[2]
                ));
            }
        }
        if let Some(v) = &self.replica_tcp {
            if v[1].parse::<u16>().ok().filter(|&p| p > 0).is_none() {
                return Err(format!("--replica-tcp: invalid port '{}'", v[1]));
            }
        }
        if let Some(v) = &self.replicaof {
            if v[1].parse::<u16>().ok().filter(|&p| p > 0).is_none() {
                return Err(format!("--replicaof: invalid port '{}'", v[1]));
            }
            if self.is_replica() {
                return Err("--replicaof follows a redis-server; --replica-* a goblin-core upstream: a \
                     replica has exactly one upstream"
                    .into());
            }
            if self.kafka.is_some() {
                return Err("--replicaof with --kafka: a journal's history cannot take a Redis primary's \
                     RDB file in its middle (import one with `goblin-core import-rdb` instead)"
                    .into());
            }
        } else if self.masterauth_file.is_some() {
            return Err(
                "--masterauth-file needs --replicaof (CONFIG SET masterauth sets it at runtime)".into()
            );
        }
        if !self.is_replica() {
            if self.replica_auth_user.is_some() || self.replica_auth_password_file.is_some() {
                return Err(
                    "--replica-auth-user/--replica-auth-password-file need --replica-tcp, --replica-uds, \
                     --replica-ring or --replica-rdma"
                        .into(),
                );
            }
        } else if self.replica_auth_user.is_some() && self.replica_auth_password_file.is_none() {
            return Err("--replica-auth-user needs --replica-auth-password-file (the password is never given on the command line)".into());
        }
        Ok(())
    }
}

/// Redis's boolean settings: `yes` or `no`.
pub fn parse_yes_no(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(format!("'{s}': argument must be 'yes' or 'no'")),
    }
}

/// `16mb`, `512kb`, `1gb`, `1048576` (Redis's units: k/kb/m/mb/g/gb, powers of 1024 for the
/// `b` forms and of 1000 for the bare letters).
/// `maxmemory-clients`: off, a number of bytes, or a percentage of `maxmemory`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MaxmemoryClients {
    #[default]
    Off,
    Bytes(u64),
    Percent(u64),
}

impl MaxmemoryClients {
    /// The limit in bytes now (Redis's getClientEvictionLimit): a percentage of an unset
    /// maxmemory is no limit; any limit is at least 128 KiB, so a bad setting cannot cut every
    /// client off.
    pub fn limit(self, maxmemory: u64) -> Option<u64> {
        let bytes = match self {
            MaxmemoryClients::Off => return None,
            MaxmemoryClients::Bytes(n) => n,
            MaxmemoryClients::Percent(_) if maxmemory == 0 => return None,
            MaxmemoryClients::Percent(p) => (maxmemory as f64 * p as f64 / 100.0) as u64,
        };
        Some(bytes.max(128 << 10))
    }

    /// As CONFIG GET prints it.
    pub fn text(self) -> String {
        match self {
            MaxmemoryClients::Off => "0".into(),
            MaxmemoryClients::Bytes(n) => n.to_string(),
            MaxmemoryClients::Percent(p) => format!("{p}%"),
        }
    }
}

/// `maxmemory-clients`' value, with Redis's errors.
pub(crate) fn parse_maxmemory_clients(s: &str) -> Result<MaxmemoryClients, String> {
    if let Some(p) = s.trim().strip_suffix('%') {
        return match p.parse::<u64>() {
            Ok(p) if p > 100 => Err("percentage argument must be less or equal to 100".into()),
            Ok(0) => Ok(MaxmemoryClients::Off),
            Ok(p) => Ok(MaxmemoryClients::Percent(p)),
            Err(_) => Err("argument must be a memory or percent value".into()),
        };
    }
    match parse_bytes(s) {
        Ok(0) => Ok(MaxmemoryClients::Off),
        Ok(n) => Ok(MaxmemoryClients::Bytes(n)),
        Err(_) => Err("argument must be a memory or percent value".into()),
    }
}

pub(crate) fn parse_bytes(s: &str) -> Result<u64, String> {
    let l = s.trim().to_ascii_lowercase();
    let split = l.find(|c: char| !c.is_ascii_digit()).unwrap_or(l.len());
    let (num, unit) = l.split_at(split);
    let mult: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return Err(format!("'{s}' is not a size (e.g. 16mb)")),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("'{s}' is not a size (e.g. 16mb)"))
}

fn parse_policy(s: &str) -> Result<engine::evict::Policy, String> {
    engine::evict::Policy::parse(s.as_bytes()).ok_or_else(|| {
        let names: Vec<&str> = engine::evict::Policy::ALL.iter().map(|p| p.name()).collect();
        format!("'{s}' is not one of {}", names.join(", "))
    })
}

impl Config {
    /// The engine's eviction settings from these flags (CONFIG SET changes them later).
    pub fn evict_config(&self) -> engine::evict::EvictConfig {
        engine::evict::EvictConfig {
            maxmemory: self.maxmemory,
            policy: self.maxmemory_policy,
            samples: self.maxmemory_samples as usize,
            lfu_log_factor: self.lfu_log_factor,
            lfu_decay_time: self.lfu_decay_time,
        }
    }
}

fn parse_ring_size(s: &str) -> Result<u64, String> {
    let n = parse_bytes(s)?;
    if goblin_ring::shm::valid_ring_size(n) {
        Ok(n)
    } else {
        Err(format!("'{s}' is not a power of two between 4096 and 1073741824"))
    }
}

fn parse_octal(s: &str) -> Result<u32, String> {
    match u32::from_str_radix(s, 8) {
        Ok(v) if v <= 0o7777 => Ok(v),
        _ => Err(format!("'{s}' is not an octal permission mode (e.g. 700)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_defaults_and_flags() {
        let c = Config::try_parse_from(["goblin-core"]).unwrap();
        assert_eq!(c.port, 6379);
        assert_eq!(c.bind, vec!["127.0.0.1"]);
        let c = Config::try_parse_from([
            "goblin-core",
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "::1",
            "--unixsocket",
            "/tmp/x.sock",
            "--unixsocketperm",
            "770",
        ])
        .unwrap();
        assert_eq!(c.port, 0);
        assert_eq!(c.bind.len(), 2);
        assert_eq!(c.unixsocketperm, Some(0o770));
        assert!(Config::try_parse_from(["goblin-core", "--unixsocketperm", "9"]).is_err());
        assert!(Config::try_parse_from(["goblin-core", "--no-such-flag"]).is_err());
        assert!(Config::try_parse_from(["goblin-core", "--maxclients", "0"]).is_err());
        assert_eq!(Config::try_parse_from(["goblin-core"]).unwrap().busy_poll_us, 5);
        assert!(Config::try_parse_from(["goblin-core", "--busy-poll-us", "20001"]).is_err());
        let c = Config::try_parse_from(["goblin-core", "--enable-debug-command", "local"]).unwrap();
        assert_eq!(c.enable_debug_command, DebugCommand::Local);
        assert!(Config::try_parse_from(["goblin-core", "--enable-debug-command", "maybe"]).is_err());
    }

    #[test]
    fn auth_and_tls_flags() {
        let c = Config::try_parse_from([
            "goblin-core",
            "--auth-file",
            "/etc/goblin/users.acl",
            "--requirepass",
            "pw",
            "--tls-port",
            "6380",
            "--tls-cert-file",
            "c.pem",
            "--tls-key-file",
            "k.pem",
            "--tls-auth-clients",
            "optional",
            "--replica-tls",
            "--replica-tls-ca-file",
            "ca.pem",
            "--replica-tls-server-name",
            "primary.example.net",
        ])
        .unwrap();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.tls_port, 6380);
        assert_eq!(c.tls_auth_clients, crate::transport::tls::AuthClients::Optional);
        assert!(c.replica_tls);
        assert_eq!(c.replica_tls_server_name.as_deref(), Some("primary.example.net"));
        let c = Config::try_parse_from(["goblin-core"]).unwrap();
        assert_eq!(
            (c.tls_port, c.tls_auth_clients, c.replica_tls),
            (0, crate::transport::tls::AuthClients::No, false)
        );
        let c = Config::try_parse_from(["goblin-core", "--tls-port", "6380", "--tls-cert-file", "c.pem"])
            .unwrap();
        assert!(c.validate().unwrap_err().contains("--tls-key-file"));
    }

    #[test]
    fn replica_and_kafka_flags_are_checked() {
        assert_eq!(Config::try_parse_from(["goblin-core"]).unwrap().validate(), Ok(()));
        for (args, want) in [
            (vec!["--replica-tcp", "127.0.0.1", "6379", "--replica-uds", "/tmp/s"], "exactly one upstream"),
            (vec!["--replicaof", "127.0.0.1", "6379", "--replica-uds", "/tmp/s"], "exactly one upstream"),
            (vec!["--replicaof", "127.0.0.1", "x"], "--replicaof: invalid port 'x'"),
            (
                vec!["--replicaof", "127.0.0.1", "6379", "--kafka", "kafka://127.0.0.1:9092/t"],
                "--replicaof with --kafka",
            ),
            (vec!["--masterauth-file", "/tmp/p"], "--masterauth-file needs --replicaof"),
            (vec!["--replica-tcp", "127.0.0.1", "0"], "invalid port '0'"),
            (vec!["--replica-tcp", "127.0.0.1", "http"], "invalid port 'http'"),
            (vec!["--replica-auth-user", "r"], "need --replica-tcp"),
            (
                vec!["--replica-uds", "/tmp/s", "--replica-auth-user", "r"],
                "needs --replica-auth-password-file",
            ),
        ] {
            let c = Config::try_parse_from(std::iter::once("goblin-core").chain(args)).unwrap();
            let err = c.validate().unwrap_err();
            assert!(err.contains(want), "{err}");
        }
        let c = Config::try_parse_from([
            "goblin-core",
            "--replica-uds",
            "/tmp/s",
            "--replication-buffer-bytes",
            "64kb",
        ])
        .unwrap();
        assert_eq!((c.validate(), c.replication_buffer_bytes), (Ok(()), 64 << 10));
        let c = Config::try_parse_from(["goblin-core", "--kafka", "kafka://h:1/t?acks=1"]).unwrap();
        assert!(c.validate().unwrap_err().contains("'acks' cannot be set"));
        let c = Config::try_parse_from([
            "goblin-core",
            "--kafka",
            "kafka://h:1/t",
            "--kafka-pending-bytes",
            "1mb",
        ])
        .unwrap();
        assert_eq!(c.kafka_pending_bytes, 1 << 20);
        let c = Config::try_parse_from(["goblin-core"]).unwrap();
        assert_eq!(c.kafka_pending_bytes, 16 << 20);
        assert!(Config::try_parse_from([
            "goblin-core",
            "--kafka",
            "kafka://h:1/t",
            "--kafka-pending-bytes",
            "lots"
        ])
        .is_err());
        // The journal's flags without a journal: refused, not silently ignored.
        for flag in
            [["--kafka-ack-mode", "broker"], ["--kafka-time-buffer", "5"], ["--kafka-pending-bytes", "1kb"]]
        {
            let err = Config::try_parse_from(std::iter::once("goblin-core").chain(flag)).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument, "{flag:?}");
            assert!(err.to_string().contains("--kafka <URI>"), "{flag:?}: {err}");
        }
        // librdkafka judges the added properties at startup, before anything loads.
        for (query, want) in [
            ("no.such.prop=1", "property 'no.such.prop=1': No such configuration property"),
            // (Not gzip: whether it is in depends on the features a test build unifies.)
            ("compression.type=brotli", "property 'compression.type=brotli'"),
            ("linger.ms=soon", "property 'linger.ms=soon'"),
        ] {
            let c = Config::try_parse_from(["goblin-core", "--kafka", &format!("kafka://h:1/t?{query}")])
                .unwrap();
            let err = c.validate().unwrap_err();
            assert!(err.contains(want), "{query}: {err}");
        }
        let c =
            Config::try_parse_from(["goblin-core", "--kafka", "kafka://h:1/t?client.id=a%20b&linger.ms=2"])
                .unwrap();
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn maxmemory_clients_values() {
        use MaxmemoryClients::*;
        assert_eq!(parse_maxmemory_clients("0"), Ok(Off));
        assert_eq!(parse_maxmemory_clients("0%"), Ok(Off));
        assert_eq!(parse_maxmemory_clients("1mb"), Ok(Bytes(1 << 20)));
        assert_eq!(parse_maxmemory_clients("25%"), Ok(Percent(25)));
        assert!(parse_maxmemory_clients("101%").unwrap_err().contains("less or equal to 100"));
        assert!(parse_maxmemory_clients("x%").is_err() && parse_maxmemory_clients("lots").is_err());
        // A percentage of no maxmemory is no limit; any limit is at least 128 KiB.
        assert_eq!(Percent(50).limit(0), None);
        assert_eq!(Percent(50).limit(100 << 20), Some(50 << 20));
        assert_eq!(Bytes(10).limit(0), Some(128 << 10));
        assert_eq!(Off.limit(1 << 30), None);
        assert_eq!((Percent(25).text(), Bytes(5).text(), Off.text()), ("25%".into(), "5".into(), "0".into()));
    }

    #[test]
    fn numa_flag() {
        let c = Config::try_parse_from(["goblin-core"]).unwrap();
        assert_eq!((c.numa, c.numa_sysfs_root), (None, PathBuf::from("/sys")));
        let c = Config::try_parse_from(["goblin-core", "--numa", "eno1"]).unwrap();
        assert_eq!((c.numa.as_deref(), c.validate()), (Some("eno1"), Ok(())));
        let c = Config::try_parse_from(["goblin-core", "--numa", "../eno1"]).unwrap();
        assert!(c.validate().unwrap_err().contains("--numa: '../eno1' is not a network interface name"));
        assert!(Config::try_parse_from(["goblin-core", "--numa"]).is_err());
    }
}
