//! Transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn (and the
//! transactional half of InitProducerId, in admin.rs). The logic is in txn.rs; this maps
//! requests and answers, including Kafka's per-version error codes: PRODUCER_FENCED is
//! answered as INVALID_PRODUCER_EPOCH to versions older than KIP-588's.

use bytes::BytesMut;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    describe_transactions_response, list_transactions_response, AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    DescribeTransactionsRequest, DescribeTransactionsResponse, EndTxnRequest, EndTxnResponse,
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};

use super::{str_bytes, topic_name, Req};
use crate::errors;
use crate::groups::Committed;
use crate::partition::now_ms;
use crate::txn::TxnState;
use crate::wire;

/// PRODUCER_FENCED exists for clients from `since` on; older ones get INVALID_PRODUCER_EPOCH.
pub fn fenced_for(code: i16, version: i16, since: i16) -> i16 {
    if code == errors::PRODUCER_FENCED && version < since {
        errors::INVALID_PRODUCER_EPOCH
    } else {
        code
    }
}

fn code_of(r: Result<(), i16>) -> i16 {
    r.err().unwrap_or(errors::NONE)
}

pub async fn add_partitions(req: &Req, r: AddPartitionsToTxnRequest) -> BytesMut {
    let tid = r.v3_and_below_transactional_id.0.to_string();
    let (pid, epoch) = (r.v3_and_below_producer_id.0, r.v3_and_below_producer_epoch);
    // Every partition must exist; otherwise those are UNKNOWN_TOPIC_OR_PARTITION and the
    // rest OPERATION_NOT_ATTEMPTED, and nothing is added (as Kafka).
    let mut parts = Vec::new();
    let mut unknown = Vec::new();
    for t in &r.v3_and_below_topics {
        let topic = req.broker.topic(&t.name.0);
        for &p in &t.partitions {
            let ok = topic.as_ref().is_some_and(|tp| p >= 0 && (p as usize) < tp.partitions.len());
            if ok {
                parts.push((t.name.0.to_string(), p));
            } else {
                unknown.push((t.name.0.to_string(), p));
            }
        }
    }
    let code = if !unknown.is_empty() {
        errors::OPERATION_NOT_ATTEMPTED
    } else if tid.is_empty() {
        errors::INVALID_REQUEST
    } else {
        code_of(req.broker.txns.add_partitions(&req.broker, &tid, pid, epoch, parts).await)
    };
    let code = fenced_for(code, req.version, 2);
    let mut resp = AddPartitionsToTxnResponse::default();
    for t in r.v3_and_below_topics {
        let mut tr = AddPartitionsToTxnTopicResult::default();
        for p in t.partitions {
            let mut pr = AddPartitionsToTxnPartitionResult::default();
            pr.partition_index = p;
            let missing = unknown.iter().any(|(n, i)| *n == *t.name.0 && *i == p);
            pr.partition_error_code = if missing { errors::UNKNOWN_TOPIC_OR_PARTITION } else { code };
            tr.results_by_partition.push(pr);
        }
        tr.name = t.name;
        resp.results_by_topic_v3_and_below.push(tr);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

pub async fn add_offsets(req: &Req, r: AddOffsetsToTxnRequest) -> BytesMut {
    let tid = r.transactional_id.0.to_string();
    let group = r.group_id.0.to_string();
    let code = if tid.is_empty() || group.is_empty() {
        errors::INVALID_REQUEST
    } else {
        code_of(
            req.broker.txns.add_offsets(&req.broker, &tid, r.producer_id.0, r.producer_epoch, &group).await,
        )
    };
    let mut resp = AddOffsetsToTxnResponse::default();
    resp.error_code = fenced_for(code, req.version, 2);
    wire::encode(req.correlation_id, req.version, &resp)
}

pub async fn txn_offset_commit(req: &Req, r: TxnOffsetCommitRequest) -> BytesMut {
    let tid = r.transactional_id.0.to_string();
    let group = r.group_id.0.to_string();
    let mut offsets = Vec::new();
    let mut unknown = Vec::new();
    for t in &r.topics {
        let topic = req.broker.topic(&t.name.0);
        for p in &t.partitions {
            let i = p.partition_index;
            if topic.as_ref().is_some_and(|tp| i >= 0 && (i as usize) < tp.partitions.len()) {
                offsets.push((
                    t.name.0.to_string(),
                    i,
                    Committed {
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                    },
                ));
            } else {
                unknown.push((t.name.0.to_string(), i));
            }
        }
    }
    let code = if tid.is_empty() || group.is_empty() {
        errors::INVALID_REQUEST
    } else if offsets.is_empty() {
        errors::NONE
    } else {
        code_of(
            req.broker.txns.txn_offset_commit(&tid, &group, r.producer_id.0, r.producer_epoch, offsets).await,
        )
    };
    let mut resp = TxnOffsetCommitResponse::default();
    for t in r.topics {
        let mut tr = TxnOffsetCommitResponseTopic::default();
        for p in &t.partitions {
            let mut pr = TxnOffsetCommitResponsePartition::default();
            pr.partition_index = p.partition_index;
            let missing = unknown.iter().any(|(n, i)| *n == *t.name.0 && *i == p.partition_index);
            pr.error_code = if missing { errors::UNKNOWN_TOPIC_OR_PARTITION } else { code };
            tr.partitions.push(pr);
        }
        tr.name = t.name;
        resp.topics.push(tr);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

pub async fn end_txn(req: &Req, r: EndTxnRequest) -> BytesMut {
    let tid = r.transactional_id.0.to_string();
    let code = if tid.is_empty() {
        errors::INVALID_REQUEST
    } else {
        code_of(
            req.broker.txns.end_txn(&req.broker, &tid, r.producer_id.0, r.producer_epoch, r.committed).await,
        )
    };
    let mut resp = EndTxnResponse::default();
    resp.error_code = fenced_for(code, req.version, 2);
    wire::encode(req.correlation_id, req.version, &resp)
}

/// ListTransactions: every transactional id, filtered by state names, producer ids and (v1)
/// by how long the transaction has been running. Unknown state names are reported back.
pub fn list_transactions(req: &Req, r: ListTransactionsRequest) -> BytesMut {
    let mut resp = ListTransactionsResponse::default();
    let mut states = Vec::new();
    for f in &r.state_filters {
        match TxnState::ALL.iter().find(|s| s.kafka_name() == f.as_str()) {
            Some(s) => states.push(*s),
            None => resp.unknown_state_filters.push(f.clone()),
        }
    }
    let pids: Vec<i64> = r.producer_id_filters.iter().map(|p| p.0).collect();
    let now = now_ms();
    let mut all = req.broker.txns.snapshot();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    for (tid, m) in all {
        if (!r.state_filters.is_empty() && !states.contains(&m.state))
            || (!pids.is_empty() && !pids.contains(&m.producer_id))
        {
            continue;
        }
        let start = if m.state == TxnState::Ongoing { m.started_ms } else { -1 };
        if req.version >= 1 && r.duration_filter >= 0 && now - start < r.duration_filter {
            continue;
        }
        let mut t = list_transactions_response::TransactionState::default();
        t.transactional_id = TransactionalId(str_bytes(&tid));
        t.producer_id = ProducerId(m.producer_id);
        t.transaction_state = str_bytes(m.state.kafka_name());
        resp.transaction_states.push(t);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

/// DescribeTransactions: state, timeout, start time, producer and partitions of each id
/// (TRANSACTIONAL_ID_NOT_FOUND for an unknown one).
pub fn describe_transactions(req: &Req, r: DescribeTransactionsRequest) -> BytesMut {
    let mut resp = DescribeTransactionsResponse::default();
    for id in r.transactional_ids {
        let mut t = describe_transactions_response::TransactionState::default();
        match req.broker.txns.get(&id.0) {
            None => {
                t.error_code = errors::TRANSACTIONAL_ID_NOT_FOUND;
                t.transaction_state = str_bytes("");
                t.producer_id = ProducerId(-1);
                t.producer_epoch = -1;
                t.transaction_start_time_ms = -1;
            }
            Some(m) => {
                t.transaction_state = str_bytes(m.state.kafka_name());
                t.transaction_timeout_ms = m.timeout_ms;
                t.transaction_start_time_ms = if m.state == TxnState::Ongoing { m.started_ms } else { -1 };
                t.producer_id = ProducerId(m.producer_id);
                t.producer_epoch = m.epoch;
                let mut topics: Vec<describe_transactions_response::TopicData> = Vec::new();
                for (topic, p) in &m.partitions {
                    if topics.last().is_none_or(|x| *x.topic.0 != **topic) {
                        let mut td = describe_transactions_response::TopicData::default();
                        td.topic = topic_name(topic);
                        topics.push(td);
                    }
                    topics.last_mut().expect("pushed").partitions.push(*p);
                }
                t.topics = topics;
            }
        }
        t.transactional_id = id;
        resp.transaction_states.push(t);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}
