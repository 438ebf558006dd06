//! kaka: a single-node, Kafka-wire-compatible, durable log broker.
//!
//! Layout:
//! - `wire.rs`     framing, advertised API versions, response encoding
//! - `api/`        one file per group of Kafka APIs (decode -> broker -> encode)
//! - `broker.rs`   topic registry, producer ids
//! - `partition.rs` the partition owner task: group commit, idempotence, retention, reads
//! - `segment.rs`  segment files, sparse offset/time indexes, recovery
//! - `batch.rs`    RecordBatch v2 parsing and validation
//! - `memory.rs`   --max-memory budget and the tail cache
//! - `compaction.rs` cleanup.policy=compact
//! - `groups.rs`   the group coordinator task and the durable offset log
//! - `server.rs`   listener, connections, credit window

mod api;
mod applog;
mod batch;
mod broker;
mod compaction;
mod config;
#[cfg(test)]
mod crash_tests;
mod errors;
mod groups;
mod memory;
mod partition;
mod segment;
mod server;
mod sessions;
mod storage;
mod txn;
mod wire;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "kaka", version, about = "A single-node, Kafka-wire-compatible, durable log broker")]
struct Cli {
    #[command(flatten)]
    opts: Opts,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Args, Debug, Clone)]
struct Opts {
    /// Data directory (topics, segments, committed offsets).
    #[arg(long, default_value = "kaka-data", global = true)]
    dir: PathBuf,
    /// Address to listen on; also advertised to clients in Metadata.
    #[arg(long, default_value = "127.0.0.1:9092")]
    listen: SocketAddr,
    /// Host name clients are told to connect to (Metadata, FindCoordinator). Default: the
    /// listen address, or 127.0.0.1 when listening on all interfaces.
    #[arg(long)]
    advertised_host: Option<String>,
    /// Roll to a new segment file when the active one would exceed this many bytes.
    #[arg(long, default_value_t = 1 << 30)]
    segment_bytes: u64,
    /// 0 (default): a produce is answered only after its records are fdatasync'ed (one sync
    /// shared by every produce queued at that moment). N > 0: answer right after write(2)
    /// and fdatasync at most every N ms; a broker crash then loses nothing (the page cache
    /// survives it), but a power failure or kernel crash can lose up to the last N ms of
    /// acknowledged records.
    #[arg(long, default_value_t = 0)]
    fsync_interval_ms: u64,
    /// Bound on record bytes held in RAM (queued produces + the tail cache). The cache is
    /// evicted first; a produce that still does not fit is refused whole (retriable
    /// NOT_ENOUGH_REPLICAS). Accepts K/M/G suffixes (powers of 1024); 0 is refused.
    #[arg(long, default_value = "256M", value_parser = parse_max_memory)]
    max_memory: usize,
    /// Delete the oldest closed segments while a partition exceeds this size (-1: no limit).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    retention_bytes: i64,
    /// Delete closed segments whose newest record is older than this many ms. Off by default
    /// (-1: no record is ever deleted for its age; retention is by size only, and only with
    /// --retention-bytes). A topic can still opt in with its own retention.ms.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    retention_ms: i64,
    /// How often retention and compaction run.
    #[arg(long, default_value_t = 30_000)]
    retention_check_interval_ms: u64,
    /// How long a compacted topic keeps tombstones (records with a null value).
    #[arg(long, default_value_t = 86_400_000)]
    delete_retention_ms: i64,
    /// Refuse Produce/Metadata for unknown topics instead of creating them.
    #[arg(long)]
    no_auto_create_topics: bool,
    /// Partition count of auto-created topics (and CreateTopics with -1).
    #[arg(long, default_value_t = 1)]
    num_partitions: i32,
    /// Largest request frame accepted; bigger frames close the connection (as Kafka's
    /// socket.request.max.bytes).
    #[arg(long, default_value_t = 100 * 1024 * 1024)]
    max_request_bytes: usize,
    /// Credit window: requests in flight per connection before the broker stops reading it.
    #[arg(long, default_value_t = 32)]
    max_in_flight: usize,
    /// Close a connection whose response has made no progress into the socket for this long
    /// (a client that stopped reading), freeing what writes to it.
    #[arg(long, default_value_t = 60_000)]
    write_stall_timeout_ms: u64,
    /// Wait this long for more members before the first rebalance of a new group.
    #[arg(long, default_value_t = 300)]
    group_initial_rebalance_delay_ms: u64,
    /// Test hook: every fdatasync after the first N of each partition fails.
    #[arg(long, hide = true)]
    debug_fail_fsync_after: Option<u64>,
    /// Test hook: fetches return no record at or past this offset (in any partition), as
    /// from a broker that stopped serving reads there, while --debug-hold-file exists.
    #[arg(long, hide = true, requires = "debug_hold_file")]
    debug_hold_fetches_at: Option<i64>,
    /// Test hook: a produce whose batch lands at or past this offset (in any partition) is
    /// appended, but not acknowledged while --debug-hold-file exists, as by a broker that
    /// stopped answering there.
    #[arg(long, hide = true, requires = "debug_hold_file")]
    debug_hold_acks_at: Option<i64>,
    /// The file whose existence turns --debug-hold-fetches-at and --debug-hold-acks-at on.
    #[arg(long, hide = true)]
    debug_hold_file: Option<std::path::PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Topic administration.
    Topics {
        #[command(subcommand)]
        cmd: TopicsCmd,
    },
}

#[derive(Subcommand, Debug)]
enum TopicsCmd {
    /// Create a topic in --dir (broker stopped) or, with --bootstrap, on a running broker.
    Create {
        name: String,
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        /// Topic config, repeatable: cleanup.policy, retention.bytes, retention.ms,
        /// segment.bytes, delete.retention.ms.
        #[arg(long = "config", value_parser = config::TopicConfig::parse_pair)]
        configs: Vec<(String, String)>,
        /// host:port of a running kaka (sends CreateTopics).
        #[arg(long)]
        bootstrap: Option<String>,
    },
}

/// A byte count with an optional K, M or G suffix (powers of 1024). A count that does not fit
/// in a `usize` is refused rather than wrapped.
fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1usize << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let too_large = || format!("{s} is too large: the limit is {} bytes", usize::MAX);
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{s} is not a size: expected a whole number of bytes, optionally with K, M or G"
        ));
    }
    let n = num.parse::<usize>().map_err(|_| too_large())?;
    n.checked_mul(mult).ok_or_else(too_large)
}

/// `--max-memory`: a size, and not 0 (a budget that holds no record would refuse every produce).
fn parse_max_memory(s: &str) -> Result<usize, String> {
    match parse_size(s)? {
        0 => Err("a memory budget of 0 bytes can hold no record, so every produce would be refused; \
                  give a size such as 256M"
            .to_string()),
        n => Ok(n),
    }
}

fn broker_config(o: &Opts) -> config::BrokerConfig {
    config::BrokerConfig {
        dir: o.dir.clone(),
        advertised_host: o.advertised_host.clone().unwrap_or_else(|| {
            if o.listen.ip().is_unspecified() {
                "127.0.0.1".to_string()
            } else {
                o.listen.ip().to_string()
            }
        }),
        advertised_port: o.listen.port() as i32,
        segment_bytes: o.segment_bytes.max(1024),
        fsync_interval_ms: o.fsync_interval_ms,
        max_memory: o.max_memory,
        retention_bytes: o.retention_bytes,
        retention_ms: o.retention_ms,
        retention_check_ms: o.retention_check_interval_ms,
        delete_retention_ms: o.delete_retention_ms,
        auto_create_topics: !o.no_auto_create_topics,
        default_partitions: o.num_partitions.max(1),
        max_request_bytes: o.max_request_bytes,
        max_in_flight: o.max_in_flight,
        initial_rebalance_delay_ms: o.group_initial_rebalance_delay_ms,
        write_stall_timeout_ms: o.write_stall_timeout_ms.max(1),
        fail_fsync_after: o.debug_fail_fsync_after,
        hold_fetches: o.debug_hold_fetches_at.zip(o.debug_hold_file.clone()),
        hold_acks: o.debug_hold_acks_at.zip(o.debug_hold_file.clone()),
    }
}

fn main() {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KAKA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kaka: cannot start runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = rt.block_on(async move {
        match cli.command {
            Some(Command::Topics { cmd: TopicsCmd::Create { name, partitions, configs, bootstrap } }) => {
                let configs: BTreeMap<String, String> = configs.into_iter().collect();
                create_topic_cmd(&cli.opts, &name, partitions, configs, bootstrap).await
            }
            None => run_broker(cli.opts).await,
        }
    });
    std::process::exit(code);
}

/// Raises the soft descriptor limit to the hard one: every segment holds two descriptors
/// (writer and fetch reader) and every client one, and a broker that runs out of descriptors
/// can neither accept clients nor roll segments.
fn raise_fd_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
                tracing::warn!(soft = lim.rlim_cur, "could not raise the open-file limit");
            }
        }
    }
}

async fn run_broker(opts: Opts) -> i32 {
    raise_fd_limit();
    let cfg = broker_config(&opts);
    let listener = match server::bind(opts.listen) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(listen = %opts.listen, "cannot listen: {e}");
            return 1;
        }
    };
    let broker = match broker::Broker::open(cfg) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!("cannot open data directory: {e}");
            return 1;
        }
    };
    // Completes or aborts the transactions a crash interrupted, then expires timed-out ones.
    txn::Txns::start(&broker);
    tracing::info!(
        listen = %opts.listen,
        dir = %opts.dir.display(),
        fsync_interval_ms = opts.fsync_interval_ms,
        "kaka ready"
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(server::serve(broker.clone(), listener, stop_rx));
    wait_for_signal().await;
    tracing::info!("stopping: draining partitions and syncing");
    let _ = stop_tx.send(true);
    let _ = server.await;
    broker.shutdown().await;
    tracing::info!(
        syncs = partition::SYNCS.load(Ordering::Relaxed),
        appends = partition::APPENDS.load(Ordering::Relaxed),
        "stopped cleanly (fdatasync calls and batches appended since start)"
    );
    0
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        tracing::error!("cannot install signal handlers");
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

async fn create_topic_cmd(
    opts: &Opts,
    name: &str,
    partitions: i32,
    configs: BTreeMap<String, String>,
    bootstrap: Option<String>,
) -> i32 {
    if let Some(addr) = bootstrap {
        return match create_topic_remote(&addr, name, partitions, &configs).await {
            Ok(()) => {
                println!("created topic {name} ({partitions} partitions)");
                0
            }
            Err(e) => {
                eprintln!("kaka topics create: {e}");
                1
            }
        };
    }
    let mut cfg = broker_config(opts);
    cfg.retention_check_ms = u64::MAX / 4;
    let broker = match broker::Broker::open(cfg) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("kaka topics create: {e}");
            return 1;
        }
    };
    let code = match broker.create_topic(name, partitions, configs, false) {
        Ok(_) => {
            println!("created topic {name} ({partitions} partitions) in {}", opts.dir.display());
            0
        }
        Err((code, msg)) => {
            eprintln!("kaka topics create: {msg} (error {code})");
            1
        }
    };
    broker.shutdown().await;
    code
}

/// Sends CreateTopics v4 to a running broker.
async fn create_topic_remote(
    addr: &str,
    name: &str,
    partitions: i32,
    configs: &BTreeMap<String, String>,
) -> Result<(), String> {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse, RequestHeader};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let version = 4;
    let mut t = CreatableTopic::default();
    t.name = api::topic_name(name);
    t.num_partitions = partitions;
    t.replication_factor = 1;
    for (k, v) in configs {
        let mut c = CreatableTopicConfig::default();
        c.name = StrBytes::from_string(k.clone());
        c.value = Some(StrBytes::from_string(v.clone()));
        t.configs.push(c);
    }
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 30_000;
    let mut h = RequestHeader::default();
    h.request_api_key = ApiKey::CreateTopics as i16;
    h.request_api_version = version;
    h.correlation_id = 1;
    h.client_id = Some(StrBytes::from_static_str("kaka-cli"));
    let mut body = bytes::BytesMut::new();
    h.encode(&mut body, ApiKey::CreateTopics.request_header_version(version)).map_err(|e| e.to_string())?;
    req.encode(&mut body, version).map_err(|e| e.to_string())?;
    let mut s = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("{addr}: {e}"))?;
    s.write_i32(body.len() as i32).await.map_err(|e| e.to_string())?;
    s.write_all(&body).await.map_err(|e| e.to_string())?;
    let n = s.read_i32().await.map_err(|e| e.to_string())?;
    let mut resp = vec![0u8; n.max(0) as usize];
    s.read_exact(&mut resp).await.map_err(|e| e.to_string())?;
    let mut b = bytes::Bytes::from(resp);
    let hv = ApiKey::CreateTopics.response_header_version(version);
    kafka_protocol::messages::ResponseHeader::decode(&mut b, hv).map_err(|e| e.to_string())?;
    let r = CreateTopicsResponse::decode(&mut b, version).map_err(|e| e.to_string())?;
    match r.topics.first() {
        Some(t) if t.error_code == 0 => Ok(()),
        Some(t) => Err(format!("error {}: {}", t.error_code, t.error_message.as_deref().unwrap_or(""))),
        None => Err("empty response".into()),
    }
}

#[cfg(test)]
mod size_tests {
    use super::{parse_max_memory, parse_size};

    #[test]
    fn suffixes_are_powers_of_1024() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("3m"), Ok(3 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size(" 1g "), Ok(1 << 30));
        assert_eq!(parse_max_memory("256M"), Ok(256 << 20));
        assert_eq!(parse_max_memory("1"), Ok(1));
    }

    #[test]
    fn overflow_is_refused_not_wrapped() {
        // 2^54 K = 2^64 bytes: wrapped, it was 0.
        let e = parse_size("18014398509481984K").unwrap_err();
        assert!(e.contains("18014398509481984K") && e.contains("too large"), "{e}");
        assert!(parse_max_memory("18014398509481984K").is_err());
        assert!(parse_size("17179869184G").is_err(), "2^34 G = 2^64 bytes");
        assert!(parse_size("99999999999999999999").unwrap_err().contains("too large"));
        // The largest sizes that fit are accepted.
        assert_eq!(parse_size(&usize::MAX.to_string()), Ok(usize::MAX));
        assert_eq!(parse_size("17179869183G"), Ok(17179869183usize << 30));
    }

    #[test]
    fn zero_budget_is_refused() {
        for zero in ["0", "0K", "0M", "0G", "000"] {
            let e = parse_max_memory(zero).unwrap_err();
            assert!(e.contains("0 bytes"), "{zero}: {e}");
        }
    }

    #[test]
    fn garbage_is_refused() {
        for bad in ["", "K", "M", "-1", "-1M", "+5", "1.5G", "12KB", "1T", "abc", "1 M", "0x10", "M5"] {
            let e = parse_size(bad).unwrap_err();
            assert!(e.contains("not a size"), "{bad:?}: {e}");
        }
    }
}
