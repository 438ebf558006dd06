//! The Kafka write journal (the seed's "Kafka write log"): where the durable history of a
//! primary goes, and where recovery reads it back.
//!
//! - [`target`]: the `--kafka` value (URI or connection string), with the properties
//!   goblin-core owns refused by name.
//! - [`kafka`] (cargo feature `kafka`, on by default): the producer behind the batch sink, the
//!   startup topic checks, and the startup replay.
//! - [`producer`]: the librdkafka producer in event mode, whose delivery reports the server
//!   thread serves in broker ack mode.
//! - [`reports`]: delivery reports summed, and the thread that serves them in queued ack mode.
//! - [`sender`]: the thread that hands the server thread's records to librdkafka, and in
//!   broker ack mode asks for each group to be sent.
//! - [`reader`]: the startup replay's reader thread, which takes records from librdkafka and
//!   decodes their headers off the server thread.
//! - [`kafka::Consumer`]: the running primary's consumer of its own topic, which applies other
//!   producers' writes (DESIGN.md decision 3) and stops the server on a record it cannot apply
//!   or on a second primary's record.

#[cfg(feature = "kafka")]
pub mod kafka;
#[cfg(feature = "kafka")]
mod producer;
#[cfg(feature = "kafka")]
mod reader;
#[cfg(feature = "kafka")]
mod reports;
#[cfg(feature = "kafka")]
mod sender;
pub mod target;
