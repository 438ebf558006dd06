//! `--ring`: RESP over shared-memory rings against the real binary, with goblin-ring's client.
//! Child processes are this test binary re-run with GOBLIN_RING_CHILD set (see `ring_child`).

mod common;

use common::{temp_path, wait_connected_clients, Server};
use goblin_ring::Client;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD: &str = "GOBLIN_RING_CHILD";

fn q(c: &mut Client, args: &[&str]) -> String {
    String::from_utf8(c.query(args).expect("ring query")).unwrap()
}

fn start_ring(extra: &[&str]) -> (Server, std::path::PathBuf) {
    let path = temp_path("ring.sock");
    let p = path.to_str().unwrap().to_string();
    let mut args = vec!["--ring", p.as_str()];
    args.extend_from_slice(extra);
    (Server::start(&args), path)
}

/// Runs `mode` in a child process (this binary, the `ring_child` test).
fn spawn_child(mode: &str, path: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "ring_child", "--nocapture", "--test-threads=1", "-q"])
        .env(CHILD, format!("{mode}:{}", path.display()))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The child processes' body; a no-op as an ordinary test.
#[test]
fn ring_child() {
    let Ok(spec) = std::env::var(CHILD) else { return };
    let (mode, path) = spec.split_once(':').unwrap();
    let mut c = Client::connect(path).expect("child: connect");
    match mode {
        "sleep" => {
            assert_eq!(q(&mut c, &["SET", "child", "1"]), "+OK\r\n");
            println!("ready");
            std::io::stdout().flush().unwrap();
            std::thread::sleep(Duration::from_secs(60));
        }
        "hammer" => hammer(&mut c, &format!("p{}", std::process::id()), 3000),
        _ => panic!("unknown child mode {mode}"),
    }
}

/// INCRs a shared counter and SET/GETs its own key, checking every reply.
fn hammer(c: &mut Client, me: &str, rounds: u64) {
    let mut last = 0i64;
    for i in 0..rounds {
        let r = q(c, &["INCR", "counter"]);
        let v: i64 = r.strip_prefix(':').and_then(|s| s.strip_suffix("\r\n")).unwrap().parse().unwrap();
        assert!(v > last, "INCR went from {last} to {v}");
        last = v;
        let val = format!("{me}-{i}");
        assert_eq!(q(c, &["SET", me, &val]), "+OK\r\n");
        assert_eq!(q(c, &["GET", me]), format!("${}\r\n{val}\r\n", val.len()));
    }
}

#[test]
fn commands_over_the_ring_match_the_socket() {
    let (s, path) = start_ring(&["--ring-size", "65536"]);
    let mut c = Client::connect(&path).unwrap();
    assert_eq!(c.ring_size(), 65536);
    assert_eq!(q(&mut c, &["PING"]), "+PONG\r\n");
    assert_eq!(q(&mut c, &["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(q(&mut c, &["GET", "k"]), "$1\r\nv\r\n");
    assert_eq!(q(&mut c, &["GET"]), "-ERR wrong number of arguments for 'get' command\r\n");
    assert_eq!(q(&mut c, &["NOSUCH"]), "-ERR unknown command 'NOSUCH', with args beginning with: \r\n");

    // A value 16 times the ring: both rings fill and both sides wait on the doorbell.
    let big: String = (0..1 << 20).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    assert_eq!(q(&mut c, &["SET", "big", &big]), "+OK\r\n");
    assert_eq!(q(&mut c, &["GET", "big"]), format!("${}\r\n{big}\r\n", big.len()));

    // A pipeline of 5000 requests sent before any reply is read.
    let mut out = Vec::new();
    for _ in 0..5000 {
        out.extend_from_slice(b"*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n");
    }
    c.send(&out).unwrap();
    for i in 1..=5000 {
        assert_eq!(c.read_reply().unwrap(), format!(":{i}\r\n").as_bytes());
    }

    // The forked child of GOBLIN.DUMPWORLD writes a socket, never the ring: refused.
    assert_eq!(
        q(&mut c, &["GOBLIN.DUMPWORLD"]),
        "-ERR GOBLIN.DUMPWORLD is not available on a ring connection\r\n"
    );

    let list = q(&mut c, &["CLIENT", "LIST"]);
    assert!(list.contains(&format!("addr=ring:{}", path.display())), "{list}");

    // The same bad input gets the same bytes and the same close as on a TCP socket.
    let bad = b"*1\r\n$x\r\n";
    let mut tcp = s.raw();
    tcp.write_all(bad).unwrap();
    let mut want = Vec::new();
    tcp.read_to_end(&mut want).unwrap();
    assert!(want.starts_with(b"-ERR Protocol error"), "{}", String::from_utf8_lossy(&want));
    let mut r = Client::connect(&path).unwrap();
    r.send(bad).unwrap();
    assert_eq!(r.read_reply().unwrap(), want);
    assert_eq!(r.read_reply().unwrap_err().kind(), std::io::ErrorKind::UnexpectedEof);
}

#[test]
fn auth_applies_unless_no_auth_ring() {
    let (_s, path) = start_ring(&["--requirepass", "secret"]);
    let mut c = Client::connect(&path).unwrap();
    assert!(q(&mut c, &["GET", "x"]).starts_with("-NOAUTH"), "a ring client must authenticate");
    assert!(q(&mut c, &["AUTH", "wrong"]).starts_with("-WRONGPASS"));
    assert_eq!(q(&mut c, &["AUTH", "secret"]), "+OK\r\n");
    assert_eq!(q(&mut c, &["GET", "x"]), "$-1\r\n");

    let (s, path) = start_ring(&["--requirepass", "secret", "--no-auth-ring"]);
    let mut c = Client::connect(&path).unwrap();
    assert_eq!(q(&mut c, &["SET", "x", "1"]), "+OK\r\n");
    // Sockets still need the password.
    let mut tcp = s.raw();
    tcp.write_all(b"*2\r\n$3\r\nGET\r\n$1\r\nx\r\n").unwrap();
    assert!(common::read_reply(&mut tcp).starts_with(b"-NOAUTH"));
}

#[test]
fn ring_socket_mode_comes_from_ring_perm() {
    use std::os::unix::fs::PermissionsExt;
    let (_s, path) = start_ring(&[]);
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let (_s, path) = start_ring(&["--ring-perm", "660"]);
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o660);
}

#[test]
fn bad_ring_flags_are_usage_errors() {
    for args in [["--ring-size", "5000"], ["--ring-size", "1024"], ["--ring-perm", "9"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_goblin-core")).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(args[0]), "{args:?}");
    }
}

/// Ring memory mapped by the server (the segments of live ring clients).
fn ring_mappings(pid: u32) -> usize {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    maps.lines().filter(|l| l.contains("memfd:goblin-ring")).count()
}

#[test]
fn a_killed_client_frees_its_slot_and_memory() {
    let (s, path) = start_ring(&[]);
    let mut con = s.conn();
    // `con` alone: the harness's readiness probe may still be closing on the server's side.
    let base = 1;
    wait_connected_clients(&mut con, base, "other clients linger");
    let mut child = spawn_child("sleep", &path);
    // The test harness prints its own lines around the child's.
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the child exited before connecting");
    }
    wait_connected_clients(&mut con, base + 1, "the ring client is not counted");
    assert_eq!(ring_mappings(s.pid()), 1);
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    wait_connected_clients(&mut con, base, "the killed client's slot was not reclaimed");
    assert_eq!(ring_mappings(s.pid()), 0, "the segment is unmapped");
    let v: String = redis::cmd("GET").arg("child").query(&mut s.conn()).unwrap();
    assert_eq!(v, "1");
    // The server goes on serving ring clients.
    let mut c = Client::connect(&path).unwrap();
    assert_eq!(q(&mut c, &["PING"]), "+PONG\r\n");
}

#[test]
fn processes_and_threads_hammer_one_counter() {
    let (s, path) = start_ring(&["--ring-size", "4096"]);
    let children: Vec<_> = (0..2).map(|_| spawn_child("hammer", &path)).collect();
    let threads: Vec<_> = (0..6)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(&path).unwrap();
                // Some clients never spin: they always sleep on the doorbell.
                if t % 2 == 0 {
                    c.set_spin(Duration::ZERO);
                }
                hammer(&mut c, &format!("t{t}"), 1000);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for mut c in children {
        assert!(c.wait().unwrap().success(), "a child process saw a wrong reply");
    }
    let v: u64 = redis::cmd("GET").arg("counter").query(&mut s.conn()).unwrap();
    assert_eq!(v, 2 * 3000 + 6 * 1000);
}

/// crates/ring/examples/c/ping.c, compiled with `cc` against the static library and the
/// header, talks to the real server.
#[test]
fn c_example_runs_against_the_server() {
    let ring_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ring");
    // The test binary is in <target>/<profile>/deps; the library one level up.
    let exe = std::env::current_exe().unwrap();
    let lib = exe.parent().unwrap().parent().unwrap().join("libgoblin_ring.a");
    assert!(
        lib.exists(),
        "{} is missing: `cargo build -p goblin-ring --lib` builds it (scripts/test.sh does)",
        lib.display()
    );
    let bin = temp_path("ping");
    let out = Command::new("cc")
        .arg("-O2")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(ring_dir.join("include"))
        .arg(ring_dir.join("examples/c/ping.c"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&bin)
        .output()
        .expect("cc");
    assert!(out.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let (_s, path) = start_ring(&[]);
    let run = Command::new(&bin).arg(&path).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("GET -> $12\\r\\nhello from C\\r\\n"), "{stdout}");
    assert!(stdout.contains("all replies as expected"), "{stdout}");
    // A path with no server: NULL and errno, no crash.
    let run = Command::new(&bin).arg(temp_path("nothing-here")).output().unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&run.stderr).contains("No such file"));
    let _ = std::fs::remove_file(&bin);
}

/// `--replica-ring`: the firehose runs over the ring; the replica reaches the primary's
/// digest, follows later writes, and goes back to reconnecting when the primary dies.
#[test]
fn a_replica_follows_over_the_ring() {
    let (primary, path) = start_ring(&["--enable-debug-command", "yes", "--ring-size", "65536"]);
    let mut pc = primary.conn();
    // Without --kafka a replica can only follow from the primary's current offset: start empty.
    let replica = Server::start(&["--replica-ring", path.to_str().unwrap(), "--enable-debug-command", "yes"]);
    let mut rc = replica.conn();
    let info =
        |c: &mut redis::Connection| -> String { redis::cmd("INFO").arg("replication").query(c).unwrap() };
    let digest =
        |c: &mut redis::Connection| -> String { redis::cmd("DEBUG").arg("DIGEST").query(c).unwrap() };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let i = info(&mut rc);
        if i.contains("replica_state:live") {
            assert!(i.contains("master_transport:ring"), "{i}");
            break;
        }
        assert!(Instant::now() < deadline, "replica never caught up:\n{i}\n{}", replica.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    for i in 0..500 {
        let _: () = redis::cmd("SET").arg(format!("k{i}")).arg(i).query(&mut pc).unwrap();
    }
    // Later writes, including a value 8 times the ring (within the 1 MiB firehose queue),
    // arrive over it.
    let big = "x".repeat(512 << 10);
    let _: () = redis::cmd("SET").arg("big").arg(&big).query(&mut pc).unwrap();
    for i in 0..2000 {
        let _: i64 = redis::cmd("INCR").arg("n").query(&mut pc).unwrap();
        let _ = i;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while digest(&mut rc) != digest(&mut pc) {
        assert!(Instant::now() < deadline, "replica fell behind:\n{}", replica.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let n: i64 = redis::cmd("GET").arg("n").query(&mut rc).unwrap();
    assert_eq!(n, 2000);
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut pc).unwrap();
    assert!(list.lines().any(|l| l.contains("addr=ring:") && l.contains("flags=S")), "{list}");
    drop(pc);
    drop(primary);
    let deadline = Instant::now() + Duration::from_secs(20);
    while info(&mut rc).contains("replica_state:live") {
        assert!(Instant::now() < deadline, "the replica did not notice the dead primary");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A ring client is served during a busy script as socket clients are: -BUSY, and SCRIPT KILL
/// works from the ring.
#[test]
fn ring_clients_get_busy_during_a_long_script_and_can_kill_it() {
    let (s, path) = start_ring(&["--busy-reply-threshold", "100"]);
    let mut busy = s.conn();
    let script = std::thread::spawn(move || {
        redis::cmd("EVAL").arg("while true do end").arg(0).query::<()>(&mut busy).unwrap_err().to_string()
    });
    let mut c = Client::connect(&path).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = q(&mut c, &["PING"]);
        if r.starts_with("-BUSY") {
            break;
        }
        assert_eq!(r, "+PONG\r\n");
        assert!(Instant::now() < deadline, "never saw BUSY");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(q(&mut c, &["SCRIPT", "KILL"]), "+OK\r\n");
    let e = script.join().unwrap();
    assert!(e.contains("killed"), "{e}");
    assert_eq!(q(&mut c, &["PING"]), "+PONG\r\n");
}
