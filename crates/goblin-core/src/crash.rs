//! The crash report: what the server leaves in its log when it dies of a bug, so that an
//! operator has something to file besides "it exited".
//!
//! Two ways in:
//! - a **fatal signal** (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT: a bad memory access in
//!   unsafe or foreign code, an `abort`, or `kill -ABRT` from outside) runs [`on_fatal_signal`]:
//!   it writes the report, then restores the default action and raises the signal again, so the
//!   process still dies of it (exit status, core dump) as it would have without the report;
//! - a **panic** anywhere runs the panic hook, which writes the same report. A panic inside a
//!   read command is caught by the engine and answered with an error (the server goes on); one
//!   inside a write stops the server (`Server::fail_stop`); either way the report is in the log.
//!
//! A report names the signal or the panic and where, the thread, the stack trace, and the
//! command the server thread was running with its arguments (only the command's name when
//! `hide-user-data-from-log` is on: arguments are user data). `crash-log-enabled no` leaves
//! the report out (a fatal signal still kills; a panic still gets its one line).
//!
//! The report is written with plain `write(2)` calls on a descriptor of the log kept for this
//! purpose, not through the logging subscriber, whose locks the crashed thread may hold.
//! Formatting the stack trace allocates, which a signal handler should not do: if the crash
//! happened inside the allocator with its lock held, the report stops there. Two guards bound
//! that: the lines before the trace allocate nothing, and an alarm of [`REPORT_DEADLINE_SECS`]
//! (SIGALRM's default action, termination) ends a report that hangs.
//!
//! Invariant: the current command ([`CurrentCommand`]) is read only on the server thread (a
//! panic there, or a signal delivered to it), where the arguments it points to are still
//! alive: the guard that published them is in a frame below the one that crashed.
//!
//! One more way in, not fatal: **SIGALRM**, from the watchdog (`watchdog-period`: an event
//! loop that has not come round for that long) or from `kill -ALRM`, logs where the server
//! thread is (its stack and its command) and the server goes on, as Redis does. There the
//! interrupted thread may hold the allocator's locks and must get them back, so the handler
//! allocates nothing: it takes the raw return addresses (`backtrace(3)`, called once at install
//! so that its first call's loading of the unwinder happens there, not in a handler) and a copy
//! of the command into static buffers, and wakes the `stack-reporter` thread through a pipe;
//! that thread resolves the addresses to functions and lines and writes the report.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// `crash-log-enabled` (default yes), `hide-user-data-from-log` (default no) and
/// `use-exit-on-panic` (default no: an assertion aborts, so that a core dump is possible).
static CRASH_LOG_ENABLED: AtomicBool = AtomicBool::new(true);
static HIDE_USER_DATA: AtomicBool = AtomicBool::new(false);
static USE_EXIT_ON_PANIC: AtomicBool = AtomicBool::new(false);

/// The descriptor the report goes to (stderr, or a descriptor of `--logfile` of our own).
static LOG_FD: AtomicI32 = AtomicI32::new(2);
/// The server thread's kernel thread id (0 until [`install`]).
static SERVER_TID: AtomicI32 = AtomicI32::new(0);
/// The command the server thread runs now: its arguments (pointer, count) and its client.
static CURRENT_ARGS: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static CURRENT_ARGC: AtomicUsize = AtomicUsize::new(0);
static CURRENT_CLIENT: AtomicU64 = AtomicU64::new(0);
/// Set by the first report: a crash while reporting does not start a second one.
static REPORTING: AtomicBool = AtomicBool::new(false);

/// The SIGALRM report's hand-off from the handler to the `stack-reporter` thread: the write end
/// of its pipe (-1 until installed), and set while a report is taken or written (another
/// SIGALRM meanwhile is skipped, and the buffers below are the handler's alone until the
/// reporter clears it).
static ALARM_PIPE: AtomicI32 = AtomicI32::new(-1);
static ALARM_BUSY: AtomicBool = AtomicBool::new(false);
/// A watchdog SIGALRM that reached another thread and was passed on to the server thread.
static ALARM_FORWARDED_WATCHDOG: AtomicBool = AtomicBool::new(false);
/// What the handler saw, for the reporter (see `AlarmCapture`).
static ALARM: AlarmCell = AlarmCell(std::cell::UnsafeCell::new(AlarmCapture::EMPTY));

/// The most return addresses, and bytes of the command, a SIGALRM report shows.
const ALARM_FRAMES: usize = 64;
const ALARM_ARGS_BYTES: usize = 2048;

/// The server thread's state at a SIGALRM.
struct AlarmCapture {
    watchdog: bool,
    frames: [usize; ALARM_FRAMES],
    depth: usize,
    client: u64,
    argc: usize,
    /// The first arguments, each as (length shown, whole length) then its bytes, in `args`.
    args: [u8; ALARM_ARGS_BYTES],
    args_len: usize,
}

impl AlarmCapture {
    const EMPTY: AlarmCapture = AlarmCapture {
        watchdog: false,
        frames: [0; ALARM_FRAMES],
        depth: 0,
        client: 0,
        argc: 0,
        args: [0; ALARM_ARGS_BYTES],
        args_len: 0,
    };
}

/// Written only by the handler while it holds `ALARM_BUSY`, read only by the reporter after
/// the handler's pipe write and before it clears `ALARM_BUSY`: never both at once.
struct AlarmCell(std::cell::UnsafeCell<AlarmCapture>);

// SAFETY: see the type's access rule, which `ALARM_BUSY` and the pipe enforce.
unsafe impl Sync for AlarmCell {}

unsafe extern "C" {
    /// glibc's `backtrace(3)` (execinfo.h): the calling thread's return addresses.
    fn backtrace(buffer: *mut *mut libc::c_void, size: libc::c_int) -> libc::c_int;
}

/// A report that takes longer than this is cut short by SIGALRM.
const REPORT_DEADLINE_SECS: u32 = 15;
/// The fatal signals the report covers.
const FATAL_SIGNALS: [i32; 5] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL, libc::SIGABRT];
/// The alternate stack the server thread's signal handler runs on: a stack overflow leaves no
/// room on the thread's own, and a stack trace needs more than a minimal signal stack.
const ALT_STACK_BYTES: usize = 1 << 20;

pub fn set_crash_log_enabled(on: bool) {
    CRASH_LOG_ENABLED.store(on, Ordering::Relaxed);
}

/// Also for the key names other log lines give (an RDB file's refused or skipped keys).
pub fn set_hide_user_data(on: bool) {
    HIDE_USER_DATA.store(on, Ordering::Relaxed);
    engine::rdb::set_hide_key_names(on);
}

pub fn set_use_exit_on_panic(on: bool) {
    USE_EXIT_ON_PANIC.store(on, Ordering::Relaxed);
}

/// Installs the panic hook and the fatal signals' handlers; called on the server thread,
/// once the log is open (`logfile`: the path it appends to, empty for stderr).
pub fn install(logfile: &str) {
    if !logfile.is_empty() {
        use std::os::fd::IntoRawFd;
        if let Ok(f) = std::fs::OpenOptions::new().append(true).open(logfile) {
            LOG_FD.store(f.into_raw_fd(), Ordering::Relaxed);
        }
    }
    // SAFETY: gettid has no preconditions.
    SERVER_TID.store(unsafe { libc::gettid() }, Ordering::Relaxed);
    std::panic::set_hook(Box::new(on_panic));
    // SAFETY: a private anonymous mapping for the alternate stack (never unmapped: handlers
    // may run until the process ends), and sigaction with a handler of the right signature.
    unsafe {
        let stack = libc::mmap(
            std::ptr::null_mut(),
            ALT_STACK_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if stack != libc::MAP_FAILED {
            let ss = libc::stack_t { ss_sp: stack, ss_flags: 0, ss_size: ALT_STACK_BYTES };
            libc::sigaltstack(&ss, std::ptr::null_mut());
        }
        for sig in FATAL_SIGNALS {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_fatal_signal as *const () as usize;
            // One-shot (a fault inside the handler gets the default action) and not blocked
            // while it runs (a blocked synchronous fault would be fatal without a report).
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESETHAND | libc::SA_NODEFER;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    install_alarm_report();
}

/// SIGALRM's report (see the module's documentation): the reporter thread and its pipe, the
/// unwinder warmed up, then the handler. Without the thread, SIGALRM keeps its default.
fn install_alarm_report() {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let read_end = fds[0];
    let spawned = std::thread::Builder::new().name("stack-reporter".into()).spawn(move || loop {
        let mut byte = 0u8;
        // SAFETY: reading one byte from our pipe into a live byte.
        let n = unsafe { libc::read(read_end, (&raw mut byte).cast(), 1) };
        if n == 1 {
            write_alarm_report();
            ALARM_BUSY.store(false, Ordering::Release);
        } else if n == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    });
    if spawned.is_err() {
        return;
    }
    let mut warm = [std::ptr::null_mut(); 4];
    // SAFETY: backtrace writes at most 4 addresses into the array we pass; a first call here
    // loads the unwinder (it allocates), so that the handler's calls do not.
    unsafe { backtrace(warm.as_mut_ptr(), 4) };
    ALARM_PIPE.store(fds[1], Ordering::Relaxed);
    // SAFETY: sigaction with a handler of the right signature. SA_RESTART: the system call
    // the server thread was in goes on; SA_ONSTACK: the alternate stack, as for the others.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_alarm as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut());
    }
}

/// `watchdog-period`: (re)arms the one-shot timer whose SIGALRM reports a server thread that
/// has not come back to its event loop within `ms` (0 disarms it). The cron calls this each
/// time it runs, so the alarm goes off only when the cron could not run for that long.
pub fn watchdog_arm(ms: u64) {
    let t = libc::timeval {
        tv_sec: (ms / 1000) as libc::time_t,
        tv_usec: ((ms % 1000) * 1000) as libc::suseconds_t,
    };
    let it = libc::itimerval { it_interval: libc::timeval { tv_sec: 0, tv_usec: 0 }, it_value: t };
    // SAFETY: setitimer with a valid itimerval; ITIMER_REAL sends SIGALRM to the process,
    // whose main thread (the server thread) takes it first.
    unsafe { libc::setitimer(libc::ITIMER_REAL, &it, std::ptr::null_mut()) };
}

extern "C" fn on_alarm(_sig: i32, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let (code, pid) = unsafe { ((*info).si_code, (*info).si_pid()) };
    // The timer's own expiry comes from the kernel; kill and tgkill from a process.
    let from_timer = code == libc::SI_KERNEL;
    // SAFETY: gettid and getpid have no preconditions.
    let (tid, me) = unsafe { (libc::gettid(), libc::getpid()) };
    let server = SERVER_TID.load(Ordering::Relaxed);
    if server != 0 && tid != server {
        // Another thread took it: the report is about the server thread, so pass it on.
        if from_timer {
            ALARM_FORWARDED_WATCHDOG.store(true, Ordering::Relaxed);
        }
        // SAFETY: tgkill to a thread of this process.
        unsafe { libc::syscall(libc::SYS_tgkill, me, server, libc::SIGALRM) };
        return;
    }
    let forwarded =
        code == libc::SI_TKILL && pid == me && ALARM_FORWARDED_WATCHDOG.swap(false, Ordering::Relaxed);
    let pipe = ALARM_PIPE.load(Ordering::Relaxed);
    // Not a crash: reported whatever `crash-log-enabled` says, as Redis reports it.
    if pipe < 0 || ALARM_BUSY.swap(true, Ordering::Acquire) {
        return;
    }
    // SAFETY: ALARM_BUSY is ours (swapped from false): the reporter does not read the capture
    // until the pipe says so.
    let cap = unsafe { &mut *ALARM.0.get() };
    cap.watchdog = from_timer || forwarded;
    let mut frames = [std::ptr::null_mut(); ALARM_FRAMES];
    // SAFETY: backtrace writes at most ALARM_FRAMES addresses (warmed up at install).
    let depth = unsafe { backtrace(frames.as_mut_ptr(), ALARM_FRAMES as libc::c_int) }.max(0) as usize;
    for (slot, f) in cap.frames.iter_mut().zip(&frames[..depth]) {
        *slot = *f as usize;
    }
    cap.depth = depth;
    // The running command, copied while its arguments are alive (this is the server thread).
    let ptr = CURRENT_ARGS.load(Ordering::Relaxed);
    let argc = CURRENT_ARGC.load(Ordering::Relaxed);
    cap.argc = if ptr.is_null() { 0 } else { argc };
    cap.client = CURRENT_CLIENT.load(Ordering::Relaxed);
    cap.args_len = 0;
    if cap.argc > 0 {
        // SAFETY: the module's invariant: on the server thread a published argument list
        // lives in a frame below this one.
        let args = unsafe { std::slice::from_raw_parts(ptr as *const &[u8], argc) };
        for a in args {
            let shown = a.len().min(SHOWN_ARG_BYTES);
            if cap.args_len + 16 + shown > ALARM_ARGS_BYTES {
                break;
            }
            let at = cap.args_len;
            cap.args[at..at + 8].copy_from_slice(&(shown as u64).to_le_bytes());
            cap.args[at + 8..at + 16].copy_from_slice(&(a.len() as u64).to_le_bytes());
            cap.args[at + 16..at + 16 + shown].copy_from_slice(&a[..shown]);
            cap.args_len = at + 16 + shown;
        }
    }
    let byte = 1u8;
    // SAFETY: one byte to our pipe (async-signal-safe); the reporter reads the capture after.
    if unsafe { libc::write(pipe, (&raw const byte).cast(), 1) } != 1 {
        ALARM_BUSY.store(false, Ordering::Release);
    }
}

/// On the `stack-reporter` thread: the SIGALRM report from the capture.
fn write_alarm_report() {
    // SAFETY: ALARM_BUSY is set and the handler has written the capture (see `AlarmCell`).
    let cap = unsafe { &*ALARM.0.get() };
    let mut w = LogWriter::new();
    // Redis's words for the two causes (log watchers look for them).
    let _ = write!(w, "{}", if cap.watchdog { "--- WATCHDOG TIMER EXPIRED ---" } else { "Received SIGALRM" });
    w.line();
    let _ = write!(w, "------ STACK TRACE ------");
    w.line();
    let _ = write!(w, "thread id: {} (the server thread)", SERVER_TID.load(Ordering::Relaxed));
    w.line();
    for (i, &ip) in cap.frames[..cap.depth].iter().enumerate() {
        let mut any = false;
        // A return address points past its call: look up the byte before it.
        backtrace::resolve(ip.saturating_sub(1) as *mut std::ffi::c_void, |sym| {
            any = true;
            let name = sym.name().map(|n| format!("{n:#}")).unwrap_or_else(|| "?".into());
            let _ = write!(w, "{i:>3}: {ip:#x} {name}");
            if let (Some(file), Some(line)) = (sym.filename(), sym.lineno()) {
                let _ = write!(w, " at {}:{line}", file.display());
            }
            w.line();
        });
        if !any {
            let _ = write!(w, "{i:>3}: {ip:#x}");
            w.line();
        }
    }
    let _ = write!(w, "------ STACK TRACE DONE ------");
    w.line();
    let _ = write!(w, "------ CURRENT CLIENT INFO ------");
    w.line();
    if cap.argc == 0 {
        let _ = write!(w, "(no command running on the server thread)");
        w.line();
    } else {
        let _ = write!(w, "id={} argc={}", cap.client, cap.argc);
        w.line();
        let (mut at, mut i) = (0, 0);
        while at < cap.args_len {
            let shown = u64::from_le_bytes(cap.args[at..at + 8].try_into().expect("8 bytes")) as usize;
            let whole = u64::from_le_bytes(cap.args[at + 8..at + 16].try_into().expect("8 bytes")) as usize;
            write_arg(&mut w, i, &cap.args[at + 16..at + 16 + shown], whole);
            at += 16 + shown;
            i += 1;
        }
    }
}

/// Publishes the command the server thread is about to run, for the report; the previous
/// one (a command that runs another) comes back when the guard drops: three plain loads
/// and stores each way.
pub struct CurrentCommand {
    prev: (*mut u8, usize, u64),
}

impl CurrentCommand {
    #[inline]
    pub fn enter(client: u64, args: &[&[u8]]) -> CurrentCommand {
        // Loads and stores, not swaps (a swap is a locked instruction): only the server
        // thread writes these.
        let prev = (
            CURRENT_ARGS.load(Ordering::Relaxed),
            CURRENT_ARGC.load(Ordering::Relaxed),
            CURRENT_CLIENT.load(Ordering::Relaxed),
        );
        publish(args.as_ptr() as *mut u8, args.len(), client);
        CurrentCommand { prev }
    }
}

impl Drop for CurrentCommand {
    #[inline]
    fn drop(&mut self) {
        publish(self.prev.0, self.prev.1, self.prev.2);
    }
}

/// A signal handler interrupting the server thread between these stores sees a count of 0
/// (nothing to show) or a count that matches the pointer: the count goes to 0 first and
/// takes its value last, and the compiler fences keep that order (they cost nothing at run
/// time: a handler runs on the thread it interrupts).
#[inline]
fn publish(args: *mut u8, argc: usize, client: u64) {
    use std::sync::atomic::compiler_fence;
    CURRENT_ARGC.store(0, Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    CURRENT_ARGS.store(args, Ordering::Relaxed);
    CURRENT_CLIENT.store(client, Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    CURRENT_ARGC.store(argc, Ordering::Relaxed);
}

/// DEBUG SEGFAULT: a write to a read-only page, the real fault a bad pointer causes (not a
/// signal sent to ourselves), so the report shows the faulting address and the stack.
pub fn segfault() -> ! {
    // SAFETY: the page is ours and mapped read-only; the volatile store to it is the point
    // (the kernel stops it with SIGSEGV, whose handler never returns here).
    unsafe {
        let page = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        let target = if page == libc::MAP_FAILED { std::ptr::dangling_mut::<u8>() } else { page as *mut u8 };
        std::ptr::write_volatile(target, b'x');
    }
    // Only if the store did not fault (it always does): die the same way.
    // SAFETY: raising a signal whose handler is installed.
    unsafe { libc::raise(libc::SIGSEGV) };
    std::process::abort()
}

/// DEBUG ASSERT (and DEBUG PANIC): an internal check that failed, reported, then the process
/// ends: `exit(1)` with `use-exit-on-panic`, else `abort()` (a core dump where enabled).
pub fn assertion_failed(what: &str, location: &std::panic::Location<'_>) -> ! {
    if CRASH_LOG_ENABLED.load(Ordering::Relaxed) && !REPORTING.swap(true, Ordering::Relaxed) {
        let mut w = LogWriter::new();
        report_start(&mut w);
        let _ = write!(w, "=== ASSERTION FAILED ===");
        w.line();
        let _ = write!(w, "==> {}:{} '{what}' is not true", location.file(), location.line());
        w.line();
        report_body(&mut w, true);
    }
    if USE_EXIT_ON_PANIC.load(Ordering::Relaxed) {
        std::process::exit(1);
    }
    // The report is written: abort without a second one.
    // SAFETY: restoring SIGABRT's default action before raising it.
    unsafe { libc::signal(libc::SIGABRT, libc::SIG_DFL) };
    std::process::abort()
}

fn on_panic(info: &std::panic::PanicHookInfo<'_>) {
    let message = info
        .payload()
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a value that is not text)");
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("unnamed");
    let mut w = LogWriter::new();
    let location = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
    if !CRASH_LOG_ENABLED.load(Ordering::Relaxed) || REPORTING.swap(true, Ordering::Relaxed) {
        let _ = write!(w, "thread '{name}' panicked at {location}: {message}");
        w.line();
        return;
    }
    report_start(&mut w);
    let _ = write!(w, "goblin-core {} panicked at {location}: {message}", env!("CARGO_PKG_VERSION"));
    w.line();
    let _ = write!(w, "thread: {name}");
    w.line();
    report_body(&mut w, true);
    // A panic the engine catches (a read command's) lets the server go on: a later one gets
    // its own report.
    REPORTING.store(false, Ordering::Relaxed);
}

extern "C" fn on_fatal_signal(sig: i32, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    if CRASH_LOG_ENABLED.load(Ordering::Relaxed) && !REPORTING.swap(true, Ordering::Relaxed) {
        // SAFETY: SIGALRM's default action (terminate) bounds a report that hangs.
        unsafe {
            libc::signal(libc::SIGALRM, libc::SIG_DFL);
            libc::alarm(REPORT_DEADLINE_SECS);
        }
        let mut w = LogWriter::new();
        report_start(&mut w);
        // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
        let (code, addr, pid, uid) = unsafe {
            let i = &*info;
            (i.si_code, i.si_addr() as usize, i.si_pid(), i.si_uid())
        };
        let _ = write!(
            w,
            "goblin-core {} crashed by signal: {sig} ({}), si_code: {code}",
            env!("CARGO_PKG_VERSION"),
            signal_name(sig)
        );
        w.line();
        if code <= 0 {
            // Sent by a process (kill, tgkill, abort): who sent it.
            let _ = write!(w, "Killed by PID: {pid}, UID: {uid}");
        } else {
            let _ = write!(w, "Accessing address: {addr:#x}");
        }
        w.line();
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let _ = write!(
            w,
            "thread id: {tid}{}",
            if tid == SERVER_TID.load(Ordering::Relaxed) { " (the server thread)" } else { "" }
        );
        w.line();
        report_body(&mut w, tid == SERVER_TID.load(Ordering::Relaxed));
    }
    // Die of the signal itself. A fault returns to the faulting instruction, which faults
    // again under the default action; a signal sent from outside is raised again.
    // SAFETY: restoring the default action and raising the signal on ourselves.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        _ => "?",
    }
}

fn report_start(w: &mut LogWriter) {
    let _ = write!(w, "=== GOBLIN-CORE BUG REPORT START: copy from here to the END line ===");
    w.line();
}

/// The stack trace, the current command (if the crash is on the server thread), the end.
fn report_body(w: &mut LogWriter, on_server_thread: bool) {
    let _ = write!(w, "------ STACK TRACE ------");
    w.line();
    let trace = std::backtrace::Backtrace::force_capture().to_string();
    for l in trace.lines() {
        let _ = w.write_all(l.as_bytes());
        w.line();
    }
    let _ = write!(w, "------ STACK TRACE DONE ------");
    w.line();
    let _ = write!(w, "------ CURRENT CLIENT INFO ------");
    w.line();
    let ptr = CURRENT_ARGS.load(Ordering::Relaxed);
    let argc = CURRENT_ARGC.load(Ordering::Relaxed);
    if !on_server_thread || ptr.is_null() || argc == 0 {
        let _ = write!(w, "(no command running on the server thread)");
        w.line();
    } else {
        // SAFETY: see the module's invariant: on the server thread, a published argument
        // list lives in a frame below this one.
        let args = unsafe { std::slice::from_raw_parts(ptr as *const &[u8], argc) };
        let _ = write!(w, "id={} argc={argc}", CURRENT_CLIENT.load(Ordering::Relaxed));
        w.line();
        for (i, a) in args.iter().enumerate() {
            write_arg(w, i, &a[..a.len().min(SHOWN_ARG_BYTES)], a.len());
        }
    }
    let _ = write!(w, "=== GOBLIN-CORE BUG REPORT END. Include everything from the START line ===");
    w.line();
}

/// How much of each argument a report shows.
const SHOWN_ARG_BYTES: usize = 128;

/// One `argv[i]` line of a report: `shown` (the argument's first bytes; `whole` its length),
/// or `*redacted*` past the command's name with `hide-user-data-from-log`.
fn write_arg(w: &mut LogWriter, i: usize, shown: &[u8], whole: usize) {
    if HIDE_USER_DATA.load(Ordering::Relaxed) && i > 0 {
        let _ = write!(w, "argv[{i}]: *redacted*");
    } else {
        let _ = write!(w, "argv[{i}]: '{}'", Shown(shown));
        if whole > shown.len() {
            let _ = write!(w, "... ({whole} bytes)");
        }
    }
    w.line();
}

/// Bytes as printable text: escapes for the rest, as redis-cli shows them.
struct Shown<'a>(&'a [u8]);

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for &b in self.0 {
            match b {
                b'\\' | b'\'' => write!(f, "\\{}", b as char)?,
                0x20..=0x7e => write!(f, "{}", b as char)?,
                _ => write!(f, "\\x{b:02x}")?,
            }
        }
        Ok(())
    }
}

/// One log line at a time into a fixed buffer (nothing allocated), each written whole with
/// `write(2)`, prefixed as the log's own lines are (UTC time, level, origin).
struct LogWriter {
    buf: [u8; 1024],
    len: usize,
    prefix: [u8; 64],
    prefix_len: usize,
}

impl LogWriter {
    fn new() -> LogWriter {
        let mut w = LogWriter { buf: [0; 1024], len: 0, prefix: [0; 64], prefix_len: 0 };
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes the timespec we pass (async-signal-safe).
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        let secs = ts.tv_sec;
        let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (y, m, d) = civil_from_days(days);
        let mut cur = std::io::Cursor::new(&mut w.prefix[..]);
        let _ = write!(
            cur,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}Z  WARN goblin_core::crash: ",
            rem / 3600,
            rem / 60 % 60,
            rem % 60,
            ts.tv_nsec / 1000
        );
        w.prefix_len = cur.position() as usize;
        w
    }

    /// Ends the line: writes prefix, text and newline, and starts the next.
    fn line(&mut self) {
        let fd = LOG_FD.load(Ordering::Relaxed);
        let mut whole = [0u8; 1024 + 64 + 1];
        let n = self.prefix_len + self.len;
        whole[..self.prefix_len].copy_from_slice(&self.prefix[..self.prefix_len]);
        whole[self.prefix_len..n].copy_from_slice(&self.buf[..self.len]);
        whole[n] = b'\n';
        let mut off = 0;
        while off <= n {
            // SAFETY: writing bytes of a live buffer to a descriptor.
            let r = unsafe { libc::write(fd, whole[off..=n].as_ptr() as *const libc::c_void, n + 1 - off) };
            if r <= 0 {
                break;
            }
            off += r as usize;
        }
        self.len = 0;
    }
}

impl std::io::Write for LogWriter {
    /// Appends what fits in the line; the rest of an overlong line is dropped.
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let n = data.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&data[..n]);
        self.len += n;
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// (year, month, day) of a day count since 1970-01-01 (proleptic Gregorian calendar).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn arguments_shown_escaped() {
        assert_eq!(Shown(b"a'b\\c\x00\xff z").to_string(), "a\\'b\\\\c\\x00\\xff z");
    }
}
