//! Set commands: SADD, SREM and the rest of the set family.
//!
//! Canonical mutations: one `SADD key member` per member added and one `SREM key member` per
//! member removed (SPOP's random picks become the SREMs of what it popped; SMOVE is an SREM
//! plus, when the member is new there, an SADD). The *STORE commands emit `DEL dst` if dst
//! existed, then one SADD per member of the result. A set emptied by removals is deleted here;
//! replaying the SREMs empties and deletes it the same way.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::commands::hll::Estimator;
use crate::commands::scan::{parse_cursor, parse_scan_opts, scan_loop, scan_reply};
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{eq_ic, glob_match, parse_card_limit, parse_i64};
use resp::reply;
use store::types::Set;
use store::{Keyspace, Value, ValueMut, ValueRef};

const R: u32 = Flags::READONLY;
const RF: u32 = Flags::READONLY | Flags::FAST;
const WF: u32 = Flags::WRITE | Flags::FAST;
const WM: u32 = Flags::WRITE | Flags::DENYOOM;
const WMF: u32 = Flags::WRITE | Flags::DENYOOM | Flags::FAST;
const K1: (i32, i32, i32) = (1, 1, 1);
const KALL: (i32, i32, i32) = (1, -1, 1);

const RANGE_ERR: &[u8] = errors::NOT_NEGATABLE;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec("sadd", -3, WMF, K1, "set", "Adds one or more members to a set. Creates the key if it doesn't exist.", Handler::Data(sadd)),
    spec("srem", -3, WF, K1, "set", "Removes one or more members from a set. Deletes the set if the last member was removed.", Handler::Data(srem)),
    spec("smembers", 2, R, K1, "set", "Returns all members of a set.", Handler::Data(smembers)),
    spec("sismember", 3, RF, K1, "set", "Determines whether a member belongs to a set.", Handler::Data(sismember)),
    spec("smismember", -3, RF, K1, "set", "Determines whether multiple members belong to a set.", Handler::Data(smismember)),
    spec("scard", 2, RF, K1, "set", "Returns the number of members in a set.", Handler::Data(scard)),
    spec("spop", -2, WF, K1, "set", "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped.", Handler::Data(spop)),
    spec("srandmember", -2, R, K1, "set", "Get one or multiple random members from a set", Handler::Data(srandmember)),
    spec("smove", 4, WF, (1, 2, 1), "set", "Moves a member from one set to another.", Handler::Data(smove)),
    spec("sinter", -2, R, KALL, "set", "Returns the intersect of multiple sets.", Handler::Data(sinter)),
    spec("sintercard", -3, R | Flags::MOVABLEKEYS, (0, 0, 0), "set", "Returns the number of members of the intersect of multiple sets.", Handler::Data(sintercard)),
    spec("sunioncard", -3, R | Flags::MOVABLEKEYS, (0, 0, 0), "set", "Returns the number of members of the union of multiple sets.", Handler::Data(sunioncard)),
    spec("sdiffcard", -3, R | Flags::MOVABLEKEYS, (0, 0, 0), "set", "Returns the number of members of the difference between the first set and all successive sets.", Handler::Data(sdiffcard)),
    spec("sinterstore", -3, WM, KALL, "set", "Stores the intersect of multiple sets in a key.", Handler::Data(sinterstore)),
    spec("sunion", -2, R, KALL, "set", "Returns the union of multiple sets.", Handler::Data(sunion)),
    spec("sunionstore", -3, WM, KALL, "set", "Stores the union of multiple sets in a key.", Handler::Data(sunionstore)),
    spec("sdiff", -2, R, KALL, "set", "Returns the difference of multiple sets.", Handler::Data(sdiff)),
    spec("sdiffstore", -3, WM, KALL, "set", "Stores the difference of multiple sets in a key.", Handler::Data(sdiffstore)),
    spec("sscan", -3, R, K1, "set", "Iterates over members of a set.", Handler::Data(sscan)),
];

/// Reads the set at `key`: Ok(None) if missing, Err after writing WRONGTYPE.
fn read<'c>(c: &'c mut Ctx, out: &mut Vec<u8>, key: &[u8]) -> Result<Option<&'c Set>, ()> {
    match c.read(key) {
        None => Ok(None),
        Some(ValueRef::Set(s)) => Ok(Some(s)),
        Some(_) => {
            reply::error(out, errors::WRONGTYPE);
            Err(())
        }
    }
}

/// Checks `key` for writing (lazy expiry first): Ok(true) if a set is there, Ok(false) if the
/// key is missing, Err after writing WRONGTYPE.
fn check_write(c: &mut Ctx, out: &mut Vec<u8>, key: &[u8]) -> Result<bool, ()> {
    match c.write(key) {
        None => Ok(false),
        Some(ValueMut::Set(_)) => Ok(true),
        Some(_) => {
            reply::error(out, errors::WRONGTYPE);
            Err(())
        }
    }
}

fn set_mut<'k>(ks: &'k mut Keyspace, key: &[u8]) -> &'k mut Set {
    match ks.get_mut(key) {
        Some(ValueMut::Set(s)) => s,
        _ => unreachable!("the caller checked that a set is there"),
    }
}

fn set_ref<'k>(ks: &'k Keyspace, key: &[u8]) -> Option<&'k Set> {
    match ks.get(key) {
        Some(ValueRef::Set(s)) => Some(s),
        _ => None,
    }
}

/// SADD key member [member ...]
fn sadd(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let Ok(exists) = check_write(c, out, key) else { return };
    if !exists {
        c.ks.insert(key, Value::Set(Box::new(Set::new())), None);
    }
    let s = set_mut(c.ks, key);
    let added: Vec<&[u8]> = args[2..].iter().copied().filter(|m| s.add(m)).collect();
    for m in &added {
        c.emit(&[b"SADD", key, m]);
    }
    reply::integer(out, added.len() as i64);
}

/// SREM key member [member ...]
fn srem(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    match check_write(c, out, key) {
        Err(()) => return,
        Ok(false) => return reply::integer(out, 0),
        Ok(true) => {}
    }
    let s = set_mut(c.ks, key);
    let removed: Vec<&[u8]> = args[2..].iter().copied().filter(|m| s.remove(m)).collect();
    if s.is_empty() {
        c.ks.delete(key);
    }
    for m in &removed {
        c.emit(&[b"SREM", key, m]);
    }
    reply::integer(out, removed.len() as i64);
}

/// SMEMBERS key
fn smembers(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let proto = c.proto;
    let Ok(s) = read(c, out, args[1]) else { return };
    // A set in RESP3 (`~`), as Redis answers SMEMBERS.
    let Some(s) = s else { return reply::set_len(out, proto, 0) };
    reply::set_len(out, proto, s.len());
    s.for_each(|m| reply::bulk(out, m));
}

/// SISMEMBER key member
fn sismember(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if let Ok(s) = read(c, out, args[1]) {
        reply::integer(out, s.is_some_and(|s| s.contains(args[2])) as i64);
    }
}

/// SMISMEMBER key member [member ...]
fn smismember(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Ok(s) = read(c, out, args[1]) else { return };
    reply::array_len(out, args.len() - 2);
    for m in &args[2..] {
        reply::integer(out, s.is_some_and(|s| s.contains(m)) as i64);
    }
}

/// SCARD key
fn scard(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if let Ok(s) = read(c, out, args[1]) {
        reply::integer(out, s.map_or(0, |s| s.len()) as i64);
    }
}

/// SPOP key [count]
fn spop(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    if args.len() > 3 {
        return reply::error(out, errors::SYNTAX);
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => match parse_i64(a) {
            Some(n) if n >= 0 => Some(n as usize),
            _ => return reply::error(out, b"ERR value is out of range, must be positive"),
        },
    };
    match check_write(c, out, key) {
        Err(()) => return,
        // With a count the reply is a set (`~` in RESP3), as in Redis.
        Ok(false) if count.is_some() => return reply::set_len(out, c.proto, 0),
        Ok(false) => return reply::null_bulk(out, c.proto),
        Ok(true) => {}
    }
    let s = set_mut(c.ks, key);
    let popped: Vec<Vec<u8>> = match count {
        // Everything goes: no need to draw.
        Some(n) if n >= s.len() => {
            let all = s.members();
            c.ks.delete(key);
            all
        }
        _ => {
            let n = count.unwrap_or(1);
            let mut v = Vec::with_capacity(n);
            while v.len() < n {
                let m = s.random(c.rng).expect("non-empty set");
                s.remove(&m);
                v.push(m);
            }
            if s.is_empty() {
                c.ks.delete(key);
            }
            v
        }
    };
    for m in &popped {
        c.emit(&[b"SREM", key, m]);
    }
    match count {
        None => reply::bulk(out, &popped[0]),
        Some(_) => {
            reply::set_len(out, c.proto, popped.len());
            popped.iter().for_each(|m| reply::bulk(out, m));
        }
    }
}

/// SRANDMEMBER key [count]
fn srandmember(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    if args.len() > 3 {
        return reply::error(out, errors::SYNTAX);
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => match parse_i64(a) {
            Some(i64::MIN) => return reply::error(out, RANGE_ERR),
            Some(n) => Some(n),
            None => return reply::error(out, errors::NOT_INTEGER),
        },
    };
    let Ok(s) = read(c, out, key) else { return };
    let Some(count) = count else {
        return match s {
            None => reply::null_bulk(out, c.proto),
            Some(_) => {
                let s = set_ref(c.ks, key).expect("read it above");
                reply::bulk(out, &s.random(c.rng).expect("non-empty set"))
            }
        };
    };
    if s.is_none() || count == 0 {
        return reply::array_len(out, 0);
    }
    // Redis builds any repeated-picks reply, and dies of huge ones: see MAX_REPEATED_PICKS.
    if count < 0 && count.unsigned_abs() > errors::MAX_REPEATED_PICKS {
        return reply::error(out, errors::VALUE_OUT_OF_RANGE);
    }
    let s = set_ref(c.ks, key).expect("read it above");
    if count < 0 {
        // Repetitions allowed: independent uniform picks.
        let n = count.unsigned_abs() as usize;
        reply::array_len(out, n);
        for _ in 0..n {
            reply::bulk(out, &s.random(c.rng).expect("non-empty set"));
        }
        return;
    }
    let n = count as usize;
    if n >= s.len() {
        reply::array_len(out, s.len());
        s.for_each(|m| reply::bulk(out, m));
        return;
    }
    reply::array_len(out, n);
    if n * 3 > s.len() {
        // Many of the members: choose which ones by index, in one pass.
        let mut picked = rand::seq::index::sample(c.rng, s.len(), n).into_vec();
        picked.sort_unstable();
        let mut next = picked.into_iter().peekable();
        let mut i = 0;
        s.for_each(|m| {
            if next.peek() == Some(&i) {
                next.next();
                reply::bulk(out, m);
            }
            i += 1;
        });
    } else {
        // Few of many: random picks, skipping repeats.
        let mut seen = std::collections::HashSet::with_capacity(n);
        while seen.len() < n {
            let m = s.random(c.rng).expect("non-empty set");
            if !seen.contains(&m) {
                reply::bulk(out, &m);
                seen.insert(m);
            }
        }
    }
}

/// SMOVE source destination member
fn smove(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (src, dst, m) = (args[1], args[2], args[3]);
    let Ok(src_exists) = check_write(c, out, src) else { return };
    if !src_exists {
        // Redis answers 0 before looking at the destination's type.
        return reply::integer(out, 0);
    }
    let Ok(dst_exists) = check_write(c, out, dst) else { return };
    if src == dst {
        let s = set_mut(c.ks, src);
        return reply::integer(out, s.contains(m) as i64);
    }
    let s = set_mut(c.ks, src);
    if !s.remove(m) {
        return reply::integer(out, 0);
    }
    if s.is_empty() {
        c.ks.delete(src);
    }
    if !dst_exists {
        c.ks.insert(dst, Value::Set(Box::new(Set::new())), None);
    }
    let added = set_mut(c.ks, dst).add(m);
    c.emit(&[b"SREM", src, m]);
    if added {
        c.emit(&[b"SADD", dst, m]);
    }
    reply::integer(out, 1);
}

/// Looks every key up (lazy expiry, hit/miss counts, type check) as Redis's multi-key set
/// commands do: a missing key is an empty set, any other type is WRONGTYPE (after all keys
/// before it were looked up). Returns which keys hold a set.
fn lookup_all(c: &mut Ctx, out: &mut Vec<u8>, keys: &[&[u8]]) -> Result<Vec<bool>, ()> {
    keys.iter().map(|k| read(c, out, k).map(|s| s.is_some())).collect()
}

/// The members common to every key (all must hold sets), iterating the smallest set; stops
/// after `limit` members when one is given.
fn intersect(ks: &Keyspace, keys: &[&[u8]], limit: Option<usize>, mut f: impl FnMut(&[u8])) {
    let mut sets: Vec<&Set> = keys.iter().map(|k| set_ref(ks, k).expect("looked up")).collect();
    sets.sort_by_key(|s| s.len());
    let (first, rest) = sets.split_first().expect("at least one key");
    let mut n = 0;
    first.for_each(|m| {
        if limit.is_some_and(|l| n >= l) {
            return;
        }
        if rest.iter().all(|s| s.contains(m)) {
            n += 1;
            f(m);
        }
    });
}

/// Which set operation a *STORE / plain command computes.
#[derive(Clone, Copy, PartialEq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// Computes `op` over `keys` into a new set (its encoding follows the usual rules, so integer
/// results come back sorted as Redis's intset does). Err after writing WRONGTYPE.
fn compute(c: &mut Ctx, out: &mut Vec<u8>, op: Op, keys: &[&[u8]]) -> Result<Set, ()> {
    let present = lookup_all(c, out, keys)?;
    let mut result = Set::new();
    let ks: &Keyspace = c.ks;
    match op {
        Op::Inter if present.iter().all(|&p| p) => intersect(ks, keys, None, |m| {
            result.add(m);
        }),
        Op::Inter => {}
        Op::Union => {
            for k in keys.iter().zip(&present).filter(|(_, &p)| p).map(|(k, _)| k) {
                set_ref(ks, k).expect("looked up").for_each(|m| {
                    result.add(m);
                });
            }
        }
        Op::Diff if present[0] => {
            let others: Vec<&Set> = keys[1..]
                .iter()
                .zip(&present[1..])
                .filter(|(_, &p)| p)
                .map(|(k, _)| set_ref(ks, k).expect("looked up"))
                .collect();
            set_ref(ks, keys[0]).expect("looked up").for_each(|m| {
                if !others.iter().any(|o| o.contains(m)) {
                    result.add(m);
                }
            });
        }
        Op::Diff => {}
    }
    Ok(result)
}

/// SINTER / SUNION / SDIFF: reply with the members of the result, a set (`~` in RESP3).
fn reply_op(c: &mut Ctx, out: &mut Vec<u8>, op: Op, keys: &[&[u8]]) {
    if op == Op::Inter {
        // Stream the intersection straight from the smallest set, without building a set.
        let Ok(present) = lookup_all(c, out, keys) else { return };
        if !present.iter().all(|&p| p) {
            return reply::set_len(out, c.proto, 0);
        }
        let marker = reply::deferred_array_len(out);
        let mut n = 0;
        intersect(c.ks, keys, None, |m| {
            n += 1;
            reply::bulk(out, m);
        });
        return reply::finish_deferred_set_len(out, marker, c.proto, n);
    }
    let Ok(result) = compute(c, out, op, keys) else { return };
    reply::set_len(out, c.proto, result.len());
    result.for_each(|m| reply::bulk(out, m));
}

/// SINTERSTORE / SUNIONSTORE / SDIFFSTORE destination key [key ...]
fn store_op(c: &mut Ctx, out: &mut Vec<u8>, op: Op, args: &[&[u8]]) {
    let dst = args[1];
    let Ok(result) = compute(c, out, op, &args[2..]) else { return };
    // The destination is overwritten whatever it held (and loses any TTL).
    let existed = c.exists(dst);
    let n = result.len();
    if n == 0 {
        if existed {
            c.ks.delete(dst);
            c.emit(&[b"DEL", dst]);
        }
        return reply::integer(out, 0);
    }
    let members = result.members();
    c.ks.insert(dst, Value::Set(Box::new(result)), None);
    if existed {
        c.emit(&[b"DEL", dst]);
    }
    for m in &members {
        c.emit(&[b"SADD", dst, m]);
    }
    reply::integer(out, n as i64);
}

/// SINTER key [key ...]
fn sinter(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    reply_op(c, out, Op::Inter, &args[1..])
}

/// SUNION key [key ...]
fn sunion(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    reply_op(c, out, Op::Union, &args[1..])
}

/// SDIFF key [key ...]
fn sdiff(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    reply_op(c, out, Op::Diff, &args[1..])
}

/// SINTERSTORE destination key [key ...]
fn sinterstore(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    store_op(c, out, Op::Inter, args)
}

/// SUNIONSTORE destination key [key ...]
fn sunionstore(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    store_op(c, out, Op::Union, args)
}

/// SDIFFSTORE destination key [key ...]
fn sdiffstore(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    store_op(c, out, Op::Diff, args)
}

/// Argument slices: the keys of a *CARD command, and the arguments after them.
type Args<'a> = &'a [&'a [u8]];

/// The `numkeys key [key ...]` of the *CARD commands: the keys, and the arguments after them.
fn card_keys<'a>(out: &mut Vec<u8>, args: Args<'a>) -> Option<(Args<'a>, Args<'a>)> {
    let numkeys = match parse_i64(args[1]) {
        Some(n) if n >= 1 => n as usize,
        _ => {
            reply::error(out, b"ERR numkeys should be greater than 0");
            return None;
        }
    };
    if numkeys > args.len() - 2 {
        reply::error(out, b"ERR Number of keys can't be greater than number of args");
        return None;
    }
    Some((&args[2..2 + numkeys], &args[2 + numkeys..]))
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]
fn sintercard(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some((keys, opts)) = card_keys(out, args) else { return };
    let Some(limit) = parse_card_limit(out, opts) else { return };
    let Ok(present) = lookup_all(c, out, keys) else { return };
    if !present.iter().all(|&p| p) {
        return reply::integer(out, 0);
    }
    let mut n = 0;
    intersect(c.ks, keys, (limit > 0).then_some(limit), |_| n += 1);
    reply::integer(out, n);
}

/// SUNIONCARD numkeys key [key ...] [APPROX] [LIMIT limit] (Redis 8.10). Exact: a member of
/// the j-th set counts unless an earlier set holds it, so no union is built. APPROX feeds every
/// member to a HyperLogLog instead (fixed memory, about 0.81% standard error). A LIMIT caps
/// the answer and ends the count early once it is reached.
fn sunioncard(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some((keys, opts)) = card_keys(out, args) else { return };
    // APPROX and LIMIT in any order, each as often as given (the last LIMIT counts), as
    // SINTERCARD takes its LIMIT.
    let mut approx = false;
    let mut rest: Vec<&[u8]> = Vec::with_capacity(opts.len());
    let mut j = 0;
    while j < opts.len() {
        if eq_ic(opts[j], b"approx") {
            approx = true;
            j += 1;
        } else {
            rest.push(opts[j]);
            if eq_ic(opts[j], b"limit") && j + 1 < opts.len() {
                rest.push(opts[j + 1]);
                j += 1;
            }
            j += 1;
        }
    }
    let Some(limit) = parse_card_limit(out, &rest) else { return };
    let Ok(present) = lookup_all(c, out, keys) else { return };
    let sets: Vec<&Set> = keys
        .iter()
        .zip(&present)
        .filter(|(_, &p)| p)
        .map(|(k, _)| set_ref(c.ks, k).expect("looked up"))
        .collect();
    let limit = if limit == 0 { u64::MAX } else { limit as u64 };
    if approx {
        let mut hll = Estimator::new();
        let mut added = 0u64;
        let mut reached = false;
        for s in &sets {
            s.for_each(|m| {
                if reached {
                    return;
                }
                hll.add(m);
                added += 1;
                // The estimate costs a pass over the registers: look every 4096 members.
                if added.is_multiple_of(4096) && hll.count() >= limit {
                    reached = true;
                }
            });
        }
        return reply::integer(out, hll.count().min(limit) as i64);
    }
    let mut n = 0u64;
    for (j, s) in sets.iter().enumerate() {
        s.for_each(|m| {
            if n < limit && !sets[..j].iter().any(|earlier| earlier.contains(m)) {
                n += 1;
            }
        });
    }
    reply::integer(out, n as i64);
}

/// SDIFFCARD numkeys key [key ...] [LIMIT limit] (Redis 8.10): the members of the first set
/// that no other set holds, counted without building the difference.
fn sdiffcard(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some((keys, opts)) = card_keys(out, args) else { return };
    let Some(limit) = parse_card_limit(out, opts) else { return };
    let Ok(present) = lookup_all(c, out, keys) else { return };
    if !present[0] {
        return reply::integer(out, 0);
    }
    let others: Vec<&Set> = keys[1..]
        .iter()
        .zip(&present[1..])
        .filter(|(_, &p)| p)
        .map(|(k, _)| set_ref(c.ks, k).expect("looked up"))
        .collect();
    let limit = if limit == 0 { usize::MAX } else { limit };
    let mut n = 0usize;
    set_ref(c.ks, keys[0]).expect("looked up").for_each(|m| {
        if n < limit && !others.iter().any(|o| o.contains(m)) {
            n += 1;
        }
    });
    reply::integer(out, n as i64);
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]
fn sscan(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(cursor) = parse_cursor(out, args[2]) else { return };
    let Ok(s) = read(c, out, args[1]) else { return };
    let Some(s) = s else { return scan_reply(out, 0, &[]) };
    let Some(o) = parse_scan_opts(out, &args[3..], false) else { return };
    let mut items: Vec<Vec<u8>> = Vec::new();
    let next = scan_loop(cursor, o.count, |cur, count| {
        let mut n = 0;
        let next = s.scan(cur, count, |m| {
            if o.pattern.is_none_or(|p| glob_match(p, m, false)) {
                items.push(m.to_vec());
                n += 1;
            }
        });
        (next, n)
    });
    let refs: Vec<&[u8]> = items.iter().map(|m| m.as_slice()).collect();
    scan_reply(out, next, &refs);
}

#[cfg(test)]
mod tests {
    use crate::Engine;

    fn run(e: &mut Engine, cmd: &str) -> String {
        crate::testing::reply(e, 1_000, &cmd.split(' ').collect::<Vec<_>>())
    }

    use crate::testing::take_muts as muts;

    /// The bulk strings of a flat array reply, sorted (for replies in hash order).
    fn sorted(rep: &str) -> Vec<String> {
        let mut v: Vec<String> = rep
            .split("\r\n")
            .skip(1)
            .skip(1)
            .step_by(2)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        v.sort();
        v
    }

    const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

    #[test]
    fn basics() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, "SADD s 3 1 2 1"), ":3\r\n");
        assert_eq!(muts(&mut e), ["SADD s 3", "SADD s 1", "SADD s 2"]);
        assert_eq!(
            run(&mut e, "SMEMBERS s"),
            "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n",
            "intsets are sorted"
        );
        assert_eq!(run(&mut e, "SADD s 2"), ":0\r\n");
        assert!(muts(&mut e).is_empty(), "a no-op emits nothing");
        assert_eq!(run(&mut e, "SISMEMBER s 2"), ":1\r\n");
        assert_eq!(run(&mut e, "SISMEMBER s 02"), ":0\r\n");
        assert_eq!(run(&mut e, "SISMEMBER nokey 2"), ":0\r\n");
        assert_eq!(run(&mut e, "SMISMEMBER s 1 9 3"), "*3\r\n:1\r\n:0\r\n:1\r\n");
        assert_eq!(run(&mut e, "SMISMEMBER nokey a b"), "*2\r\n:0\r\n:0\r\n");
        assert_eq!(
            run(&mut e, "SMISMEMBER s"),
            "-ERR wrong number of arguments for 'smismember' command\r\n"
        );
        assert_eq!(run(&mut e, "SCARD s"), ":3\r\n");
        assert_eq!(run(&mut e, "SCARD nokey"), ":0\r\n");
        assert_eq!(run(&mut e, "SMEMBERS nokey"), "*0\r\n");
        assert_eq!(run(&mut e, "SREM s 1 1 9"), ":1\r\n");
        assert_eq!(muts(&mut e), ["SREM s 1"]);
        assert_eq!(run(&mut e, "SREM nokey 1"), ":0\r\n");
        assert_eq!(run(&mut e, "SREM s"), "-ERR wrong number of arguments for 'srem' command\r\n");
        assert_eq!(run(&mut e, "SREM s 2 3"), ":2\r\n");
        assert!(!e.ks.contains(b"s"), "an emptied set is deleted");
        assert_eq!(run(&mut e, "SADD t a b"), ":2\r\n");
        assert_eq!(sorted(&run(&mut e, "SMEMBERS t")), ["a", "b"]);
    }

    #[test]
    fn wrong_type_everywhere() {
        let mut e = Engine::default();
        e.ks.insert(b"str", store::Value::Str(b"x".to_vec()), None);
        run(&mut e, "SADD s a b c");
        muts(&mut e);
        for cmd in [
            "SADD str a",
            "SREM str a",
            "SMEMBERS str",
            "SISMEMBER str a",
            "SMISMEMBER str a",
            "SCARD str",
            "SPOP str",
            "SPOP str 0",
            "SRANDMEMBER str",
            "SRANDMEMBER str 2",
            "SMOVE str s a",
            "SMOVE s str a",
            "SINTER s str",
            "SINTER nokey str",
            "SINTERCARD 2 nokey str",
            "SINTERSTORE d s str",
            "SUNION s str",
            "SUNIONSTORE d s str",
            "SDIFF nokey str",
            "SDIFFSTORE d s str",
            "SSCAN str 0",
        ] {
            assert_eq!(run(&mut e, cmd), WRONGTYPE, "{cmd}");
        }
        assert_eq!(run(&mut e, "SMOVE nokey str a"), ":0\r\n", "a missing source answers 0 first");
        assert!(muts(&mut e).is_empty());
        assert!(!e.ks.contains(b"d"));
    }

    #[test]
    fn pop_and_random() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, "SPOP nokey"), "$-1\r\n");
        assert_eq!(run(&mut e, "SPOP nokey 2"), "*0\r\n");
        assert_eq!(run(&mut e, "SRANDMEMBER nokey"), "$-1\r\n");
        assert_eq!(run(&mut e, "SRANDMEMBER nokey 3"), "*0\r\n");
        run(&mut e, "SADD s a b c d e");
        muts(&mut e);
        assert_eq!(run(&mut e, "SPOP s -1"), "-ERR value is out of range, must be positive\r\n");
        assert_eq!(run(&mut e, "SPOP s abc"), "-ERR value is out of range, must be positive\r\n");
        assert_eq!(run(&mut e, "SPOP s 1 2"), "-ERR syntax error\r\n");
        assert_eq!(run(&mut e, "SPOP s 0"), "*0\r\n");
        assert_eq!(run(&mut e, "SRANDMEMBER s 1 2"), "-ERR syntax error\r\n");
        assert_eq!(run(&mut e, "SRANDMEMBER s abc"), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(
            run(&mut e, "SRANDMEMBER s -9223372036854775808"),
            "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"
        );
        assert_eq!(run(&mut e, "SRANDMEMBER s 0"), "*0\r\n");
        assert!(muts(&mut e).is_empty());
        assert_eq!(sorted(&run(&mut e, "SRANDMEMBER s 9")), ["a", "b", "c", "d", "e"]);
        let rep = run(&mut e, "SRANDMEMBER s -8");
        assert!(rep.starts_with("*8\r\n") && rep.matches("$1\r\n").count() == 8, "{rep}");
        for _ in 0..20 {
            let mut got = sorted(&run(&mut e, "SRANDMEMBER s 3"));
            got.dedup();
            assert_eq!(got.len(), 3);
        }
        assert!(muts(&mut e).is_empty(), "reads emit nothing");
        let one = run(&mut e, "SPOP s");
        let m = one.split("\r\n").nth(1).unwrap().to_string();
        assert_eq!(muts(&mut e), [format!("SREM s {m}")]);
        assert_eq!(run(&mut e, &format!("SISMEMBER s {m}")), ":0\r\n");
        let two = sorted(&run(&mut e, "SPOP s 2"));
        let mut popped: Vec<String> =
            muts(&mut e).iter().map(|m| m.trim_start_matches("SREM s ").to_string()).collect();
        popped.sort();
        assert_eq!(two, popped);
        assert_eq!(run(&mut e, "SCARD s"), ":2\r\n");
        assert_eq!(run(&mut e, "SPOP s 5").matches("$1\r\n").count(), 2);
        assert_eq!(muts(&mut e).len(), 2);
        assert!(!e.ks.contains(b"s"));
    }

    #[test]
    fn moving() {
        let mut e = Engine::default();
        run(&mut e, "SADD a x y");
        run(&mut e, "SADD b y");
        muts(&mut e);
        assert_eq!(run(&mut e, "SMOVE a b zz"), ":0\r\n");
        assert_eq!(run(&mut e, "SMOVE a a x"), ":1\r\n");
        assert_eq!(run(&mut e, "SMOVE a a zz"), ":0\r\n");
        assert!(muts(&mut e).is_empty());
        assert_eq!(run(&mut e, "SMOVE a b x"), ":1\r\n");
        assert_eq!(muts(&mut e), ["SREM a x", "SADD b x"]);
        assert_eq!(run(&mut e, "SMOVE a b y"), ":1\r\n");
        assert_eq!(muts(&mut e), ["SREM a y"], "y was already in b");
        assert!(!e.ks.contains(b"a"));
        assert_eq!(run(&mut e, "SMOVE b c x"), ":1\r\n");
        assert_eq!(run(&mut e, "SMEMBERS c"), "*1\r\n$1\r\nx\r\n");
    }

    #[test]
    fn algebra() {
        let mut e = Engine::default();
        run(&mut e, "SADD a 1 2 3 4");
        run(&mut e, "SADD b 3 4 5");
        run(&mut e, "SADD c x 4 3");
        muts(&mut e);
        assert_eq!(run(&mut e, "SINTER a b"), "*2\r\n$1\r\n3\r\n$1\r\n4\r\n");
        assert_eq!(sorted(&run(&mut e, "SINTER a b c")), ["3", "4"]);
        assert_eq!(run(&mut e, "SINTER a nokey"), "*0\r\n");
        assert_eq!(
            run(&mut e, "SUNION a b"),
            "*5\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n$1\r\n5\r\n"
        );
        assert_eq!(sorted(&run(&mut e, "SUNION c nokey")), ["3", "4", "x"]);
        assert_eq!(run(&mut e, "SDIFF a b"), "*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
        assert_eq!(run(&mut e, "SDIFF a a"), "*0\r\n");
        assert_eq!(run(&mut e, "SDIFF nokey a"), "*0\r\n");
        assert_eq!(run(&mut e, "SDIFF a nokey c"), "*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
        assert!(muts(&mut e).is_empty());

        assert_eq!(run(&mut e, "SINTERSTORE d a b"), ":2\r\n");
        assert_eq!(muts(&mut e), ["SADD d 3", "SADD d 4"]);
        assert_eq!(run(&mut e, "SUNIONSTORE d d c"), ":3\r\n");
        assert_eq!(sorted(&run(&mut e, "SMEMBERS d")), ["3", "4", "x"]);
        let m = muts(&mut e);
        assert_eq!(m[0], "DEL d");
        assert_eq!(m.len(), 4);
        assert_eq!(run(&mut e, "SDIFFSTORE d a b c"), ":2\r\n");
        assert_eq!(muts(&mut e), ["DEL d", "SADD d 1", "SADD d 2"]);
        assert_eq!(run(&mut e, "SINTERSTORE d a nokey"), ":0\r\n");
        assert_eq!(muts(&mut e), ["DEL d"]);
        assert!(!e.ks.contains(b"d"));
        assert_eq!(run(&mut e, "SINTERSTORE d a nokey"), ":0\r\n");
        assert!(muts(&mut e).is_empty(), "nothing to delete, nothing emitted");
        e.ks.insert(b"str", store::Value::Str(b"x".to_vec()), None);
        assert_eq!(run(&mut e, "SUNIONSTORE str a"), ":4\r\n", "any destination type is overwritten");
        assert_eq!(run(&mut e, "SCARD str"), ":4\r\n");
    }

    #[test]
    fn intercard() {
        let mut e = Engine::default();
        run(&mut e, "SADD a 1 2 3 4");
        run(&mut e, "SADD b 2 3 4 5");
        e.ks.insert(b"str", store::Value::Str(b"x".to_vec()), None);
        assert_eq!(run(&mut e, "SINTERCARD 2 a b"), ":3\r\n");
        assert_eq!(run(&mut e, "SINTERCARD 2 a b LIMIT 2"), ":2\r\n");
        assert_eq!(run(&mut e, "SINTERCARD 2 a b LIMIT 0"), ":3\r\n");
        assert_eq!(run(&mut e, "SINTERCARD 1 a LIMIT 1 limit 9"), ":4\r\n");
        assert_eq!(run(&mut e, "SINTERCARD 2 a nokey"), ":0\r\n");
        assert_eq!(run(&mut e, "SINTERCARD 0 a"), "-ERR numkeys should be greater than 0\r\n");
        assert_eq!(run(&mut e, "SINTERCARD -1 a"), "-ERR numkeys should be greater than 0\r\n");
        assert_eq!(run(&mut e, "SINTERCARD abc a"), "-ERR numkeys should be greater than 0\r\n");
        assert_eq!(
            run(&mut e, "SINTERCARD 3 a b"),
            "-ERR Number of keys can't be greater than number of args\r\n"
        );
        assert_eq!(run(&mut e, "SINTERCARD 1 a LIMIT -1"), "-ERR LIMIT can't be negative\r\n");
        assert_eq!(run(&mut e, "SINTERCARD 1 a LIMIT abc"), "-ERR LIMIT can't be negative\r\n");
        assert_eq!(
            run(&mut e, "SINTERCARD 1 a LIMIT 9223372036854775808"),
            "-ERR LIMIT can't be negative\r\n"
        );
        assert_eq!(run(&mut e, "SINTERCARD 1 a LIMIT"), "-ERR syntax error\r\n");
        assert_eq!(run(&mut e, "SINTERCARD 1 a foo 1"), "-ERR syntax error\r\n");
        assert_eq!(run(&mut e, "SINTERCARD 2 a str"), WRONGTYPE);
    }

    #[test]
    fn union_and_difference_cardinality() {
        let mut e = Engine::default();
        run(&mut e, "SADD a 1 2 3 x");
        run(&mut e, "SADD b 3 4 x y");
        run(&mut e, "SADD c 4 5");
        run(&mut e, "SET str v");
        assert_eq!(run(&mut e, "SUNIONCARD 2 a b"), ":6\r\n");
        assert_eq!(run(&mut e, "SUNIONCARD 4 a b c nokey"), ":7\r\n");
        assert_eq!(run(&mut e, "SUNIONCARD 2 a a"), ":4\r\n");
        assert_eq!(run(&mut e, "SUNIONCARD 2 a b LIMIT 3"), ":3\r\n");
        assert_eq!(run(&mut e, "SUNIONCARD 2 a b LIMIT 0"), ":6\r\n");
        assert_eq!(run(&mut e, "SUNIONCARD 2 a b LIMIT 9 limit 5"), ":5\r\n");
        assert_eq!(run(&mut e, "SUNIONCARD 1 nokey"), ":0\r\n");
        assert_eq!(run(&mut e, "SDIFFCARD 2 a b"), ":2\r\n");
        assert_eq!(run(&mut e, "SDIFFCARD 3 b a c"), ":1\r\n");
        assert_eq!(run(&mut e, "SDIFFCARD 1 a LIMIT 2"), ":2\r\n");
        assert_eq!(run(&mut e, "SDIFFCARD 2 nokey a"), ":0\r\n");
        assert_eq!(run(&mut e, "SDIFFCARD 2 a nokey"), ":4\r\n");
        // Small sets: the estimate is exact.
        assert_eq!(run(&mut e, "SUNIONCARD 2 a b APPROX"), ":6\r\n");
        assert_eq!(run(&mut e, "SUNIONCARD 2 a b LIMIT 2 APPROX"), ":2\r\n");
        assert_eq!(run(&mut e, "SDIFFCARD 2 a b APPROX"), "-ERR syntax error\r\n");
        for cmd in ["SUNIONCARD", "SDIFFCARD"] {
            assert_eq!(run(&mut e, &format!("{cmd} 0 a")), "-ERR numkeys should be greater than 0\r\n");
            assert_eq!(
                run(&mut e, &format!("{cmd} 3 a b")),
                "-ERR Number of keys can't be greater than number of args\r\n"
            );
            assert_eq!(run(&mut e, &format!("{cmd} 1 a LIMIT -1")), "-ERR LIMIT can't be negative\r\n");
            assert_eq!(run(&mut e, &format!("{cmd} 1 a LIMIT")), "-ERR syntax error\r\n");
            assert_eq!(run(&mut e, &format!("{cmd} 2 a str")), WRONGTYPE);
            assert_eq!(run(&mut e, &format!("{cmd} 2 str a")), WRONGTYPE);
        }
        // A large union: APPROX within a few percent (HyperLogLog's standard error is 0.81%),
        // exact without it.
        let members: Vec<String> = (0..20_000).map(|i| i.to_string()).collect();
        for chunk in members.chunks(1000) {
            run(&mut e, &format!("SADD big1 {}", chunk.join(" ")));
        }
        let members: Vec<String> = (10_000..30_000).map(|i| format!("m{i}")).collect();
        for chunk in members.chunks(1000) {
            run(&mut e, &format!("SADD big2 {}", chunk.join(" ")));
        }
        assert_eq!(run(&mut e, "SUNIONCARD 2 big1 big2"), ":40000\r\n");
        let approx: i64 = run(&mut e, "SUNIONCARD 2 big1 big2 APPROX").trim()[1..].parse().unwrap();
        assert!((approx - 40_000).abs() < 40_000 / 20, "{approx}");
        assert_eq!(run(&mut e, "SUNIONCARD 2 big1 big2 APPROX LIMIT 10000"), ":10000\r\n");
    }

    #[test]
    fn scanning() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, "SSCAN nokey 0"), "*2\r\n$1\r\n0\r\n*0\r\n");
        run(&mut e, "SADD s a b ab");
        assert_eq!(run(&mut e, "SSCAN s x"), "-ERR invalid cursor\r\n");
        assert_eq!(run(&mut e, "SSCAN s 0 NOVALUES"), "-ERR syntax error\r\n");
        assert_eq!(run(&mut e, "SSCAN s 0 MATCH"), "-ERR syntax error\r\n");
        assert_eq!(run(&mut e, "SSCAN s 0 COUNT 0"), "-ERR syntax error\r\n");
        assert_eq!(run(&mut e, "SSCAN s 0 MATCH a*"), "*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$2\r\nab\r\n");
        run(&mut e, "SADD i 5 3");
        assert_eq!(run(&mut e, "SSCAN i 0"), "*2\r\n$1\r\n0\r\n*2\r\n$1\r\n3\r\n$1\r\n5\r\n");
        for i in 0..2000 {
            run(&mut e, &format!("SADD big m{i}"));
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = "0".to_string();
        let mut calls = 0;
        loop {
            let rep = run(&mut e, &format!("SSCAN big {cursor}"));
            let lines: Vec<&str> = rep.split("\r\n").collect();
            cursor = lines[2].to_string();
            seen.extend(lines.iter().filter(|l| l.starts_with('m')).map(|l| l.to_string()));
            // Churn: add and remove other members between calls.
            run(&mut e, &format!("SADD big n{calls}"));
            run(&mut e, &format!("SREM big n{}", calls / 2));
            calls += 1;
            if cursor == "0" {
                break;
            }
        }
        assert!(calls > 10);
        assert!((0..2000).all(|i| seen.contains(&format!("m{i}"))));
    }
}
