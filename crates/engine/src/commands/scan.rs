//! What HSCAN, SSCAN and ZSCAN share: the cursor, the options after it, the bounded scan loop
//! and the `[cursor, [elements...]]` reply. The cursor and MATCH/COUNT rules are the keyspace
//! SCAN's ([`keyspace::parse_cursor`], [`keyspace::parse_scan_opts`]), so all four commands
//! accept and reject exactly the same arguments.

use crate::commands::keyspace;
use crate::util::eq_ic;
use resp::reply;

/// Parses a SCAN-family cursor; writes `ERR invalid cursor` and returns None when it is bad.
pub(crate) fn parse_cursor(out: &mut Vec<u8>, a: &[u8]) -> Option<u64> {
    let cursor = keyspace::parse_cursor(a);
    if cursor.is_none() {
        reply::error(out, b"ERR invalid cursor");
    }
    cursor
}

/// The options of HSCAN / SSCAN / ZSCAN after the cursor.
pub(crate) struct ScanOpts<'a> {
    /// None also for `MATCH *`, which matches everything.
    pub pattern: Option<&'a [u8]>,
    pub count: usize,
    pub novalues: bool,
}

/// Parses `[MATCH pattern] [COUNT count]` (and the flag NOVALUES when `allow_novalues`),
/// writing Redis's error on failure. Options are read left to right and the first bad one
/// decides the error, so each MATCH/COUNT pair goes through the keyspace parser on its own.
pub(crate) fn parse_scan_opts<'a>(
    out: &mut Vec<u8>,
    opts: &[&'a [u8]],
    allow_novalues: bool,
) -> Option<ScanOpts<'a>> {
    let mut o = ScanOpts { pattern: None, count: 10, novalues: false };
    let mut i = 0;
    while i < opts.len() {
        if allow_novalues && eq_ic(opts[i], b"novalues") {
            o.novalues = true;
            i += 1;
            continue;
        }
        // A lone trailing option (no value) is a syntax error there too.
        let pair = &opts[i..opts.len().min(i + 2)];
        let parsed = keyspace::parse_scan_opts(out, pair, false)?;
        if eq_ic(opts[i], b"count") {
            o.count = parsed.count;
        } else {
            o.pattern = parsed.pattern;
        }
        i += 2;
    }
    Some(o)
}

/// Runs scan steps until about `count` elements were collected or the iteration ended (at
/// most ten steps, as Redis bounds its work per call). Returns the next cursor.
pub(crate) fn scan_loop(
    mut cursor: u64,
    count: usize,
    mut step: impl FnMut(u64, usize) -> (u64, usize),
) -> u64 {
    let mut found = 0;
    for _ in 0..10 {
        let (next, n) = step(cursor, count);
        cursor = next;
        found += n;
        if cursor == 0 || found >= count {
            break;
        }
    }
    cursor
}

/// Writes the `[cursor, [elements...]]` reply.
pub(crate) fn scan_reply(out: &mut Vec<u8>, cursor: u64, items: &[&[u8]]) {
    reply::array_len(out, 2);
    reply::bulk(out, itoa::Buffer::new().format(cursor).as_bytes());
    reply::bulk_array(out, items);
}

#[cfg(test)]
mod tests {
    use crate::Engine;

    fn run(e: &mut Engine, cmd: &str) -> String {
        crate::testing::reply(e, 1_000, &cmd.split(' ').collect::<Vec<_>>())
    }

    const SYNTAX: &str = "-ERR syntax error\r\n";
    const NOT_INTEGER: &str = "-ERR value is not an integer or out of range\r\n";

    /// Options are read as pairs from left to right: the first bad one picks the error
    /// (checked against redis-server 7.0.15), whatever follows it.
    #[test]
    fn first_bad_option_decides_the_error() {
        let mut e = Engine::default();
        run(&mut e, "HSET h a 1");
        run(&mut e, "SADD s x");
        run(&mut e, "ZADD z 1 a");
        for cmd in ["HSCAN h", "SSCAN s", "ZSCAN z"] {
            assert_eq!(run(&mut e, &format!("{cmd} 0 COUNT x MATCH")), NOT_INTEGER, "{cmd}");
            assert_eq!(run(&mut e, &format!("{cmd} 0 MATCH x COUNT")), SYNTAX, "{cmd}");
            assert_eq!(run(&mut e, &format!("{cmd} 0 COUNT")), SYNTAX, "{cmd}");
            assert_eq!(run(&mut e, &format!("{cmd} 0 COUNT 0 COUNT x")), SYNTAX, "{cmd}");
            assert_eq!(run(&mut e, &format!("{cmd} 0 TYPE string")), SYNTAX, "{cmd}");
            assert_eq!(run(&mut e, &format!("{cmd} +0 COUNT 5 COUNT 1")).lines().nth(2), Some("0"), "{cmd}");
            assert_eq!(run(&mut e, &format!("{cmd} 0x0")), "-ERR invalid cursor\r\n", "{cmd}");
            assert_eq!(run(&mut e, &format!("{cmd} -")), "-ERR invalid cursor\r\n", "{cmd}");
        }
        // NOVALUES is an HSCAN flag only.
        assert_eq!(run(&mut e, "SSCAN s 0 NOVALUES"), SYNTAX);
        assert_eq!(run(&mut e, "ZSCAN z 0 NOVALUES"), SYNTAX);
    }

    /// NOVALUES is a flag with no value, anywhere among the options; after MATCH it is the
    /// pattern, not the flag.
    #[test]
    fn novalues_is_a_lone_flag() {
        let mut e = Engine::default();
        run(&mut e, "HSET h novalues 1 b 2");
        assert_eq!(
            run(&mut e, "HSCAN h 0 MATCH novalues"),
            "*2\r\n$1\r\n0\r\n*2\r\n$8\r\nnovalues\r\n$1\r\n1\r\n"
        );
        assert_eq!(run(&mut e, "HSCAN h 0 NOVALUES MATCH b"), "*2\r\n$1\r\n0\r\n*1\r\n$1\r\nb\r\n");
        assert_eq!(run(&mut e, "HSCAN h 0 MATCH b novalues"), "*2\r\n$1\r\n0\r\n*1\r\n$1\r\nb\r\n");
        assert_eq!(run(&mut e, "HSCAN h 0 NOVALUES COUNT"), SYNTAX);
        assert_eq!(run(&mut e, "HSCAN h 0 NOVALUES COUNT x"), NOT_INTEGER);
    }
}
