//! The assistant's metrics, named after OpenTelemetry's GenAI conventions in Prometheus
//! spelling, recorded through the `metrics` facade: the host installs an exporter (tserver's
//! `/metrics`), or nothing is recorded. Labels: the operation (`chat`, `atomic`), the model's
//! configured name, the envelope status; never a user, a query or an answer.

use std::sync::{LazyLock, OnceLock};
use std::time::Duration;

use dashmap::DashMap;
use metrics::{Counter, Histogram, Unit, counter, describe_counter, describe_histogram, histogram};

use ai_envelope::Status;

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

/// The time-to-first-chunk histogram, registered by [`describe`].
static FIRST_CHUNK: OnceLock<Histogram> = OnceLock::new();

/// Histograms whose labels include a name from the configuration (a model, a tool), each
/// registered the first time its label set is used, once [`describe`] has run: the
/// `histogram!` macro builds, hashes and looks up its key (and copies the name) at every
/// record, which was a twentieth of a tool-calling chat turn. `N` label sets per name, the
/// fixed labels' combinations; at most [`MAX_CACHED_NAMES`] names are kept (the rest are
/// recorded through the macro, correct, only dearer).
#[derive(Debug)]
struct Registered<const N: usize> {
    by_name: LazyLock<DashMap<Box<str>, [OnceLock<Histogram>; N], foldhash::fast::RandomState>>,
}

/// Names [`Registered`] keeps handles for: models and tools are configured, not made up, so
/// this bounds only a configuration that keeps renaming them.
const MAX_CACHED_NAMES: usize = 256;

impl<const N: usize> Registered<N> {
    const fn new() -> Self {
        Self {
            by_name: LazyLock::new(DashMap::default),
        }
    }

    /// Records `value` in the histogram of `name` and label set `slot` (see [`slot`]), made
    /// by `register` the first time.
    fn record(&self, name: &str, slot: Option<usize>, value: f64, register: impl FnOnce() -> Histogram) {
        // Before a recorder is described a handle would record nowhere, ever; an unlisted
        // label set or a name past the bound is recorded as the macro does.
        let Some(slot) = slot.filter(|slot| *slot < N && CHAT_TURNS_BY_STATUS.get().is_some()) else {
            return register().record(value);
        };
        if let Some(handles) = self.by_name.get(name) {
            return handles[slot].get_or_init(register).record(value);
        }
        if self.by_name.len() >= MAX_CACHED_NAMES {
            return register().record(value);
        }
        self.by_name
            .entry(Box::from(name))
            .or_insert_with(|| std::array::from_fn(|_| OnceLock::new()))[slot]
            .get_or_init(register)
            .record(value);
    }
}

/// The index of a label set among the combinations of a histogram's fixed labels: `labels`
/// are each label's value and the values it takes, in order; `None` for a value not listed.
fn slot(labels: &[(&str, &[&str])]) -> Option<usize> {
    labels.iter().try_fold(0, |slot, (value, values)| {
        Some(slot * values.len() + values.iter().position(|known| known == value)?)
    })
}

/// [`OPERATION_DURATION`] by model, then operation and status.
static OPERATION_DURATIONS: Registered<{ OPERATIONS.len() * STATUSES.len() }> = Registered::new();
/// [`TOKEN_USAGE`] by model, then operation and token type.
static TOKEN_USAGES: Registered<{ OPERATIONS.len() * TOKEN_TYPES.len() }> = Registered::new();
/// [`TOOL_DURATION`] by tool, then caller and outcome.
static TOOL_DURATIONS: Registered<{ CALLERS.len() * OUTCOMES.len() }> = Registered::new();

const OPERATIONS: [&str; 2] = ["chat", "atomic"];
const STATUSES: [&str; 4] = [
    Status::Ok.as_str(),
    Status::Error.as_str(),
    Status::Disabled.as_str(),
    Status::Truncated.as_str(),
];
const TOKEN_TYPES: [&str; 2] = ["input", "output"];
const CALLERS: [&str; 2] = ["chat", "client"];
const OUTCOMES: [&str; 2] = ["ok", "error"];

/// Describes the metrics and registers the counters whose labels are fixed; call it once the
/// host's recorder is installed (until then they are counted through the macros).
pub fn describe() {
    FIRST_CHUNK.get_or_init(|| histogram!(TIME_TO_FIRST_CHUNK, "gen_ai_operation_name" => "chat"));
    CHAT_TURNS_BY_STATUS.get_or_init(|| {
        STATUSES
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
    let slot = slot(&[(caller, &CALLERS), (outcome, &OUTCOMES)]);
    TOOL_DURATIONS.record(
        tool,
        slot,
        took.as_secs_f64(),
        || histogram!(TOOL_DURATION, "tool" => tool.to_owned(), "caller" => caller, "outcome" => outcome),
    );
}

/// Counts a failed model-server request of `class`.
pub(crate) fn model_http_error(class: &'static str) {
    counter!(MODEL_HTTP_ERRORS, "class" => class).increment(1);
}

/// Records how long a streamed POST waited for its first bytes.
pub(crate) fn first_chunk(took: Duration) {
    match FIRST_CHUNK.get() {
        Some(registered) => registered.record(took.as_secs_f64()),
        None => histogram!(TIME_TO_FIRST_CHUNK, "gen_ai_operation_name" => "chat").record(took.as_secs_f64()),
    }
}

/// Records one operation that reached its model settings: how long it took, how it ended and
/// the tokens the model server reported for its requests and its answers.
pub(crate) fn operation_ended(
    operation: &'static str,
    model: &str,
    status: &'static str,
    took: Duration,
    (input_tokens, output_tokens): (u64, u64),
) {
    let duration = || histogram!(OPERATION_DURATION, "gen_ai_operation_name" => operation, "gen_ai_request_model" => model.to_owned(), "status" => status);
    let labels = slot(&[(operation, &OPERATIONS), (status, &STATUSES)]);
    OPERATION_DURATIONS.record(model, labels, took.as_secs_f64(), duration);
    #[expect(clippy::cast_precision_loss, reason = "token counts far below 2^52")]
    for (kind, tokens) in [("input", input_tokens), ("output", output_tokens)] {
        if tokens > 0 {
            let labels = slot(&[(operation, &OPERATIONS), (kind, &TOKEN_TYPES)]);
            TOKEN_USAGES.record(model, labels, tokens as f64, || {
                histogram!(TOKEN_USAGE, "gen_ai_operation_name" => operation, "gen_ai_request_model" => model.to_owned(), "gen_ai_token_type" => kind)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fixed_label_set_has_its_own_slot_and_unlisted_values_have_none() {
        let mut slots = Vec::new();
        for operation in OPERATIONS {
            for status in STATUSES {
                slots.push(slot(&[(operation, &OPERATIONS), (status, &STATUSES)]).expect("listed"));
            }
        }
        assert_eq!(slots, (0..OPERATIONS.len() * STATUSES.len()).collect::<Vec<_>>());
        assert_eq!(slot(&[("chat", &OPERATIONS), ("cancelled", &STATUSES)]), None);
        assert_eq!(slot(&[("script", &OPERATIONS), ("ok", &STATUSES)]), None);
    }
}
