//! The replica side: one upstream link (`--replica-tcp HOST PORT` or `--replica-uds PATH`),
//! the startup handoff (snapshot -> Kafka -> firehose), the reconnect rules, and what INFO and
//! ROLE report about them.
//!
//! ```text
//! startup:   --load  ->  connect (250 ms bound), AUTH, GOBLIN.FIREHOSE, hello (replid, H)
//!            -> [H > local offset, --kafka] the firehose is read into memory (bounded by
//!               client-output-buffer-limit replica) by a
//!               helper thread while this thread replays Kafka inclusively from its cursor
//!               until the local offset reaches H
//!            -> buffered frames applied (overlap skipped by logical offset) -> live
//!            -> listeners open
//! runtime:   frames read on the server thread (token UPSTREAM), applied as one batch each,
//!            acknowledged with GOBLIN.ACK; a lost link -> not ready, own subscribers dropped,
//!            reconnect attempts from a helper thread with jittered exponential backoff;
//!            each successful handshake goes through the same rules as at startup.
//! ```
//!
//! The rules on a hello (replid R, offset H) against local (L, o):
//! - R == L, H == o: live at once (unless mutations are unconfirmed: the last rule);
//! - R == L, H > o: with Kafka, catch up through Kafka with the suffix buffered; without, a
//!   gap: degraded;
//! - H < o, or R != L (unless this server is empty at offset 0, which adopts R): degraded;
//! - R == L, H >= o, with mutations applied from frames that Kafka had not confirmed (a
//!   `queued` upstream sends frames first): a Kafka catch-up checks each against the record
//!   at its offset before going live; a different record (the upstream lost them in a crash
//!   and wrote others there) leaves the replica degraded (`unconfirmed`).
//!
//! Degraded and abandoned attempts retry with backoff; nothing unverified is ever applied: a
//! frame is applied only at the next expected offset of the same lineage (`apply_record`).
//!
//! Kafka failing (unreachable, its topic missing, a record that cannot be applied) never stops
//! a replica: like an unavailable upstream, it leaves the replica read-only and not ready, and
//! the connector retries. The connector asks Kafka first (`probe_kafka`, on its own thread), so
//! that an unreachable Kafka costs the server thread nothing; only a Kafka that just answered
//! is replayed on the server thread. A startup replay that could not run (the upstream
//! unavailable too) stays pending and runs, exactly as the startup one would have, as soon as
//! Kafka answers. A replay that fails after applying part of the topic keeps that verified
//! prefix, and the next attempt goes on from where it stopped (`journal::kafka::Resume`: the
//! cursor past its own records, the consumer position before the other producers' records it
//! held back), so that nothing is applied twice.
//! The helper threads never touch the engine: the connector hands its connected socket and
//! hello to the server thread through a channel and the waker; the handoff reader only
//! copies bytes into its buffer.

use super::frame::{self, BatchFrame, Cursor, Frame};
use crate::conn::Stream;
use crate::server::Server;
use engine::{Applied, RecordError, ReplId, Replication};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// How a refused hello starts its error (an operator must align the versions: the replica
/// stays degraded, not merely reconnecting).
const VERSION_MISMATCH: &str = "version mismatch";

/// The seed's bound on one connection attempt.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(250);
/// From connected to hello (AUTH and GOBLIN.FIREHOSE answered).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A live link that has carried nothing (not even a tick, which an idle upstream sends every
/// second) for this long is taken for dead: the upstream hangs, or the path to it is gone.
const LINK_TIMEOUT: Duration = Duration::from_secs(10);
/// A Kafka catch-up that gains nothing for this long is abandoned (and retried).
const KAFKA_STALL: Duration = Duration::from_secs(10);
/// How long a catch-up that has read the whole topic waits for Kafka to confirm the mutations
/// left unconfirmed above the lineage's last record there before it stops checking them.
#[cfg(feature = "kafka")]
const UNCHECKABLE_AFTER: Duration = Duration::from_secs(1);
/// How a stalled catch-up's error starts (a transient failure: the attempt is retried).
#[cfg(feature = "kafka")]
const KAFKA_STALLED: &str = "the Kafka catch-up stalled";
/// How long asking Kafka for the topic's watermarks may take before a replay (on the
/// connector thread, or at startup before the listeners open): an unreachable Kafka fails the
/// attempt after this, instead of the replay's 15 s on the server thread.
#[cfg(feature = "kafka")]
const KAFKA_PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes read from the upstream per read call, and reads per loop turn (fairness with the
/// clients: frames are applied between client commands, in bounded amounts).
const READ_CHUNK: usize = 64 * 1024;
/// Frames decoded ahead of the one applied (see `apply_upstream_bytes`): their keys' bucket
/// slots are asked for together.
const FRAME_WINDOW: usize = 16;
/// How many frames before its own a frame's key chains start loading (its bucket slots were
/// asked for when the window was decoded).
const CHAIN_AHEAD: usize = 2;
const READS_PER_TURN: usize = 4;

/// Where the upstream is.
#[derive(Clone, Debug)]
pub enum Source {
    Tcp {
        host: String,
        port: u16,
    },
    Unix(PathBuf),
    /// `--replica-ring`: the upstream's `--ring` rendezvous socket (transport/ring.rs).
    Ring(PathBuf),
    /// `--replica-rdma`: the upstream's `--rdma-port`, and our receive ring's size.
    Rdma {
        host: String,
        port: u16,
        ring: u64,
    },
}

impl Source {
    pub fn describe(&self) -> String {
        match self {
            Source::Tcp { host, port } => format!("tcp {host}:{port}"),
            Source::Unix(p) => format!("uds {}", p.display()),
            Source::Ring(p) => format!("ring {}", p.display()),
            Source::Rdma { host, port, ring } => format!("rdma {host}:{port} (ring {ring})"),
        }
    }
}

/// Everything a connection attempt needs (shared with the connector thread).
#[derive(Clone)]
pub struct Settings {
    pub source: Source,
    /// AUTH user and password, sent before GOBLIN.FIREHOSE.
    pub auth: Option<(String, String)>,
    /// TLS for a TCP source: the verifier and the identity the certificate must prove.
    pub tls: Option<(Arc<rustls::ClientConfig>, rustls::pki_types::ServerName<'static>)>,
    /// `bind-source-addr` for TCP and RDMA sources (empty: the kernel's choice).
    pub source_addr: String,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("source", &self.source)
            .field("user", &self.auth.as_ref().map(|a| &a.0))
            .field("tls", &self.tls.as_ref().map(|t| &t.1))
            .finish()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Startup, before the first attempt finished.
    Connecting,
    /// Catching up through Kafka with the firehose suffix buffered.
    Sync,
    /// Applying the firehose: the only ready state.
    Live,
    /// The link is down (or an attempt was abandoned); attempts continue.
    Reconnecting,
    /// The upstream cannot be followed without operator action (another lineage, behind us,
    /// a gap without Kafka, another version); attempts continue with the longest backoff.
    Degraded,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Connecting => "connecting",
            State::Sync => "sync",
            State::Live => "live",
            State::Reconnecting => "reconnecting",
            State::Degraded => "degraded",
        }
    }
}

/// A connected, authenticated subscription whose hello has been read.
pub struct Handshake {
    pub stream: Stream,
    pub replid: ReplId,
    pub offset: u64,
    /// The lineage the upstream's began from, and the offset where it did (the hello's).
    pub previous: Option<(ReplId, u64)>,
    /// Bytes read after the hello (the first frames).
    pub leftover: Vec<u8>,
    /// Whether Kafka answered the connector (`probe_kafka`) when the hello was ahead of the
    /// local offset (a catch-up is then needed); None: not asked.
    pub kafka: Option<Result<(), String>>,
}

/// What one attempt of the connector thread found.
pub enum Attempt {
    /// A usable hello.
    Upstream(Handshake),
    /// The upstream is unavailable (why), but Kafka answers: the startup replay that could not
    /// run can run now.
    #[cfg_attr(not(feature = "kafka"), allow(dead_code))]
    KafkaOnly { upstream: String },
    /// Nothing usable (why).
    Failed(String),
}

/// What the connector thread needs to know about the replica (read when it is started).
#[cfg_attr(not(feature = "kafka"), allow(dead_code))]
struct Job {
    settings: Arc<Settings>,
    /// The topic to ask (None: no --kafka).
    #[cfg(feature = "kafka")]
    kafka: Option<crate::journal::target::KafkaTarget>,
    /// The local logical offset: a hello ahead of it needs a Kafka catch-up.
    local: u64,
    /// The startup replay has not run yet (`Replica::kafka_replay_pending`).
    replay_pending: bool,
}

/// The connector thread's work: one connection attempt and, when a replay would follow, a
/// question to Kafka, so that the server thread never waits for an unreachable Kafka.
fn attempt(job: &Job) -> Attempt {
    match connect(&job.settings) {
        #[allow(unused_mut)]
        Ok(mut hs) => {
            #[cfg(feature = "kafka")]
            if let Some(t) = &job.kafka {
                if hs.offset > job.local {
                    hs.kafka = Some(probe_kafka(t));
                }
            }
            Attempt::Upstream(hs)
        }
        Err(e) => {
            #[cfg(feature = "kafka")]
            if let (true, Some(t)) = (job.replay_pending, &job.kafka) {
                return match probe_kafka(t) {
                    Ok(()) => Attempt::KafkaOnly { upstream: e },
                    Err(k) => Attempt::Failed(format!("{e}; the Kafka replay waits: {k}")),
                };
            }
            Attempt::Failed(e)
        }
    }
}

/// Asks Kafka for the topic's watermarks, within KAFKA_PROBE_TIMEOUT: Ok when a replay can
/// start now. The error reads as the replay's own would (unreachable brokers, a missing topic).
#[cfg(feature = "kafka")]
pub fn probe_kafka(t: &crate::journal::target::KafkaTarget) -> Result<(), String> {
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    // As the journal's consumers are configured; no group (so that closing it waits for no
    // coordinator), no topic creation.
    let mut c = crate::journal::kafka::quiet_config(t);
    c.set("allow.auto.create.topics", "false");
    let consumer: BaseConsumer =
        c.create().map_err(|e| format!("--kafka: cannot create the replay consumer: {e}"))?;
    consumer
        .fetch_watermarks(&t.topic, 0, KAFKA_PROBE_TIMEOUT)
        .map(|_| ())
        .map_err(|e| format!("--kafka: cannot read the watermarks of topic {}: {e}", t.topic))
}

/// An idle replica's GOBLIN.ACK repeats at most this often (the upstream ticks each second).
const ACK_AGAIN_AFTER: Duration = Duration::from_millis(900);

/// The live link.
struct Link {
    stream: Stream,
    /// Bytes read but not yet a whole frame.
    buf: Vec<u8>,
    /// GOBLIN.ACKs not yet written.
    out: Vec<u8>,
    acked: u64,
    /// When the last GOBLIN.ACK went out: an idle link repeats its offset once a second (on
    /// the upstream's ticks), so the upstream sees the replica alive (INFO's lag,
    /// `min-replicas-to-write`), as a Redis replica's REPLCONF ACK each second.
    acked_at: Instant,
}

pub struct Replica {
    pub settings: Arc<Settings>,
    pub state: State,
    link: Option<Link>,
    /// The upstream's offset as last known (hello, then each frame); None until a hello.
    pub upstream_offset: Option<u64>,
    pub attempts: u64,
    pub successes: u64,
    pub last_io: Option<Instant>,
    pub last_error: String,
    /// A Kafka cursor safe to seek from: every record of a logical offset above the local one
    /// is at `cursor.broker` or later (see `frame::Cursor`).
    pub cursor: Cursor,
    /// The newest cursor an upstream sent; it becomes `cursor` once applied through.
    latest_cursor: Cursor,
    /// The result of the connector thread in flight, if any.
    connector: Option<mpsc::Receiver<Attempt>>,
    backoff: Duration,
    /// The loaded snapshot or a replay gave this server a history: it never adopts another.
    pub has_history: bool,
    /// `--kafka` on a replica: the topic, and where the next catch-up seeks (inclusively).
    #[cfg(feature = "kafka")]
    pub kafka: Option<(crate::journal::target::KafkaTarget, crate::journal::kafka::Start)>,
    /// Other producers' records below this broker offset are reflected in the local state
    /// (-1: unknown): from the loaded snapshot, then from each applied frame (its sender's
    /// consumer position when it committed the batch) and each Kafka replay (through its last
    /// record). A catch-up passes it to the replay, which treats those records as duplicates
    /// instead of applying them twice.
    pub consumer_position: i64,
    /// With --kafka: the replay through the high watermark that a startup without its upstream
    /// does has not run yet (Kafka did not answer, or failed). Attempts that find the upstream
    /// unavailable run it once Kafka answers; going live makes it moot.
    pub kafka_replay_pending: bool,
    /// With --kafka: the mutations applied from frames that the upstream's cursor did not yet
    /// cover, checked against the topic by the next catch-up (see `unconfirmed`).
    pub unconfirmed: super::unconfirmed::Unconfirmed,
}

impl Replica {
    pub fn new(settings: Settings, cursor: Cursor, has_history: bool) -> Replica {
        Replica {
            settings: Arc::new(settings),
            state: State::Connecting,
            link: None,
            upstream_offset: None,
            attempts: 0,
            successes: 0,
            last_io: None,
            last_error: String::new(),
            cursor,
            latest_cursor: Cursor::UNKNOWN,
            connector: None,
            backoff: BACKOFF_MIN,
            has_history,
            #[cfg(feature = "kafka")]
            kafka: None,
            consumer_position: -1,
            kafka_replay_pending: false,
            unconfirmed: Default::default(),
        }
    }

    pub fn is_live(&self) -> bool {
        self.state == State::Live
    }
}

/// Waits until `fd` is readable (or writable) or `timeout` passes.
fn wait_fd(fd: RawFd, write: bool, timeout: Duration) -> io::Result<bool> {
    let mut p = libc::pollfd { fd, events: if write { libc::POLLOUT } else { libc::POLLIN }, revents: 0 };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
    }
    Ok(n > 0)
}

/// Waits until one of `fds` is readable, at most `timeout`.
fn wait_fds(fds: &[RawFd], timeout: Duration) -> io::Result<bool> {
    let mut p: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: a valid array of pollfds.
    let n = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
    }
    Ok(n > 0)
}

fn write_all_until(stream: &mut Stream, mut bytes: &[u8], deadline: Instant) -> io::Result<()> {
    while !bytes.is_empty() {
        match stream.write(bytes) {
            Ok(0) => {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "the upstream closed the connection"))
            }
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "timed out writing to the upstream"));
                }
                wait_stream(stream, true, left)?;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads what is available (waiting up to `deadline` for something) into `buf`. Ok(false):
/// the peer closed.
fn read_some(stream: &mut Stream, buf: &mut Vec<u8>, deadline: Instant) -> io::Result<bool> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return Ok(true);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "timed out waiting for the upstream",
                    ));
                }
                wait_stream(stream, false, left)?;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// An idle upstream sends nothing, so a peer that vanished without a FIN (a crashed host, a
/// partition) is noticed by TCP keepalive: after 10 s of silence, probes every 5 s, the link
/// fails after 3 unanswered ones (about 25 s), and the replica goes not ready and reconnects.
fn keepalive(s: &std::net::TcpStream) -> io::Result<()> {
    crate::transport::set_keepalive(s.as_raw_fd(), 10, 5, 3)
}

fn open(settings: &Settings) -> io::Result<Stream> {
    match &settings.source {
        Source::Tcp { host, port } => {
            use std::net::ToSocketAddrs;
            let addrs: Vec<_> = (host.as_str(), *port).to_socket_addrs()?.collect();
            let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{host} resolves to no address"));
            for a in addrs {
                match crate::transport::connect_tcp(&a, &settings.source_addr, CONNECT_TIMEOUT) {
                    Ok(s) => {
                        s.set_nodelay(true)?;
                        keepalive(&s)?;
                        if let Some((cfg, name)) = &settings.tls {
                            return crate::transport::tls::connect_client(
                                s,
                                cfg.clone(),
                                name.clone(),
                                HANDSHAKE_TIMEOUT,
                            );
                        }
                        s.set_nonblocking(true)?;
                        return Ok(Stream::Tcp(mio::net::TcpStream::from_std(s)));
                    }
                    Err(e) => last = e,
                }
            }
            Err(last)
        }
        Source::Unix(path) => {
            let s = std::os::unix::net::UnixStream::connect(path)?;
            s.set_nonblocking(true)?;
            Ok(Stream::Unix(mio::net::UnixStream::from_std(s)))
        }
        Source::Ring(path) => {
            let s = std::os::unix::net::UnixStream::connect(path)?;
            // The segment's descriptor comes at once from a live server; bound the wait anyway.
            s.set_read_timeout(Some(CONNECT_TIMEOUT))?;
            Ok(Stream::Ring(Box::new(goblin_ring::Endpoint::connect(s)?)))
        }
        Source::Rdma { host, port, ring } => {
            use std::net::ToSocketAddrs;
            let addrs: Vec<_> = (host.as_str(), *port).to_socket_addrs()?.collect();
            let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{host} resolves to no address"));
            for a in addrs {
                match crate::transport::connect_tcp(&a, &settings.source_addr, CONNECT_TIMEOUT) {
                    Ok(s) => {
                        keepalive(&s)?;
                        // The upstream's hello comes at once from a live server; bound the wait.
                        let ep = goblin_rdma::Endpoint::connect(s, *ring, CONNECT_TIMEOUT)?;
                        return Ok(Stream::Rdma(Box::new(ep)));
                    }
                    Err(e) => last = e,
                }
            }
            Err(last)
        }
    }
}

/// Waits until `stream` may be readable (or writable), at most `timeout`. A ring stream is
/// armed first (its peer rings the socket on its next publish or free), so that a byte in
/// the ring is not waited for in vain (see crates/ring/src/ring.rs).
fn wait_stream(stream: &mut Stream, write: bool, timeout: Duration) -> io::Result<bool> {
    if let Some(e) = stream.polled() {
        // A write that returned WouldBlock armed its wait already.
        if !write && !e.arm_read()? {
            return Ok(true);
        }
        let r = match e.wake_fd() {
            None => wait_fd(e.sock_fd(), false, timeout),
            Some(w) => wait_fds(&[e.sock_fd(), w], timeout),
        };
        e.drain_doorbell();
        if write {
            e.disarm_write();
        } else {
            e.disarm_read();
        }
        return r;
    }
    wait_fd(stream.as_raw_fd(), write, timeout)
}

/// One attempt: connect (250 ms bound), AUTH if configured, GOBLIN.FIREHOSE, read the hello.
/// Runs on the connector thread (or the server thread at startup); never touches the engine.
pub fn connect(settings: &Settings) -> Result<Handshake, String> {
    let what = settings.source.describe();
    let mut stream = open(settings).map_err(|e| format!("cannot connect to the upstream ({what}): {e}"))?;
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    let mut req = Vec::new();
    if let Some((user, pass)) = &settings.auth {
        resp::reply::bulk_array(&mut req, &[b"AUTH".as_slice(), user.as_bytes(), pass.as_bytes()]);
    }
    resp::reply::bulk_array(&mut req, &[b"GOBLIN.FIREHOSE".as_slice()]);
    let io = |e: io::Error| format!("upstream ({what}): {e}");
    write_all_until(&mut stream, &req, deadline).map_err(io)?;
    let mut buf = Vec::new();
    let mut at = 0;
    if settings.auth.is_some() {
        // The AUTH reply: one line.
        loop {
            if let Some(nl) = buf.iter().position(|&b| b == b'\n') {
                let line = String::from_utf8_lossy(&buf[..nl]).trim_end().to_string();
                if line != "+OK" {
                    return Err(format!(
                        "the upstream ({what}) refused AUTH: {}",
                        line.trim_start_matches('-')
                    ));
                }
                at = nl + 1;
                break;
            }
            if !read_some(&mut stream, &mut buf, deadline).map_err(io)? {
                return Err(format!("the upstream ({what}) closed the connection during AUTH"));
            }
        }
    }
    loop {
        match frame::decode(&buf[at..]) {
            Ok(Some((Frame::Hello { proto, version, replid, offset, previous }, n))) => {
                if proto != frame::PROTOCOL_VERSION || version != frame::BUILD_VERSION.as_bytes() {
                    return Err(format!(
                        "{VERSION_MISMATCH}: the upstream ({what}) runs {} (firehose protocol {proto}), this server runs {} \
                         (protocol {}); both ends of a firehose must run exactly the same goblin-core",
                        String::from_utf8_lossy(version),
                        frame::BUILD_VERSION,
                        frame::PROTOCOL_VERSION
                    ));
                }
                let leftover = buf[at + n..].to_vec();
                return Ok(Handshake { stream, replid, offset, previous, leftover, kafka: None });
            }
            Ok(Some((Frame::Batch(_) | Frame::Tick { .. }, _))) => {
                return Err(format!("the upstream ({what}) sent a frame before its hello"))
            }
            Ok(None) => {
                if !read_some(&mut stream, &mut buf, deadline).map_err(io)? {
                    return Err(format!("the upstream ({what}) closed the connection before its hello"));
                }
            }
            Err(e) => return Err(format!("upstream ({what}): {e}")),
        }
    }
}

/// The handoff reader: copies the firehose into `buf` until told to stop. The bytes wait in
/// memory, up to `limit` (0: no limit): a catch-up takes as long as Kafka needs, and a busy
/// upstream writes on meanwhile, so a fixed buffer would abandon every attempt under a steady
/// write load (and any attempt that met one batch larger than it).
fn buffer_until_stopped(
    stream: &mut Stream,
    buf: &mut Vec<u8>,
    limit: usize,
    stop: &AtomicBool,
) -> Result<(), String> {
    let mut chunk = vec![0u8; READ_CHUNK];
    while !stop.load(Ordering::Acquire) {
        match stream.read(&mut chunk) {
            Ok(0) => return Err("the upstream closed the connection during the handoff".into()),
            Ok(n) => {
                if limit != 0 && buf.len() + n > limit {
                    return Err(format!(
                        "the firehose sent more than client-output-buffer-limit replica's {limit}-byte hard limit \
                         during the Kafka catch-up"
                    ));
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                wait_stream(stream, false, Duration::from_millis(20)).map_err(|e| e.to_string())?;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading the upstream during the handoff: {e}")),
        }
    }
    Ok(())
}

/// The outcome of following a hello.
enum Refusal {
    /// Try again soon (a transient failure).
    Abandon(String),
    /// Cannot follow this upstream as it is.
    Degraded(String),
}

impl Server {
    /// Startup, after the snapshot was loaded and before the listeners open: one attempt
    /// (with the Kafka handoff when the upstream is ahead); if the upstream is unavailable,
    /// the Kafka replay this server can do alone, then not ready with attempts in the
    /// background. Nothing here stops the process: a Kafka that cannot be read leaves the
    /// replica not ready, with the replay retried by the connector.
    pub fn start_replica(&mut self) {
        self.engine.replica = true;
        let r = self.replica.as_mut().expect("a replica");
        #[cfg(feature = "kafka")]
        {
            r.kafka_replay_pending = r.kafka.is_some();
        }
        let settings = r.settings.clone();
        info!("replica of {}: connecting", settings.source.describe());
        let first = connect(&settings);
        if let Some(r) = &mut self.replica {
            r.attempts += 1;
        }
        match first {
            Ok(hs) => self.follow(hs),
            Err(e) => {
                warn!("{e}; opening read-only and not ready, retrying in the background");
                let r = self.replica.as_mut().expect("a replica");
                r.state = if e.starts_with(VERSION_MISMATCH) { State::Degraded } else { State::Reconnecting };
                r.last_error = e.clone();
                // Kafka is asked here, on the server thread: the listeners are not open yet.
                self.replay_without_upstream(e, None);
                self.schedule_attempt();
            }
        }
    }

    /// The upstream is unavailable (`upstream`: why): the replay through Kafka's high watermark
    /// that a startup does alone, if it is still pending and Kafka answers (`probed`: what the
    /// connector found; None: ask now). The replica stays not ready either way.
    #[allow(unused_variables)]
    fn replay_without_upstream(&mut self, upstream: String, probed: Option<Result<(), String>>) {
        #[cfg(feature = "kafka")]
        {
            let r = self.replica.as_ref().expect("a replica");
            let Some((target, _)) = r.kafka.as_ref().filter(|_| r.kafka_replay_pending) else {
                return;
            };
            let probed = probed.unwrap_or_else(|| probe_kafka(target));
            let upstream_state =
                if upstream.starts_with(VERSION_MISMATCH) { State::Degraded } else { State::Reconnecting };
            let outcome = match probed {
                Ok(()) => self.kafka_catch_up(None),
                Err(e) => Err(Refusal::Abandon(e)),
            };
            let offset = self.engine.repl.offset;
            let r = self.replica.as_mut().expect("a replica");
            match outcome {
                Ok(()) => {
                    info!(
                        "replica: replayed Kafka through its high watermark (logical offset {offset}); \
                         still not ready: {upstream}"
                    );
                    r.kafka_replay_pending = false;
                    r.state = upstream_state;
                    r.last_error = upstream;
                }
                Err(Refusal::Abandon(e)) => {
                    warn!("replica: the Kafka replay waits: {e}");
                    r.state = upstream_state;
                    r.last_error = format!("{upstream}; the Kafka replay waits: {e}");
                }
                Err(Refusal::Degraded(e)) => {
                    tracing::error!("replica degraded: {e}");
                    r.state = State::Degraded;
                    r.last_error = e;
                }
            }
        }
    }

    /// A connection attempt failed before a usable hello: retry (degraded when the versions
    /// differ, which only an operator can fix).
    fn attempt_failed(&mut self, e: String) {
        let r = self.replica.as_mut().expect("a replica");
        if r.last_error != e {
            warn!("replica: {e}");
        }
        if e.starts_with(VERSION_MISMATCH) {
            r.state = State::Degraded;
        }
        r.last_error = e;
        self.schedule_attempt();
    }

    /// Starts the connector thread after the current backoff (jittered), doubling it.
    fn schedule_attempt(&mut self) {
        let waker = self.waker();
        let local = self.engine.repl.offset;
        let Some(r) = &mut self.replica else { return };
        if r.connector.is_some() {
            return;
        }
        use rand::Rng;
        let base = if r.state == State::Degraded { BACKOFF_MAX } else { r.backoff };
        let delay = base.mul_f64(rand::thread_rng().gen_range(0.5..1.5));
        r.backoff = (r.backoff * 2).min(BACKOFF_MAX);
        let job = Job {
            settings: r.settings.clone(),
            #[cfg(feature = "kafka")]
            kafka: r.kafka.as_ref().map(|k| k.0.clone()),
            local,
            replay_pending: r.kafka_replay_pending,
        };
        let (tx, rx) = mpsc::channel();
        r.connector = Some(rx);
        let spawned = std::thread::Builder::new().name("replica-connect".into()).spawn(move || {
            std::thread::sleep(delay);
            let _ = tx.send(attempt(&job));
            let _ = waker.wake();
        });
        if let Err(e) = spawned {
            warn!("cannot start the replica connector thread: {e}");
            r.connector = None;
        }
    }

    /// The loop was woken: a connector thread may have finished.
    pub(crate) fn replica_on_wake(&mut self) {
        let Some(r) = &mut self.replica else { return };
        let Some(rx) = &r.connector else { return };
        let result = match rx.try_recv() {
            Ok(result) => result,
            Err(mpsc::TryRecvError::Empty) => return,
            Err(mpsc::TryRecvError::Disconnected) => {
                Attempt::Failed("the connector thread ended without a result".into())
            }
        };
        r.connector = None;
        r.attempts += 1;
        match result {
            Attempt::Upstream(hs) => self.follow(hs),
            Attempt::KafkaOnly { upstream } => {
                self.replay_without_upstream(upstream, Some(Ok(())));
                self.schedule_attempt();
            }
            Attempt::Failed(e) => self.attempt_failed(e),
        }
    }

    /// Whether this replica catches up through Kafka (`--kafka`).
    pub(crate) fn kafka_configured(&self) -> bool {
        #[cfg(feature = "kafka")]
        return self.replica.as_ref().is_some_and(|r| r.kafka.is_some());
        #[cfg(not(feature = "kafka"))]
        false
    }

    /// Applies the reconnect rules to a fresh handshake, and goes live or schedules a retry.
    fn follow(&mut self, hs: Handshake) {
        match self.try_follow(hs) {
            Ok(()) => {}
            Err(Refusal::Abandon(e)) => {
                warn!("replica: {e}; retrying");
                let r = self.replica.as_mut().expect("a replica");
                r.state = State::Reconnecting;
                r.last_error = e;
                self.schedule_attempt();
            }
            Err(Refusal::Degraded(e)) => {
                tracing::error!("replica degraded: {e}");
                let r = self.replica.as_mut().expect("a replica");
                r.state = State::Degraded;
                r.last_error = e;
                self.schedule_attempt();
            }
        }
    }

    fn try_follow(&mut self, hs: Handshake) -> Result<(), Refusal> {
        let Handshake { stream, replid, offset, previous, leftover, kafka } = hs;
        let kafka_configured = self.kafka_configured();
        let r = self.replica.as_mut().expect("a replica");
        r.last_io = Some(Instant::now());
        let local = self.engine.repl;
        if replid != local.replid {
            if local.offset == 0 && !r.has_history && self.engine.total_keys() == 0 {
                info!("replica: adopting the upstream's lineage {replid}");
                self.engine.set_replication(Replication::at(replid, 0));
            } else if previous == Some((local.replid, local.offset)) {
                // The upstream restarted from a restart point of ours at exactly our offset
                // and numbers what it writes since under a new id: the same history through
                // here. Our own subscribers (none while the link is down) would follow the
                // same way: the predecessor is passed on.
                info!(
                    "replica: the upstream continues lineage {} from offset {} as lineage {replid}; following it",
                    local.replid, local.offset
                );
                // Mutations Kafka has not confirmed are checked first, against the records of
                // the lineage they were applied under; the new id is taken after (below).
                if !kafka_configured || r.unconfirmed.is_empty() {
                    self.engine.set_replication(local.successor_named(replid));
                }
            } else if let Some((from, at)) = previous.filter(|&(id, at)| {
                kafka_configured && local.offset < offset && !(id == local.replid && local.offset > at)
            }) {
                // The upstream's lineage continues another (ours, past our offset, or one that
                // continues ours: a primary restarted more than once while we were away). Kafka
                // holds the way: the rest of ours, then each successor's records from its first,
                // which names its predecessor; the catch-up crosses at each
                // (`journal::kafka::replay`), and where it ends is checked below.
                info!(
                    "replica: the upstream serves lineage {replid}, which continues lineage {from} from offset {at}; \
                     this server holds lineage {} at offset {}: Kafka holds the way from here to there",
                    local.replid, local.offset
                );
            } else if let Some((id, at)) = previous.filter(|(id, _)| *id == local.replid) {
                r.upstream_offset = None;
                let o = local.offset;
                let why = if o > at {
                    format!(
                        "this server is past it, at offset {o}: its mutations after {at} may be ones the upstream \
                         lost, and the upstream has numbered others since"
                    )
                } else {
                    format!("this server is behind it, at offset {o}: a gap no firehose frame fills")
                };
                return Err(Refusal::Degraded(format!(
                    "the upstream restarted at offset {at} of this server's lineage {id} and continues it as lineage \
                     {replid} (now at offset {offset}); {why} (install a snapshot of the upstream's lineage and \
                     restart with --load)"
                )));
            } else {
                // Its offset counts another history: not comparable with ours (INFO shows -1).
                r.upstream_offset = None;
                return Err(Refusal::Degraded(format!(
                    "the upstream serves lineage {replid} at offset {offset}, this server holds lineage {} at offset {}: \
                     a different history (install a snapshot of the upstream's lineage and restart with --load)",
                    local.replid, local.offset
                )));
            }
        }
        let r = self.replica.as_mut().expect("a replica");
        r.upstream_offset = Some(offset);
        let local = self.engine.repl.offset;
        if offset < local {
            return Err(Refusal::Degraded(format!(
                "the upstream is at logical offset {offset}, behind this server's {local}"
            )));
        }
        // At the upstream's offset, mutations Kafka has not confirmed may still be another
        // history's (an upstream that lost them in a crash and wrote others there): a
        // catch-up checks them first.
        let unconfirmed = !r.unconfirmed.is_empty() && kafka_configured;
        let (stream, buffered) = if offset > local || unconfirmed {
            self.handoff(stream, offset, leftover, kafka)?
        } else {
            (stream, leftover)
        };
        let now = self.engine.repl;
        if now.replid != replid {
            // A catch-up toward a successor of our lineage that ended short of the change of
            // id (the upstream had written nothing under it yet), or went past its start.
            if previous == Some((now.replid, now.offset)) {
                self.engine.set_replication(now.successor_named(replid));
            } else {
                return Err(Refusal::Degraded(format!(
                    "the upstream serves lineage {replid}, which continues lineage {} from offset {}; Kafka took \
                     this server to lineage {} at offset {} instead (install a snapshot of the upstream's \
                     lineage and restart with --load)",
                    previous.map_or_else(|| "-".to_string(), |(id, _)| id.to_string()),
                    previous.map_or(0, |(_, at)| at),
                    now.replid,
                    now.offset
                )));
            }
        }
        self.go_live(stream, buffered)
    }

    /// Upstream ahead, or unconfirmed mutations to check: Kafka catch-up to its hello offset
    /// (and past every unconfirmed mutation) while the firehose is buffered.
    /// `probed`: whether Kafka answered the connector (None: ask now, as at startup).
    #[allow(unused_mut, unused_variables)]
    fn handoff(
        &mut self,
        mut stream: Stream,
        target: u64,
        leftover: Vec<u8>,
        probed: Option<Result<(), String>>,
    ) -> Result<(Stream, Vec<u8>), Refusal> {
        let local = self.engine.repl.offset;
        #[cfg(feature = "kafka")]
        if let Some((topic, _)) = self.replica.as_ref().and_then(|r| r.kafka.as_ref()) {
            // An unreachable Kafka, or a topic that does not exist yet: retried, without
            // waiting out the replay's own timeouts on the server thread.
            probed.unwrap_or_else(|| probe_kafka(topic)).map_err(|e| {
                Refusal::Abandon(format!(
                    "{e} (the upstream is at logical offset {target}, this server at {local}: a Kafka catch-up is needed)"
                ))
            })?;
            let r = self.replica.as_mut().expect("a replica");
            r.state = State::Sync;
            if target > local {
                info!("replica: the upstream is at logical offset {target}, this server at {local}: catching up through Kafka");
            } else {
                info!(
                    "replica: the upstream is at this server's logical offset {local}; checking the {} mutations \
                     applied through it that Kafka had not confirmed",
                    r.unconfirmed.len()
                );
            }
            // The firehose's frames past the hello wait here while Kafka is replayed. Bounded
            // as a primary bounds what a replica has yet to read (a replica of redis-server
            // or of goblin-core alike), never below the queue a subscriber gets.
            let hard = usize::try_from(self.output_limits.replica.hard).unwrap_or(usize::MAX);
            let limit = if hard == 0 { 0 } else { hard.max(self.cfg.replication_buffer_bytes as usize) };
            let mut bytes = leftover;
            let stop = AtomicBool::new(false);
            let (caught, read) = std::thread::scope(|s| {
                let reader = s.spawn(|| buffer_until_stopped(&mut stream, &mut bytes, limit, &stop));
                let caught = self.kafka_catch_up(Some(target));
                stop.store(true, Ordering::Release);
                let read = reader.join().unwrap_or_else(|_| Err("the handoff reader panicked".into()));
                (caught, read)
            });
            caught?;
            read.map_err(Refusal::Abandon)?;
            return Ok((stream, bytes));
        }
        Err(Refusal::Degraded(format!(
            "the upstream is at logical offset {target}, this server at {local}, and without --kafka the gap cannot be filled"
        )))
    }

    /// Replays Kafka from the replica's cursor: until the local offset reaches `until`
    /// (handoff), or once through the high watermark (`None`: startup without an upstream).
    /// Kafka being unreachable or stalling is transient (Abandon); a record that cannot be
    /// applied is Degraded (it stays in the topic: only an operator can act on it).
    #[cfg(feature = "kafka")]
    fn kafka_catch_up(&mut self, until: Option<u64>) -> Result<(), Refusal> {
        use crate::journal::kafka::{replay, Start, CATCH_UP_STALL};
        let (target, mut from) =
            self.replica.as_ref().and_then(|r| r.kafka.clone()).expect("--kafka on a replica");
        let mut last_progress = Instant::now();
        loop {
            let before = self.engine.repl.offset;
            let adopt = !self.replica.as_ref().expect("a replica").has_history && before == 0;
            let r = self.replica.as_mut().expect("a replica");
            let position = r.consumer_position;
            let mut window = std::mem::take(&mut r.unconfirmed);
            let unconfirmed_before = window.len();
            let replayed =
                replay(&target, &mut self.engine, from, position, adopt, Some(&mut window), CATCH_UP_STALL);
            let r = self.replica.as_mut().expect("a replica");
            r.unconfirmed = window;
            let checked = r.unconfirmed.len() < unconfirmed_before;
            let stats = match replayed {
                Ok(stats) => stats,
                Err(e) => return Err(self.replay_failed(e, before)),
            };
            if stats.last_broker_offset >= 0 {
                from = Start::Offset(stats.last_broker_offset);
                let r = self.replica.as_mut().expect("a replica");
                r.kafka.as_mut().expect("kafka").1 = from;
                // The replay applied every other producer's record through its last one.
                r.consumer_position = r.consumer_position.max(stats.last_broker_offset + 1);
                // The last record read has a logical offset at or below the local one, so every
                // later mutation sits after it: a safe cursor (see `frame::Cursor`).
                r.cursor =
                    Cursor { logical: self.engine.repl.offset as i64, broker: stats.last_broker_offset };
                r.has_history |= stats.applied > 0;
            }
            let now_at = self.engine.repl.offset;
            let r = self.replica.as_mut().expect("a replica");
            match until {
                None => return Ok(()),
                Some(t) if now_at >= t && r.unconfirmed.is_empty() => return Ok(()),
                Some(t) if now_at >= t => {
                    // What is left lies above the lineage's last record in Kafka: another
                    // producer's writes the upstream applied (no own record names them), or
                    // the upstream's own, not acknowledged yet. A second's wait tells them
                    // apart as far as Kafka can (see `unconfirmed`).
                    if checked {
                        last_progress = Instant::now();
                    } else if last_progress.elapsed() > UNCHECKABLE_AFTER {
                        warn!(
                            "replica: {} mutations applied at logical offsets {}..={} have no record of this lineage \
                             in Kafka at or after them (other producers' writes the upstream applied, or its own not \
                             acknowledged): they cannot be checked; going on",
                            r.unconfirmed.len(),
                            r.unconfirmed.first().unwrap_or(0),
                            r.unconfirmed.last().unwrap_or(0)
                        );
                        r.unconfirmed = Default::default();
                        return Ok(());
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Some(t) => {
                    if now_at > before || checked {
                        last_progress = Instant::now();
                    } else if last_progress.elapsed() > KAFKA_STALL {
                        return Err(Refusal::Abandon(format!(
                            "{KAFKA_STALLED} at logical offset {now_at} (the upstream's hello named {t}; {} \
                             applied mutations not found in Kafka yet)",
                            r.unconfirmed.len()
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }

    /// A replay stopped (`f`) after starting at committed offset `before`. What it applied
    /// is a verified prefix of the lineage (each own record at its offset, other producers'
    /// records where the primary applied them): it is committed and kept, and the next
    /// catch-up goes on from where this one stopped (`f.resume`): its seek and consumer
    /// position leave every applied record a duplicate and every held-back one still to apply,
    /// so nothing is applied twice or skipped. Kafka failing is transient (Abandon: retried
    /// at once with backoff); a record that cannot be applied stays degraded (retried too, and
    /// stopping at the same record, until an operator acts).
    #[cfg(feature = "kafka")]
    fn replay_failed(&mut self, f: crate::journal::kafka::ReplayFailure, before: u64) -> Refusal {
        use crate::journal::kafka::{ReplayError, Start};
        // The store may hold part of a write that no mutation describes (as for a frame,
        // `apply_frame`).
        if let ReplayError::Crashed(m) = &f.error {
            self.fail_stop(m);
        }
        let applied_to = self.engine.next_offset() - 1;
        if let Some(b) = self.engine.commit(engine::Origin::Replay) {
            self.engine.recycle(b);
        }
        let transient = matches!(f.error, ReplayError::Kafka(_));
        let e = f.error.to_string();
        if applied_to == before {
            return if transient { Refusal::Abandon(e) } else { Refusal::Degraded(e) };
        }
        let resume = f.resume;
        let r = self.replica.as_mut().expect("a replica");
        r.has_history = true;
        r.kafka.as_mut().expect("kafka").1 = Start::Offset(resume.from);
        r.consumer_position = resume.position;
        if resume.own_broker >= 0 {
            // Its own record's logical offset is at or below the local one: a safe cursor.
            r.cursor = Cursor { logical: applied_to as i64, broker: resume.own_broker };
        }
        let why = format!(
            "{e} (the replay had applied logical offsets {} to {applied_to} before this; they are kept, and \
             the next attempt goes on from broker offset {})",
            before + 1,
            resume.from
        );
        if transient {
            Refusal::Abandon(why)
        } else {
            Refusal::Degraded(why)
        }
    }

    #[cfg(not(feature = "kafka"))]
    fn kafka_catch_up(&mut self, _until: Option<u64>) -> Result<(), Refusal> {
        Ok(())
    }

    /// Registers the link, applies what was buffered (skipping what Kafka already applied)
    /// and becomes the ready replica.
    fn go_live(&mut self, mut stream: Stream, buffered: Vec<u8>) -> Result<(), Refusal> {
        let token = crate::server::UPSTREAM;
        self.poll
            .registry()
            .register(&mut stream, token, mio::Interest::READABLE | mio::Interest::WRITABLE)
            .map_err(|e| Refusal::Abandon(format!("cannot register the upstream link: {e}")))?;
        let acked = self.engine.repl.offset;
        let r = self.replica.as_mut().expect("a replica");
        r.link = Some(Link { stream, buf: buffered, out: Vec::new(), acked, acked_at: Instant::now() });
        r.state = State::Live;
        r.last_io = Some(Instant::now());
        r.successes += 1;
        r.backoff = BACKOFF_MIN;
        r.last_error.clear();
        r.has_history = true;
        // The upstream's history supersedes the replay a startup without it would have done.
        r.kafka_replay_pending = false;
        info!(
            "replica: live from {} at logical offset {} of lineage {}",
            r.settings.source.describe(),
            self.engine.repl.offset,
            self.engine.repl.replid
        );
        // Buffered frames (and any already in the socket) are applied now.
        self.replica_io();
        Ok(())
    }

    /// The live upstream link when it runs over a ring (`--replica-ring`): the loop polls it
    /// like its own ring clients (transport/ring.rs).
    pub(crate) fn upstream_polled(&mut self) -> Option<&mut dyn crate::transport::Polled> {
        self.replica.as_mut()?.link.as_mut()?.stream.polled()
    }

    /// From the cron: a live link silent for longer than LINK_TIMEOUT is dropped.
    pub(crate) fn replica_cron(&mut self) {
        let Some(r) = &self.replica else { return };
        if r.link.is_some() && r.last_io.is_some_and(|t| t.elapsed() > LINK_TIMEOUT) {
            self.link_lost(format!("nothing from the upstream for {} s", LINK_TIMEOUT.as_secs()));
        }
    }

    /// The link is gone: not ready, own subscribers dropped, attempts restart.
    fn link_lost(&mut self, why: String) {
        let Some(r) = &mut self.replica else { return };
        if let Some(mut link) = r.link.take() {
            let _ = self.poll.registry().deregister(&mut link.stream);
        }
        let r = self.replica.as_mut().expect("a replica");
        warn!("replica: {why}; not ready, reconnecting");
        r.state = State::Reconnecting;
        r.last_error = why;
        self.firehose_disconnect_all();
        self.schedule_attempt();
    }

    /// Token UPSTREAM: write pending acknowledgements, read and apply frames.
    pub(crate) fn replica_io(&mut self) {
        let Some(link) = self.replica.as_mut().and_then(|r| r.link.as_mut()) else { return };
        let mut buf = std::mem::take(&mut link.buf);
        let len_before = buf.len();
        let mut closed = None;
        let mut again = false;
        for i in 0..READS_PER_TURN {
            let len = buf.len();
            buf.resize(len + READ_CHUNK, 0);
            match link.stream.read(&mut buf[len..]) {
                Ok(0) => {
                    buf.truncate(len);
                    closed = Some("the upstream closed the connection".to_string());
                    break;
                }
                Ok(n) => {
                    buf.truncate(len + n);
                    if n < READ_CHUNK {
                        break;
                    }
                    again = i + 1 == READS_PER_TURN;
                }
                Err(e) => {
                    buf.truncate(len);
                    match e.kind() {
                        io::ErrorKind::WouldBlock => break,
                        io::ErrorKind::Interrupted => continue,
                        _ => {
                            closed = Some(format!("reading the upstream: {e}"));
                            break;
                        }
                    }
                }
            }
        }
        self.stats.net_repl_input_bytes += (buf.len() - len_before) as u64;
        // Liveness counts bytes, not wake-ups (a writable edge reads nothing).
        if buf.len() > len_before {
            if let Some(r) = &mut self.replica {
                r.last_io = Some(Instant::now());
            }
        }
        let (at, failed) = self.apply_upstream_bytes(&buf);
        buf.drain(..at);
        if let Some(e) = failed {
            return self.link_lost(e);
        }
        let offset = self.engine.repl.offset;
        let Some(link) = self.replica.as_mut().and_then(|r| r.link.as_mut()) else { return };
        link.buf = buf;
        if offset > link.acked || (offset == link.acked && link.acked_at.elapsed() >= ACK_AGAIN_AFTER) {
            link.acked = offset;
            link.acked_at = Instant::now();
            frame::encode_ack(&mut link.out, offset);
        }
        while !link.out.is_empty() {
            match link.stream.write(&link.out) {
                Ok(n) => {
                    link.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    closed.get_or_insert(format!("writing to the upstream: {e}"));
                    break;
                }
            }
        }
        if let Some(why) = closed {
            return self.link_lost(why);
        }
        if again {
            self.upstream_again = true;
        }
    }

    /// Applies every whole frame at the front of `buf`, in order: Ok((consumed bytes, None)),
    /// or the bytes consumed before the frame that ends the link and why it does.
    fn apply_upstream_bytes(&mut self, buf: &[u8]) -> (usize, Option<String>) {
        // A window of frames at a time: the window is decoded first, its mutations' keys hashed
        // and their bucket slots prefetched, and each frame's chain heads are prefetched two
        // frames before it is applied (as the dispatcher does for a client's pipeline): a
        // replica's lookups were a third of its time, each two cache misses in a row.
        let mut at = 0;
        let mut window = Vec::with_capacity(FRAME_WINDOW);
        let mut hashes: Vec<u64> = Vec::new();
        let mut spans: Vec<std::ops::Range<usize>> = Vec::with_capacity(FRAME_WINDOW);
        while at < buf.len() {
            window.clear();
            hashes.clear();
            spans.clear();
            let mut scan = at;
            while window.len() < FRAME_WINDOW && scan < buf.len() {
                let decoded = frame::decode(&buf[scan..]);
                let from = hashes.len();
                let next = match &decoded {
                    Ok(Some((Frame::Batch(b), n))) => {
                        let ks = &self.engine.ks;
                        hashes.extend(
                            b.muts
                                .iter()
                                .filter_map(|m| engine::replay::record_key(m))
                                .map(|k| ks.key_hash(k)),
                        );
                        Some(*n)
                    }
                    Ok(Some((Frame::Tick { .. }, n))) => Some(*n),
                    _ => None,
                };
                spans.push(from..hashes.len());
                window.push(decoded);
                match next {
                    Some(n) => scan += n,
                    None => break, // handled in turn; nothing after it is looked at
                }
            }
            if window.len() > 1 {
                for &h in &hashes {
                    self.engine.ks.prefetch(h, false);
                }
            }
            for (i, decoded) in window.drain(..).enumerate() {
                if let Some(ahead) = spans.get(i + CHAIN_AHEAD) {
                    for &h in &hashes[ahead.clone()] {
                        self.engine.ks.prefetch(h, true);
                    }
                }
                match decoded {
                    Ok(None) => return (at, None),
                    Ok(Some((Frame::Batch(b), n))) => {
                        if let Err(e) = self.apply_frame(&b) {
                            return (at, Some(e));
                        }
                        at += n;
                    }
                    Ok(Some((Frame::Tick { offset, cursor }, n))) => {
                        if let Some(r) = &mut self.replica {
                            r.upstream_offset = Some(r.upstream_offset.unwrap_or(0).max(offset));
                            // Kafka holds the lineage through the cursor: what an idle link
                            // applied last needs no check on the next reconnect. (The cursor
                            // to seek from moves with frames only, paired with their consumer
                            // position.)
                            if cursor.logical >= 0 {
                                r.unconfirmed.confirm_through(cursor.logical as u64);
                            }
                        }
                        at += n;
                    }
                    Ok(Some((Frame::Hello { .. }, _))) => {
                        return (at, Some("the upstream sent a second hello".to_string()));
                    }
                    Err(e) => {
                        return (at, Some(format!("a bad frame from the upstream: {e}")));
                    }
                }
            }
        }
        (at, None)
    }

    /// Applies one frame as one batch. Frames at or below the local offset are skipped; a
    /// frame that does not continue the lineage exactly is refused. If a mutation fails the
    /// verified prefix is committed (it is the upstream's history, at its offsets) and the
    /// link is abandoned.
    fn apply_frame(&mut self, b: &BatchFrame) -> Result<(), String> {
        if b.replid != self.engine.repl.replid {
            return Err(format!(
                "a frame of lineage {} on a link of lineage {}",
                b.replid, self.engine.repl.replid
            ));
        }
        let local = self.engine.repl.offset;
        if b.last() > local {
            let now = self.clock_ms;
            for (i, m) in b.muts.iter().enumerate() {
                let offset = b.first + i as u64;
                let db = b.db_of(i);
                if db >= self.engine.databases() {
                    self.commit_batch(engine::Origin::Replay);
                    return Err(format!(
                        "replicated write at logical offset {offset} in database {db}: this replica has databases \
                         0 to {} (--databases)",
                        self.engine.databases() - 1
                    ));
                }
                self.engine.select(db);
                match self.engine.apply_record(m, Some(offset), now) {
                    Ok(Applied::Applied | Applied::Duplicate | Applied::IgnoredRead) => {}
                    Err(RecordError::Panicked { command }) => self.fail_stop(&command),
                    Err(e) => {
                        self.commit_batch(engine::Origin::Replay);
                        return Err(format!("replicated write at logical offset {offset}: {e}"));
                    }
                }
            }
            self.commit_batch(engine::Origin::Replay);
            if self.kafka_configured() {
                let r = self.replica.as_mut().expect("a replica");
                for (i, m) in b.muts.iter().enumerate() {
                    let offset = b.first + i as u64;
                    if offset > local {
                        r.unconfirmed.push(offset, m);
                    }
                }
            }
            // Readers parked here (XREAD: a replica's only blocking commands are reads) are
            // woken by the upstream's writes as by local ones.
            if !self.engine.ready_keys.is_empty() {
                self.serve_ready_keys();
            }
        }
        let applied = self.engine.repl.offset;
        let r = self.replica.as_mut().expect("a replica");
        r.upstream_offset = Some(r.upstream_offset.unwrap_or(0).max(b.last()));
        if b.cursor.logical >= 0 {
            r.latest_cursor = b.cursor;
            r.unconfirmed.confirm_through(b.cursor.logical as u64);
        }
        if b.position >= 0 {
            r.consumer_position = b.position;
        }
        if r.latest_cursor.logical >= 0 && r.latest_cursor.logical as u64 <= applied {
            r.cursor = r.latest_cursor;
            #[cfg(feature = "kafka")]
            if let Some(k) = &mut r.kafka {
                k.1 = crate::journal::kafka::Start::Offset(r.cursor.broker);
            }
        }
        Ok(())
    }

    /// INFO replication on a replica, and the fields every role has.
    pub(crate) fn replication_info(&self, t: &mut String) {
        use std::fmt::Write as _;
        let mut f = |name: &str, v: &dyn std::fmt::Display| {
            let _ = write!(t, "{name}:{v}\r\n");
        };
        let acked = self.kafka_cursor().logical;
        if self.redis_primary_info(&mut f) {
            self.subscribers_info(&mut f);
            return;
        }
        match &self.replica {
            None => {
                f("role", &"master");
                f("goblin_ready", &1);
                self.subscribers_info(&mut f);
                f("kafka_acknowledged_offset", &acked);
                f("firehose_released_offset", &self.firehose_released());
                f("firehose_retained_bytes", &self.firehose.retained_bytes());
                f("firehose_full_disconnections", &self.firehose.full_disconnections);
            }
            Some(r) => {
                let live = r.is_live();
                let (host, port) = match &r.settings.source {
                    Source::Tcp { host, port } => (host.clone(), *port),
                    Source::Unix(p) | Source::Ring(p) => (p.display().to_string(), 0),
                    Source::Rdma { host, port, .. } => (host.clone(), *port),
                };
                f("role", &"slave");
                f("goblin_ready", &(live as u8));
                f("master_host", &host);
                f("master_port", &port);
                f(
                    "master_transport",
                    &match r.settings.source {
                        Source::Tcp { .. } => "tcp",
                        Source::Unix(_) => "uds",
                        Source::Ring(_) => "ring",
                        Source::Rdma { .. } => "rdma",
                    },
                );
                f("master_link_status", &if live { "up" } else { "down" });
                f("replica_state", &r.state.name());
                f("master_last_io_seconds_ago", &r.last_io.map_or(-1, |t| t.elapsed().as_secs() as i64));
                f("master_sync_in_progress", &((r.state == State::Sync) as u8));
                f("slave_read_repl_offset", &self.engine.repl.offset);
                f("slave_repl_offset", &self.engine.repl.offset);
                // upstream_repl_offset: the last offset the upstream reported in this server's
                // lineage (hello, frames, ticks), kept while the link is down as the last known
                // value; -1 before any hello, or when the upstream serves another lineage (its
                // offsets count another history). replica_lag: how far behind it this server
                // is, only while the link is up (sync or live): otherwise the upstream's
                // offset now is unknown, and the lag is -1 (the seed's rule).
                f("upstream_repl_offset", &r.upstream_offset.map_or(-1, |o| o as i64));
                let linked = matches!(r.state, State::Live | State::Sync);
                let lag = match r.upstream_offset {
                    Some(u) if linked => u.saturating_sub(self.engine.repl.offset) as i64,
                    _ => -1,
                };
                f("replica_lag", &lag);
                f("replica_reconnect_attempts", &r.attempts);
                f("replica_reconnect_successes", &r.successes);
                f("replica_last_error", &r.last_error.replace(['\r', '\n'], " "));
                // Mutations applied from frames that Kafka has not confirmed yet (--kafka only):
                // the next reconnect checks them against the topic.
                f("replica_unconfirmed_mutations", &r.unconfirmed.len());
                f("slave_priority", &self.redis_primary_settings.priority);
                f("slave_read_only", &1);
                f("replica_announced", &(self.redis_primary_settings.announced as u8));
                self.subscribers_info(&mut f);
                f("kafka_acknowledged_offset", &acked);
            }
        }
    }

    /// The INFO fields about this server's own subscribers and lineage, on every role.
    fn subscribers_info(&self, f: &mut impl FnMut(&str, &dyn std::fmt::Display)) {
        let subs = self.downstreams();
        f("connected_slaves", &subs.len());
        // With min-replicas-to-write on: the replicas that count now.
        if self.cfg.min_replicas_to_write > 0 && self.cfg.min_replicas_max_lag > 0 {
            f("min_slaves_good_slaves", &self.good_replicas(self.cfg.min_replicas_max_lag));
        }
        for (i, (addr, offset, lag, state)) in subs.iter().enumerate() {
            let (ip, port) = addr.rsplit_once(':').unwrap_or((addr.as_str(), "0"));
            f(&format!("slave{i}"), &format!("ip={ip},port={port},state={state},offset={offset},lag={lag}"));
        }
        // Of those, the redis-server replicas on Redis's own protocol
        // (`replication::redis_replicas`): their offsets too are logical offsets.
        f("connected_redis_replicas", &self.redis_replica_conns().count());
        f(
            "master_failover_state",
            &crate::replication::failover::Failover::state_name(self.failover.as_ref()),
        );
        // The lineage this one continues (Redis's replid2 and second_repl_offset: the first
        // offset past the part of the history the two share).
        let repl = self.engine.repl;
        f("master_replid", &repl.replid);
        match repl.previous {
            Some((id, _)) => f("master_replid2", &id),
            None => f("master_replid2", &"0000000000000000000000000000000000000000"),
        }
        f("master_repl_offset", &repl.offset);
        f("second_repl_offset", &repl.previous.map_or(-1, |(_, at)| at as i64 + 1));
    }

    /// ROLE: `master offset [[addr port offset] ...]`, or
    /// `slave host port state offset transport`.
    pub(crate) fn role_reply(&self, out: &mut Vec<u8>) {
        use resp::reply;
        if self.redis_primary_role(out) {
            return;
        }
        match &self.replica {
            None => {
                let subs = self.downstreams();
                reply::array_len(out, 3);
                reply::bulk(out, b"master");
                reply::integer(out, self.engine.repl.offset as i64);
                reply::array_len(out, subs.len());
                for (addr, offset, _, _) in subs {
                    let (ip, port) = addr.rsplit_once(':').unwrap_or((addr.as_str(), "0"));
                    reply::array_len(out, 3);
                    reply::bulk(out, ip.as_bytes());
                    reply::bulk(out, port.as_bytes());
                    reply::bulk(out, offset.to_string().as_bytes());
                }
            }
            Some(r) => {
                let (host, port, transport) = match &r.settings.source {
                    Source::Tcp { host, port } => (host.clone(), *port as i64, "tcp"),
                    Source::Unix(p) => (p.display().to_string(), 0, "uds"),
                    Source::Ring(p) => (p.display().to_string(), 0, "ring"),
                    Source::Rdma { host, port, .. } => (host.clone(), *port as i64, "rdma"),
                };
                // Redis's link states: connect, connecting, sync, connected.
                let state = match r.state {
                    State::Live => "connected",
                    State::Sync => "sync",
                    State::Connecting => "connecting",
                    State::Reconnecting | State::Degraded => "connect",
                };
                reply::array_len(out, 6);
                reply::bulk(out, b"slave");
                reply::bulk(out, host.as_bytes());
                reply::integer(out, port);
                reply::bulk(out, state.as_bytes());
                reply::integer(out, self.engine.repl.offset as i64);
                reply::bulk(out, transport.as_bytes());
            }
        }
    }
}
