//! What went wrong on the way to or from a model server, worded once for both paths: error
//! bodies of every server dialect quoted the same way, and transport failures in the same plain
//! words, never quoting a URL (it may hold resolved secrets).

use std::error::Error;

use serde_json::Value;

use crate::secrets::Redactions;

/// The most response bytes either path reads from one POST; a larger body is an error, never
/// an unbounded allocation.
pub(crate) const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// The longest excerpt of an error body quoted in a warning.
const MAX_QUOTED: usize = 300;

/// The message inside an error body of the OpenAI, Ollama, llama.cpp or vLLM shape, or a
/// short excerpt of any other body (an HTML page is described, not quoted). The message is
/// scrubbed of the call's secrets before it is cut, so none leaks as a prefix.
pub(crate) fn error_message(body: &[u8], redactions: &Redactions) -> String {
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        let message = match value.get("error") {
            Some(Value::String(message)) => Some(message.as_str()),
            Some(Value::Object(error)) => error.get("message").and_then(Value::as_str),
            _ => value.get("message").and_then(Value::as_str),
        };
        if let Some(message) = message {
            return redactions.scrub(message).chars().take(MAX_QUOTED).collect();
        }
    }
    let text = String::from_utf8_lossy(body);
    match text.trim() {
        "" => "(empty body)".to_owned(),
        html if html.starts_with('<') => format!("(an HTML page of {} bytes)", body.len()),
        other => redactions.scrub(other).chars().take(MAX_QUOTED).collect(),
    }
}

/// The warning for a POST that failed before its response arrived (counted: each call is one
/// failed request).
pub(crate) fn transport_warning(cause: &str, shown_url: &str) -> String {
    crate::telemetry::model_http_error("transport");
    format!("LLM endpoint HTTP error: {cause} ({shown_url})")
}

/// The warning for a response whose body could not be read whole (counted, as above).
pub(crate) fn unreadable_warning(cause: &str, shown_url: &str) -> String {
    crate::telemetry::model_http_error("unreadable");
    format!("LLM endpoint HTTP error: the response could not be read: {cause} ({shown_url})")
}

/// The warning for a response with a status other than 2xx (3xx has its own: redirects).
pub(crate) fn status_warning(
    status: reqwest::StatusCode,
    body: &[u8],
    shown_url: &str,
    redactions: &Redactions,
) -> String {
    crate::telemetry::model_http_error(if status.is_server_error() { "5xx" } else { "4xx" });
    format!(
        "LLM endpoint returned HTTP {} {}: {} ({shown_url})",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        error_message(body, redactions)
    )
}

/// Whether an error answer says the server will not stream (older llama.cpp: 500 "Cannot use
/// tools with stream"), so the same request without streaming may work. Only the statuses a
/// server itself gives for a request it refuses count (never a gateway's 502/503/504), and
/// "stream" must be a word of the message ("upstream connect error" is no refusal).
pub(crate) fn refuses_streaming(status: reqwest::StatusCode, body: &[u8], redactions: &Redactions) -> bool {
    matches!(status.as_u16(), 400 | 422 | 500 | 501)
        && error_message(body, redactions)
            .to_ascii_lowercase()
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| matches!(word, "stream" | "streaming"))
}

/// The warning for a 2xx body that is not JSON.
pub(crate) fn not_json(error: &serde_json::Error) -> String {
    format!("LLM response is not JSON: {error}")
}

/// The warning for a response body past [`MAX_RESPONSE_BYTES`].
pub(crate) fn too_large(shown_url: &str) -> String {
    format!("LLM response exceeds {MAX_RESPONSE_BYTES} bytes ({shown_url})")
}

/// The first cause in an error's chain that says something a reader can act on, in plain
/// words; `None` when no cause does.
pub(crate) fn plain_cause(error: &(dyn Error + 'static)) -> Option<String> {
    let mut cause = Some(error);
    while let Some(inner) = cause {
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            return Some(match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "Connection refused".to_owned(),
                std::io::ErrorKind::ConnectionReset => "Connection reset by the server".to_owned(),
                std::io::ErrorKind::ConnectionAborted => "Connection aborted".to_owned(),
                std::io::ErrorKind::UnexpectedEof => "the server closed the connection early".to_owned(),
                _ => io.to_string(),
            });
        }
        if inner
            .downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_incomplete_message)
        {
            return Some("the server closed the connection early".to_owned());
        }
        let text = inner.to_string();
        if text.contains("dns error")
            || text.contains("failed to lookup address")
            || text.contains("cannot resolve the host name")
        {
            return Some("cannot resolve the host name".to_owned());
        }
        cause = inner.source();
    }
    None
}

/// A reqwest failure in plain words, never quoting the (possibly secret-bearing) URL that the
/// error's own text carries: only its causes are read.
pub(crate) fn reqwest_failure(error: &reqwest::Error) -> String {
    if let Some(cause) = error.source().and_then(plain_cause) {
        cause
    } else if error.is_connect() {
        "cannot connect".to_owned()
    } else if error.is_body() || error.is_decode() {
        "the connection closed before the whole response arrived".to_owned()
    } else {
        "the request could not be completed".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_of_every_server_shape_give_their_message() {
        let cases = [
            (
                r#"{"error":{"message":"Incorrect API key","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
                "Incorrect API key",
            ),
            (
                r#"{"error":"model 'llama9' not found"}"#,
                "model 'llama9' not found",
            ),
            (
                r#"{"error":{"code":400,"message":"context too long","type":"exceed_context_size_error"}}"#,
                "context too long",
            ),
            (
                r#"{"object":"error","message":"max_tokens too large","type":"BadRequestError","code":400}"#,
                "max_tokens too large",
            ),
            (
                "<html><body>502 Bad Gateway</body></html>",
                "(an HTML page of 41 bytes)",
            ),
            ("", "(empty body)"),
            ("upstream timed out", "upstream timed out"),
        ];
        for (body, expected) in cases {
            assert_eq!(error_message(body.as_bytes(), &Redactions::default()), expected);
        }
    }

    #[test]
    fn messages_and_excerpts_are_quoted_at_one_length() {
        let long = "e".repeat(5000);
        let json = serde_json::json!({"error": {"message": long}}).to_string();
        for body in [json.as_bytes(), long.as_bytes()] {
            assert_eq!(
                error_message(body, &Redactions::default()).chars().count(),
                MAX_QUOTED
            );
        }
    }

    #[test]
    fn only_a_server_refusing_to_stream_counts_as_one() {
        use reqwest::StatusCode;
        let none = Redactions::default();
        let refuses = |status: u16, message: &str| {
            let body = serde_json::json!({"error": {"message": message}}).to_string();
            refuses_streaming(
                StatusCode::from_u16(status).expect("a status"),
                body.as_bytes(),
                &none,
            )
        };
        assert!(refuses(500, "Cannot use tools with stream"));
        assert!(refuses(400, "streaming is not supported for this model"));
        assert!(!refuses(
            503,
            "upstream connect error or disconnect/reset before headers"
        ));
        assert!(!refuses(500, "upstream request timeout"));
        assert!(
            !refuses(502, "Cannot use tools with stream"),
            "a gateway's status is not the server's refusal"
        );
        assert!(!refuses(500, "model overloaded"));
    }

    #[test]
    fn every_connection_failure_kind_is_worded_alike() {
        use std::io::{Error as IoError, ErrorKind};
        let worded = |kind| plain_cause(&IoError::from(kind));
        assert_eq!(
            worded(ErrorKind::ConnectionRefused).as_deref(),
            Some("Connection refused")
        );
        assert_eq!(
            worded(ErrorKind::ConnectionReset).as_deref(),
            Some("Connection reset by the server")
        );
        assert_eq!(
            worded(ErrorKind::ConnectionAborted).as_deref(),
            Some("Connection aborted")
        );
        assert_eq!(
            worded(ErrorKind::UnexpectedEof).as_deref(),
            Some("the server closed the connection early")
        );
    }
}
