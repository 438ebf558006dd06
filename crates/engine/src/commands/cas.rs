//! Conditional writes (compare-and-set / compare-and-delete), after Redis 8.4 and Valkey 9:
//! the IF* conditions SET accepts (parsed and judged here, applied by `string.rs`), DELEX,
//! DIGEST, MSETEX and Valkey's DELIFEQ. See `shared/spec/redis-arrays-and-conditional-writes.md`
//! section 5 for the sources and the points Redis's documentation leaves open.
//!
//! Canonical mutations: a successful DELEX/DELIFEQ is `DEL key` (Redis and Valkey replicate it
//! so too); MSETEX is one `SET key value [PXAT t | KEEPTTL]` per key; a failed condition emits
//! nothing.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::commands::string::{deadline, store_string, SetTtl, Ttl, Unit};
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{eq_ic, parse_i64};
use resp::reply;
use store::{StrRef, ValueMut, ValueRef};

const G: &str = "string";

pub static COMMANDS: &[CommandSpec] = &[
    spec("delex", -2, Flags::WRITE | Flags::FAST, (1, 1, 1), G, "Conditionally removes the specified key based on value or digest comparison.", Handler::Data(delex)),
    spec("digest", 2, Flags::READONLY | Flags::FAST, (1, 1, 1), G, "Returns the XXH3 hash of a string value.", Handler::Data(digest)),
    spec("msetex", -4, Flags::WRITE | Flags::DENYOOM | Flags::MOVABLEKEYS, (0, 0, 0), G, "Atomically sets multiple string keys with a shared expiration.", Handler::Data(msetex)),
    spec("delifeq", 3, Flags::WRITE, (1, 1, 1), G, "Deletes a key if its value equals the given one.", Handler::Data(delifeq)),
];

/// A bad IFDEQ/IFDNE argument (Redis 8.4.1 and later check it whenever it is compared).
const BAD_DIGEST: &[u8] = b"ERR must be exactly 16 hexadecimal characters";
/// DELEX with a condition word it does not know.
const BAD_CONDITION: &[u8] = b"ERR Invalid condition. Use IFEQ, IFNE, IFDEQ, or IFDNE";
const BAD_NUMKEYS: &[u8] = b"ERR invalid numkeys value";
const BAD_PAIRS: &[u8] = b"ERR wrong number of key-value pairs";

/// One compare-and-set condition with its argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond<'a> {
    /// The key holds exactly this string.
    IfEq(&'a [u8]),
    /// The key is missing or holds a different string.
    IfNe(&'a [u8]),
    /// The key's digest equals this one (16 hex digits, any case).
    IfDeq(&'a [u8]),
    /// The key is missing or its digest differs.
    IfDne(&'a [u8]),
}

impl<'a> Cond<'a> {
    /// Recognizes `IFEQ|IFNE|IFDEQ|IFDNE` (any case) with its argument.
    pub fn parse(word: &[u8], arg: &'a [u8]) -> Option<Cond<'a>> {
        if eq_ic(word, b"ifeq") {
            Some(Cond::IfEq(arg))
        } else if eq_ic(word, b"ifne") {
            Some(Cond::IfNe(arg))
        } else if eq_ic(word, b"ifdeq") {
            Some(Cond::IfDeq(arg))
        } else if eq_ic(word, b"ifdne") {
            Some(Cond::IfDne(arg))
        } else {
            None
        }
    }

    /// Whether the guarded write may go ahead, given the key's current string (None: missing).
    /// A missing key passes the "not equal" forms and fails the "equal" ones. The digest
    /// argument is validated only when there is a value to compare it with.
    pub fn holds(&self, current: Option<StrRef<'_>>) -> Result<bool, &'static [u8]> {
        let Some(cur) = current else {
            return Ok(matches!(self, Cond::IfNe(_) | Cond::IfDne(_)));
        };
        Ok(match *self {
            Cond::IfEq(v) => cur.with_bytes(|b| b == v),
            Cond::IfNe(v) => cur.with_bytes(|b| b != v),
            Cond::IfDeq(d) => digest_matches(cur, d)?,
            Cond::IfDne(d) => !digest_matches(cur, d)?,
        })
    }
}

/// DIGEST's value: XXH3-64 (seed 0) of the string's bytes, as 16 lowercase hex digits.
/// Integer-encoded strings are hashed over their decimal text, like any other string.
pub fn digest_hex(s: StrRef<'_>) -> [u8; 16] {
    let h = s.with_bytes(xxhash_rust::xxh3::xxh3_64);
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = b"0123456789abcdef"[((h >> (60 - 4 * i)) & 0xf) as usize];
    }
    out
}

fn digest_matches(cur: StrRef<'_>, given: &[u8]) -> Result<bool, &'static [u8]> {
    if given.len() != 16 || !given.iter().all(u8::is_ascii_hexdigit) {
        return Err(BAD_DIGEST);
    }
    Ok(digest_hex(cur).eq_ignore_ascii_case(given))
}

/// DIGEST key
fn digest(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match c.read(args[1]) {
        None => reply::null_bulk(out),
        Some(ValueRef::Str(s)) => reply::bulk(out, &digest_hex(s)),
        Some(_) => reply::error(out, errors::WRONGTYPE),
    }
}

/// Deletes `key` and emits `DEL key`; the caller knows it is live.
fn delete(c: &mut Ctx, key: &[u8]) {
    c.ks.delete(key);
    c.emit(&[b"DEL", key]);
}

/// DELEX key [IFEQ v | IFNE v | IFDEQ d | IFDNE d]. Without a condition it deletes a key of any
/// type, like DEL. With one, the key must hold a string, and a missing key is never "deleted"
/// (0 even for IFNE/IFDNE, unlike SET ... IFNE, which creates it).
fn delex(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let cond = match args.len() {
        2 => None,
        4 => match Cond::parse(args[2], args[3]) {
            Some(cond) => Some(cond),
            None => return reply::error(out, BAD_CONDITION),
        },
        _ => return errors::wrong_arity(out, args[0]),
    };
    let go = match (c.write(key), cond) {
        (None, _) => Ok(false),
        (Some(_), None) => Ok(true),
        (Some(ValueMut::Str(s)), Some(cond)) => cond.holds(Some(s)),
        (Some(_), Some(_)) => Err(errors::WRONGTYPE),
    };
    match go {
        Ok(true) => {
            delete(c, key);
            reply::integer(out, 1);
        }
        Ok(false) => reply::integer(out, 0),
        Err(e) => reply::error(out, e),
    }
}

/// DELIFEQ key value (Valkey 9.0): DELEX key IFEQ value.
fn delifeq(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let go = match c.write(key) {
        None => false,
        Some(ValueMut::Str(s)) => s.with_bytes(|b| b == args[2]),
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    if go {
        delete(c, key);
    }
    reply::integer(out, go as i64);
}

/// MSETEX numkeys key value [key value ...] [NX | XX] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]
///
/// All or nothing: NX needs every key missing, XX every key present; reply 1 if the keys were
/// written, 0 if none was. Without an expiry option the keys end up persistent, as with MSET.
fn msetex(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let n = match parse_i64(args[1]) {
        Some(n) if n >= 1 && n <= i32::MAX as i64 => n as usize,
        _ => return reply::error(out, BAD_NUMKEYS),
    };
    let pairs_end = match n.checked_mul(2).map(|p| p + 2) {
        Some(end) if end <= args.len() => end,
        _ => return reply::error(out, BAD_PAIRS),
    };
    let (mut nx, mut xx, mut ttl) = (false, false, Ttl::None);
    let mut i = pairs_end;
    while i < args.len() {
        let w = args[i];
        let ok = if eq_ic(w, b"nx") {
            nx = true;
            !xx
        } else if eq_ic(w, b"xx") {
            xx = true;
            !nx
        } else if eq_ic(w, b"keepttl") {
            ttl.accept_word(Ttl::Keep)
        } else if let (Some(unit), Some(arg)) = (Unit::from_word(w), args.get(i + 1)) {
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
    let set_ttl = match ttl {
        Ttl::Set(unit, arg) => match deadline(c.now, unit, arg, b"msetex") {
            Ok(at) => SetTtl::At(at),
            Err(e) => return reply::error(out, &e),
        },
        Ttl::Keep => SetTtl::Keep,
        Ttl::None | Ttl::Persist => SetTtl::Persistent,
    };
    let pairs = &args[2..pairs_end];
    if nx || xx {
        // Check every key (expiring dead ones) before writing any.
        let mut present = 0;
        for kv in pairs.chunks(2) {
            present += c.exists(kv[0]) as usize;
        }
        if (nx && present > 0) || (xx && present < n) {
            return reply::integer(out, 0);
        }
    }
    for kv in pairs.chunks(2) {
        store_string(c, kv[0], kv[1], set_ttl);
    }
    reply::integer(out, 1);
}
