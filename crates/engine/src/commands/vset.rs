//! Vector set commands (Redis 8's V* family): VADD, VREM, VSIM, VDIM, VCARD, VEMB, VLINKS,
//! VINFO, VSETATTR, VGETATTR, VRANDMEMBER, VISMEMBER, and VRANGE (Redis 8.4).
//!
//! Replies, argument rules and error texts follow redis-server 8.2's vector sets, which check
//! their own arguments (COMMAND reports arity -1 for them): options are parsed in Redis's order
//! so that a request with two faults gets Redis's error for the first one Redis would find.
//!
//! Canonical mutations: VADD, VREM and VSETATTR replay as the request itself (minus CAS, a
//! threading hint). Replaying them rebuilds the same graph: the vector parse and the REDUCE
//! projection are deterministic, and the graph draws its levels from its own seeded generator
//! (`store::types::vset`), so a replica's or a replayed journal's VSIM answers are the
//! primary's. A VADD that adds nothing new still changes the element (its vector is replaced,
//! its node reinserted), so it is always emitted.
//!
//! VSIM runs on the server thread (Redis runs it on a helper thread unless NOTHREAD): here a
//! search is a few thousand distance computations and the single thread is the design.

use super::vset_filter::Filter;
use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::ctx::Ctx;
use crate::dtoa::push_double;
use crate::errors;
use crate::util::{eq_ic, parse_f64, parse_i64};
use resp::reply;
use store::types::vset::hnsw::Quant;
use store::types::vset::{RangeEnd, VectorSet, DEFAULT_M, MAX_DIM};
use store::{Value, ValueMut, ValueRef};

const W: u32 = Flags::WRITE;
const WD: u32 = Flags::WRITE | Flags::DENYOOM;
const WF: u32 = Flags::WRITE | Flags::FAST;
const R: u32 = Flags::READONLY;
const RF: u32 = Flags::READONLY | Flags::FAST;
const G: &str = "module";
const K: (i32, i32, i32) = (1, 1, 1);

pub static COMMANDS: &[CommandSpec] = &[
    spec(
        "vadd",
        -5,
        WD,
        K,
        G,
        "Adds an element with its vector to a vector set, or updates it.",
        Handler::Data(vadd),
    ),
    spec("vrem", 3, W, K, G, "Removes an element from a vector set.", Handler::Data(vrem)),
    spec(
        "vsim",
        -4,
        R,
        K,
        G,
        "Returns the elements most similar to a vector or an element.",
        Handler::Data(vsim),
    ),
    spec("vdim", 2, RF, K, G, "Returns the dimension of a vector set's vectors.", Handler::Data(vdim)),
    spec("vcard", 2, RF, K, G, "Returns the number of elements in a vector set.", Handler::Data(vcard)),
    spec("vemb", -3, RF, K, G, "Returns the vector of an element of a vector set.", Handler::Data(vemb)),
    spec(
        "vlinks",
        -3,
        RF,
        K,
        G,
        "Returns an element's neighbours in each layer of the graph.",
        Handler::Data(vlinks),
    ),
    spec("vinfo", 2, RF, K, G, "Returns information about a vector set.", Handler::Data(vinfo)),
    spec(
        "vsetattr",
        4,
        WF,
        K,
        G,
        "Sets or removes the JSON attributes of an element.",
        Handler::Data(vsetattr),
    ),
    spec("vgetattr", 3, RF, K, G, "Returns the JSON attributes of an element.", Handler::Data(vgetattr)),
    spec("vrandmember", -2, R, K, G, "Returns random elements of a vector set.", Handler::Data(vrandmember)),
    spec("vismember", 3, R, K, G, "Tells whether an element is in a vector set.", Handler::Data(vismember)),
    spec(
        "vrange",
        -4,
        R,
        K,
        G,
        "Returns a vector set's elements in a lexicographic range.",
        Handler::Data(vrange),
    ),
];

/// HNSW's M bounds (Redis's `HNSW_MIN_M` / `HNSW_MAX_M`).
const MIN_M: i64 = 4;
const MAX_M: i64 = 4096;
/// VADD's default build exploration factor, VSIM's default search one, and VSIM's COUNT.
const DEFAULT_BUILD_EF: usize = 200;
const DEFAULT_SEARCH_EF: usize = 100;
const DEFAULT_COUNT: i64 = 10;

const INVALID_VECTOR: &[u8] = b"ERR invalid vector specification";
/// The largest REDUCE projection matrix, in floats.
const MAX_PROJECTION: usize = 1 << 26;

/// `got` components where the set stores `has`.
fn dimension_mismatch(out: &mut Vec<u8>, got: usize, has: usize) {
    reply::error(out, format!("ERR Vector dimension mismatch - got {got} but set has {has}").as_bytes());
}

/// `got` components where the set's REDUCE projection takes `expects`.
fn projection_mismatch(out: &mut Vec<u8>, got: usize, expects: usize) {
    let e =
        format!("ERR Input dimension mismatch for projection - got {got} but projection expects {expects}");
    reply::error(out, e.as_bytes());
}

/// What a key holds, for vector set commands.
enum Look {
    Missing,
    Wrong,
    Vset,
}

fn look(c: &mut Ctx, key: &[u8], for_write: bool) -> Look {
    let is = if for_write {
        c.write(key).map(|v| matches!(v, ValueMut::VectorSet(_)))
    } else {
        c.read(key).map(|v| matches!(v, ValueRef::VectorSet(_)))
    };
    match is {
        None => Look::Missing,
        Some(true) => Look::Vset,
        Some(false) => Look::Wrong,
    }
}

fn vset<'a>(c: &'a Ctx, key: &[u8]) -> &'a VectorSet {
    match c.ks.get(key) {
        Some(ValueRef::VectorSet(v)) => v,
        _ => unreachable!("checked to be a vector set"),
    }
}

fn vset_mut<'a>(c: &'a mut Ctx, key: &[u8]) -> &'a mut VectorSet {
    match c.ks.get_mut(key) {
        Some(ValueMut::VectorSet(v)) => v,
        _ => unreachable!("checked to be a vector set"),
    }
}

/// A parsed `[REDUCE dim] FP32 blob | VALUES n v1 .. vn`.
struct VectorArg {
    v: Vec<f32>,
    /// Arguments consumed, REDUCE included.
    consumed: usize,
    /// REDUCE's dimension, 0 without it.
    reduce: usize,
}

/// Parses a vector at `args[at..]` as Redis's `parseVector` does; `allow_reduce` for VADD.
/// Components must be finite as 32-bit floats (Redis stores what C's cast gives; an infinity
/// or NaN would poison the normalization, so it is refused here with the same error).
fn parse_vector(args: &[&[u8]], at: usize, allow_reduce: bool) -> Option<VectorArg> {
    let mut at = at;
    let mut consumed = 0;
    let mut reduce = 0;
    if allow_reduce && args.len() > at + 2 && eq_ic(args[at], b"REDUCE") {
        let r = parse_i64(args[at + 1]).filter(|&r| r > 0)?;
        reduce = usize::try_from(r).ok()?;
        at += 2;
        consumed += 2;
    }
    let format = *args.get(at)?;
    let v: Vec<f32> = if eq_ic(format, b"FP32") {
        let blob = *args.get(at + 1)?;
        if blob.len() % 4 != 0 || blob.is_empty() || blob.len() / 4 > MAX_DIM {
            return None;
        }
        consumed += 2;
        blob.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
    } else if eq_ic(format, b"VALUES") {
        let n = parse_i64(args.get(at + 1)?)?;
        if !(1..=MAX_DIM as i64).contains(&n) {
            return None;
        }
        let n = n as usize;
        if args.len() < at + 2 + n {
            return None;
        }
        consumed += 2 + n;
        args[at + 2..at + 2 + n].iter().map(|a| parse_f64(a).map(|x| x as f32)).collect::<Option<_>>()?
    } else {
        return None;
    };
    if v.iter().any(|x| !x.is_finite()) || reduce > v.len() {
        return None;
    }
    // The projection matrix is reduce x dim floats: past 2^26 of them (256 MiB) a request
    // would make the server allocate gigabytes (65536 x 65536 is 16 GiB), so it is refused.
    if reduce > 0 && reduce * v.len() > MAX_PROJECTION {
        return None;
    }
    Some(VectorArg { v, consumed, reduce })
}

/// VADD key [REDUCE dim] FP32|VALUES vector element [CAS] [NOQUANT|Q8|BIN] [EF n]
/// [SETATTR attributes] [M n]
fn vadd(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let Some(vec) = parse_vector(args, 2, true) else {
        return reply::error(out, INVALID_VECTOR);
    };
    if args.len() - 2 - vec.consumed < 1 {
        return errors::wrong_arity_upper(out, args[0]);
    }
    let elem_at = 2 + vec.consumed;
    let elem = args[elem_at];
    let mut ef = DEFAULT_BUILD_EF as i64;
    let mut m = DEFAULT_M as i64;
    let mut quant = Quant::Q8;
    let mut attr: Option<&[u8]> = None;
    let mut j = elem_at + 1;
    while j < args.len() {
        let opt = args[j];
        let has_value = j + 1 < args.len();
        if eq_ic(opt, b"CAS") {
        } else if eq_ic(opt, b"EF") && has_value {
            match parse_i64(args[j + 1]) {
                Some(v) if (1..=1_000_000).contains(&v) => ef = v,
                _ => return reply::error(out, b"ERR invalid EF"),
            }
            j += 1;
        } else if eq_ic(opt, b"M") && has_value {
            match parse_i64(args[j + 1]) {
                Some(v) if (MIN_M..=MAX_M).contains(&v) => m = v,
                _ => return reply::error(out, b"ERR invalid M"),
            }
            j += 1;
        } else if eq_ic(opt, b"SETATTR") && has_value {
            attr = Some(args[j + 1]);
            j += 1;
        } else if eq_ic(opt, b"NOQUANT") {
            quant = Quant::F32;
        } else if eq_ic(opt, b"BIN") {
            quant = Quant::Bin;
        } else if eq_ic(opt, b"Q8") {
            quant = Quant::Q8;
        } else {
            return reply::error(out, b"ERR invalid option after element");
        }
        j += 1;
    }
    let (ef, m) = (ef as usize, m as usize);
    let dim = vec.v.len();
    let v = match look(c, key, true) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Missing => {
            let stored_dim = if vec.reduce > 0 { vec.reduce } else { dim };
            let set = VectorSet::new(stored_dim, quant, m, (vec.reduce > 0).then_some(dim));
            let v = set.project(vec.v);
            c.ks.insert(key, Value::VectorSet(Box::new(set)), None);
            v
        }
        Look::Vset => {
            let set = vset(c, key);
            if set.quant() != quant {
                return reply::error(out, b"ERR asked quantization mismatch with existing vector set");
            }
            if set.m() != m {
                return reply::error(out, b"ERR asked M value mismatch with existing vector set");
            }
            let wanted = if set.has_projection() { vec.reduce } else { dim };
            if wanted != set.dim() {
                return dimension_mismatch(out, dim, set.dim());
            }
            if vec.reduce > 0 && !set.has_projection() {
                return reply::error(out, b"ERR cannot add projection to existing set without projection");
            }
            if set.has_projection() && dim != set.input_dim() {
                return projection_mismatch(out, dim, set.input_dim());
            }
            set.project(vec.v)
        }
    };
    let added = vset_mut(c, key).add(elem, &v, ef, attr);
    // The request as it came, less CAS (a threading hint in Redis, meaningless here).
    let mut m: Vec<&[u8]> = Vec::with_capacity(args.len());
    m.push(b"VADD");
    m.extend(
        args[1..].iter().enumerate().filter(|(i, a)| *i < elem_at || !eq_ic(a, b"CAS")).map(|(_, a)| *a),
    );
    c.emit(&m);
    reply::boolean(out, c.proto, added);
}

/// VREM key element
fn vrem(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    match look(c, key, true) {
        Look::Missing => return reply::boolean(out, c.proto, false),
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Vset => {}
    }
    let set = vset_mut(c, key);
    if !set.remove(args[2]) {
        return reply::boolean(out, c.proto, false);
    }
    if set.is_empty() {
        c.ks.delete(key);
    }
    c.emit_request(b"VREM", args);
    reply::boolean(out, c.proto, true);
}

fn push_score(out: &mut Vec<u8>, proto: resp::Proto, v: f64) {
    let mut t = Vec::with_capacity(24);
    push_double(&mut t, v);
    reply::double(out, proto, &t);
}

/// VSIM key ELE element | FP32 blob | VALUES n v.. [WITHSCORES] [WITHATTRIBS] [COUNT n]
/// [EPSILON d] [EF n] [FILTER expr] [FILTER-EF n] [TRUTH] [NOTHREAD]
fn vsim(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    match look(c, key, false) {
        Look::Missing => return reply::array_len(out, 0),
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Vset => {}
    }
    let set = vset(c, key);
    let (query, vector_args) = if eq_ic(args[2], b"ELE") {
        match set.element_query(args[3]) {
            Some(q) => (q, 2),
            None => return reply::error(out, b"ERR element not found in set"),
        }
    } else {
        let Some(vec) = parse_vector(args, 2, false) else {
            return reply::error(out, INVALID_VECTOR);
        };
        let mut v = vec.v;
        if set.has_projection() && v.len() != set.dim() {
            if v.len() != set.input_dim() {
                return projection_mismatch(out, v.len(), set.input_dim());
            }
            v = set.project(v);
        }
        if v.len() != set.dim() {
            return dimension_mismatch(out, v.len(), set.dim());
        }
        (set.query(&v), vec.consumed)
    };
    let (mut withscores, mut withattribs, mut truth) = (false, false, false);
    let mut count = DEFAULT_COUNT;
    let mut ef: i64 = 0;
    let mut epsilon = 2.0f64;
    let mut filter_ef: i64 = 0;
    let mut filter: Option<Filter> = None;
    let mut j = 2 + vector_args;
    while j < args.len() {
        let opt = args[j];
        let has_value = j + 1 < args.len();
        if eq_ic(opt, b"WITHSCORES") {
            withscores = true;
        } else if eq_ic(opt, b"WITHATTRIBS") {
            withattribs = true;
        } else if eq_ic(opt, b"TRUTH") {
            truth = true;
        } else if eq_ic(opt, b"NOTHREAD") {
        } else if eq_ic(opt, b"COUNT") && has_value {
            match parse_i64(args[j + 1]) {
                Some(v) if v > 0 => count = v,
                _ => return reply::error(out, b"ERR invalid COUNT"),
            }
            j += 1;
        } else if eq_ic(opt, b"EPSILON") && has_value {
            match parse_f64(args[j + 1]) {
                Some(v) if v > 0.0 => epsilon = v,
                _ => return reply::error(out, b"ERR invalid EPSILON"),
            }
            j += 1;
        } else if eq_ic(opt, b"EF") && has_value {
            // Any positive EF (redis-server 8.2 sets no upper bound here; the search caps it
            // at the set's size).
            match parse_i64(args[j + 1]) {
                Some(v) if v > 0 => ef = v,
                _ => return reply::error(out, b"ERR invalid EF"),
            }
            j += 1;
        } else if eq_ic(opt, b"FILTER-EF") && has_value {
            match parse_i64(args[j + 1]) {
                Some(v) if v > 0 => filter_ef = v,
                _ => return reply::error(out, b"ERR invalid FILTER-EF"),
            }
            j += 1;
        } else if eq_ic(opt, b"FILTER") && has_value {
            match Filter::compile(args[j + 1]) {
                Ok(f) => filter = Some(f),
                Err(e) => return reply::error(out, &e),
            }
            j += 1;
        } else {
            return reply::error(out, b"ERR syntax error in VSIM command");
        }
        j += 1;
    }
    let count = count as usize;
    if filter_ef == 0 {
        filter_ef = (count as i64).saturating_mul(100);
    }
    // The candidate list is `ef` long (at least COUNT, at most the set), as Redis sizes it;
    // COUNT and EPSILON then cut it.
    let mut ef = if ef == 0 { DEFAULT_SEARCH_EF } else { ef as usize };
    ef = ef.max(count).min(set.len());
    let accept = filter.as_ref().map(|f| move |attr: Option<&[u8]>| attr.is_some() && f.matches(attr));
    let accept_dyn: Option<store::types::vset::AttrFilter<'_>> = accept.as_ref().map(|f| f as _);
    let hits = set.search(&query, ef, ef, accept_dyn, filter_ef as usize, truth);
    // Redis compares half the float distance with EPSILON as a float.
    let eps = epsilon as f32;
    let shown: Vec<_> = hits.iter().take(count).take_while(|h| (1.0 - h.score) as f32 <= eps).collect();
    let proto = c.proto;
    let map = proto.is_resp3() && (withscores || withattribs);
    if map {
        reply::map_len(out, proto, shown.len());
    } else {
        reply::array_len(out, shown.len() * (1 + withscores as usize + withattribs as usize));
    }
    for h in shown {
        reply::bulk(out, h.name);
        if proto.is_resp3() && withscores && withattribs {
            reply::array_len(out, 2);
        }
        if withscores {
            push_score(out, proto, h.score);
        }
        if withattribs {
            match h.attr {
                Some(a) => reply::bulk(out, a),
                None => reply::null_bulk(out, proto),
            }
        }
    }
}

/// VDIM key
fn vdim(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match look(c, args[1], false) {
        Look::Missing => reply::error(out, b"ERR key does not exist"),
        Look::Wrong => reply::error(out, errors::WRONGTYPE),
        Look::Vset => reply::integer(out, vset(c, args[1]).dim() as i64),
    }
}

/// VCARD key
fn vcard(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match look(c, args[1], false) {
        Look::Missing => reply::integer(out, 0),
        Look::Wrong => reply::error(out, errors::WRONGTYPE),
        Look::Vset => reply::integer(out, vset(c, args[1]).len() as i64),
    }
}

/// VEMB key element [RAW]
fn vemb(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let mut raw = false;
    for a in &args[3..] {
        if eq_ic(a, b"RAW") {
            raw = true;
        } else {
            return reply::error(out, b"ERR invalid option");
        }
    }
    match look(c, args[1], false) {
        Look::Missing => return reply::null_bulk(out, c.proto),
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Vset => {}
    }
    let proto = c.proto;
    let set = vset(c, args[1]);
    if raw {
        let Some(r) = set.raw_embedding(args[2]) else {
            return reply::null_bulk(out, proto);
        };
        reply::array_len(out, 3 + r.range.is_some() as usize);
        reply::simple(out, r.kind.as_bytes());
        reply::bulk(out, &r.data);
        push_score(out, proto, r.l2 as f64);
        if let Some(range) = r.range {
            push_score(out, proto, range as f64);
        }
        return;
    }
    let Some(v) = set.embedding(args[2]) else {
        return reply::null_bulk(out, proto);
    };
    reply::array_len(out, v.len());
    for x in v {
        push_score(out, proto, x as f64);
    }
}

/// VLINKS key element [WITHSCORES]
fn vlinks(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if args.len() > 4 || (args.len() == 4 && !eq_ic(args[3], b"WITHSCORES")) {
        return errors::wrong_arity_upper(out, args[0]);
    }
    let withscores = args.len() == 4;
    match look(c, args[1], false) {
        Look::Missing => return reply::null_bulk(out, c.proto),
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Vset => {}
    }
    let proto = c.proto;
    let Some(levels) = vset(c, args[1]).links(args[2]) else {
        return reply::null_bulk(out, proto);
    };
    reply::array_len(out, levels.len());
    for level in levels {
        if withscores {
            reply::map_len(out, proto, level.len());
        } else {
            reply::array_len(out, level.len());
        }
        for (name, score) in level {
            reply::bulk(out, name);
            if withscores {
                push_score(out, proto, score);
            }
        }
    }
}

/// VINFO key
fn vinfo(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match look(c, args[1], false) {
        Look::Missing => return reply::null_array(out, c.proto),
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Vset => {}
    }
    let proto = c.proto;
    let set = vset(c, args[1]);
    reply::map_len(out, proto, 9);
    reply::simple(out, b"quant-type");
    reply::simple(out, set.quant().info_name().as_bytes());
    let ints: [(&[u8], i64); 8] = [
        (b"hnsw-m", set.m() as i64),
        (b"vector-dim", set.dim() as i64),
        (b"projection-input-dim", set.projection_input_dim() as i64),
        (b"size", set.len() as i64),
        (b"max-level", set.max_level() as i64),
        (b"attributes-count", set.attributes_count() as i64),
        (b"vset-uid", set.uid() as i64),
        (b"hnsw-max-node-uid", set.max_node_uid() as i64),
    ];
    for (name, v) in ints {
        reply::simple(out, name);
        reply::integer(out, v);
    }
}

/// VSETATTR key element attributes
fn vsetattr(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match look(c, args[1], true) {
        Look::Missing => return reply::boolean(out, c.proto, false),
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Vset => {}
    }
    if !vset_mut(c, args[1]).set_attr(args[2], args[3]) {
        return reply::boolean(out, c.proto, false);
    }
    c.emit_request(b"VSETATTR", args);
    reply::boolean(out, c.proto, true);
}

/// VGETATTR key element
fn vgetattr(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match look(c, args[1], false) {
        Look::Missing => return reply::null_bulk(out, c.proto),
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Vset => {}
    }
    let proto = c.proto;
    match vset(c, args[1]).attr(args[2]) {
        Some(a) => reply::bulk(out, a),
        None => reply::null_bulk(out, proto),
    }
}

/// VRANDMEMBER key [count]
fn vrandmember(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if args.len() > 3 {
        return errors::wrong_arity_upper(out, args[0]);
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => match parse_i64(a) {
            Some(0) => return reply::array_len(out, 0),
            Some(n) => Some(n),
            None => return reply::error(out, b"ERR COUNT value is not an integer"),
        },
    };
    let proto = c.proto;
    match look(c, args[1], false) {
        Look::Missing if count.is_none() => return reply::null_bulk(out, proto),
        Look::Missing => return reply::array_len(out, 0),
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Vset => {}
    }
    // More than a reply could ever hold: refused, where Redis would try to build it (after
    // the key's type, as Redis judges that first).
    if count.is_some_and(|n| n < -(i64::MAX / 2)) {
        return reply::error(out, b"ERR value is out of range");
    }
    let set = match c.ks.get(args[1]) {
        Some(ValueRef::VectorSet(v)) => v,
        _ => unreachable!("checked to be a vector set"),
    };
    let rng = &mut *c.rng;
    let Some(n) = count else {
        return match set.random(rng) {
            Some(e) => reply::bulk(out, e),
            None => reply::null_bulk(out, proto),
        };
    };
    if n < 0 {
        let n = n.unsigned_abs() as usize;
        reply::array_len(out, n);
        for _ in 0..n {
            reply::bulk(out, set.random(rng).expect("a vector set is never empty"));
        }
        return;
    }
    let n = (n as usize).min(set.len());
    reply::array_len(out, n);
    if n * 5 <= set.len() {
        // A small sample: draw until `n` distinct elements came up.
        let mut seen = std::collections::HashSet::with_capacity(n);
        while seen.len() < n {
            let e = set.random(rng).expect("a vector set is never empty");
            if seen.insert(e) {
                reply::bulk(out, e);
            }
        }
    } else {
        // A large one: from a random element onwards in name order, wrapping around (as
        // Redis walks its node list from a random node: distinct, not independent draws).
        let start = set.random(rng).expect("a vector set is never empty");
        let after = set.range(RangeEnd::Inclusive(start), RangeEnd::Open, n);
        let before = set.range(RangeEnd::Open, RangeEnd::Exclusive(start), n - after.len());
        for e in after.into_iter().chain(before) {
            reply::bulk(out, e);
        }
    }
}

/// VISMEMBER key element
fn vismember(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match look(c, args[1], false) {
        Look::Missing => reply::boolean(out, c.proto, false),
        Look::Wrong => reply::error(out, errors::WRONGTYPE),
        Look::Vset => {
            let has = vset(c, args[1]).contains(args[2]);
            reply::boolean(out, c.proto, has)
        }
    }
}

/// One VRANGE bound: `-`, `+`, `[name` or `(name`. `None` when malformed; the flags say
/// whether it was `-` or `+`.
fn parse_range_end(a: &[u8]) -> Option<(RangeEnd<'_>, bool, bool)> {
    match a {
        b"-" => Some((RangeEnd::Open, true, false)),
        b"+" => Some((RangeEnd::Open, false, true)),
        [b'[', rest @ ..] if !rest.is_empty() => Some((RangeEnd::Inclusive(rest), false, false)),
        [b'(', rest @ ..] if !rest.is_empty() => Some((RangeEnd::Exclusive(rest), false, false)),
        _ => None,
    }
}

/// VRANGE key start end [count]
fn vrange(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    if args.len() > 5 {
        return errors::wrong_arity_upper(out, args[0]);
    }
    let mut limit = usize::MAX;
    if let Some(a) = args.get(4) {
        match parse_i64(a) {
            Some(n) if n >= 0 => limit = n as usize,
            Some(_) => {}
            None => return reply::error(out, b"ERR invalid COUNT value"),
        }
    }
    let Some((start, _, start_plus)) = parse_range_end(args[2]) else {
        return reply::error(out, b"ERR invalid start range format");
    };
    let Some((end, end_minus, _)) = parse_range_end(args[3]) else {
        return reply::error(out, b"ERR invalid end range format");
    };
    if start_plus || end_minus {
        return reply::error(out, b"ERR '-' can only be used as first argument, '+' only as second");
    }
    match look(c, args[1], false) {
        Look::Missing => return reply::array_len(out, 0),
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Vset => {}
    }
    let names = vset(c, args[1]).range(start, end, limit);
    reply::array_len(out, names.len());
    for n in names {
        reply::bulk(out, n);
    }
}
