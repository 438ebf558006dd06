//! String encoding helpers.
//!
//! A string whose bytes are the canonical decimal form of an i64 (no sign on zero, no leading
//! zeros, no '+', at most 20 bytes) is stored as the integer itself: `SET k 12345` keeps 8 bytes
//! and INCR never parses text. Any other byte string is stored as is.

/// Parses `s` as Redis's `string2ll` does: the canonical decimal form of an i64, nothing else.
pub fn parse_canonical_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = if s[0] == b'-' { (true, &s[1..]) } else { (false, s) };
    if digits.is_empty() || digits[0] == b'0' {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let digit = (d - b'0') as i64;
        v = v.checked_mul(10)?;
        v = if neg { v.checked_sub(digit)? } else { v.checked_add(digit)? };
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_integers_only() {
        assert_eq!(parse_canonical_i64(b"0"), Some(0));
        assert_eq!(parse_canonical_i64(b"-12"), Some(-12));
        assert_eq!(parse_canonical_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_canonical_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [&b""[..], b"-0", b"01", b"+1", b" 1", b"1 ", b"9223372036854775808", b"-", b"1a"] {
            assert_eq!(parse_canonical_i64(bad), None, "{:?}", bad);
        }
    }
}
