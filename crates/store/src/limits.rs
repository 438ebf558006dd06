//! The encoding thresholds Redis lets operators tune (`hash-max-listpack-entries` and the
//! rest), read by the types when a collection grows or is built: a collection within them
//! keeps its compact form (no index), one past them gets indexed, as in Redis.
//!
//! Process-wide settings changed only by the server thread (CONFIG SET, startup flags);
//! atomics so that a plain load, with no lock, serves every reader. A change applies to
//! collections as they next grow or are built; existing ones keep their form, as in Redis.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Redis's defaults.
pub static HASH_MAX_LISTPACK_ENTRIES: AtomicUsize = AtomicUsize::new(512);
pub static HASH_MAX_LISTPACK_VALUE: AtomicUsize = AtomicUsize::new(64);
pub static SET_MAX_INTSET_ENTRIES: AtomicUsize = AtomicUsize::new(512);
pub static SET_MAX_LISTPACK_ENTRIES: AtomicUsize = AtomicUsize::new(128);
pub static SET_MAX_LISTPACK_VALUE: AtomicUsize = AtomicUsize::new(64);
pub static ZSET_MAX_LISTPACK_ENTRIES: AtomicUsize = AtomicUsize::new(128);
pub static ZSET_MAX_LISTPACK_VALUE: AtomicUsize = AtomicUsize::new(64);
/// A stream block takes at most this many entries (0: no bound), as Redis bounds the
/// listpack nodes of its streams; approximate trimming removes whole blocks.
pub static STREAM_NODE_MAX_ENTRIES: AtomicUsize = AtomicUsize::new(100);
/// ... and at most about this many bytes (0: no bound).
pub static STREAM_NODE_MAX_BYTES: AtomicUsize = AtomicUsize::new(4096);

/// `list-max-listpack-size`: a list is named `listpack` while it fits one node this size
/// (negative: -1 to -5 for 4 to 64 KiB; positive: that many entries). Only the name OBJECT
/// ENCODING reports depends on it: goblin-core's lists have one form.
static LIST_MAX_LISTPACK_SIZE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(-2);

pub fn list_max_listpack_size() -> i64 {
    LIST_MAX_LISTPACK_SIZE.load(Relaxed)
}

pub fn set_list_max_listpack_size(v: i64) {
    LIST_MAX_LISTPACK_SIZE.store(v, Relaxed);
}

/// `hll-sparse-max-bytes`: a sparse HyperLogLog that would grow past this many bytes turns
/// dense.
pub static HLL_SPARSE_MAX_BYTES: AtomicUsize = AtomicUsize::new(3000);

/// The IDMP settings a stream takes when it first uses idempotent production (Redis 8.6's
/// `stream-idmp-duration`, seconds, and `stream-idmp-maxsize`, iids per producer); XCFGSET
/// sets a stream's own.
pub static STREAM_IDMP_DURATION: AtomicUsize = AtomicUsize::new(100);
pub static STREAM_IDMP_MAXSIZE: AtomicUsize = AtomicUsize::new(100);

/// The largest intset any setting allows (and a snapshot may hold): Redis caps intsets so
/// that a lookup's binary search stays cheap.
pub const INTSET_HARD_MAX: usize = 1 << 30;

#[inline]
pub fn get(limit: &AtomicUsize) -> usize {
    limit.load(Relaxed)
}

pub fn set(limit: &AtomicUsize, value: usize) {
    limit.store(value, Relaxed);
}

/// Every setting by its Redis name (the `ziplist` names are Redis's aliases), for CONFIG.
pub fn by_name(name: &str) -> Option<&'static AtomicUsize> {
    Some(match name {
        "hash-max-listpack-entries" | "hash-max-ziplist-entries" => &HASH_MAX_LISTPACK_ENTRIES,
        "hash-max-listpack-value" | "hash-max-ziplist-value" => &HASH_MAX_LISTPACK_VALUE,
        "set-max-intset-entries" => &SET_MAX_INTSET_ENTRIES,
        "set-max-listpack-entries" => &SET_MAX_LISTPACK_ENTRIES,
        "set-max-listpack-value" => &SET_MAX_LISTPACK_VALUE,
        "zset-max-listpack-entries" | "zset-max-ziplist-entries" => &ZSET_MAX_LISTPACK_ENTRIES,
        "zset-max-listpack-value" | "zset-max-ziplist-value" => &ZSET_MAX_LISTPACK_VALUE,
        "stream-node-max-entries" => &STREAM_NODE_MAX_ENTRIES,
        "stream-node-max-bytes" => &STREAM_NODE_MAX_BYTES,
        "stream-idmp-duration" => &STREAM_IDMP_DURATION,
        "stream-idmp-maxsize" => &STREAM_IDMP_MAXSIZE,
        "hll-sparse-max-bytes" => &HLL_SPARSE_MAX_BYTES,
        _ => return None,
    })
}

/// The names CONFIG GET lists, in a stable order.
pub const NAMES: &[&str] = &[
    "hash-max-listpack-entries",
    "hash-max-ziplist-entries",
    "hash-max-listpack-value",
    "hash-max-ziplist-value",
    "set-max-intset-entries",
    "set-max-listpack-entries",
    "set-max-listpack-value",
    "zset-max-listpack-entries",
    "zset-max-ziplist-entries",
    "zset-max-listpack-value",
    "zset-max-ziplist-value",
    "stream-node-max-entries",
    "stream-node-max-bytes",
    "stream-idmp-duration",
    "stream-idmp-maxsize",
    "hll-sparse-max-bytes",
];

/// Redis's hidden `rdb-key-save-delay`, for tests that need a save to take time: the pause
/// after each key a snapshot or RDB writer writes (a forked child inherits the value). n > 0
/// sleeps n microseconds; n < 0 sleeps one microsecond every -n keys; 0, the default, never.
static KEY_SAVE_DELAY_US: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

pub fn key_save_delay_us() -> i64 {
    KEY_SAVE_DELAY_US.load(Relaxed)
}

pub fn set_key_save_delay_us(us: i64) {
    KEY_SAVE_DELAY_US.store(us, Relaxed);
}

/// Keys written by this process's writers since [`set_save_progress_hook`] (a forked child
/// counts its own save: the parent's count is copied at the fork and reset there).
static KEYS_SAVED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// The function [`key_saved`] calls with the count every 1024 keys (0: none), as a `fn(u64)`
/// pointer. Set once, in a forked child before it writes.
static SAVE_PROGRESS_HOOK: AtomicUsize = AtomicUsize::new(0);

/// Makes [`key_saved`] call `hook` with the keys written so far every 1024 keys, counting
/// from zero now. For a forked child that reports its progress to its parent.
pub fn set_save_progress_hook(hook: fn(u64)) {
    KEYS_SAVED.store(0, Relaxed);
    SAVE_PROGRESS_HOOK.store(hook as usize, Relaxed);
}

/// Called by the snapshot and RDB writers after each key: the progress hook, if any, every
/// 1024 keys; then the pause of [`key_save_delay_us`] after their `n`th key.
pub fn key_saved(n: u64) {
    let hook = SAVE_PROGRESS_HOOK.load(Relaxed);
    if hook != 0 {
        let saved = KEYS_SAVED.fetch_add(1, Relaxed) + 1;
        if saved.is_multiple_of(1024) {
            // SAFETY: a non-zero value is only ever stored by `set_save_progress_hook`, from
            // a `fn(u64)`.
            let f: fn(u64) = unsafe { std::mem::transmute::<usize, fn(u64)>(hook) };
            f(saved);
        }
    }
    let pause = match key_save_delay_us() {
        0 => return,
        us if us > 0 => us as u64,
        us if n.is_multiple_of(us.unsigned_abs()) => 1,
        _ => return,
    };
    std::thread::sleep(std::time::Duration::from_micros(pause));
}
