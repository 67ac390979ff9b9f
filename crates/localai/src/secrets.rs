//! The secret resolver: `/secret:<Name>` tokens in URL, Authorization and Headers are replaced
//! by the solution's secret values at call time, server-side only.
//!
//! Values never travel further than the outgoing request: every error names the secret, never
//! its value, and [`Redactions`] scrubs any value a remote server echoes back (in an error body,
//! say) out of the warnings before they reach an envelope or a log.

use std::fmt;

use crate::{Solution, SolutionError};

/// The token that introduces a secret reference.
pub const TOKEN_PREFIX: &str = "/secret:";

/// A secret value. Its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    /// Wraps a value read from the solution's secret store.
    pub fn new(value: String) -> Self {
        Self(value)
    }

    /// The value itself, for building the outgoing request only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretValue(<redacted>)")
    }
}

/// Why a secret token could not be resolved. Never carries a value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SecretError {
    /// No secret of that name.
    #[error("secret '{0}' is not defined in the solution (tserver secrets PATH set {0})")]
    Missing(String),
    /// A `/secret:` token with no name after it.
    #[error("a '/secret:' token has no name after it")]
    EmptyName,
    /// The store failed.
    #[error("secret '{name}' could not be read: {reason}")]
    Unreadable {
        /// The secret's name.
        name: String,
        /// What failed (never the value).
        reason: String,
    },
}

/// The secret values resolved during one call, to scrub from any text that leaves the call.
#[derive(Default)]
pub struct Redactions {
    /// (value, the token that stands for it)
    values: Vec<(String, String)>,
}

impl fmt::Debug for Redactions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactions({} values)", self.values.len())
    }
}

impl Redactions {
    /// Replaces every resolved secret value in `text` by its token.
    pub fn scrub(&self, text: &str) -> String {
        let mut scrubbed = text.to_owned();
        for (value, token) in &self.values {
            if !value.is_empty() && scrubbed.contains(value.as_str()) {
                scrubbed = scrubbed.replace(value.as_str(), token);
            }
        }
        scrubbed
    }

    fn remember(&mut self, value: &str, name: &str) {
        if !self.values.iter().any(|(known, _)| known == value) {
            self.values
                .push((value.to_owned(), format!("{TOKEN_PREFIX}{name}")));
            // Longest first, so a value containing another is replaced whole.
            self.values
                .sort_by_key(|(value, _)| std::cmp::Reverse(value.len()));
        }
    }
}

/// Whether a character may be part of a secret name.
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// Resolves every `/secret:<Name>` token in `text`, remembering the values in `redactions`.
pub fn resolve_secrets(
    text: &str,
    solution: &dyn Solution,
    redactions: &mut Redactions,
) -> Result<String, SecretError> {
    let mut resolved = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(TOKEN_PREFIX) {
        resolved.push_str(&rest[..start]);
        let after = &rest[start + TOKEN_PREFIX.len()..];
        let name_len = after.find(|c: char| !is_name_char(c)).unwrap_or(after.len());
        let name = &after[..name_len];
        if name.is_empty() {
            return Err(SecretError::EmptyName);
        }
        let value = match solution.secret(name) {
            Ok(Some(value)) => value,
            Ok(None) => return Err(SecretError::Missing(name.to_owned())),
            Err(SolutionError(reason)) => {
                return Err(SecretError::Unreadable {
                    name: name.to_owned(),
                    reason,
                });
            }
        };
        redactions.remember(value.expose(), name);
        resolved.push_str(value.expose());
        rest = &after[name_len..];
    }
    resolved.push_str(rest);
    Ok(resolved)
}
