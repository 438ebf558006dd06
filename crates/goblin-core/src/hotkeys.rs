//! HOTKEYS (Redis 8.6): which keys take the server's time and network during a tracking session.
//!
//! `HOTKEYS START METRICS n [CPU] [NET] [COUNT k] [DURATION s] [SAMPLE ratio]` starts a session;
//! `STOP` ends it and keeps its results; `GET` answers them (while running or after); `RESET`
//! frees them. While a session runs, every command that names keys adds its time (the same
//! clock reads commandstats takes) and its bytes (request in, reply out) to the session's
//! totals, and, sampled with probability 1/ratio, to its keys, split evenly among them. `GET`
//! ranks the top k keys per metric.
//!
//! Per-key sums live in a bounded table (`Tally`): at twice its capacity it keeps the heaviest
//! half, so the memory of a session is bounded whatever the keyspace, and a key that is hot
//! for the session stays (a key dropped early and hot later restarts from its later share;
//! the ranking is approximate, as Redis's probabilistic structure is). SLOTS is refused: there
//! is no cluster mode here.
//!
//! Error texts: Redis's tests show parts of them (`METRICS parameter is required`, `COUNT must
//! be between 1 and 64`, ...); the rest of each text is ours.

use crate::conn::Conn;
use crate::server::Server;
use engine::CommandSpec;
use resp::reply;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Keys kept per metric while a session runs (the table grows to twice this, then halves).
const TALLY_CAPACITY: usize = 4096;

/// A key -> weight table of bounded size (see the module comment).
#[derive(Default)]
struct Tally {
    weights: HashMap<Vec<u8>, u64>,
}

impl Tally {
    fn add(&mut self, key: &[u8], w: u64) {
        match self.weights.get_mut(key) {
            Some(v) => *v += w,
            None => {
                if self.weights.len() >= 2 * TALLY_CAPACITY {
                    self.prune();
                }
                self.weights.insert(key.to_vec(), w);
            }
        }
    }

    /// Keeps the heaviest TALLY_CAPACITY keys (a linear selection, not a sort).
    fn prune(&mut self) {
        let mut all: Vec<(Vec<u8>, u64)> = self.weights.drain().collect();
        all.select_nth_unstable_by(TALLY_CAPACITY, |a, b| b.1.cmp(&a.1));
        all.truncate(TALLY_CAPACITY);
        self.weights.extend(all);
    }

    /// The `k` heaviest keys, heaviest first (ties by key, for a stable answer).
    fn top(&self, k: usize) -> Vec<(&[u8], u64)> {
        let mut all: Vec<(&[u8], u64)> = self.weights.iter().map(|(k, v)| (k.as_slice(), *v)).collect();
        all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        all.truncate(k);
        all
    }
}

/// One tracking session, running or stopped.
struct Session {
    cpu: bool,
    net: bool,
    k: usize,
    sample_ratio: u64,
    /// DURATION: the session stops itself then.
    stop_at: Option<Instant>,
    started: Instant,
    started_unix_ms: i64,
    /// Set when the session stopped: its length.
    stopped_after: Option<Duration>,
    /// Process CPU (user, system) at the start, and at the stop once stopped.
    cpu_at_start: (f64, f64),
    cpu_at_stop: Option<(f64, f64)>,
    /// Every command's time (ns: a fast command takes less than a microsecond) and bytes
    /// while the session ran.
    all_ns: u64,
    all_bytes: u64,
    /// The sampled commands' bytes (`total-net-bytes`).
    sampled_bytes: u64,
    by_cpu: Tally,
    by_net: Tally,
    /// Sampling: a cheap xorshift, seeded from the start time.
    rng: u64,
}

impl Session {
    fn running(&self) -> bool {
        self.stopped_after.is_none()
    }

    /// Stops the session (at its DURATION's end, if that passed unseen).
    fn stop(&mut self) {
        if self.running() {
            let cap = self.stop_at.map_or(Duration::MAX, |t| t.duration_since(self.started));
            self.stopped_after = Some(self.started.elapsed().min(cap));
            self.cpu_at_stop = Some(process_cpu());
        }
    }

    fn sampled(&mut self) -> bool {
        if self.sample_ratio <= 1 {
            return true;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng.is_multiple_of(self.sample_ratio)
    }
}

/// The server's HOTKEYS state: no session yet, one running, or the last one's results.
#[derive(Default)]
pub struct Hotkeys {
    session: Option<Session>,
}

/// (user, system) CPU seconds of the process.
fn process_cpu() -> (f64, f64) {
    // SAFETY: getrusage fills the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime), secs(ru.ru_stime))
}

impl Hotkeys {
    /// True while a session runs (the per-command hook's one test when none does).
    #[inline]
    pub fn tracking(&self) -> bool {
        self.session.as_ref().is_some_and(Session::running)
    }

    /// After a command ran during a session: its time and bytes, to the totals and (sampled)
    /// to its keys (a command without keys changes only the totals). The keys are looked for
    /// only when the command is sampled.
    pub fn record(&mut self, spec: &'static CommandSpec, args: &[&[u8]], took: Duration, reply_bytes: usize) {
        let Some(s) = self.session.as_mut().filter(|s| s.running()) else { return };
        if s.stop_at.is_some_and(|t| Instant::now() >= t) {
            return s.stop();
        }
        // EXEC's time is its queued commands', each recorded on its own already.
        if spec.name == "exec" {
            return;
        }
        let ns = took.as_nanos() as u64;
        let bytes = (request_bytes(args) + reply_bytes) as u64;
        s.all_ns += ns;
        s.all_bytes += bytes;
        if !s.sampled() {
            return;
        }
        let keys = command_keys(spec, args);
        if keys.is_empty() {
            return;
        }
        s.sampled_bytes += bytes;
        let n = keys.len() as u64;
        for k in keys {
            if s.cpu {
                s.by_cpu.add(k, ns.div_ceil(n));
            }
            if s.net {
                s.by_net.add(k, bytes.div_ceil(n));
            }
        }
    }
}

/// The bytes a request took on the wire in RESP (what the client sent for it, give or take an
/// inline form): `*n`, then `$len` and the bytes of each argument.
pub fn request_bytes(args: &[&[u8]]) -> usize {
    let digits = |n: usize| n.checked_ilog10().unwrap_or(0) as usize + 1;
    3 + digits(args.len()) + args.iter().map(|a| 5 + digits(a.len()) + a.len()).sum::<usize>()
}

/// HOTKEYS START | STOP | GET | RESET | HELP
pub fn command(s: &mut Server, c: &mut Conn, args: &[&[u8]]) {
    use crate::commands::{help, sub_arity_ok};
    let out = &mut c.out;
    let hk = &mut s.hotkeys;
    if let Some(sess) = hk.session.as_mut() {
        if sess.running() && sess.stop_at.is_some_and(|t| Instant::now() >= t) {
            sess.stop();
        }
    }
    match args[1].to_ascii_lowercase().as_slice() {
        b"start" => match parse_start(&args[2..]) {
            Err(e) => reply::error(out, e.as_bytes()),
            Ok(_) if hk.tracking() => reply::error(out, b"ERR hotkey tracking session already in progress"),
            Ok(sess) => {
                hk.session = Some(sess);
                reply::ok(out);
            }
        },
        b"stop" => {
            if sub_arity_ok(out, args, 2) {
                match hk.session.as_mut().filter(|s| s.running()) {
                    Some(sess) => {
                        sess.stop();
                        reply::ok(out);
                    }
                    None => reply::error(out, b"ERR no hotkey tracking session in progress"),
                }
            }
        }
        b"reset" => {
            if sub_arity_ok(out, args, 2) {
                if hk.tracking() {
                    reply::error(out, b"ERR hotkey tracking session in progress, stop tracking first");
                } else {
                    hk.session = None;
                    reply::ok(out);
                }
            }
        }
        b"get" => {
            if sub_arity_ok(out, args, 2) {
                match &hk.session {
                    None => reply::null_array(out, c.proto),
                    Some(sess) => {
                        // One element per node, as a cluster-wide answer has: here, one.
                        reply::array_len(out, 1);
                        get_reply(out, c.proto, sess);
                    }
                }
            }
        }
        b"help" => help(
            out,
            &[
                "HOTKEYS <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "START METRICS <count> [CPU] [NET] [COUNT <k>] [DURATION <seconds>] [SAMPLE <ratio>]",
                "    Start tracking the keys that take the most CPU time and/or network bytes.",
                "STOP",
                "    Stop tracking; the results stay until RESET.",
                "GET",
                "    Return the session's totals and its top keys per metric.",
                "RESET",
                "    Free the results of a stopped session.",
                "HELP",
                "    Print this help.",
            ],
        ),
        _ => engine::errors::unknown_subcommand(out, args[0], args[1]),
    }
}

/// Parses START's options into a new session (not started yet).
fn parse_start(opts: &[&[u8]]) -> Result<Session, String> {
    let int = |a: &[u8]| engine::util::parse_i64(a);
    let (mut cpu, mut net, mut metrics_seen) = (false, false, false);
    let (mut k, mut duration, mut ratio) = (10i64, 0i64, 1i64);
    let mut i = 0;
    while i < opts.len() {
        let o = opts[i].to_ascii_uppercase();
        let value = opts.get(i + 1).copied();
        match o.as_slice() {
            b"METRICS" => {
                let Some(n) = value.and_then(int) else {
                    return Err("ERR syntax error".into());
                };
                if !(1..=2).contains(&n) {
                    return Err("ERR METRICS count must be 1 or 2".into());
                }
                let names = opts.get(i + 2..i + 2 + n as usize).ok_or("ERR syntax error")?;
                let mut valid = 0;
                for m in names {
                    let m = m.to_ascii_uppercase();
                    let slot = match m.as_slice() {
                        b"CPU" => &mut cpu,
                        b"NET" => &mut net,
                        _ => continue,
                    };
                    if *slot {
                        return Err(format!(
                            "ERR METRICS {} specified more than once",
                            String::from_utf8_lossy(&m)
                        ));
                    }
                    *slot = true;
                    valid += 1;
                }
                if valid == 0 {
                    return Err("ERR METRICS no valid metrics given (CPU, NET)".into());
                }
                metrics_seen = true;
                i += 2 + n as usize;
                continue;
            }
            b"COUNT" => match value.and_then(int) {
                Some(n) if (1..=64).contains(&n) => k = n,
                _ => return Err("ERR COUNT must be between 1 and 64".into()),
            },
            b"DURATION" => match value.and_then(int) {
                Some(n) if n > 0 => duration = n,
                _ => return Err("ERR DURATION must be a positive number of seconds".into()),
            },
            b"SAMPLE" => match value.and_then(int) {
                Some(n) if n > 0 => ratio = n,
                _ => return Err("ERR SAMPLE ratio must be positive".into()),
            },
            b"SLOTS" => return Err("ERR SLOTS parameter cannot be used in non-cluster mode".into()),
            // CPU or NET outside METRICS (METRICS 1 CPU NET) and anything unknown.
            _ => return Err("ERR syntax error".into()),
        }
        if value.is_none() {
            return Err("ERR syntax error".into());
        }
        i += 2;
    }
    if !metrics_seen {
        return Err("ERR METRICS parameter is required".into());
    }
    let now = Instant::now();
    let unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    Ok(Session {
        cpu,
        net,
        k: k as usize,
        sample_ratio: ratio as u64,
        // A duration past what the clock can hold never ends (as one of 0 does).
        stop_at: (duration > 0).then(|| now.checked_add(Duration::from_secs(duration as u64))).flatten(),
        started: now,
        started_unix_ms: unix_ms,
        stopped_after: None,
        cpu_at_start: process_cpu(),
        cpu_at_stop: None,
        all_ns: 0,
        all_bytes: 0,
        sampled_bytes: 0,
        by_cpu: Tally::default(),
        by_net: Tally::default(),
        rng: (unix_ms as u64) | 1,
    })
}

/// GET's map for one session.
fn get_reply(out: &mut Vec<u8>, proto: resp::Proto, s: &Session) {
    let (user, sys) = {
        let end = s.cpu_at_stop.unwrap_or_else(process_cpu);
        (((end.0 - s.cpu_at_start.0) * 1000.0) as i64, ((end.1 - s.cpu_at_start.1) * 1000.0) as i64)
    };
    let duration = s.stopped_after.unwrap_or_else(|| s.started.elapsed()).as_millis() as i64;
    let pairs = 7 + if s.cpu { 3 } else { 0 } + if s.net { 2 } else { 0 };
    reply::map_len(out, proto, pairs);
    let int = |out: &mut Vec<u8>, name: &[u8], v: i64| {
        reply::bulk(out, name);
        reply::integer(out, v);
    };
    int(out, b"tracking-active", i64::from(s.running()));
    int(out, b"sample-ratio", s.sample_ratio as i64);
    reply::bulk(out, b"selected-slots");
    reply::array_len(out, 0);
    int(out, b"all-commands-all-slots-us", (s.all_ns / 1000) as i64);
    int(out, b"net-bytes-all-commands-all-slots", s.all_bytes as i64);
    int(out, b"collection-start-time-unix-ms", s.started_unix_ms);
    int(out, b"collection-duration-ms", duration);
    // `scale` turns a tally's unit into the reply's (ns into us for CPU).
    let ranking = |out: &mut Vec<u8>, name: &[u8], t: &Tally, scale: u64| {
        reply::bulk(out, name);
        let top = t.top(s.k);
        reply::array_len(out, top.len() * 2);
        for (key, w) in top {
            reply::bulk(out, key);
            reply::integer(out, (w / scale) as i64);
        }
    };
    if s.cpu {
        int(out, b"total-cpu-time-user-ms", user);
        int(out, b"total-cpu-time-sys-ms", sys);
        ranking(out, b"by-cpu-time-us", &s.by_cpu, 1000);
    }
    if s.net {
        int(out, b"total-net-bytes", s.sampled_bytes as i64);
        ranking(out, b"by-net-bytes", &s.by_net, 1);
    }
}

/// The keys of a command, for HOTKEYS (the positions COMMAND GETKEYS reports).
pub fn command_keys<'a>(spec: &'static CommandSpec, args: &[&'a [u8]]) -> Vec<&'a [u8]> {
    match crate::commands::command::key_positions(spec, args) {
        Ok(Some(pos)) => pos.into_iter().filter_map(|p| args.get(p).copied()).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tally_keeps_the_heaviest_within_its_bound() {
        let mut t = Tally::default();
        t.add(b"hot", 1_000_000);
        for i in 0..50_000u32 {
            t.add(format!("cold{i}").as_bytes(), 1);
        }
        t.add(b"warm", 500);
        assert!(t.weights.len() <= 2 * TALLY_CAPACITY);
        let top = t.top(2);
        assert_eq!(top, vec![(&b"hot"[..], 1_000_000), (&b"warm"[..], 500)]);
    }

    /// A DURATION past what the clock can hold is a session without an end, not a panic.
    #[test]
    fn a_duration_past_the_clock_never_ends() {
        let s = parse_start(&[b"METRICS", b"1", b"CPU", b"DURATION", b"9223372036854775807"]);
        assert!(s.is_ok_and(|s| s.stop_at.is_none()));
        let s = parse_start(&[b"METRICS", b"1", b"CPU", b"DURATION", b"10"]);
        assert!(s.is_ok_and(|s| s.stop_at.is_some()));
    }

    #[test]
    fn request_bytes_count_resp_framing() {
        // *2\r\n$3\r\nGET\r\n$1\r\nk\r\n = 4 + 9 + 7
        assert_eq!(request_bytes(&[b"GET", b"k"]), 20);
        assert_eq!(request_bytes(&[&[b'x'; 10][..]]), 4 + 5 + 10 + 2);
    }
}
