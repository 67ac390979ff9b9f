//! The documents tool (ModelOptions 0x04, with the UNS tools): `runtime_search_documents`
//! finds the passages of the plant's documents (procedures, manuals) that best answer a
//! query, optionally only those of documents about one piece of equipment, each with what a
//! citation needs: the document's title and path, the section and the lines.
//!
//! A search runs on the blocking pool, a few at once, never on an async worker: ranking a
//! large library takes a while, and the tool's timeout keeps its caller from waiting longer.

use localai::ModelOptions;
use localai::tools::{ToolDefinition, ToolError};
use serde_json::{Value, json};

use super::{Cap, bounded_list, plant_tool, short_text, text_argument};
use crate::documents::Subject;
use crate::objects::{ObjectModel, normalize_path};
use crate::plant::{PlantLibrary, PlantReader};

const PASSAGES_CAP: Cap = Cap {
    name: "max_passages",
    default: 3,
    ceiling: 10,
};

/// The longest query accepted, in characters.
const MAX_QUERY_CHARS: usize = 500;

/// Searches run at once; more wait their turn (within the tool's timeout).
static SEARCHES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

pub(super) fn tools(plant: &PlantReader) -> Vec<ToolDefinition> {
    vec![plant_tool(
        plant,
        "runtime_search_documents",
        ModelOptions::UNS_TOOLS,
        "Search the plant's documents (operating procedures, manuals) for the passages that best answer a \
         question, e.g. 'pump high motor current what to do'. Give 'equipment' (an instance such as Pump1, or a \
         UNS path such as Plant/Area1/Pump1) to search only the documents about it. Each passage comes with its \
         document's title and path, its section and its lines: cite them.",
        json!({"type": "object", "additionalProperties": false, "required": ["query"], "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
                      "description": "What to look for, in words."},
            "equipment": {"type": "string", "maxLength": 512,
                          "description": "An equipment instance name or UNS path: only documents about it."},
            "max_passages": PASSAGES_CAP.schema("passages")
        }}),
        |plant, arguments| async move {
            let turn = SEARCHES
                .acquire()
                .await
                .map_err(|_| ToolError::new("unavailable", "document search is shutting down"))?;
            // The turn goes with the search: a caller that stops waiting (its timeout) does not
            // free it while the search still runs.
            tokio::task::spawn_blocking(move || {
                let _turn = turn;
                search_documents(&plant, &arguments)
            })
            .await
            .map_err(|_| ToolError::new("internal", "the document search failed"))?
        },
    )]
}

/// The equipment a search is about, as owned text.
#[derive(Debug)]
struct About {
    name: String,
    kind: String,
    path: String,
}

impl About {
    fn subject(&self) -> Subject<'_> {
        Subject {
            name: &self.name,
            kind: &self.kind,
            path: &self.path,
        }
    }
}

fn search_documents(plant: &PlantReader, arguments: &Value) -> Result<Value, ToolError> {
    let query = text_argument(arguments, "query")?.trim();
    if query.is_empty() {
        return Err(ToolError::invalid_arguments(
            "'query' is empty: give the words to look for",
        ));
    }
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(ToolError::invalid_arguments(format!(
            "'query' is longer than {MAX_QUERY_CHARS} characters"
        )));
    }
    let library = plant.library();
    if library.is_indexing() {
        return Err(ToolError::new(
            "indexing",
            "the plant's documents are still being indexed (the server just started); try again in a few seconds",
        )
        .retryable());
    }
    let about = match arguments
        .get("equipment")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|asked| !asked.is_empty())
    {
        Some(asked) => Some(equipment_named(&library, &plant.objects(), asked)?),
        None => None,
    };
    let cap = PASSAGES_CAP.read(arguments);
    let (found, more) = library
        .documents()
        .search(query, about.as_ref().map(About::subject).as_ref(), cap);
    let passages = found
        .into_iter()
        .map(|passage| {
            json!({
                "document": passage.title,
                "path": passage.path,
                "section": passage.section,
                "lines": [passage.lines.0, passage.lines.1],
                "text": passage.text,
                "score": (f64::from(passage.score) * 100.0).round() / 100.0,
            })
        })
        .collect();
    Ok(bounded_list(
        passages,
        more,
        |passages, truncated| json!({"passages": passages, "truncated": truncated}),
    ))
}

/// The equipment `asked` names: an instance of the plant file by name or path, else a UNS
/// folder by path, else the one folder holding tags whose last segment it is (the demo's
/// `Pump1`); ignoring case. Nothing of the kind is a `not_found` naming the nearest.
fn equipment_named(library: &PlantLibrary, objects: &ObjectModel, asked: &str) -> Result<About, ToolError> {
    let folded = plant_model::fold(normalize_path(asked));
    let instance = library.instances().iter().find(|instance| {
        plant_model::fold(&instance.name) == folded || plant_model::fold(&instance.path) == folded
    });
    if let Some(instance) = instance {
        return Ok(About {
            name: instance.name.clone(),
            kind: instance.kind.clone(),
            path: instance.path.clone(),
        });
    }
    let folder = |path: &str| About {
        name: path.rsplit('/').next().unwrap_or(path).to_owned(),
        kind: String::new(),
        path: path.to_owned(),
    };
    if let Some((path, _)) = objects.folder(asked).filter(|(path, _)| !path.is_empty()) {
        return Ok(folder(path));
    }
    let equipment: Vec<&str> = objects
        .folders()
        .filter(|(path, folder)| !path.is_empty() && !folder.tags.is_empty())
        .map(|(path, _)| path)
        .collect();
    let by_leaf: Vec<&str> = equipment
        .iter()
        .copied()
        .filter(|path| plant_model::fold(path.rsplit('/').next().unwrap_or(path)) == folded)
        .collect();
    match by_leaf.as_slice() {
        [path] => Ok(folder(path)),
        [] => {
            let known = library
                .instances()
                .iter()
                .map(|instance| instance.name.as_str())
                .chain(
                    equipment
                        .iter()
                        .map(|path| path.rsplit('/').next().unwrap_or(path)),
                )
                .chain(equipment.iter().copied());
            let hint = plant_model::nearest(asked, known)
                .map(|near| format!(" (did you mean {near:?}?)"))
                .unwrap_or_default();
            Err(ToolError::not_found(format!(
                "no equipment named {asked:?}{hint}; give an instance name or a UNS path, \
                 or leave 'equipment' out to search every document"
            ))
            .with_details(json!({"equipment": short_text(asked, 200)})))
        }
        several => Err(ToolError::invalid_arguments(format!(
            "{asked:?} names several pieces of equipment ({}); give its UNS path",
            several.join(", ")
        ))
        .with_details(json!({"equipment": short_text(asked, 200)}))),
    }
}
