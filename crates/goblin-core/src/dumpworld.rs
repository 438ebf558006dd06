//! `goblin-core dumpworld`: fetches a fork-time snapshot from a running server with
//! GOBLIN.DUMPWORLD, verifies it while it streams in, and installs it atomically for a later
//! `--load` (the way a fresh replica of an established primary is bootstrapped).
//!
//! The tool asks for the EOF-marked reply (`GOBLIN.DUMPWORLD EOF`: `$EOF:<mark>`, the snapshot,
//! the mark), which the server writes in one pass over its dataset; the plain form, one RESP2
//! bulk string whose length the server finds by a counting pass first, is read too. The bytes
//! go to a temporary file next to the target while the snapshot reader checks every block as
//! it passes; only a snapshot that read back whole (checksums, counts, trailer, then exactly
//! the mark or the announced length) is fsynced and renamed over the target.
//!
//! Against a server with `--auth-file` or `--requirepass`, the tool authenticates first, as a
//! replica does with its upstream: `--user` (default `default`) and `--password-file`, whose
//! first line is the password (never given on the command line).

use std::io::{self, BufRead, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};
use tracing::info;

/// The length of the mark around an EOF-marked reply (`$EOF:<mark>`, ..., `<mark>`).
const MARK_LEN: usize = 40;

/// The EOF-marked reply's body: what `inner` gives up to the mark, which ends it. The last
/// MARK_LEN bytes read are held back until more follow (then they were data) or they are
/// the mark (then the body has ended: the server sends nothing after it). The connection
/// closing first is an error. (Data that happens to end with the 40 random characters is as
/// likely as guessing them.)
struct UntilMark<'a, R> {
    inner: R,
    mark: &'a [u8],
    window: Vec<u8>,
    done: bool,
}

impl<R: Read> Read for UntilMark<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.done {
                return Ok(0);
            }
            if self.window.len() > MARK_LEN {
                let n = buf.len().min(self.window.len() - MARK_LEN);
                buf[..n].copy_from_slice(&self.window[..n]);
                self.window.drain(..n);
                return Ok(n);
            }
            if self.window == self.mark {
                self.done = true;
                continue;
            }
            let mut chunk = [0u8; 64 * 1024];
            let got = self.inner.read(&mut chunk)?;
            if got == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the connection closed before the snapshot's end mark",
                ));
            }
            self.window.extend_from_slice(&chunk[..got]);
        }
    }
}

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
        .write_all(b"*2\r\n$16\r\nGOBLIN.DUMPWORLD\r\n$3\r\nEOF\r\n")
        .map_err(|e| format!("sending GOBLIN.DUMPWORLD: {e}"))?;
    let mut header = Vec::new();
    r.read_until(b'\n', &mut header).map_err(|e| format!("reading the reply: {e}"))?;
    let header = String::from_utf8_lossy(&header).trim_end().to_string();
    // (announced length, or the end mark)
    let form: Result<u64, String> = match header.strip_prefix('$') {
        Some(rest) if rest.starts_with("EOF:") && rest.len() == 4 + MARK_LEN => Err(rest[4..].to_string()),
        Some(n) if n.parse::<u64>().is_ok() => Ok(n.parse().unwrap_or(0)),
        _ if header.starts_with("-NOAUTH") => {
            return Err(format!("{host}:{port} refused: {} (give --user and --password-file)", &header[1..]))
        }
        _ if header.starts_with('-') => return Err(format!("{host}:{port} refused: {}", &header[1..])),
        _ => return Err(format!("unexpected reply from {host}:{port}: '{header}'")),
    };
    let len = match &form {
        Ok(n) => {
            info!("receiving a {n}-byte snapshot from {host}:{port}");
            n.to_string()
        }
        Err(_) => {
            info!("receiving a snapshot from {host}:{port} (EOF-marked)");
            "?".to_string()
        }
    };
    let started = Instant::now();
    let mut last_log = Instant::now();
    let mut progress = |p: &snapshot::Progress| {
        if last_log.elapsed() >= Duration::from_secs(1) {
            last_log = Instant::now();
            let secs = started.elapsed().as_secs_f64().max(1e-9);
            info!("{} of {len} bytes, {} keys ({:.1} MB/s)", p.bytes, p.keys, p.bytes as f64 / secs / 1e6);
        }
    };
    let damaged = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    let summary = snapshot::save_atomic(output, |file| {
        // With a length, the reader may not go past it; with a mark, it ends there, and
        // nothing may follow the snapshot's trailer before it.
        let body: Box<dyn Read + '_> = match &form {
            Ok(len) => Box::new((&mut r).take(*len)),
            Err(mark) => {
                Box::new(UntilMark { inner: &mut r, mark: mark.as_bytes(), window: Vec::new(), done: false })
            }
        };
        let mut body = Tee { inner: body, copy: &mut *file };
        let (ks, meta, summary) = snapshot::read_dbs(&mut body, &mut progress)
            .map_err(|e| damaged(format!("the snapshot received is damaged: {e}")))?;
        drop(ks);
        drop(body);
        if let Ok(len) = form {
            if summary.bytes != len {
                return Err(damaged("the snapshot ended before the reply did".into()));
            }
            let mut crlf = [0u8; 2];
            r.read_exact(&mut crlf)?;
            if &crlf != b"\r\n" {
                return Err(damaged("the reply does not end with CRLF".into()));
            }
        }
        Ok((meta, summary))
    });
    let (meta, summary) = summary.map_err(|e| format!("installing {}: {e}", output.display()))?;
    info!(
        "installed {} ({} keys, {} bytes, lineage {} at offset {}) in {:.2} s",
        output.display(),
        summary.keys,
        summary.bytes,
        meta.replid,
        meta.logical_offset,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
