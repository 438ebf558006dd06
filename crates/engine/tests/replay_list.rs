//! Replay property for lists: any sequence of list commands (and a few of other types, for
//! the WRONGTYPE paths) leaves the same store on the origin and on an engine that replays only
//! the emitted canonical mutations.

mod common;

use common::{check_replay, cmd, Cmd};
use proptest::prelude::*;

fn key() -> impl Strategy<Value = &'static str> {
    prop_oneof![4 => Just("l1"), 4 => Just("l2"), 1 => Just("str")]
}

fn elem() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("1".to_string()),
        Just("01".to_string()),
        Just("-7".to_string()),
        Just("".to_string()),
        (0usize..3000).prop_map(|n| "x".repeat(n)),
    ]
}

fn idx() -> impl Strategy<Value = String> {
    prop_oneof![(-6i64..8).prop_map(|i| i.to_string()), Just("x".to_string())]
}

fn end() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("LEFT"), Just("right"), Just("up")]
}

fn command() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        6 => (prop_oneof![Just("LPUSH"), Just("RPUSH"), Just("LPUSHX"), Just("RPUSHX")], key(), proptest::collection::vec(elem(), 1..6))
            .prop_map(|(c, k, es)| { let mut v = vec![c.to_string(), k.to_string()]; v.extend(es); cmd(&v) }),
        2 => (prop_oneof![Just("LPOP"), Just("RPOP")], key(), proptest::option::of(-1i64..5))
            .prop_map(|(c, k, n)| match n { None => cmd(&[c, k]), Some(n) => cmd(&[c.to_string(), k.to_string(), n.to_string()]) }),
        1 => (key(), idx(), idx()).prop_map(|(k, a, b)| cmd(&["LRANGE", k, &a, &b])),
        1 => (key(), idx()).prop_map(|(k, a)| cmd(&["LINDEX", k, &a])),
        2 => (key(), idx(), elem()).prop_map(|(k, i, e)| cmd(&["LSET", k, &i, &e])),
        2 => (key(), prop_oneof![Just("BEFORE"), Just("after"), Just("middle")], elem(), elem()).prop_map(|(k, w, p, e)| cmd(&["LINSERT", k, w, &p, &e])),
        2 => (key(), -3i64..3, elem()).prop_map(|(k, n, e)| cmd(&["LREM", k, &n.to_string(), &e])),
        1 => (key(), idx(), idx()).prop_map(|(k, a, b)| cmd(&["LTRIM", k, &a, &b])),
        1 => (key(), elem(), -3i64..3, 0i64..3).prop_map(|(k, e, r, n)| cmd(&["LPOS", k, &e, "RANK", &r.to_string(), "COUNT", &n.to_string()])),
        2 => (key(), key(), end(), end()).prop_map(|(a, b, f, t)| cmd(&["LMOVE", a, b, f, t])),
        1 => (key(), key()).prop_map(|(a, b)| cmd(&["RPOPLPUSH", a, b])),
        1 => (key(), key(), end(), 0i64..4).prop_map(|(a, b, e, n)| cmd(&["LMPOP", "2", a, b, e, "COUNT", &n.to_string()])),
        2 => (prop_oneof![Just("BLPOP"), Just("BRPOP")], key(), key()).prop_map(|(c, a, b)| cmd(&[c, a, b, "0.5"])),
        1 => (key(), key(), end(), end()).prop_map(|(a, b, f, t)| cmd(&["BLMOVE", a, b, f, t, "0"])),
        1 => (key(), key()).prop_map(|(a, b)| cmd(&["BRPOPLPUSH", a, b, "1"])),
        1 => (key(), end()).prop_map(|(a, e)| cmd(&["BLMPOP", "0", "1", a, e, "COUNT", "2"])),
        1 => key().prop_map(|k| cmd(&["SET", k, "v"])),
        1 => key().prop_map(|k| cmd(&["DEL", k])),
        1 => key().prop_map(|k| cmd(&["PEXPIRE", k, "3"])),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn list_commands_replay_exactly(cmds in proptest::collection::vec(command(), 1..60)) {
        check_replay(&cmds, 1_700_000_000_000, 1);
    }
}

/// A long list spanning many chunks, edited in the middle, still replays exactly.
#[test]
fn big_list_replays() {
    let mut cmds = Vec::new();
    for i in 0..3000 {
        cmds.push(cmd(&["RPUSH", "l", &format!("e{i:06}")]));
    }
    cmds.push(cmd(&["LINSERT", "l", "BEFORE", "e001500", "mid"]));
    cmds.push(cmd(&["LSET", "l", "-1", "last"]));
    cmds.push(cmd(&["LREM", "l", "0", "e000007"]));
    cmds.push(cmd(&["LTRIM", "l", "3", "-4"]));
    cmds.push(cmd(&["LMPOP", "1", "l", "RIGHT", "COUNT", "10"]));
    let replies = check_replay(&cmds, 1_700_000_000_000, 0);
    assert_eq!(replies[3000], b":3001\r\n");
}
