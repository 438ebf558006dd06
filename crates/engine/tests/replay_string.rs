//! Replay property for the string, counter and conditional-write commands: any sequence of them
//! (plus the generic DEL / expiry commands they interact with) leaves engine A in exactly the
//! state that replaying A's canonical mutations produces on an empty engine B, TTLs included.
//!
//! Three keys and a handful of values make commands collide; TTLs range from the past to a few
//! seconds ahead while the clock advances 100 ms per command, so keys expire mid-run, lazily
//! and through the active cycle.

mod common;

use common::{check_replay, cmd, Cmd};
use proptest::prelude::*;

const START: i64 = 1_700_000_000_000;
const STEP_MS: i64 = 100;

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "c"]).prop_map(str::to_string)
}

fn value() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "",
        "0",
        "1",
        "-5",
        "10",
        "abc",
        "1.5",
        "x y",
        "9223372036854775807",
        "3.0e2",
        "0.1",
    ])
    .prop_map(str::to_string)
}

/// An integer argument, valid or not.
fn int() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (-20i64..20).prop_map(|i| i.to_string()),
        1 => prop::sample::select(vec!["x", "9223372036854775807", "-9223372036854775808", "1.5"]).prop_map(str::to_string),
    ]
}

/// An increment for INCRBYFLOAT, valid or not.
fn float() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "0.1", "-0.1", "1", "2.5e1", "-3", "1e-20", "inf", "abc", "0x10", "1e308", "5.",
    ])
    .prop_map(str::to_string)
}

/// An expiry option with its argument (possibly invalid), as SET/GETEX/MSETEX take it.
fn expiry() -> impl Strategy<Value = Vec<String>> {
    let s = (START / 1000) as i32;
    prop_oneof![
        (1i64..4).prop_map(|v| vec!["EX".into(), v.to_string()]),
        (1i64..3000).prop_map(|v| vec!["PX".into(), v.to_string()]),
        (s - 3..s + 5).prop_map(|v| vec!["EXAT".into(), v.to_string()]),
        (START - 1000..START + 5000).prop_map(|v| vec!["PXAT".into(), v.to_string()]),
        Just(vec!["EX".into(), "0".into()]),
        Just(vec!["KEEPTTL".into()]),
    ]
}

fn set_cond() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![
        Just(vec![]),
        Just(vec!["NX".to_string()]),
        Just(vec!["XX".to_string()]),
        value().prop_map(|v| vec!["IFEQ".into(), v]),
        value().prop_map(|v| vec!["IFNE".into(), v]),
        // Digests of "1" and of "abc" (so some match), and a malformed one.
        prop::sample::select(vec!["IFDEQ", "IFDNE"]).prop_flat_map(|w| {
            prop::sample::select(vec!["65cd25028f98f158", "78af5f94892f3950", "123"])
                .prop_map(move |d| vec![w.to_string(), d.to_string()])
        }),
    ]
}

fn command() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        // SET with any combination of condition, GET and expiry.
        (key(), value(), set_cond(), any::<bool>(), prop::option::of(expiry())).prop_map(
            |(k, v, c, get, ex)| {
                let mut a = vec!["SET".to_string(), k, v];
                a.extend(c);
                if get {
                    a.push("GET".into());
                }
                a.extend(ex.unwrap_or_default());
                cmd(&a)
            }
        ),
        (key(), value()).prop_map(|(k, v)| cmd(&["SETNX", &k, &v])),
        (key(), 0i64..4, value()).prop_map(|(k, s, v)| cmd(&["SETEX", &k, &s.to_string(), &v])),
        (key(), 0i64..3000, value()).prop_map(|(k, ms, v)| cmd(&["PSETEX", &k, &ms.to_string(), &v])),
        (key(), key()).prop_map(|(a, b)| cmd(&["MGET", &a, &b])),
        prop::collection::vec((key(), value()), 1..4).prop_map(|kv| {
            let mut a = vec!["MSET".to_string()];
            kv.into_iter().for_each(|(k, v)| a.extend([k, v]));
            cmd(&a)
        }),
        prop::collection::vec((key(), value()), 1..3).prop_map(|kv| {
            let mut a = vec!["MSETNX".to_string()];
            kv.into_iter().for_each(|(k, v)| a.extend([k, v]));
            cmd(&a)
        }),
        (key(), value()).prop_map(|(k, v)| cmd(&["GETSET", &k, &v])),
        key().prop_map(|k| cmd(&["GETDEL", &k])),
        (key(), prop_oneof![Just(vec![]), Just(vec!["PERSIST".to_string()]), expiry()]).prop_map(|(k, o)| {
            let mut a = vec!["GETEX".to_string(), k];
            a.extend(o);
            cmd(&a)
        }),
        (key(), value()).prop_map(|(k, v)| cmd(&["APPEND", &k, &v])),
        key().prop_map(|k| cmd(&["STRLEN", &k])),
        (key(), int(), int()).prop_map(|(k, s, e)| cmd(&["GETRANGE", &k, &s, &e])),
        (key(), -1i64..12, value()).prop_map(|(k, o, v)| cmd(&["SETRANGE", &k, &o.to_string(), &v])),
        key().prop_map(|k| cmd(&["INCR", &k])),
        key().prop_map(|k| cmd(&["DECR", &k])),
        (key(), int()).prop_map(|(k, d)| cmd(&["INCRBY", &k, &d])),
        (key(), int()).prop_map(|(k, d)| cmd(&["DECRBY", &k, &d])),
        (key(), float()).prop_map(|(k, f)| cmd(&["INCRBYFLOAT", &k, &f])),
        // INCREX: an increment of either kind (or none), bounds, SATURATE, an expiry and ENX,
        // in a random order (the options may come in any order).
        (
            key(),
            prop_oneof![
                Just(vec![]),
                int().prop_map(|i| vec!["BYINT".to_string(), i]),
                float().prop_map(|f| vec!["BYFLOAT".to_string(), f]),
            ],
            prop::option::of(int()),
            prop::option::of(int()),
            any::<bool>(),
            prop_oneof![Just(vec![]), Just(vec!["PERSIST".to_string()]), expiry()],
            any::<bool>(),
            any::<u64>(),
        )
            .prop_map(|(k, by, lo, hi, sat, ex, enx, seed)| {
                let mut opts: Vec<Vec<String>> = vec![by];
                opts.extend(lo.map(|v| vec!["LBOUND".to_string(), v]));
                opts.extend(hi.map(|v| vec!["UBOUND".to_string(), v]));
                if sat {
                    opts.push(vec!["SATURATE".into()]);
                }
                opts.push(ex);
                if enx {
                    opts.push(vec!["ENX".into()]);
                }
                let turn = (seed % opts.len() as u64) as usize;
                opts.rotate_left(turn);
                let mut a = vec!["INCREX".to_string(), k];
                a.extend(opts.into_iter().flatten());
                cmd(&a)
            }),
        // Conditional-write commands.
        (key(), prop::option::of((prop::sample::select(vec!["IFEQ", "IFNE", "IFDEQ", "IFDNE"]), value())))
            .prop_map(|(k, c)| match c {
                None => cmd(&["DELEX", &k]),
                Some((w, v)) => cmd(&["DELEX", &k, w, &v]),
            }),
        key().prop_map(|k| cmd(&["DIGEST", &k])),
        (key(), value()).prop_map(|(k, v)| cmd(&["DELIFEQ", &k, &v])),
        (
            prop::collection::vec((key(), value()), 1..3),
            prop::sample::select(vec!["", "NX", "XX"]),
            prop::option::of(expiry())
        )
            .prop_map(|(kv, c, ex)| {
                let mut a = vec!["MSETEX".to_string(), kv.len().to_string()];
                kv.into_iter().for_each(|(k, v)| a.extend([k, v]));
                if !c.is_empty() {
                    a.push(c.into());
                }
                a.extend(ex.unwrap_or_default());
                cmd(&a)
            }),
        // Generic commands the string commands interact with (keyspace.rs).
        key().prop_map(|k| cmd(&["DEL", &k])),
        (key(), 1i64..3000).prop_map(|(k, ms)| cmd(&["PEXPIRE", &k, &ms.to_string()])),
        key().prop_map(|k| cmd(&["PERSIST", &k])),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn string_commands_replay(cmds in prop::collection::vec(command(), 1..60)) {
        check_replay(&cmds, START, STEP_MS);
    }
}

/// Replies as text, for the fixed scenarios below.
fn replies(cmds: &[Cmd]) -> Vec<String> {
    check_replay(cmds, START, STEP_MS).iter().map(|r| String::from_utf8_lossy(r).into_owned()).collect()
}

#[test]
fn counters_and_float_results_replay() {
    let r = replies(&[
        cmd(&["INCRBYFLOAT", "f", "0.1"]),
        cmd(&["INCRBYFLOAT", "f", "0.1"]),
        cmd(&["INCRBYFLOAT", "f", "0.1"]),
        cmd(&["SET", "n", "5", "PX", "10000"]),
        cmd(&["INCRBY", "n", "10"]),
        cmd(&["APPEND", "n", "0"]),
        cmd(&["SETRANGE", "n", "4", "!"]),
    ]);
    assert_eq!(r[2], "$3\r\n0.3\r\n");
    assert_eq!(r[4], ":15\r\n");
    assert_eq!(r[6], ":5\r\n");
}

#[test]
fn past_and_expiring_deadlines_replay() {
    // Deadlines in the past delete; short ones expire between commands (100 ms per step).
    let past = (START - 1).to_string();
    let soon = (START + 350).to_string();
    let r = replies(&[
        cmd(&["SET", "a", "1"]),
        cmd(&["SET", "a", "2", "PXAT", &past, "GET"]),
        cmd(&["SET", "b", "x", "PXAT", &soon]),
        cmd(&["GET", "b"]),
        cmd(&["GET", "b"]),
        cmd(&["SET", "c", "v"]),
        cmd(&["GETEX", "c", "PXAT", &past]),
        cmd(&["MSETEX", "1", "c", "w", "PX", "50"]),
        cmd(&["INCR", "c"]),
    ]);
    assert_eq!(r[1], "$1\r\n1\r\n");
    assert_eq!(r[3], "$1\r\nx\r\n");
    assert_eq!(r[4], "$-1\r\n");
    assert_eq!(r[6], "$1\r\nv\r\n");
    assert_eq!(r[8], ":1\r\n", "c expired before INCR");
}
