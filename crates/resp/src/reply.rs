//! Reply writers: each appends exactly one complete value to `out`.
//!
//! Handlers write replies straight into the connection's output buffer, so there is no
//! intermediate reply tree on the hot path.
//!
//! The writers without a [`Proto`] argument produce forms that are the same in RESP2 and RESP3
//! (simple strings, errors, integers, bulk strings, arrays). The ones that take a `Proto` write
//! a RESP3 type (null, map, set, double, verbatim string, push) on a RESP3 connection and
//! Redis's RESP2 fallback otherwise, so a handler states the reply's type once and stays
//! correct for both protocols. Canonical mutations and anything replicated are always RESP2:
//! they are built with the protocol-free writers only.

/// The protocol a connection speaks (chosen with HELLO; RESP2 until then).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Proto {
    #[default]
    Resp2,
    Resp3,
}

impl Proto {
    #[inline]
    pub fn is_resp3(self) -> bool {
        self == Proto::Resp3
    }

    /// The version number HELLO and CLIENT LIST's `resp=` print.
    pub fn version(self) -> i64 {
        match self {
            Proto::Resp2 => 2,
            Proto::Resp3 => 3,
        }
    }
}

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
    if bytes.len() < 10 {
        // The usual short element (LRANGE, SMEMBERS ...): its header is one digit, and the
        // room for all of it is checked once.
        out.reserve(bytes.len() + 6);
        out.extend_from_slice(&[b'$', b'0' + bytes.len() as u8, b'\r', b'\n']);
        out.extend_from_slice(bytes);
        out.extend_from_slice(b"\r\n");
        return;
    }
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

/// A missing string (GET of a missing key, a missing field in HMGET ...): RESP3 null `_`,
/// RESP2 null bulk string `$-1`.
#[inline]
pub fn null_bulk(out: &mut Vec<u8>, proto: Proto) {
    out.extend_from_slice(if proto.is_resp3() { b"_\r\n" } else { b"$-1\r\n" });
}

/// `*<n>\r\n`: the header of an array; the caller then writes `n` values.
#[inline]
pub fn array_len(out: &mut Vec<u8>, n: usize) {
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// A missing array (a blocking pop that timed out, an EXEC whose WATCH failed ...): RESP3
/// null `_`, RESP2 null array `*-1`.
#[inline]
pub fn null_array(out: &mut Vec<u8>, proto: Proto) {
    out.extend_from_slice(if proto.is_resp3() { b"_\r\n" } else { b"*-1\r\n" });
}

fn header(out: &mut Vec<u8>, tag: u8, n: usize) {
    out.push(tag);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// The header of a map of `n` key/value pairs; the caller then writes `2n` values, key then
/// value. RESP3 `%n`; RESP2 a flat array `*2n` of the same values.
#[inline]
pub fn map_len(out: &mut Vec<u8>, proto: Proto, n: usize) {
    if proto.is_resp3() {
        header(out, b'%', n)
    } else {
        header(out, b'*', 2 * n)
    }
}

/// The header of an array of `n` pairs (ZRANGE .. WITHSCORES, HRANDFIELD .. WITHVALUES ...):
/// RESP3 nests each pair, `*n` of `*2` arrays; RESP2 flattens them, `*2n`. The caller writes
/// [`pair`] before each pair's two values.
#[inline]
pub fn pairs_len(out: &mut Vec<u8>, proto: Proto, n: usize) {
    header(out, b'*', if proto.is_resp3() { n } else { 2 * n })
}

/// Opens one pair of an array begun with [`pairs_len`]: `*2` in RESP3, nothing in RESP2.
#[inline]
pub fn pair(out: &mut Vec<u8>, proto: Proto) {
    if proto.is_resp3() {
        out.extend_from_slice(b"*2\r\n");
    }
}

/// The header of a set of `n` members (unordered, unique). RESP3 `~n`; RESP2 `*n`.
#[inline]
pub fn set_len(out: &mut Vec<u8>, proto: Proto, n: usize) {
    header(out, if proto.is_resp3() { b'~' } else { b'*' }, n)
}

/// The header of an out-of-band push message of `n` values. RESP3 `>n`; RESP2 `*n` (how
/// RESP2 delivers pub/sub messages).
#[inline]
pub fn push_len(out: &mut Vec<u8>, proto: Proto, n: usize) {
    header(out, if proto.is_resp3() { b'>' } else { b'*' }, n)
}

/// A double given as its reply text (`3`, `1.5`, `inf`, `-inf`; the caller formats it the way
/// Redis does). RESP3 `,<text>`; RESP2 a bulk string of the same text.
#[inline]
pub fn double(out: &mut Vec<u8>, proto: Proto, text: &[u8]) {
    if proto.is_resp3() {
        out.push(b',');
        out.extend_from_slice(text);
        out.extend_from_slice(b"\r\n");
    } else {
        bulk(out, text);
    }
}

/// A boolean. RESP3 `#t`/`#f`; RESP2 the integer 1 or 0.
#[inline]
pub fn boolean(out: &mut Vec<u8>, proto: Proto, b: bool) {
    if proto.is_resp3() {
        out.extend_from_slice(if b { b"#t\r\n" } else { b"#f\r\n" });
    } else {
        integer(out, b as i64);
    }
}

/// Human-readable text (INFO, CLIENT LIST ...) with its 3-byte format, `txt` or `mkd`. RESP3
/// verbatim string `=<len>\r\n<fmt>:<text>\r\n`; RESP2 a bulk string of the text alone.
pub fn verbatim(out: &mut Vec<u8>, proto: Proto, format: &[u8; 3], text: &[u8]) {
    if proto.is_resp3() {
        header(out, b'=', text.len() + 4);
        out.extend_from_slice(format);
        out.push(b':');
        out.extend_from_slice(text);
        out.extend_from_slice(b"\r\n");
    } else {
        bulk(out, text);
    }
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

/// Completes a header begun with [`deferred_array_len`] as an array of `n` values.
pub fn finish_deferred_len(out: &mut Vec<u8>, marker: usize, n: usize) {
    let mut header = Vec::with_capacity(24);
    array_len(&mut header, n);
    finish_deferred(out, marker, header);
}

/// Completes a header begun with [`deferred_array_len`] as `n` key/value entries that RESP3
/// sends as a map (`%n`) and RESP2 as an array of `n` two-element arrays (XREAD's reply: the
/// caller writes an array header of 2 before each entry in RESP2 only).
pub fn finish_deferred_keyed_len(out: &mut Vec<u8>, marker: usize, proto: Proto, n: usize) {
    let mut header_bytes = Vec::with_capacity(24);
    header(&mut header_bytes, if proto.is_resp3() { b'%' } else { b'*' }, n);
    finish_deferred(out, marker, header_bytes);
}

/// Completes a header begun with [`deferred_array_len`] as a set of `n` members (see
/// [`set_len`]).
pub fn finish_deferred_set_len(out: &mut Vec<u8>, marker: usize, proto: Proto, n: usize) {
    let mut header = Vec::with_capacity(24);
    set_len(&mut header, proto, n);
    finish_deferred(out, marker, header);
}

fn finish_deferred(out: &mut Vec<u8>, marker: usize, header: Vec<u8>) {
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
        null_bulk(&mut out, Proto::Resp2);
        error(&mut out, b"ERR bad\r\nthing");
        let m = deferred_array_len(&mut out);
        bulk_int(&mut out, 7);
        finish_deferred_len(&mut out, m, 1);
        assert_eq!(
            out,
            b"+OK\r\n:-42\r\n$4\r\na\r\nb\r\n$-1\r\n-ERR bad  thing\r\n*1\r\n$1\r\n7\r\n".to_vec()
        );
    }

    #[test]
    fn bulk_headers_at_every_length_around_the_one_digit_path() {
        for n in [0usize, 1, 9, 10, 11, 99, 100, 12345] {
            let v = vec![b'x'; n];
            let mut out = Vec::new();
            bulk(&mut out, &v);
            let mut want = format!("${n}\r\n").into_bytes();
            want.extend_from_slice(&v);
            want.extend_from_slice(b"\r\n");
            assert_eq!(out, want, "length {n}");
        }
    }

    #[test]
    fn typed_writers_fall_back_to_resp2() {
        let both = |f: &dyn Fn(&mut Vec<u8>, Proto)| {
            let (mut two, mut three) = (Vec::new(), Vec::new());
            f(&mut two, Proto::Resp2);
            f(&mut three, Proto::Resp3);
            (String::from_utf8(two).unwrap(), String::from_utf8(three).unwrap())
        };
        assert_eq!(both(&|o, p| null_bulk(o, p)), ("$-1\r\n".into(), "_\r\n".into()));
        assert_eq!(both(&|o, p| null_array(o, p)), ("*-1\r\n".into(), "_\r\n".into()));
        assert_eq!(both(&|o, p| map_len(o, p, 3)), ("*6\r\n".into(), "%3\r\n".into()));
        assert_eq!(both(&|o, p| map_len(o, p, 0)), ("*0\r\n".into(), "%0\r\n".into()));
        assert_eq!(
            both(&|o, p| {
                pairs_len(o, p, 1);
                pair(o, p);
                bulk(o, b"m");
                double(o, p, b"1.5");
            }),
            ("*2\r\n$1\r\nm\r\n$3\r\n1.5\r\n".into(), "*1\r\n*2\r\n$1\r\nm\r\n,1.5\r\n".into())
        );
        assert_eq!(both(&|o, p| set_len(o, p, 2)), ("*2\r\n".into(), "~2\r\n".into()));
        assert_eq!(both(&|o, p| push_len(o, p, 3)), ("*3\r\n".into(), ">3\r\n".into()));
        assert_eq!(both(&|o, p| double(o, p, b"-inf")), ("$4\r\n-inf\r\n".into(), ",-inf\r\n".into()));
        assert_eq!(both(&|o, p| boolean(o, p, true)), (":1\r\n".into(), "#t\r\n".into()));
        assert_eq!(both(&|o, p| boolean(o, p, false)), (":0\r\n".into(), "#f\r\n".into()));
        assert_eq!(
            both(&|o, p| verbatim(o, p, b"txt", b"a\r\nb")),
            ("$4\r\na\r\nb\r\n".into(), "=8\r\ntxt:a\r\nb\r\n".into())
        );
        assert_eq!(
            both(&|o, p| {
                let m = deferred_array_len(o);
                bulk(o, b"x");
                finish_deferred_set_len(o, m, p, 1);
            }),
            ("*1\r\n$1\r\nx\r\n".into(), "~1\r\n$1\r\nx\r\n".into())
        );
        assert_eq!(Proto::default(), Proto::Resp2);
        assert_eq!((Proto::Resp2.version(), Proto::Resp3.version()), (2, 3));
    }
}
