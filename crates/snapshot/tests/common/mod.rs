//! Helpers shared by the snapshot tests.
#![allow(dead_code)]

use engine::Engine;
use snapshot::Meta;
use std::collections::BTreeMap;
use store::{Keyspace, Plain};

/// Runs one command through the engine (its reply is not checked: errors such as WRONGTYPE
/// are part of a random workload).
pub fn run(e: &mut Engine, args: &[Vec<u8>], now: i64) {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let mut out = Vec::new();
    e.run(&args, now, &mut out);
}

/// The whole keyspace as comparable data: key -> (value, deadline).
pub fn dump(ks: &Keyspace) -> BTreeMap<Vec<u8>, (Plain, Option<i64>)> {
    let mut m = BTreeMap::new();
    ks.for_each(|k, v, at| {
        m.insert(k.to_vec(), (v.to_plain(), at));
    });
    m
}

pub fn meta() -> Meta {
    Meta {
        server_version: "goblin-core 0.1.0 test".into(),
        created_unix_ms: 1_700_000_000_123,
        replid: "0123456789abcdef0123456789abcdef01234567".into(),
        logical_offset: 987_654_321,
        kafka_acked_offset: 4242,
        kafka_consumer_position: -1,
        functions: Vec::new(),
        unconfirmed: Vec::new(),
        previous: None,
    }
}

/// Recomputes a block's checksums after its payload was edited (a crafted file).
pub fn reseal(file: &mut [u8], blk: &snapshot::BlockInfo) {
    let o = blk.offset as usize;
    let end = o + 24 + blk.stored_len as usize;
    let pc = crc32c::crc32c(&file[o + 24..end]);
    file[o + 16..o + 20].copy_from_slice(&pc.to_le_bytes());
    let hc = crc32c::crc32c(&file[o..o + 20]);
    file[o + 20..o + 24].copy_from_slice(&hc.to_le_bytes());
}

/// A block with its header (uncompressed, CRCs computed), for files crafted by hand.
pub fn sealed_block(kind: u8, index: u32, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![kind, 0, 0, 0];
    h.extend_from_slice(&index.to_le_bytes());
    h.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    h.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    h.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    let hc = crc32c::crc32c(&h);
    h.extend_from_slice(&hc.to_le_bytes());
    h.extend_from_slice(payload);
    h
}
