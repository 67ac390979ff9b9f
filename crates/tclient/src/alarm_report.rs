//! `alarms report [--since 7d] [--until ...]`: how the alarm system performed over a window, as
//! the wire's AlarmReport answers, in lines a person reads against EEMUA 191's targets.

use std::io::Write;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use service_client::{AlarmCount, AlarmReportRequest, FailoverClient};

use crate::plant_views::{epoch_ms, parse_time, rfc3339};

/// Asks for the report of the window and prints it.
pub async fn report(
    client: &FailoverClient,
    (since, until): (Option<&str>, Option<&str>),
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let now = SystemTime::now();
    let time = |text: Option<&str>, flag: &str| -> anyhow::Result<i64> {
        text.map_or(Ok(0), |text| {
            Ok(epoch_ms(parse_time(text, now).context(flag.to_owned())?))
        })
    };
    let request = AlarmReportRequest {
        since_ms: time(since, "--since")?,
        until_ms: time(until, "--until")?,
    };
    let report = client.alarm_report(request).await?;
    writeln!(
        output,
        "alarm report {} to {}: {} annunciated of {} activations",
        rfc3339(report.since_ms),
        rfc3339(report.until_ms),
        report.annunciated,
        report.activations
    )?;
    if report.events_total > report.events_read {
        writeln!(
            output,
            "  (the window holds {} events; this covers the first {})",
            report.events_total, report.events_read
        )?;
    }
    let flood_periods = report
        .per_period
        .iter()
        .filter(|count| **count > report.flood_count)
        .count();
    writeln!(
        output,
        "  alarms per 10 minutes: {:.2} on average (target about 1), peak {} from {} (target at most 10)",
        report.average_per_10_min,
        report.peak_per_10_min,
        rfc3339(report.peak_at_ms)
    )?;
    writeln!(
        output,
        "  time in flood: {:.2} % ({flood_periods} of {} periods with more than {}; target under 1 %)",
        report.time_in_flood_percent,
        report.per_period.len(),
        report.flood_count
    )?;
    let mix: Vec<String> = report
        .priorities
        .iter()
        .map(|share| format!("{} {:.1} %", share.band, share.percent))
        .collect();
    writeln!(output, "  priority mix: {} (target 80/15/5)", mix.join(", "))?;
    let delay = |seconds: Option<f64>| {
        seconds.map_or_else(
            || "-".to_owned(),
            |seconds| humantime::format_duration(Duration::from_secs(seconds.round() as u64)).to_string(),
        )
    };
    writeln!(
        output,
        "  time to acknowledge: median {}, 90 % within {} ({} acknowledged, {} not)",
        delay(report.acknowledge_median_s),
        delay(report.acknowledge_p90_s),
        report.acknowledged,
        report.unacknowledged
    )?;
    let handled = |count: Option<service_client::HandlingCount>| {
        let count = count.unwrap_or_default();
        format!("{} alarms ({} times)", count.alarms, count.times)
    };
    writeln!(
        output,
        "  shelved {}, suppressed {}, out of service {}",
        handled(report.shelved),
        handled(report.suppressed),
        handled(report.out_of_service)
    )?;
    list(output, "most frequent (activations)", &report.most_frequent)?;
    list(output, "chattering (times it began to)", &report.chattering)?;
    if !report.stale.is_empty() {
        writeln!(output, "stale (in alarm over 24 h):")?;
        for stale in &report.stale {
            writeln!(
                output,
                "  {} since {}: {}",
                stale.alarm,
                rfc3339(stale.since_ms),
                stale.message
            )?;
        }
    }
    Ok(())
}

fn list(output: &mut dyn Write, title: &str, counts: &[AlarmCount]) -> anyhow::Result<()> {
    if counts.is_empty() {
        return Ok(());
    }
    writeln!(output, "{title}:")?;
    for count in counts {
        writeln!(output, "  {:>6}  {}: {}", count.count, count.alarm, count.message)?;
    }
    Ok(())
}
