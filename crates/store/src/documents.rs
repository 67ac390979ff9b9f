//! The documents attached to the plant, as both backends keep them: one `PlantDocuments` row
//! per document (its path, title, text, and what it is about as JSON).

use plant_model::PlantDocument;
use serde::{Deserialize, Serialize};

use crate::SolutionError;

/// The documents by path, in the SQL both backends speak.
pub(crate) const SELECT_DOCUMENTS: &str = "SELECT Path, Title, Text, Scope FROM PlantDocuments ORDER BY Path";

/// What a document is about, as `PlantDocuments.Scope` holds it.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Scope {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    types: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    equipment: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    folders: Vec<String>,
}

/// A document whose row cannot be written or read, named by its path.
fn unreadable(path: &str, reason: String) -> SolutionError {
    SolutionError::InvalidTag {
        name: path.to_owned(),
        reason,
    }
}

/// A document's scope as stored.
pub(crate) fn scope_json(document: &PlantDocument) -> Result<String, SolutionError> {
    serde_json::to_string(&Scope {
        types: document.types.clone(),
        equipment: document.equipment.clone(),
        folders: document.folders.clone(),
    })
    .map_err(|error| unreadable(&document.path, format!("its scope cannot be stored: {error}")))
}

/// A stored row (Path, Title, Text, Scope) read back.
pub(crate) fn document_of_row(
    path: String,
    title: String,
    text: String,
    scope: &str,
) -> Result<PlantDocument, SolutionError> {
    let Scope {
        types,
        equipment,
        folders,
    } = serde_json::from_str(scope).map_err(|error| {
        unreadable(
            &path,
            format!("the stored document's scope does not read: {error}"),
        )
    })?;
    Ok(PlantDocument {
        path,
        title,
        text,
        types,
        equipment,
        folders,
    })
}
