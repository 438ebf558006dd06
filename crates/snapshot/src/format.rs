//! Constants and byte-level helpers of the `.gcsn` format. `docs/FORMAT.md` is the reference;
//! every number here appears there.

/// The file's first 8 bytes. The high first byte and the CR LF / ^Z that follow catch a file
/// mangled by a text-mode transfer, as PNG's signature does.
pub const MAGIC: [u8; 8] = [0x89, b'G', b'C', b'S', b'N', b'\r', b'\n', 0x1A];
/// The newest format version this crate reads and writes. A snapshot is written with the
/// lowest version that holds it: 1 (byte for byte what version-1 writers produce) when it has
/// neither function libraries nor keys outside database 0; 2 (function libraries in the
/// header) when it has libraries and every key is in database 0; 3 (version 2's header, plus
/// database selectors in the data stream) when it has a key in a database above 0, with or
/// without libraries. An older reader refuses a newer version instead of misreading it.
pub const FORMAT_VERSION: u32 = 3;
/// The first version whose data stream may hold database selectors.
pub const VERSION_SELECTORS: u32 = 3;
/// The highest database number a snapshot may hold (a sanity bound on untrusted input; a
/// server checks its own database count when it installs the databases).
pub const MAX_DATABASE: u32 = 1_000_000;
/// Header additions (after the version's own fields; see FORMAT.md): a tag byte, the
/// payload's length as a varint, the payload. Readers skip tags they do not know.
pub const ADDITION_UNCONFIRMED: u8 = 1;
pub const ADDITION_PREVIOUS: u8 = 2;
/// Magic + version.
pub const PRELUDE_LEN: usize = 12;

/// Block kinds (ASCII, so that they stand out in a hex dump).
pub const KIND_HEADER: u8 = b'H';
pub const KIND_DATA: u8 = b'D';
pub const KIND_TRAILER: u8 = b'T';

/// Block flag: the payload is one LZ4 block (raw LZ4 block format, no frame).
pub const FLAG_LZ4: u8 = 0x01;
pub const KNOWN_FLAGS: u8 = FLAG_LZ4;

/// Block header: kind, flags, reserved u16, index u32, stored length u32, raw length u32,
/// payload CRC-32C u32, header CRC-32C u32 (of the 20 bytes before it).
pub const BLOCK_HEADER_LEN: usize = 24;
/// Largest raw (decompressed) payload a reader accepts. The writer's blocks are much smaller
/// (records straddle blocks, so no value forces a big block); the cap bounds what a damaged
/// or crafted length can make a reader allocate.
pub const MAX_BLOCK: usize = 16 << 20;
/// Default raw payload size of a data block.
pub const DEFAULT_BLOCK_SIZE: usize = 256 << 10;

/// Record tag: low 4 bits the value code, bit 4 an expiry follows, bits 5-7 zero.
pub const TAG_EXPIRY: u8 = 0x10;
/// Database selector (version 3): this exact tag byte, then `varint(n)`; the records after it
/// belong to database `n` (> 0, above the previous selector's) until the next selector.
/// Readers before version 3 refuse the tag (bit 5 set) as unknown.
pub const TAG_SELECT_DB: u8 = 0x20;
pub const CODE_STR: u8 = 0;
pub const CODE_INT: u8 = 1;
pub const CODE_HASH: u8 = 2;
pub const CODE_SET_INTS: u8 = 3;
pub const CODE_SET: u8 = 4;
pub const CODE_ZSET: u8 = 5;
pub const CODE_LIST: u8 = 6;
pub const CODE_ARRAY: u8 = 7;
/// A stream (entries, metadata, consumer groups). Older readers refuse code 8 as an unknown
/// record tag, so a file holding streams cannot be misread by them: no version change.
pub const CODE_STREAM: u8 = 8;
/// A hash some of whose fields have deadlines: as `CODE_HASH`, then the number of fields with
/// a deadline and, for each, the field (length-prefixed) and its deadline (i64 LE, unix ms).
/// Older readers refuse code 9 as an unknown record tag.
pub const CODE_HASH_DEADLINES: u8 = 9;
/// A vector set: `varint(length)`, then `length` bytes of `VectorSet::encode` (the graph as it
/// is, then each element's node, name and attributes). Older readers refuse code 10 as an
/// unknown record tag.
pub const CODE_VSET: u8 = 10;
pub const MAX_CODE: u8 = CODE_VSET;

/// Appends `v` as LEB128 (7 bits a byte, low group first, high bit = more follow).
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes `v` as LEB128 into `b`; returns the length (at most 10).
#[inline]
pub fn varint_bytes(mut v: u64, b: &mut [u8; 10]) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        b[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    b[n] = v as u8;
    n + 1
}

/// Zigzag: small magnitudes of either sign become small unsigned numbers.
#[inline]
pub fn zigzag(i: i64) -> u64 {
    ((i << 1) ^ (i >> 63)) as u64
}

#[inline]
pub fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

/// A LEB128 varint from `buf` at `at`: (value, position after it), or None when the bytes end
/// first or the value does not fit 64 bits. The store's decoder for untrusted varints.
pub use store::types::read_varint_checked as get_varint;

/// CRC-32C of the header's first 20 bytes.
pub fn header_crc(h: &[u8]) -> u32 {
    crc32c::crc32c(&h[..20])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_zigzag_round_trip() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut b = [0u8; 10];
            let n = varint_bytes(v, &mut b);
            assert_eq!(&b[..n], &out[..]);
            assert_eq!(get_varint(&out, 0), Some((v, out.len())));
            assert_eq!(get_varint(&out[..out.len() - 1], 0), None);
        }
        // 11 bytes, or a tenth byte above 1: no u64.
        assert_eq!(get_varint(&[0xFF; 11], 0), None);
        assert_eq!(get_varint(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02], 0), None);
        for i in [0i64, -1, 1, i64::MIN, i64::MAX, -64, 63] {
            assert_eq!(unzigzag(zigzag(i)), i);
        }
    }
}
