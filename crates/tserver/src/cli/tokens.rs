//! `tserver tokens`: API tokens for the HTTP surface, each acting as a user.

use clap::Subcommand;

use store::{SolutionLocation, Store};

/// `tserver tokens` actions.
#[derive(Debug, Subcommand)]
pub enum TokensAction {
    /// Make a token and print it, once: only a digest of it is stored.
    Create {
        /// The user it acts as.
        #[arg(long)]
        user: String,
        /// Days until it stops working (default: never).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=3650))]
        expires: Option<u32>,
        /// A label to recognise it by in `list` (and revoke it by).
        #[arg(long, default_value = "")]
        name: String,
    },
    /// Every token: id, label, user, when made and when it expires (never the token).
    List,
    /// Revoke a token by its id (or its label, when no other token has it); it stops working
    /// at its next use.
    Revoke {
        /// The token's id or label.
        token: String,
    },
}

/// Runs a `tserver tokens` action; returns what it prints.
pub(super) async fn tokens_command(
    solution: &SolutionLocation,
    action: &TokensAction,
) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    let store = Store::open(solution).await?;
    let mut output = String::new();
    let when = |time: std::time::SystemTime| localai::iso8601_millis(time);
    match action {
        TokensAction::Create { user, expires, name } => {
            let valid_for = expires.map(|days| std::time::Duration::from_secs(u64::from(days) * 86_400));
            let (token, text) = store.create_token(user, name, valid_for).await?;
            writeln!(output, "{text}")?;
            let until = token.expires_at.map_or_else(
                || "never expires".to_owned(),
                |time| format!("expires {}", when(time)),
            );
            eprintln!(
                "token {} for {} ({until}); it is shown only now: store it where it is needed",
                token.id, token.user
            );
        }
        TokensAction::List => {
            let tokens = store.tokens().await?;
            if tokens.is_empty() {
                writeln!(output, "no tokens")?;
            }
            for token in tokens {
                let until = token.expires_at.map_or_else(|| "never".to_owned(), when);
                let label = if token.name.is_empty() {
                    String::new()
                } else {
                    format!("  {:?}", token.name)
                };
                writeln!(
                    output,
                    "{}{label}  user {}  created {}  expires {until}",
                    token.id,
                    token.user,
                    when(token.created_at)
                )?;
            }
        }
        TokensAction::Revoke { token } => {
            let revoked = store.revoke_token(token).await?;
            writeln!(output, "revoked token {} of {}", revoked.id, revoked.user)?;
        }
    }
    Ok(output)
}
