//! Finding the end of one RESP reply in a buffer, so that a client knows when a reply is whole.

/// The length of the first complete RESP2/RESP3 value in `buf`: `Ok(Some(n))`, `Ok(None)` if
/// more bytes are needed, `Err` for bytes that are no RESP reply. Iterative (a counter of values
/// still expected), so deep nesting cannot overflow the stack.
pub fn reply_len(buf: &[u8]) -> Result<Option<usize>, String> {
    let mut pos = 0usize;
    let mut need: u64 = 1;
    while need > 0 {
        let Some(nl) = buf[pos..].windows(2).position(|w| w == b"\r\n") else { return Ok(None) };
        let line = &buf[pos..pos + nl];
        let Some((&kind, rest)) = line.split_first() else { return Err("empty reply line".into()) };
        pos += nl + 2;
        need -= 1;
        let num = || -> Result<i64, String> {
            std::str::from_utf8(rest)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .ok_or_else(|| format!("bad length in reply line {:?}", String::from_utf8_lossy(line)))
        };
        match kind {
            b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => {}
            b'$' | b'!' | b'=' => {
                let n = num()?;
                if n >= 0 {
                    let end = pos.checked_add(n as usize + 2).ok_or("reply too long")?;
                    if buf.len() < end {
                        return Ok(None);
                    }
                    if &buf[end - 2..end] != b"\r\n" {
                        return Err("bulk reply not terminated by CRLF".into());
                    }
                    pos = end;
                }
            }
            b'*' | b'~' | b'>' => {
                let n = num()?;
                if n > 0 {
                    need += n as u64;
                }
            }
            b'%' | b'|' => {
                let n = num()?;
                if n > 0 {
                    need += 2 * n as u64;
                }
            }
            _ => return Err(format!("unknown reply type byte {:?}", kind as char)),
        }
    }
    Ok(Some(pos))
}

/// Encodes a command as a RESP2 array of bulk strings, appending to `out`.
pub fn encode_command<A: AsRef<[u8]>>(args: &[A], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::reply_len;

    #[test]
    fn lengths() {
        assert_eq!(reply_len(b"+OK\r\n"), Ok(Some(5)));
        assert_eq!(reply_len(b"+OK\r"), Ok(None));
        assert_eq!(reply_len(b"$3\r\nabc\r\n+x"), Ok(Some(9)));
        assert_eq!(reply_len(b"$3\r\nab"), Ok(None));
        assert_eq!(reply_len(b"$-1\r\n"), Ok(Some(5)));
        assert_eq!(reply_len(b"*2\r\n:1\r\n$1\r\na\r\n"), Ok(Some(15)));
        assert_eq!(reply_len(b"*2\r\n:1\r\n"), Ok(None));
        assert_eq!(reply_len(b"*-1\r\n"), Ok(Some(5)));
        assert_eq!(reply_len(b"%1\r\n+a\r\n+b\r\n"), Ok(Some(12)));
        assert!(reply_len(b"?x\r\n").is_err());
        assert!(reply_len(b"$x\r\n").is_err());
        assert!(reply_len(b"$99999999999999999999\r\n").is_err());
    }
}
