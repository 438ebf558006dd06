//! A blocking client: RESP commands in, whole replies out.

use crate::reply::{encode_command, reply_len};
use crate::Endpoint;
use std::io;
use std::path::Path;
use std::time::Duration;

/// How long a client polls its ring for a reply before sleeping on the doorbell. A reply to a
/// simple command comes back within a few microseconds while the server is spinning too (see
/// goblin-core's `--ring-spin-us`), so most round trips never enter the kernel.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// A connection to a goblin-core `--ring` rendezvous socket.
pub struct Client {
    ep: Endpoint,
    spin: Duration,
    /// Reply bytes read but not yet returned.
    inbuf: Vec<u8>,
    out: Vec<u8>,
}

impl Client {
    /// Connects to the rendezvous socket at `path` and maps the connection's rings.
    pub fn connect(path: impl AsRef<Path>) -> io::Result<Client> {
        let sock = std::os::unix::net::UnixStream::connect(path)?;
        Ok(Client { ep: Endpoint::connect(sock)?, spin: DEFAULT_SPIN, inbuf: Vec::new(), out: Vec::new() })
    }

    /// Sets how long to poll the ring before sleeping (zero: sleep at once).
    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
    }

    pub fn ring_size(&self) -> usize {
        self.ep.ring_size()
    }

    /// Writes all of `buf` (raw RESP), waiting for room as needed.
    pub fn send(&mut self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.ep.try_write(buf) {
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait(false)?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads at least one byte of replies into `buf` (blocking); 0 means the server closed.
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.inbuf.is_empty() {
            let n = buf.len().min(self.inbuf.len());
            buf[..n].copy_from_slice(&self.inbuf[..n]);
            self.inbuf.drain(..n);
            return Ok(n);
        }
        loop {
            // An empty ring is waited on without calling try_read, which would look for the
            // server's EOF with a recv(2) each time; the wait sees the EOF instead.
            if !self.ep.has_input() && !self.ep.peer_closed() {
                self.wait(true)?;
            }
            match self.ep.try_read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return r,
            }
        }
    }

    /// Sends one command and returns its whole reply (raw RESP bytes).
    pub fn query<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<Vec<u8>> {
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        encode_command(args, &mut out);
        let r = self.send(&out);
        self.out = out;
        r?;
        self.read_reply()
    }

    /// Waits for and returns the next whole reply (after [`Client::send`] of raw commands).
    pub fn read_reply(&mut self) -> io::Result<Vec<u8>> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match reply_len(&self.inbuf) {
                Ok(Some(n)) => {
                    let rest = self.inbuf.split_off(n);
                    return Ok(std::mem::replace(&mut self.inbuf, rest));
                }
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
            let n = loop {
                if !self.ep.has_input() && !self.ep.peer_closed() {
                    self.wait(true)?;
                }
                match self.ep.try_read(&mut chunk) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    r => break r?,
                }
            };
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "server closed the connection"));
            }
            self.inbuf.extend_from_slice(&chunk[..n]);
        }
    }

    fn wait(&mut self, read: bool) -> io::Result<()> {
        self.ep.wait(read, self.spin)
    }
}
