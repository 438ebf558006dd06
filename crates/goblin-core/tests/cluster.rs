//! Cluster mode (`--cluster-enabled yes`), side by side with redis-server 7.0.15 in cluster
//! mode owning every slot: the same hash slots, the same refusals (CROSSSLOT, SELECT, MOVE,
//! SWAPDB, COPY .. DB, a transaction across slots), the same CLUSTER INFO fields; and the
//! topology a cluster client reads (CLUSTER SLOTS/SHARDS/NODES) names this node at the address
//! the client connected to. redis-py's RedisCluster and `redis-cli -c` against it:
//! tests/clients/test_redis_py_cluster.py.

mod common;

use common::redis_repl::{info_field, q, reply};
use common::{RedisServer, Server};
use redis::Value;
use std::time::{Duration, Instant};

fn redis_cluster() -> RedisServer {
    let r = RedisServer::start_with(&["--cluster-enabled", "yes"]);
    let mut c = r.conn();
    q(&mut c, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text: String = redis::cmd("CLUSTER").arg("INFO").query(&mut c).unwrap();
        if text.contains("cluster_state:ok") {
            return r;
        }
        assert!(Instant::now() < deadline, "redis-server's cluster never became ok: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn cluster_mode_answers_as_a_redis_cluster_of_one_node() {
    let r = redis_cluster();
    let g = Server::start(&["--save", "", "--cluster-enabled", "yes"]);
    let (mut rc, mut gc) = (r.conn(), g.conn());

    // The same slot for every key: plain, tagged, empty tags, binary.
    let mut keys: Vec<Vec<u8>> =
        vec![b"".to_vec(), b"{}".to_vec(), b"{}x".to_vec(), b"x{}".to_vec(), b"{{a}}".to_vec()];
    for i in 0..2000u32 {
        let k = match i % 4 {
            0 => format!("key:{i}").into_bytes(),
            1 => format!("{{user{}}}:{i}", i / 7).into_bytes(),
            2 => format!("a{{b{i}}}c{{d}}").into_bytes(),
            _ => i.to_le_bytes().iter().chain(b"\xff{\x00}").copied().collect(),
        };
        keys.push(k);
    }
    for k in &keys {
        let slot = |c: &mut redis::Connection| -> i64 {
            redis::cmd("CLUSTER").arg("KEYSLOT").arg(k).query(c).unwrap()
        };
        assert_eq!(slot(&mut gc), slot(&mut rc), "key {:?}", String::from_utf8_lossy(k));
    }

    // The same answers and refusals.
    let tagged = "{t}1";
    let tagged_slot = reply(&mut rc, &["CLUSTER", "KEYSLOT", tagged]);
    let slot_n = tagged_slot.trim_start_matches("int(").trim_end_matches(')').to_string();
    for args in [
        &["MSET", "a", "1", "b", "2"][..],
        &["MSET", "{t}1", "1", "{t}2", "2"],
        &["MGET", "{t}1", "{t}2"],
        &["SUNIONSTORE", "dest", "s1", "s2"],
        &["EVAL", "return 1", "2", "a", "b"],
        &["EVAL", "return redis.call('get', KEYS[1])", "2", "{t}1", "{t}2"],
        &["SELECT", "1"],
        &["SELECT", "0"],
        &["SELECT", "x"],
        &["MOVE", "{t}1", "1"],
        &["SWAPDB", "0", "1"],
        &["COPY", "{t}1", "{t}3", "DB", "1"],
        &["COPY", "a", "b", "DB", "1"],
        &["CLUSTER", "COUNTKEYSINSLOT", &slot_n],
        &["CLUSTER", "COUNTKEYSINSLOT", "16384"],
        &["CLUSTER", "COUNTKEYSINSLOT", "x"],
        &["CLUSTER", "GETKEYSINSLOT", "1", "-1"],
        &["CLUSTER", "GETKEYSINSLOT", "x", "1"],
        &["CLUSTER", "GETKEYSINSLOT", "1", "x"],
        &["CLUSTER", "NOSUCH"],
        &["CLUSTER", "INFO", "extra"],
        &["CLUSTER", "LINKS"],
        &["READONLY"],
        &["READWRITE"],
        &["ASKING"],
    ] {
        assert_eq!(reply(&mut gc, args), reply(&mut rc, args), "{args:?}");
    }
    let mut got: Vec<String> =
        redis::cmd("CLUSTER").arg("GETKEYSINSLOT").arg(&slot_n).arg(10).query(&mut gc).unwrap();
    got.sort();
    assert_eq!(got, ["{t}1", "{t}2"]);

    // A transaction across slots: queued, then discarded at EXEC with CROSSSLOT.
    for c in [&mut gc, &mut rc] {
        q(c, &["MULTI"]);
        assert_eq!(q(c, &["SET", "a", "1"]), Value::SimpleString("QUEUED".into()));
        assert_eq!(q(c, &["SET", "b", "1"]), Value::SimpleString("QUEUED".into()));
        let e = redis::cmd("EXEC").query::<Value>(c).unwrap_err();
        assert_eq!(e.code(), Some("CROSSSLOT"), "{e}");
        assert_eq!(q(c, &["EXISTS", "a"]), Value::Int(0));
        q(c, &["MULTI"]);
        q(c, &["SET", "{t}a", "1"]);
        q(c, &["INCR", "{t}b"]);
        assert_eq!(q(c, &["EXEC"]), Value::Array(vec![Value::Okay, Value::Int(1)]));
    }

    // Scripts: without a shebang (compatibility mode) they may reach keys of any slot; with
    // one, only their first slot's unless they declare `allow-cross-slot-keys`; one command's
    // keys in two slots never; `no-cluster` scripts do not run.
    for args in [
        &["EVAL", "redis.call('set', 'a', '1'); return redis.call('set', 'b', '2')", "0"][..],
        &["EVAL", "return redis.call('mset', 'a', '1', 'b', '2')", "0"],
        &["EVAL", "#!lua\nredis.call('set', 'a', '1'); return redis.call('set', 'b', '2')", "0"],
        &["EVAL", "#!lua\nreturn redis.call('get', 'a')", "1", "{t}1"],
        &["EVAL", "#!lua\nreturn redis.call('get', '{t}2')", "1", "{t}1"],
        &[
            "EVAL",
            "#!lua flags=allow-cross-slot-keys\nredis.call('get', 'a'); return redis.call('get', 'b')",
            "0",
        ],
        &["EVAL", "#!lua flags=no-cluster\nreturn 1", "0"],
        &["EVAL", "return redis.call('cluster', 'keyslot', 'x')", "0"],
    ] {
        assert_eq!(reply(&mut gc, args), reply(&mut rc, args), "{args:?}");
    }

    // CLUSTER INFO has Redis's fields; INFO and CONFIG say cluster mode is on.
    let fields = |c: &mut redis::Connection| -> Vec<String> {
        let text: String = redis::cmd("CLUSTER").arg("INFO").query(c).unwrap();
        text.lines().filter_map(|l| l.split_once(':').map(|(k, _)| k.to_string())).collect()
    };
    assert_eq!(fields(&mut gc), fields(&mut rc));
    let text: String = redis::cmd("CLUSTER").arg("INFO").query(&mut gc).unwrap();
    assert!(text.contains("cluster_state:ok") && text.contains("cluster_slots_assigned:16384"), "{text}");
    assert_eq!(info_field(&mut gc, "cluster", "cluster_enabled").as_deref(), Some("1"));
    assert_eq!(
        q(&mut gc, &["CONFIG", "GET", "cluster-enabled"]),
        Value::Array(vec![
            Value::BulkString(b"cluster-enabled".to_vec()),
            Value::BulkString(b"yes".to_vec())
        ])
    );

    // The topology: every slot on this node, at the address the client used.
    let id = q(&mut gc, &["CLUSTER", "MYID"]);
    let Value::BulkString(id) = id else { panic!("{id:?}") };
    assert_eq!(id.len(), 40);
    let port = Value::Int(g.port as i64);
    let ip = Value::BulkString(b"127.0.0.1".to_vec());
    let slots = q(&mut gc, &["CLUSTER", "SLOTS"]);
    let Value::Array(ranges) = &slots else { panic!("{slots:?}") };
    assert_eq!(ranges.len(), 1);
    let Value::Array(range) = &ranges[0] else { panic!("{slots:?}") };
    assert_eq!(&range[..2], &[Value::Int(0), Value::Int(16383)]);
    let Value::Array(node) = &range[2] else { panic!("{slots:?}") };
    assert_eq!(&node[..3], &[ip.clone(), port.clone(), Value::BulkString(id.clone())]);
    let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(&mut gc).unwrap();
    let id = String::from_utf8(id).unwrap();
    assert_eq!(
        nodes,
        format!(
            "{id} 127.0.0.1:{}@{} myself,master - 0 0 1 connected 0-16383\n",
            g.port,
            u16::try_from(g.port as u32 + 10000).unwrap_or(0)
        )
    );
    let shards = reply(&mut gc, &["CLUSTER", "SHARDS"]);
    assert!(shards.contains(&id) && shards.contains("0), int(16383)"), "{shards}");

    // Without cluster mode: Redis's refusal.
    let plain = Server::start(&["--save", ""]);
    let mut pc = plain.conn();
    let plain_redis = RedisServer::start();
    let mut prc = plain_redis.conn();
    for args in [&["CLUSTER", "INFO"][..], &["READONLY"], &["ASKING"], &["MSET", "a", "1", "b", "2"]] {
        assert_eq!(reply(&mut pc, args), reply(&mut prc, args), "{args:?}");
    }
}
