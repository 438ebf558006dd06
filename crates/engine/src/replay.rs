//! Replay by record: applying one mutation that arrived from outside (a Kafka record, a firehose
//! frame's mutation, a snapshot's tail) without executing it as a fresh client command.
//!
//! A record is one complete RESP2 array of bulk strings: one command. It is checked against the
//! write allowlist (the data types' write commands, blocking ones excluded, plus `FUNCTION
//! LOAD|DELETE|FLUSH`, the function libraries' mutations) before it runs.
//!
//! Records that carry a logical offset (written by goblin-core) obey the lineage's ordering rule
//! against the next expected offset `e` (the committed offset plus what is pending, plus one):
//! an offset below `e` is a duplicate, skipped; `e` is applied; above `e` is a gap (a record is
//! missing), an error naming both. Such a record runs in replay mode (deadlines are not judged
//! by the local clock) and joins the pending batch as itself, so it keeps its offset when the
//! batch commits and is forwarded byte for byte.
//!
//! Records without an offset (another producer's RESP2 writes) run as the command they are,
//! at the time the caller gives, and their canonical mutations join the pending batch and take
//! fresh offsets, exactly as they did when the primary first applied them.

use crate::command::{lookup, Flags, Handler};
use crate::engine::{Engine, Outcome};
use store::Millis;

/// What [`Engine::apply_record`] did with a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Applied; its mutations are pending.
    Applied,
    /// Its offset was at or below the lineage's: already applied, skipped.
    Duplicate,
    /// A read-only command without an offset: parsed, counted by the caller, not run.
    IgnoredRead,
}

/// Why a record could not be applied. Each is fatal for the stream it came from: skipping a
/// record would make the serving state disagree with the durable log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// Not exactly one complete RESP2 array of bulk strings (inline, RESP3, empty, partial,
    /// several commands), or the wrong number of arguments.
    Malformed(String),
    /// A command name the table does not know.
    UnknownCommand(String),
    /// A known command that is not a keyspace write a record may carry (server commands,
    /// blocking commands).
    NotAllowed(String),
    /// A read-only command claiming a logical offset: goblin-core never writes such a record.
    ReadWithOffset { command: String, offset: u64 },
    /// Offset `got` arrived while `expected` was the next one: a record is missing.
    Gap { expected: u64, got: u64 },
    /// A recognized write answered an error.
    Rejected { command: String, error: String },
    /// The write's handler panicked: the store may hold part of it; the caller must stop.
    Panicked { command: String },
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Malformed(why) => write!(f, "malformed record: {why}"),
            RecordError::UnknownCommand(name) => write!(f, "unknown command '{name}' in record"),
            RecordError::NotAllowed(name) => {
                write!(f, "command '{name}' is not a keyspace write and may not appear in a record")
            }
            RecordError::ReadWithOffset { command, offset } => {
                write!(f, "record at logical offset {offset} holds the read-only command '{command}'")
            }
            RecordError::Gap { expected, got } => {
                write!(f, "record at logical offset {got} arrived where {expected} was expected: a record is missing")
            }
            RecordError::Rejected { command, error } => write!(f, "record '{command}' failed: {error}"),
            RecordError::Panicked { command } => write!(f, "record '{command}' crashed its handler"),
        }
    }
}

impl std::error::Error for RecordError {}

/// The integer of a `<type><digits>\r\n` line at `at`, and where the next line starts: the
/// text up to the first CRLF, as `i64::from_str` reads it (an optional sign, then digits, no
/// overflow). Hand-written because the replay runs it twice per argument: searching with
/// `windows` and parsing through `str` took 12% of the replay's server thread.
fn int_line(buf: &[u8], at: usize) -> Option<(i64, usize)> {
    let rest = buf.get(at + 1..)?;
    // A CR not followed by LF would be part of the text, which no integer holds.
    let end = rest.iter().position(|&b| b == b'\r')?;
    if rest.get(end + 1) != Some(&b'\n') {
        return None;
    }
    let (negative, digits) = match rest[..end] {
        [b'-', ref d @ ..] => (true, d),
        [b'+', ref d @ ..] => (false, d),
        ref d => (false, d),
    };
    if digits.is_empty() {
        return None;
    }
    let mut n: i64 = 0;
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        // Accumulated on the sign's side, so that i64::MIN parses too.
        n = n.checked_mul(10)?;
        n = if negative { n.checked_sub(d as i64)? } else { n.checked_add(d as i64)? };
    }
    Some((n, at + 1 + end + 2))
}

/// The second argument of a RESP2 command record (the key of most commands), found cheaply
/// without checking the rest of the record: for prefetching, where a wrong answer costs only
/// a useless hint.
pub fn record_key(record: &[u8]) -> Option<&[u8]> {
    if record.first() != Some(&b'*') {
        return None;
    }
    let (n, mut at) = int_line(record, 0)?;
    if n < 2 {
        return None;
    }
    for i in 0..2 {
        if record.get(at) != Some(&b'$') {
            return None;
        }
        let (len, start) = int_line(record, at)?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        if i == 1 {
            return record.get(start..end);
        }
        at = end + 2;
    }
    None
}

/// Splits a record into its arguments (borrowed from the record), or says why it is not one
/// RESP2 command: `*<n>\r\n` then n times `$<len>\r\n<bytes>\r\n`, and nothing after. Written by
/// hand because replay runs it once per record: no frame tree, no copies.
fn parse_record(record: &[u8]) -> Result<Vec<&[u8]>, RecordError> {
    let bad = |why: &str| Err(RecordError::Malformed(why.to_string()));
    match record.first() {
        None => return bad("empty record"),
        Some(b'*') => {}
        Some(_) => return bad("not a RESP2 array (inline commands and RESP3 values are refused)"),
    }
    let Some((n, mut at)) = int_line(record, 0) else {
        return bad("partial or malformed RESP2 array header");
    };
    if n < 0 {
        return bad("null array");
    }
    if n == 0 {
        return bad("empty array");
    }
    // Each argument takes at least 6 bytes (`$0\r\n\r\n`): a count beyond that is a lie, and
    // must not size an allocation.
    if n as usize > record.len() / 6 {
        return bad("partial RESP2 frame");
    }
    let mut args = Vec::with_capacity(n as usize);
    for _ in 0..n {
        match record.get(at) {
            None => return bad("partial RESP2 frame"),
            Some(b'$') => {}
            Some(_) => return bad("an argument is not a bulk string"),
        }
        let Some((len, start)) = int_line(record, at) else {
            return bad("partial or malformed bulk string header");
        };
        if len < 0 {
            return bad("an argument is not a bulk string");
        }
        let end = start.checked_add(len as usize).filter(|&e| e + 2 <= record.len());
        let Some(end) = end else { return bad("partial RESP2 frame") };
        if &record[end..end + 2] != b"\r\n" {
            return bad("a bulk string does not end with CRLF");
        }
        args.push(&record[start..end]);
        at = end + 2;
    }
    if at != record.len() {
        return bad("bytes after the first command (one record holds exactly one command)");
    }
    Ok(args)
}

impl Engine {
    /// The logical offset the next mutation will take: the committed offset, plus what is
    /// pending, plus one.
    pub fn next_offset(&self) -> u64 {
        self.repl.offset + self.pending().len() as u64 + 1
    }

    /// Applies one record (see the module documentation). `offset` is the record's logical
    /// offset when a goblin-core lineage wrote it; `now` is the time a record without one runs
    /// at. On success the record's effect is in the store and its mutations are pending: the
    /// caller commits them ([`Origin::Replay`](crate::Origin::Replay)) at the atomic boundary
    /// it knows (a firehose frame, a bounded run of Kafka records).
    pub fn apply_record(
        &mut self,
        record: &[u8],
        offset: Option<u64>,
        now: Millis,
    ) -> Result<Applied, RecordError> {
        self.apply_record_as(record, offset, now, offset.is_some())
    }

    /// Applies one command of a Redis primary's replication stream (this server a replica of
    /// a redis-server, `replication::redis_primary`): it runs as the primary's own client runs
    /// on a Redis replica, with no deadline judged by the local clock (the primary sends each
    /// expiry as its own `DEL`), and its canonical mutations join the pending batch with fresh
    /// offsets of this server's lineage, for this server's own replicas.
    pub fn apply_primary_command(&mut self, record: &[u8], now: Millis) -> Result<Applied, RecordError> {
        self.apply_record_as(record, None, now, true)
    }

    /// [`Engine::apply_record`], with replay semantics (`replay`: deadlines not judged) chosen
    /// by the caller.
    fn apply_record_as(
        &mut self,
        record: &[u8],
        offset: Option<u64>,
        now: Millis,
        replay: bool,
    ) -> Result<Applied, RecordError> {
        // Ordering first: a duplicate is skipped without being interpreted.
        if let Some(got) = offset {
            let expected = self.next_offset();
            if got < expected {
                return Ok(Applied::Duplicate);
            }
            if got > expected {
                return Err(RecordError::Gap { expected, got });
            }
        }
        let args = parse_record(record)?;
        let Some(spec) = lookup(args[0]) else {
            return Err(RecordError::UnknownCommand(String::from_utf8_lossy(args[0]).into_owned()));
        };
        if !spec.arity_ok(args.len()) {
            return Err(RecordError::Malformed(format!("wrong number of arguments for '{}'", spec.name)));
        }
        if spec.name == "function" {
            return self.apply_function_record(&args, offset);
        }
        let data = matches!(spec.handler, Handler::Data(_));
        if data && !spec.flags.has(Flags::WRITE) {
            return match offset {
                Some(offset) => Err(RecordError::ReadWithOffset { command: spec.name.to_string(), offset }),
                None => Ok(Applied::IgnoredRead),
            };
        }
        if !data || spec.flags.has(Flags::BLOCKING) {
            return Err(RecordError::NotAllowed(spec.name.to_string()));
        }
        let mark = self.pending().len();
        let was_replaying = self.replaying;
        // A record with an offset is canonical: replay semantics. One without is a command as
        // its producer sent it: the semantics the primary applied it with (a Redis primary's
        // stream asks for replay semantics too: see `apply_primary_command`).
        self.replaying = replay;
        // The reply is only inspected for an error: one buffer serves every record.
        let mut out = std::mem::take(&mut self.replay_reply);
        out.clear();
        // A record with an offset is its own mutation (pushed below): what the command would
        // emit is not even encoded.
        self.discard_emissions(offset.is_some());
        let outcome = self.execute(spec, &args, now, &mut out, resp::Proto::Resp2, false);
        self.discard_emissions(false);
        self.replaying = was_replaying;
        let failed = out.first() == Some(&b'-');
        let error = failed.then(|| String::from_utf8_lossy(&out[1..]).trim_end().to_string());
        self.replay_reply = out;
        match outcome {
            Outcome::WritePanicked => return Err(RecordError::Panicked { command: spec.name.to_string() }),
            Outcome::Blocked(_) => unreachable!("blocking commands are refused above"),
            Outcome::Done => {}
        }
        if let Some(error) = error {
            self.truncate_pending(mark);
            return Err(RecordError::Rejected { command: spec.name.to_string(), error });
        }
        if offset.is_some() {
            // The record itself is the mutation (its re-emission is the same command, or, for
            // a no-op on this state, nothing): it keeps its offset and its exact bytes.
            self.truncate_pending(mark);
            self.push_pending_parsed(record, &args);
        }
        Ok(Applied::Applied)
    }
}

impl Engine {
    /// A FUNCTION record: only the state-changing forms (LOAD, DELETE, FLUSH) may appear; the
    /// library code is not compiled here (it was where the record was written).
    fn apply_function_record(&mut self, args: &[&[u8]], offset: Option<u64>) -> Result<Applied, RecordError> {
        let sub = args[1].to_ascii_lowercase();
        if !matches!(sub.as_slice(), b"load" | b"delete" | b"flush") {
            return Err(RecordError::NotAllowed(format!("function|{}", String::from_utf8_lossy(&sub))));
        }
        let mark = self.pending().len();
        let mut out = std::mem::take(&mut self.replay_reply);
        out.clear();
        self.function_command(args, &mut out);
        let error =
            (out.first() == Some(&b'-')).then(|| String::from_utf8_lossy(&out[1..]).trim_end().to_string());
        self.replay_reply = out;
        if let Some(error) = error {
            self.truncate_pending(mark);
            return Err(RecordError::Rejected { command: "function".into(), error });
        }
        if offset.is_some() {
            self.truncate_pending(mark);
            self.push_pending(args);
        }
        Ok(Applied::Applied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Origin, Replication};
    use proptest::prelude::*;

    #[test]
    fn record_key_finds_the_second_argument() {
        assert_eq!(record_key(&rec(&["SET", "k1", "v"])), Some(&b"k1"[..]));
        assert_eq!(record_key(&rec(&["INCR", ""])), Some(&b""[..]));
        assert_eq!(record_key(&rec(&["FLUSHALL"])), None);
        assert_eq!(record_key(b"*2\r\n$3\r\nSET\r\n$9\r\nk"), None);
        assert_eq!(record_key(b"SET k v"), None);
    }

    proptest! {
        /// `int_line` reads what `str::parse::<i64>` reads up to the first CRLF, and refuses
        /// the rest.
        #[test]
        fn int_line_agrees_with_str_parse(
            text in "[-+]?[0-9]{0,21}|[-+0-9a \r]{0,8}|-?9223372036854775[0-9]{3}",
            crlf in any::<bool>(),
        ) {
            let mut line = b"$".to_vec();
            line.extend_from_slice(text.as_bytes());
            if crlf {
                line.extend_from_slice(b"\r\nrest");
            }
            let want = (|| {
                let end = line[1..].windows(2).position(|w| w == b"\r\n")?;
                let n: i64 = std::str::from_utf8(&line[1..1 + end]).ok()?.parse().ok()?;
                Some((n, 1 + end + 2))
            })();
            prop_assert_eq!(int_line(&line, 0), want);
        }
    }

    fn rec(args: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        resp::reply::bulk_array(&mut out, &a);
        out
    }

    #[test]
    fn ordering_rule_duplicates_gaps_and_next() {
        let mut e = Engine::new(Replication::new_lineage());
        assert_eq!(e.apply_record(&rec(&["SET", "a", "1"]), Some(1), 0), Ok(Applied::Applied));
        assert_eq!(e.apply_record(&rec(&["SET", "a", "2"]), Some(1), 0), Ok(Applied::Duplicate));
        assert_eq!(
            e.apply_record(&rec(&["SET", "a", "3"]), Some(3), 0),
            Err(RecordError::Gap { expected: 2, got: 3 })
        );
        assert_eq!(e.apply_record(&rec(&["SET", "a", "2"]), Some(2), 0), Ok(Applied::Applied));
        let b = e.commit(Origin::Replay).unwrap();
        assert_eq!((b.first_offset, b.len()), (1, 2));
        assert_eq!(e.repl.offset, 2);
        assert_eq!(e.ks.get(b"a").unwrap().to_plain(), store::Plain::Str(b"2".to_vec()));
        // After the commit, the next expected offset is 3.
        assert_eq!(e.apply_record(&rec(&["DEL", "a"]), Some(2), 0), Ok(Applied::Duplicate));
        assert_eq!(e.apply_record(&rec(&["DEL", "a"]), Some(3), 0), Ok(Applied::Applied));
    }

    #[test]
    fn a_replayed_record_is_pending_in_its_canonical_encoding() {
        let mut e = Engine::new(Replication::new_lineage());
        // Canonical: copied as it is. Lengths with leading zeros or a sign: re-encoded.
        let canonical = rec(&["SET", "key", "value"]);
        e.apply_record(&canonical, Some(1), 0).unwrap();
        e.apply_record(b"*03\r\n$3\r\nSET\r\n$+3\r\nkey\r\n$005\r\nother\r\n", Some(2), 0).unwrap();
        let b = e.commit(Origin::Replay).unwrap();
        assert_eq!(b.get(0).bytes, &canonical[..]);
        assert_eq!(b.get(1).bytes, &rec(&["SET", "key", "other"])[..]);
        let args: Vec<Vec<&[u8]>> = (0..2).map(|i| b.get(i).args().collect()).collect();
        assert_eq!(args, vec![vec![&b"SET"[..], b"key", b"value"], vec![&b"SET"[..], b"key", b"other"]]);
        assert_eq!(b.get(1).keys().collect::<Vec<_>>(), vec![&b"key"[..]]);
    }

    #[test]
    fn records_without_offsets_take_fresh_ones_as_commands() {
        let mut e = Engine::new(Replication::new_lineage());
        // A foreign EXPIRE becomes the canonical absolute form, at the caller's time.
        e.apply_record(&rec(&["SET", "k", "v"]), None, 1000).unwrap();
        e.apply_record(&rec(&["EXPIRE", "k", "10"]), None, 1000).unwrap();
        // A no-op write consumes no offset.
        e.apply_record(&rec(&["DEL", "missing"]), None, 1000).unwrap();
        let b = e.commit(Origin::Replay).unwrap();
        let muts: Vec<String> = b.iter().map(|m| format!("{m:?}")).collect();
        assert_eq!(muts, vec!["#1 SET k v", "#2 PEXPIREAT k 11000"]);
    }

    #[test]
    fn typed_errors() {
        let mut e = Engine::new(Replication::new_lineage());
        let malformed = |r: Result<Applied, RecordError>| matches!(r, Err(RecordError::Malformed(_)));
        assert!(malformed(e.apply_record(b"", None, 0)));
        assert!(malformed(e.apply_record(b"SET a 1\r\n", None, 0)));
        assert!(malformed(e.apply_record(b"*2\r\n$3\r\nDEL\r\n", None, 0)));
        let two = [rec(&["DEL", "a"]), rec(&["DEL", "b"])].concat();
        assert!(malformed(e.apply_record(&two, None, 0)));
        assert!(malformed(e.apply_record(b"*2\r\n$3\r\nDEL\r\n:1\r\n", None, 0)));
        assert!(malformed(e.apply_record(&rec(&["SET", "a"]), None, 0)));
        assert_eq!(
            e.apply_record(&rec(&["NOPE", "a"]), None, 0),
            Err(RecordError::UnknownCommand("NOPE".into()))
        );
        assert_eq!(
            e.apply_record(&rec(&["CONFIG", "SET", "x", "y"]), None, 0),
            Err(RecordError::NotAllowed("config".into()))
        );
        assert_eq!(
            e.apply_record(&rec(&["BLPOP", "l", "0"]), None, 0),
            Err(RecordError::NotAllowed("blpop".into()))
        );
        assert_eq!(e.apply_record(&rec(&["GET", "a"]), None, 0), Ok(Applied::IgnoredRead));
        assert_eq!(
            e.apply_record(&rec(&["GET", "a"]), Some(1), 0),
            Err(RecordError::ReadWithOffset { command: "get".into(), offset: 1 })
        );
        e.apply_record(&rec(&["SET", "s", "x"]), Some(1), 0).unwrap();
        let err = e.apply_record(&rec(&["INCR", "s"]), Some(2), 0).unwrap_err();
        assert!(
            matches!(&err, RecordError::Rejected { command, error } if command == "incr" && error.starts_with("ERR value is not an integer")),
            "{err:?}"
        );
        // The rejected record left nothing pending, and its offset is still the next one.
        assert_eq!(e.pending().len(), 1);
        assert_eq!(e.next_offset(), 2);
    }
}
