//! Reply writers: each appends exactly one complete RESP2 value to `out`.
//!
//! Handlers write replies straight into the connection's output buffer, so there is no
//! intermediate reply tree on the hot path.

/// `+OK\r\n`
#[inline]
pub fn ok(out: &mut Vec<u8>) {
    out.extend_from_slice(b"+OK\r\n");
}

/// `+<s>\r\n`. `s` must not contain CR or LF.
#[inline]
pub fn simple(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'+');
    out.extend_from_slice(s);
    out.extend_from_slice(b"\r\n");
}

/// `-<msg>\r\n`. `msg` is the whole error text including its code, e.g.
/// `ERR syntax error` or `WRONGTYPE Operation against ...`. CR and LF inside `msg` are replaced
/// by spaces, as Redis does, so an error can never break the stream.
pub fn error(out: &mut Vec<u8>, msg: &[u8]) {
    out.push(b'-');
    out.extend(msg.iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
    out.extend_from_slice(b"\r\n");
}

/// `:<n>\r\n`
#[inline]
pub fn integer(out: &mut Vec<u8>, n: i64) {
    out.push(b':');
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `$<len>\r\n<bytes>\r\n`
#[inline]
pub fn bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'$');
    out.extend_from_slice(itoa::Buffer::new().format(bytes.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// A bulk string holding the decimal form of `n` (how Redis returns integer-encoded strings).
#[inline]
pub fn bulk_int(out: &mut Vec<u8>, n: i64) {
    bulk(out, itoa::Buffer::new().format(n).as_bytes());
}

/// `$-1\r\n`: the RESP2 null bulk string.
#[inline]
pub fn null_bulk(out: &mut Vec<u8>) {
    out.extend_from_slice(b"$-1\r\n");
}

/// `*<n>\r\n`: the header of an array; the caller then writes `n` values.
#[inline]
pub fn array_len(out: &mut Vec<u8>, n: usize) {
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `*-1\r\n`: the RESP2 null array.
#[inline]
pub fn null_array(out: &mut Vec<u8>) {
    out.extend_from_slice(b"*-1\r\n");
}

/// A RESP2 array of bulk strings, e.g. a canonical mutation `SET key value`.
pub fn bulk_array<A: AsRef<[u8]>>(out: &mut Vec<u8>, items: &[A]) {
    array_len(out, items.len());
    for item in items {
        bulk(out, item.as_ref());
    }
}

/// Writes the position in `out` where a deferred array length will go and returns a marker;
/// call [`finish_deferred_len`] when the element count is known. Used by commands that do not
/// know their reply length up front (SCAN, KEYS ...). The header is written with a fixed-width
/// placeholder and compacted afterwards.
pub fn deferred_array_len(out: &mut Vec<u8>) -> usize {
    let at = out.len();
    out.extend_from_slice(b"*00000000000000000000\r\n");
    at
}

/// Completes a header begun with [`deferred_array_len`].
pub fn finish_deferred_len(out: &mut Vec<u8>, marker: usize, n: usize) {
    let mut header = Vec::with_capacity(24);
    array_len(&mut header, n);
    let placeholder = b"*00000000000000000000\r\n".len();
    out.splice(marker..marker + placeholder, header);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writers_produce_resp2() {
        let mut out = Vec::new();
        ok(&mut out);
        integer(&mut out, -42);
        bulk(&mut out, b"a\r\nb");
        null_bulk(&mut out);
        error(&mut out, b"ERR bad\r\nthing");
        let m = deferred_array_len(&mut out);
        bulk_int(&mut out, 7);
        finish_deferred_len(&mut out, m, 1);
        assert_eq!(
            out,
            b"+OK\r\n:-42\r\n$4\r\na\r\nb\r\n$-1\r\n-ERR bad  thing\r\n*1\r\n$1\r\n7\r\n".to_vec()
        );
    }
}
