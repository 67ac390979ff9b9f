//! How long and how hard each scenario runs: the full plan on a quiet machine, the smoke plan
//! in CI.

use super::alarm_flood::FloodPlan;
use super::document_search::{DocumentPlan, LARGEST_LIBRARY};
use super::failover_bench::FailoverPlan;
use super::history_bench::HistoryPlan;
use super::modbus_bench::ModbusPlan;
use super::mqtt_bench::MqttPlan;
use super::opcua_bench::OpcUaPlan;
use super::panel_overview::OverviewPlan;
use super::script_bench::ScriptPlan;
use super::store_bench::StorePlan;
use super::websocket_subscribers::SubscriberPlan;

/// How long and how hard each scenario runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub(crate) duration: &'static str,
    pub(crate) warmup: &'static str,
    pub(crate) tool_turns: u64,
    pub(crate) slow_connections: usize,
    pub(crate) slow_duration: &'static str,
    pub(crate) slow_warmup: &'static str,
    pub(crate) idle_connections: usize,
    pub(crate) idle_hold: &'static str,
    pub(crate) hostile: usize,
    /// Panels subscribed in the fan-out scenario.
    pub(crate) panels: usize,
    /// Tags they subscribe to, each written 10 times a second.
    pub(crate) bench_tags: usize,
    /// Writes per round-trip measurement.
    pub(crate) writes: u64,
    /// The MQTT ingestion and freshness runs.
    pub(crate) mqtt: MqttPlan,
    /// Seconds of each RuntimeMCP run.
    pub(crate) mcp_seconds: f64,
    /// The solution-script runs.
    pub(crate) scripts: ScriptPlan,
    /// Calls per run of the metrics-cost and CPU-per-call measurements.
    pub(crate) cost_calls: u64,
    /// Calls per run counted under callgrind, which runs tserver some fifty times slower.
    pub(crate) counted_calls: u64,
    /// Node kills behind HAProxy.
    pub(crate) failover: FailoverPlan,
    /// The same solution from a file and from PostgreSQL.
    pub(crate) store: StorePlan,
    /// The historian's ingestion and queries.
    pub(crate) history: HistoryPlan,
    /// Searches of a document library.
    pub(crate) documents: DocumentPlan,
    /// Browser-like WebSocket subscribers held under changing tags.
    pub(crate) websocket_subscribers: SubscriberPlan,
    /// Loads of the operator panel in Chromium, after the one that logs in.
    pub(crate) panel_loads: usize,
    /// The overview displays of a 10,000-tag plant in Chromium.
    pub(crate) overview: OverviewPlan,
    /// 1,000 alarms of a 10,000-tag plant activating within 10 s, then clearing.
    pub(crate) flood: FloodPlan,
    /// One Modbus device's registers polled.
    pub(crate) modbus: ModbusPlan,
    /// One OPC UA server's variables streaming changes.
    pub(crate) opcua: OpcUaPlan,
}

/// The full run, the binaries users deploy (`release`) on a quiet machine.
pub(crate) const FULL: Plan = Plan {
    duration: "5s",
    warmup: "1s",
    tool_turns: 10_000,
    slow_connections: 100,
    slow_duration: "10s",
    slow_warmup: "2s",
    idle_connections: 10_000,
    idle_hold: "5s",
    hostile: 1_000,
    panels: 50,
    bench_tags: 1_000,
    writes: 5_000,
    mqtt: MqttPlan {
        tags: 100_000,
        rate: 10_000,
        seconds: 5.0,
        rounds: 3,
    },
    mcp_seconds: 5.0,
    scripts: ScriptPlan {
        loaded: 1_000,
        samples: 2_000,
        trivial_scripts: 4,
        seconds: 3.0,
    },
    cost_calls: 200_000,
    counted_calls: 4_000,
    failover: FailoverPlan { kills: 20, panels: 8 },
    store: StorePlan {
        duration: "5s",
        warmup: "1s",
        writes: 5_000,
    },
    history: HistoryPlan {
        tags: 10_000,
        sustained_seconds: 30,
        burst_seconds: 60,
        storage_tags: 100,
        storage_seconds: 86_400,
        trend_seconds: 365 * 86_400,
        instant_tags: 1_000,
        instant_seconds: 7_200,
        queries: 20,
    },
    documents: DocumentPlan {
        documents: LARGEST_LIBRARY.0,
        bytes: LARGEST_LIBRARY.1,
        queries: 2_000,
    },
    websocket_subscribers: SubscriberPlan {
        subscribers: 500,
        tags: 200,
        seconds: 10.0,
    },
    panel_loads: 21,
    overview: OverviewPlan {
        loads: 21,
        live_seconds: 10.0,
        trend_seconds: 365 * 86_400,
        trend_draws: 9,
    },
    flood: FloodPlan {
        alarms: 1_000,
        seconds: 10.0,
    },
    modbus: ModbusPlan {
        registers: 10_000,
        seconds: 10.0,
    },
    // Every variable changes once a second: each change is its own notification (none
    // coalesced by the server's queue of one per item at 100 ms publishing), as in a plant of
    // many slow tags, and 10,000 monitored items take ten create requests.
    opcua: OpcUaPlan {
        variables: 10_000,
        rate: 10_000,
        seconds: 5.0,
    },
};

/// A few seconds in all, with debug binaries: proves the harness works (CI), measures nothing.
pub(crate) const SMOKE: Plan = Plan {
    duration: "500ms",
    warmup: "100ms",
    tool_turns: 100,
    slow_connections: 4,
    slow_duration: "1s",
    slow_warmup: "600ms",
    idle_connections: 50,
    idle_hold: "300ms",
    hostile: 30,
    panels: 3,
    bench_tags: 50,
    writes: 50,
    mqtt: MqttPlan {
        tags: 500,
        rate: 1_000,
        seconds: 0.5,
        rounds: 1,
    },
    mcp_seconds: 0.5,
    scripts: ScriptPlan {
        loaded: 20,
        samples: 30,
        trivial_scripts: 2,
        seconds: 0.3,
    },
    cost_calls: 2_000,
    counted_calls: 200,
    failover: FailoverPlan { kills: 2, panels: 2 },
    store: StorePlan {
        duration: "500ms",
        warmup: "100ms",
        writes: 50,
    },
    history: HistoryPlan {
        tags: 200,
        sustained_seconds: 3,
        burst_seconds: 5,
        storage_tags: 10,
        storage_seconds: 3_600,
        trend_seconds: 20_000,
        instant_tags: 20,
        instant_seconds: 2_400,
        queries: 2,
    },
    documents: DocumentPlan {
        documents: 20,
        bytes: 512 * 1024,
        queries: 20,
    },
    websocket_subscribers: SubscriberPlan {
        subscribers: 20,
        tags: 50,
        seconds: 1.0,
    },
    panel_loads: 3,
    overview: OverviewPlan {
        loads: 2,
        live_seconds: 1.0,
        trend_seconds: 3_600,
        trend_draws: 1,
    },
    flood: FloodPlan {
        alarms: 40,
        seconds: 1.0,
    },
    modbus: ModbusPlan {
        registers: 500,
        seconds: 2.0,
    },
    opcua: OpcUaPlan {
        variables: 200,
        rate: 1_000,
        seconds: 1.0,
    },
};
