//! Redis's own replication protocol, for redis-server replicas (`replicaof` this server), and
//! for any tool that attaches to a Redis replication stream with SYNC or PSYNC.
//!
//! goblin-core's replicas follow GOBLIN.FIREHOSE (see [`super::upstream`]); a redis-server
//! replica speaks Redis's protocol instead: PING, REPLCONF, then PSYNC (or SYNC). All of them
//! share one stream, as a Redis master's replicas do: the commands Redis's replicas apply,
//! which are the canonical mutations themselves (RESP2, as the journal holds them), with
//! `SELECT` where the database changes, `MULTI` / `EXEC` around a batch of more than one (so a
//! batch lands whole), a `PING` every `repl-ping-replica-period` seconds (so an idle link is not
//! taken for a dead one) and `REPLCONF GETACK *` when a WAIT needs fresh acknowledgements.
//!
//! The stream has its own identity: a replication ID drawn when the first replica attaches and
//! an offset that counts its bytes, as Redis's `master_repl_offset` does, kept apart from this
//! server's lineage and logical offsets (a byte offset cannot name a mutation). The last
//! `repl-backlog-size` bytes stay in a backlog, so that a replica that lost its link can
//! continue where it stopped (`PSYNC <replid> <offset>` answered `+CONTINUE`) instead of
//! loading a whole RDB file again. The stream ends after `repl-backlog-ttl` seconds without a
//! replica, and with the process, except where the RDB file is the restart point: a save
//! records the stream's ID and offset in it (`repl-id`, `repl-offset`), and a server restarted
//! from that file goes on from there under a new ID, the old one kept as the second (as a
//! restarted redis-server does), so that its replicas continue ([`Server::redis_replicas_resume`]);
//! anywhere else a restarted server draws a new ID and its replicas resynchronize in full.
//!
//! A server that follows a primary by REPLICAOF passes that primary's stream on instead (its ID,
//! offsets and bytes, as a Redis replica does: PSYNC2), and when promoted goes on under a new ID
//! with the primary's kept as the second one, so that its old primary and siblings continue
//! with it (`replid2`, [`continuation`]).
//!
//! A new replica gets `+FULLRESYNC <replid> <offset>` (PSYNC only), the dataset as an RDB file
//! written by a forked child (`Server::rdb_sync`), then the stream from that offset. Its
//! `REPLCONF ACK <offset>` is mapped back to the last whole batch it covers, so INFO, ROLE
//! and WAIT speak of redis-server replicas in logical offsets, as of firehose subscribers.
//!
//! Invariants:
//! - The stream starts exactly at the fork: batches committed before `rdb_sync` forks are in
//!   the file, the ones after it wait in the connection's output (which the parent does not
//!   send while the child owns the socket) and follow the file. The first command after a
//!   fork carries a `SELECT`, for the new replica (passing a primary's stream on, which does
//!   not, the file names the stream's database instead: `repl-stream-db`).
//! - Following a primary, the stream's offset is the primary's offset of the last whole
//!   command applied here (an open transaction's bytes go with its EXEC), and the dataset is
//!   exactly what the stream carried up to it: a file and the stream after it never overlap.
//! - Every replica's output, from its starting offset on, is exactly the stream's bytes: the
//!   backlog can then continue any of them at any offset it still holds.
//! - In `broker` ack mode a batch enters the stream only once Kafka acknowledged it, in commit
//!   order, as firehose frames do: a replica never holds a write the journal could lose. The
//!   image is taken after the journal settled, for the same reason. PINGs and GETACKs queue
//!   behind held batches.

use crate::conn::Conn;
use crate::server::Server;
use engine::{Batch, Origin, ReplId};
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use tracing::info;

/// Redis's smallest backlog (`CONFIG SET repl-backlog-size` below it is raised to it).
pub const MIN_BACKLOG: usize = 16 << 10;

/// What waits for Kafka in broker ack mode: a committed batch (its last logical offset,
/// whether Kafka must acknowledge it (another producer's records are in the topic already),
/// each mutation's database and RESP2 bytes, whether it goes as a transaction), or a command
/// of the stream's own that must not overtake it.
enum Held {
    Batch(u64, bool, Vec<(u32, Vec<u8>)>, bool),
    Raw(&'static [u8]),
}

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
const GETACK: &[u8] = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";

/// A redis-server replica's side of the link, on its connection.
#[derive(Clone, Copy, Debug)]
pub struct ReplicaLink {
    /// The last stream offset it acknowledged (REPLCONF ACK), and when (or when it attached).
    pub ack: u64,
    pub ack_at: Instant,
    /// The last logical offset whose whole batch lies at or below `ack` (0: none known yet).
    pub acked_logical: u64,
}

/// A redis-server replica's address as Redis shows and matches it: the one it announced
/// (`replica-announce-ip`), else its connection's.
pub fn replica_ip(c: &Conn) -> &str {
    match (&c.replconf_ip, c.addr.rsplit_once(':')) {
        (Some(announced), _) => announced,
        (None, Some((ip, _))) => ip.trim_start_matches('[').trim_end_matches(']'),
        (None, None) => c.addr.as_str(),
    }
}

/// The last `size` bytes of the stream, in a ring.
struct Backlog {
    buf: Vec<u8>,
    /// Where the oldest byte is (once the ring is full), and how many bytes it holds.
    head: usize,
    len: usize,
}

impl Backlog {
    fn new(size: usize) -> Backlog {
        Backlog { buf: vec![0; size], head: 0, len: 0 }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        let cap = self.buf.len();
        if bytes.len() >= cap {
            bytes = &bytes[bytes.len() - cap..];
            self.buf.copy_from_slice(bytes);
            (self.head, self.len) = (0, cap);
            return;
        }
        let tail = (self.head + self.len) % cap;
        let first = bytes.len().min(cap - tail);
        self.buf[tail..tail + first].copy_from_slice(&bytes[..first]);
        self.buf[..bytes.len() - first].copy_from_slice(&bytes[first..]);
        let len = self.len + bytes.len();
        if len > cap {
            self.head = (self.head + len - cap) % cap;
        }
        self.len = len.min(cap);
    }

    /// The newest `n` bytes (n <= len), in order.
    fn newest(&self, n: usize, out: &mut Vec<u8>) {
        let cap = self.buf.len();
        let start = (self.head + self.len - n) % cap;
        let first = n.min(cap - start);
        out.extend_from_slice(&self.buf[start..start + first]);
        out.extend_from_slice(&self.buf[..n - first]);
    }

    /// A ring of another size with the newest bytes that fit.
    fn resized(&self, size: usize) -> Backlog {
        let mut b = Backlog::new(size);
        let mut kept = Vec::new();
        self.newest(self.len.min(size), &mut kept);
        b.push(&kept);
        b
    }
}

/// The stream while it lives (from the first replica's attach to the backlog's expiry).
struct Stream {
    replid: ReplId,
    /// The ID this stream had before this server was promoted (or followed a promoted
    /// primary), and the first offset past that ID's history: a replica of the old ID may
    /// continue up to it (Redis's `replid2` and `second_repl_offset`, PSYNC2).
    replid2: Option<(ReplId, u64)>,
    /// Bytes ever appended (Redis's `master_repl_offset` for this stream).
    offset: u64,
    /// The database the stream is in (None: the next command gets a SELECT).
    seldb: Option<u32>,
    backlog: Backlog,
    /// (stream offset at the end of a batch, the batch's last logical offset), oldest first,
    /// trimmed to what some replica has yet to acknowledge: ACKs back to logical offsets.
    marks: VecDeque<(u64, u64)>,
    /// The last logical offset in the stream, and the newest mark trimmed (or (0, 0)).
    last_logical: u64,
    floor: (u64, u64),
}

/// Marks kept at most (one per batch): beyond it the oldest go, and a replica that far behind
/// learns its logical offset a batch later.
const MAX_MARKS: usize = 1 << 20;

impl Stream {
    /// The last logical offset whose batch ends at or below stream offset `ack`, if known.
    fn logical_at(&self, ack: u64) -> Option<u64> {
        if ack >= self.offset {
            return Some(self.last_logical);
        }
        let n = self.marks.partition_point(|&(end, _)| end <= ack);
        if n > 0 {
            return Some(self.marks[n - 1].1);
        }
        (self.floor.0 > 0 && ack >= self.floor.0).then_some(self.floor.1)
    }
}

/// The attached redis-server replicas, their shared stream and what waits for them.
pub struct RedisReplicas {
    /// (slot, connection id) of every replica, in the order they attached.
    pub slots: Vec<(usize, u64)>,
    stream: Option<Stream>,
    /// Broker ack mode: what waits for Kafka (or behind what does).
    retained: VecDeque<Held>,
    /// When the last PING went out (or the first replica attached: the first PING comes a
    /// period later, as a Redis master's cron sends it).
    pub last_ping: Option<Instant>,
    /// Since when no replica is attached (the backlog expires `backlog_ttl_secs` later).
    idle_since: Option<Instant>,
    /// `repl-ping-replica-period`, `repl-backlog-size` and `repl-backlog-ttl`.
    pub ping_period_secs: u64,
    pub backlog_size: usize,
    pub backlog_ttl_secs: u64,
    /// INFO stats: full resynchronizations served, partial ones accepted and refused (a
    /// replica that asked to continue a stream this server no longer holds).
    pub full_syncs: u64,
    pub partial_ok: u64,
    pub partial_err: u64,
    /// A WAIT is parked: ask the replicas for their offsets (once per loop turn).
    pub want_acks: bool,
    /// The stream offset the shutdown's GETACK asked the replicas to reach: the exit asks
    /// again only if the stream grew past it.
    final_asked: Option<u64>,
    /// `shutdown-timeout`: how long an exit waits for the replicas to acknowledge the stream;
    /// 0 (or SHUTDOWN NOW) does not wait.
    pub shutdown_timeout_secs: u64,
    /// The command whose batch commits next touches arbitrary keys (SCAN, RANDOMKEY): its
    /// lazy-expiry DELs go without MULTI/EXEC, as Redis propagates them.
    pub next_unwrapped: bool,
    /// The encoding buffer of the last batch fed (reused).
    scratch: Vec<u8>,
}

impl RedisReplicas {
    pub fn new() -> RedisReplicas {
        RedisReplicas {
            slots: Vec::new(),
            stream: None,
            retained: VecDeque::new(),
            last_ping: None,
            idle_since: None,
            ping_period_secs: 10,
            backlog_size: 1 << 20,
            backlog_ttl_secs: 3600,
            full_syncs: 0,
            partial_ok: 0,
            partial_err: 0,
            want_acks: false,
            final_asked: None,
            shutdown_timeout_secs: 10,
            next_unwrapped: false,
            scratch: Vec::new(),
        }
    }

    /// The stream's offset (the bytes it ever carried), if there is a stream.
    pub fn stream_offset(&self) -> Option<u64> {
        self.stream.as_ref().map(|s| s.offset)
    }

    /// The stream's replication ID and offset: what a replica that follows it asks to
    /// continue (FAILOVER's PSYNC to the new primary).
    pub fn stream_id_offset(&self) -> Option<(String, u64)> {
        self.stream.as_ref().map(|s| (s.replid.to_string(), s.offset))
    }

    /// INFO replication's backlog fields: (active, first byte offset, bytes held), and the
    /// stream's ID and offset.
    pub fn backlog_info(&self) -> (bool, u64, u64, String, u64) {
        match &self.stream {
            Some(s) => {
                let len = s.backlog.len as u64;
                (true, s.offset + 1 - len, len, s.replid.to_string(), s.offset)
            }
            None => (false, 0, 0, "0".repeat(40), 0),
        }
    }

    /// Where the stream stands (ID, byte offset) with nothing held back for Kafka: what a
    /// save records (`repl-id`, `repl-offset`) so that a restart can continue it. None without
    /// a stream.
    pub fn position(&self) -> Option<(String, u64)> {
        let s = self.stream.as_ref().filter(|_| self.retained.is_empty())?;
        Some((s.replid.to_string(), s.offset))
    }

    /// Ends the stream (no replica attached; `slots` may still name closed connections): the
    /// next replica gets a full resynchronization under a new ID, for data that changed
    /// without a write (DEBUG RELOAD NOSAVE/NOFLUSH).
    pub fn drop_stream(&mut self) {
        self.slots.clear();
        self.stream = None;
        self.retained.clear();
        self.idle_since = None;
    }

    /// CONFIG SET repl-backlog-size: the ring keeps its newest bytes that fit.
    pub fn set_backlog_size(&mut self, size: usize) {
        self.backlog_size = size.max(MIN_BACKLOG);
        if let Some(s) = &mut self.stream {
            s.backlog = s.backlog.resized(self.backlog_size);
        }
    }

    /// Bytes the backlog holds allocated (INFO memory's `mem_replication_backlog`).
    pub fn backlog_bytes(&self) -> usize {
        self.stream.as_ref().map_or(0, |s| s.backlog.buf.len())
    }
}

impl Default for RedisReplicas {
    fn default() -> Self {
        RedisReplicas::new()
    }
}

/// What a replica is sent for a batch of mutations (database, RESP2 bytes): `SELECT` where the
/// database differs from the one the stream is in (`db`, None when unknown), and, for a
/// `transaction`, `MULTI`/`EXEC` around more than one mutation, after the first mutation's
/// `SELECT`, as a Redis master orders them.
pub fn encode_for_replica<'a>(
    out: &mut Vec<u8>,
    mutations: impl ExactSizeIterator<Item = (u32, &'a [u8])>,
    db: &mut Option<u32>,
    transaction: bool,
) {
    let select = |out: &mut Vec<u8>, db: &mut Option<u32>, m_db: u32| {
        if *db != Some(m_db) {
            let n = m_db.to_string();
            resp::reply::bulk_array(out, &[b"SELECT".as_slice(), n.as_bytes()]);
            *db = Some(m_db);
        }
    };
    let wrap = transaction && mutations.len() > 1;
    for (i, (m_db, bytes)) in mutations.enumerate() {
        // The first mutation's SELECT goes before MULTI.
        select(out, db, m_db);
        if wrap && i == 0 {
            out.extend_from_slice(b"*1\r\n$5\r\nMULTI\r\n");
        }
        out.extend_from_slice(bytes);
    }
    if wrap {
        out.extend_from_slice(b"*1\r\n$4\r\nEXEC\r\n");
    }
}

/// What `PSYNC <replid> <offset>` can have: the backlog's bytes from `offset` on, when the
/// stream is the one the replica followed and still holds that offset.
fn continuation(stream: Option<&Stream>, replid: &[u8], offset: &[u8]) -> Result<Vec<u8>, &'static str> {
    let Some(s) = stream else { return Err("no backlog") };
    let Some(offset) = std::str::from_utf8(offset).ok().and_then(|o| o.parse::<i64>().ok()) else {
        return Err("offset is not an integer");
    };
    let same = |id: &ReplId| replid.eq_ignore_ascii_case(id.to_string().as_bytes());
    let previous = s.replid2.as_ref().is_some_and(|(id, second)| same(id) && offset <= *second as i64);
    if !same(&s.replid) && !previous {
        return Err("replication ID mismatch");
    }
    let first = (s.offset + 1 - s.backlog.len as u64) as i64;
    if offset < first || offset > s.offset as i64 + 1 {
        return Err("lack of backlog");
    }
    let mut bytes = Vec::new();
    s.backlog.newest((s.offset as i64 + 1 - offset) as usize, &mut bytes);
    Ok(bytes)
}

impl Server {
    /// The stream of a redis-server replica about to start at a fork: created on the first
    /// attach (with a new ID, as Redis creates its backlog), and told to SELECT before the
    /// next command. Returns the (ID, offset) its `+FULLRESYNC` names.
    pub(crate) fn redis_replicas_stream_start(&mut self) -> (String, u64) {
        let size = self.redis_replicas.backlog_size;
        // A replica of a primary serves that primary's stream, under its ID and offsets (PSYNC2:
        // its replicas can then continue with whichever server is promoted).
        let followed = self.redis_primary_identity();
        let s = self.redis_replicas.stream.get_or_insert_with(|| Stream {
            replid: followed.as_ref().map_or_else(ReplId::random, |(id, _)| *id),
            replid2: None,
            offset: followed.map_or(0, |(_, offset)| offset),
            seldb: None,
            backlog: Backlog::new(size),
            marks: VecDeque::new(),
            last_logical: 0,
            floor: (0, 0),
        });
        s.seldb = None;
        // Everything applied so far is in the new replica's image, and (nothing being held)
        // in the stream before this offset for the others.
        if self.redis_replicas.retained.is_empty() {
            s.last_logical = self.engine.repl.offset;
            if self.redis_replicas.slots.is_empty() {
                s.marks.clear();
                s.floor = (s.offset, s.last_logical);
            } else {
                s.marks.push_back((s.offset, s.last_logical));
            }
        }
        (s.replid.to_string(), s.offset)
    }

    /// The dataset was replaced (this server, a replica of a Redis primary, loaded the
    /// primary's file): every redis-server replica is disconnected and the stream forgotten,
    /// so that each reconnects to a full synchronization of the new dataset.
    pub(crate) fn redis_replicas_reset(&mut self) {
        let slots = std::mem::take(&mut self.redis_replicas.slots);
        self.close_links(slots);
        self.redis_replicas.stream = None;
        self.redis_replicas.retained.clear();
    }

    /// A connection that sent SYNC or PSYNC becomes a replica from stream offset `at` (its
    /// RDB file or its continuation covers everything before); `acked_logical` is what it is
    /// known to have applied (0 while its RDB file is on the way).
    pub(crate) fn redis_replicas_attach(&mut self, c: &mut Conn, slot: usize, at: u64, acked_logical: u64) {
        c.redis_replica = Some(ReplicaLink { ack: at, ack_at: Instant::now(), acked_logical });
        c.reply_mode = crate::conn::ReplyMode::Off;
        if self.redis_replicas.slots.is_empty() {
            self.redis_replicas.last_ping = Some(Instant::now());
        }
        self.redis_replicas.idle_since = None;
        self.redis_replicas.slots.push((slot, c.id));
    }

    /// PSYNC with a replication ID: `+CONTINUE` and the backlog from the asked offset when the
    /// stream still holds it (true), else false and the caller resynchronizes in full.
    pub(crate) fn redis_replicas_try_continue(
        &mut self,
        c: &mut Conn,
        slot: usize,
        replid: &[u8],
        offset: &[u8],
    ) -> bool {
        if replid == b"?" {
            return false;
        }
        match continuation(self.redis_replicas.stream.as_ref(), replid, offset) {
            Ok(bytes) => {
                let s = self.redis_replicas.stream.as_ref().expect("continued");
                let at = s.offset - bytes.len() as u64;
                c.out.extend_from_slice(format!("+CONTINUE {}\r\n", s.replid).as_bytes());
                c.out.extend_from_slice(&bytes);
                self.redis_replicas.partial_ok += 1;
                info!(
                    "replica id={} addr={}: partial resynchronization accepted, {} bytes of backlog from offset {}",
                    c.id,
                    c.addr,
                    bytes.len(),
                    at + 1
                );
                let acked = s.logical_at(at).unwrap_or(0);
                self.redis_replicas_attach(c, slot, at, acked);
                // The +CONTINUE and the backlog are this command's reply.
                c.reply_mode = crate::conn::ReplyMode::OffAfterThis;
                true
            }
            Err(why) => {
                self.redis_replicas.partial_err += 1;
                info!(
                    "replica id={} addr={}: partial resynchronization not accepted ({why}): full resynchronization",
                    c.id, c.addr
                );
                false
            }
        }
    }

    /// A committed batch: into the stream now, or, behind Kafka, when it is acknowledged.
    /// A replica of a Redis-protocol primary passes on that primary's bytes instead
    /// ([`Server::redis_replicas_proxy`]).
    pub(crate) fn redis_replicas_on_batch(&mut self, batch: &Batch) {
        if self.redis_replicas.stream.is_none() || self.redis_primary.is_some() {
            return;
        }
        let held = self.acks_held() && !matches!(batch.origin, Origin::Replay | Origin::External);
        // Redis sends an expiry round's and an eviction round's DELs one by one, and so the
        // lazy-expiry DELs of a command that touches arbitrary keys.
        let unwrapped = std::mem::take(&mut self.redis_replicas.next_unwrapped)
            || matches!(batch.origin, Origin::ActiveExpiry | Origin::Eviction);
        let mutations = batch.iter().map(|m| (m.db, m.bytes));
        if held || !self.redis_replicas.retained.is_empty() {
            let owned = mutations.map(|(db, b)| (db, b.to_vec())).collect();
            self.redis_replicas.retained.push_back(Held::Batch(batch.last_offset(), held, owned, !unwrapped));
        } else {
            self.redis_replicas_feed_batch(mutations, batch.last_offset(), !unwrapped);
        }
    }

    /// Broker mode: feeds, in order, the retained batches Kafka has acknowledged (and the
    /// commands queued behind them).
    pub(crate) fn redis_replicas_release(&mut self, acked: i64) {
        while let Some(front) = self.redis_replicas.retained.front() {
            if let Held::Batch(last, true, _, _) = front {
                if (*last as i64) > acked {
                    break;
                }
            }
            match self.redis_replicas.retained.pop_front().expect("front exists") {
                Held::Batch(last, _, owned, transaction) => {
                    let mutations = owned.iter().map(|(db, b)| (*db, b.as_slice()));
                    self.redis_replicas_feed_batch(mutations, last, transaction);
                }
                Held::Raw(bytes) => self.redis_replicas_feed(bytes, None),
            }
        }
    }

    fn redis_replicas_feed_batch<'a>(
        &mut self,
        mutations: impl ExactSizeIterator<Item = (u32, &'a [u8])>,
        last_logical: u64,
        transaction: bool,
    ) {
        let Some(s) = &mut self.redis_replicas.stream else { return };
        // One encoding for the backlog and every replica, in a buffer kept between batches.
        let mut bytes = std::mem::take(&mut self.redis_replicas.scratch);
        bytes.clear();
        encode_for_replica(&mut bytes, mutations, &mut s.seldb, transaction);
        self.redis_replicas_feed(&bytes, Some(last_logical));
        self.redis_replicas.scratch = bytes;
    }

    /// Following a primary: the bytes of its stream just applied (whole commands, a
    /// transaction only with its EXEC), passed on unchanged, so that this server's replicas
    /// hold the primary's stream at the primary's offsets; `logical`: this server's logical
    /// offset once they are applied.
    pub(crate) fn redis_replicas_proxy(&mut self, bytes: &[u8], logical: u64) {
        if !bytes.is_empty() {
            self.redis_replicas_feed(bytes, Some(logical));
        }
    }

    /// This server follows a primary from here on, which continued the stream under `replid`
    /// (`+CONTINUE <id>`): the stream takes the new ID, the old one still good up to here.
    pub(crate) fn redis_replicas_new_id(&mut self, replid: &str) {
        let Some(s) = &mut self.redis_replicas.stream else { return };
        let Some(id) = ReplId::parse(replid) else { return };
        if id != s.replid {
            s.replid2 = Some((s.replid, s.offset + 1));
            s.replid = id;
            self.redis_replicas_learn_new_id();
        }
    }

    /// The stream's ID changed: the replicas are disconnected, as Redis disconnects them, so
    /// that each continues at once under the new ID (PSYNC with the old one, answered
    /// `+CONTINUE <new>`) rather than keep an ID a later reconnection could not continue.
    fn redis_replicas_learn_new_id(&mut self) {
        let slots = std::mem::take(&mut self.redis_replicas.slots);
        if !slots.is_empty() {
            info!("the replication ID changed: {} replica(s) disconnected to continue under it", slots.len());
        }
        self.close_links(slots);
    }

    /// This server stops following its primary (REPLICAOF NO ONE, PSYNC FAILOVER): its stream
    /// goes on under a new ID, the primary's still good up to here, so that the old primary
    /// and the other replicas continue it ([`continuation`]). The next batch SELECTs.
    pub(crate) fn redis_replicas_promoted(&mut self, followed: Option<(ReplId, u64)>) {
        if self.redis_replicas.stream.is_none() {
            if let Some((id, offset)) = followed {
                let size = self.redis_replicas.backlog_size;
                self.redis_replicas.stream = Some(Stream {
                    replid: id,
                    replid2: None,
                    offset,
                    seldb: None,
                    backlog: Backlog::new(size),
                    marks: VecDeque::new(),
                    last_logical: self.engine.repl.offset,
                    floor: (offset, self.engine.repl.offset),
                });
                self.redis_replicas.idle_since = Some(Instant::now());
            }
        }
        let Some(s) = &mut self.redis_replicas.stream else { return };
        s.replid2 = Some((s.replid, s.offset + 1));
        s.replid = ReplId::random();
        s.seldb = None;
        self.redis_replicas_learn_new_id();
    }

    /// Startup from an RDB file that recorded where the stream stood (`repl-id`,
    /// `repl-offset`: this server's last save): the stream goes on from that offset under a
    /// new ID, the file's kept as the second one, as a restarted Redis primary does, so that a
    /// replica at exactly that position continues with PSYNC instead of loading a file again
    /// (one ahead of it, from writes the file missed, gets a full resynchronization: the
    /// offset is past what this stream holds). The backlog starts empty; the keys the load
    /// left out as expired go into it first as DELs, since those replicas still hold them.
    pub(crate) fn redis_replicas_resume(&mut self, resume: &crate::snapshots::StreamResume) {
        let Some(id) = ReplId::parse(&resume.replid) else {
            info!("the RDB file's repl-id is not a replication ID: its replicas will resynchronize in full");
            return;
        };
        let size = self.redis_replicas.backlog_size;
        let logical = self.engine.repl.offset;
        let mut s = Stream {
            replid: ReplId::random(),
            replid2: Some((id, resume.offset + 1)),
            offset: resume.offset,
            seldb: None,
            backlog: Backlog::new(size),
            marks: VecDeque::new(),
            last_logical: logical,
            floor: (resume.offset, logical),
        };
        let mut bytes = Vec::new();
        for (db, key) in &resume.expired {
            let mut del = Vec::new();
            resp::reply::bulk_array(&mut del, &[b"DEL".as_slice(), key]);
            encode_for_replica(&mut bytes, std::iter::once((*db, del.as_slice())), &mut s.seldb, false);
        }
        s.backlog.push(&bytes);
        s.offset += bytes.len() as u64;
        info!(
            "replication stream continued from the RDB file: {} at offset {} (new ID {}), {} expired key(s) \
             sent as DEL",
            id,
            resume.offset,
            s.replid,
            resume.expired.len()
        );
        self.redis_replicas.stream = Some(s);
        self.redis_replicas.idle_since = Some(Instant::now());
    }

    /// A command of the stream's own (PING, GETACK): behind held batches, or now.
    fn redis_replicas_command(&mut self, bytes: &'static [u8]) {
        if self.redis_replicas.retained.is_empty() {
            self.redis_replicas_feed(bytes, None);
        } else {
            self.redis_replicas.retained.push_back(Held::Raw(bytes));
        }
    }

    /// Appends bytes to the stream: to the backlog and to every replica's output.
    fn redis_replicas_feed(&mut self, bytes: &[u8], logical: Option<u64>) {
        let Some(s) = &mut self.redis_replicas.stream else { return };
        s.backlog.push(bytes);
        s.offset += bytes.len() as u64;
        if let Some(l) = logical {
            s.last_logical = l;
            if self.redis_replicas.slots.is_empty() {
                // Nobody to acknowledge it: a replica that continues learns its logical offset
                // from the floor (or from the next batch).
                s.marks.clear();
                s.floor = (s.offset, l);
            } else {
                if s.marks.len() == MAX_MARKS {
                    s.floor = s.marks.pop_front().expect("full");
                }
                s.marks.push_back((s.offset, l));
            }
        }
        let mut i = 0;
        while i < self.redis_replicas.slots.len() {
            let (slot, id) = self.redis_replicas.slots[i];
            let Some(Some(c)) = self.conns.get_mut(slot) else {
                // Being served right now: a replica is only served for its REPLCONF ACKs,
                // which commit nothing.
                i += 1;
                continue;
            };
            if c.id != id || c.redis_replica.is_none() {
                self.redis_replicas.slots.swap_remove(i);
                continue;
            }
            c.out.extend_from_slice(bytes);
            let dumping = c.dumping;
            // A replica that does not keep up is cut off, as any client over the limit.
            if let Some(mut conn) = self.conns[slot].take() {
                self.check_output_limit(&mut conn);
                self.conns[slot] = Some(conn);
            }
            if !dumping {
                self.queue_write(slot);
            }
            i += 1;
        }
    }

    /// REPLCONF ACK <offset> from a replica: where it is, in stream and logical offsets.
    pub(crate) fn redis_replicas_ack(&mut self, c: &mut Conn, offset: &[u8]) {
        let Some(link) = &mut c.redis_replica else { return };
        let Some(ack) = std::str::from_utf8(offset).ok().and_then(|o| o.parse::<u64>().ok()) else { return };
        let rr = &mut self.redis_replicas;
        let Some(s) = &mut rr.stream else { return };
        link.ack = link.ack.max(ack);
        link.ack_at = Instant::now();
        if let Some(l) = s.logical_at(link.ack) {
            link.acked_logical = link.acked_logical.max(l);
        }
        // Marks every replica has passed are done with (this one is not in its slot now).
        let others = rr.slots.iter().filter_map(|&(slot, id)| match self.conns.get(slot) {
            Some(Some(o)) if o.id == id => o.redis_replica.map(|l| l.ack),
            _ => None,
        });
        let least = others.fold(link.ack, u64::min);
        while s.marks.front().is_some_and(|&(end, _)| end <= least) {
            s.floor = s.marks.pop_front().expect("front");
        }
        if !self.waits.is_empty() {
            self.waits_dirty = true;
        }
    }

    /// The attached replicas' connections and links (one being served is skipped).
    pub(crate) fn redis_replica_conns(&self) -> impl Iterator<Item = (&Conn, ReplicaLink)> {
        self.redis_replicas.slots.iter().filter_map(|&(slot, id)| match self.conns.get(slot) {
            Some(Some(c)) if c.id == id => Some((&**c, c.redis_replica?)),
            _ => None,
        })
    }

    /// What the redis-server replicas' stream buffers hold (their connections' output, as
    /// allocated): INFO's `mem_clients_slaves` with the firehose queues, and left out of
    /// eviction's count as Redis leaves out its replicas' buffers, so that a slow replica
    /// cannot make the server evict the data it is being sent.
    pub(crate) fn redis_replica_buffer_bytes(&self) -> u64 {
        self.redis_replica_conns().map(|(c, _)| c.out.capacity() as u64).sum()
    }

    /// The replicas' links, for INFO and ROLE: (ip:port, acked logical offset, seconds since
    /// the last ACK, whether its RDB file is still on the way).
    pub(crate) fn redis_replica_links(&self) -> Vec<(String, u64, u64, bool)> {
        self.redis_replica_conns()
            .map(|(c, link)| {
                (
                    format!("{}:{}", replica_ip(c), c.replconf_port),
                    link.acked_logical,
                    link.ack_at.elapsed().as_secs(),
                    c.dumping,
                )
            })
            .collect()
    }

    /// From the cron: a PING to the replicas each `repl-ping-replica-period` seconds, as a
    /// Redis master sends it, so that an idle link is not taken for a dead one; and the
    /// backlog's end `repl-backlog-ttl` seconds after the last replica left.
    pub(crate) fn redis_replicas_cron(&mut self) {
        let rr = &mut self.redis_replicas;
        if rr.stream.is_none() {
            return;
        }
        rr.slots.retain(|&(slot, id)| {
            matches!(self.conns.get(slot), Some(Some(c)) if c.id == id && c.redis_replica.is_some())
        });
        if rr.slots.is_empty() {
            let since = *rr.idle_since.get_or_insert_with(Instant::now);
            if rr.backlog_ttl_secs > 0 && since.elapsed() >= Duration::from_secs(rr.backlog_ttl_secs) {
                info!("replication backlog freed after {} seconds without a replica", rr.backlog_ttl_secs);
                rr.stream = None;
                rr.retained.clear();
                rr.idle_since = None;
            }
            return;
        }
        let period = Duration::from_secs(rr.ping_period_secs.max(1));
        // A FAILOVER waits for a replica to reach the stream's offset: it must stand still;
        // so does a shutdown's wait (the saved file records the stream's end, where a
        // restart lets the replicas continue). A replica passes on its primary's PINGs and
        // sends none of its own.
        if self.failover.is_some()
            || self.shutdown_wait.is_some()
            || self.redis_primary.is_some()
            || rr.last_ping.is_some_and(|t| t.elapsed() < period)
        {
            return;
        }
        rr.last_ping = Some(Instant::now());
        self.redis_replicas_command(PING);
    }

    /// At exit: a GETACK to the replicas that have their RDB file, and the stream offset
    /// they must acknowledge (None: no replica to wait for, or no wait asked).
    pub(crate) fn redis_replicas_ask_final_acks(&mut self) -> Option<u64> {
        // A replica's stream is its primary's: nothing of its own goes into it.
        if self.redis_replicas.shutdown_timeout_secs == 0
            || self.redis_primary.is_some()
            || self.redis_replica_conns().all(|(c, _)| c.dumping || c.close_now)
        {
            return None;
        }
        let offset = self.redis_replicas.stream.as_ref().map(|s| s.offset)?;
        // Asked already at this very offset (the shutdown's wait, and nothing entered the
        // stream since): another GETACK would move the replicas past the saved file's offset.
        if self.redis_replicas.final_asked == Some(offset) {
            return Some(offset);
        }
        // Held batches Kafka never acknowledged stay held: the journal does not have them.
        self.redis_replicas_feed(GETACK, None);
        let target = self.redis_replicas.stream.as_ref().map(|s| s.offset);
        self.redis_replicas.final_asked = target;
        target
    }

    /// Each replica with its RDB file, still connected: its address and the stream offset it
    /// acknowledged.
    pub(crate) fn redis_replica_acks(&self) -> Vec<(String, u64)> {
        self.redis_replica_conns()
            .filter(|(c, _)| !c.dumping && !c.close_now)
            .map(|(c, link)| (format!("{}:{}", replica_ip(c), c.replconf_port), link.ack))
            .collect()
    }

    /// How many replicas (with their RDB file, still connected) acknowledged less than
    /// `target`.
    pub(crate) fn redis_replicas_behind(&self, target: u64) -> usize {
        self.redis_replica_conns().filter(|(c, link)| !c.dumping && !c.close_now && link.ack < target).count()
    }

    /// End of a loop turn: a parked WAIT asked for the replicas' offsets.
    pub(crate) fn redis_replicas_getack(&mut self) {
        // A replica's stream is its primary's (and WAIT is refused there).
        if std::mem::take(&mut self.redis_replicas.want_acks)
            && !self.redis_replicas.slots.is_empty()
            && self.redis_primary.is_none()
        {
            self.redis_replicas_command(GETACK);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{encode_for_replica, Backlog};

    /// The ring holds the newest bytes of everything pushed, whatever the sizes of the pushes
    /// against its own, and keeps them through a resize.
    #[test]
    fn the_backlog_holds_the_newest_bytes() {
        let mut seed = 0x9e3779b97f4a7c15u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for size in [1usize, 7, 64, 1000] {
            let mut ring = Backlog::new(size);
            let mut all = Vec::new();
            for round in 0..300 {
                let n = next(2 * size as u64 + 3) as usize;
                let bytes: Vec<u8> = (0..n).map(|i| (round * 31 + i) as u8).collect();
                ring.push(&bytes);
                all.extend_from_slice(&bytes);
                let held = all.len().min(size);
                assert_eq!(ring.len, held);
                let k = next(held as u64 + 1) as usize;
                let mut out = Vec::new();
                ring.newest(k, &mut out);
                assert_eq!(out, all[all.len() - k..], "size {size}, round {round}");
            }
            for new_size in [1, size / 2 + 1, size * 3] {
                let r = ring.resized(new_size);
                let mut out = Vec::new();
                r.newest(r.len, &mut out);
                assert_eq!(out, all[all.len() - new_size.min(size)..]);
            }
        }
    }

    #[test]
    fn batches_select_their_database_and_are_wrapped_in_a_transaction() {
        let set = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n".as_slice();
        let del = b"*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n".as_slice();
        let mut out = Vec::new();
        let mut db = None;
        encode_for_replica(&mut out, [(0, set)].into_iter(), &mut db, true);
        assert_eq!(out, [b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n".as_slice(), set].concat());
        out.clear();
        encode_for_replica(&mut out, [(0, set), (3, del)].into_iter(), &mut db, true);
        let want = [
            b"*1\r\n$5\r\nMULTI\r\n".as_slice(),
            set,
            b"*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n",
            del,
            b"*1\r\n$4\r\nEXEC\r\n",
        ]
        .concat();
        assert_eq!(out, want);
        assert_eq!(db, Some(3));
        // A transaction in another database: its SELECT comes before MULTI.
        out.clear();
        encode_for_replica(&mut out, [(5, set), (5, del)].into_iter(), &mut db, true);
        let want = [
            b"*2\r\n$6\r\nSELECT\r\n$1\r\n5\r\n".as_slice(),
            b"*1\r\n$5\r\nMULTI\r\n",
            set,
            del,
            b"*1\r\n$4\r\nEXEC\r\n",
        ]
        .concat();
        assert_eq!(out, want);
        // Not a transaction (an expiry round): one command after another.
        out.clear();
        encode_for_replica(&mut out, [(5, set), (5, del)].into_iter(), &mut db, false);
        assert_eq!(out, [set, del].concat());
    }
}
