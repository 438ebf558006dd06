//! Delivery reports, summed: what the server thread learns from them, and (in queued ack
//! mode) where the sender thread leaves them for it.
//!
//! A delivery report event carries every record of one produce response. Serving it means
//! walking its records and destroying it, which frees each record and its four headers, most
//! of them allocated on the sender thread. In queued ack mode nothing waits for the reports
//! but the bookkeeping, so the sender thread serves them, between the groups it produces and
//! while it has none, and sums them into one [`Reported`], which the server thread takes when
//! woken through the journal's pipe (one wake-up per produce response, not per record). That
//! keeps the reports' walk off the server thread, and the records are freed on the thread that
//! allocated them, where the allocator recycles them in its thread cache instead of passing
//! them back to their arena (a `journal-reports` thread of its own served them before:
//! docs/BENCHMARKS.md). In broker ack mode replies wait for the reports, and a hop before the
//! server thread would add to every write's latency, so there the server thread serves them
//! itself (`producer`).
//!
//! Invariants:
//! - Records of one partition are reported in the order they were produced (idempotent
//!   producer, one request in flight), so a sum keeps everything the server needs: how many,
//!   how many bytes, the highest logical and broker offsets, and the runs of broker offsets.
//! - A summary is merged into the shared one before the pipe is written, so a wake-up always
//!   finds what woke it (or a later sum that includes it).

use super::producer::{serve_events, Delivery, Events};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::Duration;

/// Delivery reports summed (see the module's invariants).
#[derive(Default, Debug, PartialEq)]
pub struct Reported {
    /// Records reported, delivered or refused.
    pub records: u64,
    /// Their value bytes.
    pub bytes: u64,
    /// The highest logical offset the broker acknowledged, and its broker offset.
    pub acked: Option<(u64, i64)>,
    /// The broker offsets of the acknowledged records, as runs (first, last), oldest first.
    pub own: Vec<(i64, i64)>,
    /// The first record refused for good (the server must stop).
    pub refused: Option<String>,
    /// A fatal producer error (the server must stop).
    pub fatal: Option<String>,
}

impl Reported {
    /// Adds one record's report.
    pub fn add(&mut self, d: Delivery, topic: &str) {
        self.records += 1;
        self.bytes += d.len as u64;
        match d.error {
            None => {
                self.acked = Some(match self.acked {
                    Some((l, b)) => (l.max(d.logical), b.max(d.offset)),
                    None => (d.logical, d.offset),
                });
                push_run(&mut self.own, (d.offset, d.offset));
            }
            Some(e) => {
                self.refused.get_or_insert_with(|| {
                    format!(
                        "Kafka refused the record of logical offset {} (topic {topic}, partition 0): {e}",
                        d.logical
                    )
                });
            }
        }
    }

    /// Adds a later sum.
    pub fn merge(&mut self, later: Reported) {
        self.records += later.records;
        self.bytes += later.bytes;
        if let Some((l, b)) = later.acked {
            self.acked = Some(match self.acked {
                Some((l0, b0)) => (l0.max(l), b0.max(b)),
                None => (l, b),
            });
        }
        for run in later.own {
            push_run(&mut self.own, run);
        }
        if self.refused.is_none() {
            self.refused = later.refused;
        }
        if self.fatal.is_none() {
            self.fatal = later.fatal;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0 && self.refused.is_none() && self.fatal.is_none()
    }
}

/// Appends the run `run` to `runs`, joining it to the last run when they touch.
fn push_run(runs: &mut Vec<(i64, i64)>, run: (i64, i64)) {
    match runs.last_mut() {
        Some(last) if last.1 + 1 == run.0 => last.1 = run.1,
        _ => runs.push(run),
    }
}

/// Queued ack mode: the delivery reports the sender thread served, summed for the server
/// thread (see the module's invariants). Shared by the two threads.
pub struct Reports {
    sum: Mutex<Reported>,
    /// The highest logical offset acknowledged in the reports served so far (-1: none), for
    /// the sender's own use (`Sender::hurry`): the server thread learns it from `take`.
    through: std::sync::atomic::AtomicI64,
    events: Events,
    topic: String,
    /// The journal's wake-up pipe, written after every sum added.
    wake: OwnedFd,
    /// At most this many events served per sum.
    max: usize,
}

impl Reports {
    /// `events` is the producer's main queue, `wake` the journal's wake-up pipe.
    pub fn new(events: Events, topic: String, wake: OwnedFd, max: usize) -> Reports {
        Reports { sum: Mutex::new(Reported::default()), through: (-1).into(), events, topic, wake, max }
    }

    /// Serves the events waiting (up to the bound), waiting up to `wait` for the first or until
    /// [`Reports::interrupt`]; adds their sum and wakes the server thread.
    pub fn serve(&self, wait: Duration) {
        let mut sum = Reported::default();
        if let Err(e) = serve_events(self.events, self.max, wait, |d| sum.add(d, &self.topic)) {
            sum.fatal = Some(e);
        }
        if let Some((logical, _)) = sum.acked {
            self.through.fetch_max(logical as i64, std::sync::atomic::Ordering::Relaxed);
        }
        if !sum.is_empty() {
            self.sum.lock().unwrap_or_else(|e| e.into_inner()).merge(sum);
            // SAFETY: a one-byte write to our own non-blocking descriptor; a full pipe already
            // holds a wake-up.
            unsafe { libc::write(self.wake.as_raw_fd(), b"r".as_ptr().cast(), 1) };
        }
    }

    /// The highest logical offset acknowledged in the reports served so far (-1: none).
    pub fn through(&self) -> i64 {
        self.through.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Makes a `serve` that waits (now, or the next one to start) return at once.
    pub fn interrupt(&self) {
        self.events.wake();
    }

    /// Everything reported since the last call.
    pub fn take(&self) -> Reported {
        std::mem::take(&mut *self.sum.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(logical: u64, offset: i64, len: usize) -> Delivery {
        Delivery { logical, offset, len, error: None }
    }

    #[test]
    fn a_sum_of_sums_is_the_sum_of_the_reports() {
        // Split the same reports anywhere: merging the parts gives the whole.
        const REPORTS: [(u64, i64, usize); 5] =
            [(5, 100, 10), (6, 101, 20), (7, 105, 30), (8, 106, 1), (9, 200, 2)];
        let mut whole = Reported::default();
        for (l, o, n) in REPORTS {
            whole.add(ok(l, o, n), "t");
        }
        assert_eq!(whole.records, 5);
        assert_eq!(whole.bytes, 63);
        assert_eq!(whole.acked, Some((9, 200)));
        assert_eq!(whole.own, vec![(100, 101), (105, 106), (200, 200)]);
        for cut in 0..=5 {
            let (mut a, mut b) = (Reported::default(), Reported::default());
            for (i, (l, o, n)) in REPORTS.into_iter().enumerate() {
                if i < cut { &mut a } else { &mut b }.add(ok(l, o, n), "t");
            }
            a.merge(b);
            assert_eq!(a, whole, "cut at {cut}");
        }
    }

    #[test]
    fn the_first_refusal_is_kept_and_counted() {
        let mut sum = Reported::default();
        sum.add(ok(1, 10, 3), "t");
        sum.add(Delivery { logical: 2, offset: -1, len: 4, error: Some("first".into()) }, "t");
        let mut later = Reported::default();
        later.add(Delivery { logical: 3, offset: -1, len: 5, error: Some("second".into()) }, "t");
        sum.merge(later);
        assert_eq!(sum.records, 3);
        assert_eq!(sum.bytes, 12);
        assert_eq!(sum.acked, Some((1, 10)));
        let refused = sum.refused.unwrap();
        assert!(
            refused.contains("logical offset 2") && refused.contains("topic t") && refused.contains("first")
        );
    }
}
