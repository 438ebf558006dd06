//! The Kafka write journal (the seed's "Kafka write log"): where the durable history of a
//! primary goes, and where recovery reads it back. Built in steps; what exists so far:
//!
//! - [`target`]: the `--kafka` value (URI or connection string), with the properties
//!   goblin-core owns refused by name.
//!
//! Until the producer and the recovery path land, a valid `--kafka` is refused at startup
//! with a message saying so (`Config::validate`).

pub mod target;
