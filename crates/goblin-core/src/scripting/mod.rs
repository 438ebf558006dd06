//! Lua scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, as Redis 7.0 has them.
//!
//! One Lua 5.1 VM per server (`Server::scripting`), owned by the server thread and rebuilt by
//! SCRIPT FLUSH. A script runs to completion before anything else runs; the commands it calls
//! through `redis.call`/`redis.pcall` go through the same engine path as a client's (so their
//! canonical mutations join the pending batch, WATCH and the journal see them), and the caller
//! ([`Server::call`]) commits everything the script wrote as ONE batch with `Origin::Script`
//! (or, inside MULTI, as part of the EXEC batch). What is replicated is the script's effects,
//! never the EVAL itself. A script that fails midway keeps the writes it made, as in Redis,
//! and they commit together all the same.
//!
//! The sandbox follows Redis 7.0: the base, table, string, math and coroutine libraries plus
//! `cjson`, `cmsgpack`, `bit` and `struct` (libs.rs); `os` holds only `clock`; no `io`,
//! `loadfile`, `dofile`, `require`, `module`, `setfenv`/`getfenv`, `debug`, `print` or
//! `newproxy`. The globals table, and every library table, is a read-only proxy: creating or
//! changing a global answers `Attempt to modify a readonly table`, reading an undefined one
//! `Script attempted to access nonexistent global variable '...'` (Redis 7.0's texts).
//!
//! Timeout: an instruction-count hook checks the clock every [`HOOK_EVERY`] instructions.
//! Past `busy-reply-threshold` ms the script is busy: from then on the hook also runs a short
//! loop turn (`Server::busy_turn`) in which other clients are read and answered: `-BUSY` to
//! everything except `SCRIPT KILL` (stops a script that has not written) and `SHUTDOWN NOSAVE`.

mod call;
pub(crate) mod debugger;
pub mod functions;
pub mod libs;

use crate::conn::Conn;
use crate::server::Server;
use engine::{errors, util, CommandSpec, Flags};
use mlua::{Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Value, VmState};
use resp::{reply, Proto};
use std::cell::Cell;
use std::collections::HashMap;
use std::time::Instant;

/// One cached script.
struct Script {
    /// The compiled chunk, held in Lua's registry: an `mlua::Function` kept in Rust would take
    /// one of the few thousand slots of mlua's auxiliary stack per cached script, and the
    /// 7,997th script would abort the server.
    f: mlua::RegistryKey,
    /// Declared in a `#!lua` shebang line (else Redis's compatibility mode).
    shebang: bool,
    /// `flags=no-writes`: the script may only read, as under EVAL_RO.
    no_writes: bool,
    /// The shebang's flags, as [`functions::FLAG_NAMES`] bits (0 without a shebang).
    flags: u8,
    /// The body's length (INFO's used_memory_scripts counts bodies).
    body_len: usize,
    /// For a script EVAL cached: its place in [`Scripting::eval_lru`]. None for one SCRIPT LOAD
    /// cached, which is never evicted (even if EVAL cached it first, as in Redis).
    lru: Option<u64>,
}

/// How many scripts EVAL may keep cached: past it the least recently run one is dropped (Redis
/// 7.4's limit; an application that builds a new script body per call would otherwise grow
/// the cache without bound). SCRIPT LOAD's scripts do not count and are never dropped: a
/// client that loaded one relies on its EVALSHA finding it.
pub const EVAL_SCRIPTS_KEPT: usize = 500;

/// A `#!lua [flags=f1,f2]` first line, as Redis 7 reads it: (length of the line before its
/// newline, the flags as [`functions::FLAG_NAMES`] bits), or Redis's error.
fn parse_shebang(body: &[u8]) -> Result<(usize, u8), Vec<u8>> {
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err(b"ERR Invalid script shebang".to_vec());
    };
    let line = &body[..end];
    let mut parts = line.split(|&b| b == b' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or_default();
    if engine != b"#!lua" {
        let mut e = b"ERR Unexpected engine in script shebang: ".to_vec();
        e.extend_from_slice(engine);
        return Err(e);
    }
    let mut bits = 0u8;
    for part in parts {
        let Some(flags) = part.strip_prefix(b"flags=") else {
            let mut e = b"ERR Unknown lua shebang option: ".to_vec();
            e.extend_from_slice(part);
            return Err(e);
        };
        for flag in flags.split(|&b| b == b',').filter(|f| !f.is_empty()) {
            match functions::FLAG_NAMES.iter().find(|(name, _)| name.as_bytes() == flag) {
                Some((_, bit)) => bits |= bit,
                None => {
                    let other = flag;
                    let mut e = b"ERR Unexpected flag in script shebang: ".to_vec();
                    e.extend_from_slice(other);
                    return Err(e);
                }
            }
        }
    }
    Ok((end, bits))
}

/// The hook runs every this many VM instructions (Redis's figure).
const HOOK_EVERY: u32 = 100_000;

pub const BUSY: &[u8] =
    b"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
const NOSCRIPT: &[u8] = b"NOSCRIPT No matching script. Please use EVAL.";
pub(crate) const UNKILLABLE: &[u8] = b"UNKILLABLE Sorry the script already executed write commands against the dataset. \
You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
pub(crate) const NOTBUSY: &[u8] = b"NOTBUSY No scripts in execution right now.";
const KILLED: &str = "Script killed by user with SCRIPT KILL...";

/// What the running script's callbacks need: the server and the calling connection, as raw
/// pointers. Set only for the duration of one script (see [`Server::run_script`]), during
/// which the code that created them does not touch either; they are dereferenced only by the
/// `redis.call` callback and the timeout hook, which never run at the same time.
#[derive(Clone, Copy)]
struct Run {
    server: *mut Server,
    conn: *mut Conn,
    slot: usize,
    now: i64,
    read_only: bool,
    /// Declared `allow-oom`: its deny-oom commands run over maxmemory too.
    allow_oom: bool,
    /// Cluster mode: its commands may reach keys of other slots than its first (a script
    /// without a shebang, or one declaring `allow-cross-slot-keys`), as Redis 7 allows.
    cross_slot_ok: bool,
    start: Instant,
    threshold_ms: u64,
}

/// A script or function flagged `no-cluster`, in cluster mode (Redis's words).
pub(crate) const NO_CLUSTER_REFUSAL: &[u8] = b"ERR Can not run script on cluster, 'no-cluster' flag is set.";

thread_local! {
    static RUN: Cell<Option<Run>> = const { Cell::new(None) };
    /// The running script passed the busy threshold.
    static BUSY_NOW: Cell<bool> = const { Cell::new(false) };
    /// SCRIPT KILL asked the running script to stop.
    pub(crate) static KILL: Cell<bool> = const { Cell::new(false) };
    /// The running script called a write command (it can no longer be killed).
    pub(crate) static WROTE: Cell<bool> = const { Cell::new(false) };
    /// Cluster mode: the slot of the running script's keys (its declared ones, then the
    /// first its commands reach); see `Server::script_cluster_refusal`.
    pub(crate) static SCRIPT_SLOT: Cell<Option<u16>> = const { Cell::new(None) };
    /// The running script's caller tracks the keys it reads (client tracking, default mode):
    /// its read-only commands' keys are collected in `READ_KEYS`.
    pub(crate) static TRACK_READS: Cell<bool> = const { Cell::new(false) };
    /// The keys the running script's read-only commands read, each with the number of
    /// mutations the batch held when it was read (see `Tracking::deferred`). As Redis 7.2+,
    /// a script tracks the keys it read, not the keys it declared.
    pub(crate) static READ_KEYS: std::cell::RefCell<Vec<(usize, Vec<u8>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// When the busy script's loop turn last read every connection.
    static LAST_SWEEP: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Scripts run since the last collection step.
    static GC_COUNT: Cell<u32> = const { Cell::new(0) };
    /// The protocol replies to `redis.call` are converted from (`redis.setresp`).
    static LUA_RESP3: Cell<bool> = const { Cell::new(false) };
}

/// Whether a script is running (its connection is out of its slot meanwhile).
pub fn running() -> bool {
    RUN.with(|r| r.get().is_some())
}

/// Whether a script is running past the busy threshold (other clients get `-BUSY`).
pub fn busy() -> bool {
    BUSY_NOW.with(Cell::get)
}

/// The scripting VM and the script cache.
pub struct Scripting {
    lua: Lua,
    /// The real globals (the scripts see a read-only proxy of them).
    globals: Table,
    /// `xpcall(f, handler)`: runs a script and turns any error into Redis's error table.
    runner: Function,
    /// `call::runner(f, globals, handler)`: sets KEYS and ARGV, then does what `runner` does.
    eval_runner: Function,
    /// The error handler both runners use.
    handler: Function,
    /// The same for a function: `f(keys, args)`.
    fcall_runner: Function,
    /// `set_loading(true|false)`: the globals become the load-time API (FUNCTION LOAD), or
    /// the full ones again.
    set_loading: Function,
    /// sha1 (40 lowercase hex digits) -> compiled script.
    scripts: HashMap<[u8; 40], Script, std::hash::BuildHasherDefault<ShaHasher>>,
    /// Script bodies' bytes, for INFO's used_memory_scripts.
    bytes: usize,
    /// EVAL's cached scripts by last run, oldest first (tick -> sha1). Invariant: exactly the
    /// scripts whose `lru` is Some, each under its own tick; at most [`EVAL_SCRIPTS_KEPT`].
    eval_lru: std::collections::BTreeMap<u64, [u8; 40]>,
    /// The last tick given out.
    lru_clock: u64,
}

impl Scripting {
    /// For a cached script (by SHA1 in any case): its shebang's flags; None when it is not
    /// cached or has no shebang (Redis then goes by the command's own flags).
    fn declared_flags(&self, sha: &[u8]) -> Option<u8> {
        self.script_by_sha(sha).filter(|s| s.shebang).map(|s| s.flags)
    }

    fn script_by_sha(&self, sha: &[u8]) -> Option<&Script> {
        let sha: [u8; 40] = sha.to_ascii_lowercase().try_into().ok()?;
        self.scripts.get(&sha)
    }
}

impl Server {
    /// The flags a script command (EVAL, EVALSHA, FCALL and their _RO forms) declared, as
    /// [`functions::FLAG_NAMES`] bits: the EVAL body's shebang, the cached EVALSHA script's,
    /// the function's. None for any other command, a script without a shebang, an unknown
    /// script or function, or a bad shebang (the command itself then answers the error).
    /// Redis decides CLIENT PAUSE WRITE and the OOM refusal from these before the script runs.
    /// Whether a script command may run on a stale replica (`replica-serve-stale-data no`,
    /// link down), as Redis decides it: a script that declared flags, or a function, only with
    /// `allow-stale`; a script without a shebang never. None when the command is no script or
    /// names none that exists (it then answers its own error, as Redis's NOSCRIPT or "Function
    /// not found"). A script that declares writes never gets here on a replica: READONLY.
    pub(crate) fn script_allowed_stale(&mut self, spec: &CommandSpec, args: &[&[u8]]) -> Option<bool> {
        let arg = args.get(1).copied()?;
        let flags = match spec.name {
            "eval" | "eval_ro" if arg.starts_with(b"#!") => parse_shebang(arg).ok()?.1,
            "eval" | "eval_ro" => return Some(false),
            "evalsha" | "evalsha_ro" => {
                let script = self.scripting.as_ref()?.script_by_sha(arg)?;
                if !script.shebang {
                    return Some(false);
                }
                script.flags
            }
            "fcall" | "fcall_ro" => self.function_flags(arg)?,
            _ => return None,
        };
        Some(flags & functions::ALLOW_STALE != 0)
    }

    pub(crate) fn declared_script_flags(&mut self, spec: &CommandSpec, args: &[&[u8]]) -> Option<u8> {
        let arg = args.get(1).copied()?;
        match spec.name {
            "eval" | "eval_ro" if arg.starts_with(b"#!") => parse_shebang(arg).ok().map(|(_, f)| f),
            "evalsha" | "evalsha_ro" => self.scripting.as_ref()?.declared_flags(arg),
            "fcall" | "fcall_ro" => self.function_flags(arg),
            _ => None,
        }
    }
}

/// The script cache's hasher. Its keys are SHA1 digests of script bodies (only EVAL and
/// SCRIPT LOAD insert, and they insert the digest they computed), so no client can choose keys
/// that collide, and 8 of the 40 hex digits are as good as any hash: no SipHash over 40 bytes
/// on every EVALSHA.
#[derive(Default)]
struct ShaHasher(u64);

impl std::hash::Hasher for ShaHasher {
    fn write(&mut self, bytes: &[u8]) {
        // The array's bytes (a length prefix, if any, comes through `write_usize`).
        let mut head = [0u8; 8];
        let n = bytes.len().min(8);
        head[..n].copy_from_slice(&bytes[..n]);
        self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(head);
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = self.0.rotate_left(5) ^ n as u64;
    }
    fn finish(&self) -> u64 {
        // Hex digits use few bits per byte: spread them over the whole word (hashbrown takes
        // its control bits from the top).
        self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

fn sha1_hex(body: &[u8]) -> [u8; 40] {
    let mut out = [0u8; 40];
    out.copy_from_slice(sha1_smol::Sha1::from(body).digest().to_string().as_bytes());
    out
}

/// Lua code run once at VM creation, in the real globals (chunk name `=goblin`, which the
/// error handler skips when it looks for the script's line).
const PRELUDE: &str = r#"
local getinfo, error, type, tostring, setmetatable, rawget, rawset, pairs, select, next =
    debug.getinfo, error, type, tostring, setmetatable, rawget, rawset, pairs, select, next
local tbl_concat, str_sub, str_find, str_gsub = table.concat, string.sub, string.find, string.gsub
local raw_log, raw_setresp, raw_sha1hex, raw_known = __goblin_log, __goblin_setresp, __goblin_sha1hex, __goblin_known
local raw_acl_check = __goblin_acl_check
local redis = {}
-- The functions below return (failed, value); the C trampolines installed as redis.<name>
-- raise `value` when `failed` (a C frame keeps the script's frame for the error's line).
-- redis.call and redis.pcall are C functions of their own (scripting/call.rs).
local inner = {}

local function fail(msg) return true, {err = 'ERR ' .. msg} end

inner.register_function = __goblin_register

-- Redis's error normalisation: "-CODE msg" keeps its code, anything else gets ERR.
local function error_table(s)
  if str_sub(s, 1, 1) == '-' then s = str_sub(s, 2) end
  local sp = str_find(s, ' ', 1, true)
  local out
  if sp then out = str_sub(s, 1, sp - 1) .. ' ' .. str_sub(s, sp + 1) else out = 'ERR ' .. s end
  out = str_gsub(out, '^[\r\n]+', '')
  out = str_gsub(out, '[\r\n]+$', '')
  return {err = out}
end

-- A misused error_reply/status_reply returns (does not raise) an error, as in Redis.
inner.error_reply = function(...)
  local e = ...
  if select('#', ...) ~= 1 or (type(e) ~= 'string' and type(e) ~= 'number') then
    return false, {err = 'ERR wrong number or type of arguments'}
  end
  return false, error_table(tostring(e))
end
inner.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or (type(s) ~= 'string' and type(s) ~= 'number') then
    return false, {err = 'ERR wrong number or type of arguments'}
  end
  return false, {ok = tostring(s)}
end
inner.sha1hex = function(...)
  if select('#', ...) ~= 1 then return fail('wrong number of arguments') end
  return false, raw_sha1hex((...))
end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
inner.log = function(...)
  local n = select('#', ...)
  if n < 2 then return fail('redis.log() requires two arguments or more.') end
  local level = ...
  if type(level) ~= 'number' then return fail('First argument must be a number (log level).') end
  if level < 0 or level > 3 then return fail('Invalid log level.') end
  local parts = {}
  for i = 2, n do
    local v = select(i, ...)
    if type(v) == 'string' or type(v) == 'number' then parts[#parts + 1] = tostring(v) end
  end
  raw_log(level, tbl_concat(parts, ' '))
  return false, nil
end
inner.setresp = function(...)
  if select('#', ...) ~= 1 then return fail('redis.setresp() requires one argument.') end
  local v = ...
  if v ~= 2 and v ~= 3 then return fail('RESP version must be 2 or 3.') end
  raw_setresp(v)
  return false, nil
end
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
inner.set_repl = function(...)
  if select('#', ...) ~= 1 then return fail('redis.set_repl() requires one argument.') end
  local v = ...
  if type(v) ~= 'number' or v < 0 or v > 3 or v ~= v - v % 1 then
    return fail('Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.')
  end
  return false, nil
end
inner.acl_check_cmd = function(...)
  if select('#', ...) < 1 then return fail('Please specify at least one argument for this redis lib call') end
  local known = raw_known((...))
  if not known then return fail('Invalid command passed to redis.acl_check_cmd()') end
  return false, raw_acl_check(...)
end
redis.replicate_commands = function() return true end
redis.REDIS_VERSION = __goblin_version
redis.REDIS_VERSION_NUM = __goblin_version_num

-- The error handler: any error becomes {err = ..., source = ..., line = ...}, the source and
-- line being the script's (frames of C functions and of this prelude are skipped).
local handler = function(err)
  local lvl = 2
  local i = getinfo(lvl, 'Sl')
  while i and (i.what == 'C' or i.source == '=goblin') do
    lvl = lvl + 1
    i = getinfo(lvl, 'Sl')
  end
  if type(err) == 'userdata' then
    -- An error raised by the VM's Rust side (the timeout hook's SCRIPT KILL).
    err = str_gsub(tostring(err), '^runtime error: ', '')
    -- A Rust library function's error (cjson, cmsgpack, struct, bit) carries mlua's stack
    -- traceback: keep the message, placed at the script's line as luaL_error places it.
    local cut = str_find(err, '\nstack traceback:', 1, true)
    if cut then
      err = str_sub(err, 1, cut - 1)
      if i then err = str_gsub(i.source, '^@', '') .. ':' .. i.currentline .. ': ' .. err end
    end
  end
  if type(err) ~= 'table' then err = {err = 'ERR ' .. tostring(err)} end
  if i then
    err.source = i.source
    err.line = i.currentline
  end
  return err
end
local xpcall = xpcall
__goblin_runner = function(f) return xpcall(f, handler) end
-- EVAL's runner is a C function (call.rs) that calls the script under this same handler.
__goblin_handler = handler
-- A function (FCALL) gets its keys and arguments as parameters, not as globals.
__goblin_fcall_runner = function(f, keys, args) return xpcall(function() return f(keys, args) end, handler) end

-- Once SCRIPT KILL has stopped the script, nothing may catch that: pcall, xpcall and
-- coroutine.resume raise it again (Redis gets the same effect by raising at every line).
local killed, kill_msg = __goblin_killed, 'Script killed by user with SCRIPT KILL...'
-- Redis's pcall: an error table is returned as its message (the string errors of Redis 6).
local lua_pcall, lua_resume = pcall, coroutine.resume
local function pcall_result(ok, ...)
  if ok then return true, ... end
  if killed() then error(kill_msg, 0) end
  local e = ...
  if type(e) == 'table' and type(e.err) == 'string' then e = e.err end
  return false, e
end
pcall = function(...) return pcall_result(lua_pcall(...)) end
local function unless_killed(ok, ...)
  if not ok and killed() then error(kill_msg, 0) end
  return ok, ...
end
_G.xpcall = function(...) return unless_killed(xpcall(...)) end
coroutine.resume = function(...) return unless_killed(lua_resume(...)) end
__goblin_inner = inner
_G.redis = redis
os = {clock = os.clock}
"#;

/// Run after the trampolines are installed: read-only proxies for the globals and every
/// library table, and a `rawset` that refuses them.
const PROTECT: &str = r#"
local error, tostring, setmetatable, rawset, rawget, pairs = error, tostring, setmetatable, rawset, rawget, pairs
local getmetatable = getmetatable
local protected = setmetatable({}, {__mode = 'k'})
-- While a function library loads (FUNCTION LOAD), the globals are this table instead: only
-- `redis` with register_function, log and the version (Redis 7.0's load-time API).
local load_env = nil
-- A read of a global that does not exist: Redis's error, at the script's line.
local function miss(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
-- The switchable globals proxy's metatable (its __index is the real globals or the load-time
-- API) and the real globals table.
local globals_mt, real_globals = nil, nil
local function readonly(real, is_globals, switchable)
  local proxy = {}
  local mt = {
    __index = real,
    __newindex = function() error('Attempt to modify a readonly table', 2) end,
    __metatable = false,
  }
  if is_globals then
    -- A global read is a lookup through the proxy's __index TABLE into `real` (no Lua call
    -- per read: scripts read `redis` and KEYS on every run); only a miss reaches `real`'s own
    -- metatable, which raises. `real` is never visible to scripts.
    setmetatable(real, {__index = miss})
    if switchable then globals_mt, real_globals = mt, real end
    -- getmetatable(_G) shows a read-only view of the metatable (as Redis 7.0's): changing
    -- its __index is refused like any global. Its __index is shown as a function that reads
    -- as a global read does (never `real` itself, which would let a script write to it).
    local shown = {
      __index = function(_, k)
        local v
        if switchable and load_env then v = rawget(load_env, k) else v = rawget(real, k) end
        if v == nil then
          error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
        end
        return v
      end,
      __newindex = mt.__newindex,
    }
    local view = setmetatable({}, {
      __index = shown,
      __newindex = function() error('Attempt to modify a readonly table', 2) end,
      __metatable = false,
    })
    protected[view] = true
    mt.__metatable = view
    shown.__metatable = view
  end
  setmetatable(proxy, mt)
  -- A library's proxy remembers its table, so that pairs/next list its members.
  protected[proxy] = is_globals and true or real
  return proxy
end
-- pairs and next over a read-only library table walk the table behind it (as over Redis's
-- read-only tables), never handing the table itself to the script; any other table keeps
-- Lua's own iteration. C functions (`proxy_next`, `proxy_pairs`), so that an argument error
-- names the script's line as Lua's own would; they find the table in `goblin.protected`.
__goblin_protected = protected
_G.next = __goblin_next_c
_G.pairs = __goblin_pairs_c
_G.rawset = function(t, k, v)
  if protected[t] then error('Attempt to modify a readonly table', 0) end
  return rawset(t, k, v)
end
_G.setmetatable = function(t, mt)
  if protected[t] then error('Attempt to modify a readonly table', 0) end
  return setmetatable(t, mt)
end
-- No precompiled chunks: Lua 5.1 trusts bytecode, and crafted bytecode can corrupt the VM.
local lua_loadstring, lua_load, str_byte, tbl_concat, type = loadstring, load, string.byte, table.concat, type
_G.loadstring = function(s, name)
  if type(s) == 'string' and str_byte(s, 1) == 27 then
    return nil, 'loading a binary chunk is not allowed'
  end
  return lua_loadstring(s, name)
end
_G.load = function(f, name)
  if type(f) ~= 'function' then return lua_load(f, name) end
  local parts = {}
  while true do
    local p = f()
    if p == nil or p == '' then break end
    parts[#parts + 1] = p
  end
  return _G.loadstring(tbl_concat(parts), name or '=(load)')
end
for _, name in pairs({'redis', 'string', 'table', 'math', 'coroutine', 'os', 'bit', 'cjson', 'struct', 'cmsgpack'}) do
  _G[name] = readonly(_G[name], false)
end
-- The string metatable: methods through the read-only string table, and the metatable
-- itself read-only to getmetatable('').
local smt = getmetatable('')
smt.__index = _G.string
smt.__metatable = readonly(smt, false)
__goblin_proxy = readonly(_G, true, true)
do
  local real_redis = _G.redis
  local api = {register_function = __goblin_register_c}
  for _, k in pairs({'log', 'LOG_DEBUG', 'LOG_VERBOSE', 'LOG_NOTICE', 'LOG_WARNING', 'REDIS_VERSION', 'REDIS_VERSION_NUM'}) do
    api[k] = real_redis[k]
  end
  local env = setmetatable({redis = readonly(api, true)}, {__index = miss})
  __goblin_set_loading = function(on)
    if on then load_env = env else load_env = nil end
    globals_mt.__index = load_env or real_globals
  end
end
"#;

/// `redis.<name>` as C functions: each calls the Lua function stored in the registry under
/// `goblin.<name>`, which returns (failed, value), and raises `value` when `failed`. Being C
/// functions, a script's `return redis.call(...)` keeps the script's frame (a Lua function
/// would replace it in a tail call), so errors name the script's line as Redis does.
macro_rules! trampolines {
    ($($fname:ident => $key:literal),* $(,)?) => {
        $(
            unsafe extern "C-unwind" fn $fname(l: *mut mlua::lua_State) -> std::ffi::c_int {
                // SAFETY: called by Lua as a C function; the key is NUL-terminated.
                unsafe { trampoline(l, concat!("goblin.", $key, "\0").as_ptr() as *const std::ffi::c_char) }
            }
        )*
        const TRAMPOLINES: &[(&str, mlua::lua_CFunction)] = &[$(($key, $fname)),*];
    };
}

trampolines! {
    tr_error_reply => "error_reply",
    tr_status_reply => "status_reply",
    tr_sha1hex => "sha1hex",
    tr_log => "log",
    tr_setresp => "setresp",
    tr_set_repl => "set_repl",
    tr_acl_check_cmd => "acl_check_cmd",
    tr_register_function => "register_function",
}

/// redis.acl_check_cmd: whether the script's caller may run `argv` (an existing command) by its
/// user's rules, as Redis checks it (no refusal is logged).
fn acl_allows(argv: &[Vec<u8>]) -> bool {
    let Some(run) = RUN.with(Cell::get) else { return true };
    let Some(spec) = argv.first().and_then(|n| engine::lookup(n)) else { return false };
    // SAFETY: see `Run`: reads of the server and the connection while nothing else uses them.
    let (server, conn) = unsafe { (&*run.server, &*run.conn) };
    if !conn.restricted {
        return true;
    }
    let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    server.users.check(&conn.user, spec, &refs).is_none()
}

/// Scripts between two garbage collection steps, and the step's size in KiB (Redis's values).
const GC_PERIOD: u32 = 50;

/// The body of every trampoline. No Rust value with a destructor lives in this frame, so the
/// `lua_error` longjmp out of it is sound.
unsafe fn trampoline(l: *mut mlua::lua_State, key: *const std::ffi::c_char) -> std::ffi::c_int {
    use mlua::ffi;
    unsafe {
        let n = ffi::lua_gettop(l);
        ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, key);
        ffi::lua_insert(l, 1);
        ffi::lua_call(l, n, 2);
        if ffi::lua_toboolean(l, -2) != 0 {
            ffi::lua_error(l);
        }
        1
    }
}

/// Replaces the table at stack index 1 with the library table behind it when it is one of
/// PROTECT's read-only proxies (`goblin.protected` maps a proxy to its table).
///
/// SAFETY: `l` is a running Lua state with a table at index 1.
unsafe fn unproxy(l: *mut mlua::lua_State) -> bool {
    use mlua::ffi;
    unsafe {
        ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, c"goblin.protected".as_ptr());
        ffi::lua_pushvalue(l, 1);
        ffi::lua_rawget(l, -2);
        let proxy = ffi::lua_type(l, -1) == ffi::LUA_TTABLE;
        if proxy {
            ffi::lua_replace(l, 1);
            ffi::lua_pop(l, 1);
        } else {
            ffi::lua_pop(l, 2);
        }
        proxy
    }
}

/// `next(t [, k])`: Lua's, over the table behind a read-only proxy.
///
/// SAFETY: called by Lua as a C function, like the trampolines; it raises Lua errors
/// (a bad argument, an invalid key) exactly where Lua's own `next` does, and holds no Rust
/// value across them.
unsafe extern "C-unwind" fn proxy_next(l: *mut mlua::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    unsafe {
        ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
        ffi::lua_settop(l, 2);
        unproxy(l);
        if ffi::lua_next(l, 1) != 0 {
            2
        } else {
            ffi::lua_pushnil(l);
            1
        }
    }
}

/// `pairs(t)`: Lua's `next`, or `proxy_next` for a read-only proxy (whose iteration state
/// stays the proxy: the table behind it never reaches the script).
///
/// SAFETY: as `proxy_next`.
unsafe extern "C-unwind" fn proxy_pairs(l: *mut mlua::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    unsafe {
        ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
        ffi::lua_settop(l, 1);
        ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, c"goblin.protected".as_ptr());
        ffi::lua_pushvalue(l, 1);
        ffi::lua_rawget(l, -2);
        let proxy = ffi::lua_type(l, -1) == ffi::LUA_TTABLE;
        ffi::lua_settop(l, 1);
        let iter = if proxy { c"goblin.proxy_next" } else { c"goblin.lua_next" };
        ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, iter.as_ptr());
        ffi::lua_pushvalue(l, 1);
        ffi::lua_pushnil(l);
        3
    }
}

impl Scripting {
    pub fn new() -> Scripting {
        Self::build().expect("the Lua VM starts")
    }

    fn build() -> mlua::Result<Scripting> {
        let libs = StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::OS | StdLib::DEBUG;
        // SAFETY: the `debug` library is what makes this constructor unsafe; only the prelude's
        // error handler keeps `debug.getinfo` (an upvalue), and `debug` is removed from the
        // globals before any script is compiled.
        let lua = unsafe { Lua::unsafe_new_with(libs, LuaOptions::default()) };
        let g = lua.globals();
        libs::register(&lua, &g)?;
        g.set("__goblin_register", lua.create_function(functions::register_function)?)?;
        g.set(
            "__goblin_sha1hex",
            lua.create_function(|lua, v: Value| {
                let bytes = match &v {
                    Value::String(s) => s.as_bytes().to_vec(),
                    Value::Integer(_) | Value::Number(_) => {
                        lua.coerce_string(v.clone())?.map(|s| s.as_bytes().to_vec()).unwrap_or_default()
                    }
                    _ => Vec::new(),
                };
                Ok(String::from_utf8_lossy(&sha1_hex(&bytes)).into_owned())
            })?,
        )?;
        g.set(
            "__goblin_log",
            lua.create_function(|_, (level, msg): (i64, mlua::String)| {
                let m = msg.to_string_lossy();
                match level {
                    0 => tracing::debug!(target: "script", "{m}"),
                    1 => tracing::debug!(target: "script", "{m}"),
                    2 => tracing::info!(target: "script", "{m}"),
                    _ => tracing::warn!(target: "script", "{m}"),
                }
                Ok(())
            })?,
        )?;
        g.set(
            "__goblin_setresp",
            lua.create_function(|_, v: i64| {
                LUA_RESP3.with(|c| c.set(v == 3));
                Ok(())
            })?,
        )?;
        g.set(
            "__goblin_known",
            lua.create_function(|lua, v: Value| {
                let name = lua.coerce_string(v)?.map(|s| s.as_bytes().to_vec()).unwrap_or_default();
                Ok(engine::lookup(&name).is_some())
            })?,
        )?;
        g.set(
            "__goblin_acl_check",
            lua.create_function(|lua, args: mlua::Variadic<Value>| {
                let argv: Vec<Vec<u8>> = args
                    .into_iter()
                    .map(|v| {
                        lua.coerce_string(v).ok().flatten().map(|s| s.as_bytes().to_vec()).unwrap_or_default()
                    })
                    .collect();
                Ok(acl_allows(&argv))
            })?,
        )?;
        g.set("__goblin_killed", lua.create_function(|_, ()| Ok(KILL.with(Cell::get)))?)?;
        g.set("__goblin_version", crate::commands::info::REDIS_VERSION)?;
        g.set("__goblin_version_num", version_num(crate::commands::info::REDIS_VERSION))?;
        lua.load(PRELUDE).set_name("=goblin").exec()?;
        let inner: Table = g.get("__goblin_inner")?;
        let redis: Table = g.get("redis")?;
        for &(name, f) in TRAMPOLINES {
            let target: Function = inner.get(name)?;
            lua.set_named_registry_value(&format!("goblin.{name}"), target)?;
            // SAFETY: `f` is a trampoline above, a well-behaved C function.
            let c = unsafe { lua.create_c_function(f)? };
            if name == "register_function" {
                // Only the load-time API has it (PROTECT builds that table).
                g.set("__goblin_register_c", c)?;
            } else {
                redis.set(name, c)?;
            }
        }
        // SAFETY: call.rs's functions are well-behaved C functions (see its invariant).
        unsafe {
            redis.set("call", lua.create_c_function(call::redis_call)?)?;
            redis.set("pcall", lua.create_c_function(call::redis_pcall)?)?;
            // The debugger's: they act only during a session (debugger.rs).
            redis.set("breakpoint", lua.create_c_function(debugger::redis_breakpoint)?)?;
            redis.set("debug", lua.create_c_function(debugger::redis_debug)?)?;
        }
        // pairs/next over the read-only library tables (PROTECT installs them).
        let lua_next: Function = g.get("next")?;
        lua.set_named_registry_value("goblin.lua_next", lua_next)?;
        // SAFETY: well-behaved C functions (see `proxy_next`).
        let proxy_next_c = unsafe { lua.create_c_function(proxy_next)? };
        lua.set_named_registry_value("goblin.proxy_next", proxy_next_c.clone())?;
        g.set("__goblin_next_c", proxy_next_c)?;
        // SAFETY: as above.
        g.set("__goblin_pairs_c", unsafe { lua.create_c_function(proxy_pairs)? })?;
        lua.load(PROTECT).set_name("=goblin").exec()?;
        let protected: Table = g.get("__goblin_protected")?;
        lua.set_named_registry_value("goblin.protected", protected)?;
        let runner: Function = g.get("__goblin_runner")?;
        // SAFETY: as above.
        let eval_runner = unsafe { lua.create_c_function(call::runner)? };
        let handler: Function = g.get("__goblin_handler")?;
        let fcall_runner: Function = g.get("__goblin_fcall_runner")?;
        let set_loading: Function = g.get("__goblin_set_loading")?;
        let proxy: Table = g.get("__goblin_proxy")?;
        // Everything the prelude needed is captured in its closures: drop it from sight.
        for name in [
            "__goblin_handler",
            "__goblin_sha1hex",
            "__goblin_log",
            "__goblin_setresp",
            "__goblin_known",
            "__goblin_killed",
            "__goblin_version",
            "__goblin_version_num",
            "__goblin_runner",
            "__goblin_fcall_runner",
            "__goblin_set_loading",
            "__goblin_register_c",
            "__goblin_register",
            "__goblin_proxy",
            "__goblin_protected",
            "__goblin_next_c",
            "__goblin_pairs_c",
            "__goblin_inner",
            "debug",
            "print",
            "loadfile",
            "dofile",
            "require",
            "module",
            "setfenv",
            "getfenv",
            "newproxy",
            "package",
        ] {
            g.raw_set(name, Value::Nil)?;
        }
        g.raw_set("_G", proxy.clone())?;
        lua.set_globals(proxy)?;
        lua.set_global_hook(HookTriggers::new().every_nth_instruction(HOOK_EVERY), |_, _| hook())?;
        // Building the sandbox left garbage (the prelude's chunk, the globals replaced): a
        // new VM starts from what it keeps.
        lua.gc_collect()?;
        Ok(Scripting {
            lua,
            globals: g,
            runner,
            eval_runner,
            handler,
            fcall_runner,
            set_loading,
            scripts: HashMap::default(),
            bytes: 0,
            eval_lru: Default::default(),
            lru_clock: 0,
        })
    }

    /// Number of cached scripts (INFO).
    pub fn cached(&self) -> usize {
        self.scripts.len()
    }

    /// Bytes of cached script bodies (INFO).
    pub fn body_bytes(&self) -> usize {
        self.bytes
    }

    /// Memory the Lua VM uses (INFO used_memory_lua).
    pub fn vm_bytes(&self) -> usize {
        self.lua.used_memory()
    }

    /// Compiles `body` (if not cached) and returns its sha1; a compile error is Redis's text.
    /// `by_eval`: EVAL caches it (it may be evicted later, and evicts the least recently run
    /// of EVAL's scripts when there are [`EVAL_SCRIPTS_KEPT`]; `evicted` counts them); else
    /// SCRIPT LOAD does.
    fn load(&mut self, body: &[u8], by_eval: bool, evicted: &mut u64) -> Result<[u8; 40], Vec<u8>> {
        let sha = sha1_hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        // A shebang line is left out of the compiled code, its newline kept (line numbers).
        let (skip, shebang, flags) = if body.starts_with(b"#!") {
            let (len, flags) = parse_shebang(body)?;
            (len, true, flags)
        } else {
            (0, false, 0)
        };
        let no_writes = flags & functions::NO_WRITES != 0;
        if body.get(skip) == Some(&0x1b) {
            // Never bytecode (see the prelude's loadstring); Redis's parser reads it as text.
            return Err(b"ERR Error compiling script (new function): user_script:1: unexpected symbol near 'char(27)'"
                .to_vec());
        }
        match self
            .lua
            .load(&body[skip..])
            .set_name("@user_script")
            .into_function()
            .and_then(|f| self.lua.create_registry_value(f))
        {
            Ok(f) => {
                let lru = by_eval.then(|| {
                    while self.eval_lru.len() >= EVAL_SCRIPTS_KEPT {
                        let (_, oldest) = self.eval_lru.pop_first().expect("a full list");
                        self.forget(&oldest);
                        *evicted += 1;
                    }
                    self.lru_clock += 1;
                    self.eval_lru.insert(self.lru_clock, sha);
                    self.lru_clock
                });
                self.scripts.insert(sha, Script { f, shebang, no_writes, flags, body_len: body.len(), lru });
                self.bytes += body.len();
                Ok(sha)
            }
            Err(e) => {
                let msg = match &e {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                Err(format!("ERR Error compiling script (new function): {msg}").into_bytes())
            }
        }
    }
}

impl Scripting {
    /// Drops a cached script (its `eval_lru` entry is the caller's): the compiled chunk leaves
    /// Lua's registry, for the collector to free.
    fn forget(&mut self, sha: &[u8; 40]) {
        if let Some(script) = self.scripts.remove(sha) {
            self.bytes -= script.body_len;
            // Fails only for a key of another VM, which a script of this cache never holds.
            let _ = self.lua.remove_registry_value(script.f);
        }
    }

    /// EVAL or EVALSHA ran this script: it becomes EVAL's most recently run (if EVAL cached it).
    fn touch(&mut self, sha: &[u8; 40]) {
        let Some(script) = self.scripts.get_mut(sha) else { return };
        let Some(tick) = script.lru else { return };
        self.eval_lru.remove(&tick);
        self.lru_clock += 1;
        script.lru = Some(self.lru_clock);
        self.eval_lru.insert(self.lru_clock, *sha);
    }
}

impl Default for Scripting {
    fn default() -> Self {
        Self::new()
    }
}

fn version_num(v: &str) -> i64 {
    let mut n = 0i64;
    for part in v.split('.').take(3) {
        n = n * 256 + part.parse::<i64>().unwrap_or(0);
    }
    n
}

/// The instruction-count hook: busy detection, the busy loop turn, SCRIPT KILL.
fn hook() -> mlua::Result<VmState> {
    if let Some(deadline) = functions::LOAD_DEADLINE.with(Cell::get) {
        if Instant::now() >= deadline {
            return Err(mlua::Error::RuntimeError("FUNCTION LOAD timeout".to_string()));
        }
    }
    let Some(run) = RUN.with(Cell::get) else { return Ok(VmState::Continue) };
    if KILL.with(Cell::get) {
        return Err(mlua::Error::RuntimeError(KILLED.to_string()));
    }
    if !busy() && run.start.elapsed().as_millis() as u64 >= run.threshold_ms {
        BUSY_NOW.with(|b| b.set(true));
        tracing::warn!(
            "slow script detected: still in execution after {} milliseconds; \
             other clients now get BUSY (SCRIPT KILL or SHUTDOWN NOSAVE)",
            run.start.elapsed().as_millis()
        );
    }
    if busy() {
        // Every connection is read at the first busy turn and then every SWEEP_EVERY.
        const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_millis(100);
        let sweep = LAST_SWEEP.with(|l| match l.get() {
            Some(at) if at.elapsed() < SWEEP_EVERY => false,
            _ => {
                l.set(Some(Instant::now()));
                true
            }
        });
        // SAFETY: see `Run`: the redis.call callback is not running (the VM is between
        // instructions of Lua code), so this is the only live use of the pointer.
        let server = unsafe { &mut *run.server };
        server.busy_turn(sweep);
        if KILL.with(Cell::get) {
            return Err(mlua::Error::RuntimeError(KILLED.to_string()));
        }
    }
    Ok(VmState::Continue)
}

/// An error table `{err = msg}`.
fn err_table(lua: &Lua, msg: &[u8]) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(msg)?)?;
    Ok(Value::Table(t))
}

/// Commands scripts may not call although their flags allow it (their subcommands are
/// `noscript` in Redis).
fn denied_in_scripts(spec: &CommandSpec, argv: &[&[u8]]) -> bool {
    // DEBUG SET-DISABLE-DENY-SCRIPTS 1 lets test suites run these from scripts (as in Redis).
    if DENY_SCRIPTS_DISABLED.with(Cell::get) {
        return false;
    }
    // Blocking commands are not `noscript` (Redis 7.2+): they run without blocking (a list that
    // is empty answers nil at once; XREAD's BLOCK is ignored; WAIT and WAITAOF answer the
    // counts they have).
    spec.flags.has(Flags::NOSCRIPT)
        || matches!(
            spec.name,
            "client" | "config" | "debug" | "hello" | "auth" | "monitor" | "script" | "function"
        )
        // A container whose subcommand Redis marks noscript (CLUSTER RESET, ...).
        || argv.get(1).is_some_and(|sub| crate::commands::command::subcommand_has_flag(spec, sub, "noscript"))
}

thread_local! {
    /// DEBUG SET-DISABLE-DENY-SCRIPTS (the server thread is the only one running scripts).
    pub static DENY_SCRIPTS_DISABLED: Cell<bool> = const { Cell::new(false) };
}

/// A double reply's text, as Redis 8 writes it (`engine::dtoa`).
fn fmt_double(d: f64) -> String {
    engine::dtoa::double_text(d)
}

/// A script's return value as the reply Redis sends the client, in the client's protocol.
fn lua_to_reply(out: &mut Vec<u8>, proto: Proto, v: &Value, depth: usize) -> mlua::Result<()> {
    if depth > 1000 {
        reply::error(out, b"ERR reached lua stack limit");
        return Ok(());
    }
    match v {
        Value::String(s) => reply::bulk(out, &s.as_bytes()),
        Value::Integer(i) => reply::integer(out, *i),
        Value::Number(n) => reply::integer(out, lua_number_to_i64(*n)),
        // With the script in RESP2 (the default), Redis sends true as 1 and false as a null;
        // after redis.setresp(3), a boolean (1 or 0 to a RESP2 client).
        Value::Boolean(b) => {
            if LUA_RESP3.with(Cell::get) {
                if proto.is_resp3() {
                    reply::boolean(out, proto, *b);
                } else {
                    reply::integer(out, *b as i64);
                }
            } else if *b {
                reply::integer(out, 1);
            } else {
                reply::null_bulk(out, proto);
            }
        }
        Value::Table(t) => {
            if let Value::String(e) = t.raw_get::<Value>("err")? {
                // `-<msg>` as given: the message carries its own code.
                reply::error(out, &e.as_bytes());
                return Ok(());
            }
            if let Value::String(s) = t.raw_get::<Value>("ok")? {
                let s: Vec<u8> =
                    s.as_bytes().iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }).collect();
                reply::simple(out, &s);
                return Ok(());
            }
            match t.raw_get::<Value>("double")? {
                Value::Number(d) => {
                    reply::double(out, proto, fmt_double(d).as_bytes());
                    return Ok(());
                }
                Value::Integer(i) => {
                    reply::double(out, proto, fmt_double(i as f64).as_bytes());
                    return Ok(());
                }
                _ => {}
            }
            if let Value::String(s) = t.raw_get::<Value>("big_number")? {
                // CR and LF become spaces, as Redis does: the text goes on one RESP3 line.
                let s: Vec<u8> =
                    s.as_bytes().iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }).collect();
                if proto.is_resp3() {
                    out.push(b'(');
                    out.extend_from_slice(&s);
                    out.extend_from_slice(b"\r\n");
                } else {
                    reply::bulk(out, &s);
                }
                return Ok(());
            }
            if let Value::Table(m) = t.raw_get::<Value>("map")? {
                let pairs: Vec<(Value, Value)> = m.pairs::<Value, Value>().collect::<mlua::Result<_>>()?;
                reply::map_len(out, proto, pairs.len());
                for (k, v) in &pairs {
                    lua_to_reply(out, proto, k, depth + 1)?;
                    lua_to_reply(out, proto, v, depth + 1)?;
                }
                return Ok(());
            }
            if let Value::Table(m) = t.raw_get::<Value>("set")? {
                let keys: Vec<Value> =
                    m.pairs::<Value, Value>().map(|kv| kv.map(|(k, _)| k)).collect::<mlua::Result<_>>()?;
                reply::set_len(out, proto, keys.len());
                for k in &keys {
                    lua_to_reply(out, proto, k, depth + 1)?;
                }
                return Ok(());
            }
            if let Value::Table(vt) = t.raw_get::<Value>("verbatim_string")? {
                if let (Value::String(f), Value::String(s)) =
                    (vt.raw_get::<Value>("format")?, vt.raw_get::<Value>("string")?)
                {
                    let fb = f.as_bytes();
                    let mut format = [b' '; 3];
                    for (d, s) in format.iter_mut().zip(fb.iter()) {
                        *d = *s;
                    }
                    reply::verbatim(out, proto, &format, &s.as_bytes());
                    return Ok(());
                }
            }
            let mut items = Vec::new();
            let mut j = 1;
            loop {
                // Raw reads, as Redis 7: a metatable (even _G's, which raises on a missing
                // global) plays no part in turning a table into a reply.
                let v: Value = t.raw_get(j)?;
                if v.is_nil() {
                    break;
                }
                items.push(v);
                j += 1;
            }
            reply::array_len(out, items.len());
            for item in &items {
                lua_to_reply(out, proto, item, depth + 1)?;
            }
        }
        _ => reply::null_bulk(out, proto),
    }
    Ok(())
}

/// `(long long)` of a Lua number, as Redis converts it: truncation, and what x86-64 gives
/// for a value out of range or NaN (the "integer indefinite", i64::MIN).
fn lua_number_to_i64(n: f64) -> i64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if (-TWO_63..TWO_63).contains(&n) {
        n as i64
    } else {
        i64::MIN
    }
}

impl Server {
    /// EVAL | EVALSHA | EVAL_RO | EVALSHA_RO script-or-sha numkeys [key ...] [arg ...]
    pub(crate) fn eval_command(
        &mut self,
        c: &mut Conn,
        slot: usize,
        args: &[&[u8]],
        by_sha: bool,
        ro: bool,
        now: i64,
    ) {
        // EVALSHA refuses a digest of the wrong length before it reads numkeys, as Redis does.
        if by_sha && args[1].len() != 40 {
            return reply::error(&mut c.out, NOSCRIPT);
        }
        // SCRIPT DEBUG YES|SYNC: this EVAL runs under the debugger (not inside MULTI).
        if let Some(mode) = c.lua_debug.filter(|_| !self.in_exec) {
            if by_sha {
                return reply::error(&mut c.out, b"ERR Please use EVAL instead of EVALSHA for debugging");
            }
            return self.debug_eval(c, slot, args, ro, now, mode);
        }
        let numkeys = match util::parse_i64(args[2]) {
            Some(n) => n,
            None => return reply::error(&mut c.out, errors::NOT_INTEGER),
        };
        if numkeys > (args.len() - 3) as i64 {
            return reply::error(&mut c.out, b"ERR Number of keys can't be greater than number of args");
        }
        if numkeys < 0 {
            return reply::error(&mut c.out, b"ERR Number of keys can't be negative");
        }
        let sc = self.scripting.get_or_insert_with(Box::default);
        let sha = if by_sha {
            let given = args[1];
            if given.len() != 40 {
                return reply::error(&mut c.out, NOSCRIPT);
            }
            let mut sha = [0u8; 40];
            for (d, s) in sha.iter_mut().zip(given) {
                *d = s.to_ascii_lowercase();
            }
            sha
        } else {
            match sc.load(args[1], true, &mut self.stats.evicted_scripts) {
                Ok(sha) => sha,
                Err(msg) => return reply::error(&mut c.out, &msg),
            }
        };
        // The one lookup of the script (EVAL's `load` found or inserted it just now).
        let Some(&Script { shebang, no_writes, flags, .. }) = sc.scripts.get(&sha) else {
            return reply::error(&mut c.out, NOSCRIPT);
        };
        let keys = &args[3..3 + numkeys as usize];
        let argv = &args[3 + numkeys as usize..];
        // Redis checks `no-cluster` first among a shebang's flags.
        if shebang && flags & functions::NO_CLUSTER != 0 && self.cfg.cluster_enabled {
            return reply::error(&mut c.out, NO_CLUSTER_REFUSAL);
        }
        if ro && shebang && !no_writes {
            return reply::error(
                &mut c.out,
                b"ERR Can not execute a script with write flag using *_ro command.",
            );
        }
        let allow_oom = flags & functions::ALLOW_OOM != 0;
        // Compatibility mode (no shebang) reaches keys of any slot, as in Redis 7.
        let cross_slot_ok = !shebang || flags & functions::ALLOW_CROSS_SLOT != 0;
        self.run_script(c, slot, &sha, keys, argv, ro || no_writes, allow_oom, cross_slot_ok, now);
        // After the run, as Redis moves it in its list (whatever the script answered).
        if let Some(sc) = &mut self.scripting {
            sc.touch(&sha);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run_script(
        &mut self,
        c: &mut Conn,
        slot: usize,
        sha: &[u8; 40],
        keys: &[&[u8]],
        argv: &[&[u8]],
        ro: bool,
        allow_oom: bool,
        cross_slot_ok: bool,
        now: i64,
    ) {
        // The VM is taken out of the server while the script runs (the callbacks reach the
        // server through `Run`, and nothing may reach the VM through the server meanwhile).
        let Some(sc) = self.scripting.take() else { return };
        self.run_vm(&sc, c, slot, ro, allow_oom, (keys, cross_slot_ok), now, sha, |sc| {
            let Some(script) = sc.scripts.get(sha) else {
                return Err(mlua::Error::RuntimeError("no script".into()));
            };
            // KEYS and ARGV are built on the Lua stack by the C runner (call.rs), straight
            // from the command's arguments.
            let f: Function = sc.lua.registry_value(&script.f)?;
            call::with_script_args(keys, argv, || {
                sc.eval_runner.call::<(bool, Value)>((&f, &sc.globals, &sc.handler))
            })
        });
        self.scripting = Some(sc);
    }

    /// Runs `invoke` (a script or a function) in VM `sc`, which the caller took out of the
    /// server, with the callbacks' context set; writes its reply or its error (`name`, the
    /// script's sha or the function's name, in Redis's error suffix).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_vm(
        &mut self,
        sc: &Scripting,
        c: &mut Conn,
        slot: usize,
        ro: bool,
        allow_oom: bool,
        (keys, cross_slot_ok): (&[&[u8]], bool),
        now: i64,
        name: &[u8],
        invoke: impl FnOnce(&Scripting) -> mlua::Result<(bool, Value)>,
    ) {
        let threshold_ms = self.cfg.busy_reply_threshold;
        // The command's own start (see `Server::cmd_started`): one clock read fewer per script.
        let start = self.cmd_started.take().unwrap_or_else(Instant::now);
        RUN.with(|r| {
            r.set(Some(Run {
                server: self as *mut Server,
                conn: c as *mut Conn,
                slot,
                now,
                read_only: ro,
                allow_oom,
                cross_slot_ok,
                start,
                threshold_ms,
            }))
        });
        LUA_RESP3.with(|x| x.set(false));
        // The declared keys hash to one slot (dispatch refused them otherwise).
        SCRIPT_SLOT.with(|x| {
            x.set(
                self.cfg.cluster_enabled.then(|| keys.first().map(|k| crate::cluster::key_slot(k))).flatten(),
            )
        });
        WROTE.with(|x| x.set(false));
        TRACK_READS.with(|x| x.set(c.tracking.as_ref().is_some_and(|t| crate::tracking::tracks_reads(t))));
        KILL.with(|x| x.set(false));
        BUSY_NOW.with(|x| x.set(false));
        LAST_SWEEP.with(|x| x.set(None));
        // A script's SELECT holds for the rest of the script only (Redis 7): its caller
        // keeps its database.
        let caller_db = c.db;
        // TIME answers the script's start throughout (a script inside EXEC keeps EXEC's).
        let own_snapshot = self.time_snapshot_us.is_none();
        if own_snapshot {
            self.time_snapshot_us = Some(crate::commands::unix_micros(now));
        }
        let ran = invoke(sc);
        if own_snapshot {
            self.time_snapshot_us = None;
        }
        RUN.with(|r| r.set(None));
        if TRACK_READS.with(|x| x.replace(false)) {
            let reads = READ_KEYS.with(|r| std::mem::take(&mut *r.borrow_mut()));
            self.tracking_script_reads(c.id, slot, reads);
        }
        c.db = caller_db;
        self.engine.select(caller_db);
        // A panic `redis.call` caught (it may not unwind through Lua's C frames) goes on now.
        call::resume_panic();
        // After every 50th run, a garbage collection step of 50 KiB, as Redis 7.0 does after
        // scripts: the garbage of many small scripts (argument tables, reply strings) would
        // otherwise wait for Lua's own pace and inflate used_memory_lua.
        if GC_COUNT.with(|n| {
            let due = n.get() + 1 >= GC_PERIOD;
            n.set(if due { 0 } else { n.get() + 1 });
            due
        }) {
            let _ = sc.lua.gc_step_kbytes(GC_PERIOD as std::ffi::c_int);
        }
        let was_busy = BUSY_NOW.with(|x| x.replace(false));
        KILL.with(|x| x.set(false));
        if was_busy {
            tracing::warn!("slow script finished");
        }
        // Only an error reply names the script (made text then, not on every run).
        let sha_text = || String::from_utf8_lossy(name);
        match ran {
            Ok((true, v)) => {
                // A returned error that errorstats counted already (`return redis.pcall(..)`).
                if let Value::Table(t) = &v {
                    if let (Ok(Value::String(_)), Ok(Value::Boolean(true))) =
                        (t.raw_get::<Value>("err"), t.raw_get::<Value>("ignore_error_stats_update"))
                    {
                        self.stats.cmds.skip_next_error = true;
                    }
                }
                if let Err(e) = lua_to_reply(&mut c.out, c.proto, &v, 0) {
                    reply::error(&mut c.out, format!("ERR {e}").as_bytes());
                }
            }
            Ok((false, Value::Table(t))) => {
                if let Ok(Value::Boolean(true)) = t.raw_get::<Value>("ignore_error_stats_update") {
                    self.stats.cmds.skip_next_error = true;
                }
                let msg = match t.raw_get::<Value>("err") {
                    Ok(Value::String(s)) => s.as_bytes().to_vec(),
                    _ => b"ERR unknown error".to_vec(),
                };
                let mut text = msg;
                match (t.raw_get::<Value>("source"), t.raw_get::<Value>("line")) {
                    (Ok(Value::String(src)), Ok(line @ (Value::Integer(_) | Value::Number(_)))) => {
                        let line = match line {
                            Value::Integer(i) => i,
                            Value::Number(n) => n as i64,
                            _ => 0,
                        };
                        text.extend_from_slice(format!(" script: {}, on ", sha_text()).as_bytes());
                        text.extend_from_slice(&src.as_bytes());
                        text.extend_from_slice(format!(":{line}.").as_bytes());
                    }
                    _ => text.extend_from_slice(format!(" script: {}.", sha_text()).as_bytes()),
                }
                reply::error(&mut c.out, &text);
            }
            Ok((false, other)) => {
                let s = sc
                    .lua
                    .coerce_string(other)
                    .ok()
                    .flatten()
                    .map(|s| s.to_string_lossy())
                    .unwrap_or_default();
                reply::error(&mut c.out, format!("ERR {s} script: {}.", sha_text()).as_bytes());
            }
            Err(e) => reply::error(&mut c.out, format!("ERR {e} script: {}.", sha_text()).as_bytes()),
        }
    }

    /// SCRIPT LOAD | EXISTS | FLUSH | KILL | HELP
    pub(crate) fn script_command(&mut self, c: &mut Conn, args: &[&[u8]]) {
        let sub = args[1].to_ascii_lowercase();
        let out = &mut c.out;
        match sub.as_slice() {
            b"load" if args.len() == 3 => {
                let sc = self.scripting.get_or_insert_with(Box::default);
                match sc.load(args[2], false, &mut self.stats.evicted_scripts) {
                    Ok(sha) => reply::bulk(out, &sha),
                    Err(msg) => reply::error(out, &msg),
                }
            }
            b"exists" if args.len() >= 3 => {
                let sc = self.scripting.get_or_insert_with(Box::default);
                reply::array_len(out, args.len() - 2);
                for a in &args[2..] {
                    let known = a.len() == 40 && {
                        let mut sha = [0u8; 40];
                        for (d, s) in sha.iter_mut().zip(a.iter()) {
                            *d = s.to_ascii_lowercase();
                        }
                        sc.scripts.contains_key(&sha)
                    };
                    reply::integer(out, known as i64);
                }
            }
            b"flush" if args.len() <= 3 => {
                if args.len() == 3
                    && !args[2].eq_ignore_ascii_case(b"sync")
                    && !args[2].eq_ignore_ascii_case(b"async")
                {
                    return reply::error(out, b"ERR SCRIPT FLUSH only support SYNC|ASYNC option");
                }
                self.scripting = Some(Box::default());
                reply::ok(out);
            }
            b"kill" if args.len() == 2 => reply::error(out, NOTBUSY),
            // The Lua debugger (debugger.rs): the mode holds for this connection's next EVALs.
            b"debug" if args.len() == 3 => {
                if c.out.len() > c.out_pos {
                    return reply::error(&mut c.out, b"ERR SCRIPT DEBUG must be called outside a pipeline");
                }
                let mode = match args[2].to_ascii_lowercase().as_slice() {
                    b"no" => None,
                    b"yes" => Some(debugger::Mode::Forked),
                    b"sync" => Some(debugger::Mode::Sync),
                    _ => return reply::error(&mut c.out, b"ERR Use SCRIPT DEBUG YES/SYNC/NO"),
                };
                if mode.is_some()
                    && !matches!(c.stream, crate::conn::Stream::Tcp(_) | crate::conn::Stream::Unix(_))
                {
                    return reply::error(
                        &mut c.out,
                        b"ERR SCRIPT DEBUG needs a plain TCP or Unix socket connection (not TLS or a shared-memory transport)",
                    );
                }
                c.lua_debug = mode;
                reply::ok(&mut c.out);
            }
            b"help" if args.len() == 2 => crate::commands::help(
                out,
                &[
                    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "DEBUG (YES|SYNC|NO)",
                    "    Set the debug mode for subsequent scripts executed.",
                    "EXISTS <sha1> [<sha1> ...]",
                    "    Return information about the existence of the scripts in the script cache.",
                    "FLUSH [ASYNC|SYNC]",
                    "    Flush the Lua scripts cache. Very dangerous on replicas.",
                    "    When called without the optional mode argument, the behavior is determined by the",
                    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
                    "    * ASYNC: Asynchronously flush the scripts cache.",
                    "    * SYNC: Synchronously flush the scripts cache.",
                    "KILL",
                    "    Kill the currently executing Lua script.",
                    "LOAD <script>",
                    "    Load a script into the scripts cache without executing it.",
                    "HELP",
                    "    Print this help.",
                ],
            ),
            b"load" | b"exists" | b"flush" | b"kill" | b"help" | b"debug" => {
                crate::commands::wrong_sub_arity(out, args[0], args[1])
            }
            _ => errors::unknown_subcommand(out, args[0], args[1]),
        }
    }

    /// While a script is busy: the command other clients sent. Only SCRIPT KILL and
    /// SHUTDOWN NOSAVE act; everything else gets `-BUSY`. Nothing here commits a batch (the
    /// script's writes are pending).
    pub(crate) fn call_while_busy(
        &mut self,
        conn: &mut Conn,
        slot: usize,
        spec: &'static CommandSpec,
        args: &[&[u8]],
    ) {
        // SCRIPT KILL, FUNCTION KILL (each stops only its own kind) and FUNCTION STATS.
        if self.function_while_busy(conn, spec, args) {
            return;
        }
        if spec.name == "shutdown" && args.len() == 2 && args[1].eq_ignore_ascii_case(b"nosave") {
            tracing::warn!("SHUTDOWN NOSAVE while a script is busy: exiting without committing its writes");
            self.exit_now();
        }
        // Redis 7.0's allow-busy commands: the transaction ones (a MULTI opened now fails at
        // EXEC if a command is refused meanwhile), and the connection ones. None of them
        // writes, so the script's pending batch is not touched.
        match spec.name {
            "multi" | "discard" | "watch" | "unwatch" => {
                let now = self.clock_ms;
                return self.transaction_command(conn, slot, spec, args, now);
            }
            "reset" | "hello" | "auth" | "quit" => {
                let now = self.clock_ms;
                self.stats.server_commands += 1;
                return crate::commands::run(self, conn, slot, spec, args, now);
            }
            _ => {}
        }
        let busy = if functions::function_running() { functions::BUSY_FUNCTION } else { BUSY };
        if spec.name == "exec" {
            // A refused EXEC ends the transaction (queued or not), as Redis's execCommandAbort.
            conn.multi = None;
            self.watches.unwatch_all(conn);
            let mut e = b"EXECABORT Transaction discarded because of: ".to_vec();
            e.extend_from_slice(busy);
            return reply::error(&mut conn.out, &e);
        }
        // As any refused command, a BUSY inside MULTI fails the transaction at EXEC.
        if let Some(m) = &mut conn.multi {
            m.dirty = true;
        }
        reply::error(&mut conn.out, busy);
    }
}
