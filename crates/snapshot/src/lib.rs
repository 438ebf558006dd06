//! The native snapshot format, `.gcsn`: a keyspace streamed to bytes and back.
//!
//! `docs/FORMAT.md` describes the format byte for byte. In short: a 12-byte prelude (magic,
//! version), a header block (server version, creation time, replication metadata, key count),
//! data blocks carrying one record per key (tag, optional absolute deadline, key, value in the
//! store's own compact encodings; the keys of a database above 0 follow a database selector
//! record), and a trailer block with the counts. Every block carries a CRC-32C of its header
//! and one of its payload, so damage is found and located to the block.
//!
//! Both directions stream:
//! - [`write_dbs`] (databases 0 and up; [`write`]: database 0 alone) encodes key by key into
//!   one bounded block buffer and flushes each block as it fills; it never holds a second copy
//!   of the dataset. Records straddle block boundaries, so the buffer stays bounded whatever
//!   the size of a value.
//! - [`read_dbs`] (every database; [`read`]: database 0 alone) verifies and decodes block by
//!   block into fresh [`Keyspace`]s, building every value directly in its compact encoding
//!   (`from_raw` constructors of the store, which validate untrusted bytes fully). It never
//!   returns a partial keyspace: any error drops what was loaded.
//!
//! Nothing here panics on any input: a damaged or crafted file yields a [`LoadError`] that
//! names the block and byte offset.
//!
//! Also here, for the server's SAVE path: [`save_atomic`] (temp file, fsync, rename, fsync the
//! folder) and [`birth_time`] (a file's creation time, for reporting a snapshot's age).

mod format;
mod fs;
mod reader;
mod stream;
mod writer;

pub use format::{DEFAULT_BLOCK_SIZE, FORMAT_VERSION, MAGIC, MAX_BLOCK, MAX_DATABASE};
pub use fs::{birth_time, is_temp_file_of, save_atomic, save_atomic_on, RealFs, SaveFs};
pub use reader::{blocks, read, read_dbs, read_meta, BlockInfo};
pub use writer::{write, write_dbs, write_dbs_with, write_with};

use std::fmt;
use std::io;
pub use store::Keyspace;

/// Replication metadata, stored in the header block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The writing server's version string.
    pub server_version: String,
    /// When the snapshot was started (unix milliseconds).
    pub created_unix_ms: i64,
    /// The replication lineage id (today 40 ASCII hex characters; stored length-prefixed, so
    /// any bytes that form a String round-trip).
    pub replid: String,
    /// Highest logical offset contained in the keyspace.
    pub logical_offset: u64,
    /// Last Kafka broker offset acknowledged to the producer; -1 when unknown.
    pub kafka_acked_offset: i64,
    /// First Kafka broker offset the server had not processed yet; -1 when unknown.
    pub kafka_consumer_position: i64,
    /// The function libraries' code (Redis 7 functions; each names its library in its first
    /// line), in library-name order. Non-empty only in format versions 2 and 3.
    pub functions: Vec<Vec<u8>>,
    /// A replica's mutations that Kafka had not confirmed when the snapshot was taken:
    /// (logical offset, xxh3-64 of the mutation's bytes), in increasing offset order. A
    /// replica restarted from the file checks them against the topic, as it would have had it
    /// kept running (see goblin-core's `replication::unconfirmed`). A header addition (see
    /// FORMAT.md): readers that predate it skip it.
    pub unconfirmed: Vec<(u64, u64)>,
    /// The lineage this one continues and the offset it continues it from (goblin-core's
    /// `Replication::previous`, INFO `master_replid2`), if any. A header addition.
    pub previous: Option<(String, u64)>,
}

/// Keys per value type, in the order of [`store::Kind`]: string, hash, set, zset, list, array,
/// stream, vector set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TypeCounts {
    pub strings: u64,
    pub hashes: u64,
    pub sets: u64,
    pub zsets: u64,
    pub lists: u64,
    pub arrays: u64,
    pub streams: u64,
    pub vsets: u64,
}

impl TypeCounts {
    /// The six counts every trailer holds (streams, when there are any, follow the others:
    /// see `docs/FORMAT.md`, "Trailer block").
    pub(crate) fn as_array(&self) -> [u64; 6] {
        [self.strings, self.hashes, self.sets, self.zsets, self.lists, self.arrays]
    }
    pub(crate) fn bump(&mut self, k: store::Kind) {
        match k {
            store::Kind::Str => self.strings += 1,
            store::Kind::Hash => self.hashes += 1,
            store::Kind::Set => self.sets += 1,
            store::Kind::ZSet => self.zsets += 1,
            store::Kind::List => self.lists += 1,
            store::Kind::Array => self.arrays += 1,
            store::Kind::Stream => self.streams += 1,
            store::Kind::VectorSet => self.vsets += 1,
        }
    }
}

/// What a snapshot holds (as written, or as read and checked against the trailer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Keys written (or loaded).
    pub keys: u64,
    /// Keys with a deadline.
    pub volatile: u64,
    pub types: TypeCounts,
    /// Bytes of the whole file.
    pub bytes: u64,
    /// Blocks in the file: header, data blocks and trailer.
    pub blocks: u64,
    /// Bytes of the data records before compression (the data blocks' raw payloads).
    pub raw_data_bytes: u64,
}

/// Progress of a write or read, reported after each block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Keys written or loaded so far.
    pub keys: u64,
    /// Keys in the snapshot (from the header when reading).
    pub total_keys: u64,
    /// File bytes written or read so far.
    pub bytes: u64,
    /// Blocks written or read so far.
    pub blocks: u64,
}

/// Block compression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    /// Each data block is one LZ4 block when that makes it smaller, raw otherwise.
    Lz4,
}

/// Writer settings; [`Options::default`] is what [`write`] uses.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub compression: Compression,
    /// Raw payload bytes per data block (clamped to 1 ..= [`MAX_BLOCK`]).
    pub block_size: usize,
}

impl Default for Options {
    /// No compression, 256 KiB blocks: on the six-type dataset LZ4 made the file 2.6x smaller
    /// but the load slower (see `docs/FORMAT.md`, "Compression").
    fn default() -> Self {
        Options { compression: Compression::None, block_size: DEFAULT_BLOCK_SIZE }
    }
}

/// Why a snapshot could not be read. `Display` names the block and byte offset.
#[derive(Debug)]
pub enum LoadError {
    /// Reading failed (not an end of file: see `Truncated`).
    Io(io::Error),
    /// The first 8 bytes are not the `.gcsn` magic.
    BadMagic { found: Vec<u8> },
    /// Written by a newer format version than this reader knows.
    NewerVersion { found: u32, supported: u32 },
    /// A version number no writer ever used (0).
    BadVersion { found: u32 },
    /// The file ends inside block `block` (which starts at byte `offset`; the prelude counts
    /// as block 0's) at byte `at`, or where block `block` should start.
    Truncated { block: u64, offset: u64, at: u64 },
    /// Block `block` at byte `offset` does not match its checksum (`part`: "header" or
    /// "payload").
    ChecksumMismatch { block: u64, offset: u64, part: &'static str },
    /// Block `block` at byte `offset` passed its checksum but its content breaks the format:
    /// `pos` is the byte of the block's (decompressed) payload where the problem was found.
    Malformed { block: u64, offset: u64, pos: u64, what: String },
    /// The trailer's count of `what` differs from what the file held.
    CountMismatch { what: &'static str, trailer: u64, found: u64 },
    /// Bytes follow the trailer, from byte `offset` on.
    TrailingGarbage { offset: u64 },
    /// [`read`] (database 0 only) met the selector of database `db` in block `block` at byte
    /// `offset`: the file holds more databases, which [`read_dbs`] reads.
    OtherDatabases { block: u64, offset: u64, db: u32 },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Io(e) => write!(f, "I/O error: {e}"),
            LoadError::BadMagic { found } => write!(f, "not a .gcsn snapshot (magic bytes {found:02x?})"),
            LoadError::NewerVersion { found, supported } => write!(
                f,
                "snapshot format version {found} is newer than this server reads (up to {supported})"
            ),
            LoadError::BadVersion { found } => write!(f, "invalid snapshot format version {found}"),
            LoadError::Truncated { block, offset, at } => {
                write!(f, "block {block} at byte {offset}: truncated, the file ends at byte {at}")
            }
            LoadError::ChecksumMismatch { block, offset, part } => {
                write!(f, "block {block} at byte {offset}: checksum mismatch ({part})")
            }
            LoadError::Malformed { block, offset, pos, what } => {
                write!(f, "block {block} at byte {offset}: malformed at payload byte {pos}: {what}")
            }
            LoadError::CountMismatch { what, trailer, found } => {
                write!(f, "trailer counts {trailer} {what} but the file holds {found}")
            }
            LoadError::TrailingGarbage { offset } => {
                write!(f, "unexpected bytes after the trailer, from byte {offset}")
            }
            LoadError::OtherDatabases { block, offset, db } => write!(
                f,
                "block {block} at byte {offset}: the snapshot holds databases other than 0 (database {db}), \
                 which this reader does not load"
            ),
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoadError::Io(e) => Some(e),
            _ => None,
        }
    }
}
