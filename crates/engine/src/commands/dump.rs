//! DUMP and RESTORE: one key's value in Redis's DUMP payload format (the codec is
//! [`crate::rdb`]).
//!
//! Canonical mutations: RESTORE writes its post-state out in the forms the other writes use,
//! so the stream needs no new record kind and no RDB decoder on the replaying side: `DEL key`
//! when REPLACE removed a live key, then the value (`SET key v [PXAT at]` for a string; one
//! `RPUSH`, `SADD`, `HSET`, `ZADD` or `ARSET` per element, then `ARSEEK` for an array with a
//! cursor; a stream as `emit_stream` describes), then `PEXPIREAT key at` for a collection with
//! a deadline. Each element is written from the stored value (after any normalization the store
//! made, e.g. a -0 score in a small sorted set), so a replica ends with exactly the origin's
//! state. A RESTORE whose deadline has already passed only deletes (Redis's rule: the key is
//! created expired, i.e. not at all). DUMP is a read and emits nothing.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::commands::string::{emit_set, SetTtl};
use crate::ctx::Ctx;
use crate::errors;
use crate::rdb;
use crate::util::{eq_ic, format_f64, parse_i64};
use resp::reply;
use store::keyspace::access::{self, AccessMode};
use store::{Kind, ValueRef};

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec("dump", 2, Flags::READONLY, (1, 1, 1), "generic", "Returns a serialized representation of the value stored at a key.", Handler::Data(dump)),
    spec("restore", -4, Flags::WRITE | Flags::DENYOOM, (1, 1, 1), "generic", "Creates a key from the serialized representation of a value.", Handler::Data(restore)),
];

pub const BUSYKEY: &[u8] = b"BUSYKEY Target key name already exists.";
pub const INVALID_TTL: &[u8] = b"ERR Invalid TTL value, must be >= 0";
pub const INVALID_IDLETIME: &[u8] = b"ERR Invalid IDLETIME value, must be >= 0";
pub const INVALID_FREQ: &[u8] = b"ERR Invalid FREQ value, must be >= 0 and <= 255";

/// DUMP key
fn dump(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let proto = c.proto;
    match c.read(args[1]).map(rdb::dump) {
        Some(payload) => reply::bulk(out, &payload),
        None => reply::null_bulk(out, proto),
    }
}

/// What RESTORE's options asked for besides the value.
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestoreOpts {
    pub replace: bool,
    pub absttl: bool,
    /// IDLETIME seconds.
    pub idle: Option<i64>,
    /// FREQ counter (0..=255).
    pub freq: Option<i64>,
}

/// Parses RESTORE's options in Redis's order of checks: IDLETIME and FREQ exclude each other
/// (the second is a syntax error), and their values are checked where they stand.
pub fn parse_restore_opts(args: &[&[u8]]) -> Result<RestoreOpts, &'static [u8]> {
    let mut o = RestoreOpts::default();
    let mut j = 4;
    while j < args.len() {
        let more = args.len() - j - 1;
        let a = args[j];
        if eq_ic(a, b"replace") {
            o.replace = true;
        } else if eq_ic(a, b"absttl") {
            o.absttl = true;
        } else if eq_ic(a, b"idletime") && more >= 1 && o.freq.is_none() {
            match parse_i64(args[j + 1]) {
                None => return Err(errors::NOT_INTEGER),
                Some(v) if v < 0 => return Err(INVALID_IDLETIME),
                Some(v) => o.idle = Some(v),
            }
            j += 1;
        } else if eq_ic(a, b"freq") && more >= 1 && o.idle.is_none() {
            match parse_i64(args[j + 1]) {
                None => return Err(errors::NOT_INTEGER),
                Some(v) if !(0..=255).contains(&v) => return Err(INVALID_FREQ),
                Some(v) => o.freq = Some(v),
            }
            j += 1;
        } else {
            return Err(errors::SYNTAX);
        }
        j += 1;
    }
    Ok(o)
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]
fn restore(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let opts = match parse_restore_opts(args) {
        Ok(o) => o,
        Err(e) => return reply::error(out, e),
    };
    let exists = c.exists(key);
    if exists && !opts.replace {
        return reply::error(out, BUSYKEY);
    }
    let ttl = match parse_i64(args[2]) {
        None => return reply::error(out, errors::NOT_INTEGER),
        Some(t) if t < 0 => return reply::error(out, INVALID_TTL),
        Some(t) => t,
    };
    let value = match rdb::restore(args[3]) {
        Ok(v) => v,
        Err(e) => return reply::error(out, e.message()),
    };
    if exists {
        c.ks.delete(key);
        c.emit(&[b"DEL", key]);
    }
    let deadline = match ttl {
        0 => None,
        t if opts.absttl => Some(t),
        t => Some(c.now.saturating_add(t)),
    };
    if deadline.is_some_and(|at| at <= c.now) {
        return reply::ok(out);
    }
    let kind = value.kind();
    c.ks.insert(key, value, deadline);
    // IDLETIME and FREQ set the access field for the policy in force (the other is ignored,
    // as in Redis). The field is not replicated: a replica's keys record its own accesses.
    let field = match c.ks.access_mode() {
        AccessMode::Lru => opts.idle.map(|s| access::lru_with_idle(s, c.now)),
        AccessMode::Lfu { .. } => opts.freq.map(|f| access::lfu_with_freq(f as u32, c.now)),
    };
    if let Some(f) = field {
        c.ks.set_access(key, f);
    }
    emit_value(c, key, deadline);
    if let (Some(at), false) = (deadline, kind == Kind::Str) {
        let mut b = itoa::Buffer::new();
        c.emit(&[b"PEXPIREAT", key, b.format(at).as_bytes()]);
    }
    // Not for a stream: a parked BLPOP or BZPOPMIN on the key would be retried into WRONGTYPE
    // (Redis serves only the waiters of the key's type); an XREAD waiter is served by the next
    // XADD, as after RENAME and COPY (see `signal_if_blockable`).
    if matches!(kind, Kind::List | Kind::ZSet) {
        c.signal_ready(key);
    }
    reply::ok(out);
}

/// Emits the writes that build the value now stored at `key` from nothing (a string carries
/// its deadline in its SET; a collection's deadline is the caller's PEXPIREAT).
fn emit_value(c: &mut Ctx, key: &[u8], deadline: Option<store::Millis>) {
    if let Some(ValueRef::Str(s)) = c.ks.get(key) {
        let bytes = s.to_vec();
        let ttl = deadline.map_or(SetTtl::Persistent, SetTtl::At);
        return emit_set(c, key, &bytes, ttl);
    }
    let Ctx { ks, muts, .. } = c;
    let Some(v) = ks.get(key) else { return };
    // One mutation per element, each its name, the key and the element's parts (an argument's
    // header is at most a dozen bytes): reserved at once.
    let (n, args_each) = match &v {
        ValueRef::Str(_) | ValueRef::Stream(_) | ValueRef::VectorSet(_) => (0, 0),
        ValueRef::List(l) => (l.len(), 3),
        ValueRef::Set(s) => (s.len(), 3),
        ValueRef::Hash(h) => (h.len(), 4),
        ValueRef::ZSet(z) => (z.len(), 4),
        ValueRef::Array(a) => (a.count(), 4),
    };
    if n > 0 {
        let each = 16 + args_each * 12 + key.len();
        muts.reserve(n, args_each, n.saturating_mul(each).saturating_add(ks.mem_usage(key).unwrap_or(0)));
    }
    let mut b = itoa::Buffer::new();
    match v {
        ValueRef::Str(_) => {}
        ValueRef::List(l) => {
            for e in l.iter() {
                e.with_bytes(|e| muts.push(&[b"RPUSH", key, e]));
            }
        }
        ValueRef::Set(s) => s.for_each(|m| muts.push(&[b"SADD", key, m])),
        ValueRef::Hash(h) => {
            for (f, v) in h.iter() {
                muts.push(&[b"HSET", key, f, v]);
            }
            // Field deadlines: one HPEXPIREAT per field (they seldom share a millisecond).
            for (f, t) in h.field_deadlines() {
                muts.push(&[b"HPEXPIREAT", key, b.format(t).as_bytes(), b"FIELDS", b"1", f]);
            }
        }
        ValueRef::ZSet(z) => {
            for (m, s) in z.iter() {
                muts.push(&[b"ZADD", key, format_f64(s).as_bytes(), m]);
            }
        }
        ValueRef::Array(a) => {
            a.for_each_in(0, u64::MAX, false, |i, e| {
                e.with_bytes(|e| muts.push(&[b"ARSET", key, b.format(i).as_bytes(), e]));
                true
            });
            let cur = a.cursor();
            if cur != store::types::array::CURSOR_UNSET {
                muts.push(&[b"ARSEEK", key, b.format(cur + 1).as_bytes()]);
            }
        }
        ValueRef::Stream(s) => emit_stream(muts, key, s),
        // The graph is part of the value (VSIM's answers depend on it) and cannot be rebuilt
        // element by element: the whole value travels as one RESTORE of its own payload.
        ValueRef::VectorSet(_) => {
            let payload = crate::rdb::dump_exact(v);
            muts.push(&[b"RESTORE", key, b"0", &payload, b"REPLACE"]);
        }
    }
}

/// The writes that build stream `s` at `key` from nothing: its entries, IDs and counters, its
/// groups with their pending entries and consumers.
///
/// - `XADD key <id> field value ...` per live entry, in ID order. A stream without entries is
///   created by `XADD key MAXLEN 0 0-1 f v` instead (added and trimmed away at once): the key
///   must exist before XSETID, which refuses a missing key, and 0-1 is the least ID XADD takes.
/// - `XSETID key <last id> ENTRIESADDED <n> MAXDELETEDID <id>` puts the counters back (XSETID
///   lowers the last ID of an empty stream too, down to 0-0).
/// - Per group, in name order: `XGROUP CREATE key group <last id> ENTRIESREAD <n>` (n may be
///   -1, "unknown"), `XGROUP CREATECONSUMER key group consumer` per consumer (name order), and
///   `XCLAIM key group consumer 0 <id> TIME <ms> RETRYCOUNT <n> FORCE JUSTID LASTID <group last
///   id>` per pending entry, in ID order (FORCE creates the PEL entry even when the stream no
///   longer holds the ID; LASTID equal to the group's own leaves it unchanged).
///
/// Consumers' seen and active times are not written: like a key's access time they record
/// when a command last ran, and a replica keeps its own.
fn emit_stream(muts: &mut crate::batch::Batch, key: &[u8], s: &store::Stream) {
    use store::StreamId;
    s.range(StreamId::MIN, StreamId::MAX, false, |id, fields| {
        let idb = id.to_bytes();
        let mut args: Vec<&[u8]> = Vec::with_capacity(3 + 2 * fields.len());
        args.extend_from_slice(&[b"XADD", key, &idb]);
        for (f, v) in fields {
            args.push(f);
            args.push(v);
        }
        muts.push(&args);
        true
    });
    if s.is_empty() {
        muts.push(&[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"f", b"v"]);
    }
    let mut b = itoa::Buffer::new();
    let (last, maxdel) = (s.last_id().to_bytes(), s.max_deleted_id().to_bytes());
    muts.push(&[
        b"XSETID",
        key,
        &last,
        b"ENTRIESADDED",
        b.format(s.entries_added()).as_bytes(),
        b"MAXDELETEDID",
        &maxdel,
    ]);
    for (name, g) in s.groups().into_iter().flatten() {
        let glast = g.last_id.to_bytes();
        muts.push(&[
            b"XGROUP",
            b"CREATE",
            key,
            name,
            &glast,
            b"ENTRIESREAD",
            b.format(g.entries_read).as_bytes(),
        ]);
        for c in g.consumers().keys() {
            muts.push(&[b"XGROUP", b"CREATECONSUMER", key, name, c]);
        }
        for (id, p) in g.pel() {
            let (idb, time) = (id.to_bytes(), p.delivery_time.to_string());
            muts.push(&[
                b"XCLAIM",
                key,
                name,
                p.consumer(),
                b"0",
                &idb,
                b"TIME",
                time.as_bytes(),
                b"RETRYCOUNT",
                b.format(p.delivery_count).as_bytes(),
                b"FORCE",
                b"JUSTID",
                b"LASTID",
                &glast,
            ]);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{reply as run, take_muts};
    use crate::Engine;

    fn dump_hex(e: &mut Engine, key: &str) -> Vec<u8> {
        let mut out = Vec::new();
        e.run(&[b"DUMP", key.as_bytes()], 0, &mut out);
        // $<len>\r\n<payload>\r\n
        let start = out.iter().position(|&b| b == b'\n').unwrap() + 1;
        out[start..out.len() - 2].to_vec()
    }

    fn restore(e: &mut Engine, now: i64, key: &str, ttl: &str, payload: &[u8], opts: &[&str]) -> String {
        let mut args: Vec<&[u8]> = vec![b"RESTORE", key.as_bytes(), ttl.as_bytes(), payload];
        args.extend(opts.iter().map(|o| o.as_bytes()));
        let mut out = Vec::new();
        e.run(&args, now, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn dump_restore_errors_and_mutations() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, 0, &["DUMP", "nope"]), "$-1\r\n");
        run(&mut e, 0, &["RPUSH", "l", "a", "b"]);
        take_muts(&mut e);
        let p = dump_hex(&mut e, "l");
        assert_eq!(restore(&mut e, 0, "l", "0", &p, &[]), "-BUSYKEY Target key name already exists.\r\n");
        assert_eq!(restore(&mut e, 0, "m", "-1", &p, &[]), "-ERR Invalid TTL value, must be >= 0\r\n");
        assert_eq!(restore(&mut e, 0, "m", "x", &p, &[]), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(restore(&mut e, 0, "m", "0", &p, &["FOO"]), "-ERR syntax error\r\n");
        assert_eq!(
            restore(&mut e, 0, "m", "0", &p, &["IDLETIME", "-1"]),
            "-ERR Invalid IDLETIME value, must be >= 0\r\n"
        );
        assert_eq!(
            restore(&mut e, 0, "m", "0", &p, &["FREQ", "256"]),
            "-ERR Invalid FREQ value, must be >= 0 and <= 255\r\n"
        );
        assert_eq!(
            restore(&mut e, 0, "m", "0", &p, &["FREQ", "1", "IDLETIME", "1"]),
            "-ERR syntax error\r\n"
        );
        let mut bad = p.clone();
        bad[0] ^= 0x40;
        assert_eq!(
            restore(&mut e, 0, "m", "0", &bad, &[]),
            "-ERR DUMP payload version or checksum are wrong\r\n"
        );
        assert!(take_muts(&mut e).is_empty());
        // REPLACE over a live key: DEL, the elements, the deadline.
        assert_eq!(restore(&mut e, 1000, "l", "500", &p, &["REPLACE"]), "+OK\r\n");
        assert_eq!(take_muts(&mut e), ["DEL l", "RPUSH l a", "RPUSH l b", "PEXPIREAT l 1500"]);
        // A past absolute deadline only deletes.
        assert_eq!(restore(&mut e, 1000, "l", "999", &p, &["REPLACE", "ABSTTL"]), "+OK\r\n");
        assert_eq!(take_muts(&mut e), ["DEL l"]);
        assert_eq!(run(&mut e, 1000, &["EXISTS", "l"]), ":0\r\n");
        // A string carries its deadline in its SET.
        run(&mut e, 0, &["SET", "s", "12"]);
        let p = dump_hex(&mut e, "s");
        take_muts(&mut e);
        assert_eq!(restore(&mut e, 10, "t", "5000", &p, &["ABSTTL"]), "+OK\r\n");
        assert_eq!(take_muts(&mut e), ["SET t 12 PXAT 5000"]);
    }

    #[test]
    fn restore_of_a_stream_emits_its_rebuild() {
        let mut e = Engine::default();
        run(&mut e, 0, &["XADD", "s", "1-1", "a", "1", "b", "x"]);
        run(&mut e, 0, &["XADD", "s", "2-0", "c", "3"]);
        run(&mut e, 0, &["XADD", "s", "3-0", "c", "4"]);
        run(&mut e, 0, &["XDEL", "s", "3-0"]);
        if let Some(store::ValueMut::Stream(s)) = e.ks.get_mut(b"s") {
            s.create_group(b"g", store::StreamId::new(2, 0), 2);
            let g = s.group_mut(b"g").unwrap();
            g.create_consumer(b"idle", 5);
            g.set_pending(store::StreamId::new(1, 1), b"alice", 77, 3);
            s.create_group(b"h", store::StreamId::MIN, -1);
        } else {
            panic!("no stream");
        }
        take_muts(&mut e);
        let p = dump_hex(&mut e, "s");
        assert_eq!(restore(&mut e, 1000, "t", "500", &p, &[]), "+OK\r\n");
        assert_eq!(
            take_muts(&mut e),
            [
                "XADD t 1-1 a 1 b x",
                "XADD t 2-0 c 3",
                "XSETID t 3-0 ENTRIESADDED 3 MAXDELETEDID 3-0",
                "XGROUP CREATE t g 2-0 ENTRIESREAD 2",
                "XGROUP CREATECONSUMER t g alice",
                "XGROUP CREATECONSUMER t g idle",
                "XCLAIM t g alice 0 1-1 TIME 77 RETRYCOUNT 3 FORCE JUSTID LASTID 2-0",
                "XGROUP CREATE t h 0-0 ENTRIESREAD -1",
                "PEXPIREAT t 1500",
            ]
        );
        // An empty stream is created, then emptied, before XSETID (which needs the key).
        run(&mut e, 0, &["XADD", "u", "MAXLEN", "0", "9-9", "f", "v"]);
        let p = dump_hex(&mut e, "u");
        take_muts(&mut e);
        assert_eq!(restore(&mut e, 0, "u", "0", &p, &["REPLACE"]), "+OK\r\n");
        assert_eq!(
            take_muts(&mut e),
            ["DEL u", "XADD u MAXLEN 0 0-1 f v", "XSETID u 9-9 ENTRIESADDED 1 MAXDELETEDID 0-0"]
        );
        assert_eq!(run(&mut e, 0, &["XLEN", "u"]), ":0\r\n");
        assert_eq!(run(&mut e, 0, &["TYPE", "u"]), "+stream\r\n");
        // The emptiest stream (last ID 0-0, as XGROUP CREATE .. MKSTREAM leaves one): its
        // rebuild, applied to a fresh engine, makes the same value.
        e.ks.insert(b"z", store::Value::Stream(Box::new(store::Stream::new())), None);
        let p = dump_hex(&mut e, "z");
        take_muts(&mut e);
        assert_eq!(restore(&mut e, 0, "y", "0", &p, &[]), "+OK\r\n");
        let muts = take_muts(&mut e);
        assert_eq!(muts, ["XADD y MAXLEN 0 0-1 f v", "XSETID y 0-0 ENTRIESADDED 0 MAXDELETEDID 0-0"]);
        let mut replica = Engine::default();
        for m in &muts {
            let args: Vec<&str> = m.split(' ').collect();
            assert!(!run(&mut replica, 0, &args).starts_with('-'), "{m}");
        }
        assert_eq!(replica.ks.get(b"y").unwrap().to_plain(), e.ks.get(b"z").unwrap().to_plain());
    }

    /// RESTORE's rebuild of a stream with groups replays (as a replica or a journal replay
    /// applies records) to the same value, PEL and consumers included, a pending entry whose
    /// stream entry was deleted too.
    #[test]
    fn restored_groups_replay() {
        use store::StreamId;
        let mut e = Engine::default();
        for (id, f) in [("1-1", "a"), ("2-0", "b"), ("3-0", "a"), ("4-0", "c")] {
            run(&mut e, 0, &["XADD", "s", id, f, "v"]);
        }
        run(&mut e, 0, &["XDEL", "s", "2-0"]);
        if let Some(store::ValueMut::Stream(s)) = e.ks.get_mut(b"s") {
            s.create_group(b"g", StreamId::new(3, 0), 3);
            let g = s.group_mut(b"g").unwrap();
            g.create_consumer(b"idle", 5);
            g.set_pending(StreamId::new(1, 1), b"alice", 77, 3);
            g.set_pending(StreamId::new(2, 0), b"alice", 78, 1); // deleted while pending
            g.set_pending(StreamId::new(3, 0), b"bob", 79, 2);
            s.create_group(b"h", StreamId::MIN, -1);
        }
        let p = dump_hex(&mut e, "s");
        take_muts(&mut e);
        assert_eq!(restore(&mut e, 0, "t", "0", &p, &[]), "+OK\r\n");
        let mut replica = Engine::default();
        replica.replaying = true;
        for m in take_muts(&mut e) {
            let args: Vec<&str> = m.split(' ').collect();
            assert!(!run(&mut replica, 0, &args).starts_with('-'), "{m}");
        }
        assert_eq!(replica.ks.get(b"t").unwrap().to_plain(), e.ks.get(b"s").unwrap().to_plain());
    }
}
