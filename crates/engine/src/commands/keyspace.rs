//! Generic key commands: existence, deletion, renaming, copying, iteration, and expiry.
//!
//! Canonical mutations: DEL/UNLINK emit one `DEL key` per key actually removed; EXPIRE and its
//! relatives emit `PEXPIREAT key <absolute ms>` (or `DEL key` when the deadline is already
//! past, since the key is gone at once); PERSIST emits `PERSIST key` only when a deadline was
//! removed; RENAME/COPY are deterministic given the state and are emitted as executed;
//! FLUSHALL/FLUSHDB emit `FLUSHALL`.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{eq_ic, glob_match, parse_i64};
use resp::reply;
use store::keyspace::access::{self, AccessMode};
use store::{Kind, Millis};

const R: u32 = Flags::READONLY;
const RF: u32 = Flags::READONLY | Flags::FAST;
const W: u32 = Flags::WRITE;
const WF: u32 = Flags::WRITE | Flags::FAST;

pub static COMMANDS: &[CommandSpec] = &[
    spec("del", -2, W, (1, -1, 1), "generic", "Deletes one or more keys.", Handler::Data(del)),
    spec("unlink", -2, WF, (1, -1, 1), "generic", "Deletes one or more keys.", Handler::Data(del)),
    spec("exists", -2, RF, (1, -1, 1), "generic", "Determines whether one or more keys exist.", Handler::Data(exists)),
    spec("type", 2, RF, (1, 1, 1), "generic", "Determines the type of value stored at a key.", Handler::Data(type_)),
    spec("rename", 3, W, (1, 2, 1), "generic", "Renames a key and overwrites the destination.", Handler::Data(rename)),
    spec("renamenx", 3, WF, (1, 2, 1), "generic", "Renames a key only when the target key name doesn't exist.", Handler::Data(renamenx)),
    spec("copy", -3, W | Flags::DENYOOM, (1, 2, 1), "generic", "Copies the value of a key to a new key.", Handler::Data(copy)),
    spec("keys", 2, R, (0, 0, 0), "generic", "Returns all key names that match a pattern.", Handler::Data(keys)),
    spec("scan", -2, R, (0, 0, 0), "generic", "Iterates over the key names in the database.", Handler::Data(scan)),
    spec("randomkey", 1, R, (0, 0, 0), "generic", "Returns a random key name from the database.", Handler::Data(randomkey)),
    spec("dbsize", 1, RF, (0, 0, 0), "server", "Returns the number of keys in the database.", Handler::Data(dbsize)),
    spec("flushall", -1, W, (0, 0, 0), "server", "Removes all keys from all databases.", Handler::Data(flushall)),
    spec("flushdb", -1, W, (0, 0, 0), "server", "Remove all keys from the current database.", Handler::Data(flushdb)),
    spec("move", 3, WF, (1, 1, 1), "generic", "Moves a key to another database.", Handler::Data(move_)),
    spec("swapdb", 3, WF, (0, 0, 0), "server", "Swaps two Redis databases.", Handler::Data(swapdb)),
    spec("expire", -3, WF, (1, 1, 1), "generic", "Sets the expiration time of a key in seconds.", Handler::Data(expire)),
    spec("pexpire", -3, WF, (1, 1, 1), "generic", "Sets the expiration time of a key in milliseconds.", Handler::Data(expire)),
    spec("expireat", -3, WF, (1, 1, 1), "generic", "Sets the expiration time of a key to a Unix timestamp.", Handler::Data(expire)),
    spec("pexpireat", -3, WF, (1, 1, 1), "generic", "Sets the expiration time of a key to a Unix milliseconds timestamp.", Handler::Data(expire)),
    spec("ttl", 2, RF, (1, 1, 1), "generic", "Returns the expiration time in seconds of a key.", Handler::Data(ttl)),
    spec("pttl", 2, RF, (1, 1, 1), "generic", "Returns the expiration time in milliseconds of a key.", Handler::Data(ttl)),
    spec("expiretime", 2, RF, (1, 1, 1), "generic", "Returns the expiration time of a key as a Unix timestamp.", Handler::Data(ttl)),
    spec("pexpiretime", 2, RF, (1, 1, 1), "generic", "Returns the expiration time of a key as a Unix milliseconds timestamp.", Handler::Data(ttl)),
    spec("persist", 2, WF, (1, 1, 1), "generic", "Removes the expiration time of a key.", Handler::Data(persist)),
    spec("touch", -2, RF, (1, -1, 1), "generic", "Returns the number of existing keys out of those specified after updating the time they were last accessed.", Handler::Data(exists)),
    spec("object", -2, R, (2, 2, 1), "generic", "A container for object introspection commands.", Handler::Data(object)),
];

/// DEL key [key ...] / UNLINK key [key ...]
fn del(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let mut n = 0;
    for key in &args[1..] {
        if c.exists(key) {
            c.ks.delete(key);
            c.emit(&[b"DEL", key]);
            n += 1;
        }
    }
    reply::integer(out, n);
}

/// EXISTS key [key ...] / TOUCH key [key ...]: a key named twice counts twice.
/// EXISTS leaves the keys' access times alone; TOUCH is the command that records an access.
fn exists(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let touch = eq_ic(args[0], b"touch");
    // TOUCH records its access even for a client in CLIENT NO-TOUCH mode (as Redis).
    let no_touch = std::mem::replace(&mut c.no_touch, false);
    let n = args[1..]
        .iter()
        .filter(|k| if touch { c.read(k).is_some() } else { c.read_notouch(k).is_some() })
        .count();
    c.no_touch = no_touch;
    reply::integer(out, n as i64);
}

/// TYPE key
fn type_(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let name = c.read_notouch(args[1]).map(|v| v.kind().name()).unwrap_or("none");
    reply::simple(out, name.as_bytes());
}

/// Moves src to dst keeping src's deadline. The caller checked that src exists.
fn move_key(c: &mut Ctx, src: &[u8], dst: &[u8]) {
    if let Some((value, deadline)) = c.ks.take(src) {
        let kind = value.kind();
        c.ks.insert(dst, value, deadline);
        signal_if_blockable(c, dst, kind);
    }
    c.emit(&[b"RENAME", src, dst]);
}

/// A key that RENAME or COPY brings into place is a new key to Redis (its `dbAdd` signals it),
/// so clients blocked on it by BLPOP, BZPOPMIN and the like are served at once. Only the types
/// a client can block on are signalled: a blocked BLPOP must keep waiting, not get WRONGTYPE,
/// when a string lands on its key.
fn signal_if_blockable(c: &mut Ctx, key: &[u8], kind: store::Kind) {
    signal_if_blockable_in(c, c.db, key, kind);
}

fn signal_if_blockable_in(c: &mut Ctx, db: u32, key: &[u8], kind: store::Kind) {
    if matches!(kind, store::Kind::List | store::Kind::ZSet | store::Kind::Stream) {
        c.signal_ready_in(db, key);
    }
}

/// MOVE key db: the key, its value and its deadline, to database `db`, if it is not there
/// already. Canonical as itself (its effect depends only on the two databases' contents).
fn move_(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let target = match c.parse_db(args[2]) {
        Ok(db) => db,
        Err(e) => return reply::error(out, e),
    };
    if target == c.db {
        return reply::error(out, b"ERR source and destination objects are the same");
    }
    if !c.exists(key) {
        return reply::integer(out, 0);
    }
    if !c.expire_in(target, key) && c.db_mut(target).contains(key) {
        return reply::integer(out, 0);
    }
    let Some((value, deadline)) = c.ks.take(key) else { return reply::integer(out, 0) };
    let kind = value.kind();
    c.db_mut(target).insert(key, value, deadline);
    signal_if_blockable_in(c, target, key, kind);
    c.emit(&[b"MOVE", key, itoa::Buffer::new().format(target).as_bytes()]);
    reply::integer(out, 1);
}

/// SWAPDB index1 index2: the two databases trade contents (clients stay on their number).
/// Both indexes are parsed before either is checked against the range, as Redis does.
fn swapdb(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let parse = |a: &[u8]| crate::util::parse_i64(a).filter(|n| i32::try_from(*n).is_ok());
    let Some(a) = parse(args[1]) else { return reply::error(out, b"ERR invalid first DB index") };
    let Some(b) = parse(args[2]) else { return reply::error(out, b"ERR invalid second DB index") };
    let range = 0..c.databases() as i64;
    if !range.contains(&a) || !range.contains(&b) {
        return reply::error(out, errors::DB_INDEX_OUT_OF_RANGE);
    }
    let (a, b) = (a as u32, b as u32);
    reply::ok(out);
    if a == b {
        return;
    }
    let cur = c.db;
    if a == cur || b == cur {
        let other = if a == cur { b } else { a };
        std::mem::swap(c.ks, &mut c.dbs[other as usize]);
    } else {
        c.dbs.swap(a as usize, b as usize);
    }
    let now = c.now;
    c.ks.set_now(now);
    c.emit(&[b"SWAPDB", itoa::Buffer::new().format(a).as_bytes(), itoa::Buffer::new().format(b).as_bytes()]);
}

/// RENAME key newkey
fn rename(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (src, dst) = (args[1], args[2]);
    if !c.exists(src) {
        return reply::error(out, errors::NO_SUCH_KEY);
    }
    if src != dst {
        c.expire_if_needed(dst);
        move_key(c, src, dst);
    }
    reply::ok(out);
}

/// RENAMENX key newkey
fn renamenx(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (src, dst) = (args[1], args[2]);
    if !c.exists(src) {
        return reply::error(out, errors::NO_SUCH_KEY);
    }
    if src == dst || c.exists(dst) {
        return reply::integer(out, 0);
    }
    move_key(c, src, dst);
    reply::integer(out, 1);
}

/// COPY source destination [DB destination-db] [REPLACE]
fn copy(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (src, dst) = (args[1], args[2]);
    let mut replace = false;
    let mut target = c.db;
    let mut i = 3;
    while i < args.len() {
        if eq_ic(args[i], b"replace") {
            replace = true;
        } else if eq_ic(args[i], b"db") && i + 1 < args.len() {
            target = match c.parse_db(args[i + 1]) {
                Ok(db) => db,
                Err(e) => return reply::error(out, e),
            };
            i += 1;
        } else {
            return reply::error(out, errors::SYNTAX);
        }
        i += 1;
    }
    if src == dst && target == c.db {
        return reply::error(out, b"ERR source and destination objects are the same");
    }
    let Some(value) = c.read(src).map(|v| v.to_owned_value()) else {
        return reply::integer(out, 0);
    };
    let deadline = c.ks.expire_at(src);
    if target != c.db {
        if !c.expire_in(target, dst) && c.db_mut(target).contains(dst) && !replace {
            return reply::integer(out, 0);
        }
        let kind = value.kind();
        c.db_mut(target).insert(dst, value, deadline);
        signal_if_blockable_in(c, target, dst, kind);
        c.emit(&[b"COPY", src, dst, b"DB", itoa::Buffer::new().format(target).as_bytes(), b"REPLACE"]);
        return reply::integer(out, 1);
    }
    if c.exists(dst) && !replace {
        return reply::integer(out, 0);
    }
    let kind = value.kind();
    c.ks.insert(dst, value, deadline);
    signal_if_blockable(c, dst, kind);
    c.emit(&[b"COPY", src, dst, b"REPLACE"]);
    reply::integer(out, 1);
}

/// KEYS pattern: keys past their deadline are skipped (not deleted).
fn keys(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let pattern = args[1];
    let all = pattern == b"*";
    let now = c.now;
    let mut found: Vec<Vec<u8>> = Vec::new();
    let ks = &*c.ks;
    ks.for_each(|k, _, deadline| {
        if matches!(deadline, Some(t) if t < now) {
            return;
        }
        if all || glob_match(pattern, k, false) {
            found.push(k.to_vec());
        }
    });
    reply::array_len(out, found.len());
    for k in &found {
        reply::bulk(out, k);
    }
}

/// Parses a SCAN cursor as Redis 8 does (`string2ull`, see [`store::types::stream::parse_u64`]):
/// a plain negative integer and the empty string are invalid, leading white space and a sign
/// are taken (` -1` is the last cursor, 2^64-1). Redis 7.0's `strtoul` took `-1` and the empty
/// string and refused leading spaces; Redis 8 turns each of those around.
pub fn parse_cursor(a: &[u8]) -> Option<u64> {
    store::types::stream::parse_u64(a)
}

/// Options shared by the SCAN family: `MATCH pattern`, `COUNT n`, and (SCAN only) `TYPE t`.
pub struct ScanOpts<'a> {
    pub pattern: Option<&'a [u8]>,
    pub count: usize,
    pub kind: Option<&'a [u8]>,
}

/// Parses SCAN-family options from `args` (starting after the cursor). Writes the error reply
/// and returns None on bad input.
pub fn parse_scan_opts<'a>(out: &mut Vec<u8>, args: &[&'a [u8]], allow_type: bool) -> Option<ScanOpts<'a>> {
    let mut o = ScanOpts { pattern: None, count: 10, kind: None };
    let mut i = 0;
    while i < args.len() {
        let has_value = i + 1 < args.len();
        if eq_ic(args[i], b"count") && has_value {
            match parse_i64(args[i + 1]) {
                None => {
                    reply::error(out, errors::NOT_INTEGER);
                    return None;
                }
                Some(n) if n < 1 => {
                    reply::error(out, errors::SYNTAX);
                    return None;
                }
                Some(n) => o.count = n as usize,
            }
        } else if eq_ic(args[i], b"match") && has_value {
            o.pattern = Some(args[i + 1]).filter(|p| *p != b"*");
        } else if allow_type && eq_ic(args[i], b"type") && has_value {
            o.kind = Some(args[i + 1]);
        } else {
            reply::error(out, errors::SYNTAX);
            return None;
        }
        i += 2;
    }
    Some(o)
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
fn scan(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(cursor) = parse_cursor(args[1]) else {
        return reply::error(out, b"ERR invalid cursor");
    };
    let Some(opts) = parse_scan_opts(out, &args[2..], true) else { return };
    let mut batch: Vec<(Vec<u8>, Kind)> = Vec::new();
    let next = c.ks.scan(cursor, opts.count, |k, v| batch.push((k.to_vec(), v.kind())));
    // Filtering happens after the step, as in Redis: COUNT bounds the work, not the reply.
    let mut keys = Vec::with_capacity(batch.len());
    for (k, kind) in batch {
        if let Some(p) = opts.pattern {
            if !glob_match(p, &k, false) {
                continue;
            }
        }
        if let Some(t) = opts.kind {
            if !kind.name().as_bytes().eq_ignore_ascii_case(t) {
                continue;
            }
        }
        if c.expire_if_needed(&k) {
            continue;
        }
        keys.push(k);
    }
    reply::array_len(out, 2);
    reply::bulk(out, itoa::Buffer::new().format(next).as_bytes());
    reply::array_len(out, keys.len());
    for k in &keys {
        reply::bulk(out, k);
    }
}

/// RANDOMKEY: an expired key that is picked is deleted (and its DEL emitted), then another try.
fn randomkey(c: &mut Ctx, out: &mut Vec<u8>, _args: &[&[u8]]) {
    // Bounded: if every key is expired but not yet removed, give up after a while and reply
    // with whatever was drawn last, as Redis does when all keys are volatile on a replica.
    for _ in 0..100 {
        let Some(key) = c.ks.random_key(c.rng) else {
            return reply::null_bulk(out, c.proto);
        };
        if !c.expire_if_needed(&key) || c.replaying {
            return reply::bulk(out, &key);
        }
    }
    reply::null_bulk(out, c.proto);
}

/// DBSIZE
fn dbsize(c: &mut Ctx, out: &mut Vec<u8>, _args: &[&[u8]]) {
    reply::integer(out, c.ks.len() as i64);
}

/// FLUSHALL [ASYNC|SYNC] / FLUSHDB [ASYNC|SYNC]
fn flushall(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if args.len() > 2 || (args.len() == 2 && !eq_ic(args[1], b"async") && !eq_ic(args[1], b"sync")) {
        return reply::error(out, errors::SYNTAX);
    }
    c.ks.clear();
    for ks in c.dbs.iter_mut() {
        ks.clear();
    }
    c.emit(&[b"FLUSHALL"]);
    reply::ok(out);
}

/// FLUSHDB [ASYNC|SYNC]: the selected database only.
fn flushdb(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if args.len() > 2 || (args.len() == 2 && !eq_ic(args[1], b"async") && !eq_ic(args[1], b"sync")) {
        return reply::error(out, errors::SYNTAX);
    }
    c.ks.clear();
    c.emit(&[b"FLUSHDB"]);
    reply::ok(out);
}

/// EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT key time [NX | XX | GT | LT]
fn expire(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let name = args[0].to_ascii_lowercase();
    let (unit_ms, absolute) = match name.as_slice() {
        b"expire" => (1000, false),
        b"pexpire" => (1, false),
        b"expireat" => (1000, true),
        _ => (1, true),
    };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &args[3..] {
        if eq_ic(opt, b"nx") {
            nx = true;
        } else if eq_ic(opt, b"xx") {
            xx = true;
        } else if eq_ic(opt, b"gt") {
            gt = true;
        } else if eq_ic(opt, b"lt") {
            lt = true;
        } else {
            let mut msg = b"ERR Unsupported option ".to_vec();
            msg.extend_from_slice(opt);
            return reply::error(out, &msg);
        }
    }
    if nx && (xx || gt || lt) {
        return reply::error(out, b"ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return reply::error(out, b"ERR GT and LT options at the same time are not compatible");
    }
    // Options are validated before the time argument, as Redis does.
    let Some(t) = parse_i64(args[2]) else {
        return reply::error(out, errors::NOT_INTEGER);
    };
    let base = if absolute { 0 } else { c.now };
    let deadline: Option<Millis> = t.checked_mul(unit_ms).and_then(|ms| ms.checked_add(base));
    let Some(deadline) = deadline else {
        let msg = format!("ERR invalid expire time in '{}' command", String::from_utf8_lossy(&name));
        return reply::error(out, msg.as_bytes());
    };
    let key = args[1];
    if !c.exists(key) {
        return reply::integer(out, 0);
    }
    let current = c.ks.expire_at(key);
    let allowed = match current {
        // A persistent key counts as an infinite deadline for GT and LT.
        None => !(xx || gt),
        Some(cur) => !(nx || (gt && deadline <= cur) || (lt && deadline >= cur)),
    };
    if !allowed {
        return reply::integer(out, 0);
    }
    if deadline <= c.now && !c.replaying {
        c.ks.delete(key);
        c.emit(&[b"DEL", key]);
    } else {
        c.ks.set_expire(key, Some(deadline));
        c.emit(&[b"PEXPIREAT", key, itoa::Buffer::new().format(deadline).as_bytes()]);
    }
    reply::integer(out, 1);
}

/// TTL / PTTL / EXPIRETIME / PEXPIRETIME key: -2 missing, -1 persistent.
fn ttl(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let name = args[0].to_ascii_lowercase();
    if c.read_notouch(args[1]).is_none() {
        return reply::integer(out, -2);
    }
    let Some(deadline) = c.ks.expire_at(args[1]) else {
        return reply::integer(out, -1);
    };
    let left = (deadline - c.now).max(0);
    let n = match name.as_slice() {
        b"ttl" => (left + 500) / 1000,
        b"pttl" => left,
        // Rounded to the nearest second, as Redis rounds TTL and EXPIRETIME alike.
        b"expiretime" => (deadline + 500) / 1000,
        _ => deadline,
    };
    reply::integer(out, n);
}

/// PERSIST key
fn persist(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    if c.exists(key) && c.ks.expire_at(key).is_some() {
        c.ks.set_expire(key, None);
        c.emit(&[b"PERSIST", key]);
        return reply::integer(out, 1);
    }
    reply::integer(out, 0);
}

/// OBJECT ENCODING | REFCOUNT | IDLETIME | FREQ | HELP
fn object(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let sub = args[1];
    if eq_ic(sub, b"help") && args.len() == 2 {
        let lines: [&[u8]; 9] = [
            b"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            b"ENCODING <key>",
            b"    Return the kind of internal representation used in order to store the value",
            b"    associated with a <key>.",
            b"FREQ <key>",
            b"    Return the <key>'s logarithmic access counter (LFU policies only).",
            b"IDLETIME <key>",
            b"    Return the seconds since the <key> was last read or written (not under LFU policies).",
            b"HELP",
        ];
        reply::array_len(out, lines.len() + 1);
        for l in lines {
            reply::simple(out, l);
        }
        return reply::simple(out, b"    Print this help.");
    }
    let known = [&b"encoding"[..], b"refcount", b"idletime", b"freq", b"help"];
    let Some(name) = known.iter().find(|k| eq_ic(sub, k)) else {
        return errors::unknown_subcommand(out, b"object", sub);
    };
    if args.len() != 3 || *name == b"help" {
        return errors::wrong_arity(out, &[&b"object|"[..], name].concat());
    }
    let key = args[2];
    // Read without recording an access (Redis's LOOKUP_NOTOUCH: the answer is about the
    // accesses before this one), counted as a keyspace hit or miss like other reads.
    let live = c.exists(key);
    if live {
        c.stats.keyspace_hits += 1;
    } else {
        c.stats.keyspace_misses += 1;
    }
    if eq_ic(sub, b"idletime") || eq_ic(sub, b"freq") {
        if !live {
            return reply::null_bulk(out, c.proto);
        }
        let field = c.ks.access(key).unwrap_or(0);
        let mode = c.ks.access_mode();
        return match (eq_ic(sub, b"idletime"), mode) {
            (true, AccessMode::Lru) => reply::integer(out, (access::lru_idle_ms(field, c.now) / 1000) as i64),
            (true, AccessMode::Lfu { .. }) => reply::error(
                out,
                b"ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
            ),
            (false, AccessMode::Lfu { decay_minutes, .. }) => {
                reply::integer(out, access::lfu_decayed(field, c.now, decay_minutes) as i64)
            }
            (false, AccessMode::Lru) => reply::error(
                out,
                b"ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
            ),
        };
    }
    let proto = c.proto;
    let Some(v) = live.then(|| c.ks.get(key)).flatten() else {
        return reply::null_bulk(out, proto);
    };
    if eq_ic(sub, b"encoding") {
        let raw = matches!(v, store::ValueRef::Str(_)) && c.ks.is_raw_string(key);
        reply::bulk(out, if raw { b"raw" } else { v.encoding().as_bytes() });
    } else {
        reply::integer(out, 1);
    }
}

#[cfg(test)]
mod tests {
    use crate::Engine;

    use crate::testing::reply as run;

    fn set(e: &mut Engine, k: &str, v: &str) {
        e.ks.insert(k.as_bytes(), store::Value::Str(v.as_bytes().to_vec()), None);
    }

    /// Redis keeps a key through its deadline's millisecond (expired once now > deadline), and
    /// every lookup must agree on it: scripts freeze `now`, so a lock script's EXISTS and PTTL
    /// at the deadline's millisecond must both see the key (PTTL 0), not 1 and then -2.
    #[test]
    fn a_key_is_live_through_its_deadline_millisecond() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, 500, &["HSET", "lock", "owner", "1"]), ":1\r\n");
        assert_eq!(run(&mut e, 500, &["PEXPIRE", "lock", "500"]), ":1\r\n");
        assert_eq!(run(&mut e, 500, &["SET", "s", "v", "PXAT", "1000"]), "+OK\r\n");
        // At the deadline: every read and write still sees both keys.
        assert_eq!(run(&mut e, 1000, &["EXISTS", "lock", "s"]), ":2\r\n");
        assert_eq!(run(&mut e, 1000, &["HEXISTS", "lock", "owner"]), ":1\r\n");
        assert_eq!(run(&mut e, 1000, &["HEXISTS", "lock", "other"]), ":0\r\n");
        assert_eq!(run(&mut e, 1000, &["PTTL", "lock"]), ":0\r\n");
        assert_eq!(run(&mut e, 1000, &["TYPE", "lock"]), "+hash\r\n");
        assert_eq!(run(&mut e, 1000, &["GET", "s"]), "$1\r\nv\r\n");
        assert_eq!(run(&mut e, 1000, &["PTTL", "s"]), ":0\r\n");
        assert_eq!(run(&mut e, 1000, &["APPEND", "s", "w"]), ":2\r\n");
        assert_eq!(run(&mut e, 1000, &["DBSIZE"]), ":2\r\n");
        // One millisecond later both are gone, to every kind of lookup.
        assert_eq!(run(&mut e, 1001, &["HEXISTS", "lock", "owner"]), ":0\r\n");
        assert_eq!(run(&mut e, 1001, &["PTTL", "lock"]), ":-2\r\n");
        assert_eq!(run(&mut e, 1001, &["EXISTS", "s"]), ":0\r\n");
        assert_eq!(run(&mut e, 1001, &["GET", "s"]), "$-1\r\n");
    }

    #[test]
    fn del_exists_type() {
        let mut e = Engine::default();
        set(&mut e, "a", "1");
        set(&mut e, "b", "x");
        assert_eq!(run(&mut e, 0, &["EXISTS", "a", "a", "zz"]), ":2\r\n");
        assert_eq!(run(&mut e, 0, &["TYPE", "a"]), "+string\r\n");
        assert_eq!(run(&mut e, 0, &["TYPE", "zz"]), "+none\r\n");
        e.commit(crate::Origin::Command);
        assert_eq!(run(&mut e, 0, &["DEL", "a", "zz", "b"]), ":2\r\n");
        assert_eq!(e.pending().to_args().len(), 2);
        assert_eq!(run(&mut e, 0, &["DEL", "a"]), ":0\r\n");
        assert_eq!(run(&mut e, 0, &["DBSIZE"]), ":0\r\n");
    }

    #[test]
    fn expire_rules() {
        let mut e = Engine::default();
        set(&mut e, "k", "v");
        assert_eq!(run(&mut e, 1000, &["EXPIRE", "k", "10", "XX"]), ":0\r\n");
        assert_eq!(run(&mut e, 1000, &["EXPIRE", "k", "10", "GT"]), ":0\r\n");
        assert_eq!(run(&mut e, 1000, &["EXPIRE", "k", "10", "LT"]), ":1\r\n");
        assert_eq!(run(&mut e, 1000, &["PTTL", "k"]), ":10000\r\n");
        assert_eq!(run(&mut e, 1000, &["TTL", "k"]), ":10\r\n");
        assert_eq!(run(&mut e, 1000, &["EXPIRETIME", "k"]), ":11\r\n");
        assert_eq!(run(&mut e, 1000, &["PEXPIRETIME", "k"]), ":11000\r\n");
        // EXPIRETIME rounds to the nearest second (redis-server 7.0 and 8.2 alike).
        for (at, secs) in [
            ("1800000000999", ":1800000001\r\n"),
            ("1800000000500", ":1800000001\r\n"),
            ("1800000000499", ":1800000000\r\n"),
        ] {
            set(&mut e, "r", "v");
            run(&mut e, 1000, &["PEXPIREAT", "r", at]);
            assert_eq!(run(&mut e, 1000, &["EXPIRETIME", "r"]), secs, "{at}");
        }
        assert_eq!(run(&mut e, 1000, &["EXPIRE", "k", "5", "NX"]), ":0\r\n");
        assert_eq!(run(&mut e, 1000, &["EXPIRE", "k", "5", "GT"]), ":0\r\n");
        assert_eq!(
            run(&mut e, 1000, &["EXPIRE", "k", "5", "NX", "XX"]),
            "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n"
        );
        assert_eq!(
            run(&mut e, 1000, &["EXPIRE", "k", "5", "GT", "LT"]),
            "-ERR GT and LT options at the same time are not compatible\r\n"
        );
        assert_eq!(run(&mut e, 1000, &["EXPIRE", "k", "5", "BAD"]), "-ERR Unsupported option BAD\r\n");
        assert_eq!(
            run(&mut e, 1000, &["EXPIRE", "k", "x"]),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            run(&mut e, 1000, &["EXPIRE", "k", "x", "NX", "XX"]),
            "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n"
        );
        assert_eq!(
            run(&mut e, 1000, &["EXPIRE", "k", "9223372036854775807"]),
            "-ERR invalid expire time in 'expire' command\r\n"
        );
        assert_eq!(run(&mut e, 1000, &["PERSIST", "k"]), ":1\r\n");
        assert_eq!(run(&mut e, 1000, &["PERSIST", "k"]), ":0\r\n");
        assert_eq!(run(&mut e, 1000, &["TTL", "k"]), ":-1\r\n");
        assert_eq!(run(&mut e, 1000, &["TTL", "nokey"]), ":-2\r\n");
        // A deadline in the past deletes the key at once and emits DEL.
        e.commit(crate::Origin::Command);
        assert_eq!(run(&mut e, 1000, &["PEXPIREAT", "k", "999"]), ":1\r\n");
        assert_eq!(e.pending().to_args(), vec![vec![b"DEL".to_vec(), b"k".to_vec()]]);
        assert_eq!(run(&mut e, 1000, &["EXISTS", "k"]), ":0\r\n");
    }

    #[test]
    fn lazy_expiry_emits_del() {
        let mut e = Engine::default();
        set(&mut e, "k", "v");
        run(&mut e, 1000, &["PEXPIRE", "k", "100"]);
        e.commit(crate::Origin::Command);
        assert_eq!(run(&mut e, 1099, &["EXISTS", "k"]), ":1\r\n");
        // The deadline's own millisecond still has the key (Redis: expired when now > deadline).
        assert_eq!(run(&mut e, 1100, &["EXISTS", "k"]), ":1\r\n");
        assert_eq!(run(&mut e, 1100, &["PTTL", "k"]), ":0\r\n");
        assert!(e.pending().to_args().is_empty());
        assert_eq!(run(&mut e, 1101, &["EXISTS", "k"]), ":0\r\n");
        assert_eq!(e.pending().to_args(), vec![vec![b"DEL".to_vec(), b"k".to_vec()]]);
        assert_eq!(e.stats.expired_keys, 1);
    }

    #[test]
    fn rename_copy() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, 0, &["RENAME", "a", "b"]), "-ERR no such key\r\n");
        set(&mut e, "a", "1");
        run(&mut e, 0, &["PEXPIRE", "a", "5000"]);
        assert_eq!(run(&mut e, 0, &["RENAME", "a", "b"]), "+OK\r\n");
        assert_eq!(run(&mut e, 0, &["PTTL", "b"]), ":5000\r\n");
        assert_eq!(run(&mut e, 0, &["RENAME", "b", "b"]), "+OK\r\n");
        set(&mut e, "c", "2");
        assert_eq!(run(&mut e, 0, &["RENAMENX", "b", "c"]), ":0\r\n");
        assert_eq!(run(&mut e, 0, &["COPY", "b", "c"]), ":0\r\n");
        assert_eq!(run(&mut e, 0, &["COPY", "b", "c", "REPLACE"]), ":1\r\n");
        assert_eq!(run(&mut e, 0, &["PTTL", "c"]), ":5000\r\n");
        assert_eq!(
            run(&mut e, 0, &["COPY", "b", "b"]),
            "-ERR source and destination objects are the same\r\n"
        );
        assert_eq!(run(&mut e, 0, &["COPY", "b", "d", "DB", "16"]), "-ERR DB index is out of range\r\n");
        assert_eq!(run(&mut e, 0, &["COPY", "b", "d", "BOGUS"]), "-ERR syntax error\r\n");
    }

    /// Redis's unit/type/list "BLPOP when new key is moved into place": a list renamed (or
    /// copied) onto a key a client blocks on wakes it; a string landing there does not.
    #[test]
    fn rename_and_copy_of_a_list_or_zset_signal_the_destination() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, 0, &["RPUSH", "src", "a", "b"]), ":2\r\n");
        e.ready_keys.clear();
        assert_eq!(run(&mut e, 0, &["RENAME", "src", "dst"]), "+OK\r\n");
        assert_eq!(e.ready_keys, vec![(0, b"dst".to_vec())]);
        e.ready_keys.clear();
        assert_eq!(run(&mut e, 0, &["RENAMENX", "dst", "dst2"]), ":1\r\n");
        assert_eq!(e.ready_keys, vec![(0, b"dst2".to_vec())]);
        e.ready_keys.clear();
        assert_eq!(run(&mut e, 0, &["COPY", "dst2", "dst3"]), ":1\r\n");
        assert_eq!(e.ready_keys, vec![(0, b"dst3".to_vec())]);
        e.ready_keys.clear();
        assert_eq!(run(&mut e, 0, &["ZADD", "z", "1", "m"]), ":1\r\n");
        e.ready_keys.clear();
        assert_eq!(run(&mut e, 0, &["RENAME", "z", "z2"]), "+OK\r\n");
        assert_eq!(e.ready_keys, vec![(0, b"z2".to_vec())]);
        e.ready_keys.clear();
        set(&mut e, "s", "v");
        assert_eq!(run(&mut e, 0, &["RENAME", "s", "dst3"]), "+OK\r\n");
        assert_eq!(run(&mut e, 0, &["COPY", "dst3", "s"]), ":1\r\n");
        assert!(e.ready_keys.is_empty());
    }

    #[test]
    fn scan_visits_everything_and_filters() {
        let mut e = Engine::default();
        for i in 0..100 {
            set(&mut e, &format!("k{i}"), "v");
        }
        e.ks.insert(b"h", store::Value::Hash(Box::default()), None);
        let mut seen = std::collections::BTreeSet::new();
        let mut cursor = "0".to_string();
        loop {
            let args: Vec<&[u8]> = vec![b"SCAN", cursor.as_bytes(), b"COUNT", b"7", b"TYPE", b"string"];
            let mut out = Vec::new();
            e.run(&args, 0, &mut out);
            let (frame, _) = resp::decode_frame(&out).unwrap().unwrap();
            let resp::Frame::Array(Some(parts)) = frame else { panic!() };
            let resp::Frame::Bulk(Some(next)) = &parts[0] else { panic!() };
            let resp::Frame::Array(Some(keys)) = &parts[1] else { panic!() };
            for k in keys {
                let resp::Frame::Bulk(Some(k)) = k else { panic!() };
                seen.insert(k.clone());
            }
            cursor = String::from_utf8(next.clone()).unwrap();
            if cursor == "0" {
                break;
            }
        }
        assert_eq!(seen.len(), 100);
        assert!(!seen.contains(&b"h"[..]));
        assert_eq!(run(&mut e, 0, &["SCAN", "x"]), "-ERR invalid cursor\r\n");
        assert_eq!(run(&mut e, 0, &["SCAN", "0", "COUNT", "0"]), "-ERR syntax error\r\n");
        assert_eq!(run(&mut e, 0, &["KEYS", "k1?"]).matches("$3").count(), 10);
    }

    #[test]
    fn scan_cursor_is_read_as_redis8_reads_it() {
        let mut e = Engine::default();
        // Redis 8's string2ull: no negative plain integer, then strtoull (leading white space,
        // a sign, wrap-around, leading zeros); checked against redis-server 8.2.3. (An empty
        // keyspace answers cursor 0 and no keys whatever the cursor.)
        for ok in [
            "+5",
            "-0",
            " 1",
            " -1",
            " +5",
            "\t\n\x0b\x0c\r7",
            "-18446744073709551615",
            "-9223372036854775809",
            "18446744073709551615",
            "000000000000000000000001",
        ] {
            assert_eq!(run(&mut e, 0, &["SCAN", ok]), "*2\r\n$1\r\n0\r\n*0\r\n", "{ok:?}");
        }
        for bad in [
            "",
            " ",
            "-1",
            "-9223372036854775808",
            "1 ",
            "-",
            "+",
            "0x1",
            "18446744073709551616",
            "-18446744073709551616",
            "--1",
        ] {
            assert_eq!(run(&mut e, 0, &["SCAN", bad]), "-ERR invalid cursor\r\n", "{bad:?}");
        }
        assert_eq!(super::parse_cursor(b" -1"), Some(u64::MAX));
        assert_eq!(super::parse_cursor(b"-18446744073709551615"), Some(1));
        assert_eq!(super::parse_cursor(b"-9223372036854775809"), Some(9223372036854775807));
    }
}
