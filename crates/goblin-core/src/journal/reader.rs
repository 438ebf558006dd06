//! The startup replay's reader thread: takes records from the replay consumer's queue in
//! batches and decodes, off the server thread, what the replay needs of each (the goblin
//! headers, the value, the timestamp), so that the server thread only applies.
//!
//! Why a thread: the replay is bound by the server thread, and a third of its time went to
//! librdkafka's per-message calls (queue pops, header parsing with an allocation per header,
//! clock reads) rather than to applying. librdkafka's own fetch thread uses about a quarter of
//! the other core, so the reader fits beside it.
//!
//! Ownership: each `Record` owns its librdkafka message (the value points into it) until the
//! `Batch` holding it drops. The server thread sends applied batches back, so the messages are
//! also destroyed on the reader thread. librdkafka allows a message to be destroyed on any
//! thread.
//!
//! The decoding is exactly what the replay did inline; the replay still decides, in the same
//! order, what a missing or malformed header means (an older lineage's record is discarded
//! before its other headers are judged).

use super::kafka::{
    HEADER_APPLIED_THROUGH, HEADER_DB, HEADER_ID, HEADER_OFFSET, HEADER_PREVIOUS_ID, HEADER_PREVIOUS_OFFSET,
    HEADER_VERSION,
};
use engine::ReplId;
use rdkafka::bindings as rd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};

/// Records per batch (one queue lock in librdkafka, one channel message here).
const BATCH: usize = 1024;
/// Batches in flight between the threads: bounds the memory the reader runs ahead with.
pub const BATCHES_AHEAD: usize = 8;
/// How long the reader waits on an empty queue before it looks at the stop flag again.
const IDLE_WAIT_MS: i32 = 10;

/// One record, decoded.
pub struct Record {
    msg: *mut rd::rd_kafka_message_t,
    pub broker: i64,
    pub partition: i32,
    /// A consumer error in place of a record.
    pub error: Option<String>,
    /// The end of the partition, not a record: `broker` is then the offset the consumer
    /// reached (the next it would read). Transaction markers and aborted records, which a
    /// consumer never sees, may lie below it.
    pub eof: bool,
    /// `goblin-replication-id`: None if absent (another producer's record); Some(None) if it
    /// is not a lineage name.
    pub id: Option<Option<ReplId>>,
    /// `goblin-replication-offset`: None if absent or malformed.
    pub offset: Option<u64>,
    /// `goblin-replication-version`: None if absent; Some(None) if not a decimal number.
    pub version: Option<Option<u64>>,
    /// `goblin-applied-through`: None if absent; Some(None) if malformed.
    pub applied_through: Option<Option<i64>>,
    /// The record's timestamp in ms, if it has one.
    pub timestamp: Option<i64>,
    /// `goblin-db`: None if absent (database 0); Some(None) if not a decimal number.
    pub db: Option<Option<u64>>,
    /// `goblin-previous-replication-id` and `-offset` (the first record of a successor
    /// lineage): None if both are absent; Some(None) if one is missing or malformed.
    pub previous: Option<Option<(ReplId, u64)>>,
}

impl Record {
    /// The value; None for a null value (a tombstone).
    pub fn value(&self) -> Option<&[u8]> {
        // SAFETY: `msg` is a live message owned by this record (see the module documentation);
        // its payload, when not null, is `len` readable bytes that live as long as it.
        unsafe {
            let m = &*self.msg;
            if m.payload.is_null() {
                None
            } else {
                Some(std::slice::from_raw_parts(m.payload as *const u8, m.len))
            }
        }
    }
}

/// Records in broker order; destroys their messages when dropped.
pub struct Batch(pub Vec<Record>);

// SAFETY: a batch owns its messages outright (nothing else refers to them), and librdkafka
// messages may be used and destroyed on any thread.
unsafe impl Send for Batch {}

impl Drop for Batch {
    fn drop(&mut self) {
        for r in self.0.drain(..) {
            // SAFETY: each message is owned by exactly one record and destroyed once, here.
            unsafe { rd::rd_kafka_message_destroy(r.msg) };
        }
    }
}

/// Messages taken from librdkafka, destroyed when this drops (the runtime consumer's run).
pub struct Messages(pub Vec<*mut rd::rd_kafka_message_t>);

impl Drop for Messages {
    fn drop(&mut self) {
        for &m in &self.0 {
            // SAFETY: each message was handed over by librdkafka once and is destroyed once.
            unsafe { rd::rd_kafka_message_destroy(m) };
        }
    }
}

/// The consumer's queue handle, owned by the reader thread and released when it ends.
pub struct Queue(*mut rd::rd_kafka_queue_t);

impl Queue {
    /// Takes the consumer's queue; None if it has none. The consumer must outlive the
    /// `Queue` (the replay joins the reader thread before the consumer goes).
    pub fn of(consumer: &rdkafka::consumer::BaseConsumer) -> Option<Queue> {
        use rdkafka::consumer::Consumer as _;
        // SAFETY: the client pointer is valid while the consumer exists.
        let q = unsafe { rd::rd_kafka_queue_get_consumer(consumer.client().native_ptr()) };
        (!q.is_null()).then_some(Queue(q))
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // SAFETY: the handle is ours and released once, while its consumer still exists.
        unsafe { rd::rd_kafka_queue_destroy(self.0) };
    }
}

// SAFETY: librdkafka queues are thread-safe, and the handle has one owner.
unsafe impl Send for Queue {}

/// The reader thread's loop: batches go to `out` until `stop` is set or the server thread
/// hangs up; batches coming back on `applied` are dropped here (their messages destroyed).
pub fn run(queue: Queue, out: SyncSender<Batch>, applied: Receiver<Batch>, stop: &AtomicBool) {
    let mut buf: Vec<*mut rd::rd_kafka_message_t> = vec![std::ptr::null_mut(); BATCH];
    let mut lineages = Lineages::default();
    while !stop.load(Ordering::Acquire) {
        while let Ok(b) = applied.try_recv() {
            drop(b);
        }
        // SAFETY: `buf` has room for BATCH pointers; librdkafka fills the first n and hands
        // over their ownership.
        let n = unsafe { rd::rd_kafka_consume_batch_queue(queue.0, IDLE_WAIT_MS, buf.as_mut_ptr(), BATCH) };
        if n <= 0 {
            // 0: nothing yet; -1: the queue is unusable, which the replay notices as a stall.
            continue;
        }
        let batch = Batch(buf[..n as usize].iter().map(|&m| decode(m, &mut lineages)).collect());
        if out.send(batch).is_err() {
            return;
        }
    }
}

/// Records removed under a consumer (retention, a deletion) before it read them, found from a
/// jump in the offsets it receives. Kafka answers a fetch below the log start with
/// OFFSET_OUT_OF_RANGE, which the consumer reports (`auto.offset.reset=error`); kaka serves
/// it from the oldest record kept (its seed asks so), and the consumer just receives a later
/// offset. A jump alone is no hole: transaction markers and aborted records, which a
/// read-committed consumer never receives, leave jumps too. It is one when the partition's log
/// start is past the first offset not received: `next` is that offset, `received` the record's
/// that came instead. The log start is librdkafka's copy from the broker's last fetch answer
/// (the one that carried the record, or a later one): no request is made.
pub fn removed_before(
    consumer: &rdkafka::consumer::BaseConsumer,
    topic: &str,
    next: i64,
    received: i64,
) -> Option<String> {
    use rdkafka::consumer::Consumer as _;
    if next < 0 || received <= next {
        return None;
    }
    let topic = std::ffi::CString::new(topic).ok()?;
    let (mut log_start, mut high) = (-1i64, -1i64);
    // SAFETY: the client is valid while the consumer exists; the call only reads the
    // partition's cached offsets into the two locals.
    let err = unsafe {
        rd::rd_kafka_get_watermark_offsets(
            consumer.client().native_ptr(),
            topic.as_ptr(),
            0,
            &mut log_start,
            &mut high,
        )
    };
    if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return None;
    }
    (log_start > next).then(|| {
        format!(
            "records from broker offset {next} on were removed (retention, or a deletion) before they were \
             read: the history has a hole (the next record received is at {received}, the earliest retained \
             at {log_start})"
        )
    })
}

/// The last `goblin-replication-id` text read and what it parsed to: a topic's records
/// carry one lineage for long runs, so most records compare 40 bytes instead of parsing 40
/// hex digits (7% of the replay reader's time).
#[derive(Default)]
pub struct Lineages {
    text: Vec<u8>,
    parsed: Option<ReplId>,
}

impl Lineages {
    fn parse(&mut self, v: &[u8]) -> Option<ReplId> {
        if self.text != v {
            self.parsed = ReplId::parse_bytes(v);
            self.text.clear();
            self.text.extend_from_slice(v);
        }
        self.parsed
    }
}

/// Decodes one message. The record does not own it: whoever holds the message (a `Batch`, a
/// `Messages`) destroys it, after the record's last use.
pub fn decode(msg: *mut rd::rd_kafka_message_t, lineages: &mut Lineages) -> Record {
    let mut r = Record {
        msg,
        broker: -1,
        partition: 0,
        error: None,
        eof: false,
        id: None,
        offset: None,
        version: None,
        applied_through: None,
        timestamp: None,
        db: None,
        previous: None,
    };
    // SAFETY: `msg` is a live message from librdkafka, owned by `r` from here on.
    unsafe {
        let m = &*msg;
        r.broker = m.offset;
        r.partition = m.partition;
        if m.err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__PARTITION_EOF {
            r.eof = true;
            return r;
        }
        if m.err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            let text = rd::rd_kafka_message_errstr(msg);
            let text = if text.is_null() {
                format!("{:?}", m.err)
            } else {
                std::ffi::CStr::from_ptr(text).to_string_lossy().into_owned()
            };
            // The position fell below the log start (`auto.offset.reset` is `error`).
            let removed = matches!(
                m.err,
                rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE
                    | rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET
            );
            r.error = Some(if removed {
                format!(
                    "records from broker offset {} on were removed (retention, or a deletion) before they \
                     were read: the history has a hole ({text})",
                    m.offset
                )
            } else {
                text
            });
            return r;
        }
        let mut ts_type = rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
        let ts = rd::rd_kafka_message_timestamp(msg, &mut ts_type);
        if ts_type != rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE && ts >= 0 {
            r.timestamp = Some(ts);
        }
        // The headers are parsed into their own allocations (a list and one per header) and
        // detached from the message: destroyed right after decoding, on this thread, they
        // go back to this thread's allocator cache for the next record's headers, instead of
        // piling up with the message until its batch comes back (a burst of frees past the
        // cache, flushed to the shared arena: 6% of the replay's samples).
        let mut hdrs: *mut rd::rd_kafka_headers_t = std::ptr::null_mut();
        if rd::rd_kafka_message_detach_headers(msg, &mut hdrs)
            != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
        {
            return r;
        }
        /// Destroys detached headers on every way out of the decoding below.
        struct Detached(*mut rd::rd_kafka_headers_t);
        impl Drop for Detached {
            fn drop(&mut self) {
                // SAFETY: detached headers are ours alone, destroyed once.
                unsafe { rd::rd_kafka_headers_destroy(self.0) };
            }
        }
        let detached = Detached(hdrs);
        let (mut id, mut offset, mut through, mut version, mut db) = (None, None, None, None, None);
        let (mut previous_id, mut previous_offset) = (None, None);
        let mut idx = 0;
        loop {
            let mut name: *const std::os::raw::c_char = std::ptr::null();
            let mut value: *const std::os::raw::c_void = std::ptr::null();
            let mut size = 0usize;
            if rd::rd_kafka_header_get_all(hdrs, idx, &mut name, &mut value, &mut size)
                != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
            {
                break;
            }
            idx += 1;
            let slot: &mut Option<&[u8]> = match std::ffi::CStr::from_ptr(name).to_bytes() {
                n if n == HEADER_ID.to_bytes() => &mut id,
                n if n == HEADER_OFFSET.to_bytes() => &mut offset,
                n if n == HEADER_APPLIED_THROUGH.to_bytes() => &mut through,
                n if n == HEADER_VERSION.to_bytes() => &mut version,
                n if n == HEADER_DB.to_bytes() => &mut db,
                n if n == HEADER_PREVIOUS_ID.to_bytes() => &mut previous_id,
                n if n == HEADER_PREVIOUS_OFFSET.to_bytes() => &mut previous_offset,
                _ => continue,
            };
            // The first occurrence with a value wins (a null value counts as absent).
            if slot.is_none() && !value.is_null() {
                *slot = Some(std::slice::from_raw_parts(value as *const u8, size));
            }
        }
        r.id = id.map(|v| lineages.parse(v));
        r.offset = offset.and_then(super::kafka::decimal_u64);
        r.applied_through = through.map(super::kafka::decimal_i64);
        r.version = version.map(super::kafka::decimal_u64);
        r.db = db.map(super::kafka::decimal_u64);
        if previous_id.is_some() || previous_offset.is_some() {
            let id = previous_id.and_then(ReplId::parse_bytes);
            let at = previous_offset.and_then(super::kafka::decimal_u64);
            r.previous = Some(id.zip(at));
        }
        // The slices above point into the headers: they are all parsed by now.
        drop(detached);
    }
    r
}
