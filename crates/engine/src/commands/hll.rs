//! HyperLogLog: PFADD, PFCOUNT, PFMERGE, on string values byte-compatible with Redis's.
//!
//! Representation (Redis's, so a value moves between goblin-core and Redis with GET/SET and
//! counts the same on both): a 16-byte header `HYLL`, the encoding byte (0 dense, 1 sparse),
//! three unused bytes, and the cached cardinality as 8 little-endian bytes whose top bit set
//! means "stale"; then 16384 registers. Dense: 6 bits per register, least significant bits
//! first (12288 bytes, 12304 in all). Sparse: run-length opcodes `00xxxxxx` (ZERO, 1..64
//! zero registers), `01xxxxxx yyyyyyyy` (XZERO, 1..16384 zero registers), `1vvvvvxx` (VAL,
//! 1..4 registers of value 1..32). An element hashes with MurmurHash64A (seed 0xadc83b19): the
//! low 14 bits pick the register, the run of zero bits above them (plus one) is its candidate
//! value. Sparse updates split and re-merge opcodes exactly as Redis's `hllSparseSet` does, and
//! a sparse value is promoted to dense when an update needs a value above 32 or would grow it
//! past 3000 bytes (Redis's default `hll-sparse-max-bytes`): the same inputs give the same
//! bytes. The estimate is Ertl's improved estimator as Redis 7 computes it, bit for bit.
//!
//! Canonical mutations: every change is written out as `SET key <the whole new value>
//! KEEPTTL` (PFADD that changed a register or created the key, PFMERGE that changed the
//! destination). PFCOUNT on one key whose cached cardinality is stale recomputes it and, as
//! Redis does, stores it in the header: that refresh is a write of the value, so it emits the
//! same `SET .. KEEPTTL` (a replica, or a replay, computes the count without storing it: its
//! upstream's `SET` follows). The store is changed only after the count is known, so nothing
//! can fail between the change and its mutation. PFCOUNT is flagged `MAY_REPLICATE`, so a
//! read-only script refuses it, as Redis does. PFCOUNT of several keys merges them into a
//! scratch register array and writes nothing.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::ctx::Ctx;
use crate::errors;
use resp::reply;
use store::{StrRef, Value, ValueMut, ValueRef};

const G: &str = "hyperloglog";

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec("pfadd", -2, Flags::WRITE | Flags::DENYOOM | Flags::FAST, (1, 1, 1), G, "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.", Handler::Data(pfadd)),
    spec("pfcount", -2, Flags::READONLY | Flags::MAY_REPLICATE, (1, -1, 1), G, "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).", Handler::Data(pfcount)),
    spec("pfmerge", -2, Flags::WRITE | Flags::DENYOOM, (1, -1, 1), G, "Merges one or more HyperLogLog values into a single key.", Handler::Data(pfmerge)),
    spec("pfdebug", 3, Flags::WRITE | Flags::DENYOOM | Flags::ADMIN, (2, 2, 1), G, "Internal commands for debugging HyperLogLog values.", Handler::Data(pfdebug)),
    spec("pfselftest", 1, Flags::ADMIN, (0, 0, 0), G, "An internal command for testing HyperLogLog values.", Handler::Data(pfselftest)),
];

pub const NOT_HLL: &[u8] = b"WRONGTYPE Key is not a valid HyperLogLog string value.";
pub const CORRUPT: &[u8] = b"INVALIDOBJ Corrupted HLL object detected";

const HDR: usize = 16;
const P: u32 = 14;
const Q: usize = 64 - P as usize;
pub const REGISTERS: usize = 1 << P;
const BITS: usize = 6;
const REG_MAX: u32 = (1 << BITS) - 1;
pub const DENSE_SIZE: usize = HDR + (REGISTERS * BITS).div_ceil(8);
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;
/// 0.5 / ln(2).
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

// ---------------------------------------------------------------------------------------------
// Hashing.

/// MurmurHash64A (Austin Appleby's 64-bit hash for 64-bit platforms), little-endian reads.
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element updates and the value it proposes (1 + trailing zero bits of the
/// hash above the index bits, at most Q + 1).
fn pat_len(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ---------------------------------------------------------------------------------------------
// Dense registers (the slice after the header).

fn dense_get(regs: &[u8], i: usize) -> u8 {
    let bit = i * BITS;
    let (byte, fb) = (bit / 8, (bit & 7) as u32);
    let b0 = u32::from(regs[byte]);
    // The register after the last byte reads as zero (Redis reads the string's terminator).
    let b1 = u32::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & REG_MAX) as u8
}

fn dense_put(regs: &mut [u8], i: usize, v: u8) {
    let bit = i * BITS;
    let (byte, fb) = (bit / 8, (bit & 7) as u32);
    let v = u32::from(v);
    regs[byte] &= !((REG_MAX << fb) as u8);
    regs[byte] |= (v << fb) as u8;
    if let Some(next) = regs.get_mut(byte + 1) {
        *next &= !((REG_MAX >> (8 - fb)) as u8);
        *next |= (v >> (8 - fb)) as u8;
    }
}

/// Raises register `i` to `v`; true if it changed.
fn dense_set(regs: &mut [u8], i: usize, v: u8) -> bool {
    if v > dense_get(regs, i) {
        dense_put(regs, i, v);
        true
    } else {
        false
    }
}

// ---------------------------------------------------------------------------------------------
// Sparse opcodes.

enum Op {
    Zero(usize),
    XZero(usize),
    /// (value, run length)
    Val(u8, usize),
}

/// The opcode at `p` and its length in bytes. An XZERO cut off by the end of the string reads
/// its second byte as zero, as Redis does (it reads the terminator).
fn op_at(s: &[u8], p: usize) -> (Op, usize) {
    let b = s[p];
    if b & 0xc0 == 0 {
        (Op::Zero(usize::from(b & 0x3f) + 1), 1)
    } else if b & 0x80 == 0 {
        let lo = s.get(p + 1).copied().unwrap_or(0);
        (Op::XZero(((usize::from(b & 0x3f) << 8) | usize::from(lo)) + 1), 2)
    } else {
        (Op::Val(((b >> 2) & 0x1f) + 1, usize::from(b & 3) + 1), 1)
    }
}

fn val_op(v: u8, len: usize) -> u8 {
    (((v - 1) << 2) | (len as u8 - 1)) | 0x80
}

/// ZERO or XZERO opcode bytes for a run of `len` zero registers.
fn zero_ops(seq: &mut Vec<u8>, len: usize) {
    if len > ZERO_MAX_LEN {
        let l = len - 1;
        seq.push((l >> 8) as u8 | 0x40);
        seq.push((l & 0xff) as u8);
    } else {
        seq.push(len as u8 - 1);
    }
}

/// A new, empty HyperLogLog: sparse, one XZERO opcode per 16384 registers, cached
/// cardinality 0 (valid).
pub fn new_hll() -> Vec<u8> {
    let mut s = vec![0u8; HDR];
    s[..4].copy_from_slice(b"HYLL");
    s[4] = SPARSE;
    let mut left = REGISTERS;
    while left > 0 {
        let n = left.min(XZERO_MAX_LEN);
        zero_ops(&mut s, n);
        left -= n;
    }
    s
}

/// Redis's `isHLLObjectOrReply` test on a string's bytes.
pub fn is_hll(s: &[u8]) -> bool {
    s.len() >= HDR && &s[..4] == b"HYLL" && s[4] <= SPARSE && (s[4] != DENSE || s.len() == DENSE_SIZE)
}

fn invalidate(s: &mut [u8]) {
    s[15] |= 0x80;
}

/// Converts a sparse value to dense in place (the header, cache included, is kept). Err if
/// the opcodes do not cover exactly 16384 registers.
fn sparse_to_dense(s: &mut Vec<u8>) -> Result<(), ()> {
    if s[4] == DENSE {
        return Ok(());
    }
    let mut d = vec![0u8; DENSE_SIZE];
    d[..HDR].copy_from_slice(&s[..HDR]);
    d[4] = DENSE;
    let (mut p, mut idx) = (HDR, 0usize);
    while p < s.len() {
        let (op, n) = op_at(s, p);
        match op {
            Op::Zero(len) | Op::XZero(len) => idx += len,
            Op::Val(v, len) => {
                if idx + len > REGISTERS {
                    return Err(());
                }
                for _ in 0..len {
                    dense_put(&mut d[HDR..], idx, v);
                    idx += 1;
                }
            }
        }
        p += n;
    }
    if idx != REGISTERS {
        return Err(());
    }
    *s = d;
    Ok(())
}

/// Raises register `index` of a sparse value to `count`, as Redis's `hllSparseSet`: Ok(true)
/// if it changed (the cache is then marked stale), Ok(false) if the register was already at
/// least `count`, Err for a corrupt value. May promote the value to dense.
fn sparse_set(s: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, ()> {
    if count > VAL_MAX_VALUE {
        return promote(s, index, count);
    }
    // Find the opcode covering `index`.
    let end = s.len();
    let (mut p, mut first, mut span) = (HDR, 0usize, 0usize);
    let mut prev: Option<usize> = None;
    let mut found: Option<(Op, usize)> = None;
    while p < end {
        let (op, n) = op_at(s, p);
        span = match op {
            Op::Zero(l) | Op::XZero(l) | Op::Val(_, l) => l,
        };
        if index < first + span {
            found = Some((op, n));
            break;
        }
        prev = Some(p);
        p += n;
        first += span;
    }
    let Some((op, oldlen)) = found else { return Err(()) };
    if span == 0 || p + oldlen > end {
        return Err(());
    }
    let last = first + span - 1;
    match op {
        Op::Val(old, _) if old >= count => return Ok(false),
        Op::Val(_, 1) | Op::Zero(1) => {
            s[p] = val_op(count, 1);
        }
        _ => {
            // Split the run into (before, the register, after).
            let mut seq = Vec::with_capacity(5);
            match op {
                Op::Val(cur, _) => {
                    if index != first {
                        seq.push(val_op(cur, index - first));
                    }
                    seq.push(val_op(count, 1));
                    if index != last {
                        seq.push(val_op(cur, last - index));
                    }
                }
                _ => {
                    if index != first {
                        zero_ops(&mut seq, index - first);
                    }
                    seq.push(val_op(count, 1));
                    if index != last {
                        zero_ops(&mut seq, last - index);
                    }
                }
            }
            // `hll-sparse-max-bytes`: a sparse value never grows past it.
            let max = store::limits::get(&store::limits::HLL_SPARSE_MAX_BYTES);
            if seq.len() > oldlen && s.len() + seq.len() - oldlen > max {
                return promote(s, index, count);
            }
            s.splice(p..p + oldlen, seq);
        }
    }
    // Merge adjacent VAL opcodes of equal value, scanning up to five opcodes from the one
    // before the change.
    let mut p = prev.unwrap_or(HDR);
    let mut scan = 5;
    while p < s.len() && scan > 0 {
        scan -= 1;
        let b = s[p];
        if b & 0xc0 == 0x40 {
            p += 2;
            continue;
        }
        if b & 0xc0 == 0 {
            p += 1;
            continue;
        }
        if p + 1 < s.len() && s[p + 1] & 0x80 != 0 {
            let (v1, v2) = (((b >> 2) & 0x1f) + 1, ((s[p + 1] >> 2) & 0x1f) + 1);
            let len = usize::from(b & 3) + 1 + usize::from(s[p + 1] & 3) + 1;
            if v1 == v2 && len <= VAL_MAX_LEN {
                s[p + 1] = val_op(v1, len);
                s.remove(p);
                continue;
            }
        }
        p += 1;
    }
    invalidate(s);
    Ok(true)
}

fn promote(s: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, ()> {
    sparse_to_dense(s)?;
    Ok(dense_set(&mut s[HDR..], index, count))
}

/// Adds one element (Redis's `hllAdd`).
fn add(s: &mut Vec<u8>, ele: &[u8]) -> Result<bool, ()> {
    let (index, count) = pat_len(ele);
    if s[4] == DENSE {
        Ok(dense_set(&mut s[HDR..], index, count))
    } else {
        sparse_set(s, index, count)
    }
}

// ---------------------------------------------------------------------------------------------
// Counting and merging.

/// Register-value histogram of a stored value; Err for a sparse value that does not cover
/// exactly 16384 registers.
fn histogram(s: &[u8]) -> Result<[u32; 64], ()> {
    let mut h = [0u32; 64];
    if s[4] == DENSE {
        let regs = &s[HDR..];
        for i in 0..REGISTERS {
            h[usize::from(dense_get(regs, i))] += 1;
        }
        return Ok(h);
    }
    let (mut p, mut idx) = (HDR, 0usize);
    while p < s.len() {
        let (op, n) = op_at(s, p);
        // Wrapping: only a corrupt value (refused below) can overflow a count.
        match op {
            Op::Zero(len) | Op::XZero(len) => h[0] = h[0].wrapping_add(len as u32),
            Op::Val(v, len) => h[usize::from(v)] = h[usize::from(v)].wrapping_add(len as u32),
        }
        idx += match op {
            Op::Zero(l) | Op::XZero(l) | Op::Val(_, l) => l,
        };
        p += n;
    }
    if idx != REGISTERS {
        return Err(());
    }
    Ok(h)
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// The estimate from a register histogram (Ertl's estimator, as Redis 7 evaluates it).
fn estimate(h: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(h[Q + 1])) / m);
    for j in (1..=Q).rev() {
        z += f64::from(h[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(h[0]) / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// Folds a stored value's registers into `max` (Redis's `hllMerge`).
fn merge_into(max: &mut [u8], s: &[u8]) -> Result<(), ()> {
    if s[4] == DENSE {
        let regs = &s[HDR..];
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(regs, i));
        }
        return Ok(());
    }
    let (mut p, mut i) = (HDR, 0usize);
    while p < s.len() {
        let (op, n) = op_at(s, p);
        match op {
            Op::Zero(len) | Op::XZero(len) => i += len,
            Op::Val(v, len) => {
                // A run past the last register is corruption even when the runs before it
                // covered all of them exactly (Redis 8.2 refuses such a value too).
                if i + len > REGISTERS {
                    return Err(());
                }
                for m in &mut max[i..i + len] {
                    *m = (*m).max(v);
                }
                i += len;
            }
        }
        p += n;
    }
    if i != REGISTERS {
        return Err(());
    }
    Ok(())
}

/// A HyperLogLog that lives for one command's estimate (SUNIONCARD's APPROX): one byte per
/// register, never stored, so it needs neither the packed layout nor the sparse stage. Same
/// hash, registers and estimator as a stored value, so the same 0.81% standard error.
pub(crate) struct Estimator {
    regs: Vec<u8>,
}

impl Estimator {
    pub(crate) fn new() -> Self {
        Estimator { regs: vec![0; REGISTERS] }
    }

    pub(crate) fn add(&mut self, ele: &[u8]) {
        let (index, count) = pat_len(ele);
        if count > self.regs[index] {
            self.regs[index] = count;
        }
    }

    pub(crate) fn count(&self) -> u64 {
        let mut h = [0u32; 64];
        for &r in &self.regs {
            h[usize::from(r)] += 1;
        }
        estimate(&h)
    }
}

/// The estimate of a value (its registers, not its cache); None if corrupt.
pub fn count_of(s: &[u8]) -> Option<u64> {
    histogram(s).ok().map(|h| estimate(&h))
}

// ---------------------------------------------------------------------------------------------
// Commands.

/// Writes `s` as the string at `key` (the deadline kept) and emits `SET key s KEEPTTL`.
fn store_hll(c: &mut Ctx, key: &[u8], s: Vec<u8>) {
    c.emit(&[b"SET", key, &s, b"KEEPTTL"]);
    c.ks.replace_value(key, Value::Str(s));
}

/// PFADD key [element ...]
fn pfadd(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let (mut s, created) = match c.write(key) {
        None => (new_hll(), true),
        Some(ValueMut::Str(StrRef::Bytes(b))) if is_hll(b) && b[4] == DENSE => {
            // A dense value is raised where it lies: read first, written only if a register
            // rises (a saturated counter's PFADD copies nothing, writes nothing).
            let regs = &b[HDR..];
            let Some(first) = args[2..].iter().position(|e| {
                let (i, count) = pat_len(e);
                count > dense_get(regs, i)
            }) else {
                return reply::integer(out, 0);
            };
            // Its record is the request, not the 12 KB value, as Redis replicates it: replayed
            // on the same bytes it raises the same registers, whatever the configuration.
            c.emit_request(b"PFADD", args);
            let edited = c.ks.edit_string(key, DENSE_SIZE, |s| {
                // The elements before `first` raise nothing (registers only rise).
                for e in &args[2 + first..] {
                    let (i, count) = pat_len(e);
                    dense_set(&mut s[HDR..], i, count);
                }
                invalidate(s);
            });
            debug_assert!(edited, "a byte string was just read");
            return reply::integer(out, 1);
        }
        Some(ValueMut::Str(StrRef::Bytes(b))) if is_hll(b) => (b.to_vec(), false),
        Some(ValueMut::Str(_)) => return reply::error(out, NOT_HLL),
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    let mut updated = usize::from(created);
    let mut corrupt = false;
    for e in &args[2..] {
        match add(&mut s, e) {
            Ok(true) => updated += 1,
            Ok(false) => {}
            Err(()) => {
                corrupt = true;
                break;
            }
        }
    }
    // Redis marks the cache stale only when the command completes; a corrupt value keeps the
    // registers it updated before the error.
    if updated > 0 && !corrupt {
        invalidate(&mut s);
    }
    // A sparse (or new) value is written whole: its form depends on `hll-sparse-max-bytes`,
    // which a replica or a replay may not share.
    if updated > 0 {
        store_hll(c, key, s);
    }
    if corrupt {
        return reply::error(out, CORRUPT);
    }
    reply::integer(out, i64::from(updated > 0));
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key: Redis's debugging view of one value. The key
/// is looked up first (a missing one is an error whatever the subcommand). GETREG and TODENSE
/// convert a sparse value to dense, a write (`SET .. KEEPTTL`, as every HLL change).
fn pfdebug(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[2];
    let mut s = match c.write(key) {
        None => return reply::error(out, b"ERR The specified key does not exist"),
        Some(ValueMut::Str(StrRef::Bytes(b))) if is_hll(b) => b.to_vec(),
        Some(ValueMut::Str(_)) => return reply::error(out, NOT_HLL),
        Some(_) => return reply::error(out, errors::WRONGTYPE),
    };
    let sparse = s[4] == SPARSE;
    let densify = |c: &mut Ctx, out: &mut Vec<u8>, mut s: Vec<u8>| -> Option<Vec<u8>> {
        if sparse_to_dense(&mut s).is_err() {
            reply::error(out, CORRUPT);
            return None;
        }
        store_hll(c, key, s.clone());
        Some(s)
    };
    match args[1].to_ascii_lowercase().as_slice() {
        b"getreg" => {
            if sparse {
                let Some(d) = densify(c, out, s) else { return };
                s = d;
            }
            reply::array_len(out, REGISTERS);
            for i in 0..REGISTERS {
                reply::integer(out, i64::from(dense_get(&s[HDR..], i)));
            }
        }
        b"decode" => {
            if !sparse {
                return reply::error(out, b"ERR HLL encoding is not sparse");
            }
            let mut text = String::new();
            let mut p = HDR;
            while p < s.len() {
                let (op, n) = op_at(&s, p);
                let word = match op {
                    Op::Zero(len) => format!("z:{len}"),
                    Op::XZero(len) => format!("Z:{len}"),
                    Op::Val(v, len) => format!("v:{v},{len}"),
                };
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(&word);
                p += n;
            }
            reply::bulk(out, text.as_bytes());
        }
        b"encoding" => reply::simple(out, if sparse { b"sparse" } else { b"dense" }),
        b"todense" => {
            if sparse && densify(c, out, s).is_none() {
                return;
            }
            reply::integer(out, i64::from(sparse));
        }
        _ => {
            let mut msg = b"ERR Unknown PFDEBUG subcommand '".to_vec();
            msg.extend_from_slice(args[1]);
            msg.push(b'\'');
            reply::error(out, &msg);
        }
    }
}

/// PFSELFTEST: checks this implementation on the spot, as Redis's command does its own: every
/// register of a dense value keeps what was written to it (and its neighbours theirs), and
/// counting ten million distinct elements, a sparse and a dense value agree at each power of
/// ten, the sparse one stays sparse while it is small, and the estimate stays within six
/// standard errors. `OK`, or `TESTFAILED` and what failed.
fn pfselftest(_c: &mut Ctx, out: &mut Vec<u8>, _args: &[&[u8]]) {
    match selftest() {
        Ok(()) => reply::ok(out),
        Err(why) => reply::error(out, format!("TESTFAILED {why}").as_bytes()),
    }
}

fn selftest() -> Result<(), String> {
    // xorshift64*: deterministic, so a failure repeats.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..4].copy_from_slice(b"HYLL");
    let mut want = vec![0u8; REGISTERS];
    for _ in 0..5 {
        for (i, w) in want.iter_mut().enumerate() {
            *w = (next() & u64::from(REG_MAX)) as u8;
            dense_put(&mut dense[HDR..], i, *w);
        }
        for (i, &w) in want.iter().enumerate() {
            let got = dense_get(&dense[HDR..], i);
            if got != w {
                return Err(format!("Register {i} should be {w} but is {got}"));
            }
        }
    }
    dense[HDR..].fill(0);
    let mut sparse = new_hll();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let seed = next();
    let sparse_max = store::limits::get(&store::limits::HLL_SPARSE_MAX_BYTES) as u64;
    let mut checkpoint = 1u64;
    for j in 1..=10_000_000u64 {
        let ele = (j ^ seed).to_le_bytes();
        let (i, v) = pat_len(&ele);
        dense_set(&mut dense[HDR..], i, v);
        add(&mut sparse, &ele).map_err(|()| "sparse value corrupt".to_string())?;
        if j != checkpoint {
            continue;
        }
        if j < sparse_max / 2 && sparse[4] != SPARSE {
            return Err("sparse encoding not used".into());
        }
        let (d, sp) = (count_of(&dense), count_of(&sparse));
        if d != sp {
            return Err(format!("dense/sparse disagree at {j}: {d:?} / {sp:?}"));
        }
        let abserr = j.abs_diff(d.unwrap_or(0));
        let maxerr = if j == 10 { 1 } else { (relerr * 6.0 * j as f64).ceil() as u64 };
        if abserr > maxerr {
            return Err(format!("Too big error. card:{j} abserr:{abserr}"));
        }
        checkpoint *= 10;
    }
    Ok(())
}

/// Reads `key` as a HyperLogLog for PFCOUNT/PFMERGE: Ok(None) if missing, Err(reply) if it is
/// not one.
fn read_hll<'c>(c: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c [u8]>, &'static [u8]> {
    match c.read(key) {
        None => Ok(None),
        Some(ValueRef::Str(StrRef::Bytes(b))) if is_hll(b) => Ok(Some(b)),
        Some(ValueRef::Str(_)) => Err(NOT_HLL),
        Some(_) => Err(errors::WRONGTYPE),
    }
}

/// PFCOUNT key [key ...]
fn pfcount(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if args.len() > 2 {
        let mut max = vec![0u8; REGISTERS];
        for key in &args[1..] {
            match read_hll(c, key) {
                Err(e) => return reply::error(out, e),
                Ok(None) => {}
                Ok(Some(s)) => {
                    if merge_into(&mut max, s).is_err() {
                        return reply::error(out, CORRUPT);
                    }
                }
            }
        }
        let mut h = [0u32; 64];
        for &r in &max {
            h[usize::from(r)] += 1;
        }
        return reply::integer(out, estimate(&h) as i64);
    }
    let key = args[1];
    let card = match read_hll(c, key) {
        Err(e) => return reply::error(out, e),
        Ok(None) => return reply::integer(out, 0),
        Ok(Some(s)) if s[15] & 0x80 == 0 => {
            let card = u64::from_le_bytes(s[8..16].try_into().expect("8 bytes"));
            return reply::integer(out, card as i64);
        }
        Ok(Some(s)) => match count_of(s) {
            None => return reply::error(out, CORRUPT),
            Some(card) => card,
        },
    };
    if !c.replica && !c.replaying {
        // The cache is the header's bytes 8..16 (the count, its top bit clear: valid). Only
        // they change, so only they are written, here and in the mutation (`SETRANGE key 8
        // <8 bytes>`, not the whole value), written before it is emitted, as a read's last
        // step (the panic policy in ARCHITECTURE). A HyperLogLog is a byte string, so the
        // edit always happens.
        let cache = card.to_le_bytes();
        if c.ks.edit_string(key, HDR, |b| b[8..16].copy_from_slice(&cache)) {
            c.emit(&[b"SETRANGE", key, b"8", &cache]);
        }
    }
    reply::integer(out, card as i64);
}

/// PFMERGE destkey [sourcekey ...]
fn pfmerge(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let mut max = vec![0u8; REGISTERS];
    let mut use_dense = false;
    // The destination is one of the sources (Redis starts at argv[1]).
    for key in &args[1..] {
        match read_hll(c, key) {
            Err(e) => return reply::error(out, e),
            Ok(None) => {}
            Ok(Some(s)) => {
                use_dense |= s[4] == DENSE;
                if merge_into(&mut max, s).is_err() {
                    return reply::error(out, CORRUPT);
                }
            }
        }
    }
    let dst = args[1];
    let (orig, created) = match c.write(dst) {
        None => (new_hll(), true),
        Some(ValueMut::Str(StrRef::Bytes(b))) if is_hll(b) => (b.to_vec(), false),
        // Checked as a source above.
        Some(_) => return reply::error(out, NOT_HLL),
    };
    let mut s = orig.clone();
    if use_dense && sparse_to_dense(&mut s).is_err() {
        if created {
            store_hll(c, dst, orig);
        }
        return reply::error(out, CORRUPT);
    }
    for (j, &m) in max.iter().enumerate() {
        if m == 0 {
            continue;
        }
        if s[4] == DENSE {
            dense_set(&mut s[HDR..], j, m);
        } else {
            // Redis ignores a failure here (the value was verified as a source).
            let _ = sparse_set(&mut s, j, m);
        }
    }
    invalidate(&mut s);
    if created || s != orig {
        store_hll(c, dst, s);
    }
    reply::ok(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_hll_is_redis_bytes() {
        let s = new_hll();
        assert_eq!(s.len(), 18);
        assert_eq!(&s[..5], b"HYLL\x01");
        assert_eq!(&s[16..], &[0x7f, 0xff]);
        assert_eq!(count_of(&s), Some(0));
    }

    #[test]
    fn sparse_and_dense_agree() {
        let mut s = new_hll();
        for i in 0..5000 {
            add(&mut s, format!("e{i}").as_bytes()).unwrap();
        }
        assert_eq!(s[4], DENSE, "5000 elements exceed the sparse limit");
        let mut t = new_hll();
        for i in 0..100 {
            add(&mut t, format!("e{i}").as_bytes()).unwrap();
        }
        assert_eq!(t[4], SPARSE);
        let sparse_count = count_of(&t).unwrap();
        sparse_to_dense(&mut t).unwrap();
        assert_eq!(count_of(&t).unwrap(), sparse_count);
        assert!((95..=105).contains(&sparse_count), "{sparse_count}");
        let c = count_of(&s).unwrap();
        assert!((4800..=5200).contains(&c), "{c}");
    }

    /// The 16384 register values of a stored value, whatever its encoding.
    fn registers(s: &[u8]) -> Vec<u8> {
        let mut max = vec![0u8; REGISTERS];
        merge_into(&mut max, s).unwrap();
        max
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Whatever the order of additions, and across the sparse -> dense promotion, a value
        /// holds the register maxima of its elements; the union of two values merged register
        /// by register is the value of all their elements; dense and sparse forms count alike.
        #[test]
        fn registers_are_the_maxima_of_the_elements(
            a in proptest::collection::vec(0u32..100_000, 0..1500),
            b in proptest::collection::vec(0u32..100_000, 0..1500),
        ) {
            let build = |es: &mut dyn Iterator<Item = &u32>| {
                let mut s = new_hll();
                for e in es {
                    add(&mut s, format!("x{e}").as_bytes()).unwrap();
                }
                s
            };
            let mut want = vec![0u8; REGISTERS];
            for e in a.iter().chain(&b) {
                let (i, v) = pat_len(format!("x{e}").as_bytes());
                want[i] = want[i].max(v);
            }
            let all = build(&mut a.iter().chain(&b));
            let reversed = build(&mut a.iter().chain(&b).rev());
            proptest::prop_assert_eq!(&registers(&all), &want);
            proptest::prop_assert_eq!(&registers(&reversed), &want);
            let (sa, sb) = (build(&mut a.iter()), build(&mut b.iter()));
            let mut union = registers(&sa);
            merge_into(&mut union, &sb).unwrap();
            proptest::prop_assert_eq!(&union, &want);
            // A sparse value and its dense form count the same.
            let mut dense = sa.clone();
            sparse_to_dense(&mut dense).unwrap();
            proptest::prop_assert_eq!(count_of(&dense), count_of(&sa));
            proptest::prop_assert!(sa.len() <= 3000 || sa[4] == DENSE);
        }
    }

    #[test]
    fn murmur_known_values() {
        // Empty input: only the finalization runs on seed ^ 0.
        let h = murmur64a(b"", 0);
        assert_eq!(h, 0);
        assert_ne!(murmur64a(b"a", 0xadc8_3b19), murmur64a(b"b", 0xadc8_3b19));
    }
}
