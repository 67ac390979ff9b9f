//! TagHistory: a tag's recorded samples over a time window, from the historian, for a
//! panel's trend and CSV export. The same historian query the assistant's history tool runs,
//! with a panel's larger sample counts.

use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use prost::Message;
use tserver_proto::v1::{ErrorCode, HistorySample, TagHistoryReply, TagHistoryRequest, server_frame};

use super::historian;
use super::to_proto::{CallError, from_epoch_ms, history_sample, short};
use plant::Runtime;

/// Samples sent when the request names no count.
pub(crate) const DEFAULT_SAMPLES: u32 = 2000;
/// The most samples one reply carries (stated in `proto/tserver.proto`).
pub(crate) const MAX_SAMPLES: u32 = 10_000;
/// The most protobuf bytes of samples one reply carries: long text values are cut at this,
/// so the reply fits the default frame limit whatever the tag holds.
const MAX_REPLY_BYTES: usize = 512 * 1024;

/// Checks the call now; the returned future queries the historian.
pub(crate) fn apply(
    request: &TagHistoryRequest,
    runtime: &Runtime,
) -> Result<impl Future<Output = server_frame::Body> + Send + 'static, CallError> {
    let invalid = |message: String| CallError::new(ErrorCode::InvalidArgument, message);
    let plant = runtime.plant().reader();
    let tag = plant
        .objects()
        .tag(&request.name)
        .cloned()
        .ok_or_else(|| invalid(format!("tag history: no tag named {:?}", short(&request.name))))?;
    if request.since_ms < 0 {
        return Err(invalid(format!(
            "tag history: since_ms {} is before 1970",
            request.since_ms
        )));
    }
    if request.until_ms < 0 {
        return Err(invalid(format!(
            "tag history: until_ms {} is before 1970",
            request.until_ms
        )));
    }
    let to = match request.until_ms {
        0 => SystemTime::now(),
        until => from_epoch_ms(until)
            .ok_or_else(|| invalid(format!("tag history: until_ms {until} is out of range")))?,
    };
    let from = from_epoch_ms(request.since_ms).ok_or_else(|| {
        invalid(format!(
            "tag history: since_ms {} is out of range",
            request.since_ms
        ))
    })?;
    if from > to {
        return Err(invalid(format!(
            "tag history: since_ms {} is after until_ms {}",
            request.since_ms,
            if request.until_ms == 0 {
                "(now)".to_owned()
            } else {
                request.until_ms.to_string()
            }
        )));
    }
    let max_samples = match request.max_samples {
        0 => DEFAULT_SAMPLES,
        asked if asked > MAX_SAMPLES => {
            return Err(invalid(format!(
                "tag history: max_samples {asked} is above {MAX_SAMPLES}"
            )));
        }
        asked => asked,
    };
    let definition = tag.definition().clone();
    let history = Arc::clone(plant.historian());
    Ok(async move {
        let (name, kind) = (definition.name.clone(), definition.kind);
        let page = historian::query("tag history", move || {
            history.tag_history(&name, kind, from, to, max_samples as usize)
        })
        .await;
        let page = match page {
            Ok(page) => page,
            Err(reply) => return reply,
        };
        let (samples, cut) = within_budget(page.samples.iter().map(history_sample));
        server_frame::Body::TagHistory(TagHistoryReply {
            name: definition.name,
            units: definition.units,
            truncated: cut || page.total > samples.len(),
            total_samples: page.total as u64,
            samples,
        })
    })
}

/// The samples, oldest first, up to [`MAX_REPLY_BYTES`]; whether some were left out.
fn within_budget(samples: impl Iterator<Item = HistorySample>) -> (Vec<HistorySample>, bool) {
    let mut kept = Vec::new();
    let mut bytes = 0;
    for sample in samples {
        // The field tag and length prefix each sample adds in the reply: at most 1 + 5 bytes.
        bytes += sample.encoded_len() + 6;
        if bytes > MAX_REPLY_BYTES {
            return (kept, true);
        }
        kept.push(sample);
    }
    (kept, false)
}

#[cfg(test)]
mod tests {
    use tserver_proto::v1::history_sample::Value;

    use super::*;

    fn text_sample(at: i64, length: usize) -> HistorySample {
        HistorySample {
            timestamp_ms: at,
            value: Some(Value::Text("x".repeat(length))),
            quality: 192,
        }
    }

    #[test]
    fn long_text_samples_are_cut_at_the_reply_budget_oldest_kept() {
        let long = (0..100).map(|at| text_sample(at, 64 * 1024));
        let (kept, cut) = within_budget(long);
        assert!(cut);
        assert_eq!(kept.len(), 7, "7 of 64 KiB fit in 512 KiB");
        assert_eq!(kept[0].timestamp_ms, 0);
        let short = (0..100).map(|at| text_sample(at, 10));
        let (kept, cut) = within_budget(short);
        assert!(!cut);
        assert_eq!(kept.len(), 100);
    }
}
