//! Incremental RESP2 request parser. (Being written: see the API below.)

/// Redis's request limits, checked before any allocation is sized from a client's number.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest bulk argument (Redis `proto-max-bulk-len`, default 512 MiB).
    pub max_bulk_len: u64,
    /// Largest multibulk argument count (Redis accepts at most 1024*1024 when unauthenticated
    /// and up to i32::MAX otherwise; we use 1024*1024*1024 minus one like an authenticated client).
    pub max_multibulk_len: u64,
    /// Longest inline request line and longest `*`/`$` header line (Redis: 64 KiB).
    pub max_inline_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_bulk_len: 512 * 1024 * 1024, max_multibulk_len: i32::MAX as u64, max_inline_len: 64 * 1024 }
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

/// Parses requests from the front of a connection's input buffer.
///
/// Usage: `match parser.next(&buf)? { None => read more, Some(n) => { use parser.args(); drop buf[..n] } }`.
pub struct RequestParser {
    limits: Limits,
    args: Vec<std::ops::Range<usize>>,
}

impl RequestParser {
    pub fn new(limits: Limits) -> Self {
        RequestParser { limits, args: Vec::new() }
    }

    /// Parses the next request at the start of `buf`.
    /// - `Ok(None)`: incomplete; call again with the same bytes plus more (the parser may keep
    ///   progress between calls as long as the prefix is unchanged).
    /// - `Ok(Some(n))`: one request occupies `buf[..n]`; [`Self::args`] are ranges into `buf`.
    ///   An empty request (blank inline line, `*0`, `*-1`) yields zero args.
    /// - `Err(e)`: the connection must answer `-ERR Protocol error: {e}` and close.
    pub fn next(&mut self, buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
        let _ = (&self.limits, buf);
        todo!("resp parser")
    }

    /// The arguments of the request last returned by [`Self::next`], as ranges into its buffer.
    pub fn args(&self) -> &[std::ops::Range<usize>] {
        &self.args
    }
}
