//! Authentication (--auth-file, --requirepass, AUTH, HELLO AUTH, ACL WHOAMI/USERS, RESET) and
//! TLS (--tls-port) against the real binary, with redis-cli, the `redis` crate, raw RESP and a
//! rustls client. Certificates are made per test run with the `openssl` CLI (required: a
//! missing one fails the tests, it does not skip them).

mod common;

use common::{free_port, read_reply, read_to_close, temp_path, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const NOAUTH: &str = "-NOAUTH Authentication required.\r\n";
const WRONGPASS: &str = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_goblin-core"))
}

/// One command over a raw connection, its reply as text.
fn cmd(s: &mut impl ReadWrite, args: &[&str]) -> String {
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(req.as_bytes()).expect("write");
    String::from_utf8_lossy(&read_reply(s)).into_owned()
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

fn write_file(tag: &str, text: &str) -> PathBuf {
    let p = temp_path(tag);
    std::fs::write(&p, text).unwrap();
    p
}

/// Runs the binary with `args` on a free port, expecting it to refuse to start; returns stderr.
fn startup_error(args: &[&str]) -> String {
    let port = free_port().to_string();
    let out = bin()
        .args(args)
        .args(["--port", &port, "--bind", "127.0.0.1"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} should not start; stderr:\n{err}");
    err
}

// ---------------------------------------------------------------------------------------------
// Authentication

#[test]
fn auth_file_problems_stop_startup_naming_file_line_and_rule() {
    for (text, want) in [
        ("user alice on >pw ~* ~cache:*\n", "line 1: rule '~cache:*': Adding a pattern after the * pattern"),
        ("# users\n\nuser alice on >pw -@nosuch\n", "line 3: rule '-@nosuch'"),
        ("user alice on >pw +nosuch\n", "line 1: rule '+nosuch': Unknown command or category name in ACL"),
        ("user alice on >pw %X~*\n", "line 1: rule '%X~*': Syntax error"),
        ("user alice on >pw &* &news\n", "line 1: rule '&news': Adding a pattern after the * pattern"),
        ("user alice on >pw (+get ~a\n", "line 1: Unmatched parenthesis in acl selector starting at '(+get'"),
        ("user alice on #1234\n", "line 1: rule '#1234'"),
        ("user alice on >a\nuser alice on >b\n", "line 2: Duplicate user 'alice' found"),
        ("alice on >pw\n", "line 1: expected 'user <name> <rules...>'"),
        ("user\n", "line 1: 'user' without a name"),
    ] {
        let path = write_file("bad.acl", text);
        let p = path.to_str().unwrap();
        let err = startup_error(&["--auth-file", p]);
        assert!(err.contains(p) && err.contains(want), "{text:?}: expected {want:?} and the path in:\n{err}");
    }
    let missing = temp_path("missing.acl");
    let err = startup_error(&["--auth-file", missing.to_str().unwrap()]);
    assert!(err.contains(missing.to_str().unwrap()) && err.contains("cannot read"), "{err}");
    // Two sources for the default user's password.
    let path = write_file("default.acl", "user default on >x\n");
    let err = startup_error(&["--auth-file", path.to_str().unwrap(), "--requirepass", "y"]);
    assert!(err.contains("--requirepass cannot be combined"), "{err}");
}

#[test]
fn requirepass_noauth_auth_hello_and_reset() {
    let s = Server::start(&["--requirepass", "s3cret"]);
    let mut c = s.raw();
    // Everything but AUTH, HELLO, QUIT and RESET is refused, arity errors first (as Redis).
    assert_eq!(cmd(&mut c, &["PING"]), NOAUTH);
    assert_eq!(cmd(&mut c, &["GET", "k"]), NOAUTH);
    assert_eq!(cmd(&mut c, &["ACL", "WHOAMI"]), NOAUTH);
    assert_eq!(cmd(&mut c, &["CLIENT", "INFO"]), NOAUTH);
    assert!(cmd(&mut c, &["ECHO"]).starts_with("-ERR wrong number of arguments"));
    assert!(cmd(&mut c, &["HELLO", "3"])
        .starts_with("-NOAUTH HELLO must be called with the client already authenticated"));
    assert!(cmd(&mut c, &["HELLO"]).starts_with("-NOAUTH HELLO must be called"));
    assert_eq!(cmd(&mut c, &["RESET"]), "+RESET\r\n");
    // MULTI is refused too, so nothing can be queued before AUTH.
    assert_eq!(cmd(&mut c, &["MULTI"]), NOAUTH);
    assert_eq!(cmd(&mut c, &["AUTH", "wrong"]), WRONGPASS);
    assert_eq!(cmd(&mut c, &["AUTH", "default", "wrong"]), WRONGPASS);
    assert_eq!(cmd(&mut c, &["AUTH", "nobody", "s3cret"]), WRONGPASS);
    assert_eq!(cmd(&mut c, &["AUTH", "a", "b", "c"]), "-ERR syntax error\r\n");
    assert_eq!(cmd(&mut c, &["AUTH", "s3cret"]), "+OK\r\n");
    assert_eq!(cmd(&mut c, &["PING"]), "+PONG\r\n");
    assert_eq!(cmd(&mut c, &["ACL", "WHOAMI"]), "$7\r\ndefault\r\n");
    // RESET returns to the default user, which needs its password again.
    assert_eq!(cmd(&mut c, &["RESET"]), "+RESET\r\n");
    assert_eq!(cmd(&mut c, &["PING"]), NOAUTH);
    // HELLO 3 AUTH authenticates and switches protocol in one step.
    assert_eq!(cmd(&mut c, &["HELLO", "3", "AUTH", "default", "nope"]), WRONGPASS);
    let hello = cmd(&mut c, &["HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "me"]);
    assert!(hello.starts_with("%7\r\n") && hello.contains("proto\r\n:3"), "{hello}");
    let info = cmd(&mut c, &["CLIENT", "INFO"]);
    assert!(info.contains(" name=me ") && info.contains(" user=default "), "{info}");
    assert_eq!(cmd(&mut c, &["QUIT"]), "+OK\r\n");

    // Real clients: the redis crate with a password in the URL, and redis-cli -a.
    let url = format!("redis://:s3cret@127.0.0.1:{}/", s.port);
    let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut con).unwrap();
    assert_eq!(v, "v");
    assert_eq!(s.cli(&["--no-auth-warning", "-a", "s3cret", "GET", "k"]).trim(), "v");
    assert!(s.cli(&["GET", "k"]).contains("NOAUTH"));

    // CONFIG GET/SET requirepass: a new password applies to new AUTHs; "" opens the server.
    let mut c = s.raw();
    assert_eq!(cmd(&mut c, &["AUTH", "s3cret"]), "+OK\r\n");
    assert_eq!(
        cmd(&mut c, &["CONFIG", "GET", "requirepass"]),
        "*2\r\n$11\r\nrequirepass\r\n$6\r\ns3cret\r\n"
    );
    assert_eq!(cmd(&mut c, &["CONFIG", "SET", "requirepass", "other"]), "+OK\r\n");
    let mut d = s.raw();
    assert_eq!(cmd(&mut d, &["AUTH", "s3cret"]), WRONGPASS);
    assert_eq!(cmd(&mut d, &["AUTH", "other"]), "+OK\r\n");
    let mut e = s.raw();
    assert_eq!(cmd(&mut e, &["PING"]), NOAUTH);
    assert_eq!(cmd(&mut c, &["CONFIG", "SET", "requirepass", ""]), "+OK\r\n");
    // Redis's test is live: the default user is now nopass, so waiting connections run.
    assert_eq!(cmd(&mut e, &["PING"]), "+PONG\r\n");
}

#[test]
fn auth_file_users_whoami_users_client_list_and_disabled_users() {
    let hash = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"; // sha256("secret")
    let file = write_file(
        "users.acl",
        &format!(
            "# Test users\n\
             user alice on >alicepw ~* &* +@all\n\
             user bob off >bobpw allkeys allchannels allcommands\n\
             user carol on #{hash} %RW~* +acl|whoami\n\
             user dan on nopass\n\
             user erin on >old resetpass >new\n\
             user fay reset on >faypw\n"
        ),
    );
    // No `default` in the file: default is on and nopass, as Redis creates it.
    let s = Server::start(&["--auth-file", file.to_str().unwrap()]);
    let mut c = s.raw();
    assert_eq!(cmd(&mut c, &["PING"]), "+PONG\r\n");
    assert_eq!(cmd(&mut c, &["ACL", "WHOAMI"]), "$7\r\ndefault\r\n");
    // AUTH <password> with a nopass default is a configuration mistake (Redis's error).
    assert!(cmd(&mut c, &["AUTH", "x"])
        .starts_with("-ERR AUTH <password> called without any password configured"));
    assert_eq!(cmd(&mut c, &["AUTH", "alice", "wrong"]), WRONGPASS);
    assert_eq!(cmd(&mut c, &["AUTH", "bob", "bobpw"]), WRONGPASS, "bob is off");
    assert_eq!(cmd(&mut c, &["AUTH", "erin", "old"]), WRONGPASS, "resetpass dropped it");
    assert_eq!(cmd(&mut c, &["AUTH", "erin", "new"]), "+OK\r\n");
    assert_eq!(cmd(&mut c, &["AUTH", "carol", "secret"]), "+OK\r\n");
    assert_eq!(cmd(&mut c, &["AUTH", "dan", "anything at all"]), "+OK\r\n");
    assert_eq!(cmd(&mut c, &["AUTH", "fay", "faypw"]), "+OK\r\n");
    assert_eq!(cmd(&mut c, &["AUTH", "alice", "alicepw"]), "+OK\r\n");
    assert_eq!(cmd(&mut c, &["ACL", "WHOAMI"]), "$5\r\nalice\r\n");
    let info = cmd(&mut c, &["CLIENT", "INFO"]);
    assert!(info.contains(" user=alice "), "{info}");
    assert_eq!(
        cmd(&mut c, &["ACL", "USERS"]),
        "*7\r\n$5\r\nalice\r\n$3\r\nbob\r\n$5\r\ncarol\r\n$3\r\ndan\r\n$7\r\ndefault\r\n$4\r\nerin\r\n$3\r\nfay\r\n"
    );
    assert_eq!(cmd(&mut c, &["ACL", "NOPE", "x"]), "-ERR unknown subcommand 'NOPE'. Try ACL HELP.\r\n");
    assert_eq!(
        cmd(&mut c, &["ACL", "WHOAMI", "extra"]),
        "-ERR wrong number of arguments for 'acl|whoami' command\r\n"
    );
    // CLIENT LIST from another connection shows who is who; CLIENT KILL USER finds them.
    let mut other = s.raw();
    let list = cmd(&mut other, &["CLIENT", "LIST"]);
    assert!(list.contains(" user=alice ") && list.contains(" user=default "), "{list}");
    assert_eq!(cmd(&mut other, &["CLIENT", "KILL", "USER", "nobody"]), "-ERR No such user 'nobody'\r\n");
    assert_eq!(cmd(&mut other, &["CLIENT", "KILL", "USER", "alice"]), ":1\r\n");
    let (_, closed) = read_to_close(&mut c);
    assert!(closed, "alice's connection was killed");
    // RESET drops back to default, which needs no password here.
    let mut r = s.raw();
    assert_eq!(cmd(&mut r, &["AUTH", "dan", "x"]), "+OK\r\n");
    assert_eq!(cmd(&mut r, &["RESET"]), "+RESET\r\n");
    assert_eq!(cmd(&mut r, &["ACL", "WHOAMI"]), "$7\r\ndefault\r\n");
    // The redis crate with a user name in the URL, and redis-cli --user/--pass.
    let url = format!("redis://alice:alicepw@127.0.0.1:{}/", s.port);
    let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
    let who: String = redis::cmd("ACL").arg("WHOAMI").query(&mut con).unwrap();
    assert_eq!(who, "alice");
    let out = s.cli(&["--no-auth-warning", "--user", "carol", "--pass", "secret", "ACL", "WHOAMI"]);
    assert_eq!(out.trim(), "carol");
}

#[test]
fn default_user_from_the_file_password_or_off() {
    // default with a password: NOAUTH until AUTH; HELLO AUTH works for any user.
    let file = write_file("def.acl", "user default on >defpw ~* &* +@all\nuser app on >apppw +@all ~*\n");
    let s = Server::start(&["--auth-file", file.to_str().unwrap()]);
    let mut c = s.raw();
    assert_eq!(cmd(&mut c, &["SET", "k", "v"]), NOAUTH);
    assert_eq!(cmd(&mut c, &["AUTH", "defpw"]), "+OK\r\n");
    assert_eq!(cmd(&mut c, &["SET", "k", "v"]), "+OK\r\n");
    let mut h = s.raw();
    let hello = cmd(&mut h, &["HELLO", "2", "AUTH", "app", "apppw"]);
    assert!(hello.starts_with("*14\r\n"), "{hello}");
    assert_eq!(cmd(&mut h, &["GET", "k"]), "$1\r\nv\r\n");
    drop(s);

    // default off: nobody gets in as default, even with the right password.
    let file = write_file("off.acl", "user default off >defpw\nuser app on >apppw +ping\n");
    let s = Server::start(&["--auth-file", file.to_str().unwrap()]);
    let mut c = s.raw();
    assert_eq!(cmd(&mut c, &["PING"]), NOAUTH);
    assert_eq!(cmd(&mut c, &["AUTH", "defpw"]), WRONGPASS);
    assert_eq!(cmd(&mut c, &["AUTH", "default", "defpw"]), WRONGPASS);
    assert_eq!(cmd(&mut c, &["AUTH", "app", "apppw"]), "+OK\r\n");
    assert_eq!(cmd(&mut c, &["PING"]), "+PONG\r\n");
    // `user default on nopass` in the file is the open server.
    drop(s);
    let file = write_file("open.acl", "user default on nopass ~* &* +@all\n");
    let s = Server::start(&["--auth-file", file.to_str().unwrap()]);
    assert_eq!(cmd(&mut s.raw(), &["PING"]), "+PONG\r\n");
}

// ---------------------------------------------------------------------------------------------
// TLS

/// A CA, a server certificate for 127.0.0.1 (IP SAN) and localhost signed by it, a client
/// certificate signed by it, and a second, unrelated CA.
struct Certs {
    dir: PathBuf,
}

impl Certs {
    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_string()
    }

    fn make() -> Certs {
        Certs { dir: common::certs::make("IP:127.0.0.1,DNS:localhost") }
    }

    /// Starts a server with a TLS listener on a free port; returns it and the TLS port.
    fn server(&self, extra: &[&str]) -> (Server, u16) {
        let port = free_port();
        let (p, cert, key) = (port.to_string(), self.path("server.crt"), self.path("server.key"));
        let mut args = vec!["--tls-port", &p, "--tls-cert-file", &cert, "--tls-key-file", &key];
        args.extend(extra);
        (Server::start(&args), port)
    }

    /// `redis-cli --tls --cacert ca.crt -p PORT args...`: (success, stdout + stderr).
    fn cli(&self, port: u16, extra: &[&str], args: &[&str]) -> (bool, String) {
        let out = Command::new("redis-cli")
            .args(["--tls", "--cacert", &self.path("ca.crt"), "-p", &port.to_string()])
            .args(extra)
            .args(args)
            .output()
            .expect("redis-cli is installed");
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    }

    /// A blocking rustls client connection to 127.0.0.1:port, verifying with our CA.
    fn rustls_client(&self, port: u16) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls::pki_types::CertificateDer::pem_file_iter(self.path("ca.crt")).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap().to_owned();
        let conn = rustls::ClientConnection::new(Arc::new(cfg), name).unwrap();
        let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
        // A hang (a lost edge inside the server) fails the test instead of blocking it.
        tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        rustls::StreamOwned::new(conn, tcp)
    }
}

#[test]
fn tls_port_serves_redis_cli_and_auth_over_tls() {
    let certs = Certs::make();
    let (s, tls) = certs.server(&["--requirepass", "pw"]);
    let auth = ["--no-auth-warning", "-a", "pw"];
    assert_eq!(certs.cli(tls, &auth, &["PING"]), (true, "PONG\n".into()));
    assert_eq!(certs.cli(tls, &auth, &["SET", "greeting", "hello over tls"]), (true, "OK\n".into()));
    assert_eq!(certs.cli(tls, &auth, &["GET", "greeting"]), (true, "hello over tls\n".into()));
    let (_, out) = certs.cli(tls, &[], &["GET", "greeting"]);
    assert!(out.contains("NOAUTH"), "{out}");
    // The plaintext port serves the same data.
    assert_eq!(s.cli(&["--no-auth-warning", "-a", "pw", "GET", "greeting"]).trim(), "hello over tls");
    // A CA that did not sign the server's certificate: redis-cli refuses to talk.
    let out = Command::new("redis-cli")
        .args(["--tls", "--cacert", &certs.path("other-ca.crt"), "-p", &tls.to_string(), "PING"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!text.contains("PONG"), "{text}");
    // CONFIG GET tls-port.
    let (_, out) = certs.cli(tls, &auth, &["CONFIG", "GET", "tls-port"]);
    assert_eq!(out, format!("tls-port\n{tls}\n"));
}

#[test]
fn plaintext_and_garbage_on_the_tls_port_fail_cleanly() {
    let certs = Certs::make();
    let (s, tls) = certs.server(&[]);
    // A plaintext RESP client on the TLS port: the server answers with a TLS alert (or just
    // closes), never with a RESP reply, and closes the connection.
    let mut raw = TcpStream::connect(("127.0.0.1", tls)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    raw.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let (bytes, closed) = read_to_close(&mut raw);
    assert!(closed, "the server closes a non-TLS client");
    assert!(!bytes.windows(4).any(|w| w == b"PONG"), "{bytes:?}");
    assert!(bytes.is_empty() || bytes[0] == 0x15, "a TLS alert record or nothing: {bytes:?}");
    // redis-cli without --tls fails too.
    let out = Command::new("redis-cli").args(["-p", &tls.to_string(), "PING"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("PONG"));
    // A connection that sends half a ClientHello and hangs up, and one that sends nothing.
    let mut half = TcpStream::connect(("127.0.0.1", tls)).unwrap();
    half.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).unwrap();
    drop(half);
    let idle = TcpStream::connect(("127.0.0.1", tls)).unwrap();
    // The server is unhurt: TLS and plaintext clients are served while `idle` stays open.
    assert_eq!(certs.cli(tls, &[], &["PING"]), (true, "PONG\n".into()));
    assert_eq!(s.cli(&["PING"]).trim(), "PONG");
    drop(idle);
}

#[test]
fn tls_large_values_and_pipelined_bursts_round_trip() {
    let certs = Certs::make();
    let (s, tls) = certs.server(&[]);
    let mut c = certs.rustls_client(tls);
    // A value of several MB: many TLS records each way, the reply larger than any socket
    // buffer (the server's write side must keep WRITABLE interest for leftover ciphertext).
    let value: Vec<u8> = (0..6 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let mut req = format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${}\r\n", value.len()).into_bytes();
    req.extend_from_slice(&value);
    req.extend_from_slice(b"\r\n");
    c.write_all(&req).unwrap();
    assert_eq!(read_reply(&mut c), b"+OK\r\n");
    c.write_all(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n").unwrap();
    let got = read_bulk(&mut c);
    assert!(got == value, "GET big: {} bytes back, content differs", got.len());
    // A pipelined burst written at once: many requests arrive in few records, so one socket
    // read decrypts more than the server reads per turn. Every reply must come back without
    // the client sending anything more (no edge would announce data already inside rustls).
    let n = 20_000;
    let mut burst = Vec::new();
    for i in 0..n {
        let (k, v) = (format!("k{i}"), format!("v{i}"));
        burst.extend_from_slice(
            format!("*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n", k.len(), v.len()).as_bytes(),
        );
        burst.extend_from_slice(b"*2\r\n$4\r\nINCR\r\n$7\r\ncounter\r\n");
    }
    c.write_all(&burst).unwrap();
    for i in 0..n {
        assert_eq!(read_reply(&mut c), b"+OK\r\n", "SET #{i}");
        assert_eq!(read_reply(&mut c), format!(":{}\r\n", i + 1).into_bytes(), "INCR #{i}");
    }
    // The same with one TLS record per request, all sent in one go: a single socket read
    // then holds many small records, whose plaintext is less than a read buffer. The server
    // must go on reading the socket until it is drained before it waits for the next edge.
    c.conn.set_buffer_limit(None);
    for i in 0..n {
        let k = format!("r{i}");
        let req = format!("*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n$1\r\nx\r\n", k.len());
        c.conn.writer().write_all(req.as_bytes()).unwrap();
    }
    while c.conn.wants_write() {
        c.conn.write_tls(&mut c.sock).unwrap();
    }
    for i in 0..n {
        assert_eq!(read_reply(&mut c), b"+OK\r\n", "SET r{i} (one record each)");
    }
    // Small requests one at a time after the bursts: nothing stale is left in the pipe.
    c.write_all(b"*2\r\n$3\r\nGET\r\n$6\r\nk19999\r\n").unwrap();
    assert_eq!(read_reply(&mut c), b"$6\r\nv19999\r\n");
    // The plaintext side sees the same data.
    assert_eq!(s.cli(&["STRLEN", "big"]).trim(), value.len().to_string());
    // QUIT over TLS: +OK, then the connection closes.
    c.write_all(b"*1\r\n$4\r\nQUIT\r\n").unwrap();
    assert_eq!(read_reply(&mut c), b"+OK\r\n");
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    assert!(rest.is_empty());
}

/// Reads one bulk string reply ($<len>\r\n<bytes>\r\n) of any size.
fn read_bulk(s: &mut impl Read) -> Vec<u8> {
    let mut header = Vec::new();
    let mut byte = [0u8; 1];
    while !header.ends_with(b"\r\n") {
        s.read_exact(&mut byte).expect("bulk header");
        header.push(byte[0]);
    }
    assert_eq!(header[0], b'$', "{:?}", String::from_utf8_lossy(&header));
    let len: usize = std::str::from_utf8(&header[1..header.len() - 2]).unwrap().parse().unwrap();
    let mut body = vec![0u8; len + 2];
    s.read_exact(&mut body).expect("bulk body");
    body.truncate(len);
    body
}

/// `goblin-core tls-ping` runs client_config + server_name + connect_client (the replica's
/// path): it verifies the IP SAN, a DNS override, and refuses a wrong CA or a wrong name.
#[test]
fn client_side_verifies_the_ca_and_the_server_name() {
    let certs = Certs::make();
    let (_s, tls) = certs.server(&[]);
    let ping = |extra: &[&str]| {
        let out = bin().args(["tls-ping", "--port", &tls.to_string()]).args(extra).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let ca = certs.path("ca.crt");
    let (ok, out, err) = ping(&["--ca", &ca]);
    assert!(ok && out.trim() == "+PONG", "{out}{err}");
    let (ok, out, _) = ping(&["--ca", &ca, "--server-name", "localhost"]);
    assert!(ok && out.trim() == "+PONG");
    let (ok, _, err) = ping(&["--ca", &certs.path("other-ca.crt")]);
    assert!(!ok && err.contains("UnknownIssuer"), "{err}");
    let (ok, _, err) = ping(&["--ca", &ca, "--server-name", "wrong.example"]);
    assert!(!ok && err.contains("not valid for name"), "{err}");
    // The system trust store does not know our test CA.
    let (ok, _, err) = ping(&[]);
    assert!(!ok && err.contains("UnknownIssuer"), "{err}");
}

#[test]
fn tls_client_certificates_when_required() {
    let certs = Certs::make();
    let ca = certs.path("ca.crt");
    let (_s, tls) = certs.server(&["--tls-ca-cert-file", &ca, "--tls-auth-clients", "yes"]);
    let (cert, key) = (certs.path("client.crt"), certs.path("client.key"));
    assert_eq!(certs.cli(tls, &["--cert", &cert, "--key", &key], &["PING"]), (true, "PONG\n".into()));
    let (_, out) = certs.cli(tls, &[], &["PING"]);
    assert!(!out.contains("PONG"), "no client certificate: refused; got {out}");
    drop(_s);
    let (_s, tls) = certs.server(&["--tls-ca-cert-file", &ca, "--tls-auth-clients", "optional"]);
    assert_eq!(certs.cli(tls, &[], &["PING"]), (true, "PONG\n".into()));
    assert_eq!(certs.cli(tls, &["--cert", &cert, "--key", &key], &["PING"]), (true, "PONG\n".into()));
}

#[test]
fn tls_configuration_problems_stop_startup_naming_the_file() {
    let certs = Certs::make();
    let p = free_port().to_string();
    let (cert, key) = (certs.path("server.crt"), certs.path("server.key"));
    let err = startup_error(&["--tls-port", &p]);
    assert!(err.contains("--tls-port needs --tls-cert-file and --tls-key-file"), "{err}");
    let missing = temp_path("missing.crt");
    let m = missing.to_str().unwrap();
    let err = startup_error(&["--tls-port", &p, "--tls-cert-file", m, "--tls-key-file", &key]);
    assert!(err.contains("--tls-cert-file") && err.contains(m), "{err}");
    let err = startup_error(&["--tls-port", &p, "--tls-cert-file", &cert, "--tls-key-file", m]);
    assert!(err.contains("--tls-key-file") && err.contains(m), "{err}");
    // A key that is not a key, and a key that does not belong to the certificate.
    let err = startup_error(&["--tls-port", &p, "--tls-cert-file", &cert, "--tls-key-file", &cert]);
    assert!(err.contains("--tls-key-file") && err.contains(&cert), "{err}");
    let other = certs.path("client.key");
    let err = startup_error(&["--tls-port", &p, "--tls-cert-file", &cert, "--tls-key-file", &other]);
    assert!(err.contains("--tls-cert-file"), "{err}");
    let err = startup_error(&[
        "--tls-port",
        &p,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-auth-clients",
        "yes",
    ]);
    assert!(err.contains("needs --tls-ca-cert-file"), "{err}");
    let _ = Path::new(&cert);
}

/// ACL SAVE writes every user into `--auth-file` as ACL LIST prints them, and ACL LOAD reads
/// the file again: users it changes follow their new rules at once, connections of users it
/// drops are closed, a file with an error changes nothing; without `--auth-file` both answer
/// Redis's error.
#[test]
fn acl_save_and_load_use_the_auth_file() {
    let file = write_file("saveload.acl", "user alice on >pw ~app:* +@all\nuser bob on >pw ~* +get\n");
    let s = Server::start(&["--auth-file", file.to_str().unwrap()]);
    let mut admin = s.raw();
    assert_eq!(
        cmd(&mut admin, &["ACL", "SETUSER", "carol", "on", ">pw", "%R~*", "(+set ~w:*)", "+get"]),
        "+OK\r\n"
    );
    assert_eq!(cmd(&mut admin, &["ACL", "SAVE"]), "+OK\r\n");
    let saved = std::fs::read_to_string(&file).unwrap();
    let list = cmd(&mut admin, &["ACL", "LIST"]);
    for line in saved.lines() {
        assert!(list.contains(line), "{line} not in {list}");
    }
    assert!(
        saved.contains("user carol on sanitize-payload #")
            && saved.contains("(~w:* resetchannels -@all +set)"),
        "{saved}"
    );
    let mut alice = s.raw();
    assert_eq!(cmd(&mut alice, &["AUTH", "alice", "pw"]), "+OK\r\n");
    assert_eq!(cmd(&mut alice, &["SET", "app:1", "v"]), "+OK\r\n");
    let mut bob = s.raw();
    assert_eq!(cmd(&mut bob, &["AUTH", "bob", "pw"]), "+OK\r\n");
    // The file now narrows alice to reading and drops bob; carol's saved line is kept.
    let carol = saved.lines().find(|l| l.starts_with("user carol")).unwrap();
    std::fs::write(&file, format!("user alice on >pw %R~app:* +@all\n{carol}\n")).unwrap();
    assert_eq!(cmd(&mut admin, &["ACL", "LOAD"]), "+OK\r\n");
    assert!(cmd(&mut alice, &["SET", "app:1", "v"]).starts_with("-NOPERM"));
    assert_eq!(cmd(&mut alice, &["GET", "app:1"]), "$1\r\nv\r\n");
    let (_, closed) = read_to_close(&mut bob);
    assert!(closed, "bob's connection was closed with bob");
    let mut c = s.raw();
    assert_eq!(cmd(&mut c, &["AUTH", "carol", "pw"]), "+OK\r\n");
    assert_eq!(cmd(&mut c, &["SET", "w:1", "x"]), "+OK\r\n");
    // A file with an error: nothing changes.
    std::fs::write(&file, "user alice on >pw ~* +@all\nuser dave on %X~a\n").unwrap();
    let err = cmd(&mut admin, &["ACL", "LOAD"]);
    assert!(err.contains("line 2") && err.contains("no change to the previously active ACL rules"), "{err}");
    assert!(cmd(&mut alice, &["SET", "app:1", "v"]).starts_with("-NOPERM"));
    // Without --auth-file: Redis's answer.
    let plain = Server::start(&[]);
    let mut p = plain.raw();
    for sub in ["LOAD", "SAVE"] {
        let e = cmd(&mut p, &["ACL", sub]);
        assert!(e.starts_with("-ERR This Redis instance is not configured to use an ACL file."), "{e}");
    }
}
