//! Project automation, run as `cargo xtask <task>`.
//!
//! - `ci`: the checks CI runs (`.ci/run` calls the same commands): format, lints, tests.

use std::process::Command;

use anyhow::{Context, bail};

fn main() -> anyhow::Result<()> {
    let task = std::env::args().nth(1);
    match task.as_deref() {
        Some("ci") => ci(),
        Some(other) => bail!("unknown task {other:?}; available: ci"),
        None => bail!("usage: cargo xtask <task>; available: ci"),
    }
}

/// Format check, clippy with warnings as errors, then the whole test suite.
fn ci() -> anyhow::Result<()> {
    cargo(&["fmt", "--all", "--check"])?;
    cargo(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"])?;
    cargo(&["test", "--workspace"])
}

fn cargo(args: &[&str]) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    eprintln!("$ cargo {}", args.join(" "));
    let status = Command::new(&cargo)
        .args(args)
        .status()
        .with_context(|| format!("cannot run {cargo}"))?;
    if !status.success() {
        bail!("cargo {} failed with {status}", args.join(" "));
    }
    Ok(())
}
