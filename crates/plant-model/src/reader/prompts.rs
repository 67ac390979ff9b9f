//! `[[prompts]]`: the site's own prompts for MCP clients, each a template whose `{argument}`s
//! are its declared arguments, every argument used, and the defaults of arguments whose values
//! are plant names checked against the plant.

use std::collections::{BTreeSet, HashMap};

use super::traced::TracedPlant;
use super::{Fields, Reader, span_of};
use crate::document::Node;
use crate::model::{ArgumentValues, PromptArgumentSpec, PromptSpec};
use crate::names::{Quote, did_you_mean};
use crate::{MAX_PROMPT_ARGUMENTS, MAX_PROMPT_TEMPLATE, MAX_PROMPT_VALUE, MAX_PROMPTS, placeholders};

/// The longest name of a prompt or of an argument.
const MAX_WORD: usize = 64;

/// The longest title, in characters.
const MAX_TITLE: usize = 200;

/// The longest description, in characters.
const MAX_DESCRIPTION: usize = 2000;

impl Reader<'_> {
    pub(super) fn prompt_spec(&mut self, node: &Node, path: &str) -> Option<PromptSpec> {
        let mut fields = self.table(node, path)?;
        let name = self.word(&mut fields, "name", "a prompt", &['_', '-']);
        let title = self.text(&mut fields, "title", MAX_TITLE);
        let description = self.text(&mut fields, "description", MAX_DESCRIPTION);
        let template_span = span_of(&fields, "template").unwrap_or_else(|| fields.span.clone());
        let template = self.required_string(&mut fields, "template");
        let arguments = self.list(&mut fields, "arguments", Self::prompt_argument);
        let arguments_span = span_of(&fields, "arguments").unwrap_or_else(|| fields.span.clone());
        let template_field = fields.field("template");
        let arguments_field = fields.field("arguments");
        self.done(fields, &["name", "title", "description", "template", "arguments"]);
        let template = template?;
        if template.trim().is_empty() || template.len() > MAX_PROMPT_TEMPLATE {
            self.error(
                template_span,
                template_field,
                format!("a template is 1 to {MAX_PROMPT_TEMPLATE} bytes of text"),
            );
            return None;
        }
        if arguments.len() > MAX_PROMPT_ARGUMENTS {
            self.error(
                arguments_span,
                arguments_field,
                format!(
                    "the prompt has {} arguments; at most {MAX_PROMPT_ARGUMENTS}",
                    arguments.len()
                ),
            );
            return None;
        }
        let mut fine = true;
        // Each placeholder once, in the template's order.
        let mut used: Vec<&str> = Vec::new();
        for (name, _) in placeholders(&template) {
            if !used.contains(&name) {
                used.push(name);
            }
        }
        let mut seen = BTreeSet::new();
        let kept = self.kept.get(&arguments_field).cloned().unwrap_or_default();
        for (index, argument) in arguments.iter().enumerate() {
            let file_index = kept.get(index).copied().unwrap_or(index);
            let name_span = super::lookup(node, "arguments")
                .and_then(|list| super::item(list, file_index))
                .and_then(|entry| super::lookup(entry, "name"))
                .map_or_else(|| arguments_span.clone(), |name| name.span.clone());
            let field = format!("{arguments_field}[{file_index}].name");
            if !seen.insert(argument.name.as_str()) {
                self.error(
                    name_span,
                    field,
                    format!("two arguments named {:?}", argument.name),
                );
                fine = false;
            } else if !used.contains(&argument.name.as_str()) {
                self.error(
                    name_span,
                    field,
                    format!("the template never uses {{{}}}", argument.name),
                );
                fine = false;
            }
        }
        // An argument left out was reported for itself: its placeholder is not reported again.
        let arguments_dropped = self.dropped_any(&arguments_field);
        let declared: Vec<&str> = arguments.iter().map(|argument| argument.name.as_str()).collect();
        let undeclared = used
            .iter()
            .filter(|used| !arguments_dropped && !declared.contains(used));
        for used in undeclared {
            let hint = did_you_mean(used, declared.iter().copied(), Quote::DoubleQuotes);
            self.error(
                template_span.clone(),
                template_field.clone(),
                format!(
                    "{{{used}}} names no argument of this prompt{hint}; declare it in [[prompts.arguments]] \
                     or write {{{{ and }}}} for braces themselves"
                ),
            );
            fine = false;
        }
        (fine && !arguments_dropped).then_some(())?;
        Some(PromptSpec {
            name: name?,
            title: title?,
            description: description?,
            template,
            arguments,
        })
    }

    fn prompt_argument(&mut self, node: &Node, path: &str) -> Option<PromptArgumentSpec> {
        let mut fields = self.table(node, path)?;
        let name = self.word(&mut fields, "name", "an argument", &['_']);
        let description = self.text(&mut fields, "description", MAX_DESCRIPTION);
        let default_span = span_of(&fields, "default");
        let default = self.string(&mut fields, "default");
        let values = match self.string(&mut fields, "values") {
            Some(kind) => {
                let known: Vec<&str> = ArgumentValues::ALL.iter().map(|values| values.name()).collect();
                self.one_of(
                    &fields,
                    "values",
                    "kind of values",
                    &kind,
                    &known,
                    ArgumentValues::parse,
                )
            }
            None => Some(ArgumentValues::Text),
        };
        if let (Some(default), Some(span)) = (&default, default_span)
            && (default.trim().is_empty() || default.chars().count() > MAX_PROMPT_VALUE)
        {
            self.error(
                span,
                fields.field("default"),
                format!("a default is 1 to {MAX_PROMPT_VALUE} characters of text"),
            );
            return None;
        }
        self.done(fields, &["name", "description", "default", "values"]);
        Some(PromptArgumentSpec {
            name: name?,
            description: description?,
            default,
            values: values?,
        })
    }

    /// A name made of ASCII letters, digits and `extra` characters, beginning with a letter or
    /// `_`, at most [`MAX_WORD`] bytes: what MCP clients call and templates write in braces.
    fn word(&mut self, fields: &mut Fields<'_>, key: &str, what: &str, extra: &[char]) -> Option<String> {
        let span = span_of(fields, key).unwrap_or_else(|| fields.span.clone());
        let word = self.required_string(fields, key)?;
        let usable = (1..=MAX_WORD).contains(&word.len())
            && word.starts_with(|first: char| first.is_ascii_alphabetic() || first == '_')
            && word
                .chars()
                .all(|character| character.is_ascii_alphanumeric() || extra.contains(&character));
        if !usable {
            let allowed: String = extra.iter().map(|character| format!(", '{character}'")).collect();
            self.error(
                span,
                fields.field(key),
                format!(
                    "{word:?} is not a usable name for {what}: 1 to {MAX_WORD} ASCII letters, digits{allowed}, \
                     beginning with a letter or '_'"
                ),
            );
            return None;
        }
        Some(word)
    }

    /// Text of at most `longest` characters (absent: empty).
    fn text(&mut self, fields: &mut Fields<'_>, key: &str, longest: usize) -> Option<String> {
        let span = span_of(fields, key);
        let text = self.string(fields, key).unwrap_or_default();
        if let Some(span) = span.filter(|_| text.chars().count() > longest) {
            self.error(span, fields.field(key), format!("at most {longest} characters"));
            return None;
        }
        Some(text.trim().to_owned())
    }

    fn dropped_any(&self, list: &str) -> bool {
        self.dropped.get(list).is_some_and(|dropped| !dropped.is_empty())
    }
}

/// At most [`MAX_PROMPTS`], and each default of an argument whose values are plant names one
/// the plant has.
pub(super) fn check_prompts(reader: &mut Reader<'_>, plant: &TracedPlant<'_>) {
    let places = plant.places;
    let prompts = &plant.model.prompts;
    if prompts.len() > MAX_PROMPTS {
        reader.error(
            places.span("prompts", MAX_PROMPTS, ""),
            places.field("prompts", MAX_PROMPTS),
            format!("the plant gives {} prompts; at most {MAX_PROMPTS}", prompts.len()),
        );
    }
    let defaults = prompts.iter().enumerate().flat_map(|(index, prompt)| {
        prompt
            .arguments
            .iter()
            .enumerate()
            .filter_map(move |(position, argument)| {
                Some((index, position, argument, argument.default.as_deref()?))
            })
    });
    let mut known: HashMap<ArgumentValues, Vec<String>> = HashMap::new();
    for (index, position, argument, default) in defaults {
        if argument.values == ArgumentValues::Text {
            continue;
        }
        let names = known
            .entry(argument.values)
            .or_insert_with(|| plant_names(plant, argument.values));
        if names.iter().any(|name| name == default) || unsure(plant, argument.values) {
            continue;
        }
        reader.error(
            places.nested_span("prompts", index, "arguments", position, "default"),
            format!(
                "{}.default",
                places.nested_field("prompts", index, "arguments", position)
            ),
            format!(
                "no {} named {default:?}{}",
                argument.values.name(),
                did_you_mean(default, names.iter().map(String::as_str), Quote::DoubleQuotes)
            ),
        );
    }
}

/// The names the plant has of a kind of values: the equipment (instances, and folders holding
/// tags, by their last segment), alarms, tags or folders.
fn plant_names(plant: &TracedPlant<'_>, values: ArgumentValues) -> Vec<String> {
    let expanded = &plant.expanded;
    match values {
        ArgumentValues::Text => Vec::new(),
        ArgumentValues::Equipment => {
            let mut names: BTreeSet<String> = plant
                .model
                .equipment
                .iter()
                .map(|instance| instance.name.clone())
                .collect();
            names.extend(expanded.tags.iter().filter_map(|tag| {
                let folder = tag.path.rsplit_once('/')?.0;
                Some(folder.rsplit('/').next().unwrap_or(folder).to_owned())
            }));
            names.into_iter().collect()
        }
        ArgumentValues::Alarm => expanded.alarms.iter().map(|alarm| alarm.name.clone()).collect(),
        ArgumentValues::Tag => expanded.tags.iter().map(|tag| tag.name.clone()).collect(),
        ArgumentValues::Folder => plant.folders().into_iter().map(str::to_owned).collect(),
    }
}

/// Whether names of this kind may be missing because entries were left out of the model.
fn unsure(plant: &TracedPlant<'_>, values: ArgumentValues) -> bool {
    let lists: &[&str] = match values {
        ArgumentValues::Alarm => &["alarms", "types", "equipment"],
        _ => &["folders", "tags", "types", "equipment"],
    };
    lists.iter().any(|list| plant.places.dropped_any(list))
}
