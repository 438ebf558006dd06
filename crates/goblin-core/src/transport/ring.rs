//! The `--ring PATH` listener: RESP over shared-memory rings (crates/ring, `goblin-ring`).
//!
//! PATH is a Unix-socket *rendezvous*. Each accepted connection gets a sealed memfd holding two
//! rings of `--ring-size` bytes (passed with SCM_RIGHTS by [`goblin_ring::Endpoint::accept`]);
//! the socket stays open as the connection's liveness channel (its EOF closes the client and
//! frees the memory, whatever killed the client) and doorbell. The connection is then an
//! ordinary [`crate::conn::Conn`] whose stream is [`Stream::Ring`]: the same parser, dispatcher,
//! batches, output buffer and limits as a socket client.
//!
//! Readiness. Bytes arriving in a ring raise no event, so the loop polls the rings itself:
//! [`Server::ring_turn`] runs every turn and reads each ring connection whose ring holds input
//! (with `handle_read`, so the same per-turn read budget as sockets: a busy ring client cannot
//! starve the others). While a ring was active within the last `--ring-spin-us`, the loop's
//! wait has timeout 0 ([`Server::ring_timeout`]), so a ping-pong client's next request is picked
//! up without a wake-up. Before the loop really sleeps, it sets the "wake me" bit on every
//! ring's head (goblin-ring's eventcount; see crates/ring/src/ring.rs): a client that then
//! publishes writes one byte to the socket, which mio reports as readable. Output that does not
//! fit a full ring waits (`WouldBlock`) with the producer's bit set: the client rings when it
//! has read some, and the readable event retries the write (handle_read queues it).

use crate::conn::{Conn, Stream};
use crate::server::Server;
use std::io;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Ring connections and the spin window.
#[derive(Default)]
pub(crate) struct Rings {
    /// The rendezvous socket we created (removed at shutdown).
    pub path: Option<PathBuf>,
    /// Slots of polled connections (ring and RDMA clients), polled every turn.
    pub slots: Vec<usize>,
    /// When a ring last had input.
    last_activity: Option<Instant>,
    /// The rings' wake-me bits are set (the loop armed them before sleeping).
    armed: bool,
}

/// Whether `ring_turn` should read this connection now (the same conditions under which
/// `handle_read` would consume input rather than return at once).
fn wants_read(c: &Conn) -> bool {
    !c.in_read_again && !c.dumping && !c.close_now && !c.close_after_reply
}

impl Server {
    /// The stream, addresses and descriptor of a freshly accepted rendezvous connection.
    pub(crate) fn ring_accept(
        &self,
        s: mio::net::UnixStream,
    ) -> io::Result<(Stream, String, String, i32, bool)> {
        // SAFETY: the descriptor is moved out of the mio stream, which no longer owns it.
        let s = unsafe { std::os::unix::net::UnixStream::from_raw_fd(s.into_raw_fd()) };
        let ep = goblin_ring::Endpoint::accept(s, self.cfg.ring_size)?;
        let fd = ep.sock_fd();
        let path = self.rings.path.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
        let addr = format!("ring:{path}");
        Ok((Stream::Ring(Box::new(ep)), addr.clone(), addr, fd, false))
    }

    /// Reads every ring connection with input waiting (once per loop turn), and a
    /// `--replica-ring` upstream link.
    pub(crate) fn ring_turn(&mut self) {
        let armed = std::mem::take(&mut self.rings.armed);
        let no_clients = self.rings.slots.is_empty();
        let upstream = match self.upstream_polled() {
            Some(e) => {
                if armed {
                    e.disarm_read();
                }
                e.has_input()
            }
            None if no_clients => return,
            None => false,
        };
        if upstream {
            self.rings.last_activity = Some(Instant::now());
            self.replica_io();
        }
        if armed {
            // Awake again: no doorbells while the loop polls anyway.
            for &slot in &self.rings.slots {
                if let Some(Some(c)) = self.conns.get_mut(slot) {
                    if let Some(e) = c.stream.polled() {
                        e.disarm_read();
                    }
                }
            }
        }
        if self.ring_clients_turn() {
            self.rings.last_activity = Some(Instant::now());
        }
    }

    /// Reads the ring clients whose rings hold input; returns whether there were any. Also
    /// called from a busy script's loop turn (the script's own connection is out of its slot
    /// then, so it is skipped).
    pub(crate) fn ring_clients_turn(&mut self) -> bool {
        if self.input_paused {
            // Backpressure: input stays in the rings until Kafka catches up.
            return false;
        }
        let mut active = false;
        let mut i = 0;
        while i < self.rings.slots.len() {
            let slot = self.rings.slots[i];
            i += 1;
            let ready = match self.conns.get_mut(slot) {
                Some(Some(c)) => wants_read(c) && c.stream.polled().is_some_and(|e| e.has_input()),
                _ => false,
            };
            if ready {
                active = true;
                self.handle_read(slot, false);
            }
        }
        active
    }

    /// The loop's wait timeout with ring clients connected: 0 within the spin window after the
    /// last ring input; otherwise the rings are armed (each client will ring its doorbell on
    /// its next publish) and re-checked, and `timeout` stands unless input raced in.
    pub(crate) fn ring_timeout(&mut self, timeout: Duration) -> Duration {
        let upstream = self.upstream_polled().is_some();
        if timeout.is_zero() || (self.rings.slots.is_empty() && !upstream) || self.input_paused {
            return timeout;
        }
        let spin = Duration::from_micros(self.cfg.ring_spin_us as u64);
        if self.rings.last_activity.is_some_and(|t| t.elapsed() < spin) {
            return Duration::ZERO;
        }
        let mut ready = false;
        if let Some(e) = self.upstream_polled() {
            e.drain_doorbell();
            if !matches!(e.arm_read(), Ok(true)) {
                ready = true;
            }
        }
        for &slot in &self.rings.slots {
            if let Some(Some(c)) = self.conns.get_mut(slot) {
                let wants = wants_read(c);
                if let Some(e) = c.stream.polled() {
                    // Doorbells rung since the last sleep: drop them (an EOF is remembered,
                    // and its event still comes).
                    e.drain_doorbell();
                    // Err: corrupted indices, which the next read reports and closes.
                    if !matches!(e.arm_read(), Ok(true)) && wants {
                        ready = true;
                    }
                }
            }
        }
        self.rings.armed = true;
        if ready {
            Duration::ZERO
        } else {
            timeout
        }
    }

    /// A ring or RDMA connection is closing: stop polling it (its memory goes with the stream).
    pub(crate) fn ring_closed(&mut self, slot: usize) {
        self.rings.slots.retain(|&s| s != slot);
    }
}
