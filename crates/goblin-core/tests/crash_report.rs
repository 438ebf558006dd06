//! The crash report (crash.rs): a fatal signal or a panic leaves the signal or the panic, a
//! stack trace and the running command in the log, and the process still dies as it would
//! have without the report.

mod common;

use common::Server;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

fn debug(s: &Server, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let mut con = s.conn();
    let mut cmd = redis::cmd("DEBUG");
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(&mut con)
}

/// Waits for the log to hold the report's last line (a report is written after the client
/// sees its connection close, and before the process is gone).
fn report(s: &mut Server) -> (std::process::ExitStatus, String) {
    let status = s.wait_exit(Duration::from_secs(30)).expect("the server must die");
    let log = s.log();
    (status, log)
}

fn section<'a>(log: &'a str, from: &str, to: &str) -> &'a str {
    let start = log.find(from).unwrap_or_else(|| panic!("no {from:?} in the log:\n{log}"));
    let end = log[start..].find(to).unwrap_or_else(|| panic!("no {to:?} after {from:?}:\n{log}")) + start;
    &log[start..end]
}

#[test]
fn a_memory_fault_is_reported_with_the_stack_and_the_command_then_kills() {
    let mut s = Server::start(&["--enable-debug-command", "yes"]);
    assert!(debug(&s, &["SEGFAULT"]).is_err(), "the connection closes with the process");
    let (status, log) = report(&mut s);
    assert_eq!(status.signal(), Some(libc::SIGSEGV), "dies of the fault itself: {status:?}");
    assert_eq!(log.matches("BUG REPORT START").count(), 1, "{log}");
    assert!(log.contains("crashed by signal: 11 (SIGSEGV)"), "{log}");
    assert!(log.contains("Accessing address: 0x"), "{log}");
    assert!(log.contains("(the server thread)"), "{log}");
    let trace = section(&log, "------ STACK TRACE ------", "------ STACK TRACE DONE ------");
    // The frames name the code that ran: DEBUG's handler, under the command dispatch.
    assert!(trace.contains("goblin_core::commands::debug::debug"), "{trace}");
    assert!(trace.contains("goblin_core::dispatch"), "{trace}");
    let client = section(&log, "CURRENT CLIENT INFO", "BUG REPORT END");
    assert!(client.contains("argc=2"), "{client}");
    assert!(client.contains("argv[0]: 'DEBUG'"), "{client}");
    assert!(client.contains("argv[1]: 'SEGFAULT'"), "{client}");
}

#[test]
fn hide_user_data_from_log_keeps_only_the_command_name() {
    let mut s = Server::start(&["--enable-debug-command", "yes"]);
    let mut con = s.conn();
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("hide-user-data-from-log").arg("yes").query(&mut con).unwrap();
    let got: Vec<String> =
        redis::cmd("CONFIG").arg("GET").arg("hide-user-data-from-log").query(&mut con).unwrap();
    assert_eq!(got, ["hide-user-data-from-log", "yes"]);
    let _ = debug(&s, &["SEGFAULT"]);
    let (status, log) = report(&mut s);
    assert_eq!(status.signal(), Some(libc::SIGSEGV));
    let client = section(&log, "CURRENT CLIENT INFO", "BUG REPORT END");
    assert!(client.contains("argv[0]: 'DEBUG'"), "{client}");
    assert!(client.contains("argv[1]: *redacted*"), "{client}");
    assert!(!client.contains("SEGFAULT"), "{client}");
}

#[test]
fn sigabrt_from_outside_names_the_sender_and_the_running_command() {
    let mut s = Server::start(&["--enable-debug-command", "yes"]);
    let port = s.port;
    // The server thread is inside DEBUG SLEEP when the signal comes.
    let sleeper = std::thread::spawn(move || {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut con = client.get_connection().unwrap();
        redis::cmd("DEBUG").arg("SLEEP").arg("10").query::<()>(&mut con)
    });
    wait_sleeping(&s);
    s.signal(libc::SIGABRT);
    let (status, log) = report(&mut s);
    assert!(sleeper.join().unwrap().is_err());
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}");
    assert!(log.contains("crashed by signal: 6 (SIGABRT)"), "{log}");
    assert!(log.contains(&format!("Killed by PID: {}", std::process::id())), "{log}");
    let client = section(&log, "CURRENT CLIENT INFO", "BUG REPORT END");
    assert!(client.contains("argv[1]: 'SLEEP'") && client.contains("argv[2]: '10'"), "{client}");
}

#[test]
fn a_failed_assertion_is_reported_then_aborts_or_exits() {
    let mut s = Server::start(&["--enable-debug-command", "yes"]);
    let _ = debug(&s, &["ASSERT"]);
    let (status, log) = report(&mut s);
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}");
    assert!(log.contains("=== ASSERTION FAILED ==="), "{log}");
    assert!(log.contains("'1 == 2' is not true"), "{log}");
    assert_eq!(log.matches("BUG REPORT START").count(), 1, "the abort adds no second report: {log}");

    // use-exit-on-panic: the same report, then exit(1).
    let mut s = Server::start(&["--enable-debug-command", "yes", "--use-exit-on-panic", "yes"]);
    let _ = debug(&s, &["PANIC"]);
    let (status, log) = report(&mut s);
    assert_eq!(status.code(), Some(1), "{status:?}");
    assert!(log.contains("DEBUG PANIC called at Unix time"), "{log}");
    assert!(log.contains("STACK TRACE DONE"), "{log}");
}

#[test]
fn crash_log_enabled_no_leaves_the_report_out() {
    let mut s = Server::start(&["--enable-debug-command", "yes", "--crash-log-enabled", "no"]);
    let mut con = s.conn();
    let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("crash-log-enabled").query(&mut con).unwrap();
    assert_eq!(got, ["crash-log-enabled", "no"]);
    let _ = debug(&s, &["SEGFAULT"]);
    let (status, log) = report(&mut s);
    assert_eq!(status.signal(), Some(libc::SIGSEGV));
    assert!(!log.contains("BUG REPORT"), "{log}");
}

#[test]
fn a_panic_in_a_read_is_reported_and_the_server_goes_on() {
    let s = Server::start(&["--enable-debug-command", "yes"]);
    let mut con = s.conn();
    let err = redis::cmd("DEBUG").arg("CRASH-READ").arg("somekey").query::<()>(&mut con).unwrap_err();
    assert!(err.to_string().contains("internal error"), "{err}");
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    let log = s.log();
    assert!(log.contains("panicked at") && log.contains("DEBUG CRASH-READ: a deliberate crash"), "{log}");
    let client = section(&log, "CURRENT CLIENT INFO", "BUG REPORT END");
    assert!(client.contains("argv[2]: 'somekey'"), "{client}");
    // A second panic gets a report of its own.
    let _ = redis::cmd("DEBUG").arg("CRASH-READ").arg("other").query::<()>(&mut con).unwrap_err();
    assert_eq!(s.log().matches("BUG REPORT START").count(), 2, "{}", s.log());
}

#[test]
fn the_report_goes_to_the_logfile() {
    let dir = common::temp_path("crash-logfile");
    std::fs::create_dir_all(&dir).unwrap();
    let logfile = dir.join("server.log");
    let mut s = Server::start(&["--enable-debug-command", "yes", "--logfile", logfile.to_str().unwrap()]);
    let _ = debug(&s, &["SEGFAULT"]);
    let (status, stderr) = report(&mut s);
    assert_eq!(status.signal(), Some(libc::SIGSEGV));
    let log = std::fs::read_to_string(&logfile).unwrap();
    assert!(log.contains("Ready to accept connections"), "{log}");
    assert!(log.contains("crashed by signal: 11"), "{log}");
    assert!(!stderr.contains("BUG REPORT"), "{stderr}");
}

#[test]
fn crash_commands_need_the_debug_command_enabled() {
    let s = Server::start(&[]);
    for sub in ["SEGFAULT", "PANIC", "ASSERT"] {
        let err = debug(&s, &[sub]).unwrap_err();
        assert!(err.to_string().contains("DEBUG command not allowed"), "{sub}: {err}");
    }
    let mut con = s.conn();
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("crash-log-enabled")
        .arg("maybe")
        .query::<()>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("argument must be 'yes' or 'no'"), "{err}");
}

/// Waits until the server thread sleeps inside DEBUG SLEEP (its state, /proc's wchan, shows
/// a sleep).
fn wait_sleeping(s: &Server) {
    let pid = s.pid();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
        if wchan.contains("nanosleep") || wchan.contains("hrtimer") {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "DEBUG SLEEP never started (wchan {wchan:?})");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `what` in the log (the SIGALRM report is written by another thread, after the
/// handler returned).
fn wait_log(s: &Server, what: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let log = s.log();
        if log.contains(what) {
            return log;
        }
        assert!(std::time::Instant::now() < deadline, "no {what:?} in the log:\n{log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGALRM from outside is not fatal: the server thread's stack (the sleeping DEBUG under the
/// dispatch) and its command are logged, the command finishes, and the server goes on, as
/// Redis does.
#[test]
fn sigalrm_logs_the_server_threads_stack_and_the_server_goes_on() {
    let s = Server::start(&["--enable-debug-command", "yes"]);
    let port = s.port;
    let sleeper = std::thread::spawn(move || {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut con = client.get_connection().unwrap();
        redis::cmd("DEBUG").arg("SLEEP").arg("1").query::<redis::Value>(&mut con)
    });
    wait_sleeping(&s);
    s.signal(libc::SIGALRM);
    let log = wait_log(&s, "------ STACK TRACE DONE ------");
    assert_eq!(sleeper.join().unwrap().unwrap(), redis::Value::Okay, "the command finishes");
    assert!(log.contains("Received SIGALRM"), "{log}");
    assert!(!log.contains("BUG REPORT"), "not a crash: {log}");
    let trace = section(&log, "------ STACK TRACE ------", "------ STACK TRACE DONE ------");
    assert!(trace.contains("(the server thread)"), "{trace}");
    assert!(trace.contains("goblin_core::commands::debug::debug"), "{trace}");
    assert!(trace.contains("goblin_core::dispatch"), "{trace}");
    let log = wait_log(&s, "argv[2]: '1'");
    let client = &log[log.find("CURRENT CLIENT INFO").expect("the client section")..];
    assert!(client.contains("argv[0]: 'DEBUG'") && client.contains("argv[1]: 'SLEEP'"), "{client}");
    assert_eq!(redis::cmd("PING").query::<String>(&mut s.conn()).unwrap(), "PONG");
}

/// `watchdog-period` (Redis's hidden setting): a server thread that stays away from its event
/// loop longer than the period is reported, as the SIGALRM above, under Redis's "WATCHDOG
/// TIMER EXPIRED"; 0 turns it off again.
#[test]
fn the_watchdog_reports_a_server_thread_that_does_not_come_back() {
    let s = Server::start(&["--enable-debug-command", "yes"]);
    let mut con = s.conn();
    let _: () = redis::cmd("CONFIG").arg("SET").arg("watchdog-period").arg("200").query(&mut con).unwrap();
    let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("watchdog-period").query(&mut con).unwrap();
    assert_eq!(got, ["watchdog-period", "200"]);
    // Hidden, as in Redis: not in CONFIG GET *.
    let all: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("*").query(&mut con).unwrap();
    assert!(!all.iter().any(|n| n == "watchdog-period"));
    // Idle, the cron keeps the timer from going off.
    std::thread::sleep(Duration::from_millis(700));
    assert!(!s.log().contains("WATCHDOG"), "{}", s.log());
    // The command's arguments are user data: hidden as in the crash report.
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("hide-user-data-from-log").arg("yes").query(&mut con).unwrap();
    let _: () = redis::cmd("DEBUG").arg("SLEEP").arg("1").query(&mut con).unwrap();
    let log = wait_log(&s, "argv[2]: *redacted*");
    assert_eq!(log.matches("--- WATCHDOG TIMER EXPIRED ---").count(), 1, "{log}");
    let trace = section(&log, "------ STACK TRACE ------", "------ STACK TRACE DONE ------");
    assert!(trace.contains("goblin_core::commands::debug::debug"), "{trace}");
    assert!(log.contains("argv[0]: 'DEBUG'") && log.contains("argv[1]: *redacted*"), "{log}");
    let _: () = redis::cmd("CONFIG").arg("SET").arg("watchdog-period").arg("0").query(&mut con).unwrap();
    let _: () = redis::cmd("DEBUG").arg("SLEEP").arg("0.6").query(&mut con).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.log().matches("WATCHDOG TIMER EXPIRED").count(), 1, "off again: {}", s.log());
    assert_eq!(redis::cmd("PING").query::<String>(&mut con).unwrap(), "PONG");
}
