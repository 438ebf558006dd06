//! Replay property for hash commands: any sequence of hash writes (with reads, deletes,
//! expiries and keys of other types mixed in) emits canonical mutations that rebuild the exact
//! same keyspace on an empty replica.

mod common;

use common::{check_replay, Cmd};
use proptest::prelude::*;

fn key() -> impl Strategy<Value = String> {
    // "s" holds a string and "l" a list when the sequence creates them: WRONGTYPE paths.
    prop_oneof![4 => Just("h".to_string()), 3 => Just("g".to_string()), 1 => Just("s".to_string()), 1 => Just("l".to_string())]
}

fn field() -> impl Strategy<Value = String> {
    (0..6u8).prop_map(|i| format!("f{i}"))
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        (-20i64..20).prop_map(|i| i.to_string()),
        Just("1.5".to_string()),
        Just("abc".to_string()),
        Just("9223372036854775807".to_string()),
        (0usize..100).prop_map(|n| "x".repeat(n)), // long values force the indexed encoding
    ]
}

fn command() -> impl Strategy<Value = Cmd> {
    let kf = || (key(), field());
    prop_oneof![
        4 => (key(), proptest::collection::vec((field(), value()), 1..4)).prop_map(|(k, pairs)| {
            let mut c = vec!["HSET".to_string(), k];
            for (f, v) in pairs {
                c.push(f);
                c.push(v);
            }
            to_cmd(c)
        }),
        1 => (key(), field(), value()).prop_map(|(k, f, v)| to_cmd(vec!["HMSET".into(), k, f, v])),
        1 => (key(), field(), value()).prop_map(|(k, f, v)| to_cmd(vec!["HSETNX".into(), k, f, v])),
        2 => (key(), proptest::collection::vec(field(), 1..4)).prop_map(|(k, fs)| {
            let mut c = vec!["HDEL".to_string(), k];
            c.extend(fs);
            to_cmd(c)
        }),
        // HGETDEL, with a field named twice now and then, and a count that may not match.
        2 => (key(), proptest::collection::vec(field(), 1..4), 0usize..8).prop_map(|(k, fs, skew)| {
            let n = if skew == 0 { fs.len() + 1 } else { fs.len() };
            let mut c = vec!["HGETDEL".to_string(), k, "FIELDS".into(), n.to_string()];
            c.extend(fs);
            to_cmd(c)
        }),
        // Field expiration: relative and absolute times (the clock advances 1 ms a command
        // from 1,000,000, so deadlines pass and lazy expiry removes fields), conditions,
        // HPERSIST, HGETEX, HSETEX with its conditions and KEEPTTL, and the TTL reads.
        3 => (0usize..4, key(), 0i64..6, prop::sample::select(vec!["", "NX", "XX", "GT", "LT"]), proptest::collection::vec(field(), 1..3))
            .prop_map(|(form, k, t, cond, fs)| {
                let (name, time) = match form {
                    0 => ("HPEXPIRE", t.to_string()),
                    1 => ("HEXPIRE", (t / 3).to_string()),
                    2 => ("HPEXPIREAT", (999_990 + t * 5).to_string()),
                    _ => ("HEXPIREAT", (1_000 + t / 3).to_string()),
                };
                let mut c = vec![name.to_string(), k, time];
                if !cond.is_empty() {
                    c.push(cond.to_string());
                }
                c.extend(["FIELDS".to_string(), fs.len().to_string()]);
                c.extend(fs);
                to_cmd(c)
            }),
        1 => (key(), proptest::collection::vec(field(), 1..3)).prop_map(|(k, fs)| {
            let mut c = vec!["HPERSIST".to_string(), k, "FIELDS".into(), fs.len().to_string()];
            c.extend(fs);
            to_cmd(c)
        }),
        1 => (key(), prop::sample::select(vec!["HTTL", "HPTTL", "HEXPIRETIME", "HPEXPIRETIME"]), field())
            .prop_map(|(k, name, f)| to_cmd(vec![name.into(), k, "FIELDS".into(), "1".into(), f])),
        1 => (key(), prop::sample::select(vec!["PX 3", "EX 1", "PXAT 1000010", "PERSIST", ""]), proptest::collection::vec(field(), 1..3))
            .prop_map(|(k, opt, fs)| {
                let mut c = vec!["HGETEX".to_string(), k];
                c.extend(opt.split(' ').filter(|s| !s.is_empty()).map(String::from));
                c.extend(["FIELDS".to_string(), fs.len().to_string()]);
                c.extend(fs);
                to_cmd(c)
            }),
        2 => (key(), prop::sample::select(vec!["", "FNX", "FXX"]), prop::sample::select(vec!["", "PX 4", "EX 1", "PXAT 999999", "KEEPTTL"]), proptest::collection::vec((field(), value()), 1..3))
            .prop_map(|(k, cond, time, pairs)| {
                let mut c = vec!["HSETEX".to_string(), k];
                c.extend(cond.split(' ').chain(time.split(' ')).filter(|s| !s.is_empty()).map(String::from));
                c.extend(["FIELDS".to_string(), pairs.len().to_string()]);
                for (f, v) in pairs {
                    c.push(f);
                    c.push(v);
                }
                to_cmd(c)
            }),
        2 => (kf(), -5i64..5).prop_map(|((k, f), n)| to_cmd(vec!["HINCRBY".into(), k, f, n.to_string()])),
        1 => (kf(), prop_oneof![Just("0.1"), Just("-2.5"), Just("1e3"), Just("x")])
            .prop_map(|((k, f), n)| to_cmd(vec!["HINCRBYFLOAT".into(), k, f, n.to_string()])),
        1 => kf().prop_map(|(k, f)| to_cmd(vec!["HGET".into(), k, f])),
        1 => key().prop_map(|k| to_cmd(vec!["HGETALL".into(), k])),
        1 => (key(), -4i64..4).prop_map(|(k, n)| to_cmd(vec!["HRANDFIELD".into(), k, n.to_string(), "WITHVALUES".into()])),
        1 => key().prop_map(|k| to_cmd(vec!["HSCAN".into(), k, "0".into()])),
        1 => key().prop_map(|k| to_cmd(vec!["DEL".into(), k])),
        1 => (key(), 1i64..4).prop_map(|(k, ms)| to_cmd(vec!["PEXPIRE".into(), k, ms.to_string()])),
        1 => Just(to_cmd(vec!["SET".into(), "s".into(), "str".into()])),
        1 => Just(to_cmd(vec!["RPUSH".into(), "l".into(), "e".into()])),
    ]
}

fn to_cmd(parts: Vec<String>) -> Cmd {
    parts.into_iter().map(String::into_bytes).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn hash_commands_replay_exactly(cmds in proptest::collection::vec(command(), 1..60)) {
        check_replay(&cmds, 1_000_000, 1);
    }
}

/// A hash that grows past the packed encoding, shrinks by HDEL to nothing and is recreated.
#[test]
fn big_hash_replays_exactly() {
    let mut cmds = Vec::new();
    for i in 0..300 {
        cmds.push(to_cmd(vec!["HSET".into(), "big".into(), format!("f{i}"), format!("v{i}")]));
    }
    for i in 0..300 {
        cmds.push(to_cmd(vec!["HINCRBY".into(), "big".into(), format!("n{}", i % 7), i.to_string()]));
    }
    for i in 0..300 {
        cmds.push(to_cmd(vec!["HDEL".into(), "big".into(), format!("f{i}")]));
    }
    for i in 0..7 {
        cmds.push(to_cmd(vec!["HDEL".into(), "big".into(), format!("n{i}")]));
    }
    cmds.push(to_cmd(vec!["HSET".into(), "big".into(), "again".into(), "1".into()]));
    let replies = check_replay(&cmds, 0, 0);
    // The last HINCRBY (i = 299) hit n5, which summed every i = 5 (mod 7).
    let n5: i64 = (0..300).filter(|i| i % 7 == 5).sum();
    assert_eq!(replies[599], format!(":{n5}\r\n").into_bytes());
}
