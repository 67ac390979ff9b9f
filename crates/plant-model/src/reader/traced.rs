//! The plant a file expands to, traced back to the file: each expanded tag or alarm with the
//! entry that made it (an equipment instance, or its own entry), so the checks across parts
//! report each problem where it was written.

use std::collections::BTreeSet;
use std::ops::Range;

use super::Places;
use crate::model::{EquipmentType, ExpandedPlant, PlantModel};

/// The expanded plant with the model and the places it came from, so each expanded tag or
/// alarm is reported where it was written.
pub(super) struct TracedPlant<'a> {
    pub(super) model: &'a PlantModel,
    pub(super) places: &'a Places<'a>,
    pub(super) expanded: ExpandedPlant,
}

impl<'a> TracedPlant<'a> {
    pub(super) fn new(model: &'a PlantModel, places: &'a Places<'a>) -> Self {
        Self {
            model,
            places,
            expanded: model.expand(),
        }
    }

    /// The UNS folders: those described, those of the instances, and any on the way to an
    /// instance or a tag.
    pub(super) fn folders(&self) -> BTreeSet<&str> {
        let model = self.model;
        let mut folders: BTreeSet<&str> = model.folders.iter().map(|folder| folder.path.as_str()).collect();
        let placed = model
            .equipment
            .iter()
            .map(|instance| instance.path.as_str())
            .chain(self.expanded.tags.iter().map(|tag| tag.path.as_str()));
        for path in placed {
            folders.extend(path.match_indices('/').map(|(end, _)| &path[..end]));
        }
        folders.extend(model.equipment.iter().map(|instance| instance.path.as_str()));
        folders
    }

    /// Whether a folder on the way to an entry left out may be missing from [`folders`](Self::folders).
    pub(super) fn folders_unsure(&self) -> bool {
        ["folders", "tags", "equipment"]
            .iter()
            .any(|list| self.places.dropped_any(list))
    }

    /// The instance (`Ok`) whose type made the expanded tag at `position`, or else the index
    /// of the plain tag (`Err`).
    pub(super) fn tag_entry(&self, position: usize) -> Result<usize, usize> {
        entry_of(self.model, position, |kind| kind.tags.len())
    }

    /// Where the expanded tag at `position` was written: its instance, or its own name.
    pub(super) fn tag_origin(&self, position: usize) -> (Range<usize>, String) {
        origin(
            self.model,
            self.places,
            position,
            |kind| kind.tags.len(),
            ("tags", "name"),
            |index| format!("{}.name", self.places.field("tags", index)),
        )
    }

    /// Where the expanded alarm at `position` was written: its instance, or its own entry.
    pub(super) fn alarm_origin(&self, position: usize) -> (Range<usize>, String) {
        origin(
            self.model,
            self.places,
            position,
            |kind| kind.alarms.len(),
            ("alarms", "tag"),
            |index| self.places.field("alarms", index),
        )
    }

    /// Where the `suppress_when` of the expanded alarm at `position` was written, and its field:
    /// its type's alarm (one place for every instance), or its own entry.
    pub(super) fn suppression_origin(&self, position: usize) -> (Range<usize>, String) {
        let mut seen = 0;
        for instance in &self.model.equipment {
            let Some(type_index) = self
                .model
                .types
                .iter()
                .position(|kind| kind.name == instance.kind)
            else {
                continue;
            };
            let count = self.model.types[type_index].alarms.len();
            if position < seen + count {
                let member = position - seen;
                return (
                    self.places
                        .member_span(type_index, "alarms", member, "suppress_when"),
                    format!(
                        "{}.suppress_when",
                        self.places.member_field(type_index, "alarms", member)
                    ),
                );
            }
            seen += count;
        }
        let index = position - seen;
        (
            self.places.span("alarms", index, "suppress_when"),
            format!("{}.suppress_when", self.places.field("alarms", index)),
        )
    }

    /// Whether a missing tag may be one that could not be read: left out of the plain tags, or
    /// of a type's members, or an instance (or its type) left out.
    pub(super) fn tag_may_be_unread(&self, name: &str) -> bool {
        let places = self.places;
        places.dropped_named("tags", name)
            || places.dropped_any("equipment")
            || places.dropped_any("types")
            || (0..self.model.types.len()).any(|index| {
                places.dropped_any(&format!("types[{}].tags", places.file_index("types", index)))
            })
    }
}

/// Where the expanded tag or alarm at `position` was written: the equipment instance whose
/// type made it (types give `members` each), or else its own entry in `section` (the plain
/// items follow the instances' in the expanded plant).
fn origin(
    model: &PlantModel,
    places: &Places<'_>,
    position: usize,
    members: impl Fn(&EquipmentType) -> usize,
    (section, key): (&str, &str),
    field: impl Fn(usize) -> String,
) -> (Range<usize>, String) {
    match entry_of(model, position, members) {
        Ok(instance) => (
            places.span("equipment", instance, "name"),
            places.field("equipment", instance),
        ),
        Err(index) => (places.span(section, index, key), field(index)),
    }
}

/// The equipment instance (`Ok`) whose type made the expanded item at `position` (types give
/// `members` each), or else the index of the plain item (`Err`).
fn entry_of(
    model: &PlantModel,
    position: usize,
    members: impl Fn(&EquipmentType) -> usize,
) -> Result<usize, usize> {
    let mut seen = 0;
    for (index, instance) in model.equipment.iter().enumerate() {
        let count = model
            .types
            .iter()
            .find(|kind| kind.name == instance.kind)
            .map_or(0, &members);
        if position < seen + count {
            return Ok(index);
        }
        seen += count;
    }
    Err(position - seen)
}
