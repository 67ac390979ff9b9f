//! The `scripted-llm` binary: a stand-in model server for benchmarks, in its own process.
//!
//! It prints `listening on http://ADDR/v1/chat/completions` once bound, answers every POST
//! after a fixed latency, and serves its counters at `GET /__scripted/stats`. Requests are
//! counted, not kept, so long runs stay flat in memory.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use scripted_llm::{RecordedRequest, Reply, ScriptedLlm};
use serde::Deserialize;

/// A stand-in OpenAI-compatible model server with a fixed latency.
#[derive(Debug, Parser)]
#[command(name = "scripted-llm", version, about)]
struct Args {
    /// The address to listen on (port 0 picks one).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Milliseconds to wait before each answer.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// How each chat turn goes.
    #[arg(long, value_enum, default_value_t = Mode::Text)]
    mode: Mode,
    /// Answer as a stream of server-sent events (the tool call in fragments, the text in
    /// words, a usage chunk last), as OpenAI, vLLM and llama.cpp do for `stream: true`.
    #[arg(long)]
    stream: bool,
    /// Begin each streamed answer with `t=<microseconds since the Unix epoch> `, the time the
    /// stand-in wrote that first chunk, so a client can time it to its first shown text
    /// (`tclient bench chat-stream`).
    #[arg(long, requires = "stream")]
    stamp: bool,
}

/// How the stand-in streams.
#[derive(Debug, Clone, Copy)]
struct Streaming {
    /// Answer as a stream.
    on: bool,
    /// Stamp each streamed answer with the time it was sent.
    stamp: bool,
}

/// How the stand-in answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Every POST is answered with a short text.
    Text,
    /// A turn's first POST asks for `runtime_get_value` on Pump1.MotorCurrent; the POST that
    /// carries the tool result is answered with text.
    Tool,
    /// As `Tool`, the call being `runtime_propose_write` of 1 to `BenchProposals.Setpoint` (the
    /// bench plant's proposable tag): a turn that proposes an action.
    Propose,
}

/// The one part of a request body the tool mode reads: each message's role. Everything else is
/// skipped while parsing rather than built into a JSON value, so that the stand-in's own work
/// stays small beside the server it measures.
#[derive(Deserialize)]
struct Roles<'a> {
    #[serde(borrow)]
    messages: Vec<Role<'a>>,
}

/// A message, of which only the role is kept.
#[derive(Deserialize)]
struct Role<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
}

fn respond(mode: Mode, stream: Streaming, latency: Duration, request: &RecordedRequest) -> Reply {
    let text = |text: &str| {
        if stream.on {
            streamed_text(text, stream.stamp)
        } else {
            Reply::text(text)
        }
    };
    let reply = match mode {
        Mode::Text => text("ok"),
        Mode::Tool | Mode::Propose => {
            let roles = serde_json::from_slice::<Roles<'_>>(&request.body).ok();
            let last_role = roles.as_ref().and_then(|roles| roles.messages.last());
            if last_role.is_some_and(|message| message.role == "tool") {
                text("Pump1.MotorCurrent is normal.")
            } else if mode == Mode::Propose {
                Reply::tool_call(
                    "runtime_propose_write",
                    serde_json::json!({"tag": "BenchProposals.Setpoint", "value": 1, "reason": "bench"}),
                )
            } else if stream.on {
                streamed_tool_call()
            } else {
                Reply::tool_call(
                    "runtime_get_value",
                    serde_json::json!({"tag": "Pump1.MotorCurrent"}),
                )
            }
        }
    };
    if latency.is_zero() {
        reply
    } else {
        reply.after(latency)
    }
}

/// One chunk of a streamed completion carrying `delta`.
fn chunk(delta: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

/// The last chunks of a stream: why it stopped, then the usage alone.
fn stream_end(reason: &str) -> [serde_json::Value; 2] {
    [
        serde_json::json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}),
        serde_json::json!({"object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 10}}),
    ]
}

/// `text` streamed a word at a time; with `stamp`, after a first word saying when.
fn streamed_text(text: &str, stamp: bool) -> Reply {
    let mut chunks = vec![chunk(serde_json::json!({"role": "assistant", "content": ""}))];
    if stamp {
        chunks.push(chunk(
            serde_json::json!({"content": format!("t={} ", scripted_llm::NOW_MICROS)}),
        ));
    }
    chunks.extend(
        text.split_inclusive(' ')
            .map(|word| chunk(serde_json::json!({"content": word}))),
    );
    chunks.extend(stream_end("stop"));
    Reply::sse(&chunks)
}

/// A `runtime_get_value` call streamed as its name, then its arguments in two fragments.
fn streamed_tool_call() -> Reply {
    let mut chunks = vec![
        chunk(serde_json::json!({"role": "assistant", "content": null})),
        chunk(
            serde_json::json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "runtime_get_value", "arguments": ""}}]}),
        ),
        chunk(
            serde_json::json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"tag\": \"Pump1."}}]}),
        ),
        chunk(
            serde_json::json!({"tool_calls": [{"index": 0, "function": {"arguments": "MotorCurrent\"}"}}]}),
        ),
    ];
    chunks.extend(stream_end("tool_calls"));
    Reply::sse(&chunks)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let latency = Duration::from_millis(args.latency_ms);
        let mode = args.mode;
        let stream = Streaming {
            on: args.stream,
            stamp: args.stamp,
        };
        let server = ScriptedLlm::serve_on(
            listener,
            move |request: &RecordedRequest| respond(mode, stream, latency, request),
            false,
        )?;
        println!("listening on {}", server.url());
        tokio::signal::ctrl_c().await.context("cannot wait for Ctrl-C")?;
        server.stop().await;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: Streaming = Streaming {
        on: false,
        stamp: false,
    };
    const STAMPED: Streaming = Streaming {
        on: true,
        stamp: true,
    };

    fn post(body: &str) -> RecordedRequest {
        RecordedRequest {
            method: "POST".to_owned(),
            path: "/v1/chat/completions".to_owned(),
            headers: Vec::new(),
            body: body.as_bytes().to_vec(),
        }
    }

    fn asks_for_the_tool(reply: &Reply) -> bool {
        matches!(reply, Reply::ToolCalls(calls) if calls.len() == 1 && calls[0].1 == "runtime_get_value")
    }

    #[test]
    fn tool_mode_answers_in_text_only_after_a_tool_result() {
        let turn_start = r#"{"model":"m","messages":[{"role":"system","content":"s"},
            {"role":"user","content":"a \"role\": \"tool\" inside text"}],
            "tools":[{"type":"function","function":{"name":"runtime_get_value"}}]}"#;
        let after_tool = r#"{"model":"m","messages":[{"role":"user","content":"q"},
            {"role":"assistant","content":null,"tool_calls":[]},
            {"role":"tool","tool_call_id":"c1","content":"{\"ok\":true}"}]}"#;
        assert!(asks_for_the_tool(&respond(
            Mode::Tool,
            PLAIN,
            Duration::ZERO,
            &post(turn_start)
        )));
        assert!(matches!(
            respond(Mode::Tool, PLAIN, Duration::ZERO, &post(after_tool)),
            Reply::Content(text) if text.contains("normal")
        ));
        // A body that is not a chat request starts a turn too: the stand-in never fails.
        assert!(asks_for_the_tool(&respond(
            Mode::Tool,
            PLAIN,
            Duration::ZERO,
            &post("not json")
        )));
        assert!(matches!(
            respond(Mode::Text, PLAIN, Duration::ZERO, &post(after_tool)),
            Reply::Content(text) if text == "ok"
        ));
        // Streamed, the same turn reads the same through the chat path's reader.
        assert!(matches!(
            respond(Mode::Tool, STAMPED, Duration::ZERO, &post(turn_start)),
            Reply::Stream { lines, .. } if lines.iter().any(|line| line.contains("runtime_get_value"))
                && lines.last().is_some_and(|line| line.contains("[DONE]"))
        ));
        // The answer begins with when it was sent.
        assert!(matches!(
            respond(Mode::Tool, STAMPED, Duration::ZERO, &post(after_tool)),
            Reply::Stream { lines, .. } if lines[1].contains("\"content\":\"t=")
        ));
    }
}
