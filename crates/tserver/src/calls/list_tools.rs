//! ListTools: the runtime tools a logged-in client may call now, as the chat path offers them
//! to a model (gates read at every call).

use tserver_proto::v1::{ErrorCode, ListToolsReply, ToolInfo, server_frame};

use super::to_proto::CallError;
use plant::{Runtime, ToolsClosed};

pub(crate) async fn apply(runtime: &Runtime) -> Result<server_frame::Body, CallError> {
    let tools = runtime.offered_tools().await.map_err(closed)?;
    let tools = tools
        .iter()
        .map(|tool| ToolInfo {
            name: tool.name().to_owned(),
            description: tool.description().to_owned(),
            input_schema_json: tool.parameters().to_string(),
            category: tool.category(),
            read_only: tool.is_read_only(),
        })
        .collect();
    Ok(server_frame::Body::ListTools(ListToolsReply { tools }))
}

/// The protocol error for tools that are not offered.
pub(crate) fn closed(error: ToolsClosed) -> CallError {
    match error {
        ToolsClosed::Disabled => CallError::new(ErrorCode::ToolsDisabled, error.to_string()),
        ToolsClosed::Settings(_) => CallError::new(ErrorCode::Internal, error.to_string()),
    }
}
