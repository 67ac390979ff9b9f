//! Secret values and the `/secret:<Name>` token that refers to one: what the store keeps
//! encrypted and the calls resolve, never shown by `Debug`.

use std::fmt;

/// The token that introduces a secret reference.
pub const TOKEN_PREFIX: &str = "/secret:";

/// A secret value. Its `Debug` never shows it, and it has no `Display`.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let secret = SecretValue::new("sk-live-1234".to_owned());
        assert_eq!(format!("{secret:?}"), "SecretValue(<redacted>)");
        assert_eq!(secret.expose(), "sk-live-1234");
    }
}
