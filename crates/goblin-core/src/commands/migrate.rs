//! MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password]
//! [AUTH2 username password] [KEYS key ...]: moves keys to another Redis-protocol server
//! (redis-server or goblin-core) as Redis does, with the target's RESTORE.
//!
//! The transfer runs on the server thread and blocks it for at most about `timeout` per step
//! (connect, write, each reply), as in Redis: MIGRATE is an administrative command, and a
//! key is gone from here only once the target has answered OK for it. Each run opens its
//! own connection (Redis keeps one cached for 10 s; a fresh one costs a round trip, not a
//! correctness difference). Sent, in one pipeline: `AUTH`/`AUTH2` if given, `SELECT db`, then
//! `RESTORE key ttl payload [REPLACE]` per key (ttl: the milliseconds left, 0 for none; the
//! payload: DUMP's). Keys that do not exist (or are past their deadline) are left out; none
//! at all answers `NOKEY`. Without COPY each key the target took is deleted here, through the
//! engine's DEL, so the deletion is journaled and replicated like any write.

use crate::conn::Conn;
use crate::server::Server;
use engine::errors;
use resp::reply;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

struct Request<'a> {
    host: &'a [u8],
    /// None: not a port number (Redis reads it with `atoi` and fails to connect).
    port: Option<u16>,
    db: i64,
    timeout: Duration,
    copy: bool,
    replace: bool,
    /// AUTH's arguments: (None, password) or (Some(user), password).
    auth: Option<(Option<&'a [u8]>, &'a [u8])>,
    keys: Vec<&'a [u8]>,
}

fn parse<'a>(args: &[&'a [u8]]) -> Result<Request<'a>, &'static [u8]> {
    let db = util_int(args[4])?;
    let timeout = util_int(args[5])?;
    let mut r = Request {
        host: args[1],
        port: engine::util::parse_i64(args[2]).and_then(|p| u16::try_from(p).ok()).filter(|&p| p > 0),
        db,
        // Redis: a timeout of 0 or less means one second.
        timeout: Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 }),
        copy: false,
        replace: false,
        auth: None,
        keys: Vec::new(),
    };
    let mut i = 6;
    let mut keys_at = None;
    while i < args.len() {
        let a = args[i];
        if a.eq_ignore_ascii_case(b"copy") {
            r.copy = true;
        } else if a.eq_ignore_ascii_case(b"replace") {
            r.replace = true;
        } else if a.eq_ignore_ascii_case(b"auth") && i + 1 < args.len() {
            r.auth = Some((None, args[i + 1]));
            i += 1;
        } else if a.eq_ignore_ascii_case(b"auth2") && i + 2 < args.len() {
            r.auth = Some((Some(args[i + 1]), args[i + 2]));
            i += 2;
        } else if a.eq_ignore_ascii_case(b"keys") {
            if !args[3].is_empty() {
                return Err(
                    b"ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                );
            }
            keys_at = Some(i + 1);
            break;
        } else {
            return Err(errors::SYNTAX);
        }
        i += 1;
    }
    r.keys = match keys_at {
        Some(at) => args[at..].to_vec(),
        None => vec![args[3]],
    };
    Ok(r)
}

fn util_int(a: &[u8]) -> Result<i64, &'static [u8]> {
    engine::util::parse_i64(a).ok_or(errors::NOT_INTEGER)
}

fn push_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    reply::bulk_array(out, args);
}

/// Reads one complete reply from `s` into `buf` (which may hold more already): Ok(true) if it
/// is an error reply, with its text in `err`.
fn read_reply(s: &mut TcpStream, buf: &mut Vec<u8>, err: &mut Vec<u8>) -> std::io::Result<bool> {
    loop {
        match resp::decode_frame(buf) {
            Ok(Some((frame, used))) => {
                let is_err = match &frame {
                    resp::Frame::Error(e) => {
                        err.clear();
                        err.extend_from_slice(e);
                        true
                    }
                    _ => false,
                };
                buf.drain(..used);
                return Ok(is_err);
            }
            Ok(None) => {}
            Err(e) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())),
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

pub(crate) fn migrate(s: &mut Server, c: &mut Conn, args: &[&[u8]], now: i64) {
    let r = match parse(args) {
        Ok(r) => r,
        Err(e) => return reply::error(&mut c.out, e),
    };
    // What to send: the keys that exist here, live, with their payload and time left.
    let mut found: Vec<(&[u8], i64, Vec<u8>)> = Vec::new();
    for &key in &r.keys {
        let ks = &s.engine.ks;
        let Some((v, deadline)) = ks.get_with_expire(key) else { continue };
        // Live through its deadline's millisecond (the keyspace's rule); one with 0 ms left
        // travels with 1 ms, since a RESTORE TTL of 0 would make it persistent there.
        if deadline.is_some_and(|d| d < now) {
            continue;
        }
        let ttl = deadline.map_or(0, |d| (d - now).max(1));
        found.push((key, ttl, engine::rdb::dump(v)));
    }
    if found.is_empty() {
        return reply::simple(&mut c.out, b"NOKEY");
    }
    let mut pipeline = Vec::new();
    let mut replies = 0usize;
    match r.auth {
        Some((None, pw)) => push_command(&mut pipeline, &[b"AUTH", pw]),
        Some((Some(user), pw)) => push_command(&mut pipeline, &[b"AUTH", user, pw]),
        None => {}
    }
    if r.auth.is_some() {
        replies += 1;
    }
    push_command(&mut pipeline, &[b"SELECT", r.db.to_string().as_bytes()]);
    replies += 1;
    for (key, ttl, payload) in &found {
        let ttl = ttl.to_string();
        let mut cmd: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), payload];
        if r.replace {
            cmd.push(b"REPLACE");
        }
        push_command(&mut pipeline, &cmd);
    }
    // Connect. Redis's texts: a target that refuses (or a port that is not one) fails its
    // first write; one that does not answer in time, or a name that does not resolve, fails
    // the connection.
    const WRITING: &[u8] = b"IOERR error or timeout writing to target instance";
    const CONNECTING: &[u8] = b"IOERR error or timeout connecting to the client";
    let Some(port) = r.port else { return reply::error(&mut c.out, WRITING) };
    let host = String::from_utf8_lossy(r.host).into_owned();
    let Some(addr) = (host.as_str(), port).to_socket_addrs().ok().and_then(|mut a| a.next()) else {
        return reply::error(&mut c.out, CONNECTING);
    };
    let mut stream = match TcpStream::connect_timeout(&addr, r.timeout) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return reply::error(&mut c.out, WRITING)
        }
        Err(_) => return reply::error(&mut c.out, CONNECTING),
    };
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(r.timeout));
    let _ = stream.set_write_timeout(Some(r.timeout));
    if stream.write_all(&pipeline).is_err() {
        return reply::error(&mut c.out, WRITING);
    }
    let (mut buf, mut err) = (Vec::new(), Vec::new());
    // AUTH and SELECT: an error there fails the whole transfer (nothing was restored).
    for _ in 0..replies {
        match read_reply(&mut stream, &mut buf, &mut err) {
            Ok(false) => {}
            Ok(true) => {
                let mut msg = b"ERR Target instance replied with error: ".to_vec();
                msg.extend_from_slice(&err);
                return reply::error(&mut c.out, &msg);
            }
            Err(_) => return reply::error(&mut c.out, b"IOERR error or timeout reading to target instance"),
        }
    }
    // One reply per RESTORE: the keys the target took go from here (unless COPY); the first
    // error is the reply, as in Redis.
    let mut moved: Vec<&[u8]> = Vec::new();
    let mut first_error: Option<Vec<u8>> = None;
    let mut io_error = false;
    for (key, _, _) in &found {
        match read_reply(&mut stream, &mut buf, &mut err) {
            Ok(false) => moved.push(key),
            Ok(true) => {
                first_error.get_or_insert_with(|| err.clone());
            }
            Err(_) => {
                io_error = true;
                break;
            }
        }
    }
    if !r.copy && !moved.is_empty() {
        let del = engine::lookup(b"del").expect("DEL is in the table");
        let mut cmd: Vec<&[u8]> = vec![b"DEL"];
        cmd.extend(moved.iter().copied());
        let mut scratch = Vec::new();
        s.run_engine(del, &cmd, now, &mut scratch, resp::Proto::Resp2, false);
    }
    if io_error {
        return reply::error(&mut c.out, b"IOERR error or timeout reading to target instance");
    }
    match first_error {
        Some(e) => {
            let mut msg = b"ERR Target instance replied with error: ".to_vec();
            msg.extend_from_slice(&e);
            reply::error(&mut c.out, &msg)
        }
        None => reply::ok(&mut c.out),
    }
}

/// MIGRATE's keys (COMMAND GETKEYS): after the KEYS option when the key argument is empty,
/// else the key argument (as Redis's `migrateGetKeys`).
pub(crate) fn key_positions(cmd: &[&[u8]]) -> Vec<usize> {
    let mut i = 6;
    while i < cmd.len() {
        let a = cmd[i];
        if a.eq_ignore_ascii_case(b"keys") && cmd.get(3).is_some_and(|k| k.is_empty()) {
            return (i + 1..cmd.len()).collect();
        } else if a.eq_ignore_ascii_case(b"auth") {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"auth2") {
            i += 2;
        }
        i += 1;
    }
    vec![3]
}
