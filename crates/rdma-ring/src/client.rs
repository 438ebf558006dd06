//! A blocking client: RESP commands in, whole replies out (as goblin-ring's `Client`).

use crate::endpoint::{dial, Endpoint};
use goblin_ring::reply::{encode_command, reply_len};
use std::io;
use std::net::ToSocketAddrs;
use std::time::Duration;

/// How long a client polls for a reply before sleeping (see goblin-ring's `DEFAULT_SPIN`).
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// A connection to a goblin-core `--rdma-port` listener.
pub struct Client {
    ep: Endpoint,
    spin: Duration,
    inbuf: Vec<u8>,
    out: Vec<u8>,
}

impl Client {
    /// Connects to `addr` with a receive ring of `ring` bytes, on the fabric the server names.
    pub fn connect(addr: impl ToSocketAddrs, ring: u64) -> io::Result<Client> {
        Ok(Client::from_endpoint(dial(addr, ring, Duration::from_secs(5))?))
    }

    pub fn from_endpoint(ep: Endpoint) -> Client {
        Client { ep, spin: DEFAULT_SPIN, inbuf: Vec::new(), out: Vec::new() }
    }

    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.ep
    }

    /// Writes all of `buf` (raw RESP), waiting for room as needed.
    pub fn send(&mut self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.ep.try_write(buf) {
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.ep.wait(false, self.spin)?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
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

    /// Reads at least one byte into `buf` (blocking); 0 means the server closed.
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.inbuf.is_empty() {
            let n = buf.len().min(self.inbuf.len());
            buf[..n].copy_from_slice(&self.inbuf[..n]);
            self.inbuf.drain(..n);
            return Ok(n);
        }
        self.recv_raw(buf)
    }

    /// Reads from the endpoint, not the reply buffer (blocking); 0 means the server closed.
    fn recv_raw(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if !self.ep.has_input() && !self.ep.peer_closed() {
                self.ep.wait(true, self.spin)?;
            }
            match self.ep.try_read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return r,
            }
        }
    }

    /// Waits for and returns the next whole reply.
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
            let n = self.recv_raw(&mut chunk)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "server closed the connection"));
            }
            self.inbuf.extend_from_slice(&chunk[..n]);
        }
    }
}
