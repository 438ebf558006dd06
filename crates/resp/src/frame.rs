//! Owned RESP2 values, for reading replies and mutation streams back. (Being written.)

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
    let _ = (out, f);
    todo!()
}

/// Decodes one value from the front of `buf`: `Ok(None)` if incomplete, else the value and the
/// number of bytes it used.
pub fn decode_frame(buf: &[u8]) -> Result<Option<(Frame, usize)>, crate::ProtocolError> {
    let _ = buf;
    todo!()
}
