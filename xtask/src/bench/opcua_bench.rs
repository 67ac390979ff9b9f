//! The OPC UA scenario of `cargo xtask bench`: the tests' OPC UA server streams changes over
//! many variables, each value the time it was set; tserver's source and a bare async-opcua
//! client subscribed to the same items with the same parameters each read the stream in turn.
//! It measures the changes per second each applies, the CPU per change, and how old a value is
//! when ReadTags returns it (beside how old it is when the bare client's callback gets it).
//!
//! The server is a process of its own (`opcua-server-under-test`, started with load
//! variables); the measuring side (`xtask opcua-bench`, the build of the bench's profile) runs
//! both clients one after the other, so its CPU in each window is that client's alone.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use opcua::client::{ClientBuilder, DataChangeCallback, IdentityToken, Session};
use opcua::types::{
    AttributeId, ExtensionObject, MessageSecurityMode, MonitoredItemCreateRequest, MonitoringMode,
    MonitoringParameters, NodeId, ReadValueId, TimestampsToReturn, Variant,
};
use serde_json::{Value, json};
use service_client::{Client, ClientOptions, TagValue};
use tokio_util::sync::CancellationToken;
use tserver_tests::opcua::{OpcUaServer, OpcUaServerOptions, load_variable};

use super::harness::source_reading;
use super::latencies::Latencies;
use super::report::Results;
use super::verdicts::{self, Verdicts};
use crate::processes::{measuring_side, own_cpu_seconds, run_quietly};

/// The sampling and publishing interval both clients ask for (ms): async-opcua's server
/// samples and publishes no faster, and plants commonly use it.
const INTERVAL_MS: u64 = 100;
/// Monitored items per create request and notifications per publish response, as tserver's
/// source asks.
const ITEMS_PER_CALL: usize = 1000;
const NOTIFICATIONS_PER_PUBLISH: u32 = 1000;
/// Variables whose values are timed (in both clients), spread evenly over them.
const PROBES: usize = 200;
/// How long a load runs before and after the measured window.
const SETTLE: Duration = Duration::from_millis(500);
/// How long the first values (one per variable) may take to arrive.
const FIRST_VALUES_WITHIN: Duration = Duration::from_secs(120);

/// The shape of the OPC UA run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpcUaPlan {
    /// Variables on the server, one tag (and one monitored item) each.
    pub(crate) variables: usize,
    /// Changes a second over them all.
    pub(crate) rate: u32,
    /// Seconds of each measured window.
    pub(crate) seconds: f64,
}

fn tag_name(index: usize) -> String {
    format!("OPC.V{index:05}")
}

/// Runs `xtask opcua-bench` (the builds in `bin`) and judges what it measured.
pub(crate) fn judge(
    bin: &Path,
    out_dir: &Path,
    plan: OpcUaPlan,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let path = |name: &str| -> anyhow::Result<String> {
        Ok(bin.join(name).to_str().context("a UTF-8 path")?.to_owned())
    };
    let report = measuring_side(
        &bin.join("xtask"),
        "opcua-bench",
        &[
            &path("tserver")?,
            &path("opcua-server-under-test")?,
            out_dir.to_str().context("a UTF-8 path")?,
            &plan.variables.to_string(),
            &plan.rate.to_string(),
            &plan.seconds.to_string(),
        ],
    )?;
    let number = |pointer: &str| {
        report
            .pointer(pointer)
            .and_then(Value::as_f64)
            .unwrap_or(f64::NAN)
    };
    let (ours, bare) = (
        number("/tserver/changesPerSecond"),
        number("/bare/changesPerSecond"),
    );
    let (our_cpu, bare_cpu) = (number("/tserver/cpuUsPerChange"), number("/bare/cpuUsPerChange"));
    let (our_p50, our_p99) = (number("/readTags/p50Us"), number("/readTags/p99Us"));
    let (bare_p50, bare_p99) = (number("/bare/latency/p50Us"), number("/bare/latency/p99Us"));
    let shape = format!("{} items at {} changes/s", plan.variables, plan.rate);
    eprintln!(
        "{:<28} {ours:>9.0} changes/s (bare async-opcua {bare:.0})  CPU {our_cpu:.2} us/change (bare {bare_cpu:.2})  coalesced {}",
        format!("tserver OPC UA x{}", plan.variables),
        report["tserver"]["coalesced"],
    );
    eprintln!(
        "{:<28} p50 {:>8.1} ms  p99 {:>8.1} ms  (bare callback p50 {:.1} ms, p99 {:.1} ms)",
        "tserver OPC UA to ReadTags",
        our_p50 / 1e3,
        our_p99 / 1e3,
        bare_p50 / 1e3,
        bare_p99 / 1e3,
    );
    let clean = report["tserver"]["errors"]
        .as_object()
        .is_some_and(serde_json::Map::is_empty);
    verdicts.judge(
        format!("OPC UA ingestion, {shape}"),
        format!(
            "{ours:.0} vs bare async-opcua {bare:.0} changes/s = {:.2}x",
            ours / bare
        ),
        verdicts::OPCUA_INGEST,
        ours / bare,
        clean,
    );
    verdicts.judge(
        format!("tserver CPU per OPC UA change, {shape}"),
        format!(
            "{our_cpu:.2} us vs bare async-opcua {bare_cpu:.2} us = {:.2}x",
            our_cpu / bare_cpu
        ),
        verdicts::OPCUA_CPU,
        our_cpu / bare_cpu,
        clean,
    );
    verdicts.judge(
        format!("OPC UA publish to ReadTags, {shape}, p99"),
        format!(
            "{:.1} ms (p50 {:.1}) vs bare callback {:.1} ms (p50 {:.1}), {} ms publishing",
            our_p99 / 1e3,
            our_p50 / 1e3,
            bare_p99 / 1e3,
            bare_p50 / 1e3,
            INTERVAL_MS
        ),
        verdicts::OPCUA_FRESHNESS,
        our_p99 - bare_p99,
        report["readTags"]["samples"].as_u64().unwrap_or(0) > 0,
    );
    results.insert("OPC UA ingestion", report);
    Ok(())
}

/// `xtask opcua-bench TSERVER SERVER OUT_DIR VARIABLES RATE SECONDS`: starts the OPC UA server
/// (program SERVER) with VARIABLES load variables, writes a solution binding a tag to each
/// (with TSERVER), measures the bare client and then tserver, and prints a JSON report.
pub(crate) fn measure(args: &[String]) -> anyhow::Result<()> {
    let [tserver, program, out_dir, variables, rate, seconds] = args else {
        bail!("usage: xtask opcua-bench TSERVER SERVER OUT_DIR VARIABLES RATE SECONDS");
    };
    let plan = OpcUaPlan {
        variables: variables.parse()?,
        rate: rate.parse()?,
        seconds: seconds.parse()?,
    };
    let mut server = OpcUaServer::start(OpcUaServerOptions {
        load_variables: plan.variables,
        ..OpcUaServerOptions::new(program)
    });
    let solution = solution(Path::new(tserver), Path::new(out_dir), &server, plan.variables)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let report = runtime.block_on(async {
        eprintln!("opcua-bench: the bare client");
        let bare = bare_run(&mut server, Path::new(out_dir), plan).await?;
        eprintln!("opcua-bench: tserver's source");
        let (ours, plant, shutdown) = tserver_run(&mut server, &solution, plan).await?;
        eprintln!("opcua-bench: ReadTags");
        let read_tags = read_tags_run(&mut server, &plant, plan).await?;
        shutdown.cancel();
        anyhow::Ok(json!({
            "variables": plan.variables,
            "rate": plan.rate,
            "seconds": plan.seconds,
            "intervalMs": INTERVAL_MS,
            "bare": bare,
            "tserver": ours,
            "readTags": read_tags,
        }))
    })?;
    println!("{report}");
    Ok(())
}

/// The bench solution: the demo's users with a plant of `variables` tags, each on one load
/// variable of `server`.
fn solution(
    tserver: &Path,
    out_dir: &Path,
    server: &OpcUaServer,
    variables: usize,
) -> anyhow::Result<PathBuf> {
    let solution = out_dir.join("opcua.db");
    for stale in ["opcua.db", "opcua.db.key", "opcua.db-wal", "opcua.db-shm"] {
        let _ = std::fs::remove_file(out_dir.join(stale));
    }
    let _ = std::fs::remove_dir_all(out_dir.join("opcua.db.opcua-pki"));
    let path = solution.to_str().context("a UTF-8 solution path")?;
    run_quietly(tserver, &["init", path, "--demo"])?;
    let mut text = format!(
        "[[sources]]\nname = \"plc\"\nurl = \"{}\"\nsampling_interval = {INTERVAL_MS}\npublishing_interval = {INTERVAL_MS}\n",
        server.url()
    );
    for index in 0..variables {
        text.push_str(&format!(
            "\n[[tags]]\nname = \"{}\"\npath = \"OPC/V{index:05}\"\ntype = \"number\"\nhistory = false\nsource = {{ server = \"plc\", node = \"{}\" }}\n",
            tag_name(index),
            server.node(&load_variable(index))
        ));
    }
    let file = out_dir.join("opcua-plant.toml");
    std::fs::write(&file, text)?;
    run_quietly(
        tserver,
        &["plant", path, "import", file.to_str().context("a UTF-8 path")?],
    )?;
    Ok(solution)
}

/// The indices of the timed variables.
fn probes(variables: usize) -> Vec<usize> {
    let step = (variables / PROBES).max(1);
    (0..PROBES.min(variables)).map(|probe| probe * step).collect()
}

/// Nanoseconds from the time a load value carries (microseconds since the Unix epoch) to now;
/// `None` for a value that is no such time (a variable's first or final value).
fn age_nanos(stamp_us: f64) -> Option<u64> {
    if stamp_us < 1e12 {
        return None;
    }
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).ok()?;
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a time in microseconds the server wrote"
    )]
    let stamp_nanos = (stamp_us * 1e3) as u128;
    u64::try_from(now.as_nanos().saturating_sub(stamp_nanos)).ok()
}

/// Counts of a client at the start or end of a measured window.
#[derive(Debug, Clone, Copy)]
struct Mark {
    applied: u64,
    coalesced: u64,
    cpu: f64,
    at: Instant,
}

/// Runs a load of `plan.rate` changes a second that outlasts the measured window by
/// [`SETTLE`] at each end; returns the marks at the window's ends, once the load's final values
/// had time to arrive.
async fn load_window(
    server: &mut OpcUaServer,
    plan: OpcUaPlan,
    mark: impl Fn() -> Mark,
    on_window: impl Fn(bool),
) -> (Mark, Mark) {
    server.load(plan.rate, plan.seconds + 2.0 * SETTLE.as_secs_f64());
    tokio::time::sleep(SETTLE).await;
    on_window(true);
    let start = mark();
    tokio::time::sleep(Duration::from_secs_f64(plan.seconds)).await;
    let end = mark();
    on_window(false);
    // The rest of the load, then its final values.
    tokio::time::sleep(SETTLE + Duration::from_secs(1)).await;
    (start, end)
}

/// The per-change figures of a window.
fn window_report(start: Mark, end: Mark) -> Value {
    let applied = end.applied - start.applied;
    let seconds = end.at.duration_since(start.at).as_secs_f64();
    json!({
        "applied": applied,
        "coalesced": end.coalesced - start.coalesced,
        "changesPerSecond": applied as f64 / seconds,
        "cpuUsPerChange": (end.cpu - start.cpu) * 1e6 / applied.max(1) as f64,
    })
}

/// A bare async-opcua client (no security, anonymous) subscribed to every load variable as
/// tserver's source subscribes: counts the notifications and times the probes' values.
async fn bare_run(server: &mut OpcUaServer, out_dir: &Path, plan: OpcUaPlan) -> anyhow::Result<Value> {
    let mut client = ClientBuilder::new()
        .application_name("tserver bench bare client")
        .application_uri("urn:tserver:bench:bare")
        .product_uri("urn:tserver")
        .pki_dir(out_dir.join("opcua-bare-pki"))
        .create_sample_keypair(true)
        .trust_server_certs(true)
        .session_retry_limit(3)
        .client()
        .map_err(|errors| anyhow::anyhow!("the bare client: {}", errors.join("; ")))?;
    let url = server.url();
    let (session, event_loop) = client
        .connect_to_matching_endpoint(
            (url.as_str(), "None", MessageSecurityMode::None),
            IdentityToken::new_anonymous(),
        )
        .await
        .context("the bare client connects")?;
    let event_loop = event_loop.spawn();
    if !session.wait_for_connection().await {
        bail!("the bare client's session did not come up");
    }
    let counted = Arc::new(AtomicU64::new(0));
    let timing = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(Mutex::new(Latencies::default()));
    let mut probe = vec![false; plan.variables + 1];
    for index in probes(plan.variables) {
        probe[index + 1] = true;
    }
    let callback = {
        let (counted, timing, samples) = (Arc::clone(&counted), Arc::clone(&timing), Arc::clone(&samples));
        DataChangeCallback::new(move |value, item| {
            counted.fetch_add(1, Ordering::Relaxed);
            let handle = item.client_handle() as usize;
            if timing.load(Ordering::Relaxed)
                && probe.get(handle).copied().unwrap_or(false)
                && let Some(Variant::Double(stamp)) = value.value
                && let Some(age) = age_nanos(stamp)
            {
                samples.lock().unwrap_or_else(PoisonError::into_inner).push(age);
            }
        })
    };
    subscribe(&session, server.namespace_index(), plan.variables, callback).await?;
    let deadline = Instant::now() + FIRST_VALUES_WITHIN;
    while counted.load(Ordering::Relaxed) < plan.variables as u64 {
        if Instant::now() > deadline {
            bail!(
                "the bare client read {} of {} first values",
                counted.load(Ordering::Relaxed),
                plan.variables
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mark = || Mark {
        applied: counted.load(Ordering::Relaxed),
        coalesced: 0,
        cpu: own_cpu_seconds().unwrap_or(0.0),
        at: Instant::now(),
    };
    let (start, end) = load_window(server, plan, mark, |on| timing.store(on, Ordering::Relaxed)).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), session.disconnect()).await;
    event_loop.abort();
    let mut report = window_report(start, end);
    report["latency"] = samples.lock().unwrap_or_else(PoisonError::into_inner).to_json();
    Ok(report)
}

/// Subscribes `session` to the first `variables` load variables with the parameters of
/// tserver's source (client handle = index + 1).
async fn subscribe(
    session: &Arc<Session>,
    namespace: u16,
    variables: usize,
    callback: DataChangeCallback,
) -> anyhow::Result<()> {
    let subscription = session
        .create_subscription(
            Duration::from_millis(INTERVAL_MS),
            60,
            10,
            NOTIFICATIONS_PER_PUBLISH,
            0,
            true,
            callback,
        )
        .await
        .context("the bare client subscribes")?;
    for first in (0..variables).step_by(ITEMS_PER_CALL) {
        let requests: Vec<MonitoredItemCreateRequest> = (first..(first + ITEMS_PER_CALL).min(variables))
            .map(|index| MonitoredItemCreateRequest {
                item_to_monitor: ReadValueId {
                    node_id: NodeId::new(namespace, load_variable(index)),
                    attribute_id: AttributeId::Value as u32,
                    ..Default::default()
                },
                monitoring_mode: MonitoringMode::Reporting,
                requested_parameters: MonitoringParameters {
                    client_handle: u32::try_from(index + 1).unwrap_or(u32::MAX),
                    sampling_interval: INTERVAL_MS as f64,
                    queue_size: 1,
                    discard_oldest: true,
                    filter: ExtensionObject::null(),
                },
            })
            .collect();
        let created = session
            .create_monitored_items(subscription, TimestampsToReturn::Both, requests)
            .await
            .context("the bare client monitors the load variables")?;
        if let Some(refused) = created.iter().find(|item| !item.result.status_code.is_good()) {
            bail!(
                "the server refused a monitored item: {}",
                refused.result.status_code
            );
        }
    }
    Ok(())
}

/// Opens the solution in process and starts its source; once every first value is read,
/// measures a load window. Keeps the plant running for [`read_tags_run`].
async fn tserver_run(
    server: &mut OpcUaServer,
    solution: &Path,
    plan: OpcUaPlan,
) -> anyhow::Result<(Value, tserver::Runtime, CancellationToken)> {
    let (plant, shutdown) = source_reading(solution, plan.variables as u64).await?;
    let mark = || {
        let status = plant.source_statuses().into_iter().next().unwrap_or_default();
        Mark {
            applied: status.messages,
            coalesced: status.coalesced,
            cpu: own_cpu_seconds().unwrap_or(0.0),
            at: Instant::now(),
        }
    };
    let (start, end) = load_window(server, plan, mark, |_| {}).await;
    let mut report = window_report(start, end);
    let status = plant.source_statuses().into_iter().next().unwrap_or_default();
    report["errors"] = json!(status.errors);
    Ok((report, plant, shutdown))
}

/// A panel polling ReadTags over the wire for the probes' tags during a load window records,
/// for every value it sees first, how old it is.
async fn read_tags_run(
    server: &mut OpcUaServer,
    plant: &tserver::Runtime,
    plan: OpcUaPlan,
) -> anyhow::Result<Value> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let stop_server = CancellationToken::new();
    let service = tserver::Server::new(plant.clone(), tserver::ServerConfig::default())?;
    let serving = tokio::spawn(service.run(listener, stop_server.clone()));
    let panel = Client::connect(addr, ClientOptions::default()).await?;
    panel.login("guest", "").await?;
    let names: Vec<String> = probes(plan.variables).into_iter().map(tag_name).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let timing = CancellationToken::new();
    let done = CancellationToken::new();
    let reader = async {
        let mut samples = Latencies::default();
        let mut last = vec![0.0_f64; names.len()];
        timing.cancelled().await;
        // The values before the window are only remembered: their age says when this started.
        let mut first = true;
        while !done.is_cancelled() {
            let readings = panel.read_tags(&names).await?;
            for (slot, reading) in readings.iter().enumerate() {
                let Some(TagValue::Number(stamp)) = reading.value else {
                    continue;
                };
                if stamp == last[slot] {
                    continue;
                }
                last[slot] = stamp;
                if !first && let Some(age) = age_nanos(stamp) {
                    samples.push(age);
                }
            }
            first = false;
        }
        anyhow::Ok(samples)
    };
    let window = async {
        let at = |on: bool| if on { timing.cancel() } else { done.cancel() };
        let mark = || Mark {
            applied: 0,
            coalesced: 0,
            cpu: 0.0,
            at: Instant::now(),
        };
        load_window(server, plan, mark, at).await
    };
    let (samples, _) = tokio::join!(reader, window);
    stop_server.cancel();
    let _ = serving.await;
    Ok(samples?.to_json())
}
