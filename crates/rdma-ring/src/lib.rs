//! goblin-rdma: RESP over a pair of byte rings filled by one-sided RDMA writes.
//!
//! goblin-core's `--rdma-port` listener and `--replica-rdma HOST PORT SIZE` use it. The bytes on
//! the rings are exactly what a socket would carry (RESP2 requests in, replies out; the firehose
//! negotiation and its frames for a replica), so the server treats a connection like any other.
//!
//! # Connection
//!
//! A connection starts as a TCP connection to `--rdma-port`, which then stays open for two jobs,
//! as goblin-ring's rendezvous socket does: liveness (either side's EOF closes the connection,
//! whatever killed the peer) and, on the shared-memory fabric, the doorbell. The handshake
//! ([`hello`]) is one message each way: the server's hello is sent at accept time, the client
//! answers with its own. A hello names the fabric, the sender's *receive ring* size (a power of
//! two, 4096 bytes to 1 GiB) and the fabric's address of that ring (verbs: QP number, LID, GID,
//! virtual address and rkey; shared memory: process id and memfd descriptor number). Each side
//! chooses its own receive ring; `SIZE` in `--replica-rdma` is the replica's.
//!
//! # The ring protocol ([`Endpoint`])
//!
//! Each side owns one receive ring in registered memory. To send `n` bytes, the producer
//! RDMA-WRITEs them into the peer's ring at stream position `head % cap` (two writes when
//! the range wraps) **with an immediate value** `n`, and advances its private `head`. The
//! consumer learns of the bytes only from the immediate, which arrives as a receive completion
//! on its completion queue; it then copies them out and advances its private `tail`. Space is
//! returned by *credit* messages: a zero-length write with immediate `CREDIT | k` (bit 31 set)
//! telling the producer that `k` more bytes were consumed. A consumer sends one once a quarter
//! of its ring is unreported, so a producer waiting on a full ring is always answered: when it
//! is full, the peer has `cap` unreported bytes in front of it. Nothing else crosses the wire.
//!
//! # Why immediates, not a polled tail word (the ordering argument)
//!
//! On a reliable-connected queue pair the responder *places* RDMA writes in order, but the
//! InfiniBand specification (and RoCE, which inherits it) does not promise that the remote CPU
//! *observes* the bytes of one write, or of two consecutive writes, in that order: the HCA
//! may write PCIe lines in any order, and a polled tail word could become visible before the
//! payload it covers. The specification does promise that when a receive completion for an
//! RDMA WRITE WITH IMMEDIATE is delivered to the consumer's completion queue, the write's data
//! (and every earlier write on the queue pair) is in memory and visible to it. So the consumer
//! reads ring bytes only up to the sum of the data immediates it has polled (`avail`), never
//! beyond, and nothing it reads can be torn. Credits take the same path, so the producer never
//! trusts a word the peer wrote into its memory either. Two costs, both acceptable here: each
//! write consumes a posted receive (the verbs fabric re-posts one per completion it polls, and
//! the queue pair retries forever on "receiver not ready" instead of failing), and polling a
//! completion queue is a little dearer than polling a word.
//!
//! A hostile or buggy peer cannot make us read or write out of bounds: an immediate that
//! announces more bytes than the ring can hold (`avail + n - tail > cap`), or credits more than
//! was sent (`credit + k > head`), is [`Corrupt`] and closes the connection.
//!
//! # Sleeping
//!
//! A side with nothing to do may sleep. It *arms* its fabric first ([`fabric::Fabric::arm`]:
//! verbs requests a completion-channel event with `ibv_req_notify_cq`, then polls once more;
//! the shared-memory fabric sets a wake-me bit) and sleeps only if nothing arrived meanwhile.
//! The wake-up is then the completion channel's descriptor (verbs) or a doorbell byte on the
//! TCP socket (shared memory; the eventcount argument of goblin-ring's ring.rs, unchanged).
//!
//! # Fabrics
//!
//! [`fabric::Fabric`] is the one-sided write, the immediate queue and the wake-up: everything
//! the protocol needs from the hardware. [`shm::ShmFabric`] performs the same one-sided writes
//! into a peer's memfd mapping (same host; for tests and hosts without an RDMA NIC; it has an
//! adversarial mode in which a write's bytes land in random order, over garbage, and complete
//! later, which is what the immediates must protect against). With cargo feature `rdma`,
//! [`verbs::VerbsFabric`] drives an RC queue pair through libibverbs.

pub mod fabric;
pub mod hello;
pub mod shm;
#[cfg(feature = "rdma")]
pub mod verbs;

mod client;
mod endpoint;

pub use client::Client;
pub use endpoint::{dial, Endpoint};
pub use fabric::{Corrupt, FabricKind};

/// Receive ring sizes accepted: a power of two in this range (as goblin-ring's rings).
pub const MIN_RING: u64 = 4096;
pub const MAX_RING: u64 = 1 << 30;

pub fn valid_ring_size(n: u64) -> bool {
    n.is_power_of_two() && (MIN_RING..=MAX_RING).contains(&n)
}

/// Bit 31 of an immediate: a credit (bytes consumed), else data (bytes written).
pub const CREDIT: u32 = 1 << 31;
