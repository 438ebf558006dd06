//! Produce: validate each partition's batch on the connection task (CRC, framing, keys for
//! compacted topics), reserve memory, and enqueue it to the partition owner in request order.
//! The response is built once every owner has answered (after its group fdatasync).

use std::future::Future;
use std::pin::Pin;

use bytes::BytesMut;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use tokio::sync::oneshot;

use super::{str_bytes, Req};
use crate::batch;
use crate::errors;
use crate::partition::{AppendResult, Msg};
use crate::wire;

pub enum Started {
    /// acks=0: the batches are queued and no response is sent.
    NoResponse,
    Pending(Pin<Box<dyn Future<Output = Option<BytesMut>> + Send>>),
}

enum Slot {
    Done(AppendResult),
    Waiting(oneshot::Receiver<AppendResult>),
    /// INVALID_RECORD naming every bad record (index in the batch, message), as Kafka's
    /// record_errors do, so the client fails only those records.
    BadRecords(AppendResult, Vec<(i32, String)>),
}

fn refused(code: i16, msg: &str) -> Slot {
    Slot::Done(AppendResult { error: code, base_offset: -1, log_start: -1, message: Some(msg.to_string()) })
}

pub fn start(req: Req, r: ProduceRequest) -> Started {
    let acks = r.acks;
    let tid = r.transactional_id.as_ref().map(|t| t.0.to_string()).filter(|t| !t.is_empty());
    let bad_acks = !matches!(acks, -1..=1);
    let mut topics = Vec::with_capacity(r.topic_data.len());
    for t in r.topic_data {
        let name = t.name.0.to_string();
        let topic = if bad_acks {
            Err(errors::INVALID_REQUIRED_ACKS)
        } else {
            req.broker.topic_or_create(&name, true)
        };
        let mut slots = Vec::with_capacity(t.partition_data.len());
        for p in t.partition_data {
            let slot = match &topic {
                Err(code) => refused(*code, "topic unavailable"),
                Ok(topic) => match topic.partitions.get(p.index as usize) {
                    None => refused(errors::UNKNOWN_TOPIC_OR_PARTITION, "no such partition"),
                    Some(part) => {
                        let cfg = topic.config();
                        match &p.records {
                            // As Kafka: a batch over the topic's max.message.bytes is refused.
                            Some(r) if r.len() > cfg.max_message_bytes => refused(
                                errors::MESSAGE_TOO_LARGE,
                                "batch larger than the topic's max.message.bytes",
                            ),
                            _ => enqueue(&req, cfg.compact, part, p.records, acks, tid.as_deref()),
                        }
                    }
                },
            };
            slots.push((p.index, slot));
        }
        topics.push((t.name, slots));
    }
    if acks == 0 {
        return Started::NoResponse;
    }
    let (cid, version) = (req.correlation_id, req.version);
    let hold_acks = req.broker.cfg.hold_acks.clone();
    Started::Pending(Box::pin(async move {
        let mut resp = ProduceResponse::default();
        for (name, slots) in topics {
            let mut tr = TopicProduceResponse::default();
            tr.name = name;
            for (index, slot) in slots {
                let mut bad_records = Vec::new();
                let res = match slot {
                    Slot::Done(r) => r,
                    Slot::BadRecords(r, bad) => {
                        bad_records = bad;
                        r
                    }
                    Slot::Waiting(rx) => rx.await.unwrap_or(AppendResult {
                        error: errors::KAFKA_STORAGE_ERROR,
                        base_offset: -1,
                        log_start: -1,
                        message: Some("partition stopped".into()),
                    }),
                };
                // Test hook (--debug-hold-acks-at): appended, but not answered while the file
                // exists.
                if let Some((at, file)) = &hold_acks {
                    while res.base_offset >= *at && file.exists() {
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                }
                let mut pr = PartitionProduceResponse::default();
                pr.index = index;
                pr.error_code = res.error;
                pr.base_offset = res.base_offset;
                pr.log_append_time_ms = -1;
                if version >= 5 {
                    pr.log_start_offset = res.log_start;
                }
                if res.error != errors::NONE {
                    if let Some(m) = &res.message {
                        if version >= 8 {
                            pr.error_message = Some(str_bytes(m));
                            if !bad_records.is_empty() {
                                for (index, msg) in &bad_records {
                                    let mut e = BatchIndexAndErrorMessage::default();
                                    e.batch_index = *index;
                                    e.batch_index_error_message = Some(str_bytes(msg));
                                    pr.record_errors.push(e);
                                }
                            } else if res.error == errors::INVALID_RECORD {
                                let mut e = BatchIndexAndErrorMessage::default();
                                e.batch_index = 0;
                                e.batch_index_error_message = Some(str_bytes(m));
                                pr.record_errors.push(e);
                            }
                        }
                    }
                }
                tr.partition_responses.push(pr);
            }
            resp.responses.push(tr);
        }
        Some(wire::encode(cid, version, &resp))
    }))
}

fn enqueue(
    req: &Req,
    compact: bool,
    part: &crate::partition::Partition,
    records: Option<bytes::Bytes>,
    acks: i16,
    tid: Option<&str>,
) -> Slot {
    let Some(records) = records else {
        return refused(errors::CORRUPT_MESSAGE, "no records");
    };
    let h = match batch::validate_produce(&records) {
        Ok(h) => h,
        Err((code, msg)) => {
            tracing::warn!(topic = %part.shared.topic, partition = part.shared.partition, "refused batch: {msg}");
            return refused(code, msg);
        }
    };
    if h.is_transactional() {
        // As Kafka's produce verification (KIP-890): the producer must be its transactional
        // id's current one and have added this partition to its ongoing transaction.
        let Some(tid) = tid else {
            return refused(errors::INVALID_TXN_STATE, "transactional batch without a transactional id");
        };
        let (topic, index) = (&part.shared.topic, part.shared.partition);
        if let Err(code) = req.broker.txns.verify(tid, h.producer_id, h.producer_epoch, topic, index) {
            return refused(code, "the partition is not in this producer's ongoing transaction");
        }
    }
    if h.codec() == 4 && req.version < 7 {
        return refused(76, "zstd needs Produce v7 or later"); // UNSUPPORTED_COMPRESSION_TYPE
    }
    if compact {
        // Compacted topics keep the latest record per key, so every record needs one.
        match batch::decode_records(&records, &h) {
            Ok(recs) if recs.iter().all(|r| r.key.is_some()) => {}
            Ok(recs) => {
                // Every keyless record is named, not just the first (the batch is refused whole).
                let what = format!(
                    "Compacted topic cannot accept message without key in topic partition {}-{}.",
                    part.shared.topic, part.shared.partition
                );
                let bad: Vec<(i32, String)> = recs
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.key.is_none())
                    .map(|(i, _)| (i as i32, what.clone()))
                    .collect();
                let shown: Vec<String> = bad.iter().take(3).map(|(i, _)| i.to_string()).collect();
                let msg = format!(
                    "One or more records have been rejected due to {} record errors in total \
                     (records {}{}): compacted topic cannot accept a record without a key",
                    bad.len(),
                    shown.join(", "),
                    if bad.len() > 3 { ", ..." } else { "" }
                );
                let Slot::Done(r) = refused(errors::INVALID_RECORD, &msg) else { unreachable!() };
                return Slot::BadRecords(r, bad);
            }
            Err(e) => {
                tracing::warn!("undecodable records: {e}");
                return refused(errors::CORRUPT_MESSAGE, "records do not decode");
            }
        }
    }
    if part.shared.open_error.is_some() || part.shared.failed.load(std::sync::atomic::Ordering::Acquire) {
        return refused(errors::KAFKA_STORAGE_ERROR, "partition storage failed; writes refused");
    }
    let mem = &req.broker.memory;
    if !mem.try_reserve(records.len()) {
        return if records.len() > req.broker.cfg.max_memory {
            refused(errors::RECORD_LIST_TOO_LARGE, "batch larger than --max-memory")
        } else {
            refused(errors::NOT_ENOUGH_REPLICAS, "broker memory limit (--max-memory) reached; retry")
        };
    }
    let (tx, rx) = if acks == 0 {
        (None, None)
    } else {
        let (tx, rx) = oneshot::channel();
        (Some(tx), Some(rx))
    };
    let reserved = records.len();
    if part.tx.send(Msg::Append { batch: records, header: h, reply: tx, reserved }).is_err() {
        mem.release(reserved);
        return refused(errors::KAFKA_STORAGE_ERROR, "partition stopped");
    }
    match rx {
        Some(rx) => Slot::Waiting(rx),
        None => refused(errors::NONE, ""),
    }
}
