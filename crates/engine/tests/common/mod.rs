//! Shared harness for the replay property tests (one test file per data type).
//!
//! The property: run any command sequence on engine A, collecting the canonical mutations it
//! emits; apply those mutations, in order, to an empty engine B in replay mode; A and B then
//! hold identical data, expiry deadlines included, and B's logical offset equals A's.

#![allow(dead_code)]

use engine::{Engine, Millis, Outcome, Replication};
use std::collections::BTreeMap;
use store::Plain;

/// A command as a list of arguments.
pub type Cmd = Vec<Vec<u8>>;

/// The full, comparable state of an engine's keyspace.
pub fn dump(e: &Engine) -> BTreeMap<Vec<u8>, (Plain, Option<Millis>)> {
    let mut m = BTreeMap::new();
    e.ks.for_each(|k, v, exp| {
        m.insert(k.to_vec(), (v.to_plain(), exp));
    });
    m
}

/// Runs `cmds` on a fresh engine A (command i at time `start + i * step_ms`), replays A's
/// mutations on a fresh engine B, and asserts the two are equal. Returns A's replies, so a
/// caller can assert on them too.
pub fn check_replay(cmds: &[Cmd], start: Millis, step_ms: i64) -> Vec<Vec<u8>> {
    let mut a = Engine::new(Replication { replid: "a".repeat(40), offset: 0 });
    let mut replies = Vec::new();
    let mut mutations: Vec<Cmd> = Vec::new();
    let mut now = start;
    for cmd in cmds {
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_slice()).collect();
        let mut out = Vec::new();
        let outcome = a.run(&args, now, &mut out);
        if let Outcome::Blocked(_) = outcome {
            // A blocking command that would wait answers as its timeout would (tests have no
            // other client to wake it).
            out.extend_from_slice(b"*-1\r\n");
        }
        replies.push(out);
        mutations.extend(a.muts.decode());
        a.muts.clear();
        // The active expiry cycle runs between commands, as on the server.
        a.active_expire(now, 20, 1000);
        mutations.extend(a.muts.decode());
        a.muts.clear();
        now += step_ms;
    }
    assert_eq!(a.repl.offset, mutations.len() as u64, "one logical offset per mutation");

    let mut b = Engine::new(Replication { replid: "a".repeat(40), offset: 0 });
    b.replaying = true;
    for m in &mutations {
        let args: Vec<&[u8]> = m.iter().map(|a| a.as_slice()).collect();
        let mut out = Vec::new();
        b.run(&args, now, &mut out);
        assert!(
            !out.starts_with(b"-"),
            "replaying {:?} failed: {}",
            pretty(m),
            String::from_utf8_lossy(&out)
        );
    }
    assert_eq!(b.repl.offset, a.repl.offset, "replay advances the offset identically");
    let (da, db) = (dump(&a), dump(&b));
    if da != db {
        let cmds: Vec<String> = cmds.iter().map(pretty).collect();
        let muts: Vec<String> = mutations.iter().map(pretty).collect();
        panic!("stores differ\ncommands: {cmds:#?}\nmutations: {muts:#?}\nA: {da:?}\nB: {db:?}");
    }
    replies
}

pub fn pretty(c: &Cmd) -> String {
    c.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>().join(" ")
}

/// Builds a command from string-ish parts.
pub fn cmd<S: AsRef<[u8]>>(parts: &[S]) -> Cmd {
    parts.iter().map(|p| p.as_ref().to_vec()).collect()
}
