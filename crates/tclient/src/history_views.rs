//! tclient's views of the historian for a person or a script: a tag's trend, every sample (a
//! page at a time, to the window's end), aggregates per interval, and many tags at a past
//! instant, each as a table or CSV.

use std::io::Write;
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};
use clap::ValueEnum;
use service_client::{
    FailoverClient, HistoryInterval, HistorySample, HistoryShape, StateValue, TagHistoryReply,
    TagHistoryRequest,
};

use crate::plant_views::{epoch_ms, parse_time, quality_word, rfc3339, sample_value};

/// An aggregate `tags history --interval` prints per interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Aggregate {
    /// The time-weighted average of the interval's good time.
    Avg,
    /// The smallest value.
    Min,
    /// The largest value.
    Max,
    /// The first value.
    First,
    /// The last value.
    Last,
    /// How many samples were recorded.
    Count,
    /// Seconds of good quality.
    Good,
    /// Booleans and text: seconds in each value (`value=seconds;...`).
    States,
}

impl Aggregate {
    fn name(self) -> &'static str {
        match self {
            Self::Avg => "avg",
            Self::Min => "min",
            Self::Max => "max",
            Self::First => "first",
            Self::Last => "last",
            Self::Count => "count",
            Self::Good => "good_s",
            Self::States => "states",
        }
    }

    /// The aggregate of `interval`: in full for CSV, an average to 4 decimals for a `table`.
    fn of(self, interval: &HistoryInterval, table: bool) -> String {
        let value = |sample: Option<&HistorySample>| sample.map(sample_value).unwrap_or_default();
        let seconds = |ms: i64| format!("{}", ms as f64 / 1000.0);
        match self {
            Self::Avg => interval
                .average
                .map(|average| {
                    if table {
                        let shown = format!("{average:.4}");
                        shown.trim_end_matches('0').trim_end_matches('.').to_owned()
                    } else {
                        average.to_string()
                    }
                })
                .unwrap_or_default(),
            Self::Min => value(interval.min.as_ref()),
            Self::Max => value(interval.max.as_ref()),
            Self::First => value(interval.first.as_ref()),
            Self::Last => value(interval.last.as_ref()),
            Self::Count => interval.count.to_string(),
            Self::Good => seconds(interval.good_ms),
            Self::States => {
                let mut states: Vec<String> = interval
                    .states
                    .iter()
                    .map(|state| {
                        let held = match &state.value {
                            Some(StateValue::Boolean(value)) => value.to_string(),
                            Some(StateValue::Text(value)) => value.clone(),
                            None => String::new(),
                        };
                        format!("{held}={}", seconds(state.duration_ms))
                    })
                    .collect();
                if interval.other_states_ms > 0 {
                    states.push(format!("(other)={}", seconds(interval.other_states_ms)));
                }
                states.join(";")
            }
        }
    }
}

/// How `tags history` reads the window.
#[derive(Debug, Clone)]
pub enum HistoryView {
    /// A trend of at most this many samples (0: the server's default).
    Trend(u32),
    /// Every sample, pages of at most this many (0: the server's default).
    Raw(u32),
    /// These aggregates per interval.
    Intervals(Duration, Vec<Aggregate>),
}

/// What `tags history` was asked for.
#[derive(Debug, Clone)]
pub struct HistoryQuery<'a> {
    /// The tag.
    pub name: &'a str,
    /// The window's start, as typed.
    pub since: &'a str,
    /// The window's end, as typed (`None`: now).
    pub until: Option<&'a str>,
    /// How to read it.
    pub view: HistoryView,
    /// CSV instead of a table.
    pub csv: bool,
}

/// Where output goes: a CSV writer, or a table whose first `times` columns are times.
enum Sink<'a> {
    Csv(Box<csv::Writer<&'a mut dyn Write>>),
    Table { output: &'a mut dyn Write, times: usize },
}

/// The width of an RFC 3339 time with milliseconds, as a table's time columns show it.
const TIME_WIDTH: usize = "2026-11-21T08:00:00.000Z".len();

impl<'a> Sink<'a> {
    fn new(output: &'a mut dyn Write, csv: bool, times: usize) -> Self {
        if csv {
            Self::Csv(Box::new(csv::Writer::from_writer(output)))
        } else {
            Self::Table { output, times }
        }
    }

    fn is_table(&self) -> bool {
        matches!(self, Self::Table { .. })
    }

    fn row(&mut self, cells: &[String]) -> anyhow::Result<()> {
        match self {
            Self::Csv(writer) => writer.write_record(cells)?,
            Self::Table { output, times } => {
                let mut line = String::new();
                for (index, cell) in cells.iter().enumerate() {
                    // Times first, left-aligned; then right-aligned figures.
                    if index < *times {
                        line.push_str(&format!("{cell:<TIME_WIDTH$}  "));
                    } else {
                        line.push_str(&format!("{cell:>12}  "));
                    }
                }
                writeln!(output, "{}", line.trim_end())?;
            }
        }
        Ok(())
    }

    /// A remark for a person: on standard error for CSV, which stays pure data.
    fn remark(&mut self, remark: &str) -> anyhow::Result<()> {
        match self {
            Self::Csv(_) => eprintln!("tclient: {remark}"),
            Self::Table { output, .. } => writeln!(output, "({remark})")?,
        }
        Ok(())
    }

    fn finish(self) -> anyhow::Result<()> {
        if let Self::Csv(mut writer) = self {
            writer.flush()?;
        }
        Ok(())
    }
}

/// `tags history NAME --since ... [--until ...] [--raw | --interval ... --aggregate ...]
/// [--csv]`: the trend, every sample or the aggregates per interval, oldest first, as CSV
/// (RFC 3339 UTC times, a header row) or as a table; a trend cut or thinned says so.
pub async fn tag_history(
    client: &FailoverClient,
    query: &HistoryQuery<'_>,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let now = SystemTime::now();
    let since = parse_time(query.since, now).context("--since")?;
    // Both ends by this clock, so a window of whole intervals is cut into whole intervals.
    let until = epoch_ms(match query.until {
        Some(until) => parse_time(until, now).context("--until")?,
        None => now,
    });
    let request = TagHistoryRequest {
        name: query.name.to_owned(),
        since_ms: epoch_ms(since),
        until_ms: until,
        ..TagHistoryRequest::default()
    };
    let times = match query.view {
        HistoryView::Intervals(..) => 2,
        HistoryView::Trend(_) | HistoryView::Raw(_) => 1,
    };
    let mut sink = Sink::new(output, query.csv, times);
    match &query.view {
        HistoryView::Trend(max_samples) => {
            let reply = client
                .tag_history(TagHistoryRequest {
                    max_samples: *max_samples,
                    ..request
                })
                .await?;
            heading(&mut sink, &reply, "samples", reply.samples.len())?;
            if let Some(opening) = &reply.opening {
                sink.remark(&format!(
                    "{} ({}) since {}, before the window",
                    sample_value(opening),
                    quality_word(opening.quality),
                    rfc3339(opening.timestamp_ms)
                ))?;
            }
            sink.row(&["timestamp", "value", "quality"].map(String::from))?;
            write_samples(&mut sink, &reply.samples)?;
            if reply.truncated {
                sink.remark(&format!(
                    "a trend of {} of the window's {} samples: each bucket's first, lowest, highest and last; \
                     every sample with --raw",
                    reply.samples.len(),
                    reply.total_samples
                ))?;
            }
        }
        HistoryView::Raw(page) => {
            let mut after = None;
            let mut first = true;
            loop {
                let reply = client
                    .tag_history(TagHistoryRequest {
                        shape: HistoryShape::Raw.into(),
                        max_samples: *page,
                        after,
                        ..request.clone()
                    })
                    .await?;
                if first {
                    heading(&mut sink, &reply, "every sample", 0)?;
                    sink.row(&["timestamp", "value", "quality"].map(String::from))?;
                    first = false;
                }
                write_samples(&mut sink, &reply.samples)?;
                match reply.next {
                    Some(next) if after != Some(next) => after = Some(next),
                    Some(_) => bail!("the server sent the same page twice"),
                    None => break,
                }
            }
        }
        HistoryView::Intervals(interval, aggregates) => {
            let interval_ms = i64::try_from(interval.as_millis()).context("--interval is too long")?;
            if interval_ms == 0 {
                bail!("--interval must be at least 1ms");
            }
            let reply = client
                .tag_history(TagHistoryRequest {
                    shape: HistoryShape::Intervals.into(),
                    interval_ms,
                    ..request
                })
                .await?;
            heading(&mut sink, &reply, "intervals", reply.intervals.len())?;
            let mut header = vec!["start".to_owned(), "end".to_owned()];
            header.extend(aggregates.iter().map(|aggregate| aggregate.name().to_owned()));
            sink.row(&header)?;
            for interval in &reply.intervals {
                let mut row = vec![rfc3339(interval.start_ms), rfc3339(interval.end_ms)];
                let table = sink.is_table();
                row.extend(aggregates.iter().map(|aggregate| aggregate.of(interval, table)));
                sink.row(&row)?;
            }
            if reply.truncated {
                let end = reply
                    .intervals
                    .last()
                    .map_or(request.since_ms, |last| last.end_ms);
                sink.remark(&format!(
                    "{} intervals fit one reply; the rest from --since {}",
                    reply.intervals.len(),
                    rfc3339(end)
                ))?;
            }
        }
    }
    sink.finish()
}

/// A table's first line: the tag, its units and what follows (not for CSV).
fn heading(sink: &mut Sink<'_>, reply: &TagHistoryReply, what: &str, count: usize) -> anyhow::Result<()> {
    if let Sink::Table { output, .. } = sink {
        let units = if reply.units.is_empty() {
            String::new()
        } else {
            format!(" ({})", reply.units)
        };
        if count == 0 {
            writeln!(output, "{}{units}: {what}", reply.name)?;
        } else {
            writeln!(output, "{}{units}: {count} {what}", reply.name)?;
        }
    }
    Ok(())
}

fn write_samples(sink: &mut Sink<'_>, samples: &[HistorySample]) -> anyhow::Result<()> {
    for sample in samples {
        sink.row(&[
            rfc3339(sample.timestamp_ms),
            sample_value(sample),
            quality_word(sample.quality).to_owned(),
        ])?;
    }
    Ok(())
}

/// `tags at TIME NAME...`: what each tag was at a past instant (its last recorded sample at or
/// before it, and when that was), one line each, or CSV.
pub async fn values_at(
    client: &FailoverClient,
    at: &str,
    names: &[String],
    csv: bool,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let instant = parse_time(at, SystemTime::now()).context("the instant")?;
    let reply = client.tag_values_at(names, epoch_ms(instant)).await?;
    let mut sink = Sink::new(output, csv, 0);
    if csv {
        sink.row(&["tag", "value", "quality", "recorded"].map(String::from))?;
    }
    for value in &reply.values {
        let row = match &value.sample {
            Some(sample) => [
                value.name.clone(),
                sample_value(sample),
                quality_word(sample.quality).to_owned(),
                rfc3339(sample.timestamp_ms),
            ],
            None => [value.name.clone(), String::new(), String::new(), "-".to_owned()],
        };
        match &mut sink {
            Sink::Table { output, .. } if value.sample.is_none() => {
                writeln!(output, "{}  (nothing recorded by then)", value.name)?;
            }
            Sink::Table { output, .. } => {
                writeln!(output, "{} = {} {} (recorded {})", row[0], row[1], row[2], row[3])?
            }
            Sink::Csv(_) => sink.row(&row)?,
        }
    }
    if reply.truncated {
        sink.remark(&format!(
            "{} of {} tags fit one reply; ask again for the rest",
            reply.values.len(),
            names.len()
        ))?;
    }
    sink.finish()
}
