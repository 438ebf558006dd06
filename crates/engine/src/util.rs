//! Argument parsing shared by handlers, with Redis's exact acceptance rules.

use crate::errors;
use resp::reply;
use store::Millis;

/// Parses an integer argument as Redis's `string2ll`: canonical decimal only.
/// Lowercase hex of `bytes`: a replication id or a digest prints as 40 digits.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

pub fn parse_i64(a: &[u8]) -> Option<i64> {
    store::types::string::parse_canonical_i64(a)
}

/// Parses a float argument as Redis's `string2ld`/`strtod` does for commands like INCRBYFLOAT
/// and ZADD: decimal or exponent forms, `inf`/`-inf`/`+inf` (any case); no NaN, no spaces.
pub fn parse_f64(a: &[u8]) -> Option<f64> {
    if a.is_empty() || a.len() > 5120 {
        return None;
    }
    let s = std::str::from_utf8(a).ok()?;
    if s.starts_with(|c: char| c.is_whitespace()) || s.ends_with(|c: char| c.is_whitespace()) {
        return None;
    }
    let lower = s.to_ascii_lowercase();
    let v = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => {
            if lower.contains("nan") || lower.contains("inf") {
                return None;
            }
            let v = match parse_hex_f64(&lower) {
                Some(h) => h?,
                None => lower.parse::<f64>().ok()?,
            };
            // strtod reports ERANGE for a finite text that overflows to infinity or underflows
            // to zero, and Redis rejects those.
            let nonzero_digits =
                lower.split('e').next().is_some_and(|m| m.bytes().any(|b| (b'1'..=b'9').contains(&b)));
            if v.is_infinite() || (v == 0.0 && nonzero_digits) {
                return None;
            }
            v
        }
    };
    if v.is_nan() {
        None
    } else {
        Some(v)
    }
}

/// strtod's hexadecimal form (`0x1.8p3`, `-0X10`), which Redis's float arguments accept:
/// None if `lower` (lowercased) is not hex at all, Some(None) if it is malformed hex.
fn parse_hex_f64(lower: &str) -> Option<Option<f64>> {
    let (neg, body) = match lower.as_bytes().first() {
        Some(b'-') => (true, &lower[1..]),
        Some(b'+') => (false, &lower[1..]),
        _ => (false, lower),
    };
    let hex = body.strip_prefix("0x")?;
    Some(parse_hex_digits(hex).map(|v| if neg { -v } else { v }))
}

/// The unsigned part of a C hex float after `0x` (lowercased): hex digits, an optional `.`
/// and fraction, an optional `p[+-]exp`. None if malformed.
fn parse_hex_digits(hex: &str) -> Option<f64> {
    let (mant, exp) = match hex.find('p') {
        Some(i) => (&hex[..i], Some(&hex[i + 1..])),
        None => (hex, None),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for ch in int.chars() {
        v = v * 16.0 + ch.to_digit(16)? as f64;
    }
    let mut scale = 1.0 / 16.0;
    for ch in frac.chars() {
        v += ch.to_digit(16)? as f64 * scale;
        scale /= 16.0;
    }
    if let Some(e) = exp {
        let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        // Past +-2000 every power of two is already inf or 0 in f64, so clamping changes no
        // result and keeps a huge exponent text from failing to parse.
        let e: i32 = e.parse().unwrap_or(if e.starts_with('-') { -100_000 } else { 100_000 });
        v *= 2f64.powi(e.clamp(-2000, 2000));
    }
    Some(v)
}

/// Parses a blocking timeout in seconds as Redis does (`strtold` syntax, hex floats included)
/// and returns the absolute deadline (None = wait forever), or the error to reply.
pub fn parse_timeout(a: &[u8], now: Millis) -> Result<Option<Millis>, &'static [u8]> {
    let secs = parse_long_double(a).ok_or(errors::TIMEOUT_NOT_FLOAT)?;
    let ms = (secs * 1000.0).ceil();
    // Redis 7.4+: past i64 milliseconds is out of range, below zero negative (-inf too), and
    // so is a deadline that would not fit. (2^63 as f64 is the first value past i64::MAX.)
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if ms >= TWO_63 {
        return Err(errors::TIMEOUT_OUT_OF_RANGE);
    }
    if ms < 0.0 {
        return Err(errors::TIMEOUT_NEGATIVE);
    }
    deadline_after(ms as i64, now)
}

/// A blocking command's deadline `ms` after `now` (None: 0, wait for ever); Err when it
/// would not fit (Redis's "timeout is out of range").
pub fn deadline_after(ms: i64, now: Millis) -> Result<Option<Millis>, &'static [u8]> {
    match ms {
        0 => Ok(None),
        _ if ms > i64::MAX - now => Err(errors::TIMEOUT_OUT_OF_RANGE),
        _ => Ok(Some(now + ms)),
    }
}

/// `strtold` as Redis's `string2ld` uses it: no leading space, the whole string consumed, NaN
/// refused; decimal and hexadecimal forms, `inf`/`infinity`.
pub(crate) fn parse_long_double(a: &[u8]) -> Option<f64> {
    if a.is_empty() || a.len() > 5120 || a[0].is_ascii_whitespace() {
        return None;
    }
    let s = std::str::from_utf8(a).ok()?;
    let (neg, body) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if body.starts_with(['+', '-']) {
        return None;
    }
    let lower = body.to_ascii_lowercase();
    let v = if lower == "inf" || lower == "infinity" {
        f64::INFINITY
    } else if let Some(hex) = lower.strip_prefix("0x") {
        parse_hex_digits(hex)?
    } else {
        if !lower.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'-' | b'+')) {
            return None;
        }
        lower.parse::<f64>().ok()?
    };
    Some(if neg { -v } else { v })
}

/// Parsed `numkeys key [key ...] <side> [COUNT count]`, the tail of LMPOP/BLMPOP (side
/// LEFT|RIGHT) and ZMPOP/BZMPOP (side MIN|MAX).
pub(crate) struct MpopArgs<'a, S> {
    pub keys: &'a [&'a [u8]],
    pub side: S,
    /// 1 when COUNT is absent.
    pub count: usize,
}

/// Parses an MPOP tail starting at `args[numkeys_at]`, reading the side with `side`. Writes
/// Redis's error and returns None on bad input; the checks run in Redis's order (numkeys,
/// room for the keys and side, side, then options), which decides the error text.
pub(crate) fn parse_mpop<'a, S>(
    out: &mut Vec<u8>,
    args: &'a [&'a [u8]],
    numkeys_at: usize,
    side: impl Fn(&[u8]) -> Option<S>,
) -> Option<MpopArgs<'a, S>> {
    let numkeys = match parse_i64(args[numkeys_at]) {
        Some(n) if n > 0 => n as usize,
        _ => {
            reply::error(out, b"ERR numkeys should be greater than 0");
            return None;
        }
    };
    let side_at = numkeys_at.saturating_add(numkeys).saturating_add(1);
    let Some(side) = args.get(side_at).and_then(|a| side(a)) else {
        reply::error(out, errors::SYNTAX);
        return None;
    };
    let mut count: Option<usize> = None;
    let mut j = side_at + 1;
    while j < args.len() {
        // COUNT may be given once.
        if count.is_none() && eq_ic(args[j], b"count") && j + 1 < args.len() {
            match parse_i64(args[j + 1]) {
                Some(n) if n > 0 => count = Some(n as usize),
                _ => {
                    reply::error(out, b"ERR count should be greater than 0");
                    return None;
                }
            }
            j += 2;
        } else {
            reply::error(out, errors::SYNTAX);
            return None;
        }
    }
    Some(MpopArgs { keys: &args[numkeys_at + 1..side_at], side, count: count.unwrap_or(1) })
}

/// Parses the `[LIMIT limit]` options of SINTERCARD / ZINTERCARD (0, the default, means no
/// limit). Writes Redis's error and returns None on bad input.
pub(crate) fn parse_card_limit(out: &mut Vec<u8>, opts: &[&[u8]]) -> Option<usize> {
    let mut limit = 0usize;
    let mut j = 0;
    while j < opts.len() {
        if eq_ic(opts[j], b"limit") && j + 1 < opts.len() {
            match parse_i64(opts[j + 1]) {
                Some(n) if n >= 0 => limit = n as usize,
                _ => {
                    reply::error(out, b"ERR LIMIT can't be negative");
                    return None;
                }
            }
            j += 2;
        } else {
            reply::error(out, errors::SYNTAX);
            return None;
        }
    }
    Some(limit)
}

/// Formats a double as Redis 8 does in replies (ZSCORE, ZRANGE WITHSCORES ...): the shortest
/// digits Grisu2 finds (`0.1`, not 7.0's `0.10000000000000001`), `inf`/`-inf`, `-0`, and plain
/// integers within +-2^62 (see [`crate::dtoa`]). Checked against redis-server 8.2.3.
pub fn format_f64(v: f64) -> String {
    crate::dtoa::double_text(v)
}

/// A line's words by Redis's rules (sdssplitargs): blanks separate words; "double quotes"
/// take `\n \r \t \b \a \\ \"` and `\xHH`; 'single quotes' take only `\'`; a closing quote
/// must end the word. None: unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut words = Vec::new();
    let mut i = 0;
    let blank = |b: u8| matches!(b, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c);
    loop {
        while i < line.len() && blank(line[i]) {
            i += 1;
        }
        if i >= line.len() {
            return Some(words);
        }
        let mut word = Vec::new();
        let (mut dq, mut sq) = (false, false);
        loop {
            if dq {
                let &c = line.get(i)?;
                if c == b'\\' && line.get(i + 1) == Some(&b'x') {
                    let hex = |b: Option<&u8>| b.and_then(|&b| resp::hex_value(b));
                    if let (Some(h), Some(l)) = (hex(line.get(i + 2)), hex(line.get(i + 3))) {
                        word.push(h * 16 + l);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < line.len() {
                    // The escapes of a request's inline form, which the parser reads alike.
                    word.push(resp::unescape(line[i + 1]));
                    i += 2;
                } else if c == b'"' {
                    // The closing quote must be followed by a blank or the end.
                    if line.get(i + 1).is_some_and(|&n| !blank(n)) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    word.push(c);
                    i += 1;
                }
            } else if sq {
                let &c = line.get(i)?;
                if c == b'\\' && line.get(i + 1) == Some(&b'\'') {
                    word.push(b'\'');
                    i += 2;
                } else if c == b'\'' {
                    if line.get(i + 1).is_some_and(|&n| !blank(n)) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    word.push(c);
                    i += 1;
                }
            } else {
                match line.get(i) {
                    None => break,
                    Some(&c) if blank(c) || c == 0 => break,
                    Some(b'"') => dq = true,
                    Some(b'\'') => sq = true,
                    Some(&c) => word.push(c),
                }
                i += 1;
            }
        }
        words.push(word);
    }
}

/// ASCII case-insensitive equality, for option names.
#[inline]
pub fn eq_ic(a: &[u8], b: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// Redis's glob matcher (`stringmatchlen`): `*`, `?`, `[...]` with ranges and `^`, `\\`
/// escapes. Compiled to single-byte tokens and matched with one backtrack point per star, so the
/// cost is O(pattern x subject) whatever the pattern (a naive recursive matcher is exponential
/// on patterns like `*a*a*a*...b`, which any client can send to KEYS or SCAN).
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    Glob::new(pattern, nocase).matches(s)
}

/// A compiled glob pattern, for matching many subjects against one pattern.
pub struct Glob {
    toks: Vec<GlobTok>,
    nocase: bool,
    /// More than [`GLOB_MAX_STARS`] stars with pattern after them: Redis's matcher recurses
    /// once per such star and gives up past that depth, so the pattern matches nothing.
    too_deep: bool,
}

/// The deepest star nesting Redis's matcher follows (its `stringmatchlen` recursion limit).
const GLOB_MAX_STARS: usize = 1000;

enum GlobTok {
    Star,
    Any,
    Byte(u8),
    Class { negate: bool, items: Vec<ClassItem> },
}

enum ClassItem {
    /// An escaped byte inside a class: compared exactly, as Redis does.
    Exact(u8),
    Byte(u8),
    Range(u8, u8),
}

impl Glob {
    pub fn new(p: &[u8], nocase: bool) -> Glob {
        let mut toks = Vec::new();
        let mut i = 0;
        while i < p.len() {
            match p[i] {
                b'*' => {
                    if !matches!(toks.last(), Some(GlobTok::Star)) {
                        toks.push(GlobTok::Star);
                    }
                }
                b'?' => toks.push(GlobTok::Any),
                b'[' => {
                    i += 1;
                    let negate = i < p.len() && p[i] == b'^';
                    if negate {
                        i += 1;
                    }
                    let mut items = Vec::new();
                    // An unterminated class ends with the pattern.
                    while i < p.len() && p[i] != b']' {
                        if p[i] == b'\\' && i + 1 < p.len() {
                            items.push(ClassItem::Exact(p[i + 1]));
                            i += 2;
                        } else if i + 2 < p.len() && p[i + 1] == b'-' {
                            let (a, b) = (p[i], p[i + 2]);
                            items.push(ClassItem::Range(a.min(b), a.max(b)));
                            i += 3;
                        } else {
                            items.push(ClassItem::Byte(p[i]));
                            i += 1;
                        }
                    }
                    toks.push(GlobTok::Class { negate, items });
                }
                b'\\' if i + 1 < p.len() => {
                    i += 1;
                    toks.push(GlobTok::Byte(p[i]));
                }
                c => toks.push(GlobTok::Byte(c)),
            }
            i += 1;
        }
        let inner_stars = toks.iter().filter(|t| matches!(t, GlobTok::Star)).count()
            - usize::from(matches!(toks.last(), Some(GlobTok::Star)));
        Glob { toks, nocase, too_deep: inner_stars > GLOB_MAX_STARS }
    }

    fn fold(&self, c: u8) -> u8 {
        if self.nocase {
            c.to_ascii_lowercase()
        } else {
            c
        }
    }

    fn one(&self, t: &GlobTok, c: u8) -> bool {
        match t {
            GlobTok::Star => true,
            GlobTok::Any => true,
            GlobTok::Byte(b) => self.fold(*b) == self.fold(c),
            GlobTok::Class { negate, items } => {
                let hit = items.iter().any(|it| match *it {
                    ClassItem::Exact(b) => b == c,
                    ClassItem::Byte(b) => self.fold(b) == self.fold(c),
                    ClassItem::Range(a, b) => {
                        let (a, b, c) = (self.fold(a), self.fold(b), self.fold(c));
                        a.min(b) <= c && c <= a.max(b)
                    }
                });
                hit != *negate
            }
        }
    }

    /// True if the whole of `s` matches.
    pub fn matches(&self, s: &[u8]) -> bool {
        if self.too_deep {
            return false;
        }
        let toks = &self.toks;
        let (mut ti, mut si) = (0, 0);
        // The most recent star and the subject position it currently stands for.
        let mut backtrack: Option<(usize, usize)> = None;
        while si < s.len() {
            if ti < toks.len() {
                if let GlobTok::Star = toks[ti] {
                    backtrack = Some((ti, si));
                    ti += 1;
                    continue;
                }
                if self.one(&toks[ti], s[si]) {
                    ti += 1;
                    si += 1;
                    continue;
                }
            }
            // Let the last star absorb one more byte and retry from there. Earlier stars never
            // need revisiting: whatever they could absorb, the last one can too.
            match backtrack {
                Some((star, from)) => {
                    ti = star + 1;
                    si = from + 1;
                    backtrack = Some((star, from + 1));
                }
                None => return false,
            }
        }
        toks[ti..].iter().all(|t| matches!(t, GlobTok::Star))
    }
}

/// The destination database of a COPY (`COPY src dst [DB n] [REPLACE]`: the argument after the
/// DB token), as written; None without one or when it is not an integer.
pub fn copy_destination_db<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Option<i64> {
    let mut it = args.into_iter().skip(3);
    while let Some(a) = it.next() {
        if a.eq_ignore_ascii_case(b"db") {
            return it.next().and_then(parse_i64);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_format_like_redis() {
        assert_eq!(format_f64(3.0), "3");
        assert_eq!(format_f64(10.5), "10.5");
        assert_eq!(format_f64(f64::INFINITY), "inf");
        assert_eq!(format_f64(1e20), "1e+20");
        // Redis 8 prints Grisu2's shortest digits, not 7.0's %.17g.
        assert_eq!(format_f64(1.5e-7), "1.5e-7");
        assert_eq!(format_f64(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(format_f64(0.1), "0.1");
        assert_eq!(format_f64(-0.0), "-0");
        assert_eq!(format_f64(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_f64(1e16), "10000000000000000");
        assert_eq!(format_f64(1e17), "100000000000000000");
        assert_eq!(format_f64(-7.0), "-7");
        assert_eq!(format_f64(0.0001), "0.0001");
        assert_eq!(format_f64(12345678.9), "12345678.9");
        assert_eq!(format_f64(5e-324), "5e-324");
    }

    #[test]
    fn floats_parse_like_redis() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b""), None);
        assert_eq!(parse_f64(b"1e400"), None);
        assert_eq!(parse_f64(b"1e-400"), None);
        assert_eq!(parse_f64(b"0e5"), Some(0.0));
        assert_eq!(parse_f64(b"-0.0"), Some(-0.0));
        // strtod's hex floats, as ZADD accepts them.
        assert_eq!(parse_f64(b"0x10"), Some(16.0));
        assert_eq!(parse_f64(b"-0X1.8p1"), Some(-3.0));
        assert_eq!(parse_f64(b"0x"), None);
        assert_eq!(parse_f64(b"0x1p"), None);
        assert_eq!(parse_f64(b"0xg"), None);
    }

    #[test]
    fn globs() {
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h*llo", b"heeeello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"h[a-b]llo", b"hbllo", false));
        assert!(glob_match(b"*", b"", false));
        assert!(!glob_match(b"a\\*", b"ab", false));
        assert!(glob_match(b"a\\*", b"a*", false));
        assert!(glob_match(b"H*LLO", b"hello", true));
        assert!(!glob_match(b"H*LLO", b"hello", false));
        assert!(glob_match(b"[\\]]", b"]", false));
        assert!(glob_match(b"a[bc", b"ac", false));
        assert!(glob_match(b"*?", b"x", false));
        assert!(!glob_match(b"?*?", b"x", false));
        // Pathological for a backtracking matcher (exponential there; linear here).
        let pattern = b"*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b".to_vec();
        let subject = vec![b'a'; 5000];
        assert!(!glob_match(&pattern, &subject, false));
    }

    /// Redis's matcher follows at most 1000 nested stars: a pattern with more stars that have
    /// pattern after them matches nothing (a trailing star and repeated stars do not count).
    #[test]
    fn globs_past_a_thousand_stars_match_nothing() {
        let subject = vec![b'a'; 2000];
        let stars = |n: usize, tail: &str| format!("{}{tail}", "*a".repeat(n)).into_bytes();
        assert!(glob_match(&stars(1000, ""), &subject, false));
        assert!(glob_match(&stars(1000, "*"), &subject, false));
        assert!(glob_match(&stars(1000, "**"), &subject, false));
        assert!(!glob_match(&stars(1001, ""), &subject, false));
        assert!(!glob_match(&stars(1001, "*"), &subject, false));
        let doubled = format!("{}a", "**a".repeat(1000)).into_bytes();
        assert!(glob_match(&doubled, &subject, false), "** is one star");
        // Redis's own regression case (KEYS over a 50,000-byte key).
        assert!(!glob_match(&b"*?".repeat(50_000), &vec![b'a'; 50_000], false));
    }

    /// The shared MPOP / LIMIT / timeout parsers, through the commands that use them; every
    /// reply was checked against redis-server 7.0.15.
    #[test]
    fn shared_option_parsers_through_commands() {
        let mut e = crate::Engine::default();
        let mut run = |cmd: &str| {
            let args: Vec<&[u8]> = cmd.split(' ').map(|a| a.as_bytes()).collect();
            let mut out = Vec::new();
            e.run(&args, 1_000, &mut out);
            String::from_utf8(out).unwrap()
        };
        run("RPUSH l a b c");
        run("ZADD z 1 a 2 b");
        run("SADD s x");
        let cases = [
            ("LMPOP 0 l LEFT", "-ERR numkeys should be greater than 0\r\n"),
            ("LMPOP 2 l LEFT", "-ERR syntax error\r\n"),
            ("LMPOP 1 l UP", "-ERR syntax error\r\n"),
            ("LMPOP 1 l LEFT COUNT 0", "-ERR count should be greater than 0\r\n"),
            ("LMPOP 1 l LEFT COUNT 1 COUNT 1", "-ERR syntax error\r\n"),
            ("LMPOP 1 l LEFT foo", "-ERR syntax error\r\n"),
            ("ZMPOP 1 z MIN COUNT -1", "-ERR count should be greater than 0\r\n"),
            ("ZMPOP 3 z MIN", "-ERR syntax error\r\n"),
            ("ZMPOP 1 z MIDDLE", "-ERR syntax error\r\n"),
            ("BLPOP l 1e400", "-ERR timeout is out of range\r\n"),
            ("BLPOP l 9223372036854775", "-ERR timeout is out of range\r\n"),
            ("BLPOP l -0x1p9999", "-ERR timeout is negative\r\n"),
            ("BLPOP l 0x7FFFFFFFFFFFFF", "-ERR timeout is out of range\r\n"),
            ("BLPOP l 0x", "-ERR timeout is not a float or out of range\r\n"),
            ("SINTERCARD 1 s LIMIT -1", "-ERR LIMIT can't be negative\r\n"),
            ("SINTERCARD 1 s LIMIT", "-ERR syntax error\r\n"),
            ("ZINTERCARD 1 z LIMIT x", "-ERR LIMIT can't be negative\r\n"),
            ("ZINTERCARD 1 z foo", "-ERR syntax error\r\n"),
            ("ZINTERCARD 1 z LIMIT 1", ":1\r\n"),
            ("LMPOP 1 l RIGHT COUNT 2", "*2\r\n$1\r\nl\r\n*2\r\n$1\r\nc\r\n$1\r\nb\r\n"),
            ("ZMPOP 1 z MAX", "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"),
            // A hex-float timeout is read: the list is served at once.
            ("BLMPOP 0x1p-3 1 l LEFT", "*2\r\n$1\r\nl\r\n*1\r\n$1\r\na\r\n"),
        ];
        for (cmd, want) in cases {
            assert_eq!(run(cmd), want, "{cmd}");
        }
        // 2^-3 s is 125 ms after now.
        assert_eq!(parse_timeout(b"0x1p-3", 1_000), Ok(Some(1_125)));
        assert_eq!(parse_timeout(b"0", 1_000), Ok(None));
        assert_eq!(parse_long_double(b"-0x1.8p1"), Some(-3.0));
        assert_eq!(parse_long_double(b"0x.8"), Some(0.5));
        assert_eq!(parse_long_double(b"0x1p"), None);
    }
}
