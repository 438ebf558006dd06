//! The keyspace's entry: one heap allocation per key holding the chain link, the key, the
//! expiry and the value.
//!
//! Layout (byte offsets; the allocation is aligned to 8):
//!
//! ```text
//! 0      8      9             9+X
//! | next | tag  | [expire_at] | key len (varint) | key bytes | value |
//! ```
//! - `next` (8 bytes): the [`ChainTable`](super::table::ChainTable)'s link in its pointer bits
//!   (`LINK_PTR_BITS`); its 20 spare bits (the low 4, free because entries are 16-byte
//!   aligned, and the top 16) hold 20 bits of the key's access field.
//! - `tag` (1 byte): bits 0-2 the value's form ([`Form`]), bit 3 set when an expiry follows,
//!   bits 4-7 the access field's other 4 bits.
//!
//! The access field is Redis's 24-bit `lru`: the LRU clock in seconds, or under an LFU policy
//! 16 bits of minutes and an 8-bit logarithmic counter (see `keyspace::access`). Spread over
//! spare bits, it costs no byte: the benchmark key below still takes 32 bytes.
//! - `expire_at` (8 bytes, little-endian i64, unaligned): present only when bit 3 is set (X = 8,
//!   else X = 0). Persistent keys, the common case, do not pay for it.
//! - key length: LEB128 varint (1 byte for keys under 128 bytes), then the key.
//! - value, by form: `Bytes`: a varint length then the bytes; `Int`: 8 bytes little-endian i64;
//!   a collection: the 8-byte pointer from `Box::into_raw` (the entry owns that box).
//!
//! A key `str:123456` with an 11-byte value takes 8+1+1+10+1+11 = 32 bytes: one 32-byte jemalloc
//! size class. Every multi-byte field is read and written unaligned.
//!
//! Invariants: the allocation size is exactly [`size_of_parts`] of the fields it holds (dealloc
//! and realloc recompute it from the header); a collection pointer came from `Box::into_raw` of
//! the type its form names and is owned by this entry alone.

pub use crate::alloc::size_class;
use crate::types::string::parse_canonical_i64;
use crate::types::vset::VectorSet;
use crate::types::{Hash, List, Set, SparseArray, Stream, ZSet};
use crate::value::{StrRef, Value, ValueMut, ValueRef};
use crate::Millis;
use std::alloc::{self, Layout};
use std::borrow::Cow;
use std::ptr::{self, NonNull};

/// The tag byte follows the 8-byte link.
const TAG_AT: usize = 8;
const HEADER: usize = 9;
const FORM_MASK: u8 = 0b0111;
const HAS_EXPIRY: u8 = 0b1000;
/// The tag bits that hold access-field bits 20..24.
const ACCESS_TAG_BITS: u8 = 0xF0;
/// 16, not 8: the link word's low 4 bits are spare only with 16-byte alignment. No cost:
/// jemalloc's classes from 16 bytes up are multiples of 16, and an entry takes at least 11.
const ALIGN: usize = 16;

/// How a value is stored in its entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Form {
    Bytes = 0,
    Int = 1,
    Hash = 2,
    Set = 3,
    ZSet = 4,
    List = 5,
    Array = 6,
    /// Bytes written in place by APPEND, SETRANGE and the bit commands: the same layout as
    /// `Bytes`, told apart only so that OBJECT ENCODING answers `raw` as Redis does for a
    /// string modified in place (a SET stores `Bytes` or `Int` again).
    RawBytes = 7,
    /// A stream. The tag's three form bits are all taken, so a stream is stored with the
    /// `Array` form bits and its pointer's low bit set (boxes are 8-aligned, so an array's
    /// pointer never has it): [`Entry::form`] tells them apart.
    Stream = 8,
    /// A vector set: the `Array` form bits with [`VSET_PTR_BIT`] set in its pointer, as
    /// streams do with theirs.
    VectorSet = 9,
}

/// The low bit of a stored collection pointer that marks a stream (see [`Form::Stream`]).
const STREAM_PTR_BIT: usize = 1;
/// The second spare bit of a stored collection pointer: marks a vector set.
const VSET_PTR_BIT: usize = 2;
/// Both marks: cleared to get the pointer back.
const PTR_MARKS: usize = STREAM_PTR_BIT | VSET_PTR_BIT;

impl Form {
    /// The form's bits in the tag byte.
    fn tag_bits(self) -> u8 {
        match self {
            Form::Stream | Form::VectorSet => Form::Array as u8,
            f => f as u8,
        }
    }

    fn from_tag(tag: u8) -> Form {
        match tag & FORM_MASK {
            0 => Form::Bytes,
            1 => Form::Int,
            2 => Form::Hash,
            3 => Form::Set,
            4 => Form::ZSet,
            5 => Form::List,
            6 => Form::Array,
            _ => Form::RawBytes,
        }
    }
}

/// A value on its way into an entry. Collections are already raw pointers: whoever holds a
/// `Stored` must pass it to [`Entry::alloc`] or [`Entry::set_value`], or drop it with
/// [`Stored::drop_value`].
pub enum Stored<'a> {
    /// Bytes owned or borrowed: either way copied into the entry, so a caller holding a
    /// request's argument lends it and saves a copy of its own (a 64 MiB SET: one copy).
    Bytes(Cow<'a, [u8]>),
    /// Bytes kept as bytes whatever they hold (see [`Form::RawBytes`]).
    RawBytes(Cow<'a, [u8]>),
    Int(i64),
    Coll(Form, *mut u8),
}

impl Stored<'_> {
    /// Converts an owned value, storing canonical decimal strings as integers.
    pub fn from_value(v: Value) -> Stored<'static> {
        match v {
            Value::Str(b) => match parse_canonical_i64(&b) {
                Some(i) => Stored::Int(i),
                None => Stored::Bytes(Cow::Owned(b)),
            },
            Value::Int(i) => Stored::Int(i),
            Value::Hash(b) => Stored::Coll(Form::Hash, Box::into_raw(b) as *mut u8),
            Value::Set(b) => Stored::Coll(Form::Set, Box::into_raw(b) as *mut u8),
            Value::ZSet(b) => Stored::Coll(Form::ZSet, Box::into_raw(b) as *mut u8),
            Value::List(b) => Stored::Coll(Form::List, Box::into_raw(b) as *mut u8),
            Value::Array(b) => Stored::Coll(Form::Array, Box::into_raw(b) as *mut u8),
            Value::Stream(b) => Stored::Coll(Form::Stream, Box::into_raw(b) as *mut u8),
            Value::VectorSet(b) => Stored::Coll(Form::VectorSet, Box::into_raw(b) as *mut u8),
        }
    }

    /// A byte string, borrowed until the entry copies it; a canonical decimal integer is
    /// stored as one, as [`Stored::from_value`] does.
    pub fn from_bytes(b: &[u8]) -> Stored<'_> {
        match parse_canonical_i64(b) {
            Some(i) => Stored::Int(i),
            None => Stored::Bytes(Cow::Borrowed(b)),
        }
    }

    fn form(&self) -> Form {
        match self {
            Stored::Bytes(_) => Form::Bytes,
            Stored::RawBytes(_) => Form::RawBytes,
            Stored::Int(_) => Form::Int,
            Stored::Coll(f, _) => *f,
        }
    }

    fn size(&self) -> usize {
        match self {
            Stored::Bytes(b) | Stored::RawBytes(b) => varint_len(b.len()) + b.len(),
            Stored::Int(_) | Stored::Coll(..) => 8,
        }
    }
}

/// Rebuilds the owned collection value behind a stored pointer.
///
/// # Safety
/// `p` came from `Box::into_raw` of the type `form` names and nothing else owns it.
unsafe fn value_from_raw(form: Form, p: *mut u8) -> Value {
    match form {
        Form::Hash => Value::Hash(Box::from_raw(p as *mut Hash)),
        Form::Set => Value::Set(Box::from_raw(p as *mut Set)),
        Form::ZSet => Value::ZSet(Box::from_raw(p as *mut ZSet)),
        Form::List => Value::List(Box::from_raw(p as *mut List)),
        Form::Array => Value::Array(Box::from_raw(p as *mut SparseArray)),
        Form::Stream => Value::Stream(Box::from_raw(p as *mut Stream)),
        Form::VectorSet => Value::VectorSet(Box::from_raw(p as *mut VectorSet)),
        Form::Bytes | Form::RawBytes | Form::Int => unreachable!("not a collection"),
    }
}

fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

/// Writes `n` as LEB128 at `p`; returns the bytes written.
unsafe fn write_varint(p: *mut u8, mut n: usize) -> usize {
    let mut i = 0;
    while n >= 0x80 {
        *p.add(i) = (n as u8) | 0x80;
        n >>= 7;
        i += 1;
    }
    *p.add(i) = n as u8;
    i + 1
}

/// Reads a LEB128 varint at `p`: (value, bytes read).
unsafe fn read_varint(p: *const u8) -> (usize, usize) {
    let mut n = 0usize;
    let mut shift = 0;
    let mut i = 0;
    loop {
        let b = *p.add(i);
        n |= ((b & 0x7f) as usize) << shift;
        i += 1;
        if b & 0x80 == 0 {
            return (n, i);
        }
        shift += 7;
    }
}

/// The allocation size of an entry with these parts.
pub fn size_of_parts(key_len: usize, has_expiry: bool, value_size: usize) -> usize {
    HEADER + if has_expiry { 8 } else { 0 } + varint_len(key_len) + key_len + value_size
}

fn layout(size: usize) -> Layout {
    // ALIGN is a power of two and sizes stay far below isize::MAX for any real key and value
    // (the protocol caps both at 512 MB).
    Layout::from_size_align(size, ALIGN).expect("entry layout")
}

/// The decoded header of a live entry: positions are offsets from the entry's start.
#[derive(Clone, Copy)]
pub struct Entry {
    p: *mut u8,
    tag: u8,
    key_at: usize,
    key_len: usize,
    value_at: usize,
}

impl Entry {
    /// Decodes the header of entry `e`.
    ///
    /// # Safety
    /// `e` is a live entry written by [`Entry::alloc`] (possibly changed by this module since).
    #[inline]
    pub unsafe fn at(e: NonNull<u8>) -> Entry {
        let p = e.as_ptr();
        let tag = *p.add(TAG_AT);
        let len_at = HEADER + if tag & HAS_EXPIRY != 0 { 8 } else { 0 };
        let (key_len, n) = read_varint(p.add(len_at));
        let key_at = len_at + n;
        Entry { p, tag, key_at, key_len, value_at: key_at + key_len }
    }

    /// Allocates and fills a new entry (link null). Takes ownership of the value.
    pub fn alloc(key: &[u8], expire_at: Option<Millis>, value: Stored<'_>) -> NonNull<u8> {
        let size = size_of_parts(key.len(), expire_at.is_some(), value.size());
        // SAFETY: the layout has a non-zero size (at least HEADER); every write below stays
        // within `size` bytes, as size_of_parts counts each field written.
        unsafe {
            let p = alloc::alloc(layout(size));
            if p.is_null() {
                alloc::handle_alloc_error(layout(size));
            }
            // The access bits live in the link word's spare bits: an address outside
            // LINK_PTR_BITS (a 57-bit address space) would collide with them. Stop loudly.
            assert!(p as usize & !super::table::LINK_PTR_BITS == 0, "entry address {p:p} outside 48 bits");
            ptr::write(p as *mut *mut u8, ptr::null_mut());
            let mut at = HEADER;
            let mut tag = value.form().tag_bits();
            if let Some(t) = expire_at {
                tag |= HAS_EXPIRY;
                ptr::write_unaligned(p.add(at) as *mut [u8; 8], t.to_le_bytes());
                at += 8;
            }
            *p.add(TAG_AT) = tag;
            at += write_varint(p.add(at), key.len());
            ptr::copy_nonoverlapping(key.as_ptr(), p.add(at), key.len());
            at += key.len();
            write_value(p.add(at), value);
            NonNull::new_unchecked(p)
        }
    }

    #[inline]
    pub fn form(&self) -> Form {
        match Form::from_tag(self.tag) {
            // SAFETY: an Array-form entry holds a collection pointer at value_at.
            Form::Array => match unsafe { self.raw_coll_ptr() } as usize & PTR_MARKS {
                STREAM_PTR_BIT => Form::Stream,
                VSET_PTR_BIT => Form::VectorSet,
                _ => Form::Array,
            },
            f => f,
        }
    }

    pub fn size(&self) -> usize {
        // SAFETY: value_at is within the live entry.
        let value_size = unsafe {
            match self.form() {
                Form::Bytes | Form::RawBytes => {
                    let (n, w) = read_varint(self.p.add(self.value_at));
                    n + w
                }
                _ => 8,
            }
        };
        self.value_at + value_size
    }

    /// The key bytes. The lifetime is the caller's to bound: the entry must stay live.
    #[inline]
    pub unsafe fn key<'a>(&self) -> &'a [u8] {
        std::slice::from_raw_parts(self.p.add(self.key_at), self.key_len)
    }

    pub fn expire_at(&self) -> Option<Millis> {
        if self.tag & HAS_EXPIRY == 0 {
            return None;
        }
        // SAFETY: the expiry field is present (tag bit) and inside the entry.
        Some(i64::from_le_bytes(unsafe { ptr::read_unaligned(self.p.add(HEADER) as *const [u8; 8]) }))
    }

    /// The key's 24-bit access field (see the module docs for where its bits live).
    pub fn access(&self) -> u32 {
        // SAFETY: the entry's first 8 bytes are its link word (aligned: entries are 16-aligned).
        let w = unsafe { ptr::read(self.p as *const usize) };
        let low4 = (w & 0xF) as u32;
        let top16 = (w >> 48) as u32;
        let tag4 = (unsafe { *self.p.add(TAG_AT) } >> 4) as u32;
        low4 | (top16 << 4) | (tag4 << 20)
    }

    /// Sets the access field (its low 24 bits), leaving the link's pointer bits as they are.
    pub fn set_access(&self, v: u32) {
        // SAFETY: as in `access`; only spare bits change, so the table's link stays intact.
        unsafe {
            let wp = self.p as *mut usize;
            let w = *wp & super::table::LINK_PTR_BITS;
            *wp = w | (v & 0xF) as usize | (((v >> 4) & 0xFFFF) as usize) << 48;
            let t = self.p.add(TAG_AT);
            *t = (*t & !ACCESS_TAG_BITS) | (((v >> 20) & 0xF) as u8) << 4;
        }
    }

    /// Overwrites an existing expiry in place. The entry must already have one.
    pub fn set_expire_in_place(&self, t: Millis) {
        assert!(self.tag & HAS_EXPIRY != 0);
        // SAFETY: as in expire_at.
        unsafe { ptr::write_unaligned(self.p.add(HEADER) as *mut [u8; 8], t.to_le_bytes()) }
    }

    /// The stored pointer word of a collection entry, marker bit included.
    #[inline]
    unsafe fn raw_coll_ptr(&self) -> *mut u8 {
        ptr::read_unaligned(self.p.add(self.value_at) as *const *mut u8)
    }

    /// The collection pointer of a collection entry.
    unsafe fn coll_ptr(&self) -> *mut u8 {
        (self.raw_coll_ptr() as usize & !PTR_MARKS) as *mut u8
    }

    /// A shared view of the value, for as long as the caller keeps the entry alive and unchanged.
    pub unsafe fn value_ref<'a>(&self) -> ValueRef<'a> {
        let v = self.p.add(self.value_at);
        match self.form() {
            Form::Bytes | Form::RawBytes => {
                let (n, w) = read_varint(v);
                ValueRef::Str(StrRef::Bytes(std::slice::from_raw_parts(v.add(w), n)))
            }
            Form::Int => {
                ValueRef::Str(StrRef::Int(i64::from_le_bytes(ptr::read_unaligned(v as *const [u8; 8]))))
            }
            Form::Hash => ValueRef::Hash(&*(self.coll_ptr() as *const Hash)),
            Form::Set => ValueRef::Set(&*(self.coll_ptr() as *const Set)),
            Form::ZSet => ValueRef::ZSet(&*(self.coll_ptr() as *const ZSet)),
            Form::List => ValueRef::List(&*(self.coll_ptr() as *const List)),
            Form::Array => ValueRef::Array(&*(self.coll_ptr() as *const SparseArray)),
            Form::Stream => ValueRef::Stream(&*(self.coll_ptr() as *const Stream)),
            Form::VectorSet => ValueRef::VectorSet(&*(self.coll_ptr() as *const VectorSet)),
        }
    }

    /// A mutable view of the value. The caller guarantees exclusive access to the entry for
    /// `'a` (it holds `&mut` of the table).
    pub unsafe fn value_mut<'a>(&self) -> ValueMut<'a> {
        match self.form() {
            Form::Bytes | Form::RawBytes | Form::Int => match self.value_ref() {
                ValueRef::Str(s) => ValueMut::Str(s),
                _ => unreachable!(),
            },
            Form::Hash => ValueMut::Hash(&mut *(self.coll_ptr() as *mut Hash)),
            Form::Set => ValueMut::Set(&mut *(self.coll_ptr() as *mut Set)),
            Form::ZSet => ValueMut::ZSet(&mut *(self.coll_ptr() as *mut ZSet)),
            Form::List => ValueMut::List(&mut *(self.coll_ptr() as *mut List)),
            Form::Array => ValueMut::Array(&mut *(self.coll_ptr() as *mut SparseArray)),
            Form::Stream => ValueMut::Stream(&mut *(self.coll_ptr() as *mut Stream)),
            Form::VectorSet => ValueMut::VectorSet(&mut *(self.coll_ptr() as *mut VectorSet)),
        }
    }

    /// Bytes the allocator holds for this entry and its value (MEMORY USAGE): the entry's size
    /// class plus, for a collection, the collection's own `mem_usage()`, which by convention
    /// already counts its box.
    pub fn mem_usage(&self) -> usize {
        let own = size_class(self.size());
        // SAFETY: value_ref is used only within this call.
        let coll = match unsafe { self.value_ref() } {
            ValueRef::Str(_) => 0,
            ValueRef::Hash(h) => h.mem_usage(),
            ValueRef::Set(s) => s.mem_usage(),
            ValueRef::ZSet(z) => z.mem_usage(),
            ValueRef::List(l) => l.mem_usage(),
            ValueRef::Array(a) => a.mem_usage(),
            ValueRef::Stream(s) => s.mem_usage(),
            ValueRef::VectorSet(v) => v.mem_usage(),
        };
        own + coll
    }

    /// Moves the value out and frees the entry.
    ///
    /// # Safety
    /// The entry is live, unlinked, and nothing else references it; it is gone afterwards.
    pub unsafe fn into_value(self) -> Value {
        let v = match self.form() {
            Form::Bytes | Form::RawBytes | Form::Int => match self.value_ref() {
                ValueRef::Str(StrRef::Bytes(b)) => Value::Str(b.to_vec()),
                ValueRef::Str(StrRef::Int(i)) => Value::Int(i),
                _ => unreachable!(),
            },
            f => value_from_raw(f, self.coll_ptr()),
        };
        alloc::dealloc(self.p, layout(self.size()));
        v
    }

    /// Frees the entry and its value.
    ///
    /// # Safety
    /// As for [`Entry::into_value`].
    pub unsafe fn free(self) {
        let f = self.form();
        if !matches!(f, Form::Bytes | Form::RawBytes | Form::Int) {
            drop(value_from_raw(f, self.coll_ptr()));
        }
        alloc::dealloc(self.p, layout(self.size()));
    }

    /// Replaces the value, keeping the key and expiry; returns the entry's (possibly new)
    /// address. The old value is dropped. `realloc` keeps the allocation in place when the new
    /// size falls in the same size class, the usual case for counters and same-length updates.
    ///
    /// # Safety
    /// The entry is live and exclusively the caller's; the old address is dead afterwards.
    pub unsafe fn set_value(self, value: Stored<'_>) -> NonNull<u8> {
        let f = self.form();
        if !matches!(f, Form::Bytes | Form::RawBytes | Form::Int) {
            drop(value_from_raw(f, self.coll_ptr()));
        }
        let old_size = self.size();
        let new_size = self.value_at + value.size();
        // realloc keeps the first min(old, new) bytes: link, tag, expiry and key all lie before
        // value_at, which is below both sizes. A value of the same size (an INCR's integer, a
        // same-length SET) is written in place: even an in-place realloc costs the allocator
        // a size-class lookup, on every such write.
        let p =
            if new_size == old_size { self.p } else { alloc::realloc(self.p, layout(old_size), new_size) };
        if p.is_null() {
            alloc::handle_alloc_error(layout(new_size));
        }
        *p.add(TAG_AT) = (*p.add(TAG_AT) & !FORM_MASK) | value.form().tag_bits();
        write_value(p.add(self.value_at), value);
        NonNull::new_unchecked(p)
    }

    /// Edits a byte string where it lies: grows it to `new_len` bytes (zero-filled; a smaller
    /// `new_len` keeps the length), lets `f` change them, and marks the value modified in place
    /// ([`Form::RawBytes`]); returns the entry's (possibly new) address. Only the growth is
    /// written: the entry is reallocated when its size changes (which the allocator may do in
    /// place), and the bytes move within it only when their length prefix gains a byte (at 128
    /// bytes, 16 KiB, 2 MiB and 256 MiB). So an APPEND or a SETBIT costs what it changes, not
    /// the string's length.
    ///
    /// # Safety
    /// As for [`Entry::set_value`]; the value's form is `Bytes` or `RawBytes`.
    pub unsafe fn edit_bytes(self, new_len: usize, f: impl FnOnce(&mut [u8])) -> NonNull<u8> {
        debug_assert!(matches!(self.form(), Form::Bytes | Form::RawBytes));
        let (old_len, old_w) = read_varint(self.p.add(self.value_at));
        let new_len = new_len.max(old_len);
        let new_w = varint_len(new_len);
        let old_size = self.value_at + old_w + old_len;
        let new_size = self.value_at + new_w + new_len;
        // realloc keeps the first old_size bytes: header, key and the old value all survive.
        let p =
            if new_size == old_size { self.p } else { alloc::realloc(self.p, layout(old_size), new_size) };
        if p.is_null() {
            alloc::handle_alloc_error(layout(new_size));
        }
        let v = p.add(self.value_at);
        if new_w != old_w {
            // The length prefix grew: the bytes shift up by the difference (overlapping).
            ptr::copy(v.add(old_w), v.add(new_w), old_len);
        }
        write_varint(v, new_len);
        ptr::write_bytes(v.add(new_w + old_len), 0, new_len - old_len);
        *p.add(TAG_AT) = (*p.add(TAG_AT) & !FORM_MASK) | Form::RawBytes.tag_bits();
        f(std::slice::from_raw_parts_mut(v.add(new_w), new_len));
        NonNull::new_unchecked(p)
    }

    /// Turns a `RawBytes` value back into `Bytes` in place (same layout); anything else is
    /// left alone.
    ///
    /// # Safety
    /// The entry is live and exclusively the caller's.
    pub unsafe fn set_form_bytes(self) {
        if self.form() == Form::RawBytes {
            *self.p.add(TAG_AT) = (*self.p.add(TAG_AT) & !FORM_MASK) | Form::Bytes.tag_bits();
        }
    }

    /// Turns a `Bytes` value into `RawBytes` in place (same layout); anything else is left
    /// alone.
    ///
    /// # Safety
    /// The entry is live and exclusively the caller's.
    pub unsafe fn set_form_raw(self) {
        if self.form() == Form::Bytes {
            *self.p.add(TAG_AT) = (*self.p.add(TAG_AT) & !FORM_MASK) | Form::RawBytes.tag_bits();
        }
    }

    /// Copies the entry into a new allocation with expiry `at` (added, changed or removed) and
    /// frees the old one; returns the new address. The value moves over untouched.
    ///
    /// # Safety
    /// As for [`Entry::set_value`].
    pub unsafe fn with_expiry(self, at: Option<Millis>) -> NonNull<u8> {
        let value_size = self.size() - self.value_at;
        let size = size_of_parts(self.key_len, at.is_some(), value_size);
        let p = alloc::alloc(layout(size));
        if p.is_null() {
            alloc::handle_alloc_error(layout(size));
        }
        assert!(p as usize & !super::table::LINK_PTR_BITS == 0, "entry address {p:p} outside 48 bits");
        // The new entry keeps the access field: a link word with only its spare bits (the
        // table writes the pointer bits when it relinks it) and the tag's high nibble.
        let word = ptr::read(self.p as *const usize) & !super::table::LINK_PTR_BITS;
        ptr::write(p as *mut usize, word);
        let mut tag = *self.p.add(TAG_AT) & (FORM_MASK | ACCESS_TAG_BITS);
        let mut w = HEADER;
        if let Some(t) = at {
            tag |= HAS_EXPIRY;
            ptr::write_unaligned(p.add(w) as *mut [u8; 8], t.to_le_bytes());
            w += 8;
        }
        *p.add(TAG_AT) = tag;
        w += write_varint(p.add(w), self.key_len);
        // Key and value are contiguous in both layouts.
        ptr::copy_nonoverlapping(self.p.add(self.key_at), p.add(w), self.key_len + value_size);
        alloc::dealloc(self.p, layout(self.size()));
        NonNull::new_unchecked(p)
    }
}

/// Writes a value's bytes at `v`, taking ownership of it (a collection pointer moves into the
/// entry; a byte vector is copied and freed).
unsafe fn write_value(v: *mut u8, value: Stored<'_>) {
    match value {
        Stored::Bytes(b) | Stored::RawBytes(b) => {
            let w = write_varint(v, b.len());
            ptr::copy_nonoverlapping(b.as_ptr(), v.add(w), b.len());
        }
        Stored::Int(i) => ptr::write_unaligned(v as *mut [u8; 8], i.to_le_bytes()),
        Stored::Coll(Form::Stream, p) => {
            debug_assert!(p as usize & STREAM_PTR_BIT == 0);
            ptr::write_unaligned(v as *mut *mut u8, (p as usize | STREAM_PTR_BIT) as *mut u8)
        }
        Stored::Coll(Form::VectorSet, p) => {
            debug_assert!(p as usize & PTR_MARKS == 0);
            ptr::write_unaligned(v as *mut *mut u8, (p as usize | VSET_PTR_BIT) as *mut u8)
        }
        Stored::Coll(_, p) => ptr::write_unaligned(v as *mut *mut u8, p),
    }
}

/// The keyspace's [`ChainEntry`](super::table::ChainEntry) implementation.
pub struct KeyEntry;

// SAFETY: entries come from Entry::alloc / set_value / with_expiry: 8-aligned, link first, and
// the key never changes after allocation (only the value and expiry do, via those functions,
// whose new addresses go back into the table through replace_with).
unsafe impl super::table::ChainEntry for KeyEntry {
    #[inline]
    unsafe fn key<'a>(e: NonNull<u8>) -> &'a [u8] {
        Entry::at(e).key()
    }
    unsafe fn free(e: NonNull<u8>) {
        Entry::at(e).free()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_match_jemalloc() {
        let cases = [
            (1, 8),
            (8, 8),
            (9, 16),
            (17, 32),
            (32, 32),
            (33, 48),
            (128, 128),
            (129, 160),
            (161, 192),
            (256, 256),
            (257, 320),
            (513, 640),
            (4097, 5120),
        ];
        for (n, c) in cases {
            assert_eq!(size_class(n), c, "{n}");
        }
    }

    #[test]
    fn the_benchmark_key_fits_32_bytes() {
        assert_eq!(size_of_parts(b"str:999999".len(), false, 1 + 11), 32);
    }

    #[test]
    fn varints_round_trip() {
        let mut buf = [0u8; 10];
        for n in [0usize, 1, 127, 128, 300, 16_383, 16_384, 1 << 40] {
            let w = unsafe { write_varint(buf.as_mut_ptr(), n) };
            assert_eq!(w, varint_len(n));
            assert_eq!(unsafe { read_varint(buf.as_ptr()) }, (n, w));
        }
    }

    #[test]
    fn entries_round_trip_through_every_change() {
        let key = vec![b'k'; 200]; // a two-byte key length
        let e = Entry::alloc(&key, None, Stored::from_value(Value::Str(b"hello".to_vec())));
        unsafe {
            let en = Entry::at(e);
            assert_eq!(en.key(), &key[..]);
            assert_eq!(en.expire_at(), None);
            assert_eq!(en.size(), 9 + 2 + 200 + 1 + 5);
            let e = en.with_expiry(Some(-5));
            let en = Entry::at(e);
            assert_eq!(en.expire_at(), Some(-5));
            assert_eq!(en.key(), &key[..]);
            assert!(matches!(en.value_ref(), ValueRef::Str(StrRef::Bytes(b"hello"))));
            let e = en.set_value(Stored::from_value(Value::Str(b"-42".to_vec())));
            let en = Entry::at(e);
            assert!(matches!(en.value_ref(), ValueRef::Str(StrRef::Int(-42))));
            assert_eq!(en.expire_at(), Some(-5));
            let e = en.set_value(Stored::from_value(Value::Hash(Box::default())));
            let en = Entry::at(e);
            assert_eq!(en.form(), Form::Hash);
            let e = en.with_expiry(None);
            let en = Entry::at(e);
            assert_eq!(en.expire_at(), None);
            assert_eq!(en.key(), &key[..]);
            // A stream shares the array's form bits; the pointer's marker tells them apart
            // through every change.
            let e = en.set_value(Stored::from_value(Value::Stream(Box::default())));
            let en = Entry::at(e);
            assert_eq!(en.form(), Form::Stream);
            assert!(matches!(en.value_ref(), ValueRef::Stream(s) if s.is_empty()));
            let e = en.with_expiry(Some(7));
            let en = Entry::at(e);
            assert_eq!(en.form(), Form::Stream);
            let e = en.set_value(Stored::from_value(Value::Array(Box::default())));
            let en = Entry::at(e);
            assert_eq!(en.form(), Form::Array);
            let e = en.set_value(Stored::from_value(Value::Hash(Box::default())));
            let en = Entry::at(e);
            match en.into_value() {
                Value::Hash(h) => assert!(h.is_empty()),
                other => panic!("{other:?}"),
            }
        }
    }
}
