//! Prompts a client of RuntimeMCP offers its user: diagnose an equipment, a shift handover,
//! explain an alarm. Each names its arguments, which are completed from the live plant (the
//! equipment, the alarms), and renders to the message a model is given, naming the runtime tools
//! that answer it.

use crate::plant::PlantReader;

/// Where an argument's values come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// The plant's equipment (folders holding tags), by name.
    Equipment,
    /// The plant's alarms, by name.
    Alarm,
    /// A few spans of hours.
    Hours,
    /// The plant's UNS folders, by path.
    Folder,
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptArgument {
    /// Its name, as the template names it in braces.
    pub name: &'static str,
    /// What to give, for the user.
    pub description: &'static str,
    /// Whether the prompt needs it.
    pub required: bool,
    /// Where its values come from.
    pub completion: Completion,
}

/// A prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlantPrompt {
    /// Its name, as clients call it.
    pub name: &'static str,
    /// A short name for people.
    pub title: &'static str,
    /// What it does.
    pub description: &'static str,
    /// Its arguments.
    pub arguments: &'static [PromptArgument],
    /// The message, each `{argument}` replaced by its value.
    template: &'static str,
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
        prompt: &'static str,
        /// The argument.
        argument: &'static str,
    },
    /// An argument names nothing the plant has.
    #[error("{argument} {value:?} is not in the plant; completing the argument lists what is")]
    NotInPlant {
        /// The argument.
        argument: &'static str,
        /// What was given.
        value: String,
    },
}

/// The most values one completion gives (MCP's own limit).
pub const MAX_COMPLETIONS: usize = 100;

const EQUIPMENT: PromptArgument = PromptArgument {
    name: "equipment",
    description: "The equipment to diagnose, e.g. Pump1.",
    required: true,
    completion: Completion::Equipment,
};
const ALARM: PromptArgument = PromptArgument {
    name: "alarm",
    description: "The alarm to explain, e.g. Tank1.Level.Hi.",
    required: true,
    completion: Completion::Alarm,
};
const HOURS: PromptArgument = PromptArgument {
    name: "hours",
    description: "How many hours the shift lasted (8 unless given).",
    required: false,
    completion: Completion::Hours,
};

/// The built-in prompts.
pub const PROMPTS: [PlantPrompt; 3] = [
    PlantPrompt {
        name: "diagnose_equipment",
        title: "Diagnose an equipment",
        description: "What is wrong with an equipment, from its live values, alarms, recent history and documents.",
        arguments: &[EQUIPMENT],
        template: "What is wrong with {equipment}? Read it with runtime_describe_object, its active alarms with \
                   runtime_get_active_alarms, the last hour of its key values with runtime_get_tag_history, and \
                   the passages of its documents with runtime_search_documents. Say what is wrong and the evidence \
                   (each value with its time and quality; a value whose quality is not Good is not current), then \
                   what an operator should do, citing the documents by title and section. If nothing is wrong, say \
                   so.",
    },
    PlantPrompt {
        name: "shift_handover",
        title: "Shift handover summary",
        description: "What the incoming shift needs to know about the last hours: alarms, handling, decisions and key values.",
        arguments: &[HOURS],
        template: "Write the shift handover for the last {hours} hours, as bullet points an incoming operator reads \
                   in two minutes: the alarms still active and what to do about each (runtime_get_active_alarms); \
                   the alarms that stood and cleared (runtime_query_alarm_history); what is shelved, suppressed or \
                   out of service and until when; the alarm system's performance and its bad actors \
                   (runtime_get_alarm_report); and anything an operator should watch.",
    },
    PlantPrompt {
        name: "explain_alarm",
        title: "Explain an alarm",
        description: "What an alarm watches, how it stands, why it trips and what to do, and whether it is a bad actor.",
        arguments: &[ALARM],
        template: "Explain alarm {alarm}: what it watches and its limit, how it stands now and since when \
                   (runtime_get_active_alarms, runtime_describe_object on its tag), its cause, consequence and \
                   response as the plant says, how often it tripped lately (runtime_query_alarm_history) and \
                   whether it is a bad actor of the alarm system (runtime_get_alarm_report).",
    },
];

impl PlantPrompt {
    /// The prompt named `name`.
    pub fn named(name: &str) -> Result<&'static Self, PromptError> {
        PROMPTS
            .iter()
            .find(|prompt| prompt.name == name)
            .ok_or_else(|| PromptError::Unknown(name.chars().take(64).collect()))
    }

    /// The message for `given` arguments (name, value), each checked against `plant`.
    pub fn render(&self, plant: &PlantReader, given: &[(String, String)]) -> Result<String, PromptError> {
        let mut text = self.template.to_owned();
        for argument in self.arguments {
            let value = given
                .iter()
                .find(|(name, _)| name == argument.name)
                .map(|(_, value)| value.trim())
                .filter(|value| !value.is_empty());
            let value = match (value, argument.completion) {
                (Some(value), completion) => {
                    if !known(plant, completion, value) {
                        return Err(PromptError::NotInPlant {
                            argument: argument.name,
                            value: value.chars().take(64).collect(),
                        });
                    }
                    value.to_owned()
                }
                (None, _) if argument.required => {
                    return Err(PromptError::Missing {
                        prompt: self.name,
                        argument: argument.name,
                    });
                }
                (None, _) => "8".to_owned(),
            };
            text = text.replace(&format!("{{{}}}", argument.name), &value);
        }
        Ok(text)
    }

    /// The argument named `name`.
    pub fn argument(&self, name: &str) -> Option<&'static PromptArgument> {
        self.arguments.iter().find(|argument| argument.name == name)
    }
}

/// Whether `value` is one the plant has for `completion`.
fn known(plant: &PlantReader, completion: Completion, value: &str) -> bool {
    match completion {
        Completion::Equipment => equipment(plant).iter().any(|name| name == value),
        Completion::Alarm => plant.objects().alarm(value).is_some(),
        Completion::Hours => value.parse::<u32>().is_ok_and(|hours| (1..=168).contains(&hours)),
        Completion::Folder => plant.objects().folder(value).is_some(),
    }
}

/// The plant's equipment names: its declared instances, and the other folders holding tags.
fn equipment(plant: &PlantReader) -> Vec<String> {
    let objects = plant.objects();
    let mut names: Vec<String> = plant
        .library()
        .instances()
        .iter()
        .map(|instance| instance.name.clone())
        .collect();
    for (path, folder) in objects.folders() {
        let leaf = path.rsplit('/').next().unwrap_or(path);
        if !path.is_empty() && !folder.tags.is_empty() && !names.iter().any(|name| name == leaf) {
            names.push(leaf.to_owned());
        }
    }
    names
}

/// The values for `completion` starting with `typed` (case aside), at most
/// [`MAX_COMPLETIONS`], and how many there are in all.
pub fn complete(plant: &PlantReader, completion: Completion, typed: &str) -> (Vec<String>, usize) {
    let candidates: Vec<String> = match completion {
        Completion::Equipment => equipment(plant),
        Completion::Alarm => plant
            .objects()
            .alarms()
            .iter()
            .map(|alarm| alarm.definition().name.clone())
            .collect(),
        Completion::Hours => ["8", "12", "24"].map(str::to_owned).to_vec(),
        Completion::Folder => plant
            .objects()
            .folders()
            .map(|(path, _)| path.to_owned())
            .filter(|path| !path.is_empty())
            .collect(),
    };
    let typed = typed.to_lowercase();
    let matching: Vec<String> = candidates
        .into_iter()
        .filter(|candidate| candidate.to_lowercase().starts_with(&typed))
        .collect();
    let total = matching.len();
    (matching.into_iter().take(MAX_COMPLETIONS).collect(), total)
}
