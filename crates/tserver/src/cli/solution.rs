//! The solution a command works on (a file or a `postgres://` URL, given first or as
//! `--solution`), and `tserver solution copy`, which moves a whole solution between the two.

use std::io::Write;

use anyhow::Context;
use clap::Subcommand;

use crate::own_runtime::on_own_runtime;
use store::{KEY_ENV, SolutionLocation, copy_solution, key_file};

/// Where an admin command's solution is: a file, or a `postgres://` URL; given first
/// (`tserver users plant.db list`) or as `--solution` (`tserver users --solution plant.db list`).
#[derive(Debug, Clone, clap::Args)]
pub struct SolutionArg {
    /// The solution: a file, or a `postgres://` URL (`init`: one to create).
    #[arg(
        value_name = "SOLUTION",
        required_unless_present = "solution",
        conflicts_with = "solution"
    )]
    at: Option<SolutionLocation>,
    /// The solution, as an option.
    #[arg(long = "solution", value_name = "SOLUTION")]
    solution: Option<SolutionLocation>,
}

impl SolutionArg {
    /// The location given.
    pub fn location(&self) -> anyhow::Result<&SolutionLocation> {
        self.at
            .as_ref()
            .or(self.solution.as_ref())
            .context("give the solution: a file or a postgres:// URL, first or as --solution")
    }
}

impl From<SolutionLocation> for SolutionArg {
    fn from(location: SolutionLocation) -> Self {
        Self {
            at: Some(location),
            solution: None,
        }
    }
}

/// `tserver solution` actions.
#[derive(Debug, Subcommand)]
pub enum SolutionAction {
    /// Copy a solution into a destination that holds none yet: a file into a database
    /// (`postgres://user@host/database`; the password from the URL, PGPASSWORD or ~/.pgpass),
    /// or a database into a new file. Secrets stay encrypted: the destination needs the same
    /// key (TSERVER_SECRETS_KEY, or the key file a copy out of a database writes from it).
    Copy {
        /// The solution to copy: a file or a `postgres://` URL.
        from: SolutionLocation,
        /// Where to copy it.
        to: SolutionLocation,
    },
}

/// Runs a `tserver solution` action.
pub(super) fn solution_command(action: &SolutionAction, output: &mut dyn Write) -> anyhow::Result<()> {
    let SolutionAction::Copy { from, to } = action;
    let report = on_own_runtime(|| copy_solution(from, to))?;
    for (table, rows) in &report.tables {
        writeln!(output, "{table}: {rows} rows")?;
    }
    writeln!(output, "copied {from} to {to}")?;
    if report.has_secrets {
        let key = match from {
            SolutionLocation::File(path) => key_file(path).display().to_string(),
            SolutionLocation::Postgres(_) => KEY_ENV.to_owned(),
        };
        writeln!(
            output,
            "the secrets are copied encrypted: every server of {to} needs the key of {key} ({KEY_ENV})"
        )?;
    }
    Ok(())
}
