//! Geospatial commands on sorted sets: GEOADD, GEODIST, GEOHASH, GEOPOS, GEOSEARCH,
//! GEOSEARCHSTORE.
//!
//! A position is stored as a sorted-set score: Redis's 52-bit geohash, the latitude (over
//! -85.05112878..85.05112878) and longitude (over -180..180) each scaled to 26 bits and
//! interleaved, latitude in the even bits. Positions decode to the centre of their cell, so
//! GEOPOS returns what Redis returns for the same score. Distances are haversine on a sphere of
//! radius 6372797.560856 m, computed with the same operations in the same order as Redis, so
//! the same inputs give the same bits (the platform's libm, as Redis uses it).
//!
//! GEOSEARCH walks Redis's search cells (a geohash cell sized by the radius, its eight
//! neighbours, the ones the shape cannot touch dropped, a repeated neighbour skipped) in
//! Redis's order, scans each cell's score range, and keeps the points inside the circle or
//! box: results, their unsorted order and where COUNT ANY stops are Redis's. Sorting by
//! distance is stable, as glibc's qsort is for Redis (with COUNT below the number of matches
//! Redis partially sorts, which may order points at exactly equal distances differently).
//!
//! Canonical mutations: GEOADD is ZADD (its handler runs with the encoded scores, so it
//! emits `ZADD key score member` per changed member); GEOSEARCHSTORE writes the destination
//! as the sorted-set store commands do (`DEL dst` if it existed, then one `ZADD` per member),
//! or `DEL dst` when nothing matched.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::commands::zset::{store_items, zadd_pairs, AddFlags, DstForm};
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{eq_ic, parse_f64, parse_i64};
use resp::{reply, Proto};
use store::types::ZSet;
use store::ValueRef;

const G: &str = "geo";

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec("geoadd", -5, Flags::WRITE | Flags::DENYOOM, (1, 1, 1), G, "Adds one or more members to a geospatial index. The key is created if it doesn't exist.", Handler::Data(geoadd)),
    spec("geodist", -4, Flags::READONLY, (1, 1, 1), G, "Returns the distance between two members of a geospatial index.", Handler::Data(geodist)),
    spec("geohash", -2, Flags::READONLY, (1, 1, 1), G, "Returns members from a geospatial index as geohash strings.", Handler::Data(geohash)),
    spec("geopos", -2, Flags::READONLY, (1, 1, 1), G, "Returns the longitude and latitude of members from a geospatial index.", Handler::Data(geopos)),
    spec("geosearch", -7, Flags::READONLY, (1, 1, 1), G, "Queries a geospatial index for members inside an area of a box or a circle.", Handler::Data(geosearch)),
    // The deprecated GEORADIUS family, kept because clients still send it: each is rewritten to
    // the GEOSEARCH or GEOSEARCHSTORE it means (same search, same canonical mutations).
    spec("georadius", -6, Flags::WRITE | Flags::DENYOOM, (1, 1, 1), G, "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.", Handler::Data(georadius)),
    spec("georadius_ro", -6, Flags::READONLY, (1, 1, 1), G, "Returns members from a geospatial index that are within a distance from a coordinate.", Handler::Data(georadius)),
    spec("georadiusbymember", -5, Flags::WRITE | Flags::DENYOOM, (1, 1, 1), G, "Queries a geospatial index for members within a distance from a member, optionally stores the result.", Handler::Data(georadius)),
    spec("georadiusbymember_ro", -5, Flags::READONLY, (1, 1, 1), G, "Returns members from a geospatial index that are within a distance from a member.", Handler::Data(georadius)),
    spec("geosearchstore", -8, Flags::WRITE | Flags::DENYOOM, (1, 2, 1), G, "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.", Handler::Data(geosearchstore)),
];

const LONG_MIN: f64 = -180.0;
const LONG_MAX: f64 = 180.0;
const LAT_MIN: f64 = -85.05112878;
const LAT_MAX: f64 = 85.05112878;
const STEP_MAX: u8 = 26;
const EARTH_RADIUS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

const UNIT_ERR: &[u8] = b"ERR unsupported unit provided. please use M, KM, FT, MI";
const MEMBER_ERR: &[u8] = b"ERR could not decode requested zset member";

// ---------------------------------------------------------------------------------------------
// Geohash arithmetic.

#[derive(Clone, Copy, PartialEq, Eq)]
struct Hash {
    bits: u64,
    step: u8,
}

impl Hash {
    const ZERO: Hash = Hash { bits: 0, step: 0 };
    fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

#[derive(Clone, Copy)]
struct Range {
    min: f64,
    max: f64,
}

const LONG_RANGE: Range = Range { min: LONG_MIN, max: LONG_MAX };
const LAT_RANGE: Range = Range { min: LAT_MIN, max: LAT_MAX };

/// Spreads the 32 bits of `v` to the even bit positions of a u64.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gathers the even bits of `v` into a u32.
fn squash(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF;
    x as u32
}

/// C's conversion of a non-negative double to uint32_t (truncation; in range here).
fn to_u32(v: f64) -> u32 {
    v as u32
}

/// Encodes a position at `step` bits per coordinate over the given ranges; None outside the
/// Mercator limits or the ranges.
fn encode(lon_r: Range, lat_r: Range, lon: f64, lat: f64, step: u8) -> Option<Hash> {
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_r.min || lat > lat_r.max || lon < lon_r.min || lon > lon_r.max {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_off = (lat - lat_r.min) / (lat_r.max - lat_r.min) * scale;
    let lon_off = (lon - lon_r.min) / (lon_r.max - lon_r.min) * scale;
    Some(Hash { bits: spread(to_u32(lat_off)) | (spread(to_u32(lon_off)) << 1), step })
}

struct Area {
    lon: Range,
    lat: Range,
}

fn decode(h: Hash) -> Option<Area> {
    if h.is_zero() {
        return None;
    }
    let ilat = squash(h.bits);
    let ilon = squash(h.bits >> 1);
    let div = (1u64 << h.step) as f64;
    let lat_scale = LAT_MAX - LAT_MIN;
    let lon_scale = LONG_MAX - LONG_MIN;
    Some(Area {
        lat: Range {
            min: LAT_MIN + (f64::from(ilat) / div) * lat_scale,
            max: LAT_MIN + (f64::from(ilat.wrapping_add(1)) / div) * lat_scale,
        },
        lon: Range {
            min: LONG_MIN + (f64::from(ilon) / div) * lon_scale,
            max: LONG_MIN + (f64::from(ilon.wrapping_add(1)) / div) * lon_scale,
        },
    })
}

/// C's `(uint64_t)` of a double on x86-64 (what `decodeGeohash` does with a score).
fn score_bits(s: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if s.is_nan() {
        return 1 << 63;
    }
    if s < TWO_63 {
        // cvttsd2si: out of range gives i64::MIN, as the saturating cast does below.
        if s < -TWO_63 {
            return 1 << 63;
        }
        s as i64 as u64
    } else {
        let t = s - TWO_63;
        let v = if t >= TWO_63 { i64::MIN } else { t as i64 };
        (v as u64) ^ (1 << 63)
    }
}

/// The position a score stands for: the centre of its 26-bit cell, clamped to the limits.
fn decode_score(score: f64) -> Option<(f64, f64)> {
    let a = decode(Hash { bits: score_bits(score), step: STEP_MAX })?;
    let lon = ((a.lon.min + a.lon.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((a.lat.min + a.lat.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    Some((lon, lat))
}

/// The score GEOADD stores for a (valid) position.
pub fn encode_score(lon: f64, lat: f64) -> u64 {
    encode(LONG_RANGE, LAT_RANGE, lon, lat, STEP_MAX).map_or(0, |h| h.bits)
}

fn move_x(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let mut x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> (64 - u32::from(h.step) * 2);
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaa_aaaa_aaaa_aaaau64 >> (64 - u32::from(h.step) * 2);
    h.bits = x | y;
}

fn move_y(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> (64 - u32::from(h.step) * 2);
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555_5555_5555_5555u64 >> (64 - u32::from(h.step) * 2);
    h.bits = x | y;
}

fn moved(h: Hash, dx: i8, dy: i8) -> Hash {
    let mut n = h;
    move_x(&mut n, dx);
    move_y(&mut n, dy);
    n
}

fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS * ((lat2 * D_R) - (lat1 * D_R)).abs()
}

fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = lon1 * D_R;
    let lon2r = lon2 * D_R;
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = lat1 * D_R;
    let lat2r = lat2 * D_R;
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS * a.sqrt().asin()
}

// ---------------------------------------------------------------------------------------------
// Replies and arguments.

/// A coordinate as Redis 8 replies it (GEOPOS, WITHCOORD): a double reply (RESP3) or bulk
/// string (RESP2) of Grisu2's shortest digits (7.0 printed `%.17Lf`, trimmed).
fn human(out: &mut Vec<u8>, proto: Proto, v: f64) {
    reply::double(out, proto, crate::util::format_f64(v).as_bytes());
}

/// A distance with four decimals (Redis's `fixedpoint_d2string(.., 4)`: round half to even
/// of d * 10^4), always a bulk string.
fn dist_reply(out: &mut Vec<u8>, d: f64) {
    let v = (d * 10000.0).round_ties_even();
    let v = if v >= 9.223_372_036_854_776e18 { i64::MAX } else { v as i64 };
    let (neg, a) = (v < 0, v.unsigned_abs());
    let s = format!("{}{}.{:04}", if neg { "-" } else { "" }, a / 10000, a % 10000);
    reply::bulk(out, s.as_bytes());
}

fn unit(a: &[u8]) -> Option<f64> {
    let u = cstr(a);
    if eq_ic(u, b"m") {
        Some(1.0)
    } else if eq_ic(u, b"km") {
        Some(1000.0)
    } else if eq_ic(u, b"ft") {
        Some(0.3048)
    } else if eq_ic(u, b"mi") {
        Some(1609.34)
    } else {
        None
    }
}

fn cstr(a: &[u8]) -> &[u8] {
    a.iter().position(|&b| b == 0).map_or(a, |n| &a[..n])
}

fn is_word(a: &[u8], w: &[u8]) -> bool {
    eq_ic(cstr(a), w)
}

/// A double argument as Redis's `getDoubleFromObjectOrReply` reads it; the error text is
/// `msg` (or the generic one).
fn double_arg(out: &mut Vec<u8>, a: &[u8], msg: Option<&[u8]>) -> Option<f64> {
    let v = parse_f64(a);
    if v.is_none() {
        match msg {
            Some(m) => {
                let mut e = b"ERR ".to_vec();
                e.extend_from_slice(m);
                reply::error(out, &e);
            }
            None => reply::error(out, errors::NOT_FLOAT),
        }
    }
    v
}

/// Two arguments as a longitude,latitude pair inside the limits.
fn lon_lat(out: &mut Vec<u8>, args: &[&[u8]]) -> Option<(f64, f64)> {
    let lon = double_arg(out, args[0], None)?;
    let lat = double_arg(out, args[1], None)?;
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        let msg = format!("ERR invalid longitude,latitude pair {lon:.6},{lat:.6}");
        reply::error(out, msg.as_bytes());
        return None;
    }
    Some((lon, lat))
}

fn read_zset<'c>(c: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c ZSet>, ()> {
    match c.read(key) {
        None => Ok(None),
        Some(ValueRef::ZSet(z)) => Ok(Some(z)),
        Some(_) => Err(()),
    }
}

// ---------------------------------------------------------------------------------------------
// GEOADD, GEODIST, GEOHASH, GEOPOS

/// GEOADD key [NX|XX] [CH] longitude latitude member [longitude latitude member ...]
fn geoadd(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let mut f = AddFlags::default();
    let mut i = 2;
    while i < args.len() {
        let a = args[i];
        if is_word(a, b"nx") {
            f.nx = true;
        } else if is_word(a, b"xx") {
            f.xx = true;
        } else if is_word(a, b"ch") {
            f.ch = true;
        } else {
            break;
        }
        i += 1;
    }
    let rest = &args[i..];
    if !rest.len().is_multiple_of(3) || (f.nx && f.xx) || rest.is_empty() {
        return reply::error(out, errors::SYNTAX);
    }
    let mut pairs: Vec<(f64, &[u8])> = Vec::with_capacity(rest.len() / 3);
    for t in rest.chunks_exact(3) {
        let Some((lon, lat)) = lon_lat(out, t) else { return };
        pairs.push((encode_score(lon, lat) as f64, t[2]));
    }
    zadd_pairs(c, out, args[1], f, &pairs);
}

/// GEODIST key member1 member2 [M|KM|FT|MI]
fn geodist(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let to_meter = match args.len() {
        4 => 1.0,
        5 => match unit(args[4]) {
            Some(u) => u,
            None => return reply::error(out, UNIT_ERR),
        },
        _ => return reply::error(out, errors::SYNTAX),
    };
    let proto = c.proto;
    let z = match read_zset(c, args[1]) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(None) => return reply::null_bulk(out, proto),
        Ok(Some(z)) => z,
    };
    let (Some(s1), Some(s2)) = (z.score(args[2]), z.score(args[3])) else {
        return reply::null_bulk(out, proto);
    };
    match (decode_score(s1), decode_score(s2)) {
        (Some(a), Some(b)) => dist_reply(out, distance(a.0, a.1, b.0, b.1) / to_meter),
        _ => reply::null_bulk(out, proto),
    }
}

/// GEOHASH key [member ...]
fn geohash(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let proto = c.proto;
    let z = match read_zset(c, args[1]) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(z) => z,
    };
    reply::array_len(out, args.len() - 2);
    for m in &args[2..] {
        let Some((lon, lat)) = z.and_then(|z| z.score(m)).and_then(decode_score) else {
            reply::null_bulk(out, proto);
            continue;
        };
        // Standard geohash ranges (latitude -90..90), re-encoded from the decoded position.
        let r_lon = Range { min: -180.0, max: 180.0 };
        let r_lat = Range { min: -90.0, max: 90.0 };
        let bits = encode(r_lon, r_lat, lon, lat, 26).map_or(0, |h| h.bits);
        let mut buf = [0u8; 11];
        for (i, b) in buf.iter_mut().enumerate() {
            // 52 bits make ten characters; the eleventh is always '0'.
            let idx = if i == 10 { 0 } else { ((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize };
            *b = ALPHABET[idx];
        }
        reply::bulk(out, &buf);
    }
}

/// GEOPOS key [member ...]
fn geopos(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let proto = c.proto;
    let z = match read_zset(c, args[1]) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(z) => z,
    };
    reply::array_len(out, args.len() - 2);
    for m in &args[2..] {
        match z.and_then(|z| z.score(m)).and_then(decode_score) {
            None => reply::null_array(out, proto),
            Some((lon, lat)) => {
                reply::array_len(out, 2);
                human(out, proto, lon);
                human(out, proto, lat);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// GEOSEARCH, GEOSEARCHSTORE

#[derive(Clone, Copy)]
enum Shape {
    Circle { radius: f64 },
    Box { width: f64, height: f64 },
}

struct Search {
    lon: f64,
    lat: f64,
    shape: Shape,
    /// Metres per unit.
    conversion: f64,
}

struct Point {
    member: Vec<u8>,
    lon: f64,
    lat: f64,
    dist: f64,
    score: f64,
}

fn estimate_steps(mut range: f64, lat: f64) -> u8 {
    if range == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// Redis's `geohashCalculateAreasByShapeWGS84`: the centre cell and its neighbours in search
/// order (centre, N, S, E, W, NE, NW, SE, SW), the useless ones zeroed.
fn search_cells(s: &Search) -> [Hash; 9] {
    let (half_h, half_w) = match s.shape {
        Shape::Circle { radius } => (radius, radius),
        Shape::Box { width, height } => (height / 2.0, width / 2.0),
    };
    let height = s.conversion * half_h;
    let width = s.conversion * half_w;
    let lat_delta = (height / EARTH_RADIUS) / D_R;
    let long_delta_top = (width / EARTH_RADIUS / ((s.lat + lat_delta) * D_R).cos()) / D_R;
    let long_delta_bottom = (width / EARTH_RADIUS / ((s.lat - lat_delta) * D_R).cos()) / D_R;
    let southern = s.lat < 0.0;
    let min_lon = if southern { s.lon - long_delta_bottom } else { s.lon - long_delta_top };
    let max_lon = if southern { s.lon + long_delta_bottom } else { s.lon + long_delta_top };
    let min_lat = s.lat - lat_delta;
    let max_lat = s.lat + lat_delta;

    let mut radius = match s.shape {
        Shape::Circle { radius } => radius,
        Shape::Box { width, height } => {
            ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
        }
    };
    radius *= s.conversion;
    let mut steps = estimate_steps(radius, s.lat);
    let cells = |steps: u8| {
        let h = encode(LONG_RANGE, LAT_RANGE, s.lon, s.lat, steps).unwrap_or(Hash { bits: 0, step: steps });
        [
            h,
            moved(h, 0, 1),   // north
            moved(h, 0, -1),  // south
            moved(h, 1, 0),   // east
            moved(h, -1, 0),  // west
            moved(h, 1, 1),   // north-east
            moved(h, -1, 1),  // north-west
            moved(h, 1, -1),  // south-east
            moved(h, -1, -1), // south-west
        ]
    };
    let mut n = cells(steps);
    let area_of = |h: Hash| {
        decode(h).unwrap_or(Area { lon: Range { min: 0.0, max: 0.0 }, lat: Range { min: 0.0, max: 0.0 } })
    };
    let decrease = {
        let (north, south, east, west) = (area_of(n[1]), area_of(n[2]), area_of(n[3]), area_of(n[4]));
        north.lat.max < max_lat || south.lat.min > min_lat || east.lon.max < max_lon || west.lon.min > min_lon
    };
    if steps > 1 && decrease {
        steps -= 1;
        n = cells(steps);
    }
    let area = area_of(n[0]);
    if steps >= 2 {
        if area.lat.min < min_lat {
            for i in [2, 8, 7] {
                n[i] = Hash::ZERO;
            }
        }
        if area.lat.max > max_lat {
            for i in [1, 5, 6] {
                n[i] = Hash::ZERO;
            }
        }
        if area.lon.min < min_lon {
            for i in [4, 8, 6] {
                n[i] = Hash::ZERO;
            }
        }
        if area.lon.max > max_lon {
            for i in [3, 7, 5] {
                n[i] = Hash::ZERO;
            }
        }
    }
    n
}

/// The point at `score` if it lies inside the search shape, with its distance (metres).
fn within(s: &Search, score: f64) -> Option<(f64, f64, f64)> {
    let (lon, lat) = decode_score(score)?;
    match s.shape {
        Shape::Circle { radius } => {
            let r = radius * s.conversion;
            // A cheap pre-filter that cannot change the result: the great-circle distance is
            // never shorter than the distance along the meridian (R * |dlat|), and the two
            // computed values differ by far less than the margin (rounding is worst near
            // antipodes, centimetres at most), so a point it rejects is outside anyway.
            if lat_distance(s.lat, lat) > r + r * 1e-6 + 1.0 {
                return None;
            }
            let d = distance(s.lon, s.lat, lon, lat);
            (d <= r).then_some((lon, lat, d))
        }
        Shape::Box { width, height } => {
            let (w, h) = (width * s.conversion, height * s.conversion);
            if lat_distance(s.lat, lat) > h / 2.0 {
                return None;
            }
            if distance(lon, lat, s.lon, lat) > w / 2.0 {
                return None;
            }
            Some((lon, lat, distance(s.lon, s.lat, lon, lat)))
        }
    }
}

/// Every member inside the shape, in Redis's discovery order, stopping at `limit` (0: none).
fn search(z: &ZSet, s: &Search, limit: usize) -> Vec<Point> {
    let cells = search_cells(s);
    let mut found: Vec<Point> = Vec::new();
    let mut last: usize = 0;
    for (i, &h) in cells.iter().enumerate() {
        if h.is_zero() {
            continue;
        }
        // A huge radius can make neighbours repeat: skip one equal to the last cell searched
        // (never compared with the centre, which is cell 0, as Redis does).
        if last != 0 && h == cells[last] {
            continue;
        }
        if !found.is_empty() && limit != 0 && found.len() >= limit {
            break;
        }
        let shift = 52 - u32::from(h.step) * 2;
        let min = (h.bits << shift) as f64;
        let max = ((h.bits + 1) << shift) as f64;
        let start = z.count_below(min, false);
        for (m, sc) in z.iter_from(start) {
            if sc >= max {
                break;
            }
            if let Some((lon, lat, dist)) = within(s, sc) {
                found.push(Point { member: m.to_vec(), lon, lat, dist, score: sc });
            }
            if !found.is_empty() && limit != 0 && found.len() >= limit {
                break;
            }
        }
        last = i;
    }
    found
}

#[derive(PartialEq, Clone, Copy)]
enum Order {
    None,
    Asc,
    Desc,
}

/// GEOSEARCH key <FROMMEMBER member | FROMLONLAT lon lat> <BYRADIUS r unit | BYBOX w h unit>
///   [ASC|DESC] [COUNT n [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]
fn geosearch(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    search_generic(c, out, args, None, None)
}

/// GEOSEARCHSTORE dst src ... [STOREDIST]
fn geosearchstore(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    search_generic(c, out, args, Some(args[1]), None)
}

/// GEORADIUS key lon lat radius unit [opts] [STORE k] [STOREDIST k], GEORADIUSBYMEMBER key
/// member radius unit [opts] ..., and their _RO forms (no STORE): rewritten as GEOSEARCH /
/// GEOSEARCHSTORE with FROMLONLAT or FROMMEMBER and BYRADIUS.
fn georadius(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let name = args[0].to_ascii_lowercase();
    let by_member = name.starts_with(b"georadiusbymember");
    let read_only = name.ends_with(b"_ro");
    let (from, after): (Vec<&[u8]>, usize) = if by_member {
        (vec![b"FROMMEMBER", args[2]], 3)
    } else {
        (vec![b"FROMLONLAT", args[2], args[3]], 4)
    };
    let (radius, unit) = (args[after], args[after + 1]);
    let mut rest: Vec<&[u8]> = Vec::new();
    let (mut store, mut storedist): (Option<&[u8]>, bool) = (None, false);
    let mut i = after + 2;
    while i < args.len() {
        let a = args[i];
        if !read_only && (is_word(a, b"store") || is_word(a, b"storedist")) && i + 1 < args.len() {
            store = Some(args[i + 1]);
            storedist = is_word(a, b"storedist");
            i += 2;
            continue;
        }
        rest.push(a);
        i += 1;
    }
    let mut argv: Vec<&[u8]> = vec![args[0]];
    if let Some(dst) = store {
        argv.push(dst);
    }
    argv.push(args[1]);
    argv.extend(from);
    argv.extend([&b"BYRADIUS"[..], radius, unit]);
    argv.extend(rest);
    if storedist {
        argv.push(b"STOREDIST");
    }
    search_generic(c, out, &argv, store, Some(by_member))
}

/// GEOSEARCH and GEOSEARCHSTORE, and the GEORADIUS family rewritten as them (`radius`: Some,
/// and whether by member). Arguments are judged in Redis's order: the source's type, the
/// origin and shape, each option in turn, then the combinations; a GEORADIUSBYMEMBER of a
/// missing key reads no radius, as Redis skips it there.
fn search_generic(
    c: &mut Ctx,
    out: &mut Vec<u8>,
    args: &[&[u8]],
    store: Option<&[u8]>,
    radius: Option<bool>,
) {
    let src = if store.is_some() { args[2] } else { args[1] };
    let base = if store.is_some() { 3 } else { 2 };
    // The source's type is checked first; its members are copied once the origin is known.
    let exists = match read_zset(c, src) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(z) => z.is_some(),
    };
    let (mut withdist, mut withhash, mut withcoord, mut any, mut storedist) =
        (false, false, false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut order = Order::None;
    let mut count: i64 = 0;
    let (mut lon, mut lat) = (0.0, 0.0);
    let mut shape = Shape::Circle { radius: 0.0 };
    let mut conversion = 1.0;
    let remaining = args.len() - base;
    let mut i = 0;
    while i < remaining {
        let a = args[base + i];
        let arg = |k: usize| args[base + i + k];
        if is_word(a, b"withdist") {
            withdist = true;
        } else if is_word(a, b"withhash") {
            withhash = true;
        } else if is_word(a, b"withcoord") {
            withcoord = true;
        } else if is_word(a, b"any") {
            any = true;
        } else if is_word(a, b"asc") {
            order = Order::Asc;
        } else if is_word(a, b"desc") {
            order = Order::Desc;
        } else if is_word(a, b"count") && i + 1 < remaining {
            match parse_i64(arg(1)) {
                None => return reply::error(out, errors::NOT_INTEGER),
                Some(n) if n <= 0 => return reply::error(out, b"ERR COUNT must be > 0"),
                Some(n) => count = n,
            }
            i += 1;
        } else if is_word(a, b"storedist") && store.is_some() {
            storedist = true;
        } else if is_word(a, b"frommember") && i + 1 < remaining && !fromloc {
            if exists {
                let member = arg(1);
                let pos = match read_zset(c, src) {
                    Ok(Some(z)) => z.score(member).and_then(decode_score),
                    _ => None,
                };
                match pos {
                    Some((x, y)) => (lon, lat) = (x, y),
                    None => return reply::error(out, MEMBER_ERR),
                }
            }
            frommember = true;
            i += 1;
        } else if is_word(a, b"fromlonlat") && i + 2 < remaining && !frommember {
            let Some((x, y)) = lon_lat(out, &args[base + i + 1..base + i + 3]) else { return };
            (lon, lat) = (x, y);
            fromloc = true;
            i += 2;
        } else if is_word(a, b"byradius") && i + 2 < remaining && !bybox && radius == Some(true) && !exists {
            byradius = true;
            i += 2;
        } else if is_word(a, b"byradius") && i + 2 < remaining && !bybox {
            let Some(r) = double_arg(out, arg(1), Some(b"need numeric radius")) else { return };
            if r < 0.0 {
                return reply::error(out, b"ERR radius cannot be negative");
            }
            let Some(u) = unit(arg(2)) else { return reply::error(out, UNIT_ERR) };
            shape = Shape::Circle { radius: r };
            conversion = u;
            byradius = true;
            i += 2;
        } else if is_word(a, b"bybox") && i + 3 < remaining && !byradius {
            let Some(w) = double_arg(out, arg(1), Some(b"need numeric width")) else { return };
            let Some(h) = double_arg(out, arg(2), Some(b"need numeric height")) else { return };
            if h < 0.0 || w < 0.0 {
                return reply::error(out, b"ERR height or width cannot be negative");
            }
            let Some(u) = unit(arg(3)) else { return reply::error(out, UNIT_ERR) };
            shape = Shape::Box { width: w, height: h };
            conversion = u;
            bybox = true;
            i += 3;
        } else {
            return reply::error(out, errors::SYNTAX);
        }
        i += 1;
    }
    if store.is_some() && (withdist || withhash || withcoord) {
        return reply::error(
            out,
            if radius.is_some() {
                &b"ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"[..]
            } else {
                b"ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
            },
        );
    }
    let name = String::from_utf8_lossy(cstr(args[0])).into_owned();
    if !(frommember || fromloc) {
        let msg = format!("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}");
        return reply::error(out, msg.as_bytes());
    }
    if !(byradius || bybox) {
        let msg = format!("ERR exactly one of BYRADIUS and BYBOX can be specified for {name}");
        return reply::error(out, msg.as_bytes());
    }
    if any && count == 0 {
        return reply::error(out, b"ERR the ANY argument requires COUNT argument");
    }
    if !exists {
        return match store {
            Some(dst) => {
                if c.exists(dst) {
                    c.ks.delete(dst);
                    c.emit(&[b"DEL", dst]);
                }
                reply::integer(out, 0)
            }
            None => reply::array_len(out, 0),
        };
    }
    if count != 0 && order == Order::None && !any {
        order = Order::Asc;
    }
    let s = Search { lon, lat, shape, conversion };
    let limit = if any { count as usize } else { 0 };
    let mut found = match read_zset(c, src) {
        Ok(Some(z)) => search(z, &s, limit),
        _ => Vec::new(),
    };
    let returned = if count == 0 || (found.len() as i64) < count { found.len() } else { count as usize };
    if order != Order::None {
        let cmp = |a: &Point, b: &Point| {
            let o = a.dist.partial_cmp(&b.dist).unwrap_or(std::cmp::Ordering::Equal);
            if order == Order::Desc {
                o.reverse()
            } else {
                o
            }
        };
        // Like Redis: a full sort (stable, as glibc's qsort) when every match is returned, a
        // partial one for the COUNT nearest (ties at the cut are Redis's partial sort's to
        // choose, and are not reproduced).
        if returned < found.len() && returned > 0 {
            found.select_nth_unstable_by(returned - 1, cmp);
            found.truncate(returned);
        }
        found.sort_by(cmp);
    }
    found.truncate(returned);
    match store {
        None => {
            let opts = usize::from(withdist) + usize::from(withhash) + usize::from(withcoord);
            reply::array_len(out, found.len());
            for p in &found {
                if opts > 0 {
                    reply::array_len(out, opts + 1);
                }
                reply::bulk(out, &p.member);
                if withdist {
                    dist_reply(out, p.dist / conversion);
                }
                if withhash {
                    reply::integer(out, p.score as i64);
                }
                if withcoord {
                    reply::array_len(out, 2);
                    human(out, c.proto, p.lon);
                    human(out, c.proto, p.lat);
                }
            }
        }
        Some(dst) => {
            let mut items: Vec<(Vec<u8>, f64)> = found
                .into_iter()
                .map(|p| {
                    let sc = if storedist { p.dist / conversion } else { p.score };
                    (p.member, sc)
                })
                .collect();
            // The store helper takes members in ascending (score, member) order.
            items.sort_by(|a, b| {
                a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal).then_with(|| a.0.cmp(&b.0))
            });
            let n = store_items(c, dst, &items, DstForm::ByContent);
            reply::integer(out, n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn palermo_scores_and_positions() {
        // Redis's documentation example: GEOADD Sicily 13.361389 38.115556 "Palermo" stores
        // 3479099956230698 and GEOPOS gives back the centre of its cell.
        assert_eq!(encode_score(13.361389, 38.115556), 3479099956230698);
        let (lon, lat) = decode_score(3479099956230698.0).unwrap();
        assert!((lon - 13.361389).abs() < 1e-5 && (lat - 38.115556).abs() < 1e-5);
        let d = distance(13.361389, 38.115556, 15.087269, 37.502669);
        assert!((d - 166274.15).abs() < 1.0, "{d}");
    }

    #[test]
    fn spread_and_squash_invert() {
        for v in [0u32, 1, 0xdead_beef, u32::MAX, 1 << 26] {
            assert_eq!(squash(spread(v)), v);
        }
    }
}
