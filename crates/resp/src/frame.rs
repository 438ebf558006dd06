//! Owned RESP2 values, for reading replies and mutation streams back (tests, replication).
//! Not on the request hot path: requests go through [`crate::RequestParser`].

use crate::ProtocolError;

/// One RESP2 value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Integer(i64),
    /// `None` is the null bulk string `$-1`.
    Bulk(Option<Vec<u8>>),
    /// `None` is the null array `*-1`.
    Array(Option<Vec<Frame>>),
}

/// Appends the encoding of `f` to `out`.
pub fn encode_frame(out: &mut Vec<u8>, f: &Frame) {
    use crate::reply;
    match f {
        Frame::Simple(s) => reply::simple(out, s),
        Frame::Error(e) => reply::error(out, e),
        Frame::Integer(i) => reply::integer(out, *i),
        Frame::Bulk(Some(b)) => reply::bulk(out, b),
        Frame::Bulk(None) => reply::null_bulk(out),
        Frame::Array(None) => reply::null_array(out),
        Frame::Array(Some(items)) => {
            reply::array_len(out, items.len());
            for item in items {
                encode_frame(out, item);
            }
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
        b'$' => {
            let n = int(body)?;
            if n < 0 {
                return Ok(Some((Frame::Bulk(None), next)));
            }
            let n = n as usize;
            let end = next.checked_add(n).ok_or_else(|| ProtocolError("invalid bulk length".into()))?;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(ProtocolError("bulk string not terminated by CRLF".into()));
            }
            return Ok(Some((Frame::Bulk(Some(buf[next..end].to_vec())), end + 2)));
        }
        b'*' => {
            let n = int(body)?;
            if n < 0 {
                return Ok(Some((Frame::Array(None), next)));
            }
            // Never pre-size from the peer's number beyond what the buffer could hold.
            let mut items = Vec::with_capacity((n as usize).min(buf.len() / 3 + 1));
            let mut pos = next;
            for _ in 0..n {
                match decode_at(buf, pos, depth + 1)? {
                    None => return Ok(None),
                    Some((f, p)) => {
                        items.push(f);
                        pos = p;
                    }
                }
            }
            return Ok(Some((Frame::Array(Some(items)), pos)));
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
}
