//! Process and connection lifecycle: CLI errors, listeners, maxclients, QUIT, SHUTDOWN,
//! SIGTERM/SIGINT.

mod common;

use common::{read_reply, read_to_close, send, temp_path, Server};
use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_goblin-core"))
}

#[test]
fn unknown_or_invalid_flags_exit_nonzero_with_a_message() {
    for args in [
        &["--no-such-flag"][..],
        &["--port", "notanumber"],
        &["--port", "70000"],
        &["--unixsocketperm", "999"],
        &["--maxclients", "0"],
        &["--loglevel", "info=bogus=x"],
    ] {
        let out = bin().args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.trim().is_empty(), "{args:?} should explain itself");
    }
    let out = bin().arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--unixsocketperm"));
}

#[test]
fn port_in_use_is_an_error_exit() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let out = bin().args(["--port", &port, "--bind", "127.0.0.1"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("could not listen"));
}

#[test]
fn sigterm_exits_zero_and_removes_the_unix_socket() {
    let sock = temp_path("sigterm.sock");
    let sock_s = sock.to_str().unwrap().to_string();
    let mut s = Server::start(&["--unixsocket", &sock_s, "--unixsocketperm", "700"]);
    assert!(sock.exists());
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let _con = s.conn(); // an open client must not delay shutdown
    let status = s.stop();
    assert!(status.success(), "exit status {status:?}");
    assert!(!sock.exists(), "socket file must be removed on shutdown");
}

#[test]
fn sigint_exits_zero() {
    let mut s = Server::start(&[]);
    s.signal(2);
    let st = s.wait_exit(Duration::from_secs(10)).expect("exit after SIGINT");
    assert!(st.success());
}

#[test]
fn unix_socket_only_with_perms_serves_clients() {
    let sock = temp_path("only.sock");
    let sock_s = sock.to_str().unwrap().to_string();
    let s = Server::start(&["--port", "0", "--unixsocket", &sock_s, "--unixsocketperm", "770"]);
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o770);
    let mut con = s.conn();
    let _: () = redis::cmd("SET").arg("u").arg("1").query(&mut con).unwrap();
    let v: i64 = redis::cmd("GET").arg("u").query(&mut con).unwrap();
    assert_eq!(v, 1);
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
    assert!(list.contains("flags=U"), "{list}");
    // redis-cli over the socket too.
    let out = Command::new("redis-cli").args(["-s", &sock_s, "ping"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "PONG");
}

#[test]
fn maxclients_rejects_with_redis_error_and_recovers() {
    let s = Server::start(&["--maxclients", "2"]);
    let mut a = s.conn();
    let mut b = s.raw();
    send(&mut b, b"PING\r\n");
    assert_eq!(read_reply(&mut b), b"+PONG\r\n");
    let mut c = s.raw();
    let (got, closed) = read_to_close(&mut c);
    assert_eq!(got, b"-ERR max number of clients reached\r\n");
    assert!(closed);
    let info: String = redis::cmd("INFO").arg("stats").query(&mut a).unwrap();
    assert!(info.contains("rejected_connections:1\r\n"), "{info}");
    drop(b);
    // A slot frees up once a client leaves.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let mut d = s.raw();
        send(&mut d, b"PING\r\n");
        let (got, _) = {
            d.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
            read_to_close(&mut d)
        };
        if got.starts_with(b"+PONG") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no slot freed: {:?}", String::from_utf8_lossy(&got));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The listen backlog `ss` reports for the socket listening on 127.0.0.1:`port` (its Send-Q).
fn listen_backlog(port: u16) -> u32 {
    let out =
        Command::new("ss").args(["-ltnH", &format!("sport = :{port}")]).output().expect("ss (iproute2)");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next().unwrap_or_else(|| panic!("no listener on {port}: {text:?}"));
    line.split_whitespace().nth(2).and_then(|q| q.parse().ok()).unwrap_or_else(|| panic!("{line}"))
}

/// The listeners take Redis's `tcp-backlog` (511 by default, not the kernel's 128, which a
/// pool of a few hundred clients connecting at once overflows: the overflowing ones waited a
/// second for their SYN's retransmission), and CONFIG GET reports it.
#[test]
fn listeners_take_the_tcp_backlog() {
    let s = Server::start(&[]);
    assert_eq!(listen_backlog(s.port), 511);
    let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("tcp-backlog").query(&mut s.conn()).unwrap();
    assert_eq!(got, ["tcp-backlog", "511"]);
    let s = Server::start(&["--tcp-backlog", "1000"]);
    assert_eq!(listen_backlog(s.port), 1000);
    // Hundreds of clients connecting at once, each blocking at once: all are served.
    let mut clients: Vec<_> = (0..600)
        .map(|i| {
            let mut c = s.raw();
            send(&mut c, format!("BLPOP q{i} 0\r\n").as_bytes());
            c
        })
        .collect();
    let mut con = s.conn();
    for i in 0..600 {
        let _: i64 = redis::cmd("LPUSH").arg(format!("q{i}")).arg("v").query(&mut con).unwrap();
    }
    for (i, c) in clients.iter_mut().enumerate() {
        assert_eq!(
            read_reply(c),
            format!("*2\r\n${}\r\nq{i}\r\n$1\r\nv\r\n", format!("q{i}").len()).as_bytes()
        );
    }
}

#[test]
fn quit_replies_ok_then_closes_after_earlier_replies() {
    let s = Server::start(&[]);
    let mut raw = s.raw();
    send(&mut raw, b"PING\r\nQUIT\r\nPING\r\n");
    let (got, closed) = read_to_close(&mut raw);
    assert_eq!(got, b"+PONG\r\n+OK\r\n");
    assert!(closed);
}

#[test]
fn shutdown_command_stops_the_server_cleanly() {
    let mut s = Server::start(&[]);
    let mut raw = s.raw();
    send(&mut raw, b"SHUTDOWN NOSAVE\r\n");
    let (got, closed) = read_to_close(&mut raw);
    assert!(got.is_empty() && closed, "{:?}", String::from_utf8_lossy(&got));
    let st = s.wait_exit(Duration::from_secs(10)).expect("exit after SHUTDOWN");
    assert!(st.success());
}

#[test]
fn several_bind_addresses() {
    let port = common::free_port().to_string();
    let s = Server::start(&["--port", &port, "--bind", "127.0.0.1", "::1"]);
    let mut con = s.conn();
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    // ::1 may be unavailable in some sandboxes; when it is there it must answer too.
    if let Ok(mut v6) = std::net::TcpStream::connect(("::1", s.port)) {
        v6.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        send(&mut v6, b"PING\r\n");
        assert_eq!(read_reply(&mut v6), b"+PONG\r\n");
    }
}

#[test]
fn redis_cli_talks_to_the_server() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let cli = |args: &[&str]| s.cli(args);
    assert_eq!(cli(&["ping"]).trim(), "PONG");
    assert_eq!(cli(&["set", "cli", "hello"]).trim(), "OK");
    assert_eq!(cli(&["get", "cli"]).trim(), "hello");
    let info = cli(&["info", "server"]);
    assert!(info.contains("redis_version:7.4.0"), "{info}");
    assert!(info.contains(&format!("tcp_port:{port}")), "{info}");
    // Non-interactive stdin mode reads commands line by line.
    let mut child = Command::new("redis-cli")
        .args(["-p", &port])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"incr n\nincr n\nget n\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n2\n2\n");
}

/// Out of file descriptors: pending connections wait in the backlog and are accepted once
/// descriptors free up (the listener is edge-triggered, so this needs the cron's retry).
#[test]
fn accepts_resume_after_running_out_of_descriptors() {
    use std::io::{Read, Write};
    let port = common::free_port();
    let mut child = Command::new("prlimit")
        .args(["--nofile=40:40", env!("CARGO_BIN_EXE_goblin-core"), "--port", &port.to_string()])
        .args(["--bind", "127.0.0.1", "--loglevel", "error"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("prlimit (util-linux) runs the server with a small descriptor limit");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    // More connections than descriptors: the kernel completes them all (backlog), the server
    // can only accept some.
    let mut conns: Vec<std::net::TcpStream> =
        (0..60).map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    for c in &mut conns {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    }
    let mut last = conns.pop().unwrap();
    last.write_all(b"PING\r\n").unwrap();
    // Free descriptors by closing the early connections; the last one must then be served.
    conns.truncate(10);
    let mut buf = [0u8; 7];
    let got = last.read_exact(&mut buf);
    let _ = child.kill();
    let _ = child.wait();
    got.expect("reply after descriptors were freed");
    assert_eq!(&buf, b"+PONG\r\n");
}

/// `busy_poll_spins` from `INFO stats`, asked on `s`: how many waits of the server's loop
/// polled without blocking first.
fn busy_poll_spins(s: &mut std::net::TcpStream) -> u64 {
    send(s, b"*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n");
    let reply = read_reply(s);
    let text = String::from_utf8_lossy(&reply);
    let line = text.lines().find_map(|l| l.strip_prefix("busy_poll_spins:"));
    line.and_then(|v| v.trim().parse().ok()).unwrap_or_else(|| panic!("no busy_poll_spins in {text}"))
}

/// Busy polling only spins while requests arrive densely: a burst from 50 clients opens the
/// window (the server spins), and afterwards a client that sends one PING every 5 ms must not
/// keep it open. Counted by the server itself (INFO `busy_poll_spins`, one per wait that
/// spun), not by time: the window may be open for the first wait after the burst, then every
/// wait ends with one connection ready and closes it, so the count grows by at most one over
/// the 200 slow PINGs (a spin after every request would add about 200).
#[test]
fn busy_poll_stops_when_requests_thin_out() {
    let server = Server::start(&["--busy-poll-us", "1000"]);
    let mut slow = server.raw();
    let at_start = busy_poll_spins(&mut slow);
    let burst: Vec<_> = (0..50)
        .map(|_| {
            let port = server.port;
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                for _ in 0..200 {
                    send(&mut s, b"*1\r\n$4\r\nPING\r\n");
                    assert_eq!(read_reply(&mut s), b"+PONG\r\n");
                }
                s
            })
        })
        .collect();
    // The burst's connections stay open (idle) until the end: closing them would be events.
    let conns: Vec<_> = burst.into_iter().map(|h| h.join().unwrap()).collect();
    let after_burst = busy_poll_spins(&mut slow);
    assert!(
        after_burst > at_start,
        "50 clients at once should open the spin window ({at_start} -> {after_burst})"
    );
    for _ in 0..200 {
        send(&mut slow, b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(read_reply(&mut slow), b"+PONG\r\n");
        std::thread::sleep(Duration::from_millis(5));
    }
    let after_slow = busy_poll_spins(&mut slow);
    println!("busy_poll_spins: {at_start} at start, {after_burst} after the burst, {after_slow} at the end");
    assert!(
        after_slow - after_burst <= 2,
        "the server kept spinning for one PING every 5 ms: {} spinning waits over 200 requests",
        after_slow - after_burst
    );
    drop(conns);
}

/// CONFIG GET's value of one parameter.
fn config_get(con: &mut redis::Connection, name: &str) -> String {
    let v: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(con).unwrap();
    assert_eq!(v.len(), 2, "{name}: {v:?}");
    v[1].clone()
}

#[test]
fn dir_and_dbfilename_say_where_rdb_files_go() {
    let (a, b) = (temp_path("dir-a"), temp_path("dir-b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    // Redis 7 protects dir and dbfilename from CONFIG SET unless told otherwise.
    let plain = Server::start(&[]);
    let mut con = plain.conn();
    assert_eq!(config_get(&mut con, "enable-protected-configs"), "no");
    for name in ["dir", "dbfilename"] {
        let err = redis::cmd("CONFIG").arg("SET").arg(name).arg("x").query::<()>(&mut con).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("ResponseError: CONFIG SET failed (possibly related to argument '{name}') - can't set protected config")
        );
    }
    let s = Server::start(&[
        "--dir",
        a.to_str().unwrap(),
        "--dbfilename",
        "data.rdb",
        "--enable-protected-configs",
        "yes",
    ]);
    let mut con = s.conn();
    assert_eq!(config_get(&mut con, "dir"), a.to_str().unwrap());
    assert_eq!(config_get(&mut con, "dbfilename"), "data.rdb");
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    assert!(a.join("data.rdb").exists(), "SAVE writes the RDB file into --dir");
    let _: () = redis::cmd("CONFIG").arg("SET").arg("dir").arg(b.to_str().unwrap()).query(&mut con).unwrap();
    assert_eq!(config_get(&mut con, "dir"), b.to_str().unwrap());
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    assert!(b.join("data.rdb").exists(), "and into the directory CONFIG SET dir names");
    let missing = a.join("no-such-dir");
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("dir")
        .arg(missing.to_str().unwrap())
        .query::<()>(&mut con)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "ResponseError: CONFIG SET failed (possibly related to argument 'dir') - No such file or directory"
    );
    let file = a.join("data.rdb");
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("dir")
        .arg(file.to_str().unwrap())
        .query::<()>(&mut con)
        .unwrap_err();
    assert!(err.to_string().ends_with("- Not a directory"), "{err}");
    assert_eq!(config_get(&mut con, "dir"), b.to_str().unwrap(), "a refused dir changes nothing");
    // A path as --dbfilename, or a --dir that does not exist, stops the startup.
    for args in [&["--dbfilename", "sub/data.rdb"][..], &["--dir", missing.to_str().unwrap()]] {
        let out = bin().args(args).args(["--port", "0"]).output().unwrap();
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("dbfilename can't be a path") || err.contains("can't chdir"), "{args:?}: {err}");
    }
}

#[test]
fn daemonize_pidfile_and_logfile() {
    let dir = temp_path("daemon");
    std::fs::create_dir_all(&dir).unwrap();
    let port = common::free_port();
    // Relative paths are inside --dir.
    let status = bin()
        .args([
            "--daemonize",
            "yes",
            "--dir",
            dir.to_str().unwrap(),
            "--pidfile",
            "g.pid",
            "--logfile",
            "g.log",
        ])
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .status()
        .unwrap();
    assert!(status.success(), "the launching process exits at once, with 0");
    let (pidfile, logfile) = (dir.join("g.pid"), dir.join("g.log"));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut con = loop {
        if let Ok(c) = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection() {
            break c;
        }
        assert!(std::time::Instant::now() < deadline, "the daemon never listened");
        std::thread::sleep(Duration::from_millis(50));
    };
    let pid: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    let info: String = redis::cmd("INFO").arg("server").query(&mut con).unwrap();
    assert!(info.contains(&format!("process_id:{pid}\r\n")), "the pid file names the server: {info}");
    assert_eq!(config_get(&mut con, "daemonize"), "yes");
    assert_eq!(config_get(&mut con, "pidfile"), "g.pid");
    assert_eq!(config_get(&mut con, "logfile"), "g.log");
    let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut con);
    // SAFETY: kill(pid, 0) only asks whether the process is still there.
    while unsafe { libc::kill(pid as i32, 0) } == 0 {
        assert!(std::time::Instant::now() < deadline, "the daemon did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!pidfile.exists(), "the pid file goes with the server");
    let log = std::fs::read_to_string(&logfile).unwrap();
    assert!(log.contains("Ready to accept connections") && log.contains("bye bye"), "{log}");
}

/// `--supervised systemd`, as Debian's `Type=notify` redis-server unit starts the server:
/// once it accepts connections it sends READY=1 to the datagram socket `NOTIFY_SOCKET` names
/// (systemd kills a notify service that never does), and STOPPING=1 when SIGTERM stops it.
/// Without `--supervised` (or with `no`) nothing is sent.
#[test]
fn supervised_systemd_notifies_ready_then_stopping() {
    let dir = temp_path("notify");
    std::fs::create_dir_all(&dir).unwrap();
    let socket_path = dir.join("notify.sock");
    let listener = std::os::unix::net::UnixDatagram::bind(&socket_path).unwrap();
    listener.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let port = common::free_port();
    let mut child = bin()
        .args(["--port", &port.to_string(), "--save", "", "--supervised", "systemd", "--daemonize", "no"])
        .env("NOTIFY_SOCKET", &socket_path)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 512];
    let n = listener.recv(&mut buf).expect("READY=1 within 30 s");
    let first = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(first.lines().any(|l| l == "READY=1"), "{first:?}");
    // Ready means ready: a client is served at once.
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("listening when READY=1 came");
    send(&mut c, b"PING\r\n");
    assert_eq!(read_reply(&mut c), b"+PONG\r\n");
    let mut rc = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap().get_connection().unwrap();
    let server: String = redis::cmd("INFO").arg("server").query(&mut rc).unwrap();
    assert!(server.contains("process_supervised:systemd\r\n"), "{server}");
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let n = listener.recv(&mut buf).expect("STOPPING=1 at SIGTERM");
    assert_eq!(String::from_utf8_lossy(&buf[..n]), "STOPPING=1\n");
    assert!(child.wait().unwrap().success());
    // Not supervised: nothing comes.
    listener.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let s = Server::start(&["--save", ""]);
    let mut c = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    send(&mut c, b"PING\r\n");
    assert_eq!(read_reply(&mut c), b"+PONG\r\n");
    assert!(listener.recv(&mut buf).is_err(), "an unsupervised server sent a notification");
    let server: String = redis::cmd("INFO").arg("server").query(&mut s.conn()).unwrap();
    assert!(server.contains("process_supervised:no\r\n"), "{server}");
}
