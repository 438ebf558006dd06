//! Broker settings (from the command line) and per-topic settings (from CreateTopics configs,
//! `kaka topics create --config k=v`, or broker defaults), persisted in each topic's directory.

use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub dir: PathBuf,
    /// host:port we advertise in Metadata and FindCoordinator (the bound address).
    pub advertised_host: String,
    pub advertised_port: i32,
    pub segment_bytes: u64,
    /// 0: every ack follows an fdatasync (group commit). N > 0: ack after write(2) and sync at
    /// most every N ms.
    pub fsync_interval_ms: u64,
    pub max_memory: usize,
    pub retention_bytes: i64,
    pub retention_ms: i64,
    pub retention_check_ms: u64,
    pub delete_retention_ms: i64,
    pub auto_create_topics: bool,
    pub default_partitions: i32,
    pub max_request_bytes: usize,
    pub max_in_flight: usize,
    pub initial_rebalance_delay_ms: u64,
    /// A response write that makes no progress for this long closes the connection.
    pub write_stall_timeout_ms: u64,
    /// Test hook: fail the Nth fdatasync (and every later one) of each partition.
    pub fail_fsync_after: Option<u64>,
    /// Test hook: no fetch returns a record at or past this offset while the file exists.
    pub hold_fetches: Option<(i64, std::path::PathBuf)>,
    /// Test hook: a produce whose batch lands at or past this offset is appended, but its
    /// response waits while the file exists.
    pub hold_acks: Option<(i64, std::path::PathBuf)>,
}

/// Settings of one topic; absent keys fall back to the broker's.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicConfig {
    pub compact: bool,
    /// Time/size retention applies ("delete" or "compact,delete").
    pub delete: bool,
    pub retention_bytes: i64,
    pub retention_ms: i64,
    pub segment_bytes: u64,
    pub delete_retention_ms: i64,
    /// A compaction pass runs once the closed segments written since the last pass are at
    /// least this share of all closed segments (Kafka's min.cleanable.dirty.ratio).
    pub min_cleanable_dirty_ratio: f64,
    /// A batch larger than this is refused (MESSAGE_TOO_LARGE). Unset, it is the broker's
    /// --max-request-bytes, which already bounds every batch.
    pub max_message_bytes: usize,
    /// The topic's own key=value pairs (persisted in topic.meta, reported by DescribeConfigs),
    /// minus the names Kafka 4 accepts but ignores (`IGNORED_TOPIC_CONFIGS`).
    pub raw: BTreeMap<String, String>,
}

/// How a topic config's value is checked, and its DescribeConfigs type.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Bool,
    /// A 32-bit integer in min..=max.
    Int(i64, i64),
    /// A 64-bit integer, at least min.
    Long(i64),
    /// A comma-separated list (free items).
    List,
    /// A string from a fixed set (compared ignoring case, as Kafka does).
    OneOf(&'static [&'static str]),
}

impl Kind {
    /// Kafka's ConfigType code (DescribeConfigs v3+).
    pub fn kafka_type(self) -> i8 {
        match self {
            Kind::Bool => 1,
            Kind::OneOf(_) => 2,
            Kind::Int(..) => 3,
            Kind::Long(_) => 5,
            Kind::List => 7,
        }
    }

    fn check(self, k: &str, v: &str) -> Result<(), String> {
        let ok = match self {
            Kind::Bool => v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false"),
            Kind::Int(min, max) => v.trim().parse::<i32>().is_ok_and(|n| (min..=max).contains(&(n as i64))),
            Kind::Long(min) => v.trim().parse::<i64>().is_ok_and(|n| n >= min),
            Kind::List => true,
            Kind::OneOf(set) => set.iter().any(|s| s.eq_ignore_ascii_case(v.trim())),
        };
        if ok {
            Ok(())
        } else {
            Err(format!("invalid value {v} for configuration {k}"))
        }
    }
}

/// Kafka 4's other topic-level configs: (name, kind, Kafka's default). kaka validates them as
/// Kafka does, stores them with the topic and reports them, but they change nothing here (one
/// replica, batches stored as sent, segments rolled by size). The six it applies
/// (cleanup.policy, retention.*, segment.bytes, delete.retention.ms,
/// min.cleanable.dirty.ratio) and max.message.bytes are handled in `resolve`.
pub const STORED_TOPIC_CONFIGS: &[(&str, Kind, &str)] = &[
    ("compression.gzip.level", Kind::Int(-1, 9), "-1"),
    ("compression.lz4.level", Kind::Int(1, 17), "9"),
    (
        "compression.type",
        Kind::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
        "producer",
    ),
    ("compression.zstd.level", Kind::Int(-131072, 22), "3"),
    ("file.delete.delay.ms", Kind::Long(0), "60000"),
    ("flush.messages", Kind::Long(1), "9223372036854775807"),
    ("flush.ms", Kind::Long(0), "9223372036854775807"),
    ("follower.replication.throttled.replicas", Kind::List, ""),
    ("index.interval.bytes", Kind::Int(0, i32::MAX as i64), "4096"),
    ("leader.replication.throttled.replicas", Kind::List, ""),
    ("local.retention.bytes", Kind::Long(-2), "-2"),
    ("local.retention.ms", Kind::Long(-2), "-2"),
    ("max.compaction.lag.ms", Kind::Long(1), "9223372036854775807"),
    ("message.timestamp.after.max.ms", Kind::Long(0), "3600000"),
    ("message.timestamp.before.max.ms", Kind::Long(0), "9223372036854775807"),
    ("message.timestamp.type", Kind::OneOf(&["CreateTime", "LogAppendTime"]), "CreateTime"),
    ("min.compaction.lag.ms", Kind::Long(0), "0"),
    ("min.insync.replicas", Kind::Int(1, i32::MAX as i64), "1"),
    ("preallocate", Kind::Bool, "false"),
    ("remote.log.copy.disable", Kind::Bool, "false"),
    ("remote.log.delete.on.disable", Kind::Bool, "false"),
    ("remote.storage.enable", Kind::Bool, "false"),
    ("segment.index.bytes", Kind::Int(4, i32::MAX as i64), "10485760"),
    ("segment.jitter.ms", Kind::Long(0), "0"),
    ("segment.ms", Kind::Long(1), "604800000"),
    ("unclean.leader.election.enable", Kind::Bool, "false"),
];

/// Names Kafka 4 removed but still accepts from older tools, ignoring the value (it is neither
/// stored nor reported), so kaka does the same.
pub const IGNORED_TOPIC_CONFIGS: &[&str] = &["message.format.version", "message.downconversion.enable"];

impl TopicConfig {
    pub fn resolve(raw: &BTreeMap<String, String>, b: &BrokerConfig) -> Result<TopicConfig, String> {
        let mut c = TopicConfig {
            compact: false,
            delete: true,
            retention_bytes: b.retention_bytes,
            retention_ms: b.retention_ms,
            segment_bytes: b.segment_bytes,
            delete_retention_ms: b.delete_retention_ms,
            min_cleanable_dirty_ratio: 0.5,
            max_message_bytes: b.max_request_bytes,
            raw: raw
                .iter()
                .filter(|(k, _)| !IGNORED_TOPIC_CONFIGS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        };
        for (k, v) in raw {
            let int = || v.parse::<i64>().map_err(|_| format!("{k}: not an integer: {v}"));
            match k.as_str() {
                "cleanup.policy" => {
                    (c.compact, c.delete) = match v.as_str() {
                        "delete" => (false, true),
                        "compact" => (true, false),
                        "compact,delete" | "delete,compact" => (true, true),
                        _ => return Err(format!("cleanup.policy: unsupported value {v}")),
                    }
                }
                "retention.bytes" => c.retention_bytes = int()?,
                "retention.ms" => c.retention_ms = int()?,
                "delete.retention.ms" => c.delete_retention_ms = int()?,
                "min.cleanable.dirty.ratio" => {
                    c.min_cleanable_dirty_ratio =
                        v.parse::<f64>()
                            .ok()
                            .filter(|r| (0.0..=1.0).contains(r))
                            .ok_or_else(|| format!("{k}: not a ratio between 0 and 1: {v}"))?;
                }
                "segment.bytes" => {
                    let n = int()?;
                    if n < 1024 {
                        return Err("segment.bytes must be at least 1024".into());
                    }
                    c.segment_bytes = n as u64;
                }
                "max.message.bytes" => {
                    Kind::Int(0, i32::MAX as i64).check(k, v)?;
                    c.max_message_bytes = int()? as usize;
                }
                _ if IGNORED_TOPIC_CONFIGS.contains(&k.as_str()) => {}
                _ => match STORED_TOPIC_CONFIGS.iter().find(|(name, _, _)| name == k) {
                    Some((_, kind, _)) => kind.check(k, v)?,
                    None => return Err(format!("Unknown topic config name: {k}")),
                },
            }
        }
        Ok(c)
    }

    pub fn parse_pair(s: &str) -> Result<(String, String), String> {
        let (k, v) = s.split_once('=').ok_or_else(|| format!("expected key=value, got {s}"))?;
        Ok((k.trim().to_string(), v.trim().to_string()))
    }
}

/// Kafka topic names: [a-zA-Z0-9._-], 1..=249 characters, not "." or "..".
pub fn valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

#[cfg(test)]
impl BrokerConfig {
    /// A small broker in `dir` for unit tests: fsync per write, no retention, one in flight.
    pub fn for_tests(dir: std::path::PathBuf) -> BrokerConfig {
        BrokerConfig {
            dir,
            advertised_host: "127.0.0.1".into(),
            advertised_port: 9092,
            segment_bytes: 1 << 20,
            fsync_interval_ms: 0,
            max_memory: 1 << 20,
            retention_bytes: -1,
            retention_ms: -1,
            retention_check_ms: 60_000,
            delete_retention_ms: 0,
            auto_create_topics: true,
            default_partitions: 1,
            max_request_bytes: 1 << 20,
            max_in_flight: 1,
            initial_rebalance_delay_ms: 0,
            write_stall_timeout_ms: 60_000,
            fail_fsync_after: None,
            hold_fetches: None,
            hold_acks: None,
        }
    }
}
