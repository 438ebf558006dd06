//! Owned RESP2 and RESP3 values, for reading replies and mutation streams back (tests,
//! replication). Not on the request hot path: requests go through [`crate::RequestParser`].
//! Mutation streams are RESP2 only; the RESP3 variants exist to read replies a RESP3
//! connection gets.

use crate::ProtocolError;

/// One RESP2 or RESP3 value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Integer(i64),
    /// `None` is the null bulk string `$-1`.
    Bulk(Option<Vec<u8>>),
    /// `None` is the null array `*-1`.
    Array(Option<Vec<Frame>>),
    /// RESP3 `_`.
    Null,
    /// RESP3 `,`: kept as its text, so a comparison is exact to the byte.
    Double(Vec<u8>),
    /// RESP3 `#t` / `#f`.
    Boolean(bool),
    /// RESP3 `(`, as its decimal text.
    BigNumber(Vec<u8>),
    /// RESP3 `=`: the 3-byte format (`txt`, `mkd`) and the text.
    Verbatim([u8; 3], Vec<u8>),
    /// RESP3 `%`: key/value pairs in wire order.
    Map(Vec<(Frame, Frame)>),
    /// RESP3 `~`: members in wire order.
    Set(Vec<Frame>),
    /// RESP3 `>`: an out-of-band message.
    Push(Vec<Frame>),
}

/// Appends the encoding of `f` to `out`.
pub fn encode_frame(out: &mut Vec<u8>, f: &Frame) {
    use crate::reply::{self, Proto};
    match f {
        Frame::Simple(s) => reply::simple(out, s),
        Frame::Error(e) => reply::error(out, e),
        Frame::Integer(i) => reply::integer(out, *i),
        Frame::Bulk(Some(b)) => reply::bulk(out, b),
        Frame::Bulk(None) => reply::null_bulk(out, Proto::Resp2),
        Frame::Array(None) => reply::null_array(out, Proto::Resp2),
        Frame::Array(Some(items)) => {
            reply::array_len(out, items.len());
            items.iter().for_each(|i| encode_frame(out, i));
        }
        Frame::Null => reply::null_bulk(out, Proto::Resp3),
        Frame::Double(text) => reply::double(out, Proto::Resp3, text),
        Frame::Boolean(b) => reply::boolean(out, Proto::Resp3, *b),
        Frame::BigNumber(text) => {
            out.push(b'(');
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
        Frame::Verbatim(format, text) => reply::verbatim(out, Proto::Resp3, format, text),
        Frame::Map(pairs) => {
            reply::map_len(out, Proto::Resp3, pairs.len());
            for (k, v) in pairs {
                encode_frame(out, k);
                encode_frame(out, v);
            }
        }
        Frame::Set(items) => {
            reply::set_len(out, Proto::Resp3, items.len());
            items.iter().for_each(|i| encode_frame(out, i));
        }
        Frame::Push(items) => {
            reply::push_len(out, Proto::Resp3, items.len());
            items.iter().for_each(|i| encode_frame(out, i));
        }
    }
}

/// Nesting deeper than this is refused rather than risking the stack.
const MAX_DEPTH: usize = 128;

/// Decodes one value from the front of `buf`: `Ok(None)` if `buf` holds only part of it,
/// else the value and the number of bytes it used.
pub fn decode_frame(buf: &[u8]) -> Result<Option<(Frame, usize)>, ProtocolError> {
    decode_at(buf, 0, 0)
}

fn line(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let rest = buf.get(at..)?;
    let nl = rest.windows(2).position(|w| w == b"\r\n")?;
    Some((&rest[..nl], at + nl + 2))
}

fn int(s: &[u8]) -> Result<i64, ProtocolError> {
    std::str::from_utf8(s)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| ProtocolError(format!("invalid integer '{}'", String::from_utf8_lossy(s))))
}

fn decode_at(buf: &[u8], at: usize, depth: usize) -> Result<Option<(Frame, usize)>, ProtocolError> {
    if depth > MAX_DEPTH {
        return Err(ProtocolError("nesting too deep".into()));
    }
    let Some(&tag) = buf.get(at) else { return Ok(None) };
    let Some((body, next)) = line(buf, at + 1) else { return Ok(None) };
    let frame = match tag {
        b'+' => Frame::Simple(body.to_vec()),
        b'-' => Frame::Error(body.to_vec()),
        b':' => Frame::Integer(int(body)?),
        b'_' if body.is_empty() => Frame::Null,
        b',' => Frame::Double(body.to_vec()),
        b'#' if body == b"t" || body == b"f" => Frame::Boolean(body == b"t"),
        b'(' => Frame::BigNumber(body.to_vec()),
        b'$' | b'=' => {
            let n = int(body)?;
            if n < 0 && tag == b'$' {
                return Ok(Some((Frame::Bulk(None), next)));
            }
            let n = usize::try_from(n).map_err(|_| ProtocolError("invalid length".into()))?;
            let end = next.checked_add(n).ok_or_else(|| ProtocolError("invalid bulk length".into()))?;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(ProtocolError("bulk string not terminated by CRLF".into()));
            }
            let data = &buf[next..end];
            let frame = if tag == b'$' {
                Frame::Bulk(Some(data.to_vec()))
            } else {
                // A verbatim string is `fmt:` and the text: at least the 4 bytes of the prefix.
                if data.len() < 4 || data[3] != b':' {
                    return Err(ProtocolError("verbatim string without a format".into()));
                }
                Frame::Verbatim([data[0], data[1], data[2]], data[4..].to_vec())
            };
            return Ok(Some((frame, end + 2)));
        }
        b'*' | b'~' | b'>' | b'%' => {
            let n = int(body)?;
            if n < 0 && tag == b'*' {
                return Ok(Some((Frame::Array(None), next)));
            }
            let n = usize::try_from(n).map_err(|_| ProtocolError("invalid length".into()))?;
            // A map of n pairs is 2n values.
            let values = if tag == b'%' { n.checked_mul(2) } else { Some(n) };
            let values = values.ok_or_else(|| ProtocolError("invalid length".into()))?;
            // Never pre-size from the peer's number beyond what the buffer could hold.
            let mut items = Vec::with_capacity(values.min(buf.len() / 3 + 1));
            let mut pos = next;
            for _ in 0..values {
                match decode_at(buf, pos, depth + 1)? {
                    None => return Ok(None),
                    Some((f, p)) => {
                        items.push(f);
                        pos = p;
                    }
                }
            }
            let frame = match tag {
                b'*' => Frame::Array(Some(items)),
                b'~' => Frame::Set(items),
                b'>' => Frame::Push(items),
                _ => {
                    let mut it = items.into_iter();
                    let mut pairs = Vec::with_capacity(n);
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        pairs.push((k, v));
                    }
                    Frame::Map(pairs)
                }
            };
            return Ok(Some((frame, pos)));
        }
        other => return Err(ProtocolError(format!("unexpected type byte '{}'", other as char))),
    };
    Ok(Some((frame, next)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_nested_and_partial() {
        let mut out = Vec::new();
        let f = Frame::Array(Some(vec![
            Frame::Bulk(Some(b"a\r\nb".to_vec())),
            Frame::Integer(-3),
            Frame::Array(None),
            Frame::Bulk(None),
            Frame::Simple(b"OK".to_vec()),
            Frame::Error(b"ERR x".to_vec()),
        ]));
        encode_frame(&mut out, &f);
        assert_eq!(decode_frame(&out).unwrap(), Some((f, out.len())));
        for cut in 0..out.len() {
            assert_eq!(decode_frame(&out[..cut]).unwrap(), None, "cut at {cut}");
        }
    }

    #[test]
    fn decodes_resp3_types() {
        let f = Frame::Map(vec![
            (Frame::Simple(b"a".to_vec()), Frame::Set(vec![Frame::Bulk(Some(b"x".to_vec())), Frame::Null])),
            (Frame::Double(b"-inf".to_vec()), Frame::Boolean(false)),
            (Frame::BigNumber(b"123".to_vec()), Frame::Verbatim(*b"txt", b"hi\r\n".to_vec())),
            (Frame::Integer(1), Frame::Push(vec![Frame::Boolean(true)])),
        ]);
        let mut out = Vec::new();
        encode_frame(&mut out, &f);
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "%4\r\n+a\r\n~2\r\n$1\r\nx\r\n_\r\n,-inf\r\n#f\r\n(123\r\n=8\r\ntxt:hi\r\n\r\n:1\r\n>1\r\n#t\r\n"
        );
        assert_eq!(decode_frame(&out).unwrap(), Some((f, out.len())));
        for cut in 0..out.len() {
            assert_eq!(decode_frame(&out[..cut]).unwrap(), None, "cut at {cut}");
        }
        assert!(decode_frame(b"=2\r\nab\r\n").is_err());
        assert!(decode_frame(b"~-1\r\n").is_err());
    }
}
