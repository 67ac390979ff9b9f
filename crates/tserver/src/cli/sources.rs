//! `tserver sources`: the plant's MQTT sources, and what the running server reports of them.

use anyhow::Context;
use clap::Subcommand;

use store::{SolutionLocation, Store};

/// `tserver sources` actions.
#[derive(Debug, Subcommand)]
pub enum SourcesAction {
    /// The sources the plant declares (change them in the plant file and import it).
    List,
    /// What the running server reports of each source: connected or not, messages read,
    /// messages refused by kind, the last error (written by the server every 2 seconds).
    Status,
}

/// A report older than this is from a server that has stopped (it writes every 2 s).
const SOURCE_REPORT_FRESH: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs a `tserver sources` action; returns what it prints.
pub(super) async fn sources_command(
    solution: &SolutionLocation,
    action: &SourcesAction,
) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    let store = Store::open(solution).await?;
    let mut output = String::new();
    match action {
        SourcesAction::List => {
            let model = store.plant_model().await?;
            if model.sources.is_empty() {
                writeln!(output, "no sources: the plant's values come from the runtime")?;
            }
            let expanded = model.expand();
            for source in &model.sources {
                let tags = expanded
                    .tags
                    .iter()
                    .filter(|tag| {
                        tag.source
                            .as_ref()
                            .is_some_and(|binding| binding.source_name() == source.name)
                    })
                    .count();
                let root = if source.root.is_empty() {
                    String::new()
                } else {
                    format!("  root {}", source.root)
                };
                writeln!(output, "{}  {}{root}  {tags} tags", source.name, source.url)?;
            }
        }
        SourcesAction::Status => {
            let reports = store.source_reports().await?;
            if reports.is_empty() {
                writeln!(
                    output,
                    "no reports: no server with MQTT sources has run on this solution"
                )?;
            }
            for report in reports {
                let age = report.reported_at.elapsed().unwrap_or_default();
                let when = if age > SOURCE_REPORT_FRESH {
                    format!(
                        "  (reported {} ago: the server is not running; this is how it left it)",
                        humantime::format_duration(std::time::Duration::from_secs(age.as_secs()))
                    )
                } else {
                    String::new()
                };
                let fields: serde_json::Value = serde_json::from_str(&report.report)
                    .with_context(|| format!("the report of source {} does not read", report.name))?;
                let connected = if fields["connected"].as_bool() == Some(true) {
                    "connected"
                } else {
                    "NOT connected"
                };
                let node = report
                    .node
                    .as_ref()
                    .map_or_else(String::new, |node| format!(" on {node}"));
                // A polled source (Modbus) says how its polls go; a broker's, what it asked of
                // Sparkplug edge nodes.
                let polls = fields["polls"].as_u64().unwrap_or(0);
                let activity = if polls > 0 {
                    let micros = fields["poll_micros"].as_u64().unwrap_or(0) as f64;
                    format!("{polls} polls, {:.1} ms a cycle", micros / polls as f64 / 1e3)
                } else {
                    format!("{} rebirths asked", fields["rebirths_requested"])
                };
                let coalesced = match fields["coalesced"].as_u64() {
                    Some(count) if count > 0 => format!(" ({count} replaced before they were read)"),
                    _ => String::new(),
                };
                writeln!(
                    output,
                    "{}{node}: {connected}, {} tags, {} messages read{coalesced}, {} writes, {activity}{when}",
                    report.name, fields["tags"], fields["messages"], fields["writes"],
                )?;
                if let Some(errors) = fields["errors"].as_object()
                    && !errors.is_empty()
                {
                    let counts: Vec<String> = errors
                        .iter()
                        .map(|(kind, count)| format!("{kind} {count}"))
                        .collect();
                    writeln!(output, "  refused: {}", counts.join(", "))?;
                }
                if let Some(message) = fields["last_error"]["message"].as_str() {
                    writeln!(
                        output,
                        "  last error at {}: {message}",
                        fields["last_error"]["time"].as_str().unwrap_or("?")
                    )?;
                }
            }
        }
    }
    Ok(output)
}
