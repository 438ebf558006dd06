//! Firehose replication: every committed batch streamed live from a goblin-core server to its
//! read-only replicas (and theirs: chains), with Kafka and snapshots as the durable history a
//! replica catches up from.
//!
//! - [`frame`]: the wire format (hello, batch frames, acknowledgements) and its decoder;
//! - [`queue`]: the fixed, prefaulted byte queue of each subscriber and of the handoff;
//! - [`upstream`]: GOBLIN.FIREHOSE subscribers, the batch sink that feeds them, WAIT;
//! - [`replica`]: the upstream link, the startup handoff, the reconnect rules, INFO and ROLE;
//! - [`unconfirmed`]: what a replica applied before Kafka held it, checked on its next catch-up;
//! - [`redis_replicas`]: Redis's own protocol (SYNC / PSYNC), for redis-server replicas;
//! - [`redis_primary`]: the same protocol from the other side: this server a replica of a
//!   redis-server (REPLICAOF), to move a Redis deployment onto goblin-core live;
//! - [`failover`]: FAILOVER, the primary role handed to a replica on Redis's protocol.

pub mod failover;
pub mod frame;
pub mod queue;
pub mod redis_primary;
pub mod redis_replicas;
pub mod replica;
pub mod unconfirmed;
pub mod upstream;
