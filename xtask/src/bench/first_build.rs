//! The first build a new user makes: `cargo build --release` in a clean target directory (the
//! registry already downloaded), then the README's commands after it, each of which must find
//! nothing to rebuild; then the production build of the same tree, cold, which the first
//! build's time is judged against.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::report::Results;
use super::verdicts::{self, Verdicts};
use crate::processes::ended_children_cpu_time;

/// The README's commands after the first build, as the packages and binaries they build.
const README_BUILDS: &[(&str, &[&str])] = &[
    ("cargo run --release -p tserver-demo", &["-p", "tserver-demo"]),
    ("cargo run --release --bin tserver", &["--bin", "tserver"]),
    ("cargo run --release --bin tclient", &["--bin", "tclient"]),
];

/// Builds the product in release from nothing in `out_dir/first-build`, timed, then each
/// README command's build there, counting the units it compiled (the first build's
/// `--timings` report kept as `out_dir/first-build-timings.html`); then the product in `dist`
/// from nothing in `out_dir/first-build-dist`, timed. Build times differ between machines of
/// the same core count by more than the target's margin, so the verdict is the release
/// build's time over the dist build's, both measured here. Each directory is removed
/// afterwards (a few GiB).
pub(crate) fn judge(
    root: &Path,
    out_dir: &Path,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let target = clean_dir(&out_dir.join("first-build"))?;
    // `--timings` costs nothing measurable and keeps where the wall time went: each unit's
    // start and end, and how many built at once.
    let first = build(root, &target, "release", &["--timings"])?;
    let timings = out_dir.join("first-build-timings.html");
    std::fs::copy(target.join("cargo-timings/cargo-timing.html"), &timings)
        .context("cargo build --timings wrote no cargo-timing.html")?;
    let (seconds, cpu_seconds) = (first.seconds, first.cpu_seconds);
    let mut rebuilt = Vec::new();
    for (command, args) in README_BUILDS {
        let readme_build = build(root, &target, "release", args)?;
        rebuilt.push(json!({"command": command, "units_compiled": readme_build.compiled}));
    }
    remove_dir(&target)?;
    let dist_target = clean_dir(&out_dir.join("first-build-dist"))?;
    let dist = build(root, &dist_target, "dist", &[])?;
    remove_dir(&dist_target)?;
    let ratio = seconds / dist.seconds;
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    results.insert(
        "first build",
        json!({
            "seconds": seconds,
            "cpu_seconds": cpu_seconds,
            "units_compiled": first.compiled,
            "cores": cores,
            "after": rebuilt,
            "dist_seconds": dist.seconds,
            "dist_cpu_seconds": dist.cpu_seconds,
            "over_dist": ratio,
            "timings": timings,
        }),
    );
    verdicts.judge(
        "first `cargo build --release`, clean target, registry downloaded, over the same cold in dist"
            .to_owned(),
        format!(
            "{ratio:.2}x: {seconds:.0} s ({} units, {cpu_seconds:.0} s of CPU) over {:.0} s ({:.0} s of CPU) on {cores} cores",
            first.compiled, dist.seconds, dist.cpu_seconds
        ),
        verdicts::FIRST_BUILD,
        ratio,
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

/// `dir`, emptied: a build there starts from nothing.
fn clean_dir(dir: &Path) -> anyhow::Result<std::path::PathBuf> {
    if dir.exists() {
        remove_dir(dir)?;
    }
    Ok(dir.to_owned())
}

/// Removes a build's target directory.
fn remove_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))
}

/// What one `cargo build` did.
struct Build {
    /// Units compiled rather than found fresh.
    compiled: u64,
    /// Wall time, from starting cargo to its exit.
    seconds: f64,
    /// CPU time of cargo and everything it ran (rustc, build scripts, linkers): the wall time
    /// on 2 cores is this over two where both cores are busy, more where the build waits for
    /// a crate that builds alone.
    cpu_seconds: f64,
}

/// `cargo build --profile PROFILE ARGS` in `root` with its own target directory, counting the
/// units cargo reports compiled (`"fresh": false`), timed.
fn build(root: &Path, target: &Path, profile: &str, args: &[&str]) -> anyhow::Result<Build> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    eprintln!(
        "$ cargo build --profile {profile} {} (target {})",
        args.join(" "),
        target.display()
    );
    let started = Instant::now();
    let cpu_before = ended_children_cpu_time().context("no CPU time of ended children in /proc/self/stat")?;
    let output = Command::new(&cargo)
        .current_dir(root)
        .args(["build", "--profile", profile, "--message-format", "json"])
        .args(args)
        .env("CARGO_TARGET_DIR", target)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {cargo}"))?;
    if !output.status.success() {
        bail!(
            "cargo build --profile {profile} {} failed with {}",
            args.join(" "),
            output.status
        );
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu =
        ended_children_cpu_time().context("no CPU time of ended children in /proc/self/stat")? - cpu_before;
    Ok(Build {
        compiled: compiled_units(&String::from_utf8_lossy(&output.stdout)),
        seconds,
        cpu_seconds: cpu.total(),
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
