//! `[plant]`: the plant's own name and description.

use super::Reader;
use crate::document::Node;
use crate::model::PlantInfo;

impl Reader<'_> {
    pub(super) fn plant_info(&mut self, node: &Node) -> Option<PlantInfo> {
        let mut fields = self.table(node, "plant")?;
        let name = self.string(&mut fields, "name").unwrap_or_default();
        let description = self.string(&mut fields, "description").unwrap_or_default();
        self.done(fields, &["name", "description"]);
        Some(PlantInfo { name, description })
    }
}
