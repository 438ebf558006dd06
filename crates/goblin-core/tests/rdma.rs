//! `--rdma-port`: RESP over RDMA-write rings against the real binary, with goblin-rdma's
//! client, on the shared-memory fabric (`--rdma-fabric shm`): this host has no verbs device
//! (see ARCHITECTURE.md "RDMA ring" for what that leaves untested). Child processes are this
//! test binary re-run with GOBLIN_RDMA_CHILD set (see `rdma_child`).

mod common;

use common::{connected_clients, free_port, wait_connected_clients, Server};
use goblin_rdma::Client;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD: &str = "GOBLIN_RDMA_CHILD";

fn q(c: &mut Client, args: &[&str]) -> String {
    String::from_utf8(c.query(args).expect("rdma query")).unwrap()
}

fn start_rdma(extra: &[&str]) -> (Server, u16) {
    let port = free_port();
    let p = port.to_string();
    let mut args = vec!["--rdma-port", p.as_str(), "--rdma-fabric", "shm"];
    args.extend_from_slice(extra);
    (Server::start(&args), port)
}

fn connect(port: u16, ring: u64) -> Client {
    Client::connect(("127.0.0.1", port), ring).expect("rdma connect")
}

/// The child processes' body; a no-op as an ordinary test.
#[test]
fn rdma_child() {
    let Ok(spec) = std::env::var(CHILD) else { return };
    let (mode, port) = spec.split_once(':').unwrap();
    let mut c = connect(port.parse().unwrap(), 16384);
    match mode {
        "sleep" => {
            assert_eq!(q(&mut c, &["SET", "child", "1"]), "+OK\r\n");
            println!("ready");
            std::io::stdout().flush().unwrap();
            std::thread::sleep(Duration::from_secs(60));
        }
        "hammer" => hammer(&mut c, &format!("p{}", std::process::id()), 2000),
        _ => panic!("unknown child mode {mode}"),
    }
}

fn spawn_child(mode: &str, port: u16) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "rdma_child", "--nocapture", "--test-threads=1", "-q"])
        .env(CHILD, format!("{mode}:{port}"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
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
fn commands_over_rdma_match_the_socket() {
    let (s, port) = start_rdma(&["--rdma-ring-size", "65536"]);
    let mut c = connect(port, 16384);
    assert_eq!(c.endpoint().peer_ring_size(), 65536);
    assert_eq!(c.endpoint().ring_size(), 16384);
    assert_eq!(q(&mut c, &["PING"]), "+PONG\r\n");
    assert_eq!(q(&mut c, &["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(q(&mut c, &["GET", "k"]), "$1\r\nv\r\n");
    assert_eq!(q(&mut c, &["GET"]), "-ERR wrong number of arguments for 'get' command\r\n");
    assert_eq!(q(&mut c, &["NOSUCH"]), "-ERR unknown command 'NOSUCH', with args beginning with: \r\n");

    // A value 16 times the server's ring and 64 times the client's: both rings fill, both
    // sides wait for credits.
    let big: String = (0..1 << 20).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    assert_eq!(q(&mut c, &["SET", "big", &big]), "+OK\r\n");
    assert_eq!(q(&mut c, &["GET", "big"]), format!("${}\r\n{big}\r\n", big.len()));

    // A pipeline of 5000 requests sent before any reply is read (replies: 29 KB, more than
    // the client's ring: the server waits for its credits while the client still sends).
    let mut out = Vec::new();
    for _ in 0..5000 {
        out.extend_from_slice(b"*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n");
    }
    let sender = {
        let mut c2 = connect(port, 16384);
        std::thread::spawn(move || {
            c2.send(&out).unwrap();
            (1..=5000).map(|_| c2.read_reply().unwrap()).collect::<Vec<_>>()
        })
    };
    let replies = sender.join().unwrap();
    for (i, r) in replies.iter().enumerate() {
        assert_eq!(r, format!(":{}\r\n", i + 1).as_bytes());
    }

    assert_eq!(
        q(&mut c, &["GOBLIN.DUMPWORLD"]),
        "-ERR GOBLIN.DUMPWORLD is not available on an RDMA connection\r\n"
    );
    let list = q(&mut c, &["CLIENT", "LIST"]);
    assert!(list.contains("addr=rdma:127.0.0.1:"), "{list}");

    // The same bad input gets the same bytes and the same close as on a TCP socket.
    let bad = b"*1\r\n$x\r\n";
    let mut tcp = s.raw();
    tcp.write_all(bad).unwrap();
    let mut want = Vec::new();
    tcp.read_to_end(&mut want).unwrap();
    assert!(want.starts_with(b"-ERR Protocol error"), "{}", String::from_utf8_lossy(&want));
    let mut r = connect(port, 4096);
    r.send(bad).unwrap();
    assert_eq!(r.read_reply().unwrap(), want);
    assert_eq!(r.read_reply().unwrap_err().kind(), std::io::ErrorKind::UnexpectedEof);
}

#[test]
fn auth_applies_unless_no_auth_rdma() {
    let (_s, port) = start_rdma(&["--requirepass", "secret"]);
    let mut c = connect(port, 4096);
    assert!(q(&mut c, &["GET", "x"]).starts_with("-NOAUTH"), "an RDMA client must authenticate");
    assert!(q(&mut c, &["AUTH", "wrong"]).starts_with("-WRONGPASS"));
    assert_eq!(q(&mut c, &["AUTH", "secret"]), "+OK\r\n");
    assert_eq!(q(&mut c, &["GET", "x"]), "$-1\r\n");

    let (s, port) = start_rdma(&["--requirepass", "secret", "--no-auth-rdma"]);
    let mut c = connect(port, 4096);
    assert_eq!(q(&mut c, &["SET", "x", "1"]), "+OK\r\n");
    let mut tcp = s.raw();
    tcp.write_all(b"*2\r\n$3\r\nGET\r\n$1\r\nx\r\n").unwrap();
    assert!(common::read_reply(&mut tcp).starts_with(b"-NOAUTH"));
}

/// Garbage on the RDMA port (no hello, a wrong one, a hello naming another fabric) closes
/// that connection only.
#[test]
fn a_bad_handshake_closes_only_that_connection() {
    let (s, port) = start_rdma(&[]);
    let mut c = connect(port, 4096);
    for bytes in [
        &b"*1\r\n$4\r\nPING\r\n"[..],
        b"GOBRDMA\0\x09\0\0\0",
        b"GOBRDMA\0\x01\0\0\0\x01\0\0\0\0\x10\0\0\0\0\0\0\0\0\0\0",
    ] {
        let mut t = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        t.write_all(bytes).unwrap();
        let mut all = Vec::new();
        // The server's hello, then EOF.
        t.read_to_end(&mut all).unwrap();
        assert!(all.starts_with(b"GOBRDMA\0"), "{all:?}");
    }
    assert_eq!(q(&mut c, &["PING"]), "+PONG\r\n");
    // `c` and the asking connection; the refused ones are gone once they read EOF.
    wait_connected_clients(&mut s.conn(), 2, "refused connections linger");
}

/// At --maxclients the RDMA client gets Redis's error line instead of the hello.
#[test]
fn max_clients_is_refused_with_the_error_line() {
    let (s, port) = start_rdma(&["--maxclients", "1"]);
    // The startup probe's connection may not be closed yet: retry until admitted.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut held = loop {
        let admitted = redis::Client::open(s.url())
            .and_then(|c| c.get_connection())
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c).map(|_| c));
        match admitted {
            Ok(c) => break c,
            Err(e) => assert!(Instant::now() < deadline, "never admitted: {e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let rejected = |c: &mut redis::Connection| -> u64 {
        let info: String = redis::cmd("INFO").arg("stats").query(c).unwrap();
        let line = info.lines().find(|l| l.starts_with("rejected_connections:")).unwrap();
        line["rejected_connections:".len()..].trim().parse().unwrap()
    };
    let before = rejected(&mut held);
    let e = Client::connect(("127.0.0.1", port), 4096).err().expect("refused");
    assert_eq!(e.to_string(), "ERR max number of clients reached");
    assert_eq!(rejected(&mut held), before + 1);
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Client::connect(("127.0.0.1", port), 4096) {
            Ok(mut c) => {
                assert_eq!(q(&mut c, &["PING"]), "+PONG\r\n");
                break;
            }
            Err(e) => assert!(Instant::now() < deadline, "never admitted after the slot freed: {e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Region mappings the server holds (its own and each client's, per live RDMA client).
fn rdma_mappings(pid: u32) -> usize {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    maps.lines().filter(|l| l.contains("memfd:goblin-rdma")).count()
}

#[test]
fn a_killed_client_frees_its_slot_and_memory() {
    let (s, port) = start_rdma(&[]);
    let mut con = s.conn();
    // `con` alone: the harness's readiness probe may still be closing on the server's side.
    let base = 1;
    wait_connected_clients(&mut con, base, "other clients linger");
    let mut child = spawn_child("sleep", port);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the child exited before connecting");
    }
    assert_eq!(connected_clients(&mut con), base + 1);
    assert_eq!(rdma_mappings(s.pid()), 2, "the server's region and the client's");
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    wait_connected_clients(&mut con, base, "the killed client's slot was not reclaimed");
    assert_eq!(rdma_mappings(s.pid()), 0, "both regions are unmapped");
    let v: String = redis::cmd("GET").arg("child").query(&mut s.conn()).unwrap();
    assert_eq!(v, "1");
    let mut c = connect(port, 4096);
    assert_eq!(q(&mut c, &["PING"]), "+PONG\r\n");
}

#[test]
fn processes_and_threads_hammer_one_counter() {
    let (s, port) = start_rdma(&["--rdma-ring-size", "4096"]);
    let children: Vec<_> = (0..2).map(|_| spawn_child("hammer", port)).collect();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = connect(port, 4096);
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
    assert_eq!(v, 2 * 2000 + 4 * 1000);
}

/// `--replica-rdma HOST PORT SIZE`: the firehose negotiation and frames run over the RDMA
/// ring; the replica reaches the primary's digest, follows later writes (one value 32 times
/// the replica's ring), and notices when the primary dies.
#[test]
fn a_replica_follows_over_rdma() {
    let (primary, port) = start_rdma(&["--enable-debug-command", "yes", "--requirepass", "pw"]);
    let mut pc = redis::Client::open(format!("redis://:pw@127.0.0.1:{}/", primary.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let pwfile = common::temp_path("pw");
    std::fs::write(&pwfile, "pw\n").unwrap();
    let p = port.to_string();
    let replica = Server::start(&[
        "--replica-rdma",
        "127.0.0.1",
        &p,
        "16384",
        "--replica-auth-password-file",
        pwfile.to_str().unwrap(),
        "--enable-debug-command",
        "yes",
    ]);
    let mut rc = replica.conn();
    let info =
        |c: &mut redis::Connection| -> String { redis::cmd("INFO").arg("replication").query(c).unwrap() };
    let digest =
        |c: &mut redis::Connection| -> String { redis::cmd("DEBUG").arg("DIGEST").query(c).unwrap() };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let i = info(&mut rc);
        if i.contains("replica_state:live") {
            assert!(i.contains("master_transport:rdma"), "{i}");
            assert!(i.contains(&format!("master_port:{port}")), "{i}");
            break;
        }
        assert!(Instant::now() < deadline, "replica never caught up:\n{i}\n{}", replica.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    for i in 0..500 {
        let _: () = redis::cmd("SET").arg(format!("k{i}")).arg(i).query(&mut pc).unwrap();
    }
    let big = "x".repeat(512 << 10);
    let _: () = redis::cmd("SET").arg("big").arg(&big).query(&mut pc).unwrap();
    for _ in 0..2000 {
        let _: i64 = redis::cmd("INCR").arg("n").query(&mut pc).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while digest(&mut rc) != digest(&mut pc) {
        assert!(Instant::now() < deadline, "replica fell behind:\n{}", replica.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let n: i64 = redis::cmd("GET").arg("n").query(&mut rc).unwrap();
    assert_eq!(n, 2000);
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut pc).unwrap();
    assert!(list.lines().any(|l| l.contains("addr=rdma:") && l.contains("flags=S")), "{list}");
    drop(pc);
    drop(primary);
    let deadline = Instant::now() + Duration::from_secs(20);
    while info(&mut rc).contains("replica_state:live") {
        assert!(Instant::now() < deadline, "the replica did not notice the dead primary");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_bin(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_goblin-core"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Hang guard: every case here must stop at startup.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            return (st.code(), err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("goblin-core {args:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn bad_rdma_flags_are_usage_errors() {
    for args in [
        &["--rdma-port", "7000", "--rdma-fabric", "shm", "--rdma-ring-size", "5000"][..],
        &["--rdma-port", "7000", "--rdma-fabric", "ib"],
        &["--replica-rdma", "127.0.0.1", "0", "65536"],
        &["--replica-rdma", "127.0.0.1", "7000", "1000"],
        &["--replica-rdma", "127.0.0.1", "7000"],
        &["--replica-rdma", "h", "1", "4096", "--replica-tcp", "h", "1"],
    ] {
        let (code, err) = run_bin(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains("rdma") || err.contains("replica"), "{args:?}: {err}");
    }
}

/// The default fabric is verbs. Without cargo feature `rdma` the flag is refused naming the
/// feature (exit 2); with it, on a host without a verbs device (this one), startup stops
/// naming the missing device (exit 1), before listening.
#[test]
fn the_verbs_fabric_is_refused_clearly_where_it_cannot_run() {
    let port = free_port().to_string();
    let (code, err) = run_bin(&["--rdma-port", &port, "--port", "0"]);
    if cfg!(feature = "rdma") {
        if std::path::Path::new("/sys/class/infiniband").exists() {
            eprintln!("a verbs device may exist here: skipping the no-device check");
            return;
        }
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("no RDMA device"), "{err}");
    } else {
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("cargo feature `rdma`") && err.contains("--rdma-fabric shm"), "{err}");
    }
}
