//! LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN], as Redis 7.0 computes it.
//!
//! The classic dynamic-programming table of LCS lengths over the two strings' bytes (a
//! missing key is the empty string), walked back from the end to build the subsequence and
//! its matching ranges. The walk's tie rule (step in the second string unless the first
//! gives a strictly longer LCS) decides which of several equally long subsequences is
//! returned; it is Redis's, so the bytes and ranges are the same. The table is refused, as
//! Redis refuses it, when it would need more than proto-max-bulk-len (512 MiB) of memory.
//!
//! IDX replies a map `{matches: [[[a_start, a_end], [b_start, b_end], (len)]...], len: n}`:
//! a RESP3 map, or the flat four-element array RESP2 gives for a map. A read: emits nothing.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::commands::string::MAX_STRING;
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{eq_ic, parse_i64};
use resp::reply;
use store::ValueRef;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec("lcs", -3, Flags::READONLY, (1, 2, 1), "string", "Finds the longest common substring.", Handler::Data(lcs)),
];

const NOT_STRINGS: &[u8] = b"ERR The specified keys must contain string values";

fn cstr(a: &[u8]) -> &[u8] {
    a.iter().position(|&b| b == 0).map_or(a, |n| &a[..n])
}

/// The string at `key` (empty if missing); Err if another type.
fn string_of(c: &mut Ctx, key: &[u8]) -> Result<Vec<u8>, ()> {
    match c.read(key) {
        None => Ok(Vec::new()),
        Some(ValueRef::Str(s)) => Ok(s.to_vec()),
        Some(_) => Err(()),
    }
}

/// One matching range: (a_start, a_end, b_start, b_end), inclusive.
type Range = (u32, u32, u32, u32);

/// The subsequence (empty unless asked for), its ranges and its length.
type Lcs = (Vec<u8>, Vec<Range>, u32);

/// The LCS of `a` and `b` and its ranges (longest-suffix first, as Redis emits them), or the
/// error text when the table would be too large.
fn compute(a: &[u8], b: &[u8], want_lcs: bool) -> Result<Lcs, &'static [u8]> {
    if a.len() as u64 >= u64::from(u32::MAX) - 1 || b.len() as u64 >= u64::from(u32::MAX) - 1 {
        return Err(b"ERR String too long for LCS");
    }
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u64 + 1) * (blen as u64 + 1);
    if cells.checked_mul(4).is_none_or(|bytes| bytes > MAX_STRING) {
        return Err(b"ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
    }
    let w = blen + 1;
    let mut t = vec![0u32; cells as usize];
    for i in 1..=alen {
        for j in 1..=blen {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let total = t[alen * w + blen];
    let mut result = vec![0u8; if want_lcs { total as usize } else { 0 }];
    let mut ranges = Vec::new();
    if !want_lcs {
        return Ok((result, ranges, total));
    }
    let alen32 = alen as u32;
    // `alen` in `ars` means "no range open".
    let (mut ars, mut are, mut brs, mut bre) = (alen32, 0u32, 0u32, 0u32);
    let (mut i, mut j, mut idx) = (alen, blen, total as usize);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            let (ci, cj) = ((i - 1) as u32, (j - 1) as u32);
            if ars == alen32 {
                (ars, are, brs, bre) = (ci, ci, cj, cj);
            } else if ars == i as u32 && brs == j as u32 {
                ars -= 1;
                brs -= 1;
            } else {
                emit = true;
            }
            if ars == 0 || brs == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if ars != alen32 {
                emit = true;
            }
        }
        if emit {
            ranges.push((ars, are, brs, bre));
            ars = alen32;
        }
    }
    Ok((result, ranges, total))
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]
fn lcs(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let a = string_of(c, args[1]);
    let b = string_of(c, args[2]);
    let (Ok(a), Ok(b)) = (a, b) else { return reply::error(out, NOT_STRINGS) };
    let (mut getlen, mut getidx, mut withmatchlen) = (false, false, false);
    let mut minmatchlen: i64 = 0;
    let mut j = 3;
    while j < args.len() {
        let opt = cstr(args[j]);
        let more = args.len() - 1 - j;
        if eq_ic(opt, b"idx") {
            getidx = true;
        } else if eq_ic(opt, b"len") {
            getlen = true;
        } else if eq_ic(opt, b"withmatchlen") {
            withmatchlen = true;
        } else if eq_ic(opt, b"minmatchlen") && more > 0 {
            match parse_i64(args[j + 1]) {
                Some(n) => minmatchlen = n.max(0),
                None => return reply::error(out, errors::NOT_INTEGER),
            }
            j += 1;
        } else {
            return reply::error(out, errors::SYNTAX);
        }
        j += 1;
    }
    if getlen && getidx {
        return reply::error(out, b"ERR If you want both the length and indexes, please just use IDX.");
    }
    let (result, ranges, total) = match compute(&a, &b, getidx || !getlen) {
        Ok(r) => r,
        Err(e) => return reply::error(out, e),
    };
    if getidx {
        reply::map_len(out, c.proto, 2);
        reply::bulk(out, b"matches");
        let kept: Vec<&Range> =
            ranges.iter().filter(|r| minmatchlen == 0 || i64::from(r.1 - r.0 + 1) >= minmatchlen).collect();
        reply::array_len(out, kept.len());
        for &&(ars, are, brs, bre) in &kept {
            reply::array_len(out, 2 + usize::from(withmatchlen));
            reply::array_len(out, 2);
            reply::integer(out, i64::from(ars));
            reply::integer(out, i64::from(are));
            reply::array_len(out, 2);
            reply::integer(out, i64::from(brs));
            reply::integer(out, i64::from(bre));
            if withmatchlen {
                reply::integer(out, i64::from(are - ars + 1));
            }
        }
        reply::bulk(out, b"len");
        reply::integer(out, i64::from(total));
    } else if getlen {
        reply::integer(out, i64::from(total));
    } else {
        reply::bulk(out, &result);
    }
}

#[cfg(test)]
mod tests {
    use super::compute;

    #[test]
    fn redis_documentation_example() {
        let (s, ranges, n) = compute(b"ohmytext", b"mynewtext", true).unwrap();
        assert_eq!((s.as_slice(), n), (&b"mytext"[..], 6));
        assert_eq!(ranges, vec![(4, 7, 5, 8), (2, 3, 0, 1)]);
    }
}
