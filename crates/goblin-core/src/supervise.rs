//! `--supervised no|upstart|systemd|auto` (Redis's `supervised`): telling a service manager
//! that the server is up. Debian's redis-server unit is `Type=notify` and starts the server
//! with `--supervised systemd`: systemd waits for `READY=1` on the socket named by
//! `NOTIFY_SOCKET` and kills a server that never sends it. Upstart's `expect stop` waits for
//! the process to stop itself with SIGSTOP. `auto` picks by the environment, as Redis does.

use std::os::unix::net::UnixDatagram;

/// The supervision mode, as the flag names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    No,
    Upstart,
    Systemd,
    Auto,
}

impl Mode {
    pub fn parse(s: &str) -> Result<Mode, String> {
        match s.to_ascii_lowercase().as_str() {
            "no" => Ok(Mode::No),
            "upstart" => Ok(Mode::Upstart),
            "systemd" => Ok(Mode::Systemd),
            "auto" => Ok(Mode::Auto),
            _ => Err(format!("'{s}': argument(s) must be one of the following: upstart, systemd, auto, no")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::No => "no",
            Mode::Upstart => "upstart",
            Mode::Systemd => "systemd",
            Mode::Auto => "auto",
        }
    }

    /// What `auto` means here: systemd when `NOTIFY_SOCKET` is set, upstart when `UPSTART_JOB`
    /// is, else nothing.
    pub fn resolved(self) -> Mode {
        match self {
            Mode::Auto if std::env::var_os("NOTIFY_SOCKET").is_some() => Mode::Systemd,
            Mode::Auto if std::env::var_os("UPSTART_JOB").is_some() => Mode::Upstart,
            Mode::Auto => Mode::No,
            m => m,
        }
    }
}

/// Sends `state` (newline-separated `KEY=value` lines) to systemd's notification socket. A
/// path starting with `@` is in the abstract namespace.
fn notify_systemd(state: &str) -> std::io::Result<()> {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return Err(std::io::Error::new(std::io::ErrorKind::NotFound, "NOTIFY_SOCKET is not set"));
    };
    let sock = UnixDatagram::unbound()?;
    let bytes = path.as_encoded_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        sock.send_to_addr(state.as_bytes(), &addr)?;
    } else {
        sock.send_to(state.as_bytes(), std::path::Path::new(&path))?;
    }
    Ok(())
}

/// The server listens and is ready: tell the supervisor.
pub fn ready(mode: Mode) {
    match mode.resolved() {
        Mode::Systemd => match notify_systemd("STATUS=Ready to accept connections\nREADY=1\n") {
            Ok(()) => tracing::info!("supervised by systemd: told it the server is ready"),
            Err(e) => tracing::warn!("supervised by systemd, but could not notify it: {e}"),
        },
        Mode::Upstart => {
            if std::env::var_os("UPSTART_JOB").is_none() {
                tracing::warn!("upstart supervision requested, but UPSTART_JOB is not set");
                return;
            }
            tracing::info!("supervised by upstart: stopping for it to resume the server");
            // SAFETY: raising a signal on this process; upstart sends SIGCONT.
            unsafe {
                libc::raise(libc::SIGSTOP);
            }
            std::env::remove_var("UPSTART_JOB");
        }
        Mode::No | Mode::Auto => {}
    }
}

/// The server is shutting down: tell systemd, which then does not take the exit for a crash.
pub fn stopping(mode: Mode) {
    if mode.resolved() == Mode::Systemd {
        let _ = notify_systemd("STOPPING=1\n");
    }
}
