//! The stream value (record code 8): entries with delta-encoded IDs, the stream's metadata,
//! and its consumer groups with their PELs and consumers. `docs/FORMAT.md` ("Stream") is the
//! reference.
//!
//! The value is one length-prefixed byte string, so the reader gets it as one slice (gathered
//! when it straddles blocks) and can hand borrowed fields to `Stream::from_entries`. The writer
//! encodes it twice, once to measure and once to emit, rather than holding a copy.

use crate::format::{get_varint, unzigzag, varint_bytes, zigzag};
use store::types::stream::{ConsumerGroup, Field, ENTRIES_READ_UNKNOWN};
use store::{Stream, StreamId};

/// Writes varints and byte strings to a sink of pieces.
struct Enc<'o> {
    out: &'o mut dyn FnMut(&[u8]),
}

impl Enc<'_> {
    fn v(&mut self, x: u64) {
        let mut b = [0u8; 10];
        let n = varint_bytes(x, &mut b);
        (self.out)(&b[..n]);
    }

    fn bytes(&mut self, s: &[u8]) {
        self.v(s.len() as u64);
        (self.out)(s);
    }

    fn id(&mut self, id: StreamId) {
        self.v(id.ms);
        self.v(id.seq);
    }

    /// An ID after `prev` (strictly greater): the first absolutely (`ms`, `seq`), later ones
    /// as `ms - prev.ms` then, when that is 0, `seq - prev.seq - 1`, else `seq`.
    fn id_after(&mut self, prev: Option<StreamId>, id: StreamId) {
        match prev {
            None => self.id(id),
            Some(p) => {
                let d = id.ms - p.ms;
                self.v(d);
                self.v(if d == 0 { id.seq - p.seq - 1 } else { id.seq });
            }
        }
    }
}

/// Feeds the value's encoding (without its length prefix) to `out`, piece by piece.
pub(crate) fn encode(s: &Stream, out: &mut dyn FnMut(&[u8])) {
    let mut e = Enc { out };
    e.v(s.len());
    let mut prev: Option<StreamId> = None;
    s.range(StreamId::MIN, StreamId::MAX, false, |id, fields| {
        e.id_after(prev, id);
        prev = Some(id);
        e.v(fields.len() as u64);
        for (f, val) in fields {
            e.bytes(f);
            e.bytes(val);
        }
        true
    });
    e.id(s.last_id());
    e.id(s.max_deleted_id());
    e.v(s.entries_added());
    let groups = s.groups();
    e.v(groups.map_or(0, |g| g.len()) as u64);
    for (name, g) in groups.into_iter().flatten() {
        e.bytes(name);
        e.id(g.last_id);
        e.v(zigzag(g.entries_read));
        e.v(g.consumers().len() as u64);
        let mut index = std::collections::HashMap::with_capacity(g.consumers().len());
        for (i, c) in g.consumers().values().enumerate() {
            e.bytes(c.name());
            e.v(zigzag(c.seen_time));
            e.v(zigzag(c.active_time));
            index.insert(c.name(), i);
        }
        e.v(g.pel().len() as u64);
        let mut prev: Option<StreamId> = None;
        for (id, p) in g.pel() {
            e.id_after(prev, *id);
            prev = Some(*id);
            // The owner by its position among the consumers just written (name order); the
            // group keeps every PEL entry's consumer, so the lookup always succeeds.
            e.v(index.get(p.consumer()).copied().unwrap_or(usize::MAX) as u64);
            e.v(zigzag(p.delivery_time));
            e.v(p.delivery_count);
        }
    }
    // The IDMP section, only for a stream that has the state: a stream without it encodes as
    // it always did, so older readers load every snapshot that does not use IDMP.
    if let Some(state) = s.idmp() {
        e.v(state.duration());
        e.v(state.maxsize());
        e.v(state.added);
        e.v(state.duplicates);
        e.v(state.pids_tracked() as u64);
        state.for_each(|pid, a, b| {
            e.bytes(pid);
            e.v((a.len() + b.len()) as u64);
            let mut prev: Option<StreamId> = None;
            for (iid, id) in a.iter().chain(b) {
                e.bytes(iid);
                e.id_after(prev, *id);
                prev = Some(*id);
            }
        });
    }
}

/// The encoded value's length in bytes.
pub(crate) fn encoded_len(s: &Stream) -> usize {
    let mut n = 0;
    encode(s, &mut |p| n += p.len());
    n
}

/// A cursor over untrusted bytes: every read is bounds-checked.
struct Cur<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cur<'a> {
    fn varint(&mut self, what: &str) -> Result<u64, String> {
        let (v, next) = get_varint(self.b, self.at).ok_or_else(|| format!("stream: bad {what}"))?;
        self.at = next;
        Ok(v)
    }

    fn bytes(&mut self, what: &str) -> Result<&'a [u8], String> {
        let n = self.varint(what)?;
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.at.checked_add(n))
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| format!("stream: {what} overruns the value"))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn id(&mut self, what: &str) -> Result<StreamId, String> {
        Ok(StreamId::new(self.varint(what)?, self.varint(what)?))
    }

    /// An ID delta-encoded after `prev` (see `Enc::id_after`); refuses one that would not fit.
    fn id_after(&mut self, prev: Option<StreamId>, what: &str) -> Result<StreamId, String> {
        let Some(p) = prev else { return self.id(what) };
        let d = self.varint(what)?;
        let s = self.varint(what)?;
        let id = if d == 0 {
            p.seq.checked_add(s).and_then(|x| x.checked_add(1)).map(|seq| StreamId::new(p.ms, seq))
        } else {
            p.ms.checked_add(d).map(|ms| StreamId::new(ms, s))
        };
        id.ok_or_else(|| format!("stream: {what} out of range"))
    }

    /// A count of items that each take at least `min_bytes`: refused when the rest of the
    /// value cannot hold them (so no count sizes an allocation beyond the input).
    fn count(&mut self, what: &str, min_bytes: usize) -> Result<usize, String> {
        let n = self.varint(what)?;
        let left = (self.b.len() - self.at) as u64;
        if n.saturating_mul(min_bytes as u64) > left {
            return Err(format!("stream: {what} overruns the value"));
        }
        Ok(n as usize)
    }
}

/// One entry: its ID (after `prev`) and fields.
fn entry<'a>(c: &mut Cur<'a>, prev: Option<StreamId>) -> Result<(StreamId, Vec<Field<'a>>), String> {
    let id = c.id_after(prev, "entry ID")?;
    let nf = c.count("field count", 2)?;
    if nf == 0 {
        return Err("stream: entry without fields".into());
    }
    let mut fields = Vec::with_capacity(nf);
    for _ in 0..nf {
        let f = c.bytes("field")?;
        let v = c.bytes("value")?;
        fields.push((f, v));
    }
    Ok((id, fields))
}

/// Decodes and validates a stream value (the bytes [`encode`] wrote). Every rule is checked:
/// IDs strictly ascending and at most the last ID, entries with fields, counts within the
/// bytes, groups and consumers in strictly ascending name order, PEL IDs ascending, each PEL
/// entry's consumer existing, and no byte left over.
pub(crate) fn decode(raw: &[u8]) -> Result<Stream, String> {
    let mut c = Cur { b: raw, at: 0 };
    // An entry takes at least 4 bytes (ID, field count, one empty field and value).
    let n = c.count("entry count", 4)?;
    // The entries are decoded one at a time as the stream takes them (no list of them all is
    // built); the metadata follows them, so they are appended under the highest last ID and
    // checked against the real one afterwards. The first error stops the walk and is kept.
    let mut err: Option<String> = None;
    let mut prev = None;
    let mut left = n;
    let entries = std::iter::from_fn(|| {
        if left == 0 || err.is_some() {
            return None;
        }
        left -= 1;
        match entry(&mut c, prev) {
            Ok(e) => {
                prev = Some(e.0);
                Some(e)
            }
            Err(e) => {
                err = Some(e);
                None
            }
        }
    });
    let built = Stream::from_entries(entries, StreamId::MAX, StreamId::MIN, n as u64);
    if let Some(e) = err {
        return Err(e);
    }
    let mut s = built.map_err(|e| format!("stream: {}", e.0))?;
    let last_id = c.id("last ID")?;
    let max_deleted_id = c.id("max deleted ID")?;
    let entries_added = c.varint("entries added")?;
    if prev.is_some_and(|p| p > last_id) {
        return Err("stream: stream entry above the last ID".into());
    }
    if entries_added < n as u64 {
        return Err("stream: fewer entries added than it holds".into());
    }
    s.set_last_id(last_id);
    s.set_max_deleted_id(max_deleted_id);
    s.set_entries_added(entries_added);
    // A group takes at least 6 bytes (name, last ID, entries read, two counts).
    let ng = c.count("group count", 6)?;
    let mut prev_name: Option<&[u8]> = None;
    for _ in 0..ng {
        let name = c.bytes("group name")?;
        if prev_name.is_some_and(|p| p >= name) {
            return Err("stream: groups out of order or repeated".into());
        }
        prev_name = Some(name);
        let glast = c.id("group last ID")?;
        let entries_read = unzigzag(c.varint("group entries read")?);
        if entries_read < ENTRIES_READ_UNKNOWN {
            return Err("stream: negative group entries read".into());
        }
        let mut g = ConsumerGroup::new(glast, entries_read);
        let nc = c.count("consumer count", 3)?;
        let mut names: Vec<&[u8]> = Vec::with_capacity(nc);
        for _ in 0..nc {
            let cname = c.bytes("consumer name")?;
            if names.last().is_some_and(|p| *p >= cname) {
                return Err("stream: consumers out of order or repeated".into());
            }
            let seen = unzigzag(c.varint("consumer seen time")?);
            let active = unzigzag(c.varint("consumer active time")?);
            g.create_consumer(cname, seen);
            if let Some(cons) = g.consumer_mut(cname) {
                cons.active_time = active;
            }
            names.push(cname);
        }
        let np = c.count("pending count", 5)?;
        let mut prev = None;
        for _ in 0..np {
            let id = c.id_after(prev, "pending ID")?;
            prev = Some(id);
            let idx = c.varint("pending consumer")?;
            let owner = usize::try_from(idx)
                .ok()
                .and_then(|i| names.get(i))
                .ok_or("stream: a pending entry names a missing consumer")?;
            let time = unzigzag(c.varint("delivery time")?);
            let count = c.varint("delivery count")?;
            g.set_pending(id, owner, time, count);
        }
        if !s.insert_group(name, g) {
            return Err("stream: groups out of order or repeated".into());
        }
    }
    if c.at != raw.len() {
        s.set_idmp(Some(idmp(&mut c)?));
    }
    if c.at != raw.len() {
        return Err("stream: unexpected bytes after the value".into());
    }
    Ok(s)
}

/// The optional IDMP section (see `encode`), checked by `Idmp::from_parts`.
fn idmp(c: &mut Cur<'_>) -> Result<store::types::stream::Idmp, String> {
    let duration = c.varint("IDMP duration")?;
    let maxsize = c.varint("IDMP maxsize")?;
    let added = c.varint("IDMP iids added")?;
    let duplicates = c.varint("IDMP duplicates")?;
    // A producer takes at least 4 bytes (pid, count, one iid and its ID); an iid at least 3.
    let np = c.count("IDMP producer count", 4)?;
    let mut producers = Vec::with_capacity(np);
    for _ in 0..np {
        let pid = c.bytes("IDMP producer")?;
        let n = c.count("IDMP iid count", 3)?;
        let mut iids = Vec::with_capacity(n);
        let mut prev = None;
        for _ in 0..n {
            let iid = c.bytes("IDMP iid")?;
            let id = c.id_after(prev, "IDMP entry ID")?;
            prev = Some(id);
            iids.push((iid, id));
        }
        producers.push((pid, iids));
    }
    store::types::stream::Idmp::from_parts(duration, maxsize, added, duplicates, producers)
        .map_err(|e| format!("stream: {e}"))
}
