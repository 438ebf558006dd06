//! Replay property for sorted sets: any sequence of sorted-set commands (with string keys and
//! expiries mixed in) emits canonical mutations that rebuild exactly the same store.

mod common;

use common::{check_replay, cmd, pretty, Cmd};
use proptest::prelude::*;

const KEYS: &[&str] = &["z1", "z2", "z3", "str"];

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(KEYS).prop_map(str::to_string)
}

fn member() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::sample::select(&["a", "b", "c", "d", "e", "f"][..]).prop_map(str::to_string),
        // Longer than zset-max-listpack-value: switches the set to its indexed form.
        1 => Just("L".repeat(70)),
    ]
}

fn score() -> impl Strategy<Value = String> {
    prop::sample::select(&["0", "-0", "1", "2", "-3", "1.5", "0.1", "inf", "-inf", "+inf", "1e20", "x"][..])
        .prop_map(str::to_string)
}

fn bound() -> impl Strategy<Value = String> {
    prop::sample::select(&["-inf", "+inf", "0", "(0", "1", "(1", "2", "1.5", "(inf"][..])
        .prop_map(str::to_string)
}

fn lex() -> impl Strategy<Value = String> {
    prop::sample::select(&["-", "+", "[a", "(b", "[c", "(e", "[f"][..]).prop_map(str::to_string)
}

fn index() -> impl Strategy<Value = String> {
    (-4i64..6).prop_map(|i| i.to_string())
}

fn zadd() -> impl Strategy<Value = Cmd> {
    (
        key(),
        prop::sample::subsequence(vec!["NX", "XX", "GT", "LT", "CH", "INCR"], 0..=2),
        prop::collection::vec((score(), member()), 1..4),
    )
        .prop_map(|(k, flags, pairs)| {
            let mut c = vec!["ZADD".to_string(), k];
            c.extend(flags.into_iter().map(str::to_string));
            for (s, m) in pairs {
                c.push(s);
                c.push(m);
            }
            cmd(&c)
        })
}

/// Adds 130 members at once: past zset-max-listpack-entries.
fn zadd_many() -> impl Strategy<Value = Cmd> {
    key().prop_map(|k| {
        let mut c = vec!["ZADD".to_string(), k];
        for i in 0..130 {
            c.push((i % 7).to_string());
            c.push(format!("n{i:03}"));
        }
        cmd(&c)
    })
}

fn setop() -> impl Strategy<Value = Cmd> {
    (
        prop::sample::select(&["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"][..]),
        key(),
        prop::collection::vec(key(), 1..3),
        prop::option::of(prop::sample::select(&["SUM", "MIN", "MAX"][..])),
        any::<bool>(),
    )
        .prop_map(|(op, dst, srcs, agg, weights)| {
            let mut c = vec![op.to_string(), dst, srcs.len().to_string()];
            c.extend(srcs.iter().cloned());
            if op != "ZDIFFSTORE" {
                if weights {
                    c.push("WEIGHTS".into());
                    c.extend((0..srcs.len()).map(|i| ["2", "-1", "0", "inf"][i % 4].to_string()));
                }
                if let Some(a) = agg {
                    c.push("AGGREGATE".into());
                    c.push(a.into());
                }
            }
            cmd(&c)
        })
}

fn command() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        6 => zadd(),
        1 => zadd_many(),
        2 => (key(), score(), member()).prop_map(|(k, s, m)| cmd(&["ZINCRBY".to_string(), k, s, m])),
        3 => (key(), prop::collection::vec(member(), 1..3)).prop_map(|(k, ms)| {
            let mut c = vec!["ZREM".to_string(), k];
            c.extend(ms);
            cmd(&c)
        }),
        2 => (prop::sample::select(&["ZPOPMIN", "ZPOPMAX"][..]), key(), prop::option::of(0u8..4)).prop_map(|(op, k, n)| {
            let mut c = vec![op.to_string(), k];
            c.extend(n.map(|n| n.to_string()));
            cmd(&c)
        }),
        1 => (key(), key(), prop::sample::select(&["MIN", "MAX"][..]), 1u8..4).prop_map(|(a, b, w, n)| cmd(&["ZMPOP".to_string(), "2".into(), a, b, w.into(), "COUNT".into(), n.to_string()])),
        1 => (prop::sample::select(&["BZPOPMIN", "BZPOPMAX"][..]), key(), key()).prop_map(|(op, a, b)| cmd(&[op.to_string(), a, b, "0.01".into()])),
        1 => (key(), prop::sample::select(&["MIN", "MAX"][..])).prop_map(|(k, w)| cmd(&["BZMPOP".to_string(), "0.01".into(), "1".into(), k, w.into(), "COUNT".into(), "2".into()])),
        1 => (key(), index(), index()).prop_map(|(k, a, b)| cmd(&["ZREMRANGEBYRANK".to_string(), k, a, b])),
        1 => (key(), bound(), bound()).prop_map(|(k, a, b)| cmd(&["ZREMRANGEBYSCORE".to_string(), k, a, b])),
        1 => (key(), lex(), lex()).prop_map(|(k, a, b)| cmd(&["ZREMRANGEBYLEX".to_string(), k, a, b])),
        1 => (key(), key(), bound(), bound(), any::<bool>()).prop_map(|(d, s, a, b, rev)| {
            let mut c = vec!["ZRANGESTORE".to_string(), d, s, a, b, "BYSCORE".into()];
            if rev {
                c.push("REV".into());
            }
            cmd(&c)
        }),
        1 => (key(), key(), index(), index()).prop_map(|(d, s, a, b)| cmd(&["ZRANGESTORE".to_string(), d, s, a, b])),
        2 => setop(),
        1 => (key(), index(), any::<bool>()).prop_map(|(k, a, w)| {
            let mut c = vec!["ZRANDMEMBER".to_string(), k, a];
            if w {
                c.push("WITHSCORES".into());
            }
            cmd(&c)
        }),
        1 => (key(), index(), index()).prop_map(|(k, a, b)| cmd(&["ZRANGE".to_string(), k, a, b, "WITHSCORES".into()])),
        // Reads: they emit nothing, but must not trip on any cursor or set shape.
        1 => (key(), prop::sample::select(&["0", "1", "2147483648", "4294967295", "4294967296", "99999999999"][..]), 1u8..12)
            .prop_map(|(k, cur, n)| cmd(&["ZSCAN".to_string(), k, cur.into(), "COUNT".into(), n.to_string()])),
        1 => (prop::sample::select(&["ZRANK", "ZREVRANK"][..]), key(), member()).prop_map(|(op, k, m)| cmd(&[op.to_string(), k, m])),
        1 => key().prop_map(|k| cmd(&["SET".to_string(), k, "v".into()])),
        1 => key().prop_map(|k| cmd(&["DEL".to_string(), k])),
        1 => (key(), 1u8..40).prop_map(|(k, ms)| cmd(&["PEXPIRE".to_string(), k, ms.to_string()])),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn zset_commands_replay_exactly(cmds in prop::collection::vec(command(), 1..60)) {
        check_replay(&cmds, 1_700_000_000_000, 7);
    }
}

/// A fixed sequence through every writer, including the blocking ones and the indexed form.
#[test]
fn every_writer_replays() {
    let long = "L".repeat(70);
    let cmds = vec![
        cmd(&["ZADD", "z1", "1", "a", "2", "b", "-0", "c", "inf", "d"]),
        cmd(&["ZADD", "z1", "INCR", "0.1", "a"]),
        cmd(&["ZINCRBY", "z1", "-inf", "d"]),
        cmd(&["ZADD", "z2", "-0", &long, "5", "x", "6", "y"]),
        cmd(&["ZADD", "z2", "0", &long]),
        cmd(&["ZUNIONSTORE", "z3", "2", "z1", "z2", "WEIGHTS", "2", "0.5"]),
        cmd(&["ZINTERSTORE", "z3", "2", "z1", "z3", "AGGREGATE", "MAX"]),
        cmd(&["ZDIFFSTORE", "z3", "2", "z2", "z1"]),
        cmd(&["ZRANGESTORE", "z1", "z2", "0", "1"]),
        cmd(&["ZPOPMIN", "z2"]),
        cmd(&["BZPOPMAX", "nokey", "z2", "0"]),
        cmd(&["BZMPOP", "0", "1", "z3", "MIN", "COUNT", "10"]),
        cmd(&["BZPOPMIN", "z3", "0.5"]),
        cmd(&["ZMPOP", "1", "z1", "MAX", "COUNT", "1"]),
        cmd(&["ZREMRANGEBYSCORE", "z1", "-inf", "+inf"]),
    ];
    let replies = check_replay(&cmds, 1_700_000_000_000, 1);
    assert_eq!(replies[1], b"$18\r\n1.1000000000000001\r\n".to_vec());
    assert_eq!(replies[2], b"-ERR resulting score is not a number (NaN)\r\n".to_vec());
    // The blocking pop on an emptied key answers as a timeout in the harness.
    assert_eq!(replies[12], b"*-1\r\n".to_vec());
}

/// Developer tool: replays a recorded redis-server session (`ZSET_DIFF_FILE`: lines of
/// hex-encoded args, a tab, the hex-encoded reply; `FLUSH` lines start a fresh database) and
/// reports every reply that differs. Random replies (ZRANDMEMBER) and ZSCAN of an indexed set
/// (whose cursor order is ours) are skipped. Run with
/// `ZSET_DIFF_FILE=... cargo test -p engine --test replay_zset -- --ignored`.
#[test]
#[ignore]
fn recorded_redis_session() {
    let Ok(path) = std::env::var("ZSET_DIFF_FILE") else { return };
    let text = std::fs::read_to_string(path).expect("session file");
    let hex = |s: &str| -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
    };
    let mut e = engine::Engine::default();
    let (mut compared, mut differ) = (0, 0);
    for line in text.lines() {
        if line == "FLUSH" {
            e = engine::Engine::default();
            continue;
        }
        let (a, r) = line.split_once('\t').expect("tab");
        let args: Vec<Vec<u8>> = a.split(' ').map(&hex).collect();
        let want = hex(r);
        let refs: Vec<&[u8]> = args.iter().map(|x| x.as_slice()).collect();
        let indexed = matches!(e.ks.get(&args.get(1).cloned().unwrap_or_default()), Some(store::ValueRef::ZSet(z)) if z.encoding() == "skiplist");
        let mut out = Vec::new();
        e.run(&refs, 1_000_000, &mut out);
        let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
        // Sets report Redis 7.0's `hashtable` for small sets: not this file's concern.
        let set_encoding = name == "OBJECT" && want.ends_with(b"hashtable\r\n");
        if (name == "ZRANDMEMBER" && !want.starts_with(b"-")) || (name == "ZSCAN" && indexed) || set_encoding
        {
            continue;
        }
        compared += 1;
        if out != want {
            differ += 1;
            if differ <= 40 {
                println!(
                    "DIFF {}\n  redis:  {:?}\n  goblin: {:?}",
                    pretty(&args),
                    String::from_utf8_lossy(&want),
                    String::from_utf8_lossy(&out)
                );
            }
        }
    }
    println!("compared {compared}, differ {differ}");
    assert_eq!(differ, 0);
}
