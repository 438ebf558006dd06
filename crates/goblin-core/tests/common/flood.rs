//! Write floods for the journal's durability tests: pipelined clients that each append their
//! own sequence numbers to their own list, so that a lost or doubled write shows as a hole or a
//! repeat in the list; and the waits and states the tests compare around them.

use super::brokers::info;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// When a flood's clients stop: never (until their connection breaks), at an instant, or once a
/// flag is raised.
#[derive(Clone)]
pub enum Until {
    Never,
    At(Instant),
    Flag(Arc<AtomicBool>),
}

impl Until {
    fn reached(&self) -> bool {
        match self {
            Until::Never => false,
            Until::At(t) => Instant::now() >= *t,
            Until::Flag(f) => f.load(Ordering::Relaxed),
        }
    }
}

/// (lineage, offset, digest). The lineage is the one whose history the state is: a primary
/// restarted from its journal goes on under a successor id from the offset it recovered
/// (`master_replid2`, `second_repl_offset` one past it), and until it writes, its state is its
/// predecessor's at that offset, so that id is the one named.
pub fn state(con: &mut redis::Connection) -> (String, i64, String) {
    let m = info(con, "replication");
    let d: String = redis::cmd("DEBUG").arg("DIGEST").query(con).unwrap();
    let offset: i64 = m["master_repl_offset"].parse().unwrap();
    let second: i64 = m["second_repl_offset"].parse().unwrap();
    let id = if second == offset + 1 { &m["master_replid2"] } else { &m["master_replid"] };
    (id.clone(), offset, d)
}

/// Waits until Kafka acknowledged every mutation so far, and the primary's consumer has read
/// the topic past its last acknowledged record (so that a snapshot taken now saves a consumer
/// position past it, and recovery rereads no more than the boundary record).
pub fn wait_acked(con: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let k = info(con, "kafka");
        let r = info(con, "replication");
        let position: i64 = k["kafka_consumer_position"].parse().unwrap();
        let acked_broker: i64 = k["kafka_acknowledged_broker_offset"].parse().unwrap();
        if k["kafka_acknowledged_offset"] == r["master_repl_offset"]
            && k["kafka_pending_records"] == "0"
            && position > acked_broker
        {
            return;
        }
        assert!(Instant::now() < deadline, "not acknowledged: {k:?} {r:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What one flooding client saw.
pub struct Flood {
    /// The highest list length the server acknowledged.
    pub acked: u64,
    /// Appends sent (acknowledged or not).
    pub sent: u64,
    /// The connection broke (the server died) before the flood ended.
    pub cut: bool,
}

/// Pipelined writers: each client appends its own sequence numbers (continuing after
/// `start[c]`) to its own list, 32 in flight, until `until` is reached or the connection breaks.
/// `progress` counts acknowledged appends across clients.
pub fn flood(port: u16, start: &[u64], progress: Arc<AtomicU64>, until: Until) -> Vec<Flood> {
    flood_fenced(port, start, progress, until, false)
}

/// `flood`, and with `fence` each pipeline of 32 appends is followed by `WAITAOF 1 0 0`: an
/// append counts as acknowledged only once that WAITAOF answered [1, 0] (Kafka holds it).
pub fn flood_fenced(
    port: u16,
    start: &[u64],
    progress: Arc<AtomicU64>,
    until: Until,
    fence: bool,
) -> Vec<Flood> {
    let handles: Vec<_> = start
        .iter()
        .enumerate()
        .map(|(c, &first)| {
            let progress = progress.clone();
            let until = until.clone();
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut f = Flood { acked: first, sent: first, cut: true };
                let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return f };
                s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                // Client c writes in database c: the journal carries each record's database,
                // and recovery must put every write back where it was made.
                let select = format!("*2\r\n$6\r\nSELECT\r\n${}\r\n{c}\r\n", c.to_string().len());
                let mut ok = [0u8; 5];
                if s.write_all(select.as_bytes()).is_err() || s.read_exact(&mut ok).is_err() {
                    return f;
                }
                assert_eq!(&ok, b"+OK\r\n");
                let key = format!("l{c}");
                let mut buf = Vec::new();
                while !until.reached() {
                    let mut req = Vec::new();
                    for _ in 0..32 {
                        f.sent += 1;
                        let seq = f.sent.to_string();
                        req.extend_from_slice(
                            format!(
                                "*3\r\n$5\r\nRPUSH\r\n${}\r\n{key}\r\n${}\r\n{seq}\r\n",
                                key.len(),
                                seq.len()
                            )
                            .as_bytes(),
                        );
                    }
                    if fence {
                        req.extend_from_slice(b"*4\r\n$7\r\nWAITAOF\r\n$1\r\n1\r\n$1\r\n0\r\n$1\r\n0\r\n");
                    }
                    if s.write_all(&req).is_err() {
                        return f;
                    }
                    // Their replies, ":<length>" each, then the fence's "*2 :1 :0".
                    let lines = if fence { 35 } else { 32 };
                    let mut got = 0;
                    let mut longest = 0;
                    while got < lines {
                        if let Some(at) = buf.windows(2).position(|w| w == b"\r\n") {
                            let line: Vec<u8> = buf.drain(..at + 2).collect();
                            let text = String::from_utf8_lossy(&line[..line.len() - 2]).into_owned();
                            got += 1;
                            if got <= 32 {
                                assert_eq!(line[0], b':', "{text}");
                                longest = longest.max(text[1..].parse::<u64>().unwrap());
                                if !fence {
                                    f.acked = f.acked.max(longest);
                                    progress.fetch_add(1, Ordering::Relaxed);
                                }
                            } else {
                                let want = ["*2", ":1", ":0"][got - 33];
                                assert_eq!(text, want, "the WAITAOF fence's reply");
                                if got == 35 {
                                    f.acked = f.acked.max(longest);
                                    progress.fetch_add(32, Ordering::Relaxed);
                                }
                            }
                            continue;
                        }
                        let mut chunk = [0u8; 4096];
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return f,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                }
                f.cut = false;
                f
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Client `c`'s flood list `l<c>`, in its database `c`.
pub fn flood_list(con: &mut redis::Connection, c: usize) -> Vec<u64> {
    let _: () = redis::cmd("SELECT").arg(c).query(con).unwrap();
    let items = redis::cmd("LRANGE").arg(format!("l{c}")).arg(0).arg(-1).query(con).unwrap();
    let _: () = redis::cmd("SELECT").arg(0).query(con).unwrap();
    items
}

/// The flood's lists on a recovered server: each client's list is exactly 1..n (nothing lost
/// inside it, nothing applied twice), with n at least what the client saw acknowledged.
/// Returns the lengths.
pub fn assert_flood_lists(con: &mut redis::Connection, acked: &[u64], what: &str) -> Vec<u64> {
    acked
        .iter()
        .enumerate()
        .map(|(c, &acked)| {
            let items = flood_list(con, c);
            let n = items.len() as u64;
            assert_eq!(items, (1..=n).collect::<Vec<_>>(), "{what}, client {c}: a write lost or duplicated");
            assert!(n >= acked, "{what}, client {c}: {n} < acknowledged {acked}");
            n
        })
        .collect()
}
