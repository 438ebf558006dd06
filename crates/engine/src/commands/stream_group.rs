//! Consumer-group commands and stream introspection: XGROUP (CREATE, SETID, DESTROY,
//! CREATECONSUMER, DELCONSUMER, HELP), XACK, XPENDING, XCLAIM, XAUTOCLAIM and XINFO (STREAM
//! [FULL], GROUPS, CONSUMERS, HELP), with Redis 7.0's replies and error texts.
//!
//! Canonical mutations (keyless, like every stream record: their effect depends on order).
//! Each replays to the exact post-state on the same prior state; nothing is emitted for a
//! command that changed nothing:
//! - `XGROUP CREATE key group <id> [MKSTREAM] ENTRIESREAD <n>`: `$` resolved to the ID it
//!   meant, the read counter always explicit, MKSTREAM only when the command created the key;
//! - `XGROUP SETID key group <id> ENTRIESREAD <n>` (also for XCLAIM's LASTID when it moved
//!   the group without claiming anything);
//! - `XGROUP DESTROY|CREATECONSUMER|DELCONSUMER ...` as given, when they changed something;
//! - `XACK key group <id>...` with the IDs actually acknowledged, and one `XACK key group
//!   <id>` per pending entry XCLAIM or XAUTOCLAIM dropped because its stream entry is gone;
//! - per entry XCLAIM or XAUTOCLAIM claimed: `XCLAIM key group consumer 0 <id> TIME <ms>
//!   RETRYCOUNT <n> FORCE JUSTID LASTID <group last id>` (explicit time and count: a replica
//!   keeps the origin's idle times), preceded by `XGROUP CREATECONSUMER` when the claim
//!   created the consumer.
//!
//! Replay rules (`Ctx::replaying`): XCLAIM keeps TIME as given (outside replay Redis clamps a
//! future or negative time to now), and with FORCE it creates the pending entry even when the
//! stream entry is missing (a record stream rebuilt from a snapshot may name an entry deleted
//! since); outside replay it keeps Redis's rule (a missing entry is never claimed).
//!
//! Consumers' seen times move on reads here and there (they are not data: see `PlainStream`),
//! so no record carries them.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::commands::stream::{look, parse_id, reply_entry, reply_id, stream_mut, Look};
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{eq_ic, parse_i64};
use resp::{reply, Proto};
use store::types::stream::{ConsumerGroup, ENTRIES_READ_UNKNOWN};
use store::{Millis, Stream, StreamId, Value};

const R: u32 = Flags::READONLY;
const WF: u32 = Flags::WRITE | Flags::FAST;
const W: u32 = Flags::WRITE;
const K1: (i32, i32, i32) = (1, 1, 1);
/// Container commands name their key after the subcommand.
const K2: (i32, i32, i32) = (2, 2, 1);
const G: &str = "stream";

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec("xgroup", -2, W, K2, G, "A container for consumer groups commands.", Handler::Data(xgroup)),
    spec("xinfo", -2, R, K2, G, "A container for stream introspection commands.", Handler::Data(xinfo)),
    spec("xack", -4, WF, K1, G, "Returns the number of messages that were successfully acknowledged by the consumer group member of a stream.", Handler::Data(xack)),
    spec("xpending", -3, R, K1, G, "Returns the information and entries from a stream consumer group's pending entries list.", Handler::Data(xpending)),
    spec("xclaim", -6, WF, K1, G, "Changes, or acquires, ownership of a message in a consumer group, as if the message was delivered a consumer group member.", Handler::Data(xclaim)),
    spec("xautoclaim", -6, WF, K1, G, "Changes, or acquires, ownership of messages in a consumer group, as if the messages were delivered to as consumer group member.", Handler::Data(xautoclaim)),
];

/// A mutation being collected (emitted in order once the command's borrows end).
type Mut = Vec<Vec<u8>>;

fn lossy(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

/// `NOGROUP No such key '<key>' or consumer group '<group>'` (XPENDING, XCLAIM, XAUTOCLAIM).
fn no_key_or_group(out: &mut Vec<u8>, key: &[u8], group: &[u8]) {
    let msg = format!("NOGROUP No such key '{}' or consumer group '{}'", lossy(key), lossy(group));
    reply::error(out, msg.as_bytes());
}

/// `NOGROUP No such consumer group '<group>' for key name '<key>'` (XGROUP, XINFO).
fn no_group_for_key(out: &mut Vec<u8>, key: &[u8], group: &[u8]) {
    let msg = format!("NOGROUP No such consumer group '{}' for key name '{}'", lossy(group), lossy(key));
    reply::error(out, msg.as_bytes());
}

/// Redis's reply to a known subcommand with arguments it cannot take.
fn subcommand_syntax(out: &mut Vec<u8>, cmd: &[u8], sub: &[u8]) {
    let sub = &sub[..sub.len().min(128)];
    let msg = format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        lossy(sub),
        lossy(cmd).to_ascii_uppercase()
    );
    reply::error(out, msg.as_bytes());
}

/// Finds the subcommand in `subs` (name, Redis arity) and checks the arity as Redis checks a
/// subcommand's own table row; replies the error and returns None when it fails.
fn subcommand(
    out: &mut Vec<u8>,
    cmd: &'static str,
    subs: &[(&'static str, i32)],
    args: &[&[u8]],
) -> Option<&'static str> {
    let sub = args[1];
    let Some(&(name, arity)) = subs.iter().find(|(n, _)| eq_ic(sub, n.as_bytes())) else {
        errors::unknown_subcommand(out, cmd.as_bytes(), sub);
        return None;
    };
    let n = args.len() as i32;
    if (arity >= 0 && n != arity) || (arity < 0 && n < -arity) {
        errors::wrong_arity(out, format!("{cmd}|{name}").as_bytes());
        return None;
    }
    Some(name)
}

fn help(out: &mut Vec<u8>, cmd: &str, lines: &[&str]) {
    reply::array_len(out, lines.len() + 3);
    reply::simple(out, format!("{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:").as_bytes());
    for l in lines {
        reply::simple(out, l.as_bytes());
    }
    reply::simple(out, b"HELP");
    reply::simple(out, b"    Print this help.");
}

/// A range bound as XPENDING and XAUTOCLAIM take it: `-`, `+`, `ms[-seq]`, or `(`id for an
/// exclusive one (made inclusive here; the error names which end could not move).
fn parse_interval(a: &[u8], missing_seq: u64, start: bool) -> Result<StreamId, &'static [u8]> {
    if a.len() > 1 && a[0] == b'(' {
        let id = parse_id(&a[1..], missing_seq, true)?;
        if start {
            id.next().ok_or(b"ERR invalid start ID for the interval".as_slice())
        } else {
            id.prev().ok_or(b"ERR invalid end ID for the interval".as_slice())
        }
    } else {
        parse_id(a, missing_seq, false)
    }
}

fn id_bytes(id: StreamId) -> Vec<u8> {
    id.to_bytes()
}

fn int_bytes(n: i64) -> Vec<u8> {
    itoa::Buffer::new().format(n).as_bytes().to_vec()
}

/// A group's read counter as XGROUP CREATE and SETID set it: never more than the stream has
/// ever added (Redis 8; a larger one would make the lag negative). Not applied to a replayed
/// record, which states the counter its writer kept: a group positioned past entries it never
/// read (SETID beyond the last entry) then counts on past the stream's total, in Redis too,
/// and its XREADGROUP's record must bring a replica to that same counter.
fn clamp_entries_read(entries_read: i64, entries_added: u64) -> i64 {
    if entries_read == ENTRIES_READ_UNKNOWN {
        return entries_read;
    }
    entries_read.min(i64::try_from(entries_added).unwrap_or(i64::MAX))
}

/// The group's lag as XINFO reports it (Redis's `streamReplyWithCGLag`), None when unknown.
fn group_lag(s: &Stream, g: &ConsumerGroup) -> Option<i64> {
    let added = s.entries_added() as i64;
    if added == 0 || s.is_empty() {
        return Some(0);
    }
    // The group and every deletion are behind the first entry: all of it is still to read.
    let first = s.first_id().unwrap_or(StreamId::MIN);
    if g.last_id < first && s.max_deleted_id() < first {
        return Some(s.len() as i64);
    }
    if g.entries_read != ENTRIES_READ_UNKNOWN && !s.has_tombstones_from(g.last_id) {
        return Some(added - g.entries_read);
    }
    match s.estimate_entries_read(g.last_id) {
        ENTRIES_READ_UNKNOWN => None,
        read => Some(added - read),
    }
}

fn reply_opt_int(out: &mut Vec<u8>, proto: Proto, v: Option<i64>) {
    match v {
        Some(n) => reply::integer(out, n),
        None => reply::null_bulk(out, proto),
    }
}

// ---------------------------------------------------------------------------------------
// XGROUP

const XGROUP_SUBS: &[(&str, i32)] =
    &[("create", -5), ("setid", -5), ("destroy", 4), ("createconsumer", 5), ("delconsumer", 5), ("help", 2)];

/// XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n] | SETID key group id|$ [ENTRIESREAD
/// n] | DESTROY key group | CREATECONSUMER key group consumer | DELCONSUMER key group consumer
/// | HELP
fn xgroup(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(sub) = subcommand(out, "xgroup", XGROUP_SUBS, args) else { return };
    if sub == "help" {
        return help(
            out,
            "XGROUP",
            &[
                "CREATE <key> <groupname> <id|$> [option]",
                "    Create a new consumer group. Options are:",
                "    * MKSTREAM",
                "      Create the empty stream if it does not exist.",
                "    * ENTRIESREAD entries_read",
                "      Set the group's entries_read counter (internal use).",
                "CREATECONSUMER <key> <groupname> <consumer>",
                "    Create a new consumer in the specified group.",
                "DELCONSUMER <key> <groupname> <consumer>",
                "    Remove the specified consumer.",
                "DESTROY <key> <groupname>",
                "    Remove the specified group.",
                "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
                "    Set the current group ID and entries_read counter.",
            ],
        );
    }
    // Options first (CREATE and SETID take some; anything more is a syntax error), as Redis
    // parses them before looking at the key.
    let mut mkstream = false;
    let mut entries_read = ENTRIES_READ_UNKNOWN;
    let mut i = 5;
    while i < args.len() {
        if sub == "create" && eq_ic(args[i], b"mkstream") {
            mkstream = true;
            i += 1;
        } else if (sub == "create" || sub == "setid") && eq_ic(args[i], b"entriesread") && i + 1 < args.len()
        {
            let Some(n) = parse_i64(args[i + 1]) else { return reply::error(out, errors::NOT_INTEGER) };
            if n < 0 && n != ENTRIES_READ_UNKNOWN {
                return reply::error(out, b"ERR value for ENTRIESREAD must be positive or -1");
            }
            entries_read = n;
            i += 2;
        } else {
            return subcommand_syntax(out, args[0], args[1]);
        }
    }
    let (key, group) = (args[2], args[3]);
    let (now, replaying) = (c.now, c.replaying);
    let s = match stream_mut(c, key) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(s) => s,
    };
    // CREATE takes at most three options' worth of arguments (Redis checks after the key).
    let too_many = sub == "create" && args.len() > 8;
    let Some(s) = s else {
        if !mkstream {
            return reply::error(
                out,
                b"ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
            );
        }
        if too_many {
            return subcommand_syntax(out, args[0], args[1]);
        }
        // CREATE ... MKSTREAM on a missing key: parse the ID before creating anything.
        let id = if args[4] == b"$" {
            StreamId::MIN
        } else {
            match parse_id(args[4], 0, true) {
                Ok(id) => id,
                Err(e) => return reply::error(out, e),
            }
        };
        // A new stream has added nothing: a group cannot have read more (Redis 8 clamps).
        let entries_read = if replaying { entries_read } else { clamp_entries_read(entries_read, 0) };
        let mut fresh = Stream::new();
        fresh.create_group(group, id, entries_read);
        c.ks.insert(key, Value::Stream(Box::new(fresh)), None);
        reply::ok(out);
        let (idb, erb) = (id_bytes(id), int_bytes(entries_read));
        return c.emit(&[b"XGROUP", b"CREATE", key, group, &idb, b"MKSTREAM", b"ENTRIESREAD", &erb]);
    };
    let entries_read =
        if replaying { entries_read } else { clamp_entries_read(entries_read, s.entries_added()) };
    if s.group(group).is_none() && matches!(sub, "setid" | "createconsumer" | "delconsumer") {
        return no_group_for_key(out, key, group);
    }
    match sub {
        "create" => {
            if too_many {
                return subcommand_syntax(out, args[0], args[1]);
            }
            let id = if args[4] == b"$" {
                s.last_id()
            } else {
                match parse_id(args[4], 0, true) {
                    Ok(id) => id,
                    Err(e) => return reply::error(out, e),
                }
            };
            if !s.create_group(group, id, entries_read) {
                return reply::error(out, b"BUSYGROUP Consumer Group name already exists");
            }
            reply::ok(out);
            let (idb, erb) = (id_bytes(id), int_bytes(entries_read));
            c.emit(&[b"XGROUP", b"CREATE", key, group, &idb, b"ENTRIESREAD", &erb]);
        }
        "setid" => {
            if args.len() != 5 && args.len() != 7 {
                return subcommand_syntax(out, args[0], args[1]);
            }
            let id = if args[4] == b"$" {
                s.last_id()
            } else {
                match parse_id(args[4], 0, false) {
                    Ok(id) => id,
                    Err(e) => return reply::error(out, e),
                }
            };
            let g = s.group_mut(group).expect("checked above");
            let changed = g.last_id != id || g.entries_read != entries_read;
            g.last_id = id;
            g.entries_read = entries_read;
            reply::ok(out);
            if changed {
                let (idb, erb) = (id_bytes(id), int_bytes(entries_read));
                c.emit(&[b"XGROUP", b"SETID", key, group, &idb, b"ENTRIESREAD", &erb]);
            }
        }
        "destroy" => {
            if s.destroy_group(group) {
                reply::integer(out, 1);
                c.emit(&[b"XGROUP", b"DESTROY", key, group]);
                // Consumers blocked on the group wake to find it gone (NOGROUP).
                c.signal_ready(key);
            } else {
                reply::integer(out, 0);
            }
        }
        "createconsumer" => {
            let g = s.group_mut(group).expect("checked above");
            let created = g.create_consumer(args[4], now);
            reply::integer(out, created as i64);
            if created {
                c.emit(&[b"XGROUP", b"CREATECONSUMER", key, group, args[4]]);
            }
        }
        "delconsumer" => {
            let g = s.group_mut(group).expect("checked above");
            match g.delete_consumer(args[4]) {
                Some(pending) => {
                    reply::integer(out, pending as i64);
                    c.emit(&[b"XGROUP", b"DELCONSUMER", key, group, args[4]]);
                }
                None => reply::integer(out, 0),
            }
        }
        _ => unreachable!("every subcommand is handled"),
    }
}

// ---------------------------------------------------------------------------------------
// XACK

/// XACK key group id [id ...]
fn xack(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (key, group) = (args[1], args[2]);
    // A missing key or group acknowledges nothing, before the IDs are even parsed (Redis).
    match look(c, key) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Missing => return reply::integer(out, 0),
        Look::Stream(s) if s.group(group).is_none() => return reply::integer(out, 0),
        Look::Stream(_) => {}
    }
    let mut ids = Vec::with_capacity(args.len() - 3);
    for a in &args[3..] {
        match parse_id(a, 0, true) {
            Ok(id) => ids.push(id),
            Err(e) => return reply::error(out, e),
        }
    }
    let Ok(Some(s)) = stream_mut(c, key) else { unreachable!("looked up above") };
    let g = s.group_mut(group).expect("looked up above");
    let acked: Vec<StreamId> = ids.into_iter().filter(|id| g.ack(*id)).collect();
    reply::integer(out, acked.len() as i64);
    if !acked.is_empty() {
        let mut m: Mut = vec![b"XACK".to_vec(), key.to_vec(), group.to_vec()];
        m.extend(acked.iter().map(|id| id_bytes(*id)));
        c.emit_all(&[m]);
    }
}

// ---------------------------------------------------------------------------------------
// XPENDING

/// XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
fn xpending(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let argc = args.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        return reply::error(out, errors::SYNTAX);
    }
    let (key, group) = (args[1], args[2]);
    let mut range: Option<(StreamId, StreamId, i64, Option<&[u8]>)> = None;
    let mut minidle: i64 = 0;
    if argc >= 6 {
        let mut at = 3;
        if eq_ic(args[3], b"idle") {
            let Some(n) = parse_i64(args[4]) else { return reply::error(out, errors::NOT_INTEGER) };
            minidle = n;
            if argc < 8 {
                return reply::error(out, errors::SYNTAX);
            }
            at += 2;
        }
        let Some(count) = parse_i64(args[at + 2]) else { return reply::error(out, errors::NOT_INTEGER) };
        let start = match parse_interval(args[at], 0, true) {
            Ok(id) => id,
            Err(e) => return reply::error(out, e),
        };
        let end = match parse_interval(args[at + 1], u64::MAX, false) {
            Ok(id) => id,
            Err(e) => return reply::error(out, e),
        };
        range = Some((start, end, count.max(0), args.get(at + 3).copied()));
    }
    let (now, proto) = (c.now, c.proto);
    let s = match look(c, key) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Missing => return no_key_or_group(out, key, group),
        Look::Stream(s) => s,
    };
    let Some(g) = s.group(group) else { return no_key_or_group(out, key, group) };
    let Some((start, end, mut count, consumer)) = range else {
        // The summary: how many, the lowest and highest ID, and who holds how many.
        reply::array_len(out, 4);
        let pel = g.pel();
        reply::integer(out, pel.len() as i64);
        match (pel.keys().next(), pel.keys().next_back()) {
            (Some(lo), Some(hi)) => {
                reply_id(out, *lo);
                reply_id(out, *hi);
                let holders: Vec<_> = g.consumers().values().filter(|c| !c.pending().is_empty()).collect();
                reply::array_len(out, holders.len());
                for h in holders {
                    reply::array_len(out, 2);
                    reply::bulk(out, h.name());
                    reply::bulk_int(out, h.pending().len() as i64);
                }
            }
            _ => {
                reply::null_bulk(out, proto);
                reply::null_bulk(out, proto);
                reply::null_array(out, proto);
            }
        }
        return;
    };
    let ids: Box<dyn Iterator<Item = StreamId>> = match consumer {
        Some(name) => match g.consumer(name) {
            Some(cons) if start <= end => Box::new(cons.pending().range(start..=end).copied()),
            Some(_) => Box::new(std::iter::empty()),
            // A consumer that does not exist has nothing pending.
            None => return reply::array_len(out, 0),
        },
        None if start <= end => Box::new(g.pel().range(start..=end).map(|(id, _)| *id)),
        None => Box::new(std::iter::empty()),
    };
    let marker = reply::deferred_array_len(out);
    let mut n = 0;
    for id in ids {
        if count == 0 {
            break;
        }
        let Some(p) = g.pel().get(&id) else { continue };
        if minidle != 0 && now.saturating_sub(p.delivery_time) < minidle {
            continue;
        }
        n += 1;
        count -= 1;
        reply::array_len(out, 4);
        reply_id(out, id);
        reply::bulk(out, p.consumer());
        reply::integer(out, now.saturating_sub(p.delivery_time).max(0));
        reply::integer(out, p.delivery_count as i64);
    }
    reply::finish_deferred_len(out, marker, n);
}

// ---------------------------------------------------------------------------------------
// XCLAIM and XAUTOCLAIM

/// The canonical record of one claim: the entry's whole PEL state, explicit.
fn claim_record(key: &[u8], group: &[u8], consumer: &[u8], id: StreamId, g: &ConsumerGroup) -> Mut {
    let p = g.pel().get(&id).expect("just claimed");
    let mut b = itoa::Buffer::new();
    let count = b.format(p.delivery_count).as_bytes().to_vec();
    vec![
        b"XCLAIM".to_vec(),
        key.to_vec(),
        group.to_vec(),
        consumer.to_vec(),
        b"0".to_vec(),
        id_bytes(id),
        b"TIME".to_vec(),
        int_bytes(p.delivery_time),
        b"RETRYCOUNT".to_vec(),
        count,
        b"FORCE".to_vec(),
        b"JUSTID".to_vec(),
        b"LASTID".to_vec(),
        id_bytes(g.last_id),
    ]
}

fn ack_record(key: &[u8], group: &[u8], id: StreamId) -> Mut {
    vec![b"XACK".to_vec(), key.to_vec(), group.to_vec(), id_bytes(id)]
}

/// XCLAIM and XAUTOCLAIM, claiming or not: as Redis 7.4+, the consumer is created (its
/// creation recorded) and marked seen before anything is claimed.
fn seen(g: &mut ConsumerGroup, key: &[u8], group: &[u8], consumer: &[u8], now: Millis, muts: &mut Vec<Mut>) {
    if g.create_consumer(consumer, now) {
        muts.push(vec![
            b"XGROUP".to_vec(),
            b"CREATECONSUMER".to_vec(),
            key.to_vec(),
            group.to_vec(),
            consumer.to_vec(),
        ]);
    }
    if let Some(cons) = g.consumer_mut(consumer) {
        cons.seen_time = now;
    }
}

/// Makes sure `consumer` exists before it claims (recording its creation) and refreshes its
/// seen and active times.
fn claimer(
    g: &mut ConsumerGroup,
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    now: Millis,
    muts: &mut Vec<Mut>,
) {
    seen(g, key, group, consumer, now, muts);
    if let Some(cons) = g.consumer_mut(consumer) {
        cons.active_time = now;
    }
}

/// Replies a claimed entry: its ID alone (JUSTID) or the entry. An entry that is missing can
/// only be one a replayed FORCE claim took over; it answers its ID and a null.
fn reply_claimed(out: &mut Vec<u8>, proto: Proto, s: &Stream, id: StreamId, justid: bool) {
    if justid {
        return reply_id(out, id);
    }
    match s.get(id) {
        Some(fields) => reply_entry(out, id, &fields),
        None => {
            reply::array_len(out, 2);
            reply_id(out, id);
            reply::null_array(out, proto);
        }
    }
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-ms]
/// [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID id]
fn xclaim(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (key, group, consumer) = (args[1], args[2], args[3]);
    match look(c, key) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Stream(s) if s.group(group).is_some() => {}
        _ => return no_key_or_group(out, key, group),
    }
    let Some(minidle) = parse_i64(args[4]) else {
        return reply::error(out, b"ERR Invalid min-idle-time argument for XCLAIM");
    };
    let minidle = minidle.max(0);
    // IDs run until the first argument that is not one; options follow.
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match parse_id(args[j], 0, true) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = c.now;
    let (mut force, mut justid) = (false, false);
    let mut delivery: Option<Millis> = None;
    let mut retrycount: Option<i64> = None;
    let mut lastid = StreamId::MIN;
    while j < args.len() {
        let more = j + 1 < args.len();
        let opt = args[j];
        if eq_ic(opt, b"force") {
            force = true;
        } else if eq_ic(opt, b"justid") {
            justid = true;
        } else if eq_ic(opt, b"idle") && more {
            j += 1;
            let Some(n) = parse_i64(args[j]) else {
                return reply::error(out, b"ERR Invalid IDLE option argument for XCLAIM");
            };
            delivery = Some(now.saturating_sub(n));
        } else if eq_ic(opt, b"time") && more {
            j += 1;
            let Some(n) = parse_i64(args[j]) else {
                return reply::error(out, b"ERR Invalid TIME option argument for XCLAIM");
            };
            delivery = Some(n);
        } else if eq_ic(opt, b"retrycount") && more {
            j += 1;
            let Some(n) = parse_i64(args[j]) else {
                return reply::error(out, b"ERR Invalid RETRYCOUNT option argument for XCLAIM");
            };
            retrycount = Some(n);
        } else if eq_ic(opt, b"lastid") && more {
            j += 1;
            match parse_id(args[j], 0, true) {
                Ok(id) => lastid = id,
                Err(e) => return reply::error(out, e),
            }
        } else {
            let msg = format!("ERR Unrecognized XCLAIM option '{}'", lossy(opt));
            return reply::error(out, msg.as_bytes());
        }
        j += 1;
    }
    // A time from the client's clock may be off: Redis takes now for one in the future or
    // before the epoch. A replayed record's time is the origin's and stands as it is.
    let delivery = match delivery {
        Some(t) if c.replaying => t,
        Some(t) if t < 0 || t > now => now,
        Some(t) => t,
        None => now,
    };
    let (replaying, proto) = (c.replaying, c.proto);
    let Ok(Some(s)) = stream_mut(c, key) else { unreachable!("looked up above") };
    let mut muts: Vec<Mut> = Vec::new();
    let g = s.group_mut(group).expect("looked up above");
    seen(g, key, group, consumer, now, &mut muts);
    let moved = lastid > g.last_id;
    if moved {
        g.last_id = lastid;
    }
    let mut claimed_any = false;
    let marker = reply::deferred_array_len(out);
    let mut n = 0;
    for id in ids {
        let exists = s.contains(id);
        let g = s.group_mut(group).expect("looked up above");
        let pending = g.pel().get(&id).map(|p| p.delivery_time);
        if !exists && (!replaying || !force) {
            // Redis drops a pending entry whose stream entry is gone.
            if pending.is_some() {
                g.ack(id);
                muts.push(ack_record(key, group, id));
            }
            continue;
        }
        let count = match pending {
            None if !force => continue,
            // A FORCE-created entry starts as delivered once, and is never too fresh.
            None => 1,
            Some(t) => {
                if minidle > 0 && now.saturating_sub(t) < minidle {
                    continue;
                }
                g.pel()[&id].delivery_count
            }
        };
        claimer(g, key, group, consumer, now, &mut muts);
        let count = match retrycount {
            Some(r) if r >= 0 => r as u64,
            _ if !justid => count.saturating_add(1),
            _ => count,
        };
        g.set_pending(id, consumer, delivery, count);
        muts.push(claim_record(key, group, consumer, id, g));
        claimed_any = true;
        reply_claimed(out, proto, s, id, justid);
        n += 1;
    }
    reply::finish_deferred_len(out, marker, n);
    if moved && !claimed_any {
        let g = s.group(group).expect("looked up above");
        muts.push(vec![
            b"XGROUP".to_vec(),
            b"SETID".to_vec(),
            key.to_vec(),
            group.to_vec(),
            id_bytes(g.last_id),
            b"ENTRIESREAD".to_vec(),
            int_bytes(g.entries_read),
        ]);
    }
    c.emit_all(&muts);
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
fn xautoclaim(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (key, group, consumer) = (args[1], args[2], args[3]);
    let Some(minidle) = parse_i64(args[4]) else {
        return reply::error(out, b"ERR Invalid min-idle-time argument for XAUTOCLAIM");
    };
    let minidle = minidle.max(0);
    let start = match parse_interval(args[5], 0, true) {
        Ok(id) => id,
        Err(e) => return reply::error(out, e),
    };
    const ATTEMPTS_FACTOR: i64 = 10;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = j + 1 < args.len();
        if eq_ic(args[j], b"count") && more {
            match parse_i64(args[j + 1]) {
                Some(n) if (1..=i64::MAX / 16).contains(&n) => count = n,
                _ => return reply::error(out, b"ERR COUNT must be > 0"),
            }
            j += 1;
        } else if eq_ic(args[j], b"justid") {
            justid = true;
        } else {
            return reply::error(out, errors::SYNTAX);
        }
        j += 1;
    }
    match look(c, key) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Stream(s) if s.group(group).is_some() => {}
        _ => return no_key_or_group(out, key, group),
    }
    let (now, proto) = (c.now, c.proto);
    let Ok(Some(s)) = stream_mut(c, key) else { unreachable!("looked up above") };
    let mut muts: Vec<Mut> = Vec::new();
    seen(s.group_mut(group).expect("looked up above"), key, group, consumer, now, &mut muts);
    let mut attempts = count.saturating_mul(ATTEMPTS_FACTOR);
    let mut deleted: Vec<StreamId> = Vec::new();
    let mut claimed: Vec<StreamId> = Vec::new();
    // The PEL is walked by ID from `start`; `after` is the last ID examined.
    let mut cursor = start;
    let mut after: Option<StreamId> = None;
    let mut reply_body = Vec::new();
    loop {
        if attempts == 0 || count == 0 {
            break;
        }
        attempts -= 1;
        let next = s
            .group(group)
            .expect("looked up above")
            .pel()
            .range(cursor..)
            .next()
            .map(|(id, p)| (*id, p.delivery_time));
        let Some((id, t)) = next else {
            after = None;
            break;
        };
        after = Some(id);
        cursor = match id.next() {
            Some(n) => n,
            None => StreamId::MAX,
        };
        let exists = s.contains(id);
        let g = s.group_mut(group).expect("looked up above");
        if !exists {
            g.ack(id);
            muts.push(ack_record(key, group, id));
            deleted.push(id);
            count -= 1;
        } else if minidle > 0 && now.saturating_sub(t) < minidle {
            // Too fresh: skipped, still an attempt.
        } else {
            claimer(g, key, group, consumer, now, &mut muts);
            let dc = g.pel()[&id].delivery_count;
            g.set_pending(id, consumer, now, if justid { dc } else { dc.saturating_add(1) });
            muts.push(claim_record(key, group, consumer, id, g));
            claimed.push(id);
            reply_claimed(&mut reply_body, proto, s, id, justid);
            count -= 1;
        }
        if id == StreamId::MAX {
            // Nothing can follow the highest ID.
            after = None;
            break;
        }
    }
    // The cursor for the next call: the first pending ID after the last one examined, 0-0
    // when the walk reached the end.
    let next_cursor = after
        .and_then(|a| a.next())
        .and_then(|from| s.group(group).and_then(|g| g.pel().range(from..).next().map(|(id, _)| *id)))
        .unwrap_or(StreamId::MIN);
    reply::array_len(out, 3);
    reply_id(out, next_cursor);
    reply::array_len(out, claimed.len());
    out.extend_from_slice(&reply_body);
    reply::array_len(out, deleted.len());
    for id in &deleted {
        reply_id(out, *id);
    }
    c.emit_all(&muts);
}

// ---------------------------------------------------------------------------------------
// XINFO

const XINFO_SUBS: &[(&str, i32)] = &[("consumers", 4), ("groups", 3), ("stream", -3), ("help", 2)];

/// XINFO STREAM key [FULL [COUNT count]] | GROUPS key | CONSUMERS key group | HELP
fn xinfo(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let Some(sub) = subcommand(out, "xinfo", XINFO_SUBS, args) else { return };
    if sub == "help" {
        return help(
            out,
            "XINFO",
            &[
                "CONSUMERS <key> <groupname>",
                "    Show consumers of <groupname>.",
                "GROUPS <key>",
                "    Show the stream consumer groups.",
                "STREAM <key> [FULL [COUNT <count>]",
                "    Show information about the stream.",
            ],
        );
    }
    let key = args[2];
    let (now, proto) = (c.now, c.proto);
    let s = match look(c, key) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Missing => return reply::error(out, errors::NO_SUCH_KEY),
        Look::Stream(s) => s,
    };
    match sub {
        "consumers" => {
            let Some(g) = s.group(args[3]) else { return no_group_for_key(out, key, args[3]) };
            reply::array_len(out, g.consumers().len());
            for cons in g.consumers().values() {
                // Redis 7.2 added `inactive`: since the consumer last got or claimed entries
                // (-1 if it never did).
                reply::map_len(out, proto, 4);
                reply::bulk(out, b"name");
                reply::bulk(out, cons.name());
                reply::bulk(out, b"pending");
                reply::integer(out, cons.pending().len() as i64);
                reply::bulk(out, b"idle");
                reply::integer(out, now.saturating_sub(cons.seen_time).max(0));
                reply::bulk(out, b"inactive");
                let inactive =
                    if cons.active_time < 0 { -1 } else { now.saturating_sub(cons.active_time).max(0) };
                reply::integer(out, inactive);
            }
        }
        "groups" => {
            let Some(groups) = s.groups() else { return reply::array_len(out, 0) };
            reply::array_len(out, groups.len());
            for (name, g) in groups {
                reply::map_len(out, proto, 6);
                reply::bulk(out, b"name");
                reply::bulk(out, name);
                reply::bulk(out, b"consumers");
                reply::integer(out, g.consumers().len() as i64);
                reply::bulk(out, b"pending");
                reply::integer(out, g.pel().len() as i64);
                reply::bulk(out, b"last-delivered-id");
                reply_id(out, g.last_id);
                reply::bulk(out, b"entries-read");
                reply_opt_int(out, proto, (g.entries_read != ENTRIES_READ_UNKNOWN).then_some(g.entries_read));
                reply::bulk(out, b"lag");
                reply_opt_int(out, proto, group_lag(s, g));
            }
        }
        "stream" => xinfo_stream(out, proto, s, args),
        _ => unreachable!("every subcommand is handled"),
    }
}

fn xinfo_stream(out: &mut Vec<u8>, proto: Proto, s: &Stream, args: &[&[u8]]) {
    let opts = &args[3..];
    let mut count: i64 = 10;
    let full = !opts.is_empty();
    if full {
        if (opts.len() != 1 && opts.len() != 3) || !eq_ic(opts[0], b"full") {
            return subcommand_syntax(out, args[0], args[1]);
        }
        if opts.len() == 3 {
            if !eq_ic(opts[1], b"count") {
                return subcommand_syntax(out, args[0], args[1]);
            }
            let Some(n) = parse_i64(opts[2]) else { return reply::error(out, errors::NOT_INTEGER) };
            count = if n < 0 { 10 } else { n };
        }
    }
    let idmp_fields = if s.idmp().is_some() { 6 } else { 0 };
    reply::map_len(out, proto, if full { 9 } else { 10 } + idmp_fields);
    reply::bulk(out, b"length");
    reply::integer(out, s.len() as i64);
    // Blocks stand in for Redis's radix-tree keys; a radix tree of n keys has about 2n nodes
    // in a stream's ID-ordered layout (these two are sizes, not data).
    let blocks = s.block_count() as i64;
    reply::bulk(out, b"radix-tree-keys");
    reply::integer(out, blocks);
    reply::bulk(out, b"radix-tree-nodes");
    reply::integer(out, if blocks == 0 { 1 } else { blocks * 2 });
    reply::bulk(out, b"last-generated-id");
    reply_id(out, s.last_id());
    reply::bulk(out, b"max-deleted-entry-id");
    reply_id(out, s.max_deleted_id());
    reply::bulk(out, b"entries-added");
    reply::integer(out, s.entries_added() as i64);
    reply::bulk(out, b"recorded-first-entry-id");
    reply_id(out, s.first_id().unwrap_or(StreamId::MIN));
    if let Some(state) = s.idmp() {
        crate::commands::stream_idmp::info_fields(out, state);
    }
    let limit = |n: usize| count == 0 || (n as i64) < count;
    if !full {
        reply::bulk(out, b"groups");
        reply::integer(out, s.group_count() as i64);
        for (name, id) in [(&b"first-entry"[..], s.first_id()), (b"last-entry", s.last_entry_id())] {
            reply::bulk(out, name);
            match id.and_then(|id| s.get(id).map(|f| (id, f))) {
                Some((id, fields)) => reply_entry(out, id, &fields),
                None => reply::null_bulk(out, proto),
            }
        }
        return;
    }
    reply::bulk(out, b"entries");
    let marker = reply::deferred_array_len(out);
    let mut n = 0usize;
    s.range(StreamId::MIN, StreamId::MAX, false, |id, fields| {
        if !limit(n) {
            return false;
        }
        reply_entry(out, id, fields);
        n += 1;
        limit(n)
    });
    reply::finish_deferred_len(out, marker, n);
    reply::bulk(out, b"groups");
    let Some(groups) = s.groups() else { return reply::array_len(out, 0) };
    reply::array_len(out, groups.len());
    for (name, g) in groups {
        reply::map_len(out, proto, 7);
        reply::bulk(out, b"name");
        reply::bulk(out, name);
        reply::bulk(out, b"last-delivered-id");
        reply_id(out, g.last_id);
        reply::bulk(out, b"entries-read");
        reply_opt_int(out, proto, (g.entries_read != ENTRIES_READ_UNKNOWN).then_some(g.entries_read));
        reply::bulk(out, b"lag");
        reply_opt_int(out, proto, group_lag(s, g));
        reply::bulk(out, b"pel-count");
        reply::integer(out, g.pel().len() as i64);
        reply::bulk(out, b"pending");
        let shown: Vec<_> =
            g.pel().iter().take(if count == 0 { usize::MAX } else { count as usize }).collect();
        reply::array_len(out, shown.len());
        for (id, p) in shown {
            reply::array_len(out, 4);
            reply_id(out, *id);
            reply::bulk(out, p.consumer());
            reply::integer(out, p.delivery_time);
            reply::integer(out, p.delivery_count as i64);
        }
        reply::bulk(out, b"consumers");
        reply::array_len(out, g.consumers().len());
        for cons in g.consumers().values() {
            reply::map_len(out, proto, 5);
            reply::bulk(out, b"name");
            reply::bulk(out, cons.name());
            reply::bulk(out, b"seen-time");
            reply::integer(out, cons.seen_time);
            reply::bulk(out, b"active-time");
            reply::integer(out, cons.active_time);
            reply::bulk(out, b"pel-count");
            reply::integer(out, cons.pending().len() as i64);
            reply::bulk(out, b"pending");
            // A consumer's IDs are all in the group's PEL ([`ConsumerGroup`] keeps the two in
            // agreement); a lookup that fails would only shorten the listing.
            let shown: Vec<(StreamId, &store::types::stream::Pending)> = cons
                .pending()
                .iter()
                .filter_map(|id| g.pel().get(id).map(|p| (*id, p)))
                .take(if count == 0 { usize::MAX } else { count as usize })
                .collect();
            reply::array_len(out, shown.len());
            for (id, p) in shown {
                reply::array_len(out, 3);
                reply_id(out, id);
                reply::integer(out, p.delivery_time);
                reply::integer(out, p.delivery_count as i64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{reply, take_muts};
    use crate::Engine;

    fn setup() -> Engine {
        let mut e = Engine::default();
        for i in 1..=3 {
            reply(&mut e, 0, &["XADD", "s", &format!("{i}-0"), "f", &i.to_string()]);
        }
        take_muts(&mut e);
        e
    }

    #[test]
    fn xgroup_create_resolves_dollar_and_records_the_counter() {
        let mut e = setup();
        assert_eq!(reply(&mut e, 0, &["XGROUP", "CREATE", "s", "g", "$"]), "+OK\r\n");
        assert_eq!(reply(&mut e, 0, &["XGROUP", "CREATE", "new", "g", "$", "MKSTREAM"]), "+OK\r\n");
        assert_eq!(
            reply(&mut e, 0, &["XGROUP", "CREATE", "s", "g", "0"]),
            "-BUSYGROUP Consumer Group name already exists\r\n"
        );
        assert_eq!(
            take_muts(&mut e),
            vec![
                "XGROUP CREATE s g 3-0 ENTRIESREAD -1".to_string(),
                "XGROUP CREATE new g 0-0 MKSTREAM ENTRIESREAD -1".to_string(),
            ]
        );
        // A SETID that moves nothing records nothing.
        assert_eq!(reply(&mut e, 0, &["XGROUP", "SETID", "s", "g", "$"]), "+OK\r\n");
        assert!(take_muts(&mut e).is_empty());
        assert_eq!(
            reply(&mut e, 0, &["XGROUP", "DESTROY", "s"]),
            "-ERR wrong number of arguments for 'xgroup|destroy' command\r\n"
        );
        assert_eq!(
            reply(&mut e, 0, &["XGROUP", "NOPE"]),
            "-ERR unknown subcommand 'NOPE'. Try XGROUP HELP.\r\n"
        );
        assert_eq!(
            reply(&mut e, 0, &["XGROUP", "SETID", "s", "nog", "0"]),
            "-NOGROUP No such consumer group 'nog' for key name 's'\r\n"
        );
    }

    #[test]
    fn xinfo_consumers_reports_inactive_since_the_last_delivery() {
        let mut e = setup();
        reply(&mut e, 0, &["XGROUP", "CREATE", "s", "g", "0"]);
        reply(&mut e, 1000, &["XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">"]);
        reply(&mut e, 1200, &["XGROUP", "CREATECONSUMER", "s", "g", "d"]);
        // c got an entry at 1000 and was last seen then; d never got one (-1).
        assert_eq!(
            reply(&mut e, 1500, &["XINFO", "CONSUMERS", "s", "g"]),
            "*2\r\n*8\r\n$4\r\nname\r\n$1\r\nc\r\n$7\r\npending\r\n:1\r\n$4\r\nidle\r\n:500\r\n$8\r\ninactive\r\n:500\r\n\
             *8\r\n$4\r\nname\r\n$1\r\nd\r\n$7\r\npending\r\n:0\r\n$4\r\nidle\r\n:300\r\n$8\r\ninactive\r\n:-1\r\n"
        );
        let full = reply(&mut e, 1500, &["XINFO", "STREAM", "s", "FULL"]);
        assert!(
            full.contains("$11\r\nactive-time\r\n:1000\r\n")
                && full.contains("$11\r\nactive-time\r\n:-1\r\n"),
            "{full}"
        );
    }

    #[test]
    fn xclaim_records_each_claim_and_drops_deleted_entries() {
        let mut e = setup();
        reply(&mut e, 0, &["XGROUP", "CREATE", "s", "g", "0"]);
        reply(&mut e, 10, &["XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"]);
        reply(&mut e, 10, &["XDEL", "s", "1-0"]);
        take_muts(&mut e);
        // b is created first (Redis 7.4+: before any claim); 1-0 is gone: dropped from the
        // PEL. 2-0 claimed by b, idle 5 -> time 95.
        let r = reply(&mut e, 100, &["XCLAIM", "s", "g", "b", "0", "1-0", "2-0", "IDLE", "5", "JUSTID"]);
        assert_eq!(r, "*1\r\n$3\r\n2-0\r\n");
        assert_eq!(
            take_muts(&mut e),
            vec![
                "XGROUP CREATECONSUMER s g b".to_string(),
                "XACK s g 1-0".to_string(),
                "XCLAIM s g b 0 2-0 TIME 95 RETRYCOUNT 1 FORCE JUSTID LASTID 3-0".to_string(),
            ]
        );
        // A future TIME is clamped to now outside replay.
        reply(&mut e, 100, &["XCLAIM", "s", "g", "b", "0", "3-0", "TIME", "999999", "RETRYCOUNT", "4"]);
        assert_eq!(
            take_muts(&mut e),
            vec!["XCLAIM s g b 0 3-0 TIME 100 RETRYCOUNT 4 FORCE JUSTID LASTID 3-0".to_string()]
        );
        // LASTID that moves the group without a claim: a SETID record.
        assert_eq!(reply(&mut e, 100, &["XCLAIM", "s", "g", "b", "0", "9-0", "LASTID", "9-0"]), "*0\r\n");
        assert_eq!(take_muts(&mut e), vec!["XGROUP SETID s g 9-0 ENTRIESREAD 3".to_string()]);
        // A claim of nothing still creates its consumer, and so does a read of nothing.
        assert_eq!(reply(&mut e, 100, &["XCLAIM", "s", "g", "c", "0", "9-0"]), "*0\r\n");
        assert_eq!(take_muts(&mut e), vec!["XGROUP CREATECONSUMER s g c".to_string()]);
        assert_eq!(
            reply(&mut e, 100, &["XAUTOCLAIM", "s", "g", "d", "0", "9-0"]),
            "*3\r\n$3\r\n0-0\r\n*0\r\n*0\r\n"
        );
        assert_eq!(take_muts(&mut e), vec!["XGROUP CREATECONSUMER s g d".to_string()]);
        assert_eq!(reply(&mut e, 100, &["XREADGROUP", "GROUP", "g", "r", "STREAMS", "s", ">"]), "*-1\r\n");
        assert_eq!(take_muts(&mut e), vec!["XGROUP CREATECONSUMER s g r".to_string()]);
        assert_eq!(
            reply(&mut e, 100, &["XCLAIM", "s", "g", "b", "0", "2-0", "BOGUS"]),
            "-ERR Unrecognized XCLAIM option 'BOGUS'\r\n"
        );
    }

    #[test]
    fn xautoclaim_cursor_and_xpending_shapes() {
        let mut e = setup();
        reply(&mut e, 0, &["XGROUP", "CREATE", "s", "g", "0"]);
        reply(&mut e, 10, &["XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"]);
        take_muts(&mut e);
        assert_eq!(
            reply(&mut e, 20, &["XAUTOCLAIM", "s", "g", "b", "0", "0", "COUNT", "1", "JUSTID"]),
            "*3\r\n$3\r\n2-0\r\n*1\r\n$3\r\n1-0\r\n*0\r\n"
        );
        assert_eq!(
            reply(&mut e, 20, &["XPENDING", "s", "g"]),
            "*4\r\n:3\r\n$3\r\n1-0\r\n$3\r\n3-0\r\n*2\r\n*2\r\n$1\r\na\r\n$1\r\n2\r\n*2\r\n$1\r\nb\r\n$1\r\n1\r\n"
        );
        assert_eq!(
            reply(&mut e, 25, &["XPENDING", "s", "g", "IDLE", "10", "-", "+", "10"]),
            "*2\r\n*4\r\n$3\r\n2-0\r\n$1\r\na\r\n:15\r\n:1\r\n*4\r\n$3\r\n3-0\r\n$1\r\na\r\n:15\r\n:1\r\n"
        );
        reply(&mut e, 30, &["XACK", "s", "g", "1-0", "2-0", "3-0"]);
        assert_eq!(take_muts(&mut e).last().unwrap(), "XACK s g 1-0 2-0 3-0");
        assert_eq!(reply(&mut e, 30, &["XPENDING", "s", "g"]), "*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n");
        assert_eq!(
            reply(&mut e, 30, &["XPENDING", "s", "nog"]),
            "-NOGROUP No such key 's' or consumer group 'nog'\r\n"
        );
    }

    #[test]
    fn xinfo_groups_in_resp3_is_a_map_with_lag() {
        let mut e = setup();
        reply(&mut e, 0, &["XGROUP", "CREATE", "s", "g", "0", "ENTRIESREAD", "0"]);
        let spec = crate::command::lookup(b"xinfo").unwrap();
        let args: [&[u8]; 3] = [b"XINFO", b"GROUPS", b"s"];
        let mut out = Vec::new();
        e.execute(spec, &args, 0, &mut out, resp::Proto::Resp3, false);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "*1\r\n%6\r\n$4\r\nname\r\n$1\r\ng\r\n$9\r\nconsumers\r\n:0\r\n$7\r\npending\r\n:0\r\n\
             $17\r\nlast-delivered-id\r\n$3\r\n0-0\r\n$12\r\nentries-read\r\n:0\r\n$3\r\nlag\r\n:3\r\n"
        );
        assert_eq!(reply(&mut e, 0, &["XINFO", "STREAM", "nokey"]), "-ERR no such key\r\n");
    }
}
