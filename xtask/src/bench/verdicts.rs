//! The verdict table: every row's target in one table, and the rows a run judged against them,
//! printed at its end and written with its results. A missed target is reported, never an
//! error: speed depends on the machine.

use serde_json::{Value, json};

/// How a row's measured value must compare with its bound.
#[derive(Debug, Clone, Copy)]
enum Bound {
    AtLeast(f64),
    AtMost(f64),
}

/// A row's target: what the table shows as wanted, and the bound the measured value keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target {
    wanted: &'static str,
    bound: Bound,
}

impl Target {
    const fn at_least(wanted: &'static str, bound: f64) -> Self {
        Self {
            wanted,
            bound: Bound::AtLeast(bound),
        }
    }

    const fn at_most(wanted: &'static str, bound: f64) -> Self {
        Self {
            wanted,
            bound: Bound::AtMost(bound),
        }
    }

    /// Whether `value` keeps the bound (never for NaN).
    fn met_by(self, value: f64) -> bool {
        match self.bound {
            Bound::AtLeast(bound) => value >= bound,
            Bound::AtMost(bound) => value <= bound,
        }
    }
}

// The targets, row by row (docs/PERFORMANCE.md gives the reason for each). A ratio is
// tserver's measurement over the one it is set beside in the same run.

/// The first `cargo build --release` (fully optimised) from a clean target directory (the
/// registry already downloaded) over the same build in `dist`, cold, in the same run: 8
/// minutes of the 13 min 42 s a first build took on 2 cores when `release` was what `dist` is
/// now (fat LTO, one codegen unit).
pub(crate) const FIRST_BUILD: Target = Target::at_most("<= 0.584x dist (8 of its 13.7 min)", 480.0 / 822.0);
/// Units the README's commands compile after that first build.
pub(crate) const README_REBUILDS: Target = Target::at_most("0: they start at once", 0.0);
/// Ping calls/s over the reference server's.
pub(crate) const PING_RATE: Target = Target::at_least(">= 0.85x reference", 0.85);
/// Ping p99 over the reference server's.
pub(crate) const PING_P99: Target = Target::at_most("<= 1.5x reference", 1.5);
/// Chat calls/s with the model disabled over the reference server's ping calls/s.
pub(crate) const CHAT_GATE: Target = Target::at_least(">= 0.7x reference ping", 0.7);
/// Calls/s with metrics over calls/s without.
pub(crate) const METRICS_COST: Target = Target::at_least(">= 0.97x", 0.97);
/// tserver's CPU per 1-tool turn over the baseline build's, beside it: 35 us of its 59.
pub(crate) const TURN_CPU: Target =
    Target::at_most("<= 0.593x the baseline build (35 of its 59 us)", 35.0 / 59.0);
/// tserver's added p99 of a 1-tool turn at 1 in flight over the baseline build's: 300 us of
/// the 355 its own run measured.
pub(crate) const TURN_LATENCY: Target =
    Target::at_most("<= 0.845x the baseline build (300 us of its 355)", 300.0 / 355.0);
/// Microseconds from the model's first chunk to the panel's first text, p99.
pub(crate) const FIRST_TEXT: Target = Target::at_most("<= 300 us", 300.0);
/// Connections to the model server over a run at 64 turns in flight.
pub(crate) const MODEL_CONNECTIONS: Target = Target::at_most("<= 64", 64.0);
/// Turns/s against a 500 ms model over the in-flight count / 0.5 s.
pub(crate) const SLOW_MODEL: Target = Target::at_least(">= 90% of in-flight / 0.5 s, no errors", 0.9);
/// Chat p99 beside hostile connections over chat p99 alone.
pub(crate) const HOSTILE: Target = Target::at_most("<= 2x quiet p99, no errors", 2.0);
/// Microseconds from a tag's change to its frame at every panel, p99.
pub(crate) const FAN_OUT_P99: Target = Target::at_most("<= 500 ms (no growing lag), no errors", 500_000.0);
/// MQTT updates/s read by tserver's source over a bare rumqttc subscriber's.
pub(crate) const MQTT_INGEST: Target = Target::at_least(">= 0.8x bare subscriber", 0.8);
/// Microseconds from an MQTT publish to the value in ReadTags, p99.
pub(crate) const MQTT_FRESHNESS: Target = Target::at_most("<= 2 ms, none lost", 2_000.0);
/// tserver CPU microseconds per MQTT update.
pub(crate) const MQTT_CPU: Target = Target::at_most("<= 5 us", 5.0);
/// Bytes per MQTT tag (plant, source and values).
pub(crate) const MQTT_MEMORY: Target = Target::at_most("<= 2 KiB/tag", 2048.0);
/// Microseconds from a script's trigger to its run's start, p99.
pub(crate) const SCRIPT_TRIGGER: Target = Target::at_most("<= 1 ms", 1_000.0);
/// Trivial script runs per second.
pub(crate) const SCRIPT_RUNS: Target = Target::at_least(">= 20,000 runs/s", 20_000.0);
/// Bytes per loaded script.
pub(crate) const SCRIPT_MEMORY: Target = Target::at_most("<= 64 KiB", 64.0 * 1024.0);
/// Milliseconds from a node's kill until every panel reads again, p99.
pub(crate) const FAILOVER: Target = Target::at_most("<= 2 s, no read lost", 2_000.0);
/// Chat-gate calls/s with the solution in PostgreSQL over calls/s with it in a file.
pub(crate) const STORE_GATE: Target = Target::at_least(">= 0.8x", 0.8);
/// Write round trips/s with the solution in PostgreSQL over those with it in a file.
pub(crate) const STORE_WRITES: Target = Target::at_least(">= 0.5x", 0.5);
/// tserver's CPU, as a share of one core, recording 10,000 tags that change every second.
pub(crate) const HISTORY_CPU: Target = Target::at_most("<= 5% of a core", 0.05);
/// Samples/s a burst through the history writer takes over a bare batched insert of the same
/// samples as indexed rows.
pub(crate) const HISTORY_BURST: Target = Target::at_least(">= 1.0x bare insert", 1.0);
/// Bytes the file grows by per sample offered, the recorder's compression on.
pub(crate) const HISTORY_BYTES: Target = Target::at_most("<= 4 B a sample", 4.0);
/// Milliseconds of a year of one-second samples read as 1,000 M4 buckets, p99.
pub(crate) const HISTORY_TREND_P99: Target = Target::at_most("<= 100 ms", 100.0);
/// The row table's fastest run of that trend over the blocks' p99.
pub(crate) const HISTORY_TREND_SPEEDUP: Target = Target::at_least(">= 20x", 20.0);
/// Milliseconds of 1,000 tags' values at a past instant, p99.
pub(crate) const HISTORY_INSTANT_P99: Target = Target::at_most("<= 200 ms", 200.0);
/// A history query's p99 on PostgreSQL over the same query's on SQLite.
pub(crate) const HISTORY_POSTGRES: Target = Target::at_most("<= 3x SQLite", 3.0);
/// Microseconds of an MCP tools/call at 1 in flight, p99.
pub(crate) const MCP_P99: Target = Target::at_most("<= 1 ms, no errors", 1_000.0);
/// MCP tools/call calls/s at 16 in flight.
pub(crate) const MCP_RATE: Target = Target::at_least(">= 5,000 calls/s, no errors", 5_000.0);
/// MCP tools/call p99 at 1 in flight over the MCP baseline build's, same run.
pub(crate) const MCP_BESIDE_BASELINE: Target = Target::at_most("<= 1.1x the MCP baseline (2b86ae77)", 1.1);
/// ms p99 of reading the plant model of 10,000 tags over MCP.
pub(crate) const MCP_PLANT_MODEL: Target =
    Target::at_most("<= 100 ms, whole, within its 4 MiB bound, no errors", 100.0);
/// KiB of tserver memory per idle logged-in connection.
pub(crate) const IDLE: Target = Target::at_most("all held, <= 12 KiB each", 12.0);

/// WebSocket (JSON) calls/s over TCP (framed protobuf) calls/s, same load, same server.
pub(crate) const WEBSOCKET_RATE: Target = Target::at_least(">= 0.5x TCP, no errors", 0.5);
/// Share of subscriber-windows of the hold that brought the subscriber at least one update.
pub(crate) const WEBSOCKET_FED: Target = Target::at_least("every subscriber fed in every window", 1.0);
/// tserver's memory growth in the hold's last window over its growth in the second (every
/// subscriber fed by then), each window's median sample: a backlog keeps growing, a bound does
/// not.
pub(crate) const WEBSOCKET_BOUNDED: Target = Target::at_most("<= 1.1x, all held", 1.1);
/// KiB of tserver memory growth per WebSocket subscriber while held.
pub(crate) const WEBSOCKET_MEMORY: Target = Target::at_most("all held, <= 64 KiB each", 64.0);

/// Microseconds of one `runtime_search_documents` call on the largest library the limits allow
/// (500 documents, 32 MiB), p99 at 1 in flight.
pub(crate) const DOCUMENT_SEARCH: Target = Target::at_most("<= 20 ms", 20_000.0);
/// A turn whose one tool call is a proposal, question to reply, over a plain 1-tool turn: the
/// same two model requests each, p99 at 1 in flight.
pub(crate) const PROPOSING_TURN: Target = Target::at_most("<= 1.2x a plain 1-tool turn, no errors", 1.2);

/// An unsigned write's p50 at 1 in flight over the write baseline's (the build before the
/// acting path, signatures and the audit's hash chain), beside it.
pub(crate) const WRITE_LATENCY: Target = Target::at_most("<= 1.1x the write baseline (7a74e614)", 1.1);

/// Milliseconds from navigating to the logged-in panel to its first live value drawn, median.
pub(crate) const PANEL_FIRST_VALUE: Target = Target::at_most("<= 300 ms", 300.0);
/// KiB the panel's page and its files decode to, as the browser loaded them.
pub(crate) const PANEL_WEIGHT: Target = Target::at_most("<= 200 KiB", 200.0);
/// Milliseconds from navigating to the plant overview of a 10,000-tag plant to its first live
/// value drawn, median.
pub(crate) const OVERVIEW_FIRST_VALUE: Target = Target::at_most("<= 500 ms", 500.0);
/// Percent of the time the overview page's main thread is busy while every tag changes once a
/// second (the worse of the plant overview and an area's display).
pub(crate) const OVERVIEW_MAIN_THREAD: Target = Target::at_most("<= 20%", 20.0);
/// Milliseconds from choosing a year's window to the trend of a year of one-second samples
/// drawn, median.
pub(crate) const YEAR_TREND: Target = Target::at_most("<= 300 ms", 300.0);
/// Milliseconds from an alarm's activation in the field to its row in the panel's list, and to
/// the flood banner counting it, p99, while 1,000 activate within 10 s.
pub(crate) const FLOOD_PANEL: Target = Target::at_most("<= 1 s", 1_000.0);
/// Activations and clears of a flood missing from the alarm history.
pub(crate) const FLOOD_RECORDED: Target = Target::at_most("every one", 0.0);
/// Webhook requests a second of a flood and its clear (a second of its own), every event in
/// them once: a batch a store of the history (about a second), never a request an event.
pub(crate) const FLOOD_NOTIFICATIONS: Target = Target::at_most("<= 1.5, every event once", 1.5);

/// Milliseconds of one Modbus poll cycle of 10,000 registers (every read sent and answered):
/// a tenth of a 1 s poll at most.
pub(crate) const MODBUS_CYCLE: Target = Target::at_most("<= 100 ms", 100.0);
/// Milliseconds of tserver CPU per poll cycle of 10,000 registers at 1 s: 5% of a core.
pub(crate) const MODBUS_CPU: Target = Target::at_most("<= 50 ms (5% of a core at 1 s)", 50.0);

/// OPC UA changes/s applied by tserver's source over a bare async-opcua client's, same items
/// and parameters, same stream.
pub(crate) const OPCUA_INGEST: Target = Target::at_least(">= 0.8x bare client", 0.8);
/// tserver's CPU per OPC UA change over the bare client's: decoding is the same, what tserver
/// adds (the slot, the plant's value) may cost as much again.
pub(crate) const OPCUA_CPU: Target = Target::at_most("<= 2x bare client", 2.0);
/// Microseconds a value's p99 age in ReadTags may exceed its p99 age at the bare client's
/// callback (both mostly the server's publishing interval).
pub(crate) const OPCUA_FRESHNESS: Target = Target::at_most("<= bare client's p99 + 5 ms", 5_000.0);

/// One row of the table.
#[derive(Debug)]
struct Verdict {
    what: String,
    measured: String,
    target: &'static str,
    met: bool,
}

/// The rows of a run, in the order they were judged.
#[derive(Debug, Default)]
pub(crate) struct Verdicts(Vec<Verdict>);

impl Verdicts {
    /// A row whose `value` is judged against `target`; `clean` (no errors, nothing lost) must
    /// hold as well.
    pub(crate) fn judge(&mut self, what: String, measured: String, target: Target, value: f64, clean: bool) {
        self.0.push(Verdict {
            what,
            measured,
            target: target.wanted,
            met: target.met_by(value) && clean,
        });
    }

    /// A row this run cannot judge (a smoke run does not build what it is set beside).
    pub(crate) fn unjudged(&mut self, what: String, measured: String, target: Target) {
        self.0.push(Verdict {
            what,
            measured,
            target: target.wanted,
            met: false,
        });
    }

    /// Prints the table.
    pub(crate) fn print(&self) {
        println!();
        println!("{:<58} {:<52} {:<26} met", "target", "measured", "wanted");
        for verdict in &self.0 {
            println!(
                "{:<58} {:<52} {:<26} {}",
                verdict.what,
                verdict.measured,
                verdict.target,
                if verdict.met { "yes" } else { "NO" }
            );
        }
    }

    /// The table as docs/PERFORMANCE.md gives it: a Markdown row a verdict, misses in bold.
    pub(crate) fn to_markdown(&self) -> String {
        let cell = |text: &str| text.replace('|', "\\|");
        let mut table = String::from("| row | measured | target | met |\n| --- | --- | --- | --- |\n");
        for verdict in &self.0 {
            table.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                cell(&verdict.what),
                cell(&verdict.measured),
                cell(verdict.target),
                if verdict.met { "yes" } else { "**no**" }
            ));
        }
        table
    }

    pub(crate) fn to_json(&self) -> Value {
        self.0
            .iter()
            .map(|verdict| {
                json!({
                    "what": verdict.what, "measured": verdict.measured, "target": verdict.target, "met": verdict.met,
                })
            })
            .collect::<Vec<_>>()
            .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_markdown_table_escapes_pipes_and_bolds_misses() {
        let mut verdicts = Verdicts::default();
        verdicts.judge(
            "ping".to_owned(),
            "1.2x".to_owned(),
            Target::at_least(">= 1x", 1.0),
            1.2,
            true,
        );
        verdicts.judge(
            "units rebuilt (a | b)".to_owned(),
            "0 / 1".to_owned(),
            README_REBUILDS,
            1.0,
            true,
        );
        assert_eq!(
            verdicts.to_markdown(),
            "| row | measured | target | met |\n| --- | --- | --- | --- |\n\
             | ping | 1.2x | >= 1x | yes |\n\
             | units rebuilt (a \\| b) | 0 / 1 | 0: they start at once | **no** |\n"
        );
    }
}
