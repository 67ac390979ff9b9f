//! `tserver scripts PATH add|update|remove|list|show|enable|disable|status`: scripts stored in
//! the solution, each compiled before it is stored (a syntax error names its line and column).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Subcommand;
use solution_scripts::Trigger;

use crate::own_runtime::on_own_runtime;
use plant::Runtime;
use plant::scripts::{run_once, unreachable_in};
use store::{ScriptRun, ServeLock, SolutionError, SolutionLocation, Store};

/// `tserver scripts` actions.
#[derive(Debug, Subcommand)]
pub enum ScriptsAction {
    /// Store a new script (compiled first).
    Add {
        /// Its name: a letter or '_' then letters, digits or '_' (classes are imported by it).
        name: String,
        /// The Rhai source file.
        #[arg(long, value_name = "F.rhai")]
        file: PathBuf,
        /// When it runs: startup, every:<duration>, tag:<name>, alarm:<name>, alarm:* or class.
        #[arg(long, value_parser = parse_trigger)]
        trigger: Trigger,
    },
    /// Change a script's source, trigger or both (a running server takes it up at once).
    Update {
        /// The script.
        name: String,
        /// The new Rhai source file.
        #[arg(long, value_name = "F.rhai")]
        file: Option<PathBuf>,
        /// The new trigger.
        #[arg(long, value_parser = parse_trigger)]
        trigger: Option<Trigger>,
    },
    /// Remove a script and its run record.
    Remove {
        /// The script.
        name: String,
    },
    /// Every script: name, trigger, enabled or not.
    List,
    /// A script's trigger and source.
    Show {
        /// The script.
        name: String,
    },
    /// Let a script's trigger fire again.
    Enable {
        /// The script.
        name: String,
    },
    /// Stop a script's trigger from firing (its source stays).
    Disable {
        /// The script.
        name: String,
    },
    /// Each script's runs: count, failures, skipped triggers, and the last run's time,
    /// duration, outcome and error.
    Status,
    /// Run a script once (its top level, with `event.trigger` "run") in the tserver serving the
    /// solution, or here against the solution file when none serves it; print which, and how
    /// the run ended.
    Run {
        /// The script.
        name: String,
        /// Seconds to wait for a serving tserver to take the run and finish it.
        #[arg(long, default_value_t = 30)]
        wait_secs: u64,
    },
}

fn parse_trigger(text: &str) -> Result<Trigger, String> {
    text.parse()
        .map_err(|error: solution_scripts::TriggerError| error.to_string())
}

/// A script's switch, as listed.
fn state(enabled: bool) -> &'static str {
    if enabled { "enabled" } else { "disabled" }
}

fn read_source(file: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(file).with_context(|| format!("cannot read the script file {}", file.display()))
}

/// Runs a `tserver scripts` action on the solution at `location`.
pub(super) fn scripts_command(
    location: &SolutionLocation,
    action: &ScriptsAction,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let said = match (action, location) {
        (ScriptsAction::Run { name, wait_secs }, SolutionLocation::File(path)) => {
            match ServeLock::acquire_for_script_run(path, name) {
                Ok(_lock) => run_here(path, name)?,
                Err(SolutionError::AlreadyServed { holder, .. }) => {
                    let place = format!("in the serving tserver ({holder})");
                    on_own_runtime(|| run_in_server(location, name, place, *wait_secs))?
                }
                Err(error) => return Err(error.into()),
            }
        }
        (ScriptsAction::Run { name, wait_secs }, SolutionLocation::Postgres(_)) => {
            let place = "on the leading tserver node".to_owned();
            on_own_runtime(|| run_in_server(location, name, place, *wait_secs))?
        }
        _ => on_own_runtime(|| stored_scripts_command(location, action))?,
    };
    output.write_all(said.as_bytes())?;
    Ok(())
}

/// Every action but `run`: what it says.
async fn stored_scripts_command(
    location: &SolutionLocation,
    action: &ScriptsAction,
) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    let store = Store::open(location).await?;
    let mut output = String::new();
    match action {
        ScriptsAction::Add { name, file, trigger } => {
            refuse_unreachable(&store, trigger).await?;
            let script = store.add_script(name, trigger, &read_source(file)?).await?;
            writeln!(output, "added script {} ({})", script.name, script.trigger)?;
        }
        ScriptsAction::Update { name, file, trigger } => {
            anyhow::ensure!(
                file.is_some() || trigger.is_some(),
                "nothing to change: give --file, --trigger or both"
            );
            if let Some(trigger) = trigger {
                refuse_unreachable(&store, trigger).await?;
            }
            let source = file.as_deref().map(read_source).transpose()?;
            let script = store
                .update_script(name, trigger.as_ref(), source.as_deref())
                .await?;
            writeln!(output, "updated script {} ({})", script.name, script.trigger)?;
        }
        ScriptsAction::Remove { name } => {
            let script = store.remove_script(name).await?;
            writeln!(output, "removed script {}", script.name)?;
        }
        ScriptsAction::List => {
            let scripts = store.scripts().await?;
            if scripts.is_empty() {
                writeln!(output, "no scripts")?;
            }
            for script in scripts {
                let state = state(script.enabled);
                writeln!(output, "{}  {}  {state}", script.name, script.trigger)?;
            }
        }
        ScriptsAction::Show { name } => {
            let script = store
                .script(name)
                .await?
                .with_context(|| format!("no script named {name:?}"))?;
            let state = state(script.enabled);
            writeln!(output, "// {} ({}, {state})", script.name, script.trigger)?;
            writeln!(output, "{}", script.source.trim_end())?;
        }
        ScriptsAction::Enable { name } | ScriptsAction::Disable { name } => {
            let enabled = matches!(action, ScriptsAction::Enable { .. });
            let script = store.set_script_enabled(name, enabled).await?;
            let state = state(script.enabled);
            writeln!(output, "script {} is {state}", script.name)?;
        }
        ScriptsAction::Run { .. } => anyhow::bail!("a run is not a stored-scripts action"),
        ScriptsAction::Status => {
            let records = store.script_records().await?;
            if records.is_empty() {
                writeln!(output, "no scripts")?;
            }
            let plant = store.plant_definitions().await?;
            for record in records {
                let unreachable = record
                    .trigger
                    .parse::<Trigger>()
                    .ok()
                    .and_then(|trigger| unreachable_in(&trigger, &plant))
                    .map(|why| format!("  ({why})"))
                    .unwrap_or_default();
                let state = state(record.enabled);
                let last = record.last.map_or_else(
                    || "never run".to_owned(),
                    |run| {
                        let error = run.error.map(|error| format!(": {error}")).unwrap_or_default();
                        format!(
                            "last {} took {:.1} ms, {}{error}",
                            localai::iso8601_millis(run.started_at),
                            run.duration.as_secs_f64() * 1000.0,
                            run.outcome
                        )
                    },
                );
                writeln!(
                    output,
                    "{}  {}  {state}  runs {}  failures {}  skipped {}  {last}{unreachable}",
                    record.name, record.trigger, record.runs, record.failures, record.skipped
                )?;
            }
        }
    }
    Ok(output)
}

/// Refuses a trigger that can never fire on the stored plant.
async fn refuse_unreachable(store: &Store, trigger: &Trigger) -> anyhow::Result<()> {
    let plant = store.plant_definitions().await?;
    match unreachable_in(trigger, &plant) {
        Some(why) => anyhow::bail!("{why}; the script was not stored"),
        None => Ok(()),
    }
}

/// The scripts whose trigger `plant` would leave unable to fire, each as a sentence: what an
/// import tells before (or instead of) changing the plant under them.
pub(super) async fn stranded_by(
    store: &Store,
    plant: &plant_model::ExpandedPlant,
) -> anyhow::Result<Vec<String>> {
    Ok(store
        .scripts()
        .await?
        .into_iter()
        .filter_map(|script| {
            unreachable_in(&script.trigger, plant).map(|why| format!("script {}: {why}", script.name))
        })
        .collect())
}

/// How often `run` looks for the run's record.
const RUN_POLL: Duration = Duration::from_millis(100);

/// Runs `name` in this process against the solution file at `path` (its stored plant, its
/// model settings), on a runtime of its own: the caller holds the solution's lock.
fn run_here(path: &Path, name: &str) -> anyhow::Result<String> {
    let (run, tally) = on_own_runtime(|| async {
        let solution = Runtime::open(path)?;
        Ok::<_, anyhow::Error>(run_once(&solution, name).await?)
    })?;
    let callbacks = match tally.runs.saturating_sub(1) {
        0 => String::new(),
        more => {
            let failed = tally.failures.saturating_sub(u64::from(run.error.is_some()));
            format!(" (then {more} ai_execute_async callback runs, {failed} failed)")
        }
    };
    let place = "here, against the solution file (no tserver serves it)";
    tell_run(name, place, run, &callbacks)
}

/// Prints how a run of `name` in `place` ended, or fails with its error.
fn tell_run(name: &str, place: &str, run: ScriptRun, more: &str) -> anyhow::Result<String> {
    let took = format!("{:.1} ms", run.duration.as_secs_f64() * 1000.0);
    match run.error {
        None => Ok(format!("ran {name} {place}: {} in {took}{more}\n", run.outcome)),
        Some(error) => {
            anyhow::bail!(
                "{name} ran {place} and stopped after {took} ({}): {error}{more}",
                run.outcome
            )
        }
    }
}

/// Asks the tserver serving the solution (`place` says which) to run `name` and waits for the
/// run's record.
async fn run_in_server(
    location: &SolutionLocation,
    name: &str,
    place: String,
    wait_secs: u64,
) -> anyhow::Result<String> {
    let store = Store::open(location).await?;
    let (script, requested_at) = store.request_script_run(name).await?;
    let deadline = Instant::now() + Duration::from_secs(wait_secs);
    loop {
        let record = store
            .script_records()
            .await?
            .into_iter()
            .find(|record| record.name.eq_ignore_ascii_case(&script.name));
        if let Some(run) = record
            .and_then(|record| record.last)
            .filter(|run| run.started_at >= requested_at)
        {
            return tell_run(&script.name, &place, run, "");
        }
        if Instant::now() >= deadline {
            store.withdraw_script_run(&script.name).await?;
            anyhow::bail!(
                "no run of {} was recorded within {wait_secs} s {place}",
                script.name
            );
        }
        tokio::time::sleep(RUN_POLL).await;
    }
}
