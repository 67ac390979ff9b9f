//! `tserver eval SOLUTION QUESTIONS.toml`: the solution's questions asked of its own model
//! through the chat path, with the plant live as `serve` runs it (docs/EVAL.md).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use tokio_util::sync::CancellationToken;

use super::serve::LivePlant;
use crate::eval::{EVAL_USER, EvalReport, evaluate, questions::MAX_RUNS, read_questions};
use plant::Runtime;
use store::{ServeLock, SolutionError, SolutionLocation};

/// `tserver eval SOLUTION QUESTIONS.toml [--runs N] [--json]`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The solution, as an option.
    #[arg(long = "solution", value_name = "SOLUTION")]
    solution: Option<SolutionLocation>,
    /// The solution (unless given as --solution), then the questions file (TOML): the cases
    /// and what a good answer to each needs.
    #[arg(value_name = "[SOLUTION] QUESTIONS.toml", num_args = 1..=2, required = true)]
    words: Vec<String>,
    /// Runs of each case (default: the file's `defaults.runs`, else 3).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_RUNS)))]
    pub runs: Option<u32>,
    /// Print one JSON document (docs/EVAL.md) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The user the questions are asked as (what proposals and transcripts name).
    #[arg(long, default_value = EVAL_USER)]
    pub user: String,
    /// Run the plant simulator (`on`/`off`); default: the solution's `SimulatorEnabled`.
    #[arg(long, value_name = "on|off", value_parser = super::serve::parse_switch)]
    pub simulator: Option<bool>,
}

impl EvalArgs {
    /// The solution and the questions file, from whichever form was given.
    pub fn solution_and_questions(&self) -> anyhow::Result<(SolutionLocation, PathBuf)> {
        match (&self.solution, self.words.as_slice()) {
            (Some(solution), [questions]) => Ok((solution.clone(), PathBuf::from(questions))),
            // Parsed here rather than by clap: which word is the solution depends on whether
            // --solution was given.
            (None, [solution, questions]) => {
                Ok((SolutionLocation::parse(solution)?, PathBuf::from(questions)))
            }
            (Some(_), _) => bail!("give the questions file once: the solution is already --solution"),
            (None, _) => {
                bail!("give the solution and the questions file: `tserver eval SOLUTION QUESTIONS.toml`")
            }
        }
    }
}

/// Why an evaluation could not be made: the input is bad (exit status 2).
#[derive(Debug)]
pub struct BadInput(pub anyhow::Error);

/// The exit status of `tserver eval`: 0 when every case reached its pass rate, 1 when one did
/// not, 2 when the questions file or the solution is unusable (said on `errors`).
pub fn eval_exit_code(args: &EvalArgs, output: &mut dyn Write, errors: &mut dyn Write) -> ExitCode {
    let evaluated = crate::own_runtime::on_own_runtime(|| async {
        Ok::<_, anyhow::Error>(
            eval_command(args, &mut |line| {
                let _ = writeln!(std::io::stderr(), "{line}");
            })
            .await,
        )
    });
    let report = match evaluated {
        Ok(Ok(report)) => report,
        Ok(Err(BadInput(error))) | Err(error) => {
            let _ = writeln!(errors, "error: {error:#}");
            return ExitCode::from(2);
        }
    };
    let printed = if args.json {
        writeln!(output, "{}", report.to_json())
    } else {
        write!(output, "{}", report.to_table())
    };
    if let Err(error) = printed {
        let _ = writeln!(errors, "error: cannot write the report: {error}");
        return ExitCode::from(2);
    }
    if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Opens the solution, reads the questions against its plant, starts the plant live and asks
/// every case; `progress` hears a line as each run ends.
#[crate::compiled_once]
pub async fn eval_command(
    args: &EvalArgs,
    progress: &mut (dyn FnMut(String) + Send),
) -> Result<EvalReport, BadInput> {
    let (solution, questions_file) = args.solution_and_questions().map_err(BadInput)?;
    let solution = &solution;
    // The plant runs as `serve` runs it, sources included (a second MQTT client under the
    // same id would take the server's place at the broker): a served file is refused.
    let _lock = match solution {
        SolutionLocation::File(path) if !path.exists() => {
            return Err(BadInput(
                anyhow::Error::new(SolutionError::NotFound(path.clone()))
                    .context(format!("cannot open solution {solution}")),
            ));
        }
        SolutionLocation::File(path) => Some(
            ServeLock::acquire(path, "no port (tserver eval)")
                .with_context(|| format!("cannot evaluate {solution}"))
                .map_err(BadInput)?,
        ),
        SolutionLocation::Postgres(_) => None,
    };
    let runtime = Runtime::open_at(solution)
        .await
        .with_context(|| format!("cannot open solution {solution}"))
        .map_err(BadInput)?;
    let file = questions_file.display().to_string();
    let text = crate::user_files::read_text_file(
        &questions_file,
        &file,
        "a questions file",
        crate::eval::MAX_QUESTIONS_FILE_BYTES,
    )
    .map_err(BadInput)?;
    let questions = read_questions(&text, &file, &runtime).map_err(|errors| BadInput(errors.into()))?;
    let settings = runtime
        .store()
        .settings_row()
        .await
        .with_context(|| format!("cannot read the Local AI settings of {solution}"))
        .map_err(BadInput)?;
    if !settings.model_enabled {
        return Err(BadInput(anyhow::anyhow!(
            "Local AI is off in {solution}, so every question would be answered `disabled`: \
             `tserver settings {solution} set ModelEnabled true` turns it on"
        )));
    }
    let runs = args.runs.unwrap_or(questions.runs);
    let shutdown = CancellationToken::new();
    let live = LivePlant::start(&runtime, args.simulator, &shutdown)
        .await
        .map_err(BadInput)?;
    let mut report = evaluate(&runtime, &questions, runs, &args.user, &mut |case, record| {
        progress(format!(
            "{} run {}/{runs}: {} in {} ms",
            case.name,
            record.run,
            if record.passed { "pass" } else { "fail" },
            record.latency_ms
        ));
    })
    .await;
    report.model = model_name(settings.model_settings.as_deref());
    shutdown.cancel();
    if let Err(error) = live.stopped(Duration::from_secs(5)).await {
        tracing::warn!(error = %format!("{error:#}"), "the plant did not stop cleanly");
    }
    Ok(report)
}

/// The model the solution names in its `ModelSettings` (`Name`), for the report's title.
fn model_name(model_settings: Option<&str>) -> Option<String> {
    let settings: serde_json::Value = serde_json::from_str(model_settings?).ok()?;
    settings
        .get(localai::settings::keys::NAME)?
        .as_str()
        .map(str::to_owned)
}
