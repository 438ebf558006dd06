//! The firehose wire format: RESP2 arrays, private to goblin-core (both ends run the same
//! version; the hello carries it so that a mismatch is refused before anything is applied).
//!
//! ```text
//! subscriber -> upstream   GOBLIN.FIREHOSE                        (after AUTH, if required)
//! upstream -> subscriber   *7  HELLO  :proto  $version  $replid  :offset  $prev_replid  :prev_offset
//!                          *N  BATCH  :proto  $replid  :first  :acked_logical  :acked_broker
//!                              :consumer_position  [:db] $m1 [:db] $m2 ...
//!                                                  (N = 7 + mutations + database markers)
//!                          *4  TICK  :released-offset  :acked_logical  :acked_broker
//!                                                          (after a second without frames)
//! subscriber -> upstream   GOBLIN.ACK <offset>                    (applied through offset)
//! ```
//!
//! `HELLO`'s offset is the upstream's released logical offset: every later mutation arrives in
//! a `BATCH`. `prev_replid`/`prev_offset` name the lineage the upstream's began from and the
//! offset where it did ([`engine::Replication::previous`]; 40 zeros and -1: none): a
//! subscriber at exactly that offset of that lineage holds the same history and may follow.
//!
//! A batch frame is one committed batch (an atomic unit: one command, one EXEC, one
//! script); its i-th mutation (a complete canonical RESP2 command, carried as a bulk string)
//! has logical offset `first + i`. A mutation belongs to database 0 unless an integer element
//! `:db` precedes it: that marker says the mutations after it belong to database `db`, up to
//! the next marker (a batch in database 0 only has none; a marker is always followed by a
//! mutation). `acked_logical`/`acked_broker` are the sender's best Kafka
//! cursor when it sent the frame: the record of logical offset `acked_logical` sits at broker
//! offset `acked_broker` (-1/-1 when unknown), so a replica that has applied through
//! `acked_logical` may later seek Kafka inclusively from `acked_broker` without skipping a
//! record it lacks. `consumer_position` is the sender's journal consumer position when it
//! committed the batch (-1: none): every other producer's record below it is reflected in the
//! state through this frame, so a replica that applied the frame and later catches up through
//! Kafka treats those records as duplicates instead of applying them twice.

use engine::ReplId;

/// Bumped whenever the frames change shape or meaning.
pub const PROTOCOL_VERSION: i64 = 6;

/// The build's version: both ends of a firehose must run exactly the same one.
pub const BUILD_VERSION: &str = concat!("goblin-core ", env!("CARGO_PKG_VERSION"));

/// A Kafka cursor: the record of logical offset `logical` is at broker offset `broker`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub logical: i64,
    pub broker: i64,
}

impl Cursor {
    pub const UNKNOWN: Cursor = Cursor { logical: -1, broker: -1 };
}

/// A decoded frame, borrowing the input buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    Hello {
        proto: i64,
        version: &'a [u8],
        replid: ReplId,
        offset: u64,
        /// The lineage the upstream's began from, and the offset where it did.
        previous: Option<(ReplId, u64)>,
    },
    Batch(BatchFrame<'a>),
    /// The upstream is alive and has released through `offset` (sent when it has sent nothing
    /// else for a second, so that a silent upstream can be told from a dead one); `cursor` is
    /// its Kafka cursor now, as a batch frame's (an idle link's last mutations get confirmed).
    Tick {
        offset: u64,
        cursor: Cursor,
    },
}

#[derive(Debug, PartialEq, Eq)]
pub struct BatchFrame<'a> {
    pub proto: i64,
    pub replid: ReplId,
    pub first: u64,
    pub cursor: Cursor,
    /// The sender's journal consumer position (see the module documentation; -1: none).
    pub position: i64,
    /// The canonical mutations, each one complete RESP2 command.
    pub muts: Vec<&'a [u8]>,
    /// `(i, db)`: the mutations from index `i` on belong to database `db`, up to the next
    /// entry; before the first, database 0 (as [`engine::Batch`] keeps them).
    pub dbs: Vec<(usize, u32)>,
}

impl BatchFrame<'_> {
    pub fn last(&self) -> u64 {
        self.first + self.muts.len() as u64 - 1
    }

    /// The database of mutation `i`.
    pub fn db_of(&self, i: usize) -> u32 {
        self.dbs.iter().rev().find(|r| r.0 <= i).map_or(0, |r| r.1)
    }
}

fn push_int(out: &mut Vec<u8>, n: i64) {
    out.push(b':');
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// The replication id as a 40-hex-digit bulk string, written in place (once per frame: no
/// allocation on the write path).
fn push_replid(out: &mut Vec<u8>, id: ReplId) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    // Built on the stack and appended once: pushing 40 bytes one by one checked the
    // buffer's capacity 40 times, on every frame.
    let mut text = *b"$40\r\n0000000000000000000000000000000000000000\r\n";
    for (i, b) in id.0.iter().enumerate() {
        text[5 + 2 * i] = HEX[(b >> 4) as usize];
        text[6 + 2 * i] = HEX[(b & 15) as usize];
    }
    out.extend_from_slice(&text);
}

fn push_bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.push(b'$');
    out.extend_from_slice(itoa::Buffer::new().format(b.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

pub fn encode_hello(out: &mut Vec<u8>, replid: ReplId, offset: u64, previous: Option<(ReplId, u64)>) {
    out.extend_from_slice(b"*7\r\n$5\r\nHELLO\r\n");
    push_int(out, PROTOCOL_VERSION);
    push_bulk(out, BUILD_VERSION.as_bytes());
    push_replid(out, replid);
    push_int(out, offset as i64);
    let (id, at) = previous.map_or((ReplId([0; 20]), -1), |(id, at)| (id, at as i64));
    push_replid(out, id);
    push_int(out, at);
}

/// A heartbeat naming the released offset and the Kafka cursor.
pub fn encode_tick(out: &mut Vec<u8>, offset: u64, cursor: Cursor) {
    out.extend_from_slice(b"*4\r\n$4\r\nTICK\r\n");
    push_int(out, offset as i64);
    push_int(out, cursor.logical);
    push_int(out, cursor.broker);
}

/// Bytes a batch frame's header takes at most: the array and command lines (about 30), the
/// protocol version, the replid bulk (47) and four integers (at most 23 each).
const FRAME_HEADER_MAX: usize = 200;
/// Bytes a bulk string adds to its payload at most: `$`, up to 20 digits, two CRLFs.
const BULK_OVERHEAD_MAX: usize = 25;

/// Appends the frame of one committed batch.
pub fn encode_batch(out: &mut Vec<u8>, batch: &engine::Batch, cursor: Cursor, position: i64) {
    // Room for the whole frame at once: a retained frame (broker ack mode) starts in an empty
    // buffer, and growing it step by step cost a reallocation or more per batch. The header
    // takes at most about 200 bytes; each mutation adds its length line and CRLF.
    out.reserve(FRAME_HEADER_MAX + batch.byte_len() + batch.len() * BULK_OVERHEAD_MAX);
    // One marker where the database changes (none in a batch of database 0 only).
    let markers = if batch.has_other_dbs() {
        let mut db = 0;
        batch.iter().filter(|m| std::mem::replace(&mut db, m.db) != m.db).count()
    } else {
        0
    };
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(7 + batch.len() + markers).as_bytes());
    out.extend_from_slice(b"\r\n$5\r\nBATCH\r\n");
    push_int(out, PROTOCOL_VERSION);
    push_replid(out, batch.replid);
    push_int(out, batch.first_offset as i64);
    push_int(out, cursor.logical);
    push_int(out, cursor.broker);
    push_int(out, position);
    let mut db = 0;
    for m in batch.iter() {
        if m.db != db {
            db = m.db;
            push_int(out, db as i64);
        }
        push_bulk(out, m.bytes);
    }
}

/// `GOBLIN.ACK <offset>`, from a subscriber.
pub fn encode_ack(out: &mut Vec<u8>, offset: u64) {
    let n = itoa::Buffer::new().format(offset).to_string();
    out.extend_from_slice(b"*2\r\n$10\r\nGOBLIN.ACK\r\n");
    push_bulk(out, n.as_bytes());
}

/// Why a frame could not be decoded: the upstream sent something no goblin-core of this
/// version sends. The link is abandoned.
pub type DecodeError = String;

/// Reads a CRLF-terminated line at `at`: Ok(None) if incomplete.
fn line(buf: &[u8], at: usize) -> Result<Option<(&[u8], usize)>, DecodeError> {
    // Header lines are short; an error line from the upstream may be longer.
    const MAX_LINE: usize = 1024;
    let rest = &buf[at.min(buf.len())..];
    match rest.iter().take(MAX_LINE).position(|&b| b == b'\n') {
        Some(i) if i >= 1 && rest[i - 1] == b'\r' => Ok(Some((&rest[..i - 1], at + i + 1))),
        Some(_) => Err("a line does not end with CRLF".into()),
        None if rest.len() >= MAX_LINE => Err("an over-long header line".into()),
        None => Ok(None),
    }
}

fn number(s: &[u8]) -> Result<i64, DecodeError> {
    std::str::from_utf8(s).ok().and_then(|s| s.parse().ok()).ok_or_else(|| "a malformed number".to_string())
}

/// Cursor over one frame's elements.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// The common header line at the cursor, read in one pass (`resp::fast_header`: `kind`,
    /// a canonical number of at most 18 digits, CRLF). Returns its value and the offset after
    /// it; `None` for any other shape (a sign, a longer number, an incomplete or bad line),
    /// which the general path (`line`, `number`) then reads, with the same result wherever
    /// this one gives one.
    #[inline]
    fn fast_header(&self, kind: u8) -> Option<(i64, usize)> {
        if self.buf.get(self.at) != Some(&kind) {
            return None;
        }
        // resp::fast_header checked that the byte after the CR is there.
        let (cr, n) = resp::fast_header(self.buf, self.at)?;
        (self.buf[cr + 1] == b'\n').then_some((n, cr + 2))
    }

    fn int(&mut self) -> Result<Option<i64>, DecodeError> {
        if let Some((n, next)) = self.fast_header(b':') {
            self.at = next;
            return Ok(Some(n));
        }
        let Some((l, next)) = line(self.buf, self.at)? else { return Ok(None) };
        if l.first() != Some(&b':') {
            return Err("an integer was expected".into());
        }
        self.at = next;
        number(&l[1..]).map(Some)
    }

    fn bulk(&mut self, max: usize) -> Result<Option<&'a [u8]>, DecodeError> {
        let (len, next) = match self.fast_header(b'$') {
            Some(header) => header,
            None => {
                let Some((l, next)) = line(self.buf, self.at)? else { return Ok(None) };
                if l.first() != Some(&b'$') {
                    return Err("a bulk string was expected".into());
                }
                (number(&l[1..])?, next)
            }
        };
        if len < 0 || len as u64 > max as u64 {
            return Err(format!("a bulk string of {len} bytes"));
        }
        let end = next + len as usize;
        if self.buf.len() < end + 2 {
            return Ok(None);
        }
        if &self.buf[end..end + 2] != b"\r\n" {
            return Err("a bulk string does not end with CRLF".into());
        }
        self.at = end + 2;
        Ok(Some(&self.buf[next..end]))
    }
}

/// The largest mutation a frame may carry (Redis's default proto-max-bulk-len, plus room for
/// the command around the value).
const MAX_MUTATION: usize = 512 * 1024 * 1024 + 4096;

/// Decodes the frame at the front of `buf`: Ok(None) while it is incomplete; Ok(Some((frame,
/// consumed bytes))); Err when the bytes cannot be a frame of this protocol.
pub fn decode(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, DecodeError> {
    macro_rules! need {
        ($e:expr) => {
            match $e? {
                Some(v) => v,
                None => return Ok(None),
            }
        };
    }
    let mut r = Reader { buf, at: 0 };
    let n = match r.fast_header(b'*') {
        Some((n, next)) => {
            r.at = next;
            n
        }
        None => {
            let Some((head, next)) = line(buf, 0)? else { return Ok(None) };
            if head.first() == Some(&b'-') {
                return Err(format!(
                    "the upstream answered an error: {}",
                    String::from_utf8_lossy(&head[1..])
                ));
            }
            if head.first() != Some(&b'*') {
                return Err("a frame does not start with an array header".into());
            }
            r.at = next;
            number(&head[1..])?
        }
    };
    let kind = need!(r.bulk(16));
    let replid = |s: &[u8]| ReplId::parse_bytes(s).ok_or_else(|| "a malformed replication id".to_string());
    match kind {
        // Five elements: an older build's hello, read this far so that its version can be
        // named in the refusal.
        b"HELLO" if n == 5 || n == 7 => {
            let proto = need!(r.int());
            let version = need!(r.bulk(256));
            let id = replid(need!(r.bulk(64)))?;
            let offset = need!(r.int());
            if offset < 0 {
                return Err("a negative offset in the hello".into());
            }
            let mut previous = None;
            if n == 7 {
                let prev = replid(need!(r.bulk(64)))?;
                let at = need!(r.int());
                if at > offset {
                    return Err("a hello whose lineage began past its offset".into());
                }
                previous = u64::try_from(at).ok().map(|at| (prev, at));
            }
            Ok(Some((Frame::Hello { proto, version, replid: id, offset: offset as u64, previous }, r.at)))
        }
        b"TICK" if n == 4 => {
            let offset = need!(r.int());
            if offset < 0 {
                return Err("a negative offset in a tick".into());
            }
            let cursor = Cursor { logical: need!(r.int()), broker: need!(r.int()) };
            Ok(Some((Frame::Tick { offset: offset as u64, cursor }, r.at)))
        }
        b"BATCH" if (8..=1 << 24).contains(&n) => {
            let proto = need!(r.int());
            if proto != PROTOCOL_VERSION {
                return Err(format!(
                    "a frame of firehose protocol {proto} (this server speaks {PROTOCOL_VERSION})"
                ));
            }
            let id = replid(need!(r.bulk(64)))?;
            let first = need!(r.int());
            if first < 1 {
                return Err(format!("a batch at logical offset {first}"));
            }
            let logical = need!(r.int());
            let broker = need!(r.int());
            let position = need!(r.int());
            let mut muts = Vec::with_capacity((n - 7) as usize);
            let mut dbs: Vec<(usize, u32)> = Vec::new();
            let mut marked = false;
            for _ in 7..n {
                if r.buf.get(r.at) == Some(&b':') {
                    if marked {
                        return Err("two database markers in a row".into());
                    }
                    let db = need!(r.int());
                    if !(0..=u32::MAX as i64).contains(&db) {
                        return Err(format!("a database marker {db}"));
                    }
                    dbs.push((muts.len(), db as u32));
                    marked = true;
                    continue;
                }
                muts.push(need!(r.bulk(MAX_MUTATION)));
                marked = false;
            }
            if marked || muts.is_empty() {
                return Err("a database marker with no mutation after it".into());
            }
            let frame = BatchFrame {
                proto,
                replid: id,
                first: first as u64,
                cursor: Cursor { logical, broker },
                position,
                muts,
                dbs,
            };
            Ok(Some((Frame::Batch(frame), r.at)))
        }
        _ => Err(format!("an unknown frame '{}' of {n} elements", String::from_utf8_lossy(kind))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn batch_of(replid: ReplId, first: u64, cmds: &[Vec<Vec<u8>>]) -> engine::Batch {
        let mut e = engine::Engine::new(engine::Replication::at(replid, first - 1));
        for c in cmds {
            let mut rec = Vec::new();
            resp::reply::bulk_array(&mut rec, c);
            // SET k v records apply as themselves, keeping the bytes.
            e.apply_record(&rec, Some(e.next_offset()), 0).unwrap();
        }
        e.commit(engine::Origin::Replay).unwrap()
    }

    #[test]
    fn database_markers_carry_each_mutations_database() {
        let id = ReplId::random();
        let mut b = engine::Batch::new(id);
        let dbs = [0u32, 3, 3, 0, 7, 0];
        for (i, &db) in dbs.iter().enumerate() {
            b.set_db(db);
            b.push(&[b"SET", format!("k{i}").as_bytes(), b"v"]);
        }
        b.first_offset = 10;
        let mut out = Vec::new();
        encode_batch(&mut out, &b, Cursor::UNKNOWN, -1);
        // Markers only where the database changes: 3, 0, 7, 0.
        assert!(out.starts_with(b"*17\r\n"), "{}", String::from_utf8_lossy(&out));
        let Some((Frame::Batch(f), n)) = decode(&out).unwrap() else { panic!("a batch") };
        assert_eq!(n, out.len());
        assert_eq!(f.muts.len(), dbs.len());
        for (i, &db) in dbs.iter().enumerate() {
            assert_eq!(f.db_of(i), db, "mutation {i}");
            assert_eq!(f.muts[i], b.get(i).bytes);
        }
        // A batch in database 0 only has no marker.
        let mut plain = engine::Batch::new(id);
        plain.push(&[b"SET", b"k", b"v"]);
        plain.first_offset = 1;
        let mut out = Vec::new();
        encode_batch(&mut out, &plain, Cursor::UNKNOWN, -1);
        assert!(out.starts_with(b"*8\r\n"));
        // A marker must be followed by a mutation, and one marker at a time.
        let head = |n: usize| {
            format!(
                "*{n}\r\n$5\r\nBATCH\r\n:{PROTOCOL_VERSION}\r\n$40\r\n0123456789012345678901234567890123456789\r\n:1\r\n:-1\r\n:-1\r\n:-1\r\n"
            )
        };
        let trailing = head(9) + "$3\r\nabc\r\n:2\r\n";
        assert!(decode(trailing.as_bytes()).unwrap_err().contains("marker"));
        let twice = head(10) + ":2\r\n:3\r\n$3\r\nabc\r\n";
        assert!(decode(twice.as_bytes()).unwrap_err().contains("two database markers"));
    }

    #[test]
    fn hello_round_trip() {
        let id = ReplId::random();
        for previous in [None, Some((ReplId::random(), 0)), Some((ReplId::random(), 42))] {
            let mut out = Vec::new();
            encode_hello(&mut out, id, 42, previous);
            let (f, used) = decode(&out).unwrap().unwrap();
            assert_eq!(used, out.len());
            assert_eq!(
                f,
                Frame::Hello {
                    proto: PROTOCOL_VERSION,
                    version: BUILD_VERSION.as_bytes(),
                    replid: id,
                    offset: 42,
                    previous
                }
            );
            // Every strict prefix is incomplete, never an error.
            for cut in 0..out.len() {
                assert_eq!(decode(&out[..cut]), Ok(None), "prefix {cut}");
            }
        }
        // A lineage cannot have begun past the offset the hello names.
        let mut out = Vec::new();
        encode_hello(&mut out, id, 42, Some((ReplId::random(), 43)));
        assert!(decode(&out).unwrap_err().contains("began past"));
        // An older build's five-element hello still decodes (its version is then refused).
        let mut old = b"*5\r\n$5\r\nHELLO\r\n:5\r\n$4\r\nold!\r\n".to_vec();
        old.extend_from_slice(format!("$40\r\n{id}\r\n:3\r\n").as_bytes());
        assert!(matches!(
            decode(&old),
            Ok(Some((Frame::Hello { proto: 5, offset: 3, previous: None, .. }, _)))
        ));
        let mut tick = Vec::new();
        let cursor = Cursor { logical: 97, broker: 1234 };
        encode_tick(&mut tick, 99, cursor);
        assert_eq!(decode(&tick), Ok(Some((Frame::Tick { offset: 99, cursor }, tick.len()))));
        for cut in 0..tick.len() {
            assert_eq!(decode(&tick[..cut]), Ok(None), "prefix {cut}");
        }
    }

    #[test]
    fn rejects_what_no_upstream_sends() {
        for bad in [
            &b"+OK\r\n"[..],
            b"-ERR nope\r\n",
            b"*2\r\n$5\r\nHELLO\r\n:1\r\n",
            b"*8\r\n$5\r\nBATCH\r\n:99\r\n",
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
            b"*8\r\n$5\r\nBATCH\r\n:3\r\n$3\r\nxyz\r\n",
            b"*5\r\n$5\r\nHELLO\r\n:1\r\n$2\r\nv1\r\n$40\r\n0000000000000000000000000000000000000000\r\n:-3\r\n",
            b"*5\n",
        ] {
            assert!(decode(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    proptest! {
        /// Header numbers written the long way (a `+` sign, or zero-padded past 18 digits) go
        /// through the general reader instead of the one-pass one; the frame decoded must be
        /// the same.
        #[test]
        fn header_numbers_read_alike_either_way(
            first in 1u64..1 << 40,
            values in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..5),
            style in prop::collection::vec(0u8..3, 64),
        ) {
            let id = ReplId::random();
            let cmds: Vec<Vec<Vec<u8>>> =
                values.iter().map(|v| vec![b"SET".to_vec(), b"k".to_vec(), v.clone()]).collect();
            let batch = batch_of(id, first, &cmds);
            let mut out = Vec::new();
            encode_batch(&mut out, &batch, Cursor { logical: 5, broker: 9 }, 3);
            // Rewrite every header line (array, bulk length, integer), copying bulk bodies.
            let (mut long, mut at, mut k) = (Vec::new(), 0, 0);
            let mut bulk = None;
            while at < out.len() {
                if let Some(len) = bulk.take() {
                    long.extend_from_slice(&out[at..at + len + 2]);
                    at += len + 2;
                    continue;
                }
                let end = at + out[at..].iter().position(|&b| b == b'\n').unwrap() + 1;
                let (kind, digits) = (out[at], &out[at + 1..end - 2]);
                let digits = std::str::from_utf8(digits).unwrap();
                long.push(kind);
                match style[k % style.len()] {
                    0 => long.extend_from_slice(digits.as_bytes()),
                    1 if !digits.starts_with('-') => long.extend_from_slice(format!("+{digits}").as_bytes()),
                    _ if !digits.starts_with('-') => long.extend_from_slice(format!("{digits:0>20}").as_bytes()),
                    _ => long.extend_from_slice(digits.as_bytes()),
                }
                long.extend_from_slice(b"\r\n");
                if kind == b'$' {
                    bulk = Some(digits.parse::<usize>().unwrap());
                }
                at = end;
                k += 1;
            }
            let (a, used_a) = decode(&out).unwrap().unwrap();
            let (b, used_b) = decode(&long).unwrap().unwrap();
            prop_assert_eq!(a, b);
            prop_assert_eq!((used_a, used_b), (out.len(), long.len()));
        }

        #[test]
        fn batch_round_trip(
            first in 1u64..1 << 40,
            cursor in (-1i64..1 << 40, -1i64..1 << 40, -1i64..1 << 40),
            values in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 1..8),
            split in any::<prop::sample::Index>(),
        ) {
            let id = ReplId::random();
            let cmds: Vec<Vec<Vec<u8>>> = values
                .iter()
                .enumerate()
                .map(|(i, v)| vec![b"SET".to_vec(), format!("k{i}").into_bytes(), v.clone()])
                .collect();
            let batch = batch_of(id, first, &cmds);
            let (cursor, position) = (Cursor { logical: cursor.0, broker: cursor.1 }, cursor.2);
            let mut out = Vec::new();
            encode_batch(&mut out, &batch, cursor, position);
            encode_hello(&mut out, id, 7, None);
            let (f, used) = decode(&out).unwrap().unwrap();
            let Frame::Batch(b) = f else { panic!("not a batch") };
            prop_assert_eq!(b.replid, id);
            prop_assert_eq!(b.first, first);
            prop_assert_eq!(b.cursor, cursor);
            prop_assert_eq!(b.position, position);
            prop_assert_eq!(b.last(), first + cmds.len() as u64 - 1);
            let want: Vec<&[u8]> = batch.iter().map(|m| m.bytes).collect();
            prop_assert_eq!(&b.muts, &want);
            // The next frame follows exactly where this one ended.
            let next_is_hello = matches!(decode(&out[used..]), Ok(Some((Frame::Hello { offset: 7, .. }, _))));
            prop_assert!(next_is_hello);
            // A cut anywhere inside the first frame is incomplete, not an error.
            let cut = split.index(used);
            prop_assert_eq!(decode(&out[..cut]), Ok(None));
        }
    }
}
