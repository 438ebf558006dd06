//! CLIENT PAUSE / UNPAUSE: holding clients' commands for a while, as Redis does for failovers
//! and maintenance.
//!
//! `ALL` holds every command of every client (CLIENT UNPAUSE from another client included, as
//! in Redis 7.0); `WRITE` holds the commands that may change data or replicate (writes,
//! scripts, PUBLISH) and, so that nothing changes by itself either, stops expiry: active expiry
//! skips its rounds and a read of a key past its deadline answers as missing without deleting
//! it (the engine's replica rule). A held command is kept on its connection, like a parked
//! blocking command (its later input waits behind it), and runs when the pause ends, in the
//! order the commands were held. Firehose subscribers are never held.
//!
//! The Kafka journal's backpressure (`--kafka-pending-bytes`) holds commands the same way, as
//! a WRITE pause with no deadline: past the watermark a client's write waits on its
//! connection (which is read no further), while reads, INFO among them, are answered; the
//! held writes run, in order, once Kafka has caught up.

use crate::conn::Conn;
use crate::server::Server;
use engine::{errors, util, CommandSpec, Flags};
use resp::reply;
use std::time::{Duration, Instant};

/// The pause in force.
#[derive(Default)]
pub struct Pause {
    /// When it ends, and whether it holds all commands (else only writes).
    pub until: Option<(Instant, bool)>,
    /// Held connections (slot, id), in the order their commands were held.
    held: Vec<(usize, u64)>,
    /// Connections held by the journal's backpressure, in order.
    journal_held: Vec<(usize, u64)>,
}

impl Pause {
    /// Whether the command `args` (of `spec`) must wait now, scripts aside (see
    /// [`Server::pause_holds`]): under WRITE, writes and may-replicate commands (PFCOUNT
    /// can rewrite its key; PUBLISH goes to replicas) wait, as in Redis.
    #[inline]
    pub fn holds(&self, spec: &CommandSpec) -> bool {
        match self.until {
            None => false,
            Some((_, true)) => true,
            Some((_, false)) => spec.flags.has(Flags::WRITE) || spec.flags.has(Flags::MAY_REPLICATE),
        }
    }

    /// When the loop must wake to end the pause.
    pub fn deadline(&self) -> Option<Instant> {
        self.until.map(|(t, _)| t)
    }
}

impl Server {
    /// Whether the command `args` must wait for the pause to end. Under WRITE a script is
    /// judged by its declared flags, as Redis does: with a shebang (an EVAL body, a cached
    /// EVALSHA script, a function's flags) it waits unless it declared `no-writes`; without
    /// one it waits under EVAL/EVALSHA/FCALL (may-replicate) and runs under their _RO forms.
    pub(crate) fn pause_holds(&mut self, spec: &CommandSpec, args: &[&[u8]]) -> bool {
        if !matches!(self.pause.until, Some((_, false))) {
            return self.pause.holds(spec);
        }
        self.write_pause_holds(spec, args)
    }

    /// Whether a WRITE pause holds the command (see [`Server::pause_holds`]).
    pub(crate) fn write_pause_holds(&mut self, spec: &CommandSpec, args: &[&[u8]]) -> bool {
        if !matches!(spec.name, "eval" | "evalsha" | "fcall" | "eval_ro" | "evalsha_ro" | "fcall_ro") {
            return spec.flags.has(Flags::WRITE) || spec.flags.has(Flags::MAY_REPLICATE);
        }
        match self.declared_script_flags(spec, args) {
            Some(flags) => flags & crate::scripting::functions::NO_WRITES == 0,
            None => !spec.name.ends_with("_ro"),
        }
    }

    /// Holds `args` on `conn` until the pause ends (CLIENT PAUSE), or until the journal has
    /// caught up (`journal`).
    pub(crate) fn hold_command(&mut self, conn: &mut Conn, slot: usize, args: &[&[u8]], journal: bool) {
        conn.paused = Some(args.iter().map(|a| a.to_vec()).collect());
        if journal {
            self.pause.journal_held.push((slot, conn.id));
        } else {
            self.pause.held.push((slot, conn.id));
        }
    }

    /// Whether `holds` (a pause's judgement) holds the command, or, for an EXEC, any command
    /// its transaction queued: an EXEC waits if a queued command would.
    pub(crate) fn holds_with_queue(
        &mut self,
        conn: &Conn,
        spec: &CommandSpec,
        args: &[&[u8]],
        holds: fn(&mut Server, &CommandSpec, &[&[u8]]) -> bool,
    ) -> bool {
        if holds(self, spec, args) {
            return true;
        }
        spec.name == "exec"
            && conn.multi.as_ref().is_some_and(|m| {
                m.queued.iter().any(|q| {
                    let argv: Vec<&[u8]> = q.iter().map(Vec::as_slice).collect();
                    engine::lookup(&q[0]).is_some_and(|s| holds(self, s, &argv))
                })
            })
    }

    /// The journal has caught up: the commands its backpressure held run, in order.
    pub(crate) fn release_journal_held(&mut self) {
        for (slot, id) in std::mem::take(&mut self.pause.journal_held) {
            self.run_held(slot, id);
        }
    }

    /// Runs the command held on connection (slot, id), if it is still there, then lets its
    /// later input follow.
    fn run_held(&mut self, slot: usize, id: u64) {
        let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else { return };
        if conn.id == id {
            if let Some(cmd) = conn.paused.take() {
                let argv: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
                if conn.sbe.is_some() {
                    // Its Ack was owed since the pause held it.
                    self.sbe_resume_paused(&mut conn, slot, &argv);
                } else {
                    self.call(&mut conn, slot, &argv);
                }
            }
            if !conn.pending.is_empty() {
                self.resume.push(slot);
            }
        }
        self.conns[slot] = Some(conn);
        self.queue_write(slot);
    }

    /// CLIENT PAUSE timeout [WRITE|ALL].
    pub(crate) fn client_pause(&mut self, conn: &mut Conn, args: &[&[u8]]) {
        let out = &mut conn.out;
        let ms = match util::parse_i64(args[2]) {
            Some(n) if n < 0 => return reply::error(out, b"ERR timeout is negative"),
            Some(n) => n,
            None => return reply::error(out, b"ERR timeout is not an integer or out of range"),
        };
        let all = match args.get(3).map(|a| a.to_ascii_lowercase()) {
            None => true,
            Some(m) if m == b"all" => true,
            Some(m) if m == b"write" => false,
            Some(_) => return reply::error(out, b"ERR CLIENT PAUSE mode must be WRITE or ALL"),
        };
        if args.len() > 4 {
            return reply::error(out, errors::SYNTAX);
        }
        // As Redis: a deadline past what the clock holds is out of range (not a panic).
        let now = Instant::now();
        let until = match now.checked_add(Duration::from_millis(ms as u64)) {
            Some(t) if engine::util::deadline_after(ms, crate::server::now_ms()).is_ok() => t,
            _ => return reply::error(out, engine::errors::TIMEOUT_OUT_OF_RANGE),
        };
        // A second pause extends, never shortens, and ALL wins over WRITE while both last.
        let (until, all) = match self.pause.until {
            Some((t, a)) => (t.max(until), a || all),
            None => (until, all),
        };
        self.pause.until = Some((until, all));
        // No expiry while paused (a write pause promises no change; under ALL nothing runs).
        self.engine.replica = true;
        reply::ok(out);
    }

    /// CLIENT UNPAUSE, or the pause's time is up: held commands run, in order.
    pub(crate) fn unpause(&mut self) {
        if self.pause.until.take().is_none() {
            return;
        }
        self.engine.replica = self.data_frozen();
        self.run_all_held();
    }

    /// Whether nothing may change the data by itself now (the engine's replica rule: no
    /// expiry deletes): on a replica, under a pause, while a FAILOVER holds writes, or while a
    /// shutdown waits for its replicas.
    pub(crate) fn data_frozen(&self) -> bool {
        self.follows_upstream()
            || self.pause.until.is_some()
            || self.failover.is_some()
            || self.shutdown_wait.is_some()
    }

    /// Runs every held command, in order (one that must still wait, under a FAILOVER's hold,
    /// is held again).
    pub(crate) fn run_all_held(&mut self) {
        for (slot, id) in std::mem::take(&mut self.pause.held) {
            self.run_held(slot, id);
        }
    }

    /// CLIENT UNPAUSE: the pause ends at the end of this loop turn (the held commands then run
    /// from the loop, not inside the command that ended it).
    pub(crate) fn end_pause_now(&mut self) {
        if let Some((_, all)) = self.pause.until {
            self.pause.until = Some((Instant::now(), all));
        }
    }

    /// Ends the pause once its time has come (every loop turn).
    pub(crate) fn check_pause(&mut self) {
        if let Some(deadline) = self.pause.deadline() {
            if Instant::now() >= deadline {
                self.unpause();
            }
        }
    }
}
