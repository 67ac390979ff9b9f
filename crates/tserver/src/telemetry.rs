//! The server's metrics: one Prometheus recorder for the process, installed on first use, the
//! name, help and buckets of every metric, and the text `/metrics` serves.
//!
//! The assistant's metrics follow OpenTelemetry's GenAI conventions in Prometheus spelling
//! (`gen_ai_client_operation_duration_seconds`, recorded by `localai`); the server's own are
//! `tserver_*`. Histograms have explicit buckets (never summaries). Labels stay
//! low-cardinality: a call kind, an outcome, a status, a tool or script name from the
//! solution; never a user, a GUID, a tag value or a query.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{Counter, describe_counter, describe_gauge};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use plant::telemetry::{MODBUS_POLLS, MQTT_MESSAGES, MQTT_REFUSED, SCRIPT_RUNS};
use tserver_proto::v1::{ErrorCode, server_frame};

/// Connections open now.
pub(crate) const CONNECTIONS_OPEN: &str = "tserver_connections_open";
/// Connections refused, by `reason` (`connection_cap`, `login_slots`, `http_connection_cap`).
pub(crate) const CONNECTIONS_REFUSED: &str = "tserver_connections_refused_total";
/// Logins, by `outcome` (`ok`, `failed`, `throttled`).
pub(crate) const LOGINS: &str = "tserver_logins_total";
/// Calls answered, by `call` and `outcome` (`ok` or the error code).
pub(crate) const CALLS: &str = "tserver_calls_total";
/// MCP tool calls over HTTP, by `outcome` (`ok`, `error`).
pub(crate) const MCP_CALLS: &str = "tserver_mcp_tool_calls_total";

/// `TagUpdate` frames sent to subscribed panels.
pub(crate) const SUBSCRIPTION_UPDATES: &str = "tserver_subscription_updates_total";
/// Tag changes merged into a later `TagUpdate` (latest value wins) instead of sent alone.
pub(crate) const SUBSCRIPTION_COALESCED: &str = "tserver_subscription_updates_coalesced_total";

/// Every metric the server, its plant and its assistant record, by name (what dashboards may use).
pub const METRICS: [&str; 19] = [
    CONNECTIONS_OPEN,
    CONNECTIONS_REFUSED,
    LOGINS,
    CALLS,
    SCRIPT_RUNS,
    MCP_CALLS,
    MQTT_MESSAGES,
    MQTT_REFUSED,
    MODBUS_POLLS,
    SUBSCRIPTION_UPDATES,
    SUBSCRIPTION_COALESCED,
    localai::telemetry::CHAT_TURNS,
    localai::telemetry::TOOL_CAP_REACHED,
    localai::telemetry::BUDGET_EXHAUSTED,
    localai::telemetry::OPERATION_DURATION,
    localai::telemetry::TOKEN_USAGE,
    localai::telemetry::TIME_TO_FIRST_CHUNK,
    localai::telemetry::TOOL_DURATION,
    localai::telemetry::MODEL_HTTP_ERRORS,
];

/// Bucket bounds in seconds for durations, from 100 us to 2 min.
const SECONDS: [f64; 16] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
    120.0,
];

/// Bucket bounds for token counts, 1 to 4 Mi by powers of 4 (as OpenTelemetry advises).
const TOKENS: [f64; 12] = [
    1.0,
    4.0,
    16.0,
    64.0,
    256.0,
    1_024.0,
    4_096.0,
    16_384.0,
    65_536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
];

/// How often histogram samples are folded into their buckets between scrapes.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The `ok` counter of every call kind, registered once with the recorder: `counter!` builds,
/// hashes and looks up its key at every increment, most of what counting a ping cost.
static CALLS_OK: OnceLock<Vec<(&'static str, Counter)>> = OnceLock::new();

/// Installs the process's recorder, once (later calls return the same handle). `None` when
/// another recorder was installed first: metrics then go there, and `/metrics` says so. Until
/// it is called, metrics are dropped where they are recorded (the facade's no-op recorder).
pub fn recorder() -> Option<&'static PrometheusHandle> {
    HANDLE.get_or_init(install).as_ref()
}

/// Registers the `ok` counter of each of `call_kinds` (the labels [`count_call`] is given),
/// once; calls are counted from then on.
pub(crate) fn count_calls(call_kinds: &[&'static str]) {
    CALLS_OK.get_or_init(|| {
        call_kinds
            .iter()
            .map(|&call| (call, metrics::counter!(CALLS, "call" => call, "outcome" => "ok")))
            .collect()
    });
}

fn install() -> Option<PrometheusHandle> {
    let builder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), &SECONDS)
        .and_then(|builder| {
            builder.set_buckets_for_metric(Matcher::Full(localai::telemetry::TOKEN_USAGE.to_owned()), &TOKENS)
        });
    let handle = match builder.and_then(PrometheusBuilder::install_recorder) {
        Ok(handle) => handle,
        Err(error) => {
            tracing::warn!(%error, "metrics recorder not installed; /metrics will be empty");
            return None;
        }
    };
    describe();
    let upkeep = handle.clone();
    let spawned = std::thread::Builder::new()
        .name("metrics-upkeep".to_owned())
        .spawn(move || {
            loop {
                std::thread::sleep(UPKEEP_EVERY);
                upkeep.run_upkeep();
            }
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "no metrics upkeep thread; histograms fold at each scrape only");
    }
    Some(handle)
}

fn describe() {
    describe_gauge!(CONNECTIONS_OPEN, "Display-client connections open now");
    describe_counter!(CONNECTIONS_REFUSED, "Connections refused, by reason");
    describe_counter!(LOGINS, "Logins, by outcome (ok, failed, throttled)");
    describe_counter!(CALLS, "Framed-protocol calls answered, by call and outcome");
    describe_counter!(SCRIPT_RUNS, "Solution script runs, by how they ended");
    describe_counter!(MCP_CALLS, "RuntimeMCP tool calls over HTTP, by outcome");
    describe_counter!(MQTT_MESSAGES, "MQTT messages the plant's sources received");
    describe_counter!(
        MQTT_REFUSED,
        "MQTT messages refused (unreadable payload, wrong type...), by kind"
    );
    describe_counter!(
        MODBUS_POLLS,
        "Modbus poll cycles the plant's sources completed (every read answered)"
    );
    describe_counter!(SUBSCRIPTION_UPDATES, "Tag updates sent to subscribed panels");
    describe_counter!(
        SUBSCRIPTION_COALESCED,
        "Tag changes merged into a later update (latest value wins) instead of sent alone"
    );
    localai::telemetry::describe();
}

/// The Prometheus text of every metric now; `None` when no recorder was installed (a server
/// started with metrics off).
pub fn render() -> Option<String> {
    let installed = HANDLE.get()?;
    Some(installed.as_ref().map_or_else(
        || "# another metrics recorder was installed first: its own exporter has the metrics\n".to_owned(),
        |handle| {
            handle.run_upkeep();
            handle.render()
        },
    ))
}

/// Counts a connection open while it lives.
#[derive(Debug)]
pub(crate) struct OpenConnection(());

impl OpenConnection {
    pub(crate) fn new() -> Self {
        metrics::gauge!(CONNECTIONS_OPEN).increment(1.0);
        Self(())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        metrics::gauge!(CONNECTIONS_OPEN).decrement(1.0);
    }
}

/// Counts a call answered with `body` (`ok`, or its error code); nothing while no recorder
/// was installed (metrics off).
pub(crate) fn count_call(call: &'static str, body: &server_frame::Body) {
    let Some(calls_ok) = CALLS_OK.get() else {
        return;
    };
    let outcome = match body {
        server_frame::Body::Error(error) => error.code().as_str_name(),
        _ => match calls_ok.iter().find(|(kind, _)| *kind == call) {
            Some((_, counter)) => return counter.increment(1),
            None => "ok",
        },
    };
    metrics::counter!(CALLS, "call" => call, "outcome" => outcome).increment(1);
}

/// Counts a login by how it ended: `ok` (no refusal), `throttled` or `failed`.
pub(crate) fn count_login(refusal: Option<ErrorCode>) {
    let outcome = match refusal {
        None => "ok",
        Some(ErrorCode::LoginThrottled) => "throttled",
        Some(_) => "failed",
    };
    metrics::counter!(LOGINS, "outcome" => outcome).increment(1);
}
