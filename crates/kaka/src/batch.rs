//! Kafka RecordBatch v2: header parsing, validation, and record iteration.
//!
//! Layout (byte offsets within one batch; see the Kafka "Message Format" page):
//!
//! ```text
//!  0 baseOffset i64        (not covered by the CRC; the broker rewrites it)
//!  8 batchLength i32       (bytes after this field; whole batch = batchLength + 12)
//! 12 partitionLeaderEpoch  (not covered by the CRC)
//! 16 magic i8 = 2
//! 17 crc u32               CRC-32C over bytes 21..end
//! 21 attributes i16        bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
//! 23 lastOffsetDelta i32
//! 27 baseTimestamp i64
//! 35 maxTimestamp i64
//! 43 producerId i64
//! 51 producerEpoch i16
//! 53 baseSequence i32
//! 57 recordsCount i32
//! 61 records (one compressed block when codec != 0)
//! ```
//!
//! Because the CRC starts at `attributes`, the broker can overwrite `baseOffset` on append
//! and the stored batch still verifies: batches are kept byte for byte as the client sent them.

use bytes::{Buf, Bytes};

use crate::errors;

pub const HEADER_LEN: usize = 61;
/// Bytes before `batchLength` ends: baseOffset + batchLength.
pub const LOG_OVERHEAD: usize = 12;
pub const ATTR_CODEC_MASK: i16 = 0x07;
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
pub const ATTR_CONTROL: i16 = 0x20;

/// The fixed header of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Whole batch size in bytes (batchLength + 12).
    pub size: usize,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Parses the 61-byte header at the start of `b`. Returns None when `b` is too short or
    /// the length field is impossible (smaller than the header, or negative).
    pub fn parse(b: &[u8]) -> Option<BatchHeader> {
        if b.len() < HEADER_LEN {
            return None;
        }
        let be_i64 = |o: usize| i64::from_be_bytes(b[o..o + 8].try_into().unwrap());
        let be_i32 = |o: usize| i32::from_be_bytes(b[o..o + 4].try_into().unwrap());
        let be_i16 = |o: usize| i16::from_be_bytes(b[o..o + 2].try_into().unwrap());
        let batch_length = be_i32(8);
        if batch_length < (HEADER_LEN - LOG_OVERHEAD) as i32 {
            return None;
        }
        Some(BatchHeader {
            base_offset: be_i64(0),
            size: batch_length as usize + LOG_OVERHEAD,
            magic: b[16] as i8,
            crc: u32::from_be_bytes(b[17..21].try_into().unwrap()),
            attributes: be_i16(21),
            last_offset_delta: be_i32(23),
            base_timestamp: be_i64(27),
            max_timestamp: be_i64(35),
            producer_id: be_i64(43),
            producer_epoch: be_i16(51),
            base_sequence: be_i32(53),
            records_count: be_i32(57),
        })
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    pub fn codec(&self) -> i16 {
        self.attributes & ATTR_CODEC_MASK
    }

    /// Last sequence number of the batch, wrapping at i32::MAX as Kafka does.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return -1;
        }
        let last = self.base_sequence as i64 + self.last_offset_delta as i64;
        if last > i32::MAX as i64 {
            (last - i32::MAX as i64 - 1) as i32
        } else {
            last as i32
        }
    }
}

/// True when the CRC-32C stored in the batch matches its bytes (`batch` is exactly one batch).
pub fn crc_ok(batch: &[u8], h: &BatchHeader) -> bool {
    batch.len() == h.size && crc32c::crc32c(&batch[21..]) == h.crc
}

/// Validates the records of one partition in a Produce request: exactly one magic-2 batch
/// with a correct CRC and a plausible count. Returns the header or a Kafka error code:
/// CORRUPT_MESSAGE for a CRC or framing mismatch, INVALID_RECORD for well-formed input we
/// refuse (old magic, several batches, control batches).
pub fn validate_produce(records: &[u8]) -> Result<BatchHeader, (i16, &'static str)> {
    let h = BatchHeader::parse(records)
        .ok_or((errors::CORRUPT_MESSAGE, "record batch shorter than its header"))?;
    if h.magic != 2 {
        return Err((errors::INVALID_RECORD, "only record batch magic 2 is supported"));
    }
    if h.size > records.len() {
        return Err((errors::CORRUPT_MESSAGE, "record batch length exceeds the request"));
    }
    if h.size < records.len() {
        return Err((errors::INVALID_RECORD, "exactly one record batch per partition is allowed"));
    }
    if !crc_ok(records, &h) {
        return Err((errors::CORRUPT_MESSAGE, "record batch CRC-32C mismatch"));
    }
    if h.attributes & ATTR_CONTROL != 0 {
        // Only the transaction coordinator writes control batches (as Kafka).
        return Err((errors::INVALID_RECORD, "clients may not write control batches"));
    }
    if h.is_transactional() && (h.producer_id < 0 || h.base_sequence < 0) {
        return Err((errors::INVALID_RECORD, "a transactional batch needs a producer id and sequence"));
    }
    if h.last_offset_delta < 0 || h.records_count < 0 || h.codec() > 4 {
        return Err((errors::INVALID_RECORD, "invalid record batch header"));
    }
    if h.records_count != h.last_offset_delta + 1 {
        return Err((errors::INVALID_RECORD, "record count does not match lastOffsetDelta"));
    }
    Ok(h)
}

/// A transaction marker (Kafka's control batch): one control record whose key is
/// `[version: i16 = 0, type: i16]` (0 abort, 1 commit) and whose value is
/// `[version: i16 = 0, coordinatorEpoch: i32]`, in a batch with the transactional and control
/// attributes, the producer's id and epoch, and no sequence. baseOffset is left 0 (the
/// partition owner assigns it). Kafka writes markers uncompressed; so does kaka.
pub fn control_batch(producer_id: i64, producer_epoch: i16, commit: bool, timestamp: i64) -> Vec<u8> {
    // The one record: length, attributes, timestampDelta, offsetDelta, key, value, headers.
    let mut rec = vec![0u8, 0, 0]; // attributes, timestampDelta 0, offsetDelta 0 (zigzag)
    rec.push(8); // key length 4 (zigzag)
    rec.extend_from_slice(&[0, 0, 0, commit as u8]);
    rec.push(12); // value length 6 (zigzag)
    rec.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    rec.push(0); // no headers
    let mut b = Vec::with_capacity(HEADER_LEN + 1 + rec.len());
    b.extend_from_slice(&0i64.to_be_bytes()); // baseOffset
    let batch_length = (HEADER_LEN - LOG_OVERHEAD + 1 + rec.len()) as i32;
    b.extend_from_slice(&batch_length.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes()); // partitionLeaderEpoch
    b.push(2); // magic
    b.extend_from_slice(&[0; 4]); // crc, filled below
    b.extend_from_slice(&(ATTR_TRANSACTIONAL | ATTR_CONTROL).to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes()); // lastOffsetDelta
    b.extend_from_slice(&timestamp.to_be_bytes());
    b.extend_from_slice(&timestamp.to_be_bytes());
    b.extend_from_slice(&producer_id.to_be_bytes());
    b.extend_from_slice(&producer_epoch.to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // baseSequence
    b.extend_from_slice(&1i32.to_be_bytes()); // recordsCount
    b.push((rec.len() as u8) << 1); // record length (zigzag, < 64)
    b.extend_from_slice(&rec);
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// The kind of a control batch: Some(true) for a commit marker, Some(false) for an abort
/// marker, None for anything else (not a control batch, or another control type).
pub fn control_kind(batch: &Bytes, h: &BatchHeader) -> Option<bool> {
    if !h.is_control() {
        return None;
    }
    let recs = decode_records(batch, h).ok()?;
    let key = recs.first()?.key.as_ref()?;
    if key.len() < 4 {
        return None;
    }
    match i16::from_be_bytes([key[2], key[3]]) {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// One record decoded from a batch (borrowing nothing: small copies of key and value).
#[derive(Debug, Clone)]
pub struct Record {
    pub offset_delta: i32,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value_is_null: bool,
    /// The record's raw bytes including its length prefix, for rewriting batches verbatim.
    pub raw: Bytes,
}

/// Returns the batch's records section, decompressed.
pub fn records_payload(batch: &Bytes, h: &BatchHeader) -> anyhow_lite::Result<Bytes> {
    use kafka_protocol::compression::{self as c, Decompressor};
    let mut body = batch.slice(HEADER_LEN..h.size);
    // Each codec hands the decompressed block to a closure; we copy it out as Bytes.
    macro_rules! inflate {
        ($codec:ty) => {
            <$codec>::decompress(&mut body, |b| Ok(b.copy_to_bytes(b.remaining()))).map_err(|e| e.to_string())
        };
    }
    match h.codec() {
        0 => Ok(body),
        1 => inflate!(c::Gzip),
        2 => inflate!(c::Snappy),
        3 => inflate!(c::Lz4),
        4 => inflate!(c::Zstd),
        _ => Err("unknown compression codec".into()),
    }
}

/// Decodes every record of a batch (decompressing if needed).
pub fn decode_records(batch: &Bytes, h: &BatchHeader) -> anyhow_lite::Result<Vec<Record>> {
    let payload = records_payload(batch, h)?;
    let mut out = Vec::with_capacity(h.records_count.max(0) as usize);
    let mut p = 0usize;
    let data = &payload[..];
    for _ in 0..h.records_count {
        let start = p;
        let len = read_varint(data, &mut p)?;
        if len < 0 || p + len as usize > data.len() {
            return Err("record length out of range".into());
        }
        let end = p + len as usize;
        p += 1; // attributes
        let ts_delta = read_varint(data, &mut p)?;
        let off_delta = read_varint(data, &mut p)?;
        let klen = read_varint(data, &mut p)?;
        let key = if klen < 0 {
            None
        } else {
            let k = payload.slice(p..p + klen as usize);
            p += klen as usize;
            Some(k)
        };
        let vlen = read_varint(data, &mut p)?;
        out.push(Record {
            offset_delta: off_delta as i32,
            timestamp: h.base_timestamp + ts_delta,
            key,
            value_is_null: vlen < 0,
            raw: payload.slice(start..end),
        });
        p = end;
    }
    Ok(out)
}

/// Reads one zig-zag varint (up to 64 bits) at `*p`.
pub fn read_varint(data: &[u8], p: &mut usize) -> anyhow_lite::Result<i64> {
    let mut v: u64 = 0;
    let mut shift = 0;
    loop {
        let b = *data.get(*p).ok_or("truncated varint")?;
        *p += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 63 {
            return Err("varint too long".into());
        }
    }
    Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
}

/// Builds an uncompressed batch that keeps `h`'s offsets, timestamps and producer fields but
/// holds only `records` (raw record bytes). Used by compaction; the CRC is recomputed.
pub fn rebuild_batch(h: &BatchHeader, records: &[Record]) -> Vec<u8> {
    let body: usize = records.iter().map(|r| r.raw.len()).sum();
    let mut b = Vec::with_capacity(HEADER_LEN + body);
    b.extend_from_slice(&h.base_offset.to_be_bytes());
    b.extend_from_slice(&((HEADER_LEN - LOG_OVERHEAD + body) as i32).to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&(h.attributes & !ATTR_CODEC_MASK).to_be_bytes());
    b.extend_from_slice(&h.last_offset_delta.to_be_bytes());
    b.extend_from_slice(&h.base_timestamp.to_be_bytes());
    b.extend_from_slice(&h.max_timestamp.to_be_bytes());
    b.extend_from_slice(&h.producer_id.to_be_bytes());
    b.extend_from_slice(&h.producer_epoch.to_be_bytes());
    b.extend_from_slice(&h.base_sequence.to_be_bytes());
    b.extend_from_slice(&(records.len() as i32).to_be_bytes());
    for r in records {
        b.extend_from_slice(&r.raw);
    }
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// A tiny string-error result so this module needs no error crate.
pub mod anyhow_lite {
    pub type Result<T> = std::result::Result<T, String>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(v: i64, out: &mut Vec<u8>) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        loop {
            let b = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
    }

    /// Builds an uncompressed batch of keyed records with the given timestamps.
    pub fn make_batch(keys: &[&[u8]], ts: &[i64]) -> Vec<u8> {
        let mut recs = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            let mut r = Vec::new();
            r.push(0);
            varint(ts[i] - ts[0], &mut r);
            varint(i as i64, &mut r);
            varint(k.len() as i64, &mut r);
            r.extend_from_slice(k);
            varint(1, &mut r);
            r.push(b'v');
            varint(0, &mut r);
            let mut full = Vec::new();
            varint(r.len() as i64, &mut full);
            full.extend_from_slice(&r);
            recs.push(Record {
                offset_delta: i as i32,
                timestamp: ts[i],
                key: Some(Bytes::copy_from_slice(k)),
                value_is_null: false,
                raw: Bytes::from(full),
            });
        }
        let h = BatchHeader {
            base_offset: 0,
            size: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: keys.len() as i32 - 1,
            base_timestamp: ts[0],
            max_timestamp: *ts.iter().max().unwrap(),
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            records_count: keys.len() as i32,
        };
        rebuild_batch(&h, &recs)
    }

    #[test]
    fn roundtrip_and_crc() {
        let b = make_batch(&[b"a", b"bb"], &[100, 105]);
        let h = validate_produce(&b).expect("valid");
        assert_eq!(h.records_count, 2);
        assert_eq!(h.max_timestamp, 105);
        let recs = decode_records(&Bytes::from(b.clone()), &h).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].key.as_deref(), Some(&b"bb"[..]));
        assert_eq!(recs[1].timestamp, 105);
        let mut bad = b.clone();
        let n = bad.len();
        bad[n - 2] ^= 0xff;
        assert_eq!(validate_produce(&bad).unwrap_err().0, errors::CORRUPT_MESSAGE);
        // baseOffset is outside the CRC.
        let mut moved = b.clone();
        moved[0..8].copy_from_slice(&77i64.to_be_bytes());
        assert!(validate_produce(&moved).is_ok());
        let mut two = b.clone();
        two.extend_from_slice(&b);
        assert_eq!(validate_produce(&two).unwrap_err().0, errors::INVALID_RECORD);
    }

    /// A marker is a valid batch (CRC, framing) that the protocol crate decodes as a control
    /// record with Kafka's key and value layout, and that `control_kind` reads back.
    #[test]
    fn control_batch_is_a_kafka_marker() {
        for commit in [false, true] {
            let b = control_batch(42, 7, commit, 1_700_000_000_000);
            let h = BatchHeader::parse(&b).unwrap();
            assert!(crc_ok(&b, &h));
            assert!(h.is_control() && h.is_transactional());
            assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence, h.records_count), (42, 7, -1, 1));
            let bytes = Bytes::from(b.clone());
            assert_eq!(control_kind(&bytes, &h), Some(commit));
            let mut buf = bytes.clone();
            let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut buf).unwrap();
            let r = &set.records[0];
            assert!(r.control && r.transactional);
            assert_eq!(r.key.as_deref(), Some(&[0u8, 0, 0, commit as u8][..]));
            assert_eq!(r.value.as_deref(), Some(&[0u8; 6][..]));
            // Clients may not write one.
            assert_eq!(validate_produce(&b).unwrap_err().0, errors::INVALID_RECORD);
        }
    }

    #[test]
    fn sequence_wraps() {
        let mut h = BatchHeader::parse(&make_batch(&[b"a", b"b", b"c"], &[1, 1, 1])).unwrap();
        h.base_sequence = i32::MAX - 1;
        assert_eq!(h.last_sequence(), 0);
    }
}
