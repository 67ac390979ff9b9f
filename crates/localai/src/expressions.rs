//! The expression resolver for `{Tag.X}` in the endpoint URL: each expression is replaced by
//! the tag's current value as text, inserted as is (so a tag may hold a host, a port or a
//! path segment).

use std::sync::LazyLock;

use crate::Solution;

/// Why an expression could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpressionError {
    /// No tag of that name.
    #[error("unknown tag '{0}' in {{Tag.{0}}}")]
    UnknownTag(String),
    /// `{Tag.` without a closing brace, or with an empty name.
    #[error("malformed tag expression near '{0}'")]
    Malformed(String),
}

const OPEN: &str = "{Tag.";

/// Finds [`OPEN`]: built once, as every POST's URL is searched for it.
static OPEN_FINDER: LazyLock<memchr::memmem::Finder<'static>> =
    LazyLock::new(|| memchr::memmem::Finder::new(OPEN));

/// Replaces every `{Tag.Name}` in `text` with the tag's value.
pub fn resolve_tag_expressions(text: &str, solution: &dyn Solution) -> Result<String, ExpressionError> {
    let mut resolved = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = OPEN_FINDER.find(rest.as_bytes()) {
        resolved.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        let Some(end) = after.find('}') else {
            return Err(ExpressionError::Malformed(truncate(&rest[start..])));
        };
        let name = after[..end].trim();
        if name.is_empty() {
            return Err(ExpressionError::Malformed(truncate(&rest[start..])));
        }
        let value = solution
            .tag_text(name)
            .ok_or_else(|| ExpressionError::UnknownTag(name.to_owned()))?;
        resolved.push_str(&value);
        rest = &after[end + 1..];
    }
    resolved.push_str(rest);
    Ok(resolved)
}

fn truncate(text: &str) -> String {
    text.chars().take(32).collect()
}
