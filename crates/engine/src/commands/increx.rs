//! INCREX (Redis 8.8): a counter with bounds and an expiry in one command.
//!
//! `INCREX key [BYFLOAT f | BYINT i] [LBOUND lo] [UBOUND hi] [SATURATE]
//! [EX s | PX ms | EXAT s | PXAT ms | PERSIST] [ENX]`, options in any order, none twice.
//! The reply is `[new value, increment actually applied]`. A result outside `[LBOUND, UBOUND]`
//! (the type's limits when a bound is not given: i64, or LDBL_MAX for BYFLOAT) is refused
//! without side effects, `[current, 0]`, a missing key staying missing; with SATURATE it is
//! clamped to the bound instead (which can move the value against the increment's direction).
//! Without an expiry option the key keeps its TTL; ENX applies the expiry only to a key that
//! has none; a deadline already past deletes the key.
//!
//! Semantics and error texts follow Redis's INCREX tests and command page (collected in our
//! research notes); the texts those tests match only in part are completed with Redis's usual
//! wording, and the float overflow text of the applied increment is unconfirmed.
//!
//! Canonical mutation, as Redis replicates it: `SET key <result> KEEPTTL` (no expiry option,
//! ENX on a key that has a TTL, or PERSIST on one that has none), `SET key <result> PXAT
//! <deadline>`, `SET key <result>` (PERSIST removing a TTL), `DEL key` (a deadline in the
//! past); nothing for a refused increment.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::commands::long_double::LongDouble;
use crate::commands::string::{deadline, emit_set, SetTtl, Unit};
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{eq_ic, parse_i64};
use resp::reply;
use std::cmp::Ordering;
use store::{Millis, StrRef, Value, ValueMut};

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec("increx", -2, Flags::WRITE | Flags::DENYOOM | Flags::FAST, (1, 1, 1), "string", "Increments the numeric value of a key by a number and sets its expiration time. Uses 0 as initial value if the key doesn't exist.", Handler::Data(increx)),
];

const ENX_NEEDS_EXPIRY: &[u8] = b"ERR ENX flag requires an expiration";
const BOUNDS_CROSSED: &[u8] = b"ERR LBOUND can't be greater than UBOUND";
const INT_INCREMENT: &[u8] = b"ERR Increment is not an integer or out of range";
const FLOAT_INCREMENT: &[u8] = b"ERR Increment is not a valid float";
const INFINITE_INCREMENT: &[u8] = b"ERR BYFLOAT increment cannot be Infinity";
const INFINITE_VALUE: &[u8] = b"ERR value cannot be Infinity";
const APPLIED_OVERFLOW: &[u8] = b"ERR applied increment would overflow";
const APPLIED_INFINITE: &[u8] = b"ERR applied increment would be Infinity";

/// The expiry option, as given.
#[derive(Clone, Copy)]
enum Expiry<'a> {
    Persist,
    At(Unit, &'a [u8]),
}

/// The options, parsed for syntax only (values are read once the mode is known).
#[derive(Default)]
struct Opts<'a> {
    /// `(is BYFLOAT, increment)`.
    by: Option<(bool, &'a [u8])>,
    lbound: Option<&'a [u8]>,
    ubound: Option<&'a [u8]>,
    saturate: bool,
    expiry: Option<Expiry<'a>>,
    enx: bool,
}

/// Reads the options after the key: any order, each at most once, one increment kind and one
/// expiry kind, PERSIST never with ENX. Every breach is `ERR syntax error`.
fn parse_opts<'a>(args: &[&'a [u8]]) -> Result<Opts<'a>, &'static [u8]> {
    let mut o = Opts::default();
    let mut j = 0;
    // The value of the option at `j`, if there is one.
    let value = |j: usize| args.get(j + 1).copied().ok_or(errors::SYNTAX);
    while j < args.len() {
        let w = args[j];
        if eq_ic(w, b"byint") || eq_ic(w, b"byfloat") {
            if o.by.is_some() {
                return Err(errors::SYNTAX);
            }
            o.by = Some((eq_ic(w, b"byfloat"), value(j)?));
            j += 2;
        } else if eq_ic(w, b"lbound") || eq_ic(w, b"ubound") {
            let slot = if eq_ic(w, b"lbound") { &mut o.lbound } else { &mut o.ubound };
            if slot.is_some() {
                return Err(errors::SYNTAX);
            }
            *slot = Some(value(j)?);
            j += 2;
        } else if eq_ic(w, b"saturate") {
            if o.saturate {
                return Err(errors::SYNTAX);
            }
            o.saturate = true;
            j += 1;
        } else if eq_ic(w, b"persist") {
            if o.expiry.is_some() {
                return Err(errors::SYNTAX);
            }
            o.expiry = Some(Expiry::Persist);
            j += 1;
        } else if let Some(unit) = Unit::from_word(w) {
            if o.expiry.is_some() {
                return Err(errors::SYNTAX);
            }
            o.expiry = Some(Expiry::At(unit, value(j)?));
            j += 2;
        } else if eq_ic(w, b"enx") {
            if o.enx {
                return Err(errors::SYNTAX);
            }
            o.enx = true;
            j += 1;
        } else {
            return Err(errors::SYNTAX);
        }
    }
    match (o.enx, o.expiry) {
        (true, Some(Expiry::Persist)) => Err(errors::SYNTAX),
        (true, None) => Err(ENX_NEEDS_EXPIRY),
        _ => Ok(o),
    }
}

/// A bound in integer mode, or its error (`ERR LBOUND is not an integer or out of range`).
fn int_bound(arg: Option<&[u8]>, name: &str, default: i64) -> Result<i64, Vec<u8>> {
    match arg {
        None => Ok(default),
        Some(a) => {
            parse_i64(a).ok_or_else(|| format!("ERR {name} is not an integer or out of range").into_bytes())
        }
    }
}

/// A bound in BYFLOAT mode, or its error (`ERR LBOUND is not a valid float`).
fn float_bound(arg: Option<&[u8]>, name: &str, default: LongDouble) -> Result<LongDouble, Vec<u8>> {
    match arg {
        None => Ok(default),
        Some(a) => {
            LongDouble::parse(a).ok_or_else(|| format!("ERR {name} is not a valid float").into_bytes())
        }
    }
}

/// INCREX key [options]: see the module comment.
fn increx(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let o = match parse_opts(&args[2..]) {
        Ok(o) => o,
        Err(e) => return reply::error(out, e),
    };
    if let Err(e) = run(c, out, key, &o) {
        reply::error(out, &e);
    }
}

fn run(c: &mut Ctx, out: &mut Vec<u8>, key: &[u8], o: &Opts) -> Result<(), Vec<u8>> {
    let at = match o.expiry {
        Some(Expiry::At(unit, arg)) => Some(deadline(c.now, unit, arg, b"increx")?),
        _ => None,
    };
    match o.by {
        Some((true, incr)) => {
            let incr = LongDouble::parse(incr).ok_or(FLOAT_INCREMENT)?;
            if !incr.is_finite() {
                return Err(INFINITE_INCREMENT.to_vec());
            }
            let lo = float_bound(o.lbound, "LBOUND", LongDouble::MAX.negated())?;
            let hi = float_bound(o.ubound, "UBOUND", LongDouble::MAX)?;
            if lo.compare(&hi) == Ordering::Greater {
                return Err(BOUNDS_CROSSED.to_vec());
            }
            let (existed, old) = match c.write(key) {
                None => (false, LongDouble::ZERO),
                Some(ValueMut::Str(StrRef::Int(i))) => (true, LongDouble::from_i64(i)),
                Some(ValueMut::Str(StrRef::Bytes(b))) => {
                    (true, LongDouble::parse(b).ok_or(errors::NOT_FLOAT)?)
                }
                Some(_) => return Err(errors::WRONGTYPE.to_vec()),
            };
            if !old.is_finite() {
                return Err(INFINITE_VALUE.to_vec());
            }
            // An overflow to infinity is past LDBL_MAX, so past the upper (or lower) default.
            let want = old.add(incr);
            let new = if want.compare(&lo) == Ordering::Less {
                lo
            } else if want.compare(&hi) == Ordering::Greater {
                hi
            } else {
                want
            };
            if new != want && !o.saturate {
                reply::array_len(out, 2);
                reply::double(out, c.proto, old.to_human().as_bytes());
                reply::double(out, c.proto, b"0");
                return Ok(());
            }
            let applied = new.add(old.negated());
            if !applied.is_finite() {
                return Err(APPLIED_INFINITE.to_vec());
            }
            let text = new.to_human();
            reply::array_len(out, 2);
            reply::double(out, c.proto, text.as_bytes());
            reply::double(out, c.proto, applied.to_human().as_bytes());
            store(c, key, existed, Value::Str(text.clone().into_bytes()), text.as_bytes(), o, at);
        }
        by => {
            let incr = match by {
                Some((_, a)) => parse_i64(a).ok_or(INT_INCREMENT)?,
                None => 1,
            };
            let lo = int_bound(o.lbound, "LBOUND", i64::MIN)?;
            let hi = int_bound(o.ubound, "UBOUND", i64::MAX)?;
            if lo > hi {
                return Err(BOUNDS_CROSSED.to_vec());
            }
            let (existed, old) = match c.write(key) {
                None => (false, 0),
                Some(ValueMut::Str(StrRef::Int(i))) => (true, i),
                Some(ValueMut::Str(StrRef::Bytes(b))) => (true, parse_i64(b).ok_or(errors::NOT_INTEGER)?),
                Some(_) => return Err(errors::WRONGTYPE.to_vec()),
            };
            // In i128 an i64 sum cannot overflow; past i64 is past the default bounds.
            let want = i128::from(old) + i128::from(incr);
            let new = want.clamp(i128::from(lo), i128::from(hi));
            if new != want && !o.saturate {
                reply::array_len(out, 2);
                reply::integer(out, old);
                reply::integer(out, 0);
                return Ok(());
            }
            let new = new as i64; // within [lo, hi], so within i64
            let applied = i64::try_from(i128::from(new) - i128::from(old)).map_err(|_| APPLIED_OVERFLOW)?;
            reply::array_len(out, 2);
            reply::integer(out, new);
            reply::integer(out, applied);
            let mut b = itoa::Buffer::new();
            store(c, key, existed, Value::Int(new), b.format(new).as_bytes(), o, at);
        }
    }
    Ok(())
}

/// Stores the result with the deadline the options leave it, and emits the mutation.
fn store(c: &mut Ctx, key: &[u8], existed: bool, v: Value, text: &[u8], o: &Opts, at: Option<Millis>) {
    let current = if existed { c.ks.expire_at(key) } else { None };
    let ttl = match (o.expiry, at) {
        // A key without a TTL keeps none: KEEPTTL says so, and tells the record's readers
        // (keyspace events) that PERSIST removed nothing.
        (Some(Expiry::Persist), _) if current.is_some() => SetTtl::Persistent,
        (Some(Expiry::At(..)), Some(_)) if o.enx && current.is_some() => SetTtl::Keep,
        (Some(Expiry::At(..)), Some(at)) => SetTtl::At(at),
        _ => SetTtl::Keep,
    };
    let deadline = match ttl {
        SetTtl::Persistent => None,
        SetTtl::Keep => current,
        // Past already (EXAT/PXAT): the key goes, as SET with such a deadline leaves none.
        // While replaying, deadlines are stored as given (the origin's DEL follows).
        SetTtl::At(at) if at <= c.now && !c.replaying => {
            if existed {
                c.ks.delete(key);
                c.emit(&[b"DEL", key]);
            }
            return;
        }
        SetTtl::At(at) => Some(at),
    };
    c.ks.put(key, v, deadline);
    emit_set(c, key, text, ttl);
}

#[cfg(test)]
mod tests {
    use crate::Engine;

    const NOW: i64 = 1_700_000_000_000;

    fn run(e: &mut Engine, cmd: &str) -> (String, Vec<String>) {
        crate::testing::run_line(e, NOW, cmd)
    }

    fn r(e: &mut Engine, cmd: &str) -> String {
        run(e, cmd).0
    }

    fn pair(a: i64, b: i64) -> String {
        format!("*2\r\n:{a}\r\n:{b}\r\n")
    }

    fn fpair(a: &str, b: &str) -> String {
        format!("*2\r\n${}\r\n{a}\r\n${}\r\n{b}\r\n", a.len(), b.len())
    }

    const SYNTAX: &str = "-ERR syntax error\r\n";

    #[test]
    fn increments_and_mutations() {
        let mut e = Engine::default();
        assert_eq!(run(&mut e, "INCREX k"), (pair(1, 1), vec!["SET k 1 KEEPTTL".into()]));
        assert_eq!(run(&mut e, "INCREX k BYINT 10"), (pair(11, 10), vec!["SET k 11 KEEPTTL".into()]));
        assert_eq!(r(&mut e, "INCREX k BYINT -20"), pair(-9, -20));
        assert_eq!(r(&mut e, "INCREX k BYINT 0"), pair(-9, 0));
        assert_eq!(r(&mut e, "OBJECT ENCODING k"), "$3\r\nint\r\n");
        // Options in any order.
        assert_eq!(r(&mut e, "INCREX k UBOUND 10 BYINT 5 LBOUND -100"), pair(-4, 5));
    }

    #[test]
    fn bounds_refuse_or_saturate() {
        let mut e = Engine::default();
        // A refused increment on a missing key does not create it.
        assert_eq!(run(&mut e, "INCREX k BYINT 5 LBOUND 10"), (pair(0, 0), vec![]));
        assert_eq!(r(&mut e, "EXISTS k"), ":0\r\n");
        r(&mut e, "SET k 10");
        assert_eq!(run(&mut e, "INCREX k BYINT 100 UBOUND 15 EX 100"), (pair(10, 0), vec![]));
        assert_eq!(r(&mut e, "TTL k"), ":-1\r\n");
        assert_eq!(
            run(&mut e, "INCREX k BYINT 100 UBOUND 15 SATURATE EX 200"),
            (pair(15, 5), vec![format!("SET k 15 PXAT {}", NOW + 200_000)])
        );
        // Saturation can move against the increment: 50 with UBOUND 30.
        r(&mut e, "SET k 50");
        assert_eq!(r(&mut e, "INCREX k BYINT 5 UBOUND 30"), pair(50, 0));
        assert_eq!(r(&mut e, "INCREX k BYINT 5 UBOUND 30 SATURATE"), pair(30, -20));
        assert_eq!(r(&mut e, "INCREX k BYINT -25 UBOUND 30"), pair(5, -25));
        // The type's limits: refused by default, clamped with SATURATE.
        r(&mut e, "SET k 9223372036854775800");
        assert_eq!(r(&mut e, "INCREX k BYINT 9223372036854775800"), pair(9223372036854775800, 0));
        assert_eq!(r(&mut e, "INCREX k BYINT 9223372036854775800 SATURATE"), pair(i64::MAX, 7));
        r(&mut e, "SET k -9223372036854775800");
        assert_eq!(r(&mut e, "INCREX k BYINT -9223372036854775800 SATURATE"), pair(i64::MIN, -8));
        r(&mut e, "SET k 9223372036854775800");
        assert_eq!(
            r(&mut e, "INCREX k BYINT 1 SATURATE UBOUND -9223372036854775808"),
            "-ERR applied increment would overflow\r\n"
        );
        // A missing key clamped up to LBOUND is created.
        assert_eq!(r(&mut e, "INCREX fresh LBOUND 5 SATURATE"), pair(5, 5));
    }

    #[test]
    fn floats() {
        let mut e = Engine::default();
        assert_eq!(
            run(&mut e, "INCREX f BYFLOAT 1.5"),
            (fpair("1.5", "1.5"), vec!["SET f 1.5 KEEPTTL".into()])
        );
        r(&mut e, "SET f 10");
        assert_eq!(r(&mut e, "INCREX f BYFLOAT 100 UBOUND 42.5 SATURATE"), fpair("42.5", "32.5"));
        assert_eq!(r(&mut e, "INCREX f BYFLOAT 0.1 UBOUND 42.5"), fpair("42.5", "0"));
        assert_eq!(r(&mut e, "INCREX g BYFLOAT -0.5 UBOUND -1.5"), fpair("0", "0"));
        assert_eq!(r(&mut e, "EXISTS g"), ":0\r\n");
        r(&mut e, "SET f 0.1");
        assert_eq!(r(&mut e, "INCREX f BYFLOAT 0.2"), fpair("0.3", "0.2"));
        assert_eq!(r(&mut e, "INCREX f BYFLOAT abc"), "-ERR Increment is not a valid float\r\n");
        assert_eq!(r(&mut e, "INCREX f BYFLOAT inf"), "-ERR BYFLOAT increment cannot be Infinity\r\n");
        assert_eq!(r(&mut e, "INCREX f BYFLOAT 1 LBOUND abc"), "-ERR LBOUND is not a valid float\r\n");
        assert_eq!(
            r(&mut e, "INCREX f BYFLOAT 1 LBOUND 2 UBOUND 1.5"),
            "-ERR LBOUND can't be greater than UBOUND\r\n"
        );
        r(&mut e, "SET s abc");
        assert_eq!(r(&mut e, "INCREX s BYFLOAT 1"), "-ERR value is not a valid float\r\n");
        r(&mut e, "SET s inf");
        assert_eq!(r(&mut e, "INCREX s BYFLOAT 1"), "-ERR value cannot be Infinity\r\n");
        // Past LDBL_MAX: refused, or clamped to it.
        r(&mut e, "SET big 1e4932");
        assert_eq!(r(&mut e, "INCREX big BYFLOAT 1e4932").lines().nth(4), Some("0"));
        let sat = r(&mut e, "INCREX big BYFLOAT 1e4932 SATURATE");
        assert!(sat.starts_with("*2\r\n$4933\r\n1189731495357231765"), "{sat:.60}");
    }

    #[test]
    fn expiry_options() {
        let mut e = Engine::default();
        assert_eq!(
            run(&mut e, "INCREX k EX 100"),
            (pair(1, 1), vec![format!("SET k 1 PXAT {}", NOW + 100_000)])
        );
        // No option keeps the TTL; ENX leaves an existing one alone.
        assert_eq!(run(&mut e, "INCREX k").1, vec!["SET k 2 KEEPTTL".to_string()]);
        assert_eq!(r(&mut e, "PTTL k"), ":100000\r\n");
        assert_eq!(run(&mut e, "INCREX k PX 5 ENX").1, vec!["SET k 3 KEEPTTL".to_string()]);
        assert_eq!(r(&mut e, "PTTL k"), ":100000\r\n");
        // Even a past deadline does not touch a key with a TTL under ENX.
        assert_eq!(r(&mut e, "INCREX k EXAT 1 ENX"), pair(4, 1));
        assert_eq!(r(&mut e, "PTTL k"), ":100000\r\n");
        assert_eq!(run(&mut e, "INCREX k PERSIST"), (pair(5, 1), vec!["SET k 5".into()]));
        assert_eq!(r(&mut e, "TTL k"), ":-1\r\n");
        // PERSIST on a key without a TTL: nothing to remove, KEEPTTL says so.
        assert_eq!(run(&mut e, "INCREX k PERSIST").1, vec!["SET k 6 KEEPTTL".to_string()]);
        assert_eq!(run(&mut e, "INCREX k PXAT 1").1, vec!["DEL k".to_string()]);
        assert_eq!(r(&mut e, "EXISTS k"), ":0\r\n");
        // ENX on a key without a TTL applies the expiry.
        r(&mut e, "SET n 1");
        assert_eq!(
            run(&mut e, "INCREX n EXAT 1800000000 ENX").1,
            vec!["SET n 2 PXAT 1800000000000".to_string()]
        );
    }

    #[test]
    fn errors() {
        let mut e = Engine::default();
        for bad in [
            "INCREX k BYINT 1 BYINT 2",
            "INCREX k BYINT 1 BYFLOAT 2",
            "INCREX k LBOUND 0 LBOUND 1",
            "INCREX k SATURATE SATURATE",
            "INCREX k EX 10 EX 20",
            "INCREX k EX 10 PX 20",
            "INCREX k PERSIST EX 10",
            "INCREX k PERSIST ENX",
            "INCREX k ENX PERSIST",
            "INCREX k ENX ENX EX 10",
            "INCREX k SAT",
            "INCREX k BYINT",
            "INCREX k LBOUND",
        ] {
            assert_eq!(r(&mut e, bad), SYNTAX, "{bad}");
        }
        assert_eq!(r(&mut e, "INCREX k ENX"), "-ERR ENX flag requires an expiration\r\n");
        assert_eq!(r(&mut e, "INCREX k BYINT 1 ENX"), "-ERR ENX flag requires an expiration\r\n");
        assert_eq!(r(&mut e, "INCREX k BYINT 1.5"), "-ERR Increment is not an integer or out of range\r\n");
        assert_eq!(r(&mut e, "INCREX k LBOUND 1.5"), "-ERR LBOUND is not an integer or out of range\r\n");
        assert_eq!(r(&mut e, "INCREX k UBOUND x"), "-ERR UBOUND is not an integer or out of range\r\n");
        assert_eq!(r(&mut e, "INCREX k LBOUND 5 UBOUND 4"), "-ERR LBOUND can't be greater than UBOUND\r\n");
        assert_eq!(r(&mut e, "INCREX k EX 0"), "-ERR invalid expire time in 'increx' command\r\n");
        assert_eq!(r(&mut e, "INCREX k PX -1"), "-ERR invalid expire time in 'increx' command\r\n");
        assert_eq!(r(&mut e, "EXISTS k"), ":0\r\n");
        r(&mut e, "SET s 1.5");
        assert_eq!(r(&mut e, "INCREX s"), "-ERR value is not an integer or out of range\r\n");
        r(&mut e, "LPUSH l a");
        assert!(r(&mut e, "INCREX l").starts_with("-WRONGTYPE"));
    }
}
