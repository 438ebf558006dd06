//! Vector sets (Redis 8's V* family): string elements, each with a vector and optional JSON
//! attributes, searched by similarity through an HNSW graph ([`hnsw`]).
//!
//! A [`VectorSet`] is the graph plus the two maps around it: element name -> node id (a
//! `BTreeMap`, so VRANGE walks names in byte order), and node id -> (name, attributes) (a
//! slab indexed by the graph's dense ids). The graph owns the vectors; this module owns names,
//! attributes, the REDUCE projection and the counts VINFO reports.
//!
//! Determinism: the graph's level draws come from its own seeded generator, so the same
//! sequence of VADD / VREM applied to two sets builds the same graph (a replica, or a journal
//! replay, answers VSIM exactly as the primary). Nothing here reads a clock or a global RNG.
//!
//! Invariants: `by_name` and the slab name the same live nodes, and those are exactly the
//! graph's live nodes; `attributes` counts the slab entries with `Some` attributes; a set in
//! the keyspace is never empty (the commands delete the key with its last element).

pub mod hnsw;

use crate::alloc::size_class;
use crate::types::RawError;
use crate::Plain;
use hnsw::{ExportedNode, Hnsw, NodeId, Projection, Quant, Query, RawEmbedding};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

/// Largest vector dimension a set accepts (Redis's limit: 2^16).
pub const MAX_DIM: usize = 1 << 16;
/// HNSW's M when VADD names none.
pub const DEFAULT_M: usize = 16;
/// The graph's level generator seed: fixed, so every server builds the same graph from the
/// same writes.
const GRAPH_SEED: u64 = 0x676f_626c_696e_7673;

/// VINFO's `vset-uid`: a process-wide count of the sets created (Redis numbers them the same
/// way; the number is for introspection only and is not saved).
static NEXT_UID: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Debug)]
struct Node {
    name: Box<[u8]>,
    attr: Option<Box<[u8]>>,
}

#[derive(Clone)]
pub struct VectorSet {
    index: Hnsw,
    by_name: BTreeMap<Box<[u8]>, NodeId>,
    /// Indexed by node id; `None` for ids the graph does not use (now).
    nodes: Vec<Option<Node>>,
    projection: Option<Projection>,
    attributes: usize,
    uid: u64,
}

impl std::fmt::Debug for VectorSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorSet").field("dim", &self.dim()).field("len", &self.len()).finish()
    }
}

/// One VSIM answer.
pub struct Hit<'a> {
    pub name: &'a [u8],
    pub score: f64,
    pub attr: Option<&'a [u8]>,
}

/// An end of a VRANGE interval.
#[derive(Clone, Copy, Debug)]
pub enum RangeEnd<'a> {
    /// `-` or `+`: unbounded.
    Open,
    Inclusive(&'a [u8]),
    Exclusive(&'a [u8]),
}

/// (name, stored vector bytes, attributes).
pub type PlainElement = (Vec<u8>, Vec<u8>, Option<Vec<u8>>);
/// VSIM's FILTER as the set sees it: a test of an element's attributes.
pub type AttrFilter<'a> = &'a dyn Fn(Option<&[u8]>) -> bool;
/// VLINKS: per level, the neighbours' names and similarities.
pub type Links<'a> = Vec<Vec<(&'a [u8], f64)>>;

/// The canonical, comparable content of a set (DEBUG DIGEST, tests): its parameters and its
/// elements with their stored vectors and attributes, by name. The graph's shape is left out:
/// it follows from the history of writes, which replication and replay reproduce anyway.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PlainVset {
    pub dim: usize,
    pub quant: &'static str,
    pub m: usize,
    pub projection_input_dim: usize,
    /// (name, stored vector bytes, attributes), sorted by name.
    pub elements: Vec<PlainElement>,
}

impl VectorSet {
    /// An empty set of `dim`-dimensional vectors. With `projection_from`, callers pass vectors
    /// of that dimension, reduced to `dim` by a fixed projection (VADD REDUCE).
    pub fn new(dim: usize, quant: Quant, m: usize, projection_from: Option<usize>) -> VectorSet {
        VectorSet {
            index: Hnsw::new(dim, quant, m, GRAPH_SEED),
            by_name: BTreeMap::new(),
            nodes: Vec::new(),
            projection: projection_from.map(|input| Projection::new(input, dim, GRAPH_SEED)),
            attributes: 0,
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The stored vectors' dimension (VDIM; the reduced one under REDUCE).
    pub fn dim(&self) -> usize {
        self.index.dim()
    }
    /// The dimension of the vectors callers pass in.
    pub fn input_dim(&self) -> usize {
        self.projection.as_ref().map_or(self.dim(), |p| p.input_dim())
    }
    /// VINFO `projection-input-dim`: 0 without REDUCE.
    pub fn projection_input_dim(&self) -> usize {
        self.projection.as_ref().map_or(0, |p| p.input_dim())
    }
    pub fn has_projection(&self) -> bool {
        self.projection.is_some()
    }
    pub fn projection(&self) -> Option<&Projection> {
        self.projection.as_ref()
    }
    pub fn quant(&self) -> Quant {
        self.index.quant()
    }
    pub fn m(&self) -> usize {
        self.index.m()
    }
    pub fn len(&self) -> usize {
        self.by_name.len()
    }
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
    pub fn max_level(&self) -> usize {
        self.index.max_level()
    }
    pub fn max_node_uid(&self) -> u64 {
        self.index.max_node_uid()
    }
    pub fn attributes_count(&self) -> usize {
        self.attributes
    }
    pub fn uid(&self) -> u64 {
        self.uid
    }

    /// A caller's vector in the stored dimension: projected when the set reduces.
    /// `v.len()` must be [`VectorSet::input_dim`].
    pub fn project(&self, v: Vec<f32>) -> Vec<f32> {
        match &self.projection {
            Some(p) => p.apply(&v),
            None => v,
        }
    }

    pub fn contains(&self, name: &[u8]) -> bool {
        self.by_name.contains_key(name)
    }

    fn node(&self, id: NodeId) -> &Node {
        self.nodes[id as usize].as_ref().expect("a live node id")
    }

    fn put_node(&mut self, id: NodeId, node: Node) {
        let i = id as usize;
        if i >= self.nodes.len() {
            self.nodes.resize_with(i + 1, || None);
        }
        debug_assert!(self.nodes[i].is_none(), "the graph handed out a live id");
        self.nodes[i] = Some(node);
    }

    /// VADD: adds `name` with vector `v` (already projected: `v.len() == dim`), or moves an
    /// existing element to `v` (it is removed from the graph and inserted again, as Redis does).
    /// `attr`: `Some` sets the attributes (an empty string removes an existing element's, and
    /// is kept as given on a new one, as Redis does), `None` keeps them.
    /// Returns true when the element is new.
    pub fn add(&mut self, name: &[u8], v: &[f32], ef: usize, attr: Option<&[u8]>) -> bool {
        let (node, added) = match self.by_name.get(name).copied() {
            Some(old) => {
                self.index.remove(old);
                let node = self.nodes[old as usize].take().expect("a live node id");
                (node, false)
            }
            None => (Node { name: name.into(), attr: None }, true),
        };
        let mut node = node;
        if let Some(a) = attr {
            if node.attr.is_some() {
                self.attributes -= 1;
            }
            // Redis's rule, kept as it is: an empty SETATTR unsets an existing element's
            // attributes but is stored, as an empty string, on a new one.
            node.attr = (added || !a.is_empty()).then(|| a.into());
            if node.attr.is_some() {
                self.attributes += 1;
            }
        }
        let id = self.index.insert(v, ef);
        self.put_node(id, node);
        self.by_name.insert(name.into(), id);
        added
    }

    /// Adds a new element whose vector is given in its stored form (see
    /// `Hnsw::insert_stored`): an import of redis-server's RDB form. Err when the name is
    /// already there or the vector does not fit.
    pub fn add_stored(
        &mut self,
        name: &[u8],
        stored: &[u8],
        l2: f32,
        range: f32,
        ef: usize,
        attr: Option<&[u8]>,
    ) -> Result<(), RawError> {
        if self.by_name.contains_key(name) {
            return Err(RawError("duplicate element name"));
        }
        let id = self.index.insert_stored(stored, l2, range, ef).map_err(RawError)?;
        self.attributes += attr.is_some() as usize;
        self.put_node(id, Node { name: name.into(), attr: attr.map(Into::into) });
        self.by_name.insert(name.into(), id);
        Ok(())
    }

    /// Every element in the terms of redis-server's RDB form: node id, name, attributes, and
    /// the node (links by node id), in node id order.
    pub fn export(&self) -> impl Iterator<Item = (NodeId, &[u8], Option<&[u8]>, ExportedNode)> + '_ {
        self.nodes.iter().enumerate().filter_map(|(id, n)| {
            let n = n.as_ref()?;
            let id = id as NodeId;
            Some((id, &*n.name, n.attr.as_deref(), self.index.export_node(id)))
        })
    }

    /// A set holding exactly the graph redis-server saved: `elements` are (name, attributes,
    /// node) with links by position in `elements`. Err when a name repeats or the graph breaks
    /// an invariant of the index (see `Hnsw::import`).
    pub fn import(
        dim: usize,
        quant: Quant,
        m: usize,
        projection_from: Option<usize>,
        uid: u64,
        elements: Vec<(Vec<u8>, Option<Vec<u8>>, ExportedNode)>,
    ) -> Result<VectorSet, RawError> {
        let mut set = VectorSet::new(dim, quant, m, projection_from);
        let nodes: Vec<ExportedNode> = elements.iter().map(|(_, _, n)| n.clone()).collect();
        set.index = Hnsw::import(dim, quant, m, GRAPH_SEED, uid, &nodes).map_err(RawError)?;
        for (id, (name, attr, _)) in elements.into_iter().enumerate() {
            if set.by_name.contains_key(&name[..]) {
                return Err(RawError("duplicate element name"));
            }
            set.attributes += attr.is_some() as usize;
            set.by_name.insert(name.clone().into(), id as NodeId);
            set.put_node(id as NodeId, Node { name: name.into(), attr: attr.map(Into::into) });
        }
        Ok(set)
    }

    /// VREM: true when `name` was there.
    pub fn remove(&mut self, name: &[u8]) -> bool {
        let Some(id) = self.by_name.remove(name) else {
            return false;
        };
        self.index.remove(id);
        let node = self.nodes[id as usize].take().expect("a live node id");
        if node.attr.is_some() {
            self.attributes -= 1;
        }
        // Keep the slab from holding a long tail of free slots after mass removals.
        while matches!(self.nodes.last(), Some(None)) {
            self.nodes.pop();
        }
        true
    }

    /// VGETATTR: the element's attributes, None when it has none or is missing.
    pub fn attr(&self, name: &[u8]) -> Option<&[u8]> {
        let id = *self.by_name.get(name)?;
        self.node(id).attr.as_deref()
    }

    /// VSETATTR: sets (or, with an empty string, removes) the attributes. False when the
    /// element is missing.
    pub fn set_attr(&mut self, name: &[u8], attr: &[u8]) -> bool {
        let Some(&id) = self.by_name.get(name) else {
            return false;
        };
        let node = self.nodes[id as usize].as_mut().expect("a live node id");
        let had = node.attr.is_some();
        node.attr = (!attr.is_empty()).then(|| attr.into());
        let has = node.attr.is_some();
        self.attributes = self.attributes + has as usize - had as usize;
        true
    }

    /// VEMB: the element's vector, de-quantized and de-normalized.
    pub fn embedding(&self, name: &[u8]) -> Option<Vec<f32>> {
        self.by_name.get(name).map(|&id| self.index.embedding(id))
    }

    /// VEMB RAW.
    pub fn raw_embedding(&self, name: &[u8]) -> Option<RawEmbedding> {
        self.by_name.get(name).map(|&id| self.index.raw(id))
    }

    /// A caller's vector (projected, `dim` long) as a query.
    pub fn query(&self, v: &[f32]) -> Query {
        self.index.query(v)
    }

    /// VSIM ELE: an element's own vector as the query.
    pub fn element_query(&self, name: &[u8]) -> Option<Query> {
        self.by_name.get(name).map(|&id| self.index.node_query(id))
    }

    /// VSIM: up to `k` elements most similar to `q`, best first. `filter` sees each
    /// candidate's attributes; `truth` scans every element instead of walking the graph.
    pub fn search(
        &self,
        q: &Query,
        k: usize,
        ef: usize,
        filter: Option<AttrFilter<'_>>,
        filter_ef: usize,
        truth: bool,
    ) -> Vec<Hit<'_>> {
        let nodes = &self.nodes;
        let mut accept = |id: NodeId| {
            let attr = nodes[id as usize].as_ref().and_then(|n| n.attr.as_deref());
            filter.is_none_or(|f| f(attr))
        };
        let accept: Option<&mut dyn FnMut(NodeId) -> bool> =
            if filter.is_some() { Some(&mut accept) } else { None };
        let found = if truth {
            self.index.search_exact(q, k, accept)
        } else {
            self.index.search(q, k, ef, accept, filter_ef)
        };
        found
            .into_iter()
            .map(|(id, score)| {
                let n = self.node(id);
                Hit { name: &n.name, score, attr: n.attr.as_deref() }
            })
            .collect()
    }

    /// VLINKS: per level, highest first, the neighbours and their similarity.
    pub fn links(&self, name: &[u8]) -> Option<Links<'_>> {
        let id = *self.by_name.get(name)?;
        Some(
            self.index
                .links(id)
                .into_iter()
                .map(|level| level.into_iter().map(|(n, s)| (&*self.node(n).name, s)).collect())
                .collect(),
        )
    }

    /// One element drawn uniformly.
    pub fn random(&self, rng: &mut impl rand::Rng) -> Option<&[u8]> {
        self.index.random_node(rng).map(|id| &*self.node(id).name)
    }

    /// Every element name, in byte order.
    pub fn names(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.by_name.keys().map(|k| &**k)
    }

    /// VRANGE: names from `start` to `end` in byte order, at most `limit` of them.
    pub fn range(&self, start: RangeEnd<'_>, end: RangeEnd<'_>, limit: usize) -> Vec<&[u8]> {
        let lo: Bound<&[u8]> = match start {
            RangeEnd::Open => Bound::Unbounded,
            RangeEnd::Inclusive(s) => Bound::Included(s),
            RangeEnd::Exclusive(s) => Bound::Excluded(s),
        };
        let mut out = Vec::new();
        for (name, _) in self.by_name.range::<[u8], _>((lo, Bound::Unbounded)) {
            if out.len() >= limit {
                break;
            }
            let inside = match end {
                RangeEnd::Open => true,
                RangeEnd::Inclusive(e) => &**name <= e,
                RangeEnd::Exclusive(e) => &**name < e,
            };
            if !inside {
                break;
            }
            out.push(&**name);
        }
        out
    }

    /// Heap bytes: the graph (vectors and links), both maps with the names and attributes,
    /// and the projection matrix.
    pub fn mem_usage(&self) -> usize {
        let names: usize = self
            .nodes
            .iter()
            .flatten()
            .map(|n| 2 * size_class(n.name.len().max(1)) + n.attr.as_ref().map_or(0, |a| size_class(a.len())))
            .sum();
        // A B-tree leaf holds up to 11 (key, value) pairs of 16 + 4 bytes plus its header.
        let map = self.by_name.len().div_ceil(8) * size_class(11 * 24 + 16);
        size_class(std::mem::size_of::<VectorSet>())
            + self.index.heap_bytes()
            + size_class(self.nodes.capacity() * std::mem::size_of::<Option<Node>>())
            + names
            + map
            + self.projection.as_ref().map_or(0, |p| p.heap_bytes())
    }

    /// `OBJECT ENCODING`: Redis reports a module type's value as `raw`.
    pub fn encoding(&self) -> &'static str {
        "raw"
    }

    pub fn to_plain(&self) -> Plain {
        Plain::VectorSet(Box::new(PlainVset {
            dim: self.dim(),
            quant: self.quant().info_name(),
            m: self.m(),
            projection_input_dim: self.projection_input_dim(),
            elements: self
                .by_name
                .iter()
                .map(|(name, &id)| {
                    (
                        name.to_vec(),
                        self.index.vector_bytes(id),
                        self.node(id).attr.as_ref().map(|a| a.to_vec()),
                    )
                })
                .collect(),
        }))
    }

    /// The snapshot form: parameters, the projection, the graph as it is, then every live
    /// node's id, name and attributes. Decoding it gives a set that answers every command as
    /// this one does and evolves identically.
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_varint(out, self.nodes.iter().flatten().count() as u64);
        match &self.projection {
            Some(p) => {
                out.push(1);
                let mut b = Vec::new();
                p.encode(&mut b);
                put_bytes(out, &b);
            }
            None => out.push(0),
        }
        let mut g = Vec::new();
        self.index.encode(&mut g);
        put_bytes(out, &g);
        for (id, n) in self.nodes.iter().enumerate() {
            let Some(n) = n else { continue };
            put_varint(out, id as u64);
            put_bytes(out, &n.name);
            match &n.attr {
                Some(a) => {
                    out.push(1);
                    put_bytes(out, a);
                }
                None => out.push(0),
            }
        }
    }

    /// Rebuilds a set from [`VectorSet::encode`]'s bytes, untrusted: every length, id and
    /// name is checked, and the names must match the graph's live nodes one for one.
    pub fn decode(raw: &[u8]) -> Result<VectorSet, RawError> {
        let mut r = Reader { b: raw, at: 0 };
        let count = r.varint()?;
        let projection = match r.byte()? {
            0 => None,
            1 => Some(Projection::decode(r.bytes()?).map_err(RawError)?),
            _ => return Err(RawError("bad projection flag")),
        };
        let index = Hnsw::decode(r.bytes()?).map_err(RawError)?;
        if let Some(p) = &projection {
            if p.output_dim() != index.dim() || p.input_dim() < p.output_dim() || p.input_dim() > MAX_DIM {
                return Err(RawError("projection does not fit the vectors"));
            }
        }
        if count != index.len() as u64 || count == 0 {
            return Err(RawError("element count does not match the graph"));
        }
        let mut set = VectorSet {
            index,
            by_name: BTreeMap::new(),
            nodes: Vec::new(),
            projection,
            attributes: 0,
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
        };
        for _ in 0..count {
            let id = r.varint()?;
            let id = NodeId::try_from(id).map_err(|_| RawError("node id out of range"))?;
            if !set.index.contains(id) || set.nodes.get(id as usize).is_some_and(|n| n.is_some()) {
                return Err(RawError("a name for a missing or already named node"));
            }
            let name: Box<[u8]> = r.bytes()?.into();
            let attr = match r.byte()? {
                0 => None,
                1 => Some(r.bytes()?.into()),
                _ => return Err(RawError("bad attribute flag")),
            };
            set.attributes += attr.is_some() as usize;
            if set.by_name.insert(name.clone(), id).is_some() {
                return Err(RawError("duplicate element name"));
            }
            set.put_node(id, Node { name, attr });
        }
        if r.at != raw.len() {
            return Err(RawError("trailing bytes after the vector set"));
        }
        Ok(set)
    }
}

fn put_varint(out: &mut Vec<u8>, v: u64) {
    super::with_varint(v, |b| out.extend_from_slice(b));
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, RawError> {
        let (v, at) = super::read_varint_checked(self.b, self.at).ok_or(RawError("bad varint"))?;
        self.at = at;
        Ok(v)
    }
    fn byte(&mut self) -> Result<u8, RawError> {
        let b = *self.b.get(self.at).ok_or(RawError("truncated vector set"))?;
        self.at += 1;
        Ok(b)
    }
    fn bytes(&mut self) -> Result<&'a [u8], RawError> {
        let n = self.varint()?;
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.at.checked_add(n))
            .filter(|&e| e <= self.b.len())
            .ok_or(RawError("truncated vector set"))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
}
