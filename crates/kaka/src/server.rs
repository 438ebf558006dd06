//! Listener and connections.
//!
//! Each connection has a reader (frames -> `api::dispatch`, in order) and a writer (responses,
//! in request order). Each request takes one credit (`--max-in-flight` per connection) when
//! it is read and gives it back when its response has been written; with no credit left the
//! reader stops reading the socket, so one client cannot queue unbounded work (TCP then
//! pushes back on the client).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};

use crate::api::{self, Outcome};
use crate::broker::Broker;
use crate::wire::RawHeader;

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
        mpsc::unbounded_channel::<(oneshot::Receiver<Option<BytesMut>>, OwnedSemaphorePermit)>();
    let writer = tokio::spawn(async move {
        while let Some((pending, _permit)) = rx.recv().await {
            match pending.await {
                Ok(Some(frame)) => {
                    if let Err(e) = wr.write_all(&frame).await {
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
