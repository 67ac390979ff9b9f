//! `tserver init`: a new solution, file or database, with the demo plant when asked, and the
//! commands that make it useful next.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::own_runtime::on_own_runtime;
use plant::Runtime;
use store::{KEY_ENV, SolutionLocation, Store, copy_solution};

/// How much history a new demo solution starts with, and how far apart its samples are.
const DEMO_HISTORY_SPAN: Duration = Duration::from_secs(2 * 3600);
const DEMO_HISTORY_STEP: Duration = Duration::from_secs(30);

/// Runs `tserver init`: creates the solution, then says where its secrets key is (a database)
/// and what to do next.
pub(super) fn init_command(
    solution: &SolutionLocation,
    demo: bool,
    key_file: Option<&Path>,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    if key_file.is_some() && matches!(solution, SolutionLocation::File(_)) {
        bail!(
            "--key-file is for a postgres:// solution: a solution file keeps its key beside it ({solution}.key)"
        );
    }
    match solution {
        SolutionLocation::File(path) => create_file_solution(path, demo)?,
        SolutionLocation::Postgres(url) => {
            // Made as a file first, so a database starts with what a file would.
            let scratch = tempfile::tempdir().context("cannot make a scratch directory")?;
            let path = scratch.path().join("new.db");
            create_file_solution(&path, demo)?;
            let from = SolutionLocation::File(path);
            let to = SolutionLocation::Postgres(url.clone());
            on_own_runtime(|| copy_solution(&from, &to))?;
        }
    }
    let kind = if demo { "demo solution" } else { "solution" };
    writeln!(output, "created {kind} {solution}")?;
    if let SolutionLocation::Postgres(url) = solution {
        writeln!(output, "{}", database_key(url, key_file)?)?;
    }
    output.write_all(next_steps(solution, demo).as_bytes())?;
    Ok(())
}

/// The secrets key of a new database solution: a database keeps none, so every node and admin
/// command takes it from the environment. One set already is that key; otherwise a fresh one
/// is written to `key_file` or `<database>.key` here (an existing file there is kept and used).
/// Says which.
fn database_key(url: &store::PostgresUrl, key_file: Option<&Path>) -> anyhow::Result<String> {
    if std::env::var_os(KEY_ENV).is_some() {
        return Ok(format!(
            "secrets key: the {KEY_ENV} set here; every node and admin command on this solution needs the same"
        ));
    }
    let path = key_file.map_or_else(
        || PathBuf::from(format!("{}.key", url.database().unwrap_or("solution"))),
        Path::to_path_buf,
    );
    let shown = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
    let made = if path.exists() {
        format!("kept the secrets key file {}", shown.display())
    } else {
        store::create_key_at(&path)?;
        format!("made a secrets key in {} (owner-only)", shown.display())
    };
    let quoted = shlex::try_quote(&shown.display().to_string())
        .map_or_else(|_| shown.display().to_string(), |q| q.into_owned());
    Ok(format!(
        "{made}: a database keeps none, so every node and admin command on it needs it in \
         {KEY_ENV}, e.g. `export {KEY_ENV}=$(cat {quoted})`"
    ))
}

/// What to do after `init`: the commands that make a new solution useful, with its location
/// quoted for a shell. A new solution has no users (a demo has `guest`), no runtime tools
/// (a demo has them), and Local AI off.
fn next_steps(solution: &SolutionLocation, demo: bool) -> String {
    let shown = solution.to_string();
    let at = shlex::try_quote(&shown).map_or_else(|_| shown.clone(), |quoted| quoted.into_owned());
    let mut lines = String::from("next:\n");
    let mut step = |command: String, why: &str| {
        lines.push_str(&format!("  # {why}\n  {command}\n"));
    };
    if !demo {
        step(
            format!("tserver users {at} add NAME --role operator"),
            "a login (password on standard input; --no-password for none)",
        );
        step(
            format!("tserver plant {at} import plant.toml"),
            "your plant (docs/PLANT.md), or `init --demo` for the demo's",
        );
        step(
            format!("tserver settings {at} set ModelOptions 0x9e"),
            "the assistant's runtime tools (UNS, alarms, history)",
        );
    }
    step(
        format!("tserver settings {at} set URL http://localhost:11434/v1/chat/completions"),
        "the model (any OpenAI-compatible endpoint)",
    );
    step(
        format!("tserver settings {at} set Name qwen2.5:7b-instruct"),
        "the model's name at that endpoint",
    );
    step(
        format!("tserver settings {at} set ModelEnabled true"),
        "Local AI on (off until then)",
    );
    if !demo {
        step(
            format!("tserver settings {at} set SimulatorEnabled on"),
            "move the plant's simulated tags while serving",
        );
    }
    step(
        format!("tserver serve {at}"),
        "serve display clients on 127.0.0.1:3101",
    );
    if let SolutionLocation::File(_) = solution {
        step(
            format!("tserver-demo --solution {at}"),
            "or: chat with it now through the built-in rule-based model",
        );
    }
    lines
}

/// A new solution file, with the demo plant and its seeded history when `demo`.
fn create_file_solution(path: &std::path::Path, demo: bool) -> anyhow::Result<()> {
    Store::create_file(path, demo)?;
    if demo {
        Runtime::open(path)?.seed_history(DEMO_HISTORY_SPAN, DEMO_HISTORY_STEP)?;
    }
    Ok(())
}
