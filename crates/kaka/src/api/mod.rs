//! Request dispatch: decode one request, run its handler, encode its response.
//!
//! `dispatch` runs on the connection's reader, in request order. Anything whose effect must
//! keep the connection's order (Produce enqueues its batches to the partition owners) happens
//! inside `dispatch` before it returns; the rest of the work (waiting for acks, long-poll
//! fetches, group rebalances) runs in a spawned task whose response the writer sends in
//! request order.

mod admin;
mod fetch;
mod group;
mod produce;
mod txn;

use std::future::Future;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestKind};
use kafka_protocol::protocol::decode_request_header_from_buffer;
use tokio::sync::oneshot;

use crate::broker::Broker;
use crate::wire::{self, Outgoing, RawHeader};

/// What the connection does with a request.
pub enum Outcome {
    /// A response (or None for acks=0 Produce) will arrive on this channel.
    Reply(oneshot::Receiver<Option<Outgoing>>),
    /// The request could not be decoded: close the connection, as Kafka does.
    Close(String),
}

/// Context a handler needs besides the request.
pub struct Req {
    pub broker: Arc<Broker>,
    pub correlation_id: i32,
    pub version: i16,
    pub client_id: String,
    /// The client's address, for DescribeGroups (Kafka writes it `/host`).
    pub client_host: String,
}

fn ready(b: Option<BytesMut>) -> Outcome {
    let (tx, rx) = oneshot::channel();
    let _ = tx.send(b.map(Outgoing::Frame));
    Outcome::Reply(rx)
}

fn spawn<F>(f: F) -> Outcome
where
    F: Future<Output = Option<BytesMut>> + Send + 'static,
{
    spawn_outgoing(async move { f.await.map(Outgoing::Frame) })
}

fn spawn_outgoing<F>(f: F) -> Outcome
where
    F: Future<Output = Option<Outgoing>> + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let _ = tx.send(f.await);
    });
    Outcome::Reply(rx)
}

pub fn dispatch(
    broker: &Arc<Broker>,
    peer: &std::net::SocketAddr,
    raw: RawHeader,
    mut frame: Bytes,
) -> Outcome {
    // ApiVersions first: a client may send a newer version than we know; it must get a v0
    // body listing our ranges (KIP-511) so it can retry with a version we speak.
    if raw.api_key == wire::API_VERSIONS_KEY && !wire::supported(raw.api_key, raw.api_version) {
        tracing::debug!(version = raw.api_version, "ApiVersions version unsupported; answering v0");
        return ready(Some(admin::api_versions_fallback(raw.correlation_id)));
    }
    if !wire::supported(raw.api_key, raw.api_version) {
        tracing::warn!(
            api_key = raw.api_key,
            version = raw.api_version,
            known = wire::known_key(raw.api_key),
            "unsupported API key or version; answering UNSUPPORTED_VERSION"
        );
        return ready(Some(wire::unsupported(raw.correlation_id)));
    }
    let header = match decode_request_header_from_buffer(&mut frame) {
        Ok(h) => h,
        Err(e) => return Outcome::Close(format!("bad request header: {e}")),
    };
    let Ok(api_key) = ApiKey::try_from(raw.api_key) else {
        return ready(Some(wire::unsupported(raw.correlation_id)));
    };
    let body = match RequestKind::decode(api_key, &mut frame, raw.api_version) {
        Ok(b) => b,
        Err(e) => return Outcome::Close(format!("bad {api_key:?} v{} request: {e}", raw.api_version)),
    };
    let req = Req {
        broker: broker.clone(),
        correlation_id: raw.correlation_id,
        version: raw.api_version,
        client_id: header.client_id.as_deref().unwrap_or("").to_string(),
        client_host: format!("/{}", peer.ip()),
    };
    match body {
        RequestKind::ApiVersions(_) => ready(Some(admin::api_versions(&req))),
        RequestKind::Metadata(r) => ready(Some(admin::metadata(&req, r))),
        RequestKind::CreateTopics(r) => ready(Some(admin::create_topics(&req, r))),
        RequestKind::DeleteTopics(r) => spawn(async move { Some(admin::delete_topics(&req, r).await) }),
        RequestKind::InitProducerId(r) => spawn(async move { Some(admin::init_producer_id(&req, r).await) }),
        RequestKind::ListOffsets(r) => spawn(async move { Some(admin::list_offsets(&req, r).await) }),
        RequestKind::OffsetForLeaderEpoch(r) => ready(Some(admin::offset_for_leader_epoch(&req, r))),
        RequestKind::Produce(r) => match produce::start(req, r) {
            produce::Started::NoResponse => ready(None),
            produce::Started::Pending(fut) => spawn(fut),
        },
        RequestKind::Fetch(r) => spawn_outgoing(async move { Some(fetch::fetch(&req, r).await) }),
        RequestKind::FindCoordinator(r) => ready(Some(group::find_coordinator(&req, r))),
        RequestKind::JoinGroup(r) => spawn(async move { Some(group::join(&req, r).await) }),
        RequestKind::SyncGroup(r) => spawn(async move { Some(group::sync(&req, r).await) }),
        RequestKind::Heartbeat(r) => spawn(async move { Some(group::heartbeat(&req, r).await) }),
        RequestKind::LeaveGroup(r) => spawn(async move { Some(group::leave(&req, r).await) }),
        RequestKind::OffsetCommit(r) => spawn(async move { Some(group::offset_commit(&req, r).await) }),
        RequestKind::OffsetFetch(r) => spawn(async move { Some(group::offset_fetch(&req, r).await) }),
        RequestKind::ListGroups(r) => spawn(async move { Some(group::list_groups(&req, r).await) }),
        RequestKind::DescribeGroups(r) => spawn(async move { Some(group::describe_groups(&req, r).await) }),
        RequestKind::DeleteGroups(r) => spawn(async move { Some(group::delete_groups(&req, r).await) }),
        RequestKind::OffsetDelete(r) => spawn(async move { Some(group::offset_delete(&req, r).await) }),
        RequestKind::DescribeConfigs(r) => ready(Some(admin::describe_configs(&req, r))),
        RequestKind::AlterConfigs(r) => ready(Some(admin::alter_configs(&req, r))),
        RequestKind::CreatePartitions(r) => ready(Some(admin::create_partitions(&req, r))),
        RequestKind::DescribeLogDirs(r) => ready(Some(admin::describe_log_dirs(&req, r))),
        RequestKind::DescribeCluster(r) => ready(Some(admin::describe_cluster(&req, r))),
        RequestKind::DeleteRecords(r) => spawn(async move { Some(admin::delete_records(&req, r).await) }),
        RequestKind::IncrementalAlterConfigs(r) => ready(Some(admin::incremental_alter_configs(&req, r))),
        RequestKind::AddPartitionsToTxn(r) => spawn(async move { Some(txn::add_partitions(&req, r).await) }),
        RequestKind::AddOffsetsToTxn(r) => spawn(async move { Some(txn::add_offsets(&req, r).await) }),
        RequestKind::TxnOffsetCommit(r) => spawn(async move { Some(txn::txn_offset_commit(&req, r).await) }),
        RequestKind::EndTxn(r) => spawn(async move { Some(txn::end_txn(&req, r).await) }),
        RequestKind::ListTransactions(r) => ready(Some(txn::list_transactions(&req, r))),
        RequestKind::DescribeTransactions(r) => ready(Some(txn::describe_transactions(&req, r))),
        RequestKind::DescribeTopicPartitions(r) => ready(Some(admin::describe_topic_partitions(&req, r))),
        RequestKind::DescribeAcls(_) => ready(Some(admin::describe_acls(&req))),
        RequestKind::CreateAcls(r) => ready(Some(admin::create_acls(&req, r))),
        RequestKind::DeleteAcls(r) => ready(Some(admin::delete_acls(&req, r))),
        _ => ready(Some(wire::unsupported(raw.correlation_id))),
    }
}

/// Authorized-operation bit sets (bit n = AclOperation code n) that Kafka reports when it has
/// no authorizer: every operation its `AclEntry.supportedOperations` lists for the resource.
/// Topic: READ(3) WRITE(4) CREATE(5) DELETE(6) ALTER(7) DESCRIBE(8) DESCRIBE_CONFIGS(10)
/// ALTER_CONFIGS(11).
pub const TOPIC_OPERATIONS: i32 =
    (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11);
/// Cluster: CREATE(5) ALTER(7) DESCRIBE(8) CLUSTER_ACTION(9) DESCRIBE_CONFIGS(10)
/// ALTER_CONFIGS(11) IDEMPOTENT_WRITE(12).
pub const CLUSTER_OPERATIONS: i32 =
    (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);
/// Group (Kafka 4, with KIP-848 group configs): READ(3) DELETE(6) DESCRIBE(8)
/// DESCRIBE_CONFIGS(10) ALTER_CONFIGS(11).
pub const GROUP_OPERATIONS: i32 = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11);
/// The value of an authorized-operations field the client did not ask for.
pub const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

pub fn str_bytes(s: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(s.to_string())
}

pub fn topic_name(s: &str) -> kafka_protocol::messages::TopicName {
    kafka_protocol::messages::TopicName(str_bytes(s))
}
