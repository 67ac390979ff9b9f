//! The checks across the sections of a plant file, on the model read: what the plant expands
//! to within its bounds, names and paths unique (ignoring case and look-alike characters),
//! alarms, instances, bindings and documents naming parts that exist and suit them.

use std::collections::{BTreeSet, HashMap};

use super::traced::TracedPlant;
use super::{Places, Reader, show};
use crate::model::{
    Condition, Equipment, EquipmentType, InitialValue, PlantModel, SourceBinding, SourceKind, TagSpec,
    TagType,
};
use crate::names::{self, Quote, did_you_mean, outside_values};
use crate::{Operand, TagExpression};

/// The checks across parts: unique names and paths (ignoring case, as lookups do), a tag path
/// that is not also a folder of other tags, alarms on tags that exist and suit them,
/// instances of types that exist, overrides of members that exist and fit them as the type's
/// own values must. They run on what could be read, so every problem of a file is reported
/// at once; a reference to an entry that could not be read is not reported as a reference to
/// nothing (its own error says what is wrong with it).
pub(crate) fn check_model(reader: &mut Reader<'_>, model: &PlantModel, places: &Places<'_>) {
    for (type_index, kind) in model.types.iter().enumerate() {
        check_type_members(reader, places, type_index, kind);
    }
    check_unique_names(
        reader,
        places,
        "types",
        model.types.iter().map(|kind| kind.name.as_str()),
    );
    check_instances(reader, model, places);
    let plant = TracedPlant::new(model, places);
    check_tag_names_and_paths(reader, &plant);
    check_paths_not_folders(reader, &plant);
    check_expanded_alarms(reader, &plant);
    check_simulated_initials(reader, &plant);
    check_unique_names(
        reader,
        places,
        "sources",
        model.sources.iter().map(|source| source.name.as_str()),
    );
    check_tag_sources(reader, &plant);
    check_folders(reader, &plant);
    check_documents(reader, &plant);
    check_unique_names(
        reader,
        places,
        "notifications",
        model
            .notifications
            .iter()
            .map(|notification| notification.name.as_str()),
    );
    super::notifications::check_notifications(reader, model, places, &plant.expanded.tags);
    check_unique_names(
        reader,
        places,
        "prompts",
        model.prompts.iter().map(|prompt| prompt.name.as_str()),
    );
    super::prompts::check_prompts(reader, &plant);
}

/// Within one equipment type: member names unique and free of '/', alarm names unique, and
/// each alarm on a member tag that exists and suits its condition.
fn check_type_members(reader: &mut Reader<'_>, places: &Places<'_>, type_index: usize, kind: &EquipmentType) {
    let mut members: HashMap<String, usize> = HashMap::new();
    let tags_list = format!("types[{}].tags", places.file_index("types", type_index));
    for (index, tag) in kind.tags.iter().enumerate() {
        if tag.name.contains('/') {
            reader.error(
                places.member_span(type_index, "tags", index, "name"),
                format!("{}.name", places.member_field(type_index, "tags", index)),
                "a member's name becomes a path segment: no '/'",
            );
        }
        if members.insert(names::fold(&tag.name), index).is_some() {
            reader.error(
                places.member_span(type_index, "tags", index, "name"),
                format!("{}.name", places.member_field(type_index, "tags", index)),
                format!("type {:?} has two tags named {:?}", kind.name, tag.name),
            );
        }
    }
    let mut alarm_names: HashMap<String, usize> = HashMap::new();
    for (index, alarm) in kind.alarms.iter().enumerate() {
        let field = places.member_field(type_index, "alarms", index);
        if alarm_names.insert(names::fold(&alarm.name), index).is_some() {
            reader.error(
                places.member_span(type_index, "alarms", index, "name"),
                format!("{field}.name"),
                format!("type {:?} has two alarms named {:?}", kind.name, alarm.name),
            );
        }
        match kind.tags.iter().find(|tag| tag.name == alarm.tag) {
            None if places.dropped_named(&tags_list, &alarm.tag) => {}
            None => reader.error(
                places.member_span(type_index, "alarms", index, "tag"),
                format!("{field}.tag"),
                format!("type {:?} has no tag {:?}", kind.name, alarm.tag),
            ),
            Some(tag) => {
                if let Some(problem) = unsuitable(alarm.condition, tag.kind) {
                    reader.error(
                        places.member_span(type_index, "alarms", index, "condition"),
                        format!("{field}.condition"),
                        problem,
                    );
                }
            }
        }
    }
}

/// The `name`s of the entries of `section` (`types`, `sources`) unique, ignoring case.
fn check_unique_names<'m>(
    reader: &mut Reader<'_>,
    places: &Places<'_>,
    section: &str,
    entry_names: impl Iterator<Item = &'m str>,
) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (index, name) in entry_names.enumerate() {
        if seen.insert(names::fold(name), index).is_some() {
            reader.error(
                places.span(section, index, "name"),
                format!("{}.name", places.field(section, index)),
                format!("two {section} named {name:?}"),
            );
        }
    }
}

/// Each equipment instance: its name unique, its type one that exists, and the members its
/// overrides name, each value checked as the type's own would be.
fn check_instances(reader: &mut Reader<'_>, model: &PlantModel, places: &Places<'_>) {
    let mut instance_names: HashMap<String, usize> = HashMap::new();
    for (index, instance) in model.equipment.iter().enumerate() {
        if instance_names
            .insert(names::fold(&instance.name), index)
            .is_some()
        {
            reader.error(
                places.span("equipment", index, "name"),
                format!("{}.name", places.field("equipment", index)),
                format!("two instances named {:?}", instance.name),
            );
        }
        let Some((type_index, kind)) = model
            .types
            .iter()
            .enumerate()
            .find(|(_, kind)| kind.name == instance.kind)
        else {
            if !places.dropped_named("types", &instance.kind) {
                let known = model.types.iter().map(|kind| kind.name.as_str());
                reader.error(
                    places.span("equipment", index, "type"),
                    format!("{}.type", places.field("equipment", index)),
                    format!(
                        "no type named {:?}{}",
                        instance.kind,
                        did_you_mean(&instance.kind, known, Quote::DoubleQuotes)
                    ),
                );
            }
            continue;
        };
        let overridden = Overridden {
            index,
            instance,
            kind,
            members_list: format!("types[{}]", places.file_index("types", type_index)),
        };
        check_initial_overrides(reader, places, &overridden);
        check_limit_overrides(reader, places, &overridden);
    }
}

/// An equipment instance whose overrides are checked against its type.
struct Overridden<'m> {
    /// The instance's index in the model.
    index: usize,
    instance: &'m Equipment,
    kind: &'m EquipmentType,
    /// `types[i]` of the instance's type as the file has it, for the lists of its members.
    members_list: String,
}

/// An instance's `initial` values: each on a member tag of its type, of the tag's kind, within
/// the tag's range.
fn check_initial_overrides(reader: &mut Reader<'_>, places: &Places<'_>, overridden: &Overridden<'_>) {
    let Overridden {
        index,
        instance,
        kind,
        members_list,
    } = overridden;
    let field = places.field("equipment", *index);
    for (member, value) in &instance.initial {
        let span = places.span_at("equipment", *index, &["initial", member]);
        let member_field = format!("{field}.initial.{member}");
        match kind.tags.iter().find(|tag| &tag.name == member) {
            None if places.dropped_named(&format!("{members_list}.tags"), member) => {}
            None => reader.error(
                span,
                member_field,
                format!("type {:?} has no tag {member:?}", kind.name),
            ),
            Some(tag) if !value.fits(tag.kind) => {
                let kind_name = tag.kind.name();
                let article = if kind_name.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                };
                reader.error(
                    span,
                    member_field,
                    format!(
                        "{member} is {article} {kind_name} tag (type {:?}): it cannot start at {}",
                        kind.name,
                        value.to_text()
                    ),
                );
            }
            Some(tag) => {
                if let InitialValue::String(text) = value
                    && let Some(problem) = names::outside_values(&tag.values, text)
                {
                    reader.error(
                        span.clone(),
                        member_field.clone(),
                        format!("{problem} (type {:?})", kind.name),
                    );
                }
                if let Some(number) = value.as_f64()
                    && (tag.min.is_some_and(|low| number < low) || tag.max.is_some_and(|high| number > high))
                {
                    reader.error(
                        span,
                        member_field,
                        format!(
                            "{number} is outside {member}'s range {}..{} (type {:?})",
                            show(tag.min),
                            show(tag.max),
                            kind.name
                        ),
                    );
                }
            }
        }
    }
}

/// An instance's `limits`: each on an alarm of its type that has a limit (not a Digital one).
fn check_limit_overrides(reader: &mut Reader<'_>, places: &Places<'_>, overridden: &Overridden<'_>) {
    let Overridden {
        index,
        instance,
        kind,
        members_list,
    } = overridden;
    let field = places.field("equipment", *index);
    for member in instance.limits.keys() {
        let span = places.span_at("equipment", *index, &["limits", member]);
        let member_field = format!("{field}.limits.{member}");
        match kind.alarms.iter().find(|alarm| &alarm.name == member) {
            None if places.dropped_named(&format!("{members_list}.alarms"), member) => {}
            None => reader.error(
                span,
                member_field,
                format!("type {:?} has no alarm {member:?}", kind.name),
            ),
            Some(alarm) if alarm.condition == Condition::Digital => {
                reader.error(span, member_field, "a Digital alarm has no limit");
            }
            Some(_) => {}
        }
    }
}

/// Names seen so far, by the two keys two names are one by: the case-folded name (full Unicode
/// folding: `Σ.V` and `σ.V`, `НАСОС` and `насос`), and the look-alike key (`TOP` in Cyrillic
/// and in Latin). Both are needed: a confusable skeleton maps a capital and its small letter
/// of another script to different Latin letters (`Σ` and `σ`), so it alone misses case.
#[derive(Debug, Default)]
struct SeenNames {
    by_fold: HashMap<String, usize>,
    by_look: HashMap<String, usize>,
}

impl SeenNames {
    /// Records `name` at `position`; the position of the first name it is one with, if any.
    fn first_like(&mut self, name: &str, position: usize) -> Option<usize> {
        let folded = self.by_fold.insert(names::fold(name), position);
        let looked = self.by_look.insert(names::look_alike(name), position);
        folded.or(looked)
    }
}

/// The expanded tags' names and paths unique by how they look: ignoring case, and with
/// look-alike characters of other scripts taken as the ones they look like.
fn check_tag_names_and_paths(reader: &mut Reader<'_>, plant: &TracedPlant<'_>) {
    let tags = &plant.expanded.tags;
    let mut look_alike_names = SeenNames::default();
    let mut look_alike_paths = SeenNames::default();
    for (position, tag) in tags.iter().enumerate() {
        if let Some(first) = look_alike_names.first_like(&tag.name, position) {
            let (span, field) = plant.tag_origin(position);
            let other = &tags[first].name;
            reader.error(span, field, taken("tag name", &tag.name, other, other));
        }
        if let Some(first) = look_alike_paths.first_like(&tag.path, position) {
            let (span, field) = plant.tag_origin(position);
            let other = &tags[first];
            reader.error(span, field, taken("path", &tag.path, &other.path, &other.name));
        }
    }
}

/// A tag's path not also the folder of another tag: every folder above a tag, with one tag
/// below it (one pass, however many tags).
fn check_paths_not_folders(reader: &mut Reader<'_>, plant: &TracedPlant<'_>) {
    let tags = &plant.expanded.tags;
    let mut folders_above: HashMap<String, usize> = HashMap::new();
    for (position, tag) in tags.iter().enumerate() {
        let folded = names::fold(&tag.path);
        for (cut, _) in folded.match_indices('/') {
            folders_above.entry(folded[..cut].to_owned()).or_insert(position);
        }
    }
    for (position, tag) in tags.iter().enumerate() {
        if let Some(&below) = folders_above.get(&names::fold(&tag.path)) {
            let (span, field) = plant.tag_origin(position);
            reader.error(
                span,
                field,
                format!(
                    "path {:?} is a tag, so it cannot also be the folder of {:?}",
                    tag.path, tags[below].path
                ),
            );
        }
    }
}

/// The expanded alarms: names unique by how they look, each on a tag that exists (the first
/// of its name, as the error for a taken name says) and suits its condition.
fn check_expanded_alarms(reader: &mut Reader<'_>, plant: &TracedPlant<'_>) {
    let expanded = &plant.expanded;
    let mut tags_by_name: HashMap<&str, &TagSpec> = HashMap::new();
    for tag in &expanded.tags {
        tags_by_name.entry(tag.name.as_str()).or_insert(tag);
    }
    let mut alarm_names = SeenNames::default();
    let mut suppressions_seen = BTreeSet::new();
    for (position, alarm) in expanded.alarms.iter().enumerate() {
        if let Some(first) = alarm_names.first_like(&alarm.name, position) {
            let (span, field) = plant.alarm_origin(position);
            let other = &expanded.alarms[first].name;
            reader.error(
                span,
                format!("{field}.name"),
                taken("alarm name", &alarm.name, other, other),
            );
        }
        match tags_by_name.get(alarm.tag.as_str()) {
            None if plant.tag_may_be_unread(&alarm.tag) => {}
            None => {
                let (span, field) = plant.alarm_origin(position);
                let known = expanded.tags.iter().map(|tag| tag.name.as_str());
                reader.error(
                    span,
                    format!("{field}.tag"),
                    format!(
                        "no tag named {:?}{}",
                        alarm.tag,
                        did_you_mean(&alarm.tag, known, Quote::DoubleQuotes)
                    ),
                );
            }
            Some(tag) => {
                if let Some(problem) = unsuitable(alarm.condition, tag.kind) {
                    let (span, field) = plant.alarm_origin(position);
                    reader.error(span, format!("{field}.condition"), problem);
                }
            }
        }
        if let Some(expression) = &alarm.suppress_when {
            let (span, field) = plant.suppression_origin(position);
            // A type's alarm is written once for all its instances: the first one's problems
            // are its problems.
            if suppressions_seen.insert(span.start) {
                for problem in suppression_problems(expression, &tags_by_name, plant) {
                    reader.error(span.clone(), field.clone(), problem);
                }
            }
        }
    }
}

/// What is wrong with a `suppress_when` against the plant's tags: a tag that does not exist,
/// or one tested as what it is not (a number alone, a bool ordered, a text outside its values).
fn suppression_problems(
    expression: &TagExpression,
    tags_by_name: &HashMap<&str, &TagSpec>,
    plant: &TracedPlant<'_>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, test) in expression.tests() {
        let Some(tag) = tags_by_name.get(name) else {
            if !plant.tag_may_be_unread(name) {
                let known = plant.expanded.tags.iter().map(|tag| tag.name.as_str());
                problems.push(format!(
                    "no tag named {name:?}{}",
                    did_you_mean(name, known, Quote::DoubleQuotes)
                ));
            }
            continue;
        };
        let kind = tag.kind.name();
        let problem = match (tag.kind, test) {
            (TagType::Bool, None) => None,
            (_, None) => Some(format!(
                "{name} is a {kind} tag: compare it with a value (only a bool tag stands alone)"
            )),
            (TagType::Number | TagType::Integer, Some((_, Operand::Number(_)))) => None,
            (TagType::Bool | TagType::String, Some((comparison, _))) if comparison.orders() => Some(format!(
                "{name} is a {kind} tag: it is compared with == or != only, not {}",
                comparison.symbol()
            )),
            (TagType::Bool, Some((_, Operand::Bool(_)))) => None,
            (TagType::String, Some((_, Operand::Text(text)))) => {
                outside_values(&tag.values, text).map(|problem| format!("{name}: {problem}"))
            }
            (_, Some((_, value))) => Some(format!(
                "{name} is a {kind} tag, compared with a {}",
                value.kind()
            )),
        };
        problems.extend(problem);
    }
    problems
}

/// A motion moves around the tag's initial value: each simulated expanded tag has one, from
/// its own entry, its type or its instance.
fn check_simulated_initials(reader: &mut Reader<'_>, plant: &TracedPlant<'_>) {
    let places = plant.places;
    for (position, tag) in plant.expanded.tags.iter().enumerate() {
        if tag.simulate.is_none() || tag.initial.as_ref().and_then(InitialValue::as_f64).is_some() {
            continue;
        }
        let (span, field, whose) = match plant.tag_entry(position) {
            Ok(instance) => (
                places.span("equipment", instance, "name"),
                format!("{}.initial", places.field("equipment", instance)),
                format!("here or in type {:?}", plant.model.equipment[instance].kind),
            ),
            Err(index) => (
                places.span_at("tags", index, &["simulate"]),
                format!("{}.initial", places.field("tags", index)),
                "to the tag".to_owned(),
            ),
        };
        reader.error(
            span,
            field,
            format!(
                "tag {:?} is simulated around its initial value and has none: give it one {whose}",
                tag.name
            ),
        );
    }
}

/// Each expanded tag bound to a source: a path it can be published at, a source that exists,
/// and no simulation beside it.
fn check_tag_sources(reader: &mut Reader<'_>, plant: &TracedPlant<'_>) {
    let model = plant.model;
    for (position, tag) in plant.expanded.tags.iter().enumerate() {
        let Some(binding) = &tag.source else { continue };
        let wanted = binding.kind();
        if wanted == SourceKind::Mqtt {
            check_topic_path(reader, plant, position, tag, binding);
        }
        let name = binding.source_name();
        let source = model.sources.iter().find(|source| source.name == name);
        let known_source = source.is_some() || plant.places.dropped_named("sources", name);
        let kind_problem = source.filter(|source| source.kind() != wanted).map(|source| {
            format!(
                "tag {:?} names {name:?} as its {}, and that source is {}: name it with {}",
                tag.name,
                wanted.binding_key(),
                source.url,
                source.kind().binding_key()
            )
        });
        let type_problem = binding
            .modbus_point()
            .and_then(Result::ok)
            .and_then(|point| modbus_type_problem(tag, &point));
        if known_source && tag.simulate.is_none() && kind_problem.is_none() && type_problem.is_none() {
            continue;
        }
        let (span, field) = plant.tag_origin(position);
        for problem in kind_problem.into_iter().chain(type_problem) {
            reader.error(span.clone(), field.clone(), problem);
        }
        if !known_source {
            let known = model.sources.iter().map(|source| source.name.as_str());
            reader.error(
                span.clone(),
                field.clone(),
                format!(
                    "tag {:?} names source {:?}, which no [[sources]] entry defines{}",
                    tag.name,
                    name,
                    did_you_mean(name, known, Quote::DoubleQuotes)
                ),
            );
        }
        if tag.simulate.is_some() {
            reader.error(
                span,
                field,
                format!(
                    "tag {:?} has a source and a simulation: its values come from one or the other",
                    tag.name
                ),
            );
        }
    }
}

/// Whether a tag of its type can hold what its Modbus point reads: a bool tag a bit, an
/// integer tag a whole register value without scale or offset, a number tag any register;
/// a text tag none.
fn modbus_type_problem(tag: &TagSpec, point: &modbus::Point) -> Option<String> {
    if tag.writable && !point.table().writable() {
        return Some(format!(
            "tag {:?} is writable and its Modbus {} is read-only: bind it to a coil or holding \
             register, or drop writable",
            tag.name,
            point.table()
        ));
    }
    let format = point.format();
    let whole = matches!(
        format,
        modbus::Format::U16 | modbus::Format::I16 | modbus::Format::U32 | modbus::Format::I32
    );
    let unscaled = tag.source.as_ref().is_none_or(|binding| {
        binding.scale.is_none_or(|scale| scale == 1.0) && binding.offset.is_none_or(|offset| offset == 0.0)
    });
    let fits = match tag.kind {
        TagType::Bool => format == modbus::Format::Bool,
        TagType::Integer => whole && unscaled,
        TagType::Number => format != modbus::Format::Bool,
        TagType::String => false,
    };
    (!fits).then(|| {
        format!(
            "tag {:?} is {} and its Modbus {} reads as {format}{}: a bool tag takes a coil or \
             discrete input, an integer tag a whole register format without scale or offset, a \
             number tag any register format",
            tag.name,
            tag.kind.name(),
            point.table(),
            if unscaled { "" } else { " with a scale or offset" }
        )
    })
}

/// A plain UNS binding without a topic of its own is on `<root>/<path>`: a path with a
/// wildcard would subscribe to other tags' topics and cannot be published to. Reported at the
/// path the wildcard is in: the instance's, or the tag's own.
fn check_topic_path(
    reader: &mut Reader<'_>,
    plant: &TracedPlant<'_>,
    position: usize,
    tag: &TagSpec,
    binding: &SourceBinding,
) {
    if binding.sparkplug.is_some() || binding.topic.is_some() {
        return;
    }
    let Some(wildcard) = tag.path.chars().find(|c| matches!(c, '+' | '#')) else {
        return;
    };
    let places = plant.places;
    let (span, field) = match plant.tag_entry(position) {
        Ok(instance) => (
            places.span("equipment", instance, "path"),
            format!("{}.path", places.field("equipment", instance)),
        ),
        Err(index) => (
            places.span("tags", index, "path"),
            format!("{}.path", places.field("tags", index)),
        ),
    };
    reader.error(
        span,
        field,
        format!(
            "path {:?} of tag {:?} has the MQTT wildcard '{wildcard}', and the tag's topic on source {:?} \
             is its path: give the tag source.topic, or a path without '+' and '#'",
            tag.path, tag.name, binding.broker
        ),
    );
}

/// Each described folder: described once, and not the path of a tag.
fn check_folders(reader: &mut Reader<'_>, plant: &TracedPlant<'_>) {
    let places = plant.places;
    let tags = &plant.expanded.tags;
    let mut paths: HashMap<String, usize> = HashMap::new();
    for (position, tag) in tags.iter().enumerate() {
        paths.entry(names::fold(&tag.path)).or_insert(position);
    }
    let mut folder_paths: HashMap<String, usize> = HashMap::new();
    for (index, folder) in plant.model.folders.iter().enumerate() {
        let field = format!("{}.path", places.field("folders", index));
        if folder_paths.insert(names::fold(&folder.path), index).is_some() {
            reader.error(
                places.span("folders", index, "path"),
                field.clone(),
                format!("folder {:?} is described twice", folder.path),
            );
        }
        if let Some(tag) = paths
            .get(&names::fold(&folder.path))
            .map(|&position| &tags[position])
        {
            reader.error(
                places.span("folders", index, "path"),
                field,
                format!(
                    "{:?} is the path of tag {:?}, not a folder",
                    folder.path, tag.name
                ),
            );
        }
    }
}

/// Each document: at most [`MAX_DOCUMENTS`](crate::MAX_DOCUMENTS), each file attached once
/// (ignoring case, as file systems may), and each type, instance and folder it names one the
/// plant has (a folder: described, or on the way to an instance or a tag).
fn check_documents(reader: &mut Reader<'_>, plant: &TracedPlant<'_>) {
    let places = plant.places;
    let model = plant.model;
    if model.documents.len() > crate::MAX_DOCUMENTS {
        let index = crate::MAX_DOCUMENTS;
        reader.error(
            places.span("documents", index, ""),
            places.field("documents", index),
            format!(
                "the plant attaches {} documents; at most {} may be attached",
                model.documents.len(),
                crate::MAX_DOCUMENTS
            ),
        );
    }
    let folders = plant.folders();
    let folders_unsure = plant.folders_unsure();
    let mut files: HashMap<String, usize> = HashMap::new();
    for (index, document) in model.documents.iter().enumerate() {
        if files.insert(names::fold(&document.path), index).is_some() {
            reader.error(
                places.span("documents", index, "path"),
                format!("{}.path", places.field("documents", index)),
                format!("{:?} is attached twice", document.path),
            );
        }
        let references: [(&str, &[String], &str, Vec<&str>); 3] = [
            (
                "types",
                &document.types,
                "type",
                model.types.iter().map(|kind| kind.name.as_str()).collect(),
            ),
            (
                "equipment",
                &document.equipment,
                "equipment instance",
                model
                    .equipment
                    .iter()
                    .map(|instance| instance.name.as_str())
                    .collect(),
            ),
            (
                "folders",
                &document.folders,
                "folder",
                folders.iter().copied().collect(),
            ),
        ];
        for (key, named, what, known) in references {
            for (position, name) in named.iter().enumerate() {
                let found = known.contains(&name.as_str())
                    || match key {
                        "folders" => folders_unsure,
                        _ => places.dropped_named(key, name),
                    };
                if !found {
                    reader.error(
                        places.span_at_item("documents", index, key, position),
                        format!("{}.{key}[{position}]", places.field("documents", index)),
                        format!(
                            "no {what} named {name:?}{}",
                            did_you_mean(name, known.iter().copied(), Quote::DoubleQuotes)
                        ),
                    );
                }
            }
        }
    }
}

/// Whether what the model expands to (instances times their type's members, plus the plain
/// tags and alarms) stays within [`MAX_TAGS`](crate::MAX_TAGS) and
/// [`MAX_ALARMS`](crate::MAX_ALARMS), counted without expanding it; past a bound, one error
/// at the entry where the count passes it, saying what the whole would be.
pub(crate) fn within_bounds(reader: &mut Reader<'_>, model: &PlantModel, places: &Places<'_>) -> bool {
    let mut members: HashMap<&str, (usize, usize)> = HashMap::new();
    for kind in &model.types {
        members
            .entry(kind.name.as_str())
            .or_insert((kind.tags.len(), kind.alarms.len()));
    }
    let per_instance: Vec<(usize, usize)> = model
        .equipment
        .iter()
        .map(|instance| members.get(instance.kind.as_str()).copied().unwrap_or_default())
        .collect();
    let mut within = true;
    for (what, bound, member_count, plain, section, key) in [
        ("tags", crate::MAX_TAGS, 0, model.tags.len(), "tags", "name"),
        (
            "alarms",
            crate::MAX_ALARMS,
            1,
            model.alarms.len(),
            "alarms",
            "name",
        ),
    ] {
        let count = |pair: &(usize, usize)| if member_count == 0 { pair.0 } else { pair.1 };
        let of_instances = per_instance
            .iter()
            .map(count)
            .fold(0_usize, usize::saturating_add);
        let total = of_instances.saturating_add(plain);
        if total <= bound {
            continue;
        }
        within = false;
        let message = format!(
            "the plant would have {total} {what} ({of_instances} of equipment instances, {plain} of its own); \
             a plant may have at most {bound}: this is where it passes the bound"
        );
        let mut running = 0_usize;
        let crossing = per_instance.iter().position(|pair| {
            running = running.saturating_add(count(pair));
            running > bound
        });
        match crossing {
            Some(index) => reader.error(
                places.span("equipment", index, "type"),
                format!("{}.type", places.field("equipment", index)),
                message,
            ),
            None => {
                let index = bound - of_instances;
                reader.error(
                    places.span(section, index, key),
                    places.field(section, index),
                    message,
                );
            }
        }
    }
    within
}

/// Why `what` `name` is refused beside `other` (the first with its key, of `owner`): the
/// same ignoring case, or only looking the same.
fn taken(what: &str, name: &str, other: &str, owner: &str) -> String {
    if names::fold(name) == names::fold(other) {
        format!("{what} {name:?} is taken (by {owner:?})")
    } else {
        format!(
            "{what} {name:?} looks the same as {other:?} (of {owner:?}): a character of another script, \
             or one that looks like another, makes a name people cannot tell apart"
        )
    }
}

/// Why a condition cannot watch a tag of `kind`, if it cannot.
fn unsuitable(condition: Condition, kind: TagType) -> Option<String> {
    match (condition, kind) {
        (Condition::Digital, TagType::Bool) => None,
        (Condition::Digital, other) => Some(format!(
            "a Digital alarm watches a bool tag, not a {} tag",
            other.name()
        )),
        (_, kind) if kind.is_numeric() => None,
        (condition, other) => Some(format!(
            "a {} alarm watches a number or integer tag, not a {} tag",
            condition.name(),
            other.name()
        )),
    }
}
