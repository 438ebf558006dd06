//! ApiVersions, Metadata, CreateTopics, DeleteTopics, InitProducerId, ListOffsets,
//! OffsetForLeaderEpoch, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs,
//! CreatePartitions, DeleteRecords, DescribeLogDirs, DescribeCluster.

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

use super::{str_bytes, topic_name, Req, CLUSTER_OPERATIONS, OPERATIONS_NOT_REQUESTED, TOPIC_OPERATIONS};
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

/// The cluster id Metadata and DescribeCluster report: kaka is a cluster of one.
const CLUSTER_ID: &str = "kaka";

/// Every partition led by broker 0, its only replica.
fn metadata_partitions(version: i16, n: usize) -> Vec<MetadataResponsePartition> {
    (0..n as i32)
        .map(|p| {
            let mut mp = MetadataResponsePartition::default();
            mp.partition_index = p;
            mp.leader_id = BrokerId(0);
            if version >= 7 {
                mp.leader_epoch = 0;
            }
            mp.replica_nodes = vec![BrokerId(0)];
            mp.isr_nodes = vec![BrokerId(0)];
            mp
        })
        .collect()
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
        resp.cluster_id = Some(str_bytes(CLUSTER_ID));
    }
    if req.version >= 1 {
        resp.controller_id = BrokerId(0);
    }
    // No authorizer: every operation is allowed, reported as Kafka does without one (v8+, the
    // cluster's only up to v10), when asked; otherwise "not requested".
    if (8..=10).contains(&req.version) && r.include_cluster_authorized_operations {
        resp.cluster_authorized_operations = CLUSTER_OPERATIONS;
    }
    let topic_ops = if req.version >= 8 && r.include_topic_authorized_operations {
        TOPIC_OPERATIONS
    } else {
        OPERATIONS_NOT_REQUESTED
    };
    // v0: an empty list means every topic; v1+: null means every topic. v12 may name a topic
    // by id alone (no name).
    let wanted: Vec<(Option<String>, [u8; 16])> = match r.topics {
        Some(t) if !(t.is_empty() && req.version == 0) => {
            t.into_iter().map(|t| (t.name.map(|n| n.0.to_string()), *t.topic_id.as_bytes())).collect()
        }
        _ => b.topic_names().into_iter().map(|n| (Some(n), [0; 16])).collect(),
    };
    // Before v4 there is no flag and Kafka auto-creates when the broker allows it.
    let allow_create = req.version < 4 || r.allow_auto_topic_creation;
    for (name, id) in wanted {
        let mut t = MetadataResponseTopic::default();
        let Some(name) = name else {
            // By id: never auto-created; the answer echoes the id.
            t.topic_id = uuid::Uuid::from_bytes(id);
            match b.topic_by_id(&id) {
                Some(topic) => {
                    t.name = Some(topic_name(&topic.name));
                    t.partitions = metadata_partitions(req.version, topic.partitions.len());
                    t.topic_authorized_operations = topic_ops;
                }
                None => t.error_code = errors::UNKNOWN_TOPIC_ID,
            }
            resp.topics.push(t);
            continue;
        };
        t.name = Some(topic_name(&name));
        match b.topic_or_create(&name, allow_create) {
            Ok(topic) => {
                if req.version >= 10 {
                    t.topic_id = uuid::Uuid::from_bytes(topic.id);
                }
                t.partitions = metadata_partitions(req.version, topic.partitions.len());
                t.topic_authorized_operations = topic_ops;
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

pub async fn init_producer_id(req: &Req, r: InitProducerIdRequest) -> BytesMut {
    let mut resp = InitProducerIdResponse::default();
    if let Some(tid) = r.transactional_id.as_ref().filter(|t| !t.0.is_empty()) {
        // v3+ may name the producer id and epoch it holds, asking for the next epoch.
        let expected =
            (req.version >= 3 && r.producer_id.0 >= 0).then_some((r.producer_id.0, r.producer_epoch));
        match req.broker.txns.init_producer_id(&req.broker, &tid.0, r.transaction_timeout_ms, expected).await
        {
            Ok((pid, epoch)) => {
                resp.producer_id = ProducerId(pid);
                resp.producer_epoch = epoch;
            }
            Err(code) => {
                resp.error_code = super::txn::fenced_for(code, req.version, 4);
                resp.producer_id = ProducerId(-1);
                resp.producer_epoch = -1;
            }
        }
        return wire::encode(req.correlation_id, req.version, &resp);
    }
    if r.producer_id.0 >= 0 && r.producer_epoch >= 0 && r.producer_epoch < i16::MAX - 1 {
        // An epoch bump for a producer that already has an id (Java's idempotent producer).
        resp.producer_id = r.producer_id;
        resp.producer_epoch = r.producer_epoch + 1;
        return wire::encode(req.correlation_id, req.version, &resp);
    }
    match req.broker.next_producer_id().await {
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
            // read_committed (isolation level 1) sees the log end at the last stable offset.
            let end = if r.isolation_level == 1 { s.lso() } else { s.hw() };
            let found = match p.timestamp {
                -1 => Ok((end, -1)),
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
const TYPE_DOUBLE: i8 = 6;
const TYPE_LIST: i8 = 7;

/// (name, value, source, type) of every config a resource has.
type ConfigEntry = (&'static str, String, i8, i8);

/// What a config resource in a request names.
enum ConfigResource {
    Topic(String),
    /// Broker 0, this broker (named "0" or "").
    Broker,
}

/// Resolves a config resource: topics by name, broker 0 only, no other resource types.
fn config_resource(resource_type: i8, name: &str) -> Result<ConfigResource, (i16, String)> {
    match resource_type {
        RESOURCE_TOPIC => Ok(ConfigResource::Topic(name.to_string())),
        RESOURCE_BROKER if name.is_empty() || name == "0" => Ok(ConfigResource::Broker),
        RESOURCE_BROKER => Err((errors::INVALID_REQUEST, format!("kaka is broker 0, not {name}"))),
        other => Err((errors::INVALID_REQUEST, format!("resource type {other} is not supported"))),
    }
}

/// A per-resource outcome as the (error code, error message) pair Kafka answers carry.
fn error_fields(outcome: Result<(), (i16, String)>) -> (i16, Option<kafka_protocol::protocol::StrBytes>) {
    match outcome {
        Ok(()) => (errors::NONE, None),
        Err((code, message)) => (code, Some(str_bytes(&message))),
    }
}

/// Every topic-level config Kafka 4 has: the ones kaka applies with their effective values,
/// then the stored-only ones (`config::STORED_TOPIC_CONFIGS`), the topic's value or Kafka's
/// default.
fn topic_configs(t: &crate::broker::Topic) -> Vec<ConfigEntry> {
    let c = t.config();
    let raw = &c.raw;
    // A key the topic set itself is a topic config; the rest comes from the broker's flags,
    // except cleanup.policy, whose only source is Kafka's default.
    let source = |k: &str, inherited: i8| if raw.contains_key(k) { SOURCE_TOPIC } else { inherited };
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
            "min.cleanable.dirty.ratio",
            c.min_cleanable_dirty_ratio.to_string(),
            source("min.cleanable.dirty.ratio", SOURCE_DEFAULT),
            TYPE_DOUBLE,
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
        (
            "max.message.bytes",
            c.max_message_bytes.to_string(),
            source("max.message.bytes", SOURCE_STATIC_BROKER),
            TYPE_INT,
        ),
    ]
    .into_iter()
    .chain(crate::config::STORED_TOPIC_CONFIGS.iter().map(|&(name, kind, default)| match raw.get(name) {
        Some(v) => (name, v.clone(), SOURCE_TOPIC, kind.kafka_type()),
        None => (name, default.to_string(), SOURCE_DEFAULT, kind.kafka_type()),
    }))
    .collect()
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

/// Topic configs (what `kaka topics create --config`, CreateTopics and the AlterConfigs calls
/// set, and the broker defaults behind them) and the broker's own settings, which come from
/// its command line and are read-only.
pub fn describe_configs(req: &Req, r: DescribeConfigsRequest) -> BytesMut {
    let b = &req.broker;
    let mut resp = DescribeConfigsResponse::default();
    for res in r.resources {
        let mut out = DescribeConfigsResult::default();
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name.clone();
        let entries =
            config_resource(res.resource_type, &res.resource_name).and_then(|target| match target {
                ConfigResource::Topic(name) => match b.topic(&name) {
                    Some(t) => Ok((topic_configs(&t), false)),
                    None => Err((errors::UNKNOWN_TOPIC_OR_PARTITION, format!("topic {name} does not exist"))),
                },
                ConfigResource::Broker => Ok((broker_configs(&b.cfg), true)),
            });
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
            Err(e) => (out.error_code, out.error_message) = error_fields(Err(e)),
        }
        resp.results.push(out);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

/// IncrementalAlterConfigs operations, as Kafka numbers them.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// One resource of an alteration: no key named twice, a topic (the broker's settings are its
/// command-line flags), then `edit` applied to the topic's own settings. Answers the
/// resource's (error code, message).
fn alter_resource<'a>(
    req: &Req,
    resource_type: i8,
    name: &str,
    keys: impl Iterator<Item = &'a str>,
    validate_only: bool,
    edit: impl FnOnce(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, (i16, String)>,
) -> (i16, Option<kafka_protocol::protocol::StrBytes>) {
    let mut seen = std::collections::HashSet::new();
    let outcome = match keys.into_iter().find(|k| !seen.insert(*k)) {
        Some(dup) => Err((errors::INVALID_REQUEST, format!("duplicate config key {dup}"))),
        None => config_resource(resource_type, name).and_then(|target| match target {
            ConfigResource::Topic(topic) => req.broker.alter_topic_config(&topic, validate_only, edit),
            ConfigResource::Broker => Err((
                errors::INVALID_CONFIG,
                "broker settings come from kaka's command line and cannot be altered".into(),
            )),
        }),
    };
    error_fields(outcome)
}

/// AlterConfigs: a topic's own settings become exactly those given. As in Kafka, the call is
/// not incremental: a key left out returns to the broker's default.
pub fn alter_configs(req: &Req, r: AlterConfigsRequest) -> BytesMut {
    let mut resp = AlterConfigsResponse::default();
    for res in r.resources {
        let configs = &res.configs;
        let mut out = alter_configs_response::AlterConfigsResourceResponse::default();
        let keys = configs.iter().map(|c| c.name.as_str());
        (out.error_code, out.error_message) =
            alter_resource(req, res.resource_type, &res.resource_name, keys, r.validate_only, |_| {
                let set =
                    configs.iter().filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())));
                Ok(set.collect())
            });
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name;
        resp.responses.push(out);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

/// IncrementalAlterConfigs: SET and DELETE any topic key; APPEND and SUBTRACT items of
/// cleanup.policy, the one list-valued key.
pub fn incremental_alter_configs(req: &Req, r: IncrementalAlterConfigsRequest) -> BytesMut {
    let mut resp = IncrementalAlterConfigsResponse::default();
    for res in r.resources {
        let ops = &res.configs;
        let mut out = incremental_alter_configs_response::AlterConfigsResourceResponse::default();
        let keys = ops.iter().map(|c| c.name.as_str());
        (out.error_code, out.error_message) =
            alter_resource(req, res.resource_type, &res.resource_name, keys, r.validate_only, |current| {
                let mut raw = current.clone();
                for op in ops {
                    apply_op(&mut raw, op.config_operation, op.name.as_str(), op.value.as_deref())?;
                }
                Ok(raw)
            });
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name;
        resp.responses.push(out);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

fn apply_op(
    raw: &mut BTreeMap<String, String>,
    op: i8,
    key: &str,
    value: Option<&str>,
) -> Result<(), (i16, String)> {
    let need_value =
        || value.ok_or_else(|| (errors::INVALID_REQUEST, format!("null value for config {key}")));
    match op {
        OP_SET => {
            raw.insert(key.to_string(), need_value()?.to_string());
        }
        OP_DELETE => {
            raw.remove(key);
        }
        OP_APPEND | OP_SUBTRACT if key == "cleanup.policy" || is_list(key) => {
            let default = if key == "cleanup.policy" { "delete" } else { "" };
            let current = raw.get(key).map(String::as_str).unwrap_or(default);
            let mut items: Vec<&str> = current.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
            for v in need_value()?.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if op == OP_APPEND && !items.contains(&v) {
                    items.push(v);
                } else if op == OP_SUBTRACT {
                    items.retain(|i| *i != v);
                }
            }
            if items.is_empty() && key == "cleanup.policy" {
                return Err((errors::INVALID_CONFIG, "cleanup.policy cannot be empty".into()));
            }
            raw.insert(key.to_string(), items.join(","));
        }
        OP_APPEND | OP_SUBTRACT => {
            return Err((
                errors::INVALID_CONFIG,
                format!("{key} is not a list: APPEND and SUBTRACT do not apply"),
            ));
        }
        other => return Err((errors::INVALID_REQUEST, format!("unknown config operation {other}"))),
    }
    Ok(())
}

/// A list-valued stored config (APPEND and SUBTRACT apply to it, as to cleanup.policy).
fn is_list(key: &str) -> bool {
    crate::config::STORED_TOPIC_CONFIGS
        .iter()
        .any(|(name, kind, _)| *name == key && matches!(kind, crate::config::Kind::List))
}

/// CreatePartitions: grows topics. Each topic is answered on its own; an explicit replica
/// assignment may only name broker 0, once per new partition (kaka is a single broker).
pub fn create_partitions(req: &Req, r: CreatePartitionsRequest) -> BytesMut {
    let mut resp = CreatePartitionsResponse::default();
    let mut seen = std::collections::HashSet::new();
    for t in r.topics {
        let name = t.name.0.to_string();
        let outcome = if seen.insert(name.clone()) {
            check_assignments(req, &name, &t)
                .and_then(|()| req.broker.add_partitions(&name, t.count, r.validate_only))
        } else {
            Err((errors::INVALID_REQUEST, format!("topic {name} is named twice")))
        };
        let mut out = create_partitions_response::CreatePartitionsTopicResult::default();
        out.name = t.name;
        (out.error_code, out.error_message) = error_fields(outcome);
        resp.results.push(out);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

/// An explicit assignment, if given, must give each new partition to broker 0 alone.
fn check_assignments(
    req: &Req,
    name: &str,
    t: &create_partitions_request::CreatePartitionsTopic,
) -> Result<(), (i16, String)> {
    let Some(a) = &t.assignments else { return Ok(()) };
    if a.iter().any(|x| x.broker_ids != [BrokerId(0)]) {
        return Err((
            errors::INVALID_REPLICA_ASSIGNMENT,
            "kaka is a single broker: assign every new partition to broker 0 alone".into(),
        ));
    }
    let Some(topic) = req.broker.topic(name) else { return Ok(()) }; // unknown: said later
    let new = t.count - topic.partitions.len() as i32;
    if new > 0 && a.len() as i32 != new {
        return Err((
            errors::INVALID_REPLICA_ASSIGNMENT,
            format!("{} assignments for {new} new partitions", a.len()),
        ));
    }
    Ok(())
}

/// DeleteRecords: each partition's log start moves up to the given offset (-1: the high
/// watermark); the answer carries the new low watermark.
pub async fn delete_records(req: &Req, r: DeleteRecordsRequest) -> BytesMut {
    let mut resp = DeleteRecordsResponse::default();
    for t in r.topics {
        let topic = req.broker.topic(&t.name.0);
        let mut tr = delete_records_response::DeleteRecordsTopicResult::default();
        tr.name = t.name;
        for p in t.partitions {
            let mut pr = delete_records_response::DeleteRecordsPartitionResult::default();
            pr.partition_index = p.partition_index;
            let part = topic.as_ref().and_then(|tp| tp.partitions.get(p.partition_index as usize));
            let outcome = match part {
                None => Err(errors::UNKNOWN_TOPIC_OR_PARTITION),
                Some(_) if p.offset < -1 => Err(errors::OFFSET_OUT_OF_RANGE),
                Some(part) => part.delete_records(p.offset).await,
            };
            match outcome {
                Ok(low) => pr.low_watermark = low,
                Err(code) => {
                    pr.low_watermark = -1;
                    pr.error_code = code;
                }
            }
            tr.partitions.push(pr);
        }
        resp.topics.push(tr);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

/// DescribeLogDirs: the one log directory, with each requested partition's size (all topics
/// when the request names none), and from v4 the file system's size and free space.
pub fn describe_log_dirs(req: &Req, r: DescribeLogDirsRequest) -> BytesMut {
    let b = &req.broker;
    let mut dir = describe_log_dirs_response::DescribeLogDirsResult::default();
    let path = std::fs::canonicalize(&b.cfg.dir).unwrap_or_else(|_| b.cfg.dir.clone());
    dir.log_dir = str_bytes(&path.display().to_string());
    let wanted: Vec<(String, Option<Vec<i32>>)> = match r.topics {
        None => b.topic_names().into_iter().map(|n| (n, None)).collect(),
        Some(ts) => ts.into_iter().map(|t| (t.topic.0.to_string(), Some(t.partitions))).collect(),
    };
    for (name, partitions) in wanted {
        let Some(topic) = b.topic(&name) else { continue }; // Kafka lists only what it hosts
        let mut t = describe_log_dirs_response::DescribeLogDirsTopic::default();
        t.name = topic_name(&name);
        let indexes = partitions.unwrap_or_else(|| (0..topic.partitions.len() as i32).collect());
        for i in indexes {
            let Some(p) = topic.partitions.get(i as usize) else { continue };
            let mut dp = describe_log_dirs_response::DescribeLogDirsPartition::default();
            dp.partition_index = i;
            dp.partition_size = p.shared.size_bytes() as i64;
            t.partitions.push(dp);
        }
        dir.topics.push(t);
    }
    if req.version >= 4 {
        (dir.total_bytes, dir.usable_bytes) = fs_space(&path).unwrap_or((-1, -1));
    }
    let mut resp = DescribeLogDirsResponse::default();
    resp.results = vec![dir];
    wire::encode(req.correlation_id, req.version, &resp)
}

/// (total, available) bytes of the file system holding `path`.
fn fs_space(path: &std::path::Path) -> Option<(i64, i64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `c` is a valid NUL-terminated path and `st` a writable statvfs.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let frsize = st.f_frsize as i64;
    Some((st.f_blocks as i64 * frsize, st.f_bavail as i64 * frsize))
}

/// DescribeCluster: kaka is the whole cluster, and its own controller.
pub fn describe_cluster(req: &Req, r: DescribeClusterRequest) -> BytesMut {
    let b = &req.broker;
    let mut resp = DescribeClusterResponse::default();
    if req.version >= 1 {
        resp.endpoint_type = r.endpoint_type;
    }
    if req.version >= 1 && r.endpoint_type != 1 {
        resp.error_code = errors::UNSUPPORTED_ENDPOINT_TYPE;
        resp.error_message = Some(str_bytes("kaka serves broker endpoints only"));
        return wire::encode(req.correlation_id, req.version, &resp);
    }
    resp.cluster_id = str_bytes(CLUSTER_ID);
    resp.controller_id = BrokerId(0);
    let mut broker = describe_cluster_response::DescribeClusterBroker::default();
    broker.broker_id = BrokerId(0);
    broker.host = str_bytes(&b.cfg.advertised_host);
    broker.port = b.cfg.advertised_port;
    resp.brokers = vec![broker];
    resp.cluster_authorized_operations = if r.include_cluster_authorized_operations {
        CLUSTER_OPERATIONS // no authorizer: everything, as Kafka reports without one
    } else {
        OPERATIONS_NOT_REQUESTED
    };
    wire::encode(req.correlation_id, req.version, &resp)
}

/// Kafka's cap on the partitions of one DescribeTopicPartitions answer
/// (`max.request.partition.size.limit`).
const DESCRIBE_PARTITIONS_LIMIT: i32 = 2000;

/// DescribeTopicPartitions (KIP-966): the named topics (or every topic) in name order, from
/// the cursor on, at most `response_partition_limit` partitions (capped at 2000) per answer;
/// `next_cursor` names where the next page starts. Every partition is led by broker 0, its only
/// replica, with empty ELR lists; topic operations are all of them (no authorizer).
pub fn describe_topic_partitions(req: &Req, r: DescribeTopicPartitionsRequest) -> BytesMut {
    use describe_topic_partitions_response::{
        Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
    };
    let b = &req.broker;
    let mut resp = DescribeTopicPartitionsResponse::default();
    let listing = r.topics.is_empty();
    let mut names: Vec<String> =
        if listing { b.topic_names() } else { r.topics.iter().map(|t| t.name.0.to_string()).collect() };
    names.sort();
    names.dedup();
    let limit = if r.response_partition_limit > 0 {
        r.response_partition_limit.min(DESCRIBE_PARTITIONS_LIMIT)
    } else {
        DESCRIBE_PARTITIONS_LIMIT
    } as usize;
    let (start_topic, start_partition) = match &r.cursor {
        Some(c) => (Some(c.topic_name.0.to_string()), c.partition_index.max(0) as usize),
        None => (None, 0),
    };
    let mut budget = limit;
    for name in names {
        if start_topic.as_ref().is_some_and(|s| name < *s) {
            continue;
        }
        let first = if start_topic.as_ref() == Some(&name) { start_partition } else { 0 };
        let mut t = DescribeTopicPartitionsResponseTopic::default();
        t.name = Some(topic_name(&name));
        let Some(topic) = b.topic(&name) else {
            if !listing {
                t.error_code = errors::UNKNOWN_TOPIC_OR_PARTITION;
                resp.topics.push(t);
            }
            continue;
        };
        if budget == 0 {
            let mut c = Cursor::default();
            c.topic_name = topic_name(&name);
            c.partition_index = first as i32;
            resp.next_cursor = Some(c);
            break;
        }
        t.topic_id = uuid::Uuid::from_bytes(topic.id);
        t.topic_authorized_operations = TOPIC_OPERATIONS;
        let n = topic.partitions.len();
        let end = n.min(first + budget);
        for p in first..end {
            let mut dp = DescribeTopicPartitionsResponsePartition::default();
            dp.partition_index = p as i32;
            dp.leader_id = BrokerId(0);
            dp.leader_epoch = 0;
            dp.replica_nodes = vec![BrokerId(0)];
            dp.isr_nodes = vec![BrokerId(0)];
            dp.eligible_leader_replicas = Some(Vec::new());
            dp.last_known_elr = Some(Vec::new());
            t.partitions.push(dp);
        }
        budget -= end.saturating_sub(first);
        resp.topics.push(t);
        if end < n {
            let mut c = Cursor::default();
            c.topic_name = topic_name(&name);
            c.partition_index = end as i32;
            resp.next_cursor = Some(c);
            break;
        }
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

/// Kafka's answer to the ACL requests when it has no authorizer (kaka has none).
const NO_AUTHORIZER: &str = "No Authorizer is configured.";

pub fn describe_acls(req: &Req) -> BytesMut {
    let mut resp = DescribeAclsResponse::default();
    resp.error_code = errors::SECURITY_DISABLED;
    resp.error_message = Some(str_bytes(NO_AUTHORIZER));
    wire::encode(req.correlation_id, req.version, &resp)
}

pub fn create_acls(req: &Req, r: CreateAclsRequest) -> BytesMut {
    let mut resp = CreateAclsResponse::default();
    resp.results = r
        .creations
        .iter()
        .map(|_| {
            let mut c = create_acls_response::AclCreationResult::default();
            c.error_code = errors::SECURITY_DISABLED;
            c.error_message = Some(str_bytes(NO_AUTHORIZER));
            c
        })
        .collect();
    wire::encode(req.correlation_id, req.version, &resp)
}

pub fn delete_acls(req: &Req, r: DeleteAclsRequest) -> BytesMut {
    let mut resp = DeleteAclsResponse::default();
    resp.filter_results = r
        .filters
        .iter()
        .map(|_| {
            let mut f = delete_acls_response::DeleteAclsFilterResult::default();
            f.error_code = errors::SECURITY_DISABLED;
            f.error_message = Some(str_bytes(NO_AUTHORIZER));
            f
        })
        .collect();
    wire::encode(req.correlation_id, req.version, &resp)
}
