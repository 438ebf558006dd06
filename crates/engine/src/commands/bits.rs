//! Bit commands on strings: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO.
//!
//! Replies and errors follow Redis 7.0's `bitops.c` step for step, including the order in which
//! arguments and the key are checked (BITCOUNT looks the key up before parsing its range, so a
//! missing key answers 0 whatever the range; BITFIELD parses every operation before it looks
//! at the key). Bits are numbered from the most significant bit of byte 0. An int-encoded
//! string is seen as its decimal text, as Redis sees it.
//!
//! Canonical mutations: every write ends in one of
//! - the edit itself (`SETBIT key offset 0|1`, the BITFIELD request), as APPEND and SETRANGE
//!   emit theirs: bit offsets and overflow rules are deterministic, so replayed on the same
//!   bytes they leave the same bytes, and the record is as small as the request, not as large
//!   as the string (a bitmap of hundreds of megabytes takes one SETBIT at a time);
//! - `SET dest <value>` (BITOP with a non-empty result): Redis's `setKey` drops the old deadline
//!   and any old type, and a plain SET does exactly that;
//! - `DEL dest` (BITOP with an empty result on an existing key), as Redis deletes it.
//!
//! A write whose post-state equals its pre-state (SETBIT of a bit to the value it has, BITFIELD
//! whose operations all rewrote the same bits or failed without growing the string, BITOP that
//! stores what the key already held) emits nothing.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::commands::string::{edit_string, store_modified, MAX_STRING};
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{eq_ic, parse_i64};
use resp::reply;
use store::{ValueMut, ValueRef};

const W: u32 = Flags::WRITE | Flags::DENYOOM;
const R: u32 = Flags::READONLY;
const RF: u32 = Flags::READONLY | Flags::FAST;

const G: &str = "bitmap";

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec("setbit", 4, W, (1, 1, 1), G, "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.", Handler::Data(setbit)),
    spec("getbit", 3, RF, (1, 1, 1), G, "Returns a bit value by offset.", Handler::Data(getbit)),
    spec("bitcount", -2, R, (1, 1, 1), G, "Counts the number of set bits (population counting) in a string.", Handler::Data(bitcount)),
    spec("bitpos", -3, R, (1, 1, 1), G, "Finds the first set (1) or clear (0) bit in a string.", Handler::Data(bitpos)),
    spec("bitop", -4, W, (2, -1, 1), G, "Performs bitwise operations on multiple strings, and stores the result.", Handler::Data(bitop)),
    spec("bitfield", -2, W, (1, 1, 1), G, "Performs arbitrary bitfield integer operations on strings.", Handler::Data(bitfield)),
    spec("bitfield_ro", -2, RF, (1, 1, 1), G, "Performs arbitrary read-only bitfield integer operations on strings.", Handler::Data(bitfield_ro)),
];

const BIT_OFFSET_ERR: &[u8] = b"ERR bit offset is not an integer or out of range";
const BIT_VALUE_ERR: &[u8] = b"ERR bit is not an integer or out of range";
const BITPOS_BIT_ERR: &[u8] = b"ERR The bit argument must be 1 or 0.";
const BITOP_NOT_ERR: &[u8] = b"ERR BITOP NOT must be called with a single source key.";
const BITFIELD_TYPE_ERR: &[u8] =
    b"ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
const OVERFLOW_TYPE_ERR: &[u8] = b"ERR Invalid OVERFLOW type specified";
const BITFIELD_RO_ERR: &[u8] = b"ERR BITFIELD_RO only supports the GET subcommand";

// ---------------------------------------------------------------------------------------------
// Argument parsing.

/// The argument as C code sees it: Redis compares option words with `strcasecmp` and measures
/// bitfield types with `strlen`, both of which stop at the first NUL byte.
fn cstr(a: &[u8]) -> &[u8] {
    a.iter().position(|&b| b == 0).map_or(a, |n| &a[..n])
}

/// `strcasecmp(arg, word) == 0` for a lowercase `word` without NULs.
fn is_word(arg: &[u8], word: &[u8]) -> bool {
    eq_ic(cstr(arg), word)
}

/// Redis's `getBitOffsetFromArgument`: a bit offset in `[0, 8 * proto-max-bulk-len)`. With
/// `hash_bits` (BITFIELD), `#n` means `n * bits`; the product wraps as Redis's signed multiply
/// does on the machines it runs on, and is range-checked after.
fn bit_offset(arg: &[u8], hash_bits: Option<u32>) -> Option<u64> {
    let (digits, times) = match hash_bits {
        Some(bits) if arg.len() > 1 && arg[0] == b'#' => (&arg[1..], Some(bits)),
        _ => (arg, None),
    };
    let mut v = parse_i64(digits)?;
    if let Some(bits) = times {
        v = v.wrapping_mul(i64::from(bits));
    }
    // Invariant of every offset returned: offset / 8 < MAX_STRING, so a byte index fits a usize
    // and a string grown to hold it stays within what Redis would allocate.
    if v < 0 || (v as u64 >> 3) >= MAX_STRING {
        return None;
    }
    Some(v as u64)
}

// ---------------------------------------------------------------------------------------------
// Bit helpers over byte strings. Bit `i` is bit `7 - i % 8` of byte `i / 8` (MSB first).

fn bit_at(b: &[u8], i: u64) -> bool {
    let byte = (i >> 3) as usize;
    byte < b.len() && b[byte] & (0x80 >> (i & 7)) != 0
}

fn set_bit(b: &mut [u8], i: u64, on: bool) {
    let (byte, mask) = ((i >> 3) as usize, 0x80u8 >> (i & 7));
    if on {
        b[byte] |= mask;
    } else {
        b[byte] &= !mask;
    }
}

/// Set bits among bit positions `[first, last]`, both inside `b`.
fn count_ones(b: &[u8], first: u64, last: u64) -> u64 {
    let (fb, lb) = ((first >> 3) as usize, (last >> 3) as usize);
    // Masks keep the bits of the first and last byte that lie inside the range.
    let head = 0xFFu8 >> (first & 7);
    let tail = 0xFFu8 << (7 - (last & 7));
    if fb == lb {
        return u64::from((b[fb] & head & tail).count_ones());
    }
    let middle = popcount(&b[fb + 1..lb]);
    u64::from((b[fb] & head).count_ones()) + middle + u64::from((b[lb] & tail).count_ones())
}

/// Set bits in `b`, eight bytes at a time, with the CPU's POPCNT instruction where it has one
/// (the default x86-64 target may not assume it: without it a word costs a dozen operations).
fn popcount(b: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU has POPCNT (checked just above).
            return unsafe { popcount_popcnt(b) };
        }
    }
    popcount_words(b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
unsafe fn popcount_popcnt(b: &[u8]) -> u64 {
    popcount_words(b)
}

#[inline(always)]
fn popcount_words(b: &[u8]) -> u64 {
    let words = b.chunks_exact(8);
    let rest: u64 = words.remainder().iter().map(|x| u64::from(x.count_ones())).sum();
    words.map(|w| u64::from(u64::from_ne_bytes(w.try_into().expect("8 bytes")).count_ones())).sum::<u64>()
        + rest
}

/// The first bit position in `[first, last]` (both inside `b`) whose value is `bit`.
fn find_bit(b: &[u8], first: u64, last: u64, bit: bool) -> Option<u64> {
    // A byte with nothing to find is skipped whole.
    let skip = if bit { 0x00 } else { 0xFF };
    let mut i = first;
    while i <= last {
        if i & 7 == 0 {
            // Whole bytes inside the range with nothing to find are skipped in one run.
            let (from, to) = ((i >> 3) as usize, ((last + 1) >> 3) as usize);
            if from < to {
                let n = skip_run(&b[from..to], skip);
                if n > 0 {
                    i += 8 * n as u64;
                    continue;
                }
            }
        }
        if bit_at(b, i) == bit {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// How many bytes at the start of `b` equal `skip`: compared eight at a time.
fn skip_run(b: &[u8], skip: u8) -> usize {
    let word = u64::from_ne_bytes([skip; 8]);
    let words = b.chunks_exact(8);
    let whole = words.len();
    let n = words.take_while(|w| u64::from_ne_bytes((*w).try_into().expect("8 bytes")) == word).count();
    let bytes = if n < whole { &b[n * 8..n * 8 + 8] } else { &b[n * 8..] };
    n * 8 + bytes.iter().take_while(|&&x| x == skip).count()
}

/// Redis's range normalisation for BITCOUNT and BITPOS: negative indexes count from the end of
/// `totlen` units, both ends are clamped into `[0, totlen - 1]`. Returns None for an empty range.
fn normalize(mut start: i64, mut end: i64, totlen: i64) -> Option<(i64, i64)> {
    if start < 0 {
        start += totlen;
    }
    if end < 0 {
        end += totlen;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= totlen {
        end = totlen - 1;
    }
    (start <= end).then_some((start, end))
}

/// Parses BYTE|BIT: Some(true) for BIT.
fn unit(arg: &[u8]) -> Option<bool> {
    if is_word(arg, b"bit") {
        Some(true)
    } else if is_word(arg, b"byte") {
        Some(false)
    } else {
        None
    }
}

// ---------------------------------------------------------------------------------------------
// SETBIT / GETBIT

/// SETBIT key offset value
fn setbit(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let Some(offset) = bit_offset(args[2], None) else {
        return reply::error(out, BIT_OFFSET_ERR);
    };
    let on = match parse_i64(args[3]) {
        Some(v @ (0 | 1)) => v == 1,
        _ => return reply::error(out, BIT_VALUE_ERR),
    };
    let need = (offset >> 3) as usize + 1;
    // The old bit and length, read where the string lies (no copy of a large bitmap).
    let (old, len, created) = match c.write(key) {
        None => (false, 0, true),
        Some(ValueMut::Str(s)) => (s.with_bytes(|b| bit_at(b, offset)), s.len(), false),
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    // Redis grows the string (zero-filled) to hold the offset even when the bit keeps its
    // value; that growth is a change of its own.
    if created || len < need || old != on {
        let value: &[u8] = if on { b"1" } else { b"0" };
        edit_string(c, key, need, |b| set_bit(b, offset, on), &[b"SETBIT", key, args[2], value]);
    }
    reply::integer(out, i64::from(old));
}

/// GETBIT key offset
fn getbit(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(offset) = bit_offset(args[2], None) else {
        return reply::error(out, BIT_OFFSET_ERR);
    };
    match c.read(args[1]) {
        None => reply::integer(out, 0),
        Some(ValueRef::Str(s)) => {
            let bit = s.with_bytes(|b| bit_at(b, offset));
            reply::integer(out, i64::from(bit));
        }
        Some(_) => reply::error(out, errors::WRONGTYPE),
    }
}

// ---------------------------------------------------------------------------------------------
// BITCOUNT / BITPOS

/// BITCOUNT key [start end [BYTE|BIT]]. As Redis 7.4+: the arguments are parsed first (start,
/// end, then the unit), then the key is looked up (a wrong type: WRONGTYPE; missing: 0).
fn bitcount(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let range = match bitcount_range(args) {
        Ok(r) => r,
        Err(e) => return reply::error(out, e),
    };
    let s = match c.read(args[1]) {
        None => return reply::integer(out, 0),
        Some(ValueRef::Str(s)) => s,
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    reply::integer(out, s.with_bytes(|b| bitcount_of(b, range)) as i64);
}

/// BITCOUNT's range: None for the whole string, else (start, end, in bits).
fn bitcount_range(args: &[&[u8]]) -> Result<Option<(i64, i64, bool)>, &'static [u8]> {
    match args.len() {
        2 => Ok(None),
        4 | 5 => {
            let start = parse_i64(args[2]).ok_or(errors::NOT_INTEGER)?;
            let end = parse_i64(args[3]).ok_or(errors::NOT_INTEGER)?;
            let is_bit = if args.len() == 5 { unit(args[4]).ok_or(errors::SYNTAX)? } else { false };
            Ok(Some((start, end, is_bit)))
        }
        _ => Err(errors::SYNTAX),
    }
}

fn bitcount_of(b: &[u8], range: Option<(i64, i64, bool)>) -> u64 {
    let len = b.len() as i64;
    let Some((start, end, is_bit)) = range else {
        return if b.is_empty() { 0 } else { count_ones(b, 0, len as u64 * 8 - 1) };
    };
    // Two negative indexes in the wrong order are empty before any clamping (clamping could
    // otherwise make them overlap byte 0).
    if start < 0 && end < 0 && start > end {
        return 0;
    }
    let totlen = if is_bit { len * 8 } else { len };
    let Some((s, e)) = normalize(start, end, totlen) else { return 0 };
    let (first, last) = if is_bit { (s, e) } else { (s * 8, e * 8 + 7) };
    count_ones(b, first as u64, last as u64)
}

/// BITPOS key bit [start [end [BYTE|BIT]]]. As Redis 7.4+: the bit, then the range (start, the
/// unit, then end), then the key (missing: an endless run of zeros, so 0 for a clear bit and
/// -1 for a set one).
fn bitpos(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let bit = match parse_i64(args[2]) {
        Some(v @ (0 | 1)) => v == 1,
        Some(_) => return reply::error(out, BITPOS_BIT_ERR),
        None => return reply::error(out, errors::NOT_INTEGER),
    };
    let range = match bitpos_range(args) {
        Ok(r) => r,
        Err(e) => return reply::error(out, e),
    };
    let s = match c.read(args[1]) {
        None => return reply::integer(out, if bit { -1 } else { 0 }),
        Some(ValueRef::Str(s)) => s,
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    reply::integer(out, s.with_bytes(|b| bitpos_of(b, bit, range)));
}

/// BITPOS's range: (start, end if given, in bits); None for the whole string.
type BitposRange = Option<(i64, Option<i64>, bool)>;

fn bitpos_range(args: &[&[u8]]) -> Result<BitposRange, &'static [u8]> {
    match args.len() {
        3 => Ok(None),
        4..=6 => {
            let start = parse_i64(args[3]).ok_or(errors::NOT_INTEGER)?;
            // Redis reads the unit before the end.
            let is_bit = if args.len() == 6 { unit(args[5]).ok_or(errors::SYNTAX)? } else { false };
            let end =
                if args.len() >= 5 { Some(parse_i64(args[4]).ok_or(errors::NOT_INTEGER)?) } else { None };
            Ok(Some((start, end, is_bit)))
        }
        _ => Err(errors::SYNTAX),
    }
}

fn bitpos_of(b: &[u8], bit: bool, range: BitposRange) -> i64 {
    let len = b.len() as i64;
    let (start, end, is_bit) = range.unwrap_or((0, None, false));
    let end_given = end.is_some();
    let totlen = if is_bit { len * 8 } else { len };
    // An empty range holds neither a 0 nor a 1.
    let Some((s, e)) = normalize(start, end.unwrap_or(totlen - 1), totlen) else { return -1 };
    let (first, last) = if is_bit { (s as u64, e as u64) } else { (s as u64 * 8, e as u64 * 8 + 7) };
    match find_bit(b, first, last, bit) {
        Some(p) => p as i64,
        // Without an explicit end the string counts as zero-padded on the right, so the first
        // clear bit of an all-ones range is the one just past it (Redis's special case).
        None if !bit && !end_given => last as i64 + 1,
        None => -1,
    }
}

// ---------------------------------------------------------------------------------------------
// BITOP

#[derive(Clone, Copy, PartialEq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
    /// Redis 8.2: the first source, less every bit set in any other.
    Diff,
    /// Redis 8.2: the bits set in some other source and not in the first.
    Diff1,
    /// Redis 8.2: the first source's bits that are also set in some other.
    AndOr,
    /// Redis 8.2: the bits set in exactly one source.
    One,
}

/// BITOP AND|OR|XOR|NOT|DIFF|DIFF1|ANDOR|ONE destkey key [key ...]. Missing sources are empty strings; shorter
/// sources are zero-padded to the longest; the result replaces destkey whatever its type (and
/// drops its deadline), or deletes it when every source is empty.
fn bitop(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let op = match cstr(args[1]).to_ascii_lowercase().as_slice() {
        b"and" => BitOp::And,
        b"or" => BitOp::Or,
        b"xor" => BitOp::Xor,
        b"not" => BitOp::Not,
        b"diff" => BitOp::Diff,
        b"diff1" => BitOp::Diff1,
        b"andor" => BitOp::AndOr,
        b"one" => BitOp::One,
        _ => return reply::error(out, errors::SYNTAX),
    };
    if op == BitOp::Not && args.len() != 4 {
        return reply::error(out, BITOP_NOT_ERR);
    }
    if matches!(op, BitOp::Diff | BitOp::Diff1 | BitOp::AndOr) && args.len() < 5 {
        let name = String::from_utf8_lossy(args[1]).to_ascii_uppercase();
        return reply::error(
            out,
            format!("ERR BITOP {name} must be called with at least two source keys.").as_bytes(),
        );
    }
    let dest = args[2];
    // Each source folded into the result where it lies, eight bytes at a time (no copy of a
    // source), in one pass: the result's words (and, for the ops that need them, the other
    // sources' union and the bits seen twice) grow with zeros to the longest source so far,
    // which is what every earlier source's zero padding folds to. A WRONGTYPE source stops
    // the command before anything is stored.
    let uses_others = matches!(op, BitOp::Diff | BitOp::Diff1 | BitOp::AndOr);
    let (mut acc, mut others, mut twice) = (Vec::new(), Vec::new(), Vec::new());
    let mut maxlen = 0;
    for (n, &k) in args[3..].iter().enumerate() {
        let mut fold = |bytes: &[u8]| {
            maxlen = maxlen.max(bytes.len());
            let words = bytes.len().div_ceil(8);
            if words > acc.len() {
                acc.resize(words, 0);
                if uses_others {
                    others.resize(words, 0);
                }
                if op == BitOp::One {
                    twice.resize(words, 0);
                }
            }
            fold_source(op, n == 0, bytes, &mut acc, &mut others, &mut twice);
        };
        match c.read(k) {
            None => fold(&[]),
            Some(ValueRef::Str(s)) => s.with_bytes(fold),
            Some(_) => return reply::error(out, errors::WRONGTYPE),
        }
    }
    if maxlen == 0 {
        if c.exists(dest) {
            c.ks.delete(dest);
            c.emit(&[b"DEL", dest]);
        }
        return reply::integer(out, 0);
    }
    match op {
        BitOp::Not => acc.iter_mut().for_each(|a| *a = !*a),
        BitOp::Diff => acc.iter_mut().zip(&others).for_each(|(a, o)| *a &= !o),
        BitOp::Diff1 => acc.iter_mut().zip(&others).for_each(|(a, o)| *a = !*a & o),
        BitOp::AndOr => acc.iter_mut().zip(&others).for_each(|(a, o)| *a &= o),
        BitOp::One => acc.iter_mut().zip(&twice).for_each(|(a, t)| *a &= !t),
        BitOp::And | BitOp::Or | BitOp::Xor => {}
    }
    let mut res = vec![0u8; acc.len() * 8];
    res.chunks_exact_mut(8).zip(&acc).for_each(|(b, w)| b.copy_from_slice(&w.to_le_bytes()));
    res.truncate(maxlen);
    // Storing what destkey already holds, without a deadline, changes nothing.
    let unchanged = c.exists(dest)
        && c.ks.expire_at(dest).is_none()
        && matches!(c.ks.get(dest), Some(ValueRef::Str(s)) if s.with_bytes(|b| b == res.as_slice()));
    if !unchanged {
        c.emit(&[b"SET", dest, &res]);
        c.ks.put_bytes(dest, &res, None);
    }
    reply::integer(out, maxlen as i64);
}

/// Folds one BITOP source (`first`: the first one) into the result words `acc`, the other
/// sources' union `others` (DIFF, DIFF1, ANDOR) and the bits seen twice `twice` (ONE); the
/// source counts as zero past its end.
fn fold_source(op: BitOp, first: bool, bytes: &[u8], acc: &mut [u64], others: &mut [u64], twice: &mut [u64]) {
    let words = acc.len();
    if first {
        return each_word(words, bytes, |j, w| acc[j] = w);
    }
    match op {
        BitOp::And => each_word(words, bytes, |j, w| acc[j] &= w),
        BitOp::Or => each_word(words, bytes, |j, w| acc[j] |= w),
        BitOp::Xor => each_word(words, bytes, |j, w| acc[j] ^= w),
        BitOp::Not => {}
        BitOp::Diff | BitOp::Diff1 | BitOp::AndOr => each_word(words, bytes, |j, w| others[j] |= w),
        // Bits seen in two sources or more never come back.
        BitOp::One => each_word(words, bytes, |j, w| {
            twice[j] |= acc[j] & w;
            acc[j] = (acc[j] ^ w) & !twice[j];
        }),
    }
}

/// Calls `f(j, word)` for the `words` little-endian words of `bytes`, zero-padded past its end.
#[inline(always)]
fn each_word(words: usize, bytes: &[u8], mut f: impl FnMut(usize, u64)) {
    let full = bytes.chunks_exact(8);
    let rem = full.remainder();
    let mut j = 0;
    for c in full.take(words) {
        f(j, u64::from_le_bytes(c.try_into().expect("8 bytes")));
        j += 1;
    }
    if j < words && !rem.is_empty() {
        let mut w = [0u8; 8];
        w[..rem.len()].copy_from_slice(rem);
        f(j, u64::from_le_bytes(w));
        j += 1;
    }
    for j in j..words {
        f(j, 0);
    }
}

// ---------------------------------------------------------------------------------------------
// BITFIELD / BITFIELD_RO

#[derive(Clone, Copy, PartialEq, Debug)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// One parsed BITFIELD operation. Invariants: `1 <= bits <= 64` if signed, `<= 63` if not;
/// `offset / 8 < MAX_STRING`.
#[derive(Clone, Copy, Debug)]
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

/// Redis's `getBitfieldTypeFromArgument`: `i1`..`i64` or `u1`..`u63` (case-sensitive prefix).
fn field_type(arg: &[u8]) -> Option<(bool, u32)> {
    let arg = cstr(arg);
    let signed = match arg.first()? {
        b'i' => true,
        b'u' => false,
        _ => return None,
    };
    let bits = parse_i64(&arg[1..])?;
    let max = if signed { 64 } else { 63 };
    (1..=max).contains(&bits).then_some((signed, bits as u32))
}

/// The unsigned value of `bits` bits at bit `offset` (MSB first); bits past the end read 0.
fn get_field(b: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0u64, |v, i| (v << 1) | u64::from(bit_at(b, offset + i)))
}

/// Writes the low `bits` bits of `v` at bit `offset`; the buffer holds them (the caller grew it).
fn set_field(b: &mut [u8], offset: u64, bits: u32, v: u64) {
    for i in 0..u64::from(bits) {
        set_bit(b, offset + i, ((v >> (u64::from(bits) - 1 - i)) & 1) == 1);
    }
}

/// Reads a signed field, sign-extended (Redis's `getSignedBitfield`).
fn get_signed(b: &[u8], offset: u64, bits: u32) -> i64 {
    let raw = get_field(b, offset, bits);
    if bits < 64 && (raw >> (bits - 1)) & 1 == 1 {
        (raw | (u64::MAX << bits)) as i64
    } else {
        raw as i64
    }
}

/// Which way a SET or INCRBY overflowed, by Redis's own test (see below).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Over {
    None,
    Up,
    Down,
}

/// Redis's `checkSignedBitfieldOverflow(value, incr, bits)`, operation for operation, wrapping
/// where C wraps. This is deliberately not "does value + incr leave the range": for a SET
/// (incr 0) of a value far below the range, `max - value` wraps negative, so Redis reports an
/// overflow *upwards* (SAT stores the maximum); replies must match that.
fn signed_overflow(value: i64, incr: i64, bits: u32) -> Over {
    let max: i64 = if bits == 64 { i64::MAX } else { (1i64 << (bits - 1)) - 1 };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    if value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        Over::Up
    } else if value < min || (bits != 64 && incr < minincr) || (value < 0 && incr < 0 && incr < minincr) {
        Over::Down
    } else {
        Over::None
    }
}

/// Redis's `checkUnsignedBitfieldOverflow(value, incr, bits)` (bits <= 63), wrapping as C does.
fn unsigned_overflow(value: u64, incr: i64, bits: u32) -> Over {
    let max: u64 = (1u64 << bits) - 1;
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = value.wrapping_neg() as i64;
    if value > max || (incr > 0 && incr > maxincr) {
        Over::Up
    } else if incr < 0 && incr < minincr {
        Over::Down
    } else {
        Over::None
    }
}

/// Runs one SET or INCRBY on `buf` (grown to hold it): Some(reply value) or None when
/// OVERFLOW FAIL refused it (nothing written). The stored value on overflow: WRAP keeps the low
/// `bits` bits of the wrapping sum (two's complement), SAT the bound of the reported direction.
fn write_field(buf: &mut [u8], f: &Field) -> Option<i64> {
    let (incr, is_set, arg) = match f.op {
        FieldOp::Set(v) => (0, true, v),
        FieldOp::IncrBy(d) => (d, false, 0),
        FieldOp::Get => unreachable!("GET is not a write"),
    };
    let (old, value, over) = if f.signed {
        let old = get_signed(buf, f.offset, f.bits);
        let value = if is_set { arg } else { old };
        (old as u64, value as u64, signed_overflow(value, incr, f.bits))
    } else {
        let old = get_field(buf, f.offset, f.bits);
        // An unsigned SET sees its argument through Redis's uint64 cast: negatives are huge.
        let value = if is_set { arg as u64 } else { old };
        (old, value, unsigned_overflow(value, incr, f.bits))
    };
    let new = match (over, f.overflow) {
        (Over::None, _) => value.wrapping_add(incr as u64),
        (_, Overflow::Fail) => return None,
        (_, Overflow::Wrap) => value.wrapping_add(incr as u64),
        (Over::Up, Overflow::Sat) if f.signed => {
            (if f.bits == 64 { i64::MAX } else { (1i64 << (f.bits - 1)) - 1 }) as u64
        }
        (Over::Down, Overflow::Sat) if f.signed => {
            (if f.bits == 64 { i64::MIN } else { -(1i64 << (f.bits - 1)) }) as u64
        }
        (Over::Up, Overflow::Sat) => (1u64 << f.bits) - 1,
        (Over::Down, Overflow::Sat) => 0,
    };
    // Only the low `bits` bits are stored; set_field ignores the rest.
    set_field(buf, f.offset, f.bits, new);
    // SET answers the old value, INCRBY the new one, both read as the field's type.
    let shown = if is_set { old } else { new };
    Some(typed(shown, f))
}

/// The low `bits` bits of `v` as the field's type: sign-extended if signed.
fn typed(v: u64, f: &Field) -> i64 {
    if f.bits == 64 {
        return v as i64;
    }
    let low = v & !(u64::MAX << f.bits);
    if f.signed && (low >> (f.bits - 1)) & 1 == 1 {
        (low | (u64::MAX << f.bits)) as i64
    } else {
        low as i64
    }
}

/// A GET's reply value.
fn read_field(b: &[u8], f: &Field) -> i64 {
    if f.signed {
        get_signed(b, f.offset, f.bits)
    } else {
        get_field(b, f.offset, f.bits) as i64
    }
}

/// Parses BITFIELD's operations (everything is checked before the key is looked at, as Redis
/// does). Returns the operations and the highest bit any SET/INCRBY writes, if any does.
fn parse_fields(args: &[&[u8]]) -> Result<(Vec<Field>, Option<u64>), &'static [u8]> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut highest: Option<u64> = None;
    let mut j = 2;
    while j < args.len() {
        let rem = args.len() - j - 1;
        let w = args[j];
        let is_get = is_word(w, b"get") && rem >= 2;
        let is_set = is_word(w, b"set") && rem >= 3;
        let is_incr = is_word(w, b"incrby") && rem >= 3;
        if !(is_get || is_set || is_incr) {
            if is_word(w, b"overflow") && rem >= 1 {
                let t = args[j + 1];
                overflow = if is_word(t, b"wrap") {
                    Overflow::Wrap
                } else if is_word(t, b"sat") {
                    Overflow::Sat
                } else if is_word(t, b"fail") {
                    Overflow::Fail
                } else {
                    return Err(OVERFLOW_TYPE_ERR);
                };
                j += 2;
                continue;
            }
            return Err(errors::SYNTAX);
        }
        let (signed, bits) = field_type(args[j + 1]).ok_or(BITFIELD_TYPE_ERR)?;
        let offset = bit_offset(args[j + 2], Some(bits)).ok_or(BIT_OFFSET_ERR)?;
        let op = if is_get {
            FieldOp::Get
        } else {
            let top = offset + u64::from(bits) - 1;
            highest = Some(highest.map_or(top, |h| h.max(top)));
            let v = parse_i64(args[j + 3]).ok_or(errors::NOT_INTEGER)?;
            if is_set {
                FieldOp::Set(v)
            } else {
                FieldOp::IncrBy(v)
            }
        };
        fields.push(Field { op, signed, bits, offset, overflow });
        j += if is_get { 3 } else { 4 };
    }
    Ok((fields, highest))
}

fn bitfield(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    bitfield_generic(c, out, args, false);
}

fn bitfield_ro(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    bitfield_generic(c, out, args, true);
}

fn bitfield_generic(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]], read_only: bool) {
    let key = args[1];
    let (fields, highest) = match parse_fields(args) {
        Ok(x) => x,
        Err(e) => return reply::error(out, e),
    };
    let Some(highest) = highest else {
        // Only GETs: a read (a missing key reads as zeros).
        return match c.read(key) {
            None => reply_gets(out, &fields, &[]),
            Some(ValueRef::Str(s)) => s.with_bytes(|b| reply_gets(out, &fields, b)),
            Some(_) => reply::error(out, errors::WRONGTYPE),
        };
    };
    if read_only {
        return reply::error(out, BITFIELD_RO_ERR);
    }
    let (old_len, created) = match c.write(key) {
        None => (0, true),
        Some(ValueMut::Str(s)) => (s.len(), false),
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    // Redis makes room up to the highest bit written before running any operation (even ones
    // that then FAIL), creating the key if needed: the growth is part of the post-state.
    let need = (highest >> 3) as usize + 1;
    let grown = old_len < need;
    let proto = c.proto;
    // Runs every operation over the (grown) bytes, replying as it goes; says whether a write
    // changed a byte that existed before. The original value of every pre-existing byte a
    // write touches is kept (each index once), so that this is exact without a copy of the
    // whole string.
    let run = |buf: &mut [u8], out: &mut Vec<u8>| -> bool {
        let mut originals: Vec<(usize, u8)> = Vec::new();
        reply::array_len(out, fields.len());
        for f in &fields {
            if f.op == FieldOp::Get {
                reply::integer(out, read_field(buf, f));
                continue;
            }
            let (first, last) =
                ((f.offset >> 3) as usize, ((f.offset + u64::from(f.bits) - 1) >> 3) as usize);
            // Bytes at or past `old_len` are growth, already counted by `grown`.
            for (i, &b) in buf.iter().enumerate().take((last + 1).min(old_len)).skip(first) {
                if !originals.iter().any(|&(j, _)| j == i) {
                    originals.push((i, b));
                }
            }
            match write_field(buf, f) {
                Some(v) => reply::integer(out, v),
                None => reply::null_bulk(out, proto),
            }
        }
        originals.iter().any(|&(i, b)| buf[i] != b)
    };
    // The request itself is the mutation: its operations run again on the same bytes give the
    // same bytes (a GET among them reads, a FAIL fails again), as Redis replicates it.
    // A byte string is edited where it lies (a BITFIELD in a 100 MB bitmap writes its few
    // bytes, as SETBIT does); an absent key or an integer-form string is built whole.
    let was_raw = c.ks.is_raw_string(key);
    let mut changed = false;
    let mark = out.len();
    if !created && c.ks.edit_string(key, need, |b| changed = run(b, out)) {
        if grown || changed {
            c.emit_request(b"BITFIELD", args);
        } else if !was_raw {
            // Nothing changed: the string keeps the form it had (edit_string marked it raw).
            c.ks.mark_bytes(key);
        }
        return;
    }
    out.truncate(mark);
    let mut buf = match c.ks.get(key) {
        Some(ValueRef::Str(s)) => s.to_vec(),
        _ => Vec::new(),
    };
    if grown {
        buf.resize(need, 0);
    }
    let changed = run(&mut buf, out);
    if created || grown || changed {
        store_modified(c, key, buf, b"BITFIELD", args);
    }
}

/// The reply of a GET-only BITFIELD over `b` (bits past its end read 0).
fn reply_gets(out: &mut Vec<u8>, fields: &[Field], b: &[u8]) {
    reply::array_len(out, fields.len());
    for f in fields {
        reply::integer(out, read_field(b, f));
    }
}

#[cfg(test)]
mod word_tests {
    //! The word-at-a-time scans and folds against their one-bit-at-a-time definitions.
    use super::*;
    use proptest::prelude::*;

    fn naive_find(b: &[u8], first: u64, last: u64, bit: bool) -> Option<u64> {
        (first..=last).find(|&i| bit_at(b, i) == bit)
    }

    fn naive_count(b: &[u8], first: u64, last: u64) -> u64 {
        (first..=last).filter(|&i| bit_at(b, i)).count() as u64
    }

    /// Runs of 0x00 and 0xFF (what the skips jump over) with odd bytes between them.
    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec((prop_oneof![Just(0u8), Just(0xFF), any::<u8>()], 1usize..40), 1..12)
            .prop_map(|runs| runs.into_iter().flat_map(|(b, n)| std::iter::repeat_n(b, n)).collect())
    }

    proptest! {
        #[test]
        fn find_bit_and_count_ones_match_a_bit_by_bit_scan(
            b in bytes(), a in any::<u64>(), z in any::<u64>(), bit in any::<bool>(),
        ) {
            let bits = b.len() as u64 * 8;
            let (first, last) = { let (x, y) = (a % bits, z % bits); (x.min(y), x.max(y)) };
            prop_assert_eq!(find_bit(&b, first, last, bit), naive_find(&b, first, last, bit));
            prop_assert_eq!(count_ones(&b, first, last), naive_count(&b, first, last));
        }
    }
}

#[cfg(test)]
mod tests {
    //! Edge cases; every expected reply here was read from redis-server 7.0.15.
    use crate::testing::{reply, take_muts};
    use crate::Engine;

    const NOW: i64 = 1_700_000_000_000;
    const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    const SYNTAX: &str = "-ERR syntax error\r\n";
    const NOT_INT: &str = "-ERR value is not an integer or out of range\r\n";
    const BAD_OFFSET: &str = "-ERR bit offset is not an integer or out of range\r\n";

    fn r(e: &mut Engine, args: &[&str]) -> String {
        reply(e, NOW, args)
    }

    /// A command given as one string of space-separated words.
    fn w(e: &mut Engine, line: &str) -> String {
        reply(e, NOW, &line.split(' ').collect::<Vec<_>>())
    }

    fn int(n: i64) -> String {
        format!(":{n}\r\n")
    }

    #[test]
    fn bitcount_ranges_bytes_and_bits() {
        let mut e = Engine::default();
        r(&mut e, &["SET", "s", "foobar"]);
        for (args, want) in [
            (&["BITCOUNT", "s"][..], 26),
            (&["BITCOUNT", "s", "0", "0"], 4),
            (&["BITCOUNT", "s", "1", "1"], 6),
            (&["BITCOUNT", "s", "5", "30", "bit"], 17),
            (&["BITCOUNT", "s", "-2", "-1"], 7),
            (&["BITCOUNT", "s", "-10", "-20"], 0),
            (&["BITCOUNT", "s", "-1", "-3", "bit"], 0),
            (&["BITCOUNT", "s", "0", "-1", "BIT"], 26),
            (&["BITCOUNT", "s", "1", "2", "byte"], 12),
            (&["BITCOUNT", "s", "-9", "-1", "bit"], 5),
            (&["BITCOUNT", "s", "0", "9223372036854775807"], 26),
            (&["BITCOUNT", "s", "-1", "-3", "byte"], 0),
        ] {
            assert_eq!(r(&mut e, args), int(want), "{args:?}");
        }
        assert_eq!(r(&mut e, &["BITCOUNT", "s", "1"]), SYNTAX);
        assert_eq!(r(&mut e, &["BITCOUNT", "s", "0", "1", "bit", "x"]), SYNTAX);
        assert_eq!(r(&mut e, &["BITCOUNT", "s", "0", "1", "bits"]), SYNTAX);
        assert_eq!(r(&mut e, &["BITCOUNT", "s", "x", "1"]), NOT_INT);
        // Redis 7.4+ (read from 8.2.3): the arguments are parsed before the key is looked up,
        // the unit before the reversed-negatives shortcut.
        assert_eq!(r(&mut e, &["BITCOUNT", "s", "-1", "-3", "nope"]), SYNTAX);
        assert_eq!(r(&mut e, &["BITCOUNT", "nokey", "x", "y"]), NOT_INT);
        assert_eq!(r(&mut e, &["BITCOUNT", "nokey", "1"]), SYNTAX);
        assert_eq!(r(&mut e, &["BITCOUNT", "nokey", "0", "1"]), int(0));
        r(&mut e, &["LPUSH", "l", "a"]);
        assert_eq!(r(&mut e, &["BITCOUNT", "l", "1", "2", "nope"]), SYNTAX);
        assert_eq!(r(&mut e, &["BITCOUNT", "l", "1", "2"]), WRONGTYPE);
        r(&mut e, &["SET", "empty", ""]);
        assert_eq!(r(&mut e, &["BITCOUNT", "empty"]), int(0));
        assert_eq!(r(&mut e, &["BITCOUNT", "empty", "0", "-1", "BIT"]), int(0));
    }

    #[test]
    fn bitpos_ranges_and_the_no_end_rule() {
        let mut e = Engine::default();
        // Three 0xff bytes.
        for i in 0..24 {
            r(&mut e, &["SETBIT", "ones", &i.to_string(), "1"]);
        }
        assert_eq!(r(&mut e, &["STRLEN", "ones"]), int(3));
        for (args, want) in [
            // No end given: the string counts as zero-padded, the first clear bit is just past it.
            (&["BITPOS", "ones", "0"][..], 24),
            (&["BITPOS", "ones", "0", "1"], 24),
            // An explicit end: no clear bit in the range.
            (&["BITPOS", "ones", "0", "0", "-1"], -1),
            (&["BITPOS", "ones", "0", "0", "-1", "bit"], -1),
            (&["BITPOS", "ones", "1", "-1"], 16),
            // An empty range holds neither bit.
            (&["BITPOS", "ones", "0", "5"], -1),
            (&["BITPOS", "ones", "1", "2", "1"], -1),
            (&["BITPOS", "nokey", "0"], 0),
            (&["BITPOS", "nokey", "1"], -1),
            (&["BITPOS", "nokey", "0", "5", "10", "bit"], 0),
        ] {
            assert_eq!(r(&mut e, args), int(want), "{args:?}");
        }
        r(&mut e, &["SET", "s", "foobar"]);
        for (args, want) in [
            (&["BITPOS", "s", "1", "7", "15", "bit"][..], 9),
            (&["BITPOS", "s", "0", "-3", "-1", "bit"], 45),
            (&["BITPOS", "s", "1", "100"], -1),
            (&["BITPOS", "s", "0", "-100", "-90"], 0),
        ] {
            assert_eq!(r(&mut e, args), int(want), "{args:?}");
        }
        assert_eq!(r(&mut e, &["BITPOS", "s", "2"]), "-ERR The bit argument must be 1 or 0.\r\n");
        assert_eq!(r(&mut e, &["BITPOS", "s", "x"]), NOT_INT);
        // Redis 7.4+ (read from 8.2.3): the range is parsed before the key is looked up.
        assert_eq!(r(&mut e, &["BITPOS", "nokey", "1", "x"]), NOT_INT);
        r(&mut e, &["LPUSH", "l", "a"]);
        assert_eq!(r(&mut e, &["BITPOS", "l", "1", "1", "2", "nope"]), SYNTAX);
        assert_eq!(r(&mut e, &["BITPOS", "l", "1", "1", "2"]), WRONGTYPE);
        assert_eq!(r(&mut e, &["BITPOS", "s", "1", "1", "2", "bit", "5"]), SYNTAX);
        // The unit is read before the end.
        assert_eq!(r(&mut e, &["BITPOS", "s", "1", "1", "x", "nope"]), SYNTAX);
        assert_eq!(r(&mut e, &["BITPOS", "s", "1", "1", "x", "bit"]), NOT_INT);
    }

    #[test]
    fn setbit_getbit_and_their_mutations() {
        let mut e = Engine::default();
        assert_eq!(r(&mut e, &["SETBIT", "k", "9", "1"]), int(0));
        assert_eq!(take_muts(&mut e), vec!["SETBIT k 9 1"]);
        assert_eq!(r(&mut e, &["SETBIT", "k", "9", "1"]), int(1));
        assert_eq!(take_muts(&mut e), Vec::<String>::new(), "no change, no mutation");
        // Growing the string is a change even when the bit stays 0.
        assert_eq!(r(&mut e, &["SETBIT", "k", "23", "0"]), int(0));
        assert_eq!(take_muts(&mut e), vec!["SETBIT k 23 0"]);
        assert_eq!(r(&mut e, &["GETBIT", "k", "9"]), int(1));
        assert_eq!(r(&mut e, &["GETBIT", "k", "4294967295"]), int(0));
        assert_eq!(r(&mut e, &["GETBIT", "nokey", "0"]), int(0));
        assert_eq!(r(&mut e, &["SETBIT", "k", "4294967296", "1"]), BAD_OFFSET);
        assert_eq!(r(&mut e, &["SETBIT", "k", "-1", "1"]), BAD_OFFSET);
        assert_eq!(r(&mut e, &["GETBIT", "k", "x"]), BAD_OFFSET);
        assert_eq!(r(&mut e, &["SETBIT", "k", "0", "2"]), "-ERR bit is not an integer or out of range\r\n");
        assert_eq!(r(&mut e, &["SETBIT", "k", "0", "-1"]), "-ERR bit is not an integer or out of range\r\n");
        // Int-encoded strings are their decimal text: "12" is 0x31 0x32.
        r(&mut e, &["SET", "n", "12"]);
        r(&mut e, &["PEXPIREAT", "n", "1800000000000"]);
        take_muts(&mut e);
        assert_eq!(r(&mut e, &["GETBIT", "n", "2"]), int(1));
        assert_eq!(r(&mut e, &["GETBIT", "n", "7"]), int(1));
        assert_eq!(r(&mut e, &["SETBIT", "n", "7", "0"]), int(1));
        assert_eq!(take_muts(&mut e), vec!["SETBIT n 7 0"]);
        assert_eq!(e.ks.expire_at(b"n"), Some(1_800_000_000_000));
        assert_eq!(r(&mut e, &["GET", "n"]), "$2\r\n02\r\n");
        assert_eq!(r(&mut e, &["INCR", "n"]), NOT_INT, "\"02\" is not an integer to Redis either");
    }

    /// Redis 8.2's operations, on the example of Redis's bitmap tutorial (A = 0b11011000,
    /// B = 0b10101001, C = 0b01011010... as bytes) and on strings of unequal length.
    #[test]
    fn bitop_diff_diff1_andor_one() {
        let mut e = Engine::default();
        let a = 0b1101_1000u8;
        let b = 0b1010_1001u8;
        let c = 0b0101_1010u8;
        for (k, v) in [("A", a), ("B", b), ("C", c)] {
            e.ks.put(k.as_bytes(), store::Value::Str(vec![v]), None);
        }
        let get = |e: &mut Engine| e.ks.get(b"R").map(|v| v.to_plain());
        let one = |byte: u8| Some(store::Plain::Str(vec![byte]));
        for (op, want) in [
            ("DIFF", a & !(b | c)),
            ("DIFF1", !a & (b | c)),
            ("ANDOR", a & (b | c)),
            ("ONE", (a ^ b ^ c) & !((a & b) | (a & c) | (b & c))),
            ("one", (a ^ b ^ c) & !((a & b) | (a & c) | (b & c))),
        ] {
            assert_eq!(r(&mut e, &["BITOP", op, "R", "A", "B", "C"]), int(1), "{op}");
            assert_eq!(get(&mut e), one(want), "{op}");
        }
        // Exactly one source: ONE copies it; the three others need two.
        assert_eq!(r(&mut e, &["BITOP", "ONE", "R", "A"]), int(1));
        assert_eq!(get(&mut e), one(a));
        for op in ["DIFF", "diff1", "AndOr"] {
            assert_eq!(
                r(&mut e, &["BITOP", op, "R", "A"]),
                format!("-ERR BITOP {} must be called with at least two source keys.\r\n", op.to_uppercase())
            );
        }
        // Shorter and missing sources are zero bytes.
        e.ks.put(b"L", store::Value::Str(vec![0xff, 0x0f]), None);
        assert_eq!(r(&mut e, &["BITOP", "DIFF1", "R", "A", "L", "nokey"]), int(2));
        assert_eq!(e.ks.get(b"R").map(|v| v.to_plain()), Some(store::Plain::Str(vec![!a, 0x0f])));
        assert_eq!(r(&mut e, &["BITOP", "ONE", "R", "L", "A"]), int(2));
        assert_eq!(e.ks.get(b"R").map(|v| v.to_plain()), Some(store::Plain::Str(vec![!a, 0x0f])));
        // A bit in two sources stays out whatever the third holds.
        assert_eq!(r(&mut e, &["BITOP", "ONE", "R", "L", "L", "A"]), int(2));
        assert_eq!(e.ks.get(b"R").map(|v| v.to_plain()), Some(store::Plain::Str(vec![0, 0])));
    }

    #[test]
    fn bitop_rules() {
        let mut e = Engine::default();
        r(&mut e, &["SET", "n", "12"]);
        take_muts(&mut e);
        assert_eq!(r(&mut e, &["BITOP", "NOT", "dst", "n"]), int(2));
        assert_eq!(take_muts(&mut e), vec!["SET dst \u{fffd}\u{fffd}"]);
        assert_eq!(
            r(&mut e, &["BITOP", "not", "dst", "n", "n"]),
            "-ERR BITOP NOT must be called with a single source key.\r\n"
        );
        assert_eq!(r(&mut e, &["BITOP", "nand", "dst", "n"]), SYNTAX);
        // Missing sources are empty, shorter ones zero-padded.
        r(&mut e, &["SET", "a", "\u{7}"]);
        assert_eq!(r(&mut e, &["BITOP", "OR", "dst", "a", "n", "nokey"]), int(2));
        assert_eq!(r(&mut e, &["GET", "dst"]), "$2\r\n72\r\n");
        assert_eq!(r(&mut e, &["BITOP", "AND", "dst", "a", "n"]), int(2));
        assert_eq!(r(&mut e, &["GET", "dst"]), "$2\r\n\u{1}\0\r\n");
        take_muts(&mut e);
        // The same result again changes nothing.
        assert_eq!(r(&mut e, &["BITOP", "AND", "dst", "a", "n"]), int(2));
        assert_eq!(take_muts(&mut e), Vec::<String>::new());
        // The result replaces the destination whatever its type, and drops its TTL.
        r(&mut e, &["RPUSH", "l", "x"]);
        r(&mut e, &["PEXPIREAT", "l", "1800000000000"]);
        assert_eq!(r(&mut e, &["BITOP", "XOR", "l", "a", "a"]), int(1));
        assert_eq!(e.ks.expire_at(b"l"), None);
        assert_eq!(r(&mut e, &["GET", "l"]), "$1\r\n\0\r\n");
        take_muts(&mut e);
        // All sources empty or missing: the destination is deleted.
        assert_eq!(r(&mut e, &["BITOP", "AND", "dst", "nokey"]), int(0));
        assert_eq!(take_muts(&mut e), vec!["DEL dst"]);
        assert_eq!(r(&mut e, &["BITOP", "NOT", "dst", "nokey"]), int(0));
        assert_eq!(take_muts(&mut e), Vec::<String>::new());
        // A non-string source is WRONGTYPE; the destination's type does not matter.
        r(&mut e, &["RPUSH", "list", "x"]);
        assert_eq!(r(&mut e, &["BITOP", "OR", "dst", "a", "list"]), WRONGTYPE);
        assert_eq!(r(&mut e, &["BITOP", "OR", "list", "a"]), int(1));
    }

    /// BITFIELD edits a byte string in place: a write that changes nothing leaves the string
    /// as it was (no mutation, its encoding not `raw`), one that changes it emits the request
    /// and makes it `raw`; an integer-form string is handled whole; a large string keeps every
    /// byte the request did not write.
    #[test]
    fn bitfield_in_place_keeps_what_it_does_not_change() {
        let mut e = Engine::default();
        r(&mut e, &["SET", "s", "abc"]);
        take_muts(&mut e);
        assert_eq!(w(&mut e, "BITFIELD s SET u8 0 97"), "*1\r\n:97\r\n");
        assert_eq!(take_muts(&mut e), Vec::<String>::new());
        assert_eq!(r(&mut e, &["OBJECT", "ENCODING", "s"]), "$6\r\nembstr\r\n");
        assert_eq!(w(&mut e, "BITFIELD s SET u8 0 98 GET u8 8"), "*2\r\n:97\r\n:98\r\n");
        assert_eq!(take_muts(&mut e), vec!["BITFIELD s SET u8 0 98 GET u8 8"]);
        assert_eq!(r(&mut e, &["OBJECT", "ENCODING", "s"]), "$3\r\nraw\r\n");
        assert_eq!(r(&mut e, &["GET", "s"]), "$3\r\nbbc\r\n");
        // An integer-form string: its decimal text, edited.
        r(&mut e, &["SET", "n", "12"]);
        assert_eq!(w(&mut e, "BITFIELD n INCRBY u8 8 1"), "*1\r\n:51\r\n");
        assert_eq!(r(&mut e, &["GET", "n"]), "$2\r\n13\r\n");
        // A large string: only the written bytes change; growth is zero-filled.
        r(&mut e, &["SETRANGE", "big", "99999", "z"]);
        assert_eq!(w(&mut e, "BITFIELD big INCRBY u8 #50000 7 SET u8 #100001 1"), "*2\r\n:7\r\n:0\r\n");
        assert_eq!(r(&mut e, &["STRLEN", "big"]), ":100002\r\n");
        assert_eq!(r(&mut e, &["GETRANGE", "big", "49999", "50001"]), "$3\r\n\0\x07\0\r\n");
        assert_eq!(r(&mut e, &["GETRANGE", "big", "99999", "-1"]), "$3\r\nz\0\x01\r\n");
    }

    #[test]
    fn bitfield_rules() {
        let mut e = Engine::default();
        r(&mut e, &["SET", "n", "12"]);
        take_muts(&mut e);
        assert_eq!(r(&mut e, &["BITFIELD", "n", "get", "i8", "0", "get", "u4", "#1"]), "*2\r\n:49\r\n:1\r\n");
        assert_eq!(take_muts(&mut e), Vec::<String>::new(), "GETs only: a read");
        assert_eq!(
            r(&mut e, &["BITFIELD_RO", "n", "set", "u8", "0", "1"]),
            "-ERR BITFIELD_RO only supports the GET subcommand\r\n"
        );
        assert_eq!(
            r(&mut e, &["BITFIELD_RO", "n", "get", "u64", "0"]),
            "-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n"
        );
        assert_eq!(r(&mut e, &["BITFIELD", "n"]), "*0\r\n");
        assert_eq!(
            w(&mut e, "BITFIELD n overflow sat incrby u8 0 1000 overflow wrap incrby i8 0 200"),
            "*2\r\n:255\r\n:-57\r\n"
        );
        assert_eq!(
            take_muts(&mut e),
            vec!["BITFIELD n overflow sat incrby u8 0 1000 overflow wrap incrby i8 0 200"]
        );
        assert_eq!(
            r(&mut e, &["BITFIELD", "n", "OVERFLOW", "x"]),
            "-ERR Invalid OVERFLOW type specified\r\n"
        );
        assert_eq!(r(&mut e, &["BITFIELD", "n", "GET", "u8"]), SYNTAX);
        assert_eq!(r(&mut e, &["BITFIELD", "n", "SET", "u8", "0", "x"]), NOT_INT);
        assert_eq!(r(&mut e, &["BITFIELD", "n", "GET", "u8", "#536870912"]), BAD_OFFSET);
        // Redis's SET of a value far below a signed range reports an overflow upwards.
        assert_eq!(
            w(&mut e, "BITFIELD m OVERFLOW SAT SET i5 0 -9223372036854775808 GET i5 0"),
            "*2\r\n:0\r\n:15\r\n"
        );
        // An unsigned SET of a negative value is a huge one: SAT stores the maximum.
        assert_eq!(w(&mut e, "BITFIELD m OVERFLOW SAT SET u4 0 -1 GET u4 0"), "*2\r\n:7\r\n:15\r\n");
        take_muts(&mut e);
        // FAIL writes nothing but Redis still grows the string first.
        assert_eq!(
            r(&mut e, &["BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u2", "20", "9"]),
            "*1\r\n$-1\r\n"
        );
        assert_eq!(take_muts(&mut e), vec!["BITFIELD f OVERFLOW FAIL INCRBY u2 20 9"]);
        assert_eq!(
            r(&mut e, &["BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u2", "20", "9"]),
            "*1\r\n$-1\r\n"
        );
        assert_eq!(take_muts(&mut e), Vec::<String>::new());
        // Writes that end where they started change nothing.
        assert_eq!(w(&mut e, "BITFIELD f SET u8 4 5 SET u8 4 0"), "*2\r\n:0\r\n:5\r\n");
        assert_eq!(take_muts(&mut e), Vec::<String>::new());
        let mut out = Vec::new();
        let args: Vec<&[u8]> = ["BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u2", "20", "9"]
            .iter()
            .map(|a| a.as_bytes())
            .collect();
        e.run_proto(&args, NOW, &mut out, resp::Proto::Resp3);
        assert_eq!(out, b"*1\r\n_\r\n");
    }

    #[test]
    fn wrong_type_and_missing_keys() {
        let mut e = Engine::default();
        r(&mut e, &["RPUSH", "l", "x"]);
        for args in [
            &["SETBIT", "l", "0", "1"][..],
            &["GETBIT", "l", "0"],
            &["BITCOUNT", "l"],
            &["BITPOS", "l", "1"],
            &["BITOP", "AND", "d", "l"],
            &["BITOP", "NOT", "d", "l"],
            &["BITFIELD", "l"],
            &["BITFIELD", "l", "SET", "u8", "0", "1"],
            &["BITFIELD_RO", "l", "GET", "u8", "0"],
        ] {
            assert_eq!(r(&mut e, args), WRONGTYPE, "{args:?}");
        }
        // Argument errors come before the type check where Redis parses first.
        assert_eq!(r(&mut e, &["SETBIT", "l", "x", "1"]), BAD_OFFSET);
        assert_eq!(r(&mut e, &["BITPOS", "l", "x"]), NOT_INT);
        assert_eq!(r(&mut e, &["BITCOUNT", "l", "x"]), SYNTAX);
        assert!(r(&mut e, &["BITFIELD", "l", "GET", "u99", "0"]).starts_with("-ERR Invalid bitfield type"));
        assert_eq!(take_muts(&mut e), vec!["RPUSH l x"]);
        // Missing keys.
        assert_eq!(r(&mut e, &["GETBIT", "no", "5"]), int(0));
        assert_eq!(r(&mut e, &["BITCOUNT", "no"]), int(0));
        assert_eq!(r(&mut e, &["BITFIELD", "no", "GET", "i64", "0"]), "*1\r\n:0\r\n");
        assert_eq!(r(&mut e, &["BITFIELD_RO", "no", "GET", "u1", "4294967295"]), "*1\r\n:0\r\n");
        assert_eq!(take_muts(&mut e), Vec::<String>::new());
        assert_eq!(e.ks.len(), 1, "reads create nothing");
    }
}
