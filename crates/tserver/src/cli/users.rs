//! `tserver users`: the users who may log in, and their roles.

use clap::Subcommand;

use store::{SolutionLocation, Store};

/// `tserver users` actions.
#[derive(Debug, Subcommand)]
pub enum UsersAction {
    /// Add a user; the password is read from the first line of standard input.
    Add {
        /// The user name.
        name: String,
        /// Create a passwordless user (logs in with an empty password).
        #[arg(long)]
        no_password: bool,
        /// `viewer` (reads and chats), `operator` (also writes writable tags and acknowledges
        /// alarms) or `admin`.
        #[arg(long, default_value = "viewer", value_parser = parse_role)]
        role: store::Role,
    },
    /// Change a user's role (the user's sessions end within about a second).
    Role {
        /// The user name.
        name: String,
        /// `viewer`, `operator` or `admin`.
        #[arg(value_parser = parse_role)]
        role: store::Role,
    },
    /// Change a user's password, read from the first line of standard input.
    Passwd {
        /// The user name.
        name: String,
        /// Make the user passwordless.
        #[arg(long)]
        no_password: bool,
    },
    /// Remove a user.
    Remove {
        /// The user name.
        name: String,
    },
    /// List users (names only, never hashes).
    List,
}

fn parse_role(text: &str) -> Result<store::Role, String> {
    store::Role::parse(text).ok_or_else(|| format!("{text:?} is not a role: viewer, operator or admin"))
}

/// `tserver users`, on either backend, with the password already read; returns what it prints.
pub(super) async fn users_command(
    solution: &SolutionLocation,
    action: &UsersAction,
    password: Option<&str>,
) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    let store = Store::open(solution).await?;
    let mut lines = String::new();
    match action {
        UsersAction::Add { name, role, .. } => {
            store.add_user(name, password, *role).await?;
            writeln!(lines, "added user {name} ({})", role.as_str())?;
        }
        UsersAction::Role { name, role } => {
            store.set_role(name, *role).await?;
            writeln!(lines, "{name} is now {}", role.as_str())?;
        }
        UsersAction::Passwd { name, .. } => {
            store.set_password(name, password).await?;
            writeln!(lines, "changed the password of {name}")?;
        }
        UsersAction::Remove { name } => {
            store.remove_user(name).await?;
            writeln!(lines, "removed user {name}")?;
        }
        UsersAction::List => {
            for user in store.users().await? {
                let kind = if user.password_hash.is_some() {
                    ""
                } else {
                    " (passwordless)"
                };
                writeln!(lines, "{} {}{kind}", user.name, user.role.as_str())?;
            }
        }
    }
    Ok(lines)
}
