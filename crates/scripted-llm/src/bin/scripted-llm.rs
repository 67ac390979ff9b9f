//! The `scripted-llm` binary: a stand-in model server for benchmarks, in its own process.
//!
//! It prints `listening on http://ADDR/v1/chat/completions` once bound, answers every POST
//! after a fixed latency, and serves its counters at `GET /__scripted/stats`. Requests are
//! counted, not kept, so long runs stay flat in memory.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use scripted_llm::{RecordedRequest, Reply, ScriptedLlm};

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
}

/// How the stand-in answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Every POST is answered with a short text.
    Text,
    /// A turn's first POST asks for `runtime_get_value` on Pump1.MotorCurrent; the POST that
    /// carries the tool result is answered with text.
    Tool,
}

fn respond(mode: Mode, latency: Duration, request: &RecordedRequest) -> Reply {
    let reply = match mode {
        Mode::Text => Reply::text("ok"),
        Mode::Tool => {
            let last_role = request.json().and_then(|body| {
                body["messages"].as_array()?.last()?["role"]
                    .as_str()
                    .map(str::to_owned)
            });
            if last_role.as_deref() == Some("tool") {
                Reply::text("Pump1.MotorCurrent is normal.")
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
        let server = ScriptedLlm::serve_on(
            listener,
            move |request: &RecordedRequest| respond(mode, latency, request),
            false,
        )?;
        println!("listening on {}", server.url());
        tokio::signal::ctrl_c().await.context("cannot wait for Ctrl-C")?;
        server.stop().await;
        Ok(())
    })
}
