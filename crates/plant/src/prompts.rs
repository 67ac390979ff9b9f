//! Prompts a client of RuntimeMCP offers its user: the built-in ones (diagnose an equipment, a
//! shift handover, explain an alarm) and the site's own from the plant file's `[[prompts]]`.
//! Each names its arguments, which are completed from the live plant (the equipment, the
//! alarms, the tags, the folders), and renders to the message a model is given.

use std::sync::LazyLock;

use plant_model::{ArgumentValues, MAX_PROMPT_VALUE, PromptSpec, fill_template};

use crate::objects::ObjectModel;

/// Where an argument's values come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// The plant's equipment (folders holding tags), by name.
    Equipment,
    /// The plant's alarms, by name.
    Alarm,
    /// The plant's tags, by name.
    Tag,
    /// The plant's UNS folders, by path.
    Folder,
    /// A few spans of hours.
    Hours,
    /// Any text: nothing to complete or check.
    Text,
}

impl From<ArgumentValues> for Completion {
    fn from(values: ArgumentValues) -> Self {
        match values {
            ArgumentValues::Text => Self::Text,
            ArgumentValues::Equipment => Self::Equipment,
            ArgumentValues::Alarm => Self::Alarm,
            ArgumentValues::Tag => Self::Tag,
            ArgumentValues::Folder => Self::Folder,
        }
    }
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptArgument {
    /// Its name, as the template names it in braces.
    pub name: String,
    /// What to give, for the user.
    pub description: String,
    /// What it is when not given; an argument without one is required.
    pub default: Option<String>,
    /// Where its values come from.
    pub completion: Completion,
}

impl PromptArgument {
    /// Whether the prompt needs it given.
    pub fn required(&self) -> bool {
        self.default.is_none()
    }
}

/// A prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlantPrompt {
    /// Its name, as clients call it.
    pub name: String,
    /// A short name for people.
    pub title: String,
    /// What it does.
    pub description: String,
    /// Its arguments.
    pub arguments: Vec<PromptArgument>,
    /// The message, each `{argument}` replaced by its value.
    template: String,
}

/// Why a prompt was not rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptError {
    /// No prompt has that name.
    #[error("no prompt named {0:?}; prompts/list names them")]
    Unknown(String),
    /// A required argument is missing or empty.
    #[error("prompt {prompt} needs its argument {argument:?}")]
    Missing {
        /// The prompt.
        prompt: String,
        /// The argument.
        argument: String,
    },
    /// An argument names nothing the plant has.
    #[error("{argument} {value:?} is not in the plant; completing the argument lists what is")]
    NotInPlant {
        /// The argument.
        argument: String,
        /// What was given.
        value: String,
    },
    /// A text argument is longer than a prompt takes.
    #[error("{argument} is {chars} characters long; at most {MAX_PROMPT_VALUE}")]
    TooLong {
        /// The argument.
        argument: String,
        /// How long it was.
        chars: usize,
    },
}

/// The most values one completion gives (MCP's own limit).
pub const MAX_COMPLETIONS: usize = 100;

fn argument(name: &str, description: &str, default: Option<&str>, completion: Completion) -> PromptArgument {
    PromptArgument {
        name: name.to_owned(),
        description: description.to_owned(),
        default: default.map(str::to_owned),
        completion,
    }
}

fn built_in(
    name: &str,
    title: &str,
    description: &str,
    arguments: Vec<PromptArgument>,
    template: &str,
) -> PlantPrompt {
    PlantPrompt {
        name: name.to_owned(),
        title: title.to_owned(),
        description: description.to_owned(),
        arguments,
        template: template.to_owned(),
    }
}

/// The built-in prompts.
static BUILT_IN: LazyLock<[PlantPrompt; 3]> = LazyLock::new(|| {
    [
        built_in(
            "diagnose_equipment",
            "Diagnose an equipment",
            "What is wrong with an equipment, from its live values, alarms, recent history and documents.",
            vec![argument(
                "equipment",
                "The equipment to diagnose, e.g. Pump1.",
                None,
                Completion::Equipment,
            )],
            "What is wrong with {equipment}? Read it with runtime_describe_object, its active alarms with \
             runtime_get_active_alarms, the last hour of its key values with runtime_get_tag_history, and \
             the passages of its documents with runtime_search_documents. Say what is wrong and the evidence \
             (each value with its time and quality; a value whose quality is not Good is not current), then \
             what an operator should do, citing the documents by title and section. If nothing is wrong, say \
             so.",
        ),
        built_in(
            "shift_handover",
            "Shift handover summary",
            "What the incoming shift needs to know about the last hours: alarms, handling, decisions and key values.",
            vec![argument(
                "hours",
                "How many hours the shift lasted (8 unless given).",
                Some("8"),
                Completion::Hours,
            )],
            "Write the shift handover for the last {hours} hours, as bullet points an incoming operator reads \
             in two minutes: the alarms still active and what to do about each (runtime_get_active_alarms); \
             the alarms that stood and cleared (runtime_query_alarm_history); what is shelved, suppressed or \
             out of service and until when; the alarm system's performance and its bad actors \
             (runtime_get_alarm_report); and anything an operator should watch.",
        ),
        built_in(
            "explain_alarm",
            "Explain an alarm",
            "What an alarm watches, how it stands, why it trips and what to do, and whether it is a bad actor.",
            vec![argument(
                "alarm",
                "The alarm to explain, e.g. Tank1.Level.Hi.",
                None,
                Completion::Alarm,
            )],
            "Explain alarm {alarm}: what it watches and its limit, how it stands now and since when \
             (runtime_get_active_alarms, runtime_describe_object on its tag), its cause, consequence and \
             response as the plant says, how often it tripped lately (runtime_query_alarm_history) and \
             whether it is a bad actor of the alarm system (runtime_get_alarm_report).",
        ),
    ]
});

/// The prompts offered beside the `site`'s own: each built-in one unless a site prompt has its
/// name (a site may word its own diagnosis), then the site's prompts in file order.
pub fn offered(site: &[PlantPrompt]) -> impl Iterator<Item = &PlantPrompt> {
    BUILT_IN
        .iter()
        .filter(|built_in| site.iter().all(|prompt| prompt.name != built_in.name))
        .chain(site)
}

/// The prompt named `name` among those [`offered`] beside the `site`'s own.
pub fn named<'p>(site: &'p [PlantPrompt], name: &str) -> Result<&'p PlantPrompt, PromptError> {
    offered(site)
        .find(|prompt| prompt.name == name)
        .ok_or_else(|| PromptError::Unknown(name.chars().take(64).collect()))
}

impl PlantPrompt {
    /// A site prompt as the plant file gives it (checked when it was read).
    pub fn of_site(spec: &PromptSpec) -> Self {
        Self {
            name: spec.name.clone(),
            title: spec.title.clone(),
            description: spec.description.clone(),
            arguments: spec
                .arguments
                .iter()
                .map(|argument| PromptArgument {
                    name: argument.name.clone(),
                    description: argument.description.clone(),
                    default: argument.default.clone(),
                    completion: argument.values.into(),
                })
                .collect(),
            template: spec.template.clone(),
        }
    }

    /// The message for `given` arguments (name, value), each checked against the plant's
    /// `objects`.
    pub fn render(&self, objects: &ObjectModel, given: &[(String, String)]) -> Result<String, PromptError> {
        let mut values: Vec<(&str, String)> = Vec::with_capacity(self.arguments.len());
        for argument in &self.arguments {
            let value = given
                .iter()
                .find(|(name, _)| *name == argument.name)
                .map(|(_, value)| value.trim())
                .filter(|value| !value.is_empty());
            let value = match (value, &argument.default) {
                (Some(value), _) => {
                    let chars = value.chars().count();
                    if chars > MAX_PROMPT_VALUE {
                        return Err(PromptError::TooLong {
                            argument: argument.name.clone(),
                            chars,
                        });
                    }
                    if !known(objects, argument.completion, value) {
                        return Err(PromptError::NotInPlant {
                            argument: argument.name.clone(),
                            value: value.chars().take(64).collect(),
                        });
                    }
                    value.to_owned()
                }
                (None, Some(default)) => default.clone(),
                (None, None) => {
                    return Err(PromptError::Missing {
                        prompt: self.name.clone(),
                        argument: argument.name.clone(),
                    });
                }
            };
            values.push((&argument.name, value));
        }
        Ok(fill_template(&self.template, |name| {
            values
                .iter()
                .find(|(argument, _)| *argument == name)
                .map(|(_, value)| value.as_str())
        }))
    }

    /// The argument named `name`.
    pub fn argument(&self, name: &str) -> Option<&PromptArgument> {
        self.arguments.iter().find(|argument| argument.name == name)
    }
}

/// Whether `value` is one the plant has for `completion`.
fn known(objects: &ObjectModel, completion: Completion, value: &str) -> bool {
    match completion {
        Completion::Equipment => objects.equipment().any(|equipment| equipment.name == value),
        Completion::Alarm => objects.alarm(value).is_some(),
        Completion::Tag => objects.tag(value).is_some(),
        Completion::Folder => objects.folder(value).is_some(),
        Completion::Hours => value.parse::<u32>().is_ok_and(|hours| (1..=168).contains(&hours)),
        Completion::Text => true,
    }
}

/// The values for `completion` starting with `typed` (case aside), at most
/// [`MAX_COMPLETIONS`], and how many there are in all.
pub fn complete(objects: &ObjectModel, completion: Completion, typed: &str) -> (Vec<String>, usize) {
    let candidates: Vec<String> = match completion {
        Completion::Equipment => {
            // Two areas may each have a Pump1: offered once.
            let mut seen = std::collections::HashSet::new();
            objects
                .equipment()
                .filter(|equipment| seen.insert(equipment.name))
                .map(|equipment| equipment.name.to_owned())
                .collect()
        }
        Completion::Alarm => objects
            .alarms()
            .iter()
            .map(|alarm| alarm.definition().name.clone())
            .collect(),
        Completion::Tag => objects.tags().map(|tag| tag.definition().name.clone()).collect(),
        Completion::Folder => objects
            .folders()
            .map(|(path, _)| path.to_owned())
            .filter(|path| !path.is_empty())
            .collect(),
        Completion::Hours => ["8", "12", "24"].map(str::to_owned).to_vec(),
        Completion::Text => Vec::new(),
    };
    let typed = typed.to_lowercase();
    let matching: Vec<String> = candidates
        .into_iter()
        .filter(|candidate| candidate.to_lowercase().starts_with(&typed))
        .collect();
    let total = matching.len();
    (matching.into_iter().take(MAX_COMPLETIONS).collect(), total)
}
