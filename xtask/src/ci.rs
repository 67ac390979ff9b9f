//! `cargo xtask ci`: every check CI runs, in order, each failing the run when it fails. `.ci/run`
//! installs the system packages the tests need and then runs this, so this is the one
//! definition of CI.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::processes::cargo;

/// How long the bench smoke may take, its build included (a few seconds of measuring).
const BENCH_SMOKE_TIMEOUT: &str = "600";
/// How long the fuzz smoke may take, the targets' build included.
const FUZZ_SMOKE_TIMEOUT: &str = "900";
/// The cargo-fuzz CI installs when it is missing.
const CARGO_FUZZ_VERSION: &str = "0.13.2";
/// The cargo-hakari CI installs when it is missing (it keeps `crates/workspace-hack`).
const CARGO_HAKARI_VERSION: &str = "0.9.39";

/// Format, lints (the fuzz entry points' too: they are behind a feature the workspace build
/// never turns on), the workspace-hack check, the test suite with one closing line, the bench
/// smoke, the fuzz smoke.
pub(crate) fn run() -> anyhow::Result<()> {
    cargo(&["fmt", "--all", "--check"])?;
    cargo(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"])?;
    cargo(&[
        "clippy",
        "-p",
        "localai",
        "--features",
        "fuzzing",
        "--",
        "-D",
        "warnings",
    ])?;
    // One feature set for the product's third-party crates, so building any product binary
    // alone reuses `cargo build --release`: fails when a dependency change left
    // `crates/workspace-hack` behind (`cargo hakari generate` mends it).
    install_if_missing("hakari", "cargo-hakari", CARGO_HAKARI_VERSION)?;
    cargo(&["hakari", "generate", "--diff"])?;
    cargo(&["hakari", "verify"])?;
    test_workspace()?;
    // The benchmark harness, a few seconds with debug binaries: proves it still runs end to
    // end. It never judges speed (that is `cargo xtask bench` on a quiet machine).
    with_timeout(BENCH_SMOKE_TIMEOUT, &["xtask", "bench", "--smoke"])?;
    // Fuzz smoke: a few seconds of each target from its seeds and corpus (the 10-minute runs
    // are `cargo xtask fuzz`). cargo-fuzz is a cargo subcommand from crates.io; the targets
    // build on the stable toolchain without a sanitizer.
    install_if_missing("fuzz", "cargo-fuzz", CARGO_FUZZ_VERSION)?;
    with_timeout(FUZZ_SMOKE_TIMEOUT, &["xtask", "fuzz", "--seconds", "5"])
}

/// `cargo install PACKAGE --version VERSION --locked` unless `cargo SUBCOMMAND --version` runs.
fn install_if_missing(subcommand: &str, package: &str, version: &str) -> anyhow::Result<()> {
    if cargo_succeeds(&[subcommand, "--version"])? {
        return Ok(());
    }
    cargo(&["install", package, "--version", version, "--locked"])
}

fn cargo_program() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// Whether `cargo ARGS` succeeds, its output discarded.
fn cargo_succeeds(args: &[&str]) -> anyhow::Result<bool> {
    let status = Command::new(cargo_program())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("cannot run cargo")?;
    Ok(status.success())
}

/// `cargo ARGS` under coreutils' `timeout`, which stops the whole process group (the servers a
/// bench starts included) when `seconds` pass.
fn with_timeout(seconds: &str, args: &[&str]) -> anyhow::Result<()> {
    eprintln!("$ timeout {seconds} cargo {}", args.join(" "));
    let status = Command::new("timeout")
        .arg(seconds)
        .arg(cargo_program())
        .args(args)
        .status()
        .context("cannot run timeout (coreutils)")?;
    match status.code() {
        Some(0) => Ok(()),
        Some(124) => bail!("cargo {} took more than {seconds} s", args.join(" ")),
        _ => bail!("cargo {} failed with {status}", args.join(" ")),
    }
}

/// `cargo test --workspace`, its output passed through, then one closing line for the whole
/// run (cargo prints one per test binary, the last often a doc-test binary with nothing in it).
/// The closing line is printed whether or not the tests passed.
fn test_workspace() -> anyhow::Result<()> {
    eprintln!("$ cargo test --workspace");
    let mut child = Command::new(cargo_program())
        .args(["test", "--workspace"])
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot run cargo test")?;
    let output = child.stdout.take().context("cargo test has no output")?;
    let mut tally = Tally::default();
    let mut stdout = std::io::stdout();
    for line in BufReader::new(output).lines() {
        let line = line.context("cannot read cargo test's output")?;
        tally.count(&line);
        writeln!(stdout, "{line}")?;
    }
    let status = child.wait().context("cargo test did not finish")?;
    println!("tests: {} passed, {} failed", tally.passed, tally.failed);
    if !status.success() {
        bail!("cargo test --workspace failed with {status}");
    }
    Ok(())
}

/// Tests passed and failed over every `test result:` line.
#[derive(Debug, Default, PartialEq, Eq)]
struct Tally {
    passed: u64,
    failed: u64,
}

impl Tally {
    /// Adds a line such as `test result: ok. 12 passed; 0 failed; 1 ignored; ...`.
    fn count(&mut self, line: &str) {
        let Some(rest) = line.strip_prefix("test result:") else {
            return;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        for pair in words.windows(2) {
            let count = pair[0].parse::<u64>().unwrap_or(0);
            match pair[1].trim_end_matches([';', ',']) {
                "passed" => self.passed += count,
                "failed" => self.failed += count,
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Tally;

    #[test]
    fn the_closing_line_sums_every_test_binary_and_ignores_other_lines() {
        let mut tally = Tally::default();
        for line in [
            "test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s",
            "test a::b ... ok",
            "test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1.50s",
            "running 0 tests",
            "test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s",
        ] {
            tally.count(line);
        }
        assert_eq!(
            tally,
            Tally {
                passed: 15,
                failed: 2
            }
        );
    }
}
