//! redis.conf files and Redis-style `--directive value` options:
//! `goblin-core [/path/to/redis.conf] [--name value ...]`, as redis-server takes them.
//!
//! A file is read line by line with Redis's quoting rules (`split_args`), `include` followed,
//! and each directive sorted into one of four kinds:
//!
//! - a **flag**: a setting this server fixes at startup (`port`, `bind`, `dir`, `save` ...,
//!   every `--flag` of config.rs). It becomes that flag, placed before the command line's own
//!   flags so that the command line wins, as it does for redis-server;
//! - a **runtime** setting (`slowlog-max-len`, `hash-max-listpack-entries`, `masterauth` ...):
//!   applied with CONFIG SET's own checks once the server exists, before it listens; a value
//!   CONFIG SET refuses stops startup. The encoding limits are global and apply at once, so a
//!   snapshot loaded at startup is built under them. `user NAME RULES...` lines are ACL
//!   SETUSER's (the default user reset first, as Redis declares it), never beside an ACL file;
//! - **ignored**: Redis settings that mean nothing here (AOF tuning, active defrag, process
//!   titles, diskless sync ...). The log names them once; a stock redis.conf starts unchanged;
//! - **refused**: what would silently weaken durability or security if ignored
//!   (`appendonly yes`, `loadmodule`, TLS settings this server cannot honour) stops startup
//!   with the reason.
//!
//! `rename-command` lines are collected and installed (rename.rs) once all are read.
//!
//! A directive Redis does not know either is Redis's "Bad directive" error, in redis-server's
//! fatal box, naming the file and line. The command line is read as redis-server reads it
//! (`load`) and its options sorted the same way, after the file's: this server's flags, and
//! Redis directives that are not (`--appendonly no`, `--protected-mode no`, common in
//! container definitions). An option neither knows is clap's usage error.
//!
//! CONFIG REWRITE (`rewrite`) writes back what changed since startup (CONFIG SET, and settings
//! given on the command line) into the file, keeping every other line as it was.

use crate::config::Config;
use clap::{CommandFactory, Parser};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// How deep `include` may nest (a file including itself is a loop, not a configuration).
const MAX_INCLUDE_DEPTH: usize = 16;

/// Redis settings that have no meaning in goblin-core: accepted and ignored (logged once).
const IGNORED: &[&str] = &[
    "active-defrag-cycle-max",
    "active-defrag-cycle-min",
    "active-defrag-ignore-bytes",
    "active-defrag-max-scan-fields",
    "active-defrag-threshold-lower",
    "active-defrag-threshold-upper",
    "active-expire-effort",
    "activedefrag",
    "always-show-logo",
    "aof-load-truncated",
    "aof-rewrite-cpulist",
    "aof-rewrite-incremental-fsync",
    "aof-timestamp-enabled",
    "aof-use-rdb-preamble",
    "appenddirname",
    "appendfilename",
    "appendfsync",
    "auto-aof-rewrite-min-size",
    "auto-aof-rewrite-percentage",
    "bgsave-cpulist",
    "bio-cpulist",
    "crash-memcheck-enabled",
    "disable-thp",
    "dynamic-hz",
    "ignore-warnings",
    "io-threads",
    "io-threads-do-reads",
    "locale-collate",
    "max-new-connections-per-cycle",
    "max-new-tls-connections-per-cycle",
    "maxmemory-eviction-tenacity",
    "no-appendfsync-on-rewrite",
    "proc-title-template",
    "rdb-del-sync-files",
    "rdb-save-incremental-fsync",
    "repl-disable-tcp-nodelay",
    "replica-full-sync-buffer-limit",
    "replica-ignore-maxmemory",
    "replica-read-only",
    "server-cpulist",
    "set-proc-title",
    "slave-ignore-maxmemory",
    "slave-read-only",
    "socket-mark-id",
    "stream-node-max-bytes",
    "stream-node-max-entries",
    "syslog-enabled",
    "syslog-facility",
    "syslog-ident",
    "vset-force-single-threaded-execution",
];

/// Redis's hidden settings (test aids CONFIG GET * leaves out), directives too.
const REDIS_HIDDEN: &[&str] = &[
    "key-load-delay",
    "loading-process-events-interval-bytes",
    "rdb-key-save-delay",
    "use-exit-on-panic",
    "watchdog-period",
];

/// Every setting name redis-server 8.2 answers CONFIG GET * with (aliases included), and the
/// directives that are not settings: a command-line option under one of these names is a
/// directive; any other unknown option is Redis's "Bad directive" error.
const REDIS_NAMES: &[&str] = &[
    "acl-pubsub-default",
    "aclfile",
    "acllog-max-len",
    "active-defrag-cycle-max",
    "active-defrag-cycle-min",
    "active-defrag-ignore-bytes",
    "active-defrag-max-scan-fields",
    "active-defrag-threshold-lower",
    "active-defrag-threshold-upper",
    "active-expire-effort",
    "activedefrag",
    "activerehashing",
    "always-show-logo",
    "aof-load-truncated",
    "aof-rewrite-cpulist",
    "aof-rewrite-incremental-fsync",
    "aof-timestamp-enabled",
    "aof-use-rdb-preamble",
    "aof_rewrite_cpulist",
    "appenddirname",
    "appendfilename",
    "appendfsync",
    "appendonly",
    "auto-aof-rewrite-min-size",
    "auto-aof-rewrite-percentage",
    "bgsave-cpulist",
    "bgsave_cpulist",
    "bind",
    "bind-source-addr",
    "bio-cpulist",
    "bio_cpulist",
    "busy-reply-threshold",
    "client-output-buffer-limit",
    "client-query-buffer-limit",
    "cluster-allow-pubsubshard-when-down",
    "cluster-allow-reads-when-down",
    "cluster-allow-replica-migration",
    "cluster-announce-bus-port",
    "cluster-announce-hostname",
    "cluster-announce-human-nodename",
    "cluster-announce-ip",
    "cluster-announce-port",
    "cluster-announce-tls-port",
    "cluster-compatibility-sample-ratio",
    "cluster-config-file",
    "cluster-enabled",
    "cluster-link-sendbuf-limit",
    "cluster-migration-barrier",
    "cluster-node-timeout",
    "cluster-port",
    "cluster-preferred-endpoint-type",
    "cluster-replica-no-failover",
    "cluster-replica-validity-factor",
    "cluster-require-full-coverage",
    "cluster-slave-no-failover",
    "cluster-slave-validity-factor",
    "cluster-slot-stats-enabled",
    "crash-log-enabled",
    "crash-memcheck-enabled",
    "daemonize",
    "databases",
    "dbfilename",
    "dir",
    "disable-thp",
    "dynamic-hz",
    "enable-debug-command",
    "enable-module-command",
    "enable-protected-configs",
    "hash-max-listpack-entries",
    "hash-max-listpack-value",
    "hash-max-ziplist-entries",
    "hash-max-ziplist-value",
    "hide-user-data-from-log",
    "hll-sparse-max-bytes",
    "hz",
    "ignore-warnings",
    "io-threads",
    "jemalloc-bg-thread",
    "latency-monitor-threshold",
    "latency-tracking",
    "latency-tracking-info-percentiles",
    "lazyfree-lazy-eviction",
    "lazyfree-lazy-expire",
    "lazyfree-lazy-server-del",
    "lazyfree-lazy-user-del",
    "lazyfree-lazy-user-flush",
    "lfu-decay-time",
    "lfu-log-factor",
    "list-compress-depth",
    "list-max-listpack-size",
    "list-max-ziplist-size",
    "locale-collate",
    "logfile",
    "loglevel",
    "lua-time-limit",
    "masterauth",
    "masteruser",
    "max-new-connections-per-cycle",
    "max-new-tls-connections-per-cycle",
    "maxclients",
    "maxmemory",
    "maxmemory-clients",
    "maxmemory-eviction-tenacity",
    "maxmemory-policy",
    "maxmemory-samples",
    "min-replicas-max-lag",
    "min-replicas-to-write",
    "min-slaves-max-lag",
    "min-slaves-to-write",
    "no-appendfsync-on-rewrite",
    "notify-keyspace-events",
    "oom-score-adj",
    "oom-score-adj-values",
    "pidfile",
    "port",
    "proc-title-template",
    "propagation-error-behavior",
    "protected-mode",
    "proto-max-bulk-len",
    "rdb-del-sync-files",
    "rdb-save-incremental-fsync",
    "rdbchecksum",
    "rdbcompression",
    "repl-backlog-size",
    "repl-backlog-ttl",
    "repl-disable-tcp-nodelay",
    "repl-diskless-load",
    "repl-diskless-sync",
    "repl-diskless-sync-delay",
    "repl-diskless-sync-max-replicas",
    "repl-ping-replica-period",
    "repl-ping-slave-period",
    "repl-timeout",
    "replica-announce-ip",
    "replica-announce-port",
    "replica-announced",
    "replica-full-sync-buffer-limit",
    "replica-ignore-disk-write-errors",
    "replica-ignore-maxmemory",
    "replica-lazy-flush",
    "replica-priority",
    "replica-read-only",
    "replica-serve-stale-data",
    "replicaof",
    "requirepass",
    "sanitize-dump-payload",
    "save",
    "server-cpulist",
    "server_cpulist",
    "set-max-intset-entries",
    "set-max-listpack-entries",
    "set-max-listpack-value",
    "set-proc-title",
    "shutdown-on-sigint",
    "shutdown-on-sigterm",
    "shutdown-timeout",
    "slave-announce-ip",
    "slave-announce-port",
    "slave-ignore-maxmemory",
    "slave-lazy-flush",
    "slave-priority",
    "slave-read-only",
    "slave-serve-stale-data",
    "slaveof",
    "slowlog-log-slower-than",
    "slowlog-max-len",
    "socket-mark-id",
    "stop-writes-on-bgsave-error",
    "stream-node-max-bytes",
    "stream-node-max-entries",
    "supervised",
    "syslog-enabled",
    "syslog-facility",
    "syslog-ident",
    "tcp-backlog",
    "tcp-keepalive",
    "timeout",
    "tls-auth-clients",
    "tls-ca-cert-dir",
    "tls-ca-cert-file",
    "tls-cert-file",
    "tls-ciphers",
    "tls-ciphersuites",
    "tls-client-cert-file",
    "tls-client-key-file",
    "tls-client-key-file-pass",
    "tls-cluster",
    "tls-dh-params-file",
    "tls-key-file",
    "tls-key-file-pass",
    "tls-port",
    "tls-prefer-server-ciphers",
    "tls-protocols",
    "tls-replication",
    "tls-session-cache-size",
    "tls-session-cache-timeout",
    "tls-session-caching",
    "tracking-table-max-keys",
    "unixsocket",
    "unixsocketperm",
    "vset-force-single-threaded-execution",
    "zset-max-listpack-entries",
    "zset-max-listpack-value",
    "zset-max-ziplist-entries",
    "zset-max-ziplist-value",
    "include",
    "rename-command",
    "user",
    "loadmodule",
    "stream-idmp-duration",
    "stream-idmp-maxsize",
];

/// Names that are one setting under two names (the second is what CONFIG REWRITE writes).
const ALIASES: &[(&str, &str)] = &[
    ("slaveof", "replicaof"),
    ("lua-time-limit", "busy-reply-threshold"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
];

/// A setting's name as CONFIG REWRITE knows it (an alias's setting).
pub fn canonical(name: &str) -> &str {
    ALIASES.iter().find(|(a, _)| *a == name).map_or(name, |(_, c)| c)
}

/// Why a directive stops startup rather than being ignored, if it does.
fn refusal(name: &str, words: &[Vec<u8>]) -> Option<String> {
    let first = words.first().map(|w| String::from_utf8_lossy(w).to_ascii_lowercase());
    Some(match name {
        "appendonly" if first.as_deref() != Some("no") => {
            "goblin-core keeps no append-only file: its durable history is a Kafka topic (--kafka)".into()
        }
        "loadmodule" => "goblin-core loads no modules".into(),
        // A replica that takes its clients' writes would drift from its primary.
        "replica-read-only" | "slave-read-only" if first.as_deref() == Some("no") => {
            "goblin-core's replicas are read-only: their data change only through their primary".into()
        }
        n if n.starts_with("tls-") => {
            format!("goblin-core's TLS takes --tls-port, --tls-cert-file, --tls-key-file, --tls-ca-cert-file and --tls-auth-clients; '{n}' is not supported")
        }
        _ => return None,
    })
}

/// One directive: where it was read, and its words (the name lowercased).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    /// The file it came from; None: the command line.
    pub file: Option<PathBuf>,
    pub line_no: usize,
    /// The line as written, for the error box.
    pub text: String,
    pub name: String,
    pub words: Vec<Vec<u8>>,
}

/// What stops startup: redis-server's fatal box around the line and the reason.
#[derive(Debug, PartialEq, Eq)]
pub struct Fatal {
    pub file: Option<PathBuf>,
    pub line_no: usize,
    pub text: String,
    pub reason: String,
    /// 1, as redis-server exits on a bad configuration; 2 for a bad value of one of this
    /// server's own flags on the command line (a usage error, as clap's).
    pub exit_code: i32,
}

impl Fatal {
    pub(crate) fn at(d: &Directive, reason: impl Into<String>) -> Fatal {
        Fatal {
            file: d.file.clone(),
            line_no: d.line_no,
            text: d.text.clone(),
            reason: reason.into(),
            exit_code: 1,
        }
    }
}

impl std::fmt::Display for Fatal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "\n*** FATAL CONFIG FILE ERROR (goblin-core {}) ***", env!("CARGO_PKG_VERSION"))?;
        match &self.file {
            Some(p) => {
                writeln!(f, "Reading the configuration file {}, at line {}", p.display(), self.line_no)?
            }
            None => writeln!(f, "Reading the command-line options, at option {}", self.line_no)?,
        }
        writeln!(f, ">>> '{}'", self.text)?;
        write!(f, "{}", self.reason)
    }
}

/// A line's words by Redis's rules (sdssplitargs; see engine::util::split_args).
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    engine::util::split_args(line)
}

/// A word as CONFIG REWRITE writes it: bare when it reads back as itself, else quoted.
pub fn quote(word: &[u8]) -> String {
    let plain = !word.is_empty()
        && word.iter().all(|&b| b.is_ascii_alphanumeric() || b"-_.:/@,+*=%^~<>!?&$#[]{}()".contains(&b));
    if plain {
        return String::from_utf8_lossy(word).into_owned();
    }
    quote_always(word)
}

/// A word in double quotes, escaped as `split_args` reads it back.
fn quote_always(word: &[u8]) -> String {
    let mut s = String::from("\"");
    for &b in word {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x07 => s.push_str("\\a"),
            0x08 => s.push_str("\\b"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    s
}

/// Every directive of `path`, its includes in place.
pub fn read(path: &Path) -> Result<Vec<Directive>, Fatal> {
    let mut out = Vec::new();
    read_into(path, 0, None, &mut out)?;
    Ok(out)
}

/// The files a name stands for: itself, or, with a wildcard (`*`, `?`, `[`), every file the
/// pattern matches in glob's order (none is no error: an empty conf.d directory), as Redis.
fn expand(path: &Path) -> Vec<PathBuf> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let bytes = path.as_os_str().as_bytes();
    if !bytes.iter().any(|b| matches!(b, b'*' | b'?' | b'[')) {
        return vec![path.to_path_buf()];
    }
    let Ok(pattern) = std::ffi::CString::new(bytes) else { return Vec::new() };
    let mut found = Vec::new();
    // SAFETY: glob fills `g` (zeroed, as glob expects), whose paths are read before globfree.
    unsafe {
        let mut g: libc::glob_t = std::mem::zeroed();
        if libc::glob(pattern.as_ptr(), 0, None, &mut g) == 0 {
            for i in 0..g.gl_pathc {
                let p = std::ffi::CStr::from_ptr(*g.gl_pathv.add(i));
                found.push(PathBuf::from(std::ffi::OsString::from_vec(p.to_bytes().to_vec())));
            }
        }
        libc::globfree(&mut g);
    }
    found
}

/// `path` (or, with a wildcard, each file it matches), read into `out`.
fn read_into(
    path: &Path,
    depth: usize,
    from: Option<&Directive>,
    out: &mut Vec<Directive>,
) -> Result<(), Fatal> {
    for file in expand(path) {
        let bytes = std::fs::read(&file).map_err(|e| match from {
            Some(d) => Fatal::at(d, format!("can't open the included file '{}': {e}", file.display())),
            None => Fatal {
                file: Some(file.clone()),
                line_no: 0,
                text: String::new(),
                reason: format!("Fatal error, can't open config file '{}': {e}", file.display()),
                exit_code: 1,
            },
        })?;
        parse_into(&bytes, Some(&file), depth, out)?;
    }
    Ok(())
}

/// A configuration text's directives (`file`: where it came from; None: standard input).
fn parse_into(
    bytes: &[u8],
    file: Option<&Path>,
    depth: usize,
    out: &mut Vec<Directive>,
) -> Result<(), Fatal> {
    for (n, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = raw.trim_ascii();
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        let mut d = Directive {
            file: Some(file.map_or_else(|| PathBuf::from("(standard input)"), Path::to_path_buf)),
            line_no: n + 1,
            text: String::from_utf8_lossy(line).into_owned(),
            name: String::new(),
            words: Vec::new(),
        };
        let Some(mut words) = split_args(line) else {
            return Err(Fatal::at(&d, "Unbalanced quotes in configuration line"));
        };
        if words.is_empty() {
            continue;
        }
        d.name = String::from_utf8_lossy(&words.remove(0)).to_ascii_lowercase();
        d.words = words;
        if d.name == "include" {
            if d.words.len() != 1 {
                return Err(Fatal::at(&d, "Bad directive or wrong number of arguments"));
            }
            if depth + 1 >= MAX_INCLUDE_DEPTH {
                return Err(Fatal::at(
                    &d,
                    format!("includes nest deeper than {MAX_INCLUDE_DEPTH} files (a loop?)"),
                ));
            }
            use std::os::unix::ffi::OsStrExt;
            let inc = PathBuf::from(std::ffi::OsStr::from_bytes(&d.words[0]));
            read_into(&inc, depth + 1, Some(&d), out)?;
            continue;
        }
        out.push(d);
    }
    Ok(())
}

/// The result of reading the command line and its configuration file.
#[derive(Debug)]
pub struct Loaded {
    pub cfg: Config,
    /// The configuration file, absolute (CONFIG REWRITE writes it; INFO names it).
    pub file: Option<PathBuf>,
    /// Settings to apply with CONFIG SET's rules once the server exists, in order.
    pub runtime: Vec<Directive>,
    /// Names of ignored directives (each once), for the log.
    pub ignored: Vec<String>,
    /// Settings given on the command line: CONFIG REWRITE writes them into the file.
    pub from_command_line: Vec<String>,
}

/// The long names (and aliases) of this server's flags, and whether each takes a value.
fn flags() -> Vec<(String, bool)> {
    flag_table().iter().map(|(n, takes, _)| (n.clone(), *takes)).collect()
}

/// Each flag's name (and alias), whether it takes values, and how many values it takes:
/// built from clap's command once (a file's every flag line asks).
fn flag_table() -> &'static [(String, bool, std::ops::RangeInclusive<usize>)] {
    static TABLE: std::sync::OnceLock<Vec<(String, bool, std::ops::RangeInclusive<usize>)>> =
        std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut cmd = Config::command();
        cmd.build();
        let mut out = Vec::new();
        for a in cmd.get_arguments() {
            let Some(long) = a.get_long() else { continue };
            let takes_value = a.get_action().takes_values();
            let range = a.get_num_args().map_or(1..=1, |r| r.min_values()..=r.max_values());
            out.push((long.to_string(), takes_value, range.clone()));
            for alias in a.get_all_aliases().unwrap_or_default() {
                out.push((alias.to_string(), takes_value, range.clone()));
            }
        }
        out
    })
}

/// Whether `n` values are too many or too few for flag `name` (redis-server's "wrong number
/// of arguments"; `bind` takes any number, in one value).
fn wrong_count(name: &str, n: usize) -> bool {
    name != "bind" && flag_table().iter().any(|(f, takes, range)| f == name && *takes && !range.contains(&n))
}

/// Where a directive goes.
enum Kind {
    /// A flag of config.rs: (its name, whether it takes values).
    Flag(bool),
    Ignored,
    Runtime,
}

fn kind(flags: &[(String, bool)], d: &Directive) -> Result<Kind, Fatal> {
    // In a file, masteruser goes with masterauth (a runtime setting): CONFIG SET takes both.
    // (On the command line it is the flag, with --masterauth-file.)
    if d.name == "masteruser" && d.file.is_some() {
        return Ok(Kind::Runtime);
    }
    if let Some((_, takes)) = flags.iter().find(|(f, _)| *f == d.name) {
        return Ok(Kind::Flag(*takes));
    }
    if let Some(why) = refusal(&d.name, &d.words) {
        return Err(Fatal::at(d, why));
    }
    if IGNORED.contains(&d.name.as_str()) || d.name.starts_with("cluster-") {
        return Ok(Kind::Ignored);
    }
    Ok(Kind::Runtime)
}

/// Parses the process's arguments: an optional configuration file first (a first argument
/// that is not an option), then options. `--name value ...` options that are not flags of
/// this server are directives, as in redis-server (their values run to the next `--`).
/// Errors: the fatal box (Err(Fatal)), or clap's own error (printed and exited by clap).
pub fn load(argv: Vec<OsString>) -> Result<Loaded, Fatal> {
    let flags = flags();
    let cmd = Config::command();
    let subcommands: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
    let tool_flags: Vec<String> = cmd
        .get_subcommands()
        .flat_map(|s| s.get_arguments().filter_map(|a| a.get_long().map(str::to_string)))
        .collect();
    let mut args = argv.into_iter();
    let prog = args.next().unwrap_or_else(|| "goblin-core".into());
    let rest: Vec<OsString> = args.collect();
    // A tool (`goblin-core [--flags] import-rdb ...`) takes its own arguments: clap alone reads
    // the command line.
    if rest.iter().any(|a| subcommands.iter().any(|s| a == s.as_str())) {
        let cfg = Config::try_parse_from(std::iter::once(prog).chain(rest)).unwrap_or_else(|e| e.exit());
        return Ok(Loaded {
            cfg,
            file: None,
            runtime: Vec::new(),
            ignored: Vec::new(),
            from_command_line: Vec::new(),
        });
    }
    let mut i = 0;
    let mut file = None;
    let mut directives = Vec::new();
    if let Some(first) = rest.first().filter(|a| !a.to_string_lossy().starts_with('-')) {
        let path = std::path::absolute(first).unwrap_or_else(|_| PathBuf::from(first));
        directives = read(&path)?;
        file = Some(path);
        i = 1;
    }
    // "-", first or last (as redis-server): the configuration is read from standard input too,
    // after the file and before the options.
    let mut rest = rest;
    let dash = |a: Option<&OsString>| a.is_some_and(|a| a == "-");
    let stdin_at = if dash(rest.get(i)) {
        Some(i)
    } else if rest.len() > i && dash(rest.last()) {
        Some(rest.len() - 1)
    } else {
        None
    };
    if let Some(at) = stdin_at {
        rest.remove(at);
        let mut text = Vec::new();
        use std::io::Read;
        if let Err(e) = std::io::stdin().read_to_end(&mut text) {
            return Err(Fatal {
                file: Some(PathBuf::from("(standard input)")),
                line_no: 0,
                text: String::new(),
                reason: format!("can't read the configuration from standard input: {e}"),
                exit_code: 1,
            });
        }
        parse_into(&text, None, 0, &mut directives)?;
    }
    // The command line, read as redis-server reads it: `--name` starts an option once the one
    // before it has a value (a switch of this server needs none); the words after it are its
    // values, a `--word` too while the option has none yet (`--port --bla` gives port the value
    // "--bla"); "--name value" in one argument is an option and its value; words before any
    // option are an option of their own. Each option is then a directive like a file's line.
    let is_flag = |n: &str| flags.iter().any(|(f, _)| f == n);
    let is_switch = |n: &str| flags.iter().any(|(f, takes)| f == n && !takes);
    let mut clap_args: Vec<OsString> = Vec::new();
    let mut from_command_line = Vec::new();
    let mut options: Vec<(String, Vec<Vec<u8>>)> = Vec::new();
    let mut has_value = true;
    for k in i..rest.len() {
        use std::os::unix::ffi::OsStrExt;
        let tok = rest[k].as_bytes();
        if matches!(tok, b"-h" | b"-V" | b"--help" | b"--version") {
            clap_args.push(rest[k].clone());
            continue;
        }
        let lower = |w: &[u8]| String::from_utf8_lossy(w).to_ascii_lowercase();
        if has_value && tok.len() > 2 && tok.starts_with(b"--") {
            let body = &tok[2..];
            // `--flag=value`, clap's form, for this server's flags.
            if let Some(eq) = body.iter().position(|&b| b == b'=') {
                if is_flag(&lower(&body[..eq])) {
                    options.push((lower(&body[..eq]), vec![body[eq + 1..].to_vec()]));
                    continue;
                }
            }
            let words = split_args(body).unwrap_or_else(|| vec![body.to_vec()]);
            if words.len() > 1 {
                options.push((lower(&words[0]), words[1..].to_vec()));
                continue;
            }
            let name = lower(body);
            has_value = is_switch(&name);
            // `--save` followed by another option or by nothing: `save ""`.
            let next_is_option = rest.get(k + 1).is_none_or(|n| n.as_bytes().starts_with(b"--"));
            if name == "save" && next_is_option {
                options.push((name, vec![Vec::new()]));
                has_value = true;
                continue;
            }
            options.push((name, Vec::new()));
        } else {
            match options.last_mut() {
                Some(o) => o.1.push(tok.to_vec()),
                None => options.push((lower(tok), Vec::new())),
            }
            has_value = true;
        }
    }
    for (n, (name, words)) in options.into_iter().enumerate() {
        // The line as redis-server shows it: each value quoted.
        let text = std::iter::once(name.clone())
            .chain(words.iter().map(|w| quote_always(w)))
            .collect::<Vec<_>>()
            .join(" ");
        // A flag of one of this server's tools (`--password-file` without `dumpworld`): clap's
        // usage error (exit status 2) says where it belongs.
        let redis_name = REDIS_NAMES.contains(&name.as_str()) || REDIS_HIDDEN.contains(&name.as_str());
        if tool_flags.contains(&name) && !is_flag(&name) && !redis_name {
            use std::os::unix::ffi::OsStringExt;
            clap_args.push(format!("--{name}").into());
            clap_args.extend(words.into_iter().map(OsString::from_vec));
            continue;
        }
        // Neither a flag nor a Redis name: Redis's fatal box, with clap's suggestion of a
        // flag of a similar name when it has one (`--prot`: '--port').
        if !is_flag(&name) && !redis_name {
            let mut why = "Bad directive or wrong number of arguments".to_string();
            if let Err(e) = Config::try_parse_from([prog.clone(), format!("--{name}").into()]) {
                let text = e.to_string();
                if let Some(tip) = text.lines().map(str::trim).find(|l| l.starts_with("tip:")) {
                    why.push_str(&format!(" ({tip})"));
                }
            }
            let d = Directive { file: None, line_no: n + 1, text, name, words };
            return Err(Fatal::at(&d, why));
        }
        from_command_line.push(canonical(&name).to_string());
        directives.push(Directive { file: None, line_no: n + 1, text, name, words });
    }
    // Sort the directives; the file's flags come before the command line's, so they lose.
    let mut file_flags: Vec<OsString> = Vec::new();
    let mut save: Option<Vec<String>> = None;
    let mut runtime = Vec::new();
    let mut ignored: Vec<String> = Vec::new();
    let mut renames: Vec<Directive> = Vec::new();
    for mut d in directives {
        // Redis's settings of several values take none as well (its test harness writes
        // `save ` for `save ""`): no percentiles; for `save`, no rules, though as any save
        // line it drops the defaults.
        // The shutdown signals' flag lists go the same way, to be refused by their own check
        // (Redis's "must be one of the following"), not for their count.
        if d.words.is_empty()
            && matches!(
                d.name.as_str(),
                "latency-tracking-info-percentiles" | "shutdown-on-sigint" | "shutdown-on-sigterm"
            )
        {
            d.words.push(Vec::new());
        }
        if d.words.is_empty() && !is_switch(&d.name) && d.name != "save" {
            let known = is_flag(&d.name) || REDIS_NAMES.contains(&d.name.as_str());
            let why = if known {
                "wrong number of arguments"
            } else {
                "Bad directive or wrong number of arguments"
            };
            let mut fatal = Fatal::at(&d, why);
            // One of this server's flags on the command line: a usage error.
            if d.file.is_none() && is_flag(&d.name) {
                fatal.exit_code = 2;
            }
            return Err(fatal);
        }
        if d.name == "rename-command" {
            if d.words.len() != 2 {
                return Err(Fatal::at(&d, "Bad directive or wrong number of arguments"));
            }
            renames.push(d);
            continue;
        }
        match kind(&flags, &d)? {
            Kind::Ignored => {
                if !ignored.contains(&d.name) {
                    ignored.push(d.name.clone());
                }
            }
            Kind::Runtime => {
                if d.file.is_none() {
                    from_command_line.push(canonical(&d.name).to_string());
                }
                runtime.push(d)
            }
            // Snapshot rules accumulate over the lines; `save ""` clears those before it.
            Kind::Flag(_) if d.name == "save" => {
                let rules = save.get_or_insert_with(Vec::new);
                if d.words.len() == 1 && d.words[0].is_empty() {
                    rules.clear();
                } else {
                    rules.extend(d.words.iter().map(|w| String::from_utf8_lossy(w).into_owned()));
                }
                // Each line's rules are checked on their own, so an error names its line.
                let joined = d.words.iter().map(|w| String::from_utf8_lossy(w)).collect::<Vec<_>>().join(" ");
                check_flag(&prog, &d, &[format!("--save={joined}").into()])?;
            }
            Kind::Flag(takes) => {
                let usage = |mut f: Fatal| {
                    if d.file.is_none() {
                        f.exit_code = 2;
                    }
                    f
                };
                if wrong_count(&d.name, d.words.len()) {
                    return Err(usage(Fatal::at(&d, "wrong number of arguments")));
                }
                let args = flag_args(&d, takes).map_err(usage)?;
                check_flag(&prog, &d, &args).map_err(usage)?;
                if d.file.is_none() {
                    clap_args.extend(args);
                } else {
                    file_flags.extend(args);
                }
            }
        }
    }
    if let Some(rules) = save {
        file_flags.push(format!("--save={}", rules.join(" ")).into());
    }
    let pairs: Vec<(Vec<u8>, Vec<u8>)> =
        renames.iter().map(|d| (d.words[0].clone(), d.words[1].clone())).collect();
    crate::rename::install(&pairs).map_err(|(i, why)| Fatal::at(&renames[i], why))?;
    let all = std::iter::once(prog).chain(file_flags).chain(clap_args);
    let cfg = Config::try_parse_from(all).unwrap_or_else(|e| e.exit());
    Ok(Loaded { cfg, file, runtime, ignored, from_command_line })
}

/// A directive as the flag it names.
fn flag_args(d: &Directive, takes_values: bool) -> Result<Vec<OsString>, Fatal> {
    use std::os::unix::ffi::OsStringExt;
    if !takes_values {
        // A switch (`--replica-tls`): alone or `name yes` sets it, `name no` leaves it off.
        if d.words.is_empty() {
            return Ok(vec![format!("--{}", d.name).into()]);
        }
        return match crate::config::parse_yes_no(&String::from_utf8_lossy(&d.words[0])) {
            Ok(true) if d.words.len() == 1 => Ok(vec![format!("--{}", d.name).into()]),
            Ok(false) if d.words.len() == 1 => Ok(Vec::new()),
            _ => Err(Fatal::at(d, "argument must be 'yes' or 'no'")),
        };
    }
    // An empty value of a path or a password is none (`requirepass ""`, `unixsocket ""`, as
    // CONFIG REWRITE writes them), not a file named "".
    let empty_is_none = matches!(d.name.as_str(), "requirepass" | "unixsocket" | "pidfile");
    if empty_is_none && d.words.len() == 1 && d.words[0].is_empty() {
        return Ok(Vec::new());
    }
    // The addresses as one value (config.rs splits it): `-::1` would read as a flag.
    if d.name == "bind" {
        let joined = d.words.iter().map(|w| String::from_utf8_lossy(w)).collect::<Vec<_>>().join(" ");
        return Ok(vec![format!("--bind={joined}").into()]);
    }
    if d.words.len() == 1 {
        // `--name=value`: a value that starts with '-' stays a value.
        let mut arg = format!("--{}=", d.name).into_bytes();
        arg.extend_from_slice(&d.words[0]);
        return Ok(vec![OsString::from_vec(arg)]);
    }
    let mut out = vec![OsString::from(format!("--{}", d.name))];
    out.extend(d.words.iter().map(|w| OsString::from_vec(w.clone())));
    Ok(out)
}

/// The flag alone through clap, so that a bad value is reported at its own line.
fn check_flag(prog: &OsString, d: &Directive, args: &[OsString]) -> Result<(), Fatal> {
    match Config::try_parse_from(std::iter::once(prog.clone()).chain(args.iter().cloned())) {
        Ok(_) => Ok(()),
        // A flag that needs another (`--kafka-ack-mode` needs `--kafka`): the whole command
        // line's parse judges that.
        Err(e) if e.kind() == clap::error::ErrorKind::MissingRequiredArgument => Ok(()),
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid value").trim_start_matches("error: ");
            Err(Fatal::at(d, in_redis_words(first)))
        }
    }
}

/// A clap value error with its reason in redis-server's words where Redis has them (scripts
/// and operators match on those): `invalid value 'abc' for '--port <PORT>': argument couldn't
/// be parsed into an integer`, `... argument must be between 0 and 65535 inclusive`,
/// `... argument must be a memory value`. Other reasons stay clap's.
fn in_redis_words(message: &str) -> String {
    let Some((head, reason)) = message.rsplit_once(": ") else { return message.to_string() };
    let redis =
        if let Some((lo, hi)) = reason.split_once(" is not in ").and_then(|(_, r)| r.split_once("..=")) {
            format!("argument must be between {lo} and {hi} inclusive")
        } else if matches!(
            reason,
            "invalid digit found in string"
                | "cannot parse integer from empty string"
                | "number too large to fit in target type"
                | "number too small to fit in target type"
        ) {
            "argument couldn't be parsed into an integer".to_string()
        } else if reason.ends_with("is not a size (e.g. 16mb)") {
            "argument must be a memory value".to_string()
        } else {
            return message.to_string();
        };
    format!("{head}: {redis}")
}

/// The lines CONFIG REWRITE writes for a setting's current value (CONFIG GET's form).
pub fn setting_lines(name: &str, value: &str) -> Vec<String> {
    let words = |v: &str| v.split(' ').filter(|w| !w.is_empty()).map(str::to_string).collect::<Vec<_>>();
    match name {
        "save" if value.is_empty() => vec!["save \"\"".into()],
        "save" => words(value).chunks(2).map(|p| format!("save {}", p.join(" "))).collect(),
        "client-output-buffer-limit" => {
            words(value).chunks(4).map(|g| format!("client-output-buffer-limit {}", g.join(" "))).collect()
        }
        // A primary follows nobody: no line.
        "replicaof" if value.is_empty() => Vec::new(),
        "replicaof" | "bind" => vec![format!("{name} {}", words(value).join(" "))],
        _ => vec![format!("{name} {}", quote(value.as_bytes()))],
    }
}

/// CONFIG REWRITE: the file with the lines of each of `settings` (name, current value)
/// replaced (at its first line; its other lines dropped) or, if the file has none, added at
/// its end under a marker line. Every other line stays as it was.
pub fn rewrite(old: &str, settings: &[(String, String)]) -> String {
    const MARKER: &str = "# Generated by CONFIG REWRITE";
    let mut lines: Vec<Option<String>> = old.lines().map(|l| Some(l.to_string())).collect();
    let mut added = Vec::new();
    for (name, value) in settings {
        let name = canonical(name);
        let new = setting_lines(name, value);
        let mut first = None;
        for (i, line) in lines.iter_mut().enumerate() {
            let Some(text) = line.as_deref() else { continue };
            let words = split_args(text.trim().as_bytes()).unwrap_or_default();
            let Some(w) = words.first() else { continue };
            if text.trim_start().starts_with('#') {
                continue;
            }
            let this = String::from_utf8_lossy(w).to_ascii_lowercase();
            if canonical(&this) == name {
                if first.is_none() {
                    first = Some(i);
                }
                *line = None;
            }
        }
        match first {
            Some(i) if !new.is_empty() => lines[i] = Some(new.join("\n")),
            Some(_) => {}
            None => added.extend(new),
        }
    }
    let mut out: Vec<String> = lines.into_iter().flatten().collect();
    if !added.is_empty() {
        if !out.iter().any(|l| l == MARKER) {
            out.push(MARKER.to_string());
        }
        out.extend(added);
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

/// Writes `text` over `path` so that a crash leaves the old file or the new one whole: a
/// temporary file beside it, synced, renamed over it, the directory synced.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.rewrite-{}",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        // Keep the file's permissions and, where this process may, its owner.
        if let Ok(meta) = std::fs::metadata(path) {
            use std::os::unix::fs::MetadataExt;
            std::fs::set_permissions(&tmp, meta.permissions())?;
            let _ = std::os::unix::fs::chown(&tmp, Some(meta.uid()), Some(meta.gid()));
        }
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Option<Vec<String>> {
        split_args(line.as_bytes())
            .map(|w| w.into_iter().map(|w| String::from_utf8_lossy(&w).into_owned()).collect())
    }

    #[test]
    fn splits_as_redis() {
        assert_eq!(words("  port   6380 ").unwrap(), ["port", "6380"]);
        assert_eq!(words(r#"save """#).unwrap(), ["save", ""]);
        assert_eq!(words(r#"a "b c" 'd e'"#).unwrap(), ["a", "b c", "d e"]);
        assert_eq!(words(r#""\x41\n\t\\\"" 'it\'s'"#).unwrap(), ["A\n\t\\\"", "it's"]);
        assert_eq!(words(r#"x"y z"w"#), None, "a closing quote must end the word");
        assert_eq!(words(r#"ab"c d""#).unwrap(), ["abc d"], "a quote may open mid-word");
        assert_eq!(words(r#""open"#), None);
        assert_eq!(words("'open"), None);
        assert_eq!(words("").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn quote_reads_back() {
        for w in [&b""[..], b"plain", b"two words", b"q\"uo\\te", b"\x00\xff\n", b"{title} {listen-addr}"] {
            let line = format!("name {}", quote(w));
            let back = split_args(line.as_bytes()).unwrap();
            assert_eq!(back, vec![b"name".to_vec(), w.to_vec()], "{line}");
        }
    }

    #[test]
    fn rewrite_replaces_drops_and_appends() {
        let old = "# a comment\nport 6380\nsave 900 1\n\nsave 300 10\nslaveof h 1\n";
        let new = rewrite(
            old,
            &[
                ("save".into(), "60 5".into()),
                ("replicaof".into(), String::new()),
                ("slowlog-max-len".into(), "7".into()),
                ("notify-keyspace-events".into(), String::new()),
            ],
        );
        assert_eq!(
            new,
            "# a comment\nport 6380\nsave 60 5\n\n# Generated by CONFIG REWRITE\nslowlog-max-len 7\nnotify-keyspace-events \"\"\n"
        );
        // A second rewrite keeps one marker.
        let again = rewrite(&new, &[("hz".into(), "20".into())]);
        assert_eq!(again.matches("# Generated by CONFIG REWRITE").count(), 1);
        assert!(again.ends_with("hz 20\n"));
        // A setting's alias lines are its lines (the last of them would win at the next start).
        let aliased = rewrite(
            "hash-max-listpack-entries 20\nhash-max-ziplist-entries 21\n",
            &[("hash-max-listpack-entries".into(), "100".into())],
        );
        assert_eq!(aliased, "hash-max-listpack-entries 100\n");
    }
}
