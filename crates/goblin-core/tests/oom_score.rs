//! `oom-score-adj` and `oom-score-adj-values` through the real binary: the process's own
//! `/proc/PID/oom_score_adj` follows the settings and the server's role (primary, replica),
//! a snapshot child takes the third value, `no` puts back the score the server found, and the
//! settings' errors are redis-server 8.2's.

mod common;

use common::{RedisServer, Server};
use std::time::{Duration, Instant};

fn score(pid: u32) -> i32 {
    std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj")).unwrap().trim().parse().unwrap()
}

fn set(c: &mut redis::Connection, name: &str, value: &str) -> redis::RedisResult<()> {
    redis::cmd("CONFIG").arg("SET").arg(name).arg(value).query(c)
}

fn get(c: &mut redis::Connection, name: &str) -> String {
    let v: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(c).unwrap();
    v[1].clone()
}

/// The first child process of `parent` found within 30 s (the snapshot child).
fn child_of(parent: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
            // "pid (comm) state ppid ...": the fields after the command's closing parenthesis.
            let rest = &stat[stat.rfind(')').unwrap() + 2..];
            if rest.split(' ').nth(1).and_then(|p| p.parse::<u32>().ok()) == Some(parent) {
                return pid;
            }
        }
        assert!(Instant::now() < deadline, "no child of {parent} appeared");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn the_score_follows_the_settings_and_the_role() {
    let dir = common::temp_path("oom");
    std::fs::create_dir_all(&dir).unwrap();
    let snapshot = dir.join("dump.gcsn");
    let s = Server::start(&["--load", snapshot.to_str().unwrap(), "--enable-debug-command", "yes"]);
    let pid = s.pid();
    let mut c = s.conn();
    let base = score(pid);
    assert_eq!(get(&mut c, "oom-score-adj"), "no");
    assert_eq!(get(&mut c, "oom-score-adj-values"), "0 200 800");
    // Values alone change nothing while the setting is off.
    set(&mut c, "oom-score-adj-values", "10 20 30").unwrap();
    assert_eq!(score(pid), base);
    set(&mut c, "oom-score-adj", "yes").unwrap();
    assert_eq!(get(&mut c, "oom-score-adj"), "yes");
    assert_eq!(score(pid), base + 10);
    set(&mut c, "oom-score-adj-values", "15 20 30").unwrap();
    assert_eq!(score(pid), base + 15);
    // A replica (of a port nobody listens on) takes the second value, a primary the first.
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let _: () = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(nobody).query(&mut c).unwrap();
    assert_eq!(score(pid), base + 20);
    let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut c).unwrap();
    assert_eq!(score(pid), base + 15);
    // A snapshot child takes the third; one slowed down (Redis's hidden rdb-key-save-delay:
    // 0.1 s a key, 20 keys) so that it lives to be read.
    let _: () = redis::cmd("DEBUG").arg("POPULATE").arg(20).query(&mut c).unwrap();
    set(&mut c, "rdb-key-save-delay", "100000").unwrap();
    let _: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    let child = child_of(pid);
    let deadline = Instant::now() + Duration::from_secs(10);
    while score(child) != base + 30 {
        assert!(Instant::now() < deadline, "the child's score stayed {}", score(child));
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(score(pid), base + 15, "the server's own score is unchanged");
    set(&mut c, "rdb-key-save-delay", "0").unwrap();
    // The child (about 2 s) finishes before the folder goes.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
        if info.contains("rdb_bgsave_in_progress:0") {
            break;
        }
        assert!(Instant::now() < deadline, "the slowed save never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Absolute values are written as they are; `no` puts back the score found first.
    set(&mut c, "oom-score-adj", "absolute").unwrap();
    assert_eq!(get(&mut c, "oom-score-adj"), "absolute");
    assert_eq!(score(pid), 15);
    set(&mut c, "oom-score-adj", "no").unwrap();
    assert_eq!(score(pid), base);
}

#[test]
fn bad_values_are_refused_as_redis8_refuses_them() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let mut replies = Vec::new();
    for c in [&mut g.conn(), &mut r.conn()] {
        let mut got = Vec::new();
        for (name, value) in [
            ("oom-score-adj-values", "-2001 0 0"),
            ("oom-score-adj-values", "1 2"),
            ("oom-score-adj-values", "1 2 x"),
            ("oom-score-adj", "maybe"),
        ] {
            got.push(set(c, name, value).unwrap_err().to_string());
        }
        set(c, "oom-score-adj", "relative").unwrap();
        got.push(get(c, "oom-score-adj"));
        set(c, "oom-score-adj", "no").unwrap();
        // Redis's hidden rdb-key-save-delay: found by its name, not by a pattern.
        set(c, "rdb-key-save-delay", "-10").unwrap();
        got.push(get(c, "rdb-key-save-delay"));
        let by_pattern: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("rdb-key-*").query(c).unwrap();
        got.push(format!("{by_pattern:?}"));
        set(c, "rdb-key-save-delay", "0").unwrap();
        replies.push(got);
    }
    assert_eq!(replies[0], replies[1]);
    assert!(replies[0][0].contains("must be between -2000 and 2000"), "{:?}", replies[0]);
}
