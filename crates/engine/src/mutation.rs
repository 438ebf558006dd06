//! Canonical mutations, the replication lineage, and Kafka compaction keys.
//!
//! A canonical mutation is a complete RESP2 command that reproduces a write's exact effect
//! wherever and whenever it is applied: relative times are made absolute (`EXPIRE k 10` ->
//! `PEXPIREAT k <ms>`), nondeterministic choices are resolved (`SPOP` -> `SREM` of the members
//! removed), results are written out (`INCRBYFLOAT` -> `SET` of the result), and a write that
//! changed nothing emits nothing. Each mutation advances the lineage's logical offset by one.

/// Mutations of the command batch being executed, RESP2-encoded back to back.
#[derive(Default, Debug)]
pub struct MutationLog {
    /// The encoded mutations, in order.
    pub buf: Vec<u8>,
    /// How many mutations `buf` holds.
    pub count: u64,
}

impl MutationLog {
    pub fn push(&mut self, args: &[&[u8]]) {
        resp::reply::bulk_array(&mut self.buf, args);
        self.count += 1;
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.count = 0;
    }

    /// Decodes the log back into argument vectors (tests and replay).
    pub fn decode(&self) -> Vec<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < self.buf.len() {
            let (frame, used) = resp::decode_frame(&self.buf[at..])
                .expect("mutation log is well formed")
                .expect("mutation log holds whole frames");
            at += used;
            match frame {
                resp::Frame::Array(Some(items)) => out.push(
                    items
                        .into_iter()
                        .map(|f| match f {
                            resp::Frame::Bulk(Some(b)) => b,
                            other => panic!("mutation argument is not a bulk string: {other:?}"),
                        })
                        .collect(),
                ),
                other => panic!("mutation is not an array: {other:?}"),
            }
        }
        out
    }
}

/// The replication identity of this server's history.
#[derive(Clone, Debug)]
pub struct Replication {
    /// 40 hex characters (160 bits, as Redis prints it; the first 128 bits are random and
    /// name the lineage, the rest are random too).
    pub replid: String,
    /// Logical offset: 0 before the first mutation, +1 per canonical mutation.
    pub offset: u64,
}

impl Replication {
    /// A fresh lineage with a random id.
    pub fn new_lineage() -> Self {
        use rand::RngCore;
        let mut bytes = [0u8; 20];
        rand::thread_rng().fill_bytes(&mut bytes);
        let replid = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Replication { replid, offset: 0 }
    }
}

/// The Kafka record key of a mutation: the smallest unit the mutation overwrites, so that log
/// compaction keeps only the latest record per unit. `None` for mutations whose effect depends
/// on order and so cannot be compacted (list pushes, whole-key deletes, ...).
///
/// Encoding: each part as a 4-byte big-endian length followed by its bytes; the first part is
/// the uppercase unit kind (`SET`, `HSET`, `SADD`, `ZADD`, ...).
pub fn compaction_key(args: &[&[u8]]) -> Option<Vec<u8>> {
    fn framed(parts: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 4).sum());
        for p in parts {
            out.extend_from_slice(&(p.len() as u32).to_be_bytes());
            out.extend_from_slice(p);
        }
        out
    }
    let name = args.first()?.to_ascii_uppercase();
    match (name.as_slice(), args.len()) {
        // A SET with its absolute deadline fully defines the key's string state.
        (b"SET", n) if n >= 3 => Some(framed(&[b"SET", args[1]])),
        // One field / member, one mutation: the per-type emitters keep it that way.
        (b"HSET", 4) | (b"HDEL", 3) => Some(framed(&[b"HSET", args[1], args[2]])),
        (b"SADD", 3) | (b"SREM", 3) => Some(framed(&[b"SADD", args[1], args[2]])),
        (b"ZADD", 4) => Some(framed(&[b"ZADD", args[1], args[3]])),
        (b"ZREM", 3) => Some(framed(&[b"ZADD", args[1], args[2]])),
        (b"ARSET", 4) | (b"ARDEL", 3) => Some(framed(&[b"ARSET", args[1], args[2]])),
        // The insert cursor is one unit per array: its latest ARSEEK defines it.
        (b"ARSEEK", 3) => Some(framed(&[b"ARSEEK", args[1]])),
        _ => None,
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
    fn log_round_trips() {
        let mut log = MutationLog::default();
        log.push(&[b"SET", b"k\r\n", b""]);
        log.push(&[b"DEL", b"x"]);
        assert_eq!(log.count, 2);
        assert_eq!(
            log.decode(),
            vec![vec![b"SET".to_vec(), b"k\r\n".to_vec(), vec![]], vec![b"DEL".to_vec(), b"x".to_vec()]]
        );
    }
}
