//! AlarmReport: how the alarm system performed over a window of the alarm history (EEMUA
//! 191's indicators), for the panel's page and any client: the report `tserver alarms report`
//! prints, read from the same history.

use std::future::Future;
use std::time::{Duration, SystemTime};

use tserver_proto::v1::{
    AlarmCount, AlarmReportReply, AlarmReportRequest, ErrorCode, HandlingCount, PriorityShare, StaleAlarm,
    server_frame,
};

use super::historian;
use super::to_proto::{CallError, epoch_ms, from_epoch_ms};
use plant::Runtime;
use plant::alarm_report::{self, AlarmReport, MAX_REPORT_WINDOW, PriorityBand};

/// The window when the request names no start: the 7 days before its end.
const DEFAULT_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);

/// Checks the window now; the returned future reads the history and reports on it.
pub(crate) fn apply(
    request: &AlarmReportRequest,
    runtime: &Runtime,
) -> Result<impl Future<Output = server_frame::Body> + Send + 'static, CallError> {
    let invalid = |message: String| CallError::new(ErrorCode::InvalidArgument, message);
    let now = SystemTime::now();
    let time = |field: &str, ms: i64| {
        from_epoch_ms(ms).ok_or_else(|| {
            invalid(format!(
                "alarm report: {field} {ms} is before 1970 or out of range"
            ))
        })
    };
    let until = match request.until_ms {
        0 => now,
        ms => time("until_ms", ms)?,
    };
    let since = match request.since_ms {
        0 => until
            .checked_sub(DEFAULT_WINDOW)
            .unwrap_or(SystemTime::UNIX_EPOCH),
        ms => time("since_ms", ms)?,
    };
    if until > now + Duration::from_secs(60) {
        return Err(invalid("alarm report: until_ms is in the future".to_owned()));
    }
    if since >= until {
        return Err(invalid(
            "alarm report: since_ms is not before until_ms".to_owned(),
        ));
    }
    if until.duration_since(since).unwrap_or_default() > MAX_REPORT_WINDOW {
        return Err(invalid(
            "alarm report: the window is longer than a year".to_owned(),
        ));
    }
    let plant = runtime.plant().reader();
    Ok(async move {
        match historian::query("alarm report", move || plant.alarm_report(since, until)).await {
            Ok(report) => server_frame::Body::AlarmReport(Box::new(reply(&report))),
            Err(failed) => failed,
        }
    })
}

/// The report as the wire carries it.
fn reply(report: &AlarmReport) -> AlarmReportReply {
    let counts = |counts: &[alarm_report::AlarmCount]| -> Vec<AlarmCount> {
        counts
            .iter()
            .map(|count| AlarmCount {
                alarm: count.alarm.clone(),
                message: count.message.clone(),
                count: count.count,
            })
            .collect()
    };
    let handling = |count: alarm_report::HandlingCount| HandlingCount {
        alarms: count.alarms as u64,
        times: count.times,
    };
    AlarmReportReply {
        since_ms: epoch_ms(report.from),
        until_ms: epoch_ms(report.until),
        events_read: report.events_read as u64,
        events_total: report.events_total as u64,
        activations: report.activations,
        annunciated: report.annunciated,
        average_per_10_min: report.average_per_period(),
        peak_per_10_min: report.peak,
        peak_at_ms: report.peak_at.map_or(0, epoch_ms),
        per_period: report.per_period.clone(),
        flood_count: report.flood_count,
        time_in_flood_percent: report.time_in_flood_percent(),
        most_frequent: counts(&report.most_frequent),
        chattering: counts(&report.chattering),
        stale: report
            .stale
            .iter()
            .map(|stale| StaleAlarm {
                alarm: stale.alarm.clone(),
                message: stale.message.clone(),
                since_ms: epoch_ms(stale.since),
            })
            .collect(),
        priorities: PriorityBand::ALL
            .iter()
            .map(|band| PriorityShare {
                band: band.label().to_owned(),
                count: report.priorities[*band as usize],
                percent: report.priority_percent(*band),
                target_percent: band.target_percent(),
            })
            .collect(),
        acknowledged: report.acknowledge_delays.len() as u64,
        acknowledge_median_s: report.acknowledge_delay(0.5).map(|delay| delay.as_secs_f64()),
        acknowledge_p90_s: report.acknowledge_delay(0.9).map(|delay| delay.as_secs_f64()),
        unacknowledged: report.unacknowledged,
        shelved: Some(handling(report.shelved)),
        suppressed: Some(handling(report.suppressed)),
        out_of_service: Some(handling(report.out_of_service)),
    }
}
