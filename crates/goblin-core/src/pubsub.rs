//! Pub/sub: SUBSCRIBE / PSUBSCRIBE / SSUBSCRIBE, their UNSUBSCRIBE forms, PUBLISH / SPUBLISH and
//! PUBSUB, reply for reply as Redis 7.0 without cluster mode (shard channels are then a third,
//! separate namespace of plain channels).
//!
//! Pub/sub never touches the keyspace: it emits no mutations, so nothing here reaches a batch,
//! the journal or the offset.
//!
//! Invariants:
//! - A connection is subscribed to channel `c` (kind k) exactly when `c` is in its
//!   `conn.pubsub` set of kind k, and then `(slot, id)` appears exactly once in the index's
//!   list for `c`. Lists and sets only ever change together (`add` / `remove`).
//! - No empty list stays in the index: PUBSUB CHANNELS / NUMPAT count keys.
//! - `conn.pubsub` is `Some` exactly when the connection has at least one subscription of any
//!   kind (Redis's CLIENT_PUBSUB flag): that is the RESP2 "subscribed context" test.
//! - Entries carry the client id as well as the slot, and a closed connection is removed from
//!   the index before its slot is freed, so a reused slot is never mistaken for the old client.

use crate::conn::Conn;
use crate::server::Server;
use engine::util::Glob;
use resp::{reply, Proto};
use std::collections::{HashMap, HashSet};

/// A subscriber: connection slot and client id.
type Sub = (usize, u64);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    fn subscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }
    fn unsubscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

/// One connection's subscriptions. Sets, not lists: Redis keeps them in dicts too, so the order
/// of an UNSUBSCRIBE without arguments is unspecified there as well.
#[derive(Default)]
pub struct ConnSubs {
    pub channels: HashSet<Vec<u8>>,
    pub patterns: HashSet<Vec<u8>>,
    pub shard: HashSet<Vec<u8>>,
}

impl ConnSubs {
    fn set(&mut self, kind: Kind) -> &mut HashSet<Vec<u8>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }
    /// The count a (un)subscribe confirmation carries: channels plus patterns, or, for the
    /// shard kind, shard channels alone (as Redis 7.0 counts them).
    fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Shard => self.shard.len(),
            _ => self.channels.len() + self.patterns.len(),
        }
    }
    fn total(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard.len()
    }
}

/// Subscription count of `kind` for a connection that may have none.
fn count_of(conn: &Conn, kind: Kind) -> usize {
    conn.pubsub.as_ref().map_or(0, |s| s.count(kind))
}

struct PatternSubs {
    glob: Glob,
    subs: Vec<Sub>,
}

/// The server-wide index: who listens where.
#[derive(Default)]
pub struct PubSub {
    /// channel -> subscribers, in subscription order (delivery order, as in Redis).
    channels: HashMap<Vec<u8>, Vec<Sub>>,
    shard: HashMap<Vec<u8>, Vec<Sub>>,
    /// pattern -> its compiled glob and subscribers. PUBLISH tries every pattern (O(patterns),
    /// as Redis does).
    patterns: HashMap<Vec<u8>, PatternSubs>,
    /// Messages for the client whose command is running, published by that command (a RESP3
    /// subscriber publishing to itself, in a transaction or a script too): (slot, id, the
    /// pushes). As Redis 7.2+, they follow the command's whole reply
    /// ([`Server::flush_self_pushes`]), so a push never lands inside an EXEC's array.
    self_pushes: Option<(usize, u64, Vec<u8>)>,
}

impl PubSub {
    /// Distinct channels with a subscriber (INFO `pubsub_channels`).
    pub fn channels_len(&self) -> usize {
        self.channels.len()
    }
    /// Distinct patterns with a subscriber (INFO `pubsub_patterns`, PUBSUB NUMPAT).
    pub fn patterns_len(&self) -> usize {
        self.patterns.len()
    }
    pub fn shard_len(&self) -> usize {
        self.shard.len()
    }

    /// Subscribes; false if `conn` already was.
    fn add(&mut self, conn: &mut Conn, slot: usize, kind: Kind, name: &[u8]) -> bool {
        let subs = conn.pubsub.get_or_insert_with(Default::default);
        if !subs.set(kind).insert(name.to_vec()) {
            return false;
        }
        let who = (slot, conn.id);
        match kind {
            Kind::Channel => self.channels.entry(name.to_vec()).or_default().push(who),
            Kind::Shard => self.shard.entry(name.to_vec()).or_default().push(who),
            Kind::Pattern => self
                .patterns
                .entry(name.to_vec())
                .or_insert_with(|| PatternSubs { glob: Glob::new(name, false), subs: Vec::new() })
                .subs
                .push(who),
        }
        true
    }

    /// Unsubscribes; false if `conn` was not subscribed. Leaves `conn.pubsub` as `Some` even if
    /// now empty: the caller restores the invariant with [`PubSub::settle`].
    fn remove(&mut self, conn: &mut Conn, kind: Kind, name: &[u8]) -> bool {
        let Some(subs) = conn.pubsub.as_mut() else { return false };
        if !subs.set(kind).remove(name) {
            return false;
        }
        self.unindex(kind, name, conn.id);
        true
    }

    /// Drops client `id` from the list of `name`, and the list once empty.
    fn unindex(&mut self, kind: Kind, name: &[u8], id: u64) {
        let found = match kind {
            Kind::Channel => unlist(&mut self.channels, name, id, |l| l),
            Kind::Shard => unlist(&mut self.shard, name, id, |l| l),
            Kind::Pattern => unlist(&mut self.patterns, name, id, |p| &mut p.subs),
        };
        debug_assert!(found.is_some(), "subscription missing from the index");
    }

    /// Drops `conn.pubsub` once it holds nothing (leaving the subscribed context).
    fn settle(conn: &mut Conn) {
        if conn.pubsub.as_ref().is_some_and(|s| s.total() == 0) {
            conn.pubsub = None;
        }
    }

    /// Removes every subscription of `conn`, silently (RESET, disconnect).
    pub fn remove_all(&mut self, conn: &mut Conn) {
        let Some(subs) = conn.pubsub.take() else { return };
        for (kind, set) in
            [(Kind::Channel, &subs.channels), (Kind::Pattern, &subs.patterns), (Kind::Shard, &subs.shard)]
        {
            for name in set {
                self.unindex(kind, name, conn.id);
            }
        }
    }
}

/// Removes `id` from the subscriber list of `name` in `map` (reached through `list`), and the
/// entry if no subscriber is left. None if `name` was not indexed.
fn unlist<V>(
    map: &mut HashMap<Vec<u8>, V>,
    name: &[u8],
    id: u64,
    list: impl Fn(&mut V) -> &mut Vec<Sub>,
) -> Option<()> {
    let v = map.get_mut(name)?;
    let l = list(v);
    l.retain(|s| s.1 != id);
    if l.is_empty() {
        map.remove(name);
    }
    Some(())
}

/// Writes one message push: `message channel payload`, `pmessage pattern channel payload` or
/// `smessage channel payload`; `*n` in RESP2, `>n` in RESP3.
fn write_message(
    out: &mut Vec<u8>,
    proto: Proto,
    kind: Kind,
    pattern: Option<&[u8]>,
    channel: &[u8],
    msg: &[u8],
) {
    match (kind, pattern) {
        (Kind::Pattern, Some(p)) => {
            reply::push_len(out, proto, 4);
            reply::bulk(out, b"pmessage");
            reply::bulk(out, p);
        }
        (Kind::Shard, _) => {
            reply::push_len(out, proto, 3);
            reply::bulk(out, b"smessage");
        }
        _ => {
            reply::push_len(out, proto, 3);
            reply::bulk(out, b"message");
        }
    }
    reply::bulk(out, channel);
    reply::bulk(out, msg);
}

/// A (un)subscribe confirmation: `[word, name or null, count]`.
fn confirm(conn: &mut Conn, word: &[u8], name: Option<&[u8]>, count: usize) {
    let out = &mut conn.out;
    reply::push_len(out, conn.proto, 3);
    reply::bulk(out, word);
    match name {
        Some(n) => reply::bulk(out, n),
        None => reply::null_bulk(out, conn.proto),
    }
    reply::integer(out, count as i64);
}

/// Commands a RESP2 connection may run while subscribed (Redis's list).
pub fn allowed_in_context(name: &str) -> bool {
    matches!(
        name,
        "subscribe"
            | "psubscribe"
            | "ssubscribe"
            | "unsubscribe"
            | "punsubscribe"
            | "sunsubscribe"
            | "ping"
            | "quit"
            | "reset"
    )
}

/// PING in the RESP2 subscribed context: `*2 pong <message or "">`, as Redis answers it.
pub fn subscribed_ping(out: &mut Vec<u8>, args: &[&[u8]]) {
    reply::array_len(out, 2);
    reply::bulk(out, b"pong");
    reply::bulk(out, args.get(1).copied().unwrap_or(b""));
}

/// `ERR Can't execute '<cmd>': ...`, the RESP2 subscribed-context refusal.
pub fn refuse_in_context(out: &mut Vec<u8>, full_name: &str) {
    let msg = format!(
        "ERR Can't execute '{full_name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
    );
    reply::error(out, msg.as_bytes());
}

impl Server {
    /// SUBSCRIBE / PSUBSCRIBE / SSUBSCRIBE name [name ...]: one confirmation per argument
    /// (repeats included), each with the count after it.
    pub(crate) fn subscribe(&mut self, conn: &mut Conn, slot: usize, kind: Kind, names: &[&[u8]]) {
        for name in names {
            self.pubsub.add(conn, slot, kind, name);
            let count = count_of(conn, kind);
            confirm(conn, kind.subscribe_word(), Some(name), count);
        }
    }

    /// UNSUBSCRIBE / PUNSUBSCRIBE / SUNSUBSCRIBE [name ...]. Without names: every subscription
    /// of the kind, or one confirmation with a null name when there is none.
    pub(crate) fn unsubscribe(&mut self, conn: &mut Conn, kind: Kind, names: &[&[u8]]) {
        if names.is_empty() {
            let all: Vec<Vec<u8>> = match conn.pubsub.as_mut() {
                Some(s) => s.set(kind).iter().cloned().collect(),
                None => Vec::new(),
            };
            if all.is_empty() {
                confirm(conn, kind.unsubscribe_word(), None, count_of(conn, kind));
            }
            for name in &all {
                self.pubsub.remove(conn, kind, name);
                let count = count_of(conn, kind);
                confirm(conn, kind.unsubscribe_word(), Some(name), count);
            }
        } else {
            for name in names {
                self.pubsub.remove(conn, kind, name);
                let count = count_of(conn, kind);
                confirm(conn, kind.unsubscribe_word(), Some(name), count);
            }
        }
        PubSub::settle(conn);
    }

    /// PUBLISH / SPUBLISH: delivers `msg` to every subscriber of `channel` (then, for PUBLISH,
    /// to every subscriber of each matching pattern, once per pattern) and returns how many
    /// messages were delivered. `conn` (in `slot`) is the publisher, out of its slab slot: it
    /// may be a subscriber itself (RESP3), and then gets its messages after its reply.
    ///
    /// Each receiver's output buffer grows by the message and the receiver is queued for a
    /// write at the end of the turn; one that passes `--client-output-limit` is closed there
    /// (`check_output_limit`), so a subscriber that does not read cannot grow memory unbounded.
    pub(crate) fn publish(
        &mut self,
        conn: &mut Conn,
        slot: usize,
        shard: bool,
        channel: &[u8],
        msg: &[u8],
    ) -> usize {
        self.deliver(Some((conn, slot)), shard, channel, msg)
    }

    /// After a command's reply (and its keyspace notifications): the messages it published
    /// to its own client go out now (see `PubSub::self_pushes`).
    pub(crate) fn flush_self_pushes(&mut self, conn: &mut Conn, slot: usize) {
        let Some((s, id, bytes)) = self.pubsub.self_pushes.take() else { return };
        if s == slot && id == conn.id {
            conn.out.extend_from_slice(&bytes);
        } else if let Some(Some(rx)) = self.conns.get_mut(s) {
            // Not reached: every command ends here for its own client. Kept exact anyway.
            if rx.id == id {
                rx.out.extend_from_slice(&bytes);
                self.queue_write(s);
            }
        }
    }

    /// PUBLISH with no current connection (keyspace notifications raised outside a client's
    /// command: active expiry, blocked clients served later).
    pub(crate) fn publish_detached(&mut self, channel: &[u8], msg: &[u8]) -> usize {
        self.deliver(None, false, channel, msg)
    }

    /// SPUBLISH's delivery without a publishing client (a Redis primary's stream).
    pub(crate) fn spublish_detached(&mut self, channel: &[u8], msg: &[u8]) -> usize {
        self.deliver(None, true, channel, msg)
    }

    fn deliver(
        &mut self,
        mut current: Option<(&mut Conn, usize)>,
        shard: bool,
        channel: &[u8],
        msg: &[u8],
    ) -> usize {
        // Targets first (the index is borrowed), then delivery (which needs all of `self`).
        let mut targets: Vec<(Sub, Option<Vec<u8>>)> = Vec::new();
        let exact = if shard { self.pubsub.shard.get(channel) } else { self.pubsub.channels.get(channel) };
        if let Some(list) = exact {
            targets.extend(list.iter().map(|&s| (s, None)));
        }
        if !shard {
            for (pattern, p) in &self.pubsub.patterns {
                if p.glob.matches(channel) {
                    targets.extend(p.subs.iter().map(|&s| (s, Some(pattern.clone()))));
                }
            }
        }
        let kind = |p: &Option<Vec<u8>>| match (shard, p) {
            (true, _) => Kind::Shard,
            (false, Some(_)) => Kind::Pattern,
            (false, None) => Kind::Channel,
        };
        let mut delivered = 0;
        for ((s, id), pattern) in &targets {
            if let Some((conn, slot)) = current.as_mut() {
                if *s == *slot && *id == conn.id {
                    let held = self.pubsub.self_pushes.get_or_insert_with(|| (*slot, conn.id, Vec::new()));
                    write_message(&mut held.2, conn.proto, kind(pattern), pattern.as_deref(), channel, msg);
                    delivered += 1;
                    continue;
                }
            }
            let Some(mut rx) = self.conns.get_mut(*s).and_then(Option::take) else { continue };
            if rx.id == *id {
                if !rx.close_now {
                    write_message(&mut rx.out, rx.proto, kind(pattern), pattern.as_deref(), channel, msg);
                    self.check_output_limit(&mut rx);
                }
                delivered += 1;
            }
            self.conns[*s] = Some(rx);
            self.queue_write(*s);
        }
        delivered
    }

    /// PUBSUB CHANNELS|NUMSUB|NUMPAT|SHARDCHANNELS|SHARDNUMSUB|HELP.
    pub(crate) fn pubsub_command(&mut self, conn: &mut Conn, args: &[&[u8]]) {
        use crate::commands::{help, sub_arity_ok};
        let out = &mut conn.out;
        let sub = args[1].to_ascii_lowercase();
        match sub.as_slice() {
            b"channels" | b"shardchannels" => {
                if args.len() > 3 {
                    return engine::errors::subcommand_syntax_error(out, b"pubsub", args[1]);
                }
                let index = if sub == b"channels" { &self.pubsub.channels } else { &self.pubsub.shard };
                let glob = args.get(2).map(|p| Glob::new(p, false));
                let names: Vec<&Vec<u8>> =
                    index.keys().filter(|c| glob.as_ref().is_none_or(|g| g.matches(c))).collect();
                reply::array_len(out, names.len());
                for n in names {
                    reply::bulk(out, n);
                }
            }
            b"numsub" | b"shardnumsub" => {
                let index = if sub == b"numsub" { &self.pubsub.channels } else { &self.pubsub.shard };
                // A flat array in RESP3 too, as Redis 7.0 answers it.
                reply::array_len(out, (args.len() - 2) * 2);
                for c in &args[2..] {
                    reply::bulk(out, c);
                    reply::integer(out, index.get(*c).map_or(0, Vec::len) as i64);
                }
            }
            b"numpat" => {
                if sub_arity_ok(out, args, 2) {
                    reply::integer(out, self.pubsub.patterns_len() as i64);
                }
            }
            b"help" => {
                if sub_arity_ok(out, args, 2) {
                    help(out, PUBSUB_HELP);
                }
            }
            _ => engine::errors::unknown_subcommand(out, args[0], args[1]),
        }
    }
}

const PUBSUB_HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Print this help.",
];
