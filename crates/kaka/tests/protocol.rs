//! Raw Kafka-protocol checks of behaviours a Kafka client's own integration tests expect from
//! a broker: ACL requests and authorized operations without an authorizer, the Fetch byte
//! limits, ListGroups v5 filters, static group membership and session-timeout eviction.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn tname(v: &str) -> TopicName {
    TopicName(s(v))
}

fn produce(c: &mut Raw, topic: &str, partition: i32, batch: Bytes) -> (i16, i64) {
    let mut pd = PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(batch);
    let mut td = TopicProduceData::default();
    td.name = tname(topic);
    td.partition_data = vec![pd];
    let mut r = ProduceRequest::default();
    r.acks = -1;
    r.timeout_ms = 10_000;
    r.topic_data = vec![td];
    let resp: ProduceResponse = c.call(ApiKey::Produce, 9, &r);
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

fn create(c: &mut Raw, topic: &str, partitions: i32) {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    let mut t = CreatableTopic::default();
    t.name = tname(topic);
    t.num_partitions = partitions;
    t.replication_factor = 1;
    let mut r = CreateTopicsRequest::default();
    r.topics = vec![t];
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 4, &r);
    assert_eq!(resp.topics[0].error_code, 0);
}

fn api_range(c: &mut Raw, key: i16) -> Option<(i16, i16)> {
    let resp: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    resp.api_keys.iter().find(|k| k.api_key == key).map(|k| (k.min_version, k.max_version))
}

// ---------------------------------------------------------------------------------------
// ACLs and authorized operations

const SECURITY_DISABLED: i16 = 54;
/// Kafka without an authorizer (AclEntry.supportedOperations): topic READ WRITE CREATE DELETE
/// ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS; cluster CREATE ALTER DESCRIBE CLUSTER_ACTION
/// DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE; group READ DELETE DESCRIBE
/// DESCRIBE_CONFIGS ALTER_CONFIGS.
fn bits(ops: &[i32]) -> i32 {
    ops.iter().fold(0, |a, o| a | (1 << o))
}

#[test]
fn acl_requests_are_security_disabled_and_every_operation_is_authorized() {
    let k = Kaka::start("acl", &[]);
    let mut c = k.client();
    let topic_ops = bits(&[3, 4, 5, 6, 7, 8, 10, 11]);
    let cluster_ops = bits(&[5, 7, 8, 9, 10, 11, 12]);
    let group_ops = bits(&[3, 6, 8, 10, 11]);
    for key in [29, 30, 31] {
        assert_eq!(api_range(&mut c, key), Some((1, 3)), "ACL api {key} advertised");
    }
    for v in 1..=3 {
        let resp: DescribeAclsResponse = c.call(ApiKey::DescribeAcls, v, &DescribeAclsRequest::default());
        assert_eq!(resp.error_code, SECURITY_DISABLED, "DescribeAcls v{v}");
        assert_eq!(resp.error_message.as_deref(), Some("No Authorizer is configured."));
        assert!(resp.resources.is_empty());

        let mut r = CreateAclsRequest::default();
        for name in ["a", "b"] {
            let mut cr = create_acls_request::AclCreation::default();
            cr.resource_type = 2; // topic
            cr.resource_name = s(name);
            cr.resource_pattern_type = 3; // literal
            cr.principal = s("User:alice");
            cr.host = s("*");
            cr.operation = 3;
            cr.permission_type = 3;
            r.creations.push(cr);
        }
        let resp: CreateAclsResponse = c.call(ApiKey::CreateAcls, v, &r);
        assert_eq!(resp.results.iter().map(|r| r.error_code).collect::<Vec<_>>(), vec![SECURITY_DISABLED; 2]);

        let mut r = DeleteAclsRequest::default();
        let mut f = delete_acls_request::DeleteAclsFilter::default();
        f.resource_type_filter = 1; // any
        f.pattern_type_filter = 1;
        f.operation = 1;
        f.permission_type = 1;
        r.filters = vec![f];
        let resp: DeleteAclsResponse = c.call(ApiKey::DeleteAcls, v, &r);
        assert_eq!(resp.filter_results.len(), 1);
        assert_eq!(resp.filter_results[0].error_code, SECURITY_DISABLED);
        assert!(resp.filter_results[0].matching_acls.is_empty());
    }

    create(&mut c, "ops", 1);
    let metadata = |c: &mut Raw, v: i16, include: bool| -> MetadataResponse {
        let mut t = metadata_request::MetadataRequestTopic::default();
        t.name = Some(tname("ops"));
        let mut r = MetadataRequest::default();
        r.topics = Some(vec![t]);
        r.include_topic_authorized_operations = include;
        if v <= 10 {
            r.include_cluster_authorized_operations = include;
        }
        c.call(ApiKey::Metadata, v, &r)
    };
    for v in 8..=12 {
        let resp = metadata(&mut c, v, true);
        assert_eq!(resp.topics[0].topic_authorized_operations, topic_ops, "Metadata v{v} topic");
        if v <= 10 {
            assert_eq!(resp.cluster_authorized_operations, cluster_ops, "Metadata v{v} cluster");
        }
        let resp = metadata(&mut c, v, false);
        assert_eq!(resp.topics[0].topic_authorized_operations, i32::MIN, "not asked: not provided");
        if v <= 10 {
            assert_eq!(resp.cluster_authorized_operations, i32::MIN);
        }
    }
    for v in 0..=2 {
        for include in [true, false] {
            let mut r = DescribeClusterRequest::default();
            r.include_cluster_authorized_operations = include;
            r.endpoint_type = 1;
            let resp: DescribeClusterResponse = c.call(ApiKey::DescribeCluster, v, &r);
            assert_eq!(resp.error_code, 0);
            let want = if include { cluster_ops } else { i32::MIN };
            assert_eq!(resp.cluster_authorized_operations, want, "DescribeCluster v{v} {include}");
        }
    }
    // A group with a member, described with and without its operations.
    let (member, _) = join(&mut c, "opsg", "", None, 30_000);
    for include in [true, false] {
        let mut d = DescribeGroupsRequest::default();
        d.groups = vec![GroupId(s("opsg"))];
        d.include_authorized_operations = include;
        let resp: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, 5, &d);
        assert_eq!(resp.groups[0].members[0].member_id.as_str(), member);
        assert_eq!(resp.groups[0].authorized_operations, if include { group_ops } else { i32::MIN });
    }
}

// ---------------------------------------------------------------------------------------
// Fetch byte limits

fn fetch_two(c: &mut Raw, topic: &str, max_bytes: i32, partition_max: i32) -> Vec<(i32, i16, usize)> {
    let mut ft = FetchTopic::default();
    ft.topic = tname(topic);
    ft.partitions = (0..2)
        .map(|p| {
            let mut fp = FetchPartition::default();
            fp.partition = p;
            fp.fetch_offset = 0;
            fp.partition_max_bytes = partition_max;
            fp
        })
        .collect();
    let mut r = FetchRequest::default();
    r.max_wait_ms = 0;
    r.min_bytes = 1;
    r.max_bytes = max_bytes;
    r.session_epoch = -1;
    r.topics = vec![ft];
    let resp: FetchResponse = c.call(ApiKey::Fetch, 12, &r);
    assert_eq!(resp.error_code, 0);
    resp.responses[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code, p.records.as_ref().map_or(0, |r| r.len())))
        .collect()
}

/// Kafka's rule (KIP-74): only the first batch of the whole answer may exceed max_bytes (so a
/// consumer always makes progress), and likewise a partition's partition_max_bytes only for
/// the first non-empty partition. Two partitions each hold one 900 KiB batch; a 1 MB fetch
/// returns the first partition's batch only. Checked from the RAM cache and from disk.
#[test]
fn fetch_only_the_first_batch_may_exceed_the_byte_limits() {
    let mut k = Kaka::start("maxbytes", &[]);
    let mut c = k.client();
    create(&mut c, "big", 2);
    let value: Vec<u8> = (0..900 * 1024).map(|i| (i * 7 % 251) as u8).collect();
    let batch = make_batch(&[&value], None, Compression::None);
    assert!(batch.len() > 900 * 1024 && batch.len() < 1_000_000);
    for p in 0..2 {
        assert_eq!(produce(&mut c, "big", p, batch.clone()), (0, 0));
    }
    for round in ["cache", "disk"] {
        // The whole-answer limit: the first batch is over the remaining budget of the second.
        let got = fetch_two(&mut c, "big", 1_000_000, 2 << 20);
        assert_eq!(got, vec![(0, 0, batch.len()), (1, 0, 0)], "{round}: max_bytes 1 MB");
        // The partition limit: the first partition's batch may exceed it, not the second's.
        let got = fetch_two(&mut c, "big", 50 << 20, 500 * 1024);
        assert_eq!(got, vec![(0, 0, batch.len()), (1, 0, 0)], "{round}: partition_max_bytes 500 KiB");
        // Room for both: both come back.
        let got = fetch_two(&mut c, "big", 2 << 20, 1 << 20);
        assert_eq!(got, vec![(0, 0, batch.len()), (1, 0, batch.len())], "{round}: room for both");
        // Only the second partition has data from this offset on: it is the first batch of
        // the answer and may exceed the limits.
        let mut ft = FetchTopic::default();
        ft.topic = tname("big");
        ft.partitions = vec![(0, 1), (1, 0)]
            .into_iter()
            .map(|(p, off)| {
                let mut fp = FetchPartition::default();
                fp.partition = p;
                fp.fetch_offset = off;
                fp.partition_max_bytes = 1000;
                fp
            })
            .collect();
        let mut r = FetchRequest::default();
        r.max_wait_ms = 0;
        r.min_bytes = 1;
        r.max_bytes = 1000;
        r.session_epoch = -1;
        r.topics = vec![ft];
        let resp: FetchResponse = c.call(ApiKey::Fetch, 12, &r);
        let lens: Vec<usize> =
            resp.responses[0].partitions.iter().map(|p| p.records.as_ref().map_or(0, |r| r.len())).collect();
        assert_eq!(lens, vec![0, batch.len()], "{round}: first non-empty partition");
        drop(c);
        k.restart();
        c = k.client();
    }
}

// ---------------------------------------------------------------------------------------
// Groups

/// JoinGroup v5 with the consumer protocol "range": (member id, full answer).
fn join(
    c: &mut Raw,
    group: &str,
    member: &str,
    instance: Option<&str>,
    session_ms: i32,
) -> (String, JoinGroupResponse) {
    let mut p = JoinGroupRequestProtocol::default();
    p.name = s("range");
    // Consumer protocol subscription v0: version, [topics], user data.
    p.metadata = Bytes::from_static(&[0, 0, 0, 0, 0, 1, 0, 1, b't', 0xff, 0xff, 0xff, 0xff]);
    let mut r = JoinGroupRequest::default();
    r.group_id = GroupId(s(group));
    r.session_timeout_ms = session_ms;
    r.rebalance_timeout_ms = 30_000;
    r.member_id = s(member);
    r.group_instance_id = instance.map(s);
    r.protocol_type = s("consumer");
    r.protocols = vec![p];
    let resp: JoinGroupResponse = c.call(ApiKey::JoinGroup, 5, &r);
    (resp.member_id.to_string(), resp)
}

fn sync(
    c: &mut Raw,
    group: &str,
    generation: i32,
    member: &str,
    instance: Option<&str>,
    assignments: &[(&str, &'static [u8])],
) -> (i16, Bytes) {
    let mut r = SyncGroupRequest::default();
    r.group_id = GroupId(s(group));
    r.generation_id = generation;
    r.member_id = s(member);
    r.group_instance_id = instance.map(s);
    r.assignments = assignments
        .iter()
        .map(|(m, a)| {
            let mut x = SyncGroupRequestAssignment::default();
            x.member_id = s(m);
            x.assignment = Bytes::from_static(a);
            x
        })
        .collect();
    let resp: SyncGroupResponse = c.call(ApiKey::SyncGroup, 3, &r);
    (resp.error_code, resp.assignment)
}

fn heartbeat(c: &mut Raw, group: &str, generation: i32, member: &str, instance: Option<&str>) -> i16 {
    let mut r = HeartbeatRequest::default();
    r.group_id = GroupId(s(group));
    r.generation_id = generation;
    r.member_id = s(member);
    r.group_instance_id = instance.map(s);
    let resp: HeartbeatResponse = c.call(ApiKey::Heartbeat, 3, &r);
    resp.error_code
}

/// (state, [(member id, instance id, assignment)])
fn describe(c: &mut Raw, group: &str) -> (String, Vec<(String, Option<String>, Bytes)>) {
    let mut d = DescribeGroupsRequest::default();
    d.groups = vec![GroupId(s(group))];
    let resp: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, 5, &d);
    let g = &resp.groups[0];
    let mut members: Vec<_> = g
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                m.group_instance_id.as_ref().map(|i| i.to_string()),
                m.member_assignment.clone(),
            )
        })
        .collect();
    members.sort_by(|a, b| a.1.cmp(&b.1));
    (g.group_state.to_string(), members)
}

/// Two static members form a Stable group; "b" restarts (rejoins with its instance id and no
/// member id): it replaces the old member under a new member id, gets the current generation
/// and its old assignment, and the group does not rebalance ("a" keeps heartbeating at the
/// same generation). The old member id is fenced. Then "b" stops: it is evicted after its
/// session timeout (not before, and not much later: within twice that), counted from its
/// last request.
#[test]
fn static_member_rejoin_replaces_it_without_rebalance_and_eviction_follows_session_timeout() {
    let k = Kaka::start("static", &["--group-initial-rebalance-delay-ms", "0"]);
    let mut a = k.client();
    let mut b = k.client();
    let g = "sg";
    let (a_id, ja) = join(&mut a, g, "", Some("a"), 60_000);
    assert_eq!(ja.error_code, 0);
    assert_eq!(sync(&mut a, g, ja.generation_id, &a_id, Some("a"), &[(&a_id, b"A1")]).0, 0);
    // "b" joins: "a" learns of the rebalance from its heartbeat and rejoins.
    let addr = k.addr();
    let a_id2 = a_id.clone();
    let a_rejoin = std::thread::spawn(move || {
        let mut a = Raw::connect(&addr);
        wait_until(20, "a sees the rebalance", || heartbeat(&mut a, "sg", 1, &a_id2, Some("a")) == 27);
        join(&mut a, "sg", &a_id2, Some("a"), 60_000).1
    });
    let session_ms = 3_000;
    let (b_id, jb) = join(&mut b, g, "", Some("b"), session_ms);
    let ja = a_rejoin.join().unwrap();
    assert_eq!((ja.error_code, jb.error_code), (0, 0));
    let gen = jb.generation_id;
    assert_eq!((ja.generation_id, gen), (2, 2));
    assert_eq!(ja.leader.as_str(), a_id, "the longest-standing member leads");
    assert_eq!(ja.members.len(), 2);
    assert_eq!(
        sync(&mut a, g, gen, &a_id, Some("a"), &[(&a_id, b"A2"), (&b_id, b"B2")]),
        (0, Bytes::from_static(b"A2"))
    );
    assert_eq!(sync(&mut b, g, gen, &b_id, Some("b"), &[]), (0, Bytes::from_static(b"B2")));
    assert_eq!(describe(&mut a, g).0, "Stable");

    // "b" restarts: a new connection, the same instance id, no member id.
    drop(b);
    let mut b2 = k.client();
    let (b2_id, jb2) = join(&mut b2, g, "", Some("b"), session_ms);
    assert_eq!(jb2.error_code, 0);
    assert_ne!(b2_id, b_id, "a new member id");
    assert_eq!(jb2.generation_id, gen, "no new generation: no rebalance");
    assert_eq!(jb2.leader.as_str(), a_id);
    assert!(jb2.members.is_empty(), "a follower gets no roster");
    let sent = Instant::now(); // b2's last request goes out here
    assert_eq!(
        sync(&mut b2, g, gen, &b2_id, Some("b"), &[]),
        (0, Bytes::from_static(b"B2")),
        "its old assignment"
    );
    assert_eq!(heartbeat(&mut a, g, gen, &a_id, Some("a")), 0, "the other member sees no rebalance");
    let (state, members) = describe(&mut a, g);
    assert_eq!(state, "Stable");
    assert_eq!(
        members.iter().map(|m| (m.0.clone(), m.1.clone().unwrap())).collect::<Vec<_>>(),
        vec![(a_id.clone(), "a".to_string()), (b2_id.clone(), "b".to_string())]
    );
    // The replaced member id is fenced.
    assert_eq!(heartbeat(&mut a, g, gen, &b_id, Some("b")), 82, "FENCED_INSTANCE_ID");
    assert_eq!(join(&mut a, g, &b_id, Some("b"), session_ms).1.error_code, 82);

    // "b" goes silent: evicted once its session times out, counted from its last request.
    let hang_deadline = Instant::now() + Duration::from_secs(60);
    let evicted_after = loop {
        let (_, members) = describe(&mut a, g);
        if !members.iter().any(|m| m.0 == b2_id) {
            break sent.elapsed();
        }
        // Only a hang guard: how soon after the timeout the eviction comes is a latency, which
        // a loaded machine stretches (a benchmark's business, not a test's).
        assert!(Instant::now() < hang_deadline, "b never evicted");
        std::thread::sleep(Duration::from_millis(20));
    };
    let session = Duration::from_millis(session_ms as u64);
    assert!(evicted_after >= session, "evicted before its session timed out: {evicted_after:?}");
    assert_eq!(heartbeat(&mut a, g, gen, &a_id, Some("a")), 27, "the eviction rebalances the rest");
}

/// ListGroups v5 filters by group type (KIP-848; every kaka group is "classic") and, as from
/// v4, by state, both without regard to case; v5 answers carry the group type.
#[test]
fn list_groups_v5_filters_by_type_and_state() {
    let k = Kaka::start("listg", &["--group-initial-rebalance-delay-ms", "0"]);
    let mut c = k.client();
    assert_eq!(api_range(&mut c, 16), Some((0, 5)));
    let (id, j) = join(&mut c, "lg", "", None, 30_000);
    assert_eq!(sync(&mut c, "lg", j.generation_id, &id, None, &[(&id, b"x")]).0, 0);
    let list = |c: &mut Raw, v: i16, types: &[&str], states: &[&str]| -> Vec<(String, String, String)> {
        let mut r = ListGroupsRequest::default();
        r.types_filter = types.iter().map(|t| s(t)).collect();
        r.states_filter = states.iter().map(|t| s(t)).collect();
        let resp: ListGroupsResponse = c.call(ApiKey::ListGroups, v, &r);
        assert_eq!(resp.error_code, 0);
        resp.groups
            .iter()
            .map(|g| (g.group_id.to_string(), g.group_state.to_string(), g.group_type.to_string()))
            .collect()
    };
    let listed = vec![("lg".to_string(), "Stable".to_string(), "classic".to_string())];
    assert_eq!(list(&mut c, 5, &[], &[]), listed);
    assert_eq!(list(&mut c, 5, &["classic"], &[]), listed);
    assert_eq!(list(&mut c, 5, &["Classic", "consumer"], &["STABLE"]), listed);
    assert_eq!(list(&mut c, 5, &["consumer"], &[]), vec![]);
    assert_eq!(list(&mut c, 5, &["share"], &[]), vec![]);
    assert_eq!(list(&mut c, 5, &["classic"], &["Empty"]), vec![]);
    assert_eq!(list(&mut c, 4, &[], &["stable"]), vec![("lg".into(), "Stable".into(), String::new())]);
}

// ---------------------------------------------------------------------------------------
// Fetch sessions (KIP-227)

/// A session answer: (top-level error, session id, [(partition, error, high watermark,
/// record bytes)]).
type SessionAnswer = (i16, i32, Vec<(i32, i16, i64, usize)>);

/// One session request: `parts` are (partition, fetch offset) to add or update, `forget` the
/// partitions to drop. By name for v12, by topic id for v13+. Returns (top-level error,
/// session id, [(partition, error, high watermark, record bytes)]).
#[allow(clippy::too_many_arguments)]
fn session_fetch(
    c: &mut Raw,
    version: i16,
    topic: &str,
    id: uuid::Uuid,
    session: (i32, i32),
    parts: &[(i32, i64)],
    forget: &[i32],
    max_wait: i32,
) -> SessionAnswer {
    let mut ft = FetchTopic::default();
    if version >= 13 {
        ft.topic_id = id;
    } else {
        ft.topic = tname(topic);
    }
    ft.partitions = parts
        .iter()
        .map(|&(p, off)| {
            let mut fp = FetchPartition::default();
            fp.partition = p;
            fp.fetch_offset = off;
            fp.partition_max_bytes = 1 << 20;
            fp
        })
        .collect();
    let mut r = FetchRequest::default();
    r.max_wait_ms = max_wait;
    r.min_bytes = 1;
    r.max_bytes = 8 << 20;
    r.session_id = session.0;
    r.session_epoch = session.1;
    if !parts.is_empty() {
        r.topics = vec![ft];
    }
    if !forget.is_empty() {
        let mut f = fetch_request::ForgottenTopic::default();
        if version >= 13 {
            f.topic_id = id;
        } else {
            f.topic = tname(topic);
        }
        f.partitions = forget.to_vec();
        r.forgotten_topics_data = vec![f];
    }
    let resp: FetchResponse = c.call(ApiKey::Fetch, version, &r);
    let mut out = Vec::new();
    for t in &resp.responses {
        if version >= 13 {
            assert_eq!(t.topic_id, id);
        } else {
            assert_eq!(t.topic.as_str(), topic);
        }
        for p in &t.partitions {
            out.push((
                p.partition_index,
                p.error_code,
                p.high_watermark,
                p.records.as_ref().map_or(0, |r| r.len()),
            ));
        }
    }
    (resp.error_code, resp.session_id, out)
}

/// A full request (epoch 0) opens a session and is answered for every partition; incremental
/// requests (epoch 1, 2, ...) name only what changed and are answered only with partitions
/// that have news; forgotten partitions leave the session; a wrong epoch is
/// INVALID_FETCH_SESSION_EPOCH, an unknown or closed session FETCH_SESSION_ID_NOT_FOUND; epoch
/// -1 closes it. By topic name (v12) and by topic id (v16).
#[test]
fn fetch_sessions_answer_incrementally() {
    let mut k = Kaka::start("sessions", &[]);
    let mut c = k.client();
    for (v, topic) in [(12i16, "fs12"), (16, "fs16")] {
        create(&mut c, topic, 3);
        let mut mr = MetadataRequest::default();
        let mut mt = metadata_request::MetadataRequestTopic::default();
        mt.name = Some(tname(topic));
        mr.topics = Some(vec![mt]);
        let md: MetadataResponse = c.call(ApiKey::Metadata, 12, &mr);
        let id = md.topics[0].topic_id;
        assert!(!id.is_nil());
        let b = || make_batch(&[b"one"], None, Compression::None);
        assert_eq!(produce(&mut c, topic, 0, b()), (0, 0));
        let f = |c: &mut Raw, s: (i32, i32), parts: &[(i32, i64)], forget: &[i32], wait: i32| {
            session_fetch(c, v, topic, id, s, parts, forget, wait)
        };

        // Full: a new session, every partition answered.
        let (err, sid, got) = f(&mut c, (0, 0), &[(0, 0), (1, 0)], &[], 0);
        assert_eq!(err, 0);
        assert_ne!(sid, 0, "v{v}: a session was opened");
        let one = got[0].3;
        assert!(one > 0);
        assert_eq!(got, vec![(0, 0, 1, one), (1, 0, 0, 0)]);
        // Incremental: the client moved on in partition 0 (an update), nothing is new: an
        // empty answer (after the wait).
        let (err, sid2, got) = f(&mut c, (sid, 1), &[(0, 1)], &[], 50);
        assert_eq!((err, sid2, got), (0, sid, vec![]));
        // Partition 1 receives a record: only partition 1 is news.
        assert_eq!(produce(&mut c, topic, 1, b()), (0, 0));
        let (err, _, got) = f(&mut c, (sid, 2), &[], &[], 50);
        assert_eq!((err, got), (0, vec![(1, 0, 1, one)]));
        // Partition 2 joins the session; partition 1 is forgotten. A record in 1 is not news
        // any more; one in 0 is (from its updated offset 1).
        assert_eq!(produce(&mut c, topic, 1, b()), (0, 1));
        assert_eq!(produce(&mut c, topic, 0, b()), (0, 1));
        let (err, _, got) = f(&mut c, (sid, 3), &[(2, 0)], &[1], 50);
        assert_eq!(
            (err, got),
            (0, vec![(0, 0, 2, one), (2, 0, 0, 0)]),
            "partition 2 is new: its state is news"
        );
        let (err, _, got) = f(&mut c, (sid, 4), &[(0, 2)], &[], 50);
        assert_eq!((err, got), (0, vec![]), "nothing new in 0 and 2; 1 left the session");
        // A wrong epoch (a repeated one) is refused and does not advance the session.
        assert_eq!(f(&mut c, (sid, 4), &[], &[], 0).0, 71, "INVALID_FETCH_SESSION_EPOCH");
        assert_eq!(f(&mut c, (sid, 9), &[], &[], 0).0, 71);
        assert_eq!(f(&mut c, (sid, 5), &[], &[], 0).0, 0, "the right epoch still works");
        assert_eq!(f(&mut c, (sid ^ 0x55, 1), &[], &[], 0).0, 70, "FETCH_SESSION_ID_NOT_FOUND");
        // Epoch -1 closes the session (and is answered as a sessionless full fetch).
        let (err, sid0, got) = f(&mut c, (sid, -1), &[(0, 0)], &[], 0);
        assert_eq!((err, sid0), (0, 0));
        assert_eq!(got.len(), 1);
        assert_eq!(f(&mut c, (sid, 6), &[], &[], 0).0, 70, "closed");
        // Sessions live in memory: after a restart a session id is unknown.
        let (_, sid, _) = f(&mut c, (0, 0), &[(0, 0)], &[], 0);
        assert_ne!(sid, 0);
        drop(c);
        k.restart();
        c = k.client();
        assert_eq!(f(&mut c, (sid, 1), &[], &[], 0).0, 70, "forgotten by the restart");
    }
}

/// DescribeTopicPartitions (KIP-966): topics in name order, paged by partition count with a
/// cursor, unknown names answered UNKNOWN_TOPIC_OR_PARTITION, every topic operation authorized.
#[test]
fn describe_topic_partitions_pages_with_a_cursor() {
    use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
    let k = Kaka::start("dtp", &[]);
    let mut c = k.client();
    assert_eq!(api_range(&mut c, 75), Some((0, 0)));
    create(&mut c, "dtp-a", 3);
    create(&mut c, "dtp-b", 2);
    let ask = |c: &mut Raw, names: &[&str], limit: i32, cursor: Option<(&str, i32)>| {
        let mut r = DescribeTopicPartitionsRequest::default();
        r.topics = names
            .iter()
            .map(|n| {
                let mut t = TopicRequest::default();
                t.name = tname(n);
                t
            })
            .collect();
        r.response_partition_limit = limit;
        r.cursor = cursor.map(|(t, p)| {
            let mut x = Cursor::default();
            x.topic_name = tname(t);
            x.partition_index = p;
            x
        });
        let resp: DescribeTopicPartitionsResponse = c.call(ApiKey::DescribeTopicPartitions, 0, &r);
        let topics: Vec<(String, i16, Vec<i32>, bool, i32)> = resp
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.as_ref().unwrap().to_string(),
                    t.error_code,
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                    !t.topic_id.is_nil(),
                    t.topic_authorized_operations,
                )
            })
            .collect();
        let next = resp.next_cursor.map(|c| (c.topic_name.to_string(), c.partition_index));
        (topics, next)
    };
    let ops = bits(&[3, 4, 5, 6, 7, 8, 10, 11]);
    let (topics, next) = ask(&mut c, &["nope", "dtp-b", "dtp-a"], 4, None);
    assert_eq!(
        topics,
        vec![("dtp-a".into(), 0, vec![0, 1, 2], true, ops), ("dtp-b".into(), 0, vec![0], true, ops)]
    );
    assert_eq!(next, Some(("dtp-b".into(), 1)));
    let (topics, next) = ask(&mut c, &["nope", "dtp-b", "dtp-a"], 4, Some(("dtp-b", 1)));
    assert_eq!(topics[0], ("dtp-b".into(), 0, vec![1], true, ops));
    assert_eq!((topics[1].0.as_str(), topics[1].1, topics[1].3), ("nope", 3, false));
    assert_eq!(next, None);
    // Every topic when none is named; a page ending with a topic points at the next one.
    let (topics, next) = ask(&mut c, &[], 3, None);
    assert_eq!(topics, vec![("dtp-a".into(), 0, vec![0, 1, 2], true, ops)]);
    assert_eq!(next, Some(("dtp-b".into(), 0)));
}
