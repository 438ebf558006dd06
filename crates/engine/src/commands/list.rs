//! List commands: pushes, pops, ranges, LPOS, LMOVE, LMPOP and the blocking forms.
//!
//! Canonical mutations: list effects depend on order, so they are replayed as deterministic
//! list commands on the same prior state: `LPUSH/RPUSH key e...`, `LPOP/RPOP key [n]` with the
//! number actually popped, `LSET key <absolute index> v`, `LINSERT`, `LREM`, `LTRIM key s e`
//! (normalized; `DEL key` when the trim empties the list), `LMOVE src dst FROM TO`, and
//! `LMOVEM src dst FROM TO EXACTLY n OBO|BULK` with the number actually moved (as Redis
//! propagates BLMOVEM). Blocking commands emit the same effects as their non-blocking forms.
//! No-ops emit nothing.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{self, eq_ic, parse_i64, parse_timeout, MpopArgs};
use resp::reply;
use store::types::List;
use store::{Millis, Value, ValueMut, ValueRef};

const W: u32 = Flags::WRITE;
const WF: u32 = Flags::WRITE | Flags::FAST;
const WDF: u32 = Flags::WRITE | Flags::DENYOOM | Flags::FAST;
const WD: u32 = Flags::WRITE | Flags::DENYOOM;
const R: u32 = Flags::READONLY;
const RF: u32 = Flags::READONLY | Flags::FAST;
const B: u32 = Flags::WRITE | Flags::BLOCKING;
const BD: u32 = Flags::WRITE | Flags::DENYOOM | Flags::BLOCKING;

const G: &str = "list";

pub static COMMANDS: &[CommandSpec] = &[
    spec("lpush", -3, WDF, (1, 1, 1), G, "Prepends elements to a list.", Handler::Data(lpush)),
    spec("rpush", -3, WDF, (1, 1, 1), G, "Appends elements to a list.", Handler::Data(rpush)),
    spec(
        "lpushx",
        -3,
        WDF,
        (1, 1, 1),
        G,
        "Prepends elements to a list only when it exists.",
        Handler::Data(lpushx),
    ),
    spec(
        "rpushx",
        -3,
        WDF,
        (1, 1, 1),
        G,
        "Appends elements to a list only when it exists.",
        Handler::Data(rpushx),
    ),
    spec(
        "lpop",
        -2,
        WF,
        (1, 1, 1),
        G,
        "Removes and returns the first elements of a list.",
        Handler::Data(lpop),
    ),
    spec(
        "rpop",
        -2,
        WF,
        (1, 1, 1),
        G,
        "Removes and returns the last elements of a list.",
        Handler::Data(rpop),
    ),
    spec("llen", 2, RF, (1, 1, 1), G, "Returns the length of a list.", Handler::Data(llen)),
    spec("lrange", 4, R, (1, 1, 1), G, "Returns a range of elements from a list.", Handler::Data(lrange)),
    spec("lindex", 3, R, (1, 1, 1), G, "Returns an element from a list by its index.", Handler::Data(lindex)),
    spec(
        "lset",
        4,
        WD,
        (1, 1, 1),
        G,
        "Sets the value of an element in a list by its index.",
        Handler::Data(lset),
    ),
    spec(
        "linsert",
        5,
        WD,
        (1, 1, 1),
        G,
        "Inserts an element before or after another element.",
        Handler::Data(linsert),
    ),
    spec("lrem", 4, W, (1, 1, 1), G, "Removes elements from a list.", Handler::Data(lrem)),
    spec("ltrim", 4, W, (1, 1, 1), G, "Removes elements from both ends of a list.", Handler::Data(ltrim)),
    spec(
        "lpos",
        -3,
        R,
        (1, 1, 1),
        G,
        "Returns the index of matching elements in a list.",
        Handler::Data(lpos),
    ),
    spec(
        "lmove",
        5,
        WD,
        (1, 2, 1),
        G,
        "Pops an element from a list, pushes it to another list.",
        Handler::Data(lmove),
    ),
    spec(
        "rpoplpush",
        3,
        WD,
        (1, 2, 1),
        G,
        "Pops the last element of a list, pushes it to another.",
        Handler::Data(rpoplpush),
    ),
    spec(
        "lmpop",
        -4,
        W | Flags::MOVABLEKEYS,
        (0, 0, 0),
        G,
        "Pops elements from the first non-empty list.",
        Handler::Data(lmpop),
    ),
    spec(
        "blpop",
        -3,
        B,
        (1, -2, 1),
        G,
        "Pops the first element of a list, or blocks until one is available.",
        Handler::Data(blpop),
    ),
    spec(
        "brpop",
        -3,
        B,
        (1, -2, 1),
        G,
        "Pops the last element of a list, or blocks until one is available.",
        Handler::Data(brpop),
    ),
    spec(
        "blmove",
        6,
        BD,
        (1, 2, 1),
        G,
        "Pops an element and pushes it to another list, or blocks.",
        Handler::Data(blmove),
    ),
    spec(
        "lmovem",
        -5,
        WD,
        (1, 2, 1),
        G,
        "Atomically moves one or more elements from one list to another, returning the moved elements.",
        Handler::Data(lmovem),
    ),
    spec(
        "blmovem",
        -6,
        BD,
        (1, 2, 1),
        G,
        "Moves one or more elements from one list to another, or blocks until enough are available.",
        Handler::Data(blmovem),
    ),
    spec(
        "brpoplpush",
        4,
        BD,
        (1, 2, 1),
        G,
        "Pops the last element and pushes it to another list, or blocks.",
        Handler::Data(brpoplpush),
    ),
    spec(
        "blmpop",
        -5,
        B | Flags::MOVABLEKEYS,
        (0, 0, 0),
        G,
        "Pops elements from the first non-empty list, or blocks.",
        Handler::Data(blmpop),
    ),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Left,
    Right,
}

impl End {
    fn parse(a: &[u8]) -> Option<End> {
        if eq_ic(a, b"left") {
            Some(End::Left)
        } else if eq_ic(a, b"right") {
            Some(End::Right)
        } else {
            None
        }
    }
    fn name(self) -> &'static [u8] {
        match self {
            End::Left => b"LEFT",
            End::Right => b"RIGHT",
        }
    }
    fn pop_cmd(self) -> &'static [u8] {
        match self {
            End::Left => b"LPOP",
            End::Right => b"RPOP",
        }
    }
}

/// What a key holds, for list commands.
enum Look {
    Missing,
    Wrong,
    List(usize),
}

/// Checks `key` for a list without borrowing it past the call; returns its length.
fn look(c: &mut Ctx, key: &[u8], for_write: bool) -> Look {
    let v = if for_write {
        match c.write(key) {
            None => return Look::Missing,
            Some(ValueMut::List(l)) => return Look::List(l.len()),
            Some(_) => return Look::Wrong,
        }
    } else {
        c.read(key)
    };
    match v {
        None => Look::Missing,
        Some(ValueRef::List(l)) => Look::List(l.len()),
        Some(_) => Look::Wrong,
    }
}

/// The list at `key`, which the caller has checked exists and is a list.
fn list_mut<'a>(c: &'a mut Ctx, key: &[u8]) -> &'a mut List {
    match c.ks.get_mut(key) {
        Some(ValueMut::List(l)) => l,
        _ => unreachable!("checked to be a list"),
    }
}

fn list_ref<'a>(c: &'a Ctx, key: &[u8]) -> &'a List {
    match c.ks.get(key) {
        Some(ValueRef::List(l)) => l,
        _ => unreachable!("checked to be a list"),
    }
}

/// Removes `key` if its list became empty (Redis never keeps an empty list).
fn drop_if_empty(c: &mut Ctx, key: &[u8]) {
    if list_ref(c, key).is_empty() {
        c.ks.delete(key);
    }
}

fn push_generic(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]], end: End, only_existing: bool) {
    let key = args[1];
    match look(c, key, true) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Missing if only_existing => return reply::integer(out, 0),
        Look::Missing => {
            c.ks.insert(key, Value::List(Box::new(List::new())), None);
        }
        Look::List(_) => {}
    }
    let l = list_mut(c, key);
    for v in &args[2..] {
        match end {
            End::Left => l.push_front(v),
            End::Right => l.push_back(v),
        }
    }
    let len = l.len();
    c.emit_request(if end == End::Left { b"LPUSH" } else { b"RPUSH" }, args);
    c.signal_ready(key);
    reply::integer(out, len as i64);
}

/// LPUSH key element [element ...]
fn lpush(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    push_generic(c, out, args, End::Left, false)
}
/// RPUSH key element [element ...]
fn rpush(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    push_generic(c, out, args, End::Right, false)
}
/// LPUSHX key element [element ...]
fn lpushx(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    push_generic(c, out, args, End::Left, true)
}
/// RPUSHX key element [element ...]
fn rpushx(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    push_generic(c, out, args, End::Right, true)
}

/// Pops up to `n` elements from `end` of the list at `key` (which exists and is a list),
/// emits the pop, deletes the key if it emptied.
fn pop_n(c: &mut Ctx, key: &[u8], end: End, n: usize) -> Vec<Vec<u8>> {
    let l = list_mut(c, key);
    let n = n.min(l.len());
    let mut got = Vec::with_capacity(n);
    for _ in 0..n {
        let v = match end {
            End::Left => l.pop_front(),
            End::Right => l.pop_back(),
        };
        got.extend(v);
    }
    drop_if_empty(c, key);
    got
}

fn emit_pop(c: &mut Ctx, key: &[u8], end: End, n: usize, with_count: bool) {
    if with_count {
        let mut buf = itoa::Buffer::new();
        c.emit(&[end.pop_cmd(), key, buf.format(n).as_bytes()]);
    } else {
        c.emit(&[end.pop_cmd(), key]);
    }
}

fn pop_generic(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]], end: End) {
    if args.len() > 3 {
        return errors::wrong_arity(out, args[0]);
    }
    let key = args[1];
    let count = match args.get(2) {
        None => None,
        Some(a) => match parse_i64(a) {
            Some(n) if n >= 0 => Some(n as usize),
            _ => return reply::error(out, errors::NOT_FLOAT_OR_RANGE),
        },
    };
    match look(c, key, true) {
        Look::Wrong => reply::error(out, errors::WRONGTYPE),
        Look::Missing => match count {
            None => reply::null_bulk(out, c.proto),
            Some(_) => reply::null_array(out, c.proto),
        },
        Look::List(_) => match count {
            None => {
                let got = pop_n(c, key, end, 1);
                emit_pop(c, key, end, 1, false);
                reply::bulk(out, &got[0]);
            }
            Some(0) => reply::array_len(out, 0),
            Some(n) => {
                let got = pop_n(c, key, end, n);
                emit_pop(c, key, end, got.len(), true);
                reply::bulk_array(out, &got);
            }
        },
    }
}

/// LPOP key [count]
fn lpop(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    pop_generic(c, out, args, End::Left)
}
/// RPOP key [count]
fn rpop(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    pop_generic(c, out, args, End::Right)
}

/// LLEN key
fn llen(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match look(c, args[1], false) {
        Look::Wrong => reply::error(out, errors::WRONGTYPE),
        Look::Missing => reply::integer(out, 0),
        Look::List(n) => reply::integer(out, n as i64),
    }
}

/// Redis's range rule: negative indexes count from the end; the result is clamped to the
/// list, or None when it selects nothing.
fn norm_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let s = if start < 0 { (start + len).max(0) } else { start };
    let e = if end < 0 { end + len } else { end };
    if s > e || s >= len {
        return None;
    }
    Some((s as usize, e.min(len - 1) as usize))
}

/// LRANGE key start stop
fn lrange(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (Some(s), Some(e)) = (parse_i64(args[2]), parse_i64(args[3])) else {
        return reply::error(out, errors::NOT_INTEGER);
    };
    let len = match look(c, args[1], false) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Missing => return reply::array_len(out, 0),
        Look::List(n) => n,
    };
    match norm_range(s, e, len) {
        None => reply::array_len(out, 0),
        Some((s, e)) => {
            reply::array_len(out, e - s + 1);
            for v in list_ref(c, args[1]).iter_from(s).take(e - s + 1) {
                v.with_bytes(|b| reply::bulk(out, b));
            }
        }
    }
}

/// Resolves a possibly negative index against `len`.
fn norm_index(i: i64, len: usize) -> Option<usize> {
    let i = if i < 0 { i + len as i64 } else { i };
    (i >= 0 && (i as usize) < len).then_some(i as usize)
}

/// LINDEX key index
fn lindex(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let len = match look(c, args[1], false) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Missing => return reply::null_bulk(out, c.proto),
        Look::List(n) => n,
    };
    let Some(i) = parse_i64(args[2]) else {
        return reply::error(out, errors::NOT_INTEGER);
    };
    match norm_index(i, len).and_then(|i| list_ref(c, args[1]).get(i)) {
        Some(v) => reply::bulk(out, &v),
        None => reply::null_bulk(out, c.proto),
    }
}

/// LSET key index element
fn lset(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let len = match look(c, key, true) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Missing => return reply::error(out, errors::NO_SUCH_KEY),
        Look::List(n) => n,
    };
    let Some(i) = parse_i64(args[2]) else {
        return reply::error(out, errors::NOT_INTEGER);
    };
    let Some(i) = norm_index(i, len) else {
        return reply::error(out, errors::INDEX_OUT_OF_RANGE);
    };
    list_mut(c, key).set(i, args[3]);
    let mut buf = itoa::Buffer::new();
    c.emit(&[b"LSET", key, buf.format(i).as_bytes(), args[3]]);
    reply::ok(out);
}

/// LINSERT key BEFORE|AFTER pivot element
fn linsert(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let after = if eq_ic(args[2], b"after") {
        true
    } else if eq_ic(args[2], b"before") {
        false
    } else {
        return reply::error(out, errors::SYNTAX);
    };
    match look(c, key, true) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Missing => return reply::integer(out, 0),
        Look::List(_) => {}
    }
    let l = list_mut(c, key);
    let Some(pos) = l.iter().position(|e| e.eq_bytes(args[3])) else {
        return reply::integer(out, -1);
    };
    l.insert(if after { pos + 1 } else { pos }, args[4]);
    let len = l.len();
    c.emit(&[b"LINSERT", key, if after { b"AFTER" } else { b"BEFORE" }, args[3], args[4]]);
    c.signal_ready(key);
    reply::integer(out, len as i64);
}

/// LREM key count element
fn lrem(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let count = match parse_i64(args[2]) {
        None => return reply::error(out, errors::NOT_INTEGER),
        Some(i64::MIN) => return reply::error(out, errors::NOT_NEGATABLE),
        Some(n) => n,
    };
    match look(c, key, true) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Missing => return reply::integer(out, 0),
        Look::List(_) => {}
    }
    let removed = list_mut(c, key).remove_matching(args[3], count);
    if removed > 0 {
        drop_if_empty(c, key);
        c.emit(&[b"LREM", key, args[2], args[3]]);
    }
    reply::integer(out, removed as i64);
}

/// LTRIM key start stop
fn ltrim(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let (Some(s), Some(e)) = (parse_i64(args[2]), parse_i64(args[3])) else {
        return reply::error(out, errors::NOT_INTEGER);
    };
    let len = match look(c, key, true) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Missing => return reply::ok(out),
        Look::List(n) => n,
    };
    match norm_range(s, e, len) {
        None => {
            c.ks.delete(key);
            c.emit(&[b"DEL", key]);
        }
        Some((s, e)) if s == 0 && e + 1 == len => {}
        Some((s, e)) => {
            list_mut(c, key).retain_range(Some((s, e)));
            let (mut b1, mut b2) = (itoa::Buffer::new(), itoa::Buffer::new());
            c.emit(&[b"LTRIM", key, b1.format(s).as_bytes(), b2.format(e).as_bytes()]);
        }
    }
    reply::ok(out);
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
fn lpos(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let mut rank: i64 = 1;
    let mut count: Option<usize> = None;
    let mut maxlen: usize = 0;
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        let opt = args[j];
        if eq_ic(opt, b"rank") && more {
            j += 1;
            match parse_i64(args[j]) {
                None => return reply::error(out, errors::NOT_INTEGER),
                Some(i64::MIN) => return reply::error(out, errors::NOT_NEGATABLE),
                Some(0) => {
                    return reply::error(
                        out,
                        b"ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                    )
                }
                Some(r) => rank = r,
            }
        } else if eq_ic(opt, b"count") && more {
            j += 1;
            match parse_i64(args[j]) {
                Some(n) if n >= 0 => count = Some(n as usize),
                _ => return reply::error(out, b"ERR COUNT can't be negative"),
            }
        } else if eq_ic(opt, b"maxlen") && more {
            j += 1;
            match parse_i64(args[j]) {
                Some(n) if n >= 0 => maxlen = n as usize,
                _ => return reply::error(out, b"ERR MAXLEN can't be negative"),
            }
        } else {
            return reply::error(out, errors::SYNTAX);
        }
        j += 1;
    }
    match look(c, args[1], false) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Missing => {
            return match count {
                None => reply::null_bulk(out, c.proto),
                Some(_) => reply::array_len(out, 0),
            }
        }
        Look::List(_) => {}
    }
    let l = list_ref(c, args[1]);
    let want = match count {
        None => 1,
        Some(0) => usize::MAX,
        Some(n) => n,
    };
    let mut skip = rank.unsigned_abs() - 1;
    let limit = if maxlen == 0 { usize::MAX } else { maxlen };
    let mut found: Vec<usize> = Vec::new();
    let mut visit = |pos: usize, hit: bool| -> bool {
        if hit {
            if skip > 0 {
                skip -= 1;
            } else {
                found.push(pos);
                if found.len() >= want {
                    return false;
                }
            }
        }
        true
    };
    let needle = args[2];
    if rank > 0 {
        for (pos, e) in l.iter().enumerate().take(limit) {
            if !visit(pos, e.eq_bytes(needle)) {
                break;
            }
        }
    } else {
        let mut seen = 0usize;
        l.for_each_rev(|pos, e| {
            if seen >= limit {
                return false;
            }
            seen += 1;
            visit(pos, e.eq_bytes(needle))
        });
    }
    match count {
        None => match found.first() {
            Some(&p) => reply::integer(out, p as i64),
            None => reply::null_bulk(out, c.proto),
        },
        Some(_) => {
            reply::array_len(out, found.len());
            for p in found {
                reply::integer(out, p as i64);
            }
        }
    }
}

/// The shared body of LMOVE and its blocking forms, once the source is known to be a
/// non-empty list: checks the destination's type, moves one element, emits `LMOVE`.
fn do_move(c: &mut Ctx, out: &mut Vec<u8>, src: &[u8], dst: &[u8], from: End, to: End) {
    if let Look::Wrong = look(c, dst, true) {
        return reply::error(out, errors::WRONGTYPE);
    }
    if src == dst {
        // A rotation within one list: the key never stops existing, so it keeps its deadline
        // (popping its only element first would delete the key and lose it).
        let l = list_mut(c, src);
        let v = match from {
            End::Left => l.pop_front(),
            End::Right => l.pop_back(),
        }
        .expect("source list is not empty");
        match to {
            End::Left => l.push_front(&v),
            End::Right => l.push_back(&v),
        }
        c.emit(&[b"LMOVE", src, dst, from.name(), to.name()]);
        c.signal_ready(dst);
        return reply::bulk(out, &v);
    }
    let v = pop_n(c, src, from, 1).pop().expect("source list is not empty");
    if c.ks.get(dst).is_none() {
        c.ks.insert(dst, Value::List(Box::new(List::new())), None);
    }
    let l = list_mut(c, dst);
    match to {
        End::Left => l.push_front(&v),
        End::Right => l.push_back(&v),
    }
    c.emit(&[b"LMOVE", src, dst, from.name(), to.name()]);
    c.signal_ready(dst);
    reply::bulk(out, &v);
}

fn lmove_generic(c: &mut Ctx, out: &mut Vec<u8>, src: &[u8], dst: &[u8], from: End, to: End) {
    match look(c, src, true) {
        Look::Wrong => reply::error(out, errors::WRONGTYPE),
        Look::Missing => reply::null_bulk(out, c.proto),
        Look::List(_) => do_move(c, out, src, dst, from, to),
    }
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT
fn lmove(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (Some(from), Some(to)) = (End::parse(args[3]), End::parse(args[4])) else {
        return reply::error(out, errors::SYNTAX);
    };
    lmove_generic(c, out, args[1], args[2], from, to)
}

/// RPOPLPUSH source destination
fn rpoplpush(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    lmove_generic(c, out, args[1], args[2], End::Right, End::Left)
}

/// How many elements LMOVEM moves: one (no count given; the reply is still an array), up to
/// `n` (COUNT), or exactly `n` or none (EXACTLY).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Many {
    One,
    Count(usize),
    Exactly(usize),
}

/// LMOVEM's `[COUNT n | EXACTLY n] OBO|BULK` (both parts, or none): the count and whether the
/// moved elements land one by one (OBO) rather than as a block in their source order (BULK).
fn parse_many(out: &mut Vec<u8>, rest: &[&[u8]]) -> Option<(Many, bool)> {
    if rest.is_empty() {
        return Some((Many::One, true));
    }
    let exactly = match rest {
        [m, _, _] if eq_ic(m, b"count") => false,
        [m, _, _] if eq_ic(m, b"exactly") => true,
        _ => {
            reply::error(out, errors::SYNTAX);
            return None;
        }
    };
    let obo = if eq_ic(rest[2], b"obo") {
        true
    } else if eq_ic(rest[2], b"bulk") {
        false
    } else {
        reply::error(out, errors::SYNTAX);
        return None;
    };
    let n = match parse_i64(rest[1]) {
        Some(n) if n >= 1 => n as usize,
        _ => {
            reply::error(out, b"ERR count should be greater than 0");
            return None;
        }
    };
    Some((if exactly { Many::Exactly(n) } else { Many::Count(n) }, obo))
}

/// The number LMOVEM moves from a list of `len` elements (0: nothing, the caller answers nil).
fn movem_count(many: Many, len: usize) -> usize {
    match many {
        Many::One => len.min(1),
        Many::Count(n) => n.min(len),
        Many::Exactly(n) if len >= n => n,
        Many::Exactly(_) => 0,
    }
}

/// The body of LMOVEM and BLMOVEM, once the source is a list that can give `n` (>= 1)
/// elements: checks the destination (WRONGTYPE moves nothing), pops `n` from `from`, pushes
/// them at `to`, emits `LMOVEM ... EXACTLY n`, replies with the block in destination order.
///
/// OBO pushes each element as it is popped, so a push onto the end it came from (LEFT LEFT,
/// RIGHT RIGHT) reverses the block; BULK pushes the block in its source order. With the same
/// key on both sides the list is rotated in place and never stops existing (it keeps its TTL).
fn do_movem(c: &mut Ctx, out: &mut Vec<u8>, src: &[u8], dst: &[u8], from: End, to: End, n: usize, obo: bool) {
    if src != dst {
        if let Look::Wrong = look(c, dst, true) {
            return reply::error(out, errors::WRONGTYPE);
        }
    }
    let l = list_mut(c, src);
    let mut block: Vec<Vec<u8>> = (0..n)
        .filter_map(|_| match from {
            End::Left => l.pop_front(),
            End::Right => l.pop_back(),
        })
        .collect();
    // `block` is in pop order; turn it into the order the destination will read it in.
    let reversed = if obo { to == End::Left } else { from == End::Right };
    if reversed {
        block.reverse();
    }
    if src != dst {
        drop_if_empty(c, src);
        if c.ks.get(dst).is_none() {
            c.ks.insert(dst, Value::List(Box::new(List::new())), None);
        }
    }
    let l = list_mut(c, dst);
    match to {
        End::Left => block.iter().rev().for_each(|v| l.push_front(v)),
        End::Right => block.iter().for_each(|v| l.push_back(v)),
    }
    let mut b = itoa::Buffer::new();
    let order: &[u8] = if obo { b"OBO" } else { b"BULK" };
    c.emit(&[b"LMOVEM", src, dst, from.name(), to.name(), b"EXACTLY", b.format(n).as_bytes(), order]);
    c.signal_ready(dst);
    reply::bulk_array(out, &block);
}

/// LMOVEM source destination LEFT|RIGHT LEFT|RIGHT [COUNT n | EXACTLY n OBO|BULK] (Redis 8.10)
fn lmovem(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (Some(from), Some(to)) = (End::parse(args[3]), End::parse(args[4])) else {
        return reply::error(out, errors::SYNTAX);
    };
    let Some((many, obo)) = parse_many(out, &args[5..]) else { return };
    let (src, dst) = (args[1], args[2]);
    match look(c, src, true) {
        Look::Wrong => reply::error(out, errors::WRONGTYPE),
        Look::Missing => reply::null_array(out, c.proto),
        Look::List(len) => match movem_count(many, len) {
            0 => reply::null_array(out, c.proto),
            n => do_movem(c, out, src, dst, from, to, n, obo),
        },
    }
}

/// BLMOVEM source destination LEFT|RIGHT LEFT|RIGHT timeout [COUNT n | EXACTLY n OBO|BULK]:
/// LMOVEM, or waits while the source is empty (COUNT) or shorter than n (EXACTLY). A waiting
/// EXACTLY keeps its place in the key's queue while later clients take what it cannot use.
fn blmovem(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (Some(from), Some(to)) = (End::parse(args[3]), End::parse(args[4])) else {
        return reply::error(out, errors::SYNTAX);
    };
    let deadline = match parse_timeout(args[5], c.now) {
        Ok(d) => d,
        Err(e) => return reply::error(out, e),
    };
    let Some((many, obo)) = parse_many(out, &args[6..]) else { return };
    let (src, dst) = (args[1], args[2]);
    // An EXACTLY waiter leaves what it cannot use yet to the clients behind it.
    let exactly = matches!(many, Many::Exactly(_));
    match look(c, src, true) {
        Look::Wrong if c.retrying_blocked => {
            block_keeping_turn(c, out, vec![src.to_vec()], deadline, exactly)
        }
        Look::Wrong => reply::error(out, errors::WRONGTYPE),
        Look::Missing => block_keeping_turn(c, out, vec![src.to_vec()], deadline, exactly),
        Look::List(len) => match movem_count(many, len) {
            0 => block_keeping_turn(c, out, vec![src.to_vec()], deadline, exactly),
            n => do_movem(c, out, src, dst, from, to, n, obo),
        },
    }
}

/// Parses `numkeys key [key ...] LEFT|RIGHT [COUNT count]` of LMPOP/BLMPOP.
fn parse_mpop<'a>(out: &mut Vec<u8>, args: &'a [&'a [u8]], at: usize) -> Option<MpopArgs<'a, End>> {
    util::parse_mpop(out, args, at, End::parse)
}

/// Tries to serve an LMPOP from the first non-empty list. Returns false if every key was
/// empty or missing (nothing written to `out`); true if it replied (elements or WRONGTYPE).
fn serve_mpop(c: &mut Ctx, out: &mut Vec<u8>, p: &MpopArgs<End>) -> bool {
    for key in p.keys {
        match look(c, key, true) {
            // A parked client whose key now holds another type keeps waiting, as in Redis.
            Look::Wrong if c.retrying_blocked => {}
            Look::Wrong => {
                reply::error(out, errors::WRONGTYPE);
                return true;
            }
            Look::Missing => {}
            Look::List(_) => {
                let got = pop_n(c, key, p.side, p.count);
                emit_pop(c, key, p.side, got.len(), true);
                reply::array_len(out, 2);
                reply::bulk(out, key);
                reply::bulk_array(out, &got);
                return true;
            }
        }
    }
    false
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]
fn lmpop(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(p) = parse_mpop(out, args, 1) else { return };
    if !serve_mpop(c, out, &p) {
        reply::null_array(out, c.proto);
    }
}

/// Parks the client unless this is a replay (a replica never waits: it answers as a timeout
/// would, which the origin never journals).
fn block(c: &mut Ctx, out: &mut Vec<u8>, keys: Vec<Vec<u8>>, deadline: Option<Millis>) {
    block_keeping_turn(c, out, keys, deadline, false)
}

/// [`block`]; with `keeps_turn`, a retry that blocks again lets the next waiter try (see
/// `BlockOn::keeps_turn`).
fn block_keeping_turn(
    c: &mut Ctx,
    out: &mut Vec<u8>,
    keys: Vec<Vec<u8>>,
    deadline: Option<Millis>,
    keeps_turn: bool,
) {
    if c.replaying {
        return reply::null_array(out, c.proto);
    }
    c.block_with(crate::engine::BlockOn { keys, deadline, keeps_turn, ..Default::default() });
}

fn bpop_generic(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]], end: End) {
    let deadline = match parse_timeout(args[args.len() - 1], c.now) {
        Ok(d) => d,
        Err(e) => return reply::error(out, e),
    };
    let keys = &args[1..args.len() - 1];
    for key in keys {
        match look(c, key, true) {
            Look::Wrong if c.retrying_blocked => {}
            Look::Wrong => return reply::error(out, errors::WRONGTYPE),
            Look::Missing => {}
            Look::List(_) => {
                let got = pop_n(c, key, end, 1);
                emit_pop(c, key, end, 1, false);
                reply::array_len(out, 2);
                reply::bulk(out, key);
                reply::bulk(out, &got[0]);
                return;
            }
        }
    }
    block(c, out, keys.iter().map(|k| k.to_vec()).collect(), deadline);
}

/// BLPOP key [key ...] timeout
fn blpop(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    bpop_generic(c, out, args, End::Left)
}
/// BRPOP key [key ...] timeout
fn brpop(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    bpop_generic(c, out, args, End::Right)
}

fn blmove_generic(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]], from: End, to: End) {
    let deadline = match parse_timeout(args[args.len() - 1], c.now) {
        Ok(d) => d,
        Err(e) => return reply::error(out, e),
    };
    let (src, dst) = (args[1], args[2]);
    match look(c, src, true) {
        Look::Wrong if c.retrying_blocked => block(c, out, vec![src.to_vec()], deadline),
        Look::Wrong => reply::error(out, errors::WRONGTYPE),
        Look::Missing => block(c, out, vec![src.to_vec()], deadline),
        Look::List(_) => do_move(c, out, src, dst, from, to),
    }
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout
fn blmove(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (Some(from), Some(to)) = (End::parse(args[3]), End::parse(args[4])) else {
        return reply::error(out, errors::SYNTAX);
    };
    blmove_generic(c, out, args, from, to)
}

/// BRPOPLPUSH source destination timeout
fn brpoplpush(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    blmove_generic(c, out, args, End::Right, End::Left)
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]
fn blmpop(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    // Redis reads the timeout after the rest, as BZMPOP does.
    let Some(p) = parse_mpop(out, args, 2) else { return };
    let deadline = match parse_timeout(args[1], c.now) {
        Ok(d) => d,
        Err(e) => return reply::error(out, e),
    };
    if !serve_mpop(c, out, &p) {
        block(c, out, p.keys.iter().map(|k| k.to_vec()).collect(), deadline);
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::{Engine, Outcome};

    const NOW: i64 = 1_700_000_000_000;

    /// Runs one command; returns its raw reply and the mutations it emitted (space-joined).
    fn run(e: &mut Engine, args: &[&str]) -> (String, Vec<String>) {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        let mut out = Vec::new();
        let outcome = e.run(&a, NOW, &mut out);
        if let Outcome::Blocked(b) = outcome {
            out.extend_from_slice(format!("BLOCKED {:?}", b.deadline).as_bytes());
        }
        (String::from_utf8_lossy(&out).into_owned(), crate::testing::take_muts(e))
    }

    fn r(e: &mut Engine, args: &[&str]) -> String {
        run(e, args).0
    }

    const WT: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    const NOTINT: &str = "-ERR value is not an integer or out of range\r\n";
    const SYNTAX: &str = "-ERR syntax error\r\n";

    /// Indexes far outside the list are out of range, the extremes included (Redis 8.2's LSET
    /// overflows there and sets an element: the differential test leaves them out).
    #[test]
    fn lset_and_lindex_at_extreme_indexes() {
        let mut e = Engine::default();
        r(&mut e, &["RPUSH", "l", "a", "b", "c"]);
        for i in ["-9223372036854775808", "-9223372036854775807", "9223372036854775807", "-4", "3"] {
            assert_eq!(r(&mut e, &["LSET", "l", i, "x"]), "-ERR index out of range\r\n", "{i}");
            assert_eq!(r(&mut e, &["LINDEX", "l", i]), "$-1\r\n", "{i}");
        }
        assert_eq!(r(&mut e, &["LRANGE", "l", "0", "-1"]), "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
    }

    #[test]
    fn push_pop_and_mutations() {
        let mut e = Engine::default();
        assert_eq!(
            run(&mut e, &["RPUSH", "l", "a", "b", "c"]),
            (":3\r\n".into(), vec!["RPUSH l a b c".into()])
        );
        assert_eq!(run(&mut e, &["lpush", "l", "x", "1"]), (":5\r\n".into(), vec!["LPUSH l x 1".into()]));
        assert_eq!(
            r(&mut e, &["LRANGE", "l", "0", "-1"]),
            "*5\r\n$1\r\n1\r\n$1\r\nx\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
        );
        assert_eq!(run(&mut e, &["LPUSHX", "nol", "a"]), (":0\r\n".into(), vec![]));
        assert_eq!(r(&mut e, &["EXISTS", "nol"]), ":0\r\n");
        assert_eq!(run(&mut e, &["RPUSHX", "l", "z"]), (":6\r\n".into(), vec!["RPUSH l z".into()]));
        assert_eq!(run(&mut e, &["LPOP", "l"]), ("$1\r\n1\r\n".into(), vec!["LPOP l".into()]));
        assert_eq!(
            run(&mut e, &["RPOP", "l", "2"]),
            ("*2\r\n$1\r\nz\r\n$1\r\nc\r\n".into(), vec!["RPOP l 2".into()])
        );
        assert_eq!(run(&mut e, &["LPOP", "l", "0"]), ("*0\r\n".into(), vec![]));
        assert_eq!(r(&mut e, &["LPOP", "l", "-1"]), "-ERR value is out of range, must be positive\r\n");
        assert_eq!(r(&mut e, &["LPOP", "l", "x"]), "-ERR value is out of range, must be positive\r\n");
        assert_eq!(
            r(&mut e, &["LPOP", "l", "1", "2"]),
            "-ERR wrong number of arguments for 'lpop' command\r\n"
        );
        assert_eq!(r(&mut e, &["LPOP", "nol"]), "$-1\r\n");
        assert_eq!(r(&mut e, &["LPOP", "nol", "2"]), "*-1\r\n");
        assert_eq!(r(&mut e, &["LPOP", "nol", "0"]), "*-1\r\n");
        // Popping more than there is pops everything, emits the real count, deletes the key.
        assert_eq!(
            run(&mut e, &["LPOP", "l", "10"]),
            ("*3\r\n$1\r\nx\r\n$1\r\na\r\n$1\r\nb\r\n".into(), vec!["LPOP l 3".into()])
        );
        assert_eq!(r(&mut e, &["EXISTS", "l"]), ":0\r\n");
        assert_eq!(r(&mut e, &["LLEN", "l"]), ":0\r\n");
        r(&mut e, &["SET", "s", "v"]);
        for cmd in [
            &["LPUSH", "s", "a"][..],
            &["RPUSHX", "s", "a"],
            &["LPOP", "s"],
            &["RPOP", "s", "1"],
            &["LLEN", "s"],
            &["LRANGE", "s", "0", "1"],
            &["LINDEX", "s", "0"],
            &["LSET", "s", "0", "a"],
            &["LINSERT", "s", "before", "a", "b"],
            &["LREM", "s", "0", "a"],
            &["LTRIM", "s", "0", "1"],
            &["LPOS", "s", "a"],
            &["LMOVE", "s", "d", "left", "left"],
            &["LMPOP", "1", "s", "left"],
            &["BLPOP", "s", "0"],
            &["BLMOVE", "s", "d", "left", "left", "0"],
            &["BLMPOP", "0", "1", "s", "left"],
        ] {
            assert_eq!(run(&mut e, cmd), (WT.into(), vec![]), "{cmd:?}");
        }
    }

    #[test]
    fn lmove_onto_itself_keeps_the_deadline() {
        let mut e = Engine::default();
        r(&mut e, &["RPUSH", "l", "only"]);
        r(&mut e, &["PEXPIREAT", "l", "99999999999999"]);
        assert_eq!(r(&mut e, &["LMOVE", "l", "l", "LEFT", "RIGHT"]), "$4\r\nonly\r\n");
        assert_eq!(r(&mut e, &["PEXPIRETIME", "l"]), ":99999999999999\r\n");
        r(&mut e, &["RPUSH", "l", "b"]);
        assert_eq!(r(&mut e, &["RPOPLPUSH", "l", "l"]), "$1\r\nb\r\n");
        assert_eq!(r(&mut e, &["LRANGE", "l", "0", "-1"]), "*2\r\n$1\r\nb\r\n$4\r\nonly\r\n");
        assert_eq!(r(&mut e, &["PEXPIRETIME", "l"]), ":99999999999999\r\n");
    }

    #[test]
    fn index_commands() {
        let mut e = Engine::default();
        r(&mut e, &["RPUSH", "l", "a", "b", "c", "d"]);
        assert_eq!(r(&mut e, &["LINDEX", "l", "-1"]), "$1\r\nd\r\n");
        assert_eq!(r(&mut e, &["LINDEX", "l", "4"]), "$-1\r\n");
        assert_eq!(r(&mut e, &["LINDEX", "l", "-5"]), "$-1\r\n");
        assert_eq!(r(&mut e, &["LINDEX", "l", "x"]), NOTINT);
        assert_eq!(r(&mut e, &["LINDEX", "nol", "x"]), "$-1\r\n");
        assert_eq!(run(&mut e, &["LSET", "l", "-2", "C"]), ("+OK\r\n".into(), vec!["LSET l 2 C".into()]));
        assert_eq!(r(&mut e, &["LSET", "l", "4", "x"]), "-ERR index out of range\r\n");
        assert_eq!(r(&mut e, &["LSET", "l", "x", "x"]), NOTINT);
        assert_eq!(r(&mut e, &["LSET", "nol", "x", "x"]), "-ERR no such key\r\n");
        assert_eq!(r(&mut e, &["LRANGE", "l", "1", "-2"]), "*2\r\n$1\r\nb\r\n$1\r\nC\r\n");
        assert_eq!(r(&mut e, &["LRANGE", "l", "3", "1"]), "*0\r\n");
        assert_eq!(
            r(&mut e, &["LRANGE", "l", "-100", "100"]),
            "*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nC\r\n$1\r\nd\r\n"
        );
        assert_eq!(r(&mut e, &["LRANGE", "l", "x", "1"]), NOTINT);
        assert_eq!(r(&mut e, &["LRANGE", "nol", "0", "1"]), "*0\r\n");
        assert_eq!(r(&mut e, &["LINSERT", "l", "middle", "a", "x"]), SYNTAX);
        assert_eq!(r(&mut e, &["LINSERT", "nol", "before", "a", "x"]), ":0\r\n");
        assert_eq!(run(&mut e, &["LINSERT", "l", "before", "zz", "x"]), (":-1\r\n".into(), vec![]));
        assert_eq!(
            run(&mut e, &["LINSERT", "l", "AFTER", "a", "x"]),
            (":5\r\n".into(), vec!["LINSERT l AFTER a x".into()])
        );
        assert_eq!(
            r(&mut e, &["LRANGE", "l", "0", "-1"]),
            "*5\r\n$1\r\na\r\n$1\r\nx\r\n$1\r\nb\r\n$1\r\nC\r\n$1\r\nd\r\n"
        );
        assert_eq!(run(&mut e, &["LTRIM", "l", "1", "-2"]), ("+OK\r\n".into(), vec!["LTRIM l 1 3".into()]));
        assert_eq!(run(&mut e, &["LTRIM", "l", "0", "-1"]), ("+OK\r\n".into(), vec![]));
        assert_eq!(r(&mut e, &["LTRIM", "l", "x", "1"]), NOTINT);
        assert_eq!(r(&mut e, &["LTRIM", "nol", "0", "1"]), "+OK\r\n");
        assert_eq!(run(&mut e, &["LTRIM", "l", "5", "1"]), ("+OK\r\n".into(), vec!["DEL l".into()]));
        assert_eq!(r(&mut e, &["EXISTS", "l"]), ":0\r\n");
    }

    #[test]
    fn lrem_and_lpos() {
        let mut e = Engine::default();
        r(&mut e, &["RPUSH", "l", "a", "b", "c", "a", "b", "c", "a"]);
        assert_eq!(r(&mut e, &["LPOS", "l", "a"]), ":0\r\n");
        assert_eq!(r(&mut e, &["LPOS", "l", "a", "RANK", "-1", "COUNT", "2"]), "*2\r\n:6\r\n:3\r\n");
        assert_eq!(r(&mut e, &["LPOS", "l", "a", "COUNT", "0"]), "*3\r\n:0\r\n:3\r\n:6\r\n");
        assert_eq!(r(&mut e, &["LPOS", "l", "a", "RANK", "2", "MAXLEN", "3"]), "$-1\r\n");
        assert_eq!(r(&mut e, &["LPOS", "l", "a", "RANK", "2", "MAXLEN", "4"]), ":3\r\n");
        assert_eq!(r(&mut e, &["LPOS", "l", "c", "RANK", "-2", "MAXLEN", "2"]), "$-1\r\n");
        // Redis 7.2+ refuses a rank it cannot negate.
        let range =
            "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n";
        assert_eq!(r(&mut e, &["LPOS", "l", "a", "RANK", "-9223372036854775808"]), range);
        assert_eq!(r(&mut e, &["LREM", "l", "-9223372036854775808", "a"]), range);
        assert_eq!(
            r(&mut e, &["LPOS", "l", "a", "RANK", "0"]),
            "-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n"
        );
        assert_eq!(r(&mut e, &["LPOS", "l", "a", "RANK", "x"]), NOTINT);
        assert_eq!(r(&mut e, &["LPOS", "l", "a", "COUNT", "-1"]), "-ERR COUNT can't be negative\r\n");
        assert_eq!(r(&mut e, &["LPOS", "l", "a", "COUNT", "x"]), "-ERR COUNT can't be negative\r\n");
        assert_eq!(r(&mut e, &["LPOS", "l", "a", "MAXLEN", "-1"]), "-ERR MAXLEN can't be negative\r\n");
        assert_eq!(r(&mut e, &["LPOS", "l", "a", "foo"]), SYNTAX);
        assert_eq!(r(&mut e, &["LPOS", "l", "a", "COUNT"]), SYNTAX);
        assert_eq!(r(&mut e, &["LPOS", "nol", "a"]), "$-1\r\n");
        assert_eq!(r(&mut e, &["LPOS", "nol", "a", "COUNT", "0"]), "*0\r\n");
        assert_eq!(r(&mut e, &["LPOS", "l", "zz", "COUNT", "0"]), "*0\r\n");
        assert_eq!(r(&mut e, &["LREM", "l", "x", "a"]), NOTINT);
        assert_eq!(r(&mut e, &["LREM", "nol", "1", "a"]), ":0\r\n");
        assert_eq!(run(&mut e, &["LREM", "l", "-2", "a"]), (":2\r\n".into(), vec!["LREM l -2 a".into()]));
        assert_eq!(
            r(&mut e, &["LRANGE", "l", "0", "-1"]),
            "*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\nc\r\n"
        );
        assert_eq!(run(&mut e, &["LREM", "l", "0", "zz"]), (":0\r\n".into(), vec![]));
        // Integers are stored as integers but compare as the strings they came from.
        r(&mut e, &["RPUSH", "n", "1", "01", "1", "-0"]);
        assert_eq!(r(&mut e, &["LPOS", "n", "1", "COUNT", "0"]), "*2\r\n:0\r\n:2\r\n");
        assert_eq!(r(&mut e, &["LPOS", "n", "01"]), ":1\r\n");
        assert_eq!(
            r(&mut e, &["LRANGE", "n", "0", "-1"]),
            "*4\r\n$1\r\n1\r\n$2\r\n01\r\n$1\r\n1\r\n$2\r\n-0\r\n"
        );
        assert_eq!(run(&mut e, &["LREM", "n", "0", "1"]), (":2\r\n".into(), vec!["LREM n 0 1".into()]));
        assert_eq!(run(&mut e, &["LREM", "n", "0", "01"]), (":1\r\n".into(), vec!["LREM n 0 01".into()]));
        assert_eq!(run(&mut e, &["LREM", "n", "1", "-0"]), (":1\r\n".into(), vec!["LREM n 1 -0".into()]));
        assert_eq!(r(&mut e, &["EXISTS", "n"]), ":0\r\n");
    }

    #[test]
    fn moves_and_mpop() {
        let mut e = Engine::default();
        r(&mut e, &["RPUSH", "l", "1", "2", "3"]);
        assert_eq!(
            run(&mut e, &["RPOPLPUSH", "l", "l"]),
            ("$1\r\n3\r\n".into(), vec!["LMOVE l l RIGHT LEFT".into()])
        );
        assert_eq!(r(&mut e, &["LRANGE", "l", "0", "-1"]), "*3\r\n$1\r\n3\r\n$1\r\n1\r\n$1\r\n2\r\n");
        assert_eq!(
            run(&mut e, &["LMOVE", "l", "d", "left", "RIGHT"]),
            ("$1\r\n3\r\n".into(), vec!["LMOVE l d LEFT RIGHT".into()])
        );
        assert_eq!(r(&mut e, &["LMOVE", "l", "d", "up", "left"]), SYNTAX);
        assert_eq!(r(&mut e, &["LMOVE", "nol", "d", "left", "left"]), "$-1\r\n");
        r(&mut e, &["SET", "s", "v"]);
        assert_eq!(run(&mut e, &["LMOVE", "l", "s", "left", "left"]), (WT.into(), vec![]));
        assert_eq!(r(&mut e, &["LLEN", "l"]), ":2\r\n");
        assert_eq!(r(&mut e, &["LMPOP", "0", "l", "left"]), "-ERR numkeys should be greater than 0\r\n");
        assert_eq!(r(&mut e, &["LMPOP", "x", "l", "left"]), "-ERR numkeys should be greater than 0\r\n");
        assert_eq!(r(&mut e, &["LMPOP", "3", "l", "left"]), SYNTAX);
        assert_eq!(r(&mut e, &["LMPOP", "2147483648", "l", "left"]), SYNTAX);
        assert_eq!(r(&mut e, &["LMPOP", "1", "l", "up"]), SYNTAX);
        assert_eq!(
            r(&mut e, &["LMPOP", "1", "l", "left", "count", "0"]),
            "-ERR count should be greater than 0\r\n"
        );
        assert_eq!(
            r(&mut e, &["LMPOP", "1", "l", "left", "count", "x"]),
            "-ERR count should be greater than 0\r\n"
        );
        assert_eq!(r(&mut e, &["LMPOP", "1", "l", "left", "count", "2", "count", "3"]), SYNTAX);
        assert_eq!(r(&mut e, &["LMPOP", "1", "l", "left", "count"]), SYNTAX);
        assert_eq!(r(&mut e, &["LMPOP", "1", "nol", "left"]), "*-1\r\n");
        assert_eq!(r(&mut e, &["LMPOP", "2", "nol", "s", "left"]), WT);
        assert_eq!(
            run(&mut e, &["LMPOP", "2", "nol", "l", "right", "COUNT", "5"]),
            ("*2\r\n$1\r\nl\r\n*2\r\n$1\r\n2\r\n$1\r\n1\r\n".into(), vec!["RPOP l 2".into()])
        );
        assert_eq!(r(&mut e, &["EXISTS", "l"]), ":0\r\n");
    }

    /// Every LEFT/RIGHT pair with OBO and BULK, from [1 2 3 4 5] onto [x y], three elements.
    #[test]
    fn lmovem_orders() {
        let cases = [
            ("LEFT", "LEFT", "OBO", "3 2 1", "3 2 1 x y"),
            ("LEFT", "LEFT", "BULK", "1 2 3", "1 2 3 x y"),
            ("LEFT", "RIGHT", "OBO", "1 2 3", "x y 1 2 3"),
            ("LEFT", "RIGHT", "BULK", "1 2 3", "x y 1 2 3"),
            ("RIGHT", "LEFT", "OBO", "3 4 5", "3 4 5 x y"),
            ("RIGHT", "LEFT", "BULK", "3 4 5", "3 4 5 x y"),
            ("RIGHT", "RIGHT", "OBO", "5 4 3", "x y 5 4 3"),
            ("RIGHT", "RIGHT", "BULK", "3 4 5", "x y 3 4 5"),
        ];
        let arr = |s: &str| {
            let items: Vec<&str> = s.split(' ').collect();
            let mut out = format!("*{}\r\n", items.len());
            items.iter().for_each(|i| out.push_str(&format!("${}\r\n{i}\r\n", i.len())));
            out
        };
        for (from, to, order, reply, dst) in cases {
            let mut e = Engine::default();
            r(&mut e, &["RPUSH", "s", "1", "2", "3", "4", "5"]);
            r(&mut e, &["RPUSH", "d", "x", "y"]);
            let (got, muts) = run(&mut e, &["LMOVEM", "s", "d", from, to, "COUNT", "3", order]);
            assert_eq!(got, arr(reply), "{from} {to} {order}");
            assert_eq!(muts, vec![format!("LMOVEM s d {from} {to} EXACTLY 3 {order}")]);
            assert_eq!(r(&mut e, &["LRANGE", "d", "0", "-1"]), arr(dst), "{from} {to} {order}");
        }
    }

    #[test]
    fn lmovem_counts_and_errors() {
        let mut e = Engine::default();
        r(&mut e, &["RPUSH", "s", "a", "b", "c"]);
        // No how-many block: one element, as an array.
        assert_eq!(r(&mut e, &["LMOVEM", "s", "d", "LEFT", "RIGHT"]), "*1\r\n$1\r\na\r\n");
        // EXACTLY more than there is moves nothing.
        assert_eq!(
            run(&mut e, &["LMOVEM", "s", "d", "LEFT", "RIGHT", "EXACTLY", "3", "BULK"]),
            ("*-1\r\n".into(), vec![])
        );
        // COUNT more than there is moves everything and deletes the source.
        assert_eq!(
            r(&mut e, &["LMOVEM", "s", "d", "left", "right", "count", "9", "bulk"]),
            "*2\r\n$1\r\nb\r\n$1\r\nc\r\n"
        );
        assert_eq!(r(&mut e, &["EXISTS", "s"]), ":0\r\n");
        assert_eq!(r(&mut e, &["LMOVEM", "s", "d", "LEFT", "RIGHT"]), "*-1\r\n");
        assert_eq!(r(&mut e, &["LMOVEM", "s", "d", "LEFT", "RIGHT", "COUNT", "2", "OBO"]), "*-1\r\n");
        // The same key: a rotation in place; OBO onto the end it came from reverses the block.
        r(&mut e, &["RPUSH", "k", "a", "b", "c"]);
        r(&mut e, &["PEXPIRE", "k", "100000"]);
        assert_eq!(
            r(&mut e, &["LMOVEM", "k", "k", "LEFT", "LEFT", "EXACTLY", "2", "OBO"]),
            "*2\r\n$1\r\nb\r\n$1\r\na\r\n"
        );
        assert_eq!(r(&mut e, &["LRANGE", "k", "0", "-1"]), "*3\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\nc\r\n");
        assert_eq!(
            r(&mut e, &["LMOVEM", "k", "k", "LEFT", "RIGHT", "COUNT", "3", "BULK"]),
            "*3\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\nc\r\n"
        );
        assert_eq!(r(&mut e, &["PTTL", "k"]), ":100000\r\n");
        for bad in [
            &["LMOVEM", "k", "d", "LEFT", "RIGHT", "COUNT", "2"][..],
            &["LMOVEM", "k", "d", "LEFT", "RIGHT", "COUNT", "2", "OBO", "x"],
            &["LMOVEM", "k", "d", "LEFT", "RIGHT", "MOST", "2", "OBO"],
            &["LMOVEM", "k", "d", "LEFT", "RIGHT", "COUNT", "2", "ONE"],
            &["LMOVEM", "k", "d", "UP", "RIGHT"],
        ] {
            assert_eq!(r(&mut e, bad), SYNTAX, "{bad:?}");
        }
        for n in ["0", "-1", "x"] {
            assert_eq!(
                r(&mut e, &["LMOVEM", "k", "d", "LEFT", "RIGHT", "EXACTLY", n, "OBO"]),
                "-ERR count should be greater than 0\r\n"
            );
        }
        assert_eq!(
            r(&mut e, &["LMOVEM", "k", "d", "LEFT"]),
            "-ERR wrong number of arguments for 'lmovem' command\r\n"
        );
        // A destination of another type: WRONGTYPE, nothing popped.
        r(&mut e, &["SET", "str", "v"]);
        assert_eq!(run(&mut e, &["LMOVEM", "k", "str", "LEFT", "RIGHT"]), (WT.into(), vec![]));
        assert_eq!(r(&mut e, &["LLEN", "k"]), ":3\r\n");
        assert_eq!(r(&mut e, &["LMOVEM", "str", "k", "LEFT", "RIGHT"]), WT);
        assert_eq!(r(&mut e, &["BLMOVEM", "k", "d", "LEFT", "RIGHT", "-1"]), "-ERR timeout is negative\r\n");
        assert_eq!(
            r(&mut e, &["BLMOVEM", "k", "d", "LEFT", "RIGHT", "0", "EXACTLY", "2", "BULK"]),
            "*2\r\n$1\r\nb\r\n$1\r\na\r\n"
        );
    }

    #[test]
    fn blocking_forms() {
        let mut e = Engine::default();
        assert_eq!(r(&mut e, &["BLPOP", "l", "x"]), "-ERR timeout is not a float or out of range\r\n");
        assert_eq!(r(&mut e, &["BLPOP", "l", "-1"]), "-ERR timeout is negative\r\n");
        // Redis 7.4+ (read from 8.2.3); 7.0 called them negative.
        assert_eq!(r(&mut e, &["BLPOP", "l", "inf"]), "-ERR timeout is out of range\r\n");
        assert_eq!(r(&mut e, &["BLPOP", "l", "1e300"]), "-ERR timeout is out of range\r\n");
        assert_eq!(r(&mut e, &["BLPOP", "l", "nan"]), "-ERR timeout is not a float or out of range\r\n");
        assert_eq!(r(&mut e, &["BLPOP", "l", " 1"]), "-ERR timeout is not a float or out of range\r\n");
        assert_eq!(r(&mut e, &["BLPOP", "l", "0x"]), "-ERR timeout is not a float or out of range\r\n");
        assert_eq!(r(&mut e, &["BRPOPLPUSH", "l", "m", "-1"]), "-ERR timeout is negative\r\n");
        assert_eq!(
            r(&mut e, &["BLMPOP", "x", "1", "l", "left"]),
            "-ERR timeout is not a float or out of range\r\n"
        );
        assert_eq!(
            r(&mut e, &["BLMPOP", "0", "0", "l", "left"]),
            "-ERR numkeys should be greater than 0\r\n"
        );
        assert_eq!(r(&mut e, &["BLMOVE", "l", "l", "up", "left", "x"]), SYNTAX);
        // Nothing to pop: parked with an absolute deadline (ceil of seconds * 1000), no reply,
        // no mutation.
        assert_eq!(
            run(&mut e, &["BLPOP", "l", "m", "1.5"]),
            (format!("BLOCKED Some({})", NOW + 1500), vec![])
        );
        assert_eq!(run(&mut e, &["BRPOP", "l", "0"]), ("BLOCKED None".into(), vec![]));
        assert_eq!(run(&mut e, &["BLPOP", "l", "-0.0001"]), ("BLOCKED None".into(), vec![]));
        assert_eq!(run(&mut e, &["BLPOP", "l", "0x1p3"]), (format!("BLOCKED Some({})", NOW + 8000), vec![]));
        assert_eq!(run(&mut e, &["BLPOP", "l", "0.0001"]), (format!("BLOCKED Some({})", NOW + 1), vec![]));
        assert_eq!(
            run(&mut e, &["BLMOVE", "l", "d", "left", "left", "2"]),
            (format!("BLOCKED Some({})", NOW + 2000), vec![])
        );
        assert_eq!(
            run(&mut e, &["BLMPOP", "1", "2", "a", "b", "left"]),
            (format!("BLOCKED Some({})", NOW + 1000), vec![])
        );
        // A push signals the key; the served pop replies [key, value] and emits the pop.
        r(&mut e, &["RPUSH", "m", "a", "b"]);
        assert!(e.ready_keys.contains(&(0, b"m".to_vec())));
        assert_eq!(
            run(&mut e, &["BLPOP", "l", "m", "0"]),
            ("*2\r\n$1\r\nm\r\n$1\r\na\r\n".into(), vec!["LPOP m".into()])
        );
        assert_eq!(
            run(&mut e, &["BRPOP", "m", "0"]),
            ("*2\r\n$1\r\nm\r\n$1\r\nb\r\n".into(), vec!["RPOP m".into()])
        );
        r(&mut e, &["RPUSH", "m", "a", "b"]);
        assert_eq!(
            run(&mut e, &["BLMOVE", "m", "d", "right", "left", "0"]),
            ("$1\r\nb\r\n".into(), vec!["LMOVE m d RIGHT LEFT".into()])
        );
        assert_eq!(
            run(&mut e, &["BRPOPLPUSH", "m", "d", "0"]),
            ("$1\r\na\r\n".into(), vec!["LMOVE m d RIGHT LEFT".into()])
        );
        assert_eq!(
            run(&mut e, &["BLMPOP", "0", "2", "m", "d", "left", "count", "1"]),
            ("*2\r\n$1\r\nd\r\n*1\r\n$1\r\na\r\n".into(), vec!["LPOP d 1".into()])
        );
        // A replica never parks.
        e.replaying = true;
        assert_eq!(run(&mut e, &["BLPOP", "zz", "0"]), ("*-1\r\n".into(), vec![]));
    }
}
