//! The journal's librdkafka producer, driven through the C API in event mode.
//!
//! Delivery reports arrive as events on the producer's main queue, one event per produce
//! response with all of its records, and the server thread takes them when the queue's
//! wake-up pipe fires (`kafka::Wakeup`): no callback runs on any other thread, and no
//! per-record callback runs at all.
//!
//! **The send trigger** (`--kafka-ack-mode broker`). Replies wait for the broker there, and the
//! seed allows one produce request in flight. librdkafka only sends a partition's records when
//! `linger.ms` has passed since the first of them, when a batch limit is reached, or while the
//! application is inside `rd_kafka_flush()`. A linger makes every lone write wait for it (its
//! broker thread sleeps in whole milliseconds: a 0.5 ms linger took a single client's write to
//! 1.6 ms), and no linger at all makes the broker thread poll its socket in a busy loop while
//! records wait behind the in-flight request. So in broker mode goblin-core forms the groups
//! itself (`kafka::Journal`): it hands librdkafka a group only when the previous one is fully
//! acknowledged, with a long linger as a backstop, and then asks for the group to go out now.
//! Asking is `rd_kafka_flush()`, which blocks until every record is reported, so a helper
//! thread calls it ([`Trigger`]); while it is inside, librdkafka treats the linger as elapsed.
//! The next group is handed over only after the helper has left `flush()` (else records would
//! be sent one by one as they are handed over, splitting the group); the helper writes to the
//! journal's wake-up pipe when the server thread is waiting for that.

use rdkafka::bindings as rd;
use rdkafka::config::ClientConfig;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// One record's delivery report.
pub struct Delivery {
    /// The logical offset the record carries (its opaque).
    pub logical: u64,
    /// Its broker offset (when delivered).
    pub offset: i64,
    /// Its value's length.
    pub len: usize,
    /// Why it was refused for good, if it was.
    pub error: Option<String>,
}

/// Why a record could not be handed to librdkafka.
pub enum ProduceError {
    /// The local queue is full (`queue.buffering.max.*`): serve reports and retry.
    QueueFull,
    Other(String),
}

/// The producer handle (server thread only; the trigger thread only calls `rd_kafka_flush`).
pub struct Producer {
    rk: *mut rd::rd_kafka_t,
    topic: CString,
    /// The topic handle, opened by the first record (see `topic_handle`).
    rkt: std::cell::Cell<*mut rd::rd_kafka_topic_t>,
    /// The main queue, where delivery reports and errors arrive.
    events: *mut rd::rd_kafka_queue_t,
    trigger: Option<Trigger>,
}

/// librdkafka's own log lines are not goblin-core's: its errors that matter reach the server
/// as error events (logged, or fatal) and as delivery reports. Without this callback
/// librdkafka would print them to stderr in its own format.
unsafe extern "C" fn quiet_log(_: *const rd::rd_kafka_t, _: c_int, _: *const c_char, _: *const c_char) {}

fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: librdkafka returns NUL-terminated strings that live at least as long as the
    // object they were taken from, which the callers still hold.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

impl Producer {
    /// Creates the producer for `topic` from `config`.
    pub fn new(config: &ClientConfig, topic: &str) -> Result<Producer, String> {
        let native = config.create_native_config().map_err(|e| e.to_string())?;
        let topic_c = CString::new(topic).map_err(|_| "the topic name holds a NUL byte".to_string())?;
        let mut err = [0 as c_char; 512];
        // SAFETY: `native` is a valid configuration; rd_kafka_new takes it over on success only
        // (hence the forget below), and writes a NUL-terminated error into `err` on failure.
        let rk = unsafe {
            rd::rd_kafka_conf_set_events(native.ptr(), rd::RD_KAFKA_EVENT_DR | rd::RD_KAFKA_EVENT_ERROR);
            rd::rd_kafka_conf_set_log_cb(native.ptr(), Some(quiet_log));
            rd::rd_kafka_new(
                rd::rd_kafka_type_t::RD_KAFKA_PRODUCER,
                native.ptr(),
                err.as_mut_ptr(),
                err.len(),
            )
        };
        if rk.is_null() {
            return Err(text(err.as_ptr()));
        }
        std::mem::forget(native);
        // SAFETY: rk is a live producer; the handle is released in Drop, before it.
        let events = unsafe { rd::rd_kafka_queue_get_main(rk) };
        Ok(Producer {
            rk,
            topic: topic_c,
            rkt: std::cell::Cell::new(std::ptr::null_mut()),
            events,
            trigger: None,
        })
    }

    /// The topic handle. Opened by the first record, not at creation: opening it starts a
    /// leader query whose answer retires the bootstrap connection, and if that happens before
    /// the idempotent producer has its producer id, librdkafka retries the id only after
    /// 500 ms, holding the first records that long.
    fn topic_handle(&self) -> Result<*mut rd::rd_kafka_topic_t, ProduceError> {
        if self.rkt.get().is_null() {
            // SAFETY: rk is live; the handle is released in Drop.
            let rkt = unsafe { rd::rd_kafka_topic_new(self.rk, self.topic.as_ptr(), std::ptr::null_mut()) };
            if rkt.is_null() {
                return Err(ProduceError::Other(format!(
                    "cannot open topic {}",
                    self.topic.to_string_lossy()
                )));
            }
            self.rkt.set(rkt);
        }
        Ok(self.rkt.get())
    }

    /// Broker ack mode: starts the trigger thread, which writes to `wake` (the journal's
    /// wake-up pipe) when the server thread waits for it to be free.
    pub fn start_trigger(&mut self, wake: OwnedFd) -> std::io::Result<()> {
        self.trigger = Some(Trigger::start(self.rk, wake)?);
        Ok(())
    }

    /// The client handle (to attach the wake-up pipe to the main queue).
    pub fn native(&self) -> *mut rd::rd_kafka_t {
        self.rk
    }

    /// Hands one record to librdkafka (it copies value, key and headers). `headers` are
    /// (NUL-terminated name, value); `timestamp_ms` 0 means now.
    pub fn produce(
        &self,
        value: &[u8],
        key: Option<&[u8]>,
        logical: u64,
        headers: &[(&CStr, &[u8])],
        timestamp_ms: i64,
    ) -> Result<(), ProduceError> {
        let rkt = self.topic_handle()?;
        use rd::rd_kafka_vtype_t as T;
        fn vu(vtype: T, u: rd::rd_kafka_vu_s__bindgen_ty_1) -> rd::rd_kafka_vu_t {
            rd::rd_kafka_vu_t { vtype, u }
        }
        type U = rd::rd_kafka_vu_s__bindgen_ty_1;
        type Mem = rd::rd_kafka_vu_s__bindgen_ty_1__bindgen_ty_1;
        // SAFETY: a fresh header list; every add copies name and value.
        let hdrs = unsafe { rd::rd_kafka_headers_new(headers.len()) };
        for (name, v) in headers {
            // SAFETY: as above; name and value are slices with their lengths (no strlen).
            let name_len = name.to_bytes().len() as isize;
            unsafe {
                rd::rd_kafka_header_add(hdrs, name.as_ptr(), name_len, v.as_ptr().cast(), v.len() as isize)
            };
        }
        let mut vus = [vu(T::RD_KAFKA_VTYPE_END, U { i: 0 }); 8];
        let mut n = 0;
        let mut push = |v: rd::rd_kafka_vu_t| {
            vus[n] = v;
            n += 1;
        };
        push(vu(T::RD_KAFKA_VTYPE_RKT, U { rkt }));
        push(vu(T::RD_KAFKA_VTYPE_PARTITION, U { i32_: 0 }));
        push(vu(
            T::RD_KAFKA_VTYPE_VALUE,
            U { mem: Mem { ptr: value.as_ptr() as *mut c_void, size: value.len() } },
        ));
        if let Some(k) = key {
            push(vu(T::RD_KAFKA_VTYPE_KEY, U { mem: Mem { ptr: k.as_ptr() as *mut c_void, size: k.len() } }));
        }
        push(vu(T::RD_KAFKA_VTYPE_OPAQUE, U { ptr: logical as usize as *mut c_void }));
        push(vu(T::RD_KAFKA_VTYPE_MSGFLAGS, U { i: rd::RD_KAFKA_MSG_F_COPY }));
        push(vu(T::RD_KAFKA_VTYPE_HEADERS, U { headers: hdrs }));
        if timestamp_ms != 0 {
            push(vu(T::RD_KAFKA_VTYPE_TIMESTAMP, U { i64_: timestamp_ms }));
        }
        // SAFETY: every pointer in `vus` is valid for the call (librdkafka copies what it keeps,
        // and owns `hdrs` on success).
        let error = unsafe { rd::rd_kafka_produceva(self.rk, vus.as_ptr(), n) };
        if error.is_null() {
            return Ok(());
        }
        // SAFETY: on failure the headers and the error object are ours to release.
        unsafe {
            rd::rd_kafka_headers_destroy(hdrs);
            let code = rd::rd_kafka_error_code(error);
            let message = text(rd::rd_kafka_error_string(error));
            rd::rd_kafka_error_destroy(error);
            if code == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__QUEUE_FULL {
                Err(ProduceError::QueueFull)
            } else {
                Err(ProduceError::Other(message))
            }
        }
    }

    /// Serves up to `max` events, waiting up to `wait` for the first: delivery reports go to
    /// `delivered`, errors are logged, and a fatal error is returned. Returns the events served.
    pub fn serve(
        &self,
        max: usize,
        wait: Duration,
        mut delivered: impl FnMut(Delivery),
    ) -> Result<usize, String> {
        let mut timeout = wait.as_millis().min(i32::MAX as u128) as c_int;
        for served in 0..max {
            // SAFETY: the queue handle is valid until drop.
            let ev = unsafe { rd::rd_kafka_queue_poll(self.events, timeout) };
            if ev.is_null() {
                return Ok(served);
            }
            timeout = 0;
            // SAFETY: `ev` is a live event until destroyed below; its messages live as long.
            let fatal = unsafe {
                match rd::rd_kafka_event_type(ev) {
                    rd::RD_KAFKA_EVENT_DR => {
                        loop {
                            let m = rd::rd_kafka_event_message_next(ev);
                            if m.is_null() {
                                break;
                            }
                            let r = &*m;
                            delivered(Delivery {
                                logical: r._private as usize as u64,
                                offset: r.offset,
                                len: r.len,
                                // From the code: `rd_kafka_message_errstr` would return the
                                // payload, which a delivery report's message holds as its value.
                                error: (r.err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR)
                                    .then(|| text(rd::rd_kafka_err2str(r.err))),
                            });
                        }
                        None
                    }
                    rd::RD_KAFKA_EVENT_ERROR => {
                        let message = text(rd::rd_kafka_event_error_string(ev));
                        if rd::rd_kafka_event_error_is_fatal(ev) != 0 {
                            let mut buf = [0 as c_char; 512];
                            rd::rd_kafka_fatal_error(self.rk, buf.as_mut_ptr(), buf.len());
                            Some(format!("fatal producer error: {}", text(buf.as_ptr())))
                        } else {
                            tracing::warn!("Kafka journal: {message}");
                            None
                        }
                    }
                    _ => None,
                }
            };
            // SAFETY: destroyed once; this also releases the reported messages.
            unsafe { rd::rd_kafka_event_destroy(ev) };
            if let Some(e) = fatal {
                return Err(e);
            }
        }
        Ok(max)
    }

    /// Keeps librdkafka's linger lifted for up to `bound` (blocking this thread: shutdown only),
    /// or until every record is reported and its report served.
    pub fn flush_for(&self, bound: Duration) {
        // SAFETY: the client is live; in event mode flush only waits, it serves nothing.
        unsafe { rd::rd_kafka_flush(self.rk, bound.as_millis().min(i32::MAX as u128) as c_int) };
    }

    /// Broker mode: whether the trigger thread is still inside `flush()` for the last group.
    pub fn trigger_busy(&self) -> bool {
        self.trigger.as_ref().is_some_and(|t| t.busy())
    }

    /// Broker mode: asks for the records handed over since the last call to go out now.
    pub fn fire(&self) {
        if let Some(t) = &self.trigger {
            t.fire();
        }
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        // The trigger thread calls into the client: it goes first.
        self.trigger.take();
        // SAFETY: each handle is released once, the client last.
        unsafe {
            rd::rd_kafka_queue_destroy(self.events);
            if !self.rkt.get().is_null() {
                rd::rd_kafka_topic_destroy(self.rkt.get());
            }
            rd::rd_kafka_destroy(self.rk);
        }
    }
}

/// How long the trigger thread keeps the linger lifted at most per group. A group is sent at
/// once (the wake-up reaches librdkafka's broker thread in microseconds); the bound only ends
/// the wait for its reports when the broker is slow or away, after which librdkafka's own
/// retries (whose records are past the linger anyway) carry on.
const TRIGGER_WINDOW_MS: c_int = 100;

#[derive(Clone, Copy, PartialEq)]
enum Order {
    Idle,
    Fire,
    Stop,
}

struct TriggerShared {
    order: Mutex<Order>,
    wake: Condvar,
    /// Set by the server thread when it fires, cleared by the helper once out of `flush()`.
    busy: AtomicBool,
    /// Set by the server thread when it has a group to hand over and the helper is busy: the
    /// helper then writes to the journal's wake-up pipe as it leaves `flush()`.
    waiting: AtomicBool,
}

/// The helper thread that calls `rd_kafka_flush()` for each group (see the module comment).
struct Trigger {
    shared: Arc<TriggerShared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The client pointer, handed to the helper thread: librdkafka's flush is thread-safe, and
/// the thread is joined before the client is destroyed.
struct Client(*mut rd::rd_kafka_t);
// SAFETY: see above.
unsafe impl Send for Client {}

impl Trigger {
    fn start(rk: *mut rd::rd_kafka_t, wake: OwnedFd) -> std::io::Result<Trigger> {
        let shared = Arc::new(TriggerShared {
            order: Mutex::new(Order::Idle),
            wake: Condvar::new(),
            busy: AtomicBool::new(false),
            waiting: AtomicBool::new(false),
        });
        let s = shared.clone();
        let client = Client(rk);
        let thread = std::thread::Builder::new().name("journal-trigger".into()).spawn(move || {
            let client = client;
            loop {
                {
                    let mut order = s.order.lock().unwrap_or_else(|e| e.into_inner());
                    while *order == Order::Idle {
                        order = s.wake.wait(order).unwrap_or_else(|e| e.into_inner());
                    }
                    if *order == Order::Stop {
                        return;
                    }
                    *order = Order::Idle;
                }
                // SAFETY: the client outlives this thread (joined in Drop before destroy).
                unsafe { rd::rd_kafka_flush(client.0, TRIGGER_WINDOW_MS) };
                s.busy.store(false, Ordering::SeqCst);
                if s.waiting.swap(false, Ordering::SeqCst) {
                    // SAFETY: a one-byte write to our own non-blocking descriptor; a full pipe
                    // already holds a wake-up.
                    unsafe { libc::write(wake.as_raw_fd(), b"t".as_ptr().cast(), 1) };
                }
            }
        })?;
        Ok(Trigger { shared, thread: Some(thread) })
    }

    /// Whether the helper is still inside `flush()`. When it is, the caller will be woken
    /// through the journal's pipe once it is out.
    fn busy(&self) -> bool {
        if !self.shared.busy.load(Ordering::SeqCst) {
            return false;
        }
        self.shared.waiting.store(true, Ordering::SeqCst);
        // The helper may have left between the two loads: then it may not have seen `waiting`.
        if !self.shared.busy.load(Ordering::SeqCst) {
            self.shared.waiting.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    fn fire(&self) {
        self.shared.busy.store(true, Ordering::SeqCst);
        *self.shared.order.lock().unwrap_or_else(|e| e.into_inner()) = Order::Fire;
        self.shared.wake.notify_one();
    }
}

impl Drop for Trigger {
    fn drop(&mut self) {
        *self.shared.order.lock().unwrap_or_else(|e| e.into_inner()) = Order::Stop;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
