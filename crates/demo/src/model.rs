//! The built-in demo model: a rule-based, OpenAI-compatible stand-in for an LLM.
//!
//! It exists so a machine without a GPU can watch the whole chat loop: it reads the operator's
//! question, asks for the runtime tools that fit (value, search, alarms, history, structure,
//! the plant's documents for what to do, and a proposal when asked to act), and composes its
//! answer from what those tools returned, citing the procedure it quotes. Every answer says
//! what it is, so no one mistakes it for a language model. It only ever uses tools the request
//! offered, and it knows nothing of the plant except what the tools tell it. What it cannot
//! tell from its rules it says it cannot, rather than answering something near it.

use std::collections::HashMap;

use scripted_llm::{RecordedRequest, Reply, Responder};
use serde_json::{Value, json};

/// The tool that searches the plant's documents (its procedures say what to do).
const DOCUMENTS_TOOL: &str = "runtime_search_documents";

/// The tool that proposes a write for an operator to approve.
const PROPOSE_TOOL: &str = "runtime_propose_write";

/// The model name the demo endpoint reports and expects.
pub const MODEL_NAME: &str = "tserver-demo-model";

/// Every answer starts with this, so the operator knows a rule-based program wrote it.
pub const DISCLOSURE: &str = "[demo model: rule-based, not an LLM]";

/// The demo model; answers each chat-completions POST from its body alone (it keeps no state).
#[derive(Debug, Clone, Copy, Default)]
pub struct DemoModel;

impl Responder for DemoModel {
    fn respond(&self, request: &RecordedRequest) -> Reply {
        if request.method == "GET" && request.path.ends_with("/models") {
            return Reply::status(
                200,
                json!({"object": "list", "data": [{"id": MODEL_NAME, "object": "model", "owned_by": "tserver-demo"}]}),
            );
        }
        if request.method != "POST" {
            return openai_error(404, "the demo model serves POST /v1/chat/completions");
        }
        let Some(body) = request.json() else {
            return openai_error(400, "the request body is not JSON");
        };
        match next_step(&body) {
            Step::Call(calls) => Reply::ToolCalls(calls),
            Step::Answer(text) => Reply::Content(format!("{DISCLOSURE} {text}")),
        }
    }
}

fn openai_error(status: u16, message: &str) -> Reply {
    Reply::status(
        status,
        json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}}),
    )
}

/// What the model does next: ask for tool calls `(id, name, arguments)` or answer.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Call(Vec<(String, String, String)>),
    Answer(String),
}

/// One tool exchange of the current turn, as the conversation shows it.
#[derive(Debug)]
struct Exchange {
    name: String,
    arguments: Value,
    /// The tool message content: `{"ok": true, "result": ..}` or `{"ok": false, "error": ..}`.
    content: Value,
}

impl Exchange {
    fn result(&self) -> Option<&Value> {
        (self.content["ok"] == true).then(|| &self.content["result"])
    }

    fn error_message(&self) -> String {
        self.content["error"]["message"]
            .as_str()
            .unwrap_or("the tool failed")
            .to_owned()
    }
}

/// The current turn: the last user question, the tools offered, and the exchanges since.
#[derive(Debug)]
struct Turn {
    question: String,
    offered: Vec<String>,
    exchanges: Vec<Exchange>,
    /// How many rounds of tool calls this turn has made.
    rounds: usize,
}

impl Turn {
    fn read(body: &Value) -> Self {
        let messages = body["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
        let last_user = messages.iter().rposition(|message| message["role"] == "user");
        let question = last_user
            .map(|at| message_text(&messages[at]))
            .unwrap_or_default();
        let offered = body["tools"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_owned))
            .collect();
        let mut calls: HashMap<String, (String, Value)> = HashMap::new();
        let mut exchanges = Vec::new();
        let mut rounds = 0;
        for message in last_user.map_or(&[][..], |at| &messages[at + 1..]) {
            match message["role"].as_str() {
                Some("assistant") => {
                    let Some(tool_calls) = message["tool_calls"].as_array() else {
                        continue;
                    };
                    rounds += 1;
                    for call in tool_calls {
                        let function = &call["function"];
                        let arguments = match &function["arguments"] {
                            Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
                            other => other.clone(),
                        };
                        let name = function["name"].as_str().unwrap_or_default().to_owned();
                        let id = call["id"].as_str().unwrap_or_default().to_owned();
                        calls.insert(id, (name, arguments));
                    }
                }
                Some("tool") => {
                    let id = message["tool_call_id"].as_str().unwrap_or_default();
                    let Some((name, arguments)) = calls.get(id).cloned() else {
                        continue;
                    };
                    let content = match &message["content"] {
                        Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
                        other => other.clone(),
                    };
                    exchanges.push(Exchange {
                        name,
                        arguments,
                        content,
                    });
                }
                _ => {}
            }
        }
        Self {
            question,
            offered,
            exchanges,
            rounds,
        }
    }

    fn offers(&self, tool: &str) -> bool {
        self.offered.iter().any(|name| name == tool)
    }

    /// Every exchange with `tool` this turn, in order.
    fn exchanges_of(&self, tool: &str) -> Vec<&Exchange> {
        self.exchanges
            .iter()
            .filter(|exchange| exchange.name == tool)
            .collect()
    }

    fn exchange(&self, tool: &str) -> Option<&Exchange> {
        self.exchanges.iter().find(|exchange| exchange.name == tool)
    }

    /// The result of `tool` in this turn, or a sentence saying why there is none.
    fn result_of(&self, tool: &str, what: &str) -> Result<&Value, String> {
        let exchange = self.exchange(tool);
        if let Some(failure) = failed(exchange, what) {
            return Err(failure);
        }
        Ok(exchange.and_then(Exchange::result).unwrap_or(&Value::Null))
    }

    /// Asks for `calls` in the next round, or explains which tool is missing.
    fn call(&self, calls: Vec<(&str, Value)>) -> Step {
        if let Some((missing, _)) = calls.iter().find(|(name, _)| !self.offers(name)) {
            return Step::Answer(format!(
                "To answer that I would call {missing}, but this solution does not offer it to me \
                 (the ModelOptions tool bits decide which runtime tools a model may use)."
            ));
        }
        let round = self.rounds + 1;
        Step::Call(
            calls
                .into_iter()
                .enumerate()
                .map(|(index, (name, arguments))| {
                    (
                        format!("demo_{round}_{index}"),
                        name.to_owned(),
                        arguments.to_string(),
                    )
                })
                .collect(),
        )
    }
}

/// A message's text: a string content, or the text parts of an array content.
fn message_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// What the question asks for, read by keyword rules.
#[derive(Debug, Default, PartialEq)]
struct Question {
    /// An equipment name such as `pump1` ("Pump 1", "pump1").
    equipment: Option<String>,
    /// A dotted tag name written as is, such as `Tank1.Level`.
    tag: Option<String>,
    /// Measurement words to search for, such as `current` or `level`.
    measures: Vec<&'static str>,
    /// Every word that says what is asked about, in order: the equipment (`tank1`), measurement
    /// words as searched for, and any other word that is not a question's glue (`header`,
    /// `setpoint`, `dew`).
    words: Vec<String>,
    /// The question as written, lowercase (an action's value is looked for in it).
    lowercase: String,
    /// A time window in minutes ("last 2 hours").
    minutes: Option<u64>,
    intent: Intent,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Intent {
    /// Nothing the rules recognise.
    #[default]
    Unknown,
    /// Current values of tags.
    Values,
    /// "What is wrong with Pump 1?": its values and its alarms.
    Diagnose,
    /// Alarms that need attention now.
    ActiveAlarms,
    /// Alarm events in a window.
    AlarmHistory,
    /// A tag's trend over a window.
    Trend,
    /// Which equipment the plant has.
    Structure,
    /// "Switch Pump 1 to Manual": propose a write for an operator to approve.
    Act,
}

/// Words followed by a number that are not equipment ("last 2 hours", "top 5").
const NOT_EQUIPMENT: &[&str] = &[
    "last", "past", "next", "top", "first", "over", "in", "for", "of", "at", "the", "about", "hour", "hours",
    "minute", "minutes", "min", "mins", "day", "days", "h", "m", "priority", "since", "than", "above",
    "below",
];

/// Words that carry no subject: the glue of a question ("what is the ... of ...").
const GLUE: &[&str] = &[
    "what",
    "whats",
    "which",
    "who",
    "how",
    "is",
    "are",
    "was",
    "were",
    "be",
    "does",
    "do",
    "did",
    "the",
    "a",
    "an",
    "of",
    "on",
    "in",
    "at",
    "for",
    "to",
    "from",
    "by",
    "with",
    "me",
    "my",
    "our",
    "show",
    "tell",
    "give",
    "read",
    "get",
    "please",
    "now",
    "right",
    "value",
    "values",
    "reading",
    "there",
    "it",
    "its",
    "and",
    "or",
    "about",
    "much",
    "many",
    "can",
    "could",
    "would",
    "you",
    "i",
    "we",
    "status",
    "state",
    "doing",
    "s",
    "currently",
    "any",
    "all",
    "some",
    "this",
    "that",
    "these",
    "those",
    "like",
    "look",
    "looks",
];

/// Verbs that ask for something to be done: a proposal, never a write.
const ACT_VERBS: &[&str] = &[
    "switch", "set", "change", "put", "propose", "write", "writing", "turn", "make",
];

/// Words that may come before an act verb ("please switch", "can you set", "I want to put").
const ACT_LEAD: &[&str] = &[
    "please", "can", "could", "would", "you", "i", "we", "want", "to", "let", "lets",
];

/// Measurement words and the word searched for.
const MEASURES: &[(&str, &str)] = &[
    ("current", "current"),
    ("amps", "current"),
    ("amp", "current"),
    ("flow", "flow"),
    ("pressure", "pressure"),
    ("temperature", "temperature"),
    ("temp", "temperature"),
    ("hot", "temperature"),
    ("level", "level"),
    ("running", "running"),
    ("mode", "mode"),
    ("starts", "start"),
];

fn has_any(words: &[String], keys: &[&str]) -> bool {
    words.iter().any(|word| keys.contains(&word.as_str()))
}

impl Question {
    fn read(text: &str) -> Self {
        let original: Vec<&str> = text
            .split(|c: char| !(c.is_alphanumeric() || c == '.' || c == '_'))
            .map(|word| word.trim_matches('.'))
            .filter(|word| !word.is_empty())
            .collect();
        let words: Vec<String> = original.iter().map(|word| word.to_lowercase()).collect();
        let mut question = Question {
            tag: original
                .iter()
                .find(|word| {
                    word.split_once('.').is_some_and(|(left, right)| {
                        left.starts_with(char::is_alphabetic) && right.starts_with(char::is_alphabetic)
                    })
                })
                .map(|word| (*word).to_owned()),
            ..Question::default()
        };
        question.equipment = equipment(&words);
        for word in &words {
            if let Some((_, measure)) = MEASURES.iter().find(|(key, _)| key == word)
                && !question.measures.contains(measure)
            {
                question.measures.push(measure);
            }
        }
        question.minutes = window_minutes(&words);
        question.lowercase = text.to_lowercase();
        question.words = subject_words(&words, question.equipment.as_deref());
        let acts = words
            .iter()
            .find(|word| !ACT_LEAD.contains(&word.as_str()))
            .is_some_and(|first| ACT_VERBS.contains(&first.as_str()))
            || has_any(&words, &["propose", "proposal"]);
        let alarm = words.iter().any(|word| word.starts_with("alarm"));
        let past = has_any(&words, PAST_WORDS);
        question.intent = if acts && (question.equipment.is_some() || question.tag.is_some()) {
            Intent::Act
        } else if alarm && past {
            Intent::AlarmHistory
        } else if alarm {
            Intent::ActiveAlarms
        } else if has_any(&words, TREND_WORDS) || question.minutes.is_some() {
            Intent::Trend
        } else if has_any(&words, STRUCTURE_WORDS) && question.tag.is_none() && question.measures.is_empty() {
            Intent::Structure
        } else if question.equipment.is_some() && question.measures.is_empty() && question.tag.is_none() {
            Intent::Diagnose
        } else if question.tag.is_some()
            || !question.measures.is_empty()
            || (!question.words.is_empty() && asks_what(text, &words))
        {
            Intent::Values
        } else {
            Intent::Unknown
        };
        question
    }

    /// The words to search the namespace for: everything the question is about, so a tag
    /// must match them all ("header pressure setpoint" is not just any pressure).
    fn search_words(&self) -> String {
        self.words.join(" ")
    }

    /// The equipment and measurement words only: what an action is about, without the value it
    /// asks for ("Switch Pump 1 to Manual" searches `pump1`).
    fn subject_words(&self) -> String {
        let mut words: Vec<&str> = self.equipment.iter().map(String::as_str).collect();
        words.extend(self.measures.iter().copied());
        words.join(" ")
    }
}

/// The words of a question that say what it is about: the equipment (once, joined as
/// `tank1`), measurement words as searched for (`amps` is `current`), and every other word but
/// the glue, the time window and the intent's own keywords.
fn subject_words(words: &[String], equipment: Option<&str>) -> Vec<String> {
    let mut subject: Vec<String> = Vec::new();
    let mut push = |word: String| {
        if !subject.contains(&word) {
            subject.push(word);
        }
    };
    let mut skip_number = false;
    for (at, word) in words.iter().enumerate() {
        if skip_number {
            skip_number = false;
            continue;
        }
        if let Some(name) = equipment {
            if word == name {
                push(name.to_owned());
                continue;
            }
            if words
                .get(at + 1)
                .is_some_and(|next| format!("{word}{next}") == name)
            {
                push(name.to_owned());
                skip_number = true;
                continue;
            }
        }
        if let Some((_, measure)) = MEASURES.iter().find(|(key, _)| key == word) {
            push((*measure).to_owned());
            continue;
        }
        let keyword = [KEYWORDS, PAST_WORDS, TREND_WORDS, STRUCTURE_WORDS]
            .iter()
            .any(|list| list.contains(&word.as_str()))
            || NOT_EQUIPMENT.contains(&word.as_str())
            || word.chars().all(|c| c.is_ascii_digit())
            || word.contains('.');
        if !GLUE.contains(&word.as_str()) && !keyword && !ACT_VERBS.contains(&word.as_str()) {
            push(word.clone());
        }
    }
    subject
}

/// Whether the text asks for something ("What is the dew point?", "show the dew point"),
/// rather than greets or remarks.
fn asks_what(text: &str, words: &[String]) -> bool {
    text.trim_end().ends_with('?')
        || words.first().is_some_and(|first| {
            [
                "what", "whats", "which", "show", "read", "tell", "give", "get", "how", "is", "are",
            ]
            .contains(&first.as_str())
        })
}

/// The words that pick an intent rather than say what is asked about.
const KEYWORDS: &[&str] = &[
    "alarm",
    "alarms",
    "wrong",
    "problem",
    "active",
    "trip",
    "tripped",
    "attention",
    "need",
    "needs",
    "going",
    "on",
    "did",
    "trended",
    "proposal",
];

/// Words that ask about the past (with "alarm": the alarm history).
const PAST_WORDS: &[&str] = &[
    "history",
    "happened",
    "yesterday",
    "events",
    "log",
    "past",
    "last",
    "today",
];

/// Words that ask for a trend.
const TREND_WORDS: &[&str] = &[
    "trend",
    "history",
    "historian",
    "average",
    "mean",
    "minimum",
    "maximum",
    "min",
    "max",
    "peak",
    "changed",
];

/// Words that ask what the plant holds.
const STRUCTURE_WORDS: &[&str] = &[
    "structure",
    "browse",
    "equipment",
    "namespace",
    "uns",
    "areas",
    "overview",
    "instances",
    "list",
];

/// `pump1`, `pump 1` or `Pump-1` (split into `pump`, `1`) become `pump1`.
fn equipment(words: &[String]) -> Option<String> {
    words.iter().enumerate().find_map(|(at, word)| {
        if word.contains('.') {
            return None;
        }
        let letters = word.trim_end_matches(|c: char| c.is_ascii_digit());
        let is_name = !letters.is_empty()
            && letters.chars().all(char::is_alphabetic)
            && !NOT_EQUIPMENT.contains(&letters);
        if !is_name {
            return None;
        }
        if letters.len() < word.len() {
            return Some(word.clone());
        }
        let number = words.get(at + 1)?;
        (!number.is_empty() && number.chars().all(|c| c.is_ascii_digit())).then(|| format!("{word}{number}"))
    })
}

/// "last 2 hours" → 120, "last 30 minutes" → 30, "last hour" → 60, "today" or "last day" → 1440.
fn window_minutes(words: &[String]) -> Option<u64> {
    for (at, word) in words.iter().enumerate() {
        let unit_minutes = |unit: &str| match unit {
            "minute" | "minutes" | "min" | "mins" => Some(1),
            "hour" | "hours" | "h" => Some(60),
            "day" | "days" => Some(1440),
            _ => None,
        };
        if let Ok(count) = word.parse::<u64>()
            && let Some(unit) = words.get(at + 1).and_then(|unit| unit_minutes(unit))
        {
            return Some(count.saturating_mul(unit).clamp(1, 525_600));
        }
        if matches!(word.as_str(), "last" | "past")
            && let Some(unit) = words.get(at + 1).and_then(|unit| unit_minutes(unit))
        {
            return Some(unit);
        }
        if word == "today" {
            return Some(1440);
        }
    }
    None
}

/// Decides the next step of the turn in `body`.
fn next_step(body: &Value) -> Step {
    let turn = Turn::read(body);
    if turn.question.trim().is_empty() {
        return Step::Answer("I found no question in the conversation.".to_owned());
    }
    if turn.offered.is_empty() {
        return Step::Answer(format!(
            "I can only learn about the plant through runtime tools, and none were offered with this \
             request (the atomic path never offers tools). You asked: \"{}\".",
            cut(&turn.question, 200)
        ));
    }
    let question = Question::read(&turn.question);
    // A model that keeps calling tools forever is what the dispatch cap is for; this one stops
    // after two rounds whatever happened.
    let done = turn.rounds >= 2;
    match question.intent {
        Intent::Unknown => Step::Answer(help()),
        Intent::ActiveAlarms if turn.exchanges.is_empty() => {
            turn.call(vec![("runtime_get_active_alarms", json!({}))])
        }
        Intent::ActiveAlarms => Step::Answer(active_alarms_answer(&turn, question.equipment.as_deref())),
        Intent::AlarmHistory if turn.exchanges.is_empty() => {
            let mut arguments = json!({"minutes": question.minutes.unwrap_or(1440), "max_results": 20});
            if let Some(tag) = &question.tag {
                arguments["tag"] = json!(tag);
            }
            turn.call(vec![("runtime_query_alarm_history", arguments)])
        }
        Intent::AlarmHistory => Step::Answer(alarm_history_answer(&turn)),
        Intent::Structure if turn.exchanges.is_empty() => {
            let mask = question
                .equipment
                .map_or_else(|| "*".to_owned(), |name| format!("{name}*"));
            turn.call(vec![("runtime_list_instances", json!({"name_mask": mask}))])
        }
        Intent::Structure => Step::Answer(structure_answer(&turn)),
        Intent::Values if turn.exchanges.is_empty() => match &question.tag {
            Some(tag) => turn.call(vec![("runtime_get_value", json!({"tag": tag}))]),
            None => turn.call(vec![(
                "runtime_search_uns",
                json!({"query": question.search_words(), "max_results": 5}),
            )]),
        },
        Intent::Values => match related_search(&turn, &question) {
            Some(arguments) if !done => turn.call(vec![("runtime_search_uns", arguments)]),
            _ => Step::Answer(values_answer(&turn, &question)),
        },
        Intent::Act => act(&turn, &question),
        Intent::Diagnose if turn.exchanges.is_empty() => turn.call(vec![
            (
                "runtime_search_uns",
                json!({"query": question.search_words(), "max_results": 20}),
            ),
            ("runtime_get_active_alarms", json!({})),
        ]),
        Intent::Diagnose
            if !done && turn.offers(DOCUMENTS_TOOL) && turn.exchange(DOCUMENTS_TOOL).is_none() =>
        {
            match procedure_search(&turn, &question) {
                Some(arguments) => turn.call(vec![(DOCUMENTS_TOOL, arguments)]),
                None => Step::Answer(diagnose_answer(&turn, &question)),
            }
        }
        Intent::Diagnose => Step::Answer(diagnose_answer(&turn, &question)),
        Intent::Trend => {
            if turn.exchange("runtime_get_tag_history").is_some() || done {
                return Step::Answer(trend_answer(&turn));
            }
            let tag = match (&question.tag, turn.exchange("runtime_search_uns")) {
                (Some(tag), _) => tag.clone(),
                (None, None) if question.equipment.is_none() && question.measures.is_empty() => {
                    return Step::Answer(format!(
                        "Which tag? Name it (for example Tank1.Level) or its equipment and measurement. {}",
                        help_examples()
                    ));
                }
                (None, None) => {
                    return turn.call(vec![(
                        "runtime_search_uns",
                        json!({"query": question.search_words(), "max_results": 5}),
                    )]);
                }
                (None, Some(search)) => match first_match(search) {
                    Some(tag) => tag,
                    None => return Step::Answer(no_match(search, &question.search_words())),
                },
            };
            let mut arguments = json!({"tag": tag, "max_samples": 12});
            if let Some(minutes) = question.minutes {
                arguments["minutes"] = json!(minutes);
            }
            // The history ends at the last recorded sample; what the tag reads now is asked
            // beside it, so a trend is never told as if its last sample were the present.
            let mut calls = vec![("runtime_get_tag_history", arguments)];
            if turn.offers("runtime_get_value") {
                calls.push(("runtime_get_value", json!({"tag": tag})));
            }
            turn.call(calls)
        }
    }
}

/// What to ask instead, true of any plant (it names none of the demo plant's equipment).
fn help_examples() -> &'static str {
    "Try: \"Which alarms are active?\", \"What equipment is there?\", or name a tag (Area.Tag) or a piece of \
     equipment with what you want of it: \"What is wrong with <equipment>?\", \"What is the <measurement> of \
     <equipment>?\", \"How did <tag> trend over the last hour?\", \"Switch <equipment> to <value>\"."
}

/// What a language model would do that these rules cannot.
const REAL_MODEL: &str = "A language model behind this server would read the question whole and look further \
     with the same tools.";

fn help() -> String {
    format!(
        "I am a set of keyword rules and did not understand that. I answer questions about tag values, \
         active alarms, alarm history, trends and the plant's equipment, and propose writes when asked, from \
         the runtime tools only. {} {REAL_MODEL}",
        help_examples()
    )
}

/// `tank1` as `Tank1`.
fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn cut(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// A number for a person: at most two decimals, no trailing zeros.
fn number(value: &Value) -> String {
    match value {
        Value::Number(number) => match number.as_f64() {
            Some(float) if number.is_f64() => {
                let text = format!("{float:.2}");
                text.trim_end_matches('0').trim_end_matches('.').to_owned()
            }
            _ => number.to_string(),
        },
        Value::String(text) => text.clone(),
        Value::Null => "no value".to_owned(),
        other => other.to_string(),
    }
}

/// `Pump1.MotorCurrent = 14.2 A (Good)`.
fn reading(tag: &Value) -> String {
    let units = tag["units"]
        .as_str()
        .map(|units| format!(" {units}"))
        .unwrap_or_default();
    let quality = match tag["quality"].as_str() {
        Some("Good") | None => String::new(),
        Some(other) => format!(" (quality {other})"),
    };
    format!(
        "{} = {}{units}{quality}",
        tag["tag"].as_str().unwrap_or("?"),
        number(&tag["value"])
    )
}

fn failed(exchange: Option<&Exchange>, what: &str) -> Option<String> {
    match exchange {
        None => Some(format!("I could not {what}: the tool was not run.")),
        Some(exchange) if exchange.result().is_none() => Some(format!(
            "I could not {what}: {} answered \"{}\".",
            exchange.name,
            exchange.error_message()
        )),
        Some(_) => None,
    }
}

fn first_match(search: &Exchange) -> Option<String> {
    search.result()?["results"].as_array()?.first()?["tag"]
        .as_str()
        .map(str::to_owned)
}

fn no_match(search: &Exchange, words: &str) -> String {
    match search.result() {
        None => format!("The search failed: {}.", search.error_message()),
        Some(_) => format!("No tag matches \"{words}\". {}", help_examples()),
    }
}

fn alarm_line(alarm: &Value) -> String {
    let current = match &alarm["currentValue"] {
        Value::Null => String::new(),
        value => format!(", now {}", number(value)),
    };
    format!(
        "{} ({} {}, priority {}, {}{current})",
        alarm["message"].as_str().unwrap_or("?"),
        alarm["condition"].as_str().unwrap_or("?"),
        alarm["tag"].as_str().unwrap_or("?"),
        number(&alarm["priority"]),
        alarm["state"].as_str().unwrap_or("?"),
    )
}

fn active_alarms_answer(turn: &Turn, equipment: Option<&str>) -> String {
    let result = match turn.result_of("runtime_get_active_alarms", "read the active alarms") {
        Ok(result) => result,
        Err(failure) => return failure,
    };
    let alarms: Vec<&Value> = result["alarms"]
        .as_array()
        .map(|alarms| alarms.iter().collect())
        .unwrap_or_default();
    let more = if result["truncated"] == true {
        " (the list was cut; there are more)"
    } else {
        ""
    };
    if let Some(name) = equipment {
        let (own, others): (Vec<&Value>, Vec<&Value>) = alarms.into_iter().partition(|alarm| {
            alarm["tag"]
                .as_str()
                .and_then(|tag| tag.split('.').next())
                .is_some_and(|prefix| prefix.eq_ignore_ascii_case(name))
        });
        let elsewhere = match others.as_slice() {
            [] => String::new(),
            others => format!(
                " Elsewhere {} alarm(s) need attention: {}{more}.",
                others.len(),
                others
                    .iter()
                    .map(|alarm| alarm_line(alarm))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        };
        // The plant's own spelling when one of its alarms shows it, else the question's.
        let name = own
            .iter()
            .find_map(|alarm| alarm["tag"].as_str()?.split('.').next())
            .map_or_else(|| capitalised(name), str::to_owned);
        return match own.as_slice() {
            [] => format!("No alarm of {name} needs attention right now.{elsewhere}"),
            own => format!(
                "{} alarm(s) of {name} need attention: {}.{elsewhere}",
                own.len(),
                own.iter()
                    .map(|alarm| alarm_line(alarm))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        };
    }
    if alarms.is_empty() {
        return format!("No alarm needs attention right now{more}.");
    }
    let lines: Vec<String> = alarms.iter().map(|alarm| alarm_line(alarm)).collect();
    format!(
        "{} alarm(s) need attention, most urgent first: {}{more}.",
        lines.len(),
        lines.join("; ")
    )
}

fn alarm_history_answer(turn: &Turn) -> String {
    let result = match turn.result_of("runtime_query_alarm_history", "read the alarm history") {
        Ok(result) => result,
        Err(failure) => return failure,
    };
    let events = result["events"].as_array().map(Vec::as_slice).unwrap_or_default();
    if events.is_empty() {
        return format!(
            "No alarm events between {} and {}.",
            result["from"].as_str().unwrap_or("?"),
            result["to"].as_str().unwrap_or("?")
        );
    }
    let lines: Vec<String> = events
        .iter()
        .take(8)
        .map(|event| {
            format!(
                "{} {} {}",
                event["time"].as_str().unwrap_or("?"),
                event["alarm"].as_str().unwrap_or("?"),
                event["event"].as_str().unwrap_or("?")
            )
        })
        .collect();
    format!(
        "{} alarm event(s) since {}; the latest: {}.",
        number(&result["total"]),
        result["from"].as_str().unwrap_or("?"),
        lines.join("; ")
    )
}

fn structure_answer(turn: &Turn) -> String {
    let result = match turn.result_of("runtime_list_instances", "list the equipment") {
        Ok(result) => result,
        Err(failure) => return failure,
    };
    let instances = result["instances"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if instances.is_empty() {
        return "No equipment matches that name.".to_owned();
    }
    let lines: Vec<String> = instances
        .iter()
        .map(|instance| {
            let path = instance["path"].as_str().unwrap_or("?");
            let tags = number(&instance["tagCount"]);
            // A type only where the plant file declares one.
            match instance["type"].as_str() {
                Some(kind) => format!("{path} ({kind}, {tags} tags)"),
                None => format!("{path} ({tags} tags)"),
            }
        })
        .collect();
    format!(
        "The plant has {} equipment instance(s): {}.",
        lines.len(),
        lines.join(", ")
    )
}

/// After a search that matched nothing: the arguments of a search for the question's
/// measurement alone, to show what there is instead ("receiver pressure" finds no tag; these
/// are the pressures). `None` when there is nothing narrower to search for.
fn related_search(turn: &Turn, question: &Question) -> Option<Value> {
    let searches = turn.exchanges_of("runtime_search_uns");
    let [first] = searches.as_slice() else {
        return None;
    };
    let empty = first.result()?["results"].as_array().is_some_and(Vec::is_empty);
    let narrower = question.measures.join(" ");
    (empty && !narrower.is_empty() && narrower != question.search_words())
        .then(|| json!({"query": narrower, "max_results": 5}))
}

fn values_answer(turn: &Turn, question: &Question) -> String {
    if let Some(value) = turn.exchange("runtime_get_value") {
        return match value.result() {
            Some(tag) => format!(
                "{}, read at {}.",
                reading(tag),
                tag["timestamp"].as_str().unwrap_or("?")
            ),
            None => format!("I could not read that tag: {}", value.error_message()),
        };
    }
    let searches = turn.exchanges_of("runtime_search_uns");
    let search = searches.first().copied();
    if let Some(failure) = failed(search, "search the plant") {
        return failure;
    }
    let asked = question.search_words();
    let results = search
        .and_then(Exchange::result)
        .and_then(|result| result["results"].as_array())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let more = if search
        .and_then(Exchange::result)
        .is_some_and(|result| result["truncated"] == true)
    {
        " (and more; name the tag to narrow it)"
    } else {
        ""
    };
    match results {
        [] => {
            let related = searches
                .get(1)
                .and_then(|search| search.result())
                .and_then(|result| result["results"].as_array())
                .map(Vec::as_slice)
                .unwrap_or_default();
            let instead = if related.is_empty() {
                String::new()
            } else {
                format!(
                    " Tags about {} are: {}; whether one of them is what you mean I cannot tell.",
                    question.measures.join(" and "),
                    related.iter().map(reading).collect::<Vec<_>>().join(", ")
                )
            };
            format!("No tag matches all of \"{asked}\".{instead} {REAL_MODEL}")
        }
        [only] => format!("{}.", reading(only)),
        several => format!(
            "{} tags match \"{asked}\": {}{more}.",
            several.len(),
            several.iter().map(reading).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn diagnose_answer(turn: &Turn, question: &Question) -> String {
    let asked = question.equipment.as_deref().unwrap_or("that equipment");
    let search = turn.exchange("runtime_search_uns");
    if let Some(failure) = failed(search, &format!("find {asked}")) {
        return failure;
    }
    let tags = search
        .and_then(Exchange::result)
        .and_then(|result| result["results"].as_array())
        .map(Vec::as_slice)
        .unwrap_or_default();
    if tags.is_empty() {
        return format!("I found no tags for {asked}. {}", help_examples());
    }
    // The plant's own spelling ("Pump1") reads better than the question's ("pump 1").
    let name = tags
        .iter()
        .filter_map(|tag| tag["tag"].as_str()?.split('.').next())
        .find(|prefix| prefix.eq_ignore_ascii_case(asked))
        .unwrap_or(asked);
    let tag_names: Vec<&str> = tags.iter().filter_map(|tag| tag["tag"].as_str()).collect();
    let alarms: Vec<&Value> = turn
        .exchange("runtime_get_active_alarms")
        .and_then(Exchange::result)
        .and_then(|result| result["alarms"].as_array())
        .map(|alarms| {
            alarms
                .iter()
                .filter(|alarm| alarm["tag"].as_str().is_some_and(|tag| tag_names.contains(&tag)))
                .collect()
        })
        .unwrap_or_default();
    let readings = tags.iter().map(reading).collect::<Vec<_>>().join(", ");
    let bad: Vec<String> = tags
        .iter()
        .filter(|tag| tag["quality"].as_str().is_some_and(|quality| quality != "Good"))
        .map(reading)
        .collect();
    let mut answer = match alarms.as_slice() {
        [] => format!("{name} has no alarm needing attention."),
        alarms => format!(
            "{name} has {} alarm(s) needing attention: {}.",
            alarms.len(),
            alarms
                .iter()
                .map(|alarm| alarm_line(alarm))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    };
    if !bad.is_empty() {
        answer.push_str(&format!(" Readings of poor quality: {}.", bad.join(", ")));
    }
    if turn
        .exchange("runtime_get_active_alarms")
        .and_then(Exchange::result)
        .is_none()
    {
        answer = format!("I could not read the alarms, so I cannot say whether {name} is in alarm.");
    }
    format!(
        "{answer} Current readings: {readings}.{}",
        procedure_advice(turn, !alarms.is_empty())
    )
}

/// The equipment's UNS object and its alarms, found by the first round: the arguments to
/// search its documents with (the active alarms' messages, or what to do in general).
fn procedure_search(turn: &Turn, question: &Question) -> Option<Value> {
    let asked = question.equipment.as_deref()?;
    let tags = turn.exchange("runtime_search_uns")?.result()?["results"].as_array()?;
    let own: Vec<&Value> = tags
        .iter()
        .filter(|tag| {
            tag["tag"]
                .as_str()
                .and_then(|name| name.split('.').next())
                .is_some_and(|prefix| prefix.eq_ignore_ascii_case(asked))
        })
        .collect();
    let object = own.first()?["path"].as_str()?.rsplit_once('/')?.0;
    let names: Vec<&str> = own.iter().filter_map(|tag| tag["tag"].as_str()).collect();
    let messages: Vec<&str> = turn
        .exchange("runtime_get_active_alarms")
        .and_then(Exchange::result)
        .and_then(|result| result["alarms"].as_array())
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|alarm| alarm["tag"].as_str().is_some_and(|tag| names.contains(&tag)))
        .filter_map(|alarm| alarm["message"].as_str())
        .collect();
    let query = if messages.is_empty() {
        "what to do".to_owned()
    } else {
        format!("{} what to do", messages.join(" "))
    };
    Some(json!({"query": query, "equipment": object, "max_passages": 1}))
}

/// The best passage the documents search found, cited: what to do and where it says so.
fn procedure_advice(turn: &Turn, in_alarm: bool) -> String {
    let Some(passage) = turn
        .exchange(DOCUMENTS_TOOL)
        .and_then(Exchange::result)
        .and_then(|result| result["passages"].as_array()?.first())
    else {
        return String::new();
    };
    let lines = &passage["lines"];
    let source = format!(
        "\"{}\" ({}, lines {}-{})",
        passage["document"].as_str().unwrap_or("?"),
        passage["path"].as_str().unwrap_or("?"),
        number(&lines[0]),
        number(&lines[1]),
    );
    let text = passage["text"]
        .as_str()
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let lead = if in_alarm {
        "What to do, from"
    } else {
        "For reference,"
    };
    format!(" {lead} {source}: {}", cut(&text, 600))
}

/// Asked to act ("Switch Pump 1 to Manual", "Set Pump1.Mode to Off"): find the tag and the
/// value, then propose the write for an operator to approve. It never writes, and proposes
/// only a value the tag lists (or a number for a numeric tag it was named), so what it
/// proposes is what was asked.
fn act(turn: &Turn, question: &Question) -> Step {
    if let Some(proposed) = turn.exchange(PROPOSE_TOOL) {
        return Step::Answer(match proposed.result() {
            Some(result) => format!(
                "I proposed writing {} to {} (now {}), because you asked. Nothing is written until an \
                 operator approves it; the proposal waits {} s.",
                result["proposed"],
                result["tag"].as_str().unwrap_or("?"),
                result["current"],
                number(&result["expires_in_s"]),
            ),
            None => format!("I could not propose that: {}", proposed.error_message()),
        });
    }
    if turn.exchanges.is_empty() {
        return match &question.tag {
            Some(tag) => turn.call(vec![("runtime_get_value", json!({"tag": tag}))]),
            None => turn.call(vec![(
                "runtime_search_uns",
                json!({"query": question.subject_words(), "max_results": 20}),
            )]),
        };
    }
    let candidates: Vec<&Value> = match (
        turn.exchange("runtime_get_value"),
        turn.exchange("runtime_search_uns"),
    ) {
        (Some(read), _) => match read.result() {
            Some(tag) => vec![tag],
            None => return Step::Answer(format!("I could not read that tag: {}", read.error_message())),
        },
        (None, Some(search)) => match search.result().and_then(|result| result["results"].as_array()) {
            Some(results) => results.iter().collect(),
            None => return Step::Answer(no_match(search, &question.subject_words())),
        },
        (None, None) => return Step::Answer(help()),
    };
    let Some((tag, value)) = wanted_write(&candidates, question) else {
        let choices: Vec<String> = candidates
            .iter()
            .filter_map(|tag| {
                let values = tag["allowedValues"].as_array()?;
                let listed: Vec<&str> = values.iter().filter_map(Value::as_str).collect();
                Some(format!("{} ({})", tag["tag"].as_str()?, listed.join(", ")))
            })
            .collect();
        return Step::Answer(if choices.is_empty() {
            format!(
                "I found nothing there that I can tell takes the value you named. I propose only a value a tag \
                 lists, or a number for a number tag named as Area.Tag (\"Set Tank1.Setpoint to 40\"). {REAL_MODEL}"
            )
        } else {
            format!(
                "Which value? I can propose one a tag lists: {}.",
                choices.join("; ")
            )
        });
    };
    let name = tag["tag"].as_str().unwrap_or("?");
    if tag["value"] == value {
        return Step::Answer(format!(
            "{name} is {} already: there is nothing to propose.",
            tag["value"]
        ));
    }
    turn.call(vec![(
        PROPOSE_TOOL,
        json!({"tag": name, "value": value, "reason": format!("The operator asked: \"{}\"", cut(&turn.question, 300))}),
    )])
}

/// The tag and value an action names: a value one of the `candidates` lists that the question
/// says (the longest, so "Out of service" wins over "service"), or, for a single numeric
/// tag, the number after "to".
fn wanted_write(candidates: &[&Value], question: &Question) -> Option<(Value, Value)> {
    let said = |value: &str| {
        let value = value.to_lowercase();
        question.lowercase.match_indices(&value).any(|(at, _)| {
            let before = question.lowercase[..at].chars().next_back();
            let after = question.lowercase[at + value.len()..].chars().next();
            !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
        })
    };
    let listed = candidates
        .iter()
        .flat_map(|tag| {
            tag["allowedValues"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter(|value| said(value))
                .map(move |value| (*tag, value))
        })
        .max_by_key(|(_, value)| value.len());
    if let Some((tag, value)) = listed {
        return Some((tag.clone(), json!(value)));
    }
    let [only] = candidates else {
        return None;
    };
    if !only["value"].is_number() {
        return None;
    }
    let after_to = question.lowercase.rsplit_once(" to ")?.1;
    let number: f64 = after_to
        .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .find(|word| !word.is_empty())?
        .trim_end_matches('.')
        .parse()
        .ok()?;
    Some(((*only).clone(), json!(number)))
}

fn trend_answer(turn: &Turn) -> String {
    let Some(history) = turn.exchange("runtime_get_tag_history") else {
        return match turn.exchange("runtime_search_uns") {
            Some(search) => no_match(search, search.arguments["query"].as_str().unwrap_or("")),
            None => help(),
        };
    };
    let Some(result) = history.result() else {
        return format!("I could not read the history: {}", history.error_message());
    };
    let units = result["units"]
        .as_str()
        .map(|units| format!(" {units}"))
        .unwrap_or_default();
    let samples = result["samples"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let stats = &result["stats"];
    if samples.is_empty() || stats.is_null() {
        return format!(
            "{} has no history between {} and {}.",
            result["tag"].as_str().unwrap_or("?"),
            result["from"].as_str().unwrap_or("?"),
            result["to"].as_str().unwrap_or("?")
        );
    }
    let first = &samples[0];
    let last = &samples[samples.len() - 1];
    // What it reads now, when the tool answered: the history's last sample may be older.
    let now = turn
        .exchange("runtime_get_value")
        .and_then(Exchange::result)
        .filter(|tag| tag["quality"] == "Good");
    let (end, end_value, end_words) = match now {
        Some(tag) => (tag["timestamp"].as_str().unwrap_or("?"), &tag["value"], "now"),
        None => (
            last["time"].as_str().unwrap_or("?"),
            &last["value"],
            "at its last recorded sample",
        ),
    };
    let direction = match (first["value"].as_f64(), end_value.as_f64()) {
        (Some(first), Some(end)) if end > first * 1.02 + 1e-9 => "higher than",
        (Some(first), Some(end)) if end < first * 0.98 - 1e-9 => "lower than",
        _ => "about where it was",
    };
    let was = first["time"].as_str().unwrap_or("?");
    let compared = if direction == "about where it was" {
        format!("about where it was at {was} ({}{units})", number(&first["value"]))
    } else {
        format!("{direction} at {was} ({}{units})", number(&first["value"]))
    };
    format!(
        "{} from {} to {}: min {}{units}, max {}{units}, mean {}{units} over {} recorded samples. It is {}{units} \
         {end_words} ({end}), {compared}.",
        result["tag"].as_str().unwrap_or("?"),
        result["from"].as_str().unwrap_or("?"),
        result["to"].as_str().unwrap_or("?"),
        number(&stats["min"]),
        number(&stats["max"]),
        number(&stats["mean"]),
        number(&result["totalSamples"]),
        number(end_value),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_read_by_their_keywords() {
        let wrong = Question::read("What is wrong with Pump 1?");
        assert_eq!(wrong.intent, Intent::Diagnose);
        assert_eq!(wrong.equipment.as_deref(), Some("pump1"));

        let alarms = Question::read("Which alarms are active?");
        assert_eq!(alarms.intent, Intent::ActiveAlarms);

        let history = Question::read("Which alarms happened in the last 2 hours?");
        assert_eq!(history.intent, Intent::AlarmHistory);
        assert_eq!(history.minutes, Some(120));
        assert_eq!(history.equipment, None, "'last 2' is not equipment");

        let trend = Question::read("How did Tank1.Level trend over the last hour?");
        assert_eq!(trend.intent, Intent::Trend);
        assert_eq!(trend.tag.as_deref(), Some("Tank1.Level"));
        assert_eq!(trend.minutes, Some(60));

        let value = Question::read("what's the motor current of pump2");
        assert_eq!(value.intent, Intent::Values);
        assert_eq!(value.search_words(), "motor current pump2");

        assert_eq!(
            Question::read("What equipment is there?").intent,
            Intent::Structure
        );
        assert_eq!(Question::read("hello").intent, Intent::Unknown);
    }

    fn body(question: &str, tools: &[&str], after: Vec<Value>) -> Value {
        let mut messages = vec![
            json!({"role": "system", "content": "x"}),
            json!({"role": "user", "content": question}),
        ];
        messages.extend(after);
        let tools: Vec<Value> = tools
            .iter()
            .map(|name| json!({"type": "function", "function": {"name": name, "parameters": {}}}))
            .collect();
        json!({"model": MODEL_NAME, "messages": messages, "tools": tools})
    }

    #[test]
    fn a_missing_tool_is_named_instead_of_called() {
        let step = next_step(&body("Which alarms are active?", &["runtime_get_value"], vec![]));
        let Step::Answer(text) = step else {
            panic!("expected an answer, got {step:?}")
        };
        assert!(text.contains("runtime_get_active_alarms"), "{text}");
    }

    #[test]
    fn no_tools_offered_gets_an_honest_answer() {
        let step = next_step(&json!({"messages": [{"role": "user", "content": "Pump 1?"}]}));
        let Step::Answer(text) = step else {
            panic!("expected an answer, got {step:?}")
        };
        assert!(text.contains("none were offered"), "{text}");
    }

    #[test]
    fn a_trend_searches_then_reads_history_then_answers() {
        let tools = [
            "runtime_search_uns",
            "runtime_get_tag_history",
            "runtime_get_value",
        ];
        let question = "How did the level of tank 1 change over the last 30 minutes?";
        let Step::Call(first) = next_step(&body(question, &tools, vec![])) else {
            panic!("expected a search")
        };
        assert_eq!(first[0].1, "runtime_search_uns");
        let arguments: Value = serde_json::from_str(&first[0].2).expect("json arguments");
        assert_eq!(arguments, json!({"query": "level tank1", "max_results": 5}));

        let searched = vec![
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "demo_1_0", "type": "function", "function": {"name": "runtime_search_uns", "arguments": first[0].2}}]}),
            json!({"role": "tool", "tool_call_id": "demo_1_0", "content": json!({"ok": true, "result": {
                "results": [{"tag": "Tank1.Level", "value": 61.0, "quality": "Good", "units": "%"}]}}).to_string()}),
        ];
        let Step::Call(second) = next_step(&body(question, &tools, searched.clone())) else {
            panic!("expected a history read")
        };
        assert_eq!(
            (second[0].1.as_str(), second[1].1.as_str()),
            ("runtime_get_tag_history", "runtime_get_value")
        );
        let arguments: Value = serde_json::from_str(&second[0].2).expect("json arguments");
        assert_eq!(
            arguments,
            json!({"tag": "Tank1.Level", "max_samples": 12, "minutes": 30})
        );

        // The history's last sample is the peak, but the tank has drained since: the answer
        // says where it is now, not where the last sample was.
        let mut read = searched;
        read.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "demo_2_0", "type": "function", "function": {"name": "runtime_get_tag_history", "arguments": second[0].2}},
            {"id": "demo_2_1", "type": "function", "function": {"name": "runtime_get_value", "arguments": second[1].2}}]}));
        read.push(
            json!({"role": "tool", "tool_call_id": "demo_2_0", "content": json!({"ok": true, "result": {
            "tag": "Tank1.Level", "from": "a", "to": "b", "units": "%", "totalSamples": 180,
            "samples": [{"time": "t0", "value": 70.5}, {"time": "t1", "value": 87.59}],
            "stats": {"min": 48.25, "max": 87.59, "mean": 60.0}}}).to_string()}),
        );
        read.push(json!({"role": "tool", "tool_call_id": "demo_2_1", "content": json!({"ok": true, "result": {
            "tag": "Tank1.Level", "value": 67.43, "quality": "Good", "units": "%", "timestamp": "t2"}}).to_string()}));
        let Step::Answer(text) = next_step(&body(question, &tools, read)) else {
            panic!("expected an answer")
        };
        assert_eq!(
            text,
            "Tank1.Level from a to b: min 48.25 %, max 87.59 %, mean 60 % over 180 recorded samples. \
             It is 67.43 % now (t2), lower than at t0 (70.5 %)."
        );
    }

    #[test]
    fn a_diagnosis_cites_the_procedure_for_the_active_alarm() {
        let tools = [
            "runtime_search_uns",
            "runtime_get_active_alarms",
            "runtime_search_documents",
        ];
        let question = "What is wrong with Pump 1?";
        let Step::Call(first) = next_step(&body(question, &tools, vec![])) else {
            panic!("expected a search and an alarm read")
        };
        assert_eq!(
            (first[0].1.as_str(), first[1].1.as_str()),
            ("runtime_search_uns", "runtime_get_active_alarms")
        );
        let mut exchanges = vec![
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "demo_1_0", "type": "function", "function": {"name": "runtime_search_uns", "arguments": first[0].2}},
                {"id": "demo_1_1", "type": "function", "function": {"name": "runtime_get_active_alarms", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "demo_1_0", "content": json!({"ok": true, "result": {"results": [
                {"tag": "Pump1.MotorCurrent", "path": "Plant/Area1/Pump1/MotorCurrent", "value": 21.5, "quality": "Good", "units": "A"}]}}).to_string()}),
            json!({"role": "tool", "tool_call_id": "demo_1_1", "content": json!({"ok": true, "result": {"alarms": [
                {"tag": "Pump1.MotorCurrent", "message": "Pump 1 motor current high", "condition": "Hi", "priority": 700, "state": "Active"}]}}).to_string()}),
        ];
        let Step::Call(second) = next_step(&body(question, &tools, exchanges.clone())) else {
            panic!("expected a documents search")
        };
        assert_eq!(second[0].1, "runtime_search_documents");
        let arguments: Value = serde_json::from_str(&second[0].2).expect("json arguments");
        assert_eq!(
            arguments,
            json!({"query": "Pump 1 motor current high what to do", "equipment": "Plant/Area1/Pump1", "max_passages": 1})
        );
        exchanges.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "demo_2_0", "type": "function", "function": {"name": "runtime_search_documents", "arguments": second[0].2}}]}));
        exchanges.push(json!({"role": "tool", "tool_call_id": "demo_2_0", "content": json!({"ok": true, "result": {"passages": [
            {"document": "Pump 1 high motor current", "path": "procedures/pump.md", "section": "What to do",
             "lines": [16, 24], "text": "1. Check the discharge valve.\n2. Start Pump 2.", "score": 3.2}], "truncated": false}}).to_string()}));
        let Step::Answer(text) = next_step(&body(question, &tools, exchanges)) else {
            panic!("expected an answer")
        };
        assert!(
            text.ends_with(
                "What to do, from \"Pump 1 high motor current\" (procedures/pump.md, lines 16-24): 1. Check the discharge valve. 2. Start Pump 2."
            ),
            "{text}"
        );
    }

    #[test]
    fn a_diagnosis_without_the_documents_tool_answers_from_the_live_plant() {
        let tools = ["runtime_search_uns", "runtime_get_active_alarms"];
        let exchanges = vec![
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "demo_1_0", "type": "function", "function": {"name": "runtime_search_uns", "arguments": "{}"}},
                {"id": "demo_1_1", "type": "function", "function": {"name": "runtime_get_active_alarms", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "demo_1_0", "content": json!({"ok": true, "result": {"results": [
                {"tag": "Pump1.MotorCurrent", "path": "Plant/Area1/Pump1/MotorCurrent", "value": 12.5, "quality": "Good", "units": "A"}]}}).to_string()}),
            json!({"role": "tool", "tool_call_id": "demo_1_1", "content": json!({"ok": true, "result": {"alarms": []}}).to_string()}),
        ];
        let Step::Answer(text) = next_step(&body("What is wrong with Pump 1?", &tools, exchanges)) else {
            panic!("expected an answer")
        };
        assert_eq!(
            text,
            "Pump1 has no alarm needing attention. Current readings: Pump1.MotorCurrent = 12.5 A."
        );
    }
}
