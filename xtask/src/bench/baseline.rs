//! Builds of this repository's history run beside tserver in the full bench. The baseline
//! build, tag `bench-baseline-1`, is the yardstick of the two microsecond rows of the 1-tool
//! turn; the write baseline, commit 7a74e614 (the last before the acting path, signatures and
//! the audit's hash chain), of the unsigned write's round trip; the MCP baseline, commit
//! 2b86ae77 (the last before tool results carried structured content), of `tools/call`.
//!
//! The CPU row asks for 35 us a 1-tool turn where the baseline build spent 59 us in the middle,
//! so the target is 35/59 of what that build spends on the same machine in the same run; the
//! latency row asks for 300 us added p99 at one turn in flight where that build's own run read
//! 355 us (both in the verdict table). A reference ping cannot stand in for the build: a ping is
//! nearly all kernel work and a turn mostly user space, so the same build measured 12.6 pings a
//! turn on one machine and 16.2 on another, and the ping's p99 halved when the bench's own
//! binaries were built with LTO. Measuring the build itself needs no conversion.
//!
//! Their sources come from this repository's history (`git archive`), are built once into
//! `target/bench/baseline/` and `target/bench/baseline-writes/` (kept between runs) and run
//! with that build's command line.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::processes::{Process, free_port, run_quietly, wait_for_port};

/// A commit of this repository's history a row is judged beside, by hash (a clone without
/// tags builds it too) and by the name its rows give it.
pub(crate) struct Yardstick {
    commit: &'static str,
    name: &'static str,
}

/// The baseline build of the 1-tool turn's rows.
const TURNS: Yardstick = Yardstick {
    commit: "03d5bf08d198497b67d4f980183558b87b52d7f5",
    name: "the baseline build (tag bench-baseline-1)",
};

/// The write baseline: the last commit before the acting path, signatures and the audit's hash
/// chain.
const WRITES: Yardstick = Yardstick {
    commit: "7a74e6148483434a4509cf58aa6be886f74922d3",
    name: "the write baseline (commit 7a74e614)",
};

/// The MCP baseline: the last commit before tool results carried structured content and an
/// output schema.
const MCP: Yardstick = Yardstick {
    commit: "2b86ae774f7c8283701afde5fe17d4c2e5efe712",
    name: "the MCP baseline (commit 2b86ae77)",
};

/// The MCP baseline's tserver, built under `dir` once (the sources and the build stay there).
pub(crate) fn mcp_baseline(repository: &Path, dir: &Path) -> anyhow::Result<PathBuf> {
    build(repository, dir, &MCP)
}

/// A yardstick's tserver, serving its own demo solution.
pub(crate) struct Baseline {
    process: Process,
    addr: String,
}

impl Baseline {
    /// Builds the baseline build's tserver under `dir` (once: the sources and the build stay
    /// there) and starts it on a fresh demo solution whose model is at `llm_url`.
    pub(crate) fn start(repository: &Path, dir: &Path, llm_url: &str) -> anyhow::Result<Self> {
        let tserver = build(repository, dir, &TURNS)?;
        let (run, solution) = fresh_solution(&tserver, dir)?;
        let path = solution.to_str().context("a UTF-8 solution path")?;
        run_quietly(&tserver, &["settings", path, "set", "ModelEnabled", "true"])?;
        run_quietly(&tserver, &["settings", path, "set", "URL", llm_url])?;
        Self::serve(&tserver, &run, &solution, &TURNS)
    }

    /// Builds the write baseline's tserver under `dir` (once) and starts it on a fresh demo
    /// solution with that commit's demo plant and the writable tag `Bench.T0000`.
    pub(crate) fn start_writes(repository: &Path, dir: &Path) -> anyhow::Result<Self> {
        let tserver = build(repository, dir, &WRITES)?;
        let (run, solution) = fresh_solution(&tserver, dir)?;
        let plant = super::plant_bench::demo_with_bench_tags(&dir.join("src/examples/plants"), &solution, 1)?;
        super::plant_bench::import(&tserver, &solution, &plant)?;
        Self::serve(&tserver, &run, &solution, &WRITES)
    }

    /// `tserver` of `yardstick` serving `solution` as the bench serves tserver (simulator off,
    /// room for 64 calls in flight), its log in `run`.
    fn serve(tserver: &Path, run: &Path, solution: &Path, yardstick: &Yardstick) -> anyhow::Result<Self> {
        let addr = format!("127.0.0.1:{}", free_port()?);
        let process = Process {
            name: yardstick.name,
            child: Command::new(tserver)
                .arg("serve")
                .arg("--solution")
                .arg(solution)
                .args(["--listen", &addr])
                .args(["--simulator", "off", "--max-connections", "12000"])
                .args(["--max-calls-in-flight", "64"])
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(run.join("tserver.log"))?)
                .spawn()
                .with_context(|| format!("cannot start {}'s tserver", yardstick.name))?,
        };
        wait_for_port(addr.parse()?)?;
        Ok(Self { process, addr })
    }

    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    pub(crate) fn pid(&self) -> u32 {
        self.process.pid()
    }
}

/// A fresh demo solution made by `tserver` under `dir/run` (the last run's history and settings
/// are not this one's): the run directory and the solution.
fn fresh_solution(tserver: &Path, dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let run = dir.join("run");
    let _ = std::fs::remove_dir_all(&run);
    std::fs::create_dir_all(&run)?;
    let solution = run.join("baseline.db");
    let path = solution.to_str().context("a UTF-8 solution path")?;
    run_quietly(tserver, &["init", path, "--demo"])?;
    Ok((run, solution))
}

/// The sources of `yardstick` extracted from git under `dir/src` and its tserver built in release
/// under `dir/target`, unless already there; returns the binary.
fn build(repository: &Path, dir: &Path, yardstick: &Yardstick) -> anyhow::Result<PathBuf> {
    let Yardstick { commit, name } = yardstick;
    let sources = dir.join("src");
    if !sources.join("Cargo.toml").exists() {
        // Extracted into a fresh directory renamed into place, so that an interrupted run
        // never leaves half a source tree that looks complete.
        let partial = dir.join("src.partial");
        let _ = std::fs::remove_dir_all(&partial);
        std::fs::create_dir_all(&partial)?;
        let mut archive = Command::new("git")
            .arg("-C")
            .arg(repository)
            .args(["archive", "--format=tar", commit])
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| {
                format!("cannot run git (the bench builds {name} from this repository's history)")
            })?;
        let tar_input = archive.stdout.take().context("git archive has no output")?;
        let unpacked = Command::new("tar")
            .arg("-x")
            .arg("-C")
            .arg(&partial)
            .stdin(tar_input)
            .status()
            .context("cannot run tar")?;
        let archived = archive.wait()?;
        if !archived.success() {
            bail!(
                "git archive {commit} failed: the bench needs {name} in this repository's history (a full clone, not a shallow one)"
            );
        }
        if !unpacked.success() {
            bail!(
                "tar could not unpack the sources of {name} into {}",
                partial.display()
            );
        }
        std::fs::rename(&partial, &sources)?;
    }
    let manifest = sources.join("Cargo.toml");
    let target = dir.join("target");
    crate::processes::cargo(&[
        "build",
        "--release",
        "--locked",
        "-p",
        "tserver",
        "--manifest-path",
        manifest.to_str().context("a UTF-8 path")?,
        "--target-dir",
        target.to_str().context("a UTF-8 path")?,
    ])?;
    Ok(target.join("release").join("tserver"))
}
