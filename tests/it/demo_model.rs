//! The built-in demo model on two plants, the demo's pumping station and the water-treatment
//! works: a table of questions, each with the tools it must call and what its answer must and
//! must never say. It answers from the live plant or says it cannot; it never answers a
//! question near the one asked, nor names the demo plant's equipment on another plant.

use std::path::Path;
use std::sync::Arc;

use localai::{ChatCaller, ChatTurn};
use plant::Runtime;
use plant_model::{Quality, TagValue};
use scripted_llm::ScriptedLlm;
use service_client::Envelope;
use tserver_demo::DemoModel;
use tserver_demo::model::{DISCLOSURE, MODEL_NAME};

use crate::support::{Solution, admin};

/// The search every question about a name begins with.
const SEARCH: &str = "runtime_search_uns";

/// One question and what its turn must do.
struct Case {
    question: &'static str,
    /// The tools called, in order.
    calls: &'static [&'static str],
    /// What the answer says, each a part of it.
    says: &'static [&'static str],
    /// What the answer must never say.
    never: &'static [&'static str],
}

/// Points `solution` at the demo model with the tools and proposals on, and opens it.
fn serve(solution: &Path, llm: &ScriptedLlm) -> Runtime {
    let path = solution.to_str().expect("utf-8");
    for (key, value) in [
        ("URL", llm.url().as_str()),
        ("Name", MODEL_NAME),
        ("ModelEnabled", "true"),
        ("ModelOptions", "0xde"),
    ] {
        admin(&["settings", path, "set", key, value], "");
    }
    Runtime::open(solution).expect("the solution opens")
}

async fn ask(runtime: &Runtime, question: &str) -> Envelope {
    let caller = ChatCaller {
        client_guid: uuid::Uuid::new_v4(),
        user_name: Arc::from("operator"),
        turn: 1,
    };
    let json = match runtime.local_ai().execute_chat(&caller, question) {
        ChatTurn::Answered(json) => json,
        ChatTurn::Running(turn) => turn.await.envelope,
    };
    Envelope::from_json(&json).expect("an envelope")
}

async fn check(runtime: &Runtime, plant: &str, cases: &[Case]) {
    let mut wrong = Vec::new();
    for case in cases {
        let envelope = ask(runtime, case.question).await;
        let calls: Vec<&str> = envelope
            .tool_trace
            .iter()
            .map(|entry| entry.name.as_str())
            .collect();
        let text = envelope.text.as_str();
        let mut problems = Vec::new();
        if !text.starts_with(DISCLOSURE) {
            problems.push("does not say it is the demo model".to_owned());
        }
        if calls != case.calls {
            problems.push(format!("called {calls:?}, not {:?}", case.calls));
        }
        for part in case.says {
            if !text.contains(part) {
                problems.push(format!("does not say {part:?}"));
            }
        }
        for part in case.never {
            if text.contains(part) {
                problems.push(format!("says {part:?}"));
            }
        }
        if !problems.is_empty() {
            wrong.push(format!(
                "{plant}: {:?}: {}\n    answer: {text}",
                case.question,
                problems.join("; ")
            ));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_demo_plant_it_answers_what_was_asked_and_proposes_what_it_was_asked_to_do() {
    let llm = ScriptedLlm::start_with(DemoModel).await.expect("demo model");
    let solution = Solution::demo();
    admin(
        &[
            "settings",
            solution.path.to_str().expect("utf-8"),
            "set",
            "SimulatorEnabled",
            "off",
        ],
        "",
    );
    let runtime = serve(&solution.path, &llm);
    // Pump 1 draws too much: its high-current alarm is the one active alarm.
    runtime
        .plant()
        .write("Pump1.MotorCurrent", TagValue::Number(22.0), Quality::GOOD)
        .expect("write");
    runtime
        .plant()
        .write("Tank1.Level", TagValue::Number(67.43), Quality::GOOD)
        .expect("write");
    check(
        &runtime,
        "demo",
        &[
            Case {
                question: "Is Tank 1 in alarm?",
                calls: &["runtime_get_active_alarms"],
                says: &[
                    "No alarm of Tank1 needs attention right now.",
                    "Elsewhere 1 alarm(s) need attention: Pump 1 motor current high (Hi Pump1.MotorCurrent",
                ],
                never: &["No alarm needs attention"],
            },
            Case {
                question: "What is wrong with Pump 1?",
                calls: &[SEARCH, "runtime_get_active_alarms", "runtime_search_documents"],
                says: &[
                    "Pump1 has 1 alarm(s) needing attention: Pump 1 motor current high",
                    "What to do, from",
                ],
                never: &[],
            },
            Case {
                question: "How did Tank1.Level trend over the last hour?",
                calls: &["runtime_get_tag_history", "runtime_get_value"],
                says: &["It is 67.43 % now ("],
                never: &["rising", "falling"],
            },
            Case {
                question: "What is the level of Tank 2?",
                calls: &[SEARCH],
                says: &["Tank2.Level = 38.5 %"],
                never: &["Best match"],
            },
            Case {
                question: "What equipment is there?",
                calls: &["runtime_list_instances"],
                says: &["Plant/Area1/Pump1 (", "Plant/Area2/Tank2 ("],
                never: &["(Pump,", "(Tank,"],
            },
            Case {
                question: "Switch Pump 1 to Manual",
                calls: &[SEARCH, "runtime_propose_write"],
                says: &[
                    "I proposed writing \"Manual\" to Pump1.Mode (now \"Auto\")",
                    "Nothing is written until an operator approves it",
                ],
                never: &[],
            },
            Case {
                question: "Please put Pump 1 in Auto",
                calls: &[SEARCH],
                says: &["Pump1.Mode is \"Auto\" already: there is nothing to propose."],
                never: &["proposed"],
            },
            Case {
                question: "Set Pump1.Mode to Banana",
                calls: &["runtime_get_value"],
                says: &["Which value? I can propose one a tag lists: Pump1.Mode (Auto, Manual, Off)."],
                never: &["proposed"],
            },
            Case {
                question: "Set Pump1.MotorCurrent to 5",
                calls: &["runtime_get_value", "runtime_propose_write"],
                says: &["I could not propose that: cannot propose writing Pump1.MotorCurrent: not writable"],
                never: &[],
            },
            Case {
                question: "What is the dew point?",
                calls: &[SEARCH],
                says: &["No tag matches all of \"dew point\".", "A language model"],
                never: &["Pump 1", "Tank 1", "Best match"],
            },
        ],
    )
    .await;
    llm.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_another_plant_it_names_only_that_plant_and_says_what_it_cannot_tell() {
    let llm = ScriptedLlm::start_with(DemoModel).await.expect("demo model");
    let solution = Solution::empty();
    let path = solution.path.to_str().expect("utf-8");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/plants/water-treatment.toml");
    admin(&["plant", path, "import", file.to_str().expect("utf-8")], "");
    let runtime = serve(&solution.path, &llm);
    check(
        &runtime,
        "water treatment",
        &[
            Case {
                question: "What equipment is there?",
                calls: &["runtime_list_instances"],
                says: &["(Pump, ", "(Filter, ", "(DosingPump, "],
                never: &["(IntakePump,", "(pHCorrectionDosing,"],
            },
            Case {
                question: "What is the receiver pressure?",
                calls: &[SEARCH, SEARCH],
                says: &[
                    "No tag matches all of \"receiver pressure\".",
                    "Tags about pressure are: ",
                    "whether one of them is what you mean I cannot tell",
                ],
                never: &["Best match"],
            },
            Case {
                question: "What is the dew point?",
                calls: &[SEARCH],
                says: &["No tag matches all of \"dew point\"."],
                never: &["Pump 1", "Tank 1", "Tank1", "Pump1"],
            },
            Case {
                question: "hello",
                calls: &[],
                says: &["did not understand", "Which alarms are active?"],
                never: &["Pump 1", "Tank 1", "Tank1", "Pump1"],
            },
            Case {
                question: "Switch Filter01 to Out of service",
                calls: &[SEARCH, "runtime_propose_write"],
                says: &["I could not propose that: cannot propose writing Filter01.Mode: not proposable"],
                never: &["I proposed"],
            },
            Case {
                question: "Set Filter01.Mode to Banana",
                calls: &["runtime_get_value"],
                says: &["Filter01.Mode (Auto, Manual, Out of service)"],
                never: &["I proposed"],
            },
        ],
    )
    .await;
    llm.stop().await;
}
