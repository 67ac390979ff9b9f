//! `tserver secrets`: the secrets `/secret:<Name>` tokens refer to (values are write-only).

use clap::Subcommand;

use store::{SolutionLocation, Store};

/// `tserver secrets` actions.
#[derive(Debug, Subcommand)]
pub enum SecretsAction {
    /// Store a secret; the value is read from the first line of standard input.
    Set {
        /// The name used in `/secret:<Name>` tokens.
        name: String,
    },
    /// List secret names (never values).
    List,
    /// Remove a secret.
    Remove {
        /// The name.
        name: String,
    },
}

/// `tserver secrets`, on either backend, with the value already read; returns what it prints.
pub(super) async fn secrets_command(
    solution: &SolutionLocation,
    action: &SecretsAction,
    value: Option<&str>,
) -> anyhow::Result<String> {
    let store = Store::open(solution).await?;
    Ok(match action {
        SecretsAction::Set { name } => {
            store.set_secret(name, value.unwrap_or_default()).await?;
            format!("stored secret {name}\n")
        }
        SecretsAction::List => store
            .secret_names()
            .await?
            .iter()
            .map(|name| format!("{name}\n"))
            .collect(),
        SecretsAction::Remove { name } => {
            store.remove_secret(name).await?;
            format!("removed secret {name}\n")
        }
    })
}
