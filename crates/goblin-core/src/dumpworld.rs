//! `goblin-core dumpworld`: fetches a fork-time snapshot from a running server with
//! GOBLIN.DUMPWORLD, verifies it while it streams in, and installs it atomically for a later
//! `--load` (the way a fresh replica of an established primary is bootstrapped).
//!
//! The reply is one RESP2 bulk string. Its bytes go to a temporary file next to the target
//! while the snapshot reader checks every block as it passes; only a snapshot that read back
//! whole (checksums, counts, trailer, exact length) is fsynced and renamed over the target.
//!
//! Against a server with `--auth-file` or `--requirepass`, the tool authenticates first, as a
//! replica does with its upstream: `--user` (default `default`) and `--password-file`, whose
//! first line is the password (never given on the command line).

use std::io::{self, BufRead, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};
use tracing::info;

/// Passes through what is read from `inner`, copying it to `copy`.
struct Tee<R, W> {
    inner: R,
    copy: W,
}

impl<R: Read, W: Write> Read for Tee<R, W> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.copy.write_all(&buf[..n])?;
        Ok(n)
    }
}

/// `--user` and `--password-file`: (user, password) to AUTH with, or None without a file.
fn credentials(user: Option<&str>, password_file: Option<&Path>) -> Result<Option<(String, String)>, String> {
    let Some(path) = password_file else {
        return Ok(None);
    };
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--password-file {}: {e}", path.display()))?;
    let password = text.lines().next().unwrap_or("").to_string();
    if password.is_empty() {
        return Err(format!("--password-file {}: the first line is empty", path.display()));
    }
    Ok(Some((user.unwrap_or("default").to_string(), password)))
}

pub fn fetch(
    host: &str,
    port: u16,
    output: &Path,
    user: Option<&str>,
    password_file: Option<&Path>,
) -> Result<(), String> {
    let auth = credentials(user, password_file)?;
    let sock =
        TcpStream::connect((host, port)).map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
    sock.set_read_timeout(Some(Duration::from_secs(120))).map_err(|e| e.to_string())?;
    let mut r = io::BufReader::with_capacity(1 << 20, &sock);
    if let Some((user, password)) = &auth {
        // AUTH first, answered before GOBLIN.DUMPWORLD is sent: a refusal stops here.
        let mut req = Vec::new();
        resp::reply::bulk_array(&mut req, &[b"AUTH".as_slice(), user.as_bytes(), password.as_bytes()]);
        (&sock).write_all(&req).map_err(|e| format!("sending AUTH: {e}"))?;
        let mut line = Vec::new();
        r.read_until(b'\n', &mut line).map_err(|e| format!("reading the AUTH reply: {e}"))?;
        let line = String::from_utf8_lossy(&line).trim_end().to_string();
        if line != "+OK" {
            return Err(format!(
                "{host}:{port} refused AUTH as user '{user}': {}",
                line.strip_prefix('-').unwrap_or(if line.is_empty() {
                    "the connection closed"
                } else {
                    &line
                })
            ));
        }
    }
    (&sock)
        .write_all(b"*1\r\n$16\r\nGOBLIN.DUMPWORLD\r\n")
        .map_err(|e| format!("sending GOBLIN.DUMPWORLD: {e}"))?;
    let mut header = Vec::new();
    r.read_until(b'\n', &mut header).map_err(|e| format!("reading the reply: {e}"))?;
    let header = String::from_utf8_lossy(&header).trim_end().to_string();
    let len: u64 = match header.strip_prefix('$').and_then(|n| n.parse().ok()) {
        Some(n) => n,
        None if header.starts_with("-NOAUTH") => {
            return Err(format!("{host}:{port} refused: {} (give --user and --password-file)", &header[1..]))
        }
        None if header.starts_with('-') => return Err(format!("{host}:{port} refused: {}", &header[1..])),
        None => return Err(format!("unexpected reply from {host}:{port}: '{header}'")),
    };
    info!("receiving a {len}-byte snapshot from {host}:{port}");
    let started = Instant::now();
    let mut last_log = Instant::now();
    let mut progress = |p: &snapshot::Progress| {
        if last_log.elapsed() >= Duration::from_secs(1) {
            last_log = Instant::now();
            let secs = started.elapsed().as_secs_f64().max(1e-9);
            info!("{} of {len} bytes, {} keys ({:.1} MB/s)", p.bytes, p.keys, p.bytes as f64 / secs / 1e6);
        }
    };
    let summary = snapshot::save_atomic(output, |file| {
        let mut body = (&mut r).take(len);
        let (ks, meta, summary) =
            snapshot::read_dbs(Tee { inner: &mut body, copy: &mut *file }, &mut progress).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("the snapshot received is damaged: {e}"))
            })?;
        if body.limit() != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the snapshot ended before the reply did",
            ));
        }
        drop(ks);
        let mut crlf = [0u8; 2];
        r.read_exact(&mut crlf)?;
        if &crlf != b"\r\n" {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "the reply does not end with CRLF"));
        }
        Ok((meta, summary))
    });
    let (meta, summary) = summary.map_err(|e| format!("installing {}: {e}", output.display()))?;
    info!(
        "installed {} ({} keys, {len} bytes, lineage {} at offset {}) in {:.2} s",
        output.display(),
        summary.keys,
        meta.replid,
        meta.logical_offset,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
