//! The Authorization and Headers decoder: the single source of truth for their multi-line
//! formats (the spec's `ReportWebData.DecodeAuthorizationHeader`), for the calls that send the
//! headers and the editor that checks a setting alike.
//!
//! Authorization: line 1 is the scheme, the next lines its parts.
//! - `None` (or an empty value): no header.
//! - `BearerToken`: line 2 is the token, sent as `Authorization: Bearer <token>`.
//! - `BasicAuth`: line 2 the user, line 3 the password, sent as `Authorization: Basic <base64>`.
//! - `CustomAuth`: every further non-empty line is one `Header-Name: value`.
//!
//! Headers: one `Name: value` per non-empty line.
//!
//! Values may be resolved secrets, so no error here ever quotes a value: only line numbers,
//! scheme names and header names.

use base64::Engine;

/// One outgoing header.
pub type Header = (String, String);

/// Why an Authorization or Headers value could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Line 1 names no known scheme.
    #[error("unknown Authorization scheme '{0}' (expected None, BearerToken, BasicAuth or CustomAuth)")]
    UnknownScheme(String),
    /// A required line is missing or empty.
    #[error("Authorization {scheme} needs {what} on line {line}")]
    MissingPart {
        /// The scheme.
        scheme: &'static str,
        /// What the line holds.
        what: &'static str,
        /// The 1-based line number.
        line: usize,
    },
    /// A value holds a character no header may carry (a control character or non-ASCII).
    #[error("{field} line {line} holds a character a header value cannot carry (control or non-ASCII)")]
    BadHeaderValue {
        /// `Authorization` or `Headers`.
        field: &'static str,
        /// The 1-based line number.
        line: usize,
    },
    /// A header line is not `Name: value` with a valid name.
    #[error("{field} line {line} is not 'Name: value' with a valid header name")]
    BadHeaderLine {
        /// `Authorization` or `Headers`.
        field: &'static str,
        /// The 1-based line number.
        line: usize,
    },
}

/// Decodes the Authorization setting (after secret resolution) into headers.
pub fn decode_authorization(text: &str) -> Result<Vec<Header>, AuthError> {
    let lines: Vec<&str> = text.lines().map(|line| line.trim_end_matches('\r')).collect();
    let scheme = lines.first().map_or("", |line| line.trim());
    let part = |index: usize, scheme: &'static str, what: &'static str| -> Result<&str, AuthError> {
        lines
            .get(index)
            .map(|line| line.trim())
            .filter(|line| !line.is_empty())
            .ok_or(AuthError::MissingPart {
                scheme,
                what,
                line: index + 1,
            })
    };
    match scheme.to_ascii_lowercase().as_str() {
        "" | "none" => Ok(Vec::new()),
        "bearertoken" => {
            let token = part(1, "BearerToken", "the token")?;
            valid_value(token, "Authorization", 2)?;
            Ok(vec![("Authorization".to_owned(), format!("Bearer {token}"))])
        }
        "basicauth" => {
            let user = part(1, "BasicAuth", "the user name")?;
            // The password may legitimately be empty, but the line must exist.
            let password = lines
                .get(2)
                .map(|line| line.trim())
                .ok_or(AuthError::MissingPart {
                    scheme: "BasicAuth",
                    what: "the password",
                    line: 3,
                })?;
            let credentials = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            Ok(vec![("Authorization".to_owned(), format!("Basic {credentials}"))])
        }
        "customauth" => header_lines(&lines[1..], "Authorization", 2),
        _ => Err(AuthError::UnknownScheme(scheme.chars().take(40).collect())),
    }
}

/// Decodes the Headers setting (after secret resolution).
pub fn decode_headers(text: &str) -> Result<Vec<Header>, AuthError> {
    let lines: Vec<&str> = text.lines().map(|line| line.trim_end_matches('\r')).collect();
    header_lines(&lines, "Headers", 1)
}

fn header_lines(lines: &[&str], field: &'static str, first_line: usize) -> Result<Vec<Header>, AuthError> {
    let mut headers = Vec::new();
    for (offset, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = AuthError::BadHeaderLine {
            field,
            line: first_line + offset,
        };
        let (name, value) = line.split_once(':').ok_or(bad.clone())?;
        let name = name.trim();
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(bad);
        }
        let value = value.trim();
        valid_value(value, field, first_line + offset)?;
        headers.push((name.to_owned(), value.to_owned()));
    }
    Ok(headers)
}

/// A header value may hold visible ASCII, spaces and tabs: what every HTTP client sends.
fn valid_value(value: &str, field: &'static str, line: usize) -> Result<(), AuthError> {
    if value
        .bytes()
        .all(|byte| byte == b'\t' || (b' '..=b'~').contains(&byte))
    {
        Ok(())
    } else {
        Err(AuthError::BadHeaderValue { field, line })
    }
}

/// RFC 9110 token characters, the ones a header name may hold.
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_no_header_can_carry_are_refused_without_quoting_them() {
        let error = decode_authorization("CustomAuth\nX-Key:\u{6}\u{6} abc").expect_err("control");
        assert_eq!(
            error,
            AuthError::BadHeaderValue {
                field: "Authorization",
                line: 2
            }
        );
        assert!(!error.to_string().contains("abc"));
        assert!(decode_authorization("BearerToken\nsk-\u{7f}").is_err());
        assert!(decode_headers("X-A: ok\nX-B: caf\u{e9}").is_err());
        assert!(decode_headers("X-A: tab\there ~!").is_ok());
    }

    #[test]
    fn decodes_each_scheme() {
        assert_eq!(decode_authorization("None"), Ok(vec![]));
        assert_eq!(decode_authorization(""), Ok(vec![]));
        assert_eq!(
            decode_authorization("BearerToken\nsk-123"),
            Ok(vec![("Authorization".into(), "Bearer sk-123".into())])
        );
        assert_eq!(
            decode_authorization("BasicAuth\r\naladdin\r\nopensesame"),
            Ok(vec![(
                "Authorization".into(),
                "Basic YWxhZGRpbjpvcGVuc2VzYW1l".into()
            )])
        );
        assert_eq!(
            decode_authorization("CustomAuth\nX-Api-Key: abc\n\napi-version: 2024-02-01"),
            Ok(vec![
                ("X-Api-Key".into(), "abc".into()),
                ("api-version".into(), "2024-02-01".into())
            ])
        );
    }

    #[test]
    fn refuses_bad_values_without_quoting_them() {
        let unknown = decode_authorization("Kerberos\nticket").expect_err("unknown");
        assert!(unknown.to_string().contains("Kerberos"));
        let missing = decode_authorization("BearerToken\n").expect_err("no token");
        assert_eq!(
            missing,
            AuthError::MissingPart {
                scheme: "BearerToken",
                what: "the token",
                line: 2
            }
        );
        let bad = decode_authorization("CustomAuth\nsecret-value-without-colon").expect_err("bad");
        assert!(!bad.to_string().contains("secret-value"));
        assert_eq!(
            decode_headers("X-A: 1\nBad Name: 2"),
            Err(AuthError::BadHeaderLine {
                field: "Headers",
                line: 2
            })
        );
        assert!(decode_authorization("BasicAuth\nuser").is_err());
    }
}
