//! String commands: GET, SET and its variants, multi-key MGET/MSET, range reads and writes, and
//! the integer and float counters.
//!
//! Canonical mutations (see `mutation.rs`): every write is emitted as a command that reproduces
//! the key's exact post-state. Relative TTLs become `PXAT`/`PEXPIREAT` deadlines; counters
//! become `SET key <new value> KEEPTTL` (no arithmetic or float formatting redone on replay);
//! APPEND and SETRANGE are emitted as themselves, deterministic edits whose record stays as
//! small as the request whatever the string's size; a write that changes nothing, or whose
//! condition failed, emits nothing. SET's IF* conditions live in `cas.rs`.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::commands::cas::Cond;
use crate::commands::long_double::LongDouble;
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

#[rustfmt::skip]
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
pub(crate) const MAX_STRING: u64 = 512 * 1024 * 1024;
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
    c.ks.put_bytes(key, val, at);
    emit_set(c, key, val, ttl);
}

// ---------------------------------------------------------------------------------------------
// GET and the SET family.

/// GET key
fn get(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match c.read(args[1]) {
        None => reply::null_bulk(out, c.proto),
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
fn set_generic(
    c: &mut Ctx,
    out: &mut Vec<u8>,
    key: &[u8],
    val: &[u8],
    o: &SetOpts,
    cmd: &[u8],
    answer: SetReply,
) {
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
            None => reply::null_bulk(&mut old, c.proto),
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
            (SetReply::Ok, false) => reply::null_bulk(out, c.proto),
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
            _ => reply::null_bulk(out, c.proto),
        }
    }
}

/// MSET key value [key value ...]
fn mset(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if args.len().is_multiple_of(2) {
        return errors::wrong_arity(out, args[0]);
    }
    for kv in args[1..].chunks(2) {
        store_string(c, kv[0], kv[1], SetTtl::Persistent);
    }
    reply::ok(out);
}

/// MSETNX key value [key value ...]: all or nothing; nothing is emitted when a key exists.
fn msetnx(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if args.len().is_multiple_of(2) {
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
        None => return reply::null_bulk(out, c.proto),
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
        None => return reply::null_bulk(out, c.proto),
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
        // PERSIST on a key without a deadline changes nothing and emits nothing.
        (Ttl::Persist, _) if c.ks.expire_at(key).is_some() => {
            c.ks.set_expire(key, None);
            c.emit(&[b"PERSIST", key]);
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
    let old = match c.write(key) {
        None => {
            // Created as SET creates a string (OBJECT ENCODING int, embstr or raw, as Redis
            // encodes a new key's value), with the empty string too.
            c.emit(&[b"APPEND", key, tail]);
            c.ks.put_bytes(key, tail, None);
            return reply::integer(out, tail.len() as i64);
        }
        Some(ValueMut::Str(s)) => {
            if too_long(s.len() as u64, tail.len() as u64) {
                return reply::error(out, errors::STRING_TOO_LONG);
            }
            if tail.is_empty() {
                // Nothing changes: answer the length, emit nothing.
                return reply::integer(out, s.len() as i64);
            }
            s.len()
        }
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    let len = old + tail.len();
    edit_string(c, key, len, |b| b[old..].copy_from_slice(tail), &[b"APPEND", key, tail]);
    reply::integer(out, len as i64);
}

/// Stores a string computed from the key's old value (or created), keeping its deadline, and
/// emits `SET key value KEEPTTL`. The caller has looked the key up for writing, so a dead key is
/// already gone. (The mutation is recorded just before the store takes ownership of the bytes;
/// nothing can fail in between.)
fn replace_string(c: &mut Ctx, key: &[u8], new: Vec<u8>) {
    c.emit(&[b"SET", key, &new, b"KEEPTTL"]);
    // Modified in place, as Redis sees it: OBJECT ENCODING says `raw` from now on.
    c.ks.replace_raw_bytes(key, &new);
}

/// Edits the string at `key` (looked up for writing, so live or gone) in place and emits
/// `mutation`, the edit itself (see [`store_modified`] for why): its bytes are grown
/// (zero-filled) to `new_len` if shorter, then `edit` changes them. A byte string is edited
/// where the store keeps it, at the cost of the change (`Keyspace::edit_string`: a SETBIT in a
/// 100 MB bitmap writes one byte); a missing key, or a string stored as an integer, is first
/// stored as (its) bytes and then edited the same way. The deadline is kept; OBJECT ENCODING
/// says `raw` from then on.
pub(crate) fn edit_string(
    c: &mut Ctx,
    key: &[u8],
    new_len: usize,
    edit: impl FnOnce(&mut [u8]),
    mutation: &[&[u8]],
) {
    c.emit(mutation);
    let mut edit = Some(edit);
    if c.ks.edit_string(key, new_len, |b| (edit.take().expect("called once"))(b)) {
        return;
    }
    // A missing key, or an integer: stored as (its) bytes, then edited like any other.
    let v = match c.ks.get(key) {
        Some(ValueRef::Str(s)) => s.to_vec(),
        _ => Vec::new(),
    };
    c.ks.replace_raw_bytes(key, &v);
    let edited = c.ks.edit_string(key, new_len, |b| (edit.take().expect("not called"))(b));
    debug_assert!(edited, "a byte string was just stored");
}

/// Stores a string an edit built whole (BITFIELD on an absent key or an integer-form string;
/// [`edit_string`] otherwise), keeping the deadline, and emits the request (`name`, then
/// `args[1..]`): the edit itself, which is deterministic, so that replaying it on the same
/// prior state leaves the same bytes.
/// Emitting the whole string instead made every such write as large as the string (a one-byte
/// APPEND to a 10 MiB value journaled and replicated 10 MiB, and past the Kafka record limit
/// was refused). The caller looked the key up for writing, so a dead key is already gone (its
/// `DEL` emitted before this).
pub(crate) fn store_modified(c: &mut Ctx, key: &[u8], new: Vec<u8>, name: &[u8], args: &[&[u8]]) {
    c.emit_request(name, args);
    // Modified in place, as Redis sees it: OBJECT ENCODING says `raw` from now on.
    c.ks.replace_raw_bytes(key, &new);
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
    let old = match c.write(key) {
        None => {
            if patch.is_empty() {
                return reply::integer(out, 0); // no key is created for an empty patch
            }
            0
        }
        Some(ValueMut::Str(s)) => {
            if patch.is_empty() {
                return reply::integer(out, s.len() as i64);
            }
            s.len()
        }
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    if too_long(offset, patch.len() as u64) {
        return reply::error(out, errors::STRING_TOO_LONG);
    }
    let off = offset as usize;
    let len = old.max(off + patch.len());
    edit_string(
        c,
        key,
        len,
        |b| b[off..off + patch.len()].copy_from_slice(patch),
        &[b"SETRANGE", key, args[2], patch],
    );
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

/// INCRBYFLOAT key increment: computed in emulated x87 `long double` and printed as Redis
/// prints it (see `long_double.rs`), so `0.1` added three times reads "0.3" as in Redis. Emitted
/// as `SET key <result> KEEPTTL`, which is also how Redis replicates it.
fn incrbyfloat(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let old = match c.write(key) {
        None => Some(LongDouble::ZERO),
        Some(ValueMut::Str(StrRef::Int(i))) => Some(LongDouble::from_i64(i)),
        Some(ValueMut::Str(StrRef::Bytes(b))) => LongDouble::parse(b),
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    let (Some(old), Some(incr)) = (old, LongDouble::parse(args[2])) else {
        return reply::error(out, errors::NOT_FLOAT);
    };
    // An infinite operand, or a sum past the largest long double, is refused.
    let sum = old.add(incr);
    if !old.is_finite() || !incr.is_finite() || !sum.is_finite() {
        return reply::error(out, errors::INCR_NAN_INF);
    }
    let text = sum.to_human().into_bytes();
    reply::bulk(out, &text);
    replace_string(c, key, text);
}

#[cfg(test)]
mod tests {
    use crate::Engine;
    use store::Value;

    const NOW: i64 = 1_700_000_000_000;

    /// Runs one command at `now`; returns its reply and the mutations it emitted.
    fn run_at(e: &mut Engine, now: i64, args: &[&str]) -> (String, Vec<String>) {
        (crate::testing::reply(e, now, args), crate::testing::take_muts(e))
    }

    fn run(e: &mut Engine, args: &[&str]) -> (String, Vec<String>) {
        run_at(e, NOW, args)
    }

    /// The reply only.
    fn r(e: &mut Engine, args: &[&str]) -> String {
        run(e, args).0
    }

    fn err(msg: &str) -> String {
        format!("-{msg}\r\n")
    }

    fn bulk(s: &str) -> String {
        format!("${}\r\n{s}\r\n", s.len())
    }

    const NIL: &str = "$-1\r\n";
    const OK: &str = "+OK\r\n";
    const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    const NOT_INT: &str = "-ERR value is not an integer or out of range\r\n";
    const SYNTAX: &str = "-ERR syntax error\r\n";

    /// An engine holding a hash at "h".
    fn with_hash() -> Engine {
        let mut e = Engine::default();
        e.ks.insert(b"h", Value::Hash(Box::default()), None);
        e
    }

    #[test]
    fn set_and_get() {
        let mut e = Engine::default();
        assert_eq!(r(&mut e, &["GET", "k"]), NIL);
        assert_eq!(run(&mut e, &["SET", "k", "v"]), (OK.into(), vec!["SET k v".into()]));
        assert_eq!(r(&mut e, &["GET", "k"]), bulk("v"));
        assert_eq!(r(&mut e, &["set", "n", "-42"]), OK);
        assert_eq!(r(&mut e, &["get", "n"]), bulk("-42"));
        assert_eq!(r(&mut e, &["SET", "bin", "a\r\n\0b"]), OK);
        assert_eq!(r(&mut e, &["GET", "bin"]), bulk("a\r\n\0b"));
        assert_eq!(r(&mut e, &["GET", "k", "x"]), err("ERR wrong number of arguments for 'get' command"));
        assert_eq!(r(&mut e, &["SET", "k"]), err("ERR wrong number of arguments for 'set' command"));
    }

    #[test]
    fn set_conditions_and_get_option() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, &["SET", "k", "1", "XX"]), (NIL.into(), vec![]));
        assert_eq!(run(&mut e, &["SET", "k", "1", "nx"]), (OK.into(), vec!["SET k 1".into()]));
        assert_eq!(run(&mut e, &["SET", "k", "2", "NX"]), (NIL.into(), vec![]));
        assert_eq!(run(&mut e, &["SET", "k", "2", "NX", "NX"]), (NIL.into(), vec![]));
        assert_eq!(run(&mut e, &["SET", "k", "2", "XX"]), (OK.into(), vec!["SET k 2".into()]));
        // GET answers the old value whether or not the write happened, and is not replicated.
        assert_eq!(run(&mut e, &["SET", "k", "3", "GET"]), (bulk("2"), vec!["SET k 3".into()]));
        assert_eq!(run(&mut e, &["SET", "k", "4", "NX", "GET"]), (bulk("3"), vec![]));
        assert_eq!(run(&mut e, &["SET", "new", "x", "XX", "GET"]), (NIL.into(), vec![]));
        assert_eq!(run(&mut e, &["SET", "new", "x", "GET"]), (NIL.into(), vec!["SET new x".into()]));
        assert_eq!(r(&mut e, &["GET", "k"]), bulk("3"));
    }

    #[test]
    fn set_syntax_errors() {
        let mut e = Engine::default();
        for bad in [
            &["SET", "k", "v", "NX", "XX"][..],
            &["SET", "k", "v", "XX", "NX"],
            &["SET", "k", "v", "EX"],
            &["SET", "k", "v", "EX", "1", "PX", "2"],
            &["SET", "k", "v", "KEEPTTL", "EX", "10"],
            &["SET", "k", "v", "PX", "5", "KEEPTTL"],
            &["SET", "k", "v", "PERSIST"],
            &["SET", "k", "v", "bogus"],
            &["SET", "k", "v", "IFEQ"],
            &["SET", "k", "v", "NX", "IFEQ", "v"],
            &["SET", "k", "v", "IFEQ", "v", "XX"],
            &["SET", "k", "v", "IFEQ", "v", "IFNE", "w"],
        ] {
            assert_eq!(run(&mut e, bad), (SYNTAX.into(), vec![]), "{bad:?}");
        }
        assert_eq!(e.ks.len(), 0);
        // The same option twice is fine; the last value wins.
        assert_eq!(
            run(&mut e, &["SET", "k", "v", "EX", "1", "ex", "2"]).1,
            vec![format!("SET k v PXAT {}", NOW + 2000)]
        );
        assert_eq!(r(&mut e, &["SET", "k", "v", "KEEPTTL", "KEEPTTL", "GET", "GET"]), bulk("v"));
    }

    #[test]
    fn set_expiry_is_absolute() {
        let mut e = Engine::default();
        assert_eq!(
            run(&mut e, &["SET", "k", "v", "EX", "10"]).1,
            vec![format!("SET k v PXAT {}", NOW + 10_000)]
        );
        assert_eq!(e.ks.expire_at(b"k"), Some(NOW + 10_000));
        assert_eq!(run(&mut e, &["SET", "k", "v", "PX", "5"]).1, vec![format!("SET k v PXAT {}", NOW + 5)]);
        assert_eq!(
            run(&mut e, &["SET", "k", "v", "EXAT", "1800000000"]).1,
            vec!["SET k v PXAT 1800000000000"]
        );
        assert_eq!(run(&mut e, &["SET", "k", "w", "KEEPTTL"]), (OK.into(), vec!["SET k w KEEPTTL".into()]));
        assert_eq!(e.ks.expire_at(b"k"), Some(1_800_000_000_000));
        assert_eq!(run(&mut e, &["SET", "k", "x", "PXAT", "9223372036854775807"]).0, OK);
        // A plain SET drops the TTL.
        assert_eq!(run(&mut e, &["SET", "k", "x"]).1, vec!["SET k x"]);
        assert_eq!(e.ks.expire_at(b"k"), None);
        // KEEPTTL on a missing key creates a persistent one.
        assert_eq!(run(&mut e, &["SET", "p", "x", "KEEPTTL"]).0, OK);
        assert_eq!(e.ks.expire_at(b"p"), None);
    }

    #[test]
    fn set_in_the_past_deletes() {
        let mut e = Engine::default();
        r(&mut e, &["SET", "k", "v"]);
        assert_eq!(run(&mut e, &["SET", "k", "w", "EXAT", "1"]), (OK.into(), vec!["DEL k".into()]));
        assert_eq!(r(&mut e, &["GET", "k"]), NIL);
        assert_eq!(run(&mut e, &["SET", "k", "w", "PXAT", &NOW.to_string()]), (OK.into(), vec![]));
        r(&mut e, &["SET", "k", "v"]);
        assert_eq!(run(&mut e, &["SET", "k", "w", "PXAT", "100", "GET"]), (bulk("v"), vec!["DEL k".into()]));
        assert_eq!(e.ks.len(), 0);
    }

    #[test]
    fn invalid_expire_times() {
        let mut e = Engine::default();
        let inv = |cmd: &str| err(&format!("ERR invalid expire time in '{cmd}' command"));
        for (args, want) in [
            (&["SET", "k", "v", "EX", "0"][..], inv("set")),
            (&["SET", "k", "v", "EX", "-1"], inv("set")),
            (&["SET", "k", "v", "PX", "0"], inv("set")),
            (&["SET", "k", "v", "EXAT", "0"], inv("set")),
            (&["SET", "k", "v", "EX", "9223372036854775"], inv("set")),
            (&["SET", "k", "v", "EX", "9223372036854775807"], inv("set")),
            (&["SET", "k", "v", "PX", "9223372036854775807"], inv("set")),
            (&["SET", "k", "v", "EXAT", "9223372036854775807"], inv("set")),
            (&["SET", "k", "v", "EX", "abc"], NOT_INT.into()),
            (&["SET", "k", "v", "EX", "1.5"], NOT_INT.into()),
            (&["SETEX", "k", "0", "v"], inv("setex")),
            (&["SETEX", "k", "abc", "v"], NOT_INT.into()),
            (&["SETEX", "k", "9223372036854775807", "v"], inv("setex")),
            (&["PSETEX", "k", "-5", "v"], inv("psetex")),
        ] {
            assert_eq!(run(&mut e, args), (want, vec![]), "{args:?}");
        }
        // The expiry is checked before GET's type check and before the key is touched.
        let mut e = with_hash();
        assert_eq!(r(&mut e, &["SET", "h", "v", "GET", "EX", "0"]), inv("set"));
        assert_eq!(r(&mut e, &["SET", "k", "v", "EX", "9223372036854"]), OK);
    }

    #[test]
    fn setnx_setex_psetex() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, &["SETNX", "k", "a"]), (":1\r\n".into(), vec!["SET k a".into()]));
        assert_eq!(run(&mut e, &["SETNX", "k", "b"]), (":0\r\n".into(), vec![]));
        assert_eq!(
            run(&mut e, &["SETEX", "k", "10", "c"]),
            (OK.into(), vec![format!("SET k c PXAT {}", NOW + 10_000)])
        );
        assert_eq!(
            run(&mut e, &["PSETEX", "k", "10", "d"]),
            (OK.into(), vec![format!("SET k d PXAT {}", NOW + 10)])
        );
        assert_eq!(r(&mut e, &["GET", "k"]), bulk("d"));
        // Lazy expiry: SETNX on a dead key writes (after emitting its DEL).
        assert_eq!(
            run_at(&mut e, NOW + 11, &["SETNX", "k", "e"]),
            (":1\r\n".into(), vec!["DEL k".into(), "SET k e".into()])
        );
    }

    #[test]
    fn wrong_type_everywhere() {
        let mut e = with_hash();
        for args in [
            &["GET", "h"][..],
            &["SET", "h", "v", "GET"],
            &["SET", "h", "v", "NX", "GET"],
            &["SET", "h", "v", "XX", "GET"],
            &["SET", "h", "v", "IFEQ", "v"],
            &["SET", "h", "v", "IFNE", "v"],
            &["GETSET", "h", "v"],
            &["GETDEL", "h"],
            &["GETEX", "h"],
            &["GETEX", "h", "EX", "0"],
            &["APPEND", "h", "x"],
            &["STRLEN", "h"],
            &["GETRANGE", "h", "0", "1"],
            &["SETRANGE", "h", "0", "x"],
            &["SETRANGE", "h", "0", ""],
            &["INCR", "h"],
            &["DECR", "h"],
            &["INCRBY", "h", "2"],
            &["DECRBY", "h", "2"],
            &["INCRBYFLOAT", "h", "1.5"],
            &["INCRBYFLOAT", "h", "abc"],
        ] {
            assert_eq!(run(&mut e, args), (WRONGTYPE.into(), vec![]), "{args:?}");
        }
        // Arguments are validated before the type where Redis does so.
        assert_eq!(r(&mut e, &["INCRBY", "h", "x"]), NOT_INT);
        assert_eq!(r(&mut e, &["GETRANGE", "h", "a", "1"]), NOT_INT);
        assert_eq!(r(&mut e, &["SETRANGE", "h", "-1", "x"]), err("ERR offset is out of range"));
        // MGET reads other types as nil; plain SET, MSET overwrite them.
        assert_eq!(r(&mut e, &["MGET", "h", "nope"]), format!("*2\r\n{NIL}{NIL}"));
        assert_eq!(run(&mut e, &["SET", "h", "v"]), (OK.into(), vec!["SET h v".into()]));
        assert_eq!(r(&mut e, &["GET", "h"]), bulk("v"));
    }

    #[test]
    fn multi_key() {
        let mut e = Engine::default();
        assert_eq!(
            r(&mut e, &["MSET", "a", "1", "b"]),
            err("ERR wrong number of arguments for 'mset' command")
        );
        assert_eq!(
            r(&mut e, &["MSETNX", "a", "1", "b"]),
            err("ERR wrong number of arguments for 'msetnx' command")
        );
        assert_eq!(r(&mut e, &["MGET"]), err("ERR wrong number of arguments for 'mget' command"));
        r(&mut e, &["SET", "a", "old", "EX", "100"]);
        assert_eq!(
            run(&mut e, &["MSET", "a", "1", "b", "2"]),
            (OK.into(), vec!["SET a 1".into(), "SET b 2".into()])
        );
        assert_eq!(e.ks.expire_at(b"a"), None, "MSET clears TTLs");
        assert_eq!(r(&mut e, &["MGET", "a", "x", "b"]), format!("*3\r\n{}{NIL}{}", bulk("1"), bulk("2")));
        assert_eq!(run(&mut e, &["MSETNX", "c", "3", "a", "9"]), (":0\r\n".into(), vec![]));
        assert_eq!(r(&mut e, &["GET", "c"]), NIL);
        assert_eq!(
            run(&mut e, &["MSETNX", "c", "3", "d", "4"]),
            (":1\r\n".into(), vec!["SET c 3".into(), "SET d 4".into()])
        );
        assert_eq!(run(&mut e, &["GETSET", "c", "5"]), (bulk("3"), vec!["SET c 5".into()]));
        assert_eq!(run(&mut e, &["GETSET", "z", "5"]), (NIL.into(), vec!["SET z 5".into()]));
    }

    #[test]
    fn getdel_and_getex() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, &["GETDEL", "k"]), (NIL.into(), vec![]));
        r(&mut e, &["SET", "k", "v"]);
        assert_eq!(run(&mut e, &["GETDEL", "k"]), (bulk("v"), vec!["DEL k".into()]));
        assert_eq!(e.ks.len(), 0);

        r(&mut e, &["SET", "k", "v"]);
        assert_eq!(run(&mut e, &["GETEX", "k"]), (bulk("v"), vec![]));
        assert_eq!(
            run(&mut e, &["GETEX", "k", "PERSIST"]),
            (bulk("v"), vec![]),
            "no TTL: nothing to persist"
        );
        assert_eq!(
            run(&mut e, &["GETEX", "k", "EX", "10"]),
            (bulk("v"), vec![format!("PEXPIREAT k {}", NOW + 10_000)])
        );
        assert_eq!(e.ks.expire_at(b"k"), Some(NOW + 10_000));
        assert_eq!(run(&mut e, &["GETEX", "k", "PX", "10"]).1, vec![format!("PEXPIREAT k {}", NOW + 10)]);
        assert_eq!(
            run(&mut e, &["GETEX", "k", "PXAT", "1800000000000"]).1,
            vec!["PEXPIREAT k 1800000000000"]
        );
        assert_eq!(run(&mut e, &["GETEX", "k", "EXAT", "1800000001"]).1, vec!["PEXPIREAT k 1800000001000"]);
        assert_eq!(run(&mut e, &["GETEX", "k", "persist", "PERSIST"]), (bulk("v"), vec!["PERSIST k".into()]));
        assert_eq!(e.ks.expire_at(b"k"), None);
        // An absolute time in the past deletes the key.
        assert_eq!(run(&mut e, &["GETEX", "k", "EXAT", "1"]), (bulk("v"), vec!["DEL k".into()]));
        assert_eq!(e.ks.len(), 0);

        r(&mut e, &["SET", "k", "v"]);
        for bad in [
            &["GETEX", "k", "EX", "1", "PX", "1"][..],
            &["GETEX", "k", "KEEPTTL"],
            &["GETEX", "k", "EX"],
            &["GETEX", "k", "NX"],
            &["GETEX", "k", "PERSIST", "EX", "1"],
        ] {
            assert_eq!(r(&mut e, bad), SYNTAX, "{bad:?}");
        }
        assert_eq!(r(&mut e, &["GETEX", "k", "EX", "0"]), err("ERR invalid expire time in 'getex' command"));
        assert_eq!(r(&mut e, &["GETEX", "k", "EX", "x"]), NOT_INT);
        // A missing key answers nil before the expiry value is looked at.
        assert_eq!(r(&mut e, &["GETEX", "nokey", "EX", "0"]), NIL);
        assert_eq!(r(&mut e, &["GETEX"]), err("ERR wrong number of arguments for 'getex' command"));
    }

    #[test]
    fn append_strlen_ranges() {
        let mut e = Engine::default();
        assert_eq!(r(&mut e, &["STRLEN", "k"]), ":0\r\n");
        assert_eq!(run(&mut e, &["APPEND", "k", "Hel"]), (":3\r\n".into(), vec!["APPEND k Hel".into()]));
        r(&mut e, &["PEXPIREAT", "k", "1800000000000"]);
        assert_eq!(run(&mut e, &["APPEND", "k", "lo"]), (":5\r\n".into(), vec!["APPEND k lo".into()]));
        assert_eq!(e.ks.expire_at(b"k"), Some(1_800_000_000_000), "APPEND keeps the TTL");
        assert_eq!(run(&mut e, &["APPEND", "k", ""]), (":5\r\n".into(), vec![]));
        assert_eq!(run(&mut e, &["APPEND", "empty", ""]), (":0\r\n".into(), vec!["APPEND empty ".into()]));
        assert_eq!(r(&mut e, &["EXISTS", "empty"]), ":1\r\n");
        assert_eq!(r(&mut e, &["STRLEN", "k"]), ":5\r\n");
        for (s, t, want) in [
            ("0", "-1", "Hello"),
            ("-1", "-5", ""),
            ("-5", "-1", "Hello"),
            ("2", "100", "llo"),
            ("10", "20", ""),
            ("-100", "-50", "H"),
            ("-100", "1", "He"),
            ("3", "1", ""),
            ("0", "-100", "H"),
            ("0", "9223372036854775807", "Hello"),
            ("-9223372036854775808", "-1", "Hello"),
        ] {
            assert_eq!(r(&mut e, &["GETRANGE", "k", s, t]), bulk(want), "{s} {t}");
        }
        assert_eq!(r(&mut e, &["SUBSTR", "k", "1", "2"]), bulk("el"));
        assert_eq!(r(&mut e, &["GETRANGE", "nokey", "0", "1"]), bulk(""));
        assert_eq!(r(&mut e, &["GETRANGE", "nokey", "x", "1"]), NOT_INT);
        r(&mut e, &["SET", "n", "12345"]);
        assert_eq!(r(&mut e, &["GETRANGE", "n", "1", "2"]), bulk("23"));
        assert_eq!(r(&mut e, &["STRLEN", "n"]), ":5\r\n");
        assert_eq!(run(&mut e, &["APPEND", "n", "6"]), (":6\r\n".into(), vec!["APPEND n 6".into()]));
        assert_eq!(r(&mut e, &["INCR", "n"]), ":123457\r\n");
    }

    #[test]
    fn setrange_rules() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, &["SETRANGE", "k", "0", ""]), (":0\r\n".into(), vec![]));
        assert_eq!(e.ks.len(), 0, "an empty patch creates nothing");
        assert_eq!(
            run(&mut e, &["SETRANGE", "k", "1", "foo"]),
            (":4\r\n".into(), vec!["SETRANGE k 1 foo".into()])
        );
        assert_eq!(
            run(&mut e, &["SETRANGE", "k", "0", "b"]),
            (":4\r\n".into(), vec!["SETRANGE k 0 b".into()])
        );
        assert_eq!(
            run(&mut e, &["SETRANGE", "k", "6", "x"]),
            (":7\r\n".into(), vec!["SETRANGE k 6 x".into()])
        );
        assert_eq!(run(&mut e, &["SETRANGE", "k", "0", ""]), (":7\r\n".into(), vec![]));
        r(&mut e, &["SET", "n", "1234"]);
        assert_eq!(r(&mut e, &["SETRANGE", "n", "1", "3"]), ":4\r\n");
        assert_eq!(r(&mut e, &["GET", "n"]), bulk("1334"));
        let too_long = err("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        assert_eq!(r(&mut e, &["SETRANGE", "k", "536870912", "x"]), too_long);
        assert_eq!(r(&mut e, &["SETRANGE", "new", "536870908", "world"]), too_long);
        assert_eq!(r(&mut e, &["SETRANGE", "new", "9223372036854775807", "x"]), too_long);
        assert_eq!(r(&mut e, &["SETRANGE", "new", "536870912", ""]), ":0\r\n", "empty patch: no size check");
        assert_eq!(r(&mut e, &["SETRANGE", "k", "-1", "x"]), err("ERR offset is out of range"));
        assert_eq!(r(&mut e, &["SETRANGE", "k", "x", "x"]), NOT_INT);
        assert_eq!(r(&mut e, &["GET", "k"]), bulk("bfoo\0\0x"));
    }

    #[test]
    fn integer_counters() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, &["INCR", "c"]), (":1\r\n".into(), vec!["SET c 1 KEEPTTL".into()]));
        assert_eq!(run(&mut e, &["INCRBY", "c", "41"]), (":42\r\n".into(), vec!["SET c 42 KEEPTTL".into()]));
        assert_eq!(run(&mut e, &["DECR", "c"]), (":41\r\n".into(), vec!["SET c 41 KEEPTTL".into()]));
        assert_eq!(run(&mut e, &["DECRBY", "c", "50"]), (":-9\r\n".into(), vec!["SET c -9 KEEPTTL".into()]));
        assert_eq!(r(&mut e, &["GET", "c"]), bulk("-9"));
        r(&mut e, &["PEXPIREAT", "c", "1800000000000"]);
        r(&mut e, &["INCR", "c"]);
        assert_eq!(e.ks.expire_at(b"c"), Some(1_800_000_000_000), "INCR keeps the TTL");

        let overflow = err("ERR increment or decrement would overflow");
        r(&mut e, &["SET", "m", "9223372036854775807"]);
        assert_eq!(run(&mut e, &["INCR", "m"]), (overflow.clone(), vec![]));
        assert_eq!(r(&mut e, &["INCRBY", "m", "-9223372036854775808"]), ":-1\r\n");
        r(&mut e, &["SET", "m", "-9223372036854775808"]);
        assert_eq!(r(&mut e, &["DECR", "m"]), overflow);
        assert_eq!(r(&mut e, &["INCRBY", "m", "-1"]), overflow);
        assert_eq!(r(&mut e, &["DECRBY", "m", "-9223372036854775808"]), err("ERR decrement would overflow"));
        assert_eq!(r(&mut e, &["DECRBY", "m", "9223372036854775807"]), overflow);
        assert_eq!(r(&mut e, &["GET", "m"]), bulk("-9223372036854775808"));

        for v in ["abc", " 1", "1 ", "01", "-0", "+1", "1.0", "9223372036854775808", ""] {
            r(&mut e, &["SET", "s", v]);
            assert_eq!(run(&mut e, &["INCR", "s"]), (NOT_INT.into(), vec![]), "{v:?}");
        }
        for arg in ["x", "1.5", "", "9223372036854775808", " 1"] {
            assert_eq!(r(&mut e, &["INCRBY", "c", arg]), NOT_INT, "{arg:?}");
            assert_eq!(r(&mut e, &["DECRBY", "c", arg]), NOT_INT, "{arg:?}");
        }
        // Results are stored as integers.
        assert!(matches!(e.ks.get(b"c"), Some(store::ValueRef::Str(store::StrRef::Int(-8)))));
    }

    /// (stored value or "" for none, increment, Redis 7.0.15's reply), captured from
    /// redis-server on x86-64.
    const FLOAT_CASES: &[(&str, &str, &str)] = &[
        ("", "0.1", "0.1"),
        ("0.1", "0.1", "0.2"),
        ("0.2", "0.1", "0.3"),
        ("10.5", "0.1", "10.6"),
        ("5.0e3", "2.0e2", "5200"),
        ("", "3.0", "3"),
        ("", "1.5e-7", "0.00000015"),
        ("", "1e-20", "0"),
        ("17179869184", "0.1", "17179869184.09999999962747097"),
        ("", "1e308", "99999999999999999996685879655845645660560099847415567207797047994921734868838061872100126921888539320446747225054013223152134749593960583597420814430196418767959100019603190778663109604507106667939153395788938914560543563061268364901618630217086589253444881623791300855757318142424510452728255046343928578048"),
        ("", "+1.5", "1.5"),
        ("", ".5", "0.5"),
        ("", "5.", "5"),
        ("", "123456789012345678901234567890", "123456789012345678899921813504"),
        ("1e20", "0.1", "100000000000000000000"),
        ("", "0x10", "16"),
        ("", "0x1.8p1", "3"),
        ("", "0X1P-3", "0.125"),
        ("", "0.000003814697265625", "0.00000381469726562"),
        ("", "-0.000003814697265625", "-0.00000381469726562"),
        ("1", "-1", "0"),
        ("", "-0", "0"),
        ("", "-1e-30", "0"),
        ("3", "-5.5", "-2.5"),
        ("1.1", "2.2", "3.3"),
        ("", "0.3333333333333333333333", "0.33333333333333333"),
        ("9223372036854775807", "1", "9223372036854775808"),
        ("-9223372036854775808", "-0.5", "-9223372036854775808"),
        ("", "1e-4940", "0"),
        // Subnormal long doubles (down to half of 2^-16445) are numbers to strtold, so Redis
        // 7.0.15 adds them and prints 0, stored or given as the increment.
        ("", "3e-4951", "0"),
        ("", "-3e-4951", "0"),
        ("", "1.9e-4951", "0"),
        ("3e-4951", "1", "1"),
        ("5", "0x1.8p-16446", "5"),
        ("", "1e-17", "0.00000000000000001"),
        ("", "5e-18", "0"),
        ("", "5.000001e-18", "0.00000000000000001"),
        ("", "1.5e-17", "0.00000000000000002"),
        ("", "2.5e-17", "0.00000000000000002"),
        ("0.1", "1e-17", "0.10000000000000001"),
        ("2.5", "2.5", "5"),
        ("", "0.1e1", "1"),
        ("", "1E2", "100"),
        ("1.7976931348623157e308", "1.7976931348623157e308", "359538626972463139991842093548208868096772893888658356970628841530353257046248792709403737216774171128857586838851041378617416726902272110715794556052955234146997955372576789671236326588091188869859074894581254961338834769297758245552436667197907705664206565009503223382416235440319971852753604933726679072768"),
    ];

    #[test]
    fn incrbyfloat_matches_redis() {
        for (stored, incr, want) in FLOAT_CASES {
            let mut e = Engine::default();
            if !stored.is_empty() {
                r(&mut e, &["SET", "f", stored]);
            }
            let (reply, muts) = run(&mut e, &["INCRBYFLOAT", "f", incr]);
            assert_eq!(reply, bulk(want), "{stored:?} + {incr:?}");
            assert_eq!(muts, vec![format!("SET f {want} KEEPTTL")]);
        }
        // Three increments of 0.1 read back as 0.3, as in Redis (f64 would say ...04).
        let mut e = Engine::default();
        for want in ["0.1", "0.2", "0.3"] {
            assert_eq!(r(&mut e, &["INCRBYFLOAT", "f", "0.1"]), bulk(want));
        }
        // The largest finite long doubles print in full.
        let mut e = Engine::default();
        let big = r(&mut e, &["INCRBYFLOAT", "f", "1e4932"]);
        assert!(big.starts_with("$4933\r\n10000000000000000000060189493879638913238377742545331147737850413525330194866087224"), "{}", &big[..40]);
    }

    #[test]
    fn incrbyfloat_errors() {
        let nan_inf = err("ERR increment would produce NaN or Infinity");
        let not_float = err("ERR value is not a valid float");
        let mut e = Engine::default();
        for (stored, incr, want) in [
            ("", "inf", &nan_inf),
            ("", "Infinity", &nan_inf),
            ("", "-inf", &nan_inf),
            ("1.18e4932", "1.18e4932", &nan_inf),
            ("inf", "-inf", &nan_inf),
            ("", "NaN", &not_float),
            ("", "abc", &not_float),
            ("", "1e", &not_float),
            ("", " 1", &not_float),
            ("", "1 ", &not_float),
            ("", "", &not_float),
            ("", "0x", &not_float),
            ("", "1e5000", &not_float),
            ("", "1.19e4932", &not_float),
            ("", "1e-5000", &not_float),
            // Below half the smallest subnormal strtold underflows to 0 (ERANGE): refused.
            ("", "1.82e-4951", &not_float),
            ("", "0x1p-16446", &not_float),
            ("1e-4951", "1", &not_float),
            // strtold stops at a NUL, and Redis then refuses the unread rest.
            ("", "1\0", &not_float),
            ("", "\0", &not_float),
            ("2\0zz", "1", &not_float),
            ("12", "abc", &not_float),
            ("abc", "1", &not_float),
            ("abc", "inf", &not_float),
        ] {
            e.ks.clear();
            if !stored.is_empty() {
                r(&mut e, &["SET", "f", stored]);
            }
            assert_eq!(
                run(&mut e, &["INCRBYFLOAT", "f", incr]),
                (want.clone(), vec![]),
                "{stored:?} + {incr:?}"
            );
        }
        // The old value and TTL survive a failed increment; a good one keeps the TTL.
        r(&mut e, &["SET", "f", "1.5", "PXAT", "1800000000000"]);
        assert_eq!(r(&mut e, &["INCRBYFLOAT", "f", "inf"]), nan_inf);
        assert_eq!(r(&mut e, &["INCRBYFLOAT", "f", "1"]), bulk("2.5"));
        assert_eq!(e.ks.expire_at(b"f"), Some(1_800_000_000_000));
    }
}
