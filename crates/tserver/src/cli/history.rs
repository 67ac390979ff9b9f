//! `tserver history`: export what the historian keeps (a window, some tags or every one) to
//! keep it past `HistoryRetentionHours`.

use std::io::Write;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use clap::Subcommand;
use plant_model::{TagSpec, TagValue};
use store::{SolutionLocation, Store};

use super::audit::{ExportFormat, parse_since};
use crate::own_runtime::on_own_runtime;

/// `tserver history` actions.
#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// The stored samples of the plant's tags (every tag unless `--tag`), tag by tag in the
    /// plant's order, each oldest first, on standard output: CSV with a header row
    /// (`time,tag,value,quality`), or one JSON object a line.
    Export {
        /// A tag to export (dotted name; repeatable). Default: every tag of the plant.
        #[arg(long = "tag", value_name = "NAME")]
        tags: Vec<String>,
        /// From then: a time (RFC 3339) or an age (`2h`). Default: as far back as the
        /// history is kept (`HistoryRetentionHours`).
        #[arg(long, value_parser = parse_since)]
        since: Option<SystemTime>,
        /// Until then: a time (RFC 3339) or an age (`1h`: an hour ago). Default: now.
        #[arg(long, value_parser = parse_since)]
        until: Option<SystemTime>,
        /// `csv` or `jsonl`.
        #[arg(long, value_enum, default_value_t = ExportFormat::Csv)]
        format: ExportFormat,
    },
}

/// The stretch of history read at once: a window is exported an hour at a time, so a year of
/// one-second samples never sits in memory whole.
const CHUNK: Duration = Duration::from_secs(3600);

/// Runs `tserver history` on the solution at `location`.
pub(super) fn history_command(
    location: &SolutionLocation,
    action: &HistoryCommand,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let HistoryCommand::Export {
        tags,
        since,
        until,
        format,
    } = action;
    let (store, plant, kept) = on_own_runtime(|| async {
        let store = Store::open(location).await?;
        let plant = store.plant_definitions().await?;
        let kept = store.runtime_settings().await?.history_retention;
        anyhow::Ok((store, plant, kept))
    })?;
    let chosen: Vec<&TagSpec> = if tags.is_empty() {
        plant.tags.iter().collect()
    } else {
        tags.iter()
            .map(|name| {
                plant.tags.iter().find(|tag| &tag.name == name).with_context(|| {
                    let hint = plant_model::nearest(name, plant.tags.iter().map(|tag| tag.name.as_str()))
                        .map(|near| format!(" (did you mean {near:?}?)"))
                        .unwrap_or_default();
                    format!("--tag {name:?}: the plant has no such tag{hint}")
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    let until = until.unwrap_or_else(SystemTime::now);
    let since = since.unwrap_or_else(|| until.checked_sub(kept).unwrap_or(SystemTime::UNIX_EPOCH));
    anyhow::ensure!(since <= until, "--since is after --until: nothing between them");
    let mut sink = match format {
        ExportFormat::Csv => {
            let mut writer = csv::Writer::from_writer(output);
            writer.write_record(["time", "tag", "value", "quality"])?;
            Sink::Csv(Box::new(writer))
        }
        ExportFormat::Jsonl => Sink::Jsonl(output),
    };
    for tag in chosen {
        let mut from = since;
        loop {
            let to = from.checked_add(CHUNK).map_or(until, |end| end.min(until));
            let page = store.tag_history_blocking(&tag.name, tag.kind, (from, to), usize::MAX)?;
            for sample in page.samples {
                sink.write(&tag.name, &sample)?;
            }
            if to >= until {
                break;
            }
            // The window's ends are both included: the next starts a millisecond on.
            from = to + Duration::from_millis(1);
        }
    }
    sink.finish()?;
    Ok(())
}

/// Where the exported rows go, in the format asked for.
enum Sink<'a> {
    /// Boxed: a CSV writer holds its buffer, the JSON lines only the output.
    Csv(Box<csv::Writer<&'a mut dyn Write>>),
    Jsonl(&'a mut dyn Write),
}

impl Sink<'_> {
    fn write(&mut self, tag: &str, sample: &store::HistorySample) -> anyhow::Result<()> {
        let time = localai::iso8601_millis(sample.time);
        let quality = sample.quality.label();
        match self {
            Self::Csv(writer) => {
                let value = match &sample.value {
                    TagValue::Text(text) => text.to_string(),
                    other => other.to_json().to_string(),
                };
                writer.write_record([time.as_str(), tag, value.as_str(), quality])?;
            }
            Self::Jsonl(output) => {
                let line = serde_json::json!({
                    "time": time, "tag": tag, "value": sample.value.to_json(), "quality": quality,
                });
                writeln!(output, "{line}")?;
            }
        }
        Ok(())
    }

    fn finish(self) -> anyhow::Result<()> {
        match self {
            Self::Csv(mut writer) => writer.flush()?,
            Self::Jsonl(output) => output.flush()?,
        }
        Ok(())
    }
}
