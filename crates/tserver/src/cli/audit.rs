//! `tserver audit`: print, export or verify the audit trail of what was done to the plant.

use std::io::Write;

use clap::Subcommand;

use crate::own_runtime::on_own_runtime;
use store::{SolutionLocation, Store};

/// `tserver audit` actions.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Every entry (since `--since`), oldest first, on standard output: CSV with a header
    /// row, or one JSON object a line.
    Export {
        /// `csv` or `jsonl`.
        #[arg(long, value_enum, default_value_t = ExportFormat::Csv)]
        format: ExportFormat,
    },
    /// Checks the trail's hash chain from its start (or the checkpoint pruning left): fails
    /// naming the first row changed, removed or inserted since it was recorded; prints the
    /// newest row's hash, to be noted elsewhere and compared next time.
    Verify,
}

/// How `tserver audit PATH export` writes the entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Comma-separated values, with a header row.
    Csv,
    /// One JSON object a line.
    Jsonl,
}

/// The audit's columns, as exported.
const AUDIT_COLUMNS: [&str; 10] = [
    "time",
    "action",
    "target",
    "user",
    "peer",
    "connection",
    "old_value",
    "new_value",
    "outcome",
    "signatures",
];

/// Writes `entries` as `format` to `output`.
fn export_audit(
    entries: &[store::AuditEntry],
    format: ExportFormat,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let fields = |entry: &store::AuditEntry| {
        [
            localai::iso8601_millis(entry.time),
            entry.action.as_str().to_owned(),
            entry.target.clone(),
            entry.user.clone(),
            entry.peer.clone(),
            entry.connection.clone(),
            entry.old_value.clone().unwrap_or_default(),
            entry.new_value.clone().unwrap_or_default(),
            entry.outcome.clone(),
            entry.signatures.clone().unwrap_or_default(),
        ]
    };
    match format {
        ExportFormat::Csv => {
            let mut writer = csv::Writer::from_writer(output);
            writer.write_record(AUDIT_COLUMNS)?;
            for entry in entries {
                writer.write_record(fields(entry))?;
            }
            writer.flush()?;
        }
        ExportFormat::Jsonl => {
            for entry in entries {
                let object: serde_json::Map<String, serde_json::Value> = AUDIT_COLUMNS
                    .iter()
                    .zip(fields(entry))
                    .map(|(name, value)| ((*name).to_owned(), serde_json::Value::String(value)))
                    .collect();
                writeln!(output, "{}", serde_json::Value::Object(object))?;
            }
        }
    }
    Ok(())
}

/// Runs `tserver audit`: the entries since `since`, at most `limit` of them (every one for an
/// export), printed one a line or exported.
pub(super) fn audit_command(
    solution: &SolutionLocation,
    since: Option<std::time::SystemTime>,
    limit: usize,
    action: Option<&AuditCommand>,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    if let Some(AuditCommand::Verify) = action {
        return verify_audit(solution, output);
    }
    let limit = if action.is_some() { usize::MAX } else { limit };
    let entries = on_own_runtime(|| async { Store::open(solution).await?.audit(since, limit).await })?;
    if let Some(AuditCommand::Export { format }) = action {
        return export_audit(&entries, *format, output);
    }
    print_audit(&entries, output)
}

/// `tserver audit PATH verify`: what verified, or an error naming where the chain breaks.
fn verify_audit(solution: &SolutionLocation, output: &mut dyn Write) -> anyhow::Result<()> {
    let verdict = on_own_runtime(|| async { Store::open(solution).await?.verify_audit().await })?;
    let verified = verdict.map_err(|broken| anyhow::anyhow!("the audit trail does not verify: {broken}"))?;
    let unchained = match verified.unchained {
        0 => String::new(),
        count => format!(" ({count} recorded before the chain began)"),
    };
    let start = verified.from_checkpoint.map_or_else(
        || "its start".to_owned(),
        |through| format!("the signed checkpoint pruning left (through row {through})"),
    );
    writeln!(
        output,
        "the audit trail verifies: {} rows{unchained}, from {start}",
        verified.rows
    )?;
    match verified.head {
        Some((id, hash)) => writeln!(
            output,
            "newest row {id}, hash {}: note it to see later that no newest rows were removed",
            store::audit_chain::hash_hex(&hash)
        )?,
        None => writeln!(output, "no row is chained yet")?,
    }
    Ok(())
}

/// The entries one a line.
fn print_audit(entries: &[store::AuditEntry], output: &mut dyn Write) -> anyhow::Result<()> {
    for entry in entries {
        let change = match (&entry.old_value, &entry.new_value) {
            (Some(old), Some(new)) => format!(" {old} -> {new}"),
            (None, Some(new)) => format!(" -> {new}"),
            _ => String::new(),
        };
        writeln!(
            output,
            "{} {} {} by {} ({} on {}){change}: {}",
            localai::iso8601_millis(entry.time),
            entry.action.as_str(),
            entry.target,
            entry.user,
            entry.peer,
            entry.connection,
            entry.outcome
        )?;
        if let Some(signatures) = &entry.signatures {
            writeln!(output, "  signed by {signatures}")?;
        }
    }
    Ok(())
}

pub(super) fn parse_since(text: &str) -> Result<std::time::SystemTime, String> {
    if let Ok(time) = humantime::parse_rfc3339_weak(text) {
        return Ok(time);
    }
    humantime::parse_duration(text)
        .ok()
        .and_then(|age| std::time::SystemTime::now().checked_sub(age))
        .ok_or_else(|| format!("{text:?} is neither a time (2026-11-23T08:00:00Z) nor an age (2h)"))
}
