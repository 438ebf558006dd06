//! Fetch with long polling: answer at once when there is data (>= min_bytes) or an error;
//! otherwise wait until a high watermark moves or max_wait_ms passes, then answer with what
//! there is. Only the first batch of the answer may exceed the byte limits (KIP-74). v7+
//! requests may belong to a fetch session (KIP-227, `sessions.rs`): an incremental request
//! fetches the session's partitions and is answered with those that have news.
//!
//! The answer is encoded here rather than by the protocol crate: record bytes (cached batches,
//! one read from a segment, or a segment range read while sending) go out as pieces, never
//! copied into a response buffer. `encode_pieces` writes exactly the bytes `FetchResponse::encode` would
//! (a unit test holds it to that for every version kaka speaks).

use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{FetchRequest, FetchResponse};

use super::Req;
use crate::errors;
use crate::sessions::{self, Begin, TopicKey};
use crate::wire::{self, Outgoing, Piece};

/// Topics of an answer, in request order: (name, id, [(partition index, its part)]). v4-v12
/// answers name each topic, v13+ give its id instead.
type TopicParts = Vec<(String, [u8; 16], Vec<(i32, Part)>)>;

/// One partition's part of the answer.
struct Part {
    error: i16,
    hw: i64,
    /// The last stable offset (the high watermark unless a transaction is open).
    lso: i64,
    log_start: i64,
    /// read_committed: aborted transactions (producer id, first offset) overlapping the answer.
    aborted: Vec<(i64, i64)>,
    records: Vec<Piece>,
}

impl Part {
    fn error(error: i16, hw: i64, log_start: i64) -> Part {
        Part { error, hw, lso: hw, log_start, aborted: Vec::new(), records: Vec::new() }
    }
}

pub async fn fetch(req: &Req, mut r: FetchRequest) -> Outgoing {
    // v13+ names topics by id; an id nobody knows is UNKNOWN_TOPIC_ID for its partitions.
    let by_id = req.version >= 13;
    // Fetch sessions (v7+, KIP-227, see sessions.rs): a full request opens one, an
    // incremental one fetches the session's partitions and is answered with the news only.
    let session =
        if req.version >= 7 { req.broker.fetch_sessions.begin(&r, by_id) } else { Begin::Sessionless };
    let (session_id, incremental) = match &session {
        Begin::Error(code) => {
            let mut resp = FetchResponse::default();
            resp.error_code = *code;
            return Outgoing::Frame(wire::encode(req.correlation_id, req.version, &resp));
        }
        Begin::Sessionless => (0, false),
        Begin::Full { id } => (*id, false),
        Begin::Incremental { id, parts } => {
            r.topics = sessions::as_topics(parts);
            (*id, true)
        }
    };
    let deadline = Instant::now() + Duration::from_millis(r.max_wait_ms.max(0) as u64);
    let min_bytes = r.min_bytes.max(0) as usize;
    let max_bytes = if req.version >= 3 && r.max_bytes > 0 { r.max_bytes as usize } else { usize::MAX };
    // read_committed reads up to the last stable offset and learns the aborted transactions
    // there, so the client drops their records (it keeps skipping a producer's records from
    // the aborted transaction's first offset until it meets that producer's abort marker).
    let read_committed = r.isolation_level == 1;
    // Resolve partitions once; subscribe to their high watermarks for the wait.
    let mut targets = Vec::new();
    let mut watches = Vec::new();
    let missing = if by_id { errors::UNKNOWN_TOPIC_ID } else { errors::UNKNOWN_TOPIC_OR_PARTITION };
    let mut resolved = Vec::with_capacity(r.topics.len());
    for t in &r.topics {
        let topic =
            if by_id { req.broker.topic_by_id(t.topic_id.as_bytes()) } else { req.broker.topic(&t.topic.0) };
        resolved.push(topic.as_ref().map(|tp| (tp.name.clone(), tp.id)));
        for p in &t.partitions {
            let part = topic
                .as_ref()
                .and_then(|tp| tp.partitions.get(p.partition as usize))
                .map(|x| x.shared.clone());
            if let Some(s) = &part {
                watches.push(s.hw.subscribe());
            }
            targets.push(part);
        }
    }
    // Test hook (--debug-hold-fetches-at): reads end at the held offset while its file exists.
    let held = req.broker.cfg.hold_fetches.as_ref().filter(|(_, file)| file.exists()).map(|(at, _)| *at);
    let parts = loop {
        let mut parts = Vec::with_capacity(targets.len());
        let mut total = 0usize;
        let mut any_error = false;
        let mut i = 0;
        for t in &r.topics {
            for p in &t.partitions {
                let part = &targets[i];
                i += 1;
                let Some(s) = part else {
                    any_error = true;
                    parts.push(Part::error(missing, -1, -1));
                    continue;
                };
                // The last stable offset before the high watermark: a marker moving the LSO
                // is durable once the hw passes it, so the pair is never ahead of the disk.
                let lso = s.lso();
                let (hw, log_start) = (s.hw(), s.log_start());
                let lso = lso.min(hw);
                if req.version >= 9 && p.current_leader_epoch > 0 {
                    any_error = true;
                    parts.push(Part { lso, ..Part::error(errors::UNKNOWN_LEADER_EPOCH, hw, log_start) });
                    continue;
                }
                let budget = max_bytes.saturating_sub(total);
                if budget == 0 && total > 0 {
                    parts.push(Part { lso, ..Part::error(0, hw, log_start) });
                    continue;
                }
                let limit = (p.partition_max_bytes.max(0) as usize).min(budget).max(1);
                let upto = if read_committed { lso } else { hw };
                let upto = held.map_or(upto, |at| upto.min(at.max(p.fetch_offset)));
                // Kafka's rule (KIP-74): only the first batch of the whole answer may exceed
                // max_bytes or its partition_max_bytes; once the answer holds records, every
                // later batch must fit both.
                match s.read(p.fetch_offset, limit, upto, total > 0).await {
                    Ok(records) => {
                        total += records.iter().map(Piece::len).sum::<usize>();
                        let aborted = if read_committed && !records.is_empty() {
                            s.aborted_between(p.fetch_offset, upto)
                        } else {
                            Vec::new()
                        };
                        parts.push(Part { error: 0, hw, lso, log_start, aborted, records });
                    }
                    Err(code) => {
                        any_error = true;
                        parts.push(Part { lso, ..Part::error(code, hw, log_start) });
                    }
                }
            }
        }
        if any_error || total >= min_bytes.max(1) || Instant::now() >= deadline || watches.is_empty() {
            break parts;
        }
        // A closed watch means the topic was deleted meanwhile: answer with what we have.
        if watches.iter().any(|w| w.has_changed().is_err()) {
            break parts;
        }
        // Nothing (or too little) yet: park until any watermark moves or the deadline.
        let changed = async {
            let futs: Vec<_> = watches.iter_mut().map(|w| Box::pin(w.changed())).collect();
            let _ = futures_select_any(futs).await;
        };
        if tokio::time::timeout_at(deadline.into(), changed).await.is_err() {
            // Deadline: one last read so the answer reflects the latest state.
            continue;
        }
    };
    let mut topics: TopicParts = Vec::with_capacity(r.topics.len());
    let mut parts = parts.into_iter();
    for (t, known) in r.topics.into_iter().zip(resolved) {
        let ps: Vec<(i32, Part)> =
            t.partitions.iter().map(|p| (p.partition, parts.next().unwrap_or_else(empty_part))).collect();
        // Answer with the topic as the request named it (an unknown id is echoed back).
        let (name, id) = known.unwrap_or_else(|| (t.topic.0.to_string(), *t.topic_id.as_bytes()));
        let ps = if session_id == 0 {
            ps
        } else {
            // Remember what the client was told; an incremental answer carries only news.
            let k = if by_id {
                TopicKey::Id(*t.topic_id.as_bytes())
            } else {
                TopicKey::Name(t.topic.0.to_string())
            };
            ps.into_iter()
                .filter(|(index, p)| {
                    let eventful = p.error != 0 || !p.records.is_empty();
                    let news = req.broker.fetch_sessions.record(
                        session_id,
                        &k,
                        *index,
                        (p.hw, p.lso, p.log_start),
                        eventful,
                    );
                    !incremental || news
                })
                .collect()
        };
        if !ps.is_empty() || !incremental {
            topics.push((name, id, ps));
        }
    }
    Outgoing::Pieces(encode_pieces(req.correlation_id, req.version, session_id, &topics))
}

fn empty_part() -> Part {
    Part::error(errors::UNKNOWN_TOPIC_OR_PARTITION, -1, -1)
}

/// Big-endian writers for the Fetch answer's two encodings: classic (v4-v11: int32 array
/// counts, int16 string and int32 bytes lengths) and flexible (v12+: unsigned-varint lengths
/// plus one, and an empty tagged-field section after every struct).
struct Enc {
    flexible: bool,
}

impl Enc {
    fn uvarint(b: &mut BytesMut, mut v: u32) {
        while v >= 0x80 {
            b.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        b.put_u8(v as u8);
    }
    fn count(&self, b: &mut BytesMut, n: usize) {
        if self.flexible {
            Enc::uvarint(b, n as u32 + 1);
        } else {
            b.put_i32(n as i32);
        }
    }
    fn string(&self, b: &mut BytesMut, s: &str) {
        if self.flexible {
            Enc::uvarint(b, s.len() as u32 + 1);
        } else {
            b.put_i16(s.len() as i16);
        }
        b.put_slice(s.as_bytes());
    }
    fn no_tags(&self, b: &mut BytesMut) {
        if self.flexible {
            b.put_u8(0);
        }
    }
}

/// The whole Fetch response frame (size prefix, header, body) as pieces: the metadata in
/// small buffers, each partition's record batches as they were handed over.
fn encode_pieces(correlation_id: i32, version: i16, session_id: i32, topics: &TopicParts) -> Vec<Piece> {
    let e = Enc { flexible: version >= 12 };
    let mut pieces: Vec<Piece> = Vec::new();
    let mut cur = BytesMut::with_capacity(256);
    cur.put_i32(correlation_id);
    e.no_tags(&mut cur); // response header v1 for flexible versions
    cur.put_i32(0); // throttle_time_ms
    if version >= 7 {
        cur.put_i16(0); // error_code
        cur.put_i32(session_id);
    }
    e.count(&mut cur, topics.len());
    for (name, id, parts) in topics {
        if version >= 13 {
            cur.put_slice(id);
        } else {
            e.string(&mut cur, name);
        }
        e.count(&mut cur, parts.len());
        for (index, p) in parts {
            cur.put_i32(*index);
            cur.put_i16(p.error);
            cur.put_i64(p.hw);
            cur.put_i64(p.lso);
            if version >= 5 {
                cur.put_i64(p.log_start);
            }
            e.count(&mut cur, p.aborted.len());
            for (producer_id, first_offset) in &p.aborted {
                cur.put_i64(*producer_id);
                cur.put_i64(*first_offset);
                e.no_tags(&mut cur);
            }
            if version >= 11 {
                cur.put_i32(-1); // preferred_read_replica
            }
            let len: usize = p.records.iter().map(Piece::len).sum();
            if e.flexible {
                Enc::uvarint(&mut cur, len as u32 + 1);
            } else {
                cur.put_i32(len as i32);
            }
            if len > 0 {
                pieces.push(Piece::Mem(cur.split().freeze()));
                pieces.extend(p.records.iter().filter(|r| r.len() > 0).cloned());
            }
            e.no_tags(&mut cur);
        }
        e.no_tags(&mut cur);
    }
    e.no_tags(&mut cur);
    pieces.push(Piece::Mem(cur.freeze()));
    let size: usize = pieces.iter().map(Piece::len).sum();
    pieces.insert(0, Piece::Mem(Bytes::copy_from_slice(&(size as i32).to_be_bytes())));
    pieces
}

/// Resolves when the first of `futs` resolves (a tiny select over a vector, so the crate
/// needs no futures dependency).
async fn futures_select_any<F: std::future::Future + Unpin>(mut futs: Vec<F>) {
    std::future::poll_fn(|cx| {
        for f in futs.iter_mut() {
            if std::pin::Pin::new(f).poll(cx).is_ready() {
                return std::task::Poll::Ready(());
            }
        }
        std::task::Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::messages::{ProducerId, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn joined(pieces: &[Piece]) -> Vec<u8> {
        let mem = |p: &Piece| match p {
            Piece::Mem(b) => b.to_vec(),
            Piece::File(_) => unreachable!("the shapes hold bytes only"),
        };
        pieces.iter().flat_map(mem).collect()
    }

    /// The hand encoder writes byte for byte what the protocol crate writes, for every
    /// version kaka advertises and for answers with several topics, partitions, errors,
    /// empty and multi-piece record sets (including lengths that need multi-byte varints).
    #[test]
    fn pieces_match_the_protocol_crate() {
        let batch = |n: usize, seed: u8| {
            Piece::Mem((0..n).map(|i| seed.wrapping_add(i as u8)).collect::<Vec<u8>>().into())
        };
        let shapes: Vec<TopicParts> = vec![
            vec![],
            vec![("t".into(), [7; 16], vec![])],
            vec![(
                "orders".into(),
                [0x5a; 16],
                vec![
                    (
                        0,
                        Part {
                            error: 0,
                            hw: 42,
                            lso: 40,
                            log_start: 3,
                            aborted: vec![(9, 3), (1 << 33, 30)],
                            records: vec![batch(70, 1)],
                        },
                    ),
                    (1, Part::error(0, 0, 0)),
                    (2, Part::error(1, 9, 9)),
                    (
                        7,
                        Part {
                            records: vec![batch(130, 2), batch(20_000, 3), batch(1, 4)],
                            ..Part::error(0, 1 << 40, 5)
                        },
                    ),
                ],
            )],
            vec![
                ("a".into(), [1; 16], vec![(0, Part::error(3, -1, -1))]),
                (
                    "b-long-topic-name.x_y".into(),
                    *b"0123456789abcdef",
                    vec![(5, Part { records: vec![batch(300_000, 5)], ..Part::error(0, 77, 0) })],
                ),
            ],
        ];
        for shape in &shapes {
            for version in 4..=16i16 {
                let mut resp = FetchResponse::default();
                for (name, id, parts) in shape {
                    let mut tr = FetchableTopicResponse::default();
                    if version >= 13 {
                        tr.topic_id = uuid::Uuid::from_bytes(*id);
                    } else {
                        tr.topic = TopicName(StrBytes::from_string(name.clone()));
                    }
                    for (index, p) in parts {
                        let mut pd = PartitionData::default();
                        pd.partition_index = *index;
                        pd.error_code = p.error;
                        pd.high_watermark = p.hw;
                        pd.last_stable_offset = p.lso;
                        pd.aborted_transactions = Some(
                            p.aborted
                                .iter()
                                .map(|&(pid, first)| {
                                    let mut a = AbortedTransaction::default();
                                    a.producer_id = ProducerId(pid);
                                    a.first_offset = first;
                                    a
                                })
                                .collect(),
                        );
                        if version >= 5 {
                            pd.log_start_offset = p.log_start;
                        }
                        pd.records = Some(Bytes::from(joined(&p.records)));
                        tr.partitions.push(pd);
                    }
                    resp.responses.push(tr);
                }
                let session_id = if version >= 7 { 0x1234_5678 } else { 0 };
                resp.session_id = session_id;
                let want = wire::encode(1234, version, &resp);
                let got = joined(&encode_pieces(1234, version, session_id, shape));
                assert_eq!(got, want.to_vec(), "version {version}, {} topics", shape.len());
            }
        }
    }
}
