//! String commands: GET, SET and its variants, multi-key MGET/MSET, range reads and writes, and
//! the integer and float counters.
//!
//! Canonical mutations (see `mutation.rs`): every write is emitted as a command that reproduces
//! the key's exact post-state on its own. Relative TTLs become `PXAT`/`PEXPIREAT` deadlines;
//! counters, APPEND and SETRANGE become `SET key <whole new value> KEEPTTL` (one compaction key
//! per string, no arithmetic or formatting redone on replay); a write that changes nothing, or
//! whose condition failed, emits nothing. SET's IF* conditions live in `cas.rs`.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::commands::cas::Cond;
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{eq_ic, parse_i64};
use resp::reply;
use store::{Millis, StrRef, Value, ValueMut, ValueRef};

const RF: u32 = Flags::READONLY | Flags::FAST;
const R: u32 = Flags::READONLY;
const W: u32 = Flags::WRITE | Flags::DENYOOM;
const WF: u32 = Flags::WRITE | Flags::DENYOOM | Flags::FAST;
/// GETDEL and GETEX never grow memory, so Redis leaves DENYOOM off them.
const WFN: u32 = Flags::WRITE | Flags::FAST;

const G: &str = "string";

pub static COMMANDS: &[CommandSpec] = &[
    spec("get", 2, RF, (1, 1, 1), G, "Returns the string value of a key.", Handler::Data(get)),
    spec("set", -3, W, (1, 1, 1), G, "Sets the string value of a key, ignoring its type.", Handler::Data(set)),
    spec("setnx", 3, WF, (1, 1, 1), G, "Set the string value of a key only when the key doesn't exist.", Handler::Data(setnx)),
    spec("setex", 4, W, (1, 1, 1), G, "Sets the string value and expiration time of a key.", Handler::Data(setex)),
    spec("psetex", 4, W, (1, 1, 1), G, "Sets both string value and expiration time in milliseconds of a key.", Handler::Data(psetex)),
    spec("mget", -2, RF, (1, -1, 1), G, "Atomically returns the string values of one or more keys.", Handler::Data(mget)),
    spec("mset", -3, W, (1, -1, 2), G, "Atomically creates or modifies the string values of one or more keys.", Handler::Data(mset)),
    spec("msetnx", -3, W, (1, -1, 2), G, "Atomically modifies the string values of one or more keys only when all keys don't exist.", Handler::Data(msetnx)),
    spec("getset", 3, WF, (1, 1, 1), G, "Returns the previous string value of a key after setting it to a new value.", Handler::Data(getset)),
    spec("getdel", 2, WFN, (1, 1, 1), G, "Returns the string value of a key after deleting the key.", Handler::Data(getdel)),
    spec("getex", -2, WFN, (1, 1, 1), G, "Returns the string value of a key after setting its expiration time.", Handler::Data(getex)),
    spec("append", 3, WF, (1, 1, 1), G, "Appends a string to the value of a key. Creates the key if it doesn't exist.", Handler::Data(append)),
    spec("strlen", 2, RF, (1, 1, 1), G, "Returns the length of a string value.", Handler::Data(strlen)),
    spec("getrange", 4, R, (1, 1, 1), G, "Returns a substring of the string stored at a key.", Handler::Data(getrange)),
    spec("substr", 4, R, (1, 1, 1), G, "Returns a substring from a string value.", Handler::Data(getrange)),
    spec("setrange", 4, W, (1, 1, 1), G, "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", Handler::Data(setrange)),
    spec("incr", 2, WF, (1, 1, 1), G, "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", Handler::Data(incr)),
    spec("decr", 2, WF, (1, 1, 1), G, "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", Handler::Data(decr)),
    spec("incrby", 3, WF, (1, 1, 1), G, "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.", Handler::Data(incrby)),
    spec("decrby", 3, WF, (1, 1, 1), G, "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.", Handler::Data(decrby)),
    spec("incrbyfloat", 3, WF, (1, 1, 1), G, "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.", Handler::Data(incrbyfloat)),
];

/// Redis's largest string (`proto-max-bulk-len`, 512 MB).
const MAX_STRING: u64 = 512 * 1024 * 1024;
/// DECRBY's own error when negating its argument would overflow.
const DECR_OVERFLOW: &[u8] = b"ERR decrement would overflow";

// ---------------------------------------------------------------------------------------------
// Expiry options, shared with cas.rs (MSETEX).

/// How an expiry argument is to be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unit {
    /// EX: seconds from now.
    Ex,
    /// PX: milliseconds from now.
    Px,
    /// EXAT: unix seconds.
    ExAt,
    /// PXAT: unix milliseconds.
    PxAt,
}

impl Unit {
    pub(crate) fn from_word(w: &[u8]) -> Option<Unit> {
        if eq_ic(w, b"ex") {
            Some(Unit::Ex)
        } else if eq_ic(w, b"px") {
            Some(Unit::Px)
        } else if eq_ic(w, b"exat") {
            Some(Unit::ExAt)
        } else if eq_ic(w, b"pxat") {
            Some(Unit::PxAt)
        } else {
            None
        }
    }
}

/// The TTL part of a write, as parsed (not yet validated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ttl<'a> {
    /// No option: the write leaves the key persistent (SET, MSET) or the TTL alone (GETEX).
    None,
    /// KEEPTTL: the key keeps its current deadline.
    Keep,
    /// PERSIST (GETEX only): the deadline is removed.
    Persist,
    /// EX / PX / EXAT / PXAT with its argument.
    Set(Unit, &'a [u8]),
}

impl<'a> Ttl<'a> {
    /// Applies one expiry option word; false if it conflicts with what came before. Redis lets
    /// the same option repeat (the last value wins) but never mixes two kinds.
    pub(crate) fn accept_unit(&mut self, unit: Unit, arg: &'a [u8]) -> bool {
        match *self {
            Ttl::None => {}
            Ttl::Set(u, _) if u == unit => {}
            _ => return false,
        }
        *self = Ttl::Set(unit, arg);
        true
    }

    pub(crate) fn accept_word(&mut self, word: Ttl<'a>) -> bool {
        if *self != Ttl::None && *self != word {
            return false;
        }
        *self = word;
        true
    }
}

/// `ERR invalid expire time in '<cmd>' command`, with the command name as Redis prints it.
pub(crate) fn invalid_expire(cmd: &[u8]) -> Vec<u8> {
    let mut m = b"ERR invalid expire time in '".to_vec();
    m.extend(cmd.iter().map(|b| b.to_ascii_lowercase()));
    m.extend_from_slice(b"' command");
    m
}

/// Validates an expiry argument and turns it into an absolute deadline, with Redis's rules: an
/// integer (else NOT_INTEGER), strictly positive, and no overflow once converted to
/// milliseconds and, for EX/PX, added to `now`. A deadline in the past (EXAT/PXAT) is valid.
pub(crate) fn deadline(now: Millis, unit: Unit, arg: &[u8], cmd: &[u8]) -> Result<Millis, Vec<u8>> {
    let v = parse_i64(arg).ok_or_else(|| errors::NOT_INTEGER.to_vec())?;
    if v <= 0 {
        return Err(invalid_expire(cmd));
    }
    let ms = match unit {
        Unit::Ex | Unit::ExAt => v.checked_mul(1000),
        Unit::Px | Unit::PxAt => Some(v),
    };
    let at = match unit {
        Unit::Ex | Unit::Px => ms.and_then(|ms| ms.checked_add(now)),
        Unit::ExAt | Unit::PxAt => ms,
    };
    match at {
        Some(at) if at > 0 => Ok(at),
        _ => Err(invalid_expire(cmd)),
    }
}

/// Emits `SET key value [PXAT at | KEEPTTL]`.
pub(crate) fn emit_set(c: &mut Ctx, key: &[u8], val: &[u8], ttl: SetTtl) {
    match ttl {
        SetTtl::Persistent => c.emit(&[b"SET", key, val]),
        SetTtl::Keep => c.emit(&[b"SET", key, val, b"KEEPTTL"]),
        SetTtl::At(at) => {
            let mut b = itoa::Buffer::new();
            c.emit(&[b"SET", key, val, b"PXAT", b.format(at).as_bytes()]);
        }
    }
}

/// The deadline a string write leaves on its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetTtl {
    Persistent,
    Keep,
    At(Millis),
}

/// Stores `val` at `key` as SET does (any old value and type replaced) and emits the mutation.
/// A deadline already in the past leaves no key: the old one, if any, is deleted and that
/// deletion is what gets emitted. (Redis 7.0 stores the dead key and deletes it on the next
/// access; the observable state is the same.) While replaying, deadlines are stored as given,
/// past or not: the stream that follows carries the DEL its origin emitted.
pub(crate) fn store_string(c: &mut Ctx, key: &[u8], val: &[u8], ttl: SetTtl) {
    let at = match ttl {
        SetTtl::Persistent => None,
        SetTtl::Keep => {
            // The old deadline survives only if the key is live (a dead one is expired here).
            if c.exists(key) {
                c.ks.expire_at(key)
            } else {
                None
            }
        }
        SetTtl::At(at) if at <= c.now && !c.replaying => {
            if c.exists(key) {
                c.ks.delete(key);
                c.emit(&[b"DEL", key]);
            }
            return;
        }
        SetTtl::At(at) => Some(at),
    };
    c.ks.put(key, Value::Str(val.to_vec()), at);
    emit_set(c, key, val, ttl);
}

// ---------------------------------------------------------------------------------------------
// GET and the SET family.

/// GET key
fn get(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match c.read(args[1]) {
        None => reply::null_bulk(out),
        Some(ValueRef::Str(s)) => s.with_bytes(|b| reply::bulk(out, b)),
        Some(_) => reply::error(out, errors::WRONGTYPE),
    }
}

/// SET's options, as parsed.
#[derive(Default)]
struct SetOpts<'a> {
    nx: bool,
    xx: bool,
    /// IFEQ / IFNE / IFDEQ / IFDNE (Redis 8.4).
    cond: Option<Cond<'a>>,
    get: bool,
    ttl: Option<Ttl<'a>>,
}

/// Parses `[NX | XX | IFEQ v | IFNE v | IFDEQ d | IFDNE d] [GET] [EX s | PX ms | EXAT s | PXAT
/// ms | KEEPTTL]` in any order. None: `ERR syntax error` (an unknown word, a missing argument,
/// or two options of the same group; repeating the very same flag is allowed, as in Redis).
fn parse_set_opts<'a>(opts: &[&'a [u8]]) -> Option<SetOpts<'a>> {
    let mut o = SetOpts::default();
    let mut ttl = Ttl::None;
    let mut i = 0;
    while i < opts.len() {
        let w = opts[i];
        let next = opts.get(i + 1).copied();
        if eq_ic(w, b"nx") && !o.xx && o.cond.is_none() {
            o.nx = true;
        } else if eq_ic(w, b"xx") && !o.nx && o.cond.is_none() {
            o.xx = true;
        } else if eq_ic(w, b"get") {
            o.get = true;
        } else if eq_ic(w, b"keepttl") {
            if !ttl.accept_word(Ttl::Keep) {
                return None;
            }
        } else if let Some(unit) = Unit::from_word(w) {
            if !ttl.accept_unit(unit, next?) {
                return None;
            }
            i += 1;
        } else if let Some(cond) = next.and_then(|v| Cond::parse(w, v)) {
            if o.nx || o.xx || o.cond.is_some() {
                return None;
            }
            o.cond = Some(cond);
            i += 1;
        } else {
            return None;
        }
        i += 1;
    }
    o.ttl = Some(ttl);
    Some(o)
}

/// What a SET-family command answers.
#[derive(Clone, Copy, PartialEq)]
enum SetReply {
    /// `+OK`, or nil when a condition stopped the write (SET).
    Ok,
    /// `:1`, or `:0` when the key existed (SETNX).
    Int,
}

/// The SET family's common path: SET, SETNX, SETEX, PSETEX. Order of checks as in Redis:
/// syntax (by the caller), expiry value, GET's type check, the condition, then the write.
fn set_generic(c: &mut Ctx, out: &mut Vec<u8>, key: &[u8], val: &[u8], o: &SetOpts, cmd: &[u8], answer: SetReply) {
    let ttl = match o.ttl.unwrap_or(Ttl::None) {
        Ttl::Set(unit, arg) => match deadline(c.now, unit, arg, cmd) {
            Ok(at) => SetTtl::At(at),
            Err(e) => return reply::error(out, &e),
        },
        Ttl::Keep => SetTtl::Keep,
        Ttl::None | Ttl::Persist => SetTtl::Persistent,
    };
    // GET answers with the old value whatever happens next, so it is staged first and only
    // written once no error can follow.
    let mut old = Vec::new();
    if o.get {
        match c.read(key) {
            None => reply::null_bulk(&mut old),
            Some(ValueRef::Str(s)) => s.with_bytes(|b| reply::bulk(&mut old, b)),
            Some(_) => return reply::error(out, errors::WRONGTYPE),
        }
    }
    let go = if o.nx {
        !c.exists(key)
    } else if o.xx {
        c.exists(key)
    } else if let Some(cond) = &o.cond {
        let verdict = match c.write(key) {
            None => cond.holds(None),
            Some(ValueMut::Str(s)) => cond.holds(Some(s)),
            Some(_) => Err(errors::WRONGTYPE),
        };
        match verdict {
            Ok(go) => go,
            Err(e) => return reply::error(out, e),
        }
    } else {
        true
    };
    out.extend_from_slice(&old);
    if go {
        store_string(c, key, val, ttl);
    }
    if !o.get {
        match (answer, go) {
            (SetReply::Ok, true) => reply::ok(out),
            (SetReply::Ok, false) => reply::null_bulk(out),
            (SetReply::Int, go) => reply::integer(out, go as i64),
        }
    }
}

/// SET key value [NX | XX | IFEQ v | IFNE v | IFDEQ d | IFDNE d] [GET] [EX | PX | EXAT | PXAT | KEEPTTL]
fn set(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(o) = parse_set_opts(&args[3..]) else {
        return reply::error(out, errors::SYNTAX);
    };
    set_generic(c, out, args[1], args[2], &o, b"set", SetReply::Ok);
}

/// SETNX key value
fn setnx(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let o = SetOpts { nx: true, ttl: Some(Ttl::None), ..Default::default() };
    set_generic(c, out, args[1], args[2], &o, b"setnx", SetReply::Int);
}

/// SETEX key seconds value
fn setex(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let o = SetOpts { ttl: Some(Ttl::Set(Unit::Ex, args[2])), ..Default::default() };
    set_generic(c, out, args[1], args[3], &o, b"setex", SetReply::Ok);
}

/// PSETEX key milliseconds value
fn psetex(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let o = SetOpts { ttl: Some(Ttl::Set(Unit::Px, args[2])), ..Default::default() };
    set_generic(c, out, args[1], args[3], &o, b"psetex", SetReply::Ok);
}

/// GETSET key value: SET ... GET without options (the TTL is cleared).
fn getset(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let o = SetOpts { get: true, ttl: Some(Ttl::None), ..Default::default() };
    set_generic(c, out, args[1], args[2], &o, b"getset", SetReply::Ok);
}

/// MGET key [key ...]: non-strings read as nil.
fn mget(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    reply::array_len(out, args.len() - 1);
    for key in &args[1..] {
        match c.read(key) {
            Some(ValueRef::Str(s)) => s.with_bytes(|b| reply::bulk(out, b)),
            _ => reply::null_bulk(out),
        }
    }
}

/// MSET key value [key value ...]
fn mset(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if args.len() % 2 == 0 {
        return errors::wrong_arity(out, args[0]);
    }
    for kv in args[1..].chunks(2) {
        store_string(c, kv[0], kv[1], SetTtl::Persistent);
    }
    reply::ok(out);
}

/// MSETNX key value [key value ...]: all or nothing; nothing is emitted when a key exists.
fn msetnx(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if args.len() % 2 == 0 {
        return errors::wrong_arity(out, args[0]);
    }
    // Check every key (expiring dead ones) before writing any.
    let mut busy = false;
    for kv in args[1..].chunks(2) {
        busy |= c.exists(kv[0]);
    }
    if busy {
        return reply::integer(out, 0);
    }
    for kv in args[1..].chunks(2) {
        store_string(c, kv[0], kv[1], SetTtl::Persistent);
    }
    reply::integer(out, 1);
}

/// GETDEL key
fn getdel(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    match c.read(key) {
        None => return reply::null_bulk(out),
        Some(ValueRef::Str(s)) => s.with_bytes(|b| reply::bulk(out, b)),
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    }
    c.ks.delete(key);
    c.emit(&[b"DEL", key]);
}

/// GETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST]. Syntax is checked first, then the key
/// (a missing key answers nil even with a bad expiry), then the expiry value.
fn getex(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let mut ttl = Ttl::None;
    let mut i = 2;
    while i < args.len() {
        let ok = if eq_ic(args[i], b"persist") {
            ttl.accept_word(Ttl::Persist)
        } else if let (Some(unit), Some(arg)) = (Unit::from_word(args[i]), args.get(i + 1)) {
            i += 1;
            ttl.accept_unit(unit, arg)
        } else {
            false
        };
        if !ok {
            return reply::error(out, errors::SYNTAX);
        }
        i += 1;
    }
    let at = match ttl {
        Ttl::Set(unit, arg) => Some(deadline(c.now, unit, arg, b"getex")),
        _ => None,
    };
    match c.read(key) {
        None => return reply::null_bulk(out),
        Some(ValueRef::Str(s)) => {
            if let Some(Err(e)) = &at {
                return reply::error(out, e);
            }
            s.with_bytes(|b| reply::bulk(out, b));
        }
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    }
    match (ttl, at) {
        (_, Some(Ok(at))) if at <= c.now && !c.replaying => {
            // EXAT/PXAT in the past: the key is gone once the command returns.
            c.ks.delete(key);
            c.emit(&[b"DEL", key]);
        }
        (_, Some(Ok(at))) => {
            c.ks.set_expire(key, Some(at));
            let mut b = itoa::Buffer::new();
            c.emit(&[b"PEXPIREAT", key, b.format(at).as_bytes()]);
        }
        (Ttl::Persist, _) => {
            if c.ks.expire_at(key).is_some() {
                c.ks.set_expire(key, None);
                c.emit(&[b"PERSIST", key]);
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Lengths and ranges.

/// STRLEN key
fn strlen(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match c.read(args[1]) {
        None => reply::integer(out, 0),
        Some(ValueRef::Str(s)) => reply::integer(out, s.len() as i64),
        Some(_) => reply::error(out, errors::WRONGTYPE),
    }
}

/// The byte range `[start, end]` (Redis's inclusive, negative-from-the-end indexes) of a string
/// of length `len`, or None when it is empty.
fn clamp_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    if (start < 0 && end < 0 && start > end) || len == 0 {
        return None;
    }
    let s = if start < 0 { (len + start).max(0) } else { start };
    let e = if end < 0 { (len + end).max(0) } else { end.min(len - 1) };
    if s > e {
        None
    } else {
        Some((s as usize, e as usize))
    }
}

/// GETRANGE key start end (and its old name SUBSTR). Indexes are parsed before the lookup.
fn getrange(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (Some(start), Some(end)) = (parse_i64(args[2]), parse_i64(args[3])) else {
        return reply::error(out, errors::NOT_INTEGER);
    };
    match c.read(args[1]) {
        None => reply::bulk(out, b""),
        Some(ValueRef::Str(s)) => s.with_bytes(|b| match clamp_range(start, end, b.len()) {
            Some((s, e)) => reply::bulk(out, &b[s..=e]),
            None => reply::bulk(out, b""),
        }),
        Some(_) => reply::error(out, errors::WRONGTYPE),
    }
}

/// Redis's size check for APPEND and SETRANGE: the result may not exceed 512 MB.
fn too_long(base: u64, add: u64) -> bool {
    base.saturating_add(add) > MAX_STRING
}

/// APPEND key value
fn append(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (key, tail) = (args[1], args[2]);
    let new = match c.write(key) {
        None => tail.to_vec(),
        Some(ValueMut::Str(s)) => {
            if too_long(s.len() as u64, tail.len() as u64) {
                return reply::error(out, errors::STRING_TOO_LONG);
            }
            if tail.is_empty() {
                // Nothing changes: answer the length, emit nothing.
                return reply::integer(out, s.len() as i64);
            }
            let mut v = Vec::with_capacity(s.len() + tail.len());
            s.with_bytes(|b| v.extend_from_slice(b));
            v.extend_from_slice(tail);
            v
        }
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    let len = new.len();
    replace_string(c, key, new);
    reply::integer(out, len as i64);
}

/// Stores a string computed from the key's old value (or created), keeping its deadline, and
/// emits `SET key value KEEPTTL`. The caller has looked the key up for writing, so a dead key is
/// already gone. (The mutation is recorded just before the store takes ownership of the bytes;
/// nothing can fail in between.)
fn replace_string(c: &mut Ctx, key: &[u8], new: Vec<u8>) {
    c.emit(&[b"SET", key, &new, b"KEEPTTL"]);
    c.ks.replace_value(key, Value::Str(new));
}

/// SETRANGE key offset value
fn setrange(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (key, patch) = (args[1], args[3]);
    let Some(offset) = parse_i64(args[2]) else {
        return reply::error(out, errors::NOT_INTEGER);
    };
    if offset < 0 {
        return reply::error(out, errors::OFFSET_OUT_OF_RANGE);
    }
    let offset = offset as u64;
    let new = match c.write(key) {
        None => {
            if patch.is_empty() {
                return reply::integer(out, 0); // no key is created for an empty patch
            }
            if too_long(offset, patch.len() as u64) {
                return reply::error(out, errors::STRING_TOO_LONG);
            }
            let mut v = vec![0u8; offset as usize];
            v.extend_from_slice(patch);
            v
        }
        Some(ValueMut::Str(s)) => {
            if patch.is_empty() {
                return reply::integer(out, s.len() as i64);
            }
            if too_long(offset, patch.len() as u64) {
                return reply::error(out, errors::STRING_TOO_LONG);
            }
            let off = offset as usize;
            let mut v = s.to_vec();
            if v.len() < off + patch.len() {
                v.resize(off + patch.len(), 0);
            }
            v[off..off + patch.len()].copy_from_slice(patch);
            v
        }
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    let len = new.len();
    replace_string(c, key, new);
    reply::integer(out, len as i64);
}

// ---------------------------------------------------------------------------------------------
// Counters.

/// INCR / DECR / INCRBY / DECRBY: adds `delta` to the integer at `key` (0 if missing), keeping
/// its TTL. The result is stored as an integer and emitted as `SET key <n> KEEPTTL`.
fn incr_by(c: &mut Ctx, out: &mut Vec<u8>, key: &[u8], delta: i64) {
    let old = match c.write(key) {
        None => None,
        Some(ValueMut::Str(StrRef::Int(i))) => Some(i),
        Some(ValueMut::Str(StrRef::Bytes(b))) => match parse_i64(b) {
            Some(i) => Some(i),
            None => return reply::error(out, errors::NOT_INTEGER),
        },
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    let Some(new) = old.unwrap_or(0).checked_add(delta) else {
        return reply::error(out, errors::OVERFLOW);
    };
    c.ks.replace_value(key, Value::Int(new));
    let mut b = itoa::Buffer::new();
    c.emit(&[b"SET", key, b.format(new).as_bytes(), b"KEEPTTL"]);
    reply::integer(out, new);
}

fn incr(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    incr_by(c, out, args[1], 1);
}

fn decr(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    incr_by(c, out, args[1], -1);
}

/// INCRBY key increment (the increment is checked before the key).
fn incrby(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match parse_i64(args[2]) {
        Some(d) => incr_by(c, out, args[1], d),
        None => reply::error(out, errors::NOT_INTEGER),
    }
}

/// DECRBY key decrement
fn decrby(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match parse_i64(args[2]) {
        Some(i64::MIN) => reply::error(out, DECR_OVERFLOW),
        Some(d) => incr_by(c, out, args[1], -d),
        None => reply::error(out, errors::NOT_INTEGER),
    }
}

/// INCRBYFLOAT key increment: long double arithmetic and formatting exactly as Redis (see
/// [`long_double`]); emitted as `SET key <result> KEEPTTL`, as Redis itself replicates it.
fn incrbyfloat(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    use long_double::{parse, Ld, Num};
    let key = args[1];
    let old = match c.write(key) {
        None => Some(Num::Finite(Ld::from_i64(0))),
        Some(ValueMut::Str(StrRef::Int(i))) => Some(Num::Finite(Ld::from_i64(i))),
        Some(ValueMut::Str(StrRef::Bytes(b))) => parse(b),
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    let (Some(old), Some(incr)) = (old, parse(args[2])) else {
        return reply::error(out, errors::NOT_FLOAT);
    };
    let sum = match (old, incr) {
        (Num::Finite(a), Num::Finite(b)) => a.add(b),
        _ => None,
    };
    let Some(sum) = sum else {
        return reply::error(out, errors::INCR_NAN_INF);
    };
    let text = sum.to_redis_string().into_bytes();
    reply::bulk(out, &text);
    replace_string(c, key, text);
}

/// INCRBYFLOAT's arithmetic, bit for bit as Redis does it on x86-64.
///
/// Redis parses both operands with `strtold`, adds them as C `long double` (the x87 80-bit
/// format: 64-bit mantissa with an explicit integer bit, 15-bit exponent) and prints the sum
/// with `%.17Lf` before trimming trailing zeros. The extra 11 mantissa bits are why
/// `INCRBYFLOAT k 0.1` three times reads back "0.3" from Redis, where f64 arithmetic would give
/// "0.30000000000000004". Rust has no 80-bit float, so this module emulates the three steps
/// exactly: correctly rounded decimal/hex parsing, a correctly rounded addition, and exact
/// fixed-point printing (ties to even, as glibc does).
mod long_double {
    /// Smallest and largest exponent of `mant * 2^exp` with a 64-bit mantissa: the normal range
    /// is 2^-16382 .. 2^16384, and subnormals keep `exp` at its minimum.
    const MIN_EXP: i64 = -16445;
    const MAX_EXP: i64 = 16320;

    /// A finite extended-precision value `(-1)^neg * mant * 2^exp`. Zero has `mant == 0`.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct Ld {
        neg: bool,
        mant: u64,
        exp: i64,
    }

    /// A parsed operand: a finite value or an infinity (which INCRBYFLOAT then rejects).
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub enum Num {
        Finite(Ld),
        Inf,
    }

    /// Rounds the exact value `(-1)^neg * (n + sticky epsilon) * 2^e` to the nearest Ld, ties to
    /// even. `sticky` says nonzero bits were dropped below `n`'s last bit; callers that set it
    /// pass `n` with at least 66 significant bits so the guard bits are all in `n`.
    /// Returns None on overflow.
    fn round(neg: bool, n: u128, e: i64, sticky: bool) -> Option<Ld> {
        if n == 0 {
            return Some(Ld { neg, mant: 0, exp: 0 });
        }
        let bits = 128 - n.leading_zeros() as i64;
        let mut shift = bits - 64;
        if e + shift < MIN_EXP {
            shift = MIN_EXP - e; // subnormal: the exponent stays at its floor
        }
        let (mant, exp) = if shift <= 0 {
            ((n << (-shift) as u32) as u64 as u128, e + shift)
        } else if shift > 128 {
            (0, e + shift)
        } else {
            let (q, rem, half) = if shift == 128 {
                (0u128, n, 1u128 << 127)
            } else {
                (n >> shift, n & ((1u128 << shift) - 1), 1u128 << (shift - 1))
            };
            let up = rem > half || (rem == half && (sticky || q & 1 == 1));
            (q + up as u128, e + shift)
        };
        let (mant, exp) = if mant >> 64 != 0 { (mant >> 1, exp + 1) } else { (mant, exp) };
        if exp > MAX_EXP {
            return None;
        }
        Some(Ld { neg, mant: mant as u64, exp })
    }

    impl Ld {
        pub fn from_i64(v: i64) -> Ld {
            // Any i64 fits in the 64-bit mantissa, so this is exact.
            round(v < 0, v.unsigned_abs() as u128, 0, false).expect("an i64 never overflows")
        }

        /// `self + other`, correctly rounded; None if the sum overflows to infinity.
        pub fn add(self, other: Ld) -> Option<Ld> {
            if other.mant == 0 {
                return Some(if self.mant == 0 { Ld { neg: self.neg && other.neg, ..self } } else { self });
            }
            if self.mant == 0 {
                return Some(other);
            }
            let (big, small) = if self.exp >= other.exp { (self, other) } else { (other, self) };
            let d = big.exp - small.exp;
            // Both mantissas are placed 63 bits up, so the sum cannot overflow u128 and the
            // smaller operand keeps 63 guard bits before anything is lost to `sticky`.
            let b = (big.mant as u128) << 63;
            let s_full = (small.mant as u128) << 63;
            let (s, sticky) = if d >= 127 {
                (0, true)
            } else {
                let s = s_full >> d;
                (s, (s << d) != s_full)
            };
            let e = big.exp - 63;
            if big.neg == small.neg {
                return round(big.neg, b + s, e, sticky);
            }
            // Opposite signs. With d <= 1 nothing was shifted out and either side may be larger;
            // otherwise `big` dominates and a nonzero sticky means a little more was subtracted.
            if d == 0 || !sticky {
                let (neg, n) = match b.cmp(&s) {
                    std::cmp::Ordering::Equal => return Some(Ld { neg: false, mant: 0, exp: 0 }),
                    std::cmp::Ordering::Greater => (big.neg, b - s),
                    std::cmp::Ordering::Less => (small.neg, s - b),
                };
                return round(neg, n, e, false);
            }
            round(big.neg, b - s - 1, e, true)
        }

        /// `%.17Lf` followed by Redis's trimming: trailing fractional zeros and a bare '.' go,
        /// and "-0" becomes "0".
        pub fn to_redis_string(self) -> String {
            const SCALE: u128 = 100_000_000_000_000_000; // 10^17
            let mut s = String::new();
            if self.neg {
                s.push('-');
            }
            if self.exp >= 0 {
                // An integer: no fractional digits survive the trimming.
                let mut n = Big::from_u64(self.mant);
                n.shl(self.exp as u64);
                s.push_str(&n.to_decimal());
            } else {
                // Round mant * 10^17 / 2^-exp to an integer, ties to even.
                let x = self.mant as u128 * SCALE; // < 2^121
                let sh = -self.exp;
                let r = if sh >= 122 {
                    0 // x < 2^121 <= half of the divisor: rounds down to 0
                } else {
                    let sh = sh as u32;
                    let q = x >> sh;
                    let rem = x & ((1u128 << sh) - 1);
                    let half = 1u128 << (sh - 1);
                    q + (rem > half || (rem == half && q & 1 == 1)) as u128
                };
                s.push_str(&(r / SCALE).to_string());
                let frac = format!("{:017}", r % SCALE);
                let frac = frac.trim_end_matches('0');
                if !frac.is_empty() {
                    s.push('.');
                    s.push_str(frac);
                }
            }
            if s == "-0" {
                s = "0".into();
            }
            s
        }
    }

    /// Parses as Redis's `string2ld` does (glibc `strtold`, the whole string consumed, no
    /// leading space, no NaN, no overflow to infinity, no underflow to zero). None: "value is
    /// not a valid float".
    pub fn parse(s: &[u8]) -> Option<Num> {
        // string2ld copies into a 5 KiB buffer and hands strtold a C string: a NUL ends the
        // number early and everything after it is ignored.
        if s.is_empty() || s.len() >= 5 * 1024 {
            return None;
        }
        let s = match s.iter().position(|&b| b == 0) {
            Some(0) => return Some(Num::Finite(Ld::from_i64(0))), // strtold("") is 0, eptr at NUL
            Some(p) => &s[..p],
            None => s,
        };
        if matches!(s[0], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
            return None;
        }
        let (neg, body) = match s[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
            return Some(Num::Inf);
        }
        let (exact, nonzero) = if body.len() > 2 && body[0] == b'0' && (body[1] | 0x20) == b'x' {
            parse_hex(&body[2..])?
        } else {
            parse_dec(body)?
        };
        let v = to_ld(neg, exact)?;
        if nonzero && v.mant == 0 {
            return None; // underflow: strtold reports ERANGE with a zero result
        }
        Some(Num::Finite(v))
    }

    /// The exact value a number's text denotes, before rounding.
    enum Exact {
        /// `n * 2^e`
        Bin(Big, i64),
        /// `n * 10^e`
        Dec(Big, i64),
    }

    fn digits_value(digits: &[u8], radix: u32) -> Big {
        let mut n = Big::from_u64(0);
        // Feed several digits per multiplication to keep the quadratic part small.
        let per = if radix == 10 { 9 } else { 7 };
        for chunk in digits.chunks(per) {
            let mut v = 0u32;
            for &d in chunk {
                v = v * radix + (d as char).to_digit(radix).unwrap_or(0);
            }
            n.mul_small(radix.pow(chunk.len() as u32));
            n.add_small(v);
        }
        n
    }

    /// Parses an exponent suffix body (`[+-]digits`), saturating far outside any finite range.
    fn parse_exp(s: &[u8]) -> Option<i64> {
        let (neg, d) = match s.first()? {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        if d.is_empty() || !d.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let mut v: i64 = 0;
        for &c in d {
            v = (v * 10 + (c - b'0') as i64).min(1_000_000_000);
        }
        Some(if neg { -v } else { v })
    }

    /// Decimal: `digits[.digits][e[+-]digits]` with at least one mantissa digit.
    fn parse_dec(s: &[u8]) -> Option<(Exact, bool)> {
        let mut mant = Vec::with_capacity(s.len());
        let mut i = 0;
        let mut frac = 0i64;
        let mut seen_dot = false;
        let mut any = false;
        while i < s.len() {
            match s[i] {
                c @ b'0'..=b'9' => {
                    mant.push(c);
                    any = true;
                    if seen_dot {
                        frac += 1;
                    }
                }
                b'.' if !seen_dot => seen_dot = true,
                _ => break,
            }
            i += 1;
        }
        if !any {
            return None;
        }
        let mut exp = 0;
        if i < s.len() {
            if s[i] | 0x20 != b'e' {
                return None;
            }
            exp = parse_exp(&s[i + 1..])?;
        }
        let first = mant.iter().position(|&c| c != b'0');
        let Some(first) = first else {
            return Some((Exact::Dec(Big::from_u64(0), 0), false));
        };
        let mant = &mant[first..];
        let e10 = exp - frac;
        // Magnitude is about 10^(len + e10 - 1): far outside the extended range means overflow
        // or underflow whatever the digits are (the limits are 1.19e4932 and 3.6e-4951).
        let mag = mant.len() as i64 + e10;
        if mag > 4934 {
            return None;
        }
        if mag < -4953 {
            return None;
        }
        Some((Exact::Dec(digits_value(mant, 10), e10), true))
    }

    /// Hexadecimal after "0x": `hexdigits[.hexdigits][p[+-]digits]`, at least one digit.
    fn parse_hex(s: &[u8]) -> Option<(Exact, bool)> {
        let mut mant = Vec::with_capacity(s.len());
        let mut i = 0;
        let mut frac = 0i64;
        let mut seen_dot = false;
        while i < s.len() {
            match s[i] {
                c if c.is_ascii_hexdigit() => {
                    mant.push(c);
                    if seen_dot {
                        frac += 1;
                    }
                }
                b'.' if !seen_dot => seen_dot = true,
                _ => break,
            }
            i += 1;
        }
        if mant.is_empty() {
            // strtold reads just the "0" and stops at the 'x': trailing garbage.
            return None;
        }
        let mut exp = 0;
        if i < s.len() {
            if s[i] | 0x20 != b'p' {
                return None;
            }
            exp = parse_exp(&s[i + 1..])?;
        }
        let n = digits_value(&mant, 16);
        let nonzero = !n.is_zero();
        Some((Exact::Bin(n, exp - 4 * frac), nonzero))
    }

    fn to_ld(neg: bool, exact: Exact) -> Option<Ld> {
        match exact {
            Exact::Bin(n, e) => {
                if n.is_zero() {
                    return Some(Ld { neg, mant: 0, exp: 0 });
                }
                let bits = n.bit_len() as i64;
                if bits + e > MAX_EXP + 65 {
                    return None;
                }
                if bits + e < MIN_EXP - 2 {
                    return Some(Ld { neg, mant: 0, exp: 0 });
                }
                let (top, sticky, shift) = n.top128();
                round(neg, top, e + shift, sticky)
            }
            Exact::Dec(n, e10) => {
                if n.is_zero() {
                    return Some(Ld { neg, mant: 0, exp: 0 });
                }
                if e10 >= 0 {
                    let mut n = n;
                    n.mul_pow10(e10 as u64);
                    let (top, sticky, shift) = n.top128();
                    round(neg, top, shift, sticky)
                } else {
                    // n / 10^-e10: scale so the quotient has 126 bits, then round it.
                    let mut d = Big::from_u64(1);
                    d.mul_pow10((-e10) as u64);
                    let k = 126 + d.bit_len() as i64 - n.bit_len() as i64;
                    let mut a = n;
                    if k > 0 {
                        a.shl(k as u64);
                    } else {
                        d.shl((-k) as u64);
                    }
                    let (q, rem_nonzero) = a.div_small_quotient(&d);
                    round(neg, q, -k, rem_nonzero)
                }
            }
        }
    }

    /// A minimal unsigned big integer (little-endian 32-bit limbs), enough for exact
    /// conversions between decimal text and the 80-bit format.
    #[derive(Clone, Debug)]
    struct Big(Vec<u32>);

    impl Big {
        fn from_u64(v: u64) -> Big {
            let mut b = Big(vec![v as u32, (v >> 32) as u32]);
            b.trim();
            b
        }
        fn trim(&mut self) {
            while self.0.last() == Some(&0) {
                self.0.pop();
            }
        }
        fn is_zero(&self) -> bool {
            self.0.is_empty()
        }
        fn bit_len(&self) -> u64 {
            match self.0.last() {
                None => 0,
                Some(&top) => self.0.len() as u64 * 32 - top.leading_zeros() as u64,
            }
        }
        fn bit(&self, i: u64) -> bool {
            let w = (i / 32) as usize;
            w < self.0.len() && (self.0[w] >> (i % 32)) & 1 == 1
        }
        fn mul_small(&mut self, m: u32) {
            let mut carry = 0u64;
            for limb in self.0.iter_mut() {
                let v = *limb as u64 * m as u64 + carry;
                *limb = v as u32;
                carry = v >> 32;
            }
            if carry != 0 {
                self.0.push(carry as u32);
            }
            self.trim();
        }
        fn add_small(&mut self, a: u32) {
            let mut carry = a as u64;
            for limb in self.0.iter_mut() {
                if carry == 0 {
                    break;
                }
                let v = *limb as u64 + carry;
                *limb = v as u32;
                carry = v >> 32;
            }
            if carry != 0 {
                self.0.push(carry as u32);
            }
        }
        fn mul_pow10(&mut self, mut e: u64) {
            while e >= 9 {
                self.mul_small(1_000_000_000);
                e -= 9;
            }
            self.mul_small(10u32.pow(e as u32));
        }
        fn shl(&mut self, bits: u64) {
            if self.is_zero() {
                return;
            }
            let words = (bits / 32) as usize;
            let b = (bits % 32) as u32;
            if b != 0 {
                let mut carry = 0u32;
                for limb in self.0.iter_mut() {
                    let v = *limb;
                    *limb = (v << b) | carry;
                    carry = v >> (32 - b);
                }
                if carry != 0 {
                    self.0.push(carry);
                }
            }
            self.0.splice(0..0, std::iter::repeat(0).take(words));
        }
        /// The top 128 bits (or all of them), whether any lower bit is set, and the shift:
        /// `self ~= top * 2^shift`.
        fn top128(&self) -> (u128, bool, i64) {
            let len = self.bit_len();
            let shift = len.saturating_sub(128);
            let mut top = 0u128;
            for i in (shift..len).rev() {
                top = (top << 1) | self.bit(i) as u128;
            }
            let sticky = (0..shift).any(|i| self.bit(i));
            (top, sticky, shift as i64)
        }
        fn cmp(&self, o: &Big) -> std::cmp::Ordering {
            self.0.len().cmp(&o.0.len()).then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
        }
        fn sub_assign(&mut self, o: &Big) {
            let mut borrow = 0i64;
            for i in 0..self.0.len() {
                let v = self.0[i] as i64 - o.0.get(i).copied().unwrap_or(0) as i64 - borrow;
                borrow = (v < 0) as i64;
                self.0[i] = v.rem_euclid(1 << 32) as u32;
            }
            self.trim();
        }
        fn shr1(&mut self) {
            let mut carry = 0u32;
            for limb in self.0.iter_mut().rev() {
                let v = *limb;
                *limb = (v >> 1) | (carry << 31);
                carry = v & 1;
            }
            self.trim();
        }
        /// `self / d` when the quotient is known to fit in 127 bits, and whether the remainder
        /// is nonzero. Plain shift-and-subtract: 127 steps.
        fn div_small_quotient(mut self, d: &Big) -> (u128, bool) {
            let mut dd = d.clone();
            dd.shl(127);
            let mut q = 0u128;
            for _ in 0..=127 {
                q <<= 1;
                if self.cmp(&dd) != std::cmp::Ordering::Less {
                    self.sub_assign(&dd);
                    q |= 1;
                }
                dd.shr1();
            }
            (q, !self.is_zero())
        }
        fn div_small(&mut self, d: u32) -> u32 {
            let mut rem = 0u64;
            for limb in self.0.iter_mut().rev() {
                let v = (rem << 32) | *limb as u64;
                *limb = (v / d as u64) as u32;
                rem = v % d as u64;
            }
            self.trim();
            rem as u32
        }
        fn to_decimal(&self) -> String {
            if self.is_zero() {
                return "0".into();
            }
            let mut n = self.clone();
            let mut chunks = Vec::new();
            while !n.is_zero() {
                chunks.push(n.div_small(1_000_000_000));
            }
            let mut s = chunks.last().map(|c| c.to_string()).unwrap_or_default();
            for c in chunks.iter().rev().skip(1) {
                s.push_str(&format!("{c:09}"));
            }
            s
        }
    }
}
