//! The journal's librdkafka producer, driven through the C API in event mode.
//!
//! Delivery reports arrive as events on the producer's main queue, one event per produce
//! response with all of its records: no callback runs on librdkafka's threads, and no
//! per-record callback runs at all. In broker ack mode the server thread takes them when the
//! queue's wake-up pipe fires (`kafka::Wakeup`); in queued ack mode the sender thread does
//! (`reports`).
//!
//! Records are handed to librdkafka by the journal's sender thread through a [`Client`]
//! (`sender`); this module's [`Producer`] keeps the client and serves its events.

use rdkafka::bindings as rd;
use rdkafka::config::ClientConfig;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::fd::OwnedFd;
use std::time::Duration;

use super::reports::Reports;
use super::sender::Sender;
use std::sync::Arc;

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

/// The producer handle (server thread only; records are produced on the sender thread).
pub struct Producer {
    rk: *mut rd::rd_kafka_t,
    topic: String,
    /// The main queue, where delivery reports and errors arrive.
    events: Events,
    /// The thread that produces most records, and in queued ack mode serves the delivery
    /// reports (started right after creation; joined in Drop, before the client is
    /// destroyed).
    sender: Option<Sender>,
    /// Queued ack mode: the reports the sender thread served, summed.
    reports: Option<Arc<Reports>>,
    /// The server thread's own way to produce (small groups, see `kafka::Journal::end_turn`).
    inline: Option<Client>,
}

/// What records are produced through: the client and a handle on the topic. librdkafka's
/// produce and flush calls are thread-safe; each thread that produces has its own `Client`
/// (the sender thread, and the server thread for small groups), and every `Client` is
/// dropped before the client is destroyed (`Producer::drop`).
pub struct Client {
    rk: *mut rd::rd_kafka_t,
    topic: CString,
    /// The topic handle, opened by the first record (see `topic_handle`).
    rkt: std::cell::Cell<*mut rd::rd_kafka_topic_t>,
}

// SAFETY: see above; a `Client` is used by one thread at a time (it is not `Sync`).
unsafe impl Send for Client {}

/// The producer's main queue, where its delivery reports and errors arrive, and the client
/// (for a fatal error's text). Served by one thread at a time: the server thread, or in
/// queued ack mode the sender thread; the handle is released by `Producer::drop`, after
/// that thread is joined.
#[derive(Clone, Copy)]
pub struct Events {
    rk: *mut rd::rd_kafka_t,
    queue: *mut rd::rd_kafka_queue_t,
}

// SAFETY: librdkafka's queue and client handles are thread-safe; see above for their life.
// Shared (queued ack mode, `reports::Reports`), the queue is still served by the sender thread
// alone; the server thread only interrupts its wait (`wake`).
unsafe impl Send for Events {}
unsafe impl Sync for Events {}

impl Events {
    /// Makes a wait for the queue's next event return now, or the next wait to start if none
    /// is under way (the sender thread's wake-up in queued ack mode).
    pub fn wake(&self) {
        // SAFETY: the queue handle is live (see the type's comment).
        unsafe { rd::rd_kafka_queue_yield(self.queue) };
    }
}

/// Serves up to `max` of `events`, waiting up to `wait` for the first: delivery reports go to
/// `delivered`, errors are logged, and a fatal error is returned. Returns the events served.
pub fn serve_events(
    events: Events,
    max: usize,
    wait: Duration,
    mut delivered: impl FnMut(Delivery),
) -> Result<usize, String> {
    let mut timeout = wait.as_millis().min(i32::MAX as u128) as c_int;
    for served in 0..max {
        // SAFETY: the queue handle is valid until the producer drops.
        let ev = unsafe { rd::rd_kafka_queue_poll(events.queue, timeout) };
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
                        rd::rd_kafka_fatal_error(events.rk, buf.as_mut_ptr(), buf.len());
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
        if topic.contains('\0') {
            return Err("the topic name holds a NUL byte".to_string());
        }
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
        let events = Events { rk, queue: unsafe { rd::rd_kafka_queue_get_main(rk) } };
        let inline = Client { rk, topic: CString::new(topic).unwrap_or_default(), rkt: Default::default() };
        Ok(Producer {
            rk,
            topic: topic.to_string(),
            events,
            sender: None,
            reports: None,
            inline: Some(inline),
        })
    }

    /// Starts the sender thread (see `sender`): `wake` is the journal's wake-up pipe. In broker
    /// ack mode (`send_each_group`) the thread asks for each group to be sent; in queued ack
    /// mode it serves the delivery reports, up to `max_events` per sum.
    pub fn start_sender(
        &mut self,
        wake: OwnedFd,
        send_each_group: bool,
        max_events: usize,
    ) -> std::io::Result<()> {
        let topic = CString::new(self.topic.as_str()).map_err(std::io::Error::other)?;
        let client = Client { rk: self.rk, topic, rkt: Default::default() };
        if !send_each_group {
            let reports = Reports::new(self.events, self.topic.clone(), wake.try_clone()?, max_events);
            self.reports = Some(Arc::new(reports));
        }
        self.sender = Some(Sender::start(client, self.topic.clone(), wake, self.reports.clone())?);
        Ok(())
    }

    /// The sender thread's handle.
    pub fn sender(&self) -> &Sender {
        self.sender.as_ref().expect("the sender starts with the producer")
    }

    /// The server thread's own client.
    pub fn inline(&self) -> &Client {
        self.inline.as_ref().expect("dropped only with the producer")
    }

    /// The client handle (to attach the wake-up pipe to the main queue).
    pub fn native(&self) -> *mut rd::rd_kafka_t {
        self.rk
    }

    /// Queued ack mode: the reports the sender thread served.
    pub fn reports(&self) -> Option<&Reports> {
        self.reports.as_deref()
    }

    /// Serves up to `max` events on this thread (broker ack mode), waiting up to
    /// `wait` for the first (see `serve_events`).
    pub fn serve(
        &self,
        max: usize,
        wait: Duration,
        delivered: impl FnMut(Delivery),
    ) -> Result<usize, String> {
        serve_events(self.events, max, wait, delivered)
    }

    /// Keeps librdkafka's linger lifted for up to `bound` (blocking this thread: shutdown only),
    /// or until every record is reported and its report served.
    pub fn flush_for(&self, bound: Duration) {
        // SAFETY: the client is live; in event mode flush only waits, it serves nothing.
        unsafe { rd::rd_kafka_flush(self.rk, bound.as_millis().min(i32::MAX as u128) as c_int) };
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        // The sender thread and the topic handles use the client: they go first.
        self.sender.take();
        self.reports.take();
        self.inline.take();
        // SAFETY: each handle is released once, the client last.
        unsafe {
            rd::rd_kafka_queue_destroy(self.events.queue);
            rd::rd_kafka_destroy(self.rk);
        }
    }
}

impl Client {
    /// Another client of the same producer, for another thread.
    pub fn sibling(&self) -> Client {
        Client { rk: self.rk, topic: self.topic.clone(), rkt: Default::default() }
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

    /// Keeps librdkafka's linger lifted for up to `ms`, or until every record is reported and
    /// its report served (by the server thread).
    pub fn flush(&self, ms: i32) {
        // SAFETY: the client is live; in event mode flush only waits, it serves nothing.
        unsafe { rd::rd_kafka_flush(self.rk, ms) };
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if !self.rkt.get().is_null() {
            // SAFETY: released once, while the client is still live.
            unsafe { rd::rd_kafka_topic_destroy(self.rkt.get()) };
        }
    }
}
