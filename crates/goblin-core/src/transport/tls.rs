//! TLS with rustls (ring provider): the server's `--tls-port` configuration, the client
//! configuration and handshake a replica uses, and [`TlsStream`], the non-blocking stream both
//! sides run inside the edge-triggered event loop.
//!
//! # The edge-triggered contract
//!
//! The loop reads a connection when epoll reports a new edge, and stops reading after a
//! *short* read (fewer bytes than asked for), trusting that the kernel raises a new edge for
//! any byte that arrives later. A TLS stream breaks the 1:1 link between socket bytes and
//! plaintext bytes: one socket read can decrypt into more plaintext than the caller's buffer,
//! and that plaintext then lives inside rustls, where no edge will ever announce it.
//! [`TlsStream::read`] therefore keeps this invariant:
//!
//! - it returns a *full* buffer whenever plaintext may remain inside rustls (the loop then
//!   treats the read as cut short and reads again next turn, via its `read_again` list);
//! - it returns a *short* read (or WouldBlock) only once the socket itself answered WouldBlock
//!   (or EOF) and rustls holds no plaintext: everything still to come will raise an edge.
//!
//! On the write side, [`TlsStream::write`] only takes new plaintext once earlier ciphertext
//! has reached the socket, and [`TlsStream::flush_buffered`] reports ciphertext still waiting
//! inside rustls, so the loop keeps WRITABLE interest until it is gone (also for handshake
//! messages produced while reading).

use crate::conn::Stream;
use mio::net::TcpStream;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Debian's bundle of the system trust store (ca-certificates).
pub const SYSTEM_CA_FILE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// `--tls-auth-clients`, with Redis's values: whether clients must present a certificate
/// signed by `--tls-ca-cert-file`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthClients {
    /// No client certificate is asked for.
    No,
    /// A valid client certificate is required.
    Yes,
    /// A client certificate is verified if presented, not required.
    Optional,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn load_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let iter = CertificateDer::pem_file_iter(path).map_err(|e| format!("{what} {}: {e}", path.display()))?;
    let certs: Vec<_> = iter
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what} {}: not a PEM certificate file: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{what} {}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

fn load_roots(path: &Path, what: &str) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(load_certs(path, what)?);
    if added == 0 {
        return Err(format!("{what} {}: no usable CA certificate in it", path.display()));
    }
    Ok(roots)
}

/// The server's TLS configuration: certificate chain and key (PEM), and optionally client
/// certificate verification against `ca` (`auth_clients` yes/optional needs it). Errors name
/// the flag and the file.
pub fn server_config(
    cert: &Path,
    key: &Path,
    ca: Option<&Path>,
    auth_clients: AuthClients,
) -> Result<Arc<ServerConfig>, String> {
    let chain = load_certs(cert, "--tls-cert-file")?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("--tls-key-file {}: no usable PEM private key: {e}", key.display()))?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match (auth_clients, ca) {
        (AuthClients::No, _) => builder.with_no_client_auth(),
        (_, None) => return Err("--tls-auth-clients yes|optional needs --tls-ca-cert-file".into()),
        (mode, Some(ca)) => {
            let roots = Arc::new(load_roots(ca, "--tls-ca-cert-file")?);
            let mut v = rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider());
            if mode == AuthClients::Optional {
                v = v.allow_unauthenticated();
            }
            builder.with_client_cert_verifier(v.build().map_err(|e| format!("--tls-ca-cert-file: {e}"))?)
        }
    };
    let cfg = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("--tls-cert-file {} / --tls-key-file: {e}", cert.display()))?;
    Ok(Arc::new(cfg))
}

/// A client configuration that verifies the server against `ca_file`, or against the system
/// trust store ([`SYSTEM_CA_FILE`]) without one.
pub fn client_config(ca_file: Option<&Path>) -> Result<Arc<ClientConfig>, String> {
    let roots = match ca_file {
        Some(p) => load_roots(p, "CA file")?,
        None => load_roots(Path::new(SYSTEM_CA_FILE), "system trust store")?,
    };
    let cfg = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(cfg))
}

/// The identity to verify in the server's certificate: `dns_override` (a DNS name) when given,
/// else `host`, which for an IP address means an IP address SAN.
pub fn server_name(host: &str, dns_override: Option<&str>) -> Result<ServerName<'static>, String> {
    if let Some(dns) = dns_override {
        return ServerName::try_from(dns)
            .map(|n| n.to_owned())
            .map_err(|e| format!("invalid TLS server name '{dns}': {e}"));
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(ServerName::IpAddress(ip.into()));
    }
    ServerName::try_from(host)
        .map(|n| n.to_owned())
        .map_err(|e| format!("invalid TLS server name '{host}': {e}"))
}

/// Completes a client handshake over `tcp` (blocking, bounded by `timeout` overall), then
/// returns it as a non-blocking [`Stream::Tls`] ready to register with mio. A certificate that
/// does not verify (unknown issuer, wrong name, expired) fails here with rustls's reason.
///
/// After registering, read the stream once before waiting for an edge: bytes the server sent
/// right behind its handshake (session tickets, early replies) may already sit inside rustls.
pub fn connect_client(
    tcp: std::net::TcpStream,
    cfg: Arc<ClientConfig>,
    name: ServerName<'static>,
    timeout: Duration,
) -> io::Result<Stream> {
    let deadline = Instant::now() + timeout;
    let mut tls = rustls::ClientConnection::new(cfg, name).map_err(io::Error::other)?;
    let mut tcp = tcp;
    tcp.set_nonblocking(false)?;
    let timed_out = || io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out");
    while tls.is_handshaking() || tls.wants_write() {
        let left =
            deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()).ok_or_else(timed_out)?;
        tcp.set_read_timeout(Some(left))?;
        tcp.set_write_timeout(Some(left))?;
        match tls.complete_io(&mut tcp) {
            Ok((0, 0)) if tls.is_handshaking() => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed during the TLS handshake",
                ))
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(timed_out())
            }
            Err(e) => return Err(e),
        }
    }
    tcp.set_read_timeout(None)?;
    tcp.set_write_timeout(None)?;
    tcp.set_nonblocking(true)?;
    Ok(Stream::Tls(Box::new(TlsStream::new(TcpStream::from_std(tcp), tls.into()))))
}

/// A TLS session (server or client side) over a non-blocking mio TCP socket.
pub struct TlsStream {
    pub tcp: TcpStream,
    pub tls: rustls::Connection,
    /// The socket reported EOF: nothing more will come from it.
    eof: bool,
}

impl TlsStream {
    pub fn new(tcp: TcpStream, tls: rustls::Connection) -> TlsStream {
        TlsStream { tcp, tls, eof: false }
    }

    /// Writes pending ciphertext to the socket until it is all out or the socket is full.
    /// Returns whether ciphertext is still waiting (the caller keeps WRITABLE interest).
    pub fn flush_buffered(&mut self) -> io::Result<bool> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.tcp) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }

    /// Best effort at closing: a close_notify alert, if the socket takes it now.
    pub fn close_notify(&mut self) {
        self.tls.send_close_notify();
        let _ = self.flush_buffered();
    }
}

impl Read for TlsStream {
    /// See the module docs: a short read means the socket is drained and rustls holds no
    /// plaintext; otherwise the buffer comes back full.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut filled = 0;
        loop {
            // First what rustls already decrypted.
            match self.tls.reader().read(&mut buf[filled..]) {
                Ok(0) => return Ok(filled), // close_notify: clean end (0 if nothing came first)
                Ok(n) => {
                    filled += n;
                    if filled == buf.len() {
                        return Ok(filled);
                    }
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The peer closed the socket without close_notify: an EOF for our purposes
                // (no request can be cut by it that the RESP parser would not notice).
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(filled),
                Err(e) => return Err(e),
            }
            if self.eof {
                return Ok(filled);
            }
            // Nothing decrypted is left: move more ciphertext from the socket into rustls.
            match self.tls.read_tls(&mut self.tcp) {
                Ok(0) => self.eof = true,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // The socket is drained: the next byte raises a new edge.
                    return if filled > 0 { Ok(filled) } else { Err(e) };
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            if let Err(e) = self.tls.process_new_packets() {
                // Tell the peer why (the alert rustls queued), then fail the connection.
                let _ = self.flush_buffered();
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            // Handshake messages (or a key update) may be due; what the socket does not take
            // now stays in rustls and `flush_buffered` sends it when the loop flushes.
            if self.tls.wants_write() {
                self.flush_buffered()?;
            }
        }
    }
}

impl Write for TlsStream {
    /// Takes plaintext only when no earlier ciphertext is waiting (WouldBlock otherwise), so
    /// rustls buffers at most one chunk (its buffer limit, 64 KiB by default) beyond the socket.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.flush_buffered()? {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self.tls.writer().write(buf)?;
        self.flush_buffered()?;
        if n == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_buffered().map(|_| ())
    }
}

/// `goblin-core tls-ping` (a hidden test aid): the replica's client path end to end. Connects,
/// verifies the server with [`client_config`] and [`server_name`], completes the handshake
/// with [`connect_client`], then sends PING through the non-blocking stream registered in a
/// mio poll, as the event loop would, and returns the reply line.
pub fn ping(host: &str, port: u16, ca: Option<&Path>, dns: Option<&str>) -> Result<String, String> {
    use mio::{Events, Interest, Poll, Token};
    let timeout = Duration::from_secs(5);
    let cfg = client_config(ca)?;
    let name = server_name(host, dns)?;
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .map_err(|e| format!("{host}:{port}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}:{port}: no address"))?;
    let tcp = std::net::TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{addr}: {e}"))?;
    let mut stream = connect_client(tcp, cfg, name, timeout).map_err(|e| format!("TLS handshake: {e}"))?;
    let mut poll = Poll::new().map_err(|e| e.to_string())?;
    poll.registry()
        .register(&mut stream, Token(0), Interest::READABLE | Interest::WRITABLE)
        .map_err(|e| e.to_string())?;
    let mut events = Events::with_capacity(8);
    let deadline = Instant::now() + timeout;
    let request = b"*1\r\n$4\r\nPING\r\n";
    let mut sent = 0;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        while sent < request.len() {
            match stream.write(&request[sent..]) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(format!("write: {e}")),
            }
        }
        let _ = stream.flush_buffered();
        // Read before waiting: data may already sit inside rustls (see connect_client).
        loop {
            match stream.read(&mut buf) {
                Ok(0) => return Err("the server closed the connection".into()),
                Ok(n) => reply.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(format!("read: {e}")),
            }
        }
        if let Some(end) = reply.windows(2).position(|w| w == b"\r\n") {
            return Ok(String::from_utf8_lossy(&reply[..end]).into_owned());
        }
        let left = deadline.checked_duration_since(Instant::now()).ok_or("no reply within 5 s")?;
        poll.poll(&mut events, Some(left)).map_err(|e| e.to_string())?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_verify_an_ip_san_unless_a_dns_name_overrides() {
        let ip = server_name("10.1.2.3", None).unwrap();
        assert!(matches!(ip, ServerName::IpAddress(_)), "{ip:?}");
        assert!(matches!(server_name("::1", None).unwrap(), ServerName::IpAddress(_)));
        let dns = server_name("10.1.2.3", Some("primary.example.net")).unwrap();
        assert_eq!(dns, ServerName::try_from("primary.example.net").unwrap());
        assert!(matches!(server_name("primary.example.net", None).unwrap(), ServerName::DnsName(_)));
        assert!(server_name("not a name!", None).is_err());
        assert!(server_name("10.1.2.3", Some("bad name")).is_err());
    }

    #[test]
    fn missing_files_are_named() {
        let err = client_config(Some(Path::new("/nonexistent/ca.pem"))).unwrap_err();
        assert!(err.contains("/nonexistent/ca.pem"), "{err}");
        let err = server_config(
            Path::new("/nonexistent/c.pem"),
            Path::new("/nonexistent/k.pem"),
            None,
            AuthClients::No,
        )
        .unwrap_err();
        assert!(err.contains("--tls-cert-file /nonexistent/c.pem"), "{err}");
    }
}
