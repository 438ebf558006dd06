//! Native snapshots through the real binary: SAVE / BGSAVE / --load round trips, the fork-time
//! image under a concurrent write load, crashes during saves, failed saves, damaged files,
//! GOBLIN.DUMPWORLD with the `dumpworld` tool, and GOBLIN.LOAD.

mod common;

use common::{read_reply, send, temp_path, Server};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A fresh folder for one test's snapshots.
fn folder(tag: &str) -> PathBuf {
    let d = temp_path(tag);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn info(con: &mut redis::Connection, section: &str) -> HashMap<String, String> {
    let text: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

fn digest(con: &mut redis::Connection) -> String {
    redis::cmd("DEBUG").arg("DIGEST").query(con).unwrap()
}

/// (replid, offset) from INFO replication.
fn lineage(con: &mut redis::Connection) -> (String, u64) {
    let m = info(con, "replication");
    (m["master_replid"].clone(), m["master_repl_offset"].parse().unwrap())
}

/// A primary started from a snapshot without a journal goes on under a successor lineage:
/// the lineage it continues and the offset it began at (master_replid2 and one before
/// second_repl_offset), when it stands at that offset (nothing written since) with a new id.
fn continued(con: &mut redis::Connection) -> (String, u64) {
    let m = info(con, "replication");
    let at: u64 = m["second_repl_offset"].parse::<u64>().unwrap() - 1;
    assert_eq!(m["master_repl_offset"], at.to_string(), "{m:?}");
    assert_ne!(m["master_replid"], m["master_replid2"]);
    (m["master_replid2"].clone(), at)
}

/// Every type, TTLs, an array with a moved insert cursor, binary and empty strings.
fn fill(con: &mut redis::Connection, n: usize) {
    let mut p = redis::pipe();
    for i in 0..n {
        p.cmd("SET").arg(format!("s:{i}")).arg(format!("value-{i}")).ignore();
        p.cmd("SET").arg(format!("n:{i}")).arg(i).ignore();
        p.cmd("HSET").arg(format!("h:{}", i % 50)).arg(format!("f{i}")).arg(i).ignore();
        p.cmd("SADD").arg(format!("set:{}", i % 40)).arg(format!("m{i}")).ignore();
        p.cmd("ZADD").arg(format!("z:{}", i % 30)).arg(i as f64 / 3.0).arg(format!("m{i}")).ignore();
        p.cmd("RPUSH").arg(format!("l:{}", i % 20)).arg(format!("e{i}")).ignore();
        p.cmd("ARSET").arg(format!("a:{}", i % 10)).arg(i * 7).arg(format!("v{i}")).ignore();
    }
    p.cmd("SET").arg(b"bin\r\n\x00key".as_slice()).arg(b"\x00\xff\r\n".as_slice()).ignore();
    p.cmd("SET").arg("empty").arg("").ignore();
    p.cmd("SET").arg("ttl").arg("v").arg("PX").arg(3_600_000).ignore();
    p.cmd("PEXPIREAT").arg("h:1").arg(99_999_999_999_999i64).ignore();
    p.cmd("ARINSERT").arg("a:cursor").arg("x").ignore();
    p.cmd("ARSEEK").arg("a:cursor").arg(1000).ignore();
    let _: () = p.query(con).unwrap();
}

fn wait_bgsave(con: &mut redis::Connection) -> HashMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let m = info(con, "persistence");
        if m["rdb_bgsave_in_progress"] == "0" {
            return m;
        }
        assert!(Instant::now() < deadline, "BGSAVE did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn save_then_load_restores_data_and_lineage() {
    let dir = folder("roundtrip");
    let path = dir.join("dump.gcsn");
    let p = path.to_str().unwrap();
    let mut a = Server::start(&["--load", p]);
    assert!(a.log().contains("does not exist"), "a missing snapshot starts empty with a warning");
    let mut con = a.conn();
    fill(&mut con, 300);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let (want_digest, want_lineage) = (digest(&mut con), lineage(&mut con));
    let m = info(&mut con, "persistence");
    assert_eq!(m["rdb_changes_since_last_save"], "0");
    assert_eq!(m["rdb_last_bgsave_status"], "ok");
    // Kill it: the snapshot alone must bring everything back.
    a.signal(9);
    a.wait_exit(Duration::from_secs(10)).unwrap();
    let b = Server::start(&["--load", p]);
    let mut con = b.conn();
    assert_eq!(digest(&mut con), want_digest);
    assert_eq!(continued(&mut con), want_lineage, "the lineage goes on from the snapshot's offset");
    let keys: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(info(&mut con, "persistence")["rdb_last_load_keys_loaded"], keys.to_string());
    let ttl: i64 = redis::cmd("PTTL").arg("ttl").query(&mut con).unwrap();
    assert!(ttl > 3_000_000 && ttl <= 3_600_000, "deadlines are absolute: {ttl}");
}

/// FLUSHALL with save rules writes the emptied dataset at once, as redis-server writes its RDB
/// file: a crash right after it does not bring back what the last snapshot held. Without
/// rules it writes nothing, and the flushed keys come back from the snapshot.
#[test]
fn flushall_with_save_rules_saves_the_empty_dataset() {
    let dir = folder("flushall");
    for rules in ["3600 1", ""] {
        let path = dir.join(format!("dump-{}.gcsn", rules.is_empty()));
        let p = path.to_str().unwrap();
        let mut a = Server::start(&["--load", p, "--save", rules]);
        let mut con = a.conn();
        fill(&mut con, 300);
        let saved: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
        let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
        let _: () = redis::cmd("SET").arg("after").arg("save").query(&mut con).unwrap();
        let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
        let changes = &info(&mut con, "persistence")["rdb_changes_since_last_save"];
        assert_eq!(changes, if rules.is_empty() { "2" } else { "0" }, "rules {rules:?}");
        a.signal(9);
        a.wait_exit(Duration::from_secs(10)).unwrap();
        let b = Server::start(&["--load", p]);
        let keys: i64 = redis::cmd("DBSIZE").query(&mut b.conn()).unwrap();
        assert_eq!(keys, if rules.is_empty() { saved } else { 0 }, "rules {rules:?}");
    }
}

#[test]
fn shutdown_saves_when_rules_are_set_and_not_with_empty_rules() {
    let dir = folder("shutdown");
    let path = dir.join("dump.gcsn");
    let p = path.to_str().unwrap();
    let mut a = Server::start(&["--load", p]);
    let mut con = a.conn();
    fill(&mut con, 50);
    let want = digest(&mut con);
    assert!(a.stop().success());
    let mut b = Server::start(&["--load", p]);
    let mut con = b.conn();
    assert_eq!(digest(&mut con), want, "SIGTERM saved the final snapshot");
    // With --save "" a shutdown does not save: the last write is lost on restart.
    assert!(b.stop().success());
    let mut c = Server::start(&["--load", p, "--save", ""]);
    let mut con = c.conn();
    let _: () = redis::cmd("SET").arg("late").arg("1").query(&mut con).unwrap();
    assert!(c.stop().success());
    let d = Server::start(&["--load", p]);
    let mut con = d.conn();
    assert_eq!(digest(&mut con), want);
}

/// `shutdown-on-sigterm` / `shutdown-on-sigint` give a signal SHUTDOWN's flags: `nosave`
/// exits without the final save, `save` saves without rules, `default` saves as the rules
/// say; CONFIG GET shows them as Redis does.
#[test]
fn signals_shut_down_as_shutdown_on_sigterm_and_sigint_say() {
    let dir = folder("shutdown-on-signal");
    let path = dir.join("dump.gcsn");
    let p = path.to_str().unwrap();
    let mut a = Server::start(&["--load", p]);
    let mut con = a.conn();
    fill(&mut con, 20);
    let want = digest(&mut con);
    assert!(a.stop().success(), "default: SIGTERM saves (rules are set)");
    // nosave on SIGTERM: the late write is not saved.
    let mut b = Server::start(&["--load", p, "--shutdown-on-sigterm", "nosave", "now"]);
    let mut con = b.conn();
    let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("shutdown-on-sig*").query(&mut con).unwrap();
    assert_eq!(got, ["shutdown-on-sigterm", "nosave now", "shutdown-on-sigint", "default"]);
    let _: () = redis::cmd("SET").arg("late").arg("1").query(&mut con).unwrap();
    assert!(b.stop().success());
    // save on SIGINT (set at runtime), with no rules at all: saved.
    let mut c = Server::start(&["--load", p, "--save", ""]);
    let mut con = c.conn();
    assert_eq!(digest(&mut con), want, "nosave left the late write out");
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("shutdown-on-sigint").arg("save").query(&mut con).unwrap();
    let err =
        redis::cmd("CONFIG").arg("SET").arg("shutdown-on-sigint").arg("save nosave").query::<()>(&mut con);
    assert!(err.unwrap_err().to_string().contains("argument(s) must be one of the following"));
    let _: () = redis::cmd("SET").arg("later").arg("1").query(&mut con).unwrap();
    let want2 = digest(&mut con);
    c.signal(libc::SIGINT);
    assert!(c.wait_exit(Duration::from_secs(10)).unwrap().success());
    let d = Server::start(&["--load", p, "--save", ""]);
    assert_eq!(digest(&mut d.conn()), want2, "SIGINT with `save` saved without rules");
}

/// CONFIG SET save changes the rules of a running server: from none, a rule of one second and
/// one change saves by itself; back to none, a write stays unsaved.
#[test]
fn config_set_save_rules_act_at_once() {
    let dir = folder("config-save");
    let path = dir.join("dump.gcsn");
    let p = path.to_str().unwrap();
    let s = Server::start(&["--load", p, "--save", ""]);
    let mut con = s.conn();
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut con).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(info(&mut con, "persistence")["rdb_changes_since_last_save"], "1", "no rule, no save");
    let _: () = redis::cmd("CONFIG").arg("SET").arg("save").arg("1 1").query(&mut con).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while info(&mut con, "persistence")["rdb_changes_since_last_save"] != "0" {
        assert!(Instant::now() < deadline, "the new rule never saved");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(path.exists());
    let _: () = redis::cmd("CONFIG").arg("SET").arg("save").arg("").query(&mut con).unwrap();
    let _: () = redis::cmd("SET").arg("b").arg("1").query(&mut con).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(info(&mut con, "persistence")["rdb_changes_since_last_save"], "1", "the rules are gone");
}

#[test]
fn bgsave_writes_the_fork_time_image_under_a_write_load() {
    let dir = folder("bgsave");
    let path = dir.join("dump.gcsn");
    let p = path.to_str().unwrap().to_string();
    let s = Server::start(&["--load", &p, "--save", "", "--snapshot-block-delay-us", "20000"]);
    let mut con = s.conn();
    fill(&mut con, 20_000);
    let _: () = redis::cmd("SET").arg("counter").arg(0).query(&mut con).unwrap();
    let (_, base) = lineage(&mut con);
    // From here on every write is one INCR: one mutation, one offset. So a snapshot whose
    // header says offset o must hold counter = o - base.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let mut w = s.conn();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _: i64 = redis::cmd("INCR").arg("counter").query(&mut w).unwrap();
                n += 1;
            }
            n
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let started: String = redis::cmd("BGSAVE").query(&mut con).unwrap();
    assert_eq!(started, "Background saving started");
    // A second one while the first runs is refused, as Redis does.
    let again = redis::cmd("BGSAVE").query::<String>(&mut con).unwrap_err();
    assert!(again.to_string().contains("already in progress"), "{again}");
    let scheduled: String = redis::cmd("BGSAVE").arg("SCHEDULE").query(&mut con).unwrap();
    assert_eq!(scheduled, "Background saving scheduled");
    let m = wait_bgsave(&mut con);
    assert_eq!(m["rdb_last_bgsave_status"], "ok");
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let writes = writer.join().unwrap();
    assert!(writes > 0);
    let _ = wait_bgsave(&mut con);
    // Load the file elsewhere and check that its contents match its header's offset.
    let copy = dir.join("copy.gcsn");
    std::fs::copy(&path, &copy).unwrap();
    let t = Server::start(&["--load", copy.to_str().unwrap(), "--save", ""]);
    let mut tc = t.conn();
    let (_, offset) = lineage(&mut tc);
    let counter: u64 = redis::cmd("GET").arg("counter").query(&mut tc).unwrap();
    assert_eq!(counter, offset - base, "the image is exactly the state at its offset");
    assert!(m["rdb_last_cow_size"].parse::<u64>().is_ok());
}

/// The child's pid: the only child process of `pid`.
fn child_of(pid: u32) -> Option<i32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The names of the save temporary files in `dir`.
fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect()
}

/// Waits until a save's temporary file that is not in `before` exists in `dir`.
fn wait_for_temp_file(dir: &Path, before: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if temp_files(dir).iter().any(|n| !before.contains(n)) {
            return;
        }
        assert!(Instant::now() < deadline, "no save started writing in {}", dir.display());
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Starts a server on `path`'s snapshot and returns its digest (a check that the file loads).
fn digest_of_file(path: &Path) -> String {
    let copy = path.with_extension("check");
    std::fs::copy(path, &copy).unwrap();
    let s = Server::start(&["--load", copy.to_str().unwrap(), "--save", ""]);
    let d = digest(&mut s.conn());
    std::fs::remove_file(copy).ok();
    d
}

#[test]
fn a_crash_during_a_save_leaves_the_old_snapshot_whole() {
    let dir = folder("crash");
    let path = dir.join("dump.gcsn");
    let p = path.to_str().unwrap().to_string();
    let mut s = Server::start(&["--load", &p, "--save", "", "--snapshot-block-delay-us", "50000"]);
    let mut con = s.conn();
    fill(&mut con, 200);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let old = digest(&mut con);
    fill(&mut con, 20_000);
    // 1. The BGSAVE child dies mid-write: the parent reports the failure and keeps serving.
    let before = temp_files(&dir);
    let _: String = redis::cmd("BGSAVE").query(&mut con).unwrap();
    // Kill the child once its temporary file exists: in the middle of the write (each block
    // takes 50 ms here).
    wait_for_temp_file(&dir, &before);
    let child = child_of(s.pid()).expect("the BGSAVE child is running");
    // SAFETY: killing the server's own child.
    unsafe { libc::kill(child, libc::SIGKILL) };
    let m = wait_bgsave(&mut con);
    assert_eq!(m["rdb_last_bgsave_status"], "err");
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    assert_eq!(digest_of_file(&path), old, "the interrupted BGSAVE left the old snapshot");
    // 2. The server itself is SIGKILLed during a foreground SAVE.
    let port = s.port;
    let before = temp_files(&dir);
    let saver = std::thread::spawn(move || {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        send(&mut c, b"*1\r\n$4\r\nSAVE\r\n");
    });
    saver.join().unwrap();
    wait_for_temp_file(&dir, &before);
    s.signal(9);
    s.wait_exit(Duration::from_secs(10)).unwrap();
    assert_eq!(digest_of_file(&path), old, "the interrupted SAVE left the old snapshot");
    // A restart removes what the interrupted saves left behind.
    let _t = Server::start(&["--load", &p, "--save", ""]);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "dump.gcsn")
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn a_failed_save_answers_an_error_keeps_the_old_file_and_keeps_serving() {
    let dir = folder("full");
    let path = dir.join("dump.gcsn");
    let p = path.to_str().unwrap().to_string();
    let s = Server::start(&["--load", &p, "--save", "", "--loglevel", "info"]);
    let mut con = s.conn();
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut con).unwrap();
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let old = std::fs::read(&path).unwrap();
    fill(&mut con, 5_000);
    // A file-size limit on the server: writes past 64 KiB fail (EFBIG), as on a full disk.
    let lim = libc::rlimit { rlim_cur: 64 * 1024, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: prlimit on our own child with a valid struct.
    let rc = unsafe { libc::prlimit(s.pid() as i32, libc::RLIMIT_FSIZE, &lim, std::ptr::null_mut()) };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
    let err = redis::cmd("SAVE").query::<()>(&mut con).unwrap_err();
    assert!(err.to_string().contains("failed"), "{err}");
    assert_eq!(info(&mut con, "persistence")["rdb_last_bgsave_status"], "err");
    let _: String = redis::cmd("BGSAVE").query(&mut con).unwrap();
    assert_eq!(wait_bgsave(&mut con)["rdb_last_bgsave_status"], "err");
    assert_eq!(std::fs::read(&path).unwrap(), old, "the old snapshot is untouched");
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    // An unwritable folder (it is gone): the same.
    std::fs::remove_dir_all(&dir).unwrap();
    let lim = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: as above.
    unsafe { libc::prlimit(s.pid() as i32, libc::RLIMIT_FSIZE, &lim, std::ptr::null_mut()) };
    let err = redis::cmd("SAVE").query::<()>(&mut con).unwrap_err();
    assert!(err.to_string().contains("failed"), "{err}");
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert!(n > 5_000);
}

#[test]
fn a_damaged_snapshot_refuses_to_start_and_names_the_damage() {
    let dir = folder("damaged");
    let path = dir.join("dump.gcsn");
    let p = path.to_str().unwrap().to_string();
    {
        let s = Server::start(&["--load", &p, "--save", ""]);
        let mut con = s.conn();
        fill(&mut con, 2_000);
        let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    }
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_goblin-core"))
        .args(["--port", "0", "--load", &p])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&p) && err.contains("block") && err.contains("byte"), "{err}");
    assert!(!err.contains("listening on"), "{err}");
}

/// `stop-writes-on-bgsave-error` (default yes, as Redis): once a save of the `--load` snapshot
/// fails (here the path became a directory), writes and PING get Redis's MISCONF, reads still
/// run and the replies name the setting; a save that works lifts it; with the setting off,
/// writes go on after a failed save.
#[test]
fn a_failed_save_stops_writes_until_a_save_works() {
    let dir = folder("misconf");
    let path = dir.join("s.gcsn");
    let s = Server::start(&["--load", path.to_str().unwrap(), "--save", "3600 1"]);
    let mut con = s.conn();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    std::fs::create_dir(&path).unwrap();
    let e = redis::cmd("BGSAVE").query::<String>(&mut con).map(|_| wait_bgsave(&mut con));
    if let Ok(m) = &e {
        assert_eq!(m["rdb_last_bgsave_status"], "err", "{m:?}");
    }
    let refused = redis::cmd("SET").arg("k").arg("w").query::<()>(&mut con).unwrap_err();
    assert_eq!(refused.code(), Some("MISCONF"), "{refused}");
    assert!(refused.to_string().contains("stop-writes-on-bgsave-error"), "{refused}");
    let ping = redis::cmd("PING").query::<String>(&mut con).unwrap_err();
    assert_eq!(ping.code(), Some("MISCONF"), "{ping}");
    let v: String = redis::cmd("GET").arg("k").query(&mut con).unwrap();
    assert_eq!(v, "v", "reads still run");
    // The setting off: writes go on.
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("stop-writes-on-bgsave-error").arg("no").query(&mut con).unwrap();
    let _: () = redis::cmd("SET").arg("k").arg("w").query(&mut con).unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("stop-writes-on-bgsave-error")
        .arg("yes")
        .query(&mut con)
        .unwrap();
    assert!(redis::cmd("SET").arg("k").arg("x").query::<()>(&mut con).is_err());
    // The disk fixed, a save that works lifts the refusal.
    std::fs::remove_dir(&path).unwrap();
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let _: () = redis::cmd("SET").arg("k").arg("x").query(&mut con).unwrap();
    assert_eq!(info(&mut con, "persistence")["rdb_last_bgsave_status"], "ok");
}

/// Without `--load` (nor `--kafka`, nor a firehose upstream) the RDB file at `dbfilename` in the
/// working directory is the restart point, as redis-server's dump.rdb: the save at shutdown
/// (redis-server's default save rules) writes it, and the next start loads it whole: every
/// type, array keys included (in goblin-core's own type, which the log mentions), deadlines,
/// function libraries; INFO counts the keys loaded and those left out past their deadline.
/// With `--save ""` nothing is saved at shutdown; the save rules write the file when due.
#[test]
fn without_load_the_rdb_file_is_the_restart_point() {
    let dir = folder("rdb-restart");
    let mut s = Server::start_in(Some(&dir), &[]);
    let mut con = s.conn();
    fill(&mut con, 300);
    let _: () = redis::cmd("SET").arg("soon").arg("gone").arg("PX").arg(400).query(&mut con).unwrap();
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("#!lua name=lib\nredis.register_function('f', function() return 7 end)")
        .query(&mut con)
        .unwrap();
    let keys: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert!(s.stop().success());
    assert!(s.log().contains("holds array keys"), "{}", s.log());
    assert!(dir.join("dump.rdb").exists(), "the shutdown saved the file");
    std::thread::sleep(Duration::from_millis(500));

    let mut s = Server::start_in(Some(&dir), &["--save", ""]);
    assert!(s.log().contains("DB loaded from disk"), "{}", s.log());
    let mut con = s.conn();
    let m = info(&mut con, "persistence");
    assert_eq!(m["rdb_last_load_keys_loaded"], (keys - 1).to_string());
    assert_eq!(m["rdb_last_load_keys_expired"], "1");
    assert_eq!(m["rdb_changes_since_last_save"], "0");
    let v: String = redis::cmd("ARGET").arg("a:3").arg(3 * 7).query(&mut con).unwrap();
    assert_eq!(v, "v3");
    let ttl: i64 = redis::cmd("PTTL").arg("ttl").query(&mut con).unwrap();
    assert!(ttl > 3_000_000, "{ttl}");
    let f: i64 = redis::cmd("FCALL").arg("f").arg(0).query(&mut con).unwrap();
    assert_eq!(f, 7);
    let want = digest(&mut con);
    // With `--save ""`, the shutdown leaves the file as it was.
    let _: () = redis::cmd("SET").arg("later").arg("1").query(&mut con).unwrap();
    let before = std::fs::read(dir.join("dump.rdb")).unwrap();
    assert!(s.stop().success());
    assert_eq!(std::fs::read(dir.join("dump.rdb")).unwrap(), before);

    // The same file loaded again: the same dataset (without "later").
    let s = Server::start_in(Some(&dir), &["--save", "1 1"]);
    let mut con = s.conn();
    assert_eq!(digest(&mut con), want);
    // A save rule writes the file when it is due.
    let _: () = redis::cmd("SET").arg("by-rule").arg("1").query(&mut con).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while info(&mut con, "persistence")["rdb_changes_since_last_save"] != "0" {
        assert!(Instant::now() < deadline, "the rule never saved");
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_bgsave(&mut con);
    drop(s);
    let s = Server::start_in(Some(&dir), &["--save", ""]);
    let mut con = s.conn();
    let v: Option<String> = redis::cmd("GET").arg("by-rule").query(&mut con).unwrap();
    assert_eq!(v.as_deref(), Some("1"));
}

/// An RDB file that is there but cannot be loaded whole stops the startup before the server
/// listens, with the reason, as redis-server refuses a corrupt dump.rdb: starting empty would
/// overwrite it at the next save. An empty file is no RDB file either.
#[test]
fn an_unreadable_rdb_file_stops_the_startup() {
    let dir = folder("rdb-bad");
    let s = Server::start_in(Some(&dir), &["--save", ""]);
    let mut con = s.conn();
    fill(&mut con, 50);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    drop(s);
    let file = dir.join("dump.rdb");
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(&file, &bytes).unwrap();
    let d = dir.to_str().unwrap();
    let (code, log) = common::run_to_exit(&["--dir", d, "--port", "0"]);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("RDB file dump.rdb is unusable"), "{log}");
    assert!(log.contains("Terminating server after rdb file reading failure."), "{log}");
    // Cut short.
    std::fs::write(&file, &bytes[..mid]).unwrap();
    let (code, log) = common::run_to_exit(&["--dir", d, "--port", "0"]);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("is unusable"), "{log}");
    std::fs::write(&file, b"").unwrap();
    let (code, log) = common::run_to_exit(&["--dir", d, "--port", "0"]);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("dump.rdb is empty"), "{log}");
}

/// Without `--load`, SAVE, BGSAVE (and SCHEDULE) and SHUTDOWN SAVE write a Redis RDB file at
/// `dbfilename` in the working directory, as redis-server writes dump.rdb: redis-server loads
/// it with the same contents, and `import-rdb` brings it back into goblin-core. A name that is
/// a path is refused as Redis refuses it.
#[test]
fn save_without_a_path_writes_a_redis_rdb_file() {
    let dir = folder("rdb-save");
    let s = Server::start_in(Some(&dir), &["--enable-protected-configs", "yes"]);
    let mut con = s.conn();
    fill(&mut con, 500);
    // Array keys have no RDB form redis-server loads: these files are for it.
    let arrays: Vec<String> = (0..10).map(|i| format!("a:{i}")).chain(["a:cursor".to_string()]).collect();
    let _: () = redis::cmd("DEL").arg(&arrays).query(&mut con).unwrap();
    let want = digest(&mut con);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    assert!(dir.join("dump.rdb").exists());
    let before = info(&mut con, "persistence");
    assert_eq!(before["rdb_changes_since_last_save"], "0");
    let _: () = redis::cmd("SET").arg("after").arg("1").query(&mut con).unwrap();
    let e =
        redis::cmd("CONFIG").arg("SET").arg("dbfilename").arg("a/b.rdb").query::<()>(&mut con).unwrap_err();
    assert!(e.to_string().contains("dbfilename can't be a path, just a filename"), "{e}");
    let _: () = redis::cmd("CONFIG").arg("SET").arg("dbfilename").arg("bg.rdb").query(&mut con).unwrap();
    let started: String = redis::cmd("BGSAVE").query(&mut con).unwrap();
    assert_eq!(started, "Background saving started");
    let scheduled: String = redis::cmd("BGSAVE").arg("SCHEDULE").query(&mut con).unwrap();
    assert!(scheduled.starts_with("Background saving"), "{scheduled}");
    let done = wait_bgsave(&mut con);
    assert_eq!(done["rdb_last_bgsave_status"], "ok");
    let want_after = digest(&mut con);
    // SHUTDOWN SAVE writes the file too (the dataset now has one more key).
    let _: () = redis::cmd("CONFIG").arg("SET").arg("dbfilename").arg("final.rdb").query(&mut con).unwrap();
    let _ = redis::cmd("SHUTDOWN").arg("SAVE").query::<()>(&mut con);
    for (file, want) in [("dump.rdb", &want), ("bg.rdb", &want_after), ("final.rdb", &want_after)] {
        // redis-server loads each file, and the data are the same.
        let r = common::RedisServer::start_with(&["--dir", dir.to_str().unwrap(), "--dbfilename", file]);
        let mut rc = r.conn();
        let n: i64 = redis::cmd("DBSIZE").query(&mut rc).unwrap();
        assert!(n >= 500, "{file}: {n} keys");
        drop(r);
        // And goblin-core reads it back with import-rdb: the same digest.
        let snap = dir.join(format!("{file}.gcsn"));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_goblin-core"))
            .arg("import-rdb")
            .arg(dir.join(file))
            .arg("-o")
            .arg(&snap)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let t = Server::start(&["--load", snap.to_str().unwrap(), "--save", ""]);
        assert_eq!(&digest(&mut t.conn()), want, "{file}");
    }
}

#[test]
fn dumpworld_bootstraps_a_second_server() {
    let a = Server::start(&["--save", ""]);
    let mut con = a.conn();
    fill(&mut con, 3_000);
    let want = (digest(&mut con), lineage(&mut con));
    // Pipelined around other commands, the reply keeps its place.
    let mut raw = a.raw();
    send(&mut raw, b"PING\r\n*1\r\n$16\r\nGOBLIN.DUMPWORLD\r\nPING\r\n");
    assert_eq!(read_reply(&mut raw), b"+PONG\r\n");
    let bulk = read_reply(&mut raw);
    assert!(bulk.starts_with(b"$") && bulk.len() > 1000);
    assert_eq!(read_reply(&mut raw), b"+PONG\r\n");
    // EOF-marked (what the tool asks for): `$EOF:<mark>`, a snapshot a server loads, the mark,
    // and the next reply after it.
    send(&mut raw, b"PING\r\n*2\r\n$16\r\nGOBLIN.DUMPWORLD\r\n$3\r\neof\r\nPING\r\n");
    assert_eq!(read_reply(&mut raw), b"+PONG\r\n");
    let mut got = Vec::new();
    let mut chunk = [0u8; 65536];
    while !got.ends_with(b"+PONG\r\n") {
        let n = std::io::Read::read(&mut raw, &mut chunk).unwrap();
        assert!(n > 0, "the connection closed");
        got.extend_from_slice(&chunk[..n]);
    }
    let header_end = got.windows(2).position(|w| w == b"\r\n").unwrap();
    let header = String::from_utf8(got[..header_end].to_vec()).unwrap();
    let mark = header.strip_prefix("$EOF:").unwrap_or_else(|| panic!("{header}"));
    assert_eq!(mark.len(), 40);
    let body = &got[header_end + 2..got.len() - b"+PONG\r\n".len()];
    assert!(body.ends_with(mark.as_bytes()), "the snapshot is followed by its mark");
    let dir = folder("dumpworld");
    let raw_snap = dir.join("raw.gcsn");
    std::fs::write(&raw_snap, &body[..body.len() - 40]).unwrap();
    let r = Server::start(&["--load", raw_snap.to_str().unwrap(), "--save", ""]);
    assert_eq!((digest(&mut r.conn()), continued(&mut r.conn())), want);
    for bad in [&["GOBLIN.DUMPWORLD", "LATER"][..], &["GOBLIN.DUMPWORLD", "EOF", "EOF"]] {
        let e = redis::cmd(bad[0]).arg(&bad[1..]).query::<()>(&mut con).unwrap_err();
        assert_eq!((e.code(), e.detail()), (Some("ERR"), Some("syntax error")), "{bad:?}");
    }
    // The tool installs it; a server started on it has the same data and lineage.
    let out = dir.join("replica.gcsn");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_goblin-core"))
        .args([
            "dumpworld",
            "--host",
            "127.0.0.1",
            "--port",
            &a.port.to_string(),
            "-o",
            out.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(status.success());
    let b = Server::start(&["--load", out.to_str().unwrap(), "--save", ""]);
    let mut bc = b.conn();
    assert_eq!((digest(&mut bc), continued(&mut bc)), want);
    // Against a server that does not answer a snapshot, the tool fails and installs nothing.
    let bad = dir.join("bad.gcsn");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_goblin-core"))
        .args(["dumpworld", "--host", "127.0.0.1", "--port", "1", "-o", bad.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(!status.success());
    assert!(!bad.exists());
}

#[test]
fn goblin_load_replaces_the_dataset() {
    let dir = folder("goblinload");
    let path = dir.join("src.gcsn");
    let a = Server::start(&["--load", path.to_str().unwrap(), "--save", ""]);
    let mut ac = a.conn();
    fill(&mut ac, 500);
    let _: () = redis::cmd("SAVE").query(&mut ac).unwrap();
    let want = (digest(&mut ac), lineage(&mut ac));
    let b = Server::start(&[]);
    let mut bc = b.conn();
    let _: () = redis::cmd("SET").arg("only-in-b").arg("1").query(&mut bc).unwrap();
    let before = digest(&mut bc);
    let err = redis::cmd("GOBLIN.LOAD")
        .arg(dir.join("missing.gcsn").to_str().unwrap())
        .query::<()>(&mut bc)
        .unwrap_err();
    assert!(err.to_string().contains("cannot open"), "{err}");
    assert_eq!(digest(&mut bc), before, "a failed load changes nothing");
    let _: () = redis::cmd("GOBLIN.LOAD").arg(path.to_str().unwrap()).query(&mut bc).unwrap();
    // The file's data and offset, under a successor of its lineage (see below).
    assert_eq!((digest(&mut bc), continued(&mut bc)), want);
}

/// GOBLIN.LOAD may not take history away from replicas: it is refused while a firehose
/// subscriber is attached (the dataset stays as it was), and a loaded snapshot goes on as a
/// successor of its lineage (a new id, the file's lineage and offset as master_replid2 and
/// second_repl_offset - 1), so that a replica that saw later offsets of the file's lineage
/// cannot reattach as if in step; one at exactly the file's offset follows.
#[test]
fn goblin_load_keeps_replicas_from_diverging() {
    let dir = folder("goblinload-repl");
    let path = dir.join("own.gcsn");
    let a = Server::start(&["--load", path.to_str().unwrap(), "--save", ""]);
    let mut ac = a.conn();
    // A replica, live from the start.
    let port = a.port.to_string();
    let r = Server::start(&["--replica-tcp", "127.0.0.1", &port]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while info(&mut r.conn(), "replication")["replica_state"] != "live" {
        assert!(Instant::now() < deadline, "replica not live: {}", r.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    fill(&mut ac, 50);
    let _: () = redis::cmd("SAVE").query(&mut ac).unwrap();
    let saved = (digest(&mut ac), lineage(&mut ac));
    let _: () = redis::cmd("SET").arg("after-the-save").arg("1").query(&mut ac).unwrap();
    let before = (digest(&mut ac), lineage(&mut ac));

    // Refused while it is attached; nothing changes.
    let err = redis::cmd("GOBLIN.LOAD").arg(path.to_str().unwrap()).query::<()>(&mut ac).unwrap_err();
    assert!(err.to_string().contains("firehose subscriber(s) are attached"), "{err}");
    assert_eq!((digest(&mut ac), lineage(&mut ac)), before);
    drop(r);
    let deadline = Instant::now() + Duration::from_secs(30);
    while info(&mut ac, "replication")["connected_slaves"] != "0" {
        assert!(Instant::now() < deadline, "the subscriber did not detach");
        std::thread::sleep(Duration::from_millis(20));
    }

    // Detached: the load goes ahead, with the snapshot's data and offset on a new lineage.
    let _: () = redis::cmd("GOBLIN.LOAD").arg(path.to_str().unwrap()).query(&mut ac).unwrap();
    let (d, (id, offset)) = (digest(&mut ac), lineage(&mut ac));
    assert_eq!((d.as_str(), offset), (saved.0.as_str(), saved.1 .1));
    assert_ne!(id, saved.1 .0, "a rewound lineage must not be continued");
    assert_eq!(continued(&mut ac), saved.1);

    // Another server's snapshot: the same, its data and offset under a successor lineage.
    let b = Server::start(&["--save", ""]);
    let mut bc = b.conn();
    let _: () = redis::cmd("GOBLIN.LOAD").arg(path.to_str().unwrap()).query(&mut bc).unwrap();
    assert_eq!((digest(&mut bc), continued(&mut bc)), saved);
}

/// A failed save of the RDB restart point stops writes as a snapshot's does (MISCONF), and
/// also every write a script makes, a script without declared flags included (its first
/// write fails), while its reads still run: here the BGSAVE child is killed mid-save.
#[test]
fn a_failed_rdb_save_stops_writes_in_scripts_too() {
    let dir = folder("rdb-misconf");
    let s = Server::start_in(Some(&dir), &["--save", "900 1"]);
    let mut con = s.conn();
    let _: () = redis::cmd("SET").arg("x").arg("x").query(&mut con).unwrap();
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("rdb-key-save-delay").arg("10000000").query(&mut con).unwrap();
    let _: String = redis::cmd("BGSAVE").query(&mut con).unwrap();
    let child = wait_child(s.pid());
    // SAFETY: kill(2) on the server's own BGSAVE child.
    unsafe { libc::kill(child, libc::SIGKILL) };
    assert_eq!(wait_bgsave(&mut con)["rdb_last_bgsave_status"], "err");
    let e = redis::cmd("SET").arg("x").arg("y").query::<()>(&mut con).unwrap_err();
    assert_eq!(e.code(), Some("MISCONF"), "{e}");
    let script = "return redis.call('set', KEYS[1], 1)";
    let e = redis::cmd("EVAL").arg(script).arg(1).arg("x").query::<()>(&mut con).unwrap_err();
    assert_eq!(e.code(), Some("MISCONF"), "{e}");
    let e =
        redis::cmd("EVAL").arg(format!("#!lua\n{script}")).arg(1).arg("x").query::<()>(&mut con).unwrap_err();
    assert_eq!(e.code(), Some("MISCONF"), "{e}");
    let v: String =
        redis::cmd("EVAL").arg("return redis.call('get', KEYS[1])").arg(1).arg("x").query(&mut con).unwrap();
    assert_eq!(v, "x");
    let _: () = redis::cmd("CONFIG").arg("SET").arg("rdb-key-save-delay").arg("0").query(&mut con).unwrap();
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let _: () = redis::cmd("EVAL").arg(script).arg(1).arg("x").query(&mut con).unwrap();
}

/// The pid of `parent`'s child process (a BGSAVE's), waiting for it to appear.
fn wait_child(parent: u32) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let path = format!("/proc/{parent}/task/{parent}/children");
        if let Some(pid) =
            std::fs::read_to_string(path).ok().and_then(|t| t.split_whitespace().next()?.parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no child of {parent}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// FLUSHALL stops a BGSAVE in progress (its image is from before the flush), as Redis stops its
/// RDB child: the save neither finishes nor counts as failed, its temporary file is gone, and
/// the next BGSAVE starts at once.
#[test]
fn flushall_stops_a_background_save() {
    let dir = folder("flushall-bgsave");
    let s = Server::start_in(Some(&dir), &["--save", ""]);
    let mut con = s.conn();
    fill(&mut con, 100);
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("rdb-key-save-delay").arg("1000").query(&mut con).unwrap();
    let _: String = redis::cmd("BGSAVE").query(&mut con).unwrap();
    assert_eq!(info(&mut con, "persistence")["rdb_bgsave_in_progress"], "1");
    let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    let m = info(&mut con, "persistence");
    assert_eq!(m["rdb_bgsave_in_progress"], "0");
    assert_eq!(m["rdb_last_bgsave_status"], "ok");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(left.is_empty(), "{left:?}");
    let _: () = redis::cmd("CONFIG").arg("SET").arg("rdb-key-save-delay").arg("0").query(&mut con).unwrap();
    let _: String = redis::cmd("BGSAVE").query(&mut con).unwrap();
    assert_eq!(wait_bgsave(&mut con)["rdb_changes_since_last_save"], "0");
    assert!(dir.join("dump.rdb").exists());
}

/// DEBUG RELOAD on a server whose restart point is its RDB file is Redis's: save the file,
/// load it back (the same digest, the load counted in INFO, keys past their deadline kept, to
/// expire as usual); NOSAVE loads the file as it is, dropping what was written since, under a
/// new lineage, and is refused while a replica is attached.
#[test]
fn debug_reload_saves_and_loads_the_rdb_file() {
    let dir = folder("debug-reload-rdb");
    let s = Server::start_in(Some(&dir), &["--save", "", "--enable-debug-command", "yes"]);
    let mut con = s.conn();
    fill(&mut con, 100);
    let _: () = redis::cmd("DEBUG").arg("SET-ACTIVE-EXPIRE").arg("0").query(&mut con).unwrap();
    let _: () = redis::cmd("SET").arg("brief").arg("1").arg("PX").arg(1).query(&mut con).unwrap();
    std::thread::sleep(Duration::from_millis(10));
    let want = digest(&mut con);
    let keys: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    let (replid, _) = lineage(&mut con);
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut con).unwrap();
    assert!(dir.join("dump.rdb").exists());
    assert_eq!(digest(&mut con), want);
    assert_eq!(info(&mut con, "persistence")["rdb_last_load_keys_loaded"], keys.to_string());
    assert_eq!(lineage(&mut con).0, replid);
    // Written after the save: NOSAVE brings back the file's dataset, under a new lineage.
    let _: () = redis::cmd("SET").arg("later").arg("1").query(&mut con).unwrap();
    let _: () = redis::cmd("DEBUG").arg("RELOAD").arg("NOSAVE").query(&mut con).unwrap();
    assert_eq!(digest(&mut con), want);
    assert_ne!(lineage(&mut con).0, replid);
    // NOFLUSH loads the file into the dataset: a key on both sides is an error and nothing
    // changes; with MERGE the file's wins, and what only the dataset has stays.
    let _: () = redis::cmd("SET").arg("only-live").arg("1").query(&mut con).unwrap();
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("#!lua name=live\nredis.register_function('g', function() return 1 end)")
        .query(&mut con)
        .unwrap();
    // The log names the clashing key, unless hide-user-data-from-log says key names are not
    // for the log.
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("hide-user-data-from-log").arg("yes").query(&mut con).unwrap();
    let e = redis::cmd("DEBUG").arg("RELOAD").arg("NOSAVE").arg("NOFLUSH").query::<()>(&mut con).unwrap_err();
    assert!(e.to_string().contains("Error trying to load the RDB dump"), "{e}");
    assert!(s.log().contains("DEBUG RELOAD: key '*redacted*'"), "{}", s.log());
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("hide-user-data-from-log").arg("no").query(&mut con).unwrap();
    let e = redis::cmd("DEBUG").arg("RELOAD").arg("NOSAVE").arg("NOFLUSH").query::<()>(&mut con).unwrap_err();
    assert!(e.to_string().contains("Error trying to load the RDB dump"), "{e}");
    assert_eq!(s.log().matches("DEBUG RELOAD: key '").count(), 2, "{}", s.log());
    assert_eq!(s.log().matches("DEBUG RELOAD: key '*redacted*'").count(), 1, "{}", s.log());
    let _: () = redis::cmd("SET").arg("s:1").arg("changed").query(&mut con).unwrap();
    let _: () =
        redis::cmd("DEBUG").arg("RELOAD").arg("NOSAVE").arg("NOFLUSH").arg("MERGE").query(&mut con).unwrap();
    let v: String = redis::cmd("GET").arg("s:1").query(&mut con).unwrap();
    assert_eq!(v, "value-1");
    let v: String = redis::cmd("GET").arg("only-live").query(&mut con).unwrap();
    assert_eq!(v, "1");
    let g: i64 = redis::cmd("FCALL").arg("g").arg(0).query(&mut con).unwrap();
    assert_eq!(g, 1);
    let e = redis::cmd("DEBUG").arg("RELOAD").arg("SOON").query::<()>(&mut con).unwrap_err();
    assert!(e.to_string().contains("only supports the MERGE, NOFLUSH and NOSAVE options"), "{e}");
    // A redis-server replica attached (arrays have no RDB form it loads): NOSAVE would leave
    // it holding other data.
    let arrays: Vec<String> = (0..10).map(|i| format!("a:{i}")).chain(["a:cursor".to_string()]).collect();
    let _: () = redis::cmd("DEL").arg(&arrays).query(&mut con).unwrap();
    let r = common::RedisServer::start_with(&["--replicaof", "127.0.0.1", &s.port.to_string()]);
    common::redis_repl::wait_info(&mut r.conn(), "master_link_status", "up", "the replica's link");
    let e = redis::cmd("DEBUG").arg("RELOAD").arg("NOSAVE").query::<()>(&mut con).unwrap_err();
    assert!(e.to_string().contains("replica(s) are attached"), "{e}");
}

/// `rdbcompression` and `rdbchecksum`, as Redis's: off, strings go uncompressed into RDB
/// files and DUMP payloads, and the file ends with eight zero bytes in place of its CRC64;
/// redis-server and goblin-core load both kinds; CONFIG GET reads the settings back.
#[test]
fn rdbcompression_and_rdbchecksum_shape_the_files() {
    let dir = folder("rdb-settings");
    let s = Server::start_in(Some(&dir), &["--save", "", "--enable-protected-configs", "yes"]);
    let mut con = s.conn();
    let long = "a".repeat(1000);
    let _: () = redis::cmd("SET").arg("long").arg(&long).query(&mut con).unwrap();
    let packed: Vec<u8> = redis::cmd("DUMP").arg("long").query(&mut con).unwrap();
    let _: () = redis::cmd("CONFIG").arg("SET").arg("dbfilename").arg("packed.rdb").query(&mut con).unwrap();
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rdbcompression")
        .arg("no")
        .arg("rdbchecksum")
        .arg("no")
        .arg("dbfilename")
        .arg("plain.rdb")
        .query(&mut con)
        .unwrap();
    let got: HashMap<String, String> = redis::cmd("CONFIG").arg("GET").arg("rdbc*").query(&mut con).unwrap();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!((got["rdbchecksum"].as_str(), got["rdbcompression"].as_str()), ("no", "no"));
    let e =
        redis::cmd("CONFIG").arg("SET").arg("rdbchecksum").arg("maybe").query::<()>(&mut con).unwrap_err();
    assert!(e.to_string().contains("argument must be 'yes' or 'no'"), "{e}");
    let plain: Vec<u8> = redis::cmd("DUMP").arg("long").query(&mut con).unwrap();
    assert!(packed.len() < 100 && plain.len() > 1000, "{} {}", packed.len(), plain.len());
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let packed_file = std::fs::read(dir.join("packed.rdb")).unwrap();
    let plain_file = std::fs::read(dir.join("plain.rdb")).unwrap();
    assert!(plain_file.len() > packed_file.len() + 900);
    assert_eq!(plain_file[plain_file.len() - 8..], [0u8; 8]);
    assert_ne!(packed_file[packed_file.len() - 8..], [0u8; 8]);
    for file in ["packed.rdb", "plain.rdb"] {
        let r = common::RedisServer::start_with(&["--dir", dir.to_str().unwrap(), "--dbfilename", file]);
        let mut rc = r.conn();
        let v: String = redis::cmd("GET").arg("long").query(&mut rc).unwrap();
        assert_eq!(v, long, "{file}");
    }
    drop(s);
    let s = Server::start_in(Some(&dir), &["--save", "", "--dbfilename", "plain.rdb"]);
    let mut con = s.conn();
    let v: String = redis::cmd("GET").arg("long").query(&mut con).unwrap();
    assert_eq!(v, long);
}

/// A background save reports its progress while it runs, as Redis's child does: INFO's
/// `current_save_keys_processed` grows towards `current_save_keys_total` (the keys at the
/// fork), `current_fork_perc` with it, and `current_cow_size` shows the pages the parent's
/// writes made the child copy; all back to zero once it is done.
#[test]
fn a_background_save_reports_its_progress() {
    let dir = folder("bgsave-progress");
    let s = Server::start_in(Some(&dir), &["--save", "", "--enable-debug-command", "yes"]);
    let mut con = s.conn();
    let _: () = redis::cmd("DEBUG").arg("POPULATE").arg(20000).arg("key").arg(500).query(&mut con).unwrap();
    let _: () = redis::cmd("CONFIG").arg("SET").arg("rdb-key-save-delay").arg("200").query(&mut con).unwrap();
    let _: String = redis::cmd("BGSAVE").query(&mut con).unwrap();
    let num = |m: &HashMap<String, String>, k: &str| m[k].parse::<f64>().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    let mut i = 0;
    loop {
        // Overwrite some values: pages the child still reads get copied.
        for _ in 0..50 {
            let _: () = redis::cmd("SETRANGE")
                .arg(format!("key:{i}"))
                .arg(0)
                .arg("B".repeat(500))
                .query(&mut con)
                .unwrap();
            i += 1;
        }
        let m = info(&mut con, "persistence");
        if m["rdb_bgsave_in_progress"] == "0" {
            break;
        }
        assert_eq!(m["current_save_keys_total"], "20000");
        seen.push((
            num(&m, "current_save_keys_processed"),
            num(&m, "current_fork_perc"),
            num(&m, "current_cow_size"),
        ));
        assert!(Instant::now() < deadline, "the save did not end");
        std::thread::sleep(Duration::from_millis(200));
    }
    let last = seen.iter().rev().find(|s| s.0 > 0.0).copied();
    let (keys, perc, _) = last.unwrap_or_else(|| panic!("no progress reported: {seen:?}"));
    assert!(keys <= 20000.0 && (perc - keys / 200.0).abs() < 0.01, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[1].0 >= w[0].0), "{seen:?}");
    assert!(seen.iter().any(|s| s.2 > 0.0), "no copy-on-write reported: {seen:?}");
    let m = info(&mut con, "persistence");
    assert_eq!((m["current_save_keys_processed"].as_str(), m["current_cow_size"].as_str()), ("0", "0"));
    assert_eq!(m["rdb_last_bgsave_status"], "ok");
}

/// Inside EXEC, after a write, the dataset holds mutations the transaction's batch has not
/// committed: BGSAVE there is scheduled (it starts once the batch is committed), so the image
/// and the offset in its header agree (a fork at that point wrote `l = [x]` under the offset
/// before the RPUSH, and a replay would have pushed `x` again). GOBLIN.DUMPWORLD and GOBLIN.LOAD
/// are refused inside MULTI, and DEBUG RELOAD after a write in one (it crashed the server).
#[test]
fn saves_and_loads_inside_a_transaction_keep_the_image_and_its_offset_together() {
    let dir = folder("multi-saves");
    let path = dir.join("s.gcsn");
    let s = Server::start(&["--load", path.to_str().unwrap(), "--save", "", "--enable-debug-command", "yes"]);
    let mut con = s.conn();
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut con).unwrap();
    let (n1, bg, n2): (i64, String, i64) = redis::pipe()
        .atomic()
        .cmd("RPUSH")
        .arg("l")
        .arg("x")
        .cmd("BGSAVE")
        .cmd("RPUSH")
        .arg("l")
        .arg("y")
        .query(&mut con)
        .unwrap();
    assert_eq!((n1, bg.as_str(), n2), (1, "Background saving scheduled", 2));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !path.exists() || info(&mut con, "persistence")["rdb_bgsave_in_progress"] != "0" {
        assert!(Instant::now() < deadline, "the scheduled save did not run: {}", s.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info(&mut con, "persistence")["rdb_last_bgsave_status"], "ok");
    let copy = dir.join("copy.gcsn");
    std::fs::copy(&path, &copy).unwrap();
    let t = Server::start(&["--load", copy.to_str().unwrap(), "--save", ""]);
    let mut tc = t.conn();
    let list: Vec<String> = redis::cmd("LRANGE").arg("l").arg(0).arg(-1).query(&mut tc).unwrap();
    assert_eq!(list, ["x", "y"]);
    assert_eq!(continued(&mut tc).1, 3, "SET and both RPUSHes are in the image and its offset");

    // Refused when queued; EXEC then aborts and nothing of the transaction runs.
    for cmd in [&["GOBLIN.DUMPWORLD"][..], &["GOBLIN.LOAD", copy.to_str().unwrap()]] {
        let _: () = redis::cmd("MULTI").query(&mut con).unwrap();
        let _: String = redis::cmd("SET").arg("b").arg("1").query(&mut con).unwrap();
        let e = redis::cmd(cmd[0]).arg(&cmd[1..]).query::<()>(&mut con).unwrap_err();
        assert!(e.to_string().contains("not allowed inside a transaction"), "{cmd:?}: {e}");
        let e = redis::cmd("EXEC").query::<()>(&mut con).unwrap_err();
        assert_eq!(e.code(), Some("EXECABORT"), "{e}");
        let n: i64 = redis::cmd("EXISTS").arg("b").query(&mut con).unwrap();
        assert_eq!(n, 0);
    }
    // DEBUG RELOAD after a write in the transaction: an error in EXEC's reply; the write stays.
    let before = lineage(&mut con).1;
    let mut raw = s.raw();
    send(&mut raw, b"MULTI\r\nSET c 1\r\nDEBUG RELOAD\r\nEXEC\r\n");
    for want in [&b"+OK\r\n"[..], b"+QUEUED\r\n", b"+QUEUED\r\n"] {
        assert_eq!(read_reply(&mut raw), want);
    }
    let exec = String::from_utf8(read_reply(&mut raw)).unwrap();
    assert_eq!(
        exec,
        "*2\r\n+OK\r\n-ERR DEBUG RELOAD is not allowed after a write in the same transaction\r\n"
    );
    assert_eq!(lineage(&mut con).1, before + 1);
    let v: String = redis::cmd("GET").arg("c").query(&mut con).unwrap();
    assert_eq!(v, "1");
}
