//! CONFIG GET pattern ... | SET name value ... | RESETSTAT | REWRITE | HELP.
//!
//! GET answers over the settings clients and tools ask about, under Redis's names, with this
//! server's real values (one database). SET changes the ones that have a meaning here
//! (maxmemory and eviction, timeouts, slow log and latency, notifications, tracking, the
//! encoding thresholds ...), all pairs validated before any applies; the rest get Redis's errors.

use super::{help, sub_arity_ok, wrong_sub_arity};
use crate::conn::Conn;
use crate::server::Server;
use engine::{errors, util};
use resp::reply;

/// Integer settings Redis has that are accepted and reported but mean nothing here: lists have
/// one encoding whatever their size; two of Redis's hidden test aids for slow loads
/// (goblin-core opens its listeners only once loaded, so nobody could watch a slowed load).
/// Kept with them, and read by SYNC (`snapshots::Server::sync_waiting_cron`): the wait before
/// a diskless full synchronization, for more replicas to share its child, and how many
/// waiting replicas start it at once. The wait's default here is 0 (Redis's is 5 s): a lone
/// replica starts at once, and one that sets it gets Redis's behaviour.
const INERT: &[&str] = &[
    "list-max-listpack-size",
    "list-max-ziplist-size",
    "list-compress-depth",
    "key-load-delay",
    "loading-process-events-interval-bytes",
    "repl-diskless-sync-delay",
    "repl-diskless-sync-max-replicas",
];

/// Redis settings whose every value behaves the same here, taken from Redis's choices and
/// reported as set (CONFIG GET, CONFIG REWRITE, a configuration file): (name, choices (none:
/// yes or no), Redis's default). Tables rehash incrementally whatever `activerehashing` says;
/// values are freed at once, so the `lazyfree-*` choices only move when memory is returned;
/// RESTORE decodes every payload into this server's own structures, which is the deep check
/// `sanitize-dump-payload yes` asks for, whatever it says; a replica never answers a
/// replicated write with an error (the effect is what the primary applied), so
/// `propagation-error-behavior` has nothing to act on; no replica writes files on its own;
/// and every full synchronization is diskless whatever `repl-diskless-sync` says (a forked
/// child writes the file straight to the replica's socket). Two of them are read elsewhere:
/// `repl-diskless-sync`, by SYNC (`snapshots::rdb_sync`): `yes` sends the file EOF-marked, in
/// one pass, to a reader that takes that form, `no` sends its length first, as Redis's
/// disk-based synchronization does; and `repl-diskless-load`, by a replica of a Redis primary
/// (`replication::redis_primary`), which writes the file to disk as it arrives and maps it
/// with `disabled` and reads it into memory otherwise; either way it serves the data it holds
/// until the new file is decoded whole (as `swapdb` asks).
const INERT_CHOICES: &[(&str, &[&str], &str)] = &[
    ("activerehashing", &[], "yes"),
    ("lazyfree-lazy-eviction", &[], "no"),
    ("lazyfree-lazy-expire", &[], "no"),
    ("lazyfree-lazy-server-del", &[], "no"),
    ("lazyfree-lazy-user-del", &[], "no"),
    ("lazyfree-lazy-user-flush", &[], "no"),
    ("replica-lazy-flush", &[], "no"),
    ("slave-lazy-flush", &[], "no"),
    ("propagation-error-behavior", &["ignore", "panic", "panic-on-replicas"], "ignore"),
    ("sanitize-dump-payload", &["no", "yes", "clients"], "no"),
    ("replica-ignore-disk-write-errors", &[], "no"),
    ("repl-diskless-sync", &[], "yes"),
    ("repl-diskless-load", &["disabled", "on-empty-db", "swapdb"], "disabled"),
];

/// The setting an inert name stands for (an alias and its name are one setting).
fn inert_key(name: &'static str) -> &'static str {
    match name {
        "list-max-ziplist-size" => "list-max-listpack-size",
        "slave-lazy-flush" => "replica-lazy-flush",
        other => other,
    }
}

/// (name, value) of every setting CONFIG GET knows, in a stable order.
fn settings(s: &Server) -> Vec<(&'static str, String)> {
    let c = &s.cfg;
    let limits = store::limits::NAMES
        .iter()
        .map(|n| (*n, store::limits::get(store::limits::by_name(n).expect("named")).to_string()));
    let inert = INERT
        .iter()
        .chain(INERT_CHOICES.iter().map(|(n, _, _)| n))
        .map(|n| (*n, s.inert_config.get(inert_key(n)).cloned().unwrap_or_else(|| inert_default(n))));
    let mut all = settings_base(s, c);
    all.extend(limits);
    all.extend(inert);
    all
}

fn inert_default(name: &str) -> String {
    match name {
        "list-compress-depth"
        | "key-load-delay"
        | "repl-diskless-sync-max-replicas"
        | "repl-diskless-sync-delay" => "0".into(),
        "loading-process-events-interval-bytes" => "524288".into(),
        _ => match INERT_CHOICES.iter().find(|(n, _, _)| *n == name) {
            Some((_, _, default)) => (*default).into(),
            None => "-2".into(),
        },
    }
}

fn settings_base(s: &Server, c: &crate::config::Config) -> Vec<(&'static str, String)> {
    vec![
        ("port", c.port.to_string()),
        ("bind", c.bind.join(" ")),
        ("unixsocket", c.unixsocket.as_ref().map(|p| p.display().to_string()).unwrap_or_default()),
        ("unixsocketperm", format!("{:o}", c.unixsocketperm.unwrap_or(0))),
        ("maxclients", c.maxclients.to_string()),
        ("tcp-backlog", c.tcp_backlog.to_string()),
        ("maxmemory", s.engine.evict.maxmemory.to_string()),
        ("maxmemory-policy", s.engine.evict.policy.name().into()),
        ("maxmemory-samples", s.engine.evict.samples.to_string()),
        // Client eviction (Redis 7): not done here; reported off.
        ("maxmemory-clients", c.maxmemory_clients.text()),
        ("lfu-log-factor", s.engine.evict.lfu_log_factor.to_string()),
        ("lfu-decay-time", s.engine.evict.lfu_decay_time.to_string()),
        (
            "save",
            s.snapshots.rules.iter().map(|(secs, n)| format!("{secs} {n}")).collect::<Vec<_>>().join(" "),
        ),
        // The Kafka journal is this server's append-only log (WAITAOF waits for it).
        ("appendonly", if c.kafka.is_some() { "yes" } else { "no" }.into()),
        ("databases", s.engine.databases().to_string()),
        ("timeout", c.idle_timeout_secs.to_string()),
        ("tcp-keepalive", c.tcp_keepalive.to_string()),
        ("proto-max-bulk-len", s.limits.max_bulk_len.to_string()),
        ("client-query-buffer-limit", s.query_buffer_limit.to_string()),
        ("client-output-buffer-limit", s.output_limits.text()),
        ("loglevel", c.loglevel.clone()),
        ("hz", c.hz.to_string()),
        ("busy-reply-threshold", c.busy_reply_threshold.to_string()),
        ("lua-time-limit", c.busy_reply_threshold.to_string()),
        ("cluster-enabled", yes_no(c.cluster_enabled)),
        ("jemalloc-bg-thread", yes_no(c.jemalloc_bg_thread)),
        ("rdbcompression", yes_no(c.rdbcompression)),
        ("rdbchecksum", yes_no(c.rdbchecksum)),
        ("crash-log-enabled", yes_no(c.crash_log_enabled)),
        ("hide-user-data-from-log", yes_no(c.hide_user_data_from_log)),
        ("use-exit-on-panic", yes_no(c.use_exit_on_panic)),
        // "host port" of the Redis primary this server follows (REPLICAOF); on a primary,
        // the name with an empty value, as Redis answers.
        ("replicaof", s.redis_primary_config()),
        ("slaveof", s.redis_primary_config()),
        // What a replica of a Redis primary logs in with, and how long its link may be silent.
        ("masteruser", s.redis_primary_settings.masteruser.clone().unwrap_or_default()),
        ("masterauth", s.redis_primary_settings.masterauth.clone().unwrap_or_default()),
        ("repl-timeout", s.redis_primary_settings.repl_timeout_secs.to_string()),
        ("replica-read-only", "yes".into()),
        ("replica-serve-stale-data", yes_no(s.redis_primary_settings.serve_stale)),
        ("slave-serve-stale-data", yes_no(s.redis_primary_settings.serve_stale)),
        // How this server presents itself as a replica (Sentinel reads the priority).
        ("replica-priority", s.redis_primary_settings.priority.to_string()),
        ("slave-priority", s.redis_primary_settings.priority.to_string()),
        ("replica-announced", yes_no(s.redis_primary_settings.announced)),
        ("replica-announce-ip", s.redis_primary_settings.announce_ip.clone().unwrap_or_default()),
        ("bind-source-addr", s.redis_primary_settings.bind_source_addr.clone()),
        ("slave-announce-ip", s.redis_primary_settings.announce_ip.clone().unwrap_or_default()),
        ("replica-announce-port", s.redis_primary_settings.announce_port.to_string()),
        ("slave-announce-port", s.redis_primary_settings.announce_port.to_string()),
        ("slave-read-only", "yes".into()),
        ("requirepass", c.requirepass.clone().unwrap_or_default()),
        ("tls-port", c.tls_port.to_string()),
        ("protected-mode", yes_no(c.protected_mode)),
        ("notify-keyspace-events", crate::notify::flags_string(s.notify.flags)),
        ("daemonize", yes_no(c.daemonize)),
        ("supervised", c.supervised.name().into()),
        ("stop-writes-on-bgsave-error", yes_no(c.stop_writes_on_bgsave_error)),
        ("enable-protected-configs", c.enable_protected_configs.name().into()),
        ("enable-debug-command", c.enable_debug_command.name().into()),
        ("enable-module-command", c.enable_module_command.name().into()),
        ("logfile", c.logfile.clone()),
        ("pidfile", c.pidfile.as_ref().map(|p| p.display().to_string()).unwrap_or_default()),
        ("dir", std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default()),
        ("dbfilename", s.snapshots.rdb_filename.clone()),
        ("repl-ping-replica-period", s.redis_replicas.ping_period_secs.to_string()),
        ("repl-backlog-size", s.redis_replicas.backlog_size.to_string()),
        ("shutdown-timeout", s.redis_replicas.shutdown_timeout_secs.to_string()),
        ("shutdown-on-sigterm", s.shutdown_on_sigterm.text()),
        ("shutdown-on-sigint", s.shutdown_on_sigint.text()),
        ("min-replicas-to-write", c.min_replicas_to_write.to_string()),
        ("acl-pubsub-default", crate::auth::pubsub_default().to_string()),
        ("min-slaves-to-write", c.min_replicas_to_write.to_string()),
        ("min-replicas-max-lag", c.min_replicas_max_lag.to_string()),
        ("min-slaves-max-lag", c.min_replicas_max_lag.to_string()),
        ("repl-backlog-ttl", s.redis_replicas.backlog_ttl_secs.to_string()),
        ("slowlog-log-slower-than", s.introspection.slowlog_slower_than.to_string()),
        ("slowlog-max-len", s.introspection.slowlog_max_len.to_string()),
        ("acllog-max-len", s.acl_log.max_len.to_string()),
        ("latency-monitor-threshold", s.introspection.latency_threshold_ms.to_string()),
        ("watchdog-period", s.watchdog_period_ms.to_string()),
        ("latency-tracking", yes_no(s.introspection.latency_tracking)),
        (
            "latency-tracking-info-percentiles",
            s.introspection
                .latency_percentiles
                .iter()
                .map(|p| percentile_name(*p))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        ("tracking-table-max-keys", s.tracking.max_keys.to_string()),
        ("oom-score-adj", s.oom.mode.name().to_string()),
        // Hidden (HIDDEN below): found by its exact name only.
        ("rdb-key-save-delay", store::limits::key_save_delay_us().to_string()),
        ("oom-score-adj-values", s.oom.values_text()),
    ]
}

/// C's `strerror`: the system's text for an errno (Redis's CONFIG SET errors quote it).
fn strerror(errno: i32) -> String {
    // SAFETY: strerror returns a valid C string for any errno; it is copied at once.
    unsafe { std::ffi::CStr::from_ptr(libc::strerror(errno)) }.to_string_lossy().into_owned()
}

/// A percentile as Redis prints it (`%f` without its trailing zeros): 50, 99.9, 0.
pub(crate) fn percentile_name(p: f64) -> String {
    let text = format!("{p:.6}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn yes_no(on: bool) -> String {
    if on { "yes" } else { "no" }.to_string()
}

pub fn config(s: &mut Server, c: &mut Conn, args: &[&[u8]]) {
    let sub = args[1].to_ascii_lowercase();
    let protected_ok = super::debug::protected_allowed(s.cfg.enable_protected_configs, c);
    let out = &mut c.out;
    match sub.as_slice() {
        b"get" => {
            if !sub_arity_ok(out, args, -3) {
                return;
            }
            let all = settings(s);
            let mut hits: Vec<usize> = Vec::new();
            for pat in &args[2..] {
                for (i, (name, _)) in all.iter().enumerate() {
                    // Redis's hidden settings answer to their own name, not to a pattern.
                    let matched = if HIDDEN.contains(name) {
                        pat.eq_ignore_ascii_case(name.as_bytes())
                    } else {
                        util::glob_match(pat, name.as_bytes(), true)
                    };
                    if matched && !hits.contains(&i) {
                        hits.push(i);
                    }
                }
            }
            // A map in RESP3 (a flat name/value array in RESP2).
            reply::map_len(out, c.proto, hits.len());
            for i in hits {
                reply::bulk(out, all[i].0.as_bytes());
                reply::bulk(out, all[i].1.as_bytes());
            }
        }
        b"set" => {
            if !sub_arity_ok(out, args, -4) {
                return;
            }
            if !args.len().is_multiple_of(2) {
                return wrong_sub_arity(out, args[0], args[1]);
            }
            if let Err(e) = set_pairs(s, &args[2..], protected_ok) {
                return reply::error(out, &e.reply);
            }
            // What CONFIG REWRITE writes back.
            for pair in args[2..].chunks(2) {
                let name =
                    crate::config_file::canonical(&String::from_utf8_lossy(pair[0]).to_ascii_lowercase())
                        .to_string();
                if !s.config_changed.contains(&name) {
                    s.config_changed.push(name);
                }
            }
            reply::ok(out);
        }
        b"resetstat" => {
            if sub_arity_ok(out, args, 2) {
                let (peak, startup) = (s.stats.peak_memory.get(), s.stats.startup_memory);
                s.stats = Default::default();
                s.stats.peak_memory.set(peak);
                s.stats.startup_memory = startup;
                s.engine.stats = Default::default();
                reply::ok(out);
            }
        }
        b"rewrite" => {
            if sub_arity_ok(out, args, 2) {
                match rewrite(s, false) {
                    Ok(()) => reply::ok(out),
                    Err(e) => reply::error(out, e.as_bytes()),
                }
            }
        }
        b"help" => help(
            out,
            &[
                "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET <pattern>",
                "    Return parameters matching the glob-like <pattern> and their values.",
                "SET <directive> <value>",
                "    Set the configuration <directive> to <value>.",
                "RESETSTAT",
                "    Reset statistics reported by the INFO command.",
                "REWRITE",
                "    Rewrite the configuration file.",
                "HELP",
                "    Print this help.",
            ],
        ),
        _ => errors::unknown_subcommand(out, args[0], args[1]),
    }
}

/// An integer setting within `lo..=hi`, or the reason Redis gives for refusing it.
fn int_in(val: &[u8], lo: i64, hi: i64) -> Result<i64, String> {
    match util::parse_i64(val) {
        Some(n) if (lo..=hi).contains(&n) => Ok(n),
        Some(_) => Err(format!("argument must be between {lo} and {hi} inclusive")),
        None => Err("argument couldn't be parsed into an integer".to_string()),
    }
}

/// Why CONFIG SET refused: the error reply, and the reason alone (a configuration file's
/// error box shows that).
pub(crate) struct SetError {
    pub reply: Vec<u8>,
    pub reason: String,
}

fn set_failed(name: &[u8], why: &str) -> Result<(), SetError> {
    let mut msg = b"ERR CONFIG SET failed (possibly related to argument '".to_vec();
    msg.extend_from_slice(name);
    msg.extend_from_slice(b"') - ");
    msg.extend_from_slice(why.as_bytes());
    Err(SetError { reply: msg, reason: why.to_string() })
}

/// CONFIG REWRITE: the configuration file, with what CONFIG SET and the command line changed.
/// `force_all`: every setting, changed or not (DEBUG CONFIG-REWRITE-FORCE-ALL).
pub(crate) fn rewrite(s: &Server, force_all: bool) -> Result<(), String> {
    let Some(path) = &s.config_file else {
        return Err("ERR The server is running without a config file".into());
    };
    let fail = |e: std::io::Error| {
        format!("ERR Rewriting config file: {}", e.raw_os_error().map_or_else(|| e.to_string(), strerror))
    };
    // A file that is gone is written anew, as Redis does.
    let old = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(fail(e)),
    };
    let all = settings(s);
    let changed: Vec<(String, String)> = if force_all {
        all.iter().map(|(n, v)| (n.to_string(), v.clone())).collect()
    } else {
        s.config_changed
            .iter()
            .filter_map(|name| all.iter().find(|(n, _)| n == name).map(|(n, v)| (n.to_string(), v.clone())))
            .collect()
    };
    crate::config_file::write_atomically(path, &crate::config_file::rewrite(&old, &changed)).map_err(fail)?;
    tracing::info!("CONFIG REWRITE executed with success");
    Ok(())
}

/// A configuration file's settings that are not startup flags (and such command-line
/// options), applied with CONFIG SET's checks before the server listens.
pub(crate) fn apply_directives(
    s: &mut Server,
    directives: &[crate::config_file::Directive],
) -> Result<(), crate::config_file::Fatal> {
    use crate::config_file::Fatal;
    let mut declared: Vec<Vec<u8>> = Vec::new();
    for d in directives {
        let fatal = |reason: String| Fatal::at(d, reason);
        // `user <name> <rules>...`: ACL SETUSER at startup, as Redis declares users in its
        // configuration file; not beside an ACL file (Redis refuses the mix too).
        if d.name == "user" {
            if s.cfg.auth_file.is_some() {
                return Err(fatal(
                    "Configuring Redis with users defined in redis.conf and at the same setting an ACL file \
                     path is invalid. Define either an ACL file or the users in redis.conf, not both."
                        .into(),
                ));
            }
            let words: Vec<String> =
                d.words.iter().map(|w| String::from_utf8_lossy(w).into_owned()).collect();
            let Some((name, rules)) = words.split_first() else {
                return Err(fatal("Bad directive or wrong number of arguments".into()));
            };
            // One line per user, as Redis requires.
            if declared.contains(&d.words[0]) {
                return Err(fatal(format!("Duplicate user '{name}' found")));
            }
            declared.push(d.words[0].clone());
            // The default user is declared from scratch (Redis resets it first), the others are
            // new users.
            let reset = (name == crate::auth::DEFAULT_USER).then_some("reset");
            let rules: Vec<&str> = reset.into_iter().chain(rules.iter().map(String::as_str)).collect();
            let user = s.users.staged(name, &rules).map_err(|e| {
                fatal(format!("Error in user declaration '{name}': {}", e.trim_start_matches("ERR ")))
            })?;
            s.users.put(user);
            continue;
        }
        if d.name == "client-output-buffer-limit" {
            // A file's lines add up (one class per line, as redis.conf writes them).
            let text = d.words.iter().map(|w| String::from_utf8_lossy(w)).collect::<Vec<_>>().join(" ");
            s.output_limits = s.output_limits.parse_over(&text).map_err(fatal)?;
            continue;
        }
        let value = d.words.join(&b' ');
        match set_pairs(s, &[d.name.as_bytes(), &value], true) {
            Ok(()) => {}
            Err(e) if e.reason.is_empty() => {
                return Err(fatal("Bad directive or wrong number of arguments".into()))
            }
            Err(e) => return Err(fatal(e.reason)),
        }
    }
    Ok(())
}

/// The encoding limits of a configuration file (`hash-max-listpack-entries` ...), set before
/// the dataset is loaded so that it is built under them (apply_directives sets them again).
pub(crate) fn apply_limits_early(directives: &[crate::config_file::Directive]) {
    for d in directives {
        if let (Some(limit), [word]) = (store::limits::by_name(&d.name), d.words.as_slice()) {
            if !matches!(
                d.name.as_str(),
                "hll-sparse-max-bytes" | "stream-idmp-duration" | "stream-idmp-maxsize"
            ) {
                if let Ok(n) = int_in(word, 0, store::limits::INTSET_HARD_MAX as i64) {
                    store::limits::set(limit, n as usize);
                }
            }
        }
    }
}

/// CONFIG SET name value [name value ...]: all pairs are validated before any is applied.
/// Redis's hidden settings (test aids): CONFIG GET returns them by exact name only.
const HIDDEN: &[&str] = &[
    "rdb-key-save-delay",
    "key-load-delay",
    "loading-process-events-interval-bytes",
    "use-exit-on-panic",
    "watchdog-period",
];

/// `protected_ok`: the protected settings may change for this client.
pub(crate) fn set_pairs(s: &mut Server, pairs: &[&[u8]], protected_ok: bool) -> Result<(), SetError> {
    enum Change {
        MaxClients(u32),
        JemallocBgThread(bool),
        RdbCompression(bool),
        CrashLogEnabled(bool),
        HideUserData(bool),
        UseExitOnPanic(bool),
        RdbChecksum(bool),
        MaxBulk(u64),
        RequirePass(String),
        DbFilename(String),
        Dir(std::path::PathBuf),
        ReplPing(u64),
        ReplBacklogSize(usize),
        ReplBacklogTtl(u64),
        MinReplicas(u32),
        ShutdownTimeout(u64),
        ShutdownOnSignal(bool, crate::server::ShutdownFlags),
        SaveRules(Vec<(u64, u64)>),
        MaxmemoryClients(crate::config::MaxmemoryClients),
        PubsubDefault(bool),
        MinReplicasLag(u64),
        BusyThreshold(u64),
        SlowlogSlowerThan(i64),
        SlowlogMaxLen(u64),
        AclLogMaxLen(usize),
        LatencyThreshold(u64),
        WatchdogPeriod(u64),
        LatencyTracking(bool),
        QueryBufferLimit(usize),
        LatencyPercentiles(Vec<f64>),
        NotifyFlags(u32),
        TrackingMaxKeys(usize),
        Limit(&'static std::sync::atomic::AtomicUsize, usize),
        Inert(&'static str, String),
        Timeout(u64),
        Hz(u32),
        Evict(engine::evict::EvictConfig),
        OutputLimits(crate::output_limits::OutputLimits),
        MasterUser(Option<String>),
        MasterAuth(Option<String>),
        ReplTimeout(u64),
        ReplicaPriority(u32),
        ReplicaAnnounced(bool),
        AnnounceIp(Option<String>),
        LogLevel(String),
        BindSourceAddr(String),
        AnnouncePort(u16),
        ServeStale(bool),
        Oom,
        KeySaveDelay(i64),
        Port(u16),
        TcpKeepalive(u32),
        StopWritesOnBgsaveError(bool),
        ProtectedMode(bool),
        Bind(Vec<String>),
        Nothing,
    }
    // Eviction settings accumulate over the pairs (two of them may be set at once); so do the
    // OOM score's two.
    let mut evict = s.engine.evict;
    let mut oom = s.oom.clone();
    let known = settings(s);
    let mut changes = Vec::new();
    for (n, pair) in pairs.chunks(2).enumerate() {
        let name = pair[0].to_ascii_lowercase();
        // The same name twice is refused (an alias and its name are two names, as in Redis).
        if pairs.chunks(2).take(n).any(|p| p[0].eq_ignore_ascii_case(&name)) {
            return set_failed(pair[0], "duplicate parameter");
        }
        let val = pair[1];
        let Some((canon, current)) = known.iter().find(|(n, _)| n.as_bytes() == name) else {
            let mut msg = b"ERR Unknown option or number of arguments for CONFIG SET - '".to_vec();
            msg.extend_from_slice(pair[0]);
            msg.push(b'\'');
            return Err(SetError { reply: msg, reason: String::new() });
        };
        // Settings that write files where they name: only with --enable-protected-configs.
        if matches!(*canon, "dir" | "dbfilename") && !protected_ok {
            return set_failed(pair[0], "can't set protected config");
        }
        // Each setting's value, checked as Redis checks it; Err is the reason set_failed gives.
        let int = |lo: i64, hi: i64| int_in(val, lo, hi);
        let bool_arg = || {
            crate::config::parse_yes_no(&String::from_utf8_lossy(val))
                .map_err(|_| "argument must be 'yes' or 'no'".to_string())
        };
        const MAX: i64 = i64::MAX;
        const I32: i64 = i32::MAX as i64;
        let change: Result<Change, String> = match *canon {
            "maxclients" => int(1, u32::MAX as i64).map(|n| Change::MaxClients(n as u32)),
            "proto-max-bulk-len" => int(1024, MAX).map(|n| Change::MaxBulk(n as u64)),
            // The default user's password, as Redis applies it (see Users::set_requirepass).
            "requirepass" => Ok(Change::RequirePass(String::from_utf8_lossy(val).into_owned())),
            // Redis's rule: a name in the working directory, not a path.
            "dbfilename" => {
                let name = String::from_utf8_lossy(val).into_owned();
                if name.is_empty() || name.contains('/') {
                    Err("dbfilename can't be a path, just a filename".to_string())
                } else {
                    Ok(Change::DbFilename(name))
                }
            }
            // The working directory, as Redis's chdir: where the next RDB file is written.
            "dir" => {
                use std::os::unix::ffi::OsStrExt;
                let path = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(val));
                match std::fs::metadata(&path) {
                    Ok(m) if m.is_dir() => Ok(Change::Dir(path)),
                    Ok(_) => Err(strerror(libc::ENOTDIR)),
                    Err(e) => Err(e.raw_os_error().map_or_else(|| e.to_string(), strerror)),
                }
            }
            "busy-reply-threshold" | "lua-time-limit" => int(0, MAX).map(|n| Change::BusyThreshold(n as u64)),
            "slowlog-log-slower-than" => int(-1, MAX).map(Change::SlowlogSlowerThan),
            "slowlog-max-len" => int(0, MAX).map(|n| Change::SlowlogMaxLen(n as u64)),
            "acllog-max-len" => int(0, I32).map(|n| Change::AclLogMaxLen(n as usize)),
            // How often redis-server replicas get a PING (replication::redis_replicas).
            "repl-ping-replica-period" => int(1, I32).map(|n| Change::ReplPing(n as u64)),
            // The redis-server replicas' backlog, and how long it outlives the last of them.
            "repl-backlog-size" => match crate::config::parse_bytes(&String::from_utf8_lossy(val)) {
                Ok(n) if n >= 1 => Ok(Change::ReplBacklogSize(n as usize)),
                Ok(_) => Err("argument must be between 1 and 9223372036854775807 inclusive".to_string()),
                Err(_) => Err("argument must be a memory value".to_string()),
            },
            "repl-backlog-ttl" => int(0, I32).map(|n| Change::ReplBacklogTtl(n as u64)),
            // A replica of a Redis primary (replication::redis_primary): its next handshake.
            "masteruser" => {
                Ok(Change::MasterUser((!val.is_empty()).then(|| String::from_utf8_lossy(val).into_owned())))
            }
            "masterauth" => {
                Ok(Change::MasterAuth((!val.is_empty()).then(|| String::from_utf8_lossy(val).into_owned())))
            }
            "repl-timeout" => int(1, I32).map(|n| Change::ReplTimeout(n as u64)),
            "replica-priority" | "slave-priority" => int(0, I32).map(|n| Change::ReplicaPriority(n as u32)),
            "replica-announced" => bool_arg().map(Change::ReplicaAnnounced),
            "replica-announce-ip" | "slave-announce-ip" => {
                Ok(Change::AnnounceIp((!val.is_empty()).then(|| String::from_utf8_lossy(val).into_owned())))
            }
            "loglevel" => {
                let level = String::from_utf8_lossy(val).into_owned();
                crate::logging::filter_for(&level).map(|_| Change::LogLevel(level))
            }
            // Any text, as Redis takes it: one that is not an address fails each connection
            // attempt with the reason (INFO's replica_last_error, the log).
            "bind-source-addr" => Ok(Change::BindSourceAddr(String::from_utf8_lossy(val).into_owned())),
            "replica-announce-port" | "slave-announce-port" => {
                int(0, 65535).map(|n| Change::AnnouncePort(n as u16))
            }
            "replica-serve-stale-data" | "slave-serve-stale-data" => bool_arg().map(Change::ServeStale),
            // Writes need this many replicas acknowledging within the lag (dispatch.rs).
            "min-replicas-to-write" | "min-slaves-to-write" => {
                int(0, I32).map(|n| Change::MinReplicas(n as u32))
            }
            "min-replicas-max-lag" | "min-slaves-max-lag" => {
                int(0, I32).map(|n| Change::MinReplicasLag(n as u64))
            }
            // Snapshot rules (they act with --load): Redis's checks, seconds >= 1, changes >= 0.
            // Split on each space as Redis splits it: an empty word reads as 0.
            "save" if val.is_empty() => Ok(Change::SaveRules(Vec::new())),
            "save" => {
                let words = std::str::from_utf8(val).unwrap_or("x").split(' ');
                let nums: Option<Vec<i64>> =
                    words.map(|w| if w.is_empty() { Some(0) } else { w.parse::<i64>().ok() }).collect();
                match nums {
                    Some(n) if n.len() % 2 == 0 && n.chunks(2).all(|p| p[0] >= 1 && p[1] >= 0) => {
                        Ok(Change::SaveRules(n.chunks(2).map(|p| (p[0] as u64, p[1] as u64)).collect()))
                    }
                    _ => Err("Invalid save parameters".to_string()),
                }
            }
            // How long an exit waits for redis-server replicas (Server::drain_redis_replicas).
            "shutdown-timeout" => int(0, I32).map(|n| Change::ShutdownTimeout(n as u64)),
            // What SIGTERM / SIGINT do: SHUTDOWN's flags.
            "shutdown-on-sigterm" | "shutdown-on-sigint" => crate::server::ShutdownFlags::parse(val)
                .map(|f| Change::ShutdownOnSignal(*canon == "shutdown-on-sigterm", f))
                .ok_or_else(|| {
                    "argument(s) must be one of the following: default, save, nosave, now, force".to_string()
                }),
            // Client eviction's limit (Server::evict_clients).
            "maxmemory-clients" => crate::config::parse_maxmemory_clients(&String::from_utf8_lossy(val))
                .map(Change::MaxmemoryClients),
            // The channels a new ACL user or selector starts with.
            "acl-pubsub-default" => match val.to_ascii_lowercase().as_slice() {
                b"allchannels" => Ok(Change::PubsubDefault(true)),
                b"resetchannels" => Ok(Change::PubsubDefault(false)),
                _ => Err("argument(s) must be one of the following: allchannels, resetchannels".to_string()),
            },
            "latency-monitor-threshold" => int(0, MAX).map(|n| Change::LatencyThreshold(n as u64)),
            "watchdog-period" => int(0, i32::MAX as i64).map(|n| Change::WatchdogPeriod(n as u64)),
            // Redis's range: 1 MiB and up, a memory value.
            "client-query-buffer-limit" => match crate::config::parse_bytes(&String::from_utf8_lossy(val)) {
                Ok(n) if (1 << 20..=i64::MAX as u64).contains(&n) => Ok(Change::QueryBufferLimit(n as usize)),
                Ok(_) => {
                    Err("argument must be between 1048576 and 9223372036854775807 inclusive".to_string())
                }
                Err(_) => Err("argument must be a memory value".to_string()),
            },
            "latency-tracking" => bool_arg().map(Change::LatencyTracking),
            // Several values in one, split at each space as Redis splits them ("" is none).
            "latency-tracking-info-percentiles" => {
                let words: Vec<&[u8]> =
                    if val.is_empty() { Vec::new() } else { val.split(|&b| b == b' ').collect() };
                words
                    .iter()
                    .map(|w| match util::parse_f64(w).filter(|p| p.is_finite()) {
                        None => Err("Invalid latency-tracking-info-percentiles parameters".to_string()),
                        Some(p) if !(0.0..=100.0).contains(&p) => {
                            Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                                .to_string())
                        }
                        Some(p) => Ok(p),
                    })
                    .collect::<Result<Vec<f64>, String>>()
                    .map(Change::LatencyPercentiles)
            }
            "stream-idmp-duration" | "stream-idmp-maxsize" => {
                use store::types::stream_idmp::{MAX_DURATION, MAX_MAXSIZE};
                let hi = if *canon == "stream-idmp-duration" { MAX_DURATION } else { MAX_MAXSIZE };
                let hi = hi as i64;
                int(1, hi).map(|n| Change::Limit(store::limits::by_name(canon).expect("named"), n as usize))
            }
            // A memory value ("4kb" ...), as Redis takes it.
            "hll-sparse-max-bytes" => match crate::config::parse_bytes(&String::from_utf8_lossy(val)) {
                Ok(n) if n <= i64::MAX as u64 => {
                    Ok(Change::Limit(&store::limits::HLL_SPARSE_MAX_BYTES, n as usize))
                }
                Ok(_) => Err("argument must be between 0 and 9223372036854775807 inclusive".to_string()),
                Err(_) => Err("argument must be a memory value".to_string()),
            },
            name if store::limits::by_name(name).is_some() => int(0, store::limits::INTSET_HARD_MAX as i64)
                .map(|n| Change::Limit(store::limits::by_name(name).expect("checked"), n as usize)),
            "loading-process-events-interval-bytes" => {
                int(1024, I32).map(|n| Change::Inert(canon, n.to_string()))
            }
            name if INERT.contains(&name) => {
                int(i32::MIN as i64, I32).map(|n| Change::Inert(canon, n.to_string()))
            }
            name if INERT_CHOICES.iter().any(|(n, _, _)| *n == name) => {
                let (_, choices, _) = INERT_CHOICES.iter().find(|(n, _, _)| *n == name).expect("found");
                let v = String::from_utf8_lossy(val).to_ascii_lowercase();
                if choices.is_empty() {
                    crate::config::parse_yes_no(&v)
                        .map(|on| Change::Inert(canon, yes_no(on)))
                        .map_err(|_| "argument must be 'yes' or 'no'".to_string())
                } else if choices.contains(&v.as_str()) {
                    Ok(Change::Inert(canon, v))
                } else {
                    Err(format!("argument(s) must be one of the following: {}", choices.join(", ")))
                }
            }
            "timeout" => int(0, I32).map(|n| Change::Timeout(n as u64)),
            "tcp-keepalive" => int(0, I32).map(|n| Change::TcpKeepalive(n as u32)),
            "protected-mode" => bool_arg().map(Change::ProtectedMode),
            "stop-writes-on-bgsave-error" => bool_arg().map(Change::StopWritesOnBgsaveError),
            // Applied before the rest (the listeners may fail to bind): see `Server::relisten`.
            "port" => int(0, 65535).map(|n| Change::Port(n as u16)),
            "bind" => {
                let text = String::from_utf8_lossy(val);
                let addrs: Vec<String> = text.split_whitespace().map(str::to_string).collect();
                if addrs.len() > 16 {
                    Err("Too many bind addresses specified.".to_string())
                } else {
                    Ok(Change::Bind(addrs))
                }
            }
            "rdb-key-save-delay" => int(i32::MIN as i64, I32).map(Change::KeySaveDelay),
            "oom-score-adj" => match crate::oom_score::Mode::parse(val) {
                Some(mode) => {
                    oom.mode = mode;
                    Ok(Change::Oom)
                }
                None => {
                    Err("argument(s) must be one of the following: no, yes, relative, absolute".to_string())
                }
            },
            "oom-score-adj-values" => crate::oom_score::parse_values(val).map(|v| {
                oom.values = v;
                Change::Oom
            }),
            // Redis accepts any non-negative value and runs at 1..=500.
            "jemalloc-bg-thread" => bool_arg().map(Change::JemallocBgThread),
            "rdbcompression" => bool_arg().map(Change::RdbCompression),
            "rdbchecksum" => bool_arg().map(Change::RdbChecksum),
            "crash-log-enabled" => bool_arg().map(Change::CrashLogEnabled),
            "hide-user-data-from-log" => bool_arg().map(Change::HideUserData),
            "use-exit-on-panic" => bool_arg().map(Change::UseExitOnPanic),
            "hz" => int(0, I32).map(|n| Change::Hz(n.clamp(1, 500) as u32)),
            "tracking-table-max-keys" => int(0, MAX).map(|n| Change::TrackingMaxKeys(n as usize)),
            "notify-keyspace-events" => crate::notify::parse_flags(val)
                .map(Change::NotifyFlags)
                .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_string()),
            "client-output-buffer-limit" => {
                s.output_limits.parse_over(&String::from_utf8_lossy(val)).map(Change::OutputLimits)
            }
            "maxmemory" => crate::config::parse_bytes(&String::from_utf8_lossy(val))
                .map(|n| {
                    evict.maxmemory = n;
                    Change::Evict(evict)
                })
                .map_err(|_| "argument must be a memory value".to_string()),
            "maxmemory-policy" => engine::evict::Policy::parse(val)
                .map(|p| {
                    evict.policy = p;
                    Change::Evict(evict)
                })
                .ok_or_else(|| {
                    "argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, \
                     volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction"
                        .to_string()
                }),
            "maxmemory-samples" => int(1, I32).map(|n| {
                evict.samples = n as usize;
                Change::Evict(evict)
            }),
            "lfu-log-factor" => int(0, I32).map(|n| {
                evict.lfu_log_factor = n as u32;
                Change::Evict(evict)
            }),
            "lfu-decay-time" => int(0, I32).map(|n| {
                evict.lfu_decay_time = n as u32;
                Change::Evict(evict)
            }),
            // Setting a value to what it already is succeeds (clients and test suites often
            // `CONFIG SET save ""` or `appendonly no`).
            _ if current.as_bytes().eq_ignore_ascii_case(val) => Ok(Change::Nothing),
            _ => Err("can't set immutable config".to_string()),
        };
        let change = match change {
            Ok(change) => change,
            Err(why) => return set_failed(canon.as_bytes(), &why),
        };
        changes.push(change);
    }
    // The OOM score is written before anything else changes: a write the kernel refuses
    // (lowering it takes privileges) fails the whole CONFIG SET, as in Redis.
    let new_port = changes.iter().find_map(|c| if let Change::Port(p) = c { Some(*p) } else { None });
    let new_bind = changes.iter().find_map(|c| if let Change::Bind(b) = c { Some(b.clone()) } else { None });
    let (port, bind) = (new_port.unwrap_or(s.cfg.port), new_bind.unwrap_or_else(|| s.cfg.bind.clone()));
    if port != s.cfg.port || bind != s.cfg.bind {
        let name: &[u8] = if port != s.cfg.port { b"port" } else { b"bind" };
        if let Err(why) = s.relisten(port, bind) {
            return set_failed(name, &why);
        }
    }
    if changes.iter().any(|c| matches!(c, Change::Oom)) {
        if let Err(e) = oom.apply(s.oom_class()) {
            tracing::warn!("Unable to write oom_score_adj: {e}");
            let name: &[u8] = if oom.mode != s.oom.mode { b"oom-score-adj" } else { b"oom-score-adj-values" };
            return set_failed(name, "Failed to set current oom_score_adj. Check server logs.");
        }
        s.oom = oom;
    }
    for ch in changes {
        match ch {
            Change::MaxClients(n) => s.cfg.maxclients = n,
            // Applies to connections accepted from now on.
            Change::MaxBulk(n) => s.limits.max_bulk_len = n,
            Change::DbFilename(name) => s.snapshots.rdb_filename = name,
            Change::Dir(path) => {
                if let Err(e) = std::env::set_current_dir(&path) {
                    tracing::warn!("CONFIG SET dir {}: {e}", path.display());
                }
            }
            Change::ReplPing(n) => s.redis_replicas.ping_period_secs = n,
            Change::ReplBacklogSize(n) => s.redis_replicas.set_backlog_size(n),
            Change::ReplBacklogTtl(n) => s.redis_replicas.backlog_ttl_secs = n,
            Change::MasterUser(u) => s.redis_primary_settings.masteruser = u,
            Change::MasterAuth(p) => s.redis_primary_settings.masterauth = p,
            Change::ReplTimeout(n) => s.redis_primary_settings.repl_timeout_secs = n,
            // Given to the primary at the next handshake, as in Redis.
            Change::ReplicaPriority(n) => s.redis_primary_settings.priority = n,
            Change::ReplicaAnnounced(on) => s.redis_primary_settings.announced = on,
            Change::AnnounceIp(ip) => s.redis_primary_settings.announce_ip = ip,
            Change::LogLevel(level) => {
                if let Err(e) = crate::logging::set_level(&level) {
                    tracing::warn!("CONFIG SET loglevel {level}: {e}");
                }
                s.cfg.loglevel = level;
            }
            Change::BindSourceAddr(a) => {
                // The next connection attempt uses it, to a redis-server primary or upstream.
                if let Some(r) = s.replica.as_mut() {
                    let mut settings = (*r.settings).clone();
                    settings.source_addr = a.clone();
                    r.settings = std::sync::Arc::new(settings);
                }
                s.redis_primary_settings.bind_source_addr = a;
            }
            Change::AnnouncePort(p) => s.redis_primary_settings.announce_port = p,
            Change::ServeStale(on) => s.redis_primary_settings.serve_stale = on,
            Change::MinReplicas(n) => s.cfg.min_replicas_to_write = n,
            Change::ShutdownTimeout(n) => s.redis_replicas.shutdown_timeout_secs = n,
            Change::ShutdownOnSignal(true, f) => s.shutdown_on_sigterm = f,
            Change::ShutdownOnSignal(false, f) => s.shutdown_on_sigint = f,
            Change::SaveRules(rules) => s.snapshots.rules = rules,
            Change::MaxmemoryClients(m) => s.cfg.maxmemory_clients = m,
            Change::PubsubDefault(all) => crate::auth::set_pubsub_default(all),
            Change::MinReplicasLag(n) => s.cfg.min_replicas_max_lag = n,
            Change::RequirePass(pw) => {
                s.users.set_requirepass(&pw);
                s.cfg.requirepass = Some(pw);
            }
            Change::BusyThreshold(n) => s.cfg.busy_reply_threshold = n,
            Change::SlowlogSlowerThan(n) => s.introspection.slowlog_slower_than = n,
            Change::SlowlogMaxLen(n) => s.introspection.slowlog_max_len = n,
            Change::AclLogMaxLen(n) => s.acl_log.set_max_len(n),
            Change::LatencyThreshold(n) => s.introspection.latency_threshold_ms = n,
            Change::WatchdogPeriod(ms) => s.set_watchdog_period(ms),
            Change::QueryBufferLimit(n) => s.query_buffer_limit = n,
            Change::LatencyTracking(on) => s.introspection.latency_tracking = on,
            Change::LatencyPercentiles(p) => s.introspection.latency_percentiles = p,
            Change::NotifyFlags(flags) => s.set_notify_flags(flags),
            Change::TrackingMaxKeys(n) => {
                s.tracking.max_keys = n;
                // A lower bound applies now (0: unbounded); the command's end delivers.
                if n > 0 {
                    s.tracking.shrink();
                }
            }
            Change::Limit(limit, n) => store::limits::set(limit, n),
            Change::Inert(name, v) => {
                let key = inert_key(name);
                if key == "list-max-listpack-size" {
                    if let Ok(n) = v.parse::<i64>() {
                        store::limits::set_list_max_listpack_size(n);
                    }
                }
                s.inert_config.insert(key, v);
            }
            Change::Timeout(n) => s.cfg.idle_timeout_secs = n,
            Change::Hz(n) => s.cfg.hz = n,
            Change::JemallocBgThread(on) => {
                crate::set_jemalloc_bg_thread(on);
                s.cfg.jemalloc_bg_thread = on;
            }
            Change::RdbCompression(on) => {
                engine::rdb::set_compression(on);
                s.cfg.rdbcompression = on;
            }
            Change::RdbChecksum(on) => {
                engine::rdb::set_checksum(on);
                s.cfg.rdbchecksum = on;
            }
            Change::CrashLogEnabled(on) => {
                crate::crash::set_crash_log_enabled(on);
                s.cfg.crash_log_enabled = on;
            }
            Change::HideUserData(on) => {
                crate::crash::set_hide_user_data(on);
                s.cfg.hide_user_data_from_log = on;
            }
            Change::UseExitOnPanic(on) => {
                crate::crash::set_use_exit_on_panic(on);
                s.cfg.use_exit_on_panic = on;
            }
            Change::OutputLimits(l) => s.output_limits = l,
            Change::Evict(cfg) => {
                s.engine.set_evict_config(cfg);
                // A limit below what is used now evicts at once, as Redis does, not only
                // before the next command.
                s.evict_now();
            }
            Change::KeySaveDelay(us) => store::limits::set_key_save_delay_us(us),
            Change::Port(_) | Change::Bind(_) => {} // applied first, above
            Change::TcpKeepalive(n) => s.cfg.tcp_keepalive = n,
            Change::StopWritesOnBgsaveError(on) => s.cfg.stop_writes_on_bgsave_error = on,
            Change::ProtectedMode(on) => s.cfg.protected_mode = on,
            Change::Oom | Change::Nothing => {}
        }
    }
    Ok(())
}
