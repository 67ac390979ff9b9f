//! Streamed chat turns end to end: progress frames before the one reply, equal envelopes,
//! coalescing for a reader that does not keep up, cancel mid-stream, and `tclient` printing
//! the answer as it arrives.

use std::time::{Duration, Instant};

use scripted_llm::{Reply, StreamEnd};
use serde_json::{Value, json};
use service_client::{ChatEvent, Envelope, Status};
use tclient::cli::{Cli, Terminals};
use tserver_proto::v1::{ChatRequest, client_frame, server_frame};

use crate::chat::{ChatRig, assert_cancelled, streamed_answer, streamed_tool_call};
use crate::support::RawConnection;

const ANSWER: &str = "Pump 1 draws 12.4 A, within its range.";

/// The envelope's fields that do not depend on timing or on the live value read.
fn comparable(envelope: &Envelope) -> (String, Status, Vec<String>, Vec<(String, Value)>) {
    (
        envelope.text.clone(),
        envelope.status,
        envelope.warnings.clone(),
        envelope
            .tool_trace
            .iter()
            .map(|entry| (entry.name.clone(), entry.args.clone()))
            .collect(),
    )
}

/// The text of `events`, joined.
fn text_of(events: &[ChatEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            ChatEvent::Text(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_streamed_call_shows_tools_and_text_as_they_happen_then_the_reply_a_plain_call_gets() {
    let every = Duration::from_millis(60);
    let rig = ChatRig::start(
        vec![
            streamed_tool_call().paced(every),
            streamed_answer(ANSWER).paced(every),
            streamed_tool_call(),
            streamed_answer(ANSWER),
        ],
        &[],
    )
    .await;
    let client = rig.server.guest().await;
    let mut stream = client.chat_stream("How is Pump 1?").await.expect("sent");
    let mut events = Vec::new();
    let mut first_text = None;
    while let Some(event) = stream.next_event().await {
        if matches!(event, ChatEvent::Text(_)) && first_text.is_none() {
            first_text = Some(Instant::now());
        }
        events.push(event);
    }
    let streamed = stream.reply().await.expect("the reply");
    let replied = Instant::now();
    let envelope = Envelope::from_json(&streamed.reply_json).expect("envelope");
    assert_eq!((envelope.status, envelope.text.as_str()), (Status::Ok, ANSWER));

    // The tool dispatch as it started and finished, then the answer text.
    match &events[..2] {
        [ChatEvent::ToolStarted(started), ChatEvent::ToolFinished(finished)] => {
            assert_eq!(started.name, "runtime_get_value");
            assert_eq!(
                serde_json::from_str::<Value>(&started.arguments_json).expect("JSON"),
                json!({"tag": "Pump1.MotorCurrent"})
            );
            assert!(finished.ok, "{finished:?}");
            assert_eq!(finished.elapsed_ms, envelope.tool_trace[0].elapsed_ms);
        }
        other => panic!("expected the tool's start and finish first, got {other:?}"),
    }
    assert_eq!(text_of(&events), ANSWER, "the text streamed is the answer");
    let text_frames = events.iter().filter(|e| matches!(e, ChatEvent::Text(_))).count();
    assert!(text_frames >= 3, "the answer came in pieces: {events:?}");
    // The first words were shown while the model was still writing the rest (8 words, one
    // every 60 ms).
    let ahead = replied - first_text.expect("text arrived");
    assert!(
        ahead >= Duration::from_millis(200),
        "only {ahead:?} ahead of the reply"
    );

    // The same turn, not streamed to the panel: the same envelope and usage.
    let plain_client = rig.server.guest().await;
    let plain = plain_client.chat_reply("How is Pump 1?").await.expect("reply");
    assert_eq!(
        comparable(&Envelope::from_json(&plain.reply_json).expect("envelope")),
        comparable(&envelope)
    );
    assert_eq!(plain.usage, streamed.usage);
    rig.stop().await;
}

#[tokio::test]
async fn a_reader_that_does_not_read_holds_up_nothing_and_gets_the_text_merged() {
    const PIECES: usize = 400;
    let chunks: Vec<Value> = (0..PIECES)
        .map(|n| json!({"choices": [{"index": 0, "delta": {"content": format!("w{n} ")}}]}))
        .collect();
    let answer: String = (0..PIECES).map(|n| format!("w{n} ")).collect();
    let rig = ChatRig::start(
        vec![
            Reply::sse(&chunks).paced(Duration::from_millis(2)),
            Reply::text("Plain."),
        ],
        &[],
    )
    .await;
    let mut raw = RawConnection::guest(rig.server.addr).await;
    raw.send(
        2,
        client_frame::Body::Chat(ChatRequest {
            query_json: "Talk.".into(),
            stream: true,
        }),
    )
    .await;
    // Not a frame read while the model streams all of its answer.
    let quiet = Duration::from_millis(2500);
    tokio::time::sleep(quiet).await;
    let mut progress_frames = 0;
    let mut text = String::new();
    let envelope = loop {
        let frame = raw.receive().await.expect("a frame");
        assert_eq!(frame.call_id, 2);
        match frame.body {
            Some(server_frame::Body::ChatProgress(progress)) => {
                progress_frames += 1;
                for event in progress.events {
                    if let Some(ChatEvent::Text(piece)) = event.event {
                        text.push_str(&piece);
                    }
                }
            }
            Some(server_frame::Body::Chat(reply)) => {
                break Envelope::from_json(&reply.reply_json).expect("envelope");
            }
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(envelope.status, Status::Ok);
    assert_eq!(text, answer);
    assert_eq!(envelope.text, answer);
    assert!(
        envelope.latency_ms < quiet.as_millis() as u64,
        "the turn waited for the reader: {} ms",
        envelope.latency_ms
    );
    assert!(
        progress_frames * 4 <= PIECES,
        "{progress_frames} frames for {PIECES} pieces: not merged"
    );

    // A call that does not ask to stream gets its reply and nothing else.
    raw.send(
        3,
        client_frame::Body::Chat(ChatRequest {
            query_json: "Again.".into(),
            stream: false,
        }),
    )
    .await;
    let frame = raw.receive().await.expect("a frame");
    assert_eq!(frame.call_id, 3);
    assert!(
        matches!(frame.body, Some(server_frame::Body::Chat(_))),
        "{frame:?}"
    );
    rig.stop().await;
}

#[tokio::test]
async fn a_turn_cancelled_mid_stream_answers_with_the_text_so_far() {
    let line = "data: {\"choices\": [{\"delta\": {\"content\": \"more \"}}]}\n\n";
    let rig = ChatRig::start(
        vec![
            Reply::Stream {
                content_type: "text/event-stream".into(),
                lines: vec![line.to_owned()],
                every: Duration::from_millis(20),
                end: StreamEnd::Endless,
            },
            Reply::text("Next answer."),
        ],
        &[],
    )
    .await;
    let client = rig.server.guest().await;
    let mut stream = client.chat_stream("Talk.").await.expect("sent");
    let mut shown = String::new();
    while shown.len() < 20 {
        match stream.next_event().await.expect("text before the end") {
            ChatEvent::Text(text) => shown.push_str(&text),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(client.cancel(stream.call_id()).await.expect("cancel answered"));
    while let Some(event) = stream.next_event().await {
        if let ChatEvent::Text(text) = event {
            shown.push_str(&text);
        }
    }
    let reply = stream.reply().await.expect("still answered");
    let envelope = Envelope::from_json(&reply.reply_json).expect("envelope");
    assert_cancelled(&envelope);
    assert!(envelope.text.starts_with("more more"), "{envelope:?}");
    assert!(
        envelope.text.starts_with(shown.trim_end()),
        "what was shown is what the envelope says: {shown:?} / {:?}",
        envelope.text
    );
    let next = client.chat_envelope("And now?").await.expect("reply");
    assert_eq!(next.text, "Next answer.");
    rig.stop().await;
}

#[tokio::test]
async fn with_a_reply_hook_only_the_tools_stream_and_the_hooked_answer_comes_in_the_reply() {
    let rig = ChatRig::start(vec![streamed_tool_call(), streamed_answer(ANSWER)], &[]).await;
    rig.server
        .runtime
        .local_ai()
        .on_after_chat_reply("sign", |text| async move { Ok(format!("{text} (checked)")) });
    let client = rig.server.guest().await;
    let mut stream = client.chat_stream("How is Pump 1?").await.expect("sent");
    let mut events = Vec::new();
    while let Some(event) = stream.next_event().await {
        events.push(event);
    }
    assert_eq!(text_of(&events), "", "no text a hook would rewrite: {events:?}");
    assert_eq!(events.len(), 2, "{events:?}");
    let envelope = Envelope::from_json(&stream.reply().await.expect("reply").reply_json).expect("envelope");
    assert_eq!(envelope.text, format!("{ANSWER} (checked)"));
    rig.stop().await;
}

async fn tclient(args: &[&str], terminals: Terminals) -> String {
    let cli = <Cli as clap::Parser>::try_parse_from(std::iter::once("tclient").chain(args.iter().copied()))
        .expect("arguments");
    let mut output = Vec::new();
    tclient::cli::run(&cli, &mut "".as_bytes(), &mut output, terminals)
        .await
        .expect("tclient runs");
    String::from_utf8(output).expect("utf-8")
}

#[tokio::test]
async fn tclient_on_a_terminal_prints_the_answer_as_it_arrives_and_a_pipe_gets_one_line() {
    let rig = ChatRig::start(
        vec![
            streamed_tool_call(),
            streamed_answer(ANSWER),
            streamed_tool_call(),
            streamed_answer(ANSWER),
            streamed_tool_call(),
            streamed_answer(ANSWER),
            streamed_tool_call(),
            streamed_answer(ANSWER),
        ],
        &[],
    )
    .await;
    let addr = rig.server.addr.to_string();
    let terminal = Terminals {
        input: false,
        output: true,
    };
    let printed = tclient(&["--addr", &addr, "chat", "How is Pump 1?"], terminal).await;
    let lines: Vec<&str> = printed.lines().collect();
    assert!(
        lines[0].starts_with("  [tool] runtime_get_value({\"tag\":\"Pump1.MotorCurrent\"}) -> ok, "),
        "{printed}"
    );
    assert_eq!(lines[1], format!("ai> {ANSWER}"), "{printed}");
    assert!(lines[2].starts_with("  [ok in "), "{printed}");
    assert_eq!(lines.len(), 3, "the answer is not printed twice: {printed}");

    // The REPL on a terminal streams each turn the same way.
    let printed = {
        let cli =
            <Cli as clap::Parser>::try_parse_from(["tclient", "--addr", &addr, "repl"]).expect("arguments");
        let mut output = Vec::new();
        let both = Terminals {
            input: true,
            output: true,
        };
        tclient::cli::run(&cli, &mut "How is Pump 1?\n\n".as_bytes(), &mut output, both)
            .await
            .expect("the repl runs");
        String::from_utf8(output).expect("utf-8")
    };
    assert!(printed.contains("you>   [tool] runtime_get_value("), "{printed}");
    assert!(
        printed.contains(&format!("\nai> {ANSWER}\n  [ok in ")),
        "{printed}"
    );

    // --no-stream on a terminal, and any pipe: one envelope line.
    for (args, terminals) in [
        (
            vec!["--addr", &addr, "--no-stream", "chat", "How is Pump 1?"],
            terminal,
        ),
        (
            vec!["--addr", &addr, "chat", "How is Pump 1?"],
            Terminals::default(),
        ),
    ] {
        let printed = tclient(&args, terminals).await;
        assert_eq!(printed.lines().count(), 1, "{printed}");
        let envelope = Envelope::from_json(printed.trim_end()).expect("an envelope line");
        assert_eq!(envelope.text, ANSWER);
    }
    rig.stop().await;
}
