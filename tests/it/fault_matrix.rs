//! The upstream fault matrix: every way a model server can misbehave, times both Local AI
//! paths, asserting status, warning, latency within the budget plus a margin, and what the chat
//! transcript holds afterwards (seen in the next turn's POST).

use std::time::{Duration, Instant};

use scripted_llm::{Reply, ScriptedLlm, StreamEnd};
use serde_json::{Value, json};
use service_client::{Client, Envelope, Status, ToolStatus};
use tserver::ServerConfig;

use crate::support::{Solution, TestServer, admin};

/// The Local AI budget every row runs under.
const BUDGET: Duration = Duration::from_millis(1500);
/// How far past the budget an envelope may report (the turn notices the budget, then answers).
const LATENCY_MARGIN: Duration = Duration::from_millis(1000);
/// How far past the budget the caller may wait in wall-clock time (a slow CI machine).
const WALL_MARGIN: Duration = Duration::from_secs(4);
/// The atomic path's answer to a model that asks for tools.
const NO_TOOLS: &str = "the atomic path offers no tools";

/// Where a row's model lives.
enum Upstream {
    /// The scripted LLM, answering with these replies in order.
    Script(Vec<Reply>),
    /// A loopback port nothing listens on.
    Refused,
    /// A host name the resolver refuses at once (a label over 63 bytes: no query is sent).
    Unresolvable,
}

/// What one path must answer.
#[derive(Clone, Copy)]
struct Expect {
    status: Status,
    /// A piece of the first warning (empty: no warning expected).
    warning: &'static str,
    /// Whether the turn runs into the budget (then it takes at least the budget).
    slow: bool,
}

/// One behaviour of the model server.
struct Case {
    name: &'static str,
    upstream: fn() -> Upstream,
    chat: Expect,
    /// Messages the chat transcript keeps from the faulty turn.
    kept: usize,
    /// Tool statuses in the chat turn's trace, in order.
    trace: &'static [ToolStatus],
    atomic: Expect,
}

const fn error(warning: &'static str) -> Expect {
    Expect {
        status: Status::Error,
        warning,
        slow: false,
    }
}

const fn budget_exceeded() -> Expect {
    Expect {
        status: Status::Truncated,
        warning: "budget",
        slow: true,
    }
}

const fn ok(warning: &'static str) -> Expect {
    Expect {
        status: Status::Ok,
        warning,
        slow: false,
    }
}

fn script(replies: Vec<Reply>) -> Upstream {
    Upstream::Script(replies)
}

fn raw(status: u16, content_type: &str, body: &[u8]) -> Reply {
    Reply::Raw {
        status,
        content_type: content_type.to_owned(),
        body: body.to_vec(),
    }
}

fn completion_bytes() -> Vec<u8> {
    scripted_llm::completion("The pump is fine.")
        .to_string()
        .into_bytes()
}

fn value_call(arguments: &str) -> Reply {
    Reply::ToolCalls(vec![("c1".into(), "runtime_get_value".into(), arguments.into())])
}

fn cases() -> Vec<Case> {
    use ToolStatus::{Error as ToolError, Ok as ToolOk};
    let http = "LLM endpoint HTTP error";
    vec![
        Case {
            name: "connection refused",
            upstream: || Upstream::Refused,
            chat: error("Connection refused"),
            kept: 0,
            trace: &[],
            atomic: error("Connection refused"),
        },
        Case {
            name: "connection reset",
            upstream: || script(vec![Reply::Reset]),
            chat: error(http),
            kept: 0,
            trace: &[],
            atomic: error(http),
        },
        Case {
            name: "closed without an answer",
            upstream: || script(vec![Reply::Close]),
            chat: error(http),
            kept: 0,
            trace: &[],
            atomic: error(http),
        },
        Case {
            name: "host name does not resolve",
            upstream: || Upstream::Unresolvable,
            chat: error("cannot resolve the host name"),
            kept: 0,
            trace: &[],
            atomic: error("cannot resolve the host name"),
        },
        Case {
            name: "400, llama.cpp error shape",
            upstream: || {
                script(vec![Reply::status(
                    400,
                    json!({"error": {"code": 400, "message": "the request exceeds the available context size", "type": "exceed_context_size_error"}}),
                )])
            },
            chat: error("HTTP 400 Bad Request: the request exceeds the available context size"),
            kept: 0,
            trace: &[],
            atomic: error("HTTP 400 Bad Request: the request exceeds the available context size"),
        },
        Case {
            name: "401, OpenAI error shape",
            upstream: || {
                script(vec![Reply::status(
                    401,
                    json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}),
                )])
            },
            chat: error("HTTP 401 Unauthorized: Incorrect API key provided"),
            kept: 0,
            trace: &[],
            atomic: error("HTTP 401 Unauthorized: Incorrect API key provided"),
        },
        Case {
            name: "403, plain text body",
            upstream: || script(vec![raw(403, "text/plain", b"forbidden by policy")]),
            chat: error("HTTP 403 Forbidden: forbidden by policy"),
            kept: 0,
            trace: &[],
            atomic: error("HTTP 403 Forbidden: forbidden by policy"),
        },
        Case {
            name: "404, old vLLM flat error shape",
            upstream: || {
                script(vec![Reply::status(
                    404,
                    json!({"object": "error", "message": "The model `x` does not exist.", "type": "NotFoundError", "code": 404}),
                )])
            },
            chat: error("HTTP 404 Not Found: The model `x` does not exist."),
            kept: 0,
            trace: &[],
            atomic: error("HTTP 404 Not Found: The model `x` does not exist."),
        },
        Case {
            name: "429, rate limited",
            upstream: || {
                script(vec![Reply::status(
                    429,
                    json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}),
                )])
            },
            chat: error("HTTP 429 Too Many Requests: Rate limit reached"),
            kept: 0,
            trace: &[],
            atomic: error("HTTP 429 Too Many Requests: Rate limit reached"),
        },
        Case {
            name: "500, Ollama error shape",
            upstream: || {
                script(vec![Reply::status(
                    500,
                    json!({"error": "llama runner process has terminated"}),
                )])
            },
            chat: error("HTTP 500 Internal Server Error: llama runner process has terminated"),
            kept: 0,
            trace: &[],
            atomic: error("HTTP 500 Internal Server Error: llama runner process has terminated"),
        },
        Case {
            name: "502, HTML page from a proxy",
            upstream: || {
                script(vec![raw(
                    502,
                    "text/html",
                    b"<html><body>Bad Gateway</body></html>",
                )])
            },
            chat: error("HTTP 502 Bad Gateway: (an HTML page of"),
            kept: 0,
            trace: &[],
            atomic: error("HTTP 502 Bad Gateway: (an HTML page of"),
        },
        Case {
            name: "503, Ollama queue full",
            upstream: || {
                script(vec![Reply::status(
                    503,
                    json!({"error": "server busy, please try again.  maximum pending requests exceeded"}),
                )])
            },
            chat: error("HTTP 503 Service Unavailable: server busy"),
            kept: 0,
            trace: &[],
            atomic: error("HTTP 503 Service Unavailable: server busy"),
        },
        Case {
            name: "504, empty body",
            upstream: || script(vec![raw(504, "text/plain", b"")]),
            chat: error("HTTP 504 Gateway Timeout: (empty body)"),
            kept: 0,
            trace: &[],
            atomic: error("HTTP 504 Gateway Timeout: (empty body)"),
        },
        Case {
            name: "200 with an HTML page",
            upstream: || script(vec![raw(200, "text/html", b"<html>It works!</html>")]),
            chat: error("LLM response is not JSON"),
            kept: 0,
            trace: &[],
            atomic: error("LLM response is not JSON"),
        },
        Case {
            name: "200 with an empty body",
            upstream: || script(vec![raw(200, "application/json", b"")]),
            chat: error("LLM response is not JSON"),
            kept: 0,
            trace: &[],
            atomic: error("LLM response is not JSON"),
        },
        Case {
            name: "200 with truncated JSON",
            upstream: || {
                let body = completion_bytes();
                script(vec![raw(200, "application/json", &body[..body.len() / 2])])
            },
            chat: error("LLM response is not JSON"),
            kept: 0,
            trace: &[],
            atomic: error("LLM response is not JSON"),
        },
        Case {
            name: "connection dropped mid-body",
            upstream: || {
                let body = completion_bytes();
                script(vec![Reply::DropMidBody {
                    declared: body.len(),
                    body: body[..body.len() / 2].to_vec(),
                }])
            },
            chat: error(http),
            kept: 0,
            trace: &[],
            atomic: error(http),
        },
        Case {
            name: "huge body past the 8 MiB cap",
            upstream: || script(vec![raw(200, "application/json", &vec![b' '; 9 * 1024 * 1024])]),
            chat: error("LLM response exceeds 8388608 bytes"),
            kept: 0,
            trace: &[],
            atomic: error("LLM response exceeds 8388608 bytes"),
        },
        Case {
            name: "200 without choices",
            upstream: || {
                script(vec![Reply::status(
                    200,
                    json!({"object": "chat.completion", "choices": []}),
                )])
            },
            chat: error("LLM response has no choices"),
            kept: 0,
            trace: &[],
            atomic: error("LLM response has no choices"),
        },
        Case {
            name: "slow headers past the budget",
            upstream: || script(vec![Reply::text("too late").after(Duration::from_secs(30))]),
            chat: budget_exceeded(),
            kept: 0,
            trace: &[],
            atomic: budget_exceeded(),
        },
        Case {
            name: "slow trickle past the budget",
            upstream: || {
                script(vec![Reply::Trickle {
                    body: completion_bytes(),
                    chunk: 1,
                    every: Duration::from_millis(100),
                }])
            },
            chat: budget_exceeded(),
            kept: 0,
            trace: &[],
            atomic: budget_exceeded(),
        },
        Case {
            name: "cut at the token limit",
            upstream: || {
                script(vec![Reply::status(
                    200,
                    json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "The pump"}, "finish_reason": "length"}]}),
                )])
            },
            chat: ok("token limit"),
            kept: 2,
            trace: &[],
            atomic: ok("token limit"),
        },
        Case {
            name: "cut by the content filter",
            upstream: || {
                script(vec![Reply::status(
                    200,
                    json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "The pump"}, "finish_reason": "content_filter"}]}),
                )])
            },
            chat: ok("finish_reason: content_filter"),
            kept: 2,
            trace: &[],
            atomic: ok("finish_reason: content_filter"),
        },
        Case {
            name: "500 with a long message",
            upstream: || {
                script(vec![Reply::status(
                    500,
                    json!({"error": {"message": format!("overloaded {}", "x".repeat(2000))}}),
                )])
            },
            chat: error("HTTP 500 Internal Server Error: overloaded xxx"),
            kept: 0,
            trace: &[],
            atomic: error("HTTP 500 Internal Server Error: overloaded xxx"),
        },
        Case {
            name: "tool calls forever",
            upstream: || {
                script(
                    (0..20)
                        .map(|_| value_call(r#"{"tag": "Pump1.FlowRate"}"#))
                        .collect(),
                )
            },
            chat: Expect {
                status: Status::Truncated,
                warning: "Tool-dispatch cap (5 per turn) reached",
                slow: false,
            },
            // The question, five exchanges run and a sixth answered "cap reached" (every call
            // has its result), then nothing from the last, tool-less POST.
            kept: 13,
            trace: &[ToolOk, ToolOk, ToolOk, ToolOk, ToolOk],
            atomic: error(NO_TOOLS),
        },
        Case {
            name: "an unknown tool",
            upstream: || {
                script(vec![
                    Reply::ToolCalls(vec![("c1".into(), "runtime_format_disk".into(), "{}".into())]),
                    Reply::text("I cannot do that."),
                ])
            },
            chat: ok(""),
            kept: 4,
            trace: &[ToolError],
            atomic: error(NO_TOOLS),
        },
        Case {
            name: "malformed tool arguments",
            upstream: || script(vec![value_call("{not json"), Reply::text("Sorry.")]),
            chat: ok(""),
            kept: 4,
            trace: &[ToolError],
            atomic: error(NO_TOOLS),
        },
        Case {
            name: "a tool that hangs",
            upstream: || {
                script(vec![
                    Reply::ToolCalls(vec![("c1".into(), "hangs".into(), "{}".into())]),
                    // The tool times out just before the budget; the model, asked again, is
                    // slower than what is left.
                    Reply::text("never reached").after(Duration::from_millis(500)),
                ])
            },
            chat: budget_exceeded(),
            // The call and its timeout result are a complete exchange, so they stay.
            kept: 3,
            trace: &[ToolError],
            atomic: error(NO_TOOLS),
        },
        Case {
            name: "a tool that panics",
            upstream: || {
                script(vec![
                    Reply::ToolCalls(vec![("c1".into(), "panics".into(), "{}".into())]),
                    Reply::text("The tool failed."),
                ])
            },
            chat: ok(""),
            kept: 4,
            trace: &[ToolError],
            atomic: error(NO_TOOLS),
        },
        // Streams (the chat path asks for one; the atomic path reads one it did not ask for).
        Case {
            name: "stream cut mid-way",
            upstream: || {
                script(vec![stream(
                    &["data: {\"choices\": [{\"delta\": {\"content\": \"The pump\"}}]}\n\n"],
                    StreamEnd::Cut,
                    0,
                )])
            },
            chat: error("the response could not be read"),
            kept: 0,
            trace: &[],
            atomic: error("the response could not be read"),
        },
        Case {
            name: "stream with a garbage line",
            upstream: || {
                script(vec![stream(
                    &[
                        "data: {\"choices\": [{\"delta\": {\"content\": \"The\"}}]}\n\n",
                        "data: {garbage\n\n",
                        "data: [DONE]\n\n",
                    ],
                    StreamEnd::Complete,
                    0,
                )])
            },
            chat: error("LLM stream carried a line that is not JSON"),
            kept: 0,
            trace: &[],
            atomic: error("LLM stream carried a line that is not JSON"),
        },
        Case {
            name: "stream with an error event",
            upstream: || {
                script(vec![stream(
                    &["data: {\"error\": {\"message\": \"model overloaded\", \"code\": 503}}\n\n"],
                    StreamEnd::Complete,
                    0,
                )])
            },
            chat: error("LLM stream error: model overloaded"),
            kept: 0,
            trace: &[],
            atomic: error("LLM stream error: model overloaded"),
        },
        Case {
            name: "endless stream",
            upstream: || {
                script(vec![stream(
                    &["data: {\"choices\": [{\"delta\": {\"content\": \".\"}}]}\n\n"],
                    StreamEnd::Endless,
                    50,
                )])
            },
            chat: budget_exceeded(),
            // The answer as far as it streamed: the question and that partial answer.
            kept: 2,
            trace: &[],
            atomic: budget_exceeded(),
        },
        Case {
            name: "slow first chunk within the budget",
            upstream: || {
                script(vec![stream(
                    &[
                        "data: {\"choices\": [{\"delta\": {\"content\": \"The pump is fine.\"}}]}\n\n",
                        "data: [DONE]\n\n",
                    ],
                    StreamEnd::Complete,
                    400,
                )])
            },
            chat: ok(""),
            kept: 2,
            trace: &[],
            atomic: ok(""),
        },
        // Redirects: never followed, on either path. A followed 302 would be a GET without
        // the body, which this server would answer with the completion after it.
        Case {
            name: "302 to the same server",
            upstream: || script(vec![redirect(302, "/v1/other"), Reply::text("The pump is fine.")]),
            chat: error("HTTP 302 Found, a redirect to /v1/other: model POSTs are never redirected"),
            kept: 0,
            trace: &[],
            atomic: error("HTTP 302 Found, a redirect to /v1/other: model POSTs are never redirected"),
        },
        Case {
            name: "307 to the same server (body kept)",
            upstream: || script(vec![redirect(307, "/v1/other"), Reply::text("The pump is fine.")]),
            chat: error("HTTP 307 Temporary Redirect, a redirect to /v1/other"),
            kept: 0,
            trace: &[],
            atomic: error("HTTP 307 Temporary Redirect, a redirect to /v1/other"),
        },
        Case {
            name: "308 without a Location",
            upstream: || {
                script(vec![Reply::Custom {
                    status: 308,
                    headers: Vec::new(),
                    body: Vec::new(),
                }])
            },
            chat: error("HTTP 308 Permanent Redirect, a redirect: "),
            kept: 0,
            trace: &[],
            atomic: error("HTTP 308 Permanent Redirect, a redirect: "),
        },
    ]
}

/// A streamed 200: these lines, one every `every_ms`, then `end`.
fn stream(lines: &[&str], end: StreamEnd, every_ms: u64) -> Reply {
    Reply::Stream {
        content_type: "text/event-stream".into(),
        lines: lines.iter().map(|line| (*line).to_owned()).collect(),
        every: Duration::from_millis(every_ms),
        end,
    }
}

fn redirect(status: u16, location: &str) -> Reply {
    Reply::Custom {
        status,
        headers: vec![("Location".into(), location.into())],
        body: Vec::new(),
    }
}

/// The URL a row's path talks to, and the scripted server behind it (kept alive).
async fn endpoint(upstream: Upstream) -> (String, Option<ScriptedLlm>) {
    match upstream {
        Upstream::Script(replies) => {
            let llm = ScriptedLlm::start(replies).await.expect("scripted LLM");
            (llm.url(), Some(llm))
        }
        Upstream::Refused => {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .expect("a free port")
                .port();
            (format!("http://127.0.0.1:{port}/v1/chat/completions"), None)
        }
        Upstream::Unresolvable => (
            format!("http://{}.invalid/v1/chat/completions", "a".repeat(70)),
            None,
        ),
    }
}

fn check(case: &str, path: &str, expect: Expect, envelope: &Envelope, waited: Duration) {
    let context = format!("{case} / {path}: {envelope:?}");
    assert_eq!(envelope.status, expect.status, "{context}");
    if expect.warning.is_empty() {
        assert!(envelope.warnings.is_empty(), "{context}");
    } else {
        assert!(
            envelope
                .warnings
                .first()
                .is_some_and(|w| w.contains(expect.warning)),
            "expected a warning with {:?}; {context}",
            expect.warning
        );
    }
    let latency = Duration::from_millis(envelope.latency_ms);
    assert!(
        latency <= BUDGET + LATENCY_MARGIN,
        "latency past the budget: {context}"
    );
    assert!(waited <= BUDGET + WALL_MARGIN, "waited {waited:?}: {context}");
    if expect.slow {
        assert!(latency >= BUDGET, "cut before the budget: {context}");
    }
}

/// The messages after the system prompt of a POST.
fn history(post: &Value) -> Vec<Value> {
    post["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .skip(1)
        .cloned()
        .collect()
}

/// A history a model server accepts: every assistant tool call answered by exactly one tool
/// message right after it, and nothing answering a call that was not made.
fn assert_valid_history(messages: &[Value], context: &str) {
    let mut open: Vec<String> = Vec::new();
    for message in messages {
        match message["role"].as_str() {
            Some("tool") => {
                let id = message["tool_call_id"].as_str().expect("tool_call_id");
                let at = open.iter().position(|open_id| open_id == id);
                assert!(at.is_some(), "a tool message answers no open call: {context}");
                open.retain(|open_id| open_id != id);
            }
            role => {
                assert!(
                    open.is_empty(),
                    "calls left unanswered before a {role:?}: {context}"
                );
                if let Some(calls) = message["tool_calls"].as_array() {
                    open = calls
                        .iter()
                        .map(|call| call["id"].as_str().expect("id").to_owned())
                        .collect();
                }
            }
        }
    }
    assert!(open.is_empty(), "calls left unanswered at the end: {context}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_upstream_fault_gives_the_right_envelope_on_both_paths() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8");
    admin(&["settings", path, "set", "ModelEnabled", "true"], "");
    admin(&["settings", path, "set", "ModelOptions", "0xBE"], "");
    admin(&["settings", path, "set", "TimeoutSeconds", "1.5"], "");
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let runtime = &server.runtime;
    runtime
        .register_custom_tool("hangs", "Never returns.", json!({"type": "object"}), |_| async {
            std::future::pending::<()>().await;
            Ok(json!("unreachable"))
        })
        .expect("registers");
    runtime
        .register_custom_tool("panics", "Always panics.", json!({"type": "object"}), |_| async {
            panic!("tool bug")
        })
        .expect("registers");
    let toolkit = runtime.toolkit();
    let set_url = |url: &str| admin(&["settings", path, "set", "URL", url], "");

    let cases = cases();
    assert!(cases.len() >= 20, "the matrix covers at least 20 behaviours");
    for case in &cases {
        // The chat path, on a fresh connection so the transcript starts empty.
        let (url, llm) = endpoint((case.upstream)()).await;
        set_url(&url);
        let client: Client = server.guest().await;
        let started = Instant::now();
        let envelope = client.chat_envelope("How is Pump 1?").await.expect("an envelope");
        check(case.name, "chat", case.chat, &envelope, started.elapsed());
        // Each path gets its own server: the URL is the one part that may differ.
        let chat_warning = envelope
            .warnings
            .first()
            .map(|warning| warning.replace(&url, "URL"));
        let statuses: Vec<ToolStatus> = envelope.tool_trace.iter().map(|entry| entry.status).collect();
        assert_eq!(statuses, case.trace, "{} / chat trace: {envelope:?}", case.name);

        // What the transcript kept shows in the next turn's POST.
        let probe_llm = ScriptedLlm::start([Reply::text("probe answer")])
            .await
            .expect("probe LLM");
        set_url(&probe_llm.url());
        let probe = client.chat_envelope("And now?").await.expect("an envelope");
        assert_eq!(probe.status, Status::Ok, "{} / probe: {probe:?}", case.name);
        let kept = history(&probe_llm.requests()[0].json().expect("JSON"));
        let context = format!("{} / transcript {kept:?}", case.name);
        assert_eq!(kept.len(), case.kept + 1, "{context}");
        assert_eq!(
            kept.last().map(|m| m["content"].clone()),
            Some(json!("And now?")),
            "{context}"
        );
        assert_valid_history(&kept, &context);
        probe_llm.stop().await;
        if let Some(llm) = llm {
            llm.stop().await;
        }

        // The atomic path: one POST, no tools, no retry.
        let (url, llm) = endpoint((case.upstream)()).await;
        set_url(&url);
        let started = Instant::now();
        let json = toolkit.ai_execute_async("How is Pump 1?").await;
        let envelope: Envelope = serde_json::from_str(&json).expect("an envelope");
        check(case.name, "atomic", case.atomic, &envelope, started.elapsed());
        // Both paths read the server through one dialect: what they tell the operator about
        // the same answer is the same, word for word (the budget warnings name their budget).
        let worded_alike = case.chat.warning == case.atomic.warning
            && !case.chat.warning.is_empty()
            && !case.chat.slow
            && case.trace.is_empty();
        if worded_alike {
            assert_eq!(
                chat_warning,
                envelope
                    .warnings
                    .first()
                    .map(|warning| warning.replace(&url, "URL")),
                "{}: the paths word it differently",
                case.name
            );
        }
        if let Some(llm) = llm {
            let posts = llm.requests();
            assert!(posts.len() <= 1, "{} / atomic retried", case.name);
            if let Some(post) = posts.first().and_then(|post| post.json()) {
                assert!(
                    post.get("tools").is_none(),
                    "{} / atomic offered tools",
                    case.name
                );
            }
            llm.stop().await;
        }
    }
    server.stop().await;
}
