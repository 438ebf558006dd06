//! A chained hash table with incremental rehashing and a scan cursor that survives resizes,
//! over entries whose memory layout the user of the table decides.
//!
//! The table stores one pointer per bucket and nothing else per entry: each entry is a single
//! allocation made by the user, whose first 8 bytes are the chain link (the table's) and whose
//! other bytes hold the key, the value and anything else (the user's). That keeps the per-key
//! overhead at 8 bytes of bucket plus 8 bytes of link, where a std map of boxed keys and values
//! pays for two or three allocations and their headers.
//!
//! # Resizing
//! Bucket counts are powers of two. The table grows (x2) when the entries outnumber the buckets
//! and shrinks when fewer than one bucket in eight is used. A resize never moves everything at
//! once: it allocates the new bucket array as `t[1]` and then every mutating call moves one chain
//! from `t[0]` (plus [`ChainTable::rehash_step`], which the event loop calls when idle), so one
//! call never pauses for more than a few buckets' worth of work. Even zeroing the new array is
//! spread out: a zeroed allocation of 16 MB (2M buckets) costs tens of milliseconds of page
//! faults and memset here, so big arrays are allocated uninitialised and zeroed 1024 buckets per
//! call before the move begins (the "pending" phase; the old array keeps serving meanwhile).
//!
//! # Scan cursor
//! A cursor is a bucket index whose bits are incremented from the most significant bit of the
//! mask downwards ("reverse binary" counting). In that order, the buckets of a table of 2^n that a
//! cursor has passed are exactly the images of the buckets of a table of 2^(n+1) (or 2^(n-1)) it
//! would have passed, because bucket `i` of the small table splits into the big table's buckets
//! whose low bits equal `i`, and those are adjacent in reversed order. So an entry present for
//! a whole iteration is returned at least once however the table is resized in between (possibly
//! more than once after a shrink). During a rehash, one step visits a bucket of the smaller table
//! and every bucket of the larger table that maps onto it.
//!
//! # Reuse
//! The keyspace is one user (`keyspace/entry.rs`). A big hash or set can be another: lay out an
//! entry (8-byte link first, then e.g. a varint field length, the field, the value), implement
//! [`ChainEntry`] for a marker type (`key` decodes the field, `free` deallocates), and keep its
//! own per-key bookkeeping outside the table, as `Keyspace` keeps its volatile-key count.

use super::hash::KeyHasher;
use crate::alloc::prefetch_read;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

/// The contract of the entries a [`ChainTable`] links together.
///
/// # Safety
/// An implementation promises that every pointer passed to the table as an entry:
/// - points to a live allocation aligned to at least 16 bytes whose first 8 bytes hold the
///   chain link: the table reads and writes only the pointer bits of that word
///   ([`LINK_PTR_BITS`]); the other 20 (the low 4, free by alignment, and the top 16, above
///   any user-space address) belong to the entry, and the table never changes them;
/// - stays allocated and at the same address until the table hands it back (from
///   [`ChainTable::remove`], [`ChainTable::insert`] or [`ChainTable::replace_with`]) or frees it
///   through [`ChainEntry::free`] (clear, drop);
/// - has a key (as returned by [`ChainEntry::key`]) that does not change while it is in the table.
pub unsafe trait ChainEntry {
    /// The key bytes of entry `e`.
    ///
    /// # Safety
    /// `e` is a live entry; the slice is not used after `e` is freed or changed.
    unsafe fn key<'a>(e: NonNull<u8>) -> &'a [u8];

    /// Frees entry `e` and everything it owns.
    ///
    /// # Safety
    /// `e` is a live entry that nothing else references.
    unsafe fn free(e: NonNull<u8>);
}

/// The bits of a link word that hold the pointer: user-space addresses are below 2^48 on
/// x86-64 and AArch64 (48-bit virtual addresses), and entries are 16-byte aligned. The other
/// bits are the entry's own (the keyspace keeps a key's access clock there, so it costs no
/// byte). Bucket slots hold plain pointers, whose spare bits are zero.
pub const LINK_PTR_BITS: usize = 0x0000_FFFF_FFFF_FFF0;

/// The chain link of an entry (its first 8 bytes), or the pointer in a bucket slot.
#[inline(always)]
unsafe fn next(e: *mut u8) -> *mut u8 {
    (*(e as *const usize) & LINK_PTR_BITS) as *mut u8
}

/// Points the link at `e` (an entry's first word or a bucket slot) to `n`, keeping the word's
/// spare bits.
#[inline(always)]
unsafe fn set_next(e: *mut u8, n: *mut u8) {
    let w = e as *mut usize;
    *w = (*w & !LINK_PTR_BITS) | (n as usize);
}

/// Reads a link found by `find_link` (a bucket slot or an entry's first word).
#[inline(always)]
unsafe fn read_link(link: *mut *mut u8) -> *mut u8 {
    next(link as *mut u8)
}

/// Writes a link found by `find_link`, keeping the spare bits of an entry's word.
#[inline(always)]
unsafe fn write_link(link: *mut *mut u8, n: *mut u8) {
    set_next(link as *mut u8, n)
}

/// Buckets below which the table does not shrink.
const MIN_BUCKETS: usize = 4;
/// Empty buckets one rehash step may skip per chain it is asked to move, so that a step over a
/// sparse table stays bounded.
const EMPTY_VISITS_PER_STEP: usize = 10;
/// Bucket arrays up to this many buckets (256 KB) are zeroed at once; bigger ones incrementally.
const ZERO_AT_ONCE_MAX: usize = 1 << 15;
/// Buckets of a pending array one step zeroes (8 KB: a couple of pages).
const ZERO_PER_STEP: usize = 1024;

/// A bucket array being zeroed before a resize can start using it. Invariant: the elements
/// `buckets[..zeroed]` are initialised (null).
struct Pending {
    buckets: Box<[MaybeUninit<*mut u8>]>,
    zeroed: usize,
}

/// Reverse-binary increment of `v` within `mask`: the most significant bit of the mask is the
/// least significant digit of the count. Bits above the mask come out zero.
#[inline]
fn rev_incr(v: u64, mask: u64) -> u64 {
    // Setting the bits above the mask makes the carry run through them (they are the low bits
    // once reversed) into the mask's top bit.
    let r = (v | !mask).reverse_bits().wrapping_add(1);
    r.reverse_bits()
}

/// A chained hash table of user-laid-out entries; see the module documentation.
///
/// Invariants:
/// 1. `t[0].len()` and `t[1].len()` are zero or powers of two.
/// 2. A resize is in progress exactly when `t[1]` is non-empty. Then the buckets
///    `t[0][..rehash_idx]` are all null, and `t[0]` is non-empty.
/// 3. Every entry is on exactly one chain: `t[0][hash & (t[0].len() - 1)]` if that index is
///    `>= rehash_idx` (or no resize is in progress), else `t[1][hash & (t[1].len() - 1)]`.
/// 4. `len` is the number of entries; the table owns each of them.
/// 5. `pending` is Some only while no resize is in progress (`t[1]` empty); it holds no entries.
pub struct ChainTable<E: ChainEntry> {
    t: [Box<[*mut u8]>; 2],
    /// The next resize's bucket array, while it is being zeroed.
    pending: Option<Pending>,
    /// The next bucket of `t[0]` to move into `t[1]` (meaningful during a resize only).
    rehash_idx: usize,
    len: usize,
    hasher: &'static KeyHasher,
    /// While a forked child shares the table's pages (a snapshot in progress), resizing would
    /// copy them all: no rehash steps, and growth only once chains average four entries.
    avoid_resize: bool,
    /// Bytes a growth may allocate now (`maxmemory` less what is in use), None for no bound.
    /// With less room than the next bucket array, the table grows only once its chains average
    /// four entries: as Redis skips a dict expansion that would pass maxmemory, a new array
    /// must not push the server over its limit, where eviction cannot take it back.
    growth_room: Option<usize>,
    /// A bulk load with nobody waiting (the startup replay): a resize completes in the call
    /// that starts it, instead of a chain per call. The incremental rehash exists for the
    /// latency of the commands around it; during a load it only costs, since every lookup
    /// meanwhile probes both arrays and every insert moves a chain.
    bulk: bool,
    _entries: PhantomData<E>,
}

impl<E: ChainEntry> Default for ChainTable<E> {
    fn default() -> Self {
        Self::new()
    }
}

fn null_buckets(n: usize) -> Box<[*mut u8]> {
    // A null pointer is all zero bits, so this is one zeroed allocation (calloc: fresh pages
    // from the OS need no memset).
    vec![std::ptr::null_mut::<u8>(); n].into_boxed_slice()
}

impl<E: ChainEntry> ChainTable<E> {
    /// An empty table; it allocates nothing until the first insert.
    pub fn new() -> Self {
        ChainTable {
            t: [Box::new([]), Box::new([])],
            pending: None,
            rehash_idx: 0,
            len: 0,
            avoid_resize: false,
            growth_room: None,
            bulk: false,
            hasher: KeyHasher::global(),
            _entries: PhantomData,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True while entries are moving from one bucket array to another.
    pub fn is_rehashing(&self) -> bool {
        !self.t[1].is_empty()
    }

    /// True while a resize is under way: its new array being zeroed, or entries moving.
    pub fn is_resizing(&self) -> bool {
        self.is_rehashing() || self.pending.is_some()
    }

    /// Buckets in all arrays (a pending one included).
    pub fn bucket_count(&self) -> usize {
        self.t[0].len() + self.t[1].len() + self.pending.as_ref().map_or(0, |p| p.buckets.len())
    }

    /// Bytes of the array entries are moving out of while a rehash runs (0 otherwise): what
    /// the table holds beyond its new array until the rehash ends.
    pub fn rehashing_bytes(&self) -> usize {
        if self.is_rehashing() {
            self.t[0].len() * std::mem::size_of::<*mut u8>()
        } else {
            0
        }
    }

    /// Bytes of the bucket arrays (the table's own overhead besides the entries).
    pub fn bucket_bytes(&self) -> usize {
        self.bucket_count() * std::mem::size_of::<*mut u8>()
    }

    /// The hash of `key` under this table's function.
    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash(key)
    }

    /// A hint that a key whose hash is `h` (see `hash`) will be looked up soon: starts loading
    /// its bucket slots into the cache (`chain` false), or, once those are cached, the first
    /// entry of each chain (`chain` true). A bulk loader that knows its next keys calls both,
    /// some keys apart, so that the lookups find in cache what would otherwise be two misses
    /// each. No effect on the table's contents; a no-op where the CPU has no prefetch
    /// instruction.
    #[inline]
    pub fn prefetch(&self, h: u64, chain: bool) {
        if self.len == 0 {
            return;
        }
        for t in &self.t {
            if t.is_empty() {
                continue;
            }
            let slot = &t[h as usize & (t.len() - 1)];
            let target: *const u8 = if chain { *slot } else { (slot as *const *mut u8).cast() };
            if !target.is_null() {
                prefetch_read(target);
            }
        }
    }

    /// The entry with `key`, if any.
    pub fn get(&self, key: &[u8]) -> Option<NonNull<u8>> {
        if self.len == 0 {
            return None;
        }
        let h = self.hash(key);
        for t in &self.t {
            if t.is_empty() {
                continue;
            }
            let mut e = t[h as usize & (t.len() - 1)];
            while !e.is_null() {
                // SAFETY: every pointer on a chain is a live entry (invariant 4).
                unsafe {
                    if E::key(NonNull::new_unchecked(e)) == key {
                        return NonNull::new(e);
                    }
                    e = next(e);
                }
            }
        }
        None
    }

    /// The link (bucket slot or previous entry's next field) that points at the entry with
    /// `key`. The pointer is valid until the table is next changed.
    fn find_link(&mut self, key: &[u8], h: u64) -> Option<*mut *mut u8> {
        if self.len == 0 {
            return None;
        }
        for t in self.t.iter_mut() {
            if t.is_empty() {
                continue;
            }
            let mask = t.len() - 1;
            let mut link: *mut *mut u8 = &mut t[h as usize & mask];
            // SAFETY: `link` points into the bucket array or into the first 8 bytes of a live
            // entry; both stay put while we hold `&mut self`.
            unsafe {
                while !read_link(link).is_null() {
                    let e = read_link(link);
                    if E::key(NonNull::new_unchecked(e)) == key {
                        return Some(link);
                    }
                    link = e as *mut *mut u8;
                }
            }
        }
        None
    }

    /// Inserts entry `e`. If an entry with the same key is present, `e` takes its place and the
    /// old entry is returned to the caller, who owns it from then on.
    ///
    /// # Safety
    /// `e` satisfies the [`ChainEntry`] contract and is not already in any table.
    pub unsafe fn insert(&mut self, e: NonNull<u8>) -> Option<NonNull<u8>> {
        self.rehash_auto();
        let key = E::key(e);
        let h = self.hash(key);
        if let Some(link) = self.find_link(key, h) {
            let old = read_link(link);
            set_next(e.as_ptr(), next(old));
            write_link(link, e.as_ptr());
            return NonNull::new(old);
        }
        self.grow_if_needed();
        let t = if self.is_rehashing() { &mut self.t[1] } else { &mut self.t[0] };
        let slot = &mut t[h as usize & (t.len() - 1)];
        set_next(e.as_ptr(), *slot);
        *slot = e.as_ptr();
        self.len += 1;
        None
    }

    /// Replaces the entry with `key` by `f(old)`, in the same chain position. `f` owns `old`
    /// (it may free or reallocate it) and returns the new entry. Returns false (and does not
    /// call `f`) when `key` is absent.
    ///
    /// # Safety
    /// The entry `f` returns satisfies the [`ChainEntry`] contract and has the same key, and
    /// `key` does not point into the old entry (which `f` may free).
    pub unsafe fn replace_with(&mut self, key: &[u8], f: impl FnOnce(NonNull<u8>) -> NonNull<u8>) -> bool {
        let h = self.hash(key);
        let Some(link) = self.find_link(key, h) else {
            return false;
        };
        let old = read_link(link);
        let after = next(old);
        let new = f(NonNull::new_unchecked(old));
        debug_assert!(E::key(new) == key);
        set_next(new.as_ptr(), after);
        write_link(link, new.as_ptr());
        true
    }

    /// Unlinks the entry with `key` and hands it to the caller, who owns it from then on.
    pub fn remove(&mut self, key: &[u8]) -> Option<NonNull<u8>> {
        self.rehash_auto();
        let h = self.hash(key);
        let link = self.find_link(key, h)?;
        // SAFETY: `link` was just found and the table has not changed since.
        let e = unsafe {
            let e = read_link(link);
            write_link(link, next(e));
            e
        };
        self.len -= 1;
        if self.len == 0 {
            // Every bucket is null: give the arrays back.
            self.t = [Box::new([]), Box::new([])];
            self.pending = None;
            self.rehash_idx = 0;
        } else {
            self.shrink_if_needed();
        }
        NonNull::new(e)
    }

    /// Presizes an empty table for `n` entries (a loader that knows the count): allocates at
    /// once the bucket array that `n` inserts would have grown to, so the load does no
    /// resizes and ends with the same bucket count. Does nothing unless the table is empty
    /// and not resizing.
    pub fn reserve_empty(&mut self, n: usize) {
        if self.len != 0 || self.is_resizing() {
            return;
        }
        let want = n.checked_next_power_of_two().unwrap_or(0).max(MIN_BUCKETS);
        if n > 0 && want > self.t[0].len() {
            self.t[0] = null_buckets(want);
        }
    }

    /// Bulk-load mode (see the `bulk` field). Turning it on finishes a resize under way.
    pub fn set_bulk(&mut self, on: bool) {
        self.bulk = on;
        if on {
            self.finish_resize();
        }
    }

    /// Completes the resize in progress, if any, at once.
    fn finish_resize(&mut self) {
        if self.avoid_resize {
            return;
        }
        while self.pending.is_some() || self.is_rehashing() {
            self.rehash_step(usize::MAX / EMPTY_VISITS_PER_STEP.max(ZERO_PER_STEP));
        }
    }

    /// See the `growth_room` field.
    pub fn set_growth_room(&mut self, room: Option<usize>) {
        self.growth_room = room;
    }

    /// Set while a forked child shares the table's pages: see the `avoid_resize` field.
    pub fn set_avoid_resize(&mut self, avoid: bool) {
        self.avoid_resize = avoid;
    }

    /// Grows before an insert when the entries would outnumber the buckets.
    fn grow_if_needed(&mut self) {
        if self.t[0].is_empty() {
            self.t[0] = null_buckets(MIN_BUCKETS);
            return;
        }
        if self.avoid_resize && self.len < self.t[0].len().saturating_mul(4) {
            return;
        }
        if self.is_resizing() {
            // A resize started long ago is still running (e.g. a shrink through a sparse table
            // while inserts pour in): catch up faster, still in bounded steps.
            let target = self.pending.as_ref().map_or(self.t[1].len(), |p| p.buckets.len());
            if self.len >= target * 2 {
                self.rehash_step(64);
            }
            return;
        }
        if self.len + 1 > self.t[0].len() {
            // Usually a doubling; more when inserts outran a long shrink.
            let buckets = (self.len + 1).next_power_of_two().max(self.t[0].len() * 2);
            let cost = buckets * std::mem::size_of::<*mut u8>();
            if self.growth_room.is_some_and(|room| cost > room)
                && self.len < self.t[0].len().saturating_mul(4)
            {
                return;
            }
            self.start_resize(buckets);
            if self.bulk {
                self.finish_resize();
            }
        }
    }

    /// Starts a shrink when fewer than one bucket in eight is in use.
    fn shrink_if_needed(&mut self) {
        if self.is_resizing() || self.t[0].len() <= MIN_BUCKETS {
            return;
        }
        if self.len * 8 < self.t[0].len() {
            self.start_resize(self.len.next_power_of_two().max(MIN_BUCKETS));
        }
    }

    fn start_resize(&mut self, buckets: usize) {
        debug_assert!(!self.is_resizing() && buckets.is_power_of_two());
        if buckets == self.t[0].len() {
            return;
        }
        if buckets <= ZERO_AT_ONCE_MAX {
            self.start_rehash(null_buckets(buckets));
        } else {
            self.pending = Some(Pending { buckets: Box::new_uninit_slice(buckets), zeroed: 0 });
        }
    }

    fn start_rehash(&mut self, buckets: Box<[*mut u8]>) {
        self.t[1] = buckets;
        self.rehash_idx = 0;
    }

    /// Zeroes up to `n` more buckets of the pending array; once all are, the move begins.
    fn zero_pending(&mut self, n: usize) {
        let Some(p) = self.pending.as_mut() else {
            return;
        };
        let end = p.zeroed.saturating_add(n).min(p.buckets.len());
        for b in &mut p.buckets[p.zeroed..end] {
            b.write(std::ptr::null_mut());
        }
        p.zeroed = end;
        if end == p.buckets.len() {
            let p = self.pending.take().expect("checked above");
            // SAFETY: every element is initialised (Pending's invariant with zeroed == len), and
            // MaybeUninit<T> has T's layout, so the allocation is a valid [*mut u8].
            let buckets = unsafe { Box::from_raw(Box::into_raw(p.buckets) as *mut [*mut u8]) };
            self.start_rehash(buckets);
        }
    }

    /// The share of a resize each mutating call performs.
    #[inline]
    fn rehash_auto(&mut self) {
        if self.is_resizing() && !self.avoid_resize {
            self.rehash_step(1);
        }
    }

    /// Does `chains` units of a resize in progress: moves up to `chains` non-empty buckets
    /// (skipping at most ten empty buckets per chain), or zeroes `chains` x 1024 buckets of the
    /// new array while it is pending; starts a due shrink when no resize is under way. Returns
    /// true while a resize remains in progress. The event loop calls this when idle.
    pub fn rehash_step(&mut self, chains: usize) -> bool {
        if self.avoid_resize {
            return self.is_resizing();
        }
        if self.pending.is_some() {
            self.zero_pending(chains.saturating_mul(ZERO_PER_STEP));
            return true;
        }
        if !self.is_rehashing() {
            self.shrink_if_needed();
            return self.is_resizing();
        }
        let mut chains = chains;
        let mut empty_left = chains.saturating_mul(EMPTY_VISITS_PER_STEP);
        let mask1 = self.t[1].len() - 1;
        while chains > 0 && self.rehash_idx < self.t[0].len() {
            let mut e = self.t[0][self.rehash_idx];
            if e.is_null() {
                self.rehash_idx += 1;
                empty_left -= 1;
                if empty_left == 0 {
                    break;
                }
                continue;
            }
            while !e.is_null() {
                // SAFETY: `e` is a live entry on the chain being moved; pushing it on the
                // front of its new chain keeps every entry on exactly one chain.
                unsafe {
                    let after = next(e);
                    let h = self.hash(E::key(NonNull::new_unchecked(e)));
                    let slot = &mut self.t[1][h as usize & mask1];
                    set_next(e, *slot);
                    *slot = e;
                    e = after;
                }
            }
            self.t[0][self.rehash_idx] = std::ptr::null_mut();
            self.rehash_idx += 1;
            chains -= 1;
        }
        if self.rehash_idx == self.t[0].len() {
            self.t[0] = std::mem::replace(&mut self.t[1], Box::new([]));
            self.rehash_idx = 0;
            // Removals during the resize may already call for the next shrink.
            self.shrink_if_needed();
        }
        self.is_resizing()
    }

    /// Calls `f` on every entry of chain `b` of array `t`.
    #[inline]
    fn visit_chain(t: &[*mut u8], b: usize, f: &mut impl FnMut(NonNull<u8>)) {
        let mut e = t[b];
        while !e.is_null() {
            // SAFETY: chains hold live entries; `f` cannot change the table (it is borrowed).
            unsafe {
                let after = next(e);
                f(NonNull::new_unchecked(e));
                e = after;
            }
        }
    }

    /// One step of a resize-proof scan: calls `f` on the entries of the bucket(s) at `cursor`
    /// and returns the next cursor, 0 when the iteration is complete. Start with 0.
    pub fn scan_step(&self, cursor: u64, mut f: impl FnMut(NonNull<u8>)) -> u64 {
        if self.len == 0 {
            return 0;
        }
        if !self.is_rehashing() {
            let mask = (self.t[0].len() - 1) as u64;
            Self::visit_chain(&self.t[0], (cursor & mask) as usize, &mut f);
            return rev_incr(cursor, mask);
        }
        let (small, large) = if self.t[0].len() <= self.t[1].len() {
            (&self.t[0], &self.t[1])
        } else {
            (&self.t[1], &self.t[0])
        };
        let small_mask = (small.len() - 1) as u64;
        let large_mask = (large.len() - 1) as u64;
        Self::visit_chain(small, (cursor & small_mask) as usize, &mut f);
        // The large table's buckets that fold onto that small bucket: same low bits, any value of
        // the extra high bits. Count those extra bits in reverse order from where the cursor
        // stands; when they wrap to zero, the carry has moved the low bits to the next small
        // bucket, which is the next cursor.
        let extra = large_mask & !small_mask;
        let mut v = cursor;
        loop {
            Self::visit_chain(large, (v & large_mask) as usize, &mut f);
            v = rev_incr(v, large_mask);
            if v & extra == 0 {
                return v;
            }
        }
    }

    /// Calls `f` on every entry.
    pub fn for_each(&self, mut f: impl FnMut(NonNull<u8>)) {
        for t in &self.t {
            for b in 0..t.len() {
                Self::visit_chain(t, b, &mut f);
            }
        }
    }

    /// A random entry: a random non-empty bucket, then a random entry of its chain. Entries on
    /// short chains are somewhat more likely; with load factors between 1/8 and 1 that bias is
    /// small. Expected O(1) for tables within those load factors, bounded otherwise.
    pub fn random(&self, rng: &mut impl rand::Rng) -> Option<NonNull<u8>> {
        if self.len == 0 {
            return None;
        }
        // Candidate buckets: t[0] from rehash_idx on (those below are empty), then all of t[1].
        let first = if self.is_rehashing() { self.rehash_idx } else { 0 };
        let n0 = self.t[0].len() - first;
        let total = n0 + self.t[1].len();
        let bucket_at = |i: usize| if i < n0 { self.t[0][first + i] } else { self.t[1][i - n0] };
        let mut head = std::ptr::null_mut();
        for _ in 0..64 {
            head = bucket_at(rng.gen_range(0..total));
            if !head.is_null() {
                break;
            }
        }
        if head.is_null() {
            // Very sparse table: walk from a random start to the next non-empty bucket.
            let start = rng.gen_range(0..total);
            for i in 0..total {
                head = bucket_at((start + i) % total);
                if !head.is_null() {
                    break;
                }
            }
        }
        // SAFETY: chains hold live entries.
        unsafe {
            let mut n = 0;
            let mut e = head;
            while !e.is_null() {
                n += 1;
                e = next(e);
            }
            let mut e = head;
            for _ in 0..rng.gen_range(0..n) {
                e = next(e);
            }
            NonNull::new(e)
        }
    }

    /// Frees every entry and both bucket arrays.
    pub fn clear(&mut self) {
        let tables = std::mem::replace(&mut self.t, [Box::new([]), Box::new([])]);
        self.pending = None;
        self.len = 0;
        self.rehash_idx = 0;
        for t in tables.iter() {
            for &head in t.iter() {
                let mut e = head;
                while !e.is_null() {
                    // SAFETY: the entry is unlinked from a table nobody can reach any more;
                    // read its link before freeing it.
                    unsafe {
                        let after = next(e);
                        E::free(NonNull::new_unchecked(e));
                        e = after;
                    }
                }
            }
        }
    }
}

impl<E: ChainEntry> Drop for ChainTable<E> {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{alloc, dealloc, Layout};
    use std::collections::HashSet;

    /// Test entries: link, then a u32 key stored little-endian.
    struct U32Entry;

    fn layout() -> Layout {
        Layout::from_size_align(16, 16).unwrap()
    }

    fn make(k: u32) -> NonNull<u8> {
        unsafe {
            let p = alloc(layout());
            std::ptr::write(p.add(8) as *mut [u8; 4], k.to_le_bytes());
            NonNull::new(p).unwrap()
        }
    }

    unsafe impl ChainEntry for U32Entry {
        unsafe fn key<'a>(e: NonNull<u8>) -> &'a [u8] {
            std::slice::from_raw_parts(e.as_ptr().add(8), 4)
        }
        unsafe fn free(e: NonNull<u8>) {
            dealloc(e.as_ptr(), layout());
        }
    }

    fn key_of(e: NonNull<u8>) -> u32 {
        unsafe { u32::from_le_bytes(U32Entry::key(e).try_into().unwrap()) }
    }

    fn ins(t: &mut ChainTable<U32Entry>, k: u32) {
        unsafe {
            if let Some(old) = t.insert(make(k)) {
                U32Entry::free(old);
            }
        }
    }

    fn rem(t: &mut ChainTable<U32Entry>, k: u32) -> bool {
        match t.remove(&k.to_le_bytes()) {
            Some(e) => {
                unsafe { U32Entry::free(e) };
                true
            }
            None => false,
        }
    }

    #[test]
    fn rev_incr_counts_high_bit_first() {
        let mut v = 0;
        let mut order = vec![];
        loop {
            order.push(v);
            v = rev_incr(v, 7);
            if v == 0 {
                break;
            }
        }
        assert_eq!(order, vec![0, 4, 2, 6, 1, 5, 3, 7]);
    }

    #[test]
    fn grows_and_shrinks_incrementally() {
        let mut t = ChainTable::<U32Entry>::new();
        for k in 0..10_000 {
            ins(&mut t, k);
            // Every key inserted so far is findable at every moment of every resize.
            if k % 997 == 0 {
                for j in 0..=k {
                    assert!(t.get(&j.to_le_bytes()).is_some());
                }
            }
        }
        assert_eq!(t.len(), 10_000);
        while t.rehash_step(100) {}
        assert_eq!(t.bucket_count(), 16_384);
        for k in 0..9_900 {
            assert!(rem(&mut t, k));
        }
        while t.rehash_step(100) {}
        assert!(t.bucket_count() <= 1024, "{}", t.bucket_count());
        let mut seen = HashSet::new();
        t.for_each(|e| assert!(seen.insert(key_of(e))));
        assert_eq!(seen, (9_900..10_000).collect());
        for k in 9_900..10_000 {
            assert!(rem(&mut t, k));
        }
        assert_eq!(t.bucket_count(), 0);
    }

    #[test]
    fn bulk_mode_finishes_each_resize_in_the_call_that_starts_it() {
        let mut t = ChainTable::<U32Entry>::new();
        for k in 0..40_000 {
            ins(&mut t, k);
        }
        // Turning bulk mode on in the middle of a resize finishes it.
        ins(&mut t, 40_000);
        assert!(t.is_resizing());
        t.set_bulk(true);
        assert!(!t.is_resizing());
        // Past 2^16 and 2^17 entries: both growths (one through the pending, zeroing phase
        // above ZERO_AT_ONCE_MAX) complete at once, and every key stays findable.
        for k in 40_001..150_000 {
            ins(&mut t, k);
            assert!(!t.is_resizing(), "resize left in progress at {k}");
        }
        assert_eq!(t.bucket_count(), 1 << 18);
        for k in 0..150_000u32 {
            assert!(t.get(&k.to_le_bytes()).is_some());
        }
        // Off again: the next growth is incremental.
        t.set_bulk(false);
        let mut k = 150_000u32;
        while t.len() < (1 << 18) {
            ins(&mut t, k);
            k += 1;
        }
        ins(&mut t, k);
        assert!(t.is_resizing());
        while t.rehash_step(1000) {}
        assert_eq!(t.len(), k as usize + 1);
    }

    #[test]
    fn a_step_never_does_much() {
        // Inserting into a big table zeroes the new array a chunk at a time, then moves at most
        // a few chains per call: no single call does the whole resize.
        let mut t = ChainTable::<U32Entry>::new();
        let mut k = 0;
        while k < (1 << 16) {
            ins(&mut t, k);
            k += 1;
        }
        while t.rehash_step(1000) {}
        ins(&mut t, k);
        k += 1;
        assert!(t.is_resizing() && !t.is_rehashing(), "a 2^17 array is zeroed incrementally");
        let mut zeroed = t.pending.as_ref().unwrap().zeroed;
        assert!(zeroed <= ZERO_PER_STEP);
        while !t.is_rehashing() {
            ins(&mut t, k);
            k += 1;
            if let Some(p) = &t.pending {
                assert!(p.zeroed - zeroed <= ZERO_PER_STEP);
                zeroed = p.zeroed;
            }
        }
        // Every key is still there while the old array keeps serving.
        for j in 0..k {
            assert!(t.get(&j.to_le_bytes()).is_some());
        }
        let before = t.rehash_idx;
        ins(&mut t, k);
        assert!(t.rehash_idx - before <= 1 + EMPTY_VISITS_PER_STEP);
        while t.rehash_step(100) {}
        assert_eq!(t.bucket_count(), 1 << 17);
        for j in 0..=k {
            assert!(t.get(&j.to_le_bytes()).is_some());
        }
    }

    #[test]
    fn random_finds_every_entry_eventually() {
        let mut t = ChainTable::<U32Entry>::new();
        for k in 0..50 {
            ins(&mut t, k);
        }
        let mut rng = rand::rngs::mock::StepRng::new(0, 0x9e37_79b9_7f4a_7c15);
        let mut seen = HashSet::new();
        let mut r = rand::thread_rng();
        for _ in 0..5_000 {
            seen.insert(key_of(t.random(&mut r).unwrap()));
        }
        assert_eq!(seen.len(), 50);
        assert!(t.random(&mut rng).is_some());
    }

    #[test]
    fn scan_with_resizes_in_between_misses_nothing() {
        // 40,000 keys, then 120,000 more during the scan: the table goes through the pending
        // (incremental zeroing) phase and two rehashes, then shrinks back.
        let mut t = ChainTable::<U32Entry>::new();
        for k in 0..40_000 {
            ins(&mut t, k);
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut next_key = 1_000_000;
        let mut steps = 0;
        let mut saw_pending = false;
        loop {
            cursor = t.scan_step(cursor, |e| {
                seen.insert(key_of(e));
            });
            saw_pending |= t.pending.is_some();
            steps += 1;
            // Grow hard during the first part, then shrink by removing the extra keys.
            if steps < 3_000 {
                for _ in 0..40 {
                    ins(&mut t, next_key);
                    next_key += 1;
                }
            } else if next_key > 1_000_000 {
                for _ in 0..60 {
                    if next_key == 1_000_000 {
                        break;
                    }
                    next_key -= 1;
                    rem(&mut t, next_key);
                }
            }
            if cursor == 0 {
                break;
            }
            assert!(steps < 1_000_000);
        }
        assert!(saw_pending);
        for k in 0..40_000 {
            assert!(seen.contains(&k), "missed {k}");
        }
    }
}
