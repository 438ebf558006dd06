//! Per-command and per-error counters for INFO `commandstats` and `errorstats`.
//!
//! Redis 7's accounting, which this follows (checked against redis-server 7.0.15):
//! - `calls` / `usec`: every execution, including ones whose reply is an error, and each
//!   command run from EXEC (EXEC itself is one more call, its time including theirs).
//! - `failed_calls`: executions whose reply is an error (WRONGTYPE, EXECABORT, `EXEC without
//!   MULTI` ...). They are calls too.
//! - `rejected_calls`: requests refused before running (wrong arity, including a subcommand's
//!   arity). They are not calls. An unknown command or subcommand has no row at all; its error
//!   is still counted in errorstats.
//! - errorstats: every error reply, keyed by its first word (`ERR`, `WRONGTYPE` ...).
//!
//! Server commands with subcommands are kept per subcommand (`client|list`), under the name
//! the dispatcher leaves in `Conn::last_cmd`.
//!
//! The hot path ([`CommandStats::record`] for a data command) is a few range checks to turn the
//! spec's address into its index in the command table, one reply-byte test and three adds; no
//! hashing, no allocation after the first use of each command.

use engine::{CommandSpec, Handler};
use std::collections::BTreeMap;
use std::time::Duration;

/// Redis stops tracking new error kinds past this many (a client could otherwise grow the
/// table without bound by provoking errors with made-up prefixes); known kinds keep counting.
const MAX_ERROR_KINDS: usize = 128;

/// Counters of one command or subcommand.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Counters {
    pub calls: u64,
    /// Summed in nanoseconds: most commands take under a microsecond, and summing whole
    /// microseconds per call would round them all to zero.
    pub nanos: u64,
    pub rejected: u64,
    pub failed: u64,
    /// LATENCY HISTOGRAM: calls by duration, bucket `b` holding those of at most 2^b
    /// microseconds (and over 2^(b-1)); the last bucket takes everything longer.
    pub hist: [u64; HIST_BUCKETS],
}

/// Buckets of [`Counters::hist`]: up to 2^31 microseconds (36 minutes) apart.
pub const HIST_BUCKETS: usize = 32;

/// The histogram bucket of a call that took `nanos`.
#[inline]
fn bucket(nanos: u64) -> usize {
    let micros = (nanos / 1000).max(1);
    (micros.next_power_of_two().trailing_zeros() as usize).min(HIST_BUCKETS - 1)
}

impl Counters {
    /// Total microseconds, as INFO shows them.
    pub fn usec(&self) -> u64 {
        self.nanos / 1000
    }

    /// Mean microseconds per call (0 before the first call).
    pub fn usec_per_call(&self) -> f64 {
        if self.calls > 0 {
            self.nanos as f64 / 1000.0 / self.calls as f64
        } else {
            0.0
        }
    }

    fn used(&self) -> bool {
        self.calls > 0 || self.rejected > 0 || self.failed > 0
    }
}

/// A run of command specs that are contiguous in memory (one module's static table), so an
/// address inside it maps to a table index by subtraction.
struct Run {
    start: usize,
    len: usize,
    base: usize,
}

/// Maps a `&'static CommandSpec` to its position in [`engine::all`], computed once.
struct SpecIndex {
    runs: Vec<Run>,
    specs: Vec<&'static CommandSpec>,
}

impl SpecIndex {
    fn get() -> &'static SpecIndex {
        static INDEX: std::sync::OnceLock<SpecIndex> = std::sync::OnceLock::new();
        INDEX.get_or_init(|| {
            let size = std::mem::size_of::<CommandSpec>();
            let specs: Vec<&'static CommandSpec> = engine::command::all().collect();
            let mut runs: Vec<Run> = Vec::new();
            for (i, spec) in specs.iter().enumerate() {
                let addr = *spec as *const CommandSpec as usize;
                match runs.last_mut() {
                    Some(r) if r.start + r.len * size == addr => r.len += 1,
                    _ => runs.push(Run { start: addr, len: 1, base: i }),
                }
            }
            SpecIndex { runs, specs }
        })
    }

    /// The table index of `spec`; None only for a spec that is not in the table (a bug).
    #[inline]
    fn of(&self, spec: &'static CommandSpec) -> Option<usize> {
        let size = std::mem::size_of::<CommandSpec>();
        let addr = spec as *const CommandSpec as usize;
        self.runs.iter().find_map(|r| {
            let off = addr.wrapping_sub(r.start);
            (off < r.len * size).then(|| r.base + off / size)
        })
    }
}

/// The counters behind INFO commandstats / errorstats. `Default` is empty and allocation
/// free, so CONFIG RESETSTAT (which replaces the server's stats with defaults) clears them.
#[derive(Default)]
pub struct CommandStats {
    /// By table index ([`SpecIndex`]); grown on first use.
    by_spec: Vec<Counters>,
    /// Subcommands (`client|list`), in first-use order. Few, and only server commands reach
    /// them, so a linear search is fine.
    subs: Vec<(&'static str, Counters)>,
    /// Error replies by first word.
    errors: BTreeMap<String, u64>,
    /// Every error reply (INFO stats `total_error_replies`).
    pub total_error_replies: u64,
    /// The next error reply recorded was counted already (a script's error that came from a
    /// command it called): its command's failed call counts, errorstats do not.
    pub skip_next_error: bool,
}

impl CommandStats {
    fn spec_slot(&mut self, spec: &'static CommandSpec) -> Option<&mut Counters> {
        let i = SpecIndex::get().of(spec)?;
        if i >= self.by_spec.len() {
            self.by_spec.resize(SpecIndex::get().specs.len().max(i + 1), Counters::default());
        }
        Some(&mut self.by_spec[i])
    }

    fn sub_slot(&mut self, full: &'static str) -> &mut Counters {
        let at = match self.subs.iter().position(|(n, _)| *n == full) {
            Some(at) => at,
            None => {
                self.subs.push((full, Counters::default()));
                self.subs.len() - 1
            }
        };
        &mut self.subs[at].1
    }

    /// Records one execution of `spec`. `name` is what the dispatcher left in
    /// `Conn::last_cmd` (the spec's name, or `cmd|sub` for a subcommand); `reply` is the reply
    /// it wrote (empty for a client that got parked by a blocking command).
    #[inline]
    pub fn record(&mut self, spec: &'static CommandSpec, name: &'static str, reply: &[u8], took: Duration) {
        let error = reply.first() == Some(&b'-');
        if error && !std::mem::take(&mut self.skip_next_error) {
            self.error_reply(reply);
        }
        let nanos = took.as_nanos() as u64;
        let slot = if matches!(spec.handler, Handler::Server) {
            if error && is_prefixed(reply, b"-ERR unknown subcommand") {
                // Redis never finds a command for an unknown subcommand: no row.
                return;
            }
            let sub = name.len() > spec.name.len()
                && name.starts_with(spec.name)
                && name.as_bytes()[spec.name.len()] == b'|';
            let slot = if sub { Some(self.sub_slot(name)) } else { self.spec_slot(spec) };
            let Some(slot) = slot else { return };
            if error && is_prefixed(reply, b"-ERR wrong number of arguments") {
                // A subcommand's arity is checked by its handler here, before it does
                // anything; Redis checks it before the call and counts it as rejected.
                slot.rejected += 1;
                return;
            }
            slot
        } else {
            let Some(slot) = self.spec_slot(spec) else { return };
            slot
        };
        slot.calls += 1;
        slot.nanos += nanos;
        slot.failed += error as u64;
        slot.hist[bucket(nanos)] += 1;
    }

    /// A parked command (counted as a call when it parked) finally answered `reply`: an error
    /// counts in errorstats and as a failed call of `spec`, as Redis counts a blocked command
    /// that its unblocking fails (XGROUP DESTROY under XREADGROUP).
    pub fn record_unblocked(&mut self, spec: &'static CommandSpec, reply: &[u8]) {
        if reply.first() != Some(&b'-') {
            return;
        }
        self.error_reply(reply);
        if let Some(slot) = self.spec_slot(spec) {
            slot.failed += 1;
        }
    }

    /// LATENCY HISTOGRAM [command ...]: for each command (or `cmd|sub`) that has calls, its
    /// calls and the cumulative count of calls at or under each power-of-two microseconds,
    /// up to the bucket of the slowest. A container name selects all its subcommands.
    pub fn latency_histograms(&self, out: &mut Vec<u8>, proto: resp::Proto, names: &[&[u8]]) {
        let wanted = |row: &str| {
            names.is_empty()
                || names.iter().any(|n| {
                    let n = n.to_ascii_lowercase();
                    row.as_bytes() == n.as_slice()
                        || (row.len() > n.len()
                            && row.as_bytes().starts_with(&n)
                            && row.as_bytes()[n.len()] == b'|')
                })
        };
        let rows: Vec<(&'static str, Counters)> =
            self.commands().filter(|(n, c)| c.calls > 0 && wanted(n)).collect();
        resp::reply::map_len(out, proto, rows.len());
        for (name, c) in rows {
            resp::reply::bulk(out, name.as_bytes());
            resp::reply::map_len(out, proto, 2);
            resp::reply::bulk(out, b"calls");
            resp::reply::integer(out, c.calls as i64);
            resp::reply::bulk(out, b"histogram_usec");
            let top = c.hist.iter().rposition(|&n| n > 0).unwrap_or(0);
            resp::reply::map_len(out, proto, top + 1);
            let mut cumulative = 0;
            for (b, n) in c.hist.iter().enumerate().take(top + 1) {
                cumulative += n;
                resp::reply::integer(out, 1i64 << b);
                resp::reply::integer(out, cumulative as i64);
            }
        }
    }

    /// Records a request refused before execution: `Some(spec)` for a known command with the
    /// wrong arity, None for an unknown command. Both replied with an `ERR` error.
    pub fn rejected(&mut self, spec: Option<&'static CommandSpec>) {
        self.count_error("ERR");
        if let Some(slot) = spec.and_then(|s| self.spec_slot(s)) {
            slot.rejected += 1;
        }
    }

    /// A command refused inside a script before it ran: its error under `prefix`, and a
    /// rejected call on `name` (the command, or `cmd|sub`) when the command is known.
    pub fn rejected_as(
        &mut self,
        spec: Option<&'static CommandSpec>,
        name: Option<&'static str>,
        prefix: &str,
    ) {
        self.count_error(prefix);
        let Some(spec) = spec else { return };
        let slot = match name {
            Some(n) if n != spec.name => Some(self.sub_slot(n)),
            _ => self.spec_slot(spec),
        };
        if let Some(slot) = slot {
            slot.rejected += 1;
        }
    }

    /// Counts the error reply `reply` (`-PREFIX rest\r\n`) under its first word. A reply with
    /// no space in its first 32 bytes has no recognisable prefix and counts as `ERR`, as in
    /// Redis.
    fn error_reply(&mut self, reply: &[u8]) {
        let body = &reply[1..];
        let head = &body[..body.len().min(32)];
        let prefix = match head.iter().position(|&b| b == b' ') {
            Some(n) if n > 0 => String::from_utf8_lossy(&head[..n]).into_owned(),
            _ => "ERR".to_string(),
        };
        self.count_error(&prefix);
    }

    fn count_error(&mut self, prefix: &str) {
        self.total_error_replies += 1;
        if let Some(n) = self.errors.get_mut(prefix) {
            *n += 1;
        } else if self.errors.len() < MAX_ERROR_KINDS {
            self.errors.insert(prefix.to_string(), 1);
        }
    }

    /// Rows for INFO commandstats: (name, counters) of every command or subcommand used since
    /// start or the last CONFIG RESETSTAT; table order, then subcommands in first-use order.
    pub fn commands(&self) -> impl Iterator<Item = (&'static str, Counters)> + '_ {
        let specs = &SpecIndex::get().specs;
        let top = self.by_spec.iter().zip(specs.iter()).filter(|(c, _)| c.used()).map(|(c, s)| (s.name, *c));
        top.chain(self.subs.iter().filter(|(_, c)| c.used()).map(|(n, c)| (*n, *c)))
    }

    /// Rows for INFO errorstats: (prefix, count), sorted by prefix.
    pub fn errors(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.errors.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// The counters of `name` (a command or `cmd|sub`), for tests.
    #[cfg(test)]
    fn get(&self, name: &str) -> Counters {
        self.commands().find(|(n, _)| *n == name).map(|(_, c)| c).unwrap_or_default()
    }
}

fn is_prefixed(reply: &[u8], prefix: &[u8]) -> bool {
    reply.len() >= prefix.len() && &reply[..prefix.len()] == prefix
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> &'static CommandSpec {
        engine::lookup(name.as_bytes()).expect("command in table")
    }

    #[test]
    fn every_spec_maps_to_its_table_position() {
        let idx = SpecIndex::get();
        for (i, s) in engine::command::all().enumerate() {
            assert_eq!(idx.of(s), Some(i), "{}", s.name);
        }
    }

    #[test]
    fn calls_failures_rejections_and_error_prefixes() {
        let mut st = CommandStats::default();
        let get = spec("get");
        st.record(get, "get", b"$1\r\n1\r\n", Duration::from_micros(3));
        st.record(get, "get", b"-WRONGTYPE Operation against a key\r\n", Duration::from_micros(5));
        st.rejected(Some(get));
        st.rejected(None);
        let mut hist = [0; HIST_BUCKETS];
        hist[2] = 1; // 3 us: at most 4
        hist[3] = 1; // 5 us: at most 8
        assert_eq!(st.get("get"), Counters { calls: 2, nanos: 8000, rejected: 1, failed: 1, hist });
        let client = spec("client");
        st.record(client, "client|list", b"$0\r\n\r\n", Duration::from_micros(1));
        st.record(
            client,
            "client|setname",
            b"-ERR wrong number of arguments for 'client|setname' command\r\n",
            Duration::ZERO,
        );
        st.record(client, "client", b"-ERR unknown subcommand 'x'. Try CLIENT HELP.\r\n", Duration::ZERO);
        assert_eq!(st.get("client|list").calls, 1);
        assert_eq!(st.get("client|setname"), Counters { rejected: 1, ..Default::default() });
        assert!(!st.commands().any(|(n, _)| n == "client"), "unknown subcommands get no row");
        // No space in the first 32 bytes: counted as ERR.
        st.record(get, "get", b"-NOSPACEATALLINTHISERRORTEXTTHATISLONG\r\n", Duration::ZERO);
        let errs: Vec<(&str, u64)> = st.errors().collect();
        assert_eq!(errs, vec![("ERR", 5), ("WRONGTYPE", 1)]);
        assert_eq!(st.total_error_replies, 6);
    }

    #[test]
    fn error_kinds_are_capped() {
        let mut st = CommandStats::default();
        let get = spec("get");
        for i in 0..MAX_ERROR_KINDS + 10 {
            st.record(get, "get", format!("-E{i} x\r\n").as_bytes(), Duration::ZERO);
        }
        st.record(get, "get", b"-E0 again\r\n", Duration::ZERO);
        assert_eq!(st.errors().count(), MAX_ERROR_KINDS);
        assert_eq!(st.errors().find(|(k, _)| *k == "E0").map(|(_, n)| n), Some(2));
        assert_eq!(st.total_error_replies, MAX_ERROR_KINDS as u64 + 11);
    }
}
