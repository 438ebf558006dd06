//! Helpers for the tests of Redis's replication protocol (tests/redis_replicas.rs: redis-server
//! replicas of goblin-core; tests/redis_primary.rs: goblin-core a replica of redis-server): a
//! comparison of two servers' whole contents, INFO fields, and a Sentinel.

use super::temp_path;
use redis::Value;
use std::time::{Duration, Instant};

pub fn q(c: &mut redis::Connection, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

pub fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> Option<String> {
    let text: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    text.lines().find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
}

/// Waits (up to 30 s) until INFO replication's `field` is `want`.
pub fn wait_info(c: &mut redis::Connection, field: &str, want: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = info_field(c, "replication", field);
        if got.as_deref() == Some(want) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {field} is {got:?}, never {want}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A reply as text, for comparing two servers' answers: the value, or the error's code and
/// text.
pub fn reply(c: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<Value>(c) {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

pub fn info_int(c: &mut redis::Connection, section: &str, field: &str) -> i64 {
    info_field(c, section, field).unwrap_or_else(|| panic!("no {field}")).parse().unwrap()
}

/// Everything in every database, as a sorted text: each key's type, value and whether it has
/// a deadline (the deadline itself moves with time).
pub fn contents(c: &mut redis::Connection) -> Vec<String> {
    let mut out = Vec::new();
    for db in 0..16 {
        let _: () = redis::cmd("SELECT").arg(db).query(c).unwrap();
        let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).unwrap();
        keys.sort();
        for k in keys {
            let key = String::from_utf8_lossy(&k).into_owned();
            let ty: String = redis::cmd("TYPE").arg(&k).query(c).unwrap();
            let value = match ty.as_str() {
                "string" => format!("{:?}", q(c, &["GET", &key])),
                "hash" => {
                    let mut m: Vec<(String, String)> = redis::cmd("HGETALL").arg(&k).query(c).unwrap();
                    m.sort();
                    format!("{m:?}")
                }
                "list" => format!("{:?}", q(c, &["LRANGE", &key, "0", "-1"])),
                "set" => {
                    let mut m: Vec<String> = redis::cmd("SMEMBERS").arg(&k).query(c).unwrap();
                    m.sort();
                    format!("{m:?}")
                }
                "zset" => format!("{:?}", q(c, &["ZRANGE", &key, "0", "-1", "WITHSCORES"])),
                "stream" => format!("{:?}", q(c, &["XRANGE", &key, "-", "+"])),
                // Its deadline passed between KEYS and TYPE (a key set with PX 50 while the
                // caller waits for the replica): gone, as the next KEYS will say.
                "none" => continue,
                other => panic!("type {other}"),
            };
            let pttl: i64 = redis::cmd("PTTL").arg(&k).query(c).unwrap();
            out.push(format!("db{db} {key} {ty} {value} ttl={}", pttl > 0));
        }
    }
    let _: () = redis::cmd("SELECT").arg(0).query(c).unwrap();
    out
}

/// Waits (up to 30 s) until the replica holds what the primary holds.
pub fn wait_same(primary: &mut redis::Connection, replica: &mut redis::Connection, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (p, r) = (contents(primary), contents(replica));
        if p == r {
            assert!(!p.is_empty(), "{what}: nothing to compare");
            return;
        }
        if Instant::now() > deadline {
            let only_p: Vec<_> = p.iter().filter(|l| !r.contains(l)).take(5).collect();
            let only_r: Vec<_> = r.iter().filter(|l| !p.contains(l)).take(5).collect();
            panic!("{what}: the replica differs; primary only {only_p:?}, replica only {only_r:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A redis-server in sentinel mode, killed on drop.
pub struct Sentinel {
    pub port: u16,
    child: std::process::Child,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start_sentinel(master_port: u16) -> Sentinel {
    let dir = temp_path("sentinel");
    std::fs::create_dir_all(&dir).unwrap();
    let port = super::free_port();
    let conf = dir.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor mymaster 127.0.0.1 {master_port} 1\n\
             sentinel down-after-milliseconds mymaster 2000\nsentinel failover-timeout mymaster 10000\n",
            dir.display()
        ),
    )
    .unwrap();
    let child = std::process::Command::new("redis-server")
        .arg(&conf)
        .arg("--sentinel")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("redis-server is required for this test (apt-get install redis-server)");
    let s = Sentinel { port, child };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the sentinel never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    s
}

/// `SENTINEL MASTER` or one `SENTINEL REPLICAS` entry as a field map.
pub fn sentinel_fields(v: &Value) -> std::collections::HashMap<String, String> {
    let Value::Array(items) = v else { panic!("{v:?}") };
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    };
    items.chunks(2).map(|p| (text(&p[0]), text(&p[1]))).collect()
}
