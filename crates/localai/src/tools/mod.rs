//! The tool catalog: one definition per tool (name, a description written for a model, the
//! JSON schema of its arguments, a handler), usable by any transport: the chat path dispatches
//! in process today, an MCP server may reuse the same definitions later.
//!
//! A tool belongs to one `ModelOptions` category bit; the catalog offered in a chat turn is
//! every tool whose category is offered (master bit 0x02 AND the category bit). Handler
//! failures are data for the model, in the canonical content shape
//! `{"ok": false, "error": {"type", "message", "details", "retryable"}}`; success is
//! `{"ok": true, "result": ...}`.

mod caller;
mod schema;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::FutureExt;
use serde_json::{Value, json};

use crate::settings::ModelOptions;
pub use caller::ToolCaller;
pub use schema::validate_arguments;

/// The most one tool call may take, whichever transport asked (the chat path gives less when
/// its turn's budget has less left).
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(10);

/// The future a tool handler returns.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send>>;

/// The id of a proposal a tool made (`p-` and 12 hex digits), carried beside the tool's result
/// so whoever called it knows a proposal by its type, never by reading the result's keys.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProposalId(Arc<str>);

impl ProposalId {
    /// The id `id`.
    pub fn new(id: &str) -> Self {
        Self(Arc::from(id))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ProposalId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a tool gives back: the result its caller reads and, from a proposing tool, the proposal
/// it made.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The result, for the model or the client.
    pub result: Value,
    /// The proposal the call made, when it made one.
    pub proposal: Option<ProposalId>,
}

impl From<Value> for ToolOutput {
    fn from(result: Value) -> Self {
        Self {
            result,
            proposal: None,
        }
    }
}

type Handler = dyn Fn(Value, ToolCaller) -> ToolFuture + Send + Sync;

/// A structured tool failure, fed back to the model as a tool result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    /// A short machine-readable kind, e.g. `invalid_arguments`, `not_found`, `timeout`.
    pub kind: String,
    /// What went wrong, for the model and the trace.
    pub message: String,
    /// JSON-safe details (`Value` is JSON by construction); boxed to keep `Result`s small.
    pub details: Box<Value>,
    /// Whether the same call may succeed if tried again.
    pub retryable: bool,
}

impl ToolError {
    /// A failure of `kind` with a message and no details.
    pub fn new(kind: &str, message: impl Into<String>) -> Self {
        Self {
            kind: kind.to_owned(),
            message: message.into(),
            details: Box::new(json!({})),
            retryable: false,
        }
    }

    /// Bad or missing arguments.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::new("invalid_arguments", message)
    }

    /// An unknown tag, path, alarm...
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new("not_found", message)
    }

    /// Adds details.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Box::new(details);
        self
    }

    /// Marks the failure as worth retrying.
    pub fn retryable(mut self) -> Self {
        self.retryable = true;
        self
    }

    /// The canonical failure content for the model.
    pub fn to_content(&self) -> Value {
        json!({"ok": false, "error": {
            "type": self.kind, "message": self.message, "details": self.details, "retryable": self.retryable
        }})
    }
}

/// The canonical success content for the model.
pub fn success_content(result: Value) -> Value {
    json!({"ok": true, "result": result})
}

/// [`success_content`] around a borrowed result, to be serialized where it goes without moving
/// or copying the result into a new value.
#[derive(Debug, Clone, Copy)]
pub struct SuccessContent<'a>(pub &'a Value);

impl serde::Serialize for SuccessContent<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut content = serializer.serialize_struct("SuccessContent", 2)?;
        content.serialize_field("ok", &true)?;
        content.serialize_field("result", self.0)?;
        content.end()
    }
}

/// [`success_content`] as the JSON text the model reads.
pub fn success_content_text(result: &Value) -> String {
    // Written through serde_json rather than `Display`, whose formatter machinery costs several
    // times as much. Into memory it cannot fail (a `Value`'s keys are strings), so the
    // fallback is never taken.
    serde_json::to_string(&SuccessContent(result))
        .unwrap_or_else(|_| r#"{"ok":true,"result":null}"#.to_owned())
}

/// One tool.
#[derive(Clone)]
pub struct ToolDefinition {
    name: Arc<str>,
    description: Arc<str>,
    parameters: Arc<Value>,
    /// `parameters` read for checking calls.
    schema: Arc<schema::ArgumentSchema>,
    /// The OpenAI `tools[]` entry as JSON text, encoded once here because every POST of a turn
    /// carries it.
    spec: Arc<str>,
    category: u32,
    /// Whether the tool only reads (MCP's `readOnlyHint`).
    read_only: bool,
    /// A short name for people (MCP's `title`).
    title: Option<Arc<str>>,
    /// The JSON schema of a successful call's result (MCP's `outputSchema`).
    result_schema: Option<Arc<Value>>,
    handler: Arc<Handler>,
}

impl std::fmt::Debug for ToolDefinition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDefinition")
            .field("name", &self.name)
            .field("category", &format_args!("{:#04x}", self.category))
            .finish_non_exhaustive()
    }
}

impl ToolDefinition {
    /// A tool named `name` in `category` (one of the `ModelOptions` tool bits), described for
    /// the model, whose arguments follow the JSON schema `parameters`.
    pub fn new<F, Fut>(name: &str, category: u32, description: &str, parameters: Value, handler: F) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        Self::with_caller(name, category, description, parameters, move |arguments, _| {
            handler(arguments)
        })
    }

    /// Like [`new`](Self::new), for a tool whose handler needs to know who calls it.
    pub fn with_caller<F, Fut>(
        name: &str,
        category: u32,
        description: &str,
        parameters: Value,
        handler: F,
    ) -> Self
    where
        F: Fn(Value, ToolCaller) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        Self::with_output(
            name,
            category,
            description,
            parameters,
            move |arguments, caller| handler(arguments, caller).map(|outcome| outcome.map(ToolOutput::from)),
        )
    }

    /// A proposing tool (category `ModelOptions::PROPOSALS`): its handler gives the result and
    /// the id of the proposal it made.
    pub fn proposing<F, Fut>(name: &str, description: &str, parameters: Value, handler: F) -> Self
    where
        F: Fn(Value, ToolCaller) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(Value, ProposalId), ToolError>> + Send + 'static,
    {
        Self::with_output(
            name,
            ModelOptions::PROPOSALS,
            description,
            parameters,
            move |arguments, caller| {
                handler(arguments, caller).map(|outcome| {
                    outcome.map(|(result, id)| ToolOutput {
                        result,
                        proposal: Some(id),
                    })
                })
            },
        )
    }

    fn with_output<F, Fut>(
        name: &str,
        category: u32,
        description: &str,
        parameters: Value,
        handler: F,
    ) -> Self
    where
        F: Fn(Value, ToolCaller) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        let spec = json!({"type": "function", "function": {
            "name": name, "description": description, "parameters": &parameters
        }});
        Self {
            name: Arc::from(name),
            description: Arc::from(description),
            schema: Arc::new(schema::ArgumentSchema::new(&parameters)),
            parameters: Arc::new(parameters),
            spec: Arc::from(spec.to_string()),
            category,
            read_only: false,
            title: None,
            result_schema: None,
            handler: Arc::new(move |arguments, caller| Box::pin(handler(arguments, caller)) as ToolFuture),
        }
    }

    /// Marks the tool as one that only reads (the runtime's own tools all do).
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// Whether the tool only reads.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Gives the tool a short name for people, as clients list it.
    pub fn titled(mut self, title: &str) -> Self {
        self.title = Some(Arc::from(title));
        self
    }

    /// The tool's short name for people, when it has one.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// Declares the JSON schema every successful call's result follows.
    pub fn with_result_schema(mut self, schema: Value) -> Self {
        self.result_schema = Some(Arc::new(schema));
        self
    }

    /// The JSON schema of a successful call's result, when declared.
    pub fn result_schema(&self) -> Option<&Value> {
        self.result_schema.as_deref()
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The description the model reads.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The JSON schema of the arguments.
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// The `ModelOptions` category bit.
    pub fn category(&self) -> u32 {
        self.category
    }

    /// The OpenAI `tools[]` entry for this tool, as JSON text.
    pub fn openai_spec(&self) -> &str {
        &self.spec
    }

    /// Validates `arguments` against the schema, then runs the handler for `caller`.
    #[crate::compiled_once]
    pub async fn invoke(&self, arguments: Value, caller: ToolCaller) -> Result<ToolOutput, ToolError> {
        self.schema.check(&arguments)?;
        (self.handler)(arguments, caller).await
    }

    /// One call as every transport runs it (the chat path, MCP, the framed protocol): the
    /// arguments checked, the handler given at most `limit`, a panic isolated and reported as
    /// an `internal` failure, a timeout as a retryable `timeout`.
    #[crate::compiled_once]
    pub async fn call(
        &self,
        arguments: Value,
        caller: ToolCaller,
        limit: Duration,
    ) -> Result<ToolOutput, ToolError> {
        let run = AssertUnwindSafe(self.invoke(arguments, caller)).catch_unwind();
        match tokio::time::timeout(limit, run).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => {
                tracing::error!(tool = self.name(), "tool panicked");
                Err(ToolError::new("internal", "the tool failed unexpectedly"))
            }
            Err(_) => Err(ToolError::new(
                "timeout",
                format!("the tool did not answer within {} ms", limit.as_millis()),
            )
            .retryable()),
        }
    }
}

/// The failure for a call of a tool that is not offered: it names the ones that are.
pub fn unknown_tool(offered: &[ToolDefinition]) -> ToolError {
    ToolError::new(
        "unknown_tool",
        format!(
            "that tool does not exist; the tools offered are: {}",
            offered
                .iter()
                .map(ToolDefinition::name)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
}

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistrationError {
    /// A tool of that name exists already.
    #[error("a tool named '{0}' is already registered")]
    Duplicate(String),
    /// The name is not one models accept (`^[a-zA-Z0-9_-]{1,64}$`).
    #[error("invalid tool name '{0}': use 1 to 64 letters, digits, '_' or '-'")]
    InvalidName(String),
    /// The name is reserved for the runtime's own tools.
    #[error("tool name '{0}' is reserved: names starting with 'runtime_' belong to the runtime")]
    Reserved(String),
    /// The category is not exactly one tool bit.
    #[error("tool '{name}' has category {category:#04x}; use one of 0x04, 0x08, 0x10, 0x20, 0x40")]
    InvalidCategory {
        /// The tool.
        name: String,
        /// The category given.
        category: u32,
    },
}

/// The tool categories, in catalog order.
pub const CATEGORIES: [u32; 5] = [
    ModelOptions::UNS_TOOLS,
    ModelOptions::ALARM_TOOLS,
    ModelOptions::HISTORIAN_TOOLS,
    ModelOptions::CUSTOM_TOOLS,
    ModelOptions::PROPOSALS,
];

/// Every tool a solution has, from which each turn's catalog is assembled.
#[derive(Debug, Default)]
pub struct ToolCatalog {
    tools: RwLock<Arc<Vec<ToolDefinition>>>,
    /// The tools offered under each set of open categories asked for so far, kept until the
    /// next registration: a turn takes its catalog as one shared slice instead of copying
    /// every tool (five reference counts each) out of the list. At most one entry per set of
    /// the five category bits.
    offered: RwLock<Vec<(u32, Arc<[ToolDefinition]>)>>,
}

impl ToolCatalog {
    /// Adds a tool.
    pub fn register(&self, tool: ToolDefinition) -> Result<(), RegistrationError> {
        let valid_name = (1..=64).contains(&tool.name.len())
            && tool
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
        if !valid_name {
            return Err(RegistrationError::InvalidName(tool.name.to_string()));
        }
        if !CATEGORIES.contains(&tool.category) {
            return Err(RegistrationError::InvalidCategory {
                name: tool.name.to_string(),
                category: tool.category,
            });
        }
        let mut tools = self
            .tools
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if tools.iter().any(|known| known.name == tool.name) {
            return Err(RegistrationError::Duplicate(tool.name.to_string()));
        }
        let mut next = Vec::clone(&tools);
        next.push(tool);
        *tools = Arc::new(next);
        // Still under the list's lock, so no catalog made from the old list is kept after it.
        self.offered
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
        Ok(())
    }

    /// The tools offered under `options`: master bit 0x02 AND each tool's category bit, in
    /// registration order. Empty when the master bit is off.
    pub fn offered(&self, options: ModelOptions) -> Arc<[ToolDefinition]> {
        let open = CATEGORIES
            .iter()
            .filter(|&&category| options.offers(category))
            .fold(0, |open, category| open | category);
        let cached = self
            .offered
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find(|(categories, _)| *categories == open)
            .map(|(_, tools)| Arc::clone(tools));
        if let Some(tools) = cached {
            return tools;
        }
        let tools = self
            .tools
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let offered: Arc<[ToolDefinition]> = tools
            .iter()
            .filter(|tool| open & tool.category != 0)
            .cloned()
            .collect();
        // Kept under the list's read lock: a registration (which takes its write lock) clears
        // the cache after this, never before.
        let mut cache = self
            .offered
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !cache.iter().any(|(categories, _)| *categories == open) {
            cache.push((open, Arc::clone(&offered)));
        }
        offered
    }

    /// The tool named `name`, whatever the gates: for in-process callers the category bits do
    /// not govern (solution scripts read tags through the same tools the model does).
    pub fn get(&self, name: &str) -> Option<ToolDefinition> {
        self.tools
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find(|tool| &*tool.name == name)
            .cloned()
    }

    /// Every registered tool's name.
    pub fn names(&self) -> Vec<String> {
        let tools = self
            .tools
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tools.iter().map(|tool| tool.name.to_string()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn script() -> ToolCaller {
        ToolCaller::Script {
            script: "Test".into(),
        }
    }

    fn echo(name: &str, category: u32) -> ToolDefinition {
        ToolDefinition::new(
            name,
            category,
            "Echoes its arguments.",
            json!({"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]}),
            |arguments| async move { Ok(arguments) },
        )
    }

    #[tokio::test]
    async fn a_call_checks_its_arguments_and_survives_slow_and_panicking_handlers() {
        let fine = echo("fine", ModelOptions::UNS_TOOLS);
        assert_eq!(
            fine.call(json!({"tag": "x"}), script(), TOOL_TIMEOUT).await,
            Ok(json!({"tag": "x"}).into())
        );
        let refused = fine
            .call(json!({}), script(), TOOL_TIMEOUT)
            .await
            .expect_err("refused");
        assert_eq!(refused.kind, "invalid_arguments");
        let slow = ToolDefinition::new(
            "slow",
            ModelOptions::UNS_TOOLS,
            "",
            json!({"type": "object"}),
            |_| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok(json!(null))
            },
        );
        let timed_out = slow
            .call(json!({}), script(), Duration::from_millis(20))
            .await
            .expect_err("timed out");
        assert_eq!((timed_out.kind.as_str(), timed_out.retryable), ("timeout", true));
        let broken = ToolDefinition::new(
            "broken",
            ModelOptions::UNS_TOOLS,
            "",
            json!({"type": "object"}),
            |arguments: Value| async move {
                assert!(arguments.is_null(), "a handler bug");
                Ok(arguments)
            },
        );
        let failed = broken
            .call(json!({}), script(), TOOL_TIMEOUT)
            .await
            .expect_err("isolated");
        assert_eq!((failed.kind.as_str(), failed.retryable), ("internal", false));
        let unknown = unknown_tool(&[fine, slow]);
        assert_eq!(unknown.kind, "unknown_tool");
        assert!(unknown.message.ends_with("fine, slow"), "{}", unknown.message);
    }

    #[tokio::test]
    async fn a_tool_made_with_its_caller_is_told_who_calls() {
        let who = ToolDefinition::with_caller(
            "who",
            ModelOptions::PROPOSALS,
            "Says who calls it.",
            json!({"type": "object"}),
            |_, caller: ToolCaller| async move { Ok(json!(caller.describe())) },
        );
        let turn = ToolCaller::ChatTurn {
            connection: uuid::Uuid::from_u128(1),
            user: "alice".into(),
            turn: 4,
        };
        assert_eq!(
            who.call(json!({}), turn, TOOL_TIMEOUT).await,
            Ok(json!("the assistant (turn 4, asked by alice)").into())
        );
        assert_eq!(
            who.call(json!({}), script(), TOOL_TIMEOUT).await,
            Ok(json!("script Test").into())
        );
    }

    #[tokio::test]
    async fn a_proposing_tool_gives_its_proposal_beside_the_result() {
        let proposing =
            ToolDefinition::proposing("propose", "Proposes.", json!({"type": "object"}), |_, _| async {
                Ok((json!({"status": "waiting"}), ProposalId::new("p-0123456789ab")))
            });
        assert_eq!(proposing.category(), ModelOptions::PROPOSALS);
        let output = proposing
            .call(json!({}), script(), TOOL_TIMEOUT)
            .await
            .expect("proposes");
        assert_eq!(output.proposal, Some(ProposalId::new("p-0123456789ab")));
        assert_eq!(output.result, json!({"status": "waiting"}));
        // A result that merely names a proposal is no proposal.
        let echoing = echo("echo", ModelOptions::PROPOSALS);
        let output = echoing
            .call(
                json!({"tag": "x", "proposal": "p-0123456789ab"}),
                script(),
                TOOL_TIMEOUT,
            )
            .await
            .expect("echoes");
        assert_eq!(output.proposal, None);
    }

    fn catalog() -> ToolCatalog {
        let catalog = ToolCatalog::default();
        for (name, category) in [
            ("uns_a", ModelOptions::UNS_TOOLS),
            ("uns_b", ModelOptions::UNS_TOOLS),
            ("alarms", ModelOptions::ALARM_TOOLS),
            ("history", ModelOptions::HISTORIAN_TOOLS),
            ("custom", ModelOptions::CUSTOM_TOOLS),
            ("propose", ModelOptions::PROPOSALS),
        ] {
            catalog.register(echo(name, category)).expect("registers");
        }
        catalog
    }

    #[test]
    fn registration_refuses_duplicates_bad_names_and_bad_categories() {
        let catalog = catalog();
        assert_eq!(
            catalog.register(echo("uns_a", ModelOptions::UNS_TOOLS)),
            Err(RegistrationError::Duplicate("uns_a".into()))
        );
        assert!(matches!(
            catalog.register(echo("has space", ModelOptions::UNS_TOOLS)),
            Err(RegistrationError::InvalidName(_))
        ));
        assert!(matches!(
            catalog.register(echo(
                "two_bits",
                ModelOptions::UNS_TOOLS | ModelOptions::ALARM_TOOLS
            )),
            Err(RegistrationError::InvalidCategory { .. })
        ));
    }

    #[tokio::test]
    async fn invoke_validates_arguments_and_errors_have_the_canonical_shape() {
        let tool = echo("echo", ModelOptions::UNS_TOOLS);
        assert_eq!(
            tool.invoke(json!({"tag": "Pump1.FlowRate"}), script()).await,
            Ok(json!({"tag": "Pump1.FlowRate"}).into())
        );
        let error = tool.invoke(json!({}), script()).await.expect_err("missing tag");
        assert_eq!(error.kind, "invalid_arguments");
        let content = error.to_content();
        assert_eq!(content["ok"], false);
        for key in ["type", "message", "details", "retryable"] {
            assert!(content["error"].get(key).is_some(), "{key} in {content}");
        }
        assert_eq!(success_content(json!(1)), json!({"ok": true, "result": 1}));
        let result = json!({"tag": "Pump1.Speed", "value": 1.5, "note": "a \"quoted\" word"});
        assert_eq!(
            success_content_text(&result),
            success_content(result).to_string(),
            "one content, whichever way it is written"
        );
        let spec: Value = serde_json::from_str(tool.openai_spec()).expect("the spec is JSON");
        assert_eq!(
            spec,
            json!({"type": "function", "function": {
                "name": "echo", "description": "Echoes its arguments.", "parameters": tool.parameters()
            }})
        );
    }

    #[test]
    fn a_catalog_offered_before_a_registration_is_not_offered_after_it() {
        let catalog = catalog();
        let options = ModelOptions::new(ModelOptions::ENABLE_RUNTIME_MCP | 0x20);
        let before = catalog.offered(options);
        assert!(
            Arc::ptr_eq(&before, &catalog.offered(options)),
            "made once, then shared"
        );
        catalog.register(echo("custom_two", 0x20)).expect("registers");
        let names: Vec<String> = catalog
            .offered(options)
            .iter()
            .map(|tool| tool.name().to_owned())
            .collect();
        assert_eq!(names, ["custom", "custom_two"]);
        assert_eq!(before.len(), 1, "the catalog a turn holds stays as it was");
    }

    proptest! {
        #[test]
        fn the_offered_catalog_is_master_and_category(bits in any::<u32>()) {
            let options = ModelOptions::new(bits);
            let offered: Vec<String> = catalog().offered(options).iter().map(|t| t.name().to_owned()).collect();
            let master = bits & ModelOptions::ENABLE_RUNTIME_MCP != 0;
            let mut expected = Vec::new();
            for (name, bit) in [("uns_a", 0x04), ("uns_b", 0x04), ("alarms", 0x08), ("history", 0x10), ("custom", 0x20), ("propose", 0x40)] {
                if master && bits & bit != 0 {
                    expected.push(name.to_owned());
                }
            }
            prop_assert_eq!(offered, expected);
        }
    }
}
