//! Judging one run of a case: the turn's envelope against what the case says a good answer
//! needs, each shortfall explained in a sentence.

use std::time::Duration;

use localai::{Envelope, Status};
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
    /// Tool expectations (`must_call` and `must_not_call` entries) the run met.
    pub tool_checks_met: u32,
    /// Tool expectations the run was held to.
    pub tool_checks_made: u32,
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
        tool_checks_met: 0,
        tool_checks_made: 0,
    };
    let took = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    if took > case.latency_ms {
        verdict
            .reasons
            .push(format!("took {took} ms, over the {} ms budget", case.latency_ms));
    }
    for expected in &case.must_call {
        verdict.tool_checks_made += 1;
        if envelope.tool_trace.iter().any(|entry| {
            entry.name == expected.tool && contains(&entry.args, &Value::Object(expected.args.clone()))
        }) {
            verdict.tool_checks_met += 1;
        } else {
            verdict.reasons.push(missed_call(expected, envelope));
        }
    }
    for forbidden in &case.must_not_call {
        verdict.tool_checks_made += 1;
        match envelope.tool_trace.iter().find(|entry| &entry.name == forbidden) {
            None => verdict.tool_checks_met += 1,
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
                let stated = numbers_in(text)
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
