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
//! A segment is rewritten to `<base>.log.cleaned`, fdatasync'ed and renamed over the original,
//! so a crash leaves either the old or the new file, never a mix.
//!
//! A pass reads the whole log, so it does not run on every housekeeping tick: each pass leaves
//! a `PassSummary`, and the owner starts the next one only when the closed segments written
//! since make up `min.cleanable.dirty.ratio` of all closed segments (Kafka's rule), when a
//! tombstone the last pass had to keep has become droppable, or when the topic's settings
//! changed. An idle compacted topic therefore costs no disk reads.

use std::collections::HashMap;
use std::io::Write;
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
    tracing::info!(topic = %shared.topic, partition = shared.partition, segments = segs.len(), "compaction pass");
    let (rewritten, next_tombstone_expiry) =
        tokio::task::spawn_blocking(move || compact_blocking(&segs, now_ms(), retention, &dir))
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
) -> Result<(Vec<Segment>, i64), String> {
    let horizon = now - retention;
    let mut latest: KeyMap = HashMap::new();
    for seg in segs {
        for_each_batch(seg, |h, _, recs| {
            if h.is_control() {
                return Ok(()); // a marker's key is its type, not a record key
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
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(&data).map_err(io)?;
        f.sync_data().map_err(io)?;
        drop(f);
        let _ = std::fs::remove_file(path.with_extension("index"));
        let _ = std::fs::remove_file(path.with_extension("timeindex"));
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
