//! RuntimeMCP's prompts: the plant's prompts as MCP lists them, rendered to the user message a
//! model is given, and the completion of their arguments (and of the resource templates'
//! folders and proposal ids) from the live plant.

use rmcp::ErrorData;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptRequestParams, GetPromptResult, Prompt,
    PromptArgument, PromptMessage, Reference, Role,
};
use serde_json::Value;

use plant::Runtime;
use plant::prompts::{Completion, MAX_COMPLETIONS, PromptError, complete as complete_from};

/// Every prompt the plant offers (the built-in ones and the site's), with its arguments.
pub(super) fn list(runtime: &Runtime) -> Vec<Prompt> {
    let library = runtime.plant().reader().library();
    library
        .prompts()
        .map(|prompt| {
            let arguments = prompt
                .arguments
                .iter()
                .map(|argument| {
                    let described = PromptArgument::new(&argument.name).with_required(argument.required());
                    if argument.description.is_empty() {
                        described
                    } else {
                        described.with_description(&argument.description)
                    }
                })
                .collect();
            let description = (!prompt.description.is_empty()).then_some(prompt.description.as_str());
            let listed = Prompt::new(&prompt.name, description, Some(arguments));
            if prompt.title.is_empty() {
                listed
            } else {
                listed.with_title(&prompt.title)
            }
        })
        .collect()
}

/// The prompt `request` names, rendered with its arguments.
pub(super) fn get(runtime: &Runtime, request: &GetPromptRequestParams) -> Result<GetPromptResult, ErrorData> {
    let plant = runtime.plant().reader();
    let library = plant.library();
    let prompt = library.prompt(&request.name).map_err(|error| invalid(&error))?;
    // Arguments are strings in MCP; anything else is read as its JSON text.
    let given: Vec<(String, String)> = request
        .arguments
        .iter()
        .flatten()
        .map(|(name, value)| {
            let text = match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            (name.clone(), text)
        })
        .collect();
    let text = prompt
        .render(&plant.objects(), &given)
        .map_err(|error| invalid(&error))?;
    let mut result = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]);
    result.description = (!prompt.description.is_empty()).then(|| prompt.description.clone());
    Ok(result)
}

fn invalid(error: &PromptError) -> ErrorData {
    ErrorData::invalid_params(error.to_string(), None)
}

/// The values an argument may take, beginning with what was typed.
pub(super) fn complete(
    runtime: &Runtime,
    request: &CompleteRequestParams,
) -> Result<CompleteResult, ErrorData> {
    let typed = request.argument.value.as_str();
    let (values, total) = match &request.r#ref {
        Reference::Prompt(reference) => {
            let plant = runtime.plant().reader();
            let library = plant.library();
            let prompt = library.prompt(&reference.name).map_err(|error| invalid(&error))?;
            let Some(argument) = prompt.argument(&request.argument.name) else {
                return Ok(CompleteResult::default());
            };
            complete_from(&plant.objects(), argument.completion, typed)
        }
        Reference::Resource(template)
            if template.uri.ends_with("{+folder}") && request.argument.name == "folder" =>
        {
            complete_from(&runtime.plant().objects(), Completion::Folder, typed)
        }
        Reference::Resource(template) if template.uri.ends_with("{id}") && request.argument.name == "id" => {
            let ids: Vec<String> = runtime
                .proposals()
                .pending(std::time::SystemTime::now())
                .into_iter()
                .map(|proposal| proposal.id)
                .filter(|id| id.starts_with(typed))
                .collect();
            let total = ids.len();
            (ids.into_iter().take(MAX_COMPLETIONS).collect(), total)
        }
        _ => return Ok(CompleteResult::default()),
    };
    let listed = values.len();
    let info = CompletionInfo::with_pagination(
        values,
        Some(u32::try_from(total).unwrap_or(u32::MAX)),
        total > listed,
    )
    .map_err(|error| ErrorData::internal_error(error, None))?;
    Ok(CompleteResult::new(info))
}
