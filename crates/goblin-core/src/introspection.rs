//! What the server tells an operator about its own behaviour while it runs: SLOWLOG (commands
//! that took long), LATENCY (latency spikes by event, and per-command latency histograms) and
//! MONITOR (every command, as it executes, streamed to monitoring clients).
//!
//! All three hang off one call in the dispatcher, [`Server::after_command`], made once per
//! executed command (each command of an EXEC on its own, as Redis counts them), with the time
//! commandstats already measured: a command that is not slow and a server with no monitor pay
//! two comparisons.
//!
//! Redis 7 semantics kept (checked against redis-server 7.0.15):
//! - SLOWLOG: entries for commands whose execution took at least `slowlog-log-slower-than`
//!   microseconds (negative: off; 0: every command), newest first, at most `slowlog-max-len`;
//!   at most 32 arguments (the last one then says how many more there were), each cut to 128
//!   bytes with a note of the bytes left out. EXEC is not logged itself: its commands are.
//!   Passwords (AUTH, HELLO .. AUTH) are logged as `(redacted)`.
//! - LATENCY: with `latency-monitor-threshold` > 0 ms, commands at or over it record a sample
//!   under `command` (or `fast-command` for commands flagged fast), and an active expiry
//!   cycle that ran as long under `expire-cycle` (many keys due at once); each event keeps its
//!   all-time maximum and its last 160 samples, one per second (the largest of that second).
//! - MONITOR: a line per executed command, `+<unix s>.<us> [0 <client addr>] "arg" ...`, to every
//!   monitoring client; admin commands (CONFIG, DEBUG, SHUTDOWN ...) and MONITOR itself are not
//!   shown, passwords are redacted, queued commands are shown when EXEC runs them, a blocking
//!   command once, when it arrives.

use crate::conn::Conn;
use crate::server::Server;
use engine::{errors, util, CommandSpec, Flags};
use resp::reply;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Redis's SLOWLOG_ENTRY_MAX_ARGC and SLOWLOG_ENTRY_MAX_STRING.
const SLOWLOG_MAX_ARGS: usize = 32;
const SLOWLOG_MAX_ARG_BYTES: usize = 128;
/// Samples kept per latency event (Redis's LATENCY_TS_LEN).
const LATENCY_SAMPLES: usize = 160;

/// One SLOWLOG entry.
pub struct SlowEntry {
    id: u64,
    /// Unix seconds when the command ended.
    time: i64,
    micros: u64,
    args: Vec<Vec<u8>>,
    client_addr: String,
    client_name: Vec<u8>,
}

/// One latency event's history.
#[derive(Default)]
struct EventHistory {
    /// (unix seconds, milliseconds), oldest first, at most [`LATENCY_SAMPLES`].
    samples: VecDeque<(i64, u64)>,
    max: u64,
}

/// The state behind SLOWLOG, LATENCY and MONITOR, with their settings.
pub struct Introspection {
    /// `slowlog-log-slower-than`, microseconds; negative turns the log off.
    pub slowlog_slower_than: i64,
    /// `slowlog-max-len`.
    pub slowlog_max_len: u64,
    /// `latency-monitor-threshold`, milliseconds; 0 turns the monitor off.
    pub latency_threshold_ms: u64,
    /// `latency-tracking`: each call's duration goes into its command's histogram.
    pub latency_tracking: bool,
    /// `latency-tracking-info-percentiles`: the percentiles INFO latencystats shows.
    pub latency_percentiles: Vec<f64>,
    slowlog: VecDeque<SlowEntry>,
    next_slow_id: u64,
    events: BTreeMap<&'static str, EventHistory>,
    /// Monitoring clients (slot, client id), in the order they sent MONITOR.
    pub monitors: Vec<(usize, u64)>,
}

impl Default for Introspection {
    fn default() -> Self {
        Introspection {
            slowlog_slower_than: 10_000,
            slowlog_max_len: 128,
            latency_threshold_ms: 0,
            latency_tracking: true,
            latency_percentiles: vec![50.0, 99.0, 99.9],
            slowlog: VecDeque::new(),
            next_slow_id: 0,
            events: BTreeMap::new(),
            monitors: Vec::new(),
        }
    }
}

fn unix_now() -> Duration {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default()
}

/// Which arguments of a command are passwords, shown as `(redacted)` by SLOWLOG and MONITOR:
/// every argument of AUTH, the two after `AUTH` in HELLO.
fn redacted(name: &str, args: &[&[u8]], i: usize) -> bool {
    match name {
        "auth" => i >= 1,
        "hello" => args
            .iter()
            .enumerate()
            .any(|(j, a)| a.eq_ignore_ascii_case(b"auth") && j >= 2 && (i == j + 1 || i == j + 2)),
        _ => false,
    }
}

impl Introspection {
    /// Records a latency sample for `event` if the monitor is on and `ms` reaches its
    /// threshold.
    pub fn latency_sample(&mut self, event: &'static str, ms: u64) {
        if self.latency_threshold_ms == 0 || ms < self.latency_threshold_ms {
            return;
        }
        let now = unix_now().as_secs() as i64;
        let h = self.events.entry(event).or_default();
        h.max = h.max.max(ms);
        match h.samples.back_mut() {
            Some(last) if last.0 == now => last.1 = last.1.max(ms),
            _ => {
                if h.samples.len() == LATENCY_SAMPLES {
                    h.samples.pop_front();
                }
                h.samples.push_back((now, ms));
            }
        }
    }

    pub(crate) fn slowlog_push(&mut self, spec: &CommandSpec, args: &[&[u8]], micros: u64, conn: &Conn) {
        // A log of length 0 is off, as in Redis: nothing is built and no entry id is used up,
        // so the ids after it are the ones Redis would show.
        if self.slowlog_max_len == 0 {
            return;
        }
        let shown = args.len().min(SLOWLOG_MAX_ARGS);
        let mut kept = Vec::with_capacity(shown);
        for (i, a) in args.iter().take(shown).enumerate() {
            if i == SLOWLOG_MAX_ARGS - 1 && args.len() > SLOWLOG_MAX_ARGS {
                kept.push(format!("... ({} more arguments)", args.len() - SLOWLOG_MAX_ARGS + 1).into_bytes());
            } else if redacted(spec.name, args, i) {
                kept.push(b"(redacted)".to_vec());
            } else if a.len() > SLOWLOG_MAX_ARG_BYTES {
                let mut v = a[..SLOWLOG_MAX_ARG_BYTES].to_vec();
                v.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - SLOWLOG_MAX_ARG_BYTES).as_bytes(),
                );
                kept.push(v);
            } else {
                kept.push(a.to_vec());
            }
        }
        self.slowlog.push_front(SlowEntry {
            id: self.next_slow_id,
            time: unix_now().as_secs() as i64,
            micros,
            args: kept,
            client_addr: conn.addr.clone(),
            client_name: conn.name.clone(),
        });
        self.next_slow_id += 1;
        self.slowlog.truncate(self.slowlog_max_len as usize);
    }
}

/// A MONITOR line for `args`, as Redis formats it: quoted arguments with C-style escapes.
fn monitor_line(db: u32, client: &str, name: &str, args: &[&[u8]]) -> Vec<u8> {
    let t = unix_now();
    let mut line = format!("+{}.{:06} [{db} {}]", t.as_secs(), t.subsec_micros(), client).into_bytes();
    for (i, a) in args.iter().enumerate() {
        line.push(b' ');
        quote(&mut line, if redacted(name, args, i) { b"(redacted)" } else { a });
    }
    line.extend_from_slice(b"\r\n");
    line
}

/// Appends `bytes` in double quotes with C-style escapes for quotes, backslashes and
/// unprintable bytes, as Redis quotes a value for people to read (MONITOR, the Lua debugger).
pub(crate) fn quote(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// The client address MONITOR prints: `ip:port`, or `unix:<path>` for a Unix-socket client.
fn monitor_addr(conn: &Conn) -> String {
    if conn.unix {
        format!("unix:{}", conn.laddr.trim_end_matches(":0"))
    } else {
        conn.addr.clone()
    }
}

/// The commands whose MONITOR line is sent before they run ([`Server::monitor_before`]).
fn runs_script(spec: &CommandSpec) -> bool {
    matches!(spec.name, "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro")
}

/// Commands MONITOR does not show: admin commands and the ones Redis flags skip-monitor.
fn hidden_from_monitor(spec: &CommandSpec) -> bool {
    spec.flags.has(Flags::ADMIN) || matches!(spec.name, "config" | "monitor" | "goblin.firehose")
}

impl Server {
    /// After one command executed (not for requests refused before running): SLOWLOG,
    /// LATENCY and MONITOR. `took` is the execution time commandstats measured.
    #[inline]
    pub(crate) fn after_command(
        &mut self,
        conn: &Conn,
        spec: &'static CommandSpec,
        args: &[&[u8]],
        took: Duration,
    ) {
        let micros = took.as_micros() as u64;
        let ins = &mut self.introspection;
        // A command that blocked enters the slow log when it is served (`retry_parked`), once,
        // as Redis logs it: not also now.
        let blocked = conn.parked.is_some();
        if ins.slowlog_slower_than >= 0
            && micros >= ins.slowlog_slower_than as u64
            && spec.name != "exec"
            && !blocked
        {
            ins.slowlog_push(spec, args, micros, conn);
        }
        if ins.latency_threshold_ms > 0 {
            let event = if spec.flags.has(Flags::FAST) { "fast-command" } else { "command" };
            ins.latency_sample(event, micros / 1000);
        }
        if !ins.monitors.is_empty() && !hidden_from_monitor(spec) && !runs_script(spec) {
            let line = monitor_line(conn.db, &monitor_addr(conn), spec.name, args);
            self.feed_monitors(conn.id, &line);
        }
    }

    /// A command a script runs: shown as the script's (`[0 lua]`) to every monitor.
    pub(crate) fn feed_monitors_from_script(&mut self, spec: &CommandSpec, args: &[&[u8]]) {
        if !self.introspection.monitors.is_empty() && !hidden_from_monitor(spec) {
            let line = monitor_line(self.engine.db(), "lua", spec.name, args);
            self.feed_monitors(0, &line);
        }
    }

    /// Before a script-running command executes: its own line goes out first, so that the
    /// lines of the commands it runs follow it, as Redis shows them.
    pub(crate) fn monitor_before(&mut self, conn: &Conn, spec: &'static CommandSpec, args: &[&[u8]]) {
        if !self.introspection.monitors.is_empty() && runs_script(spec) {
            let line = monitor_line(conn.db, &monitor_addr(conn), spec.name, args);
            self.feed_monitors(conn.id, &line);
        }
    }

    /// Sends `line` to every monitoring client but `from` (a monitor's own commands reach the
    /// other monitors). A monitor past the output limit is closed like any client.
    pub(crate) fn feed_monitors(&mut self, from: u64, line: &[u8]) {
        let monitors = std::mem::take(&mut self.introspection.monitors);
        let mut alive = Vec::with_capacity(monitors.len());
        for (slot, id) in monitors {
            let Some(mut m) = self.conns.get_mut(slot).and_then(Option::take) else { continue };
            if m.id == id {
                if id != from && !m.close_now {
                    m.out.extend_from_slice(line);
                    self.check_output_limit(&mut m);
                }
                alive.push((slot, id));
            }
            self.conns[slot] = Some(m);
            self.queue_write(slot);
        }
        // Monitors that sent MONITOR while the list was out are kept too.
        alive.append(&mut self.introspection.monitors);
        self.introspection.monitors = alive;
    }

    /// MONITOR: the connection starts receiving every command the server executes.
    pub(crate) fn monitor_command(&mut self, conn: &mut Conn, slot: usize) {
        if self.in_exec {
            return reply::error(&mut conn.out, b"ERR MONITOR isn't allowed for DENY BLOCKING client");
        }
        if conn.monitor || conn.firehose.is_some() {
            return; // already monitoring (Redis ignores the second MONITOR, without a reply)
        }
        conn.monitor = true;
        self.introspection.monitors.push((slot, conn.id));
        reply::ok(&mut conn.out);
    }

    /// SLOWLOG GET [count] | LEN | RESET | HELP.
    pub(crate) fn slowlog_command(&mut self, conn: &mut Conn, args: &[&[u8]]) {
        use crate::commands::{help, sub_arity_ok};
        let out = &mut conn.out;
        let log = &mut self.introspection.slowlog;
        match args[1].to_ascii_lowercase().as_slice() {
            b"get" => {
                if args.len() > 3 {
                    return crate::commands::wrong_sub_arity(out, args[0], args[1]);
                }
                let count = match args.get(2).map(|a| util::parse_i64(a)) {
                    None => 10,
                    Some(Some(n)) if n >= -1 => n,
                    Some(_) => {
                        return reply::error(out, b"ERR count should be greater than or equal to -1");
                    }
                };
                let n = if count == -1 { log.len() } else { log.len().min(count as usize) };
                reply::array_len(out, n);
                for e in log.iter().take(n) {
                    reply::array_len(out, 6);
                    reply::integer(out, e.id as i64);
                    reply::integer(out, e.time);
                    reply::integer(out, e.micros as i64);
                    reply::bulk_array(out, &e.args);
                    reply::bulk(out, e.client_addr.as_bytes());
                    reply::bulk(out, &e.client_name);
                }
            }
            b"len" => {
                if sub_arity_ok(out, args, 2) {
                    reply::integer(out, log.len() as i64);
                }
            }
            b"reset" => {
                if sub_arity_ok(out, args, 2) {
                    log.clear();
                    reply::ok(out);
                }
            }
            b"help" => help(
                out,
                &[
                    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "GET [<count>]",
                    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                    "    Entries are made of:",
                    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
                    "    client name",
                    "LEN",
                    "    Return the length of the slowlog.",
                    "RESET",
                    "    Reset the slowlog.",
                    "HELP",
                    "    Print this help.",
                ],
            ),
            _ => errors::unknown_subcommand(out, args[0], args[1]),
        }
    }

    /// LATENCY LATEST | HISTORY event | RESET [event ...] | GRAPH event | DOCTOR |
    /// HISTOGRAM [command ...] | HELP.
    pub(crate) fn latency_command(&mut self, conn: &mut Conn, args: &[&[u8]]) {
        use crate::commands::{help, sub_arity_ok};
        let proto = conn.proto;
        let out = &mut conn.out;
        let ins = &mut self.introspection;
        match args[1].to_ascii_lowercase().as_slice() {
            b"latest" => {
                if !sub_arity_ok(out, args, 2) {
                    return;
                }
                reply::array_len(out, ins.events.len());
                for (name, h) in &ins.events {
                    let (t, ms) = h.samples.back().copied().unwrap_or((0, 0));
                    reply::array_len(out, 4);
                    reply::bulk(out, name.as_bytes());
                    reply::integer(out, t);
                    reply::integer(out, ms as i64);
                    reply::integer(out, h.max as i64);
                }
            }
            b"history" => {
                if !sub_arity_ok(out, args, 3) {
                    return;
                }
                let name = String::from_utf8_lossy(args[2]);
                match ins.events.get(name.as_ref()) {
                    None => reply::array_len(out, 0),
                    Some(h) => {
                        reply::array_len(out, h.samples.len());
                        for (t, ms) in &h.samples {
                            reply::array_len(out, 2);
                            reply::integer(out, *t);
                            reply::integer(out, *ms as i64);
                        }
                    }
                }
            }
            b"reset" => {
                let n = if args.len() == 2 {
                    let n = ins.events.len();
                    ins.events.clear();
                    n
                } else {
                    let mut n = 0;
                    for a in &args[2..] {
                        n += ins.events.remove(String::from_utf8_lossy(a).as_ref()).is_some() as usize;
                    }
                    n
                };
                reply::integer(out, n as i64);
            }
            b"graph" => {
                if !sub_arity_ok(out, args, 3) {
                    return;
                }
                let name = String::from_utf8_lossy(args[2]).into_owned();
                match ins.events.get(name.as_str()) {
                    Some(h) if !h.samples.is_empty() => {
                        reply::verbatim(out, proto, b"txt", graph(&name, h).as_bytes());
                    }
                    _ => reply::error(out, format!("ERR No samples available for event '{name}'").as_bytes()),
                }
            }
            b"doctor" => {
                if sub_arity_ok(out, args, 2) {
                    let text = doctor(ins);
                    reply::verbatim(out, proto, b"txt", text.as_bytes());
                }
            }
            b"histogram" => self.stats.cmds.latency_histograms(out, proto, &args[2..]),
            b"help" => help(
                out,
                &[
                    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "DOCTOR",
                    "    Return a human readable latency analysis report.",
                    "GRAPH <event>",
                    "    Return an ASCII latency graph for the <event> class.",
                    "HISTORY <event>",
                    "    Return time-latency samples for the <event> class.",
                    "LATEST",
                    "    Return the latest latency samples for all events.",
                    "RESET [<event> ...]",
                    "    Reset latency data of one or more <event> classes.",
                    "    (default: reset all data for all event classes)",
                    "HISTOGRAM [COMMAND ...]",
                    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
                    "    If no commands are specified then all histograms are replied.",
                    "HELP",
                    "    Print this help.",
                ],
            ),
            _ => errors::unknown_subcommand(out, args[0], args[1]),
        }
    }
}

/// LATENCY GRAPH: a header with the event's range, then one column per sample (oldest left),
/// its height proportional to the sample between the lowest and highest, and under each
/// column how long ago it was taken.
fn graph(name: &str, h: &EventHistory) -> String {
    const ROWS: u64 = 4;
    let high = h.samples.iter().map(|s| s.1).max().unwrap_or(0);
    let low = h.samples.iter().map(|s| s.1).min().unwrap_or(0);
    let mut text = format!("{name} - high {high} ms, low {low} ms (all time high {} ms)\n", h.max);
    text.push_str(&"-".repeat(80));
    text.push('\n');
    let now = unix_now().as_secs() as i64;
    let level = |ms: u64| if high == low { ROWS } else { 1 + (ms - low) * (ROWS - 1) / (high - low) };
    for row in (1..=ROWS).rev() {
        let line: String =
            h.samples.iter().map(|s| if level(s.1) >= row { '#' } else { ' ' }).collect::<String>();
        text.push_str(line.trim_end());
        text.push('\n');
    }
    // Each column's age, printed vertically: "12s" reads top to bottom.
    let ages: Vec<String> = h
        .samples
        .iter()
        .map(|s| {
            let age = (now - s.0).max(0);
            if age < 60 {
                format!("{age}s")
            } else if age < 3600 {
                format!("{}m", age / 60)
            } else {
                format!("{}h", age / 3600)
            }
        })
        .collect();
    let depth = ages.iter().map(|a| a.len()).max().unwrap_or(0);
    for i in 0..depth {
        let line: String = ages.iter().map(|a| a.as_bytes().get(i).map_or(' ', |&b| b as char)).collect();
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// LATENCY DOCTOR: per event, what was seen, and what usually causes it here.
fn doctor(ins: &Introspection) -> String {
    if ins.latency_threshold_ms == 0 && ins.events.is_empty() {
        return "The latency monitor is off (latency-monitor-threshold is 0): nothing was measured.\n\
                Turn it on with CONFIG SET latency-monitor-threshold <milliseconds>.\n"
            .into();
    }
    if ins.events.is_empty() {
        return format!(
            "No event reached the latency-monitor-threshold of {} ms since the last reset.\n",
            ins.latency_threshold_ms
        );
    }
    let mut text = format!("Latency events at or over {} ms:\n\n", ins.latency_threshold_ms);
    for (i, (name, h)) in ins.events.iter().enumerate() {
        let n = h.samples.len().max(1) as u64;
        let avg = h.samples.iter().map(|s| s.1).sum::<u64>() / n;
        text.push_str(&format!(
            "{}. {name}: {} latency spikes (average {avg} ms, worst {} ms).\n",
            i + 1,
            h.samples.len(),
            h.max
        ));
    }
    text.push_str("\nAdvice:\n");
    if ins.events.contains_key("command") || ins.events.contains_key("fast-command") {
        text.push_str(
            "- Slow commands: see SLOWLOG GET. Commands over whole collections (KEYS, SMEMBERS, \
             LRANGE 0 -1, SORT ...) take time in proportion to their size; the server runs one \
             command at a time, so every other client waits.\n",
        );
    }
    if ins.events.contains_key("expire-cycle") {
        text.push_str("- Active expiry: many keys expiring at the same moment; spread their deadlines.\n");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monitor_lines_quote_and_escape_like_redis() {
        let line = monitor_line(0, "127.0.0.1:5", "set", &[b"set", b"k\"\\", b"a\r\n\t\x07\x08\x01\xff "]);
        let text = String::from_utf8(line).unwrap();
        assert!(text.starts_with('+'));
        assert!(
            text.ends_with(" [0 127.0.0.1:5] \"set\" \"k\\\"\\\\\" \"a\\r\\n\\t\\a\\b\\x01\\xff \"\r\n"),
            "{text}"
        );
    }

    #[test]
    fn passwords_are_redacted() {
        let args: [&[u8]; 6] = [b"hello", b"3", b"AUTH", b"u", b"p", b"SETNAME"];
        let shown: Vec<bool> = (0..6).map(|i| redacted("hello", &args, i)).collect();
        assert_eq!(shown, [false, false, false, true, true, false]);
        assert!(redacted("auth", &[b"auth", b"pw"], 1));
        assert!(!redacted("set", &[b"set", b"k", b"v"], 2));
    }

    #[test]
    fn latency_keeps_one_sample_per_second_and_the_all_time_max() {
        let mut ins = Introspection { latency_threshold_ms: 5, ..Default::default() };
        ins.latency_sample("command", 3); // under the threshold
        ins.latency_sample("command", 7);
        ins.latency_sample("command", 9);
        let h = &ins.events["command"];
        assert!(h.samples.len() <= 2, "same second: merged");
        assert_eq!(h.max, 9);
        assert_eq!(h.samples.back().unwrap().1, 9);
        let g = graph("command", h);
        assert!(g.starts_with("command - high 9 ms"), "{g}");
    }
}
