//! The journal's sender thread: it hands the server thread's records to librdkafka.
//!
//! Handing a record to librdkafka (`rd_kafka_produceva`) copies it and its four headers into
//! separate allocations under the partition queue's lock; at -P 16 that was about a quarter
//! of the server thread's time, and the server thread was the bottleneck. So the server
//! thread only copies each journaled mutation into a [`Staged`] buffer (one `memcpy`), and at
//! the end of its loop turn passes the buffer to this thread, which builds the headers and
//! produces the records, in order. A small buffer (`kafka::INLINE_GROUP_MAX`) the server
//! thread produces itself when this thread is idle: waking a thread costs both more than a
//! few records do. librdkafka's producer is thread-safe; its delivery reports arrive on its
//! main queue, which in queued ack mode this thread serves too, between groups and while it
//! has none: the reports free the records this thread allocated (`reports`). In broker ack
//! mode the server thread serves them (`producer`).
//!
//! Invariants:
//! - Records reach librdkafka in the order the server thread staged them: buffers are taken
//!   in the order they were handed over, and the server thread produces only while this
//!   thread is idle (`busy` false).
//! - `busy` is true from the moment a buffer is handed over until this thread has produced
//!   (and, in broker ack mode, sent) everything it was given.
//! - A produce failure other than a full queue is kept (`failed`) and reported through the
//!   journal's wake-up pipe; every later record is dropped unproduced, since the server stops.
//!
//! Broker ack mode adds the send trigger. There replies wait for the broker, and the seed
//! allows one produce request in flight. librdkafka sends a partition's records when
//! `linger.ms` has passed since the first of them, when a batch limit is reached, or while the
//! application is inside `rd_kafka_flush()`. A linger makes every lone write wait for it (its
//! broker thread sleeps in whole milliseconds: a 0.5 ms linger took a single client's write to
//! 1.6 ms), and no linger at all makes the broker thread poll its socket in a busy loop while
//! records wait behind the in-flight request. So goblin-core forms the groups itself
//! (`kafka::Journal::end_turn`): it hands over a group only when the previous one is fully
//! acknowledged, with a long linger as a backstop. This thread produces the whole group, then
//! calls `rd_kafka_flush()`, during which librdkafka treats the linger as elapsed and sends the
//! group as one request; flush returns once every record is reported (the server thread
//! serves the reports). The next group is handed over only after that (else records would be
//! sent one by one as they are produced, splitting the group); the thread writes to the
//! journal's wake-up pipe when the server thread is waiting for it.

use super::producer::{Client, ProduceError};
use super::reports::Reports;
use std::collections::VecDeque;
use std::ffi::CStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The record headers' names (NUL-terminated, as librdkafka takes them).
pub const HEADER_VERSION: &CStr = c"goblin-replication-version";
pub const HEADER_ID: &CStr = c"goblin-replication-id";
pub const HEADER_OFFSET: &CStr = c"goblin-replication-offset";
pub const HEADER_APPLIED_THROUGH: &CStr = c"goblin-applied-through";
/// The database (SELECT) a record's command applies to, in decimal; only on records of a
/// database other than 0 (a record without it applies to database 0, whoever wrote it).
pub const HEADER_DB: &CStr = c"goblin-db";
/// The lineage this record's lineage continues, and the logical offset it continues it from
/// (`Replication::previous`): only on the first record a restarted primary journals under its
/// successor lineage, so that a replay that reaches it from the predecessor's records follows
/// the history across the change of id.
pub const HEADER_PREVIOUS_ID: &CStr = c"goblin-previous-replication-id";
pub const HEADER_PREVIOUS_OFFSET: &CStr = c"goblin-previous-replication-offset";
/// The record contract's version, in `goblin-replication-version`.
pub const RECORD_VERSION: &str = "1";

/// How long the sender keeps librdkafka's linger lifted at most per group (broker ack mode). A
/// group is sent at once (the wake-up reaches librdkafka's broker thread in microseconds); the
/// bound only ends the wait for its reports when the broker is slow or away, after which
/// librdkafka's own retries (whose records are past the linger anyway) carry on.
const TRIGGER_WINDOW_MS: i32 = 100;

/// How long the sender waits before retrying a record that found librdkafka's queue full (the
/// serving of delivery reports frees room).
const QUEUE_FULL_RETRY: Duration = Duration::from_micros(200);

/// Emptied buffers kept for reuse at most (the rest are freed: a burst of groups must not
/// keep its memory).
const SPARE_MAX: usize = 4;

/// How long the hurry thread lifts librdkafka's linger at a time (see `hurry_thread`).
const HURRY_WINDOW_MS: i32 = 1;

/// At most this many windows per hurry (a broker that is away is left to the linger).
const HURRY_WINDOWS_MAX: u32 = 50;

/// How long the sender waits at most in queued ack mode for a delivery report while it has no
/// records to produce (a hand-over or a stop interrupts the wait at once).
const IDLE_REPORTS_WAIT: Duration = Duration::from_millis(100);

/// How long the sender waits at most for a delivery report when librdkafka's queue is full in
/// queued ack mode (each report served frees room).
const QUEUE_FULL_REPORTS_WAIT: Duration = Duration::from_millis(1);

/// What a record carries besides its value and key.
#[derive(Clone, Copy)]
pub struct Stamp {
    /// The logical offset (`goblin-replication-offset`).
    pub logical: u64,
    /// `goblin-applied-through`.
    pub applied_through: i64,
    /// The record's Kafka timestamp, ms since the epoch: its commit turn's time (0 would let
    /// librdkafka read its clock when the record is produced).
    pub timestamp_ms: i64,
    /// The database its command applies to (`goblin-db`, written when not 0).
    pub db: u32,
}

/// Records to produce, in order: values and keys in one buffer.
#[derive(Default)]
pub struct Staged {
    bytes: Vec<u8>,
    records: Vec<StagedRecord>,
    /// The `goblin-replication-id` text of the records from index `.0` on (a lineage changes
    /// rarely: one entry per run of records).
    lineages: Vec<(usize, String)>,
    /// The record (an index) that names its lineage's predecessor, and the predecessor's id
    /// and offset as header text (`HEADER_PREVIOUS_ID`, `HEADER_PREVIOUS_OFFSET`).
    predecessor: Option<(usize, String, String)>,
}

struct StagedRecord {
    stamp: Stamp,
    /// The value is `bytes[start..start + value_len]`, the key (if any) follows it.
    start: usize,
    value_len: usize,
    key_len: Option<usize>,
}

impl Staged {
    /// Stages a record: `value`, then the key `key` appends (returning whether there is one).
    /// Returns the bytes the record takes (value and key).
    pub fn push(
        &mut self,
        lineage: &str,
        stamp: Stamp,
        value: &[u8],
        key: impl FnOnce(&mut Vec<u8>) -> bool,
    ) -> usize {
        if self.lineages.last().is_none_or(|(_, l)| l != lineage) {
            self.lineages.push((self.records.len(), lineage.to_string()));
        }
        let start = self.bytes.len();
        self.bytes.extend_from_slice(value);
        let key_len = key(&mut self.bytes).then(|| self.bytes.len() - start - value.len());
        self.records.push(StagedRecord { stamp, start, value_len: value.len(), key_len });
        self.bytes.len() - start
    }

    /// Marks the last record pushed as the one that names its lineage's predecessor.
    pub fn name_predecessor(&mut self, id: &str, offset: u64) {
        if let Some(last) = self.records.len().checked_sub(1) {
            self.predecessor = Some((last, id.to_string(), offset.to_string()));
        }
    }

    /// Takes back the last record pushed (one too large to journal: the server stops).
    pub fn pop(&mut self) {
        if let Some(r) = self.records.pop() {
            if self.predecessor.as_ref().is_some_and(|(i, _, _)| *i == self.records.len()) {
                self.predecessor = None;
            }
            self.bytes.truncate(r.start);
            if self.lineages.last().is_some_and(|(from, _)| *from == self.records.len()) {
                self.lineages.pop();
            }
        }
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.records.clear();
        self.lineages.clear();
        self.predecessor = None;
    }

    /// Produces every record, in order. A record that finds librdkafka's queue full is retried
    /// after `on_full` (which makes room, or gives up with an error). Err: the first failure.
    pub fn produce_all(
        &self,
        client: &Client,
        topic: &str,
        on_full: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), String> {
        let mut lineage = 0;
        for (i, r) in self.records.iter().enumerate() {
            while self.lineages.get(lineage + 1).is_some_and(|(from, _)| *from <= i) {
                lineage += 1;
            }
            let value = &self.bytes[r.start..r.start + r.value_len];
            let key = r.key_len.map(|n| &self.bytes[r.start + r.value_len..r.start + r.value_len + n]);
            let Stamp { logical, applied_through, timestamp_ms, db } = r.stamp;
            let mut offset_buf = [0u8; 20];
            let offset = signed_decimal_text(&mut offset_buf, false, logical);
            let mut through_buf = [0u8; 20];
            let through = decimal_text(&mut through_buf, applied_through);
            let mut db_buf = [0u8; 20];
            let db_text = signed_decimal_text(&mut db_buf, false, db as u64);
            let mut headers = [
                (HEADER_VERSION, RECORD_VERSION.as_bytes()),
                (HEADER_ID, self.lineages[lineage].1.as_bytes()),
                (HEADER_OFFSET, offset),
                (HEADER_APPLIED_THROUGH, through),
                (HEADER_DB, db_text),
                (HEADER_PREVIOUS_ID, b"".as_slice()),
                (HEADER_PREVIOUS_OFFSET, b"".as_slice()),
            ];
            let mut n = if db == 0 { 4 } else { 5 };
            if let Some((_, id, at)) = self.predecessor.as_ref().filter(|(at, _, _)| *at == i) {
                headers[n] = (HEADER_PREVIOUS_ID, id.as_bytes());
                headers[n + 1] = (HEADER_PREVIOUS_OFFSET, at.as_bytes());
                n += 2;
            }
            let headers = &headers[..n];
            loop {
                match client.produce(value, key, logical, headers, timestamp_ms) {
                    Ok(()) => break,
                    Err(ProduceError::QueueFull) => on_full()?,
                    Err(ProduceError::Other(e)) => {
                        return Err(format!("cannot journal logical offset {logical} to topic {topic}: {e}"))
                    }
                }
            }
        }
        Ok(())
    }
}

/// `v` in decimal, written into `buf` (an i64 takes at most 20 bytes with its sign).
pub fn decimal_text(buf: &mut [u8; 20], v: i64) -> &[u8] {
    signed_decimal_text(buf, v < 0, v.unsigned_abs())
}

/// `n`, preceded by '-' if `negative`, in decimal, written into `buf`.
pub fn signed_decimal_text(buf: &mut [u8; 20], negative: bool, mut n: u64) -> &[u8] {
    debug_assert!(!negative || n <= 1 << 63);
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if negative {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

#[derive(Default)]
struct Inbox {
    /// Buffers handed over and not yet taken, oldest first.
    groups: VecDeque<Staged>,
    /// Emptied buffers, for the server thread to fill again (their capacity is kept).
    spare: Vec<Staged>,
    /// The thread waits on the condition variable (a hand-over must wake it).
    parked: bool,
    stop: bool,
}

struct Shared {
    inbox: Mutex<Inbox>,
    wake: Condvar,
    /// See the module's invariants.
    busy: AtomicBool,
    /// Set by the server thread when it waits for the sender to be idle: the sender then
    /// writes to the journal's wake-up pipe once it is.
    waiting: AtomicBool,
    /// Set at shutdown: a record that finds the queue full is given up.
    stop: AtomicBool,
    failed: Mutex<Option<String>>,
    /// Queued ack mode: the hurry thread's request, (the logical offset to hurry through,
    /// stop), and its wake-up.
    hurry: Mutex<(Option<u64>, bool)>,
    hurry_wake: Condvar,
    /// Queued ack mode: the delivery reports this thread serves, after each group and while it
    /// has none (waiting on librdkafka's queue then: `hand` and `drop` interrupt the wait).
    /// None: broker ack mode, where it asks for each group to be sent instead.
    reports: Option<Arc<Reports>>,
}

impl Shared {
    /// Wakes the thread parked for want of records.
    fn unpark(&self) {
        match &self.reports {
            Some(reports) => reports.interrupt(),
            None => self.wake.notify_one(),
        }
    }
}

/// The sender thread's handle (server thread only).
pub struct Sender {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Queued ack mode: the hurry thread (see `hurry`).
    hurrier: Option<std::thread::JoinHandle<()>>,
}

/// Queued ack mode's hurry thread. A client waiting in WAITAOF should not wait out
/// librdkafka's linger, and only `rd_kafka_flush()` lifts it. In event mode a flush returns
/// when every record's report has been served, or at its timeout; the sender thread serves
/// the reports, so it cannot be the one flushing (it would hold each acknowledgement back
/// until the window closed). This thread lifts the linger a window at a time, while the
/// sender serves the reports as they come, until the record asked about is reported. One
/// produce request is in flight at most, so records queued behind it go only after its
/// response: hence windows, not one.
fn hurry_thread(client: Client, shared: Arc<Shared>) {
    let Some(reports) = shared.reports.clone() else { return };
    loop {
        let target = {
            let mut h = shared.hurry.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if h.1 {
                    return;
                }
                if let Some(t) = h.0 {
                    break t;
                }
                h = shared.hurry_wake.wait(h).unwrap_or_else(|e| e.into_inner());
            }
        };
        let mut windows = 0;
        while reports.through() < target as i64 && windows < HURRY_WINDOWS_MAX {
            client.flush(HURRY_WINDOW_MS);
            windows += 1;
        }
        let mut h = shared.hurry.lock().unwrap_or_else(|e| e.into_inner());
        // A later request raised the target meanwhile: keep going for it.
        if h.0 == Some(target) || windows >= HURRY_WINDOWS_MAX {
            h.0 = None;
        }
    }
}

impl Sender {
    /// Starts the thread. `wake` is the journal's wake-up pipe (written on a failure, and when
    /// the server thread waits for the sender); `reports`: queued ack mode's delivery reports,
    /// which the thread serves (None: broker ack mode).
    pub fn start(
        client: Client,
        topic: String,
        wake: OwnedFd,
        reports: Option<Arc<Reports>>,
    ) -> std::io::Result<Sender> {
        let shared = Arc::new(Shared {
            inbox: Mutex::new(Inbox::default()),
            wake: Condvar::new(),
            busy: AtomicBool::new(false),
            waiting: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            failed: Mutex::new(None),
            hurry: Mutex::new((None, false)),
            hurry_wake: Condvar::new(),
            reports,
        });
        let hurrier = match &shared.reports {
            Some(_) => {
                let (client, shared) = (client.sibling(), shared.clone());
                Some(
                    std::thread::Builder::new()
                        .name("journal-hurry".into())
                        .spawn(move || hurry_thread(client, shared))?,
                )
            }
            None => None,
        };
        let s = shared.clone();
        let ping = move || {
            // SAFETY: a one-byte write to our own non-blocking descriptor; a full pipe already
            // holds a wake-up.
            unsafe { libc::write(wake.as_raw_fd(), b"s".as_ptr().cast(), 1) };
        };
        let thread = std::thread::Builder::new().name("journal-sender".into()).spawn(move || {
            let mut failed = false;
            loop {
                let mut group = {
                    let mut inbox = s.inbox.lock().unwrap_or_else(|e| e.into_inner());
                    loop {
                        if let Some(g) = inbox.groups.pop_front() {
                            break g;
                        }
                        if inbox.stop {
                            return;
                        }
                        inbox.parked = true;
                        inbox = match &s.reports {
                            Some(reports) => {
                                // Wait for a report, or for `hand` or `drop` to interrupt the
                                // wait (an interruption that comes before the wait starts
                                // still ends it: librdkafka keeps the request on the queue).
                                drop(inbox);
                                reports.serve(IDLE_REPORTS_WAIT);
                                s.inbox.lock().unwrap_or_else(|e| e.into_inner())
                            }
                            None => s.wake.wait(inbox).unwrap_or_else(|e| e.into_inner()),
                        };
                        inbox.parked = false;
                    }
                };
                if !failed {
                    let mut on_full = || {
                        if s.stop.load(Ordering::Relaxed) {
                            return Err(format!(
                                "cannot journal to topic {topic}: the local queue stayed full until shutdown"
                            ));
                        }
                        match &s.reports {
                            Some(reports) => reports.serve(QUEUE_FULL_REPORTS_WAIT),
                            None => std::thread::sleep(QUEUE_FULL_RETRY),
                        }
                        Ok(())
                    };
                    match group.produce_all(&client, &topic, &mut on_full) {
                        Ok(()) => match &s.reports {
                            Some(reports) => reports.serve(Duration::ZERO),
                            None => client.flush(TRIGGER_WINDOW_MS),
                        },
                        Err(e) => {
                            failed = true;
                            s.failed.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
                            ping();
                        }
                    }
                }
                group.clear();
                let idle = {
                    let mut inbox = s.inbox.lock().unwrap_or_else(|e| e.into_inner());
                    if inbox.spare.len() < SPARE_MAX {
                        inbox.spare.push(group);
                    }
                    let idle = inbox.groups.is_empty();
                    if idle {
                        s.busy.store(false, Ordering::SeqCst);
                    }
                    idle
                };
                if idle && s.waiting.swap(false, Ordering::SeqCst) {
                    ping();
                }
            }
        })?;
        Ok(Sender { shared, thread: Some(thread), hurrier })
    }

    /// An empty buffer to stage records in (one the sender has emptied, when there is one).
    pub fn spare(&self) -> Staged {
        self.shared.inbox.lock().unwrap_or_else(|e| e.into_inner()).spare.pop().unwrap_or_default()
    }

    /// Hands `group` over: its records are produced after every record handed over before.
    pub fn hand(&self, group: Staged) {
        let mut inbox = self.shared.inbox.lock().unwrap_or_else(|e| e.into_inner());
        self.shared.busy.store(true, Ordering::SeqCst);
        inbox.groups.push_back(group);
        if inbox.parked {
            self.shared.unpark();
        }
    }

    /// Queued ack mode: asks for the records handed over so far (and those the server thread
    /// produced itself), through logical offset `through`, to be sent without waiting out
    /// librdkafka's linger.
    pub fn hurry(&self, through: u64) {
        let mut h = self.shared.hurry.lock().unwrap_or_else(|e| e.into_inner());
        h.0 = Some(h.0.map_or(through, |t| t.max(through)));
        self.shared.hurry_wake.notify_one();
    }

    /// Whether the sender still has records to produce (or, in broker ack mode, a group whose
    /// send it still holds open); nobody is woken when it is done.
    pub fn is_busy(&self) -> bool {
        self.shared.busy.load(Ordering::SeqCst)
    }

    /// As `is_busy`, but when the sender is busy, the server thread will be woken through the
    /// journal's pipe once it is idle.
    pub fn busy(&self) -> bool {
        if !self.shared.busy.load(Ordering::SeqCst) {
            return false;
        }
        self.shared.waiting.store(true, Ordering::SeqCst);
        // The sender may have gone idle between the two loads: then it may not have seen
        // `waiting`.
        if !self.shared.busy.load(Ordering::SeqCst) {
            self.shared.waiting.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// The failure that stopped the sender, if one did.
    pub fn failed(&self) -> Option<String> {
        self.shared.failed.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.inbox.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        self.shared.unpark();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.shared.hurry.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.shared.hurry_wake.notify_one();
        if let Some(t) = self.hurrier.take() {
            let _ = t.join();
        }
    }
}
