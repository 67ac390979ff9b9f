//! The script API answered by the runtime. Reads go through the same runtime tools the model
//! reads (so a script sees a tag, its alarms and its history exactly as the assistant does);
//! writes are checked, audited and carried out as an operator's are, audited as the user
//! `script:<Name>`; `ai_execute` is the atomic path (`TK.AIExecute`).
//!
//! Every method is called on a script's run thread and may block it (never an async worker),
//! which is what makes a synchronous `ai_execute` safe; a wait for the model ends at the stop.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use solution_scripts::{HostError, ScriptHost};
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::actions::{Actor, RequestedWrite, WriteDone, WriteTags};
use crate::log_text::LogBudget;
use crate::runtime::Runtime;
use crate::tag_writes::GivenValue;
use localai::tools::ToolOutput;

/// The most characters of one script log line.
const MAX_LOG_CHARS: usize = 500;

/// An `ai_execute_async` call for the runner: ask, then run `callback` of `script` with the
/// envelope.
#[derive(Debug)]
pub(crate) struct AsyncAiCall {
    pub(crate) script: String,
    pub(crate) query: String,
    pub(crate) callback: String,
}

/// The runtime, as scripts reach it.
#[derive(Debug, Clone)]
pub(crate) struct RuntimeScriptHost {
    runtime: Runtime,
    handle: Handle,
    /// Where `ai_execute_async` calls go (the runner; bounded).
    async_calls: mpsc::Sender<AsyncAiCall>,
    /// Calls made and not yet handed to their callbacks (counted down by the runner).
    outstanding: Arc<AtomicUsize>,
    /// Each script's allowance of log lines.
    log_budgets: Arc<Mutex<HashMap<String, LogBudget>>>,
    /// All scripts' allowance of log lines together.
    all_log_lines: Arc<Mutex<LogBudget>>,
    /// The scripts' stop: a wait for the model ends there.
    stop: CancellationToken,
}

impl RuntimeScriptHost {
    /// A host answering from `runtime`, its async parts run on `handle`, its asynchronous AI
    /// calls handed to `async_calls` and counted in `outstanding`, until `stop`.
    pub(crate) fn new(
        runtime: Runtime,
        handle: Handle,
        async_calls: mpsc::Sender<AsyncAiCall>,
        outstanding: Arc<AtomicUsize>,
        stop: CancellationToken,
    ) -> Self {
        Self {
            runtime,
            handle,
            async_calls,
            outstanding,
            log_budgets: Arc::default(),
            all_log_lines: Arc::new(Mutex::new(LogBudget::new("the scripts"))),
            stop,
        }
    }

    /// Runs a runtime tool that only reads by name and returns its result, or its failure's
    /// message.
    fn tool(&self, name: &str, arguments: Value) -> Result<Value, HostError> {
        // The script API's reads do not say which script reads; reading tools never ask.
        let caller = localai::tools::ToolCaller::Script {
            script: Arc::from("solution scripts"),
        };
        self.call(name, arguments, caller).map(|output| output.result)
    }

    /// Runs a runtime tool by name for `caller` (whatever the solution's ModelOptions bits
    /// offer the model: scripts are the integrator's code).
    fn call(
        &self,
        name: &str,
        arguments: Value,
        caller: localai::tools::ToolCaller,
    ) -> Result<ToolOutput, HostError> {
        let tool = self
            .runtime
            .tools()
            .get(name)
            .ok_or_else(|| HostError(format!("the runtime tool {name} is not registered")))?;
        self.handle
            .block_on(tool.call(arguments, caller, localai::tools::TOOL_TIMEOUT))
            .map_err(|error| {
                HostError(
                    error.to_content()["error"]["message"]
                        .as_str()
                        .unwrap_or("failed")
                        .to_owned(),
                )
            })
    }
}

impl ScriptHost for RuntimeScriptHost {
    fn read_tag(&self, name: &str) -> Result<Value, HostError> {
        self.tool("runtime_get_value", json!({"tag": name}))
    }

    fn write_tag(&self, script: &str, name: &str, value: Value) -> Result<(), HostError> {
        let write = RequestedWrite {
            tag: name.to_owned(),
            value: GivenValue::from_json(&value),
        };
        let actor = Actor::Script {
            name: script.to_owned(),
        };
        let done = self
            .handle
            .block_on(self.runtime.act_now(actor, WriteTags::unsigned(vec![write])))
            .map_err(|refusal| HostError(refusal.to_string()))?;
        match done.into_iter().next() {
            Some(WriteDone::Written | WriteDone::SentToField) => Ok(()),
            Some(WriteDone::Refused(reason) | WriteDone::NotConfirmed(reason)) => {
                Err(HostError(format!("cannot write {name}: {reason}")))
            }
            None => Err(HostError(format!("cannot write {name}: nothing was done"))),
        }
    }

    fn propose_write(
        &self,
        script: &str,
        name: &str,
        value: Value,
        reason: &str,
    ) -> Result<String, HostError> {
        let proposal = self.call(
            "runtime_propose_write",
            json!({"tag": name, "value": value, "reason": reason}),
            localai::tools::ToolCaller::Script {
                script: Arc::from(script),
            },
        )?;
        proposal
            .proposal
            .map(|id| id.to_string())
            .ok_or_else(|| HostError("the proposal tool made no proposal".to_owned()))
    }

    fn active_alarms(&self) -> Result<Value, HostError> {
        self.tool("runtime_get_active_alarms", json!({}))
    }

    fn tag_history(&self, name: &str, minutes: u64) -> Result<Value, HostError> {
        self.tool(
            "runtime_get_tag_history",
            json!({"tag": name, "minutes": minutes}),
        )
    }

    fn log(&self, script: &str, message: &str) {
        // `script`, not `name`: a JSON log line's span object has a `name` key already.
        let _span = tracing::info_span!("script", script).entered();
        let allowed = self
            .log_budgets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(script.to_owned())
            .or_insert_with(|| LogBudget::new("a script"))
            .allow()
            && self
                .all_log_lines
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .allow();
        if allowed {
            tracing::info!("{}", log_line(message));
        }
    }

    fn ai_execute(&self, query: Value) -> Value {
        let toolkit = self.runtime.toolkit();
        let query = query_text(query);
        self.handle.block_on(async {
            tokio::select! {
                envelope = toolkit.ai_execute_async(&query) => envelope_value(&envelope),
                // The engine ends the run when this returns: what it returns is never seen.
                () = self.stop.cancelled() => Value::Null,
            }
        })
    }

    fn stopping(&self) -> bool {
        self.stop.is_cancelled()
    }

    fn ai_execute_async(&self, script: &str, query: Value, callback: &str) -> Result<(), HostError> {
        // Counted before it is handed over, so the call is never unseen while on its way.
        self.outstanding.fetch_add(1, Ordering::AcqRel);
        self.async_calls
            .try_send(AsyncAiCall {
                script: script.to_owned(),
                query: query_text(query),
                callback: callback.to_owned(),
            })
            .inspect_err(|_| {
                self.outstanding.fetch_sub(1, Ordering::AcqRel);
            })
            .map_err(|error| match error {
                mpsc::error::TrySendError::Full(_) => {
                    HostError("too many ai_execute_async calls are waiting; try again later".to_owned())
                }
                mpsc::error::TrySendError::Closed(_) => HostError("the server is stopping".to_owned()),
            })
    }
}

/// A script's message as one log line: control characters escaped (no forged lines), cut at
/// [`MAX_LOG_CHARS`].
fn log_line(message: &str) -> String {
    let mut line = String::with_capacity(message.len().min(MAX_LOG_CHARS));
    for (shown, c) in message.chars().enumerate() {
        if shown == MAX_LOG_CHARS {
            line.push('…');
            break;
        }
        if c.is_control() {
            line.extend(c.escape_default());
        } else {
            line.push(c);
        }
    }
    line
}

/// A script's query as `TK.AIExecute` takes it: text as it is, the structured form as JSON.
fn query_text(query: Value) -> String {
    match query {
        Value::String(text) => text,
        structured => structured.to_string(),
    }
}

/// The envelope JSON as a value (the atomic path always returns an envelope).
pub(crate) fn envelope_value(envelope: &str) -> Value {
    serde_json::from_str(envelope).unwrap_or_else(|_| json!({"status": "error", "reply": envelope}))
}
