//! `cargo xtask fuzz`: runs every fuzz target of `crates/fuzz` with `cargo fuzz`, each for a
//! bounded time, growing its corpus in `crates/fuzz/corpus/<target>` from the seeds in
//! `crates/fuzz/seeds/<target>`.
//!
//! A crash, a hang (one input over 10 s) or an input driving memory past 1 GiB fails the task;
//! libFuzzer leaves the input under `crates/fuzz/artifacts/<target>/`.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

/// Every fuzz target, in the order they run.
pub(crate) const TARGETS: &[&str] = &[
    "frames",
    "websocket_messages",
    "queries",
    "llm_response",
    "model_settings",
    "authorization",
    "plant_file",
    "sparkplug",
    "script_source",
];

/// Options of `cargo xtask fuzz`.
#[derive(Debug, clap::Args)]
pub(crate) struct FuzzOptions {
    /// How long each target runs, in seconds.
    #[arg(long, value_name = "N", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    seconds: u64,
    /// The targets to run (all when none is named).
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(TARGETS))]
    targets: Vec<String>,
}

impl FuzzOptions {
    /// The targets named, or every target.
    fn targets(&self) -> Vec<&str> {
        if self.targets.is_empty() {
            TARGETS.to_vec()
        } else {
            self.targets.iter().map(String::as_str).collect()
        }
    }
}

/// Builds and runs the targets one after another.
pub(crate) fn run(options: &FuzzOptions) -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("xtask has a parent directory")?;
    let fuzz_dir = root.join("crates/fuzz");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let installed = Command::new(&cargo)
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !installed {
        bail!("cargo fuzz is not installed: run `cargo install cargo-fuzz --version 0.13.2 --locked`");
    }
    for target in options.targets() {
        let corpus = fuzz_dir.join("corpus").join(target);
        std::fs::create_dir_all(&corpus).with_context(|| format!("cannot create {}", corpus.display()))?;
        let seeds = fuzz_dir.join("seeds").join(target);
        eprintln!("fuzzing {target} for {} s", options.seconds);
        // No sanitizer: the workspace forbids unsafe code, so libFuzzer's coverage and checks
        // for panics, hangs and memory are what matter, and they run on the stable toolchain.
        let status = Command::new(&cargo)
            .current_dir(root)
            .args(["fuzz", "run", "--fuzz-dir"])
            .arg(&fuzz_dir)
            .args(["--sanitizer", "none", target])
            .arg(&corpus)
            .arg(&seeds)
            .arg("--")
            .arg(format!("-max_total_time={}", options.seconds))
            .args([
                "-timeout=10",
                "-rss_limit_mb=1024",
                "-max_len=65536",
                "-print_final_stats=1",
            ])
            .status()
            .with_context(|| format!("cannot run cargo fuzz for {target}"))?;
        if !status.success() {
            bail!(
                "fuzz target {target} failed ({status}); the input is under crates/fuzz/artifacts/{target}/"
            );
        }
    }
    Ok(())
}
