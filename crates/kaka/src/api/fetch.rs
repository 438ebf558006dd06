//! Fetch with long polling: answer at once when there is data (>= min_bytes) or an error;
//! otherwise wait until a high watermark moves or max_wait_ms passes, then answer with what
//! there is.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse};

use super::Req;
use crate::errors;
use crate::wire;

/// One partition's part of the answer.
struct Part {
    error: i16,
    hw: i64,
    log_start: i64,
    records: Bytes,
}

pub async fn fetch(req: &Req, r: FetchRequest) -> BytesMut {
    let mut resp = FetchResponse::default();
    // Fetch sessions (v7+): we decline to create one (session id 0), so clients keep sending
    // full requests; a request naming a session we never handed out is an error.
    if req.version >= 7 && r.session_id != 0 {
        resp.error_code = errors::FETCH_SESSION_ID_NOT_FOUND;
        return wire::encode(req.correlation_id, req.version, &resp);
    }
    let deadline = Instant::now() + Duration::from_millis(r.max_wait_ms.max(0) as u64);
    let min_bytes = r.min_bytes.max(0) as usize;
    let max_bytes = if req.version >= 3 && r.max_bytes > 0 { r.max_bytes as usize } else { usize::MAX };
    // Resolve partitions once; subscribe to their high watermarks for the wait.
    let mut targets = Vec::new();
    let mut watches = Vec::new();
    for t in &r.topics {
        let topic = req.broker.topic(&t.topic.0);
        for p in &t.partitions {
            let part = topic
                .as_ref()
                .and_then(|tp| tp.partitions.get(p.partition as usize))
                .map(|x| x.shared.clone());
            if let Some(s) = &part {
                watches.push(s.hw.subscribe());
            }
            targets.push(part);
        }
    }
    let parts = loop {
        let mut parts = Vec::with_capacity(targets.len());
        let mut total = 0usize;
        let mut any_error = false;
        let mut i = 0;
        for t in &r.topics {
            for p in &t.partitions {
                let part = &targets[i];
                i += 1;
                let Some(s) = part else {
                    any_error = true;
                    parts.push(Part {
                        error: errors::UNKNOWN_TOPIC_OR_PARTITION,
                        hw: -1,
                        log_start: -1,
                        records: Bytes::new(),
                    });
                    continue;
                };
                let (hw, log_start) = (s.hw(), s.log_start());
                if req.version >= 9 && p.current_leader_epoch > 0 {
                    any_error = true;
                    parts.push(Part {
                        error: errors::UNKNOWN_LEADER_EPOCH,
                        hw,
                        log_start,
                        records: Bytes::new(),
                    });
                    continue;
                }
                let budget = max_bytes.saturating_sub(total);
                if budget == 0 && total > 0 {
                    parts.push(Part { error: 0, hw, log_start, records: Bytes::new() });
                    continue;
                }
                let limit = (p.partition_max_bytes.max(0) as usize).min(budget).max(1);
                match s.read(p.fetch_offset, limit).await {
                    Ok(records) => {
                        total += records.len();
                        parts.push(Part { error: 0, hw, log_start, records });
                    }
                    Err(code) => {
                        any_error = true;
                        parts.push(Part { error: code, hw, log_start, records: Bytes::new() });
                    }
                }
            }
        }
        if any_error || total >= min_bytes.max(1) || Instant::now() >= deadline || watches.is_empty() {
            break parts;
        }
        // A closed watch means the topic was deleted meanwhile: answer with what we have.
        if watches.iter().any(|w| w.has_changed().is_err()) {
            break parts;
        }
        // Nothing (or too little) yet: park until any watermark moves or the deadline.
        let changed = async {
            let futs: Vec<_> = watches.iter_mut().map(|w| Box::pin(w.changed())).collect();
            let _ = futures_select_any(futs).await;
        };
        if tokio::time::timeout_at(deadline.into(), changed).await.is_err() {
            // Deadline: one last read so the answer reflects the latest state.
            continue;
        }
    };
    let mut i = 0;
    for t in r.topics {
        let mut tr = FetchableTopicResponse::default();
        tr.topic = t.topic;
        for p in t.partitions {
            let part = &parts[i];
            i += 1;
            let mut pd = PartitionData::default();
            pd.partition_index = p.partition;
            pd.error_code = part.error;
            pd.high_watermark = part.hw;
            pd.last_stable_offset = part.hw;
            if req.version >= 5 {
                pd.log_start_offset = part.log_start;
            }
            pd.records = Some(part.records.clone());
            tr.partitions.push(pd);
        }
        resp.responses.push(tr);
    }
    // Encoding copies every record byte; for a big answer do that copy on a blocking thread
    // so the runtime's workers keep serving produces meanwhile.
    let total: usize = parts.iter().map(|p| p.records.len()).sum();
    let (cid, version) = (req.correlation_id, req.version);
    if total > (1 << 20) {
        if let Ok(frame) = tokio::task::spawn_blocking(move || wire::encode(cid, version, &resp)).await {
            return frame;
        }
        return wire::encode(cid, version, &FetchResponse::default());
    }
    wire::encode(cid, version, &resp)
}

/// Resolves when the first of `futs` resolves (a tiny select over a vector, so the crate
/// needs no futures dependency).
async fn futures_select_any<F: std::future::Future + Unpin>(mut futs: Vec<F>) {
    std::future::poll_fn(|cx| {
        for f in futs.iter_mut() {
            if std::pin::Pin::new(f).poll(cx).is_ready() {
                return std::task::Poll::Ready(());
            }
        }
        std::task::Poll::Pending
    })
    .await
}
