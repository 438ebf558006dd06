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
        // LMOVEM/BLMOVEM with and without a how-many block (a bad one now and then).
        2 => (key(), key(), end(), end(), proptest::option::of((prop_oneof![Just("COUNT"), Just("exactly"), Just("MOST")], -1i64..6, prop_oneof![Just("OBO"), Just("bulk"), Just("ONE")])), any::<bool>())
            .prop_map(|(a, b, f, t, many, blocking)| {
                let mut v = vec![if blocking { "BLMOVEM" } else { "LMOVEM" }.to_string(), a.into(), b.into(), f.into(), t.into()];
                if blocking {
                    v.push("0.5".into());
                }
                if let Some((m, n, o)) = many {
                    v.extend([m.to_string(), n.to_string(), o.to_string()]);
                }
                cmd(&v)
            }),
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

/// Differential check against a real redis-server (Debian's 7.0, started by the test): random
/// list command sequences must get byte-identical replies from Redis and from the engine.
/// `GOBLIN_DIFF_SEED=N` replays another sequence than the default one.
#[test]
fn replies_match_redis() {
    use common::RedisServer;
    use rand::{Rng, SeedableRng};
    let mut redis = RedisServer::start8();
    let mut ask = |args: &[Vec<u8>]| redis.ask(args);
    ask(&[b"FLUSHALL".to_vec()]);
    let seed = std::env::var("GOBLIN_DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(42);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut e = engine::Engine::default();
    let mut longest = 0;
    let keys = ["dl1", "dl2", "dstr"];
    // Long lists span many chunks; 3000- and 9000-byte elements force splits and
    // single-element chunks.
    let big1 = "y".repeat(3000);
    let big2 = "z".repeat(9000);
    let x69 = "x".repeat(69);
    let elems: Vec<&str> = vec!["a", "b", "1", "01", "-7", "", &x69, "12345678901", &big1, &big2];
    let pick = |rng: &mut rand::rngs::SmallRng, xs: &[&str]| xs[rng.gen_range(0..xs.len())].to_string();
    let idx = |rng: &mut rand::rngs::SmallRng| {
        ["-3000", "-100", "-3", "-1", "0", "1", "2", "5", "100", "700", "2500", "x"][rng.gen_range(0..12)]
            .to_string()
    };
    let ends = ["LEFT", "right", "up"];
    for step in 0..20_000 {
        let k = pick(&mut rng, &keys);
        let k2 = pick(&mut rng, &keys);
        let v = pick(&mut rng, &elems);
        let c: Vec<String> = match rng.gen_range(0..27) {
            22..=26 => {
                let mut c = vec![if rng.gen_bool(0.5) { "LPUSH" } else { "RPUSH" }.to_string(), k];
                c.extend((0..rng.gen_range(1..200)).map(|_| pick(&mut rng, &elems[..8])));
                c
            }
            0 => vec!["LPUSH".into(), k, v, pick(&mut rng, &elems)],
            1 => vec!["RPUSH".into(), k, v],
            2 => vec!["LPUSHX".into(), k, v],
            3 => vec!["RPUSHX".into(), k, v.clone(), v],
            4 => vec!["LPOP".into(), k],
            5 => vec!["RPOP".into(), k, idx(&mut rng)],
            6 => vec!["LRANGE".into(), k, idx(&mut rng), idx(&mut rng)],
            7 => vec!["LINDEX".into(), k, idx(&mut rng)],
            8 => vec!["LSET".into(), k, idx(&mut rng), v],
            9 => vec![
                "LINSERT".into(),
                k,
                pick(&mut rng, &["BEFORE", "after", "x"]),
                v,
                pick(&mut rng, &elems),
            ],
            10 => vec!["LREM".into(), k, idx(&mut rng), v],
            11 => vec!["LTRIM".into(), k, idx(&mut rng), idx(&mut rng)],
            12 => vec![
                "LPOS".into(),
                k,
                v,
                "RANK".into(),
                idx(&mut rng),
                "COUNT".into(),
                idx(&mut rng),
                "MAXLEN".into(),
                idx(&mut rng),
            ],
            13 => vec!["LPOS".into(), k, v],
            14 => vec!["LMOVE".into(), k, k2, pick(&mut rng, &ends), pick(&mut rng, &ends)],
            15 => vec!["RPOPLPUSH".into(), k, k2],
            16 => vec![
                "LMPOP".into(),
                idx(&mut rng),
                k,
                k2,
                pick(&mut rng, &ends),
                "COUNT".into(),
                idx(&mut rng),
            ],
            17 => vec!["LLEN".into(), k],
            18 => vec!["SET".into(), "dstr".into(), v],
            19 => vec!["BLPOP".into(), k, k2, "0.01".into()],
            20 => vec!["BLMOVE".into(), k, k2, pick(&mut rng, &ends), pick(&mut rng, &ends), "0.01".into()],
            _ => vec!["BLMPOP".into(), "0.01".into(), "1".into(), k, pick(&mut rng, &ends)],
        };
        let args: Vec<Vec<u8>> = c.iter().map(|s| s.as_bytes().to_vec()).collect();
        let want = ask(&args);
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let mut got = Vec::new();
        if let engine::Outcome::Blocked(_) = e.run(&refs, 1_700_000_000_000, &mut got) {
            got.extend_from_slice(b"*-1\r\n");
        }
        e.commit(engine::Origin::Command);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "step {step}: {}",
            c.join(" ")
        );
        for k in ["dl1", "dl2"] {
            if let Some(store::ValueRef::List(l)) = e.ks.get(k.as_bytes()) {
                longest = longest.max(l.len());
            }
        }
    }
    assert!(longest > 2000, "the run should build lists spanning many chunks (longest {longest})");
}
