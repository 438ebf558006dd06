//! Idempotent production into streams (Redis 8.6): XADD's `IDMP pid iid` and `IDMPAUTO pid`,
//! XCFGSET, and the internal XIDMPRECORD. The state and its two clocks are described in
//! `store::types::stream_idmp`.
//!
//! An XADD with IDMP whose (pid, iid) still counts answers the entry that pair added (even if
//! that entry has since been deleted), adds nothing, emits nothing, and counts a duplicate.
//! Otherwise it adds the entry as any XADD does, and records the pair.
//!
//! Canonical mutations, Redis's own forms: after the `XADD key <id> ...` record, an XADD that
//! gave the stream its IDMP state emits `XCFGSET key IDMP-DURATION d IDMP-MAXSIZE m` with the
//! settings it took (a replica's own defaults may differ), then `XIDMPRECORD key pid iid <id>`,
//! then any trim records. XIDMPRECORD replays the recording exactly, eviction included (see the
//! store module), so a replica's iids are the primary's. XCFGSET is recorded with both settings
//! when it changed anything.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::commands::stream::{parse_id, stream_mut};
use crate::ctx::Ctx;
use crate::errors;
use crate::util::{eq_ic, parse_i64};
use resp::reply;
use store::types::stream::Field;
use store::types::stream_idmp::{Idmp, Refused, MAX_DURATION, MAX_MAXSIZE};
use store::{Stream, StreamId};

const K1: (i32, i32, i32) = (1, 1, 1);
const G: &str = "stream";

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec("xcfgset", -2, Flags::WRITE | Flags::FAST, K1, G, "Sets the IDMP configuration parameters for a stream.", Handler::Data(xcfgset)),
    spec("xidmprecord", 5, Flags::WRITE | Flags::DENYOOM | Flags::FAST, K1, G, "An internal command for setting IDMP metadata on an existing stream message.", Handler::Data(xidmprecord)),
];

/// XADD's idempotency option, as parsed.
#[derive(Clone, Copy, Debug)]
pub enum IdmpArg<'a> {
    /// `IDMP pid iid`
    Given(&'a [u8], &'a [u8]),
    /// `IDMPAUTO pid`: the iid is derived from the fields.
    Auto(&'a [u8]),
}

/// XADD's `IDMP pid iid` or `IDMPAUTO pid` at `args[i]`: None when `args[i]` is neither word
/// or too few arguments follow it (it is then XADD's ID, as in Redis's parser); else the option
/// and the index after it, or Redis's error. `seen`: an earlier one was given.
pub fn parse_option<'a>(
    args: &[&'a [u8]],
    i: usize,
    seen: bool,
) -> Option<Result<(IdmpArg<'a>, usize), &'static [u8]>> {
    let given = eq_ic(args[i], b"idmp");
    let takes = if given {
        2
    } else if eq_ic(args[i], b"idmpauto") {
        1
    } else {
        return None;
    };
    if args.len() - 1 - i < takes {
        return None;
    }
    if seen {
        return Some(Err(b"ERR IDMP/IDMPAUTO specified multiple times"));
    }
    let pid = args[i + 1];
    Some(match (given, pid.is_empty()) {
        (true, true) => Err(b"ERR IDMP requires a non-empty producer ID"),
        (true, false) if args[i + 2].is_empty() => Err(b"ERR IDMP requires a non-empty idempotent ID"),
        (true, false) => Ok((IdmpArg::Given(pid, args[i + 2]), i + 3)),
        (false, true) => Err(b"ERR IDMPAUTO requires a non-empty producer ID"),
        (false, false) => Ok((IdmpArg::Auto(pid), i + 2)),
    })
}

pub const ONLY_AUTO_IDS: &[u8] = b"ERR IDMP/IDMPAUTO can be used only with auto-generated IDs";

/// IDMPAUTO's iid: a 128-bit hash of the entry's field-value pairs in sorted order, so the same
/// pairs in any order give the same iid (Redis's rule). Every piece is length-framed.
pub fn auto_iid(pairs: &[Field<'_>]) -> [u8; 16] {
    let mut sorted: Vec<&Field<'_>> = pairs.iter().collect();
    sorted.sort_unstable();
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for (f, v) in sorted {
        h.update(&(f.len() as u64).to_le_bytes());
        h.update(f);
        h.update(&(v.len() as u64).to_le_bytes());
        h.update(v);
    }
    h.digest128().to_le_bytes()
}

/// The settings a stream takes when it first uses IDMP (CONFIG's `stream-idmp-*`).
fn defaults() -> (u64, u64) {
    use store::limits::{get, STREAM_IDMP_DURATION, STREAM_IDMP_MAXSIZE};
    (get(&STREAM_IDMP_DURATION) as u64, get(&STREAM_IDMP_MAXSIZE) as u64)
}

/// The entry a still-counting (pid, iid) added, counting the duplicate: XADD's check before
/// it adds anything.
pub fn duplicate_of(s: &mut Stream, pid: &[u8], iid: &[u8], now: store::Millis) -> Option<StreamId> {
    let state = s.idmp_mut()?;
    let hit = state.lookup(pid, iid, now.max(0) as u64)?;
    state.duplicates += 1;
    Some(hit)
}

/// Records (pid, iid) -> `id` after XADD added entry `id` to `s`. None if the state refused it
/// (not while IDs follow the clock: a `*` ID is at or above it, so what the lookup found expired
/// has expired as of the entry too; the state is then left as it was and nothing is recorded,
/// so a replica stays alike). Else the settings the state was created with, if this created it
/// (for [`emit_recorded`]).
pub fn record_added(s: &mut Stream, pid: &[u8], iid: &[u8], id: StreamId) -> Option<Option<(u64, u64)>> {
    let (duration, maxsize) = defaults();
    let (state, created) = s.idmp_or_init(duration, maxsize);
    let settings = (state.duration(), state.maxsize());
    state.record(pid, iid, id).ok()?;
    Some(created.then_some(settings))
}

/// Emits the records that replay [`record_added`] (see the module docs), after XADD's own.
pub fn emit_recorded(
    c: &mut Ctx,
    key: &[u8],
    pid: &[u8],
    iid: &[u8],
    id: StreamId,
    created: Option<(u64, u64)>,
) {
    if let Some((duration, maxsize)) = created {
        emit_cfgset(c, key, duration, maxsize);
    }
    let idb = id.to_bytes();
    c.emit(&[b"XIDMPRECORD", key, pid, iid, &idb]);
}

fn emit_cfgset(c: &mut Ctx, key: &[u8], duration: u64, maxsize: u64) {
    let mut b1 = itoa::Buffer::new();
    let mut b2 = itoa::Buffer::new();
    c.emit(&[
        b"XCFGSET",
        key,
        b"IDMP-DURATION",
        b1.format(duration).as_bytes(),
        b"IDMP-MAXSIZE",
        b2.format(maxsize).as_bytes(),
    ]);
}

/// XCFGSET key [IDMP-DURATION seconds] [IDMP-MAXSIZE count]
fn xcfgset(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (mut duration, mut maxsize) = (None, None);
    let mut i = 2;
    while i < args.len() {
        let word = args[i];
        let (slot, what, hi) = if eq_ic(word, b"idmp-duration") {
            (&mut duration, &b"IDMP-DURATION"[..], MAX_DURATION)
        } else if eq_ic(word, b"idmp-maxsize") {
            (&mut maxsize, &b"IDMP-MAXSIZE"[..], MAX_MAXSIZE)
        } else {
            return reply::error(out, errors::SYNTAX);
        };
        let Some(v) = args.get(i + 1) else { return reply::error(out, errors::SYNTAX) };
        let Some(n) = parse_i64(v) else { return reply::error(out, errors::NOT_INTEGER) };
        if !(1..=hi as i64).contains(&n) {
            let mut msg = b"ERR ".to_vec();
            msg.extend_from_slice(what);
            msg.extend_from_slice(format!(" must be between 1 and {hi}").as_bytes());
            return reply::error(out, &msg);
        }
        *slot = Some(n as u64);
        i += 2;
    }
    if duration.is_none() && maxsize.is_none() {
        return reply::error(out, b"ERR At least one parameter must be specified");
    }
    let key = args[1];
    let (d0, m0) = defaults();
    let s = match stream_mut(c, key) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(None) => return reply::error(out, errors::NO_SUCH_KEY),
        Ok(Some(s)) => s,
    };
    let (state, created) = s.idmp_or_init(d0, m0);
    let (d, m) = (duration.unwrap_or(state.duration()), maxsize.unwrap_or(state.maxsize()));
    let changed = state.configure(d, m);
    if created || changed {
        emit_cfgset(c, key, d, m);
    }
    reply::ok(out);
}

/// XIDMPRECORD key pid iid id: records that (pid, iid) added entry `id`, which the stream must
/// hold. `OK` also when the pair already maps to `id`; an error when it maps to another entry
/// that still counts as of `id`.
fn xidmprecord(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    let (key, pid, iid) = (args[1], args[2], args[3]);
    let id = match parse_id(args[4], 0, true) {
        Ok(id) => id,
        Err(e) => return reply::error(out, e),
    };
    if pid.is_empty() {
        return reply::error(out, b"ERR IDMP requires a non-empty producer ID");
    }
    if iid.is_empty() {
        return reply::error(out, b"ERR IDMP requires a non-empty idempotent ID");
    }
    let (d0, m0) = defaults();
    let s = match stream_mut(c, key) {
        Err(()) => return reply::error(out, errors::WRONGTYPE),
        Ok(None) => return reply::error(out, errors::NO_SUCH_KEY),
        Ok(Some(s)) => s,
    };
    if s.get(id).is_none() {
        return reply::error(out, b"ERR The stream ID does not refer to an existing entry");
    }
    let (state, created) = s.idmp_or_init(d0, m0);
    let settings = (state.duration(), state.maxsize());
    match state.record(pid, iid, id) {
        Ok(false) => return reply::ok(out),
        Ok(true) => {}
        Err(refused) => {
            return reply::error(
                out,
                match refused {
                    Refused::Conflict(_) => b"ERR The IDMP pair already maps to a different stream ID",
                    Refused::OutOfOrder => {
                        b"ERR The stream ID is not above the last one recorded for this producer"
                    }
                },
            );
        }
    }
    if created {
        emit_cfgset(c, key, settings.0, settings.1);
    }
    c.emit(args);
    reply::ok(out);
}

/// XINFO STREAM's IDMP fields, for a stream that has the state (Redis 8.6 lists them once
/// IDMP is configured).
pub fn info_fields(out: &mut Vec<u8>, state: &Idmp) {
    for (name, v) in [
        (&b"idmp-duration"[..], state.duration()),
        (b"idmp-maxsize", state.maxsize()),
        (b"pids-tracked", state.pids_tracked() as u64),
        (b"iids-tracked", state.iids_tracked()),
        (b"iids-added", state.added),
        (b"iids-duplicates", state.duplicates),
    ] {
        reply::bulk(out, name);
        reply::integer(out, v as i64);
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{reply, take_muts};
    use crate::Engine;

    /// The ID in a bulk reply.
    fn bulk(r: &str) -> String {
        r.split("\r\n").nth(1).unwrap_or_default().to_string()
    }

    #[test]
    fn a_retried_xadd_answers_the_original_entry_and_adds_nothing() {
        let mut e = Engine::default();
        let now = 1_700_000_000_000;
        let id1 = bulk(&reply(&mut e, now, &["XADD", "s", "IDMP", "p1", "pay-1", "*", "amount", "100"]));
        assert_eq!(id1, format!("{now}-0"));
        assert_eq!(
            take_muts(&mut e),
            vec![
                format!("XADD s {id1} amount 100"),
                "XCFGSET s IDMP-DURATION 100 IDMP-MAXSIZE 100".to_string(),
                format!("XIDMPRECORD s p1 pay-1 {id1}"),
            ]
        );
        // Same pair, other fields: the original ID, nothing added or recorded.
        assert_eq!(
            bulk(&reply(&mut e, now + 5, &["XADD", "s", "IDMP", "p1", "pay-1", "*", "amount", "200"])),
            id1
        );
        assert!(take_muts(&mut e).is_empty());
        assert_eq!(reply(&mut e, now, &["XLEN", "s"]), ":1\r\n");
        // Another producer may use the same iid; the second XADD of a stream records no XCFGSET.
        let id2 = bulk(&reply(
            &mut e,
            now + 5,
            &["XADD", "s", "IDMP", "p2", "pay-1", "MAXLEN", "1", "*", "a", "b"],
        ));
        assert_ne!(id2, id1);
        assert_eq!(
            take_muts(&mut e),
            vec![
                format!("XADD s {id2} a b"),
                format!("XIDMPRECORD s p2 pay-1 {id2}"),
                "XTRIM s MAXLEN = 1".to_string(),
            ]
        );
        // The first entry is gone, its pair still answers it.
        assert_eq!(bulk(&reply(&mut e, now + 6, &["XADD", "s", "IDMP", "p1", "pay-1", "*", "x", "y"])), id1);
        // After the window (100 s), the pair no longer counts.
        let later = now + 100_000;
        let id3 = bulk(&reply(&mut e, later, &["XADD", "s", "IDMP", "p1", "pay-1", "*", "amount", "300"]));
        assert_eq!(id3, format!("{later}-0"));
        let info = reply(&mut e, later, &["XINFO", "STREAM", "s"]);
        for field in [
            "idmp-duration\r\n:100",
            "pids-tracked\r\n:2",
            "iids-tracked\r\n:2",
            "iids-added\r\n:3",
            "iids-duplicates\r\n:2",
        ] {
            assert!(info.contains(field), "{field} in {info}");
        }
    }

    #[test]
    fn idmpauto_derives_the_iid_from_the_pairs_in_any_order() {
        let mut e = Engine::default();
        let a = bulk(&reply(&mut e, 1000, &["XADD", "s", "IDMPAUTO", "p", "*", "f1", "a", "f2", "b"]));
        assert_eq!(bulk(&reply(&mut e, 1001, &["XADD", "s", "IDMPAUTO", "p", "*", "f2", "b", "f1", "a"])), a);
        let b = bulk(&reply(&mut e, 1001, &["XADD", "s", "IDMPAUTO", "p", "*", "f1", "b", "f2", "a"]));
        assert_ne!(a, b);
        assert_ne!(bulk(&reply(&mut e, 1001, &["XADD", "s", "IDMPAUTO", "q", "*", "f1", "a", "f2", "b"])), a);
        assert_eq!(reply(&mut e, 1001, &["XLEN", "s"]), ":3\r\n");
    }

    #[test]
    fn xadd_idmp_refuses_what_redis_refuses() {
        let mut e = Engine::default();
        let err = |e: &mut Engine, args: &[&str]| reply(e, 1000, args);
        assert_eq!(
            err(&mut e, &["XADD", "s", "IDMP", "p1", "*", "f", "v"]),
            "-ERR Invalid stream ID specified as stream command argument\r\n"
        );
        for args in [
            &["XADD", "s", "IDMP", "p1", "i1", "1-1", "f", "v"][..],
            &["XADD", "s", "IDMPAUTO", "p1", "1-*", "f", "v"],
        ] {
            assert_eq!(err(&mut e, args), "-ERR IDMP/IDMPAUTO can be used only with auto-generated IDs\r\n");
        }
        for args in [
            &["XADD", "s", "IDMP", "p1", "i1", "IDMP", "p2", "i2", "*", "f", "v"][..],
            &["XADD", "s", "IDMPAUTO", "p1", "IDMP", "p2", "i2", "*", "f", "v"],
            &["XADD", "s", "IDMP", "p1", "i1", "IDMPAUTO", "p2", "*", "f", "v"],
        ] {
            assert_eq!(err(&mut e, args), "-ERR IDMP/IDMPAUTO specified multiple times\r\n");
        }
        assert_eq!(
            err(&mut e, &["XADD", "s", "IDMP", "", "i", "*", "f", "v"]),
            "-ERR IDMP requires a non-empty producer ID\r\n"
        );
        assert_eq!(
            err(&mut e, &["XADD", "s", "IDMP", "p", "", "*", "f", "v"]),
            "-ERR IDMP requires a non-empty idempotent ID\r\n"
        );
        assert_eq!(
            err(&mut e, &["XADD", "s", "IDMPAUTO", "", "*", "f", "v"]),
            "-ERR IDMPAUTO requires a non-empty producer ID\r\n"
        );
        // Options in any order around the trim; NOMKSTREAM on a missing key answers nil.
        assert_eq!(err(&mut e, &["XADD", "s", "NOMKSTREAM", "IDMP", "p", "i", "*", "f", "v"]), "$-1\r\n");
        assert!(err(&mut e, &["XADD", "s", "MAXLEN", "~", "100", "IDMP", "p", "i", "*", "f", "v"])
            .starts_with('$'));
        assert!(err(&mut e, &["XADD", "s", "KEEPREF", "IDMPAUTO", "p", "MAXLEN", "5", "*", "f", "v"])
            .starts_with('$'));
        assert!(take_muts(&mut e).iter().all(|m| !m.contains("IDMP ")));
    }

    #[test]
    fn xcfgset_validates_and_clears_only_on_a_change() {
        let mut e = Engine::default();
        assert_eq!(reply(&mut e, 1000, &["XCFGSET", "s", "IDMP-DURATION", "5"]), "-ERR no such key\r\n");
        let id = bulk(&reply(&mut e, 1000, &["XADD", "s", "IDMP", "p", "i", "*", "f", "v"]));
        take_muts(&mut e);
        for (args, want) in [
            (&["XCFGSET", "s"][..], "-ERR At least one parameter must be specified\r\n"),
            (&["XCFGSET", "s", "IDMP-DURATION"], "-ERR syntax error\r\n"),
            (&["XCFGSET", "s", "NOPE", "1"], "-ERR syntax error\r\n"),
            (&["XCFGSET", "s", "IDMP-DURATION", "3.14"], "-ERR value is not an integer or out of range\r\n"),
            (&["XCFGSET", "s", "IDMP-DURATION", "000"], "-ERR value is not an integer or out of range\r\n"),
            (
                &["XCFGSET", "s", "IDMP-MAXSIZE", "INVALID", "IDMP-DURATION"],
                "-ERR value is not an integer or out of range\r\n",
            ),
            (
                &["XCFGSET", "s", "IDMP-DURATION", "86401"],
                "-ERR IDMP-DURATION must be between 1 and 86400\r\n",
            ),
            (&["XCFGSET", "s", "IDMP-MAXSIZE", "0"], "-ERR IDMP-MAXSIZE must be between 1 and 10000\r\n"),
        ] {
            assert_eq!(reply(&mut e, 1000, args), want, "{args:?}");
        }
        assert!(take_muts(&mut e).is_empty());
        // The same settings: nothing changes, nothing is recorded, the pair still counts.
        assert_eq!(
            reply(&mut e, 1000, &["XCFGSET", "s", "IDMP-DURATION", "100", "IDMP-MAXSIZE", "100"]),
            "+OK\r\n"
        );
        assert!(take_muts(&mut e).is_empty());
        assert_eq!(bulk(&reply(&mut e, 1001, &["XADD", "s", "IDMP", "p", "i", "*", "f", "v"])), id);
        // A change forgets every pair.
        assert_eq!(reply(&mut e, 1001, &["XCFGSET", "s", "IDMP-MAXSIZE", "3"]), "+OK\r\n");
        assert_eq!(take_muts(&mut e), vec!["XCFGSET s IDMP-DURATION 100 IDMP-MAXSIZE 3".to_string()]);
        assert_ne!(bulk(&reply(&mut e, 1002, &["XADD", "s", "IDMP", "p", "i", "*", "f", "v"])), id);
        reply(&mut e, 1002, &["SET", "str", "x"]);
        assert!(reply(&mut e, 1002, &["XCFGSET", "str", "IDMP-MAXSIZE", "3"]).starts_with("-WRONGTYPE"));
    }

    #[test]
    fn xidmprecord_replays_a_recording_and_refuses_conflicts() {
        let mut e = Engine::default();
        reply(&mut e, 1000, &["XADD", "s", "5-0", "f", "v"]);
        reply(&mut e, 1000, &["XADD", "s", "6-0", "f", "v"]);
        take_muts(&mut e);
        assert_eq!(reply(&mut e, 1000, &["XIDMPRECORD", "s", "p", "i", "5-0"]), "+OK\r\n");
        assert_eq!(
            take_muts(&mut e),
            vec![
                "XCFGSET s IDMP-DURATION 100 IDMP-MAXSIZE 100".to_string(),
                "XIDMPRECORD s p i 5-0".to_string()
            ]
        );
        assert_eq!(reply(&mut e, 1000, &["XIDMPRECORD", "s", "p", "i", "5-0"]), "+OK\r\n");
        assert!(take_muts(&mut e).is_empty());
        assert_eq!(
            reply(&mut e, 1000, &["XIDMPRECORD", "s", "p", "i", "6-0"]),
            "-ERR The IDMP pair already maps to a different stream ID\r\n"
        );
        assert_eq!(
            reply(&mut e, 1000, &["XIDMPRECORD", "s", "p", "j", "7-0"]),
            "-ERR The stream ID does not refer to an existing entry\r\n"
        );
        assert_eq!(reply(&mut e, 1000, &["XIDMPRECORD", "nope", "p", "j", "7-0"]), "-ERR no such key\r\n");
        // A producer's pairs stay in entry order (snapshots rely on it).
        assert_eq!(reply(&mut e, 1000, &["XIDMPRECORD", "s", "p", "k", "6-0"]), "+OK\r\n");
        assert_eq!(
            reply(&mut e, 1000, &["XIDMPRECORD", "s", "p", "j", "5-0"]),
            "-ERR The stream ID is not above the last one recorded for this producer\r\n"
        );
        // The recorded pair deduplicates a client's XADD (the entry's ms, 5, is within 100 s of
        // the clock at 1000 ms).
        assert_eq!(bulk(&reply(&mut e, 1000, &["XADD", "s", "IDMP", "p", "i", "*", "f", "w"])), "5-0");
    }
}
