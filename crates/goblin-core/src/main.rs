//! goblin-core: a compact, single-threaded, Redis-compatible in-memory server speaking RESP2.
//!
//! Layout:
//! - [`config`]: the command line (clap).
//! - [`server`]: the mio event loop, listeners, reads/writes, shutdown, hooks for the journal.
//! - [`dispatch`]: request -> table lookup -> engine or server command -> reply, MULTI/EXEC.
//! - [`blocking`]: clients parked by blocking commands.
//! - [`conn`]: per-connection state.
//! - [`batches`]: the one call site that commits each atomic unit and hands it to the sinks.
//! - [`watch`]: WATCH/UNWATCH, a batch sink.
//! - [`snapshots`]: --load, SAVE, BGSAVE, GOBLIN.DUMPWORLD, GOBLIN.LOAD; [`dumpworld`] the tool.
//! - [`journal`]: the Kafka write journal (`--kafka`): production, replay, runtime consumption.
//! - [`replication`]: the firehose: subscribers upstream, the replica's link and handoff.
//! - [`auth`]: users and passwords (--auth-file, --requirepass); [`transport`]: TLS.
//! - [`numa`]: `--numa IFACE`: the server thread pinned and bound to the interface's node.
//! - [`commands`]: the commands the server runs itself (INFO, CLIENT, CONFIG, COMMAND, HELLO ...).

// Without the Kafka client (cargo feature `kafka` off) the code that serves acknowledgements
// and Kafka catch-ups is compiled but never called.
#![cfg_attr(not(feature = "kafka"), allow(dead_code))]

mod auth;
mod batches;
mod blocking;
mod cluster;
mod commands;
mod config;
mod config_file;
mod conn;
mod crash;
mod dispatch;
mod dumpworld;
mod hotkeys;
mod introspection;
mod journal;
mod logging;
mod notify;
mod numa;
mod oom_score;
mod output_limits;
mod pause;
mod pubsub;
mod rename;
mod replication;
mod scripting;
mod server;
mod shutdown;
mod snapshots;
mod stats;
mod supervise;
mod tracking;
mod transport;
mod watch;

/// jemalloc: compact for many small allocations, and INFO's `used_memory` reads its exact
/// `stats.allocated` counter.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Starts or stops jemalloc's background purging thread (`--jemalloc-bg-thread`, CONFIG SET
/// jemalloc-bg-thread). A failure is logged and changes nothing: purging then happens inline.
pub(crate) fn set_jemalloc_bg_thread(on: bool) {
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(on) {
        tracing::warn!(
            "jemalloc: could not turn its background thread {}: {e}",
            if on { "on" } else { "off" }
        );
    }
}

/// MEMORY PURGE: hands jemalloc's dirty pages back to the kernel now, rather than when its
/// decay (or background thread) gets to them, as Redis's `jemalloc_purge` does: this thread's
/// cache first (its freed blocks would otherwise stay allocated in jemalloc's eyes), then every
/// arena. Returns jemalloc's error, if any, as an errno value.
pub(crate) fn purge_allocator() -> Result<(), i32> {
    for name in [&b"thread.tcache.flush\0"[..], &b"arena.4096.purge\0"[..]] {
        // SAFETY: both controls take no value and return none (null old/new pointers, zero
        // lengths), and the names are NUL-terminated. 4096 is MALLCTL_ARENAS_ALL.
        let rc = unsafe {
            tikv_jemalloc_sys::mallctl(
                name.as_ptr().cast(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
        if rc != 0 {
            return Err(rc);
        }
    }
    Ok(())
}

/// `--daemonize yes`: the parent exits at once; the child leads a new session with its
/// standard streams on /dev/null and goes on as the server.
fn daemonize() {
    // SAFETY: fork while this is the process's only thread (called before any is started).
    match unsafe { libc::fork() } {
        -1 => {
            tracing::error!("can't daemonize: fork: {}", std::io::Error::last_os_error());
            std::process::exit(1);
        }
        0 => {}
        _ => std::process::exit(0),
    }
    // SAFETY: plain system calls on descriptors this process owns.
    unsafe {
        libc::setsid();
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
    }
}

/// A server whose dataset lives in memory only (no `--load`, no `--kafka`, and a firehose
/// upstream's copy otherwise) says so when its configuration reads as if it persisted.
fn warn_of_memory_only_persistence(cfg: &config::Config) {
    if cfg.load.is_some() || cfg.kafka.is_some() || !cfg.is_replica() {
        return;
    }
    if std::path::Path::new(&cfg.dbfilename).is_file() {
        tracing::warn!(
            "{} in the working directory is not loaded: a replica starts from its upstream \
             (`goblin-core import-rdb` turns an RDB file into a snapshot for --load)",
            cfg.dbfilename
        );
    }
    if !cfg.save.0.is_empty() {
        tracing::warn!(
            "no --load snapshot path: this replica keeps its copy in memory only, the save rules \
             and the save at shutdown write nothing a restart loads; give --load PATH to restart \
             from a snapshot, or --save \"\" to silence this"
        );
    }
}

fn main() {
    // `goblin-core [redis.conf] [--option value ...]`, as redis-server.
    let loaded = config_file::load(std::env::args_os().collect()).unwrap_or_else(|fatal| {
        eprintln!("{fatal}");
        std::process::exit(fatal.exit_code);
    });
    let cfg = loaded.cfg;
    // --dir first: every relative path after it is inside it.
    if let Some(dir) = &cfg.dir {
        if let Err(e) = std::env::set_current_dir(dir) {
            eprintln!("goblin-core: can't chdir to '{}': {e}", dir.display());
            std::process::exit(1);
        }
    }
    // Redis's level names, as redis.conf files give them, or a tracing filter (checked by clap).
    let filter = logging::filter_for(&cfg.loglevel).unwrap_or_else(|e| {
        eprintln!("goblin-core: invalid --loglevel '{}': {e}", cfg.loglevel);
        std::process::exit(2);
    });
    use std::io::IsTerminal;
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    let (writer, ansi) = if cfg.logfile.is_empty() {
        (BoxMakeWriter::new(std::io::stderr), std::io::stderr().is_terminal())
    } else {
        match std::fs::OpenOptions::new().create(true).append(true).open(&cfg.logfile) {
            Ok(f) => (BoxMakeWriter::new(std::sync::Mutex::new(f)), false),
            Err(e) => {
                eprintln!("goblin-core: can't open the log file '{}': {e}", cfg.logfile);
                std::process::exit(1);
            }
        }
    };
    logging::init(&filter, writer, ansi);
    // A crash from here on leaves its report in the log (crash.rs).
    crash::set_crash_log_enabled(cfg.crash_log_enabled);
    crash::set_hide_user_data(cfg.hide_user_data_from_log);
    crash::set_use_exit_on_panic(cfg.use_exit_on_panic);
    // RESTORE payloads refused as malformed: the check that failed goes to the log.
    engine::rdb::set_refused_payload_hook(|why| {
        tracing::warn!("RESTORE refused its payload (Bad data format): {why}")
    });
    // Into the background before any thread exists (a fork keeps only the calling thread).
    if cfg.daemonize && cfg.tool.is_none() {
        daemonize();
    }
    // After the fork: the server thread is this one, and its log descriptor the final one.
    crash::install(&cfg.logfile);
    if let Some(path) = cfg.pidfile.as_ref().filter(|_| cfg.tool.is_none()) {
        if let Err(e) = std::fs::write(path, format!("{}\n", std::process::id())) {
            // As Redis: the server runs on without it.
            tracing::warn!("can't write the pid file '{}': {e}", path.display());
        }
    }
    tracing::info!("goblin-core {} starting, PID: {}", env!("CARGO_PKG_VERSION"), std::process::id());
    if let Some(path) = &loaded.file {
        tracing::info!("configuration loaded from {}", path.display());
    }
    if !loaded.ignored.is_empty() {
        tracing::warn!("ignored Redis settings that have no meaning here: {}", loaded.ignored.join(", "));
    }
    // The encoding limits hold for the dataset recovery builds.
    commands::config::apply_limits_early(&loaded.runtime);
    // Startup, in an order that no client can observe: (1) the configuration is parsed and
    // checked; (2) the dataset is recovered (a snapshot, then the Kafka log, once those exist;
    // until then a fresh lineage at offset 0); (3) only then do the listeners open.
    if let Err(e) = cfg.validate() {
        tracing::error!("{e}");
        std::process::exit(2);
    }
    // Before the first big allocation: jemalloc picks the purging of its arena for
    // allocations of 8 MiB and more when it creates it (at once without the thread).
    if cfg.jemalloc_bg_thread {
        set_jemalloc_bg_thread(true);
    }
    engine::rdb::set_compression(cfg.rdbcompression);
    engine::rdb::set_checksum(cfg.rdbchecksum);
    if let Some(config::Tool::Dumpworld { host, port, output, user, password_file }) = &cfg.tool {
        std::process::exit(
            match dumpworld::fetch(host, *port, output, user.as_deref(), password_file.as_deref()) {
                Ok(()) => 0,
                Err(e) => {
                    tracing::error!("{e}");
                    1
                }
            },
        );
    }
    if let Some(config::Tool::ImportRdb { input, output }) = &cfg.tool {
        std::process::exit(match snapshots::import_rdb(input, output, cfg.databases) {
            Ok(()) => 0,
            Err(e) => {
                tracing::error!("import-rdb: {e}");
                1
            }
        });
    }
    if let Some(config::Tool::TlsPing { host, port, ca, server_name }) = &cfg.tool {
        match transport::tls::ping(host, *port, ca.as_deref(), server_name.as_deref()) {
            Ok(reply) => {
                println!("{reply}");
                std::process::exit(0)
            }
            Err(e) => {
                eprintln!("goblin-core tls-ping: {e}");
                std::process::exit(1)
            }
        }
    }
    // Users and the TLS configuration are read before recovery, so a bad file stops startup
    // at once, with a message naming it.
    let users = auth::Users::from_config(cfg.auth_file.as_deref(), cfg.requirepass.as_deref())
        .unwrap_or_else(|e| {
            tracing::error!("{e}");
            std::process::exit(1);
        });
    let tls = match (cfg.tls_port, &cfg.tls_cert_file, &cfg.tls_key_file) {
        (0, _, _) => None,
        (_, Some(cert), Some(key)) => Some(
            transport::tls::server_config(cert, key, cfg.tls_ca_cert_file.as_deref(), cfg.tls_auth_clients)
                .unwrap_or_else(|e| {
                    tracing::error!("{e}");
                    std::process::exit(1);
                }),
        ),
        _ => unreachable!("Config::validate requires both files with --tls-port"),
    };
    // A replica reads its password before anything else can fail later for it.
    let replica_settings = replica_settings(&cfg).unwrap_or_else(|e| {
        tracing::error!("{e}");
        std::process::exit(2);
    });
    // --numa: the server thread is pinned to the interface's node and its memory bound there
    // right before recovery, so the pages the dataset is loaded into come from that node.
    let numa = cfg.numa.as_deref().map(|iface| {
        let placed = numa::plan(&numa::Sysfs::new(&cfg.numa_sysfs_root), iface)
            .and_then(|p| numa::apply(&p))
            .unwrap_or_else(|e| {
                tracing::error!("{e}");
                std::process::exit(e.exit_status());
            });
        if placed.bound {
            tracing::info!("{}", placed.describe());
        } else {
            tracing::warn!("{}", placed.describe());
        }
        placed
    });
    // INFO used_memory_startup: what the process holds without its data: before recovery,
    // plus what building the server adds after it.
    // Redis's words, before the data load as there: log watchers and Redis's test harness wait
    // for them (and then for "Ready to accept connections", or a load's fatal error).
    tracing::info!("Server initialized");
    let before_recovery = commands::info::allocated_bytes();
    let Recovered {
        engine,
        loaded_keys,
        loaded_expired,
        snapshot_offset,
        journal,
        replica_kafka,
        stream_resume,
    } = recover(&cfg);
    let after_recovery = commands::info::allocated_bytes();
    // Changes since the last save count from the snapshot, replayed mutations included.
    warn_of_memory_only_persistence(&cfg);
    let mut snapshots =
        snapshots::Snapshots::new(cfg.load.clone(), cfg.save.0.clone(), snapshot_offset, loaded_keys);
    snapshots.rdb_filename = cfg.dbfilename.clone();
    snapshots.rdb_restart_point = cfg.rdb_restart_point();
    snapshots.loaded_expired = loaded_expired;
    let fail = |e: std::io::Error| -> ! {
        tracing::error!("{e}");
        std::process::exit(1);
    };
    let has_history = loaded_keys > 0 || engine.repl.offset > 0 || snapshot_offset > 0;
    let mut server = server::Server::new(cfg, engine, snapshots).unwrap_or_else(|e| fail(e));
    // The users first: a file's `user` lines add to them.
    server.users = users;
    // The configuration's runtime settings, with CONFIG SET's checks, before anyone connects.
    if let Err(fatal) = commands::config::apply_directives(&mut server, &loaded.runtime) {
        tracing::error!("{fatal}");
        eprintln!("{fatal}");
        std::process::exit(1);
    }
    // The RDB file named where the redis-server replicas' stream stood: a primary goes on from
    // there (after the configuration set the backlog's size). One that starts as a replica
    // of a Redis primary resynchronizes with it instead.
    let mut cached_primary = None;
    let mut resumed_in_step = false;
    if let Some(resume) = stream_resume {
        if server.cfg.replicaof.is_none() {
            server.redis_replicas_resume(&resume);
        } else {
            // A replica restarted from its own file asks its primary to continue from where
            // the file stands (PSYNC), as a redis-server replica does with its cached master.
            cached_primary = Some((resume.replid, resume.offset as i64, resume.db));
            resumed_in_step = resume.in_step;
        }
    }
    server.config_file = loaded.file.clone();
    server.config_changed = loaded.from_command_line.clone();
    server.numa = numa;
    server.tls = tls;
    let flags = notify::parse_flags(server.cfg.notify_keyspace_events.as_bytes()).unwrap_or(0);
    server.set_notify_flags(flags);

    server.set_journal(journal).unwrap_or_else(|e| fail(e));
    // Broker mode releases frames from what recovery found durable.
    server.firehose.set_released(server.engine.repl.offset);
    if let Some(settings) = replica_settings {
        // Startup steps 2-5 for a replica: connect the firehose, catch up through Kafka with
        // its suffix buffered, go live; or, upstream unavailable, replay what Kafka has and
        // open not ready. Either way the listeners open only afterwards.
        // The snapshot's acknowledged record is at or below its offset, so every later
        // mutation sits after it in the topic: a safe cursor (see `frame::Cursor`).
        let cursor = match replica_kafka.as_ref().map_or(-1, |k| k.2) {
            -1 => replication::frame::Cursor::UNKNOWN,
            broker => replication::frame::Cursor { logical: snapshot_offset as i64, broker },
        };
        // A configuration file's bind-source-addr was applied above, with the runtime settings.
        let settings = replication::replica::Settings {
            source_addr: server.redis_primary_settings.bind_source_addr.clone(),
            ..settings
        };
        #[allow(unused_mut)]
        let mut r = replication::replica::Replica::new(settings, cursor, has_history);
        #[cfg(feature = "kafka")]
        {
            if let Some((t, s, _, position, unconfirmed)) = replica_kafka {
                r.kafka = Some((t, s));
                r.consumer_position = position;
                r.unconfirmed = replication::unconfirmed::Unconfirmed::restore(unconfirmed);
            }
        }
        server.replica = Some(r);
        server.start_replica();
    }
    server.open_listeners().unwrap_or_else(|e| fail(e));
    if let Some(v) = server.cfg.replicaof.clone() {
        // A replica of a redis-server: it serves what it holds (stale until the first sync,
        // as Redis's `replica-serve-stale-data yes`) while the first attempt runs.
        if let Some(path) = &server.cfg.masterauth_file {
            let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
                tracing::error!("--masterauth-file {}: {e}", path.display());
                std::process::exit(2);
            });
            server.redis_primary_settings.masterauth = Some(text.lines().next().unwrap_or("").to_string());
        }
        server.redis_primary_settings.masteruser = server.cfg.masteruser.clone();
        let port = v[1].parse().expect("validated");
        server.follow_redis_primary(v[0].clone(), port, cached_primary.take(), false);
        if resumed_in_step {
            server.redis_primary_resume_in_step();
        }
    }
    // The OOM score for the role the server starts in (a file's oom-score-adj was applied
    // before the role was known).
    server.refresh_oom_score();
    server.stats.startup_memory =
        before_recovery + commands::info::allocated_bytes().saturating_sub(after_recovery);
    server.warn_of_protected_mode();
    tracing::info!("Ready to accept connections");
    supervise::ready(server.cfg.supervised);
    if let Err(e) = server.run() {
        tracing::error!("event loop failed: {e}");
        std::process::exit(1);
    }
}

/// `--replica-*`: the upstream and the credentials (the password file is read now).
fn replica_settings(cfg: &config::Config) -> Result<Option<replication::replica::Settings>, String> {
    use replication::replica::{Settings, Source};
    let source = match (&cfg.replica_tcp, &cfg.replica_uds, &cfg.replica_ring, &cfg.replica_rdma) {
        (Some(v), _, _, _) => {
            Source::Tcp { host: v[0].clone(), port: v[1].parse().map_err(|_| "--replica-tcp: bad port")? }
        }
        (None, Some(p), _, _) => Source::Unix(p.clone()),
        (None, None, Some(p), _) => Source::Ring(p.clone()),
        (None, None, None, Some(v)) => Source::Rdma {
            host: v[0].clone(),
            port: v[1].parse().map_err(|_| "--replica-rdma: bad port")?,
            ring: config::parse_bytes(&v[2]).map_err(|_| "--replica-rdma: bad ring size")?,
        },
        (None, None, None, None) => return Ok(None),
    };
    let auth = match &cfg.replica_auth_password_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--replica-auth-password-file {}: {e}", path.display()))?;
            let password = text.lines().next().unwrap_or("").to_string();
            if password.is_empty() {
                return Err(format!(
                    "--replica-auth-password-file {}: the first line is empty",
                    path.display()
                ));
            }
            Some((cfg.replica_auth_user.clone().unwrap_or_else(|| "default".into()), password))
        }
        None => None,
    };
    // TLS: always for a non-loopback TCP source, on request (--replica-tls) for loopback.
    let tls = match &source {
        Source::Tcp { host, .. } => {
            let loopback =
                host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
            if cfg.replica_tls || !loopback {
                let client = transport::tls::client_config(cfg.replica_tls_ca_file.as_deref())
                    .map_err(|e| format!("--replica-tcp TLS: {e}"))?;
                let name = transport::tls::server_name(host, cfg.replica_tls_server_name.as_deref())?;
                Some((client, name))
            } else {
                None
            }
        }
        Source::Unix(_) | Source::Ring(_) | Source::Rdma { .. } => None,
    };
    Ok(Some(Settings { source, auth, tls, source_addr: String::new() }))
}

/// A replica's Kafka: the topic, where its first catch-up seeks, the snapshot's broker
/// offset and its consumer position (-1: none), and the mutations the snapshot holds that
/// Kafka had not confirmed (`replication::unconfirmed`), which that catch-up checks.
#[cfg(feature = "kafka")]
type ReplicaKafka = (journal::target::KafkaTarget, journal::kafka::Start, i64, i64, Vec<(u64, u64)>);
#[cfg(not(feature = "kafka"))]
type ReplicaKafka = ((), (), i64, i64, Vec<(u64, u64)>);

/// What startup recovered: the engine, how many keys the snapshot held, and the journal.
struct Recovered {
    /// A replica does not replay here (its handoff does, after connecting its upstream) and
    /// never produces: what it needs to replay later.
    #[allow(dead_code)]
    replica_kafka: Option<ReplicaKafka>,
    engine: engine::Engine,
    loaded_keys: u64,
    /// Keys the startup load left out, past their deadline.
    loaded_expired: u64,
    /// The RDB restart point's replication position (see `Server::redis_replicas_resume`).
    stream_resume: Option<snapshots::StreamResume>,
    /// The logical offset the loaded snapshot holds (0 without one).
    snapshot_offset: u64,
    journal: Option<server::JournalHandle>,
}

/// Startup step 2: the dataset and its lineage before any client connects. First the
/// `--load` snapshot (its lineage and offset), else, where it is the restart point, the RDB
/// file at `dbfilename` (a new lineage), else a new lineage at offset 0; then, with
/// `--kafka`, the topic replayed from the snapshot's acknowledged broker offset (inclusively)
/// or from the earliest record, through the high watermark captured first. Any failure stops
/// the server before it listens: serving without what it could not recover would lose data.
fn recover(cfg: &config::Config) -> Recovered {
    let die = |e: String| -> ! {
        tracing::error!("{e}");
        std::process::exit(1);
    };
    #[cfg_attr(not(feature = "kafka"), allow(unused_mut))]
    let mut loaded_expired = 0;
    let mut stream_resume = None;
    #[cfg_attr(not(feature = "kafka"), allow(unused_mut))]
    let (mut engine, loaded_keys, mut meta) = match &cfg.load {
        Some(path) => snapshots::load_at_startup(path, cfg.databases).unwrap_or_else(|e| die(e)),
        None if cfg.rdb_restart_point() => {
            let replica = cfg.replicaof.is_some();
            match snapshots::load_rdb_at_startup(
                std::path::Path::new(&cfg.dbfilename),
                cfg.databases,
                replica,
            )
            // Redis's words for this end, which log watchers look for.
            .unwrap_or_else(|e| {
                tracing::error!("{e}");
                die("Terminating server after rdb file reading failure.".into())
            }) {
                Some(f) => {
                    loaded_expired = f.expired;
                    stream_resume = f.stream;
                    (f.engine, f.keys, None)
                }
                None => (engine::Engine::new(engine::Replication::new_lineage()), 0, None),
            }
        }
        None => (engine::Engine::new(engine::Replication::new_lineage()), 0, None),
    };
    if engine.databases() != cfg.databases {
        if let Err(e) = engine.resize_databases(cfg.databases) {
            die(format!("--databases {}: {e}", cfg.databases));
        }
    }
    // A primary without a journal that restarts from its snapshot cannot know what it
    // numbered past the snapshot's offset before (a crash loses it; only a clean shutdown's
    // final save is the end). Numbering new writes from there under the same id would let a
    // replica that saw the lost ones take the new ones for the same history and go live with
    // other data. So the history goes on under a new id that names the old one through this
    // offset (Redis does the same with replid2): a replica at exactly this offset follows,
    // one past it is refused. With --kafka the topic is the history and the lineage goes on
    // (a replica ahead is caught by its own checks); a replica's lineage is its upstream's.
    if meta.is_some() && cfg.kafka.is_none() && !cfg.is_replica() && cfg.replicaof.is_none() {
        let from = engine.repl;
        engine.set_replication(from.successor());
        tracing::info!(
            "lineage {} continues lineage {} from its offset {} (restarted from a snapshot without a journal: \
             replicas at exactly that offset follow, any past it are refused)",
            engine.repl.replid,
            from.replid,
            from.offset
        );
    }
    let snapshot_offset = engine.repl.offset;
    #[cfg(feature = "kafka")]
    let journal = match &cfg.kafka {
        Some(k) => {
            let target = journal::target::parse(k).unwrap_or_else(|e| die(e));
            // Seek to the snapshot's acknowledged broker offset, or its consumer position if
            // lower (DESIGN.md, decision 3). A snapshot without cursors (written by a server
            // without --kafka) falls back to the first record at or after its file's birth time
            // minus --kafka-time-buffer; no snapshot: the earliest record.
            use journal::kafka::Start;
            let from = match &meta {
                Some(m) if m.kafka_consumer_position >= 0 && m.kafka_acked_offset >= 0 => {
                    Start::Offset(m.kafka_acked_offset.min(m.kafka_consumer_position))
                }
                Some(m) if m.kafka_acked_offset >= 0 => Start::Offset(m.kafka_acked_offset),
                Some(m) if m.kafka_consumer_position >= 0 => Start::Position(m.kafka_consumer_position),
                Some(_) => {
                    let path = cfg.load.as_deref().expect("a snapshot was loaded");
                    let (born, exact) = snapshot::birth_time(path)
                        .unwrap_or_else(|e| die(format!("{}: {e}", path.display())));
                    if !exact {
                        tracing::warn!(
                            "{}: the file system keeps no creation time; using its modification time",
                            path.display()
                        );
                    }
                    let ms =
                        born.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
                    let ms = ms - cfg.kafka_time_buffer as i64 * 1000;
                    tracing::info!(
                        "the snapshot has no Kafka cursor: replaying from the first record at or after {ms} ms \
                         (its creation time minus --kafka-time-buffer {})",
                        cfg.kafka_time_buffer
                    );
                    Start::Time(ms)
                }
                None => Start::Earliest,
            };
            if cfg.is_replica() {
                let broker = meta.as_ref().map_or(-1, |m| m.kafka_acked_offset);
                let position = meta.as_ref().map_or(-1, |m| m.kafka_consumer_position);
                let unconfirmed = meta.map(|m| m.unconfirmed).unwrap_or_default();
                return Recovered {
                    engine,
                    loaded_keys,
                    loaded_expired,
                    snapshot_offset,
                    journal: None,
                    replica_kafka: Some((target, from, broker, position, unconfirmed)),
                    stream_resume: None,
                };
            }
            let j =
                journal::kafka::Journal::connect(target, cfg.kafka_ack_mode == config::KafkaAckMode::Broker)
                    .unwrap_or_else(|e| die(e));
            let adopt = meta.is_none();
            let mut j = j;
            // Other producers' records below the snapshot's consumer position are in it.
            let position = meta.as_ref().map_or(-1, |m| m.kafka_consumer_position);
            // A replica's snapshot (a primary rebuilt from its replica's copy) may hold
            // mutations Kafka had not confirmed: the replay checks each against the record at
            // its offset, and a different one stops the startup instead of being skipped as a
            // duplicate (`replication::unconfirmed`).
            let mut window = replication::unconfirmed::Unconfirmed::restore(
                meta.as_mut().map(|m| std::mem::take(&mut m.unconfirmed)).unwrap_or_default(),
            );
            let verify = (!window.is_empty()).then_some(&mut window);
            let stats = journal::kafka::replay(
                &j.target,
                &mut engine,
                from,
                position,
                adopt,
                verify,
                journal::kafka::STARTUP_STALL,
            )
            .unwrap_or_else(|e| die(e.to_string()));
            if let (Some(first), Some(last)) = (window.first(), window.last()) {
                tracing::warn!(
                    "the snapshot holds {} mutations (logical offsets {first}..={last}) that no record of its \
                     lineage in topic {} confirms: written by a replica ahead of Kafka. Other producers' writes \
                     its upstream applied are in the topic as theirs; if the upstream lost its own, the topic \
                     has no records at those offsets and a replay from before them will stop there",
                    window.len(),
                    j.target.topic
                );
            }
            // Everything replayed is durable in the topic: a snapshot taken before this process
            // produces anything still records where the journal stands (the snapshot's own
            // broker offset when the replay read nothing).
            let broker = match (&meta, stats.last_broker_offset) {
                (Some(m), -1) => m.kafka_acked_offset,
                (_, b) => b,
            };
            // The history goes on under a successor lineage, as at a restart from a snapshot
            // without a journal (above), for the same reason: the process before this one may
            // have sent its replicas mutations past what the topic holds (queued mode releases
            // the firehose before Kafka acknowledges; and a process in broker mode cannot tell
            // which mode its predecessor ran in). A replica at exactly this offset follows; one
            // past it is refused; one behind it catches up through Kafka, whose replay crosses
            // to the new id at the first record, which names its predecessor.
            if engine.repl.offset > 0 {
                let from = engine.repl;
                engine.set_replication(from.successor());
                // The predecessor the topic knows: a lineage with no record in it (a snapshot
                // saved by a restarted primary before its first write) is skipped over for
                // the one it continues from the same offset, which a replay from before the
                // snapshot reaches.
                let known = match from.previous {
                    Some((id, at)) if !stats.read_own_lineage() && at == from.offset => (id, at),
                    _ => (from.replid, from.offset),
                };
                j.announce_successor(engine.repl.replid, known);
                tracing::info!(
                    "lineage {} continues lineage {} from its offset {} (what the topic holds: replicas at exactly \
                     that offset follow, any past it are refused)",
                    engine.repl.replid,
                    from.replid,
                    from.offset
                );
            }
            j.set_recovered(engine.repl.offset, broker, stats.position);
            // The primary goes on consuming its topic where the replay stopped.
            let consumer = journal::kafka::Consumer::start(&j.target, stats.position, engine.repl.replid)
                .unwrap_or_else(|e| die(e));
            Some(server::JournalHandle { journal: j, replay: stats, consumer })
        }
        None => None,
    };
    #[cfg(not(feature = "kafka"))]
    let journal = None;
    let _ = &meta;
    if engine.repl.offset == 0 && loaded_keys == 0 {
        tracing::info!("lineage {} at offset 0", engine.repl.replid);
    }
    Recovered {
        engine,
        loaded_keys,
        loaded_expired,
        snapshot_offset,
        journal,
        replica_kafka: None,
        stream_resume,
    }
}
