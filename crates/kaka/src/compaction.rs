//! `cleanup.policy=compact`: keep the latest record per key in closed segments.
//!
//! Offsets never change: removed records leave holes that consumers skip, because a Fetch
//! inside a hole returns the next surviving batch (see `Segment::locate`). Rules kept from
//! Kafka's cleaner:
//! - the active (newest) segment is never rewritten;
//! - a rewritten batch keeps its baseOffset, lastOffsetDelta, timestamps and producer fields,
//!   so offsets past a removed tail and producer sequences stay derivable;
//! - an emptied batch is dropped unless it is the last of its segment (it then keeps the
//!   segment's end offset);
//! - transaction markers (control batches) are always kept;
//! - a tombstone (null value) deletes its key and is itself dropped once it is older than
//!   `delete.retention.ms` (measured from the record's timestamp, a simplification of
//!   Kafka's per-cleaning horizon).
//!
//! Only stable records decide what is superseded: the newest offset per key is taken over
//! offsets below the last stable offset (so below the high watermark: durable), skipping
//! batches of aborted transactions. A record written but not yet fdatasync'ed, one of a
//! transaction not yet decided, or one of an aborted transaction, never removes an older
//! record of its key: a power failure may drop the first, the second may still abort, the
//! third never counts for consumers. (Kafka's cleaner likewise stops at the first unstable
//! offset and does not let aborted records shadow committed ones.) Before this rule a pass
//! could cut an acknowledged value for a newer one that a crash then lost.
//!
//! A segment is rewritten to `<base>.log.cleaned`, fdatasync'ed and renamed over the original,
//! so a crash leaves either the old or the new file, never a mix.
//!
//! A pass reads the whole log, so it does not run on every housekeeping tick: each pass leaves
//! a `PassSummary`, and the owner starts the next one only when the closed segments written
//! since make up `min.cleanable.dirty.ratio` of all closed segments (Kafka's rule), when a
//! tombstone the last pass had to keep has become droppable, or when the topic's settings
//! changed. An idle compacted topic therefore costs no disk reads.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::batch::{self, BatchHeader};
use crate::config::TopicConfig;
use crate::memory::Memory;
use crate::partition::{now_ms, Shared};
use crate::segment::{self, Segment};

/// What a pass leaves behind for deciding when the next one is worth its reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PassSummary {
    /// Base offset of the segment that was active during the pass: every closed segment below
    /// it has been cleaned.
    pub clean_upto: i64,
    /// When (ms since the epoch) the first tombstone the pass had to keep may be dropped;
    /// i64::MAX when there is none.
    pub next_tombstone_expiry: i64,
}

pub async fn compact(
    shared: &Arc<Shared>,
    cfg: &TopicConfig,
    memory: &Memory,
) -> Result<PassSummary, String> {
    let segs = shared.segments.read().unwrap_or_else(|e| e.into_inner()).clone();
    let clean_upto = segs.last().map_or(0, |s| s.base_offset);
    if segs.len() < 2 {
        return Ok(PassSummary { clean_upto, next_tombstone_expiry: i64::MAX });
    }
    let retention = cfg.delete_retention_ms;
    let dir = shared.dir.clone();
    let stable = shared.lso();
    let aborted = shared.txns.read().unwrap_or_else(|e| e.into_inner()).aborted.clone();
    tracing::info!(topic = %shared.topic, partition = shared.partition, segments = segs.len(), "compaction pass");
    let (rewritten, next_tombstone_expiry) = tokio::task::spawn_blocking(move || {
        compact_blocking(&segs, now_ms(), retention, &dir, stable, &aborted)
    })
    .await
    .map_err(|e| e.to_string())??;
    let summary = PassSummary { clean_upto, next_tombstone_expiry };
    if rewritten.is_empty() {
        return Ok(summary);
    }
    let mut w = shared.segments.write().unwrap_or_else(|e| e.into_inner());
    for seg in rewritten {
        if let Some(slot) = w.iter_mut().find(|s| s.base_offset == seg.base_offset) {
            *slot = Arc::new(seg);
        }
    }
    let active_base = w.last().map(|s| s.base_offset).unwrap_or(0);
    drop(w);
    // Cached copies of rewritten segments still hold the removed records: drop them.
    memory.drop_below(&shared.cache, active_base);
    Ok(summary)
}

/// Each key's newest offset, and that record's timestamp when it is a tombstone.
type KeyMap = HashMap<Bytes, (i64, Option<i64>)>;

fn for_each_batch(
    seg: &Segment,
    mut f: impl FnMut(&BatchHeader, &Bytes, Vec<batch::Record>) -> Result<(), String>,
) -> Result<(), String> {
    let mut err = None;
    seg.scan_headers(0, |pos, h| {
        let res = seg
            .read_batch(pos, h)
            .map_err(|e| e.to_string())
            .and_then(|b| batch::decode_records(&b, h).and_then(|r| f(h, &b, r)));
        match res {
            Ok(()) => true,
            Err(e) => {
                err = Some(e);
                false
            }
        }
    })
    .map_err(|e| e.to_string())?;
    err.map_or(Ok(()), Err)
}

/// Rewrites the closed segments that lose records. Returns them, and when the first tombstone
/// still kept (newest for its key, younger than `retention` ms) may be dropped.
fn compact_blocking(
    segs: &[Arc<Segment>],
    now: i64,
    retention: i64,
    dir: &std::path::Path,
    stable: i64,
    aborted: &[(i64, i64, i64)],
) -> Result<(Vec<Segment>, i64), String> {
    let horizon = now - retention;
    let mut latest: KeyMap = HashMap::new();
    // (producer id, first offset, marker offset) of each aborted transaction.
    let in_aborted = |h: &BatchHeader| {
        h.is_transactional()
            && aborted.iter().any(|&(p, first, marker)| {
                p == h.producer_id && first <= h.base_offset && h.base_offset < marker
            })
    };
    for seg in segs {
        for_each_batch(seg, |h, _, recs| {
            if h.is_control() {
                return Ok(()); // a marker's key is its type, not a record key
            }
            if h.base_offset >= stable || in_aborted(h) {
                return Ok(()); // not durable, undecided or aborted: supersedes nothing
            }
            for r in recs {
                if let Some(k) = r.key {
                    let tombstone = r.value_is_null.then_some(r.timestamp);
                    latest.insert(k, (h.base_offset + r.offset_delta as i64, tombstone));
                }
            }
            Ok(())
        })?;
    }
    let next_tombstone_expiry = latest
        .values()
        .filter_map(|&(_, t)| t)
        .filter(|&ts| ts >= horizon)
        .map(|ts| ts.saturating_add(retention))
        .min()
        .unwrap_or(i64::MAX);
    let mut out = Vec::new();
    for seg in &segs[..segs.len() - 1] {
        // First pass: does anything go away?
        let mut removable = false;
        for_each_batch(seg, |h, _, recs| {
            removable |= recs.iter().any(|r| !keep(r, h, &latest, horizon));
            Ok(())
        })?;
        if !removable {
            continue;
        }
        let mut batches: Vec<Vec<u8>> = Vec::new();
        for_each_batch(seg, |h, raw, recs| {
            let n = recs.len();
            let kept: Vec<batch::Record> =
                recs.into_iter().filter(|r| keep(r, h, &latest, horizon)).collect();
            if kept.len() == n {
                batches.push(raw.to_vec());
            } else {
                batches.push(batch::rebuild_batch(h, &kept));
            }
            Ok(())
        })?;
        // Drop emptied batches except the segment's last one.
        let last = batches.len().saturating_sub(1);
        let mut data = Vec::new();
        for (i, b) in batches.iter().enumerate() {
            let count = i32::from_be_bytes(b[57..61].try_into().unwrap_or([0; 4]));
            if count > 0 || i == last {
                data.extend_from_slice(b);
            }
        }
        let path = dir.join(segment::file_name(seg.base_offset, "log"));
        let tmp = dir.join(format!("{}.cleaned", segment::file_name(seg.base_offset, "log")));
        let io = |e: std::io::Error| format!("{}: {e}", tmp.display());
        let f = crate::storage::open(&tmp, crate::storage::Mode::Truncate).map_err(io)?;
        f.write_all_at(&data, 0).map_err(io)?;
        f.sync_data().map_err(io)?;
        drop(f);
        let _ = crate::storage::remove_file(&path.with_extension("index"));
        let _ = crate::storage::remove_file(&path.with_extension("timeindex"));
        segment::rename_synced(&tmp, &path).map_err(io)?;
        let new = Segment::open(&path, seg.base_offset, false)?;
        new.write_index_files().map_err(|e| e.to_string())?;
        tracing::info!(segment = %path.display(), before = seg.size(), after = new.size(), "compacted");
        out.push(new);
    }
    Ok((out, next_tombstone_expiry))
}

fn keep(r: &batch::Record, h: &BatchHeader, latest: &KeyMap, horizon: i64) -> bool {
    if h.is_control() {
        return true; // transaction markers stay: read_committed clients need them
    }
    let Some(k) = &r.key else { return true };
    let off = h.base_offset + r.offset_delta as i64;
    if latest.get(k).is_some_and(|&(l, _)| l > off) {
        return false;
    }
    !(r.value_is_null && r.timestamp < horizon)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One uncompressed batch of one record `key`=`value` at `offset`; transactional when `pid`.
    fn record(offset: i64, key: &str, value: &str, pid: Option<i64>) -> (Vec<u8>, BatchHeader) {
        use kafka_protocol::records::{
            Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
        };
        let rec = Record {
            transactional: pid.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: pid.unwrap_or(-1),
            producer_epoch: pid.map_or(-1, |_| 0),
            timestamp_type: TimestampType::Creation,
            offset,
            sequence: -1,
            timestamp: now_ms(),
            key: Some(Bytes::from(key.to_string())),
            value: Some(Bytes::from(value.to_string())),
            headers: Default::default(),
        };
        let mut buf = bytes::BytesMut::new();
        let opts = RecordEncodeOptions { version: 2, compression: Compression::None };
        RecordBatchEncoder::encode(&mut buf, &[rec], &opts).unwrap();
        let h = BatchHeader::parse(&buf).unwrap();
        (buf.to_vec(), h)
    }

    /// A closed segment holding k=old at offset 0, and an active one holding k=new at 1.
    fn two_segments(name: &str, newer_pid: Option<i64>) -> (std::path::PathBuf, Vec<Arc<Segment>>) {
        let dir = std::env::temp_dir().join(format!("kaka-compaction-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let closed = Segment::create(&dir, 0).unwrap();
        let (b, h) = record(0, "k", "old", None);
        closed.append(&b, &h, 1 << 20).unwrap();
        closed.seal().unwrap();
        let active = Segment::create(&dir, 1).unwrap();
        let (b, h) = record(1, "k", "new", newer_pid);
        active.append(&b, &h, 1 << 20).unwrap(); // written, not synced
        (dir, vec![Arc::new(closed), Arc::new(active)])
    }

    fn values(seg: &Segment) -> usize {
        let mut n = 0;
        for_each_batch(seg, |_, _, recs| {
            n += recs.len();
            Ok(())
        })
        .unwrap();
        n
    }

    /// The newer record is not durable yet (at or above the high watermark, so the LSO): a
    /// power failure could drop it, so it must not remove the acknowledged older value.
    #[test]
    fn an_unsynced_record_does_not_supersede_a_durable_one() {
        let (dir, segs) = two_segments("unsynced", None);
        let (rewritten, _) = compact_blocking(&segs, now_ms(), 0, &dir, 1, &[]).unwrap();
        assert!(rewritten.is_empty(), "the closed segment lost its only durable value of k");
        assert_eq!(values(&segs[0]), 1);
        // Once durable (stable past it), the older value goes.
        let (rewritten, _) = compact_blocking(&segs, now_ms(), 0, &dir, 2, &[]).unwrap();
        assert_eq!(rewritten.len(), 1);
        assert_eq!(values(&rewritten[0]), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A newer record of an aborted transaction never supersedes the committed value.
    #[test]
    fn an_aborted_record_does_not_supersede_a_committed_one() {
        let (dir, segs) = two_segments("aborted", Some(7));
        let (rewritten, _) = compact_blocking(&segs, now_ms(), 0, &dir, 3, &[(7, 1, 2)]).unwrap();
        assert!(rewritten.is_empty(), "an aborted record removed the committed value of k");
        let (rewritten, _) = compact_blocking(&segs, now_ms(), 0, &dir, 3, &[]).unwrap();
        assert_eq!(rewritten.len(), 1, "a committed newer record does supersede");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
