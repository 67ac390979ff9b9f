//! `[[documents]]`: the files a plant file attaches, each at a path beside it, and the types,
//! instances and folders each is about.

use super::{Reader, span_of};
use crate::document::Node;
use crate::model::DocumentSpec;

impl Reader<'_> {
    /// `[[documents]]`: a relative path that stays below the plant file's folder, and the
    /// names of what it is about (checked against the plant in `check_documents`).
    pub(super) fn document_spec(&mut self, node: &Node, path: &str) -> Option<DocumentSpec> {
        let mut fields = self.table(node, path)?;
        let span = span_of(&fields, "path").unwrap_or_else(|| fields.span.clone());
        let file = self.required_string(&mut fields, "path");
        let file = file.and_then(|file| match document_path_problem(&file) {
            Some(problem) => {
                self.error(span, fields.field("path"), format!("{file:?} {problem}"));
                None
            }
            None => Some(file),
        });
        let title = self.string(&mut fields, "title").unwrap_or_default();
        let types = self.strings(&mut fields, "types");
        let equipment = self.strings(&mut fields, "equipment");
        let folders = self.strings(&mut fields, "folders");
        self.done(fields, &["path", "title", "types", "equipment", "folders"]);
        Some(DocumentSpec {
            path: file?,
            title,
            types,
            equipment,
            folders,
        })
    }
}

/// What makes `path` unusable as a document's place beside the plant file (it is read there,
/// and export writes it back there), if anything.
pub fn document_path_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() || path.len() > crate::MAX_DOCUMENT_PATH {
        return Some("is not a usable document path: 1 to 1024 bytes");
    }
    if path.starts_with('/') || path.contains('\\') || path.contains(':') {
        return Some(
            "is not a relative path: write it relative to the plant file, with '/' between folders \
             (no leading '/', no '\\', no drive)",
        );
    }
    if path.chars().any(char::is_control) {
        return Some("is not a usable document path: no control characters");
    }
    let segments: Vec<&str> = path.split('/').collect();
    if segments.contains(&"..") {
        return Some("leaves the plant file's folder: no `..` (export writes the file back there)");
    }
    if segments
        .iter()
        .any(|segment| segment.is_empty() || *segment == ".")
    {
        return Some("is not a usable document path: no empty or `.` segments");
    }
    None
}
