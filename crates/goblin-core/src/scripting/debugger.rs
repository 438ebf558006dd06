//! The Lua debugger: `SCRIPT DEBUG YES|SYNC|NO`, then EVAL runs the script one line at a time
//! under the client's control (what `redis-cli --ldb` and `--ldb-sync-mode` drive).
//!
//! Protocol, as Redis's debugger speaks it (clients depend on its shape, not on its wording):
//! the server writes every batch of output as an array of simple strings (`<reply> ...`,
//! `<value> ...`, `* Stopped at N, ...`, source lines `-> N   code`), straight to the
//! connection's socket; the client sends each debugger command as a RESP array (`s`, `c`,
//! `p var`, `r set k v`, ...), read straight from the socket. When the script returns, a last
//! array ending in `<endsession>` goes out, then the EVAL's reply, and the connection closes.
//!
//! - `SYNC`: the script runs in the server itself, which serves nobody else until the session
//!   ends; its writes stay and commit as any script's.
//! - `YES`: the server forks; the child runs the session on its copy of the dataset and exits
//!   (its writes are never committed, journaled or replicated), while the parent closes its
//!   side of the connection and goes on serving.
//!
//! Only EVAL (and EVAL_RO) debugs, outside MULTI; EVALSHA is refused, as in Redis. The
//! connection must be a plain TCP or Unix socket: the session reads and writes its descriptor
//! directly (blocking), which TLS and the shared-memory transports do not allow.
//!
//! Mechanism: while a session is active, EVAL's runner (`call::runner`) replaces the VM's hook
//! with [`hook`], which Lua calls on every new line and every [`super::HOOK_EVERY`]
//! instructions. The session's state is one thread-local ([`SESSION`]), borrowed only for
//! short spans that call no Lua code, because the debugger's own commands run Lua (`eval`,
//! `redis`) and that code logs through the same state.
//!
//! Invariant for the functions that may `lua_error` (the hook): as in `call.rs`, no Rust value
//! with a destructor is alive in the frame that raises; the work is done in a function that
//! returns whether an error value was pushed.

use crate::conn::Conn;
use crate::introspection::quote;
use crate::server::Server;
use crate::snapshots::SocketWriter;
use mlua::ffi;
use resp::reply;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr};
use std::io::Write;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// How `SCRIPT DEBUG` left a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `YES`: each debugged EVAL runs in a forked child.
    Forked,
    /// `SYNC`: it runs in the server, blocking it.
    Sync,
}

/// At most this many breakpoints (more are refused).
const MAX_BREAKPOINTS: usize = 64;
/// Logged replies and values are cut at this many bytes unless `maxlen` says otherwise.
const DEFAULT_MAXLEN: usize = 256;
/// Nested tables are shown this deep.
const MAX_VALUE_DEPTH: usize = 10;
/// A debugger command, or a pending partial one, may not exceed this.
const MAX_INPUT: usize = 1 << 20;
/// A write to the debugging client gives up after this long without progress.
const SEND_STALL: Duration = Duration::from_secs(5);
/// Without `busy-reply-threshold`, a script running this long without a stop is stopped.
const DEFAULT_TIMEOUT_MS: u64 = 5000;

/// One debugging session (one EVAL).
struct Session {
    fd: RawFd,
    /// Stop at the next line.
    step: bool,
    /// `redis.breakpoint()` was called: stop at the next line.
    lua_breakpoint: bool,
    breakpoints: Vec<i32>,
    /// 0 means unlimited.
    maxlen: usize,
    maxlen_hint_sent: bool,
    /// Output not yet sent.
    logs: Vec<Vec<u8>>,
    /// The script's source, by line (line N is `lines[N - 1]`).
    lines: Vec<Vec<u8>>,
    /// Bytes read from the client that do not yet make a whole command.
    input: Vec<u8>,
    current_line: i32,
    /// Since the last stop (or the start): a script that runs past `timeout` without stopping
    /// is stopped, in case it loops forever.
    since: Instant,
    timeout: Duration,
}

thread_local! {
    /// The active session (the server thread runs at most one script at a time).
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
}

fn with<R>(f: impl FnOnce(&mut Session) -> R) -> Option<R> {
    SESSION.with(|s| s.borrow_mut().as_mut().map(f))
}

/// Starts a session on client socket `fd` for script `body`.
pub(crate) fn begin(fd: RawFd, body: &[u8], busy_threshold_ms: u64) {
    SESSION.with(|s| *s.borrow_mut() = Some(Session::new(fd, body, busy_threshold_ms)));
}

/// Ends the session: sends what is left of its output and the `<endsession>` mark.
pub(crate) fn end() {
    with(|s| {
        s.log(b"<endsession>".to_vec());
        s.send();
    });
    SESSION.with(|s| *s.borrow_mut() = None);
}

/// A session is active (EVAL's runner installs the debugger's hook).
pub(crate) fn active() -> bool {
    SESSION.with(|s| s.borrow().is_some())
}

/// `redis.call` logs its commands and replies: a session is active and stepping.
pub(crate) fn logging() -> bool {
    SESSION.with(|s| s.borrow().as_ref().is_some_and(|s| s.step))
}

/// Logs a command a script calls: `<redis> SET k v` (at most ten arguments shown).
pub(crate) fn log_command(argv: &[&[u8]]) {
    let mut line = b"<redis>".to_vec();
    for (i, a) in argv.iter().enumerate() {
        if i == 10 {
            line.extend_from_slice(format!(" ... ({} more)", argv.len() - 10).as_bytes());
            break;
        }
        line.push(b' ');
        line.extend_from_slice(a);
    }
    with(|s| s.log(line));
}

/// Logs the reply (RESP bytes) a script's command got, in a readable form.
pub(crate) fn log_reply(reply: &[u8]) {
    let mut line = b"<reply> ".to_vec();
    if let Ok(Some((frame, _))) = resp::decode_frame(reply) {
        if let resp::Frame::Error(e) = &frame {
            let mut err = b"<error> -".to_vec();
            err.extend_from_slice(e);
            with(|s| s.log(err));
        }
        human(&mut line, &frame);
    }
    with(|s| s.log_trimmed(line));
}

/// Logs an error a script's command call ended in before any reply, as Redis logs it: a
/// generic error without its `ERR`, any other with its code after a `-`.
pub(crate) fn log_error(msg: &[u8]) {
    let mut line = b"<error> ".to_vec();
    match msg.strip_prefix(b"ERR ") {
        Some(text) => line.extend_from_slice(text),
        None => {
            line.push(b'-');
            line.extend_from_slice(msg);
        }
    }
    with(|s| s.log(line));
}

impl Session {
    /// A session stopping at the script's first line, with Redis's defaults.
    fn new(fd: RawFd, body: &[u8], busy_threshold_ms: u64) -> Session {
        let mut src = body;
        while let [rest @ .., b'\r' | b'\n'] = src {
            src = rest;
        }
        let lines = if src.is_empty() {
            Vec::new()
        } else {
            src.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
        };
        let timeout_ms = if busy_threshold_ms > 0 { busy_threshold_ms } else { DEFAULT_TIMEOUT_MS };
        Session {
            fd,
            step: true,
            lua_breakpoint: false,
            breakpoints: Vec::new(),
            maxlen: DEFAULT_MAXLEN,
            maxlen_hint_sent: false,
            logs: Vec::new(),
            lines,
            input: Vec::new(),
            current_line: 0,
            since: Instant::now(),
            timeout: Duration::from_millis(timeout_ms),
        }
    }

    fn log(&mut self, line: Vec<u8>) {
        self.logs.push(line);
    }

    fn log_str(&mut self, line: &str) {
        self.logs.push(line.as_bytes().to_vec());
    }

    /// Logs `line` cut at `maxlen` bytes, with a hint the first time a line is cut.
    fn log_trimmed(&mut self, mut line: Vec<u8>) {
        let cut = self.maxlen > 0 && line.len() > self.maxlen;
        if cut {
            line.truncate(self.maxlen);
            line.extend_from_slice(b" ...");
        }
        self.logs.push(line);
        if cut && !self.maxlen_hint_sent {
            self.maxlen_hint_sent = true;
            self.log_str("<hint> The reply above was cut short; 'maxlen 0' shows replies whole.");
        }
    }

    /// Sends the pending output as one array of simple strings (line breaks become spaces).
    /// A failed write is not reported here: the next read sees the connection gone.
    fn send(&mut self) {
        let mut out = format!("*{}\r\n", self.logs.len()).into_bytes();
        for line in self.logs.drain(..) {
            out.push(b'+');
            out.extend(line.iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
            out.extend_from_slice(b"\r\n");
        }
        let _ = SocketWriter(self.fd, SEND_STALL).write_all(&out);
    }

    fn source_line(&self, n: i32) -> &[u8] {
        match usize::try_from(n - 1).ok().and_then(|i| self.lines.get(i)) {
            Some(l) => l,
            None => b"<out of range source code line>",
        }
    }

    fn is_breakpoint(&self, n: i32) -> bool {
        self.breakpoints.contains(&n)
    }

    /// Logs source line `n`, marked `->` if it is the current one and `#` if it has a
    /// breakpoint.
    fn log_source_line(&mut self, n: i32) {
        let mark = match (self.current_line == n, self.is_breakpoint(n)) {
            (true, true) => "->#",
            (true, false) => "-> ",
            (false, true) => "  #",
            (false, false) => "   ",
        };
        let mut line = format!("{mark}{n:<3} ").into_bytes();
        line.extend_from_slice(self.source_line(n));
        self.log(line);
    }

    /// Logs the lines within `context` of `around` (every line when `around` is 0).
    fn list(&mut self, around: i32, context: i32) {
        for n in 1..=self.lines.len() as i32 {
            if around == 0 || (around - n).abs() <= context {
                self.log_source_line(n);
            }
        }
    }

    /// `break`: list, add (`N`), remove (`-N`) or clear (`0`) breakpoints.
    fn breakpoints_command(&mut self, args: &[Vec<u8>]) {
        if args.is_empty() {
            if self.breakpoints.is_empty() {
                self.log_str("No breakpoints set. 'b <line>' sets one.");
            } else {
                self.log_str(&format!("{} breakpoints set:", self.breakpoints.len()));
                for n in self.breakpoints.clone() {
                    self.log_source_line(n);
                }
            }
            return;
        }
        for arg in args {
            let Some(n) = std::str::from_utf8(arg).ok().and_then(|t| t.parse::<i32>().ok()) else {
                let mut line = b"Invalid argument:'".to_vec();
                line.extend_from_slice(arg);
                line.push(b'\'');
                self.log(line);
                continue;
            };
            match n {
                0 => {
                    self.breakpoints.clear();
                    self.log_str("All breakpoints removed.");
                }
                n if n > 0 => {
                    if self.breakpoints.len() == MAX_BREAKPOINTS {
                        self.log_str("Too many breakpoints set.");
                    } else if n as usize > self.lines.len() {
                        self.log_str("Wrong line number.");
                    } else {
                        if !self.is_breakpoint(n) {
                            self.breakpoints.push(n);
                        }
                        self.list(n, 1);
                    }
                }
                n => match self.breakpoints.iter().position(|&b| b == -n) {
                    Some(i) => {
                        self.breakpoints.remove(i);
                        self.log_str("Breakpoint removed.");
                    }
                    None => self.log_str("No breakpoint in the specified line."),
                },
            }
        }
    }

    /// `maxlen [len]`: shows or sets the cut of logged replies (0: unlimited; at least 60).
    fn maxlen_command(&mut self, args: &[Vec<u8>]) {
        if let Some(arg) = args.first() {
            let n = atoi(arg);
            self.maxlen_hint_sent = true;
            // As Redis: 0 is unlimited, anything else at least 60 (a negative length too).
            self.maxlen = if n == 0 { 0 } else { n.max(60) as usize };
        }
        if self.maxlen > 0 {
            self.log_str(&format!("<value> replies are truncated at {} bytes.", self.maxlen));
        } else {
            self.log_str("<value> replies are unlimited.");
        }
    }

    /// The next whole command in `input`: Some(Ok(args)) (the input consumed), None (more is
    /// needed), or Some(Err) for input that is not a command. The reading is forgiving, as
    /// Redis's: anything before the first `*` is skipped, and at most 1024 arguments of at most
    /// 1024 bytes each are taken.
    fn next_command(&mut self) -> Option<Result<Vec<Vec<u8>>, ()>> {
        if self.input.is_empty() {
            return None;
        }
        let buf = &self.input;
        let Some(star) = buf.iter().position(|&b| b == b'*') else { return Some(Err(())) };
        let line_end = |from: usize| buf[from..].windows(2).position(|w| w == b"\r\n").map(|i| from + i);
        let eol = line_end(star)?;
        let count = atoi(&buf[star + 1..eol]);
        if !(1..=1024).contains(&count) {
            return Some(Err(()));
        }
        let mut at = eol + 2;
        let mut args = Vec::with_capacity(count as usize);
        while args.len() < count as usize {
            if at >= buf.len() {
                return None;
            }
            if buf[at] != b'$' {
                return Some(Err(()));
            }
            let eol = line_end(at)?;
            let len = atoi(&buf[at + 1..eol]);
            if !(1..=1024).contains(&len) {
                return Some(Err(()));
            }
            let start = eol + 2;
            let end = start + len as usize;
            if end + 2 > buf.len() {
                return None;
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Some(Err(()));
            }
            args.push(buf[start..end].to_vec());
            at = end + 2;
        }
        self.input.clear();
        Some(Ok(args))
    }
}

/// C's atoi: leading blanks, a sign, digits; 0 when there are none.
fn atoi(b: &[u8]) -> i64 {
    let t = std::str::from_utf8(b).unwrap_or("").trim_start();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let end = digits.bytes().position(|c| !c.is_ascii_digit()).unwrap_or(digits.len());
    let v = digits[..end].parse::<i64>().unwrap_or(0);
    if neg {
        -v
    } else {
        v
    }
}

/// A reply frame in the debugger's readable form: `"text"`, `"+OK"`, `[a,b]`, `{k => v}`, ...
fn human(out: &mut Vec<u8>, f: &resp::Frame) {
    use resp::Frame;
    let list = |out: &mut Vec<u8>, items: &[Frame], open: &[u8], close: u8| {
        out.extend_from_slice(open);
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            human(out, item);
        }
        out.push(close);
    };
    match f {
        Frame::Integer(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Frame::Bulk(None) | Frame::Array(None) => out.extend_from_slice(b"NULL"),
        Frame::Bulk(Some(b)) => quote(out, b),
        Frame::Simple(s) => quote(out, &[b"+", s.as_slice()].concat()),
        Frame::Error(e) => quote(out, &[b"-", e.as_slice()].concat()),
        Frame::Array(Some(items)) | Frame::Push(items) => list(out, items, b"[", b']'),
        Frame::Set(items) => list(out, items, b"~(", b')'),
        Frame::Map(pairs) => {
            out.push(b'{');
            for (i, (k, v)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                human(out, k);
                out.extend_from_slice(b" => ");
                human(out, v);
            }
            out.push(b'}');
        }
        Frame::Null => out.extend_from_slice(b"(null)"),
        Frame::Boolean(b) => out.extend_from_slice(if *b { b"#true" } else { b"#false" }),
        Frame::Double(d) => {
            out.extend_from_slice(b"(double) ");
            out.extend_from_slice(d);
        }
        Frame::BigNumber(n) => out.extend_from_slice(n),
        Frame::Verbatim(_, text) => quote(out, text),
    }
}

/// A number as C's `%g` writes it.
fn fmt_g(n: f64) -> String {
    let mut buf = [0u8; 64];
    // SAFETY: snprintf writes at most buf.len() bytes, NUL included, from a literal format.
    let len = unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%g".as_ptr(), n) };
    String::from_utf8_lossy(&buf[..(len.max(0) as usize).min(buf.len() - 1)]).into_owned()
}

/// Appends the Lua value at `idx` in readable form: strings quoted, tables as `{1; 2}` (an
/// array) or `{[k]=v; ...}`, functions and the like as `"function@0x..."`.
///
/// # Safety
/// `l` is a live Lua state and `idx` a valid index on its stack.
unsafe fn value_repr(out: &mut Vec<u8>, l: *mut ffi::lua_State, idx: c_int, depth: usize) {
    unsafe {
        let idx = if idx < 0 { ffi::lua_gettop(l) + idx + 1 } else { idx };
        if depth == MAX_VALUE_DEPTH {
            out.extend_from_slice(b"<max recursion level reached! Nested table?>");
            return;
        }
        match ffi::lua_type(l, idx) {
            ffi::LUA_TSTRING => {
                let mut len = 0usize;
                let p = ffi::lua_tolstring(l, idx, &mut len);
                quote(out, std::slice::from_raw_parts(p as *const u8, len));
            }
            ffi::LUA_TBOOLEAN => {
                out.extend_from_slice(if ffi::lua_toboolean(l, idx) != 0 { b"true" } else { b"false" })
            }
            ffi::LUA_TNUMBER => out.extend_from_slice(fmt_g(ffi::lua_tonumber(l, idx)).as_bytes()),
            ffi::LUA_TNIL => out.extend_from_slice(b"nil"),
            ffi::LUA_TTABLE => {
                if ffi::lua_checkstack(l, 3) == 0 {
                    out.extend_from_slice(b"<no room on the Lua stack>");
                    return;
                }
                // Both forms are built as the table is walked; which one shows depends on
                // whether the keys turn out to be 1, 2, 3, ...
                let (mut as_array, mut as_map) = (Vec::new(), Vec::new());
                let mut is_array = true;
                let mut expected = 1.0;
                ffi::lua_pushnil(l);
                while ffi::lua_next(l, idx) != 0 {
                    if is_array
                        && (ffi::lua_type(l, -2) != ffi::LUA_TNUMBER || ffi::lua_tonumber(l, -2) != expected)
                    {
                        is_array = false;
                    }
                    if !as_array.is_empty() {
                        as_array.extend_from_slice(b"; ");
                        as_map.extend_from_slice(b"; ");
                    }
                    value_repr(&mut as_array, l, -1, depth + 1);
                    as_map.push(b'[');
                    value_repr(&mut as_map, l, -2, depth + 1);
                    as_map.extend_from_slice(b"]=");
                    value_repr(&mut as_map, l, -1, depth + 1);
                    ffi::lua_pop(l, 1);
                    expected += 1.0;
                }
                out.push(b'{');
                out.extend_from_slice(if is_array { &as_array } else { &as_map });
                out.push(b'}');
            }
            t => {
                let kind = match t {
                    ffi::LUA_TFUNCTION => "function",
                    ffi::LUA_TUSERDATA => "userdata",
                    ffi::LUA_TTHREAD => "thread",
                    ffi::LUA_TLIGHTUSERDATA => "light-userdata",
                    _ => "unknown",
                };
                out.extend_from_slice(format!("\"{kind}@{:p}\"", ffi::lua_topointer(l, idx)).as_bytes());
            }
        }
    }
}

/// Logs the value on top of the stack after `prefix`, cut at `maxlen`.
unsafe fn log_top(l: *mut ffi::lua_State, prefix: &[u8]) {
    let mut line = prefix.to_vec();
    unsafe { value_repr(&mut line, l, -1, 0) };
    with(|s| s.log_trimmed(line));
}

/// `redis.breakpoint()`: stop at the next line (true), or false outside a session.
pub(super) unsafe extern "C-unwind" fn redis_breakpoint(l: *mut ffi::lua_State) -> c_int {
    let on = with(|s| s.lua_breakpoint = true).is_some();
    unsafe { ffi::lua_pushboolean(l, on as c_int) };
    1
}

/// `redis.debug(...)`: logs its arguments (`<debug> line N: a, b`) during a session.
pub(super) unsafe extern "C-unwind" fn redis_debug(l: *mut ffi::lua_State) -> c_int {
    let Some(line_no) = with(|s| s.current_line) else { return 0 };
    let mut line = format!("<debug> line {line_no}: ").into_bytes();
    unsafe {
        let n = ffi::lua_gettop(l);
        for i in 1..=n {
            value_repr(&mut line, l, i, 0);
            if i < n {
                line.extend_from_slice(b", ");
            }
        }
    }
    with(|s| s.log(line));
    0
}

/// The hook to put in place for a debugged script: (hook, mask, count).
pub(super) fn hook_settings() -> (ffi::lua_Hook, c_int, c_int) {
    (hook, ffi::LUA_MASKLINE | ffi::LUA_MASKCOUNT, super::HOOK_EVERY as c_int)
}

/// Lua's hook during a session: on a new line of the script (or every `HOOK_EVERY`
/// instructions), decides whether to stop, and if so talks with the client until it says to
/// go on.
unsafe extern "C-unwind" fn hook(l: *mut ffi::lua_State, ar: *mut ffi::lua_Debug) {
    let raise = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { hook_body(l, ar) }));
    if raise.unwrap_or(false) {
        // SAFETY: an error value was pushed; nothing with a destructor is alive here.
        unsafe { ffi::lua_error(l) };
    }
}

/// What the conversation with the client ended in.
enum Repl {
    /// Run on.
    Resume,
    /// The client is gone: the script runs on without stopping.
    Gone,
    /// Stop the script with this error.
    Abort(&'static str),
}

/// The hook's work; true when it pushed an error for the hook to raise.
unsafe fn hook_body(l: *mut ffi::lua_State, ar: *mut ffi::lua_Debug) -> bool {
    unsafe {
        ffi::lua_getstack(l, 0, ar);
        ffi::lua_getinfo(l, c"Sl".as_ptr(), ar);
        let line = (*ar).currentline;
        let in_script =
            CStr::from_ptr((*ar).short_src.as_ptr()).to_bytes().windows(11).any(|w| w == b"user_script");
        let count_event = (*ar).event == ffi::LUA_HOOKCOUNT;
        // (stop reason, whether the stop is a timeout), or None to run on.
        let stop = with(|s| {
            s.current_line = line;
            let at_breakpoint = s.is_breakpoint(line) || s.lua_breakpoint;
            if !in_script {
                return None;
            }
            let mut timeout = false;
            if count_event && !s.step && !at_breakpoint {
                if s.since.elapsed() < s.timeout {
                    return None;
                }
                timeout = true;
                s.step = true;
            }
            if !s.step && !at_breakpoint {
                return None;
            }
            let reason = if at_breakpoint {
                if s.lua_breakpoint {
                    "redis.breakpoint() called"
                } else {
                    "break point"
                }
            } else if timeout {
                "timeout reached, infinite loop?"
            } else {
                "step over"
            };
            s.step = false;
            s.lua_breakpoint = false;
            s.log_str(&format!("* Stopped at {line}, stop reason = {reason}"));
            s.log_source_line(line);
            s.send();
            Some(timeout)
        })
        .flatten();
        let Some(timeout) = stop else { return false };
        let outcome = repl(l);
        with(|s| s.since = Instant::now());
        match outcome {
            Repl::Resume => false,
            Repl::Gone if timeout => {
                push_error(l, "ERR timeout during Lua debugging with client closing connection");
                true
            }
            Repl::Gone => false,
            Repl::Abort(msg) => {
                push_error(l, msg);
                true
            }
        }
    }
}

/// Pushes an error table `{err = msg}`, as `redis.call` raises them.
unsafe fn push_error(l: *mut ffi::lua_State, msg: &str) {
    unsafe {
        ffi::lua_createtable(l, 0, 1);
        ffi::lua_pushlstring_(l, msg.as_ptr() as *const c_char, msg.len());
        ffi::lua_setfield(l, -2, c"err".as_ptr());
    }
}

/// Reads and runs the client's debugger commands until one resumes the script.
unsafe fn repl(l: *mut ffi::lua_State) -> Repl {
    loop {
        // The next command, reading as much as it takes.
        let command = loop {
            match with(|s| s.next_command()).flatten() {
                Some(Ok(args)) => break args,
                Some(Err(())) => return Repl::Abort("ERR protocol error"),
                None => {}
            }
            let Some(fd) = with(|s| s.fd) else { return Repl::Gone };
            let mut buf = [0u8; 1024];
            let n = read_blocking(fd, &mut buf);
            if n == 0 {
                with(|s| {
                    s.step = false;
                    s.breakpoints.clear();
                });
                return Repl::Gone;
            }
            let over = with(|s| {
                s.input.extend_from_slice(&buf[..n]);
                let over = s.input.len() > MAX_INPUT;
                if over {
                    s.input = Vec::new();
                }
                over
            });
            if over == Some(true) {
                return Repl::Abort("ERR max client buffer reached");
            }
        };
        let name = command[0].to_ascii_lowercase();
        let args = &command[1..];
        match name.as_slice() {
            b"h" | b"help" => {
                with(|s| HELP.iter().for_each(|line| s.log_str(line)));
            }
            b"s" | b"step" | b"n" | b"next" => {
                with(|s| s.step = true);
                return Repl::Resume;
            }
            b"c" | b"continue" => return Repl::Resume,
            b"a" | b"abort" => return Repl::Abort("ERR script aborted for user request"),
            b"t" | b"trace" => unsafe { trace(l) },
            b"m" | b"maxlen" => {
                with(|s| s.maxlen_command(args));
            }
            b"b" | b"break" => {
                with(|s| s.breakpoints_command(args));
            }
            b"e" | b"eval" => unsafe { eval(l, args) },
            b"r" | b"redis" if !args.is_empty() => unsafe { redis(l, args) },
            b"p" | b"print" => unsafe {
                match args {
                    [var] => print_var(l, var),
                    _ => print_locals(l),
                }
            },
            b"l" | b"list" => {
                with(|s| {
                    let around =
                        args.first().map(|a| atoi(a) as i32).filter(|&n| n > 0).unwrap_or(s.current_line);
                    let context = args.get(1).map_or(5, |a| atoi(a) as i32);
                    s.list(around, context);
                });
            }
            b"w" | b"whole" => {
                with(|s| s.list(0, 0));
            }
            _ => {
                with(|s| {
                    s.log_str("<error> Unknown Redis Lua debugger command or wrong number of arguments.")
                });
            }
        }
        with(|s| s.send());
    }
}

const HELP: &[&str] = &[
    "Lua debugger commands:",
    "[h]elp               This list.",
    "[s]tep, [n]ext       Run the current line and stop at the next one.",
    "[c]ontinue           Run to the next breakpoint.",
    "[l]ist [line] [ctx]  Show the source around [line] (default: the current one),",
    "                     [ctx] lines (default 5) each side.",
    "[w]hole              Show the whole source.",
    "[p]rint              Show the local variables.",
    "[p]rint <var>        Show a variable (locals from the innermost frame out, then the",
    "                     globals KEYS and ARGV).",
    "[b]reak              Show the breakpoints.",
    "[b]reak <line>       Set a breakpoint on <line>.",
    "[b]reak -<line>      Remove the breakpoint on <line>.",
    "[b]reak 0            Remove every breakpoint.",
    "[t]race              Show the call stack.",
    "[e]val <code>        Run Lua code in a frame of its own and show its value.",
    "[r]edis <cmd>        Run a command as the script would.",
    "[m]axlen [len]       Cut logged replies and values at [len] bytes (0: never).",
    "[a]bort              Stop the script with an error. In sync mode its writes so far",
    "                     stay.",
    "",
    "From the script itself:",
    "redis.debug(...)     Log values to this console.",
    "redis.breakpoint()   Stop at the next line, as a breakpoint would.",
];

/// Reads from the client's socket, waiting until something arrives; 0 when it is closed (or
/// failed).
fn read_blocking(fd: RawFd, buf: &mut [u8]) -> usize {
    loop {
        // SAFETY: reads into our buffer from a descriptor this process holds.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return n as usize;
        }
        match std::io::Error::last_os_error().kind() {
            std::io::ErrorKind::Interrupted => {}
            std::io::ErrorKind::WouldBlock => {
                let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut p, 1, -1) };
            }
            _ => return 0,
        }
    }
}

/// `trace`: the script's frames, innermost first.
unsafe fn trace(l: *mut ffi::lua_State) {
    unsafe {
        let mut ar: ffi::lua_Debug = std::mem::zeroed();
        let mut level = 0;
        while ffi::lua_getstack(l, level, &mut ar) != 0 {
            ffi::lua_getinfo(l, c"Snl".as_ptr(), &mut ar);
            let src = CStr::from_ptr(ar.short_src.as_ptr()).to_bytes();
            if src.windows(11).any(|w| w == b"user_script") {
                let name = if ar.name.is_null() {
                    "top level".to_string()
                } else {
                    CStr::from_ptr(ar.name).to_string_lossy().into_owned()
                };
                let line = ar.currentline;
                with(|s| {
                    s.log_str(&format!("{} {name}:", if level == 0 { "In" } else { "From" }));
                    s.log_source_line(line);
                });
            }
            level += 1;
        }
        if level == 0 {
            with(|s| s.log_str("<error> Can't retrieve Lua stack."));
        }
    }
}

/// Walks the locals of the frame `level` calls up: `f` gets each one's name while its value is
/// on top of the stack (popped after it returns), and returns true to stop the walk. None when
/// there is no such frame, else whether `f` stopped the walk.
unsafe fn walk_locals(
    l: *mut ffi::lua_State,
    level: c_int,
    mut f: impl FnMut(&[u8]) -> bool,
) -> Option<bool> {
    unsafe {
        let mut ar: ffi::lua_Debug = std::mem::zeroed();
        if ffi::lua_getstack(l, level, &mut ar) == 0 {
            return None;
        }
        let mut i = 1;
        loop {
            let name = ffi::lua_getlocal(l, &ar, i);
            if name.is_null() {
                return Some(false);
            }
            i += 1;
            let stop = f(CStr::from_ptr(name).to_bytes());
            ffi::lua_pop(l, 1);
            if stop {
                return Some(true);
            }
        }
    }
}

/// `print <var>`: the innermost local of that name, else the global KEYS or ARGV.
unsafe fn print_var(l: *mut ffi::lua_State, var: &[u8]) {
    unsafe {
        let mut level = 0;
        while let Some(found) = walk_locals(l, level, |name| {
            let it = name == var;
            if it {
                log_top(l, b"<value> ");
            }
            it
        }) {
            if found {
                return;
            }
            level += 1;
        }
        if var == b"KEYS" || var == b"ARGV" {
            let name = if var == b"KEYS" { c"KEYS" } else { c"ARGV" };
            ffi::lua_getglobal_(l, name.as_ptr());
            log_top(l, b"<value> ");
            ffi::lua_pop(l, 1);
        } else {
            with(|s| s.log_str("No such variable."));
        }
    }
}

/// `print`: every local of the current frame (Lua's temporaries left out).
unsafe fn print_locals(l: *mut ffi::lua_State) {
    let mut shown = 0;
    unsafe {
        walk_locals(l, 0, |name| {
            if !name.windows(12).any(|w| w == b"(*temporary)") {
                let mut prefix = b"<value> ".to_vec();
                prefix.extend_from_slice(name);
                prefix.extend_from_slice(b" = ");
                log_top(l, &prefix);
                shown += 1;
            }
            false
        });
    }
    if shown == 0 {
        with(|s| s.log_str("No local variables in the current context."));
    }
}

/// `eval <code>`: runs the words joined by spaces as an expression (`return <code>`), or as
/// statements if that does not compile, and logs the value.
unsafe fn eval(l: *mut ffi::lua_State, args: &[Vec<u8>]) {
    let code = args.join(&b' ');
    let expr = [b"return ".as_slice(), &code].concat();
    unsafe {
        let load =
            |src: &[u8]| ffi::luaL_loadbuffer(l, src.as_ptr().cast(), src.len(), c"@ldb_eval".as_ptr());
        if load(&expr) != 0 {
            ffi::lua_pop(l, 1);
            if load(&code) != 0 {
                log_error_on_top(l);
                return;
            }
        }
        if ffi::lua_pcall(l, 0, 1, 0) != 0 {
            log_error_on_top(l);
            return;
        }
        log_top(l, b"<retval> ");
        ffi::lua_pop(l, 1);
    }
}

/// Logs the error message on top of the stack as `<error> ...` and pops it.
unsafe fn log_error_on_top(l: *mut ffi::lua_State) {
    unsafe {
        let mut len = 0usize;
        let p = ffi::lua_tolstring(l, -1, &mut len);
        let mut line = b"<error> ".to_vec();
        if !p.is_null() {
            line.extend_from_slice(std::slice::from_raw_parts(p as *const u8, len));
        }
        with(|s| s.log(line));
        ffi::lua_pop(l, 1);
    }
}

/// `redis <cmd> ...`: calls `redis.call` with the words, stepping on so that the command and
/// its reply are logged.
unsafe fn redis(l: *mut ffi::lua_State, args: &[Vec<u8>]) {
    unsafe {
        if ffi::lua_checkstack(l, args.len() as c_int + 2) == 0 {
            with(|s| s.log_str("<error> max lua stack reached"));
            return;
        }
        ffi::lua_getglobal_(l, c"redis".as_ptr());
        ffi::lua_getfield(l, -1, c"call".as_ptr());
        for a in args {
            ffi::lua_pushlstring_(l, a.as_ptr() as *const c_char, a.len());
        }
        with(|s| s.step = true);
        ffi::lua_pcall(l, args.len() as c_int, 1, 0);
        with(|s| s.step = false);
        ffi::lua_pop(l, 2);
    }
}

impl Server {
    /// EVAL under the debugger (`SCRIPT DEBUG YES|SYNC` on `c`). Either way the connection
    /// ends with the session: the client reconnects for the next one, as with Redis.
    pub(super) fn debug_eval(
        &mut self,
        c: &mut Conn,
        slot: usize,
        args: &[&[u8]],
        ro: bool,
        now: i64,
        mode: Mode,
    ) {
        // Off before the EVAL runs (which would otherwise come back here).
        c.lua_debug = None;
        let fd = c.fd;
        let threshold = self.cfg.busy_reply_threshold;
        match mode {
            Mode::Sync => {
                tracing::info!("Lua debugging session (sync) with client id={} started", c.id);
                // Replies owed from earlier in its pipeline go before the session's output.
                let _ = SocketWriter(fd, SEND_STALL).write_all(&c.out[c.out_pos..]);
                c.out.clear();
                c.out_pos = 0;
                begin(fd, args[1], threshold);
                self.eval_command(c, slot, args, false, ro, now);
                end();
                c.close_after_reply = true;
                tracing::info!("Lua debugging session (sync) with client id={} ended", c.id);
            }
            Mode::Forked => {
                let (server, conn): (*mut Server, *mut Conn) = (self, c);
                let job = move || {
                    // SAFETY: in the child, the parent's frozen copy: nothing else touches it.
                    let (server, conn) = unsafe { (&mut *server, &mut *conn) };
                    // SAFETY: the child leaves stopping to its parent (which kills it at
                    // shutdown) and lets go of every other client's socket, so that a client
                    // the parent closes sees the close.
                    unsafe {
                        libc::signal(libc::SIGTERM, libc::SIG_IGN);
                        libc::signal(libc::SIGINT, libc::SIG_IGN);
                        for other in server.conns.iter().flatten().filter(|o| o.fd != fd) {
                            libc::close(other.fd);
                        }
                    }
                    let mut socket = SocketWriter(fd, SEND_STALL);
                    socket.write_all(&conn.out[conn.out_pos..]).map_err(|e| format!("sending: {e}"))?;
                    conn.out.clear();
                    conn.out_pos = 0;
                    begin(fd, args[1], threshold);
                    server.eval_command(conn, slot, args, false, ro, now);
                    end();
                    socket.write_all(&conn.out).map_err(|e| format!("sending the reply: {e}"))?;
                    Ok("the script returned".to_string())
                };
                match self.fork_lua_debugger(c.id, job) {
                    Ok(pid) => {
                        tracing::info!("Lua debugging session with client id={} forked as pid {pid}", c.id);
                        // The child owns the conversation now; this side lets go of it.
                        c.out.clear();
                        c.out_pos = 0;
                        c.close_now = true;
                    }
                    Err(e) => reply::error(
                        &mut c.out,
                        format!("ERR Fork() failed: can't run EVAL in debugging mode: {e}").as_bytes(),
                    ),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session {
        let mut s = Session::new(-1, b"local a = 1\nreturn a\n", 0);
        s.current_line = 1;
        s
    }

    #[test]
    fn commands_are_read_whole_and_bad_input_is_refused() {
        let mut s = session();
        assert!(s.next_command().is_none());
        s.input.extend_from_slice(b"*2\r\n$1\r\np\r\n$1");
        assert!(s.next_command().is_none(), "a partial command waits for more");
        s.input.extend_from_slice(b"\r\na\r\n");
        assert_eq!(s.next_command(), Some(Ok(vec![b"p".to_vec(), b"a".to_vec()])));
        assert!(s.input.is_empty());
        s.input.extend_from_slice(b"*1\r\n$11\r\nhello\0world\r\n");
        assert_eq!(s.next_command(), Some(Ok(vec![b"hello\0world".to_vec()])));
        for bad in [&b"step\r\n"[..], b"*0\r\n", b"*1\r\n$0\r\n\r\n", b"*1\r\n+s\r\n", b"*1\r\n$1\r\nsX\r\n"]
        {
            s.input = bad.to_vec();
            assert_eq!(s.next_command(), Some(Err(())), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn replies_read_as_the_debugger_shows_them() {
        let show = |wire: &[u8]| {
            let (f, _) = resp::decode_frame(wire).unwrap().unwrap();
            let mut out = Vec::new();
            human(&mut out, &f);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(show(b"+OK\r\n"), "\"+OK\"");
        assert_eq!(show(b"-ERR no\r\n"), "\"-ERR no\"");
        assert_eq!(show(b":42\r\n"), "42");
        assert_eq!(show(b"$-1\r\n"), "NULL");
        assert_eq!(show(b"*2\r\n$1\r\na\r\n$2\r\n\"\n\r\n"), "[\"a\",\"\\\"\\n\"]");
        assert_eq!(show(b"%1\r\n$1\r\nk\r\n,1.5\r\n"), "{\"k\" => (double) 1.5}");
        assert_eq!(show(b"~1\r\n#t\r\n"), "~(#true)");
        assert_eq!(show(b"_\r\n"), "(null)");
    }

    #[test]
    fn source_lines_breakpoints_and_cuts() {
        let mut s = session();
        s.log_source_line(1);
        s.breakpoints_command(&[b"2".to_vec(), b"9".to_vec(), b"x".to_vec()]);
        s.log_source_line(2);
        s.breakpoints_command(&[b"-2".to_vec(), b"-2".to_vec()]);
        s.maxlen_command(&[b"10".to_vec()]);
        s.log_trimmed(vec![b'x'; 100]);
        let logs: Vec<String> = s.logs.iter().map(|l| String::from_utf8_lossy(l).into_owned()).collect();
        assert_eq!(
            logs,
            [
                "-> 1   local a = 1",
                "-> 1   local a = 1",
                "  #2   return a",
                "Wrong line number.",
                "Invalid argument:'x'",
                "  #2   return a",
                "Breakpoint removed.",
                "No breakpoint in the specified line.",
                "<value> replies are truncated at 60 bytes.",
                &format!("{} ...", "x".repeat(60)),
            ]
        );
        assert_eq!(fmt_g(0.5), "0.5");
        assert_eq!(fmt_g(1e20), "1e+20");
        assert_eq!(fmt_g(3.0), "3");
    }
}
