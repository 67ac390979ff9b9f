//! The baseline build, tag `bench-baseline-1`, run beside tserver in the full bench: the
//! yardstick of the two microsecond rows of the 1-tool turn.
//!
//! The CPU row asks for 35 us a 1-tool turn where the baseline build spent 59 us in the middle,
//! so the target is 35/59 of what that build spends on the same machine in the same run; the
//! latency row asks for 300 us added p99 at one turn in flight where that build's own run read
//! 355 us (both in the verdict table). A reference ping cannot stand in for the build: a ping is
//! nearly all kernel work and a turn mostly user space, so the same build measured 12.6 pings a
//! turn on one machine and 16.2 on another, and the ping's p99 halved when the bench's own
//! binaries were built with LTO. Measuring the build itself needs no conversion.
//!
//! Its sources come from this repository's history (`git archive`), are built once into
//! `target/bench/baseline/` (kept between runs) and run with that build's command line.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::processes::{Process, free_port, run_quietly, wait_for_port};

/// The baseline build, tag `bench-baseline-1`, by commit: a clone without tags builds it too.
const COMMIT: &str = "03d5bf08d198497b67d4f980183558b87b52d7f5";

/// The baseline build's tserver, serving its own demo solution.
pub(crate) struct Baseline {
    process: Process,
    addr: String,
}

impl Baseline {
    /// Builds the baseline build's tserver under `dir` (once: the sources and the build stay there) and
    /// starts it on a fresh demo solution whose model is at `llm_url`, as the bench starts
    /// tserver (simulator off, room for 64 calls in flight).
    pub(crate) fn start(repository: &Path, dir: &Path, llm_url: &str) -> anyhow::Result<Self> {
        let tserver = build(repository, dir)?;
        // A fresh solution each run: the last run's history and settings are not this one's.
        let run = dir.join("run");
        let _ = std::fs::remove_dir_all(&run);
        std::fs::create_dir_all(&run)?;
        let solution = run.join("baseline.db");
        let solution = solution.to_str().context("a UTF-8 solution path")?;
        run_quietly(&tserver, &["init", solution, "--demo"])?;
        run_quietly(&tserver, &["settings", solution, "set", "ModelEnabled", "true"])?;
        run_quietly(&tserver, &["settings", solution, "set", "URL", llm_url])?;
        let addr = format!("127.0.0.1:{}", free_port()?);
        let process = Process {
            name: "the baseline build's tserver",
            child: Command::new(&tserver)
                .args(["serve", "--solution", solution, "--listen", &addr])
                .args(["--simulator", "off", "--max-connections", "12000"])
                .args(["--max-calls-in-flight", "64"])
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(run.join("tserver.log"))?)
                .spawn()
                .context("cannot start the baseline build's tserver")?,
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

/// The baseline build's sources extracted from git under `dir/src` and its tserver built in release
/// under `dir/target`, unless already there; returns the binary.
fn build(repository: &Path, dir: &Path) -> anyhow::Result<PathBuf> {
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
            .args(["archive", "--format=tar", COMMIT])
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot run git (the bench builds the baseline commit, tag bench-baseline-1, from this repository's history)")?;
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
                "git archive {COMMIT} failed: the bench needs the baseline commit (tag bench-baseline-1) in this repository's history (a full clone, not a shallow one)"
            );
        }
        if !unpacked.success() {
            bail!(
                "tar could not unpack the baseline build's sources into {}",
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
