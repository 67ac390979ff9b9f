//! TagHistory: a tag's recorded history over a time window, from the historian, for a
//! panel's trend, CSV export and reports: a trend (M4 past the sample count), every sample a
//! page at a time, or aggregates per interval. The trend is the historian query the
//! assistant's history tool runs, with a panel's larger sample counts.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use prost::Message;
use tserver_proto::v1::{
    ErrorCode, HistoryCursor, HistoryInterval, HistoryShape, HistoryStateTime, TagHistoryReply,
    TagHistoryRequest, history_state_time, server_frame,
};

use super::historian;
use super::to_proto::{CallError, epoch_ms, from_epoch_ms, history_sample, short};
use plant::Runtime;
use plant_model::TagValue;

/// Samples sent when the request names no count.
pub(crate) const DEFAULT_SAMPLES: u32 = 2000;
/// The most samples one reply carries (stated in `proto/tserver.proto`).
pub(crate) const MAX_SAMPLES: u32 = 10_000;
/// The most protobuf bytes of samples or intervals one reply carries: long text values are
/// cut at this, so the reply fits the default frame limit whatever the tag holds.
const MAX_REPLY_BYTES: usize = 512 * 1024;

/// What the historian is asked, checked.
enum Query {
    Trend {
        max: usize,
    },
    Raw {
        after: Option<store::HistoryCursor>,
        limit: usize,
    },
    Intervals {
        interval: Duration,
    },
}

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
    let (from, to) = window(request).map_err(invalid)?;
    let query = query(request, (from, to)).map_err(invalid)?;
    let definition = tag.definition().clone();
    let history = Arc::clone(plant.historian());
    Ok(async move {
        let (name, kind) = (definition.name.clone(), definition.kind);
        let mut reply = TagHistoryReply {
            name: definition.name,
            units: definition.units,
            ..TagHistoryReply::default()
        };
        match query {
            Query::Trend { max } => {
                let page = match historian::query("tag history", move || {
                    history.tag_history(&name, kind, from, to, max)
                })
                .await
                {
                    Ok(page) => page,
                    Err(reply) => return reply,
                };
                let (samples, cut) = within_budget(page.samples.iter().map(history_sample));
                reply.truncated = cut || page.total > samples.len();
                reply.total_samples = page.total as u64;
                reply.samples = samples;
                reply.opening = page.opening.as_ref().map(history_sample);
            }
            Query::Raw { after, limit } => {
                let page = match historian::query("tag history", move || {
                    history.raw_history(&name, kind, (from, to), after, limit)
                })
                .await
                {
                    Ok(page) => page,
                    Err(reply) => return reply,
                };
                let (samples, _) = within_budget(page.samples.iter().map(history_sample));
                reply.next = page.next(samples.len()).map(|next| HistoryCursor {
                    time_ms: next.time_ms,
                    skip: next.skip,
                });
                reply.samples = samples;
            }
            Query::Intervals { interval } => {
                let intervals = match historian::query("tag history", move || {
                    history.history_intervals(&name, kind, (from, to), interval)
                })
                .await
                {
                    Ok(intervals) => intervals,
                    Err(reply) => return reply,
                };
                let (intervals, cut) = within_budget(intervals.iter().map(history_interval));
                reply.truncated = cut;
                reply.intervals = intervals;
            }
        }
        server_frame::Body::TagHistory(Box::new(reply))
    })
}

/// The request's window, checked.
fn window(request: &TagHistoryRequest) -> Result<(SystemTime, SystemTime), String> {
    if request.since_ms < 0 {
        return Err(format!(
            "tag history: since_ms {} is before 1970",
            request.since_ms
        ));
    }
    if request.until_ms < 0 {
        return Err(format!(
            "tag history: until_ms {} is before 1970",
            request.until_ms
        ));
    }
    let to = match request.until_ms {
        0 => SystemTime::now(),
        until => {
            from_epoch_ms(until).ok_or_else(|| format!("tag history: until_ms {until} is out of range"))?
        }
    };
    let from = from_epoch_ms(request.since_ms)
        .ok_or_else(|| format!("tag history: since_ms {} is out of range", request.since_ms))?;
    if from > to {
        return Err(format!(
            "tag history: since_ms {} is after until_ms {}",
            request.since_ms,
            if request.until_ms == 0 {
                "(now)".to_owned()
            } else {
                request.until_ms.to_string()
            }
        ));
    }
    Ok((from, to))
}

/// What the request asks the historian, checked: each shape takes its own fields only.
fn query(request: &TagHistoryRequest, (from, to): (SystemTime, SystemTime)) -> Result<Query, String> {
    let shape = HistoryShape::try_from(request.shape)
        .map_err(|_| format!("tag history: shape {} is not a history shape", request.shape))?;
    let max = match request.max_samples {
        0 => DEFAULT_SAMPLES,
        asked if asked > MAX_SAMPLES => {
            return Err(format!("tag history: max_samples {asked} is above {MAX_SAMPLES}"));
        }
        asked => asked,
    } as usize;
    if request.after.is_some() && shape != HistoryShape::Raw {
        return Err("tag history: `after` is for HISTORY_SHAPE_RAW".to_owned());
    }
    if request.interval_ms != 0 && shape != HistoryShape::Intervals {
        return Err("tag history: interval_ms is for HISTORY_SHAPE_INTERVALS".to_owned());
    }
    Ok(match shape {
        HistoryShape::Trend => Query::Trend { max },
        HistoryShape::Raw => Query::Raw {
            after: request.after.map(|after| store::HistoryCursor {
                time_ms: after.time_ms,
                skip: after.skip,
            }),
            limit: max,
        },
        HistoryShape::Intervals => {
            let step = request.interval_ms;
            if step <= 0 {
                return Err(format!(
                    "tag history: interval_ms {step} must be positive for HISTORY_SHAPE_INTERVALS"
                ));
            }
            let window = (epoch_ms(from), epoch_ms(to));
            let count = store::interval_count(window, step);
            if count > store::MAX_HISTORY_INTERVALS {
                return Err(format!(
                    "tag history: interval_ms {step} cuts the window into {count} intervals, more than {}; \
                     ask for a longer interval or a shorter window",
                    store::MAX_HISTORY_INTERVALS
                ));
            }
            Query::Intervals {
                interval: Duration::from_millis(step.unsigned_abs()),
            }
        }
    })
}

/// An interval's aggregates as the wire carries them.
fn history_interval(interval: &store::HistoryInterval) -> HistoryInterval {
    let ms = |duration: Duration| i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
    HistoryInterval {
        start_ms: epoch_ms(interval.start),
        end_ms: epoch_ms(interval.end),
        count: interval.count as u64,
        first: interval.first.as_ref().map(history_sample),
        last: interval.last.as_ref().map(history_sample),
        min: interval.min.as_ref().map(history_sample),
        max: interval.max.as_ref().map(history_sample),
        average: interval.average,
        good_ms: ms(interval.good),
        states: interval
            .states
            .iter()
            .filter_map(|(value, duration)| {
                let value = match value {
                    TagValue::Bool(value) => history_state_time::Value::Boolean(*value),
                    TagValue::Text(value) => history_state_time::Value::Text(value.to_string()),
                    // Only booleans and text have states.
                    TagValue::Number(_) | TagValue::Integer(_) => return None,
                };
                Some(HistoryStateTime {
                    value: Some(value),
                    duration_ms: ms(*duration),
                })
            })
            .collect(),
        other_states_ms: ms(interval.other_states),
    }
}

/// The items (samples or intervals), in order, up to [`MAX_REPLY_BYTES`]; whether some were
/// left out.
pub(super) fn within_budget<T: Message>(items: impl Iterator<Item = T>) -> (Vec<T>, bool) {
    let mut kept = Vec::new();
    let mut bytes = 0;
    for sample in items {
        // The field tag and length prefix each item adds in the reply: at most 1 + 5 bytes.
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
    use tserver_proto::v1::HistorySample;
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
