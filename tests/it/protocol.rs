//! The wire protocol as a display client sees it: login, calls, limits, errors, shutdown.

use std::sync::Arc;
use std::time::Duration;

use service_client::{ClientError, CloseReason};
use tokio::sync::{Notify, Semaphore};
use tserver::ServerConfig;
use tserver_proto::v1::{
    ChatRequest, ErrorCode, Ping, ReadTagsRequest, client_frame, server_frame, tag_reading,
};

use crate::support::{RawConnection, Solution, TestServer, admin, error_of, hello};

fn chat(text: &str) -> client_frame::Body {
    client_frame::Body::Chat(ChatRequest {
        query_json: text.to_owned(),
        stream: false,
    })
}

fn ping(nonce: u64) -> client_frame::Body {
    client_frame::Body::Ping(Ping { nonce })
}

/// Opens the chat gates, so chat turns reach the hook chain.
/// Opens both chat gates with chat history off: these tests are about the protocol's
/// multiplexing, and with history on a connection's turns would queue behind each other.
fn open_chat_gates(solution: &Solution) {
    let path = solution.path.to_str().expect("utf-8 path");
    admin(&["settings", path, "set", "ModelEnabled", "true"], "");
    admin(&["settings", path, "set", "ModelOptions", "0x02"], "");
}

#[tokio::test]
async fn handshake_reports_server_version_and_stored_user_name() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let client = server.client().await;
    let info = client
        .login("GUEST", "")
        .await
        .expect("guest logs in, name case-insensitive");
    assert_eq!(info.server_version, tserver::SERVER_VERSION);
    assert_eq!(info.user_name, "guest");
    server.stop().await;
}

#[tokio::test]
async fn ping_echoes_its_nonce() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let mut raw = RawConnection::guest(server.addr).await;
    raw.send(42, ping(0xfeed)).await;
    let reply = raw.receive().await.expect("pong");
    assert_eq!(reply.call_id, 42);
    assert_eq!(
        reply.body,
        Some(server_frame::Body::Pong(tserver_proto::v1::Pong {
            nonce: 0xfeed
        }))
    );
    assert!(server.guest().await.ping().await.is_ok());
    server.stop().await;
}

#[tokio::test]
async fn concurrent_calls_are_answered_as_they_finish() {
    let solution = Solution::demo();
    open_chat_gates(&solution);
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    // The hook holds the "slow" turn until the test has seen the later calls answered.
    let release = Arc::new(Notify::new());
    let gate = Arc::clone(&release);
    server.runtime.local_ai().on_before_chat("pace", move |text| {
        let gate = Arc::clone(&gate);
        async move {
            if text == "slow" {
                gate.notified().await;
            }
            Ok(text)
        }
    });
    let mut raw = RawConnection::guest(server.addr).await;
    raw.send(10, chat("slow")).await;
    raw.send(11, chat("fast")).await;
    raw.send(12, ping(7)).await;
    let mut order = Vec::new();
    for _ in 0..2 {
        order.push(raw.receive().await.expect("reply").call_id);
    }
    order.sort_unstable();
    assert_eq!(
        order,
        [11, 12],
        "the fast calls finish while the slow one is in flight"
    );
    release.notify_one();
    let last = raw.receive().await.expect("slow reply");
    assert_eq!(last.call_id, 10);
    assert!(matches!(last.body, Some(server_frame::Body::Chat(_))));

    // The client library matches out-of-order replies to their calls.
    let client = server.guest().await;
    let (slow, fast) = tokio::join!(client.chat("slow"), async {
        let fast = client.chat("fast").await;
        release.notify_one();
        fast
    });
    assert!(slow.is_ok() && fast.is_ok());
    server.stop().await;
}

#[tokio::test]
async fn calls_past_the_in_flight_cap_are_answered_busy() {
    let solution = Solution::demo();
    open_chat_gates(&solution);
    let config = ServerConfig::default().with_max_calls_in_flight(2);
    let server = TestServer::start(&solution.path, config).await;
    let held = Arc::new(Semaphore::new(0));
    let permits = Arc::clone(&held);
    server.runtime.local_ai().on_before_chat("hold", move |text| {
        let permits = Arc::clone(&permits);
        async move {
            permits.acquire().await.map_err(|e| e.to_string())?.forget();
            Ok(text)
        }
    });
    let mut raw = RawConnection::guest(server.addr).await;
    for call_id in 1..=3 {
        raw.send(call_id, chat("hold")).await;
    }
    let refused = raw.receive().await.expect("busy reply");
    assert_eq!(refused.call_id, 3);
    assert_eq!(error_of(&refused).0, ErrorCode::Busy);
    // Quick calls are still served while the cap is full.
    raw.send(4, ping(1)).await;
    assert_eq!(raw.receive().await.expect("pong").call_id, 4);
    held.add_permits(2);
    let mut answered = vec![
        raw.receive().await.expect("reply").call_id,
        raw.receive().await.expect("reply").call_id,
    ];
    answered.sort_unstable();
    assert_eq!(answered, [1, 2]);
    server.stop().await;
}

#[tokio::test]
async fn calls_before_login_are_unauthenticated_and_the_connection_stays() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let mut raw = RawConnection::connect(server.addr).await;
    raw.send(1, ping(1)).await;
    raw.send(2, chat("hi")).await;
    for call_id in [1, 2] {
        let reply = raw.receive().await.expect("error reply");
        assert_eq!(reply.call_id, call_id);
        assert_eq!(error_of(&reply).0, ErrorCode::Unauthenticated);
    }
    raw.send(3, hello("guest", "")).await;
    assert!(matches!(
        raw.receive().await.expect("hello").body,
        Some(server_frame::Body::Hello(_))
    ));
    raw.send(4, ping(9)).await;
    assert_eq!(raw.receive().await.expect("pong").call_id, 4);
    server.stop().await;
}

#[tokio::test]
async fn a_bad_login_gets_one_reply_that_does_not_say_why_then_a_close() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    admin(&["users", path, "add", "operator"], "s3cret-pass\n");
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;

    let mut messages = Vec::new();
    for (user, password) in [
        ("operator", "wrong"),
        ("nobody", "s3cret-pass"),
        ("guest", "not-empty"),
    ] {
        let mut raw = RawConnection::connect(server.addr).await;
        raw.send(5, hello(user, password)).await;
        let reply = raw.receive().await.expect("one error reply");
        assert_eq!(reply.call_id, 5);
        let (code, message) = error_of(&reply);
        assert_eq!(code, ErrorCode::LoginFailed);
        messages.push(message.to_owned());
        assert!(
            raw.receive().await.is_none(),
            "the connection closes after a failed login"
        );
    }
    assert!(
        messages.iter().all(|m| m == &messages[0]),
        "no user enumeration: {messages:?}"
    );
    assert!(!messages[0].contains("s3cret"));

    let client = server.client().await;
    assert!(client.login("operator", "s3cret-pass").await.is_ok());
    let refused = server.client().await.login("operator", "nope").await;
    assert!(matches!(refused, Err(ClientError::LoginRefused { .. })));
    server.stop().await;
}

#[tokio::test]
async fn unsupported_protocol_version_is_refused_with_a_close() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let mut raw = RawConnection::connect(server.addr).await;
    raw.send(
        1,
        client_frame::Body::Hello(tserver_proto::v1::Hello {
            protocol_version: 99,
            client_name: "future".into(),
            user_name: "guest".into(),
            password: String::new(),
        }),
    )
    .await;
    let reply = raw.receive().await.expect("error reply");
    assert_eq!(error_of(&reply).0, ErrorCode::UnsupportedProtocol);
    assert!(raw.receive().await.is_none());
    server.stop().await;
}

#[tokio::test]
async fn an_oversize_frame_is_refused_and_other_clients_keep_working() {
    let solution = Solution::demo();
    let config = ServerConfig::default().with_max_frame(64 * 1024);
    let server = TestServer::start(&solution.path, config).await;
    let bystander = server.guest().await;
    let mut raw = RawConnection::guest(server.addr).await;
    // Declare a 1 GiB frame and send only its first bytes.
    raw.send_bytes(&(1u32 << 30).to_be_bytes()).await;
    raw.send_bytes(&[0u8; 16]).await;
    let reply = raw.receive().await.expect("error before close");
    assert_eq!(reply.call_id, 0);
    let (code, message) = error_of(&reply);
    assert_eq!(code, ErrorCode::FrameTooLarge);
    assert!(message.contains("65536"), "{message}");
    assert!(
        raw.receive().await.is_none(),
        "the stream is unusable, so it closes"
    );
    assert!(bystander.ping().await.is_ok());
    assert!(server.guest().await.ping().await.is_ok());
    server.stop().await;
}

#[tokio::test]
async fn malformed_protobuf_and_unknown_calls_get_errors_and_the_connection_goes_on() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let mut raw = RawConnection::guest(server.addr).await;

    // A length-delimited field whose length runs past the body.
    raw.send_bytes(&[0, 0, 0, 2, 0x0a, 0x7f]).await;
    let reply = raw.receive().await.expect("malformed reply");
    assert_eq!(reply.call_id, 0);
    assert_eq!(error_of(&reply).0, ErrorCode::MalformedFrame);

    // call_id 8, then field 99 (a call from a newer protocol), which this server ignores.
    raw.send_bytes(&[0, 0, 0, 5, 0x08, 0x08, 0x9a, 0x06, 0x00]).await;
    let reply = raw.receive().await.expect("unknown call reply");
    assert_eq!(reply.call_id, 8);
    assert_eq!(error_of(&reply).0, ErrorCode::UnknownCall);

    raw.send(9, ping(3)).await;
    assert_eq!(raw.receive().await.expect("still served").call_id, 9);
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_never_says_hello_is_dropped_at_the_deadline() {
    let solution = Solution::demo();
    let config = ServerConfig::default().with_login_timeout(Duration::from_millis(200));
    let server = TestServer::start(&solution.path, config).await;
    let mut silent = RawConnection::connect(server.addr).await;
    let started = tokio::time::Instant::now();
    let reply = silent.receive().await.expect("a reason before the close");
    assert_eq!(error_of(&reply).0, ErrorCode::Unauthenticated);
    assert!(silent.receive().await.is_none());
    assert!(started.elapsed() >= Duration::from_millis(200));

    // A logged-in connection is not subject to the login deadline.
    let client = server.guest().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(client.ping().await.is_ok());
    server.stop().await;
}

#[tokio::test]
async fn logout_returns_to_unauthenticated_and_another_user_can_log_in() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    admin(&["users", path, "add", "shift-b"], "pw-b\n");
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let client = server.guest().await;
    client.logout().await.expect("logs out");
    let refused = client.ping().await;
    assert_eq!(
        refused.expect_err("not logged in").server_code(),
        Some(ErrorCode::Unauthenticated)
    );
    let info = client
        .login("shift-b", "pw-b")
        .await
        .expect("second user on the same connection");
    assert_eq!(info.user_name, "shift-b");
    assert!(client.ping().await.is_ok());
    server.stop().await;
}

#[tokio::test]
async fn connections_past_the_cap_are_told_busy_and_closed() {
    let solution = Solution::demo();
    let config = ServerConfig::default().with_max_connections(2);
    let server = TestServer::start(&solution.path, config).await;
    let first = server.guest().await;
    let second = server.guest().await;
    let mut third = RawConnection::connect(server.addr).await;
    let reply = third.receive().await.expect("a refusal");
    assert_eq!(reply.call_id, 0);
    assert_eq!(error_of(&reply).0, ErrorCode::Busy);
    assert!(third.receive().await.is_none());

    let refused = server.client().await.login("guest", "").await;
    match refused {
        Err(ClientError::ConnectionLost {
            reason: CloseReason::Server { code, .. },
        }) => assert_eq!(code, ErrorCode::Busy),
        other => panic!("expected a busy close, got {other:?}"),
    }
    assert!(first.ping().await.is_ok() && second.ping().await.is_ok());

    // A slot frees when a connection closes.
    drop(first);
    let deadline = tokio::time::Instant::now() + crate::support::PATIENCE;
    loop {
        let client = server.client().await;
        if client.login("guest", "").await.is_ok() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the freed slot is reused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.stop().await;
}

#[tokio::test]
async fn read_tags_serves_the_live_object_model() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let client = server.guest().await;
    let readings = client
        .read_tags(&[
            "Pump1.MotorCurrent",
            "Plant/Area1/Pump1/Running",
            "Pump1.Mode",
            "No.Such",
        ])
        .await
        .expect("readings");
    assert_eq!(readings.len(), 4);
    assert_eq!(readings[0].value, Some(tag_reading::Value::Number(12.4)));
    assert_eq!(readings[0].quality, 192);
    assert_eq!(readings[0].units, "A");
    assert!(readings[0].timestamp_ms > 0);
    assert_eq!(readings[1].value, Some(tag_reading::Value::Boolean(true)));
    assert_eq!(readings[2].value, Some(tag_reading::Value::Text("Auto".into())));
    assert_eq!(readings[3].error, "unknown tag");
    assert_eq!(readings[3].quality, 0);

    let too_many: Vec<String> = (0..1001).map(|i| format!("T{i}")).collect();
    let mut raw = RawConnection::guest(server.addr).await;
    raw.send(
        2,
        client_frame::Body::ReadTags(ReadTagsRequest { names: too_many }),
    )
    .await;
    assert_eq!(
        error_of(&raw.receive().await.expect("reply")).0,
        ErrorCode::InvalidArgument
    );
    // An empty list is the proto's own example of an invalid argument.
    raw.send(
        3,
        client_frame::Body::ReadTags(ReadTagsRequest { names: Vec::new() }),
    )
    .await;
    let empty = raw.receive().await.expect("reply");
    assert_eq!(
        (empty.call_id, error_of(&empty).0),
        (3, ErrorCode::InvalidArgument)
    );
    server.stop().await;
}

#[tokio::test]
async fn graceful_shutdown_finishes_calls_in_flight_and_refuses_new_ones() {
    let solution = Solution::demo();
    open_chat_gates(&solution);
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let started = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let (on_start, on_release) = (Arc::clone(&started), Arc::clone(&release));
    server.runtime.local_ai().on_before_chat("hold", move |text| {
        let (on_start, on_release) = (Arc::clone(&on_start), Arc::clone(&on_release));
        async move {
            on_start.notify_one();
            on_release.notified().await;
            Ok(text)
        }
    });
    let mut raw = RawConnection::guest(server.addr).await;
    raw.send(1, chat("in flight")).await;
    started.notified().await;
    server.begin_shutdown();

    // New calls during the drain are refused, and new connections are not accepted.
    let refused = loop {
        raw.send(2, ping(1)).await;
        let reply = raw.receive().await.expect("a reply");
        if matches!(reply.body, Some(server_frame::Body::Error(_))) {
            break reply;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(error_of(&refused).0, ErrorCode::ShuttingDown);

    release.notify_one();
    let answered = raw.receive().await.expect("the call in flight is answered");
    assert_eq!(answered.call_id, 1);
    assert!(matches!(answered.body, Some(server_frame::Body::Chat(_))));
    let goodbye = raw.receive().await.expect("a reason before the close");
    assert_eq!(
        (goodbye.call_id, error_of(&goodbye).0),
        (0, ErrorCode::ShuttingDown)
    );
    assert!(raw.receive().await.is_none());
    server.stop().await;
}

#[tokio::test]
async fn shutdown_closes_calls_that_outlive_the_grace_period() {
    let solution = Solution::demo();
    open_chat_gates(&solution);
    let config = ServerConfig::default().with_shutdown_grace(Duration::from_millis(200));
    let server = TestServer::start(&solution.path, config).await;
    server.runtime.local_ai().on_before_chat("forever", |_text| {
        std::future::pending::<Result<String, String>>()
    });
    let client = server.guest().await;
    let pending = tokio::spawn({
        let client = client.clone();
        async move { client.chat("never answered").await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.stop().await;
    let outcome = pending.await.expect("join");
    assert!(
        matches!(outcome, Err(ClientError::ConnectionLost { .. })),
        "{outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_under_load_answers_every_accepted_turn() {
    use scripted_llm::{Reply, ScriptedLlm};
    use service_client::Status;

    const CLIENTS: usize = 16;
    const LOOPS_PER_CLIENT: usize = 8;
    // Enough scripted answers for every turn the load can start before shutdown.
    let llm = ScriptedLlm::start((0..5_000).map(|_| Reply::text("fine").after(Duration::from_millis(150))))
        .await
        .expect("llm");
    let solution = Solution::demo();
    open_chat_gates(&solution);
    let path = solution.path.to_str().expect("utf-8 path");
    admin(&["settings", path, "set", "URL", &llm.url()], "");
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;

    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..CLIENTS {
        let client = server.guest().await;
        for _ in 0..LOOPS_PER_CLIENT {
            let client = client.clone();
            loops.spawn(async move {
                let mut answered = 0usize;
                // Chat and ping until the server says it is going away; bounded in count.
                for round in 0..1_000u32 {
                    let outcome = if round % 2 == 0 {
                        client
                            .chat_envelope("load")
                            .await
                            .map(|envelope| Some(envelope.status))
                    } else {
                        client.ping().await.map(|_| None)
                    };
                    match outcome {
                        Ok(Some(Status::Ok)) => answered += 1,
                        Ok(Some(other)) => panic!("a turn ended {other:?}"),
                        Ok(None) => {}
                        Err(error) => {
                            return (answered, error.server_code().ok_or_else(|| error.to_string()));
                        }
                    }
                }
                (answered, Err("the loop ran out of rounds".to_owned()))
            });
        }
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    server.begin_shutdown();

    let mut answered = 0;
    while let Some(result) = loops.join_next().await {
        let (turns, ended_with) = result.expect("a load loop did not panic");
        answered += turns;
        assert_eq!(
            ended_with,
            Ok(ErrorCode::ShuttingDown),
            "every loop ends with the server's shutdown notice, never a lost call"
        );
    }
    server.stop().await;
    // Every turn that reached the model (the server accepted it and posted it) was answered.
    let posted = llm.requests().len();
    assert!(posted > CLIENTS, "the load ran: {posted} turns posted");
    assert_eq!(answered, posted, "an accepted turn lost its reply");
    llm.stop().await;
}

/// The display port's listen queue holds a plant's panels all connecting at once: its backlog
/// (what `ss` shows as a listening socket's Send-Q) is the kernel's cap, not the standard 128.
#[test]
fn the_display_port_queues_a_burst_of_connects() {
    let solution = crate::support::Solution::demo();
    let server = crate::support::ServerProcess::start(&solution.path, &[], &[]);
    let port = server.addr.port();
    let shown = std::process::Command::new("ss")
        .args(["-ltnH", &format!("sport = :{port}")])
        .output()
        .expect("ss runs (iproute2)");
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    let backlog: u32 = shown
        .split_whitespace()
        .nth(2)
        .and_then(|field| field.parse().ok())
        .unwrap_or_else(|| panic!("a listening socket's line: {shown:?}"));
    let cap: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .expect("the kernel's cap")
        .trim()
        .parse()
        .expect("a number");
    assert_eq!(backlog, tserver::LISTEN_BACKLOG.min(cap), "{shown}");
}
