//! Command handlers, one module per data type, each with its own table of specs.

pub mod array;
pub mod bits;
pub mod cas;
pub mod debug;
pub mod dump;
pub mod geo;
pub mod hash;
pub mod hash_ttl;
pub mod hll;
pub mod increx;
pub mod keyspace;
pub mod lcs;
pub mod list;
pub mod long_double;
pub mod scan;
pub mod server;
pub mod set;
pub mod sort;
pub mod stream;
pub mod stream_group;
pub mod stream_idmp;
pub mod stream_refs;
pub mod string;
pub mod vset;
pub mod vset_filter;
pub mod zset;

use crate::command::CommandSpec;

/// Every module's table; the command table is their concatenation.
pub static TABLES: &[&[CommandSpec]] = &[
    server::COMMANDS,
    keyspace::COMMANDS,
    dump::COMMANDS,
    string::COMMANDS,
    increx::COMMANDS,
    bits::COMMANDS,
    hash::COMMANDS,
    hash_ttl::COMMANDS,
    set::COMMANDS,
    zset::COMMANDS,
    list::COMMANDS,
    array::COMMANDS,
    cas::COMMANDS,
    sort::COMMANDS,
    hll::COMMANDS,
    geo::COMMANDS,
    lcs::COMMANDS,
    stream::COMMANDS,
    stream_group::COMMANDS,
    stream_refs::COMMANDS,
    stream_idmp::COMMANDS,
    vset::COMMANDS,
];
