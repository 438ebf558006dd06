//! SORT and SORT_RO on lists, sets and sorted sets, with Redis 7.0's options: BY (a constant
//! pattern such as `nosort` skips sorting; `*` patterns read string keys or `key->field` hash
//! fields), LIMIT, GET (`#` and patterns), ASC/DESC, ALPHA, and STORE (SORT only).
//!
//! Semantics, checked against redis-server 7.0.15:
//! - options parse first (a bad LIMIT number answers "value is not an integer", an unknown or
//!   incomplete option a syntax error), then the key is looked up (other types: WRONGTYPE); a
//!   missing key sorts as an empty list;
//! - numeric weights are read as C's `strtod` reads them (leading blanks allowed, the whole
//!   string up to a NUL consumed, NaN and out-of-range refused: "One or more scores can't be
//!   converted into double"); a missing BY key weighs 0; equal weights order by the elements'
//!   bytes, so the result is deterministic;
//! - ALPHA compares bytes (Redis uses `strcoll`, which is byte order in the C locale it runs
//!   with; like `strcoll`, a client-facing ALPHA sort stops comparing at a NUL byte); with BY,
//!   elements whose BY key is missing sort first;
//! - BY without `*` keeps the native order (list order, ascending score, or the set's order;
//!   a set is sorted by ALPHA instead when the result is stored or a script asks, as Redis
//!   does, so STORE and scripts are deterministic).
//!
//! Ties that Redis leaves to its sort algorithm (ALPHA with BY where weights are equal or
//! missing) follow a stable sort here, which is what glibc's `qsort` does without LIMIT; with
//! BY and a LIMIT Redis's partial quicksort may order such ties differently.
//!
//! Canonical mutations (STORE): `DEL dst` when it existed, then `RPUSH dst e...` (chunks of at
//! most 512 elements) rebuilding the stored list exactly; `DEL dst` alone when the result is
//! empty. A STORE that leaves `dst` as it was (the same list, no deadline) emits nothing. The
//! reads the patterns make may expire keys, which emits their `DEL`s as every read does.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{eq_ic, parse_i64};
use resp::reply;
use std::cmp::Ordering;
use store::types::List;
use store::{Plain, Value, ValueRef};

const G: &str = "generic";

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec("sort", -2, Flags::WRITE | Flags::DENYOOM | Flags::MOVABLEKEYS, (1, 1, 1), G, "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.", Handler::Data(sort)),
    spec("sort_ro", -2, Flags::READONLY | Flags::MOVABLEKEYS, (1, 1, 1), G, "Returns the sorted elements of a list, a set, or a sorted set.", Handler::Data(sort_ro)),
];

const SCORE_ERR: &[u8] = b"ERR One or more scores can't be converted into double";
/// At most this many elements, and (unless one element alone is larger) this many element
/// bytes, per `RPUSH` mutation when STORE writes its list. Each mutation becomes one record
/// of a Kafka journal: 512 long elements (GET patterns can fetch whole strings) would pass a
/// record's limit, which no single element does (it was written by a request that fit).
const PUSH_CHUNK: usize = 512;
const PUSH_CHUNK_BYTES: usize = 64 << 10;

/// The argument as C string functions see it: up to the first NUL.
fn cstr(a: &[u8]) -> &[u8] {
    a.iter().position(|&b| b == 0).map_or(a, |n| &a[..n])
}

fn is_word(a: &[u8], w: &[u8]) -> bool {
    eq_ic(cstr(a), w)
}

/// A number as SORT reads it in Redis 8 (up to the first NUL): the empty text is 0; otherwise
/// [`decimal_f64`]. (Redis 7.0's strtod also took leading white space and hexadecimal, and
/// refused overflow and underflow.)
pub(crate) fn sort_strtod(a: &[u8]) -> Option<f64> {
    let s = cstr(a);
    if s.is_empty() {
        return Some(0.0);
    }
    decimal_f64(s)
}

/// Redis 8's strict double syntax (SORT's weights, ZCOUNT's and ZRANGE's score bounds): an
/// optional sign, then `inf` or `infinity` in any case, or decimal digits with an optional
/// point and fraction (one digit at least) and an optional exponent with digits; the whole
/// text, no white space, no hexadecimal, no NaN. A magnitude too large is +-inf and one too
/// small 0 (or a subnormal), as Redis 8 takes them.
pub(crate) fn decimal_f64(t: &[u8]) -> Option<f64> {
    let (neg, body) = match t.first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let v = if eq_ic(body, b"inf") || eq_ic(body, b"infinity") {
        f64::INFINITY
    } else {
        let mut i = 0;
        let digits = |i: &mut usize| {
            let from = *i;
            while *i < body.len() && body[*i].is_ascii_digit() {
                *i += 1;
            }
            *i - from
        };
        let mut n = digits(&mut i);
        if i < body.len() && body[i] == b'.' {
            i += 1;
            n += digits(&mut i);
        }
        if n == 0 {
            return None;
        }
        if i < body.len() && (body[i] | 0x20) == b'e' {
            i += 1;
            if i < body.len() && matches!(body[i], b'+' | b'-') {
                i += 1;
            }
            if digits(&mut i) == 0 {
                return None;
            }
        }
        if i != body.len() {
            return None;
        }
        std::str::from_utf8(body).ok()?.parse::<f64>().ok()?
    };
    Some(if neg { -v } else { v })
}

/// Redis's `lookupKeyByPattern`: `#` is the element itself; otherwise the first `*` is
/// replaced by the element, and a `->field` after it reads that hash field instead of a
/// string. No `*`, a missing key or the wrong type give None.
fn by_pattern(c: &mut Ctx, pattern: &[u8], elem: &[u8]) -> Option<Vec<u8>> {
    let cp = cstr(pattern);
    if cp == b"#" {
        return Some(elem.to_vec());
    }
    let star = cp.iter().position(|&b| b == b'*')?;
    // A `->` after the star with something after it names a hash field (to the pattern's end).
    let arrow = cp[star + 1..].windows(2).position(|w| w == b"->").map(|p| star + 1 + p);
    let field = arrow.filter(|&f| f + 2 < cp.len()).map(|f| (f, &pattern[f + 2..]));
    let key_end = field.map_or(pattern.len(), |(f, _)| f);
    let mut key = Vec::with_capacity(key_end + elem.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(&pattern[star + 1..key_end]);
    if let Some((_, f)) = field {
        // As every hash read: fields past their deadline are gone first (hidden, on a replica).
        let mut wrongtype = Vec::new();
        return match super::hash::read(c, &mut wrongtype, &key) {
            Ok(Some(h)) => h.get(f).map(<[u8]>::to_vec),
            _ => None,
        };
    }
    match c.read(&key)? {
        ValueRef::Str(s) => Some(s.to_vec()),
        _ => None,
    }
}

/// A weight as SORT reads it: the BY value through strtod (an integer string's text reads as
/// the integer exactly, as Redis's cast does), 0 when the BY key is missing.
fn by_score(c: &mut Ctx, pattern: &[u8], elem: &[u8]) -> Result<f64, ()> {
    match by_pattern(c, pattern, elem) {
        None => Ok(0.0),
        Some(v) => sort_strtod(&v).ok_or(()),
    }
}

/// C string order (`strcoll` in the C locale): bytes up to the first NUL.
fn coll(a: &[u8], b: &[u8]) -> Ordering {
    cstr(a).cmp(cstr(b))
}

struct Item {
    elem: Vec<u8>,
    score: f64,
    cmpobj: Option<Vec<u8>>,
}

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA] [STORE dst]
fn sort(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    sort_generic(c, out, args, false)
}

/// SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]
fn sort_ro(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    sort_generic(c, out, args, true)
}

fn sort_generic(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]], readonly: bool) {
    let (mut desc, mut alpha, mut dontsort) = (false, false, false);
    let (mut limit_start, mut limit_count) = (0i64, -1i64);
    let mut sortby: Option<&[u8]> = None;
    let mut store: Option<&[u8]> = None;
    let mut gets: Vec<&[u8]> = Vec::new();
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = args[j];
        if is_word(a, b"asc") {
            desc = false;
        } else if is_word(a, b"desc") {
            desc = true;
        } else if is_word(a, b"alpha") {
            alpha = true;
        } else if is_word(a, b"limit") && left >= 2 {
            match (parse_i64(args[j + 1]), parse_i64(args[j + 2])) {
                (Some(s), Some(n)) => (limit_start, limit_count) = (s, n),
                _ => return reply::error(out, errors::NOT_INTEGER),
            }
            j += 2;
        } else if !readonly && is_word(a, b"store") && left >= 1 {
            store = Some(args[j + 1]);
            j += 1;
        } else if is_word(a, b"by") && left >= 1 {
            sortby = Some(args[j + 1]);
            // A constant pattern (no `*`) means: keep the native order. Once set it stays set,
            // whatever later BY options say (Redis's flag is only ever raised).
            if !cstr(args[j + 1]).contains(&b'*') {
                dontsort = true;
            }
            j += 1;
        } else if is_word(a, b"get") && left >= 1 {
            gets.push(args[j + 1]);
            j += 1;
        } else {
            return reply::error(out, errors::SYNTAX);
        }
        j += 1;
    }

    enum Src {
        List(Vec<Vec<u8>>),
        Set(Vec<Vec<u8>>),
        /// Members in ascending score order.
        ZSet(Vec<Vec<u8>>),
    }
    let src = match c.read(args[1]) {
        None => Src::List(Vec::new()),
        Some(ValueRef::List(l)) => Src::List(l.iter().map(|e| e.to_vec()).collect()),
        Some(ValueRef::Set(s)) => Src::Set(s.members()),
        Some(ValueRef::ZSet(z)) => Src::ZSet(z.iter().map(|(m, _)| m.to_vec()).collect()),
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    // A set has no order of its own: a stored result, or a script's, must not depend on it.
    if dontsort && matches!(src, Src::Set(_)) && (store.is_some() || c.script) {
        dontsort = false;
        alpha = true;
        sortby = None;
    }
    let (ordered, elems) = match src {
        Src::List(v) | Src::ZSet(v) => (true, v),
        Src::Set(v) => (false, v),
    };
    let len = elems.len() as i64;
    let mut start = limit_start.clamp(0, len);
    let count = limit_count.clamp(-1, len);
    let mut end = if count < 0 { len - 1 } else { start + count - 1 };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }

    let mut items: Vec<Item> = if ordered && dontsort {
        // Native order, reversed by DESC, the LIMIT applied to it directly.
        let mut v = elems;
        if desc {
            v.reverse();
        }
        let (s, e) = (start, end);
        start = 0;
        end = e - s;
        if e < s {
            Vec::new()
        } else {
            v.drain(s as usize..=e as usize).map(|elem| Item { elem, score: 0.0, cmpobj: None }).collect()
        }
    } else {
        elems.into_iter().map(|elem| Item { elem, score: 0.0, cmpobj: None }).collect()
    };

    let mut conversion_error = false;
    if !dontsort {
        for it in items.iter_mut() {
            if alpha {
                if let Some(p) = sortby {
                    it.cmpobj = by_pattern(c, p, &it.elem);
                }
            } else {
                let s = match sortby {
                    Some(p) => by_score(c, p, &it.elem),
                    None => sort_strtod(&it.elem).ok_or(()),
                };
                match s {
                    Ok(s) => it.score = s,
                    Err(()) => conversion_error = true,
                }
            }
        }
        let storing = store.is_some();
        let bypattern = sortby.is_some();
        let cmp = |a: &Item, b: &Item| -> Ordering {
            let o = if !alpha {
                a.score.partial_cmp(&b.score).unwrap_or(Ordering::Equal).then_with(|| a.elem.cmp(&b.elem))
            } else if bypattern {
                match (&a.cmpobj, &b.cmpobj) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(x), Some(y)) if storing => x.cmp(y),
                    (Some(x), Some(y)) => coll(x, y),
                }
            } else if storing {
                a.elem.cmp(&b.elem)
            } else {
                coll(&a.elem, &b.elem)
            };
            if desc {
                o.reverse()
            } else {
                o
            }
        };
        items.sort_by(cmp);
    }

    let range = if end >= start { &items[start as usize..=end as usize] } else { &items[..0] };
    let outputlen = if gets.is_empty() { range.len() } else { gets.len() * range.len() };
    if conversion_error {
        return reply::error(out, SCORE_ERR);
    }
    match store {
        None => {
            reply::array_len(out, outputlen);
            for it in range {
                if gets.is_empty() {
                    reply::bulk(out, &it.elem);
                }
                for g in &gets {
                    match by_pattern(c, g, &it.elem) {
                        Some(v) => reply::bulk(out, &v),
                        None => reply::null_bulk(out, c.proto),
                    }
                }
            }
        }
        Some(dst) => {
            let mut result: Vec<Vec<u8>> = Vec::with_capacity(outputlen);
            for it in range {
                if gets.is_empty() {
                    result.push(it.elem.clone());
                }
                for g in &gets {
                    result.push(by_pattern(c, g, &it.elem).unwrap_or_default());
                }
            }
            store_list(c, dst, result);
            reply::integer(out, outputlen as i64);
        }
    }
}

/// Replaces `dst` with a list of `elems` (no deadline), or deletes it when `elems` is empty,
/// emitting `DEL dst` (if it existed) and the `RPUSH`es that rebuild it. Nothing happens, and
/// nothing is emitted, when `dst` already holds exactly that list without a deadline.
fn store_list(c: &mut Ctx, dst: &[u8], elems: Vec<Vec<u8>>) {
    let existed = c.exists(dst);
    if existed && !elems.is_empty() && c.ks.expire_at(dst).is_none() {
        if let Some(ValueRef::List(l)) = c.ks.get(dst) {
            if l.len() == elems.len() && l.to_plain() == Plain::List(elems.clone()) {
                return;
            }
        }
    }
    if existed {
        c.ks.delete(dst);
        c.emit(&[b"DEL", dst]);
    }
    if elems.is_empty() {
        return;
    }
    let mut l = List::new();
    for e in &elems {
        l.push_back(e);
    }
    c.ks.insert(dst, Value::List(Box::new(l)), None);
    let mut rest = &elems[..];
    while !rest.is_empty() {
        let mut n = 0;
        let mut bytes = 0;
        while n < rest.len() && n < PUSH_CHUNK && (n == 0 || bytes + rest[n].len() <= PUSH_CHUNK_BYTES) {
            bytes += rest[n].len();
            n += 1;
        }
        let (chunk, tail) = rest.split_at(n);
        let mut m: Vec<&[u8]> = Vec::with_capacity(chunk.len() + 2);
        m.push(b"RPUSH");
        m.push(dst);
        m.extend(chunk.iter().map(Vec::as_slice));
        c.emit(&m);
        rest = tail;
    }
    c.signal_ready(dst);
}

#[cfg(test)]
mod tests {
    use super::sort_strtod;

    #[test]
    fn strtod_rules() {
        assert_eq!(sort_strtod(b""), Some(0.0));
        // Redis 8: no white space or hexadecimal; overflow and underflow are taken.
        assert_eq!(sort_strtod(b"  5"), None);
        assert_eq!(sort_strtod(b"5 "), None);
        assert_eq!(sort_strtod(b"1.5e3"), Some(1500.0));
        assert_eq!(sort_strtod(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(sort_strtod(b"nan"), None);
        assert_eq!(sort_strtod(b"1e400"), Some(f64::INFINITY));
        assert_eq!(sort_strtod(b"1e-400"), Some(0.0));
        assert_eq!(sort_strtod(b"0e-400"), Some(0.0));
        assert_eq!(sort_strtod(b"7\0junk"), Some(7.0));
        assert_eq!(sort_strtod(b"."), None);
        assert_eq!(sort_strtod(b"1e"), None);
        assert_eq!(sort_strtod(b"0x10"), None);
        assert_eq!(sort_strtod(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(sort_strtod(b"+.5"), Some(0.5));
        assert_eq!(sort_strtod(b"abc"), None);
    }

    /// BY and GET `key->field` read a hash as every hash command does: a field past its
    /// deadline is gone (and removed, an `HDEL`).
    #[test]
    fn hash_fields_past_their_deadline_are_gone() {
        let mut e = crate::Engine::default();
        let run = |e: &mut crate::Engine, now: i64, args: &[&str]| crate::testing::reply(e, now, args);
        run(&mut e, 1000, &["RPUSH", "l", "a", "b"]);
        run(&mut e, 1000, &["HSET", "w_a", "n", "2", "label", "A"]);
        run(&mut e, 1000, &["HSET", "w_b", "n", "1", "label", "B"]);
        run(&mut e, 1000, &["HPEXPIRE", "w_b", "100", "FIELDS", "2", "n", "label"]);
        assert_eq!(
            run(&mut e, 1050, &["SORT", "l", "BY", "w_*->n", "GET", "w_*->label"]),
            "*2\r\n$1\r\nB\r\n$1\r\nA\r\n"
        );
        crate::testing::take_muts(&mut e);
        // At 1200 w_b's fields are gone: b weighs 0 and has no label.
        assert_eq!(
            run(&mut e, 1200, &["SORT", "l", "BY", "w_*->n", "GET", "w_*->label"]),
            "*2\r\n$-1\r\n$1\r\nA\r\n"
        );
        let mut muts = crate::testing::take_muts(&mut e);
        muts.sort();
        assert_eq!(muts, ["HDEL w_b label", "HDEL w_b n"]);
    }
}
