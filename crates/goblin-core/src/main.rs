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
    let (engine, loaded_keys) = recover(&cfg);
    let snapshots =
        snapshots::Snapshots::new(cfg.load.clone(), cfg.save.0.clone(), engine.repl.offset, loaded_keys);
    let fail = |e: std::io::Error| -> ! {
        tracing::error!("{e}");
        std::process::exit(1);
    };
    let mut server = server::Server::new(cfg, engine, snapshots).unwrap_or_else(|e| fail(e));
    server.open_listeners().unwrap_or_else(|e| fail(e));
    tracing::info!("ready to accept connections");
    if let Err(e) = server.run() {
        tracing::error!("event loop failed: {e}");
        std::process::exit(1);
    }
}

/// Startup step 2: the dataset and its lineage before any client connects: the `--load`
/// snapshot (its lineage and offset), else a new lineage at offset 0. Kafka replay attaches
/// here next. A damaged snapshot stops the server: serving without it would lose its data.
/// Returns the engine and how many keys were loaded.
fn recover(cfg: &config::Config) -> (engine::Engine, u64) {
    if let Some(path) = &cfg.load {
        return snapshots::load_at_startup(path).unwrap_or_else(|e| {
            tracing::error!("{e}");
            std::process::exit(1);
        });
    }
    let engine = engine::Engine::new(engine::Replication::new_lineage());
    tracing::info!("new lineage {} at offset 0 (nothing to recover)", engine.repl.replid);
    (engine, 0)
}
