//! DEBUG: DIGEST and DIGEST-VALUE (always allowed: recovery and replication tests, and
//! operators, compare servers with them), and the intrusive subcommands that need
//! `--enable-debug-command`: BATCHES (the last committed batches, from the history sink), the
//! deliberate crashes CRASH-WRITE / CRASH-READ (a panic inside a command) and SEGFAULT /
//! PANIC / ASSERT (the process dies, leaving a crash report: crash.rs), and Redis's test aids.

use crate::config::DebugCommand;
use crate::conn::Conn;
use crate::server::Server;
use engine::digest;
use resp::reply;

const HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "BATCHES [<count>]",
    "    The last committed write batches (origin, first logical offset, mutations), oldest",
    "    first. Needs --enable-debug-command.",
    "CRASH-WRITE <key>",
    "    Crash inside a write: the server stops (fail-stop). Needs --enable-debug-command.",
    "CRASH-READ <key>",
    "    Crash inside a read: the client gets an error. Needs --enable-debug-command.",
    "RELOAD [MERGE] [NOFLUSH] [NOSAVE]",
    "    Save the dataset and load it back (without --load: the RDB file, as Redis; NOSAVE loads",
    "    the file as it is, NOFLUSH into the dataset, MERGE lets the file's keys replace).",
    "    Needs --enable-debug-command.",
    "LOADAOF",
    "    Rebuild the dataset from the canonical commands that recreate it, replayed as a",
    "    journal would be (there is no AOF). Needs --enable-debug-command.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Turn active expiry off or on. Needs --enable-debug-command.",
    "PROTOCOL <type>",
    "    Reply with a value of a RESP type: string, integer, double, bignum, null, array, set,",
    "    map, attrib, push, verbatim, true, false. Needs --enable-debug-command.",
    "OBJECT <key>",
    "    Low level details of a key's value. Needs --enable-debug-command.",
    "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
    "    Take DUMP payloads and RDB files whatever their CRC64 says (every value is still",
    "    checked whole). Needs --enable-debug-command.",
    "SET-DISABLE-DENY-SCRIPTS <0|1>",
    "    Let scripts run the commands normally refused to them (test suites use it).",
    "QUICKLIST-PACKED-THRESHOLD <size>, PAUSE-CRON <0|1>",
    "    Accepted for test suites; they change nothing here.",
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message. Needs --enable-debug-command.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named <prefix>:<num> (prefix 'key'), each valued",
    "    value:<num>, zero-padded or cut to <size> bytes if given; existing keys are left",
    "    as they are. Written as ordinary SETs. Needs --enable-debug-command.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds> (decimals allowed). Needs --enable-debug-command.",
    "CONFIG-REWRITE-FORCE-ALL",
    "    Like CONFIG REWRITE, but writes every setting, default or not. Needs",
    "    --enable-debug-command.",
    "SEGFAULT",
    "    Crash with a memory fault (a crash report is logged). Needs --enable-debug-command.",
    "PANIC, ASSERT",
    "    Fail an internal check: a crash report is logged and the process aborts (exits with",
    "    use-exit-on-panic). Needs --enable-debug-command.",
    "HELP",
    "    Print this help.",
];

const NOT_ALLOWED: &[u8] = b"ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

/// Whether a protected command (DEBUG's intrusive subcommands, MODULE LOAD and UNLOAD) may
/// run for `c` under its `enable-*-command` setting.
pub(crate) fn protected_allowed(setting: DebugCommand, c: &Conn) -> bool {
    match setting {
        DebugCommand::Yes => true,
        DebugCommand::Local => is_local(c),
        DebugCommand::No => false,
    }
}

fn is_local(c: &Conn) -> bool {
    c.unix || c.addr.starts_with("127.") || c.addr.starts_with("[::1]")
}

pub fn debug(s: &mut Server, c: &mut Conn, args: &[&[u8]]) {
    let sub = args[1].to_ascii_uppercase();
    let allowed = protected_allowed(s.cfg.enable_debug_command, c);
    let out = &mut c.out;
    match sub.as_slice() {
        // As Redis, even the help needs the command enabled (DIGEST stays open: the test
        // harnesses and the end-to-end checks compare datasets with it).
        b"HELP" if !allowed => return reply::error(out, NOT_ALLOWED),
        b"HELP" => return super::help(out, HELP),
        b"DIGEST" if args.len() == 2 => {
            return reply::simple(out, engine::util::hex(&digest::databases_digest(&s.engine)).as_bytes())
        }
        b"DIGEST-VALUE" => {
            reply::array_len(out, args.len() - 2);
            for key in &args[2..] {
                let d = s.engine.ks.get(key).map(|v| digest::value_digest(&v)).unwrap_or([0; 20]);
                reply::simple(out, engine::util::hex(&d).as_bytes());
            }
            return;
        }
        b"BATCHES"
        | b"CRASH-WRITE"
        | b"CRASH-READ"
        | b"SLEEP"
        | b"POPULATE"
        | b"CONFIG-REWRITE-FORCE-ALL"
        | b"RELOAD"
        | b"LOADAOF"
        | b"SET-ACTIVE-EXPIRE"
        | b"ERROR"
        | b"PROTOCOL"
        | b"OBJECT"
        | b"QUICKLIST-PACKED-THRESHOLD"
        | b"PAUSE-CRON"
        | b"SET-DISABLE-DENY-SCRIPTS"
        | b"SET-SKIP-CHECKSUM-VALIDATION"
        | b"SEGFAULT"
        | b"PANIC"
        | b"ASSERT" => {}
        // DEBUG is no container command in Redis: its own handler refuses a subcommand it does
        // not know, after the check that the command is enabled at all.
        _ if !allowed => return reply::error(out, NOT_ALLOWED),
        _ => return engine::errors::subcommand_syntax_error(out, args[0], args[1]),
    }
    if !protected_allowed(s.cfg.enable_debug_command, c) {
        return reply::error(&mut c.out, NOT_ALLOWED);
    }
    match sub.as_slice() {
        b"BATCHES" => batches(s, c, args),
        // Deliberate crashes, for the crash report (crash.rs): a real memory fault, and a
        // failed internal check.
        b"SEGFAULT" if args.len() == 2 => crate::crash::segfault(),
        b"PANIC" if args.len() == 2 => crate::crash::assertion_failed(
            &format!("DEBUG PANIC called at Unix time {}", s.clock_ms / 1000),
            std::panic::Location::caller(),
        ),
        b"ASSERT" if args.len() == 2 => {
            crate::crash::assertion_failed("1 == 2", std::panic::Location::caller())
        }
        // The given text as an error reply (clients' tests fake LOADING, READONLY, OOM with it).
        b"ERROR" if args.len() == 3 => {
            let msg: Vec<u8> =
                args[2].iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }).collect();
            reply::error(&mut c.out, &msg);
        }
        b"RELOAD" => {
            let mut o = crate::snapshots::ReloadOptions::default();
            for a in &args[2..] {
                match a.to_ascii_uppercase().as_slice() {
                    b"NOSAVE" => o.nosave = true,
                    b"NOFLUSH" => o.noflush = true,
                    b"MERGE" => o.merge = true,
                    _ => {
                        return reply::error(
                            &mut c.out,
                            b"ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
                        )
                    }
                }
            }
            match s.debug_reload(o) {
                Ok(()) => reply::ok(&mut c.out),
                Err(e) => reply::error(&mut c.out, e.as_bytes()),
            }
        }
        b"LOADAOF" => match s.debug_loadaof() {
            Ok(()) => reply::ok(&mut c.out),
            Err(e) => reply::error(&mut c.out, e.as_bytes()),
        },
        b"SET-ACTIVE-EXPIRE" if args.len() == 3 => {
            s.active_expire_enabled = args[2] != b"0";
            reply::ok(&mut c.out);
        }
        b"SET-SKIP-CHECKSUM-VALIDATION" if args.len() == 3 => {
            engine::rdb::set_skip_checksum_validation(args[2] != b"0");
            reply::ok(&mut c.out)
        }
        b"SET-DISABLE-DENY-SCRIPTS" if args.len() == 3 => {
            crate::scripting::DENY_SCRIPTS_DISABLED.with(|d| d.set(args[2] != b"0"));
            reply::ok(&mut c.out)
        }
        b"QUICKLIST-PACKED-THRESHOLD" | b"PAUSE-CRON" if args.len() == 3 => reply::ok(&mut c.out),
        b"PROTOCOL" if args.len() == 3 => protocol(c, args[2]),
        b"OBJECT" if args.len() == 3 => {
            let Some(v) = s.engine.ks.get(args[2]) else {
                return reply::error(&mut c.out, b"ERR no such key");
            };
            let encoding = v.encoding();
            let bytes = s.engine.ks.mem_usage(args[2]).unwrap_or(0);
            // Redis's LRU fields: the 24-bit clock (seconds) of the last access, and the idle
            // seconds since (0 under an LFU policy, whose counter the field holds instead).
            use store::keyspace::access::{self, AccessMode};
            let now = s.clock_ms;
            let idle_s = match s.engine.ks.access_mode() {
                AccessMode::Lru => access::lru_idle_ms(s.engine.ks.access(args[2]).unwrap_or(0), now) / 1000,
                AccessMode::Lfu { .. } => 0,
            };
            let lru = ((now / 1000) as u64).wrapping_sub(idle_s as u64) & 0xFF_FFFF;
            let mut line = format!(
                "Value at:0x0 refcount:1 encoding:{encoding} serializedlength:{bytes} lru:{lru} lru_seconds_idle:{idle_s}"
            );
            // A list past one node: the quicklist Redis would hold, as its DEBUG OBJECT shows.
            if let (store::ValueRef::List(l), "quicklist") = (v, encoding) {
                let (nodes, size) = l.quicklist_shape();
                let depth = s.inert_config.get("list-compress-depth").map_or("0", String::as_str);
                line.push_str(&format!(
                    " ql_nodes:{nodes} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:{} ql_uncompressed_size:{size}",
                    l.len() as f64 / nodes.max(1) as f64,
                    store::limits::list_max_listpack_size(),
                    u8::from(depth != "0"),
                ));
            }
            reply::simple(&mut c.out, line.as_bytes());
        }
        // The whole server stops, as in Redis: slow-command and latency tooling tests use it.
        b"SLEEP" if args.len() == 3 => {
            match std::str::from_utf8(args[2]).ok().and_then(|t| t.parse::<f64>().ok()) {
                Some(secs) if secs.is_finite() && secs >= 0.0 => {
                    std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(3600.0)));
                    reply::ok(&mut c.out);
                }
                _ => reply::error(&mut c.out, b"ERR value is not a valid float"),
            }
        }
        b"POPULATE" if (3..=5).contains(&args.len()) => populate(s, c, args),
        // CONFIG REWRITE of every setting, default or not (Redis's test of the rewrite).
        b"CONFIG-REWRITE-FORCE-ALL" if args.len() == 2 => match super::config::rewrite(s, true) {
            Ok(()) => reply::ok(&mut c.out),
            Err(e) => reply::error(&mut c.out, e.as_bytes()),
        },
        b"CRASH-WRITE" | b"CRASH-READ" if args.len() == 3 => {
            let spec = if sub == b"CRASH-WRITE" {
                &engine::commands::debug::CRASH_WRITE
            } else {
                &engine::commands::debug::CRASH_READ
            };
            let now = s.clock_ms;
            s.run_engine(spec, args, now, &mut c.out, c.proto, false);
        }
        // DEBUG has no table of subcommands in Redis: a known one with the wrong arguments
        // gets its syntax error.
        _ => engine::errors::subcommand_syntax_error(&mut c.out, b"debug", args[1]),
    }
}

/// DEBUG POPULATE count [prefix] [size]: test data in the selected database, as Redis makes
/// it (`key:0`, `key:1`, ... valued `value:0`, ...; a key that exists is skipped). Unlike
/// Redis's, whose keys reach neither replicas nor the append-only file, each key is written
/// as a `SET ... NX` through the engine, so the journal and the replicas get them like any
/// other write.
fn populate(s: &mut Server, c: &mut Conn, args: &[&[u8]]) {
    // Redis gives one error for a negative number and for one that is not a number at all.
    let positive = |arg: &[u8]| match engine::util::parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n as u64),
        _ => Err(engine::errors::NOT_FLOAT_OR_RANGE),
    };
    let count = match positive(args[2]) {
        Ok(n) => n,
        Err(e) => return reply::error(&mut c.out, e),
    };
    let size = match args.get(4).map(|a| positive(a)).transpose() {
        Ok(size) => size.unwrap_or(0) as usize,
        Err(e) => return reply::error(&mut c.out, e),
    };
    if size as u64 > s.cfg.proto_max_bulk_len {
        return reply::error(&mut c.out, engine::errors::STRING_TOO_LONG);
    }
    if s.follows_upstream() {
        return reply::error(&mut c.out, b"READONLY You can't write against a read only replica.");
    }
    // Redis formats the name as a C string into 128 bytes: the prefix ends at a NUL, and
    // the whole name at 127 bytes.
    let prefix = args.get(3).map_or(&b"key"[..], |p| p.split(|&b| b == 0).next().unwrap_or_default());
    let set = engine::lookup(b"set").expect("SET is in the table");
    let now = s.clock_ms;
    let (mut key, mut value, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..count {
        key.clear();
        key.extend_from_slice(prefix);
        key.extend_from_slice(format!(":{i}").as_bytes());
        key.truncate(127);
        value.clear();
        value.extend_from_slice(format!("value:{i}").as_bytes());
        if size > 0 {
            value.resize(size, 0);
        }
        scratch.clear();
        s.run_engine(set, &[b"SET", &key, &value, b"NX"], now, &mut scratch, resp::Proto::Resp2, false);
    }
    reply::ok(&mut c.out);
}

/// DEBUG PROTOCOL <type>: one value of the RESP type named, in the connection's protocol (a
/// RESP2 client gets each type's RESP2 form), as Redis's test suite expects them.
fn protocol(c: &mut Conn, kind: &[u8]) {
    let proto = c.proto;
    let out = &mut c.out;
    match kind.to_ascii_lowercase().as_slice() {
        b"string" => reply::bulk(out, b"Hello World"),
        b"integer" => reply::integer(out, 12345),
        b"double" => reply::double(out, proto, b"3.141"),
        b"bignum" => {
            let n = b"1234567999999999999999999999999999999";
            if proto.is_resp3() {
                out.push(b'(');
                out.extend_from_slice(n);
                out.extend_from_slice(b"\r\n");
            } else {
                reply::bulk(out, n);
            }
        }
        b"null" => reply::null_bulk(out, proto),
        b"array" => {
            reply::array_len(out, 3);
            for i in 0..3 {
                reply::integer(out, i);
            }
        }
        b"set" => {
            reply::set_len(out, proto, 3);
            for i in 0..3 {
                reply::integer(out, i);
            }
        }
        b"map" => {
            reply::map_len(out, proto, 3);
            for i in 0..3 {
                reply::integer(out, i);
                reply::boolean(out, proto, i == 1);
            }
        }
        b"attrib" => {
            // An attribute (`|`) before the reply in RESP3; RESP2 has none: the reply alone.
            if proto.is_resp3() {
                out.extend_from_slice(b"|1\r\n");
                reply::bulk(out, b"key-popularity");
                reply::array_len(out, 2);
                reply::bulk(out, b"key:123");
                reply::integer(out, 90);
            }
            reply::bulk(out, b"Some real reply following the attribute");
        }
        b"push" => {
            if !proto.is_resp3() {
                return reply::error(out, b"ERR RESP2 is not supported by this command");
            }
            reply::push_len(out, proto, 2);
            reply::bulk(out, b"server-cpu-usage");
            reply::integer(out, 42);
            // The command's own reply follows the push.
            reply::bulk(out, b"Some real reply following the push reply");
        }
        b"true" => reply::boolean(out, proto, true),
        b"false" => reply::boolean(out, proto, false),
        b"verbatim" => reply::verbatim(out, proto, b"txt", b"This is a verbatim\nstring"),
        _ => reply::error(
            out,
            b"ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        ),
    }
}

/// DEBUG BATCHES [count]: each batch as [origin, first offset, [mutation, ...]], where a
/// mutation is the array of its arguments.
fn batches(s: &mut Server, c: &mut Conn, args: &[&[u8]]) {
    let out = &mut c.out;
    let Some(history) = &s.batch_history else {
        return reply::error(
            out,
            b"ERR DEBUG BATCHES keeps no history: start the server with --debug-batch-history yes",
        );
    };
    let count = match args.get(2) {
        None => history.iter().len(),
        Some(a) => match engine::util::parse_i64(a) {
            Some(n) if n >= 0 => n as usize,
            _ => return reply::error(out, engine::errors::NOT_INTEGER),
        },
    };
    let skip = history.iter().len().saturating_sub(count);
    reply::array_len(out, history.iter().len() - skip);
    for b in history.iter().skip(skip) {
        reply::array_len(out, 3);
        reply::bulk(out, b.origin.name().as_bytes());
        reply::integer(out, b.first_offset as i64);
        reply::array_len(out, b.len());
        for m in b.iter() {
            let args: Vec<&[u8]> = m.args().collect();
            reply::bulk_array(out, &args);
        }
    }
}
