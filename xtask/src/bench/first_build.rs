//! The first build a new user makes: `cargo build --release` in a clean target directory (the
//! registry already downloaded), then the README's commands after it, each of which must find
//! nothing to rebuild.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::report::Results;
use super::verdicts::{self, Verdicts};

/// The README's commands after the first build, as the packages and binaries they build.
const README_BUILDS: &[(&str, &[&str])] = &[
    ("cargo run --release -p tserver-demo", &["-p", "tserver-demo"]),
    ("cargo run --release --bin tserver", &["--bin", "tserver"]),
    ("cargo run --release --bin tclient", &["--bin", "tclient"]),
];

/// Builds the product in release from nothing in `out_dir/first-build`, timed, then each
/// README command's build there, counting the units it compiled; the directory is removed
/// afterwards (a few GiB).
pub(crate) fn judge(
    root: &Path,
    out_dir: &Path,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let target = out_dir.join("first-build");
    if target.exists() {
        std::fs::remove_dir_all(&target).with_context(|| format!("cannot clear {}", target.display()))?;
    }
    let started = Instant::now();
    let first = release_build(root, &target, &[])?;
    let seconds = started.elapsed().as_secs_f64();
    let mut rebuilt = Vec::new();
    for (command, args) in README_BUILDS {
        let build = release_build(root, &target, args)?;
        rebuilt.push(json!({"command": command, "units_compiled": build.compiled}));
    }
    std::fs::remove_dir_all(&target).with_context(|| format!("cannot remove {}", target.display()))?;
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    results.insert(
        "first build",
        json!({"seconds": seconds, "units_compiled": first.compiled, "cores": cores, "after": rebuilt}),
    );
    verdicts.judge(
        "first `cargo build --release`, clean target, registry downloaded".to_owned(),
        format!("{seconds:.0} s on {cores} cores ({} units)", first.compiled),
        verdicts::FIRST_BUILD,
        seconds,
        true,
    );
    let compiled_after: u64 = rebuilt
        .iter()
        .filter_map(|build| build["units_compiled"].as_u64())
        .sum();
    let each = rebuilt
        .iter()
        .map(|build| format!("{}", build["units_compiled"]))
        .collect::<Vec<_>>()
        .join(" / ");
    verdicts.judge(
        "units the README's commands rebuild after it (-p tserver-demo / --bin tserver / --bin tclient)"
            .to_owned(),
        each,
        verdicts::README_REBUILDS,
        compiled_after as f64,
        true,
    );
    Ok(())
}

/// What one `cargo build` did.
struct Build {
    /// Units compiled rather than found fresh.
    compiled: u64,
}

/// `cargo build --release ARGS` in `root` with its own target directory, counting the units
/// cargo reports compiled (`"fresh": false`).
fn release_build(root: &Path, target: &Path, args: &[&str]) -> anyhow::Result<Build> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    eprintln!(
        "$ cargo build --release {} (target {})",
        args.join(" "),
        target.display()
    );
    let output = Command::new(&cargo)
        .current_dir(root)
        .args(["build", "--release", "--message-format", "json"])
        .args(args)
        .env("CARGO_TARGET_DIR", target)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {cargo}"))?;
    if !output.status.success() {
        bail!(
            "cargo build --release {} failed with {}",
            args.join(" "),
            output.status
        );
    }
    Ok(Build {
        compiled: compiled_units(&String::from_utf8_lossy(&output.stdout)),
    })
}

/// The units a `--message-format json` stream reports compiled: the artifacts not fresh.
fn compiled_units(messages: &str) -> u64 {
    let compiled = messages
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact" && message["fresh"] == false)
        .count();
    compiled as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_artifacts_not_fresh_count_as_compiled() {
        let messages = [
            r#"{"reason":"compiler-artifact","package_id":"a","fresh":true}"#,
            r#"{"reason":"compiler-artifact","package_id":"b","fresh":false}"#,
            r#"{"reason":"build-script-executed","package_id":"c"}"#,
            r#"{"reason":"compiler-message","package_id":"d"}"#,
            r#"{"reason":"build-finished","success":true}"#,
            "not json",
        ]
        .join("\n");
        assert_eq!(compiled_units(&messages), 1);
    }
}
