//! Helpers of the replication tests: a replica's INFO replication, and waiting on it.

use super::brokers::info;
use super::{temp_path, Server};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A fresh path for a Unix socket or a snapshot, as a string.
pub fn sock(tag: &str) -> String {
    temp_path(tag).to_str().unwrap().to_string()
}

/// INFO replication of a server.
pub fn repl(s: &Server) -> HashMap<String, String> {
    info(&mut s.conn(), "replication")
}

/// Waits until `cond` holds for the server's INFO replication, or fails with its log.
pub fn wait_for(
    s: &Server,
    what: &str,
    cond: impl Fn(&HashMap<String, String>) -> bool,
) -> HashMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = repl(s);
        if cond(&m) {
            return m;
        }
        assert!(Instant::now() < deadline, "waiting for {what}: {m:?}\nlog:\n{}", s.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The server's logical offset (master_repl_offset).
pub fn offset(s: &Server) -> u64 {
    repl(s)["master_repl_offset"].parse().unwrap()
}
