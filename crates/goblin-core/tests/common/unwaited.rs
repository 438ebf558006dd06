//! A goblin-core started without [`super::Server::start`]'s wait for its port: its listeners
//! may open late (a replica recovering, a replay in progress), never (a refused startup), or
//! inside a network namespace. The test awaits its log, its exit, or its INFO; connections are
//! retried until it listens, and every wait fails at once, with the log, if the process exits.
//! It is killed on drop, and its log printed when the test is failing.

use super::brokers::info;
use super::{free_port, temp_path};
use std::collections::HashMap;
use std::process::{Child, ExitStatus};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Unwaited {
    /// Behind a lock so that every wait can look for an exit through `&self`.
    child: Mutex<Child>,
    host: String,
    pub port: u16,
    log: std::path::PathBuf,
}

impl Unwaited {
    /// On a free port of 127.0.0.1, with `--loglevel debug` and the DEBUG command enabled
    /// (unless `args` says otherwise).
    pub fn start(args: &[&str]) -> Unwaited {
        Unwaited::start_in(&[], "127.0.0.1", args)
    }

    /// Runs the binary behind `prefix` (e.g. `ip netns exec NAME`), listening on `host`.
    pub fn start_in(prefix: &[&str], host: &str, args: &[&str]) -> Unwaited {
        let port = free_port();
        let log = temp_path("unwaited.log");
        let bin = env!("CARGO_BIN_EXE_goblin-core");
        let (program, rest) = match prefix.split_first() {
            Some((p, rest)) => (*p, [rest, &[bin]].concat()),
            None => (bin, Vec::new()),
        };
        let cwd = temp_path("cwd");
        std::fs::create_dir_all(&cwd).unwrap();
        let child = std::process::Command::new(program)
            .current_dir(&cwd)
            .args(rest)
            .args(["--port", &port.to_string(), "--bind", host, "--loglevel", "debug"])
            .args(if args.contains(&"--enable-debug-command") {
                &[][..]
            } else {
                &["--enable-debug-command", "yes"][..]
            })
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Unwaited { child: Mutex::new(child), host: host.to_string(), port, log }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The exit status, if the process has exited.
    pub fn exited(&self) -> Option<ExitStatus> {
        self.child.lock().unwrap().try_wait().unwrap()
    }

    fn fail_if_exited(&self, waiting_for: &str) {
        if let Some(st) = self.exited() {
            panic!("the server exited ({st}) waiting for {waiting_for}:\n{}", self.log());
        }
    }

    /// Waits until the log holds `text`.
    pub fn wait_log(&self, text: &str, deadline: Instant) {
        while !self.log().contains(text) {
            self.fail_if_exited(&format!("'{text}'"));
            assert!(Instant::now() < deadline, "no '{text}': {}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the exit (its code); fails if the server listens or still runs at `deadline`.
    pub fn wait_exit(&self, deadline: Instant) -> Option<i32> {
        loop {
            if let Some(st) = self.exited() {
                return st.code();
            }
            let log = self.log();
            assert!(!log.contains("listening on"), "the server listens: {log}");
            assert!(Instant::now() < deadline, "still running: {log}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A connection, once the server listens (30 s at most).
    pub fn conn(&self) -> redis::Connection {
        self.conn_by(Instant::now() + Duration::from_secs(30))
    }

    /// A connection, once the server listens; fails at `deadline`.
    pub fn conn_by(&self, deadline: Instant) -> redis::Connection {
        loop {
            self.fail_if_exited("a connection");
            let url = format!("redis://{}:{}/", self.host, self.port);
            match redis::Client::open(url).unwrap().get_connection() {
                Ok(c) => return c,
                Err(e) => {
                    assert!(Instant::now() < deadline, "the server never listened: {e}\n{}", self.log())
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (at most `secs`) until `cond` holds for its INFO replication.
    pub fn wait_for(
        &self,
        what: &str,
        secs: u64,
        cond: impl Fn(&HashMap<String, String>) -> bool,
    ) -> HashMap<String, String> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut c = self.conn();
        loop {
            let m = info(&mut c, "replication");
            if cond(&m) {
                return m;
            }
            self.fail_if_exited(what);
            assert!(Instant::now() < deadline, "waiting for {what}: {m:?}\nlog:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn digest(&self) -> String {
        redis::cmd("DEBUG").arg("DIGEST").query(&mut self.conn()).unwrap()
    }

    pub fn dbsize(&self) -> i64 {
        redis::cmd("DBSIZE").query(&mut self.conn()).unwrap()
    }
}

impl Drop for Unwaited {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
        if std::thread::panicking() {
            eprintln!("--- server log ---\n{}", self.log());
        }
    }
}
