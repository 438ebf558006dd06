//! Test harness: start the real `goblin-core` binary (and, for side-by-side tests, Debian's
//! `redis-server`) and talk to them with real clients.
//!
//! ```ignore
//! mod common;
//! use common::{Server, RedisServer};
//!
//! let s = Server::start(&[]);                    // free port on 127.0.0.1, default flags
//! let mut con = s.conn();                        // redis::Connection
//! let pong: String = redis::cmd("PING").query(&mut con).unwrap();
//! let raw = s.raw();                             // std TcpStream for hand-written bytes
//! let r = RedisServer::start();                  // real redis-server, same API
//! ```
//!
//! - [`Server::start`] adds `--port <free> --bind 127.0.0.1` unless `args` has `--port`, and
//!   `--loglevel debug` unless `args` has `--loglevel`; it waits until the server accepts (TCP,
//!   or the Unix socket when started with `--port 0 --unixsocket PATH`) and kills it on drop.
//!   It starts again on another port only when its port was taken; any other failure to
//!   start fails the test. The server's stderr goes to a log file ([`Server::log`] reads it) so a failing test can
//!   print it. It runs in a fresh folder of its own (or the one [`Server::start_in`] names):
//!   without `--load` its dump.rdb is loaded and saved there.
//! - [`Server::stop`] sends SIGTERM and returns the exit status (clean-shutdown tests).
//! - [`RedisServer::start`] spawns `redis-server --port P --save '' --appendonly no` on
//!   127.0.0.1; it panics with a clear message if `redis-server` is not installed (the CI
//!   setup installs Debian's package).
//! - [`RedisServer::start8`] does the same with Redis 8.2 ([`redis8_binary`]).
//! - [`Server::cli`] runs `redis-cli` against the server and returns its output.
//! - [`unwaited::Unwaited`] starts the binary without that wait (a replica recovering, a
//!   startup that is to be refused, a server inside a network namespace) and awaits its log,
//!   its exit, its INFO replication or its port, failing at once if it exits.
//! - [`free_port`], [`temp_path`], [`send`], [`read_reply`] (exactly one RESP2 value from a raw
//!   stream, as bytes) and [`read_to_close`] (everything until EOF, and whether EOF came) are
//!   helpers for raw-protocol tests.
#![allow(dead_code)]

pub mod brokers;
pub mod certs;
pub mod flood;
pub mod netns;
pub mod redis_repl;
pub mod repl;
pub mod unwaited;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A port free now, from 20000-31999: below the kernel's ephemeral range (32768 and up by
/// default), where `bind(0)` picks ports and every outgoing connection takes its local port. A
/// port from there could be taken by another test's server or by a client socket while a test
/// restarts a server on it (seen in CI: "served by another process"). Each process walks the
/// range from its own starting point, so its tests never get the same port twice (until the
/// 12,000 are used up) and concurrent test processes start far apart.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(7919) % SPAN,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    loop {
        let port = (LOW + NEXT.fetch_add(1, Ordering::Relaxed) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A unique path in the temp dir (for Unix sockets and logs).
pub fn temp_path(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    test_root().join(format!("{n}-{tag}"))
}

/// The folder every path of [`temp_path`] is in: one per test process, removed when the
/// process exits, so that a run leaves nothing behind in the temporary folder (thousands of
/// runs had filled the disk). A failing test prints its server's log before that.
static TEST_ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

fn test_root() -> &'static PathBuf {
    extern "C" fn remove_test_root() {
        if let Some(root) = TEST_ROOT.get() {
            let _ = std::fs::remove_dir_all(root);
        }
    }
    TEST_ROOT.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("goblin-test-{}", std::process::id()));
        std::fs::create_dir_all(&root).expect("the test folder");
        // SAFETY: registers a function that takes no arguments and only removes files.
        unsafe { libc::atexit(remove_test_root) };
        root
    })
}

/// The `process_id` that the server behind `stream` reports in `INFO server` (0: it requires
/// authentication first).
fn served_by(mut stream: TcpStream) -> Option<u32> {
    use std::io::{Read, Write};
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n").ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&buf);
        // A server with a password answers NOAUTH before anything else: its pid cannot be
        // asked, so the caller takes it for its own child (see `wait_until_accepting`).
        if text.starts_with("-NOAUTH") {
            return Some(0);
        }
        if let Some(at) = text.find("process_id:") {
            let rest = &text[at + "process_id:".len()..];
            if let Some(end) = rest.find("\r\n") {
                return rest[..end].trim().parse().ok();
            }
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// How long a server may take to start listening (its startup replay included).
const START_LIMIT: Duration = Duration::from_secs(15);

fn wait_until_accepting(
    child: &mut Child,
    port: Option<u16>,
    unix: Option<&Path>,
    limit: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("server exited early with {status}"));
        }
        let ok = match (port, unix) {
            (Some(p), _) => match TcpStream::connect(("127.0.0.1", p)) {
                // Another test's server may hold the port this one failed to bind: only our
                // own child counts as started.
                Ok(stream) => match served_by(stream) {
                    Some(pid) if pid == child.id() || pid == 0 => true,
                    Some(_) => return Err(format!("port {p} is served by another process")),
                    None => false,
                },
                Err(_) => false,
            },
            (None, Some(path)) => std::os::unix::net::UnixStream::connect(path).is_ok(),
            (None, None) => true,
        };
        if ok {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("server did not start accepting within {} s", limit.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running `goblin-core`, killed on drop.
pub struct Server {
    /// TCP port (0 if started with `--port 0`).
    pub port: u16,
    /// The Unix socket path, if started with `--unixsocket`.
    pub unixsocket: Option<PathBuf>,
    pub log_path: PathBuf,
    child: Option<Child>,
}

impl Server {
    /// Starts the binary with `args` (see the module docs for the flags added).
    pub fn start(args: &[&str]) -> Server {
        Self::start_in(None, args)
    }

    /// Starts the binary with `args`, in working directory `cwd` (the test's own without one).
    pub fn start_in(cwd: Option<&std::path::Path>, args: &[&str]) -> Server {
        Self::start_within(cwd, args, START_LIMIT)
    }

    /// [`Server::start_in`] for a startup that may wait on purpose, up to `limit` (a journal
    /// whose partition has no leader yet).
    pub fn start_within(cwd: Option<&std::path::Path>, args: &[&str], limit: Duration) -> Server {
        let mut last_err = String::new();
        // A port picked by free_port can be taken by someone else before the server binds it:
        // retry with another one. Only that: a server that failed to start for any other reason
        // is the test's finding, and a retry that happens to succeed would hide it.
        for _ in 0..5 {
            match Self::try_start(cwd, args, limit) {
                Ok(s) => return s,
                Err(e)
                    if e.contains("Address already in use") || e.contains("is served by another process") =>
                {
                    last_err = e
                }
                Err(e) => panic!("could not start goblin-core: {e}"),
            }
        }
        panic!("could not start goblin-core: {last_err}");
    }

    fn try_start(cwd: Option<&std::path::Path>, args: &[&str], limit: Duration) -> Result<Server, String> {
        let mut full: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let port = match args.iter().position(|a| *a == "--port") {
            Some(i) => args[i + 1].parse::<u16>().expect("--port value"),
            None => {
                let p = free_port();
                full.extend(["--port".into(), p.to_string(), "--bind".into(), "127.0.0.1".into()]);
                p
            }
        };
        if !args.contains(&"--loglevel") {
            full.extend(["--loglevel".into(), "debug".into()]);
        }
        let unixsocket = args.iter().position(|a| *a == "--unixsocket").map(|i| PathBuf::from(args[i + 1]));
        let log_path = temp_path("server.log");
        let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
        let mut command = Command::new(env!("CARGO_BIN_EXE_goblin-core"));
        // A folder of its own unless the test names one: without --load the server loads and
        // saves dump.rdb in its working directory, as redis-server does, and a file one test
        // left must not become another's dataset.
        let own;
        let dir = match cwd {
            Some(dir) => dir,
            None => {
                own = temp_path("cwd");
                std::fs::create_dir_all(&own).map_err(|e| e.to_string())?;
                &own
            }
        };
        command.current_dir(dir);
        let mut child = command
            .args(&full)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("spawn goblin-core: {e}"))?;
        let tcp = if port == 0 { None } else { Some(port) };
        if let Err(e) = wait_until_accepting(&mut child, tcp, unixsocket.as_deref(), limit) {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            return Err(format!("{e}; args {full:?}; log:\n{log}"));
        }
        Ok(Server { port, unixsocket, log_path, child: Some(child) })
    }

    pub fn url(&self) -> String {
        match (&self.unixsocket, self.port) {
            (Some(p), 0) => format!("unix://{}", p.display()),
            _ => format!("redis://127.0.0.1:{}/", self.port),
        }
    }

    /// A new `redis` crate connection.
    pub fn conn(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("client");
        client.get_connection().expect("connect to goblin-core")
    }

    /// A raw TCP connection with a 10 s read timeout, for hand-written protocol bytes.
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }

    /// Runs `redis-cli -p <port> args...` (or `-s <socket>` for a Unix-only server) and
    /// returns its stdout; panics if redis-cli fails to run or exits non-zero.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut cmd = Command::new("redis-cli");
        match (&self.unixsocket, self.port) {
            (Some(p), 0) => cmd.arg("-s").arg(p),
            _ => cmd.arg("-p").arg(self.port.to_string()),
        };
        let out = cmd.args(args).output().expect("redis-cli is installed");
        assert!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// The server's stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Sends `sig` to the server.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.pid() as i32, sig);
        }
    }

    /// SIGTERM, then waits (at most 10 s) for the exit status.
    pub fn stop(&mut self) -> ExitStatus {
        self.signal(15);
        self.wait_exit(Duration::from_secs(10)).expect("server did not exit within 10 s of SIGTERM")
    }

    /// Waits for the process to exit on its own (e.g. after SHUTDOWN).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                self.child = None;
                return Some(st);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Resident set size of the server process in bytes (from /proc).
    pub fn rss(&self) -> u64 {
        let statm = std::fs::read_to_string(format!("/proc/{}/statm", self.pid())).unwrap_or_default();
        let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
        pages * 4096
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- goblin-core log ({}) ---\n{}", self.log_path.display(), self.log());
        } else {
            let _ = std::fs::remove_file(&self.log_path);
        }
    }
}

/// A running Debian `redis-server` for side-by-side comparisons, killed on drop.
pub struct RedisServer {
    pub port: u16,
    child: Child,
}

impl RedisServer {
    /// The process (to stop and continue it: a replica that is alive but silent).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// Starts redis-server with `extra` arguments after the defaults (no persistence, and
    /// a fresh working directory of its own: an RDB file a primary writes for a full sync must
    /// not be loaded by the next redis-server started).
    pub fn start_with(extra: &[&str]) -> RedisServer {
        Self::start_binary(Path::new("redis-server"), extra)
    }

    /// A Redis 8 server (redis-server 8.2.3, `scripts/redis8.sh`), for the behaviour Redis
    /// changed after Debian's 7.0 and the commands it added since.
    pub fn start8() -> RedisServer {
        Self::start_binary(&redis8_binary(), &[])
    }

    pub fn start8_with(extra: &[&str]) -> RedisServer {
        Self::start_binary(&redis8_binary(), extra)
    }

    fn start_binary(binary: &Path, extra: &[&str]) -> RedisServer {
        let mut last_err = String::new();
        let dir = temp_path("redis-dir");
        std::fs::create_dir_all(&dir).expect("a directory for redis-server");
        for _ in 0..5 {
            let port = free_port();
            let mut child = match Command::new(binary)
                .args([
                    "--dir",
                    dir.to_str().expect("a UTF-8 temp path"),
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .args(extra)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
            {
                Ok(c) => c,
                Err(e) => {
                    panic!("{} is required for this test (apt-get install redis-server; scripts/redis8.sh for Redis 8): {e}", binary.display())
                }
            };
            match wait_until_accepting(&mut child, Some(port), None, START_LIMIT) {
                Ok(()) => return RedisServer { port, child },
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    last_err = e;
                }
            }
        }
        panic!("could not start redis-server: {last_err}");
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap().get_connection().unwrap()
    }

    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }
}

/// The Redis 8 binary: `$GOBLIN_REDIS8` when set, else what `scripts/redis8.sh path` fetches
/// into the cache (once per test process). A missing one fails the test that needs it.
pub fn redis8_binary() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("GOBLIN_REDIS8") {
            return PathBuf::from(p);
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/redis8.sh");
        let out = Command::new("bash").arg(&script).arg("path").output().expect("run scripts/redis8.sh");
        assert!(
            out.status.success(),
            "scripts/redis8.sh could not provide Redis 8 (pip and PyPI are needed): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
    .clone()
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// INFO's connected_clients, asked on `con`. Ask every reading of a test on one connection:
/// the close of an earlier connection (the harness's readiness probe, an earlier reading's)
/// may not have been processed by the server yet, and would be counted.
pub fn connected_clients(con: &mut redis::Connection) -> u64 {
    brokers::info(con, "clients")["connected_clients"].parse().unwrap()
}

/// Waits up to 10 s until `connected_clients` asked on `con` is `n`; `what` names the wait
/// in the failure.
pub fn wait_connected_clients(con: &mut redis::Connection, n: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = connected_clients(con);
        if now == n {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {now} clients, not {n}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads exactly one RESP2 value from `s` and returns its raw bytes (blocking, using the
/// stream's read timeout). Panics on timeout or EOF before a whole value arrived.
pub fn read_reply(s: &mut impl Read) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    // Byte-at-a-time keeps the stream positioned exactly after this value.
    loop {
        if buf.last() == Some(&b'\n') {
            if let Ok(Some((_, n))) = resp::decode_frame(&buf) {
                assert_eq!(n, buf.len());
                return buf;
            }
        }
        match s.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            Ok(_) => panic!("EOF after {:?}", String::from_utf8_lossy(&buf)),
            Err(e) => panic!("read failed after {:?}: {e}", String::from_utf8_lossy(&buf)),
        }
    }
}

/// Reads until EOF (or the read timeout) and returns everything.
pub fn read_to_close(s: &mut TcpStream) -> (Vec<u8>, bool) {
    let mut all = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return (all, true),
            Ok(n) => all.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (all, true),
            Err(_) => return (all, false),
        }
    }
}

/// Sends raw bytes.
pub fn send(s: &mut TcpStream, bytes: &[u8]) {
    s.write_all(bytes).expect("write");
}

/// A raw RESP connection for comparing replies frame for frame: sends each command as an array
/// of bulk strings and reads one decoded frame at a time, in either protocol (`open` with
/// `proto` 3 sends `HELLO 3` first).
pub struct RespConn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl RespConn {
    pub fn open(port: u16, proto: u8) -> RespConn {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        RespConn::over(stream, proto)
    }

    /// Wraps a connected stream (e.g. `Server::raw`).
    pub fn over(stream: TcpStream, proto: u8) -> RespConn {
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        stream.set_nodelay(true).unwrap();
        let mut c = RespConn { stream, buf: Vec::new() };
        if proto == 3 {
            match c.call(&["HELLO", "3"]) {
                resp::Frame::Map(_) => {}
                other => panic!("HELLO 3 answered {other:?}"),
            }
        }
        c
    }

    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        let mut req = Vec::new();
        resp::reply::bulk_array(&mut req, args);
        self.stream.write_all(&req).unwrap();
    }

    pub fn read(&mut self) -> resp::Frame {
        loop {
            if let Some((f, used)) = resp::decode_frame(&self.buf).unwrap() {
                self.buf.drain(..used);
                return f;
            }
            let mut chunk = [0u8; 65536];
            let n = self.stream.read(&mut chunk).expect("a reply before the read deadline");
            assert!(n > 0, "server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    pub fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> resp::Frame {
        self.send(args);
        self.read()
    }

    /// The connection's stream, to write or read raw bytes (nothing may be left unread).
    pub fn into_stream(self) -> TcpStream {
        assert!(self.buf.is_empty(), "unread bytes: {:?}", String::from_utf8_lossy(&self.buf));
        self.stream
    }
}

/// Runs goblin-core with `args` until it exits by itself (a startup that must fail): its exit
/// code and its log. Panics after 60 s.
pub fn run_to_exit(args: &[&str]) -> (Option<i32>, String) {
    let log = temp_path("exit.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_goblin-core"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "goblin-core did not exit within 60 s: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code(), std::fs::read_to_string(&log).unwrap_or_default())
}
