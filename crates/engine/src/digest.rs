//! `DEBUG DIGEST` and `DEBUG DIGEST-VALUE`: a fingerprint of the dataset that two servers share
//! exactly when their contents are equal, TTLs and array insert cursors included.
//!
//! Each key hashes to 160 bits from its canonical form ([`store::Plain`]: collections in
//! member/index order, integers as their decimal text, scores as their bit patterns), so the
//! encoding a value happens to use (packed or large, int or bytes) never shows. The dataset's
//! digest is the XOR of its keys' digests: independent of insertion order and of the table's
//! layout; all zeros for an empty dataset. Every field is length-framed before it is hashed, so
//! distinct contents cannot be confused by shifting bytes between fields.
//!
//! The hash is XXH3 (128 bits, then 64 more bits keyed by those 128), not SHA-1 as in Redis: it
//! is a comparison aid for tests and operators, not a defence against forged data, and it
//! need not equal Redis's digest of the same data.

use store::{Keyspace, Millis, Plain, ValueRef};
use xxhash_rust::xxh3::{xxh3_64_with_seed, Xxh3};

/// A 160-bit digest.
pub type Digest = [u8; 20];

struct Hasher(Xxh3);

impl Hasher {
    fn new() -> Self {
        Hasher(Xxh3::new())
    }
    /// One length-framed field.
    fn field(&mut self, bytes: &[u8]) {
        self.0.update(&(bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }
    fn int(&mut self, v: u64) {
        self.0.update(&v.to_le_bytes());
    }
    fn finish(self) -> Digest {
        let a = self.0.digest128().to_le_bytes();
        let b = xxh3_64_with_seed(&a, 0x676f_626c_696e).to_le_bytes();
        let mut d = [0u8; 20];
        d[..16].copy_from_slice(&a);
        d[16..].copy_from_slice(&b[..4]);
        d
    }
}

fn hash_value(h: &mut Hasher, v: &Plain) {
    match v {
        Plain::Str(s) => {
            h.field(b"string");
            h.field(s);
        }
        Plain::Hash(m) => {
            h.field(b"hash");
            h.int(m.len() as u64);
            for (f, v) in m {
                h.field(f);
                h.field(v);
            }
        }
        // The same fields, then each deadline: two hashes that differ only in when a field
        // expires have different digests.
        Plain::HashWithDeadlines(m, d) => {
            h.field(b"hash");
            h.int(m.len() as u64);
            for (f, v) in m {
                h.field(f);
                h.field(v);
            }
            h.field(b"field-deadlines");
            h.int(d.len() as u64);
            for (f, t) in d {
                h.field(f);
                h.int(*t as u64);
            }
        }
        Plain::Set(s) => {
            h.field(b"set");
            h.int(s.len() as u64);
            for m in s {
                h.field(m);
            }
        }
        Plain::ZSet(z) => {
            h.field(b"zset");
            h.int(z.len() as u64);
            for (m, score) in z {
                h.field(m);
                h.int(*score);
            }
        }
        Plain::List(l) => {
            h.field(b"list");
            h.int(l.len() as u64);
            for e in l {
                h.field(e);
            }
        }
        Plain::Array(items, cursor) => {
            h.field(b"array");
            h.int(items.len() as u64);
            for (i, v) in items {
                h.int(*i);
                h.field(v);
            }
            h.int(*cursor);
        }
        Plain::VectorSet(v) => {
            h.field(b"vectorset");
            h.int(v.dim as u64);
            h.field(v.quant.as_bytes());
            h.int(v.m as u64);
            h.int(v.projection_input_dim as u64);
            h.int(v.elements.len() as u64);
            for (name, vector, attr) in &v.elements {
                h.field(name);
                h.field(vector);
                match attr {
                    Some(a) => {
                        h.int(1);
                        h.field(a);
                    }
                    None => h.int(0),
                }
            }
        }
        Plain::Stream(st) => {
            // Entries in ID order, the stream's IDs and counters, then each group with its
            // pending entries and consumers (consumer seen/active times are not data: they
            // are left out, as a key's access time is).
            let id = |h: &mut Hasher, i: &store::StreamId| {
                h.int(i.ms);
                h.int(i.seq);
            };
            h.field(b"stream");
            h.int(st.entries.len() as u64);
            for (i, fields) in &st.entries {
                id(h, i);
                h.int(fields.len() as u64);
                for (f, v) in fields {
                    h.field(f);
                    h.field(v);
                }
            }
            id(h, &st.last_id);
            id(h, &st.max_deleted_id);
            h.int(st.entries_added);
            h.int(st.groups.len() as u64);
            for g in &st.groups {
                h.field(&g.name);
                id(h, &g.last_id);
                h.int(g.entries_read as u64);
                h.int(g.pending.len() as u64);
                for (i, consumer, time, count) in &g.pending {
                    id(h, i);
                    h.field(consumer);
                    h.int(*time as u64);
                    h.int(*count);
                }
                h.int(g.consumers.len() as u64);
                for c in &g.consumers {
                    h.field(c);
                }
            }
            // IDMP settings and iids, only for a stream that has them (a stream without keeps
            // the digest it always had); the lifetime counts are statistics and stay out.
            if let Some((duration, maxsize, producers)) = &st.idmp {
                h.field(b"idmp");
                h.int(*duration);
                h.int(*maxsize);
                h.int(producers.len() as u64);
                for (pid, iids) in producers {
                    h.field(pid);
                    h.int(iids.len() as u64);
                    for (iid, i) in iids {
                        h.field(iid);
                        id(h, i);
                    }
                }
            }
        }
    }
}

/// The digest of one key: its name, value and deadline.
pub fn key_digest(key: &[u8], value: &ValueRef<'_>, expire_at: Option<Millis>) -> Digest {
    let mut h = Hasher::new();
    h.field(key);
    hash_value(&mut h, &value.to_plain());
    match expire_at {
        Some(t) => {
            h.int(1);
            h.int(t as u64);
        }
        None => h.int(0),
    }
    h.finish()
}

/// `DEBUG DIGEST-VALUE`: the digest of a value alone (no name, no deadline).
pub fn value_digest(value: &ValueRef<'_>) -> Digest {
    let mut h = Hasher::new();
    hash_value(&mut h, &value.to_plain());
    h.finish()
}

/// `DEBUG DIGEST`: the XOR of every key's digest (all zeros when empty). Keys past their
/// deadline but not yet removed count as they are stored: the digest describes the store, and
/// a replica holds such a key until the origin's DEL arrives.
pub fn dataset_digest(ks: &Keyspace) -> Digest {
    let mut acc = [0u8; 20];
    ks.for_each(|k, v, exp| {
        let d = key_digest(k, &v, exp);
        for (a, b) in acc.iter_mut().zip(d) {
            *a ^= b;
        }
    });
    acc
}

/// `DEBUG DIGEST` over every database: database 0's [`dataset_digest`] as it is (a server
/// that uses only database 0 has the digest it always had), XOR each other non-empty
/// database's, hashed together with its number so that the same keys in another database
/// differ.
pub fn databases_digest(e: &crate::Engine) -> Digest {
    let mut acc = [0u8; 20];
    for (db, ks) in e.nonempty_dbs() {
        let mut d = dataset_digest(ks);
        if db != 0 {
            let mut h = Hasher::new();
            h.field(b"database");
            h.int(db as u64);
            h.field(&d);
            d = h.finish();
        }
        for (a, b) in acc.iter_mut().zip(d) {
            *a ^= b;
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::reply;
    use crate::Engine;

    #[test]
    fn empty_is_zero_and_order_does_not_matter() {
        let mut a = Engine::default();
        assert_eq!(dataset_digest(&a.ks), [0u8; 20]);
        let mut b = Engine::default();
        for (k, v) in [("x", "1"), ("y", "2"), ("z", "3")] {
            reply(&mut a, 0, &["SADD", "s", k]);
            reply(&mut a, 0, &["SET", k, v]);
        }
        for (k, v) in [("z", "3"), ("x", "1"), ("y", "2")] {
            reply(&mut b, 0, &["SET", k, v]);
            reply(&mut b, 0, &["SADD", "s", k]);
        }
        assert_eq!(dataset_digest(&a.ks), dataset_digest(&b.ks));
        assert_ne!(dataset_digest(&a.ks), [0u8; 20]);
        // Any difference shows: a value, a TTL, a member.
        reply(&mut b, 0, &["PEXPIREAT", "x", "99999999999"]);
        assert_ne!(dataset_digest(&a.ks), dataset_digest(&b.ks));
        reply(&mut a, 0, &["PEXPIREAT", "x", "99999999999"]);
        assert_eq!(dataset_digest(&a.ks), dataset_digest(&b.ks));
        reply(&mut a, 0, &["SADD", "s", "w"]);
        assert_ne!(dataset_digest(&a.ks), dataset_digest(&b.ks));
    }

    #[test]
    fn encodings_do_not_show() {
        // An int-encoded string equals the same digits stored as bytes; a packed set grown
        // large and shrunk back equals one that was always small.
        let mut a = Engine::default();
        let mut b = Engine::default();
        reply(&mut a, 0, &["SET", "n", "12"]);
        reply(&mut b, 0, &["SET", "n", "1"]);
        reply(&mut b, 0, &["APPEND", "n", "2"]);
        reply(&mut a, 0, &["SADD", "s", "a", "b"]);
        let many: Vec<String> = (0..600).map(|i| format!("m{i}")).collect();
        let mut args = vec!["SADD", "s"];
        args.extend(many.iter().map(String::as_str));
        reply(&mut b, 0, &args);
        let mut args = vec!["SREM", "s"];
        args.extend(many.iter().map(String::as_str));
        reply(&mut b, 0, &args);
        reply(&mut b, 0, &["SADD", "s", "b", "a"]);
        assert_eq!(dataset_digest(&a.ks), dataset_digest(&b.ks));
    }

    #[test]
    fn fields_cannot_shift() {
        let mut a = Engine::default();
        let mut b = Engine::default();
        reply(&mut a, 0, &["HSET", "h", "ab", "c"]);
        reply(&mut b, 0, &["HSET", "h", "a", "bc"]);
        assert_ne!(dataset_digest(&a.ks), dataset_digest(&b.ks));
        assert_eq!(crate::util::hex(&dataset_digest(&Engine::default().ks)), "0".repeat(40));
    }
}
