//! The hot path of a script: `redis.call`/`redis.pcall` and the script runner, as raw Lua C
//! functions working on the Lua stack directly.
//!
//! Why raw: through mlua, every argument of `redis.call` became a `Value` holding a registry
//! reference, was copied into an owned `Vec<u8>`, and the reply came back as a `Value` again;
//! KEYS and ARGV were built one `create_string` (another reference) at a time. Here the
//! arguments are borrowed straight off the Lua stack (a Lua string stays put while it is on the
//! stack, and nothing pops it before the command returns), the command replies into a reused
//! buffer, and the reply is pushed onto the stack as Lua values.
//!
//! Invariant for every function here that may `lua_error`: no Rust value with a destructor is
//! alive in its frame when it raises (the longjmp would skip it). The work that owns buffers
//! runs in `call_body`, which only pushes values and reports whether the pushed value is an
//! error; the raise happens after it has returned. A panic in the command is caught, kept in
//! [`PANIC`] and resumed once the VM call has returned to Rust (as mlua does for its own
//! callbacks), so it never unwinds through Lua's C frames.

use super::{denied_in_scripts, Run, LUA_RESP3, READ_KEYS, RUN, TRACK_READS, WROTE};
use crate::server::Server;
use engine::{CommandSpec, Flags, Handler, Outcome};
use mlua::ffi;
use resp::{reply, Frame, Proto};
use std::cell::Cell;
use std::ffi::{c_char, c_int};
use std::time::Instant;

thread_local! {
    /// The reply buffer of `redis.call`, reused from call to call (taken while in use, so a
    /// nested use would only allocate a fresh one).
    static OUT: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
    /// A panic caught in `redis.call`, resumed by [`resume_panic`] after the script returns.
    static PANIC: Cell<Option<Box<dyn std::any::Any + Send>>> = const { Cell::new(None) };
    /// The KEYS and ARGV of the script about to run, for [`runner`]: set by
    /// [`with_script_args`] for the duration of one call only.
    static SCRIPT_ARGS: Cell<Option<ScriptArgs>> = const { Cell::new(None) };
}

/// KEYS and ARGV as (pointer, length) pairs of the command's argument list.
type ScriptArgs = (*const &'static [u8], usize, *const &'static [u8], usize);

/// Runs `f` with `keys` and `argv` readable by [`runner`] (which builds KEYS and ARGV from
/// them). The slices outlive the call: they are cleared again before this returns.
pub(super) fn with_script_args<R>(keys: &[&[u8]], argv: &[&[u8]], f: impl FnOnce() -> R) -> R {
    // The 'static is a lie confined to this call: `runner` only reads the slices while `f` runs.
    SCRIPT_ARGS.with(|a| a.set(Some((keys.as_ptr().cast(), keys.len(), argv.as_ptr().cast(), argv.len()))));
    let r = f();
    SCRIPT_ARGS.with(|a| a.set(None));
    r
}

/// If `redis.call` caught a panic during the script, resumes it now (the VM call has returned
/// to Rust, so unwinding is sound again).
pub(super) fn resume_panic() {
    if let Some(p) = PANIC.with(Cell::take) {
        std::panic::resume_unwind(p);
    }
}

/// Pushes an array table of `items` as Lua strings.
unsafe fn push_array(l: *mut ffi::lua_State, items: &[&[u8]]) {
    unsafe {
        ffi::lua_createtable(l, items.len().min(c_int::MAX as usize) as c_int, 0);
        for (i, a) in items.iter().enumerate() {
            ffi::lua_pushlstring_(l, a.as_ptr() as *const c_char, a.len());
            ffi::lua_rawseti_(l, -2, (i + 1) as c_int);
        }
    }
}

/// The script runner, called as `runner(f, globals, handler)`: sets the globals KEYS and ARGV
/// to new tables of the pending arguments (new each run, as Redis 7.0 makes them: a script
/// may keep or change its tables), then calls `f` under `handler` and returns (true, first
/// result) or (false, the handler's error value), as `xpcall(f, handler)` would.
pub(super) unsafe extern "C-unwind" fn runner(l: *mut ffi::lua_State) -> c_int {
    unsafe {
        ffi::lua_settop(l, 3);
        if let Some((kp, kn, ap, an)) = SCRIPT_ARGS.with(Cell::get) {
            // SAFETY: `with_script_args` keeps these slices alive while the script runs.
            let (keys, argv) = (std::slice::from_raw_parts(kp, kn), std::slice::from_raw_parts(ap, an));
            ffi::lua_pushlstring_(l, c"KEYS".as_ptr(), 4);
            push_array(l, keys);
            ffi::lua_rawset(l, 2);
            ffi::lua_pushlstring_(l, c"ARGV".as_ptr(), 4);
            push_array(l, argv);
            ffi::lua_rawset(l, 2);
        }
        ffi::lua_pushvalue(l, 1);
        // Under the debugger, its hook replaces the VM's for this run.
        let saved = super::debugger::active().then(|| {
            let saved = (ffi::lua_gethook(l), ffi::lua_gethookmask(l), ffi::lua_gethookcount(l));
            let (hook, mask, count) = super::debugger::hook_settings();
            ffi::lua_sethook(l, Some(hook), mask, count);
            saved
        });
        let ok = ffi::lua_pcall(l, 0, 1, 3) == 0;
        if let Some((hook, mask, count)) = saved {
            ffi::lua_sethook(l, hook, mask, count);
        }
        ffi::lua_pushboolean(l, ok as c_int);
        ffi::lua_insert(l, -2);
        2
    }
}

/// `redis.call`: the command's reply, or its error table raised.
pub(super) unsafe extern "C-unwind" fn redis_call(l: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua as a C function; see the module's invariant.
    unsafe {
        if call_body(l) {
            ffi::lua_error(l);
        }
    }
    1
}

/// `redis.pcall`: the command's reply, or its error table returned.
pub(super) unsafe extern "C-unwind" fn redis_pcall(l: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua as a C function.
    unsafe { call_body(l) };
    1
}

/// Runs the command given by the arguments on the stack and pushes one value: the reply, or
/// an error table. True when it is an error table.
unsafe fn call_body(l: *mut ffi::lua_State) -> bool {
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { call_inner(l) }));
    match caught {
        Ok(is_err) => is_err,
        Err(p) => {
            PANIC.with(|x| x.set(Some(p)));
            unsafe { push_err(l, b"ERR internal error", false) };
            true
        }
    }
}

/// What became of a `redis.call` before any reply.
#[derive(Clone)]
enum Early {
    /// An error no statistic counted (the call never reached a command).
    Plain(&'static [u8]),
    /// A refusal, counted as Redis counts it.
    Refused(Option<&'static CommandSpec>, &'static [u8]),
    /// An ACL refusal, whose text names the user.
    NoPerm(&'static CommandSpec, Vec<u8>),
}

unsafe fn call_inner(l: *mut ffi::lua_State) -> bool {
    unsafe {
        let n = ffi::lua_gettop(l).max(0) as usize;
        if RUN.with(Cell::get).is_none() {
            return push_err(l, b"ERR redis.call used outside of a script", false);
        }
        if n == 0 {
            return push_err(l, b"ERR Please specify at least one argument for this redis lib call", false);
        }
        // Numbers are written out (`%.17g`, as Redis 7.0) into `nums`; strings
        // are borrowed from the stack. Up to 16 arguments need no allocation for the list.
        let mut nums: Vec<u8> = Vec::new();
        let mut num_ends: [usize; 16] = [0; 16];
        let mut num_ends_more: Vec<usize> = Vec::new();
        let mut n_nums = 0usize;
        for i in 1..=n {
            match ffi::lua_type(l, i as c_int) {
                ffi::LUA_TSTRING => {}
                ffi::LUA_TNUMBER => {
                    write_number(&mut nums, ffi::lua_tonumber(l, i as c_int));
                    if n_nums < num_ends.len() {
                        num_ends[n_nums] = nums.len();
                    } else {
                        num_ends_more.push(nums.len());
                    }
                    n_nums += 1;
                }
                _ => {
                    return push_err(
                        l,
                        b"ERR Lua redis lib command arguments must be strings or integers",
                        false,
                    )
                }
            }
        }
        let mut small: [&[u8]; 16] = [&[]; 16];
        let mut large: Vec<&[u8]> = Vec::new();
        let argv: &mut [&[u8]] = if n <= small.len() {
            &mut small[..n]
        } else {
            large.resize(n, &[]);
            &mut large[..]
        };
        let (mut k, mut start) = (0usize, 0usize);
        for (i, slot) in argv.iter_mut().enumerate() {
            let idx = (i + 1) as c_int;
            if ffi::lua_type(l, idx) == ffi::LUA_TSTRING {
                let mut len = 0usize;
                let p = ffi::lua_tolstring(l, idx, &mut len);
                // SAFETY: the string stays on the stack (and so alive and unmoved) until the
                // `lua_settop` below, after the command has run (Lua 5.1 never moves a string).
                *slot = std::slice::from_raw_parts(p as *const u8, len);
            } else if k < n_nums {
                let end = if k < num_ends.len() { num_ends[k] } else { num_ends_more[k - num_ends.len()] };
                *slot = &nums[start..end];
                start = end;
                k += 1;
            }
        }
        let mut out = OUT.with(Cell::take);
        out.clear();
        let logged = super::debugger::logging();
        if logged {
            super::debugger::log_command(argv);
        }
        let result = run_command(argv, &mut out);
        if logged {
            match result {
                Ok(()) => super::debugger::log_reply(&out),
                Err(Early::Plain(msg) | Early::Refused(_, msg)) => super::debugger::log_error(msg),
                Err(Early::NoPerm(_, ref msg)) => super::debugger::log_error(msg),
            }
        }
        match &result {
            Err(Early::Refused(spec, msg)) => refused(*spec, argv, msg),
            Err(Early::NoPerm(spec, msg)) => refused(Some(spec), argv, msg),
            _ => {}
        }
        // The arguments are no longer needed (`argv` must not be read past this point): the
        // stack is emptied so that the reply, however many arguments came, has room.
        ffi::lua_settop(l, 0);
        let is_err = match result {
            Err(Early::Plain(msg)) => push_err(l, msg, false),
            Err(Early::Refused(_, msg)) => push_err(l, msg, true),
            Err(Early::NoPerm(_, msg)) => push_err(l, &msg, true),
            Ok(()) => push_reply(l, &out),
        };
        // A huge reply's buffer is not kept for the next call.
        if out.capacity() <= 64 * 1024 {
            OUT.with(|o| o.set(out));
        }
        is_err
    }
}

/// A Lua number as `redis.call` passes it in Redis 8: an integer within +-2^62 as one, anything
/// else as Grisu2's shortest digits (0.1 is 0.1; Lua's own "%.14g" would lose digits).
fn write_number(out: &mut Vec<u8>, n: f64) {
    engine::dtoa::push_number(out, n);
}

/// Everything `redis.call` checks before the command, then the command, replying into `out`.
fn run_command(argv: &[&[u8]], out: &mut Vec<u8>) -> Result<(), Early> {
    let Some(run) = RUN.with(Cell::get) else {
        return Err(Early::Plain(b"ERR redis.call used outside of a script"));
    };
    if argv.is_empty() {
        return Err(Early::Plain(b"ERR Please specify at least one argument for this redis lib call"));
    }
    let Some(spec) = crate::rename::lookup(argv[0]) else {
        return Err(Early::Refused(None, b"ERR Unknown Redis command called from script"));
    };
    // Under its own name, as a client's renamed command (rename.rs).
    let own_name = crate::rename::under_own_name(spec, argv);
    let argv = own_name.as_deref().unwrap_or(argv);
    if !spec.arity_ok(argv.len()) {
        return Err(Early::Refused(
            Some(spec),
            b"ERR Wrong number of args calling Redis command from script",
        ));
    }
    if denied_in_scripts(spec, argv) {
        return Err(Early::Refused(Some(spec), b"ERR This Redis command is not allowed from script"));
    }
    // A script allowed to run on a stale replica (`allow-stale`) still runs only the commands
    // flagged stale there (INFO yes, GET no), checked before ACL as in Redis.
    // SAFETY: see `Run`: only a read of the server's replication state.
    if unsafe { (*run.server).running_stale() }
        && !crate::commands::command::redis_flagged(spec, argv, Flags::STALE, "stale")
    {
        return Err(Early::Refused(Some(spec), b"ERR Can not execute the command on a stale replica"));
    }
    // ACL: the script runs as its caller's user.
    // SAFETY: see `Run`: reads of the server and the connection, and a refusal added to the
    // server's ACL log, while nothing else uses them (`server` is not used past this check).
    let (server, conn) = unsafe { (&mut *run.server, &*run.conn) };
    if conn.restricted {
        let denied = server.users.check(&conn.user, spec, argv);
        if let Some(d) = denied {
            crate::commands::log_refusal(server, conn, spec, argv, d, crate::auth::Context::Lua);
            // Redis 8's text: "ACL failure in script: " and the refusal a client would get.
            let why = crate::commands::noperm(d, &conn.user, spec, argv);
            let why = why.strip_prefix("NOPERM ").unwrap_or(&why);
            return Err(Early::NoPerm(spec, format!("ERR ACL failure in script: {why}").into_bytes()));
        }
        // SORT's BY and GET need read access to every key, in a script as outside one: the
        // command's own error reply, as Redis's SORT gives it (dispatch.rs has the same).
        if matches!(spec.name, "sort" | "sort_ro") {
            if let Some(err) = crate::commands::sort_pattern_refusal(spec, argv) {
                if !server.users.find(conn.user.as_bytes()).is_some_and(|u| u.reads_every_key(spec, argv)) {
                    resp::reply::error(out, err);
                    return Ok(());
                }
            }
        }
    }
    // Like Redis, a read-only script also refuses the reads that may write (PFCOUNT).
    if run.read_only && (spec.is_write() || spec.flags.has(Flags::MAY_REPLICATE)) {
        return Err(Early::Refused(
            Some(spec),
            b"ERR Write commands are not allowed from read-only scripts.",
        ));
    }
    // maxmemory: a write that may grow memory is refused inside a script as outside one,
    // unless the script declared `allow-oom`, as in Redis.
    // SAFETY: see `Run`: reads of the server's settings while nothing else uses it.
    if spec.flags.has(Flags::DENYOOM) && !run.allow_oom && unsafe { (*run.server).over_memory_limit() } {
        return Err(Early::Refused(Some(spec), b"OOM command not allowed when used memory > 'maxmemory'."));
    }
    if spec.is_write() {
        // SAFETY: see `Run`: only a read of the server's role while nothing else uses it.
        if unsafe { (*run.server).follows_upstream() } {
            // A replica's data changes only through its upstream (as Redis's read-only replica).
            return Err(Early::Refused(Some(spec), b"READONLY You can't write against a read only replica."));
        }
        // stop-writes-on-bgsave-error: every write of a script is refused while the last save
        // failed, as a client's is (dispatch.rs), as in Redis.
        // SAFETY: see `Run`: only reads of the server's state while nothing else uses it.
        if unsafe { (*run.server).writes_stopped_by_failed_save() } {
            return Err(Early::Refused(Some(spec), crate::dispatch::MISCONF));
        }
        // The Kafka journal's record size limit, as for a client's command (dispatch.rs).
        // SAFETY: see `Run`: only reads of the server's state while nothing else uses it.
        if unsafe { (*run.server).journal_oversized(spec, argv) }.is_some() {
            return Err(Early::Refused(Some(spec), crate::dispatch::JOURNAL_RECORD_TOO_LARGE));
        }
        // min-replicas-to-write: refused only before the script's first write (after it, the
        // script must not fail halfway on the server's state), as in Redis.
        // SAFETY: see `Run`: only reads of the server's state while nothing else uses it.
        if !WROTE.with(|w| w.get()) && unsafe { (*run.server).lacks_good_replicas() } {
            return Err(Early::Refused(Some(spec), crate::dispatch::NOREPLICAS));
        }
        WROTE.with(|w| w.set(true));
    } else if spec.flags.has(Flags::READONLY) && TRACK_READS.with(Cell::get) {
        // SAFETY: see `Run`: only a read of the pending batch's length while nothing else uses it.
        let at = unsafe { (*run.server).engine.pending().len() };
        READ_KEYS.with(|r| {
            let mut r = r.borrow_mut();
            for key in crate::tracking::read_keys(spec, argv) {
                r.push((at, key.to_vec()));
            }
        });
    }
    // Cluster mode: its keys in one slot, and (unless it may cross slots) the script's.
    // SAFETY: see `Run`: only reads of the server's settings while nothing else uses it.
    if let Some(e) = unsafe { (*run.server).script_cluster_refusal(spec, argv, run.cross_slot_ok) } {
        return Err(Early::Refused(Some(spec), e));
    }
    let proto = if LUA_RESP3.with(Cell::get) { Proto::Resp3 } else { Proto::Resp2 };
    execute(&run, spec, argv, out, proto);
    Ok(())
}

/// Runs an admitted command for the script, replying into `out` in the script's protocol.
fn execute(run: &Run, spec: &'static CommandSpec, argv: &[&[u8]], out: &mut Vec<u8>, proto: Proto) {
    // SAFETY: see `Run`: the script's caller does not touch the server or the connection
    // while the script runs, and the hook is not running now.
    let (server, conn): (&mut Server, _) = unsafe { (&mut *run.server, &mut *run.conn) };
    // MONITOR shows a script's commands as the script's (`[0 lua]`), after its EVAL line.
    server.feed_monitors_from_script(spec, argv);
    // INFO commandstats counts a script's commands as Redis does (each its own call), and so
    // does the caller's CLIENT LIST `tot-cmds`.
    let started = Instant::now();
    conn.commands += 1;
    match spec.handler {
        Handler::Data(_) => {
            // Handlers that Redis makes deterministic for scripts see it (engine::Ctx::script).
            server.engine.script = true;
            let outcome = server.run_engine(spec, argv, run.now, out, proto, false);
            server.engine.script = false;
            if let Outcome::Blocked(_) = outcome {
                reply::null_array(out, proto);
            }
        }
        // PUBLISH goes out as the caller's: a message to a channel the caller subscribed
        // reaches it in its own protocol, after the script's reply (`flush_self_pushes`).
        Handler::Server if matches!(spec.name, "publish" | "spublish") => {
            server.stats.server_commands += 1;
            let n = server.publish(conn, run.slot, spec.name == "spublish", argv[1], argv[2]);
            reply::integer(out, n as i64);
        }
        Handler::Server => {
            // Server commands a script may call (TIME, INFO, ...) reply into the script's
            // buffer, in the script's protocol.
            server.stats.server_commands += 1;
            let saved_out = std::mem::replace(&mut conn.out, std::mem::take(out));
            let saved_proto = std::mem::replace(&mut conn.proto, proto);
            let saved_cmd = conn.last_cmd;
            crate::commands::run(server, conn, run.slot, spec, argv, run.now);
            *out = std::mem::replace(&mut conn.out, saved_out);
            conn.proto = saved_proto;
            conn.last_cmd = saved_cmd;
        }
    }
    let name = match spec.handler {
        Handler::Server => {
            argv.get(1).and_then(|sub| crate::commands::subcommand_name(spec.name, sub)).unwrap_or(spec.name)
        }
        Handler::Data(_) => crate::commands::data_call_name(spec, argv),
    };
    server.stats.cmds.record(spec, name, out, started.elapsed(), server.introspection.latency_tracking);
}

/// A command refused inside a script: counted as Redis counts it (the error in errorstats,
/// a rejected call for a known command or subcommand).
fn refused(spec: Option<&'static CommandSpec>, argv: &[&[u8]], msg: &[u8]) {
    let Some(run) = RUN.with(Cell::get) else { return };
    // SAFETY: see `Run`: the script's caller does not touch the server while it runs.
    let server = unsafe { &mut *run.server };
    let name = spec.map(|spec| match spec.handler {
        Handler::Server => {
            argv.get(1).and_then(|sub| crate::commands::subcommand_name(spec.name, sub)).unwrap_or(spec.name)
        }
        Handler::Data(_) => spec.name,
    });
    let prefix = msg.split(|&b| b == b' ').next().unwrap_or(b"ERR");
    server.stats.cmds.rejected_as(spec, name, std::str::from_utf8(prefix).unwrap_or("ERR"));
}

/// Pushes `{err = msg}` (with `ignore_error_stats_update = true` when INFO errorstats
/// counted it already: as the script's own error reply it is not counted again, Redis's
/// flag). Returns true (an error table was pushed).
unsafe fn push_err(l: *mut ffi::lua_State, msg: &[u8], counted: bool) -> bool {
    unsafe {
        ffi::lua_createtable(l, 0, 2);
        ffi::lua_pushlstring_(l, msg.as_ptr() as *const c_char, msg.len());
        ffi::lua_setfield(l, -2, c"err".as_ptr());
        if counted {
            ffi::lua_pushboolean(l, 1);
            ffi::lua_setfield(l, -2, c"ignore_error_stats_update".as_ptr());
        }
    }
    true
}

/// Pushes the command's reply (RESP2 or RESP3 bytes) as the Lua value Redis gives a script.
/// True when that is an error table (an error reply, counted already).
unsafe fn push_reply(l: *mut ffi::lua_State, out: &[u8]) -> bool {
    // A RESP3 attribute (`|`, a map of metadata ahead of the reply, only DEBUG PROTOCOL
    // attrib sends one) is not shown to scripts, as in Redis 7.0: the reply after it is.
    let mut body: &[u8] = out;
    while body.first() == Some(&b'|') {
        let mut as_map = body.to_vec();
        as_map[0] = b'%';
        match resp::decode_frame(&as_map) {
            Ok(Some((_, used))) => body = &body[used..],
            _ => break,
        }
    }
    let frame = match resp::decode_frame(body) {
        Ok(Some((f, _))) => f,
        _ => return unsafe { push_err(l, b"ERR internal error: unreadable reply", false) },
    };
    if let Frame::Error(e) = &frame {
        return unsafe { push_err(l, e, true) };
    }
    unsafe {
        let top = ffi::lua_gettop(l);
        if !push_frame(l, frame) {
            ffi::lua_settop(l, top);
            return push_err(l, b"ERR reached lua stack limit", false);
        }
    }
    false
}

/// Pushes one reply frame as a Lua value (Redis's RESP2/RESP3 to Lua rules). False when the
/// Lua stack cannot grow for it (the caller resets the stack).
unsafe fn push_frame(l: *mut ffi::lua_State, f: Frame) -> bool {
    unsafe {
        // A value, and a table with a key and a value under it, at each level.
        if ffi::lua_checkstack(l, 4) == 0 {
            return false;
        }
        let push_bytes = |b: &[u8]| ffi::lua_pushlstring_(l, b.as_ptr() as *const c_char, b.len());
        match f {
            Frame::Simple(s) => {
                ffi::lua_createtable(l, 0, 1);
                push_bytes(&s);
                ffi::lua_setfield(l, -2, c"ok".as_ptr());
            }
            Frame::Error(e) => {
                push_err(l, &e, false);
            }
            Frame::Integer(i) => ffi::lua_pushnumber(l, i as f64),
            Frame::Bulk(Some(b)) => push_bytes(&b),
            Frame::Bulk(None) | Frame::Array(None) => ffi::lua_pushboolean(l, 0),
            Frame::Array(Some(items)) | Frame::Push(items) => {
                ffi::lua_createtable(l, items.len().min(c_int::MAX as usize) as c_int, 0);
                for (i, item) in items.into_iter().enumerate() {
                    if !push_frame(l, item) {
                        return false;
                    }
                    ffi::lua_rawseti_(l, -2, (i + 1) as c_int);
                }
            }
            Frame::Null => ffi::lua_pushnil(l),
            Frame::Boolean(b) => ffi::lua_pushboolean(l, b as c_int),
            Frame::Double(text) => {
                let n: f64 = match text.as_slice() {
                    b"inf" => f64::INFINITY,
                    b"-inf" => f64::NEG_INFINITY,
                    other => std::str::from_utf8(other).ok().and_then(|s| s.parse().ok()).unwrap_or(f64::NAN),
                };
                ffi::lua_createtable(l, 0, 1);
                ffi::lua_pushnumber(l, n);
                ffi::lua_setfield(l, -2, c"double".as_ptr());
            }
            Frame::BigNumber(text) => {
                ffi::lua_createtable(l, 0, 1);
                push_bytes(&text);
                ffi::lua_setfield(l, -2, c"big_number".as_ptr());
            }
            Frame::Verbatim(format, text) => {
                ffi::lua_createtable(l, 0, 1);
                ffi::lua_createtable(l, 0, 2);
                push_bytes(&format);
                ffi::lua_setfield(l, -2, c"format".as_ptr());
                push_bytes(&text);
                ffi::lua_setfield(l, -2, c"string".as_ptr());
                ffi::lua_setfield(l, -2, c"verbatim_string".as_ptr());
            }
            Frame::Map(pairs) => {
                ffi::lua_createtable(l, 0, 1);
                ffi::lua_createtable(l, 0, pairs.len().min(c_int::MAX as usize) as c_int);
                for (k, v) in pairs {
                    if !push_frame(l, k) || !push_frame(l, v) {
                        return false;
                    }
                    set_pair(l);
                }
                ffi::lua_setfield(l, -2, c"map".as_ptr());
            }
            Frame::Set(items) => {
                ffi::lua_createtable(l, 0, 1);
                ffi::lua_createtable(l, 0, items.len().min(c_int::MAX as usize) as c_int);
                for k in items {
                    if !push_frame(l, k) {
                        return false;
                    }
                    ffi::lua_pushboolean(l, 1);
                    set_pair(l);
                }
                ffi::lua_setfield(l, -2, c"set".as_ptr());
            }
        }
    }
    true
}

/// `t[k] = v` for the key and value on top of the stack and the table under them; a key Lua
/// cannot index by (nil, NaN: no command's map or set has one) is dropped rather than raised.
unsafe fn set_pair(l: *mut ffi::lua_State) {
    unsafe {
        let bad = match ffi::lua_type(l, -2) {
            ffi::LUA_TNIL => true,
            ffi::LUA_TNUMBER => ffi::lua_tonumber(l, -2).is_nan(),
            _ => false,
        };
        if bad {
            ffi::lua_settop(l, -3);
        } else {
            ffi::lua_rawset(l, -3);
        }
    }
}
