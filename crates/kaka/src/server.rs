//! Listener and connections.
//!
//! Each connection has a reader (frames -> `api::dispatch`, in order) and a writer (responses,
//! in request order). Each request takes one credit (`--max-in-flight` per connection) when
//! it is read and gives it back when its response has been written; with no credit left the
//! reader stops reading the socket, so one client cannot queue unbounded work (TCP then
//! pushes back on the client).
//!
//! A response write that makes no progress for `--write-stall-timeout-ms` (the client stopped
//! reading) fails, and a failed write ends the whole connection: the writer stops, and the
//! reader, told through `closed`, stops too, so the socket is closed and nothing (a task, a
//! bulk writer thread) waits on that client forever.

use std::io::IoSlice;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};

use crate::api::{self, Outcome};
use crate::broker::Broker;
use crate::segment::READ_SLICE;
use crate::wire::{Outgoing, Piece, RawHeader};

/// Binds with SO_REUSEADDR so a restart right after a crash can take the port back while old
/// connections linger in TIME_WAIT.
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let sock = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    sock.set_reuseaddr(true)?;
    sock.bind(addr)?;
    sock.listen(1024)
}

pub async fn serve(broker: Arc<Broker>, listener: TcpListener, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            res = listener.accept() => match res {
                Ok((stream, peer)) => {
                    tokio::spawn(connection(stream, peer, broker.clone()));
                }
                Err(e) => {
                    // Typically EMFILE: keep serving existing connections and retry shortly.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }
}

async fn connection(stream: TcpStream, peer: SocketAddr, broker: Arc<Broker>) {
    let _ = stream.set_nodelay(true);
    tracing::debug!(%peer, "connection opened");
    let (rd, mut wr) = stream.into_split();
    // Credit: a permit per request from dispatch until its response is written.
    let credit = Arc::new(Semaphore::new(broker.cfg.max_in_flight.max(1)));
    let (tx, mut rx) =
        mpsc::unbounded_channel::<(oneshot::Receiver<Option<Outgoing>>, OwnedSemaphorePermit)>();
    let stall = Duration::from_millis(broker.cfg.write_stall_timeout_ms);
    // Set when the writer stops, so the reader stops too (see the module comment).
    let (closed_tx, mut closed) = watch::channel(false);
    let writer = tokio::spawn(async move {
        while let Some((pending, _permit)) = rx.recv().await {
            match pending.await {
                Ok(Some(out)) => {
                    let written = match out {
                        Outgoing::Frame(frame) => write_pieces(&mut wr, &[frame.freeze()], stall).await,
                        Outgoing::Pieces(pieces) if needs_bulk_writer(&pieces) => {
                            write_bulk(wr.as_ref().as_raw_fd(), pieces, stall).await
                        }
                        Outgoing::Pieces(pieces) => write_pieces(&mut wr, &in_memory(&pieces), stall).await,
                    };
                    if let Err(e) = written {
                        tracing::debug!(%peer, "write failed: {e}");
                        break;
                    }
                }
                Ok(None) => {} // acks=0 produce: no response
                Err(_) => break,
            }
        }
        let _ = closed_tx.send(true);
        let _ = tokio::time::timeout(stall, wr.shutdown()).await;
    });
    let max = broker.cfg.max_request_bytes;
    let mut rd = BufReader::with_capacity(64 * 1024, rd);
    loop {
        // Out of credit: stop reading this socket until a response goes out.
        let permit = tokio::select! {
            p = credit.clone().acquire_owned() => p,
            _ = closed.wait_for(|c| *c) => break,
        };
        let Ok(permit) = permit else { break };
        // Cancelling a read here loses buffered bytes, which is fine: the connection is over.
        let size = tokio::select! {
            n = rd.read_i32() => n,
            _ = closed.wait_for(|c| *c) => break,
        };
        let size = match size {
            Ok(n) => n,
            Err(_) => break, // closed (possibly mid size field)
        };
        if size < 8 || size as usize > max {
            // As Kafka does for an invalid or over-large size: log and close the connection.
            tracing::warn!(%peer, size, max, "invalid request frame size; closing connection");
            break;
        }
        let mut buf = vec![0u8; size as usize];
        if let Err(e) = rd.read_exact(&mut buf).await {
            tracing::warn!(%peer, size, "truncated request frame ({e}); closing connection");
            break;
        }
        let Some(raw) = RawHeader::parse(&buf) else { break };
        match api::dispatch(&broker, &peer, raw, Bytes::from(buf)) {
            Outcome::Reply(r) => {
                if tx.send((r, permit)).is_err() {
                    break;
                }
            }
            Outcome::Close(why) => {
                tracing::warn!(%peer, api_key = raw.api_key, version = raw.api_version, "{why}; closing connection");
                break;
            }
        }
    }
    drop(tx);
    let _ = writer.await;
    tracing::debug!(%peer, "connection closed");
}

/// Where a vectored write of `pieces` stands: the next unwritten byte is `pieces[i][off..]`.
struct PieceCursor<'a> {
    pieces: &'a [Bytes],
    i: usize,
    off: usize,
}

impl<'a> PieceCursor<'a> {
    fn new(pieces: &'a [Bytes]) -> Self {
        let mut c = PieceCursor { pieces, i: 0, off: 0 };
        c.advance(0);
        c
    }

    fn done(&self) -> bool {
        self.i == self.pieces.len()
    }

    /// The unwritten bytes as at most 64 slices (one vectored system call).
    fn slices(&self) -> Vec<IoSlice<'a>> {
        let first = std::iter::once(&self.pieces[self.i][self.off..]);
        first.chain(self.pieces[self.i + 1..].iter().map(|p| &p[..])).take(64).map(IoSlice::new).collect()
    }

    /// Moves past `n` written bytes, and past any empty pieces after them.
    fn advance(&mut self, mut n: usize) {
        while self.i < self.pieces.len() {
            let left = self.pieces[self.i].len() - self.off;
            if n < left {
                self.off += n;
                return;
            }
            n -= left;
            self.i += 1;
            self.off = 0;
        }
    }
}

/// The error of a response write that made no progress for the stall timeout.
fn stalled() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, "client stopped reading: write stalled")
}

/// Writes every piece in order with vectored writes; fails when one write waits longer than
/// `stall` for room in the socket.
async fn write_pieces<W: AsyncWrite + Unpin>(
    wr: &mut W,
    pieces: &[Bytes],
    stall: Duration,
) -> std::io::Result<()> {
    let mut c = PieceCursor::new(pieces);
    while !c.done() {
        let n =
            tokio::time::timeout(stall, wr.write_vectored(&c.slices())).await.map_err(|_| stalled())??;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        c.advance(n);
    }
    Ok(())
}

/// Responses at least this large are written by a bulk writer thread (see `write_bulk`).
const BULK_BYTES: usize = 1 << 20;

/// Whether a response goes to a bulk writer thread: it is large, or part of it must still be
/// read from a segment (a blocking read the runtime must not do).
fn needs_bulk_writer(pieces: &[Piece]) -> bool {
    pieces.iter().any(|p| matches!(p, Piece::File(_)))
        || pieces.iter().map(Piece::len).sum::<usize>() >= BULK_BYTES
}

/// The bytes of in-memory pieces (shared, not copied); file ranges are skipped, so callers
/// pass only pieces that have none.
fn in_memory(pieces: &[Piece]) -> Vec<Bytes> {
    pieces.iter().filter_map(|p| if let Piece::Mem(b) = p { Some(b.clone()) } else { None }).collect()
}

/// Nice value of a bulk writer thread: about a tenth of a normal thread's CPU share when they
/// compete, so produces preempt it, yet a loaded broker still moves big fetches along (under
/// SCHED_IDLE they could starve).
const BULK_NICE: libc::c_int = 10;

/// Writes a large or streamed response from its own short-lived thread at nice 10, then
/// returns.
///
/// Why: on a machine with few cores, copying tens of MiB into a socket keeps a core busy for
/// tens of milliseconds, and every produce that needs a CPU meanwhile (reader, partition owner,
/// sync thread, writer) waits its turn behind it. (Lowering one's own priority needs no
/// privilege; if it fails the write simply runs at normal priority.) File ranges are read here
/// too, one `READ_SLICE` at a time, each sent before the next is read: blocking disk reads stay
/// off the runtime, and the socket copying comes in slice-sized steps between disk reads.
/// The tokio writer task awaits the result, so the socket sees one writer at a time. The thread
/// writes through its own duplicate of the descriptor, so even if the task were dropped
/// meanwhile (runtime shutdown) it could never write into a reused descriptor number.
/// An error (a failed segment read included) closes the connection: the frame's length is
/// already on the wire, so nothing else could follow it.
///
/// Every wait for room in the socket is bounded by `stall`: a client that stops reading makes
/// the write fail after that long without progress, the thread ends, and the connection closes.
async fn write_bulk(fd: RawFd, pieces: Vec<Piece>, stall: Duration) -> std::io::Result<()> {
    // SAFETY: `fd` is the open socket of the awaiting writer task; dup gives an independent
    // descriptor that the OwnedFd closes when the thread is done.
    let own = unsafe {
        let d = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0);
        if d < 0 {
            return Err(std::io::Error::last_os_error());
        }
        OwnedFd::from_raw_fd(d)
    };
    let (tx, rx) = oneshot::channel();
    let spawned = std::thread::Builder::new().name("kaka-bulk-write".into()).spawn(move || {
        // SAFETY: a plain system call on this thread's own id.
        unsafe {
            // Linux keeps a nice value per thread: this lowers only the bulk writer.
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, BULK_NICE);
        }
        let sock = Sock {
            s: std::net::TcpStream::from(own),
            stall_ms: stall.as_millis().min(i32::MAX as u128) as i32,
        };
        let _ = tx.send(write_pieces_blocking(&sock, &pieces));
    });
    spawned?;
    rx.await.unwrap_or_else(|_| Err(std::io::ErrorKind::BrokenPipe.into()))
}

/// Sends `pieces` in order: runs of in-memory pieces by vectored writes, file ranges slice by
/// slice through one reused buffer.
fn write_pieces_blocking(sock: &Sock, pieces: &[Piece]) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut run_start = 0; // in-memory pieces from here on are not written yet
    for (i, piece) in pieces.iter().enumerate() {
        match piece {
            Piece::Mem(_) => {}
            Piece::File(f) => {
                write_blocking(sock, &in_memory(&pieces[run_start..i]))?;
                run_start = i + 1;
                buf.resize(READ_SLICE.min(f.len), 0);
                let mut done = 0;
                while done < f.len {
                    let n = (f.len - done).min(buf.len());
                    f.seg.read_range(&mut buf[..n], f.pos + done as u64)?;
                    write_all_blocking(sock, &buf[..n])?;
                    done += n;
                }
            }
        }
    }
    write_blocking(sock, &in_memory(&pieces[run_start..]))
}

/// The bulk writer's socket (its own non-blocking descriptor) and its stall bound.
struct Sock {
    s: std::net::TcpStream,
    stall_ms: i32,
}

/// writev until every piece is out (see `write_or_wait`).
fn write_blocking(sock: &Sock, pieces: &[Bytes]) -> std::io::Result<()> {
    let mut c = PieceCursor::new(pieces);
    while !c.done() {
        if let Some(n) = write_or_wait(|| std::io::Write::write_vectored(&mut &sock.s, &c.slices()), sock)? {
            c.advance(n);
        }
    }
    Ok(())
}

/// write until all of `buf` is out (see `write_or_wait`).
fn write_all_blocking(sock: &Sock, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        if let Some(n) = write_or_wait(|| std::io::Write::write(&mut &sock.s, buf), sock)? {
            buf = &buf[n..];
        }
    }
    Ok(())
}

/// One write on the non-blocking socket: Some(bytes written), or None after waiting in
/// poll(2) for room (socket buffer full) or after an interrupted call. A closed peer is an
/// EPIPE error: Rust binaries ignore SIGPIPE. A wait that sees no room for `stall_ms` is a
/// TimedOut error: each wait follows a write that made progress (or is the first), so this
/// bounds the time without progress, and the thread can never hang on a silent client.
fn write_or_wait(
    write: impl FnOnce() -> std::io::Result<usize>,
    sock: &Sock,
) -> std::io::Result<Option<usize>> {
    match write() {
        Ok(0) => Err(std::io::ErrorKind::WriteZero.into()),
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            let mut pfd = libc::pollfd { fd: sock.s.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
            // SAFETY: one pollfd on the stack. EINTR (-1) just loops back to the write; an error
            // or hang-up condition shows up as the next write's error.
            match unsafe { libc::poll(&mut pfd, 1, sock.stall_ms) } {
                0 => Err(stalled()),
                _ => Ok(None),
            }
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Partial writes of any size resume at the right byte, across and within pieces, and
    /// empty pieces are skipped.
    #[test]
    fn piece_cursor_resumes_after_partial_writes() {
        let pieces: Vec<Bytes> =
            [&b"ab"[..], b"", b"cdef", b"", b"g"].iter().map(|p| Bytes::copy_from_slice(p)).collect();
        for step in 1..=8 {
            let mut c = PieceCursor::new(&pieces);
            let mut out = Vec::new();
            while !c.done() {
                let flat: Vec<u8> = c.slices().iter().flat_map(|s| s.iter().copied()).collect();
                let n = step.min(flat.len());
                out.extend_from_slice(&flat[..n]);
                c.advance(n);
            }
            assert_eq!(out, b"abcdefg", "writes of {step} bytes");
        }
        assert!(PieceCursor::new(&[Bytes::new()]).done());
    }
}
