//! Every Local AI reply fits its frame: an answer or a tool trace larger than the frame is cut
//! to fit, and the envelope says so, on both paths (the chat path over TCP, the atomic path
//! in process with the same cap).

use scripted_llm::{Reply, ScriptedLlm};
use serde_json::json;
use service_client::{Envelope, Status};
use tserver::{Runtime, ServerConfig};

use crate::support::{Solution, TestServer, admin};

/// The frame limit the chat tests serve with, and the envelope cap it leaves.
const MAX_FRAME: usize = 64 * 1024;
const MAX_ENVELOPE: usize = MAX_FRAME - 128;

/// The envelope of an `ok` answer `text` long, less the answer: its other four fields.
const ENVELOPE_AROUND_TEXT: usize =
    r#"{"text":"","status":"ok","toolTrace":[],"latencyMs":0,"warnings":[]}"#.len();

/// Answer lengths around the cap, and whether each must be cut. The latency field may take a
/// few more digits than the one counted, so "under" keeps a margin.
fn sizes() -> [(usize, bool); 4] {
    let at_limit = MAX_ENVELOPE - ENVELOPE_AROUND_TEXT;
    [
        (at_limit - 16, false),
        (at_limit + 1, true),
        (at_limit + 200, true),
        (2_000_000, true),
    ]
}

fn solution_for(url: &str) -> Solution {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8");
    admin(&["settings", path, "set", "URL", url], "");
    admin(&["settings", path, "set", "ModelEnabled", "true"], "");
    solution
}

fn check(path: &str, len: usize, must_cut: bool, json: &str) {
    assert!(json.len() <= MAX_ENVELOPE, "{path} {len}: {} bytes", json.len());
    let envelope = Envelope::from_json(json).expect("a valid envelope");
    if must_cut {
        assert_eq!(envelope.status, Status::Truncated, "{path} {len}");
        assert!(
            envelope.text.len() < len && envelope.text.len() > MAX_ENVELOPE - 1024,
            "{path} {len}: kept {}",
            envelope.text.len()
        );
        let note = envelope.warnings.last().expect("a warning");
        assert!(
            note.contains(&format!("limit of {MAX_ENVELOPE} bytes")),
            "{path}: {note}"
        );
    } else {
        assert_eq!(
            envelope.status,
            Status::Ok,
            "{path} {len}: {:?}",
            envelope.warnings
        );
        assert_eq!(envelope.text.len(), len, "{path}: nothing cut");
        assert!(envelope.warnings.is_empty(), "{path}: {:?}", envelope.warnings);
    }
}

#[tokio::test]
async fn chat_answers_of_any_size_arrive_as_envelopes_that_fit_the_frame() {
    let replies = sizes().map(|(len, _)| Reply::text("a".repeat(len)));
    let llm = ScriptedLlm::start(replies).await.expect("llm");
    let solution = solution_for(&llm.url());
    let path = solution.path.to_str().expect("utf-8");
    // History off: each turn is alone, so the POSTs stay small.
    admin(&["settings", path, "set", "ModelOptions", "0x1E"], "");
    let server = TestServer::start(&solution.path, ServerConfig::default().with_max_frame(MAX_FRAME)).await;
    let client = server.guest().await;
    for (len, must_cut) in sizes() {
        let json = client
            .chat("Tell me everything.")
            .await
            .expect("an envelope, never a protocol error");
        check("chat", len, must_cut, &json);
    }
    server.stop().await;
}

#[tokio::test]
async fn a_tool_call_with_megabytes_of_arguments_is_cut_in_the_trace_not_in_the_answer() {
    let llm = ScriptedLlm::start([
        Reply::tool_call(
            "runtime_get_value",
            json!({"tag": "Pump1.MotorCurrent", "note": "n".repeat(5_000_000)}),
        ),
        Reply::text("Pump 1 draws 12.4 A."),
    ])
    .await
    .expect("llm");
    let solution = solution_for(&llm.url());
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let client = server.guest().await;
    let json = client.chat("How is Pump 1?").await.expect("an envelope");
    assert!(json.len() <= 1024 * 1024 - 128, "{} bytes", json.len());
    let envelope = Envelope::from_json(&json).expect("valid");
    assert_eq!(
        envelope.status,
        Status::Ok,
        "the answer is whole: {:?}",
        envelope.warnings
    );
    assert_eq!(envelope.text, "Pump 1 draws 12.4 A.");
    assert_eq!(envelope.tool_trace.len(), 1);
    assert!(
        envelope.tool_trace[0]
            .args
            .as_str()
            .is_some_and(|args| args.contains("bytes of JSON cut")),
        "{:?}",
        envelope.tool_trace[0].args.to_string().get(..200)
    );
    let said = |what: &str| envelope.warnings.iter().any(|warning| warning.contains(what));
    assert!(said("tool arguments and results"), "{:?}", envelope.warnings);
    assert!(
        said("not remembered"),
        "a 5 MB turn is over the transcript budget: {:?}",
        envelope.warnings
    );
    server.stop().await;
}

#[tokio::test]
async fn atomic_answers_are_fitted_to_the_same_cap() {
    let replies = sizes().map(|(len, _)| Reply::text("b".repeat(len)));
    let llm = ScriptedLlm::start(replies).await.expect("llm");
    let solution = solution_for(&llm.url());
    let runtime = Runtime::open(&solution.path).expect("opens");
    runtime.local_ai().limit_envelope_bytes(MAX_ENVELOPE);
    for (len, must_cut) in sizes() {
        let json = runtime.toolkit().ai_execute_async("Tell me everything.").await;
        check("atomic", len, must_cut, &json);
    }
}
