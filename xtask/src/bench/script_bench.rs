//! The solution-script scenarios of `cargo xtask bench`: memory per loaded script,
//! trigger-to-start latency of `tag:` and `alarm:` scripts, and trivial script runs a second
//! under a stream of triggers faster than the scripts.
//!
//! The measuring side runs in process (`xtask script-bench`, started by `bench` from the build
//! of the same profile) with tserver's own runtime and script runner, so it writes the plant
//! as a field source does and sees each change the moment the plant announces it. A run's
//! start is the runner's "script run starts" debug event, taken by a tracing layer on the
//! run's thread; the run then writes the value that fired it into an echo tag, and the time
//! until that write shows in the plant is reported beside (it includes the write's audit).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use plant_model::{Quality, TagValue};
use serde_json::{Value, json};
use solution_scripts::Trigger;
use tokio_util::sync::CancellationToken;
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context as LayerContext, SubscriberExt};
use tserver::Runtime;

use super::latencies::Latencies;
use super::report::Results;
use super::verdicts::{self, Verdicts};
use crate::processes::{cpu_seconds, measuring_side, rss_bytes, run_quietly};

/// The shape of the script runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScriptPlan {
    /// Scripts loaded for the memory figure.
    pub(crate) loaded: usize,
    /// Trigger-to-start samples of each trigger kind.
    pub(crate) samples: usize,
    /// Trivial scripts sharing one tag trigger, and for how long that tag is written.
    pub(crate) trivial_scripts: usize,
    pub(crate) seconds: f64,
}

/// The bench plant: a tag and an alarmed tag to fire scripts, an echo tag for each, a tag
/// for the trivial scripts and one nothing writes. No history: the historian is not measured.
const PLANT: &str = r#"[plant]
name = "Script bench"

[[tags]]
name = "Bench.In"
path = "Bench/In"
type = "number"
history = false

[[tags]]
name = "Bench.TagEcho"
path = "Bench/TagEcho"
type = "number"
history = false

[[tags]]
name = "Bench.Level"
path = "Bench/Level"
type = "number"
history = false

[[tags]]
name = "Bench.AlarmEcho"
path = "Bench/AlarmEcho"
type = "number"
history = false

[[tags]]
name = "Bench.Storm"
path = "Bench/Storm"
type = "number"
history = false

[[tags]]
name = "Bench.Idle"
path = "Bench/Idle"
type = "number"
history = false

[[alarms]]
name = "Bench.Level.Hi"
tag = "Bench.Level"
condition = "Hi"
limit = 50.0
priority = 500
message = "Bench level high"
"#;

/// What a loaded script is like for the memory figure: the demo's TankNote, a dozen lines.
const TYPICAL_SCRIPT: &str = include_str!("../../../examples/scripts/tank_note.rhai");

/// How long one sample may take before the bench gives up on it.
const SAMPLE_PATIENCE: Duration = Duration::from_secs(5);

/// Prepares the bench solution and runs `xtask script-bench` (the build in `bin`) on it;
/// returns its JSON report.
pub(crate) fn run(bin: &Path, out_dir: &Path, plan: ScriptPlan) -> anyhow::Result<Value> {
    for stale in ["scripts.db", "scripts.db.key", "scripts.db-wal", "scripts.db-shm"] {
        let _ = std::fs::remove_file(out_dir.join(stale));
    }
    let solution = out_dir.join("scripts.db");
    let path = solution.to_str().context("a UTF-8 solution path")?;
    let tserver = bin.join("tserver");
    run_quietly(&tserver, &["init", path, "--demo"])?;
    let plant = out_dir.join("scripts-plant.toml");
    std::fs::write(&plant, PLANT)?;
    run_quietly(
        &tserver,
        &["plant", path, "import", plant.to_str().context("a UTF-8 path")?],
    )?;
    // The demo's own script would fire on nothing here; the bench loads only its own.
    run_quietly(&tserver, &["scripts", path, "remove", "TankNote"])?;
    measuring_side(
        &bin.join("xtask"),
        "script-bench",
        &[
            path,
            &plan.loaded.to_string(),
            &plan.samples.to_string(),
            &plan.trivial_scripts.to_string(),
            &plan.seconds.to_string(),
        ],
    )
}

/// `xtask script-bench SOLUTION LOADED SAMPLES TRIVIAL SECONDS`: the measuring side; prints
/// a JSON report.
pub(crate) fn measure(args: &[String]) -> anyhow::Result<()> {
    let [solution, loaded, samples, trivial_scripts, seconds] = args else {
        bail!("usage: xtask script-bench SOLUTION LOADED SAMPLES TRIVIAL SECONDS");
    };
    let plan = ScriptPlan {
        loaded: loaded.parse()?,
        samples: samples.parse()?,
        trivial_scripts: trivial_scripts.parse()?,
        seconds: seconds.parse()?,
    };
    let starts = RunStarts::default();
    let subscriber = tracing_subscriber::registry().with(
        starts
            .clone()
            .with_filter(Targets::new().with_target("plant::scripts", tracing::Level::DEBUG)),
    );
    tracing::subscriber::set_global_default(subscriber)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let report = runtime.block_on(measure_all(PathBuf::from(solution), plan, &starts))?;
    println!("{report}");
    Ok(())
}

/// The runs that started while recording, as the runner announces them: when, and whose.
#[derive(Debug, Clone, Default)]
struct RunStarts {
    recording: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<(Instant, String)>>>,
}

impl RunStarts {
    /// Forgets what was seen and records from now on.
    fn record(&self) {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).clear();
        self.recording.store(true, Ordering::Relaxed);
    }

    fn stop(&self) {
        self.recording.store(false, Ordering::Relaxed);
    }

    /// When `script`'s first run since [`record`](Self::record) started.
    fn first(&self, script: &str) -> Option<Instant> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.iter().find(|(_, name)| name == script).map(|(at, _)| *at)
    }
}

impl<S: tracing::Subscriber> Layer<S> for RunStarts {
    fn on_event(&self, event: &tracing::Event<'_>, _context: LayerContext<'_, S>) {
        if !self.recording.load(Ordering::Relaxed) {
            return;
        }
        let at = Instant::now();
        let mut fields = StartFields::default();
        event.record(&mut fields);
        if fields.message == "script run starts" {
            self.seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((at, fields.script));
        }
    }
}

/// The fields of a runner event.
#[derive(Debug, Default)]
struct StartFields {
    message: String,
    script: String,
}

impl Visit for StartFields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "script" => self.script = format!("{value:?}"),
            _ => {}
        }
    }
}

async fn measure_all(solution: PathBuf, plan: ScriptPlan, starts: &RunStarts) -> anyhow::Result<Value> {
    let runtime = Runtime::open(&solution)?;
    // Memory first, while the process has allocated little else.
    eprintln!("script-bench: loading {} scripts", plan.loaded);
    let bytes_per_script = loaded_memory(&runtime, plan.loaded).await?;

    eprintln!("script-bench: {} tag: and alarm: triggers", plan.samples);
    let store = runtime.store();
    store
        .add_script(
            "TagEcho",
            &trigger("tag:Bench.In")?,
            "write_tag(\"Bench.TagEcho\", event.value);",
        )
        .await?;
    store
        .add_script(
            "AlarmEcho",
            &trigger("alarm:Bench.Level.Hi")?,
            "write_tag(\"Bench.AlarmEcho\", event.value);",
        )
        .await?;
    for index in 0..plan.trivial_scripts {
        store
            .add_script(
                &format!("Trivial{index}"),
                &trigger("tag:Bench.Storm")?,
                "let seen = event.value;",
            )
            .await?;
    }
    let shutdown = CancellationToken::new();
    runtime.start_scripts(&shutdown).await;
    let tag = trigger_latency(&runtime, starts, plan.samples, TriggerKind::Tag).await?;
    let alarm = trigger_latency(&runtime, starts, plan.samples, TriggerKind::Alarm).await?;

    eprintln!(
        "script-bench: {} trivial scripts for {} s",
        plan.trivial_scripts, plan.seconds
    );
    let trivial = trivial_runs(&runtime, plan).await?;
    shutdown.cancel();
    Ok(json!({
        "loadedScripts": plan.loaded,
        "bytesPerLoadedScript": bytes_per_script,
        "tagTrigger": tag,
        "alarmTrigger": alarm,
        "trivial": trivial,
    }))
}

fn trigger(text: &str) -> anyhow::Result<Trigger> {
    text.parse().map_err(|error| anyhow::anyhow!("{text}: {error}"))
}

/// Stores `count` copies of the typical script (a `tag:` trigger on a tag nothing writes),
/// starts a runner for them and returns the resident memory it added per script; then stops
/// that runner and removes them.
async fn loaded_memory(runtime: &Runtime, count: usize) -> anyhow::Result<f64> {
    let store = runtime.store();
    let idle = trigger("tag:Bench.Idle")?;
    for index in 0..count {
        store
            .add_script(&format!("Loaded{index}"), &idle, TYPICAL_SCRIPT)
            .await?;
    }
    let pid = std::process::id();
    let before = rss_bytes(pid).unwrap_or(0);
    let shutdown = CancellationToken::new();
    runtime.start_scripts(&shutdown).await;
    let after = rss_bytes(pid).unwrap_or(0);
    shutdown.cancel();
    for index in 0..count {
        store.remove_script(&format!("Loaded{index}")).await?;
    }
    #[expect(clippy::cast_precision_loss, reason = "a byte count")]
    Ok(after.saturating_sub(before) as f64 / count.max(1) as f64)
}

#[derive(Debug, Clone, Copy)]
enum TriggerKind {
    Tag,
    Alarm,
}

/// `samples` times: writes the trigger (a new value of `Bench.In`, or `Bench.Level` past its
/// high limit, then back), and waits until the script's echo of it shows in the plant. Times
/// the run's start and the echo from the write.
async fn trigger_latency(
    runtime: &Runtime,
    starts: &RunStarts,
    samples: usize,
    kind: TriggerKind,
) -> anyhow::Result<Value> {
    let plant = runtime.plant();
    let mut changes = plant.reader().changes();
    let (fired, script, echo) = match kind {
        TriggerKind::Tag => ("Bench.In", "TagEcho", "Bench.TagEcho"),
        TriggerKind::Alarm => ("Bench.Level", "AlarmEcho", "Bench.AlarmEcho"),
    };
    let nanos = |from: Instant, to: Instant| {
        u64::try_from(to.saturating_duration_since(from).as_nanos()).unwrap_or(u64::MAX)
    };
    let (mut to_start, mut to_echo) = (Latencies::default(), Latencies::default());
    for sample in 0..samples {
        // Above the alarm's limit, and new each time.
        #[expect(clippy::cast_precision_loss, reason = "a bounded sample count")]
        let value = 100.0 + sample as f64;
        changes.borrow_and_update();
        starts.record();
        let written = Instant::now();
        plant.write(fired, TagValue::Number(value), Quality::GOOD)?;
        loop {
            let seen = plant
                .objects()
                .tag(echo)
                .is_some_and(|tag| tag.current().value == TagValue::Number(value));
            if seen {
                break;
            }
            tokio::time::timeout(SAMPLE_PATIENCE, changes.changed())
                .await
                .with_context(|| format!("no echo of {fired} = {value} in {SAMPLE_PATIENCE:?}"))??;
        }
        let echoed = Instant::now();
        starts.stop();
        let started = starts
            .first(script)
            .with_context(|| format!("{script} echoed {value} without a run start seen"))?;
        to_start.push(nanos(written, started));
        to_echo.push(nanos(written, echoed));
        if let TriggerKind::Alarm = kind {
            // Clears, so the next sample trips it anew.
            plant.write(fired, TagValue::Number(0.0), Quality::GOOD)?;
        }
    }
    Ok(json!({"toStart": to_start.to_json(), "toEcho": to_echo.to_json()}))
}

/// Writes `Bench.Storm` as fast as the runtime lets it for `plan.seconds`; the trivial
/// scripts on it run back to back, the triggers that come while they run coalesced. Returns
/// their runs a second, skipped triggers and process CPU per run (the writer's included).
async fn trivial_runs(runtime: &Runtime, plan: ScriptPlan) -> anyhow::Result<Value> {
    let plant = runtime.plant();
    let pid = std::process::id();
    let cpu_start = cpu_seconds(pid).unwrap_or(0.0);
    let started = Instant::now();
    let period = Duration::from_secs_f64(plan.seconds);
    // Bounded in count as in time.
    let mut writes = 0_u32;
    while started.elapsed() < period && writes < 10_000_000 {
        writes += 1;
        plant.write("Bench.Storm", TagValue::Number(f64::from(writes)), Quality::GOOD)?;
        tokio::task::yield_now().await;
    }
    let seconds = started.elapsed().as_secs_f64();
    // Runs under way end, and the runner records them within a few seconds: wait until the
    // recorded counts stop changing.
    let mut last = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        let tally = runtime
            .store()
            .script_records()
            .await?
            .into_iter()
            .filter(|record| record.name.starts_with("Trivial"))
            .fold((0, 0), |(runs, skipped), record| {
                (runs + record.runs, skipped + record.skipped)
            });
        if tally == last && tally.0 > 0 {
            break;
        }
        if Instant::now() > deadline {
            bail!("the trivial scripts' records never settled: {tally:?}");
        }
        last = tally;
    }
    let cpu = cpu_seconds(pid).unwrap_or(0.0) - cpu_start;
    let (runs, skipped) = last;
    #[expect(clippy::cast_precision_loss, reason = "run counts")]
    Ok(json!({
        "scripts": plan.trivial_scripts,
        "seconds": seconds,
        "triggers": writes,
        "runs": runs,
        "skipped": skipped,
        "runsPerSecond": runs as f64 / seconds,
        "cpuUsPerRun": cpu * 1e6 / runs.max(1) as f64,
    }))
}

/// Solution scripts: memory per loaded script, trigger to the script's first write for tag:
/// and alarm: triggers, trivial runs a second under a storm of triggers; judges each.
pub(crate) fn judge(
    bin: &Path,
    out_dir: &Path,
    plan: ScriptPlan,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let scripts = run(bin, out_dir, plan)?;
    let trivial = &scripts["trivial"];
    let per_script = scripts["bytesPerLoadedScript"].as_f64().unwrap_or(f64::INFINITY);
    for (label, kind) in [("tag:", "tagTrigger"), ("alarm:", "alarmTrigger")] {
        let (start, echo) = (&scripts[kind]["toStart"], &scripts[kind]["toEcho"]);
        let (p50, p99) = (
            start["p50Us"].as_f64().unwrap_or(0.0),
            start["p99Us"].as_f64().unwrap_or(f64::INFINITY),
        );
        eprintln!(
            "{:<28} {:>9} samples  p50 {p50:>8.1} us  p99 {p99:>8.1} us  max {:.1} us  (to its write shown: p50 {:.1} us, p99 {:.1} us)",
            format!("script {label} trigger to run"),
            start["samples"],
            start["maxUs"].as_f64().unwrap_or(0.0),
            echo["p50Us"].as_f64().unwrap_or(0.0),
            echo["p99Us"].as_f64().unwrap_or(0.0),
        );
        verdicts.judge(
            format!("script {label} trigger to run start, p99"),
            format!("{p99:.0} us (p50 {p50:.0} us)"),
            verdicts::SCRIPT_TRIGGER,
            p99,
            true,
        );
    }
    let runs_per_second = trivial["runsPerSecond"].as_f64().unwrap_or(0.0);
    eprintln!(
        "{:<28} {runs_per_second:>9.0} runs/s  {} skipped of {} triggers  CPU {:.1} us/run  {:.1} KiB/loaded script",
        format!("script trivial x{}", plan.trivial_scripts),
        trivial["skipped"],
        trivial["triggers"],
        trivial["cpuUsPerRun"].as_f64().unwrap_or(0.0),
        per_script / 1024.0,
    );
    verdicts.judge(
        format!(
            "trivial script runs, {} scripts on one busy tag",
            plan.trivial_scripts
        ),
        format!("{runs_per_second:.0} runs/s"),
        verdicts::SCRIPT_RUNS,
        runs_per_second,
        true,
    );
    verdicts.judge(
        format!("memory per loaded script, {} loaded", plan.loaded),
        format!("{:.1} KiB", per_script / 1024.0),
        verdicts::SCRIPT_MEMORY,
        per_script,
        true,
    );
    results.insert("scripts", scripts);
    Ok(())
}
