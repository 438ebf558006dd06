//! The log: `--loglevel` / `--logfile` at startup, and CONFIG SET loglevel at run time.
//!
//! A level is one of Redis's names (debug, verbose, notice, warning, nothing), one of
//! tracing's (trace, debug, info, warn, error, off), or a tracing directive list whose every
//! entry names a level (`notice,goblin_core::journal=debug`). Anything else is refused with
//! Redis's text: tracing would read a bare unknown word as a target name and, with no level
//! for the rest, log nothing at all, which is how a typo in a redis.conf would silence the
//! server.

use std::sync::OnceLock;
use tracing_subscriber::{reload, EnvFilter, Registry};

/// Redis's refusal of a level it does not know (CONFIG SET and the configuration file).
pub const BAD_LEVEL: &str =
    "argument(s) must be one of the following: debug, verbose, notice, warning, nothing";

const TRACING_LEVELS: &[&str] = &["trace", "debug", "info", "warn", "error", "off"];

/// The running subscriber's filter, replaced by CONFIG SET loglevel.
static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Redis's level name as tracing's; tracing's own names and other words unchanged.
fn tracing_name(word: &str) -> &str {
    match word {
        "verbose" => "debug",
        "notice" => "info",
        "warning" => "warn",
        "nothing" => "off",
        other => other,
    }
}

/// Checks a `--loglevel` value (see the module's text) and returns the tracing filter it
/// stands for.
pub fn filter_for(level: &str) -> Result<String, String> {
    let known = |w: &str| TRACING_LEVELS.contains(&tracing_name(&w.to_ascii_lowercase()));
    let mut parts = Vec::new();
    for part in level.split(',') {
        let ok = match part.rsplit_once('=') {
            Some((target, lvl)) => {
                !target.is_empty() && TRACING_LEVELS.contains(&lvl.to_ascii_lowercase().as_str())
            }
            None => known(part),
        };
        if !ok {
            return Err(BAD_LEVEL.to_string());
        }
        parts.push(if part.contains('=') {
            part.to_string()
        } else {
            tracing_name(&part.to_ascii_lowercase()).to_string()
        });
    }
    Ok(parts.join(","))
}

/// `--loglevel` as clap checks it: the value itself, refused as [`filter_for`] refuses it.
pub fn parse_level(level: &str) -> Result<String, String> {
    filter_for(level).map(|_| level.to_string())
}

/// Installs the subscriber: `filter` (from [`filter_for`]) over Redis-style lines written to
/// `writer`, reloadable by [`set_level`].
pub fn init(filter: &str, writer: tracing_subscriber::fmt::writer::BoxMakeWriter, ansi: bool) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = EnvFilter::try_new(filter).expect("checked by filter_for");
    let (filter, handle) = reload::Layer::new(filter);
    let _ = FILTER.set(handle);
    tracing_subscriber::registry()
        .with(filter)
        .with(tracing_subscriber::fmt::layer().with_writer(writer).with_ansi(ansi))
        .init();
}

/// CONFIG SET loglevel: the new level applies to the next line logged.
pub fn set_level(level: &str) -> Result<(), String> {
    let filter = EnvFilter::try_new(filter_for(level)?).map_err(|e| e.to_string())?;
    match FILTER.get() {
        Some(handle) => handle.reload(filter).map_err(|e| e.to_string()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_directive_lists() {
        assert_eq!(filter_for("verbose").unwrap(), "debug");
        assert_eq!(filter_for("WARNING").unwrap(), "warn");
        assert_eq!(filter_for("nothing").unwrap(), "off");
        assert_eq!(filter_for("info").unwrap(), "info");
        assert_eq!(
            filter_for("notice,goblin_core::journal=debug").unwrap(),
            "info,goblin_core::journal=debug"
        );
        for bad in ["bla", "--bla", "", "info,", "x=loud", "=debug", "verbose=debug,"] {
            assert_eq!(filter_for(bad), Err(BAD_LEVEL.to_string()), "{bad:?}");
        }
    }
}
