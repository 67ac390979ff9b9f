//! `tserver alarms report`: how the alarm system performed over a window of the alarm history
//! (EEMUA 191's key performance indicators), as Markdown for people, CSV for a spreadsheet or
//! JSON for a program.

use std::io::Write;
use std::time::{Duration, SystemTime};

use anyhow::ensure;
use clap::Subcommand;
use plant::alarm_report::{AlarmReport, MAX_REPORT_EVENTS, MAX_REPORT_WINDOW, PriorityBand};
use store::{SolutionLocation, Store};

use super::audit::parse_since;
use crate::own_runtime::on_own_runtime;

/// `tserver alarms` actions.
#[derive(Debug, Subcommand)]
pub enum AlarmsCommand {
    /// The alarm system's performance over a window: alarms per 10 minutes (average and peak),
    /// time in flood, the most frequent, chattering and stale alarms, the priority mix against
    /// 80/15/5, time to acknowledge, and shelved, suppressed and out-of-service counts.
    Report {
        /// From then: a time (RFC 3339) or an age (`7d`, `12h`). Default: 7 days before
        /// `--until`.
        #[arg(long, value_parser = parse_since)]
        since: Option<SystemTime>,
        /// Until then: a time (RFC 3339) or an age (`1d`: a day ago). Default: now.
        #[arg(long, value_parser = parse_since)]
        until: Option<SystemTime>,
        /// `md` (tables for people), `csv` (one row per figure) or `json`.
        #[arg(long, value_enum, default_value_t = ReportFormat::Md)]
        format: ReportFormat,
    },
}

/// How `tserver alarms report` writes the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// Markdown tables.
    Md,
    /// Comma-separated values with a header row: `section,name,value,unit,target`.
    Csv,
    /// One JSON object.
    Json,
}

/// The window a report covers when `--since` is not given.
const DEFAULT_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);

/// Runs `tserver alarms` on the solution at `location`.
pub(super) fn alarms_command(
    location: &SolutionLocation,
    action: &AlarmsCommand,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let AlarmsCommand::Report { since, until, format } = action;
    let until = until.unwrap_or_else(SystemTime::now);
    let since = since.unwrap_or_else(|| {
        until
            .checked_sub(DEFAULT_WINDOW)
            .unwrap_or(SystemTime::UNIX_EPOCH)
    });
    ensure!(
        since < until,
        "--since is not before --until: no window between them"
    );
    ensure!(
        until.duration_since(since).unwrap_or_default() <= MAX_REPORT_WINDOW,
        "--since is more than a year before --until: report a year at most"
    );
    let (record, flood_count) = on_own_runtime(|| async {
        let store = Store::open(location).await?;
        let flood_count = store.runtime_settings().await?.alarm_flood_count;
        // The store's blocking read, off the runtime's workers.
        let record = tokio::task::spawn_blocking(move || {
            store.alarm_record_blocking((since, until), MAX_REPORT_EVENTS)
        })
        .await??;
        anyhow::Ok((record, flood_count))
    })?;
    let report = AlarmReport::of(&record, (since, until), flood_count);
    match format {
        ReportFormat::Json => writeln!(output, "{}", serde_json::to_string_pretty(&report.to_json())?)?,
        ReportFormat::Csv => write_csv(&report, output)?,
        ReportFormat::Md => write_markdown(&report, output)?,
    }
    Ok(())
}

fn time(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}

fn seconds(delay: Option<Duration>) -> String {
    delay.map_or_else(
        || "-".to_owned(),
        |delay| humantime::format_duration(Duration::from_secs(delay.as_secs())).to_string(),
    )
}

/// A figure rounded to two decimals (`0.83333` is `0.83`, `2.0` is `2`).
fn figure(value: f64) -> String {
    let rounded = (value * 100.0).round() / 100.0;
    format!("{rounded}")
}

fn write_markdown(report: &AlarmReport, output: &mut dyn Write) -> anyhow::Result<()> {
    writeln!(
        output,
        "# Alarm report {} to {}\n",
        time(report.from),
        time(report.until)
    )?;
    if report.events_total > report.events_read {
        writeln!(
            output,
            "The window holds {} events; this report covers the first {}: report a shorter window.\n",
            report.events_total, report.events_read
        )?;
    }
    writeln!(
        output,
        "{} alarms annunciated ({} activations in all, the rest shelved, suppressed or out of service).\n",
        report.annunciated, report.activations
    )?;
    writeln!(output, "| Indicator | Value | Target (EEMUA 191) |")?;
    writeln!(output, "| --- | --- | --- |")?;
    writeln!(
        output,
        "| Alarms per 10 minutes, average | {} | about 1 (at most 2) |",
        figure(report.average_per_period())
    )?;
    let peak_at = report
        .peak_at
        .map(|at| format!(" from {}", time(at)))
        .unwrap_or_default();
    writeln!(
        output,
        "| Alarms per 10 minutes, peak | {}{peak_at} | at most 10 |",
        report.peak
    )?;
    writeln!(
        output,
        "| Time in flood | {} % ({} of {} periods with more than {}) | under 1 % |",
        figure(report.time_in_flood_percent()),
        report.flood_periods(),
        report.per_period.len(),
        report.flood_count
    )?;
    let mix: Vec<String> = PriorityBand::ALL
        .iter()
        .map(|band| format!("{} {} %", band.label(), figure(report.priority_percent(*band))))
        .collect();
    writeln!(
        output,
        "| Priority mix | {} | low 80 %, high 15 %, urgent 5 % |",
        mix.join(", ")
    )?;
    writeln!(
        output,
        "| Time to acknowledge | median {}, 90 % within {} ({} acknowledged, {} not) | |",
        seconds(report.acknowledge_delay(0.5)),
        seconds(report.acknowledge_delay(0.9)),
        report.acknowledge_delays.len(),
        report.unacknowledged
    )?;
    writeln!(output, "| Chattering alarms | {} | 0 |", report.chattering.len())?;
    writeln!(
        output,
        "| Stale alarms (in alarm over 24 h) | {} | 0 |",
        report.stale.len()
    )?;
    for (what, count) in [
        ("Shelved", report.shelved),
        ("Suppressed by design", report.suppressed),
        ("Out of service", report.out_of_service),
    ] {
        writeln!(
            output,
            "| {what} | {} alarms, {} times | |",
            count.alarms, count.times
        )?;
    }
    writeln!(output, "\n## Most frequent\n")?;
    if report.most_frequent.is_empty() {
        writeln!(output, "No alarm activated.")?;
    } else {
        writeln!(output, "| Alarm | Activations | Share | Message |")?;
        writeln!(output, "| --- | --- | --- | --- |")?;
        for count in &report.most_frequent {
            let share = count.count as f64 * 100.0 / report.activations.max(1) as f64;
            writeln!(
                output,
                "| {} | {} | {} % | {} |",
                cell(&count.alarm),
                count.count,
                figure(share),
                cell(&count.message)
            )?;
        }
    }
    writeln!(output, "\n## Chattering\n")?;
    if report.chattering.is_empty() {
        writeln!(output, "None chattered (3 trips within 60 s).")?;
    } else {
        writeln!(output, "| Alarm | Times it began to chatter | Message |")?;
        writeln!(output, "| --- | --- | --- |")?;
        for count in &report.chattering {
            writeln!(
                output,
                "| {} | {} | {} |",
                cell(&count.alarm),
                count.count,
                cell(&count.message)
            )?;
        }
    }
    writeln!(output, "\n## Stale\n")?;
    if report.stale.is_empty() {
        writeln!(output, "None was in alarm over 24 h at the window's end.")?;
    } else {
        writeln!(output, "| Alarm | In alarm since | Message |")?;
        writeln!(output, "| --- | --- | --- |")?;
        for stale in &report.stale {
            writeln!(
                output,
                "| {} | {} | {} |",
                cell(&stale.alarm),
                time(stale.since),
                cell(&stale.message)
            )?;
        }
    }
    Ok(())
}

/// Text as one Markdown table cell: its pipes escaped, its lines joined.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\r', '\n'], " ")
}

fn write_csv(report: &AlarmReport, output: &mut dyn Write) -> anyhow::Result<()> {
    let mut writer = csv::Writer::from_writer(output);
    writer.write_record(["section", "name", "value", "unit", "target"])?;
    let mut row = |section: &str, name: &str, value: String, unit: &str, target: &str| {
        writer.write_record([section, name, value.as_str(), unit, target])
    };
    row("window", "from", time(report.from), "", "")?;
    row("window", "until", time(report.until), "", "")?;
    row(
        "window",
        "events_read",
        report.events_read.to_string(),
        "events",
        "",
    )?;
    row(
        "window",
        "events_total",
        report.events_total.to_string(),
        "events",
        "",
    )?;
    row(
        "rate",
        "activations",
        report.activations.to_string(),
        "alarms",
        "",
    )?;
    row(
        "rate",
        "annunciated",
        report.annunciated.to_string(),
        "alarms",
        "",
    )?;
    row(
        "rate",
        "average_per_10_min",
        figure(report.average_per_period()),
        "alarms",
        "1",
    )?;
    row("rate", "peak_per_10_min", report.peak.to_string(), "alarms", "10")?;
    row(
        "rate",
        "time_in_flood",
        figure(report.time_in_flood_percent()),
        "%",
        "1",
    )?;
    for band in PriorityBand::ALL {
        row(
            "priority",
            band.label(),
            figure(report.priority_percent(band)),
            "%",
            &figure(band.target_percent()),
        )?;
    }
    let delay = |fraction| {
        report
            .acknowledge_delay(fraction)
            .map_or_else(String::new, |delay| figure(delay.as_secs_f64()))
    };
    row("acknowledge", "median", delay(0.5), "s", "")?;
    row("acknowledge", "p90", delay(0.9), "s", "")?;
    row(
        "acknowledge",
        "acknowledged",
        report.acknowledge_delays.len().to_string(),
        "alarms",
        "",
    )?;
    row(
        "acknowledge",
        "unacknowledged",
        report.unacknowledged.to_string(),
        "alarms",
        "",
    )?;
    for (name, count) in [
        ("shelved", report.shelved),
        ("suppressed", report.suppressed),
        ("out_of_service", report.out_of_service),
    ] {
        row(
            "handling",
            &format!("{name}_alarms"),
            count.alarms.to_string(),
            "alarms",
            "",
        )?;
        row(
            "handling",
            &format!("{name}_times"),
            count.times.to_string(),
            "times",
            "",
        )?;
    }
    for count in &report.most_frequent {
        row(
            "most_frequent",
            &count.alarm,
            count.count.to_string(),
            "activations",
            "",
        )?;
    }
    for count in &report.chattering {
        row(
            "chattering",
            &count.alarm,
            count.count.to_string(),
            "episodes",
            "0",
        )?;
    }
    for stale in &report.stale {
        row("stale", &stale.alarm, time(stale.since), "since", "")?;
    }
    writer.flush()?;
    Ok(())
}
