//! The cached chat path end to end: a real `tserver` on a demo solution, real clients, and the
//! scripted LLM standing in for the model. Each test asserts the envelope and what was POSTed.

use std::time::{Duration, Instant};

use scripted_llm::{RecordedRequest, Reply, ScriptedLlm};
use serde_json::{Value, json};
use service_client::{Client, ClientOptions, Envelope, Status, ToolStatus};
use tserver::ServerConfig;

use crate::support::{RawConnection, ServerProcess, Solution, TestServer, admin};

/// A demo solution served with the model on and pointed at a scripted LLM.
pub(crate) struct ChatRig {
    pub(crate) llm: ScriptedLlm,
    pub(crate) solution: Solution,
    pub(crate) server: TestServer,
}

impl ChatRig {
    pub(crate) async fn start(script: Vec<Reply>, settings: &[(&str, &str)]) -> Self {
        Self::serving(ScriptedLlm::start(script).await.expect("llm"), settings).await
    }

    /// The rig around a scripted LLM already started.
    async fn serving(llm: ScriptedLlm, settings: &[(&str, &str)]) -> Self {
        let solution = Solution::demo();
        let path = solution.path.to_str().expect("utf-8");
        admin(&["settings", path, "set", "URL", &llm.url()], "");
        admin(&["settings", path, "set", "ModelEnabled", "true"], "");
        for (key, value) in settings {
            admin(&["settings", path, "set", key, value], "");
        }
        let server = TestServer::start(&solution.path, ServerConfig::default()).await;
        Self {
            llm,
            solution,
            server,
        }
    }

    pub(crate) fn posts(&self) -> Vec<Value> {
        self.llm
            .requests()
            .iter()
            .map(|request: &RecordedRequest| request.json().expect("a JSON body"))
            .collect()
    }

    pub(crate) async fn stop(self) {
        self.server.stop().await;
        drop(self.solution);
    }
}

/// Asserts the envelope is that of a turn the client cancelled.
pub(crate) fn assert_cancelled(envelope: &Envelope) {
    assert_eq!(envelope.status, Status::Truncated, "{envelope:?}");
    assert!(
        envelope
            .warnings
            .iter()
            .any(|w| w.contains("cancelled by the client")),
        "{envelope:?}"
    );
}

fn roles(post: &Value) -> Vec<&str> {
    post["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|message| message["role"].as_str().expect("role"))
        .collect()
}

fn tool_names(post: &Value) -> Vec<&str> {
    post["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|tool| tool["function"]["name"].as_str().expect("name"))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn tool_message_content(post: &Value, call_id: &str) -> Value {
    let message = post["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|message| message["role"] == "tool" && message["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("a tool message answers {call_id}"));
    serde_json::from_str(message["content"].as_str().expect("string content")).expect("JSON content")
}

fn calls(list: &[(&str, &str, Value)]) -> Reply {
    Reply::ToolCalls(
        list.iter()
            .map(|(id, name, arguments)| ((*id).to_owned(), (*name).to_owned(), arguments.to_string()))
            .collect(),
    )
}

#[tokio::test]
async fn a_multi_tool_turn_posts_the_exact_messages_at_each_step() {
    let rig = ChatRig::start(
        vec![
            Reply::tool_call("runtime_get_value", json!({"tag": "Pump1.MotorCurrent"})),
            calls(&[
                ("call_a", "runtime_get_active_alarms", json!({})),
                ("call_b", "runtime_search_uns", json!({"query": "pump flow"})),
            ]),
            Reply::text("Pump 1 draws 12.4 A with no active alarms."),
        ],
        &[("Name", "llama3.1:8b"), ("ModelOptions", "0x9e")],
    )
    .await;
    let client = rig.server.guest().await;
    let envelope = client
        .chat_envelope("What is wrong with Pump 1?")
        .await
        .expect("reply");
    assert_eq!(envelope.status, Status::Ok, "{envelope:?}");
    assert_eq!(envelope.text, "Pump 1 draws 12.4 A with no active alarms.");
    assert!(envelope.warnings.is_empty(), "{:?}", envelope.warnings);
    let trace: Vec<&str> = envelope
        .tool_trace
        .iter()
        .map(|entry| entry.name.as_str())
        .collect();
    assert_eq!(
        trace,
        [
            "runtime_get_value",
            "runtime_get_active_alarms",
            "runtime_search_uns"
        ]
    );
    let first = &envelope.tool_trace[0];
    assert_eq!(first.args, json!({"tag": "Pump1.MotorCurrent"}));
    assert_eq!(
        (first.result["value"].as_f64(), first.result["quality"].as_str()),
        (Some(12.4), Some("Good"))
    );
    assert_eq!(first.status, ToolStatus::Ok);

    let posts = rig.posts();
    assert_eq!(posts.len(), 3);
    assert_eq!(posts[0]["model"], "llama3.1:8b");
    assert_eq!(roles(&posts[0]), ["system", "user"]);
    assert_eq!(posts[0]["messages"][1]["content"], "What is wrong with Pump 1?");
    assert_eq!(
        tool_names(&posts[0]).len(),
        12,
        "0x9E offers the UNS, alarm and history tools"
    );
    assert_eq!(roles(&posts[1]), ["system", "user", "assistant", "tool"]);
    assert_eq!(posts[1]["messages"][2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(
        posts[1]["messages"][2]["tool_calls"][0]["function"]["arguments"],
        json!({"tag": "Pump1.MotorCurrent"}).to_string()
    );
    let content = tool_message_content(&posts[1], "call_1");
    assert_eq!(
        (content["ok"].as_bool(), content["result"]["value"].as_f64()),
        (Some(true), Some(12.4))
    );
    assert_eq!(
        roles(&posts[2]),
        ["system", "user", "assistant", "tool", "assistant", "tool", "tool"]
    );
    assert_eq!(
        tool_message_content(&posts[2], "call_b")["result"]["results"][0]["tag"],
        "Pump1.FlowRate"
    );
    assert!(posts.iter().all(|post| !tool_names(post).is_empty()));
    rig.stop().await;
}

#[tokio::test]
async fn past_the_cap_the_calls_are_not_run_and_a_tool_less_post_gets_the_answer() {
    let seven: Vec<(String, &str, Value)> = (0..7)
        .map(|n| {
            (
                format!("c{n}"),
                "runtime_get_value",
                json!({"tag": "Tank1.Level"}),
            )
        })
        .collect();
    let seven: Vec<(&str, &str, Value)> = seven
        .iter()
        .map(|(id, name, args)| (id.as_str(), *name, args.clone()))
        .collect();
    let rig = ChatRig::start(vec![calls(&seven), Reply::text("Tank 1 is at 62 %.")], &[]).await;
    let client = rig.server.guest().await;
    let envelope = client.chat_envelope("Tank 1 level?").await.expect("reply");
    assert_eq!(envelope.status, Status::Ok);
    assert_eq!(envelope.text, "Tank 1 is at 62 %.");
    assert_eq!(envelope.tool_trace.len(), 5, "MaxToolDispatchesPerTurn = 5");
    assert!(
        envelope.warnings.iter().any(|w| w.contains("cap (5 per turn)")),
        "{:?}",
        envelope.warnings
    );
    let posts = rig.posts();
    assert_eq!(posts.len(), 2);
    assert!(
        posts[1].get("tools").is_none(),
        "the last chance is offered no tools"
    );
    assert_eq!(tool_message_content(&posts[1], "c4")["ok"], true);
    assert_eq!(
        tool_message_content(&posts[1], "c6")["error"]["type"],
        "cap_reached"
    );
    rig.stop().await;
}

#[tokio::test]
async fn a_model_that_keeps_asking_past_a_configured_cap_ends_truncated() {
    let rig = ChatRig::start(
        vec![
            Reply::tool_call("runtime_get_value", json!({"tag": "Tank1.Level"})),
            calls(&[("c2", "runtime_get_value", json!({"tag": "Tank2.Level"}))]),
            calls(&[("c3", "runtime_get_value", json!({"tag": "Tank2.Level"}))]),
        ],
        &[("MaxToolDispatchesPerTurn", "1")],
    )
    .await;
    let client = rig.server.guest().await;
    let envelope = client.chat_envelope("Levels?").await.expect("reply");
    assert_eq!(envelope.status, Status::Truncated, "{envelope:?}");
    assert_eq!(envelope.text, "");
    assert_eq!(envelope.tool_trace.len(), 1);
    assert!(
        envelope.warnings.iter().any(|w| w.contains("no final answer")),
        "{:?}",
        envelope.warnings
    );
    let posts = rig.posts();
    assert_eq!(posts.len(), 3);
    assert!(posts[2].get("tools").is_none());
    rig.stop().await;
}

#[tokio::test]
async fn the_budget_trips_inside_a_slow_post() {
    let rig = ChatRig::start(
        vec![Reply::text("too late").after(Duration::from_secs(20))],
        &[("TimeoutSeconds", "1")],
    )
    .await;
    let client = rig.server.guest().await;
    let started = Instant::now();
    let envelope = client.chat_envelope("Anything?").await.expect("reply");
    assert_eq!(envelope.status, Status::Truncated);
    assert!(envelope.latency_ms >= 1000, "{}", envelope.latency_ms);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "cut at the budget, not the reply"
    );
    assert!(
        envelope.warnings.iter().any(|w| w.contains("budget (1s)")),
        "{:?}",
        envelope.warnings
    );
    rig.stop().await;
}

#[tokio::test]
async fn the_budget_trips_inside_a_slow_tool_and_a_panicking_tool_is_an_error_result() {
    let rig = ChatRig::start(
        vec![
            calls(&[("p1", "panicky", json!({}))]),
            Reply::tool_call("slow", json!({})),
            // Asked again after the slow tool timed out, the model is slower than what is left.
            Reply::text("never reached").after(Duration::from_millis(500)),
        ],
        &[("TimeoutSeconds", "1.5"), ("ModelOptions", "0xBE")],
    )
    .await;
    let runtime = &rig.server.runtime;
    runtime
        .register_custom_tool("slow", "Takes a minute.", json!({"type": "object"}), |_| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(json!("done"))
        })
        .expect("registers");
    runtime
        .register_custom_tool(
            "panicky",
            "Always panics.",
            json!({"type": "object"}),
            |_| async { panic!("tool bug") },
        )
        .expect("registers");
    let client = rig.server.guest().await;
    let started = Instant::now();
    let envelope = client.chat_envelope("Run them.").await.expect("reply");
    assert_eq!(envelope.status, Status::Truncated, "{envelope:?}");
    assert!(envelope.latency_ms >= 1500);
    assert!(started.elapsed() < Duration::from_secs(10));
    let panicked = &envelope.tool_trace[0];
    assert_eq!(
        (panicked.name.as_str(), panicked.status),
        ("panicky", ToolStatus::Error)
    );
    assert_eq!(panicked.result["type"], "internal");
    assert_eq!(tool_message_content(&rig.posts()[1], "p1")["ok"], false);
    // The slow tool ran the budget out: it is in the trace as timed out, not lost with the turn.
    let slow = &envelope.tool_trace[1];
    assert_eq!((slow.name.as_str(), slow.status), ("slow", ToolStatus::Error));
    assert_eq!(slow.result["type"], "timeout");
    rig.stop().await;
}

#[tokio::test]
async fn history_carries_over_resets_on_another_login_and_survives_a_failed_turn() {
    let rig = ChatRig::start(
        vec![
            Reply::text("Hello Ann."),
            Reply::status(500, json!({"error": {"message": "overloaded"}})),
            Reply::text("You are Ann."),
            Reply::text("Nice to meet you."),
        ],
        &[],
    )
    .await;
    let path = rig.solution.path.to_str().expect("utf-8");
    admin(&["users", path, "add", "operator"], "pw\n");
    let client = rig.server.guest().await;
    assert_eq!(
        client.chat_envelope("I am Ann.").await.expect("reply").status,
        Status::Ok
    );
    let failed = client.chat_envelope("Fail now.").await.expect("reply");
    assert_eq!(failed.status, Status::Error);
    assert!(failed.warnings[0].contains("HTTP 500"), "{:?}", failed.warnings);
    assert_eq!(
        client.chat_envelope("Who am I?").await.expect("reply").status,
        Status::Ok
    );
    client.logout().await.expect("logout");
    client.login("operator", "pw").await.expect("login");
    assert_eq!(
        client.chat_envelope("Hi.").await.expect("reply").status,
        Status::Ok
    );

    let posts = rig.posts();
    let contents = |post: &Value| -> Vec<String> {
        post["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .skip(1)
            .map(|message| message["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(
        contents(&posts[2]),
        ["I am Ann.", "Hello Ann.", "Who am I?"],
        "the failed turn left nothing"
    );
    assert_eq!(
        contents(&posts[3]),
        ["Hi."],
        "another user on the connection starts afresh"
    );
    rig.stop().await;
}

#[tokio::test]
async fn with_history_off_every_turn_stands_alone() {
    let rig = ChatRig::start(
        vec![Reply::text("one"), Reply::text("two")],
        &[("ModelOptions", "0x1E")],
    )
    .await;
    let client = rig.server.guest().await;
    client.chat_envelope("first").await.expect("reply");
    client.chat_envelope("second").await.expect("reply");
    assert_eq!(roles(&rig.posts()[1]), ["system", "user"]);
    rig.stop().await;
}

#[tokio::test]
async fn two_connections_never_see_each_others_history() {
    let rig = ChatRig::start(
        vec![
            Reply::text("a1"),
            Reply::text("b1"),
            Reply::text("a2"),
            Reply::text("b2"),
        ],
        &[],
    )
    .await;
    let (a, b) = (rig.server.guest().await, rig.server.guest().await);
    a.chat_envelope("alpha").await.expect("reply");
    b.chat_envelope("beta").await.expect("reply");
    a.chat_envelope("alpha again").await.expect("reply");
    b.chat_envelope("beta again").await.expect("reply");
    let posts = rig.posts();
    let text = |post: &Value| post["messages"].to_string();
    assert!(text(&posts[2]).contains("alpha") && !text(&posts[2]).contains("beta"));
    assert!(text(&posts[3]).contains("beta") && !text(&posts[3]).contains("alpha"));
    rig.stop().await;
}

#[tokio::test]
async fn a_disconnected_clients_turn_is_cancelled_and_its_session_removed() {
    let rig = ChatRig::start(
        vec![
            Reply::tool_call("runtime_get_value", json!({"tag": "Tank1.Level"}))
                .after(Duration::from_millis(800)),
            Reply::text("nobody is listening"),
        ],
        &[],
    )
    .await;
    let client = rig.server.guest().await;
    let pending = tokio::spawn(async move { client.chat_envelope("slow question").await });
    let deadline = Instant::now() + Duration::from_secs(10);
    while rig.llm.requests().is_empty() {
        assert!(Instant::now() < deadline, "the first POST arrives");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    pending.abort();
    let _ = pending.await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while rig.server.runtime.local_ai().chat_sessions() > 0 {
        assert!(
            Instant::now() < deadline,
            "the session is removed when the connection closes"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Past the moment the model would have asked for its tool: no second POST was made.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(rig.llm.requests().len(), 1);
    rig.stop().await;
}

#[tokio::test]
async fn hooks_rewrite_fail_and_panic_without_changing_the_status() {
    let rig = ChatRig::start(vec![Reply::text("pump 1 is fine")], &[]).await;
    let ai = rig.server.runtime.local_ai();
    ai.on_before_chat("broken", |_text| async { Err("database down".to_owned()) });
    ai.on_before_chat("shout", |text| async move { Ok(text.to_uppercase()) });
    ai.on_after_chat_reply("panicky", |_text| async { panic!("hook bug") });
    ai.on_after_chat_reply("sign", |text| async move { Ok(format!("{text} (checked)")) });
    let client = rig.server.guest().await;
    let envelope = client.chat_envelope("how is pump 1?").await.expect("reply");
    assert_eq!(envelope.status, Status::Ok);
    assert_eq!(envelope.text, "pump 1 is fine (checked)");
    assert_eq!(
        envelope.warnings,
        [
            "OnBeforeChat handler 'broken' failed: database down",
            "OnAfterChatReply handler 'panicky' panicked"
        ]
    );
    assert_eq!(rig.posts()[0]["messages"][1]["content"], "HOW IS PUMP 1?");
    rig.stop().await;
}

#[tokio::test]
async fn text_channel_calls_malformed_arguments_and_unknown_tools_are_answered_as_tool_results() {
    let rig = ChatRig::start(
        vec![
            Reply::text("<tool_call>{\"name\": \"runtime_get_value\", \"arguments\": {\"tag\": \"Tank1.Level\"}}</tool_call>"),
            Reply::ToolCalls(vec![
                ("bad".into(), "runtime_get_value".into(), "{\"tag\": \"Tank1".into()),
                ("ghost".into(), "delete_the_plant".into(), "{}".into()),
            ]),
            Reply::text("Tank 1 is at 62 %."),
        ],
        &[],
    )
    .await;
    let client = rig.server.guest().await;
    let envelope = client.chat_envelope("Tank 1?").await.expect("reply");
    assert_eq!(envelope.status, Status::Ok, "tool failures never flip the status");
    assert_eq!(envelope.text, "Tank 1 is at 62 %.");
    let trace = &envelope.tool_trace;
    assert_eq!(trace.len(), 3);
    assert_eq!(
        (trace[0].status, trace[0].result["value"].as_f64()),
        (ToolStatus::Ok, Some(62.0))
    );
    assert_eq!(
        trace[1].args,
        json!("{\"tag\": \"Tank1"),
        "unparsable arguments are traced raw"
    );
    assert_eq!(trace[1].result["type"], "invalid_arguments");
    assert_eq!(
        (trace[2].name.as_str(), &trace[2].result["type"]),
        ("delete_the_plant", &json!("unknown_tool"))
    );

    let posts = rig.posts();
    let second = &posts[1]["messages"];
    assert_eq!(second[2]["role"], "assistant");
    assert!(
        second[2]["tool_calls"].is_array(),
        "a text-channel call is stored as a native call"
    );
    assert!(!posts[1].to_string().contains("<tool_call>"));
    let third = posts[2].to_string();
    assert!(
        !third.contains("{\\\"tag\\\": \\\"Tank1\""),
        "malformed arguments are never echoed"
    );
    assert!(
        !third.contains("delete_the_plant"),
        "unknown names are never echoed"
    );
    assert_eq!(
        tool_message_content(&posts[2], "ghost")["error"]["type"],
        "unknown_tool"
    );
    rig.stop().await;
}

#[tokio::test]
async fn tclient_repl_chats_with_tools_against_the_demo_plant() {
    use clap::Parser;
    let rig = ChatRig::start(
        vec![
            Reply::tool_call("runtime_get_value", json!({"tag": "Pump1.MotorCurrent"})),
            Reply::text("Pump 1 motor current is 12.4 A."),
            Reply::text("Anything else?"),
        ],
        &[],
    )
    .await;
    let addr = rig.server.addr.to_string();
    let cli = tclient::cli::Cli::try_parse_from(["tclient", "--addr", &addr, "repl"]).expect("args");
    let mut output = Vec::new();
    tclient::cli::run(
        &cli,
        &mut "What is the motor current of Pump 1?\nThanks.\n".as_bytes(),
        &mut output,
        Default::default(),
    )
    .await
    .expect("repl runs");
    let output = String::from_utf8(output).expect("utf-8");
    let replies: Vec<Envelope> = output
        .lines()
        .map(|line| Envelope::from_json(line).expect("one envelope per line"))
        .collect();
    assert_eq!(replies.len(), 2, "{output}");
    assert_eq!(replies[0].text, "Pump 1 motor current is 12.4 A.");
    assert_eq!(replies[0].tool_trace[0].result["value"], 12.4);
    assert_eq!(
        roles(&rig.posts()[2]),
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    rig.stop().await;
}

#[tokio::test]
async fn a_malformed_query_and_an_unreachable_endpoint_are_error_envelopes() {
    let rig = ChatRig::start(vec![], &[]).await;
    let client = rig.server.guest().await;
    let malformed = client
        .chat_envelope(r#"{"system": "no user text"}"#)
        .await
        .expect("reply");
    assert_eq!((malformed.status, malformed.latency_ms), (Status::Error, 0));
    assert!(
        malformed.warnings[0].starts_with("malformed query"),
        "{:?}",
        malformed.warnings
    );
    assert!(rig.llm.requests().is_empty());

    // A port that was free a moment ago: nothing listens there.
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let url = format!("http://127.0.0.1:{closed_port}/v1/chat/completions");
    admin(
        &[
            "settings",
            rig.solution.path.to_str().expect("utf-8"),
            "set",
            "URL",
            &url,
        ],
        "",
    );
    let unreachable = client.chat_envelope("Hello?").await.expect("reply");
    assert_eq!(unreachable.status, Status::Error);
    assert_eq!(
        unreachable.warnings,
        [format!("LLM endpoint HTTP error: Connection refused ({url})")]
    );
    rig.stop().await;
}

#[tokio::test]
async fn turns_of_one_connection_run_one_at_a_time_in_arrival_order() {
    use tserver_proto::v1::{ChatRequest, client_frame, server_frame};
    let rig = ChatRig::start(
        vec![
            Reply::text("first answer").after(Duration::from_millis(300)),
            Reply::text("second answer"),
            Reply::text("third answer"),
        ],
        &[],
    )
    .await;
    let mut raw = crate::support::RawConnection::guest(rig.server.addr).await;
    for (call_id, text) in [(1, "one"), (2, "two"), (3, "three")] {
        let body = client_frame::Body::Chat(ChatRequest {
            query_json: text.to_owned(),
            stream: false,
        });
        raw.send(call_id, body).await;
    }
    let mut answered = Vec::new();
    for _ in 0..3 {
        let frame = raw.receive().await.expect("a reply");
        let Some(server_frame::Body::Chat(reply)) = frame.body else {
            panic!("a chat reply, got {frame:?}");
        };
        let envelope = Envelope::from_json(&reply.reply_json).expect("envelope");
        answered.push((frame.call_id, envelope.text));
    }
    assert_eq!(
        answered,
        [
            (1, "first answer".to_owned()),
            (2, "second answer".to_owned()),
            (3, "third answer".to_owned())
        ]
    );
    let posts = rig.posts();
    let users: Vec<Vec<&str>> = posts
        .iter()
        .map(|post| {
            post["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .filter(|message| message["role"] == "user")
                .filter_map(|message| message["content"].as_str())
                .collect()
        })
        .collect();
    assert_eq!(
        users,
        [vec!["one"], vec!["one", "two"], vec!["one", "two", "three"]]
    );
    rig.stop().await;
}

#[tokio::test]
async fn the_history_is_cut_to_max_history_messages_and_a_cut_answer_is_noted() {
    let cut = json!({"choices": [{"message": {"role": "assistant", "content": "Tank 2 is at"},
                                  "finish_reason": "length"}]});
    let rig = ChatRig::start(
        vec![
            Reply::text("a1"),
            Reply::text("a2"),
            Reply::Json {
                status: 200,
                body: cut,
            },
        ],
        &[("MaxHistoryMessages", "2")],
    )
    .await;
    let client = rig.server.guest().await;
    client.chat_envelope("u1").await.expect("reply");
    client.chat_envelope("u2").await.expect("reply");
    let third = client.chat_envelope("u3").await.expect("reply");
    assert_eq!((third.status, third.text.as_str()), (Status::Ok, "Tank 2 is at"));
    assert!(
        third.warnings.iter().any(|w| w.contains("finish_reason: length")),
        "{:?}",
        third.warnings
    );
    let posts = rig.posts();
    let contents: Vec<&str> = posts[2]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .skip(1)
        .filter_map(|message| message["content"].as_str())
        .collect();
    assert_eq!(
        contents,
        ["u2", "a2", "u3"],
        "only the newest whole turn fits in two messages"
    );
    rig.stop().await;
}

/// The stand-in's `--mode tool`: a turn's first POST asks for one tag, the POST carrying the
/// tool result gets the answer.
fn one_tool_call_per_turn(request: &RecordedRequest) -> Reply {
    let carries_result = request.json().is_some_and(|body| {
        body["messages"]
            .as_array()
            .and_then(|messages| messages.last())
            .is_some_and(|last| last["role"] == "tool")
    });
    if carries_result {
        Reply::text("Pump1.MotorCurrent is normal.")
    } else {
        Reply::tool_call("runtime_get_value", json!({"tag": "Pump1.MotorCurrent"}))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_to_the_model_never_outnumber_the_posts_in_flight() {
    // Sixteen panels chat at once, each turn making two POSTs back to back: whatever the
    // scheduling, at most sixteen POSTs are ever in flight, so at most sixteen connections may
    // be opened, and a turn's second POST must reuse a connection rather than open one.
    // (reqwest's pool, used before, opened up to 103 for 64 turns in flight under the bench's
    // load: a turn's next POST raced its connection's return to the pool.)
    const PANELS: usize = 16;
    const TURNS: usize = 20;
    let llm = ScriptedLlm::start_with(one_tool_call_per_turn)
        .await
        .expect("llm");
    let rig = ChatRig::serving(llm, &[]).await;
    let mut panels = tokio::task::JoinSet::new();
    for _ in 0..PANELS {
        let client = rig.server.guest().await;
        panels.spawn(async move {
            for turn in 0..TURNS {
                let envelope = client
                    .chat_envelope(&format!("How is Pump 1? ({turn})"))
                    .await
                    .expect("reply");
                assert_eq!(envelope.status, Status::Ok, "{envelope:?}");
                assert_eq!(envelope.tool_trace.len(), 1, "{envelope:?}");
            }
        });
    }
    while let Some(panel) = panels.join_next().await {
        panel.expect("a panel's turns");
    }
    assert_eq!(rig.llm.requests().len(), 2 * PANELS * TURNS);
    let opened = rig.llm.connections();
    assert!(
        (1..=PANELS).contains(&opened),
        "{opened} connections opened for {PANELS} turns in flight"
    );
    rig.stop().await;
}

#[tokio::test]
async fn an_endpoint_the_pool_does_not_serve_goes_through_reqwest() {
    // A user name in the URL (like HTTPS, or a proxy in the environment) sends the chat path's
    // POSTs through reqwest, which turns it into Basic authorization; the turn is the same.
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("runtime_get_value", json!({"tag": "Pump1.MotorCurrent"})),
        Reply::text("Pump 1 is fine."),
    ])
    .await
    .expect("llm");
    let url = llm.url().replace("http://", "http://panel:s3cret@");
    let rig = ChatRig::serving(llm, &[("URL", &url)]).await;
    let client = rig.server.guest().await;
    let envelope = client.chat_envelope("How is Pump 1?").await.expect("reply");
    assert_eq!(envelope.status, Status::Ok, "{envelope:?}");
    assert_eq!(envelope.text, "Pump 1 is fine.");
    assert_eq!(envelope.tool_trace.len(), 1, "{envelope:?}");
    let requests = rig.llm.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.header("authorization"), Some("Basic cGFuZWw6czNjcmV0"));
    }
    assert_eq!(roles(&rig.posts()[1]), ["system", "user", "assistant", "tool"]);

    // Its failures read as the pool's do.
    let path = rig.solution.path.to_str().expect("utf-8");
    admin(
        &[
            "settings",
            path,
            "set",
            "URL",
            "http://panel:s3cret@127.0.0.1:1/v1/chat/completions",
        ],
        "",
    );
    let refused = client.chat_envelope("Again?").await.expect("reply");
    assert_eq!(refused.status, Status::Error, "{refused:?}");
    assert!(
        refused
            .warnings
            .first()
            .is_some_and(|warning| warning.contains("Connection refused")),
        "{refused:?}"
    );

    // reqwest follows redirects unless told not to; through it a redirect is refused too.
    let redirecting = ScriptedLlm::start(vec![
        Reply::Custom {
            status: 301,
            headers: vec![("Location".into(), "/v2/chat/completions".into())],
            body: Vec::new(),
        },
        Reply::text("answered a GET"),
    ])
    .await
    .expect("llm");
    let url = redirecting.url().replace("http://", "http://panel:s3cret@");
    admin(&["settings", path, "set", "URL", &url], "");
    let redirected = client.chat_envelope("Once more?").await.expect("reply");
    assert_eq!(redirected.status, Status::Error, "{redirected:?}");
    assert!(
        redirected.warnings[0].contains("HTTP 301 Moved Permanently, a redirect to /v2/chat/completions"),
        "{redirected:?}"
    );
    assert_eq!(redirecting.requests().len(), 1, "the redirect was not followed");
    rig.stop().await;
}

#[tokio::test]
async fn a_proxy_in_tservers_environment_carries_the_chat_posts() {
    // The pool speaks to model servers directly, so with HTTP_PROXY set the chat path must
    // leave plain-HTTP endpoints to reqwest, which sends them through the proxy. The proxy
    // here is a stand-in that answers itself; the model's own address refuses connections,
    // so only the proxy can have answered.
    let proxy = ScriptedLlm::start(vec![
        Reply::tool_call("runtime_get_value", json!({"tag": "Pump1.MotorCurrent"})),
        Reply::text("Pump 1 is fine, via the proxy."),
    ])
    .await
    .expect("proxy");
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8");
    let model_url = "http://127.0.0.1:1/v1/chat/completions";
    admin(&["settings", path, "set", "URL", model_url], "");
    admin(&["settings", path, "set", "ModelEnabled", "true"], "");
    let proxy_url = format!("http://{}", proxy.addr());
    let server = ServerProcess::start(
        &solution.path,
        &[],
        &[("HTTP_PROXY", &proxy_url), ("NO_PROXY", ""), ("no_proxy", "")],
    );
    let client = Client::connect(server.addr, ClientOptions::default())
        .await
        .expect("connects");
    client.login("guest", "").await.expect("logs in");
    let envelope = client.chat_envelope("How is Pump 1?").await.expect("reply");
    assert_eq!(envelope.status, Status::Ok, "{envelope:?}");
    assert_eq!(envelope.text, "Pump 1 is fine, via the proxy.");
    assert_eq!(envelope.tool_trace.len(), 1, "{envelope:?}");
    let requests = proxy.requests();
    assert_eq!(requests.len(), 2, "both POSTs of the turn went through the proxy");
    for request in &requests {
        // A proxied request names the whole target URL in its request line.
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, model_url);
    }
    drop(server);
    proxy.stop().await;
}

#[tokio::test]
async fn a_half_closed_client_still_gets_its_chat_replies() {
    // `printf ... | nc`: the client sends its calls, then shuts its sending side and reads.
    let rig = ChatRig::start(
        vec![
            Reply::tool_call("runtime_get_value", json!({"tag": "Pump1.MotorCurrent"}))
                .after(Duration::from_millis(200)),
            Reply::text("Pump 1 draws 12.4 A.").after(Duration::from_millis(200)),
        ],
        &[],
    )
    .await;
    let mut raw = RawConnection::guest(rig.server.addr).await;
    raw.send(
        2,
        tserver_proto::v1::client_frame::Body::Chat(tserver_proto::v1::ChatRequest {
            query_json: "How is Pump 1?".into(),
            stream: false,
        }),
    )
    .await;
    raw.send(
        3,
        tserver_proto::v1::client_frame::Body::Ping(tserver_proto::v1::Ping { nonce: 9 }),
    )
    .await;
    raw.shutdown_write().await;
    let mut answered = Vec::new();
    while let Some(frame) = raw.receive().await {
        if let Some(tserver_proto::v1::server_frame::Body::Chat(reply)) = &frame.body {
            let envelope = Envelope::from_json(&reply.reply_json).expect("an envelope");
            assert_eq!(envelope.status, Status::Ok, "{envelope:?}");
            assert_eq!(envelope.text, "Pump 1 draws 12.4 A.");
        }
        answered.push(frame.call_id);
    }
    assert_eq!(
        answered,
        [3, 2],
        "the ping at once, the chat when it is done, then the close"
    );
    assert_eq!(rig.llm.requests().len(), 2, "the whole turn ran");
    rig.stop().await;
}

#[tokio::test]
async fn a_client_that_is_gone_stops_costing_model_time_once_a_reply_bounces() {
    // The first turn's answer is written to a client that has closed its socket; the reset
    // that comes back cancels the second turn at once, instead of after its whole tool loop.
    let slow_call = || {
        Reply::tool_call("runtime_get_value", json!({"tag": "Pump1.MotorCurrent"}))
            .after(Duration::from_millis(300))
    };
    let rig = ChatRig::start(
        vec![
            Reply::text("First answer.").after(Duration::from_millis(200)),
            slow_call(),
            slow_call(),
            slow_call(),
            slow_call(),
            Reply::text("Second answer."),
        ],
        &[],
    )
    .await;
    let mut raw = RawConnection::guest(rig.server.addr).await;
    for (call_id, question) in [(2, "First?"), (3, "Second?")] {
        raw.send(
            call_id,
            tserver_proto::v1::client_frame::Body::Chat(tserver_proto::v1::ChatRequest {
                query_json: question.into(),
                stream: false,
            }),
        )
        .await;
    }
    drop(raw);
    let deadline = Instant::now() + Duration::from_secs(5);
    while rig.server.runtime.local_ai().chat_sessions() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        rig.server.runtime.local_ai().chat_sessions(),
        0,
        "the session was dropped"
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    let posts = rig.llm.requests().len();
    assert!(
        posts <= 2,
        "{posts} POSTs: the second turn went on after its client was known to be gone"
    );
    rig.stop().await;
}

#[tokio::test]
async fn transcripts_are_bounded_by_bytes_per_connection_and_for_the_whole_cache() {
    let llm = ScriptedLlm::start_with(|_: &RecordedRequest| Reply::text("Noted."))
        .await
        .expect("llm");
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8");
    admin(&["settings", path, "set", "URL", &llm.url()], "");
    admin(&["settings", path, "set", "ModelEnabled", "true"], "");
    let budget = localai::TranscriptBudget {
        session_bytes: 16 * 1024,
        cache_bytes: 40 * 1024,
    };
    let server = TestServer::start(
        &solution.path,
        ServerConfig::default().with_transcript_budget(budget),
    )
    .await;
    let local_ai = server.runtime.local_ai().clone();
    let history_of = |post: &Value| roles(post).len() - 1;

    // A question larger than the connection's budget is answered, not remembered.
    let panel = server.guest().await;
    let huge = panel.chat_envelope(&"q".repeat(20_000)).await.expect("reply");
    assert_eq!(huge.status, Status::Ok);
    assert!(
        huge.warnings.iter().any(|w| w.contains("not remembered")),
        "{:?}",
        huge.warnings
    );
    panel.chat_envelope("Small one?").await.expect("reply");
    let posts: Vec<Value> = llm.requests().iter().filter_map(RecordedRequest::json).collect();
    assert_eq!(
        history_of(&posts[1]),
        1,
        "the huge turn was not sent again: {:?}",
        roles(&posts[1])
    );

    // Turns of 5 KB each: the connection keeps at most 16 KiB of them, oldest dropped first.
    for turn in 0..6 {
        panel
            .chat_envelope(&format!("{turn} {}", "m".repeat(5_000)))
            .await
            .expect("reply");
        assert!(
            local_ai.transcript_bytes() <= budget.session_bytes,
            "{}",
            local_ai.transcript_bytes()
        );
    }
    let last = llm
        .requests()
        .last()
        .and_then(RecordedRequest::json)
        .expect("a POST");
    assert!(
        history_of(&last) >= 4,
        "recent turns are kept: {:?}",
        roles(&last)
    );

    // Four panels of 16 KiB each would be 64 KiB: the cache keeps 40 KiB, taken from the
    // panels used longest ago.
    let mut panels = Vec::new();
    for _ in 0..3 {
        let other = server.guest().await;
        for turn in 0..4 {
            other
                .chat_envelope(&format!("{turn} {}", "n".repeat(5_000)))
                .await
                .expect("reply");
            assert!(
                local_ai.transcript_bytes() <= budget.cache_bytes,
                "{}",
                local_ai.transcript_bytes()
            );
        }
        panels.push(other);
    }
    assert!(
        local_ai.transcript_bytes() > budget.cache_bytes / 2,
        "the budget is used, not wasted"
    );
    drop(panels);
    drop(panel);
    let deadline = Instant::now() + Duration::from_secs(5);
    while local_ai.transcript_bytes() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        local_ai.transcript_bytes(),
        0,
        "closed connections give their bytes back"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_turns_token_usage_is_summed_over_its_posts_and_carried_beside_the_envelope() {
    let with_usage = |mut body: Value, usage: Value| {
        body["usage"] = usage;
        Reply::status(200, body)
    };
    let rig = ChatRig::start(
        vec![
            with_usage(
                scripted_llm::tool_calls_completion(&[(
                    "c1".into(),
                    "runtime_get_value".into(),
                    r#"{"tag": "Pump1.MotorCurrent"}"#.into(),
                )]),
                json!({"prompt_tokens": 300, "completion_tokens": 20,
                       "prompt_tokens_details": {"cached_tokens": 256}}),
            ),
            // Ollama's own counters, in the shape of its native API: no `usage` object.
            Reply::status(200, {
                let mut body = scripted_llm::completion("Pump 1 draws 12.4 A.");
                body.as_object_mut().map(|object| object.remove("usage"));
                body["prompt_eval_count"] = json!(350);
                body["eval_count"] = json!(12);
                body
            }),
            // `usage: {}` counts nothing, but the request still counts.
            with_usage(scripted_llm::completion("Still fine."), json!({})),
        ],
        &[],
    )
    .await;
    let client = rig.server.guest().await;
    let reply = client.chat_reply("How is Pump 1?").await.expect("reply");
    let usage = reply.usage.expect("the turn reached the model");
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cached_tokens,
            usage.reasoning_tokens,
            usage.model_requests
        ),
        (650, 32, 256, 0, 2)
    );
    let envelope = Envelope::from_json(&reply.reply_json).expect("the envelope");
    assert_eq!(envelope.text, "Pump 1 draws 12.4 A.");
    let zero = client
        .chat_reply("And now?")
        .await
        .expect("reply")
        .usage
        .expect("usage");
    assert_eq!((zero.prompt_tokens, zero.model_requests), (0, 1));

    // A turn refused at the gate never reached the model: no usage at all.
    let path = rig.solution.path.to_str().expect("utf-8");
    admin(&["settings", path, "set", "ModelEnabled", "false"], "");
    assert_eq!(client.chat_reply("Closed?").await.expect("reply").usage, None);
    rig.stop().await;
}

/// The chunks of a streamed turn that calls `runtime_get_value` in fragments.
pub(crate) fn streamed_tool_call() -> Reply {
    let chunk = |delta: Value| json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
    Reply::sse(&[
        chunk(json!({"role": "assistant", "content": null})),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "s1", "type": "function", "function": {"name": "runtime_get_value", "arguments": ""}}]}),
        ),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"tag\": \"Pump1"}}]})),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": ".MotorCurrent\"}"}}]})),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 200, "completion_tokens": 15}}),
    ])
}

/// The chunks of a streamed answer.
pub(crate) fn streamed_answer(text: &str) -> Reply {
    let words: Vec<Value> = text
        .split_inclusive(' ')
        .map(|word| json!({"choices": [{"index": 0, "delta": {"content": word}, "finish_reason": null}]}))
        .chain([json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 260, "completion_tokens": 9}})])
        .collect();
    Reply::sse(&words)
}

#[tokio::test]
async fn a_streamed_turn_gives_the_envelope_a_plain_one_gives() {
    let rig = ChatRig::start(
        vec![
            streamed_tool_call(),
            streamed_answer("Pump 1 draws 12.4 A."),
            Reply::tool_call("runtime_get_value", json!({"tag": "Pump1.MotorCurrent"})),
            Reply::text("Pump 1 draws 12.4 A."),
        ],
        &[],
    )
    .await;
    let streamed_client = rig.server.guest().await;
    let streamed = streamed_client.chat_reply("How is Pump 1?").await.expect("reply");
    let plain_client = rig.server.guest().await;
    let plain = plain_client.chat_reply("How is Pump 1?").await.expect("reply");
    let streamed_envelope = Envelope::from_json(&streamed.reply_json).expect("envelope");
    let plain_envelope = Envelope::from_json(&plain.reply_json).expect("envelope");
    let comparable = |envelope: &Envelope| {
        (
            envelope.text.clone(),
            envelope.status,
            envelope.warnings.clone(),
            envelope
                .tool_trace
                .iter()
                .map(|entry| (entry.name.clone(), entry.args.clone(), entry.status))
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(comparable(&streamed_envelope), comparable(&plain_envelope));
    assert_eq!(streamed_envelope.text, "Pump 1 draws 12.4 A.");
    assert_eq!(
        streamed.usage.map(|usage| usage.prompt_tokens),
        Some(460),
        "usage from the streams"
    );
    let posts = rig.posts();
    assert_eq!(posts[0]["stream"], true, "the chat path asks for a stream");
    assert_eq!(posts[0]["stream_options"]["include_usage"], true);
    // The streamed call went into the history as a whole call, for the next POST.
    assert_eq!(
        posts[1]["messages"][2]["tool_calls"][0]["function"]["arguments"],
        "{\"tag\":\"Pump1.MotorCurrent\"}"
    );
    rig.stop().await;
}

#[tokio::test]
async fn ollamas_native_stream_is_read_too() {
    let rig = ChatRig::start(
        vec![
            Reply::ndjson(&[json!({"message": {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "runtime_get_value", "arguments": {"tag": "Tank1.Level"}}}]}, "done": true,
                "done_reason": "stop", "prompt_eval_count": 30, "eval_count": 5})]),
            Reply::ndjson(&[
                json!({"message": {"role": "assistant", "content": "Tank 1 is "}, "done": false}),
                json!({"message": {"role": "assistant", "content": "filling."}, "done": true, "prompt_eval_count": 50, "eval_count": 4}),
            ]),
        ],
        &[],
    )
    .await;
    let client = rig.server.guest().await;
    let reply = client.chat_reply("Tank 1?").await.expect("reply");
    let envelope = Envelope::from_json(&reply.reply_json).expect("envelope");
    assert_eq!(
        (envelope.status, envelope.text.as_str()),
        (Status::Ok, "Tank 1 is filling.")
    );
    assert_eq!(envelope.tool_trace[0].args, json!({"tag": "Tank1.Level"}));
    assert_eq!(
        reply
            .usage
            .map(|usage| (usage.prompt_tokens, usage.completion_tokens)),
        Some((80, 9))
    );
    rig.stop().await;
}

#[tokio::test]
async fn a_server_that_will_not_stream_with_tools_is_asked_without_streaming_from_then_on() {
    let rig = ChatRig::start(
        vec![
            Reply::status(500, json!({"error": {"code": 500, "message": "Cannot use tools with stream", "type": "server_error"}})),
            Reply::text("Answered without streaming."),
            Reply::text("Again without streaming."),
        ],
        &[],
    )
    .await;
    let client = rig.server.guest().await;
    let first = client.chat_reply("How is Pump 1?").await.expect("reply");
    let envelope = Envelope::from_json(&first.reply_json).expect("envelope");
    assert_eq!(
        (envelope.status, envelope.text.as_str()),
        (Status::Ok, "Answered without streaming.")
    );
    assert!(
        envelope.warnings.is_empty(),
        "a fallback is no news to the operator: {:?}",
        envelope.warnings
    );
    assert_eq!(first.usage.map(|usage| usage.model_requests), Some(2));
    let second = client.chat_envelope("And now?").await.expect("reply");
    assert_eq!(second.text, "Again without streaming.");
    let streams: Vec<Value> = rig.posts().iter().map(|post| post["stream"].clone()).collect();
    assert_eq!(
        streams,
        [json!(true), json!(false), json!(false)],
        "remembered for the next turn"
    );
    rig.stop().await;
}

#[tokio::test]
async fn a_cancelled_turn_stops_at_once_answers_truncated_and_the_connection_goes_on() {
    let rig = ChatRig::start(
        vec![
            Reply::tool_call("runtime_get_value", json!({"tag": "Pump1.MotorCurrent"})),
            // The model thinks for a long time: the cancel arrives meanwhile.
            Reply::text("far too late").after(Duration::from_secs(20)),
            Reply::text("Next answer."),
        ],
        &[],
    )
    .await;
    let client = rig.server.guest().await;
    let pending = client.send_chat("How is Pump 1?").await.expect("sent");
    let deadline = Instant::now() + Duration::from_secs(10);
    while rig.llm.requests().len() < 2 {
        assert!(Instant::now() < deadline, "the second POST arrives");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    assert!(
        client.cancel(pending.call_id).await.expect("cancel answered"),
        "it was in flight"
    );
    let reply = match pending
        .reply()
        .await
        .expect("the cancelled call is still answered")
    {
        tserver_proto::v1::server_frame::Body::Chat(reply) => reply,
        other => panic!("expected a chat reply, got {other:?}"),
    };
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stopped at once, not after the model"
    );
    let envelope = Envelope::from_json(&reply.reply_json).expect("envelope");
    assert_cancelled(&envelope);
    assert_eq!(
        envelope.tool_trace.len(),
        1,
        "the dispatch done before the cancel is reported"
    );
    assert_eq!(reply.usage.map(|usage| usage.model_requests), Some(2));
    // Cancelling it again, or a call that never was, cancels nothing.
    assert!(!client.cancel(pending_id_of_nothing()).await.expect("answered"));
    // The connection goes on; the transcript kept the completed tool exchange, as a turn cut
    // short keeps it.
    let next = client.chat_envelope("And now?").await.expect("reply");
    assert_eq!(next.text, "Next answer.");
    assert_eq!(
        roles(&rig.posts()[2]),
        ["system", "user", "assistant", "tool", "user"],
        "the question and its completed exchange were kept"
    );
    rig.stop().await;
}

/// A call id no call of the test uses.
fn pending_id_of_nothing() -> u64 {
    u64::MAX - 7
}

#[tokio::test]
async fn a_model_servers_refusal_to_stream_cannot_forge_log_lines() {
    let llm = ScriptedLlm::start(vec![
        Reply::status(
            500,
            json!({"error": {"code": 500, "message": "Cannot use tools with stream\nforged line", "type": "server_error"}}),
        ),
        Reply::text("Answered without streaming."),
    ])
    .await
    .expect("llm");
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8");
    admin(&["settings", path, "set", "URL", &llm.url()], "");
    admin(&["settings", path, "set", "ModelEnabled", "true"], "");
    let server = ServerProcess::start(&solution.path, &[], &[]);
    let client = Client::connect(server.addr, ClientOptions::default())
        .await
        .expect("connects");
    client.login("guest", "").await.expect("logs in");
    let envelope = client.chat_envelope("How is Pump 1?").await.expect("reply");
    assert_eq!(envelope.text, "Answered without streaming.", "{envelope:?}");
    // The log is written by another thread of the process: give it a moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = server.log();
    assert!(
        log.lines.iter().any(|line| line.contains("refuses to stream")),
        "the fallback is logged: {:#?}",
        log.lines
    );
    assert!(
        !log.lines.iter().any(|line| line.starts_with("forged")),
        "a newline in the model server's message cannot start a log line: {:#?}",
        log.lines
    );
    drop(server);
    llm.stop().await;
}
