//! The questions file of `tserver eval` (docs/EVAL.md): TOML read with serde, every problem
//! reported at its line and column with the field it is in.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::ops::Range;

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

/// The largest questions file read.
pub const MAX_QUESTIONS_FILE_BYTES: usize = 1024 * 1024;

/// One problem in a questions file, at its place: the plant file's kind of error (line,
/// column, field, message), so both files' problems read alike.
pub type QuestionsError = plant_model::PlantError;

/// Every problem of one questions file, in file order; nothing of the file is used.
pub type QuestionsErrors = plant_model::PlantErrors;

/// A questions file, checked: what each case asks and what a good answer needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Questions {
    /// Runs of each case unless `--runs` says otherwise.
    pub runs: u32,
    /// The cases, in file order.
    pub cases: Vec<Case>,
}

/// One question and what a good answer to it needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// Its name in the report.
    pub name: String,
    /// What is asked, as an operator types it.
    pub question: String,
    /// The fraction of runs that must pass, 0 to 1.
    pub pass_rate: f64,
    /// The longest a run may take, in milliseconds.
    pub latency_ms: u64,
    /// Tools the turn must call, each with arguments that contain these.
    pub must_call: Vec<ExpectedCall>,
    /// Tools the turn must not call.
    pub must_not_call: Vec<String>,
    /// What the answer must state.
    pub facts: Vec<Fact>,
}

/// A tool the turn must call.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectedCall {
    /// The tool's name.
    pub tool: String,
    /// A JSON object the call's arguments must contain (an empty one: any arguments).
    pub args: serde_json::Map<String, Value>,
}

/// Something the answer must state.
#[derive(Debug, Clone, PartialEq)]
pub enum Fact {
    /// The tag's value when the answer arrives: a number within `tolerance` of it (a number
    /// tag), or its text (any other).
    ValueOf {
        /// The tag.
        tag: String,
        /// How far a stated number may be from the value.
        tolerance: f64,
    },
    /// The alarm's name.
    Alarm(String),
    /// Every one of these words, ignoring case.
    Words(Vec<String>),
}

/// Runs, pass rate and latency budget when `[defaults]` gives none.
const DEFAULT_RUNS: u32 = 3;
const DEFAULT_PASS_RATE: f64 = 1.0;
const DEFAULT_LATENCY_MS: u64 = 60_000;
/// The most runs of a case.
pub const MAX_RUNS: u32 = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    #[serde(default)]
    defaults: Option<Spanned<DefaultsSpec>>,
    cases: Spanned<Vec<Spanned<CaseSpec>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DefaultsSpec {
    runs: Option<Spanned<i64>>,
    pass_rate: Option<Spanned<f64>>,
    latency_ms: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseSpec {
    name: Spanned<String>,
    question: Spanned<String>,
    pass_rate: Option<Spanned<f64>>,
    latency_ms: Option<Spanned<i64>>,
    #[serde(default)]
    must_call: Vec<CallSpec>,
    #[serde(default)]
    must_not_call: Vec<Spanned<String>>,
    #[serde(default)]
    facts: Vec<Spanned<FactSpec>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallSpec {
    tool: Spanned<String>,
    #[serde(default)]
    args: Option<Spanned<Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FactSpec {
    value_of: Option<Spanned<String>>,
    tolerance: Option<Spanned<f64>>,
    alarm: Option<Spanned<String>>,
    words: Option<Spanned<Vec<String>>>,
}

/// What the plant offers, to check the names a questions file uses.
pub trait PlantNames {
    /// Whether the plant has this tag.
    fn has_tag(&self, name: &str) -> bool;
    /// Whether the plant has this alarm.
    fn has_alarm(&self, name: &str) -> bool;
    /// Whether the solution has this tool.
    fn has_tool(&self, name: &str) -> bool;
}

/// Collects problems with their places.
struct Problems<'a> {
    text: &'a str,
    errors: Vec<QuestionsError>,
}

impl Problems<'_> {
    fn at(&mut self, span: Range<usize>, field: impl Into<String>, message: impl Into<String>) {
        let (line, column) = line_column(self.text, span.start);
        self.errors.push(QuestionsError {
            line,
            column,
            field: field.into(),
            message: message.into(),
        });
    }
}

fn line_column(text: &str, at: usize) -> (usize, usize) {
    let before = text.get(..at.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |line| line.chars().count()) + 1;
    (line, column)
}

/// Reads and checks a questions file against the plant it is asked of. `file` names it in
/// errors.
pub fn read(text: &str, file: &str, plant: &dyn PlantNames) -> Result<Questions, QuestionsErrors> {
    let mut problems = Problems {
        text,
        errors: Vec::new(),
    };
    let fail = |errors: Vec<QuestionsError>| QuestionsErrors {
        file: file.to_owned(),
        errors,
    };
    if text.len() > MAX_QUESTIONS_FILE_BYTES {
        problems.at(
            0..0,
            "",
            format!(
                "the file is {} bytes; a questions file may have at most {MAX_QUESTIONS_FILE_BYTES}",
                text.len()
            ),
        );
        return Err(fail(problems.errors));
    }
    let spec: FileSpec = match toml::from_str(text) {
        Ok(spec) => spec,
        Err(error) => {
            let span = error.span().unwrap_or(0..0);
            let field = field_at(text, span.start);
            problems.at(span, field, error.message().trim().to_owned());
            return Err(fail(problems.errors));
        }
    };
    let questions = check(&spec, plant, &mut problems);
    if problems.errors.is_empty() {
        Ok(questions)
    } else {
        let mut errors = problems.errors;
        errors.sort_by_key(|error| (error.line, error.column));
        Err(fail(errors))
    }
}

fn check(spec: &FileSpec, plant: &dyn PlantNames, problems: &mut Problems<'_>) -> Questions {
    let defaults = spec.defaults.as_ref().map(Spanned::get_ref);
    let runs = match defaults.and_then(|defaults| defaults.runs.as_ref()) {
        Some(runs) => runs_of(runs, "defaults.runs", problems),
        None => DEFAULT_RUNS,
    };
    let pass_rate = defaults
        .and_then(|defaults| defaults.pass_rate.as_ref())
        .map_or(DEFAULT_PASS_RATE, |rate| {
            pass_rate_of(rate, "defaults.pass_rate", problems)
        });
    let latency_ms = defaults
        .and_then(|defaults| defaults.latency_ms.as_ref())
        .map_or(DEFAULT_LATENCY_MS, |latency| {
            latency_of(latency, "defaults.latency_ms", problems)
        });
    if spec.cases.get_ref().is_empty() {
        problems.at(spec.cases.span(), "cases", "there are no cases to ask");
    }
    let mut names = HashSet::new();
    let cases = spec
        .cases
        .get_ref()
        .iter()
        .enumerate()
        .map(|(index, case)| {
            let at = format!("cases[{index}]");
            let name = case.get_ref().name.get_ref();
            if name.trim().is_empty() {
                problems.at(
                    case.get_ref().name.span(),
                    format!("{at}.name"),
                    "the name is empty",
                );
            } else if !names.insert(name.clone()) {
                problems.at(
                    case.get_ref().name.span(),
                    format!("{at}.name"),
                    format!("another case is named {name:?}"),
                );
            }
            check_case(case.get_ref(), &at, (pass_rate, latency_ms), plant, problems)
        })
        .collect();
    Questions { runs, cases }
}

fn check_case(
    case: &CaseSpec,
    at: &str,
    (pass_rate, latency_ms): (f64, u64),
    plant: &dyn PlantNames,
    problems: &mut Problems<'_>,
) -> Case {
    if case.question.get_ref().trim().is_empty() {
        problems.at(
            case.question.span(),
            format!("{at}.question"),
            "the question is empty",
        );
    }
    let must_call = case
        .must_call
        .iter()
        .enumerate()
        .map(|(index, call)| {
            let field = format!("{at}.must_call[{index}]");
            check_tool(&call.tool, &format!("{field}.tool"), plant, problems);
            let args = match call.args.as_ref().map(|args| (args.get_ref(), args.span())) {
                None => serde_json::Map::new(),
                Some((Value::Object(args), _)) => args.clone(),
                Some((_, span)) => {
                    problems.at(span, format!("{field}.args"), "args must be a table");
                    serde_json::Map::new()
                }
            };
            ExpectedCall {
                tool: call.tool.get_ref().clone(),
                args,
            }
        })
        .collect();
    let must_not_call = case
        .must_not_call
        .iter()
        .enumerate()
        .map(|(index, tool)| {
            check_tool(tool, &format!("{at}.must_not_call[{index}]"), plant, problems);
            tool.get_ref().clone()
        })
        .collect();
    let facts = case
        .facts
        .iter()
        .enumerate()
        .filter_map(|(index, fact)| check_fact(fact, &format!("{at}.facts[{index}]"), plant, problems))
        .collect();
    Case {
        name: case.name.get_ref().clone(),
        question: case.question.get_ref().clone(),
        pass_rate: case.pass_rate.as_ref().map_or(pass_rate, |rate| {
            pass_rate_of(rate, &format!("{at}.pass_rate"), problems)
        }),
        latency_ms: case.latency_ms.as_ref().map_or(latency_ms, |latency| {
            latency_of(latency, &format!("{at}.latency_ms"), problems)
        }),
        must_call,
        must_not_call,
        facts,
    }
}

fn check_tool(tool: &Spanned<String>, field: &str, plant: &dyn PlantNames, problems: &mut Problems<'_>) {
    if !plant.has_tool(tool.get_ref()) {
        problems.at(
            tool.span(),
            field,
            format!("the solution has no tool {:?}", tool.get_ref()),
        );
    }
}

fn check_fact(
    fact: &Spanned<FactSpec>,
    field: &str,
    plant: &dyn PlantNames,
    problems: &mut Problems<'_>,
) -> Option<Fact> {
    let spec = fact.get_ref();
    let given = [
        spec.value_of.is_some(),
        spec.alarm.is_some(),
        spec.words.is_some(),
    ]
    .iter()
    .filter(|given| **given)
    .count();
    if given != 1 {
        problems.at(
            fact.span(),
            field,
            "a fact is exactly one of value_of (with an optional tolerance), alarm or words",
        );
        return None;
    }
    if let Some(tolerance) = &spec.tolerance
        && spec.value_of.is_none()
    {
        problems.at(
            tolerance.span(),
            format!("{field}.tolerance"),
            "tolerance goes with value_of",
        );
    }
    if let Some(tag) = &spec.value_of {
        if !plant.has_tag(tag.get_ref()) {
            problems.at(
                tag.span(),
                format!("{field}.value_of"),
                format!("the plant has no tag {:?}", tag.get_ref()),
            );
        }
        let tolerance = spec.tolerance.as_ref().map_or(0.0, |tolerance| {
            let value = *tolerance.get_ref();
            if !(value.is_finite() && value >= 0.0) {
                problems.at(
                    tolerance.span(),
                    format!("{field}.tolerance"),
                    format!("the tolerance must be a number of at least 0, not {value}"),
                );
            }
            value
        });
        return Some(Fact::ValueOf {
            tag: tag.get_ref().clone(),
            tolerance,
        });
    }
    if let Some(alarm) = &spec.alarm {
        if !plant.has_alarm(alarm.get_ref()) {
            problems.at(
                alarm.span(),
                format!("{field}.alarm"),
                format!("the plant has no alarm {:?}", alarm.get_ref()),
            );
        }
        return Some(Fact::Alarm(alarm.get_ref().clone()));
    }
    let words = spec.words.as_ref()?;
    if words.get_ref().is_empty() || words.get_ref().iter().any(|word| word.trim().is_empty()) {
        problems.at(
            words.span(),
            format!("{field}.words"),
            "words must list at least one word, none of them empty",
        );
    }
    Some(Fact::Words(words.get_ref().clone()))
}

fn runs_of(runs: &Spanned<i64>, field: &str, problems: &mut Problems<'_>) -> u32 {
    match u32::try_from(*runs.get_ref()) {
        Ok(count @ 1..=MAX_RUNS) => count,
        _ => {
            problems.at(
                runs.span(),
                field,
                format!("runs must be 1 to {MAX_RUNS}, not {}", runs.get_ref()),
            );
            1
        }
    }
}

fn pass_rate_of(rate: &Spanned<f64>, field: &str, problems: &mut Problems<'_>) -> f64 {
    let value = *rate.get_ref();
    if !(0.0..=1.0).contains(&value) {
        problems.at(
            rate.span(),
            field,
            format!("a pass rate is a fraction from 0 to 1, not {value}"),
        );
    }
    value
}

fn latency_of(latency: &Spanned<i64>, field: &str, problems: &mut Problems<'_>) -> u64 {
    match u64::try_from(*latency.get_ref()) {
        Ok(ms) if ms > 0 => ms,
        _ => {
            problems.at(
                latency.span(),
                field,
                format!(
                    "a latency budget is a positive number of milliseconds, not {}",
                    latency.get_ref()
                ),
            );
            1
        }
    }
}

/// The dotted path of the innermost value or key at byte `at` (e.g. `cases[1].question`), for
/// a serde error that names only its place.
fn field_at(text: &str, at: usize) -> String {
    let Ok(document) = toml::de::DeTable::parse(text) else {
        return String::new();
    };
    let mut path = String::new();
    table_path(document.get_ref(), at, &mut path);
    path
}

fn table_path(table: &toml::de::DeTable<'_>, at: usize, path: &mut String) {
    let inside = |span: Range<usize>| span.start <= at && at < span.end.max(span.start + 1);
    let containing = table
        .iter()
        .find(|(key, value)| inside(key.span()) || inside(value.span()));
    // A table or array of tables written under `[header]`s spans its header, not the lines
    // below it: the place is then in the last one whose header starts before it.
    let found = containing.or_else(|| {
        table
            .iter()
            .filter(|(key, value)| {
                key.span().start <= at
                    && matches!(
                        value.get_ref(),
                        toml::de::DeValue::Table(_) | toml::de::DeValue::Array(_)
                    )
            })
            .max_by_key(|(key, _)| key.span().start)
    });
    if let Some((key, value)) = found {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key.get_ref());
        value_path(value, at, path);
    }
}

fn value_path(value: &Spanned<toml::de::DeValue<'_>>, at: usize, path: &mut String) {
    match value.get_ref() {
        toml::de::DeValue::Table(table) => table_path(table, at, path),
        toml::de::DeValue::Array(items) => {
            // An array of tables' items may span only their `[[header]]`: the last item
            // starting at or before the place is the one it is in.
            let found = items
                .iter()
                .enumerate()
                .rfind(|(_, item)| item.span().start <= at);
            if let Some((index, item)) = found {
                let _ = write!(path, "[{index}]");
                value_path(item, at, path);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Demo;

    impl PlantNames for Demo {
        fn has_tag(&self, name: &str) -> bool {
            name == "Tank2.Level"
        }
        fn has_alarm(&self, name: &str) -> bool {
            name == "Pump1.MotorCurrent.Hi"
        }
        fn has_tool(&self, name: &str) -> bool {
            name.starts_with("runtime_")
        }
    }

    fn errors(text: &str) -> Vec<String> {
        read(text, "q.toml", &Demo)
            .expect_err("refused")
            .errors
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    const GOOD: &str = r#"
[defaults]
runs = 2
latency_ms = 5000

[[cases]]
name = "tank2-level"
question = "What is the level of Tank 2?"
must_call = [{ tool = "runtime_get_value", args = { tag = "Tank2.Level" } }]
must_not_call = ["runtime_propose_write"]
facts = [{ value_of = "Tank2.Level", tolerance = 0.5 }]

[[cases]]
name = "pump1"
question = "What is wrong with Pump 1?"
pass_rate = 0.5
[[cases.facts]]
alarm = "Pump1.MotorCurrent.Hi"
[[cases.facts]]
words = ["motor current"]
"#;

    #[test]
    fn a_good_file_reads_with_its_defaults() {
        let questions = read(GOOD, "q.toml", &Demo).expect("reads");
        assert_eq!(questions.runs, 2);
        assert_eq!(questions.cases.len(), 2);
        let first = &questions.cases[0];
        assert_eq!(first.latency_ms, 5000);
        assert!((first.pass_rate - 1.0).abs() < f64::EPSILON);
        assert_eq!(first.must_call[0].args["tag"], "Tank2.Level");
        assert_eq!(
            first.facts,
            vec![Fact::ValueOf {
                tag: "Tank2.Level".to_owned(),
                tolerance: 0.5
            }]
        );
        let second = &questions.cases[1];
        assert!((second.pass_rate - 0.5).abs() < f64::EPSILON);
        assert_eq!(
            second.facts,
            vec![
                Fact::Alarm("Pump1.MotorCurrent.Hi".to_owned()),
                Fact::Words(vec!["motor current".to_owned()])
            ]
        );
    }

    #[test]
    fn a_wrong_type_names_its_line_and_field() {
        let text = GOOD.replace("latency_ms = 5000", "latency_ms = \"soon\"");
        let found = errors(&text);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("4:14: defaults.latency_ms: "), "{found:?}");
    }

    #[test]
    fn an_unknown_field_in_a_later_case_names_that_case() {
        let text = GOOD.replace("pass_rate = 0.5", "pass_rat = 0.5");
        let found = errors(&text);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("16:1: cases[1].pass_rat: unknown field"),
            "{found:?}"
        );
    }

    #[test]
    fn names_the_plant_lacks_and_bad_values_are_all_reported_in_order() {
        let text = GOOD
            .replace("tool = \"runtime_get_value\"", "tool = \"get_value\"")
            .replace("value_of = \"Tank2.Level\"", "value_of = \"Tank9.Level\"")
            .replace("pass_rate = 0.5", "pass_rate = 1.5")
            .replace(
                "alarm = \"Pump1.MotorCurrent.Hi\"",
                "alarm = \"Pump1.Nope\"\nwords = [\"x\"]",
            );
        let found = errors(&text);
        assert_eq!(found.len(), 4, "{found:?}");
        assert!(
            found[0].starts_with("9:23: cases[0].must_call[0].tool: the solution has no tool \"get_value\""),
            "{found:?}"
        );
        assert!(
            found[1].starts_with("11:23: cases[0].facts[0].value_of: the plant has no tag"),
            "{found:?}"
        );
        assert!(
            found[2].starts_with("16:13: cases[1].pass_rate: a pass rate"),
            "{found:?}"
        );
        assert!(
            found[3].starts_with("17:1: cases[1].facts[0]: a fact is exactly one"),
            "{found:?}"
        );
    }

    #[test]
    fn a_syntax_error_names_its_line() {
        let found = errors("[[cases]]\nname = \"a\nquestion = \"b\"\n");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("2:"), "{found:?}");
    }

    #[test]
    fn a_file_without_cases_is_refused() {
        let found = errors("[defaults]\nruns = 0\n");
        assert!(
            found.iter().any(|error| error.contains("missing field `cases`")),
            "{found:?}"
        );
    }
}
