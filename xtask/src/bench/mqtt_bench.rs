//! The MQTT scenarios of `cargo xtask bench`: ingestion from one broker beside a bare rumqttc
//! subscriber reading the same retained values, the server's CPU per update and memory for the
//! plant's tags, and publish-to-ReadTags freshness under a steady stream.
//!
//! The measuring side runs in process (`xtask mqtt-bench`, started by `bench` from the build
//! of the same profile), so the source's counters can be polled every millisecond and both
//! readers run on the same runtime; the broker is a real Mosquitto started by the harness.
//! Memory is measured in a process of its own (`xtask mqtt-memory`): in the measuring side,
//! what the readers before had freed would be reused and hide part of the cost.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::Packet;
use rumqttc::v5::{AsyncClient, Event, MqttOptions};
use serde_json::{Value, json};
use service_client::{Client, ClientOptions, TagValue};
use tokio_util::sync::CancellationToken;
use tserver_tests::mosquitto::{Mosquitto, Publisher};

use super::latencies::Latencies;
use super::report::Results;
use super::verdicts::{self, Verdicts};
use crate::processes::{Scheduling, machine_steal_seconds, measuring_side, rss_bytes, run_quietly};

/// The topic root of the bench source.
const ROOT: &str = "M";

/// Tags the steady stream updates, and how many of them each ReadTags asks for.
const STREAM_TAGS: usize = 1_000;
const PROBE_TAGS: usize = 20;

/// The packet limit tserver's sources tell the broker, used by the bare subscriber too.
const MAX_PACKET_BYTES: u32 = 1024 * 1024 + 64 * 1024;

/// The shape of the MQTT runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MqttPlan {
    /// Tags bound to the broker, each with a retained value.
    pub(crate) tags: usize,
    /// Updates per second of the steady stream, and for how long.
    pub(crate) rate: u32,
    pub(crate) seconds: f64,
    /// Ingestion rounds of each reader (the best counts).
    pub(crate) rounds: usize,
}

fn tag_name(index: usize) -> String {
    format!("M.T{index:06}")
}

fn topic(index: usize) -> String {
    format!("{ROOT}/Bench/T{index:06}")
}

/// Starts a broker, prepares a solution of `plan.tags` MQTT-bound tags, and runs
/// `xtask mqtt-bench` (the build in `bin`) against them; returns its JSON report.
pub(crate) fn run(bin: &Path, out_dir: &Path, plan: MqttPlan) -> anyhow::Result<Value> {
    let broker = Mosquitto::start();
    let solution = out_dir.join("mqtt.db");
    for stale in ["mqtt.db", "mqtt.db.key", "mqtt.db-wal", "mqtt.db-shm"] {
        let _ = std::fs::remove_file(out_dir.join(stale));
    }
    let tserver = bin.join("tserver");
    let path = solution.to_str().context("a UTF-8 solution path")?;
    // The demo's guest user reads the tags; the plant is replaced by the bench's.
    run_quietly(&tserver, &["init", path, "--demo"])?;
    let mut text = format!(
        "[[sources]]\nname = \"bench\"\nurl = \"{}\"\nroot = \"{ROOT}\"\n",
        broker.url()
    );
    for index in 0..plan.tags {
        text.push_str(&format!(
            "\n[[tags]]\nname = \"{}\"\npath = \"Bench/T{index:06}\"\ntype = \"number\"\nhistory = false\nsource = {{ broker = \"bench\" }}\n",
            tag_name(index)
        ));
    }
    let file = out_dir.join("mqtt-plant.toml");
    std::fs::write(&file, text)?;
    run_quietly(
        &tserver,
        &["plant", path, "import", file.to_str().context("a UTF-8 path")?],
    )?;
    measuring_side(
        &bin.join("xtask"),
        "mqtt-bench",
        &[
            path,
            &broker.port.to_string(),
            &plan.tags.to_string(),
            &plan.rate.to_string(),
            &plan.seconds.to_string(),
            &plan.rounds.to_string(),
            &broker.pid().context("the broker runs")?.to_string(),
        ],
    )
}

/// `xtask mqtt-bench SOLUTION PORT TAGS RATE SECONDS ROUNDS BROKER_PID`: the measuring side;
/// prints a JSON report.
pub(crate) fn measure(args: &[String]) -> anyhow::Result<()> {
    let [solution, port, tags, rate, seconds, rounds, broker] = args else {
        bail!("usage: xtask mqtt-bench SOLUTION PORT TAGS RATE SECONDS ROUNDS BROKER_PID");
    };
    let plan = MqttPlan {
        tags: tags.parse()?,
        rate: rate.parse()?,
        seconds: seconds.parse()?,
        rounds: rounds.parse()?,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let report = runtime.block_on(measure_all(PathBuf::from(solution), port.parse()?, plan, broker))?;
    println!("{report}");
    Ok(())
}

async fn measure_all(solution: PathBuf, port: u16, plan: MqttPlan, broker: &str) -> anyhow::Result<Value> {
    let mut publisher = Publisher::connect(port).await;
    eprintln!("mqtt-bench: publishing {} retained values", plan.tags);
    for index in 0..plan.tags {
        publisher.publish(&topic(index), index.to_string(), true).await;
    }
    // A round trip through the broker: every retained value is stored once it returns.
    publisher.subscribe(&format!("{ROOT}-ready")).await;

    eprintln!("mqtt-bench: memory, in a process of its own");
    let memory = measuring_side(
        &std::env::current_exe()?,
        "mqtt-memory",
        &[
            solution.to_str().context("a UTF-8 solution path")?,
            &plan.tags.to_string(),
        ],
    )?;
    let mut bare: Vec<IngestRun> = Vec::new();
    let mut ours = Vec::new();
    let mut kept = None;
    for round in 0..plan.rounds {
        eprintln!("mqtt-bench: ingestion round {}", round + 1);
        bare.push(bare_ingest(port, plan.tags, round).await?);
        let last = round + 1 == plan.rounds;
        let (run, runtime) = tserver_ingest(&solution, plan.tags, last).await?;
        ours.push(run);
        kept = runtime;
    }
    let best_bare = bare.iter().map(|run| run.seconds).fold(f64::INFINITY, f64::min);
    let best_ours = ours.iter().map(|run| run.seconds).fold(f64::INFINITY, f64::min);
    let (cheapest_bare, cheapest_ours) = (IngestRun::cheapest(&bare)?, IngestRun::cheapest(&ours)?);
    let (runtime, shutdown) = kept.context("the last round's server")?;
    eprintln!("mqtt-bench: a steady stream of {} updates/s", plan.rate);
    let freshness = freshness(&runtime, &publisher, plan, broker).await?;
    shutdown.cancel();
    Ok(json!({
        "tags": plan.tags,
        "bareSeconds": bare.iter().map(|run| run.seconds).collect::<Vec<_>>(),
        "tserverSeconds": ours.iter().map(|run| run.seconds).collect::<Vec<_>>(),
        "bareUpdatesPerSecond": plan.tags as f64 / best_bare,
        "tserverUpdatesPerSecond": plan.tags as f64 / best_ours,
        "cpuUsPerUpdate": cheapest_ours.cpu_us_per_update(plan.tags),
        "bareCpuUsPerUpdate": cheapest_bare.cpu_us_per_update(plan.tags),
        "runsPerUpdate": cheapest_ours.runs_per_update(plan.tags),
        "bareRunsPerUpdate": cheapest_bare.runs_per_update(plan.tags),
        "plantBytes": memory["plantBytes"],
        "sourceBytes": memory["sourceBytes"],
        "freshness": freshness,
    }))
}

/// `xtask mqtt-memory SOLUTION TAGS`: opens the solution, whose broker holds the retained
/// values already, in this fresh process and ingests them; prints what the plant and then
/// the source and values added to its resident memory, as JSON.
pub(crate) fn measure_memory(args: &[String]) -> anyhow::Result<()> {
    let [solution, tags] = args else {
        bail!("usage: xtask mqtt-memory SOLUTION TAGS");
    };
    let tags = tags
        .parse()
        .with_context(|| format!("{tags:?} is not a count of tags"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let (run, _) = runtime.block_on(tserver_ingest(Path::new(solution), tags, false))?;
    println!(
        "{}",
        json!({"plantBytes": run.plant_bytes, "sourceBytes": run.source_bytes})
    );
    Ok(())
}

/// A bare rumqttc subscriber (MQTT 5, the sources' options) reading every retained value:
/// seconds from its connection to the last one, and the process's CPU meanwhile.
async fn bare_ingest(port: u16, tags: usize, round: usize) -> anyhow::Result<IngestRun> {
    let mut options = MqttOptions::new(format!("bench-bare-{round}"), "127.0.0.1", port);
    options.set_keep_alive(Duration::from_secs(30));
    options.set_max_packet_size(Some(MAX_PACKET_BYTES));
    let (client, mut events) = AsyncClient::new(options, 1024);
    let mut started = None;
    let mut scheduled = Scheduling::default();
    let mut received = 0;
    while received < tags {
        match events.poll().await.context("the bare subscriber's connection")? {
            Event::Incoming(Packet::ConnAck(_)) => {
                started = Some(Instant::now());
                scheduled = own_scheduling()?;
                client.try_subscribe(format!("{ROOT}/#"), QoS::AtMostOnce)?;
            }
            Event::Incoming(Packet::Publish(_)) => received += 1,
            _ => {}
        }
    }
    let seconds = started.map_or(0.0, |started| started.elapsed().as_secs_f64());
    let scheduling = own_scheduling()?.since(&scheduled);
    let _ = client.try_disconnect();
    // Let the event loop send the disconnect before it is dropped.
    let _ = tokio::time::timeout(Duration::from_millis(100), events.poll()).await;
    Ok(IngestRun {
        seconds,
        scheduling,
        plant_bytes: 0,
        source_bytes: 0,
    })
}

fn own_scheduling() -> anyhow::Result<Scheduling> {
    Scheduling::of_process("self").context("this process's /proc/self/task/*/schedstat")
}

/// One ingestion round (the bare subscriber's has no memory figures).
struct IngestRun {
    seconds: f64,
    /// What the process's threads ran, waited and were woken from its connection to the last
    /// value.
    scheduling: Scheduling,
    /// Resident memory the opened plant added, and what the sources and values added after.
    plant_bytes: u64,
    source_bytes: u64,
}

impl IngestRun {
    /// The round that took the least CPU (the others shared the machine with more).
    fn cheapest(runs: &[Self]) -> anyhow::Result<&Self> {
        runs.iter()
            .min_by_key(|run| run.scheduling.ran_nanos)
            .context("no ingestion round ran")
    }

    fn cpu_us_per_update(&self, updates: usize) -> f64 {
        self.scheduling.ran_nanos as f64 / 1e3 / updates as f64
    }

    /// Times a thread of the process was put on a CPU, per update: a reader woken for each
    /// message pays the machine's wake-up cost for each.
    fn runs_per_update(&self, updates: usize) -> f64 {
        self.scheduling.runs as f64 / updates as f64
    }
}

/// Opens the solution in process, starts its source and waits until every retained value is
/// applied; keeps the runtime running when `keep`.
async fn tserver_ingest(
    solution: &Path,
    tags: usize,
    keep: bool,
) -> anyhow::Result<(IngestRun, Option<(tserver::Runtime, CancellationToken)>)> {
    let pid = std::process::id();
    let before_open = rss_bytes(pid).unwrap_or(0);
    let runtime = tserver::Runtime::open(solution)?;
    let opened = rss_bytes(pid).unwrap_or(0);
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await?;
    // Watched through the source's own counters, which take no lock its task would wait on.
    let counts = runtime
        .source_counts()
        .into_iter()
        .next()
        .context("the bench source")?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut started = None;
    let mut scheduled = Scheduling::default();
    loop {
        if started.is_none() && counts.connected() {
            started = Some(Instant::now());
            scheduled = own_scheduling()?;
        }
        if counts.messages() >= tags as u64 {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "tserver applied {} of {tags} values in 120 s: {:?}",
                counts.messages(),
                runtime.source_statuses()
            );
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let seconds = started.map_or(0.0, |started| started.elapsed().as_secs_f64());
    let run = IngestRun {
        seconds,
        scheduling: own_scheduling()?.since(&scheduled),
        plant_bytes: opened.saturating_sub(before_open),
        source_bytes: rss_bytes(pid).unwrap_or(0).saturating_sub(opened),
    };
    if keep {
        return Ok((run, Some((runtime, shutdown))));
    }
    shutdown.cancel();
    Ok((run, None))
}

/// A steady stream of `plan.rate` updates a second over [`STREAM_TAGS`] tags, each value a
/// sequence number; a panel polling ReadTags over the wire for [`PROBE_TAGS`] of them records,
/// for every value it sees first, how long ago it was published.
async fn freshness(
    runtime: &tserver::Runtime,
    publisher: &Publisher,
    plan: MqttPlan,
    broker: &str,
) -> anyhow::Result<Value> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let stop_server = CancellationToken::new();
    let server = tserver::Server::new(runtime.clone(), tserver::ServerConfig::default())?;
    let serving = tokio::spawn(server.run(listener, stop_server.clone()));
    let panel = Client::connect(addr, ClientOptions::default()).await?;
    panel.login("guest", "").await?;

    let stream_tags = STREAM_TAGS.min(plan.tags);
    // Spread evenly over the stream's cycle, so the samples are spread evenly in time: twenty
    // neighbouring tags are all published within two milliseconds of each other, and one stall
    // of the machine then delays twenty samples at once (2% of them: it alone set the p99).
    let probe_step = (stream_tags / PROBE_TAGS).max(1);
    let probes: Vec<String> = (0..PROBE_TAGS.min(stream_tags))
        .map(|probe| tag_name(probe * probe_step))
        .collect();
    let probe_names: Vec<&str> = probes.iter().map(String::as_str).collect();
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a bounded bench count"
    )]
    let total = (f64::from(plan.rate) * plan.seconds) as usize;
    // Stream values start past the retained ones, so a retained value is never taken for one.
    let offset = plan.tags;
    let base = Instant::now();
    let sent: Arc<Vec<AtomicU64>> = Arc::new((0..total).map(|_| AtomicU64::new(0)).collect());
    let applied_before = runtime.source_statuses()[0].messages;
    let done = CancellationToken::new();

    let reader = {
        let (sent, done) = (Arc::clone(&sent), done.clone());
        async move {
            let mut samples = Latencies::default();
            let mut last = vec![0_usize; probe_names.len()];
            while !done.is_cancelled() {
                let readings = panel.read_tags(&probe_names).await?;
                let now = base.elapsed().as_nanos();
                for (slot, reading) in readings.iter().enumerate() {
                    let Some(TagValue::Number(value)) = reading.value else {
                        continue;
                    };
                    #[expect(
                        clippy::cast_possible_truncation,
                        clippy::cast_sign_loss,
                        reason = "sequence numbers the bench wrote"
                    )]
                    let sequence = value as usize;
                    if sequence < offset || sequence <= last[slot] {
                        continue;
                    }
                    last[slot] = sequence;
                    let published = sent[sequence - offset].load(Ordering::Relaxed);
                    if published > 0 {
                        samples.push(u64::try_from(now).unwrap_or(u64::MAX).saturating_sub(published));
                    }
                }
            }
            anyhow::Ok(samples)
        }
    };
    let writer = async {
        let per_tick = (plan.rate / 1000).max(1) as usize;
        let mut tick = tokio::time::interval(Duration::from_millis(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut next = 0;
        while next < total {
            tick.tick().await;
            for _ in 0..per_tick.min(total - next) {
                let stamp = u64::try_from(base.elapsed().as_nanos())
                    .unwrap_or(u64::MAX)
                    .max(1);
                sent[next].store(stamp, Ordering::Relaxed);
                publisher
                    .publish(&topic(next % stream_tags), (offset + next).to_string(), false)
                    .await;
                next += 1;
            }
        }
        let published_in = base.elapsed().as_secs_f64();
        // Let the last values arrive before the panel stops looking.
        tokio::time::sleep(Duration::from_millis(300)).await;
        done.cancel();
        published_in
    };
    let (ours_before, broker_before, steal_before) = (
        own_scheduling()?,
        Scheduling::of_process(broker).context("the broker's schedstat")?,
        machine_steal_seconds().context("/proc/stat")?,
    );
    let (samples, published_in) = tokio::join!(reader, writer);
    let ours = own_scheduling()?.since(&ours_before);
    let broker = Scheduling::of_process(broker)
        .context("the broker's schedstat")?
        .since(&broker_before);
    let stolen = machine_steal_seconds().context("/proc/stat")? - steal_before;
    let mut report = samples?.to_json();
    // Time ready to run but without a CPU, which a value on its way waits through: the
    // machine's share of the latency.
    report["waitedMs"] = (ours.waited_nanos as f64 / 1e6).into();
    report["brokerWaitedMs"] = (broker.waited_nanos as f64 / 1e6).into();
    report["cpuSeconds"] = ours.cpu_seconds().into();
    report["wakeUps"] = ours.runs.into();
    report["brokerCpuSeconds"] = broker.cpu_seconds().into();
    report["stolenMs"] = (stolen * 1e3).into();
    let applied = runtime.source_statuses()[0].messages - applied_before;
    stop_server.cancel();
    let _ = serving.await;
    report["updates"] = total.into();
    report["applied"] = applied.into();
    report["publishedPerSecond"] = (total as f64 / published_in).into();
    Ok(report)
}

/// MQTT: one broker's retained values read by tserver's source beside a bare subscriber, and a
/// steady stream read back through ReadTags; judges ingestion, freshness, CPU and memory.
pub(crate) fn judge(
    bin: &Path,
    out_dir: &Path,
    plan: MqttPlan,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let mqtt = run(bin, out_dir, plan)?;
    let (ours, bare) = (
        mqtt["tserverUpdatesPerSecond"].as_f64().unwrap_or(0.0),
        mqtt["bareUpdatesPerSecond"].as_f64().unwrap_or(f64::INFINITY),
    );
    let fresh = &mqtt["freshness"];
    eprintln!(
        "{:<28} {ours:>9.0} updates/s (bare rumqttc {bare:.0})  CPU {:.2} us/update  plant {:.0} B/tag, source {:.0} B/tag",
        format!("tserver MQTT ingest x{}", plan.tags),
        mqtt["cpuUsPerUpdate"].as_f64().unwrap_or(0.0),
        mqtt["plantBytes"].as_f64().unwrap_or(0.0) / plan.tags as f64,
        mqtt["sourceBytes"].as_f64().unwrap_or(0.0) / plan.tags as f64,
    );
    eprintln!(
        "{:<28} {:>9.0} updates/s published, {} applied  p50 {:>8.1} us  p99 {:>8.1} us  max {:.1} us",
        "tserver MQTT to ReadTags",
        fresh["publishedPerSecond"].as_f64().unwrap_or(0.0),
        fresh["applied"],
        fresh["p50Us"].as_f64().unwrap_or(0.0),
        fresh["p99Us"].as_f64().unwrap_or(0.0),
        fresh["maxUs"].as_f64().unwrap_or(0.0),
    );
    eprintln!(
        "{:<28} meanwhile: this process {:.2} CPU-s, waited {:.0} ms for a CPU; the broker {:.2} CPU-s, waited {:.0} ms; stolen by the host {:.0} ms",
        "",
        fresh["cpuSeconds"].as_f64().unwrap_or(0.0),
        fresh["waitedMs"].as_f64().unwrap_or(0.0),
        fresh["brokerCpuSeconds"].as_f64().unwrap_or(0.0),
        fresh["brokerWaitedMs"].as_f64().unwrap_or(0.0),
        fresh["stolenMs"].as_f64().unwrap_or(0.0),
    );
    let ratio = ours / bare;
    verdicts.judge(
        format!("MQTT ingestion, {} retained values, one broker", plan.tags),
        format!("{ours:.0} vs bare rumqttc {bare:.0} updates/s = {ratio:.2}x"),
        verdicts::MQTT_INGEST,
        ratio,
        true,
    );
    verdicts.judge(
        format!("MQTT publish to ReadTags at {} updates/s, p99", plan.rate),
        format!(
            "{:.0} us (p50 {:.0} us), {} of {} applied; the host stole {:.0} ms meanwhile",
            fresh["p99Us"].as_f64().unwrap_or(0.0),
            fresh["p50Us"].as_f64().unwrap_or(0.0),
            fresh["applied"],
            fresh["updates"],
            fresh["stolenMs"].as_f64().unwrap_or(0.0),
        ),
        verdicts::MQTT_FRESHNESS,
        fresh["p99Us"].as_f64().unwrap_or(f64::INFINITY),
        fresh["applied"].as_u64() == fresh["updates"].as_u64(),
    );
    let cpu_per_update = mqtt["cpuUsPerUpdate"].as_f64().unwrap_or(f64::INFINITY);
    let bare_cpu = mqtt["bareCpuUsPerUpdate"].as_f64().unwrap_or(0.0);
    verdicts.judge(
        "tserver CPU per MQTT update (ingestion)".to_owned(),
        format!(
            "{cpu_per_update:.2} us vs bare rumqttc {bare_cpu:.2} us = {:.2}x; {:.3} vs {:.3} wake-ups an update",
            cpu_per_update / bare_cpu,
            mqtt["runsPerUpdate"].as_f64().unwrap_or(0.0),
            mqtt["bareRunsPerUpdate"].as_f64().unwrap_or(0.0),
        ),
        verdicts::MQTT_CPU,
        cpu_per_update,
        true,
    );
    let bytes_per_tag = (mqtt["plantBytes"].as_f64().unwrap_or(f64::INFINITY)
        + mqtt["sourceBytes"].as_f64().unwrap_or(f64::INFINITY))
        / plan.tags as f64;
    verdicts.judge(
        format!("memory for {} MQTT tags (plant + source + values)", plan.tags),
        format!(
            "{:.0} B/tag ({:.0} MB in all)",
            bytes_per_tag,
            bytes_per_tag * plan.tags as f64 / 1e6
        ),
        verdicts::MQTT_MEMORY,
        bytes_per_tag,
        true,
    );
    results.insert("mqtt", mqtt);
    Ok(())
}
