//! RuntimeMCP: the runtime tools as an MCP server (rmcp), from the same catalog, gates and
//! runner as the chat path, so `tools/call` answers exactly the content a model reads: the
//! canonical `{"ok": true, "result": ...}` as text and as `structuredContent`, which follows the
//! tool's declared `outputSchema`; a refusal is `isError` with the canonical failure. Resources
//! (`resources.rs`) and prompts (`prompts.rs`) are offered beside the tools.

mod prompts;
mod resources;

use std::sync::Arc;

use localai::tools::{ToolCaller, ToolDefinition, success_content};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, GetPromptRequestParams, GetPromptResponse, Implementation, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, Tool, ToolAnnotations, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use plant::{Runtime, ToolsClosed};
use store::TokenUser;

/// One MCP session's handler (sessions share the runtime; each has its own resource
/// subscriptions, which end with it).
#[derive(Debug, Clone)]
pub(super) struct RuntimeMcp {
    runtime: Runtime,
    subscriptions: Arc<resources::ResourceSubscriptions>,
}

impl RuntimeMcp {
    pub(super) fn new(runtime: Runtime) -> Self {
        Self {
            runtime,
            subscriptions: Arc::default(),
        }
    }
}

/// The MCP error for tools that are not offered.
pub(super) fn closed(error: &ToolsClosed) -> ErrorData {
    match error {
        ToolsClosed::Disabled => ErrorData::invalid_request(error.to_string(), None),
        ToolsClosed::Settings(_) => ErrorData::internal_error(error.to_string(), None),
    }
}

/// Who the request's token acts as (the HTTP layer put it there; stdio has none).
fn caller(context: &RequestContext<RoleServer>) -> Option<TokenUser> {
    context
        .extensions
        .get::<http::request::Parts>()?
        .extensions
        .get::<TokenUser>()
        .cloned()
}

/// The most characters of an MCP client's own name kept (it is the client's text).
const CLIENT_NAME_CHARS: usize = 64;

/// The tool caller of a request: its session, the token's user and the client's own name.
fn tool_caller(context: &RequestContext<RoleServer>) -> Option<ToolCaller> {
    let user = caller(context)?;
    let parts = context.extensions.get::<http::request::Parts>()?;
    let session = parts
        .headers
        .get(super::sessions::SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let client: String = context
        .peer
        .peer_info()
        .map(|info| info.client_info.name.chars().take(CLIENT_NAME_CHARS).collect())
        .unwrap_or_default();
    Some(ToolCaller::Mcp {
        session: Arc::from(session),
        user: Arc::from(user.user.as_str()),
        client: Arc::from(client.as_str()),
    })
}

impl ServerHandler for RuntimeMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_completions()
                .enable_prompts()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_tools()
                .build(),
        )
        .with_server_info(Implementation::new("tserver", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Read the live plant of this TServer: tag values with their quality and time, the UNS \
                 tree, equipment, alarms and history. Values whose quality is not Good are not current. \
                 The proposal tools only propose: an operator decides, and runtime_get_proposal (or the \
                 resource tserver://proposals/{id}) says what was decided; nothing is done before.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let offered = self
            .runtime
            .offered_tools()
            .await
            .map_err(|error| closed(&error))?;
        let tools = offered.iter().map(listed).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(caller) = tool_caller(&context) else {
            return Err(ErrorData::invalid_request("no verified caller", None));
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let outcome = self
            .runtime
            .call_tool(&request.name, arguments, caller)
            .await
            .map_err(|error| closed(&error))?;
        let counted = if outcome.is_ok() { "ok" } else { "error" };
        metrics::counter!(crate::telemetry::MCP_CALLS, "outcome" => counted).increment(1);
        let result = match outcome {
            // The text a model reads and the structured content are the same JSON.
            Ok(result) => CallToolResult::structured(success_content(result)),
            Err(error) => CallToolResult::error(vec![ContentBlock::text(error.to_content().to_string())]),
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(
            resources::list(&self.runtime).await?,
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(&self.runtime).await?,
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let Some(caller) = tool_caller(&context) else {
            return Err(ErrorData::invalid_request("no verified caller", None));
        };
        let contents = resources::read(&self.runtime, &request.uri, caller).await?;
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions
            .subscribe(&self.runtime, &request.uri, context.peer)
            .await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions.unsubscribe(&request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(prompts::list(&self.runtime)))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        Ok(prompts::get(&self.runtime, &request)?.into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        prompts::complete(&self.runtime, &request)
    }
}

/// A tool as MCP lists it: its title, its arguments' and its content's schemas, and what it
/// may do (the runtime tools only read; the proposal tools add a proposal, never touching the
/// plant, and each call makes a new one).
fn listed(tool: &ToolDefinition) -> Tool {
    let mut listed = Tool::new(
        tool.name().to_owned(),
        tool.description().to_owned(),
        Arc::new(object(tool.parameters())),
    )
    .with_annotations(
        ToolAnnotations::new()
            .read_only(tool.is_read_only())
            .destructive(false)
            .idempotent(tool.is_read_only())
            .open_world(false),
    );
    if let Some(title) = tool.title() {
        listed = listed.with_title(title);
    }
    if let Some(result) = tool.result_schema() {
        listed = listed.with_raw_output_schema(Arc::new(content_schema(result)));
    }
    listed
}

/// The schema of a successful call's content: the canonical success around the tool's result.
fn content_schema(result: &Value) -> JsonObject {
    object(&serde_json::json!({
        "type": "object",
        "properties": {"ok": {"const": true}, "result": result},
        "required": ["ok", "result"],
    }))
}

fn object(schema: &Value) -> JsonObject {
    match schema {
        Value::Object(schema) => schema.clone(),
        _ => JsonObject::new(),
    }
}
