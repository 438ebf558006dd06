//! ApiVersions, Metadata, CreateTopics, DeleteTopics, InitProducerId, ListOffsets,
//! OffsetForLeaderEpoch, DescribeConfigs.

use std::collections::BTreeMap;

use bytes::BytesMut;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::*;

use super::{str_bytes, topic_name, Req};
use crate::errors;
use crate::wire;

fn version_list() -> Vec<ApiVersion> {
    wire::SUPPORTED
        .iter()
        .map(|&(k, lo, hi)| {
            let mut v = ApiVersion::default();
            v.api_key = k;
            v.min_version = lo;
            v.max_version = hi;
            v
        })
        .collect()
}

pub fn api_versions(req: &Req) -> BytesMut {
    let mut r = ApiVersionsResponse::default();
    r.api_keys = version_list();
    wire::encode(req.correlation_id, req.version, &r)
}

/// UNSUPPORTED_VERSION with a v0 body that lists every range (the client retries with
/// min(its version - 1, our max)).
pub fn api_versions_fallback(correlation_id: i32) -> BytesMut {
    let mut r = ApiVersionsResponse::default();
    r.error_code = errors::UNSUPPORTED_VERSION;
    r.api_keys = version_list();
    wire::encode(correlation_id, 0, &r)
}

pub fn metadata(req: &Req, r: MetadataRequest) -> BytesMut {
    let b = &req.broker;
    let mut resp = MetadataResponse::default();
    let mut broker = MetadataResponseBroker::default();
    broker.node_id = BrokerId(0);
    broker.host = str_bytes(&b.cfg.advertised_host);
    broker.port = b.cfg.advertised_port;
    resp.brokers = vec![broker];
    // Fields a version cannot carry must keep their defaults or encoding fails.
    if req.version >= 2 {
        resp.cluster_id = Some(str_bytes("kaka"));
    }
    if req.version >= 1 {
        resp.controller_id = BrokerId(0);
    }
    // v0: an empty list means every topic; v1+: null means every topic.
    let names: Vec<String> = match r.topics {
        None => b.topic_names(),
        Some(t) if t.is_empty() && req.version == 0 => b.topic_names(),
        Some(t) => t.into_iter().filter_map(|t| t.name.map(|n| n.0.to_string())).collect(),
    };
    // Before v4 there is no flag and Kafka auto-creates when the broker allows it.
    let allow_create = req.version < 4 || r.allow_auto_topic_creation;
    for name in names {
        let mut t = MetadataResponseTopic::default();
        t.name = Some(topic_name(&name));
        match b.topic_or_create(&name, allow_create) {
            Ok(topic) => {
                t.partitions = (0..topic.partitions.len() as i32)
                    .map(|p| {
                        let mut mp = MetadataResponsePartition::default();
                        mp.partition_index = p;
                        mp.leader_id = BrokerId(0);
                        if req.version >= 7 {
                            mp.leader_epoch = 0;
                        }
                        mp.replica_nodes = vec![BrokerId(0)];
                        mp.isr_nodes = vec![BrokerId(0)];
                        mp
                    })
                    .collect();
            }
            Err(code) => {
                t.error_code = if crate::config::valid_topic_name(&name) {
                    code
                } else {
                    errors::INVALID_TOPIC_EXCEPTION
                };
            }
        }
        resp.topics.push(t);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

pub fn create_topics(req: &Req, r: CreateTopicsRequest) -> BytesMut {
    let mut resp = CreateTopicsResponse::default();
    for t in r.topics {
        let name = t.name.0.to_string();
        let mut res = CreatableTopicResult::default();
        res.name = t.name.clone();
        let partitions = if !t.assignments.is_empty() {
            t.assignments.len() as i32
        } else if t.num_partitions == -1 {
            req.broker.cfg.default_partitions
        } else {
            t.num_partitions
        };
        let mut raw = BTreeMap::new();
        for c in &t.configs {
            if let Some(v) = &c.value {
                raw.insert(c.name.to_string(), v.to_string());
            }
        }
        let outcome = if t.replication_factor > 1 {
            Err((
                errors::INVALID_REPLICATION_FACTOR,
                "kaka is a single broker: replication factor must be 1".to_string(),
            ))
        } else {
            req.broker.create_topic(&name, partitions, raw, r.validate_only).map(|_| ())
        };
        match outcome {
            Ok(()) => {
                if req.version >= 5 {
                    res.num_partitions = partitions;
                    res.replication_factor = 1;
                }
            }
            Err((code, msg)) => {
                res.error_code = code;
                if code != errors::NONE {
                    res.error_message = Some(str_bytes(&msg));
                }
            }
        }
        resp.topics.push(res);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

pub async fn delete_topics(req: &Req, r: DeleteTopicsRequest) -> BytesMut {
    let mut resp = DeleteTopicsResponse::default();
    for name in r.topic_names {
        let mut res = DeletableTopicResult::default();
        res.error_code = req.broker.delete_topic(&name.0).await;
        res.name = Some(name);
        resp.responses.push(res);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

pub fn init_producer_id(req: &Req, r: InitProducerIdRequest) -> BytesMut {
    let mut resp = InitProducerIdResponse::default();
    if r.transactional_id.as_ref().is_some_and(|t| !t.0.is_empty()) {
        // No transaction APIs are advertised; a transactional client cannot proceed.
        resp.error_code = errors::INVALID_REQUEST;
        resp.producer_id = ProducerId(-1);
        resp.producer_epoch = -1;
        return wire::encode(req.correlation_id, req.version, &resp);
    }
    if r.producer_id.0 >= 0 && r.producer_epoch >= 0 && r.producer_epoch < i16::MAX - 1 {
        // An epoch bump for a producer that already has an id (Java's idempotent producer).
        resp.producer_id = r.producer_id;
        resp.producer_epoch = r.producer_epoch + 1;
        return wire::encode(req.correlation_id, req.version, &resp);
    }
    match req.broker.next_producer_id() {
        Ok(id) => {
            resp.producer_id = ProducerId(id);
            resp.producer_epoch = 0;
        }
        Err(code) => {
            resp.error_code = code;
            resp.producer_id = ProducerId(-1);
            resp.producer_epoch = -1;
        }
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

pub async fn list_offsets(req: &Req, r: ListOffsetsRequest) -> BytesMut {
    let mut resp = ListOffsetsResponse::default();
    for t in r.topics {
        let topic = req.broker.topic(&t.name.0);
        let mut tr = ListOffsetsTopicResponse::default();
        tr.name = t.name.clone();
        for p in t.partitions {
            let mut pr = ListOffsetsPartitionResponse::default();
            pr.partition_index = p.partition_index;
            pr.timestamp = -1;
            pr.offset = -1;
            pr.leader_epoch = -1;
            let part = topic.as_ref().and_then(|t| t.partitions.get(p.partition_index as usize));
            let Some(part) = part else {
                pr.error_code = errors::UNKNOWN_TOPIC_OR_PARTITION;
                tr.partitions.push(pr);
                continue;
            };
            let s = &part.shared;
            let found = match p.timestamp {
                -1 => Ok((s.hw(), -1)),
                -2 => Ok((s.log_start(), -1)),
                -3 => s.max_timestamp_offset().await,
                ts if ts >= 0 => s.offset_for_time(ts).await,
                _ => Err(errors::UNSUPPORTED_VERSION),
            };
            match found {
                Ok((off, ts)) => {
                    pr.offset = off;
                    pr.timestamp = ts;
                    if req.version >= 4 && off >= 0 {
                        pr.leader_epoch = 0;
                    }
                }
                Err(code) => pr.error_code = code,
            }
            tr.partitions.push(pr);
        }
        resp.topics.push(tr);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

pub fn offset_for_leader_epoch(req: &Req, r: OffsetForLeaderEpochRequest) -> BytesMut {
    let mut resp = OffsetForLeaderEpochResponse::default();
    for t in r.topics {
        let topic = req.broker.topic(&t.topic.0);
        let mut tr = OffsetForLeaderTopicResult::default();
        tr.topic = t.topic.clone();
        for p in t.partitions {
            let mut e = EpochEndOffset::default();
            e.partition = p.partition;
            e.leader_epoch = -1;
            e.end_offset = -1;
            match topic.as_ref().and_then(|t| t.partitions.get(p.partition as usize)) {
                None => e.error_code = errors::UNKNOWN_TOPIC_OR_PARTITION,
                Some(_) if p.current_leader_epoch > 0 => e.error_code = errors::UNKNOWN_LEADER_EPOCH,
                // The only leader epoch there has ever been is 0.
                Some(part) if p.leader_epoch <= 0 => {
                    e.leader_epoch = 0;
                    e.end_offset = part.shared.hw();
                }
                Some(_) => {}
            }
            tr.partitions.push(e);
        }
        resp.topics.push(tr);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

/// DescribeConfigs resource types and config sources, as Kafka numbers them.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const SOURCE_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;
/// Config types (DescribeConfigs v3+).
const TYPE_BOOLEAN: i8 = 1;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_LIST: i8 = 7;

/// (name, value, source, type) of every config a resource has.
type ConfigEntry = (&'static str, String, i8, i8);

fn topic_configs(t: &crate::broker::Topic) -> Vec<ConfigEntry> {
    let raw = &t.config.raw;
    // A key the topic set itself is a topic config; the rest comes from the broker's flags,
    // except cleanup.policy, whose only source is Kafka's default.
    let source = |k: &str, inherited: i8| if raw.contains_key(k) { SOURCE_TOPIC } else { inherited };
    let c = &t.config;
    let policy = match (c.compact, c.delete) {
        (true, true) => "compact,delete",
        (true, false) => "compact",
        _ => "delete",
    };
    vec![
        ("cleanup.policy", policy.to_string(), source("cleanup.policy", SOURCE_DEFAULT), TYPE_LIST),
        (
            "delete.retention.ms",
            c.delete_retention_ms.to_string(),
            source("delete.retention.ms", SOURCE_STATIC_BROKER),
            TYPE_LONG,
        ),
        (
            "retention.bytes",
            c.retention_bytes.to_string(),
            source("retention.bytes", SOURCE_STATIC_BROKER),
            TYPE_LONG,
        ),
        ("retention.ms", c.retention_ms.to_string(), source("retention.ms", SOURCE_STATIC_BROKER), TYPE_LONG),
        (
            "segment.bytes",
            c.segment_bytes.to_string(),
            source("segment.bytes", SOURCE_STATIC_BROKER),
            TYPE_INT,
        ),
    ]
}

fn broker_configs(b: &crate::config::BrokerConfig) -> Vec<ConfigEntry> {
    let s = SOURCE_STATIC_BROKER;
    vec![
        ("auto.create.topics.enable", b.auto_create_topics.to_string(), s, TYPE_BOOLEAN),
        ("log.cleaner.delete.retention.ms", b.delete_retention_ms.to_string(), s, TYPE_LONG),
        ("log.retention.bytes", b.retention_bytes.to_string(), s, TYPE_LONG),
        ("log.retention.ms", b.retention_ms.to_string(), s, TYPE_LONG),
        ("log.segment.bytes", b.segment_bytes.to_string(), s, TYPE_INT),
        ("num.partitions", b.default_partitions.to_string(), s, TYPE_INT),
        ("socket.request.max.bytes", b.max_request_bytes.to_string(), s, TYPE_INT),
    ]
}

/// Topic configs (what `kaka topics create --config` and CreateTopics set, and the broker
/// defaults behind them) and the broker's own settings, read-only: kaka has no AlterConfigs.
pub fn describe_configs(req: &Req, r: DescribeConfigsRequest) -> BytesMut {
    let b = &req.broker;
    let mut resp = DescribeConfigsResponse::default();
    for res in r.resources {
        let mut out = DescribeConfigsResult::default();
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name.clone();
        let name = res.resource_name.to_string();
        let entries = match res.resource_type {
            RESOURCE_TOPIC => match b.topic(&name) {
                Some(t) => Ok((topic_configs(&t), false)),
                None => Err((errors::UNKNOWN_TOPIC_OR_PARTITION, format!("topic {name} does not exist"))),
            },
            RESOURCE_BROKER if name.is_empty() || name == "0" => Ok((broker_configs(&b.cfg), true)),
            RESOURCE_BROKER => Err((errors::INVALID_REQUEST, format!("kaka is broker 0, not {name}"))),
            other => Err((errors::INVALID_REQUEST, format!("resource type {other} is not supported"))),
        };
        match entries {
            Ok((entries, read_only)) => {
                let wanted = res.configuration_keys.as_ref();
                for (key, value, source, kind) in entries {
                    if wanted.is_some_and(|w| !w.iter().any(|k| k.as_str() == key)) {
                        continue;
                    }
                    let mut e = DescribeConfigsResourceResult::default();
                    e.name = str_bytes(key);
                    e.value = Some(str_bytes(&value));
                    e.read_only = read_only;
                    e.config_source = source;
                    if req.version >= 3 {
                        e.config_type = kind;
                    }
                    out.configs.push(e);
                }
            }
            Err((code, message)) => {
                out.error_code = code;
                out.error_message = Some(str_bytes(&message));
            }
        }
        resp.results.push(out);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}
