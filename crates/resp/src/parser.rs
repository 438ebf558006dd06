//! Incremental RESP2 request parser.
//!
//! It accepts exactly what Redis 7.0 accepts (`processMultibulkBuffer` and `processInlineBuffer`
//! in networking.c) and rejects the rest with the same error texts, including Redis's quirks,
//! which were checked against redis-server 7.0.15:
//!
//! - A header line (`*<n>` or `$<len>`) ends at the first CR; the byte after the CR must be
//!   present but is never checked to be LF, and a bulk payload is followed by two bytes that
//!   are skipped unchecked (`*1\rX$4\r\nPINGxy` is a valid PING).
//! - Lines are found the way C's `strchr` finds them: a NUL byte before the terminator hides
//!   it, so such a request stays incomplete until the "too big" limit trips.
//! - Numbers follow Redis's `string2ll`: no `+`, no leading zeros, no `-0`, at most 20 bytes.
//! - `*<n>` with n <= 0 is an empty request; `$-1` inside a request is an invalid bulk length.
//!
//! Known, deliberate difference: `expected '$', got 'X'` carries the offending byte as the char
//! U+00XX (a `String` cannot hold a lone non-UTF-8 byte), so for bytes >= 0x80 the reply holds
//! its two-byte UTF-8 form where Redis writes the raw byte. CR and LF become a space, as in
//! Redis's reply.
//!
//! Progress is kept between calls (offset reached, arguments found, how far a line search got),
//! so a request arriving in many small pieces costs O(total bytes), never O(n^2).

use std::ops::Range;

/// Redis's request limits, checked before any allocation is sized from a client's number.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest bulk argument (Redis `proto-max-bulk-len`, default 512 MiB).
    pub max_bulk_len: u64,
    /// Largest multibulk argument count (Redis 7.0 refuses counts above i32::MAX, the default
    /// here; it also refuses counts above 10 from a client that still has to AUTH, with a
    /// different text, which is the server's business, not this parser's).
    pub max_multibulk_len: u64,
    /// Longest inline request line and longest `*`/`$` header line (Redis: 64 KiB).
    pub max_inline_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: i32::MAX as u64,
            max_inline_len: 64 * 1024,
        }
    }
}

/// A malformed request. `Display` gives the text after `ERR Protocol error: `, exactly as Redis
/// writes it (e.g. `invalid multibulk length`, `expected '$', got 'x'`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl ProtocolError {
    fn new(msg: &str) -> Self {
        ProtocolError(msg.to_owned())
    }
}

/// Redis's bounds on a request from a client that has yet to authenticate.
pub const UNAUTHENTICATED_MAX_ARGS: i64 = 10;
pub const UNAUTHENTICATED_MAX_BULK: usize = 16 * 1024;

/// Where the parser stands inside the current request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// No byte of the current request examined yet.
    Start,
    /// Inline request: looking for its LF.
    Inline,
    /// Multibulk request: looking for the end of the `*<n>` line.
    Count,
    /// Multibulk request: looking for the end of the `$<len>` line that starts at `pos`.
    BulkHeader,
    /// Multibulk request: waiting for `bulk_len` payload bytes plus 2 at `pos`.
    BulkBody,
}

/// An argument vector kept after a very large request is given back once it exceeds this
/// many entries, so one huge MSET does not pin memory for the connection's lifetime.
const ARGS_SHRINK_ABOVE: usize = 64 * 1024;
const ARGS_KEEP: usize = 1024;
/// Same for the inline scratch buffer, in bytes.
const SCRATCH_SHRINK_ABOVE: usize = 1024 * 1024;
const SCRATCH_KEEP: usize = 64 * 1024;

/// Parses requests from the front of a connection's input buffer.
///
/// ```
/// use resp::{Limits, RequestParser};
/// let mut parser = RequestParser::new(Limits::default());
/// let mut buf = b"*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nPING \"a b\"\r\n".to_vec();
/// let mut seen: Vec<Vec<Vec<u8>>> = Vec::new();
/// while let Some(n) = parser.next(&buf).unwrap() {
///     seen.push(parser.arg_slices(&buf).map(|a| a.to_vec()).collect());
///     buf.drain(..n);
/// }
/// assert_eq!(seen, vec![vec![b"ECHO".to_vec(), b"hi".to_vec()], vec![b"PING".to_vec(), b"a b".to_vec()]]);
/// ```
///
/// Contract: between a call that returned `Ok(None)` and the next call, the caller may only
/// append to the buffer (the parser remembers offsets into it). After `Ok(Some(n))` the caller
/// drops `buf[..n]` and the next call starts a fresh request at `buf[0]`. After `Err` the
/// connection is closed; the parser is reset anyway. If the buffer must be discarded in the
/// middle of a request, call [`Self::reset`].
pub struct RequestParser {
    limits: Limits,
    /// Arguments of the current request: ranges into the caller's buffer for a multibulk
    /// request, into `scratch` for an inline one (`inline` says which). Reused across
    /// requests, so the multibulk path does not allocate once warmed up.
    args: Vec<Range<usize>>,
    /// Unescaped bytes of the last inline request's arguments.
    scratch: Vec<u8>,
    /// True when the last completed request was inline.
    inline: bool,
    stage: Stage,
    /// The client has yet to authenticate: Redis's tighter bounds apply (see
    /// [`Self::set_unauthenticated`]).
    unauthenticated: bool,
    /// Offset in the buffer of the next unparsed element of the current request.
    pos: usize,
    /// Bulk arguments still missing from the current multibulk request.
    left: usize,
    /// Payload length of the bulk being read (stage `BulkBody`).
    bulk_len: usize,
    /// Line search resumes here: `buf[pos..scanned]` holds no line terminator. Always >= `pos`.
    /// When the search stopped on a NUL, `scanned` points at it and the line stays hidden.
    scanned: usize,
}

impl Default for RequestParser {
    fn default() -> Self {
        RequestParser::new(Limits::default())
    }
}

impl RequestParser {
    pub fn new(limits: Limits) -> Self {
        RequestParser {
            limits,
            args: Vec::new(),
            scratch: Vec::new(),
            inline: false,
            stage: Stage::Start,
            unauthenticated: false,
            pos: 0,
            left: 0,
            bulk_len: 0,
            scanned: 0,
        }
    }

    /// While set, a request may hold at most [`UNAUTHENTICATED_MAX_ARGS`] arguments of at most
    /// [`UNAUTHENTICATED_MAX_BULK`] bytes each (Redis's bounds for a client that still has to
    /// log in: it cannot make the server wait for, or buffer, a large request). Beyond them:
    /// `unauthenticated multibulk length` / `unauthenticated bulk length`.
    #[inline]
    pub fn set_unauthenticated(&mut self, on: bool) {
        self.unauthenticated = on;
    }

    /// Parses the next request at the start of `buf`.
    /// - `Ok(None)`: incomplete; call again with the same bytes plus more (progress is kept).
    /// - `Ok(Some(n))`: one request occupies `buf[..n]`; read its arguments with
    ///   [`Self::arg_slices`]. An empty request (blank inline line, `*0`, `*-1`) has zero args
    ///   and should simply be skipped, as Redis does.
    /// - `Err(e)`: the connection must answer `-ERR Protocol error: {e}` and close.
    pub fn next(&mut self, buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
        if self.stage != Stage::Start && buf.len() < self.scanned {
            // The caller broke the append-only contract (shorter buffer than before): the
            // remembered offsets are meaningless, so start over from buf[0].
            self.reset();
        }
        if self.stage == Stage::Start {
            let Some(&first) = buf.first() else { return Ok(None) };
            self.begin_request();
            if first == b'*' {
                if let Some(end) = self.complete_multibulk(buf) {
                    return Ok(Some(end));
                }
                // Not the common case: parse it again, step by step, from buf[0].
                self.args.clear();
            }
            self.stage = if first == b'*' { Stage::Count } else { Stage::Inline };
        }
        let result =
            if self.stage == Stage::Inline { self.parse_inline(buf) } else { self.parse_multibulk(buf) };
        if !matches!(result, Ok(None)) {
            self.stage = Stage::Start;
        }
        result
    }

    /// The arguments of the request last returned by [`Self::next`], as ranges.
    ///
    /// For a multibulk request ([`Self::is_inline`] false) they index the buffer given to
    /// `next`; for an inline request they index the parser's internal unescape buffer, so they
    /// are useless on the caller's buffer. Prefer [`Self::arg_slices`], which handles both.
    pub fn args(&self) -> &[Range<usize>] {
        &self.args
    }

    /// Number of arguments of the request last returned by [`Self::next`].
    pub fn argc(&self) -> usize {
        self.args.len()
    }

    /// True if the request last returned by [`Self::next`] was an inline one (its arguments
    /// live in the parser, not in the caller's buffer).
    pub fn is_inline(&self) -> bool {
        self.inline
    }

    /// The arguments of the request last returned by [`Self::next`] as byte slices: the
    /// documented way to read arguments, valid for multibulk and inline requests alike.
    /// `buf` must be the buffer that call was given (before the caller drops `buf[..n]`).
    pub fn arg_slices<'a>(&'a self, buf: &'a [u8]) -> impl ExactSizeIterator<Item = &'a [u8]> + Clone + 'a {
        let base: &'a [u8] = if self.inline { &self.scratch } else { buf };
        self.args.iter().map(move |r| {
            debug_assert!(r.end <= base.len(), "arg_slices given a different buffer than next()");
            base.get(r.clone()).unwrap_or_default()
        })
    }

    /// True between a call that found a request incomplete and the one that completes it:
    /// the parser holds progress into the request at the start of the buffer.
    pub fn in_request(&self) -> bool {
        self.stage != Stage::Start
    }

    /// While the current request waits for a bulk argument's payload: how many bytes beyond
    /// `buf_len` (the length of the buffer the last [`Self::next`] call saw) that bulk still
    /// needs, its CRLF included, and the bulk's whole length. A reader uses it to size its
    /// buffer once for a big argument and read it in large pieces, as Redis does.
    pub fn bulk_missing(&self, buf_len: usize) -> Option<(usize, usize)> {
        (self.stage == Stage::BulkBody)
            .then(|| ((self.pos + self.bulk_len + 2).saturating_sub(buf_len), self.bulk_len))
    }

    /// Forgets any partly parsed request (for a caller that discards its buffer mid-request).
    pub fn reset(&mut self) {
        self.stage = Stage::Start;
        self.pos = 0;
        self.scanned = 0;
        self.left = 0;
        self.bulk_len = 0;
    }

    /// Prepares for a new request at buf[0]; the previous request's arguments die here.
    fn begin_request(&mut self) {
        self.args.clear();
        if self.args.capacity() > ARGS_SHRINK_ABOVE {
            self.args.shrink_to(ARGS_KEEP);
        }
        if self.inline {
            self.scratch.clear();
            if self.scratch.capacity() > SCRATCH_SHRINK_ABOVE {
                self.scratch.shrink_to(SCRATCH_KEEP);
            }
        }
        self.inline = false;
        self.pos = 0;
        self.scanned = 0;
        self.left = 0;
        self.bulk_len = 0;
    }

    /// Looks for the line that starts at `pos` and ends at `term` (CR for headers, LF for
    /// inline requests), like Redis's `strchr` over the rest of the buffer: a NUL before the
    /// terminator hides it. While the line is not found, more than `max_inline_len` bytes
    /// after `pos` is the error `too_big`. Returns the terminator's offset.
    fn find_line(&mut self, buf: &[u8], term: u8, too_big: &str) -> Result<Option<usize>, ProtocolError> {
        let from = self.scanned.max(self.pos);
        let hit = find_byte_or_nul(&buf[from..], term).map(|i| from + i);
        match hit {
            Some(at) if buf[at] == term => {
                // Keep the spot: a CR whose following byte is missing is found again in O(1).
                self.scanned = at;
                Ok(Some(at))
            }
            _ => {
                self.scanned = hit.unwrap_or(buf.len());
                if buf.len() - self.pos > self.limits.max_inline_len {
                    Err(ProtocolError::new(too_big))
                } else {
                    Ok(None)
                }
            }
        }
    }

    /// Fast path for the usual request: a multibulk request that is entirely in `buf`, with
    /// every header in the shape [`fast_header`] accepts and every length within the limits.
    /// Returns its end, its arguments in `self.args`. Anything else (incomplete, empty,
    /// malformed, over a limit) returns `None` without touching the parser's progress state,
    /// and the general path below then parses the same bytes from the start: it accepts
    /// everything this accepts, with the same arguments, since it takes the same steps.
    #[inline]
    fn complete_multibulk(&mut self, buf: &[u8]) -> Option<usize> {
        let args = &mut self.args;
        scan_multibulk(buf, &self.limits, self.limits.max_multibulk_len, |_, range| args.push(range))
    }

    /// Looks at the request at the start of `buf` without parsing it: when it is a complete
    /// multibulk request of the common shape (the one `next` takes in a single pass), returns
    /// its length and the range of its second argument (the key of most commands), if it has
    /// one. `None` says nothing: an inline, incomplete or unusual request, which `next` parses
    /// the general way, and also a request of more than `max_args` arguments, so that a
    /// look-ahead's work stays bounded whatever arrives. A hint for looking ahead in a
    /// pipeline; the parser's state is untouched.
    pub fn peek(&self, buf: &[u8], max_args: u64) -> Option<(usize, Option<Range<usize>>)> {
        let mut second = None;
        let len =
            scan_multibulk(buf, &self.limits, max_args.min(self.limits.max_multibulk_len), |i, range| {
                if i == 1 {
                    second = Some(range);
                }
            })?;
        Some((len, second))
    }

    fn parse_multibulk(&mut self, buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
        if self.stage == Stage::Count {
            let (cr, value) = match fast_header(buf, self.pos) {
                Some((cr, n)) => (cr, Some(n)),
                None => {
                    let Some(cr) = self.find_line(buf, b'\r', "too big mbulk count string")? else {
                        return Ok(None);
                    };
                    if cr + 2 > buf.len() {
                        return Ok(None);
                    }
                    (cr, string2ll(&buf[self.pos + 1..cr]))
                }
            };
            let count = match value {
                Some(n) if n <= 0 => None,
                Some(n) if n as u64 <= self.limits.max_multibulk_len => {
                    if self.unauthenticated && n > UNAUTHENTICATED_MAX_ARGS {
                        return Err(ProtocolError::new("unauthenticated multibulk length"));
                    }
                    usize::try_from(n).ok()
                }
                _ => return Err(ProtocolError::new("invalid multibulk length")),
            };
            self.pos = cr + 2;
            self.scanned = self.pos;
            let Some(count) = count else { return Ok(Some(self.pos)) };
            self.left = count;
            self.stage = Stage::BulkHeader;
        }
        loop {
            if self.stage == Stage::BulkHeader && buf.get(self.pos) == Some(&b'$') {
                // Fast path for a well-formed `$<len>` line; errors go the general way below.
                if let Some((cr, len)) = fast_header(buf, self.pos) {
                    if let Ok(len) = usize::try_from(len) {
                        if len as u64 <= self.limits.max_bulk_len
                            && !(self.unauthenticated && len > UNAUTHENTICATED_MAX_BULK)
                        {
                            self.pos = cr + 2;
                            self.scanned = self.pos;
                            self.bulk_len = len;
                            self.stage = Stage::BulkBody;
                        }
                    }
                }
            }
            if self.stage == Stage::BulkHeader {
                let Some(cr) = self.find_line(buf, b'\r', "too big bulk count string")? else {
                    return Ok(None);
                };
                if cr + 2 > buf.len() {
                    return Ok(None);
                }
                let tag = buf[self.pos];
                if tag != b'$' {
                    // Redis's reply writer turns CR/LF into spaces; do it here so the text is
                    // the same whatever writes it.
                    let shown = if tag == b'\r' || tag == b'\n' { ' ' } else { tag as char };
                    return Err(ProtocolError(format!("expected '$', got '{shown}'")));
                }
                let len = match string2ll(&buf[self.pos + 1..cr]) {
                    Some(n) if n >= 0 && n as u64 <= self.limits.max_bulk_len => usize::try_from(n).ok(),
                    _ => None,
                };
                let Some(len) = len else { return Err(ProtocolError::new("invalid bulk length")) };
                if self.unauthenticated && len > UNAUTHENTICATED_MAX_BULK {
                    return Err(ProtocolError::new("unauthenticated bulk length"));
                }
                self.pos = cr + 2;
                self.scanned = self.pos;
                self.bulk_len = len;
                self.stage = Stage::BulkBody;
            }
            // Stage::BulkBody. The two bytes after the payload are skipped unchecked, as Redis
            // does. Nothing is reserved from `bulk_len`: the bytes are already in the buffer.
            if buf.len() - self.pos < self.bulk_len.saturating_add(2) {
                return Ok(None);
            }
            let end = self.pos + self.bulk_len;
            self.args.push(self.pos..end);
            self.pos = end + 2;
            self.scanned = self.pos;
            self.left -= 1;
            if self.left == 0 {
                return Ok(Some(self.pos));
            }
            self.stage = Stage::BulkHeader;
        }
    }

    fn parse_inline(&mut self, buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
        let Some(lf) = self.find_line(buf, b'\n', "too big inline request")? else { return Ok(None) };
        let mut end = lf;
        if end > 0 && buf[end - 1] == b'\r' {
            end -= 1;
        }
        // The scratch buffer is filled before the request is known to be valid; on error the
        // connection closes, and `begin_request` clears it either way.
        self.inline = true;
        if split_inline(&buf[..end], &mut self.scratch, &mut self.args).is_err() {
            return Err(ProtocolError::new("unbalanced quotes in request"));
        }
        Ok(Some(lf + 1))
    }
}

/// Walks a complete multibulk request of the common shape at `buf[0]` (every header in
/// `fast_header`'s form, at most `max_count` arguments, each within `limits`), giving each
/// argument's index and range to `arg`. Returns the request's length, or `None` (having given
/// some arguments, perhaps) when the request is incomplete or not of that shape.
#[inline]
fn scan_multibulk(
    buf: &[u8],
    limits: &Limits,
    max_count: u64,
    mut arg: impl FnMut(usize, Range<usize>),
) -> Option<usize> {
    if buf.first() != Some(&b'*') {
        return None;
    }
    let (cr, count) = fast_header(buf, 0)?;
    if count <= 0 || count as u64 > max_count {
        return None;
    }
    let mut pos = cr + 2;
    // Each bulk takes at least 6 bytes (`$0\r\n\r\n`), so a count larger than the buffer
    // can hold fails on a missing `$` long before it matters.
    for i in 0..count as usize {
        if buf.get(pos) != Some(&b'$') {
            return None;
        }
        let (cr, len) = fast_header(buf, pos)?;
        // fast_header values are never negative.
        if len as u64 > limits.max_bulk_len {
            return None;
        }
        let start = cr + 2;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        if end.checked_add(2)? > buf.len() {
            return None;
        }
        arg(i, start..end);
        pos = end + 2;
    }
    Some(pos)
}

/// The common header shape, parsed in one pass: a type byte at `pos`, then `0` or a digit 1-9
/// followed by at most 17 more digits (so no overflow is possible), then CR and one more byte.
/// Returns the CR's offset and the value. Whenever this returns `Some`, the general path
/// (`find_line` + `string2ll`) would have found the same line and value, since digits are
/// neither CR nor NUL; anything else (signs, long numbers, incomplete lines, errors) is left
/// to the general path. Public for other readers of RESP-shaped headers (goblin-core's
/// firehose frames).
#[inline]
pub fn fast_header(buf: &[u8], pos: usize) -> Option<(usize, i64)> {
    let digits_start = pos + 1;
    let first = *buf.get(digits_start)?;
    if !first.is_ascii_digit() {
        return None;
    }
    let mut value = i64::from(first - b'0');
    let mut i = digits_start + 1;
    while let Some(&d) = buf.get(i) {
        if !d.is_ascii_digit() {
            break;
        }
        if first == b'0' || i - digits_start >= 18 {
            return None;
        }
        value = value * 10 + i64::from(d - b'0');
        i += 1;
    }
    // `i` is at the first non-digit: it must be the CR, and the byte after it must be present.
    if buf.get(i) == Some(&b'\r') && i + 2 <= buf.len() {
        Some((i, value))
    } else {
        None
    }
}

/// Offset of the first `term` or NUL byte in `hay`. Header lines are a few bytes long, so the
/// first bytes are checked one by one; longer lines (inline requests, garbage) go eight bytes
/// at a time.
#[inline]
fn find_byte_or_nul(hay: &[u8], term: u8) -> Option<usize> {
    const HEAD: usize = 16;
    for (i, &b) in hay.iter().take(HEAD).enumerate() {
        if b == term || b == 0 {
            return Some(i);
        }
    }
    if hay.len() <= HEAD {
        return None;
    }
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let pattern = ONES * term as u64;
    let rest = &hay[HEAD..];
    let mut chunks = rest.chunks_exact(8);
    let mut base = HEAD;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let x = w ^ pattern;
        // The classic "has a zero byte" test: its lowest set bit is always a real zero byte
        // (false positives only appear above one), so the lowest bit of the union marks the
        // first byte equal to `term` or to NUL.
        let found = (x.wrapping_sub(ONES) & !x & HIGHS) | (w.wrapping_sub(ONES) & !w & HIGHS);
        if found != 0 {
            return Some(base + (found.trailing_zeros() / 8) as usize);
        }
        base += 8;
    }
    chunks.remainder().iter().position(|&b| b == term || b == 0).map(|i| base + i)
}

/// Redis's `string2ll`: an optional `-`, then `0` alone or a digit 1-9 followed by digits, at
/// most 20 bytes, within i64. Anything else (`+1`, `01`, `-0`, spaces, empty) is refused.
fn string2ll(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some(0i64.wrapping_sub(v as i64))
    } else {
        i64::try_from(v).ok()
    }
}

/// C's `isspace` in the C locale.
#[inline]
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The byte a backslash escape inside double quotes stands for, as Redis's sdssplitargs reads
/// it (`\n \r \t \b \a`; any other byte stands for itself). `\xHH` is read apart
/// ([`hex_value`]).
pub fn unescape(c: u8) -> u8 {
    match c {
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'b' => 0x08,
        b'a' => 0x07,
        other => other,
    }
}

/// The value of one hexadecimal digit.
pub fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Splits an inline request line into arguments with the rules of Redis's `sdssplitargs`,
/// appending the unescaped bytes to `scratch` and one range per argument to `args`.
///
/// - Blanks (`isspace`) separate arguments; an unquoted argument ends at space, tab, CR or LF
///   only (so VT and FF stay inside it), and a quote inside it opens a quoted part.
/// - "double quotes" understand `\n \r \t \b \a`, `\xHH` and `\<any>` for that byte.
/// - 'single quotes' understand only `\'`.
/// - A closing quote must be followed by a blank or the end of the line; an unclosed quote is
///   an error.
///
/// The line is read like a C string: a NUL ends it (callers never pass one, since a NUL hides
/// the line terminator).
fn split_inline(line: &[u8], scratch: &mut Vec<u8>, args: &mut Vec<Range<usize>>) -> Result<(), ()> {
    let line = match line.iter().position(|&b| b == 0) {
        Some(nul) => &line[..nul],
        None => line,
    };
    // Reading past the end yields NUL, the C string terminator the rules are written against.
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut p = 0;
    loop {
        while p < line.len() && is_c_space(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return Ok(());
        }
        let start = scratch.len();
        let (mut in_double, mut in_single) = (false, false);
        loop {
            let c = at(p);
            if in_double {
                if c == b'\\' && at(p + 1) == b'x' {
                    if let (Some(hi), Some(lo)) = (hex_value(at(p + 2)), hex_value(at(p + 3))) {
                        scratch.push(hi * 16 + lo);
                        p += 4;
                        continue;
                    }
                }
                if c == b'\\' && at(p + 1) != 0 {
                    scratch.push(unescape(at(p + 1)));
                    p += 2;
                } else if c == b'"' {
                    let next = at(p + 1);
                    if next != 0 && !is_c_space(next) {
                        return Err(());
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return Err(());
                } else {
                    scratch.push(c);
                    p += 1;
                }
            } else if in_single {
                if c == b'\\' && at(p + 1) == b'\'' {
                    scratch.push(b'\'');
                    p += 2;
                } else if c == b'\'' {
                    let next = at(p + 1);
                    if next != 0 && !is_c_space(next) {
                        return Err(());
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return Err(());
                } else {
                    scratch.push(c);
                    p += 1;
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' => {
                        p += 1;
                        break;
                    }
                    0 => break,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    _ => scratch.push(c),
                }
                p += 1;
            }
        }
        args.push(start..scratch.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses one request from `input` with default limits.
    /// Bytes consumed and arguments of one parsed request.
    type Parsed = Option<(usize, Vec<Vec<u8>>)>;

    fn parse(input: &[u8]) -> Result<Parsed, ProtocolError> {
        parse_with(Limits::default(), input)
    }

    fn parse_with(limits: Limits, input: &[u8]) -> Result<Parsed, ProtocolError> {
        let mut p = RequestParser::new(limits);
        Ok(p.next(input)?.map(|n| (n, p.arg_slices(input).map(|a| a.to_vec()).collect())))
    }

    fn err(input: &[u8]) -> String {
        match parse(input) {
            Err(e) => e.to_string(),
            other => panic!("expected an error for {input:?}, got {other:?}"),
        }
    }

    fn args_of(input: &[u8]) -> Vec<Vec<u8>> {
        match parse(input) {
            Ok(Some((n, args))) => {
                assert_eq!(n, input.len(), "whole input should be one request: {input:?}");
                args
            }
            other => panic!("expected a request for {input:?}, got {other:?}"),
        }
    }

    fn v(items: &[&str]) -> Vec<Vec<u8>> {
        items.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn bulk_missing_counts_down_to_the_end_of_the_current_bulk() {
        let mut p = RequestParser::default();
        let mut buf = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n0123".to_vec();
        assert_eq!(p.next(&buf).unwrap(), None);
        // 6 payload bytes and the CRLF are missing from the 10-byte bulk.
        assert_eq!(p.bulk_missing(buf.len()), Some((8, 10)));
        buf.extend_from_slice(b"456789\r");
        assert_eq!(p.next(&buf).unwrap(), None);
        assert_eq!(p.bulk_missing(buf.len()), Some((1, 10)));
        buf.extend_from_slice(b"\n");
        assert_eq!(p.next(&buf).unwrap(), Some(buf.len()));
        assert_eq!(p.bulk_missing(buf.len()), None, "no request in progress");
        // Waiting for a header, not a payload: nothing to size.
        let mut p = RequestParser::default();
        assert_eq!(p.next(b"*2\r\n$3\r\nGET\r\n$1").unwrap(), None);
        assert_eq!(p.bulk_missing(14), None);
    }

    fn small_limits() -> Limits {
        Limits { max_bulk_len: 10, max_multibulk_len: 3, max_inline_len: 16 }
    }

    #[test]
    fn multibulk_basic_and_pipelined() {
        assert_eq!(args_of(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"), v(&["GET", "k"]));
        let two = b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n";
        assert_eq!(parse(two).unwrap().unwrap().0, 14);
        // Binary payloads with CR, LF and NUL, and an empty argument.
        assert_eq!(args_of(b"*2\r\n$5\r\na\r\n\0b\r\n$0\r\n\r\n"), vec![b"a\r\n\0b".to_vec(), vec![]]);
    }

    #[test]
    fn multibulk_empty_requests() {
        for input in [&b"*0\r\n"[..], b"*-1\r\n", b"*-5\r\n"] {
            assert_eq!(parse(input).unwrap(), Some((input.len(), vec![])), "{input:?}");
        }
    }

    #[test]
    fn multibulk_skips_unchecked_bytes_like_redis() {
        // Redis never checks the byte after a header's CR nor the two bytes after a payload.
        assert_eq!(args_of(b"*1\rX$4\r\nPING\r\n"), v(&["PING"]));
        assert_eq!(args_of(b"*1\r\n$4\rXPINGXY"), v(&["PING"]));
    }

    #[test]
    fn multibulk_incomplete() {
        for input in [
            &b"*"[..],
            b"*1",
            b"*1\r",
            b"*1\r\n",
            b"*1\r\n$",
            b"*1\r\n$4\r",
            b"*1\r\n$4\r\nPI",
            b"*1\r\n$4\r\nPING\r",
        ] {
            assert_eq!(parse(input).unwrap(), None, "{input:?}");
        }
    }

    #[test]
    fn invalid_multibulk_length() {
        for input in [
            &b"*x\r\n"[..],
            b"*01\r\n",
            b"*+1\r\n",
            b"*-0\r\n",
            b"*\r\n",
            b"*1 \r\n",
            b"*2147483648\r\n",
            b"*99999999999999999999\r\n",
        ] {
            assert_eq!(err(input), "invalid multibulk length", "{input:?}");
        }
        assert_eq!(parse(b"*2147483647\r\n").unwrap(), None);
        // The limit is configurable and inclusive.
        assert_eq!(parse_with(small_limits(), b"*3\r\n").unwrap(), None);
        assert_eq!(
            parse_with(small_limits(), b"*4\r\n").unwrap_err().to_string(),
            "invalid multibulk length"
        );
    }

    /// Before a client logs in: at most 10 arguments of at most 16 KiB, checked on the
    /// headers (nothing waits for the body); an invalid length stays invalid first.
    #[test]
    fn unauthenticated_bounds() {
        let guarded = |input: &[u8]| {
            let mut p = RequestParser::new(Limits::default());
            p.set_unauthenticated(true);
            p.next(input).map_err(|e| e.to_string())
        };
        assert_eq!(guarded(b"*11\r\n").unwrap_err(), "unauthenticated multibulk length");
        assert_eq!(guarded(b"*10\r\n").unwrap(), None);
        assert_eq!(guarded(b"*1\r\n$16385\r\n").unwrap_err(), "unauthenticated bulk length");
        assert_eq!(guarded(b"*1\r\n$100000000\r\n").unwrap_err(), "unauthenticated bulk length");
        assert_eq!(guarded(b"*1\r\n$16384\r\n").unwrap(), None);
        assert_eq!(guarded(b"*2147483648\r\n").unwrap_err(), "invalid multibulk length");
        assert_eq!(guarded(b"*1\r\n$536870913\r\n").unwrap_err(), "invalid bulk length");
        assert_eq!(guarded(b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n").unwrap(), Some(22));
        // Lifted: the same headers wait for their bodies.
        assert_eq!(parse(b"*11\r\n").unwrap(), None);
        assert_eq!(parse(b"*1\r\n$100000000\r\n").unwrap(), None);
    }

    #[test]
    fn expected_dollar() {
        assert_eq!(err(b"*1\r\n:4\r\n"), "expected '$', got ':'");
        assert_eq!(err(b"*2\r\n$1\r\na\r\nx\r\n"), "expected '$', got 'x'");
        // An empty line shows its CR as a space, like Redis's reply does.
        assert_eq!(err(b"*1\r\n\r\n"), "expected '$', got ' '");
        assert_eq!(err(b"*1\r\n\n\r\n"), "expected '$', got ' '");
    }

    #[test]
    fn invalid_bulk_length() {
        for input in [
            &b"*1\r\n$-1\r\n"[..],
            b"*1\r\n$04\r\n",
            b"*1\r\n$x\r\n",
            b"*1\r\n$\r\n",
            b"*1\r\n$536870913\r\n",
        ] {
            assert_eq!(err(input), "invalid bulk length", "{input:?}");
        }
        assert_eq!(parse(b"*1\r\n$536870912\r\n").unwrap(), None);
        assert_eq!(parse_with(small_limits(), b"*1\r\n$10\r\n").unwrap(), None);
        assert_eq!(
            parse_with(small_limits(), b"*1\r\n$11\r\n").unwrap_err().to_string(),
            "invalid bulk length"
        );
    }

    #[test]
    fn too_big_header_lines() {
        // The limit counts every byte from the header's start while no CR is in sight.
        let mut mb = b"*".to_vec();
        mb.extend(std::iter::repeat_n(b'1', 65535));
        assert_eq!(parse(&mb).unwrap(), None);
        mb.push(b'1');
        assert_eq!(err(&mb), "too big mbulk count string");

        let mut bulk = b"*1\r\n$".to_vec();
        bulk.extend(std::iter::repeat_n(b'1', 65535));
        assert_eq!(parse(&bulk).unwrap(), None);
        bulk.push(b'1');
        assert_eq!(err(&bulk), "too big bulk count string");

        let lim = small_limits();
        assert_eq!(parse_with(lim.clone(), b"*1\r\n$123456789012345").unwrap(), None);
        assert_eq!(
            parse_with(lim, b"*1\r\n$1234567890123456").unwrap_err().to_string(),
            "too big bulk count string"
        );
    }

    #[test]
    fn nul_hides_the_line_end_like_strchr() {
        // Redis finds lines with strchr, which stops at NUL: such requests never complete.
        assert_eq!(parse(b"*1\r\n\0$4\r\nPING\r\n").unwrap(), None);
        assert_eq!(parse(b"PING\0x\r\nPING\r\n").unwrap(), None);
        let mut big = b"PING\0".to_vec();
        big.extend(std::iter::repeat_n(b'\n', 70000));
        assert_eq!(err(&big), "too big inline request");
    }

    #[test]
    fn too_big_inline() {
        let line = vec![b'A'; 65536];
        assert_eq!(parse(&line).unwrap(), None);
        let line = vec![b'A'; 65537];
        assert_eq!(err(&line), "too big inline request");
        // A complete line is accepted whatever its length, as in Redis.
        let mut long = vec![b'A'; 70000];
        long.push(b'\n');
        assert_eq!(args_of(&long), vec![vec![b'A'; 70000]]);
    }

    #[test]
    fn inline_splitting() {
        assert_eq!(args_of(b"SET k v\r\n"), v(&["SET", "k", "v"]));
        assert_eq!(args_of(b"  SET   k\tv  \n"), v(&["SET", "k", "v"]));
        assert_eq!(args_of(b"PING\r\r\n"), v(&["PING"]));
        assert_eq!(args_of(b"\r\n"), Vec::<Vec<u8>>::new());
        assert_eq!(args_of(b"\n"), Vec::<Vec<u8>>::new());
        assert_eq!(args_of(b"a\rb\n"), v(&["a", "b"]));
        // VT and FF are skipped between arguments but do not end an unquoted one.
        assert_eq!(args_of(b"ECHO \x0b\x0c a\x0bb\n"), v(&["ECHO", "a\x0bb"]));
    }

    #[test]
    fn inline_double_quotes() {
        assert_eq!(args_of(b"ECHO \"a\\x41\\n\"\r\n"), v(&["ECHO", "aA\n"]));
        assert_eq!(args_of(b"ECHO \"\\r\\t\\b\\a\\\\\\\"\"\n"), v(&["ECHO", "\r\t\x08\x07\\\""]));
        assert_eq!(args_of(b"ECHO \"\\xZZ\\q\"\n"), v(&["ECHO", "xZZq"]));
        assert_eq!(args_of(b"ECHO \"\\xff\\x00\"\n"), vec![b"ECHO".to_vec(), vec![0xff, 0x00]]);
        assert_eq!(args_of(b"ECHO \"a b\" c\n"), v(&["ECHO", "a b", "c"]));
        assert_eq!(args_of(b"ECHO \"\"\n"), v(&["ECHO", ""]));
        assert_eq!(args_of(b"ECHO a\"b c\"\n"), v(&["ECHO", "ab c"]));
        assert_eq!(args_of(b"ECHO \"a\"\x0b\n"), v(&["ECHO", "a"]));
    }

    #[test]
    fn inline_single_quotes() {
        assert_eq!(args_of(b"ECHO 'a\\'b'\r\n"), v(&["ECHO", "a'b"]));
        assert_eq!(args_of(b"ECHO 'a\\nb'\n"), v(&["ECHO", "a\\nb"]));
        assert_eq!(args_of(b"ECHO '' 'x y'\n"), v(&["ECHO", "", "x y"]));
    }

    #[test]
    fn unbalanced_quotes() {
        for input in [
            &b"ECHO \"a\"b\r\n"[..],
            b"ECHO \"abc\r\n",
            b"ECHO 'abc\n",
            b"ECHO 'a'b\n",
            b"ECHO \"a\\\"\n",
            b"\"\n",
        ] {
            assert_eq!(err(input), "unbalanced quotes in request", "{input:?}");
        }
    }

    #[test]
    fn inline_then_multibulk_reuses_state() {
        let mut p = RequestParser::default();
        let mut buf = b"ECHO \"x\\x41\"\n*1\r\n$4\r\nPING\r\n".to_vec();
        let n = p.next(&buf).unwrap().unwrap();
        assert!(p.is_inline());
        assert_eq!(p.arg_slices(&buf).collect::<Vec<_>>(), vec![&b"ECHO"[..], b"xA"]);
        buf.drain(..n);
        let n = p.next(&buf).unwrap().unwrap();
        assert!(!p.is_inline());
        assert_eq!(p.argc(), 1);
        assert_eq!(&buf[p.args()[0].clone()], b"PING");
        assert_eq!(n, buf.len());
    }

    #[test]
    fn resumes_without_rescanning() {
        // Feeding a large bulk byte by byte must keep the args found so far and finish.
        let mut input = b"*2\r\n$3\r\nSET\r\n$100000\r\n".to_vec();
        input.extend(std::iter::repeat_n(b'z', 100000));
        input.extend_from_slice(b"\r\n");
        let mut p = RequestParser::default();
        for cut in 1..input.len() {
            assert_eq!(p.next(&input[..cut]).unwrap(), None, "cut {cut}");
        }
        assert_eq!(p.next(&input).unwrap(), Some(input.len()));
        let args: Vec<&[u8]> = p.arg_slices(&input).collect();
        assert_eq!(args[0], b"SET");
        assert_eq!(args[1].len(), 100000);
    }

    #[test]
    fn string2ll_matches_redis() {
        assert_eq!(string2ll(b"0"), Some(0));
        assert_eq!(string2ll(b"-1"), Some(-1));
        assert_eq!(string2ll(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"00",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"1a",
        ] {
            assert_eq!(string2ll(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn find_byte_or_nul_agrees_with_naive() {
        for len in 0..64 {
            for at in 0..=len {
                for byte in [b'\r', 0u8] {
                    let mut hay = vec![b'a'; len];
                    if at < len {
                        hay[at] = byte;
                    }
                    // A decoy past the first hit must not change the answer.
                    if at + 3 < len {
                        hay[at + 3] = b'\r';
                    }
                    let naive = hay.iter().position(|&b| b == b'\r' || b == 0);
                    assert_eq!(find_byte_or_nul(&hay, b'\r'), naive, "len {len} at {at}");
                }
            }
        }
        // Bytes just below/above the needle and 0x80/0x01 neighbours must not match.
        let hay: Vec<u8> = (1..=255u8).filter(|&b| b != b'\r').chain([b'\r']).collect();
        assert_eq!(find_byte_or_nul(&hay, b'\r'), Some(hay.len() - 1));
    }
}
