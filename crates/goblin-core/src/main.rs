//! goblin-core: a compact, single-threaded, Redis-compatible in-memory server speaking RESP2.
//!
//! Layout:
//! - [`config`]: the command line (clap).
//! - [`server`]: the mio event loop, listeners, reads/writes, shutdown, hooks for the journal.
//! - [`dispatch`]: request -> table lookup -> engine or server command -> reply, MULTI/EXEC.
//! - [`blocking`]: clients parked by blocking commands.
//! - [`conn`]: per-connection state.
//! - [`batches`]: the one call site that commits each atomic unit and hands it to the sinks.
//! - [`watch`]: WATCH/UNWATCH, a batch sink.
//! - [`snapshots`]: --load, SAVE, BGSAVE, GOBLIN.DUMPWORLD, GOBLIN.LOAD; [`dumpworld`] the tool.
//! - [`journal`]: the Kafka write journal (so far: the `--kafka` value).
//! - [`commands`]: the commands the server runs itself (INFO, CLIENT, CONFIG, COMMAND, HELLO ...).

mod batches;
mod blocking;
mod commands;
mod config;
mod conn;
mod dispatch;
mod dumpworld;
mod journal;
mod pubsub;
mod scripting;
mod server;
mod snapshots;
mod stats;
mod watch;

use clap::Parser;

/// jemalloc: compact for many small allocations, and INFO's `used_memory` reads its exact
/// `stats.allocated` counter.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let cfg = config::Config::parse();
    let filter = tracing_subscriber::EnvFilter::try_new(&cfg.loglevel).unwrap_or_else(|e| {
        eprintln!("goblin-core: invalid --loglevel '{}': {e}", cfg.loglevel);
        std::process::exit(2);
    });
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    tracing::info!("goblin-core {} starting (pid {})", env!("CARGO_PKG_VERSION"), std::process::id());
    // Startup, in an order that no client can observe: (1) the configuration is parsed and
    // checked; (2) the dataset is recovered (a snapshot, then the Kafka log, once those exist;
    // until then a fresh lineage at offset 0); (3) only then do the listeners open.
    if let Err(e) = cfg.validate() {
        tracing::error!("{e}");
        std::process::exit(2);
    }
    if let Some(config::Tool::Dumpworld { host, port, output }) = &cfg.tool {
        std::process::exit(match dumpworld::fetch(host, *port, output) {
            Ok(()) => 0,
            Err(e) => {
                tracing::error!("{e}");
                1
            }
        });
    }
    let Recovered { engine, loaded_keys, snapshot_offset, journal } = recover(&cfg);
    // Changes since the last save count from the snapshot, replayed mutations included.
    let snapshots =
        snapshots::Snapshots::new(cfg.load.clone(), cfg.save.0.clone(), snapshot_offset, loaded_keys);
    let fail = |e: std::io::Error| -> ! {
        tracing::error!("{e}");
        std::process::exit(1);
    };
    let mut server = server::Server::new(cfg, engine, snapshots).unwrap_or_else(|e| fail(e));
    server.set_journal(journal).unwrap_or_else(|e| fail(e));
    server.open_listeners().unwrap_or_else(|e| fail(e));
    tracing::info!("ready to accept connections");
    if let Err(e) = server.run() {
        tracing::error!("event loop failed: {e}");
        std::process::exit(1);
    }
}

/// What startup recovered: the engine, how many keys the snapshot held, and the journal.
struct Recovered {
    engine: engine::Engine,
    loaded_keys: u64,
    /// The logical offset the loaded snapshot holds (0 without one).
    snapshot_offset: u64,
    journal: Option<server::JournalHandle>,
}

/// Startup step 2: the dataset and its lineage before any client connects. First the
/// `--load` snapshot (its lineage and offset), else a new lineage at offset 0; then, with
/// `--kafka`, the topic replayed from the snapshot's acknowledged broker offset (inclusively)
/// or from the earliest record, through the high watermark captured first. Any failure stops
/// the server before it listens: serving without what it could not recover would lose data.
fn recover(cfg: &config::Config) -> Recovered {
    let die = |e: String| -> ! {
        tracing::error!("{e}");
        std::process::exit(1);
    };
    let (mut engine, loaded_keys, meta) = match &cfg.load {
        Some(path) => snapshots::load_at_startup(path).unwrap_or_else(|e| die(e)),
        None => (engine::Engine::new(engine::Replication::new_lineage()), 0, None),
    };
    let snapshot_offset = engine.repl.offset;
    #[cfg(feature = "kafka")]
    let journal = match &cfg.kafka {
        Some(k) => {
            let target = journal::target::parse(k).unwrap_or_else(|e| die(e));
            let j = journal::kafka::Journal::connect(target).unwrap_or_else(|e| die(e));
            // Seek to the snapshot's acknowledged broker offset, or its consumer position if
            // lower (DESIGN.md, decision 3). A snapshot without cursors (written by a server
            // without --kafka) falls back to the first record at or after its file's birth time
            // minus --kafka-time-buffer; no snapshot: the earliest record.
            use journal::kafka::Start;
            let from = match &meta {
                Some(m) if m.kafka_consumer_position >= 0 && m.kafka_acked_offset >= 0 => {
                    Start::Offset(m.kafka_acked_offset.min(m.kafka_consumer_position))
                }
                Some(m) if m.kafka_acked_offset >= 0 || m.kafka_consumer_position >= 0 => {
                    Start::Offset(m.kafka_acked_offset.max(m.kafka_consumer_position))
                }
                Some(_) => {
                    let path = cfg.load.as_deref().expect("a snapshot was loaded");
                    let (born, exact) = snapshot::birth_time(path)
                        .unwrap_or_else(|e| die(format!("{}: {e}", path.display())));
                    if !exact {
                        tracing::warn!(
                            "{}: the file system keeps no creation time; using its modification time",
                            path.display()
                        );
                    }
                    let ms =
                        born.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
                    let ms = ms - cfg.kafka_time_buffer as i64 * 1000;
                    tracing::info!(
                        "the snapshot has no Kafka cursor: replaying from the first record at or after {ms} ms \
                         (its creation time minus --kafka-time-buffer {})",
                        cfg.kafka_time_buffer
                    );
                    Start::Time(ms)
                }
                None => Start::Earliest,
            };
            let adopt = meta.is_none();
            let mut j = j;
            let stats =
                journal::kafka::replay(&j.target, &mut engine, from, adopt).unwrap_or_else(|e| die(e));
            // Everything replayed is durable in the topic: a snapshot taken before this process
            // produces anything still records where the journal stands (the snapshot's own
            // broker offset when the replay read nothing).
            let broker = match (&meta, stats.last_broker_offset) {
                (Some(m), -1) => m.kafka_acked_offset,
                (_, b) => b,
            };
            j.set_recovered(engine.repl.offset, broker);
            Some(server::JournalHandle { journal: j, replay: stats })
        }
        None => None,
    };
    #[cfg(not(feature = "kafka"))]
    let journal = None;
    let _ = &meta;
    if engine.repl.offset == 0 && loaded_keys == 0 {
        tracing::info!("lineage {} at offset 0", engine.repl.replid);
    }
    Recovered { engine, loaded_keys, snapshot_offset, journal }
}
