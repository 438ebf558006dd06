//! Redis's DUMP payload: one value in the RDB value encoding, then a footer.
//!
//! ```text
//! payload = <type byte> <value> <RDB version: u16 LE> <CRC64 of everything before it: u64 LE>
//! ```
//!
//! [`dump`] writes the simplest encodings Redis 7.0 loads (string, plain list, plain set,
//! hash, zset 2 with binary scores, and streams as listpack nodes: `rdb/stream.rs`), with
//! strings int-encoded or LZF-compressed where Redis would (`put_str`), and a hash with field
//! deadlines as Redis 7.4's type 24;
//! [`restore`] reads those and every compact encoding Redis 7.0.15's DUMP emits (int-encoded
//! and LZF-compressed strings, quicklist 2 of listpacks, intsets, listpack hashes and sorted
//! sets), plus the older ziplist/quicklist forms, Redis 5/6 streams and 7.2's listpack sets
//! and streams. Nothing here trusts the payload: every length is checked against the bytes
//! that are left, every structure against its own header, and a malformed payload is a
//! [`DecodeError`], never a panic or a huge allocation.
//!
//! [`write_rdb_file`] writes a whole RDB file from the same value encodings (SYNC, for
//! `redis-cli --rdb`).
//!
//! Arrays (Redis 8.8) have no RDB encoding in our notes, so goblin gives them its own type byte,
//! [`TYPE_GOBLIN_ARRAY`], which Redis refuses with `Bad data format` (see docs/FORMAT.md).

mod stream;

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use store::types::hash::HashRecords;
use store::types::set::SetRecords;
use store::types::{Hash, List, Set, SparseArray, ZSet};
use store::{StrRef, Value, ValueRef};

/// The RDB version DUMP writes: Redis 7.0's.
pub const RDB_VERSION: u16 = 10;
/// The newest RDB version RESTORE accepts. Redis 7.0 stops at 10; goblin also takes 11 and 12
/// (Redis 7.2 and 7.4) payloads, whose value encodings it reads as far as it knows them.
pub const MAX_RDB_VERSION: u16 = 12;

const TYPE_STRING: u8 = 0;
const TYPE_LIST: u8 = 1;
const TYPE_SET: u8 = 2;
const TYPE_ZSET: u8 = 3;
const TYPE_HASH: u8 = 4;
const TYPE_ZSET_2: u8 = 5;
/// Redis 2.0-2.4's small hashes (`zipmap`), loaded as any hash.
const TYPE_HASH_ZIPMAP: u8 = 9;
const TYPE_LIST_ZIPLIST: u8 = 10;
const TYPE_SET_INTSET: u8 = 11;
const TYPE_ZSET_ZIPLIST: u8 = 12;
const TYPE_HASH_ZIPLIST: u8 = 13;
const TYPE_LIST_QUICKLIST: u8 = 14;
const TYPE_HASH_LISTPACK: u8 = 16;
const TYPE_ZSET_LISTPACK: u8 = 17;
const TYPE_LIST_QUICKLIST_2: u8 = 18;
const TYPE_SET_LISTPACK: u8 = 20;
/// Redis 7.4+ (RDB 12): a hash with field deadlines, as a table ...
const TYPE_HASH_METADATA: u8 = 24;
/// ... and as a listpack of (field, value, deadline) triplets.
const TYPE_HASH_LISTPACK_EX: u8 = 25;
/// The RDB version of a payload or file that holds a hash with field deadlines.
pub const RDB_VERSION_FIELD_DEADLINES: u16 = 12;
/// Goblin's sparse array: `len(count) len(cursor) (len(index) string(value))*count`, indexes
/// strictly ascending. Outside every type number Redis has used (they stop below 30) and below
/// its file opcodes (245 and up), so a Redis RESTORE answers `Bad data format`.
pub const TYPE_GOBLIN_ARRAY: u8 = 200;
/// A vector set in goblin's own form (`VectorSet::encode`: the graph as it is, names and
/// attributes). Redis keeps its vector sets as a module type whose layout is its HNSW's own;
/// goblin does not write that, so these values, like arrays, travel only between goblins.
pub const TYPE_GOBLIN_VSET: u8 = 201;
/// A module value (RDB 8+: the module's 64-bit id, then opcode-tagged fields, then EOF).
const TYPE_MODULE_2: u8 = 7;
/// Redis's vector sets' module id: the name `vectorset` in Redis's 6-bit module-name alphabet,
/// shifted over a 10-bit encoding version of 0 (as redis-server 8.2 writes it in RDB files and
/// DUMP payloads).
const VECTORSET_MODULE_ID: u64 = 0xbde7_2da2_bb1e_b400;
/// Module field opcodes.
const MODULE_OPCODE_EOF: u8 = 0;
const MODULE_OPCODE_UINT: u8 = 2;
const MODULE_OPCODE_STRING: u8 = 5;

/// Quicklist 2 node containers.
const QUICKLIST_PLAIN: u64 = 1;
const QUICKLIST_PACKED: u64 = 2;

/// Why RESTORE refused a payload; each maps to Redis's error text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// Too short for the footer, a newer RDB version, or a checksum mismatch.
    VersionOrChecksum,
    /// The checksum holds but the value is not one goblin can load.
    BadFormat,
    /// A collection with no element (old Redis versions could save one): an RDB file's load
    /// skips the key, as Redis's does; [`restore`] answers `BadFormat` for it.
    EmptyKey,
}

/// Where a refused RESTORE payload is reported (`set_refused_payload_hook`): the engine does
/// not log, the server does.
static REFUSED_PAYLOAD_HOOK: std::sync::OnceLock<fn(&str)> = std::sync::OnceLock::new();

/// Has every RESTORE payload refused as malformed reported to `hook`, with the check it
/// failed in Redis's words (`Hash ziplist integrity check failed`), which operators and
/// Redis's tests look for in the log. Set once, at startup.
pub fn set_refused_payload_hook(hook: fn(&str)) {
    let _ = REFUSED_PAYLOAD_HOOK.set(hook);
}

/// `hide-user-data-from-log`: messages name keys as `*redacted*` (see [`shown_key`]).
static HIDE_KEY_NAMES: AtomicBool = AtomicBool::new(false);

pub fn set_hide_key_names(on: bool) {
    HIDE_KEY_NAMES.store(on, Ordering::Relaxed);
}

/// A key as messages for the log name it: its bytes as text, or `*redacted*` while
/// `hide-user-data-from-log` is on (key names are user data).
pub fn shown_key(key: &[u8]) -> String {
    if HIDE_KEY_NAMES.load(Ordering::Relaxed) {
        "*redacted*".to_string()
    } else {
        String::from_utf8_lossy(key).into_owned()
    }
}

/// The name Redis's integrity checks give the encoding of RDB type `ty`.
pub fn encoding_name(ty: u8) -> &'static str {
    match ty {
        TYPE_STRING => "String",
        TYPE_LIST => "List",
        TYPE_SET => "Set",
        TYPE_ZSET | TYPE_ZSET_2 => "Zset",
        TYPE_HASH | TYPE_HASH_METADATA => "Hash",
        TYPE_HASH_ZIPMAP => "Zipmap",
        TYPE_LIST_ZIPLIST => "List ziplist",
        TYPE_SET_INTSET => "Intset",
        TYPE_ZSET_ZIPLIST => "Zset ziplist",
        TYPE_HASH_ZIPLIST => "Hash ziplist",
        TYPE_LIST_QUICKLIST => "Quicklist ziplist",
        TYPE_HASH_LISTPACK | TYPE_HASH_LISTPACK_EX => "Hash listpack",
        TYPE_ZSET_LISTPACK => "Zset listpack",
        TYPE_LIST_QUICKLIST_2 => "Quicklist listpack",
        TYPE_SET_LISTPACK => "Set listpack",
        stream::TYPE_STREAM_LISTPACKS | stream::TYPE_STREAM_LISTPACKS_2 | stream::TYPE_STREAM_LISTPACKS_3 => {
            "Stream listpack"
        }
        TYPE_MODULE_2 => "Module value",
        TYPE_GOBLIN_ARRAY => "Array",
        TYPE_GOBLIN_VSET => "Vector set",
        _ => "Value of an unknown type",
    }
}

impl DecodeError {
    pub fn message(self) -> &'static [u8] {
        match self {
            DecodeError::VersionOrChecksum => b"ERR DUMP payload version or checksum are wrong",
            DecodeError::BadFormat | DecodeError::EmptyKey => b"ERR Bad data format",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// CRC64 (Jones polynomial, reflected, initial value 0, no final xor), as Redis's crc64.c.

const CRC64_POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

/// The byte-at-a-time table (`[0]`) and seven more for slicing by 8: `[k][b]` is the
/// checksum contribution of byte `b` followed by `k` zero bytes.
const fn crc64_tables() -> [[u64; 256]; 8] {
    let mut t = [[0u64; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut k = 0;
        while k < 8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ CRC64_POLY_REFLECTED } else { crc >> 1 };
            k += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static CRC64_TABLES: [[u64; 256]; 8] = crc64_tables();

/// Redis's `crc64(crc, data)`: continue a checksum over more bytes. Eight bytes a step
/// (slicing by 8, as Redis's own crcspeed does): a whole RDB file or a big DUMP payload is
/// checked at several bytes a cycle, not one.
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    let t = &CRC64_TABLES;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        crc ^= u64::from_le_bytes(w.try_into().expect("8 bytes"));
        crc = t[7][(crc & 0xff) as usize]
            ^ t[6][((crc >> 8) & 0xff) as usize]
            ^ t[5][((crc >> 16) & 0xff) as usize]
            ^ t[4][((crc >> 24) & 0xff) as usize]
            ^ t[3][((crc >> 32) & 0xff) as usize]
            ^ t[2][((crc >> 40) & 0xff) as usize]
            ^ t[1][((crc >> 48) & 0xff) as usize]
            ^ t[0][(crc >> 56) as usize];
    }
    for &b in words.remainder() {
        crc = t[0][((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

// ---------------------------------------------------------------------------------------------
// Writing.

fn put_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if len <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// Redis's `rdbcompression`: whether strings in RDB files and DUMP payloads may be
/// LZF-compressed. A process-wide switch, as in Redis: CONFIG SET changes it for every writer
/// at once, and a forked child writing a file keeps the value it had at the fork.
static COMPRESSION: AtomicBool = AtomicBool::new(true);
/// Redis's `rdbchecksum`: whether an RDB file ends with its CRC64 (off: eight zero bytes,
/// which every reader, this one included, takes as "not checked"). DUMP payloads always carry
/// theirs, as Redis's do.
static CHECKSUM: AtomicBool = AtomicBool::new(true);

/// DEBUG SET-SKIP-CHECKSUM-VALIDATION: RESTORE and the RDB loader take payloads and files
/// whatever their CRC64 says (Redis's test aid for hand-made corrupt payloads). Every value is
/// still decoded and checked whole.
static SKIP_CHECKSUM: AtomicBool = AtomicBool::new(false);

/// Sets DEBUG SET-SKIP-CHECKSUM-VALIDATION (see [`SKIP_CHECKSUM`]).
pub fn set_skip_checksum_validation(on: bool) {
    SKIP_CHECKSUM.store(on, Ordering::Relaxed);
}

/// Sets `rdbcompression` (see [`COMPRESSION`]).
pub fn set_compression(on: bool) {
    COMPRESSION.store(on, Ordering::Relaxed);
}

/// Sets `rdbchecksum` (see [`CHECKSUM`]).
pub fn set_checksum(on: bool) {
    CHECKSUM.store(on, Ordering::Relaxed);
}

/// A string, int-encoded when it is the canonical form of a 32-bit integer, LZF-compressed
/// when it is longer than 20 bytes, compresses by more than 4 and `rdbcompression` is on, raw
/// otherwise: the choices Redis makes.
fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 11 {
        if let Some(v) = store::types::string::parse_canonical_i64(s) {
            put_int(out, v, s);
            return;
        }
    }
    if s.len() > 20 && COMPRESSION.load(Ordering::Relaxed) {
        let c = lzf_compress(s);
        if c.len() + 4 < s.len() {
            out.push(0xC3);
            put_len(out, c.len() as u64);
            put_len(out, s.len() as u64);
            out.extend_from_slice(&c);
            return;
        }
    }
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

fn put_int(out: &mut Vec<u8>, v: i64, text: &[u8]) {
    if let Ok(b) = i8::try_from(v) {
        out.push(0xC0);
        out.push(b as u8);
    } else if let Ok(h) = i16::try_from(v) {
        out.push(0xC1);
        out.extend_from_slice(&h.to_le_bytes());
    } else if let Ok(w) = i32::try_from(v) {
        out.push(0xC2);
        out.extend_from_slice(&w.to_le_bytes());
    } else {
        put_len(out, text.len() as u64);
        out.extend_from_slice(text);
    }
}

fn put_strref(out: &mut Vec<u8>, s: StrRef<'_>) {
    s.with_bytes(|b| put_str(out, b));
}

/// DUMP's payload for `v`: the value, RDB version 10, and the CRC64 of both.
pub fn dump(v: ValueRef<'_>) -> Vec<u8> {
    dump_with(v, false)
}

/// A DUMP payload for goblin-core alone: a vector set in goblin's own form, its graph and its
/// level generator's state as they are (what a canonical `RESTORE` mutation must carry, so
/// that a replica's copy evolves exactly as the primary's).
pub fn dump_exact(v: ValueRef<'_>) -> Vec<u8> {
    dump_with(v, true)
}

fn dump_with(v: ValueRef<'_>, goblin_vsets: bool) -> Vec<u8> {
    let mut out = Vec::new();
    put_value(&mut out, v, &[], goblin_vsets);
    let version = if has_field_deadlines(v) { RDB_VERSION_FIELD_DEADLINES } else { RDB_VERSION };
    out.extend_from_slice(&version.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Whether `v` is a hash with field deadlines (written as Redis 7.4's type 24, RDB 12).
fn has_field_deadlines(v: ValueRef<'_>) -> bool {
    matches!(v, ValueRef::Hash(h) if h.has_field_deadlines())
}

/// A value as an RDB file and a DUMP payload hold it: its type byte, `after_type` (an RDB
/// file's key goes there), then its encoding.
fn put_value(out: &mut Vec<u8>, v: ValueRef<'_>, after_type: &[u8], goblin_vsets: bool) {
    let tag = |out: &mut Vec<u8>, t: u8| {
        out.push(t);
        out.extend_from_slice(after_type);
    };
    match v {
        ValueRef::Str(s) => {
            tag(out, TYPE_STRING);
            put_strref(out, s);
        }
        ValueRef::List(l) => {
            tag(out, TYPE_LIST);
            put_len(out, l.len() as u64);
            for e in l.iter() {
                e.with_bytes(|b| put_str(out, b));
            }
        }
        ValueRef::Set(s) => {
            tag(out, TYPE_SET);
            put_len(out, s.len() as u64);
            s.for_each(|m| put_str(out, m));
        }
        ValueRef::Hash(h) if h.has_field_deadlines() => {
            // The earliest deadline, then per field its deadline relative to it plus one (0:
            // none), the field and the value.
            tag(out, TYPE_HASH_METADATA);
            let min = h.field_deadlines().map(|(_, t)| t).min().unwrap_or(0);
            out.extend_from_slice(&min.to_le_bytes());
            put_len(out, h.len() as u64);
            for (f, v) in h.iter() {
                put_len(out, h.field_deadline(f).map_or(0, |t| (t - min) as u64 + 1));
                put_str(out, f);
                put_str(out, v);
            }
        }
        ValueRef::Hash(h) => {
            tag(out, TYPE_HASH);
            put_len(out, h.len() as u64);
            for (f, v) in h.iter() {
                put_str(out, f);
                put_str(out, v);
            }
        }
        ValueRef::ZSet(z) => {
            tag(out, TYPE_ZSET_2);
            put_len(out, z.len() as u64);
            for (m, s) in z.iter() {
                put_str(out, m);
                out.extend_from_slice(&s.to_le_bytes());
            }
        }
        ValueRef::Array(a) => {
            tag(out, TYPE_GOBLIN_ARRAY);
            put_len(out, a.count() as u64);
            put_len(out, a.cursor());
            a.for_each_in(0, u64::MAX, false, |i, e| {
                put_len(out, i);
                e.with_bytes(|b| put_str(out, b));
                true
            });
        }
        ValueRef::Stream(s) => {
            tag(out, stream::TYPE_STREAM_LISTPACKS_2);
            stream::put_stream(out, s);
        }
        ValueRef::VectorSet(v) if goblin_vsets => {
            tag(out, TYPE_GOBLIN_VSET);
            let mut raw = Vec::new();
            v.encode(&mut raw);
            put_str(out, &raw);
        }
        ValueRef::VectorSet(v) => {
            tag(out, TYPE_MODULE_2);
            put_redis_vector_set(out, v);
        }
    }
}

/// Redis's quantization codes in its vector sets' RDB form.
fn redis_quant_code(q: store::types::vset::hnsw::Quant) -> u64 {
    use store::types::vset::hnsw::Quant;
    match q {
        Quant::F32 => 0,
        Quant::Q8 => 1,
        Quant::Bin => 2,
    }
}

/// A vector set in redis-server's module form (what its `VectorSetRdbSave` writes): module id,
/// dimension, count, quantization and M, flags, the projection, then per element its name,
/// attributes (when any element has some), stored vector and node fields (id, level with the
/// format version 1, per layer the link count, capacity, links and farthest link, then the
/// norm and Q8 range), then the module EOF. Node ids are goblin's plus one.
fn put_redis_vector_set(out: &mut Vec<u8>, v: &store::types::vset::VectorSet) {
    let uint = |out: &mut Vec<u8>, x: u64| {
        put_len(out, MODULE_OPCODE_UINT as u64);
        put_len(out, x);
    };
    let string = |out: &mut Vec<u8>, b: &[u8]| {
        put_len(out, MODULE_OPCODE_STRING as u64);
        put_str(out, b);
    };
    put_len(out, VECTORSET_MODULE_ID);
    uint(out, v.dim() as u64);
    uint(out, v.len() as u64);
    uint(out, redis_quant_code(v.quant()) | (v.m() as u64) << 8);
    let with_attrs = v.attributes_count() > 0;
    uint(out, v.has_projection() as u64 | (with_attrs as u64) << 1);
    if let Some(p) = v.projection() {
        uint(out, p.input_dim() as u64);
        let m: Vec<u8> = p.matrix().iter().flat_map(|x| x.to_le_bytes()).collect();
        string(out, &m);
    }
    for (id, name, attr, node) in v.export() {
        string(out, name);
        if with_attrs {
            string(out, attr.unwrap_or(b""));
        }
        string(out, &node.stored);
        let params = 3 + node.layers.iter().map(|l| 3 + l.links.len()).sum::<usize>();
        uint(out, params as u64);
        uint(out, id as u64 + 1);
        uint(out, node.level as u64 | 1 << 24);
        for l in &node.layers {
            uint(out, l.links.len() as u64);
            uint(out, l.max_links as u64);
            for &x in &l.links {
                uint(out, x as u64 + 1);
            }
            uint(out, (l.worst_dist.to_bits() as u64) << 32 | l.worst_idx as u64);
        }
        uint(out, (node.range.to_bits() as u64) << 32 | node.l2.to_bits() as u64);
    }
    put_len(out, MODULE_OPCODE_EOF as u64);
}

// ---------------------------------------------------------------------------------------------
// Whole RDB files (what SYNC sends `redis-cli --rdb`).

const OPCODE_FUNCTION2: u8 = 245;
const OPCODE_AUX: u8 = 250;
const OPCODE_RESIZEDB: u8 = 251;
const OPCODE_EXPIRETIME_MS: u8 = 252;
const OPCODE_SELECTDB: u8 = 254;
const OPCODE_EOF: u8 = 255;

/// What goes into an RDB file besides the keyspace.
pub struct RdbFile<'a> {
    /// `redis-ver` in the file's header fields.
    pub redis_version: &'a str,
    /// `ctime`: when the dataset was frozen, seconds since the epoch.
    pub created_unix_secs: i64,
    /// `used-mem`.
    pub used_memory: u64,
    /// The function libraries' code, each with its `#!lua name=...` line.
    pub functions: &'a [Vec<u8>],
    /// Only the functions (`REPLCONF rdb-filter-only functions`): no keys.
    pub functions_only: bool,
    /// For a goblin-core replica (`REPLCONF capa goblin`): vector sets in goblin's own form,
    /// exact to the graph's generator state; otherwise in redis-server's module form.
    pub goblin_types: bool,
    /// `repl-stream-db`: for a replica's full synchronization, the database the replication
    /// stream that follows the file is in (it SELECTs again only when that changes).
    pub repl_stream_db: Option<u32>,
    /// `repl-id` and `repl-offset`: the replication stream's ID and byte offset the dataset
    /// stands at, so that a restarted primary lets its replicas continue (PSYNC) from there.
    pub repl_position: Option<(String, u64)>,
    /// `goblin-replid` and `goblin-offset`: the goblin-core lineage and logical offset the
    /// dataset stands at, so that a server restarted from the file can go on from there as a
    /// successor lineage its firehose replicas at that offset follow (redis-server skips
    /// auxiliary fields it does not know).
    pub lineage: Option<(String, u64)>,
    /// `goblin-in-step`: the writer follows a goblin-core primary by REPLICAOF and its lineage
    /// is that primary's, each mutation numbered as there, so that a replica restarted from the
    /// file and continuing the primary's stream goes on numbering them so.
    pub lineage_in_step: bool,
}

/// Why a keyspace cannot be written as an RDB file: it holds array keys, which have no RDB
/// encoding Redis loads (`TYPE_GOBLIN_ARRAY` is goblin's own). None when it can.
pub fn rdb_file_blocker(ks: &store::Keyspace) -> Option<String> {
    let mut arrays = 0u64;
    let mut first = None;
    ks.for_each(|key, v, _| {
        if matches!(v, ValueRef::Array(_)) {
            arrays += 1;
            first.get_or_insert_with(|| String::from_utf8_lossy(key).into_owned());
        }
    });
    first.map(|k| {
        format!(
            "the dataset holds {arrays} array key(s) ('{k}' among them), which an RDB file cannot carry: \
             GOBLIN.DUMPWORLD takes a complete snapshot"
        )
    })
}

/// Writes the databases `dbs` (number, keyspace; increasing numbers) as an RDB file (version
/// 10, Redis 7.0's, so that redis-server 7.0 and later load it): header fields, the function
/// libraries, each non-empty database with every key and its deadline (keys already past it
/// too: a loading primary drops them), then EOF and the CRC64 of every byte before it. Array
/// keys go in goblin's own type, which Redis refuses: [`rdb_file_blocker`] says whether a
/// dataset has any. Returns the bytes written.
pub fn write_rdb_file(
    w: &mut impl std::io::Write,
    dbs: &[(u32, &store::Keyspace)],
    f: &RdbFile<'_>,
) -> std::io::Result<u64> {
    let mut out = Vec::with_capacity(1 << 16);
    let mut crc = 0u64;
    let mut written = 0u64;
    let mut flush = |out: &mut Vec<u8>, w: &mut dyn std::io::Write| -> std::io::Result<()> {
        crc = crc64(crc, out);
        written += out.len() as u64;
        w.write_all(out)?;
        out.clear();
        Ok(())
    };
    // Version 12 (Redis 7.4's) only when a hash has field deadlines: 7.0 loads the rest.
    let mut version = RDB_VERSION;
    if !f.functions_only {
        for (_, ks) in dbs {
            ks.for_each(|_, v, _| {
                if has_field_deadlines(v) {
                    version = RDB_VERSION_FIELD_DEADLINES;
                }
            });
        }
    }
    out.extend_from_slice(format!("REDIS{version:04}").as_bytes());
    let aux = |out: &mut Vec<u8>, name: &str, value: &str| {
        out.push(OPCODE_AUX);
        put_str(out, name.as_bytes());
        put_str(out, value.as_bytes());
    };
    aux(&mut out, "redis-ver", f.redis_version);
    aux(&mut out, "redis-bits", "64");
    aux(&mut out, "ctime", &f.created_unix_secs.to_string());
    aux(&mut out, "used-mem", &f.used_memory.to_string());
    aux(&mut out, "aof-base", "0");
    if let Some(db) = f.repl_stream_db {
        aux(&mut out, "repl-stream-db", &db.to_string());
    }
    if let Some((id, offset)) = &f.repl_position {
        aux(&mut out, "repl-id", id);
        aux(&mut out, "repl-offset", &offset.to_string());
    }
    if let Some((id, offset)) = &f.lineage {
        aux(&mut out, "goblin-replid", id);
        aux(&mut out, "goblin-offset", &offset.to_string());
        if f.lineage_in_step {
            aux(&mut out, "goblin-in-step", "1");
        }
    }
    for code in f.functions {
        out.push(OPCODE_FUNCTION2);
        put_str(&mut out, code);
    }
    for &(db, ks) in dbs {
        if f.functions_only || ks.is_empty() {
            continue;
        }
        let mut with_deadline = 0u64;
        ks.for_each(|_, _, d| with_deadline += d.is_some() as u64);
        out.push(OPCODE_SELECTDB);
        put_len(&mut out, db as u64);
        out.push(OPCODE_RESIZEDB);
        put_len(&mut out, ks.len() as u64);
        put_len(&mut out, with_deadline);
        let mut failed = None;
        let mut key_bytes = Vec::new();
        let mut n = 0u64;
        ks.for_each(|key, v, deadline| {
            if failed.is_some() {
                return;
            }
            n += 1;
            store::limits::key_saved(n);
            if let Some(d) = deadline {
                out.push(OPCODE_EXPIRETIME_MS);
                out.extend_from_slice(&(d as u64).to_le_bytes());
            }
            key_bytes.clear();
            put_str(&mut key_bytes, key);
            put_value(&mut out, v, &key_bytes, f.goblin_types);
            if out.len() >= 1 << 16 {
                if let Err(e) = flush(&mut out, w) {
                    failed = Some(e);
                }
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
    }
    out.push(OPCODE_EOF);
    flush(&mut out, w)?;
    let crc = if CHECKSUM.load(Ordering::Relaxed) { crc } else { 0 };
    w.write_all(&crc.to_le_bytes())?;
    Ok(written + 8)
}

// ---------------------------------------------------------------------------------------------
// Reading.

type R<T> = Result<T, DecodeError>;
const BAD: DecodeError = DecodeError::BadFormat;

/// Checks the footer: length, version, checksum (Redis's `verifyDumpPayload`). Returns the
/// value part (everything before the footer).
pub fn verify(payload: &[u8]) -> R<&[u8]> {
    if payload.len() < 10 {
        return Err(DecodeError::VersionOrChecksum);
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > MAX_RDB_VERSION {
        return Err(DecodeError::VersionOrChecksum);
    }
    if SKIP_CHECKSUM.load(Ordering::Relaxed) {
        return Ok(body);
    }
    let crc = crc64(0, &payload[..payload.len() - 8]);
    if crc.to_le_bytes() != footer[2..10] {
        return Err(DecodeError::VersionOrChecksum);
    }
    Ok(body)
}

/// RESTORE's decoder: verifies the footer, then reads exactly one value that must end where
/// the footer starts. The value is never empty (Redis refuses empty collections too).
pub fn restore(payload: &[u8]) -> R<Value> {
    let body = verify(payload)?;
    let mut r = Reader { buf: body, pos: 0 };
    let ty = r.byte()?;
    let refused = |why: &str| {
        if let Some(hook) = REFUSED_PAYLOAD_HOOK.get() {
            hook(&format!("{} integrity check failed: {why}", encoding_name(ty)));
        }
        BAD
    };
    // An empty collection is as malformed as any other bad value here.
    let v = r.value(ty).map_err(|e| match e {
        DecodeError::EmptyKey => refused("an empty collection"),
        DecodeError::BadFormat => refused("malformed or truncated"),
        e => e,
    })?;
    if r.pos != body.len() {
        return Err(refused("bytes left after the value"));
    }
    Ok(v)
}

/// What [`load_rdb_file`] found besides the keys.
#[derive(Debug, Default)]
pub struct LoadedRdb {
    /// The file's RDB version.
    pub version: u16,
    /// `redis-ver` from its header fields, if it has one.
    pub redis_version: Option<String>,
    /// Keys handed to the caller.
    pub keys: u64,
    /// Keys left out because their deadline had passed (as a loading Redis primary does), and,
    /// in a file with `repl-id`, their (database, name), which a primary's replicas that
    /// continue must be told to delete.
    pub expired: u64,
    pub expired_keys: Vec<(u32, Vec<u8>)>,
    /// Keys left out because their collection held nothing (files of old Redis versions), as
    /// Redis skips them.
    pub empty_skipped: u64,
    /// The first ten of them, for the log.
    pub empty_skipped_names: Vec<Vec<u8>>,
    /// The function libraries' code.
    pub functions: Vec<Vec<u8>>,
    /// `repl-stream-db`, if the file has it: the database the replication stream after the
    /// file is in.
    pub repl_stream_db: Option<u32>,
    /// `repl-id` and `repl-offset`, if the file has both (and they read as an ID and an
    /// offset): where the writer's replication stream stood.
    pub repl_position: Option<(String, u64)>,
    /// `goblin-replid` and `goblin-offset`, if the file has both: the goblin-core lineage and
    /// logical offset of the writer's dataset.
    pub lineage: Option<(String, u64)>,
    /// `goblin-in-step` (see [`RdbFile::lineage_in_step`]).
    pub lineage_in_step: bool,
}

const OPCODE_SLOT_INFO: u8 = 244;
const OPCODE_FUNCTION_PRE_GA: u8 = 246;
const OPCODE_MODULE_AUX: u8 = 247;
const OPCODE_IDLE: u8 = 248;
const OPCODE_FREQ: u8 = 249;
const OPCODE_EXPIRETIME: u8 = 253;

/// Where [`load_rdb_file`] hands each key: its database, name, value and deadline; true when
/// the database held the key already.
pub type PutKey<'a> = dyn FnMut(u32, &[u8], Value, Option<i64>) -> bool + 'a;

/// Reads a whole RDB file (versions 1 to [`MAX_RDB_VERSION`]): header fields, function
/// libraries, and every database's keys, each handed to `put` with its database and deadline
/// (unix ms), which answers whether the database held the key already (a key given twice is an
/// error); keys whose deadline is before `now_ms` are counted and left out.
/// `progress` is called with the bytes read so far every few thousand keys. Checks the
/// trailing CRC64 (unless the file was written without one: 0). Err names the byte offset and
/// what is wrong there: a database at or above `databases`, module data, a value type it
/// cannot hold (hashes with field expiration among them), a key twice in one database, a bad
/// checksum or a truncated file.
pub fn load_rdb_file(
    file: &[u8],
    now_ms: i64,
    databases: u32,
    put: &mut PutKey<'_>,
    sizes: &mut dyn FnMut(u32, u64),
    progress: &mut dyn FnMut(usize),
) -> Result<LoadedRdb, String> {
    let at = |pos: usize, what: &str| format!("byte {pos}: {what}");
    if file.len() < 9 || &file[..5] != b"REDIS" {
        return Err("not an RDB file (it does not start with REDIS and a version)".to_string());
    }
    let version: u16 = std::str::from_utf8(&file[5..9])
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| "not an RDB file (no version after REDIS)".to_string())?;
    if version == 0 || version > MAX_RDB_VERSION {
        return Err(format!("RDB version {version} is not supported (1 to {MAX_RDB_VERSION} are)"));
    }
    let mut info = LoadedRdb { version, ..Default::default() };
    let (mut repl_id, mut repl_offset) = (None::<String>, None::<u64>);
    let (mut lineage_id, mut lineage_offset) = (None::<String>, None::<u64>);
    let mut r = Reader { buf: file, pos: 9 };
    let mut deadline: Option<i64> = None;
    let mut db = 0u32;
    let bad = |r: &Reader<'_>, _: DecodeError| at(r.pos, "malformed or truncated data");
    loop {
        let start = r.pos;
        let op = r.byte().map_err(|_| at(start, "the file ends before its EOF marker"))?;
        match op {
            OPCODE_EOF => break,
            OPCODE_AUX => {
                let name = r.string().map_err(|e| bad(&r, e))?;
                let value = r.string().map_err(|e| bad(&r, e))?;
                if name == b"redis-ver" {
                    info.redis_version = Some(String::from_utf8_lossy(&value).into_owned());
                } else if name == b"repl-stream-db" {
                    info.repl_stream_db = std::str::from_utf8(&value).ok().and_then(|v| v.parse().ok());
                } else if name == b"repl-id" {
                    repl_id = Some(String::from_utf8_lossy(&value).into_owned());
                } else if name == b"repl-offset" {
                    repl_offset = std::str::from_utf8(&value).ok().and_then(|v| v.parse::<u64>().ok());
                } else if name == b"goblin-replid" {
                    lineage_id = Some(String::from_utf8_lossy(&value).into_owned());
                } else if name == b"goblin-offset" {
                    lineage_offset = std::str::from_utf8(&value).ok().and_then(|v| v.parse::<u64>().ok());
                } else if name == b"goblin-in-step" {
                    info.lineage_in_step = value == b"1";
                }
            }
            OPCODE_RESIZEDB => {
                // The database's key count, as the writer saw it (a hint for presizing: the
                // caller bounds it, it is untrusted); then how many have deadlines.
                let keys = r.len().map_err(|e| bad(&r, e))?;
                r.len().map_err(|e| bad(&r, e))?;
                sizes(db, keys);
            }
            OPCODE_SLOT_INFO => {
                for _ in 0..3 {
                    r.len().map_err(|e| bad(&r, e))?;
                }
            }
            OPCODE_SELECTDB => {
                let n = r.len().map_err(|e| bad(&r, e))?;
                if n >= databases as u64 {
                    return Err(at(
                        start,
                        &format!(
                            "the file holds database {n}; goblin-core has databases 0 to {} (--databases)",
                            databases - 1
                        ),
                    ));
                }
                db = n as u32;
            }
            OPCODE_EXPIRETIME => {
                let secs = u32::from_le_bytes(r.take(4).map_err(|e| bad(&r, e))?.try_into().unwrap());
                deadline = Some(secs as i64 * 1000);
            }
            OPCODE_EXPIRETIME_MS => {
                let ms = u64::from_le_bytes(r.take(8).map_err(|e| bad(&r, e))?.try_into().unwrap());
                deadline = Some(ms.min(i64::MAX as u64) as i64);
            }
            OPCODE_IDLE => {
                r.len().map_err(|e| bad(&r, e))?;
            }
            OPCODE_FREQ => {
                r.byte().map_err(|e| bad(&r, e))?;
            }
            OPCODE_FUNCTION2 => info.functions.push(r.string().map_err(|e| bad(&r, e))?),
            OPCODE_FUNCTION_PRE_GA => {
                return Err(at(
                    start,
                    "function libraries in Redis 7.0's pre-release format are not supported",
                ))
            }
            OPCODE_MODULE_AUX => {
                return Err(at(start, "the file holds module data, which goblin-core cannot load"))
            }
            ty => {
                let key = r.string_cow().map_err(|e| bad(&r, e))?;
                // Only an error names the key.
                let name = || shown_key(&key);
                let value = match ty {
                    // 7 is read by `value` when it is a vector set (Redis's only built-in module).
                    6 => return Err(at(start, &format!("key '{}' holds a module value", name()))),
                    22 | 23 => {
                        return Err(at(
                            start,
                            &format!(
                                "key '{}' is a hash with field expiration in Redis 7.4's pre-release format",
                                name()
                            ),
                        ))
                    }
                    _ => match r.value(ty) {
                        Ok(v) => v,
                        Err(DecodeError::EmptyKey) => {
                            info.empty_skipped += 1;
                            if info.empty_skipped_names.len() < 10 {
                                info.empty_skipped_names.push(key.to_vec());
                            }
                            deadline = None;
                            continue;
                        }
                        Err(_) => return Err(at(start, &format!("key '{}': {} integrity check failed (RDB type {ty}: truncated, malformed, or of a type goblin-core does not know)", name(), encoding_name(ty)))),
                    },
                };
                match deadline.take() {
                    Some(d) if d < now_ms => {
                        info.expired += 1;
                        // Named only where a restarted primary's replicas may continue (the
                        // header fields, `repl-id` among them, precede the keys).
                        if repl_id.is_some() {
                            info.expired_keys.push((db, key.to_vec()));
                        }
                    }
                    d => {
                        if put(db, &key, value, d) {
                            return Err(at(start, &format!("key '{}' appears twice", name())));
                        }
                        info.keys += 1;
                    }
                }
                if (info.keys + info.expired).is_multiple_of(4096) {
                    progress(r.pos);
                }
            }
        }
    }
    if version >= 5 {
        let body = r.pos;
        let crc = r.take(8).map_err(|_| at(body, "the file ends inside its checksum"))?;
        let crc = u64::from_le_bytes(crc.try_into().unwrap());
        if crc != 0 && !SKIP_CHECKSUM.load(Ordering::Relaxed) && crc != crc64(0, &file[..body]) {
            return Err(at(
                body,
                "RDB CRC error: the checksum does not match the file (corrupted or truncated)",
            ));
        }
    }
    progress(r.pos);
    info.repl_position = repl_id.zip(repl_offset);
    info.lineage = lineage_id.zip(lineage_offset);
    Ok(info)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// A length field, or the special string encodings that share its first byte.
enum Len {
    Plain(u64),
    Int8,
    Int16,
    Int32,
    Lzf,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> R<u8> {
        let b = *self.buf.get(self.pos).ok_or(BAD)?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: u64) -> R<&'a [u8]> {
        let n = usize::try_from(n).map_err(|_| BAD)?;
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or(BAD)?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn raw_len(&mut self) -> R<Len> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => Len::Plain((b & 0x3f) as u64),
            1 => Len::Plain((((b & 0x3f) as u64) << 8) | self.byte()? as u64),
            2 => match b {
                0x80 => Len::Plain(u32::from_be_bytes(self.take(4)?.try_into().unwrap()) as u64),
                0x81 => Len::Plain(u64::from_be_bytes(self.take(8)?.try_into().unwrap())),
                _ => return Err(BAD),
            },
            _ => match b & 0x3f {
                0 => Len::Int8,
                1 => Len::Int16,
                2 => Len::Int32,
                3 => Len::Lzf,
                _ => return Err(BAD),
            },
        })
    }

    /// A count or index: a plain length only.
    fn len(&mut self) -> R<u64> {
        match self.raw_len()? {
            Len::Plain(n) => Ok(n),
            _ => Err(BAD),
        }
    }

    fn string(&mut self) -> R<Vec<u8>> {
        self.string_cow().map(Cow::into_owned)
    }

    /// A string, borrowed from the payload when it is stored as it is (no copy).
    fn string_cow(&mut self) -> R<Cow<'a, [u8]>> {
        let int = |v: i64| Cow::Owned(itoa::Buffer::new().format(v).as_bytes().to_vec());
        Ok(match self.raw_len()? {
            Len::Plain(n) => Cow::Borrowed(self.take(n)?),
            Len::Int8 => int(self.byte()? as i8 as i64),
            Len::Int16 => int(i16::from_le_bytes(self.take(2)?.try_into().unwrap()) as i64),
            Len::Int32 => int(i32::from_le_bytes(self.take(4)?.try_into().unwrap()) as i64),
            Len::Lzf => {
                let clen = self.len()?;
                let len = self.len()?;
                let data = self.take(clen)?;
                Cow::Owned(lzf_decompress(data, len).ok_or(BAD)?)
            }
        })
    }

    /// Room to gather the records of a collection of `n` elements: about what is left of the
    /// payload, which holds them, within a bound a false count cannot inflate.
    fn records_capacity(&self, n: u64) -> usize {
        (self.buf.len() - self.pos).min(usize::try_from(n).unwrap_or(usize::MAX).saturating_mul(64))
    }

    /// The old zset score: a length byte (253 NaN, 254 +inf, 255 -inf), then the number as
    /// text. NaN is refused: no sorted set holds it.
    fn text_double(&mut self) -> R<f64> {
        match self.byte()? {
            253 => Err(BAD),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => score_text(self.take(n as u64)?),
        }
    }

    fn binary_double(&mut self) -> R<f64> {
        let v = f64::from_le_bytes(self.take(8)?.try_into().unwrap());
        if v.is_nan() {
            return Err(BAD);
        }
        Ok(v)
    }

    /// A module field of type `op`: its opcode byte, checked.
    fn module_field(&mut self, op: u8) -> R<()> {
        (self.len()? == op as u64).then_some(()).ok_or(BAD)
    }

    fn module_uint(&mut self) -> R<u64> {
        self.module_field(MODULE_OPCODE_UINT)?;
        self.len()
    }

    fn module_string(&mut self) -> R<Cow<'a, [u8]>> {
        self.module_field(MODULE_OPCODE_STRING)?;
        self.string_cow()
    }

    /// A redis-server vector set (its module's RDB form): the parameters, the projection, then
    /// per element its name, attributes, stored vector and the graph node's serialized fields,
    /// the last of which packs the vector's norm and quantization range. The graph is taken as
    /// Redis saved it (VLINKS answers as Redis did) when it keeps every rule of goblin's index
    /// (`Hnsw::import`); otherwise each stored vector is linked anew in the file's order.
    /// Either way each element's stored vector, norm and range are kept bit for bit, so VEMB
    /// and every score are Redis's.
    fn redis_vector_set(&mut self) -> R<Value> {
        use store::types::vset::hnsw::{ExportedLayer, ExportedNode, Quant, DEFAULT_BUILD_EF};
        use store::types::vset::{VectorSet, MAX_DIM};
        if self.len()? != VECTORSET_MODULE_ID {
            return Err(BAD);
        }
        let dim = usize::try_from(self.module_uint()?).map_err(|_| BAD)?;
        let count = self.module_uint()?;
        let config = self.module_uint()?;
        let quant = match config & 0xff {
            0 => Quant::F32,
            1 => Quant::Q8,
            2 => Quant::Bin,
            _ => return Err(BAD),
        };
        let m = match (config >> 8) & 0xffff {
            0 => 16,
            m => m as usize,
        };
        let flags = self.module_uint()?;
        if !(1..=MAX_DIM).contains(&dim) || !(4..=4096).contains(&m) || count == 0 || flags > 3 {
            return Err(BAD);
        }
        let projection_from = if flags & 1 != 0 {
            let input = usize::try_from(self.module_uint()?).map_err(|_| BAD)?;
            if !(dim..=MAX_DIM).contains(&input) {
                return Err(BAD);
            }
            let matrix = self.module_string()?;
            // Checked before the set builds its own matrix of that size.
            if matrix.len() as u64 != input as u64 * dim as u64 * 4 {
                return Err(BAD);
            }
            Some((input, matrix))
        } else {
            None
        };
        let mut set = VectorSet::new(dim, quant, m, projection_from.as_ref().map(|(i, _)| *i));
        if let Some((_, matrix)) = &projection_from {
            // Redis's matrix is a fixed pattern; a different one would project queries
            // differently from the vectors already stored.
            let ours: Vec<u8> = set
                .projection()
                .map_or(Vec::new(), |p| p.matrix().iter().flat_map(|x| x.to_le_bytes()).collect());
            if ours != matrix.as_ref() {
                return Err(BAD);
            }
        }
        // Every element first, with Redis's node fields; then the graph as Redis saved it, or,
        // when it breaks a rule of goblin's index, the same vectors linked anew.
        struct Element {
            name: Vec<u8>,
            attr: Option<Vec<u8>>,
            id: u64,
            node: ExportedNode,
            /// Links by Redis's node ids, per layer.
            links: Vec<Vec<u64>>,
        }
        let mut elements = Vec::new();
        for _ in 0..count {
            let name = self.module_string()?.into_owned();
            let attr = if flags & 2 != 0 { Some(self.module_string()?.into_owned()) } else { None };
            // An empty attribute string is Redis's "none" in this form.
            let attr = attr.filter(|a| !a.is_empty());
            let stored = self.module_string()?.into_owned();
            let params = self.module_uint()?;
            if !(3..=1 << 20).contains(&params) {
                return Err(BAD);
            }
            let mut p = Vec::with_capacity(params as usize);
            for _ in 0..params {
                p.push(self.module_uint()?);
            }
            // id; level | version << 24; per layer: count, capacity, links, farthest link
            // (version 1); the norm (low 32 bits) and the Q8 range (high) as floats.
            let (id, level, version) = (p[0], (p[1] & 0xff) as usize, p[1] >> 24);
            if version > 1 {
                return Err(BAD);
            }
            let mut at = 2;
            let mut layers = Vec::new();
            let mut links = Vec::new();
            for _ in 0..=level {
                let (n, max) = (*p.get(at).ok_or(BAD)?, *p.get(at + 1).ok_or(BAD)?);
                at += 2;
                let ids = p.get(at..at + n as usize).ok_or(BAD)?.to_vec();
                at += n as usize;
                let (worst_dist, worst_idx) = if version == 1 {
                    let w = *p.get(at).ok_or(BAD)?;
                    at += 1;
                    (f32::from_bits((w >> 32) as u32), w as u32)
                } else {
                    (0.0, u32::MAX)
                };
                layers.push(ExportedLayer {
                    links: Vec::new(),
                    max_links: max as u32,
                    worst_dist,
                    worst_idx,
                });
                links.push(ids);
            }
            if at + 1 != p.len() {
                return Err(BAD);
            }
            let last = p[at];
            let (l2, range) = (f32::from_bits(last as u32), f32::from_bits((last >> 32) as u32));
            elements.push(Element {
                name,
                attr,
                id,
                node: ExportedNode { level, layers, stored, l2, range },
                links,
            });
        }
        self.module_field(MODULE_OPCODE_EOF)?;
        let position: std::collections::HashMap<u64, u32> =
            elements.iter().enumerate().map(|(i, e)| (e.id, i as u32)).collect();
        let mut exact = position.len() == elements.len();
        for e in &mut elements {
            for (layer, ids) in e.node.layers.iter_mut().zip(&e.links) {
                match ids.iter().map(|x| position.get(x).copied()).collect::<Option<Vec<u32>>>() {
                    Some(l) => layer.links = l,
                    None => exact = false,
                }
            }
        }
        let projection = projection_from.as_ref().map(|(i, _)| *i);
        if exact {
            let parts = elements.iter().map(|e| (e.name.clone(), e.attr.clone(), e.node.clone())).collect();
            let uid = elements.iter().map(|e| e.id).max().unwrap_or(0);
            if let Ok(v) = VectorSet::import(dim, quant, m, projection, uid, parts) {
                return Ok(Value::VectorSet(Box::new(v)));
            }
        }
        for e in &elements {
            let n = &e.node;
            set.add_stored(&e.name, &n.stored, n.l2, n.range, DEFAULT_BUILD_EF, e.attr.as_deref())
                .map_err(|_| BAD)?;
        }

        Ok(Value::VectorSet(Box::new(set)))
    }

    fn value(&mut self, ty: u8) -> R<Value> {
        match ty {
            TYPE_STRING => Ok(Value::Str(self.string()?)),
            TYPE_LIST => {
                let n = self.len()?;
                let mut l = List::new();
                for _ in 0..n {
                    l.push_back(&self.string()?);
                }
                nonempty(l.len(), Value::List(Box::new(l)))
            }
            TYPE_LIST_ZIPLIST => {
                let blob = self.string()?;
                let mut l = List::new();
                for_each_ziplist(&blob, |e| {
                    l.push_back(&e.bytes());
                    Ok(())
                })?;
                nonempty(l.len(), Value::List(Box::new(l)))
            }
            TYPE_LIST_QUICKLIST | TYPE_LIST_QUICKLIST_2 => {
                let nodes = self.len()?;
                let mut l = List::new();
                for _ in 0..nodes {
                    let container = if ty == TYPE_LIST_QUICKLIST_2 { self.len()? } else { QUICKLIST_PACKED };
                    let blob = self.string()?;
                    match container {
                        // A plain node holds one element too big to pack: never an empty
                        // one (Redis refuses it too).
                        QUICKLIST_PLAIN if blob.is_empty() => return Err(BAD),
                        QUICKLIST_PLAIN => l.push_back(&blob),
                        QUICKLIST_PACKED if ty == TYPE_LIST_QUICKLIST => for_each_ziplist(&blob, |e| {
                            l.push_back(&e.bytes());
                            Ok(())
                        })?,
                        // An empty node is skipped, as Redis does on load.
                        QUICKLIST_PACKED => for_each_listpack(&blob, |e| {
                            l.push_back(&e.bytes());
                            Ok(())
                        })?,
                        _ => return Err(BAD),
                    }
                }
                nonempty(l.len(), Value::List(Box::new(l)))
            }
            TYPE_SET => {
                let n = self.len()?;
                // A big set is gathered and built in one go (its index sized once).
                if Set::takes_table_form(usize::try_from(n).unwrap_or(usize::MAX)) {
                    let mut members = SetRecords::with_capacity(self.records_capacity(n));
                    for _ in 0..n {
                        members.push(&self.string_cow()?, b"");
                    }
                    return Ok(Value::Set(Box::new(Set::from_records(&members).map_err(|_| BAD)?)));
                }
                let mut s = Set::new();
                for _ in 0..n {
                    if !s.add(&self.string()?) {
                        return Err(BAD);
                    }
                }
                nonempty(s.len(), Value::Set(Box::new(s)))
            }
            TYPE_SET_INTSET => {
                let blob = self.string()?;
                let mut s = Set::new();
                for v in intset(&blob)? {
                    s.add(itoa::Buffer::new().format(v).as_bytes());
                }
                nonempty(s.len(), Value::Set(Box::new(s)))
            }
            TYPE_SET_LISTPACK => {
                let blob = self.string()?;
                let mut s = Set::new();
                for_each_listpack(&blob, |e| if s.add(&e.bytes()) { Ok(()) } else { Err(BAD) })?;
                nonempty(s.len(), Value::Set(Box::new(s)))
            }
            TYPE_HASH => {
                // Gathered and built in one go (a big hash's index sized once); a field given
                // twice is refused.
                let n = self.len()?;
                if n == 0 {
                    return Err(DecodeError::EmptyKey);
                }
                let mut fields = HashRecords::with_capacity(self.records_capacity(n));
                for _ in 0..n {
                    let f = self.string_cow()?;
                    fields.push(&f, &self.string_cow()?);
                }
                Ok(Value::Hash(Box::new(Hash::from_records(&fields).map_err(|_| BAD)?)))
            }
            TYPE_HASH_METADATA => {
                let min = i64::from_le_bytes(self.take(8)?.try_into().unwrap());
                let n = self.len()?;
                let mut h = Hash::new();
                for _ in 0..n {
                    let ttl = self.len()?;
                    let f = self.string()?;
                    let v = self.string()?;
                    if !h.set(&f, &v) {
                        return Err(BAD);
                    }
                    if ttl != 0 {
                        let at = i64::try_from(ttl - 1).ok().and_then(|d| min.checked_add(d)).ok_or(BAD)?;
                        h.set_field_deadline(&f, Some(deadline_in_range(at)?));
                    }
                }
                nonempty(h.len(), Value::Hash(Box::new(h)))
            }
            TYPE_HASH_LISTPACK_EX => {
                let _min = self.take(8)?;
                let blob = self.string()?;
                let mut h = Hash::new();
                let mut pending: Vec<Vec<u8>> = Vec::with_capacity(2);
                for_each_listpack(&blob, |e| {
                    if pending.len() < 2 {
                        pending.push(e.bytes());
                        return Ok(());
                    }
                    let (f, v) = (&pending[0], &pending[1]);
                    if !h.set(f, v) {
                        return Err(BAD);
                    }
                    let at = score_text(&e.bytes()).ok().filter(|t| t.fract() == 0.0).ok_or(BAD)? as i64;
                    if at != 0 {
                        h.set_field_deadline(f, Some(deadline_in_range(at)?));
                    }
                    pending.clear();
                    Ok(())
                })?;
                if !pending.is_empty() {
                    return Err(BAD);
                }
                nonempty(h.len(), Value::Hash(Box::new(h)))
            }
            TYPE_HASH_ZIPMAP => {
                let blob = self.string()?;
                let mut h = Hash::new();
                for_each_zipmap(&blob, |f, v| h.set(f, v).then_some(()).ok_or(BAD))?;
                nonempty(h.len(), Value::Hash(Box::new(h)))
            }
            TYPE_HASH_ZIPLIST | TYPE_HASH_LISTPACK => {
                let blob = self.string()?;
                let mut h = Hash::new();
                let mut field: Option<Vec<u8>> = None;
                let mut pair = |e: Entry<'_>| match field.take() {
                    None => {
                        field = Some(e.bytes());
                        Ok(())
                    }
                    Some(f) => h.set(&f, &e.bytes()).then_some(()).ok_or(BAD),
                };
                if ty == TYPE_HASH_ZIPLIST {
                    for_each_ziplist(&blob, &mut pair)?;
                } else {
                    for_each_listpack(&blob, &mut pair)?;
                }
                if field.is_some() {
                    return Err(BAD);
                }
                nonempty(h.len(), Value::Hash(Box::new(h)))
            }
            TYPE_ZSET | TYPE_ZSET_2 => {
                let n = self.len()?;
                let mut items: Vec<(Vec<u8>, f64)> = Vec::new();
                for _ in 0..n {
                    let m = self.string()?;
                    let s = if ty == TYPE_ZSET_2 { self.binary_double()? } else { self.text_double()? };
                    items.push((m, s));
                }
                nonempty(items.len(), Value::ZSet(Box::new(zset_of(items)?)))
            }
            TYPE_ZSET_ZIPLIST | TYPE_ZSET_LISTPACK => {
                let blob = self.string()?;
                let mut z = ZSet::new();
                let mut member: Option<Vec<u8>> = None;
                let mut pair = |e: Entry<'_>| match member.take() {
                    None => {
                        member = Some(e.bytes());
                        Ok(())
                    }
                    Some(m) => {
                        let s = match e {
                            Entry::Int(i) => i as f64,
                            Entry::Str(t) => score_text(t)?,
                        };
                        z.insert_exact(&m, s).is_none().then_some(()).ok_or(BAD)
                    }
                };
                if ty == TYPE_ZSET_ZIPLIST {
                    for_each_ziplist(&blob, &mut pair)?;
                } else {
                    for_each_listpack(&blob, &mut pair)?;
                }
                if member.is_some() {
                    return Err(BAD);
                }
                nonempty(z.len(), Value::ZSet(Box::new(z)))
            }
            TYPE_GOBLIN_ARRAY => {
                let n = self.len()?;
                let cursor = self.len()?;
                let mut a = SparseArray::new();
                let mut last: Option<u64> = None;
                for _ in 0..n {
                    let i = self.len()?;
                    // Indexes strictly ascending (so no duplicates) and below u64::MAX, the
                    // largest index an array can hold being 2^64-2.
                    if i == u64::MAX || last.is_some_and(|l| i <= l) {
                        return Err(BAD);
                    }
                    last = Some(i);
                    a.set(i, &self.string()?);
                }
                a.set_cursor(cursor);
                nonempty(a.count(), Value::Array(Box::new(a)))
            }
            TYPE_MODULE_2 => self.redis_vector_set(),
            TYPE_GOBLIN_VSET => {
                let raw = self.string()?;
                let v = store::types::vset::VectorSet::decode(&raw).map_err(|_| BAD)?;
                Ok(Value::VectorSet(Box::new(v)))
            }
            // A stream may be empty (no entries, perhaps groups): Redis dumps and restores it.
            stream::TYPE_STREAM_LISTPACKS
            | stream::TYPE_STREAM_LISTPACKS_2
            | stream::TYPE_STREAM_LISTPACKS_3 => self.stream(ty),
            _ => Err(BAD),
        }
    }
}

/// A field deadline as Redis bounds them (unix ms, at most 2^48 - 1).
fn deadline_in_range(at: i64) -> R<i64> {
    if (0..1 << 48).contains(&at) {
        Ok(at)
    } else {
        Err(BAD)
    }
}

/// The sorted set of an RDB's member/score pairs. Redis writes a big set from its highest
/// score down and goblin-core from its lowest up: either way the set is built in one pass
/// (`ZSet::from_sorted`) when its members are distinct and no score is -0 (which the one-pass
/// build would store as 0 in the small form); otherwise member by member. Scores keep their
/// exact bits, as the origin stored them. A member given twice is an error.
fn zset_of(mut items: Vec<(Vec<u8>, f64)>) -> R<ZSet> {
    use std::cmp::Ordering;
    let cmp =
        |a: &(Vec<u8>, f64), b: &(Vec<u8>, f64)| a.1.partial_cmp(&b.1).map(|o| o.then_with(|| a.0.cmp(&b.0)));
    if items.windows(2).all(|w| cmp(&w[0], &w[1]) == Some(Ordering::Greater)) {
        items.reverse();
    }
    if items.iter().all(|(_, s)| s.to_bits() != (-0.0f64).to_bits()) {
        let mut seen = std::collections::HashSet::with_capacity(items.len());
        if !items.iter().all(|(m, _)| seen.insert(m.as_slice())) {
            return Err(BAD);
        }
        if let Some((z, _)) = ZSet::from_sorted(&items, false) {
            return Ok(z);
        }
    }
    let mut z = ZSet::new();
    for (m, s) in &items {
        if s.is_nan() || z.insert_exact(m, *s).is_some() {
            return Err(BAD);
        }
    }
    Ok(z)
}

fn nonempty(len: usize, v: Value) -> R<Value> {
    if len == 0 {
        Err(DecodeError::EmptyKey)
    } else {
        Ok(v)
    }
}

/// A score written as text (old zsets, ziplist and listpack entries): strtod's syntax, no NaN.
fn score_text(t: &[u8]) -> R<f64> {
    let s = std::str::from_utf8(t).map_err(|_| BAD)?;
    let lower = s.to_ascii_lowercase();
    let v = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => crate::util::parse_f64(t).ok_or(BAD)?,
    };
    Ok(v)
}

/// liblzf's decompressor over untrusted input: literal runs (`ctrl < 32`: ctrl+1 bytes follow)
/// and back references (length `ctrl >> 5` plus 2, extended by a byte when 7; offset from the
/// low 5 bits and the next byte). None unless the output is exactly `len` bytes. The output is
/// never allocated past what the input can produce (each input byte yields at most 264 bytes
/// of output), so a forged length cannot make us reserve gigabytes.
pub fn lzf_decompress(inp: &[u8], len: u64) -> Option<Vec<u8>> {
    let len = usize::try_from(len).ok()?;
    if len > inp.len().saturating_mul(264) {
        return None;
    }
    let mut out = Vec::with_capacity(len);
    let mut i = 0;
    while i < inp.len() {
        let ctrl = inp[i] as usize;
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            if i + n > inp.len() || out.len() + n > len {
                return None;
            }
            out.extend_from_slice(&inp[i..i + n]);
            i += n;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += *inp.get(i)? as usize;
                i += 1;
            }
            let off = ((ctrl & 0x1f) << 8) + *inp.get(i)? as usize + 1;
            i += 1;
            n += 2;
            if off > out.len() || out.len() + n > len {
                return None;
            }
            // Byte by byte: a reference may overlap what it is producing (a run).
            let start = out.len() - off;
            for k in 0..n {
                let b = out[start + k];
                out.push(b);
            }
        }
    }
    (out.len() == len).then_some(out)
}

/// LZF compression (for tests: Redis compresses strings over 20 bytes; goblin's DUMP does
/// not, but RESTORE must read them). A simple greedy matcher over a hash of 3 bytes.
pub fn lzf_compress(inp: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut lit: Vec<u8> = Vec::new();
    let flush = |out: &mut Vec<u8>, lit: &mut Vec<u8>| {
        for chunk in lit.chunks(32) {
            out.push((chunk.len() - 1) as u8);
            out.extend_from_slice(chunk);
        }
        lit.clear();
    };
    // A table sized to the input (64 to 4,096 slots): short strings, the common case in an RDB
    // file, must not pay for clearing a large one.
    let bits = (usize::BITS - inp.len().leading_zeros()).clamp(6, 12);
    let mask = (1usize << bits) - 1;
    let mut table = vec![usize::MAX; 1 << bits];
    let mut i = 0;
    while i < inp.len() {
        if i + 3 <= inp.len() {
            let h = ((inp[i] as usize) << 8 ^ (inp[i + 1] as usize) << 4 ^ inp[i + 2] as usize) & mask;
            let cand = table[h];
            table[h] = i;
            if cand != usize::MAX && i - cand <= 8192 && inp[cand..cand + 3] == inp[i..i + 3] {
                let mut n = 3;
                while i + n < inp.len() && n < 264 && inp[cand + n] == inp[i + n] {
                    n += 1;
                }
                flush(&mut out, &mut lit);
                let off = i - cand - 1;
                let l = n - 2;
                if l < 7 {
                    out.push(((l << 5) | (off >> 8)) as u8);
                } else {
                    out.push(((7 << 5) | (off >> 8)) as u8);
                    out.push((l - 7) as u8);
                }
                out.push(off as u8);
                i += n;
                continue;
            }
        }
        lit.push(inp[i]);
        i += 1;
    }
    flush(&mut out, &mut lit);
    out
}

/// One element of a listpack or ziplist.
#[derive(Clone, Copy)]
enum Entry<'a> {
    Str(&'a [u8]),
    Int(i64),
}

impl Entry<'_> {
    /// The element as a string (integers in decimal, as Redis reads them back).
    fn bytes(&self) -> Vec<u8> {
        match *self {
            Entry::Str(s) => s.to_vec(),
            Entry::Int(i) => itoa::Buffer::new().format(i).as_bytes().to_vec(),
        }
    }
}

fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0u64, |acc, &x| (acc << 8) | x as u64)
}

/// Sign-extends the low `bits` of `u`.
fn signed(u: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((u << shift) as i64) >> shift
}

/// Walks a listpack: `total bytes: u32 LE`, `count: u16 LE` (65535: unknown), the entries
/// (each its encoding and data, then a back length of 1 to 5 bytes), and the end byte 0xFF,
/// which must be the last byte. The count, when known, must match.
fn for_each_listpack<'a>(lp: &'a [u8], mut f: impl FnMut(Entry<'a>) -> R<()>) -> R<()> {
    if lp.len() < 7 || le(&lp[0..4]) != lp.len() as u64 {
        return Err(BAD);
    }
    let declared = le(&lp[4..6]);
    let mut p = 6;
    let mut n = 0u64;
    loop {
        let b = *lp.get(p).ok_or(BAD)?;
        if b == 0xFF {
            break;
        }
        let get = |from: usize, k: usize| lp.get(from..from + k).ok_or(BAD);
        let (entry, size) = if b & 0x80 == 0 {
            (Entry::Int((b & 0x7f) as i64), 1)
        } else if b & 0xC0 == 0x80 {
            let l = (b & 0x3f) as usize;
            (Entry::Str(get(p + 1, l)?), 1 + l)
        } else if b & 0xE0 == 0xC0 {
            let u = (((b & 0x1f) as u64) << 8) | *lp.get(p + 1).ok_or(BAD)? as u64;
            (Entry::Int(signed(u, 13)), 2)
        } else if b & 0xF0 == 0xE0 {
            let l = (((b & 0x0f) as usize) << 8) | *lp.get(p + 1).ok_or(BAD)? as usize;
            (Entry::Str(get(p + 2, l)?), 2 + l)
        } else {
            match b {
                0xF0 => {
                    let l = le(get(p + 1, 4)?) as usize;
                    (Entry::Str(get(p + 5, l)?), 5 + l)
                }
                0xF1 => (Entry::Int(signed(le(get(p + 1, 2)?), 16)), 3),
                0xF2 => (Entry::Int(signed(le(get(p + 1, 3)?), 24)), 4),
                0xF3 => (Entry::Int(signed(le(get(p + 1, 4)?), 32)), 5),
                0xF4 => (Entry::Int(le(get(p + 1, 8)?) as i64), 9),
                _ => return Err(BAD),
            }
        };
        let backlen = match size {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2097150 => 3,
            2097151..=268435454 => 4,
            _ => 5,
        };
        let end = p.checked_add(size + backlen).filter(|&e| e < lp.len()).ok_or(BAD)?;
        // The back length (7 bits a byte, read from its last byte backwards, the high bit on
        // every byte but the first) must give the entry's size: a walk backwards reads it.
        let mut back = 0usize;
        for (i, &byte) in lp[p + size..end].iter().rev().enumerate() {
            back |= ((byte & 0x7f) as usize) << (7 * i);
            if (byte & 0x80 == 0) != (i == backlen - 1) {
                return Err(BAD);
            }
        }
        if back != size {
            return Err(BAD);
        }
        p = end;
        f(entry)?;
        n += 1;
    }
    if p != lp.len() - 1 || (declared != 65535 && declared != n) {
        return Err(BAD);
    }
    Ok(())
}

/// A zipmap (RDB type 9) over untrusted input: a count byte (254 and up: count unknown), then
/// entries `<len>field<len><free>value` and `free` unused bytes, each length one byte below
/// 254, or 254 and four little-endian bytes; 255 ends it, at the blob's last byte. A known
/// count must match the entries, as Redis's integrity check requires.
fn for_each_zipmap(zm: &[u8], mut f: impl FnMut(&[u8], &[u8]) -> R<()>) -> R<()> {
    let count = *zm.first().ok_or(BAD)?;
    let mut pos = 1usize;
    // The next length, or None at the end mark.
    let length = |pos: &mut usize| -> R<Option<usize>> {
        match *zm.get(*pos).ok_or(BAD)? {
            255 => {
                *pos += 1;
                Ok(None)
            }
            254 => {
                let b = zm.get(*pos + 1..*pos + 5).ok_or(BAD)?;
                *pos += 5;
                Ok(Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize))
            }
            n => {
                *pos += 1;
                Ok(Some(n as usize))
            }
        }
    };
    let take = |pos: &mut usize, n: usize| -> R<std::ops::Range<usize>> {
        let end = pos.checked_add(n).filter(|&e| e <= zm.len()).ok_or(BAD)?;
        let r = *pos..end;
        *pos = end;
        Ok(r)
    };
    let mut entries = 0usize;
    while let Some(flen) = length(&mut pos)? {
        let field = take(&mut pos, flen)?;
        let vlen = length(&mut pos)?.ok_or(BAD)?;
        let free = *zm.get(pos).ok_or(BAD)? as usize;
        pos += 1;
        let value = take(&mut pos, vlen)?;
        take(&mut pos, free)?;
        f(&zm[field], &zm[value])?;
        entries += 1;
    }
    if pos != zm.len() || (count < 254 && entries != count as usize) {
        return Err(BAD);
    }
    Ok(())
}

/// Walks a ziplist: `total bytes: u32 LE`, `tail offset: u32 LE`, `count: u16 LE` (65535:
/// unknown), entries (previous length: 1 byte, or 0xFE and 4 bytes; encoding; data), 0xFF last.
/// Each entry's previous length must be the previous entry's size and the tail offset the last
/// entry's start, as Redis's integrity check requires: a walk backwards would otherwise read
/// elsewhere than the walk forwards.
fn for_each_ziplist<'a>(zl: &'a [u8], mut f: impl FnMut(Entry<'a>) -> R<()>) -> R<()> {
    if zl.len() < 11 || le(&zl[0..4]) != zl.len() as u64 {
        return Err(BAD);
    }
    let declared = le(&zl[8..10]);
    let tail = le(&zl[4..8]);
    let mut p = 10;
    let mut n = 0u64;
    // Where the last entry started, and its size (0 before the first).
    let (mut last, mut prev_size) = (10usize, 0usize);
    loop {
        let b = *zl.get(p).ok_or(BAD)?;
        if b == 0xFF {
            break;
        }
        let get = |from: usize, k: usize| zl.get(from..from + k).ok_or(BAD);
        let prevlen = if b == 0xFE { le(get(p + 1, 4)?) as usize } else { b as usize };
        if prevlen != prev_size {
            return Err(BAD);
        }
        let q = if b == 0xFE { p + 5 } else { p + 1 };
        let e = *zl.get(q).ok_or(BAD)?;
        let (entry, size) = match e >> 6 {
            0 => {
                let l = (e & 0x3f) as usize;
                (Entry::Str(get(q + 1, l)?), 1 + l)
            }
            1 => {
                let l = (((e & 0x3f) as usize) << 8) | *zl.get(q + 1).ok_or(BAD)? as usize;
                (Entry::Str(get(q + 2, l)?), 2 + l)
            }
            2 if e == 0x80 => {
                let d = get(q + 1, 4)?;
                let l = u32::from_be_bytes(d.try_into().unwrap()) as usize;
                (Entry::Str(get(q + 5, l)?), 5 + l)
            }
            2 => return Err(BAD),
            _ => match e {
                0xC0 => (Entry::Int(signed(le(get(q + 1, 2)?), 16)), 3),
                0xD0 => (Entry::Int(signed(le(get(q + 1, 4)?), 32)), 5),
                0xE0 => (Entry::Int(le(get(q + 1, 8)?) as i64), 9),
                0xF0 => (Entry::Int(signed(le(get(q + 1, 3)?), 24)), 4),
                0xFE => (Entry::Int(*zl.get(q + 1).ok_or(BAD)? as i8 as i64), 2),
                0xF1..=0xFD => (Entry::Int((e & 0x0f) as i64 - 1), 1),
                _ => return Err(BAD),
            },
        };
        let next = q.checked_add(size).filter(|&e| e < zl.len()).ok_or(BAD)?;
        (last, prev_size) = (p, next - p);
        p = next;
        f(entry)?;
        n += 1;
    }
    if p != zl.len() - 1 || (declared != 65535 && declared != n) || tail != last as u64 {
        return Err(BAD);
    }
    Ok(())
}

/// An intset: `encoding: u32 LE` (2, 4 or 8 bytes per value), `count: u32 LE`, the values
/// little endian, strictly ascending.
fn intset(blob: &[u8]) -> R<Vec<i64>> {
    if blob.len() < 8 {
        return Err(BAD);
    }
    let width = le(&blob[0..4]) as usize;
    let count = le(&blob[4..8]) as usize;
    if !matches!(width, 2 | 4 | 8)
        || count.checked_mul(width).and_then(|b| b.checked_add(8)) != Some(blob.len())
    {
        return Err(BAD);
    }
    let vals: Vec<i64> = blob[8..].chunks_exact(width).map(|c| signed(le(c), width as u32 * 8)).collect();
    if vals.windows(2).any(|w| w[0] >= w[1]) {
        return Err(BAD);
    }
    Ok(vals)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A set read in either order (Redis's descending, goblin-core's ascending) is the set
    /// inserting its members one by one builds, scores to the bit (-0 kept); a member given
    /// twice is refused on both paths.
    #[test]
    fn zset_of_builds_what_inserting_builds() {
        let bits = |z: &ZSet| z.iter().map(|(m, s)| (m.to_vec(), s.to_bits())).collect::<Vec<_>>();
        for n in [1usize, 5, 200, 3000] {
            for neg_zero in [false, true] {
                let mut items: Vec<(Vec<u8>, f64)> =
                    (0..n).map(|i| (format!("m{i:05}").into_bytes(), (i as f64) - 2.0)).collect();
                if neg_zero {
                    items[0].1 = -0.0;
                }
                let mut one = ZSet::new();
                for (m, s) in &items {
                    one.insert_exact(m, *s);
                }
                let asc = zset_of(items.clone()).unwrap();
                items.reverse();
                let desc = zset_of(items.clone()).unwrap();
                assert_eq!(bits(&asc), bits(&one), "ascending, {n}");
                assert_eq!(bits(&desc), bits(&one), "descending, {n}");
                assert_eq!(asc.encoding(), one.encoding());
                if n > 1 {
                    // The same member twice, with scores that keep the order strict.
                    let mut dup = items.clone();
                    dup[1].0 = dup[0].0.clone();
                    assert!(matches!(zset_of(dup), Err(BAD)), "{n} {neg_zero}");
                }
            }
        }
    }

    /// A DUMP payload of a plain (non-packed) set or hash: its type byte, the count, the
    /// strings, then the footer.
    fn payload(ty: u8, count: usize, strings: &[Vec<u8>]) -> Vec<u8> {
        let mut p = vec![ty];
        put_len(&mut p, count as u64);
        for s in strings {
            put_str(&mut p, s);
        }
        p.extend_from_slice(&10u16.to_le_bytes());
        let crc = crc64(0, &p);
        p.extend_from_slice(&crc.to_le_bytes());
        p
    }

    #[test]
    fn big_sets_and_hashes_read_in_one_pass_as_one_by_one() {
        for n in [1usize, 100, 129, 600, 5000] {
            let members: Vec<Vec<u8>> = (0..n).map(|i| format!("member{i}").into_bytes()).collect();
            let ints: Vec<Vec<u8>> = (0..n).map(|i| (i * 7).to_string().into_bytes()).collect();
            for items in [&members, &ints] {
                let mut one = Set::new();
                items.iter().for_each(|m| assert!(one.add(m)));
                let Ok(Value::Set(got)) = restore(&payload(TYPE_SET, n, items)) else { panic!("set of {n}") };
                assert_eq!(got.encoding(), one.encoding(), "{n}");
                let (mut a, mut b) = (Vec::new(), Vec::new());
                got.for_each(|m| a.push(m.to_vec()));
                one.for_each(|m| b.push(m.to_vec()));
                a.sort();
                b.sort();
                assert_eq!(a, b);
                if n > 1 {
                    let mut dup = items.clone();
                    dup[n - 1] = dup[0].clone();
                    assert!(
                        matches!(restore(&payload(TYPE_SET, n, &dup)), Err(BAD)),
                        "set of {n}, a member twice"
                    );
                }
            }
            let pairs: Vec<Vec<u8>> =
                (0..n).flat_map(|i| [format!("f{i}").into_bytes(), vec![b'v'; i % 90]]).collect();
            let mut one = Hash::new();
            pairs.chunks(2).for_each(|p| assert!(one.set(&p[0], &p[1])));
            let Ok(Value::Hash(got)) = restore(&payload(TYPE_HASH, n, &pairs)) else { panic!("hash of {n}") };
            assert_eq!(got.encoding(), one.encoding(), "{n}");
            let order = |h: &Hash| h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect::<Vec<_>>();
            if got.encoding() == "listpack" {
                assert_eq!(order(&got), order(&one), "a small hash keeps its order");
            }
            let (mut a, mut b) = (order(&got), order(&one));
            a.sort();
            b.sort();
            assert_eq!(a, b);
            if n > 1 {
                let mut dup = pairs.clone();
                dup[2 * (n - 1)] = dup[0].clone();
                assert!(
                    matches!(restore(&payload(TYPE_HASH, n, &dup)), Err(BAD)),
                    "hash of {n}, a field twice"
                );
            }
        }
        assert!(matches!(restore(&payload(TYPE_HASH, 0, &[])), Err(BAD)), "an empty hash");
    }

    #[test]
    fn a_key_twice_in_one_database_is_refused_and_once_in_each_is_not() {
        let file = |dbs: &[u32]| {
            let mut f = b"REDIS0010".to_vec();
            for &db in dbs {
                f.push(OPCODE_SELECTDB);
                put_len(&mut f, db as u64);
                f.push(TYPE_STRING);
                put_str(&mut f, b"k");
                put_str(&mut f, b"v");
            }
            f.push(OPCODE_EOF);
            let crc = crc64(0, &f);
            f.extend_from_slice(&crc.to_le_bytes());
            f
        };
        let load = |f: &[u8]| {
            let mut dbs: Vec<store::Keyspace> = (0..2).map(|_| store::Keyspace::new()).collect();
            load_rdb_file(
                f,
                0,
                2,
                &mut |db, k, v, d| dbs[db as usize].put(k, v, d),
                &mut |_, _| {},
                &mut |_| {},
            )
            .map(|loaded| loaded.keys)
        };
        assert_eq!(load(&file(&[0, 1])), Ok(2));
        let err = load(&file(&[1, 1])).unwrap_err();
        assert!(err.contains("key 'k' appears twice"), "{err}");
    }

    #[test]
    fn crc64_matches_redis_check_value() {
        // Redis's crc64.c self-test: crc64(0, "123456789") = e9c6d914c4b8d9ca.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    proptest::proptest! {
        /// Eight bytes a step gives what one bit at a time gives, for any length and any
        /// split of the data into calls.
        #[test]
        fn crc64_by_words_is_crc64_by_bits(data in proptest::collection::vec(proptest::num::u8::ANY, 0..200), cut in 0usize..200) {
            let mut slow = 0u64;
            for &b in &data {
                slow ^= b as u64;
                for _ in 0..8 {
                    slow = if slow & 1 == 1 { (slow >> 1) ^ CRC64_POLY_REFLECTED } else { slow >> 1 };
                }
            }
            let cut = cut.min(data.len());
            proptest::prop_assert_eq!(crc64(0, &data), slow);
            proptest::prop_assert_eq!(crc64(crc64(0, &data[..cut]), &data[cut..]), slow);
        }
    }

    /// A zipmap as Redis 2.x wrote one (the test's own encoder).
    fn zipmap(pairs: &[(Vec<u8>, Vec<u8>)], free: u8) -> Vec<u8> {
        let len = |out: &mut Vec<u8>, n: usize| {
            if n < 254 {
                out.push(n as u8);
            } else {
                out.push(254);
                out.extend_from_slice(&(n as u32).to_le_bytes());
            }
        };
        let mut out = vec![pairs.len().min(254) as u8];
        for (f, v) in pairs {
            len(&mut out, f.len());
            out.extend_from_slice(f);
            len(&mut out, v.len());
            out.push(free);
            out.extend_from_slice(v);
            out.extend(std::iter::repeat_n(0, free as usize));
        }
        out.push(255);
        out
    }

    proptest::proptest! {
        /// Every zipmap reads back as its pairs, however long its strings; any other bytes
        /// are refused or read, never a panic.
        #[test]
        fn zipmaps_read_back(
            pairs in proptest::collection::btree_map(
                proptest::collection::vec(proptest::num::u8::ANY, 0..300),
                proptest::collection::vec(proptest::num::u8::ANY, 0..300),
                0..20,
            ),
            free in 0u8..4,
            noise in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
        ) {
            let pairs: Vec<_> = pairs.into_iter().collect();
            let zm = zipmap(&pairs, free);
            let mut got = Vec::new();
            for_each_zipmap(&zm, |f, v| {
                got.push((f.to_vec(), v.to_vec()));
                Ok(())
            })
            .unwrap();
            proptest::prop_assert_eq!(got, pairs);
            // Cut short, or noise: an error or some pairs, never a panic.
            let _ = for_each_zipmap(&zm[..zm.len() / 2], |_, _| Ok(()));
            let _ = for_each_zipmap(&noise, |_, _| Ok(()));
        }
    }

    #[test]
    fn listpack_back_lengths_are_checked() {
        // One entry "a" (encoding 0x81, its byte, back length 2) and the end mark.
        let lp = |back: u8| vec![10, 0, 0, 0, 1, 0, 0x81, b'a', back, 0xFF];
        let mut got = Vec::new();
        for_each_listpack(&lp(2), |e| {
            got.push(e.bytes());
            Ok(())
        })
        .unwrap();
        assert_eq!(got, [b"a".to_vec()]);
        // A back length that is not the entry's size, or that claims another byte.
        assert!(for_each_listpack(&lp(3), |_| Ok(())).is_err());
        assert!(for_each_listpack(&lp(0x82), |_| Ok(())).is_err());
    }

    #[test]
    fn zipmap_checks() {
        // Redis's tests/assets/hash-zipmap.rdb value: f1 -> v1, f2 -> v2.
        let zm = zipmap(&[(b"f1".to_vec(), b"v1".to_vec()), (b"f2".to_vec(), b"v2".to_vec())], 0);
        let mut n = 0;
        for_each_zipmap(&zm, |_, _| {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 2);
        // A wrong count, bytes after the end mark, no end mark.
        let mut bad = zm.clone();
        bad[0] = 3;
        assert!(for_each_zipmap(&bad, |_, _| Ok(())).is_err());
        let mut bad = zm.clone();
        bad.push(0);
        assert!(for_each_zipmap(&bad, |_, _| Ok(())).is_err());
        assert!(for_each_zipmap(&zm[..zm.len() - 1], |_, _| Ok(())).is_err());
    }

    /// A refused RESTORE payload is reported to the hook with the check it failed, named
    /// as Redis names it; a payload that loads reports nothing.
    #[test]
    fn refused_payloads_name_their_failed_check() {
        // The hook is the process's: other tests running beside this one report their own
        // refusals, so each report is kept with the thread that made it.
        type Seen = Vec<(std::thread::ThreadId, String)>;
        static SEEN: std::sync::Mutex<Seen> = std::sync::Mutex::new(Vec::new());
        set_refused_payload_hook(|why| {
            SEEN.lock().unwrap().push((std::thread::current().id(), why.to_string()))
        });
        // Redis's hash ziplist with an entry length that runs past the ziplist (its
        // corrupt-dump test "hash with valid zip list header, invalid entry len").
        let bad = b"\x0D\x1B\x1B\x00\x00\x00\x16\x00\x00\x00\x04\x00\x00\x02\x61\x00\x04\x02\x62\x00\x04\x14\x63\x00\x04\x02\x64\x00\xFF\x09\x00\xD9\x10\x54\x92\x15\xF5\x5F\x52";
        assert!(matches!(restore(bad), Err(DecodeError::BadFormat)));
        let good = dump(Value::Str(b"fine".to_vec()).as_ref());
        assert!(restore(&good).is_ok());
        let me = std::thread::current().id();
        let seen: Vec<String> =
            SEEN.lock().unwrap().iter().filter(|(t, _)| *t == me).map(|(_, why)| why.clone()).collect();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert!(seen[0].starts_with("Hash ziplist integrity check failed"), "{seen:?}");
        assert_eq!(encoding_name(19), "Stream listpack");
        assert_eq!(encoding_name(12), "Zset ziplist");
    }

    #[test]
    fn lzf_round_trip() {
        for s in
            [&b""[..], b"a", b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", b"abcabcabcabcabcabcxyzxyzabc"]
        {
            let c = lzf_compress(s);
            assert_eq!(lzf_decompress(&c, s.len() as u64).as_deref(), Some(s));
        }
        let long: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(lzf_decompress(&lzf_compress(&long), long.len() as u64), Some(long));
    }

    #[test]
    fn redis_7_0_payloads_load() {
        use store::Plain;
        // Payloads redis-server 7.0.15's DUMP produced (tests/dump_restore.rs in goblin-core
        // compares against a live server too).
        let plain = |h: &str| restore(&hex(h)).unwrap().as_ref().to_plain();
        let strs = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        // SET s 123: an int-encoded string.
        assert_eq!(plain("00c07b0a0048e253e1007a67b9"), Plain::Str(b"123".to_vec()));
        // "abc" x 30: LZF-compressed.
        assert_eq!(
            plain("00c30b405a0361626361e04b020162630a00238036f9e2d0c780"),
            Plain::Str(b"abc".repeat(30))
        );
        // RPUSH l a b 1: quicklist 2 with one listpack node.
        assert_eq!(
            plain("1201020f0f00000003008161028162020101ff0a00e01bab4a47ce5922"),
            Plain::List(strs(&["a", "b", "1"]))
        );
        // Every listpack integer width, negative values included.
        let lneg = "1201023a3a0000000b00dfff02df3802f270110104f290eefe04f4000000000001000009f4000000\
                    00000000c0097f01c08002cfff02d00002f1ff1f03ff0a009c23e404f49f870b";
        assert_eq!(
            plain(lneg),
            Plain::List(strs(&[
                "-1",
                "-200",
                "70000",
                "-70000",
                "1099511627776",
                "-4611686018427387904",
                "127",
                "128",
                "4095",
                "-4096",
                "8191"
            ]))
        );
        // SADD si 1 2 3: an intset.
        assert_eq!(
            plain("0b0e02000000030000000100020003000a00a5025ce26d6e4d1b"),
            Plain::Set(strs(&["1", "2", "3"]).into_iter().collect())
        );
        // SADD ss a b: a plain set (7.0 has no listpack sets).
        assert_eq!(
            plain("0202016101620a00fe642125eb033d0d"),
            Plain::Set(strs(&["a", "b"]).into_iter().collect())
        );
        // HSET h f v n 5: a listpack hash.
        assert_eq!(
            plain("1012120000000400816602817602816e020501ff0a008490939f57b4f3c2"),
            Plain::Hash(
                [(b"f".to_vec(), b"v".to_vec()), (b"n".to_vec(), b"5".to_vec())].into_iter().collect()
            )
        );
        // ZADD z 1.5 a 2 b: a listpack zset (scores as text and as integers).
        assert_eq!(
            plain("111414000000040081610283312e35048162020201ff0a00fa02b425af188763"),
            Plain::ZSet(vec![(b"a".to_vec(), 1.5f64.to_bits()), (b"b".to_vec(), 2f64.to_bits())])
        );
        // A flipped checksum bit and a newer version are refused as Redis refuses them.
        let mut bad = hex("00c07b0a0048e253e1007a67b9");
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(restore(&bad).unwrap_err(), DecodeError::VersionOrChecksum);
        assert_eq!(restore(b"").unwrap_err(), DecodeError::VersionOrChecksum);
    }

    #[test]
    fn dump_round_trips_and_redis_reads_goblin_strings() {
        // Goblin's DUMP of "123" is byte for byte Redis's.
        let v = Value::Str(b"123".to_vec());
        assert_eq!(dump(v.as_ref()), hex("00c07b0a0048e253e1007a67b9"));
        let mut h = Hash::new();
        h.set(b"f", b"v");
        let v = Value::Hash(Box::new(h));
        assert_eq!(restore(&dump(v.as_ref())).unwrap().as_ref().to_plain(), v.as_ref().to_plain());
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }
}
