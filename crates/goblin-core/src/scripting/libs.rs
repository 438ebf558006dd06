//! The libraries Redis loads into its Lua VM, written here in Rust: `bit` (Lua BitOp),
//! `cjson` (lua-cjson's encode/decode), `struct` (Roberto Ierusalimschy's struct library) and
//! `cmsgpack` (lua-cmsgpack's pack/unpack). Behaviour follows the originals' documentation
//! for the common cases; see each function.

use mlua::{LightUserData, Lua, MultiValue, Table, Value, Variadic};
use std::cell::Cell;
use std::rc::Rc;

/// C's `%.<prec>g`.
pub fn fmt_g(x: f64, prec: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let p = prec.max(1);
    let sci = format!("{:.*e}", p - 1, x);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let mut m = mant.to_string();
        if m.contains('.') {
            while m.ends_with('0') {
                m.pop();
            }
            if m.ends_with('.') {
                m.pop();
            }
        }
        format!("{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        let mut s = format!("{:.*}", (p as i32 - 1 - exp).max(0) as usize, x);
        if s.contains('.') {
            while s.ends_with('0') {
                s.pop();
            }
            if s.ends_with('.') {
                s.pop();
            }
        }
        s
    }
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => std::str::from_utf8(&s.as_bytes()).ok().and_then(|t| t.trim().parse().ok()),
        _ => None,
    }
}

/// Registers `bit`, `cjson`, `struct` and `cmsgpack` in `g`.
pub fn register(lua: &Lua, g: &Table) -> mlua::Result<()> {
    g.set("bit", bit_lib(lua)?)?;
    g.set("cjson", cjson_lib(lua)?)?;
    g.set("struct", struct_lib(lua)?)?;
    g.set("cmsgpack", cmsgpack_lib(lua)?)?;
    Ok(())
}

/// struct.pack's error for a non-number where a number goes: luaL_checknumber's text, with
/// the type found ("no value" past the last argument).
fn pack_number_error(args: &[Value], arg: usize) -> mlua::Error {
    let got = args.get(arg).map_or("no value", |v| v.type_name());
    mlua::Error::RuntimeError(format!("bad argument #{} to 'pack' (number expected, got {got})", arg + 1))
}

// ---------------------------------------------------------------------------------------
// bit: Lua BitOp. Arguments are normalised to 32-bit integers (rounded to nearest, modulo
// 2^32) and results are signed 32-bit.

fn tobit(v: &Value, pos: usize, fname: &str) -> mlua::Result<i32> {
    let n = num(v).ok_or_else(|| {
        mlua::Error::RuntimeError(format!(
            "bad argument #{pos} to '{fname}' (number expected, got {})",
            v.type_name()
        ))
    })?;
    // BitOp adds 2^52 + 2^51 and takes the low word: round-half-even, then modulo 2^32.
    let r = n.round_ties_even();
    let m = r.rem_euclid(4294967296.0);
    Ok(m as u64 as u32 as i32)
}

fn bit_lib(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("tobit", lua.create_function(|_, v: Value| Ok(tobit(&v, 1, "tobit")? as f64))?)?;
    t.set("bnot", lua.create_function(|_, v: Value| Ok(!tobit(&v, 1, "bnot")? as f64))?)?;
    fn fold(name: &'static str, args: &Variadic<Value>, op: fn(i32, i32) -> i32) -> mlua::Result<f64> {
        let mut acc = tobit(args.first().unwrap_or(&Value::Nil), 1, name)?;
        for (i, a) in args.iter().enumerate().skip(1) {
            acc = op(acc, tobit(a, i + 1, name)?);
        }
        Ok(acc as f64)
    }
    t.set("band", lua.create_function(|_, a: Variadic<Value>| fold("band", &a, |x, y| x & y))?)?;
    t.set("bor", lua.create_function(|_, a: Variadic<Value>| fold("bor", &a, |x, y| x | y))?)?;
    t.set("bxor", lua.create_function(|_, a: Variadic<Value>| fold("bxor", &a, |x, y| x ^ y))?)?;
    fn shift(name: &'static str, a: Value, n: Value, op: fn(u32, u32) -> u32) -> mlua::Result<f64> {
        let x = tobit(&a, 1, name)? as u32;
        let n = (tobit(&n, 2, name)? as u32) & 31;
        Ok(op(x, n) as i32 as f64)
    }
    t.set("lshift", lua.create_function(|_, (a, n): (Value, Value)| shift("lshift", a, n, |x, n| x << n))?)?;
    t.set("rshift", lua.create_function(|_, (a, n): (Value, Value)| shift("rshift", a, n, |x, n| x >> n))?)?;
    t.set(
        "arshift",
        lua.create_function(|_, (a, n): (Value, Value)| {
            shift("arshift", a, n, |x, n| ((x as i32) >> n) as u32)
        })?,
    )?;
    t.set(
        "rol",
        lua.create_function(|_, (a, n): (Value, Value)| shift("rol", a, n, |x, n| x.rotate_left(n)))?,
    )?;
    t.set(
        "ror",
        lua.create_function(|_, (a, n): (Value, Value)| shift("ror", a, n, |x, n| x.rotate_right(n)))?,
    )?;
    t.set(
        "bswap",
        lua.create_function(|_, a: Value| Ok((tobit(&a, 1, "bswap")? as u32).swap_bytes() as i32 as f64))?,
    )?;
    t.set(
        "tohex",
        lua.create_function(|_, (a, n): (Value, Option<Value>)| {
            let x = tobit(&a, 1, "tohex")? as u32;
            let mut n = match n {
                Some(v) if !v.is_nil() => tobit(&v, 2, "tohex")?,
                _ => 8,
            };
            let upper = n < 0;
            // A negative count asks for upper case; its magnitude is capped at 8 digits
            // (i32::MIN has no positive counterpart: 8 as well, as Redis's fixed BitOp has it).
            n = n.checked_abs().unwrap_or(8);
            let n = n.min(8) as usize;
            let s = if upper { format!("{x:08X}") } else { format!("{x:08x}") };
            Ok(s[8 - n..].to_string())
        })?,
    )?;
    Ok(t)
}

// ---------------------------------------------------------------------------------------
// cjson

/// `cjson.null`: a light userdata holding NULL, as lua-cjson has it.
fn json_null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn json_escape(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b if b < 0x20 || b == 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            b => out.push(b),
        }
    }
    out.push(b'"');
}

/// lua-cjson's settings, per VM (SCRIPT FLUSH starts over from the defaults): the nesting
/// bounds and what encoding a NaN or an infinity does.
struct JsonCfg {
    encode_max_depth: Cell<usize>,
    decode_max_depth: Cell<usize>,
    /// 0: refuse (the default), 1: write `nan`/`inf`/`-inf`, 2: write `null`.
    encode_invalid: Cell<u8>,
}

impl Default for JsonCfg {
    fn default() -> Self {
        JsonCfg {
            encode_max_depth: Cell::new(1000),
            decode_max_depth: Cell::new(1000),
            encode_invalid: Cell::new(0),
        }
    }
}

fn json_number(out: &mut Vec<u8>, n: f64, cfg: &JsonCfg) -> mlua::Result<()> {
    if n.is_nan() || n.is_infinite() {
        match cfg.encode_invalid.get() {
            0 => {
                return Err(mlua::Error::RuntimeError(
                    "Cannot serialise number: must not be NaN or Inf".into(),
                ))
            }
            2 => out.extend_from_slice(b"null"),
            _ => out.extend_from_slice(if n.is_nan() {
                b"nan" as &[u8]
            } else if n > 0.0 {
                b"inf"
            } else {
                b"-inf"
            }),
        }
        return Ok(());
    }
    out.extend_from_slice(fmt_g(n, 14).as_bytes());
    Ok(())
}

/// `depth` tables enclose `v`; a table nested deeper than `encode_max_depth` is refused.
fn json_encode(out: &mut Vec<u8>, v: &Value, depth: usize, cfg: &JsonCfg) -> mlua::Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(u) if u.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => json_number(out, *i as f64, cfg)?,
        Value::Number(n) => json_number(out, *n, cfg)?,
        Value::String(s) => json_escape(out, &s.as_bytes()),
        Value::Table(t) => {
            if depth >= cfg.encode_max_depth.get() {
                return Err(mlua::Error::RuntimeError(format!(
                    "Cannot serialise, excessive nesting ({})",
                    depth + 1
                )));
            }
            // An array when every key is a positive integer and it is not excessively sparse
            // (lua-cjson's defaults: ratio 2, safe up to index 10).
            let mut max = 0usize;
            let mut count = 0usize;
            let mut is_array = true;
            for kv in t.clone().pairs::<Value, Value>() {
                let (k, _) = kv?;
                count += 1;
                let idx = match k {
                    Value::Integer(i) if i >= 1 => Some(i as usize),
                    Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => Some(n as usize),
                    _ => None,
                };
                match idx {
                    Some(i) => max = max.max(i),
                    None => {
                        is_array = false;
                        break;
                    }
                }
            }
            if is_array && max > 10 && max > count * 2 {
                return Err(mlua::Error::RuntimeError(
                    "Cannot serialise table: excessively sparse array".into(),
                ));
            }
            if is_array && count > 0 {
                out.push(b'[');
                for i in 1..=max {
                    if i > 1 {
                        out.push(b',');
                    }
                    let v: Value = t.raw_get(i)?;
                    json_encode(out, &v, depth + 1, cfg)?;
                }
                out.push(b']');
            } else {
                out.push(b'{');
                let mut first = true;
                for kv in t.clone().pairs::<Value, Value>() {
                    let (k, v) = kv?;
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    match &k {
                        Value::String(s) => json_escape(out, &s.as_bytes()),
                        Value::Integer(i) => {
                            out.push(b'"');
                            json_number(out, *i as f64, cfg)?;
                            out.push(b'"');
                        }
                        Value::Number(n) => {
                            out.push(b'"');
                            json_number(out, *n, cfg)?;
                            out.push(b'"');
                        }
                        _ => {
                            return Err(mlua::Error::RuntimeError(
                                "Cannot serialise table: table key must be a number or string".into(),
                            ))
                        }
                    }
                    out.push(b':');
                    json_encode(out, &v, depth + 1, cfg)?;
                }
                out.push(b'}');
            }
        }
        other => {
            return Err(mlua::Error::RuntimeError(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            )))
        }
    }
    Ok(())
}

struct JsonParser<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
    max_depth: usize,
}

impl JsonParser<'_> {
    fn err<T>(&self, what: &str) -> mlua::Result<T> {
        Err(mlua::Error::RuntimeError(format!(
            "Expected {what} but found invalid token at character {}",
            self.i + 1
        )))
    }

    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn value(&mut self, lua: &Lua) -> mlua::Result<Value> {
        self.ws();
        let Some(&c) = self.s.get(self.i) else { return self.err("value") };
        match c {
            b'{' => {
                self.depth += 1;
                if self.depth > self.max_depth {
                    return Err(mlua::Error::RuntimeError(format!(
                        "Found too many nested data structures ({}) at character {}",
                        self.depth,
                        self.i + 1
                    )));
                }
                self.i += 1;
                let t = lua.create_table()?;
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(Value::Table(t));
                }
                loop {
                    self.ws();
                    if self.s.get(self.i) != Some(&b'"') {
                        return self.err("object key string");
                    }
                    let k = self.string(lua)?;
                    self.ws();
                    if self.s.get(self.i) != Some(&b':') {
                        return self.err("colon");
                    }
                    self.i += 1;
                    let v = self.value(lua)?;
                    t.raw_set(k, v)?;
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            break;
                        }
                        _ => return self.err("comma or object end"),
                    }
                }
                self.depth -= 1;
                Ok(Value::Table(t))
            }
            b'[' => {
                self.depth += 1;
                if self.depth > self.max_depth {
                    return Err(mlua::Error::RuntimeError(format!(
                        "Found too many nested data structures ({}) at character {}",
                        self.depth,
                        self.i + 1
                    )));
                }
                self.i += 1;
                let t = lua.create_table()?;
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(Value::Table(t));
                }
                let mut n = 1;
                loop {
                    let v = self.value(lua)?;
                    t.raw_set(n, v)?;
                    n += 1;
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            break;
                        }
                        _ => return self.err("comma or array end"),
                    }
                }
                self.depth -= 1;
                Ok(Value::Table(t))
            }
            b'"' => Ok(Value::String(self.string(lua)?)),
            b't' if self.s[self.i..].starts_with(b"true") => {
                self.i += 4;
                Ok(Value::Boolean(true))
            }
            b'f' if self.s[self.i..].starts_with(b"false") => {
                self.i += 5;
                Ok(Value::Boolean(false))
            }
            b'n' if self.s[self.i..].starts_with(b"null") => {
                self.i += 4;
                Ok(json_null())
            }
            b'-' | b'0'..=b'9' => {
                let start = self.i;
                while self.i < self.s.len()
                    && matches!(self.s[self.i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
                match text.parse::<f64>() {
                    Ok(n) => Ok(Value::Number(n)),
                    Err(_) => {
                        self.i = start;
                        self.err("value")
                    }
                }
            }
            _ => self.err("value"),
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.i..self.i + 4)?;
        let v = u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?;
        self.i += 4;
        Some(v)
    }

    fn string(&mut self, lua: &Lua) -> mlua::Result<mlua::String> {
        let start = self.i;
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.i) else {
                self.i = start;
                return self.err("value");
            };
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = self.s.get(self.i) else { return self.err("value") };
                    self.i += 1;
                    match e {
                        b'"' => out.push(b'"'),
                        b'\\' => out.push(b'\\'),
                        b'/' => out.push(b'/'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let Some(mut cp) = self.hex4() else { return self.err("value") };
                            if (0xD800..0xDC00).contains(&cp)
                                && self.s.get(self.i..self.i + 2) == Some(b"\\u")
                            {
                                self.i += 2;
                                let Some(lo) = self.hex4() else { return self.err("value") };
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo.wrapping_sub(0xDC00) & 0x3ff);
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return self.err("value"),
                    }
                }
                c => out.push(c),
            }
        }
        lua.create_string(&out)
    }
}

/// lua-cjson's depth setters: `f([n])` sets the bound when given (an integer from 1 to
/// 2^31-1) and returns the bound in force.
fn json_depth_setter(lua: &Lua, cfg: &Rc<JsonCfg>, decode: bool) -> mlua::Result<mlua::Function> {
    let cfg = cfg.clone();
    lua.create_function(move |_, arg: Option<Value>| {
        let cell = if decode { &cfg.decode_max_depth } else { &cfg.encode_max_depth };
        if let Some(v) = arg {
            let n = match v {
                Value::Integer(i) => i as f64,
                Value::Number(n) => n,
                _ => f64::NAN,
            };
            if !(1.0..=2_147_483_647.0).contains(&n) {
                return Err(mlua::Error::RuntimeError(
                    "bad argument #1 to '?' (expected integer between 1 and 2147483647)".into(),
                ));
            }
            cell.set(n as usize);
        }
        Ok(cell.get() as i64)
    })
}

fn cjson_lib(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let cfg = Rc::new(JsonCfg::default());
    let c = cfg.clone();
    t.set(
        "encode",
        lua.create_function(move |lua, v: Value| {
            let mut out = Vec::new();
            json_encode(&mut out, &v, 0, &c)?;
            lua.create_string(&out)
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "decode",
        lua.create_function(move |lua, s: mlua::String| {
            let bytes = s.as_bytes();
            let mut p = JsonParser { s: &bytes, i: 0, depth: 0, max_depth: c.decode_max_depth.get() };
            let v = p.value(lua)?;
            p.ws();
            if p.i != bytes.len() {
                return p.err("the end");
            }
            Ok(v)
        })?,
    )?;
    t.set("null", json_null())?;
    // lua-cjson's buffer reuse switch: encoding never keeps a buffer here, so it only accepts
    // the call (scripts written for Redis make it).
    t.set("encode_keep_buffer", lua.create_function(|_, _: Variadic<Value>| Ok(()))?)?;
    // lua-cjson's nesting bounds (default 1000 each) and NaN/Inf switch, as Redis scripts
    // use them.
    t.set("encode_max_depth", json_depth_setter(lua, &cfg, false)?)?;
    t.set("decode_max_depth", json_depth_setter(lua, &cfg, true)?)?;
    let c = cfg.clone();
    t.set(
        "encode_invalid_numbers",
        lua.create_function(move |lua, arg: Option<Value>| {
            match arg {
                None => {}
                Some(Value::Boolean(b)) => c.encode_invalid.set(b as u8),
                Some(Value::String(s)) if s.as_bytes().as_ref() == b"null" => c.encode_invalid.set(2),
                Some(Value::String(s)) if matches!(s.as_bytes().as_ref(), b"on" | b"off") => {
                    c.encode_invalid.set((s.as_bytes().as_ref() == b"on") as u8)
                }
                Some(_) => {
                    return Err(mlua::Error::RuntimeError("bad argument #1 to '?' (invalid option)".into()))
                }
            }
            Ok(match c.encode_invalid.get() {
                0 => Value::Boolean(false),
                1 => Value::Boolean(true),
                _ => Value::String(lua.create_string("null")?),
            })
        })?,
    )?;
    Ok(t)
}

// ---------------------------------------------------------------------------------------
// struct: pack(fmt, ...), unpack(fmt, s [, init]), size(fmt).
// Options: < > ! (endianness, alignment), x (pad), b B h H l L T i[n] I[n] (integers),
// f d (floats), s (zero-terminated string), c[n] (fixed string; c0 = the whole string when
// packing, the previous number as its length when unpacking), spaces ignored.

struct Fmt<'a> {
    f: &'a [u8],
    i: usize,
    little: bool,
    align: usize,
}

fn serr<T>(msg: impl Into<String>) -> mlua::Result<T> {
    Err(mlua::Error::RuntimeError(msg.into()))
}

impl Fmt<'_> {
    fn number(&mut self, default: usize) -> usize {
        let start = self.i;
        let mut n = 0usize;
        while self.i < self.f.len() && self.f[self.i].is_ascii_digit() {
            n = n.saturating_mul(10).saturating_add((self.f[self.i] - b'0') as usize);
            self.i += 1;
        }
        if self.i == start {
            default
        } else {
            n
        }
    }

    /// The next option and its size (None at the end); control options are applied here.
    fn next(&mut self) -> mlua::Result<Option<(u8, usize)>> {
        while self.i < self.f.len() {
            let c = self.f[self.i];
            self.i += 1;
            let size = match c {
                b' ' => continue,
                b'<' => {
                    self.little = true;
                    continue;
                }
                b'>' => {
                    self.little = false;
                    continue;
                }
                b'!' => {
                    self.align = self.number(8);
                    if !self.align.is_power_of_two() {
                        return serr("alignment must be power of 2");
                    }
                    continue;
                }
                b'x' | b'b' | b'B' => 1,
                b'h' | b'H' => 2,
                b'l' | b'L' | b'T' => 8,
                b'f' => 4,
                b'd' => 8,
                b's' => 0,
                b'c' => self.number(1),
                b'i' | b'I' => {
                    let n = self.number(4);
                    if n > 8 || n == 0 {
                        return serr(format!("integral size {n} is larger than limit of 8"));
                    }
                    n
                }
                other => return serr(format!("invalid format option '{}'", other as char)),
            };
            return Ok(Some((c, size)));
        }
        Ok(None)
    }

    fn pad(&self, c: u8, size: usize, pos: usize) -> usize {
        if matches!(c, b'c' | b's' | b'x') || size <= 1 || self.align <= 1 {
            return 0;
        }
        let a = size.min(self.align);
        (a - (pos & (a - 1))) & (a - 1)
    }
}

fn struct_lib(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: Variadic<Value>| {
            let Some(Value::String(fmt)) = args.first() else {
                return serr("bad argument #1 to 'pack' (string expected)");
            };
            let fmt = fmt.as_bytes().to_vec();
            let mut f = Fmt { f: &fmt, i: 0, little: true, align: 1 };
            let mut out: Vec<u8> = Vec::new();
            let mut arg = 1;
            while let Some((c, size)) = f.next()? {
                let pad = f.pad(c, size, out.len());
                out.resize(out.len() + pad, 0);
                let a = args.get(arg).cloned().unwrap_or(Value::Nil);
                match c {
                    b'x' => out.push(0),
                    b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                        let n = num(&a).ok_or_else(|| pack_number_error(&args, arg))?;
                        arg += 1;
                        let v = n as i64 as u64;
                        let bytes = v.to_le_bytes();
                        if f.little {
                            out.extend_from_slice(&bytes[..size]);
                        } else {
                            out.extend(bytes[..size].iter().rev());
                        }
                    }
                    b'f' | b'd' => {
                        let n = num(&a).ok_or_else(|| pack_number_error(&args, arg))?;
                        arg += 1;
                        let bytes = if c == b'f' {
                            (n as f32).to_le_bytes().to_vec()
                        } else {
                            n.to_le_bytes().to_vec()
                        };
                        if f.little {
                            out.extend_from_slice(&bytes);
                        } else {
                            out.extend(bytes.iter().rev());
                        }
                    }
                    b'c' | b's' => {
                        let s = match &a {
                            Value::String(s) => s.as_bytes().to_vec(),
                            Value::Integer(_) | Value::Number(_) => lua
                                .coerce_string(a.clone())?
                                .map(|s| s.as_bytes().to_vec())
                                .unwrap_or_default(),
                            _ => {
                                return serr(format!(
                                    "bad argument #{} to 'pack' (string expected)",
                                    arg + 1
                                ));
                            }
                        };
                        arg += 1;
                        if c == b's' {
                            out.extend_from_slice(&s);
                            out.push(0);
                        } else {
                            let l = if size == 0 { s.len() } else { size };
                            if s.len() < l {
                                return serr(format!("bad argument #{} to 'pack' (string too short)", arg));
                            }
                            out.extend_from_slice(&s[..l]);
                        }
                    }
                    _ => {}
                }
            }
            lua.create_string(&out)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, (fmt, data, init): (mlua::String, mlua::String, Option<i64>)| {
            let fmt = fmt.as_bytes().to_vec();
            let data = data.as_bytes().to_vec();
            let mut f = Fmt { f: &fmt, i: 0, little: true, align: 1 };
            let mut pos = match init {
                Some(i) if i >= 1 => (i - 1) as usize,
                Some(_) => return serr("bad argument #3 to 'unpack' (offset must be 1 or greater)"),
                None => 0,
            };
            let mut vals: Vec<Value> = Vec::new();
            let mut last_num: Option<f64> = None;
            while let Some((c, mut size)) = f.next()? {
                pos += f.pad(c, size, pos);
                let short = || serr::<()>("bad argument #2 to 'unpack' (data string too short)");
                match c {
                    b'x' => {
                        if pos + 1 > data.len() {
                            short()?;
                        }
                        pos += 1;
                    }
                    b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                        if pos + size > data.len() {
                            short()?;
                        }
                        let mut bytes = [0u8; 8];
                        let src = &data[pos..pos + size];
                        if f.little {
                            bytes[..size].copy_from_slice(src);
                        } else {
                            for (d, s) in bytes[..size].iter_mut().zip(src.iter().rev()) {
                                *d = *s;
                            }
                        }
                        let mut v = u64::from_le_bytes(bytes);
                        let signed = c.is_ascii_lowercase();
                        let n = if signed && size < 8 && (v >> (size * 8 - 1)) & 1 == 1 {
                            v |= !0u64 << (size * 8);
                            v as i64 as f64
                        } else if signed {
                            v as i64 as f64
                        } else {
                            v as f64
                        };
                        pos += size;
                        last_num = Some(n);
                        vals.push(Value::Number(n));
                    }
                    b'f' | b'd' => {
                        if pos + size > data.len() {
                            short()?;
                        }
                        let mut src = data[pos..pos + size].to_vec();
                        if !f.little {
                            src.reverse();
                        }
                        let n = if c == b'f' {
                            f32::from_le_bytes(src[..4].try_into().unwrap()) as f64
                        } else {
                            f64::from_le_bytes(src[..8].try_into().unwrap())
                        };
                        pos += size;
                        last_num = Some(n);
                        vals.push(Value::Number(n));
                    }
                    b'c' => {
                        if size == 0 {
                            match last_num.take() {
                                Some(n) => size = n as usize,
                                None => return serr("format 'c0' needs a previous size"),
                            }
                            vals.pop();
                        }
                        if pos + size > data.len() {
                            short()?;
                        }
                        vals.push(Value::String(lua.create_string(&data[pos..pos + size])?));
                        pos += size;
                    }
                    b's' => {
                        let Some(end) = data[pos.min(data.len())..].iter().position(|&b| b == 0) else {
                            return serr("unfinished string in data");
                        };
                        vals.push(Value::String(lua.create_string(&data[pos..pos + end])?));
                        pos += end + 1;
                    }
                    _ => {}
                }
            }
            vals.push(Value::Number((pos + 1) as f64));
            Ok(MultiValue::from_iter(vals))
        })?,
    )?;
    t.set(
        "size",
        lua.create_function(|_, fmt: mlua::String| {
            let fmt = fmt.as_bytes().to_vec();
            let mut f = Fmt { f: &fmt, i: 0, little: true, align: 1 };
            let mut pos = 0usize;
            while let Some((c, size)) = f.next()? {
                if c == b's' || (c == b'c' && size == 0) {
                    return serr("options 'c0' - 's' have undefined sizes");
                }
                pos += f.pad(c, size, pos) + size;
            }
            Ok(pos as f64)
        })?,
    )?;
    Ok(t)
}

// ---------------------------------------------------------------------------------------
// cmsgpack

const MSGPACK_MAX_NESTING: usize = 16;

fn mp_encode(out: &mut Vec<u8>, v: &Value, depth: usize) -> mlua::Result<()> {
    match v {
        Value::Nil => out.push(0xc0),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => mp_int(out, *i),
        Value::Number(n) => {
            let n = *n;
            if n.fract() == 0.0 && (-9.2e18..=9.2e18).contains(&n) {
                mp_int(out, n as i64);
            } else if (n as f32) as f64 == n || n.is_nan() {
                out.push(0xca);
                out.extend_from_slice(&(n as f32).to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
        Value::String(s) => {
            let b = s.as_bytes();
            let l = b.len();
            if l < 32 {
                out.push(0xa0 | l as u8);
            } else if l <= 0xff {
                out.extend_from_slice(&[0xd9, l as u8]);
            } else if l <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(l as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(l as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        Value::Table(t) if depth < MSGPACK_MAX_NESTING => {
            // An array when the keys are exactly 1..n.
            let mut count = 0usize;
            let mut max = 0usize;
            let mut is_array = true;
            for kv in t.clone().pairs::<Value, Value>() {
                let (k, _) = kv?;
                count += 1;
                match k {
                    Value::Integer(i) if i >= 1 => max = max.max(i as usize),
                    Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => max = max.max(n as usize),
                    _ => is_array = false,
                }
            }
            if is_array && max == count {
                mp_len(out, count, 0x90, 0xdc, 0xdd);
                for i in 1..=count {
                    let v: Value = t.raw_get(i)?;
                    mp_encode(out, &v, depth + 1)?;
                }
            } else {
                mp_len(out, count, 0x80, 0xde, 0xdf);
                for kv in t.clone().pairs::<Value, Value>() {
                    let (k, v) = kv?;
                    mp_encode(out, &k, depth + 1)?;
                    mp_encode(out, &v, depth + 1)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

fn mp_len(out: &mut Vec<u8>, n: usize, fix: u8, m16: u8, m32: u8) {
    if n < 16 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(m16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(m32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn mp_int(out: &mut Vec<u8>, i: i64) {
    if i >= 0 {
        let u = i as u64;
        if u < 128 {
            out.push(u as u8);
        } else if u <= 0xff {
            out.extend_from_slice(&[0xcc, u as u8]);
        } else if u <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(u as u16).to_be_bytes());
        } else if u <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(u as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&u.to_be_bytes());
        }
    } else if i >= -32 {
        out.push(i as i8 as u8);
    } else if i >= -128 {
        out.extend_from_slice(&[0xd0, i as i8 as u8]);
    } else if i >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(i as i16).to_be_bytes());
    } else if i >= -2147483648 {
        out.push(0xd2);
        out.extend_from_slice(&(i as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&i.to_be_bytes());
    }
}

struct MpReader<'a> {
    s: &'a [u8],
    i: usize,
}

impl MpReader<'_> {
    fn take(&mut self, n: usize) -> mlua::Result<&[u8]> {
        if self.i + n > self.s.len() {
            return serr("Missing bytes in input.");
        }
        let r = &self.s[self.i..self.i + n];
        self.i += n;
        Ok(r)
    }

    fn be(&mut self, n: usize) -> mlua::Result<u64> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | b as u64))
    }

    fn value(&mut self, lua: &Lua) -> mlua::Result<Value> {
        let c = self.take(1)?[0];
        Ok(match c {
            0x00..=0x7f => Value::Number(c as f64),
            0x80..=0x8f => self.map(lua, (c & 0x0f) as usize)?,
            0x90..=0x9f => self.array(lua, (c & 0x0f) as usize)?,
            0xa0..=0xbf => self.str(lua, (c & 0x1f) as usize)?,
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            0xc4 | 0xd9 => {
                let n = self.be(1)? as usize;
                self.str(lua, n)?
            }
            0xc5 | 0xda => {
                let n = self.be(2)? as usize;
                self.str(lua, n)?
            }
            0xc6 | 0xdb => {
                let n = self.be(4)? as usize;
                self.str(lua, n)?
            }
            0xca => Value::Number(f32::from_bits(self.be(4)? as u32) as f64),
            0xcb => Value::Number(f64::from_bits(self.be(8)?)),
            0xcc => Value::Number(self.be(1)? as f64),
            0xcd => Value::Number(self.be(2)? as f64),
            0xce => Value::Number(self.be(4)? as f64),
            0xcf => Value::Number(self.be(8)? as f64),
            0xd0 => Value::Number(self.be(1)? as u8 as i8 as f64),
            0xd1 => Value::Number(self.be(2)? as u16 as i16 as f64),
            0xd2 => Value::Number(self.be(4)? as u32 as i32 as f64),
            0xd3 => Value::Number(self.be(8)? as i64 as f64),
            0xdc => {
                let n = self.be(2)? as usize;
                self.array(lua, n)?
            }
            0xdd => {
                let n = self.be(4)? as usize;
                self.array(lua, n)?
            }
            0xde => {
                let n = self.be(2)? as usize;
                self.map(lua, n)?
            }
            0xdf => {
                let n = self.be(4)? as usize;
                self.map(lua, n)?
            }
            0xe0..=0xff => Value::Number(c as i8 as f64),
            _ => return serr("Bad data format in input."),
        })
    }

    fn str(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let b = self.take(n)?.to_vec();
        Ok(Value::String(lua.create_string(&b)?))
    }

    fn array(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let t = lua.create_table()?;
        for i in 1..=n {
            let v = self.value(lua)?;
            t.raw_set(i, v)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let t = lua.create_table()?;
        for _ in 0..n {
            let k = self.value(lua)?;
            let v = self.value(lua)?;
            if !k.is_nil() {
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    }
}

fn cmsgpack_lib(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: Variadic<Value>| {
            if args.is_empty() {
                return serr("MessagePack pack needs input.");
            }
            let mut out = Vec::new();
            for a in args.iter() {
                mp_encode(&mut out, a, 0)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    // unpack_limit(s, limit, offset) and unpack_one(s, offset): decode at most `limit` objects
    // (0: all) from byte `offset`; the first result is the offset of the next object, or -1
    // when the input is used up.
    fn unpack_limit(lua: &Lua, s: &[u8], limit: usize, offset: usize) -> mlua::Result<MultiValue> {
        let mut r = MpReader { s, i: offset.min(s.len()) };
        let mut vals = Vec::new();
        while r.i < s.len() && (limit == 0 || vals.len() < limit) {
            vals.push(r.value(lua)?);
        }
        let next = if r.i >= s.len() { -1 } else { r.i as i64 };
        let mut all = vec![Value::Integer(next as _)];
        all.extend(vals);
        Ok(MultiValue::from_iter(all))
    }
    t.set(
        "unpack_limit",
        lua.create_function(|lua, (s, limit, offset): (mlua::String, Option<i64>, Option<i64>)| {
            let bytes = s.as_bytes().to_vec();
            unpack_limit(lua, &bytes, limit.unwrap_or(0).max(0) as usize, offset.unwrap_or(0).max(0) as usize)
        })?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, (s, offset): (mlua::String, Option<i64>)| {
            let bytes = s.as_bytes().to_vec();
            unpack_limit(lua, &bytes, 1, offset.unwrap_or(0).max(0) as usize)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, s: mlua::String| {
            let bytes = s.as_bytes().to_vec();
            let mut r = MpReader { s: &bytes, i: 0 };
            let mut vals = Vec::new();
            while r.i < bytes.len() {
                vals.push(r.value(lua)?);
            }
            Ok(MultiValue::from_iter(vals))
        })?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, (s, offset): (mlua::String, Option<i64>)| {
            let bytes = s.as_bytes().to_vec();
            let mut r = MpReader { s: &bytes, i: offset.unwrap_or(0).max(0) as usize };
            let v = r.value(lua)?;
            let next = if r.i >= bytes.len() { -1 } else { r.i as i64 };
            Ok((next, v))
        })?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::fmt_g;

    #[test]
    fn fmt_g_matches_c() {
        assert_eq!(fmt_g(1.0, 14), "1");
        assert_eq!(fmt_g(0.5, 14), "0.5");
        assert_eq!(fmt_g(1e20, 14), "1e+20");
        assert_eq!(fmt_g(123456789012345.0, 14), "1.2345678901234e+14");
        assert_eq!(fmt_g(0.0001, 14), "0.0001");
        assert_eq!(fmt_g(0.00001, 14), "1e-05");
        assert_eq!(fmt_g(0.1, 17), "0.10000000000000001");
        assert_eq!(fmt_g(2.25, 17), "2.25");
        assert_eq!(fmt_g(-2.5, 14), "-2.5");
    }
}
