//! One module per value type: its compact representation and its type API. Command handlers
//! live in the engine crate, in a module of the same name.

pub mod array;
pub mod hash;
pub mod list;
pub(crate) mod packed;
pub mod set;
pub mod stream;
pub mod stream_idmp;
pub mod string;
pub mod vset;
pub mod zset;

pub use array::SparseArray;
pub use hash::Hash;
pub use list::List;
pub use set::Set;
pub use stream::{Stream, StreamId};
pub use zset::ZSet;

/// Why raw bytes handed to a `from_raw` constructor (a snapshot being loaded) were refused.
/// The constructors check every structural rule and invariant of the form they build, so a
/// crafted or damaged input is refused here rather than panicking later in a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawError(pub &'static str);

impl std::fmt::Display for RawError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for RawError {}

/// Reads a LEB128 varint from untrusted bytes: (value, position after it), or None when the
/// bytes end first or the value does not fit 64 bits. (The snapshot format reads its varints
/// with this too: one decoder for every untrusted varint.)
pub fn read_varint_checked(buf: &[u8], mut at: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(at)?;
        at += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        v |= ((b & 0x7F) as u64) << shift;
        if b < 0x80 {
            return Some((v, at));
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// Length of `v` as a LEB128 varint.
pub(crate) fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Calls `f` with `v` as LEB128 bytes (no allocation).
pub(crate) fn with_varint<R>(mut v: u64, f: impl FnOnce(&[u8]) -> R) -> R {
    let mut b = [0u8; 10];
    let mut n = 0;
    while v >= 0x80 {
        b[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    b[n] = v as u8;
    f(&b[..=n])
}

/// The raw forms of chunked collections are sequences of segments, one per chunk of the
/// store: `varint(len)` then `len` bytes (never 0). Calls `f` with each segment's bytes;
/// refuses a malformed framing.
pub(crate) fn for_each_segment<'a>(
    raw: &'a [u8],
    mut f: impl FnMut(&'a [u8]) -> Result<(), RawError>,
) -> Result<(), RawError> {
    let mut at = 0;
    while at < raw.len() {
        let (len, p) = read_varint_checked(raw, at).ok_or(RawError("bad segment length"))?;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| p.checked_add(l))
            .filter(|&e| e <= raw.len())
            .ok_or(RawError("segment overruns the value"))?;
        if end == p {
            return Err(RawError("empty segment"));
        }
        f(&raw[p..end])?;
        at = end;
    }
    Ok(())
}

/// True when no two of `items` are equal. Small inputs compare pairwise; larger ones are
/// sorted in place (O(n log n), no hashing, so no seed is involved).
pub(crate) fn all_distinct(items: &mut Vec<&[u8]>) -> bool {
    if items.len() <= 16 {
        for i in 0..items.len() {
            for j in 0..i {
                if items[i] == items[j] {
                    return false;
                }
            }
        }
        return true;
    }
    items.sort_unstable();
    items.windows(2).all(|w| w[0] != w[1])
}
