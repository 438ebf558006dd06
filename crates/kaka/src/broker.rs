//! The broker's registry: topics and their partitions, producer ids, the group coordinator.
//!
//! Layout of `--dir`:
//! ```text
//! DIR/producer_ids                  next unallocated producer-id block (fdatasync'ed)
//! DIR/topics/<name>/topic.meta      id, partition count, topic configs (key=value lines)
//! DIR/topics/<name>/<partition>/    segments: <base>.log .index .timeindex .snapshot
//! DIR/groups/offsets.log            committed offsets (see groups.rs)
//! DIR/transactions/txn.log          transaction coordinator state (see txn.rs)
//! ```
//! The registry map is behind a lock, but only topic creation and deletion take it for
//! writing; the order of records is owned by each partition's task, never by this lock.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use crate::config::{valid_topic_name, BrokerConfig, TopicConfig};
use crate::errors;
use crate::groups::Groups;
use crate::memory::Memory;
use crate::partition::{self, Partition};
use crate::segment;
use crate::txn::Txns;

pub struct Topic {
    pub name: String,
    /// Persisted topic id: Metadata v10+ reports it, Fetch v13+ names topics by it.
    pub id: [u8; 16],
    /// Current settings; replaced whole by AlterConfigs (see `Broker::alter_topic_config`).
    config: RwLock<Arc<TopicConfig>>,
    pub partitions: Vec<Partition>,
}

impl Topic {
    pub fn config(&self) -> Arc<TopicConfig> {
        self.config.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

pub struct Broker {
    pub cfg: BrokerConfig,
    pub memory: Arc<Memory>,
    topics: RwLock<HashMap<String, Arc<Topic>>>,
    /// Serialises creations and deletions (disk work) without blocking lookups.
    admin: Mutex<()>,
    /// An async lock: it is held across the fsync of a new id block, and waiters must not
    /// block a runtime thread meanwhile.
    pids: tokio::sync::Mutex<PidAlloc>,
    pub groups: Groups,
    /// The transaction coordinator (see txn.rs); `Txns::start` recovers and runs it.
    pub txns: Txns,
    /// Fetch sessions (KIP-227), in memory only.
    pub fetch_sessions: crate::sessions::FetchSessions,
}

struct PidAlloc {
    next: i64,
    limit: i64,
    path: PathBuf,
}

const PID_BLOCK: i64 = 1000;

impl Broker {
    pub fn open(cfg: BrokerConfig) -> Result<Arc<Broker>, String> {
        let topics_dir = cfg.dir.join("topics");
        segment::create_dir_synced(&topics_dir).map_err(|e| format!("{}: {e}", topics_dir.display()))?;
        remove_deleted_topics(&cfg.dir);
        let pid_path = cfg.dir.join("producer_ids");
        let next = match crate::storage::read_to_string(&pid_path) {
            Ok(s) => s.trim().parse::<i64>().map_err(|_| format!("{}: corrupt", pid_path.display()))?,
            Err(_) => 0,
        };
        let memory = Memory::new(cfg.max_memory);
        let groups = Groups::start(&cfg)?;
        let txns = Txns::open(&cfg.dir)?;
        let broker = Arc::new(Broker {
            memory: memory.clone(),
            topics: RwLock::new(HashMap::new()),
            admin: Mutex::new(()),
            pids: tokio::sync::Mutex::new(PidAlloc { next, limit: next, path: pid_path }),
            groups,
            txns,
            fetch_sessions: Default::default(),
            cfg,
        });
        let mut names: Vec<String> = crate::storage::list(&topics_dir)
            .map_err(|e| e.to_string())?
            .into_iter()
            .filter(|n| crate::storage::exists(&topics_dir.join(n).join("topic.meta")))
            .collect();
        names.sort();
        for name in names {
            let t = broker.load_topic(&name)?;
            broker.topics.write().unwrap_or_else(|e| e.into_inner()).insert(name, Arc::new(t));
        }
        Ok(broker)
    }

    fn topic_dir(&self, name: &str) -> PathBuf {
        self.cfg.dir.join("topics").join(name)
    }

    fn load_topic(&self, name: &str) -> Result<Topic, String> {
        let dir = self.topic_dir(name);
        let meta = crate::storage::read_to_string(&dir.join("topic.meta")).map_err(|e| e.to_string())?;
        let mut id = [0u8; 16];
        let mut n = 0;
        let mut raw = BTreeMap::new();
        for line in meta.lines() {
            let Some((k, v)) = line.split_once('=') else { continue };
            match k {
                "id" => {
                    for (i, b) in id.iter_mut().enumerate() {
                        *b = u8::from_str_radix(v.get(i * 2..i * 2 + 2).unwrap_or("00"), 16).unwrap_or(0);
                    }
                }
                "partitions" => n = v.parse().map_err(|_| format!("{name}: bad partition count"))?,
                _ => {
                    if let Some(ck) = k.strip_prefix("config.") {
                        raw.insert(ck.to_string(), v.to_string());
                    }
                }
            }
        }
        let config = TopicConfig::resolve(&raw, &self.cfg).map_err(|e| format!("{name}: {e}"))?;
        let partitions = self.open_partitions(name, 0..n, &config);
        tracing::info!(topic = name, partitions = n, "loaded topic");
        Ok(Topic { name: name.to_string(), id, config: RwLock::new(Arc::new(config)), partitions })
    }

    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.read().unwrap_or_else(|e| e.into_inner()).get(name).cloned()
    }

    /// `topic`, or UNKNOWN_TOPIC_OR_PARTITION as an admin call answers it.
    fn existing_topic(&self, name: &str) -> Result<Arc<Topic>, (i16, String)> {
        self.topic(name)
            .ok_or_else(|| (errors::UNKNOWN_TOPIC_OR_PARTITION, format!("topic {name} does not exist")))
    }

    /// Opens (creating or recovering) partitions `range` of topic `name`.
    fn open_partitions(
        &self,
        name: &str,
        range: std::ops::Range<i32>,
        config: &TopicConfig,
    ) -> Vec<Partition> {
        let dir = self.topic_dir(name);
        range
            .map(|p| {
                partition::open(
                    &dir.join(p.to_string()),
                    name,
                    p,
                    config.clone(),
                    &self.cfg,
                    self.memory.clone(),
                )
            })
            .collect()
    }

    /// The topic with this id (Fetch v13+, Metadata v12+ by id). A linear scan: topics are
    /// few, and a nil id never matches (ids are random and never nil).
    pub fn topic_by_id(&self, id: &[u8; 16]) -> Option<Arc<Topic>> {
        if *id == [0u8; 16] {
            return None;
        }
        let topics = self.topics.read().unwrap_or_else(|e| e.into_inner());
        topics.values().find(|t| &t.id == id).cloned()
    }

    pub fn topic_names(&self) -> Vec<String> {
        let mut v: Vec<String> =
            self.topics.read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
        v.sort();
        v
    }

    /// Creates a topic. Err: (Kafka error code, message).
    ///
    /// The admin operations below create folders, write and fsync topic.meta and open (recover)
    /// partitions, all while holding the admin lock; they run through `segment::blocking`, so
    /// neither that disk work nor a wait for the lock holds up an async worker.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        raw: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Arc<Topic>, (i16, String)> {
        segment::blocking(|| self.create_topic_now(name, partitions, raw, validate_only))
    }

    fn create_topic_now(
        &self,
        name: &str,
        partitions: i32,
        raw: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Arc<Topic>, (i16, String)> {
        if !valid_topic_name(name) {
            return Err((errors::INVALID_TOPIC_EXCEPTION, format!("invalid topic name {name:?}")));
        }
        if !(1..=10_000).contains(&partitions) {
            return Err((errors::INVALID_PARTITIONS, "partition count must be 1..=10000".into()));
        }
        let config = TopicConfig::resolve(&raw, &self.cfg).map_err(|e| (errors::INVALID_CONFIG, e))?;
        let _admin = self.admin.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = self.topic(name) {
            return Err((errors::TOPIC_ALREADY_EXISTS, format!("topic {} already exists", t.name)));
        }
        if validate_only {
            return Err((errors::NONE, String::new()));
        }
        let dir = self.topic_dir(name);
        let id = new_uuid();
        let io = |e: std::io::Error| (errors::KAFKA_STORAGE_ERROR, format!("{}: {e}", dir.display()));
        // The folder's name is durable in topics/ before topic.meta (itself synced, with its
        // folder) commits the topic.
        segment::create_dir_synced(&dir).map_err(io)?;
        write_topic_meta(&dir, &id, partitions, &config.raw)?;
        let parts = self.open_partitions(name, 0..partitions, &config);
        let t = Arc::new(Topic {
            name: name.to_string(),
            id,
            config: RwLock::new(Arc::new(config)),
            partitions: parts,
        });
        self.topics.write().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), t.clone());
        tracing::info!(topic = name, partitions, "created topic");
        Ok(t)
    }

    /// Replaces a topic's own settings with what `edit` makes of the current ones (keys it
    /// leaves out fall back to the broker's flags). The new set is validated whole, then written
    /// to topic.meta (synced, atomically replaced) before it takes effect, so a restart never
    /// sees settings that were answered as failed, nor loses ones answered as applied. The
    /// admin lock makes concurrent alterations apply one after the other. Partition owners pick
    /// the new settings up between groups: retention and compaction at their next pass,
    /// segment.bytes at the next roll. Err: (Kafka error code, message).
    pub fn alter_topic_config(
        &self,
        name: &str,
        validate_only: bool,
        edit: impl FnOnce(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, (i16, String)>,
    ) -> Result<(), (i16, String)> {
        segment::blocking(|| self.alter_topic_config_now(name, validate_only, edit))
    }

    fn alter_topic_config_now(
        &self,
        name: &str,
        validate_only: bool,
        edit: impl FnOnce(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, (i16, String)>,
    ) -> Result<(), (i16, String)> {
        let _admin = self.admin.lock().unwrap_or_else(|e| e.into_inner());
        let t = self.existing_topic(name)?;
        let raw = edit(&t.config().raw)?;
        let config = TopicConfig::resolve(&raw, &self.cfg).map_err(|e| (errors::INVALID_CONFIG, e))?;
        if validate_only {
            return Ok(());
        }
        let dir = self.topic_dir(name);
        write_topic_meta(&dir, &t.id, t.partitions.len() as i32, &config.raw)?;
        let config = Arc::new(config);
        *t.config.write().unwrap_or_else(|e| e.into_inner()) = config.clone();
        for p in &t.partitions {
            p.reconfigure(config.clone());
        }
        tracing::info!(topic = name, raw = ?config.raw, "topic configs altered");
        Ok(())
    }

    /// Grows a topic to `count` partitions (CreatePartitions). The new count is written to
    /// topic.meta first (the commit point: a restart opens that many), then the new partitions
    /// are opened and the topic is replaced in the registry by one with the longer list;
    /// requests holding the old `Arc<Topic>` still see the same existing partitions.
    /// Err: (Kafka error code, message).
    pub fn add_partitions(&self, name: &str, count: i32, validate_only: bool) -> Result<(), (i16, String)> {
        segment::blocking(|| self.add_partitions_now(name, count, validate_only))
    }

    fn add_partitions_now(&self, name: &str, count: i32, validate_only: bool) -> Result<(), (i16, String)> {
        let _admin = self.admin.lock().unwrap_or_else(|e| e.into_inner());
        let t = self.existing_topic(name)?;
        let have = t.partitions.len() as i32;
        if count <= have {
            return Err((
                errors::INVALID_PARTITIONS,
                format!("topic {name} has {have} partitions; the new count must be larger, got {count}"),
            ));
        }
        if count > 10_000 {
            return Err((errors::INVALID_PARTITIONS, "partition count must be 1..=10000".into()));
        }
        if validate_only {
            return Ok(());
        }
        let dir = self.topic_dir(name);
        let config = t.config();
        write_topic_meta(&dir, &t.id, count, &config.raw)?;
        let mut partitions = t.partitions.clone();
        partitions.extend(self.open_partitions(name, have..count, &config));
        let grown =
            Arc::new(Topic { name: t.name.clone(), id: t.id, config: RwLock::new(config), partitions });
        self.topics.write().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), grown);
        tracing::info!(topic = name, from = have, to = count, "added partitions");
        Ok(())
    }

    /// Looks a topic up, creating it with broker defaults when auto-creation is on.
    pub fn topic_or_create(&self, name: &str, allow_create: bool) -> Result<Arc<Topic>, i16> {
        if let Some(t) = self.topic(name) {
            return Ok(t);
        }
        if !(allow_create && self.cfg.auto_create_topics) {
            return Err(errors::UNKNOWN_TOPIC_OR_PARTITION);
        }
        match self.create_topic(name, self.cfg.default_partitions, BTreeMap::new(), false) {
            Ok(t) => Ok(t),
            Err((errors::TOPIC_ALREADY_EXISTS, _)) => {
                self.topic(name).ok_or(errors::UNKNOWN_TOPIC_OR_PARTITION)
            }
            Err((code, msg)) => {
                tracing::warn!(topic = name, "auto-create failed: {msg}");
                Err(code)
            }
        }
    }

    /// Deletes exactly the named topic: its partitions stop, then its directory goes.
    pub async fn delete_topic(&self, name: &str) -> i16 {
        // The admin lock may be held by a creation doing disk work: wait off the async worker.
        let t = segment::blocking(|| {
            let _admin = self.admin.lock().unwrap_or_else(|e| e.into_inner());
            self.topics.write().unwrap_or_else(|e| e.into_inner()).remove(name)
        });
        let Some(t) = t else { return errors::UNKNOWN_TOPIC_OR_PARTITION };
        for p in &t.partitions {
            partition::shutdown(p).await;
            self.memory.clear(&p.shared.cache);
        }
        let dir = self.topic_dir(name);
        let trash = self.cfg.dir.join(format!("deleting-{}-{}", name, partition::now_ms()));
        let res = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            // The rename is the commit point: durable in both folders before the files go,
            // so a restart either loads the topic whole or finds it gone (and the trash
            // folder, if a crash left it, is removed by `remove_deleted_topics`).
            segment::rename_synced(&dir, &trash)?;
            crate::storage::remove_dir_all(&trash)
        })
        .await;
        match res {
            Ok(Ok(())) => {
                tracing::info!(topic = name, "deleted topic");
                errors::NONE
            }
            other => {
                tracing::error!(topic = name, "deleting topic directory: {other:?}");
                errors::KAFKA_STORAGE_ERROR
            }
        }
    }

    /// Hands out a fresh producer id; ids are allocated in persisted blocks so a restart
    /// never reuses one.
    pub async fn next_producer_id(&self) -> Result<i64, i16> {
        let mut a = self.pids.lock().await;
        if a.next >= a.limit {
            let limit = a.next + PID_BLOCK;
            let path = a.path.clone();
            let res = tokio::task::spawn_blocking(move || {
                segment::write_file_synced(&path, limit.to_string().as_bytes())
            })
            .await;
            if !matches!(res, Ok(Ok(()))) {
                tracing::error!("persisting producer id block: {res:?}");
                return Err(errors::KAFKA_STORAGE_ERROR);
            }
            a.limit = limit;
        }
        let id = a.next;
        a.next += 1;
        Ok(id)
    }

    /// Drains every partition (sync + stop) and the coordinator; used on SIGTERM.
    pub async fn shutdown(&self) {
        let topics: Vec<Arc<Topic>> =
            self.topics.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        for t in topics {
            for p in &t.partitions {
                partition::shutdown(p).await;
            }
        }
        self.groups.shutdown().await;
    }
}

/// Removes `deleting-*` folders a crash left behind in the middle of a DeleteTopics (the
/// topic was already renamed out of topics/, so it is deleted).
fn remove_deleted_topics(dir: &Path) {
    let Ok(names) = crate::storage::list(dir) else { return };
    for name in names {
        let path = dir.join(&name);
        if name.starts_with("deleting-") && crate::storage::is_dir(&path) {
            match crate::storage::remove_dir_all(&path) {
                Ok(()) => tracing::info!(path = %path.display(), "removed a deleted topic's leftovers"),
                Err(err) => {
                    tracing::warn!(path = %path.display(), "removing a deleted topic's leftovers: {err}")
                }
            }
        }
    }
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A random version-4 UUID from the OS's random source (falls back to time if unavailable).
pub fn new_uuid() -> [u8; 16] {
    let mut b = [0u8; 16];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_ok();
    if !ok {
        let t = partition::now_ms() as u128 ^ (std::process::id() as u128) << 64;
        b = t.to_be_bytes();
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    b
}

/// Writes a topic's topic.meta (id, partition count, its own configs), synced and atomically
/// replaced. A failure is KAFKA_STORAGE_ERROR, as the admin call answers it.
fn write_topic_meta(
    dir: &Path,
    id: &[u8; 16],
    partitions: i32,
    raw: &BTreeMap<String, String>,
) -> Result<(), (i16, String)> {
    let mut meta = format!("id={}\npartitions={partitions}\n", hex(id));
    for (k, v) in raw {
        meta.push_str(&format!("config.{k}={v}\n"));
    }
    segment::write_file_synced(&dir.join("topic.meta"), meta.as_bytes())
        .map_err(|e| (errors::KAFKA_STORAGE_ERROR, format!("{}: {e}", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::dir_events::{all, Event};

    /// Every folder the broker makes (data dir, topics/, a topic, its partitions, partitions
    /// added later, groups/) is created through `segment::create_dir_synced`, which fsyncs the
    /// parent afterwards: a crash after an acknowledged write cannot lose the folder's name.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_new_folder_is_synced_into_its_parent() {
        let root = std::env::temp_dir().join(format!("kaka-broker-dirs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("data");
        let cfg = BrokerConfig::for_tests(dir.clone());
        let b = Broker::open(cfg).unwrap();
        b.create_topic("t", 2, BTreeMap::new(), false).unwrap();
        b.add_partitions("t", 3, false).unwrap();
        b.shutdown().await;

        let events: Vec<Event> = all()
            .into_iter()
            .filter(|e| matches!(e, Event::Created(p) | Event::Synced(p) if p.starts_with(&root)))
            .collect();
        let mut folders = vec![dir.clone()];
        let mut i = 0;
        while i < folders.len() {
            for e in std::fs::read_dir(&folders[i]).unwrap().flatten() {
                if e.path().is_dir() {
                    folders.push(e.path());
                }
            }
            i += 1;
        }
        assert!(folders.len() >= 7, "{folders:?}"); // data, topics, groups, t, t/0..2
        for f in &folders {
            let created = events
                .iter()
                .position(|e| *e == Event::Created(f.clone()))
                .unwrap_or_else(|| panic!("{} was not created through create_dir_synced", f.display()));
            let parent = Event::Synced(f.parent().unwrap().to_path_buf());
            assert!(
                events[created..].contains(&parent),
                "{}'s parent was not synced after it was created",
                f.display()
            );
        }
        let _ = std::fs::remove_dir_all(&root);
    }
}
