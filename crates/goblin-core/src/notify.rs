//! Keyspace notifications (`notify-keyspace-events`): pub/sub messages that say which key an
//! executed command changed and how, on `__keyspace@<db>__:<key>` (message: the event) and
//! `__keyevent@<db>__:<event>` (message: the key), with Redis's classes and event names.
//!
//! Events are derived in one place instead of in every handler. Around each engine command
//! ([`Server::run_engine`]) the server notes where the pending batch stood; afterwards the
//! mutations the command emitted say which keys it changed (a write that changed nothing
//! emits nothing, and so notifies nothing, as in Redis), the engine's expiry log says which
//! keys lazy expiry removed (`expired`, and their `DEL` mutations are not the command's), and
//! the keyspace says which changed keys are gone (`del` after a pop or a removal emptied a
//! collection, or instead of the event for a `*STORE` with an empty result or an expire time in
//! the past). [`command_events`] names the event of each key a command changes, from its name
//! and options (`LMOVE src dst LEFT RIGHT` pops left from `src`, pushes right onto `dst`).
//!
//! Messages are queued while the command runs and delivered after it, through the pub/sub
//! delivery of PUBLISH, so a subscriber's output limit applies to them too.

use crate::conn::Conn;
use crate::server::Server;
use engine::CommandSpec;

pub const GENERIC: u32 = 1 << 0; // g
pub const STRING: u32 = 1 << 1; // $
pub const LIST: u32 = 1 << 2; // l
pub const SET: u32 = 1 << 3; // s
pub const HASH: u32 = 1 << 4; // h
pub const ZSET: u32 = 1 << 5; // z
pub const EXPIRED: u32 = 1 << 6; // x
pub const EVICTED: u32 = 1 << 7; // e
pub const KEYSPACE: u32 = 1 << 8; // K
pub const KEYEVENT: u32 = 1 << 9; // E
pub const STREAM: u32 = 1 << 10; // t
pub const KEY_MISS: u32 = 1 << 11; // m
pub const MODULE: u32 = 1 << 12; // d
pub const NEW: u32 = 1 << 13; // n
pub const ARRAY: u32 = 1 << 14; // a (Redis 8.8 arrays)
/// `A`: every class but key-miss and new (as in Redis).
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE | ARRAY;

/// The classes, in the order CONFIG GET prints them when not all of `A` is on.
const CLASS_CHARS: &[(u32, char)] = &[
    (GENERIC, 'g'),
    (STRING, '$'),
    (LIST, 'l'),
    (SET, 's'),
    (HASH, 'h'),
    (ZSET, 'z'),
    (EXPIRED, 'x'),
    (EVICTED, 'e'),
    (STREAM, 't'),
    (MODULE, 'd'),
    (ARRAY, 'a'),
    (NEW, 'n'),
];

/// Parses a `notify-keyspace-events` value; None for a character that names no class.
pub fn parse_flags(s: &[u8]) -> Option<u32> {
    let mut flags = 0;
    for &c in s {
        flags |= match c {
            b'A' => ALL,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b'm' => KEY_MISS,
            _ => CLASS_CHARS.iter().find(|(_, ch)| *ch as u8 == c)?.0,
        };
    }
    Some(flags)
}

/// The canonical text CONFIG GET answers: `A` or the classes one by one, then K, E, m.
pub fn flags_string(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        s.extend(CLASS_CHARS.iter().filter(|(f, _)| flags & f != 0).map(|(_, c)| c));
    }
    for (f, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & f != 0 {
            s.push(c);
        }
    }
    s
}

/// How an event relates to the key's fate when the command leaves the key missing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum IfGone {
    /// The event stands, then `del` (a pop or removal that emptied the collection).
    ThenDel,
    /// `del` replaces the event (a store with an empty result, an expire time in the past).
    Del,
    /// The event is itself a deletion (DEL, GETDEL ...): nothing more.
    Is,
}

/// One event a command raises on one of its keys.
#[derive(Clone, Copy, Debug)]
struct Event {
    class: u32,
    name: &'static str,
    /// Index of the key in the arguments.
    key: usize,
    gone: IfGone,
    /// Redis raises it whenever the command succeeds on an existing key, changed or not
    /// (LTRIM that kept everything, APPEND of nothing, SETBIT of the bit already there).
    always: bool,
}

fn ev(class: u32, name: &'static str, key: usize, gone: IfGone) -> Event {
    Event { class, name, key, gone, always: false }
}

/// An event Redis raises even when nothing changed (see [`Event::always`]).
fn always(class: u32, name: &'static str, key: usize) -> Event {
    Event { class, name, key, gone: IfGone::ThenDel, always: true }
}

fn has_token(args: &[&[u8]], from: usize, tokens: &[&str]) -> bool {
    args.iter().skip(from).any(|a| tokens.iter().any(|t| a.eq_ignore_ascii_case(t.as_bytes())))
}

/// The events `name` raises on the keys it changed, in Redis's order. Keys the command did
/// not change get none (the caller filters on the mutations).
fn command_events(name: &str, args: &[&[u8]], out: &mut Vec<Event>) {
    use IfGone::*;
    let argc = args.len();
    let one = |class, n| ev(class, n, 1, ThenDel);
    match name {
        // strings
        "set" => {
            out.push(ev(STRING, "set", 1, ThenDel));
            if has_token(args, 3, &["EX", "PX", "EXAT", "PXAT"]) {
                out.push(ev(GENERIC, "expire", 1, ThenDel));
            }
        }
        "setnx" | "getset" => out.push(one(STRING, "set")),
        "setex" | "psetex" => {
            out.push(one(STRING, "set"));
            out.push(one(GENERIC, "expire"));
        }
        "mset" | "msetnx" => out.extend((1..argc).step_by(2).map(|k| ev(STRING, "set", k, ThenDel))),
        "msetex" => {
            // MSETEX numkeys key value [key value ...] [EX ..|PX ..|EXAT ..|PXAT ..|KEEPTTL] ...
            let n = std::str::from_utf8(args[1]).ok().and_then(|t| t.parse::<usize>().ok()).unwrap_or(0);
            let expire = has_token(args, 2 + 2 * n, &["EX", "PX", "EXAT", "PXAT"]);
            for k in (2..2 + 2 * n).step_by(2).filter(|&k| k < argc) {
                out.push(ev(STRING, "set", k, ThenDel));
                if expire {
                    out.push(ev(GENERIC, "expire", k, ThenDel));
                }
            }
        }
        "setrange" => out.push(one(STRING, "setrange")),
        "incr" | "decr" | "incrby" | "decrby" => out.push(one(STRING, "incrby")),
        "incrbyfloat" => out.push(one(STRING, "incrbyfloat")),
        // INCREX: the increment's event, then the expiry's, from its record (see
        // `mutation_events`): `expire` when it carries a deadline (not for ENX on a key that
        // had one), `persist` when it removed a TTL; only `del` when the deadline had passed.
        "increx" => out.push(ev(
            STRING,
            if has_token(args, 2, &["BYFLOAT"]) { "incrbyfloat" } else { "incrby" },
            1,
            Del,
        )),
        "append" => out.push(always(STRING, "append", 1)),
        "setbit" => out.push(always(STRING, "setbit", 1)),
        "bitfield" => out.push(one(STRING, "setbit")),
        "bitop" => out.push(ev(STRING, "set", 2, Del)),
        "pfadd" | "pfmerge" => out.push(ev(STRING, "pfadd", 1, Del)),
        "getdel" | "delex" | "delifeq" => out.push(ev(GENERIC, "del", 1, Is)),
        "getex" => {
            if has_token(args, 2, &["PERSIST"]) {
                out.push(one(GENERIC, "persist"));
            } else if has_token(args, 2, &["EX", "PX", "EXAT", "PXAT"]) {
                out.push(ev(GENERIC, "expire", 1, Del));
            }
        }
        // generic
        "del" | "unlink" => out.extend((1..argc).map(|k| ev(GENERIC, "del", k, Is))),
        "expire" | "pexpire" | "expireat" | "pexpireat" => out.push(ev(GENERIC, "expire", 1, Del)),
        "persist" => out.push(one(GENERIC, "persist")),
        "rename" | "renamenx" => {
            out.push(ev(GENERIC, "rename_from", 1, Is));
            out.push(ev(GENERIC, "rename_to", 2, ThenDel));
        }
        "copy" => out.push(ev(GENERIC, "copy_to", 2, ThenDel)),
        "restore" => out.push(ev(GENERIC, "restore", 1, ThenDel)),
        "sort" => {
            if let Some(i) = args.iter().position(|a| a.eq_ignore_ascii_case(b"STORE")) {
                out.push(ev(LIST, "sortstore", i + 1, Del));
            }
        }
        // lists
        "lpush" | "lpushx" => out.push(one(LIST, "lpush")),
        "rpush" | "rpushx" => out.push(one(LIST, "rpush")),
        "linsert" => out.push(one(LIST, "linsert")),
        "lset" => out.push(one(LIST, "lset")),
        "lrem" => out.push(one(LIST, "lrem")),
        "ltrim" => out.push(always(LIST, "ltrim", 1)),
        "lpop" | "blpop" => out.extend((1..argc.max(2)).map(|k| ev(LIST, "lpop", k, ThenDel))),
        "rpop" | "brpop" => out.extend((1..argc.max(2)).map(|k| ev(LIST, "rpop", k, ThenDel))),
        // The push onto the destination is announced before the pop from the source.
        "rpoplpush" | "brpoplpush" => {
            out.push(ev(LIST, "lpush", 2, ThenDel));
            out.push(ev(LIST, "rpop", 1, ThenDel));
        }
        "lmove" | "blmove" | "lmovem" | "blmovem" if argc >= 5 => {
            let from = if args[3].eq_ignore_ascii_case(b"LEFT") { "lpop" } else { "rpop" };
            let to = if args[4].eq_ignore_ascii_case(b"LEFT") { "lpush" } else { "rpush" };
            out.push(ev(LIST, to, 2, ThenDel));
            out.push(ev(LIST, from, 1, ThenDel));
        }
        "lmpop" | "blmpop" => {
            let first = if name == "blmpop" { 3 } else { 2 };
            let event = if has_token(args, first, &["LEFT"]) { "lpop" } else { "rpop" };
            out.extend((first..argc).map(|k| ev(LIST, event, k, ThenDel)));
        }
        // hashes
        "hset" | "hmset" | "hsetnx" => out.push(one(HASH, "hset")),
        "hdel" | "hgetdel" => out.push(one(HASH, "hdel")),
        "hexpire" | "hpexpire" | "hexpireat" | "hpexpireat" => out.push(one(HASH, "hexpire")),
        "hpersist" => out.push(one(HASH, "hpersist")),
        "hgetex" if args.get(2).is_some_and(|a| a.eq_ignore_ascii_case(b"PERSIST")) => {
            out.push(one(HASH, "hpersist"))
        }
        "hgetex" => out.push(one(HASH, "hexpire")),
        "hsetex" => {
            out.push(one(HASH, "hset"));
            // Options come before FIELDS; what follows it are fields and values.
            let options = args.iter().skip(2).take_while(|a| !a.eq_ignore_ascii_case(b"FIELDS"));
            if options
                .into_iter()
                .any(|a| ["EX", "PX", "EXAT", "PXAT"].iter().any(|t| a.eq_ignore_ascii_case(t.as_bytes())))
            {
                out.push(one(HASH, "hexpire"));
            }
        }
        "hincrby" => out.push(one(HASH, "hincrby")),
        "hincrbyfloat" => out.push(one(HASH, "hincrbyfloat")),
        // sets
        "sadd" => out.push(one(SET, "sadd")),
        "srem" => out.push(one(SET, "srem")),
        "spop" => out.push(one(SET, "spop")),
        "smove" => {
            out.push(ev(SET, "srem", 1, ThenDel));
            out.push(ev(SET, "sadd", 2, ThenDel));
        }
        "sinterstore" | "sunionstore" | "sdiffstore" => {
            let n: &'static str = match name {
                "sinterstore" => "sinterstore",
                "sunionstore" => "sunionstore",
                _ => "sdiffstore",
            };
            out.push(ev(SET, n, 1, Del));
        }
        // sorted sets
        "zadd" => out.push(one(ZSET, if has_token(args, 2, &["INCR"]) { "zincr" } else { "zadd" })),
        "zincrby" => out.push(one(ZSET, "zincr")),
        "zrem" => out.push(one(ZSET, "zrem")),
        "zremrangebyscore" => out.push(one(ZSET, "zremrangebyscore")),
        "zremrangebyrank" => out.push(one(ZSET, "zremrangebyrank")),
        "zremrangebylex" => out.push(one(ZSET, "zremrangebylex")),
        "zunionstore" => out.push(ev(ZSET, "zunionstore", 1, Del)),
        "zinterstore" => out.push(ev(ZSET, "zinterstore", 1, Del)),
        "zdiffstore" => out.push(ev(ZSET, "zdiffstore", 1, Del)),
        "zrangestore" => out.push(ev(ZSET, "zrangestore", 1, Del)),
        "zpopmin" => out.push(one(ZSET, "zpopmin")),
        "zpopmax" => out.push(one(ZSET, "zpopmax")),
        "bzpopmin" => out.extend((1..argc - 1).map(|k| ev(ZSET, "zpopmin", k, ThenDel))),
        "bzpopmax" => out.extend((1..argc - 1).map(|k| ev(ZSET, "zpopmax", k, ThenDel))),
        "zmpop" | "bzmpop" => {
            let first = if name == "bzmpop" { 3 } else { 2 };
            let event = if has_token(args, first, &["MIN"]) { "zpopmin" } else { "zpopmax" };
            out.extend((first..argc).map(|k| ev(ZSET, event, k, ThenDel)));
        }
        "geoadd" => out.push(one(ZSET, "zadd")),
        "geosearchstore" => out.push(ev(ZSET, "geosearchstore", 1, Del)),
        // streams (class `t`). XADD's `xtrim` and the `xgroup-createconsumer` of XREADGROUP,
        // XCLAIM and XAUTOCLAIM depend on what the command did: see [`stream_events`].
        "xadd" => out.push(one(STREAM, "xadd")),
        "xtrim" => out.push(one(STREAM, "xtrim")),
        "xdel" => out.push(one(STREAM, "xdel")),
        "xsetid" => out.push(always(STREAM, "xsetid", 1)),
        "xgroup" if argc >= 3 => {
            let sub = args[1].to_ascii_lowercase();
            match sub.as_slice() {
                b"create" => out.push(ev(STREAM, "xgroup-create", 2, ThenDel)),
                // Redis announces a SETID that moved nothing too.
                b"setid" => out.push(always(STREAM, "xgroup-setid", 2)),
                b"destroy" => out.push(ev(STREAM, "xgroup-destroy", 2, ThenDel)),
                b"createconsumer" => out.push(ev(STREAM, "xgroup-createconsumer", 2, ThenDel)),
                b"delconsumer" => out.push(ev(STREAM, "xgroup-delconsumer", 2, ThenDel)),
                _ => {}
            }
        }
        // arrays (Redis 8.8: class `a`, events named after the commands)
        "arset" => out.push(one(ARRAY, "arset")),
        "armset" => out.push(one(ARRAY, "armset")),
        "ardel" => out.push(one(ARRAY, "ardel")),
        "ardelrange" => out.push(one(ARRAY, "ardelrange")),
        "arinsert" => out.push(one(ARRAY, "arinsert")),
        "arring" => out.push(one(ARRAY, "arring")),
        "arseek" => out.push(one(ARRAY, "arseek")),
        _ => {}
    }
}

/// Events that follow from the command's own mutations rather than its arguments: XADD's trim
/// (`xtrim` after `xadd`, only when it removed entries), the consumers that XREADGROUP, XCLAIM
/// and XAUTOCLAIM created (`xgroup-createconsumer`, one per creation, in order), XDELEX's and
/// XACKDEL's deletions, and INCREX's deadline (`expire` only when its `SET` record has one).
/// The `XGROUP SETID` and `XCLAIM` records those commands emit are their canonical form, not the
/// user's XGROUP SETID: they raise nothing, as in Redis.
fn mutation_events<'m>(name: &str, m: &engine::Mutation<'m>) -> Option<(u32, &'static str, &'m [u8])> {
    if name == "increx" {
        if !m.name().eq_ignore_ascii_case(b"SET") {
            return None;
        }
        if m.argc() == 5 && m.arg(3).eq_ignore_ascii_case(b"PXAT") {
            return Some((GENERIC, "expire", m.arg(1)));
        }
        // A plain SET: PERSIST took a TTL away (on a key without one it is `KEEPTTL`).
        return (m.argc() == 3).then(|| (GENERIC, "persist", m.arg(1)));
    }
    stream_events(name, m).map(|(e, k)| (STREAM, e, k))
}

fn stream_events<'m>(name: &str, m: &engine::Mutation<'m>) -> Option<(&'static str, &'m [u8])> {
    match name {
        "xadd" if m.name().eq_ignore_ascii_case(b"XTRIM") => Some(("xtrim", m.arg(1))),
        // Redis 8.2: `xdel` once, only when entries went (an acknowledgement alone raises
        // nothing, as XACK raises nothing).
        "xdelex" | "xackdel" if m.name().eq_ignore_ascii_case(b"XDEL") => Some(("xdel", m.arg(1))),
        "xreadgroup" | "xclaim" | "xautoclaim"
            if m.name().eq_ignore_ascii_case(b"XGROUP")
                && m.argc() >= 3
                && m.arg(1).eq_ignore_ascii_case(b"CREATECONSUMER") =>
        {
            Some(("xgroup-createconsumer", m.arg(2)))
        }
        _ => None,
    }
}

/// Notification state: the flags, and messages queued until the command that raised them
/// returns.
#[derive(Default)]
pub struct Notifier {
    pub flags: u32,
    /// The database the events being raised happened in (the channel's `@<db>`).
    pub db: u32,
    /// (channel, message), in the order raised.
    pending: Vec<(Vec<u8>, Vec<u8>)>,
    events: Vec<Event>,
}

/// What [`Server::run_engine`] notes before a command, to compare after it.
pub struct Before {
    pending_len: usize,
    misses: u64,
    /// For the `new` event: which of the command's keys existed.
    existed: Vec<bool>,
    /// Someone is subscribed to a channel or a pattern: the events are worth naming.
    deliverable: bool,
}

impl Notifier {
    pub fn enabled(&self) -> bool {
        self.flags & (KEYSPACE | KEYEVENT) != 0 && self.flags & !(KEYSPACE | KEYEVENT) != 0
    }

    fn raise(&mut self, class: u32, event: &str, key: &[u8]) {
        if self.flags & class == 0 {
            return;
        }
        let db = itoa::Buffer::new().format(self.db).as_bytes().to_vec();
        if self.flags & KEYSPACE != 0 {
            let mut ch = b"__keyspace@".to_vec();
            ch.extend_from_slice(&db);
            ch.extend_from_slice(b"__:");
            ch.extend_from_slice(key);
            self.pending.push((ch, event.as_bytes().to_vec()));
        }
        if self.flags & KEYEVENT != 0 {
            let mut ch = b"__keyevent@".to_vec();
            ch.extend_from_slice(&db);
            ch.extend_from_slice(b"__:");
            ch.extend_from_slice(event.as_bytes());
            self.pending.push((ch, key.to_vec()));
        }
    }

    /// An eviction removed `key` of database `db` (raised by the eviction code).
    pub fn evicted(&mut self, db: u32, key: &[u8]) {
        self.db = db;
        self.raise(EVICTED, "evicted", key);
    }
}

/// The argument positions of a command's keys by its table row (first, last, step).
fn key_positions(spec: &CommandSpec, argc: usize) -> impl Iterator<Item = usize> {
    let (first, step) = (spec.first_key as usize, spec.key_step.max(1) as usize);
    let last = if spec.last_key < 0 { argc as i64 + spec.last_key as i64 } else { spec.last_key as i64 };
    let last = last.min(argc as i64 - 1);
    let range = if first == 0 || last < first as i64 { 0..0 } else { first..last as usize + 1 };
    range.step_by(step)
}

impl Server {
    /// Before an engine command: where the batch stands (None when notifications are off).
    #[inline]
    pub(crate) fn notify_before(&mut self, spec: &'static CommandSpec, args: &[&[u8]]) -> Option<Before> {
        if !self.notify.enabled() {
            return None;
        }
        // With no subscriber at all, no event of this command can reach anyone (nobody can
        // subscribe while a command, an EXEC or a script runs): naming them is skipped, and
        // only the engine's expiry logs are emptied after it.
        if self.pubsub.channels_len() == 0 && self.pubsub.patterns_len() == 0 {
            return Some(Before { pending_len: 0, misses: 0, existed: Vec::new(), deliverable: false });
        }
        let existed = if self.notify.flags & NEW != 0 {
            key_positions(spec, args.len()).map(|i| self.engine.ks.contains(args[i])).collect()
        } else {
            Vec::new()
        };
        Some(Before {
            pending_len: self.engine.pending().len(),
            misses: self.engine.stats.keyspace_misses,
            existed,
            deliverable: true,
        })
    }

    /// After an engine command: raises its events (queued until [`Server::deliver_notifications`]).
    pub(crate) fn notify_after(
        &mut self,
        spec: &'static CommandSpec,
        args: &[&[u8]],
        before: Before,
        errored: bool,
    ) {
        if !before.deliverable {
            self.engine.expired_log.clear();
            self.engine.field_expiry_log.clear();
            return;
        }
        self.notify.db = self.engine.db();
        let expired = std::mem::take(&mut self.engine.expired_log);
        for key in &expired {
            self.notify.raise(EXPIRED, "expired", key);
        }
        for (key, emptied) in std::mem::take(&mut self.engine.field_expiry_log) {
            self.notify.raise(HASH, "hexpired", &key);
            // Its last field went: so did the key (before the command saw it).
            if emptied {
                self.notify.raise(GENERIC, "del", &key);
            }
        }
        // The keys the command's own mutations name (expiry DELs excluded, once per key).
        let mut own: Vec<Vec<u8>> = Vec::new();
        let mut extra: Vec<(u32, &'static str, Vec<u8>)> = Vec::new();
        let mut expiry_dels = expired.clone();
        // HEXPIRE and its kin with a time already past delete the fields: Redis then raises
        // `hdel` in place of `hexpire` (when any field went).
        let mut fields_deleted = false;
        for m in self.engine.pending().iter_from(before.pending_len) {
            fields_deleted |= m.name().eq_ignore_ascii_case(b"HDEL");
            if let Some((class, event, key)) = mutation_events(spec.name, &m) {
                extra.push((class, event, key.to_vec()));
            }
            let is_del = m.name().eq_ignore_ascii_case(b"DEL") && m.argc() == 2;
            if is_del {
                if let Some(i) = expiry_dels.iter().position(|k| k.as_slice() == m.arg(1)) {
                    expiry_dels.swap_remove(i);
                    continue;
                }
            }
            own.extend(m.keys().map(<[u8]>::to_vec));
        }
        let name = spec.name;
        // The commands that reach another database raise its event there (Redis's MOVE and
        // COPY ... DB): `move_from` here and `move_to` there, `copy_to` there.
        let target = match name {
            "move" => args.get(2).and_then(|a| engine::util::parse_i64(a)),
            "copy" => engine::util::copy_destination_db(args.iter().copied()),
            _ => None,
        };
        if let Some(target) = target.filter(|&t| t != self.engine.db() as i64) {
            if !own.is_empty() {
                let here = self.engine.db();
                if name == "move" {
                    self.notify.raise(GENERIC, "move_from", args[1]);
                    self.notify.db = target as u32;
                    self.notify.raise(GENERIC, "move_to", args[1]);
                } else {
                    self.notify.db = target as u32;
                    self.notify.raise(GENERIC, "copy_to", args[2]);
                }
                self.notify.db = here;
            }
            return;
        }
        if !own.is_empty() || (!errored && spec.flags.has(engine::Flags::WRITE)) {
            if self.notify.flags & NEW != 0 {
                for (i, pos) in key_positions(spec, args.len()).enumerate() {
                    let key = args[pos];
                    if !before.existed.get(i).copied().unwrap_or(true) && self.engine.ks.contains(key) {
                        self.notify.raise(NEW, "new", key);
                    }
                }
            }
            let mut events = std::mem::take(&mut self.notify.events);
            events.clear();
            command_events(name, args, &mut events);
            let mut deleted: Vec<&[u8]> = Vec::new();
            for e in &events {
                let Some(&key) = args.get(e.key) else { continue };
                let changed = own.iter().any(|k| k.as_slice() == key);
                if !changed && (!e.always || errored || !self.engine.ks.contains(key)) {
                    continue;
                }
                let gone = !self.engine.ks.contains(key);
                match (gone, e.gone) {
                    (true, IfGone::Del) => {
                        if !deleted.contains(&key) {
                            self.notify.raise(GENERIC, "del", key);
                            deleted.push(key);
                        }
                    }
                    _ if fields_deleted
                        && matches!(name, "hexpire" | "hpexpire" | "hexpireat" | "hpexpireat") =>
                    {
                        self.notify.raise(e.class, "hdel", key)
                    }
                    _ => self.notify.raise(e.class, e.name, key),
                }
                if gone && e.gone == IfGone::Is {
                    deleted.push(key);
                }
                // Emptied by the command: `del` right after the event that emptied it.
                if gone && e.gone == IfGone::ThenDel && !deleted.contains(&key) {
                    self.notify.raise(GENERIC, "del", key);
                    deleted.push(key);
                }
            }
            self.notify.events = events;
            for (class, event, key) in &extra {
                self.notify.raise(*class, event, key);
            }
        }
        if self.notify.flags & KEY_MISS != 0 && self.engine.stats.keyspace_misses > before.misses {
            for pos in key_positions(spec, args.len()) {
                if !self.engine.ks.contains(args[pos]) {
                    self.notify.raise(KEY_MISS, "keymiss", args[pos]);
                }
            }
        }
    }

    /// Keys active expiry removed from the selected database: `expired` events.
    pub(crate) fn notify_active_expiry(&mut self) {
        self.notify.db = self.engine.db();
        for key in std::mem::take(&mut self.engine.expired_log) {
            self.notify.raise(EXPIRED, "expired", &key);
        }
        for (key, emptied) in std::mem::take(&mut self.engine.field_expiry_log) {
            self.notify.raise(HASH, "hexpired", &key);
            // Its last field went: so did the key.
            if emptied {
                self.notify.raise(GENERIC, "del", &key);
            }
        }
    }

    /// Publishes the queued notifications. `current` is the connection whose command raised
    /// them, out of its slot while it runs (it may be a RESP3 subscriber itself).
    pub(crate) fn deliver_notifications(&mut self, current: Option<(&mut Conn, usize)>) {
        if self.notify.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.notify.pending);
        match current {
            Some((conn, slot)) => {
                for (ch, msg) in &pending {
                    self.publish(conn, slot, false, ch, msg);
                }
            }
            None => {
                for (ch, msg) in &pending {
                    self.publish_detached(ch, msg);
                }
            }
        }
    }

    /// Applies a new `notify-keyspace-events` value: the engine logs expiries only when the
    /// `x` class is on.
    pub(crate) fn set_notify_flags(&mut self, flags: u32) {
        self.notify.flags = flags;
        self.engine.log_expired = self.notify.enabled() && flags & EXPIRED != 0;
        self.engine.expired_log.clear();
        self.engine.log_field_expiry = self.notify.enabled() && flags & HASH != 0;
        self.engine.field_expiry_log.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_print_like_redis() {
        let cases = [
            ("KEA", "AKE"),
            ("Kg", "gK"),
            ("Ex", "xE"),
            ("K$lshz", "$lshzK"),
            ("Km", "Km"),
            ("KEn", "nKE"),
            ("AKEmn", "AKEm"),
            ("Kgxe$lshztda", "AK"),
            ("", ""),
        ];
        for (given, printed) in cases {
            assert_eq!(flags_string(parse_flags(given.as_bytes()).unwrap()), printed, "{given}");
        }
        assert_eq!(parse_flags(b"Eq"), None);
    }

    #[test]
    fn lmove_names_its_directions() {
        let mut out = Vec::new();
        command_events("lmove", &[b"lmove", b"a", b"b", b"left", b"RIGHT"], &mut out);
        let got: Vec<(&str, usize)> = out.iter().map(|e| (e.name, e.key)).collect();
        assert_eq!(got, [("rpush", 2), ("lpop", 1)], "the push is announced first, as in Redis");
    }
}
