//! The proximity graph behind a vector set: an HNSW index (Malkov & Yashunin) over unit vectors,
//! numerically faithful to Redis 8.2's vector sets so that clients see the same numbers.
//!
//! What a client can observe, and therefore what follows Redis bit for bit:
//! - every vector is L2-normalized on insert; the norm is kept (`l2`) to give the vector back;
//!   an all-zero vector is stored as is with `l2 = 1`;
//! - Q8 stores `round(x * 127 / max|x|)` as i8 per component plus `range = max|x|`;
//!   BIN stores one bit per component (`x > 0`), in little-endian u64 words;
//! - the distance is `1 - dot` (F32, Q8) or `2 * differing_bits / dim` (BIN), computed in f32 with
//!   the same operation order as Redis (the order decides the last bits of WITHSCORES);
//! - VSIM's score is `1 - d/2` in f64, VLINKS's is the same rounded to f32.
//!
//! The graph itself follows Redis's construction rules (levels with p = 1/4 capped at 16, M links
//! per upper layer and 2M at layer 0, Redis's neighbour selection with its diversity and
//! "aggressive" fall-backs, true deletion with re-pairing of orphaned neighbours), but levels come
//! from a PRNG owned by the index, so two indexes fed the same operations are identical.
//!
//! Invariants (checked by `decode`, kept by every mutation):
//! - a slot is live iff its `layers` is non-empty; the last slot is always live (trailing dead
//!   slots are dropped), so the free ids are exactly the dead slots;
//! - links are symmetric, unique, never to self, and a link at layer `l` points to a live node
//!   whose level is at least `l`;
//! - per layer `links.len() <= max_links`, with `max_links` between the base (2M at layer 0, M
//!   above) and the growth limit (3M at layer 0, 2M above);
//! - `worst_idx < links.len()` whenever the layer has links (0 otherwise);
//! - `entry` is a live node iff the index is non-empty, and `max_level` is its level.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeSet, BinaryHeap};
use std::sync::Mutex;

pub type NodeId = u32;

/// M used when 0 is asked for (VADD's default).
pub const DEFAULT_M: usize = 16;
/// Largest M Redis accepts.
pub const MAX_M: usize = 4096;
/// VADD's default build exploration factor; also the ef of the repair search after a removal.
pub const DEFAULT_BUILD_EF: usize = 200;
/// VSIM's exploration factor when the client gives none.
pub const DEFAULT_SEARCH_EF: usize = 100;
/// Largest vector dimension Redis accepts.
pub const MAX_DIM: usize = 1 << 16;
/// Highest level a node can get.
const MAX_LEVEL: usize = 16;

/// Vector quantization of an index, fixed at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quant {
    /// VADD NOQUANT: normalized f32 components.
    F32,
    /// VADD Q8 (the default): one signed byte per component plus a per-vector range.
    Q8,
    /// VADD BIN: one sign bit per component.
    Bin,
}

impl Quant {
    /// The name VINFO's quant-type and VEMB RAW's first element use.
    pub fn info_name(self) -> &'static str {
        match self {
            Quant::F32 => "f32",
            Quant::Q8 => "int8",
            Quant::Bin => "bin",
        }
    }

    fn code(self) -> u8 {
        match self {
            Quant::F32 => 0,
            Quant::Q8 => 1,
            Quant::Bin => 2,
        }
    }

    fn from_code(c: u8) -> Option<Quant> {
        match c {
            0 => Some(Quant::F32),
            1 => Some(Quant::Q8),
            2 => Some(Quant::Bin),
            _ => None,
        }
    }
}

/// VEMB RAW's reply: `[kind, data, l2, range?]`.
#[derive(Clone, Debug, PartialEq)]
pub struct RawEmbedding {
    /// Same as `Quant::info_name`: "f32", "int8" or "bin".
    pub kind: &'static str,
    /// The stored vector: normalized f32 (LE), i8 quants, or u64 bit words (LE).
    pub data: Vec<u8>,
    /// Norm before normalization (1 for an all-zero vector).
    pub l2: f32,
    /// Q8 only: the max |component| of the normalized vector (0 for an all-zero vector).
    pub range: Option<f32>,
}

/// A query vector, normalized and quantized like the index's own vectors.
#[derive(Clone, Debug)]
pub struct Query {
    data: Vector,
}

/// The similarity score VSIM reports for a distance: `1 - d/2` in f64 from the f32 distance.
pub fn score_of_distance(d: f32) -> f64 {
    1.0 - f64::from(d) / 2.0
}

/// The score VLINKS reports: Redis computes `1 - d/2` in double and stores it in a float.
pub fn link_score_of_distance(d: f32) -> f64 {
    f64::from((1.0 - f64::from(d) / 2.0) as f32)
}

// ---------------------------------------------------------------------------------------------
// Numerics

/// Squared L2 norm, summed four components at a time into one f32 accumulator, as Redis does
/// (the grouping decides the rounding of the stored norm).
fn l2_squared(x: &[f32]) -> f32 {
    let mut acc = 0f32;
    let mut chunks = x.chunks_exact(4);
    for c in &mut chunks {
        acc += c[0] * c[0] + c[1] * c[1] + c[2] * c[2] + c[3] * c[3];
    }
    for &v in chunks.remainder() {
        acc += v * v;
    }
    acc
}

/// Normalizes in place; returns the norm, or None for an all-zero vector (left untouched).
fn normalize(x: &mut [f32]) -> Option<f32> {
    let sq = l2_squared(x);
    if sq == 0.0 {
        return None;
    }
    let l2 = sq.sqrt();
    for v in x.iter_mut() {
        *v /= l2;
    }
    Some(l2)
}

/// Per-vector symmetric int8 quantization: returns the quants and the range (max |x|).
fn quantize_q8(x: &[f32]) -> (Box<[i8]>, f32) {
    let mut max_abs = 0f32;
    for &v in x {
        // Written as two comparisons so that NaN components never become the range.
        if v > max_abs {
            max_abs = v;
        }
        if -v > max_abs {
            max_abs = -v;
        }
    }
    if max_abs == 0.0 {
        return (vec![0i8; x.len()].into_boxed_slice(), 0.0);
    }
    // A tiny (unnormalizable) vector can make the scale infinite; see `c_round_to_i8`.
    let scale = 127.0f32 / max_abs;
    let q = x.iter().map(|&v| c_round_to_i8((v * scale).round())).collect();
    (q, max_abs)
}

/// The float -> int8 conversion as Redis's x86-64 build performs it: truncation to i32
/// (`cvttss2si`, which yields i32::MIN for NaN and out-of-range values), then the low byte.
/// Rust's saturating `as i8` would turn an infinite product into 127 where Redis stores 0.
fn c_round_to_i8(v: f32) -> i8 {
    let i = if v.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&v) { i32::MIN } else { v as i32 };
    i as i8
}

fn bin_words(dim: usize) -> usize {
    dim.div_ceil(64)
}

/// One bit per component, set when the component is positive; unused high bits stay 0 so that
/// XOR + popcount only counts real components.
fn quantize_bin(x: &[f32]) -> Box<[u64]> {
    let mut w = vec![0u64; bin_words(x.len())];
    for (j, &v) in x.iter().enumerate() {
        if v > 0.0 {
            w[j / 64] |= 1u64 << (j % 64);
        }
    }
    w.into_boxed_slice()
}

/// `1 - dot` with Redis's scalar summation order: blocks of eight split over two accumulators,
/// each block adding four products left to right; the tail goes to the first accumulator.
fn distance_f32(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &y[..n]);
    let mut d0 = 0f32;
    let mut d1 = 0f32;
    let mut xc = x.chunks_exact(8);
    let mut yc = y.chunks_exact(8);
    for (a, b) in (&mut xc).zip(&mut yc) {
        d0 += a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3];
        d1 += a[4] * b[4] + a[5] * b[5] + a[6] * b[6] + a[7] * b[7];
    }
    for (a, b) in xc.remainder().iter().zip(yc.remainder()) {
        d0 += a * b;
    }
    1.0 - (d0 + d1)
}

/// Q8 distance: exact integer dot product, rescaled by both ranges, clamped to [0, 2].
/// A zero vector (range 0) is at distance 1 from everything.
fn distance_q8(x: &[i8], rx: f32, y: &[i8], ry: f32) -> f32 {
    if rx == 0.0 || ry == 0.0 {
        return 1.0;
    }
    let scale = (rx / 127.0) * (ry / 127.0);
    let dot = dot_i8(x, y);
    // A NaN (from a NaN range) stays NaN, like the C comparisons.
    (1.0 - dot as f32 * scale).clamp(0.0, 2.0)
}

/// Exact integer dot product (any summation order gives the same i32). Sixteen independent
/// lanes let the baseline x86-64 target vectorize it about twice as well as a plain fold.
/// At most 65536 * 128 * 128 = 2^30 in magnitude: no overflow.
fn dot_i8(x: &[i8], y: &[i8]) -> i32 {
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &y[..n]);
    let mut lanes = [0i32; 16];
    let mut xc = x.chunks_exact(16);
    let mut yc = y.chunks_exact(16);
    for (a, b) in (&mut xc).zip(&mut yc) {
        for i in 0..16 {
            lanes[i] += i32::from(a[i]) * i32::from(b[i]);
        }
    }
    let mut dot: i32 = lanes.iter().sum();
    for (a, b) in xc.remainder().iter().zip(yc.remainder()) {
        dot += i32::from(*a) * i32::from(*b);
    }
    dot
}

fn distance_bin(x: &[u64], y: &[u64], dim: usize) -> f32 {
    let opposite: u32 = x.iter().zip(y).map(|(a, b)| (a ^ b).count_ones()).sum();
    opposite as f32 * 2.0 / dim as f32
}

/// A stored (or query) vector in the index's representation.
#[derive(Clone, Debug, Default)]
enum Vector {
    /// A dead slot.
    #[default]
    None,
    F32(Box<[f32]>),
    Q8(Box<[i8]>, f32),
    Bin(Box<[u64]>),
}

impl Vector {
    /// Hints the CPU to start loading the first cache lines of the vector.
    #[inline]
    fn prefetch(&self) {
        let (ptr, bytes) = match self {
            Vector::None => return,
            Vector::F32(v) => (v.as_ptr() as *const i8, v.len() * 4),
            Vector::Q8(v, _) => (v.as_ptr(), v.len()),
            Vector::Bin(v) => (v.as_ptr() as *const i8, v.len() * 8),
        };
        #[cfg(target_arch = "x86_64")]
        for off in (0..bytes.min(256)).step_by(64) {
            // SAFETY: a prefetch is only a hint; it never faults and `ptr + off` stays inside
            // the vector's allocation.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(ptr.add(off));
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (ptr, bytes);
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Vector::None => 0,
            Vector::F32(v) => v.len() * 4,
            Vector::Q8(v, _) => v.len(),
            Vector::Bin(v) => v.len() * 8,
        }
    }

    fn raw_bytes(&self) -> Vec<u8> {
        match self {
            Vector::None => Vec::new(),
            Vector::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Vector::Q8(v, _) => v.iter().map(|&x| x as u8).collect(),
            Vector::Bin(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }
}

fn distance(a: &Vector, b: &Vector, dim: usize) -> f32 {
    match (a, b) {
        (Vector::F32(x), Vector::F32(y)) => distance_f32(x, y),
        (Vector::Q8(x, rx), Vector::Q8(y, ry)) => distance_q8(x, *rx, y, *ry),
        (Vector::Bin(x), Vector::Bin(y)) => distance_bin(x, y, dim),
        // Only reachable with a Query built by an index of another quantization: neutral.
        _ => 1.0,
    }
}

/// Normalizes a client vector and converts it to the representation of `quant`.
/// Returns the vector and the norm (None for all zeros).
fn encode_vector(quant: Quant, v: &[f32]) -> (Vector, Option<f32>) {
    let mut x = v.to_vec();
    let l2 = normalize(&mut x);
    let vec = match quant {
        Quant::F32 => Vector::F32(x.into_boxed_slice()),
        Quant::Q8 => {
            let (q, r) = quantize_q8(&x);
            Vector::Q8(q, r)
        }
        Quant::Bin => Vector::Bin(quantize_bin(&x)),
    };
    (vec, l2)
}

// ---------------------------------------------------------------------------------------------
// Projection

/// VADD REDUCE's projection. Redis builds a deterministic Hadamard-pattern matrix
/// (`m[i][j] = ±1/sqrt(input_dim)`, minus when popcount(i & j) is odd), so replicas agree
/// without sharing a seed; the seed is accepted for API stability and ignored.
/// The matrix is kept explicitly because snapshots carry it (a future scheme may differ).
#[derive(Clone, Debug, PartialEq)]
pub struct Projection {
    input_dim: usize,
    output_dim: usize,
    /// Row-major, `output_dim` rows of `input_dim`.
    matrix: Vec<f32>,
}

impl Projection {
    /// The matrix, row-major: `output_dim` rows of `input_dim` (an RDB file from Redis carries
    /// its own, checked against this one on import).
    pub fn matrix(&self) -> &[f32] {
        &self.matrix
    }

    pub fn new(input_dim: usize, output_dim: usize, seed: u64) -> Projection {
        let _ = seed;
        // 1/sqrt in double, stored as float: Redis's `1.0f / sqrt(n)`.
        let scale = (1.0f64 / (input_dim as f64).sqrt()) as f32;
        let mut matrix = Vec::with_capacity(input_dim * output_dim);
        for i in 0..output_dim {
            for j in 0..input_dim {
                let odd = (i & j).count_ones() % 2 == 1;
                matrix.push(if odd { -scale } else { scale });
            }
        }
        Projection { input_dim, output_dim, matrix }
    }

    pub fn input_dim(&self) -> usize {
        self.input_dim
    }

    pub fn output_dim(&self) -> usize {
        self.output_dim
    }

    /// `v` must have `input_dim` components; each output is a left-to-right f32 dot product.
    pub fn apply(&self, v: &[f32]) -> Vec<f32> {
        assert_eq!(v.len(), self.input_dim, "projection input dimension");
        if self.input_dim == 0 {
            return vec![0.0; self.output_dim];
        }
        self.matrix
            .chunks_exact(self.input_dim)
            .map(|row| {
                let mut sum = 0f32;
                for (a, b) in row.iter().zip(v) {
                    sum += a * b;
                }
                sum
            })
            .collect()
    }

    /// `u32 input_dim, u32 output_dim, f32 × input*output`, little endian.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.input_dim as u32).to_le_bytes());
        out.extend_from_slice(&(self.output_dim as u32).to_le_bytes());
        for x in &self.matrix {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }

    pub fn decode(b: &[u8]) -> Result<Projection, &'static str> {
        let mut r = Reader::new(b);
        let input_dim = r.u32()? as usize;
        let output_dim = r.u32()? as usize;
        if input_dim == 0 || input_dim > MAX_DIM || output_dim == 0 || output_dim > input_dim {
            return Err("invalid projection dimensions");
        }
        let n = input_dim * output_dim;
        if r.remaining() != n * 4 {
            return Err("projection matrix length mismatch");
        }
        let mut matrix = Vec::with_capacity(n);
        for _ in 0..n {
            matrix.push(r.f32()?);
        }
        Ok(Projection { input_dim, output_dim, matrix })
    }

    pub fn heap_bytes(&self) -> usize {
        self.matrix.capacity() * 4
    }
}

/// One layer of an [`ExportedNode`].
#[derive(Clone, Debug, PartialEq)]
pub struct ExportedLayer {
    pub links: Vec<NodeId>,
    pub max_links: u32,
    pub worst_dist: f32,
    pub worst_idx: u32,
}

/// A node in the terms of redis-server's RDB form (see [`Hnsw::export_node`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ExportedNode {
    pub level: usize,
    pub layers: Vec<ExportedLayer>,
    /// The stored vector's bytes (as VEMB RAW gives them).
    pub stored: Vec<u8>,
    pub l2: f32,
    /// The Q8 range; 0 for the other quantizations.
    pub range: f32,
}

// ---------------------------------------------------------------------------------------------
// Graph

#[derive(Clone, Debug)]
struct Layer {
    links: Vec<NodeId>,
    max_links: u32,
    /// Distance to the farthest neighbour and its position in `links` (see the invariants).
    worst_dist: f32,
    worst_idx: u32,
}

impl Layer {
    fn new(max_links: usize) -> Layer {
        Layer { links: Vec::new(), max_links: max_links as u32, worst_dist: 0.0, worst_idx: 0 }
    }

    fn full(&self) -> bool {
        self.links.len() >= self.max_links as usize
    }
}

#[derive(Clone, Debug, Default)]
struct Node {
    /// Index = layer; empty iff the slot is dead.
    layers: Vec<Layer>,
    vec: Vector,
    /// Norm before normalization; 1 for an all-zero vector.
    l2: f32,
}

/// A candidate during search: ordered by distance, then id, so that ties are deterministic.
#[derive(Clone, Copy, Debug)]
struct Cand {
    d: f32,
    id: NodeId,
}

impl PartialEq for Cand {
    fn eq(&self, o: &Cand) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Cand {}
impl PartialOrd for Cand {
    fn partial_cmp(&self, o: &Cand) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Cand {
    fn cmp(&self, o: &Cand) -> Ordering {
        self.d.total_cmp(&o.d).then(self.id.cmp(&o.id))
    }
}

/// Per-search working memory, reused across searches: `visited[id] == epoch` marks a node seen
/// by the current search, so nothing has to be cleared between searches.
#[derive(Clone, Debug, Default)]
struct Scratch {
    visited: Vec<u32>,
    epoch: u32,
    /// Unvisited neighbours of the node being expanded.
    batch: Vec<NodeId>,
}

/// Holds the reusable scratch. A Mutex rather than a RefCell keeps `Hnsw` Sync (the keyspace
/// requires it); searches only `try_lock`, so contention or re-entrance costs an allocation,
/// never a wait or a panic. Cloning gives a fresh, empty scratch.
#[derive(Debug, Default)]
struct ScratchCell(Mutex<Scratch>);

impl Clone for ScratchCell {
    fn clone(&self) -> ScratchCell {
        ScratchCell::default()
    }
}

impl Scratch {
    fn begin(&mut self, slots: usize) {
        if self.visited.len() < slots {
            self.visited.resize(slots, 0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.visited.fill(0);
            self.epoch = 1;
        }
    }

    /// Marks `id`; returns false if it was already marked in this search.
    fn visit(&mut self, id: NodeId) -> bool {
        let s = &mut self.visited[id as usize];
        if *s == self.epoch {
            false
        } else {
            *s = self.epoch;
            true
        }
    }
}

#[derive(Clone, Debug)]
pub struct Hnsw {
    dim: usize,
    quant: Quant,
    m: usize,
    nodes: Vec<Node>,
    /// Dead slots below `nodes.len()`; the lowest is reused first.
    free: BTreeSet<NodeId>,
    len: usize,
    entry: Option<NodeId>,
    max_level: usize,
    /// Nodes ever created (VINFO hnsw-max-node-uid).
    uid: u64,
    /// SplitMix64 state for node levels.
    rng: u64,
    /// Not part of the index's value: search bookkeeping only.
    scratch: ScratchCell,
}

impl Hnsw {
    /// `m` 0 means the default 16; larger than 4096 is capped, as Redis does.
    pub fn new(dim: usize, quant: Quant, m: usize, seed: u64) -> Hnsw {
        assert!((1..=MAX_DIM).contains(&dim), "vector dimension out of range");
        let m = match m {
            0 => DEFAULT_M,
            m => m.min(MAX_M),
        };
        Hnsw {
            dim,
            quant,
            m,
            nodes: Vec::new(),
            free: BTreeSet::new(),
            len: 0,
            entry: None,
            max_level: 0,
            uid: 0,
            rng: seed,
            scratch: ScratchCell::default(),
        }
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn quant(&self) -> Quant {
        self.quant
    }

    pub fn m(&self) -> usize {
        self.m
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entry point's level (0 for an empty index or a single level-0 node).
    pub fn max_level(&self) -> usize {
        self.max_level
    }

    /// Nodes ever created, removed ones included (Redis's last node id).
    pub fn max_node_uid(&self) -> u64 {
        self.uid
    }

    pub fn contains(&self, id: NodeId) -> bool {
        self.nodes.get(id as usize).is_some_and(|n| !n.layers.is_empty())
    }

    fn node(&self, id: NodeId) -> &Node {
        match self.nodes.get(id as usize) {
            Some(n) if !n.layers.is_empty() => n,
            _ => panic!("hnsw: node {id} is not live"),
        }
    }

    fn links_len(&self, id: NodeId, layer: usize) -> usize {
        self.nodes[id as usize].layers[layer].links.len()
    }

    fn nd(&self, a: NodeId, b: NodeId) -> f32 {
        distance(&self.nodes[a as usize].vec, &self.nodes[b as usize].vec, self.dim)
    }

    fn next_u64(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Geometric with p = 1/4 per extra level (two top bits zero), capped at 16, as Redis.
    fn random_level(&mut self) -> usize {
        let mut level = 0;
        while level < MAX_LEVEL && self.next_u64() >> 62 == 0 {
            level += 1;
        }
        level
    }

    /// Inserts `v` (len == dim, any magnitude) with build exploration factor `ef` (0 = 200).
    /// Returns the id: the lowest free id, or a new one.
    pub fn insert(&mut self, v: &[f32], ef: usize) -> NodeId {
        assert_eq!(v.len(), self.dim, "vector dimension");
        let (vec, l2) = encode_vector(self.quant, v);
        self.insert_vector(vec, l2, ef)
    }

    /// Inserts a vector given in its stored form (VEMB RAW's bytes, norm and Q8 range: what
    /// redis-server's RDB form of a vector set keeps per element), kept bit for bit, so that
    /// VEMB and every score equal the origin's. Err when the bytes do not fit this index's
    /// quantization and dimension, or a number is not finite.
    pub fn insert_stored(
        &mut self,
        stored: &[u8],
        l2: f32,
        range: f32,
        ef: usize,
    ) -> Result<NodeId, &'static str> {
        if !l2.is_finite() {
            return Err("a stored vector's norm is not finite");
        }
        let vec = match self.quant {
            Quant::F32 if stored.len() == self.dim * 4 => {
                let x: Box<[f32]> =
                    stored.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
                if x.iter().any(|c| !c.is_finite()) {
                    return Err("a stored component is not finite");
                }
                Vector::F32(x)
            }
            Quant::Q8 if stored.len() == self.dim => {
                if !range.is_finite() {
                    return Err("a stored vector's range is not finite");
                }
                Vector::Q8(stored.iter().map(|&b| b as i8).collect(), range)
            }
            Quant::Bin if stored.len() == self.dim.div_ceil(64) * 8 => Vector::Bin(
                stored.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap())).collect(),
            ),
            _ => return Err("a stored vector's size does not fit the set"),
        };
        Ok(self.insert_vector(vec, Some(l2), ef))
    }

    fn insert_vector(&mut self, vec: Vector, l2: Option<f32>, ef: usize) -> NodeId {
        let ef = if ef == 0 { DEFAULT_BUILD_EF } else { ef };
        let level = self.random_level();
        let m = self.m;
        let node = Node {
            layers: (0..=level).map(|l| Layer::new(if l == 0 { 2 * m } else { m })).collect(),
            vec,
            l2: l2.unwrap_or(1.0),
        };
        let id = match self.free.pop_first() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as NodeId
            }
        };
        self.len += 1;
        self.uid += 1;

        let Some(mut ep) = self.entry else {
            self.entry = Some(id);
            self.max_level = level;
            return id;
        };

        // The new node has no links yet and nobody links to it, so searching the graph with its
        // own vector as the query never meets it.
        let top = level.min(self.max_level);
        let mut per_layer: Vec<Vec<Cand>> = vec![Vec::new(); top + 1];
        {
            let q = &self.nodes[id as usize].vec;
            for lc in (level + 1..=self.max_level).rev() {
                if let Some(c) = self.search_layer(q, ep, 1, lc, None, 0).first() {
                    ep = c.id;
                }
            }
            for lc in (0..=top).rev() {
                let found = self.search_layer(q, ep, ef, lc, None, 0);
                if let Some(c) = found.first() {
                    ep = c.id;
                }
                per_layer[lc] = found;
            }
        }
        for lc in (0..=top).rev() {
            let cands = &per_layer[lc];
            self.select_neighbors(cands, id, lc, m, 0);
            // Layer 0 must not leave the node nearly isolated: relax the rules step by step.
            if lc == 0 && self.links_len(id, 0) < m / 2 {
                self.select_neighbors(cands, id, 0, m, 1);
                if self.links_len(id, 0) < m / 4 {
                    self.select_neighbors(cands, id, 0, m / 4, 2);
                }
            }
        }
        if level > self.max_level {
            self.entry = Some(id);
            self.max_level = level;
        }
        id
    }

    /// Best-first search of one layer from `ep`, keeping the `ef` nearest (accepted) nodes.
    /// Returns them nearest first.
    ///
    /// With `accept`, refused nodes are still expanded (they are how the graph is crossed) but not
    /// returned; while fewer than `ef` accepted nodes are known every reached node is expanded, so
    /// a rare filter explores everything reachable unless `max_cand` (nodes expanded, the entry
    /// counting as one; 0 = no bound) stops it. (Redis admits a filtered neighbour only while its
    /// candidate queue, capped at 256, is shorter than ef; that can end a search with fewer than
    /// ef matches although more are reachable, which is why this rule differs.)
    fn search_layer(
        &self,
        q: &Vector,
        ep: NodeId,
        ef: usize,
        layer: usize,
        mut accept: Option<&mut dyn FnMut(NodeId) -> bool>,
        max_cand: usize,
    ) -> Vec<Cand> {
        let ef = ef.max(1);
        // A re-entrant call (from inside `accept`) gets its own scratch instead of a panic.
        let mut own;
        let mut guard;
        let scratch: &mut Scratch = match self.scratch.0.try_lock() {
            Ok(g) => {
                guard = g;
                &mut guard
            }
            Err(_) => {
                own = Scratch::default();
                &mut own
            }
        };
        scratch.begin(self.nodes.len());

        let mut cands: BinaryHeap<Reverse<Cand>> = BinaryHeap::new();
        let mut res: BinaryHeap<Cand> = BinaryHeap::new();
        let filtering = accept.is_some();
        let first = Cand { d: distance(q, &self.nodes[ep as usize].vec, self.dim), id: ep };
        scratch.visit(ep);
        cands.push(Reverse(first));
        if accept.as_mut().is_none_or(|f| f(ep)) {
            res.push(first);
        }
        let mut expanded = 1usize;
        while let Some(Reverse(cur)) = cands.pop() {
            if filtering && max_cand != 0 && expanded >= max_cand {
                break;
            }
            expanded += 1;
            let furthest = res.peek().map_or(f32::INFINITY, |c| c.d);
            if res.len() >= ef && cur.d > furthest {
                break;
            }
            let Some(l) = self.nodes[cur.id as usize].layers.get(layer) else { continue };
            // Gather the unvisited neighbours and prefetch their vectors before measuring any:
            // the misses then overlap instead of stalling one distance at a time.
            let mut batch = std::mem::take(&mut scratch.batch);
            batch.clear();
            batch.extend(l.links.iter().copied().filter(|&nb| scratch.visit(nb)));
            for &nb in &batch {
                self.nodes[nb as usize].vec.prefetch();
            }
            for &nb in &batch {
                let c = Cand { d: distance(q, &self.nodes[nb as usize].vec, self.dim), id: nb };
                let furthest = res.peek().map_or(f32::INFINITY, |c| c.d);
                if !(c.d < furthest || res.len() < ef) {
                    continue;
                }
                cands.push(Reverse(c));
                if accept.as_mut().is_none_or(|f| f(c.id)) {
                    res.push(c);
                    if res.len() > ef {
                        res.pop();
                    }
                }
            }
            scratch.batch = batch;
        }
        res.into_sorted_vec()
    }

    fn on_link_added(&mut self, id: NodeId, layer: usize, idx: usize, d: f32) {
        let l = &mut self.nodes[id as usize].layers[layer];
        if l.links.len() == 1 || d > l.worst_dist {
            l.worst_dist = d;
            l.worst_idx = idx as u32;
        }
    }

    fn rescan_worst(&mut self, id: NodeId, layer: usize) {
        let mut worst = 0f32;
        let mut worst_idx = 0u32;
        for (i, &nb) in self.nodes[id as usize].layers[layer].links.iter().enumerate() {
            let d = self.nd(id, nb);
            if d > worst {
                worst = d;
                worst_idx = i as u32;
            }
        }
        let l = &mut self.nodes[id as usize].layers[layer];
        l.worst_dist = worst;
        l.worst_idx = worst_idx;
    }

    fn push_link(&mut self, from: NodeId, to: NodeId, layer: usize, d: f32) {
        let l = &mut self.nodes[from as usize].layers[layer];
        l.links.push(to);
        let idx = l.links.len() - 1;
        self.on_link_added(from, layer, idx, d);
    }

    fn link_pair(&mut self, a: NodeId, b: NodeId, layer: usize, d: f32) {
        self.push_link(a, b, layer, d);
        self.push_link(b, a, layer, d);
    }

    /// Drops `to` from `from`'s links at `layer` (one direction only), keeping worst info right.
    fn unlink_one(&mut self, from: NodeId, to: NodeId, layer: usize) {
        let l = &mut self.nodes[from as usize].layers[layer];
        let Some(pos) = l.links.iter().position(|&x| x == to) else { return };
        l.links.remove(pos);
        let pos = pos as u32;
        if l.links.is_empty() {
            l.worst_dist = 0.0;
            l.worst_idx = 0;
        } else if pos == l.worst_idx {
            self.rescan_worst(from, layer);
        } else if pos < l.worst_idx {
            l.worst_idx -= 1;
        }
    }

    /// Links `new` to candidates (nearest first) at `layer` until it has `required` links or is
    /// full. Links are always bidirectional, so a full candidate must give up a link.
    /// `aggressive` 0: diversity rule (skip a candidate nearer to an accepted neighbour than to
    /// `new`), and replace a full candidate's worst link only if `new` is nearer and the dropped
    /// node keeps more than M/2 links. 1: no diversity rule, the dropped node may keep down to
    /// M/4+1. 2: additionally drop another, better connected link of the candidate, or as a last
    /// resort grow the candidate's capacity (up to 3M at layer 0, 2M above).
    fn select_neighbors(
        &mut self,
        cands: &[Cand],
        new: NodeId,
        layer: usize,
        required: usize,
        aggressive: u8,
    ) {
        let m = self.m;
        for c in cands {
            let (nb, dist) = (c.id, c.d);
            if nb == new || !self.contains(nb) || self.nodes[nb as usize].layers.len() <= layer {
                continue;
            }
            let new_layer = &self.nodes[new as usize].layers[layer];
            if new_layer.full() || new_layer.links.len() >= required {
                return;
            }
            if aggressive > 0 && new_layer.links.contains(&nb) {
                continue;
            }
            if aggressive == 0 && new_layer.links.iter().any(|&l| self.nd(nb, l) < dist) {
                continue;
            }
            let nb_layer = &self.nodes[nb as usize].layers[layer];
            if !nb_layer.full() {
                self.link_pair(nb, new, layer, dist);
                continue;
            }
            if aggressive == 0 && dist >= nb_layer.worst_dist {
                continue;
            }
            let mut worst = nb_layer.links[nb_layer.worst_idx as usize];
            let worst_links = self.links_len(worst, layer);
            if (aggressive == 0 && worst_links <= m / 2) || (aggressive == 1 && worst_links <= m / 4) {
                continue;
            }
            if aggressive == 2 && worst_links <= m / 4 {
                // Drop instead the farthest neighbour that stays connected enough.
                let mut best: Option<(usize, NodeId, f32)> = None;
                for (j, &cand) in self.nodes[nb as usize].layers[layer].links.iter().enumerate() {
                    if self.links_len(cand, layer) <= m / 4 {
                        continue;
                    }
                    let d = self.nd(nb, cand);
                    if best.is_none_or(|(_, _, bd)| d > bd) {
                        best = Some((j, cand, d));
                    }
                }
                match best {
                    Some((j, node, d)) => {
                        let l = &mut self.nodes[nb as usize].layers[layer];
                        l.worst_dist = d;
                        l.worst_idx = j as u32;
                        worst = node;
                    }
                    None => {
                        let limit = if layer == 0 { 3 * m } else { 2 * m };
                        let l = &mut self.nodes[nb as usize].layers[layer];
                        if l.max_links as usize >= limit {
                            continue;
                        }
                        l.max_links += 1;
                        self.link_pair(nb, new, layer, dist);
                        continue;
                    }
                }
            }
            // Replace nb's link to `worst` by a link to `new`.
            self.unlink_one(worst, nb, layer);
            let l = &mut self.nodes[nb as usize].layers[layer];
            let wi = l.worst_idx as usize;
            l.links[wi] = new;
            self.rescan_worst(nb, layer);
            self.push_link(new, nb, layer, dist);
        }
    }

    /// Removes a node: unlinks it everywhere, moves the entry point if needed, then re-pairs the
    /// neighbours that lost a link (per layer). Unknown ids are ignored.
    pub fn remove(&mut self, id: NodeId) {
        if !self.contains(id) {
            return;
        }
        let old = std::mem::take(&mut self.nodes[id as usize].layers);
        for (l, layer) in old.iter().enumerate() {
            for &nb in &layer.links {
                self.unlink_one(nb, id, l);
            }
        }
        self.len -= 1;
        if self.entry == Some(id) {
            // Prefer a neighbour at the highest layer that has one; else the highest live node.
            self.entry = old.iter().rev().find_map(|l| l.links.first().copied());
            if self.entry.is_none() {
                let mut best: Option<(usize, NodeId)> = None;
                for (i, n) in self.nodes.iter().enumerate() {
                    if !n.layers.is_empty() && best.is_none_or(|(lv, _)| n.layers.len() - 1 > lv) {
                        best = Some((n.layers.len() - 1, i as NodeId));
                    }
                }
                self.entry = best.map(|(_, i)| i);
            }
            self.max_level = self.entry.map_or(0, |e| self.nodes[e as usize].layers.len() - 1);
        }
        for (l, layer) in old.iter().enumerate() {
            self.reconnect(&layer.links, l);
        }
        // Release the slot: vector memory is freed now, trailing dead slots are dropped.
        self.nodes[id as usize] = Node::default();
        self.free.insert(id);
        while self.nodes.last().is_some_and(|n| n.layers.is_empty()) {
            self.nodes.pop();
            self.free.remove(&(self.nodes.len() as NodeId));
        }
        if self.nodes.capacity() > 64 && self.nodes.capacity() / 4 > self.nodes.len() {
            self.nodes.shrink_to(self.nodes.len() * 2);
        }
    }

    /// Re-links the former neighbours of a removed node at `layer`. Pairs them among themselves
    /// greedily by a score that rewards a close pair (weight 0.7 on `2 - d`) and the loss of only
    /// poor alternatives (weight 0.3 on the mean distance to the others); whoever stays unpaired
    /// gets one more link from the other orphans or, failing that, from a graph search.
    fn reconnect(&mut self, orphans: &[NodeId], layer: usize) {
        let n = orphans.len();
        if n == 0 {
            return;
        }
        let mut dist = vec![0f32; n * n];
        for i in 0..n {
            for j in i + 1..n {
                let d = self.nd(orphans[i], orphans[j]);
                dist[i * n + j] = d;
                dist[j * n + i] = d;
            }
        }
        let row_avg: Vec<f32> = (0..n)
            .map(|i| {
                let mut sum = 0f32;
                for j in (0..n).filter(|&j| j != i) {
                    sum += dist[i * n + j];
                }
                if n > 1 {
                    sum / (n - 1) as f32
                } else {
                    0.0
                }
            })
            .collect();
        const W_PAIR: f32 = 0.7;
        const W_REST: f32 = 0.3;
        let mut score = vec![-1f32; n * n];
        for i in 0..n {
            for j in (0..n).filter(|&j| j != i) {
                if self.nodes[orphans[i] as usize].layers[layer].links.contains(&orphans[j]) {
                    continue;
                }
                let d = dist[i * n + j];
                let (ai, aj) = if n > 2 {
                    (
                        (row_avg[i] * (n - 1) as f32 - d) / (n - 2) as f32,
                        (row_avg[j] * (n - 1) as f32 - d) / (n - 2) as f32,
                    )
                } else {
                    (0.0, 0.0)
                };
                score[i * n + j] = W_PAIR * (2.0 - d) + W_REST * ((ai + aj) / 2.0);
            }
        }
        let full = |h: &Hnsw, i: usize| h.nodes[orphans[i] as usize].layers[layer].full();
        let mut used = vec![false; n];
        loop {
            let mut best_score = -1f32;
            let mut best = None;
            for i in 0..n {
                if used[i] || full(self, i) {
                    continue;
                }
                for j in 0..n {
                    if i == j || used[j] {
                        continue;
                    }
                    let s = score[i * n + j];
                    if s < 0.0 {
                        continue;
                    }
                    if s > best_score && !full(self, j) {
                        best_score = s;
                        best = Some((i, j));
                    }
                }
            }
            let Some((i, j)) = best else { break };
            self.link_pair(orphans[i], orphans[j], layer, dist[i * n + j]);
            used[i] = true;
            used[j] = true;
        }
        for i in 0..n {
            if used[i] || full(self, i) {
                continue;
            }
            let a = orphans[i];
            let mut local: Vec<Cand> = (0..n)
                .filter(|&j| j != i && !full(self, j))
                .map(|j| Cand { d: dist[i * n + j], id: orphans[j] })
                .collect();
            local.sort();
            let wanted = self.links_len(a, layer) + 1;
            if !local.is_empty() {
                self.select_neighbors(&local, a, layer, wanted, 1);
            }
            if self.links_len(a, layer) == wanted {
                continue;
            }
            let Some(mut ep) = self.entry else { continue };
            let found = {
                let q = &self.nodes[a as usize].vec;
                for lc in (layer + 1..=self.max_level).rev() {
                    if let Some(c) = self.search_layer(q, ep, 1, lc, None, 0).first() {
                        ep = c.id;
                    }
                }
                if self.nodes[ep as usize].layers.len() <= layer {
                    continue;
                }
                self.search_layer(q, ep, DEFAULT_BUILD_EF, layer, None, 0)
            };
            let aggressive = if self.links_len(a, layer) > self.m / 2 { 1 } else { 2 };
            self.select_neighbors(&found, a, layer, wanted, aggressive);
        }
    }

    /// A client vector (len == dim) as a query: normalized, then quantized like the index.
    pub fn query(&self, v: &[f32]) -> Query {
        assert_eq!(v.len(), self.dim, "vector dimension");
        Query { data: encode_vector(self.quant, v).0 }
    }

    /// VSIM ELE: Redis queries with the node's de-quantized, de-normalized vector, which is then
    /// normalized and quantized again like any client vector.
    pub fn node_query(&self, id: NodeId) -> Query {
        self.query(&self.embedding(id))
    }

    /// Up to `k` nodes nearest to `q`, best first, with VSIM's score (`1 - d/2`).
    /// `ef` 0 means VSIM's default 100; the layer-0 search keeps max(ef, k) candidates, as VSIM
    /// does. See [`Hnsw::search_distances`].
    pub fn search(
        &self,
        q: &Query,
        k: usize,
        ef: usize,
        accept: Option<&mut dyn FnMut(NodeId) -> bool>,
        filter_ef: usize,
    ) -> Vec<(NodeId, f64)> {
        self.search_distances(q, k, ef, accept, filter_ef)
            .into_iter()
            .map(|(id, d)| (id, score_of_distance(d)))
            .collect()
    }

    /// As [`Hnsw::search`] but with Redis's raw f32 distance (`score = 1 - d/2`), which VSIM's
    /// EPSILON compares: Redis stops at the first result with `d / 2.0f32 > epsilon as f32`.
    /// With `accept`, refused nodes are traversed but not returned, and at most `filter_ef`
    /// nodes are expanded (0 = unbounded; VSIM's default is COUNT * 100).
    pub fn search_distances(
        &self,
        q: &Query,
        k: usize,
        ef: usize,
        accept: Option<&mut dyn FnMut(NodeId) -> bool>,
        filter_ef: usize,
    ) -> Vec<(NodeId, f32)> {
        let Some(mut ep) = self.entry else { return Vec::new() };
        if k == 0 {
            return Vec::new();
        }
        let ef = if ef == 0 { DEFAULT_SEARCH_EF } else { ef };
        let ef = ef.max(k).min(self.len);
        for lc in (1..=self.max_level).rev() {
            if let Some(c) = self.search_layer(&q.data, ep, 1, lc, None, 0).first() {
                ep = c.id;
            }
        }
        let found = self.search_layer(&q.data, ep, ef, 0, accept, filter_ef);
        found.into_iter().take(k).map(|c| (c.id, c.d)).collect()
    }

    /// Linear scan (VSIM TRUTH): the exact `k` nearest accepted nodes, same scores and tie order
    /// (distance, then id) as `search`.
    pub fn search_exact(
        &self,
        q: &Query,
        k: usize,
        accept: Option<&mut dyn FnMut(NodeId) -> bool>,
    ) -> Vec<(NodeId, f64)> {
        self.search_exact_distances(q, k, accept)
            .into_iter()
            .map(|(id, d)| (id, score_of_distance(d)))
            .collect()
    }

    /// As [`Hnsw::search_exact`] with raw distances.
    pub fn search_exact_distances(
        &self,
        q: &Query,
        k: usize,
        mut accept: Option<&mut dyn FnMut(NodeId) -> bool>,
    ) -> Vec<(NodeId, f32)> {
        if k == 0 {
            return Vec::new();
        }
        let mut res: BinaryHeap<Cand> = BinaryHeap::new();
        for id in self.nodes() {
            if let Some(f) = accept.as_mut() {
                if !f(id) {
                    continue;
                }
            }
            let c = Cand { d: distance(&q.data, &self.nodes[id as usize].vec, self.dim), id };
            if res.len() < k {
                res.push(c);
            } else if res.peek().is_some_and(|w| c < *w) {
                res.pop();
                res.push(c);
            }
        }
        res.into_sorted_vec().into_iter().map(|c| (c.id, c.d)).collect()
    }

    /// VEMB: the vector as Redis gives it back: de-quantized (`q * range / 127`) and multiplied
    /// by the norm, in f32; BIN gives ±1 without the norm.
    pub fn embedding(&self, id: NodeId) -> Vec<f32> {
        let n = self.node(id);
        match &n.vec {
            Vector::F32(v) => v.iter().map(|&x| x * n.l2).collect(),
            Vector::Q8(q, range) => q.iter().map(|&x| f32::from(x) * range / 127.0 * n.l2).collect(),
            Vector::Bin(w) => {
                (0..self.dim).map(|j| if w[j / 64] >> (j % 64) & 1 == 1 { 1.0 } else { -1.0 }).collect()
            }
            Vector::None => unreachable!("live nodes have a vector"),
        }
    }

    /// VEMB RAW.
    pub fn raw(&self, id: NodeId) -> RawEmbedding {
        let n = self.node(id);
        RawEmbedding {
            kind: self.quant.info_name(),
            data: n.vec.raw_bytes(),
            l2: n.l2,
            range: match n.vec {
                Vector::Q8(_, r) => Some(r),
                _ => None,
            },
        }
    }

    pub fn level(&self, id: NodeId) -> usize {
        self.node(id).layers.len() - 1
    }

    /// VLINKS: one list per level from the node's highest level down to 0, each in link order,
    /// with the score VLINKS WITHSCORES prints (`1 - d/2` rounded to f32).
    pub fn links(&self, id: NodeId) -> Vec<Vec<(NodeId, f64)>> {
        self.node(id)
            .layers
            .iter()
            .rev()
            .map(|l| l.links.iter().map(|&nb| (nb, link_score_of_distance(self.nd(id, nb)))).collect())
            .collect()
    }

    /// Redis's distance between two live nodes' stored vectors (`score = 1 - d/2`).
    pub fn node_distance(&self, a: NodeId, b: NodeId) -> f32 {
        distance(&self.node(a).vec, &self.node(b).vec, self.dim)
    }

    /// A uniformly random live node.
    pub fn random_node(&self, rng: &mut impl rand::Rng) -> Option<NodeId> {
        if self.len == 0 {
            return None;
        }
        // Live slots are dense unless many were removed; rejection sampling, then a fallback
        // that picks the n-th live node.
        for _ in 0..32 {
            let id = rng.gen_range(0..self.nodes.len()) as NodeId;
            if self.contains(id) {
                return Some(id);
            }
        }
        let nth = rng.gen_range(0..self.len);
        self.nodes().nth(nth)
    }

    /// Every live id, ascending.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.iter().enumerate().filter(|(_, n)| !n.layers.is_empty()).map(|(i, _)| i as NodeId)
    }

    /// The stored vector (same bytes as VEMB RAW's data), then l2, then the Q8 range (LE).
    pub fn vector_bytes(&self, id: NodeId) -> Vec<u8> {
        let n = self.node(id);
        let mut out = n.vec.raw_bytes();
        out.extend_from_slice(&n.l2.to_le_bytes());
        if let Vector::Q8(_, r) = n.vec {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out
    }

    pub fn heap_bytes(&self) -> usize {
        let mut total = self.nodes.capacity() * std::mem::size_of::<Node>();
        for n in &self.nodes {
            total += n.layers.capacity() * std::mem::size_of::<Layer>();
            total += n.layers.iter().map(|l| l.links.capacity() * 4).sum::<usize>();
            total += n.vec.heap_bytes();
        }
        // BTreeSet nodes hold up to 11 keys; count a node per 6 keys plus overhead.
        total += self.free.len().div_ceil(6) * 96;
        if let Ok(s) = self.scratch.0.try_lock() {
            total += s.visited.capacity() * 4 + s.batch.capacity() * 4;
        }
        total
    }

    // -----------------------------------------------------------------------------------------
    // redis-server's RDB form

    /// A node as redis-server's RDB form of a vector set lists it: level, links per layer
    /// (with capacity and the farthest link), the stored vector, its norm and Q8 range.
    pub fn export_node(&self, id: NodeId) -> ExportedNode {
        let n = self.node(id);
        ExportedNode {
            level: n.layers.len() - 1,
            layers: n
                .layers
                .iter()
                .map(|l| ExportedLayer {
                    links: l.links.clone(),
                    max_links: l.max_links,
                    worst_dist: l.worst_dist,
                    worst_idx: l.worst_idx,
                })
                .collect(),
            stored: n.vec.raw_bytes(),
            l2: n.l2,
            range: match n.vec {
                Vector::Q8(_, r) => r,
                _ => 0.0,
            },
        }
    }

    /// An index holding exactly `nodes` (ids 0.. in order, links by those ids), as redis-server
    /// saved its graph: the entry point is the first node of the highest level, as Redis picks
    /// it on load. Built through [`Hnsw::decode`], so every invariant is checked; an Err means
    /// the graph breaks one of them (the caller may link the vectors anew instead).
    /// `uid`: VINFO's hnsw-max-node-uid to continue from (Redis takes the highest node id).
    pub fn import(
        dim: usize,
        quant: Quant,
        m: usize,
        seed: u64,
        uid: u64,
        nodes: &[ExportedNode],
    ) -> Result<Hnsw, &'static str> {
        if nodes.is_empty() || nodes.len() > u32::MAX as usize - 1 {
            return Err("no nodes");
        }
        let mut entry = 0;
        for (i, n) in nodes.iter().enumerate() {
            if n.level > nodes[entry].level {
                entry = i;
            }
        }
        let mut out = Vec::new();
        out.push(1);
        out.extend_from_slice(&(dim as u32).to_le_bytes());
        out.push(quant.code());
        out.extend_from_slice(&(m as u32).to_le_bytes());
        out.extend_from_slice(&seed.to_le_bytes());
        out.extend_from_slice(&uid.to_le_bytes());
        out.extend_from_slice(&(nodes.len() as u32).to_le_bytes());
        out.extend_from_slice(&(entry as u32).to_le_bytes());
        out.extend_from_slice(&(nodes[entry].level as u32).to_le_bytes());
        for n in nodes {
            if n.level > MAX_LEVEL || n.layers.len() != n.level + 1 {
                return Err("node level out of range");
            }
            out.push(n.layers.len() as u8);
            out.extend_from_slice(&n.l2.to_le_bytes());
            out.extend_from_slice(&n.stored);
            if quant == Quant::Q8 {
                out.extend_from_slice(&n.range.to_le_bytes());
            }
            for l in &n.layers {
                out.extend_from_slice(&l.max_links.to_le_bytes());
                out.extend_from_slice(&l.worst_dist.to_le_bytes());
                out.extend_from_slice(&l.worst_idx.to_le_bytes());
                out.extend_from_slice(&(l.links.len() as u32).to_le_bytes());
                for &x in &l.links {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
        }
        let h = Hnsw::decode(&out)?;
        // decode reads the stored bytes by length: a vector of the wrong size shifts everything
        // after it and fails there, or leaves trailing bytes; either way it is refused above.
        if h.nodes.iter().any(|n| !n.l2.is_finite()) {
            return Err("a stored vector's norm is not finite");
        }
        Ok(h)
    }

    // -----------------------------------------------------------------------------------------
    // Snapshot

    /// Little-endian layout: `u8 version=1, u32 dim, u8 quant, u32 m, u64 rng, u64 uid,
    /// u32 slots, u32 entry (u32::MAX = none), u32 max_level`, then per slot `u8 level+1`
    /// (0 = dead slot) and for a live slot `f32 l2, vector bytes (f32/i8/u64 words), f32 range
    /// (Q8 only)`, then per layer `u32 max_links, f32 worst_dist, u32 worst_idx, u32 n,
    /// n × u32 links`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(1);
        out.extend_from_slice(&(self.dim as u32).to_le_bytes());
        out.push(self.quant.code());
        out.extend_from_slice(&(self.m as u32).to_le_bytes());
        out.extend_from_slice(&self.rng.to_le_bytes());
        out.extend_from_slice(&self.uid.to_le_bytes());
        out.extend_from_slice(&(self.nodes.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.entry.unwrap_or(u32::MAX).to_le_bytes());
        out.extend_from_slice(&(self.max_level as u32).to_le_bytes());
        for n in &self.nodes {
            out.push(n.layers.len() as u8);
            if n.layers.is_empty() {
                continue;
            }
            out.extend_from_slice(&n.l2.to_le_bytes());
            out.extend_from_slice(&n.vec.raw_bytes());
            if let Vector::Q8(_, r) = n.vec {
                out.extend_from_slice(&r.to_le_bytes());
            }
            for l in &n.layers {
                out.extend_from_slice(&l.max_links.to_le_bytes());
                out.extend_from_slice(&l.worst_dist.to_le_bytes());
                out.extend_from_slice(&l.worst_idx.to_le_bytes());
                out.extend_from_slice(&(l.links.len() as u32).to_le_bytes());
                for &x in &l.links {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
        }
    }

    /// Rebuilds an index from `encode`'s bytes, validating every invariant listed in the module
    /// documentation, so that no later operation can panic on a decoded index.
    pub fn decode(b: &[u8]) -> Result<Hnsw, &'static str> {
        let mut r = Reader::new(b);
        if r.u8()? != 1 {
            return Err("unknown hnsw encoding version");
        }
        let dim = r.u32()? as usize;
        if !(1..=MAX_DIM).contains(&dim) {
            return Err("invalid vector dimension");
        }
        let quant = Quant::from_code(r.u8()?).ok_or("invalid quantization")?;
        let m = r.u32()? as usize;
        if !(1..=MAX_M).contains(&m) {
            return Err("invalid M");
        }
        let rng = r.u64()?;
        let uid = r.u64()?;
        let slots = r.u32()? as usize;
        // Every slot takes at least one byte: bounds the allocation by the input size.
        if slots > r.remaining() {
            return Err("slot count exceeds input");
        }
        let entry = match r.u32()? {
            u32::MAX => None,
            e => Some(e),
        };
        let max_level = r.u32()? as usize;

        let mut nodes: Vec<Node> = Vec::with_capacity(slots);
        for id in 0..slots {
            let levels = r.u8()? as usize;
            if levels == 0 {
                nodes.push(Node::default());
                continue;
            }
            if levels > MAX_LEVEL + 1 {
                return Err("node level too high");
            }
            let l2 = r.f32()?;
            let vec = match quant {
                Quant::F32 => {
                    let bytes = r.take(dim * 4)?;
                    Vector::F32(
                        bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
                    )
                }
                Quant::Q8 => {
                    let q: Box<[i8]> = r.take(dim)?.iter().map(|&x| x as i8).collect();
                    Vector::Q8(q, r.f32()?)
                }
                Quant::Bin => {
                    let words = bin_words(dim);
                    let bytes = r.take(words * 8)?;
                    let w: Box<[u64]> =
                        bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
                    if !dim.is_multiple_of(64) && w[words - 1] >> (dim % 64) != 0 {
                        return Err("bits set beyond the vector dimension");
                    }
                    Vector::Bin(w)
                }
            };
            let mut layers = Vec::with_capacity(levels);
            for l in 0..levels {
                let base = if l == 0 { 2 * m } else { m };
                let limit = if l == 0 { 3 * m } else { 2 * m };
                let max_links = r.u32()?;
                if (max_links as usize) < base || max_links as usize > limit {
                    return Err("invalid link capacity");
                }
                let worst_dist = r.f32()?;
                let worst_idx = r.u32()?;
                let n = r.u32()? as usize;
                if n > max_links as usize {
                    return Err("more links than capacity");
                }
                if !((worst_idx as usize) < n || (n == 0 && worst_idx == 0)) {
                    return Err("invalid worst link index");
                }
                let bytes = r.take(n * 4)?;
                let links: Vec<NodeId> =
                    bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
                if links.iter().any(|&x| x as usize >= slots || x as usize == id) {
                    return Err("invalid link target");
                }
                layers.push(Layer { links, max_links, worst_dist, worst_idx });
            }
            nodes.push(Node { layers, vec, l2 });
        }
        if r.remaining() != 0 {
            return Err("trailing bytes");
        }
        if nodes.last().is_some_and(|n| n.layers.is_empty()) {
            return Err("trailing dead slot");
        }
        // Links: targets live and high enough; each directed link (a, b, layer) listed once and
        // matched by (b, a, layer). Checked by sorting, so crafted inputs stay O(E log E).
        let mut edges: Vec<(NodeId, NodeId, u8)> = Vec::new();
        for (id, n) in nodes.iter().enumerate() {
            for (l, layer) in n.layers.iter().enumerate() {
                for &x in &layer.links {
                    if nodes[x as usize].layers.len() <= l {
                        return Err("link to a dead or lower node");
                    }
                    edges.push((id as NodeId, x, l as u8));
                }
            }
        }
        edges.sort_unstable();
        if edges.windows(2).any(|w| w[0] == w[1]) {
            return Err("duplicate link");
        }
        if edges.iter().any(|&(a, b, l)| edges.binary_search(&(b, a, l)).is_err()) {
            return Err("link not reciprocated");
        }
        let len = nodes.iter().filter(|n| !n.layers.is_empty()).count();
        match entry {
            None if len == 0 && max_level == 0 => {}
            Some(e) if (e as usize) < slots && !nodes[e as usize].layers.is_empty() => {
                if nodes[e as usize].layers.len() - 1 != max_level {
                    return Err("max level differs from the entry point's level");
                }
            }
            _ => return Err("invalid entry point"),
        }
        if uid < len as u64 {
            return Err("node uid counter below node count");
        }
        let free =
            nodes.iter().enumerate().filter(|(_, n)| n.layers.is_empty()).map(|(i, _)| i as NodeId).collect();
        Ok(Hnsw {
            dim,
            quant,
            m,
            nodes,
            free,
            len,
            entry,
            max_level,
            uid,
            rng,
            scratch: ScratchCell::default(),
        })
    }
}

/// Bounds-checked little-endian reader for untrusted snapshots.
struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(b: &'a [u8]) -> Reader<'a> {
        Reader { b }
    }

    fn remaining(&self) -> usize {
        self.b.len()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if n > self.b.len() {
            return Err("truncated input");
        }
        let (head, tail) = self.b.split_at(n);
        self.b = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, &'static str> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, &'static str> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    fn u64(&mut self) -> Result<u64, &'static str> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }

    fn f32(&mut self) -> Result<f32, &'static str> {
        Ok(f32::from_bits(self.u32()?))
    }
}
