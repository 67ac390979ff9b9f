//! RuntimeMCP's resources under `tserver://`: the plant model (whole, or a folder's part), each
//! document of the plant, the active alarms and the pending proposals (and each proposal),
//! listed and read under the same ModelOptions bits as the tools that read the same things, and
//! subscriptions that tell a session when the alarms or the proposals change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use localai::ModelOptions;
use localai::tools::ToolCaller;
use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};
use rmcp::model::{Resource, ResourceContents, ResourceTemplate};
use rmcp::service::Peer;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};
use tokio_util::sync::{CancellationToken, DropGuard};

use plant::Runtime;
use plant::resources::{MAX_MODEL_BYTES, pending_proposals, plant_model};

const PLANT_MODEL: &str = "tserver://plant/model";
const MODEL_FOLDER: &str = "tserver://plant/model/";
const DOCUMENT: &str = "tserver://documents/";
const ACTIVE_ALARMS: &str = "tserver://alarms/active";
const PENDING_PROPOSALS: &str = "tserver://proposals/pending";
const PROPOSAL: &str = "tserver://proposals/";
const JSON: &str = "application/json";

/// The most alarms the active alarms resource lists: the alarm tool's ceiling.
const LISTED_ALARMS: u64 = 200;

/// How long a subscription gathers changes before it tells its session: a flood of alarm
/// changes is one notification a quarter second, not one a change.
const GATHERING: Duration = Duration::from_millis(250);

/// What a resource URI names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Named {
    /// The plant model at and below a folder (`""`: the whole plant).
    Model(String),
    /// A document, by its path.
    Document(String),
    ActiveAlarms,
    PendingProposals,
    /// A proposal, by its id.
    Proposal(String),
}

impl Named {
    fn parse(uri: &str) -> Option<Self> {
        let decoded = |rest: &str| {
            percent_decode_str(rest)
                .decode_utf8()
                .ok()
                .map(|text| text.into_owned())
        };
        Some(match uri {
            PLANT_MODEL => Self::Model(String::new()),
            ACTIVE_ALARMS => Self::ActiveAlarms,
            PENDING_PROPOSALS => Self::PendingProposals,
            _ => {
                if let Some(folder) = uri.strip_prefix(MODEL_FOLDER) {
                    Self::Model(decoded(folder)?)
                } else if let Some(path) = uri.strip_prefix(DOCUMENT) {
                    Self::Document(decoded(path)?)
                } else {
                    Self::Proposal(decoded(uri.strip_prefix(PROPOSAL)?)?)
                }
            }
        })
    }

    /// The tool bit that opens it: the bit of the tools that read the same things.
    fn bit(&self) -> u32 {
        match self {
            Self::Model(_) | Self::Document(_) => ModelOptions::UNS_TOOLS,
            Self::ActiveAlarms => ModelOptions::ALARM_TOOLS,
            Self::PendingProposals | Self::Proposal(_) => ModelOptions::PROPOSALS,
        }
    }
}

/// What a path segment of a URI keeps as it is: letters, digits, `/` and `-._~`.
const PATH: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b']')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

fn document_uri(path: &str) -> String {
    format!("{DOCUMENT}{}", utf8_percent_encode(path, PATH))
}

/// The tool bits open now: those of the tools offered (none while RuntimeMCP is off).
async fn open_bits(runtime: &Runtime) -> Result<u32, ErrorData> {
    let offered = runtime
        .offered_tools()
        .await
        .map_err(|error| super::closed(&error))?;
    Ok(offered.iter().fold(0, |bits, tool| bits | tool.category()))
}

fn refused(uri: &str) -> ErrorData {
    // What a bit closes reads as what does not exist: the client learns nothing more.
    ErrorData::resource_not_found(format!("no resource {uri:?} is offered"), None)
}

/// Every resource the open bits offer: the plant model, each document, the active alarms and
/// the pending proposals.
pub(super) async fn list(runtime: &Runtime) -> Result<Vec<Resource>, ErrorData> {
    let bits = open_bits(runtime).await?;
    let mut listed = Vec::new();
    if bits & ModelOptions::UNS_TOOLS != 0 {
        listed.push(
            Resource::new(PLANT_MODEL, "plant-model")
                .with_title("The plant model")
                .with_description(
                    "Folders, equipment and tags (type, units, range, alarms) of the whole plant, as JSON; \
                     a plant too large for one read lists what fits and reads by folder \
                     (tserver://plant/model/{folder}).",
                )
                .with_mime_type(JSON),
        );
        let library = runtime.plant().reader().library();
        for document in library.documents().documents() {
            listed.push(
                Resource::new(document_uri(&document.path), document.path.clone())
                    .with_title(document.title.clone())
                    .with_mime_type(mime_of(&document.path))
                    .with_size(document.text.len() as u64),
            );
        }
    }
    if bits & ModelOptions::ALARM_TOOLS != 0 {
        listed.push(
            Resource::new(ACTIVE_ALARMS, "active-alarms")
                .with_title("The active alarms")
                .with_description(
                    "The alarms needing attention now, highest priority first, with what to do about each, \
                     as JSON; subscribe to be told when they change.",
                )
                .with_mime_type(JSON),
        );
    }
    if bits & ModelOptions::PROPOSALS != 0 {
        listed.push(
            Resource::new(PENDING_PROPOSALS, "pending-proposals")
                .with_title("The proposals waiting for an operator")
                .with_description(
                    "Writes, acknowledgements and shelvings proposed and not yet decided, as JSON; \
                     tserver://proposals/{id} follows one to its decision.",
                )
                .with_mime_type(JSON),
        );
    }
    Ok(listed)
}

/// The templates the open bits offer: a folder's part of the plant model, and one proposal.
pub(super) async fn templates(runtime: &Runtime) -> Result<Vec<ResourceTemplate>, ErrorData> {
    let bits = open_bits(runtime).await?;
    let mut listed = Vec::new();
    if bits & ModelOptions::UNS_TOOLS != 0 {
        listed.push(
            ResourceTemplate::new(format!("{MODEL_FOLDER}{{+folder}}"), "plant-model-folder")
                .with_title("A folder of the plant model")
                .with_description(
                    "The folders, equipment and tags at and below a UNS folder, e.g. Plant/Area1.",
                )
                .with_mime_type(JSON),
        );
    }
    if bits & ModelOptions::PROPOSALS != 0 {
        listed.push(
            ResourceTemplate::new(format!("{PROPOSAL}{{id}}"), "proposal")
                .with_title("Where a proposal stands")
                .with_description(
                    "Pending, approved (by whom, and what carrying it out did), declined (by whom, with the \
                     comment) or expired; subscribe to be told when it is decided.",
                )
                .with_mime_type(JSON),
        );
    }
    Ok(listed)
}

/// The contents of `uri`, for `caller`.
pub(super) async fn read(
    runtime: &Runtime,
    uri: &str,
    caller: ToolCaller,
) -> Result<ResourceContents, ErrorData> {
    let named = Named::parse(uri).ok_or_else(|| refused(uri))?;
    if open_bits(runtime).await? & named.bit() == 0 {
        return Err(refused(uri));
    }
    let (text, mime) = match named {
        Named::Model(folder) => {
            let reader = runtime.plant().reader();
            // Walking a large plant is work for a blocking thread, not an async worker.
            let text = tokio::task::spawn_blocking(move || plant_model(&reader, &folder, MAX_MODEL_BYTES))
                .await
                .map_err(|_| ErrorData::internal_error("the plant model could not be read", None))?;
            (text.ok_or_else(|| refused(uri))?, JSON.to_owned())
        }
        Named::Document(path) => {
            let library = runtime.plant().reader().library();
            let document = library
                .documents()
                .documents()
                .iter()
                .find(|document| document.path == path)
                .ok_or_else(|| refused(uri))?;
            (document.text.clone(), mime_of(&path).to_owned())
        }
        Named::ActiveAlarms => {
            let listed = runtime
                .call_tool(
                    "runtime_get_active_alarms",
                    json!({"max_results": LISTED_ALARMS}),
                    caller,
                )
                .await
                .map_err(|error| super::closed(&error))?
                .map_err(|error| ErrorData::internal_error(error.message, None))?;
            (listed.to_string(), JSON.to_owned())
        }
        Named::PendingProposals => (
            pending_proposals(runtime.proposals(), SystemTime::now()).to_string(),
            JSON.to_owned(),
        ),
        Named::Proposal(id) => {
            let proposal = runtime.proposals().get(&id).ok_or_else(|| refused(uri))?;
            (
                plant::tools::proposal_standing(&proposal).to_string(),
                JSON.to_owned(),
            )
        }
    };
    Ok(ResourceContents::TextResourceContents {
        uri: uri.to_owned(),
        mime_type: Some(mime),
        text,
        meta: None,
    })
}

/// A document's MIME type, by its file name.
fn mime_of(path: &str) -> &'static str {
    let lower = path.to_ascii_lowercase();
    if lower.ends_with(".md") || lower.ends_with(".markdown") {
        "text/markdown"
    } else {
        "text/plain"
    }
}

/// One session's resource subscriptions, each a task watching what its resource reads; they
/// end when unsubscribed or with the session.
#[derive(Debug, Default)]
pub(super) struct ResourceSubscriptions {
    watching: Mutex<HashMap<String, DropGuard>>,
}

impl ResourceSubscriptions {
    /// Watches `uri` for `peer`: the active alarms, the pending proposals or one proposal.
    pub(super) async fn subscribe(
        &self,
        runtime: &Runtime,
        uri: &str,
        peer: Peer<RoleServer>,
    ) -> Result<(), ErrorData> {
        let named = Named::parse(uri).ok_or_else(|| refused(uri))?;
        if open_bits(runtime).await? & named.bit() == 0 {
            return Err(refused(uri));
        }
        // What the resource reads, and the change it waits for: the plant's for the alarms, the
        // board's for the proposals.
        let (look, mut wake): (Box<dyn Fn() -> Value + Send + Sync>, _) = match named {
            Named::ActiveAlarms => {
                let plant = runtime.plant().reader();
                let changes = plant.changes();
                (Box::new(move || alarm_states(&plant)), changes)
            }
            Named::PendingProposals => {
                let board = Arc::clone(runtime.proposals());
                let revision = board.revision();
                (
                    Box::new(move || pending_proposals(&board, SystemTime::now())),
                    revision,
                )
            }
            Named::Proposal(id) => {
                let board = Arc::clone(runtime.proposals());
                if board.get(&id).is_none() {
                    return Err(refused(uri));
                }
                let revision = board.revision();
                let look = move || {
                    board
                        .get(&id)
                        .map_or(Value::Null, |proposal| plant::tools::proposal_standing(&proposal))
                };
                (Box::new(look), revision)
            }
            Named::Model(_) | Named::Document(_) => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "{uri} changes only with the plant file; subscribe to {ACTIVE_ALARMS}, {PENDING_PROPOSALS} or a proposal"
                    ),
                    None,
                ));
            }
        };
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let uri_text = uri.to_owned();
        tokio::spawn(async move {
            let mut last = look();
            loop {
                tokio::select! {
                    () = stopped.cancelled() => return,
                    changed = wake.changed() => if changed.is_err() { return },
                }
                tokio::time::sleep(GATHERING).await;
                let now = look();
                if now != last {
                    last = now;
                    if peer
                        .notify_resource_updated(rmcp::model::ResourceUpdatedNotificationParam::new(
                            uri_text.clone(),
                        ))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        });
        self.lock().insert(uri.to_owned(), stop.drop_guard());
        Ok(())
    }

    /// Stops watching `uri`; whether it was watched.
    pub(super) fn unsubscribe(&self, uri: &str) -> bool {
        self.lock().remove(uri).is_some()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, DropGuard>> {
        self.watching.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Every alarm not normal with how it stands: what a change of the active alarms changes.
fn alarm_states(plant: &plant::PlantReader) -> Value {
    let objects = plant.objects();
    objects
        .alarms()
        .iter()
        .filter_map(|alarm| {
            let status = alarm.status();
            let label = status.label();
            (label != "normal").then(|| json!([alarm.definition().name, label]))
        })
        .collect::<Vec<_>>()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_name_what_they_read_and_paths_go_there_and_back() {
        assert_eq!(Named::parse(PLANT_MODEL), Some(Named::Model(String::new())));
        assert_eq!(
            Named::parse("tserver://plant/model/Plant/Area%201"),
            Some(Named::Model("Plant/Area 1".to_owned()))
        );
        let uri = document_uri("docs/pump manual (rev 2).md");
        assert_eq!(uri, "tserver://documents/docs/pump%20manual%20(rev%202).md");
        assert_eq!(
            Named::parse(&uri),
            Some(Named::Document("docs/pump manual (rev 2).md".to_owned()))
        );
        assert_eq!(Named::parse(ACTIVE_ALARMS), Some(Named::ActiveAlarms));
        assert_eq!(Named::parse(PENDING_PROPOSALS), Some(Named::PendingProposals));
        assert_eq!(
            Named::parse("tserver://proposals/p-0123456789ab"),
            Some(Named::Proposal("p-0123456789ab".to_owned()))
        );
        assert_eq!(Named::parse("file:///etc/passwd"), None);
        assert_eq!(Named::parse("tserver://plant/model/%FF"), None, "not UTF-8");
    }
}
