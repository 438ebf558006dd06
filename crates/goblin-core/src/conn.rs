//! One client connection: its socket, input and output buffers, parser and per-client state.

use mio::event::Source;
use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Registry, Token};
use resp::RequestParser;
use std::io::{self, Read, Write};
use std::time::Instant;

/// The socket of a connection: TCP, Unix domain, or TLS over TCP. The TLS session is boxed
/// (rustls keeps sizeable state) and holds a `rustls::Connection`, server or client side, so
/// the same variant serves `--tls-port` clients and outgoing replica links.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<crate::transport::tls::TlsStream>),
    /// A `--ring` client: reads and writes go to its shared-memory rings; the mio source is
    /// its rendezvous socket (doorbells and EOF). See [`crate::transport::ring`].
    Ring(Box<goblin_ring::Endpoint>),
    /// An `--rdma-port` client (or a `--replica-rdma` link): reads and writes go to RDMA
    /// rings; the mio sources are its TCP socket (liveness, shm doorbells) and the fabric's
    /// wake-up descriptor if it has one. See [`crate::transport::rdma`].
    Rdma(Box<goblin_rdma::Endpoint>),
}

impl Stream {
    /// Pushes out bytes the stream holds beyond the caller's buffers (TLS ciphertext, including
    /// handshake messages produced while reading). Returns whether some are still waiting for
    /// the socket: the loop then keeps WRITABLE interest even with its own output all written.
    pub fn flush_buffered(&mut self) -> io::Result<bool> {
        match self {
            Stream::Tls(s) => s.flush_buffered(),
            _ => Ok(false),
        }
    }

    /// The stream as one the loop polls (rings and RDMA), else None.
    pub(crate) fn polled(&mut self) -> Option<&mut dyn crate::transport::Polled> {
        match self {
            Stream::Ring(e) => Some(&mut **e),
            Stream::Rdma(e) => Some(&mut **e),
            _ => None,
        }
    }

    pub(crate) fn is_polled(&self) -> bool {
        matches!(self, Stream::Ring(_) | Stream::Rdma(_))
    }

    /// Before dropping the stream: a TLS close_notify, best effort (plain sockets: nothing).
    pub fn close_notify(&mut self) {
        if let Stream::Tls(s) = self {
            s.close_notify();
        }
    }
}

impl Stream {
    /// Ends the sending side (a FIN after what was written), for a socket; false for the
    /// transports that have no half-close (TLS, the rings), which are closed outright.
    pub fn shutdown_write(&self) -> bool {
        match self {
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Write).is_ok(),
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Write).is_ok(),
            _ => false,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
            Stream::Ring(r) => r.try_read(buf),
            Stream::Rdma(r) => r.try_read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
            Stream::Ring(r) => r.try_write(buf),
            Stream::Rdma(r) => r.try_write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl std::os::fd::AsRawFd for Stream {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tls(s) => s.tcp.as_raw_fd(),
            Stream::Ring(r) => r.sock_fd(),
            Stream::Rdma(r) => r.sock_fd(),
        }
    }
}

impl Source for Stream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.register(r, t, i),
            Stream::Unix(s) => s.register(r, t, i),
            Stream::Tls(s) => s.tcp.register(r, t, i),
            Stream::Ring(e) => mio::unix::SourceFd(&e.sock_fd()).register(r, t, i),
            Stream::Rdma(e) => {
                mio::unix::SourceFd(&e.sock_fd()).register(r, t, i)?;
                // The same token: a wake-up is handled as the connection's readable event.
                match e.wake_fd() {
                    Some(fd) => mio::unix::SourceFd(&fd).register(r, t, Interest::READABLE),
                    None => Ok(()),
                }
            }
        }
    }
    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.reregister(r, t, i),
            Stream::Unix(s) => s.reregister(r, t, i),
            Stream::Tls(s) => s.tcp.reregister(r, t, i),
            Stream::Ring(e) => mio::unix::SourceFd(&e.sock_fd()).reregister(r, t, i),
            // The wake-up descriptor keeps its READABLE registration.
            Stream::Rdma(e) => mio::unix::SourceFd(&e.sock_fd()).reregister(r, t, i),
        }
    }
    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.deregister(r),
            Stream::Unix(s) => s.deregister(r),
            Stream::Tls(s) => s.tcp.deregister(r),
            Stream::Ring(e) => mio::unix::SourceFd(&e.sock_fd()).deregister(r),
            Stream::Rdma(e) => {
                if let Some(fd) = e.wake_fd() {
                    let _ = mio::unix::SourceFd(&fd).deregister(r);
                }
                mio::unix::SourceFd(&e.sock_fd()).deregister(r)
            }
        }
    }
}

/// CLIENT REPLY mode.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ReplyMode {
    On,
    Off,
    /// Drop the reply of the next command only.
    SkipNext,
    /// Set while the command after `CLIENT REPLY SKIP` runs: its reply is dropped.
    Skipping,
    /// This command's reply goes out, then none: a replica's PSYNC answered `+CONTINUE`.
    OffAfterThis,
}

/// A client parked by a blocking command (BLPOP ...): the command to retry when a key it
/// waits on is signalled ready, and where it waits.
pub struct Parked {
    pub args: Vec<Vec<u8>>,
    /// The database the command runs in (its client cannot SELECT another while parked).
    pub db: u32,
    /// The keys waited on (each once) and the absolute deadline (None: forever).
    pub keys: Vec<Vec<u8>>,
    pub deadline: Option<store::Millis>,
    /// When to retry the command though no key was signalled (XREADGROUP CLAIM), if before
    /// the deadline.
    pub recheck_at: Option<store::Millis>,
    /// A retry that blocks again lets the next waiter on the key try (`BlockOn::keeps_turn`).
    pub keeps_turn: bool,
    /// Arrival order, which also orders the deadline index.
    pub seq: u64,
}

impl Parked {
    /// Its time in the deadline index: the recheck or the deadline, whichever comes first.
    pub fn wake_at(&self) -> Option<store::Millis> {
        match (self.deadline, self.recheck_at) {
            (Some(d), Some(r)) => Some(d.min(r)),
            (d, r) => d.or(r),
        }
    }
}

/// MULTI state: the commands queued so far, and whether one of them was refused while queuing
/// (then EXEC aborts with EXECABORT, as in Redis).
#[derive(Default)]
pub struct Multi {
    pub queued: Vec<Vec<Vec<u8>>>,
    /// The queued arguments' heap bytes (kept with `queued`, so that [`Conn::memory`] need not
    /// walk a long queue on every read).
    pub queued_bytes: usize,
    pub dirty: bool,
}

impl Multi {
    pub fn queue(&mut self, args: &[&[u8]]) {
        let cmd: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        self.queued_bytes +=
            cmd.capacity() * std::mem::size_of::<Vec<u8>>() + cmd.iter().map(Vec::capacity).sum::<usize>();
        self.queued.push(cmd);
    }
}

/// A bulk argument of this many bytes or more is read straight into its connection's
/// `pending` buffer, sized for it once (Redis's `PROTO_MBULK_BIG_ARG`).
pub const BIG_ARG: usize = 32 * 1024;

pub struct Conn {
    /// Client id: unique for the server's lifetime, never reused (CLIENT ID / KILL ID).
    pub id: u64,
    pub stream: Stream,
    /// Peer and local address as CLIENT LIST prints them (`ip:port`, or `path:0` for Unix).
    pub addr: String,
    pub laddr: String,
    pub fd: i32,
    pub unix: bool,
    pub name: Vec<u8>,
    pub lib_name: Vec<u8>,
    pub lib_ver: Vec<u8>,
    pub created: Instant,
    pub last_active: Instant,
    /// Name of the last command run (CLIENT LIST `cmd=`).
    pub last_cmd: &'static str,
    /// The user this connection acts as (CLIENT LIST `user=`, ACL WHOAMI), and whether it has
    /// authenticated as it. A connection starts as `default`, authenticated only when the
    /// default user needs no password (see `auth.rs`); commands other than AUTH, HELLO, QUIT
    /// and RESET are refused with NOAUTH until then.
    pub user: std::sync::Arc<str>,
    pub authenticated: bool,
    /// Its user lacks full access: every command is checked against the user's ACL rules
    /// (`Server::call`). Kept current when the user changes (AUTH, RESET, ACL SETUSER).
    pub restricted: bool,
    /// Its unsent replies passed `server::REPLY_BACKPRESSURE_BYTES`: its input is neither read
    /// nor run until they drain (`Server::flush_conn`).
    pub out_throttled: bool,
    /// The selected database (SELECT): the engine selects it before each of this client's
    /// commands.
    pub db: u32,

    /// Unparsed input: bytes read but not yet consumed as complete requests. Usually empty:
    /// whole requests are parsed straight from the server's shared read buffer, and only a
    /// partial request (or input waiting behind a parked command) is copied here.
    pub pending: Vec<u8>,
    /// While one of its commands runs: the input bytes from that command's start to the end
    /// of what was read (Redis's query buffer at that moment, CLIENT LIST `qbuf=`); else 0.
    pub qbuf_running: usize,
    /// `None` only while [`crate::server::Server::process_input`] is using it. Boxed so that
    /// taking it out and putting it back for every batch moves a pointer, not the parser.
    pub parser: Option<Box<RequestParser>>,
    /// Replies not yet written; `out[out_pos..]` is still to send.
    pub out: Vec<u8>,
    pub out_pos: usize,
    /// WRITABLE interest is registered (only while output is pending).
    pub want_write: bool,
    /// Queued for a write attempt at the end of this loop turn.
    pub in_write_queue: bool,
    /// Queued to read on next turn (its last read was cut short for fairness).
    pub in_read_again: bool,
    /// Its [`Conn::memory`] at the last client-eviction pass (`Server::evict_clients`).
    pub mem_counted: u64,
    /// When its unsent output went past its class's soft limit (unix seconds), while it is.
    pub obuf_soft_since: Option<u64>,
    /// The socket reported its read side closed (or an error). Edge-triggered polling reports
    /// that once, so from then on reads go on to EOF instead of stopping at a short read.
    pub peer_closed: bool,
    /// Closed by the server, which has sent its FIN and now reads and drops the client's
    /// input until the client closes too (or [`LINGER`] passes): closing a socket with input
    /// unread resets the connection, which can fail the client's writes of the request that
    /// got it closed before it reads the end of the stream.
    pub lingering: bool,

    /// Flush the output, then close (QUIT, protocol error). No further input is processed.
    pub close_after_reply: bool,
    /// `SCRIPT DEBUG YES|SYNC`: its next EVAL runs under the Lua debugger.
    pub lua_debug: Option<crate::scripting::debugger::Mode>,
    /// Close at the end of this loop turn without flushing (CLIENT KILL, output limit).
    pub close_now: bool,
    pub parked: Option<Parked>,
    pub multi: Option<Multi>,
    /// (database, key) pairs this client WATCHes (see [`crate::watch`]).
    pub watching: Vec<(u32, Vec<u8>)>,
    /// Bytes read from and written to this client, and the commands it ran: CLIENT LIST's
    /// `tot-net-in`, `tot-net-out` and `tot-cmds` (Redis 8).
    pub net_in: u64,
    pub net_out: u64,
    pub commands: u64,
    pub reply_mode: ReplyMode,
    /// The reply protocol, chosen with HELLO (RESP2 until then; RESET returns to it). Every
    /// reply to this client, including late ones (a served or timed-out blocking command),
    /// is written in it.
    pub proto: resp::Proto,
    pub no_evict: bool,
    pub no_touch: bool,
    /// A forked child is sending this client a GOBLIN.DUMPWORLD reply over the same socket:
    /// the server neither reads nor writes the connection until the child exits.
    pub dumping: bool,
    /// A redis-server replica (it sent SYNC or PSYNC): where it is in the stream. It gets
    /// every committed batch after its RDB file (or its continuation), and no replies (see
    /// [`crate::replication::redis_replicas`]).
    pub redis_replica: Option<crate::replication::redis_replicas::ReplicaLink>,
    /// REPLCONF listening-port and ip-address: where a replica says it serves (INFO's
    /// `slaveN`, ROLE; the address defaults to the connection's peer).
    pub replconf_port: u16,
    pub replconf_ip: Option<Box<str>>,
    /// REPLCONF capa goblin: the replica is a goblin-core, which loads goblin's own RDB types
    /// (arrays, vector sets); SYNC then sends a dataset holding them.
    pub replconf_goblin: bool,
    /// REPLCONF capa eof: the reader takes an RDB file sent as `$EOF:<mark>`, the file, the
    /// mark (so the file is written in one pass, its length unknown beforehand).
    pub replconf_eof: bool,
    /// SYNC or PSYNC waiting for its full synchronization to start
    /// (`repl-diskless-sync-delay`, `snapshots::Server::sync_waiting_cron`); its input waits.
    pub sync_wait: Option<crate::snapshots::SyncWait>,
    /// REPLCONF rdb-only 1: a PSYNC on this connection fetches an RDB file (`redis-cli --rdb`).
    pub rdb_only: bool,
    /// REPLCONF rdb-filter-only functions: that file holds only the function libraries.
    pub rdb_functions_only: bool,
    /// `--kafka-ack-mode broker`: output from this index on waits until Kafka acknowledged
    /// logical offset `held_until` (see `Server::hold_reply`).
    pub held_from: Option<usize>,
    pub held_until: u64,
    /// Pub/sub subscriptions; `Some` exactly while there is at least one (see
    /// [`crate::pubsub`]): in RESP2 that restricts the commands the client may run.
    pub pubsub: Option<Box<crate::pubsub::ConnSubs>>,
    /// `Some` once the connection sent GOBLIN.FIREHOSE: it then carries only frames out and
    /// GOBLIN.ACKs in (see [`crate::replication::upstream`]).
    pub firehose: Option<Box<crate::replication::upstream::Downstream>>,
    /// The logical offset of this client's last write (WAIT waits for subscribers to reach it).
    pub last_write_offset: u64,
    /// Sent MONITOR: receives a line per command the server executes.
    pub monitor: bool,
    /// CLIENT TRACKING options while tracking is on (see [`crate::tracking`]).
    pub tracking: Option<Box<crate::tracking::ConnTracking>>,
    /// A command held by CLIENT PAUSE (see [`crate::pause`]); later input waits behind it.
    pub paused: Option<Vec<Vec<u8>>>,
    /// `Some` for a connection of the SBE listener: its input is SBE frames and its replies
    /// Acks/Errors (see [`crate::transport::sbe`]).
    pub sbe: Option<Box<crate::transport::sbe::SbeConn>>,
}

impl Conn {
    /// Whether the rest of this connection's input must wait (parked on a blocking command,
    /// held by CLIENT PAUSE, dumping, or closing): request decoders stop before the next one.
    pub(crate) fn input_waits(&self) -> bool {
        self.parked.is_some()
            || self.paused.is_some()
            || self.dumping
            || self.sync_wait.is_some()
            || self.close_after_reply
            || self.close_now
    }

    pub fn new(
        id: u64,
        stream: Stream,
        addr: String,
        laddr: String,
        fd: i32,
        unix: bool,
        parser: RequestParser,
    ) -> Self {
        let now = Instant::now();
        Conn {
            id,
            stream,
            addr,
            laddr,
            fd,
            unix,
            name: Vec::new(),
            lib_name: Vec::new(),
            lib_ver: Vec::new(),
            created: now,
            last_active: now,
            last_cmd: "NULL",
            user: crate::auth::DEFAULT_USER.into(),
            authenticated: true,
            restricted: false,
            out_throttled: false,
            db: 0,
            pending: Vec::new(),
            qbuf_running: 0,
            parser: Some(Box::new(parser)),
            out: Vec::new(),
            out_pos: 0,
            want_write: false,
            in_write_queue: false,
            in_read_again: false,
            mem_counted: 0,
            obuf_soft_since: None,
            peer_closed: false,
            lingering: false,
            close_after_reply: false,
            lua_debug: None,
            close_now: false,
            parked: None,
            multi: None,
            watching: Vec::new(),
            net_in: 0,
            net_out: 0,
            commands: 0,
            reply_mode: ReplyMode::On,
            proto: resp::Proto::Resp2,
            no_evict: false,
            no_touch: false,
            dumping: false,
            redis_replica: None,
            replconf_port: 0,
            replconf_goblin: false,
            replconf_eof: false,
            sync_wait: None,
            replconf_ip: None,
            rdb_only: false,
            rdb_functions_only: false,
            held_from: None,
            held_until: 0,
            pubsub: None,
            firehose: None,
            last_write_offset: 0,
            monitor: false,
            tracking: None,
            paused: None,
            sbe: None,
        }
    }

    /// While a big bulk argument (at least [`BIG_ARG`] bytes) of the request at the front of
    /// `pending` is arriving: how many of its bytes are still missing. Only for an
    /// authenticated RESP client: a connection that has not logged in gets no buffer sized
    /// from what it declares.
    pub fn big_arg_missing(&self) -> Option<usize> {
        if self.pending.is_empty() || self.sbe.is_some() || !self.authenticated {
            return None;
        }
        let (missing, len) = self.parser.as_ref()?.bulk_missing(self.pending.len())?;
        (len >= BIG_ARG && missing > 0).then_some(missing)
    }

    /// Reads bytes of a big argument, of which `missing` are still to come, onto the end of
    /// `pending`, which grows once to hold all of them (not a doubling per 16 KiB read, and no
    /// copy through the shared read buffer). A socket is asked for all `missing` at once; TLS
    /// and the rings read into initialized bytes, so a bounded window of them at a time.
    /// Returns the bytes read (0: end of stream) and whether the read came short, which means
    /// that the stream has nothing more for now, as for a plain read.
    pub fn read_into_pending(&mut self, missing: usize) -> io::Result<(usize, bool)> {
        self.pending.reserve_exact(missing);
        if let Stream::Tcp(_) | Stream::Unix(_) = self.stream {
            let fd = std::os::fd::AsRawFd::as_raw_fd(&self.stream);
            let spare = self.pending.spare_capacity_mut();
            debug_assert!(spare.len() >= missing);
            // SAFETY: read(2) writes at most `missing` bytes, into spare capacity reserved
            // just above; exactly the bytes it reports written are then counted as initialized.
            let n = unsafe { libc::read(fd, spare.as_mut_ptr().cast(), missing) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            unsafe { self.pending.set_len(self.pending.len() + n as usize) };
            return Ok((n as usize, (n as usize) < missing));
        }
        let window = missing.min(BIG_ARG * 8);
        let start = self.pending.len();
        self.pending.resize(start + window, 0);
        let r = self.stream.read(&mut self.pending[start..]);
        self.pending.truncate(start + r.as_ref().map_or(0, |n| *n));
        r.map(|n| (n, n < window))
    }

    /// The memory this client holds (CLIENT LIST `tot-mem`, client eviction): its buffers,
    /// the commands it queued in MULTI, its watched keys, subscriptions and tracking prefixes,
    /// and the connection itself. Like Redis's figure it is computed without walking anything
    /// (this runs for every connection on every loop turn with `maxmemory-clients`, and before
    /// a client's input runs): a watched key, channel or prefix counts as its entry and a
    /// small name, not by its actual length.
    pub fn memory(&self) -> usize {
        use std::mem::size_of;
        // A name's heap block, at jemalloc's smallest size classes.
        const NAME: usize = 16;
        let queued = self
            .multi
            .as_ref()
            .map_or(0, |m| m.queued_bytes + m.queued.capacity() * size_of::<Vec<Vec<u8>>>());
        let watched = self.watching.capacity() * size_of::<(u32, Vec<u8>)>() + self.watching.len() * NAME;
        // A hash set's bucket is its element and one control byte.
        let set = |s: &std::collections::HashSet<Vec<u8>>| {
            s.capacity() * (size_of::<Vec<u8>>() + 1) + s.len() * NAME
        };
        let subs = self.pubsub.as_ref().map_or(0, |p| set(&p.channels) + set(&p.patterns) + set(&p.shard));
        let prefixes = self
            .tracking
            .as_ref()
            .map_or(0, |t| t.prefixes.capacity() * size_of::<Vec<u8>>() + t.prefixes.len() * NAME);
        self.pending.capacity() + self.out.capacity() + queued + watched + subs + prefixes + size_of::<Conn>()
    }

    /// Closes the connection at once, its unsent output dropped (a client over the output
    /// limit, an evicted client).
    pub fn cut_off(&mut self) {
        self.close_now = true;
        self.out = Vec::new();
        self.out_pos = 0;
    }

    /// Bytes of output still to be written.
    pub fn out_pending(&self) -> usize {
        self.out.len() - self.out_pos
    }

    /// CLIENT LIST `flags=`: N for none, else one letter per state, as Redis prints them.
    pub fn flags_string(&self) -> String {
        let mut f = String::new();
        // A redis-server replica (Redis's `S`, first as Redis writes it).
        if self.redis_replica.is_some() {
            f.push('S');
        }
        if self.parked.is_some() || self.paused.is_some() {
            f.push('b');
        }
        if self.close_now {
            f.push('A');
        }
        if self.close_after_reply {
            f.push('c');
        }
        if self.multi.is_some() {
            f.push('x');
        }
        if self.pubsub.is_some() {
            f.push('P');
        }
        if self.no_evict {
            f.push('e');
        }
        if self.no_touch {
            f.push('T');
        }
        if self.unix {
            f.push('U');
        }
        if self.firehose.is_some() {
            f.push('S');
        }
        if self.monitor {
            f.push('O');
        }
        if let Some(t) = &self.tracking {
            f.push('t');
            if t.bcast {
                f.push('B');
            }
            if t.broken_redirect {
                f.push('R');
            }
        }
        if f.is_empty() {
            f.push('N');
        }
        f
    }
}
