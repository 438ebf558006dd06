//! Hash-field expiration (Redis 7.4: HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT, HTTL, HPTTL,
//! HEXPIRETIME, HPEXPIRETIME, HPERSIST; Redis 8.0: HGETEX, HSETEX), and the lazy expiry of
//! fields that every hash command runs first.
//!
//! A field's deadline lives in its hash ([`Hash::field_deadline`]); the keyspace files the
//! keys of such hashes by their earliest deadline, so that the server's active cycle visits
//! only hashes with a field due ([`active_expire_fields`]). A field is alive through its deadline's millisecond, as a key is.
//!
//! Canonical mutations (each reproduces the post-state from the pre-state, whatever the clock):
//! - a deadline set: `HPEXPIREAT key unix-ms FIELDS n field...` (never a relative time);
//! - a deadline removed: `HPERSIST key FIELDS n field...`;
//! - a field removed, by expiry or by a deadline already past: `HDEL key field`;
//! - HSETEX: itself, without FNX/FXX (they held) and with its time as `PXAT`;
//! - HINCRBY / HINCRBYFLOAT of a field with a deadline: `HSETEX key KEEPTTL FIELDS 1 field value`
//!   (a plain `HSET` would drop the deadline when replayed).
//!
//! While replaying (journal, firehose) no deadline is judged: a deadline already past is set,
//! not acted on, and the origin's own `HDEL` follows, as for keys.

use super::hash::{read, write_or_create};
use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{eq_ic, parse_i64};
use resp::reply;
use store::types::Hash;
use store::{ValueMut, ValueRef};

const RF: u32 = Flags::READONLY | Flags::FAST;
const WF: u32 = Flags::WRITE | Flags::FAST;
const WMF: u32 = Flags::WRITE | Flags::DENYOOM | Flags::FAST;
const K1: (i32, i32, i32) = (1, 1, 1);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec("hexpire", -6, WF, K1, "hash", "Sets a time to live in seconds on fields of a hash.", Handler::Data(hexpire)),
    spec("hpexpire", -6, WF, K1, "hash", "Sets a time to live in milliseconds on fields of a hash.", Handler::Data(hpexpire)),
    spec("hexpireat", -6, WF, K1, "hash", "Sets an expiration time (unix seconds) on fields of a hash.", Handler::Data(hexpireat)),
    spec("hpexpireat", -6, WF, K1, "hash", "Sets an expiration time (unix milliseconds) on fields of a hash.", Handler::Data(hpexpireat)),
    spec("httl", -5, RF, K1, "hash", "Returns the seconds each field of a hash has left to live.", Handler::Data(httl)),
    spec("hpttl", -5, RF, K1, "hash", "Returns the milliseconds each field of a hash has left to live.", Handler::Data(hpttl)),
    spec("hexpiretime", -5, RF, K1, "hash", "Returns the expiration time (unix seconds) of fields of a hash.", Handler::Data(hexpiretime)),
    spec("hpexpiretime", -5, RF, K1, "hash", "Returns the expiration time (unix milliseconds) of fields of a hash.", Handler::Data(hpexpiretime)),
    spec("hpersist", -5, WF, K1, "hash", "Removes the expiration time of fields of a hash.", Handler::Data(hpersist)),
    spec("hgetex", -5, WF, K1, "hash", "Returns the values of fields of a hash, and sets or removes their expiration.", Handler::Data(hgetex)),
    spec("hsetex", -6, WMF, K1, "hash", "Sets fields of a hash, with an expiration and a condition on their existence.", Handler::Data(hsetex)),
];

/// The latest deadline a field may get (Redis's bound for field deadlines, unix ms).
const MAX_DEADLINE_MS: i64 = ((1 << 48) - 1) >> 2;

/// Lazy expiry of the fields of the hash at `key` whose deadline has passed: removed, one
/// `HDEL key field` each, and the key with its last field. Every hash command runs it first.
/// Nothing happens while replaying (the stream carries the origin's `HDEL`s) or on a replica
/// (its upstream's `HDEL`s come; until then it shows the fields), and nothing is looked up
/// while no hash anywhere has a deadline.
pub(crate) fn expire_fields(c: &mut Ctx, key: &[u8]) {
    if c.replaying || c.replica || !c.ks.has_field_deadline_keys() || c.ks.is_expired(key, c.now) {
        return;
    }
    let now = c.now;
    // The keyspace files each hash with deadlines no later than its earliest one: filed at or
    // after now, no field is due, and nothing is scanned (a command on a hash with many
    // deadlines costs the same as on one without).
    if c.ks.field_deadline_filed(key).is_some_and(|t| t >= now) {
        return;
    }
    let Some(ValueMut::Hash(h)) = c.ks.get_mut(key) else { return };
    if !h.has_field_deadlines() {
        return;
    }
    let (due, next) = h.expired_fields_and_next(now);
    if due.is_empty() {
        // Filed early (a field since removed, persisted or pushed later): file it exactly, so
        // that the next command skips the scan.
        c.ks.refile_field_deadline(key, next);
        return;
    }
    remove_fields(c, key, due);
    // (A hash emptied had no field left to give a `next`.)
    c.ks.refile_field_deadline(key, next);
}

/// The hash at `key` lost its last field deadline to a deletion (HDEL, HGETDEL): it leaves the
/// field-deadline index now, so that INFO keyspace's `subexpiry` stops counting it at once,
/// as Redis removes a hash from its field-expiry buckets when its last such field is deleted
/// (a persisted or overwritten deadline stays filed until the active cycle reaches it, as in
/// Redis). One lookup, and only while some hash is filed.
pub(crate) fn forget_field_deadlines(c: &mut Ctx, key: &[u8]) {
    if c.ks.has_field_deadline_keys() && c.ks.field_deadline_filed(key).is_some() {
        c.ks.refile_field_deadline(key, None);
    }
}

/// A read-only replica's read of a hash some of whose fields are past their deadlines: puts
/// the hash as a client is to see it, without them, in `c.replica_view` (None if that leaves
/// nothing: the key reads as missing) and returns true; false when nothing is hidden and the
/// stored hash is the answer. The stored hash keeps the fields until the upstream's `HDEL`s
/// arrive, as a replica keeps an expired key until the upstream's `DEL` (Redis's replicas
/// hide both the same way). Copying is rare: only in the moments between a deadline and the
/// upstream's expiry of it.
pub(crate) fn fill_replica_view(c: &mut Ctx, key: &[u8]) -> bool {
    if c.replaying || !c.ks.has_field_deadline_keys() || c.ks.is_expired(key, c.now) {
        return false;
    }
    if c.ks.field_deadline_filed(key).is_some_and(|t| t >= c.now) {
        return false; // no field due yet (see `expire_fields`)
    }
    let Some(ValueRef::Hash(h)) = c.ks.get(key) else { return false };
    if !h.has_field_deadlines() {
        return false;
    }
    let due = h.expired_fields(c.now, usize::MAX);
    if due.is_empty() {
        return false;
    }
    let mut view = h.clone();
    for f in &due {
        view.remove(f);
    }
    if view.is_empty() {
        c.stats.keyspace_misses += 1;
        c.replica_view = None;
    } else {
        c.stats.keyspace_hits += 1;
        c.replica_view = Some(view);
    }
    true
}

/// Removes `fields` from the hash at `key` (which holds them), emitting `HDEL`s, and the key
/// if it is left empty. Counts them as expired fields.
fn remove_fields(c: &mut Ctx, key: &[u8], fields: Vec<Vec<u8>>) {
    if fields.is_empty() {
        return;
    }
    let Some(ValueMut::Hash(h)) = c.ks.get_mut(key) else { return };
    for f in &fields {
        h.remove(f);
    }
    let emptied = h.is_empty();
    if emptied {
        c.ks.delete(key);
    }
    c.stats.expired_fields += fields.len() as u64;
    for f in &fields {
        c.emit(&[b"HDEL", key, f]);
    }
    if let Some(log) = c.field_expiry_log.as_mut() {
        log.push((key.to_vec(), emptied));
    }
}

/// The active cycle's part for fields: takes up to `max_keys` hashes whose earliest field
/// deadline has passed (the keyspace files them by it), removes their expired fields, and
/// files each again at its next deadline. Returns the fields removed.
pub fn active_expire_fields(c: &mut Ctx, max_keys: usize) -> usize {
    let mut removed = 0;
    for key in c.ks.take_due_field_keys(c.now, max_keys) {
        let (due, next) = match c.ks.get(&key) {
            Some(store::ValueRef::Hash(h)) if h.has_field_deadlines() => h.expired_fields_and_next(c.now),
            // Gone, replaced, or without deadlines now: not filed again.
            _ => continue,
        };
        if c.ks.is_expired(&key, c.now) {
            // The key itself is past its deadline: its own expiry removes it whole.
            c.ks.track_field_deadline(&key, c.now);
            continue;
        }
        removed += due.len();
        remove_fields(c, &key, due);
        if let Some(t) = next {
            c.ks.track_field_deadline(&key, t);
        }
    }
    removed
}

/// Parses a time argument as Redis's field-expiration commands do: an integer, not negative,
/// in seconds or milliseconds, plus `base` (the command's time for relative forms, 0 for
/// absolute ones), at most [`MAX_DEADLINE_MS`]. Writes the error and returns None otherwise.
fn parse_deadline(out: &mut Vec<u8>, name: &[u8], arg: &[u8], seconds: bool, base: i64) -> Option<i64> {
    let Some(v) = parse_i64(arg) else {
        reply::error(out, errors::NOT_INTEGER);
        return None;
    };
    if v < 0 {
        reply::error(out, b"ERR invalid expire time, must be >= 0");
        return None;
    }
    let too_late =
        || format!("ERR invalid expire time in '{}' command", String::from_utf8_lossy(name).to_lowercase());
    let ms = if seconds {
        if v > MAX_DEADLINE_MS / 1000 {
            reply::error(out, too_late().as_bytes());
            return None;
        }
        v * 1000
    } else {
        v
    };
    if ms > MAX_DEADLINE_MS - base {
        reply::error(out, too_late().as_bytes());
        return None;
    }
    Some(ms + base)
}

/// The `FIELDS numfields field...` block whose count is at `at` (the keyword right before it).
/// Writes Redis's error (`count_error` for a count that is not a positive integer) and returns
/// None when it is malformed.
fn fields_block<'a>(
    out: &mut Vec<u8>,
    args: &'a [&'a [u8]],
    at: usize,
    count_error: &[u8],
) -> Option<&'a [&'a [u8]]> {
    if !args.get(at - 1).is_some_and(|a| eq_ic(a, b"FIELDS")) {
        reply::error(out, b"ERR Mandatory argument FIELDS is missing or not at the right position");
        return None;
    }
    let Some(n) = args.get(at).and_then(|a| parse_i64(a)).filter(|&n| n >= 1) else {
        reply::error(out, count_error);
        return None;
    };
    if n as u64 != (args.len() - at - 1) as u64 {
        reply::error(out, b"ERR The `numfields` parameter must match the number of arguments");
        return None;
    }
    Some(&args[at + 1..])
}

/// Checks the key's type (WRONGTYPE written, Err) after its lazy field expiry; Ok(true) when a
/// hash is there.
fn hash_exists(c: &mut Ctx, out: &mut Vec<u8>, key: &[u8]) -> Result<bool, ()> {
    expire_fields(c, key);
    match c.write(key) {
        None => Ok(false),
        Some(ValueMut::Hash(_)) => Ok(true),
        Some(_) => {
            reply::error(out, errors::WRONGTYPE);
            Err(())
        }
    }
}

fn hash_mut<'c>(c: &'c mut Ctx, key: &[u8]) -> &'c mut Hash {
    match c.ks.get_mut(key) {
        Some(ValueMut::Hash(h)) => h,
        _ => unreachable!("checked by hash_exists"),
    }
}

/// Emits `HPEXPIREAT key at FIELDS n fields...` (when there are fields) and files the key
/// for the active cycle.
fn emit_deadline(c: &mut Ctx, key: &[u8], at: i64, fields: &[&[u8]]) {
    if fields.is_empty() {
        return;
    }
    c.ks.track_field_deadline(key, at);
    let (at, n) = (at.to_string(), fields.len().to_string());
    let mut m: Vec<&[u8]> = vec![b"HPEXPIREAT", key, at.as_bytes(), b"FIELDS", n.as_bytes()];
    m.extend_from_slice(fields);
    c.emit(&m);
}

/// Emits `HPERSIST key FIELDS n fields...` (when there are fields).
fn emit_persist(c: &mut Ctx, key: &[u8], fields: &[&[u8]]) {
    if fields.is_empty() {
        return;
    }
    let n = fields.len().to_string();
    let mut m: Vec<&[u8]> = vec![b"HPERSIST", key, b"FIELDS", n.as_bytes()];
    m.extend_from_slice(fields);
    c.emit(&m);
}

/// Removes the key if its hash is empty (the last field went).
fn drop_if_empty(c: &mut Ctx, key: &[u8]) {
    if matches!(c.ks.get(key), Some(store::ValueRef::Hash(h)) if h.is_empty()) {
        c.ks.delete(key);
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Cond {
    Always,
    Nx,
    Xx,
    Gt,
    Lt,
}

fn hexpire(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let now = c.now;
    expire_generic(c, out, args, true, now)
}
fn hpexpire(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let now = c.now;
    expire_generic(c, out, args, false, now)
}
fn hexpireat(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    expire_generic(c, out, args, true, 0)
}
fn hpexpireat(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    expire_generic(c, out, args, false, 0)
}

/// HEXPIRE / HPEXPIRE / HEXPIREAT / HPEXPIREAT key time [NX|XX|GT|LT] FIELDS n field...: per
/// field -2 (no such field), 0 (the condition failed), 1 (deadline set) or 2 (deleted: the
/// time has passed). A field without a deadline counts as one that never comes: GT and XX
/// fail on it, LT holds.
fn expire_generic(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]], seconds: bool, base: i64) {
    let key = args[1];
    let Ok(exists) = hash_exists(c, out, key) else { return };
    let Some(at) = parse_deadline(out, args[0], args[2], seconds, base) else { return };
    let cond = match args[3].to_ascii_lowercase().as_slice() {
        b"nx" => Cond::Nx,
        b"xx" => Cond::Xx,
        b"gt" => Cond::Gt,
        b"lt" => Cond::Lt,
        _ => Cond::Always,
    };
    let at_count = if cond == Cond::Always { 4 } else { 5 };
    let Some(fields) =
        fields_block(out, args, at_count, b"ERR Parameter `numFields` should be greater than 0")
    else {
        return;
    };
    reply::array_len(out, fields.len());
    if !exists {
        for _ in fields {
            reply::integer(out, -2);
        }
        return;
    }
    let (now, replaying) = (c.now, c.replaying);
    let h = hash_mut(c, key);
    let mut set: Vec<&[u8]> = Vec::new();
    let mut deleted: Vec<&[u8]> = Vec::new();
    for &f in fields {
        if !h.contains(f) {
            reply::integer(out, -2);
            continue;
        }
        let held = match (h.field_deadline(f), cond) {
            (_, Cond::Always) => true,
            (None, Cond::Nx | Cond::Lt) => true,
            (None, Cond::Xx | Cond::Gt) => false,
            (Some(_), Cond::Nx) => false,
            (Some(_), Cond::Xx) => true,
            (Some(p), Cond::Gt) => at > p,
            (Some(p), Cond::Lt) => at < p,
        };
        if !held {
            reply::integer(out, 0);
        } else if at <= now && !replaying {
            h.remove(f);
            deleted.push(f);
            reply::integer(out, 2);
        } else {
            h.set_field_deadline(f, Some(at));
            set.push(f);
            reply::integer(out, 1);
        }
    }
    drop_if_empty(c, key);
    for f in deleted {
        c.emit(&[b"HDEL", key, f]);
    }
    emit_deadline(c, key, at, &set);
}

fn httl(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    ttl_generic(c, out, args, true, true)
}
fn hpttl(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    ttl_generic(c, out, args, false, true)
}
fn hexpiretime(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    ttl_generic(c, out, args, true, false)
}
fn hpexpiretime(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    ttl_generic(c, out, args, false, false)
}

/// HTTL / HPTTL / HEXPIRETIME / HPEXPIRETIME key FIELDS n field...: per field -2 (no such
/// field), -1 (no deadline), else the time left (`relative`) or the deadline, in seconds
/// (rounded up) or milliseconds.
fn ttl_generic(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]], seconds: bool, relative: bool) {
    let key = args[1];
    let now = c.now;
    // `read` expires the hash's fields first.
    let Ok(h) = read(c, out, key) else { return };
    let Some(fields) = fields_block(out, args, 3, b"ERR Number of fields must be a positive integer") else {
        return;
    };
    reply::array_len(out, fields.len());
    for f in fields {
        let v = match h {
            Some(h) if h.contains(f) => match h.field_deadline(f) {
                None => -1,
                Some(t) if t < now => -2,
                Some(t) => {
                    let t = if relative { t - now } else { t };
                    if seconds {
                        (t + 999) / 1000
                    } else {
                        t
                    }
                }
            },
            _ => -2,
        };
        reply::integer(out, v);
    }
}

/// HPERSIST key FIELDS n field...: per field -2 (no such field), -1 (no deadline), 1
/// (deadline removed).
fn hpersist(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let Ok(exists) = hash_exists(c, out, key) else { return };
    let Some(fields) = fields_block(out, args, 3, b"ERR Number of fields must be a positive integer") else {
        return;
    };
    reply::array_len(out, fields.len());
    if !exists {
        for _ in fields {
            reply::integer(out, -2);
        }
        return;
    }
    let h = hash_mut(c, key);
    let mut persisted: Vec<&[u8]> = Vec::new();
    for &f in fields {
        let v = if !h.contains(f) {
            -2
        } else if h.field_deadline(f).is_none() {
            -1
        } else {
            h.set_field_deadline(f, None);
            persisted.push(f);
            1
        };
        reply::integer(out, v);
    }
    emit_persist(c, key, &persisted);
}

/// HGETEX key [EX s | PX ms | EXAT unix-s | PXAT unix-ms | PERSIST] FIELDS n field...: the
/// values (nil for a missing field), then the deadline of each field found set (or, past
/// already, the field deleted) or removed.
fn hgetex(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let proto = c.proto;
    let Ok(exists) = hash_exists(c, out, key) else { return };
    let now = c.now;
    let (deadline, persist, count_at) = match args[2].to_ascii_lowercase().as_slice() {
        opt @ (b"ex" | b"px" | b"exat" | b"pxat") => {
            let seconds = opt == b"ex" || opt == b"exat";
            let base = if opt == b"ex" || opt == b"px" { now } else { 0 };
            let Some(at) = parse_deadline(out, args[0], args[3], seconds, base) else { return };
            (Some(at), false, 5)
        }
        b"persist" => (None, true, 4),
        _ => (None, false, 3),
    };
    if count_at >= args.len() {
        return errors::wrong_arity(out, args[0]);
    }
    let Some(fields) = fields_block(out, args, count_at, b"ERR Number of fields must be a positive integer")
    else {
        return;
    };
    reply::array_len(out, fields.len());
    if !exists {
        for _ in fields {
            reply::null_bulk(out, proto);
        }
        return;
    }
    let replaying = c.replaying;
    let h = hash_mut(c, key);
    let (mut set, mut deleted, mut persisted): (Vec<&[u8]>, Vec<&[u8]>, Vec<&[u8]>) = Default::default();
    for &f in fields {
        let Some(v) = h.get(f) else {
            reply::null_bulk(out, proto);
            continue;
        };
        reply::bulk(out, v);
        if persist {
            if h.field_deadline(f).is_some() {
                h.set_field_deadline(f, None);
                persisted.push(f);
            }
        } else if let Some(at) = deadline {
            if at <= now && !replaying {
                h.remove(f);
                deleted.push(f);
            } else {
                h.set_field_deadline(f, Some(at));
                set.push(f);
            }
        }
    }
    drop_if_empty(c, key);
    for f in deleted {
        c.emit(&[b"HDEL", key, f]);
    }
    if let Some(at) = deadline {
        emit_deadline(c, key, at, &set);
    }
    emit_persist(c, key, &persisted);
}

/// HSETEX key [FNX | FXX] [EX s | PX ms | EXAT unix-s | PXAT unix-ms | KEEPTTL] FIELDS n
/// field value...: 1 when the fields were set, 0 when FNX (none may exist) or FXX (all must)
/// did not hold. Without a time or KEEPTTL the fields lose any deadline they had, as with
/// HSET; with a time already past, they are deleted.
fn hsetex(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    const ONE_TIME: &[u8] = b"ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified";
    let key = args[1];
    let now = c.now;
    let (mut fnx, mut fxx, mut keepttl) = (false, false, false);
    let mut deadline: Option<i64> = None;
    let mut timed = false;
    let mut i = 2;
    let pairs = loop {
        let Some(a) = args.get(i) else { return errors::wrong_arity(out, args[0]) };
        match a.to_ascii_lowercase().as_slice() {
            b"fields" => {
                if i + 3 >= args.len() {
                    return errors::wrong_arity(out, args[0]);
                }
                let Some(n) = parse_i64(args[i + 1]).filter(|n| (1..=i32::MAX as i64).contains(n)) else {
                    return reply::error(out, b"ERR invalid number of fields");
                };
                let rest = args.len() - i - 2;
                if !rest.is_multiple_of(2) || n as usize != rest / 2 {
                    return errors::wrong_arity(out, args[0]);
                }
                break &args[i + 2..];
            }
            opt @ (b"ex" | b"px" | b"exat" | b"pxat") => {
                if timed || keepttl {
                    return reply::error(out, ONE_TIME);
                }
                if i + 1 >= args.len() {
                    return reply::error(out, b"ERR missing expire time");
                }
                let seconds = opt == b"ex" || opt == b"exat";
                let base = if opt == b"ex" || opt == b"px" { now } else { 0 };
                let Some(at) = parse_deadline(out, args[0], args[i + 1], seconds, base) else { return };
                deadline = Some(at);
                timed = true;
                i += 2;
            }
            b"keepttl" => {
                if timed || keepttl {
                    return reply::error(out, ONE_TIME);
                }
                keepttl = true;
                i += 1;
            }
            cond @ (b"fnx" | b"fxx") => {
                if fnx || fxx {
                    return reply::error(out, b"ERR Only one of FXX or FNX arguments can be specified");
                }
                (fnx, fxx) = (cond == b"fnx", cond == b"fxx");
                i += 1;
            }
            _ => {
                return reply::error(
                    out,
                    format!("ERR unknown argument: {}", String::from_utf8_lossy(a)).as_bytes(),
                )
            }
        }
    };
    let Ok(exists) = hash_exists(c, out, key) else { return };
    if !exists && fxx {
        return reply::integer(out, 0);
    }
    if fnx || fxx {
        let found = match c.ks.get(key) {
            Some(store::ValueRef::Hash(h)) => pairs.chunks(2).filter(|p| h.contains(p[0])).count(),
            _ => 0,
        };
        if (fnx && found > 0) || (fxx && found < pairs.len() / 2) {
            return reply::integer(out, 0);
        }
    }
    let replaying = c.replaying;
    let Ok(h) = write_or_create(c, out, key) else { return };
    let mut deleted: Vec<&[u8]> = Vec::new();
    for p in pairs.chunks(2) {
        let (f, v) = (p[0], p[1]);
        if timed || keepttl {
            h.set_keep_deadline(f, v);
        } else {
            h.set(f, v);
        }
        if let Some(at) = deadline {
            if at <= now && !replaying {
                h.remove(f);
                deleted.push(f);
            } else {
                h.set_field_deadline(f, Some(at));
            }
        }
    }
    drop_if_empty(c, key);
    if !deleted.is_empty() {
        // A time already past: what is left is the fields gone.
        for f in deleted {
            c.emit(&[b"HDEL", key, f]);
        }
    } else {
        let at = deadline.map(|t| t.to_string());
        let n = (pairs.len() / 2).to_string();
        let mut m: Vec<&[u8]> = vec![b"HSETEX", key];
        match &at {
            Some(t) => m.extend_from_slice(&[b"PXAT", t.as_bytes()]),
            None if keepttl => m.push(b"KEEPTTL"),
            None => {}
        }
        m.extend_from_slice(&[b"FIELDS", n.as_bytes()]);
        m.extend_from_slice(pairs);
        c.emit(&m);
        if let Some(t) = deadline {
            c.ks.track_field_deadline(key, t);
        }
    }
    reply::integer(out, 1);
}

#[cfg(test)]
mod tests {
    use crate::testing::{reply, take_muts as muts};
    use crate::Engine;

    const T: i64 = 1_700_000_000_000;

    fn run(e: &mut Engine, now: i64, cmd: &str) -> String {
        reply(e, now, &cmd.split(' ').collect::<Vec<_>>())
    }

    fn ints(v: &[i64]) -> String {
        let mut s = format!("*{}\r\n", v.len());
        for i in v {
            s.push_str(&format!(":{i}\r\n"));
        }
        s
    }

    #[test]
    fn hexpire_codes_conditions_and_mutations() {
        let mut e = Engine::default();
        run(&mut e, T, "HSET h a 1 b 2 c 3");
        muts(&mut e);
        assert_eq!(run(&mut e, T, "HEXPIRE h 10 FIELDS 3 a zz b"), ints(&[1, -2, 1]));
        assert_eq!(muts(&mut e), [format!("HPEXPIREAT h {} FIELDS 2 a b", T + 10_000)]);
        // NX: only fields without a deadline; XX: only with; GT/LT against the current one, a
        // field without a deadline counting as never expiring.
        assert_eq!(run(&mut e, T, "HEXPIRE h 20 NX FIELDS 2 a c"), ints(&[0, 1]));
        assert_eq!(run(&mut e, T, "HPEXPIRE h 5000 GT FIELDS 1 a"), ints(&[0]));
        assert_eq!(run(&mut e, T, "HPEXPIRE h 5000 LT FIELDS 1 a"), ints(&[1]));
        run(&mut e, T, "HSET h d 4");
        assert_eq!(run(&mut e, T, "HEXPIRE h 5 XX FIELDS 2 d a"), ints(&[0, 1]));
        assert_eq!(run(&mut e, T, "HEXPIRE h 5 GT FIELDS 1 d"), ints(&[0]));
        assert_eq!(run(&mut e, T, "HEXPIRE h 5 LT FIELDS 1 d"), ints(&[1]));
        muts(&mut e);
        // A time already reached deletes the field at once.
        assert_eq!(run(&mut e, T, &format!("HPEXPIREAT h {T} FIELDS 1 d")), ints(&[2]));
        assert_eq!(muts(&mut e), ["HDEL h d"]);
        assert_eq!(run(&mut e, T, "HEXPIRE nokey 10 FIELDS 2 a b"), ints(&[-2, -2]));
        assert_eq!(muts(&mut e), Vec::<String>::new());
    }

    #[test]
    fn ttl_reads_and_lazy_expiry() {
        let mut e = Engine::default();
        run(&mut e, T, "HSET h a 1 b 2 c 3");
        run(&mut e, T, "HPEXPIRE h 1500 FIELDS 1 a");
        run(&mut e, T, "HPEXPIRE h 3000 FIELDS 1 b");
        muts(&mut e);
        assert_eq!(run(&mut e, T, "HTTL h FIELDS 4 a b c zz"), ints(&[2, 3, -1, -2]));
        assert_eq!(run(&mut e, T + 1, "HPTTL h FIELDS 2 a b"), ints(&[1499, 2999]));
        assert_eq!(run(&mut e, T, "HPEXPIRETIME h FIELDS 1 a"), ints(&[T + 1500]));
        assert_eq!(run(&mut e, T, "HEXPIRETIME h FIELDS 1 a"), ints(&[(T + 1500 + 999) / 1000]));
        assert_eq!(run(&mut e, T, "HTTL nokey FIELDS 1 a"), ints(&[-2]));
        // Alive through its deadline's millisecond, gone the next.
        assert_eq!(run(&mut e, T + 1500, "HGET h a"), "$1\r\n1\r\n");
        assert_eq!(muts(&mut e), Vec::<String>::new());
        assert_eq!(run(&mut e, T + 1501, "HGET h a"), "$-1\r\n");
        assert_eq!(muts(&mut e), ["HDEL h a"]);
        assert_eq!(run(&mut e, T + 1501, "HLEN h"), ":2\r\n");
        // The last fields going take the key.
        run(&mut e, T + 1501, "HPEXPIRE h 1 FIELDS 1 c");
        muts(&mut e);
        assert_eq!(run(&mut e, T + 5000, "HGETALL h"), "*0\r\n");
        let mut gone = muts(&mut e);
        gone.sort();
        assert_eq!(gone, ["HDEL h b", "HDEL h c"]);
        assert_eq!(run(&mut e, T + 5000, "EXISTS h"), ":0\r\n");
        assert_eq!(e.stats.expired_fields, 3);
    }

    /// A command skips the scan of a hash's deadlines while the keyspace files it at or after
    /// now; one that scans (filed early, or a field due) files it at its exact next deadline.
    #[test]
    fn lazy_expiry_files_the_hash_at_its_next_deadline() {
        let mut e = Engine::default();
        run(&mut e, T, "HSET h a 1 b 2 c 3");
        run(&mut e, T, "HPEXPIRE h 100 FIELDS 1 a");
        run(&mut e, T, "HPEXPIRE h 300 FIELDS 1 b");
        // Pushed later: the filing stays early (the keyspace only files earlier).
        run(&mut e, T, "HPEXPIRE h 5000 FIELDS 1 a");
        assert_eq!(e.ks.field_deadline_filed(b"h"), Some(T + 100));
        // Past the early filing, nothing due: scanned once, filed exactly.
        assert_eq!(run(&mut e, T + 200, "HGET h a"), "$1\r\n1\r\n");
        assert_eq!(e.ks.field_deadline_filed(b"h"), Some(T + 300));
        // b due: removed, and the hash filed at a's deadline.
        assert_eq!(run(&mut e, T + 301, "HLEN h"), ":2\r\n");
        assert_eq!(muts(&mut e).last().map(String::as_str), Some("HDEL h b"));
        assert_eq!(e.ks.field_deadline_filed(b"h"), Some(T + 5000));
        // Before it, commands find nothing due.
        assert_eq!(run(&mut e, T + 4999, "HGET h a"), "$1\r\n1\r\n");
        assert_eq!(run(&mut e, T + 5001, "HGET h a"), "$-1\r\n");
        assert_eq!(e.ks.field_deadline_filed(b"h"), None, "no deadline left, not filed");
        assert_eq!(run(&mut e, T + 5001, "HGETALL h"), "*2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    }

    #[test]
    fn writes_keep_or_drop_deadlines_as_redis_does() {
        let mut e = Engine::default();
        run(&mut e, T, "HSET h n 5 s x");
        run(&mut e, T, "HEXPIRE h 100 FIELDS 2 n s");
        muts(&mut e);
        // HINCRBY keeps the deadline (and says so in its mutation); HSET drops it.
        assert_eq!(run(&mut e, T, "HINCRBY h n 2"), ":7\r\n");
        assert_eq!(muts(&mut e), ["HSETEX h KEEPTTL FIELDS 1 n 7"]);
        assert_eq!(run(&mut e, T, "HTTL h FIELDS 1 n"), ints(&[100]));
        run(&mut e, T, "HSET h s y");
        assert_eq!(run(&mut e, T, "HTTL h FIELDS 1 s"), ints(&[-1]));
        // HPERSIST
        assert_eq!(run(&mut e, T, "HPERSIST h FIELDS 3 n s zz"), ints(&[1, -1, -2]));
        assert_eq!(muts(&mut e), ["HSET h s y", "HPERSIST h FIELDS 1 n"]);
    }

    #[test]
    fn hgetex_and_hsetex() {
        let mut e = Engine::default();
        run(&mut e, T, "HSET h a 1 b 2");
        muts(&mut e);
        assert_eq!(run(&mut e, T, "HGETEX h PX 500 FIELDS 2 a zz"), "*2\r\n$1\r\n1\r\n$-1\r\n");
        assert_eq!(muts(&mut e), [format!("HPEXPIREAT h {} FIELDS 1 a", T + 500)]);
        assert_eq!(run(&mut e, T, "HGETEX h PERSIST FIELDS 2 a b"), "*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
        assert_eq!(muts(&mut e), ["HPERSIST h FIELDS 1 a"]);
        assert_eq!(run(&mut e, T, "HGETEX h FIELDS 1 b"), "*1\r\n$1\r\n2\r\n");
        assert_eq!(muts(&mut e), Vec::<String>::new());
        assert_eq!(run(&mut e, T, "HGETEX h EXAT 1 FIELDS 1 b"), "*1\r\n$1\r\n2\r\n");
        assert_eq!(muts(&mut e), ["HDEL h b"]);
        // HSETEX: FNX needs none of the fields, FXX all of them.
        assert_eq!(run(&mut e, T, "HSETEX h FNX EX 10 FIELDS 2 a 9 c 3"), ":0\r\n");
        assert_eq!(run(&mut e, T, "HSETEX h FXX FIELDS 2 a 9 c 3"), ":0\r\n");
        assert_eq!(run(&mut e, T, "HSETEX h FNX PX 700 FIELDS 1 c 3"), ":1\r\n");
        assert_eq!(muts(&mut e), [format!("HSETEX h PXAT {} FIELDS 1 c 3", T + 700)]);
        assert_eq!(run(&mut e, T, "HSETEX h KEEPTTL FIELDS 1 c 4"), ":1\r\n");
        assert_eq!(run(&mut e, T, "HPTTL h FIELDS 1 c"), ints(&[700]));
        assert_eq!(run(&mut e, T, "HSETEX h FIELDS 1 c 5"), ":1\r\n");
        assert_eq!(run(&mut e, T, "HPTTL h FIELDS 1 c"), ints(&[-1]));
        assert_eq!(run(&mut e, T, "HSETEX nokey FXX FIELDS 1 a 1"), ":0\r\n");
        assert_eq!(run(&mut e, T, "EXISTS nokey"), ":0\r\n");
    }

    #[test]
    fn errors_in_redis_order() {
        let mut e = Engine::default();
        run(&mut e, T, "SET s v");
        run(&mut e, T, "HSET h a 1");
        for (cmd, err) in [
            (
                "HEXPIRE s 10 FIELDS 1 a",
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            ),
            ("HEXPIRE h x FIELDS 1 a", "-ERR value is not an integer or out of range\r\n"),
            ("HEXPIRE h -1 FIELDS 1 a", "-ERR invalid expire time, must be >= 0\r\n"),
            ("HEXPIRE h 99999999999999 FIELDS 1 a", "-ERR invalid expire time in 'hexpire' command\r\n"),
            (
                "HEXPIRE h 10 FIELD 1 a",
                "-ERR Mandatory argument FIELDS is missing or not at the right position\r\n",
            ),
            (
                "HEXPIRE h 10 NX XX FIELDS 1 a",
                "-ERR Mandatory argument FIELDS is missing or not at the right position\r\n",
            ),
            ("HEXPIRE h 10 FIELDS 0 a", "-ERR Parameter `numFields` should be greater than 0\r\n"),
            (
                "HEXPIRE h 10 FIELDS 2 a",
                "-ERR The `numfields` parameter must match the number of arguments\r\n",
            ),
            ("HTTL h FIELDS x a", "-ERR Number of fields must be a positive integer\r\n"),
            (
                "HPERSIST h FIELDS 2 a",
                "-ERR The `numfields` parameter must match the number of arguments\r\n",
            ),
            ("HGETEX h EX -5 FIELDS 1 a", "-ERR invalid expire time, must be >= 0\r\n"),
            (
                "HGETEX h NOPE FIELDS 1 a",
                "-ERR Mandatory argument FIELDS is missing or not at the right position\r\n",
            ),
            (
                "HSETEX h EX 10 PX 10 FIELDS 1 a 1",
                "-ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified\r\n",
            ),
            ("HSETEX h FNX FXX FIELDS 1 a 1", "-ERR Only one of FXX or FNX arguments can be specified\r\n"),
            ("HSETEX h BOGUS FIELDS 1 a 1", "-ERR unknown argument: BOGUS\r\n"),
            ("HSETEX h FIELDS 0 a 1", "-ERR invalid number of fields\r\n"),
            ("HSETEX h FIELDS 2 a 1", "-ERR wrong number of arguments for 'hsetex' command\r\n"),
            ("HSETEX h FIELDS 1 a 1 b", "-ERR wrong number of arguments for 'hsetex' command\r\n"),
        ] {
            assert_eq!(run(&mut e, T, cmd), err, "{cmd}");
        }
        assert_eq!(muts(&mut e), ["SET s v", "HSET h a 1"]);
    }

    #[test]
    fn dump_restore_and_active_expiry_keep_deadlines() {
        let mut e = Engine::default();
        run(&mut e, T, "HSET h a 1 b 2 c 3");
        run(&mut e, T, "HPEXPIRE h 100 FIELDS 1 a");
        run(&mut e, T, "HPEXPIRE h 5000 FIELDS 1 b");
        muts(&mut e);
        let payload = crate::rdb::dump(e.ks.get(b"h").unwrap());
        let restored = crate::rdb::restore(&payload).unwrap();
        assert_eq!(restored.as_ref().to_plain(), e.ks.get(b"h").unwrap().to_plain());
        // The active cycle removes the expired field and leaves the rest.
        let n = e.active_expire_fields(T + 200, 20);
        assert_eq!(n, 1);
        assert_eq!(muts(&mut e), ["HDEL h a"]);
        assert_eq!(run(&mut e, T + 200, "HPTTL h FIELDS 3 a b c"), ints(&[-2, 4800, -1]));
    }
}
