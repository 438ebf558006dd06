//! Listener and connections.
//!
//! Each connection has a reader (frames -> `api::dispatch`, in order) and a writer (responses,
//! in request order). Each request takes one credit (`--max-in-flight` per connection) when
//! it is read and gives it back when its response has been written; with no credit left the
//! reader stops reading the socket, so one client cannot queue unbounded work (TCP then
//! pushes back on the client).

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
use crate::wire::{Outgoing, RawHeader};

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
    let writer = tokio::spawn(async move {
        while let Some((pending, _permit)) = rx.recv().await {
            match pending.await {
                Ok(Some(out)) => {
                    let written = match &out {
                        Outgoing::Frame(frame) => wr.write_all(frame).await,
                        Outgoing::Pieces(pieces)
                            if pieces.iter().map(Bytes::len).sum::<usize>() >= BULK_BYTES =>
                        {
                            write_bulk(wr.as_ref().as_raw_fd(), pieces.clone()).await
                        }
                        Outgoing::Pieces(pieces) => write_pieces(&mut wr, pieces).await,
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
        let _ = wr.shutdown().await;
    });
    let max = broker.cfg.max_request_bytes;
    let mut rd = BufReader::with_capacity(64 * 1024, rd);
    loop {
        // Out of credit: stop reading this socket until a response goes out.
        let Ok(permit) = credit.clone().acquire_owned().await else { break };
        let size = match rd.read_i32().await {
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

/// Writes every piece in order with vectored writes (up to 64 pieces per system call).
async fn write_pieces<W: AsyncWrite + Unpin>(wr: &mut W, pieces: &[Bytes]) -> std::io::Result<()> {
    let (mut i, mut off) = (0usize, 0usize); // next unwritten byte: pieces[i][off..]
    while i < pieces.len() {
        let mut slices = Vec::with_capacity(64);
        slices.push(IoSlice::new(&pieces[i][off..]));
        slices.extend(pieces[i + 1..].iter().take(63).map(|p| IoSlice::new(p)));
        let mut n = wr.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while n > 0 && i < pieces.len() {
            let left = pieces[i].len() - off;
            if n >= left {
                n -= left;
                i += 1;
                off = 0;
            } else {
                off += n;
                n = 0;
            }
        }
        while i < pieces.len() && pieces[i].len() == off {
            i += 1;
            off = 0;
        }
    }
    Ok(())
}

/// Responses at least this large are written by a bulk writer thread (see `write_bulk`).
const BULK_BYTES: usize = 1 << 20;

/// Nice value of a bulk writer thread: about a tenth of a normal thread's CPU share when they
/// compete, so produces preempt it, yet a loaded broker still moves big fetches along (under
/// SCHED_IDLE they could starve).
const BULK_NICE: libc::c_int = 10;

/// Writes a large response from its own short-lived thread at nice 10, then returns.
///
/// Why: on a machine with few cores, copying tens of MiB into a socket keeps a core busy for
/// tens of milliseconds, and every produce that needs a CPU meanwhile (reader, partition owner,
/// sync thread, writer) waits its turn behind it. (Lowering one's own priority needs no
/// privilege; if it fails the write simply runs at normal priority.)
/// The tokio writer task awaits the result, so the socket sees one writer at a time. The thread
/// writes through its own duplicate of the descriptor, so even if the task were dropped
/// meanwhile (runtime shutdown) it could never write into a reused descriptor number.
async fn write_bulk(fd: RawFd, pieces: Vec<Bytes>) -> std::io::Result<()> {
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
        let _ = tx.send(write_blocking(own.as_raw_fd(), &pieces));
    });
    spawned?;
    rx.await.unwrap_or_else(|_| Err(std::io::ErrorKind::BrokenPipe.into()))
}

/// writev until every piece is out, waiting in poll(2) while the socket buffer is full.
fn write_blocking(fd: RawFd, pieces: &[Bytes]) -> std::io::Result<()> {
    let (mut i, mut off) = (0usize, 0usize);
    while i < pieces.len() {
        let mut iov: Vec<libc::iovec> = Vec::with_capacity(64);
        for (k, p) in pieces[i..].iter().take(64).enumerate() {
            let start = if k == 0 { off } else { 0 };
            iov.push(libc::iovec {
                iov_base: p[start..].as_ptr() as *mut libc::c_void,
                iov_len: p.len() - start,
            });
        }
        let msg = libc::msghdr {
            msg_name: std::ptr::null_mut(),
            msg_namelen: 0,
            msg_iov: iov.as_mut_ptr(),
            msg_iovlen: iov.len(),
            msg_control: std::ptr::null_mut(),
            msg_controllen: 0,
            msg_flags: 0,
        };
        // SAFETY: `iov` points into live pieces; MSG_NOSIGNAL turns a closed peer into EPIPE.
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::Interrupted => continue,
                std::io::ErrorKind::WouldBlock => {
                    let mut pfd = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
                    // SAFETY: one pollfd on the stack.
                    if unsafe { libc::poll(&mut pfd, 1, -1) } < 0 {
                        let e = std::io::Error::last_os_error();
                        if e.kind() != std::io::ErrorKind::Interrupted {
                            return Err(e);
                        }
                    }
                    continue;
                }
                _ => return Err(e),
            }
        }
        let mut n = n as usize;
        while n > 0 {
            let left = pieces[i].len() - off;
            if n >= left {
                n -= left;
                i += 1;
                off = 0;
            } else {
                off += n;
                n = 0;
            }
        }
        while i < pieces.len() && pieces[i].len() == off {
            i += 1;
            off = 0;
        }
    }
    Ok(())
}
