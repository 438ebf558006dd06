//! The Kafka write journal (the seed's "Kafka write log"): where the durable history of a
//! primary goes, and where recovery reads it back.
//!
//! - [`target`]: the `--kafka` value (URI or connection string), with the properties
//!   goblin-core owns refused by name.
//! - [`kafka`] (cargo feature `kafka`, on by default): the producer behind the batch sink, the
//!   startup topic checks, and the startup replay.
//!
//! What exists so far: `--kafka-ack-mode queued` (replies are released when the record is in
//! librdkafka's queue); records of goblin lineages only (another producer's records stop the
//! replay with an error saying so); no runtime consumption of the topic.

#[cfg(feature = "kafka")]
pub mod kafka;
pub mod target;
