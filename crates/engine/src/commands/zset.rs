//! Sorted-set commands: ZADD, the range family, pops (blocking ones included), the set algebra
//! (ZUNION/ZINTER/ZDIFF and their STORE forms), ZRANDMEMBER and ZSCAN.
//!
//! Canonical mutations: every element that gains or changes a score emits `ZADD key score
//! member` with the stored score (printed with round-trip precision); every removed element
//! emits `ZREM key member`. Destination writers emit `DEL dst` (if it existed) and then one
//! `ZADD` per stored element, in ascending order, so a replica rebuilds the same data and
//! encoding (replicas store the emitted scores bit for bit: see `ZSet::insert_exact`).
//! Random and blocking pops emit the `ZREM`s of what they took. Reads emit nothing.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::commands::scan::{parse_cursor, parse_scan_opts, scan_reply, ScanOpts};
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{
    self, eq_ic, format_f64, glob_match, parse_card_limit, parse_f64, parse_i64, parse_timeout, MpopArgs,
};
use rand::Rng;
use resp::{reply, Proto};
use std::collections::HashMap;
use store::types::ZSet;
use store::{Millis, Plain, Value, ValueMut, ValueRef};

const R: u32 = Flags::READONLY;
const RF: u32 = Flags::READONLY | Flags::FAST;
const W: u32 = Flags::WRITE;
const WF: u32 = Flags::WRITE | Flags::FAST;
const WD: u32 = Flags::WRITE | Flags::DENYOOM;
const WDF: u32 = Flags::WRITE | Flags::DENYOOM | Flags::FAST;
const WB: u32 = Flags::WRITE | Flags::BLOCKING;
const MK: u32 = Flags::MOVABLEKEYS;

const G: &str = "sorted_set";

pub static COMMANDS: &[CommandSpec] = &[
    spec("zadd", -4, WDF, (1, 1, 1), G, "Adds one or more members to a sorted set, or updates their scores.", Handler::Data(zadd)),
    spec("zincrby", 4, WDF, (1, 1, 1), G, "Increments the score of a member in a sorted set.", Handler::Data(zincrby)),
    spec("zrem", -3, WF, (1, 1, 1), G, "Removes one or more members from a sorted set.", Handler::Data(zrem)),
    spec("zscore", 3, RF, (1, 1, 1), G, "Returns the score of a member in a sorted set.", Handler::Data(zscore)),
    spec("zmscore", -3, RF, (1, 1, 1), G, "Returns the score of one or more members in a sorted set.", Handler::Data(zmscore)),
    spec("zcard", 2, RF, (1, 1, 1), G, "Returns the number of members in a sorted set.", Handler::Data(zcard)),
    spec("zcount", 4, RF, (1, 1, 1), G, "Returns the count of members in a sorted set that have scores within a range.", Handler::Data(zcount)),
    spec("zlexcount", 4, RF, (1, 1, 1), G, "Returns the number of members in a sorted set within a lexicographical range.", Handler::Data(zlexcount)),
    spec("zrange", -4, R, (1, 1, 1), G, "Returns members in a sorted set within a range of indexes.", Handler::Data(zrange)),
    spec("zrangestore", -5, WD, (1, 2, 1), G, "Stores a range of members from sorted set in a key.", Handler::Data(zrangestore)),
    spec("zrangebyscore", -4, R, (1, 1, 1), G, "Returns members in a sorted set within a range of scores.", Handler::Data(zrangebyscore)),
    spec("zrevrangebyscore", -4, R, (1, 1, 1), G, "Returns members in a sorted set within a range of scores in reverse order.", Handler::Data(zrevrangebyscore)),
    spec("zrangebylex", -4, R, (1, 1, 1), G, "Returns members in a sorted set within a lexicographical range.", Handler::Data(zrangebylex)),
    spec("zrevrangebylex", -4, R, (1, 1, 1), G, "Returns members in a sorted set within a lexicographical range in reverse order.", Handler::Data(zrevrangebylex)),
    spec("zrevrange", -4, R, (1, 1, 1), G, "Returns members in a sorted set within a range of indexes in reverse order.", Handler::Data(zrevrange)),
    spec("zrank", -3, RF, (1, 1, 1), G, "Returns the index of a member in a sorted set ordered by ascending scores.", Handler::Data(zrank)),
    spec("zrevrank", -3, RF, (1, 1, 1), G, "Returns the index of a member in a sorted set ordered by descending scores.", Handler::Data(zrevrank)),
    spec("zpopmin", -2, WF, (1, 1, 1), G, "Returns the lowest-scoring members from a sorted set after removing them.", Handler::Data(zpopmin)),
    spec("zpopmax", -2, WF, (1, 1, 1), G, "Returns the highest-scoring members from a sorted set after removing them.", Handler::Data(zpopmax)),
    spec("zmpop", -4, W | MK, (0, 0, 0), G, "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them.", Handler::Data(zmpop)),
    spec("bzpopmin", -3, WB | Flags::FAST, (1, -2, 1), G, "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise.", Handler::Data(bzpopmin)),
    spec("bzpopmax", -3, WB | Flags::FAST, (1, -2, 1), G, "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.", Handler::Data(bzpopmax)),
    spec("bzmpop", -5, WB | MK, (0, 0, 0), G, "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise.", Handler::Data(bzmpop)),
    spec("zrandmember", -2, R, (1, 1, 1), G, "Returns one or more random members from a sorted set.", Handler::Data(zrandmember)),
    spec("zremrangebyrank", 4, W, (1, 1, 1), G, "Removes members in a sorted set within a range of indexes.", Handler::Data(zremrangebyrank)),
    spec("zremrangebyscore", 4, W, (1, 1, 1), G, "Removes members in a sorted set within a range of scores.", Handler::Data(zremrangebyscore)),
    spec("zremrangebylex", 4, W, (1, 1, 1), G, "Removes members in a sorted set within a lexicographical range.", Handler::Data(zremrangebylex)),
    spec("zunion", -3, R | MK, (0, 0, 0), G, "Returns the union of multiple sorted sets.", Handler::Data(zunion)),
    spec("zinter", -3, R | MK, (0, 0, 0), G, "Returns the intersect of multiple sorted sets.", Handler::Data(zinter)),
    spec("zdiff", -3, R | MK, (0, 0, 0), G, "Returns the difference between multiple sorted sets.", Handler::Data(zdiff)),
    spec("zunionstore", -4, WD | MK, (1, 1, 1), G, "Stores the union of multiple sorted sets in a key.", Handler::Data(zunionstore)),
    spec("zinterstore", -4, WD | MK, (1, 1, 1), G, "Stores the intersect of multiple sorted sets in a key.", Handler::Data(zinterstore)),
    spec("zdiffstore", -4, WD | MK, (1, 1, 1), G, "Stores the difference of multiple sorted sets in a key.", Handler::Data(zdiffstore)),
    spec("zintercard", -3, R | MK, (0, 0, 0), G, "Returns the number of members of the intersect of multiple sorted sets.", Handler::Data(zintercard)),
    spec("zscan", -3, R, (1, 1, 1), G, "Iterates over members and scores of a sorted set.", Handler::Data(zscan)),
];

const MIN_MAX_NOT_FLOAT: &[u8] = b"ERR min or max is not a float";
const LEX_RANGE_INVALID: &[u8] = b"ERR min or max not valid string range item";
const NAN_RESULT: &[u8] = b"ERR resulting score is not a number (NaN)";
const MUST_BE_POSITIVE: &[u8] = b"ERR value is out of range, must be positive";

// ---------------------------------------------------------------------------------------------
// Shared helpers

/// The sorted set at `key` for reading: Ok(None) if missing, Err(()) if another type.
fn read_zset<'c>(c: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c ZSet>, ()> {
    match c.read(key) {
        None => Ok(None),
        Some(ValueRef::ZSet(z)) => Ok(Some(z)),
        Some(_) => Err(()),
    }
}

/// The sorted set at `key` for writing: Ok(None) if missing, Err(()) if another type.
fn write_zset<'c>(c: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c mut ZSet>, ()> {
    match c.write(key) {
        None => Ok(None),
        Some(ValueMut::ZSet(z)) => Ok(Some(z)),
        Some(_) => Err(()),
    }
}

/// Writes a score formatted as Redis 8 does (`util::format_f64`): a double in RESP3 (`,1.5`), a bulk string in
/// RESP2. (ZSCAN is the exception: its scores are bulk strings in both; it passes RESP2.)
fn score(out: &mut Vec<u8>, proto: Proto, s: f64) {
    // Integral scores print as plain integers (what format_f64 does), without an allocation.
    if s.fract() == 0.0 && s.abs() < 1e17 && !(s == 0.0 && s.is_sign_negative()) {
        return reply::double(out, proto, itoa::Buffer::new().format(s as i64).as_bytes());
    }
    reply::double(out, proto, format_f64(s).as_bytes());
}

/// Writes members, or with `withscores` (member, score) pairs: an array of [member, score]
/// arrays in RESP3, one flat array in RESP2 (Redis's shape for ZRANGE .. WITHSCORES, ZUNION,
/// ZRANDMEMBER, ZPOPMIN with a count ...).
fn reply_items(out: &mut Vec<u8>, proto: Proto, items: &[(Vec<u8>, f64)], withscores: bool) {
    if withscores {
        reply::pairs_len(out, proto, items.len());
    } else {
        reply::array_len(out, items.len());
    }
    for (m, s) in items {
        if withscores {
            reply::pair(out, proto);
        }
        reply::bulk(out, m);
        if withscores {
            score(out, proto, *s);
        }
    }
}

fn emit_zadd(c: &mut Ctx, key: &[u8], score: f64, member: &[u8]) {
    let s = format_f64(score);
    c.emit(&[b"ZADD", key, s.as_bytes(), member]);
}

/// Removes `members` from the sorted set at `key` (which must exist), emitting one `ZREM`
/// each, and deletes the key if it became empty.
fn remove_members(c: &mut Ctx, key: &[u8], members: &[Vec<u8>]) {
    let mut empty = false;
    if let Ok(Some(z)) = write_zset(c, key) {
        for m in members {
            z.remove(m);
        }
        empty = z.is_empty();
    }
    for m in members {
        c.emit(&[b"ZREM", key, m]);
    }
    if empty {
        c.ks.delete(key);
    }
}

/// Normalizes a rank range as Redis does: negative indexes count from the end; returns the
/// ascending half-open rank interval, empty when the range misses the set.
fn rank_interval(start: i64, end: i64, len: usize) -> (usize, usize) {
    let len = len as i64;
    let mut start = if start < 0 { start.saturating_add(len) } else { start };
    let mut end = if end < 0 { end.saturating_add(len) } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return (0, 0);
    }
    if end >= len {
        end = len - 1;
    }
    (start as usize, end as usize + 1)
}

/// A score interval, as `ZRANGEBYSCORE` parses `min` and `max` (`(` marks an open end).
#[derive(Clone, Copy, Debug)]
struct ScoreRange {
    min: f64,
    minex: bool,
    max: f64,
    maxex: bool,
}

/// One end of a score range. Redis reads these with `strtod`, which also takes leading spaces
/// and an empty string (as 0).
fn parse_score_bound(a: &[u8]) -> Option<(f64, bool)> {
    let (ex, rest) = match a.first() {
        Some(b'(') => (true, &a[1..]),
        _ => (false, a),
    };
    // Redis 8's range ends: the empty text is 0, anything else strict decimal (overflow to
    // +-inf and underflow to 0 kept; no white space or hexadecimal, which 7.0's strtod took).
    if rest.is_empty() {
        return Some((0.0, ex));
    }
    Some((super::sort::decimal_f64(rest)?, ex))
}

impl ScoreRange {
    fn parse(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
        let (min, minex) = parse_score_bound(min)?;
        let (max, maxex) = parse_score_bound(max)?;
        Some(ScoreRange { min, minex, max, maxex })
    }
    /// The ascending rank interval of the elements inside the range.
    fn interval(&self, z: &ZSet) -> (usize, usize) {
        // Below the minimum: scores under it (at it too when it is exclusive).
        let lo = z.count_below(self.min, self.minex);
        let hi = z.count_below(self.max, !self.maxex);
        (lo, hi.max(lo))
    }
}

/// One end of a lexicographical range: `-`, `+`, `[member` or `(member`.
#[derive(Clone, Debug)]
enum LexBound {
    NegInf,
    PosInf,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

fn parse_lex_bound(a: &[u8]) -> Option<LexBound> {
    match a.first() {
        Some(b'-') if a.len() == 1 => Some(LexBound::NegInf),
        Some(b'+') if a.len() == 1 => Some(LexBound::PosInf),
        Some(b'[') => Some(LexBound::Incl(a[1..].to_vec())),
        Some(b'(') => Some(LexBound::Excl(a[1..].to_vec())),
        _ => None,
    }
}

#[derive(Clone, Debug)]
struct LexRange {
    min: LexBound,
    max: LexBound,
}

impl LexRange {
    fn parse(min: &[u8], max: &[u8]) -> Option<LexRange> {
        Some(LexRange { min: parse_lex_bound(min)?, max: parse_lex_bound(max)? })
    }
    fn above_min(&self, m: &[u8]) -> bool {
        match &self.min {
            LexBound::NegInf => true,
            LexBound::PosInf => false,
            LexBound::Incl(x) => m >= x.as_slice(),
            LexBound::Excl(x) => m > x.as_slice(),
        }
    }
    fn below_max(&self, m: &[u8]) -> bool {
        match &self.max {
            LexBound::PosInf => true,
            LexBound::NegInf => false,
            LexBound::Incl(x) => m <= x.as_slice(),
            LexBound::Excl(x) => m < x.as_slice(),
        }
    }
    /// True for ranges that can hold nothing whatever the set (min above max, or equal with an
    /// open end; `-` and `+` count as open), as Redis checks first.
    fn is_empty_range(&self) -> bool {
        fn key(b: &LexBound) -> (u8, &[u8]) {
            match b {
                LexBound::NegInf => (0, &[]),
                LexBound::Incl(x) | LexBound::Excl(x) => (1, x),
                LexBound::PosInf => (2, &[]),
            }
        }
        let open = |b: &LexBound| !matches!(b, LexBound::Incl(_));
        match key(&self.min).cmp(&key(&self.max)) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal => open(&self.min) || open(&self.max),
            std::cmp::Ordering::Less => false,
        }
    }

    /// Walks the range as Redis does and calls `f` for each element, in reply order.
    ///
    /// Lex ranges assume equal scores; with mixed scores Redis's answer depends on its walk, so
    /// this follows its listpack walk exactly: forwards, start at the first element (in score
    /// order) that is >= min, give up if that one is > max, skip `offset` elements unchecked,
    /// then take elements while they are <= max (backwards: mirror image). Indexed sets find the
    /// start by binary search, which is the same walk when the scores are equal.
    fn walk(&self, z: &ZSet, rev: bool, offset: i64, limit: i64, mut f: impl FnMut(&[u8], f64)) {
        let n = z.len();
        if n == 0 || offset < 0 || limit == 0 || self.is_empty_range() {
            return;
        }
        let (Some((first, _)), Some((last, _))) = (z.get_by_rank(0), z.get_by_rank(n - 1)) else { return };
        if !self.above_min(last) || !self.below_max(first) {
            return;
        }
        let small = z.encoding() == "listpack";
        let mut left = if limit < 0 { usize::MAX } else { limit as usize };
        let offset = offset as usize;
        if !rev {
            let lo = if small {
                z.iter().position(|(m, _)| self.above_min(m))
            } else {
                Some(z.partition_point(|_, m| !self.above_min(m))).filter(|&i| i < n)
            };
            let Some(lo) = lo else { return };
            if !z.get_by_rank(lo).is_some_and(|(m, _)| self.below_max(m)) {
                return;
            }
            for (m, s) in z.iter_from(lo.saturating_add(offset)) {
                if left == 0 || !self.below_max(m) {
                    break;
                }
                f(m, s);
                left -= 1;
            }
        } else {
            let hi = if small {
                let mut found = None;
                let mut r = n;
                z.walk_back(n - 1, |m, _| {
                    r -= 1;
                    if self.below_max(m) {
                        found = Some(r);
                        return false;
                    }
                    true
                });
                found
            } else {
                z.partition_point(|_, m| self.below_max(m)).checked_sub(1)
            };
            let Some(hi) = hi else { return };
            if !z.get_by_rank(hi).is_some_and(|(m, _)| self.above_min(m)) || offset > hi {
                return;
            }
            z.walk_back(hi - offset, |m, s| {
                if left == 0 || !self.above_min(m) {
                    return false;
                }
                f(m, s);
                left -= 1;
                true
            });
        }
    }
}

/// Applies LIMIT offset/count to the rank interval `lo..hi` walked forwards or backwards, and
/// returns the ascending rank interval selected. A negative offset selects nothing (as in
/// Redis); a negative count means "all the rest".
fn limited(lo: usize, hi: usize, rev: bool, offset: i64, count: i64) -> (usize, usize) {
    if offset < 0 || count == 0 || lo >= hi {
        return (0, 0);
    }
    let avail = hi - lo;
    let off = (offset as u64).min(avail as u64) as usize;
    let take = if count < 0 { avail - off } else { (count as u64).min((avail - off) as u64) as usize };
    if rev {
        (hi - off - take, hi - off)
    } else {
        (lo + off, lo + off + take)
    }
}

/// How a destination set is built, following Redis 7.0: a set-operation result is built in
/// the big form and converted to a listpack only if it fits one; ZRANGESTORE of a rank range
/// creates the form its length calls for; ZRANGESTORE by score or lex starts small. It only
/// matters for -0 scores, which the small form stores as 0.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum DstForm {
    /// Big form if the result has more than 128 members or one longer than 64 bytes.
    ByContent,
    /// Big form if the result has more than 128 members.
    ByLength,
    /// Start small and convert as members arrive.
    Small,
}

/// Replaces `dst` with a sorted set of `items` (in ascending order), or deletes it when
/// `items` is empty; emits `DEL dst` if it existed, then one `ZADD` per element carrying the
/// stored score. Returns the stored count.
pub(crate) fn store_items(c: &mut Ctx, dst: &[u8], items: &[(Vec<u8>, f64)], form: DstForm) -> i64 {
    let existed = c.exists(dst);
    if existed {
        c.ks.delete(dst);
        c.emit(&[b"DEL", dst]);
    }
    if items.is_empty() {
        return 0;
    }
    let many = items.len() > store::types::zset::listpack_entries();
    let long = || items.iter().any(|(m, _)| m.len() > store::types::zset::listpack_value());
    let big = match form {
        DstForm::ByContent => many || long(),
        DstForm::ByLength => many,
        DstForm::Small => false,
    };
    // Built in one pass from the ordered items (no search per member); one by one if they
    // are not in order after all.
    let (z, stored) = ZSet::from_sorted(items, big).unwrap_or_else(|| {
        let mut z = if big { ZSet::new_indexed() } else { ZSet::new() };
        for (m, s) in items {
            z.insert(m, *s);
        }
        let stored = items.iter().map(|(m, s)| z.score(m).unwrap_or(*s)).collect();
        (z, stored)
    });
    c.ks.insert(dst, Value::ZSet(Box::new(z)), None);
    for ((m, _), s) in items.iter().zip(stored) {
        emit_zadd(c, dst, s, m);
    }
    c.signal_ready(dst);
    items.len() as i64
}

// ---------------------------------------------------------------------------------------------
// ZADD, ZINCRBY, ZREM

#[derive(Default, Clone, Copy)]
pub(crate) struct AddFlags {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
    pub ch: bool,
    pub incr: bool,
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
fn zadd(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let mut f = AddFlags::default();
    let mut i = 2;
    while i < args.len() {
        let a = args[i];
        if eq_ic(a, b"nx") {
            f.nx = true;
        } else if eq_ic(a, b"xx") {
            f.xx = true;
        } else if eq_ic(a, b"gt") {
            f.gt = true;
        } else if eq_ic(a, b"lt") {
            f.lt = true;
        } else if eq_ic(a, b"ch") {
            f.ch = true;
        } else if eq_ic(a, b"incr") {
            f.incr = true;
        } else {
            break;
        }
        i += 1;
    }
    let rest = &args[i..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return reply::error(out, errors::SYNTAX);
    }
    if f.nx && f.xx {
        return reply::error(out, b"ERR XX and NX options at the same time are not compatible");
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return reply::error(out, b"ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if f.incr && rest.len() > 2 {
        return reply::error(out, b"ERR INCR option supports a single increment-element pair");
    }
    let mut pairs = Vec::with_capacity(rest.len() / 2);
    for p in rest.chunks_exact(2) {
        match parse_f64(p[0]) {
            Some(s) => pairs.push((s, p[1])),
            None => return reply::error(out, errors::NOT_FLOAT),
        }
    }
    zadd_pairs(c, out, args[1], f, &pairs);
}

/// The body of ZADD and ZINCRBY once arguments are parsed.
pub(crate) fn zadd_pairs(c: &mut Ctx, out: &mut Vec<u8>, key: &[u8], f: AddFlags, pairs: &[(f64, &[u8])]) {
    let exists = match write_zset(c, key) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(z) => z.is_some(),
    };
    if !exists {
        if f.xx {
            return if f.incr { reply::null_bulk(out, c.proto) } else { reply::integer(out, 0) };
        }
        c.ks.insert(key, Value::ZSet(Box::new(ZSet::new())), None);
    }
    let (mut added, mut updated) = (0i64, 0i64);
    let mut last: Option<f64> = None;
    let mut changes: Vec<(f64, &[u8])> = Vec::new();
    let mut nan = false;
    // A replica stores the exact bits the origin emitted (the origin already applied the
    // small form's -0 -> 0 rule, and the replica's form may differ at this point).
    let exact = c.replaying;
    let empty = {
        let Ok(Some(z)) = write_zset(c, key) else { unreachable!("created above") };
        for &(score, member) in pairs {
            match z.score(member) {
                Some(cur) => {
                    if f.nx {
                        continue;
                    }
                    let new = if f.incr { cur + score } else { score };
                    if new.is_nan() {
                        nan = true;
                        break;
                    }
                    if (f.lt && new >= cur) || (f.gt && new <= cur) {
                        continue;
                    }
                    // The reply shows the computed score even when it equals the stored one
                    // numerically and nothing changes (-0 + 0 replies 0, stores -0).
                    last = Some(new);
                    if new != cur {
                        if exact {
                            z.insert_exact(member, new);
                        } else {
                            z.insert(member, new);
                        }
                        updated += 1;
                        // Only a zero can be stored differently (-0 -> 0 in the small form).
                        let stored = if new == 0.0 { z.score(member).unwrap_or(new) } else { new };
                        changes.push((stored, member));
                    }
                }
                None => {
                    if f.xx {
                        continue;
                    }
                    if exact {
                        z.insert_exact(member, score);
                    } else {
                        z.insert(member, score);
                    }
                    added += 1;
                    last = Some(score);
                    let stored = if score == 0.0 { z.score(member).unwrap_or(score) } else { score };
                    changes.push((stored, member));
                }
            }
        }
        z.is_empty()
    };
    // A key created here and left empty (an INCR that hit NaN cannot, but stay safe).
    if empty {
        c.ks.delete(key);
    }
    for &(s, m) in &changes {
        emit_zadd(c, key, s, m);
    }
    if added > 0 {
        c.signal_ready(key);
    }
    if nan {
        return reply::error(out, NAN_RESULT);
    }
    if f.incr {
        match last {
            Some(s) => score(out, c.proto, s),
            None => reply::null_bulk(out, c.proto),
        }
    } else {
        reply::integer(out, if f.ch { added + updated } else { added });
    }
}

/// ZINCRBY key increment member
fn zincrby(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(incr) = parse_f64(args[2]) else { return reply::error(out, errors::NOT_FLOAT) };
    let f = AddFlags { incr: true, ..Default::default() };
    zadd_pairs(c, out, args[1], f, &[(incr, args[3])]);
}

/// ZREM key member [member ...]
fn zrem(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let mut removed: Vec<&[u8]> = Vec::new();
    let empty = match write_zset(c, key) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(None) => return reply::integer(out, 0),
        Ok(Some(z)) => {
            for m in &args[2..] {
                if z.remove(m).is_some() {
                    removed.push(m);
                }
            }
            z.is_empty()
        }
    };
    for m in &removed {
        c.emit(&[b"ZREM", key, m]);
    }
    if empty {
        c.ks.delete(key);
    }
    reply::integer(out, removed.len() as i64);
}

// ---------------------------------------------------------------------------------------------
// Point reads

/// ZSCORE key member
fn zscore(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match read_zset(c, args[1]) {
        Err(()) => reply::error(out, errors::WRONGTYPE),
        Ok(z) => match z.and_then(|z| z.score(args[2])) {
            Some(s) => score(out, c.proto, s),
            None => reply::null_bulk(out, c.proto),
        },
    }
}

/// ZMSCORE key member [member ...]
fn zmscore(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let proto = c.proto;
    match read_zset(c, args[1]) {
        Err(()) => reply::error(out, errors::WRONGTYPE),
        Ok(z) => {
            reply::array_len(out, args.len() - 2);
            for m in &args[2..] {
                match z.and_then(|z| z.score(m)) {
                    Some(s) => score(out, proto, s),
                    None => reply::null_bulk(out, proto),
                }
            }
        }
    }
}

/// ZCARD key
fn zcard(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match read_zset(c, args[1]) {
        Err(()) => reply::error(out, errors::WRONGTYPE),
        Ok(z) => reply::integer(out, z.map_or(0, |z| z.len()) as i64),
    }
}

/// ZCOUNT key min max
fn zcount(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(r) = ScoreRange::parse(args[2], args[3]) else { return reply::error(out, MIN_MAX_NOT_FLOAT) };
    match read_zset(c, args[1]) {
        Err(()) => reply::error(out, errors::WRONGTYPE),
        Ok(None) => reply::integer(out, 0),
        Ok(Some(z)) => {
            let (lo, hi) = r.interval(z);
            reply::integer(out, (hi - lo) as i64)
        }
    }
}

/// ZLEXCOUNT key min max
fn zlexcount(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(r) = LexRange::parse(args[2], args[3]) else { return reply::error(out, LEX_RANGE_INVALID) };
    match read_zset(c, args[1]) {
        Err(()) => reply::error(out, errors::WRONGTYPE),
        Ok(None) => reply::integer(out, 0),
        Ok(Some(z)) => {
            let mut n = 0i64;
            r.walk(z, false, 0, -1, |_, _| n += 1);
            reply::integer(out, n)
        }
    }
}

/// ZRANK key member [WITHSCORE] / ZREVRANK key member [WITHSCORE]
fn rank_generic(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]], rev: bool) {
    if args.len() > 4 || (args.len() == 4 && !eq_ic(args[3], b"withscore")) {
        return reply::error(out, errors::SYNTAX);
    }
    let withscore = args.len() == 4;
    let found = match read_zset(c, args[1]) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(None) => None,
        Ok(Some(z)) => z.rank(args[2]).map(|(r, s)| (if rev { z.len() - 1 - r } else { r }, s)),
    };
    match (found, withscore) {
        (None, false) => reply::null_bulk(out, c.proto),
        (None, true) => reply::null_array(out, c.proto),
        (Some((r, _)), false) => reply::integer(out, r as i64),
        (Some((r, s)), true) => {
            reply::array_len(out, 2);
            reply::integer(out, r as i64);
            score(out, c.proto, s);
        }
    }
}

fn zrank(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    rank_generic(c, out, args, false)
}

fn zrevrank(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    rank_generic(c, out, args, true)
}

// ---------------------------------------------------------------------------------------------
// The ZRANGE family

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum RangeType {
    Rank,
    Score,
    Lex,
}

/// The shared body of ZRANGE, ZRANGESTORE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX,
/// ZREVRANGEBYLEX and ZREVRANGE. `first` is the index of the source key (its range bounds
/// follow it, then the options); `fixed` pins the range type and direction for the older
/// commands, whose arguments then cannot change them.
fn zrange_generic(
    c: &mut Ctx,
    out: &mut Vec<u8>,
    args: &[&[u8]],
    dst: Option<&[u8]>,
    first: usize,
    fixed: Option<(RangeType, bool)>,
) {
    let proto = c.proto;
    let key = args[first];
    let mut rtype = fixed.map(|f| f.0);
    let mut rev = fixed.map(|f| f.1);
    let mut withscores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut j = first + 3;
    while j < args.len() {
        let a = args[j];
        let left = args.len() - j - 1;
        if dst.is_none() && eq_ic(a, b"withscores") {
            withscores = true;
        } else if eq_ic(a, b"limit") && left >= 2 {
            match (parse_i64(args[j + 1]), parse_i64(args[j + 2])) {
                (Some(o), Some(l)) => {
                    offset = o;
                    limit = l;
                }
                _ => return reply::error(out, errors::NOT_INTEGER),
            }
            j += 2;
        } else if rev.is_none() && eq_ic(a, b"rev") {
            rev = Some(true);
        } else if rtype.is_none() && eq_ic(a, b"bylex") {
            rtype = Some(RangeType::Lex);
        } else if rtype.is_none() && eq_ic(a, b"byscore") {
            rtype = Some(RangeType::Score);
        } else {
            return reply::error(out, errors::SYNTAX);
        }
        j += 1;
    }
    let rtype = rtype.unwrap_or(RangeType::Rank);
    let rev = rev.unwrap_or(false);
    if limit != -1 && rtype == RangeType::Rank {
        return reply::error(
            out,
            b"ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if withscores && rtype == RangeType::Lex {
        return reply::error(out, b"ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    // Score and lex ranges are written max first when reversed.
    let (mut a1, mut a2) = (args[first + 1], args[first + 2]);
    if rev && rtype != RangeType::Rank {
        std::mem::swap(&mut a1, &mut a2);
    }
    enum Parsed {
        Rank(i64, i64),
        Score(ScoreRange),
        Lex(LexRange),
    }
    let parsed = match rtype {
        RangeType::Rank => match (parse_i64(a1), parse_i64(a2)) {
            (Some(s), Some(e)) => Parsed::Rank(s, e),
            _ => return reply::error(out, errors::NOT_INTEGER),
        },
        RangeType::Score => match ScoreRange::parse(a1, a2) {
            Some(r) => Parsed::Score(r),
            None => return reply::error(out, MIN_MAX_NOT_FLOAT),
        },
        RangeType::Lex => match LexRange::parse(a1, a2) {
            Some(r) => Parsed::Lex(r),
            None => return reply::error(out, LEX_RANGE_INVALID),
        },
    };
    let z = match read_zset(c, key) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(z) => z,
    };
    // Rank and score ranges resolve to a rank slice; lex ranges are walked.
    let slice = match (&parsed, z) {
        (_, None) => Some((0, 0)),
        (Parsed::Rank(s, e), Some(z)) => Some(if rev {
            // Reverse ranks count from the highest score.
            let (l, h) = rank_interval(*s, *e, z.len());
            (z.len() - h, z.len() - l)
        } else {
            rank_interval(*s, *e, z.len())
        }),
        (Parsed::Score(r), Some(z)) => {
            let (lo, hi) = r.interval(z);
            Some(limited(lo, hi, rev, offset, limit))
        }
        (Parsed::Lex(_), Some(_)) => None,
    };
    if dst.is_none() {
        // Replies are written straight from the set, without copying the members.
        // WITHSCORES: [member, score] pairs in RESP3, flat in RESP2 (see `reply_items`).
        let per = if withscores && !proto.is_resp3() { 2 } else { 1 };
        let put = |out: &mut Vec<u8>, m: &[u8], s: f64| {
            if withscores {
                reply::pair(out, proto);
            }
            reply::bulk(out, m);
            if withscores {
                score(out, proto, s);
            }
        };
        match (slice, z, &parsed) {
            (Some((lo, hi)), Some(z), _) if lo < hi => {
                reply::array_len(out, (hi - lo) * per);
                z.for_range(lo, hi, rev, |m, s| put(out, m, s));
            }
            (None, Some(z), Parsed::Lex(r)) => {
                let marker = reply::deferred_array_len(out);
                let mut n = 0;
                r.walk(z, rev, offset, limit, |m, s| {
                    put(out, m, s);
                    n += 1;
                });
                reply::finish_deferred_len(out, marker, n * per);
            }
            _ => reply::array_len(out, 0),
        }
        return;
    }
    let mut items: Vec<(Vec<u8>, f64)> = match (slice, z, &parsed) {
        // Ascending order: the destination is built (and replicated) from the lowest score.
        (Some((lo, hi)), Some(z), _) => z.range_vec(lo, hi, false),
        (None, Some(z), Parsed::Lex(r)) => {
            let mut v = Vec::new();
            r.walk(z, rev, offset, limit, |m, s| v.push((m.to_vec(), s)));
            if rev {
                v.reverse();
            }
            v
        }
        _ => Vec::new(),
    };
    items.shrink_to_fit();
    let form = if rtype == RangeType::Rank { DstForm::ByLength } else { DstForm::Small };
    let n = store_items(c, dst.unwrap_or_default(), &items, form);
    reply::integer(out, n);
}

/// ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
fn zrange(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    zrange_generic(c, out, args, None, 1, None)
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
fn zrangestore(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    zrange_generic(c, out, args, Some(args[1]), 2, None)
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
fn zrangebyscore(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    zrange_generic(c, out, args, None, 1, Some((RangeType::Score, false)))
}

/// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]
fn zrevrangebyscore(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    zrange_generic(c, out, args, None, 1, Some((RangeType::Score, true)))
}

/// ZRANGEBYLEX key min max [LIMIT offset count]
fn zrangebylex(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    zrange_generic(c, out, args, None, 1, Some((RangeType::Lex, false)))
}

/// ZREVRANGEBYLEX key max min [LIMIT offset count]
fn zrevrangebylex(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    zrange_generic(c, out, args, None, 1, Some((RangeType::Lex, true)))
}

/// ZREVRANGE key start stop [WITHSCORES]
fn zrevrange(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    zrange_generic(c, out, args, None, 1, Some((RangeType::Rank, true)))
}

// ---------------------------------------------------------------------------------------------
// ZREMRANGEBY*

enum RemRange {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

fn zremrange_generic(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]], range: RemRange) {
    let key = args[1];
    let members: Vec<Vec<u8>> = match read_zset(c, key) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(None) => return reply::integer(out, 0),
        Ok(Some(z)) => {
            let (lo, hi) = match &range {
                RemRange::Rank(s, e) => rank_interval(*s, *e, z.len()),
                RemRange::Score(r) => r.interval(z),
                RemRange::Lex(r) => {
                    let mut v = Vec::new();
                    r.walk(z, false, 0, -1, |m, _| v.push(m.to_vec()));
                    return finish_remrange(c, out, key, v);
                }
            };
            z.range_vec(lo, hi, false).into_iter().map(|(m, _)| m).collect()
        }
    };
    finish_remrange(c, out, key, members)
}

fn finish_remrange(c: &mut Ctx, out: &mut Vec<u8>, key: &[u8], members: Vec<Vec<u8>>) {
    if !members.is_empty() {
        remove_members(c, key, &members);
    }
    reply::integer(out, members.len() as i64);
}

/// ZREMRANGEBYRANK key start stop
fn zremrangebyrank(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match (parse_i64(args[2]), parse_i64(args[3])) {
        (Some(s), Some(e)) => zremrange_generic(c, out, args, RemRange::Rank(s, e)),
        _ => reply::error(out, errors::NOT_INTEGER),
    }
}

/// ZREMRANGEBYSCORE key min max
fn zremrangebyscore(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match ScoreRange::parse(args[2], args[3]) {
        Some(r) => zremrange_generic(c, out, args, RemRange::Score(r)),
        None => reply::error(out, MIN_MAX_NOT_FLOAT),
    }
}

/// ZREMRANGEBYLEX key min max
fn zremrangebylex(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match LexRange::parse(args[2], args[3]) {
        Some(r) => zremrange_generic(c, out, args, RemRange::Lex(r)),
        None => reply::error(out, LEX_RANGE_INVALID),
    }
}

// ---------------------------------------------------------------------------------------------
// Pops

/// Pops up to `count` lowest (or highest when `max`) elements of the sorted set at `key`,
/// which must exist; emits their ZREMs. Returns them in pop order.
fn pop_n(c: &mut Ctx, key: &[u8], count: usize, max: bool) -> Vec<(Vec<u8>, f64)> {
    let items = match read_zset(c, key) {
        Ok(Some(z)) => {
            let n = count.min(z.len());
            if max {
                z.range_vec(z.len() - n, z.len(), true)
            } else {
                z.range_vec(0, n, false)
            }
        }
        _ => return Vec::new(),
    };
    let members: Vec<Vec<u8>> = items.iter().map(|(m, _)| m.clone()).collect();
    if !members.is_empty() {
        remove_members(c, key, &members);
    }
    items
}

/// ZPOPMIN/ZPOPMAX key [count]
fn zpop_generic(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]], max: bool) {
    if args.len() > 3 {
        return reply::error(out, errors::SYNTAX);
    }
    let count = if args.len() == 3 {
        match parse_i64(args[2]) {
            Some(n) if n >= 0 => n as usize,
            _ => return reply::error(out, MUST_BE_POSITIVE),
        }
    } else {
        1
    };
    match read_zset(c, args[1]) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(None) => return reply::array_len(out, 0),
        Ok(Some(_)) => {}
    }
    let items = pop_n(c, args[1], count, max);
    if args.len() == 3 {
        reply_items(out, c.proto, &items, true);
    } else {
        // Without a count Redis answers one flat [member, score] even in RESP3.
        reply::array_len(out, 2 * items.len());
        for (m, s) in &items {
            reply::bulk(out, m);
            score(out, c.proto, *s);
        }
    }
}

fn zpopmin(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    zpop_generic(c, out, args, false)
}

fn zpopmax(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    zpop_generic(c, out, args, true)
}

/// Parses `numkeys key [key ...] MIN|MAX [COUNT count]` (ZMPOP and BZMPOP); the side is
/// true for MAX.
fn parse_mpop<'a>(out: &mut Vec<u8>, args: &'a [&'a [u8]], numkeys_at: usize) -> Option<MpopArgs<'a, bool>> {
    let side = |a: &[u8]| {
        if eq_ic(a, b"min") {
            Some(false)
        } else if eq_ic(a, b"max") {
            Some(true)
        } else {
            None
        }
    };
    util::parse_mpop(out, args, numkeys_at, side)
}

/// Serves an MPOP from the first non-empty key: Ok(true) if it replied with elements,
/// Ok(false) if every key was empty, Err(()) after a WRONGTYPE reply.
fn serve_mpop(c: &mut Ctx, out: &mut Vec<u8>, p: &MpopArgs<bool>) -> Result<bool, ()> {
    let retrying = c.retrying_blocked;
    for key in p.keys {
        match read_zset(c, key) {
            Err(()) if retrying => continue,
            Err(()) => {
                reply::error(out, errors::WRONGTYPE);
                return Err(());
            }
            Ok(None) => continue,
            Ok(Some(_)) => {
                let items = pop_n(c, key, p.count, p.side);
                reply::array_len(out, 2);
                reply::bulk(out, key);
                reply::array_len(out, items.len());
                // Nested [member, score] pairs in both protocols.
                for (m, s) in &items {
                    reply::array_len(out, 2);
                    reply::bulk(out, m);
                    score(out, c.proto, *s);
                }
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]
fn zmpop(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(p) = parse_mpop(out, args, 1) else { return };
    if let Ok(false) = serve_mpop(c, out, &p) {
        reply::null_array(out, c.proto);
    }
}

/// Parks the client on `keys` unless this is a replay (a replica never waits: it answers as a
/// timeout would; the origin journals nothing for a wait).
fn block(c: &mut Ctx, out: &mut Vec<u8>, keys: &[&[u8]], deadline: Option<Millis>) {
    if c.replaying {
        return reply::null_array(out, c.proto);
    }
    c.block_on(keys.iter().map(|k| k.to_vec()).collect(), deadline);
}

/// BZPOPMIN/BZPOPMAX key [key ...] timeout
fn bzpop_generic(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]], max: bool) {
    let deadline = match parse_timeout(args[args.len() - 1], c.now) {
        Ok(d) => d,
        Err(e) => return reply::error(out, e),
    };
    let keys = &args[1..args.len() - 1];
    let retrying = c.retrying_blocked;
    for key in keys {
        match read_zset(c, key) {
            // A parked client is woken for the key that gained members; as in Redis, another
            // of its keys now holding a different type does not fail it.
            Err(()) if retrying => continue,
            Err(()) => return reply::error(out, errors::WRONGTYPE),
            Ok(None) => continue,
            Ok(Some(_)) => {
                let items = pop_n(c, key, 1, max);
                if let Some((m, s)) = items.first() {
                    reply::array_len(out, 3);
                    reply::bulk(out, key);
                    reply::bulk(out, m);
                    score(out, c.proto, *s);
                    return;
                }
            }
        }
    }
    block(c, out, keys, deadline);
}

fn bzpopmin(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    bzpop_generic(c, out, args, false)
}

fn bzpopmax(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    bzpop_generic(c, out, args, true)
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]
fn bzmpop(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(p) = parse_mpop(out, args, 2) else { return };
    let deadline = match parse_timeout(args[1], c.now) {
        Ok(d) => d,
        Err(e) => return reply::error(out, e),
    };
    if let Ok(false) = serve_mpop(c, out, &p) {
        block(c, out, p.keys, deadline);
    }
}

// ---------------------------------------------------------------------------------------------
// ZRANDMEMBER and ZSCAN

/// ZRANDMEMBER key [count [WITHSCORES]]
fn zrandmember(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if args.len() == 2 {
        let len = match read_zset(c, args[1]) {
            Err(()) => return reply::error(out, errors::WRONGTYPE),
            Ok(None) => return reply::null_bulk(out, c.proto),
            Ok(Some(z)) => z.len(),
        };
        let r = c.rng.gen_range(0..len);
        let pick = match c.ks.get(args[1]) {
            Some(ValueRef::ZSet(z)) => z.get_by_rank(r).map(|(m, _)| m.to_vec()),
            _ => None,
        };
        return match pick {
            Some(m) => reply::bulk(out, &m),
            None => reply::null_bulk(out, c.proto),
        };
    }
    if args.len() > 4 || (args.len() == 4 && !eq_ic(args[3], b"withscores")) {
        return reply::error(out, errors::SYNTAX);
    }
    let withscores = args.len() == 4;
    let count =
        match parse_i64(args[2]) {
            None => return reply::error(out, errors::NOT_INTEGER),
            Some(i64::MIN) => return reply::error(
                out,
                b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            ),
            Some(n) => n,
        };
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return reply::error(out, errors::VALUE_OUT_OF_RANGE);
    }
    let len = match read_zset(c, args[1]) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(None) => return reply::array_len(out, 0),
        Ok(Some(z)) => z.len(),
    };
    // Redis builds any repeated-picks reply, and dies of huge ones: see MAX_REPEATED_PICKS.
    if count < 0 && count.unsigned_abs() > errors::MAX_REPEATED_PICKS {
        return reply::error(out, errors::VALUE_OUT_OF_RANGE);
    }
    // Choose ranks first (the generator and the set both live in the context).
    let whole = count >= 0 && count as u64 >= len as u64;
    let ranks: Vec<usize> = if count < 0 {
        // Repeats allowed: independent uniform picks.
        (0..count.unsigned_abs()).map(|_| c.rng.gen_range(0..len)).collect()
    } else if whole {
        Vec::new()
    } else if (count as usize).saturating_mul(3) > len {
        // Many distinct members: a partial Fisher-Yates shuffle of all the ranks.
        let n = count as usize;
        let mut ranks: Vec<usize> = (0..len).collect();
        for i in 0..n {
            let j = c.rng.gen_range(i..len);
            ranks.swap(i, j);
        }
        ranks.truncate(n);
        ranks
    } else {
        // Few distinct members of a big set: draw until enough distinct ranks came up.
        let n = count as usize;
        let mut seen = std::collections::HashSet::with_capacity(n);
        let mut ranks = Vec::with_capacity(n);
        while ranks.len() < n {
            let r = c.rng.gen_range(0..len);
            if seen.insert(r) {
                ranks.push(r);
            }
        }
        ranks
    };
    let Some(ValueRef::ZSet(z)) = c.ks.get(args[1]) else { return reply::array_len(out, 0) };
    if whole {
        // The whole set: Redis 7.0 lists it from the highest score down.
        let items = z.range_vec(0, len, true);
        return reply_items(out, c.proto, &items, withscores);
    }
    // Fetch the picks in one ordered pass over the set, then reply in the drawn order.
    let mut order: Vec<usize> = (0..ranks.len()).collect();
    order.sort_unstable_by_key(|&i| ranks[i]);
    let sorted: Vec<usize> = order.iter().map(|&i| ranks[i]).collect();
    let mut picked: Vec<(Vec<u8>, f64)> = vec![(Vec::new(), 0.0); ranks.len()];
    let mut k = 0;
    z.for_ranks(&sorted, |m, s| {
        picked[order[k]] = (m.to_vec(), s);
        k += 1;
    });
    reply_items(out, c.proto, &picked, withscores);
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count]
///
/// Small sets return everything at once with cursor 0, as Redis does. For indexed sets the
/// cursor is a position in the space of member hashes ([`store::types::ZSet::scan`]): a
/// member's hash changes neither with its score nor when the set grows or shrinks, so every
/// member present for the whole iteration is returned at least once, whatever else changes.
fn zscan(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(cursor) = parse_cursor(out, args[2]) else { return };
    // Redis looks the key up before it reads the options.
    match read_zset(c, args[1]) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(None) => return scan_reply(out, 0, &[]),
        Ok(Some(_)) => {}
    }
    let Some(ScanOpts { pattern, count, .. }) = parse_scan_opts(out, &args[3..], false) else { return };
    let Some(ValueRef::ZSet(z)) = c.ks.get(args[1]) else { return reply::error(out, errors::WRONGTYPE) };
    let mut items: Vec<(Vec<u8>, f64)> = Vec::new();
    let keep = |m: &[u8]| pattern.is_none_or(|p| glob_match(p, m, false));
    let next = z.scan(cursor, count, |m, s| {
        if keep(m) {
            items.push((m.to_vec(), s));
        }
    });
    reply::array_len(out, 2);
    reply::bulk(out, itoa::Buffer::new().format(next).as_bytes());
    // ZSCAN's scores are bulk strings in a flat array in both protocols, as in Redis.
    reply_items(out, Proto::Resp2, &items, true);
}

// ---------------------------------------------------------------------------------------------
// ZUNION, ZINTER, ZDIFF (+STORE), ZINTERCARD

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// One input of a set operation: its elements (sets count with score 1).
type Input = Vec<(Vec<u8>, f64)>;

/// Reads the `n` inputs starting at `args[at]`: missing keys are empty; Err after a
/// WRONGTYPE reply.
fn read_inputs(c: &mut Ctx, out: &mut Vec<u8>, keys: &[&[u8]]) -> Result<Vec<Input>, ()> {
    let mut inputs = Vec::with_capacity(keys.len());
    for key in keys {
        let input = match c.read(key) {
            None => Vec::new(),
            Some(ValueRef::ZSet(z)) => z.iter().map(|(m, s)| (m.to_vec(), s)).collect(),
            Some(ValueRef::Set(s)) => match s.to_plain() {
                Plain::Set(members) => members.into_iter().map(|m| (m, 1.0)).collect(),
                _ => Vec::new(),
            },
            Some(_) => {
                reply::error(out, errors::WRONGTYPE);
                return Err(());
            }
        };
        inputs.push(input);
    }
    Ok(inputs)
}

/// Combines two weighted scores; a NaN (inf + -inf) becomes 0, as in Redis.
fn aggregate(agg: Aggregate, acc: f64, v: f64) -> f64 {
    match agg {
        Aggregate::Sum => {
            let s = acc + v;
            if s.is_nan() {
                0.0
            } else {
                s
            }
        }
        // C's `v < acc ? v : acc`: a NaN `v` leaves `acc` alone.
        Aggregate::Min => {
            if v < acc {
                v
            } else {
                acc
            }
        }
        Aggregate::Max => {
            if v > acc {
                v
            } else {
                acc
            }
        }
    }
}

fn weighted(w: f64, s: f64) -> f64 {
    let v = w * s;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

/// Computes a set operation over weighted inputs; the result is in ascending (score, member)
/// order.
fn compute(op: SetOp, mut inputs: Vec<(Input, f64)>, agg: Aggregate) -> Vec<(Vec<u8>, f64)> {
    let mut result: Vec<(Vec<u8>, f64)> = match op {
        SetOp::Union => {
            // Inputs are folded smallest first, as Redis does (it matters for float sums).
            inputs.sort_by_key(|(i, _)| i.len());
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            for (input, w) in inputs {
                for (m, s) in input {
                    let v = weighted(w, s);
                    acc.entry(m).and_modify(|a| *a = aggregate(agg, *a, v)).or_insert(v);
                }
            }
            acc.into_iter().collect()
        }
        SetOp::Inter => {
            inputs.sort_by_key(|(i, _)| i.len());
            let mut it = inputs.into_iter();
            let Some((first, w0)) = it.next() else { return Vec::new() };
            let others: Vec<(HashMap<Vec<u8>, f64>, f64)> =
                it.map(|(i, w)| (i.into_iter().collect(), w)).collect();
            let mut res = Vec::new();
            'outer: for (m, s) in first {
                let mut acc = weighted(w0, s);
                for (o, w) in &others {
                    match o.get(&m) {
                        // Redis zeroes a NaN weighted score only for the first input here; a
                        // NaN from the others reaches the aggregate (SUM turns the sum into 0,
                        // MIN and MAX ignore it).
                        Some(&s2) => acc = aggregate(agg, acc, *w * s2),
                        None => continue 'outer,
                    }
                }
                res.push((m, acc));
            }
            res
        }
        SetOp::Diff => {
            let mut it = inputs.into_iter();
            let Some((first, _)) = it.next() else { return Vec::new() };
            let others: Vec<std::collections::HashSet<Vec<u8>>> =
                it.map(|(i, _)| i.into_iter().map(|(m, _)| m).collect()).collect();
            first.into_iter().filter(|(m, _)| !others.iter().any(|o| o.contains(m))).collect()
        }
    };
    result.sort_by(|a, b| match a.1.partial_cmp(&b.1) {
        Some(std::cmp::Ordering::Equal) | None => a.0.cmp(&b.0),
        Some(o) => o,
    });
    result
}

/// ZUNION/ZINTER/ZDIFF numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]
/// [WITHSCORES], and the STORE forms (destination first, no WITHSCORES).
fn setop_generic(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]], op: SetOp, store: bool) {
    let numkeys_at = if store { 2 } else { 1 };
    let Some(numkeys) = parse_i64(args[numkeys_at]) else { return reply::error(out, errors::NOT_INTEGER) };
    if numkeys < 1 {
        let mut msg = b"ERR at least 1 input key is needed for '".to_vec();
        msg.extend(args[0].iter().map(|b| b.to_ascii_lowercase()));
        msg.extend_from_slice(b"' command");
        return reply::error(out, &msg);
    }
    if numkeys as u64 > (args.len() - numkeys_at - 1) as u64 {
        return reply::error(out, errors::SYNTAX);
    }
    let numkeys = numkeys as usize;
    let keys = &args[numkeys_at + 1..numkeys_at + 1 + numkeys];
    let Ok(inputs) = read_inputs(c, out, keys) else { return };
    let mut weights = vec![1.0f64; numkeys];
    let mut agg = Aggregate::Sum;
    let mut withscores = false;
    let mut j = numkeys_at + 1 + numkeys;
    while j < args.len() {
        let remaining = args.len() - j;
        if op != SetOp::Diff && remaining > numkeys && eq_ic(args[j], b"weights") {
            for (k, w) in weights.iter_mut().enumerate() {
                match parse_f64(args[j + 1 + k]) {
                    Some(v) => *w = v,
                    None => return reply::error(out, b"ERR weight value is not a float"),
                }
            }
            j += numkeys + 1;
        } else if op != SetOp::Diff && remaining >= 2 && eq_ic(args[j], b"aggregate") {
            let a = args[j + 1];
            agg = if eq_ic(a, b"sum") {
                Aggregate::Sum
            } else if eq_ic(a, b"min") {
                Aggregate::Min
            } else if eq_ic(a, b"max") {
                Aggregate::Max
            } else {
                return reply::error(out, errors::SYNTAX);
            };
            j += 2;
        } else if !store && eq_ic(args[j], b"withscores") {
            withscores = true;
            j += 1;
        } else {
            return reply::error(out, errors::SYNTAX);
        }
    }
    let result = compute(op, inputs.into_iter().zip(weights).collect(), agg);
    if store {
        let n = store_items(c, args[1], &result, DstForm::ByContent);
        reply::integer(out, n);
    } else {
        reply_items(out, c.proto, &result, withscores);
    }
}

fn zunion(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    setop_generic(c, out, args, SetOp::Union, false)
}
fn zinter(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    setop_generic(c, out, args, SetOp::Inter, false)
}
fn zdiff(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    setop_generic(c, out, args, SetOp::Diff, false)
}
fn zunionstore(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    setop_generic(c, out, args, SetOp::Union, true)
}
fn zinterstore(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    setop_generic(c, out, args, SetOp::Inter, true)
}
fn zdiffstore(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    setop_generic(c, out, args, SetOp::Diff, true)
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]
fn zintercard(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(numkeys) = parse_i64(args[1]) else { return reply::error(out, errors::NOT_INTEGER) };
    if numkeys < 1 {
        return reply::error(out, b"ERR at least 1 input key is needed for 'zintercard' command");
    }
    if numkeys as u64 > (args.len() - 2) as u64 {
        return reply::error(out, errors::SYNTAX);
    }
    let numkeys = numkeys as usize;
    let keys = &args[2..2 + numkeys];
    // Every key read first (expiry, access, WRONGTYPE), as the other set operations read them.
    let mut missing = false;
    for key in keys {
        match c.read(key) {
            None => missing = true,
            Some(ValueRef::ZSet(_) | ValueRef::Set(_)) => {}
            Some(_) => return reply::error(out, errors::WRONGTYPE),
        }
    }
    let Some(limit) = parse_card_limit(out, &args[2 + numkeys..]) else { return };
    if missing {
        return reply::integer(out, 0);
    }
    // Counted in place: the smallest input's members looked up in the others, no copy of any
    // input, and no more than LIMIT found.
    let mut inputs: Vec<ValueRef<'_>> = keys.iter().filter_map(|k| c.ks.get(k)).collect();
    let len = |v: &ValueRef<'_>| match v {
        ValueRef::ZSet(z) => z.len(),
        ValueRef::Set(s) => s.len(),
        _ => 0,
    };
    inputs.sort_by_key(len);
    let (first, rest) = inputs.split_first().expect("at least one key");
    let in_all = |m: &[u8]| {
        rest.iter().all(|v| match v {
            ValueRef::ZSet(z) => z.contains(m),
            ValueRef::Set(s) => s.contains(m),
            _ => false,
        })
    };
    let mut n = 0usize;
    let full = |n: usize| limit > 0 && n >= limit;
    match first {
        ValueRef::ZSet(z) => {
            for (m, _) in z.iter() {
                if full(n) {
                    break;
                }
                n += usize::from(in_all(m));
            }
        }
        ValueRef::Set(s) => s.for_each(|m| {
            if !full(n) && in_all(m) {
                n += 1;
            }
        }),
        _ => {}
    }
    reply::integer(out, n as i64);
}

#[cfg(test)]
mod tests {
    //! Reply-exact scripts. Each script runs on a fresh engine; the expected replies were
    //! recorded from redis-server 7.0.15 running the same commands on an empty database, but
    //! for the scores' digits, the score bounds' syntax, an infinite timeout's error and the
    //! SCAN cursor's syntax, which are redis-server 8.2.3's (Redis 7.2 to 8 changed them).
    use crate::{Engine, Outcome};

    type Script = &'static [(&'static [&'static str], &'static [u8])];

    fn run_script(script: Script) {
        let mut e = Engine::default();
        for (i, (args, want)) in script.iter().enumerate() {
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            let mut out = Vec::new();
            let outcome = e.run(&args, 1_000_000, &mut out);
            assert_eq!(outcome, Outcome::Done, "step {i}: {args:?} blocked");
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(want),
                "step {i}: {:?}",
                args.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn redis_script_basic() {
        run_script(&[
            (&["ZADD", "z", "1", "a", "2", "b", "3", "c"], b":3\r\n"),
            (&["ZADD", "z", "1", "a"], b":0\r\n"),
            (&["ZADD", "z", "CH", "5", "a", "2", "b"], b":1\r\n"),
            (&["ZADD", "z", "NX", "10", "a", "4", "d"], b":1\r\n"),
            (&["ZADD", "z", "XX", "11", "a", "5", "e"], b":0\r\n"),
            (&["ZADD", "z", "XX", "CH", "12", "a", "13", "nosuch"], b":1\r\n"),
            (&["ZADD", "z", "GT", "CH", "1", "a", "20", "b"], b":1\r\n"),
            (&["ZADD", "z", "LT", "CH", "1", "a", "30", "b"], b":1\r\n"),
            (&["ZADD", "z", "GT", "100", "newgt"], b":1\r\n"),
            (&["ZADD", "z", "INCR", "1.5", "a"], b"$3\r\n2.5\r\n"),
            (&["ZADD", "z", "INCR", "0", "a"], b"$3\r\n2.5\r\n"),
            (&["ZADD", "z", "GT", "INCR", "-1", "a"], b"$-1\r\n"),
            (&["ZADD", "z", "LT", "INCR", "-1", "a"], b"$3\r\n1.5\r\n"),
            (&["ZADD", "z", "XX", "INCR", "1", "nosuch"], b"$-1\r\n"),
            (&["ZADD", "z", "NX", "INCR", "1", "a"], b"$-1\r\n"),
            (&["ZADD", "z", "NX", "INCR", "1", "fresh"], b"$1\r\n1\r\n"),
            (&["ZADD", "z", "nx", "xx", "1", "a"], b"-ERR XX and NX options at the same time are not compatible\r\n"),
            (&["ZADD", "z", "gt", "nx", "1", "a"], b"-ERR GT, LT, and/or NX options at the same time are not compatible\r\n"),
            (&["ZADD", "z", "lt", "nx", "1", "a"], b"-ERR GT, LT, and/or NX options at the same time are not compatible\r\n"),
            (&["ZADD", "z", "gt", "lt", "1", "a"], b"-ERR GT, LT, and/or NX options at the same time are not compatible\r\n"),
            (&["ZADD", "z", "incr", "1", "a", "2", "b"], b"-ERR INCR option supports a single increment-element pair\r\n"),
            (&["ZADD", "z", "nx", "1"], b"-ERR syntax error\r\n"),
            (&["ZADD", "z", "1", "a", "2"], b"-ERR syntax error\r\n"),
            (&["ZADD", "z", "x", "a"], b"-ERR value is not a valid float\r\n"),
            (&["ZADD", "z", "nan", "a"], b"-ERR value is not a valid float\r\n"),
            (&["ZADD", "z", "1", "a", "nan", "b"], b"-ERR value is not a valid float\r\n"),
            (&["ZADD", "z", "inf", "pinf", "-inf", "ninf"], b":2\r\n"),
            (&["ZADD", "z", "+inf", "pinf"], b":0\r\n"),
            (&["ZADD", "z", "INCR", "-inf", "pinf"], b"-ERR resulting score is not a number (NaN)\r\n"),
            (&["ZSCORE", "z", "pinf"], b"$3\r\ninf\r\n"),
            (&["ZADD", "nokey", "XX", "1", "a"], b":0\r\n"),
            (&["ZADD", "nokey", "XX", "INCR", "1", "a"], b"$-1\r\n"),
            (&["EXISTS", "nokey"], b":0\r\n"),
            (&["SET", "str", "v"], b"+OK\r\n"),
            (&["ZADD", "str", "1", "a"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZADD", "str", "nx", "xx", "1", "a"], b"-ERR XX and NX options at the same time are not compatible\r\n"),
            (&["ZADD", "str", "x", "a"], b"-ERR value is not a valid float\r\n"),
            (&["ZRANGE", "z", "0", "-1", "WITHSCORES"], b"*16\r\n$4\r\nninf\r\n$4\r\n-inf\r\n$5\r\nfresh\r\n$1\r\n1\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\nb\r\n$2\r\n20\r\n$5\r\nnewgt\r\n$3\r\n100\r\n$4\r\npinf\r\n$3\r\ninf\r\n"),
            (&["ZCARD", "z"], b":8\r\n"),
            (&["ZCARD", "nokey"], b":0\r\n"),
            (&["ZCARD", "str"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZINCRBY", "z", "2.5", "b"], b"$4\r\n22.5\r\n"),
            (&["ZINCRBY", "z", "x", "b"], b"-ERR value is not a valid float\r\n"),
            (&["ZINCRBY", "z", "-inf", "pinf"], b"-ERR resulting score is not a number (NaN)\r\n"),
            (&["ZINCRBY", "inc", "0.1", "m"], b"$3\r\n0.1\r\n"),
            (&["ZINCRBY", "inc", "0.2", "m"], b"$19\r\n0.30000000000000004\r\n"),
            (&["ZINCRBY", "str", "1", "a"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZSCORE", "inc", "m"], b"$19\r\n0.30000000000000004\r\n"),
            (&["ZSCORE", "inc", "nosuch"], b"$-1\r\n"),
            (&["ZSCORE", "nokey", "m"], b"$-1\r\n"),
            (&["ZSCORE", "str", "m"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZMSCORE", "z", "a", "nosuch", "b"], b"*3\r\n$3\r\n1.5\r\n$-1\r\n$4\r\n22.5\r\n"),
            (&["ZMSCORE", "nokey", "a", "b"], b"*2\r\n$-1\r\n$-1\r\n"),
            (&["ZMSCORE", "str", "a"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZREM", "z", "nosuch"], b":0\r\n"),
            (&["ZREM", "z", "a", "b", "nosuch", "a"], b":2\r\n"),
            (&["ZREM", "nokey", "a"], b":0\r\n"),
            (&["ZREM", "str", "a"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZREM", "inc", "m"], b":1\r\n"),
            (&["EXISTS", "inc"], b":0\r\n"),
            (&["ZADD", "f", "0.1", "a", "1e20", "b", "-0", "c", "1.5e-7", "d", "123456789012345678", "e", "1e16", "f", "0.00001", "g", "-1.5", "h", "1e300", "i", "5e-324", "j"], b":10\r\n"),
            (&["ZRANGE", "f", "0", "-1", "WITHSCORES"], b"*20\r\n$1\r\nh\r\n$4\r\n-1.5\r\n$1\r\nc\r\n$1\r\n0\r\n$1\r\nj\r\n$6\r\n5e-324\r\n$1\r\nd\r\n$6\r\n1.5e-7\r\n$1\r\ng\r\n$7\r\n0.00001\r\n$1\r\na\r\n$3\r\n0.1\r\n$1\r\nf\r\n$17\r\n10000000000000000\r\n$1\r\ne\r\n$18\r\n123456789012345680\r\n$1\r\nb\r\n$5\r\n1e+20\r\n$1\r\ni\r\n$6\r\n1e+300\r\n"),
            (&["ZADD", "ff", "-0", "a"], b":1\r\n"),
            (&["ZSCORE", "ff", "a"], b"$1\r\n0\r\n"),
            (&["ZADD", "r", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"], b":5\r\n"),
            (&["ZCOUNT", "r", "2", "4"], b":3\r\n"),
            (&["ZCOUNT", "r", "(2", "4"], b":2\r\n"),
            (&["ZCOUNT", "r", "(2", "(4"], b":1\r\n"),
            (&["ZCOUNT", "r", "-inf", "+inf"], b":5\r\n"),
            (&["ZCOUNT", "r", "4", "2"], b":0\r\n"),
            (&["ZCOUNT", "r", "x", "2"], b"-ERR min or max is not a float\r\n"),
            (&["ZCOUNT", "r", "1", "(x"], b"-ERR min or max is not a float\r\n"),
            (&["ZCOUNT", "r", "", ""], b":0\r\n"),
            (&["ZCOUNT", "r", " 1", "3"], b"-ERR min or max is not a float\r\n"),
            (&["ZCOUNT", "r", "nan", "3"], b"-ERR min or max is not a float\r\n"),
            (&["ZCOUNT", "nokey", "1", "2"], b":0\r\n"),
            (&["ZCOUNT", "str", "1", "2"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZCOUNT", "str", "x", "2"], b"-ERR min or max is not a float\r\n"),
            (&["ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e", "0", "f"], b":6\r\n"),
            (&["ZLEXCOUNT", "lex", "-", "+"], b":6\r\n"),
            (&["ZLEXCOUNT", "lex", "[b", "(e"], b":3\r\n"),
            (&["ZLEXCOUNT", "lex", "(b", "[e"], b":3\r\n"),
            (&["ZLEXCOUNT", "lex", "+", "-"], b":0\r\n"),
            (&["ZLEXCOUNT", "lex", "a", "b"], b"-ERR min or max not valid string range item\r\n"),
            (&["ZLEXCOUNT", "lex", "[a", "x"], b"-ERR min or max not valid string range item\r\n"),
            (&["ZLEXCOUNT", "nokey", "-", "+"], b":0\r\n"),
            (&["ZLEXCOUNT", "str", "-", "+"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZLEXCOUNT", "str", "a", "b"], b"-ERR min or max not valid string range item\r\n"),
            (&["ZRANK", "r", "c"], b":2\r\n"),
            (&["ZRANK", "r", "nosuch"], b"$-1\r\n"),
            (&["ZRANK", "nokey", "a"], b"$-1\r\n"),
            (&["ZRANK", "str", "a"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZREVRANK", "r", "c"], b":2\r\n"),
            (&["ZREVRANK", "r", "a"], b":4\r\n"),
            (&["ZREVRANK", "r", "nosuch"], b"$-1\r\n"),
        ]);
    }

    #[test]
    fn redis_script_range() {
        run_script(&[
            (&["ZADD", "r", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"], b":5\r\n"),
            (&["SET", "str", "v"], b"+OK\r\n"),
            (&["ZRANGE", "r", "0", "-1"], b"*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"),
            (&["ZRANGE", "r", "0", "-1", "WITHSCORES"], b"*10\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\ne\r\n$1\r\n5\r\n"),
            (&["ZRANGE", "r", "1", "2"], b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n"),
            (&["ZRANGE", "r", "-2", "-1"], b"*2\r\n$1\r\nd\r\n$1\r\ne\r\n"),
            (&["ZRANGE", "r", "-100", "100"], b"*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"),
            (&["ZRANGE", "r", "3", "1"], b"*0\r\n"),
            (&["ZRANGE", "r", "5", "10"], b"*0\r\n"),
            (&["ZRANGE", "r", "0", "-1", "REV"], b"*5\r\n$1\r\ne\r\n$1\r\nd\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n"),
            (&["ZRANGE", "r", "1", "2", "REV", "WITHSCORES"], b"*4\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (&["ZRANGE", "r", "x", "1"], b"-ERR value is not an integer or out of range\r\n"),
            (&["ZRANGE", "r", "0", "-1", "LIMIT", "0", "1"], b"-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n"),
            (&["ZRANGE", "r", "0", "-1", "LIMIT", "0", "-1"], b"*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"),
            (&["ZRANGE", "r", "0", "-1", "LIMIT", "0"], b"-ERR syntax error\r\n"),
            (&["ZRANGE", "r", "0", "-1", "REV", "REV"], b"-ERR syntax error\r\n"),
            (&["ZRANGE", "r", "0", "-1", "BYSCORE", "BYLEX"], b"-ERR syntax error\r\n"),
            (&["ZRANGE", "r", "0", "-1", "foo"], b"-ERR syntax error\r\n"),
            (&["ZRANGE", "r", "(1", "5", "BYSCORE"], b"*4\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"),
            (&["ZRANGE", "r", "5", "(1", "BYSCORE", "REV", "LIMIT", "1", "2", "WITHSCORES"], b"*4\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (&["ZRANGE", "r", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "2"], b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n"),
            (&["ZRANGE", "r", "-inf", "+inf", "BYSCORE", "LIMIT", "-1", "2"], b"*0\r\n"),
            (&["ZRANGE", "r", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "-2"], b"*4\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"),
            (&["ZRANGE", "r", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "0"], b"*0\r\n"),
            (&["ZRANGE", "r", "-inf", "+inf", "BYSCORE", "LIMIT", "10", "1"], b"*0\r\n"),
            (&["ZRANGE", "r", "-inf", "+inf", "BYSCORE", "LIMIT", "x", "1"], b"-ERR value is not an integer or out of range\r\n"),
            (&["ZRANGE", "r", "a", "b", "BYSCORE"], b"-ERR min or max is not a float\r\n"),
            (&["ZRANGE", "r", "-", "+", "BYLEX"], b"*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"),
            (&["ZRANGE", "r", "-", "+", "BYLEX", "WITHSCORES"], b"-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n"),
            (&["ZRANGE", "r", "a", "b", "BYLEX"], b"-ERR min or max not valid string range item\r\n"),
            (&["ZRANGE", "r", "0", "-1", "nokey"], b"-ERR syntax error\r\n"),
            (&["ZRANGE", "nokey", "0", "-1"], b"*0\r\n"),
            (&["ZRANGE", "str", "0", "-1"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZRANGE", "str", "x", "-1"], b"-ERR value is not an integer or out of range\r\n"),
            (&["ZRANGEBYSCORE", "r", "2", "4"], b"*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"),
            (&["ZRANGEBYSCORE", "r", "2", "4", "WITHSCORES"], b"*6\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n4\r\n"),
            (&["ZRANGEBYSCORE", "r", "(2", "4", "WITHSCORES", "LIMIT", "1", "5"], b"*2\r\n$1\r\nd\r\n$1\r\n4\r\n"),
            (&["ZRANGEBYSCORE", "r", "-inf", "+inf", "LIMIT", "0"], b"-ERR syntax error\r\n"),
            (&["ZRANGEBYSCORE", "r", "-inf", "+inf", "REV"], b"-ERR syntax error\r\n"),
            (&["ZRANGEBYSCORE", "r", "x", "1"], b"-ERR min or max is not a float\r\n"),
            (&["ZRANGEBYSCORE", "nokey", "1", "2"], b"*0\r\n"),
            (&["ZRANGEBYSCORE", "str", "1", "2"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZREVRANGEBYSCORE", "r", "4", "2"], b"*3\r\n$1\r\nd\r\n$1\r\nc\r\n$1\r\nb\r\n"),
            (&["ZREVRANGEBYSCORE", "r", "4", "(2", "WITHSCORES"], b"*4\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (&["ZREVRANGEBYSCORE", "r", "+inf", "-inf", "LIMIT", "1", "2"], b"*2\r\n$1\r\nd\r\n$1\r\nc\r\n"),
            (&["ZREVRANGEBYSCORE", "r", "2", "4"], b"*0\r\n"),
            (&["ZREVRANGEBYSCORE", "r", "5", "(1", "WITHSCORES", "LIMIT", "1", "2"], b"*4\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (&["ZREVRANGE", "r", "0", "1"], b"*2\r\n$1\r\ne\r\n$1\r\nd\r\n"),
            (&["ZREVRANGE", "r", "0", "-1", "WITHSCORES"], b"*10\r\n$1\r\ne\r\n$1\r\n5\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n1\r\n"),
            (&["ZREVRANGE", "r", "0", "1", "LIMIT", "0", "1"], b"-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n"),
            (&["ZREVRANGE", "r", "-2", "-1"], b"*2\r\n$1\r\nb\r\n$1\r\na\r\n"),
            (&["ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e", "0", "f"], b":6\r\n"),
            (&["ZRANGEBYLEX", "lex", "-", "+"], b"*6\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n"),
            (&["ZRANGEBYLEX", "lex", "[b", "(e"], b"*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"),
            (&["ZRANGEBYLEX", "lex", "[b", "[e", "LIMIT", "1", "2"], b"*2\r\n$1\r\nc\r\n$1\r\nd\r\n"),
            (&["ZRANGEBYLEX", "lex", "-", "+", "LIMIT", "1", "-1"], b"*5\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n"),
            (&["ZRANGEBYLEX", "lex", "-", "+", "WITHSCORES"], b"-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n"),
            (&["ZRANGEBYLEX", "lex", "b", "e"], b"-ERR min or max not valid string range item\r\n"),
            (&["ZRANGEBYLEX", "lex", "+", "-"], b"*0\r\n"),
            (&["ZREVRANGEBYLEX", "lex", "+", "-"], b"*6\r\n$1\r\nf\r\n$1\r\ne\r\n$1\r\nd\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n"),
            (&["ZREVRANGEBYLEX", "lex", "(e", "[b"], b"*3\r\n$1\r\nd\r\n$1\r\nc\r\n$1\r\nb\r\n"),
            (&["ZREVRANGEBYLEX", "lex", "+", "-", "LIMIT", "1", "1"], b"*1\r\n$1\r\ne\r\n"),
            (&["ZREVRANGEBYLEX", "lex", "-", "+"], b"*0\r\n"),
            (&["ZRANGE", "lex", "[c", "+", "BYLEX"], b"*4\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n"),
            (&["ZRANGE", "lex", "+", "[c", "BYLEX", "REV", "LIMIT", "0", "2"], b"*2\r\n$1\r\nf\r\n$1\r\ne\r\n"),
            (&["ZRANGESTORE", "dst", "r", "0", "-1", "WITHSCORES"], b"-ERR syntax error\r\n"),
            (&["ZRANGESTORE", "dst", "r", "1", "2"], b":2\r\n"),
            (&["ZRANGE", "dst", "0", "-1", "WITHSCORES"], b"*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (&["ZRANGESTORE", "dst", "r", "5", "(1", "BYSCORE", "REV", "LIMIT", "0", "2"], b":2\r\n"),
            (&["ZRANGE", "dst", "0", "-1", "WITHSCORES"], b"*4\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\ne\r\n$1\r\n5\r\n"),
            (&["ZRANGESTORE", "dst", "r", "10", "20"], b":0\r\n"),
            (&["EXISTS", "dst"], b":0\r\n"),
            (&["ZRANGESTORE", "dst", "nokey", "0", "-1"], b":0\r\n"),
            (&["ZRANGESTORE", "dst", "str", "0", "-1"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZRANGESTORE", "str", "r", "0", "0"], b":1\r\n"),
            (&["TYPE", "str"], b"+zset\r\n"),
            (&["ZRANGE", "str", "0", "-1", "WITHSCORES"], b"*2\r\n$1\r\na\r\n$1\r\n1\r\n"),
            (&["ZRANGESTORE", "dst2", "lex", "[b", "[d", "BYLEX"], b":3\r\n"),
            (&["ZRANGE", "dst2", "0", "-1"], b"*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"),
            (&["ZRANGESTORE", "dst", "r", "0", "-1", "LIMIT", "0", "1"], b"-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n"),
        ]);
    }

    #[test]
    fn redis_script_pops() {
        run_script(&[
            (&["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "6", "f"], b":6\r\n"),
            (&["SET", "str", "v"], b"+OK\r\n"),
            (&["ZPOPMIN", "z"], b"*2\r\n$1\r\na\r\n$1\r\n1\r\n"),
            (&["ZPOPMAX", "z"], b"*2\r\n$1\r\nf\r\n$1\r\n6\r\n"),
            (&["ZPOPMIN", "z", "2"], b"*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (&["ZPOPMAX", "z", "0"], b"*0\r\n"),
            (&["ZPOPMIN", "z", "-1"], b"-ERR value is out of range, must be positive\r\n"),
            (&["ZPOPMIN", "z", "x"], b"-ERR value is out of range, must be positive\r\n"),
            (&["ZPOPMIN", "z", "1", "2"], b"-ERR syntax error\r\n"),
            (&["ZPOPMIN", "nokey"], b"*0\r\n"),
            (&["ZPOPMIN", "nokey", "3"], b"*0\r\n"),
            (&["ZPOPMIN", "str"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZPOPMAX", "z", "10"], b"*4\r\n$1\r\ne\r\n$1\r\n5\r\n$1\r\nd\r\n$1\r\n4\r\n"),
            (&["EXISTS", "z"], b":0\r\n"),
            (&["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"], b":5\r\n"),
            (&["ZMPOP", "1", "z", "MIN"], b"*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"),
            (&["ZMPOP", "1", "z", "MAX", "COUNT", "2"], b"*2\r\n$1\r\nz\r\n*2\r\n*2\r\n$1\r\ne\r\n$1\r\n5\r\n*2\r\n$1\r\nd\r\n$1\r\n4\r\n"),
            (&["ZMPOP", "2", "nokey", "z", "min", "count", "10"], b"*2\r\n$1\r\nz\r\n*2\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (&["EXISTS", "z"], b":0\r\n"),
            (&["ZMPOP", "1", "z", "MIN"], b"*-1\r\n"),
            (&["ZMPOP", "0", "z", "MIN"], b"-ERR numkeys should be greater than 0\r\n"),
            (&["ZMPOP", "x", "z", "MIN"], b"-ERR numkeys should be greater than 0\r\n"),
            (&["ZMPOP", "2", "z", "MIN"], b"-ERR syntax error\r\n"),
            (&["ZMPOP", "1", "z", "MID"], b"-ERR syntax error\r\n"),
            (&["ZMPOP", "1", "z", "MIN", "COUNT", "0"], b"-ERR count should be greater than 0\r\n"),
            (&["ZMPOP", "1", "z", "MIN", "COUNT", "-1"], b"-ERR count should be greater than 0\r\n"),
            (&["ZMPOP", "1", "z", "MIN", "COUNT", "x"], b"-ERR count should be greater than 0\r\n"),
            (&["ZMPOP", "1", "z", "MIN", "COUNT", "1", "COUNT", "2"], b"-ERR syntax error\r\n"),
            (&["ZMPOP", "1", "z", "MIN", "COUNT"], b"-ERR syntax error\r\n"),
            (&["ZMPOP", "1", "str", "MIN"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZMPOP", "2", "nokey", "str", "MIN"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZADD", "y", "1", "a", "2", "b"], b":2\r\n"),
            (&["BZPOPMIN", "y", "0"], b"*3\r\n$1\r\ny\r\n$1\r\na\r\n$1\r\n1\r\n"),
            (&["BZPOPMAX", "nokey", "y", "0.5"], b"*3\r\n$1\r\ny\r\n$1\r\nb\r\n$1\r\n2\r\n"),
            (&["BZPOPMIN", "y", "x"], b"-ERR timeout is not a float or out of range\r\n"),
            (&["BZPOPMIN", "y", "-1"], b"-ERR timeout is negative\r\n"),
            (&["BZPOPMIN", "y", "inf"], b"-ERR timeout is out of range\r\n"),
            (&["BZPOPMIN", "str", "0"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZADD", "y", "1", "a", "2", "b", "3", "c"], b":3\r\n"),
            (&["BZMPOP", "0", "1", "y", "MIN"], b"*2\r\n$1\r\ny\r\n*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"),
            (&["BZMPOP", "0.1", "2", "nokey", "y", "MAX", "COUNT", "5"], b"*2\r\n$1\r\ny\r\n*2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"),
            (&["BZMPOP", "x", "1", "y", "MIN"], b"-ERR timeout is not a float or out of range\r\n"),
            (&["BZMPOP", "-1", "1", "y", "MIN"], b"-ERR timeout is negative\r\n"),
            (&["BZMPOP", "0", "0", "y", "MIN"], b"-ERR numkeys should be greater than 0\r\n"),
            (&["BZMPOP", "0", "1", "y", "FOO"], b"-ERR syntax error\r\n"),
            (&["BZMPOP", "0", "1", "str", "MIN"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZADD", "r", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "6", "f"], b":6\r\n"),
            (&["ZREMRANGEBYRANK", "r", "0", "1"], b":2\r\n"),
            (&["ZREMRANGEBYRANK", "r", "-1", "-1"], b":1\r\n"),
            (&["ZREMRANGEBYRANK", "r", "5", "10"], b":0\r\n"),
            (&["ZREMRANGEBYRANK", "r", "x", "1"], b"-ERR value is not an integer or out of range\r\n"),
            (&["ZREMRANGEBYRANK", "nokey", "0", "1"], b":0\r\n"),
            (&["ZREMRANGEBYRANK", "str", "0", "1"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZREMRANGEBYRANK", "str", "x", "1"], b"-ERR value is not an integer or out of range\r\n"),
            (&["ZRANGE", "r", "0", "-1", "WITHSCORES"], b"*6\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\ne\r\n$1\r\n5\r\n"),
            (&["ZREMRANGEBYSCORE", "r", "(3", "4"], b":1\r\n"),
            (&["ZREMRANGEBYSCORE", "r", "x", "1"], b"-ERR min or max is not a float\r\n"),
            (&["ZREMRANGEBYSCORE", "nokey", "0", "1"], b":0\r\n"),
            (&["ZREMRANGEBYSCORE", "str", "0", "1"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZREMRANGEBYSCORE", "str", "x", "1"], b"-ERR min or max is not a float\r\n"),
            (&["ZREMRANGEBYSCORE", "r", "-inf", "+inf"], b":2\r\n"),
            (&["EXISTS", "r"], b":0\r\n"),
            (&["ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e"], b":5\r\n"),
            (&["ZREMRANGEBYLEX", "lex", "[b", "(d"], b":2\r\n"),
            (&["ZREMRANGEBYLEX", "lex", "a", "b"], b"-ERR min or max not valid string range item\r\n"),
            (&["ZREMRANGEBYLEX", "nokey", "-", "+"], b":0\r\n"),
            (&["ZREMRANGEBYLEX", "str", "-", "+"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZRANGE", "lex", "0", "-1"], b"*3\r\n$1\r\na\r\n$1\r\nd\r\n$1\r\ne\r\n"),
            (&["ZREMRANGEBYLEX", "lex", "-", "+"], b":3\r\n"),
            (&["EXISTS", "lex"], b":0\r\n"),
            (&["ZADD", "q", "1", "a", "2", "b", "3", "c"], b":3\r\n"),
            (&["ZRANDMEMBER", "nokey"], b"$-1\r\n"),
            (&["ZRANDMEMBER", "nokey", "3"], b"*0\r\n"),
            (&["ZRANDMEMBER", "q", "0"], b"*0\r\n"),
            (&["ZRANDMEMBER", "q", "3", "WITHSCORES"], b"*6\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n1\r\n"),
            (&["ZRANDMEMBER", "q", "10"], b"*3\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n"),
            (&["ZRANDMEMBER", "q", "x"], b"-ERR value is not an integer or out of range\r\n"),
            (&["ZRANDMEMBER", "q", "1", "WITHSCORE"], b"-ERR syntax error\r\n"),
            (&["ZRANDMEMBER", "q", "1", "WITHSCORES", "x"], b"-ERR syntax error\r\n"),
            (&["ZRANDMEMBER", "q", "-9223372036854775808"], b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"),
            (&["ZRANDMEMBER", "q", "9223372036854775807", "WITHSCORES"], b"-ERR value is out of range\r\n"),
            (&["ZRANDMEMBER", "str"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZRANDMEMBER", "str", "1"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZSCAN", "q", "0"], b"*2\r\n$1\r\n0\r\n*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (&["ZSCAN", "q", "0", "MATCH", "a*"], b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"),
            (&["ZSCAN", "q", "0", "COUNT", "1"], b"*2\r\n$1\r\n0\r\n*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (&["ZSCAN", "q", "0", "COUNT", "0"], b"-ERR syntax error\r\n"),
            (&["ZSCAN", "q", "0", "COUNT", "x"], b"-ERR value is not an integer or out of range\r\n"),
            (&["ZSCAN", "q", "abc"], b"-ERR invalid cursor\r\n"),
            (&["ZSCAN", "q", "0", "TYPE", "string"], b"-ERR syntax error\r\n"),
            (&["ZSCAN", "q", "0", "MATCH"], b"-ERR syntax error\r\n"),
            (&["ZSCAN", "nokey", "0"], b"*2\r\n$1\r\n0\r\n*0\r\n"),
            (&["ZSCAN", "str", "0"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ]);
    }

    #[test]
    fn redis_script_algebra() {
        run_script(&[
            (&["ZADD", "z1", "1", "a", "2", "b", "3", "c"], b":3\r\n"),
            (&["ZADD", "z2", "10", "b", "20", "c", "30", "d"], b":3\r\n"),
            (&["SADD", "s1", "a", "c", "x"], b":3\r\n"),
            (&["SET", "str", "v"], b"+OK\r\n"),
            (&["ZUNION", "2", "z1", "z2"], b"*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"),
            (&["ZUNION", "2", "z1", "z2", "WITHSCORES"], b"*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            (&["ZUNION", "2", "z1", "z2", "WEIGHTS", "2", "0.5", "WITHSCORES"], b"*8\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$1\r\n9\r\n$1\r\nd\r\n$2\r\n15\r\n$1\r\nc\r\n$2\r\n16\r\n"),
            (&["ZUNION", "2", "z1", "z2", "AGGREGATE", "MIN", "WITHSCORES"], b"*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            (&["ZUNION", "2", "z1", "z2", "AGGREGATE", "MAX", "WITHSCORES"], b"*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n10\r\n$1\r\nc\r\n$2\r\n20\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            (&["ZUNION", "3", "z1", "z2", "s1", "WITHSCORES"], b"*10\r\n$1\r\nx\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n24\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            (&["ZUNION", "2", "z1", "nokey", "WITHSCORES"], b"*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (&["ZUNION", "0", "z1"], b"-ERR at least 1 input key is needed for 'zunion' command\r\n"),
            (&["ZUNION", "-1", "z1"], b"-ERR at least 1 input key is needed for 'zunion' command\r\n"),
            (&["ZUNION", "x", "z1"], b"-ERR value is not an integer or out of range\r\n"),
            (&["ZUNION", "3", "z1", "z2"], b"-ERR syntax error\r\n"),
            (&["ZUNION", "2", "z1", "str"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZUNION", "2", "str", "z1", "WEIGHTS", "x"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZUNION", "1", "z1", "WEIGHTS", "x"], b"-ERR weight value is not a float\r\n"),
            (&["ZUNION", "2", "z1", "z2", "WEIGHTS", "1"], b"-ERR syntax error\r\n"),
            (&["ZUNION", "2", "z1", "z2", "AGGREGATE", "foo"], b"-ERR syntax error\r\n"),
            (&["ZUNION", "2", "z1", "z2", "AGGREGATE"], b"-ERR syntax error\r\n"),
            (&["ZUNION", "2", "z1", "z2", "WITHSCORES", "WITHSCORES"], b"*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            (&["ZUNION", "2", "z1", "z2", "foo"], b"-ERR syntax error\r\n"),
            (&["ZINTER", "2", "z1", "z2", "WITHSCORES"], b"*4\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n"),
            (&["ZINTER", "2", "z1", "s1", "WITHSCORES"], b"*4\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n4\r\n"),
            (&["ZINTER", "3", "z1", "z2", "s1"], b"*1\r\n$1\r\nc\r\n"),
            (&["ZINTER", "2", "z1", "nokey"], b"*0\r\n"),
            (&["ZINTER", "2", "z1", "z2", "WEIGHTS", "1", "-1", "AGGREGATE", "MAX", "WITHSCORES"], b"*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (&["ZINTER", "2", "str", "z1"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZDIFF", "2", "z1", "z2", "WITHSCORES"], b"*2\r\n$1\r\na\r\n$1\r\n1\r\n"),
            (&["ZDIFF", "2", "z1", "s1"], b"*1\r\n$1\r\nb\r\n"),
            (&["ZDIFF", "1", "z1", "WITHSCORES"], b"*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (&["ZDIFF", "2", "nokey", "z1"], b"*0\r\n"),
            (&["ZDIFF", "2", "z1", "z2", "WEIGHTS", "1", "1"], b"-ERR syntax error\r\n"),
            (&["ZDIFF", "2", "z1", "z2", "AGGREGATE", "MIN"], b"-ERR syntax error\r\n"),
            (&["ZDIFF", "2", "z1", "str"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZADD", "pinf", "inf", "x"], b":1\r\n"),
            (&["ZADD", "ninf", "-inf", "x"], b":1\r\n"),
            (&["ZUNION", "2", "pinf", "ninf", "WITHSCORES"], b"*2\r\n$1\r\nx\r\n$1\r\n0\r\n"),
            (&["ZUNION", "2", "pinf", "ninf", "WEIGHTS", "0", "1", "WITHSCORES"], b"*2\r\n$1\r\nx\r\n$4\r\n-inf\r\n"),
            (&["ZINTER", "2", "pinf", "ninf", "AGGREGATE", "MAX", "WITHSCORES"], b"*2\r\n$1\r\nx\r\n$3\r\ninf\r\n"),
            (&["ZINTER", "2", "pinf", "ninf", "WITHSCORES"], b"*2\r\n$1\r\nx\r\n$1\r\n0\r\n"),
            (&["ZUNIONSTORE", "dst", "2", "z1", "z2"], b":4\r\n"),
            (&["ZRANGE", "dst", "0", "-1", "WITHSCORES"], b"*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            (&["ZUNIONSTORE", "dst", "2", "z1", "z2", "WEIGHTS", "1", "2", "AGGREGATE", "MAX"], b":4\r\n"),
            (&["ZRANGE", "dst", "0", "-1", "WITHSCORES"], b"*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n20\r\n$1\r\nc\r\n$2\r\n40\r\n$1\r\nd\r\n$2\r\n60\r\n"),
            (&["ZUNIONSTORE", "dst", "1", "z1", "WITHSCORES"], b"-ERR syntax error\r\n"),
            (&["ZUNIONSTORE", "dst", "0", "z1"], b"-ERR at least 1 input key is needed for 'zunionstore' command\r\n"),
            (&["ZINTERSTORE", "dst", "2", "z1", "nokey"], b":0\r\n"),
            (&["EXISTS", "dst"], b":0\r\n"),
            (&["ZINTERSTORE", "dst", "2", "z1", "z2"], b":2\r\n"),
            (&["ZRANGE", "dst", "0", "-1", "WITHSCORES"], b"*4\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n"),
            (&["ZDIFFSTORE", "dst", "2", "z2", "z1"], b":1\r\n"),
            (&["ZRANGE", "dst", "0", "-1", "WITHSCORES"], b"*2\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            (&["ZDIFFSTORE", "dst", "0", "z1"], b"-ERR at least 1 input key is needed for 'zdiffstore' command\r\n"),
            (&["ZDIFFSTORE", "str", "1", "z1"], b":3\r\n"),
            (&["TYPE", "str"], b"+zset\r\n"),
            (&["ZUNIONSTORE", "z1", "2", "z1", "z2"], b":4\r\n"),
            (&["ZRANGE", "z1", "0", "-1", "WITHSCORES"], b"*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            (&["ZINTERSTORE", "dst", "2", "z1", "str"], b":3\r\n"),
            (&["ZINTERCARD", "2", "z1", "z2"], b":3\r\n"),
            (&["ZINTERCARD", "2", "z1", "s1"], b":2\r\n"),
            (&["ZINTERCARD", "2", "z1", "z2", "LIMIT", "1"], b":1\r\n"),
            (&["ZINTERCARD", "2", "z1", "z2", "LIMIT", "0"], b":3\r\n"),
            (&["ZINTERCARD", "2", "z1", "z2", "LIMIT", "-1"], b"-ERR LIMIT can't be negative\r\n"),
            (&["ZINTERCARD", "2", "z1", "z2", "LIMIT", "x"], b"-ERR LIMIT can't be negative\r\n"),
            (&["ZINTERCARD", "2", "z1", "z2", "LIMIT"], b"-ERR syntax error\r\n"),
            (&["ZINTERCARD", "0", "z1"], b"-ERR at least 1 input key is needed for 'zintercard' command\r\n"),
            (&["ZINTERCARD", "x", "z1"], b"-ERR value is not an integer or out of range\r\n"),
            (&["ZINTERCARD", "3", "z1", "z2"], b"-ERR syntax error\r\n"),
            (&["ZINTERCARD", "2", "z1", "nokey"], b":0\r\n"),
            (&["ZINTERCARD", "1", "s1"], b":3\r\n"),
            (&["ZINTERCARD", "2", "z1", "z2", "foo"], b"-ERR syntax error\r\n"),
            (&["SET", "str", "v"], b"+OK\r\n"),
            (&["ZINTERCARD", "2", "z1", "str"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ]);
    }

    /// The algebra script without set inputs (runs even before SADD exists).
    #[test]
    fn redis_script_algebra_zsets_only() {
        run_script(&[
            (&["ZADD", "z1", "1", "a", "2", "b", "3", "c"], b":3\r\n"),
            (&["ZADD", "z2", "10", "b", "20", "c", "30", "d"], b":3\r\n"),
            (&["SET", "str", "v"], b"+OK\r\n"),
            (&["ZUNION", "2", "z1", "z2"], b"*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"),
            (&["ZUNION", "2", "z1", "z2", "WITHSCORES"], b"*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            (&["ZUNION", "2", "z1", "z2", "WEIGHTS", "2", "0.5", "WITHSCORES"], b"*8\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$1\r\n9\r\n$1\r\nd\r\n$2\r\n15\r\n$1\r\nc\r\n$2\r\n16\r\n"),
            (&["ZUNION", "2", "z1", "z2", "AGGREGATE", "MIN", "WITHSCORES"], b"*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            (&["ZUNION", "2", "z1", "z2", "AGGREGATE", "MAX", "WITHSCORES"], b"*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n10\r\n$1\r\nc\r\n$2\r\n20\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            (&["ZUNION", "2", "z1", "nokey", "WITHSCORES"], b"*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (&["ZUNION", "0", "z1"], b"-ERR at least 1 input key is needed for 'zunion' command\r\n"),
            (&["ZUNION", "-1", "z1"], b"-ERR at least 1 input key is needed for 'zunion' command\r\n"),
            (&["ZUNION", "x", "z1"], b"-ERR value is not an integer or out of range\r\n"),
            (&["ZUNION", "3", "z1", "z2"], b"-ERR syntax error\r\n"),
            (&["ZUNION", "2", "z1", "str"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZUNION", "2", "str", "z1", "WEIGHTS", "x"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZUNION", "1", "z1", "WEIGHTS", "x"], b"-ERR weight value is not a float\r\n"),
            (&["ZUNION", "2", "z1", "z2", "WEIGHTS", "1"], b"-ERR syntax error\r\n"),
            (&["ZUNION", "2", "z1", "z2", "AGGREGATE", "foo"], b"-ERR syntax error\r\n"),
            (&["ZUNION", "2", "z1", "z2", "AGGREGATE"], b"-ERR syntax error\r\n"),
            (&["ZUNION", "2", "z1", "z2", "WITHSCORES", "WITHSCORES"], b"*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            (&["ZUNION", "2", "z1", "z2", "foo"], b"-ERR syntax error\r\n"),
            (&["ZINTER", "2", "z1", "z2", "WITHSCORES"], b"*4\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n"),
            (&["ZINTER", "2", "z1", "nokey"], b"*0\r\n"),
            (&["ZINTER", "2", "z1", "z2", "WEIGHTS", "1", "-1", "AGGREGATE", "MAX", "WITHSCORES"], b"*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (&["ZINTER", "2", "str", "z1"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZDIFF", "2", "z1", "z2", "WITHSCORES"], b"*2\r\n$1\r\na\r\n$1\r\n1\r\n"),
            (&["ZDIFF", "1", "z1", "WITHSCORES"], b"*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (&["ZDIFF", "2", "nokey", "z1"], b"*0\r\n"),
            (&["ZDIFF", "2", "z1", "z2", "WEIGHTS", "1", "1"], b"-ERR syntax error\r\n"),
            (&["ZDIFF", "2", "z1", "z2", "AGGREGATE", "MIN"], b"-ERR syntax error\r\n"),
            (&["ZDIFF", "2", "z1", "str"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            (&["ZADD", "pinf", "inf", "x"], b":1\r\n"),
            (&["ZADD", "ninf", "-inf", "x"], b":1\r\n"),
            (&["ZUNION", "2", "pinf", "ninf", "WITHSCORES"], b"*2\r\n$1\r\nx\r\n$1\r\n0\r\n"),
            (&["ZUNION", "2", "pinf", "ninf", "WEIGHTS", "0", "1", "WITHSCORES"], b"*2\r\n$1\r\nx\r\n$4\r\n-inf\r\n"),
            (&["ZINTER", "2", "pinf", "ninf", "AGGREGATE", "MAX", "WITHSCORES"], b"*2\r\n$1\r\nx\r\n$3\r\ninf\r\n"),
            (&["ZINTER", "2", "pinf", "ninf", "WITHSCORES"], b"*2\r\n$1\r\nx\r\n$1\r\n0\r\n"),
            (&["ZUNIONSTORE", "dst", "2", "z1", "z2"], b":4\r\n"),
            (&["ZRANGE", "dst", "0", "-1", "WITHSCORES"], b"*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            (&["ZUNIONSTORE", "dst", "2", "z1", "z2", "WEIGHTS", "1", "2", "AGGREGATE", "MAX"], b":4\r\n"),
            (&["ZRANGE", "dst", "0", "-1", "WITHSCORES"], b"*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n20\r\n$1\r\nc\r\n$2\r\n40\r\n$1\r\nd\r\n$2\r\n60\r\n"),
            (&["ZUNIONSTORE", "dst", "1", "z1", "WITHSCORES"], b"-ERR syntax error\r\n"),
            (&["ZUNIONSTORE", "dst", "0", "z1"], b"-ERR at least 1 input key is needed for 'zunionstore' command\r\n"),
            (&["ZINTERSTORE", "dst", "2", "z1", "nokey"], b":0\r\n"),
            (&["EXISTS", "dst"], b":0\r\n"),
            (&["ZINTERSTORE", "dst", "2", "z1", "z2"], b":2\r\n"),
            (&["ZRANGE", "dst", "0", "-1", "WITHSCORES"], b"*4\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n"),
            (&["ZDIFFSTORE", "dst", "2", "z2", "z1"], b":1\r\n"),
            (&["ZRANGE", "dst", "0", "-1", "WITHSCORES"], b"*2\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            (&["ZDIFFSTORE", "dst", "0", "z1"], b"-ERR at least 1 input key is needed for 'zdiffstore' command\r\n"),
            (&["ZDIFFSTORE", "str", "1", "z1"], b":3\r\n"),
            (&["TYPE", "str"], b"+zset\r\n"),
            (&["ZUNIONSTORE", "z1", "2", "z1", "z2"], b":4\r\n"),
            (&["ZRANGE", "z1", "0", "-1", "WITHSCORES"], b"*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            (&["ZINTERSTORE", "dst", "2", "z1", "str"], b":3\r\n"),
            (&["ZINTERCARD", "2", "z1", "z2"], b":3\r\n"),
            (&["ZINTERCARD", "2", "z1", "z2", "LIMIT", "1"], b":1\r\n"),
            (&["ZINTERCARD", "2", "z1", "z2", "LIMIT", "0"], b":3\r\n"),
            (&["ZINTERCARD", "2", "z1", "z2", "LIMIT", "-1"], b"-ERR LIMIT can't be negative\r\n"),
            (&["ZINTERCARD", "2", "z1", "z2", "LIMIT", "x"], b"-ERR LIMIT can't be negative\r\n"),
            (&["ZINTERCARD", "2", "z1", "z2", "LIMIT"], b"-ERR syntax error\r\n"),
            (&["ZINTERCARD", "0", "z1"], b"-ERR at least 1 input key is needed for 'zintercard' command\r\n"),
            (&["ZINTERCARD", "x", "z1"], b"-ERR value is not an integer or out of range\r\n"),
            (&["ZINTERCARD", "3", "z1", "z2"], b"-ERR syntax error\r\n"),
            (&["ZINTERCARD", "2", "z1", "nokey"], b":0\r\n"),
            (&["ZINTERCARD", "2", "z1", "z2", "foo"], b"-ERR syntax error\r\n"),
            (&["SET", "str", "v"], b"+OK\r\n"),
            (&["ZINTERCARD", "2", "z1", "str"], b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ]);
    }

    /// Sets past the listpack thresholds (the indexed encoding), and encoding transitions.
    #[test]
    fn redis_script_big() {
        run_script(&[
            (&["ZADD", "big", "0", "m0000", "37", "m0001", "74", "m0002", "10", "m0003", "47", "m0004", "84", "m0005", "20", "m0006", "57", "m0007", "94", "m0008", "30", "m0009", "67", "m0010", "3", "m0011", "40", "m0012", "77", "m0013", "13", "m0014", "50", "m0015", "87", "m0016", "23", "m0017", "60", "m0018", "97", "m0019", "33", "m0020", "70", "m0021", "6", "m0022", "43", "m0023", "80", "m0024", "16", "m0025", "53", "m0026", "90", "m0027", "26", "m0028", "63", "m0029", "100", "m0030", "36", "m0031", "73", "m0032", "9", "m0033", "46", "m0034", "83", "m0035", "19", "m0036", "56", "m0037", "93", "m0038", "29", "m0039", "66", "m0040", "2", "m0041", "39", "m0042", "76", "m0043", "12", "m0044", "49", "m0045", "86", "m0046", "22", "m0047", "59", "m0048", "96", "m0049", "32", "m0050", "69", "m0051", "5", "m0052", "42", "m0053", "79", "m0054", "15", "m0055", "52", "m0056", "89", "m0057", "25", "m0058", "62", "m0059", "99", "m0060", "35", "m0061", "72", "m0062", "8", "m0063", "45", "m0064", "82", "m0065", "18", "m0066", "55", "m0067", "92", "m0068", "28", "m0069", "65", "m0070", "1", "m0071", "38", "m0072", "75", "m0073", "11", "m0074", "48", "m0075", "85", "m0076", "21", "m0077", "58", "m0078", "95", "m0079", "31", "m0080", "68", "m0081", "4", "m0082", "41", "m0083", "78", "m0084", "14", "m0085", "51", "m0086", "88", "m0087", "24", "m0088", "61", "m0089", "98", "m0090", "34", "m0091", "71", "m0092", "7", "m0093", "44", "m0094", "81", "m0095", "17", "m0096", "54", "m0097", "91", "m0098", "27", "m0099", "64", "m0100", "0", "m0101", "37", "m0102", "74", "m0103", "10", "m0104", "47", "m0105", "84", "m0106", "20", "m0107", "57", "m0108", "94", "m0109", "30", "m0110", "67", "m0111", "3", "m0112", "40", "m0113", "77", "m0114", "13", "m0115", "50", "m0116", "87", "m0117", "23", "m0118", "60", "m0119", "97", "m0120", "33", "m0121", "70", "m0122", "6", "m0123", "43", "m0124", "80", "m0125", "16", "m0126", "53", "m0127", "90", "m0128", "26", "m0129", "63", "m0130", "100", "m0131", "36", "m0132", "73", "m0133", "9", "m0134", "46", "m0135", "83", "m0136", "19", "m0137", "56", "m0138", "93", "m0139", "29", "m0140", "66", "m0141", "2", "m0142", "39", "m0143", "76", "m0144", "12", "m0145", "49", "m0146", "86", "m0147", "22", "m0148", "59", "m0149", "96", "m0150", "32", "m0151", "69", "m0152", "5", "m0153", "42", "m0154", "79", "m0155", "15", "m0156", "52", "m0157", "89", "m0158", "25", "m0159", "62", "m0160", "99", "m0161", "35", "m0162", "72", "m0163", "8", "m0164", "45", "m0165", "82", "m0166", "18", "m0167", "55", "m0168", "92", "m0169", "28", "m0170", "65", "m0171", "1", "m0172", "38", "m0173", "75", "m0174", "11", "m0175", "48", "m0176", "85", "m0177", "21", "m0178", "58", "m0179", "95", "m0180", "31", "m0181", "68", "m0182", "4", "m0183", "41", "m0184", "78", "m0185", "14", "m0186", "51", "m0187", "88", "m0188", "24", "m0189", "61", "m0190", "98", "m0191", "34", "m0192", "71", "m0193", "7", "m0194", "44", "m0195", "81", "m0196", "17", "m0197", "54", "m0198", "91", "m0199", "27", "m0200", "64", "m0201", "0", "m0202", "37", "m0203", "74", "m0204", "10", "m0205", "47", "m0206", "84", "m0207", "20", "m0208", "57", "m0209", "94", "m0210", "30", "m0211", "67", "m0212", "3", "m0213", "40", "m0214", "77", "m0215", "13", "m0216", "50", "m0217", "87", "m0218", "23", "m0219", "60", "m0220", "97", "m0221", "33", "m0222", "70", "m0223", "6", "m0224", "43", "m0225", "80", "m0226", "16", "m0227", "53", "m0228", "90", "m0229", "26", "m0230", "63", "m0231", "100", "m0232", "36", "m0233", "73", "m0234", "9", "m0235", "46", "m0236", "83", "m0237", "19", "m0238", "56", "m0239", "93", "m0240", "29", "m0241", "66", "m0242", "2", "m0243", "39", "m0244", "76", "m0245", "12", "m0246", "49", "m0247", "86", "m0248", "22", "m0249", "59", "m0250", "96", "m0251", "32", "m0252", "69", "m0253", "5", "m0254", "42", "m0255", "79", "m0256", "15", "m0257", "52", "m0258", "89", "m0259", "25", "m0260", "62", "m0261", "99", "m0262", "35", "m0263", "72", "m0264", "8", "m0265", "45", "m0266", "82", "m0267", "18", "m0268", "55", "m0269", "92", "m0270", "28", "m0271", "65", "m0272", "1", "m0273", "38", "m0274", "75", "m0275", "11", "m0276", "48", "m0277", "85", "m0278", "21", "m0279", "58", "m0280", "95", "m0281", "31", "m0282", "68", "m0283", "4", "m0284", "41", "m0285", "78", "m0286", "14", "m0287", "51", "m0288", "88", "m0289", "24", "m0290", "61", "m0291", "98", "m0292", "34", "m0293", "71", "m0294", "7", "m0295", "44", "m0296", "81", "m0297", "17", "m0298", "54", "m0299"], b":300\r\n"),
            (&["OBJECT", "ENCODING", "big"], b"$8\r\nskiplist\r\n"),
            (&["ZADD", "small", "1", "a"], b":1\r\n"),
            (&["OBJECT", "ENCODING", "small"], b"$8\r\nlistpack\r\n"),
            (&["ZADD", "long", "1", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"], b":1\r\n"),
            (&["OBJECT", "ENCODING", "long"], b"$8\r\nskiplist\r\n"),
            (&["ZADD", "nz", "1", "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"], b":1\r\n"),
            (&["ZADD", "nz", "-0", "negz"], b":1\r\n"),
            (&["ZSCORE", "nz", "negz"], b"$2\r\n-0\r\n"),
            (&["ZADD", "nz", "0", "negz"], b":0\r\n"),
            (&["ZSCORE", "nz", "negz"], b"$2\r\n-0\r\n"),
            (&["ZINCRBY", "nz", "0", "negz"], b"$1\r\n0\r\n"),
            (&["ZRANGE", "nz", "0", "-1", "WITHSCORES"], b"*4\r\n$4\r\nnegz\r\n$2\r\n-0\r\n$65\r\nyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\r\n$1\r\n1\r\n"),
            (&["ZCARD", "big"], b":300\r\n"),
            (&["ZRANGE", "big", "0", "9", "WITHSCORES"], b"*20\r\n$5\r\nm0000\r\n$1\r\n0\r\n$5\r\nm0101\r\n$1\r\n0\r\n$5\r\nm0202\r\n$1\r\n0\r\n$5\r\nm0071\r\n$1\r\n1\r\n$5\r\nm0172\r\n$1\r\n1\r\n$5\r\nm0273\r\n$1\r\n1\r\n$5\r\nm0041\r\n$1\r\n2\r\n$5\r\nm0142\r\n$1\r\n2\r\n$5\r\nm0243\r\n$1\r\n2\r\n$5\r\nm0011\r\n$1\r\n3\r\n"),
            (&["ZRANGE", "big", "-10", "-1", "WITHSCORES"], b"*20\r\n$5\r\nm0221\r\n$2\r\n97\r\n$5\r\nm0090\r\n$2\r\n98\r\n$5\r\nm0191\r\n$2\r\n98\r\n$5\r\nm0292\r\n$2\r\n98\r\n$5\r\nm0060\r\n$2\r\n99\r\n$5\r\nm0161\r\n$2\r\n99\r\n$5\r\nm0262\r\n$2\r\n99\r\n$5\r\nm0030\r\n$3\r\n100\r\n$5\r\nm0131\r\n$3\r\n100\r\n$5\r\nm0232\r\n$3\r\n100\r\n"),
            (&["ZRANGE", "big", "100", "110"], b"*11\r\n$5\r\nm0222\r\n$5\r\nm0091\r\n$5\r\nm0192\r\n$5\r\nm0293\r\n$5\r\nm0061\r\n$5\r\nm0162\r\n$5\r\nm0263\r\n$5\r\nm0031\r\n$5\r\nm0132\r\n$5\r\nm0233\r\n$5\r\nm0001\r\n"),
            (&["ZRANGE", "big", "5", "15", "REV", "WITHSCORES"], b"*22\r\n$5\r\nm0060\r\n$2\r\n99\r\n$5\r\nm0292\r\n$2\r\n98\r\n$5\r\nm0191\r\n$2\r\n98\r\n$5\r\nm0090\r\n$2\r\n98\r\n$5\r\nm0221\r\n$2\r\n97\r\n$5\r\nm0120\r\n$2\r\n97\r\n$5\r\nm0019\r\n$2\r\n97\r\n$5\r\nm0251\r\n$2\r\n96\r\n$5\r\nm0150\r\n$2\r\n96\r\n$5\r\nm0049\r\n$2\r\n96\r\n$5\r\nm0281\r\n$2\r\n95\r\n"),
            (&["ZRANGEBYSCORE", "big", "50", "52", "WITHSCORES"], b"*18\r\n$5\r\nm0015\r\n$2\r\n50\r\n$5\r\nm0116\r\n$2\r\n50\r\n$5\r\nm0217\r\n$2\r\n50\r\n$5\r\nm0086\r\n$2\r\n51\r\n$5\r\nm0187\r\n$2\r\n51\r\n$5\r\nm0288\r\n$2\r\n51\r\n$5\r\nm0056\r\n$2\r\n52\r\n$5\r\nm0157\r\n$2\r\n52\r\n$5\r\nm0258\r\n$2\r\n52\r\n"),
            (&["ZRANGEBYSCORE", "big", "(50", "(53", "LIMIT", "2", "3"], b"*3\r\n$5\r\nm0288\r\n$5\r\nm0056\r\n$5\r\nm0157\r\n"),
            (&["ZREVRANGEBYSCORE", "big", "60", "(58", "WITHSCORES", "LIMIT", "1", "4"], b"*8\r\n$5\r\nm0119\r\n$2\r\n60\r\n$5\r\nm0018\r\n$2\r\n60\r\n$5\r\nm0250\r\n$2\r\n59\r\n$5\r\nm0149\r\n$2\r\n59\r\n"),
            (&["ZCOUNT", "big", "10", "20"], b":33\r\n"),
            (&["ZCOUNT", "big", "(10", "(20"], b":27\r\n"),
            (&["ZRANK", "big", "m0150"], b":286\r\n"),
            (&["ZREVRANK", "big", "m0150"], b":13\r\n"),
            (&["ZRANK", "big", "m0299"], b":163\r\n"),
            (&["ZSCORE", "big", "m0123"], b"$1\r\n6\r\n"),
            (&["ZMSCORE", "big", "m0001", "nosuch", "m0299"], b"*3\r\n$2\r\n37\r\n$-1\r\n$2\r\n54\r\n"),
            (&["ZPOPMIN", "big", "3"], b"*6\r\n$5\r\nm0000\r\n$1\r\n0\r\n$5\r\nm0101\r\n$1\r\n0\r\n$5\r\nm0202\r\n$1\r\n0\r\n"),
            (&["ZPOPMAX", "big", "3"], b"*6\r\n$5\r\nm0232\r\n$3\r\n100\r\n$5\r\nm0131\r\n$3\r\n100\r\n$5\r\nm0030\r\n$3\r\n100\r\n"),
            (&["ZREM", "big", "m0010", "m0011", "nosuch"], b":2\r\n"),
            (&["ZREMRANGEBYRANK", "big", "10", "19"], b":10\r\n"),
            (&["ZREMRANGEBYSCORE", "big", "40", "45"], b":18\r\n"),
            (&["ZCARD", "big"], b":264\r\n"),
            (&["ZRANGE", "big", "0", "-1", "WITHSCORES"], b"*528\r\n$5\r\nm0071\r\n$1\r\n1\r\n$5\r\nm0172\r\n$1\r\n1\r\n$5\r\nm0273\r\n$1\r\n1\r\n$5\r\nm0041\r\n$1\r\n2\r\n$5\r\nm0142\r\n$1\r\n2\r\n$5\r\nm0243\r\n$1\r\n2\r\n$5\r\nm0112\r\n$1\r\n3\r\n$5\r\nm0213\r\n$1\r\n3\r\n$5\r\nm0082\r\n$1\r\n4\r\n$5\r\nm0183\r\n$1\r\n4\r\n$5\r\nm0063\r\n$1\r\n8\r\n$5\r\nm0164\r\n$1\r\n8\r\n$5\r\nm0265\r\n$1\r\n8\r\n$5\r\nm0033\r\n$1\r\n9\r\n$5\r\nm0134\r\n$1\r\n9\r\n$5\r\nm0235\r\n$1\r\n9\r\n$5\r\nm0003\r\n$2\r\n10\r\n$5\r\nm0104\r\n$2\r\n10\r\n$5\r\nm0205\r\n$2\r\n10\r\n$5\r\nm0074\r\n$2\r\n11\r\n$5\r\nm0175\r\n$2\r\n11\r\n$5\r\nm0276\r\n$2\r\n11\r\n$5\r\nm0044\r\n$2\r\n12\r\n$5\r\nm0145\r\n$2\r\n12\r\n$5\r\nm0246\r\n$2\r\n12\r\n$5\r\nm0014\r\n$2\r\n13\r\n$5\r\nm0115\r\n$2\r\n13\r\n$5\r\nm0216\r\n$2\r\n13\r\n$5\r\nm0085\r\n$2\r\n14\r\n$5\r\nm0186\r\n$2\r\n14\r\n$5\r\nm0287\r\n$2\r\n14\r\n$5\r\nm0055\r\n$2\r\n15\r\n$5\r\nm0156\r\n$2\r\n15\r\n$5\r\nm0257\r\n$2\r\n15\r\n$5\r\nm0025\r\n$2\r\n16\r\n$5\r\nm0126\r\n$2\r\n16\r\n$5\r\nm0227\r\n$2\r\n16\r\n$5\r\nm0096\r\n$2\r\n17\r\n$5\r\nm0197\r\n$2\r\n17\r\n$5\r\nm0298\r\n$2\r\n17\r\n$5\r\nm0066\r\n$2\r\n18\r\n$5\r\nm0167\r\n$2\r\n18\r\n$5\r\nm0268\r\n$2\r\n18\r\n$5\r\nm0036\r\n$2\r\n19\r\n$5\r\nm0137\r\n$2\r\n19\r\n$5\r\nm0238\r\n$2\r\n19\r\n$5\r\nm0006\r\n$2\r\n20\r\n$5\r\nm0107\r\n$2\r\n20\r\n$5\r\nm0208\r\n$2\r\n20\r\n$5\r\nm0077\r\n$2\r\n21\r\n$5\r\nm0178\r\n$2\r\n21\r\n$5\r\nm0279\r\n$2\r\n21\r\n$5\r\nm0047\r\n$2\r\n22\r\n$5\r\nm0148\r\n$2\r\n22\r\n$5\r\nm0249\r\n$2\r\n22\r\n$5\r\nm0017\r\n$2\r\n23\r\n$5\r\nm0118\r\n$2\r\n23\r\n$5\r\nm0219\r\n$2\r\n23\r\n$5\r\nm0088\r\n$2\r\n24\r\n$5\r\nm0189\r\n$2\r\n24\r\n$5\r\nm0290\r\n$2\r\n24\r\n$5\r\nm0058\r\n$2\r\n25\r\n$5\r\nm0159\r\n$2\r\n25\r\n$5\r\nm0260\r\n$2\r\n25\r\n$5\r\nm0028\r\n$2\r\n26\r\n$5\r\nm0129\r\n$2\r\n26\r\n$5\r\nm0230\r\n$2\r\n26\r\n$5\r\nm0099\r\n$2\r\n27\r\n$5\r\nm0200\r\n$2\r\n27\r\n$5\r\nm0069\r\n$2\r\n28\r\n$5\r\nm0170\r\n$2\r\n28\r\n$5\r\nm0271\r\n$2\r\n28\r\n$5\r\nm0039\r\n$2\r\n29\r\n$5\r\nm0140\r\n$2\r\n29\r\n$5\r\nm0241\r\n$2\r\n29\r\n$5\r\nm0009\r\n$2\r\n30\r\n$5\r\nm0110\r\n$2\r\n30\r\n$5\r\nm0211\r\n$2\r\n30\r\n$5\r\nm0080\r\n$2\r\n31\r\n$5\r\nm0181\r\n$2\r\n31\r\n$5\r\nm0282\r\n$2\r\n31\r\n$5\r\nm0050\r\n$2\r\n32\r\n$5\r\nm0151\r\n$2\r\n32\r\n$5\r\nm0252\r\n$2\r\n32\r\n$5\r\nm0020\r\n$2\r\n33\r\n$5\r\nm0121\r\n$2\r\n33\r\n$5\r\nm0222\r\n$2\r\n33\r\n$5\r\nm0091\r\n$2\r\n34\r\n$5\r\nm0192\r\n$2\r\n34\r\n$5\r\nm0293\r\n$2\r\n34\r\n$5\r\nm0061\r\n$2\r\n35\r\n$5\r\nm0162\r\n$2\r\n35\r\n$5\r\nm0263\r\n$2\r\n35\r\n$5\r\nm0031\r\n$2\r\n36\r\n$5\r\nm0132\r\n$2\r\n36\r\n$5\r\nm0233\r\n$2\r\n36\r\n$5\r\nm0001\r\n$2\r\n37\r\n$5\r\nm0102\r\n$2\r\n37\r\n$5\r\nm0203\r\n$2\r\n37\r\n$5\r\nm0072\r\n$2\r\n38\r\n$5\r\nm0173\r\n$2\r\n38\r\n$5\r\nm0274\r\n$2\r\n38\r\n$5\r\nm0042\r\n$2\r\n39\r\n$5\r\nm0143\r\n$2\r\n39\r\n$5\r\nm0244\r\n$2\r\n39\r\n$5\r\nm0034\r\n$2\r\n46\r\n$5\r\nm0135\r\n$2\r\n46\r\n$5\r\nm0236\r\n$2\r\n46\r\n$5\r\nm0004\r\n$2\r\n47\r\n$5\r\nm0105\r\n$2\r\n47\r\n$5\r\nm0206\r\n$2\r\n47\r\n$5\r\nm0075\r\n$2\r\n48\r\n$5\r\nm0176\r\n$2\r\n48\r\n$5\r\nm0277\r\n$2\r\n48\r\n$5\r\nm0045\r\n$2\r\n49\r\n$5\r\nm0146\r\n$2\r\n49\r\n$5\r\nm0247\r\n$2\r\n49\r\n$5\r\nm0015\r\n$2\r\n50\r\n$5\r\nm0116\r\n$2\r\n50\r\n$5\r\nm0217\r\n$2\r\n50\r\n$5\r\nm0086\r\n$2\r\n51\r\n$5\r\nm0187\r\n$2\r\n51\r\n$5\r\nm0288\r\n$2\r\n51\r\n$5\r\nm0056\r\n$2\r\n52\r\n$5\r\nm0157\r\n$2\r\n52\r\n$5\r\nm0258\r\n$2\r\n52\r\n$5\r\nm0026\r\n$2\r\n53\r\n$5\r\nm0127\r\n$2\r\n53\r\n$5\r\nm0228\r\n$2\r\n53\r\n$5\r\nm0097\r\n$2\r\n54\r\n$5\r\nm0198\r\n$2\r\n54\r\n$5\r\nm0299\r\n$2\r\n54\r\n$5\r\nm0067\r\n$2\r\n55\r\n$5\r\nm0168\r\n$2\r\n55\r\n$5\r\nm0269\r\n$2\r\n55\r\n$5\r\nm0037\r\n$2\r\n56\r\n$5\r\nm0138\r\n$2\r\n56\r\n$5\r\nm0239\r\n$2\r\n56\r\n$5\r\nm0007\r\n$2\r\n57\r\n$5\r\nm0108\r\n$2\r\n57\r\n$5\r\nm0209\r\n$2\r\n57\r\n$5\r\nm0078\r\n$2\r\n58\r\n$5\r\nm0179\r\n$2\r\n58\r\n$5\r\nm0280\r\n$2\r\n58\r\n$5\r\nm0048\r\n$2\r\n59\r\n$5\r\nm0149\r\n$2\r\n59\r\n$5\r\nm0250\r\n$2\r\n59\r\n$5\r\nm0018\r\n$2\r\n60\r\n$5\r\nm0119\r\n$2\r\n60\r\n$5\r\nm0220\r\n$2\r\n60\r\n$5\r\nm0089\r\n$2\r\n61\r\n$5\r\nm0190\r\n$2\r\n61\r\n$5\r\nm0291\r\n$2\r\n61\r\n$5\r\nm0059\r\n$2\r\n62\r\n$5\r\nm0160\r\n$2\r\n62\r\n$5\r\nm0261\r\n$2\r\n62\r\n$5\r\nm0029\r\n$2\r\n63\r\n$5\r\nm0130\r\n$2\r\n63\r\n$5\r\nm0231\r\n$2\r\n63\r\n$5\r\nm0100\r\n$2\r\n64\r\n$5\r\nm0201\r\n$2\r\n64\r\n$5\r\nm0070\r\n$2\r\n65\r\n$5\r\nm0171\r\n$2\r\n65\r\n$5\r\nm0272\r\n$2\r\n65\r\n$5\r\nm0040\r\n$2\r\n66\r\n$5\r\nm0141\r\n$2\r\n66\r\n$5\r\nm0242\r\n$2\r\n66\r\n$5\r\nm0111\r\n$2\r\n67\r\n$5\r\nm0212\r\n$2\r\n67\r\n$5\r\nm0081\r\n$2\r\n68\r\n$5\r\nm0182\r\n$2\r\n68\r\n$5\r\nm0283\r\n$2\r\n68\r\n$5\r\nm0051\r\n$2\r\n69\r\n$5\r\nm0152\r\n$2\r\n69\r\n$5\r\nm0253\r\n$2\r\n69\r\n$5\r\nm0021\r\n$2\r\n70\r\n$5\r\nm0122\r\n$2\r\n70\r\n$5\r\nm0223\r\n$2\r\n70\r\n$5\r\nm0092\r\n$2\r\n71\r\n$5\r\nm0193\r\n$2\r\n71\r\n$5\r\nm0294\r\n$2\r\n71\r\n$5\r\nm0062\r\n$2\r\n72\r\n$5\r\nm0163\r\n$2\r\n72\r\n$5\r\nm0264\r\n$2\r\n72\r\n$5\r\nm0032\r\n$2\r\n73\r\n$5\r\nm0133\r\n$2\r\n73\r\n$5\r\nm0234\r\n$2\r\n73\r\n$5\r\nm0002\r\n$2\r\n74\r\n$5\r\nm0103\r\n$2\r\n74\r\n$5\r\nm0204\r\n$2\r\n74\r\n$5\r\nm0073\r\n$2\r\n75\r\n$5\r\nm0174\r\n$2\r\n75\r\n$5\r\nm0275\r\n$2\r\n75\r\n$5\r\nm0043\r\n$2\r\n76\r\n$5\r\nm0144\r\n$2\r\n76\r\n$5\r\nm0245\r\n$2\r\n76\r\n$5\r\nm0013\r\n$2\r\n77\r\n$5\r\nm0114\r\n$2\r\n77\r\n$5\r\nm0215\r\n$2\r\n77\r\n$5\r\nm0084\r\n$2\r\n78\r\n$5\r\nm0185\r\n$2\r\n78\r\n$5\r\nm0286\r\n$2\r\n78\r\n$5\r\nm0054\r\n$2\r\n79\r\n$5\r\nm0155\r\n$2\r\n79\r\n$5\r\nm0256\r\n$2\r\n79\r\n$5\r\nm0024\r\n$2\r\n80\r\n$5\r\nm0125\r\n$2\r\n80\r\n$5\r\nm0226\r\n$2\r\n80\r\n$5\r\nm0095\r\n$2\r\n81\r\n$5\r\nm0196\r\n$2\r\n81\r\n$5\r\nm0297\r\n$2\r\n81\r\n$5\r\nm0065\r\n$2\r\n82\r\n$5\r\nm0166\r\n$2\r\n82\r\n$5\r\nm0267\r\n$2\r\n82\r\n$5\r\nm0035\r\n$2\r\n83\r\n$5\r\nm0136\r\n$2\r\n83\r\n$5\r\nm0237\r\n$2\r\n83\r\n$5\r\nm0005\r\n$2\r\n84\r\n$5\r\nm0106\r\n$2\r\n84\r\n$5\r\nm0207\r\n$2\r\n84\r\n$5\r\nm0076\r\n$2\r\n85\r\n$5\r\nm0177\r\n$2\r\n85\r\n$5\r\nm0278\r\n$2\r\n85\r\n$5\r\nm0046\r\n$2\r\n86\r\n$5\r\nm0147\r\n$2\r\n86\r\n$5\r\nm0248\r\n$2\r\n86\r\n$5\r\nm0016\r\n$2\r\n87\r\n$5\r\nm0117\r\n$2\r\n87\r\n$5\r\nm0218\r\n$2\r\n87\r\n$5\r\nm0087\r\n$2\r\n88\r\n$5\r\nm0188\r\n$2\r\n88\r\n$5\r\nm0289\r\n$2\r\n88\r\n$5\r\nm0057\r\n$2\r\n89\r\n$5\r\nm0158\r\n$2\r\n89\r\n$5\r\nm0259\r\n$2\r\n89\r\n$5\r\nm0027\r\n$2\r\n90\r\n$5\r\nm0128\r\n$2\r\n90\r\n$5\r\nm0229\r\n$2\r\n90\r\n$5\r\nm0098\r\n$2\r\n91\r\n$5\r\nm0199\r\n$2\r\n91\r\n$5\r\nm0068\r\n$2\r\n92\r\n$5\r\nm0169\r\n$2\r\n92\r\n$5\r\nm0270\r\n$2\r\n92\r\n$5\r\nm0038\r\n$2\r\n93\r\n$5\r\nm0139\r\n$2\r\n93\r\n$5\r\nm0240\r\n$2\r\n93\r\n$5\r\nm0008\r\n$2\r\n94\r\n$5\r\nm0109\r\n$2\r\n94\r\n$5\r\nm0210\r\n$2\r\n94\r\n$5\r\nm0079\r\n$2\r\n95\r\n$5\r\nm0180\r\n$2\r\n95\r\n$5\r\nm0281\r\n$2\r\n95\r\n$5\r\nm0049\r\n$2\r\n96\r\n$5\r\nm0150\r\n$2\r\n96\r\n$5\r\nm0251\r\n$2\r\n96\r\n$5\r\nm0019\r\n$2\r\n97\r\n$5\r\nm0120\r\n$2\r\n97\r\n$5\r\nm0221\r\n$2\r\n97\r\n$5\r\nm0090\r\n$2\r\n98\r\n$5\r\nm0191\r\n$2\r\n98\r\n$5\r\nm0292\r\n$2\r\n98\r\n$5\r\nm0060\r\n$2\r\n99\r\n$5\r\nm0161\r\n$2\r\n99\r\n$5\r\nm0262\r\n$2\r\n99\r\n"),
            (&["OBJECT", "ENCODING", "big"], b"$8\r\nskiplist\r\n"),
            (&["ZUNIONSTORE", "u", "2", "big", "long", "WEIGHTS", "2", "3"], b":265\r\n"),
            (&["OBJECT", "ENCODING", "u"], b"$8\r\nskiplist\r\n"),
            (&["ZRANGE", "u", "0", "20", "WITHSCORES"], b"*42\r\n$5\r\nm0071\r\n$1\r\n2\r\n$5\r\nm0172\r\n$1\r\n2\r\n$5\r\nm0273\r\n$1\r\n2\r\n$65\r\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n$1\r\n3\r\n$5\r\nm0041\r\n$1\r\n4\r\n$5\r\nm0142\r\n$1\r\n4\r\n$5\r\nm0243\r\n$1\r\n4\r\n$5\r\nm0112\r\n$1\r\n6\r\n$5\r\nm0213\r\n$1\r\n6\r\n$5\r\nm0082\r\n$1\r\n8\r\n$5\r\nm0183\r\n$1\r\n8\r\n$5\r\nm0063\r\n$2\r\n16\r\n$5\r\nm0164\r\n$2\r\n16\r\n$5\r\nm0265\r\n$2\r\n16\r\n$5\r\nm0033\r\n$2\r\n18\r\n$5\r\nm0134\r\n$2\r\n18\r\n$5\r\nm0235\r\n$2\r\n18\r\n$5\r\nm0003\r\n$2\r\n20\r\n$5\r\nm0104\r\n$2\r\n20\r\n$5\r\nm0205\r\n$2\r\n20\r\n$5\r\nm0074\r\n$2\r\n22\r\n"),
            (&["ZINTERSTORE", "i", "2", "big", "big", "AGGREGATE", "MAX"], b":264\r\n"),
            (&["ZRANGE", "i", "200", "-1", "WITHSCORES"], b"*128\r\n$5\r\nm0185\r\n$2\r\n78\r\n$5\r\nm0286\r\n$2\r\n78\r\n$5\r\nm0054\r\n$2\r\n79\r\n$5\r\nm0155\r\n$2\r\n79\r\n$5\r\nm0256\r\n$2\r\n79\r\n$5\r\nm0024\r\n$2\r\n80\r\n$5\r\nm0125\r\n$2\r\n80\r\n$5\r\nm0226\r\n$2\r\n80\r\n$5\r\nm0095\r\n$2\r\n81\r\n$5\r\nm0196\r\n$2\r\n81\r\n$5\r\nm0297\r\n$2\r\n81\r\n$5\r\nm0065\r\n$2\r\n82\r\n$5\r\nm0166\r\n$2\r\n82\r\n$5\r\nm0267\r\n$2\r\n82\r\n$5\r\nm0035\r\n$2\r\n83\r\n$5\r\nm0136\r\n$2\r\n83\r\n$5\r\nm0237\r\n$2\r\n83\r\n$5\r\nm0005\r\n$2\r\n84\r\n$5\r\nm0106\r\n$2\r\n84\r\n$5\r\nm0207\r\n$2\r\n84\r\n$5\r\nm0076\r\n$2\r\n85\r\n$5\r\nm0177\r\n$2\r\n85\r\n$5\r\nm0278\r\n$2\r\n85\r\n$5\r\nm0046\r\n$2\r\n86\r\n$5\r\nm0147\r\n$2\r\n86\r\n$5\r\nm0248\r\n$2\r\n86\r\n$5\r\nm0016\r\n$2\r\n87\r\n$5\r\nm0117\r\n$2\r\n87\r\n$5\r\nm0218\r\n$2\r\n87\r\n$5\r\nm0087\r\n$2\r\n88\r\n$5\r\nm0188\r\n$2\r\n88\r\n$5\r\nm0289\r\n$2\r\n88\r\n$5\r\nm0057\r\n$2\r\n89\r\n$5\r\nm0158\r\n$2\r\n89\r\n$5\r\nm0259\r\n$2\r\n89\r\n$5\r\nm0027\r\n$2\r\n90\r\n$5\r\nm0128\r\n$2\r\n90\r\n$5\r\nm0229\r\n$2\r\n90\r\n$5\r\nm0098\r\n$2\r\n91\r\n$5\r\nm0199\r\n$2\r\n91\r\n$5\r\nm0068\r\n$2\r\n92\r\n$5\r\nm0169\r\n$2\r\n92\r\n$5\r\nm0270\r\n$2\r\n92\r\n$5\r\nm0038\r\n$2\r\n93\r\n$5\r\nm0139\r\n$2\r\n93\r\n$5\r\nm0240\r\n$2\r\n93\r\n$5\r\nm0008\r\n$2\r\n94\r\n$5\r\nm0109\r\n$2\r\n94\r\n$5\r\nm0210\r\n$2\r\n94\r\n$5\r\nm0079\r\n$2\r\n95\r\n$5\r\nm0180\r\n$2\r\n95\r\n$5\r\nm0281\r\n$2\r\n95\r\n$5\r\nm0049\r\n$2\r\n96\r\n$5\r\nm0150\r\n$2\r\n96\r\n$5\r\nm0251\r\n$2\r\n96\r\n$5\r\nm0019\r\n$2\r\n97\r\n$5\r\nm0120\r\n$2\r\n97\r\n$5\r\nm0221\r\n$2\r\n97\r\n$5\r\nm0090\r\n$2\r\n98\r\n$5\r\nm0191\r\n$2\r\n98\r\n$5\r\nm0292\r\n$2\r\n98\r\n$5\r\nm0060\r\n$2\r\n99\r\n$5\r\nm0161\r\n$2\r\n99\r\n$5\r\nm0262\r\n$2\r\n99\r\n"),
            (&["OBJECT", "ENCODING", "i"], b"$8\r\nskiplist\r\n"),
            (&["ZRANGESTORE", "rs", "big", "0", "127"], b":128\r\n"),
            (&["OBJECT", "ENCODING", "rs"], b"$8\r\nlistpack\r\n"),
            (&["ZRANGESTORE", "rs", "big", "0", "128"], b":129\r\n"),
            (&["OBJECT", "ENCODING", "rs"], b"$8\r\nskiplist\r\n"),
            (&["ZDIFFSTORE", "d", "2", "big", "rs"], b":135\r\n"),
            (&["ZRANGE", "d", "0", "-1", "WITHSCORES"], b"*270\r\n$5\r\nm0097\r\n$2\r\n54\r\n$5\r\nm0198\r\n$2\r\n54\r\n$5\r\nm0299\r\n$2\r\n54\r\n$5\r\nm0067\r\n$2\r\n55\r\n$5\r\nm0168\r\n$2\r\n55\r\n$5\r\nm0269\r\n$2\r\n55\r\n$5\r\nm0037\r\n$2\r\n56\r\n$5\r\nm0138\r\n$2\r\n56\r\n$5\r\nm0239\r\n$2\r\n56\r\n$5\r\nm0007\r\n$2\r\n57\r\n$5\r\nm0108\r\n$2\r\n57\r\n$5\r\nm0209\r\n$2\r\n57\r\n$5\r\nm0078\r\n$2\r\n58\r\n$5\r\nm0179\r\n$2\r\n58\r\n$5\r\nm0280\r\n$2\r\n58\r\n$5\r\nm0048\r\n$2\r\n59\r\n$5\r\nm0149\r\n$2\r\n59\r\n$5\r\nm0250\r\n$2\r\n59\r\n$5\r\nm0018\r\n$2\r\n60\r\n$5\r\nm0119\r\n$2\r\n60\r\n$5\r\nm0220\r\n$2\r\n60\r\n$5\r\nm0089\r\n$2\r\n61\r\n$5\r\nm0190\r\n$2\r\n61\r\n$5\r\nm0291\r\n$2\r\n61\r\n$5\r\nm0059\r\n$2\r\n62\r\n$5\r\nm0160\r\n$2\r\n62\r\n$5\r\nm0261\r\n$2\r\n62\r\n$5\r\nm0029\r\n$2\r\n63\r\n$5\r\nm0130\r\n$2\r\n63\r\n$5\r\nm0231\r\n$2\r\n63\r\n$5\r\nm0100\r\n$2\r\n64\r\n$5\r\nm0201\r\n$2\r\n64\r\n$5\r\nm0070\r\n$2\r\n65\r\n$5\r\nm0171\r\n$2\r\n65\r\n$5\r\nm0272\r\n$2\r\n65\r\n$5\r\nm0040\r\n$2\r\n66\r\n$5\r\nm0141\r\n$2\r\n66\r\n$5\r\nm0242\r\n$2\r\n66\r\n$5\r\nm0111\r\n$2\r\n67\r\n$5\r\nm0212\r\n$2\r\n67\r\n$5\r\nm0081\r\n$2\r\n68\r\n$5\r\nm0182\r\n$2\r\n68\r\n$5\r\nm0283\r\n$2\r\n68\r\n$5\r\nm0051\r\n$2\r\n69\r\n$5\r\nm0152\r\n$2\r\n69\r\n$5\r\nm0253\r\n$2\r\n69\r\n$5\r\nm0021\r\n$2\r\n70\r\n$5\r\nm0122\r\n$2\r\n70\r\n$5\r\nm0223\r\n$2\r\n70\r\n$5\r\nm0092\r\n$2\r\n71\r\n$5\r\nm0193\r\n$2\r\n71\r\n$5\r\nm0294\r\n$2\r\n71\r\n$5\r\nm0062\r\n$2\r\n72\r\n$5\r\nm0163\r\n$2\r\n72\r\n$5\r\nm0264\r\n$2\r\n72\r\n$5\r\nm0032\r\n$2\r\n73\r\n$5\r\nm0133\r\n$2\r\n73\r\n$5\r\nm0234\r\n$2\r\n73\r\n$5\r\nm0002\r\n$2\r\n74\r\n$5\r\nm0103\r\n$2\r\n74\r\n$5\r\nm0204\r\n$2\r\n74\r\n$5\r\nm0073\r\n$2\r\n75\r\n$5\r\nm0174\r\n$2\r\n75\r\n$5\r\nm0275\r\n$2\r\n75\r\n$5\r\nm0043\r\n$2\r\n76\r\n$5\r\nm0144\r\n$2\r\n76\r\n$5\r\nm0245\r\n$2\r\n76\r\n$5\r\nm0013\r\n$2\r\n77\r\n$5\r\nm0114\r\n$2\r\n77\r\n$5\r\nm0215\r\n$2\r\n77\r\n$5\r\nm0084\r\n$2\r\n78\r\n$5\r\nm0185\r\n$2\r\n78\r\n$5\r\nm0286\r\n$2\r\n78\r\n$5\r\nm0054\r\n$2\r\n79\r\n$5\r\nm0155\r\n$2\r\n79\r\n$5\r\nm0256\r\n$2\r\n79\r\n$5\r\nm0024\r\n$2\r\n80\r\n$5\r\nm0125\r\n$2\r\n80\r\n$5\r\nm0226\r\n$2\r\n80\r\n$5\r\nm0095\r\n$2\r\n81\r\n$5\r\nm0196\r\n$2\r\n81\r\n$5\r\nm0297\r\n$2\r\n81\r\n$5\r\nm0065\r\n$2\r\n82\r\n$5\r\nm0166\r\n$2\r\n82\r\n$5\r\nm0267\r\n$2\r\n82\r\n$5\r\nm0035\r\n$2\r\n83\r\n$5\r\nm0136\r\n$2\r\n83\r\n$5\r\nm0237\r\n$2\r\n83\r\n$5\r\nm0005\r\n$2\r\n84\r\n$5\r\nm0106\r\n$2\r\n84\r\n$5\r\nm0207\r\n$2\r\n84\r\n$5\r\nm0076\r\n$2\r\n85\r\n$5\r\nm0177\r\n$2\r\n85\r\n$5\r\nm0278\r\n$2\r\n85\r\n$5\r\nm0046\r\n$2\r\n86\r\n$5\r\nm0147\r\n$2\r\n86\r\n$5\r\nm0248\r\n$2\r\n86\r\n$5\r\nm0016\r\n$2\r\n87\r\n$5\r\nm0117\r\n$2\r\n87\r\n$5\r\nm0218\r\n$2\r\n87\r\n$5\r\nm0087\r\n$2\r\n88\r\n$5\r\nm0188\r\n$2\r\n88\r\n$5\r\nm0289\r\n$2\r\n88\r\n$5\r\nm0057\r\n$2\r\n89\r\n$5\r\nm0158\r\n$2\r\n89\r\n$5\r\nm0259\r\n$2\r\n89\r\n$5\r\nm0027\r\n$2\r\n90\r\n$5\r\nm0128\r\n$2\r\n90\r\n$5\r\nm0229\r\n$2\r\n90\r\n$5\r\nm0098\r\n$2\r\n91\r\n$5\r\nm0199\r\n$2\r\n91\r\n$5\r\nm0068\r\n$2\r\n92\r\n$5\r\nm0169\r\n$2\r\n92\r\n$5\r\nm0270\r\n$2\r\n92\r\n$5\r\nm0038\r\n$2\r\n93\r\n$5\r\nm0139\r\n$2\r\n93\r\n$5\r\nm0240\r\n$2\r\n93\r\n$5\r\nm0008\r\n$2\r\n94\r\n$5\r\nm0109\r\n$2\r\n94\r\n$5\r\nm0210\r\n$2\r\n94\r\n$5\r\nm0079\r\n$2\r\n95\r\n$5\r\nm0180\r\n$2\r\n95\r\n$5\r\nm0281\r\n$2\r\n95\r\n$5\r\nm0049\r\n$2\r\n96\r\n$5\r\nm0150\r\n$2\r\n96\r\n$5\r\nm0251\r\n$2\r\n96\r\n$5\r\nm0019\r\n$2\r\n97\r\n$5\r\nm0120\r\n$2\r\n97\r\n$5\r\nm0221\r\n$2\r\n97\r\n$5\r\nm0090\r\n$2\r\n98\r\n$5\r\nm0191\r\n$2\r\n98\r\n$5\r\nm0292\r\n$2\r\n98\r\n$5\r\nm0060\r\n$2\r\n99\r\n$5\r\nm0161\r\n$2\r\n99\r\n$5\r\nm0262\r\n$2\r\n99\r\n"),
            (&["ZADD", "big", "INCR", "0.5", "m0200"], b"$4\r\n27.5\r\n"),
            (&["ZADD", "big", "GT", "CH", "1000", "m0201", "1", "m0202"], b":2\r\n"),
            (&["ZRANGE", "big", "-3", "-1", "WITHSCORES"], b"*6\r\n$5\r\nm0161\r\n$2\r\n99\r\n$5\r\nm0262\r\n$2\r\n99\r\n$5\r\nm0201\r\n$4\r\n1000\r\n"),
            (&["ZINTERCARD", "2", "big", "u"], b":264\r\n"),
            (&["ZINTERCARD", "2", "big", "u", "LIMIT", "7"], b":7\r\n"),
            (&["ZADD", "lexbig", "0", "w0000", "0", "w0001", "0", "w0002", "0", "w0003", "0", "w0004", "0", "w0005", "0", "w0006", "0", "w0007", "0", "w0008", "0", "w0009", "0", "w0010", "0", "w0011", "0", "w0012", "0", "w0013", "0", "w0014", "0", "w0015", "0", "w0016", "0", "w0017", "0", "w0018", "0", "w0019", "0", "w0020", "0", "w0021", "0", "w0022", "0", "w0023", "0", "w0024", "0", "w0025", "0", "w0026", "0", "w0027", "0", "w0028", "0", "w0029", "0", "w0030", "0", "w0031", "0", "w0032", "0", "w0033", "0", "w0034", "0", "w0035", "0", "w0036", "0", "w0037", "0", "w0038", "0", "w0039", "0", "w0040", "0", "w0041", "0", "w0042", "0", "w0043", "0", "w0044", "0", "w0045", "0", "w0046", "0", "w0047", "0", "w0048", "0", "w0049", "0", "w0050", "0", "w0051", "0", "w0052", "0", "w0053", "0", "w0054", "0", "w0055", "0", "w0056", "0", "w0057", "0", "w0058", "0", "w0059", "0", "w0060", "0", "w0061", "0", "w0062", "0", "w0063", "0", "w0064", "0", "w0065", "0", "w0066", "0", "w0067", "0", "w0068", "0", "w0069", "0", "w0070", "0", "w0071", "0", "w0072", "0", "w0073", "0", "w0074", "0", "w0075", "0", "w0076", "0", "w0077", "0", "w0078", "0", "w0079", "0", "w0080", "0", "w0081", "0", "w0082", "0", "w0083", "0", "w0084", "0", "w0085", "0", "w0086", "0", "w0087", "0", "w0088", "0", "w0089", "0", "w0090", "0", "w0091", "0", "w0092", "0", "w0093", "0", "w0094", "0", "w0095", "0", "w0096", "0", "w0097", "0", "w0098", "0", "w0099", "0", "w0100", "0", "w0101", "0", "w0102", "0", "w0103", "0", "w0104", "0", "w0105", "0", "w0106", "0", "w0107", "0", "w0108", "0", "w0109", "0", "w0110", "0", "w0111", "0", "w0112", "0", "w0113", "0", "w0114", "0", "w0115", "0", "w0116", "0", "w0117", "0", "w0118", "0", "w0119", "0", "w0120", "0", "w0121", "0", "w0122", "0", "w0123", "0", "w0124", "0", "w0125", "0", "w0126", "0", "w0127", "0", "w0128", "0", "w0129", "0", "w0130", "0", "w0131", "0", "w0132", "0", "w0133", "0", "w0134", "0", "w0135", "0", "w0136", "0", "w0137", "0", "w0138", "0", "w0139", "0", "w0140", "0", "w0141", "0", "w0142", "0", "w0143", "0", "w0144", "0", "w0145", "0", "w0146", "0", "w0147", "0", "w0148", "0", "w0149", "0", "w0150", "0", "w0151", "0", "w0152", "0", "w0153", "0", "w0154", "0", "w0155", "0", "w0156", "0", "w0157", "0", "w0158", "0", "w0159", "0", "w0160", "0", "w0161", "0", "w0162", "0", "w0163", "0", "w0164", "0", "w0165", "0", "w0166", "0", "w0167", "0", "w0168", "0", "w0169", "0", "w0170", "0", "w0171", "0", "w0172", "0", "w0173", "0", "w0174", "0", "w0175", "0", "w0176", "0", "w0177", "0", "w0178", "0", "w0179", "0", "w0180", "0", "w0181", "0", "w0182", "0", "w0183", "0", "w0184", "0", "w0185", "0", "w0186", "0", "w0187", "0", "w0188", "0", "w0189", "0", "w0190", "0", "w0191", "0", "w0192", "0", "w0193", "0", "w0194", "0", "w0195", "0", "w0196", "0", "w0197", "0", "w0198", "0", "w0199"], b":200\r\n"),
            (&["ZRANGEBYLEX", "lexbig", "[w0100", "(w0110"], b"*10\r\n$5\r\nw0100\r\n$5\r\nw0101\r\n$5\r\nw0102\r\n$5\r\nw0103\r\n$5\r\nw0104\r\n$5\r\nw0105\r\n$5\r\nw0106\r\n$5\r\nw0107\r\n$5\r\nw0108\r\n$5\r\nw0109\r\n"),
            (&["ZREVRANGEBYLEX", "lexbig", "(w0110", "[w0100", "LIMIT", "2", "3"], b"*3\r\n$5\r\nw0107\r\n$5\r\nw0106\r\n$5\r\nw0105\r\n"),
            (&["ZLEXCOUNT", "lexbig", "[w0050", "+"], b":150\r\n"),
            (&["ZREMRANGEBYLEX", "lexbig", "-", "(w0150"], b":150\r\n"),
            (&["ZCARD", "lexbig"], b":50\r\n"),
            (&["ZRANGE", "lexbig", "0", "3"], b"*4\r\n$5\r\nw0150\r\n$5\r\nw0151\r\n$5\r\nw0152\r\n$5\r\nw0153\r\n"),
        ]);
    }

    fn run(e: &mut Engine, args: &[&str]) -> String {
        crate::testing::reply(e, 1_000_000, args)
    }

    use crate::testing::take_muts as muts;

    #[test]
    fn writes_emit_canonical_mutations() {
        let mut e = Engine::default();
        run(&mut e, &["ZADD", "z", "1", "a", "2", "b"]);
        assert_eq!(muts(&mut e), ["ZADD z 1 a", "ZADD z 2 b"]);
        // Unchanged scores and NX on existing members emit nothing.
        run(&mut e, &["ZADD", "z", "1", "a"]);
        run(&mut e, &["ZADD", "z", "NX", "5", "a"]);
        run(&mut e, &["ZREM", "z", "nosuch"]);
        assert!(muts(&mut e).is_empty());
        // Increments are written out as the resulting score, with full precision.
        run(&mut e, &["ZINCRBY", "z", "0.1", "a"]);
        assert_eq!(muts(&mut e), ["ZADD z 1.1 a"]);
        run(&mut e, &["ZADD", "z", "INCR", "-inf", "b"]);
        assert_eq!(muts(&mut e), ["ZADD z -inf b"]);
        assert_eq!(run(&mut e, &["ZPOPMIN", "z"]), "*2\r\n$1\r\nb\r\n$4\r\n-inf\r\n");
        assert_eq!(muts(&mut e), ["ZREM z b"]);
        run(&mut e, &["ZADD", "y", "3", "c"]);
        muts(&mut e);
        run(&mut e, &["ZUNIONSTORE", "y", "2", "z", "y"]);
        assert_eq!(muts(&mut e), ["DEL y", "ZADD y 1.1 a", "ZADD y 3 c"]);
        // An empty result deletes the destination.
        run(&mut e, &["ZINTERSTORE", "y", "2", "z", "nokey"]);
        assert_eq!(muts(&mut e), ["DEL y"]);
        assert_eq!(run(&mut e, &["EXISTS", "y"]), ":0\r\n");
        // Removing the last member deletes the key; the ZREMs alone reproduce that.
        run(&mut e, &["ZREMRANGEBYSCORE", "z", "-inf", "+inf"]);
        assert_eq!(muts(&mut e), ["ZREM z a"]);
        assert_eq!(run(&mut e, &["EXISTS", "z"]), ":0\r\n");
        // Reads emit nothing.
        run(&mut e, &["ZADD", "r", "1", "a", "2", "b", "3", "c"]);
        muts(&mut e);
        run(&mut e, &["ZRANDMEMBER", "r", "-5", "WITHSCORES"]);
        run(&mut e, &["ZRANGE", "r", "0", "-1"]);
        run(&mut e, &["ZSCAN", "r", "0"]);
        assert!(muts(&mut e).is_empty());
        // A random count pops what it says, and ZRANDMEMBER picks only members.
        let reply = run(&mut e, &["ZRANDMEMBER", "r", "-5"]);
        assert!(reply.starts_with("*5\r\n"));
        assert_eq!(reply.matches("$1\r\n").count(), 5);
        let distinct = run(&mut e, &["ZRANDMEMBER", "r", "2"]);
        assert!(distinct.starts_with("*2\r\n"));
        let picked: Vec<&str> = distinct.split("\r\n").filter(|l| l.len() == 1).collect();
        assert_eq!(picked.len(), 2);
        assert_ne!(picked[0], picked[1]);
    }

    #[test]
    fn rank_withscore() {
        let mut e = Engine::default();
        run(&mut e, &["ZADD", "z", "1.5", "a", "2", "b"]);
        assert_eq!(run(&mut e, &["ZRANK", "z", "b", "WITHSCORE"]), "*2\r\n:1\r\n$1\r\n2\r\n");
        assert_eq!(run(&mut e, &["ZREVRANK", "z", "b", "withscore"]), "*2\r\n:0\r\n$1\r\n2\r\n");
        assert_eq!(run(&mut e, &["ZRANK", "z", "x", "WITHSCORE"]), "*-1\r\n");
        assert_eq!(run(&mut e, &["ZRANK", "z", "a", "WITHSCORES"]), "-ERR syntax error\r\n");
        assert_eq!(run(&mut e, &["ZRANK", "z", "a", "WITHSCORE", "x"]), "-ERR syntax error\r\n");
    }

    #[test]
    fn blocking_pops_park_and_are_served_on_retry() {
        let mut e = Engine::default();
        let spec = crate::command::lookup(b"bzpopmin").expect("bzpopmin");
        let args: [&[u8]; 4] = [b"BZPOPMIN", b"a", b"b", b"1.5"];
        let mut out = Vec::new();
        let outcome = e.execute(spec, &args, 1_000, &mut out, resp::Proto::Resp2, false);
        assert_eq!(
            outcome,
            Outcome::Blocked(crate::engine::BlockOn {
                keys: vec![b"a".to_vec(), b"b".to_vec()],
                deadline: Some(2_500),
                ..Default::default()
            })
        );
        assert!(out.is_empty());
        assert!(muts(&mut e).is_empty());
        // A timeout of 0 waits forever.
        let forever: [&[u8]; 3] = [b"BZPOPMAX", b"a", b"0"];
        let spec_max = crate::command::lookup(b"bzpopmax").expect("bzpopmax");
        match e.execute(spec_max, &forever, 1_000, &mut out, resp::Proto::Resp2, false) {
            Outcome::Blocked(b) => assert_eq!(b.deadline, None),
            other => panic!("{other:?}"),
        }
        // Any add to a sorted set signals its key.
        run(&mut e, &["ZADD", "b", "7", "m", "8", "n"]);
        assert_eq!(e.ready_keys, vec![(0, b"b".to_vec())]);
        e.ready_keys.clear();
        muts(&mut e);
        let outcome = e.execute(spec, &args, 1_100, &mut out, resp::Proto::Resp2, true);
        assert_eq!(outcome, Outcome::Done);
        assert_eq!(out, b"*3\r\n$1\r\nb\r\n$1\r\nm\r\n$1\r\n7\r\n".to_vec());
        assert_eq!(muts(&mut e), ["ZREM b m"]);
        // On a retry, a key that now holds another type is passed over.
        run(&mut e, &["SET", "a", "string"]);
        run(&mut e, &["ZADD", "b", "9", "p"]);
        muts(&mut e);
        let mut out = Vec::new();
        assert_eq!(e.execute(spec, &args, 1_200, &mut out, resp::Proto::Resp2, true), Outcome::Done);
        assert_eq!(out, b"*3\r\n$1\r\nb\r\n$1\r\nn\r\n$1\r\n8\r\n".to_vec());
        // BZMPOP parks on its keys too, and a replica never parks.
        let bz: [&[u8]; 5] = [b"BZMPOP", b"0.01", b"1", b"x", b"MIN"];
        let spec_m = crate::command::lookup(b"bzmpop").expect("bzmpop");
        let mut out = Vec::new();
        assert!(
            matches!(e.execute(spec_m, &bz, 1_000, &mut out, resp::Proto::Resp2, false), Outcome::Blocked(ref b) if b.keys == vec![b"x".to_vec()] && b.deadline == Some(1_010))
        );
        e.replaying = true;
        assert_eq!(e.execute(spec_m, &bz, 1_000, &mut out, resp::Proto::Resp2, false), Outcome::Done);
        assert_eq!(out, b"*-1\r\n".to_vec());
    }

    #[test]
    fn scan_of_an_indexed_set_survives_changes() {
        let mut e = Engine::default();
        for k in 0..400 {
            run(&mut e, &["ZADD", "z", &(k % 37).to_string(), &format!("m{k:04}")]);
        }
        assert_eq!(run(&mut e, &["OBJECT", "ENCODING", "z"]), "$8\r\nskiplist\r\n");
        let mut seen = std::collections::HashSet::new();
        let mut cursor = "0".to_string();
        let mut calls = 0;
        loop {
            let reply = run(&mut e, &["ZSCAN", "z", &cursor, "COUNT", "7"]);
            calls += 1;
            let lines: Vec<&str> = reply.split("\r\n").collect();
            cursor = lines[2].to_string();
            for l in &lines[3..] {
                if l.starts_with('m') || l.starts_with('x') {
                    seen.insert(l.to_string());
                }
            }
            // Churn between calls: add members at both ends of the order, remove others.
            run(&mut e, &["ZADD", "z", "-1", &format!("x{calls}"), "99", &format!("xx{calls}")]);
            run(&mut e, &["ZREM", "z", &format!("m{:04}", 399 - calls)]);
            // Move members across the order, below and above wherever the scan is.
            let moved = format!("m{:04}", (calls * 37) % 300);
            run(&mut e, &["ZADD", "z", if calls % 2 == 0 { "-1000" } else { "1000" }, &moved]);
            if cursor == "0" {
                break;
            }
            assert!(calls < 400, "scan does not terminate");
        }
        // Every member present for the whole scan was returned.
        for k in 0..(399 - calls) {
            assert!(seen.contains(&format!("m{k:04}")), "m{k:04} missed");
        }
        assert!(calls > 10, "the scan was split into several calls ({calls})");
        // MATCH filters what is returned.
        let r = run(&mut e, &["ZSCAN", "z", "0", "COUNT", "1000", "MATCH", "m000?"]);
        assert_eq!(r.matches("\r\nm000").count(), 10);
    }

    /// Float and cursor argument syntax (strtod / strtoul rules).
    #[test]
    fn redis_script_parse() {
        run_script(&[
            (&["ZADD", "pz", "1e400", "a"], b"-ERR value is not a valid float\r\n"),
            (&["ZADD", "pz", "1e-400", "a"], b"-ERR value is not a valid float\r\n"),
            (&["ZADD", "pz", "-1e400", "a"], b"-ERR value is not a valid float\r\n"),
            (&["ZADD", "pz", "0x10", "b"], b":1\r\n"),
            (&["ZADD", "pz", "0x1.8p1", "b2"], b":1\r\n"),
            (&["ZADD", "pz", "1e308", "c"], b":1\r\n"),
            (&["ZADD", "pz", "4.9e-324", "d"], b":1\r\n"),
            (&["ZADD", "pz", "2e-320", "e"], b":1\r\n"),
            (&["ZADD", "pz", ".5", "f"], b":1\r\n"),
            (&["ZADD", "pz", "5.", "g"], b":1\r\n"),
            (&["ZADD", "pz", "infinity", "h"], b":1\r\n"),
            (&["ZADD", "pz", "-Infinity", "i"], b":1\r\n"),
            (&["ZADD", "pz", "+inf", "h2"], b":1\r\n"),
            (&["ZADD", "pz", "1_0", "j"], b"-ERR value is not a valid float\r\n"),
            (&["ZADD", "pz", "1 ", "k"], b"-ERR value is not a valid float\r\n"),
            (&["ZADD", "pz", " 1", "k"], b"-ERR value is not a valid float\r\n"),
            (&["ZADD", "pz", "", "k"], b"-ERR value is not a valid float\r\n"),
            (&["ZADD", "pz", "0e5", "l"], b":1\r\n"),
            (&["ZADD", "pz", "-0.0", "m"], b":1\r\n"),
            (&["ZADD", "pz", "1e", "k"], b"-ERR value is not a valid float\r\n"),
            (&["ZADD", "pz", "nan", "k"], b"-ERR value is not a valid float\r\n"),
            (&["ZADD", "pz", "-nan", "k"], b"-ERR value is not a valid float\r\n"),
            (&["ZADD", "pz", "0x", "k"], b"-ERR value is not a valid float\r\n"),
            (&["ZRANGE", "pz", "0", "-1", "WITHSCORES"], b"*24\r\n$1\r\ni\r\n$4\r\n-inf\r\n$1\r\nl\r\n$1\r\n0\r\n$1\r\nm\r\n$1\r\n0\r\n$1\r\nd\r\n$6\r\n5e-324\r\n$1\r\ne\r\n$6\r\n2e-320\r\n$1\r\nf\r\n$3\r\n0.5\r\n$2\r\nb2\r\n$1\r\n3\r\n$1\r\ng\r\n$1\r\n5\r\n$1\r\nb\r\n$2\r\n16\r\n$1\r\nc\r\n$6\r\n1e+308\r\n$1\r\nh\r\n$3\r\ninf\r\n$2\r\nh2\r\n$3\r\ninf\r\n"),
            (&["ZCOUNT", "pz", "1e400", "+inf"], b":2\r\n"),
            (&["ZCOUNT", "pz", "-1e400", "1e-400"], b":3\r\n"),
            (&["ZCOUNT", "pz", "0x10", "+inf"], b"-ERR min or max is not a float\r\n"),
            (&["ZCOUNT", "pz", "(0x10", "+inf"], b"-ERR min or max is not a float\r\n"),
            (&["ZCOUNT", "pz", "(", "+inf"], b":9\r\n"),
            (&["ZCOUNT", "pz", "((1", "+inf"], b"-ERR min or max is not a float\r\n"),
            (&["ZCOUNT", "pz", "[1", "+inf"], b"-ERR min or max is not a float\r\n"),
            (&["ZCOUNT", "pz", "-inf", "(inf"], b":10\r\n"),
            (&["ZSCAN", "pz", ""], b"-ERR invalid cursor\r\n"),
            (&["ZSCAN", "pz", "-1"], b"-ERR invalid cursor\r\n"),
            (&["ZSCAN", "pz", "+0"], b"*2\r\n$1\r\n0\r\n*24\r\n$1\r\ni\r\n$4\r\n-inf\r\n$1\r\nl\r\n$1\r\n0\r\n$1\r\nm\r\n$1\r\n0\r\n$1\r\nd\r\n$6\r\n5e-324\r\n$1\r\ne\r\n$6\r\n2e-320\r\n$1\r\nf\r\n$3\r\n0.5\r\n$2\r\nb2\r\n$1\r\n3\r\n$1\r\ng\r\n$1\r\n5\r\n$1\r\nb\r\n$2\r\n16\r\n$1\r\nc\r\n$6\r\n1e+308\r\n$1\r\nh\r\n$3\r\ninf\r\n$2\r\nh2\r\n$3\r\ninf\r\n"),
            (&["ZSCAN", "pz", "18446744073709551615"], b"*2\r\n$1\r\n0\r\n*24\r\n$1\r\ni\r\n$4\r\n-inf\r\n$1\r\nl\r\n$1\r\n0\r\n$1\r\nm\r\n$1\r\n0\r\n$1\r\nd\r\n$6\r\n5e-324\r\n$1\r\ne\r\n$6\r\n2e-320\r\n$1\r\nf\r\n$3\r\n0.5\r\n$2\r\nb2\r\n$1\r\n3\r\n$1\r\ng\r\n$1\r\n5\r\n$1\r\nb\r\n$2\r\n16\r\n$1\r\nc\r\n$6\r\n1e+308\r\n$1\r\nh\r\n$3\r\ninf\r\n$2\r\nh2\r\n$3\r\ninf\r\n"),
            (&["ZSCAN", "pz", "18446744073709551616"], b"-ERR invalid cursor\r\n"),
            (&["ZSCAN", "pz", " 0"], b"*2\r\n$1\r\n0\r\n*24\r\n$1\r\ni\r\n$4\r\n-inf\r\n$1\r\nl\r\n$1\r\n0\r\n$1\r\nm\r\n$1\r\n0\r\n$1\r\nd\r\n$6\r\n5e-324\r\n$1\r\ne\r\n$6\r\n2e-320\r\n$1\r\nf\r\n$3\r\n0.5\r\n$2\r\nb2\r\n$1\r\n3\r\n$1\r\ng\r\n$1\r\n5\r\n$1\r\nb\r\n$2\r\n16\r\n$1\r\nc\r\n$6\r\n1e+308\r\n$1\r\nh\r\n$3\r\ninf\r\n$2\r\nh2\r\n$3\r\ninf\r\n"),
            (&["ZSCAN", "pz", "-"], b"-ERR invalid cursor\r\n"),
            (&["ZINCRBY", "pz", "0x1", "f"], b"$3\r\n1.5\r\n"),
            (&["ZUNION", "2", "pz", "pz", "WEIGHTS", "0x2", "1e400"], b"-ERR weight value is not a float\r\n"),
            (&["ZUNION", "1", "pz", "WEIGHTS", "nan"], b"-ERR weight value is not a float\r\n"),
            (&["ZUNION", "1", "pz", "WEIGHTS", "1e-400"], b"-ERR weight value is not a float\r\n"),
        ]);
    }

    /// -0 in destination sets (which form Redis builds them in) and NaN in weighted
    /// aggregation.
    #[test]
    fn redis_script_edges() {
        run_script(&[
            (
                &["ZADD", "w", "1", "LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL"],
                b":1\r\n",
            ),
            (&["ZADD", "w", "-0", "negz", "2", "a"], b":2\r\n"),
            (&["ZSCORE", "w", "negz"], b"$2\r\n-0\r\n"),
            (&["OBJECT", "ENCODING", "w"], b"$8\r\nskiplist\r\n"),
            (&["ZRANGESTORE", "d1", "w", "0", "1"], b":2\r\n"),
            (&["OBJECT", "ENCODING", "d1"], b"$8\r\nskiplist\r\n"),
            (&["ZSCORE", "d1", "negz"], b"$1\r\n0\r\n"),
            (&["ZRANGESTORE", "d2", "w", "-inf", "+inf", "BYSCORE"], b":3\r\n"),
            (&["OBJECT", "ENCODING", "d2"], b"$8\r\nskiplist\r\n"),
            (&["ZSCORE", "d2", "negz"], b"$1\r\n0\r\n"),
            (&["ZUNIONSTORE", "d4", "1", "w"], b":3\r\n"),
            (&["OBJECT", "ENCODING", "d4"], b"$8\r\nskiplist\r\n"),
            (&["ZSCORE", "d4", "negz"], b"$2\r\n-0\r\n"),
            (&["ZINTERSTORE", "d5", "2", "w", "w"], b":3\r\n"),
            (&["OBJECT", "ENCODING", "d5"], b"$8\r\nskiplist\r\n"),
            (&["ZSCORE", "d5", "negz"], b"$2\r\n-0\r\n"),
            (&["ZDIFFSTORE", "d6", "1", "w"], b":3\r\n"),
            (&["OBJECT", "ENCODING", "d6"], b"$8\r\nskiplist\r\n"),
            (&["ZSCORE", "d6", "negz"], b"$2\r\n-0\r\n"),
            (&["ZUNIONSTORE", "d7", "1", "w", "WEIGHTS", "-1"], b":3\r\n"),
            (&["OBJECT", "ENCODING", "d7"], b"$8\r\nskiplist\r\n"),
            (&["ZSCORE", "d7", "negz"], b"$1\r\n0\r\n"),
            (
                &[
                    "ZADD", "w", "1", "m1", "2", "m2", "3", "m3", "4", "m4", "5", "m5", "6", "m6", "7", "m7",
                    "8", "m8", "9", "m9", "10", "m10", "11", "m11", "12", "m12", "13", "m13", "14", "m14",
                    "15", "m15", "16", "m16", "17", "m17", "18", "m18", "19", "m19", "20", "m20", "21",
                    "m21", "22", "m22", "23", "m23", "24", "m24", "25", "m25", "26", "m26", "27", "m27",
                    "28", "m28", "29", "m29", "30", "m30", "31", "m31", "32", "m32", "33", "m33", "34",
                    "m34", "35", "m35", "36", "m36", "37", "m37", "38", "m38", "39", "m39", "40", "m40",
                    "41", "m41", "42", "m42", "43", "m43", "44", "m44", "45", "m45", "46", "m46", "47",
                    "m47", "48", "m48", "49", "m49", "50", "m50", "51", "m51", "52", "m52", "53", "m53",
                    "54", "m54", "55", "m55", "56", "m56", "57", "m57", "58", "m58", "59", "m59", "60",
                    "m60", "61", "m61", "62", "m62", "63", "m63", "64", "m64", "65", "m65", "66", "m66",
                    "67", "m67", "68", "m68", "69", "m69", "70", "m70", "71", "m71", "72", "m72", "73",
                    "m73", "74", "m74", "75", "m75", "76", "m76", "77", "m77", "78", "m78", "79", "m79",
                    "80", "m80", "81", "m81", "82", "m82", "83", "m83", "84", "m84", "85", "m85", "86",
                    "m86", "87", "m87", "88", "m88", "89", "m89", "90", "m90", "91", "m91", "92", "m92",
                    "93", "m93", "94", "m94", "95", "m95", "96", "m96", "97", "m97", "98", "m98", "99",
                    "m99", "100", "m100", "101", "m101", "102", "m102", "103", "m103", "104", "m104", "105",
                    "m105", "106", "m106", "107", "m107", "108", "m108", "109", "m109", "110", "m110", "111",
                    "m111", "112", "m112", "113", "m113", "114", "m114", "115", "m115", "116", "m116", "117",
                    "m117", "118", "m118", "119", "m119", "120", "m120", "121", "m121", "122", "m122", "123",
                    "m123", "124", "m124", "125", "m125", "126", "m126", "127", "m127", "128", "m128", "129",
                    "m129", "130", "m130",
                ],
                b":130\r\n",
            ),
            (&["ZRANGESTORE", "e1", "w", "0", "-1"], b":133\r\n"),
            (&["ZSCORE", "e1", "negz"], b"$2\r\n-0\r\n"),
            (&["ZRANGESTORE", "e3", "w", "-inf", "+inf", "BYSCORE"], b":133\r\n"),
            (&["ZSCORE", "e3", "negz"], b"$1\r\n0\r\n"),
            (
                &[
                    "ZADD", "big", "-0", "negz", "1", "m1", "2", "m2", "3", "m3", "4", "m4", "5", "m5", "6",
                    "m6", "7", "m7", "8", "m8", "9", "m9", "10", "m10", "11", "m11", "12", "m12", "13",
                    "m13", "14", "m14", "15", "m15", "16", "m16", "17", "m17", "18", "m18", "19", "m19",
                    "20", "m20", "21", "m21", "22", "m22", "23", "m23", "24", "m24", "25", "m25", "26",
                    "m26", "27", "m27", "28", "m28", "29", "m29", "30", "m30", "31", "m31", "32", "m32",
                    "33", "m33", "34", "m34", "35", "m35", "36", "m36", "37", "m37", "38", "m38", "39",
                    "m39", "40", "m40", "41", "m41", "42", "m42", "43", "m43", "44", "m44", "45", "m45",
                    "46", "m46", "47", "m47", "48", "m48", "49", "m49", "50", "m50", "51", "m51", "52",
                    "m52", "53", "m53", "54", "m54", "55", "m55", "56", "m56", "57", "m57", "58", "m58",
                    "59", "m59", "60", "m60", "61", "m61", "62", "m62", "63", "m63", "64", "m64", "65",
                    "m65", "66", "m66", "67", "m67", "68", "m68", "69", "m69", "70", "m70", "71", "m71",
                    "72", "m72", "73", "m73", "74", "m74", "75", "m75", "76", "m76", "77", "m77", "78",
                    "m78", "79", "m79", "80", "m80", "81", "m81", "82", "m82", "83", "m83", "84", "m84",
                    "85", "m85", "86", "m86", "87", "m87", "88", "m88", "89", "m89", "90", "m90", "91",
                    "m91", "92", "m92", "93", "m93", "94", "m94", "95", "m95", "96", "m96", "97", "m97",
                    "98", "m98", "99", "m99", "100", "m100", "101", "m101", "102", "m102", "103", "m103",
                    "104", "m104", "105", "m105", "106", "m106", "107", "m107", "108", "m108", "109", "m109",
                    "110", "m110", "111", "m111", "112", "m112", "113", "m113", "114", "m114", "115", "m115",
                    "116", "m116", "117", "m117", "118", "m118", "119", "m119", "120", "m120", "121", "m121",
                    "122", "m122", "123", "m123", "124", "m124", "125", "m125", "126", "m126", "127", "m127",
                    "128", "m128", "129", "m129", "130", "m130",
                ],
                b":131\r\n",
            ),
            (&["ZSCORE", "big", "negz"], b"$1\r\n0\r\n"),
            (&["ZADD", "x1", "1", "a", "2", "b"], b":2\r\n"),
            (&["ZADD", "x2", "-inf", "a", "0", "b"], b":2\r\n"),
            (
                &["ZINTER", "2", "x1", "x2", "WEIGHTS", "1", "inf", "WITHSCORES"],
                b"*4\r\n$1\r\na\r\n$4\r\n-inf\r\n$1\r\nb\r\n$1\r\n0\r\n",
            ),
            (
                &["ZINTER", "2", "x1", "x2", "WEIGHTS", "inf", "1", "WITHSCORES"],
                b"*4\r\n$1\r\na\r\n$1\r\n0\r\n$1\r\nb\r\n$3\r\ninf\r\n",
            ),
            (
                &["ZINTER", "2", "x1", "x2", "WEIGHTS", "1", "inf", "AGGREGATE", "MIN", "WITHSCORES"],
                b"*4\r\n$1\r\na\r\n$4\r\n-inf\r\n$1\r\nb\r\n$1\r\n2\r\n",
            ),
            (
                &["ZINTER", "2", "x1", "x2", "WEIGHTS", "1", "inf", "AGGREGATE", "MAX", "WITHSCORES"],
                b"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n",
            ),
            (
                &["ZUNION", "2", "x1", "x2", "WEIGHTS", "1", "inf", "WITHSCORES"],
                b"*4\r\n$1\r\na\r\n$4\r\n-inf\r\n$1\r\nb\r\n$1\r\n2\r\n",
            ),
            (
                &["ZUNION", "2", "x2", "x1", "WEIGHTS", "inf", "1", "AGGREGATE", "MIN", "WITHSCORES"],
                b"*4\r\n$1\r\na\r\n$4\r\n-inf\r\n$1\r\nb\r\n$1\r\n0\r\n",
            ),
        ]);
    }
}
