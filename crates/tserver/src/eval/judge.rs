//! Judging one run of a case: the turn's envelope against what the case says a good answer
//! needs, each shortfall explained in a sentence.

use std::time::Duration;

use localai::{Envelope, Status, ToolStatus};
use serde_json::Value;

use super::questions::{Case, ExpectedCall, Fact};

/// A tag's value as the judge compares it.
#[derive(Debug, Clone, PartialEq)]
pub enum LiveValue {
    /// A number (or integer) tag's value.
    Number(f64),
    /// Any other tag's value, as text.
    Text(String),
}

/// What one run came to.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Why the run failed; empty when it passed.
    pub reasons: Vec<String>,
    /// The case's `must_call` entries: how many the run met (a call that succeeded), of how
    /// many.
    pub must_call: Tally,
    /// The case's `must_not_call` entries: how many the run kept to, of how many. Counted
    /// apart: a turn that calls nothing keeps to all of them and meets no `must_call`.
    pub must_not_call: Tally,
}

/// Expectations met, of those held to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tally {
    /// Met.
    pub met: u32,
    /// Held to.
    pub made: u32,
}

/// How much of an answer a failure quotes.
const QUOTED_CHARS: usize = 160;

/// Judges one run: `envelope` answered `case` in `elapsed`; `live` reads a tag's value as it
/// is now (the answer has just arrived).
pub fn judge(
    case: &Case,
    envelope: &Envelope,
    elapsed: Duration,
    live: &dyn Fn(&str) -> Option<LiveValue>,
) -> Verdict {
    let mut verdict = Verdict {
        reasons: Vec::new(),
        must_call: Tally::default(),
        must_not_call: Tally::default(),
    };
    let took = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    if took > case.latency_ms {
        verdict
            .reasons
            .push(format!("took {took} ms, over the {} ms budget", case.latency_ms));
    }
    for expected in &case.must_call {
        verdict.must_call.made += 1;
        let wanted = Value::Object(expected.args.clone());
        let matching: Vec<_> = envelope
            .tool_trace
            .iter()
            .filter(|entry| entry.name == expected.tool && contains(&entry.args, &wanted))
            .collect();
        // A call the tool refused, or that failed, fetched nothing: it is not the call asked for.
        if matching.iter().any(|entry| entry.status == ToolStatus::Ok) {
            verdict.must_call.met += 1;
        } else if let Some(entry) = matching.first() {
            verdict.reasons.push(format!(
                "called {} with {}, but the call failed: {}",
                entry.name,
                entry.args,
                quoted(&entry.result.to_string())
            ));
        } else {
            verdict.reasons.push(missed_call(expected, envelope));
        }
    }
    for forbidden in &case.must_not_call {
        verdict.must_not_call.made += 1;
        match envelope.tool_trace.iter().find(|entry| &entry.name == forbidden) {
            None => verdict.must_not_call.met += 1,
            Some(entry) => verdict.reasons.push(format!(
                "called {forbidden} with {}, which it must not call",
                entry.args
            )),
        }
    }
    if envelope.status != Status::Ok {
        let why = envelope.warnings.join("; ");
        verdict.reasons.push(format!(
            "the turn ended {}{}",
            envelope.status.as_str(),
            if why.is_empty() {
                String::new()
            } else {
                format!(": {why}")
            }
        ));
        return verdict;
    }
    for fact in &case.facts {
        if let Some(reason) = unstated(fact, &envelope.text, live) {
            verdict.reasons.push(reason);
        }
    }
    verdict
}

fn missed_call(expected: &ExpectedCall, envelope: &Envelope) -> String {
    let wanted = if expected.args.is_empty() {
        format!("did not call {}", expected.tool)
    } else {
        format!(
            "did not call {} with {}",
            expected.tool,
            Value::Object(expected.args.clone())
        )
    };
    let called: Vec<String> = envelope
        .tool_trace
        .iter()
        .map(|entry| format!("{} {}", entry.name, entry.args))
        .collect();
    if called.is_empty() {
        format!("{wanted}; it called no tool")
    } else {
        format!("{wanted}; it called {}", called.join(", "))
    }
}

/// Whether `actual` holds everything `expected` does: objects by their keys (more keys are
/// fine), numbers by value (1 is 1.0), anything else equal.
pub fn contains(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Object(actual), Value::Object(expected)) => expected
            .iter()
            .all(|(key, value)| actual.get(key).is_some_and(|actual| contains(actual, value))),
        (Value::Number(actual), Value::Number(expected)) => actual.as_f64() == expected.as_f64(),
        (Value::Array(actual), Value::Array(expected)) => {
            actual.len() == expected.len()
                && actual
                    .iter()
                    .zip(expected)
                    .all(|(actual, expected)| contains(actual, expected))
        }
        _ => actual == expected,
    }
}

/// Why `text` does not state `fact`, or `None` when it does.
fn unstated(fact: &Fact, text: &str, live: &dyn Fn(&str) -> Option<LiveValue>) -> Option<String> {
    let lower = text.to_lowercase();
    match fact {
        Fact::ValueOf { tag, tolerance } => match live(tag) {
            None => Some(format!("the plant has no tag {tag} to compare the answer with")),
            Some(LiveValue::Number(value)) => {
                let stated = stated_numbers(text)
                    .into_iter()
                    .any(|number| (number - value).abs() <= *tolerance);
                (!stated).then(|| {
                    format!(
                        "answer does not state {tag}'s value {} (±{tolerance}); it says {}",
                        rounded(value),
                        quoted(text)
                    )
                })
            }
            Some(LiveValue::Text(value)) => (!lower.contains(&value.to_lowercase())).then(|| {
                format!(
                    "answer does not state {tag}'s value {value:?}; it says {}",
                    quoted(text)
                )
            }),
        },
        Fact::Alarm(alarm) => (!lower.contains(&alarm.to_lowercase()))
            .then(|| format!("answer does not name the alarm {alarm}; it says {}", quoted(text))),
        Fact::Words(words) => {
            let missing: Vec<&str> = words
                .iter()
                .filter(|word| !lower.contains(&word.to_lowercase()))
                .map(String::as_str)
                .collect();
            (!missing.is_empty()).then(|| {
                format!(
                    "answer does not say {}; it says {}",
                    missing
                        .iter()
                        .map(|word| format!("{word:?}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    quoted(text)
                )
            })
        }
    }
}

/// The numbers `text` states as values: those of [`numbers_in`] but a whole number that is
/// part of a name, right after a capitalised word of letters (`Pump 1`, `Tank 2`, `Area 1`):
/// an answer naming Pump 1 does not state a value of 1.
pub fn stated_numbers(text: &str) -> Vec<f64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut stated = Vec::new();
    for (index, word) in words.iter().enumerate() {
        let numbers = numbers_in(word);
        let named = index > 0
            && word
                .chars()
                .all(|c| c.is_ascii_digit() || matches!(c, ',' | ')' | '.' | ':' | ';'))
            && !word.trim_end_matches([',', ')', '.', ':', ';']).contains('.')
            && words[index - 1].starts_with(char::is_uppercase)
            && words[index - 1].chars().all(char::is_alphabetic);
        if !named {
            stated.extend(numbers);
        }
    }
    stated
}

/// The numbers written in `text`: each word that starts with a digit (or a minus and a digit)
/// gives its leading number, so `42.1`, `42.1%` and `-3A` count and `Tank2` does not.
pub fn numbers_in(text: &str) -> Vec<f64> {
    text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '.' | '-' | '_')))
        .filter_map(|word| {
            let digits = word.strip_prefix('-').unwrap_or(word);
            if !digits.starts_with(|c: char| c.is_ascii_digit()) {
                return None;
            }
            let end = digits
                .char_indices()
                .find(|(at, c)| {
                    !(c.is_ascii_digit()
                        || (*c == '.' && digits[at + 1..].starts_with(|next: char| next.is_ascii_digit())))
                })
                .map_or(digits.len(), |(at, _)| at);
            let number: f64 = digits[..end].parse().ok()?;
            Some(if digits.len() < word.len() {
                -number
            } else {
                number
            })
        })
        .collect()
}

fn rounded(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn quoted(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > QUOTED_CHARS {
        let cut: String = flat.chars().take(QUOTED_CHARS).collect();
        format!("{cut:?}…")
    } else {
        format!("{flat:?}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn numbers_are_read_from_words_that_start_with_them() {
        assert_eq!(
            numbers_in("Tank2.Level is 42.1% (Pump 1 at -3.5A, 7.)"),
            vec![42.1, 1.0, -3.5, 7.0]
        );
        assert!(numbers_in("Tank2.Level and Pump1.MotorCurrent").is_empty());
    }

    #[test]
    fn a_must_call_is_met_only_by_a_call_that_succeeded() {
        let case = Case {
            name: "value".to_owned(),
            question: "What is Tank 2's level?".to_owned(),
            pass_rate: 1.0,
            latency_ms: 60_000,
            must_call: vec![ExpectedCall {
                tool: "runtime_get_value".to_owned(),
                args: serde_json::Map::new(),
            }],
            must_not_call: Vec::new(),
            facts: Vec::new(),
        };
        let entry = |status| {
            localai::ToolTraceEntry::new(
                "runtime_get_value",
                json!({"tag": "Tank2.Levl"}),
                json!({"ok": false, "error": {"type": "not_found"}}),
                status,
                std::time::SystemTime::now(),
                Duration::ZERO,
            )
        };
        let mut envelope = Envelope::ok("I could not read it.", Duration::ZERO);
        envelope.tool_trace = vec![entry(ToolStatus::Error)];
        let verdict = judge(&case, &envelope, Duration::ZERO, &|_| None);
        assert_eq!(verdict.must_call.met, 0);
        assert!(
            verdict.reasons[0]
                .starts_with("called runtime_get_value with {\"tag\":\"Tank2.Levl\"}, but the call failed"),
            "{verdict:?}"
        );
        envelope.tool_trace.push(entry(ToolStatus::Ok));
        let verdict = judge(&case, &envelope, Duration::ZERO, &|_| None);
        assert_eq!(
            (verdict.must_call.met, verdict.reasons.len()),
            (1, 0),
            "{verdict:?}"
        );
    }

    #[test]
    fn a_number_that_is_part_of_a_name_is_not_a_stated_value() {
        assert_eq!(
            stated_numbers("Pump 1 runs at 42.1 A; Tank 2, 1 alarm, in Area 3."),
            vec![42.1, 1.0]
        );
        assert_eq!(stated_numbers("The level is 1 %."), vec![1.0]);
        assert_eq!(stated_numbers("Pump 1.5 bar"), vec![1.5]);
    }

    #[test]
    fn arguments_contain_a_subset_by_key_and_numbers_by_value() {
        let actual = json!({"tag": "Tank2.Level", "limit": 10, "extra": [1, 2]});
        assert!(contains(&actual, &json!({"tag": "Tank2.Level"})));
        assert!(contains(&actual, &json!({"limit": 10.0})));
        assert!(contains(&actual, &json!({})));
        assert!(!contains(&actual, &json!({"tag": "tank2.level"})));
        assert!(!contains(&actual, &json!({"extra": [1]})));
        assert!(!contains(&json!("raw"), &json!({"tag": "x"})));
    }
}
