//! Fetch sessions (KIP-227): a client that fetches the same partitions again and again sends
//! the whole list once (session epoch 0) and then only what changed (incremental requests:
//! new or updated partitions, and forgotten ones); the answer to an incremental request holds
//! only the partitions with news (records, an error, or a moved high watermark, last stable
//! offset or log start).
//!
//! The cache is in memory only (a restart forgets every session; clients then get
//! FETCH_SESSION_ID_NOT_FOUND and start a new one, as after a Kafka leader change). At most
//! `MAX_SESSIONS` live at once (Kafka's `max.incremental.fetch.session.cache.slots`); when full,
//! the least recently used session is dropped if it has been idle `IDLE_EVICT` (Kafka's
//! `min.incremental.fetch.session.eviction.ms`), otherwise the new client gets no session
//! (session id 0) and keeps sending full requests.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::FetchRequest;

use crate::errors;

pub const MAX_SESSIONS: usize = 1000;
pub const IDLE_EVICT: Duration = Duration::from_secs(120);

/// A topic as the session's requests name it: by name (Fetch v7-v12) or by id (v13+).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum TopicKey {
    Name(String),
    Id([u8; 16]),
}

/// One partition of a session: what the client last asked for, and the watermarks it was
/// last told (None until one answer carried the partition).
#[derive(Clone)]
pub struct SessionPart {
    pub topic: TopicKey,
    pub req: FetchPartition,
    pub sent: Option<(i64, i64, i64)>,
}

struct Session {
    /// The epoch the next incremental request must carry.
    epoch: i32,
    parts: Vec<SessionPart>,
    last_used: Instant,
}

/// How a Fetch request relates to the sessions.
pub enum Begin {
    /// No session (epoch -1, or the cache declined one): answer every partition, session id 0.
    Sessionless,
    /// A full request that opened session `id`: answer every partition, remember what was sent.
    Full { id: i32 },
    /// An incremental request of session `id`: fetch all of `parts` (in the session's order),
    /// answer only the partitions with news.
    Incremental { id: i32, parts: Vec<SessionPart> },
    /// FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH.
    Error(i16),
}

#[derive(Default)]
pub struct FetchSessions {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    sessions: HashMap<i32, Session>,
    next_id: u32,
}

fn next_epoch(e: i32) -> i32 {
    if e == i32::MAX {
        1
    } else {
        e + 1
    }
}

fn key(t: &FetchTopic, by_id: bool) -> TopicKey {
    if by_id {
        TopicKey::Id(*t.topic_id.as_bytes())
    } else {
        TopicKey::Name(t.topic.0.to_string())
    }
}

impl FetchSessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies a v7+ request's session fields: opens, closes, checks and updates sessions.
    pub fn begin(&self, r: &FetchRequest, by_id: bool) -> Begin {
        let mut s = self.lock();
        let now = Instant::now();
        match r.session_epoch {
            // Final epoch: close the session named (if any) and fetch without one.
            -1 => {
                if r.session_id != 0 {
                    s.sessions.remove(&r.session_id);
                }
                Begin::Sessionless
            }
            // Initial epoch: a full request; (re)create a session for it.
            0 => {
                if r.session_id != 0 {
                    s.sessions.remove(&r.session_id);
                }
                let parts: Vec<SessionPart> = r
                    .topics
                    .iter()
                    .flat_map(|t| {
                        let k = key(t, by_id);
                        t.partitions.iter().map(move |p| SessionPart {
                            topic: k.clone(),
                            req: p.clone(),
                            sent: None,
                        })
                    })
                    .collect();
                if s.sessions.len() >= MAX_SESSIONS {
                    let lru =
                        s.sessions.iter().min_by_key(|(_, x)| x.last_used).map(|(id, x)| (*id, x.last_used));
                    match lru {
                        Some((id, used)) if now.duration_since(used) >= IDLE_EVICT => {
                            s.sessions.remove(&id);
                        }
                        _ => return Begin::Sessionless,
                    }
                }
                let id = loop {
                    if s.next_id == 0 {
                        // A random start, so a session id of a previous run is unlikely to
                        // name a new session.
                        let u = crate::broker::new_uuid();
                        s.next_id = u32::from_be_bytes([u[0], u[1], u[2], u[3]]);
                    }
                    let id = (s.next_id & 0x7fff_ffff) as i32;
                    s.next_id = s.next_id.wrapping_add(1);
                    if id != 0 && !s.sessions.contains_key(&id) {
                        break id;
                    }
                };
                s.sessions.insert(id, Session { epoch: 1, parts, last_used: now });
                Begin::Full { id }
            }
            epoch => {
                let Some(sess) = s.sessions.get_mut(&r.session_id) else {
                    return Begin::Error(errors::FETCH_SESSION_ID_NOT_FOUND);
                };
                if epoch != sess.epoch {
                    return Begin::Error(errors::INVALID_FETCH_SESSION_EPOCH);
                }
                sess.epoch = next_epoch(epoch);
                sess.last_used = now;
                // Added or updated partitions first, then the forgotten ones (Kafka's order).
                for t in &r.topics {
                    let k = key(t, by_id);
                    for p in &t.partitions {
                        match sess.parts.iter_mut().find(|x| x.topic == k && x.req.partition == p.partition) {
                            Some(x) => x.req = p.clone(),
                            None => {
                                sess.parts.push(SessionPart { topic: k.clone(), req: p.clone(), sent: None })
                            }
                        }
                    }
                }
                for f in &r.forgotten_topics_data {
                    let k = if by_id {
                        TopicKey::Id(*f.topic_id.as_bytes())
                    } else {
                        TopicKey::Name(f.topic.0.to_string())
                    };
                    sess.parts.retain(|x| !(x.topic == k && f.partitions.contains(&x.req.partition)));
                }
                Begin::Incremental { id: r.session_id, parts: sess.parts.clone() }
            }
        }
    }

    /// Records what an answer of session `id` told the client about each partition, and
    /// says for each whether an incremental answer must carry it: `news(topic, partition,
    /// (hw, lso, log_start), has_records_or_error)`.
    pub fn record(
        &self,
        id: i32,
        topic: &TopicKey,
        partition: i32,
        marks: (i64, i64, i64),
        eventful: bool,
    ) -> bool {
        let mut s = self.lock();
        let Some(sess) = s.sessions.get_mut(&id) else { return true };
        let Some(p) = sess.parts.iter_mut().find(|x| x.topic == *topic && x.req.partition == partition)
        else {
            return true;
        };
        let news = eventful || p.sent != Some(marks);
        p.sent = Some(marks);
        news
    }
}

/// The session's partitions as the topics of a request, grouped by topic in the session's order.
pub fn as_topics(parts: &[SessionPart]) -> Vec<FetchTopic> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for p in parts {
        let same = |t: &FetchTopic| match &p.topic {
            TopicKey::Name(n) => t.topic.0.as_str() == n,
            TopicKey::Id(id) => t.topic_id.as_bytes() == id,
        };
        match topics.iter_mut().find(|t| same(t)) {
            Some(t) => t.partitions.push(p.req.clone()),
            None => {
                let mut t = FetchTopic::default();
                match &p.topic {
                    TopicKey::Name(n) => t.topic = crate::api::topic_name(n),
                    TopicKey::Id(id) => t.topic_id = uuid::Uuid::from_bytes(*id),
                }
                t.partitions.push(p.req.clone());
                topics.push(t);
            }
        }
    }
    topics
}
