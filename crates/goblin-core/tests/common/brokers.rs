//! Brokers for the tests that journal to Kafka (kaka from this workspace, Apache Kafka 4 through
//! `scripts/kafka4.sh`), INFO parsing, and a random workload over every type.

use super::temp_path;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A kaka broker on a free port, killed on drop. The binary is the workspace's (built by
/// `cargo build --workspace --bins`, which the test script runs first).
pub struct Kaka {
    pub addr: String,
    pub child: Child,
}

pub fn kaka_bin() -> PathBuf {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_goblin-core")).with_file_name("kaka");
    assert!(
        bin.exists(),
        "{} is missing: build the workspace's binaries first (cargo build --workspace --bins)",
        bin.display()
    );
    bin
}

impl Kaka {
    pub fn start() -> Kaka {
        // A port picked by free_port can be taken by someone else before kaka binds it (kaka
        // then exits): retry on another one.
        let mut last = String::new();
        for _ in 0..5 {
            match Kaka::try_start(&temp_path("kaka"), super::free_port(), &[]) {
                Ok(k) => return k,
                Err(e) => last = e,
            }
        }
        panic!("kaka did not start: {last}");
    }

    /// A broker on `dir` and `port` (a restart passes the same ones).
    pub fn start_in(dir: &std::path::Path, port: u16) -> Kaka {
        Kaka::start_with(dir, port, &[])
    }

    /// As `start_in`, with more command-line arguments (test hooks).
    pub fn start_with(dir: &std::path::Path, port: u16, args: &[&str]) -> Kaka {
        Kaka::try_start(dir, port, args).unwrap_or_else(|e| panic!("kaka did not start: {e}"))
    }

    /// Starts kaka and waits until the port's listener is kaka's own: another process that
    /// took the port first (another test's broker) must not pass for it.
    fn try_start(dir: &std::path::Path, port: u16, args: &[&str]) -> Result<Kaka, String> {
        let addr = format!("127.0.0.1:{port}");
        let mut child = Command::new(kaka_bin())
            .args(["--dir", dir.to_str().unwrap(), "--listen", &addr])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kaka");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                return Err(format!("kaka exited ({st}) before listening on {addr}"));
            }
            if listener_inode(port).is_some_and(|inode| owns_socket(child.id(), inode)) {
                return Ok(Kaka { addr, child });
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("kaka was not listening on {addr} within 20 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `kaka topics create` against the running broker.
    pub fn create_topic(&self, name: &str, partitions: u32, configs: &[&str]) {
        let mut cmd = Command::new(kaka_bin());
        cmd.args([
            "topics",
            "create",
            name,
            "--partitions",
            &partitions.to_string(),
            "--bootstrap",
            &self.addr,
        ]);
        for c in configs {
            cmd.args(["--config", c]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    /// Removes the records of partition 0 of `topic` below `before` (see `delete_records`).
    pub fn delete_records(&self, topic: &str, before: i64) {
        delete_records(&self.addr, topic, before)
    }
}

/// Removes the records of partition 0 of `topic` below `before` on the broker at `addr`
/// (Kafka's DeleteRecords, what retention does), panicking if the broker refuses.
fn delete_records(addr: &str, topic: &str, before: i64) {
    use rdkafka::admin::{AdminClient, AdminOptions};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> =
        rdkafka::ClientConfig::new().set("bootstrap.servers", addr).create().unwrap();
    let mut upto = rdkafka::TopicPartitionList::new();
    upto.add_partition_offset(topic, 0, rdkafka::Offset::Offset(before)).unwrap();
    let res = block_on(admin.delete_records(&upto, &AdminOptions::new())).expect("DeleteRecords");
    assert_eq!(res.find_partition(topic, 0).unwrap().error(), Ok(()), "{res:?}");
}

/// Runs a future to completion on this thread (rdkafka's admin calls complete on its own
/// thread).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

impl Drop for Kaka {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The inode of the socket listening on 127.0.0.1:`port` (or on every address), from
/// /proc/net/tcp.
fn listener_inode(port: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (ip, p) = f.get(1)?.split_once(':')?;
        let listening = f.get(3) == Some(&"0A");
        let ours = u16::from_str_radix(p, 16).ok()? == port && (ip == "0100007F" || ip == "00000000");
        if listening && ours {
            f.get(9)?.parse().ok()
        } else {
            None
        }
    })
}

/// Whether process `pid` holds the socket `inode` open.
fn owns_socket(pid: u32, inode: u64) -> bool {
    let want = format!("socket:[{inode}]");
    std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
        fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == want))
    })
}

/// Apache Kafka 4 through `scripts/kafka4.sh`, stopped on drop.
pub struct Kafka4 {
    dir: PathBuf,
    addr: String,
}

pub fn kafka4_script() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kafka4.sh")
}

impl Kafka4 {
    pub fn start() -> Kafka4 {
        let (dir, addr) = start_with_script("start", "stop", "kafka4", &[]);
        Kafka4 { dir, addr }
    }

    /// An outage: SIGKILL to the broker (no shutdown), and waits until it is gone. Its data
    /// and ports stay for [`Kafka4::restart`].
    pub fn kill(&mut self) {
        kill_node(&self.dir);
    }

    /// Starts the killed broker again from its data, on the same ports.
    pub fn restart(&mut self) {
        assert_eq!(restart_node(&self.dir), self.addr, "Apache Kafka restarted on another address");
    }
}

/// `scripts/kafka4.sh <start> DIR` in a fresh folder, `props` as more server properties: the
/// folder and the address the script printed last. The ports the script picks stay free until
/// the broker binds them seconds later; a test that takes one meanwhile makes the broker exit:
/// `<stop>`, then start again, on new ports.
fn start_with_script(start: &str, stop: &str, tag: &str, props: &[&str]) -> (PathBuf, String) {
    let fetch =
        Command::new("bash").arg(kafka4_script()).arg("fetch").status().expect("run scripts/kafka4.sh");
    assert!(fetch.success(), "scripts/kafka4.sh fetch failed (Java 17 and Maven are needed)");
    let mut last = String::new();
    for _ in 0..3 {
        let dir = temp_path(tag);
        let out = Command::new("bash")
            .arg(kafka4_script())
            .arg(start)
            .arg(&dir)
            .env("KAFKA4_EXTRA_PROPS", props.join("\n"))
            .output()
            .unwrap();
        if out.status.success() {
            return (dir, started_on(&out));
        }
        last = String::from_utf8_lossy(&out.stderr).into_owned();
        let _ = Command::new("bash").arg(kafka4_script()).arg(stop).arg(&dir).output();
        let _ = std::fs::remove_dir_all(&dir);
    }
    panic!("Apache Kafka ({start}) did not start: {last}");
}

/// SIGKILL to the broker `scripts/kafka4.sh` started in `dir` (its pid file names it), and waits
/// until it is gone.
fn kill_node(dir: &std::path::Path) {
    let pid: i32 = std::fs::read_to_string(dir.join("kafka.pid"))
        .expect("the broker's pid file")
        .trim()
        .parse()
        .expect("a pid");
    // SAFETY: kill(2) on the broker this harness started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    // The script's `setsid` child is reparented and reaped by init once it dies.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty()) {
        assert!(Instant::now() < deadline, "Apache Kafka (pid {pid}) survived SIGKILL");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The pid is free for reuse now: nothing may signal it again.
    let _ = std::fs::remove_file(dir.join("kafka.pid"));
}

/// Starts the broker formatted in `dir` again from its data, on its ports (a cluster node
/// rejoins its cluster: the script waits until it lists every node); returns its address.
fn restart_node(dir: &std::path::Path) -> String {
    let out = Command::new("bash").arg(kafka4_script()).arg("start").arg(dir).output().unwrap();
    assert!(out.status.success(), "Apache Kafka did not restart: {}", String::from_utf8_lossy(&out.stderr));
    started_on(&out)
}

/// An Apache Kafka 4 cluster of three nodes through `scripts/kafka4.sh start-cluster`: each node
/// a broker and a voter of the KRaft quorum, topics created with three replicas and
/// `min.insync.replicas=2` unless they say otherwise. Stopped on drop.
pub struct Kafka4Cluster {
    dir: PathBuf,
    /// The bootstrap list, `127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`.
    pub bootstrap: String,
}

/// What the cluster's metadata says of partition 0 of a topic.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionState {
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

impl Kafka4Cluster {
    /// Three nodes; `props` are more `server.properties` lines for every node (faster failure
    /// detection, for instance).
    pub fn start(props: &[&str]) -> Kafka4Cluster {
        let (dir, bootstrap) = start_with_script("start-cluster", "stop-cluster", "kafka4-cluster", props);
        Kafka4Cluster { dir, bootstrap }
    }

    fn node(&self, id: i32) -> PathBuf {
        self.dir.join(format!("node{id}"))
    }

    /// SIGKILL to node `id` (1, 2 or 3).
    pub fn kill(&self, id: i32) {
        kill_node(&self.node(id));
    }

    /// Stops node `id` cleanly (`kafka4.sh stop`: SIGTERM, a controlled shutdown that hands its
    /// leaderships over first).
    pub fn stop(&self, id: i32) {
        let out = Command::new("bash").arg(kafka4_script()).arg("stop").arg(self.node(id)).output().unwrap();
        assert!(out.status.success(), "node {id} did not stop: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Starts node `id` again from its data; returns once it has rejoined (the cluster lists
    /// it). It is back in a partition's in-sync set only once it has caught up: see
    /// [`Kafka4Cluster::wait_partition`].
    pub fn restart(&self, id: i32) {
        restart_node(&self.node(id));
    }

    /// Partition 0 of `topic` as the cluster's metadata describes it now, if it has a leader.
    pub fn partition(&self, topic: &str) -> Option<PartitionState> {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let c: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("log_level", "0")
            .create()
            .unwrap();
        let md = c.fetch_metadata(Some(topic), Duration::from_secs(5)).ok()?;
        let t = md.topics().iter().find(|t| t.name() == topic)?;
        let p = t.partitions().iter().find(|p| p.id() == 0)?;
        (p.error().is_none() && p.leader() >= 0).then(|| PartitionState {
            leader: p.leader(),
            replicas: p.replicas().to_vec(),
            isr: p.isr().to_vec(),
        })
    }

    /// Waits (up to 60 s) until partition 0 of `topic` satisfies `ok`; returns its state.
    pub fn wait_partition(
        &self,
        topic: &str,
        what: &str,
        ok: impl Fn(&PartitionState) -> bool,
    ) -> PartitionState {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let p = self.partition(topic);
            if let Some(p) = p.as_ref().filter(|p| ok(p)) {
                return p.clone();
            }
            assert!(Instant::now() < deadline, "{topic}: never {what}: {p:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The high watermark of partition 0 of `topic` (the offset its next record gets).
    pub fn high_watermark(&self, topic: &str) -> i64 {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let c: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("log_level", "0")
            .create()
            .unwrap();
        c.fetch_watermarks(topic, 0, Duration::from_secs(10)).expect("the watermarks").1
    }
}

impl Drop for Kafka4Cluster {
    /// SIGKILL to every node: a clean shutdown of the last nodes waits for a quorum that is
    /// gone, and the data goes with the folder anyway.
    fn drop(&mut self) {
        for id in 1..=3 {
            if self.node(id).join("kafka.pid").exists() {
                kill_node(&self.node(id));
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The address `kafka4.sh start` printed last.
fn started_on(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim().to_string()
}

impl Drop for Kafka4 {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(kafka4_script()).arg("stop").arg(&self.dir).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Either broker, for the scenarios that run on both.
pub trait Broker {
    fn addr(&self) -> &str;
    fn uri(&self, topic: &str) -> String {
        format!("kafka://{}/{topic}", self.addr())
    }
    /// Creates a topic with `partitions` and `configs` (`name=value`).
    fn create_topic(&self, name: &str, partitions: u32, configs: &[&str]);
    /// Removes the records of partition 0 of `topic` below `before` (DeleteRecords).
    fn delete_records(&self, topic: &str, before: i64) {
        delete_records(self.addr(), topic, before)
    }
}

impl Broker for Kaka {
    fn addr(&self) -> &str {
        &self.addr
    }
    fn create_topic(&self, name: &str, partitions: u32, configs: &[&str]) {
        Kaka::create_topic(self, name, partitions, configs)
    }
}

impl Broker for Kafka4 {
    fn addr(&self) -> &str {
        &self.addr
    }
    fn create_topic(&self, name: &str, partitions: u32, configs: &[&str]) {
        create_topic(&self.addr, name, partitions, 1, configs)
    }
}

impl Broker for Kafka4Cluster {
    fn addr(&self) -> &str {
        &self.bootstrap
    }
    /// With a replica on each node.
    fn create_topic(&self, name: &str, partitions: u32, configs: &[&str]) {
        create_topic(&self.bootstrap, name, partitions, 3, configs)
    }
}

/// Through the Admin API (CreateTopics), as an operator's tool would.
fn create_topic(addr: &str, name: &str, partitions: u32, replicas: i32, configs: &[&str]) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> =
        rdkafka::ClientConfig::new().set("bootstrap.servers", addr).create().unwrap();
    let mut topic = NewTopic::new(name, partitions as i32, TopicReplication::Fixed(replicas));
    for c in configs {
        let (k, v) = c.split_once('=').expect("name=value");
        topic = topic.set(k, v);
    }
    let res = block_on(admin.create_topics([&topic], &AdminOptions::new())).expect("CreateTopics");
    for r in res {
        r.unwrap_or_else(|(t, e)| panic!("create topic {t}: {e}"));
    }
}

pub fn info(con: &mut redis::Connection, section: &str) -> std::collections::HashMap<String, String> {
    let text: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// One random write (or read) over a few keys of every type, TTLs (in `ttl` ms), cross-key
/// commands and blocking pops (with 10 ms timeouts: on empty keys they wait that long and
/// answer nil).
pub fn random_command(rng: &mut impl rand::Rng, ttl: std::ops::Range<u64>) -> Vec<String> {
    let k = |rng: &mut dyn rand::RngCore, p: &str| format!("{p}{}", rand::Rng::gen_range(rng, 0..4));
    let v = |rng: &mut dyn rand::RngCore| rand::Rng::gen_range(rng, 0..50).to_string();
    let c: Vec<String> = match rng.gen_range(0..55) {
        0 => vec!["SET".into(), k(rng, "s"), v(rng)],
        1 => vec!["SET".into(), k(rng, "s"), v(rng), "PX".into(), rng.gen_range(ttl.clone()).to_string()],
        2 => vec!["INCRBY".into(), k(rng, "n"), v(rng)],
        3 => vec!["INCRBYFLOAT".into(), k(rng, "f"), "0.5".into()],
        4 => vec!["APPEND".into(), k(rng, "s"), v(rng)],
        5 => vec!["DEL".into(), k(rng, "s"), k(rng, "h")],
        6 => vec!["PEXPIRE".into(), k(rng, "s"), rng.gen_range(ttl.clone()).to_string()],
        7 => vec!["PERSIST".into(), k(rng, "s")],
        8 => vec!["HSET".into(), k(rng, "h"), v(rng), v(rng)],
        9 => vec!["HDEL".into(), k(rng, "h"), v(rng)],
        10 => vec!["HINCRBYFLOAT".into(), k(rng, "h"), "x".into(), "1.5".into()],
        11 => vec!["SADD".into(), k(rng, "t"), v(rng), v(rng)],
        12 => vec!["SREM".into(), k(rng, "t"), v(rng)],
        13 => vec!["SPOP".into(), k(rng, "t")],
        14 => vec!["SMOVE".into(), k(rng, "t"), k(rng, "t"), v(rng)],
        15 => vec!["ZADD".into(), k(rng, "z"), v(rng), v(rng)],
        16 => vec!["ZINCRBY".into(), k(rng, "z"), "2.5".into(), v(rng)],
        17 => vec!["ZPOPMIN".into(), k(rng, "z")],
        18 => vec!["RPUSH".into(), k(rng, "l"), v(rng), v(rng)],
        19 => vec!["LPOP".into(), k(rng, "l")],
        20 => vec!["LMOVE".into(), k(rng, "l"), k(rng, "l"), "LEFT".into(), "RIGHT".into()],
        21 => vec!["LTRIM".into(), k(rng, "l"), "0".into(), "5".into()],
        22 => vec!["ARSET".into(), k(rng, "a"), v(rng), v(rng)],
        23 => vec!["ARINSERT".into(), k(rng, "a"), v(rng)],
        24 => vec!["ARDEL".into(), k(rng, "a"), v(rng)],
        25 => vec!["RENAME".into(), k(rng, "s"), k(rng, "s")],
        26 => vec!["COPY".into(), k(rng, "h"), k(rng, "h"), "REPLACE".into()],
        27 => vec!["SETBIT".into(), k(rng, "b"), rng.gen_range(0..64).to_string(), "1".into()],
        28 => vec!["GETEX".into(), k(rng, "s"), "PX".into(), rng.gen_range(ttl.clone()).to_string()],
        29 => vec!["SINTERSTORE".into(), k(rng, "t"), k(rng, "t"), k(rng, "t")],
        // Streams: IDs from the primary's clock, approximate trims, groups and their PELs.
        30 => vec![
            "XADD".into(),
            k(rng, "x"),
            "MAXLEN".into(),
            "~".into(),
            "20".into(),
            "*".into(),
            "f".into(),
            v(rng),
        ],
        31 => vec!["XADD".into(), k(rng, "x"), "*".into(), "a".into(), v(rng), "b".into(), v(rng)],
        // Trims that keep what group "g" still needs (ACKED) or drop its pending entries
        // (DELREF), as well as plain ones.
        32 => vec![
            "XTRIM".into(),
            k(rng, "x"),
            "MAXLEN".into(),
            rng.gen_range(0..6).to_string(),
            ["KEEPREF", "DELREF", "ACKED"][rng.gen_range(0..3)].into(),
        ],
        33 => vec!["XGROUP".into(), "CREATE".into(), k(rng, "x"), "g".into(), "0".into(), "MKSTREAM".into()],
        34 => {
            let c = format!("c{}", rng.gen_range(0..3));
            vec![
                "XREADGROUP".into(),
                "GROUP".into(),
                "g".into(),
                c,
                "COUNT".into(),
                "2".into(),
                "STREAMS".into(),
                k(rng, "x"),
                ">".into(),
            ]
        }
        35 => vec![
            "XAUTOCLAIM".into(),
            k(rng, "x"),
            "g".into(),
            "c9".into(),
            "0".into(),
            "0".into(),
            "COUNT".into(),
            "1".into(),
        ],
        36 => vec!["BLMOVE".into(), k(rng, "l"), k(rng, "l"), "RIGHT".into(), "LEFT".into(), "0.01".into()],
        37 => vec!["BZPOPMIN".into(), k(rng, "z"), k(rng, "z"), "0.01".into()],
        38 => vec![
            "BLMPOP".into(),
            "0.01".into(),
            "2".into(),
            k(rng, "l"),
            k(rng, "l"),
            "LEFT".into(),
            "COUNT".into(),
            "2".into(),
        ],
        // Hash-field expiration: deadlines set, kept (HINCRBYFLOAT above), dropped, and
        // passing while the workload runs.
        40 => {
            let t = rng.gen_range(ttl.clone()).to_string();
            vec!["HPEXPIRE".into(), k(rng, "h"), t, "FIELDS".into(), "2".into(), v(rng), "x".into()]
        }
        41 => {
            let t = rng.gen_range(ttl.clone()).to_string();
            vec!["HSETEX".into(), k(rng, "h"), "PX".into(), t, "FIELDS".into(), "1".into(), v(rng), v(rng)]
        }
        42 => vec!["HPERSIST".into(), k(rng, "h"), "FIELDS".into(), "1".into(), "x".into()],
        43 => {
            let t = rng.gen_range(ttl.clone()).to_string();
            vec!["HGETEX".into(), k(rng, "h"), "PX".into(), t, "FIELDS".into(), "1".into(), v(rng)]
        }
        // Redis 8.8's bounded counter (saturating, with an expiry only a key without one
        // takes) and 8.10's multi-element list move.
        44 => {
            let t = rng.gen_range(ttl.clone()).to_string();
            vec![
                "INCREX".into(),
                k(rng, "n"),
                "BYINT".into(),
                "7".into(),
                "UBOUND".into(),
                "30".into(),
                "SATURATE".into(),
                "PX".into(),
                t,
                "ENX".into(),
            ]
        }
        45 => {
            vec!["INCREX".into(), k(rng, "f"), "BYFLOAT".into(), "-0.25".into(), "LBOUND".into(), "-2".into()]
        }
        46 => vec![
            "BLMOVEM".into(),
            k(rng, "l"),
            k(rng, "l"),
            "RIGHT".into(),
            "RIGHT".into(),
            "0.01".into(),
            "COUNT".into(),
            "3".into(),
            "OBO".into(),
        ],
        // Idempotent production: retries of a few (producer, iid) pairs answer the first
        // entry; XCFGSET changes the window and forgets the pairs.
        47 => {
            let pid = format!("p{}", rng.gen_range(0..2));
            if rng.gen_bool(0.5) {
                vec!["XADD".into(), k(rng, "x"), "IDMP".into(), pid, v(rng), "*".into(), "a".into(), v(rng)]
            } else {
                vec!["XADD".into(), k(rng, "x"), "IDMPAUTO".into(), pid, "*".into(), "a".into(), v(rng)]
            }
        }
        48 => vec!["XCFGSET".into(), k(rng, "x"), "IDMP-MAXSIZE".into(), rng.gen_range(1..4).to_string()],
        // Databases: the connection's (SELECT), and the commands that reach across them.
        49 | 50 => vec!["SELECT".into(), rng.gen_range(0..3).to_string()],
        51 => vec!["MOVE".into(), k(rng, "s"), rng.gen_range(0..3).to_string()],
        52 => vec!["SWAPDB".into(), rng.gen_range(0..3).to_string(), rng.gen_range(0..3).to_string()],
        53 => vec![
            "COPY".into(),
            k(rng, "l"),
            k(rng, "l"),
            "DB".into(),
            rng.gen_range(0..3).to_string(),
            "REPLACE".into(),
        ],
        54 if rng.gen_range(0..4) == 0 => vec!["FLUSHDB".into()],
        54 => vec!["MOVE".into(), k(rng, "z"), rng.gen_range(0..3).to_string()],
        _ => vec![
            "XREADGROUP".into(),
            "GROUP".into(),
            "g".into(),
            "c0".into(),
            "STREAMS".into(),
            k(rng, "x"),
            "0".into(),
        ],
    };
    c
}

/// A plain Kafka producer, as another application writing the topic would be.
pub fn other_producer(addr: &str) -> rdkafka::producer::BaseProducer {
    rdkafka::ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("linger.ms", "0")
        .create()
        .expect("create a producer")
}

/// Writes each command as one RESP2 record without goblin headers (another producer's
/// writes), in order, and waits until the broker has them.
pub fn produce_commands(addr: &str, topic: &str, cmds: &[&[&str]]) {
    send_commands(other_producer(addr), topic, cmds)
}

/// As `produce_commands`, in one record batch: the producer lingers 200 ms, longer than
/// queueing a few thousand small commands takes, and they must fit one batch (1 MB).
pub fn produce_commands_in_one_batch(addr: &str, topic: &str, cmds: &[&[&str]]) {
    let p = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("linger.ms", "200")
        .create()
        .expect("create a producer");
    send_commands(p, topic, cmds)
}

fn send_commands(p: rdkafka::producer::BaseProducer, topic: &str, cmds: &[&[&str]]) {
    use rdkafka::producer::{BaseRecord, Producer};
    for c in cmds {
        let mut bytes = format!("*{}\r\n", c.len());
        for a in c.iter() {
            bytes.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        let mut rec = BaseRecord::<(), [u8]>::to(topic).partition(0).payload(bytes.as_bytes());
        loop {
            match p.send(rec) {
                Ok(()) => break,
                Err((_, back)) => {
                    rec = back;
                    p.poll(Duration::from_millis(10));
                }
            }
        }
    }
    p.flush(Duration::from_secs(30)).expect("the broker took the records");
}
