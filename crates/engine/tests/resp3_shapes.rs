//! The engine's replies in RESP3 (`Engine::run_proto`) next to their RESP2 forms, one command
//! per reply shape RESP3 changes. Every RESP3 reply here was checked against redis-server 7.0
//! (the end-to-end comparison is crates/goblin-core/tests/resp3.rs); the RESP2 column is what
//! these commands always answered.

use engine::Engine;
use resp::Proto;

fn run(e: &mut Engine, proto: Proto, cmd: &str) -> String {
    let args: Vec<&[u8]> = cmd.split(' ').map(str::as_bytes).collect();
    let mut out = Vec::new();
    e.run_proto(&args, 1_000, &mut out, proto);
    String::from_utf8(out).unwrap()
}

#[test]
fn resp3_shapes_and_their_resp2_fallbacks() {
    let mut e = Engine::default();
    for setup in ["HSET h f v", "SADD s m", "ZADD z 1.5 a 2 b", "RPUSH l x", "SET str 1"] {
        run(&mut e, Proto::Resp2, setup);
    }
    // (command, RESP2 reply, RESP3 reply); read-only, so both protocols see the same data.
    let cases = [
        ("GET nokey", "$-1\r\n", "_\r\n"),
        ("MGET str nokey", "*2\r\n$1\r\n1\r\n$-1\r\n", "*2\r\n$1\r\n1\r\n_\r\n"),
        ("HGETALL h", "*2\r\n$1\r\nf\r\n$1\r\nv\r\n", "%1\r\n$1\r\nf\r\n$1\r\nv\r\n"),
        ("HGETALL nokey", "*0\r\n", "%0\r\n"),
        ("HRANDFIELD h 1 WITHVALUES", "*2\r\n$1\r\nf\r\n$1\r\nv\r\n", "*1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"),
        ("SMEMBERS s", "*1\r\n$1\r\nm\r\n", "~1\r\n$1\r\nm\r\n"),
        ("SINTER s s", "*1\r\n$1\r\nm\r\n", "~1\r\n$1\r\nm\r\n"),
        ("SUNION s nokey", "*1\r\n$1\r\nm\r\n", "~1\r\n$1\r\nm\r\n"),
        ("SMISMEMBER s m x", "*2\r\n:1\r\n:0\r\n", "*2\r\n:1\r\n:0\r\n"),
        ("SRANDMEMBER nokey", "$-1\r\n", "_\r\n"),
        ("ZSCORE z a", "$3\r\n1.5\r\n", ",1.5\r\n"),
        ("ZSCORE z b", "$1\r\n2\r\n", ",2\r\n"),
        ("ZSCORE z nokey", "$-1\r\n", "_\r\n"),
        ("ZMSCORE z a x", "*2\r\n$3\r\n1.5\r\n$-1\r\n", "*2\r\n,1.5\r\n_\r\n"),
        (
            "ZRANGE z 0 -1 WITHSCORES",
            "*4\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n",
            "*2\r\n*2\r\n$1\r\na\r\n,1.5\r\n*2\r\n$1\r\nb\r\n,2\r\n",
        ),
        ("ZRANGE z 0 0", "*1\r\n$1\r\na\r\n", "*1\r\n$1\r\na\r\n"),
        (
            "ZUNION 1 z WITHSCORES",
            "*4\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n",
            "*2\r\n*2\r\n$1\r\na\r\n,1.5\r\n*2\r\n$1\r\nb\r\n,2\r\n",
        ),
        (
            "ZSCAN z 0",
            "*2\r\n$1\r\n0\r\n*4\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n",
            "*2\r\n$1\r\n0\r\n*4\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n",
        ),
        ("ZRANK z nokey", "$-1\r\n", "_\r\n"),
        ("LPOP nokey 2", "*-1\r\n", "_\r\n"),
        ("LINDEX l 5", "$-1\r\n", "_\r\n"),
        ("LMPOP 1 nokey LEFT", "*-1\r\n", "_\r\n"),
        ("INCRBYFLOAT nokey2 0", "$1\r\n0\r\n", "$1\r\n0\r\n"),
        (
            "HGETALL str",
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
    ];
    for (cmd, two, three) in cases {
        assert_eq!(run(&mut e, Proto::Resp2, cmd), two, "RESP2 {cmd}");
        assert_eq!(run(&mut e, Proto::Resp3, cmd), three, "RESP3 {cmd}");
    }
    // Writes whose replies change shape; each runs once per protocol on fresh keys.
    assert_eq!(run(&mut e, Proto::Resp3, "ZINCRBY z3 0.1 a"), ",0.1\r\n");
    assert_eq!(run(&mut e, Proto::Resp3, "ZADD z3 INCR 1 a"), ",1.1\r\n");
    assert_eq!(run(&mut e, Proto::Resp3, "ZADD z3 -inf b"), ":1\r\n");
    assert_eq!(run(&mut e, Proto::Resp3, "ZPOPMIN z3"), "*2\r\n$1\r\nb\r\n,-inf\r\n");
    assert_eq!(run(&mut e, Proto::Resp3, "ZPOPMIN z3 1"), "*1\r\n*2\r\n$1\r\na\r\n,1.1\r\n");
    assert_eq!(run(&mut e, Proto::Resp3, "SPOP s 5"), "~1\r\n$1\r\nm\r\n");
    assert_eq!(run(&mut e, Proto::Resp3, "SPOP s 5"), "~0\r\n");
    assert_eq!(run(&mut e, Proto::Resp3, "ZADD z4 2 m"), ":1\r\n");
    assert_eq!(run(&mut e, Proto::Resp3, "BZPOPMIN z4 0"), "*3\r\n$2\r\nz4\r\n$1\r\nm\r\n,2\r\n");
    assert_eq!(run(&mut e, Proto::Resp3, "ZADD z4 2 m"), ":1\r\n");
    assert_eq!(
        run(&mut e, Proto::Resp3, "ZMPOP 1 z4 MIN"),
        "*2\r\n$2\r\nz4\r\n*1\r\n*2\r\n$1\r\nm\r\n,2\r\n"
    );
    assert_eq!(run(&mut e, Proto::Resp2, "ZADD z4 2 m"), ":1\r\n");
    assert_eq!(
        run(&mut e, Proto::Resp2, "ZMPOP 1 z4 MIN"),
        "*2\r\n$2\r\nz4\r\n*1\r\n*2\r\n$1\r\nm\r\n$1\r\n2\r\n"
    );
}

/// The canonical mutations do not depend on the protocol of the client that caused them.
#[test]
fn mutations_are_resp2_whatever_the_reply_protocol() {
    let script = ["ZADD z 1.5 a", "ZINCRBY z 0.1 a", "HSET h f v", "SADD s m", "SPOP s 1", "GETDEL nokey"];
    let mut batches = Vec::new();
    for proto in [Proto::Resp2, Proto::Resp3] {
        let mut e = Engine::default();
        let mut bytes = Vec::new();
        for cmd in script {
            run(&mut e, proto, cmd);
            if let Some(b) = e.commit(engine::Origin::Command) {
                bytes.extend_from_slice(b.bytes());
                e.recycle(b);
            }
        }
        batches.push(bytes);
    }
    assert_eq!(batches[0], batches[1]);
    assert!(batches[0].starts_with(b"*4\r\n$4\r\nZADD\r\n"), "{:?}", String::from_utf8_lossy(&batches[0]));
}
