//! The journal's Kafka side: the producer that turns committed batches into records, the
//! topic checks at startup, and the startup replay that rebuilds the dataset from the topic.
//!
//! Record contract (the seed's, with DESIGN.md's changes): one record per canonical mutation;
//! its value is the mutation's exact RESP2 bytes; its key is `engine::compaction_key` (none for
//! order-dependent mutations); its headers are `goblin-replication-version` (1),
//! `goblin-replication-id` (the lineage, 40 hex digits), `goblin-replication-offset` (the
//! logical offset the mutation carries) and `goblin-applied-through` (the broker offset of the
//! last record from another producer applied before it; always -1 until runtime consumption
//! of other producers exists). The topic has one partition and a delete (never compact)
//! cleanup policy: compaction could remove a record that a later cross-key mutation needs.
//!
//! Threads: librdkafka's own threads do the network work. Delivery reports run inside
//! `BaseProducer::poll`, which only the server thread calls, so the acknowledged offsets are
//! plain fields of the server thread's state.

use super::target::KafkaTarget;
use engine::{Applied, Batch, Engine, ReplId, Replication};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{info, warn};

pub const HEADER_VERSION: &str = "goblin-replication-version";
pub const HEADER_ID: &str = "goblin-replication-id";
pub const HEADER_OFFSET: &str = "goblin-replication-offset";
pub const HEADER_APPLIED_THROUGH: &str = "goblin-applied-through";
/// The record contract's version, in `goblin-replication-version`.
pub const RECORD_VERSION: &str = "1";
/// How long startup waits for the brokers before it gives up with an error.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

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
}

struct Reports(Rc<Acks>);

// SAFETY-free note: librdkafka calls `delivery` only from `poll`, which the server thread
// alone calls, so the `Rc`/`Cell` state is never touched by another thread. The trait still
// requires Send + Sync of the context type, which the wrapper below asserts.
struct ServerThreadOnly<T>(T);
// SAFETY: see above: every access happens on the server thread, inside `BaseProducer::poll`.
unsafe impl<T> Send for ServerThreadOnly<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for ServerThreadOnly<T> {}

pub struct Context(ServerThreadOnly<Reports>);

impl ClientContext for Context {}

impl ProducerContext for Context {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, logical: usize) {
        let acks = &(self.0).0 .0;
        acks.pending.set(acks.pending.get().saturating_sub(1));
        let len = match result {
            Ok(m) => m.payload_len(),
            Err((_, m)) => m.payload_len(),
        };
        acks.pending_bytes.set(acks.pending_bytes.get().saturating_sub(len as u64));
        match result {
            Ok(m) => {
                acks.logical.set(acks.logical.get().max(logical as i64));
                acks.broker.set(acks.broker.get().max(m.offset()));
            }
            Err((e, m)) => {
                let msg = format!(
                    "Kafka refused the record of logical offset {logical} (topic {}, partition {}): {e}",
                    m.topic(),
                    m.partition()
                );
                acks.failed.borrow_mut().get_or_insert(msg);
            }
        }
    }
}

/// librdkafka writes a byte to this pipe whenever its main queue (where delivery reports
/// arrive) becomes non-empty: the server registers the read end in its poll set, so a report
/// wakes the loop at once instead of waiting for a timer.
struct Wakeup {
    read: std::os::fd::OwnedFd,
    _write: std::os::fd::OwnedFd,
    queue: *mut rdkafka::bindings::rd_kafka_queue_t,
}

impl Drop for Wakeup {
    fn drop(&mut self) {
        // SAFETY: the queue handle came from rd_kafka_queue_get_main and is released once,
        // while the producer still exists (`Journal` declares `wakeup` before `producer`, and
        // fields drop in declaration order).
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
    producer: BaseProducer<Context>,
    pub acks: Rc<Acks>,
    /// Records produced since startup.
    pub produced: u64,
}

/// Counters of the startup replay (INFO kafka).
#[derive(Default, Clone, Copy, Debug)]
pub struct ReplayStats {
    pub consumed: u64,
    pub applied: u64,
    pub duplicates: u64,
    pub older_lineage: u64,
    pub ignored_reads: u64,
    /// Broker offset of the last record read (-1 if none).
    pub last_broker_offset: i64,
}

impl Journal {
    /// Connects, checks (or creates) the topic, and builds the producer. Errors name the
    /// topic and the reason; startup turns them into a non-zero exit before listening.
    pub fn connect(target: KafkaTarget) -> Result<Journal, String> {
        check_topic(&target)?;
        let acks = Rc::new(Acks::default());
        acks.logical.set(-1);
        acks.broker.set(-1);
        let mut c = base_config(&target);
        c.set("enable.idempotence", "true")
            .set("acks", "all")
            .set("max.in.flight.requests.per.connection", "1")
            .set("allow.auto.create.topics", "false")
            // No lingering: with one request in flight, records queue up behind it and go out
            // together anyway, and a lone write (broker ack mode) is not delayed.
            .set("linger.ms", "0");
        let producer: BaseProducer<Context> = c
            .create_with_context(Context(ServerThreadOnly(Reports(acks.clone()))))
            .map_err(|e| format!("--kafka: cannot create the producer: {e}"))?;
        let wakeup =
            Self::wakeup(&producer).map_err(|e| format!("--kafka: cannot set up the wake-up pipe: {e}"))?;
        Ok(Journal { target, wakeup, producer, acks, produced: 0 })
    }

    fn wakeup(producer: &BaseProducer<Context>) -> std::io::Result<Wakeup> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two descriptors we then own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors are fresh and ours.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: the client pointer is valid for the producer's life; the returned queue
        // handle is released in `Wakeup::drop`, before the producer goes.
        let queue = unsafe { rdkafka::bindings::rd_kafka_queue_get_main(producer.client().native_ptr()) };
        // SAFETY: librdkafka copies the one-byte payload; the write end outlives the queue's use
        // of it (disabled in `Wakeup::drop`).
        unsafe {
            rdkafka::bindings::rd_kafka_queue_io_event_enable(
                queue,
                write.as_raw_fd(),
                b"1".as_ptr().cast(),
                1,
            )
        };
        Ok(Wakeup { read, _write: write, queue })
    }

    /// The descriptor that becomes readable when delivery reports wait (see `Wakeup`).
    pub fn wakeup_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.wakeup.read.as_raw_fd()
    }

    /// Empties the wake-up pipe (before polling: a report arriving after this writes again).
    pub fn drain_wakeup(&self) {
        use std::os::fd::AsRawFd;
        let mut buf = [0u8; 256];
        // SAFETY: reads into our buffer from our non-blocking descriptor until it is empty.
        while unsafe { libc::read(self.wakeup.read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
    }

    /// The journal sink: one record per mutation of a committed batch, in order.
    pub fn on_batch(&mut self, batch: &Batch) -> Result<(), String> {
        let replid = batch.replid.to_string();
        for m in batch.iter() {
            let args: Vec<&[u8]> = m.args().collect();
            let key = engine::compaction_key(&args);
            let offset = m.offset.to_string();
            let headers = OwnedHeaders::new_with_capacity(4)
                .insert(Header { key: HEADER_VERSION, value: Some(RECORD_VERSION) })
                .insert(Header { key: HEADER_ID, value: Some(replid.as_str()) })
                .insert(Header { key: HEADER_OFFSET, value: Some(offset.as_str()) })
                .insert(Header { key: HEADER_APPLIED_THROUGH, value: Some("-1") });
            let mut record = BaseRecord::with_opaque_to(&self.target.topic, m.offset as usize)
                .payload(m.bytes)
                .partition(0)
                .headers(headers);
            if let Some(k) = &key {
                record = record.key(k.as_slice());
            }
            loop {
                match self.producer.send(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                        // The local queue is full: let librdkafka deliver some, then retry.
                        record = r;
                        self.producer.poll(Duration::from_millis(10));
                    }
                    Err((e, _)) => {
                        return Err(format!(
                            "cannot journal logical offset {} to topic {}: {e}",
                            m.offset, self.target.topic
                        ))
                    }
                }
            }
            self.acks.pending.set(self.acks.pending.get() + 1);
            self.acks.pending_bytes.set(self.acks.pending_bytes.get() + m.bytes.len() as u64);
            self.produced += 1;
        }
        Ok(())
    }

    /// After the startup replay: everything through the replayed records is durable in the
    /// topic, so a snapshot taken before this process produces anything still records where
    /// the journal stands.
    pub fn set_recovered(&mut self, logical: u64, broker: i64) {
        self.acks.logical.set(logical as i64);
        self.acks.broker.set(broker);
    }

    /// Serves delivery reports (server thread only). Err: a record was refused for good.
    pub fn poll(&mut self) -> Result<(), String> {
        self.producer.poll(Duration::ZERO);
        match self.acks.failed.borrow().as_ref() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Records not yet acknowledged.
    pub fn pending(&self) -> u64 {
        self.acks.pending.get()
    }

    /// Value bytes of the records not yet acknowledged.
    pub fn pending_bytes(&self) -> u64 {
        self.acks.pending_bytes.get()
    }

    /// At shutdown: waits (at most `bound`) until every record is acknowledged.
    pub fn flush(&mut self, bound: Duration) -> Result<(), String> {
        self.producer
            .flush(bound)
            .map_err(|e| format!("records still unacknowledged after {bound:?}: {e}"))?;
        self.poll()
    }
}

/// Startup check of the topic: it exists (or is created with one partition and the delete
/// policy), has exactly one partition, and is not compacted.
fn check_topic(t: &KafkaTarget) -> Result<(), String> {
    let mut c = base_config(t);
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
    }
    Ok(())
}

fn header<'a>(m: &'a rdkafka::message::BorrowedMessage<'_>, name: &str) -> Option<&'a [u8]> {
    m.headers()?.iter().find(|h| h.key == name).and_then(|h| h.value)
}

/// Where a replay starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The earliest retained record (no snapshot).
    Earliest,
    /// This broker offset, inclusively (the snapshot's cursor).
    Offset(i64),
    /// The first record whose timestamp is at or after this unix time in ms (a snapshot
    /// without cursors: its file's birth time minus `--kafka-time-buffer`).
    Time(i64),
}

/// Replays the topic into `engine`, from `start` through the high watermark captured first. The lineage continues: with no
/// snapshot (`engine` empty at offset 0, `adopt_lineage`), the first record of a goblin lineage
/// names it; records of any other lineage before the first matching one are older history
/// and discarded; a different lineage after it means two primaries share the topic (an error).
pub fn replay(
    target: &KafkaTarget,
    engine: &mut Engine,
    start: Start,
    mut adopt_lineage: bool,
) -> Result<ReplayStats, String> {
    let mut c = base_config(target);
    c.set("group.id", "goblin-core-replay")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .set("allow.auto.create.topics", "false")
        // librdkafka stops fetching once its local queue holds queued.min.messages and then
        // waits up to fetch.queue.backoff.ms (1 s by default) before fetching again: a replay,
        // which drains the queue as fast as it can, would crawl at one queue-full per second.
        .set("queued.min.messages", "1000000")
        .set("fetch.queue.backoff.ms", "1");
    let consumer: BaseConsumer =
        c.create().map_err(|e| format!("--kafka: cannot create the replay consumer: {e}"))?;
    let (low, high) = consumer
        .fetch_watermarks(&target.topic, 0, CONNECT_TIMEOUT)
        .map_err(|e| format!("--kafka: cannot read the watermarks of topic {}: {e}", target.topic))?;
    let from = match start {
        Start::Earliest => -1,
        Start::Offset(o) => o,
        Start::Time(ms) => {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(&target.topic, 0, Offset::Offset(ms))
                .map_err(|e| format!("--kafka: {e}"))?;
            let found = consumer
                .offsets_for_times(tpl, CONNECT_TIMEOUT)
                .map_err(|e| format!("--kafka: cannot look up the first record at or after {ms} ms: {e}"))?;
            match found.find_partition(&target.topic, 0).map(|p| p.offset()) {
                Some(Offset::Offset(o)) => o,
                // No record at or after that time: nothing to replay.
                _ => high,
            }
        }
    };
    let start = if from < 0 { low } else { from.max(low) };
    if from > 0 && from < low {
        warn!(
            "the snapshot's broker offset {from} is below the earliest retained record {low}: \
             records were removed by retention; a missing logical offset will stop the replay"
        );
    }
    let mut stats = ReplayStats { last_broker_offset: -1, ..Default::default() };
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
    tpl.add_partition_offset(&target.topic, 0, Offset::Offset(start)).map_err(|e| format!("--kafka: {e}"))?;
    consumer.assign(&tpl).map_err(|e| format!("--kafka: cannot read topic {}: {e}", target.topic))?;
    // Records of another lineage before the first of ours are older history (the inclusive
    // seek rereads a little of it): discarded.
    let mut lineage_seen = false;
    let started = Instant::now();
    let mut last_log = Instant::now();
    let mut idle_since = Instant::now();
    // The lineage as header text, to compare without parsing each record's header.
    let mut lineage_text = engine.repl.replid.to_string();
    let mut now = crate::server::now_ms();
    while stats.last_broker_offset < high - 1 {
        let Some(msg) = consumer.poll(Duration::from_millis(200)) else {
            if idle_since.elapsed() > CONNECT_TIMEOUT {
                return Err(format!(
                    "--kafka: replay of topic {} stalled at broker offset {} (target {})",
                    target.topic,
                    stats.last_broker_offset,
                    high - 1
                ));
            }
            continue;
        };
        idle_since = Instant::now();
        let msg = msg.map_err(|e| format!("--kafka: reading topic {}: {e}", target.topic))?;
        let broker = msg.offset();
        stats.last_broker_offset = broker;
        stats.consumed += 1;
        let at = |what: String| format!("topic {}, partition 0, offset {broker}: {what}", target.topic);
        let Some(id_text) = header(&msg, HEADER_ID) else {
            return Err(at(
                "a record without goblin headers (another producer's write); applying other producers' records \
                 is not supported yet"
                    .to_string(),
            ));
        };
        let id = if id_text == lineage_text.as_bytes() {
            engine.repl.replid
        } else {
            std::str::from_utf8(id_text)
                .ok()
                .and_then(ReplId::parse)
                .ok_or_else(|| at("malformed goblin-replication-id header".into()))?
        };
        if id != engine.repl.replid {
            if adopt_lineage && engine.repl.offset == 0 && engine.pending().is_empty() {
                // No snapshot: the topic's first lineage is the one this primary continues.
                engine.set_replication(Replication { replid: id, offset: 0 });
                lineage_text = id.to_string();
                adopt_lineage = false;
            } else if !lineage_seen {
                stats.older_lineage += 1;
                continue;
            } else {
                return Err(at(format!(
                    "a record of lineage {id} after records of lineage {}: two primaries write this topic",
                    engine.repl.replid
                )));
            }
        }
        lineage_seen = true;
        let logical = header(&msg, HEADER_OFFSET)
            .and_then(|v| std::str::from_utf8(v).ok()?.parse::<u64>().ok())
            .ok_or_else(|| at("missing or malformed goblin-replication-offset header".into()))?;
        let value = msg.payload().unwrap_or_default();
        // Records with an offset replay without judging time; the clock matters only for a
        // record without one, so it is read every 256 records rather than per record.
        if stats.consumed % 256 == 0 {
            now = crate::server::now_ms();
        }
        match engine.apply_record(value, Some(logical), now) {
            Ok(Applied::Applied) => stats.applied += 1,
            Ok(Applied::Duplicate) => stats.duplicates += 1,
            Ok(Applied::IgnoredRead) => stats.ignored_reads += 1,
            Err(e) => return Err(at(e.to_string())),
        }
        // Replayed records commit in bounded runs; nothing consumes them before the listeners
        // open, so the batches are simply released.
        if engine.pending().len() >= 1024 {
            if let Some(b) = engine.commit(engine::Origin::Replay) {
                engine.recycle(b);
            }
        }
        if last_log.elapsed() >= Duration::from_secs(1) {
            last_log = Instant::now();
            let secs = started.elapsed().as_secs_f64().max(1e-9);
            info!(
                "replay: broker offset {broker} of {} ({:.0} records/s), logical offset {}",
                high - 1,
                stats.consumed as f64 / secs,
                engine.next_offset() - 1
            );
        }
    }
    if let Some(b) = engine.commit(engine::Origin::Replay) {
        engine.recycle(b);
    }
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    info!(
        "replayed {} records of topic {} in {secs:.2} s ({:.0}/s): {} applied, {} duplicates, {} of older lineages; \
         lineage {} at offset {}",
        stats.consumed,
        target.topic,
        stats.consumed as f64 / secs,
        stats.applied,
        stats.duplicates,
        stats.older_lineage,
        engine.repl.replid,
        engine.repl.offset
    );
    Ok(stats)
}
