//! Stream commands: XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XSETID, XREAD and
//! XREADGROUP. (Consumer-group administration, acknowledgement, claiming and XINFO are in
//! `stream_group.rs`.)
//!
//! Canonical mutations: a stream's effects depend on order, so every record is keyless and
//! replays the exact post-state on the same prior state:
//! - `XADD key <id> field value ...` with the ID it assigned (never `*` or `ms-*`), then, if
//!   its MAXLEN/MINID removed entries, `XTRIM key MAXLEN = <length left>`;
//! - `XTRIM key MAXLEN = <length left>` for XTRIM (exact trimming of the same prefix, whatever
//!   strategy or `~` removed it); with DELREF or ACKED, `XTRIM key MINID = <id> DELREF|ACKED`
//!   and the XACKs of the pending entries DELREF dropped (`stream_refs.rs`);
//! - `XDEL key <id>...` with the IDs actually deleted;
//! - `XSETID key <id> ENTRIESADDED <n> MAXDELETEDID <id>` (all three always);
//! - XREADGROUP: `XGROUP CREATECONSUMER key group consumer` when it creates the consumer, one
//!   `XCLAIM key group consumer 0 <id> TIME <ms> RETRYCOUNT <n> FORCE JUSTID LASTID <group
//!   last id>` per pending entry it creates or updates (Redis's own propagation form), and
//!   `XGROUP SETID key group <last id> ENTRIESREAD <n>` when the group's last ID moved, so
//!   that the read counter is exact on a replica too.
//!
//! Nothing is emitted for a write that changed nothing.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::commands::stream_idmp::{self, IdmpArg};
use crate::commands::stream_refs::{trim_by_refs, trim_record, RefPolicy};
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{eq_ic, parse_i64};
use resp::reply;
use store::types::stream::{Field, Trim, ENTRIES_READ_UNKNOWN};
use store::{Millis, Stream, StreamId, Value, ValueMut, ValueRef};

const R: u32 = Flags::READONLY;
const WDF: u32 = Flags::WRITE | Flags::DENYOOM | Flags::FAST;
const WF: u32 = Flags::WRITE | Flags::FAST;
const W: u32 = Flags::WRITE;
const WD: u32 = Flags::WRITE | Flags::DENYOOM;
const K1: (i32, i32, i32) = (1, 1, 1);
const G: &str = "stream";

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec("xadd", -5, WDF, K1, G, "Appends a new message to a stream. Creates the key if it doesn't exist.", Handler::Data(xadd)),
    spec("xrange", -4, R, K1, G, "Returns the messages from a stream within a range of IDs.", Handler::Data(xrange)),
    spec("xrevrange", -4, R, K1, G, "Returns the messages from a stream within a range of IDs in reverse order.", Handler::Data(xrevrange)),
    spec("xlen", 2, R | Flags::FAST, K1, G, "Return the number of messages in a stream.", Handler::Data(xlen)),
    spec("xdel", -3, WF, K1, G, "Returns the number of messages after removing them from a stream.", Handler::Data(xdel)),
    spec("xtrim", -4, W, K1, G, "Deletes messages from the beginning of a stream.", Handler::Data(xtrim)),
    spec("xsetid", -3, WDF, K1, G, "An internal command for replicating stream values.", Handler::Data(xsetid)),
    spec("xread", -4, R | Flags::BLOCKING | Flags::MOVABLEKEYS, (0, 0, 0), G, "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.", Handler::Data(xread)),
    spec("xreadgroup", -7, WD | Flags::BLOCKING | Flags::MOVABLEKEYS, (0, 0, 0), G, "Returns new or historical messages from a stream for a consumer in a group. Blocks until a message is available otherwise.", Handler::Data(xreadgroup)),
];

pub const INVALID_ID: &[u8] = b"ERR Invalid stream ID specified as stream command argument";

/// Parses an ID argument as Redis does for commands that take `-` and `+` (`strict` false)
/// or refuse them (`strict` true); a bare `ms` gets `missing_seq`.
pub fn parse_id(a: &[u8], missing_seq: u64, strict: bool) -> Result<StreamId, &'static [u8]> {
    match a {
        b"-" if !strict => Ok(StreamId::MIN),
        b"+" if !strict => Ok(StreamId::MAX),
        _ if a.len() > 127 => Err(INVALID_ID),
        _ => StreamId::parse(a, missing_seq).ok_or(INVALID_ID),
    }
}

/// A range bound: `-`, `+`, `ms`, `ms-seq`, or `(`id for an exclusive bound.
fn parse_bound(a: &[u8], missing_seq: u64) -> Result<(StreamId, bool), &'static [u8]> {
    if a.len() > 1 && a[0] == b'(' {
        Ok((parse_id(&a[1..], missing_seq, true)?, true))
    } else {
        Ok((parse_id(a, missing_seq, false)?, false))
    }
}

/// What a key holds, for a stream command.
pub enum Look<'a> {
    Missing,
    Wrong,
    Stream(&'a Stream),
}

/// Looks `key` up for reading.
pub fn look<'a>(c: &'a mut Ctx, key: &[u8]) -> Look<'a> {
    match c.read(key) {
        None => Look::Missing,
        Some(ValueRef::Stream(s)) => Look::Stream(s),
        Some(_) => Look::Wrong,
    }
}

/// The stream at `key` for writing: Ok(None) when missing, Err when another type.
#[allow(clippy::result_unit_err)]
pub fn stream_mut<'a>(c: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a mut Stream>, ()> {
    match c.write(key) {
        None => Ok(None),
        Some(ValueMut::Stream(s)) => Ok(Some(s)),
        Some(_) => Err(()),
    }
}

/// Replies one entry: `[id, [field, value, ...]]`.
pub fn reply_entry(out: &mut Vec<u8>, id: StreamId, fields: &[Field<'_>]) {
    reply::array_len(out, 2);
    reply_entry_body(out, id, fields);
}

/// The id and fields of an entry, inside an array the caller opened.
fn reply_entry_body(out: &mut Vec<u8>, id: StreamId, fields: &[Field<'_>]) {
    reply_id(out, id);
    reply::array_len(out, fields.len() * 2);
    for (f, v) in fields {
        reply::bulk(out, f);
        reply::bulk(out, v);
    }
}

/// An entry as XREADGROUP CLAIM answers it: `[id, [field, value, ...], idle ms, deliveries]`.
fn reply_claimed_entry(out: &mut Vec<u8>, id: StreamId, fields: &[Field<'_>], idle: i64, delivered: u64) {
    reply::array_len(out, 4);
    reply_entry_body(out, id, fields);
    reply::integer(out, idle);
    reply::integer(out, delivered.min(i64::MAX as u64) as i64);
}

pub fn reply_id(out: &mut Vec<u8>, id: StreamId) {
    let mut b = Vec::with_capacity(24);
    id.write_to(&mut b);
    reply::bulk(out, &b);
}

/// Trimming options shared by XADD and XTRIM (and XADD's IDMP option).
#[derive(Default)]
struct TrimArgs<'a> {
    how: Option<Trim>,
    approx: bool,
    limit: Option<i64>,
    nomkstream: bool,
    /// KEEPREF | DELREF | ACKED (Redis 8.2): what the trim does to the groups' references.
    policy: Option<RefPolicy>,
    /// XADD: the ID argument's position, the ID and whether its sequence was given.
    id_at: usize,
    id: Option<(StreamId, bool)>,
    /// XADD's `IDMP pid iid` or `IDMPAUTO pid` (Redis 8.6; `stream_idmp.rs`).
    idmp: Option<IdmpArg<'a>>,
}

/// Parses `[MAXLEN|MINID [=|~] threshold [LIMIT n]] [NOMKSTREAM]` from args[2..] and, for
/// XADD, the ID that ends them. Replies the error and returns None on bad input.
fn parse_trim_args<'a>(c: &Ctx, out: &mut Vec<u8>, args: &[&'a [u8]], xadd: bool) -> Option<TrimArgs<'a>> {
    let mut t = TrimArgs::default();
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args[i];
        if xadd && opt == b"*" {
            t.id_at = i;
            break;
        } else if (eq_ic(opt, b"maxlen") || eq_ic(opt, b"minid")) && more > 0 {
            if t.how.is_some() {
                reply::error(
                    out,
                    b"ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                );
                return None;
            }
            t.approx = false;
            if more >= 2 && (args[i + 1] == b"~" || args[i + 1] == b"=") {
                t.approx = args[i + 1] == b"~";
                i += 1;
            }
            let v = args[i + 1];
            if eq_ic(opt, b"maxlen") {
                let Some(n) = parse_i64(v) else {
                    reply::error(out, errors::NOT_INTEGER);
                    return None;
                };
                if n < 0 {
                    reply::error(out, b"ERR The MAXLEN argument must be >= 0.");
                    return None;
                }
                t.how = Some(Trim::MaxLen(n as u64));
            } else {
                match parse_id(v, 0, true) {
                    Ok(id) => t.how = Some(Trim::MinId(id)),
                    Err(e) => {
                        reply::error(out, e);
                        return None;
                    }
                }
            }
            i += 2;
            continue;
        } else if eq_ic(opt, b"limit") && more > 0 {
            let Some(n) = parse_i64(args[i + 1]) else {
                reply::error(out, errors::NOT_INTEGER);
                return None;
            };
            if n < 0 {
                reply::error(out, b"ERR The LIMIT argument must be >= 0.");
                return None;
            }
            t.limit = Some(n);
            i += 2;
            continue;
        } else if let Some(p) = RefPolicy::from_word(opt).filter(|_| t.policy.is_none()) {
            // A second policy word is not an option: XTRIM calls it a syntax error, XADD
            // takes it for the ID (and finds it invalid), as Redis's shared parser does.
            t.policy = Some(p);
        } else if xadd && eq_ic(opt, b"nomkstream") {
            t.nomkstream = true;
        } else if let Some(parsed) =
            xadd.then(|| stream_idmp::parse_option(args, i, t.idmp.is_some())).flatten()
        {
            match parsed {
                Ok((arg, next)) => {
                    t.idmp = Some(arg);
                    i = next;
                    continue;
                }
                Err(e) => {
                    reply::error(out, e);
                    return None;
                }
            }
        } else if xadd {
            let (id, seq_given) = match parse_xadd_id(opt) {
                Ok(v) => v,
                Err(e) => {
                    reply::error(out, e);
                    return None;
                }
            };
            t.id_at = i;
            t.id = Some((id, seq_given));
            break;
        } else {
            reply::error(out, errors::SYNTAX);
            return None;
        }
        i += 1;
    }
    if xadd && t.id_at == 0 {
        // Options ran to the end with no ID: too few arguments for an entry.
        t.id_at = args.len();
    }
    if t.idmp.is_some() && t.id.is_some() {
        reply::error(out, stream_idmp::ONLY_AUTO_IDS);
        return None;
    }
    if t.limit.is_some_and(|l| l > 0) && t.how.is_none() {
        reply::error(out, b"ERR syntax error, LIMIT cannot be used without specifying a trimming strategy");
        return None;
    }
    if !xadd && t.how.is_none() {
        reply::error(out, b"ERR syntax error, XTRIM must be called with a trimming strategy");
        return None;
    }
    if c.replaying {
        // A record's trim was exact already (see the module docs).
        t.limit = Some(0);
    } else if t.limit.is_some() {
        if !t.approx {
            reply::error(out, b"ERR syntax error, LIMIT cannot be used without the special ~ option");
            return None;
        }
    } else if t.approx {
        let per = store::limits::get(&store::limits::STREAM_NODE_MAX_ENTRIES) as i64;
        let l = per.saturating_mul(100);
        t.limit = Some(if l <= 0 { 10_000 } else { l.min(1_000_000) });
    }
    Some(t)
}

/// XADD's ID: `ms-seq`, `ms` (sequence 0), or `ms-*` (sequence chosen): (id, seq given).
fn parse_xadd_id(a: &[u8]) -> Result<(StreamId, bool), &'static [u8]> {
    if a == b"-" || a == b"+" || a.len() > 127 {
        return Err(INVALID_ID);
    }
    if let Some(ms) = a.strip_suffix(b"-*") {
        let ms = store::types::stream::parse_u64(ms).ok_or(INVALID_ID)?;
        return Ok((StreamId::new(ms, 0), false));
    }
    Ok((StreamId::parse(a, 0).ok_or(INVALID_ID)?, true))
}

/// Applies a parsed trim to `s`: the entries removed, and the trim's canonical records.
fn apply_trim(s: &mut Stream, key: &[u8], t: &TrimArgs) -> (u64, Vec<Vec<Vec<u8>>>) {
    let Some(how) = t.how else { return (0, Vec::new()) };
    let limit = t.limit.unwrap_or(0).max(0) as u64;
    match t.policy.unwrap_or_default() {
        RefPolicy::KeepRef => {
            let removed = s.trim(how, t.approx, limit);
            let mut muts = Vec::new();
            if removed > 0 {
                let len = itoa::Buffer::new().format(s.len()).as_bytes().to_vec();
                muts.push(vec![b"XTRIM".to_vec(), key.to_vec(), b"MAXLEN".to_vec(), b"=".to_vec(), len]);
            }
            (removed, muts)
        }
        policy => {
            // Entry by entry; `~` changes nothing here but for its LIMIT (as in Redis).
            let mut muts = Vec::new();
            let (removed, last) = trim_by_refs(s, key, how, policy, limit, &mut muts);
            muts.extend(last.map(|last| trim_record(key, policy, last)));
            (removed, muts)
        }
    }
}

/// XADD key [NOMKSTREAM] [KEEPREF|DELREF|ACKED] [IDMPAUTO pid | IDMP pid iid]
///      [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value [...]
fn xadd(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(t) = parse_trim_args(c, out, args, true) else { return };
    let fields_at = t.id_at + 1;
    let nf = args.len().saturating_sub(fields_at);
    if nf < 2 || nf % 2 == 1 {
        return reply::error(out, b"ERR wrong number of arguments for 'xadd' command");
    }
    if let Some((id, true)) = t.id {
        if id == StreamId::MIN {
            return reply::error(out, b"ERR The ID specified in XADD must be greater than 0-0");
        }
    }
    let key = args[1];
    let now = c.now;
    let proto = c.proto;
    // One lookup: a new stream is built aside and inserted once the entry is in it.
    let mut fresh = Stream::new();
    let mut created = false;
    let s: &mut Stream = match stream_mut(c, key) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(None) if t.nomkstream => return reply::null_bulk(out, proto),
        Ok(None) => {
            created = true;
            &mut fresh
        }
        Ok(Some(s)) => s,
    };
    let pairs: Vec<Field<'_>> = args[fields_at..].chunks_exact(2).map(|p| (p[0], p[1])).collect();
    let auto = matches!(t.idmp, Some(IdmpArg::Auto(_))).then(|| stream_idmp::auto_iid(&pairs));
    let idmp: Option<(&[u8], &[u8])> = t.idmp.map(|a| match a {
        IdmpArg::Given(pid, iid) => (pid, iid),
        IdmpArg::Auto(pid) => (pid, auto.as_ref().map_or(&[][..], |a| &a[..])),
    });
    if let Some((pid, iid)) = idmp {
        if let Some(original) = stream_idmp::duplicate_of(s, pid, iid, now) {
            return reply_id(out, original);
        }
    }
    let last = s.last_id();
    if last == StreamId::MAX {
        return reply::error(
            out,
            b"ERR The stream has exhausted the last possible ID, unable to add more items",
        );
    }
    let id = match t.id {
        Some((id, true)) => id,
        Some((want, false)) => {
            if last.ms == want.ms {
                match last.seq.checked_add(1) {
                    Some(seq) => StreamId::new(want.ms, seq),
                    None => return reply::error(
                        out,
                        b"ERR The ID specified in XADD is equal or smaller than the target stream top item",
                    ),
                }
            } else {
                want
            }
        }
        None => {
            let ms = now.max(0) as u64;
            if ms > last.ms {
                StreamId::new(ms, 0)
            } else {
                last.next().expect("last is below MAX")
            }
        }
    };
    if id <= last {
        return reply::error(
            out,
            b"ERR The ID specified in XADD is equal or smaller than the target stream top item",
        );
    }
    s.append(id, &pairs);
    let recorded = idmp.and_then(|(pid, iid)| stream_idmp::record_added(s, pid, iid, id));
    let (_, trimmed) = apply_trim(s, key, &t);
    if created {
        c.ks.insert(key, Value::Stream(Box::new(fresh)), None);
    }
    reply_id(out, id);
    let mut idb = Vec::with_capacity(24);
    id.write_to(&mut idb);
    let mut m: Vec<&[u8]> = Vec::with_capacity(3 + nf);
    m.extend_from_slice(&[b"XADD", key, &idb]);
    m.extend_from_slice(&args[fields_at..]);
    c.emit(&m);
    if let (Some((pid, iid)), Some(created)) = (idmp, recorded) {
        stream_idmp::emit_recorded(c, key, pid, iid, id, created);
    }
    c.emit_all(&trimmed);
    c.signal_ready(key);
}

fn range_generic(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]], rev: bool) {
    let (sa, ea) = if rev { (args[3], args[2]) } else { (args[2], args[3]) };
    let (mut start, sx) = match parse_bound(sa, 0) {
        Ok(v) => v,
        Err(e) => return reply::error(out, e),
    };
    if sx {
        match start.next() {
            Some(n) => start = n,
            None => return reply::error(out, b"ERR invalid start ID for the interval"),
        }
    }
    let (mut end, ex) = match parse_bound(ea, u64::MAX) {
        Ok(v) => v,
        Err(e) => return reply::error(out, e),
    };
    if ex {
        match end.prev() {
            Some(p) => end = p,
            None => return reply::error(out, b"ERR invalid end ID for the interval"),
        }
    }
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if eq_ic(args[j], b"count") && j + 1 < args.len() {
            match parse_i64(args[j + 1]) {
                Some(n) => count = n.max(0),
                None => return reply::error(out, errors::NOT_INTEGER),
            }
            j += 2;
        } else {
            return reply::error(out, errors::SYNTAX);
        }
    }
    let proto = c.proto;
    let s = match look(c, args[1]) {
        Look::Missing => return reply::array_len(out, 0),
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Stream(s) => s,
    };
    if count == 0 {
        return reply::null_array(out, proto);
    }
    let marker = reply::deferred_array_len(out);
    let mut n = 0usize;
    s.range(start, end, rev, |id, fields| {
        reply_entry(out, id, fields);
        n += 1;
        count < 0 || (n as i64) < count
    });
    reply::finish_deferred_len(out, marker, n);
}

/// XRANGE key start end [COUNT count]
fn xrange(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    range_generic(c, out, args, false)
}

/// XREVRANGE key end start [COUNT count]
fn xrevrange(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    range_generic(c, out, args, true)
}

/// XLEN key
fn xlen(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match look(c, args[1]) {
        Look::Missing => reply::integer(out, 0),
        Look::Wrong => reply::error(out, errors::WRONGTYPE),
        Look::Stream(s) => reply::integer(out, s.len() as i64),
    }
}

/// XDEL key id [id ...]
fn xdel(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    // As Redis: the key first (missing: 0, whatever the IDs), then every ID before deleting any.
    let key = args[1];
    let s = match stream_mut(c, key) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(None) => return reply::integer(out, 0),
        Ok(Some(s)) => s,
    };
    let mut ids = Vec::with_capacity(args.len() - 2);
    for a in &args[2..] {
        match parse_id(a, 0, true) {
            Ok(id) => ids.push(id),
            Err(e) => return reply::error(out, e),
        }
    }
    let mut deleted: Vec<StreamId> = Vec::new();
    for id in ids {
        if s.delete(id) {
            if id > s.max_deleted_id() {
                s.set_max_deleted_id(id);
            }
            deleted.push(id);
        }
    }
    reply::integer(out, deleted.len() as i64);
    if !deleted.is_empty() {
        let texts: Vec<Vec<u8>> = deleted.iter().map(|i| i.to_bytes()).collect();
        let mut m: Vec<&[u8]> = vec![b"XDEL", key];
        m.extend(texts.iter().map(|t| t.as_slice()));
        c.emit(&m);
    }
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
fn xtrim(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(t) = parse_trim_args(c, out, args, false) else { return };
    let key = args[1];
    let s = match stream_mut(c, key) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(None) => return reply::integer(out, 0),
        Ok(Some(s)) => s,
    };
    let (removed, trimmed) = apply_trim(s, key, &t);
    reply::integer(out, removed as i64);
    c.emit_all(&trimmed);
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
fn xsetid(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let id = match parse_id(args[2], 0, true) {
        Ok(id) => id,
        Err(e) => return reply::error(out, e),
    };
    let mut added: Option<i64> = None;
    let mut maxdel: Option<StreamId> = None;
    let mut i = 3;
    while i < args.len() {
        if eq_ic(args[i], b"entriesadded") && i + 1 < args.len() {
            match parse_i64(args[i + 1]) {
                Some(n) if n < 0 => return reply::error(out, b"ERR entries_added must be positive"),
                Some(n) => added = Some(n),
                None => return reply::error(out, errors::NOT_INTEGER),
            }
            i += 2;
        } else if eq_ic(args[i], b"maxdeletedid") && i + 1 < args.len() {
            match parse_id(args[i + 1], 0, true) {
                // A record may carry a maximal deleted ID above the last ID: Redis lets a user
                // XSETID move the last ID below an entry deleted earlier (it checks only the
                // live top), and the record states the counter it kept.
                Ok(m) if id < m && !c.replaying => {
                    return reply::error(
                        out,
                        b"ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                    )
                }
                Ok(m) => maxdel = Some(m),
                Err(e) => return reply::error(out, e),
            }
            i += 2;
        } else {
            return reply::error(out, errors::SYNTAX);
        }
    }
    let key = args[1];
    let replaying = c.replaying;
    let s = match stream_mut(c, key) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(None) => return reply::error(out, errors::NO_SUCH_KEY),
        Ok(Some(s)) => s,
    };
    // Redis 8 first refuses an ID below the largest deleted one (a group's read counter
    // would otherwise count entries that can never exist); a replayed record of an older
    // writer may still hold one.
    if id < s.max_deleted_id() && !replaying {
        return reply::error(
            out,
            b"ERR The ID specified in XSETID is smaller than current max_deleted_entry_id",
        );
    }
    if !s.is_empty() && s.last_entry_id().is_some_and(|top| id < top) {
        return reply::error(
            out,
            b"ERR The ID specified in XSETID is smaller than the target stream top item",
        );
    }
    if let Some(a) = added {
        if (a as u64) < s.len() {
            return reply::error(
                out,
                b"ERR The entries_added specified in XSETID is smaller than the target stream length",
            );
        }
        s.set_entries_added(a as u64);
    }
    // As Redis: MAXDELETEDID 0-0 leaves the counter as it is.
    if let Some(m) = maxdel.filter(|m| *m != StreamId::MIN) {
        s.set_max_deleted_id(m);
    }
    s.set_last_id(id);
    let (added, maxdel) = (s.entries_added(), s.max_deleted_id());
    reply::ok(out);
    let (idb, mb) = (id.to_bytes(), maxdel.to_bytes());
    let mut b = itoa::Buffer::new();
    c.emit(&[b"XSETID", key, &idb, b"ENTRIESADDED", b.format(added).as_bytes(), b"MAXDELETEDID", &mb]);
}

/// The parsed arguments of XREAD / XREADGROUP.
struct ReadArgs<'a> {
    block: Option<Option<Millis>>,
    block_arg: Option<&'a [u8]>,
    count: usize,
    count_given: bool,
    group: Option<(&'a [u8], &'a [u8])>,
    noack: bool,
    /// XREADGROUP CLAIM min-idle-time (Redis 8.4): with `>`, first take over pending entries
    /// idle at least this long.
    claim: Option<Millis>,
    claim_arg: Option<&'a [u8]>,
    /// MAXCOUNT and MAXSIZE (Redis 8.10): caps on the whole reply, across its streams.
    max_count: Option<usize>,
    max_size: Option<usize>,
    keys: &'a [&'a [u8]],
    ids: &'a [&'a [u8]],
}

/// What is left of a read's MAXCOUNT and MAXSIZE as its streams are served in order: entries,
/// and reply bytes counted from where the reply began. The byte cap applies only once an
/// entry has been sent, so one entry larger than MAXSIZE still goes out (Redis's rule).
struct Budget {
    entries: Option<usize>,
    max_size: Option<usize>,
    start: usize,
    sent: usize,
}

impl Budget {
    /// Whether another entry may go into `out`.
    fn open(&self, out: &[u8]) -> bool {
        self.entries.is_none_or(|e| e > 0)
            && (self.sent == 0 || self.max_size.is_none_or(|m| out.len() - self.start < m))
    }

    fn took(&mut self) {
        self.sent += 1;
        if let Some(e) = self.entries.as_mut() {
            *e -= 1;
        }
    }

    /// COUNT for one stream (0: no bound) within what is left.
    fn count(&self, count: usize) -> usize {
        match (count, self.entries) {
            (0, Some(e)) => e,
            (c, Some(e)) => c.min(e),
            (c, None) => c,
        }
    }
}

fn parse_read<'a>(c: &Ctx, out: &mut Vec<u8>, args: &'a [&'a [u8]], group: bool) -> Option<ReadArgs<'a>> {
    let mut r = ReadArgs {
        block: None,
        block_arg: None,
        count: 0,
        count_given: false,
        group: None,
        noack: false,
        claim: None,
        claim_arg: None,
        max_count: None,
        max_size: None,
        keys: &[],
        ids: &[],
    };
    let mut streams_at = 0;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let o = args[i];
        if eq_ic(o, b"block") && more > 0 {
            i += 1;
            let Some(ms) = parse_i64(args[i]) else {
                reply::error(out, b"ERR timeout is not an integer or out of range");
                return None;
            };
            if ms < 0 {
                reply::error(out, errors::TIMEOUT_NEGATIVE);
                return None;
            }
            match crate::util::deadline_after(ms, c.now) {
                Ok(deadline) => r.block = Some(deadline),
                Err(e) => {
                    reply::error(out, e);
                    return None;
                }
            }
            r.block_arg = Some(args[i]);
        } else if eq_ic(o, b"count") && more > 0 {
            i += 1;
            let Some(n) = parse_i64(args[i]) else {
                reply::error(out, errors::NOT_INTEGER);
                return None;
            };
            r.count = n.max(0) as usize;
            r.count_given = true;
        } else if (eq_ic(o, b"maxcount") || eq_ic(o, b"maxsize")) && more > 0 {
            i += 1;
            let Some(n) = parse_i64(args[i]) else {
                reply::error(out, errors::NOT_INTEGER);
                return None;
            };
            let (name, cap) = if eq_ic(o, b"maxcount") {
                ("MAXCOUNT", &mut r.max_count)
            } else {
                ("MAXSIZE", &mut r.max_size)
            };
            if n <= 0 {
                reply::error(out, format!("ERR {name} must be a positive integer").as_bytes());
                return None;
            }
            *cap = Some(n as usize);
        } else if eq_ic(o, b"streams") && more > 0 {
            streams_at = i + 1;
            let n = args.len() - streams_at;
            if !n.is_multiple_of(2) {
                // Redis 8's words (7.0 said "XREAD" for both, and named only '$').
                reply::error(
                    out,
                    if group {
                        b"ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified."
                    } else {
                        b"ERR Unbalanced 'xread' list of streams: for each stream key an ID, '+', or '$' must be specified."
                    },
                );
                return None;
            }
            r.keys = &args[streams_at..streams_at + n / 2];
            r.ids = &args[streams_at + n / 2..];
            break;
        } else if eq_ic(o, b"group") && more >= 2 {
            if !group {
                reply::error(
                    out,
                    b"ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                );
                return None;
            }
            r.group = Some((args[i + 1], args[i + 2]));
            i += 2;
        } else if eq_ic(o, b"noack") {
            if !group {
                reply::error(
                    out,
                    b"ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                );
                return None;
            }
            r.noack = true;
        } else if eq_ic(o, b"claim") && more > 0 {
            if !group {
                reply::error(
                    out,
                    b"ERR The CLAIM option is only supported by XREADGROUP. You called XREAD instead.",
                );
                return None;
            }
            i += 1;
            match parse_i64(args[i]) {
                None => {
                    reply::error(out, b"ERR min-idle-time is not an integer or out of range");
                    return None;
                }
                Some(ms) if ms < 0 => {
                    reply::error(out, b"ERR min-idle-time must be a positive integer");
                    return None;
                }
                Some(ms) => {
                    r.claim = Some(ms);
                    r.claim_arg = Some(args[i]);
                }
            }
        } else {
            reply::error(out, errors::SYNTAX);
            return None;
        }
        i += 1;
    }
    if streams_at == 0 {
        reply::error(out, errors::SYNTAX);
        return None;
    }
    if group && r.group.is_none() {
        reply::error(out, b"ERR Missing GROUP option for XREADGROUP");
        return None;
    }
    if r.max_count.is_some_and(|m| r.count_given && r.count > m) {
        reply::error(out, b"ERR MAXCOUNT must be greater than or equal to COUNT");
        return None;
    }
    Some(r)
}

/// Where a read starts, per stream.
#[derive(Clone, Copy)]
enum From {
    /// Entries after this ID.
    After(StreamId),
    /// XREADGROUP `>`: entries after the group's last delivered ID.
    New,
    /// XREAD `+` (Redis 7.4): the stream's last entry.
    Last,
}

/// XREAD [COUNT count] [MAXCOUNT count] [MAXSIZE bytes] [BLOCK milliseconds] STREAMS key
/// [key ...] id [id ...]
fn xread(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    read_generic(c, out, args, false)
}

/// XREADGROUP GROUP group consumer [COUNT count] [MAXCOUNT count] [MAXSIZE bytes] [BLOCK
/// milliseconds] [NOACK] [CLAIM min-idle-time] STREAMS key [key ...] id [id ...]
fn xreadgroup(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    read_generic(c, out, args, true)
}

fn read_generic(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]], is_group: bool) {
    let Some(r) = parse_read(c, out, args, is_group) else { return };
    // Resolve every ID (and check every key's type and group) before serving any.
    let mut from: Vec<From> = Vec::with_capacity(r.keys.len());
    let mut resolved: Vec<Option<StreamId>> = Vec::with_capacity(r.keys.len());
    let retrying = c.retrying_blocked;
    for (k, a) in r.keys.iter().zip(r.ids) {
        let s = match look(c, k) {
            // A parked XREAD whose key became another type keeps waiting, as in Redis: only a
            // stream entry serves it. A parked XREADGROUP is answered as the command would be
            // now (Redis 7.2+ runs a woken command again): WRONGTYPE, or NOGROUP below for a
            // deleted key or a destroyed group.
            Look::Wrong if retrying && r.group.is_none() => None,
            Look::Wrong => return reply::error(out, errors::WRONGTYPE),
            Look::Missing => None,
            Look::Stream(s) => Some(s),
        };
        if let Some((g, _)) = r.group {
            if s.and_then(|s| s.group(g)).is_none() {
                let msg = format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    String::from_utf8_lossy(k),
                    String::from_utf8_lossy(g)
                );
                return reply::error(out, msg.as_bytes());
            }
        }
        let f = if *a == b"$" {
            if is_group {
                return reply::error(out, b"ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.");
            }
            let last = s.map_or(StreamId::MIN, |s| s.last_id());
            resolved.push(Some(last));
            From::After(last)
        } else if *a == b">" {
            if !is_group {
                return reply::error(out, b"ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.");
            }
            resolved.push(None);
            From::New
        } else if *a == b"+" && !is_group {
            resolved.push(None);
            From::Last
        } else {
            match parse_id(a, 0, true) {
                Ok(id) => {
                    resolved.push(None);
                    From::After(id)
                }
                Err(e) => return reply::error(out, e),
            }
        };
        from.push(f);
    }
    let proto = c.proto;
    let c_now = c.now;
    let mut served = 0usize;
    let mut marker = None;
    let mut budget = Budget { entries: r.max_count, max_size: r.max_size, start: out.len(), sent: 0 };
    for (i, key) in r.keys.iter().enumerate() {
        if !budget.open(out) {
            break;
        }
        let has = match look(c, key) {
            Look::Stream(s) => match (from[i], r.group) {
                (From::After(_), Some(_)) => true,
                (From::New, Some((g, _))) => {
                    let grp = s.group(g).expect("checked");
                    s.last_entry_id().is_some_and(|top| top > grp.last_id)
                        || r.claim.is_some_and(|idle| idle_enough(s, grp, c_now, idle).next().is_some())
                }
                (From::After(id), None) => s.last_entry_id().is_some_and(|top| top > id),
                (From::Last, _) => !s.is_empty(),
                (From::New, None) => false,
            },
            _ => false,
        };
        if !has {
            // Redis creates (and marks seen) the consumer even when nothing is delivered, a
            // read that then blocks included.
            if let (Some((g, consumer)), Look::Stream(_)) = (r.group, look(c, key)) {
                touch_consumer(c, key, g, consumer);
            }
            continue;
        }
        if marker.is_none() {
            marker = Some(reply::deferred_array_len(out));
        }
        served += 1;
        if !proto.is_resp3() {
            reply::array_len(out, 2);
        }
        reply::bulk(out, key);
        match r.group {
            None => {
                let Look::Stream(s) = look(c, key) else { unreachable!() };
                let m = reply::deferred_array_len(out);
                let mut n = 0usize;
                match from[i] {
                    From::Last => {
                        if let Some(id) = s.last_entry_id() {
                            let fields = s.get(id).unwrap_or_default();
                            reply_entry(out, id, &fields);
                            budget.took();
                            n = 1;
                        }
                    }
                    From::After(after) => {
                        if let Some(start) = after.next() {
                            let count = budget.count(r.count);
                            s.range(start, StreamId::MAX, false, |id, fields| {
                                reply_entry(out, id, fields);
                                budget.took();
                                n += 1;
                                (count == 0 || n < count) && budget.open(out)
                            });
                        }
                    }
                    From::New => {}
                }
                reply::finish_deferred_len(out, m, n);
            }
            Some((g, consumer)) => {
                serve_group(c, out, key, g, consumer, from[i], r.count, r.noack, r.claim, &mut budget)
            }
        }
    }
    if let Some(m) = marker {
        return reply::finish_deferred_keyed_len(out, m, proto, served);
    }
    match r.block {
        Some(deadline) if !c.replaying => {
            // Park with `$` resolved to the IDs it meant now (a retry must not see entries
            // added before it blocked as new), and a bounded COUNT as Redis gives a blocked
            // read, so a low ID cannot turn into a huge reply.
            let mut parked: Vec<Vec<u8>> = vec![args[0].to_vec()];
            if let Some((g, cons)) = r.group {
                parked.extend([b"GROUP".to_vec(), g.to_vec(), cons.to_vec()]);
            }
            if r.noack {
                parked.push(b"NOACK".to_vec());
            }
            if let Some(a) = r.claim_arg {
                parked.extend([b"CLAIM".to_vec(), a.to_vec()]);
            }
            if let Some(m) = r.max_count {
                parked.extend([b"MAXCOUNT".to_vec(), m.to_string().into_bytes()]);
            }
            if let Some(m) = r.max_size {
                parked.extend([b"MAXSIZE".to_vec(), m.to_string().into_bytes()]);
            }
            let count = if r.count_given { r.count } else { r.max_count.unwrap_or(1000).min(1000) };
            parked.extend([b"COUNT".to_vec(), count.to_string().into_bytes()]);
            parked.extend([b"BLOCK".to_vec(), r.block_arg.unwrap_or(b"0").to_vec()]);
            parked.push(b"STREAMS".to_vec());
            parked.extend(r.keys.iter().map(|k| k.to_vec()));
            for (a, res) in r.ids.iter().zip(&resolved) {
                parked.push(res.map_or_else(|| a.to_vec(), |id| id.to_bytes()));
            }
            // CLAIM: no key is signalled when a pending entry turns idle enough; ask to be
            // retried when the first one does.
            let recheck = match (r.claim, r.group) {
                (Some(min_idle), Some((g, _))) => r
                    .keys
                    .iter()
                    .zip(&from)
                    .filter(|(_, f)| matches!(f, From::New))
                    .filter_map(|(k, _)| match look(c, k) {
                        Look::Stream(s) => s.group(g).and_then(|grp| {
                            grp.pel()
                                .iter()
                                .filter(|(id, _)| s.contains(**id))
                                .map(|(_, p)| p.delivery_time.saturating_add(min_idle))
                                .min()
                        }),
                        _ => None,
                    })
                    .min(),
                _ => None,
            };
            c.block_with(crate::engine::BlockOn {
                keys: r.keys.iter().map(|k| k.to_vec()).collect(),
                deadline,
                args: Some(parked),
                recheck_at: recheck,
                keeps_turn: true,
            });
        }
        _ => reply::null_array(out, proto),
    }
}

/// XREADGROUP that delivers nothing from `key`: its consumer is created if new (`XGROUP
/// CREATECONSUMER` emitted) and its seen time set.
fn touch_consumer(c: &mut Ctx, key: &[u8], g: &[u8], consumer: &[u8]) {
    let now = c.now;
    let Ok(Some(s)) = stream_mut(c, key) else { return };
    let Some(grp) = s.group_mut(g) else { return };
    let created = grp.create_consumer(consumer, now);
    if let Some(cons) = grp.consumer_mut(consumer) {
        cons.seen_time = now;
    }
    if created {
        c.emit(&[b"XGROUP", b"CREATECONSUMER", key, g, consumer]);
    }
}

/// XREADGROUP CLAIM: the group's pending entries idle at least `min_idle` ms at `now`, longest
/// idle first (then by ID), at most `count` (0: all), as (id, idle ms, deliveries). An entry
/// whose data was deleted is passed over and stays pending.
fn claimable(
    s: &Stream,
    g: &store::types::stream::ConsumerGroup,
    now: Millis,
    min_idle: Millis,
    count: usize,
) -> Vec<(StreamId, i64, u64)> {
    let mut due: Vec<(Millis, StreamId, u64)> = idle_enough(s, g, now, min_idle).collect();
    due.sort_unstable();
    due.into_iter()
        .take(if count == 0 { usize::MAX } else { count })
        .map(|(t, id, n)| (id, now.saturating_sub(t).max(0), n))
        .collect()
}

/// The group's pending entries idle at least `min_idle` ms at `now` whose data is still in the
/// stream, as (delivery time, id, deliveries), in ID order.
fn idle_enough<'a>(
    s: &'a Stream,
    g: &'a store::types::stream::ConsumerGroup,
    now: Millis,
    min_idle: Millis,
) -> impl Iterator<Item = (Millis, StreamId, u64)> + 'a {
    g.pel()
        .iter()
        .filter(move |(id, p)| now.saturating_sub(p.delivery_time) >= min_idle && s.contains(**id))
        .map(|(id, p)| (p.delivery_time, *id, p.delivery_count))
}

/// Serves one stream of an XREADGROUP: new entries (`>`) or the consumer's history.
#[allow(clippy::too_many_arguments)]
fn serve_group(
    c: &mut Ctx,
    out: &mut Vec<u8>,
    key: &[u8],
    g: &[u8],
    consumer: &[u8],
    from: From,
    count: usize,
    noack: bool,
    claim: Option<Millis>,
    budget: &mut Budget,
) {
    let count = budget.count(count);
    let now = c.now;
    let proto = c.proto;
    let Ok(Some(s)) = stream_mut(c, key) else { unreachable!("checked by the caller") };
    // Borrow the entries and the group apart: clone what the group needs to see.
    let grp = s.group_mut(g).expect("checked");
    let created = grp.create_consumer(consumer, now);
    if let Some(cons) = grp.consumer_mut(consumer) {
        cons.seen_time = now;
    }
    let mut claims: Vec<(StreamId, u64)> = Vec::new();
    let m = reply::deferred_array_len(out);
    let mut n = 0usize;
    let old_last = grp.last_id;
    match from {
        From::After(after) => {
            // History: this consumer's own pending entries after `after`.
            let ids: Vec<StreamId> = match (after.next(), grp.consumer(consumer)) {
                (Some(start), Some(cons)) => cons
                    .pending()
                    .range(start..)
                    .take(if count == 0 { usize::MAX } else { count })
                    .copied()
                    .collect(),
                _ => Vec::new(),
            };
            for id in ids {
                if !budget.open(out) {
                    break;
                }
                budget.took();
                let s = match stream_mut(c, key) {
                    Ok(Some(s)) => s,
                    _ => unreachable!(),
                };
                match s.get(id) {
                    Some(fields) => {
                        reply_entry(out, id, &fields);
                        let grp = s.group_mut(g).expect("checked");
                        let p = grp.pending_mut(id).expect("in the consumer's PEL");
                        p.delivery_time = now;
                        p.delivery_count += 1;
                        claims.push((id, p.delivery_count));
                    }
                    None => {
                        reply::array_len(out, 2);
                        reply_id(out, id);
                        reply::null_array(out, proto);
                    }
                }
                n += 1;
            }
        }
        From::New | From::Last => {
            // CLAIM: pending entries idle long enough come first, longest idle first, each as
            // `[id, fields, idle ms, deliveries]` as they were before this read took them.
            if let Some(min_idle) = claim {
                let taken = claimable(s, s.group(g).expect("checked"), now, min_idle, count);
                for (id, idle, delivered) in taken {
                    if !budget.open(out) {
                        break;
                    }
                    budget.took();
                    let fields = s.get(id).expect("claimable entries exist");
                    reply_claimed_entry(out, id, &fields, idle, delivered);
                    let grp = s.group_mut(g).expect("checked");
                    let next = delivered.saturating_add(1);
                    grp.set_pending(id, consumer, now, next);
                    claims.push((id, next));
                    n += 1;
                }
            }
            let start = old_last.next();
            let mut got: Vec<StreamId> = Vec::new();
            let room = if count == 0 { usize::MAX } else { count.saturating_sub(n) };
            if let (Some(start), true) = (start, room > 0 && budget.open(out)) {
                s.range(start, StreamId::MAX, false, |id, fields| {
                    if claim.is_some() {
                        // New entries have been idle 0 ms and delivered 0 times.
                        reply_claimed_entry(out, id, fields, 0, 0);
                    } else {
                        reply_entry(out, id, fields);
                    }
                    got.push(id);
                    budget.took();
                    got.len() < room && budget.open(out)
                });
            }
            n += got.len();
            if n > 0 {
                // Redis 7.2's active time: when the consumer last got entries.
                if let Some(cons) = s.group_mut(g).and_then(|grp| grp.consumer_mut(consumer)) {
                    cons.active_time = now;
                }
            }
            for id in got {
                let counter = {
                    let grp = s.group(g).expect("checked");
                    // Redis 8 counts on only when nothing between the group's previous
                    // position and this entry is gone: the position is not behind the first
                    // entry (trimmed) and no deletion may lie after it.
                    let first = s.first_id().unwrap_or(StreamId::MIN);
                    if grp.entries_read != ENTRIES_READ_UNKNOWN
                        && grp.last_id >= first
                        && !s.has_tombstones_from(grp.last_id)
                    {
                        grp.entries_read + 1
                    } else if s.entries_added() > 0 {
                        s.estimate_entries_read(id)
                    } else {
                        grp.entries_read
                    }
                };
                let grp = s.group_mut(g).expect("checked");
                grp.entries_read = counter;
                grp.last_id = id;
                if !noack {
                    grp.set_pending(id, consumer, now, 1);
                    claims.push((id, 1));
                }
            }
        }
    }
    reply::finish_deferred_len(out, m, n);
    let Ok(Some(s)) = stream_mut(c, key) else { unreachable!() };
    let grp = s.group(g).expect("checked");
    let (last, entries_read) = (grp.last_id, grp.entries_read);
    if created {
        c.emit(&[b"XGROUP", b"CREATECONSUMER", key, g, consumer]);
    }
    let lastb = last.to_bytes();
    let mut b1 = itoa::Buffer::new();
    let mut b2 = itoa::Buffer::new();
    let nowb = b1.format(now).as_bytes().to_vec();
    for (id, count) in claims {
        let idb = id.to_bytes();
        c.emit(&[
            b"XCLAIM",
            key,
            g,
            consumer,
            b"0",
            &idb,
            b"TIME",
            &nowb,
            b"RETRYCOUNT",
            b2.format(count).as_bytes(),
            b"FORCE",
            b"JUSTID",
            b"LASTID",
            &lastb,
        ]);
    }
    if last != old_last {
        c.emit(&[b"XGROUP", b"SETID", key, g, &lastb, b"ENTRIESREAD", b1.format(entries_read).as_bytes()]);
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{reply, take_muts};
    use crate::Engine;

    #[test]
    fn maxcount_and_maxsize_cap_the_whole_reply() {
        let mut e = Engine::default();
        for k in ["a", "b"] {
            for i in 1..=3 {
                reply(&mut e, 0, &["XADD", k, &format!("{i}-0"), "f", &"x".repeat(i * 10)]);
            }
        }
        let ids = |r: &str| r.matches("-0\r\n").count();
        // COUNT per stream, MAXCOUNT over both, filled in the order the streams are named.
        let r = reply(&mut e, 0, &["XREAD", "COUNT", "3", "MAXCOUNT", "4", "STREAMS", "a", "b", "0", "0"]);
        assert_eq!(ids(&r), 4);
        assert!(r.starts_with("*2\r\n") && r.contains("$1\r\nb\r\n*1\r\n"), "{r}");
        let r = reply(&mut e, 0, &["XREAD", "MAXCOUNT", "2", "STREAMS", "a", "b", "0", "0"]);
        assert!(r.starts_with("*1\r\n") && ids(&r) == 2, "{r}");
        // MAXSIZE: one entry always goes; then entries while the reply is under the cap.
        let r = reply(&mut e, 0, &["XREAD", "MAXSIZE", "1", "STREAMS", "a", "b", "0", "0"]);
        assert_eq!(ids(&r), 1);
        let r = reply(&mut e, 0, &["XREAD", "MAXSIZE", "100", "STREAMS", "a", "0"]);
        assert_eq!(ids(&r), 2, "{r}");
        // XREADGROUP delivers (and makes pending) only what the caps let through.
        reply(&mut e, 0, &["XGROUP", "CREATE", "a", "g", "0"]);
        reply(&mut e, 0, &["XGROUP", "CREATE", "b", "g", "0"]);
        take_muts(&mut e);
        let r = reply(
            &mut e,
            5,
            &["XREADGROUP", "GROUP", "g", "c", "MAXCOUNT", "4", "STREAMS", "a", "b", ">", ">"],
        );
        assert_eq!(ids(&r), 4);
        assert_eq!(reply(&mut e, 5, &["XPENDING", "b", "g"]).split("\r\n").nth(1), Some(":1"));
        assert_eq!(take_muts(&mut e).iter().filter(|m| m.starts_with("XCLAIM")).count(), 4);
        for (args, err) in [
            (&["XREAD", "MAXCOUNT", "0", "STREAMS", "a", "0"][..], "ERR MAXCOUNT must be a positive integer"),
            (&["XREAD", "MAXSIZE", "-1", "STREAMS", "a", "0"], "ERR MAXSIZE must be a positive integer"),
            (&["XREAD", "MAXSIZE", "x", "STREAMS", "a", "0"], "ERR value is not an integer or out of range"),
            (
                &["XREAD", "COUNT", "5", "MAXCOUNT", "3", "STREAMS", "a", "0"],
                "ERR MAXCOUNT must be greater than or equal to COUNT",
            ),
        ] {
            assert_eq!(reply(&mut e, 5, args), format!("-{err}\r\n"), "{args:?}");
        }
    }

    #[test]
    fn xreadgroup_claim_takes_idle_pending_entries_first() {
        let mut e = Engine::default();
        reply(&mut e, 1000, &["XADD", "s", "1-0", "f", "a"]);
        reply(&mut e, 1000, &["XADD", "s", "2-0", "f", "b"]);
        reply(&mut e, 1000, &["XGROUP", "CREATE", "s", "g", "0"]);
        reply(&mut e, 1000, &["XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "s", ">"]);
        reply(&mut e, 1500, &["XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "s", ">"]);
        reply(&mut e, 1600, &["XADD", "s", "3-0", "f", "c"]);
        take_muts(&mut e);
        // At 2100, 1-0 has been idle 1100 ms and 2-0 600 ms: CLAIM 1000 takes 1-0 (as it was:
        // idle 1100, delivered once), then the new 3-0 (0, 0).
        let got =
            reply(&mut e, 2100, &["XREADGROUP", "GROUP", "g", "c2", "CLAIM", "1000", "STREAMS", "s", ">"]);
        assert_eq!(
            got,
            "*1\r\n*2\r\n$1\r\ns\r\n*2\r\n\
             *4\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\na\r\n:1100\r\n:1\r\n\
             *4\r\n$3\r\n3-0\r\n*2\r\n$1\r\nf\r\n$1\r\nc\r\n:0\r\n:0\r\n"
        );
        assert_eq!(
            take_muts(&mut e),
            [
                "XGROUP CREATECONSUMER s g c2",
                "XCLAIM s g c2 0 1-0 TIME 2100 RETRYCOUNT 2 FORCE JUSTID LASTID 3-0",
                "XCLAIM s g c2 0 3-0 TIME 2100 RETRYCOUNT 1 FORCE JUSTID LASTID 3-0",
                "XGROUP SETID s g 3-0 ENTRIESREAD 3",
            ]
        );
        // COUNT bounds claimed and new entries together; nothing idle enough, nothing new: nil.
        assert_eq!(
            reply(&mut e, 2200, &["XREADGROUP", "GROUP", "g", "c2", "CLAIM", "5000", "STREAMS", "s", ">"]),
            "*-1\r\n"
        );
        reply(&mut e, 2200, &["XADD", "s", "4-0", "f", "d"]);
        let got = reply(
            &mut e,
            3000,
            &["XREADGROUP", "GROUP", "g", "c3", "COUNT", "1", "CLAIM", "0", "STREAMS", "s", ">"],
        );
        assert!(got.contains("$3\r\n2-0\r\n") && !got.contains("4-0"), "{got}");
        // A history read ignores CLAIM; XREAD refuses it.
        let got = reply(&mut e, 3000, &["XREADGROUP", "GROUP", "g", "c1", "CLAIM", "0", "STREAMS", "s", "0"]);
        assert!(got.starts_with("*1\r\n*2\r\n$1\r\ns\r\n*0\r\n"), "{got}");
        for (args, err) in [
            (
                &["XREAD", "CLAIM", "5", "STREAMS", "s", "0"][..],
                "ERR The CLAIM option is only supported by XREADGROUP. You called XREAD instead.",
            ),
            (
                &["XREADGROUP", "GROUP", "g", "c", "CLAIM", "-1", "STREAMS", "s", ">"],
                "ERR min-idle-time must be a positive integer",
            ),
            (
                &["XREADGROUP", "GROUP", "g", "c", "CLAIM", "1.5", "STREAMS", "s", ">"],
                "ERR min-idle-time is not an integer or out of range",
            ),
        ] {
            assert_eq!(reply(&mut e, 3000, args), format!("-{err}\r\n"));
        }
    }

    #[test]
    fn xadd_assigns_ids_and_emits_them() {
        let mut e = Engine::default();
        assert_eq!(reply(&mut e, 1000, &["XADD", "s", "*", "a", "1"]), "$6\r\n1000-0\r\n");
        assert_eq!(reply(&mut e, 1000, &["XADD", "s", "*", "a", "2"]), "$6\r\n1000-1\r\n");
        assert_eq!(reply(&mut e, 900, &["XADD", "s", "*", "a", "3"]), "$6\r\n1000-2\r\n");
        assert_eq!(reply(&mut e, 900, &["XADD", "s", "1000-*", "a", "4"]), "$6\r\n1000-3\r\n");
        assert_eq!(reply(&mut e, 900, &["XADD", "s", "2000-*", "a", "5"]), "$6\r\n2000-0\r\n");
        assert_eq!(
            reply(&mut e, 0, &["XADD", "s", "5", "a"]),
            "-ERR wrong number of arguments for 'xadd' command\r\n"
        );
        assert_eq!(
            reply(&mut e, 0, &["XADD", "s", "1-1", "a", "b"]),
            "-ERR The ID specified in XADD is equal or smaller than the target stream top item\r\n"
        );
        assert_eq!(
            reply(&mut e, 0, &["XADD", "n", "0-0", "a", "b"]),
            "-ERR The ID specified in XADD must be greater than 0-0\r\n"
        );
        assert_eq!(reply(&mut e, 0, &["XADD", "n", "NOMKSTREAM", "*", "a", "b"]), "$-1\r\n");
        assert_eq!(
            reply(&mut e, 0, &["XADD", "s", "x-1", "a", "b"]),
            "-ERR Invalid stream ID specified as stream command argument\r\n"
        );
        let muts = take_muts(&mut e);
        assert!(muts.iter().any(|m| m == "XADD s 1000-3 a 4"), "{muts:?}");
        assert!(muts.iter().all(|m| !m.contains('*')), "{muts:?}");
        assert_eq!(reply(&mut e, 0, &["XLEN", "s"]), ":5\r\n");
    }

    #[test]
    fn ranges_and_counts() {
        let mut e = Engine::default();
        for i in 1..=5 {
            reply(&mut e, 0, &["XADD", "s", &format!("{i}-0"), "f", &i.to_string()]);
        }
        assert_eq!(
            reply(&mut e, 0, &["XRANGE", "s", "(2", "3", "COUNT", "5"]),
            "*1\r\n*2\r\n$3\r\n3-0\r\n*2\r\n$1\r\nf\r\n$1\r\n3\r\n"
        );
        assert_eq!(
            reply(&mut e, 0, &["XREVRANGE", "s", "+", "-", "COUNT", "1"]),
            "*1\r\n*2\r\n$3\r\n5-0\r\n*2\r\n$1\r\nf\r\n$1\r\n5\r\n"
        );
        assert_eq!(reply(&mut e, 0, &["XRANGE", "s", "-", "+", "COUNT", "0"]), "*-1\r\n");
        assert_eq!(reply(&mut e, 0, &["XRANGE", "nokey", "-", "+"]), "*0\r\n");
        assert_eq!(
            reply(&mut e, 0, &["XRANGE", "s", "(-", "+"]),
            "-ERR Invalid stream ID specified as stream command argument\r\n"
        );
        assert_eq!(reply(&mut e, 0, &["XDEL", "s", "2-0", "9-0"]), ":1\r\n");
        assert_eq!(reply(&mut e, 0, &["XTRIM", "s", "MAXLEN", "2"]), ":2\r\n");
        let muts = take_muts(&mut e);
        assert!(muts.contains(&"XDEL s 2-0".to_string()), "{muts:?}");
        assert!(muts.contains(&"XTRIM s MAXLEN = 2".to_string()), "{muts:?}");
        assert_eq!(
            reply(&mut e, 0, &["XTRIM", "s", "LIMIT", "2"]),
            "-ERR syntax error, LIMIT cannot be used without specifying a trimming strategy\r\n"
        );
        assert_eq!(
            reply(&mut e, 0, &["XTRIM", "s", "MAXLEN", "1", "LIMIT", "2"]),
            "-ERR syntax error, LIMIT cannot be used without the special ~ option\r\n"
        );
    }

    #[test]
    fn xread_serves_and_blocks_with_dollar_resolved() {
        let mut e = Engine::default();
        reply(&mut e, 0, &["XADD", "s", "1-0", "f", "v"]);
        assert_eq!(
            reply(&mut e, 0, &["XREAD", "STREAMS", "s", "0"]),
            "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
        );
        assert_eq!(reply(&mut e, 0, &["XREAD", "STREAMS", "s", "$"]), "*-1\r\n");
        let spec = crate::command::lookup(b"xread").unwrap();
        let args: [&[u8]; 6] = [b"XREAD", b"BLOCK", b"100", b"STREAMS", b"s", b"$"];
        let mut out = Vec::new();
        match e.execute(spec, &args, 5_000, &mut out, resp::Proto::Resp2, false) {
            crate::engine::Outcome::Blocked(b) => {
                assert_eq!(b.deadline, Some(5_100));
                let parked: Vec<String> =
                    b.args.unwrap().iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
                assert_eq!(parked.join(" "), "XREAD COUNT 1000 BLOCK 100 STREAMS s 1-0");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn xreadgroup_delivers_and_emits_claims() {
        let mut e = Engine::default();
        reply(&mut e, 0, &["XADD", "s", "1-0", "f", "v"]);
        reply(&mut e, 0, &["XADD", "s", "2-0", "f", "w"]);
        match e.ks.get_mut(b"s") {
            Some(store::ValueMut::Stream(s)) => assert!(s.create_group(b"g", store::StreamId::MIN, 0)),
            _ => unreachable!(),
        }
        take_muts(&mut e);
        let r = reply(&mut e, 7, &["XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">"]);
        assert!(r.contains("1-0") && !r.contains("2-0"), "{r}");
        let muts = take_muts(&mut e);
        assert_eq!(
            muts,
            vec![
                "XGROUP CREATECONSUMER s g alice".to_string(),
                "XCLAIM s g alice 0 1-0 TIME 7 RETRYCOUNT 1 FORCE JUSTID LASTID 1-0".to_string(),
                "XGROUP SETID s g 1-0 ENTRIESREAD 1".to_string(),
            ]
        );
        // History: the consumer's own pending entry, with its delivery count raised.
        let r = reply(&mut e, 9, &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"]);
        assert!(r.contains("1-0"), "{r}");
        assert_eq!(
            take_muts(&mut e),
            vec!["XCLAIM s g alice 0 1-0 TIME 9 RETRYCOUNT 2 FORCE JUSTID LASTID 1-0".to_string()]
        );
        assert_eq!(
            reply(&mut e, 0, &["XREADGROUP", "GROUP", "nog", "alice", "STREAMS", "s", ">"]),
            "-NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option\r\n"
        );
    }
}
