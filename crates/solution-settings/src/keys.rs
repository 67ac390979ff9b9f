//! The `ModelSettings` JSON keys, spelled as the spec spells them.

/// Endpoint URL (may hold `{Tag.X}` expressions and `/secret:<Name>` tokens).
pub const URL: &str = "URL";
/// Model name sent as `model`.
pub const NAME: &str = "Name";
/// Multi-line authorization (scheme on line 1).
pub const AUTHORIZATION: &str = "Authorization";
/// Extra headers, one `Name: value` per line.
pub const HEADERS: &str = "Headers";
/// Free text about the model.
pub const INFO: &str = "Info";
/// The wall-clock budget in seconds.
pub const TIMEOUT_SECONDS: &str = "TimeoutSeconds";
/// Tool dispatches per chat turn.
pub const MAX_TOOL_DISPATCHES: &str = "MaxToolDispatchesPerTurn";
/// Messages kept in a chat transcript.
pub const MAX_HISTORY_MESSAGES: &str = "MaxHistoryMessages";
/// Every key the product knows, in editor order.
pub const ALL: [&str; 8] = [
    URL,
    NAME,
    AUTHORIZATION,
    HEADERS,
    INFO,
    TIMEOUT_SECONDS,
    MAX_TOOL_DISPATCHES,
    MAX_HISTORY_MESSAGES,
];
/// The keys stored as JSON numbers when given a number.
pub const NUMERIC: [&str; 3] = [TIMEOUT_SECONDS, MAX_TOOL_DISPATCHES, MAX_HISTORY_MESSAGES];
