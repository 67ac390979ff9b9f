//! The overview displays generated from the plant model, as ISA-101 lays them out: the plant
//! overview (level 1: a tile per area with its key values, the state of each of its equipment
//! and its alarms) and a folder's display (level 2: a tile per equipment with its values and
//! states). Nobody draws them: the folders, tags and alarms say what is there, a tag's
//! `display` mark what is key, in which order, hidden, or normal; without marks the defaults
//! pick (docs/PANEL.md).
//!
//! Equipment is a folder holding tags directly (a type's instance is one); an area is a folder
//! below the plant's single top folder (or a top folder, when there are several).

use std::cmp::Ordering;
use std::sync::Arc;

use plant_model::{Condition, DisplayMark, InitialValue, TagType};

use crate::objects::{ObjectModel, Tag, is_below, join_path};

/// The most tiles one display holds; past that the display says how many were left off.
pub const MAX_GROUPS: usize = 60;
/// The most key values an area's tile shows on the plant overview.
pub const AREA_VALUES: usize = 6;
/// The most equipment states an area's tile shows on the plant overview.
pub const AREA_STATES: usize = 12;
/// The most values an equipment's tile shows.
pub const EQUIPMENT_VALUES: usize = 8;
/// The most states an equipment's tile shows.
pub const EQUIPMENT_STATES: usize = 4;

/// Which of the two displays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisplayLevel {
    /// The plant overview: a tile per area.
    Plant,
    /// A folder's display: a tile per equipment at or below it.
    Folder,
}

/// One generated display.
#[derive(Debug)]
pub struct OverviewDisplay {
    /// The folder shown; `""` for the plant overview.
    pub folder: String,
    /// What the plant file says the folder is (for the plant: nothing).
    pub description: String,
    /// The plant overview or a folder's display.
    pub level: DisplayLevel,
    /// The tiles, in path order (numbers in names counted as numbers: Pump2 before Pump10).
    pub groups: Vec<DisplayGroup>,
    /// Tiles left off past [`MAX_GROUPS`].
    pub groups_left_off: usize,
}

/// One tile: an area on the plant overview, an equipment on a folder's display.
#[derive(Debug)]
pub struct DisplayGroup {
    /// Its folder.
    pub path: String,
    /// What the plant file says the folder is.
    pub description: String,
    /// Analog values, drawn as moving analog indicators.
    pub values: Vec<DisplayPoint>,
    /// States (Running, Mode), shown as words.
    pub states: Vec<DisplayPoint>,
    /// The alarms on the tags it stands for (for an area: every tag below it), so the display
    /// counts them by priority as they change.
    pub alarms: Vec<String>,
    /// Tags it stands for that it does not show (free text, hidden ones, past the caps).
    pub tags_left_off: usize,
}

/// One tag on a tile.
#[derive(Debug)]
pub struct DisplayPoint {
    /// The tag, live.
    pub tag: Arc<Tag>,
    /// What the tile writes beside it: the tag's name on its equipment's tile, the path from
    /// the area on an area's (`Pump1 FlowRate`; a state: the equipment's name).
    pub label: String,
    /// How it is drawn.
    pub look: PointLook,
}

/// How a point is drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum PointLook {
    /// A number on a moving analog indicator: its range, and the normal operating range shaded.
    Analog {
        /// The normal operating range, low and high.
        normal: Option<(f64, f64)>,
    },
    /// A state as a word, coloured only when abnormal.
    State {
        /// A bool tag's words for false and true.
        words: Option<[String; 2]>,
        /// The normal state, when the plant file names one.
        normal: Option<InitialValue>,
    },
}

/// What a tag is on a display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Analog,
    State,
    /// Free text or hidden: counted, not shown.
    Off,
}

fn role(tag: &Tag) -> Role {
    let definition = tag.definition();
    if definition.display.as_ref().is_some_and(|mark| mark.hide) {
        return Role::Off;
    }
    match definition.kind {
        TagType::Number | TagType::Integer => Role::Analog,
        TagType::Bool => Role::State,
        TagType::String if !definition.allowed_values.is_empty() => Role::State,
        TagType::String => Role::Off,
    }
}

fn mark(tag: &Tag) -> Option<&DisplayMark> {
    tag.definition().display.as_ref()
}

fn is_key(tag: &Tag) -> bool {
    mark(tag).is_some_and(|mark| mark.key)
}

/// The order tags are shown in: key values first, then by their `order`, then those with
/// alarms (what an operator watches), then by path.
fn rank(objects: &ObjectModel, a: &Tag, b: &Tag) -> Ordering {
    let order = |tag: &Tag| mark(tag).and_then(|mark| mark.order).unwrap_or(u32::MAX);
    let unalarmed = |tag: &Tag| objects.alarms_of(&tag.definition().name).is_empty();
    is_key(b)
        .cmp(&is_key(a))
        .then_with(|| order(a).cmp(&order(b)))
        .then_with(|| unalarmed(a).cmp(&unalarmed(b)))
        .then_with(|| natural(&a.definition().path, &b.definition().path))
}

/// Compares names as people read them: runs of digits by their number (`Pump2` < `Pump10`).
fn natural(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let digits = |text: &[u8]| text.iter().take_while(|byte| byte.is_ascii_digit()).count();
                let (da, db) = (digits(a), digits(b));
                let trim = |run: &[u8]| {
                    let zeros = run.iter().take_while(|byte| **byte == b'0').count();
                    run[zeros..].to_vec()
                };
                let (na, nb) = (trim(&a[..da]), trim(&b[..db]));
                let by_number = na.len().cmp(&nb.len()).then_with(|| na.cmp(&nb));
                if by_number != Ordering::Equal {
                    return by_number;
                }
                a = &a[da..];
                b = &b[db..];
            }
            (Some(x), Some(y)) => match x.cmp(y) {
                Ordering::Equal => {
                    a = &a[1..];
                    b = &b[1..];
                }
                other => return other,
            },
        }
    }
}

/// The normal operating range of a numeric tag: its mark's, or the span between its innermost
/// low and high alarm limits (a side without one ends at the tag's range), or a deviation
/// alarm's band around its setpoint.
fn normal_range(objects: &ObjectModel, tag: &Tag) -> Option<(f64, f64)> {
    let definition = tag.definition();
    if let Some([low, high]) = mark(tag).and_then(|mark| mark.normal_range) {
        return Some((low, high));
    }
    let (mut low, mut high) = (None::<f64>, None::<f64>);
    let mut band = None;
    for alarm in objects.alarms_of(&definition.name) {
        let alarm = alarm.definition();
        match alarm.condition {
            Condition::Lo | Condition::LoLo => {
                low = Some(low.map_or(alarm.limit, |low| low.max(alarm.limit)))
            }
            Condition::Hi | Condition::HiHi => {
                high = Some(high.map_or(alarm.limit, |high| high.min(alarm.limit)))
            }
            Condition::Deviation => {
                let setpoint = alarm.setpoint.unwrap_or(0.0);
                band = Some((setpoint - alarm.limit, setpoint + alarm.limit));
            }
            Condition::Digital => {}
        }
    }
    match (low, high) {
        (None, None) => band,
        (low, high) => {
            let low = low.or(definition.range_low)?;
            let high = high.or(definition.range_high)?;
            (low < high).then_some((low, high))
        }
    }
}

/// A bool tag's words for false and true: its mark's, or "Stopped"/"Running" for a tag named
/// Running, else "Off"/"On".
fn state_words(tag: &Tag) -> Option<[String; 2]> {
    let definition = tag.definition();
    if definition.kind != TagType::Bool {
        return None;
    }
    if let Some(words) = mark(tag).and_then(|mark| mark.states.clone()) {
        return Some(words);
    }
    let name = definition.path.rsplit('/').next().unwrap_or_default();
    let [off, on] = if name.eq_ignore_ascii_case("running") {
        ["Stopped", "Running"]
    } else {
        ["Off", "On"]
    };
    Some([off.to_owned(), on.to_owned()])
}

fn point(objects: &ObjectModel, tag: &Arc<Tag>, label: String) -> DisplayPoint {
    let look = match role(tag) {
        Role::Analog => PointLook::Analog {
            normal: normal_range(objects, tag),
        },
        Role::State | Role::Off => PointLook::State {
            words: state_words(tag),
            normal: mark(tag).and_then(|mark| mark.normal_state.clone()),
        },
    };
    DisplayPoint {
        tag: Arc::clone(tag),
        label,
        look,
    }
}

/// The part of `path` below `folder`, its segments joined by spaces (`Pump1 FlowRate`).
fn label_below(folder: &str, path: &str) -> String {
    let rest = path
        .strip_prefix(folder)
        .map_or(path, |rest| rest.trim_start_matches('/'));
    rest.replace('/', " ")
}

/// One equipment with its tags ranked.
struct RankedEquipment {
    path: String,
    tags: Vec<Arc<Tag>>,
}

/// Every equipment at or below `folder`, in natural path order, each with its tags ranked.
fn equipment_below(objects: &ObjectModel, folder: &str) -> Vec<RankedEquipment> {
    let mut found: Vec<RankedEquipment> = objects
        .equipment()
        .filter(|equipment| equipment.path == folder || is_below(folder, equipment.path))
        .map(|equipment| {
            let mut tags: Vec<Arc<Tag>> = equipment
                .folder
                .tags
                .iter()
                .filter_map(|tag_path| objects.tag(tag_path).cloned())
                .collect();
            tags.sort_by(|a, b| rank(objects, a, b));
            RankedEquipment {
                path: equipment.path.to_owned(),
                tags,
            }
        })
        .collect();
    found.sort_by(|a, b| natural(&a.path, &b.path));
    found
}

fn alarm_names<'t>(objects: &ObjectModel, tags: impl Iterator<Item = &'t Arc<Tag>>) -> Vec<String> {
    tags.flat_map(|tag| objects.alarms_of(&tag.definition().name))
        .map(|alarm| alarm.definition().name.clone())
        .collect()
}

/// The plant overview (`folder` empty) or a folder's display; `None` for no such folder.
pub fn overview(objects: &ObjectModel, folder: &str) -> Option<OverviewDisplay> {
    let (folder, _) = objects.folder(folder)?;
    let (level, mut groups) = if folder.is_empty() {
        (
            DisplayLevel::Plant,
            areas(objects)
                .iter()
                .map(|area| area_group(objects, area))
                .collect(),
        )
    } else {
        (
            DisplayLevel::Folder,
            equipment_below(objects, folder)
                .into_iter()
                .map(|equipment| equipment_group(objects, equipment))
                .collect::<Vec<_>>(),
        )
    };
    let groups_left_off = groups.len().saturating_sub(MAX_GROUPS);
    groups.truncate(MAX_GROUPS);
    Some(OverviewDisplay {
        folder: folder.to_owned(),
        description: objects.folder_description(folder).to_owned(),
        level,
        groups,
        groups_left_off,
    })
}

/// The areas: the folders below the plant's single top folder (with that folder first when
/// it holds tags itself), or the top folders when there are several.
fn areas(objects: &ObjectModel) -> Vec<String> {
    let Some((_, root)) = objects.folder("") else {
        return Vec::new();
    };
    let mut areas: Vec<String> = match (root.folders.len(), root.tags.is_empty()) {
        (1, true) => {
            let top = root.folders.first().map(String::as_str).unwrap_or_default();
            match objects.folder(top) {
                Some((_, inside)) if !inside.folders.is_empty() => {
                    let mut below: Vec<String> =
                        inside.folders.iter().map(|name| join_path(top, name)).collect();
                    if !inside.tags.is_empty() {
                        below.insert(0, top.to_owned());
                    }
                    below
                }
                _ => vec![top.to_owned()],
            }
        }
        _ => root.folders.iter().cloned().collect(),
    };
    areas.sort_by(|a, b| natural(a, b));
    areas
}

/// An area's tile: its key values (the tags marked key, else each equipment's first value),
/// each equipment's first state, and every alarm below it.
fn area_group(objects: &ObjectModel, area: &str) -> DisplayGroup {
    let equipment = equipment_below(objects, area);
    let all = || equipment.iter().flat_map(|equipment| &equipment.tags);
    let mut keys: Vec<&Arc<Tag>> = all()
        .filter(|tag| is_key(tag) && role(tag) != Role::Off)
        .collect();
    keys.sort_by(|a, b| rank(objects, a, b));
    let key_values: Vec<&Arc<Tag>> = keys
        .iter()
        .copied()
        .filter(|tag| role(tag) == Role::Analog)
        .collect();
    let value_tags: Vec<&Arc<Tag>> = if keys.is_empty() {
        equipment
            .iter()
            .filter_map(|equipment| equipment.tags.iter().find(|tag| role(tag) == Role::Analog))
            .take(AREA_VALUES)
            .collect()
    } else {
        key_values.into_iter().take(AREA_VALUES).collect()
    };
    let values: Vec<DisplayPoint> = value_tags
        .iter()
        .map(|tag| point(objects, tag, label_below(area, &tag.definition().path)))
        .collect();
    // Key states first, then each equipment's first state under the equipment's name.
    let mut states: Vec<DisplayPoint> = keys
        .iter()
        .filter(|tag| role(tag) == Role::State)
        .map(|tag| point(objects, tag, label_below(area, &tag.definition().path)))
        .collect();
    for equipment in &equipment {
        if states.len() >= AREA_STATES {
            break;
        }
        // A running signal says more of an equipment than its mode.
        let candidates = || equipment.tags.iter().filter(|tag| role(tag) == Role::State);
        let Some(tag) = candidates()
            .find(|tag| tag.definition().kind == TagType::Bool)
            .or_else(|| candidates().next())
        else {
            continue;
        };
        if states.iter().any(|shown| Arc::ptr_eq(&shown.tag, tag)) {
            continue;
        }
        let name = label_below(area, &equipment.path);
        let label = if name.is_empty() {
            label_below(area, &tag.definition().path)
        } else {
            name
        };
        states.push(point(objects, tag, label));
    }
    states.truncate(AREA_STATES);
    let total = all().count();
    DisplayGroup {
        description: objects.folder_description(area).to_owned(),
        alarms: alarm_names(objects, all()),
        tags_left_off: total - values.len() - states.len(),
        values,
        states,
        path: area.to_owned(),
    }
}

/// An equipment's tile: its values and states in rank order, as many as fit.
fn equipment_group(objects: &ObjectModel, equipment: RankedEquipment) -> DisplayGroup {
    let label = |tag: &Arc<Tag>| label_below(&equipment.path, &tag.definition().path);
    let values: Vec<DisplayPoint> = equipment
        .tags
        .iter()
        .filter(|tag| role(tag) == Role::Analog)
        .take(EQUIPMENT_VALUES)
        .map(|tag| point(objects, tag, label(tag)))
        .collect();
    let states: Vec<DisplayPoint> = equipment
        .tags
        .iter()
        .filter(|tag| role(tag) == Role::State)
        .take(EQUIPMENT_STATES)
        .map(|tag| point(objects, tag, label(tag)))
        .collect();
    DisplayGroup {
        description: objects.folder_description(&equipment.path).to_owned(),
        alarms: alarm_names(objects, equipment.tags.iter()),
        tags_left_off: equipment.tags.len() - values.len() - states.len(),
        values,
        states,
        path: equipment.path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects(text: &str) -> ObjectModel {
        let model = plant_model::read(text, plant_model::Format::Toml, "t.toml").expect("valid");
        ObjectModel::from_definitions(&model.expand()).expect("loads")
    }

    fn names(points: &[DisplayPoint]) -> Vec<(&str, &str)> {
        points
            .iter()
            .map(|point| (point.label.as_str(), point.tag.definition().name.as_str()))
            .collect()
    }

    const PLANT: &str = r#"
[[folders]]
path = "Plant/Area1"
description = "Pumping"

[[tags]]
name = "Pump10.Flow"
path = "Plant/Area1/Pump10/Flow"
type = "number"
min = 0
max = 200

[[tags]]
name = "Pump2.Current"
path = "Plant/Area1/Pump2/Current"
type = "number"
min = 0
max = 50

[[tags]]
name = "Pump2.Flow"
path = "Plant/Area1/Pump2/Flow"
type = "number"
min = 0
max = 200

[[tags]]
name = "Pump2.Running"
path = "Plant/Area1/Pump2/Running"
type = "bool"

[[tags]]
name = "Pump2.Mode"
path = "Plant/Area1/Pump2/Mode"
type = "string"
values = ["Auto", "Manual"]
display = { normal_state = "Auto" }

[[tags]]
name = "Pump2.Note"
path = "Plant/Area1/Pump2/Note"
type = "string"

[[tags]]
name = "Tank1.Level"
path = "Plant/Area2/Tank1/Level"
type = "number"
min = 0
max = 100
display = { key = true, order = 1, normal_range = [20, 70] }

[[tags]]
name = "Tank1.Temperature"
path = "Plant/Area2/Tank1/Temperature"
type = "number"
display = { key = true, order = 2 }

[[tags]]
name = "Tank1.Spare"
path = "Plant/Area2/Tank1/Spare"
type = "number"
display = { hide = true }

[[alarms]]
name = "Pump2.Current.Hi"
tag = "Pump2.Current"
condition = "Hi"
limit = 40

[[alarms]]
name = "Pump2.Current.LoLo"
tag = "Pump2.Current"
condition = "LoLo"
limit = 2

[[alarms]]
name = "Pump2.Current.Lo"
tag = "Pump2.Current"
condition = "Lo"
limit = 5
"#;

    #[test]
    fn the_plant_overview_has_a_tile_per_area_with_its_key_values_states_and_alarms() {
        let objects = objects(PLANT);
        let display = overview(&objects, "").expect("the plant");
        assert_eq!(display.level, DisplayLevel::Plant);
        let paths: Vec<&str> = display.groups.iter().map(|group| group.path.as_str()).collect();
        assert_eq!(paths, ["Plant/Area1", "Plant/Area2"]);
        let area1 = &display.groups[0];
        assert_eq!(area1.description, "Pumping");
        // No key marks: each equipment's first value, an alarmed one first; equipment in
        // natural order.
        assert_eq!(
            names(&area1.values),
            [("Pump2 Current", "Pump2.Current"), ("Pump10 Flow", "Pump10.Flow")]
        );
        assert_eq!(
            area1.values[0].look,
            PointLook::Analog {
                normal: Some((5.0, 40.0))
            },
            "between the innermost alarm limits"
        );
        assert_eq!(names(&area1.states), [("Pump2", "Pump2.Running")]);
        assert_eq!(
            area1.alarms,
            ["Pump2.Current.Hi", "Pump2.Current.LoLo", "Pump2.Current.Lo"]
        );
        assert_eq!(area1.tags_left_off, 6 - 3);
        // Key marks: those, in their order; a hidden tag is never shown.
        let area2 = &display.groups[1];
        assert_eq!(
            names(&area2.values),
            [
                ("Tank1 Level", "Tank1.Level"),
                ("Tank1 Temperature", "Tank1.Temperature")
            ]
        );
        assert_eq!(
            area2.values[0].look,
            PointLook::Analog {
                normal: Some((20.0, 70.0))
            }
        );
        assert_eq!(area2.values[1].look, PointLook::Analog { normal: None });
        assert_eq!(area2.tags_left_off, 1);
    }

    #[test]
    fn a_folder_display_has_a_tile_per_equipment_with_its_values_and_states() {
        let objects = objects(PLANT);
        let display = overview(&objects, "plant/area1").expect("found ignoring case");
        assert_eq!(display.folder, "Plant/Area1");
        assert_eq!(display.level, DisplayLevel::Folder);
        let paths: Vec<&str> = display.groups.iter().map(|group| group.path.as_str()).collect();
        assert_eq!(paths, ["Plant/Area1/Pump2", "Plant/Area1/Pump10"]);
        let pump2 = &display.groups[0];
        assert_eq!(
            names(&pump2.values),
            [("Current", "Pump2.Current"), ("Flow", "Pump2.Flow")]
        );
        assert_eq!(
            names(&pump2.states),
            [("Mode", "Pump2.Mode"), ("Running", "Pump2.Running")]
        );
        assert_eq!(
            pump2.states[0].look,
            PointLook::State {
                words: None,
                normal: Some(InitialValue::String("Auto".to_owned()))
            }
        );
        assert_eq!(
            pump2.states[1].look,
            PointLook::State {
                words: Some(["Stopped".to_owned(), "Running".to_owned()]),
                normal: None
            }
        );
        assert_eq!(pump2.tags_left_off, 1, "the free-text note");
        assert!(overview(&objects, "Plant/Nowhere").is_none());
        assert!(
            overview(&objects, "Plant/Area1/Pump2/Flow").is_none(),
            "a tag is no folder"
        );
    }

    #[test]
    fn a_display_of_many_equipment_shows_the_first_and_says_how_many_are_left_off() {
        let mut text = String::new();
        for n in 1..=MAX_GROUPS + 5 {
            text.push_str(&format!(
                "[[tags]]\nname = \"P{n}.Flow\"\npath = \"Plant/Area/P{n}/Flow\"\ntype = \"number\"\n\n"
            ));
        }
        let objects = objects(&text);
        let display = overview(&objects, "Plant/Area").expect("the area");
        assert_eq!(display.groups.len(), MAX_GROUPS);
        assert_eq!(display.groups_left_off, 5);
        assert_eq!(display.groups[1].path, "Plant/Area/P2");
    }

    #[test]
    fn names_are_ordered_as_people_read_them() {
        let mut names = ["Pump10", "Pump2", "Pump1", "Pump02a", "Pumpa", "Pump"];
        names.sort_by(|a, b| natural(a, b));
        assert_eq!(names, ["Pump", "Pump1", "Pump2", "Pump02a", "Pump10", "Pumpa"]);
    }
}
