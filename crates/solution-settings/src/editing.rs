//! What an editor can tell is wrong with a `ModelSettings` column before any call is made:
//! the admin command refuses a change that adds an issue.

use crate::headers::{decode_authorization, decode_headers};
use crate::{ModelSettings, SettingIssue, TOKEN_PREFIX, keys};

/// Everything wrong with a `ModelSettings` column that an editor can tell before any call:
/// the values [`ModelSettings::parse_checked`] would not use as given, a URL that is not
/// `http(s)` even with its `{Tag.X}` and `/secret:` tokens filled in, and an Authorization or
/// Headers value the decoder refuses. The admin command refuses a change that adds one.
pub fn editing_issues(raw: Option<&str>) -> Vec<SettingIssue> {
    let (settings, mut issues) = ModelSettings::parse_checked(raw);
    let has_issue = |key: &str| issues.iter().any(|issue| issue.key == key);
    if !has_issue(keys::URL) && !url_shape_is_valid(&settings.url) {
        issues.push(SettingIssue::new(
            keys::URL,
            "is not an http:// or https:// URL with a host; every call would fail",
        ));
    }
    // A secret may hold a whole line (`CustomAuth` + `/secret:HeaderLine`), so a line with a
    // token is judged as a plain header line; a scheme line with one cannot be judged at all.
    let scheme_has_token = settings
        .authorization
        .lines()
        .next()
        .is_some_and(|line| line.contains(TOKEN_PREFIX));
    if !scheme_has_token && let Err(error) = decode_authorization(&fill_secret_lines(&settings.authorization))
    {
        issues.push(SettingIssue::new(
            keys::AUTHORIZATION,
            format!("cannot be used: {error}"),
        ));
    }
    if let Err(error) = decode_headers(&fill_secret_lines(&settings.headers)) {
        issues.push(SettingIssue::new(
            keys::HEADERS,
            format!("cannot be used: {error}"),
        ));
    }
    issues
}

/// `text` with every line that holds a `/secret:` token replaced by a valid header line.
fn fill_secret_lines(text: &str) -> String {
    text.lines()
        .map(|line| {
            if line.contains(TOKEN_PREFIX) {
                "X-Secret: 0"
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `url` is an `http(s)` URL with a host once each `{...}` expression and
/// `/secret:<Name>` token stands for a plain value.
fn url_shape_is_valid(url: &str) -> bool {
    let mut filled = String::with_capacity(url.len());
    let mut rest = url;
    loop {
        let expression = rest.find('{');
        let token = rest.find(TOKEN_PREFIX);
        let (start, end) = match (expression, token) {
            (Some(open), token) if token.is_none_or(|token| open < token) => {
                let Some(close) = rest[open..].find('}') else {
                    break;
                };
                (open, open + close + 1)
            }
            (_, Some(token)) => {
                let name = &rest[token + TOKEN_PREFIX.len()..];
                let name_len = name
                    .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
                    .unwrap_or(name.len());
                (token, token + TOKEN_PREFIX.len() + name_len)
            }
            _ => break,
        };
        filled.push_str(&rest[..start]);
        filled.push('0');
        rest = &rest[end..];
    }
    filled.push_str(rest);
    url::Url::parse(filled.trim())
        .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editing_issues_catch_what_every_call_would_trip_on() {
        let issues = |raw: &str| -> Vec<&'static str> {
            editing_issues(Some(raw)).iter().map(|issue| issue.key).collect()
        };
        assert!(issues(r#"{"URL": "http://{Tag.Host}:8080/v1/chat/completions?key=/secret:K"}"#).is_empty());
        assert!(issues(r#"{"URL": "https://api.example.com/v1/chat/completions"}"#).is_empty());
        assert_eq!(issues(r#"{"URL": "ftp://x/y"}"#), ["URL"]);
        assert_eq!(issues(r#"{"URL": "localhost:11434"}"#), ["URL"]);
        assert_eq!(issues(r#"{"Authorization": "Bearer\nabc"}"#), ["Authorization"]);
        assert!(issues(r#"{"Authorization": "BearerToken\n/secret:Key"}"#).is_empty());
        assert_eq!(issues(r#"{"Headers": "no colon here"}"#), ["Headers"]);
        // A secret may be a whole header line; the lines around it are still judged.
        assert!(issues(r#"{"Authorization": "CustomAuth\n/secret:HeaderLine"}"#).is_empty());
        assert!(issues(r#"{"Headers": "/secret:Line\nX-A: 1"}"#).is_empty());
        assert_eq!(issues(r#"{"Headers": "/secret:Line\nbad"}"#), ["Headers"]);
        assert_eq!(
            issues(r#"{"Authorization": "Kerberos\n/secret:Ticket"}"#),
            ["Authorization"]
        );
    }
}
