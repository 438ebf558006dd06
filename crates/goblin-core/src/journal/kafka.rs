//! The journal's Kafka side: the producer that turns committed batches into records, the
//! topic checks at startup, and the startup replay that rebuilds the dataset from the topic.
//!
//! Record contract (the seed's, with DESIGN.md's changes): one record per canonical mutation;
//! its value is the mutation's exact RESP2 bytes; its key is `engine::compaction_key` (none for
//! order-dependent mutations); its headers are `goblin-replication-version` (1),
//! `goblin-replication-id` (the lineage, 40 hex digits), `goblin-replication-offset` (the
//! logical offset the mutation carries) and `goblin-applied-through` (DESIGN.md decision 3: a
//! broker offset b such that every record of another producer at or below b had been applied
//! before this mutation, and none above it; -1 if none). The first record a restarted primary
//! journals under its successor lineage (main.rs `recover`) also carries
//! `goblin-previous-replication-id` and `-offset`: the lineage it continues and from which
//! offset, where a replay crosses from the one to the other. The topic has one partition and a
//! delete (never compact) cleanup policy: compaction could remove a record that a later
//! cross-key mutation needs.
//!
//! `goblin-applied-through` is the primary's consumer position minus one when it committed the
//! mutation. That is the broker offset of the last external record it had applied, or a later
//! offset with no unapplied external record in between (its own records, reads, records
//! inside a loaded snapshot), which orders a replay exactly the same way and stays right
//! across a restart, where the last external record may lie inside the snapshot.
//!
//! Records of other producers (no goblin headers) are the writes of a second writer: a running
//! primary applies them as it consumes the topic ([`Consumer`]), in broker order, as the
//! commands they are (fresh logical offsets, at the record's timestamp, so a replay judges
//! time the same way), and never journals them again. Replay ([`replay`]) holds them back and
//! applies them where the primary did: before an own record stamped b, every held record at
//! or below b.
//!
//! Threads: librdkafka's own threads do the network work. Delivery reports are events: in
//! broker ack mode the server thread serves them (`producer`); in queued mode the sender
//! thread serves them and sums them for the server thread (`reports`).
//! Consumed records are taken from the consumer's queue on the server thread, so the
//! acknowledged offsets and the consumer position stay plain fields of the server thread's
//! state. One more thread, `journal-sender`, hands the server thread's records to
//! librdkafka, and in broker ack mode asks for each group to be sent (see `sender`); and
//! `journal-steer` pauses and resumes the runtime consumer as the server thread decides
//! (librdkafka's pause and resume wait for its broker thread; see `Steering`).

use super::producer::Producer;
use super::reader;
use super::reports::Reported;
use super::sender::{Staged, Stamp};
pub use super::sender::{
    HEADER_APPLIED_THROUGH, HEADER_DB, HEADER_ID, HEADER_OFFSET, HEADER_PREVIOUS_ID, HEADER_PREVIOUS_OFFSET,
    HEADER_VERSION,
};
use super::target::KafkaTarget;
use crate::replication::unconfirmed::Unconfirmed;
use engine::{Applied, Batch, Engine, ReplId, Replication};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use std::cell::Cell;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// How long startup waits for the brokers before it gives up with an error.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// How long a primary's startup replay waits for its partition to have a leader that answers,
/// and then for its next records, before it fails: longer than Kafka takes to declare a dead
/// leader dead and elect another (`broker.session.timeout.ms`, 9 s by default, plus the
/// election), so that a primary restarted while its partition's leader is dead waits out the
/// failover.
pub const STARTUP_STALL: Duration = Duration::from_secs(60);

/// The same bound for a replica's catch-up, which blocks its server thread and is retried
/// when abandoned.
pub const CATCH_UP_STALL: Duration = CONNECT_TIMEOUT;

/// One attempt of a query that goes to the partition's leader (see `watermarks`).
const LEADER_ATTEMPT: Duration = Duration::from_secs(2);

/// Runs a future to completion on this thread (the admin calls at startup; librdkafka's own
/// thread completes them).
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

/// The librdkafka settings every client of the journal shares.
fn base_config(t: &KafkaTarget) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &t.brokers);
    for (k, v) in &t.props {
        c.set(k, v);
    }
    c
}

/// What the journal's consumers and its startup admin client start from: `base_config`,
/// quiet. goblin-core reads a consumer's queue itself (`rd_kafka_consume_batch_queue`), and
/// librdkafka serves the log lines it finds there, as it does the admin client's, through its
/// default printer: raw lines on stderr, in a format of their own, during every broker outage
/// or leader change. What they say (a broker unreachable) the producer's error events already
/// report in the server's log (`producer.rs`), and what fails a consumer or an admin request
/// arrives as an error on what it reads or asks. A `debug` property in `--kafka` keeps them:
/// whoever names it wants librdkafka's own lines.
pub(crate) fn quiet_config(t: &KafkaTarget) -> ClientConfig {
    let mut c = base_config(t);
    let debug = t.props.iter().any(|(k, _)| k == "debug");
    c.set_log_level(if debug { RDKafkaLogLevel::Debug } else { RDKafkaLogLevel::Critical });
    c
}

/// At most this many producer events (delivery report batches) per `Journal::poll`; more
/// wait for the next wake-up or the cron (a bound against a queue that never empties).
const POLL_EVENTS_MAX: usize = 4096;

/// What the delivery reports have told the server thread so far.
#[derive(Default)]
pub struct Acks {
    /// Highest logical offset whose record the broker acknowledged (records are acknowledged
    /// in order: one partition, one in-flight request).
    pub logical: Cell<i64>,
    /// The broker offset of that record.
    pub broker: Cell<i64>,
    /// Records sent and not yet acknowledged.
    pub pending: Cell<u64>,
    /// Their value bytes (what --kafka-pending-bytes bounds).
    pub pending_bytes: Cell<u64>,
    /// A permanent delivery failure: the server must stop.
    pub failed: std::cell::RefCell<Option<String>>,
    /// The broker offsets of this process's acknowledged records, as runs of consecutive
    /// offsets (first, last), oldest first: the runtime consumer skips a record inside a run
    /// without parsing its headers. Runs it has passed are dropped; a record of our lineage it
    /// reaches before its report waits for the report (`Consumer::hold`).
    pub own: std::cell::RefCell<VecDeque<(i64, i64)>>,
    /// The last offset of the newest run forgotten past [`OWN_RUNS_MAX`]: at or below it, a
    /// record of this lineage may be ours without `own` saying so.
    forgotten_through: Cell<Option<i64>>,
}

/// Records the runtime consumer takes per run at most (the server passes its own bound).
const CONSUME_RUN: usize = 256;

/// Runs of own offsets kept at most (other producers interleaving with ours split them);
/// past it the oldest are forgotten, which only costs header parsing.
const OWN_RUNS_MAX: usize = 65536;

impl Acks {
    /// Whether the record at `broker` is one of ours, by the delivery reports so far; drops the
    /// runs below it (the consumer reads in broker order).
    pub fn is_own(&self, broker: i64) -> bool {
        let mut own = self.own.borrow_mut();
        while own.front().is_some_and(|&(_, last)| last < broker) {
            own.pop_front();
        }
        own.front().is_some_and(|&(first, _)| first <= broker)
    }

    /// Whether a record of this primary's lineage at `broker` that `is_own` does not know can
    /// still be one of ours: one whose report has not arrived (beyond the last acknowledged
    /// offset while records are pending), or one in a forgotten run. Otherwise another server
    /// wrote it under this lineage.
    pub fn may_be_own(&self, broker: i64) -> bool {
        (self.pending.get() > 0 && broker > self.broker.get())
            || self.forgotten_through.get().is_some_and(|f| broker <= f)
    }

    #[cfg(test)]
    fn record_own(&self, broker: i64) {
        self.record_run((broker, broker));
    }

    /// Adds the acknowledged broker offsets `first..=last` (after every run so far).
    fn record_run(&self, (first, last): (i64, i64)) {
        let mut own = self.own.borrow_mut();
        match own.back_mut() {
            Some(run) if run.1 + 1 == first => run.1 = last,
            _ => {
                if own.len() == OWN_RUNS_MAX {
                    if let Some((_, last)) = own.pop_front() {
                        self.forgotten_through.set(Some(last));
                    }
                }
                own.push_back((first, last));
            }
        }
    }
}

/// Takes the delivery reports into `acks` and `handed`: served on this thread in broker ack
/// mode (waiting up to `wait` for the first), summed by the sender thread in queued mode
/// (where a `wait` only paces a caller that waits for room in librdkafka's queue). A record
/// refused for good is kept in `acks.failed`; a fatal producer error is returned, naming
/// topic and partition.
fn take_reports(
    producer: &Producer,
    acks: &Acks,
    handed: &mut u64,
    topic: &str,
    wait: Duration,
) -> Result<(), String> {
    let sum = match producer.reports() {
        Some(thread) => {
            let sum = thread.take();
            if sum.is_empty() && !wait.is_zero() {
                std::thread::sleep(wait.min(Duration::from_micros(200)));
            }
            sum
        }
        None => {
            let mut sum = Reported::default();
            if let Err(e) = producer.serve(POLL_EVENTS_MAX, wait, |d| sum.add(d, topic)) {
                sum.fatal = Some(e);
            }
            sum
        }
    };
    *handed = handed.saturating_sub(sum.records);
    acks.pending.set(acks.pending.get().saturating_sub(sum.records));
    acks.pending_bytes.set(acks.pending_bytes.get().saturating_sub(sum.bytes));
    if let Some((logical, broker)) = sum.acked {
        acks.logical.set(acks.logical.get().max(logical as i64));
        acks.broker.set(acks.broker.get().max(broker));
    }
    for run in sum.own {
        acks.record_run(run);
    }
    if let Some(e) = sum.refused {
        acks.failed.borrow_mut().get_or_insert(e);
    }
    match sum.fatal {
        Some(e) => Err(format!("Kafka journal (topic {topic}, partition 0): {e}")),
        None => Ok(()),
    }
}

/// librdkafka writes a byte to this pipe whenever a queue (the producer's main queue, where
/// delivery reports arrive; the consumer's queue, where fetched records arrive) becomes
/// non-empty: the server registers the read end in its poll set, so a report or a record
/// wakes the loop at once instead of waiting for a timer. The byte comes only on the empty ->
/// non-empty edge: drain the queue, then wait.
struct Wakeup {
    read: std::os::fd::OwnedFd,
    write: std::os::fd::OwnedFd,
    queue: *mut rdkafka::bindings::rd_kafka_queue_t,
}

impl Wakeup {
    /// Takes ownership of the queue handle `queue` (released on drop, or here on failure). A
    /// null `queue`: a pipe that only goblin-core's own threads write to.
    fn new(queue: *mut rdkafka::bindings::rd_kafka_queue_t) -> std::io::Result<Wakeup> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two descriptors we then own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            let e = std::io::Error::last_os_error();
            if !queue.is_null() {
                // SAFETY: the handle is ours and released once.
                unsafe { rdkafka::bindings::rd_kafka_queue_destroy(queue) };
            }
            return Err(e);
        }
        // SAFETY: both descriptors are fresh and ours.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        if !queue.is_null() {
            // SAFETY: librdkafka copies the one-byte payload; the write end outlives the queue's
            // use of it (disabled in `Wakeup::drop`).
            unsafe {
                rdkafka::bindings::rd_kafka_queue_io_event_enable(
                    queue,
                    write.as_raw_fd(),
                    b"1".as_ptr().cast(),
                    1,
                )
            };
        }
        Ok(Wakeup { read, write, queue })
    }

    fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.read.as_raw_fd()
    }

    /// Empties the pipe (before draining the queue: anything arriving later writes again).
    fn drain(&self) {
        let mut buf = [0u8; 256];
        // SAFETY: reads into our buffer from our non-blocking descriptor until it is empty.
        while unsafe { libc::read(self.fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
    }

    /// Events waiting in the queue (`poll` returning nothing does not mean empty: it also
    /// returns nothing after serving an event that is not a record).
    fn queued(&self) -> usize {
        // SAFETY: the handle is valid until drop.
        unsafe { rdkafka::bindings::rd_kafka_queue_length(self.queue) }
    }
}

impl Drop for Wakeup {
    fn drop(&mut self) {
        if self.queue.is_null() {
            return;
        }
        // SAFETY: the queue handle is released once, while its client still exists (`Journal`
        // and `Consumer` declare `wakeup` before the client, and fields drop in declaration
        // order).
        unsafe {
            rdkafka::bindings::rd_kafka_queue_io_event_enable(self.queue, -1, std::ptr::null(), 0);
            rdkafka::bindings::rd_kafka_queue_destroy(self.queue);
        }
    }
}

/// The producing side, owned by the server thread.
pub struct Journal {
    pub target: KafkaTarget,
    /// Declared before `producer`: fields drop in order, so the queue handle is released
    /// while the producer still exists.
    wakeup: Wakeup,
    producer: Producer,
    pub acks: Acks,
    /// Records journaled since startup.
    pub produced: u64,
    /// The `goblin-applied-through` value of the next records: the consumer position minus one
    /// (see the module documentation). The server sets it after each consumed run.
    pub applied_through: i64,
    /// The logical offset of the last record journaled.
    last_produced: u64,
    /// Batches of other producers' records committed while own records were still
    /// unacknowledged: (the own logical offset before them, their last logical offset). They
    /// are durable already (they are in the topic); the acknowledged logical offset passes
    /// over them once the own record before them is acknowledged.
    external_after: VecDeque<(u64, u64)>,
    /// The lineage whose `goblin-replication-id` text is cached, and the text.
    replid_text: (Option<ReplId>, String),
    /// A successor lineage this process journals under, not yet announced: its id and its
    /// predecessor. Its first record carries the predecessor (`HEADER_PREVIOUS_ID`), which
    /// lets a replay cross from the predecessor's records to its own.
    announce: Option<(ReplId, (ReplId, u64))>,
    /// Broker ack mode: goblin-core forms the produce groups (see `sender`). Records
    /// committed while a group is with the broker stay staged and go to the sender as the
    /// next group once every record of the last one is reported.
    groups: bool,
    /// Records committed and not yet handed to the sender thread (`end_turn` hands them).
    staged: Staged,
    /// Records handed over (to librdkafka or to the sender thread) and not yet reported.
    handed: u64,
    /// (last logical offset, commit time) of each journaled batch not yet acknowledged, oldest
    /// first: INFO's oldest pending age.
    unacked_since: VecDeque<(u64, Instant)>,
    /// The largest write request (RESP2 bytes, key included once more) this journal can hold
    /// in one record; the server refuses larger writes before running them.
    pub record_limit: usize,
    /// Broker ack mode: how many clients the last group's reports released. Each is likely to
    /// send its next write at once, so the next group waits (at most `GROUP_GAP` after the
    /// loop turn that staged the last record) until that many records are staged.
    expect: usize,
    /// When the last staged record was first seen staged (at the end of its loop turn: one
    /// clock read per turn, not per write), and how many records were staged then.
    last_staged: Option<Instant>,
    staged_seen: usize,
    /// A timer (timerfd) that wakes the loop when the wait for the next group runs out; it
    /// shares the journal's token.
    timer: Timer,
}

/// How long broker ack mode lets librdkafka linger at most when a group's send was asked for
/// and somehow did not happen (a backstop: groups go out when asked, see `producer`).
const BROKER_MODE_LINGER_MS: &str = "10";

/// Why a replay stopped. The message names the topic (and, for a record, its partition and
/// offset); the kind says what the caller may do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayError {
    /// Kafka could not be read (unreachable, the topic or its reader gone, a stall): another
    /// attempt may succeed.
    Kafka(String),
    /// A record that cannot be applied, or a history that does not fit this server's: it stays
    /// in the topic, and only an operator can act on it.
    Record(String),
    /// A write's handler crashed while applying a record: the store may hold part of a write
    /// that no mutation describes, so the process must stop.
    Crashed(String),
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayError::Kafka(m) | ReplayError::Record(m) | ReplayError::Crashed(m) => f.write_str(m),
        }
    }
}

/// A replay that stopped: why, and where a later one may go on without applying anything
/// twice.
#[derive(Debug, Clone)]
pub struct ReplayFailure {
    pub error: ReplayError,
    pub resume: Resume,
}

impl std::fmt::Display for ReplayFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

/// Where a replay that stopped partway may be taken up: seek to `from` (inclusively) with
/// `position` as the consumer position. Everything the stopped replay applied is then a
/// duplicate: its own records (at or below the engine's offset) and the other producers'
/// records below `position` (applied, or in the snapshot); the other producers' records it
/// held back and never applied lie at or after `position`, and `from` is not above them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume {
    pub from: i64,
    pub position: i64,
    /// The broker offset of the last own record it processed (-1: none), a safe cursor.
    pub own_broker: i64,
}

/// A record that `Engine::apply_record` refused; `at` names the record in the message.
fn record_error(e: engine::RecordError, at: impl FnOnce(String) -> String) -> ReplayError {
    let named = at(e.to_string());
    match e {
        engine::RecordError::Panicked { .. } => ReplayError::Crashed(named),
        _ => ReplayError::Record(named),
    }
}

/// Counters of the startup replay (INFO kafka).
#[derive(Default, Clone, Copy, Debug)]
pub struct ReplayStats {
    pub consumed: u64,
    pub applied: u64,
    pub duplicates: u64,
    pub older_lineage: u64,
    /// Successor lineages the replay followed (`HEADER_PREVIOUS_ID`).
    pub successors: u64,
    pub ignored_reads: u64,
    /// Other producers' records applied (also counted in `applied`).
    pub external_applied: u64,
    /// Other producers' records already in the snapshot (also counted in `duplicates`).
    pub external_duplicates: u64,
    /// Broker offset of the last record read (-1 if none).
    pub last_broker_offset: i64,
    /// The first broker offset the replay did not read: where the runtime consumer starts.
    pub position: i64,
    /// The logical offset the replay started from (the snapshot's, or 0): a record of the
    /// lineage at or below it is in the snapshot; one above it and below the next expected
    /// offset repeats an offset this replay has applied.
    base_offset: u64,
    /// The broker offset of the last own record processed (applied or a duplicate), and of
    /// the last other producer's record applied: how far a stopped replay got (`Resume`).
    own_broker: i64,
    external_broker: i64,
}

impl ReplayStats {
    /// Whether the replay read a record of the lineage it ended in (records of another
    /// lineage it passed over as older history do not count).
    pub fn read_own_lineage(&self) -> bool {
        self.own_broker >= 0
    }
}

impl Journal {
    /// Connects, checks (or creates) the topic, and builds the producer. Errors name the
    /// topic and the reason; startup turns them into a non-zero exit before listening.
    pub fn connect(target: KafkaTarget, replies_wait_for_acks: bool) -> Result<Journal, String> {
        let (version, features) = client_build();
        info!("Kafka client: librdkafka {version}, built with {features}");
        let topic_max = check_topic(&target)?;
        let acks = Acks::default();
        acks.logical.set(-1);
        acks.broker.set(-1);
        let mut c = base_config(&target);
        c.set("enable.idempotence", "true")
            .set("acks", "all")
            .set("max.in.flight.requests.per.connection", "1")
            .set("allow.auto.create.topics", "false");
        // Lingering, unless the user set it. In queued mode nobody waits for the
        // acknowledgement, and librdkafka's default 5 ms batches records per wake-up of its
        // broker thread: at -P 1 and -P 16 it halves the process's CPU per journaled write
        // against 0 ms. In broker ack mode goblin-core forms the groups and asks for each to go
        // out at once (see `producer`); the linger there is only a backstop.
        if !target.props.iter().any(|(k, _)| k == "linger.ms" || k == "queue.buffering.max.ms") {
            c.set("linger.ms", if replies_wait_for_acks { BROKER_MODE_LINGER_MS } else { "5" });
        }
        // LZ4, unless the user chose a codec. A record's headers repeat the same names and
        // lineage id in every record (about 150 of its 250 bytes for a small SET), so a batch
        // shrinks several times over: the broker writes, fsyncs and serves a fraction of the
        // bytes, and this process's own consumer reads a fraction back. Measured side by side
        // (docs/BENCHMARKS.md): queued -P 16 +9-27%, broker -P 1 +10-23%, -P 1 queued level.
        if !target.props.iter().any(|(k, _)| k == "compression.type" || k == "compression.codec") {
            c.set("compression.type", "lz4");
        }
        // The largest record this journal can write: the topic's limit, and librdkafka's own
        // (a user's message.max.bytes, else its default), less room for the record's headers,
        // key and batch framing. Writes larger than that are refused before they run
        // (`Journal::record_limit`).
        let producer_max = target
            .props
            .iter()
            .find(|(k, _)| k == "message.max.bytes")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(LIBRDKAFKA_MESSAGE_MAX_BYTES);
        let record_limit = topic_max.unwrap_or(usize::MAX).min(producer_max).saturating_sub(RECORD_OVERHEAD);
        let mut producer = Producer::new(&c, &target.topic)
            .map_err(|e| format!("--kafka: cannot create the producer: {e}"))?;
        // Broker ack mode: the main queue's reports wake the server thread through the pipe.
        // Queued: the sender thread serves them, and writes to the pipe itself (`reports`).
        let queue = if replies_wait_for_acks {
            // SAFETY: the client pointer is valid for the producer's life; the returned queue
            // handle is released in `Wakeup::drop`, before the producer goes.
            unsafe { rdkafka::bindings::rd_kafka_queue_get_main(producer.native()) }
        } else {
            std::ptr::null_mut()
        };
        let pipe_error = |e| format!("--kafka: cannot set up the wake-up pipe: {e}");
        let wakeup = Wakeup::new(queue).map_err(pipe_error)?;
        producer
            .start_sender(
                wakeup.write.try_clone().map_err(pipe_error)?,
                replies_wait_for_acks,
                POLL_EVENTS_MAX,
            )
            .map_err(|e| format!("--kafka: cannot start the sender thread: {e}"))?;
        Ok(Journal {
            target,
            wakeup,
            producer,
            acks,
            produced: 0,
            applied_through: -1,
            last_produced: 0,
            external_after: VecDeque::new(),
            replid_text: (None, String::new()),
            announce: None,
            groups: replies_wait_for_acks,
            staged: Staged::default(),
            handed: 0,
            unacked_since: VecDeque::new(),
            record_limit,
            expect: 0,
            last_staged: None,
            staged_seen: 0,
            timer: Timer::new().map_err(|e| format!("--kafka: cannot create a timer: {e}"))?,
        })
    }

    /// The descriptor that becomes readable when delivery reports wait (see `Wakeup`), when
    /// the sender thread is free again for a staged group, or when it failed.
    pub fn wakeup_fd(&self) -> std::os::fd::RawFd {
        self.wakeup.fd()
    }

    /// Empties the wake-up pipe (before polling: a report arriving after this writes again),
    /// and clears the wait timer.
    pub fn drain_wakeup(&self) {
        self.wakeup.drain();
        self.timer.clear();
    }

    /// The journal sink: one record per mutation of a committed batch, in order, staged for
    /// the sender thread (`end_turn`). `now` and `now_ms` are the
    /// server's clocks for this loop turn (reading the clock per batch costs more than it
    /// tells: the oldest pending age and a staged record's timestamp need no finer grain).
    pub fn on_batch(&mut self, batch: &Batch, now: Instant, now_ms: i64) -> Result<(), String> {
        // The lineage's header text changes only with the lineage: formatted once, not per
        // batch (a batch is often one command); the numbers go through stack buffers.
        if self.replid_text.0 != Some(batch.replid) {
            self.replid_text = (Some(batch.replid), batch.replid.to_string());
        }
        // Every record is stamped with its commit turn's time, in both ack modes: the records
        // are staged, so the time they reach librdkafka says less, and a zero timestamp would
        // make librdkafka read the clock once per record on the sender thread.
        for m in batch.iter() {
            let stamp = Stamp {
                logical: m.offset,
                applied_through: self.applied_through,
                timestamp_ms: now_ms,
                db: m.db,
            };
            let size = self.staged.push(&self.replid_text.1, stamp, m.bytes, |out| {
                engine::compaction_key_into(m.argc(), |i| m.arg(i), out)
            });
            if size > self.record_limit {
                self.staged.pop();
                // Written already (the request was smaller: a derived write, such as APPEND's
                // whole new value); it cannot be journaled, so the server must stop.
                return Err(format!(
                    "the mutation at logical offset {} takes {size} bytes, more than a record of topic {} \
                     holds ({} bytes with its headers: max.message.bytes)",
                    m.offset,
                    self.target.topic,
                    self.record_limit + RECORD_OVERHEAD
                ));
            }
            if let Some((successor, (id, at))) = self.announce.take() {
                if successor == batch.replid {
                    self.staged.name_predecessor(&id.to_string(), at);
                }
            }
            self.acks.pending.set(self.acks.pending.get() + 1);
            self.acks.pending_bytes.set(self.acks.pending_bytes.get() + m.bytes.len() as u64);
            self.produced += 1;
            self.last_produced = m.offset;
        }
        self.unacked_since.push_back((batch.last_offset(), now));
        Ok(())
    }

    /// This process journals under lineage `successor`, which continues lineage `previous.0`
    /// from offset `previous.1`: its first record names that predecessor.
    pub fn announce_successor(&mut self, successor: ReplId, previous: (ReplId, u64)) {
        self.announce = Some((successor, previous));
    }

    /// Takes the delivery reports (see the free function `take_reports`).
    fn take_reports(&mut self, wait: Duration) -> Result<(), String> {
        take_reports(&self.producer, &self.acks, &mut self.handed, &self.target.topic, wait)
    }

    /// Hands every staged record (there is at least one) to librdkafka, after everything
    /// handed over before: a small group on this thread (when the sender is idle, so that
    /// order holds), a larger one through the sender thread. In broker ack mode the sender
    /// then asks for the group to be sent (an empty group it is given only does that).
    fn hand_staged(&mut self) -> Result<(), String> {
        self.staged_seen = 0;
        self.handed += self.staged.len() as u64;
        if self.staged.len() < INLINE_GROUP_MAX && !self.producer.sender().is_busy() {
            let Journal { staged, producer, acks, handed, target, .. } = self;
            // A full local queue: let librdkafka deliver some, then retry.
            let mut on_full =
                || take_reports(producer, acks, handed, &target.topic, Duration::from_millis(10));
            let result = staged.produce_all(producer.inline(), &target.topic, &mut on_full);
            staged.clear();
            result?;
            if !self.groups {
                return Ok(());
            }
        }
        let sender = self.producer.sender();
        let staged = std::mem::replace(&mut self.staged, sender.spare());
        sender.hand(staged);
        Ok(())
    }

    /// The end of a loop turn: the staged records go to the sender thread. In broker ack mode
    /// they go as the next group, which the sender asks to be sent at once, when
    /// - the last group is fully reported (one request in flight),
    /// - the sender is free (when it is not, it wakes the server through the pipe as soon as
    ///   it is), and
    /// - the group is complete: as many records as the last group's reports released clients
    ///   (each such client usually sends its next write right away), or no record for
    ///   `GROUP_GAP`. Without this wait, the first of the released clients' writes would leave
    ///   as a group of its own, the rest would form the next, and groups would alternate
    ///   between small and large.
    pub fn end_turn(&mut self) -> Result<(), String> {
        if self.staged.is_empty() {
            return Ok(());
        }
        if !self.groups {
            return self.hand_staged();
        }
        if self.staged.len() != self.staged_seen {
            self.staged_seen = self.staged.len();
            self.last_staged = Some(Instant::now());
        }
        if self.handed > 0 {
            return Ok(());
        }
        if self.staged.len() < self.expect {
            if let Some(last) = self.last_staged {
                let left = (last + GROUP_GAP).saturating_duration_since(Instant::now());
                if !left.is_zero() {
                    self.timer.arm(left);
                    return Ok(());
                }
            }
        }
        if self.producer.sender().busy() {
            return Ok(());
        }
        self.expect = 0;
        self.hand_staged()
    }

    /// Queued ack mode: a client waits for its records through logical offset `through`
    /// (WAITAOF), so the ones handed over are sent now instead of after the linger. Broker ack mode sends every group at once.
    pub fn hurry(&self, through: u64) {
        if !self.groups && self.acks.logical.get() < through as i64 {
            self.producer.sender().hurry(through);
        }
    }

    /// Broker ack mode: `n` clients' replies were just released by delivery reports.
    pub fn released(&mut self, n: usize) {
        self.expect = n;
    }

    /// The wait timer's descriptor (registered under the journal's token).
    pub fn timer_fd(&self) -> std::os::fd::RawFd {
        self.timer.fd()
    }

    /// A batch of other producers' records was committed at logical offsets through `last`.
    /// It is not produced (it is in the topic already), but the acknowledged logical offset
    /// must pass over it: at once when nothing of ours is pending, else once the own record
    /// before it is acknowledged.
    pub fn external_committed(&mut self, last: u64) {
        if self.acks.pending.get() == 0 && self.external_after.is_empty() {
            self.acks.logical.set(self.acks.logical.get().max(last as i64));
        } else {
            self.external_after.push_back((self.last_produced, last));
        }
        self.advance_over_external();
    }

    fn advance_over_external(&mut self) {
        while let Some(&(before, last)) = self.external_after.front() {
            if self.acks.logical.get() < before as i64 {
                break;
            }
            self.acks.logical.set(self.acks.logical.get().max(last as i64));
            self.external_after.pop_front();
        }
    }

    /// After the startup replay: everything through the replayed records is durable in the
    /// topic, so a snapshot taken before this process produces anything still records where
    /// the journal stands.
    pub fn set_recovered(&mut self, logical: u64, broker: i64, position: i64) {
        self.acks.logical.set(logical as i64);
        self.acks.broker.set(broker);
        self.last_produced = logical;
        // Every external record below the position is in the recovered state.
        self.applied_through = position - 1;
    }

    /// Serves delivery reports (server thread only). Err: a record was refused for good, or
    /// the producer failed fatally.
    pub fn poll(&mut self) -> Result<(), String> {
        self.take_reports(Duration::ZERO)?;
        if let Some(e) = self.acks.failed.borrow().as_ref() {
            return Err(e.clone());
        }
        if let Some(e) = self.producer.sender().failed() {
            return Err(e);
        }
        if !self.external_after.is_empty() {
            self.advance_over_external();
        }
        let acked = self.acks.logical.get();
        while self.unacked_since.front().is_some_and(|&(last, _)| last as i64 <= acked) {
            self.unacked_since.pop_front();
        }
        Ok(())
    }

    /// Records not yet acknowledged.
    pub fn pending(&self) -> u64 {
        self.acks.pending.get()
    }

    /// Value bytes of the records not yet acknowledged.
    pub fn pending_bytes(&self) -> u64 {
        self.acks.pending_bytes.get()
    }

    /// How long the oldest unacknowledged record has waited (zero when none waits).
    pub fn oldest_pending_age(&self) -> Duration {
        match self.unacked_since.front() {
            Some(&(last, since)) if self.acks.pending.get() > 0 && last as i64 > self.acks.logical.get() => {
                since.elapsed()
            }
            _ => Duration::ZERO,
        }
    }

    /// At shutdown: waits (at most `bound`) until every record is acknowledged.
    pub fn flush(&mut self, bound: Duration) -> Result<(), String> {
        let deadline = Instant::now() + bound;
        // Staged records follow the group in flight into librdkafka, which keeps their order.
        if !self.staged.is_empty() {
            self.hand_staged()?;
        }
        while self.handed > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("{} records still unacknowledged after {bound:?}", self.handed));
            }
            self.producer.flush_for(left.min(Duration::from_millis(10)));
            self.take_reports(Duration::ZERO)?;
            if let Some(e) = self.producer.sender().failed() {
                return Err(e);
            }
        }
        self.poll()
    }
}

/// librdkafka's default `message.max.bytes` (a single record larger than that is refused by
/// the client itself).
const LIBRDKAFKA_MESSAGE_MAX_BYTES: usize = 1_000_000;

/// Room left in a record for what is not the mutation: the record batch's framing (61 bytes),
/// the record's own varints, the four headers (about 150 bytes) and slack.
const RECORD_OVERHEAD: usize = 1024;

/// How many records ahead of the one it applies the replay starts loading a key's chain
/// (and twice as many ahead, its bucket slots).
const PREFETCH_AHEAD: usize = 8;

/// Groups smaller than this are handed to librdkafka on the server thread (when the sender
/// thread is idle): waking the sender costs both threads more than producing a few records
/// (measured at -P 1: about 15% more CPU per write with every group through the sender).
const INLINE_GROUP_MAX: usize = 32;

/// Broker ack mode: how long the next group waits for another record before it leaves
/// incomplete (see `Journal::end_turn`). Released clients' writes arrive microseconds apart;
/// this bounds what a client that went quiet costs the others.
const GROUP_GAP: Duration = Duration::from_micros(100);

/// A one-shot monotonic timer whose descriptor becomes readable when it expires (timerfd:
/// microsecond precision, where the poll timeout has milliseconds).
struct Timer(std::os::fd::OwnedFd);

impl Timer {
    fn new() -> std::io::Result<Timer> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain syscall; the descriptor is ours on success.
        let fd =
            unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fresh descriptor, owned from here.
        Ok(Timer(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }))
    }

    fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.0.as_raw_fd()
    }

    /// Expires once, `after` from now (re-arming replaces the previous expiry).
    fn arm(&self, after: Duration) {
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos().max(1) as libc::c_long,
            },
        };
        // SAFETY: valid descriptor and spec; a failure only leaves the cron as the backstop.
        unsafe { libc::timerfd_settime(self.fd(), 0, &spec, std::ptr::null_mut()) };
    }

    /// Consumes an expiry (so the descriptor is no longer readable).
    fn clear(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: non-blocking read into our buffer.
        unsafe { libc::read(self.fd(), buf.as_mut_ptr().cast(), buf.len()) };
    }
}

/// Startup check of the topic: it exists (or is created with one partition and the delete
/// policy), has exactly one partition, and is not compacted. Returns its `max.message.bytes`
/// when the broker reports it.
fn check_topic(t: &KafkaTarget) -> Result<Option<usize>, String> {
    let mut c = quiet_config(t);
    c.set("allow.auto.create.topics", "false");
    let admin: AdminClient<DefaultClientContext> =
        c.create().map_err(|e| format!("--kafka: cannot create the Kafka client: {e}"))?;
    let client = admin.inner();
    let started = Instant::now();
    let partitions = loop {
        match client.fetch_metadata(Some(&t.topic), CONNECT_TIMEOUT) {
            Ok(md) => {
                let topic = md.topics().iter().find(|x| x.name() == t.topic);
                match topic.map(|x| (x.error(), x.partitions().len())) {
                    Some((None, n)) => break Some(n),
                    Some((Some(e), _))
                        if RDKafkaErrorCode::from(e) == RDKafkaErrorCode::UnknownTopicOrPartition =>
                    {
                        break None
                    }
                    Some((Some(e), _)) => {
                        return Err(format!("--kafka: topic {}: {}", t.topic, RDKafkaErrorCode::from(e)))
                    }
                    None => break None,
                }
            }
            Err(e) if started.elapsed() < CONNECT_TIMEOUT => {
                warn!("waiting for the Kafka brokers {}: {e}", t.brokers);
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => {
                return Err(format!(
                    "--kafka: no answer from the brokers {} within {} s: {e}",
                    t.brokers,
                    CONNECT_TIMEOUT.as_secs()
                ))
            }
        }
    };
    let opts = AdminOptions::new().request_timeout(Some(CONNECT_TIMEOUT));
    match partitions {
        None => {
            let topic = NewTopic::new(&t.topic, 1, TopicReplication::Fixed(-1))
                .set("cleanup.policy", "delete")
                .set("retention.ms", "-1")
                .set("retention.bytes", "-1");
            let res = block_on(admin.create_topics([&topic], &opts))
                .map_err(|e| format!("--kafka: cannot create topic {}: {e}", t.topic))?;
            for r in res {
                if let Err((name, code)) = r {
                    if code != RDKafkaErrorCode::TopicAlreadyExists {
                        return Err(format!("--kafka: cannot create topic {name}: {code}"));
                    }
                }
            }
            info!(
                "created Kafka topic {} with 1 partition, cleanup.policy=delete and unlimited retention",
                t.topic
            );
        }
        Some(1) => {}
        Some(n) => {
            return Err(format!(
            "--kafka: topic {} has {n} partitions; the journal needs exactly 1 (one total order of writes)",
            t.topic
        ))
        }
    }
    let res = block_on(admin.describe_configs([&ResourceSpecifier::Topic(&t.topic)], &opts))
        .map_err(|e| format!("--kafka: cannot read the configuration of topic {}: {e}", t.topic))?;
    let mut max_message_bytes = None;
    for r in res {
        let resource =
            r.map_err(|e| format!("--kafka: cannot read the configuration of topic {}: {e}", t.topic))?;
        if let Some(policy) = resource.get("cleanup.policy").and_then(|e| e.value.clone()) {
            if policy.split(',').any(|p| p.trim() == "compact") {
                return Err(format!(
                    "--kafka: topic {} has cleanup.policy={policy}: compaction can remove a record that a later \
                     cross-key write (RENAME, SMOVE, LMOVE, *STORE) depends on, so a replay would diverge; use \
                     cleanup.policy=delete with a retention longer than your oldest snapshot",
                    t.topic
                ));
            }
        }
        max_message_bytes = resource.get("max.message.bytes").and_then(|e| e.value.as_deref()?.parse().ok());
    }
    Ok(max_message_bytes)
}

/// The linked librdkafka's version and its `builtin.features` (what the build compiled in:
/// codecs, security mechanisms).
pub fn client_build() -> (String, String) {
    use rdkafka::bindings as rd;
    let version = rdkafka::util::get_rdkafka_version().1;
    // SAFETY: a configuration object created, read into a buffer of the size passed, and
    // destroyed here; librdkafka writes at most `size` bytes, NUL included.
    let features = unsafe {
        let conf = rd::rd_kafka_conf_new();
        let mut buf = [0u8; 512];
        let mut size = buf.len();
        let r = rd::rd_kafka_conf_get(conf, c"builtin.features".as_ptr(), buf.as_mut_ptr().cast(), &mut size);
        rd::rd_kafka_conf_destroy(conf);
        if r == rd::rd_kafka_conf_res_t::RD_KAFKA_CONF_OK {
            std::ffi::CStr::from_bytes_until_nul(&buf)
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default()
        } else {
            String::new()
        }
    };
    (version, features)
}

/// Where a replay starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The earliest retained record (no snapshot).
    Earliest,
    /// This broker offset, inclusively: a record the topic must hold (the snapshot's or the
    /// replica's last acknowledged own record, or a position below it).
    Offset(i64),
    /// A consumer position (the first broker offset not yet read), which may be the topic's
    /// end: a snapshot that saved a position but no acknowledged record of its own.
    Position(i64),
    /// The first record whose timestamp is at or after this unix time in ms (a snapshot
    /// without cursors: its file's birth time minus `--kafka-time-buffer`).
    Time(i64),
}

/// Replays the topic into `engine`, from `start` through the high watermark captured first.
///
/// Lineages: with no snapshot (`engine` empty at offset 0, `adopt_lineage`), the first record
/// of a goblin lineage names it; records of any other lineage before the first matching one
/// are older history and discarded; a different lineage after it means two primaries share
/// the topic (an error). Own records at or below the engine's offset are duplicates; one
/// beyond the next expected offset is a missing record (an error naming both offsets).
///
/// Other producers' records (DESIGN.md decision 3): those below `consumer_position` (the
/// snapshot's; -1: unknown) are in the snapshot already. The rest are held back; before an
/// own record stamped `goblin-applied-through` b is applied, the held records at or below b
/// are applied, in broker order, as the commands they are; an own record that is a duplicate
/// marks the held records at or below its b as duplicates too (they were applied before it,
/// so they are in the snapshot); what is still held after the last record is applied at the
/// end. Any record that cannot be applied stops the replay with an error naming topic,
/// partition and broker offset.
///
/// `verify` (a replica's catch-up): own records skipped as duplicates are checked against the
/// mutations the replica applied from frames before Kafka confirmed them; a different one is
/// an error (`replication::unconfirmed`).
///
/// `stall`: how long the replay waits for its next records before it fails. A primary's
/// startup waits out a leader failover (`STARTUP_STALL`); a replica's catch-up, which blocks
/// its server thread and is retried when abandoned, gives up sooner (`CATCH_UP_STALL`).
pub fn replay(
    target: &KafkaTarget,
    engine: &mut Engine,
    start: Start,
    consumer_position: i64,
    adopt_lineage: bool,
    verify: Option<&mut Unconfirmed>,
    stall: Duration,
) -> Result<ReplayStats, ReplayFailure> {
    // Nothing else runs on the server thread until the replay returns: the keyspace may
    // resize in one go.
    engine.set_bulk_load(true);
    let r = replay_topic(target, engine, start, consumer_position, adopt_lineage, verify, stall);
    engine.set_bulk_load(false);
    r
}

/// The partition's (low, high) watermarks, once the partition has a leader that answers.
/// A topic created a moment ago (startup creates a missing one) may not have a known leader
/// yet: Apache Kafka answers "unknown partition" until its controller's metadata reaches the
/// broker. A leader that died has to be declared dead and replaced first (Kafka's
/// `broker.session.timeout.ms`, 9 s by default, then an election), and meanwhile librdkafka
/// keeps sending the query to the dead one until the attempt times out, even after another
/// was elected: so each attempt is short (`LEADER_ATTEMPT`), the topic's metadata is asked for
/// again after each, and the answers that mean "no leader now" are retried for up to `wait`.
/// Any other error, or those past the bound, is returned.
fn watermarks(
    consumer: &BaseConsumer,
    topic: &str,
    wait: Duration,
) -> rdkafka::error::KafkaResult<(i64, i64)> {
    let deadline = Instant::now() + wait;
    let mut warned = false;
    loop {
        match consumer.fetch_watermarks(topic, 0, LEADER_ATTEMPT) {
            Err(rdkafka::error::KafkaError::MetadataFetch(code))
                if no_leader_now(code) && Instant::now() < deadline =>
            {
                if !warned
                    && !matches!(
                        code,
                        RDKafkaErrorCode::UnknownPartition | RDKafkaErrorCode::UnknownTopicOrPartition
                    )
                {
                    warn!("topic {topic}: partition 0 has no leader that answers ({code}); waiting for one");
                    warned = true;
                }
                // librdkafka keeps the leader it last learned until its metadata is refreshed
                // (every 5 minutes, or after an error on a fetch or a produce, which this
                // client has not made): ask for the topic's metadata, which updates it.
                let _ = consumer.fetch_metadata(Some(topic), LEADER_ATTEMPT);
                std::thread::sleep(Duration::from_millis(50))
            }
            other => return other,
        }
    }
}

/// The errors of a query to a partition that mean it has no reachable leader at the moment
/// (being created, or its leader dead or deposed and not yet replaced everywhere).
fn no_leader_now(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode::*;
    matches!(
        code,
        UnknownPartition
            | UnknownTopicOrPartition
            | LeaderNotAvailable
            | NotLeaderForPartition
            | FencedLeaderEpoch
            | UnknownLeaderEpoch
            | OperationTimedOut
            | RequestTimedOut
            | BrokerTransportFailure
            | AllBrokersDown
            // A broker handle replaced while the query waited on it (a node coming back).
            | DestroyBroker
    )
}

fn replay_topic(
    target: &KafkaTarget,
    engine: &mut Engine,
    start: Start,
    consumer_position: i64,
    mut adopt_lineage: bool,
    mut verify: Option<&mut Unconfirmed>,
    stall: Duration,
) -> Result<ReplayStats, ReplayFailure> {
    // Failures before any record is read: nothing was applied, so the caller has nothing to
    // resume (it starts again as this replay did).
    let nothing = Resume { from: -1, position: consumer_position, own_broker: -1 };
    let kafka = |m: String| ReplayFailure { error: ReplayError::Kafka(m), resume: nothing };
    // A history this state cannot continue from: an operator must act.
    let refuse = |m: String| ReplayFailure { error: ReplayError::Record(m), resume: nothing };
    let mut c = quiet_config(target);
    c.set("group.id", "goblin-core-replay")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        // The end of the partition is an event: the replay ends there even when the last
        // offsets below the watermark are transaction markers, which no consumer receives
        // (DESIGN.md decision 4: broker offsets have holes).
        .set("enable.partition.eof", "true")
        .set("allow.auto.create.topics", "false")
        // Records removed by retention under the replay (its position fell below the log
        // start) are a hole in the history: an error, never librdkafka's default jump to the
        // end, which the end-of-partition event would take for a finished replay.
        .set("auto.offset.reset", "error")
        // librdkafka stops fetching once its local queue holds queued.min.messages and then
        // waits up to fetch.queue.backoff.ms (1 s by default) before fetching again: a replay,
        // which drains the queue as fast as it can, would crawl at one queue-full per second.
        .set("queued.min.messages", "1000000")
        .set("fetch.queue.backoff.ms", "1");
    let consumer: BaseConsumer =
        c.create().map_err(|e| kafka(format!("--kafka: cannot create the replay consumer: {e}")))?;
    let (low, high) = watermarks(&consumer, &target.topic, stall)
        .map_err(|e| kafka(format!("--kafka: cannot read the watermarks of topic {}: {e}", target.topic)))?;
    let from = match start {
        Start::Earliest => -1,
        Start::Offset(o) | Start::Position(o) => o,
        Start::Time(ms) => {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(&target.topic, 0, Offset::Offset(ms))
                .map_err(|e| kafka(format!("--kafka: {e}")))?;
            let found = consumer.offsets_for_times(tpl, CONNECT_TIMEOUT).map_err(|e| {
                kafka(format!("--kafka: cannot look up the first record at or after {ms} ms: {e}"))
            })?;
            match found.find_partition(&target.topic, 0).map(|p| p.offset()) {
                Some(Offset::Offset(o)) => o,
                // No record at or after that time: nothing to replay.
                _ => high,
            }
        }
    };
    // A cursor past the end: the topic does not hold records the snapshot (or the replica)
    // saw acknowledged. It is not the history they were journaled to (deleted and created
    // again, or another cluster). Replaying nothing and going on would continue the lineage
    // over the missing records, and a later restart from the same snapshot would skip
    // whatever this primary writes below the cursor: refuse instead.
    let past_end = match start {
        Start::Offset(o) => o >= high,
        Start::Position(p) => p > high,
        Start::Earliest | Start::Time(_) => false,
    };
    if past_end {
        let end = if high == 0 {
            "it is empty".to_string()
        } else {
            format!("its last record is at offset {}", high - 1)
        };
        return Err(refuse(format!(
            "--kafka: the Kafka cursor (broker offset {from}) is past the end of topic {}: {end}. \
             The topic does not hold the records this state saw acknowledged: it is not the history \
             they were written to (deleted and created again, or another cluster)",
            target.topic
        )));
    }
    // A cursor below the earliest retained record: retention (or a deletion) removed records
    // after it. The state holds every record below its consumer position (other producers'
    // records below it were processed, and its own records are all below it too: a snapshot
    // waits until they are acknowledged, and the position passes over them), or, without a
    // position, every record through the inclusive cursor itself. Records from there on are
    // needed; if some are gone, refuse rather than skip writes.
    if matches!(start, Start::Offset(_) | Start::Position(_)) {
        let needed = if consumer_position >= 0 { consumer_position } else { from + 1 };
        if needed < low {
            return Err(refuse(format!(
                "--kafka: topic {} no longer holds the records this state needs: they start at broker \
                 offset {needed}, and the earliest retained record is at {low} (retention shorter than the \
                 snapshot's age, or a deletion). Restart from a snapshot newer than the topic's retained history",
                target.topic
            )));
        }
    }
    let start = if from < 0 { low } else { from.max(low) };
    let mut stats = ReplayStats {
        last_broker_offset: -1,
        position: high,
        base_offset: engine.repl.offset,
        own_broker: -1,
        external_broker: -1,
        ..Default::default()
    };
    info!(
        "replaying topic {} from broker offset {start} through {} ({} records)",
        target.topic,
        high,
        high - start
    );
    if start >= high {
        return Ok(stats);
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&target.topic, 0, Offset::Offset(start))
        .map_err(|e| kafka(format!("--kafka: {e}")))?;
    consumer.assign(&tpl).map_err(|e| kafka(format!("--kafka: cannot read topic {}: {e}", target.topic)))?;
    // Records of another lineage before the first of ours are older history (the inclusive
    // seek rereads a little of it): discarded.
    let mut lineage_seen = false;
    let started = Instant::now();
    let mut last_log = Instant::now();
    // Since when no record came (None while records flow: no clock read per record).
    let mut idle_since: Option<Instant> = None;
    // Per batch: the hash of each record's key, for the prefetch (computed once per record).
    let mut key_hashes: Vec<Option<u64>> = Vec::new();
    let mut now = crate::server::now_ms();
    let mut held = Held::default();
    let q = reader::Queue::of(&consumer)
        .ok_or_else(|| kafka("--kafka: the replay consumer has no queue".into()))?;
    let stop = std::sync::atomic::AtomicBool::new(false);
    // Where the consumer reported the partition's end, if it did before the last record below
    // the watermark arrived: below the watermark only when the tail is an open transaction,
    // which a read-committed consumer cannot pass yet (the runtime consumer picks it up).
    let mut end: Option<i64> = None;
    // The first offset not received yet: a record further on may mean records removed under
    // the replay (`reader::removed_before`).
    let mut next = start;
    let result = std::thread::scope(|s| {
        let (out, records) = std::sync::mpsc::sync_channel(reader::BATCHES_AHEAD);
        let (applied, back) = std::sync::mpsc::channel();
        let stop = &stop;
        std::thread::Builder::new()
            .name("goblin-replay".into())
            .spawn_scoped(s, move || reader::run(q, out, back, stop))
            .map_err(|e| ReplayError::Kafka(format!("--kafka: cannot start the replay reader: {e}")))?;
        let kafka = ReplayError::Kafka;
        // Dropping `records` (on every return) lets a reader blocked on a full channel go.
        let r = (|| -> Result<(), ReplayError> {
            while stats.last_broker_offset < high - 1 && end.is_none() {
                let batch = match records.recv_timeout(Duration::from_millis(200)) {
                    Ok(b) => b,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        // Nothing for a while: the leader may be failing over (librdkafka's
                        // fetcher follows the new one by itself).
                        if idle_since.get_or_insert_with(Instant::now).elapsed() > stall {
                            return Err(kafka(format!(
                                "--kafka: replay of topic {} stalled at broker offset {} (target {})",
                                target.topic,
                                stats.last_broker_offset,
                                high - 1
                            )));
                        }
                        continue;
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                        return Err(kafka(format!(
                            "--kafka: the replay reader of topic {} stopped",
                            target.topic
                        )))
                    }
                };
                idle_since = None;
                key_hashes.clear();
                key_hashes.extend(
                    batch.0.iter().map(|r| {
                        r.value().and_then(engine::replay::record_key).map(|k| engine.ks.key_hash(k))
                    }),
                );
                for (i, rec) in batch.0.iter().enumerate() {
                    if rec.eof {
                        next = next.max(rec.broker);
                        // Everything the consumer can see now has been read: the offsets
                        // left below the watermark are markers, or an open transaction's.
                        if rec.broker > stats.last_broker_offset {
                            end = Some(rec.broker);
                            break;
                        }
                        continue;
                    }
                    // The keys a few records ahead: their bucket slots, and (once those are
                    // in cache) their chains' first entries, start loading now, so that the
                    // lookups below find them cached (measured in docs/BENCHMARKS.md).
                    for (ahead, chain) in [(PREFETCH_AHEAD * 2, false), (PREFETCH_AHEAD, true)] {
                        if let Some(&Some(h)) = key_hashes.get(i + ahead) {
                            engine.ks.prefetch(h, chain);
                        }
                    }
                    if rec.error.is_none() {
                        if let Some(hole) = reader::removed_before(&consumer, &target.topic, next, rec.broker)
                        {
                            return Err(kafka(format!("--kafka: reading topic {}: {hole}", target.topic)));
                        }
                        next = rec.broker + 1;
                    }
                    replay_record(
                        rec,
                        target,
                        engine,
                        consumer_position,
                        &mut adopt_lineage,
                        &mut lineage_seen,
                        &mut held,
                        &mut stats,
                        &mut now,
                        verify.as_deref_mut(),
                    )?;
                    if stats.consumed.is_multiple_of(256) && last_log.elapsed() >= Duration::from_secs(1) {
                        last_log = Instant::now();
                        let secs = started.elapsed().as_secs_f64().max(1e-9);
                        info!(
                            "replay: broker offset {} of {} ({:.0} records/s), logical offset {}; {} records of \
                             other producers held ({} bytes)",
                            rec.broker,
                            high - 1,
                            stats.consumed as f64 / secs,
                            engine.next_offset() - 1,
                            held.records.len(),
                            held.bytes
                        );
                    }
                    if stats.last_broker_offset >= high - 1 {
                        break;
                    }
                }
                // The messages are destroyed on the reader thread.
                let _ = applied.send(batch);
            }
            Ok(())
        })();
        drop(records);
        stop.store(true, std::sync::atomic::Ordering::Release);
        r
    });
    // The reader thread has ended (the scope joined it) and released the queue with it.
    // Other producers' records after the last own record: the primary applied them after it.
    if let Err(error) = result.and_then(|()| held.apply_through(i64::MAX, engine, &target.topic, &mut stats))
    {
        // Applied: every own record through `own_broker`, every other producer's record below
        // the first one still held (or through the last applied). Unread or held: the rest.
        let done = stats.own_broker.max(stats.external_broker);
        let position = held.records.front().map_or(done + 1, |r| r.0).max(consumer_position);
        let from = if stats.own_broker >= 0 { stats.own_broker.min(position) } else { position.max(start) };
        return Err(ReplayFailure { error, resume: Resume { from, position, own_broker: stats.own_broker } });
    }
    if let Some(b) = engine.commit(engine::Origin::Replay) {
        engine.recycle(b);
    }
    // The first offset not read: past the watermark if records that arrived since were read
    // (the runtime consumer must not apply them twice); at the end the consumer reported, if
    // it stopped early there.
    stats.position = match end {
        Some(e) => e.max(stats.last_broker_offset + 1),
        None => high.max(stats.last_broker_offset + 1),
    };
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    info!(
        "replayed {} records of topic {} in {secs:.2} s ({:.0}/s): {} applied ({} of other producers), {} \
         duplicates, {} of older lineages, {} reads ignored, {} successor lineages followed; lineage {} at \
         offset {}",
        stats.consumed,
        target.topic,
        stats.consumed as f64 / secs,
        stats.applied,
        stats.external_applied,
        stats.duplicates,
        stats.older_lineage,
        stats.ignored_reads,
        stats.successors,
        engine.repl.replid,
        engine.repl.offset
    );
    Ok(stats)
}

/// A header's decimal digits as a u64 (no sign, no spaces, no overflow; leading zeros as
/// `str::parse` takes them), without a UTF-8 check and `str::parse` per record.
pub(super) fn decimal_u64(v: &[u8]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// As `decimal_u64`, with an optional leading '-', within i64.
pub(super) fn decimal_i64(v: &[u8]) -> Option<i64> {
    match v.split_first() {
        Some((b'-', digits)) => {
            let n = decimal_u64(digits)?;
            if n <= i64::MAX as u64 + 1 {
                Some((n as i64).wrapping_neg())
            } else {
                None
            }
        }
        _ => i64::try_from(decimal_u64(v)?).ok(),
    }
}

/// The record contract's version (`goblin-replication-version`) of a goblin record: this
/// build writes and reads version 1 alone (`sender::RECORD_VERSION`). A record of another
/// version may mean something else, so it stops the reader rather than being applied as if it
/// were version 1.
fn check_version(version: Option<Option<u64>>) -> Result<(), String> {
    match version {
        Some(Some(1)) => Ok(()),
        Some(Some(v)) => {
            Err(format!("goblin-replication-version {v}: this goblin-core reads version 1 records only"))
        }
        Some(None) => Err("malformed goblin-replication-version header".into()),
        None => Err("a goblin record without a goblin-replication-version header".into()),
    }
}

/// "topic T, partition P, offset O: what": how every record error names its record.
fn at_offset(topic: &str, partition: i32, offset: i64, what: String) -> String {
    format!("topic {topic}, partition {partition}, offset {offset}: {what}")
}

/// Another producer's record with a null value (a tombstone) is refused, as an empty value is
/// by `apply_record`: a record holds exactly one command.
const TOMBSTONE: &str =
    "malformed record: a tombstone (null value); a record holds exactly one RESP2 command";

/// One record of the replay, in broker order (see `replay`).
#[allow(clippy::too_many_arguments)]
/// The database a record applies to: its `goblin-db` header, or 0 without one.
fn record_db(rec: &reader::Record, engine: &Engine) -> Result<u32, String> {
    match rec.db {
        None => Ok(0),
        Some(None) => Err("malformed goblin-db header".into()),
        Some(Some(db)) if db < engine.databases() as u64 => Ok(db as u32),
        Some(Some(db)) => Err(format!(
            "goblin-db {db}: this server has databases 0 to {} (--databases)",
            engine.databases() - 1
        )),
    }
}

fn replay_record(
    rec: &reader::Record,
    target: &KafkaTarget,
    engine: &mut Engine,
    consumer_position: i64,
    adopt_lineage: &mut bool,
    lineage_seen: &mut bool,
    held: &mut Held,
    stats: &mut ReplayStats,
    now: &mut i64,
    verify: Option<&mut Unconfirmed>,
) -> Result<(), ReplayError> {
    if let Some(e) = &rec.error {
        return Err(ReplayError::Kafka(format!("--kafka: reading topic {}: {e}", target.topic)));
    }
    let broker = rec.broker;
    stats.last_broker_offset = broker;
    stats.consumed += 1;
    let at = |what: String| at_offset(&target.topic, rec.partition, broker, what);
    let bad = |what: String| ReplayError::Record(at(what));
    let Some(id) = rec.id else {
        // Another producer's write.
        if broker < consumer_position {
            stats.duplicates += 1;
            stats.external_duplicates += 1;
            return Ok(());
        }
        let value = rec.value().ok_or_else(|| bad(TOMBSTONE.to_string()))?;
        let db = record_db(rec, engine).map_err(bad)?;
        held.records.push_back((
            broker,
            rec.timestamp.unwrap_or_else(crate::server::now_ms),
            db,
            value.to_vec(),
        ));
        held.bytes += value.len();
        return Ok(());
    };
    let id = id.ok_or_else(|| bad("malformed goblin-replication-id header".into()))?;
    // Records written before the header existed count as stamped -1.
    let through = match rec.applied_through {
        None => -1,
        Some(v) => v.ok_or_else(|| bad("malformed goblin-applied-through header".into()))?,
    };
    if id != engine.repl.replid {
        if let Some(previous) = rec.previous {
            let (from, at) = previous
                .ok_or_else(|| bad("malformed goblin-previous-replication-id or -offset header".into()))?;
            // The first record of a successor of the lineage replayed so far: a primary
            // restarted from offset `at` of it journals under a new id from there (see main.rs
            // `recover`). Or of a sibling: the state is itself a successor of (`from`, `at`)
            // that journaled nothing (a snapshot saved by a restarted primary before its first
            // write), so it holds `from`'s history through `at` and nothing after.
            if from == engine.repl.replid || engine.repl.previous == Some((from, at)) {
                // Other producers' records the primary applied before this one are held;
                // those it applied under the predecessor (while it recovered) come first, up
                // to `at`, then the history goes on under the new id.
                held.apply_through_until(through, at, engine, &target.topic, stats)?;
                let here = engine.next_offset() - 1;
                if here != at {
                    let why = if here > at {
                        "the state holds mutations past the offset the record's lineage continues from, which \
                         that lineage's history does not have (two servers continued the history from there, a \
                         replica's snapshot holds writes its primary lost before Kafka had them, or an earlier \
                         process's records reached the broker after its successor started)"
                    } else {
                        "records of that lineage are missing before it"
                    };
                    return Err(bad(format!(
                        "lineage {id} continues lineage {from} from logical offset {at}, but the replay holds \
                         lineage {} through offset {here}: {why}",
                        engine.repl.replid
                    )));
                }
                if let Some(b) = engine.commit(engine::Origin::Replay) {
                    engine.recycle(b);
                }
                engine.set_replication(Replication { replid: id, offset: at, previous: Some((from, at)) });
                *adopt_lineage = false;
                stats.successors += 1;
            }
        }
    }
    if id != engine.repl.replid {
        if *adopt_lineage && engine.repl.offset == 0 && engine.pending().is_empty() {
            // No snapshot: the topic's first lineage is the one this primary continues.
            engine.set_replication(Replication::at(id, 0));
            *adopt_lineage = false;
        } else if !*lineage_seen {
            stats.older_lineage += 1;
            return Ok(());
        } else {
            return Err(bad(format!(
                "a record of lineage {id} after records of lineage {}: two primaries write this topic",
                engine.repl.replid
            )));
        }
    }
    *lineage_seen = true;
    check_version(rec.version).map_err(bad)?;
    let logical =
        rec.offset.ok_or_else(|| bad("missing or malformed goblin-replication-offset header".into()))?;
    let value = rec.value().unwrap_or_default();
    // Records with an offset replay without judging time; the clock matters only for a record
    // without one, so it is read every 256 records rather than per record.
    if stats.consumed.is_multiple_of(256) {
        *now = crate::server::now_ms();
    }
    if logical < engine.next_offset() && logical > stats.base_offset {
        // Not in the snapshot: this replay applied a record with this offset already, with
        // whatever it held. Two servers wrote the lineage; which history is the real one
        // cannot be told, and skipping either would silently drop acknowledged writes.
        return Err(bad(format!(
            "logical offset {logical} of lineage {id} appears twice (this replay has applied it): \
             two servers wrote this lineage (a copy of the same snapshot, or an earlier process whose \
             last request reached the broker after its successor started)"
        )));
    }
    // Every own record checks (or, past them, confirms) what a replica holds unconfirmed below
    // it: Kafka has the lineage through this offset.
    if let Some(v) = verify {
        v.check(logical, value).map_err(bad)?;
    }
    if logical < engine.next_offset() {
        // In the snapshot already, and so is every external record applied before it.
        let n = held.drop_through(through);
        stats.duplicates += n;
        stats.external_duplicates += n;
    } else if !held.records.is_empty() {
        held.apply_through(through, engine, &target.topic, stats)?;
    }
    engine.select(record_db(rec, engine).map_err(bad)?);
    match engine.apply_record(value, Some(logical), *now) {
        Ok(Applied::Applied) => stats.applied += 1,
        Ok(Applied::Duplicate) => stats.duplicates += 1,
        Ok(Applied::IgnoredRead) => stats.ignored_reads += 1,
        Err(e) => return Err(record_error(e, at)),
    }
    stats.own_broker = broker;
    // Replayed records commit in bounded runs; nothing consumes them before the listeners
    // open, so the batches are simply released.
    if engine.pending().len() >= 1024 {
        if let Some(b) = engine.commit(engine::Origin::Replay) {
            engine.recycle(b);
        }
    }
    Ok(())
}

/// Other producers' records read by the replay and not applied yet: (broker offset, time,
/// database, value), in broker order.
#[derive(Default)]
struct Held {
    records: VecDeque<(i64, i64, u32, Vec<u8>)>,
    bytes: usize,
}

impl Held {
    /// Forgets the held records at or below `through` (already applied); returns how many.
    fn drop_through(&mut self, through: i64) -> u64 {
        let mut n = 0;
        while self.records.front().is_some_and(|r| r.0 <= through) {
            let (_, _, _, v) = self.records.pop_front().expect("front exists");
            self.bytes -= v.len();
            n += 1;
        }
        n
    }

    /// Applies the held records at or below `through`, in broker order, as commands.
    fn apply_through(
        &mut self,
        through: i64,
        engine: &mut Engine,
        topic: &str,
        stats: &mut ReplayStats,
    ) -> Result<(), ReplayError> {
        self.apply_through_until(through, u64::MAX, engine, topic, stats)
    }

    /// [`Held::apply_through`], stopping early once the replayed state reaches logical
    /// offset `until`.
    fn apply_through_until(
        &mut self,
        through: i64,
        until: u64,
        engine: &mut Engine,
        topic: &str,
        stats: &mut ReplayStats,
    ) -> Result<(), ReplayError> {
        while self.records.front().is_some_and(|r| r.0 <= through) && engine.next_offset() - 1 < until {
            // A record that cannot be applied stays held: where a later replay goes on
            // (`Resume`) is at or before it, never past it.
            let (broker, time, db, value) = self.records.front().expect("front exists");
            let broker = *broker;
            engine.select(*db);
            match engine.apply_record(value, None, *time) {
                Ok(Applied::Applied) => {
                    stats.applied += 1;
                    stats.external_applied += 1;
                }
                Ok(Applied::IgnoredRead) => stats.ignored_reads += 1,
                Ok(Applied::Duplicate) => stats.duplicates += 1,
                Err(e) => return Err(record_error(e, |what| at_offset(topic, 0, broker, what))),
            }
            let (_, _, _, value) = self.records.pop_front().expect("front exists");
            self.bytes -= value.len();
            stats.external_broker = broker;
            if engine.pending().len() >= 1024 {
                if let Some(b) = engine.commit(engine::Origin::Replay) {
                    engine.recycle(b);
                }
            }
        }
        Ok(())
    }
}

/// What the runtime consumer has done since startup (INFO kafka).
#[derive(Default, Clone, Copy, Debug)]
pub struct ConsumeStats {
    pub consumed: u64,
    /// This primary's own records, read back and skipped (applied when they were written).
    pub own_skipped: u64,
    /// Other producers' records applied.
    pub external_applied: u64,
    /// Other producers' read-only records, counted and ignored.
    pub ignored_reads: u64,
}

/// What one [`Consumer::drain`] did.
pub struct Drained {
    /// Other producers' mutations are pending in the engine: commit them (origin External).
    pub applied: bool,
    /// The queue still holds records: drain again without waiting for the wake-up pipe.
    pub more: bool,
}

/// How long nothing of this primary's own may be pending before a paused consumer fetches
/// again (see [`Consumer::steer`]): other producers' records that arrive while the primary is
/// idle are applied at most this much later than an always-fetching consumer would.
const IDLE_FETCH_AFTER: Duration = Duration::from_millis(1);

/// The primary's runtime consumer of its own topic (DESIGN.md decision 3): assigned to
/// partition 0 from the position recovery ended at (no group membership, no committed
/// offsets), its queue's wake-up pipe in the server's poll set, drained on the server thread
/// in bounded runs between client commands.
///
/// It reads only what may hold other producers' records. Every broker offset below the
/// topic's end is either one of this primary's own records, whose offsets the delivery
/// reports give ([`Acks::own`]), or something else; the consumer's position passes over own
/// runs without fetching them, and librdkafka fetches (the partition is resumed) only while
/// - a reported own run starts beyond the position: the offsets in between are someone
///   else's, or
/// - nothing of ours has been pending for [`IDLE_FETCH_AFTER`]: whatever lands after our last
///   record can only be someone else's, and no report will tell of it.
///
/// Otherwise the partition is paused: our next report either starts right at the position
/// (passed over) or reveals a gap. Under a steady write load the primary so reads back
/// almost none of its own records (reading them all cost about an eighth of the throughput of
/// a write flood in queued ack mode: fetch, decompression and a message per record).
pub struct Consumer {
    topic: String,
    /// Declared before `consumer`: the queue handle is released while the consumer exists.
    wakeup: Wakeup,
    /// Pauses, resumes and moves the partition as `steer` decides. Declared before
    /// `consumer`: the thread is joined (and its references dropped) before the consumer goes.
    steering: Steering,
    /// Read through the queue `wakeup` holds (and asked for the log start it last saw);
    /// shared with the steering thread, and destroyed with the last reference.
    consumer: Arc<BaseConsumer>,
    /// Whether librdkafka is to fetch (the partition is not paused), as last decided.
    fetching: bool,
    /// Since when nothing of ours is pending while the partition is paused.
    idle_since: Option<Instant>,
    /// A fetch has completed (a record or the partition's end arrived). Until then the
    /// partition is never paused: paused and resumed before its first fetch, librdkafka's
    /// consumer was seen to start fetching only about a second later. (Still so with the
    /// resume-then-seek steering: without this guard, another producer's record written right
    /// after the primary's first own write at startup was applied 959 ms late, against 1-2 ms.)
    live: bool,
    /// The lineage this primary writes, as header text (refreshed if the lineage changes).
    lineage: ReplId,
    lineage_text: String,
    /// The last lineage header decoded (see `reader::Lineages`).
    lineages: reader::Lineages,
    /// The first broker offset not yet processed (what a snapshot saves).
    pub position: i64,
    pub stats: ConsumeStats,
    /// Set when a record of this lineage arrived that may be ours but is not reported yet: it
    /// was left unprocessed (the position stays on it) and the partition paused. Until the
    /// steering thread has carried out decision number `hold` (each one makes librdkafka drop
    /// what it had fetched before), every delivered message is stale and ignored; the record
    /// is then either passed over by its report or fetched again from the position.
    hold: Option<u64>,
}

impl Consumer {
    /// Starts consuming at broker offset `position`.
    pub fn start(target: &KafkaTarget, position: i64, lineage: ReplId) -> Result<Consumer, String> {
        let mut c = quiet_config(target);
        // assign() needs a group id; the consumer never joins the group nor commits.
        c.set("group.id", "goblin-core")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            // Reaching the end is an event: the first one tells `steer` that the consumer's
            // first fetch has completed.
            .set("enable.partition.eof", "true")
            .set("allow.auto.create.topics", "false")
            // A position that retention removed is a hole in the history: an error, never a
            // silent jump.
            .set("auto.offset.reset", "error")
            // The queue is drained in bounded runs; when it is full, fetch again soon after.
            .set("fetch.queue.backoff.ms", "10");
        // librdkafka's fetch defaults: the broker answers as soon as there is a record. A lazy
        // fetch (fetch.min.bytes 1 MiB, 100 ms) was tried and dropped: with
        // max.partition.fetch.bytes also 1 MiB, a fetch can rarely reach its minimum and waits
        // out the 100 ms, so under load the consumer fell hundreds of thousands of records
        // behind; its apparent gain in throughput was work deferred, and a snapshot's consumer
        // position then lags by as much, which a restart re-reads.
        let consumer: BaseConsumer =
            c.create().map_err(|e| format!("--kafka: cannot create the consumer: {e}"))?;
        // The wake-up is enabled before the assignment: enabled after the first fetch landed,
        // its edge would already have passed.
        // SAFETY: the client is valid for the consumer's life; the handle is released in
        // `Wakeup::drop`, before the consumer goes.
        let queue = unsafe { rdkafka::bindings::rd_kafka_queue_get_consumer(consumer.client().native_ptr()) };
        if queue.is_null() {
            return Err("--kafka: the consumer has no queue".to_string());
        }
        let wakeup = Wakeup::new(queue)
            .map_err(|e| format!("--kafka: cannot set up the consumer's wake-up pipe: {e}"))?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&target.topic, 0, Offset::Offset(position))
            .map_err(|e| format!("--kafka: {e}"))?;
        consumer.assign(&tpl).map_err(|e| format!("--kafka: cannot consume topic {}: {e}", target.topic))?;
        info!("consuming topic {} from broker offset {position}", target.topic);
        let consumer = Arc::new(consumer);
        let steering = Steering::start(consumer.clone(), tpl, &target.topic)
            .map_err(|e| format!("--kafka: cannot start the consumer's steering thread: {e}"))?;
        Ok(Consumer {
            topic: target.topic.clone(),
            wakeup,
            steering,
            consumer,
            fetching: true,
            idle_since: None,
            live: false,
            lineage,
            lineage_text: lineage.to_string(),
            lineages: reader::Lineages::default(),
            hold: None,
            position,
            stats: ConsumeStats::default(),
        })
    }

    /// The descriptor that becomes readable when records wait.
    pub fn wakeup_fd(&self) -> std::os::fd::RawFd {
        self.wakeup.fd()
    }

    /// Whether librdkafka is fetching for this consumer (INFO kafka).
    pub fn fetching(&self) -> bool {
        self.fetching
    }

    /// Moves the position over the own runs the delivery reports have given, then decides
    /// whether librdkafka should fetch (see [`Consumer`]); the steering thread carries the
    /// decision out. Called at the end of every loop turn: cheap. Ok(Some(t)): call again at
    /// `t` at the latest (the idle wait); Err: librdkafka refused to pause, resume or seek
    /// (the caller stops the server: a consumer that silently stopped would miss other
    /// producers' writes).
    pub fn steer(&mut self, acks: &Acks) -> Result<Option<Instant>, String> {
        let gap = {
            let mut own = acks.own.borrow_mut();
            loop {
                match own.front() {
                    Some(&(_, last)) if last < self.position => {}
                    Some(&(first, last)) if first <= self.position => {
                        self.stats.own_skipped += (last + 1 - self.position) as u64;
                        self.position = last + 1;
                    }
                    Some(_) => break true,
                    None => break false,
                }
                own.pop_front();
            }
        };
        let mut wake = None;
        let want = if gap || !self.live {
            true
        } else if acks.pending.get() > 0 {
            self.idle_since = None;
            false
        } else if self.fetching {
            true
        } else {
            let now = Instant::now();
            let since = *self.idle_since.get_or_insert(now);
            let due = since + IDLE_FETCH_AFTER;
            if now < due {
                wake = Some(due);
            }
            now >= due
        };
        self.steering.check()?;
        if want != self.fetching {
            self.steering.set(want, self.position);
            self.fetching = want;
            self.idle_since = None;
        }
        Ok(wake)
    }

    /// Takes at most `max` records from the queue: own records are skipped, other producers'
    /// writes are applied to `engine` (left pending for the caller to commit), their reads
    /// counted. Err (naming topic, partition, offset and the reason): a record that cannot be
    /// applied, another goblin lineage (two primaries share the topic), or a consumer error
    /// that means lost history; the caller stops the server. Records applied before the error
    /// are still pending: the caller must not commit them.
    pub fn drain(&mut self, engine: &mut Engine, max: usize, acks: &Acks) -> Result<Drained, String> {
        use rdkafka::bindings::rd_kafka_resp_err_t as Err_;
        self.wakeup.drain();
        if engine.repl.replid != self.lineage {
            self.lineage = engine.repl.replid;
            self.lineage_text = self.lineage.to_string();
        }
        // One queue lock for the whole run (`rd_kafka_consume_batch_queue`), not a poll, a
        // queue lock and clock reads per record; the guard destroys the messages on every way
        // out.
        let want = max.min(CONSUME_RUN);
        let mut buf = [std::ptr::null_mut(); CONSUME_RUN];
        // Before taking messages: once the decision is seen carried out, librdkafka filters
        // out everything fetched before it, so what this call takes is fresh. (Checked after
        // the call, a message taken just before the decision would pass as fresh.)
        if self.hold.is_some_and(|h| self.steering.carried() >= h) {
            self.hold = None;
        }
        // SAFETY: the queue handle is valid while the consumer exists; `buf` has room for
        // `want` pointers, and librdkafka hands over the first n messages.
        let n = unsafe {
            rdkafka::bindings::rd_kafka_consume_batch_queue(self.wakeup.queue, 0, buf.as_mut_ptr(), want)
        };
        let msgs = reader::Messages(buf[..n.max(0) as usize].to_vec());
        let mut applied = false;
        for &m in &msgs.0 {
            if self.hold.is_some() {
                continue;
            }
            // SAFETY: a live message owned by `msgs`.
            let (err, offset, partition) = unsafe { ((*m).err, (*m).offset, (*m).partition) };
            if err == Err_::RD_KAFKA_RESP_ERR__PARTITION_EOF {
                // Everything below `offset` that a consumer will ever receive has been
                // received (it arrives before the event): what else lies below it are
                // transaction markers and aborted records, which the position passes over.
                self.live = true;
                self.position = self.position.max(offset);
                continue;
            }
            if err != Err_::RD_KAFKA_RESP_ERR_NO_ERROR {
                let code = RDKafkaErrorCode::from(err);
                // SAFETY: as above; the error string lives as long as the message.
                let text = unsafe {
                    let t = rdkafka::bindings::rd_kafka_message_errstr(m);
                    if t.is_null() {
                        String::new()
                    } else {
                        std::ffi::CStr::from_ptr(t).to_string_lossy().into_owned()
                    }
                };
                // The position is gone (retention removed records not yet read): history was
                // lost. A missing topic also stops the producer (delivery failures).
                let lost = matches!(
                    err,
                    Err_::RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE
                        | Err_::RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET
                        | Err_::RD_KAFKA_RESP_ERR__FATAL
                );
                if lost {
                    return Err(format!(
                        "topic {}, partition 0, offset {}: cannot consume: {code:?}: {text}",
                        self.topic, self.position
                    ));
                }
                // Broker or leader changes: librdkafka reconnects by itself.
                warn!("Kafka consumer of topic {}: {code:?}: {text}", self.topic);
                continue;
            }
            self.live = true;
            self.stats.consumed += 1;
            // Fetched before the position passed over it (own records, by their reports).
            if offset < self.position {
                continue;
            }
            // A record past the position: what lies between was never delivered. Markers, or
            // records removed before they were read (on a broker that then serves from the
            // oldest record kept rather than answering out of range, as kaka does).
            if let Some(hole) = reader::removed_before(&self.consumer, &self.topic, self.position, offset) {
                return Err(format!(
                    "topic {}, partition {partition}, offset {}: cannot consume: {hole}",
                    self.topic, self.position
                ));
            }
            let at = |what: String| at_offset(&self.topic, partition, offset, what);
            // Ours by its delivery report (applied when written), else judged by its headers.
            if acks.is_own(offset) {
                self.stats.own_skipped += 1;
                self.position = offset + 1;
                continue;
            }
            let rec = reader::decode(m, &mut self.lineages);
            match rec.id {
                Some(Some(id)) if id == self.lineage => {
                    if acks.may_be_own(offset) {
                        // Probably ours, fetched before its report: left for the report to
                        // settle (see `hold`), never passed over on a guess.
                        if self.fetching {
                            self.steering.set(false, self.position);
                            self.fetching = false;
                            self.idle_since = None;
                        }
                        self.hold = Some(self.steering.decisions());
                        continue;
                    }
                    // Not ours by the reports, and no report can still make it ours: another
                    // server writes this lineage. Skipped as ours, its writes would be lost
                    // here, and a replay would drop its records or ours as duplicates.
                    return Err(at(format!(
                        "a record of this primary's own lineage {} (goblin-replication-offset {}) that it did \
                         not write: another server writes this lineage (a copy of the same snapshot, or an \
                         earlier process whose last request reached the broker after this one started)",
                        self.lineage_text,
                        rec.offset.map_or_else(|| "missing".to_string(), |o| o.to_string())
                    )));
                }
                Some(Some(id)) => {
                    return Err(at(format!(
                        "a record of lineage {id} while this primary writes lineage {}: two primaries share the topic",
                        self.lineage_text
                    )))
                }
                Some(None) => return Err(at("malformed goblin-replication-id header".into())),
                None => {
                    let value = rec.value().ok_or_else(|| at(TOMBSTONE.to_string()))?;
                    // Its Kafka timestamp, which every reader of the record sees alike, so the
                    // runtime primary and a later replay judge expiries and turn relative TTLs
                    // into the same deadlines; the local clock only if it has none.
                    let time = rec.timestamp.unwrap_or_else(crate::server::now_ms);
                    engine.select(record_db(&rec, engine).map_err(at)?);
                    match engine.apply_record(value, None, time) {
                        Ok(Applied::Applied) => {
                            self.stats.external_applied += 1;
                            applied = true;
                        }
                        Ok(Applied::IgnoredRead) => self.stats.ignored_reads += 1,
                        Ok(Applied::Duplicate) => {}
                        Err(e) => return Err(at(e.to_string())),
                    }
                }
            }
            self.position = offset + 1;
        }
        Ok(Drained { applied, more: self.wakeup.queued() > 0 })
    }
}

/// The thread that pauses, resumes and moves the runtime consumer's partition.
///
/// librdkafka's pause and resume are synchronous: the caller waits until the consumer's
/// broker thread has served the request (measured: 45 us median and up to 3.7 ms at a light
/// write load, 0.1-1.2 ms under a write flood). On the server
/// thread that stalled every client; here only this thread waits. The server thread
/// publishes what it wants (fetch or not, and from which position) and goes on. A decision
/// carried out late costs nothing but time: records fetched meanwhile are filtered or judged
/// as usual, and the position never passes a record it has not processed.
struct Steering {
    shared: Arc<(std::sync::Mutex<Wanted>, std::sync::Condvar)>,
    /// The number of the last decision the thread has carried out (see `Wanted::decisions`).
    carried: Arc<std::sync::atomic::AtomicU64>,
    /// Set with `Wanted::failed` (read every loop turn without the lock).
    failed: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
struct Wanted {
    fetching: bool,
    /// Where to resume from (the server thread's position when it decided).
    position: i64,
    /// Bumped by every decision to fetch: each one seeks, even when the last pause was never
    /// carried out (the position may have moved since).
    resumes: u64,
    /// Bumped by every decision published; the thread reports the number it has carried out.
    decisions: u64,
    stop: bool,
    /// What librdkafka refused, for the server thread to stop on.
    failed: Option<String>,
}

impl Steering {
    fn start(
        consumer: Arc<BaseConsumer>,
        partition: TopicPartitionList,
        topic: &str,
    ) -> std::io::Result<Steering> {
        let shared = Arc::new((
            std::sync::Mutex::new(Wanted { fetching: true, ..Wanted::default() }),
            std::sync::Condvar::new(),
        ));
        let theirs = shared.clone();
        let failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let failed_theirs = failed.clone();
        let carried = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let carried_theirs = carried.clone();
        let topic = topic.to_string();
        let thread = std::thread::Builder::new().name("journal-steer".into()).spawn(move || {
            // Declared before `consumer`: once used, the list holds a reference to librdkafka's
            // partition object, and the consumer's destruction waits for every such reference.
            let partition = partition;
            let consumer = consumer;
            if let Err(e) = steer_loop(&theirs, &carried_theirs, &consumer, &partition, &topic) {
                theirs.0.lock().unwrap_or_else(|e| e.into_inner()).failed = Some(e);
                failed_theirs.store(true, std::sync::atomic::Ordering::Release);
            }
        })?;
        Ok(Steering { shared, carried, failed, thread: Some(thread) })
    }

    /// Err: librdkafka refused a decision.
    fn check(&self) -> Result<(), String> {
        if !self.failed.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(());
        }
        let w = self.shared.0.lock().unwrap_or_else(|e| e.into_inner());
        Err(w.failed.clone().unwrap_or_default())
    }

    /// Publishes a decision (a failure of an earlier one is reported by `check`).
    fn set(&self, fetching: bool, position: i64) {
        let (lock, cv) = &*self.shared;
        let mut w = lock.lock().unwrap_or_else(|e| e.into_inner());
        w.fetching = fetching;
        w.position = position;
        if fetching {
            w.resumes += 1;
        }
        w.decisions += 1;
        cv.notify_one();
    }

    /// The number of decisions published so far.
    fn decisions(&self) -> u64 {
        self.shared.0.lock().unwrap_or_else(|e| e.into_inner()).decisions
    }

    /// The number of the last decision carried out: librdkafka has dropped every message it
    /// fetched before that decision (a pause, a seek and a resume each start a new fetch
    /// version, and older messages are never delivered after it).
    fn carried(&self) -> u64 {
        self.carried.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl Drop for Steering {
    fn drop(&mut self) {
        {
            let (lock, cv) = &*self.shared;
            lock.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
            cv.notify_one();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Carries out the server thread's decisions in order of arrival, the latest winning, until
/// told to stop (Ok) or librdkafka refuses one (Err).
fn steer_loop(
    shared: &(std::sync::Mutex<Wanted>, std::sync::Condvar),
    carried: &std::sync::atomic::AtomicU64,
    consumer: &BaseConsumer,
    partition: &TopicPartitionList,
    topic: &str,
) -> Result<(), String> {
    let (lock, cv) = shared;
    let (mut fetching, mut resumes) = (true, 0u64);
    loop {
        let (want, position, want_resumes, decision) = {
            let mut w = lock.lock().unwrap_or_else(|e| e.into_inner());
            while !w.stop && w.fetching == fetching && (!w.fetching || w.resumes == resumes) {
                // Nothing to carry out: the published decisions repeat the state in force
                // (a pause while paused), whose version librdkafka already delivers.
                carried.store(w.decisions, std::sync::atomic::Ordering::Release);
                w = cv.wait(w).unwrap_or_else(|e| e.into_inner());
            }
            if w.stop {
                return Ok(());
            }
            (w.fetching, w.position, w.resumes, w.decisions)
        };
        let failed = |what: &str, e: rdkafka::error::KafkaError| {
            format!("topic {topic}, partition 0: cannot {what} the consumer at offset {position}: {e}")
        };
        let result = if want {
            // Paused, the server thread may have passed over own records: the consumer resumes
            // where that thread stood, not where librdkafka last delivered. Resume first, then
            // seek: librdkafka's resume does not wake its broker thread, which, idle while the
            // partition was paused, would otherwise sleep out its 1 s bound before fetching;
            // the seek wakes it (its fetch state changes), and with the partition resumed
            // by then it fetches at once. Whatever it fetches in between, from where it last
            // stood, carries the resume's version, which the seek makes stale: librdkafka
            // drops it, and `drain` passes over records below the position anyway. The seek
            // waits for librdkafka's answer, so that the decision is carried out (both ops
            // served) when `carried` says so.
            consumer.resume(partition).map_err(|e| failed("resume", e)).and_then(|()| {
                consumer
                    .seek(topic, 0, Offset::Offset(position), CONNECT_TIMEOUT)
                    .map_err(|e| failed("move", e))
            })
        } else {
            // Records fetched and not yet taken are dropped with the pause (librdkafka purges
            // them); the position has not passed them, so they are read again.
            consumer.pause(partition).map_err(|e| failed("pause", e))
        };
        result?;
        carried.store(decision, std::sync::atomic::Ordering::Release);
        fetching = want;
        resumes = want_resumes;
    }
}

#[cfg(test)]
mod tests {
    use super::super::sender::{decimal_text, signed_decimal_text};
    use super::*;

    fn rec(args: &[&str]) -> Vec<u8> {
        let mut v = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            v.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        v
    }

    proptest::proptest! {
        /// The header parsers agree with `str::parse` on every string of digits and signs
        /// (what `str::parse` also accepts, a leading '+', is refused: goblin never writes it).
        #[test]
        fn decimal_headers_parse_as_str_parse(v in "[-+]?[0-9]{0,21}|[0-9a-f -]{0,6}") {
            let plus = v.starts_with('+');
            let u = v.parse::<u64>().ok().filter(|_| !plus);
            let i = v.parse::<i64>().ok().filter(|_| !plus);
            proptest::prop_assert_eq!(decimal_u64(v.as_bytes()), u);
            proptest::prop_assert_eq!(decimal_i64(v.as_bytes()), i);
        }
    }

    /// Own offsets from delivery reports form runs; another producer's records between them
    /// split a run, and the consumer's reads (in broker order) drop the runs it has passed.
    #[test]
    fn own_offsets_are_kept_as_runs_until_the_consumer_passes_them() {
        let acks = Acks::default();
        for o in [3, 4, 5, 8, 9, 12] {
            acks.record_own(o);
        }
        assert_eq!(acks.own.borrow().iter().copied().collect::<Vec<_>>(), vec![(3, 5), (8, 9), (12, 12)]);
        let seen: Vec<bool> = (0..13).map(|o| acks.is_own(o)).collect();
        let want: Vec<bool> = (0..13).map(|o| [3, 4, 5, 8, 9, 12].contains(&o)).collect();
        assert_eq!(seen, want);
        // Passed runs are gone; the run the consumer is in grows with the next report.
        assert_eq!(acks.own.borrow().len(), 1);
        acks.record_own(13);
        assert!(acks.is_own(13) && !acks.is_own(14));
        assert!(acks.own.borrow().is_empty());
    }

    #[test]
    fn decimal_text_round_trips() {
        for v in [0, 1, -1, 9, 10, -10, 123_456_789, i64::MAX, i64::MIN, i64::MIN + 1] {
            let mut buf = [0u8; 20];
            assert_eq!(decimal_text(&mut buf, v), v.to_string().as_bytes());
            assert_eq!(decimal_i64(decimal_text(&mut [0u8; 20], v)), Some(v));
        }
        assert_eq!(signed_decimal_text(&mut [0u8; 20], false, u64::MAX), u64::MAX.to_string().as_bytes());
    }

    #[test]
    fn decimal_headers_at_the_limits() {
        assert_eq!(decimal_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(decimal_u64(b"18446744073709551616"), None);
        assert_eq!(decimal_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(decimal_i64(b"-9223372036854775809"), None);
        assert_eq!(decimal_i64(b"9223372036854775808"), None);
        assert_eq!(decimal_i64(b"-1"), Some(-1));
        assert_eq!((decimal_u64(b""), decimal_i64(b"-")), (None, None));
        // Leading zeros, as many as str::parse takes (a proptest found 21 refused).
        assert_eq!(decimal_u64(b"000000000000000000000"), Some(0));
        assert_eq!(decimal_i64(b"-0000000000000000000000001"), Some(-1));
    }

    /// Held external records are applied through a stamp, in broker order, or dropped as
    /// duplicates through a duplicate's stamp; the rest stay held.
    #[test]
    fn held_records_apply_and_drop_through_a_stamp() {
        let mut e = Engine::new(Replication::new_lineage());
        let mut held = Held::default();
        for (broker, v) in [(3, "a"), (7, "b"), (9, "c"), (12, "d")] {
            let r = rec(&["APPEND", "k", v]);
            held.bytes += r.len();
            held.records.push_back((broker, 0, 0, r));
        }
        let mut stats = ReplayStats::default();
        held.apply_through(8, &mut e, "t", &mut stats).unwrap();
        assert_eq!((stats.applied, stats.external_applied, held.records.len()), (2, 2, 2));
        assert_eq!(held.drop_through(9), 1);
        held.apply_through(i64::MAX, &mut e, "t", &mut stats).unwrap();
        assert_eq!((held.records.len(), held.bytes), (0, 0));
        assert_eq!(e.ks.get(b"k").unwrap().to_plain(), store::Plain::Str(b"abd".to_vec()));
        // The mutations took fresh offsets 1..=3.
        assert_eq!(e.next_offset(), 4);
        // A bad held record names its broker offset.
        held.records.push_back((15, 0, 0, b"SET k v\r\n".to_vec()));
        held.bytes += 9;
        let err = held.apply_through(15, &mut e, "t", &mut stats).unwrap_err();
        let ReplayError::Record(m) = &err else { panic!("{err:?}") };
        assert!(m.starts_with("topic t, partition 0, offset 15: malformed record"), "{err}");
        // A write whose handler crashes is told apart: the caller must stop.
        let panicked = engine::RecordError::Panicked { command: "SET".into() };
        let named = at_offset("t", 0, 16, panicked.to_string());
        let crashed = record_error(panicked, |what| at_offset("t", 0, 16, what));
        assert_eq!(crashed, ReplayError::Crashed(named));
    }

    /// The shipped client: PLAINTEXT, uncompressed, Snappy and LZ4 only, nothing picked up
    /// from the build host. Ignored in the workspace's test run, where cargo unifies the
    /// features of kaka's test client (zlib, zstd) into the one librdkafka every test binary
    /// links; scripts/test.sh runs it in a build of this crate alone.
    #[test]
    #[ignore = "needs this crate's own feature set: cargo test -p goblin-core --bin goblin-core -- --ignored"]
    fn the_kafka_client_is_built_with_plaintext_snappy_and_lz4_only() {
        let (version, features) = client_build();
        assert!(version.starts_with("2."), "{version}");
        let features: Vec<&str> = features.split(',').collect();
        for want in ["snappy", "lz4"] {
            assert!(features.contains(&want), "{features:?}");
        }
        for unwanted in
            ["gzip", "zstd", "ssl", "sasl_gssapi", "sasl_scram", "sasl_oauthbearer", "http", "oidc"]
        {
            assert!(!features.contains(&unwanted), "{unwanted} is built in: {features:?}");
        }
    }
}
