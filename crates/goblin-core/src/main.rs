//! goblin-core: a compact, single-threaded, Redis-compatible in-memory server speaking RESP2.
//!
//! Layout:
//! - [`config`]: the command line (clap).
//! - [`server`]: the mio event loop, listeners, reads/writes, shutdown, hooks for the journal.
//! - [`dispatch`]: request -> table lookup -> engine or server command -> reply, MULTI/EXEC.
//! - [`blocking`]: clients parked by blocking commands.
//! - [`conn`]: per-connection state.
//! - [`watch`]: WATCH/UNWATCH, fed by the canonical mutations.
//! - [`commands`]: the commands the server runs itself (INFO, CLIENT, CONFIG, COMMAND, HELLO ...).

mod blocking;
mod commands;
mod config;
mod conn;
mod dispatch;
mod server;
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
    let mut server = match server::Server::new(cfg) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e}");
            std::process::exit(1);
        }
    };
    tracing::info!("ready to accept connections");
    if let Err(e) = server.run() {
        tracing::error!("event loop failed: {e}");
        std::process::exit(1);
    }
}
