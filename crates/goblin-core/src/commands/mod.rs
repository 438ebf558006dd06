//! Commands the server runs itself (the table rows marked `Handler::Server` in
//! `engine/src/commands/server.rs`): they need the connection, the other clients or server
//! state. Replies follow Redis 7 byte for byte where Redis has the command.
//!
//! - [`info`]: INFO and the memory/CPU probes it uses.
//! - [`client`]: CLIENT and its subcommands.
//! - [`command`]: COMMAND (COUNT, INFO, DOCS, LIST, GETKEYS), from the engine's table.
//! - [`config`]: CONFIG GET/SET/RESETSTAT.
//! - this file: HELLO, AUTH, SELECT, QUIT, RESET, TIME, ROLE, MEMORY, SHUTDOWN.

pub mod client;
pub mod command;
pub mod config;
pub mod debug;
pub mod info;
pub(crate) mod keyspec;
pub mod migrate;
mod redis_meta;

use crate::conn::{Conn, ReplyMode};
use crate::pubsub::Kind;
use crate::server::Server;
use engine::{errors, util, CommandSpec};
use resp::reply;

/// The NOPERM error for what an ACL check refused, in Redis 7.0's words.
pub(crate) fn noperm(denied: crate::auth::Denied, user: &str, spec: &CommandSpec, args: &[&[u8]]) -> String {
    use crate::auth::Denied;
    // Redis 8's texts (7.x said "this user has no permissions to ...").
    match denied {
        Denied::Command => {
            let name =
                args.get(1).and_then(|a| command::full_subcommand_name(spec.name, a)).unwrap_or(spec.name);
            format!("NOPERM User {user} has no permissions to run the '{name}' command")
        }
        Denied::Key(_) => "NOPERM No permissions to access a key".into(),
        Denied::Channel(_) => "NOPERM No permissions to access a channel".into(),
    }
}

/// Records a refusal of `args` (run by `c`) in the ACL log.
pub(crate) fn log_refusal(
    s: &mut Server,
    c: &Conn,
    spec: &CommandSpec,
    args: &[&[u8]],
    denied: crate::auth::Denied,
    context: crate::auth::Context,
) {
    use crate::auth::Denied;
    let object: &[u8] = match denied {
        Denied::Command => args
            .get(1)
            .and_then(|a| command::full_subcommand_name(spec.name, a))
            .unwrap_or(spec.name)
            .as_bytes(),
        Denied::Key(i) | Denied::Channel(i) => args[i],
    };
    log_acl(s, c, denied.into(), context, object, c.user.as_bytes());
}

/// Adds an ACL log entry for client `c` (its CLIENT INFO line goes with it).
pub(crate) fn log_acl(
    s: &mut Server,
    c: &Conn,
    reason: crate::auth::Reason,
    context: crate::auth::Context,
    object: &[u8],
    username: &[u8],
) {
    let mut info = String::new();
    client::describe(c, &mut info);
    let info = info.trim_end().to_string();
    s.acl_log.add(reason, context, object, username, info, crate::server::now_ms());
}

/// SORT's BY (with a `*` pattern) and GET read keys the data names, which a user may do only
/// with read access to every key (Redis's rule). The error for the first such option, when
/// the options up to it parse; None otherwise (SORT then runs and reports any syntax error).
pub(crate) fn sort_pattern_refusal(spec: &CommandSpec, args: &[&[u8]]) -> Option<&'static [u8]> {
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = args[j];
        if a.eq_ignore_ascii_case(b"asc")
            || a.eq_ignore_ascii_case(b"desc")
            || a.eq_ignore_ascii_case(b"alpha")
        {
        } else if a.eq_ignore_ascii_case(b"limit") && left >= 2 {
            if util::parse_i64(args[j + 1]).is_none() || util::parse_i64(args[j + 2]).is_none() {
                return None;
            }
            j += 2;
        } else if spec.name == "sort" && a.eq_ignore_ascii_case(b"store") && left >= 1 {
            j += 1;
        } else if a.eq_ignore_ascii_case(b"by") && left >= 1 {
            if args[j + 1].contains(&b'*') {
                return Some(b"ERR BY option of SORT denied due to insufficient ACL permissions.");
            }
            j += 1;
        } else if a.eq_ignore_ascii_case(b"get") && left >= 1 {
            return Some(b"ERR GET option of SORT denied due to insufficient ACL permissions.");
        } else {
            return None;
        }
        j += 1;
    }
    None
}

/// Runs server command `spec` (name and arity already checked).
pub fn run(s: &mut Server, c: &mut Conn, slot: usize, spec: &'static CommandSpec, args: &[&[u8]], now: i64) {
    if args.len() >= 2 {
        if let Some(full) = subcommand_name(spec.name, args[1]) {
            c.last_cmd = full;
        }
    }
    let out = &mut c.out;
    match spec.name {
        "info" => info::info(s, c, args),
        "command" => command::command(c, args),
        "client" => client::client(s, c, slot, args),
        "config" => config::config(s, c, args),
        "hello" => hello(s, c, args),
        "auth" => auth(s, c, args),
        "acl" => acl(s, c, args),
        "quit" => {
            reply::ok(out);
            c.close_after_reply = true;
        }
        "reset" => reset(s, c, slot),
        "select" => match util::parse_i64(args[1]) {
            Some(n) if n >= 0 && n < s.engine.databases() as i64 => {
                c.db = n as u32;
                s.engine.select(c.db);
                reply::ok(&mut c.out)
            }
            Some(n) if i32::try_from(n).is_err() => reply::error(out, errors::NOT_AN_INT),
            Some(_) => reply::error(out, errors::DB_INDEX_OUT_OF_RANGE),
            None => reply::error(out, errors::NOT_INTEGER),
        },
        "time" => {
            let micros = s.time_snapshot_us.unwrap_or_else(|| unix_micros(now));
            reply::array_len(out, 2);
            reply::bulk_int(out, micros / 1_000_000);
            reply::bulk_int(out, micros % 1_000_000);
        }
        "role" => s.role_reply(out),
        "cluster" | "readonly" | "readwrite" | "asking" => s.cluster_command(c, args),
        "migrate" => migrate::migrate(s, c, args, now),
        "failover" => s.failover_command(out, args),
        "replicaof" | "slaveof" => {
            s.replicaof_command(out, args);
            // A replica's OOM score differs from a primary's.
            s.refresh_oom_score();
        }
        // There is no append-only file to rewrite: the durable history is the Kafka journal.
        "bgrewriteaof" => reply::error(
            out,
            b"ERR goblin-core keeps no append-only file: its write history is the Kafka journal (--kafka), and SAVE/BGSAVE write snapshots",
        ),
        "goblin.firehose" => s.firehose_subscribe(c, slot),
        "wait" => s.wait_command(c, slot, args),
        "waitaof" => s.waitaof_command(c, slot, args),
        "memory" => memory(s, c, args),
        "monitor" => s.monitor_command(c, slot),
        "slowlog" => s.slowlog_command(c, args),
        "hotkeys" => crate::hotkeys::command(s, c, args),
        "module" => module(s, c, args),
        "lolwut" => {
            // Redis reads VERSION's number, and versions 5 and 6 their sizes, as integers.
            if args.len() >= 3 && args[1].eq_ignore_ascii_case(b"version") {
                let version = util::parse_i64(args[2]);
                let sizes = if matches!(version, Some(5 | 6)) { &args[3..] } else { &[][..] };
                if version.is_none() || sizes.iter().any(|a| util::parse_i64(a).is_none()) {
                    return reply::error(out, errors::NOT_INTEGER);
                }
            }
            // A small piece of art (a goblin's grid), then the version line clients look for.
            let mut art = String::new();
            for row in 0..6 {
                let line: String =
                    (0..24).map(|col| if (row * 7 + col * 3) % 5 < 2 { '\u{2588}' } else { ' ' }).collect();
                art.push_str(line.trim_end());
                art.push('\n');
            }
            art.push_str(&format!(
                "\nGoblin Core ver. {} (Redis ver. {})\n",
                info::GOBLIN_VERSION,
                info::REDIS_VERSION
            ));
            reply::verbatim(&mut c.out, c.proto, b"txt", art.as_bytes());
        }
        "latency" => s.latency_command(c, args),
        "debug" => debug::debug(s, c, args),
        "save" | "bgsave" | "lastsave" => s.save_command(c, spec.name, args),
        // The forked child writes the reply to the socket itself, which a TLS session cannot
        // share: refused there (fetch over the plaintext port or the Unix socket).
        "goblin.dumpworld" if matches!(c.stream, crate::conn::Stream::Tls(_)) => {
            reply::error(out, b"ERR GOBLIN.DUMPWORLD is not available on a TLS connection")
        }
        // Nor a ring's shared memory (the child would write the doorbell socket).
        "goblin.dumpworld" if matches!(c.stream, crate::conn::Stream::Ring(_)) => {
            reply::error(out, b"ERR GOBLIN.DUMPWORLD is not available on a ring connection")
        }
        // Nor RDMA rings (the child would share the parent's queue pair or mapping).
        "goblin.dumpworld" if matches!(c.stream, crate::conn::Stream::Rdma(_)) => {
            reply::error(out, b"ERR GOBLIN.DUMPWORLD is not available on an RDMA connection")
        }
        "goblin.dumpworld" => match args {
            [_] => s.dumpworld(c, slot, false),
            [_, eof] if eof.eq_ignore_ascii_case(b"eof") => s.dumpworld(c, slot, true),
            _ => reply::error(out, engine::errors::SYNTAX),
        },
        // SYNC's child writes the socket too: the same three transports are refused.
        "sync" | "psync"
            if !matches!(c.stream, crate::conn::Stream::Tcp(_) | crate::conn::Stream::Unix(_)) =>
        {
            reply::error(out, b"ERR SYNC is available on TCP and Unix socket connections only")
        }
        // One change of role at a time (FAILOVER's order, as in Redis).
        "sync" | "psync" if s.failover.is_some() => {
            reply::error(out, b"NOMASTERLINK Can't SYNC while failing over")
        }
        // FAILOVER's last step, sent by this server's primary: take over, then serve the PSYNC.
        "psync" if args.len() > 3 && args[3].eq_ignore_ascii_case(b"failover") => {
            if s.psync_failover(c, args[1]) {
                s.rdb_sync(c, slot, Some((args[1], args[2])));
            }
        }
        "sync" | "psync" => s.rdb_sync(c, slot, (spec.name == "psync").then(|| (args[1], args[2]))),
        "replconf" => s.replconf(c, args),
        "goblin.load" => s.goblin_load(c, args[1]),
        "shutdown" => shutdown(s, c, args),
        // UNWATCH can be queued inside MULTI and so run from EXEC (WATCH is refused there).
        "unwatch" => s.unwatch_command(c),
        "watch" => s.watch_command(c, args),
        "subscribe" => s.subscribe(c, slot, Kind::Channel, &args[1..]),
        "psubscribe" => s.subscribe(c, slot, Kind::Pattern, &args[1..]),
        "ssubscribe" => s.subscribe(c, slot, Kind::Shard, &args[1..]),
        "unsubscribe" => s.unsubscribe(c, Kind::Channel, &args[1..]),
        "punsubscribe" => s.unsubscribe(c, Kind::Pattern, &args[1..]),
        "sunsubscribe" => s.unsubscribe(c, Kind::Shard, &args[1..]),
        "publish" | "spublish" => {
            let n = s.publish(c, slot, spec.name == "spublish", args[1], args[2]);
            reply::integer(&mut c.out, n as i64);
        }
        "pubsub" => s.pubsub_command(c, args),
        "eval" => s.eval_command(c, slot, args, false, false, now),
        "evalsha" => s.eval_command(c, slot, args, true, false, now),
        "eval_ro" => s.eval_command(c, slot, args, false, true, now),
        "evalsha_ro" => s.eval_command(c, slot, args, true, true, now),
        "script" => s.script_command(c, args),
        "fcall" => s.fcall_command(c, slot, args, false, now),
        "fcall_ro" => s.fcall_command(c, slot, args, true, now),
        "function" => s.function_command(c, args),
        other => {
            // A row marked Handler::Server that this crate does not know: a bug in the table.
            tracing::error!("server command '{other}' has no implementation");
            reply::error(out, b"ERR command not implemented by this server");
        }
    }
}

/// Subcommands of the container commands, named as CLIENT LIST's `cmd=` shows them.
const SUBCOMMANDS: &[&str] = &[
    "client|id",
    "client|getname",
    "client|setname",
    "client|info",
    "client|list",
    "client|kill",
    "client|setinfo",
    "client|no-evict",
    "client|no-touch",
    "client|reply",
    "client|getredir",
    "acl|list",
    "acl|setuser",
    "acl|deluser",
    "acl|getuser",
    "acl|cat",
    "acl|genpass",
    "acl|log",
    "acl|dryrun",
    "acl|help",
    "acl|load",
    "acl|save",
    "client|tracking",
    "client|trackinginfo",
    "client|caching",
    "client|pause",
    "client|unpause",
    "client|unblock",
    "client|help",
    "config|get",
    "config|set",
    "config|resetstat",
    "config|rewrite",
    "config|help",
    "command|count",
    "command|info",
    "command|docs",
    "command|list",
    "command|getkeys",
    "command|getkeysandflags",
    "command|help",
    "memory|usage",
    "memory|stats",
    "memory|doctor",
    "memory|purge",
    "memory|malloc-stats",
    "memory|help",
    "module|list",
    "module|load",
    "module|unload",
    "module|help",
    "slowlog|get",
    "slowlog|len",
    "slowlog|reset",
    "slowlog|help",
    "latency|latest",
    "latency|history",
    "latency|reset",
    "latency|graph",
    "latency|doctor",
    "latency|histogram",
    "latency|help",
    "pubsub|channels",
    "pubsub|numsub",
    "pubsub|numpat",
    "pubsub|shardchannels",
    "pubsub|shardnumsub",
    "pubsub|help",
    "acl|whoami",
    "acl|users",
    "script|load",
    "script|exists",
    "script|flush",
    "script|kill",
    "script|help",
    "script|debug",
    "function|load",
    "function|delete",
    "function|flush",
    "function|list",
    "function|dump",
    "function|restore",
    "function|stats",
    "function|kill",
    "function|help",
    "hotkeys|start",
    "hotkeys|stop",
    "hotkeys|get",
    "hotkeys|reset",
    "hotkeys|help",
];

/// The container commands of [`SUBCOMMANDS`] (one per subcommand listed).
pub(crate) fn subcommand_containers() -> impl Iterator<Item = &'static str> {
    SUBCOMMANDS.iter().map(|full| full.split('|').next().expect("split yields one piece"))
}

/// The longest `cmd|sub` in [`SUBCOMMANDS`].
const LONGEST_SUBCOMMAND: usize = {
    let (mut i, mut max) = (0, 0);
    while i < SUBCOMMANDS.len() {
        if SUBCOMMANDS[i].len() > max {
            max = SUBCOMMANDS[i].len();
        }
        i += 1;
    }
    max
};

/// `cmd|sub` for a known subcommand (case-insensitive), else None.
pub(crate) fn subcommand_name(cmd: &str, sub: &[u8]) -> Option<&'static str> {
    // Every server command's first argument comes here (EVALSHA's sha, EVAL's script): a
    // long one is no subcommand, without a walk over the whole list.
    if cmd.len() + 1 + sub.len() > LONGEST_SUBCOMMAND {
        return None;
    }
    SUBCOMMANDS.iter().copied().find(|full| {
        full.len() == cmd.len() + 1 + sub.len()
            && full.starts_with(cmd)
            && full.as_bytes()[cmd.len()] == b'|'
            && full.as_bytes()[cmd.len() + 1..].eq_ignore_ascii_case(sub)
    })
}

/// The subcommands of the data commands that are containers. Redis knows each as a command
/// of its own (INFO commandstats and latencystats, CLIENT LIST's `cmd=`), as the server
/// commands' [`SUBCOMMANDS`].
const DATA_SUBCOMMANDS: &[&str] = &[
    "object|encoding",
    "object|refcount",
    "object|idletime",
    "object|freq",
    "object|help",
    "xgroup|create",
    "xgroup|setid",
    "xgroup|destroy",
    "xgroup|createconsumer",
    "xgroup|delconsumer",
    "xgroup|help",
    "xinfo|stream",
    "xinfo|groups",
    "xinfo|consumers",
    "xinfo|help",
];

/// The name a call of data command `spec` goes by: `cmd|sub` for a known subcommand of
/// OBJECT, XGROUP or XINFO, else the command's name. Costs a length test for most commands.
#[inline]
pub(crate) fn data_call_name(spec: &'static CommandSpec, args: &[&[u8]]) -> &'static str {
    let name = spec.name;
    if !matches!(name, "object" | "xgroup" | "xinfo") || args.len() < 2 {
        return name;
    }
    let sub = args[1];
    DATA_SUBCOMMANDS
        .iter()
        .copied()
        .find(|full| {
            full.len() == name.len() + 1 + sub.len()
                && full.starts_with(name)
                && full.as_bytes()[name.len()] == b'|'
                && full.as_bytes()[name.len() + 1..].eq_ignore_ascii_case(sub)
        })
        .unwrap_or(name)
}

/// `ERR wrong number of arguments for '<cmd>|<sub>' command`, as Redis words subcommand arity.
pub(crate) fn wrong_sub_arity(out: &mut Vec<u8>, cmd: &[u8], sub: &[u8]) {
    let mut name = cmd.to_ascii_lowercase();
    name.push(b'|');
    name.extend(sub.iter().map(u8::to_ascii_lowercase));
    errors::wrong_arity(out, &name);
}

/// Checks a subcommand's arity (Redis convention: n exact, -n at least n, counting the command
/// and the subcommand), writing Redis's error if wrong.
pub(crate) fn sub_arity_ok(out: &mut Vec<u8>, args: &[&[u8]], arity: i32) -> bool {
    let ok = if arity >= 0 { args.len() == arity as usize } else { args.len() >= (-arity) as usize };
    if !ok {
        wrong_sub_arity(out, args[0], args[1]);
    }
    ok
}

/// Writes a HELP reply: an array of status lines.
pub(crate) fn help(out: &mut Vec<u8>, lines: &[&str]) {
    reply::array_len(out, lines.len());
    for l in lines {
        reply::simple(out, l.as_bytes());
    }
}

const NOPROTO: &[u8] = b"NOPROTO unsupported protocol version";
const WRONGPASS: &[u8] = b"WRONGPASS invalid username-password pair or user is disabled.";
const AUTH_NO_PASSWORD: &[u8] =
    b"ERR AUTH <password> called without any password configured for the default \
user. Are you sure your configuration is correct?";

pub(crate) const NOAUTH: &[u8] = b"NOAUTH Authentication required.";
const HELLO_NOAUTH: &[u8] = b"NOAUTH HELLO must be called with the client already authenticated, \
otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select \
the RESP protocol version at the same time";

/// Authenticates `c` as `user` if the password is right (see auth.rs); false otherwise, with
/// the connection left as it was. Redis's ACLAuthenticateUser.
/// AUTH's and HELLO's check of `user`'s `password` (`by`: the command as the client sent it,
/// which a failure's ACL log entry names).
fn authenticate(s: &mut Server, c: &mut Conn, by: &[u8], user: &[u8], password: &[u8]) -> bool {
    match s.users.authenticate(user, password) {
        Some(i) => {
            c.user = s.users.get(i).name.clone();
            c.restricted = !s.users.get(i).full_access();
            c.authenticated = true;
            true
        }
        None => {
            let context =
                if c.multi.is_some() { crate::auth::Context::Multi } else { crate::auth::Context::Toplevel };
            log_acl(s, c, crate::auth::Reason::Auth, context, by, user);
            false
        }
    }
}

/// MEMORY STATS: Redis 7.0's fields in its order, from the figures INFO's `memory` section
/// reports (`info::MemoryFigures`). What this server has no counterpart for (a replication
/// backlog, cluster links, an AOF buffer) is 0; ratios are doubles, as in Redis.
fn memory_stats(s: &Server, proto: resp::Proto, out: &mut Vec<u8>) {
    let m = info::MemoryFigures::read(s);
    let ratio = info::MemoryFigures::ratio;
    let keys = s.engine.total_keys() as u64;
    // Every database whose table is allocated, emptied or not (as Redis 7.4 lists them).
    let dbs: Vec<(u32, &store::Keyspace)> = (0..s.engine.databases())
        .map(|db| (db, s.engine.keyspace(db)))
        .filter(|(_, ks)| !ks.is_empty() || ks.table_overhead() > 0)
        .collect();
    let net = m.used.saturating_sub(m.startup);
    let int = |out: &mut Vec<u8>, k: &str, v: i64| {
        reply::bulk(out, k.as_bytes());
        reply::integer(out, v);
    };
    let dbl = |out: &mut Vec<u8>, k: &str, v: f64| {
        reply::bulk(out, k.as_bytes());
        reply::double(out, proto, engine::util::format_f64(v).as_bytes());
    };
    reply::map_len(out, proto, 30 + dbs.len());
    int(out, "peak.allocated", m.peak as i64);
    int(out, "total.allocated", m.used as i64);
    int(out, "startup.allocated", m.startup as i64);
    int(out, "replication.backlog", 0);
    int(out, "clients.slaves", m.clients_replicas as i64);
    int(out, "clients.normal", m.clients_normal as i64);
    int(out, "cluster.links", 0);
    int(out, "aof.buffer", 0);
    int(out, "lua.caches", m.scripts as i64);
    int(out, "functions.caches", s.engine.functions.code_bytes() as i64);
    // One entry per database.
    for (db, ks) in &dbs {
        reply::bulk(out, format!("db.{db}").as_bytes());
        reply::map_len(out, proto, 2);
        int(out, "overhead.hashtable.main", ks.table_overhead() as i64);
        // Deadlines live in the keys' own entries: no second table.
        int(out, "overhead.hashtable.expires", 0);
    }
    // The keyspaces' bucket arrays, the old ones of those rehashing, and how many rehash
    // (Redis 7.4's fields, in its order).
    int(out, "overhead.db.hashtable.lut", dbs.iter().map(|(_, ks)| ks.table_overhead() as i64).sum());
    int(
        out,
        "overhead.db.hashtable.rehashing",
        dbs.iter().map(|(_, ks)| ks.rehashing_overhead() as i64).sum(),
    );
    int(out, "overhead.total", m.overhead as i64);
    int(out, "db.dict.rehashing.count", dbs.iter().filter(|(_, ks)| ks.is_rehashing()).count() as i64);
    int(out, "keys.count", keys as i64);
    int(out, "keys.bytes-per-key", net.checked_div(keys).unwrap_or(0) as i64);
    int(out, "dataset.bytes", m.dataset as i64);
    dbl(out, "dataset.percentage", ratio(m.dataset, net) * 100.0);
    dbl(out, "peak.percentage", ratio(m.used, m.peak) * 100.0);
    int(out, "allocator.allocated", m.allocated as i64);
    int(out, "allocator.active", m.active as i64);
    int(out, "allocator.resident", m.resident as i64);
    dbl(out, "allocator-fragmentation.ratio", ratio(m.active, m.allocated));
    int(out, "allocator-fragmentation.bytes", m.active as i64 - m.allocated as i64);
    dbl(out, "allocator-rss.ratio", ratio(m.resident, m.active));
    int(out, "allocator-rss.bytes", m.resident as i64 - m.active as i64);
    dbl(out, "rss-overhead.ratio", ratio(m.rss, m.resident));
    int(out, "rss-overhead.bytes", m.rss as i64 - m.resident as i64);
    dbl(out, "fragmentation", ratio(m.rss, m.used));
    int(out, "fragmentation.bytes", m.rss as i64 - m.used as i64);
}

/// AUTH [username] password. The one-argument form is the default user's password, refused
/// as a configuration mistake when the default user has none (Redis's wording).
fn auth(s: &mut Server, c: &mut Conn, args: &[&[u8]]) {
    let (user, password) = match args.len() {
        2 if s.users.get(s.users.default_index()).nopass => {
            return reply::error(&mut c.out, AUTH_NO_PASSWORD)
        }
        2 => (crate::auth::DEFAULT_USER.as_bytes(), args[1]),
        3 => (args[1], args[2]),
        _ => return reply::error(&mut c.out, errors::SYNTAX),
    };
    if authenticate(s, c, args[0], user, password) {
        reply::ok(&mut c.out);
    } else {
        reply::error(&mut c.out, WRONGPASS);
    }
}

/// ACL: users, passwords and their command, key and channel rules and selectors (auth.rs),
/// as Redis's ACL reports them; DRYRUN answers the check a command would meet; LOG lists the
/// refusals. Other subcommands get Redis's unknown-subcommand error.
fn acl(s: &mut Server, c: &mut Conn, args: &[&[u8]]) {
    let out = &mut c.out;
    let sub = args[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"whoami" => {
            if sub_arity_ok(out, args, 2) {
                reply::bulk(out, c.user.as_bytes());
            }
        }
        b"users" => {
            if sub_arity_ok(out, args, 2) {
                let names = s.users.names();
                reply::array_len(out, names.len());
                for n in names {
                    reply::bulk(out, n.as_bytes());
                }
            }
        }
        b"list" => {
            if sub_arity_ok(out, args, 2) {
                let lines = s.users.list();
                reply::array_len(out, lines.len());
                for l in lines {
                    reply::bulk(out, l.as_bytes());
                }
            }
        }
        b"setuser" => {
            if !sub_arity_ok(out, args, -3) {
                return;
            }
            let name = String::from_utf8_lossy(args[2]).into_owned();
            let rules: Vec<String> =
                args[3..].iter().map(|r| String::from_utf8_lossy(r).into_owned()).collect();
            let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
            // Subscribers of this user whose channels the new rules no longer allow are
            // closed, as in Redis (this connection after its reply).
            let user = match s.users.staged(&name, &rules) {
                Ok(u) => u,
                Err(e) => return reply::error(out, e.as_bytes()),
            };
            close_conns(s, |conn| {
                *conn.user == *name && conn.pubsub.as_ref().is_some_and(|subs| !user.keeps_subscriber(subs))
            });
            if *c.user == *name && c.pubsub.as_ref().is_some_and(|subs| !user.keeps_subscriber(subs)) {
                c.close_after_reply = true;
            }
            // Connections on this user follow its new rules from their next command.
            let full = user.full_access();
            s.users.put(user);
            reply::ok(out);
            for conn in s.conns.iter_mut().flatten().filter(|conn| *conn.user == *name) {
                conn.restricted = !full;
            }
            if *c.user == *name {
                c.restricted = !full;
            }
        }
        b"load" => {
            if !sub_arity_ok(out, args, 2) {
                return;
            }
            if let Err(e) = s.users.reload() {
                return reply::error(out, e.as_bytes());
            }
            reply::ok(out);
            // Connections go on under their user's new rules; those whose user is gone, or
            // whose subscriptions it no longer allows, are closed (this one after its reply).
            let users = &s.users;
            let verdict = |conn: &Conn| -> Option<bool> {
                let user = users.find(conn.user.as_bytes())?;
                if conn.pubsub.as_ref().is_some_and(|subs| !user.keeps_subscriber(subs)) {
                    return None;
                }
                Some(!user.full_access())
            };
            let mut gone = Vec::new();
            for (slot, conn) in s.conns.iter_mut().enumerate() {
                let Some(conn) = conn else { continue };
                match verdict(conn) {
                    Some(restricted) => conn.restricted = restricted,
                    None => gone.push(slot),
                }
            }
            let mine = verdict(c);
            for slot in gone {
                client::kill_slot(s, slot);
            }
            match mine {
                Some(restricted) => c.restricted = restricted,
                None => c.close_after_reply = true,
            }
        }
        b"save" => {
            if !sub_arity_ok(out, args, 2) {
                return;
            }
            match s.users.save() {
                Ok(()) => reply::ok(out),
                Err(e) => reply::error(out, e.as_bytes()),
            }
        }
        b"deluser" => {
            if !sub_arity_ok(out, args, -3) {
                return;
            }
            let names: Vec<String> =
                args[2..].iter().map(|r| String::from_utf8_lossy(r).into_owned()).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            match s.users.deluser(&names) {
                Ok(n) => {
                    reply::integer(out, n as i64);
                    // Connections authenticated as a removed user are closed, as in Redis (this
                    // one after its reply).
                    close_conns(s, |conn| names.contains(&&*conn.user));
                    if names.contains(&&*c.user) {
                        c.close_after_reply = true;
                    }
                }
                Err(e) => reply::error(out, e.as_bytes()),
            }
        }
        b"getuser" => {
            if !sub_arity_ok(out, args, 3) {
                return;
            }
            let Some(u) = s.users.find(args[2]) else { return reply::null_bulk(out, c.proto) };
            reply::map_len(out, c.proto, 6);
            reply::bulk(out, b"flags");
            let flags = u.flags();
            reply::array_len(out, flags.len());
            for f in flags {
                reply::bulk(out, f.as_bytes());
            }
            reply::bulk(out, b"passwords");
            reply::array_len(out, u.passwords.len());
            for p in &u.passwords {
                reply::bulk(out, crate::auth::hex(p).as_bytes());
            }
            // The root rules, then each selector as a map of the same three fields.
            let texts = u.selector_texts();
            let fields = |out: &mut Vec<u8>, t: &[String; 3]| {
                for (k, v) in [&b"commands"[..], b"keys", b"channels"].into_iter().zip(t) {
                    reply::bulk(out, k);
                    reply::bulk(out, v.as_bytes());
                }
            };
            fields(out, &texts[0]);
            reply::bulk(out, b"selectors");
            reply::array_len(out, texts.len() - 1);
            for t in &texts[1..] {
                reply::map_len(out, c.proto, 3);
                fields(out, t);
            }
        }
        b"cat" => {
            if args.len() > 3 {
                return errors::subcommand_syntax_error(out, args[0], args[1]);
            }
            let specs: Vec<&'static CommandSpec> = engine::command::all().collect();
            match args.get(2) {
                None => {
                    let mut cats: Vec<&str> =
                        specs.iter().flat_map(|s| command::acl_categories(s)).map(|c| &c[1..]).collect();
                    cats.sort_unstable();
                    cats.dedup();
                    reply::array_len(out, cats.len());
                    for cat in cats {
                        reply::bulk(out, cat.as_bytes());
                    }
                }
                Some(cat) => {
                    let want = format!("@{}", String::from_utf8_lossy(cat).to_ascii_lowercase());
                    // A command in the category, and each of its subcommands that is (as Redis:
                    // `client|getname` is @connection, the CLIENT container only @slow).
                    let mut names: Vec<&str> = Vec::new();
                    for s in &specs {
                        if command::acl_categories(s).contains(&want.as_str()) {
                            names.push(s.name);
                        }
                        let subs = command::subcommand_metas(s.name);
                        names.extend(
                            subs.iter().filter(|m| m.categories.contains(&want.as_str())).map(|m| m.name),
                        );
                    }
                    if names.is_empty() {
                        // Redis quotes at most 128 bytes of the name.
                        let mut msg = b"ERR Unknown category '".to_vec();
                        msg.extend_from_slice(&cat[..cat.len().min(128)]);
                        msg.push(b'\'');
                        return reply::error(out, &msg);
                    }
                    reply::array_len(out, names.len());
                    for n in names {
                        reply::bulk(out, n.as_bytes());
                    }
                }
            }
        }
        b"genpass" => {
            if args.len() > 3 {
                return errors::subcommand_syntax_error(out, args[0], args[1]);
            }
            let bits = match args.get(2).map(|a| util::parse_i64(a)) {
                None => 256,
                Some(Some(n)) if (1..=4096).contains(&n) => n as usize,
                Some(None) => return reply::error(out, errors::NOT_INTEGER),
                Some(_) => {
                    return reply::error(
                        out,
                        b"ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
                    )
                }
            };
            let mut bytes = vec![0u8; bits.div_ceil(8)];
            rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut bytes);
            let mut text = crate::auth::hex(&bytes);
            text.truncate(bits.div_ceil(4));
            reply::bulk(out, text.as_bytes());
        }
        // ACL DRYRUN user command [arg ...]: every user may run every command here, so a
        // command that exists and has the right number of arguments is always allowed.
        b"dryrun" => {
            if !sub_arity_ok(out, args, -4) {
                return;
            }
            let Some(user) = s.users.find(args[2]) else {
                let msg = format!("ERR User '{}' not found", String::from_utf8_lossy(args[2]));
                return reply::error(out, msg.as_bytes());
            };
            let Some(spec) = engine::lookup(args[3]) else {
                let msg = format!("ERR Command '{}' not found", String::from_utf8_lossy(args[3]));
                return reply::error(out, msg.as_bytes());
            };
            if !spec.arity_ok(args.len() - 3) {
                let msg = format!("ERR wrong number of arguments for '{}' command", spec.name);
                return reply::error(out, msg.as_bytes());
            }
            let cmd = &args[3..];
            use crate::auth::Denied;
            match user.check(spec, cmd) {
                None => reply::ok(out),
                Some(Denied::Command) => {
                    let name = cmd
                        .get(1)
                        .and_then(|a| command::full_subcommand_name(spec.name, a))
                        .unwrap_or(spec.name);
                    let msg = format!("User {} has no permissions to run the '{name}' command", user.name);
                    reply::bulk(out, msg.as_bytes())
                }
                Some(Denied::Key(i)) => {
                    let msg = format!(
                        "User {} has no permissions to access the '{}' key",
                        user.name,
                        String::from_utf8_lossy(cmd[i])
                    );
                    reply::bulk(out, msg.as_bytes())
                }
                Some(Denied::Channel(i)) => {
                    let msg = format!(
                        "User {} has no permissions to access the '{}' channel",
                        user.name,
                        String::from_utf8_lossy(cmd[i])
                    );
                    reply::bulk(out, msg.as_bytes())
                }
            }
        }
        // ACL LOG [count | RESET]: Redis 7.2's fields (7.0's seven, then the entry's id and
        // times).
        b"log" => {
            if args.len() > 3 {
                return errors::subcommand_syntax_error(out, args[0], args[1]);
            }
            let count = match args.get(2) {
                None => None,
                Some(a) if a.eq_ignore_ascii_case(b"reset") => {
                    s.acl_log.reset();
                    return reply::ok(out);
                }
                // A negative count lists nothing, as in Redis.
                Some(a) => match util::parse_i64(a) {
                    Some(n) => Some(n.max(0) as usize),
                    None => return reply::error(out, errors::NOT_INTEGER),
                },
            };
            let now = crate::server::now_ms();
            let entries: Vec<&crate::auth::LogEntry> = s.acl_log.entries(count).collect();
            reply::array_len(out, entries.len());
            for e in entries {
                reply::map_len(out, c.proto, 10);
                reply::bulk(out, b"count");
                reply::integer(out, e.count as i64);
                reply::bulk(out, b"reason");
                reply::bulk(out, e.reason_name().as_bytes());
                reply::bulk(out, b"context");
                reply::bulk(out, e.context.name().as_bytes());
                reply::bulk(out, b"object");
                reply::bulk(out, &e.object);
                reply::bulk(out, b"username");
                reply::bulk(out, &e.username);
                reply::bulk(out, b"age-seconds");
                let age = crate::scripting::libs::fmt_g((now - e.updated_ms) as f64 / 1000.0, 17);
                reply::double(out, c.proto, age.as_bytes());
                reply::bulk(out, b"client-info");
                reply::bulk(out, e.client_info.as_bytes());
                reply::bulk(out, b"entry-id");
                reply::integer(out, e.id as i64);
                reply::bulk(out, b"timestamp-created");
                reply::integer(out, e.created_ms);
                reply::bulk(out, b"timestamp-last-updated");
                reply::integer(out, e.updated_ms);
            }
        }
        b"help" => help(
            out,
            &[
                "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CAT [<category>]",
                "    List all commands that belong to <category>, or all command categories",
                "    when no category is specified.",
                "DELUSER <username> [<username> ...]",
                "    Delete a list of users.",
                "DRYRUN <username> <command> [<arg> ...]",
                "    Returns whether the user can execute the given command without executing the command.",
                "GETUSER <username>",
                "    Get the user's details.",
                "GENPASS [<bits>]",
                "    Generate a secure 256-bit user password. The optional `bits` argument can",
                "    be used to specify a different size.",
                "LIST",
                "    Show users details in config file format.",
                "LOAD",
                "    Reload users from the ACL file.",
                "LOG [<count> | RESET]",
                "    Show the ACL log entries.",
                "SAVE",
                "    Save the current config to the ACL file.",
                "SETUSER <username> <attribute> [<attribute> ...]",
                "    Create or modify a user with the specified attributes.",
                "USERS",
                "    List all the registered usernames.",
                "WHOAMI",
                "    Return the current connection username.",
                "HELP",
                "    Print this help.",
            ],
        ),
        _ => errors::unknown_subcommand(out, args[0], args[1]),
    }
}

/// Closes the other connections `which` picks (at the end of this loop turn).
fn close_conns(s: &mut Server, which: impl Fn(&Conn) -> bool) {
    let slots: Vec<usize> = s
        .conns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.as_ref().is_some_and(|c| which(c)))
        .map(|(i, _)| i)
        .collect();
    for slot in slots {
        client::kill_slot(s, slot);
    }
}

/// The wall clock in unix microseconds (`fallback_ms` if the clock is before 1970).
pub(crate) fn unix_micros(fallback_ms: i64) -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(fallback_ms * 1000)
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]], in Redis 7.2+'s order: the
/// version (2 or 3), then every option's syntax (and the name's), then the credentials (the
/// last AUTH given), then the name is taken; only when all of them pass does the connection
/// switch protocol. The reply is the server-info map in the protocol now in force (a flat
/// array in RESP2).
fn hello(s: &mut Server, c: &mut Conn, args: &[&[u8]]) {
    let out = &mut c.out;
    let mut proto = None;
    if args.len() >= 2 {
        proto = match util::parse_i64(args[1]) {
            None => return reply::error(out, b"ERR Protocol version is not an integer or out of range"),
            Some(2) => Some(resp::Proto::Resp2),
            Some(3) => Some(resp::Proto::Resp3),
            Some(_) => return reply::error(out, NOPROTO),
        };
    }
    let mut setname: Option<&[u8]> = None;
    let mut credentials: Option<(&[u8], &[u8])> = None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - i - 1;
        if args[i].eq_ignore_ascii_case(b"AUTH") && more >= 2 {
            credentials = Some((args[i + 1], args[i + 2]));
            i += 3;
        } else if args[i].eq_ignore_ascii_case(b"SETNAME") && more >= 1 {
            if !client::valid_name(args[i + 1]) {
                return reply::error(out, client::BAD_NAME);
            }
            setname = Some(args[i + 1]);
            i += 2;
        } else {
            let mut msg = b"ERR Syntax error in HELLO option '".to_vec();
            msg.extend_from_slice(args[i]);
            msg.push(b'\'');
            return reply::error(out, &msg);
        }
    }
    if let Some((user, password)) = credentials {
        if !authenticate(s, c, args[0], user, password) {
            return reply::error(&mut c.out, WRONGPASS);
        }
    }
    // As Redis 7: HELLO itself runs unauthenticated only to authenticate.
    if !c.authenticated && !s.users.default_is_open() {
        return reply::error(&mut c.out, HELLO_NOAUTH);
    }
    if let Some(name) = setname {
        c.name = name.to_vec();
    }
    if let Some(p) = proto {
        c.proto = p;
    }
    let proto = c.proto;
    let out = &mut c.out;
    reply::map_len(out, proto, 7);
    reply::bulk(out, b"server");
    reply::bulk(out, b"redis");
    reply::bulk(out, b"version");
    reply::bulk(out, info::REDIS_VERSION.as_bytes());
    reply::bulk(out, b"proto");
    reply::integer(out, proto.version());
    reply::bulk(out, b"id");
    reply::integer(out, c.id as i64);
    reply::bulk(out, b"mode");
    reply::bulk(out, b"standalone");
    reply::bulk(out, b"role");
    reply::bulk(out, b"master");
    reply::bulk(out, b"modules");
    reply::array_len(out, 0);
}

/// RESET: leave MULTI, unwatch, drop every pub/sub subscription (silently, as Redis does),
/// reply mode on, back to RESP2, drop the name and no-evict/no-touch, back to the default
/// user (unauthenticated if it needs a password), answer `+RESET`.
fn reset(s: &mut Server, c: &mut Conn, _slot: usize) {
    c.user = s.users.get(s.users.default_index()).name.clone();
    c.restricted = !s.users.get(s.users.default_index()).full_access();
    c.authenticated = s.users.default_is_open();
    c.multi = None;
    c.proto = resp::Proto::Resp2;
    s.watches.unwatch_all(c);
    s.pubsub.remove_all(c);
    s.tracking_off(c, _slot);
    c.reply_mode = ReplyMode::On;
    c.name.clear();
    c.no_evict = false;
    c.no_touch = false;
    c.db = 0;
    s.engine.select(0);
    reply::simple(&mut c.out, b"RESET");
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]. Nothing is persisted by this server (Kafka
/// owns history), so every form but ABORT stops the server; the client gets no reply, as in
/// Redis, because the connection closes.
fn shutdown(s: &mut Server, c: &mut Conn, args: &[&[u8]]) {
    let (mut abort, mut save, mut nosave, mut now, mut force) = (false, false, false, false, false);
    for a in &args[1..] {
        let a = a.to_ascii_uppercase();
        match a.as_slice() {
            b"NOSAVE" => nosave = true,
            b"SAVE" => save = true,
            // NOW: no wait for the redis-server replicas (Server::drain_redis_replicas).
            b"NOW" => now = true,
            // FORCE: exit even if the final save fails.
            b"FORCE" => force = true,
            b"ABORT" => abort = true,
            _ => return reply::error(&mut c.out, errors::SYNTAX),
        }
    }
    if abort {
        if args.len() > 2 {
            return reply::error(&mut c.out, errors::SYNTAX);
        }
        if s.shutdown_wait_abort() {
            return reply::ok(&mut c.out);
        }
        return reply::error(&mut c.out, b"ERR No shutdown in progress.");
    }
    if save && nosave {
        return reply::error(&mut c.out, errors::SYNTAX);
    }
    tracing::info!("SHUTDOWN requested by client id={} addr={}", c.id, c.addr);
    match s.shutdown_with(crate::server::ShutdownFlags { save, nosave, now, force }) {
        // While the server waits for its replicas, this client waits with it (shutdown.rs).
        Ok(()) => s.shutdown_wait_join(c.id),
        Err(e) => {
            tracing::error!("{e}");
            reply::error(&mut c.out, b"ERR Errors trying to SHUTDOWN. Check logs.");
        }
    }
}

/// MEMORY USAGE key [SAMPLES n] | STATS | DOCTOR | PURGE | MALLOC-STATS | HELP
fn memory(s: &mut Server, c: &mut Conn, args: &[&[u8]]) {
    let out = &mut c.out;
    let sub = args[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"usage" => {
            if !sub_arity_ok(out, args, -3) {
                return;
            }
            // SAMPLES may repeat (the last wins, as in Redis); a negative count is a syntax
            // error. Sizes here are exact, so the count changes nothing else.
            let mut j = 3;
            while j < args.len() {
                if !(args[j].eq_ignore_ascii_case(b"SAMPLES") && j + 1 < args.len()) {
                    return reply::error(out, errors::SYNTAX);
                }
                match util::parse_i64(args[j + 1]) {
                    None => return reply::error(out, errors::NOT_INTEGER),
                    Some(n) if n < 0 => return reply::error(out, errors::SYNTAX),
                    Some(_) => j += 2,
                }
            }
            let key = args[2];
            let now = crate::server::now_ms();
            if s.engine.ks.is_expired(key, now) {
                return reply::null_bulk(out, c.proto);
            }
            match s.engine.ks.mem_usage(key) {
                Some(n) => reply::integer(out, n as i64),
                None => reply::null_bulk(out, c.proto),
            }
        }
        b"stats" => {
            if !sub_arity_ok(out, args, 2) {
                return;
            }
            memory_stats(s, c.proto, out);
        }
        b"doctor" => {
            if sub_arity_ok(out, args, 2) {
                reply::verbatim(out, c.proto, b"txt", b"Sam, I have no memory problems");
            }
        }
        b"purge" => {
            if sub_arity_ok(out, args, 2) {
                match crate::purge_allocator() {
                    Ok(()) => reply::ok(out),
                    // Redis answers this when jemalloc refuses.
                    Err(_) => reply::error(out, b"ERR Error purging dirty pages"),
                }
            }
        }
        b"malloc-stats" => {
            if sub_arity_ok(out, args, 2) {
                // jemalloc's own statistics report, as Redis prints it (its allocator too).
                let mut text = Vec::new();
                let opts = tikv_jemalloc_ctl::stats_print::Options::default();
                match tikv_jemalloc_ctl::stats_print::stats_print(&mut text, opts) {
                    Ok(()) => reply::verbatim(out, c.proto, b"txt", &text),
                    Err(_) => reply::verbatim(
                        out,
                        c.proto,
                        b"txt",
                        b"Stats not supported for the current allocator",
                    ),
                }
            }
        }
        b"help" => help(
            out,
            &[
                "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DOCTOR",
                "    Return memory problems reports.",
                "MALLOC-STATS",
                "    Return internal statistics report from the memory allocator.",
                "PURGE",
                "    Attempt to purge dirty pages for reclamation by the allocator.",
                "STATS",
                "    Return information about the memory usage of the server.",
                "USAGE <key> [SAMPLES <count>]",
                "    Return memory in bytes used by <key> and its value.",
                "HELP",
                "    Print this help.",
            ],
        ),
        _ => errors::unknown_subcommand(out, args[0], args[1]),
    }
}

const MODULE_NOT_ALLOWED: &[u8] = b"ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

/// MODULE LIST | LOAD | LOADEX | UNLOAD | HELP: goblin-core loads no modules. LOAD, LOADEX
/// and UNLOAD are protected as in Redis (`--enable-module-command`, off by default).
fn module(s: &Server, c: &mut Conn, args: &[&[u8]]) {
    let sub = args[1].to_ascii_lowercase();
    let arity = match sub.as_slice() {
        b"load" | b"loadex" => -3,
        b"unload" => 3,
        _ => 0,
    };
    if arity != 0 {
        if !sub_arity_ok(&mut c.out, args, arity) {
            return;
        }
        if !debug::protected_allowed(s.cfg.enable_module_command, c) {
            return reply::error(&mut c.out, MODULE_NOT_ALLOWED);
        }
    }
    let out = &mut c.out;
    match sub.as_slice() {
        b"list" => {
            if sub_arity_ok(out, args, 2) {
                reply::array_len(out, 0);
            }
        }
        b"load" | b"loadex" => {
            tracing::warn!("MODULE LOAD {}: goblin-core loads no modules", String::from_utf8_lossy(args[2]));
            reply::error(out, b"ERR Error loading the extension. Please check the server logs.")
        }
        b"unload" => reply::error(out, b"ERR Error unloading module: no such module with that name"),
        b"help" => help(
            out,
            &[
                "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "LIST",
                "    Return a list of loaded modules (none: goblin-core loads no modules).",
                "LOAD <path> [<arg> ...]",
                "    Refused: goblin-core loads no modules.",
                "UNLOAD <name>",
                "    Unload a module.",
                "HELP",
                "    Print this help.",
            ],
        ),
        _ => errors::unknown_subcommand(out, args[0], args[1]),
    }
}
