//! Test harness: start the real `kaka` binary on a free 127.0.0.1 port with a temp dir, and
//! a tiny raw Kafka-protocol client for requests the client libraries never send.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// Base timestamp of test records: the wall clock when the test process started (so that a
/// test that opts into time retention with retention.ms does not see them deleted).
pub fn ts_base() -> i64 {
    static BASE: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *BASE.get_or_init(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
    })
}

pub struct Kaka {
    pub dir: PathBuf,
    pub port: u16,
    pub args: Vec<String>,
    child: Option<Child>,
    pub log: PathBuf,
}

/// A port free now, from 20000-31999: below the kernel's ephemeral range (32768 and up by
/// default), where `bind(0)` picks ports and every outgoing connection takes its local port. A
/// port from there could be taken by another test's server or by a client socket while a test
/// restarts a server on it (seen in CI: "served by another process"). Each process walks the
/// range from its own starting point, so its tests never get the same port twice (until the
/// 12,000 are used up) and concurrent test processes start far apart.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(7919) % SPAN,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    loop {
        let port = (LOW + NEXT.fetch_add(1, Ordering::Relaxed) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Whether process `pid` owns a socket listening on 127.0.0.1:`port` (or any address): the
/// listening sockets' inodes from /proc/net/tcp{,6} against the process's descriptors.
pub fn listens_on(pid: u32, port: u16) -> bool {
    let mut inodes = std::collections::HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address is HEXIP:HEXPORT; state 0A is LISTEN; field 9 is the inode.
            let Some(local) = f.get(1) else { continue };
            let p = local.rsplit(':').next().and_then(|h| u16::from_str_radix(h, 16).ok());
            if p == Some(port) && f.get(3) == Some(&"0A") {
                if let Some(ino) = f.get(9) {
                    inodes.insert(format!("socket:[{ino}]"));
                }
            }
        }
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
    fds.flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .any(|target| inodes.contains(&*target.to_string_lossy()))
}

pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "kaka-test-{tag}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

impl Kaka {
    pub fn start(tag: &str, extra: &[&str]) -> Kaka {
        let dir = temp_dir(tag);
        let mut k = Kaka {
            log: dir.with_extension("log"),
            dir,
            port: free_port(),
            args: extra.iter().map(|s| s.to_string()).collect(),
            child: None,
        };
        // A free port can be taken by someone else before the broker binds it: then the
        // broker exits, and the first start simply tries another port.
        for _ in 0..5 {
            if k.try_spawn() {
                return k;
            }
            k.port = free_port();
        }
        panic!("kaka did not start on any of 5 ports: {}", k.log_text());
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// (Re)starts the broker on its port and waits until it, not another process, listens
    /// there. A restart keeps the port (clients hold the address), so it must get it.
    pub fn spawn(&mut self) {
        assert!(self.try_spawn(), "kaka did not start on port {}: {}", self.port, self.log_text());
    }

    /// Starts the broker and waits until the listener on its port is the broker's own socket;
    /// false when the broker exited first (the port was taken).
    fn try_spawn(&mut self) -> bool {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_kaka"))
            .arg("--dir")
            .arg(&self.dir)
            .arg("--listen")
            .arg(self.addr())
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start kaka");
        let pid = child.id();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(_)) = c.try_wait() {
                    self.child = None;
                    return false;
                }
            }
            // Something answering on the port is not enough: it must be this child's socket.
            if TcpStream::connect(self.addr()).is_ok() && listens_on(pid, self.port) {
                return true;
            }
            assert!(Instant::now() < deadline, "kaka did not start: {}", self.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The running broker's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Names of the broker's threads (from /proc).
    pub fn thread_names(&self) -> Vec<String> {
        let Some(pid) = self.pid() else { return Vec::new() };
        let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
        rd.flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
            .map(|s| s.trim().to_string())
            .collect()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn sigkill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait; returns the exit status code.
    pub fn sigterm(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(st)) = c.try_wait() {
                return st.code();
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn restart(&mut self) {
        self.sigkill();
        self.spawn();
    }

    pub fn client(&self) -> Raw {
        Raw::connect(&self.addr())
    }
}

impl Drop for Kaka {
    fn drop(&mut self) {
        self.sigkill();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// A blocking raw Kafka client (one request at a time).
pub struct Raw {
    pub s: TcpStream,
    cid: i32,
}

impl Raw {
    pub fn connect(addr: &str) -> Raw {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Raw { s, cid: 0 }
    }

    /// Sends one length-prefixed frame in a single write (two small writes would meet Nagle's
    /// algorithm and the broker's delayed ACK: 40 ms per request).
    pub fn send_frame(&mut self, body: &[u8]) {
        let mut frame = Vec::with_capacity(4 + body.len());
        frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
        frame.extend_from_slice(body);
        self.s.write_all(&frame).unwrap();
    }

    /// Reads one response frame; None when the broker closed the connection.
    pub fn read_frame(&mut self) -> Option<Bytes> {
        let mut n = [0u8; 4];
        self.s.read_exact(&mut n).ok()?;
        let mut b = vec![0u8; i32::from_be_bytes(n) as usize];
        self.s.read_exact(&mut b).ok()?;
        Some(Bytes::from(b))
    }

    pub fn encode_request<R: Encodable + HeaderVersion>(
        &mut self,
        key: ApiKey,
        version: i16,
        r: &R,
    ) -> Vec<u8> {
        self.cid += 1;
        let mut h = RequestHeader::default();
        h.request_api_key = key as i16;
        h.request_api_version = version;
        h.correlation_id = self.cid;
        h.client_id = Some(StrBytes::from_static_str("raw-test"));
        let mut b = BytesMut::new();
        h.encode(&mut b, key.request_header_version(version)).unwrap();
        r.encode(&mut b, version).unwrap();
        b.to_vec()
    }

    /// Sends a request and decodes the response of type `Resp`.
    pub fn call<R: Encodable + HeaderVersion, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        r: &R,
    ) -> Resp {
        let body = self.encode_request(key, version, r);
        self.send_frame(&body);
        let mut f = self.read_frame().expect("response");
        let h = ResponseHeader::decode(&mut f, key.response_header_version(version)).unwrap();
        assert_eq!(h.correlation_id, self.cid, "correlation id");
        Resp::decode(&mut f, version).unwrap()
    }
}

/// Encodes one record batch v2 (optionally idempotent) with the given values.
pub fn make_batch(values: &[&[u8]], producer: Option<(i64, i16, i32)>, compression: Compression) -> Bytes {
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // kp starts a new batch when offset - sequence changes, so keep it constant.
            sequence: if seq >= 0 { seq + i as i32 } else { i as i32 - 1 },
            timestamp: ts_base() + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::copy_from_slice(v)),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, &records, &RecordEncodeOptions { version: 2, compression }).unwrap();
    buf.freeze()
}

/// One uncompressed batch of one record without a producer: `key` (None: keyless) and
/// `value`, stamped `timestamp` (ms).
pub fn one_record_batch(timestamp: i64, key: Option<&'static [u8]>, value: Bytes) -> Bytes {
    let r = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp,
        key: key.map(Bytes::from_static),
        value: Some(value),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let opts = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, &[r], &opts).unwrap();
    buf.freeze()
}

/// Waits until `f` is true or panics after `secs`.
/// Length of the chain of batches at the start of a segment file (where zeros or garbage begin).
pub fn log_end(d: &[u8]) -> usize {
    let mut p = 0;
    while p + 12 <= d.len() {
        let len = i32::from_be_bytes(d[p + 8..p + 12].try_into().unwrap());
        if len <= 0 || p + 12 + len as usize > d.len() {
            break;
        }
        p += 12 + len as usize;
    }
    p
}

pub fn wait_until(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
