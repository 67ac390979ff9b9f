//! The `tserver` command line: serve a solution, create one, and administer it. The clap
//! types of the commands and the dispatch live here; each command family has its own module.
//!
//! Admin commands open the solution file directly and work while a server runs on it.

mod ai_execute;
mod alarms;
mod audit;
mod eval;
mod history;
mod init;
mod input;
mod logging;
mod plant;
mod plant_folder;
mod scripts;
mod secrets;
mod serve;
mod settings;
mod signals;
mod solution;
mod sources;
mod tokens;
mod users;

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

pub use self::ai_execute::{AiExecuteArgs, ai_execute};
pub use self::alarms::{AlarmsCommand, ReportFormat};
use self::audit::parse_since;
pub use self::audit::{AuditCommand, ExportFormat};
pub use self::eval::{BadInput, EvalArgs, eval_command, eval_exit_code};
pub use self::history::HistoryCommand;
use self::input::{read_first_line, read_hidden, read_password};
pub use self::logging::{LogFormat, log_filter, log_layer};
pub use self::plant::PlantAction;
pub use self::scripts::ScriptsAction;
pub use self::secrets::SecretsAction;
pub use self::serve::{RESERVED_OPEN_FILES, ServeArgs, serve, serve_on};
pub use self::settings::SettingsAction;
pub use self::solution::{SolutionAction, SolutionArg};
pub use self::sources::SourcesAction;
pub use self::tokens::TokensAction;
pub use self::users::UsersAction;
use crate::own_runtime::on_own_runtime;
use store::SolutionLocation;

/// TServer: the runtime server of the automation platform, with its Local AI assistant.
#[derive(Debug, Parser)]
#[command(name = "tserver", version, about)]
pub struct Cli {
    /// How log lines are written (to stderr, filtered by RUST_LOG): text for people, or json,
    /// one object a line with the spans' fields (a connection's guid, a call's call_id).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The `tserver` subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve display clients on a solution until SIGINT or SIGTERM.
    Serve(Box<ServeArgs>),
    /// Create a new solution file.
    Init {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// Add the demo plant and a passwordless `guest` user.
        #[arg(long)]
        demo: bool,
        /// For a `postgres://` solution without TSERVER_SECRETS_KEY set: where to write its new
        /// secrets key (default: `DATABASE.key` in the current directory). A solution file
        /// keeps its key beside it.
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
    },
    /// Read or change the Local AI settings (works while a server runs).
    Settings {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// The action.
        #[command(subcommand)]
        action: SettingsAction,
    },
    /// Manage the secrets that `/secret:<Name>` tokens refer to (values are write-only).
    Secrets {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// The action.
        #[command(subcommand)]
        action: SecretsAction,
    },
    /// Run one atomic Local AI call in process, as a server script's `TK.AIExecute` does, and
    /// print the reply envelope JSON on one line.
    AiExecute(AiExecuteArgs),
    /// Ask the solution's model the questions of a questions file, each several times, with the
    /// plant live, and report how well it answered (exit 0: every case reached its pass rate,
    /// 1: one did not, 2: bad input).
    Eval(EvalArgs),
    /// Manage the users who may log in (works while a server runs).
    Users {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// The action.
        #[command(subcommand)]
        action: UsersAction,
    },
    /// Print the audit trail: every tag write and alarm acknowledgement clients asked for
    /// (kept `AuditRetentionDays`, 365 by default; `export` saves it before it is pruned).
    Audit {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// Only entries since then: a time (RFC 3339, e.g. 2026-11-23T08:00:00Z) or an age
        /// (e.g. 2h, 30min).
        #[arg(long, value_parser = parse_since, global = true)]
        since: Option<std::time::SystemTime>,
        /// At most this many entries (the oldest first; `export` has no limit).
        #[arg(long, default_value_t = 1000)]
        limit: usize,
        /// `export`: every entry (since `--since`) as CSV or JSON lines on standard output.
        #[command(subcommand)]
        action: Option<AuditCommand>,
    },
    /// Report how the alarm system performs (`report`): EEMUA 191's indicators over a window
    /// of the alarm history.
    Alarms {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// The action.
        #[command(subcommand)]
        action: AlarmsCommand,
    },
    /// Export the history the solution keeps (`export`), before `HistoryRetentionHours`
    /// prunes it.
    History {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// The action.
        #[command(subcommand)]
        action: HistoryCommand,
    },
    /// Import, export or show the plant model: folders, equipment, tags and alarms (a running
    /// server picks an import up within about a second).
    Plant {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// The action.
        #[command(subcommand)]
        action: PlantAction,
    },
    /// The plant's sources (MQTT brokers, Modbus devices, OPC UA servers): those the plant file
    /// declares, what the running server's connections to them report, and an OPC UA server's
    /// certificate and address space.
    Sources {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// The action.
        #[command(subcommand)]
        action: SourcesAction,
    },
    /// API tokens for the HTTP surface (RuntimeMCP): each acts as a user, with that user's role.
    Tokens {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// The action.
        #[command(subcommand)]
        action: TokensAction,
    },
    /// Solution scripts (Rhai): tasks, tag and alarm callbacks, and classes, run in the server.
    Scripts {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// The action.
        #[command(subcommand)]
        action: ScriptsAction,
    },
    /// Make TLS certificates: a private CA and a server certificate it signed.
    Tls {
        /// The action.
        #[command(subcommand)]
        action: crate::certificates::TlsAction,
    },
    /// Move a whole solution between a SQLite file and a PostgreSQL database.
    Solution {
        /// The action.
        #[command(subcommand)]
        action: SolutionAction,
    },
}

impl Command {
    /// The solution the command works on, for the commands that take one (given first or as
    /// `--solution`).
    pub fn solution(&self) -> Option<anyhow::Result<SolutionLocation>> {
        let solution = match self {
            Self::Serve(args) => &args.solution,
            Self::Init { solution, .. }
            | Self::Settings { solution, .. }
            | Self::Secrets { solution, .. }
            | Self::Users { solution, .. }
            | Self::Audit { solution, .. }
            | Self::History { solution, .. }
            | Self::Alarms { solution, .. }
            | Self::Plant { solution, .. }
            | Self::Sources { solution, .. }
            | Self::Tokens { solution, .. }
            | Self::Scripts { solution, .. } => solution,
            Self::AiExecute(args) => return Some(args.solution_and_query().map(|(solution, _)| solution)),
            Self::Eval(args) => return Some(args.solution_and_questions().map(|(solution, _)| solution)),
            Self::Tls { .. } | Self::Solution { .. } => return None,
        };
        Some(solution.location().cloned())
    }
}

/// Runs an admin command (everything but `serve`), reading secrets from `input` and writing
/// results to `output`; `input` is no terminal, so nothing is confirmed by a person.
pub fn run_admin(command: &Command, input: &mut dyn BufRead, output: &mut dyn Write) -> anyhow::Result<()> {
    run_admin_at(command, (input, false), output)
}

/// [`run_admin`] with `input` from a terminal or not (`terminal`): a person there may be asked
/// to confirm what only a person should (trusting a server's certificate).
pub fn run_admin_at(
    command: &Command,
    (input, terminal): (&mut dyn BufRead, bool),
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    match command {
        Command::Serve(_) | Command::AiExecute(_) | Command::Eval(_) => bail!("not an admin command"),
        Command::Init {
            solution,
            demo,
            key_file,
        } => init::init_command(solution.location()?, *demo, key_file.as_deref(), output),
        Command::Settings { solution, action } => {
            let solution = solution.location()?;
            let lines = on_own_runtime(|| settings::settings_command(solution, action))?;
            Ok(output.write_all(lines.as_bytes())?)
        }
        Command::Secrets { solution, action } => {
            let solution = solution.location()?;
            // The value is read here, before the store is: standard input is this thread's.
            let value = match action {
                SecretsAction::Set { .. } => Some(read_first_line(input, "secret value", "")?),
                SecretsAction::List | SecretsAction::Remove { .. } => None,
            };
            let lines = on_own_runtime(|| secrets::secrets_command(solution, action, value.as_deref()))?;
            Ok(output.write_all(lines.as_bytes())?)
        }
        Command::Plant { solution, action } => plant::plant_command(solution.location()?, action, output),
        Command::History { solution, action } => {
            history::history_command(solution.location()?, action, output)
        }
        Command::Alarms { solution, action } => alarms::alarms_command(solution.location()?, action, output),
        Command::Sources {
            solution,
            action:
                SourcesAction::Trust {
                    source,
                    thumbprint: None,
                },
        } => sources::trust_confirmed(solution.location()?, source, (input, terminal), output),
        Command::Sources { solution, action } => {
            let solution = solution.location()?;
            let lines = on_own_runtime(|| sources::sources_command(solution, action))?;
            Ok(output.write_all(lines.as_bytes())?)
        }
        Command::Tokens { solution, action } => {
            let solution = solution.location()?;
            let lines = on_own_runtime(|| tokens::tokens_command(solution, action))?;
            Ok(output.write_all(lines.as_bytes())?)
        }
        Command::Scripts { solution, action } => {
            Ok(scripts::scripts_command(solution.location()?, action, output)?)
        }
        Command::Tls { action } => Ok(crate::certificates::tls_command(action, output)?),
        Command::Solution { action } => solution::solution_command(action, output),
        Command::Audit {
            solution,
            since,
            limit,
            action,
        } => audit::audit_command(solution.location()?, *since, *limit, action.as_ref(), output),
        Command::Users { solution, action } => {
            let solution = solution.location()?;
            // The password is read here, before the store is: standard input is this thread's.
            let password = match action {
                UsersAction::Add { no_password, .. } | UsersAction::Passwd { no_password, .. } => {
                    read_password(*no_password, input)?
                }
                UsersAction::Role { .. } | UsersAction::Remove { .. } | UsersAction::List => None,
            };
            let lines = on_own_runtime(|| users::users_command(solution, action, password.as_deref()))?;
            Ok(output.write_all(lines.as_bytes())?)
        }
    }
}

/// Whether `error` is standard output's reader having gone away (a closed pipe).
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The whole `tserver` program: parses the command line, sets up logging on stderr (filtered by
/// `RUST_LOG`, default `info`) and runs the command. `serve` stops gracefully on SIGINT or
/// SIGTERM. The exit status is 0, or `eval`'s (1: a case failed, 2: bad input); an error
/// exits 1. A reader that stops reading (`tserver audit PATH export | head`) ends the command
/// quietly with 0, as a program ended by SIGPIPE would: nothing went wrong here.
pub fn main() -> anyhow::Result<ExitCode> {
    match run() {
        Err(error) if is_broken_pipe(&error) => Ok(ExitCode::SUCCESS),
        ran => ran,
    }
}

fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    tracing_subscriber::registry()
        .with(log_filter(std::env::var("RUST_LOG").ok().as_deref()))
        .with(log_layer(
            cli.log_format,
            std::io::stderr,
            std::io::stderr().is_terminal(),
        ))
        .init();

    match &cli.command {
        Command::Serve(args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            runtime.block_on(async {
                let shutdown = CancellationToken::new();
                tokio::spawn(signals::cancel_on_signal(shutdown.clone()));
                serve(args, shutdown).await
            })?;
            Ok(ExitCode::SUCCESS)
        }
        // Unlocked: the evaluation's own threads write progress and logs to stderr meanwhile.
        Command::Eval(args) => Ok(eval_exit_code(
            args,
            &mut std::io::stdout(),
            &mut std::io::stderr(),
        )),
        Command::AiExecute(args) => {
            let (solution, query) = args.solution_and_query()?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            let envelope = runtime.block_on(ai_execute(&solution, query))?;
            writeln!(std::io::stdout().lock(), "{envelope}")?;
            Ok(ExitCode::SUCCESS)
        }
        command => {
            let prompt = match command {
                Command::Users {
                    action:
                        UsersAction::Add {
                            name,
                            no_password: false,
                            ..
                        }
                        | UsersAction::Passwd {
                            name,
                            no_password: false,
                        },
                    ..
                } => Some(format!("password of {name}: ")),
                Command::Secrets {
                    action: SecretsAction::Set { name },
                    ..
                } => Some(format!("value of secret {name}: ")),
                _ => None,
            };
            let ran = match prompt {
                // On a terminal the value is typed without echo; piped in, it is the first line.
                Some(prompt) if std::io::stdin().is_terminal() => {
                    let typed = read_hidden(&prompt)?;
                    run_admin(
                        command,
                        &mut std::io::Cursor::new(format!("{typed}\n")),
                        &mut std::io::stdout().lock(),
                    )
                }
                _ => run_admin_at(
                    command,
                    (&mut std::io::stdin().lock(), std::io::stdin().is_terminal()),
                    &mut std::io::stdout().lock(),
                ),
            };
            ran.map(|()| ExitCode::SUCCESS)
        }
    }
}
