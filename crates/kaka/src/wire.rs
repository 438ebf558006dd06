//! The one place that knows the Kafka framing and which API versions kaka speaks.
//!
//! Frame: 4-byte big-endian size, then the request (header + body). A response is the same
//! size prefix, a response header (correlation id, plus tagged fields for flexible versions,
//! except ApiVersions whose response header is always v0), then the body.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ResponseHeader;
use kafka_protocol::protocol::{Encodable, HeaderVersion};

/// (api key, min version, max version) kaka implements. Advertised exactly, so clients never
/// send anything else; each range is the intersection of what librdkafka 2.0-2.12, the Java
/// 4.x client and the kafka-protocol 0.18 codecs share, limited to what the handlers do fully
/// (no topic-id addressed Produce, no batched FindCoordinator/OffsetFetch).
pub const SUPPORTED: &[(i16, i16, i16)] = &[
    (0, 3, 10), // Produce
    (1, 4, 16), // Fetch (13+ names topics by id)
    (2, 1, 7),  // ListOffsets (-3 max timestamp from v7)
    (3, 0, 12), // Metadata
    (8, 2, 8),  // OffsetCommit
    (9, 1, 7),  // OffsetFetch (8+ batches groups)
    (10, 0, 3), // FindCoordinator (4+ batches keys)
    (11, 0, 5), // JoinGroup
    (12, 0, 4), // Heartbeat
    (13, 0, 2), // LeaveGroup (3+ member lists)
    (14, 0, 4), // SyncGroup
    (15, 0, 5), // DescribeGroups
    (16, 0, 5), // ListGroups (v4 states filter, v5 group types filter: every group is classic)
    (18, 0, 3), // ApiVersions
    (19, 2, 4), // CreateTopics
    (20, 1, 4), // DeleteTopics
    (21, 0, 2), // DeleteRecords
    (22, 0, 4), // InitProducerId
    (23, 2, 4), // OffsetForLeaderEpoch
    (24, 0, 3), // AddPartitionsToTxn (4+ is the brokers' batched verification)
    (25, 0, 3), // AddOffsetsToTxn (4+ signals transaction protocol v2, KIP-890)
    (26, 0, 3), // EndTxn (4+: KIP-890's TRANSACTION_ABORTABLE, 5+ epoch bump per transaction)
    (28, 0, 3), // TxnOffsetCommit (4+: KIP-890)
    (29, 1, 3), // DescribeAcls (SECURITY_DISABLED: no authorizer, as Kafka without one)
    (30, 1, 3), // CreateAcls (likewise)
    (31, 1, 3), // DeleteAcls (likewise)
    (32, 1, 4), // DescribeConfigs (v0 is gone from Kafka 4 too)
    (33, 0, 2), // AlterConfigs
    (35, 1, 4), // DescribeLogDirs
    (37, 0, 3), // CreatePartitions
    (42, 0, 2), // DeleteGroups
    (44, 0, 1), // IncrementalAlterConfigs
    (47, 0, 0), // OffsetDelete
    (60, 0, 2), // DescribeCluster
    (65, 0, 0), // DescribeTransactions
    (66, 0, 1), // ListTransactions (2+ filters ids by a regular expression)
    (75, 0, 0), // DescribeTopicPartitions (paged with a cursor, KIP-966)
];

pub const API_VERSIONS_KEY: i16 = 18;

/// A response ready for the socket: one encoded frame, or a frame in pieces (size prefix and
/// header included), so that record bytes shared with the tail cache are never copied again
/// in user space and ranges of segment files are read slice by slice as they are sent.
pub enum Outgoing {
    Frame(BytesMut),
    Pieces(Vec<Piece>),
}

/// One piece of a response: bytes in hand, or a range of a segment read while sending.
#[derive(Clone)]
pub enum Piece {
    Mem(Bytes),
    File(FileRange),
}

/// Whole record batches of a segment, `pos..pos + len`. The segment's read descriptor is kept
/// open by the `Arc`, so the range stays readable even if retention or compaction drops the
/// segment before the answer has gone out.
#[derive(Clone)]
pub struct FileRange {
    pub seg: std::sync::Arc<crate::segment::Segment>,
    pub pos: u64,
    pub len: usize,
}

impl Piece {
    pub fn len(&self) -> usize {
        match self {
            Piece::Mem(b) => b.len(),
            Piece::File(f) => f.len,
        }
    }
}

pub fn supported(key: i16, version: i16) -> bool {
    SUPPORTED.iter().any(|&(k, lo, hi)| k == key && (lo..=hi).contains(&version))
}

pub fn known_key(key: i16) -> bool {
    SUPPORTED.iter().any(|&(k, _, _)| k == key)
}

/// The fixed start of every request header (v1 and v2 alike).
#[derive(Debug, Clone, Copy)]
pub struct RawHeader {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

impl RawHeader {
    pub fn parse(b: &[u8]) -> Option<RawHeader> {
        if b.len() < 8 {
            return None;
        }
        Some(RawHeader {
            api_key: i16::from_be_bytes([b[0], b[1]]),
            api_version: i16::from_be_bytes([b[2], b[3]]),
            correlation_id: i32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        })
    }
}

/// Encodes a whole response frame (size prefix, header, body).
pub fn encode<R: Encodable + HeaderVersion>(correlation_id: i32, version: i16, r: &R) -> BytesMut {
    let hv = R::header_version(version);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let size = header.compute_size(hv).unwrap_or(4) + r.compute_size(version).unwrap_or(0);
    let mut buf = BytesMut::with_capacity(4 + size);
    buf.put_i32(0);
    let ok = header.encode(&mut buf, hv).is_ok() && r.encode(&mut buf, version).is_ok();
    if !ok {
        // Only reachable if a handler filled a field the version cannot carry; answer
        // with an empty frame body rather than a half-written one.
        tracing::error!(correlation_id, version, "response encoding failed");
        buf.truncate(4);
        buf.put_i32(correlation_id);
    }
    let n = (buf.len() - 4) as i32;
    buf[0..4].copy_from_slice(&n.to_be_bytes());
    buf
}

/// Answer for an API key kaka does not implement, or a version outside the advertised range
/// (for APIs other than ApiVersions, whose fallback is a proper v0 body). There is no body
/// schema to follow for an unknown key, so the frame carries the correlation id and
/// UNSUPPORTED_VERSION as a bare int16 (the leading field of most error responses) and the
/// connection stays open; clients only send what ApiVersions advertised, so only hand-made
/// requests see this.
pub fn unsupported(correlation_id: i32) -> BytesMut {
    let mut b = BytesMut::with_capacity(10);
    b.put_i32(6);
    b.put_i32(correlation_id);
    b.put_i16(crate::errors::UNSUPPORTED_VERSION);
    b
}
