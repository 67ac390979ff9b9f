//! `[[types]]` and `[[equipment]]`: equipment types (their member tags and alarms, read as
//! `[[tags]]` and `[[alarms]]` are) and the instances of them, with the initial values and
//! alarm limits an instance sets for its members.

use std::collections::BTreeMap;

use super::{Reader, join};
use crate::document::Node;
use crate::model::{Equipment, EquipmentType};
use crate::names;

impl Reader<'_> {
    pub(super) fn equipment_type(&mut self, node: &Node, path: &str) -> Option<EquipmentType> {
        let mut fields = self.table(node, path)?;
        let name = self.name(&mut fields, "name");
        let description = self.string(&mut fields, "description").unwrap_or_default();
        let tags = self.list(&mut fields, "tags", |reader, node, path| {
            reader.tag(node, path, true)
        });
        let alarms = self.list(&mut fields, "alarms", Self::alarm);
        self.done(fields, &["name", "description", "tags", "alarms"]);
        Some(EquipmentType {
            name: name?,
            description,
            tags,
            alarms,
        })
    }

    pub(super) fn equipment(&mut self, node: &Node, path: &str) -> Option<Equipment> {
        let mut fields = self.table(node, path)?;
        let name = self.name(&mut fields, "name");
        let kind = self.name(&mut fields, "type");
        let folder = self.path(&mut fields, "path");
        let label = self.string(&mut fields, "label").unwrap_or_default();
        let mut initial = BTreeMap::new();
        if let Some(node) = fields.get("initial") {
            let field = fields.field("initial");
            if let Some(values) = self.table(node, &field) {
                for (key, value) in values.entries {
                    if let Some(value) = self.initial_value(value, &join(&field, &key.name), None) {
                        initial.insert(names::normalize(&key.name), value);
                    }
                }
            }
        }
        let mut limits = BTreeMap::new();
        if let Some(node) = fields.get("limits") {
            let field = fields.field("limits");
            if let Some(values) = self.table(node, &field) {
                for (key, value) in values.entries {
                    if let Some(limit) = self.number_in(value, &join(&field, &key.name)) {
                        limits.insert(names::normalize(&key.name), limit);
                    }
                }
            }
        }
        self.done(fields, &["name", "type", "path", "label", "initial", "limits"]);
        Some(Equipment {
            name: name?,
            kind: kind?,
            path: folder?,
            label,
            initial,
            limits,
        })
    }
}
