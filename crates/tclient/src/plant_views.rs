//! tclient's views of the plant for a person or a script: a folder of the plant tree and the
//! alarm list with its details and history, and the ways of writing times, values and
//! qualities that the history views share.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use service_client::{
    AlarmDetail, AlarmHistoryEvent, AlarmsRequest, FailoverClient, HistorySample, HistoryValue,
    PlantNodeKind, TagReading, TagValue,
};

/// A time a person gives: how long ago (`1h`, `30m`, `2d`) or an RFC 3339 time
/// (`2026-11-21T08:00:00Z`), read against `now`.
pub fn parse_time(text: &str, now: SystemTime) -> anyhow::Result<SystemTime> {
    let text = text.trim();
    if let Ok(ago) = humantime::parse_duration(text) {
        return Ok(now.checked_sub(ago).unwrap_or(UNIX_EPOCH));
    }
    humantime::parse_rfc3339_weak(text).with_context(|| {
        format!("{text:?} is neither a time ago such as 1h or 30m nor an RFC 3339 time such as 2026-11-21T08:00:00Z")
    })
}

/// Milliseconds since the Unix epoch, as the wire carries times.
pub(crate) fn epoch_ms(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |since| i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}

/// A wire time as RFC 3339 UTC with milliseconds; `-` for none (0).
pub(crate) fn rfc3339(ms: i64) -> String {
    match u64::try_from(ms) {
        Ok(ms) if ms > 0 => {
            humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
        }
        _ => "-".to_owned(),
    }
}

/// OPC quality as a word.
pub(crate) fn quality_word(quality: u32) -> &'static str {
    match quality {
        192.. => "Good",
        64..=191 => "Uncertain",
        _ => "Bad",
    }
}

pub(crate) fn sample_value(sample: &HistorySample) -> String {
    match &sample.value {
        Some(HistoryValue::Number(number)) => number.to_string(),
        Some(HistoryValue::Integer(integer)) => integer.to_string(),
        Some(HistoryValue::Boolean(boolean)) => boolean.to_string(),
        Some(HistoryValue::Text(text)) => text.clone(),
        None => String::new(),
    }
}

/// `tags browse [FOLDER]`: the folder's sub-folders (ending in `/`), then its tags with type,
/// units, writability, range and description.
pub async fn browse(client: &FailoverClient, folder: &str, output: &mut dyn Write) -> anyhow::Result<()> {
    let reply = client.browse(folder).await?;
    let shown = if reply.folder.is_empty() {
        "/"
    } else {
        reply.folder.as_str()
    };
    writeln!(output, "{shown}")?;
    for node in &reply.nodes {
        let description = if node.description.is_empty() {
            String::new()
        } else {
            format!("  {}", node.description)
        };
        if node.kind() == PlantNodeKind::Folder {
            writeln!(output, "  {}/{description}", node.name)?;
            continue;
        }
        let mut facts = vec![node.data_type.clone()];
        if !node.units.is_empty() {
            facts.push(node.units.clone());
        }
        if node.writable {
            facts.push("writable".to_owned());
        }
        if !node.allowed_values.is_empty() {
            facts.push(format!("one of {}", node.allowed_values.join("|")));
        }
        match (node.min, node.max) {
            (None, None) => {}
            (min, max) => facts.push(format!(
                "range {}..{}",
                min.map_or(String::new(), |min| min.to_string()),
                max.map_or(String::new(), |max| max.to_string())
            )),
        }
        writeln!(
            output,
            "  {} ({}) [{}]{description}",
            node.name,
            node.tag,
            facts.join(", ")
        )?;
    }
    if reply.truncated {
        writeln!(output, "  (more children than shown)")?;
    }
    Ok(())
}

/// `alarms list [--history [--since ...]]`: every alarm not normal, unacknowledged first,
/// with since when, the tag's value and the limit; then the history, newest first.
pub async fn list_alarms(
    client: &FailoverClient,
    history: bool,
    since: Option<&str>,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let since_ms = match since {
        Some(_) if !history => bail!("--since goes with --history"),
        Some(since) => epoch_ms(parse_time(since, SystemTime::now()).context("--since")?),
        None => 0,
    };
    let reply = client
        .alarms(AlarmsRequest {
            history,
            since_ms,
            limit: 0,
        })
        .await?;
    if reply.active.is_empty() {
        writeln!(output, "no alarms")?;
    }
    for alarm in &reply.active {
        writeln!(output, "{}", describe_alarm(alarm))?;
        for line in alarm_guidance(alarm) {
            writeln!(output, "  {line}")?;
        }
    }
    if reply.active_truncated {
        writeln!(output, "(more alarms than shown)")?;
    }
    if !reply.handled.is_empty() {
        writeln!(output, "shelved or out of service (not annunciated):")?;
    }
    for alarm in &reply.handled {
        writeln!(output, "  {}", describe_handling(alarm))?;
    }
    if history {
        writeln!(output, "history (newest first):")?;
        if reply.history.is_empty() {
            writeln!(output, "  no alarm events in the window")?;
        }
        for event in &reply.history {
            writeln!(output, "  {}", describe_event(event))?;
        }
        if reply.history_truncated {
            writeln!(output, "  (more events in the window than shown)")?;
        }
    }
    Ok(())
}

/// `NAME [state] priority P since TIME: TAG = VALUE (CONDITION limit L): MESSAGE` (what to
/// do about it follows on lines of its own).
fn describe_alarm(alarm: &AlarmDetail) -> String {
    let value = alarm
        .value
        .as_ref()
        .map_or_else(|| "(no value)".to_owned(), reading_value);
    let limit = alarm.limit.map_or_else(
        || alarm.condition.clone(),
        |limit| format!("{} limit {limit}", alarm.condition),
    );
    let mut acknowledged = if alarm.acknowledged_by.is_empty() {
        String::new()
    } else {
        format!(", acknowledged by {}", alarm.acknowledged_by)
    };
    if alarm.chattering {
        acknowledged.push_str(", chattering");
    }
    format!(
        "{} [{}] priority {} since {}: {} = {value} ({limit}{acknowledged}): {}",
        alarm.name,
        alarm.state,
        alarm.priority,
        rfc3339(alarm.since_ms),
        alarm.tag,
        alarm.message
    )
}

/// `NAME shelved by USER until TIME (in alarm: active): REASON`, `NAME out of service by
/// USER since TIME: REASON` or `NAME suppressed by design since TIME: EXPRESSION`.
fn describe_handling(alarm: &AlarmDetail) -> String {
    let how = if alarm.handling == "shelved" {
        format!(
            "shelved by {} until {}",
            alarm.handled_by,
            rfc3339(alarm.shelved_until_ms)
        )
    } else if alarm.handling == "suppressed" {
        format!("suppressed by design since {}", rfc3339(alarm.handled_ms))
    } else {
        format!(
            "out of service by {} since {}",
            alarm.handled_by,
            rfc3339(alarm.handled_ms)
        )
    };
    let underneath = if alarm.state == "normal" {
        String::new()
    } else {
        format!(" (in alarm: {})", alarm.state)
    };
    format!("{} {how}{underneath}: {}", alarm.name, alarm.handling_reason)
}

/// What the plant says to know and do about an alarm, a line each (`what to do: ...`,
/// `respond within: 120 s`, `cause: ...`, `if nobody acts: ...`); none when it says nothing.
fn alarm_guidance(alarm: &AlarmDetail) -> Vec<String> {
    let within = alarm
        .time_to_respond_s
        .map(|seconds| format!("{seconds} s"))
        .unwrap_or_default();
    [
        ("what to do", alarm.response.as_str()),
        ("respond within", within.as_str()),
        ("cause", alarm.cause.as_str()),
        ("if nobody acts", alarm.consequence.as_str()),
    ]
    .into_iter()
    .filter(|(_, text)| !text.is_empty())
    // A text of several lines stays one line of the listing.
    .map(|(label, text)| format!("{label}: {}", text.lines().collect::<Vec<_>>().join(" / ")))
    .collect()
}

/// A reading's value as a person reads it (text quoted).
pub(crate) fn value_text(value: Option<&TagValue>) -> String {
    match value {
        Some(TagValue::Number(number)) => number.to_string(),
        Some(TagValue::Integer(integer)) => integer.to_string(),
        Some(TagValue::Boolean(boolean)) => boolean.to_string(),
        Some(TagValue::Text(text)) => format!("{text:?}"),
        None => "(no value)".to_owned(),
    }
}

/// Units after a value: ` A`, or nothing.
pub(crate) fn units_suffix(units: &str) -> String {
    if units.is_empty() {
        String::new()
    } else {
        format!(" {units}")
    }
}

/// A reading's value with units and, when not Good, its quality and last good time.
fn reading_value(reading: &TagReading) -> String {
    let value = value_text(reading.value.as_ref());
    let units = units_suffix(&reading.units);
    match quality_word(reading.quality) {
        "Good" => format!("{value}{units}"),
        quality => format!(
            "{value}{units} ({quality}, last good {})",
            rfc3339(reading.last_good_ms)
        ),
    }
}

/// `TIME NAME KIND [value V] [by USER]`.
fn describe_event(event: &AlarmHistoryEvent) -> String {
    let mut line = format!("{} {} {}", rfc3339(event.timestamp_ms), event.name, event.kind);
    if let Some(value) = event.value {
        line.push_str(&format!(" value {value}"));
    }
    if !event.user.is_empty() {
        line.push_str(&format!(" by {}", event.user));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_ago_or_rfc3339() {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        assert_eq!(
            parse_time("1h", now).expect("ago"),
            now - Duration::from_secs(3600)
        );
        assert_eq!(
            parse_time("2026-11-21T08:00:00Z", now).expect("rfc3339"),
            humantime::parse_rfc3339("2026-11-21T08:00:00Z").expect("valid")
        );
        let error = parse_time("yesterday", now).expect_err("neither");
        assert!(error.to_string().contains("\"yesterday\""), "{error}");
    }

    #[test]
    fn wire_times_print_as_rfc3339_utc() {
        assert_eq!(rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(rfc3339(0), "-");
    }
}
