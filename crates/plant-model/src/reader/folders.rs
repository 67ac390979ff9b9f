//! `[[folders]]`: a UNS folder's path and the description the namespace shows for it.

use super::Reader;
use crate::document::Node;
use crate::model::FolderSpec;

impl Reader<'_> {
    pub(super) fn folder(&mut self, node: &Node, path: &str) -> Option<FolderSpec> {
        let mut fields = self.table(node, path)?;
        let folder = self.path(&mut fields, "path");
        let description = self.string(&mut fields, "description").unwrap_or_default();
        self.done(fields, &["path", "description"]);
        Some(FolderSpec {
            path: folder?,
            description,
        })
    }
}
