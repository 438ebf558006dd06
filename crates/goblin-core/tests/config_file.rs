//! redis.conf files: `goblin-core /path/redis.conf [--option value ...]` as redis-server
//! takes them (Debian's stock file, quoting, include, the file's flags against the command
//! line's, runtime settings, Redis options on the command line), the fatal errors, and
//! CONFIG REWRITE.

mod common;

use common::{free_port, run_to_exit, temp_path, Server};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn config_get(con: &mut redis::Connection, name: &str) -> String {
    let pair: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(con).unwrap();
    assert_eq!(pair.len(), 2, "CONFIG GET {name}: {pair:?}");
    pair[1].clone()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn fresh_dir(tag: &str) -> PathBuf {
    let dir = temp_path(tag);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Debian's own /etc/redis/redis.conf (installed with redis-server), copied: a stock file
/// starts the server, with its settings where they mean something here.
#[test]
fn debians_stock_redis_conf_starts_the_server() {
    let stock = Path::new("/etc/redis/redis.conf");
    let text = std::fs::read_to_string(stock)
        .expect("/etc/redis/redis.conf: install Debian's redis-server (scripts/install-deps.sh)");
    let dir = fresh_dir("stock-conf");
    let conf = write(&dir, "redis.conf", &text);
    let port = free_port();
    let d = dir.to_str().unwrap();
    // What the stock file says about daemonizing, its pid and log files and its directory is
    // for the system's service; the command line wins over the file, as for redis-server.
    let s = Server::start(&[
        conf.to_str().unwrap(),
        "--port",
        &port.to_string(),
        "--daemonize",
        "no",
        "--logfile",
        "",
        "--pidfile",
        &format!("{d}/redis.pid"),
        "--dir",
        d,
    ]);
    let mut con = s.conn();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut con).unwrap();
    assert_eq!(v, "v");
    // The file's `bind 127.0.0.1 -::1`: the second address optional.
    assert_eq!(config_get(&mut con, "bind"), "127.0.0.1 -::1");
    // `client-output-buffer-limit normal 0 0 0`: no limit for normal clients (this server's
    // own default is 256 MiB).
    assert_eq!(
        config_get(&mut con, "client-output-buffer-limit"),
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
    );
    let info: String = redis::cmd("INFO").arg("server").query(&mut con).unwrap();
    assert!(info.contains(&format!("config_file:{}\r\n", conf.display())), "{info}");
    let log = s.log();
    assert!(log.contains("ignored Redis settings that have no meaning here: "), "{log}");
    // The file's `protected-mode yes` is a setting here (it used to be ignored).
    assert_eq!(config_get(&mut con, "protected-mode"), "yes");
    // `rdbcompression yes` and `rdbchecksum yes` are settings here (they used to be ignored).
    assert_eq!(config_get(&mut con, "rdbcompression"), "yes");
    assert!(log.contains("rdb-save-incremental-fsync"), "{log}");
}

/// A redis-server on `conf` (the file first, as redis-server takes it), on a port of its own.
/// goblin-core and redis-server started from the same file, each in a fresh directory of
/// its own: (goblin-core, its port, redis-server, its port).
fn start_both(conf: &Path, tag: &str) -> (Server, u16, Child, u16) {
    let (gdir, gport) = (fresh_dir(&format!("{tag}-goblin")), free_port());
    let port = gport.to_string();
    let g = Server::start(&[conf.to_str().unwrap(), "--port", &port, "--dir", gdir.to_str().unwrap()]);
    let (rdir, rport) = (fresh_dir(&format!("{tag}-redis")), free_port());
    (g, gport, start_redis(conf, &rdir, rport), rport)
}

fn start_redis(conf: &Path, dir: &Path, port: u16) -> Child {
    let mut child = Command::new(common::redis8_binary())
        .arg(conf)
        .args(["--port", &port.to_string(), "--dir", dir.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server 8 (scripts/redis8.sh)");
    let deadline = Instant::now() + Duration::from_secs(15);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("redis-server exited at startup: {st}");
        }
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// One file read by goblin-core and by redis-server 7.0: every setting both know comes out
/// the same (quoting and escapes, `include`, repeated `save` lines, a later line winning).
#[test]
fn a_file_reads_as_redis_server_reads_it() {
    let dir = fresh_dir("conf-differential");
    let included =
        write(&dir, "included.conf", "# an included file\nslowlog-max-len 77\nhash-max-listpack-entries 3\n");
    // A wildcard include takes every match in order (the later wins); one matching nothing
    // is no error.
    std::fs::create_dir_all(dir.join("conf.d")).unwrap();
    std::fs::create_dir_all(dir.join("empty.d")).unwrap();
    write(&dir.join("conf.d"), "a.conf", "hz 21\nzset-max-listpack-value 40\n");
    write(&dir.join("conf.d"), "b.conf", "hz 22\n");
    let conf = write(
        &dir,
        "main.conf",
        &format!(
            "# comments and blank lines are skipped\n\n\
             bind 127.0.0.1\n\
             save 60 100\n\
             save \n\
             save 900 1\n\
             save 300 10\n\
             timeout 40\n\
             timeout 45\n\
             notify-keyspace-events \"KEA\"\n\
             requirepass 'pa ss\\'word'\n\
             masterauth \"sec\\x72et\\tpw\"\n\
             include {}\n\
             include {}/conf.d/*.conf\n\
             include {}/empty.d/*.conf\n\
             slowlog-log-slower-than -1\n\
             latency-monitor-threshold 25\n\
             maxmemory 64mb\n\
             maxmemory-policy allkeys-lru\n\
             databases 4\n\
             acllog-max-len 33\n\
             set-max-intset-entries 64\n\
             zset-max-listpack-entries 9\n\
             appendonly no\n\
             latency-tracking no\n\
             latency-tracking-info-percentiles 90 99.5\n\
             client-query-buffer-limit 2mb\n\
             protected-mode no\n",
            included.display(),
            dir.display(),
            dir.display()
        ),
    );
    let names = [
        "save",
        "timeout",
        "notify-keyspace-events",
        "requirepass",
        "masterauth",
        "slowlog-max-len",
        "hash-max-listpack-entries",
        "slowlog-log-slower-than",
        "latency-monitor-threshold",
        "maxmemory",
        "maxmemory-policy",
        "databases",
        "hz",
        "acllog-max-len",
        "set-max-intset-entries",
        "zset-max-listpack-entries",
        "zset-max-listpack-value",
        "appendonly",
        "latency-tracking",
        "latency-tracking-info-percentiles",
        "client-query-buffer-limit",
    ];
    let (g, gport, mut r, rport) = start_both(&conf, "conf");
    let auth = |port: u16| {
        let client = redis::Client::open(format!("redis://:pa%20ss%27word@127.0.0.1:{port}/")).unwrap();
        client.get_connection().expect("the file's password logs in")
    };
    let mut gc = auth(gport);
    let mut rc = auth(rport);
    for name in names {
        assert_eq!(config_get(&mut gc, name), config_get(&mut rc, name), "CONFIG GET {name}");
    }
    // The included limit builds a hash table at the fourth field, in both.
    for con in [&mut gc, &mut rc] {
        let _: () =
            redis::cmd("HSET").arg("h").arg("a").arg(1).arg("b").arg(2).arg("c").arg(3).query(con).unwrap();
        let e: String = redis::cmd("OBJECT").arg("ENCODING").arg("h").query(con).unwrap();
        assert_eq!(e, "listpack");
        let _: () = redis::cmd("HSET").arg("h").arg("d").arg(4).query(con).unwrap();
        let e: String = redis::cmd("OBJECT").arg("ENCODING").arg("h").query(con).unwrap();
        assert_eq!(e, "hashtable");
    }
    let _ = r.kill();
    let _ = r.wait();
    drop(g);
}

/// The command line wins over the file; Redis options that are not flags here are taken on
/// the command line too (`--appendonly no`, `--protected-mode no`, `--slowlog-max-len 9`).
#[test]
fn the_command_line_wins_and_takes_redis_options() {
    let dir = fresh_dir("conf-cli");
    let conf = write(&dir, "redis.conf", "port 1\nslowlog-max-len 5\nhz 30\nsave 60 1\n");
    let s = Server::start(&[
        conf.to_str().unwrap(),
        "--slowlog-max-len",
        "9",
        "--appendonly",
        "no",
        "--protected-mode",
        "no",
        "--save",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    let mut con = s.conn();
    assert_eq!(config_get(&mut con, "port"), s.port.to_string());
    assert_eq!(config_get(&mut con, "slowlog-max-len"), "9");
    assert_eq!(config_get(&mut con, "hz"), "30");
    // `--save` alone: no snapshot rules, as redis-server reads it.
    assert_eq!(config_get(&mut con, "save"), "");
    // `--save 100 100`: one more line after the file's, which add up (redis-server's rule).
    let s3 = Server::start(&[conf.to_str().unwrap(), "--save", "100", "100", "--dir", dir.to_str().unwrap()]);
    assert_eq!(config_get(&mut s3.conn(), "save"), "60 1 100 100");
    // An option and its value in one argument, and words before any option (redis-server's
    // "wrong usage that we support anyway").
    let s4 = Server::start(&[
        conf.to_str().unwrap(),
        "slowlog-max-len",
        "44",
        "--maxmemory '700mb'",
        "--maxmemory-policy volatile-lru",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    let mut c4 = s4.conn();
    assert_eq!(config_get(&mut c4, "slowlog-max-len"), "44");
    assert_eq!(config_get(&mut c4, "maxmemory"), "734003200");
    assert_eq!(config_get(&mut c4, "maxmemory-policy"), "volatile-lru");
    // Without a file, the same Redis options are taken, and Redis's level names too.
    let s2 = Server::start(&[
        "--appendonly",
        "no",
        "--latency-monitor-threshold",
        "7",
        "--tcp-keepalive",
        "120",
        "--rdbcompression",
        "no",
        "--disable-thp",
        "yes",
        "--loglevel",
        "warning",
    ]);
    let mut con2 = s2.conn();
    assert_eq!(config_get(&mut con2, "latency-monitor-threshold"), "7");
    assert_eq!(config_get(&mut con2, "loglevel"), "warning");
    assert_eq!(config_get(&mut con2, "tcp-keepalive"), "120");
    let log = s2.log();
    assert_eq!(config_get(&mut con2, "rdbcompression"), "no");
    assert!(log.contains("ignored Redis settings that have no meaning here: disable-thp"), "{log}");
    assert!(!log.contains("Ready to accept connections"), "warning hides info lines: {log}");
    // "-": the configuration comes from standard input as well (after the file, before the
    // options).
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_goblin-core"))
        .args([conf.to_str().unwrap(), "-", "--port", &port.to_string(), "--hz", "33"])
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"slowlog-max-len 61\nhz 34\nlatency-monitor-threshold 3\n").unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut con = loop {
        if let Ok(c) = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection() {
            break c;
        }
        assert!(child.try_wait().unwrap().is_none(), "goblin-core exited");
        assert!(Instant::now() < deadline, "goblin-core did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(config_get(&mut con, "slowlog-max-len"), "61");
    assert_eq!(config_get(&mut con, "latency-monitor-threshold"), "3");
    assert_eq!(config_get(&mut con, "hz"), "33", "the option wins over standard input");
    let _ = child.kill();
    let _ = child.wait();
}

/// Each way a file (or a command-line option) can be wrong stops startup with exit code 1
/// and redis-server's fatal box naming the line and the reason; nothing listens.
#[test]
fn bad_files_stop_startup_naming_the_line() {
    let dir = fresh_dir("conf-bad");
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "port 6380\nno-such-directive 1\n",
            "Bad directive or wrong number of arguments",
            &["at line 2", ">>> 'no-such-directive 1'"],
        ),
        (
            "port 6380\nrequirepass \"unterminated\n",
            "Unbalanced quotes in configuration line",
            &["at line 2"],
        ),
        ("\n\nport abc\n", "invalid value 'abc' for '--port", &["at line 3", ">>> 'port abc'"]),
        ("slowlog-max-len many\n", "argument couldn't be parsed into an integer", &["at line 1"]),
        ("maxmemory-policy sometimes\n", "'sometimes' is not one of noeviction", &["at line 1"]),
        ("save 900\n", "invalid value '900'", &["at line 1", ">>> 'save 900'"]),
        ("appendonly yes\n", "keeps no append-only file", &["at line 1"]),
        ("rename-command nosuch other\n", "No such command in rename-command", &["at line 1"]),
        ("port 6380\nrename-command get set\n", "Target command name already exists", &["at line 2"]),
        ("rename-command get\n", "Bad directive or wrong number of arguments", &["at line 1"]),
        ("loadmodule /x/y.so\n", "loads no modules", &["at line 1"]),
        ("port 6380\nreplica-read-only no\n", "replicas are read-only", &["at line 2"]),
        ("tls-protocols TLSv1.2\n", "'tls-protocols' is not supported", &["at line 1"]),
        ("user alice on >pw ~* +@all nosuchrule\n", "Error in user declaration 'alice'", &["at line 1"]),
        ("timeout\n", "wrong number of arguments", &["at line 1"]),
        (
            "client-output-buffer-limit normal 1mb\n",
            "Wrong number of arguments in buffer limit configuration.",
            &["at line 1"],
        ),
        (
            "client-output-buffer-limit nobody 0 0 0\n",
            "Invalid client class specified in buffer limit configuration.",
            &["at line 1"],
        ),
    ];
    for (i, (text, reason, more)) in cases.iter().enumerate() {
        let conf = write(&dir, &format!("bad{i}.conf"), text);
        let port = free_port().to_string();
        let (code, log) = run_to_exit(&[conf.to_str().unwrap(), "--port", &port]);
        assert_eq!(code, Some(1), "{text:?}: {log}");
        assert!(log.contains("*** FATAL CONFIG FILE ERROR"), "{text:?}: {log}");
        assert!(log.contains(reason), "{text:?} wants {reason:?}: {log}");
        for m in *more {
            assert!(log.contains(m), "{text:?} wants {m:?}: {log}");
        }
        assert!(!log.contains("Ready to accept connections"), "{log}");
    }
    // A missing file, an include loop, and a command-line option Redis does not know.
    let (code, log) = run_to_exit(&[dir.join("missing.conf").to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(log.contains("can't open config file"), "{log}");
    let looped = dir.join("loop.conf");
    std::fs::write(&looped, format!("include {}\n", looped.display())).unwrap();
    let (code, log) = run_to_exit(&[looped.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(log.contains("includes nest deeper than"), "{log}");
    // A Redis setting with a bad value on the command line: the box; an option nobody knows:
    // the usage error.
    let (code, log) = run_to_exit(&["--slowlog-max-len", "x"]);
    assert_eq!(code, Some(1));
    assert!(
        log.contains("argument couldn't be parsed into an integer")
            && log.contains("'slowlog-max-len \"x\"'"),
        "{log}"
    );
    // A shutdown signal's flag list given empty: refused by its own check, as Redis 8.2 does.
    let (code, log) = run_to_exit(&["--shutdown-on-sigint", "now force", "--shutdown-on-sigterm"]);
    assert_eq!(code, Some(1));
    assert!(
        log.contains(">>> 'shutdown-on-sigterm'\nargument(s) must be one of the following: default, save, nosave, now, force"),
        "{log}"
    );
    // Options read as redis-server reads them: values run to the next option once there is
    // one; a `--word` right after a name is its value.
    for (args, want) in [
        (&["--port", "6379", "6380"][..], ">>> 'port \"6379\" \"6380\"'\nwrong number of arguments"),
        (
            &["--port", "--loglevel", "verbose"],
            ">>> 'port \"--loglevel\" \"verbose\"'\nwrong number of arguments",
        ),
        (&["--port", "6380", "--loglevel"], ">>> 'loglevel'\nwrong number of arguments"),
        (
            &["--port", "--bla", "--loglevel", "verbose"],
            ">>> 'port \"--bla\"'\ninvalid value '--bla' for '--port <PORT>': argument couldn't be parsed into an integer",
        ),
        // Redis's reasons for a bad number (as redis-server 8.2 words them).
        (&["--port", "70000"], ">>> 'port \"70000\"'\ninvalid value '70000' for '--port <PORT>': argument must be between 0 and 65535 inclusive"),
        (&["--maxmemory", "abc"], ">>> 'maxmemory \"abc\"'\ninvalid value 'abc' for '--maxmemory <MAXMEMORY>': argument must be a memory value"),
        // A level nobody knows (tracing would have read it as a target, and logged nothing).
        (
            &["--logfile", "--my--log--file", "--loglevel", "--bla"],
            ">>> 'loglevel \"--bla\"'\ninvalid value '--bla' for '--loglevel <LOGLEVEL>': argument(s) must be one of the following: debug, verbose, notice, warning, nothing",
        ),
        (&["--loglevel", "loud"], "argument(s) must be one of the following: debug, verbose, notice, warning, nothing"),
    ] {
        let (code, log) = run_to_exit(args);
        assert_eq!(code, Some(2), "a bad value of a flag is a usage error: {args:?}: {log}");
        assert!(log.contains(want), "{args:?} wants {want:?}: {log}");
    }
    // A name that is neither this server's nor Redis's: Redis's words (and exit status).
    let (code, log) = run_to_exit(&["--no-such-option", "1"]);
    assert_eq!(code, Some(1));
    assert!(log.contains(">>> 'no-such-option \"1\"'\nBad directive or wrong number of arguments"), "{log}");
    let (code, log) = run_to_exit(&["--invalid"]);
    assert_eq!(code, Some(1));
    assert!(log.contains(">>> 'invalid'\nBad directive or wrong number of arguments"), "{log}");
    // A near miss of one of this server's flags gets clap's suggestion too.
    let (_, log) = run_to_exit(&["--prot", "6380"]);
    assert!(log.contains("Bad directive") && log.contains("'--port'"), "{log}");
}

/// CONFIG REWRITE: what CONFIG SET changed goes into the file in place of its lines, new
/// settings at the end under a marker, every other line (comments included) kept; a
/// restart on the file has the new values.
#[test]
fn config_rewrite_writes_changes_back() {
    let dir = fresh_dir("conf-rewrite");
    let original =
        "# Operator's notes\nslowlog-max-len 5\n# keep me\nsave 900 1\nsave 300 10\nrdbcompression yes\n";
    let conf = write(&dir, "redis.conf", original);
    let d = dir.to_str().unwrap();
    let port = free_port();
    let s = Server::start(&[conf.to_str().unwrap(), "--port", &port.to_string(), "--dir", d]);
    let mut con = s.conn();
    for (name, value) in
        [("slowlog-max-len", "6"), ("save", "60 5"), ("notify-keyspace-events", "Ex"), ("hz", "25")]
    {
        let _: () = redis::cmd("CONFIG").arg("SET").arg(name).arg(value).query(&mut con).unwrap();
    }
    let _: () = redis::cmd("CONFIG").arg("REWRITE").query(&mut con).unwrap();
    let text = std::fs::read_to_string(&conf).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        &lines[..5],
        &["# Operator's notes", "slowlog-max-len 6", "# keep me", "save 60 5", "rdbcompression yes"],
        "{text}"
    );
    assert!(lines.contains(&"# Generated by CONFIG REWRITE"), "{text}");
    assert!(
        lines.contains(&"notify-keyspace-events xE") || lines.contains(&"notify-keyspace-events Ex"),
        "{text}"
    );
    assert!(lines.contains(&"hz 25"), "{text}");
    // The port came from the command line: written too, as redis-server writes it.
    assert!(lines.contains(&format!("port {port}").as_str()), "{text}");
    drop(s);
    // Restarted on the rewritten file alone.
    let s = Server::start(&[conf.to_str().unwrap(), "--dir", d]);
    let mut con = s.conn();
    assert_eq!(config_get(&mut con, "slowlog-max-len"), "6");
    assert_eq!(config_get(&mut con, "save"), "60 5");
    assert_eq!(config_get(&mut con, "hz"), "25");
    let events = config_get(&mut con, "notify-keyspace-events");
    assert!(events == "xE" || events == "Ex", "{events}");
    // A file the server cannot write: Redis's error, the file untouched.
    let ro = fresh_dir("conf-ro");
    let conf2 = write(&ro, "redis.conf", "hz 12\n");
    let s2 = Server::start(&[conf2.to_str().unwrap()]);
    let mut con2 = s2.conn();
    std::fs::remove_dir_all(&ro).unwrap();
    std::fs::create_dir_all(ro.join("redis.conf")).unwrap();
    let err = redis::cmd("CONFIG").arg("REWRITE").query::<()>(&mut con2).unwrap_err();
    assert!(err.to_string().contains("Rewriting config file"), "{err}");
    // Without a file: Redis's error.
    let s3 = Server::start(&[]);
    let err = redis::cmd("CONFIG").arg("REWRITE").query::<()>(&mut s3.conn()).unwrap_err();
    assert!(err.to_string().contains("The server is running without a config file"), "{err}");
}

/// `rename-command`: the same file on goblin-core and redis-server 7.0, the same replies to
/// the old names, the new ones, inside MULTI and from scripts.
#[test]
fn rename_command_answers_as_redis_server() {
    let dir = fresh_dir("conf-rename");
    let conf = write(
        &dir,
        "redis.conf",
        "bind 127.0.0.1\nrename-command FLUSHALL \"\"\nrename-command CONFIG cfg-admin\nrename-command cfg-admin Cfg-Admin2\n",
    );
    let (_g, gport, mut r, rport) = start_both(&conf, "rename");
    let steps: &[&[&str]] = &[
        &["SET", "k", "v"],
        &["FLUSHALL"],
        &["flushall", "ASYNC"],
        &["CONFIG", "GET", "hz"],
        &["cfg-admin", "GET", "hz"],
        &["CFG-ADMIN2", "GET", "hz"],
        &["cfg-admin2", "GET"],
        &["GET", "k"],
        &["MULTI"],
        &["cfg-admin2", "GET", "databases"],
        &["INCR", "n"],
        &["EXEC"],
        &["MULTI"],
        &["FLUSHALL"],
        &["EXEC"],
        &["EVAL", "return redis.call('cfg-admin2', 'get', 'databases')", "0"],
        &["EVAL", "return redis.pcall('config', 'get', 'databases')", "0"],
        &["EVAL", "return redis.pcall('flushall')", "0"],
        &["DBSIZE"],
    ];
    let mut gc = common::RespConn::open(gport, 2);
    let mut rc = common::RespConn::open(rport, 2);
    for step in steps {
        assert_eq!(gc.call(step), rc.call(step), "{step:?}");
    }
    let _ = r.kill();
    let _ = r.wait();
}

/// DEBUG CONFIG-REWRITE-FORCE-ALL writes every setting (Redis's "CONFIG REWRITE sanity"): a
/// server restarted on that file reads it back and reports every setting as before.
#[test]
fn a_file_with_every_setting_reads_back_the_same() {
    let dir = fresh_dir("conf-force-all");
    let conf = write(&dir, "redis.conf", "hz 17\nrename-command FLUSHDB badger\n");
    let d = dir.to_str().unwrap();
    let port = free_port().to_string();
    let args = [conf.to_str().unwrap(), "--port", &port, "--dir", d, "--enable-debug-command", "yes"];
    let all = |con: &mut redis::Connection| -> std::collections::BTreeMap<String, String> {
        let flat: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("*").query(con).unwrap();
        flat.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect()
    };
    let s = Server::start(&args);
    let mut con = s.conn();
    for (name, value) in
        [("slowlog-max-len", "9"), ("notify-keyspace-events", "KEA"), ("maxmemory", "12345678")]
    {
        let _: () = redis::cmd("CONFIG").arg("SET").arg(name).arg(value).query(&mut con).unwrap();
    }
    let before = all(&mut con);
    let _: () = redis::cmd("DEBUG").arg("CONFIG-REWRITE-FORCE-ALL").query(&mut con).unwrap();
    drop(s);
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains("rename-command FLUSHDB badger"), "{text}");
    let s = Server::start(&args);
    let mut con = s.conn();
    assert_eq!(all(&mut con), before, "{text}");
    let err = redis::cmd("FLUSHDB").query::<()>(&mut con).unwrap_err();
    assert!(err.to_string().contains("unknown command"), "{err}");
}

/// `user` lines declare ACL users as redis-server takes them from its file (ACL LIST equal on
/// both); a bad rule names its line; an ACL file beside them is refused.
#[test]
fn user_lines_declare_acl_users() {
    let dir = fresh_dir("conf-users");
    let conf = write(
        &dir,
        "users.conf",
        "user alice on >p1pp0 ~cached:* +get\nuser default on nopass ~* &* +@all\nuser bob off\n",
    );
    let (g, gport, mut r, rport) = start_both(&conf, "conf-users");
    let acl_list = |port: u16| -> Vec<String> {
        let mut con =
            redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
        redis::cmd("ACL").arg("LIST").query(&mut con).unwrap()
    };
    assert_eq!(acl_list(gport), acl_list(rport));
    let mut alice = redis::Client::open(format!("redis://alice:p1pp0@127.0.0.1:{gport}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let _: Option<String> = redis::cmd("GET").arg("cached:1").query(&mut alice).unwrap();
    let err = redis::cmd("SET").arg("cached:1").arg("x").query::<()>(&mut alice).unwrap_err();
    assert!(err.to_string().contains("no permissions to run the 'set' command"), "{err}");
    let _ = r.kill();
    let _ = r.wait();
    drop(g);
    let acl = write(&dir, "users.acl", "user carol on >pw ~* +@all\n");
    let both = write(&dir, "both.conf", &format!("aclfile {}\nuser alice on >pw\n", acl.display()));
    let (code, log) = run_to_exit(&[both.to_str().unwrap(), "--port", &free_port().to_string()]);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("users defined in redis.conf and at the same setting an ACL file"), "{log}");
    // One line per user, in a file or on the command line (Redis's test runs the latter).
    let twice = write(&dir, "twice.conf", "user alice on\nuser alice off\n");
    let (code, log) = run_to_exit(&[twice.to_str().unwrap(), "--port", &free_port().to_string()]);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("Duplicate user 'alice' found") && log.contains("at line 2"), "{log}");
    let (code, log) = run_to_exit(&["--port", &free_port().to_string(), "--user", "foo", "--user", "foo"]);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("Duplicate user 'foo' found"), "{log}");
}

/// Redis settings whose every value behaves the same here (`activerehashing`, the `lazyfree-*`
/// family, `sanitize-dump-payload`, `propagation-error-behavior` ...) are taken from a file and
/// by CONFIG SET with Redis's checks, and read back as set, as redis-server 8.2 does: a client
/// or tool that sets one gets OK and sees its value, not "Unknown option".
#[test]
fn settings_that_behave_the_same_either_way_read_back_as_redis8() {
    let dir = fresh_dir("inert-choices");
    let conf = write(
        &dir,
        "redis.conf",
        "sanitize-dump-payload clients\nlazyfree-lazy-user-flush yes\nactiverehashing no\n",
    );
    let (g, gport, mut redis, rport) = start_both(&conf, "inert-choices");
    let names = [
        "activerehashing",
        "lazyfree-lazy-eviction",
        "lazyfree-lazy-expire",
        "lazyfree-lazy-server-del",
        "lazyfree-lazy-user-del",
        "lazyfree-lazy-user-flush",
        "replica-lazy-flush",
        "slave-lazy-flush",
        "propagation-error-behavior",
        "sanitize-dump-payload",
        "replica-ignore-disk-write-errors",
    ];
    let session: Vec<Vec<&str>> = [
        names.iter().map(|n| vec!["CONFIG", "GET", n]).collect::<Vec<_>>(),
        vec![
            vec!["CONFIG", "SET", "sanitize-dump-payload", "maybe"],
            vec!["CONFIG", "SET", "propagation-error-behavior", "panic-on-replicas"],
            vec!["CONFIG", "SET", "propagation-error-behavior", "explode"],
            vec!["CONFIG", "SET", "lazyfree-lazy-eviction", "YES"],
            vec!["CONFIG", "SET", "activerehashing", "sometimes"],
            vec!["CONFIG", "SET", "slave-lazy-flush", "yes"],
        ],
        names.iter().map(|n| vec!["CONFIG", "GET", n]).collect::<Vec<_>>(),
    ]
    .concat();
    let mut answers = Vec::new();
    for port in [gport, rport] {
        let mut con =
            redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
        let got: Vec<String> = session
            .iter()
            .map(|args| {
                let mut cmd = redis::cmd(args[0]);
                for a in &args[1..] {
                    cmd.arg(*a);
                }
                match cmd.query::<redis::Value>(&mut con) {
                    Ok(v) => format!("{args:?} -> {v:?}"),
                    Err(e) => format!("{args:?} -> {:?} {:?}", e.code(), e.detail()),
                }
            })
            .collect();
        answers.push(got);
    }
    redis.kill().unwrap();
    redis.wait().unwrap();
    drop(g);
    for (ours, theirs) in answers[0].iter().zip(&answers[1]) {
        assert_eq!(ours, theirs, "goblin-core against redis-server 8.2");
    }
    let ours = answers[0].join("\n");
    let first_get =
        answers[0].iter().find(|l| l.starts_with("[\"CONFIG\", \"GET\", \"sanitize-dump-payload\"]"));
    assert!(first_get.is_some_and(|l| l.contains("clients")), "{ours}");
    assert!(ours.contains("argument(s) must be one of the following: no, yes, clients"), "{ours}");
}
