//! Evaluating the Local AI assistant on a solution's own questions (`tserver eval`,
//! docs/EVAL.md): each case is asked N times through the chat path against the live plant,
//! each run judged ([`judge`]), and the runs summed up in a report ([`EvalReport`]).
//!
//! - [`questions`] reads the questions file.
//! - [`judge`] decides whether one run passed, and why not.
//! - [`report`] sums the runs up: the table and the JSON document.

pub mod judge;
pub mod questions;
pub mod report;

use std::sync::Arc;
use std::time::Instant;

use localai::{ChatCaller, ChatTurn, Envelope, Usage};
use plant::Runtime;
use plant_model::TagValue;

pub use self::judge::{LiveValue, Tally, Verdict};
pub use self::questions::{
    Case, Fact, MAX_QUESTIONS_FILE_BYTES, PlantNames, Questions, QuestionsError, QuestionsErrors,
};
pub use self::report::{Accuracy, CaseReport, EvalReport, RunRecord, ToolChecks};

/// The user the eval's chat turns are asked as, unless told otherwise.
pub const EVAL_USER: &str = "eval";

/// The names a runtime's plant and tool catalog have.
#[derive(Debug)]
pub struct RuntimeNames<'a>(pub &'a Runtime);

impl PlantNames for RuntimeNames<'_> {
    fn has_tag(&self, name: &str) -> bool {
        self.0.objects().tag(name).is_some()
    }

    fn has_alarm(&self, name: &str) -> bool {
        self.0
            .objects()
            .alarms()
            .iter()
            .any(|alarm| alarm.definition().name == name)
    }

    fn has_tool(&self, name: &str) -> bool {
        self.0.tools().get(name).is_some()
    }
}

/// Reads a questions file's text, checking its names against `runtime`'s plant and tools.
pub fn read_questions(text: &str, file: &str, runtime: &Runtime) -> Result<Questions, QuestionsErrors> {
    questions::read(text, file, &RuntimeNames(runtime))
}

/// A tag's value now, as the judge compares it.
fn live_value(runtime: &Runtime, tag: &str) -> Option<LiveValue> {
    let objects = runtime.objects();
    let sample = objects.tag(tag)?.current();
    Some(match &sample.value {
        TagValue::Number(value) => LiveValue::Number(*value),
        #[expect(
            clippy::cast_precision_loss,
            reason = "an answer states integers far below 2^52"
        )]
        TagValue::Integer(value) => LiveValue::Number(*value as f64),
        TagValue::Bool(value) => LiveValue::Text(value.to_string()),
        TagValue::Text(text) => LiveValue::Text(text.to_string()),
    })
}

/// Asks every case of `questions` `runs` times (each run a fresh conversation on a connection
/// of its own, so no transcript carries over) through `runtime`'s chat path, one run at a
/// time, and judges each; `each_run` hears of every run as it ends. The plant should be live
/// (simulator and sources running) so the answers are about values that move.
#[crate::compiled_once]
pub async fn evaluate(
    runtime: &Runtime,
    questions: &Questions,
    runs: u32,
    user: &str,
    each_run: &mut (dyn FnMut(&Case, &RunRecord) + Send),
) -> EvalReport {
    let user: Arc<str> = Arc::from(user);
    let mut cases = Vec::with_capacity(questions.cases.len());
    for case in &questions.cases {
        let mut records = Vec::new();
        for run in 1..=runs {
            let record = ask(runtime, case, run, &user).await;
            each_run(case, &record);
            records.push(record);
        }
        cases.push(CaseReport::new(case, records));
    }
    EvalReport::new(runs, cases)
}

/// One run of a case: the turn, then its judgement.
async fn ask(runtime: &Runtime, case: &Case, run: u32, user: &Arc<str>) -> RunRecord {
    let caller = ChatCaller {
        client_guid: uuid::Uuid::new_v4(),
        user_name: Arc::clone(user),
        turn: 1,
    };
    let started = Instant::now();
    let (envelope_json, usage) = match runtime.local_ai().execute_chat(&caller, &case.question) {
        ChatTurn::Answered(json) => (json, Usage::default()),
        ChatTurn::Running(turn) => {
            let outcome = turn.await;
            (outcome.envelope, outcome.usage)
        }
    };
    let elapsed = started.elapsed();
    let envelope = Envelope::from_json(&envelope_json)
        .unwrap_or_else(|error| Envelope::error(format!("the reply is not an envelope: {error}"), elapsed));
    let verdict = judge::judge(case, &envelope, elapsed, &|tag| live_value(runtime, tag));
    RunRecord::new(run, &envelope, elapsed, &usage, verdict)
}
