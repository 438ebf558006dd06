//! Replay property for sparse arrays: any sequence of AR* commands (mixed with other types for
//! the WRONGTYPE paths, and TTLs) leaves the same store on the origin and on an engine that
//! replays only the emitted canonical mutations, insert cursors included.

mod common;

use common::{check_replay, cmd, Cmd};
use engine::Engine;
use proptest::prelude::*;
use std::collections::BTreeMap;
use store::ValueRef;

fn key() -> impl Strategy<Value = &'static str> {
    prop_oneof![4 => Just("a1"), 4 => Just("a2"), 1 => Just("str")]
}

fn index() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => (0u64..12).prop_map(|i| i.to_string()),
        2 => (0u64..3000).prop_map(|i| i.to_string()),
        1 => Just("18446744073709551614".to_string()),
        1 => Just("18446744073709551613".to_string()),
        1 => Just("18446744073709551615".to_string()),
        1 => Just("-1".to_string()),
    ]
}

fn val() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("7".to_string()),
        Just("1.0".to_string()),
        Just("".to_string()),
        (0usize..900).prop_map(|n| "x".repeat(n))
    ]
}

fn command() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        5 => (key(), index(), proptest::collection::vec(val(), 1..4)).prop_map(|(k, i, vs)| {
            let mut c = vec!["ARSET".to_string(), k.to_string(), i];
            c.extend(vs);
            cmd(&c)
        }),
        2 => (key(), index(), val(), index(), val()).prop_map(|(k, i, v, j, w)| cmd(&["ARMSET", k, &i, &v, &j, &w])),
        2 => (key(), index(), index()).prop_map(|(k, i, j)| cmd(&["ARDEL", k, &i, &j])),
        2 => (key(), index(), index()).prop_map(|(k, i, j)| cmd(&["ARDELRANGE", k, &i, &j])),
        3 => (key(), proptest::collection::vec(val(), 1..4)).prop_map(|(k, vs)| {
            let mut c = vec!["ARINSERT".to_string(), k.to_string()];
            c.extend(vs);
            cmd(&c)
        }),
        2 => (key(), prop_oneof![Just("0".to_string()), index()]).prop_map(|(k, i)| cmd(&["ARSEEK", k, &i])),
        3 => (key(), 1u64..7, proptest::collection::vec(val(), 1..4)).prop_map(|(k, n, vs)| {
            let mut c = vec!["ARRING".to_string(), k.to_string(), n.to_string()];
            c.extend(vs);
            cmd(&c)
        }),
        1 => (key(), index()).prop_map(|(k, i)| cmd(&["ARGET", k, &i])),
        1 => key().prop_map(|k| cmd(&["ARNEXT", k])),
        1 => (key(), 1i64..6).prop_map(|(k, n)| cmd(&["ARLASTITEMS", k, &n.to_string()])),
        1 => (key(), index(), index()).prop_map(|(k, i, j)| cmd(&["ARSCAN", k, &i, &j])),
        1 => key().prop_map(|k| cmd(&["SET", k, "v"])),
        1 => key().prop_map(|k| cmd(&["DEL", k])),
        1 => key().prop_map(|k| cmd(&["PEXPIRE", k, "100000"])),
    ]
}

/// Every array's insert cursor, by key (the canonical dump does not include it).
fn cursors(e: &Engine) -> BTreeMap<Vec<u8>, u64> {
    let mut m = BTreeMap::new();
    e.ks.for_each(|k, v, _| {
        if let ValueRef::Array(a) = v {
            m.insert(k.to_vec(), a.cursor());
        }
    });
    m
}

/// Runs `cmds` on engine A, replays its mutations on engine B, compares cursors. (The data
/// and TTLs are compared by `check_replay`.)
fn check_cursors(cmds: &[Cmd]) {
    let now = 1_700_000_000_000;
    let mut a = common::engine();
    let mut b = common::engine();
    for c in cmds {
        let args: Vec<&[u8]> = c.iter().map(|x| x.as_slice()).collect();
        a.run(&args, now, &mut Vec::new());
        let batches: Vec<_> = a.commit(engine::Origin::Command).into_iter().collect();
        common::apply_batches(&mut b, &batches, now);
        assert_eq!(cursors(&a), cursors(&b), "after {}", common::pretty(c));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn array_commands_replay_exactly(cmds in proptest::collection::vec(command(), 1..50)) {
        check_replay(&cmds, 1_700_000_000_000, 1);
        check_cursors(&cmds);
    }
}

/// The dataset shape (sparse indexes k*1000) plus a ring rebuild on a key with a TTL.
#[test]
fn sparse_dataset_and_ring_rebuild_replay() {
    let mut cmds = Vec::new();
    for k in 0..1000u64 {
        cmds.push(cmd(&["ARSET".to_string(), "arr".to_string(), (k * 1000).to_string(), format!("v{k:06}")]));
    }
    cmds.push(cmd(&["ARDELRANGE", "arr", "5000", "500000"]));
    for i in 0..8 {
        cmds.push(cmd(&["ARRING".to_string(), "ring".to_string(), "5".to_string(), format!("v{i}")]));
    }
    cmds.push(cmd(&["PEXPIRE", "ring", "100000"]));
    cmds.push(cmd(&["ARRING", "ring", "8", "grown"]));
    cmds.push(cmd(&["ARRING", "ring", "2", "shrunk"]));
    let replies = check_replay(&cmds, 1_700_000_000_000, 0);
    assert_eq!(replies[1000], b":496\r\n");
    check_cursors(&cmds);
}
