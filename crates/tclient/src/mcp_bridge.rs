//! `tclient mcp`: an MCP server on standard input and output for clients that only launch a
//! command (Claude Desktop), answering from a running tserver over the framed protocol
//! (ListTools, CallTool) under the login's user. It adds nothing of its own: the tools, gates
//! and results are the server's.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

use service_client::{ClientError, ErrorCode, FailoverClient};

/// The MCP side of the bridge.
#[derive(Debug, Clone)]
struct StdioBridge {
    client: FailoverClient,
}

/// The MCP error for a failed framed call.
fn failed(error: &ClientError) -> ErrorData {
    match error {
        ClientError::Server {
            code: ErrorCode::ToolsDisabled,
            message,
        } => ErrorData::invalid_request(message.clone(), None),
        other => ErrorData::internal_error(format!("tserver: {other}"), None),
    }
}

impl ServerHandler for StdioBridge {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "tserver (tclient mcp)",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Read the live plant of a TServer: tag values with their quality and time, the UNS tree, \
                 equipment, alarms and history. Values whose quality is not Good are not current.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let listed = self.client.list_tools().await.map_err(|error| failed(&error))?;
        let tools = listed
            .into_iter()
            .map(|tool| {
                let schema: JsonObject = serde_json::from_str(&tool.input_schema_json).unwrap_or_default();
                Tool::new(tool.name, tool.description, Arc::new(schema))
                    .with_annotations(ToolAnnotations::new().read_only(tool.read_only))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let reply = self
            .client
            .call_tool(&request.name, &arguments)
            .await
            .map_err(|error| failed(&error))?;
        let content = vec![ContentBlock::text(reply.content_json)];
        let result = if reply.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        Ok(result.into())
    }
}

/// Serves MCP on standard input and output until the MCP client closes them.
pub(crate) async fn serve_stdio(client: FailoverClient) -> anyhow::Result<()> {
    let bridge = StdioBridge { client };
    let running = bridge.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
