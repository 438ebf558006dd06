//! Replay property for the function libraries: any sequence of FUNCTION LOAD [REPLACE],
//! DELETE and FLUSH (the engine holds library code as opaque text; see functions.rs), mixed
//! with string writes, leaves engine B, which applied A's canonical mutations by record, with
//! the same libraries and keys as A; errors (a library that exists, one that does not, bad
//! metadata) emit nothing.

mod common;

use common::{check_replay, cmd, Cmd};
use proptest::prelude::*;

const START: i64 = 1_700_000_000_000;

fn code() -> impl Strategy<Value = String> {
    (prop::sample::select(vec!["a", "b", "c", "bad-name"]), 0u8..3).prop_map(|(lib, v)| match v {
        0 => format!("#!lua name={lib}\nredis.register_function('f_{lib}', function() return {v} end)"),
        1 => format!("#!lua name={lib}\n-- version {v}\n"),
        _ => format!("#!lua name={lib}"),
    })
}

fn command() -> impl Strategy<Value = Cmd> {
    let lib = || prop::sample::select(vec!["a", "b", "c", "zz"]);
    prop_oneof![
        3 => code().prop_map(|c| cmd(&["FUNCTION", "LOAD", &c])),
        3 => code().prop_map(|c| cmd(&["FUNCTION", "LOAD", "REPLACE", &c])),
        1 => code().prop_map(|c| cmd(&["FUNCTION", "LOAD", "NOPE", &c])),
        2 => lib().prop_map(|l| cmd(&["FUNCTION", "DELETE", l])),
        1 => prop::sample::select(vec!["", "SYNC", "ASYNC", "x"])
            .prop_map(|m| if m.is_empty() { cmd(&["FUNCTION", "FLUSH"]) } else { cmd(&["FUNCTION", "FLUSH", m]) }),
        2 => lib().prop_map(|k| cmd(&["SET", k, "v"])),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn function_libraries_replay(cmds in prop::collection::vec(command(), 1..40)) {
        check_replay(&cmds, START, 100);
    }
}

#[test]
fn replies_and_mutations_are_redis_shaped() {
    let cmds = vec![
        cmd(&["FUNCTION", "LOAD", "#!lua name=a\nx"]),
        cmd(&["FUNCTION", "LOAD", "#!lua name=a\ny"]),
        cmd(&["FUNCTION", "LOAD", "REPLACE", "#!lua name=a\ny"]),
        cmd(&["FUNCTION", "LOAD", "#!js name=b\ny"]),
        cmd(&["FUNCTION", "DELETE", "b"]),
        cmd(&["FUNCTION", "FLUSH"]),
        cmd(&["FUNCTION", "FLUSH"]),
    ];
    let replies = check_replay(&cmds, START, 100);
    let text: Vec<String> = replies.iter().map(|r| String::from_utf8_lossy(r).into_owned()).collect();
    assert_eq!(
        text,
        vec![
            "$1\r\na\r\n",
            "-ERR Library 'a' already exists\r\n",
            "$1\r\na\r\n",
            "-ERR Engine 'js' not found\r\n",
            "-ERR Library not found\r\n",
            "+OK\r\n",
            "+OK\r\n",
        ]
    );
    // A record of an unknown FUNCTION form is refused by replay.
    let mut e = common::engine();
    let mut rec = Vec::new();
    resp::reply::bulk_array(&mut rec, &[&b"FUNCTION"[..], b"DUMP"]);
    assert!(matches!(e.apply_record(&rec, Some(1), 0), Err(engine::RecordError::NotAllowed(_))));
}

#[test]
fn another_producers_function_records_take_the_canonical_form() {
    let mut e = common::engine();
    let rec = |args: &[&[u8]]| {
        let mut out = Vec::new();
        resp::reply::bulk_array(&mut out, args);
        out
    };
    let code: &[u8] = b"#!lua name=lib\nredis.register_function('f', function() return 1 end)";
    assert_eq!(e.apply_record(&rec(&[b"function", b"load", code]), None, 0), Ok(engine::Applied::Applied));
    // LOAD without REPLACE of a library that exists is refused, as a client's would be.
    assert!(matches!(
        e.apply_record(&rec(&[b"FUNCTION", b"LOAD", code]), None, 0),
        Err(engine::RecordError::Rejected { .. })
    ));
    assert_eq!(
        e.apply_record(&rec(&[b"FUNCTION", b"FLUSH", b"ASYNC"]), None, 0),
        Ok(engine::Applied::Applied)
    );
    let b = e.commit(engine::Origin::External).unwrap();
    let muts: Vec<String> = b.iter().map(|m| format!("{m:?}")).collect();
    assert_eq!(
        muts,
        vec![
            format!("#1 FUNCTION LOAD REPLACE {}", String::from_utf8_lossy(code)),
            "#2 FUNCTION FLUSH".to_string()
        ]
    );
    assert!(e.functions.is_empty());
}
