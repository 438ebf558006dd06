//! Sparse array commands (Redis 8.8's AR* family), per
//! /work/shared/spec/redis-arrays-and-conditional-writes.md and Redis's `t_array.c`.
//!
//! Canonical mutations, one per element so compaction keys work:
//! - `ARSET key index value` for every slot written (ARSET, ARMSET, ARINSERT, ARRING);
//! - `ARDEL key index` for every element removed (ARDEL, ARDELRANGE);
//! - `ARSEEK key n` for the insert cursor after ARINSERT/ARRING/ARSEEK (`n` = cursor + 1, 0
//!   for "unset", 2^64-1 for the terminal state), so replay restores the cursor exactly;
//! - an ARRING that rebuilds the array emits ARSET for every element of the final array, then
//!   ARDEL for every old index that is gone, then the ARSEEK (never a DEL: the key's TTL must
//!   survive).
//!
//! Indexes and counts are u64: replies above i64::MAX go out as bulk strings (as Redis 8.8's
//! RESP2 replies reportedly do for unsigned values that do not fit a RESP integer; the notes
//! mark this UNCONFIRMED against a live server).
//!
//! Where the notes leave a choice open, this module follows Redis's code: index arguments use
//! `string2ull`'s leniency (`+5`, ` 5`, `007`, wrapping negatives past i64), AROP prints
//! SUM/MIN/MAX like `%.17Lg` of a long double (emulated to 19 significant decimal digits), and
//! ARGREP's `RE` uses a Rust regex engine in byte mode for TRE's POSIX extended syntax.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{eq_ic, glob_match, parse_i64};
use regex_automata::meta::Regex;
use regex_automata::util::syntax;
use resp::reply;
use store::types::array::{SparseArray, CURSOR_UNSET};
use store::types::list::Elem;
use store::{Value, ValueMut, ValueRef};

const WDF: u32 = Flags::WRITE | Flags::DENYOOM | Flags::FAST;
const WD: u32 = Flags::WRITE | Flags::DENYOOM;
const WF: u32 = Flags::WRITE | Flags::FAST;
const W: u32 = Flags::WRITE;
const RF: u32 = Flags::READONLY | Flags::FAST;
const R: u32 = Flags::READONLY;
const G: &str = "array";
const K: (i32, i32, i32) = (1, 1, 1);

pub static COMMANDS: &[CommandSpec] = &[
    spec("arset", -4, WDF, K, G, "Sets consecutive elements of an array.", Handler::Data(arset)),
    spec("armset", -4, WDF, K, G, "Sets several index/value pairs of an array.", Handler::Data(armset)),
    spec("arget", 3, RF, K, G, "Returns the element at an index of an array.", Handler::Data(arget)),
    spec(
        "armget",
        -3,
        RF,
        K,
        G,
        "Returns the elements at several indexes of an array.",
        Handler::Data(armget),
    ),
    spec("arlen", 2, RF, K, G, "Returns the highest index of an array plus one.", Handler::Data(arlen)),
    spec("arcount", 2, RF, K, G, "Returns the number of elements in an array.", Handler::Data(arcount)),
    spec("ardel", -3, WF, K, G, "Deletes elements of an array.", Handler::Data(ardel)),
    spec("ardelrange", -4, W, K, G, "Deletes ranges of elements of an array.", Handler::Data(ardelrange)),
    spec(
        "argetrange",
        4,
        R,
        K,
        G,
        "Returns every position of a range of an array.",
        Handler::Data(argetrange),
    ),
    spec(
        "arscan",
        -4,
        R,
        K,
        G,
        "Returns the existing elements of a range of an array.",
        Handler::Data(arscan),
    ),
    spec("argrep", -6, R, K, G, "Searches the elements of a range of an array.", Handler::Data(argrep)),
    spec("arop", -5, R, K, G, "Aggregates the elements of a range of an array.", Handler::Data(arop)),
    spec(
        "arinsert",
        -3,
        WDF,
        K,
        G,
        "Appends values at the insert cursor of an array.",
        Handler::Data(arinsert),
    ),
    spec("arnext", 2, RF, K, G, "Returns the index the next ARINSERT would use.", Handler::Data(arnext)),
    spec("arseek", 3, WF, K, G, "Sets the insert cursor of an array.", Handler::Data(arseek)),
    spec("arring", -4, WD, K, G, "Writes values into an array used as a ring buffer.", Handler::Data(arring)),
    spec(
        "arlastitems",
        -3,
        R,
        K,
        G,
        "Returns the most recently inserted positions of an array.",
        Handler::Data(arlastitems),
    ),
    spec("arinfo", -2, R, K, G, "Returns metadata about an array.", Handler::Data(arinfo)),
];

const INVALID_INDEX: &[u8] = b"ERR invalid array index";
const MAX_REPLY_ITEMS: u64 = 1_000_000;

/// Parses an array index as Redis does (`string2ull`): a canonical i64 if it is one (negative
/// refused), otherwise C's `strtoull` in base 10, which also takes leading whitespace, a `+`,
/// leading zeros, and a `-` that wraps modulo 2^64. 2^64-1 only when `allow_max` (ARSEEK).
pub fn parse_index(a: &[u8], allow_max: bool) -> Option<u64> {
    let v = match parse_i64(a) {
        Some(v) if v < 0 => return None,
        Some(v) => v as u64,
        None => strtoull(a)?,
    };
    (allow_max || v != u64::MAX).then_some(v)
}

/// `strtoull(s, &end, 10)` accepted only when it consumed the whole, non-empty string without
/// overflow.
fn strtoull(a: &[u8]) -> Option<u64> {
    let mut i = 0;
    while i < a.len() && matches!(a[i], b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r') {
        i += 1;
    }
    let mut neg = false;
    if i < a.len() && (a[i] == b'+' || a[i] == b'-') {
        neg = a[i] == b'-';
        i += 1;
    }
    let digits = &a[i..];
    if digits.is_empty() || !digits.iter().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// An unsigned reply: a RESP integer when it fits i64, else a bulk string.
fn reply_u64(out: &mut Vec<u8>, v: u64) {
    if v <= i64::MAX as u64 {
        reply::integer(out, v as i64)
    } else {
        reply::bulk(out, itoa::Buffer::new().format(v).as_bytes())
    }
}

fn reply_elem(out: &mut Vec<u8>, proto: resp::Proto, e: Option<Elem<'_>>) {
    match e {
        Some(e) => e.with_bytes(|b| reply::bulk(out, b)),
        None => reply::null_bulk(out, proto),
    }
}

/// What a key holds, for array commands.
enum Look {
    Missing,
    Wrong,
    Array,
}

fn look(c: &mut Ctx, key: &[u8], for_write: bool) -> Look {
    let kind = if for_write {
        c.write(key).map(|v| matches!(v, ValueMut::Array(_)))
    } else {
        c.read(key).map(|v| matches!(v, ValueRef::Array(_)))
    };
    match kind {
        None => Look::Missing,
        Some(true) => Look::Array,
        Some(false) => Look::Wrong,
    }
}

fn arr<'a>(c: &'a Ctx, key: &[u8]) -> &'a SparseArray {
    match c.ks.get(key) {
        Some(ValueRef::Array(a)) => a,
        _ => unreachable!("checked to be an array"),
    }
}

fn arr_mut<'a>(c: &'a mut Ctx, key: &[u8]) -> &'a mut SparseArray {
    match c.ks.get_mut(key) {
        Some(ValueMut::Array(a)) => a,
        _ => unreachable!("checked to be an array"),
    }
}

/// Makes sure `key` holds an array, creating an empty one if the key is missing (the caller
/// then fills it, so no empty array survives the command). Returns false, with WRONGTYPE
/// replied, if the key holds another type.
fn array_for_write(c: &mut Ctx, out: &mut Vec<u8>, key: &[u8]) -> bool {
    match look(c, key, true) {
        Look::Wrong => {
            reply::error(out, errors::WRONGTYPE);
            false
        }
        Look::Missing => {
            c.ks.insert(key, Value::Array(Box::new(SparseArray::new())), None);
            true
        }
        Look::Array => true,
    }
}

fn emit_arset(c: &mut Ctx, key: &[u8], idx: u64, v: &[u8]) {
    let mut b = itoa::Buffer::new();
    c.emit(&[b"ARSET", key, b.format(idx).as_bytes(), v]);
}

fn emit_seek(c: &mut Ctx, key: &[u8]) {
    let cur = arr(c, key).cursor();
    let n = if cur == CURSOR_UNSET { 0 } else { cur + 1 };
    let mut b = itoa::Buffer::new();
    c.emit(&[b"ARSEEK", key, b.format(n).as_bytes()]);
}

/// ARSET key index value [value ...]
fn arset(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let Some(start) = parse_index(args[2], false) else {
        return reply::error(out, INVALID_INDEX);
    };
    let vals = &args[3..];
    match start.checked_add(vals.len() as u64 - 1) {
        Some(last) if last != u64::MAX => {}
        _ => return reply::error(out, b"ERR array index overflow"),
    }
    if !array_for_write(c, out, key) {
        return;
    }
    let a = arr_mut(c, key);
    let mut filled = 0u64;
    for (i, v) in vals.iter().enumerate() {
        filled += a.set(start + i as u64, v) as u64;
    }
    for (i, v) in vals.iter().enumerate() {
        emit_arset(c, key, start + i as u64, v);
    }
    reply_u64(out, filled);
}

/// ARMSET key index value [index value ...]
fn armset(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if !(args.len() - 2).is_multiple_of(2) {
        return errors::wrong_arity(out, args[0]);
    }
    let key = args[1];
    let mut pairs = Vec::with_capacity((args.len() - 2) / 2);
    for p in args[2..].chunks(2) {
        let Some(i) = parse_index(p[0], false) else {
            return reply::error(out, INVALID_INDEX);
        };
        pairs.push((i, p[1]));
    }
    if !array_for_write(c, out, key) {
        return;
    }
    let a = arr_mut(c, key);
    let before = a.count();
    for (i, v) in &pairs {
        a.set(*i, v);
    }
    let filled = a.count() - before;
    for (i, v) in pairs {
        emit_arset(c, key, i, v);
    }
    reply_u64(out, filled as u64);
}

/// ARGET key index
fn arget(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let l = look(c, args[1], false);
    if let Look::Wrong = l {
        return reply::error(out, errors::WRONGTYPE);
    }
    let Some(i) = parse_index(args[2], false) else {
        return reply::error(out, INVALID_INDEX);
    };
    match l {
        Look::Array => reply_elem(out, c.proto, arr(c, args[1]).get(i)),
        _ => reply::null_bulk(out, c.proto),
    }
}

/// ARMGET key index [index ...]
fn armget(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let l = look(c, args[1], false);
    if let Look::Wrong = l {
        return reply::error(out, errors::WRONGTYPE);
    }
    let mut idx = Vec::with_capacity(args.len() - 2);
    for a in &args[2..] {
        let Some(i) = parse_index(a, false) else {
            return reply::error(out, INVALID_INDEX);
        };
        idx.push(i);
    }
    reply::array_len(out, idx.len());
    let a = match l {
        Look::Array => Some(arr(c, args[1])),
        _ => None,
    };
    for i in idx {
        reply_elem(out, c.proto, a.and_then(|a| a.get(i)));
    }
}

/// ARLEN key
fn arlen(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match look(c, args[1], false) {
        Look::Wrong => reply::error(out, errors::WRONGTYPE),
        Look::Missing => reply::integer(out, 0),
        Look::Array => reply_u64(out, arr(c, args[1]).len()),
    }
}

/// ARCOUNT key
fn arcount(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match look(c, args[1], false) {
        Look::Wrong => reply::error(out, errors::WRONGTYPE),
        Look::Missing => reply::integer(out, 0),
        Look::Array => reply_u64(out, arr(c, args[1]).count() as u64),
    }
}

/// Deletes the key if its array emptied (Redis never keeps an empty array).
fn drop_if_empty(c: &mut Ctx, key: &[u8]) {
    if arr(c, key).is_empty() {
        c.ks.delete(key);
    }
}

/// ARDEL key index [index ...]
fn ardel(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let mut idx = Vec::with_capacity(args.len() - 2);
    for a in &args[2..] {
        let Some(i) = parse_index(a, false) else {
            return reply::error(out, INVALID_INDEX);
        };
        idx.push(i);
    }
    match look(c, key, true) {
        Look::Missing => return reply::integer(out, 0),
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Array => {}
    }
    let a = arr_mut(c, key);
    let removed: Vec<u64> = idx.into_iter().filter(|i| a.remove(*i)).collect();
    finish_removal(c, out, key, &removed);
}

/// Ends ARDEL / ARDELRANGE once `removed` (the indexes that held an element) are gone: drops
/// an emptied array, emits one ARDEL per index (replaying them empties and drops it the same
/// way) and replies with their count.
fn finish_removal(c: &mut Ctx, out: &mut Vec<u8>, key: &[u8], removed: &[u64]) {
    drop_if_empty(c, key);
    let mut b = itoa::Buffer::new();
    for i in removed {
        c.emit(&[b"ARDEL", key, b.format(*i).as_bytes()]);
    }
    reply_u64(out, removed.len() as u64);
}

/// ARDELRANGE key start end [start end ...]
fn ardelrange(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if !(args.len() - 2).is_multiple_of(2) {
        return errors::wrong_arity(out, args[0]);
    }
    let key = args[1];
    let mut ranges = Vec::new();
    for p in args[2..].chunks(2) {
        let (Some(s), Some(e)) = (parse_index(p[0], false), parse_index(p[1], false)) else {
            return reply::error(out, INVALID_INDEX);
        };
        ranges.push((s.min(e), s.max(e)));
    }
    match look(c, key, true) {
        Look::Missing => return reply::integer(out, 0),
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Array => {}
    }
    // Collect the doomed indexes first: each becomes one ARDEL mutation.
    let a = arr_mut(c, key);
    let mut removed: Vec<u64> = Vec::new();
    for (lo, hi) in ranges {
        a.for_each_in(lo, hi, false, |i, _| {
            removed.push(i);
            true
        });
        a.remove_range(lo, hi);
    }
    finish_removal(c, out, key, &removed);
}

/// ARGETRANGE key start end
fn argetrange(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (Some(s), Some(e)) = (parse_index(args[2], false), parse_index(args[3], false)) else {
        return reply::error(out, INVALID_INDEX);
    };
    let l = look(c, args[1], false);
    if let Look::Wrong = l {
        return reply::error(out, errors::WRONGTYPE);
    }
    let (lo, hi, rev) = (s.min(e), s.max(e), s > e);
    if hi - lo >= MAX_REPLY_ITEMS {
        return reply::error(out, b"ERR range exceeds maximum of 1000000 items");
    }
    let n = (hi - lo + 1) as usize;
    reply::array_len(out, n);
    let Look::Array = l else {
        for _ in 0..n {
            reply::null_bulk(out, c.proto);
        }
        return;
    };
    // Walk the existing elements in reply order and fill the holes between them with nils.
    let mut next = if rev { hi } else { lo };
    let mut written = 0usize;
    arr(c, args[1]).for_each_in(lo, hi, rev, |i, v| {
        let gap = if rev { next - i } else { i - next };
        for _ in 0..gap {
            reply::null_bulk(out, c.proto);
        }
        v.with_bytes(|b| reply::bulk(out, b));
        written += gap as usize + 1;
        next = if rev { i.wrapping_sub(1) } else { i.wrapping_add(1) };
        true
    });
    for _ in written..n {
        reply::null_bulk(out, c.proto);
    }
}

/// ARSCAN key start end [LIMIT limit]
fn arscan(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (Some(s), Some(e)) = (parse_index(args[2], false), parse_index(args[3], false)) else {
        return reply::error(out, INVALID_INDEX);
    };
    let mut limit = u64::MAX;
    if args.len() == 6 {
        if !eq_ic(args[4], b"limit") {
            return reply::error(out, errors::SYNTAX);
        }
        match parse_i64(args[5]) {
            None => return reply::error(out, errors::NOT_INTEGER),
            Some(n) if n <= 0 => return reply::error(out, b"ERR LIMIT must be positive"),
            Some(n) => limit = n as u64,
        }
    } else if args.len() != 4 {
        return errors::wrong_arity(out, args[0]);
    }
    match look(c, args[1], false) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Missing => return reply::array_len(out, 0),
        Look::Array => {}
    }
    let marker = reply::deferred_array_len(out);
    let mut n = 0u64;
    arr(c, args[1]).for_each_in(s.min(e), s.max(e), s > e, |i, v| {
        reply::array_len(out, 2);
        reply_u64(out, i);
        v.with_bytes(|b| reply::bulk(out, b));
        n += 1;
        n < limit
    });
    reply::finish_deferred_len(out, marker, n as usize);
}

#[derive(Clone, Copy, PartialEq)]
enum PredKind {
    Exact,
    Match,
    Glob,
    Re,
}

struct Pred<'a> {
    kind: PredKind,
    pat: &'a [u8],
    re: Option<Regex>,
}

/// ASCII-only case folding, as Redis's ARGREP does for EXACT and MATCH.
fn fold_eq(a: &[u8], b: &[u8], nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

fn contains(hay: &[u8], needle: &[u8], nocase: bool) -> bool {
    needle.is_empty()
        || (needle.len() <= hay.len() && hay.windows(needle.len()).any(|w| fold_eq(w, needle, nocase)))
}

/// ARGREP key start end <EXACT s | MATCH s | GLOB p | RE p> ... [AND | OR] [LIMIT n]
/// [WITHVALUES] [NOCASE]
fn argrep(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    // Bounds: an index, or "-" / "+" for the first / last position, resolved below.
    let bound = |a: &[u8]| -> Result<Option<u64>, ()> {
        match a {
            b"-" => Ok(Some(0)),
            b"+" => Ok(None),
            _ => parse_index(a, false).map(Some).ok_or(()),
        }
    };
    let (Ok(start), Ok(end)) = (bound(args[2]), bound(args[3])) else {
        return reply::error(out, INVALID_INDEX);
    };
    let mut preds: Vec<Pred> = Vec::new();
    let (mut and, mut limit, mut withvalues, mut nocase) = (false, u64::MAX, false, false);
    let mut j = 4;
    while j < args.len() {
        let t = args[j];
        let kind = [
            (b"exact".as_slice(), PredKind::Exact),
            (b"match", PredKind::Match),
            (b"glob", PredKind::Glob),
            (b"re", PredKind::Re),
        ]
        .iter()
        .find(|(n, _)| eq_ic(t, n))
        .map(|(_, k)| *k);
        if let Some(kind) = kind {
            if j + 1 >= args.len() {
                return reply::error(out, errors::SYNTAX);
            }
            if preds.len() >= 250 {
                return reply::error(out, b"ERR too many predicates, maximum is 250");
            }
            if kind == PredKind::Re && args[j + 1].len() > 2048 {
                return reply::error(out, b"ERR regular expression is too long, maximum is 2048 bytes");
            }
            preds.push(Pred { kind, pat: args[j + 1], re: None });
            j += 2;
        } else if eq_ic(t, b"limit") {
            if j + 1 >= args.len() {
                return reply::error(out, errors::SYNTAX);
            }
            match parse_i64(args[j + 1]) {
                None => return reply::error(out, errors::NOT_INTEGER),
                Some(n) if n <= 0 => return reply::error(out, b"ERR LIMIT must be positive"),
                Some(n) => limit = n as u64,
            }
            j += 2;
        } else if eq_ic(t, b"withvalues") {
            withvalues = true;
            j += 1;
        } else if eq_ic(t, b"nocase") {
            nocase = true;
            j += 1;
        } else if eq_ic(t, b"and") || eq_ic(t, b"or") {
            and = eq_ic(t, b"and");
            j += 1;
        } else {
            return reply::error(out, errors::SYNTAX);
        }
    }
    if preds.is_empty() {
        return reply::error(out, errors::SYNTAX);
    }
    // Regexes compile once every option is known, so NOCASE applies to all of them.
    for p in preds.iter_mut().filter(|p| p.kind == PredKind::Re) {
        match compile_re(p.pat, nocase) {
            Ok(re) => p.re = Some(re),
            Err(msg) => return reply::error(out, &msg),
        }
    }
    match look(c, args[1], false) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Missing => return reply::array_len(out, 0),
        Look::Array => {}
    }
    let a = arr(c, args[1]);
    let max = a.len() - 1;
    let (s, e) = (start.unwrap_or(max), end.unwrap_or(max));
    let test = |v: &[u8]| -> bool {
        let one = |p: &Pred| match p.kind {
            PredKind::Exact => fold_eq(v, p.pat, nocase),
            PredKind::Match => contains(v, p.pat, nocase),
            PredKind::Glob => glob_match(p.pat, v, nocase),
            PredKind::Re => p.re.as_ref().is_some_and(|re| re_match(re, v)),
        };
        if and {
            preds.iter().all(one)
        } else {
            preds.iter().any(one)
        }
    };
    let marker = reply::deferred_array_len(out);
    let mut n = 0u64;
    a.for_each_in(s.min(e), s.max(e), s > e, |i, v| {
        v.with_bytes(|b| {
            if test(b) {
                if withvalues {
                    reply::array_len(out, 2);
                    reply_u64(out, i);
                    reply::bulk(out, b);
                } else {
                    reply_u64(out, i);
                }
                n += 1;
            }
        });
        n < limit
    });
    reply::finish_deferred_len(out, marker, n as usize);
}

/// Compiles an ARGREP `RE` pattern in byte mode (POSIX extended syntax is close to the Rust
/// dialect for the common constructs). Returns Redis's error text on failure.
fn compile_re(pat: &[u8], nocase: bool) -> Result<Regex, Vec<u8>> {
    if pat.is_empty() {
        return Err(b"ERR regular expression is empty".to_vec());
    }
    let Ok(s) = std::str::from_utf8(pat) else {
        return Err(b"ERR invalid regular expression: Invalid regexp".to_vec());
    };
    // A backslash followed by a non-zero digit is a POSIX backreference. Redis compiles such
    // a pattern and then refuses it; the Rust dialect fails to compile it, so check first to
    // give Redis's message.
    let b = s.as_bytes();
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] == b'\\' {
            if (b'1'..=b'9').contains(&b[i + 1]) {
                return Err(b"ERR regular expression backreferences are not supported".to_vec());
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    let re = Regex::builder()
        .syntax(
            syntax::Config::new()
                .case_insensitive(nocase)
                .unicode(false)
                .utf8(false)
                .dot_matches_new_line(true),
        )
        .build(s)
        .map_err(|e| format!("ERR invalid regular expression: {e}").into_bytes())?;
    Ok(re)
}

fn re_match(re: &Regex, v: &[u8]) -> bool {
    re.is_match(v)
}

/// A numeric element as AROP reads it. `dec` is its exact decimal value when it has one
/// (plain decimal notation, at most 38 significant digits), used to print results the way
/// Redis's long double arithmetic does for ordinary data; `f` is its binary value.
#[derive(Clone, Copy)]
struct Num {
    f: f64,
    int: Option<i64>,
    dec: Option<Dec>,
}

/// `mant * 10^exp`, with a separate sign so that -0 survives.
#[derive(Clone, Copy)]
struct Dec {
    neg: bool,
    mant: u128,
    exp: i32,
}

fn parse_dec(s: &[u8]) -> Option<Dec> {
    let (neg, s) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (body, e) = match s.iter().position(|&b| b == b'e' || b == b'E') {
        Some(p) => (&s[..p], Some(&s[p + 1..])),
        None => (s, None),
    };
    let (int, frac) = match body.iter().position(|&b| b == b'.') {
        Some(p) => (&body[..p], &body[p + 1..]),
        None => (body, &b""[..]),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut mant: u128 = 0;
    for &d in int.iter().chain(frac.iter()) {
        if !d.is_ascii_digit() {
            return None;
        }
        mant = mant.checked_mul(10)?.checked_add((d - b'0') as u128)?;
    }
    let mut exp = -(frac.len() as i32);
    if let Some(e) = e {
        let e = std::str::from_utf8(e).ok()?;
        let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 6 {
            return None;
        }
        exp += e.parse::<i32>().ok()?;
    }
    Some(Dec { neg, mant, exp })
}

/// Reads an element as Redis's AROP does: an exact i64 (`string2ll`), else a float
/// (`string2ld`: no surrounding space, no NaN); anything else is not numeric.
fn parse_num(v: &[u8]) -> Option<Num> {
    if let Some(i) = parse_i64(v) {
        return Some(Num {
            f: i as f64,
            int: Some(i),
            dec: Some(Dec { neg: i < 0, mant: i.unsigned_abs() as u128, exp: 0 }),
        });
    }
    let f = crate::util::parse_long_double(v)?;
    Some(Num { f, int: None, dec: parse_dec(v) })
}

/// Formats like C's `%.17g`: `digits` are significant digits (no leading zeros), `x` the
/// decimal exponent of the first one.
fn fmt_g17(neg: bool, digits: &[u8], x: i32) -> String {
    let mut d: Vec<u8> = digits.to_vec();
    let mut x = x;
    if d.len() > 17 {
        let round_up = d[17] >= b'5';
        d.truncate(17);
        if round_up {
            let mut i = 16;
            loop {
                if d[i] == b'9' {
                    d[i] = b'0';
                    if i == 0 {
                        d.insert(0, b'1');
                        d.truncate(17);
                        x += 1;
                        break;
                    }
                    i -= 1;
                } else {
                    d[i] += 1;
                    break;
                }
            }
        }
    }
    while d.len() > 1 && d.last() == Some(&b'0') {
        d.pop();
    }
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    let ds = std::str::from_utf8(&d).expect("ascii digits");
    if !(-4..17).contains(&x) {
        s.push_str(&ds[..1]);
        if d.len() > 1 {
            s.push('.');
            s.push_str(&ds[1..]);
        }
        s.push_str(&format!("e{}{:02}", if x < 0 { '-' } else { '+' }, x.abs()));
    } else if x < 0 {
        s.push_str("0.");
        s.push_str(&"0".repeat((-x - 1) as usize));
        s.push_str(ds);
    } else {
        let xi = x as usize;
        if d.len() > xi + 1 {
            s.push_str(&ds[..=xi]);
            s.push('.');
            s.push_str(&ds[xi + 1..]);
        } else {
            s.push_str(ds);
            s.push_str(&"0".repeat(xi + 1 - d.len()));
        }
    }
    s
}

fn fmt_dec(d: Dec) -> String {
    if d.mant == 0 {
        return if d.neg { "-0".into() } else { "0".into() };
    }
    let digits = d.mant.to_string();
    let x = digits.len() as i32 - 1 + d.exp;
    fmt_g17(d.neg, digits.as_bytes(), x)
}

fn fmt_f64(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let s = format!("{:.16e}", v.abs());
    let (m, e) = s.split_once('e').expect("exponent form");
    let digits: Vec<u8> = m.bytes().filter(|b| *b != b'.').collect();
    fmt_g17(v < 0.0, &digits, e.parse().expect("exponent"))
}

fn num_string(n: &Num) -> String {
    match n.dec {
        Some(d) if n.f.is_finite() => match i128::try_from(d.mant) {
            Ok(m) => {
                let (m, e) = round_ld(m, d.exp);
                fmt_dec(Dec { neg: d.neg, mant: m.unsigned_abs(), exp: e })
            }
            Err(_) => fmt_f64(n.f),
        },
        _ => fmt_f64(n.f),
    }
}

/// Decimal digits that Redis's long double (64-bit mantissa) carries, about 19.3: sums are
/// kept to this many significant digits after every addition, so that cancellation and
/// absorption behave like Redis's arithmetic (e.g. 1e20 + 0.3 - 1e20 is 0, not 0.3) while
/// short decimals still add up exactly (0.1 + 0.2 is 0.3).
const LD_DIGITS: u32 = 19;

fn digits(m: u128) -> u32 {
    if m == 0 {
        1
    } else {
        m.ilog10() + 1
    }
}

/// Rounds a signed mantissa to at most [`LD_DIGITS`] digits (half away from zero).
fn round_ld(m: i128, e: i32) -> (i128, i32) {
    let d = digits(m.unsigned_abs());
    if d <= LD_DIGITS {
        return (m, e);
    }
    let k = d - LD_DIGITS;
    let p = 10u128.pow(k);
    let (q, r) = (m.unsigned_abs() / p, m.unsigned_abs() % p);
    let q = if r * 2 >= p { q + 1 } else { q } as i128;
    // A carry may add a digit (999.. -> 1000..); one more pass settles it.
    round_ld(if m < 0 { -q } else { q }, e + k as i32)
}

/// Scales a mantissa up to exactly [`LD_DIGITS`] digits (0 stays 0).
fn left_align(m: i128, e: i32) -> (i128, i32) {
    if m == 0 {
        return (0, e);
    }
    let k = LD_DIGITS - digits(m.unsigned_abs());
    (m * 10i128.pow(k), e - k as i32)
}

fn ld_add(a: (i128, i32), b: (i128, i32)) -> (i128, i32) {
    if b.0 == 0 {
        return a;
    }
    if a.0 == 0 {
        return b;
    }
    let (a, b) = (left_align(a.0, a.1), left_align(b.0, b.1));
    let (hi, lo) = if a.1 >= b.1 { (a, b) } else { (b, a) };
    let d = (hi.1 - lo.1) as u32;
    if d > LD_DIGITS {
        return hi; // lo is below the last carried digit of hi
    }
    // Both mantissas are below 10^19 and d <= 19, so this stays below 2 * 10^38 < i128::MAX.
    round_ld(hi.0 * 10i128.pow(d) + lo.0, lo.1)
}

/// The SUM of decimals with Redis's precision, or None if a value does not fit the model.
fn dec_sum(nums: &[Dec]) -> Option<Dec> {
    let mut acc: Option<(i128, i32)> = None;
    for d in nums {
        let m = i128::try_from(d.mant).ok()?;
        let v = round_ld(if d.neg { -m } else { m }, d.exp);
        acc = Some(match acc {
            None => v,
            Some(x) => ld_add(x, v),
        });
    }
    let (m, e) = acc?;
    // A zero sum of values that were all negative zeros keeps its sign, like the float sum.
    let all_neg_zero = nums.iter().all(|d| d.neg && d.mant == 0);
    Some(Dec { neg: m < 0 || (m == 0 && all_neg_zero), mant: m.unsigned_abs(), exp: e })
}

/// AROP key start end <SUM | MIN | MAX | AND | OR | XOR | MATCH value | USED>
fn arop(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (Some(s), Some(e)) = (parse_index(args[2], false), parse_index(args[3], false)) else {
        return reply::error(out, INVALID_INDEX);
    };
    let op = args[4].to_ascii_uppercase();
    if !matches!(op.as_slice(), b"SUM" | b"MIN" | b"MAX" | b"AND" | b"OR" | b"XOR" | b"MATCH" | b"USED") {
        return reply::error(out, b"ERR unknown operation");
    }
    if op == b"MATCH" {
        if args.len() != 6 {
            return reply::error(out, b"ERR MATCH requires a value argument");
        }
    } else if args.len() != 5 {
        return errors::wrong_arity(out, args[0]);
    }
    match look(c, args[1], false) {
        Look::Missing => {
            return match op.as_slice() {
                b"MATCH" | b"USED" => reply::integer(out, 0),
                _ => reply::null_bulk(out, c.proto),
            }
        }
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Array => {}
    }
    let a = arr(c, args[1]);
    let (lo, hi) = (s.min(e), s.max(e));
    match op.as_slice() {
        b"USED" | b"MATCH" => {
            let mut n = 0i64;
            a.for_each_in(lo, hi, false, |_, v| {
                if op == b"USED" || v.eq_bytes(args[5]) {
                    n += 1;
                }
                true
            });
            reply::integer(out, n)
        }
        b"AND" | b"OR" | b"XOR" => {
            let mut acc: Option<i64> = None;
            a.for_each_in(lo, hi, false, |_, v| {
                let Some(n) = v.with_bytes(parse_num) else { return true };
                let iv = match n.int {
                    Some(i) => i,
                    None if n.f.is_nan()
                        || n.f < -9.223_372_036_854_776e18
                        || n.f >= 9.223_372_036_854_776e18 =>
                    {
                        return true
                    }
                    None => n.f.trunc() as i64,
                };
                acc = Some(match (acc, op.as_slice()) {
                    (None, _) => iv,
                    (Some(x), b"AND") => x & iv,
                    (Some(x), b"OR") => x | iv,
                    (Some(x), _) => x ^ iv,
                });
                true
            });
            match acc {
                Some(x) => reply::integer(out, x),
                None => reply::null_bulk(out, c.proto),
            }
        }
        _ => {
            let mut nums: Vec<Num> = Vec::new();
            let mut best: Option<Num> = None;
            a.for_each_in(lo, hi, false, |_, v| {
                let Some(n) = v.with_bytes(parse_num) else { return true };
                match op.as_slice() {
                    b"SUM" => nums.push(n),
                    b"MIN" if best.is_none_or(|b| n.f < b.f) => best = Some(n),
                    b"MAX" if best.is_none_or(|b| n.f > b.f) => best = Some(n),
                    _ => {}
                }
                true
            });
            let text = if op == b"SUM" {
                if nums.is_empty() {
                    return reply::null_bulk(out, c.proto);
                }
                let decs: Option<Vec<Dec>> = nums.iter().map(|n| n.dec.filter(|_| n.f.is_finite())).collect();
                match decs.and_then(|d| dec_sum(&d)) {
                    Some(d) => fmt_dec(d),
                    None => fmt_f64(nums.iter().map(|n| n.f).sum()),
                }
            } else {
                match best {
                    None => return reply::null_bulk(out, c.proto),
                    Some(n) => num_string(&n),
                }
            };
            reply::bulk(out, text.as_bytes())
        }
    }
}

/// ARINSERT key value [value ...]
fn arinsert(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    if !array_for_write(c, out, key) {
        return;
    }
    let vals = &args[2..];
    let a = arr_mut(c, key);
    let cur = a.cursor();
    let first = if cur == CURSOR_UNSET {
        0
    } else if cur >= u64::MAX - 1 {
        return reply::error(out, b"ERR insert index overflow");
    } else {
        cur + 1
    };
    let last = match first.checked_add(vals.len() as u64 - 1) {
        Some(l) if l != u64::MAX => l,
        _ => return reply::error(out, b"ERR insert index overflow"),
    };
    for (i, v) in vals.iter().enumerate() {
        a.set(first + i as u64, v);
    }
    a.set_cursor(last);
    for (i, v) in vals.iter().enumerate() {
        emit_arset(c, key, first + i as u64, v);
    }
    emit_seek(c, key);
    reply_u64(out, last);
}

/// ARNEXT key
fn arnext(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match look(c, args[1], false) {
        Look::Missing => reply::integer(out, 0),
        Look::Wrong => reply::error(out, errors::WRONGTYPE),
        Look::Array => match arr(c, args[1]).cursor() {
            CURSOR_UNSET => reply::integer(out, 0),
            cur if cur == u64::MAX - 1 => reply::null_bulk(out, c.proto),
            cur => reply_u64(out, cur + 1),
        },
    }
}

/// ARSEEK key index
fn arseek(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let Some(i) = parse_index(args[2], true) else {
        return reply::error(out, INVALID_INDEX);
    };
    match look(c, key, true) {
        Look::Missing => return reply::integer(out, 0),
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Array => {}
    }
    let a = arr_mut(c, key);
    // Emitted even when the cursor does not change (Redis propagates every ARSEEK on an
    // existing key): a replica replaying this mutation emits it again, one for one.
    a.set_cursor(if i == 0 { CURSOR_UNSET } else { i - 1 });
    emit_seek(c, key);
    reply::integer(out, 1);
}

/// ARRING key size value [value ...]
fn arring(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let size = match parse_i64(args[2]) {
        None => return reply::error(out, b"ERR invalid size"),
        Some(n) if n <= 0 => return reply::error(out, b"ERR size must be positive"),
        Some(n) => n as u64,
    };
    if !array_for_write(c, out, key) {
        return;
    }
    let a = arr_mut(c, key);
    // The ring's current shape is inferred from ARLEN; shrinking it, or growing it after it
    // wrapped, rebuilds the array from the newest contiguous items (see the notes, §3).
    let span = a.len();
    let cur = a.cursor();
    let keep = if span == 0 || size == span {
        None
    } else if size < span {
        Some(size)
    } else if cur != CURSOR_UNSET && cur + 1 < span {
        Some(span)
    } else {
        None
    };
    let rebuilt = keep.is_some();
    // Indexes present before a rebuild: those missing afterwards become ARDEL mutations.
    let mut old_idx: Vec<u64> = Vec::new();
    if let Some(keep) = keep {
        a.for_each_in(0, u64::MAX, false, |i, _| {
            old_idx.push(i);
            true
        });
        let anchor = if cur == CURSOR_UNSET { span - 1 } else { cur % span };
        let mut kept: Vec<Vec<u8>> = Vec::new();
        let mut at = anchor;
        while (kept.len() as u64) < keep {
            let Some(v) = a.get(at) else { break };
            kept.push(v.to_vec());
            at = if at == 0 { span - 1 } else { at - 1 };
        }
        a.clear();
        for (i, v) in kept.iter().rev().enumerate() {
            a.set(i as u64, v);
        }
        a.set_cursor(if kept.is_empty() { CURSOR_UNSET } else { kept.len() as u64 - 1 });
    }
    let cursor_before = a.cursor();
    let mut writes: Vec<(u64, &[u8])> = Vec::with_capacity(args.len() - 3);
    let mut slot = 0;
    for v in &args[3..] {
        let cur = a.cursor();
        slot = if cur == CURSOR_UNSET { 0 } else { cur + 1 };
        if slot >= size {
            slot %= size;
        }
        a.set(slot, v);
        a.set_cursor(slot);
        writes.push((slot, v));
    }
    if rebuilt {
        // Reproduce the whole post-state element by element: the final contents first, then
        // the removal of every old index that is gone. In that order the key never empties
        // during replay, so it keeps its TTL (a DEL + re-create would drop it).
        let mut all: Vec<(u64, Vec<u8>)> = Vec::new();
        arr(c, key).for_each_in(0, u64::MAX, false, |i, v| {
            all.push((i, v.to_vec()));
            true
        });
        for (i, v) in &all {
            emit_arset(c, key, *i, v);
        }
        let mut b = itoa::Buffer::new();
        for i in old_idx {
            if all.binary_search_by(|(k, _)| k.cmp(&i)).is_err() {
                c.emit(&[b"ARDEL", key, b.format(i).as_bytes()]);
            }
        }
    } else {
        for (i, v) in writes {
            emit_arset(c, key, i, v);
        }
    }
    if rebuilt || arr(c, key).cursor() != cursor_before {
        emit_seek(c, key);
    }
    reply_u64(out, slot);
}

/// ARLASTITEMS key count [REV]
fn arlastitems(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(count) = parse_i64(args[2]) else {
        return reply::error(out, b"ERR invalid COUNT");
    };
    if count <= 0 {
        return reply::array_len(out, 0);
    }
    let mut rev = false;
    if args.len() == 4 {
        if !eq_ic(args[3], b"rev") {
            return reply::error(out, errors::SYNTAX);
        }
        rev = true;
    } else if args.len() != 3 {
        return errors::wrong_arity(out, args[0]);
    }
    match look(c, args[1], false) {
        Look::Missing => return reply::array_len(out, 0),
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Array => {}
    }
    let a = arr(c, args[1]);
    let len = a.len();
    let n = (count as u64).min(len);
    if n > a.count() as u64 && n > MAX_REPLY_ITEMS {
        return reply::error(out, b"ERR count exceeds maximum of 1000000 items");
    }
    let cur = a.cursor();
    let mut at = if cur == CURSOR_UNSET || cur >= len { len - 1 } else { cur };
    // Newest first; holes are positions too.
    let mut got: Vec<Option<Elem>> = Vec::with_capacity(n as usize);
    for _ in 0..n {
        got.push(a.get(at));
        at = if at == 0 { len - 1 } else { at - 1 };
    }
    if !rev {
        got.reverse();
    }
    reply::array_len(out, got.len());
    for e in got {
        reply_elem(out, c.proto, e);
    }
}

/// ARINFO key [FULL]
fn arinfo(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let full = match args.len() {
        2 => false,
        3 if eq_ic(args[2], b"full") => true,
        _ => return reply::error(out, errors::SYNTAX),
    };
    match look(c, args[1], false) {
        Look::Missing => return reply::error(out, errors::NO_SUCH_KEY),
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Array => {}
    }
    let a = arr(c, args[1]);
    let cur = a.cursor();
    // Goblin's layout in Redis's field names: a "slice" is one packed chunk; there is no
    // dense encoding and no super-directory.
    let chunks = a.chunk_count() as i64;
    // A map in RESP3, a flat field/value array in RESP2; the FULL averages are doubles
    // (bulk strings in RESP2).
    let proto = c.proto;
    reply::map_len(out, proto, if full { 12 } else { 7 });
    reply::bulk(out, b"count");
    reply_u64(out, a.count() as u64);
    reply::bulk(out, b"len");
    reply_u64(out, a.len());
    reply::bulk(out, b"next-insert-index");
    if cur == CURSOR_UNSET || cur == u64::MAX - 1 {
        reply::integer(out, 0);
    } else {
        reply_u64(out, cur + 1);
    }
    reply::bulk(out, b"slices");
    reply::integer(out, chunks);
    reply::bulk(out, b"directory-size");
    reply::integer(out, chunks);
    reply::bulk(out, b"super-dir-entries");
    reply::integer(out, 0);
    reply::bulk(out, b"slice-size");
    reply::integer(out, store::types::array::CHUNK_MAX as i64);
    if full {
        reply::bulk(out, b"dense-slices");
        reply::integer(out, 0);
        reply::bulk(out, b"sparse-slices");
        reply::integer(out, chunks);
        reply::bulk(out, b"avg-dense-size");
        reply::double(out, proto, b"0");
        reply::bulk(out, b"avg-dense-fill");
        reply::double(out, proto, b"0");
        reply::bulk(out, b"avg-sparse-size");
        let avg = if chunks > 0 { a.count() as f64 / chunks as f64 } else { 0.0 };
        reply::double(out, proto, crate::util::format_f64(avg).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::parse_index;
    use crate::engine::Engine;

    const NOW: i64 = 1_700_000_000_000;

    fn run(e: &mut Engine, args: &[&str]) -> (String, Vec<String>) {
        (crate::testing::reply(e, NOW, args), crate::testing::take_muts(e))
    }

    fn r(e: &mut Engine, args: &[&str]) -> String {
        run(e, args).0
    }

    /// Bulk strings (nil as "-") of a flat array reply, for compact assertions.
    fn bulks(reply: &str) -> Vec<String> {
        let mut v = Vec::new();
        let mut lines = reply.split("\r\n");
        assert!(lines.next().unwrap().starts_with('*'), "{reply}");
        while let Some(l) = lines.next() {
            if l == "$-1" {
                v.push("-".to_string());
            } else if l.starts_with('$') {
                v.push(lines.next().unwrap().to_string());
            } else if let Some(i) = l.strip_prefix(':') {
                v.push(i.to_string());
            }
        }
        v
    }

    const WT: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    const BAD: &str = "-ERR invalid array index\r\n";

    #[test]
    fn index_parsing_follows_string2ull() {
        assert_eq!(parse_index(b"0", false), Some(0));
        assert_eq!(parse_index(b"18446744073709551614", false), Some(u64::MAX - 1));
        assert_eq!(parse_index(b"18446744073709551615", false), None);
        assert_eq!(parse_index(b"18446744073709551615", true), Some(u64::MAX));
        assert_eq!(parse_index(b"18446744073709551616", true), None);
        assert_eq!(parse_index(b"-1", false), None);
        assert_eq!(parse_index(b"-0", false), Some(0));
        assert_eq!(parse_index(b"+5", false), Some(5));
        assert_eq!(parse_index(b" 5", false), Some(5));
        assert_eq!(parse_index(b"007", false), Some(7));
        assert_eq!(parse_index(b"-18446744073709551615", false), Some(1));
        for bad in [&b""[..], b" ", b"5 ", b"1.5", b"0x10", b"abc", b"--1", b"+"] {
            assert_eq!(parse_index(bad, true), None, "{bad:?}");
        }
    }

    #[test]
    fn set_get_count_len() {
        let mut e = Engine::default();
        assert_eq!(
            run(&mut e, &["ARSET", "a", "0", "hello"]),
            (":1\r\n".into(), vec!["ARSET a 0 hello".into()])
        );
        assert_eq!(
            run(&mut e, &["ARSET", "a", "0", "world"]),
            (":0\r\n".into(), vec!["ARSET a 0 world".into()])
        );
        assert_eq!(r(&mut e, &["ARGET", "a", "0"]), "$5\r\nworld\r\n");
        assert_eq!(r(&mut e, &["ARGET", "a", "1"]), "$-1\r\n");
        assert_eq!(r(&mut e, &["ARGET", "nokey", "x"]), BAD);
        assert_eq!(r(&mut e, &["ARGET", "nokey", "0"]), "$-1\r\n");
        assert_eq!(r(&mut e, &["TYPE", "a"]), "+array\r\n");
        assert_eq!(r(&mut e, &["OBJECT", "ENCODING", "a"]), "$12\r\nsliced-array\r\n");
        assert_eq!(run(&mut e, &["ARSET", "a", "5", "b", "", "1.0"]).0, ":3\r\n");
        assert_eq!(bulks(&r(&mut e, &["ARMGET", "a", "0", "6", "7", "3"])), ["world", "", "1.0", "-"]);
        assert_eq!(r(&mut e, &["ARLEN", "a"]), ":8\r\n");
        assert_eq!(r(&mut e, &["ARCOUNT", "a"]), ":4\r\n");
        assert_eq!(r(&mut e, &["ARLEN", "nokey"]), ":0\r\n");
        assert_eq!(r(&mut e, &["ARCOUNT", "nokey"]), ":0\r\n");
        // The top of the index space: lengths past i64::MAX reply as bulk strings.
        assert_eq!(r(&mut e, &["ARSET", "a", "18446744073709551614", "top"]), ":1\r\n");
        assert_eq!(r(&mut e, &["ARLEN", "a"]), "$20\r\n18446744073709551615\r\n");
        assert_eq!(r(&mut e, &["ARGET", "a", "18446744073709551614"]), "$3\r\ntop\r\n");
        assert_eq!(r(&mut e, &["ARSET", "a", "18446744073709551615", "x"]), BAD);
        assert_eq!(
            run(&mut e, &["ARSET", "a", "18446744073709551614", "x", "y"]),
            ("-ERR array index overflow\r\n".into(), vec![])
        );
        assert_eq!(r(&mut e, &["ARSET", "a", "-1", "x"]), BAD);
        assert_eq!(
            run(&mut e, &["ARMSET", "a", "1", "x", "2"]),
            ("-ERR wrong number of arguments for 'armset' command\r\n".into(), vec![])
        );
        assert_eq!(run(&mut e, &["ARMSET", "a", "1", "x", "y", "z"]), (BAD.into(), vec![]));
        assert_eq!(
            run(&mut e, &["ARMSET", "a", "1", "x", "1", "y", "0", "z"]),
            (":1\r\n".into(), vec!["ARSET a 1 x".into(), "ARSET a 1 y".into(), "ARSET a 0 z".into()])
        );
        assert_eq!(r(&mut e, &["ARGET", "a", "1"]), "$1\r\ny\r\n");
        r(&mut e, &["SET", "s", "v"]);
        assert_eq!(r(&mut e, &["ARGET", "s", "x"]), WT, "type is checked before the index");
        assert_eq!(r(&mut e, &["ARMGET", "s", "x"]), WT);
        assert_eq!(r(&mut e, &["ARSET", "s", "x", "v"]), BAD, "the index is checked before the type");
        for cmd in [
            &["ARSET", "s", "0", "v"][..],
            &["ARMSET", "s", "0", "v"],
            &["ARLEN", "s"],
            &["ARCOUNT", "s"],
            &["ARDEL", "s", "0"],
            &["ARDELRANGE", "s", "0", "1"],
            &["ARGETRANGE", "s", "0", "1"],
            &["ARSCAN", "s", "0", "1"],
            &["ARGREP", "s", "-", "+", "MATCH", "x"],
            &["AROP", "s", "0", "1", "SUM"],
            &["ARINSERT", "s", "v"],
            &["ARNEXT", "s"],
            &["ARSEEK", "s", "1"],
            &["ARRING", "s", "3", "v"],
            &["ARLASTITEMS", "s", "1"],
            &["ARINFO", "s"],
        ] {
            assert_eq!(run(&mut e, cmd), (WT.into(), vec![]), "{cmd:?}");
        }
    }

    #[test]
    fn deletes() {
        let mut e = Engine::default();
        r(&mut e, &["ARSET", "a", "0", "a", "b", "c", "d"]);
        assert_eq!(run(&mut e, &["ARDEL", "a", "1", "1", "9"]), (":1\r\n".into(), vec!["ARDEL a 1".into()]));
        assert_eq!(run(&mut e, &["ARDEL", "a", "9"]), (":0\r\n".into(), vec![]));
        assert_eq!(r(&mut e, &["ARDEL", "nokey", "x"]), BAD);
        assert_eq!(r(&mut e, &["ARDEL", "nokey", "1"]), ":0\r\n");
        assert_eq!(
            r(&mut e, &["ARDELRANGE", "a", "1", "2", "3"]),
            "-ERR wrong number of arguments for 'ardelrange' command\r\n"
        );
        assert_eq!(r(&mut e, &["ARDELRANGE", "a", "1", "x"]), BAD);
        assert_eq!(
            run(&mut e, &["ARDELRANGE", "a", "3", "2"]),
            (":2\r\n".into(), vec!["ARDEL a 2".into(), "ARDEL a 3".into()])
        );
        assert_eq!(run(&mut e, &["ARDEL", "a", "0"]), (":1\r\n".into(), vec!["ARDEL a 0".into()]));
        assert_eq!(r(&mut e, &["EXISTS", "a"]), ":0\r\n");
        for i in 0..20 {
            r(&mut e, &["ARSET", "b", &i.to_string(), "v"]);
        }
        assert_eq!(r(&mut e, &["ARDELRANGE", "b", "5", "12", "8", "15"]), ":11\r\n");
        assert_eq!(r(&mut e, &["ARCOUNT", "b"]), ":9\r\n");
        assert_eq!(r(&mut e, &["ARDELRANGE", "b", "0", "18446744073709551614"]), ":9\r\n");
        assert_eq!(r(&mut e, &["EXISTS", "b"]), ":0\r\n");
    }

    #[test]
    fn ranges_and_scans() {
        let mut e = Engine::default();
        r(&mut e, &["ARMSET", "a", "0", "a", "1", "b", "2", "c", "3", "d", "4", "e"]);
        assert_eq!(bulks(&r(&mut e, &["ARGETRANGE", "a", "1", "3"])), ["b", "c", "d"]);
        assert_eq!(bulks(&r(&mut e, &["ARGETRANGE", "a", "3", "1"])), ["d", "c", "b"]);
        assert_eq!(bulks(&r(&mut e, &["ARGETRANGE", "a", "6", "3"])), ["-", "-", "e", "d"]);
        assert_eq!(bulks(&r(&mut e, &["ARGETRANGE", "nokey", "0", "1"])), ["-", "-"]);
        assert_eq!(
            r(&mut e, &["ARGETRANGE", "a", "0", "1000000"]),
            "-ERR range exceeds maximum of 1000000 items\r\n"
        );
        assert_eq!(
            r(&mut e, &["ARGETRANGE", "nokey", "1000000", "0"]),
            "-ERR range exceeds maximum of 1000000 items\r\n"
        );
        assert_eq!(bulks(&r(&mut e, &["ARGETRANGE", "a", "0", "999999"])).len(), 1_000_000);
        r(&mut e, &["DEL", "a"]);
        r(&mut e, &["ARSET", "a", "0", "a"]);
        r(&mut e, &["ARSET", "a", "5", "b"]);
        r(&mut e, &["ARSET", "a", "9", "c"]);
        assert_eq!(
            r(&mut e, &["ARSCAN", "a", "0", "10"]),
            "*3\r\n*2\r\n:0\r\n$1\r\na\r\n*2\r\n:5\r\n$1\r\nb\r\n*2\r\n:9\r\n$1\r\nc\r\n"
        );
        assert_eq!(
            r(&mut e, &["ARSCAN", "a", "18446744073709551614", "1", "LIMIT", "1"]),
            "*1\r\n*2\r\n:9\r\n$1\r\nc\r\n"
        );
        assert_eq!(r(&mut e, &["ARSCAN", "a", "6", "8"]), "*0\r\n");
        assert_eq!(r(&mut e, &["ARSCAN", "nokey", "0", "8"]), "*0\r\n");
        assert_eq!(
            r(&mut e, &["ARSCAN", "a", "0", "8", "LIMIT"]),
            "-ERR wrong number of arguments for 'arscan' command\r\n"
        );
        assert_eq!(
            r(&mut e, &["ARSCAN", "a", "0", "8", "LIMIT", "1", "x"]),
            "-ERR wrong number of arguments for 'arscan' command\r\n"
        );
        assert_eq!(r(&mut e, &["ARSCAN", "a", "0", "8", "COUNT", "1"]), "-ERR syntax error\r\n");
        assert_eq!(r(&mut e, &["ARSCAN", "a", "0", "8", "LIMIT", "0"]), "-ERR LIMIT must be positive\r\n");
        assert_eq!(
            r(&mut e, &["ARSCAN", "a", "0", "8", "LIMIT", "x"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        r(&mut e, &["ARSET", "big", "9223372036854775808", "h"]);
        assert_eq!(
            r(&mut e, &["ARSCAN", "big", "0", "18446744073709551614"]),
            "*1\r\n*2\r\n$19\r\n9223372036854775808\r\n$1\r\nh\r\n"
        );
    }

    #[test]
    fn grep() {
        let mut e = Engine::default();
        r(&mut e, &["ARMSET", "a", "0", "alpha", "1", "beta", "2", "alphabet", "5", "gamma"]);
        assert_eq!(r(&mut e, &["ARGREP", "a", "-", "+", "MATCH", "alpha"]), "*2\r\n:0\r\n:2\r\n");
        assert_eq!(
            r(&mut e, &["ARGREP", "a", "3", "0", "MATCH", "alpha", "WITHVALUES"]),
            "*2\r\n*2\r\n:2\r\n$8\r\nalphabet\r\n*2\r\n:0\r\n$5\r\nalpha\r\n"
        );
        r(&mut e, &["ARMSET", "b", "0", "RedisArray", "1", "redis-match", "2", "array-only", "3", "plain"]);
        assert_eq!(
            r(&mut e, &["ARGREP", "b", "-", "+", "MATCH", "redis", "GLOB", "*array*", "AND", "NOCASE"]),
            "*1\r\n:0\r\n"
        );
        assert_eq!(
            r(
                &mut e,
                &[
                    "ARGREP", "b", "-", "+", "OR", "MATCH", "redis", "LIMIT", "3", "GLOB", "*array*", "AND",
                    "LIMIT", "1", "NOCASE"
                ]
            ),
            "*1\r\n:0\r\n"
        );
        r(&mut e, &["ARMSET", "c", "0", "foo123", "1", "bar", "2", "zoo999", "3", "Foo777"]);
        assert_eq!(r(&mut e, &["ARGREP", "c", "-", "+", "RE", "^.*[0-9]{3}$"]), "*3\r\n:0\r\n:2\r\n:3\r\n");
        assert_eq!(
            r(&mut e, &["ARGREP", "c", "-", "+", "RE", "^foo[0-9]+$", "NOCASE"]),
            "*2\r\n:0\r\n:3\r\n"
        );
        assert_eq!(r(&mut e, &["ARGREP", "c", "-", "+", "EXACT", "BAR", "NOCASE"]), "*1\r\n:1\r\n");
        assert_eq!(
            r(&mut e, &["ARGREP", "c", "-", "+", "RE", "(a)\\1"]),
            "-ERR regular expression backreferences are not supported\r\n"
        );
        assert_eq!(r(&mut e, &["ARGREP", "c", "-", "+", "RE", ""]), "-ERR regular expression is empty\r\n");
        assert!(
            r(&mut e, &["ARGREP", "c", "-", "+", "RE", "("]).starts_with("-ERR invalid regular expression: ")
        );
        let long = "a".repeat(2049);
        assert_eq!(
            r(&mut e, &["ARGREP", "c", "-", "+", "RE", &long]),
            "-ERR regular expression is too long, maximum is 2048 bytes\r\n"
        );
        assert_eq!(r(&mut e, &["ARGREP", "c", "-", "+", "LIMIT", "1"]), "-ERR syntax error\r\n");
        assert_eq!(
            r(&mut e, &["ARGREP", "c", "-", "+", "MATCH", "x", "LIMIT", "0"]),
            "-ERR LIMIT must be positive\r\n"
        );
        assert_eq!(r(&mut e, &["ARGREP", "c", "-", "+", "MATCH", "x", "FOO"]), "-ERR syntax error\r\n");
        assert_eq!(r(&mut e, &["ARGREP", "c", "x", "+", "MATCH", "x"]), BAD);
        assert_eq!(r(&mut e, &["ARGREP", "nokey", "-", "+", "MATCH", "foo"]), "*0\r\n");
        let mut many: Vec<&str> = vec!["ARGREP", "c", "-", "+"];
        for _ in 0..251 {
            many.extend(["MATCH", "foo"]);
        }
        assert_eq!(r(&mut e, &many), "-ERR too many predicates, maximum is 250\r\n");
        many.truncate(4 + 500);
        assert_eq!(r(&mut e, &many), "*1\r\n:0\r\n");
    }

    #[test]
    fn arop() {
        let mut e = Engine::default();
        r(&mut e, &["ARMSET", "a", "0", "10", "1", "20.5", "2", "30", "3", "x"]);
        assert_eq!(r(&mut e, &["AROP", "a", "0", "3", "SUM"]), "$4\r\n60.5\r\n");
        assert_eq!(r(&mut e, &["AROP", "a", "3", "0", "min"]), "$2\r\n10\r\n");
        assert_eq!(r(&mut e, &["AROP", "a", "0", "3", "MAX"]), "$2\r\n30\r\n");
        assert_eq!(r(&mut e, &["AROP", "a", "0", "3", "USED"]), ":4\r\n");
        assert_eq!(r(&mut e, &["AROP", "a", "0", "3", "MATCH", "30"]), ":1\r\n");
        assert_eq!(r(&mut e, &["AROP", "a", "3", "3", "SUM"]), "$-1\r\n");
        assert_eq!(r(&mut e, &["AROP", "a", "3", "3", "AND"]), "$-1\r\n");
        assert_eq!(r(&mut e, &["AROP", "a", "0", "3", "FOO"]), "-ERR unknown operation\r\n");
        assert_eq!(r(&mut e, &["AROP", "a", "0", "3", "MATCH"]), "-ERR MATCH requires a value argument\r\n");
        assert_eq!(
            r(&mut e, &["AROP", "a", "0", "3", "SUM", "x"]),
            "-ERR wrong number of arguments for 'arop' command\r\n"
        );
        assert_eq!(r(&mut e, &["AROP", "nokey", "0", "3", "SUM"]), "$-1\r\n");
        assert_eq!(r(&mut e, &["AROP", "nokey", "0", "3", "USED"]), ":0\r\n");
        r(&mut e, &["ARMSET", "f", "0", "7.9", "1", "3.2", "2", "1.8"]);
        assert_eq!(r(&mut e, &["AROP", "f", "0", "2", "AND"]), ":1\r\n");
        assert_eq!(r(&mut e, &["AROP", "f", "0", "2", "OR"]), ":7\r\n");
        assert_eq!(r(&mut e, &["AROP", "f", "0", "2", "XOR"]), ":5\r\n");
        // Decimal sums print as Redis's long double arithmetic would (%.17Lg), not as f64
        // would (0.30000000000000004).
        r(&mut e, &["ARMSET", "d", "0", "0.1", "1", "0.2", "2", "1e20", "3", "-1e20"]);
        assert_eq!(r(&mut e, &["AROP", "d", "0", "1", "SUM"]), "$3\r\n0.3\r\n");
        assert_eq!(r(&mut e, &["AROP", "d", "0", "3", "SUM"]), "$1\r\n0\r\n", "0.3 is absorbed by 1e20");
        r(&mut e, &["ARMSET", "h", "0", "1e20", "1", "-1e20", "2", "0.25", "3", "12345678901234567890123"]);
        assert_eq!(r(&mut e, &["AROP", "h", "0", "2", "SUM"]), "$4\r\n0.25\r\n");
        assert_eq!(r(&mut e, &["AROP", "h", "3", "3", "MAX"]), "$22\r\n1.2345678901234568e+22\r\n");
        assert_eq!(r(&mut e, &["AROP", "h", "0", "3", "SUM"]), "$22\r\n1.2345678901234568e+22\r\n");
        assert_eq!(r(&mut e, &["AROP", "d", "2", "2", "MAX"]), "$5\r\n1e+20\r\n");
        r(&mut e, &["ARMSET", "g", "0", "10.0", "1", "001.25", "2", "1.0e-10"]);
        assert_eq!(r(&mut e, &["AROP", "g", "0", "2", "MIN"]), "$5\r\n1e-10\r\n");
        assert_eq!(r(&mut e, &["AROP", "g", "1", "1", "MAX"]), "$4\r\n1.25\r\n");
        assert_eq!(r(&mut e, &["AROP", "g", "0", "0", "SUM"]), "$2\r\n10\r\n");
    }

    #[test]
    fn insert_cursor_and_seek() {
        let mut e = Engine::default();
        assert_eq!(r(&mut e, &["ARNEXT", "a"]), ":0\r\n");
        assert_eq!(
            run(&mut e, &["ARINSERT", "a", "x"]),
            (":0\r\n".into(), vec!["ARSET a 0 x".into(), "ARSEEK a 1".into()])
        );
        assert_eq!(
            run(&mut e, &["ARINSERT", "a", "y", "z"]),
            (":2\r\n".into(), vec!["ARSET a 1 y".into(), "ARSET a 2 z".into(), "ARSEEK a 3".into()])
        );
        assert_eq!(r(&mut e, &["ARNEXT", "a"]), ":3\r\n");
        assert_eq!(run(&mut e, &["ARSEEK", "a", "10"]), (":1\r\n".into(), vec!["ARSEEK a 10".into()]));
        assert_eq!(run(&mut e, &["ARSEEK", "a", "10"]), (":1\r\n".into(), vec!["ARSEEK a 10".into()]));
        assert_eq!(r(&mut e, &["ARINSERT", "a", "c"]), ":10\r\n");
        assert_eq!(r(&mut e, &["ARNEXT", "a"]), ":11\r\n");
        assert_eq!(run(&mut e, &["ARSEEK", "nokey", "5"]), (":0\r\n".into(), vec![]));
        assert_eq!(r(&mut e, &["EXISTS", "nokey"]), ":0\r\n");
        assert_eq!(r(&mut e, &["ARSEEK", "a", "x"]), BAD);
        // ARSET does not move the cursor.
        r(&mut e, &["ARSET", "a", "100", "far"]);
        assert_eq!(r(&mut e, &["ARNEXT", "a"]), ":11\r\n");
        assert_eq!(r(&mut e, &["ARSEEK", "a", "0"]), ":1\r\n");
        assert_eq!(r(&mut e, &["ARNEXT", "a"]), ":0\r\n");
        assert_eq!(r(&mut e, &["ARSEEK", "a", "9223372036854775808"]), ":1\r\n");
        assert_eq!(r(&mut e, &["ARNEXT", "a"]), "$19\r\n9223372036854775808\r\n");
        assert_eq!(
            run(&mut e, &["ARSEEK", "a", "18446744073709551615"]),
            (":1\r\n".into(), vec!["ARSEEK a 18446744073709551615".into()])
        );
        assert_eq!(r(&mut e, &["ARNEXT", "a"]), "$-1\r\n");
        assert_eq!(run(&mut e, &["ARINSERT", "a", "b"]), ("-ERR insert index overflow\r\n".into(), vec![]));
        r(&mut e, &["ARSEEK", "a", "18446744073709551614"]);
        assert_eq!(
            run(&mut e, &["ARINSERT", "a", "b", "c"]),
            ("-ERR insert index overflow\r\n".into(), vec![])
        );
        assert_eq!(r(&mut e, &["ARINSERT", "a", "top"]), "$20\r\n18446744073709551614\r\n");
        assert_eq!(r(&mut e, &["ARNEXT", "a"]), "$-1\r\n");
        assert_eq!(r(&mut e, &["ARGET", "a", "18446744073709551614"]), "$3\r\ntop\r\n");
    }

    #[test]
    fn ring_buffer() {
        let mut e = Engine::default();
        for i in 0..4 {
            assert_eq!(r(&mut e, &["ARRING", "r", "3", &format!("v{i}")]), format!(":{}\r\n", i % 3));
        }
        assert_eq!(r(&mut e, &["ARGET", "r", "0"]), "$2\r\nv3\r\n");
        assert_eq!(bulks(&r(&mut e, &["ARLASTITEMS", "r", "3"])), ["v1", "v2", "v3"]);
        assert_eq!(r(&mut e, &["ARRING", "r", "0", "x"]), "-ERR size must be positive\r\n");
        assert_eq!(r(&mut e, &["ARRING", "r", "x", "x"]), "-ERR invalid size\r\n");
        // Grow after wrap: compact the ring first.
        r(&mut e, &["DEL", "r"]);
        for i in 0..8 {
            r(&mut e, &["ARRING", "r", "5", &format!("v{i}")]);
        }
        let (reply, muts) = run(&mut e, &["ARRING", "r", "8", "grown"]);
        assert_eq!(reply, ":5\r\n");
        assert_eq!(muts[0], "ARSET r 0 v3");
        assert_eq!(muts[5], "ARSET r 5 grown", "{muts:?}");
        assert_eq!(muts.len(), 7, "six ARSETs and the ARSEEK: no index disappeared");
        assert_eq!(muts.last().unwrap(), "ARSEEK r 6");
        assert_eq!(
            bulks(&r(&mut e, &["ARGETRANGE", "r", "0", "6"])),
            ["v3", "v4", "v5", "v6", "v7", "grown", "-"]
        );
        assert_eq!(r(&mut e, &["ARNEXT", "r"]), ":6\r\n");
        // Shrink: keep the newest, then write.
        r(&mut e, &["DEL", "r"]);
        for i in 0..15 {
            r(&mut e, &["ARRING", "r", "10", &format!("v{i}")]);
        }
        r(&mut e, &["ARRING", "r", "5", "truncated"]);
        assert_eq!(
            bulks(&r(&mut e, &["ARGETRANGE", "r", "0", "5"])),
            ["truncated", "v11", "v12", "v13", "v14", "-"]
        );
        // Shrink stops at the first hole.
        r(&mut e, &["DEL", "r"]);
        for i in 0..5 {
            r(&mut e, &["ARRING", "r", "5", &format!("v{i}")]);
        }
        r(&mut e, &["ARDEL", "r", "3"]);
        r(&mut e, &["ARRING", "r", "3", "new"]);
        assert_eq!(bulks(&r(&mut e, &["ARGETRANGE", "r", "0", "2"])), ["v4", "new", "-"]);
        // ARSEEK 0 suppresses the grow rebuild.
        r(&mut e, &["DEL", "r"]);
        for i in 0..5 {
            r(&mut e, &["ARRING", "r", "3", &format!("ring{i}")]);
        }
        r(&mut e, &["ARSEEK", "r", "0"]);
        r(&mut e, &["ARRING", "r", "8", "grown"]);
        assert_eq!(bulks(&r(&mut e, &["ARGETRANGE", "r", "0", "2"])), ["grown", "ring4", "ring2"]);
        assert_eq!(r(&mut e, &["ARNEXT", "r"]), ":1\r\n");
        // Elements outside the ring disappear when it is re-established.
        r(&mut e, &["DEL", "r"]);
        for i in 0..5 {
            r(&mut e, &["ARRING", "r", "3", &format!("ring{i}")]);
        }
        r(&mut e, &["ARSET", "r", "100", "outside"]);
        r(&mut e, &["ARRING", "r", "3", "ring5"]);
        assert_eq!(r(&mut e, &["ARCOUNT", "r"]), ":3\r\n");
        assert_eq!(r(&mut e, &["ARGET", "r", "0"]), "$5\r\nring5\r\n");
    }

    #[test]
    fn lastitems_and_info() {
        let mut e = Engine::default();
        r(&mut e, &["ARINSERT", "a", "a", "b", "c", "d", "e"]);
        r(&mut e, &["ARDEL", "a", "1"]);
        assert_eq!(bulks(&r(&mut e, &["ARLASTITEMS", "a", "10"])), ["a", "-", "c", "d", "e"]);
        assert_eq!(bulks(&r(&mut e, &["ARLASTITEMS", "a", "10", "rev"])), ["e", "d", "c", "-", "a"]);
        r(&mut e, &["ARDEL", "a", "4"]);
        assert_eq!(bulks(&r(&mut e, &["ARLASTITEMS", "a", "2"])), ["c", "d"]);
        assert_eq!(r(&mut e, &["ARLASTITEMS", "a", "0", "junk", "more"]), "*0\r\n");
        assert_eq!(r(&mut e, &["ARLASTITEMS", "a", "x"]), "-ERR invalid COUNT\r\n");
        assert_eq!(r(&mut e, &["ARLASTITEMS", "a", "1", "FOO"]), "-ERR syntax error\r\n");
        assert_eq!(
            r(&mut e, &["ARLASTITEMS", "a", "1", "REV", "x"]),
            "-ERR wrong number of arguments for 'arlastitems' command\r\n"
        );
        assert_eq!(r(&mut e, &["ARLASTITEMS", "nokey", "1"]), "*0\r\n");
        r(&mut e, &["ARSET", "h", "0", "a"]);
        r(&mut e, &["ARSET", "h", "2000000", "b"]);
        assert_eq!(
            r(&mut e, &["ARLASTITEMS", "h", "1000001"]),
            "-ERR count exceeds maximum of 1000000 items\r\n"
        );
        assert_eq!(bulks(&r(&mut e, &["ARLASTITEMS", "h", "2"])), ["-", "b"]);
        assert_eq!(r(&mut e, &["ARINFO", "nokey"]), "-ERR no such key\r\n");
        assert_eq!(r(&mut e, &["ARINFO", "h", "x"]), "-ERR syntax error\r\n");
        let info = bulks(&r(&mut e, &["ARINFO", "h"]));
        assert_eq!(&info[..6], ["count", "2", "len", "2000001", "next-insert-index", "0"]);
        assert_eq!(info.len(), 14);
        assert_eq!(bulks(&r(&mut e, &["ARINFO", "h", "FULL"])).len(), 24);
    }
}
