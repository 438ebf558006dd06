//! Redis 7 functions: FUNCTION LOAD | DELETE | FLUSH | LIST | DUMP | RESTORE | STATS | KILL |
//! HELP, FCALL and FCALL_RO, as Redis 7.0 has them.
//!
//! The libraries themselves are engine state (`engine::Functions`: name -> code, changed only
//! by `Engine::function_command`, which emits the canonical `FUNCTION LOAD REPLACE <code>` /
//! `DELETE <lib>` / `FLUSH` mutations that the journal, the firehose and replay carry). This
//! module owns what only a Lua VM can do: it compiles and runs a library's code before the
//! engine records it (so nothing invalid is ever recorded), and it keeps the registry of
//! callable functions in a VM of its own (as Redis keeps functions apart from EVAL's cache).
//!
//! The registry is derived state: it is rebuilt from the engine's libraries whenever the
//! engine's generation differs from the one it was built from (after replayed records, a
//! snapshot load, a RESTORE). A library that fails to compile on such a rebuild (it cannot:
//! it compiled where it was recorded, with the same VM) is logged and left uncallable.
//!
//! While a library loads, its code sees only the load-time API (`redis.register_function`,
//! `redis.log`, the version): the VM's globals are switched for that table (PROTECT's
//! `set_loading`), and a 500 ms deadline stops a load that does not finish (Redis's text).

use super::{err_table, Scripting, BUSY, NOTBUSY, UNKILLABLE};
use crate::conn::Conn;
use crate::server::Server;
use engine::{errors, util};
use mlua::{Function, Lua, Table, Value, Variadic};
use resp::reply;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// Function flags, in the order Redis lists them.
pub const FLAG_NAMES: [(&str, u8); 5] = [
    ("no-writes", 1),
    ("allow-oom", 2),
    ("allow-stale", 4),
    ("no-cluster", 8),
    ("allow-cross-slot-keys", 16),
];
pub const NO_WRITES: u8 = 1;
pub const ALLOW_OOM: u8 = 2;
pub const ALLOW_STALE: u8 = 4;
pub const NO_CLUSTER: u8 = 8;
pub const ALLOW_CROSS_SLOT: u8 = 16;

/// The most code all libraries together may hold (they must fit in a snapshot's header block,
/// 16 MiB, with the rest of the header).
const MAX_LIBRARY_BYTES: usize = 15 << 20;

/// How long a library's top-level code may run (Redis's fixed load timeout).
const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

/// One registered function.
struct FnDef {
    name: Vec<u8>,
    f: Function,
    flags: u8,
    description: Option<Vec<u8>>,
}

/// The running function: its name, the FCALL's arguments, when it started.
type Running = (Vec<u8>, Vec<Vec<u8>>, Instant);

thread_local! {
    /// The functions the loading library registered so far (Some only during a load).
    static LOADING: RefCell<Option<Vec<FnDef>>> = const { RefCell::new(None) };
    /// When the running load must stop.
    pub(super) static LOAD_DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// The running function (FUNCTION STATS, and the BUSY texts): name, command, start.
    pub(super) static RUNNING_FN: RefCell<Option<Running>> = const { RefCell::new(None) };
    /// Libraries and functions the registry holds (FUNCTION STATS while the VM is out).
    static COUNTS: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// A function is running (rather than an EVAL script).
pub fn function_running() -> bool {
    RUNNING_FN.with(|r| r.borrow().is_some())
}

/// `redis.register_function` (load time only): (failed, value) for the trampoline.
pub(super) fn register_function(lua: &Lua, args: Variadic<Value>) -> mlua::Result<(bool, Value)> {
    let fail = |msg: &str| -> mlua::Result<(bool, Value)> {
        Ok((true, err_table(lua, format!("ERR {msg}").as_bytes())?))
    };
    if LOADING.with(|l| l.borrow().is_none()) {
        return fail("redis.register_function can only be called on FUNCTION LOAD command");
    }
    // Strings and numbers are strings to Lua's C API (lua_isstring).
    let as_string = |v: &Value| -> Option<Vec<u8>> {
        match v {
            Value::String(s) => Some(s.as_bytes().to_vec()),
            Value::Integer(_) | Value::Number(_) => {
                lua.coerce_string(v.clone()).ok().flatten().map(|s| s.as_bytes().to_vec())
            }
            _ => None,
        }
    };
    let (name, f, flags, description) = match args.len() {
        1 => {
            let Value::Table(t) = &args[0] else {
                return fail("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
            };
            let (mut name, mut f, mut flags, mut desc) = (None, None, 0u8, None);
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, v) = pair?;
                let Some(key) = as_string(&k) else {
                    return fail("named argument key given to redis.register_function is not a string");
                };
                let key = key.to_ascii_lowercase();
                match key.as_slice() {
                    b"function_name" => {
                        match as_string(&v) {
                            Some(n) => name = Some(n),
                            None => return fail(
                                "function_name argument given to redis.register_function must be a string",
                            ),
                        }
                    }
                    b"description" => match as_string(&v) {
                        Some(d) => desc = Some(d),
                        None => {
                            return fail(
                                "description argument given to redis.register_function must be a string",
                            )
                        }
                    },
                    b"callback" => match v {
                        Value::Function(cb) => f = Some(cb),
                        _ => {
                            return fail(
                                "callback argument given to redis.register_function must be a function",
                            )
                        }
                    },
                    b"flags" => {
                        let Value::Table(ft) = v else {
                            return fail("flags argument to redis.register_function must be a table representing function flags");
                        };
                        for fv in ft.sequence_values::<Value>() {
                            let fv = fv?;
                            let bit = as_string(&fv).and_then(|s| {
                                FLAG_NAMES.iter().find(|(n, _)| n.as_bytes() == s.as_slice()).map(|(_, b)| *b)
                            });
                            match bit {
                                Some(b) => flags |= b,
                                None => return fail("unknown flag given"),
                            }
                        }
                    }
                    _ => return fail("unknown argument given to redis.register_function"),
                }
            }
            let Some(name) = name else {
                return fail("redis.register_function must get a function name argument");
            };
            let Some(f) = f else { return fail("redis.register_function must get a callback argument") };
            (name, f, flags, desc)
        }
        2 => {
            let Some(name) = as_string(&args[0]) else {
                return fail("first argument to redis.register_function must be a string");
            };
            let Value::Function(f) = &args[1] else {
                return fail("second argument to redis.register_function must be a function");
            };
            (name, f.clone(), 0, None)
        }
        _ => return fail("wrong number of arguments to redis.register_function"),
    };
    if !engine::functions::valid_name(&name) {
        return fail(std::str::from_utf8(&engine::functions::NAME_RULE[4..]).unwrap_or_default());
    }
    let dup = LOADING.with(|l| l.borrow().as_ref().is_some_and(|fs| fs.iter().any(|d| d.name == name)));
    if dup {
        return fail("Function already exists in the library");
    }
    LOADING.with(|l| {
        if let Some(fs) = l.borrow_mut().as_mut() {
            fs.push(FnDef { name, f, flags, description });
        }
    });
    Ok((false, Value::Nil))
}

/// A function in the registry.
struct Entry {
    lib: Vec<u8>,
    /// In Lua's registry, not as an `mlua::Function` (see `Script::f`).
    f: mlua::RegistryKey,
    flags: u8,
    description: Option<Vec<u8>>,
}

/// The functions' VM and its registry of callable functions.
pub struct FunctionsVm {
    vm: Scripting,
    /// The engine generation the registry reflects.
    generation: u64,
    /// library -> its function names, in registration order.
    libs: BTreeMap<Vec<u8>, Vec<Vec<u8>>>,
    funcs: HashMap<Vec<u8>, Entry>,
}

impl FunctionsVm {
    fn new() -> FunctionsVm {
        FunctionsVm {
            vm: Scripting::new(),
            generation: u64::MAX,
            libs: BTreeMap::new(),
            funcs: HashMap::new(),
        }
    }

    /// The function called `name`, in any case (Redis's function names are case-insensitive
    /// for FCALL): the exact name first, a scan only when that misses.
    fn lookup(&self, name: &[u8]) -> Option<&Entry> {
        self.funcs
            .get(name)
            .or_else(|| self.funcs.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, e)| e))
    }

    /// Function `name` out of Lua's registry, and its flags.
    fn callable(&self, name: &[u8]) -> Option<(Function, u8)> {
        let e = self.lookup(name)?;
        Some((self.vm.lua.registry_value::<Function>(&e.f).ok()?, e.flags))
    }

    /// Functions in the registry (INFO).
    pub fn function_count(&self) -> usize {
        self.funcs.len()
    }

    /// Memory the functions' VM uses.
    pub fn vm_bytes(&self) -> usize {
        self.vm.vm_bytes()
    }

    /// Compiles and runs a library's code (its metadata already parsed) and returns the
    /// functions it registered, or Redis's error. The registry is not touched.
    fn compile(&self, code: &[u8], md: &engine::functions::Metadata) -> Result<Vec<FnDef>, Vec<u8>> {
        let body = &code[md.body..];
        if body.get(1) == Some(&0x1b) {
            return Err(
                b"ERR Error compiling function: user_function:1: unexpected symbol near 'char(27)'".to_vec()
            );
        }
        let f = match self.vm.lua.load(body).set_name("@user_function").into_function() {
            Ok(f) => f,
            Err(e) => {
                let msg = match &e {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                return Err(format!("ERR Error compiling function: {msg}").into_bytes());
            }
        };
        LOADING.with(|l| *l.borrow_mut() = Some(Vec::new()));
        LOAD_DEADLINE.with(|d| d.set(Some(Instant::now() + LOAD_TIMEOUT)));
        let _ = self.vm.set_loading.call::<()>(true);
        let ran = self.vm.runner.call::<(bool, Value)>(f);
        let _ = self.vm.set_loading.call::<()>(false);
        LOAD_DEADLINE.with(|d| d.set(None));
        let defs = LOADING.with(|l| l.borrow_mut().take()).unwrap_or_default();
        let msg = match ran {
            Ok((true, _)) => return Ok(defs),
            Ok((false, Value::Table(t))) => match t.raw_get::<Value>("err") {
                Ok(Value::String(s)) => s.as_bytes().to_vec(),
                _ => b"ERR unknown error".to_vec(),
            },
            Ok((false, other)) => format!("ERR {other:?}").into_bytes(),
            Err(e) => format!("ERR {e}").into_bytes(),
        };
        let mut e = b"ERR Error registering functions: ".to_vec();
        e.extend_from_slice(&msg);
        Err(e)
    }

    /// Puts a compiled library in the registry (replacing one of the same name).
    fn install(&mut self, lib: &[u8], defs: Vec<FnDef>) {
        self.remove(lib);
        let names = defs.iter().map(|d| d.name.clone()).collect();
        for d in defs {
            let f = self.vm.lua.create_registry_value(d.f).expect("a registry slot for a function");
            self.funcs
                .insert(d.name, Entry { lib: lib.to_vec(), f, flags: d.flags, description: d.description });
        }
        self.libs.insert(lib.to_vec(), names);
        self.publish_counts();
    }

    fn remove(&mut self, lib: &[u8]) {
        if let Some(names) = self.libs.remove(lib) {
            for n in names {
                self.funcs.remove(&n);
            }
        }
        self.publish_counts();
    }

    fn publish_counts(&self) {
        COUNTS.with(|c| c.set((self.libs.len(), self.funcs.len())));
    }

    /// A function of another library than `lib` already has one of these names.
    fn collision(&self, lib: &[u8], defs: &[FnDef]) -> Option<Vec<u8>> {
        defs.iter().find(|d| self.funcs.get(&d.name).is_some_and(|e| e.lib != lib)).map(|d| d.name.clone())
    }
}

/// Redis's DUMP payload footer: the RDB version a payload is written with (Redis 7.0's).
const RDB_VERSION: u16 = 10;
/// RDB opcode of a function library (Redis 7.0: the code only).
const RDB_OPCODE_FUNCTION2: u8 = 245;
const BAD_PAYLOAD: &[u8] = b"ERR DUMP payload version or checksum are wrong";

/// CRC-64/Jones as Redis computes it: the checksum of DUMP payloads (the RDB codec's).
pub fn crc64(data: &[u8]) -> u64 {
    engine::rdb::crc64(0, data)
}

/// RDB length encoding.
fn put_rdb_len(out: &mut Vec<u8>, n: usize) {
    if n < 64 {
        out.push(n as u8);
    } else if n < 16384 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u32::MAX as usize {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&(n as u64).to_be_bytes());
    }
}

/// FUNCTION DUMP's payload: each library as an RDB function record (opcode 245, its code as
/// an uncompressed RDB string), then the RDB version and the CRC-64, as Redis 7.0 writes.
pub fn dump_payload(f: &engine::Functions) -> Vec<u8> {
    let mut out = Vec::new();
    for (_, code) in f.iter() {
        out.push(RDB_OPCODE_FUNCTION2);
        put_rdb_len(&mut out, code.len());
        out.extend_from_slice(code);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Reads an RDB length at `*at`: (value, is_encoded) where encoded is the 11xxxxxx form.
fn rdb_len(p: &[u8], at: &mut usize) -> Option<(u64, bool)> {
    let b = *p.get(*at)?;
    *at += 1;
    Some(match b >> 6 {
        0 => ((b & 0x3f) as u64, false),
        1 => {
            let b2 = *p.get(*at)?;
            *at += 1;
            ((((b & 0x3f) as u64) << 8) | b2 as u64, false)
        }
        2 => match b {
            0x80 => {
                let v = u32::from_be_bytes(p.get(*at..*at + 4)?.try_into().ok()?);
                *at += 4;
                (v as u64, false)
            }
            0x81 => {
                let v = u64::from_be_bytes(p.get(*at..*at + 8)?.try_into().ok()?);
                *at += 8;
                (v, false)
            }
            _ => return None,
        },
        _ => ((b & 0x3f) as u64, true),
    })
}

/// An RDB string at `*at` (plain, integer-encoded or LZF-compressed).
fn rdb_string(p: &[u8], at: &mut usize) -> Option<Vec<u8>> {
    let (n, encoded) = rdb_len(p, at)?;
    if !encoded {
        let end = at.checked_add(usize::try_from(n).ok()?)?;
        let s = p.get(*at..end)?.to_vec();
        *at = end;
        return Some(s);
    }
    match n {
        0 => {
            let v = *p.get(*at)? as i8;
            *at += 1;
            Some(v.to_string().into_bytes())
        }
        1 => {
            let v = i16::from_le_bytes(p.get(*at..*at + 2)?.try_into().ok()?);
            *at += 2;
            Some(v.to_string().into_bytes())
        }
        2 => {
            let v = i32::from_le_bytes(p.get(*at..*at + 4)?.try_into().ok()?);
            *at += 4;
            Some(v.to_string().into_bytes())
        }
        3 => {
            let (clen, e1) = rdb_len(p, at)?;
            let (len, e2) = rdb_len(p, at)?;
            if e1 || e2 {
                return None;
            }
            let end = at.checked_add(usize::try_from(clen).ok()?)?;
            let src = p.get(*at..end)?;
            *at = end;
            lzf_decompress(src, usize::try_from(len).ok()?)
        }
        _ => None,
    }
}

/// LZF decompression (the format Redis compresses RDB strings with; the RDB codec's):
/// exactly `len` bytes out, or None for input that is not that.
fn lzf_decompress(src: &[u8], len: usize) -> Option<Vec<u8>> {
    engine::rdb::lzf_decompress(src, len as u64)
}

/// The library codes in a FUNCTION DUMP payload, or Redis's error.
pub fn parse_payload(p: &[u8]) -> Result<Vec<Vec<u8>>, Vec<u8>> {
    if p.len() < 10 {
        return Err(BAD_PAYLOAD.to_vec());
    }
    let body_end = p.len() - 10;
    let version = u16::from_le_bytes([p[body_end], p[body_end + 1]]);
    // Function records are the same in RDB 10 (7.0) and 11 (7.2).
    if version > 11 {
        return Err(BAD_PAYLOAD.to_vec());
    }
    let crc = u64::from_le_bytes(p[p.len() - 8..].try_into().expect("8 bytes"));
    if crc64(&p[..p.len() - 8]) != crc {
        return Err(BAD_PAYLOAD.to_vec());
    }
    let body = &p[..body_end];
    let mut at = 0;
    let mut codes = Vec::new();
    while at < body.len() {
        let op = body[at];
        at += 1;
        if op != RDB_OPCODE_FUNCTION2 {
            return Err(b"ERR given type is not a function".to_vec());
        }
        match rdb_string(body, &mut at) {
            Some(code) => codes.push(code),
            None => return Err(b"ERR failed loading the given functions payload".to_vec()),
        }
    }
    Ok(codes)
}

/// The garbage collection step after each FUNCTION LOAD, in KiB. A load leaves its chunk's
/// main function and the registration tables behind; at Lua's own pace a run of loads (a
/// deployment loading thousands of libraries) lets that garbage grow the VM by half again.
const LOAD_GC_STEP_KB: std::ffi::c_int = 16;

const READONLY: &[u8] = b"READONLY You can't write against a read only replica.";
pub const BUSY_FUNCTION: &[u8] =
    b"BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

impl Server {
    /// The functions' VM, its registry rebuilt first if the engine's libraries changed since.
    fn functions_vm(&mut self) -> &mut FunctionsVm {
        let generation = self.engine.functions.generation();
        let fv = self.functions.get_or_insert_with(|| Box::new(FunctionsVm::new()));
        if fv.generation != generation {
            // A fresh VM: nothing of the old libraries stays reachable.
            let mut new = FunctionsVm::new();
            for (name, code) in self.engine.functions.iter() {
                let built = engine::functions::metadata(code).and_then(|md| new.compile(code, &md));
                match built {
                    Ok(defs) => new.install(name, defs),
                    Err(e) => tracing::error!(
                        "function library '{}' does not load here: {}",
                        String::from_utf8_lossy(name),
                        String::from_utf8_lossy(&e)
                    ),
                }
            }
            new.generation = generation;
            new.publish_counts();
            **fv = new;
        }
        fv
    }

    /// Function `name`'s flags ([`FLAG_NAMES`] bits); None when there is no such function.
    pub(crate) fn function_flags(&mut self, name: &[u8]) -> Option<u8> {
        self.functions_vm().lookup(name).map(|e| e.flags)
    }

    /// FCALL | FCALL_RO function numkeys [key ...] [arg ...]
    pub(crate) fn fcall_command(&mut self, c: &mut Conn, slot: usize, args: &[&[u8]], ro: bool, now: i64) {
        // Redis looks the function up before it reads numkeys.
        let Some((f, flags)) = self.functions_vm().callable(args[1]) else {
            return reply::error(&mut c.out, b"ERR Function not found");
        };
        let numkeys = match util::parse_i64(args[2]) {
            Some(n) => n,
            None => return reply::error(&mut c.out, b"ERR Bad number of keys provided"),
        };
        if numkeys > (args.len() - 3) as i64 {
            return reply::error(&mut c.out, b"ERR Number of keys can't be greater than number of args");
        }
        if numkeys < 0 {
            return reply::error(&mut c.out, b"ERR Number of keys can't be negative");
        }
        // Redis checks `no-cluster` first among the flags.
        if flags & NO_CLUSTER != 0 && self.cfg.cluster_enabled {
            return reply::error(&mut c.out, super::NO_CLUSTER_REFUSAL);
        }
        let no_writes = flags & NO_WRITES != 0;
        if ro && !no_writes {
            return reply::error(
                &mut c.out,
                b"ERR Can not execute a script with write flag using *_ro command.",
            );
        }
        if !no_writes && self.follows_upstream() {
            return reply::error(&mut c.out, READONLY);
        }
        let keys = &args[3..3 + numkeys as usize];
        let argv = &args[3 + numkeys as usize..];
        let Some(fv) = self.functions.take() else { return };
        RUNNING_FN.with(|r| {
            *r.borrow_mut() =
                Some((args[1].to_vec(), args.iter().map(|a| a.to_vec()).collect(), Instant::now()))
        });
        let name = String::from_utf8_lossy(args[1]).into_owned();
        let cluster = (keys, flags & ALLOW_CROSS_SLOT != 0);
        self.run_vm(
            &fv.vm,
            c,
            slot,
            ro || no_writes,
            flags & ALLOW_OOM != 0,
            cluster,
            now,
            name.as_bytes(),
            |sc| {
                let mk = |items: &[&[u8]]| -> mlua::Result<Table> {
                    let t = sc.lua.create_table_with_capacity(items.len(), 0)?;
                    for (i, a) in items.iter().enumerate() {
                        t.raw_set(i + 1, sc.lua.create_string(a)?)?;
                    }
                    Ok(t)
                };
                sc.fcall_runner.call::<(bool, Value)>((f, mk(keys)?, mk(argv)?))
            },
        );
        RUNNING_FN.with(|r| *r.borrow_mut() = None);
        self.functions = Some(fv);
    }

    /// FUNCTION <subcommand> ...
    pub(crate) fn function_command(&mut self, c: &mut Conn, args: &[&[u8]]) {
        let sub = args[1].to_ascii_lowercase();
        let writes = matches!(sub.as_slice(), b"load" | b"delete" | b"flush" | b"restore");
        let arity_ok = match sub.as_slice() {
            b"load" | b"restore" => args.len() >= 3,
            b"delete" => args.len() == 3,
            b"flush" | b"list" => args.len() >= 2,
            b"dump" | b"stats" | b"kill" | b"help" => args.len() == 2,
            _ => return errors::unknown_subcommand(&mut c.out, args[0], args[1]),
        };
        if !arity_ok {
            return crate::commands::wrong_sub_arity(&mut c.out, args[0], args[1]);
        }
        if writes && self.follows_upstream() {
            return reply::error(&mut c.out, READONLY);
        }
        match sub.as_slice() {
            b"load" => self.function_load(c, args),
            b"delete" => {
                let mut out = std::mem::take(&mut c.out);
                if self.engine.function_command(args, &mut out) {
                    let generation = self.engine.functions.generation();
                    if let Some(fv) = self.functions.as_mut().filter(|fv| fv.generation + 1 == generation) {
                        fv.remove(args[2]);
                        fv.generation = generation;
                    }
                }
                c.out = out;
            }
            b"flush" => {
                if args.len() > 3 {
                    return engine::errors::subcommand_syntax_error(&mut c.out, b"function", args[1]);
                }
                let mut out = std::mem::take(&mut c.out);
                self.engine.function_command(args, &mut out);
                c.out = out;
                // The old VM goes now, not at the next function's use: its memory is what
                // a flush gives back (INFO used_memory_vm_functions drops at once, as Redis's).
                if self.functions.is_some() {
                    self.functions_vm();
                }
            }
            b"list" => self.function_list(c, args),
            b"dump" => {
                let payload = dump_payload(&self.engine.functions);
                reply::bulk(&mut c.out, &payload);
            }
            b"restore" => self.function_restore(c, args),
            b"stats" => {
                self.functions_vm(); // the counts are the registry's: bring it up to date
                function_stats(&mut c.out, c.proto)
            }
            b"kill" => reply::error(&mut c.out, NOTBUSY),
            _ => crate::commands::help(
                &mut c.out,
                &[
                    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "LOAD [REPLACE] <code>",
                    "    Loads a library (its first line: #!lua name=<library>); REPLACE overwrites one.",
                    "DELETE <library>",
                    "    Deletes a library and its functions.",
                    "LIST [LIBRARYNAME <pattern>] [WITHCODE]",
                    "    Lists the libraries (matching the pattern), their functions and flags.",
                    "STATS",
                    "    The running function, if any, and the counts of libraries and functions.",
                    "KILL",
                    "    Stops the running function if it has not written.",
                    "FLUSH [ASYNC|SYNC]",
                    "    Deletes every library.",
                    "DUMP",
                    "    Returns every library as one payload for FUNCTION RESTORE.",
                    "RESTORE <payload> [FLUSH|APPEND|REPLACE]",
                    "    Loads the libraries of a payload: FLUSH deletes the others first, APPEND",
                    "    (the default) refuses a library that exists, REPLACE overwrites it.",
                    "HELP",
                    "    Print this help.",
                ],
            ),
        }
    }

    /// FUNCTION LOAD [REPLACE] code: the checks in Redis's order, the compile, then the
    /// engine records it.
    fn function_load(&mut self, c: &mut Conn, args: &[&[u8]]) {
        let code = args[args.len() - 1];
        let mut replace = false;
        for opt in &args[2..args.len() - 1] {
            if opt.eq_ignore_ascii_case(b"replace") {
                replace = true;
            } else {
                let mut e = b"ERR Unknown option given: ".to_vec();
                e.extend_from_slice(opt);
                return reply::error(&mut c.out, &e);
            }
        }
        match self.check_library(code, replace) {
            Ok((name, defs)) => {
                let mut out = std::mem::take(&mut c.out);
                self.engine.function_command(&[b"FUNCTION", b"LOAD", b"REPLACE", code], &mut out);
                c.out = out;
                // The defs were compiled in the VM as it is now (check_library synced it to
                // the generation before this LOAD): install them there, and record that the
                // registry now reflects the LOAD too (a rebuild would drop this VM).
                let generation = self.engine.functions.generation();
                if let Some(fv) = self.functions.as_mut() {
                    fv.install(&name, defs);
                    fv.generation = generation;
                    let _ = fv.vm.lua.gc_step_kbytes(LOAD_GC_STEP_KB);
                }
            }
            Err(e) => reply::error(&mut c.out, &e),
        }
    }

    /// Everything FUNCTION LOAD checks before recording a library: (name, its functions).
    fn check_library(&mut self, code: &[u8], replace: bool) -> Result<(Vec<u8>, Vec<FnDef>), Vec<u8>> {
        let md = engine::functions::metadata(code)?;
        // Snapshots keep the libraries in their header block (at most 16 MiB).
        let functions = &self.engine.functions;
        let others = functions.code_bytes() - functions.get(&md.name).map_or(0, <[u8]>::len);
        if others + code.len() > MAX_LIBRARY_BYTES {
            return Err(b"ERR function libraries are limited to 15 MiB of code in total".to_vec());
        }
        if !md.engine.eq_ignore_ascii_case(b"lua") {
            let mut e = b"ERR Engine '".to_vec();
            e.extend_from_slice(&md.engine);
            e.extend_from_slice(b"' not found");
            return Err(e);
        }
        if !replace && self.engine.functions.get(&md.name).is_some() {
            let mut e = b"ERR Library '".to_vec();
            e.extend_from_slice(&md.name);
            e.extend_from_slice(b"' already exists");
            return Err(e);
        }
        let fv = self.functions_vm();
        let defs = fv.compile(code, &md)?;
        if defs.is_empty() {
            return Err(b"ERR No functions registered".to_vec());
        }
        if let Some(f) = fv.collision(&md.name, &defs) {
            let mut e = b"ERR Function ".to_vec();
            e.extend_from_slice(&f);
            e.extend_from_slice(b" already exists");
            return Err(e);
        }
        Ok((md.name, defs))
    }

    /// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]
    fn function_list(&mut self, c: &mut Conn, args: &[&[u8]]) {
        let mut with_code = false;
        let mut pattern: Option<&[u8]> = None;
        let mut i = 2;
        while i < args.len() {
            let a = args[i];
            if a.eq_ignore_ascii_case(b"withcode") && !with_code {
                with_code = true;
            } else if a.eq_ignore_ascii_case(b"libraryname") && pattern.is_none() {
                let Some(p) = args.get(i + 1) else {
                    return reply::error(&mut c.out, b"ERR library name argument was not given");
                };
                pattern = Some(p);
                i += 1;
            } else {
                let mut e = b"ERR Unknown argument ".to_vec();
                e.extend_from_slice(a);
                return reply::error(&mut c.out, &e);
            }
            i += 1;
        }
        let proto = c.proto;
        self.functions_vm();
        let Some(fv) = self.functions.as_deref() else { return };
        let codes = &self.engine.functions;
        let libs: Vec<&Vec<u8>> =
            fv.libs.keys().filter(|name| pattern.is_none_or(|p| util::glob_match(p, name, false))).collect();
        let out = &mut c.out;
        reply::array_len(out, libs.len());
        for name in libs {
            reply::map_len(out, proto, 3 + with_code as usize);
            reply::bulk(out, b"library_name");
            reply::bulk(out, name);
            reply::bulk(out, b"engine");
            reply::bulk(out, b"LUA");
            reply::bulk(out, b"functions");
            let names = &fv.libs[name];
            reply::array_len(out, names.len());
            for fname in names {
                let e = &fv.funcs[fname];
                reply::map_len(out, proto, 3);
                reply::bulk(out, b"name");
                reply::bulk(out, fname);
                reply::bulk(out, b"description");
                match &e.description {
                    Some(d) => reply::bulk(out, d),
                    None => reply::null_bulk(out, proto),
                }
                reply::bulk(out, b"flags");
                let set: Vec<&str> =
                    FLAG_NAMES.iter().filter(|(_, b)| e.flags & b != 0).map(|(n, _)| *n).collect();
                reply::set_len(out, proto, set.len());
                for f in set {
                    reply::simple(out, f.as_bytes());
                }
            }
            if with_code {
                reply::bulk(out, b"library_code");
                reply::bulk(out, codes.get(name).unwrap_or_default());
            }
        }
    }

    /// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]
    fn function_restore(&mut self, c: &mut Conn, args: &[&[u8]]) {
        if args.len() > 4 {
            return engine::errors::subcommand_syntax_error(&mut c.out, b"function", args[1]);
        }
        #[derive(PartialEq)]
        enum Policy {
            Flush,
            Append,
            Replace,
        }
        let policy = match args.get(3).map(|p| p.to_ascii_lowercase()) {
            None => Policy::Append,
            Some(p) if p == b"append" => Policy::Append,
            Some(p) if p == b"replace" => Policy::Replace,
            Some(p) if p == b"flush" => Policy::Flush,
            Some(_) => {
                return reply::error(
                    &mut c.out,
                    b"ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
                )
            }
        };
        let codes = match parse_payload(args[2]) {
            Ok(c) => c,
            Err(e) => return reply::error(&mut c.out, &e),
        };
        // Every library is compiled, and checked against the others in the payload, first.
        let mut libs: Vec<(Vec<u8>, Vec<u8>, Vec<FnDef>)> = Vec::new();
        for code in codes {
            let checked = engine::functions::metadata(&code).and_then(|md| {
                if !md.engine.eq_ignore_ascii_case(b"lua") {
                    let mut e = b"ERR Engine '".to_vec();
                    e.extend_from_slice(&md.engine);
                    e.extend_from_slice(b"' not found");
                    return Err(e);
                }
                if libs.iter().any(|(n, ..)| *n == md.name) {
                    let mut e = b"ERR Library '".to_vec();
                    e.extend_from_slice(&md.name);
                    e.extend_from_slice(b"' already exists");
                    return Err(e);
                }
                let defs = self.functions_vm().compile(&code, &md)?;
                if defs.is_empty() {
                    return Err(b"ERR No functions registered".to_vec());
                }
                for d in &defs {
                    if libs.iter().any(|(_, _, ds)| ds.iter().any(|o| o.name == d.name)) {
                        let mut e = b"ERR Function ".to_vec();
                        e.extend_from_slice(&d.name);
                        e.extend_from_slice(b" already exists");
                        return Err(e);
                    }
                }
                Ok((md.name, defs))
            });
            match checked {
                Ok((name, defs)) => libs.push((name, code, defs)),
                Err(e) => return reply::error(&mut c.out, &e),
            }
        }
        if policy != Policy::Flush {
            let fv = self.functions_vm();
            for (name, _, _) in &libs {
                if policy == Policy::Append && fv.libs.contains_key(name) {
                    let mut e = b"ERR Library ".to_vec();
                    e.extend_from_slice(name);
                    e.extend_from_slice(b" already exists");
                    return reply::error(&mut c.out, &e);
                }
            }
            // A function name held by a library the restore does not replace.
            for (_, _, defs) in &libs {
                for d in defs {
                    if let Some(e) = fv.funcs.get(&d.name) {
                        if !libs.iter().any(|(n, ..)| *n == e.lib) {
                            let mut msg = b"ERR Function ".to_vec();
                            msg.extend_from_slice(&d.name);
                            msg.extend_from_slice(b" already exists");
                            return reply::error(&mut c.out, &msg);
                        }
                    }
                }
            }
        }
        let kept: usize = if policy == Policy::Flush {
            0
        } else {
            self.engine
                .functions
                .iter()
                .filter(|(n, _)| !libs.iter().any(|(l, ..)| l == n))
                .map(|(_, c)| c.len())
                .sum()
        };
        if kept + libs.iter().map(|(_, c, _)| c.len()).sum::<usize>() > MAX_LIBRARY_BYTES {
            return reply::error(
                &mut c.out,
                b"ERR function libraries are limited to 15 MiB of code in total",
            );
        }
        // Recorded as canonical mutations: FLUSH, then one LOAD REPLACE per library.
        let mut scratch = Vec::new();
        if policy == Policy::Flush {
            self.engine.function_command(&[b"FUNCTION", b"FLUSH"], &mut scratch);
        }
        for (_, code, _) in &libs {
            self.engine.function_command(&[b"FUNCTION", b"LOAD", b"REPLACE", code], &mut scratch);
        }
        // The registry follows at its next use (generation changed).
        reply::ok(&mut c.out);
    }

    /// While a script or function is busy: FUNCTION KILL / FUNCTION STATS (allowed), or the
    /// BUSY reply naming the kill command that applies. True when it answered.
    pub(crate) fn function_while_busy(
        &mut self,
        conn: &mut Conn,
        spec: &'static engine::CommandSpec,
        args: &[&[u8]],
    ) -> bool {
        let is_fn = function_running();
        let sub = args.get(1).map(|s| s.to_ascii_lowercase()).unwrap_or_default();
        // Only while a function runs (a busy EVAL answers BUSY to it, as Redis does); the
        // counts were published when FCALL synced the registry.
        if is_fn && spec.name == "function" && args.len() == 2 && sub == b"stats" {
            function_stats(&mut conn.out, conn.proto);
            return true;
        }
        let kill = |is_eval_cmd: bool| -> Option<bool> {
            if spec.name == "function" && args.len() == 2 && sub == b"kill" && !is_eval_cmd {
                return Some(true);
            }
            if spec.name == "script" && args.len() == 2 && sub == b"kill" && is_eval_cmd {
                return Some(true);
            }
            None
        };
        let asked = kill(false).map(|_| false).or(kill(true).map(|_| true));
        let Some(by_script_kill) = asked else { return false };
        if super::WROTE.with(Cell::get) {
            reply::error(&mut conn.out, UNKILLABLE);
        } else if by_script_kill && is_fn {
            reply::error(&mut conn.out, BUSY_FUNCTION);
        } else if !by_script_kill && !is_fn {
            reply::error(&mut conn.out, BUSY);
        } else {
            super::KILL.with(|k| k.set(true));
            reply::ok(&mut conn.out);
        }
        true
    }
}

/// FUNCTION STATS: the running function (or null) and the Lua engine's counts.
fn function_stats(out: &mut Vec<u8>, proto: resp::Proto) {
    reply::map_len(out, proto, 2);
    reply::bulk(out, b"running_script");
    RUNNING_FN.with(|r| match &*r.borrow() {
        Some((name, cmd, start)) => {
            reply::map_len(out, proto, 3);
            reply::bulk(out, b"name");
            reply::bulk(out, name);
            reply::bulk(out, b"command");
            reply::array_len(out, cmd.len());
            for a in cmd {
                reply::bulk(out, a);
            }
            reply::bulk(out, b"duration_ms");
            reply::integer(out, start.elapsed().as_millis() as i64);
        }
        None => reply::null_bulk(out, proto),
    });
    reply::bulk(out, b"engines");
    reply::map_len(out, proto, 1);
    reply::bulk(out, b"LUA");
    reply::map_len(out, proto, 2);
    let (libs, funcs) = COUNTS.with(Cell::get);
    reply::bulk(out, b"libraries_count");
    reply::integer(out, libs as i64);
    reply::bulk(out, b"functions_count");
    reply::integer(out, funcs as i64);
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    proptest! {
        /// Any set of libraries survives DUMP -> RESTORE's parser byte for byte, in name order.
        #[test]
        fn payloads_round_trip(libs in prop::collection::btree_map("[a-z_]{1,8}", prop::collection::vec(any::<u8>(), 0..300), 0..6)) {
            let mut f = engine::Functions::default();
            for (name, body) in &libs {
                f.insert(name.as_bytes().to_vec(), body.clone());
            }
            let codes: Vec<Vec<u8>> = libs.values().cloned().collect();
            prop_assert_eq!(parse_payload(&dump_payload(&f)).unwrap(), codes);
        }

        /// Arbitrary bytes, and any payload with a correct footer around arbitrary bytes, are
        /// answered (an error or libraries), never a panic.
        #[test]
        fn any_payload_is_answered(body in prop::collection::vec(any::<u8>(), 0..200), version in 0u16..14) {
            let _ = parse_payload(&body);
            let mut p = body.clone();
            p.extend_from_slice(&version.to_le_bytes());
            let crc = crc64(&p);
            p.extend_from_slice(&crc.to_le_bytes());
            let _ = parse_payload(&p);
            let _ = lzf_decompress(&body, body.len() * 3);
        }
    }

    #[test]
    fn crc64_is_redis_jones() {
        // Redis's crc64 self-test value.
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn lzf_round_trip_of_a_redis_payload() {
        // A literal run then a back reference of 5 bytes, 3 back: "abcabcab".
        assert_eq!(lzf_decompress(&[2, b'a', b'b', b'c', 0x60, 2], 8).unwrap(), b"abcabcab");
        assert_eq!(lzf_decompress(&[2, b'a', b'b', b'c', 0x60, 9], 8), None);
        assert_eq!(lzf_decompress(&[5, b'a'], 6), None);
    }

    #[test]
    fn payload_round_trip_and_damage() {
        let mut f = engine::Functions::default();
        f.insert(b"a".to_vec(), b"#!lua name=a\nx".to_vec());
        f.insert(b"b".to_vec(), vec![b'y'; 20000]);
        let p = dump_payload(&f);
        assert_eq!(parse_payload(&p).unwrap(), vec![b"#!lua name=a\nx".to_vec(), vec![b'y'; 20000]]);
        let mut bad = p.clone();
        bad[3] ^= 1;
        assert_eq!(parse_payload(&bad).unwrap_err(), BAD_PAYLOAD);
        assert_eq!(parse_payload(b"xx").unwrap_err(), BAD_PAYLOAD);
    }
}
