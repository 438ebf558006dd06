//! The keyspace: key -> (value, optional absolute expiry).
//!
//! Built for memory first: every key is ONE heap allocation (`keyspace/entry.rs`: link, tag,
//! optional expiry, key, and the value inline, or a pointer to a boxed collection) on a chained
//! hash table with one 8-byte bucket per key ([`table`]). One million `str:{i}` keys with 11-byte
//! values cost 32 + ~8 bytes each (`tests/keyspace_memory.rs` measures it under jemalloc).
//! Resizes are incremental and SCAN cursors survive them (see [`table`]).
//!
//! Expiry is passive here: the keyspace never removes a key by itself. The engine asks
//! [`Keyspace::is_expired`] on access and [`Keyspace::collect_expired`] in the active cycle,
//! removes the key and emits its `DEL` mutation, so that every removal is journaled.

pub mod access;
mod entry;
pub mod hash;
pub mod table;

use crate::value::{ValueMut, ValueRef};
use crate::{Millis, Value};
use access::AccessMode;
pub use entry::size_class;
use entry::{Entry, KeyEntry, Stored};
use table::ChainTable;

pub struct Keyspace {
    table: ChainTable<KeyEntry>,
    /// Keys that have an expiry.
    volatile: usize,
    /// Where the active expiry cycle resumes (a scan cursor over the table).
    expire_cursor: u64,
    /// How lookups update a key's access field (LRU clock or LFU counter).
    access_mode: AccessMode,
    /// The current command's time, which new and touched keys record ([`Keyspace::set_now`]).
    now: Millis,
    /// xorshift64 state for the LFU counter's probabilistic increment (deterministic, no
    /// dependency on the engine's generator).
    lfu_rng: u64,
    /// A forked child shares the pages: accesses are not recorded (each would copy a page).
    frozen: bool,
    /// When the hashes with field deadlines next need the active cycle: one entry per key,
    /// at (or before) its earliest field deadline ([`FieldDue`]).
    field_due: FieldDue,
}

/// The active expiry's index of hashes with field deadlines (Redis keeps the same, as its
/// "ebuckets"): each key at most once, at a time no later than its earliest field deadline, so
/// that the cycle visits only hashes with a field due and a refreshed deadline (a sliding
/// session) adds nothing. An entry may be early or stale (the field was removed, persisted or
/// pushed later, the key deleted or replaced): the cycle that takes it finds out and files the
/// key again at its hash's current earliest deadline, if it still has one.
#[derive(Default)]
struct FieldDue {
    by_time: std::collections::BTreeSet<(i64, Box<[u8]>)>,
    at: std::collections::HashMap<Box<[u8]>, i64>,
}

// SAFETY: the keyspace owns every entry and every boxed collection behind its raw pointers
// exclusively (nothing is shared or reference-counted), so moving it to another thread moves
// all of it; `&Keyspace` only ever hands out shared references to that data. Both are as
// thread-safe as the value types themselves, which the assertion below checks.
unsafe impl Send for Keyspace {}
unsafe impl Sync for Keyspace {}
const _: () = {
    fn assert_send_sync<T: Send + Sync>() {}
    fn check() {
        assert_send_sync::<Value>();
    }
    let _ = check;
};

impl Default for Keyspace {
    fn default() -> Self {
        Self::new()
    }
}

impl Keyspace {
    pub fn new() -> Self {
        Keyspace {
            table: ChainTable::new(),
            volatile: 0,
            expire_cursor: 0,
            access_mode: AccessMode::Lru,
            now: 0,
            lfu_rng: 0x9E37_79B9_7F4A_7C15,
            frozen: false,
            field_due: Default::default(),
        }
    }

    /// An empty keyspace presized for `n` keys (see [`Keyspace::reserve_empty`]).
    pub fn with_capacity(n: usize) -> Self {
        let mut ks = Self::new();
        ks.reserve_empty(n);
        ks
    }

    /// Presizes an empty keyspace's table for `n` keys, so that loading them does no resizes
    /// and ends with the bucket count the inserts would have grown to. No effect once the
    /// keyspace holds keys. (A snapshot loader takes the count from an untrusted header:
    /// callers bound it, since this allocates 8 bytes per key up front.)
    pub fn reserve_empty(&mut self, n: usize) {
        self.table.reserve_empty(n);
    }

    /// Bulk-load mode (the startup replay, with no client waiting): the table finishes each
    /// resize at once instead of spreading it over later calls (see `ChainTable::set_bulk`).
    pub fn set_bulk_load(&mut self, on: bool) {
        self.table.set_bulk(on);
    }

    /// The hash of `key` in this keyspace's table (for `prefetch`).
    #[inline]
    pub fn key_hash(&self, key: &[u8]) -> u64 {
        self.table.hash(key)
    }

    /// A hint that the key hashed to `h` will be looked up soon (see `ChainTable::prefetch`).
    #[inline]
    pub fn prefetch(&self, h: u64, chain: bool) {
        self.table.prefetch(h, chain);
    }

    /// Number of keys, including expired keys not yet removed.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Number of keys with an expiry.
    pub fn volatile_len(&self) -> usize {
        self.volatile
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.table.get(key).is_some()
    }

    /// The value at `key`, whether or not its deadline has passed.
    pub fn get(&self, key: &[u8]) -> Option<ValueRef<'_>> {
        let e = self.table.get(key)?;
        // SAFETY: the entry lives in the table, which `&self` keeps unchanged for the lifetime.
        Some(unsafe { Entry::at(e).value_ref() })
    }

    /// The value and deadline at `key` in one lookup.
    pub fn get_with_expire(&self, key: &[u8]) -> Option<(ValueRef<'_>, Option<Millis>)> {
        let e = self.table.get(key)?;
        // SAFETY: as in `get`.
        let en = unsafe { Entry::at(e) };
        Some((unsafe { en.value_ref() }, en.expire_at()))
    }

    /// [`Keyspace::get_with_expire`] for a command's read: records the access (LRU clock or
    /// LFU counter) on the key.
    pub fn get_with_expire_touch(&mut self, key: &[u8]) -> Option<(ValueRef<'_>, Option<Millis>)> {
        let e = self.table.get(key)?;
        // SAFETY: as in `get`; `&mut self` makes us the entry's only user while touching.
        let en = unsafe { Entry::at(e) };
        self.touch(en);
        Some((unsafe { en.value_ref() }, en.expire_at()))
    }

    /// The value at `key` for writing; records the access.
    pub fn get_mut(&mut self, key: &[u8]) -> Option<ValueMut<'_>> {
        self.get_mut_touching(key, true)
    }

    /// The value at `key` for writing, recording the access only with `touch` (a client in
    /// CLIENT NO-TOUCH mode does not).
    pub fn get_mut_touching(&mut self, key: &[u8], touch: bool) -> Option<ValueMut<'_>> {
        self.table.rehash_step(1);
        let e = self.table.get(key)?;
        // SAFETY: `&mut self` gives exclusive access to the entry for the returned lifetime,
        // and no table operation can run (and move or free the entry) while it is borrowed.
        let en = unsafe { Entry::at(e) };
        if touch {
            self.touch(en);
        }
        Some(unsafe { en.value_mut() })
    }

    /// Sets the time that accesses record from now on (once per command).
    pub fn set_now(&mut self, now: Millis) {
        self.now = now;
    }

    /// The time last given to [`Keyspace::set_now`].
    pub fn now(&self) -> Millis {
        self.now
    }

    /// Chooses what the access field tracks. Switching keeps the fields as they are (Redis's
    /// note: after a switch between LRU and LFU the data takes some time to adjust).
    pub fn set_access_mode(&mut self, mode: AccessMode) {
        self.access_mode = mode;
    }

    pub fn access_mode(&self) -> AccessMode {
        self.access_mode
    }

    /// The access field of `key`, without recording an access (OBJECT, eviction).
    pub fn access(&self, key: &[u8]) -> Option<u32> {
        let e = self.table.get(key)?;
        // SAFETY: live entry, read within this call.
        Some(unsafe { Entry::at(e) }.access())
    }

    /// Sets the access field of `key` (RESTORE .. IDLETIME / FREQ). False if it is missing.
    pub fn set_access(&mut self, key: &[u8], field: u32) -> bool {
        let Some(e) = self.table.get(key) else { return false };
        // SAFETY: live entry; `&mut self` makes us its only user.
        unsafe { Entry::at(e) }.set_access(field);
        true
    }

    /// Records an access at `now` on every key, as for a new key (after a snapshot load: the
    /// file keeps no access times). One pass over the table.
    pub fn stamp_access(&mut self, now: Millis) {
        self.now = now;
        let fresh = self.fresh_access();
        // SAFETY: live entries; `&mut self` makes us their only user.
        self.table.for_each(|e| unsafe { Entry::at(e) }.set_access(fresh));
    }

    /// The field a new key starts with.
    fn fresh_access(&self) -> u32 {
        match self.access_mode {
            AccessMode::Lru => access::lru_clock(self.now),
            AccessMode::Lfu { .. } => access::lfu_new(self.now),
        }
    }

    fn touch(&mut self, en: Entry) {
        if self.frozen {
            return;
        }
        let field = match self.access_mode {
            AccessMode::Lru => access::lru_clock(self.now),
            AccessMode::Lfu { log_factor, decay_minutes } => {
                let mut x = self.lfu_rng;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                self.lfu_rng = x;
                let r = (x >> 11) as f64 / (1u64 << 53) as f64;
                access::lfu_touch(en.access(), self.now, log_factor, decay_minutes, r)
            }
        };
        en.set_access(field);
    }

    /// Up to `n` sampled keys for eviction, each with its deadline and access field: random
    /// keys, or with `volatile_only` keys with a deadline found by walking the table from a
    /// random point (a bounded walk: few volatile keys among many may yield fewer than `n`).
    pub fn sample_for_eviction(
        &self,
        rng: &mut impl rand::Rng,
        n: usize,
        volatile_only: bool,
        out: &mut Vec<(Vec<u8>, Option<Millis>, u32)>,
    ) {
        if self.is_empty() || (volatile_only && self.volatile == 0) {
            return;
        }
        let info = |e| {
            // SAFETY: live entries of a table `&self` keeps unchanged, copied out at once.
            let en = unsafe { Entry::at(e) };
            (unsafe { en.key() }.to_vec(), en.expire_at(), en.access())
        };
        if !volatile_only {
            for _ in 0..n {
                if let Some(e) = self.table.random(rng) {
                    out.push(info(e));
                }
            }
            return;
        }
        let start = out.len();
        let mut cursor: u64 = rng.gen();
        let mut wrapped = false;
        let mut examined = 0usize;
        let limit = n.saturating_mul(100).max(1000);
        loop {
            cursor = self.table.scan_step(cursor, |e| {
                examined += 1;
                // SAFETY: as above.
                if out.len() - start < n && unsafe { Entry::at(e) }.expire_at().is_some() {
                    out.push(info(e));
                }
            });
            if out.len() - start >= n || examined >= limit {
                return;
            }
            // Cursor 0: the walk passed the table's end; go round once more from the start.
            if cursor == 0 {
                if wrapped {
                    return;
                }
                wrapped = true;
            }
        }
    }

    /// Puts an entry into the table and returns the one it replaced, keeping `volatile` exact.
    fn put_entry(&mut self, key: &[u8], value: Value, expire_at: Option<Millis>) -> Option<Entry> {
        self.refile_for(key, &value);
        self.put_stored(key, Stored::from_value(value), expire_at)
    }

    /// The field-deadline index for `key` about to hold `value` whole: filed at its hash's
    /// earliest field deadline, or forgotten.
    fn refile_for(&mut self, key: &[u8], value: &Value) {
        let earliest = match value {
            Value::Hash(h) => h.field_deadlines().map(|(_, t)| t).min(),
            _ => None,
        };
        match earliest {
            Some(t) => self.track_field_deadline(key, t),
            None => self.untrack_field_deadline(key),
        }
    }

    /// Forgets `key` in the field-deadline index (its value went, or is no hash with field
    /// deadlines any more): one map lookup while anything is filed, nothing otherwise.
    fn untrack_field_deadline(&mut self, key: &[u8]) {
        if self.field_due.at.is_empty() {
            return;
        }
        if let Some(filed) = self.field_due.at.remove(key) {
            self.field_due.by_time.remove(&(filed, Box::from(key)));
        }
    }

    /// [`Keyspace::put_entry`] of a value already in its stored form (no field deadlines).
    fn put_stored(&mut self, key: &[u8], value: Stored<'_>, expire_at: Option<Millis>) -> Option<Entry> {
        let e = Entry::alloc(key, expire_at, value);
        if expire_at.is_some() {
            self.volatile += 1;
        }
        let fresh = self.fresh_access();
        // SAFETY: `e` is a fresh entry, in no table.
        unsafe { Entry::at(e) }.set_access(fresh);
        let old = unsafe { self.table.insert(e) }?;
        // SAFETY: the table gave `old` back: it is unlinked and ours.
        let old = unsafe { Entry::at(old) };
        if matches!(self.access_mode, AccessMode::Lfu { .. }) {
            // An overwritten key keeps its frequency (Redis's dbOverwrite under LFU).
            unsafe { Entry::at(e) }.set_access(old.access());
        }
        if old.expire_at().is_some() {
            self.volatile -= 1;
        }
        Some(old)
    }

    /// Sets `key` to `value` with deadline `expire_at` (None: persistent), replacing any old
    /// value and deadline. Returns the old value.
    pub fn insert(&mut self, key: &[u8], value: Value, expire_at: Option<Millis>) -> Option<Value> {
        let old = self.put_entry(key, value, expire_at)?;
        // SAFETY: `old` is unlinked and ours (put_entry).
        Some(unsafe { old.into_value() })
    }

    /// Like [`Keyspace::insert`] but drops the old value instead of returning it (no copy of an
    /// old string). Returns true if the key existed.
    pub fn put(&mut self, key: &[u8], value: Value, expire_at: Option<Millis>) -> bool {
        Self::free_replaced(self.put_entry(key, value, expire_at))
    }

    /// Frees the entry a put replaced (unlinked and ours, as `put_stored` returns it); true if
    /// there was one.
    fn free_replaced(old: Option<Entry>) -> bool {
        match old {
            // SAFETY: `old` is unlinked and ours (put_stored).
            Some(old) => {
                unsafe { old.free() };
                true
            }
            None => false,
        }
    }

    /// [`Keyspace::put`] of a string given as bytes: they are copied once, into the entry.
    pub fn put_bytes(&mut self, key: &[u8], bytes: &[u8], expire_at: Option<Millis>) -> bool {
        self.untrack_field_deadline(key);
        Self::free_replaced(self.put_stored(key, Stored::from_bytes(bytes), expire_at))
    }

    /// Replaces the value of an existing key and keeps its deadline; inserts a persistent key
    /// if it is missing.
    pub fn replace_value(&mut self, key: &[u8], value: Value) {
        self.refile_for(key, &value);
        let mut value = Some(value);
        // SAFETY: set_value keeps the key and returns the entry's new address, which the table
        // links in place of the old one.
        let replaced = unsafe {
            self.table.replace_with(key, |old| {
                Entry::at(old).set_value(Stored::from_value(value.take().expect("called once")))
            })
        };
        if !replaced {
            self.put(key, value.take().expect("not consumed"), None);
        }
    }

    /// Stores `bytes` at `key` as a string modified in place (see [`Keyspace::mark_raw`]),
    /// copied once, into the entry; keeps the key's deadline, or creates it persistent.
    pub fn replace_raw_bytes(&mut self, key: &[u8], bytes: &[u8]) {
        self.untrack_field_deadline(key);
        // SAFETY: as in replace_value.
        let replaced = unsafe {
            self.table.replace_with(key, |old| Entry::at(old).set_value(Stored::RawBytes(bytes.into())))
        };
        if !replaced {
            let old = self.put_stored(key, Stored::RawBytes(bytes.into()), None);
            debug_assert!(old.is_none());
        }
    }

    /// Edits the byte string at `key` where it is stored: its bytes grown (zero-filled) to
    /// `new_len` if shorter, then changed by `f`; OBJECT ENCODING calls it `raw` from then on
    /// (see [`Keyspace::mark_raw`]). The cost is the change, not the string's length
    /// (`Entry::edit_bytes`). Returns false, changing nothing, when `key` is missing or holds
    /// no byte string (an integer-form string, a collection): the caller then stores the
    /// edited value whole. The key's deadline and access field stay as they are.
    pub fn edit_string(&mut self, key: &[u8], new_len: usize, f: impl FnOnce(&mut [u8])) -> bool {
        let Some(e) = self.table.get(key) else { return false };
        // SAFETY: the entry is live for this read.
        if !matches!(unsafe { Entry::at(e) }.form(), entry::Form::Bytes | entry::Form::RawBytes) {
            return false;
        }
        // SAFETY: `&mut self` makes the entry ours; edit_bytes keeps the key, and the table
        // links the returned address in place of the old one.
        unsafe { self.table.replace_with(key, |old| Entry::at(old).edit_bytes(new_len, f)) }
    }

    /// A string value was modified in place (APPEND, SETRANGE, the bit commands): from now on
    /// OBJECT ENCODING calls it `raw`, as Redis does, until a plain write stores it again. An
    /// integer is kept as its decimal bytes. Nothing for a missing key or a collection.
    pub fn mark_raw(&mut self, key: &[u8]) {
        let Some(e) = self.table.get(key) else { return };
        // SAFETY: the entry is live; its value is read before the table changes it.
        let bytes = unsafe {
            let e = Entry::at(e);
            match e.form() {
                entry::Form::RawBytes => return,
                // Bytes and RawBytes share a layout: only the form bits change.
                entry::Form::Bytes => return e.set_form_raw(),
                _ => {}
            }
            match e.value_ref() {
                crate::ValueRef::Str(s) => s.to_vec(),
                _ => return,
            }
        };
        // SAFETY: as in replace_value.
        unsafe {
            self.table.replace_with(key, |old| Entry::at(old).set_value(Stored::RawBytes(bytes.into())));
        }
    }

    /// Undoes [`Keyspace::edit_string`]'s marking when the edit changed nothing: a string
    /// modified in place (`raw`) is plain bytes again, as it was. Nothing for anything else.
    pub fn mark_bytes(&mut self, key: &[u8]) {
        let Some(e) = self.table.get(key) else { return };
        // SAFETY: the entry is live and ours (`&mut self`); only its form bits change, from
        // one byte-string form to the other, which share a layout.
        unsafe { Entry::at(e).set_form_bytes() }
    }

    /// Whether `key` holds a string modified in place (see [`Keyspace::mark_raw`]).
    pub fn is_raw_string(&self, key: &[u8]) -> bool {
        // SAFETY: the entry is live for this read.
        self.table.get(key).is_some_and(|e| unsafe { Entry::at(e).form() } == entry::Form::RawBytes)
    }

    /// Removes `key` and returns its value (a string's bytes copied out of its entry:
    /// [`Keyspace::delete`] drops it without).
    #[must_use = "Keyspace::delete drops a value without building it"]
    pub fn remove(&mut self, key: &[u8]) -> Option<Value> {
        self.take(key).map(|(v, _)| v)
    }

    /// Removes `key` and drops its value. Returns true if it existed.
    pub fn delete(&mut self, key: &[u8]) -> bool {
        let Some(e) = self.table.remove(key) else {
            return false;
        };
        self.untrack_field_deadline(key);
        // SAFETY: the table gave the entry back: unlinked and ours.
        let en = unsafe { Entry::at(e) };
        if en.expire_at().is_some() {
            self.volatile -= 1;
        }
        unsafe { en.free() };
        true
    }

    /// Removes `key` and returns its value and deadline.
    pub fn take(&mut self, key: &[u8]) -> Option<(Value, Option<Millis>)> {
        let e = self.table.remove(key)?;
        self.untrack_field_deadline(key);
        // SAFETY: the table gave the entry back: unlinked and ours.
        let en = unsafe { Entry::at(e) };
        let at = en.expire_at();
        if at.is_some() {
            self.volatile -= 1;
        }
        Some((unsafe { en.into_value() }, at))
    }

    /// The deadline of `key`, if it exists and has one.
    pub fn expire_at(&self, key: &[u8]) -> Option<Millis> {
        let e = self.table.get(key)?;
        // SAFETY: live entry, read within this call.
        unsafe { Entry::at(e) }.expire_at()
    }

    /// Sets or clears the deadline of an existing key. Returns false if the key is missing.
    pub fn set_expire(&mut self, key: &[u8], at: Option<Millis>) -> bool {
        let Some(e) = self.table.get(key) else {
            return false;
        };
        // SAFETY: live entry; `&mut self` makes us its only user.
        let en = unsafe { Entry::at(e) };
        match (en.expire_at().is_some(), at) {
            (true, Some(t)) => en.set_expire_in_place(t),
            (false, None) => {}
            (had, _) => {
                // The entry changes size: copy it into a new allocation, relinked in place.
                // SAFETY: with_expiry keeps the key and returns the new entry.
                unsafe { self.table.replace_with(key, |old| Entry::at(old).with_expiry(at)) };
                if had {
                    self.volatile -= 1;
                } else {
                    self.volatile += 1;
                }
            }
        }
        true
    }

    /// True if `key` exists and its deadline is before `now`. As in Redis, a key lives through
    /// the millisecond of its deadline: with clocks read in whole milliseconds, `<=` would end
    /// a `PX 300` key up to a millisecond before 300 ms had passed since the SET arrived.
    pub fn is_expired(&self, key: &[u8], now: Millis) -> bool {
        // No key has a deadline (`volatile` is exact): no lookup. A write looks its key up
        // for this check and again to change it, so a keyspace without TTLs saves one.
        self.volatile > 0 && matches!(self.expire_at(key), Some(t) if t < now)
    }

    /// Active expiry: appends up to `max` keys whose deadline has passed to `out`, examining at
    /// most `budget` keys (and a few times that many empty buckets), starting where the previous
    /// call stopped. Returns how many keys it examined. Returns at once when no key has an
    /// expiry. The walk uses the resize-proof scan cursor, so every key is examined once per
    /// pass over the table even while it grows or shrinks.
    pub fn collect_expired(
        &mut self,
        now: Millis,
        max: usize,
        budget: usize,
        out: &mut Vec<Vec<u8>>,
    ) -> usize {
        if self.volatile == 0 || max == 0 {
            return 0;
        }
        let mut examined = 0;
        let mut buckets = 0;
        let mut found = 0;
        let mut cursor = self.expire_cursor;
        while examined < budget && found < max && buckets < budget.saturating_mul(4) {
            cursor = self.table.scan_step(cursor, |e| {
                examined += 1;
                // SAFETY: scan_step hands out live entries of an unchanged table.
                let en = unsafe { Entry::at(e) };
                if found < max && matches!(en.expire_at(), Some(t) if t < now) {
                    out.push(unsafe { en.key() }.to_vec());
                    found += 1;
                }
            });
            buckets += 1;
            if cursor == 0 {
                // A full pass ended: resume next call from the start rather than examine
                // keys twice in this one.
                break;
            }
        }
        self.expire_cursor = cursor;
        examined
    }

    /// One step of a SCAN: calls `f` for keys at `cursor`, at least `count` of them unless the
    /// iteration ends, and returns the next cursor (0 when the iteration is complete). Every key
    /// present for the whole iteration is visited at least once, even across resizes (a key
    /// may be visited twice when the table shrank in between).
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], ValueRef<'_>)) -> u64 {
        let mut cursor = cursor;
        let mut seen = 0;
        loop {
            cursor = self.table.scan_step(cursor, |e| {
                seen += 1;
                // SAFETY: scan_step hands out live entries of a table `&self` keeps unchanged.
                let en = unsafe { Entry::at(e) };
                unsafe { f(en.key(), en.value_ref()) };
            });
            if cursor == 0 || seen >= count {
                return cursor;
            }
        }
    }

    /// Calls `f` for every key (in no particular order).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], ValueRef<'_>, Option<Millis>)) {
        self.table.for_each(|e| {
            // SAFETY: live entries of a table `&self` keeps unchanged.
            let en = unsafe { Entry::at(e) };
            unsafe { f(en.key(), en.value_ref(), en.expire_at()) };
        });
    }

    /// A random key (a random non-empty bucket, then a random key of its chain: close to
    /// uniform), or None if the keyspace is empty.
    pub fn random_key(&self, rng: &mut impl rand::Rng) -> Option<Vec<u8>> {
        let e = self.table.random(rng)?;
        // SAFETY: live entry, copied within this call.
        Some(unsafe { Entry::at(e).key() }.to_vec())
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        self.table.clear();
        self.volatile = 0;
        self.expire_cursor = 0;
        self.field_due = FieldDue::default();
    }

    /// Records that a field of the hash at `key` expires at `at` (after giving it that
    /// deadline through [`Keyspace::get_mut`]; values inserted whole are recorded by the
    /// insert). Keeps the earlier of `at` and what the key is filed at.
    pub fn track_field_deadline(&mut self, key: &[u8], at: i64) {
        let due = &mut self.field_due;
        match due.at.get(key) {
            Some(&filed) if filed <= at => {}
            Some(&filed) => {
                due.by_time.remove(&(filed, Box::from(key)));
                due.by_time.insert((at, key.into()));
                due.at.insert(key.into(), at);
            }
            None => {
                due.by_time.insert((at, key.into()));
                due.at.insert(key.into(), at);
            }
        }
    }

    /// When the hash at `key` is filed ([`FieldDue`]): no field of it expires before then.
    /// None when it is not filed, which means it has no field deadline.
    pub fn field_deadline_filed(&self, key: &[u8]) -> Option<Millis> {
        self.field_due.at.get(key).copied()
    }

    /// Files the hash at `key` at exactly `at` (its earliest field deadline, just computed),
    /// or not at all (None: it has none left), whatever it was filed at before.
    pub fn refile_field_deadline(&mut self, key: &[u8], at: Option<Millis>) {
        let due = &mut self.field_due;
        if let Some(filed) = due.at.remove(key) {
            due.by_time.remove(&(filed, Box::from(key)));
        }
        if let Some(t) = at {
            due.by_time.insert((t, key.into()));
            due.at.insert(key.into(), t);
        }
    }

    /// Takes up to `max` keys filed at a time before `now` (their hash may have a field
    /// expired), earliest first. The caller files each again if its hash keeps deadlines.
    pub fn take_due_field_keys(&mut self, now: Millis, max: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some((t, _)) = self.field_due.by_time.first() else { break };
            if *t >= now {
                break;
            }
            let (_, key) = self.field_due.by_time.pop_first().expect("just seen");
            self.field_due.at.remove(&key);
            out.push(key.into_vec());
        }
        out
    }

    /// Hashes filed for field expiry (INFO keyspace's `subexpiry`): every hash with a field
    /// deadline, and, until the active cycle reaches the time they are filed at, the ones
    /// whose deadlines were persisted or deleted in place (Redis counts those too).
    pub fn field_deadline_keys(&self) -> usize {
        self.field_due.at.len()
    }

    /// Whether any hash may have field deadlines (every such hash is filed).
    pub fn has_field_deadline_keys(&self) -> bool {
        !self.field_due.by_time.is_empty()
    }

    /// Bytes the allocator holds for `key`'s entry and value (MEMORY USAGE): the entry's jemalloc
    /// size class, plus for a collection its own `mem_usage()` (which counts its box). The bucket slot (8 bytes per key) is table overhead, not counted here.
    pub fn mem_usage(&self, key: &[u8]) -> Option<usize> {
        let e = self.table.get(key)?;
        // SAFETY: live entry, read within this call.
        Some(unsafe { Entry::at(e) }.mem_usage())
    }

    /// Moves up to `chains` buckets of a resize in progress (and starts a pending shrink).
    /// The event loop calls this when idle; returns true while a resize remains in progress.
    /// While a forked child shares the keyspace's pages (a snapshot being written), avoid the
    /// table resizes that would copy them; see `ChainTable::set_avoid_resize`.
    pub fn set_avoid_resize(&mut self, avoid: bool) {
        self.frozen = avoid;
        self.table.set_avoid_resize(avoid);
    }

    /// Bytes the table may allocate to grow now (None: no bound; see `ChainTable`).
    pub fn set_growth_room(&mut self, room: Option<usize>) {
        self.table.set_growth_room(room);
    }

    pub fn rehash_step(&mut self, chains: usize) -> bool {
        self.table.rehash_step(chains)
    }

    /// True while the table is resizing.
    pub fn is_rehashing(&self) -> bool {
        self.table.is_rehashing()
    }

    /// Bytes of the old bucket array while the table rehashes (0 otherwise), for INFO.
    pub fn rehashing_overhead(&self) -> usize {
        self.table.rehashing_bytes()
    }

    /// Bytes of the bucket arrays (the table's overhead besides the entries), for INFO.
    pub fn table_overhead(&self) -> usize {
        self.table.bucket_bytes()
    }
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace").field("len", &self.len()).field("volatile", &self.volatile).finish()
    }
}
