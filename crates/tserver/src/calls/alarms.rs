//! Alarms: the alarms that need attention now with what an alarm list shows (time, value,
//! limit, message), ordered as operators expect, and the alarm history when asked for. The
//! live states come from the object model and the history from the same historian query as
//! the assistant's alarm tools.

use std::cmp::Reverse;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message;
use tserver_proto::v1::{AlarmDetail, AlarmFlood, AlarmsReply, AlarmsRequest, ErrorCode, server_frame};

use super::historian;
use super::to_proto::{CallError, alarm_detail, alarm_history_event, epoch_ms, from_epoch_ms};
use plant::Runtime;
use plant::objects::{Alarm, AlarmState, AlarmStatus, ObjectModel};

/// The most alarms `active` carries (stated in `proto/tserver.proto`).
pub(crate) const MAX_ACTIVE: usize = 1000;
/// History events sent when the request names no limit.
pub(crate) const DEFAULT_EVENTS: u32 = 200;
/// The most history events one reply carries.
pub(crate) const MAX_EVENTS: u32 = 2000;
/// The history window when the request names no start: the last day.
const DEFAULT_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// Checks the call now; the returned future reads the history when asked for. The active
/// alarms take at most `room` bytes of the reply frame (half of it when the history comes
/// too): long guidance texts on many standing alarms never make a reply too large to send.
pub(crate) fn apply(
    request: &AlarmsRequest,
    runtime: &Runtime,
    room: usize,
) -> Result<impl Future<Output = server_frame::Body> + Send + 'static, CallError> {
    let invalid = |message: String| CallError::new(ErrorCode::InvalidArgument, message);
    let now = SystemTime::now();
    let limit = match request.limit {
        0 => DEFAULT_EVENTS,
        asked if asked > MAX_EVENTS => {
            return Err(invalid(format!("alarms: limit {asked} is above {MAX_EVENTS}")));
        }
        asked => asked,
    };
    let since = match request.since_ms {
        0 => now.checked_sub(DEFAULT_WINDOW).unwrap_or(UNIX_EPOCH),
        ms if ms < 0 => return Err(invalid(format!("alarms: since_ms {ms} is before 1970"))),
        ms => from_epoch_ms(ms).ok_or_else(|| invalid(format!("alarms: since_ms {ms} is in the future")))?,
    };
    if since > now {
        return Err(invalid(format!(
            "alarms: since_ms {} is in the future",
            request.since_ms
        )));
    }
    let plant = runtime.plant().reader();
    let room = if request.history { room / 2 } else { room };
    let objects = plant.objects();
    let (active, active_truncated) = active(&objects, room);
    let used: usize = active.iter().map(|detail| detail.encoded_len() + 6).sum();
    let handled = handled(&objects, room.saturating_sub(used));
    let flood = plant.alarm_flood().map(|flood| AlarmFlood {
        since_ms: epoch_ms(flood.since),
        first_out: flood.first_out,
        count: u32::try_from(flood.count).unwrap_or(u32::MAX),
    });
    let history = request.history.then(|| Arc::clone(plant.historian()));
    Ok(async move {
        let mut reply = AlarmsReply {
            active,
            active_truncated,
            handled,
            flood,
            ..AlarmsReply::default()
        };
        if let Some(history) = history {
            let page = historian::query("alarm history", move || {
                history.alarm_history(None, since, now, limit as usize)
            })
            .await;
            match page {
                Ok(page) => {
                    reply.history_truncated = page.total > page.events.len();
                    reply.history = page.events.iter().map(alarm_history_event).collect();
                }
                Err(failed) => return failed,
            }
        }
        server_frame::Body::Alarms(Box::new(reply))
    })
}

/// Every alarm annunciated and not normal, unacknowledged first, then the highest priority,
/// then the newest; at most [`MAX_ACTIVE`] and as many as fit in `room` bytes, and whether more
/// were left out.
fn active(objects: &ObjectModel, room: usize) -> (Vec<AlarmDetail>, bool) {
    let mut listed: Vec<_> = objects
        .alarms()
        .iter()
        .map(|alarm| (alarm, alarm.status()))
        .filter(|(_, status)| status.state != AlarmState::Normal && status.handling.annunciated())
        .collect();
    listed.sort_by_key(|(alarm, status)| {
        (
            status.state == AlarmState::Acknowledged,
            Reverse(alarm.definition().priority),
            Reverse(status.active_since),
        )
    });
    fitted(objects, &listed, room)
}

/// Every alarm shelved or out of service, by name: at most [`MAX_ACTIVE`], as many as fit in
/// `room` bytes.
fn handled(objects: &ObjectModel, room: usize) -> Vec<AlarmDetail> {
    let listed: Vec<_> = objects
        .alarms()
        .iter()
        .map(|alarm| (alarm, alarm.status()))
        .filter(|(_, status)| !status.handling.annunciated())
        .collect();
    fitted(objects, &listed, room).0
}

/// The details of `listed`, in order: at most [`MAX_ACTIVE`] and as many as fit in `room`
/// bytes, and whether more were left out.
fn fitted(
    objects: &ObjectModel,
    listed: &[(&Arc<Alarm>, AlarmStatus)],
    room: usize,
) -> (Vec<AlarmDetail>, bool) {
    let mut details = Vec::new();
    let mut used = 0;
    for (alarm, status) in listed {
        if details.len() == MAX_ACTIVE {
            break;
        }
        let tag = objects.tag(&alarm.definition().tag);
        let detail = alarm_detail(alarm, status, tag.map(AsRef::as_ref));
        // The field's tag and length prefix: at most 1 and 5 bytes.
        let size = detail.encoded_len() + 6;
        if used + size > room {
            break;
        }
        used += size;
        details.push(detail);
    }
    let truncated = details.len() < listed.len();
    (details, truncated)
}
