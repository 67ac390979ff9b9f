//! CallTool: one runtime tool call for a logged-in client, run as a chat turn's dispatch runs
//! it; the reply carries the same canonical content a model would read.

use std::future::Future;

use localai::tools::{ToolCaller, ToolError, success_content};
use serde_json::Value;
use tserver_proto::v1::{CallToolReply, CallToolRequest, server_frame};

use plant::Runtime;

/// The longest arguments text taken (the frame limit bounds it too).
const MAX_ARGUMENTS_BYTES: usize = 64 * 1024;

/// Reads the arguments now; the returned future runs the tool (up to its 10 s timeout, so off
/// the connection's reading loop).
pub(crate) fn apply(
    request: CallToolRequest,
    context: &super::ConnectionContext,
    runtime: &Runtime,
) -> impl Future<Output = server_frame::Body> + Send + 'static {
    let runtime = runtime.clone();
    let caller = ToolCaller::Client {
        connection: context.guid,
        user: context.login.as_ref().map_or_else(
            || std::sync::Arc::from(""),
            |login| std::sync::Arc::clone(&login.name),
        ),
    };
    async move {
        let arguments = match arguments(&request.arguments_json) {
            Ok(arguments) => arguments,
            Err(error) => return reply(Err(error)),
        };
        match runtime.call_tool(&request.name, arguments, caller).await {
            Ok(outcome) => reply(outcome),
            Err(closed) => super::list_tools::closed(closed).into_body(),
        }
    }
}

/// The arguments object; a text that is not one is a tool failure, as in a chat turn.
fn arguments(text: &str) -> Result<Value, ToolError> {
    if text.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    if text.len() > MAX_ARGUMENTS_BYTES {
        return Err(ToolError::invalid_arguments(format!(
            "the arguments are {} bytes; at most {MAX_ARGUMENTS_BYTES}",
            text.len()
        )));
    }
    match serde_json::from_str(text) {
        Ok(Value::Object(object)) => Ok(Value::Object(object)),
        _ => Err(ToolError::invalid_arguments(
            "the arguments are not a JSON object; give a JSON object that follows the tool's schema",
        )),
    }
}

fn reply(outcome: Result<Value, ToolError>) -> server_frame::Body {
    let (content, is_error) = match outcome {
        Ok(result) => (success_content(result), false),
        Err(error) => (error.to_content(), true),
    };
    server_frame::Body::CallTool(CallToolReply {
        content_json: content.to_string(),
        is_error,
    })
}
