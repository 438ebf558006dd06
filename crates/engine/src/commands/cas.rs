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
const RF: u32 = Flags::READONLY | Flags::FAST;
const W: u32 = Flags::WRITE | Flags::DENYOOM;
const WF: u32 = Flags::WRITE | Flags::FAST;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec("delex", -2, WF, (1, 1, 1), G, "Conditionally removes the specified key based on value or digest comparison.", Handler::Data(delex)),
    spec("digest", 2, RF, (1, 1, 1), G, "Returns the XXH3 hash of a string value.", Handler::Data(digest)),
    // Keys are found through numkeys; the legacy (first, last, step) triple cannot say that.
    spec("msetex", -4, W | Flags::MOVABLEKEYS, (0, 0, 0), G, "Atomically sets multiple string keys with a shared expiration.", Handler::Data(msetex)),
    spec("delifeq", 3, Flags::WRITE, (1, 1, 1), G, "Deletes a key if its value equals the given one.", Handler::Data(delifeq)),
];

/// A bad IFDEQ/IFDNE argument (Redis 8.4.1 and later check it whenever it is compared).
const BAD_DIGEST: &[u8] = b"ERR must be exactly 16 hexadecimal characters";
/// DELEX with a condition word it does not know. Redis's tests only show that its message
/// contains "Invalid condition"; the full text is unconfirmed.
const BAD_CONDITION: &[u8] = b"ERR Invalid condition";
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
        None => reply::null_bulk(out, c.proto),
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

#[cfg(test)]
mod tests {
    use crate::Engine;
    use store::Value;

    const NOW: i64 = 1_700_000_000_000;
    const NIL: &str = "$-1\r\n";
    const OK: &str = "+OK\r\n";
    const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    const BAD_DIGEST: &str = "-ERR must be exactly 16 hexadecimal characters\r\n";

    fn run(e: &mut Engine, args: &[&str]) -> (String, Vec<String>) {
        (crate::testing::reply(e, NOW, args), crate::testing::take_muts(e))
    }

    fn r(e: &mut Engine, args: &[&str]) -> String {
        run(e, args).0
    }

    fn bulk(s: &str) -> String {
        format!("${}\r\n{s}\r\n", s.len())
    }

    fn with_hash() -> Engine {
        let mut e = Engine::default();
        e.ks.insert(b"h", Value::Hash(Box::default()), None);
        e
    }

    #[test]
    fn digest_is_xxh3_hex() {
        let mut e = Engine::default();
        assert_eq!(r(&mut e, &["DIGEST", "k"]), NIL);
        // Vectors from the research notes (Python xxhash's xxh3_64, seed 0).
        for (v, d) in [
            ("Hello world", "b6acb9d84a38ff74"),
            ("hello", "9555e8555c62dcfd"),
            ("test", "9ec9f7918d7dfc40"),
            ("", "2d06800538d394c2"),
            ("12345", "f34099ede96b5581"), // stored as an integer, hashed as its text
        ] {
            r(&mut e, &["SET", "k", v]);
            assert_eq!(run(&mut e, &["DIGEST", "k"]), (bulk(d), vec![]), "{v:?}");
        }
        let mut e = with_hash();
        assert_eq!(r(&mut e, &["DIGEST", "h"]), WRONGTYPE);
        assert_eq!(
            r(&mut e, &["DIGEST", "h", "x"]),
            "-ERR wrong number of arguments for 'digest' command\r\n"
        );
    }

    #[test]
    fn leading_zeros_are_kept() {
        // A value whose digest starts with zeros (from Redis issue 14496).
        let v =
            "v8lf0c11xh8ymlqztfd3eeq16kfn4sspw7fqmnuuq3k3t75em5wdizgcdw7uc26nnf961u2jkfzkjytls2kwlj7626sd";
        let mut e = Engine::default();
        r(&mut e, &["SET", "k", v]);
        assert_eq!(r(&mut e, &["DIGEST", "k"]), bulk("00006c38adf31777"));
        assert_eq!(r(&mut e, &["DELEX", "k", "IFDEQ", "6c38adf31777"]), BAD_DIGEST);
        assert_eq!(
            run(&mut e, &["DELEX", "k", "IFDEQ", "00006C38ADF31777"]),
            (":1\r\n".into(), vec!["DEL k".into()])
        );
    }

    #[test]
    fn set_ifeq_ifne() {
        let mut e = Engine::default();
        // IFEQ never creates; IFNE does.
        assert_eq!(run(&mut e, &["SET", "k", "a", "IFEQ", "x"]), (NIL.into(), vec![]));
        assert_eq!(run(&mut e, &["SET", "k", "a", "IFNE", "x"]), (OK.into(), vec!["SET k a".into()]));
        assert_eq!(run(&mut e, &["SET", "k", "b", "IFNE", "a"]), (NIL.into(), vec![]));
        assert_eq!(
            run(&mut e, &["SET", "k", "b", "ifeq", "a", "EX", "10"]),
            (OK.into(), vec![format!("SET k b PXAT {}", NOW + 10_000)])
        );
        // A failed condition leaves value and TTL alone.
        assert_eq!(run(&mut e, &["SET", "k", "c", "IFEQ", "a", "PX", "1"]), (NIL.into(), vec![]));
        assert_eq!(e.ks.expire_at(b"k"), Some(NOW + 10_000));
        assert_eq!(
            run(&mut e, &["SET", "k", "c", "IFEQ", "b", "KEEPTTL"]),
            (OK.into(), vec!["SET k c KEEPTTL".into()])
        );
        assert_eq!(e.ks.expire_at(b"k"), Some(NOW + 10_000));
        // With GET the old value comes back whether or not the write happened.
        assert_eq!(run(&mut e, &["SET", "k", "d", "IFEQ", "zzz", "GET"]), (bulk("c"), vec![]));
        assert_eq!(run(&mut e, &["SET", "k", "d", "IFEQ", "c", "GET"]), (bulk("c"), vec!["SET k d".into()]));
        assert_eq!(run(&mut e, &["SET", "m", "d", "IFEQ", "c", "GET"]), (NIL.into(), vec![]));
        // Integers compare by their text.
        r(&mut e, &["SET", "n", "10"]);
        assert_eq!(r(&mut e, &["SET", "n", "11", "IFEQ", "10"]), OK);
        assert_eq!(r(&mut e, &["SET", "n", "12", "IFEQ", "010"]), NIL);
        let mut e = with_hash();
        assert_eq!(run(&mut e, &["SET", "h", "v", "IFEQ", "v"]), (WRONGTYPE.into(), vec![]));
        assert_eq!(run(&mut e, &["SET", "h", "v", "IFDNE", "0000000000000000"]), (WRONGTYPE.into(), vec![]));
    }

    #[test]
    fn set_digest_conditions() {
        let mut e = Engine::default();
        // Missing key: IFDEQ fails, IFDNE creates; the digest text is not looked at.
        assert_eq!(run(&mut e, &["SET", "k", "hello", "IFDEQ", "xyz"]), (NIL.into(), vec![]));
        assert_eq!(
            run(&mut e, &["SET", "k", "hello", "IFDNE", "xyz"]),
            (OK.into(), vec!["SET k hello".into()])
        );
        assert_eq!(r(&mut e, &["SET", "k", "x", "IFDEQ", "9555e8555c62dcf"]), BAD_DIGEST);
        assert_eq!(r(&mut e, &["SET", "k", "x", "IFDEQ", "9555e8555c62dcfg"]), BAD_DIGEST);
        assert_eq!(r(&mut e, &["SET", "k", "x", "IFDNE", "9555e8555c62dcfdd", "GET"]), BAD_DIGEST);
        assert_eq!(run(&mut e, &["SET", "k", "x", "IFDNE", "9555E8555C62DCFD"]), (NIL.into(), vec![]));
        assert_eq!(
            run(&mut e, &["SET", "k", "world", "IFDEQ", "9555E8555C62dcfd"]),
            (OK.into(), vec!["SET k world".into()])
        );
        assert_eq!(
            run(&mut e, &["SET", "k", "again", "IFDNE", "9555e8555c62dcfd"]),
            (OK.into(), vec!["SET k again".into()])
        );
    }

    #[test]
    fn delex() {
        let mut e = with_hash();
        // Without a condition: any type, like DEL.
        assert_eq!(run(&mut e, &["DELEX", "h"]), (":1\r\n".into(), vec!["DEL h".into()]));
        assert_eq!(run(&mut e, &["DELEX", "h"]), (":0\r\n".into(), vec![]));
        // A missing key is 0 for every condition, IFNE included.
        for cond in ["IFEQ", "IFNE", "IFDEQ", "IFDNE"] {
            assert_eq!(run(&mut e, &["DELEX", "k", cond, "0123456789abcdef"]), (":0\r\n".into(), vec![]));
        }
        r(&mut e, &["SET", "k", "v"]);
        assert_eq!(run(&mut e, &["DELEX", "k", "IFEQ", "w"]), (":0\r\n".into(), vec![]));
        assert_eq!(run(&mut e, &["DELEX", "k", "IFNE", "v"]), (":0\r\n".into(), vec![]));
        assert_eq!(run(&mut e, &["DELEX", "k", "ifeq", "v"]), (":1\r\n".into(), vec!["DEL k".into()]));
        r(&mut e, &["SET", "k", "v"]);
        assert_eq!(run(&mut e, &["DELEX", "k", "IFNE", "w"]), (":1\r\n".into(), vec!["DEL k".into()]));
        r(&mut e, &["SET", "k", "hello"]);
        assert_eq!(r(&mut e, &["DELEX", "k", "IFDNE", "9555e8555c62dcfd"]), ":0\r\n");
        assert_eq!(r(&mut e, &["DELEX", "k", "IFDEQ", "short"]), BAD_DIGEST);
        assert_eq!(r(&mut e, &["DELEX", "k", "IFDEQ", "9555e8555c62dcfd"]), ":1\r\n");
        // Errors.
        let arity = "-ERR wrong number of arguments for 'delex' command\r\n";
        assert_eq!(r(&mut e, &["DELEX", "k", "IFEQ"]), arity);
        assert_eq!(r(&mut e, &["DELEX", "k", "IFEQ", "v", "extra"]), arity);
        assert_eq!(r(&mut e, &["DELEX"]), arity);
        assert!(r(&mut e, &["DELEX", "k", "IFXX", "v"]).starts_with("-ERR Invalid condition"));
        e.ks.insert(b"h", Value::Hash(Box::default()), None);
        assert_eq!(run(&mut e, &["DELEX", "h", "IFEQ", "v"]), (WRONGTYPE.into(), vec![]));
    }

    #[test]
    fn delifeq() {
        let mut e = with_hash();
        assert_eq!(r(&mut e, &["DELIFEQ", "k", "v"]), ":0\r\n");
        r(&mut e, &["SET", "k", "v"]);
        assert_eq!(run(&mut e, &["DELIFEQ", "k", "w"]), (":0\r\n".into(), vec![]));
        assert_eq!(run(&mut e, &["DELIFEQ", "k", "v"]), (":1\r\n".into(), vec!["DEL k".into()]));
        assert_eq!(r(&mut e, &["DELIFEQ", "h", "v"]), WRONGTYPE);
        assert_eq!(r(&mut e, &["DELIFEQ", "k"]), "-ERR wrong number of arguments for 'delifeq' command\r\n");
    }

    #[test]
    fn msetex() {
        let mut e = Engine::default();
        assert_eq!(
            run(&mut e, &["MSETEX", "2", "a", "1", "b", "2", "EX", "10"]),
            (
                ":1\r\n".into(),
                vec![format!("SET a 1 PXAT {}", NOW + 10_000), format!("SET b 2 PXAT {}", NOW + 10_000)]
            )
        );
        assert_eq!(e.ks.expire_at(b"b"), Some(NOW + 10_000));
        // NX: every key must be missing; XX: every key present. All or nothing.
        assert_eq!(run(&mut e, &["MSETEX", "2", "a", "x", "c", "3", "NX"]), (":0\r\n".into(), vec![]));
        assert_eq!(run(&mut e, &["MSETEX", "2", "a", "x", "c", "3", "XX"]), (":0\r\n".into(), vec![]));
        assert_eq!(r(&mut e, &["EXISTS", "c"]), ":0\r\n");
        assert_eq!(run(&mut e, &["MSETEX", "2", "c", "3", "d", "4", "nx", "PX", "5"]).0, ":1\r\n");
        assert_eq!(
            run(&mut e, &["MSETEX", "2", "a", "y", "b", "z", "KEEPTTL", "XX"]),
            (":1\r\n".into(), vec!["SET a y KEEPTTL".into(), "SET b z KEEPTTL".into()])
        );
        assert_eq!(e.ks.expire_at(b"a"), Some(NOW + 10_000));
        // No expiry option: persistent, like MSET.
        assert_eq!(run(&mut e, &["MSETEX", "1", "a", "p"]), (":1\r\n".into(), vec!["SET a p".into()]));
        assert_eq!(e.ks.expire_at(b"a"), None);
        // An absolute time in the past deletes the keys that existed.
        assert_eq!(
            run(&mut e, &["MSETEX", "2", "a", "1", "zz", "2", "PXAT", "5"]),
            (":1\r\n".into(), vec!["DEL a".into()])
        );
        // Errors.
        let syntax = "-ERR syntax error\r\n";
        for bad in [
            &["MSETEX", "1", "a", "1", "NX", "XX"][..],
            &["MSETEX", "1", "a", "1", "EX", "1", "PX", "1"],
            &["MSETEX", "1", "a", "1", "KEEPTTL", "EX", "1"],
            &["MSETEX", "1", "a", "1", "EX"],
            &["MSETEX", "1", "a", "1", "GET"],
            &["MSETEX", "1", "a", "1", "b", "2"],
        ] {
            assert_eq!(run(&mut e, bad), (syntax.into(), vec![]), "{bad:?}");
        }
        for n in ["0", "-1", "x", "2147483648"] {
            assert_eq!(r(&mut e, &["MSETEX", n, "a", "1"]), "-ERR invalid numkeys value\r\n", "{n}");
        }
        assert_eq!(r(&mut e, &["MSETEX", "2", "a", "1"]), "-ERR wrong number of key-value pairs\r\n");
        assert_eq!(r(&mut e, &["MSETEX", "2", "a", "1", "b"]), "-ERR wrong number of key-value pairs\r\n");
        assert_eq!(
            r(&mut e, &["MSETEX", "1", "a", "1", "EX", "0"]),
            "-ERR invalid expire time in 'msetex' command\r\n"
        );
        assert_eq!(
            r(&mut e, &["MSETEX", "1", "a"]),
            "-ERR wrong number of arguments for 'msetex' command\r\n"
        );
    }
}
