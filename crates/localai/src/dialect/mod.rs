//! What a model server's answers mean, read and worded once for both Local AI paths: each path
//! keeps its own POST, budget and orchestration, and reads the server's answer through here
//! (the reply, its tool calls, why it stopped, its token usage, error bodies, transport
//! failures, redirects) so the two never drift in what they tell the operator.

mod errors;
mod reply;
mod stream;
mod usage;
mod wire;

#[cfg(feature = "fuzzing")]
pub(crate) use errors::error_message;
pub(crate) use errors::{
    MAX_RESPONSE_BYTES, not_json, plain_cause, refuses_streaming, reqwest_failure, status_warning, too_large,
    transport_warning, unreadable_warning,
};
pub(crate) use reply::{Arguments, AssistantReply, Channel, ToolCall, read_reply};
pub(crate) use stream::{ResponseReader, read_response};
pub use usage::Usage;
pub(crate) use wire::Completion;

use crate::secrets::Redactions;

/// The longest `Location` quoted in a warning.
const MAX_QUOTED_LOCATION: usize = 200;

/// The warning for a POST answered by a redirect (any 3xx). Neither path follows one:
/// following a 301, 302 or 303 turns the POST into a GET without its body (what browsers and
/// HTTP clients do), whose answer means nothing, and a 307/308 to another origin would carry
/// the Authorization header where it was not configured to go. The user fixes the URL once.
/// The `Location` is scrubbed of secrets before it is cut, so no secret leaks as a prefix.
pub(crate) fn redirect_warning(
    status: u16,
    reason: &str,
    location: Option<&str>,
    shown_url: &str,
    redactions: &Redactions,
) -> String {
    crate::telemetry::model_http_error("redirect");
    let target = location
        .map(|location| {
            let quoted: String = redactions
                .scrub(location)
                .chars()
                .take(MAX_QUOTED_LOCATION)
                .collect();
            format!(" to {quoted}")
        })
        .unwrap_or_default();
    format!(
        "LLM endpoint answered HTTP {status} {reason}, a redirect{target}: model POSTs are never \
         redirected; set URL to the final address ({shown_url})"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redirect_warning_names_the_status_the_target_and_the_fix() {
        let none = Redactions::default();
        let warning = redirect_warning(
            302,
            "Found",
            Some("https://gpu-box/v1/chat/completions"),
            "http://gpu-box/v1",
            &none,
        );
        assert_eq!(
            warning,
            "LLM endpoint answered HTTP 302 Found, a redirect to https://gpu-box/v1/chat/completions: \
             model POSTs are never redirected; set URL to the final address (http://gpu-box/v1)"
        );
        let long = "x".repeat(1000);
        assert!(redirect_warning(308, "Permanent Redirect", Some(&long), "u", &none).len() < 400);
        assert!(redirect_warning(307, "Temporary Redirect", None, "u", &none).contains("a redirect: "));
    }
}
