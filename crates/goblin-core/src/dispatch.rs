//! From parsed requests to replies: table lookup, arity, MULTI queuing, execution (engine or
//! server command), reply modes, the output limit, then the after-command hooks (mutations,
//! blocked clients).

use crate::conn::{Conn, Multi, ReplyMode};
use crate::server::{now_ms, Server};
use engine::{errors, CommandSpec, Handler, Origin, Outcome};
use resp::reply;
use tracing::{debug, warn};

/// Requests with at most this many arguments build their argument slices on the stack; only
/// longer ones (MSET of many keys ...) allocate a vector.
const STACK_ARGS: usize = 16;
/// Unsent output that `client-output-buffer-limit` does not count: Redis's per-client reply
/// buffer (16 KiB), whose bytes its limit leaves out.
const OUTPUT_LIMIT_EXEMPT: usize = 16 * 1024;
/// FLUSHALL's spec, recognised after a command by address (one load and compare).
static FLUSHALL: std::sync::LazyLock<&'static CommandSpec> =
    std::sync::LazyLock::new(|| engine::lookup(b"flushall").expect("FLUSHALL is in the table"));
/// Inside one batch of pipelined requests, the clock ([`Server::clock_ms`]) is read again
/// after this many commands, so a long batch does not run late commands at a stale time.
pub(crate) const CLOCK_EVERY: u32 = 64;
/// How many pipelined requests of one read are looked ahead at once (see [`Lookahead`]).
const LOOKAHEAD: usize = 16;
/// Requests with more arguments than this are not looked at (nor is anything after them in the
/// window): a fill's work stays a few hundred header bytes, whatever a client sends.
const LOOKAHEAD_MAX_ARGS: u64 = 32;
/// How many requests before its own turn a request's key chain starts loading. Its bucket
/// slot was asked for when the window was filled; a request or two later that line is in
/// cache, so reading the chain's head from it does not stall.
const CHAIN_AHEAD: usize = 2;

/// The keys of the next pipelined requests in one read, hashed in one pass so that each
/// request's table lookup finds its lines loaded: a lookup in a table larger than the cache
/// costs two misses in a row (the bucket slot, then the entry it points to), a quarter of the
/// server thread's time at `redis-benchmark -P 16` over 100,000 keys. The window asks for
/// every bucket slot at once, and for each request's first entry `CHAIN_AHEAD` requests
/// ahead, so the misses overlap instead of following each other.
///
/// Only a hint: the key taken is each request's second argument (the key of most commands;
/// for the others a wasted prefetch), and only requests of the common multibulk shape are
/// looked at (`RequestParser::peek`). The window is exact about which request is which: the
/// k-th request `next` returns after a fill is the k-th one peeked, since both read the same
/// bytes and `peek` names only requests `next` parses the same way.
struct Lookahead {
    hashes: [Option<u64>; LOOKAHEAD],
    len: usize,
    /// The window's request about to run.
    next: usize,
    /// Where in the buffer the window's requests end: the next fill starts there.
    end: usize,
}

impl Lookahead {
    fn new() -> Self {
        Lookahead { hashes: [None; LOOKAHEAD], len: 0, next: 0, end: 0 }
    }

    /// Before the request at `buf[pos..]` runs: fills the window from there once the last
    /// window is used up, then asks for the key chain of the request `CHAIN_AHEAD` ahead.
    #[inline]
    fn before_request(&mut self, parser: &resp::RequestParser, buf: &[u8], pos: usize, ks: &store::Keyspace) {
        if self.next == self.len && pos >= self.end {
            if parser.in_request() {
                // A request arriving over several reads (the parser keeps its progress): peeking
                // at it would walk it from its start on every read. The window opens after it.
                self.len = 0;
                self.next = 0;
                self.end = pos;
                return;
            }
            self.fill(parser, buf, pos, ks);
        }
        if self.next < self.len {
            if let Some(&Some(h)) = self.hashes[..self.len].get(self.next + CHAIN_AHEAD) {
                ks.prefetch(h, true);
            }
            self.next += 1;
        }
    }

    fn fill(&mut self, parser: &resp::RequestParser, buf: &[u8], pos: usize, ks: &store::Keyspace) {
        // First the requests' extents, then (only for a pipeline) their keys' hashes.
        let mut keys: [Option<std::ops::Range<usize>>; LOOKAHEAD] = Default::default();
        let mut at = pos;
        self.len = 0;
        self.next = 0;
        while self.len < LOOKAHEAD {
            let Some((n, key)) = parser.peek(&buf[at..], LOOKAHEAD_MAX_ARGS) else { break };
            keys[self.len] = key.map(|r| at + r.start..at + r.end);
            self.len += 1;
            at += n;
        }
        if self.len < 2 {
            // A lone request (no pipeline) gains nothing: no look ahead for the rest of
            // this read.
            self.len = 0;
            self.end = buf.len();
            return;
        }
        self.end = at;
        for (h, key) in self.hashes.iter_mut().zip(keys).take(self.len) {
            *h = key.map(|r| ks.key_hash(&buf[r]));
            if let Some(h) = *h {
                ks.prefetch(h, false);
            }
        }
    }
}

/// A script's write too large for one record of the Kafka journal (the refusal outside scripts
/// also names the sizes).
pub(crate) const JOURNAL_RECORD_TOO_LARGE: &[u8] =
    b"ERR the write is larger than the Kafka journal's record size limit (the topic's max.message.bytes, less the record's headers)";
/// Redis's refusal of a command that may grow memory while used memory is above maxmemory.
pub(crate) const OOM: &[u8] = b"OOM command not allowed when used memory > 'maxmemory'.";
/// Redis's refusal of a write while fewer replicas than `min-replicas-to-write` acknowledged
/// within `min-replicas-max-lag` seconds.
pub(crate) const NOREPLICAS: &[u8] = b"NOREPLICAS Not enough good replicas to write.";

/// Whether a command queued in this transaction satisfies `test` (its spec and arguments).
/// Redis's refusal of writes after a failed save (`stop-writes-on-bgsave-error`).
pub(crate) const MISCONF: &[u8] = b"MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

/// The size of `args` as a RESP2 array of bulk strings (the request, and the mutation a plain
/// write becomes).
fn resp2_len(args: &[&[u8]]) -> usize {
    fn digits(n: usize) -> usize {
        n.checked_ilog10().map_or(1, |d| d as usize + 1)
    }
    3 + digits(args.len()) + args.iter().map(|a| 5 + digits(a.len()) + a.len()).sum::<usize>()
}

impl Server {
    /// Executes every complete request at the front of `buf` for `conn`, appending the replies
    /// to `conn.out` in order. Returns how many bytes were consumed: the rest is a partial
    /// request, or input that waits because the client got parked or is closing.
    pub(crate) fn process_input(&mut self, conn: &mut Conn, slot: usize, buf: &[u8]) -> usize {
        if conn.sbe.is_some() {
            return self.process_sbe(conn, slot, buf);
        }
        // The parser is taken out of the connection while its arguments are in use: inline
        // requests' arguments live inside it, and the handler needs the connection mutably.
        let Some(mut parser) = conn.parser.take() else { return 0 };
        // The lookahead below hashes keys in the client's database's table.
        self.engine.select(conn.db);
        let mut pos = 0;
        let mut since_clock = 0u32;
        let mut ahead = Lookahead::new();
        while pos < buf.len() {
            if conn.input_waits() {
                break;
            }
            if conn.out_pending() > crate::server::REPLY_BACKPRESSURE_BYTES && conn.firehose.is_none() {
                // Replies pile up unread: the rest of the input waits (see the constant).
                conn.out_throttled = true;
                break;
            }
            ahead.before_request(&parser, buf, pos, &self.engine.ks);
            // Until it logs in, a client's requests are bounded as Redis bounds them (an AUTH
            // earlier in this pipeline lifts it for the next request).
            parser.set_unauthenticated(!conn.authenticated && !self.users.default_is_open());
            match parser.next(&buf[pos..]) {
                Ok(None) => break,
                Ok(Some(n)) => {
                    let req = &buf[pos..pos + n];
                    conn.qbuf_running = buf.len() - pos;
                    pos += n;
                    let argc = parser.argc();
                    if argc == 0 {
                        continue; // blank inline line or `*0`: Redis ignores it
                    }
                    since_clock += 1;
                    if since_clock == CLOCK_EVERY {
                        since_clock = 0;
                        self.clock_ms = now_ms();
                    }
                    if argc <= STACK_ARGS {
                        let mut argv: [&[u8]; STACK_ARGS] = [&[]; STACK_ARGS];
                        for (a, s) in argv.iter_mut().zip(parser.arg_slices(req)) {
                            *a = s;
                        }
                        self.call(conn, slot, &argv[..argc]);
                    } else {
                        let argv: Vec<&[u8]> = parser.arg_slices(req).collect();
                        self.call(conn, slot, &argv);
                    }
                }
                Err(e) => {
                    debug!("protocol error from client id={} addr={}: {e}", conn.id, conn.addr);
                    let mut msg = b"ERR Protocol error: ".to_vec();
                    msg.extend_from_slice(e.to_string().as_bytes());
                    reply::error(&mut conn.out, &msg);
                    conn.close_after_reply = true;
                    // The rest of the input is garbage: drop it.
                    pos = buf.len();
                    break;
                }
            }
        }
        conn.parser = Some(parser);
        conn.qbuf_running = 0;
        pos
    }

    /// Runs one request: the single entry point for every command a client sends.
    pub(crate) fn call(&mut self, conn: &mut Conn, slot: usize, args: &[&[u8]]) {
        // Named in a crash report while it runs (crash.rs).
        let _running = crate::crash::CurrentCommand::enter(conn.id, args);
        if conn.firehose.is_some() {
            return self.downstream_input(conn, args);
        }
        // A redis-server replica sends REPLCONF ACKs (and PINGs): anything else from it is
        // ignored, as nothing may commit a batch while its connection is being served (its
        // stream would miss that batch).
        if conn.redis_replica.is_some()
            && !(args[0].eq_ignore_ascii_case(b"replconf")
                || args[0].eq_ignore_ascii_case(b"ping")
                || args[0].eq_ignore_ascii_case(b"quit"))
        {
            return;
        }
        // Every command runs in its client's database (one comparison when it is selected).
        self.engine.select(conn.db);
        let Some(spec) = crate::rename::lookup(args[0]) else {
            if let Some(m) = &mut conn.multi {
                m.dirty = true;
            }
            errors::unknown_command(&mut conn.out, args);
            self.stats.cmds.rejected(None); // commandstats: refused before running
            return;
        };
        // A command called by a name rename-command gave it runs under its own (rename.rs).
        let own_name = crate::rename::under_own_name(spec, args);
        let args = own_name.as_deref().unwrap_or(args);
        if !spec.arity_ok(args.len()) {
            if let Some(m) = &mut conn.multi {
                m.dirty = true;
            }
            errors::wrong_arity_of(&mut conn.out, spec, args[0]);
            self.stats.cmds.rejected(Some(spec)); // commandstats: refused before running
            return;
        }
        // Every `<container>|help` takes no argument (arity 2 in Redis): extra ones are an
        // arity error of the subcommand, before anything else is checked.
        if args.len() > 2
            && args[1].eq_ignore_ascii_case(b"help")
            && crate::commands::subcommand_name(spec.name, b"help").is_some()
        {
            if let Some(m) = &mut conn.multi {
                m.dirty = true;
            }
            crate::commands::wrong_sub_arity(&mut conn.out, args[0], args[1]);
            self.stats.cmds.rejected(Some(spec)); // commandstats: refused before running
            return;
        }
        // Authentication, after the arity check as in Redis: until AUTH (or HELLO .. AUTH)
        // succeeds, only the commands flagged no_auth run (AUTH, HELLO, QUIT, RESET). The
        // default user's state is read live, so CONFIG SET requirepass "" opens the door to
        // connections already waiting, as in Redis.
        if !conn.authenticated && !spec.flags.has(engine::Flags::NO_AUTH) && !self.users.default_is_open() {
            return self.refuse(conn, spec, crate::commands::NOAUTH);
        }
        // CLIENT INFO's `cmd=` names this command from here on, refused or queued as well as
        // run (Redis sets it at lookup): an ACL LOG entry's client-info shows the command
        // that was refused.
        conn.last_cmd = crate::commands::data_call_name(spec, args);
        // ACL: a user without full access runs only what its rules allow (inside MULTI a
        // refusal fails the transaction, as in Redis). One flag test for everyone else.
        if conn.restricted && !spec.flags.has(engine::Flags::NO_AUTH) {
            if let Some(denied) = self.users.check(&conn.user, spec, args) {
                // A subcommand that does not exist is that, not a refusal (Redis finds no
                // command to check, and logs nothing).
                if denied == crate::auth::Denied::Command
                    && args.len() >= 2
                    && crate::commands::command::is_container(spec.name)
                    && crate::commands::command::full_subcommand_name(spec.name, args[1]).is_none()
                {
                    return self.refuse(conn, spec, &errors::unknown_subcommand_text(args[0], args[1]));
                }
                let context = if conn.multi.is_some() {
                    crate::auth::Context::Multi
                } else {
                    crate::auth::Context::Toplevel
                };
                crate::commands::log_refusal(self, conn, spec, args, denied, context);
                let msg = crate::commands::noperm(denied, &conn.user, spec, args);
                return self.refuse(conn, spec, msg.as_bytes());
            }
        }
        // A script is running past busy-reply-threshold (this is its loop turn for the
        // others): BUSY, or SCRIPT KILL / SHUTDOWN NOSAVE. Nothing is committed here.
        if crate::scripting::busy() {
            self.call_while_busy(conn, slot, spec, args);
            return;
        }
        // Cluster mode: a request's keys hash to one slot, in database 0 (cluster.rs).
        if let Some(msg) = self.cluster_refusal(spec, args) {
            return self.refuse(conn, spec, msg);
        }
        // A replica's data changes only through its upstream: a write, or a script that
        // declared writes (a script without flags is stopped at its first write instead), is
        // refused here, before the subscribed context and staleness, in Redis's order.
        // The last save failed (stop-writes-on-bgsave-error): writes and PING are refused, as
        // Redis refuses them, until a save works. A replica applies what its upstream sends.
        if self.writes_stopped_by_failed_save()
            && !self.follows_upstream()
            && (spec.name == "ping" || self.writes(conn, spec, args))
        {
            return self.refuse(conn, spec, MISCONF);
        }
        // FAILOVER: writes wait while a replica catches up and takes over, and while this
        // server asks it to (then run, and are refused if this server became its replica).
        // A shutdown waiting for its replicas holds writes too (shutdown.rs).
        if (self.failover.is_some() || self.shutdown_wait.is_some())
            && self.holds_with_queue(conn, spec, args, Server::write_pause_holds)
        {
            return self.hold_command(conn, slot, args, false);
        }
        // An EXEC whose queue writes ends the transaction (EXECABORT ... READONLY).
        if self.follows_upstream() && self.writes(conn, spec, args) {
            return self.refuse(conn, spec, b"READONLY You can't write against a read only replica.");
        }
        // The RESP2 subscribed context (Redis's CLIENT_PUBSUB test, made after the arity
        // check as in Redis): the connection carries pushes in-band, so only the pub/sub
        // commands, PING, QUIT and RESET run. RESP3 pushes are out of band: anything runs.
        if conn.pubsub.is_some() && !conn.proto.is_resp3() && !crate::pubsub::allowed_in_context(spec.name) {
            if let Some(m) = &mut conn.multi {
                m.dirty = true;
            }
            let full = args
                .get(1)
                .and_then(|sub| crate::commands::subcommand_name(spec.name, sub))
                .unwrap_or(spec.name);
            crate::pubsub::refuse_in_context(&mut conn.out, full);
            self.stats.cmds.rejected(Some(spec)); // commandstats: refused before running
            return;
        }
        // A replica of a Redis primary whose link is down, with replica-serve-stale-data no.
        if let Some(msg) = self.stale_refusal(spec, args) {
            return self.refuse(conn, spec, msg);
        }
        // CLIENT PAUSE: the command waits on its connection until the pause ends; inside MULTI
        // too, before it is queued (as Redis 7.0). An EXEC waits if a queued command would.
        if self.pause.until.is_some() && self.holds_with_queue(conn, spec, args, Server::pause_holds) {
            return self.hold_command(conn, slot, args, false);
        }
        // The journal's backpressure (--kafka-pending-bytes): writes wait, reads go on.
        if self.input_paused && self.holds_with_queue(conn, spec, args, Server::write_pause_holds) {
            return self.hold_command(conn, slot, args, true);
        }
        // maxmemory: evict first (its own batch, before the command); refuse what may grow
        // memory when that was not enough. A replica never evicts: its upstream's DELs do.
        // Nor does a redis-server replica's REPLCONF (its stream would miss the batch).
        if self.engine.evict.maxmemory > 0 && !self.follows_upstream() && conn.redis_replica.is_none() {
            let refuse = self.over_maxmemory(conn, spec, args);
            // The client's table grows only into the room left under the limit.
            let counted = self.used_memory.read().saturating_sub(self.not_counted_for_evict());
            let room = self.engine.evict.maxmemory.saturating_sub(counted);
            self.engine.ks.set_growth_room(Some(room as usize));
            // Keys evicted now are invalidated before this command's reply, as in Redis.
            self.deliver_invalidations(Some((conn, slot)));
            if refuse {
                return self.refuse(conn, spec, OOM);
            }
        }
        // min-replicas-to-write: a write waits for no one; it is refused while too few
        // replicas acknowledge (inside MULTI it fails the transaction, as in Redis).
        if self.cfg.min_replicas_to_write > 0 && self.lacks_good_replicas() && self.writes(conn, spec, args) {
            return self.refuse(conn, spec, NOREPLICAS);
        }
        // The Kafka journal holds one mutation per record (see `journal_oversized`). Inside
        // MULTI a refusal fails the transaction, as an OOM does.
        if let Some((size, limit)) = self.journal_oversized(spec, args) {
            let msg = format!(
                "ERR the write takes {size} bytes, more than the Kafka journal's record size limit \
                 ({limit} bytes: the topic's max.message.bytes, less the record's headers)"
            );
            return self.refuse(conn, spec, msg.as_bytes());
        }
        if let Some(m) = &mut conn.multi {
            // Commands Redis marks no-multi are refused, and the transaction fails at EXEC.
            // GOBLIN.DUMPWORLD's child writes to the socket in the middle of EXEC's reply, and
            // GOBLIN.LOAD replaces the dataset under the transaction's own batch.
            if matches!(
                spec.name,
                "shutdown" | "save" | "goblin.firehose" | "goblin.dumpworld" | "goblin.load"
            ) {
                m.dirty = true;
                reply::error(&mut conn.out, b"ERR Command not allowed inside a transaction");
                self.stats.cmds.rejected(Some(spec)); // commandstats: refused before running
                return;
            }
            // These act at once inside MULTI; everything else is queued for EXEC.
            if !matches!(spec.name, "exec" | "discard" | "multi" | "watch" | "quit" | "reset") {
                m.queue(args);
                reply::simple(&mut conn.out, b"QUEUED");
                return;
            }
        }
        let mark = conn.out.len();
        let now = self.clock_ms;
        // Who is running, for client tracking's NOLOOP and flush (only read when some client
        // tracks: the common server pays one comparison).
        if self.tracking.clients > 0 {
            self.tracking.current = Some((
                (slot, conn.id),
                conn.tracking.is_some(),
                conn.tracking.as_ref().is_some_and(|t| t.noloop),
            ));
        }
        // Data commands (the hot path) skip the name comparisons.
        let transactional = matches!(spec.handler, Handler::Server)
            && matches!(spec.name, "multi" | "exec" | "discard" | "watch" | "unwatch");
        self.monitor_before(conn, spec, args);
        // ---- commandstats (stats.rs): one clock read each side, then classify the reply ----
        let started = std::time::Instant::now();
        self.cmd_started = Some(started);
        // CLIENT NO-TOUCH: the command (an EXEC's commands, a script's calls) records no key
        // access.
        self.engine.no_touch = conn.no_touch;
        if transactional {
            self.transaction_command(conn, slot, spec, args, now);
        } else {
            self.execute(conn, slot, spec, args, now, false);
        }
        self.engine.no_touch = false;
        self.cmd_started = None;
        let took = started.elapsed();
        self.stats.eventloop.cmd_nanos += took.as_nanos() as u64;
        let reply = conn.out.get(mark..).unwrap_or_default();
        // A command that blocked is counted when it is answered (served, timed out or
        // unblocked: blocking.rs), as Redis counts it on unblocking, not now.
        if conn.parked.is_none() {
            self.stats.cmds.record(spec, conn.last_cmd, reply, took, self.introspection.latency_tracking);
        }
        conn.commands += 1;
        if self.hotkeys.tracking() {
            self.hotkeys.record(spec, args, took, reply.len());
        }
        // ---- end commandstats ----
        self.after_command(conn, spec, args, took);
        // RESP3 subscription confirmations are pushes: CLIENT REPLY OFF does not silence them.
        // (RESP2 too: Redis 7 sends them whatever the reply mode.)
        let pushes = spec.flags.has(engine::Flags::PUBSUB) && spec.name.ends_with("subscribe");
        if !pushes {
            self.apply_reply_mode(conn, mark);
        }
        self.deliver_notifications(Some((conn, slot)));
        self.flush_self_pushes(conn, slot);
        self.check_output_limit(conn);
        // The atomic unit ends here: one command, or one whole EXEC.
        let origin = match spec.handler {
            Handler::Server => match spec.name {
                "exec" => Origin::Exec,
                "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => Origin::Script,
                _ => Origin::Command,
            },
            Handler::Data(_) => Origin::Command,
        };
        // Redis's commands that touch arbitrary keys: their lazy-expiry DELs go to a Redis
        // replica without MULTI/EXEC.
        self.redis_replicas.next_unwrapped = matches!(spec.name, "scan" | "randomkey");
        if let Some(last) = self.commit_batch(origin) {
            conn.last_write_offset = last;
            self.hold_reply(conn, slot, mark, last);
        }
        self.redis_replicas.next_unwrapped = false;
        // FLUSHALL stops a background save and, with save rules, writes the emptied dataset
        // at once (snapshots.rs).
        if std::ptr::eq(spec, *FLUSHALL) {
            self.save_after_flushall();
        }
        self.tracking.current = None;
        if let Some(t) = conn.tracking.as_mut() {
            // CLIENT CACHING applies to the one command after it (a whole MULTI/EXEC).
            if conn.last_cmd != "client|caching" && conn.multi.is_none() && spec.name != "multi" {
                t.caching = None;
            }
        }
        self.deliver_invalidations(Some((conn, slot)));
        // Parked clients served by this batch's writes commit batches of their own, after it.
        if !self.engine.ready_keys.is_empty() {
            self.serve_ready_keys();
        }
    }

    /// With a Kafka journal, a write whose mutation would not fit in one record of the topic:
    /// (its estimated size, the limit). Checked before the write runs, for a client's command
    /// and for a script's `redis.call` alike: run, it could not be journaled, and the server
    /// would have to stop.
    pub(crate) fn journal_oversized(&self, spec: &CommandSpec, args: &[&[u8]]) -> Option<(usize, usize)> {
        let limit = self.journal_record_limit()?;
        if !spec.is_write() {
            return None;
        }
        let size = self.journaled_size(spec, args);
        (size > limit).then_some((size, limit))
    }

    /// An upper estimate of the largest record a write will journal: its request (the
    /// mutation of a plain write, with the key once more for the record's key), or, for BITOP,
    /// which journals the string it stores (`SET dest value`), the longest source. The
    /// collection commands journal one mutation per element, and the in-place string edits
    /// (APPEND, SETRANGE, SETBIT, BITFIELD) themselves, so their request bounds them.
    fn journaled_size(&self, spec: &CommandSpec, args: &[&[u8]]) -> usize {
        let request = resp2_len(args) + args.get(1).map_or(0, |k| k.len());
        let string_len = |key: &[u8]| match self.engine.ks.get(key) {
            Some(store::ValueRef::Str(s)) => s.len(),
            _ => 0,
        };
        let result = match spec.name {
            "bitop" if args.len() >= 4 => args[3..].iter().map(|k| string_len(k)).max().unwrap_or(0),
            _ => 0,
        };
        request + result
    }

    /// A command refused before it runs (Redis's rejectCommand): inside MULTI the transaction
    /// is flagged to fail at EXEC; a refused EXEC ends the transaction at once, answering
    /// `EXECABORT Transaction discarded because of: <reason>`.
    fn refuse(&mut self, conn: &mut Conn, spec: &'static CommandSpec, msg: &[u8]) {
        if spec.name == "exec" {
            conn.multi = None;
            self.watches.unwatch_all(conn);
            let mut e = b"EXECABORT Transaction discarded because of: ".to_vec();
            e.extend_from_slice(msg);
            reply::error(&mut conn.out, &e);
            self.stats.cmds.rejected_reply(spec, &e); // commandstats: refused before running
        } else {
            if let Some(m) = &mut conn.multi {
                m.dirty = true;
            }
            reply::error(&mut conn.out, msg);
            self.stats.cmds.rejected_reply(spec, msg);
        }
    }

    /// Whether a request writes, as Redis's processCommand decides it before running it: a
    /// write command (FUNCTION's writing subcommands included), an EXEC with a queued write, a
    /// script that declared flags without `no-writes` (queued in a transaction too). A script
    /// without flags is checked at its first write instead (scripting/call.rs).
    fn writes(&mut self, conn: &Conn, spec: &'static CommandSpec, args: &[&[u8]]) -> bool {
        match &conn.multi {
            Some(m) if spec.name == "exec" => self.queued_any(m, Self::request_writes),
            _ => self.request_writes(spec, args),
        }
    }

    /// One request's write flag: a declared script's `no-writes`, else the command's flag.
    fn request_writes(&mut self, spec: &CommandSpec, args: &[&[u8]]) -> bool {
        match self.declared_script_flags(spec, args) {
            Some(flags) => flags & crate::scripting::functions::NO_WRITES == 0,
            None => crate::commands::command::request_flagged(spec, args, engine::Flags::WRITE, "write"),
        }
    }

    /// One request's deny-oom flag, as Redis derives it: a script that declared its flags is
    /// deny-oom unless it declared `no-writes` or `allow-oom`; a command by its flag, subcommand
    /// by subcommand (FUNCTION LOAD, XGROUP CREATE).
    fn request_denyoom(&mut self, spec: &CommandSpec, args: &[&[u8]]) -> bool {
        use crate::scripting::functions::{ALLOW_OOM, NO_WRITES};
        match self.declared_script_flags(spec, args) {
            Some(flags) => flags & (NO_WRITES | ALLOW_OOM) == 0,
            None => crate::commands::command::request_flagged(spec, args, engine::Flags::DENYOOM, "denyoom"),
        }
    }

    /// Whether any request queued in a transaction passes `test` (Redis ORs the flags of the
    /// queued commands, a script's declared flags among them, into the transaction's).
    fn queued_any(
        &mut self,
        m: &crate::conn::Multi,
        test: fn(&mut Self, &CommandSpec, &[&[u8]]) -> bool,
    ) -> bool {
        m.queued.iter().any(|q| {
            let args: Vec<&[u8]> = q.iter().map(Vec::as_slice).collect();
            args.first().and_then(|n| engine::lookup(n)).is_some_and(|s| test(self, s, &args))
        })
    }

    /// One eviction round now, if a limit is set and exceeded (CONFIG SET maxmemory lowered the
    /// limit): the same round and batch as before a command.
    pub(crate) fn evict_now(&mut self) {
        let limit = self.engine.evict.maxmemory;
        // Inside EXEC the transaction's batch is still open: the next command's check evicts.
        if limit == 0 || self.follows_upstream() || !self.engine.pending().is_empty() {
            return;
        }
        let used = self.used_for_eviction();
        if used > limit {
            let started = std::time::Instant::now();
            self.engine.evict(self.clock_ms, used - limit);
            self.introspection.latency_sample("eviction-cycle", started.elapsed().as_millis() as u64);
            if self.notify.enabled() {
                let keys: Vec<(u32, Vec<u8>)> =
                    self.engine.pending().iter().map(|m| (m.db, m.arg(1).to_vec())).collect();
                for (db, key) in keys {
                    self.notify.evicted(db, &key);
                }
            }
            self.commit_batch(Origin::Eviction);
        }
    }

    /// Whether used memory is over a set maxmemory (no eviction attempted: scripts ask this
    /// before a write, as Redis refuses deny-oom commands from scripts then).
    pub(crate) fn over_memory_limit(&mut self) -> bool {
        let limit = self.engine.evict.maxmemory;
        limit > 0 && !self.follows_upstream() && self.used_for_eviction() > limit
    }

    /// Used memory as maxmemory counts it: INFO's `used_memory` less what eviction leaves out.
    fn used_for_eviction(&mut self) -> u64 {
        self.used_memory.read().saturating_sub(self.not_counted_for_evict())
    }

    /// Used memory (INFO's `used_memory`) against maxmemory, before a command: evicts keys by
    /// the policy down to the limit, committing their `DEL`s as one batch of origin
    /// [`Origin::Eviction`] (WATCHers of those keys see them; the command's own batch stays
    /// only its effects). Returns true when memory is still over the limit and the command is
    /// one Redis refuses then: flagged deny-oom, any command queued inside MULTI (queuing
    /// grows memory), or an EXEC whose queue holds a deny-oom command.
    /// A script that declared its flags (shebang, function) is deny-oom unless it declared
    /// `no-writes` or `allow-oom`, as Redis derives it: refused before it runs.
    /// Memory eviction leaves out, as Redis leaves out its replicas' and AOF buffers: the
    /// redis-server replicas' output buffers and the debugging history of committed batches
    /// (`DEBUG BATCHES`, with `--debug-batch-history`).
    pub(crate) fn not_counted_for_evict(&self) -> u64 {
        let history = self.batch_history.as_ref().map_or(0, |h| h.allocated_bytes() as u64);
        history + self.redis_replica_buffer_bytes()
    }

    fn over_maxmemory(&mut self, conn: &Conn, spec: &'static CommandSpec, args: &[&[u8]]) -> bool {
        let limit = self.engine.evict.maxmemory;
        let used = self.used_for_eviction();
        if used <= limit {
            return false;
        }
        let started = std::time::Instant::now();
        let freed_enough = self.engine.evict(self.clock_ms, used - limit);
        // A long round is a latency event of its own, as in Redis.
        self.introspection.latency_sample("eviction-cycle", started.elapsed().as_millis() as u64);
        if self.notify.enabled() {
            // Keyspace notifications: `evicted` for each key the round removed.
            let keys: Vec<(u32, Vec<u8>)> =
                self.engine.pending().iter().map(|m| (m.db, m.arg(1).to_vec())).collect();
            for (db, key) in keys {
                self.notify.evicted(db, &key);
            }
        }
        self.commit_batch(Origin::Eviction);
        if freed_enough {
            return false;
        }
        match &conn.multi {
            Some(m) if spec.name == "exec" => self.queued_any(m, Self::request_denyoom),
            Some(_) => !matches!(spec.name, "discard" | "multi" | "watch" | "quit" | "reset"),
            None => self.request_denyoom(spec, args),
        }
    }

    /// Executes a command whose name and arity were checked. Inside EXEC a blocking command
    /// that finds nothing answers at once (a null: `*-1`, or `_` in RESP3), as Redis does,
    /// instead of parking. Replies are in the connection's protocol, inside EXEC too.
    fn execute(
        &mut self,
        conn: &mut Conn,
        slot: usize,
        spec: &'static CommandSpec,
        args: &[&[u8]],
        now: i64,
        in_exec: bool,
    ) {
        match spec.handler {
            // PING answers `*2 pong <message>` in the RESP2 subscribed context (Redis's
            // pingCommand); the cheap field test keeps the name comparison off the hot path.
            Handler::Data(_)
                if conn.pubsub.is_some()
                    && !conn.proto.is_resp3()
                    && spec.name == "ping"
                    && args.len() <= 2 =>
            {
                crate::pubsub::subscribed_ping(&mut conn.out, args);
            }
            // Redis 7.0 refuses SSUBSCRIBE to a client that may not block (inside EXEC);
            // SUBSCRIBE and PSUBSCRIBE are allowed there.
            Handler::Server if in_exec && spec.name == "ssubscribe" => {
                reply::error(&mut conn.out, b"ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client");
            }
            Handler::Data(_) => {
                // SORT's BY and GET patterns read keys the data names: a user without read
                // access to every key may not use them (Redis's rule; the user's own keys were
                // checked). One flag test for everyone else.
                if conn.restricted && matches!(spec.name, "sort" | "sort_ro") {
                    if let Some(err) = crate::commands::sort_pattern_refusal(spec, args) {
                        let user = self.users.find(conn.user.as_bytes());
                        if !user.is_some_and(|u| u.reads_every_key(spec, args)) {
                            return reply::error(&mut conn.out, err);
                        }
                    }
                }
                let outcome = self.run_engine(spec, args, now, &mut conn.out, conn.proto, false);
                if conn.tracking.is_some() {
                    self.tracking_after_read(conn, slot, spec, args);
                }
                if let Outcome::Blocked(mut on) = outcome {
                    if in_exec {
                        reply::null_array(&mut conn.out, conn.proto);
                    } else {
                        match on.args.take() {
                            Some(parked) => {
                                let parked: Vec<&[u8]> = parked.iter().map(|a| a.as_slice()).collect();
                                self.park(conn, slot, &parked, on)
                            }
                            None => self.park(conn, slot, args, on),
                        }
                    }
                }
            }
            Handler::Server => {
                self.stats.server_commands += 1;
                crate::commands::run(self, conn, slot, spec, args, now);
            }
        }
    }

    /// Runs a data command in the engine; its mutations join the pending batch. A read whose
    /// handler panics gets an error reply (the engine keeps what it emitted: its lazy
    /// expiries); a write whose handler panics stops the server (see [`Server::fail_stop`]).
    pub(crate) fn run_engine(
        &mut self,
        spec: &'static CommandSpec,
        args: &[&[u8]],
        now: i64,
        out: &mut Vec<u8>,
        proto: resp::Proto,
        retrying_blocked: bool,
    ) -> Outcome {
        let before = self.notify_before(spec, args);
        let mark = out.len();
        let outcome = match self.engine.execute(spec, args, now, out, proto, retrying_blocked) {
            Outcome::WritePanicked => self.fail_stop(spec.name),
            outcome => outcome,
        };
        if let Some(before) = before {
            let errored = out.get(mark) == Some(&b'-');
            self.notify_after(spec, args, before, errored);
        }
        outcome
    }

    /// MULTI / EXEC / DISCARD. EXEC runs the queued commands back to back with one `now`; their
    /// mutations stay pending until [`Server::call`] commits them, as one atomic batch.
    pub(crate) fn transaction_command(
        &mut self,
        conn: &mut Conn,
        slot: usize,
        spec: &'static CommandSpec,
        args: &[&[u8]],
        now: i64,
    ) {
        self.stats.server_commands += 1;
        match spec.name {
            "watch" => self.watch_command(conn, args),
            "unwatch" => self.unwatch_command(conn),
            "multi" => {
                if conn.multi.is_some() {
                    reply::error(&mut conn.out, b"ERR MULTI calls can not be nested");
                } else {
                    conn.multi = Some(Multi::default());
                    reply::ok(&mut conn.out);
                }
            }
            "discard" => {
                if conn.multi.take().is_some() {
                    self.watches.unwatch_all(conn);
                    reply::ok(&mut conn.out);
                } else {
                    reply::error(&mut conn.out, b"ERR DISCARD without MULTI");
                }
            }
            _ => {
                let Some(multi) = conn.multi.take() else {
                    reply::error(&mut conn.out, b"ERR EXEC without MULTI");
                    return;
                };
                if multi.dirty {
                    self.watches.unwatch_all(conn);
                    reply::error(
                        &mut conn.out,
                        b"EXECABORT Transaction discarded because of previous errors.",
                    );
                    return;
                }
                // Cluster mode: the transaction's keys together hash to one slot; otherwise
                // it is discarded with the error, as Redis discards it.
                if let Some(msg) = self.cluster_transaction_refusal(&multi.queued) {
                    self.watches.unwatch_all(conn);
                    reply::error(&mut conn.out, msg);
                    return;
                }
                if self.watch_failed(conn) {
                    // A watched key changed since WATCH: the transaction does not run.
                    self.watches.unwatch_all(conn);
                    reply::null_array(&mut conn.out, conn.proto);
                    return;
                }
                self.watches.unwatch_all(conn);
                reply::array_len(&mut conn.out, multi.queued.len());
                self.in_exec = true;
                self.time_snapshot_us = Some(crate::commands::unix_micros(now));
                for cmd in &multi.queued {
                    let argv: Vec<&[u8]> = cmd.iter().map(|a| a.as_slice()).collect();
                    // Queued commands were looked up when queued; the table is static.
                    let Some(spec) = engine::lookup(argv[0]) else {
                        errors::unknown_command(&mut conn.out, &argv);
                        continue;
                    };
                    // The user's rules may have changed since the command was queued: they
                    // are checked again, as in Redis (a refusal is this command's reply).
                    if conn.restricted {
                        if let Some(denied) = self.users.check(&conn.user, spec, &argv) {
                            let context = crate::auth::Context::Multi;
                            crate::commands::log_refusal(self, conn, spec, &argv, denied, context);
                            let why = match denied {
                                crate::auth::Denied::Command => {
                                    "no permission to execute the command or subcommand"
                                }
                                crate::auth::Denied::Key(_) => "no permission to touch the specified keys",
                                crate::auth::Denied::Channel(_) => {
                                    "no permission to access one of the channels used as arguments"
                                }
                            };
                            let msg = format!(
                                "NOPERM ACLs rules changed between the moment the transaction was accumulated \
                                 and the EXEC call. This command is no longer allowed for the following reason: {why}"
                            );
                            reply::error(&mut conn.out, msg.as_bytes());
                            continue;
                        }
                    }
                    conn.last_cmd = crate::commands::data_call_name(spec, &argv);
                    // commandstats: each queued command counts on its own, as in Redis.
                    // A queued script shows in MONITOR before the commands it runs, as outside
                    // a transaction (the others show after running, in `after_command`).
                    self.monitor_before(conn, spec, &argv);
                    let (mark, started) = (conn.out.len(), std::time::Instant::now());
                    self.cmd_started = Some(started);
                    self.execute(conn, slot, spec, &argv, now, true);
                    self.cmd_started = None;
                    let took = started.elapsed();
                    let reply = conn.out.get(mark..).unwrap_or_default();
                    self.stats.cmds.record(
                        spec,
                        conn.last_cmd,
                        reply,
                        took,
                        self.introspection.latency_tracking,
                    );
                    conn.commands += 1;
                    if self.hotkeys.tracking() {
                        self.hotkeys.record(spec, &argv, took, reply.len());
                    }
                    self.after_command(conn, spec, &argv, took);
                }
                self.in_exec = false;
                self.time_snapshot_us = None;
                conn.last_cmd = "exec";
            }
        }
    }

    fn apply_reply_mode(&mut self, conn: &mut Conn, mark: usize) {
        match conn.reply_mode {
            ReplyMode::On => {}
            ReplyMode::Off => conn.out.truncate(mark),
            ReplyMode::SkipNext => {
                // This was CLIENT REPLY SKIP itself: drop its reply, and the next one.
                conn.out.truncate(mark);
                conn.reply_mode = ReplyMode::Skipping;
            }
            ReplyMode::Skipping => {
                conn.out.truncate(mark);
                conn.reply_mode = ReplyMode::On;
            }
            ReplyMode::OffAfterThis => conn.reply_mode = ReplyMode::Off,
        }
    }

    /// A client whose unsent output passed its class's hard limit, or stayed past its soft
    /// limit too long (`client-output-buffer-limit`, output_limits.rs), is closed at the end of
    /// the turn, its output dropped: it is not reading, and it must not grow the server without
    /// bound. As in Redis, the first [`OUTPUT_LIMIT_EXEMPT`] bytes do not count (Redis's static
    /// reply buffer, outside its limit): a tiny limit cuts off big replies, not every reply.
    /// Checked, as in Redis, when output is added.
    pub(crate) fn check_output_limit(&mut self, conn: &mut Conn) {
        use crate::output_limits::Class;
        let class = if conn.redis_replica.is_some() {
            Class::Replica
        } else if conn.pubsub.is_some() {
            Class::Pubsub
        } else {
            Class::Normal
        };
        let limit = *self.output_limits.class(class);
        let counted = conn.out_pending().saturating_sub(OUTPUT_LIMIT_EXEMPT) as u64;
        // Under every limit (the usual case): no clock read.
        let under = |l: u64| l == 0 || counted < l;
        if under(limit.hard) && under(limit.soft) {
            conn.obuf_soft_since = None;
            return;
        }
        let now = crate::commands::unix_micros(0) as u64 / 1_000_000;
        if !conn.close_now && crate::output_limits::over(&limit, counted, &mut conn.obuf_soft_since, now) {
            warn!(
                "closing client id={} addr={}: {} bytes of unread output, over the {:?} class's limits (hard {}, soft {} for {} s)",
                conn.id,
                conn.addr,
                conn.out_pending(),
                class,
                limit.hard,
                limit.soft,
                limit.soft_secs
            );
            conn.cut_off();
            self.stats.output_limit_disconnections += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{resp2_len, Lookahead, CHAIN_AHEAD, LOOKAHEAD, LOOKAHEAD_MAX_ARGS};

    /// The window pairs each pipelined request with its key's hash, in order, up to the first
    /// request `peek` does not name; a lone request or a non-multibulk one turns it off.
    #[test]
    fn lookahead_hashes_the_keys_of_a_pipeline_in_order() {
        let ks = store::Keyspace::new();
        let parser = resp::RequestParser::default();
        let mut buf = Vec::new();
        for i in 0..20 {
            buf.extend_from_slice(format!("*3\r\n$3\r\nSET\r\n$4\r\nk:{i:02}\r\n$1\r\nv\r\n").as_bytes());
        }
        buf.extend_from_slice(b"*1\r\n$4\r\nPING\r\nPING\r\n*1\r\n$4\r\nPI");
        let mut ahead = Lookahead::new();
        let mut pos = 0;
        let frame = b"*3\r\n$3\r\nSET\r\n$4\r\nk:00\r\n$1\r\nv\r\n".len();
        ahead.before_request(&parser, &buf, pos, &ks);
        assert_eq!((ahead.len, ahead.next, ahead.end), (LOOKAHEAD, 1, LOOKAHEAD * frame));
        for (i, h) in ahead.hashes.iter().enumerate() {
            assert_eq!(*h, Some(ks.key_hash(format!("k:{i:02}").as_bytes())));
        }
        for _ in 1..LOOKAHEAD {
            pos += frame;
            ahead.before_request(&parser, &buf, pos, &ks);
        }
        // The second window: the four SETs left and the keyless PING, then the inline PING
        // ends it.
        pos += frame;
        ahead.before_request(&parser, &buf, pos, &ks);
        assert_eq!((ahead.len, ahead.next), (5, 1));
        assert_eq!(ahead.hashes[3], Some(ks.key_hash(b"k:19")));
        assert_eq!(ahead.hashes[4], None);
        const { assert!(CHAIN_AHEAD < LOOKAHEAD) };
        // A lone request: no window for the rest of the buffer.
        let lone = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*2\r\n$3\r\nGET";
        let mut ahead = Lookahead::new();
        ahead.before_request(&parser, lone, 0, &ks);
        assert_eq!((ahead.len, ahead.end), (0, lone.len()));
        // Requests of more arguments than LOOKAHEAD_MAX_ARGS are not walked.
        let mut wide = Vec::new();
        for _ in 0..3 {
            let args: Vec<Vec<u8>> = (0..=LOOKAHEAD_MAX_ARGS).map(|i| format!("a{i}").into_bytes()).collect();
            resp::reply::bulk_array(&mut wide, &args);
        }
        let mut ahead = Lookahead::new();
        ahead.before_request(&parser, &wide, 0, &ks);
        assert_eq!(ahead.len, 0);
        // A request the parser is in the middle of (it arrives over several reads) is not
        // peeked at; the window opens after it.
        let mut parser = resp::RequestParser::default();
        let partial = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nva";
        assert_eq!(parser.next(partial), Ok(None));
        assert!(parser.in_request());
        let mut whole = partial.to_vec();
        whole.extend_from_slice(b"lue\r\n");
        let first = whole.len();
        for _ in 0..3 {
            whole.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
        }
        let mut ahead = Lookahead::new();
        ahead.before_request(&parser, &whole, 0, &ks);
        assert_eq!((ahead.len, ahead.end), (0, 0));
        assert_eq!(parser.next(&whole), Ok(Some(first)));
        ahead.before_request(&parser, &whole, first, &ks);
        assert_eq!((ahead.len, ahead.next), (3, 1));
    }

    #[test]
    fn resp2_len_is_the_encoded_size() {
        let args: [&[u8]; 3] = [b"SET", b"key", &[b'v'; 12]];
        let encoded = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$12\r\nvvvvvvvvvvvv\r\n";
        assert_eq!(resp2_len(&args), encoded.len());
        assert_eq!(resp2_len(&[b""]), b"*1\r\n$0\r\n\r\n".len());
    }
}
