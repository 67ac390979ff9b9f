//! The plant scenarios of `cargo xtask bench`: the write round trip beside ping, and
//! subscription fan-out (many panels subscribed to many tags changing fast).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::harness::Bench;
use super::report::{Results, error_count, latency};
use super::verdicts::{self, Verdicts};
use crate::processes::{cpu_seconds, run_quietly};

/// The bench's tag whose writes are signed.
pub(crate) const SIGNED_TAG: &str = "BenchSigned.Setpoint";

/// The folder and name prefix of the bench's own tags.
pub(crate) const BENCH_FOLDER: &str = "Bench";

/// The demo plant plus `count` writable number tags `Bench.T0000`.. at `Bench/T0000`.., the
/// proposable and the signed tag, as a plant file next to the solution (with the demo's
/// documents beside it, where its `[[documents]]` say they are), imported into it.
pub(crate) fn import_bench_plant(tserver: &Path, solution: &Path, count: usize) -> anyhow::Result<()> {
    let plants = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/plants");
    let mut text = demo_with_bench_tags(&plants, solution, count)?;
    // The tag `scripted-llm --mode propose` proposes a write of, outside the bench folder the
    // fan-out scenarios watch whole.
    text.push_str(
        "\n[[tags]]\nname = \"BenchProposals.Setpoint\"\npath = \"BenchProposals/Setpoint\"\ntype = \"number\"\nwritable = true\nproposable = true\n",
    );
    // The tag whose writes the signed write round trip signs.
    text.push_str(&format!(
        "\n[[tags]]\nname = \"{SIGNED_TAG}\"\npath = \"BenchSigned/Setpoint\"\ntype = \"number\"\nwritable = true\nsigned = true\n"
    ));
    import(tserver, solution, &text)
}

/// The demo plant of `plants` (a tree's `examples/plants`) plus `count` writable number tags
/// `Bench.T0000`..; its procedures copied next to `solution`.
pub(crate) fn demo_with_bench_tags(plants: &Path, solution: &Path, count: usize) -> anyhow::Result<String> {
    let demo = plants.join("demo.toml");
    copy_procedures(&plants.join("procedures"), &solution.with_file_name("procedures"))?;
    let mut text =
        std::fs::read_to_string(&demo).with_context(|| format!("cannot read {}", demo.display()))?;
    for index in 0..count {
        text.push_str(&format!(
            "\n[[tags]]\nname = \"{BENCH_FOLDER}.T{index:04}\"\npath = \"{BENCH_FOLDER}/T{index:04}\"\ntype = \"number\"\nwritable = true\n"
        ));
    }
    Ok(text)
}

/// Imports the plant `text` into `solution` with `tserver`, from a file next to it.
pub(crate) fn import(tserver: &Path, solution: &Path, text: &str) -> anyhow::Result<()> {
    let file = solution.with_file_name("bench-plant.toml");
    std::fs::write(&file, text)?;
    let solution = solution.to_str().context("a UTF-8 solution path")?;
    let file = file.to_str().context("a UTF-8 plant path")?;
    run_quietly(tserver, &["plant", solution, "import", file])
}

/// Copies the demo's procedure files (one folder, no subfolders) to `to`.
fn copy_procedures(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))? {
        let path = entry?.path();
        if path.is_file() {
            let target = to.join(path.file_name().context("a file name")?);
            std::fs::copy(&path, &target).with_context(|| format!("cannot copy {}", path.display()))?;
        }
    }
    Ok(())
}

/// Starts `tclient bench ...` without waiting; its JSON report comes from [`finish`].
fn start_client(tclient: &Path, addr: &str, args: &[String]) -> anyhow::Result<std::process::Child> {
    Command::new(tclient)
        .args(["--addr", addr, "--timeout-secs", "30", "bench"])
        .args(args)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot run tclient")
}

fn finish(child: std::process::Child, what: &str) -> anyhow::Result<Value> {
    let output = child.wait_with_output().context("tclient did not finish")?;
    if !output.status.success() {
        bail!("tclient bench {what} failed");
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// What the fan-out run measured.
pub(crate) struct FanOut {
    /// The watchers' report: per-reading change-to-frame latency, readings, skipped.
    pub(crate) watch: Value,
    /// The writer's report.
    pub(crate) write: Value,
    /// tserver's CPU seconds over the run.
    pub(crate) cpu_seconds: f64,
}

impl FanOut {
    /// Readings delivered per second, all panels together.
    pub(crate) fn readings_per_second(&self) -> f64 {
        let readings = self.watch["calls"].as_f64().unwrap_or(0.0);
        readings / self.watch["seconds"].as_f64().unwrap_or(1.0).max(f64::EPSILON)
    }

    /// tserver CPU microseconds per reading delivered.
    pub(crate) fn cpu_us_per_reading(&self) -> f64 {
        self.cpu_seconds * 1e6 / self.watch["calls"].as_f64().unwrap_or(0.0).max(1.0)
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({"watch": self.watch, "write": self.write, "tserverCpuSeconds": self.cpu_seconds,
               "readingsPerSecond": self.readings_per_second(), "cpuUsPerReading": self.cpu_us_per_reading()})
    }
}

/// The shape of a fan-out run.
pub(crate) struct FanOutPlan<'a> {
    /// Connections subscribed to the bench folder.
    pub(crate) panels: usize,
    /// Bench tags, all written by one writer...
    pub(crate) tags: usize,
    /// ...this many times a second.
    pub(crate) rate: u32,
    /// Before measuring, and how long to measure (`500ms`, `5s`).
    pub(crate) warmup: &'a str,
    pub(crate) duration: &'a str,
}

/// Runs `plan` against tserver at `addr` (process `tserver_pid`) with the `tclient` binary.
pub(crate) fn fan_out(
    tclient: &Path,
    addr: &str,
    tserver_pid: u32,
    plan: &FanOutPlan<'_>,
) -> anyhow::Result<FanOut> {
    let FanOutPlan {
        panels,
        tags,
        rate,
        warmup,
        duration,
    } = *plan;
    let owned = |args: &[&str]| -> Vec<String> { args.iter().map(|arg| (*arg).to_owned()).collect() };
    let watchers = start_client(
        tclient,
        addr,
        &owned(&[
            "watch",
            "-c",
            &panels.to_string(),
            "--folder",
            BENCH_FOLDER,
            "--max-rate",
            "100",
            "-d",
            duration,
            "--warmup",
            warmup,
        ]),
    )?;
    // The watchers subscribe during their warm-up; the writer runs a little past both ends.
    std::thread::sleep(Duration::from_millis(300));
    let total = humantime::parse_duration(warmup)? + humantime::parse_duration(duration)?;
    let writer = start_client(
        tclient,
        addr,
        &owned(&[
            "write",
            "-c",
            "1",
            "--rate",
            &rate.to_string(),
            "--tags",
            &format!("{BENCH_FOLDER}.T*{tags}"),
            "-d",
            &humantime::format_duration(total).to_string(),
            "--warmup",
            "0s",
        ]),
    )?;
    // CPU from the end of the watchers' warm-up to the end of their measurement.
    std::thread::sleep(humantime::parse_duration(warmup)?);
    let before = cpu_seconds(tserver_pid).unwrap_or(0.0);
    let watch = finish(watchers, "watch")?;
    let cpu = cpu_seconds(tserver_pid).unwrap_or(0.0) - before;
    let write = finish(writer, "write")?;
    Ok(FanOut {
        watch,
        write,
        cpu_seconds: cpu,
    })
}

/// Subscription fan-out: `panels` panels subscribed to `tags` bench tags while all of them
/// change ten times a second; judges the p99 from a change to its frame.
pub(crate) fn judge_fan_out(
    bench: &Bench,
    (panels, tags): (usize, usize),
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let fan_out = fan_out(
        &bench.tool("tclient"),
        &bench.tserver_addr,
        bench.tserver_pid,
        &FanOutPlan {
            panels,
            tags,
            rate: 10,
            warmup: bench.warmup,
            duration: bench.duration,
        },
    )?;
    let expected = (panels * tags * 10) as f64;
    eprintln!(
        "{:<28} {:>9.0} readings/s of {expected:.0} changed  p50 {:>8.1} us  p99 {:>8.1} us  merged {}  tserver CPU {:.2} us/reading",
        format!("tserver fan-out x{panels}"),
        fan_out.readings_per_second(),
        latency(&fan_out.watch, "p50"),
        latency(&fan_out.watch, "p99"),
        fan_out.watch["skipped"],
        fan_out.cpu_us_per_reading()
    );
    verdicts.judge(
        format!("{panels} panels x {tags} tags changing 10/s: change to frame, p99"),
        format!(
            "{:.0} us (p50 {:.0} us), {:.0} of {expected:.0} readings/s, {:.2} us tserver CPU each",
            latency(&fan_out.watch, "p99"),
            latency(&fan_out.watch, "p50"),
            fan_out.readings_per_second(),
            fan_out.cpu_us_per_reading()
        ),
        verdicts::FAN_OUT_P99,
        latency(&fan_out.watch, "p99"),
        error_count(&fan_out.watch) == 0 && error_count(&fan_out.write) == 0,
    );
    results.insert("subscription fan-out", fan_out.to_json());
    Ok(())
}
