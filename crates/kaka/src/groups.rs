//! The group coordinator: one task owns every consumer group (membership, generations,
//! assignments) and every committed offset, so commits need no lock.
//!
//! Committed offsets are appended to `DIR/groups/offsets.log` and fdatasync'ed before the
//! OffsetCommit is answered; on start the file is replayed. Each append is one frame:
//! u32 (0x8000_0000 | payload length), u32 CRC-32C of the payload, payload = one or more
//! entries: group, topic (u16 length + bytes each), i32 partition, i64 offset, i32 leader
//! epoch, i32 metadata length (-1 = null) + bytes. Files written before frames existed hold
//! one record per entry (u32 length without the high bit, CRC, the same entry without the
//! leader epoch); replay reads both. An offset of -1 deletes the entry (DeleteGroups,
//! OffsetDelete): -1 is also what OffsetFetch answers for a partition without a committed
//! offset, so "deleted" and "never committed" read the same.
//!
//! Fail-stop (the shared `applog::AppendLog`, also the transaction log's): the file is only
//! ever appended to at the end of its valid prefix. A failed or partial append is cut back off
//! (set_len + fsync) before anything else is appended, and while that cut fails every commit
//! is refused. So, with one append in flight at a time, the only bytes that can be bad on
//! restart are the last, unacknowledged frame (a torn tail, dropped); a bad frame with a valid
//! frame after it is damage, and opening refuses to drop the acknowledged commits behind it.
//!
//! Membership follows Kafka's classic protocol: JoinGroup parks until every known member has
//! rejoined (or the rebalance timeout passes), the first member leads, SyncGroup followers
//! park until the leader supplies assignments, Heartbeat answers REBALANCE_IN_PROGRESS while
//! a rebalance runs, and members silent past their session timeout are evicted.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use crate::applog::{AppendLog, Refused};
use crate::config::BrokerConfig;
use crate::errors;
use crate::segment;

#[derive(Debug, Clone, Default)]
pub struct JoinResult {
    pub error: i16,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// (member id, group instance id, metadata); only the leader gets them.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

#[derive(Debug, Clone, Default)]
pub struct SyncResult {
    pub error: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

pub struct JoinArgs {
    pub group: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    /// The member's address as DescribeGroups shows it (`/127.0.0.1`).
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
}

/// A committed offset as OffsetCommit stores it and OffsetFetch returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub offset: i64,
    /// The leader epoch the consumer saw at `offset` (-1 when it sent none).
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

impl Committed {
    /// What OffsetFetch answers for a partition with no committed offset.
    pub fn none() -> Committed {
        Committed { offset: -1, leader_epoch: -1, metadata: None }
    }
}

/// (topic, partition, committed)
pub type OffsetEntry = (String, i32, Committed);

/// A group as ListGroups and DescribeGroups show it.
#[derive(Debug, Clone, Default)]
pub struct GroupInfo {
    pub group: String,
    /// Kafka's state names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead.
    pub state: &'static str,
    pub protocol_type: String,
    /// The chosen assignor ("" until a generation completes).
    pub protocol: String,
    pub members: Vec<MemberInfo>,
}

#[derive(Debug, Clone, Default)]
pub struct MemberInfo {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// The member's metadata for the group's chosen protocol.
    pub metadata: Bytes,
    pub assignment: Bytes,
}

enum GMsg {
    Join(JoinArgs, oneshot::Sender<JoinResult>),
    Sync {
        group: String,
        generation: i32,
        member: String,
        /// The sender's group.instance.id (static members): a stale member id is fenced.
        instance: Option<String>,
        assignments: Vec<(String, Bytes)>,
        reply: oneshot::Sender<SyncResult>,
    },
    Heartbeat {
        group: String,
        generation: i32,
        member: String,
        instance: Option<String>,
        reply: oneshot::Sender<i16>,
    },
    Leave {
        group: String,
        members: Vec<String>,
        reply: oneshot::Sender<Vec<i16>>,
    },
    Commit {
        group: String,
        generation: i32,
        member: String,
        offsets: Vec<OffsetEntry>,
        reply: oneshot::Sender<i16>,
    },
    /// Offsets of a committed transaction (TxnOffsetCommit, applied at EndTxn): written and
    /// synced like any commit, without membership checks (those were made when the producer
    /// sent them, and the transaction is already decided).
    CommitTxn {
        group: String,
        offsets: Vec<OffsetEntry>,
        reply: oneshot::Sender<i16>,
    },
    Fetch {
        group: String,
        topics: Option<Vec<(String, Vec<i32>)>>,
        reply: oneshot::Sender<Vec<OffsetEntry>>,
    },
    /// Some groups by name (an unknown one is reported Dead), or every group when None.
    Describe {
        groups: Option<Vec<String>>,
        reply: oneshot::Sender<Vec<GroupInfo>>,
    },
    /// Deletes empty groups with their offsets: an error code per group.
    DeleteGroups {
        groups: Vec<String>,
        reply: oneshot::Sender<Vec<i16>>,
    },
    /// Deletes one group's committed offsets: (group error, an error code per partition).
    DeleteOffsets {
        group: String,
        partitions: Vec<(String, i32)>,
        reply: oneshot::Sender<(i16, Vec<i16>)>,
    },
    Shutdown(oneshot::Sender<()>),
}

#[derive(Clone)]
pub struct Groups {
    tx: mpsc::UnboundedSender<GMsg>,
}

async fn ask<T: Default>(tx: &mpsc::UnboundedSender<GMsg>, f: impl FnOnce(oneshot::Sender<T>) -> GMsg) -> T {
    let (rtx, rrx) = oneshot::channel();
    if tx.send(f(rtx)).is_err() {
        return T::default();
    }
    rrx.await.unwrap_or_default()
}

impl Groups {
    pub fn start(cfg: &BrokerConfig) -> Result<Groups, String> {
        let dir = cfg.dir.join("groups");
        segment::create_dir_synced(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join("offsets.log");
        let (log, offsets) = OffsetLog::open(&path)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let mut c = Coordinator {
            groups: HashMap::new(),
            log,
            delay: Duration::from_millis(cfg.initial_rebalance_delay_ms),
            next_member: 0,
        };
        for ((g, t, p), v) in offsets {
            c.group(&g).offsets.insert((t, p), v);
        }
        tokio::spawn(c.run(rx));
        Ok(Groups { tx })
    }

    pub async fn join(&self, a: JoinArgs) -> JoinResult {
        let r = ask(&self.tx, |r| GMsg::Join(a, r)).await;
        r
    }

    pub async fn sync(
        &self,
        group: String,
        generation: i32,
        member: String,
        instance: Option<String>,
        assignments: Vec<(String, Bytes)>,
    ) -> SyncResult {
        ask(&self.tx, |reply| GMsg::Sync { group, generation, member, instance, assignments, reply }).await
    }

    pub async fn heartbeat(
        &self,
        group: String,
        generation: i32,
        member: String,
        instance: Option<String>,
    ) -> i16 {
        ask(&self.tx, |reply| GMsg::Heartbeat { group, generation, member, instance, reply }).await
    }

    pub async fn leave(&self, group: String, members: Vec<String>) -> Vec<i16> {
        ask(&self.tx, |reply| GMsg::Leave { group, members, reply }).await
    }

    pub async fn commit(
        &self,
        group: String,
        generation: i32,
        member: String,
        offsets: Vec<OffsetEntry>,
    ) -> i16 {
        let (rtx, rrx) = oneshot::channel();
        if self.tx.send(GMsg::Commit { group, generation, member, offsets, reply: rtx }).is_err() {
            return errors::COORDINATOR_NOT_AVAILABLE;
        }
        rrx.await.unwrap_or(errors::COORDINATOR_NOT_AVAILABLE)
    }

    /// Applies a committed transaction's offsets (see `GMsg::CommitTxn`).
    pub async fn commit_txn(&self, group: String, offsets: Vec<OffsetEntry>) -> i16 {
        let (rtx, rrx) = oneshot::channel();
        if self.tx.send(GMsg::CommitTxn { group, offsets, reply: rtx }).is_err() {
            return errors::COORDINATOR_NOT_AVAILABLE;
        }
        rrx.await.unwrap_or(errors::COORDINATOR_NOT_AVAILABLE)
    }

    pub async fn fetch(&self, group: String, topics: Option<Vec<(String, Vec<i32>)>>) -> Vec<OffsetEntry> {
        ask(&self.tx, |reply| GMsg::Fetch { group, topics, reply }).await
    }

    /// Describes the named groups, or lists every group (with members) when `groups` is None.
    pub async fn describe(&self, groups: Option<Vec<String>>) -> Vec<GroupInfo> {
        ask(&self.tx, |reply| GMsg::Describe { groups, reply }).await
    }

    pub async fn delete_groups(&self, groups: Vec<String>) -> Vec<i16> {
        let n = groups.len();
        let mut codes = ask(&self.tx, |reply| GMsg::DeleteGroups { groups, reply }).await;
        codes.resize(n, errors::COORDINATOR_NOT_AVAILABLE);
        codes
    }

    pub async fn delete_offsets(&self, group: String, partitions: Vec<(String, i32)>) -> (i16, Vec<i16>) {
        let n = partitions.len();
        let (code, mut codes) = ask(&self.tx, |reply| GMsg::DeleteOffsets { group, partitions, reply }).await;
        codes.resize(n, errors::COORDINATOR_NOT_AVAILABLE);
        (code, codes)
    }

    pub async fn shutdown(&self) {
        let (rtx, rrx) = oneshot::channel();
        if self.tx.send(GMsg::Shutdown(rtx)).is_ok() {
            let _ = rrx.await;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl State {
    fn kafka_name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
        }
    }
}

struct Member {
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    protocol_type: String,
    protocols: Vec<(String, Bytes)>,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    last_seen: Instant,
    join_reply: Option<oneshot::Sender<JoinResult>>,
    sync_reply: Option<oneshot::Sender<SyncResult>>,
    assignment: Bytes,
    /// Join order, so the longest-standing member leads.
    seq: u64,
}

struct Group {
    state: State,
    generation: i32,
    members: BTreeMap<String, Member>,
    leader: Option<String>,
    protocol: Option<String>,
    protocol_type: Option<String>,
    rebalance_deadline: Option<Instant>,
    offsets: HashMap<(String, i32), Committed>,
}

struct Coordinator {
    groups: HashMap<String, Group>,
    log: OffsetLog,
    delay: Duration,
    next_member: u64,
}

/// The offsets log: the shared fail-stop append log (`applog.rs`) with this log's frames and
/// error codes. Only the coordinator task touches it, and it awaits each append before taking
/// the next message, so at most one append is in flight.
struct OffsetLog(AppendLog);

impl OffsetLog {
    /// Opens (creating) `path` and replays it: the latest committed offset per (group, topic,
    /// partition). A torn tail is cut off; damage before valid frames refuses to open. When
    /// the log holds many superseded commits it is rewritten with the latest ones only.
    fn open(path: &std::path::Path) -> Result<(OffsetLog, OffsetMap), String> {
        let opened = AppendLog::open(path, "committed offsets", |d, p| read_frame(d, p).map(|(_, n)| n))?;
        let mut log = opened.log;
        let mut map = HashMap::new();
        let mut records = 0usize;
        for f in &opened.frames {
            for (k, v) in read_frame(f, 0).map(|(e, _)| e).unwrap_or_default() {
                if v.offset == -1 {
                    map.remove(&k); // a deletion
                } else {
                    map.insert(k, v);
                }
                records += 1;
            }
        }
        if records > 1000 && records > 2 * map.len() {
            let mut frames = Vec::new();
            let mut frame = Frame::new();
            for (i, ((g, t, part), c)) in map.iter().enumerate() {
                frame.entry(g, t, *part, c);
                if i % 1024 == 1023 {
                    frames.push(std::mem::replace(&mut frame, Frame::new()).finish());
                }
            }
            if !frame.is_empty() {
                frames.push(frame.finish());
            }
            log.rewrite_now(&frames).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok((OffsetLog(log), map))
    }

    /// Appends one frame, durable before Ok: KAFKA_STORAGE_ERROR for a failed append,
    /// COORDINATOR_NOT_AVAILABLE (retriable) while an earlier failure's bytes cannot be cut off.
    async fn append(&mut self, frame: Frame) -> Result<(), i16> {
        if frame.is_empty() {
            return Ok(()); // an empty frame would read back as damage
        }
        self.0.append(frame.finish()).await.map_err(|r| match r {
            Refused::Failed => errors::KAFKA_STORAGE_ERROR,
            Refused::Dirty => errors::COORDINATOR_NOT_AVAILABLE,
        })
    }

    async fn close(&self) {
        self.0.close().await
    }
}

impl Coordinator {
    fn group(&mut self, g: &str) -> &mut Group {
        self.groups.entry(g.to_string()).or_insert_with(|| Group {
            state: State::Empty,
            generation: 0,
            members: BTreeMap::new(),
            leader: None,
            protocol: None,
            protocol_type: None,
            rebalance_deadline: None,
            offsets: HashMap::new(),
        })
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<GMsg>) {
        loop {
            self.tick();
            // Wake exactly at the next session expiry or rebalance deadline (a coarse periodic
            // tick would evict members up to one period late), and at least every second.
            let wake = self.next_deadline().unwrap_or_else(|| Instant::now() + Duration::from_secs(1));
            let wake = wake.min(Instant::now() + Duration::from_secs(1));
            tokio::select! {
                m = rx.recv() => {
                    let Some(m) = m else { break };
                    match m {
                        GMsg::Join(a, reply) => self.join(a, reply),
                        GMsg::Sync { group, generation, member, instance, assignments, reply } => {
                            if self.fenced(&group, &member, instance.as_deref()) {
                                let _ = reply.send(SyncResult { error: errors::FENCED_INSTANCE_ID, ..Default::default() });
                            } else {
                                self.sync(&group, generation, &member, assignments, reply)
                            }
                        }
                        GMsg::Heartbeat { group, generation, member, instance, reply } => {
                            let code = if self.fenced(&group, &member, instance.as_deref()) {
                                errors::FENCED_INSTANCE_ID
                            } else {
                                self.heartbeat(&group, generation, &member)
                            };
                            let _ = reply.send(code);
                        }
                        GMsg::Leave { group, members, reply } => {
                            let _ = reply.send(self.leave(&group, &members));
                        }
                        GMsg::Commit { group, generation, member, offsets, reply } => {
                            let code = self.commit(&group, generation, &member, offsets).await;
                            let _ = reply.send(code);
                        }
                        GMsg::CommitTxn { group, offsets, reply } => {
                            let _ = reply.send(self.write_offsets(&group, offsets).await);
                        }
                        GMsg::Fetch { group, topics, reply } => {
                            let _ = reply.send(self.fetch(&group, topics));
                        }
                        GMsg::Describe { groups, reply } => {
                            let _ = reply.send(self.describe(groups));
                        }
                        GMsg::DeleteGroups { groups, reply } => {
                            let _ = reply.send(self.delete_groups(groups).await);
                        }
                        GMsg::DeleteOffsets { group, partitions, reply } => {
                            let _ = reply.send(self.delete_offsets(&group, partitions).await);
                        }
                        GMsg::Shutdown(done) => {
                            self.log.close().await;
                            let _ = done.send(());
                            break;
                        }
                    }
                }
                _ = tokio::time::sleep_until(wake.into()) => {}
            }
        }
    }

    fn join(&mut self, a: JoinArgs, reply: oneshot::Sender<JoinResult>) {
        let fail = |code| JoinResult {
            error: code,
            generation: -1,
            member_id: a.member_id.clone(),
            ..Default::default()
        };
        if a.group.is_empty() {
            let _ = reply.send(fail(errors::INVALID_GROUP_ID));
            return;
        }
        if a.session_timeout_ms < 1 || a.protocols.is_empty() {
            let code = if a.protocols.is_empty() {
                errors::INCONSISTENT_GROUP_PROTOCOL
            } else {
                errors::INVALID_SESSION_TIMEOUT
            };
            let _ = reply.send(fail(code));
            return;
        }
        self.next_member += 1;
        let seq = self.next_member;
        let delay = self.delay;
        let g = self.group(&a.group);
        // Every member must share at least one protocol with the group.
        if !g.members.is_empty() && !g.members.contains_key(&a.member_id) {
            let shared = a
                .protocols
                .iter()
                .any(|(p, _)| g.members.values().all(|m| m.protocols.iter().any(|(q, _)| q == p)));
            let same_type = g.members.values().all(|m| m.protocol_type == a.protocol_type);
            if !shared || !same_type {
                let _ = reply.send(fail(errors::INCONSISTENT_GROUP_PROTOCOL));
                return;
            }
        }
        // Static membership (KIP-345): a group.instance.id names one member. Rejoining with it
        // and no member id replaces that member (a restarted client); a member id that is not
        // the instance's current one is a fenced zombie.
        if let Some(inst) = a.instance_id.as_deref() {
            let current = g
                .members
                .iter()
                .find(|(_, m)| m.instance_id.as_deref() == Some(inst))
                .map(|(id, _)| id.clone());
            match current {
                Some(old) if a.member_id.is_empty() => {
                    let new_id = new_member_id(&a.client_id);
                    replace_static_member(g, &old, new_id, a, reply);
                    return;
                }
                Some(old) if old != a.member_id => {
                    let _ = reply.send(fail(errors::FENCED_INSTANCE_ID));
                    return;
                }
                _ => {}
            }
        }
        let member_id = if a.member_id.is_empty() {
            format!(
                "{}-{}",
                if a.client_id.is_empty() { "member" } else { &a.client_id },
                crate::broker::hex(&crate::broker::new_uuid()[..8])
            )
        } else if g.members.contains_key(&a.member_id) {
            a.member_id.clone()
        } else {
            let _ = reply.send(fail(errors::UNKNOWN_MEMBER_ID));
            return;
        };
        let now = Instant::now();
        let was_empty = g.members.is_empty();
        let m = g.members.entry(member_id.clone()).or_insert_with(|| Member {
            instance_id: a.instance_id.clone(),
            client_id: a.client_id.clone(),
            client_host: a.client_host.clone(),
            protocol_type: a.protocol_type.clone(),
            protocols: Vec::new(),
            session_timeout: Duration::ZERO,
            rebalance_timeout: Duration::ZERO,
            last_seen: now,
            join_reply: None,
            sync_reply: None,
            assignment: Bytes::new(),
            seq,
        });
        m.protocols = a.protocols;
        m.protocol_type = a.protocol_type;
        m.session_timeout = Duration::from_millis(a.session_timeout_ms as u64);
        m.rebalance_timeout = Duration::from_millis(a.rebalance_timeout_ms.max(a.session_timeout_ms) as u64);
        m.last_seen = now;
        if let Some(old) = m.join_reply.replace(reply) {
            let _ = old.send(JoinResult {
                error: errors::REBALANCE_IN_PROGRESS,
                generation: -1,
                ..Default::default()
            });
        }
        if g.state != State::PreparingRebalance {
            let wait = if was_empty {
                delay
            } else {
                g.members.values().map(|m| m.rebalance_timeout).max().unwrap_or(delay)
            };
            start_rebalance(g, now + wait);
            if was_empty {
                // A new group completes when the initial delay passes (others may join).
                return;
            }
        }
        try_complete(g, false);
    }

    fn sync(
        &mut self,
        group: &str,
        generation: i32,
        member: &str,
        assignments: Vec<(String, Bytes)>,
        reply: oneshot::Sender<SyncResult>,
    ) {
        let g = self.group(group);
        let err = |code| SyncResult { error: code, ..Default::default() };
        let Some(m) = g.members.get_mut(member) else {
            let _ = reply.send(err(errors::UNKNOWN_MEMBER_ID));
            return;
        };
        m.last_seen = Instant::now();
        if generation != g.generation {
            let _ = reply.send(err(errors::ILLEGAL_GENERATION));
            return;
        }
        match g.state {
            State::PreparingRebalance | State::Empty => {
                let _ = reply.send(err(errors::REBALANCE_IN_PROGRESS));
            }
            State::Stable => {
                let r = SyncResult {
                    error: 0,
                    protocol_type: g.protocol_type.clone(),
                    protocol_name: g.protocol.clone(),
                    assignment: m.assignment.clone(),
                };
                let _ = reply.send(r);
            }
            State::CompletingRebalance => {
                m.sync_reply = Some(reply);
                if g.leader.as_deref() == Some(member) {
                    let map: HashMap<String, Bytes> = assignments.into_iter().collect();
                    for (id, m) in g.members.iter_mut() {
                        m.assignment = map.get(id).cloned().unwrap_or_default();
                    }
                    g.state = State::Stable;
                    for m in g.members.values_mut() {
                        if let Some(r) = m.sync_reply.take() {
                            let _ = r.send(SyncResult {
                                error: 0,
                                protocol_type: g.protocol_type.clone(),
                                protocol_name: g.protocol.clone(),
                                assignment: m.assignment.clone(),
                            });
                        }
                    }
                }
            }
        }
    }

    fn heartbeat(&mut self, group: &str, generation: i32, member: &str) -> i16 {
        let g = self.group(group);
        let Some(m) = g.members.get_mut(member) else { return errors::UNKNOWN_MEMBER_ID };
        m.last_seen = Instant::now();
        if generation != g.generation {
            return errors::ILLEGAL_GENERATION;
        }
        match g.state {
            State::PreparingRebalance => errors::REBALANCE_IN_PROGRESS,
            _ => errors::NONE,
        }
    }

    fn leave(&mut self, group: &str, members: &[String]) -> Vec<i16> {
        let g = self.group(group);
        let mut out = Vec::new();
        let mut changed = false;
        for id in members {
            match g.members.remove(id) {
                Some(m) => {
                    if let Some(r) = m.join_reply {
                        let _ = r.send(JoinResult {
                            error: errors::UNKNOWN_MEMBER_ID,
                            generation: -1,
                            ..Default::default()
                        });
                    }
                    changed = true;
                    out.push(errors::NONE);
                }
                None => out.push(errors::UNKNOWN_MEMBER_ID),
            }
        }
        if changed {
            membership_changed(g);
        }
        out
    }

    async fn commit(&mut self, group: &str, generation: i32, member: &str, offsets: Vec<OffsetEntry>) -> i16 {
        {
            let g = self.group(group);
            if generation >= 0 || !member.is_empty() {
                match g.members.get_mut(member) {
                    None => {
                        return if g.members.is_empty() && generation < 0 {
                            errors::NONE
                        } else if g.members.is_empty() {
                            errors::ILLEGAL_GENERATION
                        } else {
                            errors::UNKNOWN_MEMBER_ID
                        }
                    }
                    Some(m) => {
                        m.last_seen = Instant::now();
                        if generation != g.generation {
                            return errors::ILLEGAL_GENERATION;
                        }
                        if g.state == State::CompletingRebalance {
                            return errors::REBALANCE_IN_PROGRESS;
                        }
                    }
                }
            } else if !g.members.is_empty() && g.state != State::Empty {
                // Simple (assign-only) commits into a group with live members: Kafka refuses.
                return errors::ILLEGAL_GENERATION;
            }
        }
        self.write_offsets(group, offsets).await
    }

    /// Durable before answered: append, fdatasync, then apply in memory.
    async fn write_offsets(&mut self, group: &str, offsets: Vec<OffsetEntry>) -> i16 {
        let mut frame = Frame::new();
        for (t, p, c) in &offsets {
            frame.entry(group, t, *p, c);
        }
        if let Err(code) = self.log.append(frame).await {
            return code;
        }
        let g = self.group(group);
        for (t, p, c) in offsets {
            g.offsets.insert((t, p), c);
        }
        errors::NONE
    }

    /// DeleteGroups: a group with members is NON_EMPTY_GROUP, one never seen (or holding
    /// nothing) GROUP_ID_NOT_FOUND; the rest lose their offsets (deletions synced first).
    async fn delete_groups(&mut self, names: Vec<String>) -> Vec<i16> {
        let mut codes = Vec::with_capacity(names.len());
        let mut rec = Frame::new();
        let mut doomed = Vec::new();
        for name in &names {
            let code = match self.groups.get(name) {
                _ if name.is_empty() => errors::INVALID_GROUP_ID,
                Some(g) if !g.members.is_empty() => errors::NON_EMPTY_GROUP,
                Some(g) if !g.offsets.is_empty() || g.generation > 0 => {
                    for (t, p) in g.offsets.keys() {
                        rec.entry(name, t, *p, &Committed::none());
                    }
                    doomed.push(name.clone());
                    errors::NONE
                }
                _ => errors::GROUP_ID_NOT_FOUND,
            };
            codes.push(code);
        }
        if !rec.is_empty() {
            if let Err(code) = self.log.append(rec).await {
                return names
                    .iter()
                    .zip(codes)
                    .map(|(n, c)| if doomed.contains(n) { code } else { c })
                    .collect();
            }
        }
        for name in doomed {
            self.groups.remove(&name);
            tracing::info!(group = %name, "deleted group");
        }
        codes
    }

    /// OffsetDelete: a partition of a topic the group's live members subscribe to is
    /// GROUP_SUBSCRIBED_TO_TOPIC; every other named partition loses its offset.
    async fn delete_offsets(&mut self, group: &str, partitions: Vec<(String, i32)>) -> (i16, Vec<i16>) {
        let Some(g) = self.groups.get(group).filter(|g| !g.offsets.is_empty() || !g.members.is_empty())
        else {
            return (errors::GROUP_ID_NOT_FOUND, vec![errors::NONE; partitions.len()]);
        };
        let subscribed = subscribed_topics(g);
        let mut rec = Frame::new();
        let codes: Vec<i16> = partitions
            .iter()
            .map(|(t, p)| {
                if subscribed.as_ref().is_none_or(|s| s.contains(t)) && !g.members.is_empty() {
                    errors::GROUP_SUBSCRIBED_TO_TOPIC
                } else {
                    rec.entry(group, t, *p, &Committed::none());
                    errors::NONE
                }
            })
            .collect();
        if !rec.is_empty() {
            if let Err(code) = self.log.append(rec).await {
                return (code, vec![errors::NONE; partitions.len()]);
            }
        }
        let g = self.group(group);
        for ((t, p), code) in partitions.into_iter().zip(&codes) {
            if *code == errors::NONE {
                g.offsets.remove(&(t, p));
            }
        }
        (errors::NONE, codes)
    }

    fn fetch(&mut self, group: &str, topics: Option<Vec<(String, Vec<i32>)>>) -> Vec<OffsetEntry> {
        let g = self.group(group);
        match topics {
            Some(ts) => ts
                .into_iter()
                .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
                .map(|(t, p)| {
                    let c = g.offsets.get(&(t.clone(), p)).cloned().unwrap_or_else(Committed::none);
                    (t, p, c)
                })
                .collect(),
            None => g.offsets.iter().map(|((t, p), c)| (t.clone(), *p, c.clone())).collect(),
        }
    }

    fn describe(&self, names: Option<Vec<String>>) -> Vec<GroupInfo> {
        let info = |name: &str, g: Option<&Group>| {
            let Some(g) = g else {
                // Kafka answers a group it does not know with state Dead and no error.
                return GroupInfo { group: name.to_string(), state: "Dead", ..Default::default() };
            };
            let protocol = if g.state == State::PreparingRebalance { None } else { g.protocol.clone() };
            GroupInfo {
                group: name.to_string(),
                state: g.state.kafka_name(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                protocol: protocol.clone().unwrap_or_default(),
                members: g
                    .members
                    .iter()
                    .map(|(id, m)| MemberInfo {
                        member_id: id.clone(),
                        instance_id: m.instance_id.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        metadata: protocol
                            .as_ref()
                            .and_then(|p| m.protocols.iter().find(|(q, _)| q == p))
                            .map(|(_, md)| md.clone())
                            .unwrap_or_default(),
                        assignment: m.assignment.clone(),
                    })
                    .collect(),
            }
        };
        match names {
            Some(names) => names.iter().map(|n| info(n, self.groups.get(n))).collect(),
            None => {
                let mut all: Vec<GroupInfo> = self.groups.iter().map(|(n, g)| info(n, Some(g))).collect();
                all.sort_by(|a, b| a.group.cmp(&b.group));
                all
            }
        }
    }

    /// A request naming a group.instance.id whose member is now another member id: the
    /// sender was replaced (a zombie of a restarted static member), FENCED_INSTANCE_ID.
    fn fenced(&self, group: &str, member: &str, instance: Option<&str>) -> bool {
        let (Some(inst), Some(g)) = (instance, self.groups.get(group)) else { return false };
        g.members.iter().any(|(id, m)| m.instance_id.as_deref() == Some(inst) && id != member)
    }

    /// The earliest instant `tick` has something to do: a member's session expiry (members
    /// waiting in JoinGroup are bounded by the rebalance instead) or a rebalance deadline.
    fn next_deadline(&self) -> Option<Instant> {
        self.groups
            .values()
            .flat_map(|g| {
                let sessions = g
                    .members
                    .values()
                    .filter(|m| m.join_reply.is_none())
                    .map(|m| m.last_seen + m.session_timeout);
                let rebalance = g.rebalance_deadline.filter(|_| g.state == State::PreparingRebalance);
                sessions.chain(rebalance)
            })
            .min()
    }

    fn tick(&mut self) {
        let now = Instant::now();
        for g in self.groups.values_mut() {
            let expired: Vec<String> = g
                .members
                .iter()
                .filter(|(_, m)| {
                    m.join_reply.is_none() && now.duration_since(m.last_seen) >= m.session_timeout
                })
                .map(|(id, _)| id.clone())
                .collect();
            if !expired.is_empty() {
                for id in &expired {
                    tracing::info!(member = %id, "session timeout: evicting group member");
                    g.members.remove(id);
                }
                membership_changed(g);
            }
            if g.state == State::PreparingRebalance {
                let deadline_passed = g.rebalance_deadline.is_some_and(|d| now >= d);
                try_complete(g, deadline_passed);
            }
        }
    }
}

fn new_member_id(client_id: &str) -> String {
    format!(
        "{}-{}",
        if client_id.is_empty() { "member" } else { client_id },
        crate::broker::hex(&crate::broker::new_uuid()[..8])
    )
}

/// A static member rejoins with its group.instance.id and no member id (it restarted): it
/// takes the old member's place under a new member id, keeping its assignment and join order;
/// the old member id is fenced (its pending JoinGroup or SyncGroup answered
/// FENCED_INSTANCE_ID, later requests UNKNOWN_MEMBER_ID). As Kafka's coordinator does: a
/// Stable group whose protocol choice is unchanged does not rebalance (the member gets the
/// current generation and fetches its assignment with SyncGroup); a group completing a
/// rebalance starts another; one preparing a rebalance counts the member as joined.
fn replace_static_member(
    g: &mut Group,
    old: &str,
    new_id: String,
    a: JoinArgs,
    reply: oneshot::Sender<JoinResult>,
) {
    let Some(mut m) = g.members.remove(old) else { return };
    if let Some(r) = m.join_reply.take() {
        let _ = r.send(JoinResult {
            error: errors::FENCED_INSTANCE_ID,
            generation: -1,
            member_id: old.to_string(),
            ..Default::default()
        });
    }
    if let Some(r) = m.sync_reply.take() {
        let _ = r.send(SyncResult { error: errors::FENCED_INSTANCE_ID, ..Default::default() });
    }
    let now = Instant::now();
    m.client_id = a.client_id;
    m.client_host = a.client_host;
    m.protocols = a.protocols;
    m.protocol_type = a.protocol_type;
    m.session_timeout = Duration::from_millis(a.session_timeout_ms as u64);
    m.rebalance_timeout = Duration::from_millis(a.rebalance_timeout_ms.max(a.session_timeout_ms) as u64);
    m.last_seen = now;
    g.members.insert(new_id.clone(), m);
    if g.leader.as_deref() == Some(old) {
        g.leader = Some(new_id.clone());
    }
    tracing::info!(old = %old, new = %new_id, "static member rejoined: replaced");
    match g.state {
        State::Stable if g.protocol.is_some() && select_protocol(g) == g.protocol => {
            let protocol = g.protocol.clone().unwrap_or_default();
            let leader = g.leader.clone().unwrap_or_default();
            // The leader gets the roster (JoinGroup before v9 cannot tell it to skip the
            // assignment; its SyncGroup in a Stable group only fetches the stored one).
            let members = if leader == new_id { roster(g, &protocol) } else { Vec::new() };
            let _ = reply.send(JoinResult {
                error: errors::NONE,
                generation: g.generation,
                protocol_type: g.protocol_type.clone(),
                protocol_name: Some(protocol),
                leader,
                member_id: new_id,
                members,
            });
        }
        State::PreparingRebalance => {
            if let Some(m) = g.members.get_mut(&new_id) {
                m.join_reply = Some(reply);
            }
            try_complete(g, false);
        }
        _ => {
            if let Some(m) = g.members.get_mut(&new_id) {
                m.join_reply = Some(reply);
            }
            let wait = g.members.values().map(|m| m.rebalance_timeout).max().unwrap_or_default();
            start_rebalance(g, now + wait);
            try_complete(g, false);
        }
    }
}

/// The protocol a rebalance would choose now: the leader's (or, leaderless, the oldest
/// member's) first protocol that every member supports.
fn select_protocol(g: &Group) -> Option<String> {
    let lead = match &g.leader {
        Some(l) if g.members.contains_key(l) => &g.members[l],
        _ => g.members.values().min_by_key(|m| m.seq)?,
    };
    lead.protocols
        .iter()
        .map(|(p, _)| p.clone())
        .find(|p| g.members.values().all(|m| m.protocols.iter().any(|(q, _)| q == p)))
}

/// Every member's id, instance id and metadata for `protocol`: what the leader assigns from.
fn roster(g: &Group, protocol: &str) -> Vec<(String, Option<String>, Bytes)> {
    g.members
        .iter()
        .map(|(id, m)| {
            let md =
                m.protocols.iter().find(|(p, _)| *p == protocol).map(|(_, b)| b.clone()).unwrap_or_default();
            (id.clone(), m.instance_id.clone(), md)
        })
        .collect()
}

fn start_rebalance(g: &mut Group, deadline: Instant) {
    g.state = State::PreparingRebalance;
    g.rebalance_deadline = Some(deadline);
    for m in g.members.values_mut() {
        if let Some(r) = m.sync_reply.take() {
            let _ = r.send(SyncResult { error: errors::REBALANCE_IN_PROGRESS, ..Default::default() });
        }
    }
}

fn membership_changed(g: &mut Group) {
    if g.members.is_empty() {
        g.state = State::Empty;
        g.leader = None;
        g.generation += 1;
        return;
    }
    if g.state != State::PreparingRebalance {
        let wait = g.members.values().map(|m| m.rebalance_timeout).max().unwrap_or_default();
        start_rebalance(g, Instant::now() + wait);
    }
    try_complete(g, false);
}

/// Completes the rebalance when every member has rejoined (after the initial delay for a new
/// group, which `rebalance_deadline` encodes), or when the deadline forces it.
fn try_complete(g: &mut Group, force: bool) {
    let all_joined = g.members.values().all(|m| m.join_reply.is_some());
    let new_group_waiting = g.generation == 0 || g.leader.is_none();
    let deadline_passed = g.rebalance_deadline.is_some_and(|d| Instant::now() >= d);
    if !(force || (all_joined && (!new_group_waiting || deadline_passed))) {
        return;
    }
    // Members that did not rejoin in time leave the group.
    g.members.retain(|_, m| m.join_reply.is_some());
    if g.members.is_empty() {
        g.state = State::Empty;
        g.leader = None;
        return;
    }
    g.generation += 1;
    let leader = match &g.leader {
        Some(l) if g.members.contains_key(l) => l.clone(),
        _ => g.members.iter().min_by_key(|(_, m)| m.seq).map(|(id, _)| id.clone()).unwrap_or_default(),
    };
    let lm = &g.members[&leader];
    let protocol = lm
        .protocols
        .iter()
        .map(|(p, _)| p.clone())
        .find(|p| g.members.values().all(|m| m.protocols.iter().any(|(q, _)| q == p)));
    g.protocol_type = Some(lm.protocol_type.clone());
    g.protocol = protocol.clone();
    g.leader = Some(leader.clone());
    g.state = State::CompletingRebalance;
    g.rebalance_deadline = None;
    let Some(protocol) = protocol else {
        for m in g.members.values_mut() {
            if let Some(r) = m.join_reply.take() {
                let _ = r.send(JoinResult {
                    error: errors::INCONSISTENT_GROUP_PROTOCOL,
                    generation: -1,
                    ..Default::default()
                });
            }
        }
        g.members.clear();
        g.state = State::Empty;
        return;
    };
    let roster = roster(g, &protocol);
    let now = Instant::now();
    for (id, m) in g.members.iter_mut() {
        m.last_seen = now;
        if let Some(r) = m.join_reply.take() {
            let _ = r.send(JoinResult {
                error: errors::NONE,
                generation: g.generation,
                protocol_type: g.protocol_type.clone(),
                protocol_name: Some(protocol.clone()),
                leader: leader.clone(),
                member_id: id.clone(),
                members: if *id == leader { roster.clone() } else { Vec::new() },
            });
        }
    }
}

/// Topics the group's members subscribe to, read from their consumer-protocol metadata for
/// the chosen assignor (version i16, then an array of i16-length strings). None when that
/// cannot be told (another protocol type, unreadable metadata): callers then assume every topic.
fn subscribed_topics(g: &Group) -> Option<std::collections::HashSet<String>> {
    if g.protocol_type.as_deref() != Some("consumer") {
        return None;
    }
    let chosen = g.protocol.as_deref()?;
    let mut topics = std::collections::HashSet::new();
    for m in g.members.values() {
        let (_, md) = m.protocols.iter().find(|(name, _)| name == chosen)?;
        let n = i32::from_be_bytes(md.get(2..6)?.try_into().ok()?);
        let mut q = 6;
        for _ in 0..n.max(0) {
            let len = i16::from_be_bytes(md.get(q..q + 2)?.try_into().ok()?).max(0) as usize;
            topics.insert(String::from_utf8(md.get(q + 2..q + 2 + len)?.to_vec()).ok()?);
            q += 2 + len;
        }
    }
    Some(topics)
}

fn put_str(o: &mut Vec<u8>, s: &str) {
    o.extend_from_slice(&(s.len() as u16).to_be_bytes());
    o.extend_from_slice(s.as_bytes());
}

/// The high bit of a frame's length word: set for frames (several entries, with leader
/// epochs), clear for the one-entry records of older files.
const FRAME_FLAG: u32 = 0x8000_0000;

/// One append to the offsets log: entries collected, then framed with length and CRC.
struct Frame {
    payload: Vec<u8>,
}

impl Frame {
    fn new() -> Frame {
        Frame { payload: Vec::new() }
    }

    fn is_empty(&self) -> bool {
        self.payload.is_empty()
    }

    fn entry(&mut self, group: &str, topic: &str, p: i32, c: &Committed) {
        let b = &mut self.payload;
        put_str(b, group);
        put_str(b, topic);
        b.extend_from_slice(&p.to_be_bytes());
        b.extend_from_slice(&c.offset.to_be_bytes());
        b.extend_from_slice(&c.leader_epoch.to_be_bytes());
        match &c.metadata {
            Some(m) => {
                b.extend_from_slice(&(m.len() as i32).to_be_bytes());
                b.extend_from_slice(m.as_bytes());
            }
            None => b.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }

    fn finish(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.payload.len());
        out.extend_from_slice(&(FRAME_FLAG | self.payload.len() as u32).to_be_bytes());
        out.extend_from_slice(&crc32c::crc32c(&self.payload).to_be_bytes());
        out.extend_from_slice(&self.payload);
        out
    }
}

/// ((group, topic, partition), committed)
type OffsetMap = HashMap<(String, String, i32), Committed>;
type LogEntry = ((String, String, i32), Committed);

/// Decodes the entries of one frame payload (`framed`) or one old-format record body; None
/// if any entry is malformed or bytes are left over.
fn parse_entries(body: &[u8], framed: bool) -> Option<Vec<LogEntry>> {
    let take_str = |q: &mut usize| -> Option<String> {
        let n = u16::from_be_bytes(body.get(*q..*q + 2)?.try_into().ok()?) as usize;
        let s = String::from_utf8(body.get(*q + 2..*q + 2 + n)?.to_vec()).ok()?;
        *q += 2 + n;
        Some(s)
    };
    let take4 = |q: &mut usize| -> Option<[u8; 4]> {
        let v = body.get(*q..*q + 4)?.try_into().ok()?;
        *q += 4;
        Some(v)
    };
    let mut out = Vec::new();
    let mut q = 0;
    loop {
        let g = take_str(&mut q)?;
        let t = take_str(&mut q)?;
        let part = i32::from_be_bytes(take4(&mut q)?);
        let offset = i64::from_be_bytes(body.get(q..q + 8)?.try_into().ok()?);
        q += 8;
        let leader_epoch = if framed { i32::from_be_bytes(take4(&mut q)?) } else { -1 };
        let ml = i32::from_be_bytes(take4(&mut q)?);
        let metadata = if ml < 0 {
            None
        } else {
            let m = String::from_utf8(body.get(q..q + ml as usize)?.to_vec()).ok()?;
            q += ml as usize;
            Some(m)
        };
        out.push(((g, t, part), Committed { offset, leader_epoch, metadata }));
        if !framed || q >= body.len() {
            break;
        }
    }
    (q == body.len()).then_some(out)
}

/// The frame (or old record) at `p`: its entries and total length, or None if it is torn,
/// fails its CRC or does not parse.
fn read_frame(data: &[u8], p: usize) -> Option<(Vec<LogEntry>, usize)> {
    let word = u32::from_be_bytes(data.get(p..p + 4)?.try_into().ok()?);
    let crc = u32::from_be_bytes(data.get(p + 4..p + 8)?.try_into().ok()?);
    let framed = word & FRAME_FLAG != 0;
    let len = (word & !FRAME_FLAG) as usize;
    if len == 0 {
        return None;
    }
    let body = data.get(p + 8..p.checked_add(8 + len)?)?;
    if crc32c::crc32c(body) != crc {
        return None;
    }
    Some((parse_entries(body, framed)?, 8 + len))
}

/// Replays the offsets log at `path` (tests: what a restart would load).
#[cfg(test)]
fn replay(path: &std::path::Path) -> Result<OffsetMap, String> {
    OffsetLog::open(path).map(|(_, map)| map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A fresh, empty directory under the system temp dir.
    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kaka-groups-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn coordinator(path: &std::path::Path) -> Coordinator {
        Coordinator {
            groups: HashMap::new(),
            log: OffsetLog::open(path).unwrap().0,
            delay: Duration::ZERO,
            next_member: 0,
        }
    }

    fn entry(t: &str, p: i32, offset: i64) -> OffsetEntry {
        (t.to_string(), p, Committed { offset, leader_epoch: 3, metadata: Some("m".into()) })
    }

    fn frame(entries: &[OffsetEntry]) -> Vec<u8> {
        let mut f = Frame::new();
        for (t, p, c) in entries {
            f.entry("g", t, *p, c);
        }
        f.finish()
    }

    /// A partial append followed by a good one: the good one must survive a restart, so the
    /// partial bytes must be gone from the middle of the file before it is written.
    #[tokio::test]
    async fn failed_append_is_cut_back_before_the_next_commit() {
        let dir = temp_dir("failstop");
        let path = dir.join("offsets.log");
        let mut c = coordinator(&path);
        assert_eq!(c.commit("g", -1, "", vec![entry("t", 0, 10)]).await, errors::NONE);
        c.log.0.fail_next_after = Some(11);
        assert_eq!(c.commit("g", -1, "", vec![entry("t", 1, 20)]).await, errors::KAFKA_STORAGE_ERROR);
        assert_eq!(c.commit("g", -1, "", vec![entry("t", 2, 30)]).await, errors::NONE);
        // The failed commit is not applied in memory either.
        assert!(!c.group("g").offsets.contains_key(&("t".to_string(), 1)));
        drop(c);

        let want = frame(&[entry("t", 0, 10)]).len() + frame(&[entry("t", 2, 30)]).len();
        assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, want, "garbage left in the log");
        let map = replay(&path).expect("replay");
        let key = |p| ("g".to_string(), "t".to_string(), p);
        assert_eq!(map.get(&key(0)).map(|c| c.offset), Some(10));
        assert_eq!(map.get(&key(1)), None);
        assert_eq!(map.get(&key(2)).map(|c| c.offset), Some(30));
        assert_eq!(map.get(&key(2)).map(|c| c.leader_epoch), Some(3));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Bad bytes with a valid frame after them are damage, not a torn tail: replay refuses
    /// and leaves the file as it is.
    #[test]
    fn replay_refuses_damage_before_acknowledged_commits() {
        let dir = temp_dir("damage");
        let path = dir.join("offsets.log");
        let mut data = frame(&[entry("t", 0, 10)]);
        data.extend_from_slice(&frame(&[entry("t", 1, 20)])[..9]); // a torn append...
        data.extend_from_slice(&frame(&[entry("t", 2, 30)])); // ...then an acknowledged one
        std::fs::write(&path, &data).unwrap();
        let err = replay(&path).expect_err("damage must be reported");
        assert!(err.contains("damaged"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), data, "the file must not be truncated");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A torn last append (never acknowledged) is cut off; old one-entry records still read.
    #[test]
    fn replay_cuts_a_torn_tail_and_reads_old_records() {
        let dir = temp_dir("torn");
        let path = dir.join("offsets.log");
        // An old-format record: length without the frame bit, CRC, entry without an epoch.
        let mut body = Vec::new();
        put_str(&mut body, "g");
        put_str(&mut body, "t");
        body.extend_from_slice(&5i32.to_be_bytes());
        body.extend_from_slice(&55i64.to_be_bytes());
        body.extend_from_slice(&(-1i32).to_be_bytes());
        let mut data = Vec::new();
        data.extend_from_slice(&(body.len() as u32).to_be_bytes());
        data.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        data.extend_from_slice(&body);
        data.extend_from_slice(&frame(&[entry("t", 0, 10), entry("t", 1, 11)]));
        let good = data.len();
        let torn = frame(&[entry("t", 2, 30), entry("t", 3, 31)]);
        data.extend_from_slice(&torn[..torn.len() - 3]);
        std::fs::write(&path, &data).unwrap();
        let map = replay(&path).expect("replay");
        assert_eq!(map.len(), 3);
        let old = &map[&("g".to_string(), "t".to_string(), 5)];
        assert_eq!((old.offset, old.leader_epoch, old.metadata.as_deref()), (55, -1, None));
        assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, good);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
