//! The assistant's metrics, named after OpenTelemetry's GenAI conventions in Prometheus
//! spelling, recorded through the `metrics` facade: the host installs an exporter (tserver's
//! `/metrics`), or nothing is recorded. Labels: the operation (`chat`, `atomic`), the model's
//! configured name, the envelope status; never a user, a query or an answer.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{Counter, Unit, counter, describe_counter, describe_histogram, histogram};

use crate::Status;

use crate::dialect::Usage;

/// `gen_ai.client.operation.duration`: a chat turn or atomic call, end to end.
pub const OPERATION_DURATION: &str = "gen_ai_client_operation_duration_seconds";
/// `gen_ai.client.token.usage`: tokens of one operation, by `gen_ai_token_type`.
pub const TOKEN_USAGE: &str = "gen_ai_client_token_usage";
/// `gen_ai.client.operation.time_to_first_chunk`: from a streamed POST to its first bytes.
pub const TIME_TO_FIRST_CHUNK: &str = "gen_ai_client_operation_time_to_first_chunk_seconds";
/// Runtime tool executions, by `tool` (a catalog name, or `unknown`), `caller` (`chat` for the
/// assistant's own calls, `client` for the framed protocol and RuntimeMCP) and `outcome`.
pub const TOOL_DURATION: &str = "tserver_tool_duration_seconds";
/// Chat turns answered, by envelope `status`: every turn, those stopped at the gates (model
/// disabled, query unreadable) included, which never reach [`OPERATION_DURATION`].
pub const CHAT_TURNS: &str = "tserver_chat_turns_total";
/// Chat turns whose model asked for more tool calls than `MaxToolDispatchesPerTurn` allows.
pub const TOOL_CAP_REACHED: &str = "tserver_chat_tool_cap_reached_total";
/// Operations cut short by their wall-clock budget, by `gen_ai_operation_name`.
pub const BUDGET_EXHAUSTED: &str = "tserver_budget_exhausted_total";
/// Model-server requests that failed, by `class`: `transport` (no response), `unreadable`
/// (a body cut off), `redirect`, `4xx`, `5xx`.
pub const MODEL_HTTP_ERRORS: &str = "tserver_model_http_errors_total";

/// The chat-turn counter of each envelope status, registered by [`describe`]: the `counter!`
/// macro builds and hashes its key at every increment, a measurable share of a gate call.
static CHAT_TURNS_BY_STATUS: OnceLock<Vec<(&'static str, Counter)>> = OnceLock::new();

/// Describes the metrics and registers the counters whose labels are fixed; call it once the
/// host's recorder is installed (until then they are counted through the macros).
pub fn describe() {
    CHAT_TURNS_BY_STATUS.get_or_init(|| {
        [Status::Ok, Status::Error, Status::Disabled, Status::Truncated]
            .map(Status::as_str)
            .into_iter()
            .map(|status| (status, counter!(CHAT_TURNS, "status" => status)))
            .collect()
    });
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
    describe_histogram!(
        TIME_TO_FIRST_CHUNK,
        Unit::Seconds,
        "From a streamed chat POST to the first bytes of its answer"
    );
    describe_histogram!(
        TOOL_DURATION,
        Unit::Seconds,
        "Runtime tool executions, by tool, caller (chat, client) and outcome"
    );
    describe_counter!(MODEL_HTTP_ERRORS, "Model-server requests that failed, by class");
    describe_counter!(
        CHAT_TURNS,
        "Chat turns answered, by envelope status (gate refusals included)"
    );
    describe_counter!(
        TOOL_CAP_REACHED,
        "Chat turns whose model asked for more tool calls than the per-turn cap allows"
    );
    describe_counter!(
        BUDGET_EXHAUSTED,
        "Local AI operations cut short by their wall-clock budget, by operation"
    );
}

/// Counts a chat turn answered with `status`.
pub(crate) fn chat_turn(status: &'static str) {
    let registered = CHAT_TURNS_BY_STATUS
        .get()
        .and_then(|counters| counters.iter().find(|(known, _)| *known == status));
    match registered {
        Some((_, counter)) => counter.increment(1),
        None => counter!(CHAT_TURNS, "status" => status).increment(1),
    }
}

/// Counts a chat turn that reached its tool-call cap.
pub(crate) fn tool_cap_reached() {
    counter!(TOOL_CAP_REACHED).increment(1);
}

/// Counts an operation (`chat`, `atomic`) its wall-clock budget cut short.
pub(crate) fn budget_exhausted(operation: &'static str) {
    counter!(BUDGET_EXHAUSTED, "gen_ai_operation_name" => operation).increment(1);
}

/// Records a runtime tool's execution: `tool` is a name from the catalog (never what a model
/// or client asked for that the catalog does not know).
pub fn tool_ran(tool: &str, caller: &'static str, ok: bool, took: Duration) {
    let outcome = if ok { "ok" } else { "error" };
    histogram!(TOOL_DURATION, "tool" => tool.to_owned(), "caller" => caller, "outcome" => outcome)
        .record(took.as_secs_f64());
}

/// Counts a failed model-server request of `class`.
pub(crate) fn model_http_error(class: &'static str) {
    counter!(MODEL_HTTP_ERRORS, "class" => class).increment(1);
}

/// Records how long a streamed POST waited for its first bytes.
pub(crate) fn first_chunk(took: Duration) {
    histogram!(TIME_TO_FIRST_CHUNK, "gen_ai_operation_name" => "chat").record(took.as_secs_f64());
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
