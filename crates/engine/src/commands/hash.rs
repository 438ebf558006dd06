//! Hash commands: HSET, HGET and the rest of the hash family.
//!
//! Canonical mutations: one `HSET key field value` per field written (HINCRBY* write their
//! result) and one `HDEL key field` per field removed. A hash emptied by HDEL is deleted here;
//! replaying its HDELs empties and deletes it the same way.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::commands::long_double::LongDouble;
use crate::commands::scan::{parse_cursor, parse_scan_opts, scan_loop, scan_reply};
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{eq_ic, glob_match, parse_i64};
use resp::reply;
use store::types::Hash;
use store::{Value, ValueMut, ValueRef};

const R: u32 = Flags::READONLY;
const RF: u32 = Flags::READONLY | Flags::FAST;
const WF: u32 = Flags::WRITE | Flags::FAST;
const WMF: u32 = Flags::WRITE | Flags::DENYOOM | Flags::FAST;
const K1: (i32, i32, i32) = (1, 1, 1);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec("hset", -4, WMF, K1, "hash", "Creates or modifies the value of a field in a hash.", Handler::Data(hset)),
    spec("hmset", -4, WMF, K1, "hash", "Sets the values of multiple fields.", Handler::Data(hset)),
    spec("hsetnx", 4, WMF, K1, "hash", "Sets the value of a field in a hash only when the field doesn't exist.", Handler::Data(hsetnx)),
    spec("hget", 3, RF, K1, "hash", "Returns the value of a field in a hash.", Handler::Data(hget)),
    spec("hmget", -3, RF, K1, "hash", "Returns the values of all fields in a hash.", Handler::Data(hmget)),
    spec("hgetall", 2, R, K1, "hash", "Returns all fields and values in a hash.", Handler::Data(hgetall)),
    spec("hkeys", 2, R, K1, "hash", "Returns all fields in a hash.", Handler::Data(hkeys)),
    spec("hvals", 2, R, K1, "hash", "Returns all values in a hash.", Handler::Data(hvals)),
    spec("hdel", -3, WF, K1, "hash", "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.", Handler::Data(hdel)),
    spec("hgetdel", -5, WF, K1, "hash", "Returns the values of fields and deletes them; the hash goes when its last field does.", Handler::Data(hgetdel)),
    spec("hexists", 3, RF, K1, "hash", "Determines whether a field exists in a hash.", Handler::Data(hexists)),
    spec("hlen", 2, RF, K1, "hash", "Returns the number of fields in a hash.", Handler::Data(hlen)),
    spec("hstrlen", 3, RF, K1, "hash", "Returns the length of the value of a field.", Handler::Data(hstrlen)),
    spec("hincrby", 4, WMF, K1, "hash", "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.", Handler::Data(hincrby)),
    spec("hincrbyfloat", 4, WMF, K1, "hash", "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.", Handler::Data(hincrbyfloat)),
    spec("hrandfield", -2, R, K1, "hash", "Returns one or more random fields from a hash.", Handler::Data(hrandfield)),
    spec("hscan", -3, R, K1, "hash", "Iterates over fields and values of a hash.", Handler::Data(hscan)),
];

/// Reads the hash at `key` (after its lazy field expiry): Ok(None) if missing, Err after
/// writing WRONGTYPE.
pub(super) fn read<'c>(c: &'c mut Ctx, out: &mut Vec<u8>, key: &[u8]) -> Result<Option<&'c Hash>, ()> {
    super::hash_ttl::expire_fields(c, key);
    if c.replica && super::hash_ttl::fill_replica_view(c, key) {
        return Ok(c.replica_view.as_ref());
    }
    match c.read(key) {
        None => Ok(None),
        Some(ValueRef::Hash(h)) => Ok(Some(h)),
        Some(_) => {
            reply::error(out, errors::WRONGTYPE);
            Err(())
        }
    }
}

/// The hash at `key` for writing, created empty when missing; Err after writing WRONGTYPE.
/// A caller that creates it and then fails must remove it again (Redis never leaves an empty
/// hash behind).
pub(super) fn write_or_create<'c>(c: &'c mut Ctx, out: &mut Vec<u8>, key: &[u8]) -> Result<&'c mut Hash, ()> {
    super::hash_ttl::expire_fields(c, key);
    let exists = match c.write(key) {
        None => false,
        Some(ValueMut::Hash(_)) => true,
        Some(_) => {
            reply::error(out, errors::WRONGTYPE);
            return Err(());
        }
    };
    if !exists {
        c.ks.insert(key, Value::Hash(Box::new(Hash::new())), None);
    }
    match c.ks.get_mut(key) {
        Some(ValueMut::Hash(h)) => Ok(h),
        _ => unreachable!("just checked or created"),
    }
}

/// HSET key field value [field value ...] (and HMSET, which replies +OK).
fn hset(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if !args.len().is_multiple_of(2) {
        return errors::wrong_arity(out, args[0]);
    }
    let key = args[1];
    let Ok(h) = write_or_create(c, out, key) else { return };
    let mut added = 0;
    for pair in args[2..].chunks_exact(2) {
        added += h.set(pair[0], pair[1]) as i64;
    }
    for pair in args[2..].chunks_exact(2) {
        c.emit(&[b"HSET", key, pair[0], pair[1]]);
    }
    if eq_ic(args[0], b"hmset") {
        reply::ok(out);
    } else {
        reply::integer(out, added);
    }
}

/// HSETNX key field value
fn hsetnx(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (key, field, value) = (args[1], args[2], args[3]);
    let Ok(h) = write_or_create(c, out, key) else { return };
    if h.contains(field) {
        return reply::integer(out, 0);
    }
    h.set(field, value);
    c.emit(&[b"HSET", key, field, value]);
    reply::integer(out, 1);
}

/// HGET key field
fn hget(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match read(c, out, args[1]) {
        Ok(Some(h)) => match h.get(args[2]) {
            Some(v) => reply::bulk(out, v),
            None => reply::null_bulk(out, c.proto),
        },
        Ok(None) => reply::null_bulk(out, c.proto),
        Err(()) => {}
    }
}

/// HMGET key field [field ...]
fn hmget(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let proto = c.proto;
    let Ok(h) = read(c, out, args[1]) else { return };
    reply::array_len(out, args.len() - 2);
    for f in &args[2..] {
        match h.and_then(|h| h.get(f)) {
            Some(v) => reply::bulk(out, v),
            None => reply::null_bulk(out, proto),
        }
    }
}

/// What HGETALL / HKEYS / HVALS write per field.
#[derive(Clone, Copy)]
enum Parts {
    Both,
    Keys,
    Values,
}

fn getall(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]], parts: Parts) {
    let proto = c.proto;
    let Ok(h) = read(c, out, args[1]) else { return };
    let len = h.map_or(0, |h| h.len());
    // HGETALL is a map (RESP3 `%`; a flat array of field, value in RESP2); HKEYS and HVALS
    // are arrays in both protocols.
    match parts {
        Parts::Both => reply::map_len(out, proto, len),
        _ => reply::array_len(out, len),
    }
    let Some(h) = h else { return };
    for (f, v) in h.iter() {
        if !matches!(parts, Parts::Values) {
            reply::bulk(out, f);
        }
        if !matches!(parts, Parts::Keys) {
            reply::bulk(out, v);
        }
    }
}

/// HGETALL key
fn hgetall(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    getall(c, out, args, Parts::Both)
}

/// HKEYS key
fn hkeys(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    getall(c, out, args, Parts::Keys)
}

/// HVALS key
fn hvals(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    getall(c, out, args, Parts::Values)
}

/// HDEL key field [field ...]
fn hdel(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    super::hash_ttl::expire_fields(c, key);
    let h = match c.write(key) {
        None => return reply::integer(out, 0),
        Some(ValueMut::Hash(h)) => h,
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    let removed: Vec<&[u8]> = args[2..].iter().copied().filter(|f| h.remove(f)).collect();
    let (empty, deadlines_left) = (h.is_empty(), h.has_field_deadlines());
    if empty {
        c.ks.delete(key);
    } else if !deadlines_left && !removed.is_empty() {
        super::hash_ttl::forget_field_deadlines(c, key);
    }
    for f in &removed {
        c.emit(&[b"HDEL", key, f]);
    }
    reply::integer(out, removed.len() as i64);
}

/// HGETDEL key FIELDS numfields field [field ...] (Redis 8.0): each field's value (nil when
/// missing, and for a field named twice the second time), deleting what it returns. The
/// key's type is checked before the arguments, as in Redis. Canonical mutations: one `HDEL`
/// per field deleted.
fn hgetdel(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let proto = c.proto;
    super::hash_ttl::expire_fields(c, key);
    let h = match c.write(key) {
        None => None,
        Some(ValueMut::Hash(h)) => Some(h),
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    if !eq_ic(args[2], b"FIELDS") {
        return reply::error(out, b"ERR Mandatory argument FIELDS is missing or not at the right position");
    }
    match parse_i64(args[3]) {
        Some(n) if n >= 1 => {
            if n as u64 != (args.len() - 4) as u64 {
                return reply::error(
                    out,
                    b"ERR The `numfields` parameter must match the number of arguments",
                );
            }
        }
        _ => return reply::error(out, b"ERR Number of fields must be a positive integer"),
    }
    let fields = &args[4..];
    reply::array_len(out, fields.len());
    let Some(h) = h else {
        for _ in fields {
            reply::null_bulk(out, proto);
        }
        return;
    };
    let mut removed: Vec<&[u8]> = Vec::new();
    for f in fields {
        match h.get(f) {
            Some(v) => {
                reply::bulk(out, v);
                h.remove(f);
                removed.push(f);
            }
            None => reply::null_bulk(out, proto),
        }
    }
    let (empty, deadlines_left) = (h.is_empty(), h.has_field_deadlines());
    if empty {
        c.ks.delete(key);
    } else if !deadlines_left && !removed.is_empty() {
        super::hash_ttl::forget_field_deadlines(c, key);
    }
    for f in removed {
        c.emit(&[b"HDEL", key, f]);
    }
}

/// HEXISTS key field
fn hexists(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if let Ok(h) = read(c, out, args[1]) {
        reply::integer(out, h.is_some_and(|h| h.contains(args[2])) as i64);
    }
}

/// HLEN key
fn hlen(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if let Ok(h) = read(c, out, args[1]) {
        reply::integer(out, h.map_or(0, |h| h.len()) as i64);
    }
}

/// HSTRLEN key field
fn hstrlen(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if let Ok(h) = read(c, out, args[1]) {
        reply::integer(out, h.and_then(|h| h.get(args[2])).map_or(0, |v| v.len()) as i64);
    }
}

/// HINCRBY key field increment
fn hincrby(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (key, field) = (args[1], args[2]);
    let Some(incr) = parse_i64(args[3]) else { return reply::error(out, errors::NOT_INTEGER) };
    let Ok(h) = write_or_create(c, out, key) else { return };
    let current = match h.get(field) {
        None => 0,
        Some(v) => match parse_i64(v) {
            Some(n) => n,
            None => return reply::error(out, b"ERR hash value is not an integer"),
        },
    };
    let Some(result) = current.checked_add(incr) else { return reply::error(out, errors::OVERFLOW) };
    let mut buf = itoa::Buffer::new();
    let text = buf.format(result).as_bytes();
    let timed = h.field_deadline(field).is_some();
    h.set_keep_deadline(field, text);
    emit_value_change(c, key, field, text, timed);
    reply::integer(out, result);
}

/// The mutation of an increment: `HSET`, or for a field with a deadline (which the
/// increment keeps) `HSETEX key KEEPTTL FIELDS 1 field value`, as a replayed `HSET` would drop it.
fn emit_value_change(c: &mut Ctx, key: &[u8], field: &[u8], value: &[u8], timed: bool) {
    if timed {
        c.emit(&[b"HSETEX", key, b"KEEPTTL", b"FIELDS", b"1", field, value]);
    } else {
        c.emit(&[b"HSET", key, field, value]);
    }
}

/// HINCRBYFLOAT key field increment. Redis computes in `long double` and stores the sum
/// printed in its "human" form; [`LongDouble`] reproduces both exactly.
fn hincrbyfloat(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (key, field) = (args[1], args[2]);
    let Some(incr) = LongDouble::parse(args[3]) else { return reply::error(out, errors::NOT_FLOAT) };
    if !incr.is_finite() {
        return reply::error(out, b"ERR value is NaN or Infinity");
    }
    let Ok(h) = write_or_create(c, out, key) else { return };
    let current = match h.get(field) {
        None => LongDouble::ZERO,
        Some(v) => match LongDouble::parse(v) {
            Some(x) => x,
            None => return reply::error(out, b"ERR hash value is not a float"),
        },
    };
    let sum = current + incr;
    if !sum.is_finite() {
        return reply::error(out, errors::INCR_NAN_INF);
    }
    let text = sum.to_human();
    let timed = h.field_deadline(field).is_some();
    h.set_keep_deadline(field, text.as_bytes());
    emit_value_change(c, key, field, text.as_bytes(), timed);
    reply::bulk(out, text.as_bytes());
}

/// HRANDFIELD key [count [WITHVALUES]]
fn hrandfield(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    if args.len() == 2 {
        let Ok(h) = read(c, out, key) else { return };
        if h.is_none() {
            return reply::null_bulk(out, c.proto);
        }
        let Some(ValueRef::Hash(h)) = c.ks.get(key) else { unreachable!("read it above") };
        return match h.random(c.rng) {
            Some((f, _)) => reply::bulk(out, f),
            None => reply::null_bulk(out, c.proto),
        };
    }
    let count =
        match parse_i64(args[2]) {
            Some(n) if n != i64::MIN => n,
            Some(_) => return reply::error(
                out,
                b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            ),
            None => return reply::error(out, errors::NOT_INTEGER),
        };
    let withvalues = match args.len() {
        3 => false,
        4 if eq_ic(args[3], b"withvalues") => true,
        _ => return reply::error(out, errors::SYNTAX),
    };
    if withvalues && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return reply::error(out, errors::VALUE_OUT_OF_RANGE);
    }
    let Ok(h) = read(c, out, key) else { return };
    if h.is_none() || count == 0 {
        return reply::array_len(out, 0);
    }
    // Redis builds any repeated-picks reply, and dies of huge ones: see MAX_REPEATED_PICKS.
    if count < 0 && count.unsigned_abs() > errors::MAX_REPEATED_PICKS {
        return reply::error(out, errors::VALUE_OUT_OF_RANGE);
    }
    let Some(ValueRef::Hash(h)) = c.ks.get(key) else { unreachable!("read it above") };
    // WITHVALUES answers pairs: [field, value] arrays in RESP3, flat in RESP2.
    let proto = c.proto;
    let header = |out: &mut Vec<u8>, n: usize| {
        if withvalues {
            reply::pairs_len(out, proto, n)
        } else {
            reply::array_len(out, n)
        }
    };
    let write = |out: &mut Vec<u8>, (f, v): (&[u8], &[u8])| {
        if withvalues {
            reply::pair(out, proto);
        }
        reply::bulk(out, f);
        if withvalues {
            reply::bulk(out, v);
        }
    };
    if count < 0 {
        // Repetitions allowed: independent uniform picks.
        let n = count.unsigned_abs() as usize;
        header(out, n);
        for _ in 0..n {
            write(out, h.random(c.rng).expect("non-empty hash"));
        }
        return;
    }
    let n = count as usize;
    if n >= h.len() {
        header(out, h.len());
        h.iter().for_each(|e| write(out, e));
        return;
    }
    header(out, n);
    if n * 3 > h.len() {
        // Many of the fields: choose which ones by index, in one pass.
        let mut picked = rand::seq::index::sample(c.rng, h.len(), n).into_vec();
        picked.sort_unstable();
        let mut next = picked.into_iter().peekable();
        for (i, e) in h.iter().enumerate() {
            if next.peek() == Some(&i) {
                next.next();
                write(out, e);
            }
        }
    } else {
        // Few of many: random picks, skipping repeats.
        let mut seen = std::collections::HashSet::with_capacity(n);
        while seen.len() < n {
            let e = h.random(c.rng).expect("non-empty hash");
            if seen.insert(e.0) {
                write(out, e);
            }
        }
    }
}

/// HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]
fn hscan(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(cursor) = parse_cursor(out, args[2]) else { return };
    let Ok(h) = read(c, out, args[1]) else { return };
    let Some(h) = h else { return scan_reply(out, 0, &[]) };
    let Some(o) = parse_scan_opts(out, &args[3..], true) else { return };
    let mut items: Vec<&[u8]> = Vec::new();
    let next = scan_loop(cursor, o.count, |cur, count| {
        let mut n = 0;
        let next = h.scan(cur, count, |f, v| {
            if o.pattern.is_none_or(|p| glob_match(p, f, false)) {
                items.push(f);
                if !o.novalues {
                    items.push(v);
                }
                n += 1;
            }
        });
        (next, n)
    });
    scan_reply(out, next, &items);
}

#[cfg(test)]
mod tests {
    use crate::Engine;

    fn run(e: &mut Engine, cmd: &str) -> String {
        crate::testing::reply(e, 1_000, &cmd.split(' ').collect::<Vec<_>>())
    }

    use crate::testing::take_muts as muts;

    const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

    #[test]
    fn hgetdel_returns_and_deletes() {
        let mut e = Engine::default();
        run(&mut e, "HSET h a 1 b 2 c 3");
        muts(&mut e);
        assert_eq!(run(&mut e, "HGETDEL h FIELDS 3 a x a"), "*3\r\n$1\r\n1\r\n$-1\r\n$-1\r\n");
        assert_eq!(muts(&mut e), ["HDEL h a"]);
        assert_eq!(run(&mut e, "HGETDEL nokey FIELDS 2 a b"), "*2\r\n$-1\r\n$-1\r\n");
        assert_eq!(muts(&mut e), Vec::<String>::new());
        // Errors, in Redis's order: the type first, then the arguments.
        run(&mut e, "SET s v");
        muts(&mut e);
        assert_eq!(run(&mut e, "HGETDEL s FIELDS 0 a"), WRONGTYPE);
        for (cmd, err) in [
            (
                "HGETDEL h FIELD 1 a",
                "-ERR Mandatory argument FIELDS is missing or not at the right position\r\n",
            ),
            ("HGETDEL h FIELDS 0 a", "-ERR Number of fields must be a positive integer\r\n"),
            ("HGETDEL h FIELDS x a", "-ERR Number of fields must be a positive integer\r\n"),
            ("HGETDEL h FIELDS 2 a", "-ERR The `numfields` parameter must match the number of arguments\r\n"),
            (
                "HGETDEL h FIELDS 1 a b",
                "-ERR The `numfields` parameter must match the number of arguments\r\n",
            ),
            ("HGETDEL h FIELDS 1", "-ERR wrong number of arguments for 'hgetdel' command\r\n"),
        ] {
            assert_eq!(run(&mut e, cmd), err, "{cmd}");
        }
        assert_eq!(muts(&mut e), Vec::<String>::new());
        // The last fields go, and the key with them.
        assert_eq!(run(&mut e, "HGETDEL h FIELDS 2 c b"), "*2\r\n$1\r\n3\r\n$1\r\n2\r\n");
        assert_eq!(muts(&mut e), ["HDEL h c", "HDEL h b"]);
        assert_eq!(run(&mut e, "EXISTS h"), ":0\r\n");
    }

    #[test]
    fn set_get_and_friends() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, "HSET h a 1 b 2 a 3"), ":2\r\n");
        assert_eq!(muts(&mut e), ["HSET h a 1", "HSET h b 2", "HSET h a 3"]);
        assert_eq!(run(&mut e, "HGET h a"), "$1\r\n3\r\n");
        assert_eq!(run(&mut e, "HGET h zz"), "$-1\r\n");
        assert_eq!(run(&mut e, "HGET nokey a"), "$-1\r\n");
        assert_eq!(run(&mut e, "HSET h a"), "-ERR wrong number of arguments for 'hset' command\r\n");
        assert_eq!(run(&mut e, "HMSET h a"), "-ERR wrong number of arguments for 'hmset' command\r\n");
        assert_eq!(run(&mut e, "HSET h"), "-ERR wrong number of arguments for 'hset' command\r\n");
        assert_eq!(run(&mut e, "HMSET h c 4"), "+OK\r\n");
        assert_eq!(
            run(&mut e, "HGETALL h"),
            "*6\r\n$1\r\na\r\n$1\r\n3\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n4\r\n"
        );
        assert_eq!(run(&mut e, "HKEYS h"), "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
        assert_eq!(run(&mut e, "HVALS h"), "*3\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n4\r\n");
        assert_eq!(run(&mut e, "HMGET h a zz c"), "*3\r\n$1\r\n3\r\n$-1\r\n$1\r\n4\r\n");
        assert_eq!(run(&mut e, "HMGET nokey a"), "*1\r\n$-1\r\n");
        assert_eq!(run(&mut e, "HGETALL nokey"), "*0\r\n");
        assert_eq!(run(&mut e, "HLEN h"), ":3\r\n");
        assert_eq!(run(&mut e, "HLEN nokey"), ":0\r\n");
        assert_eq!(run(&mut e, "HEXISTS h a"), ":1\r\n");
        assert_eq!(run(&mut e, "HEXISTS h zz"), ":0\r\n");
        assert_eq!(run(&mut e, "HSTRLEN h a"), ":1\r\n");
        assert_eq!(run(&mut e, "HSTRLEN h zz"), ":0\r\n");
        muts(&mut e);
        assert_eq!(run(&mut e, "HSETNX h a 9"), ":0\r\n");
        assert_eq!(run(&mut e, "HSETNX h d 9"), ":1\r\n");
        assert_eq!(muts(&mut e), ["HSET h d 9"]);
        assert_eq!(run(&mut e, "HDEL h a a zz b"), ":2\r\n");
        assert_eq!(muts(&mut e), ["HDEL h a", "HDEL h b"]);
        assert_eq!(run(&mut e, "HDEL nokey a"), ":0\r\n");
        assert_eq!(run(&mut e, "HDEL h c d"), ":2\r\n");
        assert!(!e.ks.contains(b"h"), "an emptied hash is deleted");
    }

    #[test]
    fn wrong_type_everywhere() {
        let mut e = Engine::default();
        e.ks.insert(b"s", store::Value::Str(b"x".to_vec()), None);
        for cmd in [
            "HSET s a 1",
            "HMSET s a 1",
            "HSETNX s a 1",
            "HGET s a",
            "HMGET s a",
            "HGETALL s",
            "HKEYS s",
            "HVALS s",
            "HDEL s a",
            "HEXISTS s a",
            "HLEN s",
            "HSTRLEN s a",
            "HINCRBY s a 1",
            "HINCRBYFLOAT s a 1",
            "HRANDFIELD s",
            "HRANDFIELD s 2",
            "HSCAN s 0",
        ] {
            assert_eq!(run(&mut e, cmd), WRONGTYPE, "{cmd}");
        }
        assert!(muts(&mut e).is_empty());
    }

    #[test]
    fn counters() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, "HINCRBY h n 5"), ":5\r\n");
        assert_eq!(run(&mut e, "HINCRBY h n -7"), ":-2\r\n");
        assert_eq!(muts(&mut e), ["HSET h n 5", "HSET h n -2"]);
        assert_eq!(run(&mut e, "HINCRBY h n x"), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(run(&mut e, "HSET h s abc big 9223372036854775807 lead 007"), ":3\r\n");
        assert_eq!(run(&mut e, "HINCRBY h s 1"), "-ERR hash value is not an integer\r\n");
        assert_eq!(run(&mut e, "HINCRBY h lead 1"), "-ERR hash value is not an integer\r\n");
        assert_eq!(run(&mut e, "HINCRBY h big 1"), "-ERR increment or decrement would overflow\r\n");
        muts(&mut e);
        assert_eq!(run(&mut e, "HINCRBYFLOAT h f 0.1"), "$3\r\n0.1\r\n");
        assert_eq!(run(&mut e, "HINCRBYFLOAT h f 0.2"), "$3\r\n0.3\r\n");
        assert_eq!(muts(&mut e), ["HSET h f 0.1", "HSET h f 0.3"]);
        assert_eq!(run(&mut e, "HINCRBYFLOAT h g 12345678.1"), "$25\r\n12345678.1000000000003638\r\n");
        assert_eq!(run(&mut e, "HINCRBYFLOAT h n 1.5"), "$4\r\n-0.5\r\n");
        assert_eq!(run(&mut e, "HINCRBYFLOAT h n 0x10"), "$4\r\n15.5\r\n");
        assert_eq!(run(&mut e, "HINCRBYFLOAT h s 1"), "-ERR hash value is not a float\r\n");
        assert_eq!(run(&mut e, "HINCRBYFLOAT h f abc"), "-ERR value is not a valid float\r\n");
        assert_eq!(run(&mut e, "HINCRBYFLOAT h f nan"), "-ERR value is not a valid float\r\n");
        assert_eq!(run(&mut e, "HINCRBYFLOAT h f inf"), "-ERR value is NaN or Infinity\r\n");
        assert_eq!(run(&mut e, "HSET h i inf"), ":1\r\n");
        assert_eq!(run(&mut e, "HINCRBYFLOAT h i 1"), "-ERR increment would produce NaN or Infinity\r\n");
        assert_eq!(run(&mut e, "HINCRBYFLOAT h e 1e5"), "$6\r\n100000\r\n");
        assert_eq!(run(&mut e, "HINCRBY h e 1"), ":100001\r\n");
    }

    #[test]
    fn random_fields() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, "HRANDFIELD nokey"), "$-1\r\n");
        assert_eq!(run(&mut e, "HRANDFIELD nokey 3"), "*0\r\n");
        assert_eq!(run(&mut e, "HSET h a 1 b 2 c 3"), ":3\r\n");
        muts(&mut e);
        assert_eq!(run(&mut e, "HRANDFIELD h x"), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(run(&mut e, "HRANDFIELD h 1 withvalues x"), "-ERR syntax error\r\n");
        assert_eq!(run(&mut e, "HRANDFIELD h 1 withscores"), "-ERR syntax error\r\n");
        assert_eq!(
            run(&mut e, "HRANDFIELD h -9223372036854775808 withvalues"),
            "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"
        );
        assert_eq!(
            run(&mut e, "HRANDFIELD h -4611686018427387904 withvalues"),
            "-ERR value is out of range\r\n"
        );
        assert_eq!(run(&mut e, "HRANDFIELD h 0"), "*0\r\n");
        assert_eq!(
            run(&mut e, "HRANDFIELD h 5 WITHVALUES"),
            "*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"
        );
        let one = run(&mut e, "HRANDFIELD h");
        assert!(["$1\r\na\r\n", "$1\r\nb\r\n", "$1\r\nc\r\n"].contains(&one.as_str()), "{one}");
        let rep = run(&mut e, "HRANDFIELD h -7");
        assert!(rep.starts_with("*7\r\n") && rep.matches("$1\r\n").count() == 7, "{rep}");
        let rep = run(&mut e, "HRANDFIELD h -2 withvalues");
        assert!(rep.starts_with("*4\r\n"), "{rep}");
        for _ in 0..20 {
            let rep = run(&mut e, "HRANDFIELD h 2");
            let fields: Vec<&str> = rep.split("\r\n").filter(|l| ["a", "b", "c"].contains(l)).collect();
            assert!(rep.starts_with("*2\r\n") && fields.len() == 2 && fields[0] != fields[1], "{rep}");
        }
        // Distinct picks from a big (indexed) hash.
        for i in 0..1000 {
            run(&mut e, &format!("HSET big f{i} v"));
        }
        let rep = run(&mut e, "HRANDFIELD big 10");
        let mut fields: Vec<&str> = rep.split("\r\n").filter(|l| l.starts_with('f')).collect();
        fields.sort();
        fields.dedup();
        assert_eq!(fields.len(), 10, "{rep}");
        assert!(muts(&mut e).len() == 1000, "reads emit nothing");
    }

    #[test]
    fn scanning() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, "HSCAN nokey 0"), "*2\r\n$1\r\n0\r\n*0\r\n");
        assert_eq!(run(&mut e, "HSCAN nokey 0 COUNT 0"), "*2\r\n$1\r\n0\r\n*0\r\n");
        assert_eq!(run(&mut e, "HSET h a 1 b 2 ab 3"), ":3\r\n");
        assert_eq!(run(&mut e, "HSCAN h abc"), "-ERR invalid cursor\r\n");
        assert_eq!(run(&mut e, "HSCAN h 18446744073709551616"), "-ERR invalid cursor\r\n");
        assert_eq!(run(&mut e, "HSCAN h 0 COUNT 0"), "-ERR syntax error\r\n");
        assert_eq!(run(&mut e, "HSCAN h 0 COUNT x"), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(run(&mut e, "HSCAN h 0 MATCH"), "-ERR syntax error\r\n");
        assert_eq!(
            run(&mut e, "HSCAN h 0 MATCH a*"),
            "*2\r\n$1\r\n0\r\n*4\r\n$1\r\na\r\n$1\r\n1\r\n$2\r\nab\r\n$1\r\n3\r\n"
        );
        assert_eq!(
            run(&mut e, "HSCAN h 0 NOVALUES"),
            "*2\r\n$1\r\n0\r\n*3\r\n$1\r\na\r\n$1\r\nb\r\n$2\r\nab\r\n"
        );
        // A big hash, scanned while it changes: every field present throughout comes back.
        for i in 0..3000 {
            run(&mut e, &format!("HSET big f{i} v{i}"));
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = "0".to_string();
        let mut calls = 0;
        loop {
            let rep = run(&mut e, &format!("HSCAN big {cursor} COUNT 50"));
            let lines: Vec<&str> = rep.split("\r\n").collect();
            cursor = lines[2].to_string();
            seen.extend(lines.iter().filter(|l| l.starts_with('f')).map(|l| l.to_string()));
            for j in 0..40 {
                run(&mut e, &format!("HSET big g{calls}x{j} v"));
            }
            calls += 1;
            if cursor == "0" {
                break;
            }
        }
        assert!(calls > 5, "a big hash takes several calls");
        for i in 0..3000 {
            assert!(seen.contains(&format!("f{i}")), "f{i} missed");
        }
    }
}
