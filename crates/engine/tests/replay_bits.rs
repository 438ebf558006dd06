//! The bit commands (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO):
//! - the replay property: any sequence of them, mixed with the string and generic writes they
//!   interact with (SET, APPEND, SETRANGE, DEL, PEXPIRE, and a list for WRONGTYPE), leaves
//!   engine A exactly as replaying A's canonical mutations leaves an empty engine B;
//! - a differential check against a real redis-server 7.0, in RESP2 and RESP3: random
//!   sequences with valid and invalid arguments must get byte-identical replies.

mod common;

use common::{check_replay, cmd, Cmd, RedisServer};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use resp::Proto;

const START: i64 = 1_700_000_000_000;
const STEP_MS: i64 = 100;

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "c"]).prop_map(str::to_string)
}

fn value() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["", "0", "1", "-5", "255", "abc", "\u{ff}\u{0}x", "12345678901"])
        .prop_map(str::to_string)
}

/// A bit offset (small, so strings collide; sometimes invalid).
fn offset() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => (0u32..80).prop_map(|o| o.to_string()),
        1 => prop::sample::select(vec!["-1", "x", "4294967296"]).prop_map(str::to_string),
    ]
}

/// An index for BITCOUNT/BITPOS ranges.
fn index() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (-20i64..20).prop_map(|i| i.to_string()),
        1 => prop::sample::select(vec!["x", "9223372036854775807", "-9223372036854775808"]).prop_map(str::to_string),
    ]
}

fn unit() -> impl Strategy<Value = Vec<String>> {
    prop::sample::select(vec![vec![], vec!["BYTE".to_string()], vec!["bit".to_string()]])
}

/// One BITFIELD operation (the first part of each is the subcommand).
fn field_op(read_only: bool) -> impl Strategy<Value = Vec<String>> {
    let ty = prop::sample::select(vec!["u1", "u8", "i8", "u5", "i16", "u63", "i64", "i3"])
        .prop_map(str::to_string);
    let off = prop_oneof![
        4 => (0u32..48).prop_map(|o| o.to_string()),
        1 => (0u32..6).prop_map(|o| format!("#{o}")),
    ];
    let val = prop_oneof![
        4 => (-300i64..300).prop_map(|v| v.to_string()),
        1 => prop::sample::select(vec!["9223372036854775807", "-9223372036854775808", "x"]).prop_map(str::to_string),
    ];
    let get = (ty.clone(), off.clone()).prop_map(|(t, o)| vec!["GET".into(), t, o]);
    if read_only {
        return get.boxed();
    }
    prop_oneof![
        2 => get,
        2 => (ty.clone(), off.clone(), val.clone()).prop_map(|(t, o, v)| vec!["SET".into(), t, o, v]),
        2 => (ty, off, val).prop_map(|(t, o, v)| vec!["INCRBY".into(), t, o, v]),
        1 => prop::sample::select(vec!["WRAP", "sat", "FAIL"]).prop_map(|w| vec!["OVERFLOW".into(), w.into()]),
    ]
    .boxed()
}

fn command() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        4 => (key(), offset(), prop::sample::select(vec!["0", "1", "1", "2"]))
            .prop_map(|(k, o, v)| cmd(&["SETBIT", &k, &o, v])),
        2 => (key(), offset()).prop_map(|(k, o)| cmd(&["GETBIT", &k, &o])),
        2 => (key(), prop::option::of((index(), index(), unit()))).prop_map(|(k, r)| {
            let mut a = vec!["BITCOUNT".to_string(), k];
            if let Some((s, e, u)) = r {
                a.extend([s, e]);
                a.extend(u);
            }
            cmd(&a)
        }),
        2 => (key(), prop::sample::select(vec!["0", "1"]), prop::collection::vec(index(), 0..3), unit()).prop_map(
            |(k, b, r, u)| {
                let mut a = vec!["BITPOS".to_string(), k, b.to_string()];
                let two = r.len() == 2;
                a.extend(r);
                if two {
                    a.extend(u);
                }
                cmd(&a)
            }
        ),
        3 => (prop::sample::select(vec!["AND", "or", "XOR", "NOT", "DIFF", "diff1", "ANDOR", "ONE"]), key(), prop::collection::vec(key(), 1..4))
            .prop_map(|(op, d, ks)| {
                let mut a = vec!["BITOP".to_string(), op.to_string(), d];
                a.extend(ks);
                cmd(&a)
            }),
        4 => (key(), prop::collection::vec(field_op(false), 0..4)).prop_map(|(k, ops)| {
            let mut a = vec!["BITFIELD".to_string(), k];
            ops.into_iter().for_each(|o| a.extend(o));
            cmd(&a)
        }),
        1 => (key(), prop::collection::vec(field_op(true), 0..3)).prop_map(|(k, ops)| {
            let mut a = vec!["BITFIELD_RO".to_string(), k];
            ops.into_iter().for_each(|o| a.extend(o));
            cmd(&a)
        }),
        2 => (key(), value()).prop_map(|(k, v)| cmd(&["SET", &k, &v])),
        1 => (key(), value()).prop_map(|(k, v)| cmd(&["APPEND", &k, &v])),
        1 => (key(), 0i64..12, value()).prop_map(|(k, o, v)| cmd(&["SETRANGE", &k, &o.to_string(), &v])),
        1 => key().prop_map(|k| cmd(&["DEL", &k])),
        1 => key().prop_map(|k| cmd(&["INCR", &k])),
        1 => key().prop_map(|k| cmd(&["RPUSH", &k, "x"])),
        1 => (key(), 1i64..1000).prop_map(|(k, ms)| cmd(&["PEXPIRE", &k, &ms.to_string()])),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn bit_commands_replay(cmds in prop::collection::vec(command(), 1..60)) {
        check_replay(&cmds, START, STEP_MS);
    }
}

/// Fixed scenarios: TTLs kept by SETBIT/BITFIELD and dropped by BITOP, int-encoded strings,
/// BITOP deleting its destination, a FAIL-only BITFIELD that still creates the key.
#[test]
fn fixed_scenarios_replay() {
    let r: Vec<String> = check_replay(
        &[
            cmd(&["SET", "n", "12"]),
            cmd(&["PEXPIRE", "n", "100000"]),
            cmd(&["SETBIT", "n", "7", "0"]),
            cmd(&["GETBIT", "n", "7"]),
            cmd(&["BITFIELD", "n", "INCRBY", "u8", "8", "1"]),
            cmd(&["PTTL", "n"]),
            cmd(&["BITOP", "NOT", "n", "n"]),
            cmd(&["PTTL", "n"]),
            cmd(&["BITOP", "AND", "n", "missing"]),
            cmd(&["EXISTS", "n"]),
            cmd(&["BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u2", "100", "9"]),
            cmd(&["STRLEN", "f"]),
        ],
        START,
        STEP_MS,
    )
    .iter()
    .map(|b| String::from_utf8_lossy(b).into_owned())
    .collect();
    // "12" is 0x31 0x32: bit 7 of '1' is set.
    assert_eq!(r[2], ":1\r\n");
    assert_eq!(r[3], ":0\r\n");
    assert_eq!(r[4], "*1\r\n:51\r\n");
    assert!(r[5].starts_with(":9"), "SETBIT/BITFIELD keep the TTL: {}", r[5]);
    assert_eq!(r[6], ":2\r\n");
    assert_eq!(r[7], ":-1\r\n", "BITOP drops the destination's TTL");
    assert_eq!(r[8], ":0\r\n");
    assert_eq!(r[9], ":0\r\n", "an empty BITOP result deletes the destination");
    assert_eq!(r[10], "*1\r\n$-1\r\n");
    assert_eq!(r[11], ":13\r\n", "FAIL still grew the string to the highest bit written");
}

// ---------------------------------------------------------------------------------------------
// Differential against redis-server.

struct Gen {
    rng: rand::rngs::SmallRng,
}

impl Gen {
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.rng.gen_range(0..xs.len())]
    }

    fn key(&mut self) -> String {
        self.pick(&["k1", "k2", "k3", "int", "list", "nokey"]).to_string()
    }

    /// A bit offset for commands that may write: bounded so no string passes a few KiB, plus
    /// invalid forms. `read` adds huge valid offsets (reads allocate nothing).
    fn offset(&mut self, read: bool) -> String {
        match self.rng.gen_range(0..12) {
            0 => self
                .pick(&["-1", "x", "", "4294967296", "9223372036854775807", "1.0", " 1", "+1", "-0", "01"])
                .to_string(),
            1 if read => self.pick(&["4294967295", "4294967288", "100000000"]).to_string(),
            2 => self.rng.gen_range(0..20_000).to_string(),
            _ => self.rng.gen_range(0..100).to_string(),
        }
    }

    fn index(&mut self) -> String {
        match self.rng.gen_range(0..10) {
            0 => self.pick(&["x", "9223372036854775807", "-9223372036854775808", "1.5", ""]).to_string(),
            1 => self.rng.gen_range(-200i64..200).to_string(),
            _ => self.rng.gen_range(-30i64..30).to_string(),
        }
    }

    fn unit(&mut self) -> Vec<String> {
        match self.rng.gen_range(0..8) {
            0 => vec![self.pick(&["bits", "BYTES", "x"]).to_string()],
            1..=3 => vec![self.pick(&["BIT", "bit", "BiT"]).to_string()],
            4 | 5 => vec![self.pick(&["BYTE", "byte"]).to_string()],
            _ => vec![],
        }
    }

    fn field_type(&mut self) -> String {
        match self.rng.gen_range(0..10) {
            0 => self
                .pick(&["u64", "i65", "u0", "i0", "I8", "U8", "x8", "u", "i", "", "u-1", "u08", "i 8"])
                .to_string(),
            1 => self.pick(&["i64", "u63", "i63", "u1", "i1"]).to_string(),
            _ => format!("{}{}", self.pick(&["i", "u"]), self.rng.gen_range(1..33)),
        }
    }

    fn field_offset(&mut self, write: bool) -> String {
        match self.rng.gen_range(0..14) {
            0 => self
                .pick(&["-1", "x", "#", "#x", "#-1", "4294967296", "#4294967296", "#9223372036854775807"])
                .to_string(),
            // 2^61: times 8 wraps to 0 in Redis's signed multiply.
            1 => "#2305843009213693952".to_string(),
            2 if !write => self.pick(&["4294967295", "4294967290", "#67108863"]).to_string(),
            3..=5 => format!("#{}", self.rng.gen_range(0..8)),
            _ => self.rng.gen_range(0..120).to_string(),
        }
    }

    fn field_value(&mut self) -> String {
        match self.rng.gen_range(0..10) {
            0 => self.pick(&["x", "1.5", "", "9223372036854775808"]).to_string(),
            1 => self
                .pick(&[
                    "9223372036854775807",
                    "-9223372036854775808",
                    "4611686018427387904",
                    "-1",
                    "18446744073709551615",
                ])
                .to_string(),
            2 => self.rng.gen_range(-100_000i64..100_000).to_string(),
            _ => self.rng.gen_range(-300i64..300).to_string(),
        }
    }

    fn bitfield(&mut self, ro: bool) -> Vec<String> {
        let mut a = vec![if ro { "BITFIELD_RO" } else { "BITFIELD" }.to_string(), self.key()];
        for _ in 0..self.rng.gen_range(0..5) {
            match self.rng.gen_range(0..20) {
                0 => a.push(self.pick(&["GET", "SET", "INCRBY", "OVERFLOW", "NOPE"]).to_string()),
                1..=3 => {
                    a.push("OVERFLOW".into());
                    a.push(self.pick(&["WRAP", "sat", "FAIL", "fail", "nope"]).to_string());
                }
                4..=9 if !ro || self.rng.gen_bool(0.1) => {
                    a.push(self.pick(&["SET", "incrby", "INCRBY", "set"]).to_string());
                    a.push(self.field_type());
                    a.push(self.field_offset(true));
                    a.push(self.field_value());
                }
                _ => {
                    a.push(self.pick(&["GET", "get"]).to_string());
                    a.push(self.field_type());
                    // GET never grows the string, so it may read far offsets.
                    a.push(self.field_offset(false));
                }
            }
        }
        a
    }

    fn command(&mut self) -> Vec<String> {
        let k = self.key();
        match self.rng.gen_range(0..30) {
            0..=4 => {
                let v = self.pick(&["0", "1", "1", "0", "2", "-1", "x", "01", ""]).to_string();
                vec!["SETBIT".into(), k, self.offset(false), v]
            }
            5..=6 => vec!["GETBIT".into(), k, self.offset(true)],
            7..=9 => {
                let mut a = vec!["BITCOUNT".into(), k];
                let n = self.pick(&["0", "1", "2", "2", "2", "3", "4"]).parse::<usize>().unwrap();
                for i in 0..n {
                    if i < 2 {
                        a.push(self.index());
                    } else {
                        a.extend(self.unit());
                    }
                }
                a
            }
            10..=13 => {
                let bit = self.pick(&["0", "1", "0", "1", "2", "x", "-1"]).to_string();
                let mut a = vec!["BITPOS".into(), k, bit];
                let n = self.pick(&["0", "1", "2", "3", "3", "4"]).parse::<usize>().unwrap();
                for i in 0..n {
                    if i < 2 {
                        a.push(self.index());
                    } else {
                        a.extend(self.unit());
                    }
                }
                a
            }
            14..=16 => {
                let op = self
                    .pick(&["AND", "or", "XOR", "not", "NOT", "nand", "an", "DIFF", "diff1", "ANDOR", "one"])
                    .to_string();
                let mut a = vec!["BITOP".into(), op, k];
                for _ in 0..self.rng.gen_range(1..4) {
                    a.push(self.key());
                }
                a
            }
            17..=21 => self.bitfield(false),
            22 => self.bitfield(true),
            23 => {
                let v = self.pick(&[
                    "",
                    "a",
                    "\u{ff}\u{ff}\u{ff}",
                    "123",
                    "-7",
                    "hello world",
                    "\u{0}\u{0}\u{1}",
                ]);
                vec!["SET".into(), k, v.to_string()]
            }
            24 => vec!["APPEND".into(), k, self.pick(&["\u{ff}", "x", "", "0"]).to_string()],
            25 => vec!["SETRANGE".into(), k, self.rng.gen_range(0..20).to_string(), "\u{80}z".into()],
            26 => vec!["GET".into(), k],
            27 => vec!["DEL".into(), k],
            28 => vec!["INCRBY".into(), "int".into(), self.rng.gen_range(-1000..1000).to_string()],
            _ => vec!["RPUSH".into(), "list".into(), "x".into()],
        }
    }
}

/// Runs `steps` random bit commands on an engine and on redis-server 8.2 (whose argument
/// checks BITCOUNT and BITPOS follow), in `proto`, comparing each reply byte for byte; ends by
/// comparing every key's value.
fn differential(proto: Proto, seed: u64, steps: usize) {
    let mut redis = RedisServer::start8();
    if proto == Proto::Resp3 {
        let hello = redis.ask(&[b"HELLO".to_vec(), b"3".to_vec()]);
        assert_eq!(hello[0], b'%', "HELLO 3 answers a map");
    }
    redis.ask(&[b"FLUSHALL".to_vec()]);
    let mut g = Gen { rng: rand::rngs::SmallRng::seed_from_u64(seed) };
    let mut e = engine::Engine::default();
    for step in 0..steps {
        let c = g.command();
        let args: Vec<Vec<u8>> = c.iter().map(|s| s.as_bytes().to_vec()).collect();
        let want = redis.ask(&args);
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let mut got = Vec::new();
        e.run_proto(&refs, START, &mut got, proto);
        e.commit(engine::Origin::Command);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "seed {seed} step {step}: {c:?}"
        );
    }
    for k in ["k1", "k2", "k3", "int", "nokey"] {
        let args = vec![b"GET".to_vec(), k.as_bytes().to_vec()];
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let mut got = Vec::new();
        e.run_proto(&refs, START, &mut got, proto);
        assert_eq!(got, redis.ask(&args), "final value of {k}");
    }
}

/// `GOBLIN_DIFF_SEED=N` runs another sequence than the default one.
fn seed() -> u64 {
    std::env::var("GOBLIN_DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(7)
}

#[test]
fn replies_match_redis() {
    differential(Proto::Resp2, seed(), 20_000);
}

#[test]
fn replies_match_redis_resp3() {
    differential(Proto::Resp3, seed() + 1, 10_000);
}

/// BITFIELD's OVERFLOW FAIL answers a null inside the array: `$-1` in RESP2, `_` in RESP3, as
/// redis-server does (checked against it here).
#[test]
fn bitfield_fail_nulls_in_both_protocols() {
    let script: &[&[&str]] = &[
        &["BITFIELD", "bf", "OVERFLOW", "FAIL", "SET", "u2", "0", "7", "GET", "u2", "0"],
        &["BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "i8", "8", "200", "INCRBY", "i8", "8", "100"],
        &["BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "i8", "8", "100"],
    ];
    for (proto, null) in [(Proto::Resp2, "$-1\r\n"), (Proto::Resp3, "_\r\n")] {
        let mut redis = RedisServer::start();
        if proto == Proto::Resp3 {
            redis.ask(&[b"HELLO".to_vec(), b"3".to_vec()]);
        }
        let mut e = engine::Engine::default();
        let mut replies = Vec::new();
        for c in script {
            let args: Vec<Vec<u8>> = c.iter().map(|s| s.as_bytes().to_vec()).collect();
            let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
            let mut got = Vec::new();
            e.run_proto(&refs, START, &mut got, proto);
            assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&redis.ask(&args)), "{c:?}");
            replies.push(String::from_utf8(got).unwrap());
        }
        assert_eq!(replies[0], format!("*2\r\n{null}:0\r\n"));
        assert_eq!(replies[1], format!("*2\r\n{null}:100\r\n"));
        assert_eq!(replies[2], format!("*1\r\n{null}"));
    }
}
