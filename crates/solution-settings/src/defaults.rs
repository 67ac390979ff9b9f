//! The public defaults a configuration editor seeds its fields with, and the limits a stored
//! value is clamped to.

/// The local Ollama server's OpenAI-compatible chat-completions endpoint.
pub const URL: &str = "http://localhost:11434/v1/chat/completions";
/// The default model name.
pub const NAME: &str = "qwen2.5:7b-instruct";
/// No authorization header.
pub const AUTHORIZATION: &str = "None";
/// No extra headers.
pub const HEADERS: &str = "";
/// A description of the default model, for the editor.
pub const INFO: &str = "Default local model. Apache 2.0, ~4.7 GB.";
/// The wall-clock budget of one call, in seconds.
pub const TIMEOUT_SECONDS: f64 = 60.0;
/// The largest `TimeoutSeconds` honoured; larger values are clamped to it.
pub const MAX_TIMEOUT_SECONDS: f64 = 3600.0;
/// Tool dispatches per chat turn (the spec's `MaxToolDispatchesPerTurn`).
pub const MAX_TOOL_DISPATCHES: usize = 5;
/// The largest `MaxToolDispatchesPerTurn` honoured; larger values are clamped to it.
pub const MAX_TOOL_DISPATCHES_CEILING: usize = 50;
/// Messages kept in a connection's transcript (system prompt not counted): about ten
/// tool-using turns, which fits an 8B-class model's 8k-token context.
pub const MAX_HISTORY_MESSAGES: usize = 40;
/// The range of `MaxHistoryMessages` honoured; larger values are clamped to its end,
/// smaller ones fall back to the default.
pub const MAX_HISTORY_MESSAGES_RANGE: std::ops::RangeInclusive<usize> = 2..=1000;
