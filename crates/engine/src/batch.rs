//! The write path's unit: a [`Batch`] is every canonical mutation of one atomic unit of work
//! (one command, one EXEC, one script, one blocked command served later, one round of active
//! expiry, or a run of replayed records), with the lineage and logical offsets it was committed
//! at.
//!
//! Handlers append mutations to the engine's pending batch through [`crate::Ctx::emit`]; the
//! engine numbers them when the batch commits ([`crate::Engine::commit`]), the only place a
//! logical offset advances. The server then lends the committed batch, in commit order, to each
//! of its sinks (WATCH today; the Kafka journal, the firehose and a snapshot in progress later).
//!
//! Invariants of a committed batch:
//! - mutation `i` carries logical offset `first_offset + i`: the offset the lineage has after
//!   applying it (the first mutation of a lineage carries 1);
//! - `buf` is exactly the mutations' RESP2 encodings back to back (`*N\r\n$len\r\narg\r\n...`),
//!   so a sink that forwards bytes (Kafka, firehose) copies slices and never re-encodes;
//! - every argument's position in `buf` is recorded while encoding, so a sink that needs keys
//!   or arguments (WATCH, the journal's compaction keys) never re-parses RESP;
//! - every mutation belongs to one database (`SELECT`), 0 unless `db_runs` says otherwise: the
//!   mutation encodings never name it (they are the Redis commands as a client would send
//!   them), so every sink carries it beside them (a Kafka header, a firehose marker).

use crate::command::CommandSpec;
use crate::mutation::ReplId;
use std::ops::Range;

/// Mutations this large (their arguments' bytes) get their encoding's room reserved at once.
const BIG_MUTATION: usize = 64 * 1024;
/// A cleared batch keeps an encoding buffer up to this capacity.
const BUF_KEEP: usize = 4 << 20;

/// What produced a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// One client command (outside MULTI).
    Command,
    /// One MULTI/EXEC transaction: all its commands' mutations.
    Exec,
    /// One script (EVAL / FCALL).
    Script,
    /// A blocking command parked earlier and served now.
    BlockedRetry,
    /// One round of active expiry.
    ActiveExpiry,
    /// Keys evicted to get under maxmemory before a command ran: their `DEL`s, committed before
    /// the command (whatever it then does, even an OOM error), as Redis propagates evictions
    /// ahead of the command that triggered them.
    Eviction,
    /// Records applied from outside (Kafka, firehose, a snapshot's tail): see
    /// [`crate::Engine::apply_record`].
    Replay,
    /// Records another producer wrote to the journal topic, applied by a running primary as it
    /// consumes them (bounded runs, between client commands). Every sink receives them except
    /// the journal, which must never write them again (they are in the topic already).
    External,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::Command => "command",
            Origin::Exec => "exec",
            Origin::Script => "script",
            Origin::BlockedRetry => "blocked-retry",
            Origin::ActiveExpiry => "active-expiry",
            Origin::Eviction => "eviction",
            Origin::Replay => "replay",
            Origin::External => "external",
        }
    }
}

/// One atomic unit of canonical mutations. See the module documentation for its invariants.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The lineage the mutations were committed in.
    pub replid: ReplId,
    /// Logical offset of the first mutation (0 while the batch is pending).
    pub first_offset: u64,
    pub origin: Origin,
    /// The RESP2 encodings, back to back.
    buf: Vec<u8>,
    /// Mutation `i` is `buf[starts[i]..starts[i + 1]]` (the last one ends at `buf.len()`).
    starts: Vec<usize>,
    /// Argument spans in `buf`, all mutations' arguments in order.
    args: Vec<(usize, usize)>,
    /// Mutation `i`'s arguments are `args[arg_starts[i]..arg_starts[i + 1]]`.
    arg_starts: Vec<usize>,
    /// The database the next pushed mutation belongs to.
    db: u32,
    /// `(i, db)`: mutations from index `i` on belong to `db`, up to the next run; mutations
    /// before the first run belong to database 0. Empty (no allocation) while every mutation
    /// is in database 0, the common case.
    db_runs: Vec<(usize, u32)>,
    /// While set, [`Batch::push`] appends nothing: a replayed canonical record is its own
    /// mutation, so what its execution would emit is dropped unencoded (see
    /// `Engine::apply_record`).
    discarding: bool,
}

impl Batch {
    pub fn new(replid: ReplId) -> Batch {
        Batch {
            replid,
            first_offset: 0,
            origin: Origin::Command,
            buf: Vec::new(),
            starts: Vec::new(),
            args: Vec::new(),
            arg_starts: Vec::new(),
            db: 0,
            db_runs: Vec::new(),
            discarding: false,
        }
    }

    /// The database the mutations pushed from now on belong to.
    pub fn set_db(&mut self, db: u32) {
        self.db = db;
    }

    /// Notes the current database for the mutation about to be appended at index `len()`.
    fn note_db(&mut self) {
        let last = self.db_runs.last().map_or(0, |r| r.1);
        if last != self.db {
            self.db_runs.push((self.starts.len(), self.db));
        }
    }

    /// The database of mutation `i`.
    pub fn db_of(&self, i: usize) -> u32 {
        self.db_runs.iter().rev().find(|r| r.0 <= i).map_or(0, |r| r.1)
    }

    /// Whether any mutation belongs to a database other than 0.
    pub fn has_other_dbs(&self) -> bool {
        !self.db_runs.is_empty()
    }

    /// Starts or ends dropping what [`Batch::push`] is given.
    pub(crate) fn set_discarding(&mut self, discarding: bool) {
        self.discarding = discarding;
    }

    /// Appends one mutation, encoding it as a RESP2 array of bulk strings.
    /// Room for `mutations` more mutations of `args_each` arguments, `bytes` of encoding in
    /// all: a RESTORE writes a whole collection out at once, which would otherwise grow every
    /// list here by doubling, copying it each time.
    pub fn reserve(&mut self, mutations: usize, args_each: usize, bytes: usize) {
        if self.discarding {
            return;
        }
        self.starts.reserve(mutations);
        self.arg_starts.reserve(mutations);
        self.args.reserve(mutations.saturating_mul(args_each));
        self.buf.reserve(bytes);
    }

    pub fn push(&mut self, args: &[&[u8]]) {
        if self.discarding {
            return;
        }
        self.note_db();
        self.starts.push(self.buf.len());
        self.arg_starts.push(self.args.len());
        let buf = &mut self.buf;
        if args.iter().map(|a| a.len()).sum::<usize>() >= BIG_MUTATION {
            // One allocation of the right size for a big value, not a doubling (a 64 MiB SET
            // would otherwise be copied once more by the reallocation).
            buf.reserve(Batch::encoded_len(args));
        }
        buf.push(b'*');
        buf.extend_from_slice(itoa::Buffer::new().format(args.len()).as_bytes());
        buf.extend_from_slice(b"\r\n");
        for a in args {
            buf.push(b'$');
            buf.extend_from_slice(itoa::Buffer::new().format(a.len()).as_bytes());
            buf.extend_from_slice(b"\r\n");
            self.args.push((buf.len(), a.len()));
            buf.extend_from_slice(a);
            buf.extend_from_slice(b"\r\n");
        }
    }

    /// The length of `args`' RESP2 encoding as [`Batch::push`] writes it.
    fn encoded_len(args: &[&[u8]]) -> usize {
        fn digits(mut n: usize) -> usize {
            let mut d = 1;
            while n >= 10 {
                n /= 10;
                d += 1;
            }
            d
        }
        args.iter().fold(3 + digits(args.len()), |sum, a| sum + 5 + digits(a.len()) + a.len())
    }

    /// Appends the mutation `args` that was parsed from `encoded` (every argument a slice of
    /// it): copied byte for byte when `encoded` is exactly what [`Batch::push`] would write,
    /// which its length tells (any non-canonical form of a length, a sign or leading zeros, is
    /// longer); re-encoded otherwise.
    pub fn push_parsed(&mut self, encoded: &[u8], args: &[&[u8]]) {
        if encoded.len() != Batch::encoded_len(args) {
            return self.push(args);
        }
        if self.discarding {
            return;
        }
        self.note_db();
        let base = self.buf.len();
        self.starts.push(base);
        self.arg_starts.push(self.args.len());
        let origin = encoded.as_ptr() as usize;
        for a in args {
            let at = (a.as_ptr() as usize).wrapping_sub(origin);
            assert!(at <= encoded.len() && a.len() <= encoded.len() - at, "an argument outside its encoding");
            self.args.push((base + at, a.len()));
        }
        self.buf.extend_from_slice(encoded);
    }

    /// Number of mutations.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Logical offset of the last mutation (meaningful once committed and non-empty).
    pub fn last_offset(&self) -> u64 {
        self.first_offset + self.len() as u64 - 1
    }

    /// Every mutation's RESP2 bytes, back to back.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Mutation `i`.
    pub fn get(&self, i: usize) -> Mutation<'_> {
        let end = self.starts.get(i + 1).copied().unwrap_or(self.buf.len());
        let arg_end = self.arg_starts.get(i + 1).copied().unwrap_or(self.args.len());
        Mutation {
            offset: self.first_offset + i as u64,
            db: self.db_of(i),
            bytes: &self.buf[self.starts[i]..end],
            batch_buf: &self.buf,
            args: &self.args[self.arg_starts[i]..arg_end],
        }
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = Mutation<'_>> + '_ {
        self.iter_from(0)
    }

    /// The mutations from index `start` on, reached directly (a `skip` over [`Batch::iter`]
    /// would build each one it passes: quadratic over a script's long batch).
    pub fn iter_from(&self, start: usize) -> impl ExactSizeIterator<Item = Mutation<'_>> + '_ {
        (start.min(self.len())..self.len()).map(move |i| self.get(i))
    }

    /// Drops the mutations from index `n` on (a replayed record's re-emitted mutations, a
    /// rejected record's partial output).
    pub fn truncate(&mut self, n: usize) {
        if n >= self.len() {
            return;
        }
        self.buf.truncate(self.starts[n]);
        self.args.truncate(self.arg_starts[n]);
        self.starts.truncate(n);
        self.arg_starts.truncate(n);
        while self.db_runs.last().is_some_and(|r| r.0 >= n) {
            self.db_runs.pop();
        }
    }

    /// Empties the batch, keeping its allocations for reuse (but not an encoding buffer grown
    /// past [`BUF_KEEP`] by a big value: that memory would stay with the batch for good).
    pub fn clear(&mut self) {
        self.buf.clear();
        if self.buf.capacity() > BUF_KEEP {
            self.buf = Vec::new();
        }
        self.starts.clear();
        self.args.clear();
        self.arg_starts.clear();
        self.db_runs.clear();
        self.first_offset = 0;
    }

    /// Bytes held by the encodings (for accounting and limits).
    pub fn byte_len(&self) -> usize {
        self.buf.len()
    }

    /// Every mutation as owned arguments (tests and tools).
    pub fn to_args(&self) -> Vec<Vec<Vec<u8>>> {
        self.iter().map(|m| m.args().map(<[u8]>::to_vec).collect()).collect()
    }
}

/// One mutation of a batch, borrowed.
#[derive(Clone, Copy)]
pub struct Mutation<'a> {
    /// Its logical offset.
    pub offset: u64,
    /// The database it applies to (`SELECT`).
    pub db: u32,
    /// Its complete RESP2 encoding (what a Kafka record's value or a replayed record holds).
    pub bytes: &'a [u8],
    batch_buf: &'a [u8],
    args: &'a [(usize, usize)],
}

impl<'a> Mutation<'a> {
    pub fn argc(&self) -> usize {
        self.args.len()
    }

    /// Argument `i` (0 is the command name).
    pub fn arg(&self, i: usize) -> &'a [u8] {
        let (at, len) = self.args[i];
        &self.batch_buf[at..at + len]
    }

    pub fn args(&self) -> impl ExactSizeIterator<Item = &'a [u8]> + 'a {
        let buf = self.batch_buf;
        self.args.iter().map(move |&(at, len)| &buf[at..at + len])
    }

    /// The command name as written (canonical mutations use uppercase).
    pub fn name(&self) -> &'a [u8] {
        self.arg(0)
    }

    /// The command table's row for this mutation (None for a name the table does not know,
    /// which a committed batch never holds unless a sink is fed by hand).
    pub fn spec(&self) -> Option<&'static CommandSpec> {
        crate::command::lookup(self.name())
    }

    /// The argument positions that name keys, by the table's key specification; empty for a
    /// keyless mutation (FLUSHALL) or an unknown name.
    pub fn key_positions(&self) -> Range<usize> {
        match self.spec() {
            Some(spec) if spec.first_key > 0 => {
                let argc = self.argc() as i64;
                let last = if spec.last_key < 0 { argc + spec.last_key as i64 } else { spec.last_key as i64 };
                let last = last.min(argc - 1);
                if last < spec.first_key as i64 {
                    return 0..0;
                }
                spec.first_key as usize..last as usize + 1
            }
            _ => 0..0,
        }
    }

    /// The keys this mutation names, in argument order.
    pub fn keys(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let step = self.spec().map(|s| s.key_step.max(1) as usize).unwrap_or(1);
        let me = *self;
        self.key_positions().step_by(step).map(move |i| me.arg(i))
    }
}

impl std::fmt::Debug for Mutation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.args().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        write!(f, "#{} {}", self.offset, parts.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_big_mutation_is_encoded_in_one_allocation_and_not_kept() {
        let mut b = Batch::new(ReplId::random());
        let big = vec![b'x'; 5 << 20];
        b.push(&[b"SET", b"k", &big]);
        // Reserved at its exact size: no doubling past it.
        assert_eq!(b.buf.capacity(), b.byte_len());
        assert_eq!(b.byte_len(), Batch::encoded_len(&[b"SET", b"k", &big]));
        b.clear();
        assert!(b.buf.capacity() <= BUF_KEEP, "a cleared batch keeps {} bytes", b.buf.capacity());
        // Small mutations keep their buffer for reuse.
        b.push(&[b"SET", b"k", b"v"]);
        let cap = b.buf.capacity();
        b.clear();
        assert_eq!(b.buf.capacity(), cap);
    }

    #[test]
    fn encodes_resp2_and_records_spans() {
        let mut b = Batch::new(ReplId::random());
        b.push(&[b"SET", b"k\r\n", b""]);
        b.push(&[b"DEL", b"x", b"y"]);
        b.first_offset = 7;
        assert_eq!(
            b.bytes(),
            b"*3\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$0\r\n\r\n*3\r\n$3\r\nDEL\r\n$1\r\nx\r\n$1\r\ny\r\n"
        );
        assert_eq!(b.len(), 2);
        assert_eq!(b.last_offset(), 8);
        let m = b.get(0);
        assert_eq!(m.offset, 7);
        assert_eq!(m.bytes, b"*3\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$0\r\n\r\n");
        assert_eq!(m.args().collect::<Vec<_>>(), vec![&b"SET"[..], b"k\r\n", b""]);
        assert_eq!(m.keys().collect::<Vec<_>>(), vec![&b"k\r\n"[..]]);
        let m = b.get(1);
        assert_eq!(m.keys().collect::<Vec<_>>(), vec![&b"x"[..], b"y"]);
        // The encoding is exactly what the RESP decoder reads back.
        let (frame, used) = resp::decode_frame(m.bytes).unwrap().unwrap();
        assert_eq!(used, m.bytes.len());
        assert!(matches!(frame, resp::Frame::Array(Some(ref v)) if v.len() == 3));
    }

    proptest::proptest! {
        /// A mutation pushed in its canonical encoding is the same mutation as one pushed as
        /// arguments.
        #[test]
        fn pushing_an_encoding_equals_pushing_its_arguments(
            args in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40), 1..12),
            before in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..5), 1..4),
        ) {
            let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let before: Vec<&[u8]> = before.iter().map(Vec::as_slice).collect();
            let mut want = Batch::new(ReplId::random());
            want.push(&before);
            want.push(&args);
            let mut one = Batch::new(want.replid);
            one.push(&args);
            let encoded = one.bytes().to_vec();
            proptest::prop_assert_eq!(encoded.len(), Batch::encoded_len(&args));
            // The arguments as a parse of the encoding finds them: slices of `encoded`.
            let parsed: Vec<&[u8]> = one.get(0).args().map(|a| {
                let at = a.as_ptr() as usize - one.bytes().as_ptr() as usize;
                &encoded[at..at + a.len()]
            }).collect();
            let mut got = Batch::new(want.replid);
            got.push(&before);
            got.push_parsed(&encoded, &parsed);
            proptest::prop_assert_eq!(got.bytes(), want.bytes());
            proptest::prop_assert_eq!(&got.starts, &want.starts);
            proptest::prop_assert_eq!(&got.args, &want.args);
            proptest::prop_assert_eq!(&got.arg_starts, &want.arg_starts);
        }
    }

    #[test]
    fn keys_follow_the_table_step_and_flush_has_none() {
        let mut b = Batch::new(ReplId::random());
        b.push(&[b"MSET", b"a", b"1", b"b", b"2"]);
        b.push(&[b"FLUSHALL"]);
        b.push(&[b"NOSUCH", b"a"]);
        assert_eq!(b.get(0).keys().collect::<Vec<_>>(), vec![&b"a"[..], b"b"]);
        assert_eq!(b.get(1).keys().count(), 0);
        assert_eq!(b.get(2).keys().count(), 0);
    }

    #[test]
    fn truncate_drops_whole_mutations() {
        let mut b = Batch::new(ReplId::random());
        b.push(&[b"SET", b"a", b"1"]);
        let one = b.bytes().to_vec();
        b.push(&[b"SET", b"b", b"2"]);
        b.truncate(1);
        assert_eq!(b.len(), 1);
        assert_eq!(b.bytes(), &one[..]);
        b.push(&[b"DEL", b"c"]);
        assert_eq!(b.to_args()[1], vec![b"DEL".to_vec(), b"c".to_vec()]);
    }

    #[test]
    fn iter_from_starts_at_its_index() {
        let mut b = Batch::new(ReplId::random());
        for k in [b"a", b"b", b"c"] {
            b.push(&[b"SET", k, b"1"]);
        }
        let keys = |from| b.iter_from(from).map(|m| m.arg(1).to_vec()).collect::<Vec<_>>();
        assert_eq!(keys(1), [b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(b.iter_from(1).next().map(|m| m.offset), Some(1));
        assert!(keys(3).is_empty() && keys(7).is_empty());
        assert_eq!(b.iter_from(0).len(), 3);
    }
}
