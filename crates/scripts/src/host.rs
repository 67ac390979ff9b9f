//! What a script may reach: the host answers each API call (tags, alarms, history, the model,
//! the log) with JSON values, which the engine turns into Rhai maps and arrays.

use serde_json::Value;

/// A host call's failure, shown to the script as a Rhai error it may catch (`try`/`catch`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HostError(pub String);

/// The plant and model as one script run sees them. Called on the run's blocking thread.
pub trait ScriptHost: Send + Sync + 'static {
    /// A tag's reading: `{name, value, quality, timestamp}`.
    fn read_tag(&self, name: &str) -> Result<Value, HostError>;
    /// Writes a tag (scripts are integrator code and may write; tools still may not).
    fn write_tag(&self, script: &str, name: &str, value: Value) -> Result<(), HostError>;
    /// Proposes writing `value` to tag `name` for an operator to approve (the script's
    /// proposals wait in the operators' pending list; nothing is written until one approves):
    /// the proposal's id. None, by default.
    fn propose_write(
        &self,
        script: &str,
        name: &str,
        value: Value,
        reason: &str,
    ) -> Result<String, HostError> {
        let _ = (script, value, reason);
        Err(HostError(format!(
            "cannot propose writing {name}: this host takes no proposals"
        )))
    }
    /// The active alarms, most urgent first.
    fn active_alarms(&self) -> Result<Value, HostError>;
    /// A tag's samples over the last `minutes`: `{samples: [{value, timestamp}], min, max, mean}`.
    fn tag_history(&self, name: &str, minutes: u64) -> Result<Value, HostError>;
    /// A line in the server's log, attributed to the script.
    fn log(&self, script: &str, message: &str);
    /// The atomic path (`TK.AIExecute`): blocks until the reply envelope is there.
    fn ai_execute(&self, query: Value) -> Value;
    /// The atomic path without waiting: the host runs `callback` of `script` with the envelope
    /// later. Refused when the script has too many calls outstanding.
    fn ai_execute_async(&self, script: &str, query: Value, callback: &str) -> Result<(), HostError>;
    /// Whether the host is stopping: every run ends at its next look (and a host call the stop
    /// cut short is not gone on from). Never, by default.
    fn stopping(&self) -> bool {
        false
    }
}
