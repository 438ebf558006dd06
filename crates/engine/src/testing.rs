//! Helpers for the engine's unit tests: run one command, read back its reply and the canonical
//! mutations it emitted.

use crate::Engine;

/// Runs one command (arguments as strings) at unix time `now` ms; returns the reply as text.
/// (Replies in these tests are text; a stray invalid byte shows as U+FFFD and fails the
/// comparison it appears in.)
pub fn reply(e: &mut Engine, now: i64, args: &[&str]) -> String {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let mut out = Vec::new();
    e.run(&args, now, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs `line` (arguments separated by single spaces) at unix time `now` ms: its reply and the
/// mutations it emitted.
pub fn run_line(e: &mut Engine, now: i64, line: &str) -> (String, Vec<String>) {
    let args: Vec<&str> = line.split(' ').collect();
    (reply(e, now, &args), take_muts(e))
}

/// The mutations emitted since the last call, each as its arguments joined by spaces: commits
/// them as one batch.
pub fn take_muts(e: &mut Engine) -> Vec<String> {
    let Some(batch) = e.commit(crate::Origin::Command) else { return Vec::new() };
    batch.to_args().iter().map(|m| String::from_utf8_lossy(&m.join(&b' ')).into_owned()).collect()
}
