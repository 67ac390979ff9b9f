//! Reading `tclient bench` reports, and the results a run writes to `target/bench/`.

use std::time::Duration;

use anyhow::Context;
use serde_json::Value;

/// Calls per second of a `tclient bench` report.
pub(crate) fn rps(report: &Value) -> f64 {
    report["callsPerSecond"].as_f64().unwrap_or(0.0)
}

/// A latency quantile (`p50`, `p99`) of a `tclient bench` report, in microseconds.
pub(crate) fn latency(report: &Value, quantile: &str) -> f64 {
    report["latencyUs"][quantile].as_f64().unwrap_or(f64::NAN)
}

/// Every error a `tclient bench` report counts.
pub(crate) fn error_count(report: &Value) -> u64 {
    report["errors"]
        .as_object()
        .map_or(0, |errors| errors.values().filter_map(Value::as_u64).sum())
}

/// Calls a `tclient bench` report counts, at least 1 (a divisor).
pub(crate) fn calls(report: &Value) -> f64 {
    report["calls"].as_u64().unwrap_or(0).max(1) as f64
}

/// The median of `values` (NaN when there are none).
pub(crate) fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => f64::midpoint(values[n / 2 - 1], values[n / 2]),
    }
}

/// A plan's duration text (`500ms`, `5s`) as a duration.
pub(crate) fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    humantime::parse_duration(text).with_context(|| format!("{text:?} is not a duration"))
}

pub(crate) fn strings(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The measurements of a run by name, written to `target/bench/` at its end.
#[derive(Debug, Default)]
pub(crate) struct Results(serde_json::Map<String, Value>);

impl Results {
    /// Prints a `tclient bench` report's line and keeps the report under `name`.
    pub(crate) fn record(&mut self, name: String, report: &Value) {
        eprintln!(
            "{name:<28} {:>9.0} calls/s  p50 {:>8.1} us  p99 {:>8.1} us  errors {}",
            rps(report),
            latency(report, "p50"),
            latency(report, "p99"),
            error_count(report)
        );
        self.0.insert(name, report.clone());
    }

    pub(crate) fn insert(&mut self, name: &str, value: Value) {
        self.0.insert(name.to_owned(), value);
    }

    /// A report kept under `name` (null when there is none).
    pub(crate) fn get(&self, name: &str) -> &Value {
        self.0.get(name).unwrap_or(&Value::Null)
    }

    pub(crate) fn into_json(self) -> Value {
        self.0.into()
    }
}
