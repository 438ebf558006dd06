//! Client-side caching (`CLIENT TRACKING`): the server remembers which clients read which
//! keys and tells them when a key they may have cached changes, as Redis 6+ does.
//!
//! - Default mode: each key a tracking client reads (the keys of read-only commands) is
//!   remembered with the client; the first change to the key sends that client one
//!   invalidation and forgets the pair (a client that reads the key again is tracked again).
//!   OPTIN tracks only the command after `CLIENT CACHING yes`; OPTOUT all but the command
//!   after `CLIENT CACHING no`.
//! - BCAST mode: nothing is remembered per key; every change to a key under one of the
//!   client's prefixes (all keys without a prefix) is sent.
//! - A change is any committed mutation naming the key ([`Server::commit_batch`] feeds this
//!   module like WATCH), so expiry, eviction, replicated and other producers' writes all
//!   invalidate; a keyless FLUSHALL/FLUSHDB sends every tracking client a null invalidation.
//! - Delivery: RESP3 clients get a `invalidate` push; with REDIRECT the messages go to
//!   another client: RESP3 as a push, RESP2 as a `message` on `__redis__:invalidate` if it
//!   is subscribed. NOLOOP skips changes the client made itself. Messages are queued while
//!   a command runs and sent after its reply, so a reply is never split.
//! - The key table is bounded by `tracking-table-max-keys`: past it, the oldest-looking keys
//!   are invalidated (their clients told) and forgotten.

use crate::conn::Conn;
use crate::server::Server;
use engine::{errors, util, Batch};
use resp::reply;
use std::collections::{BTreeMap, HashMap};

/// The Pub/Sub channel RESP2 clients subscribe to for redirected invalidations.
pub const CHANNEL: &[u8] = b"__redis__:invalidate";

/// One connection's tracking options (`Some` on the connection while tracking is on).
#[derive(Default, Clone, Debug)]
pub struct ConnTracking {
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// Client id invalidations are redirected to (0: this connection).
    pub redirect: u64,
    /// BCAST prefixes (empty with BCAST: every key).
    pub prefixes: Vec<Vec<u8>>,
    /// `CLIENT CACHING yes|no` for the next command.
    pub caching: Option<bool>,
    /// The redirect target disappeared (reported once, then in TRACKINGINFO).
    pub broken_redirect: bool,
}

/// A tracking client: (slot, client id).
type Client = (usize, u64);

/// An invalidation waiting for delivery: the client, the BCAST prefix the key matched (None in
/// default mode), and the key (None: everything, a flush).
type Invalidation = (Client, Option<Vec<u8>>, Option<Vec<u8>>);

/// The server's tracking tables.
pub struct Tracking {
    /// Default mode: key -> clients that read it since its last change.
    keys: HashMap<Vec<u8>, Vec<Client>>,
    /// BCAST mode: prefix -> clients.
    prefixes: BTreeMap<Vec<u8>, Vec<Client>>,
    /// Clients with tracking on.
    pub clients: usize,
    /// `tracking-table-max-keys` (0: unbounded).
    pub max_keys: usize,
    /// Invalidations waiting for delivery, in order.
    outbox: Vec<Invalidation>,
    /// The client whose command is running, out of its slot meanwhile: (slot, id), whether
    /// it tracks, and whether with NOLOOP. Set by the dispatcher around each command.
    pub current: Option<(Client, bool, bool)>,
    /// Reads made while the engine's batch already held mutations (a read inside EXEC or a
    /// script after a write): (mutations pending before the read, client, key). Redis tracks
    /// a key when it is read and invalidates when it is written, one command at a time; here
    /// the writes reach [`Server::tracking_on_batch`] only at commit, so each read waits to
    /// be replayed between the mutations it came after and the ones it came before. Otherwise
    /// `MULTI, SET k, GET k, EXEC` would invalidate the very read that follows the write.
    deferred: Vec<(usize, Client, Vec<u8>)>,
}

impl Default for Tracking {
    fn default() -> Self {
        Tracking {
            keys: HashMap::new(),
            prefixes: BTreeMap::new(),
            clients: 0,
            max_keys: 1_000_000,
            outbox: Vec::new(),
            current: None,
            deferred: Vec::new(),
        }
    }
}

impl Tracking {
    pub fn total_keys(&self) -> usize {
        self.keys.len()
    }
    pub fn total_items(&self) -> usize {
        self.keys.values().map(Vec::len).sum()
    }
    pub fn total_prefixes(&self) -> usize {
        self.prefixes.len()
    }

    /// Default mode: `client` read `key`.
    pub fn remember(&mut self, client: Client, key: &[u8]) {
        let clients = self.keys.entry(key.to_vec()).or_default();
        if !clients.contains(&client) {
            clients.push(client);
        }
        if self.max_keys > 0 && self.keys.len() > self.max_keys {
            self.shrink();
        }
    }

    /// Invalidates keys until the table is within its bound again (also after CONFIG SET
    /// lowered the bound, as Redis's cron does, so an idle server obeys it too).
    pub fn shrink(&mut self) {
        let over = self.keys.len().saturating_sub(self.max_keys);
        let victims: Vec<Vec<u8>> = self.keys.keys().take(over).cloned().collect();
        for key in victims {
            if let Some(clients) = self.keys.remove(&key) {
                self.outbox.extend(clients.into_iter().map(|c| (c, None, Some(key.clone()))));
            }
        }
    }

    /// `key` changed: queue an invalidation for every client that may have cached it.
    fn changed(&mut self, key: &[u8], noloop: impl Fn(Client) -> bool) {
        if let Some(clients) = self.keys.remove(key) {
            for c in clients {
                if !noloop(c) {
                    self.outbox.push((c, None, Some(key.to_vec())));
                }
            }
        }
        if !self.prefixes.is_empty() {
            for (prefix, clients) in &self.prefixes {
                if key.starts_with(prefix) {
                    for &c in clients {
                        if !noloop(c) {
                            self.outbox.push((c, Some(prefix.clone()), Some(key.to_vec())));
                        }
                    }
                }
            }
        }
    }

    fn remove_prefixes(&mut self, client: Client) {
        self.prefixes.retain(|_, clients| {
            clients.retain(|c| *c != client);
            !clients.is_empty()
        });
    }
}

/// Writes one invalidation message for `keys` (None: flush) in the target's protocol.
fn write_invalidation(out: &mut Vec<u8>, proto: resp::Proto, keys: Option<&[Vec<u8>]>) {
    if proto.is_resp3() {
        reply::push_len(out, proto, 2);
        reply::bulk(out, b"invalidate");
    } else {
        reply::array_len(out, 3);
        reply::bulk(out, b"message");
        reply::bulk(out, CHANNEL);
    }
    match keys {
        Some(keys) => {
            reply::array_len(out, keys.len());
            for k in keys {
                reply::bulk(out, k);
            }
        }
        None => reply::null_array(out, proto),
    }
}

/// Whether a connection with tracking options `t` has its next read remembered: default mode,
/// and OPTIN/OPTOUT with CLIENT CACHING deciding.
pub(crate) fn tracks_reads(t: &ConnTracking) -> bool {
    if t.bcast {
        false
    } else if t.optin {
        t.caching == Some(true)
    } else {
        !(t.optout && t.caching == Some(false))
    }
}

/// The keys a read-only command reads: its key positions (first, last, step), as COMMAND
/// reports them.
pub(crate) fn read_keys<'a>(
    spec: &engine::CommandSpec,
    args: &'a [&'a [u8]],
) -> impl Iterator<Item = &'a [u8]> {
    let first = spec.first_key as usize;
    let step = spec.key_step.max(1) as usize;
    let last =
        if spec.last_key < 0 { args.len() as i64 + spec.last_key as i64 } else { spec.last_key as i64 };
    let end = if first == 0 { 0 } else { (last.min(args.len() as i64 - 1) + 1).max(0) as usize };
    args.get(first..end.max(first)).unwrap_or_default().iter().step_by(step).copied()
}

impl Server {
    /// The commit_batch sink: every key a committed mutation names changed.
    pub(crate) fn tracking_on_batch(&mut self, batch: &Batch) {
        // With no client tracking, entries left by clients that stopped are still cleared
        // by a flush (and dropped when changed: their owners are gone or no longer track).
        if self.tracking.clients == 0 && self.tracking.keys.is_empty() {
            return;
        }
        // NOLOOP: the client whose command made the change is not told about it.
        let skip = match self.tracking.current {
            Some(((_, id), _, true)) => Some(id),
            _ => None,
        };
        let mut deferred = std::mem::take(&mut self.tracking.deferred).into_iter().peekable();
        for (pos, m) in batch.iter().enumerate() {
            // Reads made after `pos` mutations are remembered before mutation `pos` applies.
            while let Some((_, client, key)) = deferred.next_if(|(at, _, _)| *at <= pos) {
                self.tracking.remember(client, &key);
            }
            let mut keys = m.keys().peekable();
            if keys.peek().is_none() {
                // A keyless mutation on the write allowlist empties the keyspace.
                let name = m.name();
                if name.eq_ignore_ascii_case(b"FLUSHALL") || name.eq_ignore_ascii_case(b"FLUSHDB") {
                    self.tracking_flush_all();
                }
                continue;
            }
            for key in keys {
                self.tracking.changed(key, |c| Some(c.1) == skip);
            }
        }
        for (_, client, key) in deferred {
            self.tracking.remember(client, &key);
        }
    }

    /// A tracking client read `key`: remembered now, or, when the pending batch already holds
    /// mutations (not yet seen by tracking), after them at commit (see `Tracking::deferred`).
    fn tracking_remember(&mut self, client: Client, key: &[u8]) {
        let pending = self.engine.pending().len();
        if pending == 0 {
            self.tracking.remember(client, key);
        } else {
            self.tracking.deferred.push((pending, client, key.to_vec()));
        }
    }

    /// Reads still deferred once their command ended with nothing committed are remembered
    /// now (the batch they waited for is gone).
    pub(crate) fn tracking_flush_deferred(&mut self) {
        if !self.tracking.deferred.is_empty() && self.engine.pending().is_empty() {
            for (_, client, key) in std::mem::take(&mut self.tracking.deferred) {
                self.tracking.remember(client, &key);
            }
        }
    }

    /// FLUSHALL/FLUSHDB: every tracking client gets a null invalidation; the table empties.
    fn tracking_flush_all(&mut self) {
        self.tracking.keys.clear();
        let current = match self.tracking.current {
            Some((c, true, noloop)) if !noloop => Some(c),
            _ => None,
        };
        let targets: Vec<Client> = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(slot, c)| c.as_ref().filter(|c| c.tracking.is_some()).map(|c| (slot, c.id)))
            .chain(current)
            .collect();
        self.tracking.outbox.extend(targets.into_iter().map(|c| (c, None, None)));
    }

    /// After a read-only command ran for `conn`: remember its keys if the connection tracks
    /// them in default mode (OPTIN/OPTOUT and CLIENT CACHING decide).
    pub(crate) fn tracking_after_read(
        &mut self,
        conn: &Conn,
        slot: usize,
        spec: &engine::CommandSpec,
        args: &[&[u8]],
    ) {
        if !conn.tracking.as_ref().is_some_and(|t| tracks_reads(t))
            || !spec.flags.has(engine::Flags::READONLY)
        {
            return;
        }
        for key in read_keys(spec, args) {
            self.tracking_remember((slot, conn.id), key);
        }
    }

    /// After a script (EVAL, FCALL and their _RO forms) of a tracking connection: the keys its
    /// read-only commands read are remembered, each between the script's mutations it came
    /// after and those it came before (Redis 7.2+; a script that only wrote tracks nothing).
    pub(crate) fn tracking_script_reads(&mut self, id: u64, slot: usize, reads: Vec<(usize, Vec<u8>)>) {
        for (at, key) in reads {
            if at == 0 {
                self.tracking.remember((slot, id), &key);
            } else {
                self.tracking.deferred.push((at, (slot, id), key));
            }
        }
    }

    /// Sends the queued invalidations. `current` is the connection whose command just ran (out
    /// of its slot).
    pub(crate) fn deliver_invalidations(&mut self, mut current: Option<(&mut Conn, usize)>) {
        self.tracking_flush_deferred();
        if self.tracking.outbox.is_empty() {
            return;
        }
        // Default mode: one message per key, in the order the keys changed (Redis 7.0 sends
        // an MSET's keys one by one). BCAST: one message per client and prefix for the keys
        // one command changed. A flush is a message of its own, in its place.
        type Group = ((usize, u64), Option<Vec<u8>>, Option<Vec<Vec<u8>>>);
        let mut grouped: Vec<Group> = Vec::new();
        for (client, prefix, key) in std::mem::take(&mut self.tracking.outbox) {
            let last = match prefix {
                Some(_) => grouped.iter_mut().rev().find(|(c, p, _)| *c == client && *p == prefix),
                None => None,
            };
            match (key, last) {
                (Some(k), Some((_, _, Some(keys)))) => {
                    if !keys.contains(&k) {
                        keys.push(k);
                    }
                }
                (Some(k), _) => grouped.push((client, prefix, Some(vec![k]))),
                (None, _) => grouped.push((client, prefix, None)),
            }
        }
        // BCAST messages go last, by prefix in byte order, as Redis sends them once per loop
        // turn from its prefix tree (a stable sort keeps each prefix's clients in order).
        grouped.sort_by(|a, b| match (&a.1, &b.1) {
            (None, None) => std::cmp::Ordering::Equal,
            (None, Some(_)) => std::cmp::Ordering::Less,
            (Some(_), None) => std::cmp::Ordering::Greater,
            (Some(p), Some(q)) => p.cmp(q),
        });
        for ((slot, id), prefix, key) in grouped {
            // Who tracks: find its options (the current connection, or one in the slab).
            // A key read in default mode no longer concerns a client now in BCAST mode (its
            // prefixes say what it gets), as in Redis.
            let wants =
                |t: &ConnTracking| (prefix.is_some() || key.is_none() || !t.bcast).then_some(t.redirect);
            let redirect = match current.as_mut() {
                Some((c, s)) if *s == slot && c.id == id => c.tracking.as_deref().and_then(wants),
                _ => match self.conns.get(slot) {
                    Some(Some(c)) if c.id == id => c.tracking.as_deref().and_then(wants),
                    _ => None,
                },
            };
            let Some(redirect) = redirect else { continue }; // gone, tracking off, or not for it
            let target_id = if redirect == 0 { id } else { redirect };
            let delivered = self.send_invalidation(
                current.as_mut().map(|(c, s)| (&mut **c, *s)),
                target_id,
                key.as_deref(),
            );
            if !delivered && redirect != 0 {
                // The redirect target is gone: say so once to the tracking client (RESP3).
                let note = |c: &mut Conn| {
                    if let Some(t) = c.tracking.as_mut() {
                        if !t.broken_redirect {
                            t.broken_redirect = true;
                            if c.proto.is_resp3() {
                                reply::push_len(&mut c.out, c.proto, 2);
                                reply::bulk(&mut c.out, b"tracking-redir-broken");
                                reply::integer(&mut c.out, redirect as i64);
                            }
                        }
                    }
                };
                match current.as_mut() {
                    Some((c, s)) if *s == slot && c.id == id => note(c),
                    _ => {
                        if let Some(Some(c)) = self.conns.get_mut(slot) {
                            if c.id == id {
                                note(c);
                                self.queue_write(slot);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Writes one invalidation to client `target`; false if it is not connected.
    fn send_invalidation(
        &mut self,
        current: Option<(&mut Conn, usize)>,
        target: u64,
        key: Option<&[Vec<u8>]>,
    ) -> bool {
        let wants =
            |c: &Conn| c.proto.is_resp3() || c.pubsub.as_ref().is_some_and(|p| p.channels.contains(CHANNEL));
        if let Some((c, _)) = current {
            if c.id == target {
                if wants(c) {
                    write_invalidation(&mut c.out, c.proto, key);
                }
                return true;
            }
        }
        let Some(slot) = self.conns.iter().position(|c| c.as_ref().is_some_and(|c| c.id == target)) else {
            return false;
        };
        let Some(mut c) = self.conns[slot].take() else { return false };
        if wants(&c) && !c.close_now {
            write_invalidation(&mut c.out, c.proto, key);
            self.check_output_limit(&mut c);
        }
        self.conns[slot] = Some(c);
        self.queue_write(slot);
        true
    }

    /// Tracking off for `conn` (CLIENT TRACKING OFF, RESET, disconnect).
    pub(crate) fn tracking_off(&mut self, conn: &mut Conn, slot: usize) {
        if conn.tracking.take().is_some() {
            self.tracking.clients -= 1;
            self.tracking.remove_prefixes((slot, conn.id));
        }
    }

    /// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP].
    pub(crate) fn client_tracking(&mut self, conn: &mut Conn, slot: usize, args: &[&[u8]]) {
        // As Redis: every option first (a REDIRECT's client must exist now), then ON or OFF,
        // then the combinations, in Redis's order.
        let mut opts = ConnTracking::default();
        let mut i = 3;
        while i < args.len() {
            let a = args[i].to_ascii_lowercase();
            match a.as_slice() {
                b"redirect" if i + 1 < args.len() => {
                    if opts.redirect != 0 {
                        return reply::error(
                            &mut conn.out,
                            b"ERR A client can only redirect to a single other client",
                        );
                    }
                    let Some(id) = util::parse_i64(args[i + 1]) else {
                        return reply::error(&mut conn.out, errors::NOT_INTEGER);
                    };
                    let exists = id > 0
                        && (id as u64 == conn.id || self.conns.iter().flatten().any(|c| c.id == id as u64));
                    if !exists {
                        return reply::error(
                            &mut conn.out,
                            b"ERR The client ID you want redirect to does not exist",
                        );
                    }
                    opts.redirect = id as u64;
                    i += 1;
                }
                b"prefix" if i + 1 < args.len() => {
                    opts.prefixes.push(args[i + 1].to_vec());
                    i += 1;
                }
                b"bcast" => opts.bcast = true,
                b"optin" => opts.optin = true,
                b"optout" => opts.optout = true,
                b"noloop" => opts.noloop = true,
                _ => return reply::error(&mut conn.out, errors::SYNTAX),
            }
            i += 1;
        }
        let on = match args[2].to_ascii_lowercase().as_slice() {
            b"on" => true,
            b"off" => false,
            _ => return reply::error(&mut conn.out, errors::SYNTAX),
        };
        let out = &mut conn.out;
        if !on {
            self.tracking_off(conn, slot);
            return reply::ok(&mut conn.out);
        }
        if !opts.prefixes.is_empty() && !opts.bcast {
            return reply::error(out, b"ERR PREFIX option requires BCAST mode to be enabled");
        }
        if conn.tracking.as_ref().is_some_and(|cur| cur.bcast != opts.bcast) {
            return reply::error(out, b"ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
        }
        if opts.bcast && (opts.optin || opts.optout) {
            return reply::error(out, b"ERR OPTIN and OPTOUT are not compatible with BCAST");
        }
        if opts.optin && opts.optout {
            return reply::error(out, b"ERR You can't specify both OPTIN mode and OPTOUT mode");
        }
        if let Some(cur) = &conn.tracking {
            // Only a switch from one of OPTIN/OPTOUT to the other is refused: plain tracking
            // may become OPTIN or OPTOUT, and either may become plain again (Redis 7.0).
            if (opts.optin && cur.optout) || (opts.optout && cur.optin) {
                return reply::error(out, b"ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
            }
        }
        // Prefixes of one client may not overlap (one would receive each change twice); as in
        // Redis, a prefix equal to another overlaps it, and BCAST's implicit empty prefix
        // overlaps every prefix named later.
        let mine: Vec<Vec<u8>> = conn.tracking.as_ref().map(|t| t.prefixes.clone()).unwrap_or_default();
        let overlap = |p: &[u8], q: &[u8]| p.starts_with(q) || q.starts_with(p);
        for (n, p) in opts.prefixes.iter().enumerate() {
            let existing = mine.iter().find(|q| overlap(p, q)).map(|q| ("an existing", q));
            let provided =
                opts.prefixes[n + 1..].iter().find(|q| overlap(p, q)).map(|q| ("another provided", q));
            if let Some((which, q)) = existing.or(provided) {
                let (a, b) = (String::from_utf8_lossy(p), String::from_utf8_lossy(q));
                let msg = format!(
                    "ERR Prefix '{a}' overlaps with {which} prefix '{b}'. Prefixes for a single client must not overlap."
                );
                return reply::error(out, msg.as_bytes());
            }
        }
        let me = (slot, conn.id);
        if opts.bcast && opts.prefixes.is_empty() {
            // BCAST without PREFIX: the empty prefix (every key), listed by TRACKINGINFO too.
            opts.prefixes.push(Vec::new());
        }
        if opts.bcast {
            for p in opts.prefixes.clone() {
                let clients = self.tracking.prefixes.entry(p).or_default();
                if !clients.contains(&me) {
                    clients.push(me);
                }
            }
        }
        match conn.tracking.as_mut() {
            Some(cur) => {
                // The call's options replace the old ones (BCAST prefixes accumulate).
                cur.optin = opts.optin;
                cur.optout = opts.optout;
                cur.noloop = opts.noloop;
                cur.redirect = opts.redirect;
                cur.broken_redirect = false;
                for p in opts.prefixes {
                    if !cur.prefixes.contains(&p) {
                        cur.prefixes.push(p);
                    }
                }
            }
            None => {
                conn.tracking = Some(Box::new(opts));
                self.tracking.clients += 1;
            }
        }
        reply::ok(&mut conn.out);
    }

    /// CLIENT CACHING YES|NO.
    pub(crate) fn client_caching(&mut self, conn: &mut Conn, args: &[&[u8]]) {
        let out = &mut conn.out;
        // Tracking on first, then the argument, then the mode (Redis's order).
        let Some(t) = conn.tracking.as_mut() else {
            return reply::error(
                out,
                b"ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
            );
        };
        let yes = match args[2].to_ascii_lowercase().as_slice() {
            b"yes" => true,
            b"no" => false,
            _ => return reply::error(out, errors::SYNTAX),
        };
        if yes && !t.optin {
            return reply::error(
                out,
                b"ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
        if !yes && !t.optout {
            return reply::error(
                out,
                b"ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
        t.caching = Some(yes);
        reply::ok(out);
    }

    /// CLIENT TRACKINGINFO.
    pub(crate) fn client_trackinginfo(&mut self, conn: &mut Conn) {
        let proto = conn.proto;
        let out = &mut conn.out;
        reply::map_len(out, proto, 3);
        reply::bulk(out, b"flags");
        let mut flags: Vec<&[u8]> = Vec::new();
        let redirect = match &conn.tracking {
            None => {
                flags.push(b"off");
                -1
            }
            Some(t) => {
                flags.push(b"on");
                for (set, name) in [
                    (t.bcast, &b"bcast"[..]),
                    (t.optin, b"optin"),
                    (t.optout, b"optout"),
                    (t.caching == Some(true), b"caching-yes"),
                    (t.caching == Some(false), b"caching-no"),
                    (t.noloop, b"noloop"),
                    (t.broken_redirect, b"broken_redirect"),
                ] {
                    if set {
                        flags.push(name);
                    }
                }
                t.redirect as i64
            }
        };
        reply::set_len(out, proto, flags.len());
        for f in flags {
            reply::bulk(out, f);
        }
        reply::bulk(out, b"redirect");
        reply::integer(out, redirect);
        reply::bulk(out, b"prefixes");
        let mut prefixes = conn.tracking.as_ref().map(|t| t.prefixes.clone()).unwrap_or_default();
        prefixes.sort(); // Redis lists them from its radix tree: in byte order
        reply::array_len(out, prefixes.len());
        for p in prefixes {
            reply::bulk(out, &p);
        }
    }
}
