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
    /// Test hook: fail the Nth fdatasync (and every later one) of each partition.
    pub fail_fsync_after: Option<u64>,
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
    /// The raw key=value pairs as given (for persistence and DescribeConfigs-like output).
    pub raw: BTreeMap<String, String>,
}

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
            raw: raw.clone(),
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
                _ => return Err(format!("unknown topic config {k}")),
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
