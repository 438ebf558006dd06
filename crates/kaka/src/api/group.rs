//! FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
//! ListGroups, DescribeGroups: decode, ask the coordinator task (groups.rs), encode.

use bytes::BytesMut;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::*;

use super::{str_bytes, topic_name, Req};
use crate::errors;
use crate::groups::{Committed, JoinArgs};
use crate::wire;

pub fn find_coordinator(req: &Req, r: FindCoordinatorRequest) -> BytesMut {
    let mut resp = FindCoordinatorResponse::default();
    if !matches!(r.key_type, 0 | 1) {
        // 0 group, 1 transaction; nothing else exists (2 was share groups in later Kafka).
        resp.error_code = errors::INVALID_REQUEST;
        resp.node_id = BrokerId(-1);
        resp.host = str_bytes("");
        resp.port = -1;
        if req.version >= 1 {
            resp.error_message = Some(str_bytes("unknown coordinator key type"));
        }
    } else {
        // This node coordinates every group and every transactional id.
        resp.node_id = BrokerId(0);
        resp.host = str_bytes(&req.broker.cfg.advertised_host);
        resp.port = req.broker.cfg.advertised_port;
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

pub async fn join(req: &Req, r: JoinGroupRequest) -> BytesMut {
    let args = JoinArgs {
        group: r.group_id.0.to_string(),
        member_id: r.member_id.to_string(),
        instance_id: r.group_instance_id.as_ref().map(|s| s.to_string()),
        client_id: req.client_id.clone(),
        client_host: req.client_host.clone(),
        session_timeout_ms: r.session_timeout_ms,
        rebalance_timeout_ms: if req.version >= 1 { r.rebalance_timeout_ms } else { r.session_timeout_ms },
        protocol_type: r.protocol_type.to_string(),
        protocols: r.protocols.into_iter().map(|p| (p.name.to_string(), p.metadata)).collect(),
    };
    let res = req.broker.groups.join(args).await;
    let mut resp = JoinGroupResponse::default();
    resp.error_code = res.error;
    resp.generation_id = res.generation;
    if req.version >= 7 {
        resp.protocol_type = res.protocol_type.as_deref().map(str_bytes);
    }
    // Before v7 the protocol name is a non-nullable string.
    resp.protocol_name = Some(str_bytes(res.protocol_name.as_deref().unwrap_or("")));
    resp.leader = str_bytes(&res.leader);
    resp.member_id = str_bytes(&res.member_id);
    resp.members = res
        .members
        .into_iter()
        .map(|(id, inst, md)| {
            let mut m = JoinGroupResponseMember::default();
            m.member_id = str_bytes(&id);
            m.group_instance_id = inst.as_deref().map(str_bytes);
            m.metadata = md;
            m
        })
        .collect();
    wire::encode(req.correlation_id, req.version, &resp)
}

pub async fn sync(req: &Req, r: SyncGroupRequest) -> BytesMut {
    let assignments = r.assignments.into_iter().map(|a| (a.member_id.to_string(), a.assignment)).collect();
    let res = req
        .broker
        .groups
        .sync(
            r.group_id.0.to_string(),
            r.generation_id,
            r.member_id.to_string(),
            r.group_instance_id.as_ref().map(|s| s.to_string()),
            assignments,
        )
        .await;
    let mut resp = SyncGroupResponse::default();
    resp.error_code = res.error;
    resp.assignment = res.assignment;
    if req.version >= 5 {
        resp.protocol_type = res.protocol_type.as_deref().map(str_bytes);
        resp.protocol_name = res.protocol_name.as_deref().map(str_bytes);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

pub async fn heartbeat(req: &Req, r: HeartbeatRequest) -> BytesMut {
    let code = req
        .broker
        .groups
        .heartbeat(
            r.group_id.0.to_string(),
            r.generation_id,
            r.member_id.to_string(),
            r.group_instance_id.as_ref().map(|s| s.to_string()),
        )
        .await;
    let mut resp = HeartbeatResponse::default();
    resp.error_code = code;
    wire::encode(req.correlation_id, req.version, &resp)
}

pub async fn leave(req: &Req, r: LeaveGroupRequest) -> BytesMut {
    let mut ids: Vec<String> = r.members.iter().map(|m| m.member_id.to_string()).collect();
    if req.version < 3 {
        ids = vec![r.member_id.to_string()];
    }
    let codes = req.broker.groups.leave(r.group_id.0.to_string(), ids.clone()).await;
    let mut resp = LeaveGroupResponse::default();
    if req.version < 3 {
        resp.error_code = codes.first().copied().unwrap_or(errors::UNKNOWN_MEMBER_ID);
    } else {
        resp.members = ids
            .iter()
            .zip(codes)
            .map(|(id, code)| {
                let mut m = MemberResponse::default();
                m.member_id = str_bytes(id);
                m.error_code = code;
                m
            })
            .collect();
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

pub async fn offset_commit(req: &Req, r: OffsetCommitRequest) -> BytesMut {
    let mut offsets = Vec::new();
    let mut unknown = Vec::new();
    for t in &r.topics {
        let topic = req.broker.topic(&t.name.0);
        for p in &t.partitions {
            let exists = topic.as_ref().is_some_and(|tp| (p.partition_index as usize) < tp.partitions.len());
            if exists {
                offsets.push((
                    t.name.0.to_string(),
                    p.partition_index,
                    Committed {
                        offset: p.committed_offset,
                        // v6+ carries it (the protocol crate decodes -1 below that).
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                    },
                ));
            } else {
                unknown.push((t.name.0.to_string(), p.partition_index));
            }
        }
    }
    let code = if offsets.is_empty() {
        errors::NONE
    } else {
        req.broker
            .groups
            .commit(
                r.group_id.0.to_string(),
                r.generation_id_or_member_epoch,
                r.member_id.to_string(),
                offsets,
            )
            .await
    };
    let mut resp = OffsetCommitResponse::default();
    for t in r.topics {
        let mut tr = OffsetCommitResponseTopic::default();
        for p in &t.partitions {
            let mut pr = OffsetCommitResponsePartition::default();
            pr.partition_index = p.partition_index;
            let missing = unknown.iter().any(|(n, i)| *n == *t.name.0 && *i == p.partition_index);
            pr.error_code = if missing { errors::UNKNOWN_TOPIC_OR_PARTITION } else { code };
            tr.partitions.push(pr);
        }
        tr.name = t.name;
        resp.topics.push(tr);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

pub async fn offset_fetch(req: &Req, r: OffsetFetchRequest) -> BytesMut {
    let topics = r
        .topics
        .map(|ts| ts.into_iter().map(|t| (t.name.0.to_string(), t.partition_indexes)).collect::<Vec<_>>());
    let group = r.group_id.0.to_string();
    // v7+ require_stable (read_committed consumers): offsets an undecided transaction holds
    // for this group are UNSTABLE_OFFSET_COMMIT (retriable) rather than the old value.
    let unstable = if req.version >= 7 && r.require_stable {
        req.broker.txns.pending_offsets(&group)
    } else {
        Default::default()
    };
    let entries = req.broker.groups.fetch(group, topics).await;
    let mut resp = OffsetFetchResponse::default();
    let mut by_topic: Vec<OffsetFetchResponseTopic> = Vec::new();
    for (t, p, c) in entries {
        let idx = match by_topic.iter().position(|x| *x.name.0 == *t) {
            Some(i) => i,
            None => {
                let mut tr = OffsetFetchResponseTopic::default();
                tr.name = topic_name(&t);
                by_topic.push(tr);
                by_topic.len() - 1
            }
        };
        let mut pr = OffsetFetchResponsePartition::default();
        pr.partition_index = p;
        pr.committed_offset = c.offset;
        pr.committed_leader_epoch = c.leader_epoch;
        // A missing offset is -1 with an empty (non-null before v?) metadata and no error.
        pr.metadata = Some(str_bytes(c.metadata.as_deref().unwrap_or("")));
        if unstable.contains(&(t.clone(), p)) {
            pr.error_code = errors::UNSTABLE_OFFSET_COMMIT;
            pr.committed_offset = -1;
        }
        by_topic[idx].partitions.push(pr);
    }
    resp.topics = by_topic;
    wire::encode(req.correlation_id, req.version, &resp)
}

pub async fn list_groups(req: &Req, r: ListGroupsRequest) -> BytesMut {
    let mut resp = ListGroupsResponse::default();
    // v4+: an empty filter lists every state; otherwise only the states named. v5+ (KIP-848):
    // likewise for group types; every group here is a classic one. Both compare without case,
    // as Kafka 4 does.
    let wanted: Vec<String> = r.states_filter.iter().map(|s| s.to_lowercase()).collect();
    let types: Vec<String> = r.types_filter.iter().map(|s| s.to_lowercase()).collect();
    if !types.is_empty() && !types.iter().any(|t| t == "classic") {
        return wire::encode(req.correlation_id, req.version, &resp);
    }
    for g in req.broker.groups.describe(None).await {
        if !wanted.is_empty() && !wanted.iter().any(|w| *w == g.state.to_lowercase()) {
            continue;
        }
        let mut l = ListedGroup::default();
        l.group_id = GroupId(str_bytes(&g.group));
        l.protocol_type = str_bytes(&g.protocol_type);
        if req.version >= 4 {
            l.group_state = str_bytes(g.state);
        }
        if req.version >= 5 {
            l.group_type = str_bytes("classic");
        }
        resp.groups.push(l);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

pub async fn describe_groups(req: &Req, r: DescribeGroupsRequest) -> BytesMut {
    let names: Vec<String> = r.groups.iter().map(|g| g.0.to_string()).collect();
    let mut resp = DescribeGroupsResponse::default();
    for g in req.broker.groups.describe(Some(names)).await {
        let mut d = DescribedGroup::default();
        d.group_id = GroupId(str_bytes(&g.group));
        if g.group.is_empty() {
            d.error_code = errors::INVALID_GROUP_ID;
        }
        d.group_state = str_bytes(g.state);
        d.protocol_type = str_bytes(&g.protocol_type);
        d.protocol_data = str_bytes(&g.protocol);
        if req.version >= 3 {
            // No authorizer: every group operation, as Kafka reports without one, when asked.
            d.authorized_operations = if r.include_authorized_operations {
                super::GROUP_OPERATIONS
            } else {
                super::OPERATIONS_NOT_REQUESTED
            };
        }
        d.members = g
            .members
            .into_iter()
            .map(|m| {
                let mut dm = DescribedGroupMember::default();
                dm.member_id = str_bytes(&m.member_id);
                if req.version >= 4 {
                    dm.group_instance_id = m.instance_id.as_deref().map(str_bytes);
                }
                dm.client_id = str_bytes(&m.client_id);
                dm.client_host = str_bytes(&m.client_host);
                dm.member_metadata = m.metadata;
                dm.member_assignment = m.assignment;
                dm
            })
            .collect();
        resp.groups.push(d);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

/// DeleteGroups: empty groups go, with their committed offsets.
pub async fn delete_groups(req: &Req, r: DeleteGroupsRequest) -> BytesMut {
    let names: Vec<String> = r.groups_names.iter().map(|g| g.0.to_string()).collect();
    let codes = req.broker.groups.delete_groups(names).await;
    let mut resp = DeleteGroupsResponse::default();
    for (g, code) in r.groups_names.into_iter().zip(codes) {
        let mut d = delete_groups_response::DeletableGroupResult::default();
        d.group_id = g;
        d.error_code = code;
        resp.results.push(d);
    }
    wire::encode(req.correlation_id, req.version, &resp)
}

/// OffsetDelete: one group's offsets for the named partitions go, unless its live members
/// subscribe to the topic.
pub async fn offset_delete(req: &Req, r: OffsetDeleteRequest) -> BytesMut {
    let wanted: Vec<(String, i32)> = r
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), p.partition_index)))
        .collect();
    let (code, codes) = req.broker.groups.delete_offsets(r.group_id.0.to_string(), wanted).await;
    let mut resp = OffsetDeleteResponse::default();
    resp.error_code = code;
    if code == errors::NONE {
        let mut codes = codes.into_iter();
        for t in r.topics {
            let mut rt = offset_delete_response::OffsetDeleteResponseTopic::default();
            rt.name = t.name;
            for p in t.partitions {
                let mut rp = offset_delete_response::OffsetDeleteResponsePartition::default();
                rp.partition_index = p.partition_index;
                rp.error_code = codes.next().unwrap_or(errors::NONE);
                rt.partitions.push(rp);
            }
            resp.topics.push(rt);
        }
    }
    wire::encode(req.correlation_id, req.version, &resp)
}
