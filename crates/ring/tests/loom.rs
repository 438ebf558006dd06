//! Model checks of the ring under loom: every interleaving (within the preemption bound) of a
//! producer and a consumer, with loom's weak-memory simulation of the atomics and fences.
//! `RUSTFLAGS="--cfg loom" cargo test -p goblin-ring --test loom --release`
//!
//! Checked: bytes arrive complete and in order (loom's UnsafeCell tracking also proves that no
//! byte is read while it is being written: that would be a reported data race), and the
//! sleep/wake protocol never loses a wake-up (a lost one leaves a side asleep forever, which
//! loom reports as a deadlock).
#![cfg(loom)]

use goblin_ring::ring::{Bytes, Consumer, Ctl, Producer};
use loom::cell::UnsafeCell;
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

struct Area(Vec<UnsafeCell<u8>>);

#[derive(Clone)]
struct Shared(Arc<Area>);

impl Bytes for Shared {
    fn size(&self) -> usize {
        self.0 .0.len()
    }
    fn write_at(&self, pos: usize, src: &[u8]) {
        for (i, b) in src.iter().enumerate() {
            self.0 .0[pos + i].with_mut(|p| unsafe { *p = *b });
        }
    }
    fn read_at(&self, pos: usize, dst: &mut [u8]) {
        for (i, b) in dst.iter_mut().enumerate() {
            *b = self.0 .0[pos + i].with(|p| unsafe { *p });
        }
    }
}

/// The doorbell: bytes in a socket buffer, modelled as a counter with a condition variable.
#[derive(Default)]
struct Bell {
    count: Mutex<usize>,
    cv: Condvar,
}

impl Bell {
    fn ring(&self) {
        *self.count.lock().unwrap() += 1;
        self.cv.notify_one();
    }
    /// poll() until a byte is there, then drain them all.
    fn wait(&self) {
        let mut c = self.count.lock().unwrap();
        while *c == 0 {
            c = self.cv.wait(c).unwrap();
        }
        *c = 0;
    }
}

static LOG: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
fn log(s: String) {
    LOG.lock().unwrap().push(s);
}

fn model(cap: usize, message: &'static [u8], chunk: usize) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    std::panic::set_hook(Box::new(|i| {
        eprintln!("{i}\n{:#?}", LOG.lock().unwrap());
    }));
    b.check(move || {
        LOG.lock().unwrap().clear();
        let ctl = Arc::new(Ctl::new());
        let area = Shared(Arc::new(Area((0..cap).map(|_| UnsafeCell::new(0)).collect())));
        let to_consumer = Arc::new(Bell::default());
        let to_producer = Arc::new(Bell::default());

        let producer = {
            let (ctl, area, to_consumer, to_producer) =
                (ctl.clone(), area.clone(), to_consumer.clone(), to_producer.clone());
            thread::spawn(move || {
                let mut p = Producer::new(&ctl, area);
                let mut rest = message;
                while !rest.is_empty() {
                    let n = p.push(&rest[..rest.len().min(chunk)]).unwrap();
                    log(format!("P push {n}"));
                    if n > 0 {
                        rest = &rest[n..];
                        if p.wake_needed() {
                            log(format!("P ring"));
                            to_consumer.ring();
                        }
                    } else if p.prepare_wait().unwrap() {
                        log(format!("P wait"));
                        to_producer.wait();
                        log(format!("P woke"));
                        p.cancel_wait();
                    } else {
                        log(format!("P armed, not idle"));
                    }
                }
            })
        };

        let mut c = Consumer::new(&ctl, area);
        let mut got = Vec::new();
        while got.len() < message.len() {
            let mut buf = [0u8; 4];
            let n = c.pop(&mut buf[..chunk]).unwrap();
            log(format!("C pop {n}"));
            if n > 0 {
                got.extend_from_slice(&buf[..n]);
                if c.wake_needed() {
                    log(format!("C ring"));
                    to_producer.ring();
                }
            } else if c.prepare_wait().unwrap() {
                log(format!("C wait"));
                to_consumer.wait();
                log(format!("C woke"));
                c.cancel_wait();
            } else {
                log(format!("C armed, not idle"));
            }
        }
        producer.join().unwrap();
        assert_eq!(got, message);
    });
}

/// The ring fills: the producer must sleep and be woken by the consumer's pops.
#[test]
fn full_ring_wakes_producer() {
    model(2, b"abcd", 1);
}

/// Wrapping copies of two bytes at a time through a two-byte ring.
#[test]
fn wrapping_chunks() {
    model(2, b"abc", 2);
}

/// Room to spare: only the consumer ever sleeps.
#[test]
fn empty_ring_wakes_consumer() {
    model(4, b"ab", 1);
}

/// The store-buffering litmus test that the eventcount relies on: with a SeqCst fence between
/// each side's store and load, at least one side sees the other's store.
#[test]
fn dekker_with_seqcst_fences() {
    use loom::sync::atomic::{fence, AtomicUsize, Ordering::*};
    loom::model(|| {
        let x = Arc::new(AtomicUsize::new(0));
        let y = Arc::new(AtomicUsize::new(0));
        let t = {
            let (x, y) = (x.clone(), y.clone());
            thread::spawn(move || {
                x.store(1, Relaxed);
                fence(SeqCst);
                y.load(Relaxed)
            })
        };
        y.store(1, Relaxed);
        fence(SeqCst);
        let r2 = x.load(Relaxed);
        let r1 = t.join().unwrap();
        assert!(r1 == 1 || r2 == 1);
    });
}
