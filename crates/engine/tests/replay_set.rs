//! Replay property for set commands: any sequence of set writes (random pops, moves, stores,
//! with deletes, expiries and keys of other types mixed in) emits canonical mutations that
//! rebuild the exact same keyspace on an empty replica.

mod common;

use common::{check_replay, Cmd};
use proptest::prelude::*;

fn key() -> impl Strategy<Value = String> {
    // "s" holds a string and "l" a list when the sequence creates them: WRONGTYPE paths.
    prop_oneof![
        4 => Just("a".to_string()),
        3 => Just("b".to_string()),
        2 => Just("c".to_string()),
        1 => Just("s".to_string()),
        1 => Just("l".to_string()),
    ]
}

fn member() -> impl Strategy<Value = String> {
    // Integers keep sets in the intset encoding until a string member arrives.
    prop_oneof![3 => (0..8i64).prop_map(|i| i.to_string()), 2 => (0..5u8).prop_map(|i| format!("m{i}"))]
}

fn keys(n: usize) -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(key(), 1..n)
}

fn with(mut head: Vec<String>, tail: Vec<String>) -> Cmd {
    head.extend(tail);
    head.into_iter().map(String::into_bytes).collect()
}

fn s(x: &str) -> String {
    x.to_string()
}

fn command() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        5 => (key(), proptest::collection::vec(member(), 1..4)).prop_map(|(k, ms)| with(vec![s("SADD"), k], ms)),
        3 => (key(), proptest::collection::vec(member(), 1..4)).prop_map(|(k, ms)| with(vec![s("SREM"), k], ms)),
        2 => (key(), prop_oneof![Just(None), (0..4usize).prop_map(Some)]).prop_map(|(k, n)| match n {
            None => with(vec![s("SPOP"), k], vec![]),
            Some(n) => with(vec![s("SPOP"), k, n.to_string()], vec![]),
        }),
        2 => (key(), key(), member()).prop_map(|(a, b, m)| with(vec![s("SMOVE"), a, b, m], vec![])),
        1 => (key(), keys(4)).prop_map(|(d, ks)| with(vec![s("SINTERSTORE"), d], ks)),
        1 => (key(), keys(4)).prop_map(|(d, ks)| with(vec![s("SUNIONSTORE"), d], ks)),
        1 => (key(), keys(4)).prop_map(|(d, ks)| with(vec![s("SDIFFSTORE"), d], ks)),
        1 => keys(4).prop_map(|ks| with(vec![s("SINTER")], ks)),
        1 => keys(4).prop_map(|ks| with(vec![s("SUNION")], ks)),
        1 => keys(3).prop_map(|ks| with(vec![s("SINTERCARD"), ks.len().to_string()], ks)),
        1 => (key(), -3i64..4).prop_map(|(k, n)| with(vec![s("SRANDMEMBER"), k, n.to_string()], vec![])),
        1 => key().prop_map(|k| with(vec![s("SMEMBERS"), k], vec![])),
        1 => key().prop_map(|k| with(vec![s("SSCAN"), k, s("0")], vec![])),
        1 => key().prop_map(|k| with(vec![s("DEL"), k], vec![])),
        1 => (key(), 1i64..4).prop_map(|(k, ms)| with(vec![s("PEXPIRE"), k, ms.to_string()], vec![])),
        1 => Just(with(vec![s("SET"), s("s"), s("str")], vec![])),
        1 => Just(with(vec![s("RPUSH"), s("l"), s("e")], vec![])),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn set_commands_replay_exactly(cmds in proptest::collection::vec(command(), 1..60)) {
        check_replay(&cmds, 1_000_000, 1);
    }
}

/// Sets that cross the intset and packed thresholds, then get popped and stored.
#[test]
fn big_sets_replay_exactly() {
    let mut cmds = Vec::new();
    for i in 0..600 {
        cmds.push(with(vec![s("SADD"), s("ints"), i.to_string()], vec![]));
        cmds.push(with(vec![s("SADD"), s("strs"), format!("m{i}")], vec![]));
    }
    cmds.push(with(vec![s("SADD"), s("strs"), s("1"), s("2")], vec![]));
    cmds.push(with(vec![s("SPOP"), s("ints"), s("250")], vec![]));
    cmds.push(with(vec![s("SINTERSTORE"), s("both"), s("ints"), s("strs")], vec![]));
    cmds.push(with(vec![s("SUNIONSTORE"), s("all"), s("ints"), s("strs")], vec![]));
    cmds.push(with(vec![s("SDIFFSTORE"), s("ints"), s("all"), s("strs")], vec![]));
    for _ in 0..5 {
        cmds.push(with(vec![s("SPOP"), s("all"), s("200")], vec![]));
    }
    let replies = check_replay(&cmds, 0, 0);
    assert_eq!(replies[1200], b":2\r\n");
    assert!(replies[1203].starts_with(b":"), "{:?}", String::from_utf8_lossy(&replies[1203]));
}
