//! DEBUG: DIGEST and DIGEST-VALUE (always allowed: recovery and replication tests, and
//! operators, compare servers with them), and the intrusive subcommands that need
//! `--enable-debug-command`: BATCHES (the last committed batches, from the history sink) and
//! the deliberate crashes CRASH-WRITE / CRASH-READ.

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
    "SLEEP <seconds>",
    "    Stop the server for <seconds> (decimals allowed). Needs --enable-debug-command.",
    "HELP",
    "    Print this help.",
];

const NOT_ALLOWED: &[u8] = b"ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

fn is_local(c: &Conn) -> bool {
    c.unix || c.addr.starts_with("127.") || c.addr.starts_with("[::1]")
}

pub fn debug(s: &mut Server, c: &mut Conn, args: &[&[u8]]) {
    let sub = args[1].to_ascii_uppercase();
    let out = &mut c.out;
    match sub.as_slice() {
        b"HELP" => return super::help(out, HELP),
        b"DIGEST" if args.len() == 2 => {
            return reply::simple(out, engine::util::hex(&digest::dataset_digest(&s.engine.ks)).as_bytes())
        }
        b"DIGEST-VALUE" => {
            reply::array_len(out, args.len() - 2);
            for key in &args[2..] {
                let d = s.engine.ks.get(key).map(|v| digest::value_digest(&v)).unwrap_or([0; 20]);
                reply::simple(out, engine::util::hex(&d).as_bytes());
            }
            return;
        }
        b"BATCHES" | b"CRASH-WRITE" | b"CRASH-READ" | b"SLEEP" => {}
        _ => return engine::errors::unknown_subcommand(out, args[0], args[1]),
    }
    let allowed = match s.cfg.enable_debug_command {
        DebugCommand::Yes => true,
        DebugCommand::Local => is_local(c),
        DebugCommand::No => false,
    };
    if !allowed {
        return reply::error(&mut c.out, NOT_ALLOWED);
    }
    match sub.as_slice() {
        b"BATCHES" => batches(s, c, args),
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
        b"CRASH-WRITE" | b"CRASH-READ" if args.len() == 3 => {
            let spec = if sub == b"CRASH-WRITE" {
                &engine::commands::debug::CRASH_WRITE
            } else {
                &engine::commands::debug::CRASH_READ
            };
            let now = s.clock_ms;
            s.run_engine(spec, args, now, &mut c.out, c.proto, false);
        }
        _ => super::wrong_sub_arity(&mut c.out, args[0], args[1]),
    }
}

/// DEBUG BATCHES [count]: each batch as [origin, first offset, [mutation, ...]], where a
/// mutation is the array of its arguments.
fn batches(s: &mut Server, c: &mut Conn, args: &[&[u8]]) {
    let out = &mut c.out;
    let Some(history) = &s.batch_history else { return reply::array_len(out, 0) };
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
