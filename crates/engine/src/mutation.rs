//! Canonical mutations, the replication lineage, and Kafka compaction keys.
//!
//! A canonical mutation is a complete RESP2 command that reproduces a write's exact effect
//! wherever and whenever it is applied: relative times are made absolute (`EXPIRE k 10` ->
//! `PEXPIREAT k <ms>`), nondeterministic choices are resolved (`SPOP` -> `SREM` of the members
//! removed), results are written out (`INCRBYFLOAT` -> `SET` of the result), and a write that
//! changed nothing emits nothing. Each mutation advances the lineage's logical offset by one.
//! Mutations travel in [`crate::Batch`]es (batch.rs).

/// A lineage's name: 160 random bits, printed as 40 lowercase hex digits (the form Redis gives
/// `master_replid`). Copy, so every batch can carry it without an allocation.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReplId(pub [u8; 20]);

impl ReplId {
    /// A fresh random id: a new lineage.
    pub fn random() -> ReplId {
        use rand::RngCore;
        let mut bytes = [0u8; 20];
        rand::thread_rng().fill_bytes(&mut bytes);
        ReplId(bytes)
    }

    /// Parses 40 hex digits (either case).
    pub fn parse(s: &str) -> Option<ReplId> {
        ReplId::parse_bytes(s.as_bytes())
    }

    /// As [`ReplId::parse`], from bytes: every firehose frame and journal record carries the
    /// id as text, so a replica parses one per frame.
    pub fn parse_bytes(s: &[u8]) -> Option<ReplId> {
        /// Each byte's hex value, or 0xff for a byte that is not a hex digit.
        const NIBBLE: [u8; 256] = {
            let mut t = [0xffu8; 256];
            let mut i = 0;
            while i < 10 {
                t[b'0' as usize + i] = i as u8;
                i += 1;
            }
            let mut i = 0;
            while i < 6 {
                t[b'a' as usize + i] = 10 + i as u8;
                t[b'A' as usize + i] = 10 + i as u8;
                i += 1;
            }
            t
        };
        let s: &[u8; 40] = s.try_into().ok()?;
        let mut out = [0u8; 20];
        let mut invalid = 0u8;
        for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
            let (hi, lo) = (NIBBLE[pair[0] as usize], NIBBLE[pair[1] as usize]);
            invalid |= (hi | lo) & 0xf0;
            *o = hi << 4 | (lo & 0x0f);
        }
        (invalid == 0).then_some(ReplId(out))
    }
}

impl std::fmt::Display for ReplId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::util::hex(&self.0))
    }
}

impl std::fmt::Debug for ReplId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReplId({self})")
    }
}

/// The replication identity of this server's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replication {
    pub replid: ReplId,
    /// Logical offset: 0 before the first mutation, +1 per canonical mutation. Advanced only
    /// by [`crate::Engine::commit`].
    pub offset: u64,
    /// `(id, p)`: this lineage began at offset `p` as the continuation of lineage `id` through
    /// `p` (Redis's `replid2`): a server holding `id` at exactly `p` has this lineage's
    /// history through `p` and may follow it. None for a lineage begun any other way.
    pub previous: Option<(ReplId, u64)>,
}

impl Replication {
    /// A fresh lineage with a random id, at offset 0.
    pub fn new_lineage() -> Self {
        Replication::at(ReplId::random(), 0)
    }

    /// Lineage `replid` at `offset`, with no predecessor.
    pub fn at(replid: ReplId, offset: u64) -> Self {
        Replication { replid, offset, previous: None }
    }

    /// A new lineage (random id) that continues this one's history from its current offset.
    /// What a server whose later history is unknown starts from its restart point: the
    /// mutations it numbered past that offset before may be lost, and new ones must not
    /// reuse their numbers under the same id (a replica that saw the lost ones would take
    /// the new ones for the same history). Only a server at exactly this offset of this
    /// lineage may follow the new one without a new snapshot.
    pub fn successor(self) -> Self {
        self.successor_named(ReplId::random())
    }

    /// [`Replication::successor`] under a given id: a replica following its upstream's
    /// successor lineage.
    pub fn successor_named(self, replid: ReplId) -> Self {
        Replication { replid, offset: self.offset, previous: Some((self.replid, self.offset)) }
    }
}

/// The Kafka record key of a mutation: the smallest unit the mutation overwrites, so that log
/// compaction keeps only the latest record per unit. `None` for mutations whose effect depends
/// on order and so cannot be compacted (list pushes, whole-key deletes, ...).
///
/// Encoding: each part as a 4-byte big-endian length followed by its bytes; the first part is
/// the uppercase unit kind (`SET`, `HSET`, `SADD`, `ZADD`, ...).
pub fn compaction_key(args: &[&[u8]]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    compaction_key_into(args.len(), |i| args[i], &mut out).then_some(out)
}

/// [`compaction_key`] without allocating (the journal's per-write path): appends the key of
/// the mutation whose `argc` arguments `arg` gives to `out`, and returns whether it has one
/// (`out` is untouched when not).
pub fn compaction_key_into<'a>(argc: usize, arg: impl Fn(usize) -> &'a [u8], out: &mut Vec<u8>) -> bool {
    fn framed(out: &mut Vec<u8>, parts: &[&[u8]]) -> bool {
        out.reserve(parts.iter().map(|p| p.len() + 4).sum());
        for p in parts {
            out.extend_from_slice(&(p.len() as u32).to_be_bytes());
            out.extend_from_slice(p);
        }
        true
    }
    if argc == 0 {
        return false;
    }
    let name = arg(0);
    let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
    match argc {
        // A SET with its absolute deadline fully defines the key's string state.
        n if n >= 3 && is(b"SET") => framed(out, &[b"SET", arg(1)]),
        // One field / member, one mutation: the per-type emitters keep it that way.
        4 if is(b"HSET") => framed(out, &[b"HSET", arg(1), arg(2)]),
        3 if is(b"HDEL") => framed(out, &[b"HSET", arg(1), arg(2)]),
        3 if is(b"SADD") || is(b"SREM") => framed(out, &[b"SADD", arg(1), arg(2)]),
        4 if is(b"ZADD") => framed(out, &[b"ZADD", arg(1), arg(3)]),
        3 if is(b"ZREM") => framed(out, &[b"ZADD", arg(1), arg(2)]),
        4 if is(b"ARSET") => framed(out, &[b"ARSET", arg(1), arg(2)]),
        3 if is(b"ARDEL") => framed(out, &[b"ARSET", arg(1), arg(2)]),
        // The insert cursor is one unit per array: its latest ARSEEK defines it.
        3 if is(b"ARSEEK") => framed(out, &[b"ARSEEK", arg(1)]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_length_framed_and_unambiguous() {
        let a = compaction_key(&[b"HSET", b"a", b"bc", b"v"]).unwrap();
        let b = compaction_key(&[b"HSET", b"ab", b"c", b"v"]).unwrap();
        assert_ne!(a, b);
        assert_eq!(a, compaction_key(&[b"hdel", b"a", b"bc"]).unwrap());
        assert_eq!(compaction_key(&[b"RPUSH", b"l", b"x"]), None);
        assert_eq!(
            compaction_key(&[b"SET", b"k", b"v", b"PXAT", b"1"]),
            Some(b"\0\0\0\x03SET\0\0\0\x01k".to_vec())
        );
    }

    #[test]
    fn the_appending_form_adds_to_what_is_there() {
        let mut out = b"prefix".to_vec();
        assert!(compaction_key_into(3, |i| [&b"srem"[..], b"s", b"m"][i], &mut out));
        assert_eq!(out, [&b"prefix"[..], b"\0\0\0\x04SADD\0\0\0\x01s\0\0\0\x01m"].concat());
        assert!(!compaction_key_into(3, |i| [&b"LPUSH"[..], b"l", b"x"][i], &mut out));
        assert!(!compaction_key_into(0, |_| &b""[..], &mut out));
        assert_eq!(out.len(), 6 + 18);
    }

    #[test]
    fn replid_prints_and_parses_as_40_hex_digits() {
        let id = ReplId::random();
        let text = id.to_string();
        assert_eq!(text.len(), 40);
        assert_eq!(ReplId::parse(&text), Some(id));
        assert_eq!(ReplId::parse(&text.to_uppercase()), Some(id));
        assert_eq!(ReplId::parse("xyz"), None);
        assert_eq!(ReplId::parse(&"g".repeat(40)), None);
        assert_eq!(ReplId::parse_bytes(text.as_bytes()), Some(id));
        assert_eq!(ReplId::parse_bytes(&text.as_bytes()[1..]), None);
        assert_eq!(ReplId::parse_bytes(format!("{text}0").as_bytes()), None);
        let mut odd = text.clone().into_bytes();
        odd[17] = 0xc3;
        assert_eq!(ReplId::parse_bytes(&odd), None);
        for c in [b'/', b':', b'@', b'G', b'`', b'g'] {
            let mut one = text.clone().into_bytes();
            one[0] = c;
            assert_eq!(ReplId::parse_bytes(&one), None, "{}", c as char);
        }
        assert_eq!(ReplId::parse_bytes(&[b'f'; 40]), Some(ReplId([0xff; 20])));
        assert_eq!(ReplId::parse_bytes(&[b'A'; 40]), Some(ReplId([0xaa; 20])));
    }
}
