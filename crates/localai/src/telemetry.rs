//! The assistant's metrics, named after OpenTelemetry's GenAI conventions in Prometheus
//! spelling, recorded through the `metrics` facade: the host installs an exporter (tserver's
//! `/metrics`), or nothing is recorded. Labels: the operation (`chat`, `atomic`), the model's
//! configured name, the envelope status; never a user, a query or an answer.

use std::time::Duration;

use metrics::{Unit, describe_histogram, histogram};

use crate::dialect::Usage;

/// `gen_ai.client.operation.duration`: a chat turn or atomic call, end to end.
pub const OPERATION_DURATION: &str = "gen_ai_client_operation_duration_seconds";
/// `gen_ai.client.token.usage`: tokens of one operation, by `gen_ai_token_type`.
pub const TOKEN_USAGE: &str = "gen_ai_client_token_usage";

/// Describes the metrics (once the host's recorder is installed).
pub fn describe() {
    describe_histogram!(
        OPERATION_DURATION,
        Unit::Seconds,
        "Local AI operations (chat turns, atomic calls), end to end, by operation, model and envelope status"
    );
    describe_histogram!(
        TOKEN_USAGE,
        Unit::Count,
        "Tokens of Local AI operations, by operation, model and token type (input, output)"
    );
}

/// Records one operation that reached its model settings: how long it took, how it ended and
/// the tokens the model server reported.
pub(crate) fn operation_ended(
    operation: &'static str,
    model: &str,
    status: &'static str,
    took: Duration,
    usage: &Usage,
) {
    let model = model.to_owned();
    histogram!(OPERATION_DURATION, "gen_ai_operation_name" => operation, "gen_ai_request_model" => model.clone(), "status" => status)
        .record(took.as_secs_f64());
    #[expect(clippy::cast_precision_loss, reason = "token counts far below 2^52")]
    for (kind, tokens) in [
        ("input", usage.prompt_tokens),
        ("output", usage.completion_tokens),
    ] {
        if tokens > 0 {
            histogram!(TOKEN_USAGE, "gen_ai_operation_name" => operation, "gen_ai_request_model" => model.clone(), "gen_ai_token_type" => kind)
                .record(tokens as f64);
        }
    }
}
