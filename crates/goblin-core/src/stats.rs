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

/// Past this many error kinds errorstats stop counting until CONFIG RESETSTAT, as in Redis (a
/// client could otherwise grow the table without bound with made-up error codes).
const MAX_ERROR_KINDS: usize = 128;

/// Counters of one command or subcommand.
#[derive(Clone, Default, Debug, PartialEq, Eq)]
pub struct Counters {
    pub calls: u64,
    /// Summed in nanoseconds: most commands take under a microsecond, and summing whole
    /// microseconds per call would round them all to zero.
    pub nanos: u64,
    pub rejected: u64,
    pub failed: u64,
    /// Calls by duration while `latency-tracking` is on (INFO latencystats, LATENCY
    /// HISTOGRAM); None until the first such call, so an untracked command costs nothing.
    pub latency: Option<Box<LatencyHist>>,
}

/// A command's calls by duration, as Redis keeps them in an HDR histogram of 2 significant
/// digits from 1 ns to 1 s: here log-linear buckets, [`SUB_BUCKETS`] per power of two of
/// nanoseconds (each about 3% wide), durations outside the range clamped into it.
///
/// Invariant: `total` is the sum of `counts`. A bucket's bounds are exact powers of two at
/// each octave's start, so LATENCY HISTOGRAM's power-of-two rows are exact sums of buckets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatencyHist {
    counts: Box<[u64; LATENCY_BUCKETS]>,
    total: u64,
}

/// Buckets per power of two, and the values below it that get a bucket each.
const SUB_BITS: u32 = 5;
const SUB_BUCKETS: usize = 1 << SUB_BITS;
/// Redis's range: 1 ns to 1 s (just under 2^30 ns).
const LATENCY_MAX_NANOS: u64 = 1_000_000_000;
const LATENCY_BUCKETS: usize = bucket_of(LATENCY_MAX_NANOS) + 1;

/// The bucket of a duration of `nanos` (at least 1, at most [`LATENCY_MAX_NANOS`]).
const fn bucket_of(nanos: u64) -> usize {
    if nanos < SUB_BUCKETS as u64 {
        return nanos as usize;
    }
    let octave = 63 - nanos.leading_zeros(); // >= SUB_BITS
    let shift = octave - SUB_BITS;
    let sub = ((nanos >> shift) as usize) & (SUB_BUCKETS - 1);
    (octave - SUB_BITS + 1) as usize * SUB_BUCKETS + sub
}

/// The smallest and largest duration that fall in bucket `b`.
fn bucket_bounds(b: usize) -> (u64, u64) {
    if b < SUB_BUCKETS {
        return (b as u64, b as u64);
    }
    let shift = (b / SUB_BUCKETS - 1) as u32;
    let low = ((SUB_BUCKETS + b % SUB_BUCKETS) as u64) << shift;
    (low, low + (1u64 << shift) - 1)
}

impl Default for LatencyHist {
    fn default() -> Self {
        LatencyHist { counts: Box::new([0; LATENCY_BUCKETS]), total: 0 }
    }
}

impl LatencyHist {
    #[inline]
    pub fn add(&mut self, nanos: u64) {
        self.counts[bucket_of(nanos.clamp(1, LATENCY_MAX_NANOS))] += 1;
        self.total += 1;
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// The duration in nanoseconds at or under which `percentile` percent of the calls fall,
    /// as HDR's `value_at_percentile` gives it: the largest value of the bucket holding the
    /// call of that rank (the smallest, for the 0th percentile), so the answer never
    /// understates a call's time.
    pub fn at_percentile(&self, percentile: f64) -> u64 {
        let p = percentile.min(100.0);
        let rank = ((p / 100.0 * self.total as f64 + 0.5) as u64).max(1);
        let mut seen = 0;
        for (b, n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (low, high) = bucket_bounds(b);
                return if percentile == 0.0 { low } else { high };
            }
        }
        0
    }

    /// Calls that took less than `nanos`, for a power of two `nanos` (a bucket boundary).
    fn below(&self, nanos: u64) -> u64 {
        let end = if nanos > LATENCY_MAX_NANOS { LATENCY_BUCKETS } else { bucket_of(nanos) };
        self.counts[..end].iter().sum()
    }
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
    /// Set when more than [`MAX_ERROR_KINDS`] kinds were seen: errorstats stop counting.
    errors_disabled: bool,
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
    pub fn record(
        &mut self,
        spec: &'static CommandSpec,
        name: &'static str,
        reply: &[u8],
        took: Duration,
        track_latency: bool,
    ) {
        let error = reply.first() == Some(&b'-');
        if error && !std::mem::take(&mut self.skip_next_error) {
            self.error_reply(reply);
        }
        let nanos = took.as_nanos() as u64;
        // A container (a server command, or a data command called by a subcommand's name).
        let slot = if matches!(spec.handler, Handler::Server) || name.len() != spec.name.len() {
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
            if error && is_prefixed(reply, b"-ERR unknown subcommand") {
                // OBJECT, XGROUP or XINFO with a subcommand they lack: no row either.
                return;
            }
            let Some(slot) = self.spec_slot(spec) else { return };
            slot
        };
        slot.calls += 1;
        slot.nanos += nanos;
        slot.failed += error as u64;
        if track_latency {
            slot.latency.get_or_insert_with(Default::default).add(nanos);
        }
    }

    /// LATENCY HISTOGRAM [command ...]: for each command (or `cmd|sub`) with tracked calls,
    /// their number and, at each power of two from 1024 ns, how many took less (in whole
    /// microseconds, as Redis prints its rows: 1, 2, 4, 8, 16, 32, 65 ...), a row only where
    /// the count grew. A container name selects all its subcommands.
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
        let rows: Vec<(&'static str, &LatencyHist)> = self
            .commands()
            .filter(|(n, _)| wanted(n))
            .filter_map(|(n, c)| Some((n, c.latency.as_deref()?)))
            .collect();
        resp::reply::map_len(out, proto, rows.len());
        for (name, h) in rows {
            resp::reply::bulk(out, name.as_bytes());
            resp::reply::map_len(out, proto, 2);
            resp::reply::bulk(out, b"calls");
            resp::reply::integer(out, h.total() as i64);
            resp::reply::bulk(out, b"histogram_usec");
            let mut points = Vec::new();
            let mut last = 0;
            let mut bound = 1024u64;
            while last < h.total() {
                let n = h.below(bound);
                if n > last {
                    points.push(((bound / 1000) as i64, n as i64));
                    last = n;
                }
                bound *= 2;
            }
            resp::reply::map_len(out, proto, points.len());
            for (micros, n) in points {
                resp::reply::integer(out, micros);
                resp::reply::integer(out, n);
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

    /// A request of `spec` refused before running with error `text` (without its `-`): a
    /// rejected call, the error counted under its own first word (OOM, NOPERM, EXECABORT ...).
    pub fn rejected_reply(&mut self, spec: &'static CommandSpec, text: &[u8]) {
        let head = &text[..text.len().min(32)];
        let prefix = match head.iter().position(|&b| b == b' ') {
            Some(n) if n > 0 => String::from_utf8_lossy(&head[..n]).into_owned(),
            _ => "ERR".to_string(),
        };
        self.rejected_as(Some(spec), None, &prefix);
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
        if self.errors_disabled {
            return;
        }
        if let Some(n) = self.errors.get_mut(prefix) {
            *n += 1;
        } else if self.errors.len() < MAX_ERROR_KINDS {
            self.errors.insert(prefix.to_string(), 1);
        } else {
            // As Redis: a flood of made-up error codes (a script's error_reply, usually)
            // turns errorstats off until CONFIG RESETSTAT, leaving one row that says so.
            tracing::warn!(
                "Errorstats stopped adding new errors because the number of errors reached the limit, \
                 may be misuse of lua error_reply, please check INFO ERRORSTATS, this can be re-enabled \
                 via CONFIG RESETSTAT."
            );
            let codes: Vec<&str> = self.errors.keys().map(String::as_str).collect();
            tracing::warn!("Current errors code list: {}", codes.join(", "));
            self.errors.clear();
            self.errors.insert("ERRORSTATS_DISABLED".to_string(), 1);
            self.errors_disabled = true;
        }
    }

    /// Rows for INFO commandstats: (name, counters) of every command or subcommand used since
    /// start or the last CONFIG RESETSTAT; table order, then subcommands in first-use order.
    pub fn commands(&self) -> impl Iterator<Item = (&'static str, &Counters)> + '_ {
        let specs = &SpecIndex::get().specs;
        let top = self.by_spec.iter().zip(specs.iter()).filter(|(c, _)| c.used()).map(|(c, s)| (s.name, c));
        top.chain(self.subs.iter().filter(|(_, c)| c.used()).map(|(n, c)| (*n, c)))
    }

    /// Rows for INFO errorstats: (prefix, count), sorted by prefix.
    pub fn errors(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.errors.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// The counters of `name` (a command or `cmd|sub`), for tests.
    #[cfg(test)]
    fn get(&self, name: &str) -> Counters {
        self.commands().find(|(n, _)| *n == name).map(|(_, c)| c.clone()).unwrap_or_default()
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
        st.record(get, "get", b"$1\r\n1\r\n", Duration::from_micros(3), true);
        st.record(get, "get", b"-WRONGTYPE Operation against a key\r\n", Duration::from_micros(5), true);
        st.rejected(Some(get));
        st.rejected(None);
        let mut latency = LatencyHist::default();
        latency.add(3000);
        latency.add(5000);
        let latency = Some(Box::new(latency));
        assert_eq!(st.get("get"), Counters { calls: 2, nanos: 8000, rejected: 1, failed: 1, latency });
        let client = spec("client");
        st.record(client, "client|list", b"$0\r\n\r\n", Duration::from_micros(1), false);
        st.record(
            client,
            "client|setname",
            b"-ERR wrong number of arguments for 'client|setname' command\r\n",
            Duration::ZERO,
            false,
        );
        st.record(
            client,
            "client",
            b"-ERR unknown subcommand 'x'. Try CLIENT HELP.\r\n",
            Duration::ZERO,
            false,
        );
        assert_eq!(st.get("client|list").calls, 1);
        assert_eq!(st.get("client|setname"), Counters { rejected: 1, ..Default::default() });
        assert!(!st.commands().any(|(n, _)| n == "client"), "unknown subcommands get no row");
        // No space in the first 32 bytes: counted as ERR.
        st.record(get, "get", b"-NOSPACEATALLINTHISERRORTEXTTHATISLONG\r\n", Duration::ZERO, false);
        let errs: Vec<(&str, u64)> = st.errors().collect();
        assert_eq!(errs, vec![("ERR", 5), ("WRONGTYPE", 1)]);
        assert_eq!(st.total_error_replies, 6);
    }

    proptest::proptest! {
        /// Every duration lands in a bucket whose bounds hold it, buckets follow the order of
        /// durations, and a percentile read back never understates nor overstates by more
        /// than a bucket's width (1/32 of the value).
        #[test]
        fn latency_buckets_hold_their_values(mut v in proptest::collection::vec(1u64..=LATENCY_MAX_NANOS, 1..200), p in 0.0f64..=100.0) {
            let mut h = LatencyHist::default();
            for &x in &v {
                let b = bucket_of(x);
                let (low, high) = bucket_bounds(b);
                proptest::prop_assert!(low <= x && x <= high, "{x} in bucket {b} [{low}, {high}]");
                proptest::prop_assert!(b < LATENCY_BUCKETS);
                proptest::prop_assert_eq!(bucket_of(low), b);
                proptest::prop_assert_eq!(bucket_of(high), b);
                h.add(x);
            }
            v.sort_unstable();
            let rank = ((p / 100.0 * v.len() as f64 + 0.5) as usize).max(1);
            let exact = v[rank - 1];
            let got = h.at_percentile(p);
            if p == 0.0 {
                proptest::prop_assert!(got <= exact);
            } else {
                proptest::prop_assert!(got >= exact && got <= exact + exact / 32, "p{p}: {got} for {exact}");
            }
        }
    }

    #[test]
    fn latency_histogram_rows_at_powers_of_two() {
        let mut st = CommandStats::default();
        let set = spec("set");
        st.record(set, "set", b"+OK\r\n", Duration::from_nanos(500), false);
        let mut out = Vec::new();
        st.latency_histograms(&mut out, resp::Proto::Resp2, &[]);
        assert_eq!(out, b"*0\r\n", "untracked calls have no histogram");
        for nanos in [500, 900, 1500, 3000, 3000, 70_000, 5_000_000_000] {
            st.record(set, "set", b"+OK\r\n", Duration::from_nanos(nanos), true);
        }
        let mut out = Vec::new();
        st.latency_histograms(&mut out, resp::Proto::Resp2, &[b"SET"]);
        // Below 1024 ns: 2; below 2048: 3; below 4096: 5; below 131072: 6; the 5 s call is
        // clamped to 1 s, under 2^30 ns.
        let rows = [(1, 2), (2, 3), (4, 5), (131, 6), (1073741, 7)];
        let mut want = b"*2\r\n$3\r\nset\r\n*4\r\n$5\r\ncalls\r\n:7\r\n$14\r\nhistogram_usec\r\n".to_vec();
        want.extend_from_slice(format!("*{}\r\n", rows.len() * 2).as_bytes());
        for (us, n) in rows {
            want.extend_from_slice(format!(":{us}\r\n:{n}\r\n").as_bytes());
        }
        assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(&want));
    }

    #[test]
    fn error_kinds_are_capped() {
        let mut st = CommandStats::default();
        let get = spec("get");
        for i in 0..MAX_ERROR_KINDS {
            st.record(get, "get", format!("-E{i} x\r\n").as_bytes(), Duration::ZERO, false);
        }
        st.record(get, "get", b"-E0 again\r\n", Duration::ZERO, false);
        assert_eq!(st.errors().count(), MAX_ERROR_KINDS);
        assert_eq!(st.errors().find(|(k, _)| *k == "E0").map(|(_, n)| n), Some(2));
        // One kind more turns errorstats off, as in Redis; the total still counts.
        for i in 0..10 {
            st.record(get, "get", format!("-NEW{i} x\r\n").as_bytes(), Duration::ZERO, false);
        }
        let errs: Vec<(&str, u64)> = st.errors().collect();
        assert_eq!(errs, vec![("ERRORSTATS_DISABLED", 1)]);
        assert_eq!(st.total_error_replies, MAX_ERROR_KINDS as u64 + 11);
    }
}
