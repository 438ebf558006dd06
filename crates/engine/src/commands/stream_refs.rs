//! What deleting a stream entry does to the consumer groups that still point at it (Redis 8.2):
//! XDELEX, XACKDEL, and the `KEEPREF | DELREF | ACKED` option of XADD's and XTRIM's trimming.
//!
//! - `KEEPREF` (the default, and all XDEL and XTRIM did before): the entry goes, any pending
//!   entry naming it stays (a dangling reference, as before).
//! - `DELREF`: the entry goes, and so does every group's pending entry for it.
//! - `ACKED`: the entry goes only if no group needs it: none has it pending and every group has
//!   read past it (an entry above some group's last-delivered ID is still to be read). A stream
//!   without groups needs nothing, so ACKED deletes there (Redis's source; its docs say
//!   otherwise).
//!
//! Replies of XDELEX and XACKDEL, per ID: -1 (no such entry, or for XACKDEL not pending in the
//! group), 1 (deleted; for XACKDEL acknowledged and deleted, even if the entry was gone
//! already), 2 (kept because a group still needs it; XACKDEL did acknowledge it).
//!
//! Canonical mutations: `XACK key group id ...` for every pending entry removed (the named
//! group's, and with DELREF the others'), then `XDEL key id ...` for the entries deleted. A
//! trim with DELREF or ACKED is `XTRIM key MINID = <last removed + 1> DELREF|ACKED`: entries are
//! visited in ID order and every one the policy allows goes until the bound (or LIMIT) is met,
//! so on the same prior state that trim removes exactly the same entries, LIMIT or not. (A list
//! of XDELs would not do: XDEL moves the stream's max-deleted ID, trimming does not.)

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::commands::stream::{look, parse_id, stream_mut, Look};
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{eq_ic, parse_i64};
use resp::reply;
use store::types::stream::Trim;
use store::{Stream, StreamId};

const WF: u32 = Flags::WRITE | Flags::FAST;
const K1: (i32, i32, i32) = (1, 1, 1);
const G: &str = "stream";

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec("xdelex", -5, WF, K1, G, "Deletes one or multiple entries from the stream.", Handler::Data(xdelex)),
    spec("xackdel", -6, WF, K1, G, "Acknowledges and conditionally deletes one or multiple entries (messages) for a stream consumer group.", Handler::Data(xackdel)),
];

/// What a deletion does to the groups' references to the entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RefPolicy {
    #[default]
    KeepRef,
    DelRef,
    Acked,
}

impl RefPolicy {
    pub fn from_word(w: &[u8]) -> Option<RefPolicy> {
        if eq_ic(w, b"keepref") {
            Some(RefPolicy::KeepRef)
        } else if eq_ic(w, b"delref") {
            Some(RefPolicy::DelRef)
        } else if eq_ic(w, b"acked") {
            Some(RefPolicy::Acked)
        } else {
            None
        }
    }

    pub fn name(self) -> &'static [u8] {
        match self {
            RefPolicy::KeepRef => b"KEEPREF",
            RefPolicy::DelRef => b"DELREF",
            RefPolicy::Acked => b"ACKED",
        }
    }
}

/// A mutation being collected, emitted once the stream's borrow ends.
type Mut = Vec<Vec<u8>>;

/// Which groups still need entries: the lowest last-delivered ID among them (anything above it
/// is unread by someone), or None without groups.
fn lowest_last_id(s: &Stream) -> Option<StreamId> {
    s.groups().and_then(|g| g.values().map(|g| g.last_id).min())
}

/// Whether some group still needs entry `id`: it has it pending, or has not read that far.
fn referenced(s: &Stream, lowest: Option<StreamId>, id: StreamId) -> bool {
    match lowest {
        None => false,
        Some(low) => id > low || s.groups().is_some_and(|g| g.values().any(|g| g.pel().contains_key(&id))),
    }
}

/// Drops every group's pending entry for `id` (DELREF), recording an `XACK` for each.
fn drop_references(s: &mut Stream, key: &[u8], id: StreamId, muts: &mut Vec<Mut>) {
    let names: Vec<Vec<u8>> = match s.groups() {
        Some(g) => g.iter().filter(|(_, g)| g.pel().contains_key(&id)).map(|(n, _)| n.clone()).collect(),
        None => return,
    };
    for name in names {
        if s.group_mut(&name).expect("listed above").ack(id) {
            muts.push(vec![b"XACK".to_vec(), key.to_vec(), name, id.to_bytes()]);
        }
    }
}

/// Trims entry by entry for DELREF and ACKED: from the first entry on, while `how` says more
/// must go and fewer than `limit` (0: no limit) went, each entry goes unless ACKED finds a group
/// that needs it (then it stays and counts towards the length, and the walk goes on). DELREF
/// drops the groups' pending entries for what it removes (their XACKs go to `muts`). Returns
/// the number removed and the last ID removed.
pub fn trim_by_refs(
    s: &mut Stream,
    key: &[u8],
    how: Trim,
    policy: RefPolicy,
    limit: u64,
    muts: &mut Vec<Mut>,
) -> (u64, Option<StreamId>) {
    let lowest = lowest_last_id(s);
    let mut len = s.len();
    let mut victims: Vec<StreamId> = Vec::new();
    s.range(StreamId::MIN, StreamId::MAX, false, |id, _| {
        let more = match how {
            Trim::MaxLen(m) => len > m,
            Trim::MinId(min) => id < min,
        };
        if !more || (limit > 0 && victims.len() as u64 >= limit) {
            return false;
        }
        if policy == RefPolicy::Acked && referenced(s, lowest, id) {
            return true;
        }
        victims.push(id);
        len -= 1;
        true
    });
    for &id in &victims {
        if policy == RefPolicy::DelRef {
            drop_references(s, key, id, muts);
        }
        s.delete(id);
    }
    (victims.len() as u64, victims.last().copied())
}

/// The canonical record of a [`trim_by_refs`] that removed entries up to `last`.
pub fn trim_record(key: &[u8], policy: RefPolicy, last: StreamId) -> Mut {
    // `last` is a live entry's ID, so below the largest ID: it has a successor.
    let bound = last.next().unwrap_or(StreamId::MAX);
    vec![
        b"XTRIM".to_vec(),
        key.to_vec(),
        b"MINID".to_vec(),
        b"=".to_vec(),
        bound.to_bytes(),
        policy.name().to_vec(),
    ]
}

/// Parses `[KEEPREF | DELREF | ACKED] IDS numids id [id ...]` (any order, the policy at most
/// once): the policy and the ID arguments, or the error written to `out`.
fn parse_opts<'a>(out: &mut Vec<u8>, args: &[&'a [u8]]) -> Option<(RefPolicy, Vec<&'a [u8]>)> {
    let mut policy = None;
    let mut ids: Option<Vec<&[u8]>> = None;
    let mut i = 0;
    while i < args.len() {
        if let Some(p) = RefPolicy::from_word(args[i]).filter(|_| policy.is_none()) {
            policy = Some(p);
            i += 1;
        } else if eq_ic(args[i], b"ids") && i + 1 < args.len() {
            let n = match parse_i64(args[i + 1]) {
                Some(n) if n >= 1 => n as usize,
                _ => {
                    reply::error(out, b"ERR Number of IDs must be a positive integer");
                    return None;
                }
            };
            if n > args.len() - i - 2 {
                reply::error(out, b"ERR The `numids` parameter must match the number of arguments");
                return None;
            }
            ids = Some(args[i + 2..i + 2 + n].to_vec());
            i += 2 + n;
        } else {
            reply::error(out, errors::SYNTAX);
            return None;
        }
    }
    match ids {
        Some(ids) => Some((policy.unwrap_or_default(), ids)),
        None => {
            reply::error(out, b"ERR IDS option is required");
            None
        }
    }
}

/// Parses every ID strictly (no `-`/`+`), before anything changes.
fn parse_ids(out: &mut Vec<u8>, args: &[&[u8]]) -> Option<Vec<StreamId>> {
    let mut ids = Vec::with_capacity(args.len());
    for a in args {
        match parse_id(a, 0, true) {
            Ok(id) => ids.push(id),
            Err(e) => {
                reply::error(out, e);
                return None;
            }
        }
    }
    Some(ids)
}

fn all_missing(out: &mut Vec<u8>, n: usize) {
    reply::array_len(out, n);
    (0..n).for_each(|_| reply::integer(out, -1));
}

/// Deletes `id` as XDEL does (the max-deleted ID follows); true if it was there.
fn delete_entry(s: &mut Stream, id: StreamId) -> bool {
    let gone = s.delete(id);
    if gone && id > s.max_deleted_id() {
        s.set_max_deleted_id(id);
    }
    gone
}

fn xdel_record(key: &[u8], deleted: &[StreamId]) -> Option<Mut> {
    (!deleted.is_empty()).then(|| {
        let mut m: Mut = vec![b"XDEL".to_vec(), key.to_vec()];
        m.extend(deleted.iter().map(|id| id.to_bytes()));
        m
    })
}

/// XDELEX key [KEEPREF | DELREF | ACKED] IDS numids id [id ...]
fn xdelex(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let key = args[1];
    let missing = match look(c, key) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Missing => true,
        Look::Stream(_) => false,
    };
    let Some((policy, id_args)) = parse_opts(out, &args[2..]) else { return };
    if missing {
        return all_missing(out, id_args.len());
    }
    let Some(ids) = parse_ids(out, &id_args) else { return };
    let Ok(Some(s)) = stream_mut(c, key) else { unreachable!("looked up above") };
    let mut muts: Vec<Mut> = Vec::new();
    let mut deleted = Vec::new();
    // Deleting and acknowledging move no group's last-delivered ID.
    let lowest = lowest_last_id(s);
    reply::array_len(out, ids.len());
    for id in ids {
        if policy == RefPolicy::Acked && referenced(s, lowest, id) {
            reply::integer(out, 2);
            continue;
        }
        if policy == RefPolicy::DelRef {
            drop_references(s, key, id, &mut muts);
        }
        if delete_entry(s, id) {
            deleted.push(id);
            reply::integer(out, 1);
        } else {
            reply::integer(out, -1);
        }
    }
    muts.extend(xdel_record(key, &deleted));
    c.emit_all(&muts);
}

/// XACKDEL key group [KEEPREF | DELREF | ACKED] IDS numids id [id ...]
fn xackdel(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (key, group) = (args[1], args[2]);
    let missing = match look(c, key) {
        Look::Wrong => return reply::error(out, errors::WRONGTYPE),
        Look::Missing => true,
        Look::Stream(s) => s.group(group).is_none(),
    };
    let Some((policy, id_args)) = parse_opts(out, &args[3..]) else { return };
    if missing {
        return all_missing(out, id_args.len());
    }
    let Some(ids) = parse_ids(out, &id_args) else { return };
    let Ok(Some(s)) = stream_mut(c, key) else { unreachable!("looked up above") };
    let mut acked = Vec::new();
    let mut others: Vec<Mut> = Vec::new();
    let mut deleted = Vec::new();
    let lowest = lowest_last_id(s);
    reply::array_len(out, ids.len());
    for id in ids {
        if !s.group_mut(group).expect("looked up above").ack(id) {
            reply::integer(out, -1);
            continue;
        }
        acked.push(id);
        match policy {
            RefPolicy::Acked if referenced(s, lowest, id) => {
                reply::integer(out, 2);
                continue;
            }
            RefPolicy::DelRef => drop_references(s, key, id, &mut others),
            _ => {}
        }
        if delete_entry(s, id) {
            deleted.push(id);
        }
        reply::integer(out, 1);
    }
    let mut muts: Vec<Mut> = Vec::new();
    if !acked.is_empty() {
        let mut m: Mut = vec![b"XACK".to_vec(), key.to_vec(), group.to_vec()];
        m.extend(acked.iter().map(|id| id.to_bytes()));
        muts.push(m);
    }
    muts.extend(others);
    muts.extend(xdel_record(key, &deleted));
    c.emit_all(&muts);
}

#[cfg(test)]
mod tests {
    use crate::Engine;

    const NOW: i64 = 1_700_000_000_000;

    fn run(e: &mut Engine, cmd: &str) -> (String, Vec<String>) {
        crate::testing::run_line(e, NOW, cmd)
    }

    fn r(e: &mut Engine, cmd: &str) -> String {
        run(e, cmd).0
    }

    fn ints(v: &[i64]) -> String {
        let mut s = format!("*{}\r\n", v.len());
        v.iter().for_each(|i| s.push_str(&format!(":{i}\r\n")));
        s
    }

    /// A stream 1-0 .. 5-0 read (1-0 and 2-0) by groups g1 and g2, and g3 created at the end.
    fn with_groups() -> Engine {
        let mut e = Engine::default();
        for i in 1..=5 {
            r(&mut e, &format!("XADD s {i}-0 f v"));
        }
        r(&mut e, "XGROUP CREATE s g1 0");
        r(&mut e, "XGROUP CREATE s g2 0");
        r(&mut e, "XREADGROUP GROUP g1 c COUNT 2 STREAMS s >");
        r(&mut e, "XREADGROUP GROUP g2 c COUNT 2 STREAMS s >");
        e
    }

    #[test]
    fn xdelex_policies() {
        let mut e = with_groups();
        // ACKED: 1-0 is pending in both groups, 4-0 unread by both.
        assert_eq!(run(&mut e, "XDELEX s ACKED IDS 2 1-0 4-0"), (ints(&[2, 2]), vec![]));
        // KEEPREF deletes and leaves the references.
        assert_eq!(run(&mut e, "XDELEX s IDS 2 4-0 9-0"), (ints(&[1, -1]), vec!["XDEL s 4-0".into()]));
        assert_eq!(r(&mut e, "XPENDING s g1").lines().nth(1), Some(":2"));
        // DELREF drops the pending entries in every group.
        assert_eq!(
            run(&mut e, "XDELEX s DELREF IDS 1 1-0"),
            (ints(&[1]), vec!["XACK s g1 1-0".into(), "XACK s g2 1-0".into(), "XDEL s 1-0".into()])
        );
        assert_eq!(r(&mut e, "XPENDING s g2").lines().nth(1), Some(":1"));
        // Once both groups acknowledged 2-0 and read past it, ACKED deletes it.
        r(&mut e, "XACK s g1 2-0");
        assert_eq!(r(&mut e, "XDELEX s ACKED IDS 1 2-0"), ints(&[2]));
        r(&mut e, "XACK s g2 2-0");
        assert_eq!(run(&mut e, "XDELEX s ACKED IDS 1 2-0"), (ints(&[1]), vec!["XDEL s 2-0".into()]));
        assert_eq!(r(&mut e, "XLEN s"), ":2\r\n");
        // Without groups nothing is referenced.
        r(&mut e, "XADD t 1-0 f v");
        assert_eq!(r(&mut e, "XDELEX t ACKED IDS 1 1-0"), ints(&[1]));
        // A missing key answers -1 for every ID, without parsing them.
        assert_eq!(r(&mut e, "XDELEX nokey IDS 2 x y"), ints(&[-1, -1]));
    }

    #[test]
    fn xackdel_policies() {
        let mut e = with_groups();
        assert_eq!(
            run(&mut e, "XACKDEL s g1 ACKED IDS 3 1-0 2-0 3-0"),
            (ints(&[2, 2, -1]), vec!["XACK s g1 1-0 2-0".into()])
        );
        assert_eq!(
            run(&mut e, "XACKDEL s g2 ACKED IDS 2 1-0 2-0"),
            (ints(&[1, 1]), vec!["XACK s g2 1-0 2-0".into(), "XDEL s 1-0 2-0".into()])
        );
        r(&mut e, "XREADGROUP GROUP g1 c COUNT 1 STREAMS s >");
        r(&mut e, "XREADGROUP GROUP g2 c COUNT 1 STREAMS s >");
        assert_eq!(
            run(&mut e, "XACKDEL s g1 DELREF IDS 1 3-0"),
            (ints(&[1]), vec!["XACK s g1 3-0".into(), "XACK s g2 3-0".into(), "XDEL s 3-0".into()])
        );
        assert_eq!(r(&mut e, "XACKDEL s g2 IDS 1 3-0"), ints(&[-1]));
        assert_eq!(r(&mut e, "XACKDEL s nogroup IDS 1 3-0"), ints(&[-1]));
        assert_eq!(r(&mut e, "XACKDEL nokey g IDS 1 3-0"), ints(&[-1]));
    }

    #[test]
    fn argument_errors() {
        let mut e = with_groups();
        r(&mut e, "SET str v");
        for (cmd, want) in [
            ("XDELEX s IDS 0 1-0", "ERR Number of IDs must be a positive integer"),
            ("XDELEX s IDS x 1-0", "ERR Number of IDs must be a positive integer"),
            ("XDELEX s IDS 3 1-0 2-0", "ERR The `numids` parameter must match the number of arguments"),
            ("XDELEX s IDS 1 1-0 2-0", "ERR syntax error"),
            ("XDELEX s ACKED DELREF IDS 1 1-0", "ERR syntax error"),
            ("XDELEX s FOO IDS 1 1-0", "ERR syntax error"),
            ("XDELEX s IDS 1 +", "ERR Invalid stream ID specified as stream command argument"),
            ("XDELEX str IDS 1 1-0", "WRONGTYPE Operation against a key holding the wrong kind of value"),
            ("XACKDEL s g1 IDS 1 abc", "ERR Invalid stream ID specified as stream command argument"),
            ("XACKDEL s g1 KEEPREF KEEPREF IDS 1 1-0", "ERR syntax error"),
        ] {
            assert_eq!(r(&mut e, cmd), format!("-{want}\r\n"), "{cmd}");
        }
        // The IDS block may come before the policy.
        assert_eq!(r(&mut e, "XDELEX s IDS 1 5-0 DELREF"), ints(&[1]));
    }

    #[test]
    fn trimming_with_policies() {
        let mut e = with_groups();
        // g1 and g2 have 1-0, 2-0 pending and 3-0..5-0 unread: ACKED can remove nothing.
        assert_eq!(run(&mut e, "XTRIM s MAXLEN = 0 ACKED"), (":0\r\n".into(), vec![]));
        r(&mut e, "XACK s g1 1-0");
        r(&mut e, "XACK s g2 1-0");
        assert_eq!(
            run(&mut e, "XTRIM s MAXLEN = 0 ACKED"),
            (":1\r\n".into(), vec!["XTRIM s MINID = 1-1 ACKED".into()])
        );
        // DELREF removes the prefix and the pending entries for it.
        assert_eq!(
            run(&mut e, "XTRIM s MINID 3-0 DELREF"),
            (
                ":1\r\n".into(),
                vec!["XACK s g1 2-0".into(), "XACK s g2 2-0".into(), "XTRIM s MINID = 2-1 DELREF".into()]
            )
        );
        // XADD trims after appending; the new entry is unread, so ACKED keeps it.
        r(&mut e, "XGROUP DESTROY s g2");
        r(&mut e, "XREADGROUP GROUP g1 c STREAMS s >");
        r(&mut e, "XACK s g1 3-0 4-0 5-0");
        let (reply, muts) = run(&mut e, "XADD s MAXLEN = 1 ACKED 6-0 f v");
        assert_eq!(reply, "$3\r\n6-0\r\n");
        assert_eq!(muts, vec!["XADD s 6-0 f v".to_string(), "XTRIM s MINID = 5-1 ACKED".into()]);
        assert_eq!(r(&mut e, "XLEN s"), ":1\r\n");
        // A LIMIT with ~ stops the walk early; KEEPREF still trims as before.
        for i in 7..=12 {
            r(&mut e, &format!("XADD s {i}-0 f v"));
        }
        r(&mut e, "XREADGROUP GROUP g1 c STREAMS s >");
        r(&mut e, "XACK s g1 6-0 7-0 8-0 9-0 10-0 11-0 12-0");
        assert_eq!(
            run(&mut e, "XTRIM s MAXLEN ~ 0 LIMIT 2 ACKED").1,
            vec!["XTRIM s MINID = 7-1 ACKED".to_string()]
        );
        assert_eq!(run(&mut e, "XTRIM s MAXLEN = 4 KEEPREF").1, vec!["XTRIM s MAXLEN = 4".to_string()]);
        assert_eq!(r(&mut e, "XTRIM s MAXLEN = 4 ACKED DELREF"), "-ERR syntax error\r\n");
        assert_eq!(
            r(&mut e, "XADD s ACKED DELREF * f v"),
            "-ERR Invalid stream ID specified as stream command argument\r\n"
        );
    }
}
